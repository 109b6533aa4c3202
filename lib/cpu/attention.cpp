// CPU backend of paged attention (decode and prefill/append), semantics in kernel_args.hpp; the
// kernel body is lib/cpu/attention_core.inl. This file compiles it for the build's baseline ISA and
// dispatches to the AVX2 + FMA + F16C copy (attention_avx2.cpp) when the CPU has those.
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
#include "kernel_args.hpp"

#include "cpu/attention_core.inl"

namespace kvc {

size_t cpu_attention_workspace_bytes(int32_t max_seqs, int32_t num_q_heads, int32_t head_dim,
                                     int64_t max_context) {
    // Enough for every sequence at auto partitioning, capped; larger launches run in rounds.
    const int64_t parts = std::max<int64_t>(2, (max_context + cpu::kAutoMinPartition - 1) / cpu::kAutoMinPartition);
    const double need = double(max_seqs) * num_q_heads * double(parts) * (2.0 + head_dim) * 4.0;
    const double one_seq = double(num_q_heads) * 2.0 * (2.0 + head_dim) * 4.0;
    return size_t(std::max(one_seq, std::min(need, double(cpu::kWorkspaceCap))));
}

namespace {
std::atomic<bool> g_force_baseline{false};
}  // namespace

void cpu::force_baseline_kernels(bool on) { g_force_baseline.store(on, std::memory_order_relaxed); }

kvc_status cpu_attention(const AttentionArgs &a) {
    static const bool avx2 = cpu::have_avx2_kernels();
    if (avx2 && !g_force_baseline.load(std::memory_order_relaxed)) return cpu::attention_avx2(a);
    return run_attention(a);
}

}  // namespace kvc
