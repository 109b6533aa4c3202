// The pool object behind the opaque kvc_pool handle.
//
// Locking model: one std::mutex per pool. Every kvc_* function taking a pool locks it for the
// whole (short, metadata-only, allocation-free in steady state) operation, so operations are
// atomic with respect to each other and all-or-nothing checks see a consistent state. Nothing
// slow runs under it: no I/O, no GPU synchronization, no attention math (the storage layer takes
// what it needs under the lock and launches after releasing it). Fields below the "immutable" mark
// are fixed at kvc_pool_create and read without the lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/block_hash.hpp"
#include "core/block_pool.hpp"
#include "core/events.hpp"
#include "core/groups.hpp"
#include "core/pool_mutex.hpp"
#include "core/pool_pending_copies.hpp"
#include "core/prefix_cache.hpp"
#include "core/prefix_walk.hpp"
#include "core/sequence.hpp"
#include "core/tier_port.hpp"
#include "storage/copy_staging.hpp"
#include "storage/kv_layout.hpp"

namespace kvc {

struct PoolCounters {
    int64_t allocs = 0;
    int64_t frees = 0;
    int64_t forks = 0;
    int64_t appends = 0;
    int64_t blocks_allocated = 0;
    int64_t blocks_freed = 0;
    int64_t cow_copies = 0;
    int64_t prefix_query_tokens = 0;
    int64_t prefix_hit_tokens = 0;
    int64_t device_hits = 0;  // hit blocks kvc_alloc took from the device (not a windowed hit's skipped ones)
    int64_t evictions = 0;
    int64_t verify_misses = 0;
};

struct Tiers;

}  // namespace kvc

struct kvc_pool {
    // ---- immutable after kvc_pool_create -------------------------------------------------------
    kvc_pool_config config{};  // resolved: num_blocks, backend, num_q_heads filled in
    kvc::KvLayout layout;
    int32_t block_size = 0;
    int32_t block_shift = -1;  // log2(block_size) when it is a power of two, else -1
    int32_t num_blocks = 0;
    int64_t watermark_blocks = 0;  // floor(watermark x num_blocks)
    bool caching = true;
    // kvc_pool_set_sliding_window (0 = off): the one field here that changes after creation, under
    // mu and only while no sequence exists. Next to block_size: kvc_append reads both.
    int32_t sliding_window = 0;
    // A hybrid pool (kvc_pool_create_hybrid): sequences have one table per group and the sequence
    // operations go through core/hybrid.cpp. Next to block_size: kvc_append reads it.
    bool hybrid = false;
    int32_t backend = KVC_BACKEND_NONE;
    int32_t device = -1;
    void *storage = nullptr;
    // Hybrid pools: the groups (empty for a plain pool) and, per model layer, its group and its
    // index among that group's layers.
    std::vector<kvc::PoolGroup> groups;
    std::vector<int32_t> layer_group, layer_in_group;
    kvc::CopyStaging copy_staging;  // CUDA backend only: kvc_copy_pending's fixed buffers
    // kvc_copy_pending's callers, one at a time from drain to done (storage/copy_pending.cpp, rule 1).
    // Lock order: copy_mu, then the tier executor's exec_mu, then mu.
    std::mutex copy_mu;

    // ---- guarded by mu -------------------------------------------------------------------------
    kvc::PoolMutex mu;  // core/pool_mutex.hpp: inline uncontended lock and unlock
    kvc::BlockPool blocks;
    kvc::PrefixCache cache;
    kvc::BlockHasher hasher;
    kvc::EventRing events;
    bool tier_events = false;  // kvc_pool_set_tier_events: host/disk tier blocks are reported too
    kvc::SequenceTable seqs;
    kvc::PendingCopies copies;
    kvc::PoolCounters counters;
    std::vector<int32_t> hit_scratch;  // num_blocks entries: the latest walk's held hits
    // Lower-tier hits of a walk (PrefixWalk::lower_tier / lower_slot): num_blocks entries from the
    // host tier's attach on (empty before: no walk finds a lower-tier hit then).
    std::vector<uint8_t> walk_tier;
    std::vector<int32_t> walk_slot;
    kvc::WalkHits walk_hits;               // views on the three above (pool_refresh_walk_hits after resizing them)
    std::vector<kvc::BlockKey> walk_keys;  // a windowed hit search's block keys (grown, kept)
    std::atomic<uint64_t> seq_generation{0};
    // References held outside sequence tables (lib/transfer: blocks an export leases, blocks an
    // import is filling); per block, empty until the first transfer agent uses the pool. The
    // invariant checker counts them as table references.
    std::vector<int32_t> ext_refs;
    // Memory tiers (tier/tiers.hpp): set once by kvc_tier_attach_host, read without the lock by the
    // storage layer's ordering barrier, hence atomic.
    std::atomic<kvc::Tiers *> tiers{nullptr};
};

namespace kvc {

// A new walk's result, its views pointing at the pool's walk buffers (PrefixWalk::blocks). Inline:
// a walk that misses at once (a prompt nothing is cached for) costs little more than this.
inline PrefixWalk pool_begin_walk(kvc_pool *p) {
    PrefixWalk w;
    w.hits = &p->walk_hits;
    return w;
}

// After hit_scratch, walk_tier or walk_slot were (re)assigned (pool create, host tier attach).
inline void pool_refresh_walk_hits(kvc_pool *p) {
    p->walk_hits.blocks = p->hit_scratch.data();
    p->walk_hits.lower_tier = p->walk_tier.data();
    p->walk_hits.lower_slot = p->walk_slot.data();
}

// KVC_EVENT_BLOCK_STORED for device block b, just entered in the prefix cache under (parent, key)
// with these token ids; nothing when the pool keeps no events. The one place such an event is
// built (new blocks, tier restores, KV transfer imports).
inline void pool_report_stored(kvc_pool *p, int32_t b, const Hash128 &parent, const BlockKey &key,
                               const int32_t *tokens) {
    if (!p->events.enabled()) return;
    EventRecord ev;
    ev.type = KVC_EVENT_BLOCK_STORED;
    ev.block_id = b;
    ev.num_tokens = p->block_size;
    ev.hash = key.hash;
    ev.parent = parent;
    ev.lora_id = key.lora_id;
    ev.extras_digest = key.extras_digest;
    p->events.push(ev, tokens);
}

// The block device block b's child hint names (PrefixCache::child_of), when it is cached and holds
// "parent || tokens" with plain keys: its hash is then that content's. Else -1. Shared by the
// leading walk (pool_blocks.cpp) and the windowed search (prefix_hit.cpp).
inline int32_t pool_hinted_child(const kvc_pool *p, int32_t b, const Hash128 &parent, const int32_t *tokens) {
    const int32_t c = p->cache.child_of(b);
    return c >= 0 && p->blocks.cached(c) && p->cache.holds_plain(c, parent, tokens) ? c : -1;
}

// Block tables per sequence: one per group in a hybrid pool, else one.
inline int32_t pool_num_tables(const kvc_pool *p) { return p->hybrid ? int32_t(p->groups.size()) : 1; }

// Token position -> block index. Block sizes are nearly always powers of two: a shift instead of a
// 64-bit division (tens of cycles) keeps the per-token decode path short.
inline int64_t pool_block_of(const kvc_pool *p, int64_t pos) {
    return p->block_shift >= 0 ? pos >> p->block_shift : pos / p->block_size;
}
// Blocks needed to hold `tokens` tokens.
inline int64_t pool_blocks_for(const kvc_pool *p, int64_t tokens) {
    return tokens <= 0 ? 0 : pool_block_of(p, tokens - 1) + 1;
}

// ---- Block-level operations with prefix-cache side effects (core/pool_blocks.cpp); lock held --------

// Takes a fresh block with refcount 1 (caller checked capacity). Evicts its cache entry lazily.
// With tiers, a caller taking n blocks calls pool_spill_before_taking(p, n) first.
int32_t pool_take_fresh_block(kvc_pool *p, int32_t priority);

// The caller is about to take n fresh blocks, with nothing in between that changes the free lists
// (a restore's block is referenced at once, a copy-on-write source never becomes free): with tiers,
// the cached blocks those takes will evict are spilled now, decided together so that the host slots
// go to the chain heads (tier_plan_spills). Inline: without tiers, one load per taking call.
inline void pool_spill_before_taking(kvc_pool *p, int64_t n) {
    if (n > 0 && p->tiers.load(std::memory_order_relaxed)) tier_plan_spills(p, n);
}

// Block b has just become free: cancels the pending copy-on-write pairs into it (and drops their
// holds on their sources, which may free those in turn). Out of line: pairs are rarely pending.
void pool_cancel_copies_into(kvc_pool *p, int32_t b);

// What follows block b's last table reference being dropped: counted in blocks_freed; if b is free
// then, pending copy-on-write pairs into b are cancelled. (pool_release_block, and kvc_free's walk
// of a whole table, BlockPool::release_reverse.)
inline void pool_block_released(kvc_pool *p, int32_t b) {
    ++p->counters.blocks_freed;
    if (p->copies.size() > 0 && p->blocks.is_free(b)) pool_cancel_copies_into(p, b);
}

// Drops one table reference to block b. Returns true when b's refcount reached 0
// (pool_block_released). Inline: it runs once per block of every window release and truncate.
inline bool pool_release_block(kvc_pool *p, int32_t b) {
    if (!p->blocks.release(b)) return false;
    pool_block_released(p, b);
    return true;
}

// ---- Sliding window (kvc_pool_set_sliding_window, a hybrid pool's groups); lock held, window > 0 ----

// The block holding the first key the query at position pos sees with this window (pos - window
// + 1, or 0): every block before it is invisible to that query and to every later one.
inline int64_t pool_window_first_block(const kvc_pool *p, int32_t window, int64_t pos) {
    const int64_t first_key = pos - window + 1;
    return first_key > 0 ? pool_block_of(p, first_key) : 0;
}

// (Both with s->window, the sequence's window.)
// kvc_append's plan, before anything changes: the number of leading blocks of s released by
// this append -- those whose tokens all lie before window_from - window + 1, the first key the
// previous call's first token sees (Sequence::window_from) -- and in *out_free how many of the
// newly released ones become free (they count as free for that append).
int64_t pool_window_plan(const kvc_pool *p, const Sequence *s, int64_t *out_free);
// kvc_append's commit (before s->num_tokens grows): releases the blocks the plan named as kvc_free
// would (entries become -1), if any bumping the sequence generation (built batches re-validate),
// and records this call's first position in s->window_from.
void pool_window_release(kvc_pool *p, Sequence *s);

// Drops one pin of block b; if b is free then, pending pairs into it are cancelled (a block
// filled and pinned before its copy-on-write copy ran, whose holders all let it go).
void pool_unpin_block(kvc_pool *p, int32_t b);

// Takes cached block b out of the prefix cache (its entry erased, KVC_EVENT_BLOCK_REMOVED sent;
// other copies of its hash stay cached) while its content stays where it is: lazy eviction, and an in-use block about
// to be written again.
void pool_uncache_block(kvc_pool *p, int32_t b);

// The sequence has just confirmed n tokens src[0..n) (s->num_tokens already counts them): hashes
// every block they complete and enters it in the cache (as another copy when its hash is cached
// already; not at all in the one case of an equal hash over different content, a collision); the
// rest goes to s->tail. The decode step's case -- one id that completes no block -- only appends
// it to the tail (capacity block_size: no reallocation) and is inline, so kvc_append's and
// kvc_append_batch's loops run it without a call; everything else is pool_add_tokens, out of line.
void pool_add_tokens(kvc_pool *p, Sequence *s, const int32_t *src, int64_t n);
inline void pool_hash_full_blocks(kvc_pool *p, Sequence *s, const int32_t *src, int64_t n) {
    if (n == 1 && int64_t(s->tail.size()) + 1 < p->block_size) {
        s->tail.push_back(src[0]);
        return;
    }
    pool_add_tokens(p, s, src, n);
}

// pool_hash_full_blocks() for a new sequence's prompt (empty tail) when the keys of its first
// num_known full blocks are known (PrefixWalk::keys past the hit): those are entered without
// hashing them again.
void pool_hash_prompt_blocks(kvc_pool *p, Sequence *s, const int32_t *src, int64_t n, const BlockKey *known,
                             int64_t num_known);

// kvc_truncate's side of prefix hashing, before the table shrinks: puts s's hashing state (chain,
// num_hashed, tail) back to what it was at n confirmed tokens (n <= s->num_tokens), or stops
// hashing for s when the cut block's token ids cannot be trusted.
void pool_rewind_hashing(kvc_pool *p, Sequence *s, int64_t n);

// The copy `pick` names among the copies of `newest`'s hash (newest: PrefixCache::find's block).
// kPickHit: at most kPickScan steps; kPickPin: O(copies). Out of line: hashes with one copy never
// get here.
int32_t pool_pick_copy(const kvc_pool *p, int32_t newest, CopyPick pick);

// The device block a prefix search takes for this hash (-1: not cached on the device).
inline int32_t pool_find_copy(const kvc_pool *p, const Hash128 &h, CopyPick pick) {
    bool more;
    const int32_t b = p->cache.find(h, &more);
    return __builtin_expect(more, 0) ? pool_pick_copy(p, b, pick) : b;
}

// Runs the invariant checker; KVC_OK or KVC_ERR_INTERNAL with a message (core/pool_check.cpp).
kvc_status pool_check_invariants(kvc_pool *p);

}  // namespace kvc
