// kvc_tier_stats.reachable_blocks: which cached blocks a prefix lookup can still reach. A lookup
// walks a prompt's chain from its head and stops at the first block cached in no tier, so a block
// is reachable when every block before it in its chain is cached somewhere: in the device's prefix
// cache or indexed in a host or disk slot (any state: a slot with a copy in flight lands there).
//
// Counted on demand by kvc_tier_get_stats only, so no other path pays for it. Each chain is walked
// once: every block on a walked path gets the verdict of its walk (memo per tier and index), and a
// later walk stops at the first block with one. Time linear in the blocks the tiers hold, one hash
// lookup per tier and step; memory one byte per device block and host / disk slot.
#include <vector>

#include "core/tier_view.hpp"
#include "tier/tiers.hpp"

namespace kvc {

namespace {

const TierSlots &lower_slots(const Tiers *t, int32_t tier) {
    return tier == KVC_TIER_HOST ? t->host->slots : t->disk->slots;
}

// Where one block of a chain is cached: tier (KVC_TIER_*, -1 = nowhere) and block or slot.
struct Place {
    int32_t tier = -1;
    int32_t index = -1;
};

class ReachWalk {
public:
    explicit ReachWalk(const kvc_pool *p) : p_(p), t_(pool_tiers(p)) {
        memo_[KVC_TIER_DEVICE].assign(size_t(pool_num_blocks(p)), kUnknown);
        if (t_) memo_[KVC_TIER_HOST].assign(size_t(t_->host->slots.capacity()), kUnknown);
        if (t_ && t_->disk) memo_[KVC_TIER_DISK].assign(size_t(t_->disk->slots.capacity()), kUnknown);
    }

    bool reachable(Place x) {
        path_.clear();
        uint8_t verdict = kCut;
        for (;;) {
            uint8_t &m = memo(x);
            if (m == kReached || m == kCut) {
                verdict = m;
                break;
            }
            if (m == kOnPath) break;  // a cycle (only a hash collision could make one): cut
            m = kOnPath;
            path_.push_back(x);
            const Hash128 &parent = parent_of(x);
            if (parent == kRootHash) {
                verdict = kReached;
                break;
            }
            x = find(parent);
            if (x.tier < 0) break;  // a block cached nowhere: the chain is cut there
        }
        for (const Place &y : path_) memo(y) = verdict;
        return verdict == kReached;
    }

private:
    enum : uint8_t { kUnknown, kOnPath, kReached, kCut };

    uint8_t &memo(const Place &x) { return memo_[x.tier][size_t(x.index)]; }
    const Hash128 &parent_of(const Place &x) const {
        if (x.tier == KVC_TIER_DEVICE) return pool_block_parent(p_, x.index);
        return lower_slots(t_, x.tier).index().parent_of(x.index);
    }
    Place find(const Hash128 &h) const {
        if (const int32_t b = pool_first_copy(p_, h); b >= 0) return {KVC_TIER_DEVICE, b};
        if (!t_) return {};
        if (const int32_t s = t_->host->slots.find(h); s >= 0) return {KVC_TIER_HOST, s};
        if (!t_->disk) return {};
        if (const int32_t s = t_->disk->slots.find(h); s >= 0) return {KVC_TIER_DISK, s};
        return {};
    }

    const kvc_pool *p_;
    const Tiers *t_;
    std::vector<uint8_t> memo_[3];
    std::vector<Place> path_;
};

}  // namespace

int64_t tier_reachable_blocks(const kvc_pool *p, int32_t tier) {
    const Tiers *t = pool_tiers(p);
    if (tier != KVC_TIER_DEVICE && !(t && (tier == KVC_TIER_HOST || t->disk))) return 0;
    ReachWalk walk(p);
    int64_t n = 0;
    if (tier == KVC_TIER_DEVICE) {
        // cached_blocks of the device: refcount 0 with a cache entry (in a priority list)
        for (int32_t b = 0, nb = pool_num_blocks(p); b < nb; ++b)
            if (pool_block_cached(p, b) && pool_block_is_free(p, b)) n += walk.reachable({tier, b}) ? 1 : 0;
        return n;
    }
    const TierSlots &slots = lower_slots(t, tier);
    for (int32_t s = 0; s < slots.capacity(); ++s)
        if (slots.state(s) == TierSlots::kCached) n += walk.reachable({tier, s}) ? 1 : 0;
    return n;
}

}  // namespace kvc
