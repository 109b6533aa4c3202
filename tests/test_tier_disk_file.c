/* The disk tier's file as an operator and an attacker see it (issue [tier-hardening] 1, 2, 4, 5):
 * created owner-only, never through a symbolic link, never someone else's file truncated or
 * extended, its space reserved even when a sparse file of the right size is already there, no
 * empty file left by a refused attach, and a restart right after a SIGKILLed server works. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_tier_helpers.h"

enum { SLOTS = 16 };

static kvc_pool *pool_with_host(void) {
    kvc_pool *p = tier_pool(8, 1);
    OK(kvc_tier_attach_host(p, 4));
    return p;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The whole content of a small file, NUL-terminated, into buf. */
static void read_text(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    const size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
    fclose(f);
}

/* 1. Slot headers hold token ids in clear: the file is readable by its owner only. */
static void test_file_is_created_owner_only(void **state) {
    disk_fixture *f = (disk_fixture *)*state;
    const mode_t old_mask = umask(0);  /* even with a permissive umask */
    kvc_pool *p = pool_with_host();
    OK(kvc_tier_attach_disk(p, f->path, SLOTS, KVC_DISK_NO_DIRECT));
    umask(old_mask);
    struct stat sb;
    assert_int_equal(stat(f->path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    OK(kvc_pool_destroy(p));
}

/* 2. A link to another file is refused, persistent or not, and the target stays as it was; a
 * dangling link's target is not created. */
static void test_symbolic_links_are_never_followed(void **state) {
    disk_fixture *f = (disk_fixture *)*state;
    char target[300], link[300], dangling[300], text[64];
    snprintf(target, sizeof target, "%s/notes.txt", f->dir);
    snprintf(link, sizeof link, "%s/link.bin", f->dir);
    snprintf(dangling, sizeof dangling, "%s/missing.bin", f->dir);
    write_text(target, "not a cache file\n");
    assert_int_equal(symlink(target, link), 0);
    for (int persistent = 0; persistent < 2; ++persistent) {
        kvc_pool *p = pool_with_host();
        plant_sentinel_error();
        assert_int_equal(kvc_tier_attach_disk(p, link, SLOTS, persistent ? KVC_DISK_PERSISTENT : 0), KVC_ERR_IO);
        assert_non_null(strstr(kvc_last_error(), "symbolic link"));
        OK(kvc_pool_destroy(p));
        read_text(target, text, sizeof text);
        assert_string_equal(text, "not a cache file\n");
    }
    char link2[300];
    snprintf(link2, sizeof link2, "%s/dangling.bin", f->dir);
    assert_int_equal(symlink(dangling, link2), 0);
    kvc_pool *p = pool_with_host();
    assert_int_equal(kvc_tier_attach_disk(p, link2, SLOTS, 0), KVC_ERR_IO);
    OK(kvc_pool_destroy(p));
    assert_int_equal(access(dangling, F_OK), -1);
    unlink(link);
    unlink(link2);
    unlink(target);
}

/* 2. A regular file that is not a tier file is neither truncated (non-persistent attach) nor
 * extended (persistent attach). */
static void test_foreign_file_is_left_untouched(void **state) {
    disk_fixture *f = (disk_fixture *)*state;
    char text[64];
    write_text(f->path, "someone's data\n");
    for (int persistent = 0; persistent < 2; ++persistent) {
        kvc_pool *p = pool_with_host();
        assert_int_equal(kvc_tier_attach_disk(p, f->path, SLOTS, persistent ? KVC_DISK_PERSISTENT : 0), KVC_ERR_IO);
        assert_non_null(strstr(kvc_last_error(), "not a libkvc disk tier"));
        OK(kvc_pool_destroy(p));
        read_text(f->path, text, sizeof text);
        assert_string_equal(text, "someone's data\n");
    }
    /* A tier file is re-attached fine, persistent or not. */
    unlink(f->path);
    for (int round = 0; round < 3; ++round) {
        kvc_pool *p = pool_with_host();
        OK(kvc_tier_attach_disk(p, f->path, SLOTS, round == 1 ? KVC_DISK_PERSISTENT : 0));
        OK(kvc_pool_destroy(p));
    }
}

/* 4. A sparse file already long enough gets its holes reserved at attach, so that a full file
 * system is reported by the attach rather than by every later spill. */
static void test_sparse_file_space_is_reserved(void **state) {
    disk_fixture *f = (disk_fixture *)*state;
    const int fd = open(f->path, O_RDWR | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 64 << 20), 0);  /* larger than the tier: all hole */
    close(fd);
    struct stat sb;
    assert_int_equal(stat(f->path, &sb), 0);
    assert_true((int64_t)sb.st_blocks * 512 < 4096 * 4);
    kvc_pool *p = pool_with_host();
    OK(kvc_tier_attach_disk(p, f->path, SLOTS, KVC_DISK_PERSISTENT | KVC_DISK_NO_DIRECT));
    assert_int_equal(stat(f->path, &sb), 0);
    /* At least every slot's block bytes are allocated now. */
    assert_true((int64_t)sb.st_blocks * 512 >= (int64_t)SLOTS * TBLOCK_BYTES);
    OK(kvc_pool_destroy(p));
}

/* 4. An attach refused for lack of space leaves no file behind that it created. The file size
 * limit stands in for a full file system (in a child: the limit is per process). */
static void test_refused_attach_leaves_no_file(void **state) {
    disk_fixture *f = (disk_fixture *)*state;
    const pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        signal(SIGXFSZ, SIG_IGN);  /* EFBIG instead of the signal */
        struct rlimit lim = {1024, 1024};
        setrlimit(RLIMIT_FSIZE, &lim);
        kvc_pool *p = tier_pool(8, 1);
        int ok = p && kvc_tier_attach_host(p, 4) == KVC_OK &&
                 kvc_tier_attach_disk(p, f->path, SLOTS, KVC_DISK_NO_DIRECT) == KVC_ERR_IO;
        kvc_pool_destroy(p);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(access(f->path, F_OK), -1);
}

/* 5. A supervisor restarts a SIGKILLed server at once: the new attach must get the file (the
 * dead process's lock may outlive it by a few ms) and find the blocks it had written. */
static void test_restart_right_after_sigkill(void **state) {
    disk_fixture *f = (disk_fixture *)*state;
    for (int round = 0; round < 20; ++round) {
        int ready[2];
        assert_int_equal(pipe(ready), 0);
        const pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
            close(ready[0]);
            kvc_pool *p = tier_pool(8, 1);
            if (!p || kvc_tier_attach_host(p, 4) != KVC_OK ||
                kvc_tier_attach_disk(p, f->path, SLOTS, KVC_DISK_PERSISTENT) != KVC_OK)
                _exit(1);
            /* Disk I/O in flight when killed: io_uring's teardown delays the lock's release. */
            int32_t toks[4 * TBS];
            for (int32_t i = 0; i < 64; ++i) {
                prompt(toks, 4 * TBS, 100 + i);
                if (kvc_alloc(p, 1, toks, 4 * TBS, NULL, NULL) != KVC_OK || kvc_free(p, 1) != KVC_OK) _exit(1);
                if (i == 32 && write(ready[1], "r", 1) != 1) _exit(1);
            }
            for (;;) pause();  /* killed while holding the tier */
        }
        close(ready[1]);
        char c = 0;
        assert_int_equal(read(ready[0], &c, 1), 1);
        close(ready[0]);
        assert_int_equal(kill(child, SIGKILL), 0);
        int status = 0;
        assert_int_equal(waitpid(child, &status, 0), child);
        kvc_pool *p = pool_with_host();
        OK(kvc_tier_attach_disk(p, f->path, SLOTS, KVC_DISK_PERSISTENT));
        OK(kvc_pool_destroy(p));
    }
}

/* 5. A live tier's file is still refused, after the bounded wait. */
static void test_live_tier_is_still_refused(void **state) {
    disk_fixture *f = (disk_fixture *)*state;
    kvc_pool *a = pool_with_host(), *b = pool_with_host();
    OK(kvc_tier_attach_disk(a, f->path, SLOTS, KVC_DISK_PERSISTENT));
    assert_int_equal(kvc_tier_attach_disk(b, f->path, SLOTS, KVC_DISK_PERSISTENT), KVC_ERR_BUSY);
    assert_non_null(strstr(kvc_last_error(), "in use by another disk tier"));
    OK(kvc_pool_destroy(b));
    OK(kvc_pool_destroy(a));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_file_is_created_owner_only, disk_fixture_setup, disk_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_symbolic_links_are_never_followed, disk_fixture_setup,
                                        disk_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_foreign_file_is_left_untouched, disk_fixture_setup, disk_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_sparse_file_space_is_reserved, disk_fixture_setup, disk_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refused_attach_leaves_no_file, disk_fixture_setup, disk_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_restart_right_after_sigkill, disk_fixture_setup, disk_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_live_tier_is_still_refused, disk_fixture_setup, disk_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
