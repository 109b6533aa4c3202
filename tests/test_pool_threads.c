/* Many threads on one pool: each thread runs its own alloc / append / fork / free / lookup mix on
 * its own ids while sharing blocks and the prefix cache; the invariant checker runs concurrently
 * and at the end. (The mutex makes each call atomic; this proves no call corrupts another.) */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "test_pool_helpers.h"

#define THREADS 4
#define OPS 3000

typedef struct {
    kvc_pool *pool;
    int index;
    int failures;
} worker_arg;

static void *worker(void *p) {
    worker_arg *a = (worker_arg *)p;
    uint64_t rng = 0x9E3779B97F4A7C15ull * (uint64_t)(a->index + 1);
    uint64_t base = (uint64_t)a->index << 32;
    uint64_t live[16];
    int nlive = 0;
    uint64_t next = 1;
    int32_t prompt[64];
    for (int op = 0; op < OPS; ++op) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        unsigned kind = (unsigned)(rng % 10);
        int64_t n = 1 + (int64_t)((rng >> 8) % 64);
        for (int64_t i = 0; i < n; ++i) prompt[i] = (int32_t)(i + (int64_t)((rng >> 20) % 3) * 1000); /* shared prefixes */
        kvc_status st = KVC_OK;
        if (kind < 3 && nlive < 16) {
            st = kvc_alloc(a->pool, base + next, prompt, n, NULL, NULL);
            if (st == KVC_OK) live[nlive++] = base + next;
            ++next;
        } else if (kind < 6 && nlive > 0) {
            int32_t t = (int32_t)op;
            st = kvc_append(a->pool, live[rng % (uint64_t)nlive], &t, 1, (int64_t)(rng >> 40) % 2, NULL);
        } else if (kind < 7 && nlive > 0 && nlive < 16) {
            st = kvc_fork(a->pool, live[rng % (uint64_t)nlive], base + next);
            if (st == KVC_OK) live[nlive++] = base + next;
            ++next;
        } else if (kind < 9 && nlive > 0) {
            int i = (int)(rng % (uint64_t)nlive);
            st = kvc_free(a->pool, live[i]);
            live[i] = live[--nlive];
        } else {
            int64_t c;
            st = kvc_prefix_lookup(a->pool, prompt, n, NULL, &c);
            int32_t s[4], d[4];
            int64_t got;
            if (st == KVC_OK) st = kvc_take_pending_copies(a->pool, s, d, 4, &got);
            if (st == KVC_OK) st = kvc_pool_check(a->pool);
        }
        if (st != KVC_OK && st != KVC_ERR_OUT_OF_BLOCKS) ++a->failures;
    }
    while (nlive > 0)
        if (kvc_free(a->pool, live[--nlive]) != KVC_OK) ++a->failures;
    return NULL;
}

static void test_threads_share_one_pool(void **state) {
    (void)state;
    kvc_pool *p = make_pool(8, 256, 1);
    pthread_t th[THREADS];
    worker_arg args[THREADS];
    for (int i = 0; i < THREADS; ++i) {
        args[i].pool = p;
        args[i].index = i;
        args[i].failures = 0;
        assert_int_equal(pthread_create(&th[i], NULL, worker, &args[i]), 0);
    }
    for (int i = 0; i < THREADS; ++i) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(args[i].failures, 0);
    }
    CHECK_POOL(p);
    kvc_stats s = stats_of(p);
    assert_int_equal(s.num_seqs, 0);
    assert_int_equal(s.used_blocks, 0);
    assert_int_equal(s.free_blocks, 256);
    assert_true(s.allocs > 0 && s.prefix_hit_tokens > 0);
    OK(kvc_pool_destroy(p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_share_one_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
