// Instantiations of the tensor-core prefill kernel: f16 and bf16, head dims 64..128.
#include "prefill_mma_kernel.cuh"

namespace kvc::cuda::detail {

#define KVC_INSTANTIATE_PREFILL_MMA(T)                                                           \
    template cudaError_t launch_prefill_mma<T, 64>(const AttnParams &, dim3, cudaStream_t);  \
    template cudaError_t launch_prefill_mma<T, 80>(const AttnParams &, dim3, cudaStream_t);  \
    template cudaError_t launch_prefill_mma<T, 96>(const AttnParams &, dim3, cudaStream_t);  \
    template cudaError_t launch_prefill_mma<T, 128>(const AttnParams &, dim3, cudaStream_t);

KVC_INSTANTIATE_PREFILL_MMA(__half)
KVC_INSTANTIATE_PREFILL_MMA(__nv_bfloat16)

}  // namespace kvc::cuda::detail
