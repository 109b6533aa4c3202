// Instruction-set variants of the CPU kernels (attention_core.inl, cache_write_core.inl), each
// compiled by its own file (kernels_avx2.cpp, kernels_avx512.cpp; the baseline by attention.cpp
// and cache_ops.cpp), and the sizing constants they share. cpu_isa.hpp chooses among them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cpu/cpu_isa.hpp"
#include "storage/kernel_args.hpp"

namespace kvc::cpu {

constexpr int64_t kAutoMinPartition = 256;         // auto split-K never cuts finer than this
// ... nor, when it splits a few sequences so that each thread can take whole (sequence, partition)
// units (attention_core.inl, choose_partition_len), finer than this: 256-position units measured
// 1.1-1.15x slower than items of one head on 4x512 decode, 1024 faster (RESULTS.md, session 28).
constexpr int64_t kUnitMinPartition = 1024;
constexpr size_t kWorkspaceCap = size_t(8) << 20;  // CPU split-K scratch per batch

// The bound of each thread's fp32 copies of a KV head's K and V for prefill and long appends
// (attention_core.inl, KvCopy), in floats each: 512 Ki, i.e. at most 2 MiB for K and 2 MiB for
// V per thread (4096 positions at head_dim 128; grown to what the thread's prefills needed, and
// kept). Positions past it are gathered tile by tile instead.
constexpr int64_t kKvCopyFloats = int64_t(1) << 19;
int64_t kv_copy_floats();
// Test hook: a smaller bound (> 0), so that the gathered positions past it run in small cases;
// 0 restores kKvCopyFloats. Read at each launch.
void set_kv_copy_floats(int64_t floats);

// Whether this build contains the variant (GCC on x86-64).
bool avx2_variant_built();
bool avx512_variant_built();

// The kernels compiled for AVX2 + FMA + F16C; call only when isa_available(Isa::avx2).
kvc_status attention_avx2(const AttentionArgs &a);
kvc_status cache_write_avx2(const CacheWriteArgs &a);
void vector_exp_avx2(const float *x, float *y, int64_t n, bool base2);

// The kernels compiled for AVX-512 F/BW/VL/DQ; call only when isa_available(Isa::avx512).
kvc_status attention_avx512(const AttentionArgs &a);
kvc_status cache_write_avx512(const CacheWriteArgs &a);
void vector_exp_avx512(const float *x, float *y, int64_t n, bool base2);

// Test hook: y[i] = e^x[i] (base2: 2^x[i]) by variant isa's vector exponential, the softmax's
// (simd.hpp: expv, exp2v; each ISA has its own code for them); isa must be available, n a
// multiple of 16.
void vector_exp(Isa isa, const float *x, float *y, int64_t n, bool base2);

}  // namespace kvc::cpu
