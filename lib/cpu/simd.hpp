// fp32 vector helpers written with GCC/Clang vector extensions. The kernels' inner loops run over
// head_dim (contiguous); spelling them with native-width vectors makes them vectorized at any -O
// level and with whatever ISA the compiler targets.
#pragma once

#include <cstdint>
#include <cstring>

#include "cpu/dtype_convert.hpp"
#if defined(KVC_SIMD_AVX2) || defined(KVC_SIMD_AVX512)
#include <immintrin.h>
#endif

// Every helper is `static inline`: the file is compiled into several instruction-set variants of
// the attention kernel (attention_core.inl), and internal linkage keeps the variants from merging
// at link time. They pass vectors by value but never across a TU, so GCC's note that this ABI
// differs between AVX and non-AVX builds does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace kvc::cpu {

typedef float f32x4 __attribute__((vector_size(16)));
typedef int32_t i32x4 __attribute__((vector_size(16)));
typedef uint16_t u16x4 __attribute__((vector_size(8)));

// The native fp32 vector of the target: 4 lanes (SSE2, the x86-64 baseline), 8 with AVX, 16 with
// AVX-512. Wider-than-native generic vectors get split and spilled by GCC, so the loops use this
// width. KVC_SIMD_AVX2 / KVC_SIMD_AVX512 are set by the variants (kernels_avx2.cpp,
// kernels_avx512.cpp), whose target pragmas do not define __AVX__ / __AVX512F__ in C++.
// kVecRegs: the architectural vector registers, which bound the register blocking of the tiles.
#if defined(KVC_SIMD_AVX512)
constexpr int kLanes = 16;
constexpr int kVecRegs = 32;
#elif defined(__AVX__) || defined(KVC_SIMD_AVX2)
constexpr int kLanes = 8;
constexpr int kVecRegs = 16;
#else
constexpr int kLanes = 4;
constexpr int kVecRegs = 16;
#endif
typedef float fvec __attribute__((vector_size(kLanes * 4)));
typedef int32_t ivec __attribute__((vector_size(kLanes * 4)));

static inline fvec loadv(const float *p) {
    fvec v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
static inline void storev(float *p, fvec v) { std::memcpy(p, &v, sizeof v); }
// A broadcast (vbroadcastss, from memory where x is loaded: a load-port uop). Not `fvec{} + x`:
// that is an fp add (0 + -0 is +0, so it cannot be folded) on the FMA ports; not an element-wise
// initialization either: GCC builds that vector on the stack, lane by lane. __builtin_shuffle is
// GCC's; clang (the fuzz build, baseline only) keeps the add.
static inline fvec splatv(float x) {
#if defined(KVC_SIMD_AVX512)
    return (fvec)_mm512_set1_ps(x);
#elif defined(KVC_SIMD_AVX2)
    return (fvec)_mm256_set1_ps(x);
#elif defined(__GNUC__) && !defined(__clang__)
    return __builtin_shuffle(fvec{x}, ivec{});
#else
    return fvec{} + x;
#endif
}

// The sum and the maximum of v's lanes: a tree of shuffles on AVX2 / AVX-512 (log2 kLanes steps,
// where a lane-by-lane loop is a serial chain of kLanes scalar ops), a plain loop on the baseline.
static inline float hsum(fvec v) {
#if defined(KVC_SIMD_AVX512)
    return _mm512_reduce_add_ps((__m512)v);
#elif defined(KVC_SIMD_AVX2)
    __m128 x = _mm_add_ps(_mm256_castps256_ps128((__m256)v), _mm256_extractf128_ps((__m256)v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
#else
    float s = 0.f;
    for (int i = 0; i < kLanes; ++i) s += v[i];
    return s;
#endif
}
static inline float hmax(fvec v) {
#if defined(KVC_SIMD_AVX512)
    return _mm512_reduce_max_ps((__m512)v);
#elif defined(KVC_SIMD_AVX2)
    __m128 x = _mm_max_ps(_mm256_castps256_ps128((__m256)v), _mm256_extractf128_ps((__m256)v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_max_ss(x, _mm_movehdup_ps(x)));
#else
    float m = v[0];
    for (int i = 1; i < kLanes; ++i) m = m < v[i] ? v[i] : m;
    return m;
#endif
}

// Four fp16 values to fp32; same bit trick as half_to_float, lane-parallel. 128-bit signed lanes
// and an explicit mask blend map one-to-one onto SSE2 (wider or unsigned compares get scalarized).
static inline f32x4 half4_to_float(const uint16_t *p) {
    u16x4 h;
    std::memcpy(&h, p, sizeof h);
    i32x4 x = __builtin_convertvector(h, i32x4);
    i32x4 sign = (x & 0x8000) << 16;
    i32x4 em = x & 0x7fff;
    // Normals: integer exponent rebias (15 -> 127); subnormals: exact int -> float times 2^-24
    // (no denormal operands, which trap to slow microcode on x86); inf/NaN: exponent all ones.
    i32x4 normal = (em << 13) + (112 << 23);
    i32x4 sub = (i32x4)(__builtin_convertvector(em, f32x4) * 0x1p-24f);
    i32x4 is_sub = em<0x400, special = em> 0x7bff;
    i32x4 body = (is_sub & sub) | (~is_sub & normal);
    body = (special & ((em << 13) | 0x7f800000)) | (~special & body);
    return (f32x4)(sign | body);
}

static inline void bf16_to_float_row(float *dst, const uint16_t *src, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        u16x4 h;
        std::memcpy(&h, src + i, sizeof h);
        const i32x4 x = __builtin_convertvector(h, i32x4) << 16;
        std::memcpy(dst + i, &x, sizeof x);
    }
    for (; i < n; ++i) dst[i] = bf16_to_float(src[i]);
}

// fp8 e4m3 to fp32, kLanes at a time (0x7f / 0xff are NaN). Native width: 4 lanes on SSE2, 8 on AVX2.
typedef uint8_t u8vec __attribute__((vector_size(kLanes)));
// kLanes bytes zero-extended to int32 lanes (GCC scalarizes the generic conversion on AVX2).
static inline ivec widen_u8(const uint8_t *p) {
#if defined(KVC_SIMD_AVX512)
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    ivec r;
    std::memcpy(&r, &v, sizeof r);
    return r;
#elif defined(KVC_SIMD_AVX2)
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p)));
    ivec r;
    std::memcpy(&r, &v, sizeof r);
    return r;
#else
    u8vec b;
    std::memcpy(&b, p, sizeof b);
    return __builtin_convertvector(b, ivec);
#endif
}

// kLanes fp8 e4m3 values / 256, exactly. With AVX2 / AVX-512 (F16C): e4m3's bits moved into an
// fp16's fields (sign to bit 15, exponent and mantissa to bits 7..13) are an fp16 whose value is
// exactly the fp8's / 2^8, subnormals included (both formats' exponents step alike; fp16's bias is
// 15, e4m3's 7), so the hardware converter does the rest; only NaN (0x7f / 0xff) would come out
// as 1.875 / 256 and is put back by a compare. Decode 16x1024 fp8 read in place: 1.4x at AVX-512
// against the integer rebias below, which the other targets keep.
static inline fvec fp8v_div256(const uint8_t *p) {
#if defined(KVC_SIMD_AVX512)
    const __m256i x = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    const __m256i em = _mm256_and_si256(x, _mm256_set1_epi16(0x7f));
    const __m256i h = _mm256_or_si256(_mm256_slli_epi16(em, 7),
                                      _mm256_and_si256(_mm256_slli_epi16(x, 8), _mm256_set1_epi16(-32768)));
    const __mmask16 nan = _mm256_cmpeq_epi16_mask(em, _mm256_set1_epi16(0x7f));
    return (fvec)_mm512_mask_mov_ps(_mm512_cvtph_ps(h), nan, _mm512_set1_ps(__builtin_nanf("")));
#elif defined(KVC_SIMD_AVX2)
    const __m128i x = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p)));
    const __m128i em = _mm_and_si128(x, _mm_set1_epi16(0x7f));
    const __m128i h = _mm_or_si128(_mm_slli_epi16(em, 7), _mm_and_si128(_mm_slli_epi16(x, 8), _mm_set1_epi16(-32768)));
    const __m256i nan = _mm256_cvtepi16_epi32(_mm_cmpeq_epi16(em, _mm_set1_epi16(0x7f)));
    return (fvec)_mm256_blendv_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(__builtin_nanf("")), _mm256_castsi256_ps(nan));
#else
    ivec x = widen_u8(p);
    ivec sign = (x & 0x80) << 24;
    ivec em = x & 0x7f;
    // Normals: rebias the exponent with an integer add (7 -> 127, less 8 for the / 256).
    // Subnormals (exponent 0): an exact int -> float conversion times 2^-17; never a denormal
    // operand (those trap to slow microcode on x86).
    ivec normal = (em << 20) + (112 << 23);
    ivec sub = (ivec)(__builtin_convertvector(em, fvec) * 0x1p-17f);
    ivec is_sub = em < 0x08, nan = em == 0x7f;
    ivec body = (is_sub & sub) | (~is_sub & normal);
    body = (nan & 0x7fc00000) | (~nan & body);
    return (fvec)(sign | body);
#endif
}

// kLanes fp8 e4m3 values to fp32, times scale.
static inline fvec fp8v_to_float(const uint8_t *p, float scale) { return fp8v_div256(p) * (scale * 256.f); }

#if defined(KVC_SIMD_AVX2) || defined(KVC_SIMD_AVX512)
// The AVX2 transposing reduction below, on 8 vectors of 8 lanes.
static inline __m256 hsum8_m256(const __m256 *v) {
    const __m256 h01 = _mm256_hadd_ps(v[0], v[1]), h23 = _mm256_hadd_ps(v[2], v[3]);
    const __m256 h45 = _mm256_hadd_ps(v[4], v[5]), h67 = _mm256_hadd_ps(v[6], v[7]);
    // Each 128-bit half of h0123 holds partial sums of vectors 0..3 (low half: their low lanes).
    const __m256 h0123 = _mm256_hadd_ps(h01, h23), h4567 = _mm256_hadd_ps(h45, h67);
    const __m256 lo = _mm256_permute2f128_ps(h0123, h4567, 0x20), hi = _mm256_permute2f128_ps(h0123, h4567, 0x31);
    return _mm256_add_ps(lo, hi);
}
#endif

// The horizontal sums of kLanes vectors as one vector: lane j = the sum of v[j]'s lanes. AVX: a
// transposing reduction (hadd, hadd, one cross-half add: 7 instructions for 8 sums, where 8
// separate sums take about 8 each); AVX-512 the same idea with 512-bit shuffles (below); the SSE2
// baseline sums each vector on its own.
static inline fvec hsum_lanes(const fvec (&v)[kLanes]) {
#if defined(KVC_SIMD_AVX512)
    // A 512-bit tree, each level halving the vectors and doubling the sums' packing: 46
    // instructions for 16 sums (the two 256-bit reductions it replaces took about 75, with spills).
    // 1. Pairs (x, y): [x.q0 + x.q2, x.q1 + x.q3, y.q0 + y.q2, y.q1 + y.q3] (q: 128-bit lanes).
    __m512 a[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
        const __m512 x = (__m512)v[2 * k], y = (__m512)v[2 * k + 1];
        a[k] = _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x44), _mm512_shuffle_f32x4(x, y, 0xee));
    }
    // 2. 128-bit lane j of b[m] holds 4 partial sums of v[4m + j].
    __m512 b[4];
#pragma GCC unroll 4
    for (int m = 0; m < 4; ++m)
        b[m] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * m], a[2 * m + 1], 0x88),
                             _mm512_shuffle_f32x4(a[2 * m], a[2 * m + 1], 0xdd));
    // 3. Within each 128-bit lane j: c0 = [v[j] v[4+j] v[j] v[4+j]] halves, c1 likewise for 8 / 12.
    const __m512 c0 = _mm512_add_ps(_mm512_unpacklo_ps(b[0], b[1]), _mm512_unpackhi_ps(b[0], b[1]));
    const __m512 c1 = _mm512_add_ps(_mm512_unpacklo_ps(b[2], b[3]), _mm512_unpackhi_ps(b[2], b[3]));
    // 4. Lane 4 j + m = the sum of v[4 m + j]; one permute puts sum e at lane e.
    const __m512 t = _mm512_add_ps(
        _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(c0), _mm512_castps_pd(c1))),
        _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(c0), _mm512_castps_pd(c1))));
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return (fvec)_mm512_permutexvar_ps(idx, t);
#elif defined(KVC_SIMD_AVX2)
    __m256 x[8];
    for (int j = 0; j < 8; ++j) x[j] = (__m256)v[j];
    return (fvec)hsum8_m256(x);
#else
    fvec r{};
    for (int j = 0; j < kLanes; ++j) r[j] = hsum(v[j]);
    return r;
#endif
}

// A kLanes x kLanes block transposed: dst[i * ds + j] = src[j * ss + i] for i, j < kLanes. Moves
// the query rows into the lanes of the rows-in-lanes tiles and the accumulators back out
// (attention_core.inl, attend_lanes): element by element that took 2 scalar loads and stores per
// value at a stride of a whole tile row, 3-4% of prefill; here 64 shuffles per 256 values
// (AVX-512: 32-bit, then 64-bit interleaves give 4 x 4 transposes inside each 128-bit lane, two
// rounds of 128-bit lane shuffles finish it), 24 per 64 at AVX2; a plain loop on the baseline.
static inline void transpose_block(float *dst, int64_t ds, const float *src, int64_t ss) {
#if defined(KVC_SIMD_AVX512)
    __m512 r[16], t[16];
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) r[k] = _mm512_loadu_ps(src + k * ss);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
        t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    // u[4k + m], 128-bit lane L: column 4L + m of rows 4k .. 4k + 3.
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
        const __m512d a = _mm512_castps_pd(t[4 * k]), b = _mm512_castps_pd(t[4 * k + 1]);
        const __m512d c = _mm512_castps_pd(t[4 * k + 2]), e = _mm512_castps_pd(t[4 * k + 3]);
        r[4 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[4 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[4 * k + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, e));
        r[4 * k + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, e));
    }
    // Row 4L + m of the result: lane L of u[m], u[4 + m], u[8 + m], u[12 + m].
#pragma GCC unroll 4
    for (int m = 0; m < 4; ++m) {
        const __m512 x0 = _mm512_shuffle_f32x4(r[m], r[4 + m], 0x44), x1 = _mm512_shuffle_f32x4(r[m], r[4 + m], 0xee);
        const __m512 x2 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0x44);
        const __m512 x3 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0xee);
        _mm512_storeu_ps(dst + (0 + m) * ds, _mm512_shuffle_f32x4(x0, x2, 0x88));
        _mm512_storeu_ps(dst + (4 + m) * ds, _mm512_shuffle_f32x4(x0, x2, 0xdd));
        _mm512_storeu_ps(dst + (8 + m) * ds, _mm512_shuffle_f32x4(x1, x3, 0x88));
        _mm512_storeu_ps(dst + (12 + m) * ds, _mm512_shuffle_f32x4(x1, x3, 0xdd));
    }
#elif defined(KVC_SIMD_AVX2)
    __m256 r[8], t[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(src + k * ss);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
        t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
#pragma GCC unroll 2
    for (int k = 0; k < 2; ++k) {
        const __m256d a = _mm256_castps_pd(t[4 * k]), b = _mm256_castps_pd(t[4 * k + 1]);
        const __m256d c = _mm256_castps_pd(t[4 * k + 2]), e = _mm256_castps_pd(t[4 * k + 3]);
        r[4 * k] = _mm256_castpd_ps(_mm256_unpacklo_pd(a, c));
        r[4 * k + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(a, c));
        r[4 * k + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(b, e));
        r[4 * k + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(b, e));
    }
#pragma GCC unroll 4
    for (int m = 0; m < 4; ++m) {
        _mm256_storeu_ps(dst + m * ds, _mm256_permute2f128_ps(r[m], r[4 + m], 0x20));
        _mm256_storeu_ps(dst + (4 + m) * ds, _mm256_permute2f128_ps(r[m], r[4 + m], 0x31));
    }
#else
    for (int i = 0; i < kLanes; ++i)
        for (int j = 0; j < kLanes; ++j) dst[i * ds + j] = src[j * ss + i];
#endif
}

// Lane-wise select and max (bit masks from vector compares: all ones where true).
static inline fvec selectv(ivec mask, fvec a, fvec b) { return (fvec)(((ivec)a & mask) | ((ivec)b & ~mask)); }
static inline fvec maxv(fvec a, fvec b) { return selectv(a > b, a, b); }

// e^x lane-wise in fp32 (within a few ulp), exactly 0 below -87.3 (-inf included: the softmax
// relies on masked scores weighing nothing). Range reduction x = n ln2 + r with |r| <= ln2 / 2
// (ln2 split in two parts so n ln2 is exact enough), a degree-6 polynomial for e^r (the classic
// Cephes expf coefficients), and 2^n put straight into the exponent bits.
static inline fvec expv(fvec x) {
#if defined(KVC_SIMD_AVX512)
    // Same reduction and polynomial; AVX-512 does the rounding (vrndscaleps), the clamps (vmaxps /
    // vminps, operands ordered so that a NaN x stays NaN) and 2^n (vscalefps, masked to 0 where x
    // underflows) in one instruction each: about 15 vector ops where the generic code takes about
    // 22. This loop is most of the prefill's softmax pass.
    const __m512 xi = (__m512)x;
    const __mmask16 keep = _mm512_cmp_ps_mask(xi, _mm512_set1_ps(-87.3f), _CMP_NLT_UQ);
    const __m512 xc = _mm512_min_ps(_mm512_set1_ps(88.0f), _mm512_max_ps(_mm512_set1_ps(-87.3f), xi));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.9875691500e-4f), r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
    return (fvec)_mm512_maskz_scalef_ps(keep, p, n);
#else
    const ivec underflow = x < splatv(-87.3f);
    x = selectv(underflow, splatv(-87.3f), x);
    x = selectv(x > splatv(88.0f), splatv(88.0f), x);
    const fvec n = (x * 1.44269504088896341f + 0x1.8p23f) - 0x1.8p23f;  // round to nearest
    fvec r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    fvec p = splatv(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const ivec bits = (__builtin_convertvector(n, ivec) + 127) << 23;
    return (fvec)((ivec)(p * (fvec)bits) & ~underflow);
#endif
}

// 2^x lane-wise in fp32 for the softmax's exponents in base 2 (attend_lanes: scores pre-multiplied
// by log2 e through q), exactly 0 below -126 (-inf included). Base 2 needs no ln2 range reduction:
// x = n + f with |f| <= 1/2, 2^f from a degree-6 polynomial (relative-error fit on [-1/2, 1/2],
// 1.9e-9 in exact arithmetic, below 1e-7 in fp32), 2^n into the exponent. AVX-512: 10 vector ops
// where expv takes 16 (no clamps: an input below -126 is zeroed by the mask whatever the polynomial
// made of it, -inf's NaN included; a NaN input keeps the mask and stays NaN).
static inline fvec exp2v(fvec x) {
    constexpr float c1 = 0.6931471824645996f, c2 = 0.24022646248340607f, c3 = 0.05550328642129898f,
                    c4 = 0.009618489071726799f, c5 = 0.0013399930903688073f, c6 = 0.00015345752763096243f;
#if defined(KVC_SIMD_AVX512)
    const __m512 xi = (__m512)x;
    const __mmask16 keep = _mm512_cmp_ps_mask(xi, _mm512_set1_ps(-126.f), _CMP_NLT_UQ);
    const __m512 n = _mm512_roundscale_ps(xi, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(xi, n);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(c6), f, _mm512_set1_ps(c5));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(c4));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(c3));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(c2));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(c1));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.f));
    return (fvec)_mm512_maskz_scalef_ps(keep, p, n);
#else
    const ivec underflow = x < splatv(-126.f);
    x = selectv(underflow, splatv(-126.f), x);
    x = selectv(x > splatv(127.f), splatv(127.f), x);
    const fvec n = (x + 0x1.8p23f) - 0x1.8p23f;  // round to nearest
    const fvec f = x - n;
    fvec p = splatv(c6);
    p = p * f + c5;
    p = p * f + c4;
    p = p * f + c3;
    p = p * f + c2;
    p = p * f + c1;
    p = p * f + 1.0f;
    const ivec bits = (__builtin_convertvector(n, ivec) + 127) << 23;
    return (fvec)((ivec)(p * (fvec)bits) & ~underflow);
#endif
}

// y[i] = y[i] * c
static inline void scale_row(float *y, float c, int32_t n) {
    int32_t i = 0;
    for (; i + kLanes <= n; i += kLanes) storev(y + i, loadv(y + i) * c);
    for (; i < n; ++i) y[i] *= c;
}

// y[i] += p * x[i]
static inline void axpy(float *y, float p, const float *x, int32_t n) {
    int32_t i = 0;
    for (; i + kLanes <= n; i += kLanes) storev(y + i, loadv(y + i) + p * loadv(x + i));
    for (; i < n; ++i) y[i] += p * x[i];
}

}  // namespace kvc::cpu
