// The host tier: num_slots block slots in one host allocation (pinned with cudaMallocHost on CUDA
// pools so device copies run asynchronously at full PCIe speed; 4 KiB-aligned host memory on CPU
// pools). Each slot is block_stride bytes rounded up to 4 KiB, so the disk tier can move a slot
// with O_DIRECT straight from/to this memory.
#pragma once

#include <cstdint>

#include "tier/slots.hpp"
#include "tier/stats.hpp"

namespace kvc {

constexpr int64_t kTierAlign = 4096;

inline int64_t tier_round_up(int64_t n) { return (n + kTierAlign - 1) / kTierAlign * kTierAlign; }

class HostTier {
public:
    HostTier() = default;
    HostTier(const HostTier &) = delete;
    HostTier &operator=(const HostTier &) = delete;
    ~HostTier();

    // Allocates the slots (no lock needed: the tier is not yet visible). On failure returns a status
    // set with kvc::fail naming `fn`.
    kvc_status allocate(int32_t num_slots, int64_t block_bytes, int32_t block_size, bool pinned, const char *fn);

    char *slot_ptr(int32_t s) const { return base_ + int64_t(s) * stride_; }
    int64_t stride() const { return stride_; }
    bool pinned() const { return pinned_; }

    TierSlots slots;
    TierCounters stats;

private:
    char *base_ = nullptr;
    int64_t stride_ = 0;
    bool pinned_ = false;
};

}  // namespace kvc
