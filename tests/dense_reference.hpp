// Naive dense attention reference and independent dtype rounding, shared by the CPU and GPU kernel
// tests. Self-contained (standard library only, header-only): it does not reuse any libkvc code, so
// a bug in the library's converters or kernels cannot hide in the oracle.
//
// Rounding here works on the *value* (double arithmetic, ldexp, nearbyint with the default
// ties-to-even mode), not on bit patterns like lib/cpu/dtype_convert.hpp does: two different
// derivations that must agree exactly.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace kvc_ref {

enum Dtype { F32 = 0, F16 = 1, BF16 = 2, FP8_E4M3 = 3 };  // same numbering as kvc_dtype

// Rounds x to a binary format with `mant_bits` stored mantissa bits and minimum normal exponent
// `min_exp`, ties to even. Values past max_finite become +-inf (overflow_to_inf) or +-max_finite.
inline double round_to_format(double x, int mant_bits, int min_exp, double max_finite, bool overflow_to_inf) {
    if (std::isnan(x) || x == 0.0) return x;
    if (std::isinf(x)) return overflow_to_inf ? x : std::copysign(max_finite, x);
    int e;
    std::frexp(std::fabs(x), &e);  // |x| = f * 2^e, f in [0.5, 1): leading bit at 2^(e-1)
    int lead = e - 1;
    if (lead < min_exp) lead = min_exp;  // subnormal range: fixed quantum
    double quantum = std::ldexp(1.0, lead - mant_bits);
    double r = std::nearbyint(x / quantum) * quantum;
    if (std::fabs(r) > max_finite) {
        if (overflow_to_inf) {
            // IEEE: overflow only when the exact value rounds past max_finite at the wider exponent.
            return std::copysign(INFINITY, x);
        }
        return std::copysign(max_finite, x);
    }
    return r;
}

// The value a float becomes when stored in `dt` (fp32 is exact). FP8 e4m3 saturates to +-448.
inline float round_to(float x, int dt) {
    switch (dt) {
        case F16: return float(round_to_format(x, 10, -14, 65504.0, true));
        case BF16: return float(round_to_format(x, 7, -126, 3.3895313892515355e38, true));
        case FP8_E4M3: return float(round_to_format(x, 3, -6, 448.0, false));
        default: return x;
    }
}

// Decoding of stored bit patterns, again from the format definitions.
inline float decode_half(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) v = m ? NAN : INFINITY;
    else if (e == 0) v = std::ldexp(double(m), -24);
    else v = std::ldexp(1.0 + m / 1024.0, e - 15);
    return float(s ? -v : v);
}
inline float decode_bf16(uint16_t b) {
    uint32_t u = uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline float decode_fp8(uint8_t b) {
    int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    double v;
    if (e == 15 && m == 7) v = NAN;
    else if (e == 0) v = std::ldexp(double(m), -9);
    else v = std::ldexp(1.0 + m / 8.0, e - 7);
    return float(s ? -v : v);
}
inline float decode(const void *p, int64_t i, int dt) {
    switch (dt) {
        case F16: return decode_half(static_cast<const uint16_t *>(p)[i]);
        case BF16: return decode_bf16(static_cast<const uint16_t *>(p)[i]);
        case FP8_E4M3: return decode_fp8(static_cast<const uint8_t *>(p)[i]);
        default: return static_cast<const float *>(p)[i];
    }
}
inline int dtype_size(int dt) { return dt == F32 ? 4 : dt == FP8_E4M3 ? 1 : 2; }

// Bit pattern of a value that is already representable in dt (e.g. the output of round_to),
// rebuilt from its exponent and mantissa: the inverse of the decoders above.
inline uint16_t encode_half(float r) {
    uint16_t sign = std::signbit(r) ? 0x8000 : 0;
    double a = std::fabs(double(r));
    if (std::isnan(r)) return 0x7e00;
    if (std::isinf(r)) return uint16_t(sign | 0x7c00);
    if (a == 0) return sign;
    int e;
    std::frexp(a, &e);
    int lead = e - 1;
    if (lead < -14) return uint16_t(sign | uint16_t(std::ldexp(a, 24)));  // subnormal: m * 2^-24
    uint16_t m = uint16_t(std::ldexp(a, 10 - lead) - 1024.0);
    return uint16_t(sign | uint16_t((lead + 15) << 10) | m);
}
inline uint8_t encode_fp8(float r) {
    uint8_t sign = std::signbit(r) ? 0x80 : 0;
    double a = std::fabs(double(r));
    if (std::isnan(r)) return uint8_t(sign | 0x7f);
    if (a == 0) return sign;
    int e;
    std::frexp(a, &e);
    int lead = e - 1;
    if (lead < -6) return uint8_t(sign | uint8_t(std::ldexp(a, 9)));  // subnormal: m * 2^-9
    uint8_t m = uint8_t(std::ldexp(a, 3 - lead) - 8.0);
    return uint8_t(sign | uint8_t((lead + 7) << 3) | m);
}
inline void encode_exact(void *p, int64_t i, int dt, float v) {
    switch (dt) {
        case F16: static_cast<uint16_t *>(p)[i] = encode_half(v); return;
        case BF16: {  // bf16 is the top half of the fp32 pattern
            uint32_t u;
            std::memcpy(&u, &v, 4);
            static_cast<uint16_t *>(p)[i] = uint16_t(u >> 16);
            return;
        }
        case FP8_E4M3: static_cast<uint8_t *>(p)[i] = encode_fp8(v); return;
        default: static_cast<float *>(p)[i] = v; return;
    }
}

// One sequence of a dense problem: context length and number of query (new) tokens, the queries
// being its last q_len positions.
struct Seq {
    int64_t ctx_len = 0;
    int64_t q_len = 1;
};

struct Problem {
    int num_q_heads = 0, num_kv_heads = 0, head_dim = 0;
    double scale = 0;           // softmax scale (resolved)
    double softcap = 0;         // > 0: softcap * tanh(logit / softcap)
    int64_t sliding_window = 0; // > 0: keys with position > qpos - window
    const float *alibi = nullptr;  // num_q_heads slopes or null
    std::vector<Seq> seqs;
};

// Dense causal attention in double.
//   q: [sum q_len][num_q_heads][head_dim], sequences in order.
//   k[s], v[s]: [ctx_len][num_kv_heads][head_dim] of sequence s (contiguous).
//   out: [sum q_len][num_q_heads][head_dim].
inline void dense_attention(const Problem &P, const float *q, const std::vector<const float *> &k,
                            const std::vector<const float *> &v, double *out) {
    const int H = P.num_q_heads, KH = P.num_kv_heads, D = P.head_dim, G = H / KH;
    int64_t tok = 0;
    std::vector<double> logits, acc(size_t(D), 0.0);
    for (size_t s = 0; s < P.seqs.size(); ++s) {
        const int64_t L = P.seqs[s].ctx_len, Q = P.seqs[s].q_len;
        logits.assign(size_t(L), 0.0);
        for (int64_t j = 0; j < Q; ++j, ++tok) {
            const int64_t qpos = L - Q + j;
            const int64_t lo = P.sliding_window > 0 ? std::max<int64_t>(0, qpos - P.sliding_window + 1) : 0;
            for (int h = 0; h < H; ++h) {
                const int kh = h / G;
                const float *qr = q + (tok * H + h) * D;
                double mx = -INFINITY;
                for (int64_t p = lo; p <= qpos; ++p) {
                    const float *kr = k[s] + (p * KH + kh) * D;
                    double x = 0;
                    for (int i = 0; i < D; ++i) x += double(qr[i]) * double(kr[i]);
                    x *= P.scale;
                    if (P.alibi) x += double(P.alibi[h]) * double(p - qpos);
                    if (P.softcap > 0) x = P.softcap * std::tanh(x / P.softcap);
                    logits[size_t(p)] = x;
                    if (x > mx) mx = x;
                }
                double sum = 0;
                std::fill(acc.begin(), acc.end(), 0.0);
                for (int64_t p = lo; p <= qpos; ++p) {
                    const double w = std::exp(logits[size_t(p)] - mx);
                    sum += w;
                    const float *vr = v[s] + (p * KH + kh) * D;
                    for (int i = 0; i < D; ++i) acc[size_t(i)] += w * double(vr[i]);
                }
                double *o = out + (tok * H + h) * D;
                for (int i = 0; i < D; ++i) o[i] = acc[size_t(i)] / sum;
            }
        }
    }
}

// Largest relative error that storing a result in dt can add (half an ulp), for tolerances.
inline double output_rounding(int dt) {
    switch (dt) {
        case F16: return std::ldexp(1.0, -11);
        case BF16: return std::ldexp(1.0, -8);
        default: return 0.0;
    }
}

}  // namespace kvc_ref
