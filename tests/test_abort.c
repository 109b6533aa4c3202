/* kvc_abort: a sequence whose KV may never have been computed leaves the prefix cache without the
 * blocks it filled itself (kvc_free would leave them cached, KV-less), keeps its prompt's hits,
 * and spares blocks another holder or a pin relies on. */
#include "test_pool_helpers.h"

enum { BS = 4, BLOCKS = 32 };

static int64_t removed_events(kvc_pool *p) {
    int64_t n = 0;
    for (;;) {
        kvc_event e;
        memset(&e, 0, sizeof e);
        e.struct_size = sizeof e;
        int32_t toks[BS], has = 0;
        OK(kvc_event_pop(p, &e, toks, BS, &has));
        if (!has) return n;
        n += e.type == KVC_EVENT_BLOCK_REMOVED;
    }
}

/* A request cancelled before its prefill ran: kvc_free leaves its 3 full blocks as hits, kvc_abort
 * leaves none. */
static void test_cancelled_before_prefill(void **state) {
    (void)state;
    kvc_pool *p = make_pool(BS, BLOCKS, 1);
    int32_t t[13];
    iota_tokens(t, 13, 100);
    OK(kvc_alloc(p, 1, t, 13, NULL, NULL));
    OK(kvc_free(p, 1));
    assert_int_equal(cached_tokens_of(p, t, 13, NULL), 12);
    OK(kvc_prefix_cache_reset(p));
    (void)removed_events(p);

    OK(kvc_alloc(p, 2, t, 13, NULL, NULL));
    OK(kvc_abort(p, 2));
    assert_int_equal(cached_tokens_of(p, t, 13, NULL), 0);
    assert_int_equal(removed_events(p), 3);
    kvc_stats s = stats_of(p);
    assert_int_equal(s.used_blocks, 0);
    assert_int_equal(s.cached_free_blocks, 0);
    assert_int_equal(s.num_seqs, 0);
    EXPECT_ERR(kvc_abort(p, 2), KVC_ERR_UNKNOWN_SEQ);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* The prompt's hits were computed by someone else: they stay; only the blocks after them go. */
static void test_hits_stay_cached(void **state) {
    (void)state;
    kvc_pool *p = make_pool(BS, BLOCKS, 1);
    int32_t t[21];
    iota_tokens(t, 21, 200);
    OK(kvc_alloc(p, 1, t, 9, NULL, NULL)); /* 2 full blocks */
    OK(kvc_free(p, 1));
    int64_t cached = -1;
    OK(kvc_alloc(p, 2, t, 21, NULL, &cached)); /* hits 8 tokens, fills 3 more full blocks */
    assert_int_equal(cached, 8);
    OK(kvc_abort(p, 2));
    assert_int_equal(cached_tokens_of(p, t, 21, NULL), 8);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* Blocks appended later are the sequence's own too; a fork sharing them, or a pin, keeps them. */
static void test_appended_shared_and_pinned(void **state) {
    (void)state;
    kvc_pool *p = make_pool(BS, BLOCKS, 1);
    int32_t t[16];
    iota_tokens(t, 16, 300);
    OK(kvc_alloc(p, 1, t, 5, NULL, NULL));
    OK(kvc_append(p, 1, t + 5, 4, 0, NULL)); /* fills block 1 */
    OK(kvc_abort(p, 1));
    assert_int_equal(cached_tokens_of(p, t, 9, NULL), 0);

    OK(kvc_alloc(p, 2, t, 9, NULL, NULL)); /* blocks 0, 1 full */
    OK(kvc_fork(p, 2, 3));                 /* 3 shares them */
    OK(kvc_abort(p, 2));
    assert_int_equal(cached_tokens_of(p, t, 9, NULL), 8); /* 3's forward pass writes them */
    OK(kvc_free(p, 3));
    OK(kvc_prefix_cache_reset(p));

    OK(kvc_alloc(p, 4, t, 9, NULL, NULL));
    int64_t pinned = 0;
    OK(kvc_prefix_pin(p, t, 8, NULL, &pinned));
    assert_int_equal(pinned, 8);
    OK(kvc_abort(p, 4));
    assert_int_equal(cached_tokens_of(p, t, 9, NULL), 8); /* the pin holder relies on them */
    OK(kvc_prefix_unpin(p, t, 8, NULL, NULL));
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* kvc_truncate below the prompt's hit: blocks filled again after it are the sequence's own. */
static void test_truncate_lowers_the_hit(void **state) {
    (void)state;
    kvc_pool *p = make_pool(BS, BLOCKS, 1);
    int32_t t[16], u[16];
    iota_tokens(t, 16, 400);
    iota_tokens(u, 16, 900);
    OK(kvc_alloc(p, 1, t, 13, NULL, NULL));
    OK(kvc_free(p, 1)); /* t's 3 full blocks cached */
    int64_t cached = -1;
    OK(kvc_alloc(p, 2, t, 13, NULL, &cached));
    assert_int_equal(cached, 12);
    OK(kvc_truncate(p, 2, 4, NULL));      /* keeps block 0 (a hit) */
    OK(kvc_append(p, 2, u, 4, 0, NULL));  /* block 1 filled again, with other tokens */
    int32_t v[8];
    memcpy(v, t, 4 * sizeof(int32_t));
    memcpy(v + 4, u, 4 * sizeof(int32_t));
    OK(kvc_abort(p, 2));
    assert_int_equal(cached_tokens_of(p, v, 8, NULL), 4);  /* block 0 kept, the new block 1 gone */
    assert_int_equal(cached_tokens_of(p, t, 13, NULL), 12); /* t's own blocks were hits: kept */
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cancelled_before_prefill),
        cmocka_unit_test(test_hits_stay_cached),
        cmocka_unit_test(test_appended_shared_and_pinned),
        cmocka_unit_test(test_truncate_lowers_the_hit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
