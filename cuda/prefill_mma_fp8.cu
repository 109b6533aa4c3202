// Instantiations of the tensor-core prefill kernel with FP8 (e4m3) KV and f16 or bf16 q, every
// head dim the dispatcher accepts (the macro is prefill_mma.cu's, repeated: one line per type).
#include "prefill_mma_kernel.cuh"

namespace kvc::cuda::detail {

#define KVC_INSTANTIATE_PREFILL_MMA_FP8(T)                                                                 \
    template cudaError_t launch_prefill_mma<T, fp8_t, 64>(const AttnParams &, dim3, cudaStream_t);  \
    template cudaError_t launch_prefill_mma<T, fp8_t, 80>(const AttnParams &, dim3, cudaStream_t);  \
    template cudaError_t launch_prefill_mma<T, fp8_t, 96>(const AttnParams &, dim3, cudaStream_t);  \
    template cudaError_t launch_prefill_mma<T, fp8_t, 128>(const AttnParams &, dim3, cudaStream_t); \
    template cudaError_t launch_prefill_mma<T, fp8_t, 256>(const AttnParams &, dim3, cudaStream_t);

KVC_INSTANTIATE_PREFILL_MMA_FP8(__half)
KVC_INSTANTIATE_PREFILL_MMA_FP8(__nv_bfloat16)

}  // namespace kvc::cuda::detail
