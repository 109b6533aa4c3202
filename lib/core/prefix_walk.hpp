// A prefix walk: looking a prompt's full blocks up in the device cache (and the lower tiers),
// and its result. Implemented in core/pool_blocks.cpp (the plain walk) and core/prefix_hit.cpp
// (kvc_alloc's hit, the sliding window's search). All under the pool mutex, no side effects.
#pragma once

#include <cstdint>

#include "core/block_hash.hpp"
#include "core/keys.hpp"

struct kvc_pool;

namespace kvc {

// Where a walk's held hits are (PrefixWalk::hits): kvc_pool::walk_hits, which points at the pool's
// walk buffers (hit_scratch, walk_tier, walk_slot) and is kept in step when they are (re)sized.
struct WalkHits {
    const int32_t *blocks = nullptr;      // device block of held hit j, -1 when in a lower tier
    const uint8_t *lower_tier = nullptr;  // KVC_TIER_HOST / KVC_TIER_DISK of such a hit
    const int32_t *lower_slot = nullptr;  // its slot there
};

// Result of looking a prompt's full blocks up in the cache. The hit covers blocks [0, hit_blocks);
// of those the sequence holds [first_block, hit_blocks) (first_block > 0 only with a sliding
// window: the blocks before are outside the window of the first uncached token). Held block
// first_block + j is block(j).
struct PrefixWalk {
    int64_t hit_blocks = 0;     // blocks whose KV need not be computed
    int64_t first_block = 0;    // leading ones of those the sequence does not hold (table -1)
    int64_t free_hits = 0;      // of the held ones, blocks now in a free list (refcount 0, not pinned)
    bool verify_miss = false;   // a hash matched a block whose content differed
    Hash128 chain = kRootHash;  // hash of the last hit block
    int64_t host_hits = 0;      // of the held ones, found in the host tier (block(j) == -1)
    int64_t disk_hits = 0;      // of the held ones, found in the disk tier (block(j) == -1)
    // The held hits, j in [0, held()): block(j) is the device block, or -1 for a block found in a
    // lower tier, whose tier and slot are in hits (lower_hit, slot). One pointer to the buffers the
    // pool keeps for its walks (nothing is allocated per walk), valid until the next walk under the
    // same lock: with three, the struct grew past what GCC zeroes with plain stores, and its
    // `rep stos` cost a missed prefix lookup 12 ns (28 -> 40, bench_core PrefixLookupMiss/0).
    const WalkHits *hits = nullptr;
    // The windowed search hashes every full block it looks at: keys of blocks [0, num_keys), valid
    // until the next search (kvc_pool::walk_keys), so kvc_alloc need not hash them again.
    const BlockKey *keys = nullptr;
    int64_t num_keys = 0;
    int64_t held() const { return hit_blocks - first_block; }
    int32_t block(int64_t j) const { return hits->blocks[j]; }
    int32_t slot(int64_t j) const { return hits->lower_slot[j]; }  // block(j) == -1
    bool lower_hit(int64_t j, int32_t tier) const { return hits->blocks[j] < 0 && hits->lower_tier[j] == tier; }
};

// How far a prefix walk looks when a block is not on the device.
enum WalkTiers { kWalkDevice = 0, kWalkHost = 1, kWalkHostDisk = 2 };

// Which copy a prefix search takes when a hash has several (core/prefix_cache.hpp), newest first:
//   kPickHit  of the kPickScan newest, the first one not in a free list (held by a sequence, pinned
//             or read by a pending copy), else the newest: a hit then shares a block already in use
//             and leaves the free copies evictable (kvc_alloc, kvc_can_alloc, kvc_prefix_lookup,
//             promotion rounds). The bound keeps a hit O(1) however many copies a popular block
//             has; a copy in use is nearly always among the newest (blocks enter the cache held);
//   kPickPin  the first pinned one of all, else as kPickHit: kvc_prefix_pin pins the copy an
//             earlier pin of the prefix pinned, and kvc_prefix_unpin finds it wherever it is (an
//             explicit, rare call: O(copies)).
enum CopyPick { kPickHit = 0, kPickPin = 1 };
constexpr int kPickScan = 8;

// Walks the prompt's first max_blocks full blocks while they are cached and verified; the hits are
// the result's blocks[] (of a hash with several copies, the one `pick` names). With `lower` !=
// kWalkDevice a block missing on the device is looked up in the host (and disk) tier; such hits
// get blocks[j] == -1 and their tier and slot in lower_tier / lower_slot. No side effects.
PrefixWalk pool_walk_prefix(kvc_pool *p, const int32_t *tokens, int64_t max_blocks, const KeySet &keys,
                            WalkTiers lower = kWalkDevice, CopyPick pick = kPickHit);

// A prompt's prefix hit as kvc_alloc takes it (at most num_tokens - 1 tokens): the leading run of
// pool_walk_prefix, or with a sliding window the longest prefix whose blocks from the window of its
// first uncached token on are usable (core/prefix_hit.cpp; first_block > 0 then). May throw
// std::bad_alloc (the windowed search's key buffer grows) before anything changed. No side effects.
PrefixWalk pool_find_prompt_hit(kvc_pool *p, const int32_t *tokens, int64_t num_tokens, const KeySet &keys,
                                WalkTiers lower = kWalkDevice);

// The hit pool_find_prompt_hit takes, given its length cap (max_blocks full blocks) and the window
// of the table it is for (0: none; a hybrid pool's groups have their own). May throw as above.
PrefixWalk pool_find_hit_blocks(kvc_pool *p, const int32_t *tokens, int64_t max_blocks, const KeySet &keys,
                                WalkTiers lower, int32_t window);
// The longest hit (in blocks) a prompt of num_tokens tokens may take with these keys.
int64_t pool_max_hit_blocks(const kvc_pool *p, int64_t num_tokens, const KeySet &keys);

// kvc_prefix_pin / kvc_prefix_unpin with a sliding window (the pool's, or a hybrid pool group's) (copies picked by
// kPickPin): the device blocks a hit at the end of the prefix's first full_blocks blocks needs -- blocks first_block ..
// hit_blocks - 1, for the largest such end whose window is cached (with pinned_only: cached and pinned) -- plus the
// block before them when the prefix's own admission (one block shorter when block-aligned) needs it and it qualifies,
// as the result's blocks[]. May throw std::bad_alloc before anything changed.
PrefixWalk pool_window_pin_range(kvc_pool *p, int32_t window, const int32_t *tokens, int64_t full_blocks,
                                 const KeySet &keys, bool pinned_only);

// (pool_begin_walk, core/pool.hpp: a new walk's result, its views on the pool's walk buffers.)
// A prefix search's record of held hit block j (pool_walk_prefix, the windowed search): a device
// block b, or a block found in a lower tier (`tier`, `slot`) that kvc_alloc restores.
void pool_record_device_hit(kvc_pool *p, PrefixWalk *w, int64_t j, int32_t b);
void pool_record_lower_hit(kvc_pool *p, PrefixWalk *w, int64_t j, int32_t tier, int32_t slot);

}  // namespace kvc
