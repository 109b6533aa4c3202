#include "tier/host.hpp"

#include <cstdlib>
#include <cstring>

#include "error.hpp"
#include "storage/cuda_api.hpp"

namespace kvc {

kvc_status HostTier::allocate(int32_t num_slots, int64_t block_bytes, int32_t block_size, bool pinned, const char *fn) {
    stride_ = tier_round_up(block_bytes);
    int64_t total;
    if (mul_overflows(stride_, num_slots, &total))
        return fail(KVC_ERR_OVERFLOW, "%s: %d slots of %lld bytes overflow", fn, num_slots, (long long)stride_);
    void *p = nullptr;
    if (pinned) {
        if (kvc_status st = cuda::malloc_pinned(size_t(total), &p); st != KVC_OK) return st;
    } else {
        p = std::aligned_alloc(size_t(kTierAlign), size_t(total));
        if (!p)
            return fail(KVC_ERR_NO_MEMORY, "%s: cannot allocate %lld bytes for %d host tier slots", fn,
                        (long long)total, num_slots);
    }
    // Touch every page now: the first swap should not pay the page faults, and the padding of each
    // slot (written to disk with O_DIRECT) must hold defined bytes.
    std::memset(p, 0, size_t(total));
    base_ = static_cast<char *>(p);
    pinned_ = pinned;
    slots.init(num_slots, block_size);
    return KVC_OK;
}

HostTier::~HostTier() {
    if (!base_) return;
    if (pinned_)
        (void)cuda::free_pinned(base_);
    else
        std::free(base_);
}

}  // namespace kvc
