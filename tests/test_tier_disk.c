/* Memory tiers, disk tier: host victims spill to the disk file and come back on a prefix re-hit
 * with identical bytes (io_uring and pread/pwrite paths), eviction order, persistence across pool
 * destroy/create, and integrity: injected ENOSPC / EIO on write, EIO / short read / flipped bit on
 * read, and corruption of the file itself all end as counted misses with a consistent pool; a
 * persistent file recovers only its own identity's blocks. */
#include <fcntl.h>
#include <sys/stat.h>

#include "test_tier_helpers.h"

enum { DEV_BLOCKS = 8, HOST_SLOTS = 4, DISK_SLOTS = 16, NP = 17 };

static int setup(void **state) { return disk_fixture_setup(state); }
static int teardown(void **state) { return disk_fixture_teardown(state); }

static kvc_pool *disk_pool(const char *path, int32_t flags) {
    kvc_pool *p = tier_pool(DEV_BLOCKS, 1);
    OK(kvc_tier_attach_host(p, HOST_SLOTS));
    OK(kvc_tier_attach_disk(p, path, DISK_SLOTS, flags));
    return p;
}

/* Puts prompt P's 4 full blocks on disk: P spills to the host, then prompt R's blocks push it down. */
static void push_to_disk(kvc_pool *p, const int32_t *P, uint32_t seed) {
    int32_t R[NP];
    prompt(R, NP, 77);
    alloc_free(p, 1, P, NP, KVC_PRIORITY_DEFAULT, seed);
    churn(p, DEV_BLOCKS, 100);
    alloc_free(p, 2, R, NP, KVC_PRIORITY_DEFAULT, seed + 1);
    churn(p, DEV_BLOCKS, 100);
}

static void expect_tiers(kvc_pool *p, const int32_t *P, int64_t dev, int64_t host, int64_t disk) {
    int64_t d = -1, h = -1, k = -1;
    lookup_tiers(p, P, NP, &d, &h, &k);
    assert_int_equal(d, dev);
    assert_int_equal(h, host);
    assert_int_equal(k, disk);
}

static void rehit_from_disk(disk_fixture *f, int sync_io) {
    kvct_disk_force_sync_io(sync_io);
    kvc_pool *p = disk_pool(f->path, 0);
    kvc_tier_stats k = tier_stats(p, KVC_TIER_DISK);
    assert_int_equal(k.capacity_blocks, DISK_SLOTS);
    if (sync_io) assert_int_equal(k.io_uring, 0);
    int32_t P[NP];
    prompt(P, NP, 1);
    push_to_disk(p, P, 31);
    CHECK_POOL(p);
    expect_tiers(p, P, 0, 0, 16);
    k = tier_stats(p, KVC_TIER_DISK);
    assert_int_equal(k.blocks_in, 4);
    assert_int_equal(k.bytes_in, 4 * TBLOCK_BYTES);
    assert_int_equal(k.cached_blocks, 4);
    assert_true(k.transfers >= 1);
    int64_t cached = -1;
    OK(kvc_prefix_lookup(p, P, NP, NULL, &cached));
    assert_int_equal(cached, 16);

    OK(kvc_alloc(p, 3, P, NP, NULL, &cached));
    assert_int_equal(cached, 16);
    CHECK_POOL(p);
    expect_blocks(p, 3, 4, 31);
    k = tier_stats(p, KVC_TIER_DISK);
    assert_int_equal(k.hits, 4);
    assert_int_equal(k.blocks_out, 4);
    assert_int_equal(k.failures, 0);
    assert_int_equal(k.checksum_failures, 0);
    assert_true(k.bandwidth_bytes_per_s > 0.0);
    assert_int_equal(tier_stats(p, KVC_TIER_HOST).hits, 4);
    OK(kvc_pool_destroy(p));
}

static void test_rehit_from_disk_uring(void **state) { rehit_from_disk(*state, 0); }
static void test_rehit_from_disk_sync_io(void **state) { rehit_from_disk(*state, 1); }

/* KVC_DISK_NO_DIRECT is reported; the default reports whatever the file system allowed. */
static void test_direct_io_flag(void **state) {
    disk_fixture *f = *state;
    kvc_pool *p = disk_pool(f->path, KVC_DISK_NO_DIRECT);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).direct_io, 0);
    int32_t P[NP];
    prompt(P, NP, 2);
    push_to_disk(p, P, 41);
    int64_t cached = 0;
    OK(kvc_alloc(p, 3, P, NP, NULL, &cached));
    assert_int_equal(cached, 16);
    expect_blocks(p, 3, 4, 41);
    OK(kvc_pool_destroy(p));
    p = disk_pool(f->path, 0);
    kvc_tier_stats k = tier_stats(p, KVC_TIER_DISK);
    print_message("disk tier: direct_io=%d io_uring=%d\n", k.direct_io, k.io_uring);
    assert_true(k.direct_io == 0 || k.direct_io == 1);
    OK(kvc_pool_destroy(p));
}

/* Disk eviction: lowest priority first. Host of 1 slot, disk of 2. */
static void test_disk_eviction_order(void **state) {
    disk_fixture *f = *state;
    kvc_pool *p = tier_pool(4, 1);
    OK(kvc_tier_attach_host(p, 1));
    OK(kvc_tier_attach_disk(p, f->path, 2, 0));
    int32_t A[5], B[5], C[5], D[5];
    prompt(A, 5, 10);
    prompt(B, 5, 11);
    prompt(C, 5, 12);
    prompt(D, 5, 13);
    int64_t host = 0, disk = 0;
    alloc_free(p, 1, A, 5, 90, 1);
    alloc_free(p, 2, B, 5, 10, 2);
    churn(p, 4, 100);  /* B then A leave the device: host A, disk B */
    alloc_free(p, 3, C, 5, 50, 3);
    churn(p, 4, 100);  /* C to host, A to disk: disk {B, A} */
    lookup_tiers(p, A, 5, NULL, &host, &disk);
    assert_int_equal(disk, 4);
    lookup_tiers(p, B, 5, NULL, &host, &disk);
    assert_int_equal(disk, 4);
    alloc_free(p, 4, D, 5, 50, 4);
    churn(p, 4, 100);  /* D to host, C to disk: the disk drops B (priority 10), keeps A (90) */
    lookup_tiers(p, B, 5, NULL, &host, &disk);
    assert_int_equal(host + disk, 0);
    lookup_tiers(p, A, 5, NULL, &host, &disk);
    assert_int_equal(disk, 4);
    lookup_tiers(p, C, 5, NULL, &host, &disk);
    assert_int_equal(disk, 4);
    lookup_tiers(p, D, 5, NULL, &host, &disk);
    assert_int_equal(host, 4);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).evictions, 1);
    CHECK_POOL(p);
    int64_t cached = 0;
    OK(kvc_alloc(p, 5, A, 5, NULL, &cached));
    assert_int_equal(cached, 4);
    expect_blocks(p, 5, 1, 1);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* Promotion of several disk hits when each host slot it takes spills a host block to disk: that
 * spill must not take a later disk hit of the same prompt (it once claimed one, and promoting that
 * slot next corrupted the disk tier's lists). Host of 1 slot, disk of 2: A's two blocks on disk
 * (A1 evicted first), X on the host. Promoting A0 evicts X, whose spill finds every disk slot
 * pinned and is dropped; A1 finds no host slot left in that round. A0 then goes on into a device
 * block, and a second round reads A1 through the slot A0 left (A0's own spill finds A0 on disk
 * already and writes nothing): the whole prefix comes back, as kvc_prefix_lookup said. */
static void test_promotion_keeps_later_disk_hits(void **state) {
    disk_fixture *f = *state;
    kvc_pool *p = tier_pool(4, 1);
    OK(kvc_tier_attach_host(p, 1));
    OK(kvc_tier_attach_disk(p, f->path, 2, 0));
    int32_t A[9], X[5];
    prompt(A, 9, 20);
    prompt(X, 5, 21);
    alloc_free(p, 1, A, 9, KVC_PRIORITY_DEFAULT, 5);
    churn(p, 4, 100);  /* A1 then A0 leave the device: disk {A1}, host {A0} */
    alloc_free(p, 2, X, 5, KVC_PRIORITY_DEFAULT, 6);
    churn(p, 4, 100);  /* X to host, A0 to disk: disk {A1, A0} */
    int64_t dev = -1, host = -1, disk = -1;
    lookup_tiers(p, A, 9, &dev, &host, &disk);
    assert_int_equal(dev + host, 0);
    assert_int_equal(disk, 8);
    lookup_tiers(p, X, 5, &dev, &host, &disk);
    assert_int_equal(host, 4);
    const kvc_tier_stats before = tier_stats(p, KVC_TIER_DISK);

    int64_t cached = -1;
    OK(kvc_alloc(p, 3, A, 9, NULL, &cached));
    CHECK_POOL(p);
    assert_int_equal(cached, 8);  /* A0 and A1, one round each through the host slot X left */
    expect_blocks(p, 3, 2, 5);
    const kvc_tier_stats after = tier_stats(p, KVC_TIER_DISK);
    assert_int_equal(after.blocks_out - before.blocks_out, 2);
    assert_int_equal(after.evictions, before.evictions); /* X's spill took nothing */
    assert_int_equal(after.cached_blocks, 2);            /* A0 and A1 stay on disk */
    assert_int_equal(tier_stats(p, KVC_TIER_HOST).cached_blocks, 1); /* A1 replaced A0, A0 X */
    lookup_tiers(p, X, 5, &dev, &host, &disk);
    assert_int_equal(dev + host + disk, 0);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* A pool of 1-token blocks whose prompt P = 1..5 has block 0 on disk and blocks 1-3 on the device
 * (block 0's priority was lowered by a shorter prompt sharing it, so it left first). Host tier of
 * 1 slot, disk of 2. With hold_one, a sixth block is held by sequence 9 throughout. */
static kvc_pool *disk_behind_device_pool(const char *path, int hold_one) {
    kvc_pool_config c;
    OK(kvc_pool_config_default(&c));
    c.block_size = 1;
    c.num_blocks = hold_one ? 6 : 5;
    c.watermark = 0.2;
    c.head_dim = 1;
    c.backend = KVC_BACKEND_CPU;
    kvc_pool *p = NULL;
    OK(kvc_pool_create(&c, &p));
    OK(kvc_tier_attach_host(p, 1));
    OK(kvc_tier_attach_disk(p, path, 2, 0));
    const int32_t P[5] = {1, 2, 3, 4, 5}, B[2] = {1, 7}, S[1] = {300};
    if (hold_one) OK(kvc_alloc(p, 9, S, 1, NULL, NULL));
    kvc_keys *k = NULL;
    OK(kvc_keys_create(&k));
    OK(kvc_keys_set_priority(k, 90));
    OK(kvc_alloc(p, 1, P, 5, k, NULL));
    OK(kvc_free(p, 1));
    OK(kvc_keys_set_priority(k, 10));
    OK(kvc_alloc(p, 2, B, 2, k, NULL));
    OK(kvc_free(p, 2));
    OK(kvc_keys_set_priority(k, 50));
    for (int32_t t = 100; t < 103; ++t) {
        OK(kvc_alloc(p, 3, &t, 1, k, NULL));
        OK(kvc_free(p, 3));
    }
    OK(kvc_keys_destroy(k));
    int64_t dev = -1, host = -1, disk = -1;
    lookup_tiers(p, P, 5, &dev, &host, &disk); /* block 0 on disk, 1-3 on the device */
    assert_int_equal(dev, 3);
    assert_int_equal(host, 0);
    assert_int_equal(disk, 1);
    return p;
}

/* kvc_can_alloc walks the disk tier as kvc_alloc (after its promotion) does: the device blocks
 * behind P's disk block are hits for both. It once walked the host tier only and answered NEVER
 * (5 blocks to take, watermark 1, 5 blocks) for a prompt kvc_alloc then admitted with 4 cached. */
static void test_can_alloc_counts_disk_hits(void **state) {
    disk_fixture *f = *state;
    kvc_pool *p = disk_behind_device_pool(f->path, 0);
    const int32_t P[5] = {1, 2, 3, 4, 5};
    int32_t verdict = -1;
    OK(kvc_can_alloc(p, P, 5, NULL, &verdict));
    assert_int_not_equal(verdict, KVC_ALLOC_NEVER);
    int64_t cached = -1;
    OK(kvc_alloc(p, 4, P, 5, NULL, &cached));
    assert_int_equal(cached, 4);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* A refused kvc_alloc changes nothing, the tiers included: it used to promote the prompt's disk
 * hits into the host tier (evicting a host block to disk) before its sequence-exists and capacity
 * checks. */
static void test_refused_alloc_promotes_nothing(void **state) {
    disk_fixture *f = *state;
    kvc_pool *p = disk_behind_device_pool(f->path, 1);
    const int32_t P[5] = {1, 2, 3, 4, 5}, L[7] = {1, 2, 3, 4, 5, 6, 7};
    const kvc_stats pool_before = stats_of(p);
    const kvc_tier_stats host_before = tier_stats(p, KVC_TIER_HOST), disk_before = tier_stats(p, KVC_TIER_DISK);
    EXPECT_ERR(kvc_alloc(p, 9, P, 5, NULL, NULL), KVC_ERR_SEQ_EXISTS);
    EXPECT_ERR(kvc_alloc(p, 5, L, 7, NULL, NULL), KVC_ERR_OUT_OF_BLOCKS); /* 7 blocks > 6 */
    const kvc_stats pool_after = stats_of(p);
    const kvc_tier_stats host_after = tier_stats(p, KVC_TIER_HOST), disk_after = tier_stats(p, KVC_TIER_DISK);
    assert_memory_equal(&pool_before, &pool_after, sizeof pool_before);
    assert_int_equal(host_after.blocks_in, host_before.blocks_in);
    assert_int_equal(host_after.evictions, host_before.evictions);
    assert_int_equal(disk_after.blocks_in, disk_before.blocks_in);
    assert_int_equal(disk_after.blocks_out, disk_before.blocks_out);
    assert_int_equal(disk_after.hits, disk_before.hits);
    int64_t dev = -1, host = -1, disk = -1;
    lookup_tiers(p, P, 5, &dev, &host, &disk);
    assert_int_equal(disk, 1); /* still on disk, not promoted */
    CHECK_POOL(p);
    int64_t cached = -1;
    OK(kvc_alloc(p, 4, P, 5, NULL, &cached)); /* the accepted call promotes */
    assert_int_equal(cached, 4);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).hits, disk_before.hits + 1);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* A persistent disk tier finds its blocks again after the pool is destroyed and re-created; a
 * different layout or a non-persistent attach finds nothing. */
static void test_persistence(void **state) {
    disk_fixture *f = *state;
    int32_t P[NP];
    prompt(P, NP, 3);
    kvc_pool *p = disk_pool(f->path, KVC_DISK_PERSISTENT);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).persistent, 1);
    push_to_disk(p, P, 51);
    expect_tiers(p, P, 0, 0, 16);
    OK(kvc_pool_destroy(p));

    p = disk_pool(f->path, KVC_DISK_PERSISTENT);
    kvc_tier_stats k = tier_stats(p, KVC_TIER_DISK);
    assert_int_equal(k.recovered_blocks, 4);
    assert_int_equal(k.cached_blocks, 4);
    CHECK_POOL(p);
    expect_tiers(p, P, 0, 0, 16);
    int64_t cached = 0;
    OK(kvc_alloc(p, 3, P, NP, NULL, &cached));
    assert_int_equal(cached, 16);
    expect_blocks(p, 3, 4, 51);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));

    /* Same file, another layout: nothing is trusted. */
    kvc_pool_config cfg;
    OK(kvc_pool_config_default(&cfg));
    cfg.block_size = TBS;
    cfg.num_layers = 2;
    cfg.num_kv_heads = 2;
    cfg.head_dim = 16;
    cfg.kv_dtype = KVC_DTYPE_F32;
    cfg.num_blocks = DEV_BLOCKS;
    cfg.backend = KVC_BACKEND_CPU;
    OK(kvc_pool_create(&cfg, &p));
    OK(kvc_tier_attach_host(p, HOST_SLOTS));
    OK(kvc_tier_attach_disk(p, f->path, DISK_SLOTS, KVC_DISK_PERSISTENT));
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).recovered_blocks, 0);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));

    /* Without the flag the file is truncated. */
    p = disk_pool(f->path, KVC_DISK_PERSISTENT);
    assert_true(tier_stats(p, KVC_TIER_DISK).recovered_blocks > 0);
    OK(kvc_pool_destroy(p));
    p = disk_pool(f->path, 0);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).recovered_blocks, 0);
    expect_tiers(p, P, 0, 0, 0);
    OK(kvc_pool_destroy(p));
    p = disk_pool(f->path, KVC_DISK_PERSISTENT);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).recovered_blocks, 0);
    OK(kvc_pool_destroy(p));
}

/* A prefix whose run of disk blocks is longer than the host tier: kvc_alloc promotes it in rounds
 * (one host slot, six disk blocks: each round's block goes on into a device block before the slot
 * is reused) and gets the whole hit kvc_prefix_lookup announced, with the bytes written before, and
 * no pin left behind. With every host slot held by a swapped-out sequence no round can start: the
 * hit ends at the first disk block (kvc.h, kvc_alloc). */
static void test_promotion_in_rounds(void **state) {
    disk_fixture *f = *state;
    kvc_pool *p = tier_pool(12, 1);
    OK(kvc_tier_attach_host(p, 1));
    OK(kvc_tier_attach_disk(p, f->path, 16, 0));
    enum { N = 6 * TBS + 1 };
    int32_t A[N], B[N], S[TBS - 1];
    prompt(A, N, 40);
    prompt(B, N, 42);
    alloc_free(p, 1, A, N, KVC_PRIORITY_DEFAULT, 41);
    churn(p, 12, 100); /* every device block taken: A's blocks spill to the host, then to disk */
    int64_t dev = -1, host = -1, disk = -1;
    lookup_tiers(p, A, N, &dev, &host, &disk);
    assert_int_equal(dev, 0);
    assert_int_equal(host + disk, 6 * TBS);
    assert_true(disk >= 5 * TBS);
    const kvc_tier_stats before = tier_stats(p, KVC_TIER_DISK);
    int64_t cached = -1;
    OK(kvc_alloc(p, 2, A, N, NULL, &cached));
    assert_int_equal(cached, 6 * TBS);
    expect_blocks(p, 2, 6, 41);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).blocks_out - before.blocks_out, disk / TBS);
    kvc_stats st;
    st.struct_size = sizeof st;
    OK(kvc_pool_stats(p, &st));
    assert_int_equal(st.pinned_blocks, 0);
    CHECK_POOL(p);
    OK(kvc_free(p, 2));

    /* B to disk too, then a swapped-out sequence holds the only host slot. */
    alloc_free(p, 3, B, N, KVC_PRIORITY_DEFAULT, 43);
    churn(p, 12, 100);
    prompt(S, TBS - 1, 44);
    OK(kvc_alloc(p, 4, S, TBS - 1, NULL, NULL));
    OK(kvc_swap_out(p, 4, NULL));
    lookup_tiers(p, B, N, &dev, &host, &disk);
    assert_int_equal(dev + host, 0);
    assert_int_equal(disk, 6 * TBS);
    OK(kvc_alloc(p, 5, B, N, NULL, &cached));
    assert_int_equal(cached, 0);
    CHECK_POOL(p);
    OK(kvc_free(p, 5));
    OK(kvc_swap_in(p, 4, NULL));
    OK(kvc_free(p, 4));
    OK(kvc_alloc(p, 6, B, N, NULL, &cached)); /* the slot is back: B comes back whole */
    assert_int_equal(cached, 6 * TBS);
    expect_blocks(p, 6, 6, 43);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* A restore round takes fresh device blocks, which may evict cached ones: the prompt's own device
 * hits must not be among them. A0 is cached on the device at the head of the LRU list (every other
 * free block is a more recent cached block of B), A1 on the host (its only slot), A2 and A3 on
 * disk. The round restoring A1 takes a fresh block: B's, not A0 (pinned first). */
static void test_promotion_rounds_keep_device_hits(void **state) {
    disk_fixture *f = *state;
    kvc_pool *p = tier_pool(6, 1);
    OK(kvc_tier_attach_host(p, 1));
    OK(kvc_tier_attach_disk(p, f->path, 16, 0));
    enum { N = 4 * TBS + 1, NB = 5 * TBS };
    int32_t A[N], B[NB];
    prompt(A, N, 47);
    prompt(B, NB, 48);
    alloc_free(p, 1, A, N, KVC_PRIORITY_DEFAULT, 49); /* LRU: A3, A2, A1, A0 (deepest first) */
    churn(p, 5, 100); /* the 2 uncached blocks, then A3, A2, A1: host {A1}, disk {A3, A2} */
    alloc_free(p, 2, B, NB, KVC_PRIORITY_DEFAULT, 50); /* B0..B4: cached, more recent than A0 */
    int64_t dev = -1, host = -1, disk = -1;
    lookup_tiers(p, A, N, &dev, &host, &disk);
    assert_int_equal(dev, TBS);
    assert_int_equal(host, TBS);
    assert_int_equal(disk, 2 * TBS);
    kvc_stats st;
    st.struct_size = sizeof st;
    OK(kvc_pool_stats(p, &st));
    assert_int_equal(st.free_blocks, 6);
    assert_int_equal(st.cached_free_blocks, 6); /* nothing uncached to take first */
    int64_t cached = -1;
    OK(kvc_alloc(p, 3, A, N, NULL, &cached));
    assert_int_equal(cached, 4 * TBS);
    expect_blocks(p, 3, 4, 49);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* The same with a sliding window of two blocks: only the blocks the window needs (the last two full
 * ones) are held, and only they come up, in two rounds through the one host slot. */
static void test_promotion_in_rounds_windowed(void **state) {
    disk_fixture *f = *state;
    kvc_pool *p = tier_pool(12, 1);
    OK(kvc_pool_set_sliding_window(p, 2 * TBS));
    OK(kvc_tier_attach_host(p, 1));
    OK(kvc_tier_attach_disk(p, f->path, 16, 0));
    enum { N = 6 * TBS + 1 };
    int32_t A[N];
    prompt(A, N, 45);
    alloc_free(p, 1, A, N, KVC_PRIORITY_DEFAULT, 46);
    churn(p, 12, 100);
    const kvc_tier_stats before = tier_stats(p, KVC_TIER_DISK);
    int64_t looked = -1, cached = -1;
    OK(kvc_prefix_lookup(p, A, N, NULL, &looked));
    assert_int_equal(looked, 6 * TBS);
    OK(kvc_alloc(p, 2, A, N, NULL, &cached));
    assert_int_equal(cached, 6 * TBS);
    int32_t table[64];
    assert_int_equal(tier_table(p, 2, table), 7);
    unsigned char want[TBLOCK_BYTES], got[TBLOCK_BYTES];
    for (int64_t i = 0; i < 6; ++i) {
        if (i < 4) {
            assert_int_equal(table[i], -1); /* before the window: never taken */
            continue;
        }
        pattern(want, 46, i);
        OK(kvc_storage_copy_blocks(p, &table[i], 1, got, 1));
        assert_memory_equal(want, got, TBLOCK_BYTES);
    }
    assert_true(tier_stats(p, KVC_TIER_DISK).blocks_out - before.blocks_out <= 2);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* kvc_tier_prefetch reads a queued prompt's disk hits up into the host tier, so that its kvc_alloc
 * reads no disk; a block failing verification ends the prefetched hit as it would an allocation's. */
static void test_prefetch(void **state) {
    disk_fixture *f = *state;
    int32_t P[NP];
    prompt(P, NP, 5);
    kvc_pool *p = disk_pool(f->path, 0);
    push_to_disk(p, P, 71);
    expect_tiers(p, P, 0, 0, 16);
    const kvc_tier_stats d0 = tier_stats(p, KVC_TIER_DISK);
    int64_t cached = -1;
    OK(kvc_tier_prefetch(p, P, NP, NULL, &cached));
    assert_int_equal(cached, 16);
    expect_tiers(p, P, 0, 16, 0);
    const kvc_tier_stats d1 = tier_stats(p, KVC_TIER_DISK);
    assert_int_equal(d1.blocks_out, d0.blocks_out + 4);
    assert_int_equal(tier_stats(p, KVC_TIER_DEVICE).used_blocks, 0); /* no device block taken */
    CHECK_POOL(p);
    /* Again: nothing left on disk to read; the answer is the same. */
    OK(kvc_tier_prefetch(p, P, NP, NULL, &cached));
    assert_int_equal(cached, 16);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).blocks_out, d1.blocks_out);
    /* The allocation restores from the host tier: no disk read. */
    OK(kvc_alloc(p, 3, P, NP, NULL, &cached));
    assert_int_equal(cached, 16);
    expect_blocks(p, 3, 4, 71);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).blocks_out, d1.blocks_out);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));

    /* A flipped bit in the first block read: the hit ends there (the block is dropped and counted),
     * and the allocation computes from there too. */
    p = disk_pool(f->path, 0);
    push_to_disk(p, P, 72);
    kvct_disk_fault(KVCT_FAULT_READ_BITFLIP, 1);
    OK(kvc_tier_prefetch(p, P, NP, NULL, NULL));
    kvct_disk_fault(KVCT_FAULT_NONE, 0);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).checksum_failures, 1);
    OK(kvc_prefix_lookup(p, P, NP, NULL, &cached));
    assert_true(cached < 16);
    OK(kvc_alloc(p, 4, P, NP, NULL, &cached));
    assert_true(cached < 16);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));

    /* A prefetch whose reads are still in flight (held here; another thread's I/O in a server):
     * the allocation lets them land first instead of taking their busy slots for misses. */
    p = disk_pool(f->path, 0);
    push_to_disk(p, P, 74);
    kvct_tier_hold_jobs(p, 1);
    OK(kvc_tier_prefetch(p, P, NP, NULL, &cached));
    assert_int_equal(cached, 0); /* nothing landed yet */
    kvct_tier_hold_jobs(p, -1);  /* still pending, as if the prefetching thread had not run them yet */
    OK(kvc_alloc(p, 5, P, NP, NULL, &cached));
    assert_int_equal(cached, 16);
    expect_blocks(p, 5, 4, 74);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));

    /* Bad input and state: nothing moves. */
    p = disk_pool(f->path, 0);
    push_to_disk(p, P, 73);
    EXPECT_ERR(kvc_tier_prefetch(NULL, P, NP, NULL, &cached), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_tier_prefetch(p, NULL, NP, NULL, &cached), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_tier_prefetch(p, P, 0, NULL, &cached), KVC_ERR_INVALID_ARG);
    expect_tiers(p, P, 0, 0, 16);
    OK(kvc_pool_destroy(p));
    p = tier_pool(DEV_BLOCKS, 1);
    EXPECT_ERR(kvc_tier_prefetch(p, P, NP, NULL, &cached), KVC_ERR_STATE); /* no tiers */
    OK(kvc_tier_attach_host(p, HOST_SLOTS));
    EXPECT_ERR(kvc_tier_prefetch(p, P, NP, NULL, &cached), KVC_ERR_STATE); /* no disk tier */
    OK(kvc_pool_destroy(p));
}

static kvc_pool *identity_pool(const char *path, const char *identity) {
    kvc_pool *p = tier_pool(DEV_BLOCKS, 1);
    OK(kvc_tier_attach_host(p, HOST_SLOTS));
    OK(kvc_tier_attach_disk_with_identity(p, path, DISK_SLOTS, KVC_DISK_PERSISTENT, identity));
    return p;
}

/* Reopens the persistent file under `identity` and expects P's 4 blocks recovered (with the bytes
 * of `seed`) or, if `foreign`, not recovered and counted as foreign. */
static void reopen_as(const char *path, const char *identity, const int32_t *P, int foreign, uint32_t seed) {
    kvc_pool *p = identity_pool(path, identity);
    const kvc_tier_stats k = tier_stats(p, KVC_TIER_DISK);
    assert_int_equal(k.recovered_blocks, foreign ? 0 : 4);
    assert_int_equal(k.foreign_blocks, foreign ? 4 : 0);
    assert_int_equal(k.cached_blocks, foreign ? 0 : 4);
    expect_tiers(p, P, 0, 0, foreign ? 0 : 16);
    int64_t cached = -1;
    OK(kvc_alloc(p, 9, P, NP, NULL, &cached));
    assert_int_equal(cached, foreign ? 0 : 16);
    if (!foreign) expect_blocks(p, 9, 4, seed);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* Two checkpoints (or two TP ranks) of one layout: a persistent file recovers only the blocks of
 * the identity that wrote them; the others are foreign, never hits. No identity is its own. */
static void test_disk_identity(void **state) {
    disk_fixture *f = *state;
    int32_t P[NP];
    prompt(P, NP, 3);
    kvc_pool *p = identity_pool(f->path, "model-a@r1;tp=0/2");
    push_to_disk(p, P, 61);
    expect_tiers(p, P, 0, 0, 16);
    OK(kvc_pool_destroy(p));

    reopen_as(f->path, "model-a@r1;tp=0/2", P, 0, 61);
    reopen_as(f->path, "model-a@r1;tp=1/2", P, 1, 0);  /* another rank's shard */
    reopen_as(f->path, "model-b@r1;tp=0/2", P, 1, 0);  /* another checkpoint */
    reopen_as(f->path, NULL, P, 1, 0);
    reopen_as(f->path, "", P, 1, 0);
    /* A foreign attach leaves the slots it does not reuse alone: the owner still finds them. */
    reopen_as(f->path, "model-a@r1;tp=0/2", P, 0, 61);
    /* Another identity writing to the file takes the empty slots first, not a's. */
    int32_t Q[NP];
    prompt(Q, NP, 4);
    p = identity_pool(f->path, "model-b@r1;tp=0/2");
    push_to_disk(p, Q, 63);
    expect_tiers(p, Q, 0, 0, 16);
    OK(kvc_pool_destroy(p));
    p = identity_pool(f->path, "model-a@r1;tp=0/2");
    const kvc_tier_stats k = tier_stats(p, KVC_TIER_DISK);
    assert_int_equal(k.recovered_blocks, 4);
    assert_int_equal(k.foreign_blocks, 4); /* b's */
    int64_t cached = -1;
    OK(kvc_alloc(p, 9, P, NP, NULL, &cached));
    assert_int_equal(cached, 16);
    expect_blocks(p, 9, 4, 61);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));

    /* Files written without an identity stay recoverable by either function. */
    OK(kvc_pool_destroy(disk_pool(f->path, 0)));  /* truncates: no foreign slot left */
    p = disk_pool(f->path, KVC_DISK_PERSISTENT);
    push_to_disk(p, P, 62);
    OK(kvc_pool_destroy(p));
    reopen_as(f->path, NULL, P, 0, 62);
    reopen_as(f->path, "", P, 0, 62);
    p = disk_pool(f->path, KVC_DISK_PERSISTENT);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).recovered_blocks, 4);
    OK(kvc_pool_destroy(p));
    reopen_as(f->path, "model-a@r1;tp=0/2", P, 1, 0);
}

/* A struct of `size` bytes gets the host tier's fields that fit and nothing written past them; one
 * byte less is refused. */
static void expect_short_tier_stats(kvc_pool *p, size_t size) {
    kvc_tier_stats s;
    memset(&s, 0xAB, sizeof s);
    s.struct_size = (uint32_t)size;
    OK(kvc_tier_get_stats(p, KVC_TIER_HOST, &s));
    assert_int_equal(s.capacity_blocks, HOST_SLOTS);
    assert_int_equal(s.struct_size, size);
    const unsigned char *tail = (const unsigned char *)&s + size;
    for (size_t i = 0; i < sizeof s - size; ++i) assert_int_equal(tail[i], 0xAB);
    s.struct_size = (uint32_t)size - 1;
    EXPECT_ERR(kvc_tier_get_stats(p, KVC_TIER_HOST, &s), KVC_ERR_VERSION);
}

/* kvc_tier_get_stats still takes the earlier releases' structs: the first (before foreign_blocks)
 * and the second (before reachable_blocks). */
static void test_tier_stats_earlier_release_sizes(void **state) {
    (void)state;
    kvc_pool *p = tier_pool(DEV_BLOCKS, 1);
    OK(kvc_tier_attach_host(p, HOST_SLOTS));
    expect_short_tier_stats(p, offsetof(kvc_tier_stats, foreign_blocks));
    expect_short_tier_stats(p, offsetof(kvc_tier_stats, reachable_blocks));
    kvc_tier_stats s;
    memset(&s, 0xAB, sizeof s);
    s.struct_size = (uint32_t)sizeof s;
    OK(kvc_tier_get_stats(p, KVC_TIER_HOST, &s));
    assert_int_equal(s.foreign_blocks, 0);
    assert_int_equal(s.reachable_blocks, 0);
    OK(kvc_pool_destroy(p));
}

/* A persistent file whose block bytes were damaged while the pool was down: the headers are
 * re-indexed, the damage is caught when the bytes are read, and the prompt is recomputed. */
static void test_persistent_file_corruption_is_a_miss(void **state) {
    disk_fixture *f = *state;
    int32_t P[NP];
    prompt(P, NP, 4);
    kvc_pool *p = disk_pool(f->path, KVC_DISK_PERSISTENT);
    push_to_disk(p, P, 61);
    OK(kvc_pool_destroy(p));

    int fd = open(f->path, O_RDWR);
    assert_true(fd >= 0);
    struct stat sb;
    assert_int_equal(fstat(fd, &sb), 0);
    const off_t slot_bytes = sb.st_size / DISK_SLOTS;  /* header region + data region */
    for (int s = 0; s < DISK_SLOTS; ++s) {
        unsigned char c = 0;
        const off_t at = (off_t)s * slot_bytes + slot_bytes - 4096 + 100;  /* inside the block bytes */
        assert_int_equal(pread(fd, &c, 1, at), 1);
        c ^= 0x01;
        assert_int_equal(pwrite(fd, &c, 1, at), 1);
    }
    close(fd);

    p = disk_pool(f->path, KVC_DISK_PERSISTENT);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).recovered_blocks, 4);
    expect_tiers(p, P, 0, 0, 16);  /* the index alone cannot know */
    int64_t cached = -1;
    OK(kvc_alloc(p, 3, P, NP, NULL, &cached));
    assert_int_equal(cached, 0);
    kvc_tier_stats k = tier_stats(p, KVC_TIER_DISK);
    assert_int_equal(k.checksum_failures, 4);
    assert_int_equal(k.failures, 4);
    assert_int_equal(k.hits, 0);
    assert_int_equal(k.cached_blocks, 0);
    CHECK_POOL(p);
    expect_tiers(p, P, 16, 0, 0);  /* only the freshly allocated (to be recomputed) blocks */
    OK(kvc_pool_destroy(p));

    /* The file forgot the slots that failed: the next process does not re-index (and fail) them again. */
    p = disk_pool(f->path, KVC_DISK_PERSISTENT);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).recovered_blocks, 0);
    expect_tiers(p, P, 0, 0, 0);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* kvc_prefix_cache_reset is for good: a KVC_DISK_PERSISTENT attach after it (a restart after a weight
 * update) recovers none of the blocks dropped, and blocks spilled after the reset persist as usual. */
static void test_reset_forgets_persistent_file(void **state) {
    disk_fixture *f = *state;
    int32_t P[NP], Q[NP];
    prompt(P, NP, 11);
    prompt(Q, NP, 12);
    kvc_pool *p = disk_pool(f->path, KVC_DISK_PERSISTENT);
    push_to_disk(p, P, 91);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).cached_blocks, 4);
    OK(kvc_prefix_cache_reset(p));
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));

    p = disk_pool(f->path, KVC_DISK_PERSISTENT);
    kvc_tier_stats k = tier_stats(p, KVC_TIER_DISK);
    assert_int_equal(k.recovered_blocks, 0);
    assert_int_equal(k.cached_blocks, 0);
    expect_tiers(p, P, 0, 0, 0);
    push_to_disk(p, Q, 92);  /* the forgotten slots are taken again, and their new blocks persist */
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));

    p = disk_pool(f->path, KVC_DISK_PERSISTENT);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).recovered_blocks, 4);
    expect_tiers(p, P, 0, 0, 0);
    expect_tiers(p, Q, 0, 0, 16);
    int64_t cached = -1;
    OK(kvc_alloc(p, 4, Q, NP, NULL, &cached));
    assert_int_equal(cached, 16);
    expect_blocks(p, 4, 4, 92);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* A spill whose write fails leaves the slot's old header in the file (the block the spill evicted
 * there): the slot is erased, so a reset and a restart do not bring that block back (found by the
 * fuzzer's persistent-restart model). One host slot and one disk slot make every spill evict. */
static void test_failed_write_erases_the_evicted_header(void **state) {
    disk_fixture *f = *state;
    int32_t A[5], B[5], C[5], D[5];
    prompt(A, 5, 31);
    prompt(B, 5, 32);
    prompt(C, 5, 33);
    prompt(D, 5, 34);
    for (int reset = 0; reset < 2; ++reset) {
        kvc_pool *p = tier_pool(2, 1);
        OK(kvc_tier_attach_host(p, 1));
        OK(kvc_tier_attach_disk(p, f->path, 1, 0));
        alloc_free(p, 1, A, 5, KVC_PRIORITY_DEFAULT, 41);
        alloc_free(p, 2, B, 5, KVC_PRIORITY_DEFAULT, 42);
        alloc_free(p, 3, C, 5, KVC_PRIORITY_DEFAULT, 43); /* A: device -> host -> disk */
        int64_t dev = -1, host = -1, disk = -1;
        lookup_tiers(p, A, 5, &dev, &host, &disk);
        assert_int_equal(disk, 4);
        kvct_disk_fault(KVCT_FAULT_WRITE_EIO, 1); /* D pushes B down: its spill evicts A and fails */
        alloc_free(p, 4, D, 5, KVC_PRIORITY_DEFAULT, 44);
        kvct_disk_fault(KVCT_FAULT_NONE, 0);
        assert_int_equal(tier_stats(p, KVC_TIER_DISK).io_errors, 1);
        lookup_tiers(p, A, 5, &dev, &host, &disk);
        assert_int_equal(dev + host + disk, 0);
        if (reset) OK(kvc_prefix_cache_reset(p));
        CHECK_POOL(p);
        OK(kvc_pool_destroy(p));

        p = tier_pool(2, 1);
        OK(kvc_tier_attach_host(p, 1));
        OK(kvc_tier_attach_disk(p, f->path, 1, KVC_DISK_PERSISTENT));
        assert_int_equal(tier_stats(p, KVC_TIER_DISK).recovered_blocks, 0);
        lookup_tiers(p, A, 5, &dev, &host, &disk);
        assert_int_equal(disk, 0);
        OK(kvc_pool_destroy(p));
    }
}

/* An erasure that fails is counted (failures, io_errors): the caller can tell that the next
 * persistent attach would find that block again (and must delete the file or attach without the flag). */
static void test_reset_forget_failure_is_counted(void **state) {
    disk_fixture *f = *state;
    int32_t P[NP];
    prompt(P, NP, 13);
    kvc_pool *p = disk_pool(f->path, KVC_DISK_PERSISTENT);
    push_to_disk(p, P, 93);
    kvc_tier_stats before = tier_stats(p, KVC_TIER_DISK);
    kvct_disk_fault(KVCT_FAULT_HEADER_WRITE_EIO, 1);
    OK(kvc_prefix_cache_reset(p));
    kvct_disk_fault(KVCT_FAULT_NONE, 0);
    kvc_tier_stats k = tier_stats(p, KVC_TIER_DISK);
    assert_int_equal(k.failures, before.failures + 1);
    assert_int_equal(k.io_errors, before.io_errors + 1);
    assert_int_equal(k.blocks_in, before.blocks_in);  /* an erasure is no block copy */
    assert_int_equal(k.transfers, before.transfers);
    assert_int_equal(k.cached_blocks, 0);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));

    p = disk_pool(f->path, KVC_DISK_PERSISTENT);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).recovered_blocks, 1);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* Write faults: the spilled block is dropped, counted, and never half-registered. */
static void write_fault(disk_fixture *f, int32_t kind) {
    kvc_pool *p = disk_pool(f->path, 0);
    int32_t P[NP], R[NP];
    prompt(P, NP, 5);
    prompt(R, NP, 77);
    alloc_free(p, 1, P, NP, KVC_PRIORITY_DEFAULT, 71);
    churn(p, DEV_BLOCKS, 100);
    alloc_free(p, 2, R, NP, KVC_PRIORITY_DEFAULT, 72);
    kvct_disk_fault(kind, 2);  /* the first two of P's four disk writes fail */
    churn(p, DEV_BLOCKS, 100);
    kvct_disk_fault(KVCT_FAULT_NONE, 0);
    CHECK_POOL(p);
    kvc_tier_stats k = tier_stats(p, KVC_TIER_DISK);
    assert_int_equal(k.failures, 2);
    assert_int_equal(k.io_errors, 2);
    assert_int_equal(k.blocks_in, 2);
    assert_int_equal(k.cached_blocks, 2);
    /* P's deepest blocks were written first (evicted first) and failed: blocks 0..1 remain. */
    expect_tiers(p, P, 0, 0, 8);
    int64_t cached = -1;
    OK(kvc_alloc(p, 3, P, NP, NULL, &cached));
    assert_int_equal(cached, 8);
    expect_blocks(p, 3, 2, 71);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

static void test_write_enospc(void **state) { write_fault(*state, KVCT_FAULT_WRITE_ENOSPC); }
static void test_write_eio(void **state) { write_fault(*state, KVCT_FAULT_WRITE_EIO); }

/* Read faults: the bad block is a miss (the prompt is served up to it), counted, and freed. */
static void read_fault(disk_fixture *f, int32_t kind, int checksum) {
    kvc_pool *p = disk_pool(f->path, 0);
    int32_t P[NP];
    prompt(P, NP, 6);
    push_to_disk(p, P, 81);
    expect_tiers(p, P, 0, 0, 16);
    kvct_disk_fault(kind, 1);  /* the first read (block 0) fails */
    int64_t cached = -1;
    OK(kvc_alloc(p, 3, P, NP, NULL, &cached));
    kvct_disk_fault(KVCT_FAULT_NONE, 0);
    assert_int_equal(cached, 0);  /* block 0 missing: nothing of the prefix can be used */
    kvc_tier_stats k = tier_stats(p, KVC_TIER_DISK);
    assert_int_equal(k.failures, 1);
    assert_int_equal(k.checksum_failures, checksum ? 1 : 0);
    assert_int_equal(k.io_errors, checksum ? 0 : 1);
    CHECK_POOL(p);
    /* Block 0's disk slot was freed; P1..P3 stay on disk and were promoted to the host, whose
     * victims (R's 4 blocks) went to disk: 7 on disk, 3 on the host, block 0 nowhere. */
    k = tier_stats(p, KVC_TIER_DISK);
    assert_int_equal(k.cached_blocks, 7);
    assert_int_equal(tier_stats(p, KVC_TIER_HOST).cached_blocks, 3);
    /* The caller recomputes the prompt into its fresh blocks; then it is a plain device hit. */
    write_blocks(p, 3, 4, 81);
    OK(kvc_free(p, 3));
    OK(kvc_alloc(p, 5, P, NP, NULL, &cached));
    assert_int_equal(cached, 16);
    expect_blocks(p, 5, 4, 81);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

static void test_read_eio(void **state) { read_fault(*state, KVCT_FAULT_READ_EIO, 0); }
static void test_read_short(void **state) { read_fault(*state, KVCT_FAULT_READ_SHORT, 0); }
static void test_read_bitflip(void **state) { read_fault(*state, KVCT_FAULT_READ_BITFLIP, 1); }

/* Swapping with a disk tier below: host victims of the swap-out go to disk, a swap-in restores. */
static void test_swap_with_disk_below(void **state) {
    disk_fixture *f = *state;
    kvc_pool *p = disk_pool(f->path, 0);
    int32_t P[NP], S[8];
    prompt(P, NP, 8);
    alloc_free(p, 1, P, NP, KVC_PRIORITY_DEFAULT, 91);
    churn(p, DEV_BLOCKS, 100);  /* P's 4 blocks fill the host */
    prompt(S, 8, 9);
    OK(kvc_alloc(p, 2, S, 8, NULL, NULL));
    write_blocks(p, 2, 2, 92);
    OK(kvc_swap_out(p, 2, NULL));  /* takes 2 host slots: P's deepest 2 blocks go to disk */
    CHECK_POOL(p);
    expect_tiers(p, P, 0, 8, 8);
    int64_t cached = 0;
    /* 2 host slots held, 2 holding P0/P1: no room to bring P2/P3 up at first. P0/P1 go on into
     * device blocks, which frees their slots, and a second round brings P2/P3 through them. */
    OK(kvc_alloc(p, 3, P, NP, NULL, &cached));
    assert_int_equal(cached, 16);
    expect_blocks(p, 3, 4, 91);
    OK(kvc_free(p, 3));
    OK(kvc_swap_in(p, 2, NULL));
    expect_blocks(p, 2, 2, 92);
    OK(kvc_alloc(p, 4, P, NP, NULL, &cached));
    assert_int_equal(cached, 16);
    expect_blocks(p, 4, 4, 91);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* A reset between another call's planning and its copies (a second thread's swap-out of the last
 * live sequence): the copies still land and the swapped-out sequence keeps its bytes, but nothing
 * planned before the reset becomes a cache entry after it, in memory or in a persistent file. */
static void test_reset_between_plan_and_copies(void **state) {
    disk_fixture *f = *state;
    kvc_pool *p = disk_pool(f->path, KVC_DISK_PERSISTENT);
    int32_t P[NP], S[8];
    prompt(P, NP, 14);
    alloc_free(p, 1, P, NP, KVC_PRIORITY_DEFAULT, 94);
    churn(p, DEV_BLOCKS, 100);  /* P's 4 blocks fill the host */
    prompt(S, 8, 15);
    OK(kvc_alloc(p, 2, S, 8, NULL, NULL));
    write_blocks(p, 2, 2, 95);
    kvct_tier_hold_jobs(p, 1);
    uint64_t op = 0;
    OK(kvc_swap_out(p, 2, &op));  /* planned: 2 swap-out copies; P's deepest 2 blocks host -> disk */
    assert_int_equal(kvct_tier_slots_in_state(p, KVC_TIER_DISK, 3), 2);  /* busy: spills planned */
    OK(kvc_prefix_cache_reset(p));  /* no device block in use: the sequence holds host slots only */
    kvct_tier_hold_jobs(p, 0);  /* the copies run now */
    OK(kvc_op_wait(p, op));
    kvc_tier_stats k = tier_stats(p, KVC_TIER_DISK);
    assert_int_equal(k.blocks_in, 2);  /* written, then dropped */
    assert_int_equal(k.cached_blocks, 0);
    assert_int_equal(tier_stats(p, KVC_TIER_HOST).cached_blocks, 0);
    expect_tiers(p, P, 0, 0, 0);
    CHECK_POOL(p);
    OK(kvc_swap_in(p, 2, NULL));
    expect_blocks(p, 2, 2, 95);
    OK(kvc_free(p, 2));
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));

    p = disk_pool(f->path, KVC_DISK_PERSISTENT);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).recovered_blocks, 0);
    OK(kvc_pool_destroy(p));
}

/* kvc_prefix_cache_reset drops the lower tiers' cached blocks too. */
static void test_reset_clears_tiers(void **state) {
    disk_fixture *f = *state;
    kvc_pool *p = disk_pool(f->path, 0);
    int32_t P[NP];
    prompt(P, NP, 10);
    push_to_disk(p, P, 5);
    OK(kvc_prefix_cache_reset(p));
    expect_tiers(p, P, 0, 0, 0);
    assert_int_equal(tier_stats(p, KVC_TIER_HOST).cached_blocks, 0);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).cached_blocks, 0);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* kvc_tier_flush before a shutdown: everything cached on the device and in the host tier reaches
 * the disk, so the next process (a KVC_DISK_PERSISTENT attach) finds every prompt, bytes intact.
 * Blocks of a live sequence are not written; the pool itself is unchanged by the flush. */
static void test_flush_then_warm_restart(void **state) {
    disk_fixture *f = *state;
    int32_t P[NP], Q[NP], S[5];
    prompt(P, NP, 17);
    prompt(Q, NP, 18);
    prompt(S, 5, 19);
    kvc_pool *p = disk_pool(f->path, KVC_DISK_PERSISTENT);
    alloc_free(p, 1, P, NP, KVC_PRIORITY_DEFAULT, 101);
    churn(p, DEV_BLOCKS, 100);                          /* P: device -> host */
    alloc_free(p, 2, Q, NP, KVC_PRIORITY_DEFAULT, 102); /* Q: on the device */
    OK(kvc_alloc(p, 3, S, 5, NULL, NULL));               /* S: in use (its full block cached) */
    write_blocks(p, 3, 1, 103);
    expect_tiers(p, P, 0, 16, 0);
    expect_tiers(p, Q, 16, 0, 0);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).cached_blocks, 0);
    kvc_stats before;
    memset(&before, 0, sizeof before);
    before.struct_size = sizeof before;
    OK(kvc_pool_stats(p, &before));
    int64_t written = -1;
    OK(kvc_tier_flush(p, &written));
    assert_int_equal(written, 8);                       /* P's 4 from the host, Q's 4 from the device */
    kvc_tier_stats k = tier_stats(p, KVC_TIER_DISK);
    assert_int_equal(k.cached_blocks, 8);
    assert_int_equal(k.blocks_in, 8);
    assert_int_equal(k.failures, 0);
    /* Q's blocks passed through the 4 host slots, evicting P's there (on disk by then). */
    expect_tiers(p, P, 0, 0, 16);
    expect_tiers(p, Q, 16, 0, 0);
    kvc_stats after;
    memset(&after, 0, sizeof after);
    after.struct_size = sizeof after;
    OK(kvc_pool_stats(p, &after));
    assert_int_equal(after.cached_free_blocks, before.cached_free_blocks);
    assert_int_equal(after.used_blocks, before.used_blocks);
    OK(kvc_tier_flush(p, &written));                    /* nothing new */
    assert_int_equal(written, 0);
    CHECK_POOL(p);
    OK(kvc_free(p, 3));
    OK(kvc_pool_destroy(p));

    p = disk_pool(f->path, KVC_DISK_PERSISTENT);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).recovered_blocks, 8);
    expect_tiers(p, P, 0, 0, 16);
    expect_tiers(p, Q, 0, 0, 16);
    int64_t dev = -1, host = -1, disk = -1;
    lookup_tiers(p, S, 5, &dev, &host, &disk);
    assert_int_equal(dev + host + disk, 0);             /* was in use at the flush */
    int64_t cached = -1;
    OK(kvc_alloc(p, 4, P, NP, NULL, &cached));
    assert_int_equal(cached, 16);
    expect_blocks(p, 4, 4, 101);
    OK(kvc_free(p, 4));
    OK(kvc_alloc(p, 5, Q, NP, NULL, &cached));
    assert_int_equal(cached, 16);
    expect_blocks(p, 5, 4, 102);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* A flush bigger than the tiers it passes through: a 2-slot disk keeps the last 2 blocks written;
 * a host tier held entirely by a swapped-out sequence lets no device block through, and the call
 * still returns. */
static void test_flush_limits(void **state) {
    disk_fixture *f = *state;
    int32_t P[NP], Q[8];
    prompt(P, NP, 20);
    prompt(Q, 8, 21);
    kvc_pool *p = tier_pool(DEV_BLOCKS, 1);
    OK(kvc_tier_attach_host(p, 2));
    OK(kvc_tier_attach_disk(p, f->path, 2, 0));
    alloc_free(p, 1, P, NP, KVC_PRIORITY_DEFAULT, 111);
    int64_t written = -1;
    OK(kvc_tier_flush(p, &written));
    assert_int_equal(written, 4);                       /* through a 2-slot host tier, in rounds */
    kvc_tier_stats k = tier_stats(p, KVC_TIER_DISK);
    assert_int_equal(k.cached_blocks, 2);
    assert_int_equal(k.evictions, 2);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));

    p = tier_pool(DEV_BLOCKS, 1);
    OK(kvc_tier_attach_host(p, 2));
    OK(kvc_tier_attach_disk(p, f->path, 8, 0));
    OK(kvc_alloc(p, 1, Q, 8, NULL, NULL));              /* 2 full blocks */
    write_blocks(p, 1, 2, 112);
    OK(kvc_swap_out(p, 1, NULL));                       /* holds both host slots */
    alloc_free(p, 2, P, NP, KVC_PRIORITY_DEFAULT, 113);
    OK(kvc_tier_flush(p, &written));
    assert_int_equal(written, 0);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).cached_blocks, 0);
    OK(kvc_swap_in(p, 1, NULL));
    expect_blocks(p, 1, 2, 112);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* One disk tier per file: a second pool attaching the same file (a copy-pasted path for two TP
 * ranks, a second process) is refused and truncates nothing; once the first pool is gone it works. */
static void test_file_is_locked_by_its_tier(void **state) {
    disk_fixture *f = *state;
    int32_t P[NP];
    prompt(P, NP, 16);
    kvc_pool *a = disk_pool(f->path, KVC_DISK_PERSISTENT);
    push_to_disk(a, P, 96);
    kvc_pool *b = tier_pool(DEV_BLOCKS, 1);
    OK(kvc_tier_attach_host(b, HOST_SLOTS));
    EXPECT_ERR(kvc_tier_attach_disk(b, f->path, DISK_SLOTS, 0), KVC_ERR_BUSY);
    EXPECT_ERR(kvc_tier_attach_disk(b, f->path, DISK_SLOTS, KVC_DISK_PERSISTENT), KVC_ERR_BUSY);
    assert_non_null(strstr(kvc_last_error(), "in use"));
    assert_int_equal(tier_stats(b, KVC_TIER_DISK).capacity_blocks, 0);
    /* a's blocks are intact: the refused attach did not truncate the file */
    int64_t cached = -1;
    OK(kvc_alloc(a, 3, P, NP, NULL, &cached));
    assert_int_equal(cached, 16);
    expect_blocks(a, 3, 4, 96);
    OK(kvc_free(a, 3));
    OK(kvc_pool_destroy(a));
    OK(kvc_tier_attach_disk(b, f->path, DISK_SLOTS, KVC_DISK_PERSISTENT));
    assert_true(tier_stats(b, KVC_TIER_DISK).recovered_blocks > 0);
    CHECK_POOL(b);
    OK(kvc_pool_destroy(b));
}

static void test_attach_errors(void **state) {
    disk_fixture *f = *state;
    kvc_pool *p = tier_pool(DEV_BLOCKS, 1);
    EXPECT_ERR(kvc_tier_attach_disk(p, f->path, 4, 0), KVC_ERR_STATE);  /* no host tier */
    OK(kvc_tier_attach_host(p, 2));
    /* An identity one byte too long is refused before the file is touched; the limit itself is fine. */
    char identity[KVC_MAX_DISK_IDENTITY_LEN + 2];
    memset(identity, 'x', sizeof identity - 1);
    identity[sizeof identity - 1] = '\0';
    EXPECT_ERR(kvc_tier_attach_disk_with_identity(p, f->path, 4, 0, identity), KVC_ERR_INVALID_ARG);
    struct stat sb;
    assert_int_not_equal(stat(f->path, &sb), 0); /* not created */
    EXPECT_ERR(kvc_tier_attach_disk_with_identity(NULL, f->path, 4, 0, "m"), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_tier_attach_disk_with_identity(p, NULL, 4, 0, "m"), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_tier_attach_disk_with_identity(p, f->path, 0, 0, "m"), KVC_ERR_INVALID_ARG);
    EXPECT_ERR(kvc_tier_attach_disk_with_identity(p, f->path, 4, 0x100, "m"), KVC_ERR_INVALID_ARG);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).capacity_blocks, 0);
    identity[KVC_MAX_DISK_IDENTITY_LEN] = '\0';
    OK(kvc_tier_attach_disk_with_identity(p, f->path, 4, 0, identity));
    EXPECT_ERR(kvc_tier_attach_disk_with_identity(p, f->path, 4, 0, "m"), KVC_ERR_STATE);  /* once */
    EXPECT_ERR(kvc_tier_attach_disk(p, f->path, 4, 0), KVC_ERR_STATE);  /* once */
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rehit_from_disk_uring, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rehit_from_disk_sync_io, setup, teardown),
        cmocka_unit_test_setup_teardown(test_direct_io_flag, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_eviction_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_promotion_keeps_later_disk_hits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_can_alloc_counts_disk_hits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_alloc_promotes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_persistence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_persistent_file_corruption_is_a_miss, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_forgets_persistent_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_forget_failure_is_counted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_write_erases_the_evicted_header, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_enospc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_eio, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_eio, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_short, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_bitflip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_swap_with_disk_below, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_clears_tiers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_between_plan_and_copies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flush_then_warm_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flush_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_is_locked_by_its_tier, setup, teardown),
        cmocka_unit_test_setup_teardown(test_promotion_in_rounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_promotion_in_rounds_windowed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_promotion_rounds_keep_device_hits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prefetch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_identity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tier_stats_earlier_release_sizes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_attach_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
