// One forward step of the model over a batch of sequences whose KV cache lives in libkvc pools (one
// pool; for a hybrid model one hybrid pool, or two pools under --hybrid=two-pools: see kv_store.hpp):
// kvc_batch_build once per step and attention group — a pool, or a KV-cache group of the hybrid
// pool (kvc_batch_set_group: one batch per group, the groups' tables differ) — then per layer
// kvc_cache_write for the new tokens' K/V with the slot mapping of the layer's group and
// kvc_launch_attention against that group's batch, with its window. Prefill (many new tokens, possibly after a prefix hit) and decode (one new
// token) sequences may be mixed in one batch. The model itself runs on the host; on libkvc's CUDA
// backend each layer's q/k/v go to device buffers for the two libkvc calls and the attention output
// comes back (the demo shows libkvc's side of a GPU step, not a GPU transformer).
// Under --tp N every libkvc call goes to each tensor-parallel rank of the pool: rank r writes the
// K/V of its KV heads and attends with the query heads of their GQA groups, and the ranks' outputs
// are put side by side by head — what tensor parallelism does before the o_proj all-reduce.
#pragma once

#include <kvc/kvc.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "device_memory.hpp"
#include "kv_store.hpp"
#include "model.hpp"
#include "replicated_batch.hpp"

namespace serve {

struct BatchEntry {
    uint64_t seq_id;
    const int32_t *new_tokens;  // the sequence's newest q_len tokens (already confirmed in the pool)
    int64_t q_len;
    int64_t first_pos;          // position of new_tokens[0] in the sequence
    int64_t logit_rows = 1;     // logits wanted for the newest logit_rows tokens (1: the next token
                                // only; a speculative verify step wants one per draft + the bonus)
};

class PagedForward {
public:
    // Scratch buffers are sized once for max_seqs sequences, max_tokens new tokens and max_logit_rows
    // logit rows per step; backend is the pools' (KVC_BACKEND_CPU: libkvc reads the host buffers
    // directly). Each layer attends with its group's window (0 = full attention).
    PagedForward(const Model &m, const KvStore &store, int32_t backend, int32_t max_seqs, int64_t max_tokens,
                 int64_t max_logit_rows, int32_t max_blocks_per_seq);
    ~PagedForward();
    PagedForward(const PagedForward &) = delete;
    PagedForward &operator=(const PagedForward &) = delete;

    // Runs the step; writes the logits of each entry's newest logit_rows tokens, entry after entry
    // (oldest token first within an entry), to consecutive rows of logits[row * vocab ...].
    void run(const std::vector<BatchEntry> &entries, float *logits);

private:
    // Per attention group (a pool; under --hybrid a KV-cache group of the one hybrid pool): its
    // ranks' batches (built once per step) and attention parameters (one rank's).
    struct Group {
        ReplicatedPool *pool = nullptr;
        std::unique_ptr<ReplicatedBatch> batch;
        kvc_attention_params params;
    };
    const Model &m_;
    std::vector<Group> groups_;
    // Per model layer: its group above and the layer index libkvc takes (the pool's layer; the model
    // layer in a hybrid pool, which maps it to its KV-cache group itself).
    std::vector<LayerPlacement> placement_;
    int64_t max_tokens_, max_logit_rows_;
    std::vector<uint64_t> ids_;
    std::vector<int64_t> q_lens_, pos_;
    std::vector<float> x_, h_, q_, k_, v_, attn_, scratch_, last_;
    std::vector<float> q_shard_, k_shard_, v_shard_, attn_shard_;  // one rank's heads (--tp only)
    bool on_device_ = false;
    DeviceBuffer dq_, dk_, dv_, dattn_;  // CUDA backend only

    void attention(int32_t layer, int64_t T);

    // Rank r's columns of rows x width activations (its heads' share of each row): the matrix itself
    // with one rank, else copied into `shard`.
    const float *shard(const std::vector<float> &all, int64_t rows, int64_t width, int32_t r, int32_t ranks,
                       std::vector<float> *shard) const;
};

}  // namespace serve
