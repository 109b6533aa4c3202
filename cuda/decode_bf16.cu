// Decode attention instantiations for bf16 KV caches (one file per dtype so builds parallelize).
#include "decode_kernel.cuh"

namespace kvc::cuda::detail {
KVC_INSTANTIATE_DECODE(__nv_bfloat16)
}  // namespace kvc::cuda::detail
