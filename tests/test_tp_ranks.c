/* The determinism contract (kvc.h, "Determinism (tensor parallelism)"): pools that share block_size,
 * num_blocks, the caching/watermark/length/event settings, the window and the tiers' slot counts,
 * but differ in everything a tensor-parallel rank's shard changes (KV heads, head_dim, layers,
 * dtype; disk files opened with and without O_DIRECT; CUDA storage where a device or the CUDA
 * emulator is present), make identical decisions when they receive
 * the same calls. A seeded random mix of every pool-core call (sequences, prefix cache, pins, tiers,
 * preemption, batches, events, copy-on-write pairs) goes to three such "ranks"; after every call the
 * ranks' statuses and out-values must agree, and so must every live sequence's table and the block
 * counts of kvc_stats / kvc_tier_stats. A control run whose ranks differ in num_blocks by one must
 * be caught diverging, so the comparison is known to bite. */
#include <stdlib.h>
#include <unistd.h>

#include "test_pool_helpers.h"

enum { NR = 3, BS = 4, MAX_IDS = 24, MAX_PROMPT = 40, TABLE_CAP = 64 };

/* Block-level sizes, varied per seed: tiny tiers reach the corners (a host tier of one slot, a
 * full disk) that a roomy one never does. */
typedef struct sizes { int64_t device, host, disk; } sizes;

typedef struct ranks {
    kvc_pool *p[NR];
    kvc_batch *batch[NR];
    kvc_keys *keys;                /* one key set, passed to every rank (as a TP server would) */
    char disk_path[NR][64];
    int diverged;
    char what[256];                /* the first divergence */
    int64_t ops, ok_ops;
} ranks;

/* Rank shapes: what a TP shard changes. Rank 0 is the "full" model, the others its shards. */
static const struct { int32_t layers, kv_heads, q_heads, head_dim, dtype, disk_flags; } kShape[NR] = {
    {2, 4, 8, 64, KVC_DTYPE_F32, KVC_DISK_NO_DIRECT},
    {2, 1, 2, 64, KVC_DTYPE_F16, 0},
    {3, 2, 4, 80, KVC_DTYPE_BF16, KVC_DISK_NO_DIRECT},
};

static uint64_t rng;
static uint32_t rnd(uint32_t n) { /* xorshift64* */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (uint32_t)((rng * 2685821657736338717ull) >> 33) % n;
}

static void note_divergence(ranks *r, const char *fmt, ...) {
    if (r->diverged) return;
    r->diverged = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->what, sizeof r->what, fmt, ap);
    va_end(ap);
}

static int32_t cuda_devices(void) {
    int32_t n = 0;
    OK(kvc_cuda_device_count(&n));
    return n;
}

static void open_ranks(ranks *r, sizes z, int32_t window, int64_t extra_blocks_on_last_rank) {
    memset(r, 0, sizeof *r);
    OK(kvc_keys_create(&r->keys));
    for (int i = 0; i < NR; ++i) {
        kvc_pool_config cfg;
        OK(kvc_pool_config_default(&cfg));
        cfg.block_size = BS;
        cfg.num_layers = kShape[i].layers;
        cfg.num_kv_heads = kShape[i].kv_heads;
        cfg.num_q_heads = kShape[i].q_heads;
        cfg.head_dim = kShape[i].head_dim;
        cfg.kv_dtype = kShape[i].dtype;
        cfg.num_blocks = z.device + (i == NR - 1 ? extra_blocks_on_last_rank : 0);
        cfg.watermark = 0.05;
        cfg.max_seq_len = 96;
        cfg.event_capacity = 32; /* small: drops happen, and must happen alike */
        /* Backend independence: with a CUDA device (or the CUDA emulator, where this suite also
         * runs) rank 1 keeps its KV in device memory and moves it with the tier stream. */
        cfg.backend = i == 1 && cuda_devices() > 0 ? KVC_BACKEND_CUDA : KVC_BACKEND_CPU;
        OK(kvc_pool_create(&cfg, &r->p[i]));
        if (window) OK(kvc_pool_set_sliding_window(r->p[i], window));
        OK(kvc_pool_set_tier_events(r->p[i], 1)); /* host and disk tier events must agree too */
        OK(kvc_tier_attach_host(r->p[i], z.host));
        snprintf(r->disk_path[i], sizeof r->disk_path[i], "/tmp/kvc_tp_rank_%d_%d.bin", (int)getpid(), i);
        /* As a TP deployment would: each rank's file attached with an identity naming the rank. */
        char identity[64];
        snprintf(identity, sizeof identity, "test_tp_ranks;tp=%d/%d", i, NR);
        OK(kvc_tier_attach_disk_with_identity(r->p[i], r->disk_path[i], z.disk, kShape[i].disk_flags, identity));
        OK(kvc_batch_create(r->p[i], 6, 64, 32, &r->batch[i]));
    }
}

static void close_ranks(ranks *r) {
    for (int i = 0; i < NR; ++i) {
        OK(kvc_batch_destroy(r->batch[i]));
        OK(kvc_pool_destroy(r->p[i]));
        unlink(r->disk_path[i]);
    }
    OK(kvc_keys_destroy(r->keys));
}

/* Statuses of one call on every rank must agree; returns the common status (rank 0's). */
static kvc_status agree(ranks *r, const char *op, const kvc_status st[NR]) {
    for (int i = 1; i < NR; ++i)
        if (st[i] != st[0]) note_divergence(r, "op %lld %s: rank 0 -> %s, rank %d -> %s", (long long)r->ops, op,
                                            kvc_status_str(st[0]), i, kvc_status_str(st[i]));
    return st[0];
}

static void agree_i64(ranks *r, const char *op, const char *field, const int64_t v[NR]) {
    for (int i = 1; i < NR; ++i)
        if (v[i] != v[0])
            note_divergence(r, "op %lld %s: %s rank 0 = %lld, rank %d = %lld", (long long)r->ops, op, field,
                            (long long)v[0], i, (long long)v[i]);
}

/* Runs CALL (an expression using the rank's pool `P` and index `I`) on every rank, then compares the
 * statuses and the int64 out-value OUT[I] (pass a dummy when the call has none). */
#define ON_ALL(r, name, CALL, OUT)                                                                  \
    do {                                                                                            \
        kvc_status st_[NR];                                                                         \
        for (int I = 0; I < NR; ++I) {                                                              \
            kvc_pool *P = (r)->p[I];                                                                \
            (void)P;                                                                                \
            st_[I] = (CALL);                                                                        \
        }                                                                                           \
        if (agree((r), (name), st_) == KVC_OK) {                                                    \
            ++(r)->ok_ops;                                                                          \
            agree_i64((r), (name), "out-value", (OUT));                                             \
        }                                                                                           \
    } while (0)

/* After every call: each rank passes the invariant checker (tier slots against their lists
 * included), and the ranks agree on each tracked sequence's table, the pool counters and the
 * tiers' block counts. */
static void compare_state(ranks *r) {
    for (int i = 0; i < NR; ++i) CHECK_POOL(r->p[i]);
    for (uint64_t id = 1; id <= MAX_IDS; ++id) {
        int32_t t[NR][TABLE_CAP];
        int64_t len[NR];
        kvc_status st[NR];
        for (int i = 0; i < NR; ++i) st[i] = kvc_seq_block_table(r->p[i], id, t[i], TABLE_CAP, &len[i]);
        if (agree(r, "seq_block_table", st) != KVC_OK) continue;
        agree_i64(r, "seq_block_table", "length", len);
        for (int i = 1; i < NR; ++i)
            if (len[i] == len[0] && memcmp(t[i], t[0], (size_t)len[0] * sizeof(int32_t)) != 0)
                note_divergence(r, "op %lld: sequence %llu's table differs between rank 0 and rank %d",
                                (long long)r->ops, (unsigned long long)id, i);
    }
    kvc_stats s0 = stats_of(r->p[0]);
    for (int i = 1; i < NR; ++i) {
        kvc_stats si = stats_of(r->p[i]);
        if (memcmp(&s0, &si, sizeof s0) != 0)
            note_divergence(r, "op %lld: kvc_stats differ between rank 0 and rank %d (free %lld/%lld, evictions "
                            "%lld/%lld)", (long long)r->ops, i, (long long)s0.free_blocks, (long long)si.free_blocks,
                            (long long)s0.evictions, (long long)si.evictions);
    }
    for (int32_t tier = 0; tier < 3; ++tier) {
        kvc_tier_stats t[NR];
        for (int i = 0; i < NR; ++i) {
            memset(&t[i], 0, sizeof t[i]);
            t[i].struct_size = sizeof t[i];
            OK(kvc_tier_get_stats(r->p[i], tier, &t[i]));
        }
        for (int i = 1; i < NR; ++i) {
            /* Block counts only: bytes scale with the shard, times and the I/O method are the rank's. */
            const int same = t[i].capacity_blocks == t[0].capacity_blocks && t[i].used_blocks == t[0].used_blocks &&
                             t[i].cached_blocks == t[0].cached_blocks && t[i].held_blocks == t[0].held_blocks &&
                             t[i].blocks_in == t[0].blocks_in && t[i].blocks_out == t[0].blocks_out &&
                             t[i].hits == t[0].hits && t[i].evictions == t[0].evictions &&
                             t[i].failures == t[0].failures && t[i].recovered_blocks == t[0].recovered_blocks;
            if (!same)
                note_divergence(r, "op %lld: tier %d block counts differ between rank 0 and rank %d (used %lld/%lld, "
                                "in %lld/%lld)", (long long)r->ops, tier, i, (long long)t[0].used_blocks,
                                (long long)t[i].used_blocks, (long long)t[0].blocks_in, (long long)t[i].blocks_in);
        }
    }
}

/* Prompts from three families that share prefixes, so hits, evictions and tier re-hits happen. */
static int64_t make_prompt(int32_t *t) {
    const int64_t n = 1 + rnd(MAX_PROMPT);
    const int32_t family = (int32_t)rnd(3);
    const int64_t diverge = rnd(3) == 0 ? (int64_t)rnd((uint32_t)n + 1) : n;
    for (int64_t i = 0; i < n; ++i) t[i] = i < diverge ? family * 1000 + (int32_t)i : 500 + (int32_t)rnd(40);
    return n;
}

static void one_op(ranks *r) {
    int64_t out[NR] = {0}, out2[NR] = {0}, out3[NR] = {0};
    int32_t toks[MAX_PROMPT];
    const uint64_t id = 1 + rnd(MAX_IDS), other = 1 + rnd(MAX_IDS);
    switch (rnd(17)) {
    case 0: case 1: case 2: { /* alloc, sometimes with a LoRA id, a priority or a hit cap */
        const int64_t n = make_prompt(toks);
        OK(kvc_keys_clear(r->keys));
        if (rnd(4) == 0) OK(kvc_keys_set_lora(r->keys, 1 + rnd(2)));
        if (rnd(4) == 0) OK(kvc_keys_set_priority(r->keys, (int32_t)rnd(101)));
        if (rnd(6) == 0) OK(kvc_keys_set_max_cached_tokens(r->keys, (int64_t)rnd(24)));
        ON_ALL(r, "alloc", kvc_alloc(P, id, toks, n, r->keys, &out[I]), out);
        break;
    }
    case 3: case 4: case 5: { /* decode / draft append, sometimes with lookahead */
        int32_t t[4];
        const int64_t n = rnd(4), look = rnd(3) == 0 ? 1 + rnd(3) : 0;
        for (int64_t i = 0; i < n; ++i) t[i] = 700 + (int32_t)rnd(20);
        int32_t nb[NR] = {0};
        ON_ALL(r, "append", kvc_append(P, id, t, n, n || look ? look : 1, &nb[I]), out);
        for (int i = 0; i < NR; ++i) out[i] = nb[i];
        agree_i64(r, "append", "new blocks", out);
        break;
    }
    case 6: ON_ALL(r, "fork", kvc_fork(P, id, other), out); break;
    case 7: {
        int32_t freed[NR] = {0};
        const int64_t n = 1 + rnd(40);
        ON_ALL(r, "truncate", kvc_truncate(P, id, n, &freed[I]), out);
        for (int i = 0; i < NR; ++i) out[i] = freed[i];
        agree_i64(r, "truncate", "freed blocks", out);
        break;
    }
    case 8:
        if (rnd(4) == 0) ON_ALL(r, "abort", kvc_abort(P, id), out);
        else ON_ALL(r, "free", kvc_free(P, id), out);
        break;
    case 9: { /* operation ids are decisions too */
        uint64_t op[NR] = {0};
        ON_ALL(r, "swap_out", kvc_swap_out(P, id, &op[I]), out);
        for (int i = 0; i < NR; ++i) out[i] = (int64_t)op[i];
        agree_i64(r, "swap_out", "op id", out);
        break;
    }
    case 10: {
        uint64_t op[NR] = {0};
        ON_ALL(r, "swap_in", kvc_swap_in(P, id, &op[I]), out);
        for (int i = 0; i < NR; ++i) out[i] = (int64_t)op[i];
        agree_i64(r, "swap_in", "op id", out);
        break;
    }
    case 11: ON_ALL(r, "preempt_recompute", kvc_preempt_recompute(P, id, &out[I]), out); break;
    case 12: {
        int32_t v[NR] = {0};
        const int64_t n = make_prompt(toks);
        ON_ALL(r, "can_alloc", kvc_can_alloc(P, toks, n, NULL, &v[I]), out);
        for (int i = 0; i < NR; ++i) out[i] = v[i];
        agree_i64(r, "can_alloc", "verdict", out);
        const int64_t m = make_prompt(toks);
        ON_ALL(r, "prefix_lookup_tiers", kvc_prefix_lookup_tiers(P, toks, m, NULL, &out[I], &out2[I], &out3[I]), out);
        agree_i64(r, "prefix_lookup_tiers", "host tokens", out2);
        agree_i64(r, "prefix_lookup_tiers", "disk tokens", out3);
        break;
    }
    case 13: { /* pin then (sometimes) unpin the same prompt */
        const int64_t n = make_prompt(toks);
        ON_ALL(r, "prefix_pin", kvc_prefix_pin(P, toks, n, NULL, &out[I]), out);
        if (rnd(2)) ON_ALL(r, "prefix_unpin", kvc_prefix_unpin(P, toks, n, NULL, &out2[I]), out2);
        break;
    }
    case 14: { /* drain the copy-on-write pairs: the pairs themselves must agree */
        int32_t src[NR][64], dst[NR][64];
        ON_ALL(r, "take_pending_copies", kvc_take_pending_copies(P, src[I], dst[I], 64, &out[I]), out);
        for (int i = 1; i < NR; ++i)
            if (out[i] == out[0] && (memcmp(src[i], src[0], (size_t)out[0] * 4) || memcmp(dst[i], dst[0], (size_t)out[0] * 4)))
                note_divergence(r, "op %lld: copy-on-write pairs differ between rank 0 and rank %d", (long long)r->ops, i);
        break;
    }
    case 15: { /* a step's batch over a few tracked sequences: tables and slots as the kernels see them */
        uint64_t ids[3];
        int64_t q[3];
        const int32_t n = 1 + (int32_t)rnd(3);
        for (int32_t k = 0; k < n; ++k) { ids[k] = 1 + rnd(MAX_IDS); q[k] = 1 + rnd(2); }
        ON_ALL(r, "batch_build", kvc_batch_build(r->batch[I], ids, q, n), out);
        if (r->diverged || out[0] != 0) break;
        kvc_batch_info info[NR];
        int32_t tables[NR][6 * 32];
        int64_t slots[NR][64];
        int ok = 1;
        for (int i = 0; i < NR; ++i) {
            memset(&info[i], 0, sizeof info[i]);
            info[i].struct_size = sizeof info[i];
            ok &= kvc_batch_get_info(r->batch[i], &info[i]) == KVC_OK;
        }
        if (!ok) break; /* the build was refused on every rank alike */
        for (int i = 0; i < NR; ++i) {
            OK(kvc_batch_copy_block_tables(r->batch[i], tables[i], 6 * 32));
            OK(kvc_batch_copy_slot_mapping(r->batch[i], slots[i], 64));
        }
        for (int i = 1; i < NR; ++i) {
            const size_t nt = (size_t)info[0].num_seqs * (size_t)info[0].max_blocks_per_seq;
            if (info[i].num_tokens != info[0].num_tokens || info[i].num_indices != info[0].num_indices ||
                memcmp(tables[i], tables[0], nt * 4) || memcmp(slots[i], slots[0], (size_t)info[0].num_tokens * 8))
                note_divergence(r, "op %lld: batch metadata differs between rank 0 and rank %d", (long long)r->ops, i);
        }
        break;
    }
    default: { /* events: every rank's ring must hold the same events (block ids and hashes) */
        for (int k = 0; k < 4; ++k) {
            kvc_event e[NR];
            int32_t has[NR], tk[NR][BS];
            for (int i = 0; i < NR; ++i) {
                memset(&e[i], 0, sizeof e[i]);
                memset(tk[i], 0, sizeof tk[i]); /* only BLOCK_STORED writes token ids */
                e[i].struct_size = sizeof e[i];
                OK(kvc_event_pop(r->p[i], &e[i], tk[i], BS, &has[i]));
            }
            for (int i = 1; i < NR; ++i)
                if (has[i] != has[0] || (has[0] && (memcmp(&e[i], &e[0], sizeof e[0]) ||
                                                    memcmp(tk[i], tk[0], sizeof tk[0]))))
                    note_divergence(r, "op %lld: event %d differs between rank 0 and rank %d", (long long)r->ops, k, i);
            if (!has[0]) break;
        }
        if (rnd(8) == 0) ON_ALL(r, "prefix_cache_reset", kvc_prefix_cache_reset(P), out);
        else if (rnd(6) == 0) ON_ALL(r, "tier_flush", kvc_tier_flush(P, &out[I]), out);
        break;
    }
    }
}

static void run_ranks(ranks *r, uint64_t seed, int ops) {
    rng = seed;
    for (r->ops = 0; r->ops < ops && !r->diverged; ++r->ops) {
        one_op(r);
        compare_state(r);
    }
}

static void expect_lockstep(int32_t window) {
    static const uint64_t kSeeds[] = {1, 2, 3, 12}; /* 12: a host tier of one slot */
    for (size_t si = 0; si < sizeof kSeeds / sizeof kSeeds[0]; ++si) {
        const uint64_t seed = kSeeds[si];
        ranks r;
        const sizes z = {12 + (int64_t)(seed * 5 % 13), 1 + (int64_t)(seed * 7 % 12), 1 + (int64_t)(seed * 3 % 16)};
        open_ranks(&r, z, window, 0);
        run_ranks(&r, seed * 0x9e3779b97f4a7c15ull, 2500);
        if (r.diverged) {
            print_error("seed %llu, window %d: %s\n", (unsigned long long)seed, window, r.what);
            fail();
        }
        /* The mix did real work: most calls succeeded on every rank. */
        assert_true(r.ok_ops > 2500 / 4);
        kvc_tier_stats host;
        memset(&host, 0, sizeof host);
        host.struct_size = sizeof host;
        OK(kvc_tier_get_stats(r.p[0], KVC_TIER_HOST, &host));
        assert_true(host.blocks_in > 0); /* swaps and spills reached the host tier */
        close_ranks(&r);
    }
}

static void test_ranks_stay_in_lockstep(void **state) {
    (void)state;
    print_message("rank 1 backend: %s\n", cuda_devices() > 0 ? "CUDA" : "CPU (no CUDA device)");
    expect_lockstep(0);
}

static void test_windowed_ranks_stay_in_lockstep(void **state) {
    (void)state;
    expect_lockstep(9);
}

/* Control: one block more on the last rank is a different pool; the same calls must diverge, and
 * the comparison must say where. */
static void test_different_pools_are_caught(void **state) {
    (void)state;
    ranks r;
    const sizes z = {20, 10, 12};
    open_ranks(&r, z, 0, 1);
    run_ranks(&r, 0x9e3779b97f4a7c15ull, 2500);
    assert_true(r.diverged);
    assert_non_null(strstr(r.what, "rank 2"));
    close_ranks(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranks_stay_in_lockstep),
        cmocka_unit_test(test_windowed_ranks_stay_in_lockstep),
        cmocka_unit_test(test_different_pools_are_caught),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
