/* Regression tests for defects found by the hardening work (differential fuzzer, bad-input matrix,
 * thread stress, memcheck). One test per defect, named after it, each failing on the defective
 * library. */
#include "test_pool_helpers.h"

/* kvc_can_alloc walked the device tier only: a prompt whose first block was spilled to the host tier
 * but whose later blocks are still cached on the device was planned with no device hits at all, so
 * kvc_can_alloc answered NEVER for a prompt that kvc_alloc then placed (kvc_alloc walks on through the
 * host tier and counts the later device hits). Found while writing the differential fuzzer's
 * host-tier model, which has one plan for both calls. */
static void test_can_alloc_sees_device_hits_after_a_host_hit(void **state) {
    (void)state;
    kvc_pool_config cfg;
    OK(kvc_pool_config_default(&cfg));
    cfg.block_size = 2;
    cfg.num_blocks = 4;
    cfg.head_dim = 1;
    cfg.kv_dtype = KVC_DTYPE_F32;
    cfg.backend = KVC_BACKEND_CPU;
    cfg.watermark = 0.5; /* W = 2 blocks */
    kvc_pool *p = NULL;
    OK(kvc_pool_create(&cfg, &p));
    OK(kvc_tier_attach_host(p, 4));
    kvc_keys *low = NULL;
    OK(kvc_keys_create(&low));
    OK(kvc_keys_set_priority(low, 0));

    const int32_t prompt[5] = {1, 2, 3, 4, 5}; /* blocks (1,2) and (3,4) get cached */
    const int32_t shares_first[3] = {1, 2, 9};
    const int32_t other[5] = {7, 7, 7, 7, 7};
    int64_t cached = -1;
    OK(kvc_alloc(p, 1, prompt, 5, NULL, NULL));
    OK(kvc_free(p, 1));
    /* A low-priority request touches only the first block: it is now evicted before the second. */
    OK(kvc_alloc(p, 2, shares_first, 3, low, &cached));
    assert_int_equal(cached, 2);
    OK(kvc_free(p, 2));
    OK(kvc_alloc(p, 3, other, 5, NULL, NULL)); /* evicts (spills) the first block only */
    OK(kvc_free(p, 3));
    CHECK_POOL(p);

    int64_t dev = -1, host = -1, disk = -1;
    OK(kvc_prefix_lookup_tiers(p, prompt, 5, NULL, &dev, &host, &disk));
    assert_int_equal(host, 2); /* block 0 in the host tier */
    assert_int_equal(dev, 2);  /* block 1 still on the device */

    /* kvc_alloc needs 2 fresh blocks (the restore + the last block) of the 3 free ones once its device
     * hit is taken out: 4 - 2 >= W, so not NEVER; 3 - 2 < W, so LATER. */
    int32_t verdict = -1;
    OK(kvc_can_alloc(p, prompt, 5, NULL, &verdict));
    assert_int_equal(verdict, KVC_ALLOC_LATER);
    OK(kvc_alloc(p, 4, prompt, 5, NULL, &cached)); /* and it does fit */
    assert_int_equal(cached, 4);
    CHECK_POOL(p);

    OK(kvc_keys_destroy(low));
    OK(kvc_pool_destroy(p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_can_alloc_sees_device_hits_after_a_host_hit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
