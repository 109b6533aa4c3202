// The CPU kernels (attention, cache write) compiled for AVX-512 F/BW/VL/DQ (with FMA and F16C):
// 16-lane vectors and 32 vector registers (wider register blocking, attention_tiles.hpp); chosen
// at run time (cpu_isa.hpp). Same include discipline as kernels_avx2.cpp: everything shared is
// included before the target pragma, so only this file's internal kernel code is AVX-512 code.
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
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), whose self-initialization it then
// reports as "(may be) used uninitialized" where they are inlined (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,prfchw")
#define KVC_SIMD_AVX512 1
#include "cpu/attention_core.inl"
#include "cpu/cache_write_core.inl"
#pragma GCC pop_options

namespace kvc::cpu {
bool avx512_variant_built() { return true; }
kvc_status attention_avx512(const AttentionArgs &a) { return run_attention(a); }
kvc_status cache_write_avx512(const CacheWriteArgs &a) { return run_cache_write(a); }
void vector_exp_avx512(const float *x, float *y, int64_t n, bool base2) { vector_exp_body(x, y, n, base2); }
}  // namespace kvc::cpu

#else

// Never called (isa_built is false); the baseline keeps the symbols defined.
namespace kvc::cpu {
bool avx512_variant_built() { return false; }
kvc_status attention_avx512(const AttentionArgs &a) { return cpu_attention(a); }
kvc_status cache_write_avx512(const CacheWriteArgs &a) { return cpu_cache_write(a); }
void vector_exp_avx512(const float *, float *, int64_t, bool) {}
}  // namespace kvc::cpu

#endif
