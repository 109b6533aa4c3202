/* Memory tiers, host tier: whole-sequence swap (round trip, shared blocks, refusal while swapped
 * out), preemption helpers, prefix spill to the host tier and re-hit, host eviction order, tier
 * statistics and every bad input of the tier API. CPU backend. */
#include "test_tier_helpers.h"

/* Snapshot of everything a refused tier call must leave alone. */
typedef struct snapshot {
    kvc_stats pool;
    kvc_tier_stats tiers[3];
} snapshot;

static snapshot snap(kvc_pool *p) {
    snapshot s;
    memset(&s, 0, sizeof s);
    s.pool = stats_of(p);
    for (int t = 0; t < 3; ++t) s.tiers[t] = tier_stats(p, t);
    return s;
}

#define EXPECT_TIER_ERR_UNCHANGED(p, call, code)                 \
    do {                                                         \
        snapshot before_ = snap(p);                              \
        EXPECT_ERR(call, code);                                  \
        snapshot after_ = snap(p);                               \
        assert_memory_equal(&before_, &after_, sizeof before_);  \
        CHECK_POOL(p);                                           \
    } while (0)

/* Swap out and back in: the host copy restores identical bytes, whatever was written into the
 * freed device blocks meanwhile. */
static void test_swap_round_trip(void **state) {
    (void)state;
    kvc_pool *p = tier_pool(8, 1);
    OK(kvc_tier_attach_host(p, 8));
    int32_t toks[16];
    prompt(toks, 10, 1);
    OK(kvc_alloc(p, 1, toks, 10, NULL, NULL));  /* 3 blocks */
    write_blocks(p, 1, 3, 7);
    int32_t before[64];
    assert_int_equal(tier_table(p, 1, before), 3);

    int64_t bytes = -1, tokens = -1;
    OK(kvc_preemption_cost(p, 1, &bytes, &tokens));
    assert_int_equal(bytes, 3 * TBLOCK_BYTES);
    assert_int_equal(tokens, 10);

    uint64_t op = 0;
    OK(kvc_swap_out(p, 1, &op));
    assert_true(op > 0);
    int32_t done = -1;
    OK(kvc_op_query(p, op, &done));
    assert_int_equal(done, 1);
    OK(kvc_op_wait(p, op));
    CHECK_POOL(p);

    int32_t during[64];
    assert_int_equal(tier_table(p, 1, during), 3);
    for (int i = 0; i < 3; ++i) assert_int_equal(during[i], -1);
    kvc_stats s = stats_of(p);
    assert_int_equal(s.used_blocks, 0);
    kvc_tier_stats h = tier_stats(p, KVC_TIER_HOST);
    assert_int_equal(h.capacity_blocks, 8);
    assert_int_equal(h.held_blocks, 3);
    assert_int_equal(h.used_blocks, 3);
    assert_int_equal(h.blocks_in, 3);
    assert_int_equal(h.bytes_in, 3 * TBLOCK_BYTES);
    assert_true(h.transfers >= 1);
    kvc_tier_stats d = tier_stats(p, KVC_TIER_DEVICE);
    assert_int_equal(d.blocks_out, 3);

    /* Cost of a swapped-out sequence: the bytes a swap-in moves. */
    OK(kvc_preemption_cost(p, 1, &bytes, &tokens));
    assert_int_equal(bytes, 3 * TBLOCK_BYTES);

    /* Reuse every device block with other bytes. */
    int32_t other[32];
    prompt(other, 32, 2);
    OK(kvc_alloc(p, 2, other, 32, NULL, NULL));
    write_blocks(p, 2, 8, 99);
    OK(kvc_free(p, 2));

    uint64_t op2 = 0;
    OK(kvc_swap_in(p, 1, &op2));
    assert_true(op2 > op);
    OK(kvc_op_wait(p, op2));
    OK(kvc_op_query(p, op2, &done));
    assert_int_equal(done, 1);
    CHECK_POOL(p);
    expect_blocks(p, 1, 3, 7);
    h = tier_stats(p, KVC_TIER_HOST);
    assert_int_equal(h.held_blocks, 0);
    assert_int_equal(h.blocks_out, 3);
    assert_true(h.transfer_seconds >= 0.0);
    assert_true(h.bandwidth_bytes_per_s >= 0.0);

    /* Usable again. */
    int32_t more[2] = {5, 6};
    OK(kvc_append(p, 1, more, 2, 0, NULL));
    int64_t n = 0;
    OK(kvc_seq_num_tokens(p, 1, &n));
    assert_int_equal(n, 12);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* Blocks shared with another sequence stay on the device with the swapped sequence's reference. */
static void test_swap_keeps_shared_blocks(void **state) {
    (void)state;
    kvc_pool *p = tier_pool(8, 1);
    OK(kvc_tier_attach_host(p, 4));
    int32_t toks[16];
    prompt(toks, 12, 3);
    OK(kvc_alloc(p, 1, toks, 12, NULL, NULL));  /* 3 full blocks */
    write_blocks(p, 1, 3, 11);
    OK(kvc_fork(p, 1, 2));
    int32_t one = 77;
    OK(kvc_append(p, 2, &one, 1, 0, NULL));  /* child gets a 4th block of its own */
    write_blocks(p, 2, 4, 11);
    int32_t child[64], parent[64];
    assert_int_equal(tier_table(p, 2, child), 4);

    int64_t bytes = 0;
    OK(kvc_preemption_cost(p, 2, &bytes, NULL));
    assert_int_equal(bytes, TBLOCK_BYTES);
    OK(kvc_preemption_cost(p, 1, &bytes, NULL));
    assert_int_equal(bytes, 0);

    OK(kvc_swap_out(p, 2, NULL));
    CHECK_POOL(p);
    int32_t during[64];
    assert_int_equal(tier_table(p, 2, during), 4);
    for (int i = 0; i < 3; ++i) {
        assert_int_equal(during[i], child[i]);
        assert_int_equal(kvct_block_refcount(p, child[i]), 2);
    }
    assert_int_equal(during[3], -1);
    assert_int_equal(tier_stats(p, KVC_TIER_HOST).held_blocks, 1);

    /* The parent keeps running meanwhile. */
    assert_int_equal(tier_table(p, 1, parent), 3);
    OK(kvc_append(p, 1, &one, 1, 0, NULL));
    CHECK_POOL(p);

    OK(kvc_swap_in(p, 2, NULL));
    CHECK_POOL(p);
    expect_blocks(p, 2, 4, 11);

    /* Swapping a sequence whose blocks are all shared moves nothing and still succeeds. */
    OK(kvc_fork(p, 1, 3));
    uint64_t op = 0;
    OK(kvc_swap_out(p, 3, &op));
    OK(kvc_op_wait(p, op));
    assert_int_equal(tier_stats(p, KVC_TIER_HOST).held_blocks, 0);
    OK(kvc_free(p, 3));  /* freeing a swapped-out sequence */
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* A swapped-out sequence is refused by append, fork, slot mapping and batch build; freeing it
 * releases its host slots; a batch built before the swap refuses to launch. */
static void test_swapped_sequence_is_refused(void **state) {
    (void)state;
    kvc_pool *p = tier_pool(8, 1);
    OK(kvc_tier_attach_host(p, 8));
    int32_t toks[16];
    prompt(toks, 6, 4);
    OK(kvc_alloc(p, 1, toks, 6, NULL, NULL));
    kvc_batch *b = NULL;
    OK(kvc_batch_create(p, 2, 16, 4, &b));
    uint64_t ids[1] = {1};
    int64_t q[1] = {1};
    OK(kvc_batch_build(b, ids, q, 1));

    OK(kvc_swap_out(p, 1, NULL));
    int32_t t = 1;
    int64_t slots[4];
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_append(p, 1, &t, 1, 0, NULL), KVC_ERR_STATE);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_fork(p, 1, 2), KVC_ERR_STATE);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_seq_slot_mapping(p, 1, 0, 4, slots, 4), KVC_ERR_STATE);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_batch_build(b, ids, q, 1), KVC_ERR_STATE);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_swap_out(p, 1, NULL), KVC_ERR_STATE);

    float qbuf[64], obuf[64];
    memset(qbuf, 0, sizeof qbuf);
    kvc_attention_params ap;
    OK(kvc_attention_params_default(&ap));
    ap.q_dtype = KVC_DTYPE_F32;
    EXPECT_ERR(kvc_launch_attention(p, b, 0, qbuf, obuf, &ap, NULL), KVC_ERR_STATE);

    OK(kvc_free(p, 1));
    CHECK_POOL(p);
    kvc_tier_stats h = tier_stats(p, KVC_TIER_HOST);
    assert_int_equal(h.held_blocks, 0);
    assert_int_equal(h.used_blocks, 0);
    OK(kvc_batch_destroy(b));
    OK(kvc_pool_destroy(p));
}

static void test_preempt_recompute(void **state) {
    (void)state;
    kvc_pool *p = tier_pool(8, 1);
    int32_t toks[16];
    prompt(toks, 10, 5);
    OK(kvc_alloc(p, 1, toks, 10, NULL, NULL));
    int64_t bytes = -1, tokens = -1;
    OK(kvc_preemption_cost(p, 1, &bytes, &tokens));  /* no tier needed to ask */
    assert_int_equal(bytes, 3 * TBLOCK_BYTES);
    assert_int_equal(tokens, 10);
    int64_t recompute = -1;
    OK(kvc_preempt_recompute(p, 1, &recompute));
    assert_int_equal(recompute, 10);
    int64_t n;
    EXPECT_ERR(kvc_seq_num_tokens(p, 1, &n), KVC_ERR_UNKNOWN_SEQ);
    assert_int_equal(stats_of(p).used_blocks, 0);
    /* Its full blocks stay cached for the recomputation. */
    int64_t cached = 0;
    OK(kvc_prefix_lookup(p, toks, 10, NULL, &cached));
    assert_int_equal(cached, 8);
    EXPECT_ERR(kvc_preempt_recompute(p, 1, &recompute), KVC_ERR_UNKNOWN_SEQ);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* A cached block evicted from the device moves to the host tier and is restored on a re-hit with
 * identical bytes; the allocation reports it as cached. */
static void test_spill_and_rehit_from_host(void **state) {
    (void)state;
    kvc_pool *p = tier_pool(8, 1);
    OK(kvc_tier_attach_host(p, 8));
    int32_t P[17];
    prompt(P, 17, 6);
    alloc_free(p, 1, P, 17, KVC_PRIORITY_DEFAULT, 21);  /* 4 full blocks cached */
    int64_t dev = -1, host = -1, disk = -1;
    lookup_tiers(p, P, 17, &dev, &host, &disk);
    assert_int_equal(dev, 16);
    assert_int_equal(host, 0);

    churn(p, 8, 100);  /* every block taken: the 4 cached ones are evicted to the host */
    CHECK_POOL(p);
    lookup_tiers(p, P, 17, &dev, &host, &disk);
    assert_int_equal(dev, 0);
    assert_int_equal(host, 16);
    assert_int_equal(disk, 0);
    int64_t cached = -1;
    OK(kvc_prefix_lookup(p, P, 17, NULL, &cached));
    assert_int_equal(cached, 16);
    kvc_tier_stats h = tier_stats(p, KVC_TIER_HOST);
    assert_int_equal(h.cached_blocks, 4);
    assert_int_equal(h.blocks_in, 4);
    assert_int_equal(tier_stats(p, KVC_TIER_DEVICE).blocks_out, 4);

    OK(kvc_alloc(p, 2, P, 17, NULL, &cached));
    assert_int_equal(cached, 16);
    CHECK_POOL(p);
    expect_blocks(p, 2, 4, 21);
    h = tier_stats(p, KVC_TIER_HOST);
    assert_int_equal(h.hits, 4);
    assert_int_equal(h.blocks_out, 4);
    /* Restored blocks are device-cached again: a second request shares them. */
    lookup_tiers(p, P, 17, &dev, &host, &disk);
    assert_int_equal(dev, 16);
    OK(kvc_alloc(p, 3, P, 17, NULL, &cached));
    assert_int_equal(cached, 16);
    int32_t t2[64], t3[64];
    tier_table(p, 2, t2);
    tier_table(p, 3, t3);
    assert_memory_equal(t2, t3, 4 * sizeof(int32_t));
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* A restore that does not fit in the device is refused with nothing moved. */
static void test_rehit_needs_room(void **state) {
    (void)state;
    kvc_pool *p = tier_pool(8, 1);
    OK(kvc_tier_attach_host(p, 8));
    int32_t P[17];
    prompt(P, 17, 7);
    alloc_free(p, 1, P, 17, KVC_PRIORITY_DEFAULT, 5);
    churn(p, 8, 100);
    int32_t small[TBS];
    for (int i = 0; i < 4; ++i) {
        prompt(small, TBS - 1, 500 + i);
        OK(kvc_alloc(p, 200 + (uint64_t)i, small, TBS - 1, NULL, NULL));
    }
    /* 4 free device blocks, the prompt needs 5 (4 restored + 1). */
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_alloc(p, 2, P, 17, NULL, NULL), KVC_ERR_OUT_OF_BLOCKS);
    int64_t host = 0;
    lookup_tiers(p, P, 17, NULL, &host, NULL);
    assert_int_equal(host, 16);
    OK(kvc_free(p, 200));
    int64_t cached = 0;
    OK(kvc_alloc(p, 2, P, 17, NULL, &cached));
    assert_int_equal(cached, 16);
    expect_blocks(p, 2, 4, 5);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* Host eviction: lowest retention priority first, least recently spilled within a priority. */
static void test_host_eviction_order(void **state) {
    (void)state;
    kvc_pool *p = tier_pool(4, 1);
    OK(kvc_tier_attach_host(p, 2));
    int32_t A[5], B[5], C[5], D[5];
    prompt(A, 5, 10);
    prompt(B, 5, 11);
    prompt(C, 5, 12);
    prompt(D, 5, 13);
    int64_t host = 0;
    alloc_free(p, 1, A, 5, 90, 1);
    alloc_free(p, 2, B, 5, 10, 2);
    churn(p, 4, 100);  /* device evicts B (10) then A (90): both to the host */
    lookup_tiers(p, A, 5, NULL, &host, NULL);
    assert_int_equal(host, 4);
    lookup_tiers(p, B, 5, NULL, &host, NULL);
    assert_int_equal(host, 4);

    alloc_free(p, 3, C, 5, 50, 3);
    churn(p, 4, 100);  /* C spills; host victim: B, the lowest priority */
    lookup_tiers(p, B, 5, NULL, &host, NULL);
    assert_int_equal(host, 0);
    lookup_tiers(p, A, 5, NULL, &host, NULL);
    assert_int_equal(host, 4);
    lookup_tiers(p, C, 5, NULL, &host, NULL);
    assert_int_equal(host, 4);

    alloc_free(p, 4, D, 5, 50, 4);
    churn(p, 4, 100);  /* D spills; victim: C (50) rather than A (90), though A is older */
    lookup_tiers(p, C, 5, NULL, &host, NULL);
    assert_int_equal(host, 0);
    lookup_tiers(p, A, 5, NULL, &host, NULL);
    assert_int_equal(host, 4);
    lookup_tiers(p, D, 5, NULL, &host, NULL);
    assert_int_equal(host, 4);
    assert_int_equal(tier_stats(p, KVC_TIER_HOST).evictions, 2);
    CHECK_POOL(p);

    /* A re-hit makes A most recently used at the new request's priority. */
    int64_t cached = 0;
    OK(kvc_alloc(p, 5, A, 5, NULL, &cached));
    assert_int_equal(cached, 4);
    expect_blocks(p, 5, 1, 1);
    OK(kvc_free(p, 5));
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* Without a host tier nothing spills and eviction drops as before. */
static void test_no_tier_no_spill(void **state) {
    (void)state;
    kvc_pool *p = tier_pool(4, 1);
    int32_t A[5];
    prompt(A, 5, 20);
    alloc_free(p, 1, A, 5, 50, 1);
    churn(p, 4, 100);
    int64_t dev = -1, host = -1, disk = -1;
    lookup_tiers(p, A, 5, &dev, &host, &disk);
    assert_int_equal(dev + host + disk, 0);
    kvc_tier_stats h = tier_stats(p, KVC_TIER_HOST);
    assert_int_equal(h.capacity_blocks, 0);
    kvc_tier_stats d = tier_stats(p, KVC_TIER_DEVICE);
    assert_int_equal(d.capacity_blocks, 4);
    assert_int_equal(d.evictions, 1);
    OK(kvc_pool_destroy(p));
}

/* Swap-out evicting cached host blocks; a host tier full of held blocks refuses. */
static void test_swap_capacity(void **state) {
    (void)state;
    kvc_pool *p = tier_pool(8, 1);
    OK(kvc_tier_attach_host(p, 3));
    int32_t A[9], S[16];
    prompt(A, 9, 30);
    alloc_free(p, 1, A, 9, 50, 1);
    churn(p, 8, 100);  /* A's 2 cached blocks go to the host */
    assert_int_equal(tier_stats(p, KVC_TIER_HOST).cached_blocks, 2);
    prompt(S, 12, 31);
    OK(kvc_alloc(p, 2, S, 12, NULL, NULL));  /* 3 blocks */
    write_blocks(p, 2, 3, 9);
    OK(kvc_swap_out(p, 2, NULL));  /* evicts the 2 cached host blocks */
    kvc_tier_stats h = tier_stats(p, KVC_TIER_HOST);
    assert_int_equal(h.held_blocks, 3);
    assert_int_equal(h.cached_blocks, 0);
    int64_t host = 0;
    lookup_tiers(p, A, 9, NULL, &host, NULL);
    assert_int_equal(host, 0);
    OK(kvc_alloc(p, 3, S, 4, NULL, NULL));
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_swap_out(p, 3, NULL), KVC_ERR_OUT_OF_BLOCKS);

    /* Swap-in without device room: refused, nothing moved. */
    int32_t big[32];
    prompt(big, 28, 32);
    OK(kvc_alloc(p, 4, big, 28, NULL, NULL));  /* 7 blocks: 1 + 7 = 8 used */
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_swap_in(p, 2, NULL), KVC_ERR_OUT_OF_BLOCKS);
    int32_t during[64];
    tier_table(p, 2, during);
    assert_int_equal(during[0], -1);
    OK(kvc_free(p, 4));
    OK(kvc_swap_in(p, 2, NULL));
    expect_blocks(p, 2, 3, 9);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

static void test_bad_input(void **state) {
    (void)state;
    kvc_pool *p = tier_pool(8, 1);
    int32_t toks[8];
    prompt(toks, 6, 40);
    OK(kvc_alloc(p, 1, toks, 6, NULL, NULL));
    uint64_t op = 0;
    int32_t done = 0;

    /* No host tier yet. */
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_swap_out(p, 1, &op), KVC_ERR_STATE);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_swap_in(p, 1, &op), KVC_ERR_STATE);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_op_query(p, 1, &done), KVC_ERR_INVALID_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_tier_attach_disk(p, "/tmp/kvc_never", 4, 0), KVC_ERR_STATE);

    EXPECT_ERR(kvc_tier_attach_host(NULL, 4), KVC_ERR_NULL_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_tier_attach_host(p, 0), KVC_ERR_INVALID_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_tier_attach_host(p, -3), KVC_ERR_INVALID_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_tier_attach_host(p, (int64_t)INT32_MAX + 1), KVC_ERR_INVALID_ARG);
    OK(kvc_tier_attach_host(p, 4));
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_tier_attach_host(p, 4), KVC_ERR_STATE);

    /* Metadata-only pools have no bytes to move. */
    kvc_pool *meta = make_pool_ex(4, 8, 1, 0.0, 0, 0);
    EXPECT_ERR(kvc_tier_attach_host(meta, 4), KVC_ERR_STATE);
    OK(kvc_pool_destroy(meta));

    /* Disk attach arguments. */
    EXPECT_ERR(kvc_tier_attach_disk(NULL, "/tmp/x", 4, 0), KVC_ERR_NULL_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_tier_attach_disk(p, NULL, 4, 0), KVC_ERR_NULL_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_tier_attach_disk(p, "", 4, 0), KVC_ERR_INVALID_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_tier_attach_disk(p, "/tmp/kvc_never", 0, 0), KVC_ERR_INVALID_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_tier_attach_disk(p, "/tmp/kvc_never", 4, 0x40), KVC_ERR_INVALID_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_tier_attach_disk(p, "/nonexistent_dir_kvc/x/tier.bin", 4, 0), KVC_ERR_IO);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_tier_attach_disk(p, "/tmp", 4, 0), KVC_ERR_IO);  /* a directory */
    if (access("/proc/version", W_OK) != 0)  /* unwritable file (not as root) */
        EXPECT_TIER_ERR_UNCHANGED(p, kvc_tier_attach_disk(p, "/proc/version", 4, 0), KVC_ERR_IO);

    /* Swap arguments and states. */
    EXPECT_ERR(kvc_swap_out(NULL, 1, &op), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_swap_in(NULL, 1, &op), KVC_ERR_NULL_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_swap_out(p, 999, &op), KVC_ERR_UNKNOWN_SEQ);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_swap_in(p, 999, &op), KVC_ERR_UNKNOWN_SEQ);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_swap_in(p, 1, &op), KVC_ERR_STATE);
    op = 0;
    OK(kvc_swap_out(p, 1, &op));
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_swap_out(p, 1, NULL), KVC_ERR_STATE);

    /* Pending copy-on-write pairs of the sequence: refused until drained. */
    OK(kvc_swap_in(p, 1, NULL));
    OK(kvc_fork(p, 1, 2));
    int32_t t = 3;
    OK(kvc_append(p, 2, &t, 1, 0, NULL));  /* partial last block shared: a copy is queued */
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_swap_out(p, 2, NULL), KVC_ERR_BUSY);
    int64_t copied = 0;
    OK(kvc_copy_pending(p, NULL, &copied));
    assert_int_equal(copied, 1);
    OK(kvc_swap_out(p, 2, NULL));

    /* Operation ids. */
    EXPECT_ERR(kvc_op_query(NULL, op, &done), KVC_ERR_NULL_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_op_query(p, op, NULL), KVC_ERR_NULL_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_op_query(p, 0, &done), KVC_ERR_INVALID_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_op_query(p, op + 1000, &done), KVC_ERR_INVALID_ARG);
    EXPECT_ERR(kvc_op_wait(NULL, op), KVC_ERR_NULL_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_op_wait(p, 0), KVC_ERR_INVALID_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_op_wait(p, op + 1000), KVC_ERR_INVALID_ARG);

    /* Preemption helpers. */
    int64_t v = 0;
    EXPECT_ERR(kvc_preempt_recompute(NULL, 1, &v), KVC_ERR_NULL_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_preempt_recompute(p, 999, &v), KVC_ERR_UNKNOWN_SEQ);
    EXPECT_ERR(kvc_preemption_cost(NULL, 1, &v, &v), KVC_ERR_NULL_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_preemption_cost(p, 999, &v, &v), KVC_ERR_UNKNOWN_SEQ);

    /* Lookup and stats. */
    EXPECT_ERR(kvc_prefix_lookup_tiers(NULL, toks, 6, NULL, &v, &v, &v), KVC_ERR_NULL_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_prefix_lookup_tiers(p, NULL, 6, NULL, &v, &v, &v), KVC_ERR_NULL_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_prefix_lookup_tiers(p, toks, 0, NULL, &v, &v, &v), KVC_ERR_INVALID_ARG);
    kvc_tier_stats ts;
    memset(&ts, 0, sizeof ts);
    ts.struct_size = sizeof ts;
    EXPECT_ERR(kvc_tier_get_stats(NULL, KVC_TIER_HOST, &ts), KVC_ERR_NULL_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_tier_get_stats(p, KVC_TIER_HOST, NULL), KVC_ERR_NULL_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_tier_get_stats(p, 3, &ts), KVC_ERR_INVALID_ARG);
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_tier_get_stats(p, -1, &ts), KVC_ERR_INVALID_ARG);
    ts.struct_size = 8;
    EXPECT_TIER_ERR_UNCHANGED(p, kvc_tier_get_stats(p, KVC_TIER_HOST, &ts), KVC_ERR_VERSION);
    assert_int_equal(ts.struct_size, 8);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* The checker sees a corrupted swap record. */
static void test_check_detects_bad_swap_state(void **state) {
    (void)state;
    kvc_pool *p = tier_pool(8, 1);
    OK(kvc_tier_attach_host(p, 4));
    int32_t toks[8];
    prompt(toks, 6, 41);
    OK(kvc_alloc(p, 1, toks, 6, NULL, NULL));
    OK(kvc_swap_out(p, 1, NULL));
    CHECK_POOL(p);
    assert_int_equal(kvct_tier_slots_in_state(p, KVC_TIER_HOST, 2), 2);
    assert_int_equal(kvct_tier_slots_in_state(p, KVC_TIER_HOST, 0), 2);
    assert_int_equal(kvct_tier_slots_in_state(p, KVC_TIER_HOST, 3), 0);
    assert_int_equal(kvct_tier_slots_in_state(p, KVC_TIER_DISK, 0), -1);
    /* A held slot that claims to be free, then a free slot that claims to be held. */
    int32_t held = -1, free_slot = -1;
    for (int32_t s = 0; s < 4; ++s) {
        int32_t old = kvct_tier_corrupt_slot(p, KVC_TIER_HOST, s, 0);  /* read the state... */
        kvct_tier_corrupt_slot(p, KVC_TIER_HOST, s, old);              /* ...and put it back */
        if (old == 2 && held < 0) held = s;
        if (old == 0 && free_slot < 0) free_slot = s;
    }
    assert_true(held >= 0 && free_slot >= 0);
    kvct_tier_corrupt_slot(p, KVC_TIER_HOST, held, 0);
    EXPECT_ERR(kvc_pool_check(p), KVC_ERR_INTERNAL);
    kvct_tier_corrupt_slot(p, KVC_TIER_HOST, held, 2);
    CHECK_POOL(p);
    kvct_tier_corrupt_slot(p, KVC_TIER_HOST, free_slot, 2);
    EXPECT_ERR(kvc_pool_check(p), KVC_ERR_INTERNAL);
    kvct_tier_corrupt_slot(p, KVC_TIER_HOST, free_slot, 0);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_swap_round_trip),
        cmocka_unit_test(test_swap_keeps_shared_blocks),
        cmocka_unit_test(test_swapped_sequence_is_refused),
        cmocka_unit_test(test_preempt_recompute),
        cmocka_unit_test(test_spill_and_rehit_from_host),
        cmocka_unit_test(test_rehit_needs_room),
        cmocka_unit_test(test_host_eviction_order),
        cmocka_unit_test(test_no_tier_no_spill),
        cmocka_unit_test(test_swap_capacity),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_check_detects_bad_swap_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
