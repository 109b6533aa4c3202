// The mirror rank of the differential fuzzer: a second pool that checks kvc.h's determinism contract
// ("Determinism (tensor parallelism)"). It is created with everything the contract says a pool's
// decisions may depend on equal to the fuzzed pool's — block_size, num_blocks, prefix_caching,
// watermark, max_seq_len, event_capacity, the sliding window, the host tier's slot count — and
// everything they must not depend on different: num_layers, num_kv_heads, head_dim, kv_dtype and,
// where the contract allows it, the backend (a pool with a host tier needs storage, so its mirror is
// CPU too; otherwise NONE <-> CPU, both directions). The driver makes every call it makes on the
// fuzzed pool on the mirror too, with the same arguments (the same kvc_keys object), and compares
// the two: statuses, block tables, slot mappings, cached-token counts, verdicts, copy-on-write pairs,
// operation ids, events (block ids, hashes, sequence numbers, tokens), batch metadata and every
// block count of kvc_pool_stats / kvc_tier_stats. Not compared, as the contract excludes them: byte
// counts (kvc_preemption_cost's swap bytes are checked against each pool's own block_stride
// instead), times, kvc_op_query's answer, and kvc_tier_stats.transfers (how copies are batched).
// kvc_pool_check runs on the mirror after setup and at the end of each input; in between, the
// comparisons after every operation do the checking.
// Disk tier: where the fuzzed pool has one, the mirror gets its own file of the same slot count (and
// the other I/O mode, io_uring or pread/pwrite, for half of the inputs). The contract's last
// exclusion (disk I/O and checksum failures, which a rank's own disk decides) is met by giving the
// mirror the same failures: the fault hook (lib/testing.h) counts I/O operations, both pools make
// the same ones in the same order, and the driver arms the same fault for the mirror's call as for
// the pool's (fuzz_pool.cpp, DiskFault), so every field stays comparable, fault counters included.
// A persistent disk is attached under the fuzzed pool's disk identity at every restart (and a
// too-long one is refused on both): the mirror's fingerprint differs (its layout does) but its
// file holds the same slots under the same identities, so recovered_blocks and foreign_blocks
// must agree as well.
//
// KV bytes: the mirror plays its own forward pass when both pools have storage (its own shape: every
// layer, head and dimension gets a value from position, token, layer, head and dimension, exact in
// its dtype) and its bytes are checked like the fuzzed pool's. Where only one of the two has storage
// the storage calls are backend-specific by nature (kvc_cache_write, kvc_copy_pending and
// kvc_storage_copy_blocks are refused on a metadata-only pool), so the mirror makes the metadata
// equivalent instead: a metadata-only mirror drains the pairs the fuzzed pool copies with
// kvc_take_pending_copies (and they are compared pair for pair); a storage mirror of a metadata-only
// pool writes no KV bytes (its pairs are drained by the kvc_take_pending_copies calls it repeats)
// and skips the kvc_copy_pending the fuzzed pool was refused (which changed nothing there either).
//
// KVC_FUZZ_MIRROR_SKEW=blocks (mirror gets num_blocks + 1) or =alloc (one extra sequence on the
// mirror only) makes the mirror differ on purpose: the self-test (ctest fuzz_pool_mirror_skew_*,
// tests/fuzz/run.sh) requires that the fuzzer then reports a mirror divergence.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kvc/kvc.h"

namespace mirror {

// The driver's failure path (defined in fuzz_pool.cpp): prints the message with the operation's
// number and name and the mirror's shape, then aborts (a crash for libFuzzer).
[[noreturn]] void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// The comparison and KV-check code is left out of coverage: its branches follow the data, not the
// library's behaviour, so they would only add noise features to the corpus, and their comparison
// tracing costs fuzzing speed.
#define MIRROR_NO_COVERAGE __attribute__((no_sanitize("coverage")))

#define MIRROR_EQ(field, pool_value, mirror_value)                                                 \
    do {                                                                                           \
        long long p_ = (long long)(pool_value), m_ = (long long)(mirror_value);                    \
        if (p_ != m_) mirror::report("%s: pool %lld, mirror %lld", field, p_, m_);                 \
    } while (0)

struct Rank {
    kvc_pool *pool = nullptr;
    kvc_batch *batch = nullptr;
    kvc_pool_config cfg{};
    bool storage = false;  // CPU backend
    bool data = false;     // writes and checks its own KV bytes (both pools have storage)
    kvc_storage_info info{};
    int64_t block_bytes = 0;  // kvc_bytes_per_block of its shape (for kvc_preemption_cost)
    int64_t value_range = 256;  // KV values are integers in (-range, range): exact in its dtype
    char desc[160] = "";

    ~Rank() {
        kvc_batch_destroy(batch);
        kvc_pool_destroy(pool);
    }
};

inline uint64_t input_hash(const uint8_t *d, size_t n) {  // FNV-1a: the mirror's shape per input
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ d[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

inline const char *dtype_name(int32_t t) {
    static const char *names[] = {"F32", "F16", "BF16", "FP8_E4M3"};
    return t >= 0 && t < 4 ? names[t] : "?";
}

// The mirror's configuration: the fuzzed pool's decision inputs, another shape and dtype (never all
// equal to the fuzzed pool's), and the other backend three times in four where that is allowed.
inline kvc_pool_config choose_config(const kvc_pool_config &fuzzed, bool needs_storage, uint64_t h) {
    static const int32_t dims[] = {1, 2, 3, 5, 8};
    static const int32_t dtypes[] = {KVC_DTYPE_F32, KVC_DTYPE_F16, KVC_DTYPE_BF16, KVC_DTYPE_FP8_E4M3};
    kvc_pool_config c = fuzzed;
    c.num_layers = int32_t(1 + h % 3);
    h /= 3;
    c.num_kv_heads = int32_t(1 + h % 4);
    h /= 4;
    c.num_q_heads = 0;
    c.head_dim = dims[h % 5];
    h /= 5;
    c.kv_dtype = dtypes[h % 4];
    h /= 4;
    if (c.num_layers == fuzzed.num_layers && c.num_kv_heads == fuzzed.num_kv_heads &&
        c.head_dim == fuzzed.head_dim && c.kv_dtype == fuzzed.kv_dtype)
        c.num_kv_heads = fuzzed.num_kv_heads + 1;
    const int32_t other = fuzzed.backend == KVC_BACKEND_CPU ? KVC_BACKEND_NONE : KVC_BACKEND_CPU;
    c.backend = needs_storage ? KVC_BACKEND_CPU : (h % 4 != 0 ? other : fuzzed.backend);
    return c;
}

inline void describe(Rank &r) {
    std::snprintf(r.desc, sizeof r.desc, "mirror: %s, %d layers, %d kv heads, head_dim %d, %s%s",
                  r.storage ? "CPU" : "NONE", r.cfg.num_layers, r.cfg.num_kv_heads, r.cfg.head_dim,
                  dtype_name(r.cfg.kv_dtype), r.data ? ", own KV bytes" : "");
}

// ---- lockstep comparisons -----------------------------------------------------------------------

inline void get_stats(kvc_pool *p, kvc_stats *st, const char *who) {
    std::memset(st, 0, sizeof *st);
    st->struct_size = sizeof *st;
    if (kvc_pool_stats(p, st) != KVC_OK) report("kvc_pool_stats failed on the %s", who);
}

// Every field of kvc_stats is a block or call count (or a ratio of two), so all are compared.
MIRROR_NO_COVERAGE inline void compare_stats(kvc_pool *pool, kvc_pool *mir) {
    kvc_stats a, b;
    get_stats(pool, &a, "pool");
    get_stats(mir, &b, "mirror");
    MIRROR_EQ("stats.total_blocks", a.total_blocks, b.total_blocks);
    MIRROR_EQ("stats.free_blocks", a.free_blocks, b.free_blocks);
    MIRROR_EQ("stats.used_blocks", a.used_blocks, b.used_blocks);
    MIRROR_EQ("stats.cached_free_blocks", a.cached_free_blocks, b.cached_free_blocks);
    MIRROR_EQ("stats.pinned_blocks", a.pinned_blocks, b.pinned_blocks);
    MIRROR_EQ("stats.num_seqs", a.num_seqs, b.num_seqs);
    MIRROR_EQ("stats.allocs", a.allocs, b.allocs);
    MIRROR_EQ("stats.frees", a.frees, b.frees);
    MIRROR_EQ("stats.forks", a.forks, b.forks);
    MIRROR_EQ("stats.appends", a.appends, b.appends);
    MIRROR_EQ("stats.blocks_allocated", a.blocks_allocated, b.blocks_allocated);
    MIRROR_EQ("stats.blocks_freed", a.blocks_freed, b.blocks_freed);
    MIRROR_EQ("stats.cow_copies", a.cow_copies, b.cow_copies);
    MIRROR_EQ("stats.pending_copies", a.pending_copies, b.pending_copies);
    MIRROR_EQ("stats.prefix_query_tokens", a.prefix_query_tokens, b.prefix_query_tokens);
    MIRROR_EQ("stats.prefix_hit_tokens", a.prefix_hit_tokens, b.prefix_hit_tokens);
    MIRROR_EQ("stats.evictions", a.evictions, b.evictions);
    MIRROR_EQ("stats.verify_misses", a.verify_misses, b.verify_misses);
    MIRROR_EQ("stats.events_dropped", a.events_dropped, b.events_dropped);
    if (a.utilization != b.utilization) report("stats.utilization: pool %g, mirror %g", a.utilization, b.utilization);
    if (a.prefix_hit_rate != b.prefix_hit_rate)
        report("stats.prefix_hit_rate: pool %g, mirror %g", a.prefix_hit_rate, b.prefix_hit_rate);
}

// The block counts of each tier. Not compared: bytes_used / bytes_in / bytes_out (they scale with
// the shard), transfer_seconds and bandwidth (times), transfers (how copies are batched is the
// backend's), and the disk's I/O flags (direct_io, io_uring: a property of each rank's file).
MIRROR_NO_COVERAGE inline void compare_tier_stats(kvc_pool *pool, kvc_pool *mir) {
    static const char *names[] = {"device", "host", "disk"};
    for (int32_t tier = KVC_TIER_DEVICE; tier <= KVC_TIER_DISK; ++tier) {
        kvc_tier_stats a, b;
        std::memset(&a, 0, sizeof a);
        std::memset(&b, 0, sizeof b);
        a.struct_size = b.struct_size = sizeof a;
        if (kvc_tier_get_stats(pool, tier, &a) != KVC_OK) report("kvc_tier_get_stats(%s) failed on the pool", names[tier]);
        if (kvc_tier_get_stats(mir, tier, &b) != KVC_OK) report("kvc_tier_get_stats(%s) failed on the mirror", names[tier]);
        char f[64];
#define MIRROR_TIER_EQ(field)                                                                      \
    std::snprintf(f, sizeof f, "%s.%s", names[tier], #field);                                      \
    MIRROR_EQ(f, a.field, b.field)
        MIRROR_TIER_EQ(capacity_blocks);
        MIRROR_TIER_EQ(used_blocks);
        MIRROR_TIER_EQ(cached_blocks);
        MIRROR_TIER_EQ(held_blocks);
        MIRROR_TIER_EQ(blocks_in);
        MIRROR_TIER_EQ(blocks_out);
        MIRROR_TIER_EQ(hits);
        MIRROR_TIER_EQ(evictions);
        MIRROR_TIER_EQ(failures);
        MIRROR_TIER_EQ(checksum_failures);
        MIRROR_TIER_EQ(io_errors);
        MIRROR_TIER_EQ(recovered_blocks);
        MIRROR_TIER_EQ(foreign_blocks);  // the mirror's file is attached under the same identity
        MIRROR_TIER_EQ(persistent);
        MIRROR_TIER_EQ(reachable_blocks);
#undef MIRROR_TIER_EQ
    }
}

// Token counts and block tables of sequence ids [0, max_ids), id for id.
MIRROR_NO_COVERAGE inline void compare_seqs(kvc_pool *pool, kvc_pool *mir, uint64_t max_ids) {
    for (uint64_t id = 0; id < max_ids; ++id) {
        int64_t na = -7, nb = -7;
        MIRROR_EQ("kvc_seq_num_tokens status", kvc_seq_num_tokens(pool, id, &na), kvc_seq_num_tokens(mir, id, &nb));
        MIRROR_EQ("kvc_seq_num_tokens", na, nb);
        int32_t ta[256], tb[256];
        int64_t la = -7, lb = -7;
        const kvc_status sa = kvc_seq_block_table(pool, id, ta, 256, &la);
        MIRROR_EQ("kvc_seq_block_table status", sa, kvc_seq_block_table(mir, id, tb, 256, &lb));
        MIRROR_EQ("block table length", la, lb);
        for (int64_t i = 0; sa == KVC_OK && i < la && i < 256; ++i)
            if (ta[i] != tb[i])
                report("sequence %llu block %lld: pool %d, mirror %d", (unsigned long long)id, (long long)i, ta[i], tb[i]);
    }
}

// One popped event: every field (hashes and block id included) and its token ids.
MIRROR_NO_COVERAGE inline void compare_event(const kvc_event &a, const kvc_event &b, const int32_t *ta, const int32_t *tb,
                          int64_t ntok) {
    MIRROR_EQ("event type", a.type, b.type);
    MIRROR_EQ("event block_id", a.block_id, b.block_id);
    MIRROR_EQ("event num_tokens", a.num_tokens, b.num_tokens);
    MIRROR_EQ("event sequence_number", a.sequence_number, b.sequence_number);
    MIRROR_EQ("event hash_hi", a.hash_hi, b.hash_hi);
    MIRROR_EQ("event hash_lo", a.hash_lo, b.hash_lo);
    MIRROR_EQ("event parent_hash_hi", a.parent_hash_hi, b.parent_hash_hi);
    MIRROR_EQ("event parent_hash_lo", a.parent_hash_lo, b.parent_hash_lo);
    MIRROR_EQ("event lora_id", a.lora_id, b.lora_id);
    MIRROR_EQ("event extra_keys_digest", a.extra_keys_digest, b.extra_keys_digest);
    for (int64_t i = 0; i < ntok; ++i) MIRROR_EQ("event token", ta[i], tb[i]);
}

// ---- the mirror's own KV bytes --------------------------------------------------------------------

// K of (position, token, layer, head, dim); V is its negation. Integers below value_range: exact in
// F32, F16 and BF16 (256) and in FP8 E4M3 (16).
MIRROR_NO_COVERAGE inline float kv_value(const Rank &r, int64_t pos, int32_t token, int32_t layer, int32_t head, int32_t d) {
    return float((pos * 8 + token + 3 * layer + 5 * head + 7 * d) % r.value_range);
}

MIRROR_NO_COVERAGE inline float decode(const uint8_t *p, int32_t dtype) {
    uint16_t h;
    switch (dtype) {
        case KVC_DTYPE_F32: {
            float f;
            std::memcpy(&f, p, 4);
            return f;
        }
        case KVC_DTYPE_F16: {
            std::memcpy(&h, p, 2);
            const int e = (h >> 10) & 31, m = h & 1023;
            const float mag = e == 0 ? std::ldexp(float(m), -24) : e == 31 ? NAN : std::ldexp(float(1024 + m), e - 25);
            return (h & 0x8000) ? -mag : mag;
        }
        case KVC_DTYPE_BF16: {
            std::memcpy(&h, p, 2);
            const uint32_t u = uint32_t(h) << 16;
            float f;
            std::memcpy(&f, &u, 4);
            return f;
        }
        default: {  // FP8 E4M3: bias 7, 3 mantissa bits, S.1111.111 = NaN
            const int e = (p[0] >> 3) & 15, m = p[0] & 7;
            const float mag = e == 0 ? std::ldexp(float(m), -9) : (e == 15 && m == 7) ? NAN : std::ldexp(float(8 + m), e - 10);
            return (p[0] & 0x80) ? -mag : mag;
        }
    }
}

// Writes the K/V of `count` tokens (positions first.., ids tokens[first..]) into `slots`, every layer.
MIRROR_NO_COVERAGE inline void write_kv(Rank &r, const std::vector<int64_t> &slots, const std::vector<int32_t> &tokens, int64_t first,
                     int64_t count) {
    const int32_t heads = r.cfg.num_kv_heads, dim = r.cfg.head_dim;
    std::vector<float> k(size_t(count * heads * dim)), v(k.size());
    for (int32_t layer = 0; layer < r.cfg.num_layers; ++layer) {
        size_t i = 0;
        for (int64_t p = first; p < first + count; ++p)
            for (int32_t h = 0; h < heads; ++h)
                for (int32_t d = 0; d < dim; ++d, ++i) {
                    k[i] = kv_value(r, p, tokens[size_t(p)], layer, h, d);
                    v[i] = -k[i];
                }
        if (kvc_cache_write(r.pool, layer, slots.data(), count, k.data(), v.data(), KVC_DTYPE_F32, 1.0f, 1.0f,
                            nullptr) != KVC_OK)
            report("kvc_cache_write failed on the mirror: %s", kvc_last_error());
    }
}

// Checks block `block` holding positions first.. (`count` of them, ids tokens[first..]) in every
// layer, head and dimension.
MIRROR_NO_COVERAGE inline void check_block(Rank &r, int32_t block, const std::vector<int32_t> &tokens, int64_t first, int64_t count,
                        std::vector<uint8_t> *buf, unsigned long long seq) {
    buf->resize(size_t(r.info.block_stride));
    if (kvc_storage_copy_blocks(r.pool, &block, 1, buf->data(), 1) != KVC_OK)
        report("kvc_storage_copy_blocks failed on the mirror: %s", kvc_last_error());
    const kvc_storage_info &L = r.info;
    for (int32_t layer = 0; layer < r.cfg.num_layers; ++layer)
        for (int32_t kv = 0; kv < 2; ++kv)
            for (int32_t h = 0; h < r.cfg.num_kv_heads; ++h)
                for (int64_t t = 0; t < count; ++t)
                    for (int32_t d = 0; d < r.cfg.head_dim; ++d) {
                        const int64_t p = first + t;
                        const int64_t at = layer * L.layer_stride + kv * L.kv_stride + h * L.head_stride +
                                           (p % r.cfg.block_size) * L.token_stride + d * L.elem_bytes;
                        const float want = (kv ? -1.0f : 1.0f) * kv_value(r, p, tokens[size_t(p)], layer, h, d);
                        const float got = decode(buf->data() + at, r.cfg.kv_dtype);
                        if (got != want)
                            report("mirror KV bytes of sequence %llu position %lld (block %d, layer %d, %s, head %d, "
                                   "dim %d): %g, expected %g", seq, (long long)p, block, layer, kv ? "V" : "K", h, d,
                                   double(got), double(want));
                    }
}

}  // namespace mirror
