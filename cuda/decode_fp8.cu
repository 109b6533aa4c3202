// Decode attention instantiations for fp8 KV caches (one file per dtype so builds parallelize).
#include "decode_kernel.cuh"

namespace kvc::cuda::detail {
KVC_INSTANTIATE_DECODE(fp8_t)
}  // namespace kvc::cuda::detail
