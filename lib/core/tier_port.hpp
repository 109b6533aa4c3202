// The host core's port to the memory tiers: every tier function lib/core calls, and all the core
// knows of them (an opaque Tiers pointer in the pool, null while no tier is attached). The tiers
// (lib/tier/) implement it; a new tier (a remote store, a network peer) plugs in behind these
// functions without a change to the core:
//   spill evicted        tier_plan_spills        before fresh blocks evict cached ones
//   find in lower tiers  tier_find_lower         a prefix walk's block missing on the device
//   restore a hit        tier_pin_restore_sources, tier_restore_hit   kvc_alloc's lower-tier hits
//   release swapped      tier_release_swapped    kvc_free of a swapped-out sequence
//   run pending          tier_run_pending        the C layer, after the pool lock is released
//   check                tier_host_refs, tier_check_sequence, tier_check   kvc_pool_check
// All but tier_run_pending run under the pool mutex and only plan: copies and I/O are queued as
// jobs that tier_run_pending executes unlocked.
#pragma once

#include <cstdint>
#include <vector>

#include "kvc/kvc.h"

struct kvc_pool;

namespace kvc {

struct BlockKey;
struct Hash128;
struct PrefixWalk;
struct Sequence;

// pool_spill_before_taking: the next n fresh blocks taken will evict the cached blocks among them.
// Those worth keeping are copied into host slots now (README "Tiers", spills under slot pressure):
// a block is spilled only when its parent is kept (the root, cached on the device and not dropped by
// these evictions, or in a lower tier), and when there are fewer host slots to take than such
// blocks, the chain heads get them (the blocks are decided in the reverse of eviction order: a
// sequence releases its blocks deepest first, so its heads are evicted last). The copies are queued
// in eviction order, so the host's LRU list still evicts the deepest blocks first.
void tier_plan_spills(kvc_pool *p, int64_t n);

// Looks up a block that missed on the device in the host tier (and with use_disk, the disk tier).
// Returns the tier (KVC_TIER_HOST / KVC_TIER_DISK) and slot, or -1.
int32_t tier_find_lower(kvc_pool *p, const Hash128 &parent, const BlockKey &key, const int32_t *tokens, bool use_disk,
                        int32_t *out_slot);

// kvc_alloc: the plan's lower-tier hits (all in the host tier) are pinned so that the fresh blocks
// taken next cannot evict them. Then tier_restore_hit() copies one into a fresh device block and
// enters that block in the device cache.
void tier_pin_restore_sources(kvc_pool *p, const PrefixWalk &w);
int32_t tier_restore_hit(kvc_pool *p, const PrefixWalk &w, int64_t j, int32_t priority);

// kvc_free of a swapped-out sequence: frees its held host slots.
void tier_release_swapped(kvc_pool *p, Sequence *s);

// Tier part of kvc_pool_check (tier/check.cpp): per-slot counts of swapped-out table entries are
// gathered by tier_check_sequence() for every sequence, then tier_check() checks the tiers.
std::vector<int32_t> tier_host_refs(kvc_pool *p);
kvc_status tier_check_sequence(kvc_pool *p, const Sequence *s, std::vector<int32_t> *refs);
kvc_status tier_check(kvc_pool *p, const std::vector<int32_t> &refs);

// Outside the pool mutex: executes and commits every pending job. No-op without tiers or jobs.
void tier_run_pending(kvc_pool *p);

}  // namespace kvc
