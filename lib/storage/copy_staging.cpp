#include "storage/copy_staging.hpp"

#include "error.hpp"
#include "storage/cuda_api.hpp"

namespace kvc {

kvc_status CopyStaging::init(int32_t ordinal, int64_t max_pairs) {
    device_ordinal = ordinal;
    capacity = max_pairs;
    host.assign(size_t(2 * max_pairs), 0);
    void *d = nullptr;
    if (kvc_status st = cuda::malloc_device(ordinal, size_t(2 * max_pairs) * sizeof(int32_t), &d); st != KVC_OK)
        return st;
    device = static_cast<int32_t *>(d);
    if (kvc_status st = cuda::event_create(&last_use); st != KVC_OK) {
        release();
        return st;
    }
    return KVC_OK;
}

void CopyStaging::release() {
    if (last_use) cuda::event_destroy(last_use);
    if (device) (void)cuda::free_device(device_ordinal, device);
    last_use = nullptr;
    device = nullptr;
    used = false;
}

}  // namespace kvc
