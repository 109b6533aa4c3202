/* Pool configuration, sizing helpers, creation/destruction, statistics and the invariant checker. */
#include <limits.h>
#include <math.h>

#include "test_pool_helpers.h"

static kvc_pool_config base_cfg(void) {
    kvc_pool_config c;
    OK(kvc_pool_config_default(&c));
    return c;
}

static void test_config_defaults(void **state) {
    (void)state;
    kvc_pool_config c;
    memset(&c, 0x5a, sizeof c);
    OK(kvc_pool_config_default(&c));
    assert_int_equal(c.struct_size, sizeof(kvc_pool_config));
    assert_int_equal(c.block_size, 16);
    assert_int_equal(c.num_layers, 1);
    assert_int_equal(c.num_kv_heads, 1);
    assert_int_equal(c.num_q_heads, 0);
    assert_int_equal(c.head_dim, 128);
    assert_int_equal(c.kv_dtype, KVC_DTYPE_F16);
    assert_int_equal(c.num_blocks, 0);
    assert_true(c.memory_utilization == 0.9);
    assert_true(c.watermark == 0.01);
    assert_int_equal(c.max_seq_len, 0);
    assert_int_equal(c.prefix_caching, 1);
    assert_int_equal(c.backend, KVC_BACKEND_NONE);
    assert_int_equal(c.device, 0);
    assert_int_equal(c.event_capacity, 4096);
    assert_true(c.gpu_memory_utilization == 0.0);
    /* (EXPECT_ERR plants exactly this failure as its sentinel, so check it by hand.) */
    (void)kvc_pool_create(NULL, NULL);
    assert_int_equal(kvc_pool_config_default(NULL), KVC_ERR_NULL_ARG);
    assert_non_null(strstr(kvc_last_error(), "kvc_pool_config_default"));
}

static void test_bytes_per_block(void **state) {
    (void)state;
    kvc_pool_config c = base_cfg();
    int64_t bytes = 0;
    /* Llama-70B: 80 layers, 8 KV heads, d=128, fp16, bs=16 -> 5,242,880 B per block. */
    c.num_layers = 80;
    c.num_kv_heads = 8;
    c.head_dim = 128;
    c.block_size = 16;
    OK(kvc_bytes_per_block(&c, &bytes));
    assert_int_equal(bytes, 5242880);
    c.kv_dtype = KVC_DTYPE_FP8_E4M3;
    OK(kvc_bytes_per_block(&c, &bytes));
    assert_int_equal(bytes, 2621440);
    c.kv_dtype = KVC_DTYPE_F32;
    OK(kvc_bytes_per_block(&c, &bytes));
    assert_int_equal(bytes, 10485760);
    c.kv_dtype = KVC_DTYPE_BF16;
    c.block_size = 1;
    OK(kvc_bytes_per_block(&c, &bytes));
    assert_int_equal(bytes, 2 * 1 * 8 * 128 * 2 * 80);

    EXPECT_ERR(kvc_bytes_per_block(NULL, &bytes), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_bytes_per_block(&c, NULL), KVC_ERR_NULL_ARG);
    kvc_pool_config bad = c;
    bad.struct_size = 8;
    EXPECT_ERR(kvc_bytes_per_block(&bad, &bytes), KVC_ERR_VERSION);
    bad = c; bad.block_size = 0;
    EXPECT_ERR(kvc_bytes_per_block(&bad, &bytes), KVC_ERR_INVALID_ARG);
    bad = c; bad.num_layers = -1;
    EXPECT_ERR(kvc_bytes_per_block(&bad, &bytes), KVC_ERR_INVALID_ARG);
    bad = c; bad.num_kv_heads = 0;
    EXPECT_ERR(kvc_bytes_per_block(&bad, &bytes), KVC_ERR_INVALID_ARG);
    bad = c; bad.head_dim = 0;
    EXPECT_ERR(kvc_bytes_per_block(&bad, &bytes), KVC_ERR_INVALID_ARG);
    bad = c; bad.kv_dtype = 42;
    EXPECT_ERR(kvc_bytes_per_block(&bad, &bytes), KVC_ERR_INVALID_ARG);
    bad = c; bad.block_size = INT32_MAX; bad.num_layers = INT32_MAX; bad.num_kv_heads = INT32_MAX;
    bad.head_dim = INT32_MAX;
    bytes = 77;
    EXPECT_ERR(kvc_bytes_per_block(&bad, &bytes), KVC_ERR_OVERFLOW);
    assert_int_equal(bytes, 77); /* out-params untouched on failure */
}

static void test_blocks_for_budget(void **state) {
    (void)state;
    kvc_pool_config c = base_cfg(); /* 2 x 16 x 1 x 128 x 2 x 1 = 8192 B per block */
    int64_t n = -1;
    OK(kvc_blocks_for_budget(&c, 100000, 0.9, &n));
    assert_int_equal(n, 10); /* floor(90000 / 8192) */
    OK(kvc_blocks_for_budget(&c, 8192 * 10, 1.0, &n));
    assert_int_equal(n, 10);
    OK(kvc_blocks_for_budget(&c, 8192 * 10 - 1, 1.0, &n));
    assert_int_equal(n, 9);
    OK(kvc_blocks_for_budget(&c, 0, 0.5, &n));
    assert_int_equal(n, 0);
    OK(kvc_blocks_for_budget(&c, 8192 * 1000, 0.7, &n));
    assert_int_equal(n, 700); /* no 699.999 truncation */
    OK(kvc_blocks_for_budget(&c, INT64_MAX, 1.0, &n));
    assert_int_equal(n, INT64_MAX / 8192);
    /* Llama-70B with 80 GB x 0.9: floor(72e9 / 5242880) = 13732. */
    c.num_layers = 80; c.num_kv_heads = 8;
    OK(kvc_blocks_for_budget(&c, 80000000000LL, 0.9, &n));
    assert_int_equal(n, 13732);

    EXPECT_ERR(kvc_blocks_for_budget(NULL, 1, 0.5, &n), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_blocks_for_budget(&c, 1, 0.5, NULL), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_blocks_for_budget(&c, -1, 0.5, &n), KVC_ERR_INVALID_ARG);
    EXPECT_ERR(kvc_blocks_for_budget(&c, 1, 0.0, &n), KVC_ERR_INVALID_ARG);
    EXPECT_ERR(kvc_blocks_for_budget(&c, 1, 1.5, &n), KVC_ERR_INVALID_ARG);
    EXPECT_ERR(kvc_blocks_for_budget(&c, 1, NAN, &n), KVC_ERR_INVALID_ARG);
    kvc_pool_config bad = c; bad.struct_size = 0;
    EXPECT_ERR(kvc_blocks_for_budget(&bad, 1, 0.5, &n), KVC_ERR_VERSION);
    bad = c; bad.kv_dtype = -1;
    EXPECT_ERR(kvc_blocks_for_budget(&bad, 1, 0.5, &n), KVC_ERR_INVALID_ARG);
}

static void test_create_from_budget_and_get_config(void **state) {
    (void)state;
    kvc_pool_config c = base_cfg();
    c.memory_budget_bytes = 100000; /* x 0.9 / 8192 -> 10 blocks */
    c.num_kv_heads = 2;
    c.head_dim = 64; /* same 8192 B per block */
    kvc_pool *p = NULL;
    OK(kvc_pool_create(&c, &p));
    kvc_pool_config got;
    memset(&got, 0, sizeof got);
    OK(kvc_pool_get_config(p, &got));
    assert_int_equal(got.struct_size, sizeof got);
    assert_int_equal(got.num_blocks, 10);
    assert_int_equal(got.num_q_heads, 2); /* 0 resolves to num_kv_heads */
    assert_int_equal(got.backend, KVC_BACKEND_NONE);
    assert_int_equal(got.block_size, 16);
    kvc_stats s = stats_of(p);
    assert_int_equal(s.total_blocks, 10);
    assert_int_equal(s.free_blocks, 10);
    assert_int_equal(s.used_blocks, 0);
    assert_int_equal(s.num_seqs, 0);
    assert_true(s.utilization == 0.0);
    assert_true(s.prefix_hit_rate == 0.0);
    CHECK_POOL(p);
    EXPECT_ERR(kvc_pool_get_config(NULL, &got), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_pool_get_config(p, NULL), KVC_ERR_NULL_ARG);
    OK(kvc_pool_destroy(p));
    OK(kvc_pool_destroy(NULL));
}

static void test_create_with_host_storage(void **state) {
    (void)state;
    kvc_pool_config c = base_cfg();
    c.num_blocks = 8;
    c.backend = KVC_BACKEND_CPU;
    kvc_pool *p = NULL;
    OK(kvc_pool_create(&c, &p));
    kvc_pool_config got;
    OK(kvc_pool_get_config(p, &got));
    assert_int_equal(got.backend, KVC_BACKEND_CPU);
    OK(kvc_pool_destroy(p));

    /* AUTO resolves to CPU or CUDA, never stays AUTO. */
    c.backend = KVC_BACKEND_AUTO;
    OK(kvc_pool_create(&c, &p));
    OK(kvc_pool_get_config(p, &got));
    assert_true(got.backend == KVC_BACKEND_CPU || got.backend == KVC_BACKEND_CUDA);
    OK(kvc_pool_destroy(p));
}

static void test_create_errors(void **state) {
    (void)state;
    kvc_pool *p = (kvc_pool *)0x1;
    kvc_pool_config ok = base_cfg();
    ok.num_blocks = 4;
    EXPECT_ERR(kvc_pool_create(NULL, &p), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_pool_create(&ok, NULL), KVC_ERR_NULL_ARG);
    kvc_pool_config c;
#define BAD(field_assign, code)            \
    c = ok;                                \
    c.field_assign;                        \
    EXPECT_ERR(kvc_pool_create(&c, &p), code); \
    assert_ptr_equal(p, (kvc_pool *)0x1)
    BAD(struct_size = sizeof(kvc_pool_config) - 8, KVC_ERR_VERSION);
    BAD(struct_size = sizeof(kvc_pool_config) + 8, KVC_ERR_VERSION);
    BAD(block_size = 0, KVC_ERR_INVALID_ARG);
    BAD(block_size = -16, KVC_ERR_INVALID_ARG);
    BAD(num_layers = 0, KVC_ERR_INVALID_ARG);
    BAD(head_dim = -1, KVC_ERR_INVALID_ARG);
    BAD(kv_dtype = 9, KVC_ERR_INVALID_ARG);
    BAD(num_q_heads = -1, KVC_ERR_INVALID_ARG);
    BAD(num_blocks = -1, KVC_ERR_INVALID_ARG);
    BAD(num_blocks = (int64_t)INT32_MAX + 1, KVC_ERR_INVALID_ARG);
    BAD(num_blocks = 0, KVC_ERR_INVALID_ARG); /* and no budget: no blocks */
    BAD(memory_utilization = 0.0, KVC_ERR_INVALID_ARG);
    BAD(memory_utilization = 1.01, KVC_ERR_INVALID_ARG);
    BAD(watermark = 1.0, KVC_ERR_INVALID_ARG);
    BAD(watermark = -0.01, KVC_ERR_INVALID_ARG);
    BAD(watermark = NAN, KVC_ERR_INVALID_ARG);
    BAD(gpu_memory_utilization = 2.0, KVC_ERR_INVALID_ARG);
    BAD(max_seq_len = -5, KVC_ERR_INVALID_ARG);
    BAD(prefix_caching = 2, KVC_ERR_INVALID_ARG);
    BAD(backend = 17, KVC_ERR_INVALID_ARG);
    BAD(device = -1, KVC_ERR_INVALID_ARG);
    BAD(event_capacity = -1, KVC_ERR_INVALID_ARG);
    BAD(memory_budget_bytes = -1, KVC_ERR_INVALID_ARG);
    c = ok; c.num_blocks = 0; c.memory_budget_bytes = 100; /* budget below one block */
    EXPECT_ERR(kvc_pool_create(&c, &p), KVC_ERR_INVALID_ARG);
    c = ok; c.num_kv_heads = 4; c.num_q_heads = 6;
    EXPECT_ERR(kvc_pool_create(&c, &p), KVC_ERR_INVALID_ARG);
    c = ok; c.head_dim = INT32_MAX; c.num_layers = INT32_MAX; c.num_kv_heads = INT32_MAX;
    EXPECT_ERR(kvc_pool_create(&c, &p), KVC_ERR_OVERFLOW);
    c = ok; c.head_dim = 1 << 20; c.num_layers = 1 << 10; c.num_blocks = INT32_MAX; /* storage size */
    EXPECT_ERR(kvc_pool_create(&c, &p), KVC_ERR_OVERFLOW);
#undef BAD
    assert_ptr_equal(p, (kvc_pool *)0x1);
}

/* CUDA requested where it cannot be had: without CUDA/GPU any device fails; with GPUs, an ordinal
 * past the last one does. Either way KVC_ERR_DEVICE, and no pool comes back. */
static void test_create_cuda_unavailable(void **state) {
    (void)state;
    int32_t count = -1;
    OK(kvc_cuda_device_count(&count));
    assert_true(count >= 0);
    kvc_pool_config c = base_cfg();
    c.num_blocks = 4;
    c.backend = KVC_BACKEND_CUDA;
    c.device = count == 0 ? 0 : count;
    kvc_pool *p = (kvc_pool *)0x1;
    EXPECT_ERR(kvc_pool_create(&c, &p), KVC_ERR_DEVICE);
    assert_ptr_equal(p, (kvc_pool *)0x1);
    if (count == 0) { /* AUTO falls back to host storage instead of failing */
        c.backend = KVC_BACKEND_AUTO;
        c.device = 0;
        OK(kvc_pool_create(&c, &p));
        kvc_pool_config got;
        OK(kvc_pool_get_config(p, &got));
        assert_int_equal(got.backend, KVC_BACKEND_CPU);
        OK(kvc_pool_destroy(p));
    }
}

static void test_stats_errors(void **state) {
    (void)state;
    kvc_pool *p = make_pool(16, 4, 1);
    kvc_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s - 4; /* neither this release's size nor the one before cached_blocks_total */
    EXPECT_ERR(kvc_pool_stats(p, &s), KVC_ERR_VERSION);
    s.struct_size = offsetof(kvc_stats, cached_blocks_total) - 8;
    EXPECT_ERR(kvc_pool_stats(p, &s), KVC_ERR_VERSION);
    s.struct_size = 0;
    EXPECT_ERR(kvc_pool_stats(p, &s), KVC_ERR_VERSION);
    s.struct_size = sizeof s;
    EXPECT_ERR(kvc_pool_stats(NULL, &s), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_pool_stats(p, NULL), KVC_ERR_NULL_ARG);
    /* A larger (newer) caller struct is accepted; the tail is left alone. */
    struct { kvc_stats s; int64_t future; } big;
    memset(&big, 0, sizeof big);
    big.s.struct_size = sizeof big;
    big.future = 1234;
    OK(kvc_pool_stats(p, &big.s));
    assert_int_equal(big.s.total_blocks, 4);
    assert_int_equal(big.future, 1234);
    OK(kvc_pool_destroy(p));
}

static void test_checker_detects_corruption(void **state) {
    (void)state;
    kvc_pool *p = make_pool(4, 8, 0);
    OK(kvc_alloc(p, 1, NULL, 6, NULL, NULL));
    CHECK_POOL(p);
    EXPECT_ERR(kvc_pool_check(NULL), KVC_ERR_NULL_ARG);
    kvct_corrupt_refcount(p, 1, +1);
    EXPECT_ERR(kvc_pool_check(p), KVC_ERR_INTERNAL);
    assert_non_null(strstr(kvc_last_error(), "block 1"));
    kvct_corrupt_refcount(p, 1, -1);
    CHECK_POOL(p);
    kvct_corrupt_refcount(p, 5, +1); /* a free block with a refcount */
    EXPECT_ERR(kvc_pool_check(p), KVC_ERR_INTERNAL);
    assert_non_null(strstr(kvc_last_error(), "block 5"));
    kvct_corrupt_refcount(p, 5, -1);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

static void test_version_and_status_strings(void **state) {
    (void)state;
    assert_int_equal(kvc_version(), KVC_VERSION_NUMBER);
    assert_non_null(strstr(kvc_status_str(KVC_ERR_OUT_OF_BLOCKS), "OUT_OF_BLOCKS"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_defaults),
        cmocka_unit_test(test_bytes_per_block),
        cmocka_unit_test(test_blocks_for_budget),
        cmocka_unit_test(test_create_from_budget_and_get_config),
        cmocka_unit_test(test_create_with_host_storage),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_create_cuda_unavailable),
        cmocka_unit_test(test_stats_errors),
        cmocka_unit_test(test_checker_detects_corruption),
        cmocka_unit_test(test_version_and_status_strings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
