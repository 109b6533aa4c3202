// The continuous-batching engine: admits requests into a libkvc pool, or two under --hybrid (see
// kv_store.hpp; prefix hits skip prefill),
// runs mixed prefill/decode batches through PagedForward, forks parallel samples, preempts by
// recompute when the pool runs out, and checks every generated token's logits against the dense
// reference when the sample finishes.
#pragma once

#include <kvc/kvc.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kv_store.hpp"
#include "model.hpp"
#include "swap_tier.hpp"
#include "timeline.hpp"
#include "workload.hpp"

namespace serve {

struct EngineConfig {
    int32_t block_size = 16;
    int64_t num_blocks = 128;
    int64_t window_blocks = 0;         // --hybrid: blocks of pool L (0 = num_blocks)
    int32_t kv_dtype = KVC_DTYPE_F32;
    int32_t backend = KVC_BACKEND_CPU;  // the pool's; CUDA moves activations through device buffers
    int32_t max_seqs = 16;             // sequences per batch
    int64_t max_batched_tokens = 512;  // new tokens per batch (a lone long prefill may exceed it)
    int64_t max_seq_len = 1024;
    int32_t check_every = 1;           // check every K-th finished sample against the reference
    double tolerance = 2e-3;           // max |logit difference| allowed
    float temperature = 0.8f;          // 0 = greedy (argmax)
    uint64_t seed = 1;
    int64_t host_blocks = 128;         // swap tier size when libkvc has one; 0 = recompute only
    int32_t speculate = 0;             // max n-gram draft tokens per decoding sample and step; 0 = off
    int32_t window = 0;                // sliding-window attention (tokens) in every layer, and the
                                       // pool releases the blocks before it; 0 = full attention
    bool hybrid = false;               // the window only in the even layers, the odd ones full
                                       // attention; needs window > 0: one hybrid pool (a SLIDING and
                                       // a FULL group), or with two_pools pool L and pool G
    bool two_pools = false;
    // Self-test: at this engine step (or the first later one with a running sequence) negate every
    // K/V element of one block of a running sequence, behind libkvc's back. The reference check must
    // then fail the run. -1 = off.
    int64_t corrupt_kv_at_step = -1;
    int32_t corrupt_kv_group = 0;      // which pool's block: 0 (the only pool, or L), 1 = G; in one
                                       // hybrid pool the group: 0 = SLIDING, 1 = FULL
    int32_t tp = 1;                    // tensor-parallel ranks: every pool's KV heads sharded over tp
                                       // pools given the same calls, their decisions compared
    // Self-test of that comparison: from this step on (once it can), the last rank alone allocates
    // one extra block; the run must then fail with a LockstepError. -1 = off.
    int64_t tp_skew_at_step = -1;
    DiskTierConfig disk;               // a disk tier below each pool's host tier (blocks 0 = none)
    // A server restart at this engine step (-1 = none): whatever runs or is swapped out is freed
    // and recomputed later, the pools are destroyed and created again, the disk tier re-attached to
    // the same files (KVC_DISK_PERSISTENT per disk.persistent: warm, else cold). With
    // reset_before_restart the prefix cache is reset first (kvc_prefix_cache_reset), as after a
    // weight update.
    int64_t restart_at_step = -1;
    bool reset_before_restart = false;
    bool flush_before_restart = false;  // push every cached block down to disk first (KvStore)
};

// One pool's figures (a single pool, or L and G under --hybrid).
struct PoolReport {
    std::string name;
    int32_t window = 0;
    std::vector<int32_t> layers;          // the model layers it stores
    int64_t num_blocks = 0, bytes_per_block = 0;
    int64_t peak_used_blocks = 0, used_block_steps = 0;  // per step; the sum gives the mean
    double hit_rate = 0;                  // the pool's prefix hit counter (tokens)
    int64_t own_hit_tokens = 0;           // --hybrid: prompt tokens this pool alone would have hit at
                                          // first admission (the admission uses the common hit)
    int64_t evictions = 0;
};

struct EngineReport {
    int64_t steps = 0;
    int64_t requests_done = 0, samples_done = 0;
    int64_t generated_tokens = 0;
    int64_t prefill_tokens = 0;          // prompt tokens computed at first admission
    int64_t prompt_tokens = 0, hit_tokens = 0;  // at first admission
    double pool_hit_rate = 0;            // pool counter (includes re-admissions after preemption)
    int64_t recompute_preemptions = 0, recomputed_tokens = 0;
    int64_t swap_preemptions = 0;
    bool swap_available = false;
    std::string swap_unavailable;        // why swap preemption is not used, when it is not
    int64_t bytes_to_host = 0, bytes_to_device = 0;  // host tier traffic (swaps and prefix spills)
    int64_t host_prefix_hits = 0;        // prefix blocks restored from the host tier
    int64_t cow_copies = 0, forks = 0, evictions = 0;
    double peak_utilization = 0, mean_utilization = 0;
    int64_t peak_used_blocks = 0;
    double engine_seconds = 0;           // scheduling + forward passes
    double check_seconds = 0;            // dense reference recomputation
    int64_t checked_tokens = 0, checked_samples = 0;
    double max_abs_diff = 0;
    int64_t batch_tokens_sum = 0, batch_seqs_sum = 0;
    int64_t kv_bytes = 0, bytes_per_block = 0;  // over all pools
    // Speculative decoding (--speculate). A decode step of one sample is a "verify step" when it
    // carried at least one draft.
    int32_t speculate = 0;
    int64_t decode_steps = 0, verify_steps = 0;
    int64_t verify_generated = 0;        // tokens the verify steps generated (accepted drafts + bonus)
    int64_t drafted_tokens = 0, accepted_tokens = 0;
    int64_t full_accepts = 0;            // verify steps that kept every draft (nothing to truncate)
    int64_t draft_cutbacks = 0;          // verify steps whose drafts were cut because the pool was full
    int64_t truncates = 0, truncate_freed_blocks = 0;
    uint64_t output_digest = 0;          // order-independent hash of every sample's generated tokens
    // Sliding window (--window). Per step: the pool's used blocks, and the distinct blocks the
    // running sequences' tables span — every block of their tokens, identical token prefixes counted
    // once (what they would hold without the window, with perfect prefix sharing).
    int32_t window = 0;
    int64_t peak_span_blocks = 0;
    int64_t used_block_steps = 0, span_block_steps = 0;  // sums over steps, for the means
    // Hybrid (--hybrid): each pool's figures, the blocks of pool L a running sequence holds once it
    // has appended twice since its (re)alloc (peak, and sum / samples for the mean over steps and
    // sequences), and admissions undone because one pool ran short after the other took the prompt
    // (kv_store.hpp's can_alloc makes that rare).
    bool hybrid = false;
    bool one_pool = false;               // --hybrid: one hybrid pool (pools[0]); else two (L, G)
    int32_t hybrid_window_group = 0;     // one pool: the SLIDING group (its table is the window's)
    std::vector<PoolReport> pools;
    int64_t window_held_peak = 0, window_held_sum = 0, window_held_samples = 0;
    int64_t alloc_rollbacks = 0;
    int64_t partial_swap_outs = 0, dropped_swap_ins = 0;  // see KvStore
    // Tensor parallelism (--tp): ranks, libkvc calls fanned out to every rank (each compared), and
    // one rank's KV storage (kv_bytes is all ranks').
    int32_t tp = 1;
    int64_t fanned_calls = 0;
    int64_t rank_kv_bytes = 0;
    // Tiers over the whole run (every pool, every incarnation of it), and the disk tier's files.
    TierFigures host, disk;
    bool disk_attached = false;
    int64_t recovered_at_start = 0;      // disk blocks a persistent attach found at startup
    int64_t foreign_at_start = 0;        // and those it left, written under another identity
    int64_t short_hits = 0;              // see KvStore::short_hits
    // Prefill work: every token a prefill computed (first admissions and re-admissions), and what
    // the admissions hit in the prefix cache, over the whole run.
    int64_t prefill_computed = 0;
    // The restart (--restart-at): samples drained, what the old pools lost and the new ones found,
    // and the prefill work from the restart on.
    bool restarted = false;
    int64_t restart_step = -1;
    bool restart_reset = false, restart_flush = false;
    int64_t drained_running = 0, drained_swapped = 0, drained_tokens = 0;
    RestartFigures restart;
    int64_t after_admitted_tokens = 0;   // tokens of every sequence allocated after the restart
    int64_t after_hit_tokens = 0;        // of those, prefix hits (any tier)
    int64_t after_prefill_computed = 0;  // of those, computed
    int64_t after_disk_hits = 0;         // prefix blocks found on disk after the restart
    int64_t drained_readmitted_tokens = 0, drained_hit_tokens = 0;  // the drained samples' re-admission
    Timeline timeline;
};

// Raised when a generated token's logits disagree with the reference beyond the tolerance.
struct CorrectnessError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// progress(done_requests, total_requests, report_so_far) is called once per step.
EngineReport run_engine(const Model &model, const Workload &work, const EngineConfig &cfg,
                        const std::function<void(int64_t, int64_t, const EngineReport &)> &progress);

}  // namespace serve
