// Arguments of the storage kernels, shared by the CPU backend (lib/cpu/) and the CUDA backend
// (cuda/). Both implement the same functions with the same semantics; the CPU backend is the
// oracle the GPU tests compare against. All pointers are in the backend's memory space.
// Validation (ranges, supported combinations) happens in the C API layer *before* these run,
// except where noted; kernels may assume valid arguments.
#pragma once

#include <cstddef>
#include <cstdint>

#include "storage/kv_layout.hpp"

namespace kvc {

// reshape_and_cache: token i's K/V ([num_kv_heads][head_dim] each, src_dtype) go to slot
// slots[i] of `layer`; slots[i] < 0 is padding and skipped. FP8 caches store value / scale.
struct CacheWriteArgs {
    KvLayout layout;
    void *base = nullptr;
    int32_t layer = 0;
    const int64_t *slots = nullptr;
    int64_t num_tokens = 0;
    const void *k = nullptr;
    const void *v = nullptr;
    int32_t src_dtype = KVC_DTYPE_F16;
    float k_scale = 1.0f;
    float v_scale = 1.0f;
};

// copy_blocks: for each pair p, block dst[p] := block src[p] (all layers, K and V), one launch.
struct CopyBlocksArgs {
    KvLayout layout;
    void *base = nullptr;
    const int32_t *src = nullptr;
    const int32_t *dst = nullptr;
    int64_t num_pairs = 0;
};

// Paged attention over one layer for a built batch.
//   q, out: [num_tokens][num_q_heads][head_dim] in q_dtype (F32/F16/BF16).
//   Sequence s has context length seq_lens[s] and query tokens
//   query_start_loc[s] .. query_start_loc[s+1]-1 (q_len = difference). Query token j of s is at
//   absolute position seq_lens[s] - q_len + j and attends causally to positions <= that one
//   (and, with sliding_window W > 0, > position - W).
//   Position p of s lives in block block_tables[s * max_blocks_per_seq + p / block_size] at
//   in-block token p % block_size.
//   GQA: query head h uses KV head h / (num_q_heads / num_kv_heads).
//   logits = scale * q.k (+ alibi_slopes[h] * (p - query_pos) if alibi_slopes) then, if
//   softcap > 0, softcap * tanh(logits / softcap); softmax and accumulation in fp32.
//   FP8 KV: k = stored * k_scale, v = stored * v_scale.
struct AttentionArgs {
    KvLayout layout;
    const void *base = nullptr;
    int32_t layer = 0;
    const void *q = nullptr;
    void *out = nullptr;
    int32_t q_dtype = KVC_DTYPE_F16;
    int32_t num_q_heads = 0;
    float scale = 0.0f;  // already resolved (never 0 here)
    float k_scale = 1.0f;
    float v_scale = 1.0f;
    float softcap = 0.0f;
    int32_t sliding_window = 0;
    const float *alibi_slopes = nullptr;
    int32_t partition_size = 0;  // decode split-K: 0 auto, -1 never, > 0 tokens per partition
    int32_t num_seqs = 0;
    int64_t num_tokens = 0;
    const int32_t *block_tables = nullptr;
    int32_t max_blocks_per_seq = 0;
    const int32_t *seq_lens = nullptr;
    const int32_t *query_start_loc = nullptr;
    int32_t max_q_len = 0;
    int64_t max_seq_len = 0;
    bool is_decode = false;
    void *workspace = nullptr;  // split-K scratch preallocated by the batch (backend memory)
    size_t workspace_bytes = 0;
};

// CPU backend (lib/cpu/). Return KVC_OK or a status set with kvc::fail.
kvc_status cpu_cache_write(const CacheWriteArgs &a);
kvc_status cpu_copy_blocks(const CopyBlocksArgs &a);
kvc_status cpu_attention(const AttentionArgs &a);

}  // namespace kvc
