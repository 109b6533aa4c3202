// DeviceBuffer on the CUDA runtime (see device_memory.hpp).
#include "device_memory.hpp"

#include <cuda_runtime.h>

#include <stdexcept>
#include <utility>

namespace serve {

namespace {

void check(cudaError_t e, const char *what, size_t bytes) {
    if (e != cudaSuccess)
        throw std::runtime_error(std::string(what) + " of " + std::to_string(bytes) + " bytes failed: " +
                                 cudaGetErrorString(e));
}

void check_size(size_t bytes, size_t cap) {
    if (bytes > cap)
        throw std::runtime_error("device copy of " + std::to_string(bytes) + " bytes into a buffer of " +
                                 std::to_string(cap));
}

}  // namespace

bool device_usable(std::string *why) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        *why = e != cudaSuccess ? std::string("no usable CUDA device (") + cudaGetErrorString(e) + ")"
                                : std::string("no CUDA device");
        return false;
    }
    return true;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) { check(cudaMalloc(&ptr_, bytes ? bytes : 1), "cudaMalloc", bytes); }

DeviceBuffer::~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&o) noexcept {
    if (this != &o) {
        if (ptr_) cudaFree(ptr_);
        ptr_ = std::exchange(o.ptr_, nullptr);
        bytes_ = o.bytes_;
    }
    return *this;
}

void DeviceBuffer::upload(const void *src, size_t bytes) {
    check_size(bytes, bytes_);
    check(cudaMemcpy(ptr_, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy host->device", bytes);
}

void DeviceBuffer::download(void *dst, size_t bytes) const {
    check_size(bytes, bytes_);
    check(cudaMemcpy(dst, ptr_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy device->host", bytes);
}

}  // namespace serve
