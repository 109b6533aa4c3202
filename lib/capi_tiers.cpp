// C API: memory tiers — attach, whole-sequence swap, preemption helpers, tiered prefix lookup,
// operation ids and statistics. Planning happens under the pool mutex (all checks first, then a
// mutation that cannot fail); the copies run after it is released (tier_run_pending).
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstring>
#include <memory>
#include <thread>

#include "capi_args.hpp"
#include "cuda_api.hpp"
#include "error.hpp"
#include "pool.hpp"
#include "struct_size.hpp"
#include "tier_cuda.hpp"
#include "tier_plan.hpp"
#include "tiers.hpp"

namespace {

using kvc::check_struct_size;
using kvc::fail;
using kvc::StructUse;
using kvc::Sequence;
using kvc::Tiers;
using kvc::TierSlots;

bool swappable(const kvc_pool *p, int32_t b) { return p->blocks.refcount(b) == 1 && p->blocks.pins(b) == 0; }

// A swap finished its copies (tier_run_pending returned): record that for kvc_op_query/wait.
void mark_recorded(Tiers *t, uint64_t op) {
    uint64_t cur = t->recorded_op.load(std::memory_order_relaxed);
    while (cur < op && !t->recorded_op.compare_exchange_weak(cur, op)) {
    }
}

kvc_status check_op(kvc_pool *pool, uint64_t op, const char *fn, Tiers **out) {
    if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
    std::lock_guard<std::mutex> lk(pool->mu);
    Tiers *t = pool->tiers.load(std::memory_order_relaxed);
    if (!t || op == 0 || op >= t->next_op)
        return fail(KVC_ERR_INVALID_ARG, "%s: operation %llu was never issued by this pool", fn, (unsigned long long)op);
    *out = t;
    return KVC_OK;
}

// Host-tier slots a swap-out of s needs / blocks a swap-in needs.
int64_t swap_out_blocks(const kvc_pool *p, const Sequence *s) {
    int64_t n = 0;
    for (int32_t b : s->table) n += b >= 0 && swappable(p, b) ? 1 : 0;  // -1: released by the window
    return n;
}
int64_t held_blocks(const Sequence *s) {
    int64_t n = 0;
    for (int32_t slot : s->swap_slots) n += slot >= 0 ? 1 : 0;
    return n;
}

void fill_counters(const kvc::TierCounters &c, kvc_tier_stats *o) {
    o->blocks_in = c.blocks_in;
    o->blocks_out = c.blocks_out;
    o->bytes_in = c.bytes_in;
    o->bytes_out = c.bytes_out;
    o->transfers = c.transfers;
    o->transfer_seconds = c.seconds;
    o->bandwidth_bytes_per_s = c.seconds > 0 ? double(c.bytes_in + c.bytes_out) / c.seconds : 0.0;
    o->hits = c.hits;
    o->evictions = c.evictions;
    o->failures = c.failures;
    o->checksum_failures = c.checksum_failures;
    o->io_errors = c.io_errors;
}

void fill_slots(const TierSlots &s, int64_t stride, kvc_tier_stats *o) {
    o->capacity_blocks = s.capacity();
    o->used_blocks = s.num_used();
    o->cached_blocks = s.num_cached();
    o->held_blocks = s.num_held();
    o->bytes_used = s.num_used() * stride;
}

// The MAC key of kvc_tier_attach_disk_keyed; not given for the unkeyed attaches (given with a NULL
// key is an error, never "unkeyed").
struct DiskKey {
    bool given = false;
    const uint8_t *bytes = nullptr;
    int64_t len = 0;
};

kvc_status check_key(const DiskKey &key, const char *fn) {
    if (!key.bytes) return fail(KVC_ERR_NULL_ARG, "%s: key is NULL", fn);
    if (key.len < KVC_DISK_KEY_MIN_LEN || key.len > KVC_DISK_KEY_MAX_LEN)
        return fail(KVC_ERR_INVALID_ARG, "%s: key_len must be in [%d, %d], got %lld", fn, KVC_DISK_KEY_MIN_LEN,
                    KVC_DISK_KEY_MAX_LEN, (long long)key.len);
    return KVC_OK;
}

// The kvc_tier_attach_disk* functions; `fn` names the caller in messages.
kvc_status attach_disk(kvc_pool *pool, const char *path, int64_t num_blocks, int32_t flags, const char *identity,
                       const DiskKey &key, const char *fn) {
    if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
    if (!path) return fail(KVC_ERR_NULL_ARG, "%s: path is NULL", fn);
    if (!*path) return fail(KVC_ERR_INVALID_ARG, "%s: path is empty", fn);
    if (num_blocks < 1 || num_blocks > INT32_MAX)
        return fail(KVC_ERR_INVALID_ARG, "%s: num_blocks must be in [1, %d], got %lld", fn, INT32_MAX,
                    (long long)num_blocks);
    if (flags & ~(KVC_DISK_PERSISTENT | KVC_DISK_NO_DIRECT))
        return fail(KVC_ERR_INVALID_ARG, "%s: unknown flags 0x%x", fn, unsigned(flags));
    if (identity && strnlen(identity, KVC_MAX_DISK_IDENTITY_LEN + 1) > KVC_MAX_DISK_IDENTITY_LEN)
        return fail(KVC_ERR_INVALID_ARG, "%s: identity is longer than %d bytes", fn, KVC_MAX_DISK_IDENTITY_LEN);
    if (key.given)
        if (kvc_status st = check_key(key, fn); st != KVC_OK) return st;
    Tiers *t = pool->tiers.load(std::memory_order_acquire);
    if (!t) return fail(KVC_ERR_STATE, "%s: attach a host tier first (kvc_tier_attach_host)", fn);
    {
        std::lock_guard<std::mutex> lk(pool->mu);
        if (t->disk) return fail(KVC_ERR_STATE, "%s: this pool already has a disk tier", fn);
    }
    std::unique_ptr<kvc::DiskTier> d(new kvc::DiskTier());
    kvc_status st = d->open(path, int32_t(num_blocks), pool->layout, flags, identity, fn, key.bytes, size_t(key.len));
    if (st != KVC_OK) return st;
    // Job capacity grows by the disk slots (see Tiers::pending); exec_mu first, as the executor.
    std::lock_guard<std::mutex> ex(t->exec_mu);
    std::lock_guard<std::mutex> lk(pool->mu);
    if (t->disk) return fail(KVC_ERR_STATE, "%s: this pool already has a disk tier", fn);
    const size_t jobs = 2 * size_t(t->host->slots.capacity()) + 2 * size_t(num_blocks);
    t->pending.reserve(jobs);
    t->running.reserve(jobs);
    t->disk = std::move(d);
    // Blocks a persistent file brought back are news to a KV-aware router.
    const kvc::TierSlots &ds = t->disk->slots;
    for (int32_t s = 0; s < ds.capacity(); ++s)
        if (ds.state(s) == kvc::TierSlots::kCached) kvc::tier_event(pool, KVC_EVENT_BLOCK_STORED, ds, s, KVC_TIER_DISK);
    return KVC_OK;
}

}  // namespace

extern "C" {

KVC_API kvc_status kvc_tier_attach_host(kvc_pool *pool, int64_t num_blocks) {
    KVC_GUARD({
        const char *fn = "kvc_tier_attach_host";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (num_blocks < 1 || num_blocks > INT32_MAX)
            return fail(KVC_ERR_INVALID_ARG, "%s: num_blocks must be in [1, %d], got %lld", fn, INT32_MAX,
                        (long long)num_blocks);
        if (pool->backend == KVC_BACKEND_NONE || !pool->storage)
            return fail(KVC_ERR_STATE, "%s: the pool is metadata-only (backend NONE): no KV bytes to move", fn);
        if (pool->tiers.load()) return fail(KVC_ERR_STATE, "%s: this pool already has a host tier", fn);
        // Everything is allocated before the tier becomes visible; the allocation runs unlocked.
        std::unique_ptr<Tiers> t(new Tiers());
        t->host.reset(new kvc::HostTier());
        const bool cuda = pool->backend == KVC_BACKEND_CUDA;
        if (kvc_status st = t->host->allocate(int32_t(num_blocks), pool->layout.block_stride, pool->block_size, cuda, fn);
            st != KVC_OK)
            return st;
        t->pending.reserve(2 * size_t(num_blocks));  // see Tiers::pending
        t->running.reserve(2 * size_t(num_blocks));
        t->hit_tier.assign(size_t(pool->num_blocks), 0);
        t->hit_slot.assign(size_t(pool->num_blocks), -1);
        t->victims.reserve(size_t(pool->num_blocks));
        t->victim_state.assign(size_t(pool->num_blocks), 0);
        if (cuda) {
            if (kvc_status st = kvc::cuda::tier_stream_create(pool->device, &t->stream); st != KVC_OK) return st;
            if (kvc_status st = kvc::cuda::event_create(&t->last_event); st != KVC_OK) return st;
        }
        std::lock_guard<std::mutex> lk(pool->mu);
        if (pool->tiers.load()) return fail(KVC_ERR_STATE, "%s: this pool already has a host tier", fn);
        pool->tiers.store(t.release(), std::memory_order_release);
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_tier_attach_disk(kvc_pool *pool, const char *path, int64_t num_blocks, int32_t flags) {
    KVC_GUARD({ return attach_disk(pool, path, num_blocks, flags, nullptr, DiskKey{}, "kvc_tier_attach_disk"); })
}

KVC_API kvc_status kvc_tier_attach_disk_with_identity(kvc_pool *pool, const char *path, int64_t num_blocks,
                                                      int32_t flags, const char *identity) {
    KVC_GUARD({
        return attach_disk(pool, path, num_blocks, flags, identity, DiskKey{}, "kvc_tier_attach_disk_with_identity");
    })
}

KVC_API kvc_status kvc_tier_attach_disk_keyed(kvc_pool *pool, const char *path, int64_t num_blocks, int32_t flags,
                                              const char *identity, const uint8_t *key, int64_t key_len) {
    KVC_GUARD({
        return attach_disk(pool, path, num_blocks, flags, identity, DiskKey{true, key, key_len},
                           "kvc_tier_attach_disk_keyed");
    })
}

KVC_API kvc_status kvc_swap_out(kvc_pool *pool, uint64_t seq_id, uint64_t *out_op) {
    KVC_GUARD({
        const char *fn = "kvc_swap_out";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        kvc_pool *p = pool;
        Tiers *t = nullptr;
        uint64_t op = 0;
        {
            std::lock_guard<std::mutex> lk(p->mu);
            Sequence *s = p->seqs.find(seq_id);
            if (!s) return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no sequence %llu", fn, (unsigned long long)seq_id);
            if (s->swapped_out)
                return fail(KVC_ERR_STATE, "%s: sequence %llu is already swapped out", fn, (unsigned long long)seq_id);
            t = p->tiers.load(std::memory_order_relaxed);
            if (!t) return fail(KVC_ERR_STATE, "%s: the pool has no host tier (kvc_tier_attach_host)", fn);
            // A queued copy-on-write pair into one of this sequence's blocks has not written it yet:
            // moving that block first would save stale bytes. A pair reading one of its blocks (a
            // fork's copy from it) is no obstacle: the swap-out reads the same bytes, and the pair's
            // hold keeps the block from reuse until the pair is drained.
            for (int64_t k = 0; k < p->copies.size(); ++k) {
                const int32_t dst = p->copies.dst_at(k);
                if (std::find(s->table.begin(), s->table.end(), dst) != s->table.end())
                    return fail(KVC_ERR_BUSY, "%s: a copy-on-write pair into block %d of sequence %llu is pending; "
                                "run kvc_copy_pending (or drain the pairs) first", fn, dst, (unsigned long long)seq_id);
            }
            TierSlots &hs = t->host->slots;
            const int64_t need = swap_out_blocks(p, s);
            if (need > hs.num_evictable())
                return fail(KVC_ERR_OUT_OF_BLOCKS, "%s: sequence %llu needs %lld host tier slots, %lld are available "
                            "(%d total)", fn, (unsigned long long)seq_id, (long long)need,
                            (long long)hs.num_evictable(), hs.capacity());
            s->swap_slots.assign(s->table.size(), -1);  // may throw: nothing changed yet
            // ---- from here on nothing can fail ----
            // Deepest block first, as kvc_free: cached blocks re-enter the LRU in eviction order.
            for (size_t i = s->table.size(); i-- > 0;) {
                const int32_t b = s->table[i];
                if (b < 0 || !swappable(p, b)) continue;  // shared: stays on the device with our reference
                const int32_t slot = kvc::tier_take_host_slot(pool, t);
                hs.hold(slot);
                s->swap_slots[i] = slot;
                kvc::tier_push_job(t, kvc::kJobSwapOut, b, slot, -1);
                s->table[i] = -1;
                // Freed now; reuse is ordered after the copy (FIFO jobs, tier_barrier on writes).
                kvc::pool_release_block(p, b);
            }
            s->swapped_out = true;
            p->seq_generation.fetch_add(1, std::memory_order_relaxed);
            op = t->next_op++;
        }
        kvc::tier_run_pending(p);
        mark_recorded(t, op);
        if (out_op) *out_op = op;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_swap_in(kvc_pool *pool, uint64_t seq_id, uint64_t *out_op) {
    KVC_GUARD({
        const char *fn = "kvc_swap_in";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        kvc_pool *p = pool;
        Tiers *t = nullptr;
        uint64_t op = 0;
        {
            std::lock_guard<std::mutex> lk(p->mu);
            Sequence *s = p->seqs.find(seq_id);
            if (!s) return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no sequence %llu", fn, (unsigned long long)seq_id);
            if (!s->swapped_out)
                return fail(KVC_ERR_STATE, "%s: sequence %llu is not swapped out", fn, (unsigned long long)seq_id);
            t = p->tiers.load(std::memory_order_relaxed);
            const int64_t need = held_blocks(s);
            if (need > p->blocks.num_free())
                return fail(KVC_ERR_OUT_OF_BLOCKS, "%s: sequence %llu needs %lld free device blocks, %lld are free", fn,
                            (unsigned long long)seq_id, (long long)need, (long long)p->blocks.num_free());
            // ---- from here on nothing can fail ----
            const int32_t prio = s->keys.priority;
            kvc::pool_spill_before_taking(p, need);  // may spill (never into a held slot)
            for (size_t i = 0; i < s->table.size(); ++i) {
                const int32_t slot = s->swap_slots[i];
                if (slot < 0) continue;
                const int32_t b = kvc::pool_take_fresh_block(p, prio);
                t->host->slots.unhold(slot);
                kvc::tier_push_job(t, kvc::kJobSwapIn, b, slot, -1);
                s->table[i] = b;
            }
            s->swap_slots.clear();
            s->swapped_out = false;
            p->counters.blocks_allocated += need;
            op = t->next_op++;
        }
        kvc::tier_run_pending(p);
        mark_recorded(t, op);
        if (out_op) *out_op = op;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_op_query(kvc_pool *pool, uint64_t op, int32_t *out_done) {
    KVC_GUARD({
        const char *fn = "kvc_op_query";
        if (!out_done) return fail(KVC_ERR_NULL_ARG, "%s: out_done is NULL", fn);
        Tiers *t = nullptr;
        if (kvc_status st = check_op(pool, op, fn, &t); st != KVC_OK) return st;
        if (t->recorded_op.load(std::memory_order_acquire) < op) {
            *out_done = 0;  // its call has not finished issuing the copies yet
            return KVC_OK;
        }
        bool done = true;
        if (pool->backend == KVC_BACKEND_CUDA) {
            // The tier stream's latest event covers every op recorded so far (FIFO stream), so this
            // may report an op unfinished a little longer than it is, never the reverse.
            std::lock_guard<std::mutex> lk(t->cuda_mu);
            if (t->last_event_recorded)
                if (kvc_status st = kvc::cuda::event_query(t->last_event, &done); st != KVC_OK) return st;
        }
        *out_done = done ? 1 : 0;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_tier_prefetch(kvc_pool *pool, const int32_t *tokens, int64_t num_tokens, const kvc_keys *keys,
                                     int64_t *out_cached_tokens) {
    KVC_GUARD({
        const char *fn = "kvc_tier_prefetch";
        if (kvc_status st = kvc::check_token_args(pool, tokens, num_tokens, fn); st != KVC_OK) return st;
        if (kvc_status st = kvc::check_max_len(pool, num_tokens, fn); st != KVC_OK) return st;
        Tiers *t = pool->tiers.load(std::memory_order_acquire);
        {
            std::lock_guard<std::mutex> lk(pool->mu);
            if (!t || !t->disk) return fail(KVC_ERR_STATE, "%s: this pool has no disk tier (kvc_tier_attach_disk)", fn);
        }
        const kvc::KeySet &ks = kvc::keys_or_empty(keys);
        // kvc_alloc's promotion without an allocation to refuse: everything it would read up.
        const kvc::PromotionCheck accept_all{[](const void *, const kvc::PrefixWalk &) { return KVC_OK; }, nullptr, false};
        if (kvc_status st = kvc::tier_promote_prefix(pool, tokens, num_tokens, ks, accept_all); st != KVC_OK) return st;
        if (out_cached_tokens) {
            int64_t cached = 0;
            if (pool->caching) {
                std::lock_guard<std::mutex> lk(pool->mu);
                cached = kvc::pool_find_prompt_hit(pool, tokens, num_tokens, ks, kvc::kWalkHost).hit_blocks *
                         pool->block_size;
            }
            *out_cached_tokens = cached;
        }
        return KVC_OK;
    })
}

// Rounds: plan as many writes as free host/disk slots and the reserved job capacity allow (under
// the lock), run them (without it), go on from where the round stopped. A round that can plan
// nothing of its own (no host or disk slot to be had even after the copies ran) ends the call; no
// allocation (the job vectors are reserved at attach).
KVC_API kvc_status kvc_tier_flush(kvc_pool *pool, int64_t *out_blocks) {
    KVC_GUARD({
        const char *fn = "kvc_tier_flush";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        Tiers *t = pool->tiers.load(std::memory_order_acquire);
        {
            std::lock_guard<std::mutex> lk(pool->mu);
            if (!t || !t->disk) return fail(KVC_ERR_STATE, "%s: this pool has no disk tier (kvc_tier_attach_disk)", fn);
        }
        const int32_t slots = t->host->slots.capacity();
        const int32_t blocks = pool->blocks.num_blocks();
        int64_t queued = 0;
        int32_t next_slot = 0, next_block = 0;  // host slots first, then device blocks
        while (next_slot < slots || next_block < blocks) {
            size_t ours = 0;
            {
                std::lock_guard<std::mutex> lk(pool->mu);
                const size_t before = t->pending.size();
                const auto room = [&] { return t->pending.size() + 3 <= t->pending.capacity(); };
                int r = 0;
                for (; next_slot < slots && room(); ++next_slot)
                    if ((r = kvc::tier_flush_host_slot(pool, next_slot)) < 0) break;
                    else queued += r;
                for (; r >= 0 && next_slot == slots && next_block < blocks && room(); ++next_block) {
                    const int32_t b = next_block;
                    // Blocks in use may still be waiting for their KV (kvc_append caches a block
                    // before the forward pass writes it): only finished, unused ones are written.
                    if (!pool->caching || !pool->blocks.cached(b) || pool->blocks.refcount(b) != 0) continue;
                    if ((r = kvc::tier_flush_device_block(pool, b)) < 0) break;
                    queued += r;
                }
                ours = t->pending.size() - before;
                if (r < 0 && ours == 0 && t->inflight.load(std::memory_order_relaxed) == 0) break;  // no slot to be had
            }
            kvc::tier_run_pending(pool);
        }
        kvc::tier_run_pending(pool);
        if (out_blocks) *out_blocks = queued;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_op_wait(kvc_pool *pool, uint64_t op) {
    KVC_GUARD({
        const char *fn = "kvc_op_wait";
        Tiers *t = nullptr;
        if (kvc_status st = check_op(pool, op, fn, &t); st != KVC_OK) return st;
        while (t->recorded_op.load(std::memory_order_acquire) < op) {
            kvc::tier_run_pending(pool);  // help, then let the issuing call record it
            std::this_thread::yield();
        }
        if (pool->backend != KVC_BACKEND_CUDA) return KVC_OK;
        bool recorded;
        {
            std::lock_guard<std::mutex> lk(t->cuda_mu);
            recorded = t->last_event_recorded;
        }
        return recorded ? kvc::cuda::event_sync(t->last_event) : KVC_OK;
    })
}

KVC_API kvc_status kvc_preempt_recompute(kvc_pool *pool, uint64_t seq_id, int64_t *out_tokens_to_recompute) {
    KVC_GUARD({
        const char *fn = "kvc_preempt_recompute";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        int64_t tokens = 0;
        {
            std::lock_guard<std::mutex> lk(pool->mu);
            const Sequence *s = pool->seqs.find(seq_id);
            if (!s) return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no sequence %llu", fn, (unsigned long long)seq_id);
            tokens = s->num_tokens;
        }
        if (kvc_status st = kvc_free(pool, seq_id); st != KVC_OK) return st;
        if (out_tokens_to_recompute) *out_tokens_to_recompute = tokens;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_preemption_cost(kvc_pool *pool, uint64_t seq_id, int64_t *out_swap_bytes,
                                       int64_t *out_recompute_tokens) {
    KVC_GUARD({
        const char *fn = "kvc_preemption_cost";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        std::lock_guard<std::mutex> lk(pool->mu);
        const Sequence *s = pool->seqs.find(seq_id);
        if (!s) return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no sequence %llu", fn, (unsigned long long)seq_id);
        const int64_t blocks = s->swapped_out ? held_blocks(s) : swap_out_blocks(pool, s);
        if (out_swap_bytes) *out_swap_bytes = blocks * pool->layout.block_stride;
        if (out_recompute_tokens) *out_recompute_tokens = s->num_tokens;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_prefix_lookup_tiers(kvc_pool *pool, const int32_t *tokens, int64_t num_tokens,
                                           const kvc_keys *keys, int64_t *out_device_tokens, int64_t *out_host_tokens,
                                           int64_t *out_disk_tokens) {
    KVC_GUARD({
        const char *fn = "kvc_prefix_lookup_tiers";
        if (kvc_status st = kvc::check_token_args(pool, tokens, num_tokens, fn); st != KVC_OK) return st;
        kvc::PrefixWalk w;
        if (pool->caching) {
            std::lock_guard<std::mutex> lk(pool->mu);
            w = kvc::pool_find_prompt_hit(pool, tokens, num_tokens, kvc::keys_or_empty(keys), kvc::kWalkHostDisk);
        }
        const int64_t bs = pool->block_size;
        // A windowed hit's leading blocks (not held) count in no tier.
        if (out_device_tokens) *out_device_tokens = (w.held() - w.host_hits - w.disk_hits) * bs;
        if (out_host_tokens) *out_host_tokens = w.host_hits * bs;
        if (out_disk_tokens) *out_disk_tokens = w.disk_hits * bs;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_tier_get_stats(kvc_pool *pool, int32_t tier, kvc_tier_stats *out) {
    KVC_GUARD({
        const char *fn = "kvc_tier_get_stats";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (!out) return fail(KVC_ERR_NULL_ARG, "%s: out is NULL", fn);
        // Earlier releases' structs ended before foreign_blocks, then before reachable_blocks; their
        // callers get what fits.
        const size_t size_v1 = offsetof(kvc_tier_stats, foreign_blocks);
        const size_t size_v2 = offsetof(kvc_tier_stats, reachable_blocks);
        if (kvc_status st = check_struct_size(out->struct_size, {size_v1, size_v2, sizeof(kvc_tier_stats)},
                                              StructUse::kFill, fn, "out");
            st != KVC_OK)
            return st;
        if (tier < KVC_TIER_DEVICE || tier > KVC_TIER_DISK)
            return fail(KVC_ERR_INVALID_ARG, "%s: unknown tier %d (0 device, 1 host, 2 disk)", fn, tier);
        kvc_tier_stats o{};
        o.struct_size = out->struct_size;
        o.tier = tier;
        const int64_t stride = pool->layout.block_stride;
        std::lock_guard<std::mutex> lk(pool->mu);
        const Tiers *t = pool->tiers.load(std::memory_order_relaxed);
        if (tier == KVC_TIER_DEVICE) {
            if (t) fill_counters(t->device, &o);
            o.capacity_blocks = pool->num_blocks;
            o.used_blocks = pool->blocks.num_used();
            o.cached_blocks = pool->blocks.num_cached_free();
            o.bytes_used = o.used_blocks * stride;
            o.evictions = pool->counters.evictions;
            o.hits = pool->counters.device_hits;
        } else if (tier == KVC_TIER_HOST && t) {
            fill_counters(t->host->stats, &o);
            fill_slots(t->host->slots, stride, &o);
        } else if (tier == KVC_TIER_DISK && t && t->disk) {
            const kvc::DiskTier &d = *t->disk;
            fill_counters(d.stats, &o);
            fill_slots(d.slots, stride, &o);
            o.direct_io = d.direct ? 1 : 0;
            o.persistent = d.persistent ? 1 : 0;
            o.io_uring = d.uring ? 1 : 0;
            o.recovered_blocks = d.recovered;
            o.foreign_blocks = d.foreign;
        }
        // Walks every chain: only for a caller whose struct has the field.
        if (out->struct_size > size_v2) o.reachable_blocks = kvc::tier_reachable_blocks(pool, tier);
        std::memcpy(out, &o, std::min(size_t(out->struct_size), sizeof o));
        return KVC_OK;
    })
}

}  // extern "C"
