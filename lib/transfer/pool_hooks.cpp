// See pool_hooks.hpp. Everything under the pool mutex, in the core's own terms.
#include "transfer/pool_hooks.hpp"

#include <cstring>
#include <mutex>

#include "core/pool.hpp"
#include "error.hpp"
#include "storage/pool_access.hpp"

namespace kvc::xfer {
namespace {

void add_ext_ref(kvc_pool *p, int32_t b) {
    if (p->ext_refs.empty()) p->ext_refs.assign(size_t(p->num_blocks), 0);
    ++p->ext_refs[size_t(b)];
    p->blocks.add_ref(b);
}

void drop_ext_ref(kvc_pool *p, int32_t b) {
    --p->ext_refs[size_t(b)];
    pool_release_block(p, b);
}

}  // namespace

kvc_status hold_prompt(kvc_pool *p, const int32_t *tokens, int64_t num_tokens, const KeySet &keys, HeldPrefix *out,
                       const char *fn) {
    if (kvc_status st = pool_storage_barrier(p, nullptr); st != KVC_OK) return st;
    // Reserve outside the lock: the vectors cannot fail under it.
    const int64_t full = num_tokens / p->block_size;
    out->blocks.reserve(size_t(full));
    out->hashes.reserve(size_t(full));
    out->tokens.reserve(size_t(full * p->block_size));
    std::lock_guard<kvc::PoolMutex> lk(p->mu);
    const PrefixWalk w = pool_walk_prefix(p, tokens, full, keys, kWalkDevice, kPickHit);
    if (w.hit_blocks < 1)
        return fail(KVC_ERR_STATE,
                    "%s: no full block of the prompt (%lld tokens, block size %d) is cached on the device", fn,
                    (long long)num_tokens, p->block_size);
    for (int64_t i = 0; i < w.hit_blocks; ++i) {
        const int32_t b = w.block(i);
        add_ext_ref(p, b);
        out->blocks.push_back(b);
        out->hashes.push_back(p->cache.hash_of(b));
    }
    out->tokens.assign(tokens, tokens + w.hit_blocks * p->block_size);
    return KVC_OK;
}

kvc_status hold_seq(kvc_pool *p, uint64_t seq_id, HeldPrefix *out, const char *fn) {
    if (kvc_status st = pool_storage_barrier(p, nullptr); st != KVC_OK) return st;
    std::unique_lock<kvc::PoolMutex> lk(p->mu);
    const Sequence *s = p->seqs.find(seq_id);
    if (!s) return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no sequence %llu", fn, (unsigned long long)seq_id);
    if (s->swapped_out) return fail(KVC_ERR_STATE, "%s: sequence %llu is swapped out", fn, (unsigned long long)seq_id);
    // The leading run of hashed blocks that are cached, chained from the root.
    int64_t n = 0;
    Hash128 parent = kRootHash;
    for (; n < s->num_hashed && n < int64_t(s->table.size()); ++n) {
        const int32_t b = s->table[size_t(n)];
        if (b < 0 || !p->blocks.cached(b) || p->cache.parent_of(b) != parent) break;
        parent = p->cache.hash_of(b);
    }
    if (n < 1)
        return fail(KVC_ERR_STATE, "%s: sequence %llu has no cached full block at its start", fn,
                    (unsigned long long)seq_id);
    const size_t bs = size_t(p->block_size);
    lk.unlock();
    // Sizes known: allocate outside the lock, then re-check that nothing moved.
    std::vector<int32_t> blocks(static_cast<size_t>(n)), toks(static_cast<size_t>(n) * bs);
    std::vector<Hash128> hashes(static_cast<size_t>(n));
    lk.lock();
    s = p->seqs.find(seq_id);
    if (!s || s->swapped_out || s->num_hashed < n || int64_t(s->table.size()) < n)
        return fail(KVC_ERR_STATE, "%s: sequence %llu changed while being exported; try again", fn,
                    (unsigned long long)seq_id);
    parent = kRootHash;
    for (int64_t i = 0; i < n; ++i) {
        const int32_t b = s->table[size_t(i)];
        if (b < 0 || !p->blocks.cached(b) || p->cache.parent_of(b) != parent)
            return fail(KVC_ERR_STATE, "%s: sequence %llu changed while being exported; try again", fn,
                        (unsigned long long)seq_id);
        parent = p->cache.hash_of(b);
        blocks[size_t(i)] = b;
        hashes[size_t(i)] = parent;
        std::memcpy(&toks[size_t(i) * bs], p->cache.tokens_of(b), bs * sizeof(int32_t));
    }
    for (int32_t b : blocks) add_ext_ref(p, b);
    out->blocks.swap(blocks);
    out->tokens.swap(toks);
    out->hashes.swap(hashes);
    return KVC_OK;
}

void release_blocks(kvc_pool *p, const std::vector<int32_t> &blocks) {
    std::lock_guard<kvc::PoolMutex> lk(p->mu);
    for (size_t i = blocks.size(); i-- > 0;) drop_ext_ref(p, blocks[i]);
}

kvc_status reserve_import(kvc_pool *p, const BlockKey *keys, const int32_t *tokens, int64_t n, int32_t priority,
                          Reservation *out, const char *fn) {
    out->held.reserve(size_t(n));
    out->fresh.reserve(size_t(n));
    const int64_t bs = p->block_size;
    std::lock_guard<kvc::PoolMutex> lk(p->mu);
    // The leading run already cached here (verified like a hit).
    int64_t skip = 0;
    Hash128 parent = kRootHash;
    for (; skip < n; ++skip) {
        const int32_t b = pool_find_copy(p, keys[skip].hash, kPickHit);
        if (b < 0 || !p->cache.verify(b, parent, keys[skip], tokens + skip * bs)) break;
        parent = keys[skip].hash;
        p->hit_scratch[size_t(skip)] = b;
    }
    const int64_t need = n - skip;
    // Free blocks the reservation can take: the held hits that are free now stop being free.
    int64_t free_hits = 0;
    for (int64_t i = 0; i < skip; ++i) free_hits += p->blocks.is_free(p->hit_scratch[size_t(i)]) ? 1 : 0;
    const int64_t avail = p->blocks.num_free() - free_hits;
    if (need > 0 && avail - need < p->watermark_blocks)
        return fail(KVC_ERR_OUT_OF_BLOCKS,
                    "%s: the pool cannot take the %lld blocks to import (%lld free, watermark %lld); nothing changed",
                    fn, (long long)need, (long long)avail, (long long)p->watermark_blocks);
    for (int64_t i = 0; i < skip; ++i) {
        const int32_t b = p->hit_scratch[size_t(i)];
        add_ext_ref(p, b);
        out->held.push_back(b);
    }
    pool_spill_before_taking(p, need);
    if (p->ext_refs.empty()) p->ext_refs.assign(size_t(p->num_blocks), 0);
    for (int64_t i = 0; i < need; ++i) {
        const int32_t b = pool_take_fresh_block(p, priority);
        ++p->ext_refs[size_t(b)];
        ++p->counters.blocks_allocated;
        out->fresh.push_back(b);
    }
    out->skipped = skip;
    return KVC_OK;
}

int64_t commit_import(kvc_pool *p, const BlockKey *keys, const int32_t *tokens, int64_t n, Reservation *r) {
    const int64_t bs = p->block_size;
    int64_t entered = 0;
    std::lock_guard<kvc::PoolMutex> lk(p->mu);
    for (int64_t j = 0; j < int64_t(r->fresh.size()); ++j) {
        const int64_t i = r->skipped + j;
        if (i >= n) break;
        const int32_t b = r->fresh[size_t(j)];
        const Hash128 parent = i == 0 ? kRootHash : keys[i - 1].hash;
        const int32_t *row = tokens + i * bs;
        // Cached here meanwhile (a local prefill, a concurrent import of the same prefix): that
        // copy serves the hits; this block goes back uncached. An equal hash over other content
        // (a collision) stays uncached too.
        if (p->cache.find(keys[i].hash) >= 0) continue;
        p->cache.insert(b, parent, keys[i], row);
        p->blocks.set_cached(b, true);
        pool_report_stored(p, b, parent, keys[i], row);
        ++entered;
    }
    for (size_t j = r->fresh.size(); j-- > 0;) drop_ext_ref(p, r->fresh[j]);
    for (size_t j = r->held.size(); j-- > 0;) drop_ext_ref(p, r->held[j]);
    r->fresh.clear();
    r->held.clear();
    return entered;
}

void abort_import(kvc_pool *p, Reservation *r) {
    std::lock_guard<kvc::PoolMutex> lk(p->mu);
    for (size_t j = r->fresh.size(); j-- > 0;) drop_ext_ref(p, r->fresh[j]);
    for (size_t j = r->held.size(); j-- > 0;) drop_ext_ref(p, r->held[j]);
    r->fresh.clear();
    r->held.clear();
}

}  // namespace kvc::xfer
