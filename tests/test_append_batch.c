/* kvc_append_batch and kvc_admit: the scheduler's batched calls do exactly what the single calls
 * they stand for do.
 *  - Random workloads (forks for copy-on-write, lookahead, several tokens, repeated ids, failures)
 *    run on twin pools, one through kvc_append_batch, one through the kvc_append calls it stands
 *    for (stopping at the first refusal): statuses, entries done, new blocks, every block table and
 *    length, the queued copies and the stats must agree after every step.
 *  - The stop rule: entries before a refused one are appended, it and later ones untouched; bad
 *    arguments anywhere change nothing; the message names the entry.
 *  - Bytes: a copy-on-write made by a batch, once copied (kvc_copy_pending), holds the parent's KV
 *    (the byte oracle), and both sequences read their own KV afterwards.
 *  - kvc_admit: its verdict is kvc_can_alloc's, an admitted prompt gets what kvc_alloc gives it,
 *    and LATER / NEVER change nothing. */
#include <stdlib.h>

#include "test_oracle_helpers.h"

enum { BS = 4, MAXSEQ = 12 };

static kvc_pool *meta_pool(int64_t blocks, double watermark) {
    kvc_pool_config c;
    OK(kvc_pool_config_default(&c));
    c.block_size = BS;
    c.num_blocks = blocks;
    c.watermark = watermark;
    c.event_capacity = 0;
    kvc_pool *p = NULL;
    OK(kvc_pool_create(&c, &p));
    return p;
}


/* Asserts that the two pools hold the same sequences with the same tables, lengths and stats. */
static void expect_same_pools(kvc_pool *a, kvc_pool *b, const int *live) {
    for (uint64_t id = 0; id < MAXSEQ; ++id) {
        int32_t ta[256], tb[256];
        int64_t na = -1, nb = -1, la = -1, lb = -1;
        if (!live[id]) {
            EXPECT_ERR(kvc_seq_num_tokens(a, id, &la), KVC_ERR_UNKNOWN_SEQ);
            EXPECT_ERR(kvc_seq_num_tokens(b, id, &lb), KVC_ERR_UNKNOWN_SEQ);
            continue;
        }
        OK(kvc_seq_block_table(a, id, ta, 256, &na));
        OK(kvc_seq_block_table(b, id, tb, 256, &nb));
        assert_int_equal(na, nb);
        assert_memory_equal(ta, tb, (size_t)na * sizeof ta[0]);
        OK(kvc_seq_num_tokens(a, id, &la));
        OK(kvc_seq_num_tokens(b, id, &lb));
        assert_int_equal(la, lb);
    }
    const kvc_stats sa = stats_of(a), sb = stats_of(b);
    assert_int_equal(sa.free_blocks, sb.free_blocks);
    assert_int_equal(sa.cached_free_blocks, sb.cached_free_blocks);
    assert_int_equal(sa.cached_blocks_total, sb.cached_blocks_total);
    int32_t sa_src[64], sa_dst[64], sb_src[64], sb_dst[64];
    int64_t ca = 0, cb = 0;
    OK(kvc_take_pending_copies(a, sa_src, sa_dst, 64, &ca));
    OK(kvc_take_pending_copies(b, sb_src, sb_dst, 64, &cb));
    assert_int_equal(ca, cb);
    assert_memory_equal(sa_src, sb_src, (size_t)ca * sizeof sa_src[0]);
    assert_memory_equal(sa_dst, sb_dst, (size_t)ca * sizeof sa_dst[0]);
    CHECK_POOL(a);
    CHECK_POOL(b);
}

static void test_batch_equals_the_single_calls(void **state) {
    (void)state;
    uint64_t seed = 0x5eed;
    int refusals = 0, partial = 0, cows = 0;
    for (int round = 0; round < 20; ++round) {
        kvc_pool *a = meta_pool(64, 0.0), *b = meta_pool(64, 0.0);
        int live[MAXSEQ] = {0};
        int32_t prompt[24];
        for (int i = 0; i < 24; ++i) prompt[i] = 100 + i;  /* shared: later prompts hit earlier ones */
        for (int step = 0; step < 60; ++step) {
            const uint32_t op = test_lcg_next(&seed) % 10;
            const uint64_t id = test_lcg_next(&seed) % MAXSEQ;
            if (op <= 1 && !live[id]) {  /* a new sequence with a hit on the shared prompt */
                const int64_t n = 1 + test_lcg_next(&seed) % 20;
                const kvc_status sa = kvc_alloc(a, id, prompt, n, NULL, NULL);
                assert_int_equal(kvc_alloc(b, id, prompt, n, NULL, NULL), sa);
                live[id] = sa == KVC_OK;
            } else if ((op == 2 || op == 3) && live[id]) {
                uint64_t child = test_lcg_next(&seed) % MAXSEQ;
                if (!live[child] && child != id) {
                    OK(kvc_fork(a, id, child));
                    OK(kvc_fork(b, id, child));
                    live[child] = 1;
                }
            } else if (op == 4 && live[id]) {
                OK(kvc_free(a, id));
                OK(kvc_free(b, id));
                live[id] = 0;
            } else {  /* a batch of 1..8 entries, live or not (unknown ids are refusals too) */
                const int32_t n = 1 + (int32_t)(test_lcg_next(&seed) % 8);
                uint64_t ids[8];
                int64_t offsets[9] = {0}, lookahead[8];
                int32_t tokens[64], nb_a[8], nb_b[8];
                const int per_seq = (int)(test_lcg_next(&seed) % 2), one_each = (int)(test_lcg_next(&seed) % 3 == 0);
                const int64_t common = test_lcg_next(&seed) % 2;
                for (int32_t i = 0; i < n; ++i) {
                    ids[i] = test_lcg_next(&seed) % MAXSEQ;
                    for (int tries = 0; tries < 8 && !live[ids[i]] && test_lcg_next(&seed) % 8 != 0; ++tries)
                        ids[i] = test_lcg_next(&seed) % MAXSEQ;  /* mostly live ids; some unknown ones */
                    lookahead[i] = test_lcg_next(&seed) % 3;
                    int64_t k = one_each ? 1 : test_lcg_next(&seed) % 5;
                    if (k == 0 && (per_seq ? lookahead[i] : common) == 0) k = 1;  /* an entry appends something */
                    offsets[i + 1] = offsets[i] + k;
                    for (int64_t t = offsets[i]; t < offsets[i + 1]; ++t) tokens[t] = 100 + (int32_t)(test_lcg_next(&seed) % 30);
                }
                for (int32_t i = 0; i < 8; ++i) nb_a[i] = nb_b[i] = -7;
                /* Single calls, stopping at the first refusal. */
                kvc_status sa = KVC_OK;
                int32_t done_a = 0;
                for (; done_a < n; ++done_a) {
                    const int32_t i = done_a;
                    const int64_t la = per_seq ? lookahead[i] : common;
                    sa = kvc_append(a, ids[i], one_each ? tokens + i : tokens + offsets[i],
                                    one_each ? 1 : offsets[i + 1] - offsets[i], la, &nb_a[i]);
                    if (sa != KVC_OK) break;
                }
                int32_t done_b = -1;
                const kvc_status sb = kvc_append_batch(b, n, ids, one_each ? NULL : offsets, tokens, common,
                                                       per_seq ? lookahead : NULL, nb_b, &done_b);
                assert_int_equal(sb, sa);
                assert_int_equal(done_b, done_a);
                assert_memory_equal(nb_a, nb_b, sizeof nb_a);
                if (sb != KVC_OK) {
                    ++refusals;
                    if (done_b > 0) ++partial;
                    assert_non_null(strstr(kvc_last_error(), "entry"));
                }
            }
            expect_same_pools(a, b, live);
        }
        cows += (int)stats_of(b).cow_copies;
        kvc_pool_destroy(a);
        kvc_pool_destroy(b);
    }
    /* The workload reached the paths it is meant to compare. */
    assert_true(refusals > 20);
    assert_true(partial > 5);
    print_message("%d refusals (%d after some entries), %d copy-on-write blocks\n", refusals, partial, cows);
    assert_true(cows > 10);
}

/* Entries before a refused one are appended, it and the ones after it are not. */
static void test_batch_stops_at_the_first_refusal(void **state) {
    (void)state;
    kvc_pool *p = meta_pool(4, 0.0);
    const int32_t t[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    OK(kvc_alloc(p, 1, t, 4, NULL, NULL));  /* 1 block each: 2 left free */
    OK(kvc_alloc(p, 2, t + 4, 4, NULL, NULL));
    const uint64_t ids[3] = {1, 2, 1};
    const int64_t offsets[4] = {0, 1, 6, 7};
    const int32_t tokens[7] = {9, 10, 11, 12, 13, 14, 15};
    int32_t nb[3] = {-7, -7, -7}, done = -1;
    /* Entry 0 takes a block (1 left); entry 1 needs 2: refused; entry 2 is not tried. */
    EXPECT_ERR(kvc_append_batch(p, 3, ids, offsets, tokens, 0, NULL, nb, &done), KVC_ERR_OUT_OF_BLOCKS);
    assert_int_equal(done, 1);
    assert_int_equal(nb[0], 1);
    assert_int_equal(nb[1], -7);
    assert_int_equal(nb[2], -7);
    assert_non_null(strstr(kvc_last_error(), "entry 1 of 3"));
    int64_t n1 = 0, n2 = 0;
    OK(kvc_seq_num_tokens(p, 1, &n1));
    OK(kvc_seq_num_tokens(p, 2, &n2));
    assert_int_equal(n1, 5);
    assert_int_equal(n2, 4);
    assert_int_equal(stats_of(p).free_blocks, 1);
    /* The scheduler's retry from the refused entry, after freeing room. */
    OK(kvc_free(p, 1));
    EXPECT_ERR(kvc_append_batch(p, 2, ids + 1, NULL, tokens + 1, 0, NULL, NULL, &done), KVC_ERR_UNKNOWN_SEQ);
    assert_int_equal(done, 1);
    OK(kvc_seq_num_tokens(p, 2, &n2));
    assert_int_equal(n2, 5);
    CHECK_POOL(p);
    kvc_pool_destroy(p);
}

/* A bad argument in any entry: its status, and nothing changed at all. */
static void test_batch_bad_arguments_change_nothing(void **state) {
    (void)state;
    kvc_pool *p = meta_pool(16, 0.0);
    const int32_t t[4] = {1, 2, 3, 4};
    OK(kvc_alloc(p, 1, t, 3, NULL, NULL));
    OK(kvc_alloc(p, 2, t, 3, NULL, NULL));
    const uint64_t ids[3] = {1, 2, 1};
    const int64_t good[4] = {0, 1, 2, 3}, first_not_zero[4] = {1, 2, 3, 4}, decreasing[4] = {0, 2, 1, 3};
    const int64_t bad_lookahead[3] = {0, 0, -1}, nothing[3] = {0, 0, 0};
    const int64_t empty_entry[4] = {0, 1, 1, 2};
    int32_t done = -1;
    EXPECT_ERR(kvc_append_batch(p, 3, ids, good, t, 0, bad_lookahead, NULL, &done), KVC_ERR_INVALID_ARG);
    assert_non_null(strstr(kvc_last_error(), "entry 2 of 3; nothing was appended"));
    assert_int_equal(done, 0);
    EXPECT_ERR(kvc_append_batch(p, 3, ids, first_not_zero, t, 0, NULL, NULL, &done), KVC_ERR_INVALID_ARG);
    EXPECT_ERR(kvc_append_batch(p, 3, ids, decreasing, t, 0, NULL, NULL, &done), KVC_ERR_INVALID_ARG);
    EXPECT_ERR(kvc_append_batch(p, 3, ids, empty_entry, t, 0, nothing, NULL, &done), KVC_ERR_INVALID_ARG);
    EXPECT_ERR(kvc_append_batch(p, 3, ids, good, NULL, 0, NULL, NULL, &done), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_append_batch(p, 3, NULL, good, t, 0, NULL, NULL, &done), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_append_batch(p, -1, ids, good, t, 0, NULL, NULL, &done), KVC_ERR_INVALID_ARG);
    EXPECT_ERR(kvc_append_batch(NULL, 3, ids, good, t, 0, NULL, NULL, &done), KVC_ERR_NULL_ARG);
    int64_t n = 0;
    OK(kvc_seq_num_tokens(p, 1, &n));
    assert_int_equal(n, 3);
    OK(kvc_seq_num_tokens(p, 2, &n));
    assert_int_equal(n, 3);
    /* An empty batch is a no-op; lookahead alone is an entry that appends something. */
    OK(kvc_append_batch(p, 0, NULL, NULL, NULL, 0, NULL, NULL, &done));
    assert_int_equal(done, 0);
    OK(kvc_append_batch(p, 3, ids, empty_entry, t, 2, NULL, NULL, &done));
    assert_int_equal(done, 3);
    OK(kvc_seq_num_tokens(p, 1, &n));
    assert_int_equal(n, 5);  /* entries 0 and 2: one token each (entry 1 only reserved) */
    CHECK_POOL(p);
    kvc_pool_destroy(p);
}

/* A batch's copy-on-write moves the right bytes: after kvc_copy_pending both forks read their own
 * KV, the shared part being the parent's. */
static void test_batch_copy_on_write_bytes(void **state) {
    (void)state;
    oracle_pool o;
    oracle_init(&o, tier_pool(16, 1));
    int32_t ta[16] = {3, 1, 4, 1, 5, 9, 2, 6};  /* 6 tokens: block 1 is partial and will be shared */
    int32_t tb[16];
    OK(kvc_alloc(o.pool, 1, ta, 6, NULL, NULL));
    oracle_write(&o, 1, ta, 0, 6);
    OK(kvc_fork(o.pool, 1, 2));
    memcpy(tb, ta, sizeof tb);
    ta[6] = 70;
    tb[6] = 80;
    const uint64_t ids[2] = {1, 2};
    const int32_t step[2] = {ta[6], tb[6]};
    int32_t nb[2] = {-1, -1}, done = 0;
    OK(kvc_append_batch(o.pool, 2, ids, NULL, step, 0, NULL, nb, &done));
    assert_int_equal(done, 2);
    assert_int_equal(nb[0], 1);  /* the first writer of the shared block copies it */
    assert_int_equal(nb[1], 0);  /* then the block is the second's alone */
    int64_t copied = 0;
    OK(kvc_copy_pending(o.pool, NULL, &copied));
    assert_int_equal(copied, 1);
    oracle_write(&o, 1, ta, 6, 1);
    oracle_write(&o, 2, tb, 6, 1);
    oracle_expect(&o, 1, ta, 7);
    oracle_expect(&o, 2, tb, 7);
    CHECK_POOL(o.pool);
    kvc_pool_destroy(o.pool);
}

/* kvc_admit's verdict is kvc_can_alloc's, and an admitted prompt gets what kvc_alloc gives. */
static void test_admit_is_can_alloc_then_alloc(void **state) {
    (void)state;
    /* 20 blocks, watermark 0.1 = 2 blocks kept free. */
    kvc_pool *a = meta_pool(20, 0.1), *b = meta_pool(20, 0.1);
    int32_t prompt[64];
    for (int i = 0; i < 64; ++i) prompt[i] = 7 * i + 1;
    uint64_t next = 0;
    int oks = 0, laters = 0;
    for (int i = 0; i < 12; ++i) {
        const int64_t n = 5 + (i * 7) % 40;
        int32_t va = -1, vb = -1;
        int64_t ca = -1, cb = -1;
        OK(kvc_can_alloc(a, prompt, n, NULL, &va));
        if (va == KVC_ALLOC_OK) OK(kvc_alloc(a, next, prompt, n, NULL, &ca));
        const kvc_stats before = stats_of(b);
        OK(kvc_admit(b, next, prompt, n, NULL, &vb, &cb));
        assert_int_equal(vb, va);
        if (vb == KVC_ALLOC_OK) {
            ++oks;
            assert_int_equal(cb, ca);
            ++next;
        } else {
            ++laters;
            assert_int_equal(cb, 0);
            const kvc_stats after = stats_of(b);
            assert_int_equal(after.free_blocks, before.free_blocks);
            assert_int_equal(after.num_seqs, before.num_seqs);
            int64_t len = 0;
            EXPECT_ERR(kvc_seq_num_tokens(b, next, &len), KVC_ERR_UNKNOWN_SEQ);
        }
        int live[MAXSEQ] = {0};
        for (uint64_t s = 0; s < next && s < MAXSEQ; ++s) live[s] = 1;
        expect_same_pools(a, b, live);
    }
    assert_true(oks >= 3);
    assert_true(laters >= 1);
    /* NEVER: more blocks than the pool minus the watermark. */
    int32_t v = -1;
    int64_t c = -1;
    int32_t big[96];
    for (int i = 0; i < 96; ++i) big[i] = i;
    OK(kvc_admit(b, 99, big, 96, NULL, &v, &c));
    assert_int_equal(v, KVC_ALLOC_NEVER);
    EXPECT_ERR(kvc_admit(b, 0, prompt, 4, NULL, &v, NULL), KVC_ERR_SEQ_EXISTS);
    EXPECT_ERR(kvc_admit(b, 98, prompt, 4, NULL, NULL, NULL), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_admit(b, 98, prompt, 0, NULL, &v, NULL), KVC_ERR_INVALID_ARG);
    CHECK_POOL(b);
    kvc_pool_destroy(a);
    kvc_pool_destroy(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_equals_the_single_calls),
        cmocka_unit_test(test_batch_stops_at_the_first_refusal),
        cmocka_unit_test(test_batch_bad_arguments_change_nothing),
        cmocka_unit_test(test_batch_copy_on_write_bytes),
        cmocka_unit_test(test_admit_is_can_alloc_then_alloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
