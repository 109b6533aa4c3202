/* kvc_pool_set_sliding_window: appends release the blocks no query can see any more (exact counts
 * per step), released blocks count as free for the append that releases them, cached ones stay
 * hittable, fork / free / truncate / slot mapping / swap / preemption cost handle released
 * entries, and every refusal leaves the pool as it was. Attention over released tables is checked
 * against the dense reference in test_kernels_capi (test_e2e_sliding_window_releases_blocks). */
#include "test_tier_helpers.h"

/* Leading -1 entries of seq's table. */
static int64_t released_of(kvc_pool *p, uint64_t seq) {
    int32_t t[64];
    const int64_t n = table_of(p, seq, t, 64);
    int64_t r = 0;
    while (r < n && t[r] < 0) ++r;
    for (int64_t i = r; i < n; ++i) assert_true(t[i] >= 0); /* only a leading run is released */
    return r;
}

static void test_set_get_and_state(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 16, 1);
    int32_t w = -1;
    OK(kvc_pool_get_sliding_window(p, &w));
    assert_int_equal(w, 0);
    OK(kvc_pool_set_sliding_window(p, 6));
    OK(kvc_pool_get_sliding_window(p, &w));
    assert_int_equal(w, 6);
    EXPECT_ERR_UNCHANGED(p, kvc_pool_set_sliding_window(p, -2), KVC_ERR_INVALID_ARG);
    int32_t t[8];
    iota_tokens(t, 8, 10);
    OK(kvc_alloc(p, 1, t, 3, NULL, NULL));
    EXPECT_ERR_UNCHANGED(p, kvc_pool_set_sliding_window(p, 12), KVC_ERR_STATE);
    EXPECT_ERR_UNCHANGED(p, kvc_pool_set_sliding_window(p, 0), KVC_ERR_STATE);
    OK(kvc_pool_get_sliding_window(p, &w));
    assert_int_equal(w, 6);
    OK(kvc_free(p, 1));
    OK(kvc_pool_set_sliding_window(p, 0)); /* no sequences again: may change */
    OK(kvc_alloc(p, 1, t, 3, NULL, NULL));
    for (int i = 0; i < 20; ++i) OK(kvc_append(p, 1, t, 1, 0, NULL));
    assert_int_equal(released_of(p, 1), 0); /* off: nothing released */
    OK(kvc_free(p, 1));
    OK(kvc_pool_destroy(p));
}

/* Block size 4, window 6: an append releases the blocks before (f - 5) / 4, f = the first position
 * the previous call added (the alloc's first uncached one: 0 here). */
static void test_decode_releases_exact_blocks(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 16, 0);
    OK(kvc_pool_set_sliding_window(p, 6));
    OK(kvc_alloc(p, 1, NULL, 9, NULL, NULL)); /* 3 blocks, nothing released by an alloc */
    assert_int_equal(released_of(p, 1), 0);
    assert_int_equal(stats_of(p).free_blocks, 13);
    for (int64_t pos = 9; pos < 40; ++pos) {
        int32_t taken = -1;
        OK(kvc_append(p, 1, NULL, 1, 0, &taken));
        const int64_t first_key = (pos == 9 ? 0 : pos - 1) - 6 + 1;
        const int64_t want_released = first_key > 0 ? first_key / 4 : 0;
        const int64_t blocks = (pos + 1 + 3) / 4;
        assert_int_equal(released_of(p, 1), want_released);
        assert_int_equal(table_len(p, 1), blocks);
        assert_int_equal(taken, pos % 4 == 0 ? 1 : 0);
        assert_int_equal(stats_of(p).free_blocks, 16 - (blocks - want_released));
        CHECK_POOL(p);
    }
    /* Held: blocks 8 and 9 (positions 32..39; the previous call's token, 38, sees from 33). */
    assert_int_equal(16 - stats_of(p).free_blocks, 2);
    /* Chunked prefill through append: 10 tokens at 40 release up to (39 - 5) / 4 = 8 first; the
     * next call releases by this one's first token (40: from 35), not by its own. */
    OK(kvc_append(p, 1, NULL, 10, 0, NULL));
    assert_int_equal(released_of(p, 1), 8);
    assert_int_equal(table_len(p, 1), 13);
    OK(kvc_append(p, 1, NULL, 1, 0, NULL));
    assert_int_equal(released_of(p, 1), 8);
    OK(kvc_append(p, 1, NULL, 1, 0, NULL)); /* previous call's token is 50: from 45 */
    assert_int_equal(released_of(p, 1), 11);
    OK(kvc_free(p, 1));
    assert_int_equal(stats_of(p).free_blocks, 16);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* A full pool: the released block pays for the new one; when even that is not enough, nothing
 * is released. Block size 4, window 4, a 4-block pool. */
static void test_released_blocks_count_as_free(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 4, 0);
    OK(kvc_pool_set_sliding_window(p, 4));
    OK(kvc_alloc(p, 1, NULL, 4, NULL, NULL));
    OK(kvc_append(p, 1, NULL, 4, 0, NULL)); /* previous first position 0: nothing released */
    OK(kvc_append(p, 1, NULL, 4, 0, NULL)); /* 4: from 1, nothing */
    OK(kvc_append(p, 1, NULL, 4, 0, NULL)); /* 8: from 5, block 0 */
    assert_int_equal(released_of(p, 1), 1);
    OK(kvc_alloc(p, 2, NULL, 4, NULL, NULL)); /* the pool is full */
    assert_int_equal(stats_of(p).free_blocks, 0);
    int32_t taken = -1;
    OK(kvc_append(p, 1, NULL, 1, 0, &taken)); /* 12: from 9, releases block 1 and takes one */
    assert_int_equal(taken, 1);
    assert_int_equal(released_of(p, 1), 2);
    assert_int_equal(stats_of(p).free_blocks, 0);
    CHECK_POOL(p);

    /* 16: from 13 releases block 2 (one free block); 8 lookahead slots need two: refused whole. */
    int32_t before[8], after[8];
    const int64_t n = table_of(p, 1, before, 8);
    EXPECT_ERR_UNCHANGED(p, kvc_append(p, 1, NULL, 1, 8, NULL), KVC_ERR_OUT_OF_BLOCKS);
    assert_int_equal(table_of(p, 1, after, 8), n);
    assert_memory_equal(before, after, (size_t)n * sizeof(int32_t));
    OK(kvc_append(p, 1, NULL, 1, 3, &taken)); /* 21 slots: one new block, paid by block 2 */
    assert_int_equal(taken, 1);
    assert_int_equal(released_of(p, 1), 3);
    assert_int_equal(stats_of(p).free_blocks, 0);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* Released full blocks stay in the prefix cache: the same prompt later hits all of them. */
static void test_released_blocks_stay_cached(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 32, 1);
    OK(kvc_pool_set_sliding_window(p, 5));
    int32_t t[40];
    iota_tokens(t, 40, 500);
    OK(kvc_alloc(p, 1, t, 8, NULL, NULL));
    for (int64_t pos = 8; pos < 30; ++pos) OK(kvc_append(p, 1, t + pos, 1, 0, NULL));
    assert_int_equal(released_of(p, 1), 6); /* (29 - 4) / 4 */
    assert_int_equal(cached_tokens_of(p, t, 30, NULL), 28);
    /* A second request with the same 30 tokens: its prefill starts after the 28 cached ones, and
     * reads no key before 28 - 5 + 1 = 24, so blocks 0..5 are not even taken: the table starts
     * released, and shares block 6 (tokens 24..27) with sequence 1. */
    int64_t cached = -1;
    const int64_t free_before = stats_of(p).free_blocks;
    OK(kvc_alloc(p, 2, t, 30, NULL, &cached));
    assert_int_equal(cached, 28);
    assert_int_equal(released_of(p, 2), 6);
    int32_t t1[8], t2[8];
    assert_int_equal(table_of(p, 1, t1, 8), 8);
    assert_int_equal(table_of(p, 2, t2, 8), 8);
    assert_int_equal(t2[5], -1);
    assert_int_equal(t2[6], t1[6]);
    assert_int_not_equal(t2[7], t1[7]); /* block 7 is partial in both: each its own */
    assert_int_equal(stats_of(p).free_blocks, free_before - 1); /* only the fresh block 7 */
    CHECK_POOL(p);
    OK(kvc_free(p, 1));
    OK(kvc_free(p, 2));
    assert_int_equal(stats_of(p).free_blocks, 32);
    OK(kvc_pool_destroy(p));
}

static void test_fork_truncate_slot_mapping(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 16, 1);
    OK(kvc_pool_set_sliding_window(p, 6));
    int32_t t[64];
    iota_tokens(t, 64, 7);
    OK(kvc_alloc(p, 1, t, 4, NULL, NULL));
    for (int64_t pos = 4; pos < 22; ++pos) OK(kvc_append(p, 1, t + pos, 1, 0, NULL));
    assert_int_equal(released_of(p, 1), 3); /* previous call's token 20: (20 - 5) / 4 */
    OK(kvc_fork(p, 1, 2));
    assert_int_equal(released_of(p, 2), 3);
    CHECK_POOL(p);
    OK(kvc_append(p, 2, t, 1, 0, NULL)); /* copy-on-write of the shared partial block; the child
                                            goes on from the parent's last call (21): releases 4 */
    assert_int_equal(released_of(p, 2), 4);
    assert_int_equal(released_of(p, 1), 3);
    int32_t src[4], dst[4];
    int64_t pairs = -1;
    OK(kvc_take_pending_copies(p, src, dst, 4, &pairs));
    assert_int_equal(pairs, 1);

    /* Truncate: the next token at n sees from n - 5; sequence 1's released positions end at 12,
     * sequence 2's at 16. */
    EXPECT_ERR_UNCHANGED(p, kvc_truncate(p, 1, 16, NULL), KVC_ERR_STATE);
    int32_t freed = -1;
    OK(kvc_truncate(p, 1, 17, &freed));
    assert_int_equal(freed, 1);
    EXPECT_ERR_UNCHANGED(p, kvc_truncate(p, 2, 20, NULL), KVC_ERR_STATE);
    OK(kvc_truncate(p, 2, 21, NULL));

    int64_t slots[4];
    EXPECT_ERR_UNCHANGED(p, kvc_seq_slot_mapping(p, 1, 11, 2, slots, 4), KVC_ERR_INVALID_ARG);
    OK(kvc_seq_slot_mapping(p, 1, 12, 4, slots, 4));
    int32_t table[16];
    table_of(p, 1, table, 16);
    assert_int_equal(slots[0], (int64_t)table[3] * 4);
    OK(kvc_free(p, 1));
    OK(kvc_free(p, 2));
    CHECK_POOL(p);
    assert_int_equal(stats_of(p).free_blocks, 16);
    OK(kvc_pool_destroy(p));
}

/* Swap out / in skip released entries; the preemption cost counts only held blocks. */
static void test_swap_and_preemption_cost(void **state) {
    (void)state;
    kvc_pool *p = tier_pool(12, 0);
    OK(kvc_tier_attach_host(p, 8));
    OK(kvc_pool_set_sliding_window(p, 6));
    OK(kvc_alloc(p, 1, NULL, 4, NULL, NULL));
    for (int i = 0; i < 18; ++i) OK(kvc_append(p, 1, NULL, 1, 0, NULL)); /* 22 tokens, released 3 */
    assert_int_equal(released_of(p, 1), 3);
    int32_t table[64];
    const int64_t n = tier_table(p, 1, table);
    assert_int_equal(n, 6);
    /* Write the held blocks 3..5 (the pattern index is the table index). */
    unsigned char buf[TBLOCK_BYTES];
    for (int64_t i = 3; i < n; ++i) {
        pattern(buf, 77, i);
        OK(kvc_storage_copy_blocks(p, &table[i], 1, buf, 0));
    }
    int64_t bytes = -1, recompute = -1;
    OK(kvc_preemption_cost(p, 1, &bytes, &recompute));
    assert_int_equal(bytes, 3 * TBLOCK_BYTES);
    assert_int_equal(recompute, 22);
    uint64_t op = 0;
    OK(kvc_swap_out(p, 1, &op));
    OK(kvc_op_wait(p, op));
    CHECK_POOL(p);
    assert_int_equal(tier_stats(p, KVC_TIER_HOST).blocks_in, 3);
    churn(p, 12, 100); /* the freed device blocks are reused */
    OK(kvc_swap_in(p, 1, &op));
    OK(kvc_op_wait(p, op));
    CHECK_POOL(p);
    assert_int_equal(released_of(p, 1), 3);
    assert_int_equal(tier_table(p, 1, table), 6);
    for (int64_t i = 3; i < n; ++i) {
        unsigned char got[TBLOCK_BYTES];
        pattern(buf, 77, i);
        OK(kvc_storage_copy_blocks(p, &table[i], 1, got, 1));
        assert_memory_equal(buf, got, TBLOCK_BYTES);
    }
    OK(kvc_append(p, 1, NULL, 1, 0, NULL)); /* decoding goes on: from 21, (21 - 5) / 4 = 4 */
    assert_int_equal(released_of(p, 1), 4);
    OK(kvc_free(p, 1));
    CHECK_POOL(p);
    assert_int_equal(stats_of(p).free_blocks, 12);
    OK(kvc_pool_destroy(p));
}

/* A pinned prefix block in the released range is let go by the sequence but stays pinned, and
 * is not counted as free for the append. */
static void test_pinned_block_released(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 4, 1);
    OK(kvc_pool_set_sliding_window(p, 4));
    int32_t t[32];
    iota_tokens(t, 32, 90);
    OK(kvc_alloc(p, 1, t, 4, NULL, NULL));
    OK(kvc_append(p, 1, t + 4, 4, 0, NULL));
    OK(kvc_append(p, 1, t + 8, 4, 0, NULL));
    OK(kvc_append(p, 1, t + 12, 4, 0, NULL)); /* from 5: releases block 0 (cached, free) */
    assert_int_equal(released_of(p, 1), 1);
    int64_t pinned = -1;
    OK(kvc_prefix_pin(p, t, 8, NULL, &pinned)); /* blocks 0 (out of the free list) and 1 */
    assert_int_equal(pinned, 8);
    assert_int_equal(stats_of(p).free_blocks, 0);
    /* 16 needs a block; from 9 it would release block 1, pinned: no credit, refused whole. */
    EXPECT_ERR_UNCHANGED(p, kvc_append(p, 1, t + 16, 1, 0, NULL), KVC_ERR_OUT_OF_BLOCKS);
    assert_int_equal(released_of(p, 1), 1);
    int64_t unpinned = -1;
    OK(kvc_prefix_unpin(p, t, 8, NULL, &unpinned));
    assert_int_equal(stats_of(p).free_blocks, 1); /* block 0 */
    int32_t taken = -1;
    OK(kvc_append(p, 1, t + 16, 1, 0, &taken));
    assert_int_equal(taken, 1);
    assert_int_equal(released_of(p, 1), 2);
    assert_int_equal(stats_of(p).free_blocks, 1);
    CHECK_POOL(p);
    OK(kvc_free(p, 1));
    CHECK_POOL(p);
    assert_int_equal(stats_of(p).free_blocks, 4);
    OK(kvc_pool_destroy(p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_get_and_state),
        cmocka_unit_test(test_decode_releases_exact_blocks),
        cmocka_unit_test(test_released_blocks_count_as_free),
        cmocka_unit_test(test_released_blocks_stay_cached),
        cmocka_unit_test(test_fork_truncate_slot_mapping),
        cmocka_unit_test(test_swap_and_preemption_cost),
        cmocka_unit_test(test_pinned_block_released),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
