// Paged attention instantiations for f32 KV caches (one file per dtype so builds parallelize).
#include "attention_kernel.cuh"

namespace kvc::cuda::detail {
KVC_INSTANTIATE_ATTENTION(float)
}  // namespace kvc::cuda::detail
