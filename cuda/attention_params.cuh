// Launch parameters and compile-time tile shapes of the paged attention kernel
// (attention_kernel.cuh), shared by the host dispatcher (attention.cu) and the per-dtype
// instantiation files (attention_<dtype>.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "device_primitives.cuh"
#include "storage/kv_layout.hpp"

namespace kvc::cuda::detail {

constexpr int kAttnThreads = 128;
// Rows = (query token, query head) pairs one CTA computes; their fp32 accumulators live in
// registers: kMaxRowElems / kAttnThreads = 16 floats per thread.
constexpr int kMaxRowElems = 2048;
// Shared memory a CTA of the generic kernel (prefill/append of the dtype pairs the tensor-core
// prefill does not take) may use; the launch opts in above the default 48 KiB. At 48 KiB the row
// padding that keeps shared-memory reads conflict-free pushed the 16-bit head-dim-128 tile from 32
// tokens down to 16. 56 KiB still fits the four CTAs per SM that __launch_bounds__ asks for on
// H100 (228 KiB per SM; three on A100's 164 KiB). The decode kernel has its own shape
// (decode_kernel.cuh).
constexpr size_t kAttnSmemLimit = 56 * 1024;

// Compile-time shape of one instantiation: KV element type size and head dim.
template <int kElemBytes, int kHeadDim>
struct TileShape {
    static constexpr int kRowBytes = kHeadDim * kElemBytes;  // one token of one head, a multiple of 16
    static constexpr int kChunksPerRow = kRowBytes / 16;
    static constexpr int kStages = 2;
    static constexpr int kMaxRows = kMaxRowElems / kHeadDim > 0 ? kMaxRowElems / kHeadDim : 1;
    static constexpr int kQPitch = kHeadDim + 4;  // floats; +4 spreads rows over banks

    // Score phase: thread = (token, slice); a token's kAttnThreads / tile slices sit in adjacent
    // lanes and take its 16-byte chunks round-robin, so each K element is widened once and used
    // for every row. A quarter-warp (8 lanes, one 128-bit shared-memory wavefront) then reads
    // chunk (token * pitch_chunks + slice) for 8 / slices tokens: the row pitch in chunks must be
    // congruent to `slices` mod 8 for those to land in 8 distinct bank groups.
    static constexpr int row_pitch(int tile) {
        const int slices = kAttnThreads / tile;
        if (slices >= 8) return kRowBytes;  // one token per quarter-warp: consecutive chunks
        int chunks = kChunksPerRow;
        while (chunks % 8 != slices % 8) ++chunks;
        return chunks * 16;
    }
    static constexpr size_t smem_bytes(int tile) {
        return size_t(2) * tile * row_pitch(tile) * kStages + size_t(kMaxRows) * kQPitch * 4 +
               size_t(kMaxRows) * tile * 4 + size_t(kMaxRows) * 4 * 5;
    }
    // Tokens per tile: about 8 KiB of K (and as much V) per pipeline stage, a power of two in
    // [8, 64], shrunk until everything fits kAttnSmemLimit.
    static constexpr int pick_tile() {
        int t = 64;
        while (t > 8 && (t * kRowBytes > 8192 || smem_bytes(t) > kAttnSmemLimit)) t /= 2;
        return t;
    }
    static constexpr int kTile = pick_tile();
    static constexpr int kRowPitch = row_pitch(kTile);
    static constexpr int kSlices = kAttnThreads / kTile;
    // Loads: thread tid copies chunks tid, tid + kAttnThreads, ... (lane-contiguous: whole sectors
    // per warp request; see issue_kv_tile).
    static constexpr int kChunksPerTile = kTile * kChunksPerRow;
    static constexpr int kChunksPerThread = (kChunksPerTile + kAttnThreads - 1) / kAttnThreads;
    // Accumulation phase: item = (row, 8 consecutive dims).
    static constexpr int kDimGroups = kHeadDim / 8;
    static constexpr int kItemsPerThread = (kMaxRows * kDimGroups + kAttnThreads - 1) / kAttnThreads;

    static constexpr size_t kStageBytes = size_t(2) * kTile * kRowPitch;  // K tile + V tile
    static constexpr size_t kKvBytes = kStageBytes * kStages;
    static constexpr size_t kQBytes = size_t(kMaxRows) * kQPitch * 4;
    static constexpr size_t kScoreBytes = size_t(kMaxRows) * kTile * 4;
    static constexpr size_t kRowStateBytes = size_t(kMaxRows) * 4 * 5;  // m, l, corr, slope, position
    static constexpr size_t kSmemBytes = kKvBytes + kQBytes + kScoreBytes + kRowStateBytes;
    static_assert(kSmemBytes == smem_bytes(kTile), "shared-memory carve-up out of sync");
};

// The paged KV geometry (kv_stride, head_stride, token_stride, block_stride and the offset math of
// storage/kv_layout.hpp) comes from kvc::PagedStrides.
struct AttnParams : kvc::PagedStrides {
    // KV cache: layer_base = base + layer * layer_stride.
    const unsigned char *layer_base;
    int32_t block_size;
    FastDiv block_div;  // division by block_size (every kernel: no integer division on the device)
    const int32_t *block_tables;
    int32_t max_blocks_per_seq;
    const int32_t *seq_lens;
    const int32_t *query_start_loc;

    const void *q;
    void *out;
    int32_t q_dtype;
    int32_t num_q_heads;
    int32_t group_size;      // query heads per KV head
    int32_t group_chunk;     // query heads of one group handled by one CTA
    int32_t head_chunks;     // ceil(group_size / group_chunk)
    int32_t queries_per_cta; // query tokens of one sequence handled by one CTA

    float q_scale;  // softmax scale (times k_scale for FP8 KV), folded into q
    float v_scale;  // 1 unless FP8 KV
    float softcap;
    int32_t window;
    const float *alibi_slopes;

    // Split-K (decode kernel only): num_parts > 1 writes unnormalized partials to the workspace,
    // reduced by attention_reduce_kernel.
    int32_t num_parts;
    int32_t part_size;  // tokens per partition (when num_parts > 1)
    float *ws_acc;      // [num_seqs][num_q_heads][num_parts][head_dim]
    float *ws_ml;       // [num_seqs][num_q_heads][num_parts][2]: max (log2 units), exp-sum
};

// Launch of one (KV dtype, head dim) instantiation; defined in attention_<dtype>.cu.
using AttnLauncher = cudaError_t (*)(const AttnParams &p, dim3 grid, cudaStream_t stream);

template <typename KV, int kHeadDim>
cudaError_t launch_attention_kernel(const AttnParams &p, dim3 grid, cudaStream_t stream);

// Decode (one query per sequence, decode_kernel.cuh): per KV dtype x head dim x query rows per CTA
// (1, 2, 4, 8, 16), its launch and the occupancy API's count of its CTAs one SM holds (which the
// split-K plan fills); defined in attention_<dtype>.cu.
struct DecodeKernel {
    AttnLauncher launch;
    cudaError_t (*ctas_per_sm)(int *n);
};
constexpr int kDecodeMaxRows = 16;
// dim_idx: head dim 64, 80, 96, 128, 256; rows_idx: log2 of the rows per CTA (0..4).
template <typename KV>
DecodeKernel find_decode_kernel(int dim_idx, int rows_idx, int32_t q_dtype, bool q_pairs_aligned);

// Tensor-core prefill (prefill_mma.cu, prefill_mma_fp8.cu): q F16 or BF16 (T) with KV in the same
// dtype or FP8 e4m3 (KV), every supported head dim, no split-K. Rows (query token x query head) per
// CTA: 128 for 16-bit KV up to d = 128, else 64 (registers and shared memory); MmaShape::kRows.
constexpr int mma_rows(int kv_bytes, int head_dim) { return kv_bytes == 2 && head_dim <= 128 ? 128 : 64; }
template <typename T, typename KV, int kHeadDim>
cudaError_t launch_prefill_mma(const AttnParams &p, dim3 grid, cudaStream_t stream);

}  // namespace kvc::cuda::detail
