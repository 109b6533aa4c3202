// The CPU attention kernel body, compiled once per instruction set: lib/cpu/attention.cpp (the
// build's baseline ISA) and lib/cpu/attention_avx2.cpp (AVX2 + FMA + F16C, chosen at run time).
// Everything here has internal linkage (anonymous namespace, static helpers in simd.hpp), so the
// two copies never merge at link time. Include only after every standard header the includer
// needs, and after cpu/dtype_convert.hpp and cpu/thread_pool.hpp (those stay baseline code).
//
// Work item = (sequence, KV head, query tile, context partition). One item computes every query
// head of the KV head's GQA group for the tile's query tokens, so each K/V element it gathers is
// converted to fp32 once and used by the whole group. The context is streamed in chunks of kChunk
// positions with an online (running max) softmax, so scratch does not grow with context length.
// Only positions < seq_len of each sequence are ever read: slots past the context (padding, stale
// or NaN-filled) never enter the math.
//
// Decode split-K: with several partitions per sequence each item writes unnormalized partials
// (running max m, exp-sum l, accumulator) to the batch's workspace and a reduce pass combines them,
// rescaling partition i by exp(m_i - max_i m_i), as the CUDA backend does.
#include "cpu/simd.hpp"
#if defined(__F16C__) || defined(KVC_SIMD_AVX2)
#define KVC_SIMD_F16C 1
#include <immintrin.h>
#endif

namespace kvc {
namespace {

using namespace cpu;

constexpr int32_t kChunk = 32;           // context positions per K/V tile
constexpr int32_t kTargetRows = 64;      // query rows (tokens x group heads) per prefill item
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// n contiguous elements of `dtype` to fp32, times `scale` (the FP8 dequantization scale).
void to_float(float *dst, const void *src, int32_t dtype, int64_t n, float scale) {
    int64_t i = 0;
    switch (dtype) {
        case KVC_DTYPE_F32:
            std::memcpy(dst, src, size_t(n) * 4);
            return;
        case KVC_DTYPE_F16: {
            const uint16_t *s = static_cast<const uint16_t *>(src);
#ifdef KVC_SIMD_F16C
            for (; i + 8 <= n; i += 8)
                _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i))));
#endif
            for (; i + 4 <= n; i += 4) {
                const f32x4 v = half4_to_float(s + i);
                std::memcpy(dst + i, &v, sizeof v);
            }
            for (; i < n; ++i) dst[i] = half_to_float(s[i]);
            return;
        }
        case KVC_DTYPE_BF16: {
            const uint16_t *s = static_cast<const uint16_t *>(src);
            bf16_to_float_row(dst, s, n);
            return;
        }
        default: {
            const uint8_t *s = static_cast<const uint8_t *>(src);
            for (; i + kLanes <= n; i += kLanes) storev(dst + i, fp8v_to_float(s + i, scale));
            for (; i < n; ++i) dst[i] = fp8_e4m3_to_float(s[i]) * scale;
            return;
        }
    }
}

void from_float(void *dst, const float *src, int32_t dtype, int32_t n) {
    switch (dtype) {
        case KVC_DTYPE_F32: std::memcpy(dst, src, size_t(n) * 4); return;
        case KVC_DTYPE_F16: {
            uint16_t *d = static_cast<uint16_t *>(dst);
            for (int32_t i = 0; i < n; ++i) d[i] = float_to_half(src[i]);
            return;
        }
        default: {
            uint16_t *d = static_cast<uint16_t *>(dst);
            for (int32_t i = 0; i < n; ++i) d[i] = float_to_bf16(src[i]);
            return;
        }
    }
}

// Per-thread scratch, grown on first use and reused afterwards (no allocation in steady state).
struct Scratch {
    std::vector<float> q, acc, m, l, k, v, s;
    void ensure(int32_t rows, int32_t d) {
        size_t rd = size_t(rows) * size_t(d), cd = size_t(kChunk) * size_t(d);
        if (q.size() < rd) { q.resize(rd); acc.resize(rd); }
        if (m.size() < size_t(rows)) { m.resize(size_t(rows)); l.resize(size_t(rows)); }
        if (k.size() < cd) { k.resize(cd); v.resize(cd); s.resize(size_t(kChunk)); }
    }
};
thread_local Scratch t_scratch;

struct Plan {
    const AttentionArgs *a = nullptr;
    int32_t group = 1;        // query heads per KV head
    int32_t nkv = 1;
    int32_t d = 0;
    int32_t q_tile = 1;       // query tokens per item
    int32_t tiles = 1;        // query tiles per sequence (ceil(max_q_len / q_tile))
    int32_t parts = 1;        // context partitions per sequence (> 1: split-K)
    int64_t part_len = 0;
    int32_t seq_begin = 0;    // first sequence of this round
    float *partials = nullptr;  // [seq in round][part][q head][2 + d]: m, l, acc

    int64_t partial_floats() const { return 2 + int64_t(d); }
    float *partial(int32_t s_local, int32_t part, int32_t head) const {
        return partials + ((int64_t(s_local) * parts + part) * a->num_q_heads + head) * partial_floats();
    }
};

// Gathers K or V of positions [p0, p1) of sequence `table` for one KV head into dst[(p - p0) * d].
// Consecutive positions inside a block are contiguous in the HND layout: one conversion per run.
void gather(float *dst, const AttentionArgs &a, const int32_t *table, int32_t kv, int32_t head,
            int64_t p0, int64_t p1, float scale) {
    const KvLayout &L = a.layout;
    const char *base = static_cast<const char *>(a.base);
    int64_t p = p0;
    while (p < p1) {
        int64_t block = table[p / L.block_size];
        int32_t tok = int32_t(p % L.block_size);
        int64_t run = std::min<int64_t>(p1 - p, L.block_size - tok);
        to_float(dst + (p - p0) * L.head_dim, base + L.offset(block, a.layer, kv, head, tok), L.dtype,
                 run * L.head_dim, scale);
        p += run;
    }
}

void attend_item(const Plan &P, int64_t item) {
    const AttentionArgs &a = *P.a;
    const int32_t d = P.d, G = P.group;
    const int32_t kvh = int32_t(item % P.nkv);
    item /= P.nkv;
    const int32_t part = int32_t(item % P.parts);
    item /= P.parts;
    const int32_t tile = int32_t(item % P.tiles);
    const int32_t s_local = int32_t(item / P.tiles);
    const int32_t s = P.seq_begin + s_local;

    const int64_t L = a.seq_lens[s];
    const int64_t q0 = a.query_start_loc[s];
    const int64_t Q = a.query_start_loc[s + 1] - q0;
    const int64_t j0 = int64_t(tile) * P.q_tile;
    if (j0 >= Q) return;
    const int64_t j1 = std::min<int64_t>(Q, j0 + P.q_tile);
    const int32_t rows = int32_t(j1 - j0) * G;
    const int64_t p_begin = int64_t(part) * P.part_len;
    const int64_t p_end = P.parts > 1 ? std::min<int64_t>(L, p_begin + P.part_len) : L;
    const int64_t W = a.sliding_window;

    Scratch &S = t_scratch;
    S.ensure(rows, d);
    float *q = S.q.data(), *acc = S.acc.data(), *m = S.m.data(), *l = S.l.data();
    float *kbuf = S.k.data(), *vbuf = S.v.data(), *sc = S.s.data();
    const int32_t *table = a.block_tables + int64_t(s) * a.max_blocks_per_seq;

    const int64_t qrow_elems = int64_t(a.num_q_heads) * d;
    const int32_t q_bytes = dtype_bytes(a.q_dtype);
    for (int32_t r = 0; r < rows; ++r) {
        int64_t tok = q0 + j0 + r / G;
        int32_t head = kvh * G + r % G;
        to_float(q + int64_t(r) * d, static_cast<const char *>(a.q) + (tok * qrow_elems + int64_t(head) * d) * q_bytes,
                 a.q_dtype, d, 1.0f);
        m[r] = kNegInf;
        l[r] = 0.f;
        std::fill(acc + int64_t(r) * d, acc + int64_t(r + 1) * d, 0.f);
    }

    // Positions the tile may see: the first query token's window start .. the last one's position.
    const int64_t first_pos = L - Q + j0, last_pos = L - Q + j1 - 1;
    int64_t c_lo = std::max<int64_t>(p_begin, W > 0 ? first_pos - W + 1 : 0);
    int64_t c_hi = std::min<int64_t>(p_end, last_pos + 1);
    const float k_scale = a.k_scale, v_scale = a.v_scale;

    for (int64_t c0 = std::max<int64_t>(c_lo, 0); c0 < c_hi; c0 += kChunk) {
        const int64_t c1 = std::min<int64_t>(c_hi, c0 + kChunk);
        gather(kbuf, a, table, 0, kvh, c0, c1, k_scale);
        gather(vbuf, a, table, 1, kvh, c0, c1, v_scale);
        for (int32_t r = 0; r < rows; ++r) {
            const int64_t qpos = first_pos + r / G;
            const int64_t lo = std::max<int64_t>(c0, W > 0 ? qpos - W + 1 : 0);
            const int64_t hi = std::min<int64_t>(c1, qpos + 1);
            if (lo >= hi) continue;
            const int32_t head = kvh * G + r % G;
            const float *qr = q + int64_t(r) * d;
            float mx = kNegInf;
            for (int64_t p = lo; p < hi; ++p) {
                float x = dot(qr, kbuf + (p - c0) * d, d) * a.scale;
                if (a.alibi_slopes) x += a.alibi_slopes[head] * float(p - qpos);
                if (a.softcap > 0.f) x = a.softcap * std::tanh(x / a.softcap);
                sc[p - c0] = x;
                mx = std::max(mx, x);
            }
            float *ar = acc + int64_t(r) * d;
            const float m_new = std::max(m[r], mx);
            if (m[r] != m_new) {
                const float corr = std::exp(m[r] - m_new);  // 0 on the first chunk (m = -inf)
                l[r] *= corr;
                scale_row(ar, corr, d);
                m[r] = m_new;
            }
            float lsum = 0.f;
            for (int64_t p = lo; p < hi; ++p) {
                const float w = std::exp(sc[p - c0] - m_new);
                sc[p - c0] = w;
                lsum += w;
            }
            add_weighted_rows(ar, sc + (lo - c0), vbuf + (lo - c0) * d, int32_t(hi - lo), d);
            l[r] += lsum;
        }
    }

    const int32_t out_bytes = q_bytes;
    for (int32_t r = 0; r < rows; ++r) {
        const int32_t head = kvh * G + r % G;
        float *ar = acc + int64_t(r) * d;
        if (P.parts > 1) {
            float *dst = P.partial(s_local, part, head);
            dst[0] = m[r];
            dst[1] = l[r];
            std::memcpy(dst + 2, ar, size_t(d) * 4);
            continue;
        }
        // l > 0 always (a query sees at least itself); the guard keeps an impossible 0 finite.
        scale_row(ar, l[r] > 0.f ? 1.0f / l[r] : 0.f, d);
        const int64_t tok = q0 + j0 + r / G;
        from_float(static_cast<char *>(a.out) + (tok * qrow_elems + int64_t(head) * d) * out_bytes, ar, a.q_dtype, d);
    }
}

// Combines the partitions of (sequence, query head) `item` of the current round.
void reduce_item(const Plan &P, int64_t item) {
    const AttentionArgs &a = *P.a;
    const int32_t head = int32_t(item % a.num_q_heads);
    const int32_t s_local = int32_t(item / a.num_q_heads);
    const int32_t s = P.seq_begin + s_local;
    const int32_t d = P.d;
    float mx = kNegInf;
    for (int32_t i = 0; i < P.parts; ++i) {
        const float *pi = P.partial(s_local, i, head);
        if (pi[1] > 0.f) mx = std::max(mx, pi[0]);
    }
    Scratch &S = t_scratch;
    S.ensure(1, d);
    float *acc = S.acc.data();
    std::fill(acc, acc + d, 0.f);
    float lsum = 0.f;
    for (int32_t i = 0; i < P.parts; ++i) {
        const float *pi = P.partial(s_local, i, head);
        if (!(pi[1] > 0.f)) continue;  // empty partition (past the context or outside the window)
        const float w = std::exp(pi[0] - mx);
        lsum += w * pi[1];
        axpy(acc, w, pi + 2, d);
    }
    scale_row(acc, lsum > 0.f ? 1.0f / lsum : 0.f, d);
    const int64_t tok = a.query_start_loc[s];
    from_float(static_cast<char *>(a.out) + (tok * a.num_q_heads + head) * int64_t(d) * dtype_bytes(a.q_dtype), acc,
               a.q_dtype, d);
}

// Partitions per sequence for a decode launch: explicit size, never, or auto (split long contexts
// only when there are too few (sequence, KV head) items to keep every thread busy).
int64_t choose_partition_len(const AttentionArgs &a, int32_t nkv) {
    if (a.max_q_len != 1 || a.partition_size < 0 || a.max_seq_len <= 0) return 0;
    if (a.partition_size > 0) return a.partition_size;
    const int64_t items = int64_t(a.num_seqs) * nkv;
    const int64_t want = 4 * int64_t(parallel_width());
    if (a.max_seq_len < 2 * kAutoMinPartition || items >= want) return 0;
    const int64_t parts = (want + items - 1) / items;
    return std::max<int64_t>(kAutoMinPartition, (a.max_seq_len + parts - 1) / parts);
}


kvc_status run_attention(const AttentionArgs &a) {
    Plan P;
    P.a = &a;
    P.nkv = a.layout.num_kv_heads;
    P.group = a.num_q_heads / P.nkv;
    P.d = a.layout.head_dim;
    P.q_tile = a.max_q_len <= 1 ? 1 : std::max<int32_t>(1, kTargetRows / P.group);
    P.tiles = int32_t((std::max<int32_t>(a.max_q_len, 1) + P.q_tile - 1) / P.q_tile);
    if (a.num_seqs <= 0) return KVC_OK;

    int64_t part_len = choose_partition_len(a, P.nkv);
    int64_t parts = part_len > 0 ? (a.max_seq_len + part_len - 1) / part_len : 1;
    int64_t seqs_per_round = a.num_seqs;
    if (parts > 1) {
        // Fit the partials into the workspace: fewer partitions per sequence, then rounds.
        const int64_t per_part = int64_t(a.num_q_heads) * (2 + int64_t(P.d)) * 4;
        const int64_t fit_parts = a.workspace ? int64_t(a.workspace_bytes) / per_part : 0;
        if (fit_parts < parts) {
            parts = fit_parts;
            part_len = parts > 1 ? (a.max_seq_len + parts - 1) / parts : 0;
            if (part_len > 0) parts = (a.max_seq_len + part_len - 1) / part_len;
        }
        if (parts > 1) seqs_per_round = std::max<int64_t>(1, int64_t(a.workspace_bytes) / (per_part * parts));
    }
    if (parts <= 1) { parts = 1; part_len = 0; }
    P.parts = int32_t(parts);
    P.part_len = part_len;
    P.partials = static_cast<float *>(a.workspace);

    for (int64_t first = 0; first < a.num_seqs; first += seqs_per_round) {
        const int64_t n = std::min<int64_t>(seqs_per_round, a.num_seqs - first);
        P.seq_begin = int32_t(first);
        auto attend = [&P](int64_t item) { attend_item(P, item); };
        parallel_for_each(n * P.tiles * P.parts * P.nkv, attend);
        if (P.parts > 1) {
            auto reduce = [&P](int64_t item) { reduce_item(P, item); };
            parallel_for_each(n * a.num_q_heads, reduce);
        }
    }
    return KVC_OK;
}

}  // namespace
}  // namespace kvc
