// RAII device memory for the GPU tests and benchmarks, through lib/storage/cuda_api.hpp only (the test
// programs are plain C++ and see no CUDA headers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "storage/cuda_api.hpp"

namespace kvc_gpu_test {

class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t bytes) { allocate(bytes); }
    ~DeviceBuffer() { release(); }
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
    DeviceBuffer(DeviceBuffer &&o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}

    kvc_status allocate(size_t bytes) {
        release();
        bytes_ = bytes;
        // Zero-byte buffers still get a distinct, valid address (1 byte) so kernels can be handed it.
        return kvc::cuda::malloc_device(0, bytes ? bytes : 1, &ptr_);
    }
    void release() {
        if (ptr_) (void)kvc::cuda::free_device(0, ptr_);
        ptr_ = nullptr;
    }
    kvc_status upload(const void *src, size_t bytes) {
        kvc_status st = kvc::cuda::memcpy_h2d(ptr_, src, bytes, nullptr);
        return st != KVC_OK ? st : kvc::cuda::stream_sync(nullptr);
    }
    kvc_status download(void *dst, size_t bytes) const {
        kvc_status st = kvc::cuda::memcpy_d2h(dst, ptr_, bytes, nullptr);
        return st != KVC_OK ? st : kvc::cuda::stream_sync(nullptr);
    }
    void *get() const { return ptr_; }
    template <typename T> T *as() const { return static_cast<T *>(ptr_); }
    size_t bytes() const { return bytes_; }

private:
    void *ptr_ = nullptr;
    size_t bytes_ = 0;
};

// Allocates and uploads a host vector; returns the status of the first failing step.
template <typename T>
kvc_status upload_vector(DeviceBuffer &buf, const std::vector<T> &v) {
    kvc_status st = buf.allocate(v.size() * sizeof(T));
    if (st != KVC_OK || v.empty()) return st;
    return buf.upload(v.data(), v.size() * sizeof(T));
}

inline bool gpu_available() {
    int32_t n = 0;
    return kvc::cuda::device_count(&n) == KVC_OK && n > 0;
}

}  // namespace kvc_gpu_test

// In a CMocka test: reports the test *skipped* (never passed) when there is no CUDA device (real
// or emulated). `what` names the device the test wanted, for the message.
#define KVC_REQUIRE_GPU(what)                                         \
    do {                                                              \
        if (!kvc_gpu_test::gpu_available()) {                         \
            print_message("no " what " device: test skipped\n");      \
            skip();                                                   \
            return;                                                   \
        }                                                             \
    } while (0)
