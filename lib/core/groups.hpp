// KV-cache groups of a hybrid pool (kvc_pool_create_hybrid; design: lib/core/HYBRID.md).
//
// A hybrid pool keeps one block pool (free lists, LRU, watermark, prefix cache) and gives each
// sequence one block table per group: group 0's is the Sequence itself, the others are
// Sequence::group_seqs. Each group's table follows the plain rules with the group's window (FULL:
// none, SLIDING: W, SSM: 1 token) and caches its blocks under its own keys (KeySet::group). A page
// is page_bytes long in every group (kvc_pool::layout.block_stride).
#pragma once

#include <cstdint>
#include <vector>

#include "core/block_hash.hpp"
#include "core/keys.hpp"
#include "core/prefix_walk.hpp"
#include "storage/kv_layout.hpp"

namespace kvc {

struct PoolGroup {
    // ---- immutable after kvc_pool_create_hybrid ----
    int32_t kind = KVC_GROUP_FULL;
    int32_t window = 0;         // the window its sequences use: SLIDING W, SSM 1, FULL 0
    int32_t config_window = 0;  // kvc_group_config.sliding_window as given
    int64_t state_bytes = 0;    // SSM: one layer's state
    int64_t group_bytes = 0;    // bytes of a page this group uses
    // The group's layout inside the pool's storage: its own layers, heads and head_dim (SSM: one
    // "head" of state_bytes), block_stride = the pool's page_bytes.
    KvLayout layout;

    // ---- scratch of the coordinated prefix search, under the pool lock ----
    // This group's walk buffers (what kvc_pool::hit_scratch / walk_tier / walk_slot / walk_keys are
    // for a plain walk): swapped into the pool while the group's walk runs, so that every group's
    // latest walk stays readable until the allocation commits them all together.
    std::vector<int32_t> hit_scratch;
    std::vector<uint8_t> walk_tier;
    std::vector<int32_t> walk_slot;
    std::vector<BlockKey> walk_keys;
    WalkHits walk_hits;  // views on the buffers above, for this group's PrefixWalk
    KeySet keys;         // the request's keys with group = this group's index
};

}  // namespace kvc
