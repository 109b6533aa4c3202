/* Authenticated disk slots (issue [tier-hardening] 3, kvc_tier_attach_disk_keyed). The XXH3
 * framing of a disk slot detects corruption, not forgery: whoever can write the file recomputes it.
 * Shown here as an attacker would do it — rewrite a slot's block bytes, recompute the checksum —
 * against an unkeyed tier (the forged KV is served: what the unauthenticated mode trusts) and a
 * keyed one (a counted miss, never the forged bytes). Also: a keyed round trip across a restart,
 * the key is the tier's own copy, another key / no key recovers nothing (both ways), bad keys and
 * a missing libsodium are refused with the pool and the file unchanged. */
#include <fcntl.h>
#include <sys/stat.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "test_tier_helpers.h"

enum { DEV_BLOCKS = 8, HOST_SLOTS = 4, DISK_SLOTS = 16, NP = 17, FULL_BLOCKS = NP / TBS };

/* Two keys differing in one byte (31 characters + the NUL: 32 bytes each). */
static const uint8_t KEY_A[32] = "libkvc test slot-MAC key A ....";
static const uint8_t KEY_B[32] = "libkvc test slot-MAC key B ....";
#define IDENTITY "model-a@r1"

static int setup(void **state) { return disk_fixture_setup(state); }
static int teardown(void **state) {
    kvct_sodium_library(NULL);
    return disk_fixture_teardown(state);
}

/* A pool with a host tier and a persistent disk tier on `path`, keyed with `key` (32 bytes), or
 * unkeyed (same identity) when key is NULL. */
static kvc_pool *open_tier(const char *path, const uint8_t *key) {
    kvc_pool *p = tier_pool(DEV_BLOCKS, 1);
    OK(kvc_tier_attach_host(p, HOST_SLOTS));
    if (key) OK(kvc_tier_attach_disk_keyed(p, path, DISK_SLOTS, KVC_DISK_PERSISTENT, IDENTITY, key, 32));
    else OK(kvc_tier_attach_disk_with_identity(p, path, DISK_SLOTS, KVC_DISK_PERSISTENT, IDENTITY));
    return p;
}

/* Caches prompt P's 4 full blocks holding pattern(seed, i) and writes them to the disk tier. */
static void write_prompt(kvc_pool *p, const int32_t *P, uint32_t seed) {
    alloc_free(p, 1, P, NP, KVC_PRIORITY_DEFAULT, seed);
    int64_t queued = 0;
    OK(kvc_tier_flush(p, &queued));
    assert_int_equal(queued, FULL_BLOCKS);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).io_errors, 0);
}

/* A fresh pool attached to the file (keyed with `key` or not) must recover `recovered` blocks and
 * count `foreign` ones; an allocation of P then finds `recovered` blocks cached. Returns the pool
 * with P allocated as sequence 9. */
static kvc_pool *reopen(const char *path, const uint8_t *key, const int32_t *P, int64_t recovered, int64_t foreign) {
    kvc_pool *p = open_tier(path, key);
    const kvc_tier_stats k = tier_stats(p, KVC_TIER_DISK);
    assert_int_equal(k.recovered_blocks, recovered);
    assert_int_equal(k.foreign_blocks, foreign);
    int64_t cached = -1;
    OK(kvc_alloc(p, 9, P, NP, NULL, &cached));
    assert_int_equal(cached, recovered * TBS);
    CHECK_POOL(p);
    return p;
}

/* Written, pool destroyed, re-attached with the same key: hits, with the bytes written. The key
 * buffer is wiped right after the attach: the tier MACs with its own copy. */
static void test_keyed_round_trip(void **state) {
    disk_fixture *f = *state;
    int32_t P[NP];
    prompt(P, NP, 1);
    uint8_t key[32];
    memcpy(key, KEY_A, sizeof key);
    kvc_pool *p = open_tier(f->path, key);
    memset(key, 0, sizeof key);
    write_prompt(p, P, 41);
    OK(kvc_pool_destroy(p));

    p = reopen(f->path, KEY_A, P, FULL_BLOCKS, 0);
    expect_blocks(p, 9, FULL_BLOCKS, 41);
    const kvc_tier_stats k = tier_stats(p, KVC_TIER_DISK);
    assert_int_equal(k.hits, FULL_BLOCKS);
    assert_int_equal(k.checksum_failures, 0);
    OK(kvc_pool_destroy(p));
}

/* The attacker's side of the file format: a mirror of DiskHeader in lib/tier/disk.cpp. If the
 * format changes, the unkeyed half of test_forged_slot fails (the forgery no longer lands) and
 * this mirror needs the change too. */
typedef struct disk_header {
    uint64_t magic;
    uint32_t version;
    int32_t block_size;
    uint64_t layout_fingerprint, stamp, hash_hi, hash_lo, parent_hi, parent_lo, lora_id, extras_digest;
    int32_t priority, slot;
    int64_t block_bytes;
    uint64_t header_check; /* XXH3-64 of the header (both checks 0) and its token ids */
    uint64_t checksum;     /* XXH3-64 of the block bytes seeded with header_check */
} disk_header;

enum { DATA_REGION = 4096 }; /* a 1024-byte block's data region, rounded to 4 KiB */

/* Rewrites every slot's block bytes with `fill` and recomputes its XXH3 framing, as anyone who can
 * write the file can. Returns the slots forged. */
static int forge_slots(const char *path, unsigned char fill) {
    const int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    struct stat sb;
    assert_int_equal(fstat(fd, &sb), 0);
    const off_t slot_bytes = sb.st_size / DISK_SLOTS, header_bytes = slot_bytes - DATA_REGION;
    unsigned char block[TBLOCK_BYTES];
    memset(block, fill, sizeof block);
    int forged = 0;
    for (int s = 0; s < DISK_SLOTS; ++s) {
        disk_header h;
        assert_int_equal(pread(fd, &h, sizeof h, (off_t)s * slot_bytes), (ssize_t)sizeof h);
        if (h.magic != 0x3152454954435653ull || h.slot != s) continue; /* "SVCTIER1": a written slot */
        h.checksum = XXH3_64bits_withSeed(block, sizeof block, h.header_check);
        assert_int_equal(pwrite(fd, block, sizeof block, (off_t)s * slot_bytes + header_bytes), (ssize_t)sizeof block);
        assert_int_equal(pwrite(fd, &h, sizeof h, (off_t)s * slot_bytes), (ssize_t)sizeof h);
        ++forged;
    }
    close(fd);
    return forged;
}

/* Asserts that every block of sequence `seq` holds `fill` bytes. */
static void expect_filled(kvc_pool *p, uint64_t seq, unsigned char fill) {
    int32_t table[64];
    assert_true(tier_table(p, seq, table) >= FULL_BLOCKS);
    unsigned char want[TBLOCK_BYTES], got[TBLOCK_BYTES];
    memset(want, fill, sizeof want);
    for (int i = 0; i < FULL_BLOCKS; ++i) {
        OK(kvc_storage_copy_blocks(p, &table[i], 1, got, 1));
        assert_memory_equal(want, got, TBLOCK_BYTES);
    }
}

/* A slot whose bytes an attacker rewrote (XXH3 framing recomputed): served as a hit by an unkeyed
 * tier — the forged KV reaches attention —, a counted miss for a keyed one, erased from the file. */
static void test_forged_slot(void **state) {
    disk_fixture *f = *state;
    int32_t P[NP];
    prompt(P, NP, 2);
    for (int keyed = 0; keyed < 2; ++keyed) {
        const uint8_t *key = keyed ? KEY_A : NULL;
        unlink(f->path); /* each round on a fresh file */
        kvc_pool *p = open_tier(f->path, key);
        write_prompt(p, P, 43);
        OK(kvc_pool_destroy(p));
        assert_int_equal(forge_slots(f->path, 0xEE), FULL_BLOCKS);

        p = open_tier(f->path, key);
        assert_int_equal(tier_stats(p, KVC_TIER_DISK).recovered_blocks, FULL_BLOCKS); /* headers only */
        int64_t cached = -1;
        OK(kvc_alloc(p, 9, P, NP, NULL, &cached));
        const kvc_tier_stats k = tier_stats(p, KVC_TIER_DISK);
        if (!keyed) {
            assert_int_equal(cached, FULL_BLOCKS * TBS);
            expect_filled(p, 9, 0xEE); /* the attacker's KV */
        } else {
            assert_int_equal(cached, 0);
            assert_int_equal(k.checksum_failures, FULL_BLOCKS);
            assert_int_equal(k.failures, FULL_BLOCKS);
            assert_int_equal(k.hits, 0);
        }
        CHECK_POOL(p);
        OK(kvc_pool_destroy(p));
    }
    /* The keyed tier erased the forged slots: the next attach does not even index them. */
    kvc_pool *p = reopen(f->path, KEY_A, P, 0, 0);
    OK(kvc_pool_destroy(p));
}

/* Another key, no key, or the same key under another identity recovers none of the keyed slots
 * (they are foreign, never hits) and leaves them alone: the right key still finds them. And the
 * other way: an unkeyed file's slots are foreign to a keyed tier. */
static void test_other_key_recovers_nothing(void **state) {
    disk_fixture *f = *state;
    int32_t P[NP];
    prompt(P, NP, 3);
    kvc_pool *p = open_tier(f->path, KEY_A);
    write_prompt(p, P, 45);
    OK(kvc_pool_destroy(p));

    OK(kvc_pool_destroy(reopen(f->path, KEY_B, P, 0, FULL_BLOCKS)));
    OK(kvc_pool_destroy(reopen(f->path, NULL, P, 0, FULL_BLOCKS)));
    p = tier_pool(DEV_BLOCKS, 1);
    OK(kvc_tier_attach_host(p, HOST_SLOTS));
    OK(kvc_tier_attach_disk_keyed(p, f->path, DISK_SLOTS, KVC_DISK_PERSISTENT, "model-b@r1", KEY_A, 32));
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).recovered_blocks, 0);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).foreign_blocks, FULL_BLOCKS);
    OK(kvc_pool_destroy(p));
    p = reopen(f->path, KEY_A, P, FULL_BLOCKS, 0);
    expect_blocks(p, 9, FULL_BLOCKS, 45);
    OK(kvc_pool_destroy(p));

    unlink(f->path);
    p = open_tier(f->path, NULL);
    write_prompt(p, P, 46);
    OK(kvc_pool_destroy(p));
    OK(kvc_pool_destroy(reopen(f->path, KEY_A, P, 0, FULL_BLOCKS)));
    OK(kvc_pool_destroy(reopen(f->path, NULL, P, FULL_BLOCKS, 0)));
}

/* After a refused attach: no disk tier, and no file created. */
static void expect_no_disk_tier(kvc_pool *p, const char *path) {
    assert_non_null(strstr(kvc_last_error(), "kvc_tier_attach_disk_keyed"));
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).capacity_blocks, 0);
    struct stat sb;
    assert_int_not_equal(stat(path, &sb), 0);
}

#define EXPECT_REFUSED(p, path, call, code)      \
    do {                                         \
        EXPECT_ERR_UNCHANGED(p, call, code);     \
        expect_no_disk_tier(p, path);            \
    } while (0)

/* A key shorter than KVC_DISK_KEY_MIN_LEN or longer than KVC_DISK_KEY_MAX_LEN, or NULL, is refused
 * before the file is touched; both limits are taken. */
static void test_bad_key_is_refused(void **state) {
    disk_fixture *f = *state;
    uint8_t key[KVC_DISK_KEY_MAX_LEN + 1];
    memset(key, 0x5a, sizeof key);
    kvc_pool *p = tier_pool(DEV_BLOCKS, 1);
    OK(kvc_tier_attach_host(p, HOST_SLOTS));
    const int64_t bad_lengths[] = {KVC_DISK_KEY_MIN_LEN - 1, KVC_DISK_KEY_MAX_LEN + 1, 0, -1, INT64_MIN};
    for (size_t i = 0; i < sizeof bad_lengths / sizeof bad_lengths[0]; ++i)
        EXPECT_REFUSED(p, f->path, kvc_tier_attach_disk_keyed(p, f->path, DISK_SLOTS, 0, NULL, key, bad_lengths[i]),
                       KVC_ERR_INVALID_ARG);
    EXPECT_REFUSED(p, f->path, kvc_tier_attach_disk_keyed(p, f->path, DISK_SLOTS, 0, NULL, NULL, 32), KVC_ERR_NULL_ARG);
    EXPECT_REFUSED(p, f->path, kvc_tier_attach_disk_keyed(p, f->path, DISK_SLOTS, 0, NULL, NULL, 0), KVC_ERR_NULL_ARG);
    OK(kvc_tier_attach_disk_keyed(p, f->path, DISK_SLOTS, 0, NULL, key, KVC_DISK_KEY_MIN_LEN));
    OK(kvc_pool_destroy(p));
    p = tier_pool(DEV_BLOCKS, 1);
    OK(kvc_tier_attach_host(p, HOST_SLOTS));
    OK(kvc_tier_attach_disk_keyed(p, f->path, DISK_SLOTS, 0, NULL, key, KVC_DISK_KEY_MAX_LEN));
    OK(kvc_pool_destroy(p));
}

/* Without libsodium a keyed attach fails with KVC_ERR_UNSUPPORTED and a message saying what to
 * install, pool and file unchanged — never an unauthenticated tier. Once it can load, the same
 * pool attaches. */
static void test_missing_libsodium_is_refused(void **state) {
    disk_fixture *f = *state;
    kvc_pool *p = tier_pool(DEV_BLOCKS, 1);
    OK(kvc_tier_attach_host(p, HOST_SLOTS));
    kvct_sodium_library("libkvc-test-no-such-sodium.so.0");
    EXPECT_REFUSED(p, f->path, kvc_tier_attach_disk_keyed(p, f->path, DISK_SLOTS, 0, NULL, KEY_A, 32),
                   KVC_ERR_UNSUPPORTED);
    assert_non_null(strstr(kvc_last_error(), "libsodium23"));
    /* A library without the entry points is refused the same way. */
    kvct_sodium_library("libc.so.6");
    EXPECT_REFUSED(p, f->path, kvc_tier_attach_disk_keyed(p, f->path, DISK_SLOTS, 0, NULL, KEY_A, 32),
                   KVC_ERR_UNSUPPORTED);
    kvct_sodium_library(NULL);
    OK(kvc_tier_attach_disk_keyed(p, f->path, DISK_SLOTS, 0, NULL, KEY_A, 32));
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_keyed_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forged_slot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_key_recovers_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_key_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_libsodium_is_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
