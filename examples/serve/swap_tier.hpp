// Preemption by swap through libkvc's host tier (which also keeps evicted prefix blocks: libkvc spills
// them there and restores them on a later hit). Which implementation is built is decided at
// configure time (CMakeLists.txt): swap_tier_kvc.cpp when the linked kvc.h declares the tiers API
// (kvc_tier_attach_host, kvc_swap_out/in, kvc_op_wait, kvc_tier_get_stats) with the shapes used
// there, else swap_tier_absent.cpp, and the engine preempts by recompute only. The same build adds an
// optional disk tier below the host tier (kvc_tier_attach_disk): host-tier LRU victims spill to a
// file and come back on prefix re-hits, and with KVC_DISK_PERSISTENT a new pool re-attaching the file
// finds them again (a warm restart).
#pragma once

#include <kvc/kvc.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "replicated_pool.hpp"

namespace serve {

// The disk tier below a host tier: 0 blocks = none.
struct DiskTierConfig {
    int64_t blocks = 0;
    std::string path;         // the file (created if missing; truncated unless persistent)
    bool persistent = false;  // KVC_DISK_PERSISTENT: keep and re-index the file's blocks at attach
    // What computed the KV (the model's weights and shape). Each pool's file is attached with it plus
    // the pool and rank (kvc_tier_attach_disk_with_identity), so that a file left by another model,
    // or another rank's file, is recovered from never (its blocks would be wrong KV).
    std::string identity;
};

// One rank's disk file and the identity it is attached with.
struct DiskFile {
    std::string path;
    std::string identity;
};

// One tier's kvc_tier_stats: block counts as every rank has them (compared across ranks), bytes
// summed over the ranks. All zero for a tier that is not attached.
struct TierFigures {
    int64_t capacity_blocks = 0, used_blocks = 0, cached_blocks = 0;
    int64_t blocks_in = 0, blocks_out = 0, hits = 0, evictions = 0;
    int64_t failures = 0, checksum_failures = 0, io_errors = 0, recovered_blocks = 0, foreign_blocks = 0;
    int64_t bytes_in = 0, bytes_out = 0;
    bool direct_io = false, io_uring = false, persistent = false;
    // Counters of a pool that is gone (before a restart) added to the live pool's; the state
    // (capacity, used, cached, flags) is the live one's.
    void add_counters(const TierFigures &o) {
        for (int64_t TierFigures::*f : {&TierFigures::blocks_in, &TierFigures::blocks_out, &TierFigures::hits,
                                        &TierFigures::evictions, &TierFigures::failures,
                                        &TierFigures::checksum_failures, &TierFigures::io_errors,
                                        &TierFigures::recovered_blocks, &TierFigures::foreign_blocks,
                                        &TierFigures::bytes_in, &TierFigures::bytes_out})
            this->*f += o.*f;
    }
};

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
    // Host and disk tier statistics (the disk tier's all zero without one).
    virtual TierFigures host() const = 0;
    virtual TierFigures disk() const = 0;
    // kvc_tier_flush on every rank (a disk tier is attached): every cached block the disk lacks is
    // written to it; returns the blocks queued (the ranks agree).
    virtual int64_t flush_to_disk() = 0;
};

// A swap tier of host_blocks blocks attached to every rank of `pool` (the same size on each, so
// their tiers decide alike), with a disk tier of disk.blocks below it when disk.blocks > 0 (rank r
// in disk_files[r]: every rank needs its own file), or nullptr when this build has no tiers API
// (*why explains) — then the engine uses recompute preemption only and has no disk tier.
std::unique_ptr<SwapTier> make_swap_tier(ReplicatedPool &pool, int64_t host_blocks, const DiskTierConfig &disk,
                                         const std::vector<DiskFile> &disk_files, std::string *why);

}  // namespace serve
