// Element conversions shared by the kernels. All math is fp32: loads widen to float, stores round
// to nearest even (fp8: saturate to the finite range, as vLLM's e4m3 cache does).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstring>

#include "kvc/kvc.h"

namespace kvc::cuda::detail {

// Bit reinterpretation without strict-aliasing hazards (compiles to a register move).
template <typename To, typename From>
__device__ __forceinline__ To bit_cast(const From &from) {
    static_assert(sizeof(To) == sizeof(From), "bit_cast needs equal sizes");
    To to;
    memcpy(static_cast<void *>(&to), &from, sizeof(To));
    return to;
}

using fp8_t = __nv_fp8_e4m3;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(fp8_t x) { return float(x); }

template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ fp8_t from_float<fp8_t>(float x) {
    fp8_t r;
    r.__x = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    return r;
}

// Query / output tensors have a runtime dtype (F32/F16/BF16): they are a tiny fraction of the
// traffic, so a branch here is cheaper than tripling the kernel instantiations.
__device__ __forceinline__ float load_qo(const void *p, int32_t dtype, int64_t i) {
    switch (dtype) {
        case KVC_DTYPE_F32: return static_cast<const float *>(p)[i];
        case KVC_DTYPE_BF16: return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
        default: return __half2float(static_cast<const __half *>(p)[i]);
    }
}
__device__ __forceinline__ void store_qo(void *p, int32_t dtype, int64_t i, float x) {
    switch (dtype) {
        case KVC_DTYPE_F32: static_cast<float *>(p)[i] = x; break;
        case KVC_DTYPE_BF16: static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(x); break;
        default: static_cast<__half *>(p)[i] = __float2half_rn(x); break;
    }
}

// Widening of one 32-bit word of KV elements (4 / sizeof(T) of them): the unit every vector width
// below is built from, so each dtype's conversion is written once.
template <typename T> struct Word;

template <> struct Word<float> {
    static constexpr int kElems = 1;
    __device__ __forceinline__ static void widen(uint32_t w, float *out) { out[0] = __uint_as_float(w); }
};
template <> struct Word<__half> {
    static constexpr int kElems = 2;
    __device__ __forceinline__ static void widen(uint32_t w, float *out) {
        const float2 f = __half22float2(bit_cast<__half2>(w));
        out[0] = f.x; out[1] = f.y;
    }
};
template <> struct Word<__nv_bfloat16> {
    static constexpr int kElems = 2;
    // bf16 -> f32 is a 16-bit shift: exact and cheaper than the intrinsic pair.
    __device__ __forceinline__ static void widen(uint32_t w, float *out) {
        out[0] = __uint_as_float(w << 16);
        out[1] = __uint_as_float(w & 0xffff0000u);
    }
};
template <> struct Word<fp8_t> {
    static constexpr int kElems = 4;
    __device__ __forceinline__ static void widen(uint32_t w, float *out) {
        __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(w & 0xffffu), __NV_E4M3);
        __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(w >> 16), __NV_E4M3);
        float2 a = __half22float2(__half2(lo));
        float2 b = __half22float2(__half2(hi));
        out[0] = a.x; out[1] = a.y; out[2] = b.x; out[3] = b.y;
    }
};

// kN consecutive KV elements from shared memory in one vector load (kN * sizeof(T) = 4, 8 or 16
// bytes, aligned to that size), widened.
template <typename T, int kN>
__device__ __forceinline__ void widen_vec(const unsigned char *src, float *out) {
    constexpr int kWords = kN * int(sizeof(T)) / 4;
    static_assert(kWords == 1 || kWords == 2 || kWords == 4, "one 4-, 8- or 16-byte load");
    uint32_t w[kWords];
    if constexpr (kWords == 4) {
        const uint4 v = *reinterpret_cast<const uint4 *>(src);
        w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
    } else if constexpr (kWords == 2) {
        const uint2 v = *reinterpret_cast<const uint2 *>(src);
        w[0] = v.x; w[1] = v.y;
    } else {
        w[0] = *reinterpret_cast<const uint32_t *>(src);
    }
#pragma unroll
    for (int i = 0; i < kWords; ++i) Word<T>::widen(w[i], out + i * Word<T>::kElems);
}

// One 16-byte shared-memory chunk of KV elements (16 / sizeof(T) of them), widened.
template <typename T> struct Chunk16 {
    static constexpr int kElems = 16 / int(sizeof(T));
    __device__ __forceinline__ static void widen(const void *src, float *out) {
        widen_vec<T, kElems>(static_cast<const unsigned char *>(src), out);
    }
};

// Eight consecutive KV elements from shared memory, widened (the generic kernel's V granule).
template <typename T>
__device__ __forceinline__ void widen8(const unsigned char *src, float *out) {
    if constexpr (sizeof(T) == 4) {
        widen_vec<T, 4>(src, out);
        widen_vec<T, 4>(src + 16, out + 4);
    } else {
        widen_vec<T, 8>(src, out);
    }
}

}  // namespace kvc::cuda::detail
