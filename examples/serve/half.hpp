// IEEE binary16 rounding, so the dense reference can store K/V exactly as an F16 KV cache does
// (round to nearest even) and keep a tight tolerance for --kv-dtype f16.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace serve {

inline uint16_t float_to_half_bits(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t mant = x & 0x7FFFFFu;
    const int32_t exp = int32_t((x >> 23) & 0xFFu);
    if (exp == 0xFF) return uint16_t(sign | 0x7C00u | (mant ? 0x200u : 0u));  // inf / NaN
    const int32_t e = exp - 127 + 15;
    if (e >= 0x1F) return uint16_t(sign | 0x7C00u);  // overflow -> inf
    if (e <= 0) {                                      // half subnormal or zero
        if (e < -10) return uint16_t(sign);
        mant |= 0x800000u;
        const int32_t shift = 14 - e;
        uint32_t half = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1u), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u))) half++;
        return uint16_t(sign | half);
    }
    uint32_t half = (uint32_t(e) << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++;  // a carry rounds up the exponent
    return uint16_t(sign | half);
}

inline float half_bits_to_float(uint16_t h) {
    const int32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
    float v;
    if (exp == 0) v = std::ldexp(float(mant), -24);
    else if (exp == 31) v = mant ? NAN : INFINITY;
    else v = std::ldexp(float(mant | 0x400), exp - 25);
    return (h & 0x8000) ? -v : v;
}

inline float round_to_half(float f) { return half_bits_to_float(float_to_half_bits(f)); }

}  // namespace serve
