// Which instruction-set variant of the CPU kernels runs: the best one that this build contains and
// that the CPU *and* the OS support (CPUID feature bits, and XGETBV: the OS must save the wider
// registers on a context switch, or using them corrupts other threads' state), unless
// KVC_CPU_ISA=baseline|avx2|avx512 forces one. A forced variant this machine cannot run, or an
// unknown name, is refused: every CPU kernel launch then fails with KVC_ERR_UNSUPPORTED and a
// message naming what is missing, instead of running something else or faulting on an illegal
// instruction.
#pragma once

#include <cstdint>

#include "kvc/kvc.h"

namespace kvc::cpu {

// In order of preference (a higher value is faster where supported).
enum class Isa : int32_t {
    baseline = 0,  // the build's baseline flags (x86-64: SSE2), 4-lane vectors
    avx2 = 1,      // AVX2 + FMA + F16C, 8 lanes
    avx512 = 2,    // AVX-512 F/BW/VL/DQ (+ FMA, F16C), 16 lanes
};
constexpr int32_t kIsaCount = 3;

const char *isa_name(Isa isa);

// The CPU/OS support of a variant, regardless of whether this build contains it. On a miss, *why
// (if not null) names the missing features.
bool cpu_supports(Isa isa, const char **why = nullptr);
// Whether this build contains the variant (GCC on x86-64 builds all three; other compilers or
// targets only the baseline).
bool isa_built(Isa isa);
// Built and supported: the variant can run here.
inline bool isa_available(Isa isa) { return isa_built(isa) && cpu_supports(isa); }

// The variant the kernels use: KVC_CPU_ISA (read once per process) or the best available. On a
// refused KVC_CPU_ISA, returns KVC_ERR_UNSUPPORTED with the thread's error message set (fail()).
kvc_status kernel_isa(Isa *out);

// The choice for a KVC_CPU_ISA value (null or "auto": the best available); what kernel_isa does
// with the environment's value, callable with any value by the tests.
kvc_status isa_for(const char *env_value, Isa *out);

// Test hook: run every kernel on `isa` (which must be available) until reset with
// force_isa_reset(); overrides KVC_CPU_ISA.
void force_isa(Isa isa);
void force_isa_reset();

// Parses a KVC_CPU_ISA value (exposed for the tests): true and *out on a known name.
bool parse_isa(const char *value, Isa *out);

}  // namespace kvc::cpu
