/* The shared conformance scenario (tests/conformance/scenario.kvc, format in
 * tests/conformance/README.md) run against the C API. The Go, Java, Rust and Python bindings run
 * the same file through their own interpreters, so all of them agree with this suite.
 * tests/conformance/hybrid.kvc (hybrid pools: two more ops, pool_hybrid and group_table, README
 * "Hybrid scenario") is run by this suite alone until the bindings wrap kvc_pool_create_hybrid.
 * Compiled as C99. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <kvc/kvc.h>

#define MAX_KEYS 16
#define MAX_LINE 4096

typedef struct {
    char *key;
    char *value;
    int used; /* set when the op reads it: a key nobody reads is a typo in the scenario */
} kv_pair;

typedef struct {
    int line_no;
    char *op;
    kv_pair keys[MAX_KEYS];
    int num_keys;
} scenario_line;

/* A growable int64 list; the scenario's lists are short, so simplicity beats cleverness here. */
typedef struct {
    int64_t *v;
    int64_t n;
} i64_list;

static const char *g_file = "scenario.kvc"; /* the file being run, for messages */

static void fail_line(const scenario_line *l, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fail_msg("%s:%d (%s): %s", g_file, l->line_no, l->op, msg);
}

static const char *find_key(scenario_line *l, const char *key) {
    for (int i = 0; i < l->num_keys; i++) {
        if (strcmp(l->keys[i].key, key) == 0) {
            l->keys[i].used = 1;
            return l->keys[i].value;
        }
    }
    return NULL;
}

static int64_t parse_i64(const scenario_line *l, const char *key, const char *s) {
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0') fail_line(l, "%s=%s is not an integer", key, s);
    return (int64_t)v;
}

static uint64_t parse_u64(const scenario_line *l, const char *key, const char *s) {
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end != '\0' || s[0] == '-') fail_line(l, "%s=%s is not an id", key, s);
    return (uint64_t)v;
}

static int has_key(scenario_line *l, const char *key) { return find_key(l, key) != NULL; }

static int64_t need_i64(scenario_line *l, const char *key) {
    const char *s = find_key(l, key);
    if (!s) fail_line(l, "missing %s=", key);
    return parse_i64(l, key, s);
}

static uint64_t need_u64(scenario_line *l, const char *key) {
    const char *s = find_key(l, key);
    if (!s) fail_line(l, "missing %s=", key);
    return parse_u64(l, key, s);
}

/* "1,2,3" or "range:A:B" (A..B-1). */
static i64_list parse_list(scenario_line *l, const char *key, const char *s) {
    i64_list out = {NULL, 0};
    if (strncmp(s, "range:", 6) == 0) {
        char *end = NULL;
        long long a = strtoll(s + 6, &end, 10);
        if (*end != ':') fail_line(l, "bad range %s", s);
        long long b = strtoll(end + 1, &end, 10);
        if (*end != '\0' || b < a) fail_line(l, "bad range %s", s);
        out.n = (int64_t)(b - a);
        out.v = calloc((size_t)(out.n > 0 ? out.n : 1), sizeof *out.v);
        assert_non_null(out.v);
        for (int64_t i = 0; i < out.n; i++) out.v[i] = a + i;
        return out;
    }
    int64_t cap = 1;
    for (const char *p = s; *p; p++) cap += (*p == ',');
    out.v = calloc((size_t)cap, sizeof *out.v);
    assert_non_null(out.v);
    char *copy = strdup(s);
    assert_non_null(copy);
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        out.v[out.n++] = parse_i64(l, key, tok);
    free(copy);
    return out;
}

static i64_list need_list(scenario_line *l, const char *key) {
    const char *s = find_key(l, key);
    if (!s) fail_line(l, "missing %s=", key);
    return parse_list(l, key, s);
}

/* Token ids are int32 in the API. */
static int32_t *to_i32(const i64_list *list) {
    int32_t *out = calloc((size_t)(list->n > 0 ? list->n : 1), sizeof *out);
    assert_non_null(out);
    for (int64_t i = 0; i < list->n; i++) out[i] = (int32_t)list->v[i];
    return out;
}

static int status_from_name(const char *name) {
    static const struct {
        const char *name;
        int status;
    } names[] = {
        {"OK", KVC_OK},
        {"NULL_ARG", KVC_ERR_NULL_ARG},
        {"INVALID_ARG", KVC_ERR_INVALID_ARG},
        {"OVERFLOW", KVC_ERR_OVERFLOW},
        {"NO_MEMORY", KVC_ERR_NO_MEMORY},
        {"OUT_OF_BLOCKS", KVC_ERR_OUT_OF_BLOCKS},
        {"UNKNOWN_SEQ", KVC_ERR_UNKNOWN_SEQ},
        {"SEQ_EXISTS", KVC_ERR_SEQ_EXISTS},
        {"BUFFER_TOO_SMALL", KVC_ERR_BUFFER_TOO_SMALL},
        {"MAX_LEN", KVC_ERR_MAX_LEN},
        {"BUSY", KVC_ERR_BUSY},
        {"UNSUPPORTED", KVC_ERR_UNSUPPORTED},
        {"DEVICE", KVC_ERR_DEVICE},
        {"IO", KVC_ERR_IO},
        {"VERSION", KVC_ERR_VERSION},
        {"STATE", KVC_ERR_STATE},
        {"INTERNAL", KVC_ERR_INTERNAL},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(names[i].name, name) == 0) return names[i].status;
    return -1;
}

static int verdict_from_name(const char *name) {
    if (strcmp(name, "OK") == 0) return KVC_ALLOC_OK;
    if (strcmp(name, "LATER") == 0) return KVC_ALLOC_LATER;
    if (strcmp(name, "NEVER") == 0) return KVC_ALLOC_NEVER;
    return -1;
}

static void expect_i64(scenario_line *l, const char *key, int64_t actual) {
    const char *s = find_key(l, key);
    if (!s) return;
    int64_t want = parse_i64(l, key, s);
    if (want != actual)
        fail_line(l, "%s: expected %lld, got %lld", key, (long long)want, (long long)actual);
}

static void expect_list(scenario_line *l, const char *key, const int64_t *actual, int64_t n) {
    const char *s = find_key(l, key);
    if (!s) return;
    i64_list want = parse_list(l, key, s);
    int same = want.n == n;
    for (int64_t i = 0; same && i < n; i++) same = want.v[i] == actual[i];
    if (!same) {
        char got[1024] = "";
        size_t used = 0;
        for (int64_t i = 0; i < n && used < sizeof got - 24; i++)
            used += (size_t)snprintf(got + used, sizeof got - used, "%s%lld", i ? "," : "",
                                     (long long)actual[i]);
        fail_line(l, "%s: expected %s, got [%s]", key, s, got);
    }
    free(want.v);
}

/* The keys of lora/salt/priority/max_cached, or NULL when the line gives none (the API's
 * "no keys"). */
static kvc_keys *make_keys(scenario_line *l) {
    const char *lora = find_key(l, "lora");
    const char *salt = find_key(l, "salt");
    const char *priority = find_key(l, "priority");
    const char *max_cached = find_key(l, "max_cached");
    if (!lora && !salt && !priority && !max_cached) return NULL;
    kvc_keys *keys = NULL;
    assert_int_equal(kvc_keys_create(&keys), KVC_OK);
    if (lora) assert_int_equal(kvc_keys_set_lora(keys, parse_u64(l, "lora", lora)), KVC_OK);
    if (salt) assert_int_equal(kvc_keys_set_salt(keys, salt), KVC_OK);
    if (priority)
        assert_int_equal(kvc_keys_set_priority(keys, (int32_t)parse_i64(l, "priority", priority)),
                         KVC_OK);
    if (max_cached)
        assert_int_equal(
            kvc_keys_set_max_cached_tokens(keys, parse_i64(l, "max_cached", max_cached)), KVC_OK);
    return keys;
}

typedef struct {
    kvc_pool *pool;
} interp;

/* Runs one line; returns the status of its API call and compares outputs when it is KVC_OK. */
static int run_line(interp *in, scenario_line *l) {
    const char *op = l->op;
    int st = KVC_OK;
    if (strcmp(op, "pool") == 0) {
        kvc_pool_config cfg;
        assert_int_equal(kvc_pool_config_default(&cfg), KVC_OK);
        cfg.block_size = (int32_t)need_i64(l, "block_size");
        cfg.num_blocks = need_i64(l, "num_blocks");
        const char *wm = find_key(l, "watermark");
        if (!wm) fail_line(l, "missing watermark=");
        cfg.watermark = strtod(wm, NULL);
        cfg.prefix_caching = (int32_t)need_i64(l, "prefix_caching");
        if (has_key(l, "max_seq_len")) cfg.max_seq_len = need_i64(l, "max_seq_len");
        cfg.backend = KVC_BACKEND_NONE;
        kvc_pool *p = NULL;
        st = kvc_pool_create(&cfg, &p);
        if (st == KVC_OK) {
            kvc_pool_destroy(in->pool);
            in->pool = p;
        }
        return st;
    }
    if (strcmp(op, "pool_hybrid") == 0) {
        /* groups=KIND[:W],... with KIND FULL, SLIDING:W or SSM; one layer per group, layer i in
         * group i. */
        kvc_pool_config cfg;
        assert_int_equal(kvc_pool_config_default(&cfg), KVC_OK);
        cfg.block_size = (int32_t)need_i64(l, "block_size");
        cfg.num_blocks = need_i64(l, "num_blocks");
        const char *wm = find_key(l, "watermark");
        if (!wm) fail_line(l, "missing watermark=");
        cfg.watermark = strtod(wm, NULL);
        cfg.prefix_caching = (int32_t)need_i64(l, "prefix_caching");
        if (has_key(l, "max_seq_len")) cfg.max_seq_len = need_i64(l, "max_seq_len");
        cfg.backend = KVC_BACKEND_NONE;
        const char *spec = find_key(l, "groups");
        if (!spec) fail_line(l, "missing groups=");
        kvc_group_config groups[KVC_MAX_GROUPS];
        int32_t layer_to_group[KVC_MAX_GROUPS];
        int32_t n = 0;
        char *copy = strdup(spec);
        assert_non_null(copy);
        for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (n == KVC_MAX_GROUPS) fail_line(l, "too many groups");
            kvc_group_config *g = &groups[n];
            assert_int_equal(kvc_group_config_default(g), KVC_OK);
            g->head_dim = 8;
            if (strcmp(tok, "FULL") == 0) {
                g->kind = KVC_GROUP_FULL;
            } else if (strncmp(tok, "SLIDING:", 8) == 0) {
                g->kind = KVC_GROUP_SLIDING;
                g->sliding_window = (int32_t)parse_i64(l, "groups", tok + 8);
            } else if (strcmp(tok, "SSM") == 0) {
                g->kind = KVC_GROUP_SSM;
                g->state_bytes = 64;
            } else {
                fail_line(l, "unknown group %s", tok);
            }
            layer_to_group[n] = n;
            n++;
        }
        free(copy);
        kvc_pool *p = NULL;
        st = kvc_pool_create_hybrid(&cfg, groups, n, layer_to_group, n, &p);
        if (st == KVC_OK) {
            kvc_pool_destroy(in->pool);
            in->pool = p;
        }
        return st;
    }
    if (strcmp(op, "destroy") == 0) {
        st = kvc_pool_destroy(in->pool);
        in->pool = NULL;
        return st;
    }
    if (!in->pool) fail_line(l, "no pool");
    kvc_pool *pool = in->pool;

    if (strcmp(op, "alloc") == 0) {
        uint64_t seq = need_u64(l, "seq");
        i64_list t = need_list(l, "tokens");
        int32_t *tokens = to_i32(&t);
        kvc_keys *keys = make_keys(l);
        int64_t cached = -1;
        st = kvc_alloc(pool, seq, tokens, t.n, keys, &cached);
        if (st == KVC_OK) expect_i64(l, "cached", cached);
        kvc_keys_destroy(keys);
        free(tokens);
        free(t.v);
    } else if (strcmp(op, "can_alloc") == 0) {
        i64_list t = need_list(l, "tokens");
        int32_t *tokens = to_i32(&t);
        kvc_keys *keys = make_keys(l);
        int32_t verdict = -1;
        st = kvc_can_alloc(pool, tokens, t.n, keys, &verdict);
        const char *want = find_key(l, "verdict");
        if (st == KVC_OK && want) {
            int w = verdict_from_name(want);
            if (w < 0) fail_line(l, "unknown verdict %s", want);
            if (w != verdict) fail_line(l, "verdict: expected %s, got %d", want, verdict);
        }
        kvc_keys_destroy(keys);
        free(tokens);
        free(t.v);
    } else if (strcmp(op, "lookup") == 0) {
        i64_list t = need_list(l, "tokens");
        int32_t *tokens = to_i32(&t);
        kvc_keys *keys = make_keys(l);
        int64_t cached = -1;
        st = kvc_prefix_lookup(pool, tokens, t.n, keys, &cached);
        if (st == KVC_OK) expect_i64(l, "cached", cached);
        kvc_keys_destroy(keys);
        free(tokens);
        free(t.v);
    } else if (strcmp(op, "append") == 0) {
        uint64_t seq = need_u64(l, "seq");
        i64_list t = need_list(l, "tokens");
        int32_t *tokens = to_i32(&t);
        int64_t lookahead = has_key(l, "lookahead") ? need_i64(l, "lookahead") : 0;
        int32_t new_blocks = -1;
        st = kvc_append(pool, seq, tokens, t.n, lookahead, &new_blocks);
        if (st == KVC_OK) expect_i64(l, "new_blocks", new_blocks);
        free(tokens);
        free(t.v);
    } else if (strcmp(op, "truncate") == 0) {
        int32_t freed = -1;
        st = kvc_truncate(pool, need_u64(l, "seq"), need_i64(l, "num_tokens"), &freed);
        if (st == KVC_OK) expect_i64(l, "freed_blocks", freed);
    } else if (strcmp(op, "set_window") == 0) {
        st = kvc_pool_set_sliding_window(pool, (int32_t)need_i64(l, "window"));
    } else if (strcmp(op, "get_window") == 0) {
        int32_t window = -1;
        st = kvc_pool_get_sliding_window(pool, &window);
        if (st == KVC_OK) expect_i64(l, "window", window);
    } else if (strcmp(op, "fork") == 0) {
        st = kvc_fork(pool, need_u64(l, "parent"), need_u64(l, "child"));
    } else if (strcmp(op, "free") == 0) {
        st = kvc_free(pool, need_u64(l, "seq"));
    } else if (strcmp(op, "table") == 0) {
        uint64_t seq = need_u64(l, "seq");
        int64_t len = -1;
        st = kvc_seq_block_table(pool, seq, NULL, 0, &len);
        if (st == KVC_OK) {
            int32_t *blocks = calloc((size_t)(len > 0 ? len : 1), sizeof *blocks);
            int64_t *wide = calloc((size_t)(len > 0 ? len : 1), sizeof *wide);
            assert_non_null(blocks);
            assert_non_null(wide);
            int64_t len2 = -1;
            assert_int_equal(kvc_seq_block_table(pool, seq, blocks, len, &len2), KVC_OK);
            assert_int_equal(len2, len);
            for (int64_t i = 0; i < len; i++) wide[i] = blocks[i];
            expect_i64(l, "len", len);
            expect_list(l, "blocks", wide, len);
            free(blocks);
            free(wide);
        }
    } else if (strcmp(op, "group_table") == 0) {
        uint64_t seq = need_u64(l, "seq");
        int32_t group = (int32_t)need_i64(l, "group");
        int64_t len = -1;
        st = kvc_seq_group_block_table(pool, seq, group, NULL, 0, &len);
        if (st == KVC_OK) {
            int32_t *blocks = calloc((size_t)(len > 0 ? len : 1), sizeof *blocks);
            int64_t *wide = calloc((size_t)(len > 0 ? len : 1), sizeof *wide);
            assert_non_null(blocks);
            assert_non_null(wide);
            int64_t len2 = -1;
            assert_int_equal(kvc_seq_group_block_table(pool, seq, group, blocks, len, &len2), KVC_OK);
            assert_int_equal(len2, len);
            for (int64_t i = 0; i < len; i++) wide[i] = blocks[i];
            expect_i64(l, "len", len);
            expect_list(l, "blocks", wide, len);
            free(blocks);
            free(wide);
        }
    } else if (strcmp(op, "num_tokens") == 0) {
        int64_t n = -1;
        st = kvc_seq_num_tokens(pool, need_u64(l, "seq"), &n);
        if (st == KVC_OK) expect_i64(l, "value", n);
    } else if (strcmp(op, "slots") == 0) {
        uint64_t seq = need_u64(l, "seq");
        int64_t first = need_i64(l, "first");
        int64_t count = need_i64(l, "count");
        int64_t cap = count > 0 ? count : 0;
        int64_t *slots = calloc((size_t)(cap > 0 ? cap : 1), sizeof *slots);
        assert_non_null(slots);
        st = kvc_seq_slot_mapping(pool, seq, first, count, slots, cap);
        if (st == KVC_OK) expect_list(l, "values", slots, count);
        free(slots);
    } else if (strcmp(op, "pending_copies") == 0) {
        int64_t pending = -1;
        assert_int_equal(kvc_take_pending_copies(pool, NULL, NULL, 0, &pending), KVC_OK);
        int64_t cap = pending > 0 ? pending : 0;
        int32_t *src = calloc((size_t)(cap > 0 ? cap : 1), sizeof *src);
        int32_t *dst = calloc((size_t)(cap > 0 ? cap : 1), sizeof *dst);
        int64_t *wide_src = calloc((size_t)(cap > 0 ? cap : 1), sizeof *wide_src);
        int64_t *wide_dst = calloc((size_t)(cap > 0 ? cap : 1), sizeof *wide_dst);
        assert_true(src && dst && wide_src && wide_dst);
        int64_t count = -1;
        st = kvc_take_pending_copies(pool, src, dst, cap, &count);
        if (st == KVC_OK) {
            for (int64_t i = 0; i < count; i++) {
                wide_src[i] = src[i];
                wide_dst[i] = dst[i];
            }
            expect_i64(l, "count", count);
            expect_list(l, "src", wide_src, count);
            expect_list(l, "dst", wide_dst, count);
        }
        free(src);
        free(dst);
        free(wide_src);
        free(wide_dst);
    } else if (strcmp(op, "stats") == 0) {
        kvc_stats s;
        memset(&s, 0, sizeof s);
        s.struct_size = sizeof s;
        st = kvc_pool_stats(pool, &s);
        if (st == KVC_OK) {
            expect_i64(l, "free_blocks", s.free_blocks);
            expect_i64(l, "used_blocks", s.used_blocks);
            expect_i64(l, "num_seqs", s.num_seqs);
            expect_i64(l, "cow_copies", s.cow_copies);
            expect_i64(l, "prefix_hit_tokens", s.prefix_hit_tokens);
            expect_i64(l, "prefix_query_tokens", s.prefix_query_tokens);
            expect_i64(l, "cached_free_blocks", s.cached_free_blocks);
            expect_i64(l, "evictions", s.evictions);
            expect_i64(l, "allocs", s.allocs);
            expect_i64(l, "frees", s.frees);
        }
    } else if (strcmp(op, "check") == 0) {
        st = kvc_pool_check(pool);
    } else if (strcmp(op, "reset") == 0) {
        st = kvc_prefix_cache_reset(pool);
    } else {
        fail_line(l, "unknown op");
    }
    return st;
}

/* Splits one line in place into op and key=value pairs; returns 0 for blank/comment lines. */
static int split_line(char *text, int line_no, scenario_line *out) {
    char *hash = strchr(text, '#');
    if (hash) *hash = '\0';
    memset(out, 0, sizeof *out);
    out->line_no = line_no;
    char *save = NULL;
    for (char *tok = strtok_r(text, " \t\r\n", &save); tok; tok = strtok_r(NULL, " \t\r\n", &save)) {
        if (!out->op) {
            out->op = tok;
            continue;
        }
        char *eq = strchr(tok, '=');
        if (!eq) fail_line(out, "'%s' is not key=value", tok);
        if (out->num_keys == MAX_KEYS) fail_line(out, "too many keys");
        *eq = '\0';
        out->keys[out->num_keys].key = tok;
        out->keys[out->num_keys].value = eq + 1;
        out->num_keys++;
    }
    return out->op != NULL;
}

static void run_scenario(const char *name, int min_ops, int min_errors) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/conformance/%s", KVC_SOURCE_DIR, name);
    g_file = name;
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s", path);
    interp in = {NULL};
    char text[MAX_LINE];
    int line_no = 0, ops = 0, errors_expected = 0;
    while (fgets(text, sizeof text, f)) {
        line_no++;
        scenario_line l;
        if (!split_line(text, line_no, &l)) continue;
        const char *expect_name = find_key(&l, "expect");
        int want = expect_name ? status_from_name(expect_name) : KVC_OK;
        if (want < 0) fail_line(&l, "unknown status name %s", expect_name);
        int got = run_line(&in, &l);
        if (got != want)
            fail_line(&l, "status: expected %s, got %s (%s)", expect_name ? expect_name : "OK",
                      kvc_status_str(got), got == KVC_OK ? "" : kvc_last_error());
        if (got != KVC_OK && strlen(kvc_last_error()) == 0)
            fail_line(&l, "failed with %s but left no kvc_last_error() message", kvc_status_str(got));
        /* Keys of an op that failed as expected are not read; only check when it succeeded. */
        if (got == KVC_OK)
            for (int i = 0; i < l.num_keys; i++)
                if (!l.keys[i].used) fail_line(&l, "unknown key %s", l.keys[i].key);
        ops++;
        errors_expected += want != KVC_OK;
    }
    fclose(f);
    kvc_pool_destroy(in.pool);
    /* The scenario is not allowed to shrink to nothing (or lose its error cases) unnoticed. */
    assert_true(ops >= min_ops);
    assert_true(errors_expected >= min_errors);
    print_message("conformance %s: %d operations, %d expected errors\n", name, ops, errors_expected);
}

static void test_conformance_scenario(void **state) {
    (void)state;
    run_scenario("scenario.kvc", 100, 15);
}

/* Hybrid pools (kvc_pool_create_hybrid): the C suite's own file (README, "Hybrid scenario"). */
static void test_conformance_hybrid(void **state) {
    (void)state;
    run_scenario("hybrid.kvc", 60, 4);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conformance_scenario),
        cmocka_unit_test(test_conformance_hybrid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
