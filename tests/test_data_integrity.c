/* KV bytes stay right when calls interleave (issue [data-integrity], README "Thread safety"):
 * deterministic forms of the races the byte-oracle stress (tests/stress/stress_bytes.c) finds by
 * chance. Every K/V element comes from tests/kv_oracle.h, so a read is checked against what its
 * position must hold, not against a copy the test kept.
 *   - D1: a copy-on-write copy must not run before the spill of the cached block evicted to make
 *     its destination (the spill would save the copy's bytes under the evicted block's identity).
 *     The test hook kvct_tier_hold_jobs leaves the spill pending, as a thread that planned it and
 *     has not run it yet would.
 *   - D3: a batch built for one life of a sequence id must not launch over the next life's blocks.
 *   - A sole holder writing in place (after kvc_truncate) into the source of a queued pair: the
 *     write must not reach the copy (storage accesses copy the pairs queued before them first).
 *   - Drained pairs hold their destination: freeing the sequence while its copy runs cannot hand
 *     the block to someone else (kvc_pool_check counts those holds). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "test_oracle_helpers.h"

/* D1. 4 blocks, host tier: prompt X (two full blocks) is cached and free; parent P holds the other
 * two blocks, its last one partial; its fork C appends one token, so C copies P's last block into
 * a fresh block -- one of X's, whose taking evicts it and plans its spill to the host tier. The
 * spill is held back; kvc_copy_pending must run it before copying. Then X re-hits from the host
 * tier and must get X's bytes, not P's. */
static void test_cow_copy_waits_for_the_spill_of_its_destination(void **state) {
    (void)state;
    oracle_pool o;
    kvc_pool *p = tier_pool(4, 1);
    oracle_init(&o, p);
    OK(kvc_tier_attach_host(p, 16));

    int32_t x[2 * TBS + 1], par[TBS + 3], child[TBS + 4];
    prompt(x, 2 * TBS + 1, 7);
    prompt(par, TBS + 3, 8);
    OK(kvc_alloc(p, 1, x, 2 * TBS, NULL, NULL));
    oracle_write(&o, 1, x, 0, 2 * TBS);
    OK(kvc_free(p, 1));  /* X's two full blocks: cached, refcount 0 */

    OK(kvc_alloc(p, 2, par, TBS + 3, NULL, NULL));  /* the two uncached free blocks */
    oracle_write(&o, 2, par, 0, TBS + 3);
    OK(kvc_fork(p, 2, 3));

    memcpy(child, par, sizeof par);
    child[TBS + 3] = 4242;
    kvct_tier_hold_jobs(p, 1);  /* the appending thread has planned the spill, not run it */
    OK(kvc_append(p, 3, &child[TBS + 3], 1, 0, NULL));
    assert_int_equal(stats_of(p).pending_copies, 1);
    int64_t copied = -1;
    OK(kvc_copy_pending(p, NULL, &copied));
    assert_int_equal(copied, 1);
    kvct_tier_hold_jobs(p, 0);
    OK(kvc_pool_check(p));

    oracle_write(&o, 3, child, TBS + 3, 1);
    oracle_expect(&o, 3, child, TBS + 4);  /* the copy: P's bytes + the new token */
    oracle_expect(&o, 2, par, TBS + 3);    /* the parent untouched */
    OK(kvc_free(p, 3));
    OK(kvc_free(p, 2));

    /* X again: the evicted block comes back from the host tier with X's bytes. */
    int64_t cached = -1;
    OK(kvc_alloc(p, 4, x, 2 * TBS + 1, NULL, &cached));
    assert_int_equal(cached, 2 * TBS);
    assert_true(tier_stats(p, KVC_TIER_HOST).hits >= 1);
    oracle_expect(&o, 4, x, 2 * TBS);
    OK(kvc_free(p, 4));
    OK(kvc_pool_check(p));
    OK(kvc_pool_destroy(p));
}

/* D3. A 3-block pool: sequence 5 (prompt A) is built into a batch, aborted, and id 5 allocated
 * again with prompt B -- on the same block ids. Launching the old batch must be refused: it would
 * compute over B's KV under A's lengths. */
static void test_batch_refuses_a_new_life_of_its_sequence_id(void **state) {
    (void)state;
    oracle_pool o;
    kvc_pool *p = tier_pool(3, 1);
    oracle_init(&o, p);
    int32_t a[2 * TBS], b[2 * TBS];
    prompt(a, 2 * TBS, 11);
    prompt(b, 2 * TBS, 12);
    OK(kvc_alloc(p, 5, a, 2 * TBS, NULL, NULL));
    oracle_write(&o, 5, a, 0, 2 * TBS);
    int32_t table_a[64], table_b[64];
    assert_int_equal(tier_table(p, 5, table_a), 2);

    kvc_batch *batch = NULL;
    OK(kvc_batch_create(p, 1, 2 * TBS, 4, &batch));
    const uint64_t ids[1] = {5};
    const int64_t q_lens[1] = {1};
    OK(kvc_batch_build(batch, ids, q_lens, 1));
    kvc_attention_params prm;
    OK(kvc_attention_params_default(&prm));
    prm.q_dtype = KVC_DTYPE_F32;
    float q[2 * 8] = {0}, out[2 * 8];
    OK(kvc_launch_attention(p, batch, 0, q, out, &prm, NULL));

    OK(kvc_abort(p, 5));
    OK(kvc_alloc(p, 5, b, 2 * TBS, NULL, NULL));  /* another tenant, the same id */
    assert_int_equal(tier_table(p, 5, table_b), 2);
    assert_memory_equal(table_a, table_b, 2 * sizeof(int32_t));  /* the same blocks: ids alone match */
    oracle_write(&o, 5, b, 0, 2 * TBS);

    plant_sentinel_error();
    assert_int_equal(kvc_launch_attention(p, batch, 0, q, out, &prm, NULL), KVC_ERR_STATE);
    assert_non_null(strstr(kvc_last_error(), "new sequence"));
    OK(kvc_batch_build(batch, ids, q_lens, 1));  /* rebuilt: the new life is fine */
    OK(kvc_launch_attention(p, batch, 0, q, out, &prm, NULL));
    OK(kvc_batch_destroy(batch));
    OK(kvc_free(p, 5));
    OK(kvc_pool_destroy(p));
}

/* P and its fork C share P's partial last block B. C appends: pair (B -> D) queued, C leaves B, so
 * P is B's sole holder. P then rewinds (speculative decoding rejected its last drafts) and writes
 * another token at a position C's copy must still take from B. Whether or not anyone called
 * kvc_copy_pending in between, C must keep the original bytes. */
static void test_write_in_place_waits_for_the_copy_reading_its_block(void **state) {
    (void)state;
    oracle_pool o;
    kvc_pool *p = tier_pool(8, 1);
    oracle_init(&o, p);
    int32_t par[TBS + 3], child[TBS + 4];
    prompt(par, TBS + 3, 14);
    OK(kvc_alloc(p, 1, par, TBS + 3, NULL, NULL));
    oracle_write(&o, 1, par, 0, TBS + 3);
    OK(kvc_fork(p, 1, 2));
    memcpy(child, par, sizeof par);
    child[TBS + 3] = 777;
    OK(kvc_append(p, 2, &child[TBS + 3], 1, 0, NULL));  /* pair (B -> D) queued */
    assert_int_equal(stats_of(p).pending_copies, 1);

    OK(kvc_truncate(p, 1, TBS + 1, NULL));  /* P keeps 5 tokens; B is P's alone */
    int32_t redo[TBS + 2];
    memcpy(redo, par, (TBS + 1) * sizeof(int32_t));
    redo[TBS + 1] = 555;  /* a different token at position TBS + 1, which C shares */
    OK(kvc_append(p, 1, &redo[TBS + 1], 1, 0, NULL));
    oracle_write(&o, 1, redo, TBS + 1, 1);  /* in place into B */
    const int64_t pending_after_write = stats_of(p).pending_copies;
    OK(kvc_pool_check(p));

    OK(kvc_copy_pending(p, NULL, NULL));  /* C's thread, as a server runs it before its pass */
    oracle_write(&o, 2, child, TBS + 3, 1);
    oracle_expect(&o, 2, child, TBS + 4);  /* C: the original shared tokens + its own */
    oracle_expect(&o, 1, redo, TBS + 2);   /* P: its rewritten history */
    assert_int_equal(pending_after_write, 0);  /* the write had copied the pair first */
    OK(kvc_free(p, 2));
    OK(kvc_free(p, 1));
    OK(kvc_pool_check(p));
    OK(kvc_pool_destroy(p));
}

/* kvc_take_pending_copies hands the pairs to the caller and keeps no hold, and the invariant
 * checker counts holds exactly (a pending pair: its src; none left once drained). */
static void test_drained_pairs_leave_no_holds(void **state) {
    (void)state;
    oracle_pool o;
    kvc_pool *p = tier_pool(8, 1);
    oracle_init(&o, p);
    int32_t par[TBS + 1], tok = 99;
    prompt(par, TBS + 1, 13);
    OK(kvc_alloc(p, 1, par, TBS + 1, NULL, NULL));
    oracle_write(&o, 1, par, 0, TBS + 1);
    OK(kvc_fork(p, 1, 2));
    OK(kvc_append(p, 2, &tok, 1, 0, NULL));
    OK(kvc_pool_check(p));
    int32_t src[4], dst[4];
    int64_t n = -1;
    OK(kvc_take_pending_copies(p, src, dst, 4, &n));
    assert_int_equal(n, 1);
    OK(kvc_pool_check(p));
    OK(kvc_free(p, 2));
    OK(kvc_free(p, 1));
    assert_int_equal(stats_of(p).free_blocks, 8);
    OK(kvc_pool_check(p));
    OK(kvc_pool_destroy(p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cow_copy_waits_for_the_spill_of_its_destination),
        cmocka_unit_test(test_batch_refuses_a_new_life_of_its_sequence_id),
        cmocka_unit_test(test_write_in_place_waits_for_the_copy_reading_its_block),
        cmocka_unit_test(test_drained_pairs_leave_no_holds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
