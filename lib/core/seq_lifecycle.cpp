// Sharing, shrinking and ending a sequence (seq_ops.hpp): fork, truncate, free / abort. In a hybrid
// pool each acts on every group's table of the sequence (check all, then apply all).
#include <algorithm>

#include "core/seq_ops.hpp"
#include "core/tier_port.hpp"

namespace kvc {
namespace {

// The child's copy of the parent's table, tail and keys. May throw std::bad_alloc; the caller
// drops the child then.
__attribute__((always_inline)) inline void fork_copy(const Sequence *parent, Sequence *c) {
    c->table.assign(parent->table.begin(), parent->table.end());
    c->tail.reserve(parent->tail.capacity());
    c->tail.assign(parent->tail.begin(), parent->tail.end());
    c->set_keys(parent->keys);
}

// The rest of the fork: lengths, hashing state, window, shared references. Cannot fail.
__attribute__((always_inline)) inline void fork_apply(kvc_pool *p, Sequence *parent, Sequence *c) {
    c->num_tokens = parent->num_tokens;
    c->reserved_end = parent->reserved_end;
    c->chain = parent->chain;
    c->num_hashed = parent->num_hashed;
    c->hash_stopped = parent->hash_stopped;
    c->window = parent->window;
    c->released = parent->released;
    c->window_from = parent->window_from;
    c->hit_blocks = parent->hit_blocks;
    c->may_share_tail = parent->may_share_tail = true;
    for (size_t i = size_t(c->released); i < c->table.size(); ++i)
        p->blocks.add_ref(c->table[i]);  // all in use already: no list changes
}

// kvc_truncate's refusal for one table, if any: the next token (position num_tokens) attends
// from num_tokens - window + 1 on, so those blocks must still be here.
__attribute__((always_inline)) inline kvc_status truncate_check(const kvc_pool *p, const Sequence *s, uint64_t seq_id,
                                                                int64_t num_tokens, const char *fn) {
    if (s->released > 0 && num_tokens - s->window + 1 < s->released * p->block_size)
        return fail(KVC_ERR_STATE,
                    "%s: sequence %llu released its blocks before position %lld (sliding window "
                    "%d); keeping %lld tokens would need them again",
                    fn, (unsigned long long)seq_id, (long long)(s->released * p->block_size), s->window,
                    (long long)num_tokens);
    return KVC_OK;
}

// Cuts one table to num_tokens tokens; returns the blocks it dropped. Cannot fail (the table and
// tail only shrink).
__attribute__((always_inline)) inline int64_t truncate_apply(kvc_pool *p, Sequence *s, int64_t num_tokens) {
    const int64_t bs = p->block_size;
    if (p->caching && !s->hash_stopped)
        pool_rewind_hashing(p, s, num_tokens);
    else if (s->hash_stopped)
        s->num_hashed = std::min(s->num_hashed, num_tokens / bs);
    const int64_t keep = pool_blocks_for(p, num_tokens);
    const int64_t dropped = int64_t(s->table.size()) - keep;
    for (int64_t i = int64_t(s->table.size()); i-- > keep;) pool_release_block(p, s->table[size_t(i)]);
    s->table.resize(size_t(keep));
    s->num_tokens = s->reserved_end = num_tokens;
    s->window_from = std::min(s->window_from, num_tokens);
    s->hit_blocks = std::min(s->hit_blocks, num_tokens / bs);
    if (num_tokens % bs != 0) {
        // The new last block will be written again, and a cached block must never change: the
        // append that writes it copies it if shared then, else takes it out of the cache. Until
        // then it stays cached (its content still matches) -- the path may_share_tail enables.
        const int32_t last = s->table.back();
        if (p->blocks.refcount(last) > 1 || p->blocks.cached(last)) s->may_share_tail = true;
    }
    return dropped;
}

// kvc_free's and kvc_abort's release of one table.
__attribute__((always_inline)) inline void release_table(kvc_pool *p, Sequence *s, bool abort) {
    if (abort) {
        // The blocks this sequence filled itself (after its prompt's cache hit) may never have
        // received their KV: out of the cache with them, unless another holder or a pin relies on
        // them (a fork's, a hit of another prompt's: that caller's computation, not ours).
        for (size_t i = size_t(s->hit_blocks); i < s->table.size(); ++i) {
            const int32_t b = s->table[i];
            if (b >= 0 && p->blocks.cached(b) && p->blocks.refcount(b) == 1 && p->blocks.pins(b) == 0)
                pool_uncache_block(p, b);
        }
    }
    // Reverse order: within one LRU list the deepest blocks of the prefix are evicted first.
    // pool_release_block's effect per block. A swapped-out table has -1 entries (blocks in a host
    // slot) anywhere; a resident one only in its first `released` (the window's), skipped here.
    const auto freed = [p](int32_t b) { pool_block_released(p, b); };
    if (__builtin_expect(s->swapped_out, 0)) {
        tier_release_swapped(p, s);
        p->blocks.release_reverse<true>(s->table.data(), int64_t(s->table.size()), freed);
    } else {
        const int64_t skip = s->released;
        p->blocks.release_reverse<false>(s->table.data() + skip, int64_t(s->table.size()) - skip, freed);
    }
}

}  // namespace

kvc_status fork_seq(kvc_pool *p, uint64_t parent_id, uint64_t child_id, const char *fn) {
    Sequence *parent = p->seqs.find(parent_id);
    if (!parent) return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no parent sequence %llu", fn, (unsigned long long)parent_id);
    if (p->seqs.find(child_id))
        return fail(KVC_ERR_SEQ_EXISTS, "%s: child sequence %llu already exists", fn, (unsigned long long)child_id);
    if (parent->swapped_out)
        return fail(KVC_ERR_STATE, "%s: parent sequence %llu is swapped out", fn, (unsigned long long)parent_id);
    Sequence *c = p->seqs.create(child_id);
    if (__builtin_expect(!p->hybrid, 1)) {  // one table: the loops below without their counter
        try {
            fork_copy(parent, c);
        } catch (...) {
            p->seqs.erase(c);
            throw;
        }
        fork_apply(p, parent, c);
        ++p->counters.forks;
        return KVC_OK;
    }
    const int32_t n = pool_num_tables(p);
    try {
        if (p->hybrid) hybrid_prepare_seq(p, c);
        for (int32_t g = 0; g < n; ++g) fork_copy(group_seq(parent, g), group_seq(c, g));
    } catch (...) {
        p->seqs.erase(c);
        throw;
    }
    // ---- from here on nothing can fail ----
    for (int32_t g = 0; g < n; ++g) fork_apply(p, group_seq(parent, g), group_seq(c, g));
    ++p->counters.forks;
    return KVC_OK;
}

// The rollback of a sequence (speculative decoding's rejected drafts, beam pruning, "regenerate").
kvc_status truncate_seq(kvc_pool *p, uint64_t seq_id, int64_t num_tokens, int32_t *out_freed_blocks, const char *fn) {
    Sequence *s = p->seqs.find(seq_id);
    if (!s) return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no sequence %llu", fn, (unsigned long long)seq_id);
    if (s->swapped_out) return fail(KVC_ERR_STATE, "%s: sequence %llu is swapped out", fn, (unsigned long long)seq_id);
    if (num_tokens > s->num_tokens)
        return fail(KVC_ERR_INVALID_ARG, "%s: sequence %llu has %lld confirmed tokens, cannot keep %lld", fn,
                    (unsigned long long)seq_id, (long long)s->num_tokens, (long long)num_tokens);
    if (__builtin_expect(!p->hybrid, 1)) {
        if (kvc_status st = truncate_check(p, s, seq_id, num_tokens, fn); st != KVC_OK) return st;
        const int64_t dropped = truncate_apply(p, s, num_tokens);
        p->seq_generation.fetch_add(1, std::memory_order_relaxed);
        if (out_freed_blocks) *out_freed_blocks = int32_t(dropped);
        return KVC_OK;
    }
    const int32_t n = pool_num_tables(p);
    for (int32_t g = 0; g < n; ++g) {
        if (p->groups[size_t(g)].kind == KVC_GROUP_SSM && num_tokens < s->num_tokens)
            return fail(KVC_ERR_UNSUPPORTED,
                        "%s: sequence %llu has an SSM state group (group %d), whose state cannot be rewound "
                        "to %lld tokens",
                        fn, (unsigned long long)seq_id, g, (long long)num_tokens);
        if (kvc_status st = truncate_check(p, group_seq(s, g), seq_id, num_tokens, fn); st != KVC_OK) return st;
    }
    // ---- from here on nothing can fail ----
    int64_t dropped = 0;
    for (int32_t g = 0; g < n; ++g) dropped += truncate_apply(p, group_seq(s, g), num_tokens);
    p->seq_generation.fetch_add(1, std::memory_order_relaxed);
    if (out_freed_blocks) *out_freed_blocks = int32_t(dropped);
    return KVC_OK;
}

kvc_status free_seq(kvc_pool *p, uint64_t seq_id, bool abort, const char *fn) {
    Sequence *s = p->seqs.find(seq_id);
    if (!s)
        return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no sequence %llu (never allocated or already freed)", fn,
                    (unsigned long long)seq_id);
    for (int32_t g = pool_num_tables(p); g-- > 0;) release_table(p, group_seq(s, g), abort);
    p->seqs.erase(s);
    p->seq_generation.fetch_add(1, std::memory_order_relaxed);
    ++p->counters.frees;
    return KVC_OK;
}

}  // namespace kvc
