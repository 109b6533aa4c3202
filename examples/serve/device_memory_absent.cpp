// DeviceBuffer when libkvc was built without CUDA: nothing is usable (see device_memory.hpp).
#include "device_memory.hpp"

#include <stdexcept>

namespace serve {

bool device_usable(std::string *why) {
    *why = "libkvc was built without the CUDA backend (configure with -DKVC_CUDA=ON on a machine with nvcc)";
    return false;
}

DeviceBuffer::DeviceBuffer(size_t) { throw std::runtime_error("kvc_serve was built without CUDA"); }
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&o) noexcept {
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    return *this;
}
void DeviceBuffer::upload(const void *, size_t) { throw std::runtime_error("kvc_serve was built without CUDA"); }
void DeviceBuffer::download(void *, size_t) const { throw std::runtime_error("kvc_serve was built without CUDA"); }

}  // namespace serve
