// KV storage allocation: one allocation per pool, made at kvc_pool_create and never resized.
#include <cstdlib>
#include <cstring>

#include "error.hpp"
#include "storage/cuda_api.hpp"
#include "storage/pool_access.hpp"

namespace kvc {

kvc_status storage_allocate(const KvLayout &layout, int32_t backend, int32_t device, void **out_base) {
    *out_base = nullptr;
    if (layout.total_bytes <= 0) return fail(KVC_ERR_INVALID_ARG, "kvc_pool_create: KV storage would be empty");
    if (backend == KVC_BACKEND_CUDA) return cuda::malloc_device(device, size_t(layout.total_bytes), out_base);
    // Host storage: 4 KiB aligned (O_DIRECT-friendly for the disk tier, SIMD-friendly for kernels),
    // zero-filled so that never-written slots hold defined values.
    constexpr size_t kAlign = 4096;
    size_t bytes = (size_t(layout.total_bytes) + kAlign - 1) / kAlign * kAlign;
    void *p = std::aligned_alloc(kAlign, bytes);
    if (!p)
        return fail(KVC_ERR_NO_MEMORY, "kvc_pool_create: cannot allocate %lld bytes of host KV storage",
                    (long long)layout.total_bytes);
    std::memset(p, 0, bytes);
    *out_base = p;
    return KVC_OK;
}

void storage_release(int32_t backend, int32_t device, void *base) {
    if (!base) return;
    if (backend == KVC_BACKEND_CUDA) {
        (void)cuda::free_device(device, base);
    } else {
        std::free(base);
    }
}

}  // namespace kvc
