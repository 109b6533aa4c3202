// Built when the linked libkvc header has no tiers API: preemption is by recompute only.
#include "swap_tier.hpp"

namespace serve {

std::unique_ptr<SwapTier> make_swap_tier(ReplicatedPool &, int64_t, const DiskTierConfig &,
                                         const std::vector<DiskFile> &, std::string *why) {
    *why = "this libkvc has no kvc_swap_out";
    return nullptr;
}

}  // namespace serve
