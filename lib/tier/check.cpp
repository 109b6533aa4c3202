// Tier part of kvc_pool_check: slot states agree with the free/LRU lists and the hash index, held
// slots belong to exactly one swapped-out sequence entry, and swapped-out sequences are well formed.
#include <vector>

#include "core/tier_view.hpp"
#include "error.hpp"
#include "tier/tiers.hpp"

namespace kvc {
namespace {

#define TIER_CHECK(cond, ...)                                                       \
    do {                                                                            \
        if (!(cond)) return fail(KVC_ERR_INTERNAL, "kvc_pool_check: " __VA_ARGS__); \
    } while (0)

// refs: per slot, swapped-out table entries naming it (host tier), or nullptr (disk tier).
kvc_status check_slots(const TierSlots &ts, const char *name, const std::vector<int32_t> *refs, bool idle) {
    const FreeQueues &q = ts.lists();
    int64_t indexed = 0, held = 0, busy = 0;
    for (int32_t s = 0; s < ts.capacity(); ++s) {
        const bool listed = q.contains(s);
        const bool ix = ts.indexed(s);
        switch (ts.state(s)) {
            case TierSlots::kFree:
                TIER_CHECK(listed && q.list_of(s) == FreeQueues::kUnhashedList && !ix,
                           "%s slot %d is free but listed=%d list=%d indexed=%d", name, s, listed, q.list_of(s), ix);
                break;
            case TierSlots::kCached:
                TIER_CHECK(listed && q.list_of(s) == ts.priority(s) && ix,
                           "%s slot %d is cached but listed=%d list=%d (priority %d) indexed=%d", name, s, listed,
                           q.list_of(s), ts.priority(s), ix);
                break;
            case TierSlots::kHeld:
                TIER_CHECK(!listed && !ix, "%s slot %d is held but listed=%d indexed=%d", name, s, listed, ix);
                ++held;
                break;
            case TierSlots::kBusy:
                TIER_CHECK(!listed, "%s slot %d is busy but in a free/LRU list", name, s);
                TIER_CHECK(!idle, "%s slot %d is busy while no tier copy is in flight", name, s);
                ++busy;
                break;
            default: TIER_CHECK(false, "%s slot %d has unknown state %d", name, s, int(ts.state(s)));
        }
        const int32_t r = refs ? (*refs)[size_t(s)] : 0;
        TIER_CHECK(r == (ts.state(s) == TierSlots::kHeld ? 1 : 0),
                   "%s slot %d (state %d) is named by %d swapped-out table entries", name, s, int(ts.state(s)), r);
        if (ix) {
            ++indexed;
            TIER_CHECK(ts.find(ts.index().hash_of(s)) == s, "%s slot %d is not found under its hash", name, s);
        }
    }
    int64_t map_entries = 0;
    for (int64_t i = 0; i < ts.index().slot_count(); ++i) {
        const int32_t s = ts.index().slot(i);
        if (s < 0) continue;
        ++map_entries;
        TIER_CHECK(s < ts.capacity() && ts.indexed(s), "%s index entry %lld names slot %d, which is not indexed", name,
                   (long long)i, s);
        // Unlike the device's prefix cache, a lower tier holds one copy of a block at most.
        TIER_CHECK(!ts.index().slot_has_copies(i), "%s index entry %lld holds two copies of one hash", name,
                   (long long)i);
    }
    TIER_CHECK(map_entries == indexed && indexed == ts.index().size(),
               "%s tier: %lld indexed slots, %lld map entries, "
               "map size %lld",
               name, (long long)indexed, (long long)map_entries, (long long)ts.index().size());
    TIER_CHECK(held == ts.num_held() && busy == ts.num_busy(),
               "%s tier counts %lld held / %lld busy, found %lld / %lld", name, (long long)ts.num_held(),
               (long long)ts.num_busy(), (long long)held, (long long)busy);
    return KVC_OK;
}

}  // namespace

std::vector<int32_t> tier_host_refs(kvc_pool *p) {
    const Tiers *t = pool_tiers(p);
    return std::vector<int32_t>(t ? size_t(t->host->slots.capacity()) : 0, 0);
}

kvc_status tier_check_sequence(kvc_pool *p, const Sequence *s, std::vector<int32_t> *refs) {
    const unsigned long long id = s->id;
    if (!s->swapped_out) {
        TIER_CHECK(s->swap_slots.empty(), "resident sequence %llu has swap slots", id);
        return KVC_OK;
    }
    TIER_CHECK(pool_tiers(p), "sequence %llu is swapped out but the pool has no tiers", id);
    TIER_CHECK(s->swap_slots.size() == s->table.size(), "swapped-out sequence %llu has %zu swap slots for %zu blocks",
               id, s->swap_slots.size(), s->table.size());
    for (size_t i = 0; i < s->table.size(); ++i) {
        const int32_t slot = s->swap_slots[i], b = s->table[i];
        if (int64_t(i) < s->released) {  // released by the sliding window: neither here nor there
            TIER_CHECK(b == -1 && slot == -1, "swapped-out sequence %llu released entry %zu: block %d, host slot %d",
                       id, i, b, slot);
            continue;
        }
        TIER_CHECK((b < 0) == (slot >= 0) && slot < int32_t(refs->size()),
                   "swapped-out sequence %llu entry %zu: block %d, host slot %d", id, i, b, slot);
        if (slot >= 0) ++(*refs)[size_t(slot)];
    }
    return KVC_OK;
}

kvc_status tier_check(kvc_pool *p, const std::vector<int32_t> &refs) {
    Tiers *t = pool_tiers(p);
    if (!t) return KVC_OK;
    const bool idle = t->inflight.load(std::memory_order_acquire) == 0;
    if (kvc_status st = check_slots(t->host->slots, "host", &refs, idle); st != KVC_OK) return st;
    if (t->disk) {
        if (kvc_status st = check_slots(t->disk->slots, "disk", nullptr, idle); st != KVC_OK) return st;
    }
    return KVC_OK;
}

}  // namespace kvc
