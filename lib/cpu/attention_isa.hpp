// Instruction-set variants of the CPU attention kernel (see attention_core.inl) and the sizing
// constants they share.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernel_args.hpp"

namespace kvc::cpu {

constexpr int64_t kAutoMinPartition = 256;          // auto split-K never cuts finer than this
constexpr size_t kWorkspaceCap = size_t(8) << 20;   // CPU split-K scratch per batch

// True when this build has the AVX2 variant and the running CPU supports AVX2, FMA and F16C.
bool have_avx2_kernels();
// The kernel compiled for AVX2 + FMA + F16C; call only when have_avx2_kernels().
kvc_status attention_avx2(const AttentionArgs &a);

// Test hook: force the baseline kernel (true) or go back to run-time selection (false), so the
// tests cover both variants on a machine that has AVX2.
void force_baseline_kernels(bool on);

}  // namespace kvc::cpu
