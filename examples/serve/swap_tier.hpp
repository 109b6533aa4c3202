// Preemption by swap through libkvc's host tier (which also keeps evicted prefix blocks: libkvc spills
// them there and restores them on a later hit). Which implementation is built is decided at
// configure time (CMakeLists.txt): swap_tier_kvc.cpp when the linked kvc.h declares the tiers API
// (kvc_tier_attach_host, kvc_swap_out/in, kvc_op_wait, kvc_tier_get_stats) with the shapes used
// there, else swap_tier_absent.cpp, and the engine preempts by recompute only.
#pragma once

#include <kvc/kvc.h>

#include <cstdint>
#include <memory>
#include <string>

#include "replicated_pool.hpp"

namespace serve {

class SwapTier {
public:
    virtual ~SwapTier() = default;
    // Moves the sequence's blocks to the host tier and waits for the copy; false (nothing changed)
    // when the tier has no room, so the caller preempts by recompute instead.
    virtual bool swap_out(uint64_t seq_id) = 0;
    // Brings a swapped-out sequence back; false (nothing changed) when the device tier has no room yet.
    virtual bool swap_in(uint64_t seq_id) = 0;
    virtual int64_t bytes_to_host() const = 0;    // device -> host, so far, summed over the ranks
    virtual int64_t bytes_to_device() const = 0;  // host -> device, so far, summed over the ranks
    // Evicted prefix blocks that libkvc had spilled to the host tier and a later prompt re-hit.
    virtual int64_t prefix_hits() const = 0;
};

// A swap tier of host_blocks blocks attached to every rank of `pool` (the same size on each, so
// their tiers decide alike), or nullptr when this build has no tiers API (*why explains) — then the
// engine uses recompute preemption only.
std::unique_ptr<SwapTier> make_swap_tier(ReplicatedPool &pool, int64_t host_blocks, std::string *why);

}  // namespace serve
