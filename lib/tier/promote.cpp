// Bringing a prompt's disk-tier hits up before kvc_alloc walks for its hit (and kvc_tier_prefetch).
//
// Disk blocks reach the device through host slots: a promotion reads them into host slots (verified),
// and kvc_alloc then restores host hits into fresh device blocks. A prompt may have more disk hits
// than host slots it can take (a small host tier, or most slots held by swapped-out sequences), so
// kvc_alloc promotes in rounds:
//
//   round k:  walk host -> disk; read as many disk hits as host slots can be taken   (disk -> host)
//             if some were left for want of a slot: the walk's host hits go into fresh device
//             blocks, cached and pinned, which frees their host slots for round k + 1 (host -> device)
//
// Pins (not references: kvc_pool_check counts a block's references in sequence tables) keep the
// restored blocks and the prompt's device hits from eviction between rounds; they are dropped
// together at the end, deepest block first, as kvc_free would release a table, and kvc_alloc's own
// walk then finds those blocks on the device. The copies of a round run before the next round is
// planned (tier_run_pending), and a disk read into a host slot waits for the device copy out of it
// (the executor's FIFO order), so a slot is reused only once its block is safe on the device.
#include <algorithm>
#include <new>
#include <vector>

#include "core/tier_view.hpp"
#include "tier/plan.hpp"

namespace kvc {
namespace {

// Pins (pin_cached) or unpins (commit_cached: back of its LRU list) the walk's hits in `tier`.
void keep_tier_hits(kvc_pool *p, Tiers *t, const PrefixWalk &w, int32_t tier, bool keep) {
    TierSlots &slots = tier == KVC_TIER_HOST ? t->host->slots : t->disk->slots;
    for (int64_t i = 0; i < w.held(); ++i) {
        if (!w.lower_hit(i, tier)) continue;
        if (keep)
            slots.pin_cached(w.slot(i));
        else
            slots.commit_cached(w.slot(i));
    }
}

// One disk -> host round (lock held): each disk hit of the walk, in prompt order, takes a host slot
// and its read is queued. *short_of_slots when a disk hit found no host slot (the rest of the hit
// stays on disk, touched); a restore round may then free slots (it makes progress or ends the
// rounds: each one moves at least one host hit into the device cache for good).
void promote_round(kvc_pool *p, Tiers *t, const PrefixWalk &w, bool *short_of_slots) {
    TierSlots &hs = t->host->slots;
    DiskTier &d = *t->disk;
    // The prompt's host hits must survive the host slots taken below, and so must its disk hits:
    // each host slot taken may evict a host block whose disk spill claims a disk slot.
    keep_tier_hits(p, t, w, KVC_TIER_HOST, true);
    keep_tier_hits(p, t, w, KVC_TIER_DISK, true);
    bool promoting = true;
    *short_of_slots = false;
    for (int64_t i = 0; i < w.held(); ++i) {
        if (!w.lower_hit(i, KVC_TIER_DISK)) continue;
        const int32_t ds = w.slot(i);
        const PrefixCache &ix = d.slots.index();
        // The same block on its way up already, or no host slot: the hit ends here, and this and
        // the later disk hits go back to their LRU lists.
        promoting = promoting && hs.find(ix.hash_of(ds)) < 0;
        const int32_t v = promoting ? tier_take_host_slot(p, t) : -1;
        if (v < 0) {
            *short_of_slots = *short_of_slots || promoting;
            promoting = false;
            d.slots.commit_cached(ds);
            continue;
        }
        BlockKey key;
        key.hash = ix.hash_of(ds);
        key.lora_id = ix.lora_of(ds);
        key.extras_digest = ix.digest_of(ds);
        hs.index_busy(v, ix.parent_of(ds), key, ix.tokens_of(ds), d.slots.priority(ds));
        tier_push_job(t, kJobPromote, -1, v, ds);
    }
    keep_tier_hits(p, t, w, KVC_TIER_HOST, false);
}

// The restored and device blocks pinned by the latest restore round (`pins`), unpinned when the
// promotion ends however it ends (a walk may throw std::bad_alloc). `next` is where a round builds
// its list before it replaces `pins`.
struct RoundPins {
    kvc_pool *p;
    std::vector<int32_t> pins, next;  // a path that reads the disk anyway: allocating here is fine
    ~RoundPins() {
        if (pins.empty()) return;
        std::lock_guard<kvc::PoolMutex> lk(pool_mutex(p));
        for (auto it = pins.rbegin(); it != pins.rend(); ++it) pool_unpin_block(p, *it);
    }
};

// One host -> device round (lock held): the walk's device hits are pinned, then its host hits are
// restored into fresh device blocks (cached, pinned), all listed in prompt order; that list then
// replaces the previous round's, whose pins are dropped. False, changing nothing, when there is no
// host hit or too few free device blocks for them. kept->next must have room for w.held() entries.
bool restore_round(kvc_pool *p, Tiers *t, const PrefixWalk &w, int32_t priority, RoundPins *kept) {
    if (w.host_hits == 0 || pool_num_free(p) - w.free_hits < w.host_hits) return false;
    const int64_t held = w.held();
    kept->next.clear();                 // no allocation from here on
    for (int64_t i = 0; i < held; ++i)  // before any fresh block is taken: eviction must not take them
        if (w.block(i) >= 0) pool_pin_block(p, w.block(i));
    keep_tier_hits(p, t, w, KVC_TIER_DISK, true);  // a host victim's disk spill must not take them
    keep_tier_hits(p, t, w, KVC_TIER_HOST, true);  // restore sources: busy until their copies ran
    tier_plan_spills(p, w.host_hits);              // one fresh block per restore below
    for (int64_t i = 0; i < held; ++i) {
        int32_t b = w.block(i);
        if (b < 0) {
            if (!w.lower_hit(i, KVC_TIER_HOST)) continue;
            b = tier_restore_hit(p, w, i, priority);  // one reference, which the pin replaces
            pool_ref_to_pin(p, b);
        }
        kept->next.push_back(b);
    }
    keep_tier_hits(p, t, w, KVC_TIER_DISK, false);
    for (auto it = kept->pins.rbegin(); it != kept->pins.rend(); ++it) pool_unpin_block(p, *it);
    kept->pins.swap(kept->next);
    return true;
}

}  // namespace

kvc_status tier_promote_prefix(kvc_pool *p, const int32_t *tokens, int64_t num_tokens, const KeySet &keys,
                               PromotionCheck check) {
    Tiers *t = pool_tiers(p);
    if (!t || !pool_caching(p)) return KVC_OK;
    {
        std::lock_guard<kvc::PoolMutex> lk(pool_mutex(p));
        if (!t->disk) return KVC_OK;  // attached once, never detached: no need to look again below
        if ((num_tokens - 1) / pool_block_size(p) <= 0) return KVC_OK;  // no full block to hit
    }
    // Copies in flight (another thread's kvc_tier_prefetch still reading this prompt's blocks) hold
    // their slots busy, which the walk below would take for misses: let them land first.
    if (t->inflight.load(std::memory_order_acquire) > 0) tier_run_pending(p);
    RoundPins kept{p, {}, {}};
    for (int round = 0;; ++round) {
        bool short_of_slots = false;
        {
            std::lock_guard<kvc::PoolMutex> lk(pool_mutex(p));
            // The hit kvc_alloc will look for; its held blocks are w.block(0 .. held - 1).
            const PrefixWalk w = pool_find_prompt_hit(p, tokens, num_tokens, keys, kWalkHostDisk);
            if (w.disk_hits == 0) break;
            if (round == 0)
                if (kvc_status st = check.refuse(check.ctx, w); st != KVC_OK) return st;
            promote_round(p, t, w, &short_of_slots);
        }
        tier_run_pending(p);
        if (!short_of_slots || !check.restore_in_rounds) break;
#ifdef KVC_TEST_HOOKS  // kvct_tier_hold_jobs: held jobs would never free slots for another round
        if (t->hold_jobs.load(std::memory_order_relaxed)) break;
#endif
        {
            std::lock_guard<kvc::PoolMutex> lk(pool_mutex(p));
            const PrefixWalk w = pool_find_prompt_hit(p, tokens, num_tokens, keys, kWalkHostDisk);
            try {
                kept.next.reserve(size_t(w.held()));
            } catch (const std::bad_alloc &) {
                break;  // no memory: the hit ends where the host slots did
            }
            if (!restore_round(p, t, w, keys.priority, &kept)) break;
        }
        tier_run_pending(p);
    }
    return KVC_OK;
}

}  // namespace kvc
