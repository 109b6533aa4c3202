/* Prefix caching: chained hashes, verified hits, the last-token rule, eviction order, priorities,
 * pinning, keys (salt, LoRA, multimodal), forced collisions, reset. */
#include "test_pool_helpers.h"

static int64_t alloc_cached(kvc_pool *p, uint64_t id, const int32_t *t, int64_t n, const kvc_keys *k) {
    int64_t c = -1;
    OK(kvc_alloc(p, id, t, n, k, &c));
    CHECK_POOL(p);
    return c;
}

static void drain_events(kvc_pool *p) {
    kvc_event ev;
    ev.struct_size = sizeof ev;
    int32_t toks[256], has = 1;
    while (has) OK(kvc_event_pop(p, &ev, toks, 256, &has));
}

static void test_shared_system_prompt(void **state) {
    (void)state;
    kvc_pool *p = make_pool(16, 64, 1);
    int32_t a[84], b[84];
    iota_tokens(a, 84, 1000); /* 64-token system prompt, then the user's 20 */
    memcpy(b, a, 64 * sizeof(int32_t));
    iota_tokens(b + 64, 20, 5000);
    assert_int_equal(alloc_cached(p, 1, a, 84, NULL), 0);
    assert_int_equal(cached_tokens_of(p, b, 84, NULL), 64);
    assert_int_equal(alloc_cached(p, 2, b, 84, NULL), 64);
    int32_t ta[8], tb[8];
    table_of(p, 1, ta, 8);
    table_of(p, 2, tb, 8);
    for (int i = 0; i < 4; ++i) {
        assert_int_equal(ta[i], tb[i]);
        assert_int_equal(kvct_block_refcount(p, ta[i]), 2);
    }
    assert_int_not_equal(ta[4], tb[4]);
    assert_int_equal(alloc_cached(p, 3, a, 84, NULL), 80); /* same prompt: all 5 full blocks */
    kvc_stats s = stats_of(p);
    assert_int_equal(s.prefix_query_tokens, 3 * 84);
    assert_int_equal(s.prefix_hit_tokens, 64 + 80);
    assert_true(s.prefix_hit_rate > (144.0 / 252.0) - 1e-12 && s.prefix_hit_rate < (144.0 / 252.0) + 1e-12);
    assert_int_equal(s.used_blocks, 6 + 2 + 1); /* A: 6, B: 2 own, C: 1 own */
    assert_int_equal(s.blocks_allocated, 9);
    OK(kvc_pool_destroy(p));
}

static void test_last_token_rule_and_duplicates(void **state) {
    (void)state;
    kvc_pool *p = make_pool(16, 16, 1);
    int32_t t[49];
    iota_tokens(t, 49, 7);
    assert_int_equal(alloc_cached(p, 1, t, 48, NULL), 0); /* 3 full blocks enter the cache */
    assert_int_equal(cached_tokens_of(p, t, 48, NULL), 32);  /* never all of them */
    assert_int_equal(cached_tokens_of(p, t, 49, NULL), 48);
    assert_int_equal(cached_tokens_of(p, t, 33, NULL), 32);
    assert_int_equal(cached_tokens_of(p, t, 32, NULL), 16);
    assert_int_equal(cached_tokens_of(p, t, 1, NULL), 0);
    drain_events(p);
    assert_int_equal(alloc_cached(p, 2, t, 48, NULL), 32);
    int32_t t1[3], t2[3];
    table_of(p, 1, t1, 3);
    table_of(p, 2, t2, 3);
    assert_int_not_equal(t1[2], t2[2]);
    /* Same content in a second block: it is entered too, as another copy of the hash, with its own
     * BlockStored event (tests/test_prefix_copies.c has the rest of the duplicate semantics). */
    assert_int_equal(kvct_block_is_cached(p, t1[2]), 1);
    assert_int_equal(kvct_block_is_cached(p, t2[2]), 1);
    kvc_event ev;
    ev.struct_size = sizeof ev;
    int32_t toks[16], has = -1;
    OK(kvc_event_pop(p, &ev, toks, 16, &has));
    assert_int_equal(has, 1);
    assert_int_equal(ev.type, KVC_EVENT_BLOCK_STORED);
    assert_int_equal(ev.block_id, t2[2]);
    assert_memory_equal(toks, t + 32, sizeof toks);
    OK(kvc_event_pop(p, &ev, toks, 16, &has));
    assert_int_equal(has, 0);
    assert_int_equal(stats_of(p).cached_blocks_total, 4); /* copies count */
    /* Freeing the first owner keeps its copy cached (in the LRU list), the second's stays held. */
    OK(kvc_free(p, 1));
    CHECK_POOL(p);
    assert_int_equal(kvct_block_is_cached(p, t1[2]), 1);
    assert_int_equal(stats_of(p).cached_free_blocks, 1);
    assert_int_equal(cached_tokens_of(p, t, 49, NULL), 48);
    OK(kvc_pool_destroy(p));
}

static void test_changed_block_invalidates_later_blocks(void **state) {
    (void)state;
    kvc_pool *p = make_pool(16, 32, 1);
    int32_t a[65], b[65];
    iota_tokens(a, 65, 1);
    memcpy(b, a, sizeof a);
    b[20] = 99999; /* block 1 differs; blocks 2, 3 hold equal tokens */
    assert_int_equal(alloc_cached(p, 1, a, 65, NULL), 0);
    assert_int_equal(cached_tokens_of(p, a, 65, NULL), 64);
    assert_int_equal(cached_tokens_of(p, b, 65, NULL), 16);
    assert_int_equal(alloc_cached(p, 2, b, 65, NULL), 16);
    b[20] = a[20];
    b[0] = -1; /* first block differs: nothing hits */
    assert_int_equal(cached_tokens_of(p, b, 65, NULL), 0);
    OK(kvc_pool_destroy(p));
}

static void test_eviction_order_after_two_frees(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 10, 1);
    int32_t a[13], b[13], c[16];
    iota_tokens(a, 13, 100); /* 3 full blocks + 1 token */
    iota_tokens(b, 13, 200);
    iota_tokens(c, 16, 300);
    alloc_cached(p, 1, a, 13, NULL);
    alloc_cached(p, 2, b, 13, NULL);
    int32_t ta[4], tb[4];
    table_of(p, 1, ta, 4);
    table_of(p, 2, tb, 4);
    OK(kvc_free(p, 1));
    OK(kvc_free(p, 2));
    CHECK_POOL(p);
    kvc_stats s = stats_of(p);
    assert_int_equal(s.free_blocks, 10);
    assert_int_equal(s.cached_free_blocks, 6);
    drain_events(p);
    /* Reuse order: never-cached blocks first (2 unused + the two partial blocks), then A's cached
     * blocks deepest first (A freed earlier = least recently used), then B's. */
    assert_int_equal(alloc_cached(p, 3, c, 16, NULL), 0); /* 4 blocks: only uncached ones */
    assert_int_equal(cached_tokens_of(p, a, 13, NULL), 12);
    assert_int_equal(cached_tokens_of(p, b, 13, NULL), 12);
    assert_int_equal(stats_of(p).evictions, 0);
    drain_events(p); /* c's 4 BlockStored */
    OK(kvc_append(p, 3, c, 8, 0, NULL)); /* 2 more blocks: evicts A's block 2, then A's block 1 */
    CHECK_POOL(p);
    assert_int_equal(stats_of(p).evictions, 2);
    assert_int_equal(cached_tokens_of(p, a, 13, NULL), 4);
    assert_int_equal(cached_tokens_of(p, b, 13, NULL), 12);
    kvc_event ev;
    ev.struct_size = sizeof ev;
    int32_t toks[4], has = 0;
    OK(kvc_event_pop(p, &ev, toks, 4, &has));
    assert_int_equal(has, 1);
    assert_int_equal(ev.type, KVC_EVENT_BLOCK_REMOVED);
    assert_int_equal(ev.block_id, ta[2]);
    OK(kvc_event_pop(p, &ev, toks, 4, &has));
    assert_int_equal(ev.type, KVC_EVENT_BLOCK_REMOVED);
    assert_int_equal(ev.block_id, ta[1]);
    /* Hits on refcount-0 blocks take them out of the free queue (they are not evicted for the
     * request's one fresh block: A's block 0 is). */
    assert_int_equal(stats_of(p).cached_free_blocks, 4);
    assert_int_equal(alloc_cached(p, 4, b, 13, NULL), 12);
    s = stats_of(p);
    assert_int_equal(s.cached_free_blocks, 0);
    assert_int_equal(s.free_blocks, 0);
    assert_int_equal(s.evictions, 3);
    for (int i = 0; i < 3; ++i) assert_int_equal(kvct_block_refcount(p, tb[i]), 1);
    assert_int_equal(cached_tokens_of(p, a, 13, NULL), 0);
    OK(kvc_pool_destroy(p));
}

static void test_salt_isolation(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 32, 1);
    kvc_keys *ka, *kb;
    OK(kvc_keys_create(&ka));
    OK(kvc_keys_create(&kb));
    OK(kvc_keys_set_salt(ka, "tenant-a"));
    OK(kvc_keys_set_salt(kb, "tenant-b"));
    int32_t t[17];
    iota_tokens(t, 17, 1);
    alloc_cached(p, 1, t, 17, ka);
    assert_int_equal(cached_tokens_of(p, t, 17, ka), 16);
    assert_int_equal(cached_tokens_of(p, t, 17, kb), 0);
    assert_int_equal(cached_tokens_of(p, t, 17, NULL), 0);
    assert_int_equal(alloc_cached(p, 2, t, 17, kb), 0);
    OK(kvc_keys_set_salt(kb, "tenant-a"));
    assert_int_equal(cached_tokens_of(p, t, 17, kb), 16);
    OK(kvc_keys_set_salt(kb, "")); /* "" = no salt */
    assert_int_equal(cached_tokens_of(p, t, 17, kb), 0);
    alloc_cached(p, 3, t, 17, NULL);
    assert_int_equal(cached_tokens_of(p, t, 17, kb), 16);
    OK(kvc_keys_set_salt(kb, NULL));
    assert_int_equal(cached_tokens_of(p, t, 17, kb), 16);
    OK(kvc_keys_destroy(ka));
    OK(kvc_keys_destroy(kb));
    OK(kvc_pool_destroy(p));
}

static void test_lora_separation_and_tagging(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 32, 1);
    kvc_keys *k;
    OK(kvc_keys_create(&k));
    int32_t t[9];
    iota_tokens(t, 9, 1);
    OK(kvc_keys_set_lora(k, 1));
    alloc_cached(p, 1, t, 9, k);
    assert_int_equal(cached_tokens_of(p, t, 9, k), 8);
    OK(kvc_keys_set_lora(k, 2));
    assert_int_equal(cached_tokens_of(p, t, 9, k), 0);
    OK(kvc_keys_set_lora(k, 0)); /* 0 = no adapter = same as no keys */
    assert_int_equal(cached_tokens_of(p, t, 9, k), 0);
    alloc_cached(p, 2, t, 9, NULL);
    assert_int_equal(cached_tokens_of(p, t, 9, k), 8);
    /* A salt whose bytes equal a LoRA id's bytes must not hit the LoRA's blocks (tagged keys). */
    uint64_t lora = 0x4141414141414141ull; /* "AAAAAAAA" */
    OK(kvc_keys_clear(k));
    OK(kvc_keys_set_lora(k, lora));
    int32_t u[5] = {5, 6, 7, 8, 9};
    alloc_cached(p, 3, u, 5, k);
    assert_int_equal(cached_tokens_of(p, u, 5, k), 4);
    OK(kvc_keys_clear(k));
    OK(kvc_keys_set_salt(k, "AAAAAAAA"));
    assert_int_equal(cached_tokens_of(p, u, 5, k), 0);
    OK(kvc_keys_destroy(k));
    OK(kvc_pool_destroy(p));
}

static void test_multimodal_offsets(void **state) {
    (void)state;
    kvc_pool *p = make_pool(16, 64, 1);
    int32_t t[65];
    iota_tokens(t, 65, 1); /* placeholder ids of an image at [20, 28) */
    kvc_keys *img1, *img2, *shifted;
    OK(kvc_keys_create(&img1));
    OK(kvc_keys_create(&img2));
    OK(kvc_keys_create(&shifted));
    OK(kvc_keys_add_mm(img1, 0x1111, 0x2222, 20, 8));
    OK(kvc_keys_add_mm(img2, 0x3333, 0x4444, 20, 8));
    OK(kvc_keys_add_mm(shifted, 0x1111, 0x2222, 24, 8));
    alloc_cached(p, 1, t, 65, img1);
    assert_int_equal(cached_tokens_of(p, t, 65, img1), 64);
    assert_int_equal(cached_tokens_of(p, t, 65, img2), 16);    /* block 1 overlaps a different image */
    assert_int_equal(cached_tokens_of(p, t, 65, shifted), 16); /* same image, other offset inside block 1 */
    assert_int_equal(cached_tokens_of(p, t, 65, NULL), 16);    /* no image at all */
    assert_int_equal(alloc_cached(p, 2, t, 65, img2), 16);
    assert_int_equal(cached_tokens_of(p, t, 65, img2), 64);
    /* An item spanning blocks 1 and 2: both carry it; block 0 still hits. */
    kvc_keys *span;
    OK(kvc_keys_create(&span));
    OK(kvc_keys_add_mm(span, 0x5555, 0x6666, 30, 10));
    int32_t u[65];
    iota_tokens(u, 65, 10000);
    alloc_cached(p, 3, u, 65, span);
    OK(kvc_keys_clear(span));
    OK(kvc_keys_add_mm(span, 0x5555, 0x6666, 30, 10));
    OK(kvc_keys_add_mm(span, 0x7777, 0x8888, 50, 2)); /* differs only in block 3 */
    assert_int_equal(cached_tokens_of(p, u, 65, span), 48);
    OK(kvc_keys_clear(span));
    OK(kvc_keys_add_mm(span, 0x5555, 0x6666, 30, 3)); /* other length: block 1 differs already */
    assert_int_equal(cached_tokens_of(p, u, 65, span), 16);
    OK(kvc_keys_destroy(span));
    OK(kvc_keys_destroy(img1));
    OK(kvc_keys_destroy(img2));
    OK(kvc_keys_destroy(shifted));
    OK(kvc_pool_destroy(p));
}

static void constant_hash(const void *data, size_t len, uint64_t *hi, uint64_t *lo) {
    (void)data;
    (void)len;
    *hi = 0xC011151011ull;
    *lo = 0xC011151011ull;
}

static void test_forced_collision_is_a_counted_miss(void **state) {
    (void)state;
    kvct_set_hash_override(constant_hash);
    kvc_pool *p = make_pool(4, 16, 1);
    int32_t a[9], b[9];
    iota_tokens(a, 9, 1);
    iota_tokens(b, 9, 500);
    alloc_cached(p, 1, a, 9, NULL);
    assert_int_equal(cached_tokens_of(p, a, 9, NULL), 4); /* block 1 collides with block 0: parent differs */
    kvc_stats before = stats_of(p);
    assert_int_equal(cached_tokens_of(p, b, 9, NULL), 0); /* hash matches, tokens differ */
    kvc_stats after = stats_of(p);
    assert_memory_equal(&before, &after, sizeof after); /* lookup counts nothing */
    assert_int_equal(alloc_cached(p, 2, b, 9, NULL), 0);
    assert_int_equal(stats_of(p).verify_misses, before.verify_misses + 1);
    int32_t tb[3];
    table_of(p, 2, tb, 3);
    int32_t ta[3];
    table_of(p, 1, ta, 3);
    assert_int_not_equal(tb[0], ta[0]); /* not shared */
    assert_int_equal(kvct_block_refcount(p, ta[0]), 1);
    /* Nor entered as another copy of that hash: a copy must hold the same content. */
    assert_int_equal(kvct_block_is_cached(p, tb[0]), 0);
    assert_int_equal(kvct_block_is_cached(p, tb[1]), 0);
    assert_int_equal(stats_of(p).cached_blocks_total, 1);
    assert_int_equal(cached_tokens_of(p, b, 9, NULL), 0);
    kvct_set_hash_override(NULL);
    OK(kvc_pool_destroy(p));
}

static void test_failed_alloc_leaves_refcounts(void **state) {
    (void)state;
    kvc_pool *p = make_pool(16, 6, 1);
    int32_t t[88], other[1] = {424242};
    iota_tokens(t, 88, 1);
    alloc_cached(p, 1, t, 49, NULL); /* 4 blocks, 3 cached */
    int32_t ta[4];
    table_of(p, 1, ta, 4);
    OK(kvc_free(p, 1));
    alloc_cached(p, 2, other, 1, NULL); /* takes an uncached block: 5 free, 3 of them cached */
    drain_events(p);
    int32_t v = -1;
    OK(kvc_can_alloc(p, t, 88, NULL, &v));
    assert_int_equal(v, KVC_ALLOC_LATER); /* 3 hits but refcount-0 hits are not free: 3 > 5 - 3 */
    int64_t cached = -7;
    EXPECT_ERR_UNCHANGED(p, kvc_alloc(p, 3, t, 88, NULL, &cached), KVC_ERR_OUT_OF_BLOCKS);
    assert_int_equal(cached, -7);
    for (int i = 0; i < 3; ++i) {
        assert_int_equal(kvct_block_refcount(p, ta[i]), 0);
        assert_int_equal(kvct_block_is_cached(p, ta[i]), 1);
    }
    kvc_event ev;
    ev.struct_size = sizeof ev;
    int32_t toks[16], has = -1;
    OK(kvc_event_pop(p, &ev, toks, 16, &has));
    assert_int_equal(has, 0); /* no event either */
    assert_int_equal(cached_tokens_of(p, t, 88, NULL), 48);
    OK(kvc_can_alloc(p, t, 68, NULL, &v));
    assert_int_equal(v, KVC_ALLOC_OK); /* 5 blocks, 3 hit: 2 fresh of 2 */
    assert_int_equal(alloc_cached(p, 3, t, 68, NULL), 48);
    assert_int_equal(stats_of(p).free_blocks, 0);
    OK(kvc_pool_destroy(p));
}

static void test_priority_beats_lru(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 8, 1);
    kvc_keys *hi, *lo;
    OK(kvc_keys_create(&hi));
    OK(kvc_keys_create(&lo));
    OK(kvc_keys_set_priority(hi, 80));
    OK(kvc_keys_set_priority(lo, 20));
    int32_t a[9], b[9], c[16];
    iota_tokens(a, 8, 100);
    iota_tokens(b, 8, 200);
    iota_tokens(c, 16, 300);
    alloc_cached(p, 1, a, 8, hi); /* 2 blocks, both cached */
    alloc_cached(p, 2, b, 8, lo);
    int32_t ta[2];
    table_of(p, 1, ta, 2);
    assert_int_equal(kvct_block_priority(p, ta[0]), 80);
    OK(kvc_free(p, 1)); /* high priority freed first (older) ... */
    OK(kvc_free(p, 2)); /* ... low priority freed last (most recent) */
    CHECK_POOL(p);
    alloc_cached(p, 3, c, 16, NULL); /* 4 uncached blocks: no eviction */
    assert_int_equal(stats_of(p).evictions, 0);
    OK(kvc_append(p, 3, c, 1, 0, NULL)); /* needs one: the low-priority blocks go first despite LRU */
    CHECK_POOL(p);
    assert_int_equal(cached_tokens_of(p, a, 9, NULL), 8);
    assert_int_equal(cached_tokens_of(p, b, 9, NULL), 4); /* deepest block of b evicted */
    OK(kvc_append(p, 3, c, 4, 0, NULL));
    assert_int_equal(cached_tokens_of(p, b, 9, NULL), 0);
    assert_int_equal(cached_tokens_of(p, a, 9, NULL), 8);
    OK(kvc_append(p, 3, c, 4, 0, NULL));
    assert_int_equal(cached_tokens_of(p, a, 9, NULL), 4);
    /* A hit by a request of another priority re-prioritizes the block. */
    OK(kvc_free(p, 3));
    OK(kvc_keys_set_priority(lo, 5));
    assert_int_equal(alloc_cached(p, 4, a, 5, lo), 4);
    assert_int_equal(kvct_block_priority(p, ta[0]), 5);
    OK(kvc_keys_destroy(hi));
    OK(kvc_keys_destroy(lo));
    OK(kvc_pool_destroy(p));
}

/* The prefix walk takes a block's hash from the "child hint" of the block hit before it (the block
 * a walk last hit after it, lib/core/prefix_cache.hpp) when that child holds the same parent hash
 * and token ids. Here the hint is stale: block A0 was evicted and reused for other content while its old
 * child (T) stayed cached, so the hint names a block with the right token ids under another parent.
 * It must not be a hit (a walk that skipped the parent comparison would hand out T's KV). */
static void stale_child_hint(int32_t bs, int32_t window) {
    kvc_pool *p = make_pool(bs, 4, 1);
    /* A window wider than every prompt here releases nothing but sends the hit search through the
     * windowed path (lib/core/prefix_hit.cpp), which takes keys from hints too. */
    if (window > 0) OK(kvc_pool_set_sliding_window(p, window));
    kvc_keys *hi, *lo;
    OK(kvc_keys_create(&hi));
    OK(kvc_keys_create(&lo));
    OK(kvc_keys_set_priority(hi, 80));
    OK(kvc_keys_set_priority(lo, 20));
    int32_t at[2 * 16 + 1], ay[16 + 1], f[1], dz[2 * 16], query[3 * 16 + 1];
    iota_tokens(at, bs, 100);      /* block a */
    iota_tokens(at + bs, bs, 200); /* block t */
    at[2 * bs] = 7;
    alloc_cached(p, 1, at, 2 * bs + 1, hi); /* a, t cached, a partial block */
    assert_int_equal(cached_tokens_of(p, at, 2 * bs + 1, NULL), 2 * bs); /* the walk learns the hint a -> t */
    int32_t t1[3];
    table_of(p, 1, t1, 3);
    const int32_t block_a = t1[0], block_t = t1[1];
    OK(kvc_free(p, 1));
    memcpy(ay, at, (size_t)bs * sizeof(int32_t));
    ay[bs] = 8;
    assert_int_equal(alloc_cached(p, 2, ay, bs + 1, lo), bs); /* a hit: its block now has priority 20 */
    OK(kvc_free(p, 2));
    f[0] = 9;
    alloc_cached(p, 3, f, 1, NULL); /* leaves one uncached free block */
    iota_tokens(dz, 2 * bs, 300);   /* blocks d, z */
    assert_int_equal(alloc_cached(p, 4, dz, 2 * bs, NULL), 0);
    int32_t t4[2];
    table_of(p, 4, t4, 2);
    assert_int_equal(t4[1], block_a); /* z went into a's block (the lowest priority evicted) ... */
    assert_int_equal(kvct_block_refcount(p, block_t), 0);
    memcpy(query, dz, 2 * (size_t)bs * sizeof(int32_t));
    memcpy(query + 2 * bs, at + bs, (size_t)bs * sizeof(int32_t)); /* ... while t, a's old child, is still cached */
    query[3 * bs] = 11;
    assert_int_equal(cached_tokens_of(p, query, 3 * bs + 1, NULL), 2 * bs);
    OK(kvc_free(p, 3));
    assert_int_equal(alloc_cached(p, 5, query, 3 * bs + 1, NULL), 2 * bs);
    /* No hash of this prompt matched other content: a key taken from the stale hint would name
     * t's block, whose parent then fails the hit's verification (the windowed search's symptom). */
    assert_int_equal(stats_of(p).verify_misses, 0);
    OK(kvc_keys_destroy(hi));
    OK(kvc_keys_destroy(lo));
    OK(kvc_pool_destroy(p));
}

static void test_stale_child_hint_is_no_hit(void **state) {
    (void)state;
    stale_child_hint(4, 0);
    stale_child_hint(4, 64);
    stale_child_hint(16, 0); /* block size 16: the walk's vector path (lib/core/pool_blocks.cpp) */
    stale_child_hint(16, 64);
}

/* A child hint naming a block that was evicted and taken by another sequence without being filled
 * (its record still holds the parent hash and token ids the hint matched) is no hit: the walk may
 * only take a hinted block the index still names. Block size 16 runs the walk's vector path
 * (lib/core/pool_blocks.cpp), 4 the generic one. */
static void evicted_child_hint(int32_t bs) {
    kvc_pool *p = make_pool(bs, 3, 1);
    int32_t prompt[2 * 16 + 1], one[1];
    iota_tokens(prompt, 2 * bs + 1, 100); /* blocks a, t and one more token */
    assert_int_equal(alloc_cached(p, 1, prompt, 2 * bs + 1, NULL), 0);
    int32_t t1[3];
    assert_int_equal(table_of(p, 1, t1, 3), 3);
    assert_int_equal(cached_tokens_of(p, prompt, 2 * bs + 1, NULL), 2 * bs); /* learns the hint a -> t */
    OK(kvc_free(p, 1)); /* t1[2] to the unhashed list; t then a to the LRU list */
    one[0] = 9;
    alloc_cached(p, 3, one, 1, NULL); /* takes t1[2] */
    one[0] = 10;
    alloc_cached(p, 4, one, 1, NULL); /* evicts t, the LRU head, and writes one token into it */
    int32_t t4[1];
    table_of(p, 4, t4, 1);
    assert_int_equal(t4[0], t1[1]);
    assert_int_equal(cached_tokens_of(p, prompt, 2 * bs + 1, NULL), bs); /* a only */
    OK(kvc_free(p, 3));
    OK(kvc_free(p, 4));
    assert_int_equal(alloc_cached(p, 5, prompt, 2 * bs + 1, NULL), bs);
    assert_int_equal(stats_of(p).verify_misses, 0);
    OK(kvc_pool_destroy(p));
}

static void test_evicted_child_hint_is_no_hit(void **state) {
    (void)state;
    evicted_child_hint(4);
    evicted_child_hint(16);
}

static void test_pinned_prefix_survives_pressure(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 8, 1);
    int32_t a[13], fill[32];
    iota_tokens(a, 13, 100);
    iota_tokens(fill, 32, 9000);
    int64_t pinned = -1, unpinned = -1;
    assert_int_equal(alloc_cached(p, 1, a, 13, NULL), 0);
    OK(kvc_prefix_pin(p, a, 13, NULL, &pinned)); /* pinned while in use */
    assert_int_equal(pinned, 12);
    OK(kvc_free(p, 1));
    CHECK_POOL(p);
    kvc_stats s = stats_of(p);
    assert_int_equal(s.pinned_blocks, 3);
    assert_int_equal(s.free_blocks, 5); /* pinned refcount-0 blocks are not free */
    assert_int_equal(s.cached_free_blocks, 0);
    alloc_cached(p, 2, fill, 20, NULL); /* every free block */
    EXPECT_ERR_UNCHANGED(p, kvc_alloc(p, 3, fill, 1, NULL, NULL), KVC_ERR_OUT_OF_BLOCKS);
    assert_int_equal(cached_tokens_of(p, a, 13, NULL), 12);
    OK(kvc_prefix_pin(p, a, 13, NULL, &pinned)); /* nested */
    OK(kvc_prefix_unpin(p, a, 13, NULL, &unpinned));
    assert_int_equal(unpinned, 12);
    assert_int_equal(stats_of(p).pinned_blocks, 3);
    OK(kvc_prefix_unpin(p, a, 13, NULL, &unpinned));
    CHECK_POOL(p);
    s = stats_of(p);
    assert_int_equal(s.pinned_blocks, 0);
    assert_int_equal(s.free_blocks, 3);
    assert_int_equal(s.cached_free_blocks, 3);
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_unpin(p, a, 13, NULL, &unpinned), KVC_ERR_STATE);
    OK(kvc_append(p, 2, fill, 4, 0, NULL)); /* now the pressure evicts them */
    assert_int_equal(cached_tokens_of(p, a, 13, NULL), 8);
    /* Pinning a prefix whose first block is not cached pins nothing. */
    int32_t z[8] = {-1, -2, -3, -4, -5, -6, -7, -8};
    OK(kvc_prefix_pin(p, z, 8, NULL, &pinned));
    assert_int_equal(pinned, 0);
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_unpin(p, z, 8, NULL, &unpinned), KVC_ERR_STATE);
    OK(kvc_prefix_unpin(p, z, 3, NULL, &unpinned)); /* no full block: nothing to do */
    assert_int_equal(unpinned, 0);
    OK(kvc_pool_destroy(p));
}

static void test_reset_refused_then_allowed(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 8, 1);
    int32_t a[9];
    iota_tokens(a, 9, 1);
    alloc_cached(p, 1, a, 9, NULL);
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_cache_reset(p), KVC_ERR_BUSY);
    OK(kvc_prefix_pin(p, a, 9, NULL, NULL));
    OK(kvc_free(p, 1));
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_cache_reset(p), KVC_ERR_BUSY); /* pinned */
    assert_int_equal(cached_tokens_of(p, a, 9, NULL), 8);
    OK(kvc_prefix_unpin(p, a, 9, NULL, NULL));
    drain_events(p);
    OK(kvc_prefix_cache_reset(p));
    CHECK_POOL(p);
    assert_int_equal(cached_tokens_of(p, a, 9, NULL), 0);
    kvc_stats s = stats_of(p);
    assert_int_equal(s.cached_free_blocks, 0);
    assert_int_equal(s.free_blocks, 8);
    kvc_event ev;
    ev.struct_size = sizeof ev;
    int32_t has = 0;
    OK(kvc_event_pop(p, &ev, NULL, 0, &has));
    assert_int_equal(has, 1);
    assert_int_equal(ev.type, KVC_EVENT_ALL_BLOCKS_CLEARED);
    EXPECT_ERR(kvc_prefix_cache_reset(NULL), KVC_ERR_NULL_ARG);
    /* The cache works again afterwards. */
    alloc_cached(p, 2, a, 9, NULL);
    assert_int_equal(cached_tokens_of(p, a, 9, NULL), 8);
    OK(kvc_pool_destroy(p));
}

static void test_blocks_cached_as_decode_fills_them(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 16, 1);
    int32_t t[32];
    iota_tokens(t, 32, 1);
    alloc_cached(p, 1, t, 10, NULL); /* blocks 0, 1 cached; block 2 holds 2 tokens */
    assert_int_equal(cached_tokens_of(p, t, 13, NULL), 8);
    OK(kvc_append(p, 1, t + 10, 1, 0, NULL));
    assert_int_equal(cached_tokens_of(p, t, 13, NULL), 8);
    OK(kvc_append(p, 1, t + 11, 1, 3, NULL)); /* block 2 full; lookahead slots 12..14 */
    CHECK_POOL(p);
    assert_int_equal(cached_tokens_of(p, t, 13, NULL), 12);
    assert_int_equal(cached_tokens_of(p, t, 17, NULL), 12); /* lookahead is never cached */
    OK(kvc_append(p, 1, t + 12, 4, 0, NULL));    /* confirms them: now block 3 is full */
    assert_int_equal(cached_tokens_of(p, t, 17, NULL), 16);
    /* A fork's copy-on-write block is cached with the child's own tokens. */
    OK(kvc_append(p, 1, t + 16, 2, 0, NULL)); /* 18 tokens: block 4 holds 2 */
    OK(kvc_fork(p, 1, 2));
    int32_t child[2] = {777, 778};
    OK(kvc_append(p, 2, child, 2, 0, NULL)); /* COW, then block 4 of the child is full */
    OK(kvc_append(p, 1, t + 18, 2, 0, NULL)); /* parent fills its own block 4 */
    CHECK_POOL(p);
    assert_int_equal(stats_of(p).cow_copies, 1);
    int32_t u[21];
    memcpy(u, t, 18 * sizeof(int32_t));
    u[18] = 777;
    u[19] = 778;
    u[20] = 0;
    assert_int_equal(cached_tokens_of(p, u, 21, NULL), 20);
    assert_int_equal(cached_tokens_of(p, t, 21, NULL), 20);
    OK(kvc_pool_destroy(p));
}

static void test_lookup_has_no_side_effects(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 8, 1);
    int32_t a[9], b[9];
    iota_tokens(a, 9, 1);
    iota_tokens(b, 9, 100);
    alloc_cached(p, 1, a, 9, NULL);
    alloc_cached(p, 2, b, 9, NULL);
    OK(kvc_free(p, 1));
    OK(kvc_free(p, 2));
    int32_t victim = kvct_next_victim(p);
    kvc_stats before = stats_of(p);
    for (int i = 0; i < 3; ++i) assert_int_equal(cached_tokens_of(p, a, 9, NULL), 8);
    int32_t v;
    OK(kvc_can_alloc(p, a, 9, NULL, &v));
    kvc_stats after = stats_of(p);
    assert_memory_equal(&before, &after, sizeof after);
    assert_int_equal(kvct_next_victim(p), victim); /* LRU order untouched */
    OK(kvc_pool_destroy(p));
}

static void test_caching_off(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 8, 0);
    int32_t a[9];
    iota_tokens(a, 9, 1);
    OK(kvc_alloc(p, 1, a, 9, NULL, NULL));
    OK(kvc_free(p, 1));
    assert_int_equal(cached_tokens_of(p, a, 9, NULL), 0);
    int64_t c = -1;
    OK(kvc_alloc(p, 2, a, 9, NULL, &c));
    assert_int_equal(c, 0);
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_pin(p, a, 9, NULL, NULL), KVC_ERR_UNSUPPORTED);
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_unpin(p, a, 9, NULL, NULL), KVC_ERR_UNSUPPORTED);
    assert_int_equal(stats_of(p).prefix_query_tokens, 0);
    OK(kvc_free(p, 2));
    OK(kvc_prefix_cache_reset(p));
    OK(kvc_pool_destroy(p));
}

static void test_prefix_and_keys_errors(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 8, 1);
    int32_t a[9];
    iota_tokens(a, 9, 1);
    alloc_cached(p, 1, a, 9, NULL);
    int64_t c = -1;
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_lookup(NULL, a, 9, NULL, &c), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_lookup(p, NULL, 9, NULL, &c), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_lookup(p, a, 9, NULL, NULL), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_lookup(p, a, 0, NULL, &c), KVC_ERR_INVALID_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_pin(NULL, a, 9, NULL, &c), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_pin(p, NULL, 9, NULL, &c), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_pin(p, a, -1, NULL, &c), KVC_ERR_INVALID_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_unpin(NULL, a, 9, NULL, &c), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_unpin(p, NULL, 9, NULL, &c), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_unpin(p, a, 0, NULL, &c), KVC_ERR_INVALID_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_unpin(p, a, 9, NULL, &c), KVC_ERR_STATE);
    assert_int_equal(c, -1);

    kvc_keys *k;
    EXPECT_ERR(kvc_keys_create(NULL), KVC_ERR_NULL_ARG);
    OK(kvc_keys_create(&k));
    char long_salt[KVC_MAX_SALT_LEN + 2];
    memset(long_salt, 'x', sizeof long_salt);
    long_salt[KVC_MAX_SALT_LEN] = '\0';
    OK(kvc_keys_set_salt(k, long_salt)); /* exactly the maximum */
    long_salt[KVC_MAX_SALT_LEN] = 'x';
    long_salt[KVC_MAX_SALT_LEN + 1] = '\0';
    EXPECT_ERR(kvc_keys_set_salt(k, long_salt), KVC_ERR_INVALID_ARG);
    EXPECT_ERR(kvc_keys_set_salt(NULL, "a"), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_keys_set_lora(NULL, 1), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_keys_clear(NULL), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_keys_set_priority(NULL, 1), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_keys_set_priority(k, -1), KVC_ERR_INVALID_ARG);
    EXPECT_ERR(kvc_keys_set_priority(k, 101), KVC_ERR_INVALID_ARG);
    OK(kvc_keys_set_priority(k, 0));
    OK(kvc_keys_set_priority(k, 100));
    EXPECT_ERR(kvc_keys_add_mm(NULL, 1, 1, 0, 1), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_keys_add_mm(k, 1, 1, -1, 1), KVC_ERR_INVALID_ARG);
    EXPECT_ERR(kvc_keys_add_mm(k, 1, 1, 0, 0), KVC_ERR_INVALID_ARG);
    EXPECT_ERR(kvc_keys_add_mm(k, 1, 1, INT64_MAX, 1), KVC_ERR_OVERFLOW);
    OK(kvc_keys_add_mm(k, 1, 1, 10, 5));
    EXPECT_ERR(kvc_keys_add_mm(k, 1, 1, 14, 2), KVC_ERR_INVALID_ARG); /* overlaps [10, 15) */
    EXPECT_ERR(kvc_keys_add_mm(k, 1, 1, 2, 2), KVC_ERR_INVALID_ARG);  /* out of order */
    OK(kvc_keys_add_mm(k, 1, 1, 15, 2));                                 /* adjacent is fine */
    OK(kvc_keys_destroy(k));
    OK(kvc_keys_destroy(NULL));
    OK(kvc_pool_destroy(p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_system_prompt),
        cmocka_unit_test(test_last_token_rule_and_duplicates),
        cmocka_unit_test(test_changed_block_invalidates_later_blocks),
        cmocka_unit_test(test_eviction_order_after_two_frees),
        cmocka_unit_test(test_salt_isolation),
        cmocka_unit_test(test_lora_separation_and_tagging),
        cmocka_unit_test(test_multimodal_offsets),
        cmocka_unit_test(test_forced_collision_is_a_counted_miss),
        cmocka_unit_test(test_failed_alloc_leaves_refcounts),
        cmocka_unit_test(test_priority_beats_lru),
        cmocka_unit_test(test_stale_child_hint_is_no_hit),
        cmocka_unit_test(test_evicted_child_hint_is_no_hit),
        cmocka_unit_test(test_pinned_prefix_survives_pressure),
        cmocka_unit_test(test_reset_refused_then_allowed),
        cmocka_unit_test(test_blocks_cached_as_decode_fills_them),
        cmocka_unit_test(test_lookup_has_no_side_effects),
        cmocka_unit_test(test_caching_off),
        cmocka_unit_test(test_prefix_and_keys_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
