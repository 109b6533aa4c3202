// Eight-lane fp32 helpers written with GCC/Clang vector extensions. The kernels' inner loops run
// over head_dim (contiguous); spelling them with 8-wide vectors makes them vectorized at any -O
// level and with any ISA the compiler targets (2 x SSE on baseline x86-64, one AVX op on AVX2).
#pragma once

#include <cstdint>
#include <cstring>

// The helpers below pass 32-byte vectors by value; they are all inline and never cross a TU, so
// GCC's note that this ABI differs between AVX and non-AVX builds does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace kvc::cpu {

typedef float f32x8 __attribute__((vector_size(32)));
typedef uint32_t u32x8 __attribute__((vector_size(32)));
typedef uint16_t u16x8 __attribute__((vector_size(16)));

inline f32x8 load8(const float *p) { f32x8 v; std::memcpy(&v, p, sizeof v); return v; }
inline void store8(float *p, f32x8 v) { std::memcpy(p, &v, sizeof v); }
inline f32x8 splat8(float x) { return f32x8{x, x, x, x, x, x, x, x}; }

inline float hsum8(f32x8 v) {
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

// Eight fp16 values to fp32; same bit trick as half_to_float, lane-parallel.
inline f32x8 half8_to_float(const uint16_t *p) {
    u16x8 h;
    std::memcpy(&h, p, sizeof h);
    u32x8 x = __builtin_convertvector(h, u32x8);
    u32x8 sign = (x & 0x8000u) << 16;
    u32x8 em = x & 0x7fffu;
    f32x8 scaled = (f32x8)(em << 13) * splat8(0x1p112f);
    u32x8 body = em >= 0x7c00u ? ((em << 13) | 0x7f800000u) : (u32x8)scaled;
    return (f32x8)(sign | body);
}

inline f32x8 bf168_to_float(const uint16_t *p) {
    u16x8 h;
    std::memcpy(&h, p, sizeof h);
    return (f32x8)(__builtin_convertvector(h, u32x8) << 16);
}

// sum_i a[i] * b[i] over n elements.
inline float dot(const float *a, const float *b, int32_t n) {
    f32x8 s0 = splat8(0.f), s1 = splat8(0.f);
    int32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 += load8(a + i) * load8(b + i);
        s1 += load8(a + i + 8) * load8(b + i + 8);
    }
    for (; i + 8 <= n; i += 8) s0 += load8(a + i) * load8(b + i);
    float s = hsum8(s0 + s1);
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

// y[i] = y[i] * c
inline void scale_row(float *y, float c, int32_t n) {
    int32_t i = 0;
    f32x8 cv = splat8(c);
    for (; i + 8 <= n; i += 8) store8(y + i, load8(y + i) * cv);
    for (; i < n; ++i) y[i] *= c;
}

// y[i] += p * x[i]
inline void axpy(float *y, float p, const float *x, int32_t n) {
    int32_t i = 0;
    f32x8 pv = splat8(p);
    for (; i + 8 <= n; i += 8) store8(y + i, load8(y + i) + pv * load8(x + i));
    for (; i < n; ++i) y[i] += p * x[i];
}

}  // namespace kvc::cpu
