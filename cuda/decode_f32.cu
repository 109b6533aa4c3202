// Decode attention instantiations for f32 KV caches (one file per dtype so builds parallelize).
#include "decode_kernel.cuh"

namespace kvc::cuda::detail {
KVC_INSTANTIATE_DECODE(float)
}  // namespace kvc::cuda::detail
