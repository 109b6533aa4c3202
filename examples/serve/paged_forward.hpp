// One forward step of the model over a batch of sequences whose KV cache lives in libkvc pools (one,
// or two for a hybrid model: see kv_store.hpp): kvc_batch_build once per step and pool, then per
// layer kvc_cache_write for the new tokens' K/V and kvc_launch_attention against the pool and batch
// of the layer's group, with that group's window. Prefill (many new tokens, possibly after a prefix hit) and decode (one new
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
    // Per pool: its ranks' batches (built once per step) and attention parameters (one rank's).
    struct Group {
        ReplicatedPool *pool = nullptr;
        std::unique_ptr<ReplicatedBatch> batch;
        kvc_attention_params params;
    };
    const Model &m_;
    std::vector<Group> groups_;
    std::vector<LayerPlacement> placement_;
    int64_t max_tokens_, max_logit_rows_;
    std::vector<uint64_t> ids_;
    std::vector<int64_t> q_lens_, pos_;
    std::vector<float> x_, h_, q_, k_, v_, attn_, scratch_, last_;
    std::vector<float> q_shard_, k_shard_, v_shard_, attn_shard_;  // one rank's heads (--tp only)
    bool on_device_ = false;
    DeviceBuffer dq_, dk_, dv_, dattn_;  // CUDA backend only

    void attention(int32_t layer, int64_t T);

    // One hybrid pool (--hybrid): kvc_cache_write / kvc_launch_attention serve a hybrid pool only
    // once kvc_batch_set_group is built, so until then each layer's K/V go into the pages and its
    // attention reads them here, on the host (CPU backend): the page of position p in group g is
    // kvc_seq_group_block_table's entry p / block_size, the layer inside it at layer_in_group x
    // the group's layer_stride ([K|V][kv_head][token][dim], kvc_pool_get_group_info).
    bool host_pages_ = false;
    unsigned char *base_ = nullptr;
    int64_t page_bytes_ = 0;
    int32_t elem_bytes_ = 4, block_size_ = 0;
    std::vector<kvc_group_info> ginfo_;
    std::vector<int32_t> layer_group_, layer_in_group_;   // per model layer
    std::vector<std::vector<std::vector<int32_t>>> tables_;  // [entry][group] of this step
    std::vector<int64_t> entry_first_;                    // first new position of each entry
    std::vector<float> kbuf_, vbuf_;
    std::vector<double> score_, acc_;
    void host_attention(int32_t layer, int64_t T);
    // Rank r's columns of rows x width activations (its heads' share of each row): the matrix itself
    // with one rank, else copied into `shard`.
    const float *shard(const std::vector<float> &all, int64_t rows, int64_t width, int32_t r, int32_t ranks,
                       std::vector<float> *shard) const;
};

}  // namespace serve
