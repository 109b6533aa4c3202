// Turning CUDA runtime errors into libkvc statuses. Every CUDA failure becomes KVC_ERR_DEVICE with
// the runtime's own text, so a caller sees "kvc cache write: an illegal memory access ..." rather
// than a bare code.
#pragma once

#include <cuda_runtime.h>

#include "error.hpp"

namespace kvc::cuda {

inline kvc_status device_error(cudaError_t err, const char *what) {
    return fail(KVC_ERR_DEVICE, "%s: CUDA error %d (%s): %s", what, int(err), cudaGetErrorName(err),
                cudaGetErrorString(err));
}

// Launch-time check: cudaGetLastError also clears a non-sticky error so the next call starts clean.
inline kvc_status check_launch(const char *what) {
    cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? KVC_OK : device_error(err, what);
}

// Makes the device that owns `ptr` current, so kernels and the NULL stream land on the right GPU
// when a process drives several. Single-GPU processes skip the pointer query entirely.
kvc_status use_device_of(const void *ptr, const char *what);

// Streaming multiprocessors of the current device (cached per device; 132 on H100 SXM).
int current_sm_count();

}  // namespace kvc::cuda

#define KVC_CUDA_TRY(call, what)                                         \
    do {                                                                 \
        cudaError_t kvc_err_ = (call);                                   \
        if (kvc_err_ != cudaSuccess) return ::kvc::cuda::device_error(kvc_err_, what); \
    } while (0)
