/* Shared helpers of the memory-tier suites (test_tier*.c). Header-only. */
#ifndef KVC_TEST_TIER_HELPERS_H
#define KVC_TEST_TIER_HELPERS_H

#include <stdlib.h>
#include <unistd.h>

#include "test_pool_helpers.h"

/* CPU pool, block_size 4, 2 layers, 2 KV heads, head_dim 8, F32: 1024-byte blocks. */
enum { TBS = 4, TBLOCK_BYTES = 1024 };

/* CPU pool, block_size 4, 2 layers, 2 KV heads, of the given head_dim and dtype; *block_bytes
 * receives kvc_bytes_per_block of its configuration. */
static inline kvc_pool *tier_pool_shaped(int64_t num_blocks, int caching, int32_t head_dim, int32_t dtype,
                                         int64_t *block_bytes) {
    kvc_pool_config cfg;
    OK(kvc_pool_config_default(&cfg));
    cfg.block_size = TBS;
    cfg.num_layers = 2;
    cfg.num_kv_heads = 2;
    cfg.head_dim = head_dim;
    cfg.kv_dtype = dtype;
    cfg.num_blocks = num_blocks;
    cfg.prefix_caching = caching;
    cfg.watermark = 0.0;
    cfg.backend = KVC_BACKEND_CPU;
    kvc_pool *p = NULL;
    OK(kvc_pool_create(&cfg, &p));
    OK(kvc_bytes_per_block(&cfg, block_bytes));
    return p;
}

static inline kvc_pool *tier_pool(int64_t num_blocks, int caching) {
    int64_t bytes = 0;
    kvc_pool *p = tier_pool_shaped(num_blocks, caching, 8, KVC_DTYPE_F32, &bytes);
    assert_int_equal(bytes, TBLOCK_BYTES);
    return p;
}

static inline kvc_tier_stats tier_stats(kvc_pool *p, int32_t tier) {
    kvc_tier_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    OK(kvc_tier_get_stats(p, tier, &s));
    return s;
}

/* Block table of a sequence (at most 64 blocks); returns its length. */
static inline int64_t tier_table(kvc_pool *p, uint64_t seq, int32_t *out) {
    int64_t n = 0;
    OK(kvc_seq_block_table(p, seq, out, 64, &n));
    return n;
}

/* Deterministic bytes for (seed, block index). */
static inline void pattern(unsigned char *buf, uint32_t seed, int64_t index) {
    uint32_t x = seed * 2654435761u + (uint32_t)index * 40503u + 1u;
    for (int i = 0; i < TBLOCK_BYTES; ++i) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        buf[i] = (unsigned char)x;
    }
}

/* Writes pattern(seed, i) into the sequence's first n blocks. */
static inline void write_blocks(kvc_pool *p, uint64_t seq, int64_t n, uint32_t seed) {
    int32_t table[64];
    assert_true(tier_table(p, seq, table) >= n);
    unsigned char buf[TBLOCK_BYTES];
    for (int64_t i = 0; i < n; ++i) {
        pattern(buf, seed, i);
        OK(kvc_storage_copy_blocks(p, &table[i], 1, buf, 0));
    }
}

/* Asserts the sequence's first n blocks hold pattern(seed, i). */
static inline void expect_blocks(kvc_pool *p, uint64_t seq, int64_t n, uint32_t seed) {
    int32_t table[64];
    assert_true(tier_table(p, seq, table) >= n);
    unsigned char want[TBLOCK_BYTES], got[TBLOCK_BYTES];
    for (int64_t i = 0; i < n; ++i) {
        pattern(want, seed, i);
        OK(kvc_storage_copy_blocks(p, &table[i], 1, got, 1));
        assert_memory_equal(want, got, TBLOCK_BYTES);
    }
}

/* Tokens of prompt `id`: distinct per id and position. */
static inline void prompt(int32_t *tokens, int64_t n, int32_t id) {
    for (int64_t i = 0; i < n; ++i) tokens[i] = id * 1000 + (int32_t)i;
}

static inline void lookup_tiers(kvc_pool *p, const int32_t *tokens, int64_t n, int64_t *dev, int64_t *host,
                                int64_t *disk) {
    OK(kvc_prefix_lookup_tiers(p, tokens, n, NULL, dev, host, disk));
}

/* Allocates and frees `count` sequences of TBS - 1 tokens (one uncached block each) at once:
 * forces `count` fresh blocks to be taken, evicting cached ones once the unhashed list is empty. */
static inline void churn(kvc_pool *p, int32_t count, uint64_t first_id) {
    int32_t toks[TBS];
    for (int32_t i = 0; i < count; ++i) {
        prompt(toks, TBS - 1, 900000 + i);
        OK(kvc_alloc(p, first_id + (uint64_t)i, toks, TBS - 1, NULL, NULL));
    }
    for (int32_t i = 0; i < count; ++i) OK(kvc_free(p, first_id + (uint64_t)i));
}

/* Allocates a prompt with a priority and frees it: its full blocks stay cached (refcount 0). */
static inline void alloc_free(kvc_pool *p, uint64_t id, const int32_t *tokens, int64_t n, int32_t priority,
                              uint32_t seed) {
    kvc_keys *k = NULL;
    OK(kvc_keys_create(&k));
    OK(kvc_keys_set_priority(k, priority));
    OK(kvc_alloc(p, id, tokens, n, k, NULL));
    write_blocks(p, id, n / TBS, seed);
    OK(kvc_free(p, id));
    OK(kvc_keys_destroy(k));
}

/* A fresh temporary directory and a file path inside it. */
static inline void temp_path(char *dir, size_t dir_cap, char *path, size_t path_cap, const char *name) {
    snprintf(dir, dir_cap, "/tmp/kvc_tier_test_XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, path_cap, "%s/%s", dir, name);
}

/* CMocka state of the disk-tier suites: a fresh temporary directory with one file path in it, and
 * the disk fault hooks cleared around each test. */
typedef struct disk_fixture {
    char dir[128];
    char path[256];
} disk_fixture;

static inline int disk_fixture_setup(void **state) {
    disk_fixture *f = (disk_fixture *)calloc(1, sizeof *f);
    temp_path(f->dir, sizeof f->dir, f->path, sizeof f->path, "tier.bin");
    kvct_disk_fault(KVCT_FAULT_NONE, 0);
    kvct_disk_force_sync_io(0);
    *state = f;
    return 0;
}

static inline int disk_fixture_teardown(void **state) {
    disk_fixture *f = (disk_fixture *)*state;
    kvct_disk_fault(KVCT_FAULT_NONE, 0);
    kvct_disk_force_sync_io(0);
    unlink(f->path);
    rmdir(f->dir);
    free(f);
    return 0;
}

#endif /* KVC_TEST_TIER_HELPERS_H */
