// Decode attention instantiations for f16 KV caches (one file per dtype so builds parallelize).
#include "decode_kernel.cuh"

namespace kvc::cuda::detail {
KVC_INSTANTIATE_DECODE(__half)
}  // namespace kvc::cuda::detail
