/* Randomized operation sequences against tiny pools, with the invariant checker after every
 * operation and a shadow model of every sequence's length and reservation. Seeded: deterministic. */
#include <stdlib.h>

#include "test_pool_helpers.h"

#define MAX_SEQS 48
#define MAX_TOK 160

typedef struct {
    uint64_t id;
    int64_t num_tokens;
    int64_t reserved_end;
    int32_t tokens[MAX_TOK];
} shadow_seq;

typedef struct {
    int32_t tokens[MAX_TOK];
    int64_t n;
} pinned_prompt;

static uint64_t rng_state;
static uint32_t rnd(uint32_t n) { /* xorshift64*, uniform enough for n << 2^32 */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 2685821657736338717ull) >> 33) % n;
}

/* Prompts share family prefixes so that prefix hits, duplicates and evictions all happen. */
static int64_t make_prompt(int32_t *t) {
    int64_t n = 1 + rnd(48);
    int32_t family = (int32_t)rnd(4);
    int64_t diverge = rnd(3) == 0 ? (int64_t)rnd((uint32_t)n + 1) : n;
    for (int64_t i = 0; i < n; ++i) t[i] = i < diverge ? family * 1000 + (int32_t)i : (int32_t)rnd(50);
    return n;
}

static int64_t blocks_for(int64_t tokens, int32_t bs) { return tokens <= 0 ? 0 : (tokens - 1) / bs + 1; }

static void expect_unchanged_failure(kvc_pool *p, const kvc_stats *before, kvc_status st, kvc_status allowed,
                                     const char *what) {
    if (st != allowed) {
        print_error("%s -> %s: %s\n", what, kvc_status_str(st), kvc_last_error());
        fail();
    }
    kvc_stats after = stats_of(p);
    assert_memory_equal(before, &after, sizeof after);
}

static void run_random(uint64_t seed, int32_t bs, int64_t num_blocks, int caching, int32_t event_cap, int ops) {
    rng_state = seed;
    kvc_pool *p = make_pool_ex(bs, num_blocks, caching, 0.0, MAX_TOK, event_cap);
    static shadow_seq seqs[MAX_SEQS];
    static pinned_prompt pins[8];
    int nseq = 0, npins = 0;
    uint64_t next_id = 1, next_event = 0, event_gaps = 0;
    int64_t successes = 0, hits_seen = 0;

    for (int op = 0; op < ops; ++op) {
        kvc_stats before = stats_of(p);
        uint32_t kind = rnd(100);
        if (kind < 25 && nseq < MAX_SEQS) { /* alloc */
            shadow_seq *s = &seqs[nseq];
            int64_t n = make_prompt(s->tokens);
            int64_t looked = -1, cached = -1;
            OK(kvc_prefix_lookup(p, s->tokens, n, NULL, &looked));
            int32_t verdict = -1;
            OK(kvc_can_alloc(p, s->tokens, n, NULL, &verdict));
            kvc_status st = kvc_alloc(p, next_id, s->tokens, n, NULL, &cached);
            if (st == KVC_OK) {
                assert_int_not_equal(verdict, KVC_ALLOC_NEVER);
                assert_int_equal(cached, looked);
                assert_true(cached <= n - 1 && cached % bs == 0);
                hits_seen += cached;
                s->id = next_id++;
                s->num_tokens = s->reserved_end = n;
                ++nseq;
                ++successes;
            } else {
                assert_int_not_equal(verdict, KVC_ALLOC_OK); /* watermark 0: OK means it fits */
                expect_unchanged_failure(p, &before, st, KVC_ERR_OUT_OF_BLOCKS, "alloc");
            }
        } else if (kind < 54 && nseq > 0) { /* append, sometimes with lookahead */
            shadow_seq *s = &seqs[rnd((uint32_t)nseq)];
            int64_t n = rnd(6);
            int64_t la = rnd(4) == 0 ? rnd(4) : 0;
            if (n == 0 && la == 0) n = 1;
            int32_t add[8];
            for (int64_t i = 0; i < n; ++i) add[i] = (int32_t)rnd(50);
            int32_t nb = -1;
            kvc_status st = kvc_append(p, s->id, add, n, la, &nb);
            if (s->num_tokens + n + la > MAX_TOK) {
                expect_unchanged_failure(p, &before, st, KVC_ERR_MAX_LEN, "append past max");
            } else if (st == KVC_OK) {
                int64_t old_blocks = blocks_for(s->reserved_end, bs);
                for (int64_t i = 0; i < n; ++i) s->tokens[s->num_tokens + i] = add[i];
                s->num_tokens += n;
                if (s->num_tokens + la > s->reserved_end) s->reserved_end = s->num_tokens + la;
                kvc_stats after = stats_of(p);
                assert_int_equal(nb, blocks_for(s->reserved_end, bs) - old_blocks + (after.cow_copies - before.cow_copies));
                ++successes;
            } else {
                expect_unchanged_failure(p, &before, st, KVC_ERR_OUT_OF_BLOCKS, "append");
            }
        } else if (kind < 60 && nseq > 0) { /* truncate: roll back a few tokens, now and then further */
            shadow_seq *s = &seqs[rnd((uint32_t)nseq)];
            const int64_t back = rnd(4) == 0 ? (int64_t)rnd((uint32_t)s->num_tokens) : (int64_t)rnd(3);
            const int64_t n = s->num_tokens - back > 0 ? s->num_tokens - back : 1;
            int32_t freed = -1;
            OK(kvc_truncate(p, s->id, n, &freed));
            assert_int_equal(freed, blocks_for(s->reserved_end, bs) - blocks_for(n, bs));
            s->num_tokens = s->reserved_end = n;
            ++successes;
        } else if (kind < 70 && nseq > 0 && nseq < MAX_SEQS) { /* fork */
            shadow_seq *parent = &seqs[rnd((uint32_t)nseq)];
            OK(kvc_fork(p, parent->id, next_id));
            seqs[nseq] = *parent;
            seqs[nseq].id = next_id++;
            ++nseq;
            ++successes;
        } else if (kind < 88 && nseq > 0) { /* free */
            int idx = (int)rnd((uint32_t)nseq);
            OK(kvc_free(p, seqs[idx].id));
            EXPECT_ERR(kvc_free(p, seqs[idx].id), KVC_ERR_UNKNOWN_SEQ);
            seqs[idx] = seqs[--nseq];
            ++successes;
        } else if (kind < 92) { /* drain some copy-on-write pairs */
            int32_t src[4], dst[4];
            int64_t got = 0;
            OK(kvc_take_pending_copies(p, src, dst, 1 + rnd(4), &got));
            for (int64_t i = 0; i < got; ++i) {
                assert_true(src[i] >= 0 && src[i] < num_blocks && dst[i] >= 0 && dst[i] < num_blocks);
                assert_int_not_equal(src[i], dst[i]);
            }
        } else if (kind < 96 && caching) { /* pin a fully cached prompt (LIFO), or pin+unpin */
            if (npins < 8 && rnd(2)) {
                pinned_prompt *pp = &pins[npins];
                pp->n = make_prompt(pp->tokens);
                int64_t pinned = -1, unpinned = -1;
                OK(kvc_prefix_pin(p, pp->tokens, pp->n, NULL, &pinned));
                if (pinned == (pp->n / bs) * bs && pinned > 0) {
                    ++npins;
                } else if (pinned > 0) {
                    OK(kvc_prefix_unpin(p, pp->tokens, pp->n, NULL, &unpinned));
                    assert_true(unpinned >= pinned);
                }
            } else if (npins > 0) {
                pinned_prompt *pp = &pins[--npins];
                int64_t unpinned = -1;
                OK(kvc_prefix_unpin(p, pp->tokens, pp->n, NULL, &unpinned));
                assert_int_equal(unpinned, (pp->n / bs) * bs);
            }
        } else if (caching) { /* drain events */
            kvc_event ev;
            memset(&ev, 0, sizeof ev);
            ev.struct_size = sizeof ev;
            int32_t toks[64];
            int32_t has = 1;
            for (int k = 0; k < 4 && has; ++k) {
                OK(kvc_event_pop(p, &ev, toks, 64, &has));
                if (has) {
                    assert_true(ev.sequence_number >= next_event);
                    event_gaps += ev.sequence_number - next_event;
                    next_event = ev.sequence_number + 1;
                }
            }
        }
        CHECK_POOL(p);
        /* Shadow model agrees with the pool. */
        if (nseq > 0) {
            shadow_seq *s = &seqs[rnd((uint32_t)nseq)];
            assert_int_equal(num_tokens_of(p, s->id), s->num_tokens);
            int32_t table[MAX_TOK];
            int64_t len = table_of(p, s->id, table, MAX_TOK);
            assert_int_equal(len, blocks_for(s->reserved_end, bs));
            if (s->reserved_end > 0) {
                int64_t pos = rnd((uint32_t)s->reserved_end), slot = -1;
                OK(kvc_seq_slot_mapping(p, s->id, pos, 1, &slot, 1));
                assert_int_equal(slot, (int64_t)table[pos / bs] * bs + pos % bs);
            }
        }
        kvc_stats now = stats_of(p);
        assert_int_equal(now.num_seqs, nseq);
        assert_true(now.free_blocks + now.used_blocks <= now.total_blocks);
    }
    while (npins > 0) {
        pinned_prompt *pp = &pins[--npins];
        OK(kvc_prefix_unpin(p, pp->tokens, pp->n, NULL, NULL));
    }
    while (nseq > 0) OK(kvc_free(p, seqs[--nseq].id));
    CHECK_POOL(p);
    kvc_stats end = stats_of(p);
    assert_int_equal(end.free_blocks, num_blocks);
    assert_int_equal(end.pinned_blocks, 0);
    assert_true(event_gaps <= (uint64_t)end.events_dropped);
    print_message("seed %llx: %lld ok ops, %lld allocs, %lld appends, %lld forks, %lld cow, %lld hit tokens, "
                  "%lld evictions, %lld events dropped\n", (unsigned long long)seed, (long long)successes,
                  (long long)end.allocs, (long long)end.appends, (long long)end.forks, (long long)end.cow_copies,
                  (long long)end.prefix_hit_tokens, (long long)end.evictions, (long long)end.events_dropped);
    assert_true(successes > ops / 2); /* the mix really exercised the pool */
    assert_true(end.cow_copies > 0);
    if (caching) assert_true(hits_seen > 0 && end.evictions > 0);
    OK(kvc_prefix_cache_reset(p));
    CHECK_POOL(p);
    assert_int_equal(stats_of(p).cached_free_blocks, 0);
    OK(kvc_pool_destroy(p));
}

static void test_random_bs4_caching(void **state) { (void)state; run_random(0x1234567ull, 4, 24, 1, 4096, 5000); }
static void test_random_bs1_caching(void **state) { (void)state; run_random(0xabcdefull, 1, 150, 1, 4096, 4000); }
static void test_random_bs3_tiny_event_ring(void **state) { (void)state; run_random(0x5eedull, 3, 30, 1, 8, 4000); }
static void test_random_bs4_no_caching(void **state) { (void)state; run_random(0x777ull, 4, 16, 0, 0, 5000); }
static void test_random_bs16_caching(void **state) { (void)state; run_random(0x42ull, 16, 12, 1, 64, 3000); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_bs4_caching),
        cmocka_unit_test(test_random_bs1_caching),
        cmocka_unit_test(test_random_bs3_tiny_event_ring),
        cmocka_unit_test(test_random_bs4_no_caching),
        cmocka_unit_test(test_random_bs16_caching),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
