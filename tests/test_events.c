/* KV events: BlockStored / BlockRemoved / AllBlocksCleared in order, with tokens, chained parent
 * hashes and keys; bounded ring with counted drops; the pop API's errors. */
#include "test_pool_helpers.h"

static int pop(kvc_pool *p, kvc_event *ev, int32_t *toks, int64_t cap) {
    memset(ev, 0, sizeof *ev);
    ev->struct_size = sizeof *ev;
    int32_t has = -1;
    OK(kvc_event_pop(p, ev, toks, cap, &has));
    return has;
}

static void test_stored_events_in_order(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 16, 1);
    kvc_keys *k;
    OK(kvc_keys_create(&k));
    OK(kvc_keys_set_lora(k, 77));
    int32_t t[14];
    iota_tokens(t, 14, 10);
    OK(kvc_alloc(p, 1, t, 13, k, NULL)); /* 3 full blocks */
    int32_t table[4];
    table_of(p, 1, table, 4);
    kvc_event ev[3];
    int32_t toks[3][4];
    for (int i = 0; i < 3; ++i) {
        assert_int_equal(pop(p, &ev[i], toks[i], 4), 1);
        assert_int_equal(ev[i].type, KVC_EVENT_BLOCK_STORED);
        assert_int_equal(ev[i].block_id, table[i]);
        assert_int_equal(ev[i].num_tokens, 4);
        assert_memory_equal(toks[i], t + 4 * i, 4 * sizeof(int32_t));
        assert_int_equal(ev[i].lora_id, 77);
        assert_int_equal(ev[i].extra_keys_digest, 0);
        assert_int_equal(ev[i].sequence_number, (uint64_t)i);
        assert_int_equal(ev[i].struct_size, sizeof(kvc_event));
    }
    /* Chained: each parent is the previous block's hash; block 0's parent is the fixed seed. */
    assert_true(ev[1].parent_hash_hi == ev[0].hash_hi && ev[1].parent_hash_lo == ev[0].hash_lo);
    assert_true(ev[2].parent_hash_hi == ev[1].hash_hi && ev[2].parent_hash_lo == ev[1].hash_lo);
    assert_true(ev[0].hash_hi != ev[1].hash_hi || ev[0].hash_lo != ev[1].hash_lo);
    kvc_event tmp;
    assert_int_equal(pop(p, &tmp, NULL, 0), 0);

    /* Another prompt: same root parent; a salt shows in block 0's digest only. */
    OK(kvc_keys_clear(k));
    OK(kvc_keys_set_salt(k, "s"));
    int32_t u[9];
    iota_tokens(u, 9, 500);
    OK(kvc_alloc(p, 2, u, 9, k, NULL));
    kvc_event e0, e1;
    int32_t tk[4];
    assert_int_equal(pop(p, &e0, tk, 4), 1);
    assert_int_equal(pop(p, &e1, tk, 4), 1);
    assert_true(e0.parent_hash_hi == ev[0].parent_hash_hi && e0.parent_hash_lo == ev[0].parent_hash_lo);
    assert_true(e0.extra_keys_digest != 0);
    assert_int_equal(e1.extra_keys_digest, 0);
    assert_int_equal(e0.lora_id, 0);
    assert_int_equal(e0.sequence_number, 3);

    /* Decode filling a block emits its BlockStored. */
    OK(kvc_append(p, 2, u + 8, 1, 0, NULL)); /* 10 tokens: not yet */
    assert_int_equal(pop(p, &tmp, tk, 4), 0);
    int32_t more[2] = {1, 2};
    OK(kvc_append(p, 2, more, 2, 0, NULL)); /* 12: block 2 full */
    assert_int_equal(pop(p, &tmp, tk, 4), 1);
    assert_int_equal(tmp.type, KVC_EVENT_BLOCK_STORED);
    assert_true(tmp.parent_hash_hi == e1.hash_hi && tmp.parent_hash_lo == e1.hash_lo);
    assert_int_equal(tk[0], u[8]);
    assert_int_equal(tk[3], 2);
    OK(kvc_keys_destroy(k));
    OK(kvc_pool_destroy(p));
}

static void test_removed_and_cleared_events(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 3, 1);
    int32_t a[9], b[12];
    iota_tokens(a, 9, 1);
    iota_tokens(b, 12, 100);
    OK(kvc_alloc(p, 1, a, 8, NULL, NULL)); /* 2 cached blocks */
    kvc_event s0, s1, ev;
    int32_t tk[4];
    pop(p, &s0, tk, 4);
    pop(p, &s1, tk, 4);
    OK(kvc_free(p, 1));
    OK(kvc_alloc(p, 2, b, 12, NULL, NULL)); /* 3 blocks: 1 uncached + evicts block 1 then block 0 */
    assert_int_equal(pop(p, &ev, tk, 4), 1);
    assert_int_equal(ev.type, KVC_EVENT_BLOCK_REMOVED);
    assert_int_equal(ev.block_id, s1.block_id);
    assert_true(ev.hash_hi == s1.hash_hi && ev.hash_lo == s1.hash_lo);
    assert_true(ev.parent_hash_hi == s1.parent_hash_hi && ev.parent_hash_lo == s1.parent_hash_lo);
    assert_int_equal(pop(p, &ev, tk, 4), 1);
    assert_int_equal(ev.type, KVC_EVENT_BLOCK_REMOVED);
    assert_int_equal(ev.block_id, s0.block_id);
    for (int i = 0; i < 3; ++i) { /* then b's three blocks enter the cache */
        assert_int_equal(pop(p, &ev, tk, 4), 1);
        assert_int_equal(ev.type, KVC_EVENT_BLOCK_STORED);
    }
    assert_int_equal(stats_of(p).evictions, 2);
    OK(kvc_free(p, 2));
    OK(kvc_prefix_cache_reset(p));
    assert_int_equal(pop(p, &ev, NULL, 0), 1);
    assert_int_equal(ev.type, KVC_EVENT_ALL_BLOCKS_CLEARED);
    assert_int_equal(ev.sequence_number, 7);
    assert_int_equal(pop(p, &ev, NULL, 0), 0);
    OK(kvc_pool_destroy(p));
}

static void test_ring_overflow_counts_drops(void **state) {
    (void)state;
    kvc_pool *p = make_pool_ex(4, 16, 1, 0.0, 0, 2);
    int32_t t[13];
    iota_tokens(t, 13, 1);
    OK(kvc_alloc(p, 1, t, 13, NULL, NULL)); /* 3 stored events, room for 2 */
    assert_int_equal(stats_of(p).events_dropped, 1);
    kvc_event ev;
    int32_t tk[4];
    assert_int_equal(pop(p, &ev, tk, 4), 1);
    assert_int_equal(ev.sequence_number, 0);
    assert_int_equal(pop(p, &ev, tk, 4), 1);
    assert_int_equal(ev.sequence_number, 1);
    assert_int_equal(pop(p, &ev, tk, 4), 0);
    OK(kvc_free(p, 1));
    OK(kvc_prefix_cache_reset(p));
    assert_int_equal(pop(p, &ev, tk, 4), 1);
    assert_int_equal(ev.sequence_number, 3); /* the gap shows the dropped event */
    OK(kvc_pool_destroy(p));

    /* event_capacity 0: events disabled, nothing queued, nothing counted. */
    p = make_pool_ex(4, 16, 1, 0.0, 0, 0);
    OK(kvc_alloc(p, 1, t, 13, NULL, NULL));
    assert_int_equal(pop(p, &ev, tk, 4), 0);
    assert_int_equal(stats_of(p).events_dropped, 0);
    OK(kvc_pool_destroy(p));
}

static void test_event_pop_errors(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 16, 1);
    int32_t t[5] = {1, 2, 3, 4, 5};
    OK(kvc_alloc(p, 1, t, 5, NULL, NULL)); /* one stored event */
    kvc_event ev;
    memset(&ev, 0, sizeof ev);
    ev.struct_size = sizeof ev;
    int32_t tk[4], has = -1;
    EXPECT_ERR_UNCHANGED(p, kvc_event_pop(NULL, &ev, tk, 4, &has), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_event_pop(p, NULL, tk, 4, &has), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_event_pop(p, &ev, tk, 4, NULL), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_event_pop(p, &ev, NULL, 4, &has), KVC_ERR_NULL_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_event_pop(p, &ev, tk, -1, &has), KVC_ERR_INVALID_ARG);
    EXPECT_ERR_UNCHANGED(p, kvc_event_pop(p, &ev, tk, 3, &has), KVC_ERR_BUFFER_TOO_SMALL);
    EXPECT_ERR_UNCHANGED(p, kvc_event_pop(p, &ev, NULL, 0, &has), KVC_ERR_BUFFER_TOO_SMALL);
    ev.struct_size = sizeof ev - 4;
    EXPECT_ERR_UNCHANGED(p, kvc_event_pop(p, &ev, tk, 4, &has), KVC_ERR_VERSION);
    assert_int_equal(has, -1);
    /* The event stayed queued through all of that. */
    assert_int_equal(pop(p, &ev, tk, 4), 1);
    assert_int_equal(ev.sequence_number, 0);
    assert_memory_equal(tk, t, sizeof tk);
    OK(kvc_pool_destroy(p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stored_events_in_order),
        cmocka_unit_test(test_removed_and_cleared_events),
        cmocka_unit_test(test_ring_overflow_counts_drops),
        cmocka_unit_test(test_event_pop_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
