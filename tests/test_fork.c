/* Fork and copy-on-write chains. */
#include "test_pool_helpers.h"

static int64_t pending(kvc_pool *p) {
    int64_t n = -1;
    OK(kvc_take_pending_copies(p, NULL, NULL, 0, &n));
    return n;
}

static void test_fork_shares_blocks(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 8, 0);
    OK(kvc_alloc(p, 1, NULL, 6, NULL, NULL)); /* blocks 0, 1 (1 holds 2 tokens) */
    OK(kvc_fork(p, 1, 2));
    CHECK_POOL(p);
    int32_t a[4], b[4];
    assert_int_equal(table_of(p, 1, a, 4), 2);
    assert_int_equal(table_of(p, 2, b, 4), 2);
    assert_memory_equal(a, b, 2 * sizeof(int32_t));
    assert_int_equal(kvct_block_refcount(p, 0), 2);
    assert_int_equal(kvct_block_refcount(p, 1), 2);
    assert_int_equal(num_tokens_of(p, 2), 6);
    kvc_stats s = stats_of(p);
    assert_int_equal(s.used_blocks, 2); /* no data, no block copied */
    assert_int_equal(s.forks, 1);
    assert_int_equal(s.num_seqs, 2);

    EXPECT_ERR_UNCHANGED(p, kvc_fork(p, 1, 1), KVC_ERR_INVALID_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_fork(p, 9, 3), KVC_ERR_UNKNOWN_SEQ);
    EXPECT_ERR_UNCHANGED(p, kvc_fork(p, 1, 2), KVC_ERR_SEQ_EXISTS);

    /* Child writes into the shared partial block: copy-on-write. */
    int32_t nb = -1;
    OK(kvc_append(p, 2, NULL, 1, 0, &nb));
    CHECK_POOL(p);
    assert_int_equal(nb, 1);
    assert_int_equal(table_of(p, 2, b, 4), 2);
    assert_int_equal(b[0], 0);      /* full shared block stays shared */
    assert_int_not_equal(b[1], 1);  /* the partial one was replaced */
    assert_int_equal(table_of(p, 1, a, 4), 2);
    assert_int_equal(a[1], 1);      /* parent untouched */
    assert_int_equal(kvct_block_refcount(p, 1), 1);
    assert_int_equal(kvct_block_refcount(p, b[1]), 1);
    assert_int_equal(kvct_block_refcount(p, 0), 2);
    s = stats_of(p);
    assert_int_equal(s.cow_copies, 1);
    assert_int_equal(s.pending_copies, 1);
    int32_t src[4], dst[4];
    int64_t n = -1;
    OK(kvc_take_pending_copies(p, src, dst, 4, &n));
    assert_int_equal(n, 1);
    assert_int_equal(src[0], 1);
    assert_int_equal(dst[0], b[1]);
    assert_int_equal(pending(p), 0);

    /* Parent now owns block 1 alone: appending needs no copy. */
    OK(kvc_append(p, 1, NULL, 2, 0, &nb));
    assert_int_equal(nb, 0);
    assert_int_equal(stats_of(p).cow_copies, 1);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

static void test_cow_at_block_boundary(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 8, 0);
    OK(kvc_alloc(p, 1, NULL, 8, NULL, NULL)); /* two full blocks */
    OK(kvc_fork(p, 1, 2));
    int32_t nb = -1;
    OK(kvc_append(p, 2, NULL, 1, 0, &nb)); /* shared last block is full: new block, no copy */
    CHECK_POOL(p);
    assert_int_equal(nb, 1);
    assert_int_equal(stats_of(p).cow_copies, 0);
    assert_int_equal(pending(p), 0);
    assert_int_equal(kvct_block_refcount(p, 0), 2);
    assert_int_equal(kvct_block_refcount(p, 1), 2);
    assert_int_equal(table_len(p, 2), 3);
    OK(kvc_append(p, 1, NULL, 1, 0, &nb));
    assert_int_equal(nb, 1);
    assert_int_equal(stats_of(p).cow_copies, 0);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

static void test_fork_of_fork_free_parent_first(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 12, 0);
    OK(kvc_alloc(p, 1, NULL, 6, NULL, NULL));
    OK(kvc_fork(p, 1, 2));
    OK(kvc_fork(p, 2, 3)); /* fork of a fork */
    CHECK_POOL(p);
    assert_int_equal(kvct_block_refcount(p, 0), 3);
    assert_int_equal(kvct_block_refcount(p, 1), 3);
    OK(kvc_free(p, 1)); /* the root goes first */
    CHECK_POOL(p);
    assert_int_equal(kvct_block_refcount(p, 1), 2);
    assert_int_equal(stats_of(p).used_blocks, 2);
    int32_t nb = -1;
    OK(kvc_append(p, 2, NULL, 1, 0, &nb)); /* still shared with 3: copy */
    assert_int_equal(nb, 1);
    assert_int_equal(stats_of(p).cow_copies, 1);
    OK(kvc_append(p, 3, NULL, 1, 0, &nb)); /* now sole owner of block 1: no copy */
    assert_int_equal(nb, 0);
    assert_int_equal(stats_of(p).cow_copies, 1);
    CHECK_POOL(p);
    int32_t t3[4];
    table_of(p, 3, t3, 4);
    assert_int_equal(t3[1], 1);
    OK(kvc_free(p, 2));
    CHECK_POOL(p);
    OK(kvc_free(p, 3));
    CHECK_POOL(p);
    kvc_stats s = stats_of(p);
    assert_int_equal(s.free_blocks, 12);
    assert_int_equal(s.used_blocks, 0);
    assert_int_equal(s.num_seqs, 0);
    OK(kvc_pool_destroy(p));
}

static void test_cow_chain_of_children(void **state) {
    (void)state;
    /* One parent, four children each writing: four copies of the shared block, each from block 1. */
    kvc_pool *p = make_pool(4, 16, 0);
    OK(kvc_alloc(p, 100, NULL, 5, NULL, NULL));
    for (uint64_t c = 1; c <= 4; ++c) OK(kvc_fork(p, 100, c));
    assert_int_equal(kvct_block_refcount(p, 1), 5);
    for (uint64_t c = 1; c <= 4; ++c) {
        OK(kvc_append(p, c, NULL, 1, 0, NULL));
        CHECK_POOL(p);
    }
    assert_int_equal(kvct_block_refcount(p, 1), 1); /* the parent's */
    assert_int_equal(kvct_block_refcount(p, 0), 5);
    int32_t src[8], dst[8];
    int64_t n = 0;
    OK(kvc_take_pending_copies(p, src, dst, 3, &n)); /* partial drain, oldest first */
    assert_int_equal(n, 3);
    for (int i = 0; i < 3; ++i) assert_int_equal(src[i], 1);
    OK(kvc_take_pending_copies(p, src + 3, dst + 3, 8, &n));
    assert_int_equal(n, 1);
    for (int i = 0; i < 4; ++i) {
        int32_t t[2];
        table_of(p, (uint64_t)i + 1, t, 2);
        assert_int_equal(dst[i], t[1]);
    }
    OK(kvc_pool_destroy(p));
}

static void test_cow_with_lookahead_and_out_of_blocks(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 4, 0);
    OK(kvc_alloc(p, 1, NULL, 3, NULL, NULL));
    OK(kvc_append(p, 1, NULL, 0, 3, NULL)); /* blocks 0 (3 tokens) + 1 (lookahead only) */
    OK(kvc_fork(p, 1, 2));
    int32_t nb = -1;
    OK(kvc_append(p, 2, NULL, 1, 0, &nb)); /* writes position 3 only: copies block 0, not block 1 */
    CHECK_POOL(p);
    assert_int_equal(nb, 1);
    assert_int_equal(kvct_block_refcount(p, 1), 2);
    /* Reserving lookahead into a shared block copies it too. */
    OK(kvc_append(p, 2, NULL, 0, 2, &nb)); /* slots 4, 5 in shared block 1 */
    assert_int_equal(nb, 1);
    CHECK_POOL(p);
    assert_int_equal(stats_of(p).cow_copies, 2);
    assert_int_equal(stats_of(p).free_blocks, 0);
    /* The parent's next write into block 0 needs no copy (sole owner); a new block would not fit. */
    OK(kvc_append(p, 1, NULL, 1, 0, &nb));
    assert_int_equal(nb, 0);
    OK(kvc_fork(p, 1, 3));
    EXPECT_ERR_UNCHANGED(p, kvc_append(p, 3, NULL, 1, 0, &nb), KVC_ERR_OUT_OF_BLOCKS); /* COW needs a block */
    OK(kvc_pool_destroy(p));
}

static void test_free_cancels_pending_pairs_into_its_blocks(void **state) {
    (void)state;
    /* A pair whose destination goes back to the free lists is cancelled: its copy would land in a
     * block that may have a new owner by the time the pairs are drained. */
    kvc_pool *p = make_pool(4, 4, 0);
    OK(kvc_alloc(p, 1, NULL, 1, NULL, NULL));
    for (int i = 0; i < 10; ++i) {
        OK(kvc_fork(p, 1, 2));
        OK(kvc_append(p, 2, NULL, 1, 0, NULL)); /* copy-on-write: pair (0 -> fresh) */
        assert_int_equal(pending(p), 1);
        OK(kvc_free(p, 2));
        CHECK_POOL(p);
        assert_int_equal(pending(p), 0);
        assert_int_equal(stats_of(p).free_blocks, 3);
    }
    /* A live destination keeps its pair. */
    OK(kvc_fork(p, 1, 2));
    OK(kvc_append(p, 2, NULL, 1, 0, NULL));
    OK(kvc_fork(p, 2, 3)); /* the destination is shared now: freeing one holder keeps it */
    OK(kvc_free(p, 2));
    CHECK_POOL(p);
    assert_int_equal(pending(p), 1);
    OK(kvc_pool_destroy(p));
}

static void test_pending_pair_holds_its_source(void **state) {
    (void)state;
    /* The source of a pending pair keeps its bytes until the pair is drained, even when its last
     * holder lets it go: it is neither free nor reused. */
    kvc_pool *p = make_pool(4, 3, 0);
    OK(kvc_alloc(p, 1, NULL, 2, NULL, NULL)); /* block 0 */
    OK(kvc_fork(p, 1, 2));
    OK(kvc_append(p, 2, NULL, 1, 0, NULL)); /* pair (0 -> 1) */
    int32_t t2[1];
    table_of(p, 2, t2, 1);
    assert_int_equal(t2[0], 1);
    assert_int_equal(kvct_block_refcount(p, 0), 1); /* not a sharer: sequence 1 writes in place */
    int32_t nb = -1;
    OK(kvc_append(p, 1, NULL, 1, 0, &nb));
    assert_int_equal(nb, 0);
    OK(kvc_free(p, 1)); /* block 0 has no holder but the pair */
    CHECK_POOL(p);
    kvc_stats s = stats_of(p);
    assert_int_equal(s.free_blocks, 1);
    assert_int_equal(s.used_blocks, 2);
    /* Only block 2 can be taken; block 0 is not handed out while the pair is pending. */
    OK(kvc_alloc(p, 3, NULL, 1, NULL, NULL));
    int32_t t3[1];
    table_of(p, 3, t3, 1);
    assert_int_equal(t3[0], 2);
    EXPECT_ERR_UNCHANGED(p, kvc_alloc(p, 4, NULL, 1, NULL, NULL), KVC_ERR_OUT_OF_BLOCKS);
    int32_t src[2], dst[2];
    int64_t n = 0;
    OK(kvc_take_pending_copies(p, src, dst, 2, &n));
    assert_int_equal(n, 1);
    assert_int_equal(src[0], 0);
    assert_int_equal(dst[0], 1);
    CHECK_POOL(p);
    assert_int_equal(stats_of(p).free_blocks, 1); /* drained: block 0 is free again */
    OK(kvc_alloc(p, 4, NULL, 1, NULL, NULL));
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

static void test_unpinned_destination_cancels_its_pair(void **state) {
    (void)state;
    /* The destination of a pending pair fills up (cached), gets pinned, loses its holder, then its
     * pin: it is free at that moment, so the pair must go too. */
    kvc_pool *p = make_pool(4, 8, 1);
    int32_t t[8];
    iota_tokens(t, 8, 10);
    OK(kvc_alloc(p, 1, t, 6, NULL, NULL));
    OK(kvc_fork(p, 1, 2));
    OK(kvc_append(p, 2, t + 6, 2, 0, NULL)); /* copy-on-write, and the copy is full: cached */
    assert_int_equal(pending(p), 1);
    int64_t pinned = 0;
    OK(kvc_prefix_pin(p, t, 8, NULL, &pinned));
    assert_int_equal(pinned, 8);
    OK(kvc_free(p, 2));
    CHECK_POOL(p);
    assert_int_equal(pending(p), 1); /* pinned: not free, its pair stays */
    OK(kvc_prefix_unpin(p, t, 8, NULL, NULL));
    CHECK_POOL(p);
    assert_int_equal(pending(p), 0);
    OK(kvc_pool_destroy(p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fork_shares_blocks),
        cmocka_unit_test(test_cow_at_block_boundary),
        cmocka_unit_test(test_fork_of_fork_free_parent_first),
        cmocka_unit_test(test_cow_chain_of_children),
        cmocka_unit_test(test_cow_with_lookahead_and_out_of_blocks),
        cmocka_unit_test(test_free_cancels_pending_pairs_into_its_blocks),
        cmocka_unit_test(test_pending_pair_holds_its_source),
        cmocka_unit_test(test_unpinned_destination_cancels_its_pair),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
