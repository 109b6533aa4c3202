// CPU-backend pieces the C API layer needs besides the kernels declared in storage/kernel_args.hpp.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvc {

// Bytes of split-K scratch a batch of these capacities preallocates for cpu_attention. Bounded
// (a few MiB): when a launch wants more partials than fit, cpu_attention processes the sequences in
// rounds, or uses fewer partitions; the result is the same.
size_t cpu_attention_workspace_bytes(int32_t max_seqs, int32_t num_q_heads, int32_t head_dim, int64_t max_context);

}  // namespace kvc
