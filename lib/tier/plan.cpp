// Tier planning under the pool mutex: choosing slots, moving identities between indexes and queuing
// the copies (executed later, outside the lock, by tier/exec.cpp). Nothing here allocates.
#include "tier/plan.hpp"
#include "core/tier_view.hpp"
#include "error.hpp"

namespace kvc {

void tier_push_job(Tiers *t, uint8_t kind, int32_t block, int32_t host, int32_t disk) {
    TierJob j;
    j.kind = kind;
    j.block = block;
    j.host = host;
    j.disk = disk;
    j.epoch = t->cache_epoch;
    t->pending.push_back(j);  // capacity reserved at attach (see Tiers::pending)
    t->inflight.fetch_add(1, std::memory_order_relaxed);
}

void tier_event(kvc_pool *p, int32_t type, const TierSlots &slots, int32_t s, int32_t tier) {
    const PrefixCache &ix = slots.index();
    EventRecord ev;
    ev.type = type;
    ev.tier = tier;
    ev.block_id = s;
    ev.hash = ix.hash_of(s);
    ev.parent = ix.parent_of(s);
    const bool stored = type == KVC_EVENT_BLOCK_STORED;
    if (stored) {  // as the device's: a stored block carries its keys and token ids
        ev.num_tokens = pool_block_size(p);
        ev.lora_id = ix.lora_of(s);
        ev.extras_digest = ix.digest_of(s);
    }
    pool_push_tier_event(p, ev, stored ? ix.tokens_of(s) : nullptr);
}

// Queues a write of host slot v's block (its index entry names it) into a disk slot: the disk
// victim (free first, then LRU) is dropped. `kind`: kJobDiskSpill when v is about to be reused,
// kJobPersist when v stays cached (kvc_tier_flush; the caller made it busy). Returns false when
// the disk holds the block already or every disk slot is busy.
static bool write_host_slot_to_disk(kvc_pool *p, Tiers *t, int32_t v, uint8_t kind) {
    DiskTier &d = *t->disk;
    const TierSlots &hs = t->host->slots;
    const PrefixCache &ix = hs.index();
    if (d.slots.find(ix.hash_of(v)) >= 0) return false;
    const int32_t ds = d.slots.next_victim();
    if (ds < 0) return false;
    if (d.slots.state(ds) == TierSlots::kCached) tier_event(p, KVC_EVENT_BLOCK_REMOVED, d.slots, ds, KVC_TIER_DISK);
    if (d.slots.claim(ds)) ++d.stats.evictions;
    BlockKey key;
    key.hash = ix.hash_of(v);
    key.lora_id = ix.lora_of(v);
    key.extras_digest = ix.digest_of(v);
    d.slots.index_busy(ds, ix.parent_of(v), key, ix.tokens_of(v), hs.priority(v));
    d.stamps[size_t(ds)] = d.next_stamp++;
    tier_push_job(t, kind, -1, v, ds);
    return true;
}

// Host slot v (claimed) receives device block b's identity and a copy of its bytes (kJobSpill; the
// commit caches v).
static void copy_device_block_to_host(kvc_pool *p, Tiers *t, int32_t b, int32_t v) {
    const CachedIdentity id = pool_cached_identity(p, b);
    t->host->slots.index_busy(v, id.parent, id.key, id.tokens, id.priority);
    tier_push_job(t, kJobSpill, b, v, -1);
}

// Tiers::victim_state of a device block during tier_plan_spills (kNotVictim outside it).
enum VictimState : uint8_t { kNotVictim = 0, kUndecided, kSpilled, kDropped };

// Whether a copy of hash h on the device other than block `except` stays cached once the planned
// takes are done (not a victim) or goes to the host tier (a victim chosen for a spill). Walks the
// hash's copies (one, nearly always; stops at the first kept one).
static bool device_copy_kept(const kvc_pool *p, const Tiers *t, const Hash128 &h, int32_t except) {
    for (int32_t c = pool_first_copy(p, h); c >= 0; c = pool_next_copy(p, c))
        if (c != except && (t->victim_state[size_t(c)] == kNotVictim || t->victim_state[size_t(c)] == kSpilled))
            return true;
    return false;
}

// Whether a lookup can still walk through the block `parent` names once the planned takes are
// done: it is the root, or a copy of it is cached on the device and not dropped by
// tier_plan_spills' evictions, or it is indexed in the host or disk tier (a copy in flight
// included). A parent still undecided (evicted after its child, by a lower retention priority)
// counts as not kept: the child is dropped rather than take a slot that nothing may lead to.
static bool parent_kept(const kvc_pool *p, const Tiers *t, const Hash128 &parent) {
    if (parent == kRootHash) return true;
    if (device_copy_kept(p, t, parent, -1)) return true;
    if (t->host->slots.find(parent) >= 0) return true;
    return t->disk && t->disk->slots.find(parent) >= 0;
}

// Host slot v (cached) is about to be reused: its block goes to the disk tier when there is one,
// the disk does not hold it yet and its parent is kept (else it is dropped: on disk it could never
// be reached, as when its parent was dropped by the evictions that take v).
static void spill_host_slot_to_disk(kvc_pool *p, Tiers *t, int32_t v) {
    if (parent_kept(p, t, t->host->slots.index().parent_of(v))) (void)write_host_slot_to_disk(p, t, v, kJobDiskSpill);
}

int tier_flush_host_slot(kvc_pool *p, int32_t v) {
    Tiers *t = pool_tiers(p);
    TierSlots &hs = t->host->slots;
    if (hs.state(v) != TierSlots::kCached) return 0;
    if (t->disk->slots.find(hs.index().hash_of(v)) >= 0) return 0;
    if (t->disk->slots.next_victim() < 0) return -1;
    hs.pin_cached(v);  // no reuse until the write is done; the commit puts it back in its LRU list
    (void)write_host_slot_to_disk(p, t, v, kJobPersist);  // cannot fail: checked above
    return 1;
}

int tier_flush_device_block(kvc_pool *p, int32_t b) {
    Tiers *t = pool_tiers(p);
    TierSlots &hs = t->host->slots;
    const Hash128 &h = pool_block_hash(p, b);
    if (t->disk->slots.find(h) >= 0) return 0;
    // In the host tier: written from there (unless a copy of it is in flight, which ends on disk or
    // is a flush of this call already).
    if (const int32_t hv = hs.find(h); hv >= 0) return tier_flush_host_slot(p, hv);
    if (t->disk->slots.next_victim() < 0) return -1;
    const int32_t v = tier_take_host_slot(p, t);
    if (v < 0) return -1;
    // Device -> host, then host -> disk: executed in this order, and v stays busy until both ran
    // (the spill's commit caches it; the disk write's commit leaves host slots alone).
    copy_device_block_to_host(p, t, b, v);
    return write_host_slot_to_disk(p, t, v, kJobDiskSpill) ? 1 : -1;
}

int32_t tier_take_host_slot(kvc_pool *p, Tiers *t) {
    TierSlots &hs = t->host->slots;
    const int32_t v = hs.next_victim();
    if (v < 0) return -1;
    if (hs.state(v) == TierSlots::kCached) {
        tier_event(p, KVC_EVENT_BLOCK_REMOVED, hs, v, KVC_TIER_HOST);
        if (t->disk) spill_host_slot_to_disk(p, t, v);
        ++t->host->stats.evictions;
    }
    hs.claim(v);
    return v;
}

// The cached blocks the next n takes evict, in eviction order, into t->victims (marked undecided).
// The unhashed blocks are taken first and evict nothing: skipped without a walk.
static void collect_victims(kvc_pool *p, Tiers *t, int64_t n) {
    const FreeQueues &q = pool_free_queues(p);
    t->victims.clear();
    n -= q.size(FreeQueues::kUnhashedList);
    if (n <= 0) return;
    int32_t b = -1;
    for (int list = 0; list < FreeQueues::kNumPriorities && b < 0; ++list) b = q.head(uint8_t(list));
    for (; b >= 0 && n > 0; b = q.victim_after(b), --n) {
        t->victims.push_back(b);
        t->victim_state[size_t(b)] = kUndecided;
    }
}

// Heads first: the victims in the reverse of eviction order, each worth keeping taking one of the
// host slots a claim can get (free or cached ones; held and busy ones cannot be taken). A victim is
// not worth keeping when the host has its hash already, or another device copy of it stays (or
// is spilled: of two evicted copies only one goes to the host), or its parent is not kept.
static void choose_spills(const kvc_pool *p, Tiers *t) {
    const TierSlots &hs = t->host->slots;
    int64_t slots = hs.num_evictable();
    for (auto it = t->victims.rbegin(); it != t->victims.rend(); ++it) {
        const int32_t b = *it;
        const Hash128 &h = pool_block_hash(p, b);
        const bool keep =
            slots > 0 && hs.find(h) < 0 && !device_copy_kept(p, t, h, b) && parent_kept(p, t, pool_block_parent(p, b));
        t->victim_state[size_t(b)] = keep ? kSpilled : kDropped;
        slots -= keep ? 1 : 0;
    }
}

void tier_plan_spills(kvc_pool *p, int64_t n) {
    Tiers *t = pool_tiers(p);
    collect_victims(p, t, n);
    if (t->victims.empty()) return;
    choose_spills(p, t);
    // Queued in eviction order: the copies commit in it, so the deepest blocks lead the host's LRU
    // list as they led the device's.
    for (int32_t b : t->victims) {
        if (t->victim_state[size_t(b)] != kSpilled) continue;
        const int32_t v = tier_take_host_slot(p, t);  // cannot fail: choose_spills counted the slots
        if (v >= 0) copy_device_block_to_host(p, t, b, v);
    }
    // Only now: the host victims' disk spills above judge their parents by the decisions.
    for (int32_t b : t->victims) t->victim_state[size_t(b)] = kNotVictim;
}

int32_t tier_find_lower(kvc_pool *p, const Hash128 &parent, const BlockKey &key, const int32_t *tokens, bool use_disk,
                        int32_t *out_slot) {
    Tiers *t = pool_tiers(p);
    int32_t s = t->host->slots.find_usable(parent, key, tokens);
    if (s >= 0) {
        *out_slot = s;
        return KVC_TIER_HOST;
    }
    if (use_disk && t->disk) {
        s = t->disk->slots.find_usable(parent, key, tokens);
        if (s >= 0) {
            *out_slot = s;
            return KVC_TIER_DISK;
        }
    }
    return -1;
}

void tier_pin_restore_sources(kvc_pool *p, const PrefixWalk &w) {
    Tiers *t = pool_tiers(p);
    for (int64_t j = 0; j < w.held(); ++j)
        if (w.block(j) < 0) t->host->slots.pin_cached(w.slot(j));
}

int32_t tier_restore_hit(kvc_pool *p, const PrefixWalk &w, int64_t j, int32_t priority) {
    Tiers *t = pool_tiers(p);
    TierSlots &hs = t->host->slots;
    const int32_t slot = w.slot(j);
    const int32_t b = pool_take_fresh_block(p, priority);
    const PrefixCache &ix = hs.index();
    BlockKey key;
    key.hash = ix.hash_of(slot);
    key.lora_id = ix.lora_of(slot);
    key.extras_digest = ix.digest_of(slot);
    // The device block is cached right away; readers of its bytes order after the copy through
    // tier_barrier().
    pool_enter_restored(p, b, ix.parent_of(slot), key, ix.tokens_of(slot));
    hs.set_priority(slot, priority);
    ++t->host->stats.hits;
    tier_push_job(t, kJobRestore, b, slot, -1);
    return b;
}

void tier_release_swapped(kvc_pool *p, Sequence *s) {
    Tiers *t = pool_tiers(p);
    for (int32_t slot : s->swap_slots)
        if (slot >= 0) t->host->slots.release(slot);
    s->swap_slots.clear();
}

void tier_reset_cache(kvc_pool *p) {
    Tiers *t = pool_tiers(p);
    if (!t) return;
    ++t->cache_epoch;  // jobs in flight (busy slots, untouched here) commit as drops: see Tiers
    t->host->slots.drop_all_cached();
    if (!t->disk) return;
    // The file forgets them too (the caller runs the jobs once the lock is released).
    TierSlots &ds = t->disk->slots;
    for (int32_t s = 0; s < ds.capacity(); ++s)
        if (ds.state(s) == TierSlots::kCached) tier_push_job(t, kJobDiskForget, -1, -1, s);
    ds.drop_all_cached();
}

}  // namespace kvc
