// C API: prefix-cache queries, pinning, reset, and KV events.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "capi/args.hpp"
#include "core/pool.hpp"
#include "core/seq_ops.hpp"
#include "error.hpp"
#include "struct_size.hpp"
#include "tier/tiers.hpp"

namespace {

using kvc::check_struct_size;
using kvc::fail;
using kvc::StructUse;

using kvc::check_token_args;
using kvc::keys_or_empty;

}  // namespace

extern "C" {

KVC_API kvc_status kvc_prefix_lookup(kvc_pool *pool, const int32_t *tokens, int64_t num_tokens, const kvc_keys *keys,
                                     int64_t *out_cached_tokens) {
    KVC_GUARD({
        kvc_status st = check_token_args(pool, tokens, num_tokens, "kvc_prefix_lookup");
        if (st != KVC_OK) return st;
        if (!out_cached_tokens) return fail(KVC_ERR_NULL_ARG, "kvc_prefix_lookup: out_cached_tokens is NULL");
        if (!pool->caching) {
            *out_cached_tokens = 0;
            return KVC_OK;
        }
        std::lock_guard<kvc::PoolMutex> lock(pool->mu);
        if (pool->hybrid) {  // the hit every group can resume from, as kvc_alloc takes it
            kvc::HybridPlan plan;
            kvc::hybrid_plan_alloc(pool, tokens, num_tokens, keys_or_empty(keys), kvc::kWalkHost, &plan);
            *out_cached_tokens = plan.hit_blocks * pool->block_size;
            return KVC_OK;
        }
        // Lower-tier hits count too: kvc_alloc restores them (disk blocks after verifying them).
        kvc::PrefixWalk w = kvc::pool_find_prompt_hit(pool, tokens, num_tokens, keys_or_empty(keys), kvc::kWalkHostDisk);
        *out_cached_tokens = w.hit_blocks * pool->block_size;
        return KVC_OK;
    })
}

// Pins every full block of the prefix that is cached now, from the start up to the first miss; with
// a sliding window only the blocks a hit at the prefix's end needs (pool_window_pin_range): the
// leading ones no query of a longer prompt reads again would only hold memory.
KVC_API kvc_status kvc_prefix_pin(kvc_pool *pool, const int32_t *tokens, int64_t num_tokens, const kvc_keys *keys,
                                  int64_t *out_pinned_tokens) {
    KVC_GUARD({
        kvc_status st = check_token_args(pool, tokens, num_tokens, "kvc_prefix_pin");
        if (st != KVC_OK) return st;
        if (!pool->caching) return fail(KVC_ERR_UNSUPPORTED, "kvc_prefix_pin: prefix caching is off in this pool");
        std::lock_guard<kvc::PoolMutex> lock(pool->mu);
        const int64_t full = num_tokens / pool->block_size;
        const kvc::KeySet &ks = keys_or_empty(keys);
        if (pool->hybrid) {
            const int64_t pinned = kvc::hybrid_prefix_pin(pool, tokens, full, ks, false);
            if (out_pinned_tokens) *out_pinned_tokens = pinned * pool->block_size;
            return KVC_OK;
        }
        const kvc::PrefixWalk w = pool->sliding_window > 0 ? kvc::pool_window_pin_range(pool, pool->sliding_window, tokens, full, ks, false)
                                                           : kvc::pool_walk_prefix(pool, tokens, full, ks,
                                                                                   kvc::kWalkDevice, kvc::kPickPin);
        for (int64_t i = 0; i < w.held(); ++i) pool->blocks.pin(w.block(i));
        if (out_pinned_tokens) *out_pinned_tokens = w.hit_blocks * pool->block_size;
        return KVC_OK;
    })
}

// Unpins what a kvc_prefix_pin of the same prefix pinned: the leading run of its cached blocks that
// are pinned (with a sliding window: the range pool_window_pin_range finds among pinned blocks).
// Blocks cached after the pin (beyond that run) are left alone, so pin(P) ... unpin(P) balances
// even if P's later blocks entered the cache in between. KVC_ERR_STATE when the prefix has full
// blocks but none of them qualifies.
KVC_API kvc_status kvc_prefix_unpin(kvc_pool *pool, const int32_t *tokens, int64_t num_tokens, const kvc_keys *keys,
                                    int64_t *out_unpinned_tokens) {
    KVC_GUARD({
        const char *fn = "kvc_prefix_unpin";
        kvc_status st = check_token_args(pool, tokens, num_tokens, fn);
        if (st != KVC_OK) return st;
        if (!pool->caching) return fail(KVC_ERR_UNSUPPORTED, "%s: prefix caching is off in this pool", fn);
        std::lock_guard<kvc::PoolMutex> lock(pool->mu);
        const int64_t full = num_tokens / pool->block_size;
        const kvc::KeySet &ks = keys_or_empty(keys);
        if (pool->hybrid) {
            const int64_t run = kvc::hybrid_prefix_pin(pool, tokens, full, ks, true);
            if (full > 0 && run == 0)
                return fail(KVC_ERR_STATE, "%s: no pinned prefix of this prompt in every group of the hybrid pool", fn);
            if (out_unpinned_tokens) *out_unpinned_tokens = run * pool->block_size;
            return KVC_OK;
        }
        int64_t first = 0, run = 0;  // unpin w.block(0 .. run - first - 1), blocks first .. run - 1
        kvc::PrefixWalk w;
        if (pool->sliding_window > 0) {
            w = kvc::pool_window_pin_range(pool, pool->sliding_window, tokens, full, ks, true);
            first = w.first_block;
            run = w.hit_blocks;
            if (full > 0 && run == 0)
                return fail(KVC_ERR_STATE, "%s: no pinned window of this prefix (sliding window %d)", fn,
                            pool->sliding_window);
        } else {
            w = kvc::pool_walk_prefix(pool, tokens, full, ks, kvc::kWalkDevice, kvc::kPickPin);
            while (run < w.hit_blocks && pool->blocks.pins(w.block(run)) > 0) ++run;
            if (full > 0 && run == 0)
                return fail(KVC_ERR_STATE, "%s: the first block of this prefix is not pinned%s", fn,
                            w.hit_blocks == 0 ? " (it is not even cached)" : "");
        }
        // Deepest block first, as kvc_free does: blocks returning to an LRU list in this order are
        // evicted from the end of the prefix backwards.
        for (int64_t i = run - first - 1; i >= 0; --i) kvc::pool_unpin_block(pool, w.block(i));
        if (out_unpinned_tokens) *out_unpinned_tokens = run * pool->block_size;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_prefix_cache_reset(kvc_pool *pool) {
    KVC_GUARD({
        if (!pool) return fail(KVC_ERR_NULL_ARG, "kvc_prefix_cache_reset: pool is NULL");
        {
            std::lock_guard<kvc::PoolMutex> lock(pool->mu);
            if (pool->blocks.num_used() > 0 || pool->blocks.num_pinned() > 0)
                return fail(KVC_ERR_BUSY, "kvc_prefix_cache_reset: %lld blocks in use and %lld pinned",
                            (long long)pool->blocks.num_used(), (long long)pool->blocks.num_pinned());
            if (!pool->caching) return KVC_OK;
            pool->blocks.uncache_all_free();
            pool->cache.clear();
            kvc::tier_reset_cache(pool);
            kvc::EventRecord ev;
            ev.type = KVC_EVENT_ALL_BLOCKS_CLEARED;
            pool->events.push(ev, nullptr);
        }
        kvc::tier_run_pending(pool);  // the disk tier's file forgets its blocks (no lock held)
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_pool_set_tier_events(kvc_pool *pool, int32_t on) {
    KVC_GUARD({
        const char *fn = "kvc_pool_set_tier_events";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (on != 0 && on != 1) return fail(KVC_ERR_INVALID_ARG, "%s: on must be 0 or 1, got %d", fn, on);
        std::lock_guard<kvc::PoolMutex> lock(pool->mu);
        if (on && !pool->events.enabled())
            return fail(KVC_ERR_UNSUPPORTED, "%s: this pool has no event ring (event_capacity 0)", fn);
        pool->tier_events = on != 0;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_event_pop(kvc_pool *pool, kvc_event *out, int32_t *tokens, int64_t token_cap,
                                 int32_t *out_has_event) {
    KVC_GUARD({
        const char *fn = "kvc_event_pop";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (!out) return fail(KVC_ERR_NULL_ARG, "%s: out is NULL", fn);
        if (!out_has_event) return fail(KVC_ERR_NULL_ARG, "%s: out_has_event is NULL", fn);
        // The first release's struct ended before `tier`; its callers get what fits (tier events
        // are reported only to callers that turned them on, hence know the field).
        const size_t size_v1 = offsetof(kvc_event, tier);
        if (kvc_status st =
                check_struct_size(out->struct_size, {size_v1, sizeof(kvc_event)}, StructUse::kFill, fn, "out");
            st != KVC_OK)
            return st;
        if (token_cap < 0)
            return fail(KVC_ERR_INVALID_ARG, "%s: token_cap must be >= 0, got %lld", fn, (long long)token_cap);
        if (!tokens && token_cap > 0)
            return fail(KVC_ERR_NULL_ARG, "%s: tokens is NULL with token_cap %lld", fn, (long long)token_cap);
        std::lock_guard<kvc::PoolMutex> lock(pool->mu);
        if (pool->events.pending() == 0) {
            *out_has_event = 0;
            return KVC_OK;
        }
        const kvc::EventRecord &r = pool->events.front();
        if (r.type == KVC_EVENT_BLOCK_STORED && token_cap < r.num_tokens)
            return fail(KVC_ERR_BUFFER_TOO_SMALL, "%s: a BLOCK_STORED event carries %d token ids, token_cap is %lld",
                        fn, r.num_tokens, (long long)token_cap);
        kvc_event e{};
        e.struct_size = out->struct_size;
        e.type = r.type;
        e.hash_hi = r.hash.hi;
        e.hash_lo = r.hash.lo;
        e.parent_hash_hi = r.parent.hi;
        e.parent_hash_lo = r.parent.lo;
        e.lora_id = r.lora_id;
        e.extra_keys_digest = r.extras_digest;
        e.block_id = r.block_id;
        e.num_tokens = r.num_tokens;
        e.sequence_number = r.sequence_number;
        e.tier = r.tier;
        if (r.type == KVC_EVENT_BLOCK_STORED)
            std::copy(pool->events.front_tokens(), pool->events.front_tokens() + r.num_tokens, tokens);
        pool->events.pop();
        std::memcpy(out, &e, std::min(size_t(out->struct_size), sizeof e));
        *out_has_event = 1;
        return KVC_OK;
    })
}

}  // extern "C"
