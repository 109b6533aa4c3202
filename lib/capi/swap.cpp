// C API: whole-sequence swap to the host tier and back, preemption helpers, and the operation ids
// both hand out (kvc_op_query / kvc_op_wait). Planning happens under the pool mutex (all checks
// first, then a mutation that cannot fail); the copies run after it is released (tier_run_pending).
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstring>
#include <memory>
#include <thread>

#include "capi/args.hpp"
#include "core/pool.hpp"
#include "error.hpp"
#include "storage/cuda_api.hpp"
#include "struct_size.hpp"
#include "tier/plan.hpp"
#include "tier/tiers.hpp"

namespace {

using kvc::check_struct_size;
using kvc::fail;
using kvc::Sequence;
using kvc::StructUse;
using kvc::Tiers;
using kvc::TierSlots;

bool swappable(const kvc_pool *p, int32_t b) { return p->blocks.refcount(b) == 1 && p->blocks.pins(b) == 0; }

// A swap finished its copies (tier_run_pending returned): record that for kvc_op_query/wait.
void mark_recorded(Tiers *t, uint64_t op) {
    uint64_t cur = t->recorded_op.load(std::memory_order_relaxed);
    while (cur < op && !t->recorded_op.compare_exchange_weak(cur, op)) {}
}

kvc_status check_op(kvc_pool *pool, uint64_t op, const char *fn, Tiers **out) {
    if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
    std::lock_guard<kvc::PoolMutex> lk(pool->mu);
    Tiers *t = pool->tiers.load(std::memory_order_relaxed);
    if (!t || op == 0 || op >= t->next_op)
        return fail(KVC_ERR_INVALID_ARG, "%s: operation %llu was never issued by this pool", fn,
                    (unsigned long long)op);
    *out = t;
    return KVC_OK;
}

// Host-tier slots a swap-out of s needs / blocks a swap-in needs.
int64_t swap_out_blocks(const kvc_pool *p, const Sequence *s) {
    int64_t n = 0;
    for (int32_t b : s->table) n += b >= 0 && swappable(p, b) ? 1 : 0;  // -1: released by the window
    return n;
}

int64_t held_blocks(const Sequence *s) {
    int64_t n = 0;
    for (int32_t slot : s->swap_slots) n += slot >= 0 ? 1 : 0;
    return n;
}

}  // namespace

extern "C" {

KVC_API kvc_status kvc_swap_out(kvc_pool *pool, uint64_t seq_id, uint64_t *out_op) {
    KVC_GUARD({
        const char *fn = "kvc_swap_out";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        kvc_pool *p = pool;
        Tiers *t = nullptr;
        uint64_t op = 0;
        {
            std::lock_guard<kvc::PoolMutex> lk(p->mu);
            Sequence *s = p->seqs.find(seq_id);
            if (!s) return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no sequence %llu", fn, (unsigned long long)seq_id);
            if (s->swapped_out)
                return fail(KVC_ERR_STATE, "%s: sequence %llu is already swapped out", fn, (unsigned long long)seq_id);
            t = p->tiers.load(std::memory_order_relaxed);
            if (!t) return fail(KVC_ERR_STATE, "%s: the pool has no host tier (kvc_tier_attach_host)", fn);
            // Every table of the sequence (one per group in a hybrid pool) moves together.
            const int32_t n = kvc::pool_num_tables(p);
            // A queued copy-on-write pair into one of this sequence's blocks has not written it yet:
            // moving that block first would save stale bytes. A pair reading one of its blocks (a
            // fork's copy from it) is no obstacle: the swap-out reads the same bytes, and the pair's
            // hold keeps the block from reuse until the pair is drained.
            int64_t need = 0;
            for (int32_t g = 0; g < n; ++g) {
                const Sequence *sg = kvc::group_seq(s, g);
                for (int64_t k = 0; k < p->copies.size(); ++k) {
                    const int32_t dst = p->copies.dst_at(k);
                    if (std::find(sg->table.begin(), sg->table.end(), dst) != sg->table.end())
                        return fail(KVC_ERR_BUSY, "%s: a copy-on-write pair into block %d of sequence %llu is pending; "
                                    "run kvc_copy_pending (or drain the pairs) first", fn, dst, (unsigned long long)seq_id);
                }
                need += swap_out_blocks(p, sg);
            }
            TierSlots &hs = t->host->slots;
            if (need > hs.num_evictable())
                return fail(KVC_ERR_OUT_OF_BLOCKS, "%s: sequence %llu needs %lld host tier slots, %lld are available "
                            "(%d total)", fn, (unsigned long long)seq_id, (long long)need,
                            (long long)hs.num_evictable(), hs.capacity());
            try {
                for (int32_t g = 0; g < n; ++g) kvc::group_seq(s, g)->swap_slots.assign(kvc::group_seq(s, g)->table.size(), -1);
            } catch (...) {  // nothing changed yet: no table says it is swapped
                for (int32_t g = 0; g < n; ++g) kvc::group_seq(s, g)->swap_slots.clear();
                throw;
            }
            // ---- from here on nothing can fail ----
            for (int32_t g = n; g-- > 0;) {
                Sequence *sg = kvc::group_seq(s, g);
                // Deepest block first, as kvc_free: cached blocks re-enter the LRU in eviction order.
                for (size_t i = sg->table.size(); i-- > 0;) {
                    const int32_t b = sg->table[i];
                    if (b < 0 || !swappable(p, b)) continue;  // shared: stays on the device with our reference
                    const int32_t slot = kvc::tier_take_host_slot(pool, t);
                    hs.hold(slot);
                    sg->swap_slots[i] = slot;
                    kvc::tier_push_job(t, kvc::kJobSwapOut, b, slot, -1);
                    sg->table[i] = -1;
                    // Freed now; reuse is ordered after the copy (FIFO jobs, tier_barrier on writes).
                    kvc::pool_release_block(p, b);
                }
                sg->swapped_out = true;
            }
            p->seq_generation.fetch_add(1, std::memory_order_relaxed);
            op = t->next_op++;
        }
        kvc::tier_run_pending(p);
        mark_recorded(t, op);
        if (out_op) *out_op = op;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_swap_in(kvc_pool *pool, uint64_t seq_id, uint64_t *out_op) {
    KVC_GUARD({
        const char *fn = "kvc_swap_in";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        kvc_pool *p = pool;
        Tiers *t = nullptr;
        uint64_t op = 0;
        {
            std::lock_guard<kvc::PoolMutex> lk(p->mu);
            Sequence *s = p->seqs.find(seq_id);
            if (!s) return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no sequence %llu", fn, (unsigned long long)seq_id);
            if (!s->swapped_out)
                return fail(KVC_ERR_STATE, "%s: sequence %llu is not swapped out", fn, (unsigned long long)seq_id);
            t = p->tiers.load(std::memory_order_relaxed);
            const int32_t n = kvc::pool_num_tables(p);
            int64_t need = 0;
            for (int32_t g = 0; g < n; ++g) need += held_blocks(kvc::group_seq(s, g));
            if (need > p->blocks.num_free())
                return fail(KVC_ERR_OUT_OF_BLOCKS, "%s: sequence %llu needs %lld free device blocks, %lld are free", fn,
                            (unsigned long long)seq_id, (long long)need, (long long)p->blocks.num_free());
            // ---- from here on nothing can fail ----
            const int32_t prio = s->keys.priority;
            kvc::pool_spill_before_taking(p, need);  // may spill (never into a held slot)
            for (int32_t g = 0; g < n; ++g) {
                Sequence *sg = kvc::group_seq(s, g);
                for (size_t i = 0; i < sg->table.size(); ++i) {
                    const int32_t slot = sg->swap_slots[i];
                    if (slot < 0) continue;
                    const int32_t b = kvc::pool_take_fresh_block(p, prio);
                    t->host->slots.unhold(slot);
                    kvc::tier_push_job(t, kvc::kJobSwapIn, b, slot, -1);
                    sg->table[i] = b;
                }
                sg->swap_slots.clear();
                sg->swapped_out = false;
            }
            p->counters.blocks_allocated += need;
            op = t->next_op++;
        }
        kvc::tier_run_pending(p);
        mark_recorded(t, op);
        if (out_op) *out_op = op;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_op_query(kvc_pool *pool, uint64_t op, int32_t *out_done) {
    KVC_GUARD({
        const char *fn = "kvc_op_query";
        if (!out_done) return fail(KVC_ERR_NULL_ARG, "%s: out_done is NULL", fn);
        Tiers *t = nullptr;
        if (kvc_status st = check_op(pool, op, fn, &t); st != KVC_OK) return st;
        if (t->recorded_op.load(std::memory_order_acquire) < op) {
            *out_done = 0;  // its call has not finished issuing the copies yet
            return KVC_OK;
        }
        bool done = true;
        if (pool->backend == KVC_BACKEND_CUDA) {
            // The tier stream's latest event covers every op recorded so far (FIFO stream), so this
            // may report an op unfinished a little longer than it is, never the reverse.
            std::lock_guard<std::mutex> lk(t->cuda_mu);
            if (t->last_event_recorded)
                if (kvc_status st = kvc::cuda::event_query(t->last_event, &done); st != KVC_OK) return st;
        }
        *out_done = done ? 1 : 0;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_op_wait(kvc_pool *pool, uint64_t op) {
    KVC_GUARD({
        const char *fn = "kvc_op_wait";
        Tiers *t = nullptr;
        if (kvc_status st = check_op(pool, op, fn, &t); st != KVC_OK) return st;
        while (t->recorded_op.load(std::memory_order_acquire) < op) {
            kvc::tier_run_pending(pool);  // help, then let the issuing call record it
            std::this_thread::yield();
        }
        if (pool->backend != KVC_BACKEND_CUDA) return KVC_OK;
        bool recorded;
        {
            std::lock_guard<std::mutex> lk(t->cuda_mu);
            recorded = t->last_event_recorded;
        }
        return recorded ? kvc::cuda::event_sync(t->last_event) : KVC_OK;
    })
}

KVC_API kvc_status kvc_preempt_recompute(kvc_pool *pool, uint64_t seq_id, int64_t *out_tokens_to_recompute) {
    KVC_GUARD({
        const char *fn = "kvc_preempt_recompute";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        int64_t tokens = 0;
        {
            std::lock_guard<kvc::PoolMutex> lk(pool->mu);
            const Sequence *s = pool->seqs.find(seq_id);
            if (!s) return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no sequence %llu", fn, (unsigned long long)seq_id);
            tokens = s->num_tokens;
        }
        if (kvc_status st = kvc_free(pool, seq_id); st != KVC_OK) return st;
        if (out_tokens_to_recompute) *out_tokens_to_recompute = tokens;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_preemption_cost(kvc_pool *pool, uint64_t seq_id, int64_t *out_swap_bytes,
                                       int64_t *out_recompute_tokens) {
    KVC_GUARD({
        const char *fn = "kvc_preemption_cost";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        std::lock_guard<kvc::PoolMutex> lk(pool->mu);
        const Sequence *s = pool->seqs.find(seq_id);
        if (!s) return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no sequence %llu", fn, (unsigned long long)seq_id);
        int64_t blocks = 0;
        for (int32_t g = 0; g < kvc::pool_num_tables(pool); ++g) {
            const Sequence *sg = kvc::group_seq(s, g);
            blocks += sg->swapped_out ? held_blocks(sg) : swap_out_blocks(pool, sg);
        }
        if (out_swap_bytes) *out_swap_bytes = blocks * pool->layout.block_stride;
        if (out_recompute_tokens) *out_recompute_tokens = s->num_tokens;
        return KVC_OK;
    })
}

}  // extern "C"
