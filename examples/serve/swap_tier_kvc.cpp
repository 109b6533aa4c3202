// Swap preemption through libkvc's tiers API (host tier, and optionally a disk tier below it). Built
// only when kvc.h declares it. Each call goes to every tensor-parallel rank (ReplicatedPool): the
// statuses, the operation ids and the tiers' block counters must agree.
#include <kvc/kvc.h>

#include <stdexcept>

#include "kvc_check.hpp"
#include "swap_tier.hpp"

namespace serve {

namespace {

class KvcSwapTier final : public SwapTier {
public:
    explicit KvcSwapTier(ReplicatedPool &pool) : pool_(pool), stats_(size_t(pool.ranks())) {}

    bool swap_out(uint64_t seq_id) override {
        uint64_t op = 0;
        kvc_status st = swap(kvc_swap_out, "kvc_swap_out", seq_id, &op);
        if (st == KVC_ERR_BUSY) {
            // Copy-on-write pairs of this sequence are queued: copy them (they are due before the next
            // forward pass anyway), then the blocks can move.
            kvc_check(pool_.copy_pending(nullptr), "kvc_copy_pending");
            st = swap(kvc_swap_out, "kvc_swap_out", seq_id, &op);
        }
        if (st == KVC_ERR_OUT_OF_BLOCKS) return false;  // host tier full: recompute instead
        kvc_check(st, "kvc_swap_out");
        // Wait here: the engine reuses the freed device blocks in this same step.
        wait(seq_id, op);
        return true;
    }

    bool swap_in(uint64_t seq_id) override {
        uint64_t op = 0;
        kvc_status st = swap(kvc_swap_in, "kvc_swap_in", seq_id, &op);
        if (st == KVC_ERR_OUT_OF_BLOCKS) return false;  // no device room yet: try next step
        kvc_check(st, "kvc_swap_in");
        wait(seq_id, op);
        return true;
    }

    // Bytes scale with a rank's shard: the sum is what all ranks moved.
    int64_t bytes_to_host() const override { return host().bytes_in; }
    int64_t bytes_to_device() const override { return host().bytes_out; }
    int64_t prefix_hits() const override { return host().hits; }
    TierFigures host() const override { return figures(KVC_TIER_HOST); }
    TierFigures disk() const override { return figures(KVC_TIER_DISK); }
    int64_t flush_to_disk() override {
        int64_t queued = 0;
        kvc_check(pool_.call("kvc_tier_flush", 0, [](kvc_pool *p, int64_t *n) { return kvc_tier_flush(p, n); },
                             &queued),
                  "kvc_tier_flush");
        return queued;
    }

private:
    ReplicatedPool &pool_;
    mutable std::vector<kvc_tier_stats> stats_;  // per rank, reused

    kvc_status swap(kvc_status (*fn)(kvc_pool *, uint64_t, uint64_t *), const char *what, uint64_t seq_id,
                    uint64_t *op) {
        return pool_.call(what, seq_id, [&](kvc_pool *p, uint64_t *o) { return fn(p, seq_id, o); }, op);
    }

    void wait(uint64_t seq_id, uint64_t op) {
        kvc_check(pool_.call("kvc_op_wait", seq_id, [op](kvc_pool *p) { return kvc_op_wait(p, op); }), "kvc_op_wait");
    }

    // Every rank's statistics of one tier, the block counters compared (libkvc's determinism
    // contract covers them, but not disk I/O or checksum failures: a rank's own disk decides those,
    // so they are summed, not compared); bytes summed over the ranks.
    TierFigures figures(int32_t tier) const {
        kvc_check(pool_.each_rank("kvc_tier_get_stats", 0,
                                  [&](int32_t r) {
                                      kvc_tier_stats &s = stats_[size_t(r)];
                                      s = kvc_tier_stats{};
                                      s.struct_size = sizeof s;
                                      return kvc_tier_get_stats(pool_.rank(r), tier, &s);
                                  }),
                  "kvc_tier_get_stats");
        pool_.agree<kvc_tier_stats>("kvc_tier_get_stats", stats_,
                                    {{"capacity_blocks", &kvc_tier_stats::capacity_blocks},
                                     {"used_blocks", &kvc_tier_stats::used_blocks},
                                     {"cached_blocks", &kvc_tier_stats::cached_blocks},
                                     {"held_blocks", &kvc_tier_stats::held_blocks},
                                     {"blocks_in", &kvc_tier_stats::blocks_in},
                                     {"blocks_out", &kvc_tier_stats::blocks_out},
                                     {"hits", &kvc_tier_stats::hits},
                                     {"evictions", &kvc_tier_stats::evictions},
                                     {"recovered_blocks", &kvc_tier_stats::recovered_blocks},
                                     {"foreign_blocks", &kvc_tier_stats::foreign_blocks}});
        const kvc_tier_stats &s0 = stats_[0];
        TierFigures f;
        f.capacity_blocks = s0.capacity_blocks;
        f.used_blocks = s0.used_blocks;
        f.cached_blocks = s0.cached_blocks;
        f.blocks_in = s0.blocks_in;
        f.blocks_out = s0.blocks_out;
        f.hits = s0.hits;
        f.evictions = s0.evictions;
        f.recovered_blocks = s0.recovered_blocks;
        f.foreign_blocks = s0.foreign_blocks;
        f.direct_io = s0.direct_io != 0;
        f.io_uring = s0.io_uring != 0;
        f.persistent = s0.persistent != 0;
        for (const kvc_tier_stats &s : stats_) {
            f.bytes_in += s.bytes_in;
            f.bytes_out += s.bytes_out;
            f.failures += s.failures;
            f.checksum_failures += s.checksum_failures;
            f.io_errors += s.io_errors;
        }
        return f;
    }
};

}  // namespace

std::unique_ptr<SwapTier> make_swap_tier(ReplicatedPool &pool, int64_t host_blocks, const DiskTierConfig &disk,
                                         const std::vector<DiskFile> &disk_files, std::string *why) {
    if (host_blocks <= 0) {
        *why = "disabled by --host-blocks 0";
        return nullptr;
    }
    kvc_check(pool.call("kvc_tier_attach_host", 0,
                        [host_blocks](kvc_pool *p) { return kvc_tier_attach_host(p, host_blocks); }),
              "kvc_tier_attach_host");
    if (disk.blocks > 0) {
        if (int32_t(disk_files.size()) != pool.ranks())
            throw std::runtime_error("internal: " + std::to_string(disk_files.size()) + " disk files for " +
                                     std::to_string(pool.ranks()) + " ranks");
        const int32_t flags = disk.persistent ? KVC_DISK_PERSISTENT : 0;
        kvc_check(pool.each_rank("kvc_tier_attach_disk_with_identity", 0,
                                 [&](int32_t r) {
                                     const DiskFile &f = disk_files[size_t(r)];
                                     return kvc_tier_attach_disk_with_identity(pool.rank(r), f.path.c_str(), disk.blocks,
                                                                               flags, f.identity.c_str());
                                 }),
                  "kvc_tier_attach_disk_with_identity");
    }
    return std::make_unique<KvcSwapTier>(pool);
}

}  // namespace serve
