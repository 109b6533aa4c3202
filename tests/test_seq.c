/* Sequences without prefix caching: alloc / append / free, read-outs, lookahead, watermark
 * admission, and every error status (with the pool proven unchanged). */
#include <limits.h>

#include "test_pool_helpers.h"

static void test_alloc_append_free(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 10, 0);
    int64_t cached = -1;
    OK(kvc_alloc(p, 1, NULL, 10, NULL, &cached));
    CHECK_POOL(p);
    assert_int_equal(cached, 0);
    int32_t t[16];
    assert_int_equal(table_of(p, 1, t, 16), 3);
    assert_int_equal(t[0], 0); /* fresh pool: blocks handed out in id order */
    assert_int_equal(t[1], 1);
    assert_int_equal(t[2], 2);
    assert_int_equal(num_tokens_of(p, 1), 10);
    kvc_stats s = stats_of(p);
    assert_int_equal(s.used_blocks, 3);
    assert_int_equal(s.free_blocks, 7);
    assert_int_equal(s.num_seqs, 1);
    assert_int_equal(s.allocs, 1);
    assert_int_equal(s.blocks_allocated, 3);
    assert_true(s.utilization > 0.299 && s.utilization < 0.301);

    int32_t nb = -1;
    OK(kvc_append(p, 1, NULL, 1, 0, &nb)); /* 11 tokens: fits in block 2 */
    CHECK_POOL(p);
    assert_int_equal(nb, 0);
    OK(kvc_append(p, 1, NULL, 1, 0, &nb)); /* 12: block 2 now full */
    assert_int_equal(nb, 0);
    OK(kvc_append(p, 1, NULL, 1, 0, &nb)); /* 13: needs block 3 */
    CHECK_POOL(p);
    assert_int_equal(nb, 1);
    OK(kvc_append(p, 1, NULL, 7, 0, NULL)); /* 20 tokens, 5 blocks */
    assert_int_equal(table_len(p, 1), 5);
    assert_int_equal(num_tokens_of(p, 1), 20);
    s = stats_of(p);
    assert_int_equal(s.appends, 4);
    assert_int_equal(s.blocks_allocated, 5);

    OK(kvc_free(p, 1));
    CHECK_POOL(p);
    s = stats_of(p);
    assert_int_equal(s.free_blocks, 10);
    assert_int_equal(s.used_blocks, 0);
    assert_int_equal(s.frees, 1);
    assert_int_equal(s.blocks_freed, 5);
    assert_int_equal(s.num_seqs, 0);
    EXPECT_ERR_UNCHANGED(p, kvc_free(p, 1), KVC_ERR_UNKNOWN_SEQ); /* double free */

    /* Freed uncached blocks go to the head in reverse order: the same ids come back first. */
    OK(kvc_alloc(p, 2, NULL, 12, NULL, NULL));
    assert_int_equal(table_of(p, 2, t, 16), 3);
    assert_int_equal(t[0], 0);
    assert_int_equal(t[1], 1);
    assert_int_equal(t[2], 2);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

static void test_slot_mapping(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 10, 0);
    OK(kvc_alloc(p, 7, NULL, 3, NULL, NULL));  /* takes block 0 */
    OK(kvc_alloc(p, 8, NULL, 6, NULL, NULL));  /* blocks 1, 2 */
    int64_t slots[8];
    OK(kvc_seq_slot_mapping(p, 8, 0, 6, slots, 8));
    int64_t want[6] = {4, 5, 6, 7, 8, 9};
    assert_memory_equal(slots, want, sizeof want);
    /* newest 2 tokens: first_pos = num_tokens - 2 */
    OK(kvc_seq_slot_mapping(p, 8, 4, 2, slots, 2));
    assert_int_equal(slots[0], 8);
    assert_int_equal(slots[1], 9);
    OK(kvc_seq_slot_mapping(p, 8, 6, 0, NULL, 0)); /* empty range at the end */

    EXPECT_ERR_UNCHANGED(p, kvc_seq_slot_mapping(NULL, 8, 0, 1, slots, 8), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_seq_slot_mapping(p, 8, 0, 1, NULL, 8), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_seq_slot_mapping(p, 8, -1, 1, slots, 8), KVC_ERR_INVALID_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_seq_slot_mapping(p, 8, 0, -1, slots, 8), KVC_ERR_INVALID_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_seq_slot_mapping(p, 8, 0, 1, slots, -1), KVC_ERR_INVALID_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_seq_slot_mapping(p, 8, 5, 2, slots, 8), KVC_ERR_INVALID_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_seq_slot_mapping(p, 8, 7, 0, slots, 8), KVC_ERR_INVALID_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_seq_slot_mapping(p, 8, 1, INT64_MAX, slots, 8), KVC_ERR_INVALID_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_seq_slot_mapping(p, 9, 0, 1, slots, 8), KVC_ERR_UNKNOWN_SEQ);
    EXPECT_ERR_UNCHANGED(p, kvc_seq_slot_mapping(p, 8, 0, 6, slots, 5), KVC_ERR_BUFFER_TOO_SMALL);
    OK(kvc_pool_destroy(p));
}

static void test_block_table_readout(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 10, 0);
    OK(kvc_alloc(p, 1, NULL, 9, NULL, NULL));
    int64_t len = -1;
    OK(kvc_seq_block_table(p, 1, NULL, 0, &len)); /* size query */
    assert_int_equal(len, 3);
    int32_t t[3] = {-7, -7, -7};
    len = -1;
    EXPECT_ERR_UNCHANGED(p, kvc_seq_block_table(p, 1, t, 2, &len), KVC_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(len, 3); /* the documented required-size out-param */
    assert_int_equal(t[0], -7);
    EXPECT_ERR_UNCHANGED(p, kvc_seq_block_table(NULL, 1, t, 3, &len), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_seq_block_table(p, 1, t, 3, NULL), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_seq_block_table(p, 1, NULL, 3, &len), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_seq_block_table(p, 1, t, -1, &len), KVC_ERR_INVALID_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_seq_block_table(p, 2, t, 3, &len), KVC_ERR_UNKNOWN_SEQ);
    OK(kvc_seq_block_table(p, 1, t, 3, &len));
    assert_int_equal(t[2], 2);

    int64_t n = -1;
    EXPECT_ERR_UNCHANGED(p, kvc_seq_num_tokens(NULL, 1, &n), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_seq_num_tokens(p, 1, NULL), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_seq_num_tokens(p, 5, &n), KVC_ERR_UNKNOWN_SEQ);
    assert_int_equal(n, -1);
    OK(kvc_pool_destroy(p));
}

static void test_alloc_errors(void **state) {
    (void)state;
    kvc_pool *p = make_pool_ex(4, 10, 0, 0.0, 32, 16);
    int32_t tok[64];
    iota_tokens(tok, 64, 1);
    int64_t cached = -5;
    OK(kvc_alloc(p, 1, NULL, 8, NULL, NULL)); /* 2 blocks used, 8 free */
    EXPECT_ERR_UNCHANGED(p, kvc_alloc(NULL, 2, NULL, 4, NULL, NULL), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_alloc(p, 2, NULL, 0, NULL, NULL), KVC_ERR_INVALID_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_alloc(p, 2, NULL, -3, NULL, NULL), KVC_ERR_INVALID_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_alloc(p, 1, NULL, 4, NULL, NULL), KVC_ERR_SEQ_EXISTS);
    EXPECT_ERR_UNCHANGED(p, kvc_alloc(p, 2, NULL, 33, NULL, &cached), KVC_ERR_MAX_LEN);
    EXPECT_ERR_UNCHANGED(p, kvc_alloc(p, 2, NULL, INT64_MAX, NULL, &cached), KVC_ERR_MAX_LEN);
    EXPECT_ERR_UNCHANGED(p, kvc_alloc(p, 2, NULL, 32 + 1, NULL, NULL), KVC_ERR_MAX_LEN);
    OK(kvc_alloc(p, 3, NULL, 24, NULL, NULL)); /* 6 more: 2 free */
    EXPECT_ERR_UNCHANGED(p, kvc_alloc(p, 2, NULL, 9, NULL, &cached), KVC_ERR_OUT_OF_BLOCKS);
    assert_int_equal(cached, -5);
    OK(kvc_alloc(p, 2, NULL, 8, NULL, &cached)); /* exactly the 2 left */
    assert_int_equal(cached, 0);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));

    /* Bigger than the whole pool (no max_seq_len), and huge counts: OUT_OF_BLOCKS, no overflow. */
    p = make_pool(4, 10, 0);
    EXPECT_ERR_UNCHANGED(p, kvc_alloc(p, 2, NULL, 41, NULL, NULL), KVC_ERR_OUT_OF_BLOCKS);
    EXPECT_ERR_UNCHANGED(p, kvc_alloc(p, 2, NULL, INT64_MAX, NULL, NULL), KVC_ERR_OUT_OF_BLOCKS);
    OK(kvc_pool_destroy(p));

    /* With prefix caching on, tokens are required. */
    p = make_pool(4, 10, 1);
    EXPECT_ERR_UNCHANGED(p, kvc_alloc(p, 2, NULL, 4, NULL, NULL), KVC_ERR_NULL_ARG);
    OK(kvc_pool_destroy(p));
}

static void test_append_errors(void **state) {
    (void)state;
    kvc_pool *p = make_pool_ex(4, 6, 0, 0.0, 16, 16);
    int32_t nb = -9;
    OK(kvc_alloc(p, 1, NULL, 4, NULL, NULL));
    EXPECT_ERR_UNCHANGED(p, kvc_append(NULL, 1, NULL, 1, 0, &nb), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_append(p, 1, NULL, -1, 0, &nb), KVC_ERR_INVALID_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_append(p, 1, NULL, 1, -1, &nb), KVC_ERR_INVALID_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_append(p, 1, NULL, 0, 0, &nb), KVC_ERR_INVALID_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_append(p, 2, NULL, 1, 0, &nb), KVC_ERR_UNKNOWN_SEQ);
    EXPECT_ERR_UNCHANGED(p, kvc_append(p, 1, NULL, 13, 0, &nb), KVC_ERR_MAX_LEN);
    EXPECT_ERR_UNCHANGED(p, kvc_append(p, 1, NULL, 10, 3, &nb), KVC_ERR_MAX_LEN);
    EXPECT_ERR_UNCHANGED(p, kvc_append(p, 1, NULL, INT64_MAX, 0, &nb), KVC_ERR_OVERFLOW);
    EXPECT_ERR_UNCHANGED(p, kvc_append(p, 1, NULL, 1, INT64_MAX, &nb), KVC_ERR_OVERFLOW);
    assert_int_equal(nb, -9);
    OK(kvc_append(p, 1, NULL, 12, 0, &nb)); /* 16 tokens = max_seq_len, 4 blocks */
    assert_int_equal(nb, 3);
    OK(kvc_alloc(p, 2, NULL, 8, NULL, NULL)); /* the last 2 blocks */
    OK(kvc_free(p, 1));
    OK(kvc_alloc(p, 3, NULL, 12, NULL, NULL)); /* 1 free block left */
    EXPECT_ERR_UNCHANGED(p, kvc_append(p, 2, NULL, 5, 0, &nb), KVC_ERR_OUT_OF_BLOCKS);
    EXPECT_ERR_UNCHANGED(p, kvc_append(p, 2, NULL, 1, 4, &nb), KVC_ERR_OUT_OF_BLOCKS);
    OK(kvc_append(p, 2, NULL, 1, 3, &nb)); /* 9 + 3 lookahead = 12: one new block */
    assert_int_equal(nb, 1);
    EXPECT_ERR_UNCHANGED(p, kvc_append(p, 2, NULL, 4, 0, &nb), KVC_ERR_OUT_OF_BLOCKS);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));

    /* Caching on: tokens required when confirming tokens, not for pure lookahead. */
    p = make_pool(4, 6, 1);
    int32_t tok[4] = {1, 2, 3, 4};
    OK(kvc_alloc(p, 1, tok, 4, NULL, NULL));
    EXPECT_ERR_UNCHANGED(p, kvc_append(p, 1, NULL, 1, 0, &nb), KVC_ERR_NULL_ARG);
    OK(kvc_append(p, 1, NULL, 0, 2, &nb));
    assert_int_equal(nb, 1);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

static void test_lookahead(void **state) {
    (void)state;
    kvc_pool *p = make_pool_ex(4, 8, 0, 0.0, 8, 16);
    int32_t nb = -1;
    OK(kvc_alloc(p, 1, NULL, 3, NULL, NULL));
    OK(kvc_append(p, 1, NULL, 0, 3, &nb)); /* reserve slots 3..5 */
    CHECK_POOL(p);
    assert_int_equal(nb, 1);
    assert_int_equal(num_tokens_of(p, 1), 3); /* lookahead is not counted */
    assert_int_equal(table_len(p, 1), 2);
    int64_t slots[4];
    OK(kvc_seq_slot_mapping(p, 1, 3, 3, slots, 4)); /* reserved slots are addressable */
    assert_int_equal(slots[0], 3);
    assert_int_equal(slots[1], 4); /* block 1, offset 0 */
    assert_int_equal(slots[2], 5);
    EXPECT_ERR_UNCHANGED(p, kvc_seq_slot_mapping(p, 1, 3, 4, slots, 4), KVC_ERR_INVALID_ARG);
    /* Confirm 2 of the reserved slots: no new block. */
    OK(kvc_append(p, 1, NULL, 2, 0, &nb));
    assert_int_equal(nb, 0);
    assert_int_equal(num_tokens_of(p, 1), 5);
    assert_int_equal(table_len(p, 1), 2); /* reservation kept (slot 5 still reserved) */
    OK(kvc_seq_slot_mapping(p, 1, 5, 1, slots, 1));
    /* 1 more + 2 lookahead = 8: still 2 blocks. */
    OK(kvc_append(p, 1, NULL, 1, 2, &nb));
    assert_int_equal(nb, 0);
    assert_int_equal(num_tokens_of(p, 1), 6);
    EXPECT_ERR_UNCHANGED(p, kvc_append(p, 1, NULL, 1, 2, &nb), KVC_ERR_MAX_LEN); /* 7 + 2 > 8 */
    OK(kvc_append(p, 1, NULL, 2, 0, &nb));
    assert_int_equal(num_tokens_of(p, 1), 8);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* kvc_can_alloc: NEVER if total - needed < W; OK if free - needed >= W; else LATER. */
static void test_watermark_boundaries(void **state) {
    (void)state;
    kvc_pool *p = make_pool_ex(16, 100, 0, 0.05, 0, 16); /* W = 5 */
    int32_t v = -1;
    OK(kvc_can_alloc(p, NULL, 95 * 16, NULL, &v));
    assert_int_equal(v, KVC_ALLOC_OK); /* free - 95 = 5 >= 5 */
    OK(kvc_can_alloc(p, NULL, 95 * 16 + 1, NULL, &v));
    assert_int_equal(v, KVC_ALLOC_NEVER); /* 96 blocks: 100 - 96 = 4 < 5 */
    OK(kvc_can_alloc(p, NULL, 1, NULL, &v));
    assert_int_equal(v, KVC_ALLOC_OK);
    OK(kvc_alloc(p, 1, NULL, 10 * 16, NULL, NULL)); /* 90 free */
    OK(kvc_can_alloc(p, NULL, 85 * 16, NULL, &v));
    assert_int_equal(v, KVC_ALLOC_OK); /* 90 - 85 = 5 */
    OK(kvc_can_alloc(p, NULL, 85 * 16 + 1, NULL, &v));
    assert_int_equal(v, KVC_ALLOC_LATER); /* 90 - 86 = 4 < 5, 100 - 86 = 14 >= 5 */
    OK(kvc_can_alloc(p, NULL, 95 * 16, NULL, &v));
    assert_int_equal(v, KVC_ALLOC_LATER); /* does not fit now, would after frees */
    OK(kvc_can_alloc(p, NULL, 96 * 16, NULL, &v));
    assert_int_equal(v, KVC_ALLOC_NEVER);
    kvc_stats before = stats_of(p);
    OK(kvc_can_alloc(p, NULL, 3, NULL, &v)); /* read-only */
    kvc_stats after = stats_of(p);
    assert_memory_equal(&before, &after, sizeof before);
    OK(kvc_pool_destroy(p));

    /* W = floor(0.019 x 100) = 1 */
    p = make_pool_ex(16, 100, 0, 0.019, 0, 16);
    OK(kvc_can_alloc(p, NULL, 99 * 16, NULL, &v));
    assert_int_equal(v, KVC_ALLOC_OK);
    OK(kvc_can_alloc(p, NULL, 99 * 16 + 1, NULL, &v));
    assert_int_equal(v, KVC_ALLOC_NEVER);
    OK(kvc_pool_destroy(p));

    /* W = 0: exactly the free blocks is OK, one more is LATER, more than the pool is NEVER. */
    p = make_pool_ex(4, 10, 0, 0.0, 0, 16);
    OK(kvc_alloc(p, 1, NULL, 12, NULL, NULL)); /* 7 free */
    OK(kvc_can_alloc(p, NULL, 28, NULL, &v));
    assert_int_equal(v, KVC_ALLOC_OK);
    OK(kvc_can_alloc(p, NULL, 29, NULL, &v));
    assert_int_equal(v, KVC_ALLOC_LATER);
    OK(kvc_can_alloc(p, NULL, 40, NULL, &v));
    assert_int_equal(v, KVC_ALLOC_LATER);
    OK(kvc_can_alloc(p, NULL, 41, NULL, &v));
    assert_int_equal(v, KVC_ALLOC_NEVER);
    OK(kvc_can_alloc(p, NULL, INT64_MAX, NULL, &v));
    assert_int_equal(v, KVC_ALLOC_NEVER);
    v = -1;
    EXPECT_ERR_UNCHANGED(p, kvc_can_alloc(NULL, NULL, 4, NULL, &v), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_can_alloc(p, NULL, 4, NULL, NULL), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_can_alloc(p, NULL, 0, NULL, &v), KVC_ERR_INVALID_ARG);
    assert_int_equal(v, -1);
    OK(kvc_pool_destroy(p));

    p = make_pool_ex(4, 10, 1, 0.0, 8, 16);
    int32_t tok[9] = {0};
    EXPECT_ERR_UNCHANGED(p, kvc_can_alloc(p, tok, 9, NULL, &v), KVC_ERR_MAX_LEN);
    EXPECT_ERR_UNCHANGED(p, kvc_can_alloc(p, NULL, 4, NULL, &v), KVC_ERR_NULL_ARG);
    OK(kvc_pool_destroy(p));
}

static void test_pending_copies_errors(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 4, 0);
    int32_t s[2], d[2];
    int64_t n = -1;
    EXPECT_ERR_UNCHANGED(p, kvc_take_pending_copies(NULL, s, d, 2, &n), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_take_pending_copies(p, s, d, 2, NULL), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_take_pending_copies(p, NULL, d, 2, &n), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_take_pending_copies(p, s, NULL, 2, &n), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_take_pending_copies(p, s, d, -1, &n), KVC_ERR_INVALID_ARG);
    assert_int_equal(n, -1);
    OK(kvc_take_pending_copies(p, NULL, NULL, 0, &n));
    assert_int_equal(n, 0);
    OK(kvc_take_pending_copies(p, s, d, 2, &n));
    assert_int_equal(n, 0);
    EXPECT_ERR_UNCHANGED(p, kvc_fork(NULL, 1, 2), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_free(NULL, 1), KVC_ERR_NULL_ARG);
    OK(kvc_pool_destroy(p));
}

static void test_many_sequences(void **state) {
    (void)state;
    /* More sequences than the initial reservation, with large and sparse ids. */
    kvc_pool *p = make_pool(1, 5000, 0);
    for (uint64_t i = 0; i < 5000; ++i) OK(kvc_alloc(p, i * 0x9E3779B97F4A7C15ull, NULL, 1, NULL, NULL));
    CHECK_POOL(p);
    assert_int_equal(stats_of(p).num_seqs, 5000);
    assert_int_equal(stats_of(p).free_blocks, 0);
    for (uint64_t i = 0; i < 5000; i += 2) OK(kvc_free(p, i * 0x9E3779B97F4A7C15ull));
    CHECK_POOL(p);
    assert_int_equal(stats_of(p).free_blocks, 2500);
    OK(kvc_pool_destroy(p)); /* with live sequences: no leak under ASan */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_append_free),
        cmocka_unit_test(test_slot_mapping),
        cmocka_unit_test(test_block_table_readout),
        cmocka_unit_test(test_alloc_errors),
        cmocka_unit_test(test_append_errors),
        cmocka_unit_test(test_lookahead),
        cmocka_unit_test(test_watermark_boundaries),
        cmocka_unit_test(test_pending_copies_errors),
        cmocka_unit_test(test_many_sequences),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
