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

// Widening of one 16-byte shared-memory chunk of KV elements (16 / sizeof(T) of them).
template <typename T> struct Chunk16;

template <> struct Chunk16<float> {
    static constexpr int kElems = 4;
    __device__ __forceinline__ static void widen(const void *src, float *out) {
        float4 v = *static_cast<const float4 *>(src);
        out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
    }
};
template <> struct Chunk16<__half> {
    static constexpr int kElems = 8;
    __device__ __forceinline__ static void widen(const void *src, float *out) {
        uint4 v = *static_cast<const uint4 *>(src);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            float2 f = __half22float2(bit_cast<__half2>(w[i]));
            out[2 * i] = f.x; out[2 * i + 1] = f.y;
        }
    }
};
template <> struct Chunk16<__nv_bfloat16> {
    static constexpr int kElems = 8;
    __device__ __forceinline__ static void widen(const void *src, float *out) {
        uint4 v = *static_cast<const uint4 *>(src);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            // bf16 -> f32 is a 16-bit shift: exact and cheaper than the intrinsic pair.
            out[2 * i] = __uint_as_float(w[i] << 16);
            out[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        }
    }
};
template <> struct Chunk16<fp8_t> {
    static constexpr int kElems = 16;
    __device__ __forceinline__ static void widen(const void *src, float *out) {
        uint4 v = *static_cast<const uint4 *>(src);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            widen_word(w[i], out + 4 * i);
        }
    }
    __device__ __forceinline__ static void widen_word(uint32_t w, float *out) {
        __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(w & 0xffffu), __NV_E4M3);
        __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(w >> 16), __NV_E4M3);
        float2 a = __half22float2(__half2(lo));
        float2 b = __half22float2(__half2(hi));
        out[0] = a.x; out[1] = a.y; out[2] = b.x; out[3] = b.y;
    }
};

// Eight consecutive KV elements from shared memory, widened (the V accumulation granule).
template <typename T>
__device__ __forceinline__ void widen8(const unsigned char *src, float *out) {
    if constexpr (sizeof(T) == 4) {
        Chunk16<T>::widen(src, out);
        Chunk16<T>::widen(src + 16, out + 4);
    } else if constexpr (sizeof(T) == 2) {
        Chunk16<T>::widen(src, out);
    } else {
        uint2 v = *reinterpret_cast<const uint2 *>(src);
        Chunk16<T>::widen_word(v.x, out);
        Chunk16<T>::widen_word(v.y, out + 4);
    }
}

}  // namespace kvc::cuda::detail
