/* Shared helpers of the host-core CMocka suites (test_pool*, test_seq*, test_fork*, test_random*,
 * test_prefix*, test_events*). Header-only; every suite includes it once. */
#ifndef KVC_TEST_POOL_HELPERS_H
#define KVC_TEST_POOL_HELPERS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kvc/kvc.h"
#include "testing.h"

/* Asserts KVC_OK, printing the status and message otherwise. */
#define OK(call)                                                                                   \
    do {                                                                                           \
        kvc_status st_ = (call);                                                                   \
        if (st_ != KVC_OK) {                                                                       \
            print_error("%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, kvc_status_str(st_),   \
                        kvc_last_error());                                                         \
            fail();                                                                                \
        }                                                                                          \
    } while (0)

/* Plants a known message, so that a failing call is seen to write its own. */
static inline void plant_sentinel_error(void) { (void)kvc_pool_config_default(NULL); }
static inline int last_error_is_fresh(void) {
    return kvc_last_error()[0] != '\0' && strcmp(kvc_last_error(), "kvc_pool_config_default: cfg is NULL") != 0;
}

/* Asserts that `call` fails with `code` and writes a non-empty message of its own. */
#define EXPECT_ERR(call, code)                                                                     \
    do {                                                                                           \
        plant_sentinel_error();                                                                    \
        kvc_status st_ = (call);                                                                   \
        if (st_ != (code)) {                                                                       \
            print_error("%s:%d: %s -> %s (expected %s): %s\n", __FILE__, __LINE__, #call,          \
                        kvc_status_str(st_), kvc_status_str(code), kvc_last_error());              \
            fail();                                                                                \
        }                                                                                          \
        if (!last_error_is_fresh()) {                                                              \
            print_error("%s:%d: %s left no message of its own\n", __FILE__, __LINE__, #call);     \
            fail();                                                                                \
        }                                                                                          \
    } while (0)

static inline kvc_stats stats_of(kvc_pool *p) {
    kvc_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    OK(kvc_pool_stats(p, &s));
    return s;
}

#define CHECK_POOL(p) OK(kvc_pool_check(p))

/* A 64-bit LCG step (Knuth's MMIX constants); returns the state's high 31 bits. The suites' random
 * workloads use it so that a seed names one workload. */
static inline uint64_t test_lcg_next(uint64_t *state) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return *state >> 33;
}

/* EXPECT_ERR plus: the pool's statistics are bit-identical before and after, and it passes the
 * invariant checker. */
#define EXPECT_ERR_UNCHANGED(p, call, code)                                                        \
    do {                                                                                           \
        kvc_stats before_ = stats_of(p);                                                           \
        EXPECT_ERR(call, code);                                                                    \
        kvc_stats after_ = stats_of(p);                                                            \
        assert_memory_equal(&before_, &after_, sizeof before_);                                    \
        CHECK_POOL(p);                                                                             \
    } while (0)

/* Tokens of the prompt's prefix that kvc_prefix_lookup reports cached. */
static inline int64_t cached_tokens_of(kvc_pool *p, const int32_t *t, int64_t n, const kvc_keys *k) {
    int64_t c = -1;
    OK(kvc_prefix_lookup(p, t, n, k, &c));
    return c;
}

static inline kvc_pool *make_pool_ex(int32_t block_size, int64_t num_blocks, int caching, double watermark,
                                     int64_t max_seq_len, int32_t event_capacity) {
    kvc_pool_config cfg;
    OK(kvc_pool_config_default(&cfg));
    cfg.block_size = block_size;
    cfg.num_blocks = num_blocks;
    cfg.prefix_caching = caching;
    cfg.watermark = watermark;
    cfg.max_seq_len = max_seq_len;
    cfg.event_capacity = event_capacity;
    kvc_pool *p = NULL;
    OK(kvc_pool_create(&cfg, &p));
    assert_non_null(p);
    CHECK_POOL(p);
    return p;
}

static inline kvc_pool *make_pool(int32_t block_size, int64_t num_blocks, int caching) {
    return make_pool_ex(block_size, num_blocks, caching, 0.0, 0, 4096);
}

/* Fills t[0..n) with base, base+1, ... */
static inline void iota_tokens(int32_t *t, int64_t n, int32_t base) {
    for (int64_t i = 0; i < n; ++i) t[i] = base + (int32_t)i;
}

static inline int64_t table_len(kvc_pool *p, uint64_t seq) {
    int64_t n = -1;
    OK(kvc_seq_block_table(p, seq, NULL, 0, &n));
    return n;
}

/* Copies seq's table into out (cap entries) and returns its length. */
static inline int64_t table_of(kvc_pool *p, uint64_t seq, int32_t *out, int64_t cap) {
    int64_t n = -1;
    OK(kvc_seq_block_table(p, seq, out, cap, &n));
    return n;
}

static inline int64_t num_tokens_of(kvc_pool *p, uint64_t seq) {
    int64_t n = -1;
    OK(kvc_seq_num_tokens(p, seq, &n));
    return n;
}

#endif /* KVC_TEST_POOL_HELPERS_H */
