// Device memory for the forward pass's activations when libkvc runs on its CUDA backend: libkvc
// owns the KV cache, but q / k / v / attention output are the caller's, in device memory. Built
// from device_memory_cuda.cpp when libkvc has CUDA, else device_memory_absent.cpp (every call
// throws). All copies are synchronous on the legacy default stream, which orders them with the
// libkvc launches the demo issues on that stream (stream argument NULL).
#pragma once

#include <cstddef>
#include <string>

namespace serve {

// True when this build can use CUDA and a device is usable; otherwise *why says what is missing.
bool device_usable(std::string *why);

class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t bytes);  // throws std::runtime_error naming the CUDA error
    ~DeviceBuffer();
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
    DeviceBuffer(DeviceBuffer &&o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
    DeviceBuffer &operator=(DeviceBuffer &&o) noexcept;

    void upload(const void *src, size_t bytes);      // host -> device, bytes <= size()
    void download(void *dst, size_t bytes) const;    // device -> host
    void *get() const { return ptr_; }
    size_t size() const { return bytes_; }

private:
    void *ptr_ = nullptr;
    size_t bytes_ = 0;
};

}  // namespace serve
