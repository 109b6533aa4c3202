/* Persistent disk tier, randomized: seeded rounds of pool create -> attach the same file -> random
 * allocs / frees / churn / swaps / forks / appends -> destroy, with the file kept across rounds.
 * Every block's bytes are a pure function of its tokens (and the layout), so any block the pool
 * hands back — from the device, the host tier, or a file written by an earlier pool — is checked.
 * Between rounds the file is sometimes re-attached without KVC_DISK_PERSISTENT (truncated: nothing
 * recovered), by a pool of another layout (nothing of this layout trusted), or damaged at random
 * offsets while no pool has it open (damaged blocks are counted misses, never wrong bytes). A
 * clean persistent re-attach must recover exactly the disk blocks cached when the last pool of the
 * same layout was destroyed, and the prompts whose chain was all on disk must find it there again. */
#include <fcntl.h>
#include <sys/stat.h>

#include "test_tier_helpers.h"

enum {
    NUM_LAYOUTS = 3,    /* 0: tier_pool's shape; 1: head_dim 16; 2: F16 */
    MAX_BLOCK_BYTES = 2048,
    MAX_TOKENS = 32,    /* per sequence: 8 blocks */
    MAX_SEQS = 8,
    NUM_FAMILIES = 4,
    NUM_VARIANTS = 3,
    NUM_PROBES = NUM_FAMILIES * NUM_VARIANTS,
    PROBE_TOKENS = 17,  /* 4 full blocks + 1 token */
    ROUNDS = 20,
    OPS_PER_ROUND = 60,
};

/* ---- deterministic randomness ---------------------------------------------------------------- */

static uint64_t rng_state;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

/* ---- block contents as a function of tokens -------------------------------------------------- */

static const int32_t layout_head_dim[NUM_LAYOUTS] = {8, 16, 8};
static const int32_t layout_dtype[NUM_LAYOUTS] = {KVC_DTYPE_F32, KVC_DTYPE_F32, KVC_DTYPE_F16};
static const int64_t layout_block_bytes[NUM_LAYOUTS] = {1024, 2048, 512};

/* The bytes a block holding tokens[0..n) of a sequence (the block's own tokens are the last ones,
 * n - (n - 1) % TBS - 1 .. n) must contain: keyed by the whole prefix, so a block reached through
 * another parent differs, and by the layout, so a block of another layout read back differs. */
static void expected_bytes(unsigned char *buf, int layout, const int32_t *tokens, int64_t n) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)layout * 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < n; ++i) {
        h ^= (uint32_t)tokens[i];
        h *= 1099511628211ull;
    }
    h ^= (uint64_t)n << 40;
    uint64_t x = h | 1u;
    for (int64_t i = 0; i < layout_block_bytes[layout]; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (unsigned char)(x >> 24);
    }
}

/* ---- the model ------------------------------------------------------------------------------- */

typedef struct seq_model {
    uint64_t id;
    int64_t n;
    int32_t tokens[MAX_TOKENS];
    int swapped;
} seq_model;

typedef struct world {
    char dir[128];
    char path[256];
    int32_t disk_slots;
    /* Per layout: disk blocks cached when its last pool was destroyed (an upper bound on what a
     * persistent attach of that layout can recover), and whether that bound is exact (no other
     * layout wrote to the file since, no damage, no freed-but-valid slot left behind). */
    int64_t bound[NUM_LAYOUTS];
    int exact[NUM_LAYOUTS];
    int dirty; /* damaged since the file was last truncated */
    /* Probe prompts' lookup at the last destroy of a layout-0 pool. */
    int64_t probe_dev[NUM_PROBES], probe_host[NUM_PROBES], probe_disk[NUM_PROBES];
    int probes_valid;
    /* The current round. */
    kvc_pool *p;
    int layout;
    int32_t dev_blocks, host_slots;
    seq_model seqs[MAX_SEQS];
    int nseqs;
    uint64_t next_id;
    uint32_t next_filler;
    int64_t ops, disk_restores, checksum_misses, exact_recoveries, bounded_recoveries, recovered, chains_refound, damages;
} world;

static void family_prompt(int32_t *tokens, int64_t n, int family, int variant, int64_t shared) {
    for (int64_t i = 0; i < n; ++i)
        tokens[i] = i < shared ? 1000 * (family + 1) + (int32_t)i
                               : 100000 + 10000 * family + 1000 * variant + (int32_t)i;
}

static void probe_prompt(int32_t *tokens, int probe) {
    family_prompt(tokens, PROBE_TOKENS, probe / NUM_VARIANTS, probe % NUM_VARIANTS, 8);
}

/* ---- byte checks ----------------------------------------------------------------------------- */

static void write_block(world *w, int32_t block, const int32_t *tokens, int64_t n) {
    unsigned char buf[MAX_BLOCK_BYTES];
    expected_bytes(buf, w->layout, tokens, n);
    OK(kvc_storage_copy_blocks(w->p, &block, 1, buf, 0));
}

static void check_block(world *w, int32_t block, const int32_t *tokens, int64_t n, const char *what) {
    unsigned char want[MAX_BLOCK_BYTES], got[MAX_BLOCK_BYTES];
    expected_bytes(want, w->layout, tokens, n);
    OK(kvc_storage_copy_blocks(w->p, &block, 1, got, 1));
    if (memcmp(want, got, (size_t)layout_block_bytes[w->layout]) != 0) {
        print_error("%s: block %d (tokens 0..%lld, layout %d) holds wrong bytes\n", what, block, (long long)n,
                    w->layout);
        fail();
    }
}

/* Block i of a sequence of n tokens holds tokens 0 .. min(n, (i + 1) * TBS). */
static int64_t prefix_end(int64_t i, int64_t n) { return (i + 1) * TBS < n ? (i + 1) * TBS : n; }

static void check_seq(world *w, const seq_model *s) {
    int32_t table[64];
    const int64_t len = tier_table(w->p, s->id, table);
    assert_int_equal(len, (s->n + TBS - 1) / TBS);
    for (int64_t i = 0; i < len; ++i) check_block(w, table[i], s->tokens, prefix_end(i, s->n), "live sequence");
}

/* Writes the sequence's blocks from block `first` on (the caller's prefill / decode). */
static void write_seq_from(world *w, const seq_model *s, int64_t first) {
    int32_t table[64];
    const int64_t len = tier_table(w->p, s->id, table);
    for (int64_t i = first; i < len; ++i) write_block(w, table[i], s->tokens, prefix_end(i, s->n));
}

static void check_all(world *w) {
    for (int i = 0; i < w->nseqs; ++i)
        if (!w->seqs[i].swapped) check_seq(w, &w->seqs[i]);
}

static kvc_tier_stats disk_stats(world *w) { return tier_stats(w->p, KVC_TIER_DISK); }

/* Invariants of every step: consistent pool, no I/O errors (none injected), every disk failure a
 * checksum failure, and none at all on an undamaged file. */
static void check_step(world *w) {
    CHECK_POOL(w->p);
    const kvc_tier_stats d = disk_stats(w);
    assert_int_equal(d.io_errors, 0);
    assert_int_equal(d.failures, d.checksum_failures);
    if (!w->dirty) assert_int_equal(d.checksum_failures, 0);
    ++w->ops;
}

/* ---- operations ------------------------------------------------------------------------------ */

static seq_model *pick_seq(world *w, int want_swapped) {
    int idx[MAX_SEQS], k = 0;
    for (int i = 0; i < w->nseqs; ++i)
        if (want_swapped < 0 || w->seqs[i].swapped == want_swapped) idx[k++] = i;
    return k ? &w->seqs[idx[rnd((uint32_t)k)]] : NULL;
}

static void drop_seq(world *w, seq_model *s) {
    *s = w->seqs[--w->nseqs];
}

/* Allocates a prompt; the blocks it reports cached must hold their tokens' bytes, the rest are
 * written. Returns the cached token count, or -1 when refused for lack of blocks. */
static int64_t alloc_prompt(world *w, const int32_t *tokens, int64_t n) {
    if (w->nseqs == MAX_SEQS) return -1;
    int64_t dev = -1, host = -1, disk = -1, all = -1;
    lookup_tiers(w->p, tokens, n, &dev, &host, &disk);
    OK(kvc_prefix_lookup(w->p, tokens, n, NULL, &all));
    assert_int_equal(dev + host + disk, all); /* no sliding window: the split covers the hit */
    int64_t first_disk = 0; /* block 0's tier: on disk? */
    if (n > TBS) lookup_tiers(w->p, tokens, TBS + 1, NULL, NULL, &first_disk);
    int held = 0;
    for (int i = 0; i < w->nseqs; ++i) held |= w->seqs[i].swapped;
    const kvc_tier_stats before = disk_stats(w);

    kvc_keys *k = NULL;
    OK(kvc_keys_create(&k));
    OK(kvc_keys_set_priority(k, (int32_t)rnd(101)));
    seq_model *s = &w->seqs[w->nseqs];
    s->id = w->next_id++;
    int64_t cached = -1;
    const kvc_status st = kvc_alloc(w->p, s->id, tokens, n, k, &cached);
    OK(kvc_keys_destroy(k));
    const kvc_tier_stats after = disk_stats(w);
    const int64_t misses = after.checksum_failures - before.checksum_failures;
    w->checksum_misses += misses;
    if (st == KVC_ERR_OUT_OF_BLOCKS) return -1;
    OK(st);
    ++w->nseqs;
    s->n = n;
    s->swapped = 0;
    memcpy(s->tokens, tokens, (size_t)n * sizeof *tokens);

    assert_int_equal(cached % TBS, 0);
    assert_true(cached <= all);
    /* A bad disk block ends the hit there. With no host slot held by a swapped sequence, the
     * prompt's disk hits come up through the host slots its own host hits leave (one each), so
     * the whole hit is taken when they all fit; otherwise at least its first block, unless that
     * one is on disk and the prompt's host hits fill the host tier. */
    if (misses > 0) assert_true(cached < all);
    if (!held && misses == 0) {
        if ((host + disk) / TBS <= w->host_slots) assert_int_equal(cached, all);
        else if (first_disk == 0 || host / TBS < w->host_slots) assert_true(cached >= TBS);
    }
    w->disk_restores += after.blocks_out - before.blocks_out;

    int32_t table[64];
    const int64_t len = tier_table(w->p, s->id, table);
    assert_int_equal(len, (n + TBS - 1) / TBS);
    for (int64_t i = 0; i < cached / TBS; ++i) check_block(w, table[i], tokens, prefix_end(i, n), "prefix hit");
    write_seq_from(w, s, cached / TBS);
    return cached;
}

static void op_alloc(world *w) {
    int32_t tokens[MAX_TOKENS];
    const int64_t n = 1 + rnd(20);
    family_prompt(tokens, n, (int)rnd(NUM_FAMILIES), (int)rnd(NUM_VARIANTS), (int64_t)rnd(3) * 2 * TBS);
    (void)alloc_prompt(w, tokens, n);
}

static void op_probe_alloc(world *w) {
    int32_t tokens[PROBE_TOKENS];
    probe_prompt(tokens, (int)rnd(NUM_PROBES));
    (void)alloc_prompt(w, tokens, PROBE_TOKENS);
}

static void op_free(world *w) {
    seq_model *s = pick_seq(w, -1);
    if (!s) return;
    OK(kvc_free(w->p, s->id));
    drop_seq(w, s);
}

/* Unhashed one-block sequences taken at once: pushes cached device blocks down the tiers. */
static void op_churn(world *w) {
    const uint64_t first = w->next_id;
    int32_t toks[TBS - 1];
    int32_t taken = 0;
    const int32_t want = 1 + (int32_t)rnd((uint32_t)w->dev_blocks);
    for (; taken < want; ++taken) {
        for (int j = 0; j < TBS - 1; ++j) toks[j] = 900000 + (int32_t)w->next_filler++;
        const kvc_status st = kvc_alloc(w->p, first + (uint64_t)taken, toks, TBS - 1, NULL, NULL);
        if (st == KVC_ERR_OUT_OF_BLOCKS) break;
        OK(st);
    }
    w->next_id += (uint64_t)want;
    for (int32_t i = 0; i < taken; ++i) OK(kvc_free(w->p, first + (uint64_t)i));
}

/* Cached prompts of fresh tokens, allocated and freed: fill the device and host with new blocks so
 * that older ones go down to the disk. */
static void op_filler(world *w, int32_t blocks) {
    int32_t toks[MAX_TOKENS];
    while (blocks > 0) {
        int32_t b = blocks < w->dev_blocks - 1 ? blocks : w->dev_blocks - 1;
        if (b > MAX_TOKENS / TBS - 1) b = MAX_TOKENS / TBS - 1;
        const int64_t n = (int64_t)b * TBS + 1;
        for (int64_t j = 0; j < n; ++j) toks[j] = 500000 + (int32_t)w->next_filler++;
        if (alloc_prompt(w, toks, n) < 0) return;
        OK(kvc_free(w->p, w->seqs[w->nseqs - 1].id));
        drop_seq(w, &w->seqs[w->nseqs - 1]);
        check_step(w);
        blocks -= b;
    }
}

static void op_swap_out(world *w) {
    seq_model *s = pick_seq(w, 0);
    if (!s) return;
    const kvc_status st = kvc_swap_out(w->p, s->id, NULL);
    if (st == KVC_ERR_OUT_OF_BLOCKS) return;
    OK(st);
    s->swapped = 1;
}

static void op_swap_in(world *w) {
    seq_model *s = pick_seq(w, 1);
    if (!s) return;
    const kvc_status st = kvc_swap_in(w->p, s->id, NULL);
    if (st == KVC_ERR_OUT_OF_BLOCKS) return;
    OK(st);
    s->swapped = 0;
    check_seq(w, s);
}

static void op_fork(world *w) {
    seq_model *s = pick_seq(w, 0);
    if (!s || w->nseqs == MAX_SEQS) return;
    seq_model *c = &w->seqs[w->nseqs];
    *c = *s;
    c->id = w->next_id++;
    OK(kvc_fork(w->p, s->id, c->id));
    ++w->nseqs;
}

static void op_append(world *w) {
    seq_model *s = pick_seq(w, 0);
    if (!s) return;
    int64_t add = 1 + rnd(6);
    if (s->n + add > MAX_TOKENS) add = MAX_TOKENS - s->n;
    if (add <= 0) return;
    int32_t toks[MAX_TOKENS];
    const int repeatable = rnd(2) == 0; /* same tokens at the same position: later prompts can hit them */
    for (int64_t j = 0; j < add; ++j)
        toks[j] = repeatable ? 300000 + s->tokens[0] % 1000 * 100 + (int32_t)(s->n + j)
                             : 400000 + (int32_t)w->next_filler++;
    const kvc_status st = kvc_append(w->p, s->id, toks, add, 0, NULL);
    if (st == KVC_ERR_OUT_OF_BLOCKS) return;
    OK(st);
    OK(kvc_copy_pending(w->p, NULL, NULL)); /* copy-on-write first, then this step's KV */
    const int64_t first = s->n / TBS;
    memcpy(s->tokens + s->n, toks, (size_t)add * sizeof *toks);
    s->n += add;
    write_seq_from(w, s, first);
}

static void op_lookup(world *w) {
    int32_t tokens[PROBE_TOKENS];
    probe_prompt(tokens, (int)rnd(NUM_PROBES));
    int64_t dev = -1, host = -1, disk = -1, all = -1;
    lookup_tiers(w->p, tokens, PROBE_TOKENS, &dev, &host, &disk);
    OK(kvc_prefix_lookup(w->p, tokens, PROBE_TOKENS, NULL, &all));
    assert_int_equal(dev + host + disk, all);
}

static void random_op(world *w) {
    switch (rnd(12)) {
    case 0: case 1: op_alloc(w); break;
    case 2: op_probe_alloc(w); break;
    case 3: case 4: op_free(w); break;
    case 5: op_churn(w); break;
    case 6: op_swap_out(w); break;
    case 7: op_swap_in(w); break;
    case 8: op_fork(w); break;
    case 9: case 10: op_append(w); break;
    default: op_lookup(w); break;
    }
    check_step(w);
    if (rnd(4) == 0) check_all(w);
}

/* ---- rounds ---------------------------------------------------------------------------------- */

static kvc_pool *layout_pool(int layout, int32_t dev_blocks) {
    int64_t bytes = 0;
    kvc_pool *p = tier_pool_shaped(dev_blocks, 1, layout_head_dim[layout], layout_dtype[layout], &bytes);
    assert_int_equal(bytes, layout_block_bytes[layout]);
    return p;
}

/* Flips bytes of the file while no pool has it open: some anywhere (mostly padding), some in a
 * slot's header fields or block bytes (the first header_bytes of a slot are its header, the rest
 * its block bytes, both padded to 4096 — an assumption about the file format, as in
 * test_tier_disk.c). */
static void damage_file(world *w) {
    const int fd = open(w->path, O_RDWR);
    assert_true(fd >= 0);
    struct stat sb;
    assert_int_equal(fstat(fd, &sb), 0);
    const off_t slot_bytes = sb.st_size / w->disk_slots;
    const off_t data_at = slot_bytes - 4096;
    const int flips = 1 + (int)rnd(8);
    int header_hit = 0;
    for (int i = 0; i < flips; ++i) {
        off_t at;
        switch (rnd(4)) {
        case 0: at = (off_t)rnd((uint32_t)sb.st_size); break;
        case 1: at = (off_t)rnd((uint32_t)w->disk_slots) * slot_bytes + (off_t)rnd(96); break;
        default:
            at = (off_t)rnd((uint32_t)w->disk_slots) * slot_bytes + data_at + (off_t)rnd(MAX_BLOCK_BYTES / 4);
            break;
        }
        header_hit |= at % slot_bytes < data_at;
        unsigned char c = 0;
        assert_int_equal(pread(fd, &c, 1, at), 1);
        c ^= (unsigned char)(1u << rnd(8));
        assert_int_equal(pwrite(fd, &c, 1, at), 1);
    }
    assert_int_equal(close(fd), 0);
    w->dirty = 1;
    /* Damaged headers are not re-indexed (fewer recovered); damaged block bytes leave every header
     * valid, so the count stays exact and the damage shows when the bytes are read. */
    if (header_hit)
        for (int l = 0; l < NUM_LAYOUTS; ++l) w->exact[l] = 0;
    ++w->damages;
}

enum { ROUND_PERSISTENT, ROUND_TRUNCATE, ROUND_OTHER_LAYOUT, ROUND_DAMAGED };

static void run_round(world *w, int kind) {
    if (kind == ROUND_DAMAGED) damage_file(w);
    w->layout = kind == ROUND_OTHER_LAYOUT ? 1 + (int)rnd(NUM_LAYOUTS - 1) : 0;
    w->dev_blocks = 6 + (int32_t)rnd(7);
    w->host_slots = 1 + (int32_t)rnd(4);
    w->nseqs = 0;
    const int persistent = kind != ROUND_TRUNCATE;
    kvct_disk_force_sync_io((int32_t)rnd(2));
    w->p = layout_pool(w->layout, w->dev_blocks);
    OK(kvc_tier_attach_host(w->p, w->host_slots));
    const int32_t flags = (persistent ? KVC_DISK_PERSISTENT : 0) | (rnd(2) ? KVC_DISK_NO_DIRECT : 0);
    OK(kvc_tier_attach_disk(w->p, w->path, w->disk_slots, flags));
    check_step(w);

    /* What the attach found. */
    const kvc_tier_stats d = disk_stats(w);
    assert_int_equal(d.persistent, persistent);
    assert_int_equal(d.capacity_blocks, w->disk_slots);
    assert_int_equal(d.cached_blocks, d.recovered_blocks);
    if (!persistent) {
        assert_int_equal(d.recovered_blocks, 0);
        w->dirty = 0; /* truncated */
        for (int l = 0; l < NUM_LAYOUTS; ++l) {
            w->bound[l] = 0;
            w->exact[l] = 1;
        }
    } else if (w->exact[w->layout]) {
        assert_int_equal(d.recovered_blocks, w->bound[w->layout]);
        ++w->exact_recoveries;
        w->recovered += d.recovered_blocks;
    } else {
        assert_true(d.recovered_blocks <= w->bound[w->layout]);
        ++w->bounded_recoveries;
    }

    /* The probes' chains as the last layout-0 pool left them: every block that was cached only on
     * disk was recovered. */
    if (w->layout == 0 && persistent && w->exact[0] && w->probes_valid) {
        for (int q = 0; q < NUM_PROBES; ++q) {
            int32_t tokens[PROBE_TOKENS];
            probe_prompt(tokens, q);
            int64_t dev = -1, host = -1, disk = -1;
            lookup_tiers(w->p, tokens, PROBE_TOKENS, &dev, &host, &disk);
            assert_int_equal(dev + host, 0);
            assert_true(disk <= w->probe_dev[q] + w->probe_host[q] + w->probe_disk[q]);
            if (w->probe_dev[q] + w->probe_host[q] == 0) {
                assert_int_equal(disk, w->probe_disk[q]);
                w->chains_refound += disk > 0;
            }
        }
    }
    /* Every recovered chain comes back with its bytes (or, on a damaged file, as a counted miss). */
    for (int q = 0; q < NUM_PROBES; ++q) {
        int32_t tokens[PROBE_TOKENS];
        probe_prompt(tokens, q);
        if (alloc_prompt(w, tokens, PROBE_TOKENS) < 0) continue;
        check_step(w);
        OK(kvc_free(w->p, w->seqs[w->nseqs - 1].id));
        drop_seq(w, &w->seqs[w->nseqs - 1]);
        check_step(w);
        if (rnd(2)) {
            op_churn(w);
            check_step(w);
        }
    }

    for (int i = 0; i < OPS_PER_ROUND; ++i) random_op(w);
    check_all(w);

    /* Sometimes push everything down before the pool goes, so that whole chains sit on disk. */
    if (rnd(2)) {
        while (w->nseqs > 0) {
            OK(kvc_free(w->p, w->seqs[0].id));
            drop_seq(w, &w->seqs[0]);
        }
        op_filler(w, w->dev_blocks + w->host_slots);
        check_step(w);
    }

    /* What the next persistent attach of this layout may find. */
    const kvc_tier_stats end = disk_stats(w);
    if (w->layout == 0) {
        for (int q = 0; q < NUM_PROBES; ++q) {
            int32_t tokens[PROBE_TOKENS];
            probe_prompt(tokens, q);
            lookup_tiers(w->p, tokens, PROBE_TOKENS, &w->probe_dev[q], &w->probe_host[q], &w->probe_disk[q]);
        }
        w->probes_valid = 1;
    }
    /* A slot freed by a failed verification keeps its valid header in the file. */
    w->bound[w->layout] = end.cached_blocks + end.checksum_failures;
    w->exact[w->layout] = !w->dirty && end.checksum_failures == 0;
    if (end.blocks_in > 0)
        for (int l = 0; l < NUM_LAYOUTS; ++l)
            if (l != w->layout) w->exact[l] = 0; /* its writes may have overwritten their slots */
    OK(kvc_pool_destroy(w->p));
    w->p = NULL;
}

static void run_seed(uint64_t seed) {
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    rng_state = seed * 0x9e3779b97f4a7c15ull + 1;
    temp_path(w->dir, sizeof w->dir, w->path, sizeof w->path, "persist.bin");
    w->disk_slots = 2 + (int32_t)rnd(11);
    w->next_id = 1;
    for (int l = 0; l < NUM_LAYOUTS; ++l) w->exact[l] = 1; /* no file yet: nothing to recover */
    for (int r = 0; r < ROUNDS; ++r) {
        int kind = ROUND_PERSISTENT;
        if (r > 0) {
            const uint32_t c = rnd(10);
            kind = c < 5 ? ROUND_PERSISTENT : c < 7 ? ROUND_TRUNCATE : c < 8 ? ROUND_OTHER_LAYOUT : ROUND_DAMAGED;
        }
        run_round(w, kind);
    }
    print_message("seed %llu: %d disk slots, %lld ops, %lld disk restores, %lld checksum misses, "
                  "%lld exact (%lld blocks) / %lld bounded recoveries, %lld disk-only chains found again, %lld damages\n",
                  (unsigned long long)seed, w->disk_slots, (long long)w->ops, (long long)w->disk_restores,
                  (long long)w->checksum_misses, (long long)w->exact_recoveries, (long long)w->recovered, (long long)w->bounded_recoveries,
                  (long long)w->chains_refound, (long long)w->damages);
    kvct_disk_force_sync_io(0);
    unlink(w->path);
    rmdir(w->dir);
    free(w);
}

static void test_seed_1(void **state) { (void)state; run_seed(1); }
static void test_seed_2(void **state) { (void)state; run_seed(2); }
static void test_seed_3(void **state) { (void)state; run_seed(3); }
static void test_seed_4(void **state) { (void)state; run_seed(4); }
static void test_seed_5(void **state) { (void)state; run_seed(5); }
static void test_seed_6(void **state) { (void)state; run_seed(6); }
static void test_seed_7(void **state) { (void)state; run_seed(7); }
static void test_seed_8(void **state) { (void)state; run_seed(8); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_1), cmocka_unit_test(test_seed_2), cmocka_unit_test(test_seed_3),
        cmocka_unit_test(test_seed_4), cmocka_unit_test(test_seed_5), cmocka_unit_test(test_seed_6),
        cmocka_unit_test(test_seed_7), cmocka_unit_test(test_seed_8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
