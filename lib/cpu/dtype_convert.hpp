// Scalar conversions between fp32 and the storage dtypes (fp16, bf16, fp8 e4m3), written without
// intrinsics so that they compile everywhere and the compiler can vectorize the row loops that call
// them. Encoders round to nearest, ties to even, like the hardware converters the CUDA backend uses,
// so both backends store bit-identical caches.
#pragma once

#include <cstdint>
#include <cstring>

#include "kvc/kvc.h"

namespace kvc::cpu {

inline uint32_t float_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
inline float bits_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// ---- IEEE binary16 ----------------------------------------------------------------------------
inline float half_to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    // Shifting the exponent+mantissa into float position and multiplying by 2^112 rebias the
    // exponent and normalizes subnormals in one exact multiply; inf/NaN only need the exponent
    // forced to all ones. Branch-free, so row loops vectorize.
    float scaled = bits_float(em << 13) * 0x1p112f;
    uint32_t body = em >= 0x7c00u ? ((em << 13) | 0x7f800000u) : float_bits(scaled);
    return bits_float(sign | body);
}

inline uint16_t float_to_half(float f) {
    uint32_t x = float_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) return uint16_t(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (x >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 rounds to infinity
    if (x >= 0x38800000u) {                                 // normal half (>= 2^-14)
        uint32_t odd = (x >> 13) & 1u;
        x += 0xc8000000u + 0xfffu + odd;  // rebias exponent (-112 << 23) and round half to even
        return uint16_t(sign | (x >> 13));
    }
    // Subnormal half: value = m * 2^-24. Scaling by 2^24 is exact; adding and subtracting 2^23
    // rounds to an integer with the FPU's default ties-to-even. m == 1024 becomes the smallest
    // normal, which the encoding 0x400 represents exactly.
    float m = bits_float(x) * 0x1p24f;
    m = (m + 0x1p23f) - 0x1p23f;
    return uint16_t(sign | uint32_t(m));
}

// ---- bfloat16 ---------------------------------------------------------------------------------
inline float bf16_to_float(uint16_t b) { return bits_float(uint32_t(b) << 16); }

inline uint16_t float_to_bf16(float f) {
    uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x0040u);  // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1u);
    return uint16_t(x >> 16);
}

// ---- fp8 e4m3 (OCP "fn" variant: bias 7, no infinities, 0x7f/0xff = NaN, max 448) -------------
inline float fp8_e4m3_to_float(uint8_t v) {
    uint32_t sign = uint32_t(v & 0x80u) << 24;
    uint32_t exp = (v >> 3) & 0xfu;
    uint32_t man = v & 0x7u;
    if (exp == 0xf && man == 0x7) return bits_float(sign | 0x7fc00000u);
    float mag;
    if (exp == 0)
        mag = float(man) * 0x1p-9f;  // subnormal: man * 2^-9
    else
        mag = bits_float(((exp + 120u) << 23) | (man << 20));
    return bits_float(sign | float_bits(mag));
}

inline uint8_t float_to_fp8_e4m3(float f) {
    uint32_t x = float_bits(f);
    uint8_t sign = uint8_t((x >> 24) & 0x80u);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return uint8_t(sign | 0x7fu);   // NaN stays NaN
    if (x >= 0x43e00000u) return uint8_t(sign | 0x7eu);  // >= 448 (incl. inf) saturates
    if (x >= 0x3c800000u) {                              // normal e4m3 (>= 2^-6)
        x += 0x7ffffu + ((x >> 20) & 1u);                // round 20 dropped bits to even
        uint32_t code = (x >> 20) - (120u << 3);         // rebias 127 -> 7
        if (code > 0x7eu) code = 0x7eu;                  // rounding past 448 saturates
        return uint8_t(sign | code);
    }
    // Subnormal: value = m * 2^-9; m == 8 is the smallest normal and encodes as 0x08.
    float m = bits_float(x) * 0x1p9f;
    m = (m + 0x1p23f) - 0x1p23f;
    return uint8_t(sign | uint32_t(m));
}

// Element-wise loads/stores by dtype, used by the kernels' row converters.
inline float load_elem(const void *p, int64_t i, int32_t dtype) {
    switch (dtype) {
        case KVC_DTYPE_F32: return static_cast<const float *>(p)[i];
        case KVC_DTYPE_F16: return half_to_float(static_cast<const uint16_t *>(p)[i]);
        case KVC_DTYPE_BF16: return bf16_to_float(static_cast<const uint16_t *>(p)[i]);
        default: return fp8_e4m3_to_float(static_cast<const uint8_t *>(p)[i]);
    }
}

}  // namespace kvc::cpu
