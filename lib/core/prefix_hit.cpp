// Where a prompt's prefix hit is: the leading run of cached blocks, or with a sliding window the
// longest prefix whose last `window` keys' blocks are cached (kvc_pool_set_sliding_window).
//
// A windowed model's prefill from position c on reads no key before c - window + 1, so the blocks
// wholly before that need not be cached. vLLM's sliding-window manager searches for such a run
// from the right; so do we, in one pass over the prompt's blocks (each looked up at most once).
#include <cstring>

#include "core/pool.hpp"
#include "core/tier_port.hpp"

namespace kvc {
namespace {

// Is block k of the prompt usable as a hit (cached on the device with the same content, or with
// `lower` in a lower tier)? keys[] holds every block's key; keys[k - 1] is block k's parent.
// *verify_miss is set when a device entry with block k's hash holds other tokens. Of several
// copies, `pick` chooses (core/pool.hpp). With pinned_only (kvc_prefix_unpin's search) only pinned
// device blocks count.
bool usable(kvc_pool *p, const int32_t *tokens, const BlockKey *keys, int64_t k, WalkTiers lower, CopyPick pick,
            bool *verify_miss, bool pinned_only = false) {
    const Hash128 &parent = k > 0 ? keys[k - 1].hash : kRootHash;
    const int32_t *toks = tokens + k * p->block_size;
    const int32_t b = pool_find_copy(p, keys[k].hash, pick);
    if (b >= 0) {
        if (p->cache.verify(b, parent, keys[k], toks)) return !pinned_only || p->blocks.pins(b) > 0;
        *verify_miss = true;
        return false;
    }
    if (pinned_only || lower == kWalkDevice || !p->tiers.load(std::memory_order_relaxed)) return false;
    int32_t slot = -1;
    return tier_find_lower(p, parent, keys[k], toks, lower == kWalkHostDisk, &slot) >= 0;
}

// The keys of the blocks after block i (held on the device by block b) that child hints give
// (PrefixCache::child_of; the caller checked the keys add nothing past block 0): while the hinted
// block is cached and holds *chain and the prompt's next token ids, its hash is that block's key.
// Returns the last block index keyed; *chain is its hash, *last a device block holding it.
int64_t keys_from_hints(const kvc_pool *p, BlockKey *k, const int32_t *tokens, int64_t i, int64_t max_blocks,
                        int32_t b, Hash128 *chain, int32_t *last) {
    for (int64_t j = i + 1; j < max_blocks; ++j) {
        const int32_t c = pool_hinted_child(p, b, *chain, tokens + j * p->block_size);
        if (c < 0) {
            *last = b;
            return j - 1;
        }
        k[j] = BlockKey{};
        k[j].hash = *chain = p->cache.hash_of(c);
        b = c;
    }
    *last = b;
    return max_blocks - 1;
}

// The first block a hit ending with block e must hold: the one with position c - window + 1,
// c = (e + 1) x block_size being the first uncached position -- but at least the hit's last block,
// so that a hit always rests on a cached block (window 1 would otherwise need none).
int64_t first_needed(const kvc_pool *p, int32_t window, int64_t e) {
    const int64_t f = pool_window_first_block(p, window, (e + 1) * p->block_size);
    return f < e ? f : e;
}

PrefixWalk walk_windowed(kvc_pool *p, int32_t window, const int32_t *tokens, int64_t max_blocks, const KeySet &keys,
                         WalkTiers lower, CopyPick pick, bool pinned_only = false) {
    PrefixWalk w = pool_begin_walk(p);
    if (max_blocks <= 0) return w;
    // Every block's key, left to right (each chains on its parent). Grown, never shrunk: steady
    // state allocates nothing. A throw here happens before anything changed.
    std::vector<BlockKey> &k = p->walk_keys;
    if (int64_t(k.size()) < max_blocks) k.resize(size_t(max_blocks));
    // Keys come from child hints where they can (as in pool_walk_prefix, keys adding nothing past
    // block 0): after a hashed block that one probe of the index finds on the device, the blocks
    // its hints lead to are not hashed (keys_from_hints). The first probe that finds nothing ends
    // the probing: an uncached prompt pays one probe, and its loop is otherwise the plain one.
    bool probe = keys.lora_id == 0 && keys.group == 0 && keys.mm.empty();
    int32_t last = -1;  // a device block holding block i - 1's content, when known
    Hash128 chain = kRootHash;
    for (int64_t i = 0; i < max_blocks; ++i) {
        k[size_t(i)] = p->hasher.hash_block(chain, tokens + i * p->block_size, i, keys);
        chain = k[size_t(i)].hash;
        if (!probe) continue;
        const int32_t found = p->cache.find(chain);
        if (found < 0) {
            probe = false;
            continue;
        }
        if (last >= 0) p->cache.set_child(last, found);  // learnt, as in pool_walk_prefix
        i = keys_from_hints(p, k.data(), tokens, i, max_blocks, found, &chain, &last);
    }
    // Candidates e (the hit's last block) from the right. [lo, e] are known usable. When block u
    // in [f(e), e] is not, no candidate in [u, e] can hold (f is non-decreasing in e, so each of
    // them needs u): the next one is u - 1. A hit would need more blocks than the pool has
    // (hit_scratch holds num_blocks ids) only with a window wider than the pool; kvc_alloc could
    // not take it, nor any smaller one (those hold more of the table), so it is skipped.
    int64_t e = max_blocks - 1, lo = max_blocks;
    bool verify_miss = false;
    while (e >= 0) {
        const int64_t f = first_needed(p, window, e);
        if (e - f + 1 > p->num_blocks) {
            --e;
            if (lo > e + 1) lo = e + 1;
            continue;
        }
        while (lo > f && usable(p, tokens, k.data(), lo - 1, lower, pick, &verify_miss, pinned_only)) --lo;
        if (lo <= f) break;
        e = lo - 2;
        lo = e + 1;
    }
    w.verify_miss = verify_miss;
    w.keys = k.data();
    w.num_keys = max_blocks;
    if (e < 0) return w;
    // Record the hit's held blocks f..e as pool_walk_prefix does (ids, tier slots, counts).
    const int64_t f = first_needed(p, window, e);
    for (int64_t i = f; i <= e; ++i) {
        const int32_t b = pool_find_copy(p, k[size_t(i)].hash, pick);
        if (b >= 0) {  // verified in the scan
            pool_record_device_hit(p, &w, i - f, b);
            continue;
        }
        int32_t slot = -1;
        const Hash128 &parent = i > 0 ? k[size_t(i - 1)].hash : kRootHash;
        const int32_t tier =
            tier_find_lower(p, parent, k[size_t(i)], tokens + i * p->block_size, lower == kWalkHostDisk, &slot);
        pool_record_lower_hit(p, &w, i - f, tier, slot);
    }
    w.first_block = f;
    w.hit_blocks = e + 1;
    w.chain = k[size_t(e)].hash;
    return w;
}

}  // namespace

PrefixWalk pool_window_pin_range(kvc_pool *p, int32_t window, const int32_t *tokens, int64_t full_blocks,
                                 const KeySet &keys, bool pinned_only) {
    PrefixWalk w = walk_windowed(p, window, tokens, full_blocks, keys, kWalkDevice, kPickPin, pinned_only);
    if (w.hit_blocks < 2) return w;
    // The prefix itself, when block-aligned, is admitted one block short of this hit (the last
    // token is always computed): that hit ends at e - 1 and needs block first_needed(e - 1), one
    // before this range when the window reaches back that far. Without it in the range, a pinned
    // system prompt could lose its own hit once that block was evicted.
    const int64_t e = w.hit_blocks - 1, g = first_needed(p, window, e - 1);
    if (g >= w.first_block || w.held() + 1 > p->num_blocks) return w;
    bool verify_miss = false;
    if (!usable(p, tokens, w.keys, g, kWalkDevice, kPickPin, &verify_miss, pinned_only)) return w;
    int32_t *ids = p->hit_scratch.data();
    std::memmove(ids + 1, ids, size_t(w.held()) * sizeof(int32_t));
    pool_record_device_hit(p, &w, 0, pool_find_copy(p, w.keys[g].hash, kPickPin));
    w.first_block = g;
    return w;
}

PrefixWalk pool_find_hit_blocks(kvc_pool *p, const int32_t *tokens, int64_t max_blocks, const KeySet &keys,
                                WalkTiers lower, int32_t window) {
    if (window <= 0) return pool_walk_prefix(p, tokens, max_blocks, keys, lower);
    // Nothing cached anywhere: skip hashing the whole prompt.
    if (p->cache.size() == 0 && (lower == kWalkDevice || !p->tiers.load(std::memory_order_relaxed)))
        return pool_begin_walk(p);
    return walk_windowed(p, window, tokens, max_blocks, keys, lower, kPickHit);
}

int64_t pool_max_hit_blocks(const kvc_pool *p, int64_t num_tokens, const KeySet &keys) {
    // At most num_tokens - 1 tokens hit: the prefill computes at least the last one. The request
    // may cap it further (kvc_keys_set_max_cached_tokens).
    int64_t max_blocks = pool_block_of(p, num_tokens - 1);
    if (keys.max_cached_tokens >= 0 && keys.max_cached_tokens / p->block_size < max_blocks)
        max_blocks = keys.max_cached_tokens / p->block_size;
    return max_blocks;
}

PrefixWalk pool_find_prompt_hit(kvc_pool *p, const int32_t *tokens, int64_t num_tokens, const KeySet &keys,
                                WalkTiers lower) {
    return pool_find_hit_blocks(p, tokens, pool_max_hit_blocks(p, num_tokens, keys), keys, lower, p->sliding_window);
}

}  // namespace kvc
