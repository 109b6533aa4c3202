// The mma.m16n8k16 operations and operand helpers shared by the tensor-core kernels (prefill:
// prefill_mma_kernel.cuh, decode scores: decode_kernel.cuh): the f16 / bf16 instruction with its
// packing of fp32 pairs, shared-memory operand loads, and fp8 e4m3 pairs widened to the mma type.
#pragma once

#include <cstdint>
#include <type_traits>

#include "device_primitives.cuh"
#include "dtype_convert.cuh"

namespace kvc::cuda::detail {

template <typename T> struct MmaOp;
template <> struct MmaOp<__half> {
    __device__ __forceinline__ static void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
        mma_m16n8k16<false>(d, a, b0, b1);
    }
    __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
        return bit_cast<uint32_t>(__floats2half2_rn(lo, hi));
    }
    // fp16 keeps 11 significant bits of P in [0, 1]: one product suffices.
    static constexpr bool kSplitP = false;
    __device__ __forceinline__ static uint32_t residual(float, float, uint32_t) { return 0; }
};
template <> struct MmaOp<__nv_bfloat16> {
    __device__ __forceinline__ static void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
        mma_m16n8k16<true>(d, a, b0, b1);
    }
    __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
        return bit_cast<uint32_t>(__floats2bfloat162_rn(lo, hi));
    }
    // bf16 keeps only 8 bits of P: a weight error of 2^-9 shows up directly in the output when
    // attention is sharp. P = hi + lo (both bf16) with a second product restores ~16 bits.
    static constexpr bool kSplitP = true;
    __device__ __forceinline__ static uint32_t residual(float lo, float hi, uint32_t packed_hi) {
        const float lo_hi = __uint_as_float(packed_hi << 16);
        const float hi_hi = __uint_as_float(packed_hi & 0xffff0000u);
        return pack(lo - lo_hi, hi - hi_hi);
    }
};

__device__ __forceinline__ uint32_t lds32(const unsigned char *p) { return *reinterpret_cast<const uint32_t *>(p); }
__device__ __forceinline__ uint32_t lds16(const unsigned char *p) { return *reinterpret_cast<const uint16_t *>(p); }
__device__ __forceinline__ uint32_t lds8(const unsigned char *p) { return *p; }
__device__ __forceinline__ uint2 lds64(const unsigned char *p) { return *reinterpret_cast<const uint2 *>(p); }

// Two e4m3 values (low byte first, bits 0..15 of `two`) as a packed pair of T, low half first.
template <typename T>
__device__ __forceinline__ uint32_t widen_fp8x2(uint32_t two) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(two & 0xffffu), __NV_E4M3);
    if constexpr (std::is_same_v<T, __half>) {
        return uint32_t(h.x) | (uint32_t(h.y) << 16);
    } else {
        // Exact: every e4m3 value is a bf16 value too (3 mantissa bits, exponents within range).
        const float2 f = __half22float2(__half2(h));
        return MmaOp<T>::pack(f.x, f.y);
    }
}

}  // namespace kvc::cuda::detail
