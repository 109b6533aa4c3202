// CPU backend of paged attention (decode and prefill/append), semantics in storage/kernel_args.hpp; the
// kernel body is lib/cpu/attention_core.inl. This file compiles it for the build's baseline ISA and
// runs the variant cpu::kernel_isa chooses (kernels_avx2.cpp, kernels_avx512.cpp, or this one).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/attention_isa.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_isa.hpp"
#include "cpu/dtype_convert.hpp"
#include "cpu/thread_pool.hpp"
#include "error.hpp"
#include "storage/kernel_args.hpp"

#include "cpu/attention_core.inl"

namespace kvc {

size_t cpu_attention_workspace_bytes(int32_t max_seqs, int32_t num_q_heads, int32_t head_dim, int64_t max_context) {
    // Enough for every sequence at auto partitioning, capped; larger launches run in rounds.
    const int64_t parts = std::max<int64_t>(2, (max_context + cpu::kAutoMinPartition - 1) / cpu::kAutoMinPartition);
    const double need = double(max_seqs) * num_q_heads * double(parts) * (2.0 + head_dim) * 4.0;
    const double one_seq = double(num_q_heads) * 2.0 * (2.0 + head_dim) * 4.0;
    return size_t(std::max(one_seq, std::min(need, double(cpu::kWorkspaceCap))));
}

namespace cpu {
namespace {
std::atomic<int64_t> g_kv_copy_floats{kKvCopyFloats};
}
int64_t kv_copy_floats() { return g_kv_copy_floats.load(std::memory_order_relaxed); }
void set_kv_copy_floats(int64_t floats) {
    g_kv_copy_floats.store(floats > 0 ? std::min(floats, kKvCopyFloats) : kKvCopyFloats, std::memory_order_relaxed);
}
void vector_exp(Isa isa, const float *x, float *y, int64_t n, bool base2) {
    switch (isa) {
        case Isa::avx512: return vector_exp_avx512(x, y, n, base2);
        case Isa::avx2: return vector_exp_avx2(x, y, n, base2);
        default: return vector_exp_body(x, y, n, base2);
    }
}
}  // namespace cpu

kvc_status cpu_attention(const AttentionArgs &a) {
    cpu::Isa isa;
    if (kvc_status st = cpu::kernel_isa(&isa)) return st;
    switch (isa) {
        case cpu::Isa::avx512: return cpu::attention_avx512(a);
        case cpu::Isa::avx2: return cpu::attention_avx2(a);
        default: return run_attention(a);
    }
}

}  // namespace kvc
