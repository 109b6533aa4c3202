/* ABI basics through the *shared* library only (test_abi_* links libkvc.so): versions, status
 * strings, the per-thread error message and its copy function. Compiled as C99. */
#include <setjmp.h>
#include <stdio.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <kvc/kvc.h>

static void test_versions(void **state) {
    (void)state;
    assert_int_equal(kvc_version(), KVC_VERSION_NUMBER);
    char expect[32];
    snprintf(expect, sizeof expect, "%d.%d.%d", KVC_VERSION_MAJOR, KVC_VERSION_MINOR, KVC_VERSION_PATCH);
    assert_string_equal(kvc_version_string(), expect);
}

static void test_status_strings(void **state) {
    (void)state;
    for (int s = KVC_OK; s <= KVC_ERR_INTERNAL; s++) {
        const char *str = kvc_status_str(s);
        assert_non_null(str);
        assert_true(strncmp(str, "KVC_", 4) == 0);
        assert_null(strstr(str, "unknown status"));
    }
    assert_non_null(strstr(kvc_status_str(KVC_ERR_OUT_OF_BLOCKS), "OUT_OF_BLOCKS"));
    assert_non_null(strstr(kvc_status_str(9999), "unknown status"));
    assert_non_null(strstr(kvc_status_str(-1), "unknown status"));
}

static void test_error_message_and_copy(void **state) {
    (void)state;
    /* A failing call leaves a message naming the problem on this thread. */
    assert_int_equal(kvc_pool_config_default(NULL), KVC_ERR_NULL_ARG);
    const char *msg = kvc_last_error();
    assert_non_null(msg);
    assert_true(strlen(msg) > 0);

    char buf[8];
    int64_t len = -1;
    assert_int_equal(kvc_last_error_copy(buf, sizeof buf, &len), KVC_OK);
    assert_int_equal(len, (int64_t)strlen(msg));
    assert_int_equal(strlen(buf), sizeof buf - 1); /* truncated, NUL-terminated */
    assert_memory_equal(buf, msg, sizeof buf - 1);

    len = -1;
    assert_int_equal(kvc_last_error_copy(NULL, 0, &len), KVC_OK); /* length query */
    assert_true(len > 0);
    assert_int_equal(kvc_last_error_copy(NULL, 4, &len), KVC_ERR_NULL_ARG);
}

static void test_struct_versioning(void **state) {
    (void)state;
    kvc_pool_config cfg;
    memset(&cfg, 0xAB, sizeof cfg);
    assert_int_equal(kvc_pool_config_default(&cfg), KVC_OK);
    assert_int_equal(cfg.struct_size, sizeof cfg);
    assert_int_equal(cfg.block_size, 16);
    assert_true(cfg.watermark > 0.0099 && cfg.watermark < 0.0101);
    cfg.struct_size = 3; /* a size this library has never known */
    int64_t bytes = 0;
    assert_int_equal(kvc_bytes_per_block(&cfg, &bytes), KVC_ERR_VERSION);
    assert_true(strlen(kvc_last_error()) > 0);
}

/* The one struct_size rule (kvc.h): a struct the library reads must have a released size; one it
 * fills may also be larger (a newer caller), and then only the fields this library knows are
 * written: the caller's tail keeps its bytes. */
static void test_struct_size_rule(void **state) {
    (void)state;
    kvc_pool_config cfg;
    assert_int_equal(kvc_pool_config_default(&cfg), KVC_OK);
    cfg.num_blocks = 8;
    cfg.num_layers = 1;
    cfg.num_kv_heads = 1;
    cfg.num_q_heads = 1;
    cfg.head_dim = 8;
    cfg.backend = KVC_BACKEND_CPU;
    int64_t bytes = 0;
    cfg.struct_size = sizeof cfg + 8; /* read: a larger (newer) config is refused */
    assert_int_equal(kvc_bytes_per_block(&cfg, &bytes), KVC_ERR_VERSION);
    assert_non_null(strstr(kvc_last_error(), "struct_size"));
    cfg.struct_size = sizeof cfg;
    kvc_pool *pool = NULL;
    assert_int_equal(kvc_pool_create(&cfg, &pool), KVC_OK);

    /* fill: stats, storage info, each in a buffer 16 bytes larger than this library's struct */
    union { kvc_stats s; unsigned char raw[sizeof(kvc_stats) + 16]; } st;
    memset(&st, 0x5A, sizeof st);
    st.s.struct_size = sizeof st;
    assert_int_equal(kvc_pool_stats(pool, &st.s), KVC_OK);
    assert_int_equal(st.s.struct_size, sizeof st);
    assert_int_equal(st.s.total_blocks, 8);
    assert_int_equal(st.s.free_blocks, 8);
    for (size_t i = sizeof(kvc_stats); i < sizeof st; i++) assert_int_equal(st.raw[i], 0x5A);
    union { kvc_storage_info s; unsigned char raw[sizeof(kvc_storage_info) + 16]; } si;
    memset(&si, 0x5A, sizeof si);
    si.s.struct_size = sizeof si;
    assert_int_equal(kvc_storage_get_info(pool, &si.s), KVC_OK);
    assert_int_equal(si.s.backend, KVC_BACKEND_CPU);
    assert_true(si.s.total_bytes > 0);
    for (size_t i = sizeof(kvc_storage_info); i < sizeof si; i++) assert_int_equal(si.raw[i], 0x5A);
    /* a size between releases is refused, and out is left as it was */
    si.s.struct_size = sizeof(kvc_storage_info) - 4;
    si.s.total_bytes = 77;
    assert_int_equal(kvc_storage_get_info(pool, &si.s), KVC_ERR_VERSION);
    assert_int_equal(si.s.total_bytes, 77);
    assert_int_equal(kvc_pool_destroy(pool), KVC_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_status_strings),
        cmocka_unit_test(test_error_message_and_copy),
        cmocka_unit_test(test_struct_versioning),
        cmocka_unit_test(test_struct_size_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
