// What one CTA of the paged attention kernels works on, where a cached token's K row lives, and the
// copy of a tile of paged K/V rows into shared memory.
// Shared by the generic kernel (attention_kernel.cuh) and the tensor-core prefill
// (prefill_mma_kernel.cuh) so both read the grid and the paged layout the same way.
//
// Grid: blockIdx.y = kv_head * head_chunks + head_chunk, blockIdx.z = sequence; the query tile
// comes from blockIdx.x (the generic kernel also packs its split-K partition there).
// Rows: r = query_in_tile * gc + head_in_chunk, i.e. the (query token, query head) pairs of one KV
// head's GQA group slice; query j of a sequence with L tokens and q_len Q sits at position
// L - Q + j and sees keys [max(0, pos - window + 1), pos] (causal; decode is Q = 1).
#pragma once

#include <cstdint>

#include "attention_params.cuh"
#include "device_primitives.cuh"

namespace kvc::cuda::detail {

struct CtaWork {
    int32_t seq, kv_head;
    int32_t q_begin;    // first query token of the sequence in the batch (query_start_loc)
    int32_t j0, nq;     // this CTA's queries: j0 .. j0 + nq - 1 of the sequence's q_len
    int32_t g0, gc;     // query heads g0 .. g0 + gc - 1 of the KV head's group
    int32_t rows;       // nq * gc
    int32_t first_pos;  // position of query j0
    int32_t key_begin;  // first key any row may see (sliding window), 0 without one
    int32_t key_end;    // one past the last query's position

    __device__ __forceinline__ int32_t query_of_row(int32_t r) const { return r / gc; }
    __device__ __forceinline__ int32_t head_of_row(int32_t r, const AttnParams &p) const {
        return kv_head * p.group_size + g0 + (r - query_of_row(r) * gc);
    }
    __device__ __forceinline__ int64_t token_of_row(int32_t r) const { return int64_t(q_begin) + j0 + query_of_row(r); }
    __device__ __forceinline__ int32_t pos_of_row(int32_t r) const { return first_pos + query_of_row(r); }
    // Element offset of row r's query (or output) vector in [tokens, num_q_heads, head_dim].
    __device__ __forceinline__ int64_t qo_offset(int32_t r, const AttnParams &p, int head_dim) const {
        return (token_of_row(r) * p.num_q_heads + head_of_row(r, p)) * head_dim;
    }
};

// Fills *w for query tile `qtile` of this CTA's (sequence, KV head, head chunk); false when the
// tile is past the sequence's queries (the CTA has nothing to do).
__device__ __forceinline__ bool cta_work(const AttnParams &p, int32_t qtile, CtaWork *w) {
    w->seq = int32_t(blockIdx.z);
    w->kv_head = int32_t(blockIdx.y) / p.head_chunks;
    const int32_t head_chunk = int32_t(blockIdx.y) % p.head_chunks;
    const int32_t ctx_len = p.seq_lens[w->seq];
    w->q_begin = p.query_start_loc[w->seq];
    const int32_t q_len = p.query_start_loc[w->seq + 1] - w->q_begin;
    w->j0 = qtile * p.queries_per_cta;
    if (w->j0 >= q_len) return false;
    w->nq = min(p.queries_per_cta, q_len - w->j0);
    w->g0 = head_chunk * p.group_chunk;
    w->gc = min(p.group_chunk, p.group_size - w->g0);
    w->rows = w->nq * w->gc;
    w->first_pos = ctx_len - q_len + w->j0;
    w->key_end = w->first_pos + w->nq;
    w->key_begin = p.window > 0 ? max(0, w->first_pos - p.window + 1) : 0;
    return true;
}

// The K row of cached position `pos` for one KV head (V is kv_stride further): block table lookup,
// then the token's offset inside its block (a multiply-high, not an integer division: this runs
// for every 16-byte chunk a tile copies). The block id is widened before the multiply.
__device__ __forceinline__ const unsigned char *paged_k_row(const AttnParams &p, const int32_t *table,
                                                            const unsigned char *head_base, int32_t pos) {
    const int32_t blk_idx = int32_t(p.block_div.div(uint32_t(pos)));
    const int64_t block = table[blk_idx];
    return head_base + p.token_row(block, pos - blk_idx * p.block_size);
}

// Issues this thread's share of the cp.async copies of one K/V tile: keys t0 .. t0 + tile rows of
// one KV head into k_dst / v_dst (row r at r * pitch). A tile is kChunksPerTile 16-byte chunks,
// kChunksPerRow per key; thread tid takes chunks tid, tid + kThreads, ... so that the 32 lanes of
// a warp copy 32 consecutive chunks per instruction: a key's row is contiguous in its block (and
// consecutive keys of a block are adjacent), so every 32-byte sector a warp request touches is
// used whole (the emulated access audit, tests/test_gpu_access_audit.cpp, measures 1.0; a thread
// taking consecutive chunks instead left every lane its own half-used sector, doubling L2->SM
// traffic). The price is a block-table lookup per chunk instead of per key: integer work that
// hides under the memory time of a bandwidth-bound kernel. Keys at or past range_end are
// zero-filled without a read.
template <int kThreads, int kChunksPerThread, int kChunksPerTile, int kChunksPerRow>
__device__ __forceinline__ void issue_kv_tile(const AttnParams &p, const int32_t *table, const unsigned char *head_base,
                                              int32_t t0, int32_t range_end, unsigned char *k_dst,
                                              unsigned char *v_dst, int pitch, int tid) {
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
        const int c = i * kThreads + tid;
        if (c < kChunksPerTile) {
            const int t = c / kChunksPerRow;
            const int chunk = c - t * kChunksPerRow;
            const int32_t pos = t0 + t;
            const bool valid = pos < range_end;
            const unsigned char *src = valid ? paged_k_row(p, table, head_base, pos) + chunk * 16 : head_base;
            cp_async16(k_dst + t * pitch + chunk * 16, src, valid);
            cp_async16(v_dst + t * pitch + chunk * 16, valid ? src + p.kv_stride : src, valid);
        }
    }
}

}  // namespace kvc::cuda::detail
