// Block-level pool operations that combine the block bookkeeping with the prefix cache: lazy
// eviction on reuse, entering filled blocks into the cache, and walking a prompt's cached prefix.
#include <vector>

#include "pool.hpp"
#include "tiers.hpp"

namespace kvc {

int32_t pool_take_fresh_block(kvc_pool *p, int32_t priority) {
    int32_t b = p->blocks.next_victim();
    if (p->blocks.cached(b)) {
        // Lazy eviction: the block kept its cache entry while it waited in the LRU list. With a host
        // tier its content moves one tier down instead of being lost.
        if (p->tiers.load(std::memory_order_relaxed)) tier_spill_evicted(p, b);
        EventRecord ev;
        ev.type = KVC_EVENT_BLOCK_REMOVED;
        ev.block_id = b;
        ev.hash = p->cache.hash_of(b);
        ev.parent = p->cache.parent_of(b);
        p->cache.erase(b);
        p->blocks.set_cached(b, false);
        p->events.push(ev, nullptr);
        ++p->counters.evictions;
    }
    p->blocks.take_fresh(b, priority);
    return b;
}

namespace {

// Hashes the sequence's next block (index num_hashed, token ids `toks`) and caches it.
void hash_next_block(kvc_pool *p, Sequence *s, const int32_t *toks) {
    const int64_t i = s->num_hashed;
    const int32_t b = s->table[size_t(i)];
    p->cache.prefetch_for_insert(b);
    BlockKey key = p->hasher.hash_block(s->chain, toks, i, s->keys);
    if (!p->blocks.cached(b) && p->cache.find(key.hash) < 0) {
        p->cache.insert(b, s->chain, key, toks);
        p->blocks.set_cached(b, true);
        EventRecord ev;
        ev.type = KVC_EVENT_BLOCK_STORED;
        ev.block_id = b;
        ev.num_tokens = p->block_size;
        ev.hash = key.hash;
        ev.parent = s->chain;
        ev.lora_id = key.lora_id;
        ev.extras_digest = key.extras_digest;
        p->events.push(ev, toks);
    }
    s->chain = key.hash;
    s->num_hashed = i + 1;
}

}  // namespace

void pool_hash_full_blocks(kvc_pool *p, Sequence *s, const int32_t *src, int64_t n) {
    const int64_t bs = p->block_size;
    std::vector<int32_t> &tail = s->tail;  // capacity >= bs: never reallocates below
    const int64_t have = int64_t(tail.size());
    if (have + n < bs) {  // the common decode step: no block filled
        if (n == 1) tail.push_back(src[0]);
        else tail.insert(tail.end(), src, src + n);
        return;
    }
    int64_t i = 0;
    if (have > 0) {
        i = bs - have;
        tail.insert(tail.end(), src, src + i);
        hash_next_block(p, s, tail.data());
        tail.clear();
    }
    for (; n - i >= bs; i += bs) hash_next_block(p, s, src + i);
    tail.assign(src + i, src + n);
}

PrefixWalk pool_walk_prefix(kvc_pool *p, const int32_t *tokens, int64_t max_blocks, const KeySet &keys,
                            WalkTiers lower) {
    PrefixWalk w;
    const int32_t bs = p->block_size;
    if (max_blocks > p->num_blocks) max_blocks = p->num_blocks;  // bounds hit_scratch
    for (int64_t i = 0; i < max_blocks; ++i) {
        const int32_t *toks = tokens + i * bs;
        BlockKey key = p->hasher.hash_block(w.chain, toks, i, keys);
        int32_t b = p->cache.find(key.hash);
        Tiers *t = lower != kWalkDevice ? p->tiers.load() : nullptr;
        if (b < 0 && t) {
            int32_t slot = -1;
            const int32_t tier = tier_find_lower(p, w.chain, key, toks, lower == kWalkHostDisk, &slot);
            if (tier < 0) break;
            t->hit_tier[size_t(i)] = uint8_t(tier);
            t->hit_slot[size_t(i)] = slot;
            p->hit_scratch[size_t(i)] = -1;
            ++(tier == KVC_TIER_HOST ? w.host_hits : w.disk_hits);
            w.chain = key.hash;
            w.hit_blocks = i + 1;
            continue;
        }
        if (b < 0) break;
        if (!p->cache.verify(b, w.chain, key, toks)) {
            w.verify_miss = true;
            break;
        }
        p->hit_scratch[size_t(i)] = b;
        if (p->blocks.queues().contains(b)) ++w.free_hits;
        w.chain = key.hash;
        w.hit_blocks = i + 1;
    }
    return w;
}

}  // namespace kvc
