// Row conversions between the storage dtypes and fp32, compiled into every instruction-set variant
// of the CPU kernels (attention_core.inl reads K/V/q and writes out with them, cache_write_core.inl
// stores K/V with them). The encoders give exactly the bits of the scalar ones in dtype_convert.hpp
// (round to nearest even, the same NaN, saturation and subnormal results) at every ISA, so the
// cache's bytes do not depend on the machine; test_kernels_cpu checks each variant against them.
// Internal linkage, like simd.hpp.
#pragma once

#include <cstdint>
#include <cstring>

#include "cpu/dtype_convert.hpp"
#include "cpu/simd.hpp"
#if defined(__F16C__) || defined(KVC_SIMD_AVX2) || defined(KVC_SIMD_AVX512)
#define KVC_SIMD_F16C 1
#include <immintrin.h>
#endif

namespace kvc::cpu {

typedef uint32_t uvec __attribute__((vector_size(kLanes * 4)));
typedef uint16_t u16vec __attribute__((vector_size(kLanes * 2)));

// n contiguous elements of `dtype` to fp32, times `scale` (the FP8 dequantization scale).
static inline void to_float(float *dst, const void *src, int32_t dtype, int64_t n, float scale) {
    int64_t i = 0;
    switch (dtype) {
        case KVC_DTYPE_F32: std::memcpy(dst, src, size_t(n) * 4); return;
        case KVC_DTYPE_F16: {
            const uint16_t *s = static_cast<const uint16_t *>(src);
#if defined(KVC_SIMD_AVX512)
            for (; i + 16 <= n; i += 16)
                _mm512_storeu_ps(dst + i,
                                 _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(s + i))));
#endif
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
#if defined(KVC_SIMD_AVX512)
            for (; i + 16 <= n; i += 16) {
                const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(s + i)));
                _mm512_storeu_si512(dst + i, _mm512_slli_epi32(w, 16));
            }
#endif
            bf16_to_float_row(dst + i, s + i, n - i);
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

#if defined(KVC_SIMD_AVX2) || defined(KVC_SIMD_AVX512)
// kLanes fp32 values to fp16 with the hardware converter (round to nearest even, overflow to
// infinity, subnormals exact); NaN lanes are first made sign | quiet NaN with no payload, which
// converts to float_to_half's sign | 0x7e00 (the converter would keep payload bits).
static inline void halfv_store(uint16_t *dst, fvec x) {
    const ivec b = (ivec)x;
    const ivec nan = (b & 0x7fffffff) > 0x7f800000;
    x = (fvec)((nan & ((b & int32_t(0x80000000)) | 0x7fc00000)) | (~nan & b));
#if defined(KVC_SIMD_AVX512)
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst),
                        _mm512_cvtps_ph((__m512)x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#else
    _mm_storeu_si128(reinterpret_cast<__m128i *>(dst),
                     _mm256_cvtps_ph((__m256)x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
}

// Lane-wise a where mask (all ones), else b.
static inline uvec pick(uvec mask, uvec a, uvec b) { return (mask & a) | (~mask & b); }

// kLanes fp32 values to bf16: float_to_bf16 lane-parallel (integer rounding to even, quiet NaN).
static inline void bf16v_store(uint16_t *dst, fvec x) {
    const uvec b = (uvec)x;
    const uvec nan = (uvec)((b & 0x7fffffffu) > 0x7f800000u);
    const uvec r = pick(nan, (b >> 16) | 0x40u, (b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
    const u16vec h = __builtin_convertvector(r, u16vec);
    std::memcpy(dst, &h, sizeof h);
}

// kLanes fp32 values to fp8 e4m3: float_to_fp8_e4m3 lane-parallel (NaN stays NaN, saturation at
// 448, normals rounded to even with an integer add, subnormals by the 2^23 add-and-subtract).
static inline void fp8v_store(uint8_t *dst, fvec f) {
    const uvec b = (uvec)f;
    const uvec sign = (b >> 24) & 0x80u;
    const uvec x = b & 0x7fffffffu;
    const uvec nan = (uvec)(x > 0x7f800000u), big = (uvec)(x >= 0x43e00000u), normal = (uvec)(x >= 0x3c800000u);
    uvec code = ((x + 0x7ffffu + ((x >> 20) & 1u)) >> 20) - (120u << 3);
    code = pick((uvec)(code > 0x7eu), uvec{} + 0x7eu, code);
    // Subnormal lanes only (the others zeroed first, so the conversion stays in range).
    fvec m = (fvec)(x & ~normal) * 0x1p9f;
    m = (m + 0x1p23f) - 0x1p23f;
    const uvec sub = (uvec) __builtin_convertvector(m, ivec);
    uvec r = pick(normal, code, sub);
    r = pick(big, uvec{} + 0x7eu, r);
    r = pick(nan, uvec{} + 0x7fu, r) | sign;
    const u8vec bytes = __builtin_convertvector(r, u8vec);
    std::memcpy(dst, &bytes, sizeof bytes);
}
#endif

// n fp32 values to `dtype` (F32, F16, BF16; FP8 divides by `scale` first, in fp32 as the CUDA
// kernel does, so both round identically).
static inline void from_float(void *dst, const float *src, int32_t dtype, int64_t n, float scale = 1.0f) {
    int64_t i = 0;
    switch (dtype) {
        case KVC_DTYPE_F32: std::memcpy(dst, src, size_t(n) * 4); return;
        case KVC_DTYPE_F16: {
            uint16_t *d = static_cast<uint16_t *>(dst);
#if defined(KVC_SIMD_AVX2) || defined(KVC_SIMD_AVX512)
            for (; i + kLanes <= n; i += kLanes) halfv_store(d + i, loadv(src + i));
#endif
            for (; i < n; ++i) d[i] = float_to_half(src[i]);
            return;
        }
        case KVC_DTYPE_BF16: {
            uint16_t *d = static_cast<uint16_t *>(dst);
#if defined(KVC_SIMD_AVX2) || defined(KVC_SIMD_AVX512)
            for (; i + kLanes <= n; i += kLanes) bf16v_store(d + i, loadv(src + i));
#endif
            for (; i < n; ++i) d[i] = float_to_bf16(src[i]);
            return;
        }
        default: {
            uint8_t *d = static_cast<uint8_t *>(dst);
#if defined(KVC_SIMD_AVX2) || defined(KVC_SIMD_AVX512)
            for (; i + kLanes <= n; i += kLanes) fp8v_store(d + i, loadv(src + i) / scale);
#endif
            for (; i < n; ++i) d[i] = float_to_fp8_e4m3(src[i] / scale);
            return;
        }
    }
}

}  // namespace kvc::cpu
