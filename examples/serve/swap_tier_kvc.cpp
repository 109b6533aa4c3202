// Swap preemption through libkvc's tiers API (host tier). Built only when kvc.h declares it.
#include <kvc/kvc.h>

#include "kvc_check.hpp"
#include "swap_tier.hpp"

namespace serve {

namespace {

class KvcSwapTier final : public SwapTier {
public:
    explicit KvcSwapTier(kvc_pool *pool) : pool_(pool) {}

    bool swap_out(uint64_t seq_id) override {
        uint64_t op = 0;
        kvc_status st = kvc_swap_out(pool_, seq_id, &op);
        if (st == KVC_ERR_BUSY) {
            // Copy-on-write pairs of this sequence are queued: copy them (they are due before the next
            // forward pass anyway), then the blocks can move.
            kvc_check(kvc_copy_pending(pool_, nullptr, nullptr), "kvc_copy_pending");
            st = kvc_swap_out(pool_, seq_id, &op);
        }
        if (st == KVC_ERR_OUT_OF_BLOCKS) return false;  // host tier full: recompute instead
        kvc_check(st, "kvc_swap_out");
        // Wait here: the engine reuses the freed device blocks in this same step.
        kvc_check(kvc_op_wait(pool_, op), "kvc_op_wait");
        return true;
    }

    bool swap_in(uint64_t seq_id) override {
        uint64_t op = 0;
        kvc_status st = kvc_swap_in(pool_, seq_id, &op);
        if (st == KVC_ERR_OUT_OF_BLOCKS) return false;  // no device room yet: try next step
        kvc_check(st, "kvc_swap_in");
        kvc_check(kvc_op_wait(pool_, op), "kvc_op_wait");
        return true;
    }

    int64_t bytes_to_host() const override { return stats().bytes_in; }
    int64_t bytes_to_device() const override { return stats().bytes_out; }
    int64_t prefix_hits() const override { return stats().hits; }

private:
    kvc_pool *pool_;

    kvc_tier_stats stats() const {
        kvc_tier_stats st{};
        st.struct_size = sizeof st;
        kvc_check(kvc_tier_get_stats(pool_, KVC_TIER_HOST, &st), "kvc_tier_get_stats");
        return st;
    }
};

}  // namespace

std::unique_ptr<SwapTier> make_swap_tier(kvc_pool *pool, int64_t host_blocks, std::string *why) {
    if (host_blocks <= 0) {
        *why = "disabled by --host-blocks 0";
        return nullptr;
    }
    kvc_check(kvc_tier_attach_host(pool, host_blocks), "kvc_tier_attach_host");
    return std::make_unique<KvcSwapTier>(pool);
}

}  // namespace serve
