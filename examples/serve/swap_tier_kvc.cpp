// Swap preemption through libkvc's tiers API (host tier). Built only when kvc.h declares it. Each
// call goes to every tensor-parallel rank (ReplicatedPool): the statuses, the operation ids and the
// host tiers' block counters must agree.
#include <kvc/kvc.h>

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
    int64_t bytes_to_host() const override { return summed(&kvc_tier_stats::bytes_in); }
    int64_t bytes_to_device() const override { return summed(&kvc_tier_stats::bytes_out); }
    int64_t prefix_hits() const override { return stats().hits; }

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

    // Every rank's host tier statistics, the block counts compared; rank 0's.
    const kvc_tier_stats &stats() const {
        kvc_check(pool_.each_rank("kvc_tier_get_stats", 0,
                                  [&](int32_t r) {
                                      kvc_tier_stats &s = stats_[size_t(r)];
                                      s = kvc_tier_stats{};
                                      s.struct_size = sizeof s;
                                      return kvc_tier_get_stats(pool_.rank(r), KVC_TIER_HOST, &s);
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
                                     {"evictions", &kvc_tier_stats::evictions}});
        return stats_[0];
    }

    int64_t summed(int64_t kvc_tier_stats::*field) const {
        stats();
        int64_t total = 0;
        for (const kvc_tier_stats &s : stats_) total += s.*field;
        return total;
    }
};

}  // namespace

std::unique_ptr<SwapTier> make_swap_tier(ReplicatedPool &pool, int64_t host_blocks, std::string *why) {
    if (host_blocks <= 0) {
        *why = "disabled by --host-blocks 0";
        return nullptr;
    }
    kvc_check(pool.call("kvc_tier_attach_host", 0,
                        [host_blocks](kvc_pool *p) { return kvc_tier_attach_host(p, host_blocks); }),
              "kvc_tier_attach_host");
    return std::make_unique<KvcSwapTier>(pool);
}

}  // namespace serve
