// Growing a sequence (seq_ops.hpp): append_general = plan_append → commit_append, the general case
// append_seq calls when the in-place decode step does not apply.
#include <algorithm>

#include "core/seq_ops.hpp"

namespace kvc {

namespace seq_append_detail {
// Geometric growth so that decode, which grows a sequence a little each step, reallocates rarely.
template <class V>
void reserve_geometric(V &v, int64_t n) {
    if (int64_t(v.capacity()) < n) v.reserve(size_t(std::max<int64_t>(n, 2 * int64_t(v.capacity()))));
}

// An existing block that receives writes is copied first when shared (refcount > 1, e.g. after a
// fork) or pinned (a cut by kvc_truncate into a pinned prefix block): a pinned block's content must
// stay.
inline bool must_copy(const kvc_pool *p, int32_t b) { return p->blocks.refcount(b) > 1 || p->blocks.pins(b) > 0; }

// What an append that is not the in-place case does (plan_append), applied by commit_append.
struct AppendPlan {
    int64_t new_tokens = 0;     // confirmed tokens after the call
    int64_t new_end = 0;        // reserved end after the call (confirmed + lookahead, never shrinks)
    int64_t new_blocks = 0;     // table length after the call
    int64_t first_written = 0;  // existing blocks [first_written, last_written) receive writes
    int64_t last_written = 0;
    int64_t cows = 0;         // of those, shared or pinned ones copied first
    int64_t fresh = 0;        // blocks taken: cows + table growth
    int64_t window_free = 0;  // blocks the window releases that become free
};
}  // namespace seq_append_detail

using seq_append_detail::AppendPlan;

__attribute__((cold, noinline)) kvc_status append_args_refusal(const kvc_pool *p, const int32_t *tokens,
                                                               int64_t num_tokens, int64_t num_lookahead,
                                                               const char *fn) {
    if (num_tokens < 0)
        return fail(KVC_ERR_INVALID_ARG, "%s: num_tokens must be >= 0, got %lld", fn, (long long)num_tokens);
    if (num_lookahead < 0)
        return fail(KVC_ERR_INVALID_ARG, "%s: num_lookahead must be >= 0, got %lld", fn, (long long)num_lookahead);
    if (num_tokens == 0 && num_lookahead == 0)
        return fail(KVC_ERR_INVALID_ARG, "%s: num_tokens and num_lookahead are both 0", fn);
    if (!tokens && num_tokens > 0 && p->caching)
        return fail(KVC_ERR_NULL_ARG, "%s: tokens is NULL while prefix caching is on", fn);
    return KVC_OK;
}

// Plans appending num_tokens confirmed tokens and num_lookahead reserved slots to s (found, not
// swapped out). Reserves the table's room (may throw std::bad_alloc), so that commit_append cannot fail.
// check_free false: the caller compares the free blocks with several plans' needs together (a
// hybrid pool's groups).
__attribute__((always_inline)) inline kvc_status plan_append(const kvc_pool *p, Sequence *s, uint64_t seq_id,
                                                             int64_t num_tokens, int64_t num_lookahead,
                                                             AppendPlan *plan, const char *fn, bool check_free = true) {
    const int32_t bs = p->block_size;
    int64_t new_tokens, want_end;
    if (add_overflows(s->num_tokens, num_tokens, &new_tokens) || add_overflows(new_tokens, num_lookahead, &want_end))
        return fail(KVC_ERR_OVERFLOW, "%s: sequence %llu length %lld + %lld + %lld lookahead overflows", fn,
                    (unsigned long long)seq_id, (long long)s->num_tokens, (long long)num_tokens,
                    (long long)num_lookahead);
    const int64_t max = p->config.max_seq_len;
    if (max > 0 && want_end > max)
        return fail(KVC_ERR_MAX_LEN,
                    "%s: sequence %llu would reach %lld tokens (%lld confirmed + %lld lookahead), "
                    "max_seq_len is %lld",
                    fn, (unsigned long long)seq_id, (long long)want_end, (long long)new_tokens,
                    (long long)num_lookahead, (long long)max);
    const int64_t new_end = std::max(s->reserved_end, want_end);
    const int64_t old_nb = int64_t(s->table.size());
    // Most decode steps stay inside the reserved blocks: skip the division then.
    const int64_t new_nb = new_end <= old_nb * bs ? old_nb : pool_blocks_for(p, new_end);
    // Sliding window: the blocks no query from the previous call's first token on can see go
    // first, and count as free. Behind one test: the decode step of a pool without a window stays
    // as it was (measured: keeping the window's values live through this function cost ~10%).
    int64_t window_free = 0, held = new_nb;
    if (__builtin_expect(s->window > 0, 0)) held -= pool_window_plan(p, s, &window_free);
    if (held > p->num_blocks)
        return fail(KVC_ERR_OUT_OF_BLOCKS, "%s: sequence %llu would need %lld blocks, the pool has only %d", fn,
                    (unsigned long long)seq_id, (long long)held, p->num_blocks);
    // Existing blocks that receive writes: those overlapping [num_tokens, want_end).
    const int64_t first_written = pool_block_of(p, s->num_tokens);
    const int64_t last_written = std::min(old_nb, pool_blocks_for(p, want_end));  // exclusive
    int64_t cows = 0;
    if (s->may_share_tail)
        for (int64_t i = first_written; i < last_written; ++i)
            if (seq_append_detail::must_copy(p, s->table[size_t(i)])) ++cows;
    const int64_t fresh = cows + (new_nb - old_nb);
    if (check_free && fresh > p->blocks.num_free() + window_free)
        return fail(KVC_ERR_OUT_OF_BLOCKS,
                    "%s: sequence %llu needs %lld new blocks (%lld copy-on-write), "
                    "only %lld are free",
                    fn, (unsigned long long)seq_id, (long long)fresh, (long long)cows,
                    (long long)(p->blocks.num_free() + window_free));
    // The table's room is part of the plan, so that commit_append cannot fail: the one allocation,
    // and it changes nothing the pool's state shows.
    seq_append_detail::reserve_geometric(s->table, new_nb);
    *plan = AppendPlan{new_tokens, new_end, new_nb, first_written, last_written, cows, fresh, window_free};
    return KVC_OK;
}

// Applies a plan. Cannot fail. window_done: the window's release already ran (a hybrid append
// releases every group's blocks before any group takes fresh ones).
__attribute__((always_inline)) inline void commit_append(kvc_pool *p, Sequence *s, const int32_t *tokens,
                                                         int64_t num_tokens, const AppendPlan &plan,
                                                         int32_t *out_new_blocks, bool window_done = false) {
    if (__builtin_expect(s->window > 0, 0) && !window_done) pool_window_release(p, s);
    if (plan.fresh > 0) {
        pool_spill_before_taking(p, plan.fresh);
        const int32_t prio = s->priority;
        for (int64_t i = plan.first_written; i < plan.last_written && plan.cows; ++i) {
            const int32_t src = s->table[size_t(i)];
            if (!seq_append_detail::must_copy(p, src)) continue;
            const int32_t dst = pool_take_fresh_block(p, prio);
            pool_release_block(p, src);  // shared or pinned: never becomes free here
            // src keeps its bytes until the copy has read them, even if every other holder lets
            // it go first (a tier restore would otherwise overwrite them at once).
            p->blocks.hold(src);
            p->copies.push(src, dst);
            s->table[size_t(i)] = dst;
            ++p->counters.cow_copies;
        }
        for (int64_t i = int64_t(s->table.size()); i < plan.new_blocks; ++i)
            s->table.push_back(pool_take_fresh_block(p, prio));
    }
    // A block this sequence alone holds, unpinned, but still in the prefix cache (kvc_truncate cut
    // into it) leaves the cache before it is written: a cached block never changes.
    if (s->may_share_tail)
        for (int64_t i = plan.first_written; i < plan.last_written; ++i) {
            const int32_t b = s->table[size_t(i)];
            if (p->blocks.cached(b)) pool_uncache_block(p, b);
        }
    s->num_tokens = plan.new_tokens;
    s->reserved_end = plan.new_end;
    if (p->caching && num_tokens > 0 && !s->hash_stopped) pool_hash_full_blocks(p, s, tokens, num_tokens);
    ++p->counters.appends;
    p->counters.blocks_allocated += plan.fresh;
    if (out_new_blocks) *out_new_blocks = int32_t(plan.fresh);
}

// One function for append_seq's general case, plan and commit inlined into it: the inlined
// in-place path in the C layer stays small (bench_core's AppendBlock was 18 % slower with the plan
// inlined into kvc_append and the commit called).
kvc_status append_general(kvc_pool *p, Sequence *s, uint64_t seq_id, const int32_t *tokens, int64_t num_tokens,
                          int64_t num_lookahead, int32_t *out_new_blocks, const char *fn) {
    if (__builtin_expect(p->hybrid, 0))
        return hybrid_append(p, s, seq_id, tokens, num_tokens, num_lookahead, out_new_blocks, fn);
    AppendPlan plan;
    const kvc_status st = plan_append(p, s, seq_id, num_tokens, num_lookahead, &plan, fn);
    if (st != KVC_OK) return st;
    commit_append(p, s, tokens, num_tokens, plan, out_new_blocks);
    return KVC_OK;
}

// (seq_ops.hpp)
__attribute__((noinline)) bool take_next_block(kvc_pool *p, Sequence *s) {
    if (p->blocks.num_free() < 1 || s->table.size() == s->table.capacity()) return false;
    pool_spill_before_taking(p, 1);
    s->table.push_back(pool_take_fresh_block(p, s->priority));
    ++p->counters.blocks_allocated;
    return true;
}

namespace {
// append_step_in_place's loop, specialised on what is the same for every entry of a call: whether
// prefix caching keeps token tails (kCaching) and whether the caller wants each entry's new-block
// count (kReport). Per entry, append_in_place's tests and effect; the block size and the length
// cap are read once and the append counter is added once.
template <bool kCaching, bool kReport>
int32_t step_loop(kvc_pool *p, Sequence *const *seqs, int32_t from, int32_t n, const int32_t *tokens,
                  int32_t *out_new_blocks) {
    const int64_t bs = p->block_size;
    const int64_t max_end = p->config.max_seq_len > 0 ? p->config.max_seq_len : INT64_MAX;
    int32_t i = from;
    for (; i < n; ++i) {
        Sequence *s = seqs[i];
        // append_in_place's tests (and append_seq's swapped-out refusal, left to the general path;
        // so is a sequence whose hashing stopped, rare: its append skips the tail).
        if (__builtin_expect(!s, 0) || s->not_plain_step()) break;
        const int64_t end = s->num_tokens + 1;
        if (end > max_end) break;
        if (kCaching) {
            // The usual token: neither the first of a block nor the last. With hashing going on
            // (not_plain_step() said so), the tail holds the ids past the last full block:
            // tail.size() == num_tokens - num_hashed x bs < bs, num_hashed == num_tokens / bs
            // (kvc_pool_check asks both). So t = tail.size() in [1, bs - 2] means the token lands
            // in the table's last block (not the first position of a new one: end <= room) and
            // completes no block: one test for the two below, and the id goes to the tail
            // without the capacity test. bench_trace's batch replay: ~10 instructions fewer per
            // token of ~37 (callgrind; tests/bench/RESULTS.md, session 25).
            TokenTail &tail = s->tail;
            const uint64_t t = tail.size();
            if (__builtin_expect(t - 1 < uint64_t(bs - 2), 1)) {
                s->num_tokens = end;
                if (end > s->reserved_end) s->reserved_end = end;
                tail.data()[t] = tokens[i];
                tail.resize(t + 1);
                if (kReport) out_new_blocks[i] = 0;
                continue;
            }
        }
        const int64_t room = int64_t(s->table.size()) * bs;
        int32_t fresh = 0;
        if (end > room) {
            if (end != room + 1 || !take_next_block(p, s)) break;
            fresh = 1;
        }
        s->num_tokens = end;
        if (end > s->reserved_end) s->reserved_end = end;
        if (kCaching) {
            // pool_hash_full_blocks for one id (bs read once, not after each out-of-line call).
            TokenTail &tail = s->tail;
            if (int64_t(tail.size()) + 1 < bs)
                tail.push_back(tokens[i]);
            else
                pool_add_tokens(p, s, tokens + i, 1);
        }
        if (kReport) out_new_blocks[i] = fresh;
    }
    p->counters.appends += i - from;
    return i;
}
}  // namespace

// The decode step's loop (kvc_append_batch): about a third fewer instructions per entry than
// append_seq called in a loop (tests/bench/RESULTS.md, sessions 18 and 20).
int32_t append_step_in_place(kvc_pool *p, Sequence *const *seqs, int32_t from, int32_t n, const int32_t *tokens,
                             int32_t *out_new_blocks) {
    if (p->caching)
        return out_new_blocks ? step_loop<true, true>(p, seqs, from, n, tokens, out_new_blocks)
                              : step_loop<true, false>(p, seqs, from, n, tokens, nullptr);
    return out_new_blocks ? step_loop<false, true>(p, seqs, from, n, tokens, out_new_blocks)
                          : step_loop<false, false>(p, seqs, from, n, tokens, nullptr);
}

// Every group's plan first, then one check of all their fresh blocks against the free ones plus
// everything the groups' windows release; then every group's window releases, then every group's
// takes: the blocks a later group's window gives back are free before an earlier group needs them.
// A refused plan changed nothing visible (the plans only reserved table room).
kvc_status hybrid_append(kvc_pool *p, Sequence *s, uint64_t seq_id, const int32_t *tokens, int64_t num_tokens,
                         int64_t num_lookahead, int32_t *out_new_blocks, const char *fn) {
    const int32_t n = int32_t(p->groups.size());
    AppendPlan plans[KVC_MAX_GROUPS];
    int64_t fresh = 0, window_free = 0;
    for (int32_t g = 0; g < n; ++g) {
        const kvc_status st = plan_append(p, group_seq(s, g), seq_id, num_tokens, num_lookahead, &plans[g], fn, false);
        if (st != KVC_OK) return st;
        fresh += plans[g].fresh;
        window_free += plans[g].window_free;
    }
    if (fresh > p->blocks.num_free() + window_free)
        return fail(KVC_ERR_OUT_OF_BLOCKS,
                    "%s: sequence %llu needs %lld new blocks over the pool's %d groups, only %lld are free "
                    "(%lld of them released by the groups' windows)",
                    fn, (unsigned long long)seq_id, (long long)fresh, n,
                    (long long)(p->blocks.num_free() + window_free), (long long)window_free);
    for (int32_t g = 0; g < n; ++g)
        if (group_seq(s, g)->window > 0) pool_window_release(p, group_seq(s, g));
    for (int32_t g = 0; g < n; ++g) commit_append(p, group_seq(s, g), tokens, num_tokens, plans[g], nullptr, true);
    p->counters.appends -= n - 1;  // one append of the sequence, not one per group
    if (out_new_blocks) *out_new_blocks = int32_t(fresh);
    return KVC_OK;
}

}  // namespace kvc
