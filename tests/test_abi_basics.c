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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_status_strings),
        cmocka_unit_test(test_error_message_and_copy),
        cmocka_unit_test(test_struct_versioning),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
