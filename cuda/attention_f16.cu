// Paged attention instantiations for f16 KV caches (one file per dtype so builds parallelize).
#include "attention_kernel.cuh"

namespace kvc::cuda::detail {
KVC_INSTANTIATE_ATTENTION(__half)
}  // namespace kvc::cuda::detail
