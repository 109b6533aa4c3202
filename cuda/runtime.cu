// CUDA runtime wrappers behind lib/storage/cuda_api.hpp. cudart is linked statically, so these load the
// driver lazily: without a driver or GPU, cudaGetDeviceCount fails cleanly and device_count reports
// 0 devices (not an error).
#include <atomic>

#include "storage/cuda_api.hpp"
#include "cuda_check.cuh"

namespace kvc::cuda {

namespace {
// -1 = not queried yet. Device presence does not change during a process's life.
std::atomic<int> g_device_count{-1};
constexpr int kMaxCachedDevices = 64;
std::atomic<int> g_sm_count[kMaxCachedDevices];

int query_device_count() {
    int cached = g_device_count.load(std::memory_order_acquire);
    if (cached >= 0) return cached;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();  // no driver / no device: forget the error, report none
        n = 0;
    }
    g_device_count.store(n, std::memory_order_release);
    return n;
}

kvc_status set_device(int32_t device, const char *what) {
    int n = query_device_count();
    if (n == 0) return fail(KVC_ERR_DEVICE, "%s: no CUDA device (or no driver) is available", what);
    if (device < 0 || device >= n)
        return fail(KVC_ERR_DEVICE, "%s: CUDA device %d does not exist (%d device(s))", what, device, n);
    KVC_CUDA_TRY(cudaSetDevice(device), what);
    return KVC_OK;
}
}  // namespace

kvc_status use_device_of(const void *ptr, const char *what) {
    if (query_device_count() <= 1) return KVC_OK;
    cudaPointerAttributes attr{};
    KVC_CUDA_TRY(cudaPointerGetAttributes(&attr, ptr), what);
    if (attr.type == cudaMemoryTypeDevice) KVC_CUDA_TRY(cudaSetDevice(attr.device), what);
    return KVC_OK;
}

int current_sm_count() {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    if (dev >= 0 && dev < kMaxCachedDevices) {
        int cached = g_sm_count[dev].load(std::memory_order_relaxed);
        if (cached > 0) return cached;
    }
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms < 1) {
        (void)cudaGetLastError();
        sms = 1;
    }
    if (dev >= 0 && dev < kMaxCachedDevices) g_sm_count[dev].store(sms, std::memory_order_relaxed);
    return sms;
}

kvc_status device_count(int32_t *out) {
    *out = query_device_count();
    return KVC_OK;
}

kvc_status mem_get_info(int32_t device, size_t *free_bytes, size_t *total_bytes) {
    if (kvc_status st = set_device(device, "cuda mem_get_info"); st != KVC_OK) return st;
    size_t f = 0, t = 0;
    KVC_CUDA_TRY(cudaMemGetInfo(&f, &t), "cuda mem_get_info");
    *free_bytes = f;
    *total_bytes = t;
    return KVC_OK;
}

kvc_status malloc_device(int32_t device, size_t bytes, void **out) {
    if (kvc_status st = set_device(device, "cuda device allocation"); st != KVC_OK) return st;
    void *p = nullptr;
    cudaError_t err = cudaMalloc(&p, bytes);
    if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return fail(KVC_ERR_NO_MEMORY, "cuda device allocation: cannot allocate %zu bytes on device %d",
                    bytes, device);
    }
    if (err != cudaSuccess) return device_error(err, "cuda device allocation");
    *out = p;
    return KVC_OK;
}

kvc_status free_device(int32_t device, void *ptr) {
    if (!ptr) return KVC_OK;
    if (kvc_status st = set_device(device, "cuda device free"); st != KVC_OK) return st;
    KVC_CUDA_TRY(cudaFree(ptr), "cuda device free");
    return KVC_OK;
}

kvc_status malloc_pinned(size_t bytes, void **out) {
    if (query_device_count() == 0)
        return fail(KVC_ERR_DEVICE, "cuda pinned allocation: no CUDA device (or no driver) is available");
    void *p = nullptr;
    cudaError_t err = cudaMallocHost(&p, bytes);
    if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return fail(KVC_ERR_NO_MEMORY, "cuda pinned allocation: cannot allocate %zu bytes", bytes);
    }
    if (err != cudaSuccess) return device_error(err, "cuda pinned allocation");
    *out = p;
    return KVC_OK;
}

kvc_status free_pinned(void *ptr) {
    if (!ptr) return KVC_OK;
    KVC_CUDA_TRY(cudaFreeHost(ptr), "cuda pinned free");
    return KVC_OK;
}

static kvc_status copy_async(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, void *stream,
                             const char *what) {
    if (bytes == 0) return KVC_OK;
    if (query_device_count() == 0)
        return fail(KVC_ERR_DEVICE, "%s: no CUDA device (or no driver) is available", what);
    KVC_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, kind, static_cast<cudaStream_t>(stream)), what);
    return KVC_OK;
}

kvc_status memcpy_h2d(void *dst, const void *src, size_t bytes, void *stream) {
    return copy_async(dst, src, bytes, cudaMemcpyHostToDevice, stream, "cuda memcpy host->device");
}
kvc_status memcpy_d2h(void *dst, const void *src, size_t bytes, void *stream) {
    return copy_async(dst, src, bytes, cudaMemcpyDeviceToHost, stream, "cuda memcpy device->host");
}
kvc_status memcpy_d2d(void *dst, const void *src, size_t bytes, void *stream) {
    return copy_async(dst, src, bytes, cudaMemcpyDeviceToDevice, stream, "cuda memcpy device->device");
}

kvc_status stream_sync(void *stream) {
    if (query_device_count() == 0)
        return fail(KVC_ERR_DEVICE, "cuda stream sync: no CUDA device (or no driver) is available");
    KVC_CUDA_TRY(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cuda stream sync");
    return KVC_OK;
}

kvc_status stream_capturing(void *stream, bool *out) {
    *out = false;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    const cudaError_t err = cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status);
    if (err == cudaErrorStreamCaptureImplicit) {
        // The legacy default stream while a blocking stream captures: using it would join that
        // capture, so treat it as capturing. The error is not sticky; clear it for the next check.
        (void)cudaGetLastError();
        *out = true;
        return KVC_OK;
    }
    KVC_CUDA_TRY(err, "cuda stream capture query");
    // An invalidated capture still records (and refuses) work until it is ended: still capturing.
    *out = status != cudaStreamCaptureStatusNone;
    return KVC_OK;
}

kvc_status use_device(int32_t device, const char *what) {
    if (query_device_count() == 1 && device == 0) return KVC_OK;  // the only device is always current
    return set_device(device, what);
}

kvc_status event_create_on(int32_t device, void **out_event) {
    if (kvc_status st = set_device(device, "cuda event create"); st != KVC_OK) return st;
    cudaEvent_t e = nullptr;
    // Timing disabled: the event only orders work, and such events are the cheapest to record/sync.
    KVC_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cuda event create");
    *out_event = e;
    return KVC_OK;
}

}  // namespace kvc::cuda
