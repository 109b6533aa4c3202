// C API: the tiers and the prefix cache — prefetching a prompt's lower-tier blocks, flushing the
// host tier to disk, looking a prompt up in every tier, and tier statistics.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstring>
#include <memory>
#include <thread>

#include "capi/args.hpp"
#include "core/pool.hpp"
#include "error.hpp"
#include "storage/cuda_api.hpp"
#include "struct_size.hpp"
#include "tier/plan.hpp"
#include "tier/tiers.hpp"

namespace {

using kvc::check_struct_size;
using kvc::fail;
using kvc::Sequence;
using kvc::StructUse;
using kvc::Tiers;
using kvc::TierSlots;

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

}  // namespace

extern "C" {

KVC_API kvc_status kvc_tier_prefetch(kvc_pool *pool, const int32_t *tokens, int64_t num_tokens, const kvc_keys *keys,
                                     int64_t *out_cached_tokens) {
    KVC_GUARD({
        const char *fn = "kvc_tier_prefetch";
        if (kvc_status st = kvc::check_token_args(pool, tokens, num_tokens, fn); st != KVC_OK) return st;
        if (kvc_status st = kvc::check_max_len(pool, num_tokens, fn); st != KVC_OK) return st;
        Tiers *t = pool->tiers.load(std::memory_order_acquire);
        {
            std::lock_guard<kvc::PoolMutex> lk(pool->mu);
            if (!t || !t->disk) return fail(KVC_ERR_STATE, "%s: this pool has no disk tier (kvc_tier_attach_disk)", fn);
        }
        const kvc::KeySet &ks = kvc::keys_or_empty(keys);
        // kvc_alloc's promotion without an allocation to refuse: everything it would read up.
        const kvc::PromotionCheck accept_all{[](const void *, const kvc::PrefixWalk &) { return KVC_OK; }, nullptr, false};
        if (kvc_status st = kvc::tier_promote_prefix(pool, tokens, num_tokens, ks, accept_all); st != KVC_OK) return st;
        if (out_cached_tokens) {
            int64_t cached = 0;
            if (pool->caching) {
                std::lock_guard<kvc::PoolMutex> lk(pool->mu);
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
            std::lock_guard<kvc::PoolMutex> lk(pool->mu);
            if (!t || !t->disk) return fail(KVC_ERR_STATE, "%s: this pool has no disk tier (kvc_tier_attach_disk)", fn);
        }
        const int32_t slots = t->host->slots.capacity();
        const int32_t blocks = pool->blocks.num_blocks();
        int64_t queued = 0;
        int32_t next_slot = 0, next_block = 0;  // host slots first, then device blocks
        while (next_slot < slots || next_block < blocks) {
            size_t ours = 0;
            {
                std::lock_guard<kvc::PoolMutex> lk(pool->mu);
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

KVC_API kvc_status kvc_prefix_lookup_tiers(kvc_pool *pool, const int32_t *tokens, int64_t num_tokens,
                                           const kvc_keys *keys, int64_t *out_device_tokens, int64_t *out_host_tokens,
                                           int64_t *out_disk_tokens) {
    KVC_GUARD({
        const char *fn = "kvc_prefix_lookup_tiers";
        if (kvc_status st = kvc::check_token_args(pool, tokens, num_tokens, fn); st != KVC_OK) return st;
        if (pool->hybrid) return kvc::refuse_hybrid(fn, "use kvc_prefix_lookup (each group's hit is in its own tiers)");
        kvc::PrefixWalk w;
        if (pool->caching) {
            std::lock_guard<kvc::PoolMutex> lk(pool->mu);
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
        std::lock_guard<kvc::PoolMutex> lk(pool->mu);
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
