/* Copy-on-write pairs meet tier restores. A restore writes a fresh device block at once (CPU) or
 * ahead of the step's copies on the tier stream (CUDA), so between kvc_append queueing a pair and
 * kvc_copy_pending running it:
 *  - the pair's source must not be handed out again, even if every sequence has let it go;
 *  - a pair into a block that was freed must not run, or it overwrites the block's new owner.
 * Both used to corrupt KV: the restored prompt's (dst case) or the copying sequence's (src case).
 * And a swap-out of the sequence a pair reads from goes ahead, with the same guarantee. */
#include "test_tier_helpers.h"

enum { SEED_PROMPT = 21, SEED_A = 31 };

/* A pool whose host tier holds prompt P's first block (content pattern(SEED_PROMPT, 0)), spilled
 * from the device, with every device block free. */
static kvc_pool *pool_with_spilled_prompt(int32_t *P) {
    kvc_pool *p = tier_pool(8, 1);
    OK(kvc_tier_attach_host(p, 8));
    prompt(P, 5, 6);
    alloc_free(p, 1, P, 5, KVC_PRIORITY_DEFAULT, SEED_PROMPT);
    churn(p, 8, 100);
    int64_t dev = -1, host = -1;
    lookup_tiers(p, P, 5, &dev, &host, NULL);
    assert_int_equal(dev, 0);
    assert_int_equal(host, 4);
    return p;
}

static void test_freed_destination_is_not_copied_into(void **state) {
    (void)state;
    int32_t P[5], Q[8];
    kvc_pool *p = pool_with_spilled_prompt(P);
    prompt(Q, 7, 7);
    OK(kvc_alloc(p, 10, Q, 6, NULL, NULL)); /* A: 1 full + 1 partial block */
    write_blocks(p, 10, 2, SEED_A);
    OK(kvc_fork(p, 10, 11));
    OK(kvc_append(p, 11, Q + 6, 1, 0, NULL)); /* B copies A's partial block: pair (a1 -> d) */
    assert_int_equal(stats_of(p).pending_copies, 1);
    OK(kvc_free(p, 11)); /* B is cancelled before the step runs: d is free again */
    CHECK_POOL(p);

    int64_t cached = -1;
    OK(kvc_alloc(p, 12, P, 5, NULL, &cached)); /* C: P's block restored into a fresh block */
    assert_int_equal(cached, 4);
    int64_t copied = -1;
    OK(kvc_copy_pending(p, NULL, &copied));
    assert_int_equal(copied, 0);
    expect_blocks(p, 12, 1, SEED_PROMPT);
    expect_blocks(p, 10, 2, SEED_A);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

static void test_pending_source_is_not_reused(void **state) {
    (void)state;
    int32_t P[5], Q[8];
    kvc_pool *p = pool_with_spilled_prompt(P);
    prompt(Q, 7, 7);
    OK(kvc_alloc(p, 10, Q, 6, NULL, NULL)); /* A */
    write_blocks(p, 10, 2, SEED_A);
    OK(kvc_fork(p, 10, 11));
    OK(kvc_append(p, 10, Q + 6, 1, 0, NULL)); /* A copies the shared partial block: pair (a1 -> d) */
    OK(kvc_free(p, 11));                      /* B, a1's other holder, finishes first */
    CHECK_POOL(p);

    int64_t cached = -1;
    OK(kvc_alloc(p, 12, P, 5, NULL, &cached)); /* C's restore must not land in a1 */
    assert_int_equal(cached, 4);
    int64_t copied = -1;
    OK(kvc_copy_pending(p, NULL, &copied));
    assert_int_equal(copied, 1);
    expect_blocks(p, 10, 2, SEED_A); /* A's copy holds a1's bytes */
    expect_blocks(p, 12, 1, SEED_PROMPT);
    CHECK_POOL(p);
    assert_int_equal(stats_of(p).used_blocks, 4); /* a1 was released by the copy */
    OK(kvc_pool_destroy(p));
}

/* Same, with the caller draining the pairs: the holds end when kvc_take_pending_copies returns. */
static void test_taken_pairs_release_their_sources(void **state) {
    (void)state;
    int32_t P[5], Q[8];
    kvc_pool *p = pool_with_spilled_prompt(P);
    prompt(Q, 7, 7);
    OK(kvc_alloc(p, 10, Q, 6, NULL, NULL));
    OK(kvc_fork(p, 10, 11));
    OK(kvc_append(p, 10, Q + 6, 1, 0, NULL));
    OK(kvc_free(p, 11));
    const int64_t free_before = stats_of(p).free_blocks;
    int32_t src[4], dst[4];
    int64_t n = 0;
    OK(kvc_take_pending_copies(p, src, dst, 4, &n));
    assert_int_equal(n, 1);
    CHECK_POOL(p);
    assert_int_equal(stats_of(p).free_blocks, free_before + 1);
    OK(kvc_pool_destroy(p));
}

/* Swapping out the sequence a pending pair reads from (B forked A and wrote into their shared
 * partial block: pair (a1 -> d)): A's blocks go to the host tier at once (it used to be refused
 * with KVC_ERR_BUSY), a1 stays reserved for the pair, and the copy, A's swap-in and everything a
 * reuse of a1 would break still read the right bytes. The sequence the pair writes into stays
 * refused until the pair is drained. */
static void test_source_of_pending_pair_swaps_out(void **state) {
    (void)state;
    kvc_pool *p = tier_pool(8, 1);
    OK(kvc_tier_attach_host(p, 8));
    int32_t Q[8];
    prompt(Q, 7, 8);
    OK(kvc_alloc(p, 10, Q, 6, NULL, NULL)); /* A: a0 full, a1 partial */
    write_blocks(p, 10, 2, SEED_A);
    OK(kvc_fork(p, 10, 11));
    OK(kvc_append(p, 11, Q + 6, 1, 0, NULL)); /* B writes into the shared a1: pair (a1 -> d) */
    assert_int_equal(stats_of(p).pending_copies, 1);
    EXPECT_ERR(kvc_swap_out(p, 11, NULL), KVC_ERR_BUSY); /* d not written yet */

    OK(kvc_swap_out(p, 10, NULL)); /* a1 (refcount 1) to the host; a0 stays, shared with B */
    assert_int_equal(tier_stats(p, KVC_TIER_HOST).held_blocks, 1);
    assert_int_equal(stats_of(p).pending_copies, 1);
    CHECK_POOL(p);
    /* Every block the pool can hand out now, overwritten: a1 must not be among them. */
    const int64_t free_now = stats_of(p).free_blocks;
    assert_int_equal(free_now, 5); /* 8 - a0 - d - a1 (held by the pair) */
    int32_t R[32];
    prompt(R, (int64_t)free_now * TBS, 9);
    OK(kvc_alloc(p, 12, R, free_now * TBS, NULL, NULL));
    write_blocks(p, 12, free_now, 99);
    /* A storage access copies the pairs queued before it first (README, Thread safety). */
    assert_int_equal(stats_of(p).pending_copies, 0);
    int64_t copied = -1;
    OK(kvc_copy_pending(p, NULL, &copied));
    assert_int_equal(copied, 0);
    expect_blocks(p, 11, 2, SEED_A); /* B: a0 shared, d = a1's bytes */
    OK(kvc_free(p, 12));
    OK(kvc_swap_in(p, 10, NULL));
    expect_blocks(p, 10, 2, SEED_A); /* A back from the host tier */
    OK(kvc_swap_out(p, 11, NULL)); /* drained: B may go now */
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_freed_destination_is_not_copied_into),
        cmocka_unit_test(test_pending_source_is_not_reused),
        cmocka_unit_test(test_taken_pairs_release_their_sources),
        cmocka_unit_test(test_source_of_pending_pair_swaps_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
