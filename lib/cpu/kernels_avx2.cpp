// The CPU kernels (attention, cache write) compiled for AVX2 + FMA + F16C: 8-lane vectors, fused
// multiply-add, hardware fp16 conversion; chosen at run time (cpu_isa.hpp). Standard headers and
// the baseline helpers are included *before* the target pragma so that only this file's own
// kernel code (internal linkage) is AVX2 code: nothing shared with other files (inline functions,
// template instances) can end up needing AVX2.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/attention_isa.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/dtype_convert.hpp"
#include "cpu/thread_pool.hpp"
#include "error.hpp"
#include "storage/kernel_args.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#define KVC_SIMD_AVX2 1
#include "cpu/attention_core.inl"
#include "cpu/cache_write_core.inl"
#pragma GCC pop_options

namespace kvc::cpu {
bool avx2_variant_built() { return true; }
kvc_status attention_avx2(const AttentionArgs &a) { return run_attention(a); }
kvc_status cache_write_avx2(const CacheWriteArgs &a) { return run_cache_write(a); }
void vector_exp_avx2(const float *x, float *y, int64_t n, bool base2) { vector_exp_body(x, y, n, base2); }
}  // namespace kvc::cpu

#else

// Never called (isa_built is false); the baseline keeps the symbols defined.
namespace kvc::cpu {
bool avx2_variant_built() { return false; }
kvc_status attention_avx2(const AttentionArgs &a) { return cpu_attention(a); }
kvc_status cache_write_avx2(const CacheWriteArgs &a) { return cpu_cache_write(a); }
void vector_exp_avx2(const float *, float *, int64_t, bool) {}
}  // namespace kvc::cpu

#endif
