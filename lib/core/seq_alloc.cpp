// Admission and allocation of a prompt (seq_ops.hpp): plan_alloc → check_alloc → commit_alloc.
#include <algorithm>

#include "core/seq_ops.hpp"
#include "core/tier_port.hpp"

namespace kvc {

AllocPlan plan_alloc_from_walk(const kvc_pool *p, int64_t num_tokens, const PrefixWalk &walk) {
    AllocPlan plan;
    plan.blocks = pool_blocks_for(p, num_tokens);
    plan.walk = walk;
    plan.held = plan.blocks - walk.first_block;
    // Held device hits are shared; lower-tier hits and the rest take fresh blocks.
    plan.fresh = plan.held - (walk.held() - walk.host_hits - walk.disk_hits);
    plan.free_now = p->blocks.num_free() - walk.free_hits;
    return plan;
}

// With tiers, kvc_alloc walks the host tier too (lower = kWalkHost): those hits are restored into
// fresh device blocks, so they count as fresh for capacity.
AllocPlan plan_alloc(kvc_pool *p, const int32_t *tokens, int64_t num_tokens, const KeySet &keys, WalkTiers lower) {
    PrefixWalk walk;
    // Without a window a prompt longer than the pool can never be taken: no need to look. With one,
    // a hit's leading blocks are not held, so it may fit.
    if (p->caching && (pool_blocks_for(p, num_tokens) <= p->num_blocks || p->sliding_window > 0))
        walk = pool_find_prompt_hit(p, tokens, num_tokens, keys, lower);
    return plan_alloc_from_walk(p, num_tokens, walk);
}

kvc_status check_alloc(kvc_pool *p, uint64_t seq_id, int64_t num_tokens, const AllocPlan &plan) {
    if (p->seqs.find(seq_id))
        return fail(KVC_ERR_SEQ_EXISTS, "kvc_alloc: sequence %llu already exists", (unsigned long long)seq_id);
    if (plan.held > p->num_blocks)
        return fail(KVC_ERR_OUT_OF_BLOCKS, "kvc_alloc: %lld tokens need %lld blocks, the pool has only %d",
                    (long long)num_tokens, (long long)plan.held, p->num_blocks);
    if (plan.fresh > plan.free_now)
        return fail(KVC_ERR_OUT_OF_BLOCKS,
                    "kvc_alloc: sequence %llu needs %lld new blocks (%lld cached), only %lld are free",
                    (unsigned long long)seq_id, (long long)plan.fresh, (long long)plan.walk.hit_blocks,
                    (long long)plan.free_now);
    return KVC_OK;
}

int32_t alloc_verdict_of(const kvc_pool *p, int64_t held, int64_t fresh, int64_t free_now) {
    const int64_t w = p->watermark_blocks;
    if (p->num_blocks - fresh < w || held > p->num_blocks) return KVC_ALLOC_NEVER;
    if (free_now - fresh >= w) return KVC_ALLOC_OK;
    return KVC_ALLOC_LATER;
}

int32_t alloc_verdict(const kvc_pool *p, const AllocPlan &plan) {
    return alloc_verdict_of(p, plan.held, plan.fresh, plan.free_now);
}

// The new sequence s (created, room reserved) takes the hit: the table starts with the windowed
// hit's unheld blocks (-1) and the held hits; device hits are referenced before any fresh block is
// taken, so eviction cannot take them; lower-tier hits' sources are pinned before spills claim host
// slots. Cannot fail.
void commit_alloc_hold(kvc_pool *p, Sequence *s, const KeySet &ks, const AllocPlan &plan) {
    const PrefixWalk &walk = plan.walk;
    s->keys.priority = s->priority = ks.priority;
    const int64_t skip = walk.first_block, held_hits = walk.held();
    s->table.assign(size_t(skip), -1);
    s->released = skip;
    // The hits in one copy (-1: a host-tier hit, restored by commit_alloc_fill; the room was
    // reserved), then their references: no capacity test per block.
    const int32_t *hits = held_hits > 0 ? walk.hits->blocks : nullptr;
    s->table.insert(s->table.end(), hits, hits + held_hits);
    // A refcount-0 hit leaves the free queue ("touch"). Host-tier hits are the only -1 entries.
    if (walk.host_hits) {
        p->blocks.add_refs<true>(hits, held_hits, ks.priority);
        tier_pin_restore_sources(p, walk);
    } else {
        p->blocks.add_refs<false>(hits, held_hits, ks.priority);
    }
}

// The rest of the allocation once every table holding hits took them and the spills for the fresh
// blocks were planned: restores, fresh blocks, the prompt's blocks past the hit hashed into the
// cache. count_prompt: the prompt's tokens and hits go into the pool's counters (one group of a
// hybrid pool). Cannot fail.
void commit_alloc_fill(kvc_pool *p, Sequence *s, const int32_t *tokens, int64_t num_tokens, const AllocPlan &plan,
                       bool count_prompt) {
    const PrefixWalk &walk = plan.walk;
    const int64_t skip = walk.first_block, held_hits = walk.held(), restores = walk.host_hits;
    const int32_t prio = s->priority;
    for (int64_t j = 0; restores && j < held_hits; ++j)
        if (s->table[size_t(skip + j)] < 0) s->table[size_t(skip + j)] = tier_restore_hit(p, walk, j, prio);
    // The fresh blocks into room the table already has (commit_alloc reserved it): written
    // through a pointer, the loop keeps each id in a register (through push_back GCC stored every
    // id to the stack for the vector's growth path, and bench_core's BM_Alloc/0/0 moved by 5-7 %
    // with the code around it).
    if (plan.fresh > restores) {
        const size_t at = s->table.size();
        s->table.resize(at + size_t(plan.fresh - restores));
        int32_t *const fresh = s->table.data() + at;
        for (int64_t i = 0; i < plan.fresh - restores; ++i) fresh[i] = pool_take_fresh_block(p, prio);
    }
    s->num_tokens = s->reserved_end = num_tokens;
    s->window_from = walk.hit_blocks * p->block_size;  // where the prompt's queries start
    s->hit_blocks = walk.hit_blocks;
    s->chain = walk.chain;
    s->num_hashed = walk.hit_blocks;
    if (p->caching) {
        const int64_t hashed_tokens = walk.hit_blocks * p->block_size;
        const int64_t known = walk.num_keys - walk.hit_blocks;  // > 0 only after a windowed search
        if (known > 0)
            pool_hash_prompt_blocks(p, s, tokens + hashed_tokens, num_tokens - hashed_tokens,
                                    walk.keys + walk.hit_blocks, known);
        else
            pool_hash_full_blocks(p, s, tokens + hashed_tokens, num_tokens - hashed_tokens);
        if (count_prompt) {
            p->counters.prefix_query_tokens += num_tokens;
            p->counters.prefix_hit_tokens += walk.hit_blocks * p->block_size;
            p->counters.verify_misses += walk.verify_miss ? 1 : 0;
        }
        p->counters.device_hits += held_hits - restores;
    }
    p->counters.blocks_allocated += plan.fresh;
}

kvc_status commit_alloc(kvc_pool *p, uint64_t seq_id, const int32_t *tokens, int64_t num_tokens, const KeySet &ks,
                        const AllocPlan &plan, int64_t *out_cached_tokens) {
    Sequence *s = p->seqs.create(seq_id);
    try {
        s->table.reserve(size_t(plan.blocks));
        if (p->caching) {
            s->tail.reserve(size_t(p->block_size));
            s->set_keys(ks);
        }
    } catch (...) {
        p->seqs.erase(s);
        throw;
    }
    // ---- from here on nothing can fail ----
    s->window = p->sliding_window;
    commit_alloc_hold(p, s, ks, plan);
    pool_spill_before_taking(p, plan.fresh);
    commit_alloc_fill(p, s, tokens, num_tokens, plan, true);
    ++p->counters.allocs;
    if (out_cached_tokens) *out_cached_tokens = plan.walk.hit_blocks * p->block_size;
    return KVC_OK;
}

}  // namespace kvc
