// C API: sequences — admission, alloc, append, fork, truncate, free / abort, and the read-outs.
// Each entry point validates its arguments, locks the pool, calls one operation of the host core
// (lib/core/seq_ops.hpp: plan → check → commit, all-or-nothing) and, unlocked, runs the tier jobs
// that operation queued (spills, restores). No policy lives here.
#include <algorithm>
#include <cstdio>
#include <new>

#include "capi/args.hpp"
#include "core/pool.hpp"
#include "core/seq_ops.hpp"
#include "error.hpp"
#include "storage/copy_pending.hpp"
#include "storage/pool_access.hpp"
#include "tier/tiers.hpp"

namespace {

using kvc::fail;
using kvc::keys_or_empty;
using kvc::KeySet;

kvc_status check_prompt_args(kvc_pool *pool, const int32_t *tokens, int64_t num_tokens, const char *fn) {
    if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
    if (!tokens && pool->caching) return fail(KVC_ERR_NULL_ARG, "%s: tokens is NULL while prefix caching is on", fn);
    if (num_tokens < 1)
        return fail(KVC_ERR_INVALID_ARG, "%s: num_tokens must be >= 1, got %lld", fn, (long long)num_tokens);
    return kvc::check_max_len(pool, num_tokens, fn);
}

// kvc_alloc with a disk tier promotes the prompt's disk hits into the host tier before it plans
// (moving blocks, perhaps evicting host blocks to disk); tier_promote_prefix asks this first, on the
// hit through the disk tier (which counts disk hits as restores, as the plan after a complete
// promotion does), so that a refused call changes nothing.
struct AllocRequest {
    kvc_pool *p;
    uint64_t seq_id;
    int64_t num_tokens;
};
kvc_status refuse_before_promotion(const void *ctx, const kvc::PrefixWalk &walk) {
    const AllocRequest &r = *static_cast<const AllocRequest *>(ctx);
    return kvc::check_alloc(r.p, r.seq_id, r.num_tokens, kvc::plan_alloc_from_walk(r.p, r.num_tokens, walk));
}

// kvc_admit's answer for a prompt it does not admit: KVC_OK, the verdict, no cached tokens.
kvc_status not_admitted(int32_t verdict, int32_t *out_verdict, int64_t *out_cached_tokens) {
    *out_verdict = verdict;
    if (out_cached_tokens) *out_cached_tokens = 0;
    return KVC_OK;
}

// A kvc_append_batch entry's refusal: the message says which entry and how many went in (done < 0:
// refused while checking the arguments, before any entry).
kvc_status batch_entry_failed(kvc_status st, int32_t entry, int32_t num_seqs, int32_t done) {
    char why[400];
    std::snprintf(why, sizeof why, "%s", kvc_last_error());
    if (done < 0) return fail(st, "%s (entry %d of %d; nothing was appended)", why, entry, num_seqs);
    return fail(st, "%s (entry %d of %d; the %d before it were appended)", why, entry, num_seqs, done);
}

// One kvc_append_batch entry by the general path (append_seq), out of line so that the decode
// step's loop stays small; its refusal names the entry. Caller holds the pool lock.
__attribute__((noinline)) kvc_status append_batch_entry(kvc_pool *p, uint64_t seq_id, const int32_t *tokens,
                                                        int64_t num_tokens, int64_t num_lookahead,
                                                        int32_t *out_new_blocks, int32_t entry, int32_t num_seqs,
                                                        const char *fn) {
    kvc_status st;
    try {
        st = kvc::append_seq(p, seq_id, tokens, num_tokens, num_lookahead, out_new_blocks, fn);
    } catch (const std::bad_alloc &) {  // before the entry changed anything
        st = fail(KVC_ERR_NO_MEMORY, "%s: out of host memory", fn);
    }
    return st == KVC_OK ? st : batch_entry_failed(st, entry, num_seqs, entry);
}

// kvc_seq_block_table (group 0) and kvc_seq_group_block_table.
kvc_status copy_block_table(kvc_pool *pool, uint64_t seq_id, int32_t group, int32_t *out, int64_t cap, int64_t *out_len,
                            const char *fn) {
    if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
    if (!out_len) return fail(KVC_ERR_NULL_ARG, "%s: out_len is NULL", fn);
    if (cap < 0) return fail(KVC_ERR_INVALID_ARG, "%s: cap must be >= 0, got %lld", fn, (long long)cap);
    if (!out && cap > 0) return fail(KVC_ERR_NULL_ARG, "%s: out is NULL with cap %lld", fn, (long long)cap);
    const int32_t groups = pool->hybrid ? int32_t(pool->groups.size()) : 1;  // immutable: no lock
    if (group < 0 || group >= groups)
        return fail(KVC_ERR_INVALID_ARG, "%s: group %d is not a group of this pool (it has %d)", fn, group, groups);
    std::lock_guard<kvc::PoolMutex> lock(pool->mu);
    const kvc::Sequence *s0 = pool->seqs.find(seq_id);
    if (!s0) return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no sequence %llu", fn, (unsigned long long)seq_id);
    const kvc::Sequence *s = kvc::group_seq(s0, group);
    int64_t n = int64_t(s->table.size());
    if (!out && cap == 0) {
        *out_len = n;
        return KVC_OK;
    }
    if (cap < n) {
        *out_len = n;
        return fail(KVC_ERR_BUFFER_TOO_SMALL, "%s: sequence %llu has %lld blocks, buffer holds %lld", fn,
                    (unsigned long long)seq_id, (long long)n, (long long)cap);
    }
    std::copy(s->table.begin(), s->table.end(), out);
    *out_len = n;
    return KVC_OK;
}

}  // namespace

extern "C" {

KVC_API kvc_status kvc_can_alloc(kvc_pool *pool, const int32_t *tokens, int64_t num_tokens, const kvc_keys *keys,
                                 int32_t *out_verdict) {
    KVC_GUARD({
        kvc_status st = check_prompt_args(pool, tokens, num_tokens, "kvc_can_alloc");
        if (st != KVC_OK) return st;
        if (!out_verdict) return fail(KVC_ERR_NULL_ARG, "kvc_can_alloc: out_verdict is NULL");
        std::lock_guard<kvc::PoolMutex> lock(pool->mu);
        if (pool->hybrid) {
            kvc::HybridPlan plan;
            kvc::hybrid_plan_alloc(pool, tokens, num_tokens, keys_or_empty(keys), kvc::kWalkHost, &plan);
            *out_verdict = kvc::hybrid_alloc_verdict(pool, plan);
            return KVC_OK;
        }
        // The walk kvc_alloc ends up making (through the host tier, after it has promoted the disk
        // tier's hits): a device hit behind a lower-tier hit is a hit for kvc_alloc, so it must be
        // one here too, or the verdict can be NEVER for a prompt kvc_alloc admits.
        const kvc::AllocPlan plan = kvc::plan_alloc(pool, tokens, num_tokens, keys_or_empty(keys), kvc::kWalkHostDisk);
        *out_verdict = kvc::alloc_verdict(pool, plan);
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_alloc(kvc_pool *pool, uint64_t seq_id, const int32_t *tokens, int64_t num_tokens,
                             const kvc_keys *keys, int64_t *out_cached_tokens) {
    KVC_GUARD({
        kvc_status st = check_prompt_args(pool, tokens, num_tokens, "kvc_alloc");
        if (st != KVC_OK) return st;
        const KeySet &ks = keys_or_empty(keys);
        kvc_pool *p = pool;
        if (p->hybrid) {  // no disk tier (kvc_tier_attach_disk refuses hybrid pools): nothing to promote
            {
                std::lock_guard<kvc::PoolMutex> lock(p->mu);
                kvc::HybridPlan plan;
                kvc::hybrid_plan_alloc(p, tokens, num_tokens, ks, kvc::kWalkHost, &plan);
                st = kvc::hybrid_check_alloc(p, seq_id, num_tokens, plan);
                if (st == KVC_OK) st = kvc::hybrid_commit_alloc(p, seq_id, tokens, num_tokens, ks, plan, out_cached_tokens);
            }
            kvc::tier_run_pending(p);
            return st;
        }
        // Disk-tier hits are read and verified first (outside the lock), so that what follows only
        // sees hits it can trust. No-op without a disk tier.
        const AllocRequest request{p, seq_id, num_tokens};
        st = kvc::tier_promote_prefix(p, tokens, num_tokens, ks, {refuse_before_promotion, &request, true});
        if (st != KVC_OK) return st;
        st = [&]() -> kvc_status {
            std::lock_guard<kvc::PoolMutex> lock(p->mu);
            const kvc::AllocPlan plan = kvc::plan_alloc(p, tokens, num_tokens, ks, kvc::kWalkHost);
            if (kvc_status refused = kvc::check_alloc(p, seq_id, num_tokens, plan); refused != KVC_OK) return refused;
            return kvc::commit_alloc(p, seq_id, tokens, num_tokens, ks, plan, out_cached_tokens);
        }();
        kvc::tier_run_pending(p);  // spills and restores this call planned (no-op without tiers)
        return st;
    })
}

KVC_API kvc_status kvc_admit(kvc_pool *pool, uint64_t seq_id, const int32_t *tokens, int64_t num_tokens,
                             const kvc_keys *keys, int32_t *out_verdict, int64_t *out_cached_tokens) {
    KVC_GUARD({
        const char *fn = "kvc_admit";
        kvc_status st = check_prompt_args(pool, tokens, num_tokens, fn);
        if (st != KVC_OK) return st;
        if (!out_verdict) return fail(KVC_ERR_NULL_ARG, "%s: out_verdict is NULL", fn);
        const KeySet &ks = keys_or_empty(keys);
        kvc_pool *p = pool;
        const kvc::Tiers *t = p->tiers.load(std::memory_order_acquire);
        bool two_steps = false;
        {
            std::lock_guard<kvc::PoolMutex> lock(p->mu);
            if (p->seqs.find(seq_id))
                return fail(KVC_ERR_SEQ_EXISTS, "%s: sequence %llu already exists", fn, (unsigned long long)seq_id);
            // With a disk tier, kvc_alloc promotes the prompt's disk hits before its walk, which
            // must not happen for a prompt that is not admitted: the verdict is taken first, on the
            // walk through every tier (kvc_can_alloc's), and an admitted prompt then goes the
            // kvc_alloc way. Without one, the verdict's walk is the allocation's.
            two_steps = t && t->disk && p->caching;
            if (p->hybrid) {
                kvc::HybridPlan plan;
                kvc::hybrid_plan_alloc(p, tokens, num_tokens, ks, kvc::kWalkHost, &plan);
                const int32_t verdict = kvc::hybrid_alloc_verdict(p, plan);
                if (verdict != KVC_ALLOC_OK) return not_admitted(verdict, out_verdict, out_cached_tokens);
                st = kvc::hybrid_commit_alloc(p, seq_id, tokens, num_tokens, ks, plan, out_cached_tokens);
                two_steps = false;
            } else {
            const kvc::AllocPlan plan =
                kvc::plan_alloc(p, tokens, num_tokens, ks, two_steps ? kvc::kWalkHostDisk : kvc::kWalkHost);
            const int32_t verdict = kvc::alloc_verdict(p, plan);
            if (verdict != KVC_ALLOC_OK) return not_admitted(verdict, out_verdict, out_cached_tokens);
            if (!two_steps) st = kvc::commit_alloc(p, seq_id, tokens, num_tokens, ks, plan, out_cached_tokens);
            }
        }
        if (two_steps) {
            st = kvc_alloc(pool, seq_id, tokens, num_tokens, keys, out_cached_tokens);
            // Another thread took the blocks in between: what kvc_can_alloc then kvc_alloc would say.
            if (st == KVC_ERR_OUT_OF_BLOCKS) return not_admitted(KVC_ALLOC_LATER, out_verdict, out_cached_tokens);
        } else {
            kvc::tier_run_pending(p);  // spills and restores this call planned (no-op without tiers)
        }
        if (st == KVC_OK) *out_verdict = KVC_ALLOC_OK;  // out-params only on success
        return st;
    })
}

KVC_API kvc_status kvc_append(kvc_pool *pool, uint64_t seq_id, const int32_t *tokens, int64_t num_tokens,
                              int64_t num_lookahead, int32_t *out_new_blocks) {
    KVC_GUARD({
        const char *fn = "kvc_append";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (__builtin_expect(!kvc::append_args_ok(pool, tokens, num_tokens, num_lookahead), 0))
            return kvc::append_args_refusal(pool, tokens, num_tokens, num_lookahead, fn);
        kvc_pool *p = pool;
        kvc_status st;
        {
            std::lock_guard<kvc::PoolMutex> lock(p->mu);
            st = kvc::append_seq(p, seq_id, tokens, num_tokens, num_lookahead, out_new_blocks, fn);
        }
        // Spills of evicted cached blocks. Without tiers (the common case) the check stays here
        // rather than costing a call per append.
        if (p->tiers.load(std::memory_order_acquire)) kvc::tier_run_pending(p);
        return st;
    })
}

KVC_API kvc_status kvc_append_batch(kvc_pool *pool, int32_t num_seqs, const uint64_t *seq_ids,
                                    const int64_t *token_offsets, const int32_t *tokens, int64_t num_lookahead,
                                    const int64_t *lookahead_per_seq, int32_t *out_new_blocks, int32_t *out_done) {
    int32_t done = 0;
    if (out_done) *out_done = 0;
    KVC_GUARD({
        const char *fn = "kvc_append_batch";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (num_seqs < 0) return fail(KVC_ERR_INVALID_ARG, "%s: num_seqs must be >= 0, got %d", fn, num_seqs);
        if (num_seqs == 0) return KVC_OK;
        if (!seq_ids) return fail(KVC_ERR_NULL_ARG, "%s: seq_ids is NULL", fn);
        if (token_offsets && token_offsets[0] != 0)
            return fail(KVC_ERR_INVALID_ARG, "%s: token_offsets[0] must be 0, got %lld", fn,
                        (long long)token_offsets[0]);
        // The decode step's form: one token per sequence and one lookahead for all. Its entries'
        // arguments are one check, and its loop (below) is the in-place append alone.
        const bool uniform = !token_offsets && !lookahead_per_seq;
        // Every entry's arguments first, so that a bad one changes nothing.
        if (uniform) {
            if (__builtin_expect(!kvc::append_args_ok(pool, tokens, 1, num_lookahead), 0))
                return batch_entry_failed(kvc::append_args_refusal(pool, tokens, 1, num_lookahead, fn), 0, num_seqs, -1);
        } else {
            for (int32_t i = 0; i < num_seqs; ++i) {
                const int64_t n = token_offsets ? token_offsets[i + 1] - token_offsets[i] : 1;
                const int64_t la = lookahead_per_seq ? lookahead_per_seq[i] : num_lookahead;
                if (__builtin_expect(!kvc::append_args_ok(pool, tokens, n, la), 0))
                    return batch_entry_failed(kvc::append_args_refusal(pool, tokens, n, la, fn), i, num_seqs, -1);
            }
        }
        kvc_pool *p = pool;
        kvc_status st = KVC_OK;
        {
            std::lock_guard<kvc::PoolMutex> lock(p->mu);
            if (uniform && num_lookahead == 0) {
                // The decode step: its usual entries (in place, or one fresh block) by
                // append_step_in_place, the rest (copy-on-write, a window, no free block, an unknown
                // id) one entry at a time by the general path, out of line.
                // The sequences of a step are rarely all in cache: their lookups come first, a chunk
                // at a time (independent of each other, so their misses overlap). Resolving early
                // is safe: appends neither create nor free sequences.
                constexpr int32_t kChunk = 64;
                kvc::Sequence *chunk[kChunk];
                while (done < num_seqs && st == KVC_OK) {
                    const int32_t base = done, end = num_seqs - base < kChunk ? num_seqs : base + kChunk;
                    for (int32_t j = base; j < end; ++j) {
                        kvc::Sequence *s = p->seqs.find(seq_ids[j]);
                        kvc::prefetch_for_append(s);  // asked for now, appended after the lookups
                        chunk[j - base] = s;
                    }
                    const int32_t *toks = tokens ? tokens + base : nullptr;
                    int32_t *new_blocks = out_new_blocks ? out_new_blocks + base : nullptr;
                    while (true) {
                        done = base + kvc::append_step_in_place(p, chunk, done - base, end - base, toks, new_blocks);
                        if (done == end) break;
                        const int32_t k = done - base;
                        st = append_batch_entry(p, seq_ids[done], toks ? toks + k : nullptr, 1, 0,
                                                new_blocks ? new_blocks + k : nullptr, done, num_seqs, fn);
                        if (st != KVC_OK) break;
                        ++done;
                    }
                }
            } else {
                for (; done < num_seqs; ++done) {
                    const int32_t i = done;
                    const int64_t first = token_offsets ? token_offsets[i] : i;
                    const int64_t n = token_offsets ? token_offsets[i + 1] - first : 1;
                    const int64_t la = lookahead_per_seq ? lookahead_per_seq[i] : num_lookahead;
                    st = append_batch_entry(p, seq_ids[i], tokens ? tokens + first : nullptr, n, la,
                                            out_new_blocks ? out_new_blocks + i : nullptr, i, num_seqs, fn);
                    if (st != KVC_OK) break;
                }
            }
        }
        if (out_done) *out_done = done;
        if (p->tiers.load(std::memory_order_acquire)) kvc::tier_run_pending(p);
        return st;
    })
}

KVC_API kvc_status kvc_fork(kvc_pool *pool, uint64_t parent_id, uint64_t child_id) {
    KVC_GUARD({
        const char *fn = "kvc_fork";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (parent_id == child_id)
            return fail(KVC_ERR_INVALID_ARG, "%s: parent and child are the same id %llu", fn, (unsigned long long)parent_id);
        std::lock_guard<kvc::PoolMutex> lock(pool->mu);
        return kvc::fork_seq(pool, parent_id, child_id, fn);
    })
}

KVC_API kvc_status kvc_truncate(kvc_pool *pool, uint64_t seq_id, int64_t num_tokens, int32_t *out_freed_blocks) {
    KVC_GUARD({
        const char *fn = "kvc_truncate";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (num_tokens < 1) return fail(KVC_ERR_INVALID_ARG, "%s: num_tokens must be >= 1, got %lld", fn, (long long)num_tokens);
        std::lock_guard<kvc::PoolMutex> lock(pool->mu);
        return kvc::truncate_seq(pool, seq_id, num_tokens, out_freed_blocks, fn);
    })
}

KVC_API kvc_status kvc_abort(kvc_pool *pool, uint64_t seq_id) {
    KVC_GUARD({
        if (!pool) return fail(KVC_ERR_NULL_ARG, "kvc_abort: pool is NULL");
        std::lock_guard<kvc::PoolMutex> lock(pool->mu);
        return kvc::free_seq(pool, seq_id, true, "kvc_abort");
    })
}

KVC_API kvc_status kvc_free(kvc_pool *pool, uint64_t seq_id) {
    KVC_GUARD({
        if (!pool) return fail(KVC_ERR_NULL_ARG, "kvc_free: pool is NULL");
        std::lock_guard<kvc::PoolMutex> lock(pool->mu);
        return kvc::free_seq(pool, seq_id, false, "kvc_free");
    })
}

KVC_API kvc_status kvc_seq_block_table(kvc_pool *pool, uint64_t seq_id, int32_t *out, int64_t cap, int64_t *out_len) {
    KVC_GUARD({ return copy_block_table(pool, seq_id, 0, out, cap, out_len, "kvc_seq_block_table"); })
}

KVC_API kvc_status kvc_seq_group_block_table(kvc_pool *pool, uint64_t seq_id, int32_t group, int32_t *out, int64_t cap,
                                             int64_t *out_len) {
    KVC_GUARD({ return copy_block_table(pool, seq_id, group, out, cap, out_len, "kvc_seq_group_block_table"); })
}

KVC_API kvc_status kvc_seq_num_tokens(kvc_pool *pool, uint64_t seq_id, int64_t *out_tokens) {
    KVC_GUARD({
        if (!pool) return fail(KVC_ERR_NULL_ARG, "kvc_seq_num_tokens: pool is NULL");
        if (!out_tokens) return fail(KVC_ERR_NULL_ARG, "kvc_seq_num_tokens: out_tokens is NULL");
        std::lock_guard<kvc::PoolMutex> lock(pool->mu);
        const kvc::Sequence *s = pool->seqs.find(seq_id);
        if (!s) return fail(KVC_ERR_UNKNOWN_SEQ, "kvc_seq_num_tokens: no sequence %llu", (unsigned long long)seq_id);
        *out_tokens = s->num_tokens;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_seq_slot_mapping(kvc_pool *pool, uint64_t seq_id, int64_t first_pos, int64_t count,
                                        int64_t *out, int64_t cap) {
    KVC_GUARD({
        const char *fn = "kvc_seq_slot_mapping";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (!out && cap > 0) return fail(KVC_ERR_NULL_ARG, "%s: out is NULL with cap %lld", fn, (long long)cap);
        if (first_pos < 0) return fail(KVC_ERR_INVALID_ARG, "%s: first_pos must be >= 0, got %lld", fn, (long long)first_pos);
        if (count < 0) return fail(KVC_ERR_INVALID_ARG, "%s: count must be >= 0, got %lld", fn, (long long)count);
        if (cap < 0) return fail(KVC_ERR_INVALID_ARG, "%s: cap must be >= 0, got %lld", fn, (long long)cap);
        std::lock_guard<kvc::PoolMutex> lock(pool->mu);
        const kvc::Sequence *s = pool->seqs.find(seq_id);
        if (!s) return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no sequence %llu", fn, (unsigned long long)seq_id);
        if (s->swapped_out)
            return fail(KVC_ERR_STATE, "%s: sequence %llu is swapped out", fn, (unsigned long long)seq_id);
        if (first_pos > s->reserved_end || count > s->reserved_end - first_pos)
            return fail(KVC_ERR_INVALID_ARG, "%s: positions [%lld, +%lld) reach beyond the %lld reserved slots of "
                        "sequence %llu", fn, (long long)first_pos, (long long)count, (long long)s->reserved_end,
                        (unsigned long long)seq_id);
        if (count > 0 && first_pos < s->released * pool->block_size)
            return fail(KVC_ERR_INVALID_ARG, "%s: position %lld of sequence %llu is in a block the sliding window "
                        "released (positions before %lld)", fn, (long long)first_pos, (unsigned long long)seq_id,
                        (long long)(s->released * pool->block_size));
        if (cap < count)
            return fail(KVC_ERR_BUFFER_TOO_SMALL, "%s: %lld slots requested, buffer holds %lld", fn, (long long)count,
                        (long long)cap);
        const int32_t bs = pool->block_size;
        for (int64_t i = 0; i < count; ++i) {
            int64_t pos = first_pos + i, blk = kvc::pool_block_of(pool, pos);
            out[i] = int64_t(s->table[size_t(blk)]) * bs + (pos - blk * bs);
        }
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_take_pending_copies(kvc_pool *pool, int32_t *src, int32_t *dst, int64_t cap,
                                           int64_t *out_count) {
    KVC_GUARD({
        const char *fn = "kvc_take_pending_copies";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (!out_count) return fail(KVC_ERR_NULL_ARG, "%s: out_count is NULL", fn);
        if (cap < 0) return fail(KVC_ERR_INVALID_ARG, "%s: cap must be >= 0, got %lld", fn, (long long)cap);
        if (cap > 0 && (!src || !dst))
            return fail(KVC_ERR_NULL_ARG, "%s: src or dst is NULL with cap %lld", fn, (long long)cap);
        if (cap == 0) {
            std::lock_guard<kvc::PoolMutex> lock(pool->mu);
            *out_count = pool->copies.size();
            return KVC_OK;
        }
        // The caller copies them before its next call that can take a block (kvc.h).
        return kvc::take_pending_for_caller(pool, src, dst, cap, out_count);
    })
}

}  // extern "C"
