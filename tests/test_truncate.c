/* kvc_truncate: rolling a sequence back (speculative decoding, beam pruning, regenerate) — blocks
 * and lookahead released, the prefix cache left exactly right (rejected tokens' blocks still hit,
 * a cut block is never written while cached, hashing continues from the recovered tail), pending
 * copy-on-write pairs into released blocks cancelled, built batches re-validated. */
#include "test_tier_helpers.h"

static void test_truncate_releases_tail_and_lookahead(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 16, 0);
    OK(kvc_alloc(p, 1, NULL, 10, NULL, NULL)); /* 3 blocks */
    OK(kvc_append(p, 1, NULL, 0, 5, NULL));    /* 15 reserved slots: 4 blocks */
    assert_int_equal(table_len(p, 1), 4);
    int64_t before[6], after[6];
    OK(kvc_seq_slot_mapping(p, 1, 0, 6, before, 6));
    int32_t table_before[4], table_after[4];
    table_of(p, 1, table_before, 4);

    int32_t freed = -1;
    OK(kvc_truncate(p, 1, 6, &freed));
    CHECK_POOL(p);
    assert_int_equal(freed, 2);
    assert_int_equal(table_len(p, 1), 2);
    assert_int_equal(num_tokens_of(p, 1), 6);
    assert_int_equal(stats_of(p).free_blocks, 14);
    table_of(p, 1, table_after, 4);
    assert_memory_equal(table_before, table_after, 2 * sizeof(int32_t)); /* kept blocks stay put */
    OK(kvc_seq_slot_mapping(p, 1, 0, 6, after, 6));
    assert_memory_equal(before, after, sizeof before);
    int64_t slot = 0;
    EXPECT_ERR(kvc_seq_slot_mapping(p, 1, 6, 1, &slot, 1), KVC_ERR_INVALID_ARG); /* lookahead gone */

    OK(kvc_append(p, 1, NULL, 0, 2, NULL)); /* lookahead again, inside block 1 */
    OK(kvc_truncate(p, 1, 6, &freed));      /* equal count: drops only the lookahead */
    assert_int_equal(freed, 0);
    assert_int_equal(num_tokens_of(p, 1), 6);
    EXPECT_ERR(kvc_seq_slot_mapping(p, 1, 6, 1, &slot, 1), KVC_ERR_INVALID_ARG);

    OK(kvc_truncate(p, 1, 4, &freed)); /* on a block boundary */
    assert_int_equal(freed, 1);
    assert_int_equal(table_len(p, 1), 1);
    EXPECT_ERR_UNCHANGED(p, kvc_truncate(p, 1, 5, NULL), KVC_ERR_INVALID_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_truncate(p, 1, 0, NULL), KVC_ERR_INVALID_ARG);
    int32_t nb = -1;
    OK(kvc_append(p, 1, NULL, 3, 0, &nb));
    assert_int_equal(nb, 1);
    CHECK_POOL(p);
    OK(kvc_free(p, 1));
    assert_int_equal(stats_of(p).free_blocks, 16);
    OK(kvc_pool_destroy(p));
}

/* The speculative-decoding step: confirm the drafts, verify, keep the accepted prefix. */
static void test_truncate_speculative_rollback_keeps_cache_right(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 32, 1);
    int32_t t[32];
    iota_tokens(t, 8, 100);                       /* prompt: 2 full blocks */
    const int32_t drafts[5] = {500, 501, 502, 503, 504};
    memcpy(t + 8, drafts, sizeof drafts);         /* t = prompt | drafts */
    OK(kvc_alloc(p, 1, t, 8, NULL, NULL));
    OK(kvc_append(p, 1, drafts, 5, 0, NULL));     /* block 2 = drafts 0..3, full and cached */
    assert_int_equal(cached_tokens_of(p, t, 13, NULL), 12);

    int32_t freed = -1;
    OK(kvc_truncate(p, 1, 10, &freed));           /* 2 drafts accepted */
    CHECK_POOL(p);
    assert_int_equal(freed, 1);
    /* The rejected drafts' block is still cached: its KV belongs to exactly those tokens. */
    assert_int_equal(cached_tokens_of(p, t, 13, NULL), 12);

    /* Writing the corrected token takes the block out of the cache first (sole holder: no copy). */
    const int32_t fix[2] = {777, 778};
    int32_t nb = -1;
    OK(kvc_append(p, 1, fix, 1, 0, &nb));
    CHECK_POOL(p);
    assert_int_equal(nb, 0);
    assert_int_equal(stats_of(p).cow_copies, 0);
    assert_int_equal(stats_of(p).pending_copies, 0);
    assert_int_equal(cached_tokens_of(p, t, 13, NULL), 8);

    /* Hashing continues from the recovered tail [500, 501]: the refilled block is cached under
     * prompt | 500 501 777 778. */
    OK(kvc_append(p, 1, fix + 1, 1, 0, NULL));
    CHECK_POOL(p);
    int32_t u[13];
    memcpy(u, t, 10 * sizeof(int32_t));
    u[10] = 777;
    u[11] = 778;
    u[12] = 9;
    assert_int_equal(cached_tokens_of(p, u, 13, NULL), 12);
    OK(kvc_pool_destroy(p));
}

/* Cutting into a block other sequences share: the next write copies it; if the others are gone by
 * then, the block leaves the cache instead. Either way the cache never sees a changed block. */
static void test_truncate_into_shared_block(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 32, 1);
    int32_t t[16];
    iota_tokens(t, 16, 200);
    OK(kvc_alloc(p, 1, t, 8, NULL, NULL));
    OK(kvc_alloc(p, 2, t, 9, NULL, NULL)); /* hits 8 tokens: blocks 0 and 1 shared */
    int32_t t1[4], t2[4];
    table_of(p, 1, t1, 4);
    table_of(p, 2, t2, 4);
    assert_int_equal(t1[1], t2[1]);
    assert_int_equal(kvct_block_refcount(p, t1[1]), 2);

    int32_t freed = -1;
    OK(kvc_truncate(p, 2, 6, &freed));
    CHECK_POOL(p);
    assert_int_equal(freed, 1);
    const int32_t x[2] = {900, 901};
    int32_t nb = -1;
    OK(kvc_append(p, 2, x, 1, 0, &nb)); /* copy-on-write of the shared, cached block 1 */
    CHECK_POOL(p);
    assert_int_equal(nb, 1);
    assert_int_equal(stats_of(p).cow_copies, 1);
    assert_int_equal(stats_of(p).pending_copies, 1);
    int32_t t1_after[4];
    table_of(p, 1, t1_after, 4);
    assert_memory_equal(t1, t1_after, 2 * sizeof(int32_t));
    assert_int_equal(cached_tokens_of(p, t, 9, NULL), 8); /* sequence 1's blocks still hit */
    OK(kvc_append(p, 2, x + 1, 1, 0, NULL));
    int32_t u[9];
    memcpy(u, t, 6 * sizeof(int32_t));
    u[6] = 900;
    u[7] = 901;
    u[8] = 1;
    assert_int_equal(cached_tokens_of(p, u, 9, NULL), 8); /* 2's own block, hashed from the recovered tail */

    /* Sequence 3 shares block 1 and cuts into it; sequence 1 goes away before 3 writes. */
    OK(kvc_alloc(p, 3, t, 9, NULL, NULL));
    OK(kvc_truncate(p, 3, 6, NULL));
    OK(kvc_free(p, 1));
    int32_t t3[4];
    table_of(p, 3, t3, 4);
    assert_int_equal(t3[1], t1[1]);
    assert_int_equal(kvct_block_refcount(p, t1[1]), 1);
    const int64_t cows = stats_of(p).cow_copies;
    OK(kvc_append(p, 3, x, 1, 0, &nb)); /* sole holder now: uncached in place, no copy */
    CHECK_POOL(p);
    assert_int_equal(nb, 0);
    assert_int_equal(stats_of(p).cow_copies, cows);
    assert_int_equal(cached_tokens_of(p, t, 9, NULL), 4);
    OK(kvc_pool_destroy(p));
}

/* A hash for test_truncate_uncached_hashed_block: any input holding MARK as a token id hashes to
 * one constant (so two different blocks holding it collide), every other input to an FNV-1a mix
 * of its bytes (distinct enough for these few blocks). */
enum { MARK = 0x7ead0001 };
static void marker_collision_hash(const void *data, size_t len, uint64_t *hi, uint64_t *lo) {
    const unsigned char *d = (const unsigned char *)data;
    for (size_t i = 0; i + 4 <= len; i += 4) {
        int32_t v;
        memcpy(&v, d + i, 4);
        if (v == MARK) {
            *hi = *lo = 0xC0111DEull;
            return;
        }
    }
    uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
    for (size_t i = 0; i < len; ++i) {
        a = (a ^ d[i]) * 0x100000001b3ull;
        b = (b ^ d[i] ^ (uint64_t)i) * 0x100000001b3ull;
    }
    *hi = a;
    *lo = b;
}

/* A cut into a hashed block that is not cached. A block whose content is cached elsewhere is
 * cached too (another copy), so the only such block is one whose hash collided with a different
 * block's (forced here): the last hashed block is verified against the chain and hashing goes on;
 * deeper, the ids cannot be trusted and the sequence stops entering blocks in the cache (its KV
 * stays right). (After a swap-in: test_truncate_after_swap_in_stops_hashing.) */
static void test_truncate_uncached_hashed_block(void **state) {
    (void)state;
    kvct_set_hash_override(marker_collision_hash);
    kvc_pool *p = make_pool(4, 32, 1);
    int32_t t[24], c[24];
    iota_tokens(t, 24, 300);
    t[15] = MARK;
    memcpy(c, t, sizeof t);
    c[14] = MARK; /* block 3 differs from t's, with the same (forced) hash */
    c[15] = 1;
    OK(kvc_alloc(p, 1, t, 16, NULL, NULL)); /* 4 cached blocks */
    OK(kvc_alloc(p, 2, c, 16, NULL, NULL)); /* hits 3 blocks; its block 3 collides with 1's: uncached */
    int32_t b1[8], b2[8];
    table_of(p, 1, b1, 8);
    table_of(p, 2, b2, 8);
    assert_int_not_equal(b1[3], b2[3]);
    assert_int_equal(kvct_block_is_cached(p, b2[3]), 0);
    assert_int_equal(stats_of(p).cached_blocks_total, 4);

    OK(kvc_truncate(p, 2, 13, NULL)); /* the last hashed block: verified, tail = c[12] */
    CHECK_POOL(p);
    const int32_t y[3] = {800, 801, 802};
    OK(kvc_append(p, 2, y, 3, 0, NULL));
    CHECK_POOL(p);
    assert_int_equal(kvct_block_is_cached(p, b2[3]), 1);
    int32_t u[17];
    memcpy(u, c, 13 * sizeof(int32_t));
    memcpy(u + 13, y, sizeof y);
    u[16] = 5;
    assert_int_equal(cached_tokens_of(p, u, 17, NULL), 16);

    OK(kvc_alloc(p, 3, c, 16, NULL, NULL));
    OK(kvc_append(p, 3, c + 16, 4, 0, NULL)); /* block 4 is new content: cached */
    OK(kvc_truncate(p, 3, 13, NULL));         /* into block 3: uncached and not the last hashed */
    CHECK_POOL(p);
    const int32_t z[7] = {810, 811, 812, 813, 814, 815, 816};
    OK(kvc_append(p, 3, z, 3, 0, NULL));
    CHECK_POOL(p);
    int32_t v[21];
    memcpy(v, c, 13 * sizeof(int32_t));
    memcpy(v + 13, z, sizeof z);
    v[20] = 5;
    assert_int_equal(cached_tokens_of(p, v, 17, NULL), 12); /* not entered: hashing stopped */
    OK(kvc_fork(p, 3, 4));                          /* the child inherits the stop */
    OK(kvc_append(p, 4, z + 3, 4, 0, NULL));
    OK(kvc_append(p, 3, z + 3, 4, 0, NULL));
    CHECK_POOL(p);
    assert_int_equal(cached_tokens_of(p, v, 21, NULL), 12);
    kvct_set_hash_override(NULL);
    OK(kvc_pool_destroy(p));
}

static void test_truncate_cancels_pending_copies_into_released_blocks(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 8, 0);
    OK(kvc_alloc(p, 1, NULL, 6, NULL, NULL)); /* blocks 0, 1 */
    OK(kvc_fork(p, 1, 2));
    OK(kvc_append(p, 2, NULL, 1, 0, NULL)); /* pair (1 -> 2) */
    assert_int_equal(stats_of(p).pending_copies, 1);
    OK(kvc_truncate(p, 2, 5, NULL)); /* keeps the destination: the pair stays */
    assert_int_equal(stats_of(p).pending_copies, 1);
    OK(kvc_truncate(p, 2, 4, NULL)); /* releases it: cancelled */
    CHECK_POOL(p);
    assert_int_equal(stats_of(p).pending_copies, 0);
    assert_int_equal(kvct_block_refcount(p, 1), 1);
    assert_int_equal(stats_of(p).free_blocks, 6);
    OK(kvc_pool_destroy(p));
}

/* A batch built before a truncate that removed tokens it references is refused at launch. */
static void test_truncate_invalidates_built_batch(void **state) {
    (void)state;
    kvc_pool *p = tier_pool(8, 0);
    OK(kvc_alloc(p, 1, NULL, 7, NULL, NULL));
    kvc_batch *b = NULL;
    OK(kvc_batch_create(p, 1, 8, 4, &b));
    const uint64_t id = 1;
    const int64_t q = 1;
    OK(kvc_batch_build(b, &id, &q, 1));
    kvc_attention_params ap;
    OK(kvc_attention_params_default(&ap));
    float qbuf[2 * 8] = {0}, out[2 * 8];
    OK(kvc_launch_attention(p, b, 0, qbuf, out, &ap, NULL));
    OK(kvc_truncate(p, 1, 5, NULL));
    EXPECT_ERR(kvc_launch_attention(p, b, 0, qbuf, out, &ap, NULL), KVC_ERR_STATE);
    OK(kvc_batch_build(b, &id, &q, 1));
    OK(kvc_launch_attention(p, b, 0, qbuf, out, &ap, NULL));
    OK(kvc_batch_destroy(b));
    OK(kvc_pool_destroy(p));
}

/* After a swap-in the sequence's blocks are fresh: their per-block records hold nothing of its
 * tokens. A cut into the last hashed block then cannot recover the kept ids, so the sequence stops
 * offering blocks to the cache rather than hash ids it does not have. */
static void test_truncate_after_swap_in_stops_hashing(void **state) {
    (void)state;
    kvc_pool *p = tier_pool(16, 1);
    OK(kvc_tier_attach_host(p, 8));
    int32_t t[16];
    prompt(t, 16, 3);
    OK(kvc_alloc(p, 1, t, 9, NULL, NULL)); /* blocks 0, 1 full and cached; 2 partial */
    OK(kvc_swap_out(p, 1, NULL));
    OK(kvc_swap_in(p, 1, NULL)); /* fresh, never-used blocks */
    int32_t table[8];
    tier_table(p, 1, table);
    assert_true(table[1] >= 3);
    OK(kvc_truncate(p, 1, 5, NULL)); /* into block 1: uncached, its record is not this content */
    CHECK_POOL(p);
    const int32_t z[3] = {70, 71, 72};
    OK(kvc_append(p, 1, z, 3, 0, NULL)); /* refills block 1: must not be entered in the cache */
    CHECK_POOL(p);
    const int64_t cached_before = stats_of(p).cached_free_blocks;
    OK(kvc_free(p, 1));
    /* Freed: block 0's copy (never cached after the swap-in), block 1 (hashing stopped) and the
     * partial block go to the unhashed list; nothing new is cached. */
    assert_int_equal(stats_of(p).cached_free_blocks, cached_before);
    int32_t u[9];
    memcpy(u, t, 5 * sizeof(int32_t));
    memcpy(u + 5, z, sizeof z);
    u[8] = 1;
    int64_t cached = -1;
    OK(kvc_prefix_lookup(p, u, 9, NULL, &cached));
    assert_int_equal(cached, 4); /* only block 0's original, still cached from before the swap */
    OK(kvc_pool_destroy(p));
}

/* A cut into a pinned prefix block: the block's content must stay (that is what the pin is for),
 * so the next write copies it even though this sequence is its only holder. */
static void test_truncate_into_pinned_block_copies(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 16, 1);
    int32_t t[12];
    iota_tokens(t, 12, 400);
    OK(kvc_alloc(p, 1, t, 9, NULL, NULL));
    int64_t pinned = -1;
    OK(kvc_prefix_pin(p, t, 8, NULL, &pinned));
    assert_int_equal(pinned, 8);
    OK(kvc_truncate(p, 1, 6, NULL));
    const int32_t x = 999;
    int32_t nb = -1;
    OK(kvc_append(p, 1, &x, 1, 0, &nb));
    CHECK_POOL(p);
    assert_int_equal(nb, 1);
    assert_int_equal(stats_of(p).pending_copies, 1);
    assert_int_equal(cached_tokens_of(p, t, 9, NULL), 8); /* the pinned blocks are intact and cached */
    OK(kvc_free(p, 1));
    int64_t unpinned = -1;
    OK(kvc_prefix_unpin(p, t, 8, NULL, &unpinned));
    assert_int_equal(unpinned, 8);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncate_releases_tail_and_lookahead),
        cmocka_unit_test(test_truncate_speculative_rollback_keeps_cache_right),
        cmocka_unit_test(test_truncate_into_shared_block),
        cmocka_unit_test(test_truncate_uncached_hashed_block),
        cmocka_unit_test(test_truncate_cancels_pending_copies_into_released_blocks),
        cmocka_unit_test(test_truncate_invalidates_built_batch),
        cmocka_unit_test(test_truncate_after_swap_in_stops_hashing),
        cmocka_unit_test(test_truncate_into_pinned_block_copies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
