// What the memory tiers (lib/tier/) may read and change of the pool: the whole of their access to
// it. Tier code includes this (and storage/pool_access.hpp for the storage: layout, backend, base
// address, the pool mutex), never core/pool.hpp. The other direction, what the core asks of the
// tiers, is core/tier_port.hpp. Pool mutex held unless said otherwise.
#pragma once

#include <cstdint>

#include "core/block_hash.hpp"
#include "core/events.hpp"
#include "core/free_queue.hpp"
#include "core/prefix_walk.hpp"
#include "core/sequence.hpp"
#include "storage/pool_access.hpp"

struct kvc_pool;

namespace kvc {

struct Tiers;

// ---- fixed at kvc_pool_create, or atomic: no lock needed --------------------------------------
Tiers *pool_tiers(const kvc_pool *p);  // null until kvc_tier_attach_host
// tier_destroy: the pool forgets its tiers (the caller ran their jobs and deletes them).
void pool_detach_tiers(kvc_pool *p);
int32_t pool_block_size(const kvc_pool *p);
int32_t pool_num_blocks(const kvc_pool *p);
bool pool_caching(const kvc_pool *p);  // prefix caching on

// ---- device blocks ------------------------------------------------------------------------------

// What a lower tier stores with its copy of cached device block b: its place in the chain, its
// key, its token ids (valid while b stays cached) and its retention priority.
struct CachedIdentity {
    Hash128 parent;
    BlockKey key;
    const int32_t *tokens = nullptr;
    int32_t priority = 0;
};
CachedIdentity pool_cached_identity(const kvc_pool *p, int32_t b);
const Hash128 &pool_block_hash(const kvc_pool *p, int32_t b);    // b cached
const Hash128 &pool_block_parent(const kvc_pool *p, int32_t b);  // b cached
// The device copies of hash h, newest first: the first (-1: none), then each next (-1: no more).
int32_t pool_first_copy(const kvc_pool *p, const Hash128 &h);
int32_t pool_next_copy(const kvc_pool *p, int32_t b);
bool pool_block_cached(const kvc_pool *p, int32_t b);
bool pool_block_is_free(const kvc_pool *p, int32_t b);  // in a free list (refcount 0, not pinned)
int64_t pool_num_free(const kvc_pool *p);
// The free lists in eviction order (the spill planner reads which cached blocks the next takes evict).
const FreeQueues &pool_free_queues(const kvc_pool *p);

// A fresh block (pool_take_fresh_block, refcount 1) becomes cached under this identity at once, as
// a restore's target (its bytes arrive by a queued copy, ordered before any reader by the storage
// barrier); KVC_EVENT_BLOCK_STORED is reported.
void pool_enter_restored(kvc_pool *p, int32_t b, const Hash128 &parent, const BlockKey &key, const int32_t *tokens);
// Pins and unpins (a pinned block is never evicted; promotion rounds pin the hits they hold).
void pool_pin_block(kvc_pool *p, int32_t b);
void pool_unpin_block(kvc_pool *p, int32_t b);  // core/pool.hpp
// A block's one table reference becomes a pin (a restored block kept by a promotion round).
void pool_ref_to_pin(kvc_pool *p, int32_t b);
int32_t pool_take_fresh_block(kvc_pool *p, int32_t priority);  // core/pool.hpp

// ---- events -------------------------------------------------------------------------------------
// Queues a KV event about a lower tier's block, when the pool reports tier events
// (kvc_pool_set_tier_events); nothing otherwise.
void pool_push_tier_event(kvc_pool *p, const EventRecord &ev, const int32_t *tokens);

}  // namespace kvc
