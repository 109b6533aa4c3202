/* Window-aware prefix hits (kvc_pool_set_sliding_window): a prompt hits as far as the blocks its
 * first uncached token's window needs are cached, even when its leading blocks were evicted; the
 * blocks before that window start out released (-1, never taken, not counted against capacity).
 * kvc_alloc, kvc_can_alloc, kvc_prefix_lookup and kvc_prefix_lookup_tiers agree. Attention over
 * such a hit is checked against the dense reference in test_kernels_capi
 * (test_e2e_window_prefix_hit). */
#include "test_tier_helpers.h"

/* Leading -1 entries of seq's table (the rest must all be blocks). */
static int64_t released_of(kvc_pool *p, uint64_t seq) {
    int32_t t[64];
    const int64_t n = table_of(p, seq, t, 64);
    int64_t r = 0;
    while (r < n && t[r] < 0) ++r;
    for (int64_t i = r; i < n; ++i) assert_true(t[i] >= 0);
    return r;
}

static int32_t can_alloc_of(kvc_pool *p, const int32_t *t, int64_t n) {
    int32_t v = -1;
    OK(kvc_can_alloc(p, t, n, NULL, &v));
    return v;
}

/* Sequence `id` takes prompt t[0..first) and then decodes t[first..n) one token per call. */
static void decode_to(kvc_pool *p, uint64_t id, const int32_t *t, int64_t first, int64_t n) {
    OK(kvc_alloc(p, id, t, first, NULL, NULL));
    for (int64_t pos = first; pos < n; ++pos) OK(kvc_append(p, id, t + pos, 1, 0, NULL));
}

/* Block size 4, window 6, 12 blocks. Sequence 1 decodes 24 tokens and holds blocks 4 and 5 (its
 * appends released 0..3, cached, to the tail of the free queue in that order); sequence 2's
 * 28-token prompt then takes the 6 never-used blocks and evicts block 0. */
static void test_hit_after_leading_blocks_evicted(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 12, 1);
    OK(kvc_pool_set_sliding_window(p, 6));
    int32_t t[32], other[28];
    iota_tokens(t, 32, 100);
    iota_tokens(other, 28, 5000);
    decode_to(p, 1, t, 4, 24);
    assert_int_equal(released_of(p, 1), 4); /* the last append's previous token, 22: (22-5)/4 */
    OK(kvc_alloc(p, 2, other, 28, NULL, NULL));
    assert_int_equal(stats_of(p).free_blocks, 3); /* 1h 2h 3h */

    /* A 9-token prompt could hit 8 tokens, whose window (from position 3) needs block 0: gone.
     * A hit of 4 would need block 0 too (a hit always ends on a cached block). */
    assert_int_equal(cached_tokens_of(p, t, 9, NULL), 0);
    /* 25 tokens: the first uncached position 24 sees from 19 on, i.e. blocks 4 and 5, both held
     * by sequence 1. Without the window nothing would hit (block 0 is missing). */
    assert_int_equal(cached_tokens_of(p, t, 25, NULL), 24);
    int64_t dev = -1, host = -1, disk = -1;
    lookup_tiers(p, t, 25, &dev, &host, &disk);
    assert_int_equal(dev, 8); /* blocks 4, 5; the 16 tokens before them are in no tier */
    assert_int_equal(host + disk, 0);
    assert_int_equal(can_alloc_of(p, t, 25), KVC_ALLOC_OK); /* one fresh block of 3 free */

    const kvc_stats before = stats_of(p);
    int64_t cached = -1;
    OK(kvc_alloc(p, 3, t, 25, NULL, &cached));
    assert_int_equal(cached, 24);
    int32_t t1[8], t3[8];
    assert_int_equal(table_of(p, 1, t1, 8), 6);
    assert_int_equal(table_of(p, 3, t3, 8), 7);
    for (int i = 0; i < 4; ++i) assert_int_equal(t3[i], -1);
    assert_int_equal(t3[4], t1[4]);
    assert_int_equal(t3[5], t1[5]);
    assert_int_equal(t3[6], 1); /* the head of the free queue, 1h, evicted */
    const kvc_stats after = stats_of(p);
    assert_int_equal(after.free_blocks, before.free_blocks - 1);
    /* The device tier found 2 blocks (4 and 5), not the 6 the 24 cached tokens span. */
    assert_int_equal(tier_stats(p, KVC_TIER_DEVICE).hits, 2);
    assert_int_equal(after.prefix_hit_tokens - before.prefix_hit_tokens, 24);
    /* The first append releases nothing more: its target is where the hit started. */
    OK(kvc_append(p, 3, t + 25, 1, 0, NULL));
    assert_int_equal(released_of(p, 3), 4);
    CHECK_POOL(p);
    OK(kvc_free(p, 1));
    OK(kvc_free(p, 2));
    OK(kvc_free(p, 3));
    assert_int_equal(stats_of(p).free_blocks, 12);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* A prompt whose table is longer than the pool hits and fits: only the window's blocks are held.
 * Block size 4, window 6, 8 blocks; sequence 1 decodes 60 tokens (15 table entries, 2 held). */
static void test_prompt_longer_than_pool(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 8, 1);
    OK(kvc_pool_set_sliding_window(p, 6));
    int32_t t[64], other[61];
    iota_tokens(t, 64, 300);
    iota_tokens(other, 61, 9000);
    decode_to(p, 1, t, 4, 60);
    assert_int_equal(released_of(p, 1), 13); /* previous token 58: (58 - 5) / 4 */

    /* 61 tokens, 16 table entries: hit 60; from position 55 on, i.e. blocks 13, 14, are needed. */
    assert_int_equal(cached_tokens_of(p, t, 61, NULL), 60);
    assert_int_equal(can_alloc_of(p, t, 61), KVC_ALLOC_OK);
    int64_t cached = -1;
    OK(kvc_alloc(p, 2, t, 61, NULL, &cached));
    assert_int_equal(cached, 60);
    assert_int_equal(table_len(p, 2), 16);
    assert_int_equal(released_of(p, 2), 13);
    assert_int_equal(stats_of(p).used_blocks, 3); /* 13, 14 shared; one fresh */

    /* The same length without a hit needs 16 blocks of 8: never, and refused unchanged. */
    assert_int_equal(can_alloc_of(p, other, 61), KVC_ALLOC_NEVER);
    EXPECT_ERR_UNCHANGED(p, kvc_alloc(p, 3, other, 61, NULL, NULL), KVC_ERR_OUT_OF_BLOCKS);

    /* A prompt that leaves sequence 1's path at position 50: blocks 12.. differ, so the largest
     * usable hit ends with block 11 (c = 48, window from 43: blocks 10 and 11, released by
     * sequence 1 and still cached -- the 7 blocks evicted so far were 0..6). */
    int32_t fork_path[61];
    memcpy(fork_path, t, sizeof fork_path);
    fork_path[50] = -7;
    assert_int_equal(cached_tokens_of(p, fork_path, 61, NULL), 48);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* The window's blocks found in the host tier are restored; the ones before it stay where they are. */
static void test_window_hit_through_host_tier(void **state) {
    (void)state;
    kvc_pool *p = tier_pool(8, 1);
    OK(kvc_tier_attach_host(p, 32));
    OK(kvc_pool_set_sliding_window(p, 6));
    int32_t t[32];
    prompt(t, 32, 7);
    decode_to(p, 1, t, 4, 24);
    OK(kvc_free(p, 1));
    churn(p, 8, 100); /* 8 fresh blocks: every cached device block spills to the host tier */
    int64_t dev = -1, host = -1, disk = -1;
    lookup_tiers(p, t, 25, &dev, &host, &disk);
    assert_int_equal(dev, 0);
    assert_int_equal(host, 8); /* blocks 4 and 5 only */
    assert_int_equal(disk, 0);
    assert_int_equal(cached_tokens_of(p, t, 25, NULL), 24);
    const int64_t hits_before = tier_stats(p, KVC_TIER_HOST).hits;
    int64_t cached = -1;
    OK(kvc_alloc(p, 2, t, 25, NULL, &cached));
    assert_int_equal(cached, 24);
    assert_int_equal(released_of(p, 2), 4);
    assert_int_equal(tier_stats(p, KVC_TIER_HOST).hits - hits_before, 2);
    assert_int_equal(tier_stats(p, KVC_TIER_DEVICE).hits, 0); /* the 4 skipped blocks are no hits */
    assert_int_equal(stats_of(p).used_blocks, 3); /* two restored, one fresh */
    CHECK_POOL(p);
    OK(kvc_free(p, 2));
    OK(kvc_pool_destroy(p));
}

/* Disk tier: only the window's blocks are read back (promoted through the host tier) and they
 * carry the bytes written before; the blocks before the window stay on disk, unread. Device 8
 * blocks, host 4 slots, disk 16; prompt P of 17 tokens (4 full blocks) pushed down to the disk by
 * another prompt's blocks, as in test_tier_disk. Window 6: position 16 sees from 11, block 2 on. */
static void test_window_hit_from_disk(void **state) {
    (void)state;
    char dir[128], path[256];
    temp_path(dir, sizeof dir, path, sizeof path, "tier.bin");
    kvc_pool *p = tier_pool(8, 1);
    OK(kvc_tier_attach_host(p, 4));
    OK(kvc_tier_attach_disk(p, path, 16, 0));
    OK(kvc_pool_set_sliding_window(p, 6));
    int32_t P[17], R[17];
    prompt(P, 17, 1);
    prompt(R, 17, 77);
    alloc_free(p, 1, P, 17, KVC_PRIORITY_DEFAULT, 31);
    churn(p, 8, 100);
    alloc_free(p, 2, R, 17, KVC_PRIORITY_DEFAULT, 32);
    churn(p, 8, 100);
    int64_t dev = -1, host = -1, disk = -1;
    lookup_tiers(p, P, 17, &dev, &host, &disk);
    assert_int_equal(dev + host, 0);
    assert_int_equal(disk, 8); /* blocks 2 and 3; blocks 0 and 1 are on disk too but not needed */
    assert_int_equal(cached_tokens_of(p, P, 17, NULL), 16);
    const int64_t reads_before = tier_stats(p, KVC_TIER_DISK).blocks_out;
    int64_t cached = -1;
    OK(kvc_alloc(p, 3, P, 17, NULL, &cached));
    assert_int_equal(cached, 16);
    assert_int_equal(released_of(p, 3), 2);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).blocks_out - reads_before, 2);
    int32_t table[8];
    assert_int_equal(table_of(p, 3, table, 8), 5);
    unsigned char want[TBLOCK_BYTES], got[TBLOCK_BYTES];
    for (int64_t i = 2; i < 4; ++i) {
        pattern(want, 31, i);
        OK(kvc_storage_copy_blocks(p, &table[i], 1, got, 1));
        assert_memory_equal(want, got, TBLOCK_BYTES);
    }
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
    unlink(path);
    rmdir(dir);
}

/* Hashes of the BLOCK_STORED events a fresh pool (window 0 or 6, another prompt cached first so
 * that the windowed search runs) emits for a 40-token prompt with a LoRA id and a multimodal item;
 * returns how many. With a window, kvc_alloc enters the blocks the search hashed under the
 * search's keys without hashing them again: they must be the keys hashing gives. */
static int stored_hashes(int32_t window, uint64_t *hi, uint64_t *lo, int cap) {
    kvc_pool *p = make_pool(4, 32, 1);
    OK(kvc_pool_set_sliding_window(p, window));
    int32_t other[9], P[40];
    iota_tokens(other, 9, 7000);
    iota_tokens(P, 40, 3);
    OK(kvc_alloc(p, 1, other, 9, NULL, NULL));
    kvc_keys *k = NULL;
    OK(kvc_keys_create(&k));
    OK(kvc_keys_set_lora(k, 42));
    OK(kvc_keys_add_mm(k, 0x1234, 0x5678, 10, 7));
    kvc_event ev;
    int32_t toks[4];
    int32_t has = 1;
    while (has) {
        ev.struct_size = sizeof ev;
        OK(kvc_event_pop(p, &ev, toks, 4, &has)); /* drop the first prompt's events */
    }
    int64_t cached = -1;
    OK(kvc_alloc(p, 2, P, 40, k, &cached));
    assert_int_equal(cached, 0);
    int n = 0;
    for (;;) {
        ev.struct_size = sizeof ev;
        OK(kvc_event_pop(p, &ev, toks, 4, &has));
        if (!has) break;
        assert_int_equal(ev.type, KVC_EVENT_BLOCK_STORED);
        assert_true(n < cap);
        hi[n] = ev.hash_hi;
        lo[n] = ev.hash_lo;
        ++n;
    }
    /* And they hit: the same prompt again (a 41st token) is cached up to 40. */
    int32_t P41[41];
    memcpy(P41, P, sizeof P);
    P41[40] = 1;
    int64_t hit = -1;
    OK(kvc_prefix_lookup(p, P41, 41, k, &hit));
    assert_int_equal(hit, 40);
    OK(kvc_keys_destroy(k));
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
    return n;
}

static void test_search_keys_equal_hashing(void **state) {
    (void)state;
    uint64_t hi0[16], lo0[16], hi6[16], lo6[16];
    assert_int_equal(stored_hashes(0, hi0, lo0, 16), 10);
    assert_int_equal(stored_hashes(6, hi6, lo6, 16), 10);
    assert_memory_equal(hi0, hi6, sizeof(uint64_t) * 10);
    assert_memory_equal(lo0, lo6, sizeof(uint64_t) * 10);
}

/* kvc_keys_set_max_cached_tokens caps the hit (rounded down to a block) in kvc_prefix_lookup,
 * kvc_can_alloc and kvc_alloc, with a window the largest valid hit below the cap. */
static void test_max_cached_tokens(void **state) {
    (void)state;
    kvc_keys *k = NULL;
    OK(kvc_keys_create(&k));
    int32_t t[32];
    iota_tokens(t, 32, 100);
    /* No window: a cached 24-token prefix. */
    kvc_pool *p = make_pool(4, 16, 1);
    OK(kvc_alloc(p, 1, t, 24, NULL, NULL));
    assert_int_equal(cached_tokens_of(p, t, 25, k), 24);
    OK(kvc_keys_set_max_cached_tokens(k, 10));
    assert_int_equal(cached_tokens_of(p, t, 25, k), 8);
    OK(kvc_keys_set_max_cached_tokens(k, 0));
    assert_int_equal(cached_tokens_of(p, t, 25, k), 0);
    OK(kvc_keys_set_max_cached_tokens(k, 10));
    const int64_t free_before = stats_of(p).free_blocks;
    int32_t v = -1;
    OK(kvc_can_alloc(p, t, 25, k, &v));
    assert_int_equal(v, KVC_ALLOC_OK);
    int64_t cached = -1;
    OK(kvc_alloc(p, 2, t, 25, k, &cached));
    assert_int_equal(cached, 8);
    assert_int_equal(stats_of(p).free_blocks, free_before - 5); /* blocks 2..6 fresh */
    int32_t t1[8], t2[8];
    table_of(p, 1, t1, 8);
    table_of(p, 2, t2, 8);
    assert_int_equal(t2[1], t1[1]);
    assert_int_not_equal(t2[2], t1[2]); /* block 2 is recomputed, not shared */
    OK(kvc_keys_clear(k));               /* clears the cap too */
    assert_int_equal(cached_tokens_of(p, t, 25, k), 24);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));

    /* Window 6: sequence 1 decodes 24 tokens (blocks 0..3 released, still cached). */
    p = make_pool(4, 16, 1);
    OK(kvc_pool_set_sliding_window(p, 6));
    decode_to(p, 1, t, 4, 24);
    OK(kvc_keys_set_max_cached_tokens(k, 23));
    assert_int_equal(cached_tokens_of(p, t, 25, k), 20); /* window from 15: blocks 3, 4 */
    OK(kvc_keys_set_max_cached_tokens(k, 17));
    OK(kvc_alloc(p, 2, t, 25, k, &cached));
    assert_int_equal(cached, 16); /* window from 11: blocks 2, 3 */
    assert_int_equal(released_of(p, 2), 2);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
    OK(kvc_keys_destroy(k));
}

/* The same cache state with and without a window: blocks 0..5 of a 24-token prompt cached, 2..5
 * pinned, 0 and 1 evicted (built without a window, where a pin covers the leading run; the window
 * is set once no sequence is left). Returns kvc_prefix_lookup of the prompt's first 25 tokens. */
static int64_t hit_after_evicting_blocks_0_1(int32_t window) {
    kvc_pool *p = make_pool(4, 12, 1);
    int32_t t[32], other[32];
    iota_tokens(t, 32, 100);
    iota_tokens(other, 32, 5000);
    OK(kvc_alloc(p, 1, t, 25, NULL, NULL)); /* blocks 0..5 full and cached, 6 partial */
    int64_t n = 0;
    OK(kvc_prefix_pin(p, t, 24, NULL, &n));
    assert_int_equal(n, 24);
    OK(kvc_prefix_unpin(p, t, 8, NULL, &n)); /* blocks 0 and 1 only */
    assert_int_equal(n, 8);
    OK(kvc_free(p, 1)); /* partial 6 to the head, 1h and 0h (unpinned) to the tail: [6..11 1h 0h] */
    OK(kvc_alloc(p, 2, other, 32, NULL, NULL)); /* 8 blocks: 6..11, then 1h and 0h are evicted */
    OK(kvc_free(p, 2));
    OK(kvc_pool_set_sliding_window(p, window));
    const int64_t hit = cached_tokens_of(p, t, 25, NULL);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p)); /* with blocks 2..5 still pinned: destroy takes them too */
    return hit;
}

static void test_leading_blocks_needed_only_without_window(void **state) {
    (void)state;
    assert_int_equal(hit_after_evicting_blocks_0_1(0), 0);   /* the walk stops at block 0 */
    assert_int_equal(hit_after_evicting_blocks_0_1(6), 24);  /* blocks 4, 5 suffice */
    assert_int_equal(hit_after_evicting_blocks_0_1(12), 24); /* from position 13: blocks 3..5 */
    assert_int_equal(hit_after_evicting_blocks_0_1(20), 0);  /* from 5: block 1 is gone; so down to 0 */
}

/* Windowed kvc_prefix_pin (block size 4, window 6, 16 blocks): a 24-token system prompt S (blocks
 * 0..5) pins only what a hit at its end needs -- blocks 4, 5 (the window of position 24: keys from
 * 19) and block 3, which S's own admission needs (it is block-aligned, so it hits at most 20 tokens:
 * keys from 15). Another request then evicts every unpinned block; S and S + 8 still hit. */
static void test_windowed_pin_holds_only_the_window(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 16, 1);
    OK(kvc_pool_set_sliding_window(p, 6));
    int32_t s[32], other[64];
    iota_tokens(s, 32, 100);
    iota_tokens(other, 64, 5000);
    OK(kvc_alloc(p, 1, s, 25, NULL, NULL)); /* blocks 0..5 cached, 6 partial */
    int64_t n = -1;
    OK(kvc_prefix_pin(p, s, 24, NULL, &n));
    assert_int_equal(n, 24);                              /* the hit it protects */
    assert_int_equal(stats_of(p).pinned_blocks, 3);       /* 3, 4, 5 -- not the leading run */
    OK(kvc_free(p, 1));
    /* 13 blocks unpinned (0..2, 6..15): a 52-token prompt takes all of them. */
    int64_t cached = -1;
    OK(kvc_alloc(p, 2, other, 52, NULL, &cached));
    assert_int_equal(cached, 0);
    OK(kvc_free(p, 2));
    assert_int_equal(cached_tokens_of(p, s, 24, NULL), 20); /* S itself: blocks 3, 4 */
    assert_int_equal(cached_tokens_of(p, s, 25, NULL), 24); /* S + anything: blocks 4, 5 */
    assert_int_equal(cached_tokens_of(p, s, 9, NULL), 0);   /* blocks 0, 1 are gone */
    OK(kvc_alloc(p, 3, s, 24, NULL, &cached));
    assert_int_equal(cached, 20);
    assert_int_equal(released_of(p, 3), 3); /* 0..2 were never needed */
    OK(kvc_free(p, 3));
    /* Unpin balances: the same three blocks, then nothing is left to unpin. */
    OK(kvc_prefix_unpin(p, s, 24, NULL, &n));
    assert_int_equal(n, 24);
    assert_int_equal(stats_of(p).pinned_blocks, 0);
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_unpin(p, s, 24, NULL, &n), KVC_ERR_STATE);
    /* Nothing of a window cached: nothing pinned, 0 tokens. */
    OK(kvc_prefix_pin(p, other + 40, 24, NULL, &n));
    assert_int_equal(n, 0);
    assert_int_equal(stats_of(p).pinned_blocks, 0);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* Overlapping windowed pins balance in either order when each unpin passes the token count its pin
 * returned: S (24 tokens) pins blocks 3..5, S + 8 (32 tokens) pins 5..7 (block 5 twice). Pins nest. */
static void test_windowed_pins_overlap(void **state) {
    (void)state;
    for (int order = 0; order < 2; ++order) {
        kvc_pool *p = make_pool(4, 16, 1);
        OK(kvc_pool_set_sliding_window(p, 6));
        int32_t s[40];
        iota_tokens(s, 40, 100);
        OK(kvc_alloc(p, 1, s, 33, NULL, NULL)); /* blocks 0..7 cached */
        int64_t short_n = -1, long_n = -1, n = -1;
        OK(kvc_prefix_pin(p, s, 24, NULL, &short_n));
        OK(kvc_prefix_pin(p, s, 32, NULL, &long_n));
        assert_int_equal(short_n, 24);
        assert_int_equal(long_n, 32);
        assert_int_equal(stats_of(p).pinned_blocks, 5); /* 3..7 */
        OK(kvc_prefix_pin(p, s, 24, NULL, &n));          /* nested: counts only */
        assert_int_equal(stats_of(p).pinned_blocks, 5);
        OK(kvc_prefix_unpin(p, s, 24, NULL, &n));
        assert_int_equal(stats_of(p).pinned_blocks, 5);
        if (order == 0) {
            OK(kvc_prefix_unpin(p, s, short_n, NULL, &n));
            assert_int_equal(stats_of(p).pinned_blocks, 3); /* 5..7 */
            OK(kvc_prefix_unpin(p, s, long_n, NULL, &n));
        } else {
            OK(kvc_prefix_unpin(p, s, long_n, NULL, &n));
            assert_int_equal(stats_of(p).pinned_blocks, 3); /* 3..5 */
            OK(kvc_prefix_unpin(p, s, short_n, NULL, &n));
        }
        assert_int_equal(stats_of(p).pinned_blocks, 0);
        OK(kvc_free(p, 1));
        CHECK_POOL(p);
        OK(kvc_pool_destroy(p));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hit_after_leading_blocks_evicted),
        cmocka_unit_test(test_prompt_longer_than_pool),
        cmocka_unit_test(test_window_hit_through_host_tier),
        cmocka_unit_test(test_window_hit_from_disk),
        cmocka_unit_test(test_search_keys_equal_hashing),
        cmocka_unit_test(test_max_cached_tokens),
        cmocka_unit_test(test_leading_blocks_needed_only_without_window),
        cmocka_unit_test(test_windowed_pin_holds_only_the_window),
        cmocka_unit_test(test_windowed_pins_overlap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
