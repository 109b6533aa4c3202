// Run-time choice of the CPU kernels' instruction-set variant (cpu_isa.hpp).
#include "cpu/cpu_isa.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cpu/attention_isa.hpp"
#include "error.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace kvc::cpu {
namespace {

const char *const kNames[kIsaCount] = {"baseline", "avx2", "avx512"};

// What CPUID and XGETBV report, read once.
struct Features {
    bool avx2 = false;    // AVX2 + FMA + F16C, and the OS saves the YMM state
    bool avx512 = false;  // AVX-512 F/BW/VL/DQ, and the OS saves the opmask and ZMM state
    const char *no_avx2 = "not an x86-64 CPU";
    const char *no_avx512 = "not an x86-64 CPU";
};

Features detect() {
    Features f;
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    const bool osxsave = c & (1u << 27), avx = c & (1u << 28), fma = c & (1u << 12), f16c = c & (1u << 29);
    uint64_t xcr0 = 0;
    if (osxsave) {
        // XGETBV with ECX = 0 reads XCR0 (legal once CPUID reports OSXSAVE), the register states
        // the OS enabled: bits 1-2 SSE/YMM, bits 5-7 opmask, ZMM upper halves, ZMM16-31.
        unsigned lo = 0, hi = 0;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = (uint64_t(hi) << 32) | lo;
    }
    unsigned b7 = 0;
    if (__get_cpuid_max(0, nullptr) >= 7) __cpuid_count(7, 0, a, b7, c, d);
    const bool avx2 = b7 & (1u << 5), avx512f = b7 & (1u << 16), avx512dq = b7 & (1u << 17);
    const bool avx512bw = b7 & (1u << 30), avx512vl = b7 & (1u << 31);
    const bool os_ymm = (xcr0 & 0x6) == 0x6, os_zmm = (xcr0 & 0xe6) == 0xe6;

    f.avx2 = avx && avx2 && fma && f16c && os_ymm;
    f.no_avx2 = !(avx && avx2 && fma && f16c) ? "the CPU lacks one of AVX2, FMA, F16C"
                : !os_ymm                     ? "the OS does not enable the AVX register state (XCR0)"
                                              : nullptr;
    f.avx512 = f.avx2 && avx512f && avx512dq && avx512bw && avx512vl && os_zmm;
    f.no_avx512 = !f.avx2 ? f.no_avx2
                  : !(avx512f && avx512dq && avx512bw && avx512vl)
                      ? "the CPU lacks one of AVX512F, AVX512DQ, AVX512BW, AVX512VL"
                  : !os_zmm ? "the OS does not enable the AVX-512 register state (XCR0)"
                            : nullptr;
#endif
    return f;
}

const Features &features() {
    static const Features f = detect();
    return f;
}

// KVC_CPU_ISA, resolved once: the variant, or a refusal with its message.
struct Choice {
    Isa isa = Isa::baseline;
    bool refused = false;
    char why[160] = {};
};

Isa best_available() {
    for (int32_t i = kIsaCount - 1; i > 0; --i)
        if (isa_available(Isa(i))) return Isa(i);
    return Isa::baseline;
}

Choice choose(const char *env) {
    Choice c;
    c.isa = best_available();
    if (!env || !*env || std::strcmp(env, "auto") == 0) return c;
    Isa want;
    if (!parse_isa(env, &want)) {
        c.refused = true;
        std::snprintf(c.why, sizeof c.why, "KVC_CPU_ISA=%.40s is not one of auto, baseline, avx2, avx512", env);
        return c;
    }
    const char *missing = nullptr;
    if (!isa_built(want)) {
        c.refused = true;
        std::snprintf(c.why, sizeof c.why,
                      "KVC_CPU_ISA=%s: this build of libkvc has no %s kernels (GCC on x86-64 builds them)", env, env);
    } else if (!cpu_supports(want, &missing)) {
        c.refused = true;
        std::snprintf(c.why, sizeof c.why, "KVC_CPU_ISA=%s cannot run here: %s", env, missing);
    }
    c.isa = want;
    return c;
}

// -1: no test override; else the forced Isa.
std::atomic<int32_t> g_forced{-1};

}  // namespace

const char *isa_name(Isa isa) { return kNames[int32_t(isa)]; }

bool parse_isa(const char *value, Isa *out) {
    for (int32_t i = 0; i < kIsaCount; ++i)
        if (value && std::strcmp(value, kNames[i]) == 0) {
            *out = Isa(i);
            return true;
        }
    return false;
}

bool cpu_supports(Isa isa, const char **why) {
    const Features &f = features();
    const char *missing = isa == Isa::avx512 ? (f.avx512 ? nullptr : f.no_avx512)
                          : isa == Isa::avx2 ? (f.avx2 ? nullptr : f.no_avx2)
                                             : nullptr;
    if (why) *why = missing;
    return missing == nullptr;
}

bool isa_built(Isa isa) {
    switch (isa) {
        case Isa::avx2: return avx2_variant_built();
        case Isa::avx512: return avx512_variant_built();
        default: return true;
    }
}

kvc_status isa_for(const char *env_value, Isa *out) {
    const Choice c = choose(env_value);
    if (c.refused) return fail(KVC_ERR_UNSUPPORTED, "%s", c.why);
    *out = c.isa;
    return KVC_OK;
}

kvc_status kernel_isa(Isa *out) {
    const int32_t forced = g_forced.load(std::memory_order_relaxed);
    if (forced >= 0) {
        *out = Isa(forced);
        return KVC_OK;
    }
    static const Choice c = choose(std::getenv("KVC_CPU_ISA"));
    if (c.refused) return fail(KVC_ERR_UNSUPPORTED, "%s", c.why);
    *out = c.isa;
    return KVC_OK;
}

void force_isa(Isa isa) { g_forced.store(int32_t(isa), std::memory_order_relaxed); }
void force_isa_reset() { g_forced.store(-1, std::memory_order_relaxed); }

}  // namespace kvc::cpu
