// C API: kvc_truncate, the rollback of a sequence (speculative decoding's rejected drafts, beam
// pruning, "regenerate"). Kept apart from capi_seq.cpp, whose append/alloc loops are the hottest
// code of the host core: sharing their translation unit changed GCC's inlining of them.
#include <algorithm>

#include "error.hpp"
#include "pool.hpp"

using kvc::fail;
using kvc::Sequence;

extern "C" {

KVC_API kvc_status kvc_truncate(kvc_pool *pool, uint64_t seq_id, int64_t num_tokens, int32_t *out_freed_blocks) {
    KVC_GUARD({
        const char *fn = "kvc_truncate";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (num_tokens < 1) return fail(KVC_ERR_INVALID_ARG, "%s: num_tokens must be >= 1, got %lld", fn, (long long)num_tokens);
        kvc_pool *p = pool;
        std::lock_guard<std::mutex> lock(p->mu);
        Sequence *s = p->seqs.find(seq_id);
        if (!s) return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no sequence %llu", fn, (unsigned long long)seq_id);
        if (s->swapped_out)
            return fail(KVC_ERR_STATE, "%s: sequence %llu is swapped out", fn, (unsigned long long)seq_id);
        if (num_tokens > s->num_tokens)
            return fail(KVC_ERR_INVALID_ARG, "%s: sequence %llu has %lld confirmed tokens, cannot keep %lld", fn,
                        (unsigned long long)seq_id, (long long)s->num_tokens, (long long)num_tokens);
        // The next token (position num_tokens) attends from num_tokens - window + 1 on: those blocks
        // must still be here.
        if (s->released > 0 && num_tokens - p->sliding_window + 1 < s->released * p->block_size)
            return fail(KVC_ERR_STATE, "%s: sequence %llu released its blocks before position %lld (sliding window "
                        "%d); keeping %lld tokens would need them again", fn, (unsigned long long)seq_id,
                        (long long)(s->released * p->block_size), p->sliding_window, (long long)num_tokens);
        // ---- from here on nothing can fail (the table and tail only shrink) ----
        const int64_t bs = p->block_size;
        if (p->caching && !s->hash_stopped) kvc::pool_rewind_hashing(p, s, num_tokens);
        else if (s->hash_stopped) s->num_hashed = std::min(s->num_hashed, num_tokens / bs);
        const int64_t keep = kvc::pool_blocks_for(p, num_tokens);
        const int64_t dropped = int64_t(s->table.size()) - keep;
        for (int64_t i = int64_t(s->table.size()); i-- > keep;) kvc::pool_release_block(p, s->table[size_t(i)]);
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
        p->seq_generation.fetch_add(1, std::memory_order_relaxed);
        if (out_freed_blocks) *out_freed_blocks = int32_t(dropped);
        return KVC_OK;
    })
}

}  // extern "C"
