// Register-blocked micro-kernels of the CPU attention (attention_core.inl).
//
// "Rows in lanes" (attend_lanes: a work item with at least one vector of query rows): the rows
// (query token x GQA head) sit in vector lanes, R of them (a multiple of kLanes, padding lanes zero).
//
//   qt[i * R + r]    query row r, dim i (pre-scaled by the softmax scale)
//   k[p * d + i]     key p of the chunk, dim i (gathered, fp32); v likewise
//   st[p * R + r]    score, then softmax weight, of row r for key p
//   acct[i * R + r]  output accumulator of row r, dim i
//
// Both products then need no horizontal sums: a block of NV row vectors x 4 keys (or 4 dims) keeps
// 4 NV accumulators in registers and does 4 NV FMAs per NV + 4 loads (one vector per row block, one
// broadcast element per key or dim), where a row-at-a-time dot product does one FMA per two loads.
// NV = 2 and 4 keys/dims: 8 accumulators + 3 operands, within the 16 vector registers of SSE2/AVX2;
// AVX-512's 32 registers take NV = 4 (16 accumulators + 5 operands), which halves the loads per
// FMA again: 16 FMAs per 8 loads. Same semantics at every ISA (attention.cpp, kernels_avx2.cpp,
// kernels_avx512.cpp); internal linkage, like simd.hpp.
#pragma once

#include <cstdint>

#include "cpu/simd.hpp"
#include "prefetch.hpp"

namespace kvc::cpu {

constexpr int32_t kChunk = 32;                     // context positions per K/V tile (a multiple of every kLanes)
constexpr int kRowBlock = kVecRegs >= 32 ? 4 : 2;  // row vectors per register block (NV above)

// st[p][r .. r + NV kLanes) = sum_i qt[i][r ..] * k[p][i] for keys p0 .. p0 + KP - 1, and
// mx[r ..] = max(mx[r ..], those scores): the row maxima the online softmax needs come out of the
// registers here (NV loads, maxes and stores per KP keys) instead of a pass over st afterwards.
template <int NV, int KP>
static inline void score_block(float *st, float *mx, const float *qt, const float *k, int32_t d, int32_t R, int32_t r,
                               int32_t p0) {
    fvec acc[KP][NV] = {};
    const float *kp = k + int64_t(p0) * d;
    for (int32_t i = 0; i < d; ++i) {
        fvec q[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) q[v] = loadv(qt + int64_t(i) * R + r + v * kLanes);
#pragma GCC unroll 4
        for (int j = 0; j < KP; ++j) {
            const fvec kj = splatv(kp[int64_t(j) * d + i]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; ++v) acc[j][v] += q[v] * kj;
        }
    }
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
        fvec m = loadv(mx + r + v * kLanes);
#pragma GCC unroll 4
        for (int j = 0; j < KP; ++j) {
            storev(st + int64_t(p0 + j) * R + r + v * kLanes, acc[j][v]);
            m = maxv(m, acc[j][v]);
        }
        storev(mx + r + v * kLanes, m);
    }
}

template <int NV>
static inline void score_rows(float *st, float *mx, const float *qt, const float *k, int32_t n, int32_t d, int32_t R,
                              int32_t r) {
    int32_t p = 0;
    for (; p + 4 <= n; p += 4) score_block<NV, 4>(st, mx, qt, k, d, R, r, p);
    for (; p < n; ++p) score_block<NV, 1>(st, mx, qt, k, d, R, r, p);
}

// The scores of rows r0 .. R - 1 (r0 a multiple of kLanes; default all rows) for keys 0 .. n - 1 of
// the chunk, and their maxima folded into mx[r0 .. R).
static inline void scores_lanes(float *st, float *mx, const float *qt, const float *k, int32_t n, int32_t d,
                                int32_t R, int32_t r0 = 0) {
    int32_t r = r0;
    for (; r + kRowBlock * kLanes <= R; r += kRowBlock * kLanes) score_rows<kRowBlock>(st, mx, qt, k, n, d, R, r);
    switch ((R - r) / kLanes) {
        case 3: score_rows<3>(st, mx, qt, k, n, d, R, r); break;
        case 2: score_rows<2>(st, mx, qt, k, n, d, R, r); break;
        case 1: score_rows<1>(st, mx, qt, k, n, d, R, r); break;
        default: break;
    }
}

// acct[i][r ..] = acct[i][r ..] * corr[r ..] + sum_p st[p][r ..] * v[p][i] for dims i0 .. i0 + ND - 1:
// the online softmax's rescale of the rows' accumulators folded into the P.V update.
template <int NV, int ND>
static inline void pv_block(float *acct, const float *st, const float *v, const float *corr, int32_t n, int32_t d,
                            int32_t R, int32_t r, int32_t i0) {
    fvec acc[ND][NV];
#pragma GCC unroll 4
    for (int j = 0; j < ND; ++j)
#pragma GCC unroll 4
        for (int w = 0; w < NV; ++w)
            acc[j][w] = loadv(acct + int64_t(i0 + j) * R + r + w * kLanes) * loadv(corr + r + w * kLanes);
    for (int32_t p = 0; p < n; ++p) {
        fvec wt[NV];
#pragma GCC unroll 4
        for (int w = 0; w < NV; ++w) wt[w] = loadv(st + int64_t(p) * R + r + w * kLanes);
        const float *vp = v + int64_t(p) * d + i0;
#pragma GCC unroll 4
        for (int j = 0; j < ND; ++j) {
            const fvec x = splatv(vp[j]);
#pragma GCC unroll 4
            for (int w = 0; w < NV; ++w) acc[j][w] += wt[w] * x;
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < ND; ++j)
#pragma GCC unroll 4
        for (int w = 0; w < NV; ++w) storev(acct + int64_t(i0 + j) * R + r + w * kLanes, acc[j][w]);
}

template <int NV>
static inline void pv_rows(float *acct, const float *st, const float *v, const float *corr, int32_t n, int32_t d,
                           int32_t R, int32_t r) {
    int32_t i = 0;
    for (; i + 4 <= d; i += 4) pv_block<NV, 4>(acct, st, v, corr, n, d, R, r, i);
    for (; i < d; ++i) pv_block<NV, 1>(acct, st, v, corr, n, d, R, r, i);
}

// Every row's accumulator rescaled by corr and updated with the chunk's n weighted value rows.
static inline void pv_lanes(float *acct, const float *st, const float *v, const float *corr, int32_t n, int32_t d,
                            int32_t R) {
    int32_t r = 0;
    for (; r + kRowBlock * kLanes <= R; r += kRowBlock * kLanes) pv_rows<kRowBlock>(acct, st, v, corr, n, d, R, r);
    switch ((R - r) / kLanes) {
        case 3: pv_rows<3>(acct, st, v, corr, n, d, R, r); break;
        case 2: pv_rows<2>(acct, st, v, corr, n, d, R, r); break;
        case 1: pv_rows<1>(acct, st, v, corr, n, d, R, r); break;
        default: break;
    }
}

// "Rows in memory order" (attend_rows: fewer rows than a vector, i.e. decode with small GQA groups):
//
//   q[r * d + i]        query row r, dim i (pre-scaled)
//   s[r * kChunk + j]   score, then weight, of row r for key j
//   acc[r * d + i]      output accumulator of row r
//   kr.row(j), vr.row(j) key / value row j of the chunk: d elements (fp32, or fp16 in place)
//
// K and V come as one pointer per row, not as a packed buffer, so that fp32 and (with F16C) fp16
// caches are read where they lie in the pool and converted in registers: decode uses each K/V
// element once per row block, and a gather into a buffer first costs a store and a reload of every
// element on top of the cache read -- for fp32 a whole extra copy. The others (and the cases where
// that measured slower: attend_item) still go through the packed fp32 buffer.
//
// Scores: kLanes accumulators of (row, key) pairs folded into one vector of kLanes scores by
// hsum_lanes, instead of a horizontal sum per (row, key). Keys n .. n_padded - 1 (n_padded: n
// rounded up to kLanes, at most kChunk) are computed too (their row pointers repeat a valid row);
// the caller overwrites them with -inf.
//
// Four rows at once against kLanes / 4 keys: 4 query and kLanes / 4 key loads per kLanes FMAs
// (every loaded vector used 4 or kLanes / 4 times), where one row against kLanes keys loads a key
// vector per FMA; the kLanes (row, key) sums again come out of one hsum_lanes.

// kLanes elements of a K/V row as fp32: a plain load, or fp16 through the F16C converter.
static inline fvec load_row(const float *p) { return loadv(p); }
static inline float load_elem(const float *p) { return *p; }
#if defined(KVC_SIMD_AVX512)
static inline fvec load_row(const uint16_t *p) {
    return (fvec)_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
}
#elif defined(KVC_SIMD_AVX2)
static inline fvec load_row(const uint16_t *p) {
    return (fvec)_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
}
#endif
static inline float load_elem(const uint16_t *p) { return half_to_float(*p); }
// A bf16 element read in place: its own type, since fp16 (uint16_t above) is 16 bits too. bf16 is
// the top half of an fp32, so widening and shifting converts it exactly.
struct Bf16 {
    uint16_t bits;
};
#if defined(KVC_SIMD_AVX512)
static inline fvec load_row(const Bf16 *p) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
    return (fvec)_mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
#elif defined(KVC_SIMD_AVX2)
static inline fvec load_row(const Bf16 *p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    return (fvec)_mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
#endif
static inline float load_elem(const Bf16 *p) { return bf16_to_float(p->bits); }
// An fp8 e4m3 element read in place, as its value / 256 (simd.hpp, fp8v_div256: for AVX2 /
// AVX-512 an exact move into fp16's fields and F16C's converter): attend_rows folds the K scale
// (x 256) into q and the V scale (x 256) into the output, so no multiply per element.
struct Fp8 {
    uint8_t bits;
};
constexpr float kFp8InPlace = 256.f;
static inline fvec load_row(const Fp8 *p) { return fp8v_div256(&p->bits); }
static inline float load_elem(const Fp8 *p) { return fp8_e4m3_to_float(p->bits) * (1.f / kFp8InPlace); }

// The chunk's K or V rows: packed fp32 rows of a gather buffer (row j at base + j d: plain
// address arithmetic, as fast as before the in-place path existed), or one pointer per row.
struct PackedRows {
    const float *base;
    int32_t d;
    const float *row(int32_t j) const { return base + int64_t(j) * d; }
    void prefetch_next(int32_t) const {}
    PackedRows without_prefetch() const { return *this; }
};
// The rows are K's pointers plus `delta` bytes: 0 for K, the layout's kv_stride for V (a V row
// lies kv_stride bytes past its K row), so one pointer table per chunk serves both.
template <typename E>
struct RowPointers {
    const E *const *p;
    int64_t delta = 0;
    // The next chunk's rows (nullptr: none), prefetched into L1 one row per row used here: K in
    // scores_rows4, V in pv_rows_block (attention_core.inl, PrefetchStream's comment). Through
    // prefetch_read's volatile asm, not __builtin_prefetch: GCC found this function pure and
    // deleted every call, and the in-place decode path ran with no software prefetch at all
    // (tests/bench/RESULTS.md, session 20; tests/codegen/prefetch_kept.sh guards it). Into L1:
    // ~8 % faster batched decode than into L2 (prefetcht2).
    const E *const *next = nullptr;
    int32_t row_bytes = 0;
    const E *row(int32_t j) const { return reinterpret_cast<const E *>(reinterpret_cast<const char *>(p[j]) + delta); }
    void prefetch_next(int32_t j) const {
        if (!next) return;
        const char *r = reinterpret_cast<const char *>(next[j]) + delta;
        for (int32_t o = 0; o < row_bytes; o += 64) prefetch_read(r + o);
    }
    // The same rows for a second block of rows: the next chunk is prefetched once.
    RowPointers without_prefetch() const { return RowPointers{p, delta, nullptr, 0}; }
};

// Stores sums (lane r * kLanes / 4 + j: row r, key j) as 4 rows of kLanes / 4 scores, kChunk
// floats apart, straight from the register: written element by element, GCC spilled the vector
// and read it back in pieces (a store-forwarding stall per row).
static inline void store_row_groups(float *s, fvec sums) {
#if defined(KVC_SIMD_AVX512)
    const __m512 v = (__m512)sums;
    _mm_storeu_ps(s, _mm512_castps512_ps128(v));
    _mm_storeu_ps(s + kChunk, _mm512_extractf32x4_ps(v, 1));
    _mm_storeu_ps(s + 2 * kChunk, _mm512_extractf32x4_ps(v, 2));
    _mm_storeu_ps(s + 3 * kChunk, _mm512_extractf32x4_ps(v, 3));
#elif defined(KVC_SIMD_AVX2)
    const __m256 v = (__m256)sums;
    const __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    _mm_storel_pi(reinterpret_cast<__m64 *>(s), lo);
    _mm_storeh_pi(reinterpret_cast<__m64 *>(s + kChunk), lo);
    _mm_storel_pi(reinterpret_cast<__m64 *>(s + 2 * kChunk), hi);
    _mm_storeh_pi(reinterpret_cast<__m64 *>(s + 3 * kChunk), hi);
#else
    constexpr int KB = kLanes / 4;
    for (int r = 0; r < 4; ++r)
        for (int j = 0; j < KB; ++j) s[r * kChunk + j] = sums[r * KB + j];
#endif
}

template <class Rows>
static inline void scores_rows4(float *s, const float *q, const Rows &kr, int32_t r0, int32_t n_padded, int32_t d) {
    constexpr int KB = kLanes / 4;
    for (int32_t j0 = 0; j0 < n_padded; j0 += KB) {
        decltype(kr.row(0)) kj[KB];
#pragma GCC unroll 4
        for (int j = 0; j < KB; ++j) kj[j] = kr.row(j0 + j);
#pragma GCC unroll 4
        for (int j = 0; j < KB; ++j) kr.prefetch_next(j0 + j);
        fvec acc[kLanes] = {};
        int32_t i = 0;
        for (; i + kLanes <= d; i += kLanes) {
            fvec qv[4], kv[KB];
#pragma GCC unroll 4
            for (int r = 0; r < 4; ++r) qv[r] = loadv(q + int64_t(r0 + r) * d + i);
#pragma GCC unroll 4
            for (int j = 0; j < KB; ++j) kv[j] = load_row(kj[j] + i);
#pragma GCC unroll 4
            for (int r = 0; r < 4; ++r)
#pragma GCC unroll 4
                for (int j = 0; j < KB; ++j) acc[r * KB + j] += qv[r] * kv[j];
        }
        fvec sums = hsum_lanes(acc);
        for (; i < d; ++i)  // head dims that are not a multiple of the vector
            for (int r = 0; r < 4; ++r)
                for (int j = 0; j < KB; ++j) sums[r * KB + j] += q[int64_t(r0 + r) * d + i] * load_elem(kj[j] + i);
        store_row_groups(s + int64_t(r0) * kChunk + j0, sums);
    }
}

// Rows left over by the blocks of four: one row against kLanes keys at a time (one query load and
// kLanes key loads per kLanes FMAs).
template <class Rows>
static inline void scores_rows(float *s, const float *q, const Rows &kr, int32_t rows, int32_t n_padded, int32_t d) {
    int32_t r0 = 0;
    for (; r0 + 4 <= rows; r0 += 4) scores_rows4(s, q, r0 == 0 ? kr : kr.without_prefetch(), r0, n_padded, d);
    for (int32_t r = r0; r < rows; ++r) {
        const float *qr = q + int64_t(r) * d;
        for (int32_t j0 = 0; j0 < n_padded; j0 += kLanes) {
            if (r == 0)  // no block of four rows prefetched the next chunk's keys
                for (int j = 0; j < kLanes; ++j) kr.prefetch_next(j0 + j);
            fvec acc[kLanes] = {};
            int32_t i = 0;
            for (; i + kLanes <= d; i += kLanes) {
                const fvec qv = loadv(qr + i);
#pragma GCC unroll 8
                for (int j = 0; j < kLanes; ++j) acc[j] += qv * load_row(kr.row(j0 + j) + i);
            }
            fvec sums = hsum_lanes(acc);
            for (; i < d; ++i)  // head dims that are not a multiple of the vector (CPU: any)
                for (int j = 0; j < kLanes; ++j) sums[j] += qr[i] * load_elem(kr.row(j0 + j) + i);
            storev(s + int64_t(r) * kChunk + j0, sums);
        }
    }
}

// acc[r] = acc[r] * corr[r] + sum_j s[r][j] * v[j] for rows r0 .. r0 + NR - 1: each value vector
// loaded once for NR rows (NR x kPvVecs accumulators over kPvVecs vectors of dims: 2 in 16
// registers, 4 in AVX-512's 32, which halves the weight broadcasts per FMA).
constexpr int kPvVecs = kVecRegs >= 32 ? 4 : 2;
template <int NR, class Rows>
static inline void pv_rows_block(float *acc, const float *s, const Rows &vr, const float *corr, int32_t n, int32_t d,
                                 int32_t r0) {
    constexpr int DV = kPvVecs;
    int32_t i = 0;
    for (; i + DV * kLanes <= d; i += DV * kLanes) {
        fvec a[NR][DV];
#pragma GCC unroll 4
        for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
            for (int u = 0; u < DV; ++u) a[r][u] = loadv(acc + int64_t(r0 + r) * d + i + u * kLanes) * corr[r0 + r];
        for (int32_t j = 0; j < n; ++j) {
            if (i == 0) vr.prefetch_next(j);
            const auto *vj = vr.row(j) + i;
            fvec x[DV];
#pragma GCC unroll 4
            for (int u = 0; u < DV; ++u) x[u] = load_row(vj + u * kLanes);
#pragma GCC unroll 4
            for (int r = 0; r < NR; ++r) {
                const fvec w = splatv(s[int64_t(r0 + r) * kChunk + j]);
#pragma GCC unroll 4
                for (int u = 0; u < DV; ++u) a[r][u] += w * x[u];
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
            for (int u = 0; u < DV; ++u) storev(acc + int64_t(r0 + r) * d + i + u * kLanes, a[r][u]);
    }
    for (; i < d; ++i)  // head dims that are not a multiple of the dim block
        for (int r = 0; r < NR; ++r) {
            float x = acc[int64_t(r0 + r) * d + i] * corr[r0 + r];
            for (int32_t j = 0; j < n; ++j) x += s[int64_t(r0 + r) * kChunk + j] * load_elem(vr.row(j) + i);
            acc[int64_t(r0 + r) * d + i] = x;
        }
}

template <class Rows>
static inline void pv_rows(float *acc, const float *s, const Rows &vr, const float *corr, int32_t rows, int32_t n,
                           int32_t d) {
    int32_t r = 0;
    for (; r + 4 <= rows; r += 4) pv_rows_block<4>(acc, s, r == 0 ? vr : vr.without_prefetch(), corr, n, d, r);
    const Rows rest = r == 0 ? vr : vr.without_prefetch();
    switch (rows - r) {
        case 3: pv_rows_block<3>(acc, s, rest, corr, n, d, r); break;
        case 2: pv_rows_block<2>(acc, s, rest, corr, n, d, r); break;
        case 1: pv_rows_block<1>(acc, s, rest, corr, n, d, r); break;
        default: break;
    }
}

}  // namespace kvc::cpu
