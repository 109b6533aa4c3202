// The CPU attention kernel compiled for AVX2 + FMA + F16C (8-lane vectors, fused multiply-add,
// hardware fp16 conversion), selected at run time by cpu_attention. Standard headers and the
// baseline helpers are included *before* the target pragma so that only this file's own kernel
// code (internal linkage) is AVX2 code: nothing shared with other files can end up needing AVX2.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/attention_isa.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/dtype_convert.hpp"
#include "cpu/thread_pool.hpp"
#include "error.hpp"
#include "kernel_args.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KVC_HAVE_AVX2_VARIANT 1
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#define KVC_SIMD_AVX2 1
#include "cpu/attention_core.inl"
#pragma GCC pop_options

namespace kvc::cpu {
bool have_avx2_kernels() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}
kvc_status attention_avx2(const AttentionArgs &a) { return run_attention(a); }
}  // namespace kvc::cpu

#else

namespace kvc::cpu {
bool have_avx2_kernels() { return false; }
kvc_status attention_avx2(const AttentionArgs &a) { return cpu_attention(a); }
}  // namespace kvc::cpu

#endif
