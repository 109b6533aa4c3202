/* Duplicate-content blocks (issue 23, vLLM v1's semantics): a block that fills with content whose
 * hash is already cached is entered as another copy of that hash; evicting one copy keeps the hash
 * cached through the others; a hit takes the newest copy not in a free list (held, pinned), else
 * the newest; pins take a pinned copy first; each copy has its own BLOCK_STORED / BLOCK_REMOVED
 * event. Checked on metadata, on events and, with the byte oracle, on the KV a hit on a copy
 * reads (also through the host tier, where two evicted copies make one spill). */
#include "test_oracle_helpers.h"

static int64_t alloc_hit(kvc_pool *p, uint64_t id, const int32_t *t, int64_t n) {
    int64_t c = -1;
    OK(kvc_alloc(p, id, t, n, NULL, &c));
    CHECK_POOL(p);
    return c;
}

static int pop_event(kvc_pool *p, kvc_event *ev, int32_t *toks, int64_t cap) {
    memset(ev, 0, sizeof *ev);
    ev->struct_size = sizeof *ev;
    int32_t has = -1;
    OK(kvc_event_pop(p, ev, toks, cap, &has));
    return has;
}

static void drain_events(kvc_pool *p) {
    kvc_event ev;
    int32_t toks[64];
    while (pop_event(p, &ev, toks, 64)) {
    }
}

/* The issue's repro: block size 16, 4 blocks, C = sixteen 0s, sixteen 1s, sixteen 2s. The re-run
 * of C hits 32 tokens and fills its last block afresh: that block is a second copy of C's last
 * block. Evicting the original (a 16-token prompt takes the only free block) leaves the copy, so
 * C + [1] still hits all 48 tokens (32 before: the duplicate was not cached). */
static void test_issue_repro(void **state) {
    (void)state;
    kvc_pool *p = make_pool(16, 4, 1);
    int32_t c[49], other[16];
    for (int i = 0; i < 48; ++i) c[i] = i / 16;
    c[48] = 1;
    iota_tokens(other, 16, 1000);
    assert_int_equal(alloc_hit(p, 0, c, 48), 0);
    int32_t t0[3], t1[3];
    table_of(p, 0, t0, 3);
    OK(kvc_free(p, 0));
    assert_int_equal(alloc_hit(p, 1, c, 48), 32);
    table_of(p, 1, t1, 3);
    assert_int_equal(t1[0], t0[0]);
    assert_int_equal(t1[1], t0[1]);
    assert_int_not_equal(t1[2], t0[2]); /* the last block is computed afresh ... */
    assert_int_equal(kvct_block_is_cached(p, t1[2]), 1); /* ... and cached: a second copy */
    assert_int_equal(kvct_block_is_cached(p, t0[2]), 1);
    assert_int_equal(stats_of(p).cached_blocks_total, 4); /* blocks, every copy counted */
    assert_int_equal(alloc_hit(p, 2, other, 16), 0);
    assert_int_equal(stats_of(p).evictions, 1);
    int32_t t2[1];
    table_of(p, 2, t2, 1);
    assert_int_equal(t2[0], t0[2]); /* the original is gone: it holds other's block now */
    assert_int_equal(cached_tokens_of(p, c, 49, NULL), 48);
    assert_int_equal(stats_of(p).cached_blocks_total, 4); /* C's three (one a copy) + other's */
    /* A later request takes the copy. */
    OK(kvc_free(p, 1));
    OK(kvc_free(p, 2));
    assert_int_equal(alloc_hit(p, 3, c, 49), 48);
    int32_t t3[4];
    table_of(p, 3, t3, 4);
    assert_memory_equal(t3, t1, sizeof t1);
    OK(kvc_pool_destroy(p));
}

/* The issue's decode variant: after the re-run, the sequence decodes two more blocks (cached under
 * its copy's hash). Evicting the original loses nothing: 80 tokens hit (32 before, with the later
 * blocks cached under a parent hash nothing could reach). */
static void test_decode_after_rerun(void **state) {
    (void)state;
    kvc_pool *p = make_pool(16, 6, 1);
    int32_t c[81], other[16];
    for (int i = 0; i < 80; ++i) c[i] = i / 16;
    c[80] = 7;
    iota_tokens(other, 16, 1000);
    assert_int_equal(alloc_hit(p, 0, c, 48), 0);
    OK(kvc_free(p, 0));
    assert_int_equal(alloc_hit(p, 1, c, 48), 32);
    for (int i = 48; i < 80; ++i) OK(kvc_append(p, 1, &c[i], 1, 0, NULL));
    CHECK_POOL(p);
    assert_int_equal(cached_tokens_of(p, c, 81, NULL), 80);
    assert_int_equal(alloc_hit(p, 2, other, 16), 0); /* evicts C's original last block */
    assert_int_equal(stats_of(p).evictions, 1);
    assert_int_equal(cached_tokens_of(p, c, 81, NULL), 80);
    OK(kvc_pool_destroy(p));
}

/* Events: each copy is stored and removed on its own (block id, the shared hash); a router that
 * counts a hash's copies sees it cached until the last one goes, as kvc_prefix_lookup does. */
static void test_each_copy_has_its_events(void **state) {
    (void)state;
    kvc_pool *p = make_pool(16, 4, 1);
    int32_t c[49], other[32], toks[16];
    for (int i = 0; i < 48; ++i) c[i] = i / 16;
    c[48] = 1;
    iota_tokens(other, 32, 1000);
    kvc_event stored[3], ev;
    alloc_hit(p, 0, c, 48);
    for (int i = 0; i < 3; ++i) assert_int_equal(pop_event(p, &stored[i], toks, 16), 1);
    OK(kvc_free(p, 0));
    alloc_hit(p, 1, c, 48);
    int32_t t1[3];
    table_of(p, 1, t1, 3);
    assert_int_equal(pop_event(p, &ev, toks, 16), 1); /* the copy: its own block, the same hash */
    assert_int_equal(ev.type, KVC_EVENT_BLOCK_STORED);
    assert_int_equal(ev.block_id, t1[2]);
    assert_int_not_equal(ev.block_id, stored[2].block_id);
    assert_true(ev.hash_hi == stored[2].hash_hi && ev.hash_lo == stored[2].hash_lo);
    assert_true(ev.parent_hash_hi == stored[2].parent_hash_hi && ev.parent_hash_lo == stored[2].parent_hash_lo);
    assert_memory_equal(toks, c + 32, sizeof toks);
    assert_int_equal(pop_event(p, &ev, toks, 16), 0);

    alloc_hit(p, 2, other, 16); /* evicts the original: its REMOVED, one copy left */
    assert_int_equal(pop_event(p, &ev, toks, 16), 1);
    assert_int_equal(ev.type, KVC_EVENT_BLOCK_REMOVED);
    assert_int_equal(ev.block_id, stored[2].block_id);
    assert_true(ev.hash_hi == stored[2].hash_hi && ev.hash_lo == stored[2].hash_lo);
    drain_events(p);
    assert_int_equal(cached_tokens_of(p, c, 49, NULL), 48);

    /* Sequence 1 ends; a longer prompt then evicts its blocks, deepest first: the last copy's
     * REMOVED ends the hash, and the lookup falls back. */
    OK(kvc_free(p, 1));
    OK(kvc_free(p, 2));
    alloc_hit(p, 3, other, 17); /* hits other's block; its fresh block evicts the LRU head, C's copy */
    assert_int_equal(pop_event(p, &ev, toks, 16), 1);
    assert_int_equal(ev.type, KVC_EVENT_BLOCK_REMOVED);
    assert_int_equal(ev.block_id, t1[2]);
    assert_true(ev.hash_hi == stored[2].hash_hi && ev.hash_lo == stored[2].hash_lo);
    assert_int_equal(cached_tokens_of(p, c, 49, NULL), 32);
    OK(kvc_pool_destroy(p));
}

/* Which copy a hit takes: the newest one not in a free list (shared, so the free copies stay
 * evictable), else the newest. */
static void test_hit_takes_a_held_copy(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 8, 1);
    int32_t x[9];
    iota_tokens(x, 9, 50);
    alloc_hit(p, 1, x, 9);
    int32_t a[3], b[3], c[3], d[3];
    table_of(p, 1, a, 3);
    OK(kvc_free(p, 1));
    assert_int_equal(alloc_hit(p, 2, x, 8), 4); /* block 1 again, fresh: a copy of a[1] */
    table_of(p, 2, b, 2);
    assert_int_not_equal(b[1], a[1]);
    assert_int_equal(kvct_block_is_cached(p, b[1]), 1);
    assert_int_equal(stats_of(p).cached_free_blocks, 1); /* a[1] */
    assert_int_equal(alloc_hit(p, 3, x, 9), 8);
    table_of(p, 3, c, 3);
    assert_int_equal(c[1], b[1]); /* the held copy, shared */
    assert_int_equal(kvct_block_refcount(p, b[1]), 2);
    assert_int_equal(kvct_block_refcount(p, a[1]), 0);
    assert_int_equal(stats_of(p).cached_free_blocks, 1); /* a[1] stays free and evictable */
    /* Both copies free: the newest is taken. */
    OK(kvc_free(p, 3));
    OK(kvc_free(p, 2));
    assert_int_equal(stats_of(p).cached_free_blocks, 3);
    assert_int_equal(alloc_hit(p, 4, x, 9), 8);
    table_of(p, 4, d, 3);
    assert_int_equal(d[1], b[1]);
    assert_int_equal(kvct_block_refcount(p, a[1]), 0);
    OK(kvc_pool_destroy(p));
}

/* A sequence that starts with one token and appends the rest fills every block itself, so each is
 * entered as another copy when the prompt is cached already. Returns its first block. */
static int32_t fill_copy(kvc_pool *p, uint64_t id, const int32_t *x, int64_t n) {
    OK(kvc_alloc(p, id, x, 1, NULL, NULL));
    OK(kvc_append(p, id, x + 1, n - 1, 0, NULL));
    int32_t t[4];
    table_of(p, id, t, 4);
    return t[0];
}

/* A hit looks for a copy in use among the 8 most recently cached copies only (its cost stays
 * bounded however many copies a popular block has): a held copy 8th in line is taken, 10th in
 * line it is not, and the newest (free) copy is. */
static void test_hit_looks_at_the_8_newest_copies(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 64, 1);
    int32_t x[9], t[3];
    iota_tokens(x, 9, 600);
    const int32_t held = fill_copy(p, 100, x, 9);
    int32_t newest = -1;
    for (uint64_t s = 1; s <= 7; ++s) newest = fill_copy(p, s, x, 9);
    for (uint64_t s = 1; s <= 7; ++s) OK(kvc_free(p, s));
    assert_int_equal(stats_of(p).cached_blocks_total, 16); /* 8 copies of each of 2 blocks */
    assert_int_equal(alloc_hit(p, 200, x, 9), 8);
    table_of(p, 200, t, 3);
    assert_int_equal(t[0], held);
    OK(kvc_free(p, 200));
    for (uint64_t s = 8; s <= 9; ++s) newest = fill_copy(p, s, x, 9);
    for (uint64_t s = 8; s <= 9; ++s) OK(kvc_free(p, s));
    assert_int_equal(alloc_hit(p, 201, x, 9), 8);
    table_of(p, 201, t, 3);
    assert_int_equal(t[0], newest);
    assert_int_equal(kvct_block_refcount(p, held), 1);
    OK(kvc_pool_destroy(p));
}

/* Pins take a pinned copy first, so pin / unpin of one prefix keep to one copy however many exist. */
static void test_pin_takes_the_pinned_copy(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 8, 1);
    int32_t x[9];
    iota_tokens(x, 9, 50);
    alloc_hit(p, 1, x, 9);
    int32_t a[3], b[3];
    table_of(p, 1, a, 3);
    OK(kvc_free(p, 1));
    int64_t pinned = -1;
    OK(kvc_prefix_pin(p, x, 8, NULL, &pinned)); /* a[0], a[1] */
    assert_int_equal(pinned, 8);
    assert_int_equal(alloc_hit(p, 2, x, 8), 4); /* a newer copy of a[1], held */
    table_of(p, 2, b, 2);
    assert_int_not_equal(b[1], a[1]);
    assert_int_equal(kvct_block_is_cached(p, b[1]), 1);
    OK(kvc_prefix_pin(p, x, 8, NULL, &pinned)); /* the pinned copy again, not the held one */
    assert_int_equal(kvct_block_pin_count(p, a[1]), 2);
    assert_int_equal(kvct_block_pin_count(p, b[1]), 0);
    assert_int_equal(stats_of(p).pinned_blocks, 2);
    int64_t unpinned = -1;
    OK(kvc_prefix_unpin(p, x, 8, NULL, &unpinned));
    OK(kvc_prefix_unpin(p, x, 8, NULL, &unpinned));
    assert_int_equal(unpinned, 8);
    assert_int_equal(kvct_block_pin_count(p, a[1]), 0);
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_unpin(p, x, 8, NULL, &unpinned), KVC_ERR_STATE);
    /* With no pinned copy, a pin takes the held one (as a hit would). */
    OK(kvc_prefix_pin(p, x, 8, NULL, &pinned));
    assert_int_equal(kvct_block_pin_count(p, b[1]), 1);
    assert_int_equal(kvct_block_pin_count(p, a[1]), 0);
    OK(kvc_prefix_unpin(p, x, 8, NULL, &unpinned));
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* A sliding window: the windowed search takes copies as the leading-run one does. The copy of block
 * 2 survives the original's eviction, so the hit needing blocks 1..2 holds (8 tokens before). */
static void test_windowed_hit_on_a_copy(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 4, 1);
    OK(kvc_pool_set_sliding_window(p, 8));
    int32_t x[13], other[4];
    iota_tokens(x, 13, 70);
    iota_tokens(other, 4, 900);
    alloc_hit(p, 1, x, 13); /* blocks 0..2 cached, 3 partial */
    OK(kvc_free(p, 1));
    assert_int_equal(alloc_hit(p, 2, x, 12), 8); /* block 2 again: a copy */
    assert_int_equal(alloc_hit(p, 3, other, 4), 0); /* evicts the original block 2 */
    assert_int_equal(stats_of(p).evictions, 1);
    assert_int_equal(cached_tokens_of(p, x, 13, NULL), 12);
    OK(kvc_pool_destroy(p));
}

/* KV bytes: a hit on a copy reads the KV its own sequence wrote there (the byte oracle gives each
 * position's expected K/V from its whole prefix). */
static void test_hit_on_a_copy_reads_its_kv(void **state) {
    (void)state;
    oracle_pool o;
    kvc_pool *p = tier_pool(5, 1);
    oracle_init(&o, p);
    int32_t x[2 * TBS + 1], other[3 * TBS];
    prompt(x, 2 * TBS + 1, 21);
    prompt(other, 3 * TBS, 22);
    OK(kvc_alloc(p, 1, x, 2 * TBS + 1, NULL, NULL));
    oracle_write(&o, 1, x, 0, 2 * TBS + 1);
    int32_t a[3], b[3], c[3];
    tier_table(p, 1, a);
    OK(kvc_free(p, 1));
    assert_int_equal(alloc_hit(p, 2, x, 2 * TBS), TBS); /* block 1 is computed again: a copy */
    oracle_write(&o, 2, x, TBS, TBS);
    tier_table(p, 2, b);
    assert_int_not_equal(b[1], a[1]);
    /* other takes the two unhashed blocks, then evicts a[1], the original. */
    assert_int_equal(alloc_hit(p, 3, other, 3 * TBS), 0);
    int32_t o3[3];
    tier_table(p, 3, o3);
    assert_int_equal(o3[2], a[1]);
    oracle_write(&o, 3, other, 0, 3 * TBS);
    OK(kvc_free(p, 3));
    assert_int_equal(alloc_hit(p, 4, x, 2 * TBS + 1), 2 * TBS);
    tier_table(p, 4, c);
    assert_int_equal(c[1], b[1]);
    oracle_expect(&o, 4, x, 2 * TBS);
    OK(kvc_pool_destroy(p));
}

/* With a host tier: two copies evicted by one allocation make one spill (the copy evicted later is
 * kept; the other is dropped), and the prompt comes back from the host tier with the right KV. */
static void test_evicted_copies_spill_once(void **state) {
    (void)state;
    oracle_pool o;
    kvc_pool *p = tier_pool(4, 1);
    oracle_init(&o, p);
    OK(kvc_tier_attach_host(p, 8));
    int32_t x[2 * TBS + 1], other[4 * TBS];
    prompt(x, 2 * TBS + 1, 31);
    prompt(other, 4 * TBS, 32);
    OK(kvc_alloc(p, 1, x, 2 * TBS + 1, NULL, NULL));
    oracle_write(&o, 1, x, 0, 2 * TBS + 1);
    OK(kvc_free(p, 1));
    assert_int_equal(alloc_hit(p, 2, x, 2 * TBS), TBS); /* block 1 again: a copy */
    oracle_write(&o, 2, x, TBS, TBS);
    OK(kvc_free(p, 2));
    assert_int_equal(stats_of(p).cached_free_blocks, 3); /* x's block 0 and two copies of block 1 */
    assert_int_equal(alloc_hit(p, 3, other, 4 * TBS), 0); /* evicts all three */
    assert_int_equal(stats_of(p).evictions, 3);
    oracle_write(&o, 3, other, 0, 4 * TBS);
    assert_int_equal(tier_stats(p, KVC_TIER_HOST).blocks_in, 2); /* block 0 and one copy */
    OK(kvc_free(p, 3));
    int64_t cached = -1;
    OK(kvc_alloc(p, 4, x, 2 * TBS + 1, NULL, &cached));
    assert_int_equal(cached, 2 * TBS);
    assert_int_equal(tier_stats(p, KVC_TIER_HOST).hits, 2);
    oracle_expect(&o, 4, x, 2 * TBS);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* The prefix walk takes a block from the child hint of the block hit before it only when that block
 * is its hash's only copy (lib/core/pool_blocks.cpp, walk_child_hints; a per-block flag the index
 * keeps, PrefixCache::only_copy). Here the hinted block B gets a newer copy B2 after the hint was
 * learnt: the walk must then take the copy a hit takes (both free: the newest, B2), not the hinted
 * B; and once B2 is evicted, B again. Block size 16 runs the walk's vector path. */
static void hinted_block_with_a_copy(int32_t bs) {
    kvc_pool *p = make_pool(bs, 16, 1);
    int32_t x[2 * 16 + 1], filler[16 * 16];
    iota_tokens(x, 2 * bs + 1, 700);
    iota_tokens(filler, 16 * bs, 90000);
    int32_t t1[3], t3[3], t4[3];
    assert_int_equal(alloc_hit(p, 1, x, 2 * bs + 1), 0);
    table_of(p, 1, t1, 3); /* A = t1[0], B = t1[1] */
    assert_int_equal(alloc_hit(p, 2, x, 2 * bs + 1), 2 * bs); /* hits A and B: learns the hint A -> B */
    OK(kvc_free(p, 2));
    OK(kvc_free(p, 1));
    /* Sequence 3 hits A and fills block 1 itself with B's content: B2, B's newer copy. */
    assert_int_equal(alloc_hit(p, 3, x, bs + 1), bs);
    OK(kvc_append(p, 3, x + bs + 1, bs, 0, NULL));
    table_of(p, 3, t3, 3);
    assert_int_equal(t3[0], t1[0]);
    assert_int_not_equal(t3[1], t1[1]);
    assert_int_equal(kvct_block_is_cached(p, t3[1]), 1); /* B2 */
    CHECK_POOL(p);
    OK(kvc_free(p, 3));
    /* A (one copy) by its hash, then the hint names B, which has a newer copy: the hit is B2. */
    assert_int_equal(alloc_hit(p, 4, x, 2 * bs + 1), 2 * bs);
    table_of(p, 4, t4, 3);
    assert_int_equal(t4[0], t1[0]);
    assert_int_equal(t4[1], t3[1]);
    OK(kvc_free(p, 4));
    /* The LRU list is now B, B2, A (B freed first). A prompt taking every unhashed block and one
     * more evicts B: B2 is then its hash's only copy (the pool check compares the flag with the
     * index), and the walk takes it by the hint it learnt (A -> B2). */
    assert_int_equal(stats_of(p).cached_free_blocks, 3);
    const int64_t unhashed = stats_of(p).free_blocks - 3;
    assert_int_equal(alloc_hit(p, 5, filler, (unhashed + 1) * bs), 0);
    int32_t t5[16];
    assert_int_equal(table_of(p, 5, t5, 16), unhashed + 1);
    assert_int_equal(stats_of(p).evictions, 1);
    int holds_b = 0, holds_other = 0;
    for (int64_t k = 0; k <= unhashed; ++k) {
        holds_b += t5[k] == t1[1];
        holds_other += t5[k] == t1[0] || t5[k] == t3[1];
    }
    assert_int_equal(holds_b, 1); /* B was the victim ... */
    assert_int_equal(holds_other, 0);
    assert_int_equal(kvct_block_is_cached(p, t3[1]), 1); /* ... B2 stays, now the only copy */
    CHECK_POOL(p);
    OK(kvc_free(p, 5));
    assert_int_equal(alloc_hit(p, 6, x, 2 * bs + 1), 2 * bs);
    int32_t t6[3];
    table_of(p, 6, t6, 3);
    assert_int_equal(t6[0], t1[0]);
    assert_int_equal(t6[1], t3[1]);
    OK(kvc_pool_destroy(p));
}

static void test_hinted_block_with_a_copy(void **state) {
    (void)state;
    hinted_block_with_a_copy(4);
    hinted_block_with_a_copy(16);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_issue_repro),
        cmocka_unit_test(test_decode_after_rerun),
        cmocka_unit_test(test_each_copy_has_its_events),
        cmocka_unit_test(test_hit_takes_a_held_copy),
        cmocka_unit_test(test_hit_looks_at_the_8_newest_copies),
        cmocka_unit_test(test_pin_takes_the_pinned_copy),
        cmocka_unit_test(test_windowed_hit_on_a_copy),
        cmocka_unit_test(test_hit_on_a_copy_reads_its_kv),
        cmocka_unit_test(test_evicted_copies_spill_once),
        cmocka_unit_test(test_hinted_block_with_a_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
