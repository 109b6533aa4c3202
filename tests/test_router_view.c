/* What a KV-aware router reads without a pool or beside one: kvc_hash_blocks (checked against the
 * shared vectors of tests/conformance/hash_vectors.txt and against the hashes a pool reports in its
 * KV events, on the prompt path and the decode path) and kvc_stats.cached_blocks_total; and a
 * router fed by nothing but the device KV events and kvc_hash_blocks predicting kvc_prefix_lookup
 * exactly while blocks of equal content (copies of one hash) come and go. */
#include <stdlib.h>

#include "test_pool_helpers.h"

enum { MAX_TOKENS = 64, MAX_MM = 4, MAX_BLOCKS = 64, MAX_VECTORS = 64 };

typedef struct vector {
    int line;
    int32_t block_size;
    int32_t tokens[MAX_TOKENS];
    int64_t num_tokens;
    uint64_t lora;
    char salt[KVC_MAX_SALT_LEN + 1];
    uint64_t mm[MAX_MM][4]; /* hi, lo, offset, length */
    int num_mm;
    int64_t count;
    uint64_t hi[MAX_BLOCKS], lo[MAX_BLOCKS];
} vector;

static vector g_vectors[MAX_VECTORS];
static int g_num_vectors;

/* ---- hash_vectors.txt (format: its header comment) ------------------------------------------- */

static void parse_hash(const char *text, uint64_t *hi, uint64_t *lo) {
    char half[17] = {0};
    if (strspn(text, "0123456789abcdef") < 32) fail_msg("bad hash %.40s", text);
    memcpy(half, text, 16);
    *hi = strtoull(half, NULL, 16);
    memcpy(half, text + 16, 16);
    *lo = strtoull(half, NULL, 16);
}

static void parse_tokens(vector *v, const char *text) {
    long a, b;
    if (sscanf(text, "range:%ld:%ld", &a, &b) == 2) {
        for (long t = a; t < b; ++t) v->tokens[v->num_tokens++] = (int32_t)t;
        return;
    }
    for (const char *p = text; *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) {
        assert_true(v->num_tokens < MAX_TOKENS);
        v->tokens[v->num_tokens++] = (int32_t)strtol(p, NULL, 10);
    }
}

static void parse_mm(vector *v, const char *text) {
    for (const char *p = text; *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) {
        assert_true(v->num_mm < MAX_MM);
        uint64_t *m = v->mm[v->num_mm++];
        parse_hash(p, &m[0], &m[1]);
        if (sscanf(p + 32, ":%lu:%lu", &m[2], &m[3]) != 2) fail_msg("bad mm item %s", p);
    }
}

static void parse_hashes(vector *v, const char *text) {
    int64_t n = 0;
    for (const char *p = text; *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) {
        assert_true(n < MAX_BLOCKS);
        parse_hash(p, &v->hi[n], &v->lo[n]);
        ++n;
    }
}

static void parse_pair(vector *v, const char *key, const char *val) {
    if (strcmp(key, "block_size") == 0) v->block_size = (int32_t)atoi(val);
    else if (strcmp(key, "tokens") == 0) parse_tokens(v, val);
    else if (strcmp(key, "lora") == 0) v->lora = strtoull(val, NULL, 10);
    else if (strcmp(key, "salt") == 0) snprintf(v->salt, sizeof v->salt, "%s", val);
    else if (strcmp(key, "mm") == 0) parse_mm(v, val);
    else if (strcmp(key, "count") == 0) v->count = atoll(val);
    else if (strcmp(key, "hashes") == 0) parse_hashes(v, val);
    else fail_msg("line %d: unknown key %s", v->line, key);
}

static int load_vectors(void **state) {
    (void)state;
    FILE *f = fopen(KVC_SOURCE_DIR "/tests/conformance/hash_vectors.txt", "r");
    if (!f) return -1;
    char line[4096];
    for (int n = 1; fgets(line, sizeof line, f); ++n) {
        line[strcspn(line, "#\n")] = '\0';
        char *save = NULL, *op = strtok_r(line, " \t", &save);
        if (!op) continue;
        if (strcmp(op, "vector") != 0 || g_num_vectors == MAX_VECTORS) return -1;
        vector *v = &g_vectors[g_num_vectors++];
        v->line = n;
        for (char *kv = strtok_r(NULL, " \t", &save); kv; kv = strtok_r(NULL, " \t", &save)) {
            char *eq = strchr(kv, '=');
            if (!eq) return -1;
            *eq = '\0';
            parse_pair(v, kv, eq + 1);
        }
    }
    fclose(f);
    return g_num_vectors > 0 ? 0 : -1;
}

static kvc_keys *vector_keys(const vector *v) {
    kvc_keys *k = NULL;
    OK(kvc_keys_create(&k));
    OK(kvc_keys_set_lora(k, v->lora));
    OK(kvc_keys_set_salt(k, v->salt));
    for (int i = 0; i < v->num_mm; ++i)
        OK(kvc_keys_add_mm(k, v->mm[i][0], v->mm[i][1], (int64_t)v->mm[i][2], (int64_t)v->mm[i][3]));
    return k;
}

/* ---- kvc_hash_blocks against the vectors ------------------------------------------------------ */

static void test_vectors(void **state) {
    (void)state;
    for (int i = 0; i < g_num_vectors; ++i) {
        const vector *v = &g_vectors[i];
        kvc_keys *k = vector_keys(v);
        uint64_t hi[MAX_BLOCKS], lo[MAX_BLOCKS];
        int64_t n = -1;
        OK(kvc_hash_blocks(v->block_size, k, v->tokens, v->num_tokens, hi, lo, MAX_BLOCKS, &n));
        if (n != v->count) fail_msg("line %d: %lld blocks, expected %lld", v->line, (long long)n, (long long)v->count);
        for (int64_t b = 0; b < n; ++b)
            if (hi[b] != v->hi[b] || lo[b] != v->lo[b])
                fail_msg("line %d block %lld: %016llx%016llx, expected %016llx%016llx", v->line, (long long)b,
                         (unsigned long long)hi[b], (unsigned long long)lo[b], (unsigned long long)v->hi[b],
                         (unsigned long long)v->lo[b]);
        OK(kvc_keys_destroy(k));
    }
}

/* ---- kvc_hash_blocks against a pool's KV events ----------------------------------------------- */

static kvc_pool *events_pool(int32_t block_size) {
    kvc_pool_config c;
    OK(kvc_pool_config_default(&c));
    c.block_size = block_size;
    c.num_blocks = 2 * MAX_TOKENS;
    c.watermark = 0.0;
    kvc_pool *p = NULL;
    OK(kvc_pool_create(&c, &p));
    return p;
}

/* Pops the pool's pending BLOCK_STORED events; each must chain onto the previous one (the root
 * for the first) and equal the next of the expected hashes. Returns how many it popped. */
static int64_t expect_stored_events(kvc_pool *p, const vector *v, const uint64_t *hi, const uint64_t *lo) {
    int32_t toks[MAX_TOKENS], has = 1;
    int64_t n = 0;
    for (;;) {
        kvc_event e = {.struct_size = sizeof(kvc_event)};
        OK(kvc_event_pop(p, &e, toks, MAX_TOKENS, &has));
        if (!has) return n;
        assert_int_equal(e.type, KVC_EVENT_BLOCK_STORED);
        if (n > 0) {
            assert_true(e.parent_hash_hi == hi[n - 1] && e.parent_hash_lo == lo[n - 1]);
        }
        if (e.hash_hi != hi[n] || e.hash_lo != lo[n])
            fail_msg("line %d block %lld: the pool stored %016llx%016llx, kvc_hash_blocks gives %016llx%016llx",
                     v->line, (long long)n, (unsigned long long)e.hash_hi, (unsigned long long)e.hash_lo,
                     (unsigned long long)hi[n], (unsigned long long)lo[n]);
        assert_memory_equal(toks, v->tokens + n * v->block_size, (size_t)v->block_size * sizeof(int32_t));
        ++n;
    }
}

/* The prompt path (kvc_alloc of the whole prompt) and the decode path (kvc_alloc of its first
 * token, kvc_append of the others one by one) both store exactly kvc_hash_blocks' hashes. */
static void test_pool_events_equal_hash_blocks(void **state) {
    (void)state;
    for (int i = 0; i < g_num_vectors; ++i) {
        const vector *v = &g_vectors[i];
        kvc_keys *k = vector_keys(v);
        uint64_t hi[MAX_BLOCKS], lo[MAX_BLOCKS];
        int64_t n = 0;
        OK(kvc_hash_blocks(v->block_size, k, v->tokens, v->num_tokens, hi, lo, MAX_BLOCKS, &n));

        kvc_pool *p = events_pool(v->block_size);
        OK(kvc_alloc(p, 1, v->tokens, v->num_tokens, k, NULL));
        assert_int_equal(expect_stored_events(p, v, hi, lo), n);
        OK(kvc_pool_destroy(p));

        p = events_pool(v->block_size);
        OK(kvc_alloc(p, 1, v->tokens, 1, k, NULL));
        for (int64_t t = 1; t < v->num_tokens; ++t) OK(kvc_append(p, 1, v->tokens + t, 1, 0, NULL));
        assert_int_equal(expect_stored_events(p, v, hi, lo), n);
        OK(kvc_pool_destroy(p));
        OK(kvc_keys_destroy(k));
    }
}

/* Priority and the hit cap are request settings, not content: they change no hash. */
static void test_priority_and_cap_change_nothing(void **state) {
    (void)state;
    const vector *v = &g_vectors[g_num_vectors - 1];
    kvc_keys *k = vector_keys(v);
    OK(kvc_keys_set_priority(k, KVC_PRIORITY_MAX));
    OK(kvc_keys_set_max_cached_tokens(k, 0));
    uint64_t hi[MAX_BLOCKS], lo[MAX_BLOCKS];
    int64_t n = 0;
    OK(kvc_hash_blocks(v->block_size, k, v->tokens, v->num_tokens, hi, lo, MAX_BLOCKS, &n));
    assert_int_equal(n, v->count);
    assert_memory_equal(hi, v->hi, (size_t)n * sizeof(uint64_t));
    assert_memory_equal(lo, v->lo, (size_t)n * sizeof(uint64_t));
    OK(kvc_keys_destroy(k));
}

static void test_sizes(void **state) {
    (void)state;
    const int32_t t[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    uint64_t hi[4] = {0}, lo[4] = {0};
    int64_t n = -1;
    OK(kvc_hash_blocks(4, NULL, t, 10, NULL, NULL, 0, &n)); /* size query */
    assert_int_equal(n, 2);
    n = -1;
    assert_int_equal(kvc_hash_blocks(4, NULL, t, 10, hi, lo, 1, &n), KVC_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(n, 2); /* the required count; the arrays untouched */
    assert_true(hi[0] == 0 && lo[0] == 0);
    OK(kvc_hash_blocks(4, NULL, NULL, 0, NULL, NULL, 0, &n)); /* an empty prompt has no block */
    assert_int_equal(n, 0);
    OK(kvc_hash_blocks(4, NULL, t, 3, hi, lo, 4, &n));
    assert_int_equal(n, 0);
    OK(kvc_hash_blocks(4, NULL, t, 10, hi, lo, 4, &n));
    assert_int_equal(n, 2);
    assert_true(hi[0] == g_vectors[0].hi[0] && lo[1] == g_vectors[0].lo[1]); /* vector 0: range:0:10 */
}

/* ---- kvc_stats.cached_blocks_total ------------------------------------------------------------------- */

/* Every cached block counts, held or free; a router fed by the device events holds as many. */
static void test_cached_blocks_total(void **state) {
    (void)state;
    kvc_pool *p = events_pool(4);
    const int32_t t[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    OK(kvc_alloc(p, 1, t, 10, NULL, NULL));
    kvc_stats s = stats_of(p);
    assert_int_equal(s.cached_blocks_total, 2);
    assert_int_equal(s.cached_free_blocks, 0);
    OK(kvc_append(p, 1, t, 2, 0, NULL)); /* fills block 2 */
    assert_int_equal(stats_of(p).cached_blocks_total, 3);
    OK(kvc_free(p, 1));
    s = stats_of(p);
    assert_int_equal(s.cached_blocks_total, 3);
    assert_int_equal(s.cached_free_blocks, 3);
    OK(kvc_prefix_cache_reset(p));
    assert_int_equal(stats_of(p).cached_blocks_total, 0);
    OK(kvc_pool_destroy(p));
}

/* A caller built before cached_blocks_total was appended passes the shorter struct_size: it gets every
 * field it knows, and nothing past them is written. */
static void test_stats_before_cached_blocks_total(void **state) {
    (void)state;
    kvc_pool *p = events_pool(4);
    const int32_t t[8] = {0};
    OK(kvc_alloc(p, 1, t, 8, NULL, NULL));
    kvc_stats s;
    memset(&s, 0xAB, sizeof s);
    s.struct_size = offsetof(kvc_stats, cached_blocks_total);
    OK(kvc_pool_stats(p, &s));
    assert_int_equal(s.num_seqs, 1);
    int64_t tail;
    memset(&tail, 0xAB, sizeof tail);
    assert_memory_equal(&s.cached_blocks_total, &tail, sizeof tail);
    s.struct_size = offsetof(kvc_stats, cached_blocks_total) - 1;
    assert_int_equal(kvc_pool_stats(p, &s), KVC_ERR_VERSION);
    OK(kvc_pool_destroy(p));
}

/* ---- An event-fed router predicts kvc_prefix_lookup ------------------------------------------ */

enum { RV_BS = 4, RV_BLOCKS = 24, RV_SEQS = 6, RV_MAXT = 48, RV_FAMILIES = 3 };

/* The router's whole state: per device block id, the hash its latest BLOCK_STORED named (valid
 * until its BLOCK_REMOVED). A hash is cached while any block holds it: copies count one by one. */
typedef struct rv_router {
    int used[RV_BLOCKS];
    uint64_t hi[RV_BLOCKS], lo[RV_BLOCKS];
    uint64_t next_seq;
} rv_router;

static void rv_drain(kvc_pool *p, rv_router *r) {
    for (;;) {
        kvc_event e = {.struct_size = sizeof(kvc_event)};
        int32_t toks[RV_BS], has = 0;
        OK(kvc_event_pop(p, &e, toks, RV_BS, &has));
        if (!has) return;
        assert_int_equal(e.sequence_number, r->next_seq++); /* nothing dropped */
        if (e.type == KVC_EVENT_ALL_BLOCKS_CLEARED) {
            memset(r->used, 0, sizeof r->used);
            continue;
        }
        assert_true(e.block_id >= 0 && e.block_id < RV_BLOCKS);
        if (e.type == KVC_EVENT_BLOCK_STORED) {
            assert_false(r->used[e.block_id]);
            r->used[e.block_id] = 1;
            r->hi[e.block_id] = e.hash_hi;
            r->lo[e.block_id] = e.hash_lo;
        } else {
            assert_int_equal(e.type, KVC_EVENT_BLOCK_REMOVED);
            assert_true(r->used[e.block_id] && r->hi[e.block_id] == e.hash_hi && r->lo[e.block_id] == e.hash_lo);
            r->used[e.block_id] = 0;
        }
    }
}

static int rv_has(const rv_router *r, uint64_t hi, uint64_t lo) {
    for (int b = 0; b < RV_BLOCKS; ++b)
        if (r->used[b] && r->hi[b] == hi && r->lo[b] == lo) return 1;
    return 0;
}

/* The router's prediction: the leading run of the prompt's block hashes it holds, at most
 * num_tokens - 1 tokens (the last one is always computed) and at most the pool's block count. */
static int64_t rv_predict(const rv_router *r, const int32_t *t, int64_t n) {
    uint64_t hi[RV_MAXT], lo[RV_MAXT];
    int64_t count = 0, run = 0;
    OK(kvc_hash_blocks(RV_BS, NULL, t, n, hi, lo, RV_MAXT, &count));
    const int64_t cap = (n - 1) / RV_BS < RV_BLOCKS ? (n - 1) / RV_BS : RV_BLOCKS;
    while (run < cap && rv_has(r, hi[run], lo[run])) ++run;
    return run * RV_BS;
}

static int64_t rv_count(const rv_router *r) {
    int64_t n = 0;
    for (int b = 0; b < RV_BLOCKS; ++b) n += r->used[b];
    return n;
}

/* Token i of family f's text: every sequence of a family reads and decodes the same text, so equal
 * blocks (copies) arise all the time: re-runs of a prompt, sequences decoding alike, a family's
 * prompts of different lengths. */
static int32_t rv_token(int f, int64_t i) { return (int32_t)(f * 1000 + i); }


static void test_router_predicts_lookups_with_copies(void **state) {
    (void)state;
    kvc_pool_config c;
    OK(kvc_pool_config_default(&c));
    c.block_size = RV_BS;
    c.num_blocks = RV_BLOCKS;
    c.watermark = 0.0;
    kvc_pool *p = NULL;
    OK(kvc_pool_create(&c, &p));
    rv_router r;
    memset(&r, 0, sizeof r);
    int live[RV_SEQS] = {0}, fam[RV_SEQS] = {0};
    int64_t len[RV_SEQS] = {0};
    uint64_t rng = 23;
    int64_t copies_seen = 0, probes = 0, hits = 0;
    for (int step = 0; step < 4000; ++step) {
        const int s = (int)(test_lcg_next(&rng) % RV_SEQS);
        const uint64_t op = test_lcg_next(&rng) % 10;
        int32_t t[RV_MAXT + 1];
        if (!live[s]) {
            fam[s] = (int)(test_lcg_next(&rng) % RV_FAMILIES);
            const int64_t n = 1 + (int64_t)(test_lcg_next(&rng) % 24);
            for (int64_t i = 0; i < n; ++i) t[i] = rv_token(fam[s], i);
            if (kvc_alloc(p, (uint64_t)s, t, n, NULL, NULL) == KVC_OK) {
                live[s] = 1;
                len[s] = n;
            }
        } else if (op < 5 && len[s] < RV_MAXT) { /* decode the family's text */
            t[0] = rv_token(fam[s], len[s]);
            if (kvc_append(p, (uint64_t)s, t, 1, 0, NULL) == KVC_OK) ++len[s];
        } else if (op == 5 && len[s] > 1) { /* a rejected draft: back to an earlier length */
            len[s] -= 1 + (int64_t)(test_lcg_next(&rng) % (uint64_t)(len[s] - 1));
            OK(kvc_truncate(p, (uint64_t)s, len[s], NULL));
        } else if (op == 6) {
            const int d = (s + 1) % RV_SEQS;
            if (!live[d] && kvc_fork(p, (uint64_t)s, (uint64_t)d) == KVC_OK) {
                live[d] = 1;
                fam[d] = fam[s];
                len[d] = len[s];
            }
        } else if (op == 7) {
            OK(kvc_abort(p, (uint64_t)s));
            live[s] = 0;
        } else {
            OK(kvc_free(p, (uint64_t)s));
            live[s] = 0;
        }
        rv_drain(p, &r);
        kvc_stats st = stats_of(p);
        assert_int_equal(rv_count(&r), st.cached_blocks_total);
        /* Copies in the pool: cached blocks beyond the distinct hashes the router holds. */
        int64_t distinct = 0;
        for (int b = 0; b < RV_BLOCKS; ++b) {
            if (!r.used[b]) continue;
            int first = 1;
            for (int e = 0; e < b; ++e) first = first && !(r.used[e] && r.hi[e] == r.hi[b] && r.lo[e] == r.lo[b]);
            distinct += first;
        }
        copies_seen += rv_count(&r) - distinct;
        for (int f = 0; f < RV_FAMILIES; ++f) { /* every prefix length of every family */
            for (int64_t n = 1; n <= RV_MAXT; n += 1 + (int64_t)(test_lcg_next(&rng) % 4)) {
                for (int64_t i = 0; i < n; ++i) t[i] = rv_token(f, i);
                int64_t got = -1;
                OK(kvc_prefix_lookup(p, t, n, NULL, &got));
                const int64_t want = rv_predict(&r, t, n);
                if (got != want)
                    fail_msg("step %d family %d length %lld: kvc_prefix_lookup %lld, the router predicts %lld", step, f,
                             (long long)n, (long long)got, (long long)want);
                ++probes;
                hits += got > 0;
            }
        }
        if (step % 100 == 0) OK(kvc_pool_check(p));
    }
    /* The run did what it is for: copies existed, lookups hit. */
    assert_true(copies_seen > 1000);
    assert_true(hits > probes / 4);
    OK(kvc_pool_destroy(p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_pool_events_equal_hash_blocks),
        cmocka_unit_test(test_priority_and_cap_change_nothing),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_cached_blocks_total),
        cmocka_unit_test(test_stats_before_cached_blocks_total),
        cmocka_unit_test(test_router_predicts_lookups_with_copies),
    };
    return cmocka_run_group_tests(tests, load_vectors, NULL);
}
