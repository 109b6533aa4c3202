// The sequence operations of the host core: what kvc_alloc, kvc_admit, kvc_can_alloc, kvc_append(_batch),
// kvc_fork, kvc_truncate, kvc_free and kvc_abort do once their arguments are checked and the pool
// lock is held. The C layer (lib/capi/seq.cpp) only validates, locks, calls one of these and runs the
// tier jobs they queued. Each operation that can be refused is split the way llama.cpp's KV cache
// names prepare / find slot / apply:
//   plan_*    reads the pool and decides (which blocks hit, how many are fresh, what is copied);
//   check_*   turns a plan into the refusal, if any (status + message, nothing changed);
//   commit_*  applies a plan that passed: may fail only before its first change (host memory for
//             the table), never after — that is what makes each C call all-or-nothing.
// Everything here runs under kvc_pool::mu and never does I/O or waits on a GPU: spills and restores
// are queued for tier_run_pending, copy-on-write pairs for kvc_copy_pending.
#pragma once

#include <cstdint>

#include "core/pool.hpp"
#include "error.hpp"

namespace kvc {

// ---- admission and allocation of a prompt (seq_alloc.cpp) --------------------------------------

struct AllocPlan {
    int64_t blocks = 0;    // table length
    int64_t held = 0;      // table entries the sequence holds (all but a windowed hit's leading ones)
    int64_t fresh = 0;     // blocks to take from the free queues
    int64_t free_now = 0;  // free blocks once refcount-0 hits are taken out
    PrefixWalk walk;       // the prompt's hit; its held blocks are walk.block(0 .. walk.held() - 1)
};

// The plan for a prompt: its prefix hit (looking as far as `lower` when a block is not on the
// device) and the blocks it needs. No side effects; may throw std::bad_alloc (a windowed search's
// key buffer grows) before anything changed.
AllocPlan plan_alloc(kvc_pool *p, const int32_t *tokens, int64_t num_tokens, const KeySet &keys, WalkTiers lower);
// The plan for a prompt whose hit is already known.
AllocPlan plan_alloc_from_walk(const kvc_pool *p, int64_t num_tokens, const PrefixWalk &walk);
// kvc_alloc's refusals for a plan that depend on the pool's state: the id in use, too few blocks.
kvc_status check_alloc(kvc_pool *p, uint64_t seq_id, int64_t num_tokens, const AllocPlan &plan);
// The watermark verdict (KVC_ALLOC_OK / LATER / NEVER) of kvc_can_alloc and kvc_admit for a plan.
int32_t alloc_verdict(const kvc_pool *p, const AllocPlan &plan);
// The same verdict from a plan's totals (a hybrid pool's plans summed over its groups).
int32_t alloc_verdict_of(const kvc_pool *p, int64_t held, int64_t fresh, int64_t free_now);
// Creates sequence seq_id from a plan that passed check_alloc: holds the device hits, queues the
// restores of lower-tier hits and the spills of the cached blocks the fresh ones evict, hashes the
// prompt's full blocks past the hit into the cache. *out_cached_tokens (optional): the hit's tokens.
// May throw std::bad_alloc only before its first change.
kvc_status commit_alloc(kvc_pool *p, uint64_t seq_id, const int32_t *tokens, int64_t num_tokens, const KeySet &keys,
                        const AllocPlan &plan, int64_t *out_cached_tokens);

// commit_alloc's two halves, for callers that commit several tables together (a hybrid pool's
// groups): _hold takes the plan's hits into s (created, room reserved), _fill the restores, fresh
// blocks and hashing, after the spills for every table's fresh blocks were planned. Cannot fail.
void commit_alloc_hold(kvc_pool *p, Sequence *s, const KeySet &ks, const AllocPlan &plan);
void commit_alloc_fill(kvc_pool *p, Sequence *s, const int32_t *tokens, int64_t num_tokens, const AllocPlan &plan,
                       bool count_prompt);

// ---- hybrid pools (core/hybrid_alloc.cpp): the same operations over every group of a sequence ----

// A prompt's plan in every group: plans[g] for g < num_groups, their hits all of the same length
// (the longest every group can resume from), and the totals the checks read.
struct HybridPlan {
    AllocPlan g[KVC_MAX_GROUPS];
    int64_t held = 0, fresh = 0, free_now = 0, hit_blocks = 0;
};
// Gives a just-created sequence its group tables (created once per recycled Sequence object, reset
// each time): same id, the group's window and keys tag. May throw std::bad_alloc; the caller drops
// the sequence then.
void hybrid_prepare_seq(kvc_pool *p, Sequence *s);
// May throw std::bad_alloc before anything changed.
void hybrid_plan_alloc(kvc_pool *p, const int32_t *tokens, int64_t num_tokens, const KeySet &keys, WalkTiers lower,
                       HybridPlan *out);
kvc_status hybrid_check_alloc(kvc_pool *p, uint64_t seq_id, int64_t num_tokens, const HybridPlan &plan);
int32_t hybrid_alloc_verdict(const kvc_pool *p, const HybridPlan &plan);
// kvc_prefix_pin (unpin false) / kvc_prefix_unpin (true) on a hybrid pool: pins (unpins) in every
// group what a hit at the end of the prefix's first full_blocks blocks needs there, at the longest
// length all groups can give (unpin: among pinned blocks). Returns that length in blocks. May throw
// std::bad_alloc (the keys' copies, a windowed search's buffer) before anything changed.
int64_t hybrid_prefix_pin(kvc_pool *p, const int32_t *tokens, int64_t full_blocks, const KeySet &keys, bool unpin);
kvc_status hybrid_commit_alloc(kvc_pool *p, uint64_t seq_id, const int32_t *tokens, int64_t num_tokens,
                               const KeySet &keys, const HybridPlan &plan, int64_t *out_cached_tokens);

// ---- growing a sequence (seq_append.cpp) --------------------------------------------------------

// append's argument rules, tested inline on the hot paths; append_args_refusal words a refusal.
inline bool append_args_ok(const kvc_pool *p, const int32_t *tokens, int64_t num_tokens, int64_t num_lookahead) {
    return num_tokens >= 0 && num_lookahead >= 0 && (num_tokens > 0 || num_lookahead > 0) &&
           (tokens || num_tokens == 0 || !p->caching);
}
kvc_status append_args_refusal(const kvc_pool *p, const int32_t *tokens, int64_t num_tokens, int64_t num_lookahead,
                               const char *fn);

// append_seq's general case: plan_append (the refusal — overflow, max_seq_len, out of blocks,
// nothing changed — or what changes; it reserves the table's room) then commit_append (window
// releases, copy-on-write pairs, fresh blocks, hashing of completed blocks; cannot fail), both in
// seq_append.cpp, inlined into this one function.
kvc_status append_general(kvc_pool *p, Sequence *s, uint64_t seq_id, const int32_t *tokens, int64_t num_tokens,
                          int64_t num_lookahead, int32_t *out_new_blocks, const char *fn);

// The decode step's usual case: one confirmed token that lands in a block s already has, alone
// (no copy-on-write to consider), without a window. It takes no block and changes nothing but the
// length and the unhashed tail, so the plan is skipped; the effect is commit_append's. Inline: the
// hottest path of the host core. False: not that case, nothing done. (Taking the next block here
// too, as the batch loop does, made bench_core's DecodeStep256 3-7 % slower with fewer
// instructions, measured: kvc_append leaves it to the general path.)
__attribute__((always_inline)) inline bool append_in_place(kvc_pool *p, Sequence *s, const int32_t *tokens,
                                                           int64_t num_tokens, int64_t num_lookahead,
                                                           int32_t *out_new_blocks) {
    if (num_tokens != 1 || num_lookahead != 0 || s->may_share_tail || s->window > 0) return false;
    const int64_t end = s->num_tokens + 1;  // < INT64_MAX: a sequence holds far fewer tokens
    const int64_t max = p->config.max_seq_len;
    if (end > int64_t(s->table.size()) * p->block_size || (max > 0 && end > max)) return false;
    s->num_tokens = end;
    if (end > s->reserved_end) s->reserved_end = end;
    if (p->caching && !s->hash_stopped) pool_hash_full_blocks(p, s, tokens, 1);
    ++p->counters.appends;
    if (out_new_blocks) *out_new_blocks = 0;
    return true;
}

// What append_in_place touches of a sequence, asked for ahead of time (kvc_append_batch): its
// first line and its token tail's slot for the next id. s may be NULL (an unknown id): a prefetch
// never faults, and the address is computed as an integer (an offset from a null pointer would be
// undefined), so the batch's lookup loop needs no test before it.
inline void prefetch_for_append(const Sequence *s) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(s);
    __builtin_prefetch(reinterpret_cast<const void *>(a));
    __builtin_prefetch(reinterpret_cast<const void *>(a + 64));
}

// The decode step's other usual case, for append_step_in_place: s (alone, no window) has its
// blocks full and the token starts the next one. Takes that block as commit_append would (nothing
// to copy, nothing to release) when no host memory is needed; false: left to the general path (no
// free block: its refusal; a full table: its allocation). Out of line (seq_append.cpp): once per
// block_size steps.
bool take_next_block(kvc_pool *p, Sequence *s);

// kvc_append_batch's decode step (one token per entry, no lookahead): appends token tokens[i]
// (tokens may be NULL when prefix caching is off) to seqs[i] for i = from, from + 1, ... while
// entry i is one of the decode step's two usual cases -- the in-place append, or one fresh block
// for a sequence alone, without a window, whose blocks are full -- and returns the first i that
// is not (n when all were); out_new_blocks[i] (optional) = the blocks entry i took (0 or 1).
// seqs[i] NULL (unknown id) stops it. Each entry has exactly append_seq's effect; the loop of a
// server's decode step (seq_append.cpp).
int32_t append_step_in_place(kvc_pool *p, Sequence *const *seqs, int32_t from, int32_t n, const int32_t *tokens,
                             int32_t *out_new_blocks);

// append_seq for a hybrid pool: every group's table grows together, all or nothing
// (seq_append.cpp). Reached through append_general: a hybrid pool's sequences have may_share_tail
// set, so the in-place path never takes them and the decode step of a plain pool tests nothing more.
kvc_status hybrid_append(kvc_pool *p, Sequence *s, uint64_t seq_id, const int32_t *tokens, int64_t num_tokens,
                         int64_t num_lookahead, int32_t *out_new_blocks, const char *fn);

// One append on sequence seq_id with checked arguments: the in-place case inline, else
// append_general (plan then commit). Shared by kvc_append and kvc_append_batch.
__attribute__((always_inline)) inline kvc_status append_seq(kvc_pool *p, uint64_t seq_id, const int32_t *tokens,
                                                            int64_t num_tokens, int64_t num_lookahead,
                                                            int32_t *out_new_blocks, const char *fn) {
    Sequence *s = p->seqs.find(seq_id);
    if (!s) return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no sequence %llu", fn, (unsigned long long)seq_id);
    if (s->swapped_out) return fail(KVC_ERR_STATE, "%s: sequence %llu is swapped out", fn, (unsigned long long)seq_id);
    if (append_in_place(p, s, tokens, num_tokens, num_lookahead, out_new_blocks)) return KVC_OK;
    return append_general(p, s, seq_id, tokens, num_tokens, num_lookahead, out_new_blocks, fn);
}

// ---- sharing, shrinking, ending (seq_lifecycle.cpp) ---------------------------------------------

// kvc_fork: child_id shares every block of parent_id (copy-on-write on the next write).
kvc_status fork_seq(kvc_pool *p, uint64_t parent_id, uint64_t child_id, const char *fn);
// kvc_truncate: keeps the first num_tokens confirmed tokens, releases the blocks past them.
kvc_status truncate_seq(kvc_pool *p, uint64_t seq_id, int64_t num_tokens, int32_t *out_freed_blocks, const char *fn);
// kvc_free (abort false) and kvc_abort (abort true: the blocks this sequence filled itself leave
// the cache, their KV may never have been written).
kvc_status free_seq(kvc_pool *p, uint64_t seq_id, bool abort, const char *fn);

}  // namespace kvc
