// Instantiations of the tensor-core prefill kernel with 16-bit KV: q and KV both f16 or both bf16,
// every head dim the dispatcher accepts. FP8 KV lives in prefill_mma_fp8.cu (a separate
// translation unit so the two halves compile in parallel).
#include "prefill_mma_kernel.cuh"

namespace kvc::cuda::detail {

#define KVC_INSTANTIATE_PREFILL_MMA(T, KV)                                                             \
    template cudaError_t launch_prefill_mma<T, KV, 64>(const AttnParams &, dim3, cudaStream_t);  \
    template cudaError_t launch_prefill_mma<T, KV, 80>(const AttnParams &, dim3, cudaStream_t);  \
    template cudaError_t launch_prefill_mma<T, KV, 96>(const AttnParams &, dim3, cudaStream_t);  \
    template cudaError_t launch_prefill_mma<T, KV, 128>(const AttnParams &, dim3, cudaStream_t); \
    template cudaError_t launch_prefill_mma<T, KV, 256>(const AttnParams &, dim3, cudaStream_t);

KVC_INSTANTIATE_PREFILL_MMA(__half, __half)
KVC_INSTANTIATE_PREFILL_MMA(__nv_bfloat16, __nv_bfloat16)

}  // namespace kvc::cuda::detail
