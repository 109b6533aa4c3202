// CUDA streams and events used by the memory tiers (lib/storage/cuda_api.hpp).
#include "cuda_check.cuh"
#include "storage/cuda_api.hpp"

namespace kvc::cuda {

kvc_status tier_stream_create(int32_t device, void **out_stream) {
    KVC_CUDA_TRY(cudaSetDevice(device), "tier stream: set device");
    cudaStream_t s = nullptr;
    // Non-blocking: tier copies must not serialize with the legacy default stream.
    KVC_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "tier stream create");
    *out_stream = s;
    return KVC_OK;
}

void tier_stream_destroy(void *stream) {
    if (!stream) return;
    (void)cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
    (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}

kvc_status event_create(void **out_event) {
    cudaEvent_t e = nullptr;
    KVC_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cuda event create");
    *out_event = e;
    return KVC_OK;
}

void event_destroy(void *event) {
    if (event) (void)cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

kvc_status event_record(void *event, void *stream) {
    KVC_CUDA_TRY(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)),
                 "cuda event record");
    return KVC_OK;
}

kvc_status event_query(void *event, bool *out_done) {
    cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (err == cudaErrorNotReady) {
        *out_done = false;
        return KVC_OK;
    }
    if (err != cudaSuccess) return device_error(err, "cuda event query");
    *out_done = true;
    return KVC_OK;
}

kvc_status event_sync(void *event) {
    KVC_CUDA_TRY(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), "cuda event sync");
    return KVC_OK;
}

kvc_status stream_wait_event(void *stream, void *event) {
    KVC_CUDA_TRY(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0),
                 "cuda stream wait event");
    return KVC_OK;
}

}  // namespace kvc::cuda
