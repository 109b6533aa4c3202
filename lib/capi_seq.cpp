// C API: sequences — admission check, alloc (with prefix-cache hits), append (with copy-on-write
// and lookahead), fork, free, and the read-outs. Every function validates and checks capacity
// before it changes anything; the mutation phase cannot fail (no allocation, no throw), which is
// what makes each call all-or-nothing.
#include <algorithm>
#include <cstdio>
#include <new>

#include "capi_args.hpp"
#include "copy_pending.hpp"
#include "error.hpp"
#include "pool.hpp"
#include "pool_access.hpp"
#include "tiers.hpp"

namespace {

using kvc::fail;
using kvc::KeySet;
using kvc::Sequence;

// Geometric growth so that decode, which grows a sequence a little each step, reallocates rarely.
template <class V>
void reserve_geometric(V &v, int64_t n) {
    if (int64_t(v.capacity()) < n) v.reserve(size_t(std::max<int64_t>(n, 2 * int64_t(v.capacity()))));
}

using kvc::keys_or_empty;

struct AllocPlan {
    int64_t blocks = 0;  // table length
    int64_t held = 0;    // table entries the sequence holds (all but a windowed hit's leading ones)
    int64_t fresh = 0;   // blocks to take from the free queues
    int64_t free_now = 0;  // free blocks once refcount-0 hits are taken out
    kvc::PrefixWalk walk;
};

// The plan for a prompt whose hit is `walk` (lock held).
AllocPlan plan_from_walk(const kvc_pool *p, int64_t num_tokens, const kvc::PrefixWalk &walk) {
    AllocPlan plan;
    plan.blocks = kvc::pool_blocks_for(p, num_tokens);
    plan.walk = walk;
    plan.held = plan.blocks - walk.first_block;
    // Held device hits are shared; lower-tier hits and the rest take fresh blocks.
    plan.fresh = plan.held - (walk.held() - walk.host_hits - walk.disk_hits);
    plan.free_now = p->blocks.num_free() - walk.free_hits;
    return plan;
}

// Shared by kvc_can_alloc and kvc_alloc (lock held, arguments validated).
// With tiers, kvc_alloc also walks the host tier (lower = kWalkHost): those hits are restored into
// fresh device blocks, so they count as fresh for capacity.
AllocPlan plan_alloc(kvc_pool *p, const int32_t *tokens, int64_t num_tokens, const KeySet &keys,
                     kvc::WalkTiers lower = kvc::kWalkDevice) {
    kvc::PrefixWalk walk;
    // Without a window a prompt longer than the pool can never be taken: no need to look. With one,
    // a hit's leading blocks are not held, so it may fit.
    if (p->caching && (kvc::pool_blocks_for(p, num_tokens) <= p->num_blocks || p->sliding_window > 0))
        walk = kvc::pool_find_prompt_hit(p, tokens, num_tokens, keys, lower);
    return plan_from_walk(p, num_tokens, walk);
}

kvc_status check_prompt_args(kvc_pool *pool, const int32_t *tokens, int64_t num_tokens, const char *fn) {
    if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
    if (!tokens && pool->caching)
        return fail(KVC_ERR_NULL_ARG, "%s: tokens is NULL while prefix caching is on", fn);
    if (num_tokens < 1) return fail(KVC_ERR_INVALID_ARG, "%s: num_tokens must be >= 1, got %lld", fn, (long long)num_tokens);
    return kvc::check_max_len(pool, num_tokens, fn);
}

// kvc_alloc's refusals that depend on the pool's state (lock held).
kvc_status check_alloc(kvc_pool *p, uint64_t seq_id, int64_t num_tokens, const AllocPlan &plan) {
    if (p->seqs.find(seq_id))
        return fail(KVC_ERR_SEQ_EXISTS, "kvc_alloc: sequence %llu already exists", (unsigned long long)seq_id);
    if (plan.held > p->num_blocks)
        return fail(KVC_ERR_OUT_OF_BLOCKS, "kvc_alloc: %lld tokens need %lld blocks, the pool has only %d",
                    (long long)num_tokens, (long long)plan.held, p->num_blocks);
    if (plan.fresh > plan.free_now)
        return fail(KVC_ERR_OUT_OF_BLOCKS, "kvc_alloc: sequence %llu needs %lld new blocks (%lld cached), only %lld are free",
                    (unsigned long long)seq_id, (long long)plan.fresh, (long long)plan.walk.hit_blocks,
                    (long long)plan.free_now);
    return KVC_OK;
}

// kvc_alloc's changes once its plan passed check_alloc (lock held); only the reservations at the
// start can fail (out of host memory), before anything changed. Shared by kvc_alloc and kvc_admit.
kvc_status apply_alloc(kvc_pool *p, uint64_t seq_id, const int32_t *tokens, int64_t num_tokens, const KeySet &ks,
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
    s->keys.priority = s->priority = ks.priority;
    // A windowed hit's blocks before the window start out released (never taken).
    const int64_t skip = plan.walk.first_block, held_hits = plan.walk.held();
    s->table.assign(size_t(skip), -1);
    s->released = skip;
    // Device hits are referenced before any fresh block is taken, so eviction cannot take them.
    const int64_t restores = plan.walk.host_hits;
    for (int64_t j = 0; j < held_hits; ++j) {
        int32_t b = p->hit_scratch[size_t(j)];
        if (b >= 0) {
            p->blocks.add_ref(b);  // a refcount-0 hit leaves the free queue ("touch")
            p->blocks.set_priority(b, ks.priority);
        }
        s->table.push_back(b);  // -1: a host-tier hit, restored below
    }
    if (restores) kvc::tier_pin_restore_sources(p, 0, held_hits);  // before the spills claim host slots
    kvc::pool_spill_before_taking(p, plan.fresh);
    for (int64_t j = 0; restores && j < held_hits; ++j)
        if (s->table[size_t(skip + j)] < 0) s->table[size_t(skip + j)] = kvc::tier_restore_hit(p, j, ks.priority);
    for (int64_t i = restores; i < plan.fresh; ++i) s->table.push_back(kvc::pool_take_fresh_block(p, ks.priority));
    s->num_tokens = s->reserved_end = num_tokens;
    s->window_from = plan.walk.hit_blocks * p->block_size;  // where the prompt's queries start
    s->hit_blocks = plan.walk.hit_blocks;
    s->chain = plan.walk.chain;
    s->num_hashed = plan.walk.hit_blocks;
    if (p->caching) {
        const int64_t hashed_tokens = plan.walk.hit_blocks * p->block_size;
        const int64_t known = plan.walk.num_keys - plan.walk.hit_blocks;  // > 0 only after a windowed search
        if (known > 0)
            kvc::pool_hash_prompt_blocks(p, s, tokens + hashed_tokens, num_tokens - hashed_tokens,
                                         plan.walk.keys + plan.walk.hit_blocks, known);
        else
            kvc::pool_hash_full_blocks(p, s, tokens + hashed_tokens, num_tokens - hashed_tokens);
        p->counters.prefix_query_tokens += num_tokens;
        p->counters.prefix_hit_tokens += plan.walk.hit_blocks * p->block_size;
        p->counters.device_hits += held_hits - restores;
        p->counters.verify_misses += plan.walk.verify_miss ? 1 : 0;
    }
    ++p->counters.allocs;
    p->counters.blocks_allocated += plan.fresh;
    if (out_cached_tokens) *out_cached_tokens = plan.walk.hit_blocks * p->block_size;
    return KVC_OK;
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
    return check_alloc(r.p, r.seq_id, r.num_tokens, plan_from_walk(r.p, r.num_tokens, walk));
}

// kvc_free and kvc_abort. Lock held.
kvc_status free_sequence(kvc_pool *p, uint64_t seq_id, bool abort, const char *fn) {
    Sequence *s = p->seqs.find(seq_id);
    if (!s) return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no sequence %llu (never allocated or already freed)", fn,
                        (unsigned long long)seq_id);
    if (abort) {
        // The blocks this sequence filled itself (after its prompt's cache hit) may never have
        // received their KV: out of the cache with them, unless another holder or a pin relies on
        // them (a fork's, a hit of another prompt's: that caller's computation, not ours).
        for (size_t i = size_t(s->hit_blocks); i < s->table.size(); ++i) {
            const int32_t b = s->table[i];
            if (b >= 0 && p->blocks.cached(b) && p->blocks.refcount(b) == 1 && p->blocks.pins(b) == 0)
                kvc::pool_uncache_block(p, b);
        }
    }
    // Reverse order: within one LRU list the deepest blocks of the prefix are evicted first.
    if (s->swapped_out) kvc::tier_release_swapped(p, s);
    for (auto it = s->table.rbegin(); it != s->table.rend(); ++it)
        if (*it >= 0) kvc::pool_release_block(p, *it);  // -1: in a host slot, or released by the window
    p->seqs.erase(s);
    p->seq_generation.fetch_add(1, std::memory_order_relaxed);
    ++p->counters.frees;
    return KVC_OK;
}

// kvc_append's argument rules, tested inline on the hot paths; check_append_args words a refusal.
inline bool append_args_ok(const kvc_pool *p, const int32_t *tokens, int64_t num_tokens, int64_t num_lookahead) {
    return num_tokens >= 0 && num_lookahead >= 0 && (num_tokens > 0 || num_lookahead > 0) &&
           (tokens || num_tokens == 0 || !p->caching);
}

// kvc_append's argument checks, which need no lock: the status and message of a refusal.
__attribute__((cold, noinline)) kvc_status check_append_args(const kvc_pool *p, const int32_t *tokens, int64_t num_tokens, int64_t num_lookahead,
                             const char *fn) {
    if (num_tokens < 0) return fail(KVC_ERR_INVALID_ARG, "%s: num_tokens must be >= 0, got %lld", fn, (long long)num_tokens);
    if (num_lookahead < 0)
        return fail(KVC_ERR_INVALID_ARG, "%s: num_lookahead must be >= 0, got %lld", fn, (long long)num_lookahead);
    if (num_tokens == 0 && num_lookahead == 0)
        return fail(KVC_ERR_INVALID_ARG, "%s: num_tokens and num_lookahead are both 0", fn);
    if (!tokens && num_tokens > 0 && p->caching)
        return fail(KVC_ERR_NULL_ARG, "%s: tokens is NULL while prefix caching is on", fn);
    return KVC_OK;
}

// The decode step's usual case, on a sequence found and not swapped out (lock held): one confirmed
// token that lands in a block the sequence already has, alone (no copy-on-write to consider),
// without a window. It takes no block and changes nothing but the length and the unhashed tail, so
// the general plan (append_general) is skipped; the effect is the same. False: not that case,
// nothing done.
__attribute__((always_inline)) inline bool append_in_place(kvc_pool *p, Sequence *s, const int32_t *tokens,
                                                           int64_t num_tokens, int64_t num_lookahead,
                                                           int32_t *out_new_blocks) {
    if (num_tokens != 1 || num_lookahead != 0 || s->may_share_tail || p->sliding_window > 0) return false;
    const int64_t end = s->num_tokens + 1;  // < INT64_MAX: a sequence holds far fewer tokens
    const int64_t max = p->config.max_seq_len;
    if (end > int64_t(s->table.size()) * p->block_size || (max > 0 && end > max)) return false;
    s->num_tokens = end;
    if (end > s->reserved_end) s->reserved_end = end;
    if (p->caching && !s->hash_stopped) kvc::pool_hash_full_blocks(p, s, tokens, 1);
    ++p->counters.appends;
    if (out_new_blocks) *out_new_blocks = 0;
    return true;
}

// kvc_append's general case on a sequence found and not swapped out (lock held): the plan, then
// the changes, which cannot fail.
inline kvc_status append_general(kvc_pool *p, Sequence *s, uint64_t seq_id, const int32_t *tokens,
                                                    int64_t num_tokens, int64_t num_lookahead, int32_t *out_new_blocks,
                                                    const char *fn) {
    const int32_t bs = p->block_size;
    int64_t new_tokens, want_end;
    if (kvc::add_overflows(s->num_tokens, num_tokens, &new_tokens) ||
        kvc::add_overflows(new_tokens, num_lookahead, &want_end))
        return fail(KVC_ERR_OVERFLOW, "%s: sequence %llu length %lld + %lld + %lld lookahead overflows", fn,
                    (unsigned long long)seq_id, (long long)s->num_tokens, (long long)num_tokens,
                    (long long)num_lookahead);
    int64_t max = p->config.max_seq_len;
    if (max > 0 && want_end > max)
        return fail(KVC_ERR_MAX_LEN, "%s: sequence %llu would reach %lld tokens (%lld confirmed + %lld lookahead), "
                    "max_seq_len is %lld", fn, (unsigned long long)seq_id, (long long)want_end,
                    (long long)new_tokens, (long long)num_lookahead, (long long)max);
    const int64_t new_end = std::max(s->reserved_end, want_end);
    const int64_t old_nb = int64_t(s->table.size());
    // Most decode steps stay inside the reserved blocks: skip the division then.
    const int64_t new_nb = new_end <= old_nb * bs ? old_nb : kvc::pool_blocks_for(p, new_end);
    // Sliding window: the blocks no query from the previous call's first token on can see go
    // first, and count as free.
    // Out of line and behind one test: the decode step of a pool without a window stays as it
    // was (measured: keeping the window's values live through this function cost ~10%).
    int64_t window_free = 0, held = new_nb;
    if (__builtin_expect(p->sliding_window > 0, 0)) held -= kvc::pool_window_plan(p, s, &window_free);
    if (held > p->num_blocks)
        return fail(KVC_ERR_OUT_OF_BLOCKS, "%s: sequence %llu would need %lld blocks, the pool has only %d", fn,
                    (unsigned long long)seq_id, (long long)held, p->num_blocks);
    // Existing blocks that receive writes: those overlapping [num_tokens, want_end). Shared ones
    // (refcount > 1, e.g. after a fork) are copied first, and so are pinned ones (a cut by
    // kvc_truncate into a pinned prefix block): a pinned block's content must stay.
    const int64_t first_written = kvc::pool_block_of(p, s->num_tokens);
    const int64_t last_written = std::min(old_nb, kvc::pool_blocks_for(p, want_end));  // exclusive
    const auto must_copy = [p](int32_t b) { return p->blocks.refcount(b) > 1 || p->blocks.pins(b) > 0; };
    int64_t cows = 0;
    if (s->may_share_tail)
        for (int64_t i = first_written; i < last_written; ++i)
            if (must_copy(s->table[size_t(i)])) ++cows;
    const int64_t fresh = cows + (new_nb - old_nb);
    if (fresh > p->blocks.num_free() + window_free)
        return fail(KVC_ERR_OUT_OF_BLOCKS, "%s: sequence %llu needs %lld new blocks (%lld copy-on-write), "
                    "only %lld are free", fn, (unsigned long long)seq_id, (long long)fresh, (long long)cows,
                    (long long)(p->blocks.num_free() + window_free));
    reserve_geometric(s->table, new_nb);
    // ---- from here on nothing can fail ----
    if (__builtin_expect(p->sliding_window > 0, 0)) kvc::pool_window_release(p, s);
    if (fresh > 0) {
        kvc::pool_spill_before_taking(p, fresh);
        const int32_t prio = s->priority;
        for (int64_t i = first_written; i < last_written && cows; ++i) {
            int32_t src = s->table[size_t(i)];
            if (!must_copy(src)) continue;
            int32_t dst = kvc::pool_take_fresh_block(p, prio);
            kvc::pool_release_block(p, src);  // shared or pinned: never becomes free here
            // src keeps its bytes until the copy has read them, even if every other holder
            // lets it go first (a tier restore would otherwise overwrite them at once).
            p->blocks.hold(src);
            p->copies.push(src, dst);
            s->table[size_t(i)] = dst;
            ++p->counters.cow_copies;
        }
        for (int64_t i = old_nb; i < new_nb; ++i) s->table.push_back(kvc::pool_take_fresh_block(p, prio));
    }
    // A block this sequence alone holds, unpinned, but still in the prefix cache (kvc_truncate
    // cut into it) leaves the cache before it is written: a cached block never changes.
    if (s->may_share_tail)
        for (int64_t i = first_written; i < last_written; ++i) {
            const int32_t b = s->table[size_t(i)];
            if (p->blocks.cached(b)) kvc::pool_uncache_block(p, b);
        }
    s->num_tokens = new_tokens;
    s->reserved_end = new_end;
    if (p->caching && num_tokens > 0 && !s->hash_stopped) kvc::pool_hash_full_blocks(p, s, tokens, num_tokens);
    ++p->counters.appends;
    p->counters.blocks_allocated += fresh;
    if (out_new_blocks) *out_new_blocks = int32_t(fresh);
    return KVC_OK;
}

// kvc_append's work on one sequence once its arguments are checked (lock held). Shared by
// kvc_append and kvc_append_batch.
__attribute__((always_inline)) inline kvc_status append_locked(kvc_pool *p, uint64_t seq_id, const int32_t *tokens,
                                                               int64_t num_tokens, int64_t num_lookahead,
                                                               int32_t *out_new_blocks, const char *fn) {
    Sequence *s = p->seqs.find(seq_id);
    if (!s) return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no sequence %llu", fn, (unsigned long long)seq_id);
    if (s->swapped_out)
        return fail(KVC_ERR_STATE, "%s: sequence %llu is swapped out", fn, (unsigned long long)seq_id);
    if (append_in_place(p, s, tokens, num_tokens, num_lookahead, out_new_blocks)) return KVC_OK;
    return append_general(p, s, seq_id, tokens, num_tokens, num_lookahead, out_new_blocks, fn);
}

// The watermark verdict of kvc_can_alloc for a plan (lock held).
int32_t verdict_of(const kvc_pool *p, const AllocPlan &plan) {
    const int64_t w = p->watermark_blocks;
    if (p->num_blocks - plan.fresh < w || plan.held > p->num_blocks) return KVC_ALLOC_NEVER;
    if (plan.free_now - plan.fresh >= w) return KVC_ALLOC_OK;
    return KVC_ALLOC_LATER;
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

}  // namespace

extern "C" {

KVC_API kvc_status kvc_can_alloc(kvc_pool *pool, const int32_t *tokens, int64_t num_tokens, const kvc_keys *keys,
                                 int32_t *out_verdict) {
    KVC_GUARD({
        kvc_status st = check_prompt_args(pool, tokens, num_tokens, "kvc_can_alloc");
        if (st != KVC_OK) return st;
        if (!out_verdict) return fail(KVC_ERR_NULL_ARG, "kvc_can_alloc: out_verdict is NULL");
        std::lock_guard<std::mutex> lock(pool->mu);
        // The walk kvc_alloc ends up making (through the host tier, after it has promoted the disk
        // tier's hits): a device hit behind a lower-tier hit is a hit for kvc_alloc, so it must be
        // one here too, or the verdict can be NEVER for a prompt kvc_alloc admits.
        AllocPlan plan = plan_alloc(pool, tokens, num_tokens, keys_or_empty(keys), kvc::kWalkHostDisk);
        *out_verdict = verdict_of(pool, plan);
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
        // Disk-tier hits are read and verified first (outside the lock), so that what follows only
        // sees hits it can trust. No-op without a disk tier.
        const AllocRequest request{p, seq_id, num_tokens};
        st = kvc::tier_promote_prefix(p, tokens, num_tokens, ks, {refuse_before_promotion, &request, true});
        if (st != KVC_OK) return st;
        st = [&]() -> kvc_status {
        std::lock_guard<std::mutex> lock(p->mu);
        AllocPlan plan = plan_alloc(p, tokens, num_tokens, ks, kvc::kWalkHost);
        if (kvc_status refused = check_alloc(p, seq_id, num_tokens, plan); refused != KVC_OK) return refused;

        return apply_alloc(p, seq_id, tokens, num_tokens, ks, plan, out_cached_tokens);
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
            std::lock_guard<std::mutex> lock(p->mu);
            if (p->seqs.find(seq_id))
                return fail(KVC_ERR_SEQ_EXISTS, "%s: sequence %llu already exists", fn, (unsigned long long)seq_id);
            // With a disk tier, kvc_alloc promotes the prompt's disk hits before its walk, which
            // must not happen for a prompt that is not admitted: the verdict is taken first, on the
            // walk through every tier (kvc_can_alloc's), and an admitted prompt then goes the
            // kvc_alloc way. Without one, the verdict's walk is the allocation's.
            two_steps = t && t->disk && p->caching;
            AllocPlan plan = plan_alloc(p, tokens, num_tokens, ks, two_steps ? kvc::kWalkHostDisk : kvc::kWalkHost);
            const int32_t verdict = verdict_of(p, plan);
            if (verdict != KVC_ALLOC_OK) return not_admitted(verdict, out_verdict, out_cached_tokens);
            if (!two_steps) st = apply_alloc(p, seq_id, tokens, num_tokens, ks, plan, out_cached_tokens);
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
        if (__builtin_expect(!append_args_ok(pool, tokens, num_tokens, num_lookahead), 0))
            return check_append_args(pool, tokens, num_tokens, num_lookahead, fn);
        kvc_pool *p = pool;
        kvc_status st;
        {
            std::lock_guard<std::mutex> lock(p->mu);
            st = append_locked(p, seq_id, tokens, num_tokens, num_lookahead, out_new_blocks, fn);
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
            return fail(KVC_ERR_INVALID_ARG, "%s: token_offsets[0] must be 0, got %lld", fn, (long long)token_offsets[0]);
        // Every entry's arguments first, so that a bad one changes nothing.
        for (int32_t i = 0; i < num_seqs; ++i) {
            const int64_t n = token_offsets ? token_offsets[i + 1] - token_offsets[i] : 1;
            const int64_t la = lookahead_per_seq ? lookahead_per_seq[i] : num_lookahead;
            if (__builtin_expect(!append_args_ok(pool, tokens, n, la), 0))
                return batch_entry_failed(check_append_args(pool, tokens, n, la, fn), i, num_seqs, -1);
        }
        kvc_pool *p = pool;
        kvc_status st = KVC_OK;
        {
            std::lock_guard<std::mutex> lock(p->mu);
            for (; done < num_seqs; ++done) {
                const int32_t i = done;
                const int64_t first = token_offsets ? token_offsets[i] : i;
                const int64_t n = token_offsets ? token_offsets[i + 1] - first : 1;
                const int64_t la = lookahead_per_seq ? lookahead_per_seq[i] : num_lookahead;
                try {
                    st = append_locked(p, seq_ids[i], tokens ? tokens + first : nullptr, n, la,
                                       out_new_blocks ? out_new_blocks + i : nullptr, fn);
                } catch (const std::bad_alloc &) {  // before the entry changed anything
                    st = fail(KVC_ERR_NO_MEMORY, "%s: out of host memory", fn);
                }
                if (st != KVC_OK) {
                    st = batch_entry_failed(st, i, num_seqs, done);
                    break;
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
        kvc_pool *p = pool;
        std::lock_guard<std::mutex> lock(p->mu);
        Sequence *parent = p->seqs.find(parent_id);
        if (!parent) return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no parent sequence %llu", fn, (unsigned long long)parent_id);
        if (p->seqs.find(child_id))
            return fail(KVC_ERR_SEQ_EXISTS, "%s: child sequence %llu already exists", fn, (unsigned long long)child_id);
        if (parent->swapped_out)
            return fail(KVC_ERR_STATE, "%s: parent sequence %llu is swapped out", fn, (unsigned long long)parent_id);
        Sequence *c = p->seqs.create(child_id);
        try {
            c->table.assign(parent->table.begin(), parent->table.end());
            c->tail.reserve(parent->tail.capacity());
            c->tail.assign(parent->tail.begin(), parent->tail.end());
            c->set_keys(parent->keys);
        } catch (...) {
            p->seqs.erase(c);
            throw;
        }
        // ---- from here on nothing can fail ----
        c->num_tokens = parent->num_tokens;
        c->reserved_end = parent->reserved_end;
        c->chain = parent->chain;
        c->num_hashed = parent->num_hashed;
        c->hash_stopped = parent->hash_stopped;
        c->released = parent->released;
        c->window_from = parent->window_from;
        c->hit_blocks = parent->hit_blocks;
        c->may_share_tail = parent->may_share_tail = true;
        for (size_t i = size_t(c->released); i < c->table.size(); ++i)
            p->blocks.add_ref(c->table[i]);  // all in use already: no list changes
        ++p->counters.forks;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_abort(kvc_pool *pool, uint64_t seq_id) {
    KVC_GUARD({
        if (!pool) return fail(KVC_ERR_NULL_ARG, "kvc_abort: pool is NULL");
        std::lock_guard<std::mutex> lock(pool->mu);
        return free_sequence(pool, seq_id, true, "kvc_abort");
    })
}

KVC_API kvc_status kvc_free(kvc_pool *pool, uint64_t seq_id) {
    KVC_GUARD({
        if (!pool) return fail(KVC_ERR_NULL_ARG, "kvc_free: pool is NULL");
        kvc_pool *p = pool;
        std::lock_guard<std::mutex> lock(p->mu);
        return free_sequence(p, seq_id, false, "kvc_free");
    })
}

KVC_API kvc_status kvc_seq_block_table(kvc_pool *pool, uint64_t seq_id, int32_t *out, int64_t cap, int64_t *out_len) {
    KVC_GUARD({
        const char *fn = "kvc_seq_block_table";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (!out_len) return fail(KVC_ERR_NULL_ARG, "%s: out_len is NULL", fn);
        if (cap < 0) return fail(KVC_ERR_INVALID_ARG, "%s: cap must be >= 0, got %lld", fn, (long long)cap);
        if (!out && cap > 0) return fail(KVC_ERR_NULL_ARG, "%s: out is NULL with cap %lld", fn, (long long)cap);
        std::lock_guard<std::mutex> lock(pool->mu);
        const Sequence *s = pool->seqs.find(seq_id);
        if (!s) return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no sequence %llu", fn, (unsigned long long)seq_id);
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
    })
}

KVC_API kvc_status kvc_seq_num_tokens(kvc_pool *pool, uint64_t seq_id, int64_t *out_tokens) {
    KVC_GUARD({
        if (!pool) return fail(KVC_ERR_NULL_ARG, "kvc_seq_num_tokens: pool is NULL");
        if (!out_tokens) return fail(KVC_ERR_NULL_ARG, "kvc_seq_num_tokens: out_tokens is NULL");
        std::lock_guard<std::mutex> lock(pool->mu);
        const Sequence *s = pool->seqs.find(seq_id);
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
        std::lock_guard<std::mutex> lock(pool->mu);
        const Sequence *s = pool->seqs.find(seq_id);
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
        if (cap > 0 && (!src || !dst)) return fail(KVC_ERR_NULL_ARG, "%s: src or dst is NULL with cap %lld", fn, (long long)cap);
        if (cap == 0) {
            std::lock_guard<std::mutex> lock(pool->mu);
            *out_count = pool->copies.size();
            return KVC_OK;
        }
        // The caller copies them before its next call that can take a block (kvc.h).
        return kvc::take_pending_for_caller(pool, src, dst, cap, out_count);
    })
}

}  // extern "C"
