// KV storage allocation: one allocation per pool, made at kvc_pool_create and never resized.
#include <cstdlib>
#include <cstring>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "error.hpp"
#include "storage/cuda_api.hpp"
#include "storage/pool_access.hpp"

namespace kvc {

kvc_status storage_allocate(const KvLayout &layout, int32_t backend, int32_t device, void **out_base) {
    *out_base = nullptr;
    if (layout.total_bytes <= 0) return fail(KVC_ERR_INVALID_ARG, "kvc_pool_create: KV storage would be empty");
    if (backend == KVC_BACKEND_CUDA) return cuda::malloc_device(device, size_t(layout.total_bytes), out_base);
    // Host storage: 4 KiB aligned (O_DIRECT-friendly for the disk tier, SIMD-friendly for kernels),
    // zero-filled so that never-written slots hold defined values. From 2 MiB on, 2 MiB aligned
    // and offered to transparent huge pages: a block table scatters a sequence over the whole
    // pool, so with 4 KiB pages every block a kernel reads is a TLB miss of its own (two for K and
    // V). Batched CPU decode ran 7-10 % faster (tests/bench/RESULTS.md, session 20). The memset
    // touches every page at creation anyway, so huge pages cost no memory the pool would not hold.
    constexpr size_t kHuge = size_t(2) << 20;
    const size_t kAlign = size_t(layout.total_bytes) >= kHuge ? kHuge : 4096;
    size_t bytes = (size_t(layout.total_bytes) + kAlign - 1) / kAlign * kAlign;
    void *p = std::aligned_alloc(kAlign, bytes);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (p && kAlign == kHuge) (void)madvise(p, bytes, MADV_HUGEPAGE);  // advice only: failure is fine
#endif
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
