// The generic paged prefill/append attention kernel: every q/KV dtype pair that the tensor-core
// prefill (prefill_mma_kernel.cuh) does not take (f32 on either side, q and KV of different 16-bit
// types, unaligned q/out). Decode (one query per sequence) runs decode_kernel.cuh.
//
// One CTA serves one (sequence, KV head, group of query heads, tile of query tokens).
// Its rows are the (query token, query head) pairs of that KV head, so every K/V byte it streams
// is used by the whole GQA group (vLLM's per-query-head grid re-reads it G times). K/V tiles move
// global -> shared with 16-byte cp.async, double-buffered so the next tile is in flight while the
// current one is scored; softmax is online (running max / exp-sum per row) in fp32.
//
// Block size is a runtime value (any 1..256 and beyond): a token's address is computed from its
// block id, so no instantiation per block size is needed. Instantiated per KV dtype x head dim in
// attention_<dtype>.cu.
#pragma once

#include <cstdint>

#include "attention_params.cuh"
#include "cta_work.cuh"
#include "device_primitives.cuh"
#include "dtype_convert.cuh"

namespace kvc::cuda::detail {

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

template <typename KV, int kHeadDim>
__global__ void __launch_bounds__(kAttnThreads, 4) paged_attention_kernel(const AttnParams p) {
    using S = TileShape<int(sizeof(KV)), kHeadDim>;
    constexpr int T = S::kTile;
    constexpr int kChunks = S::kChunksPerRow;
    constexpr int kEpc = Chunk16<KV>::kElems;  // elements per 16-byte chunk
    const float kNegInf = -__int_as_float(0x7f800000);

    KVC_DYNAMIC_SMEM(smem);
    unsigned char *kv_smem = smem;
    float *q_s = reinterpret_cast<float *>(smem + S::kKvBytes);
    float *score_s = q_s + S::kMaxRows * S::kQPitch;
    float *m_s = score_s + S::kMaxRows * T;
    float *l_s = m_s + S::kMaxRows;
    float *corr_s = l_s + S::kMaxRows;
    float *slope_s = corr_s + S::kMaxRows;
    int32_t *qpos_s = reinterpret_cast<int32_t *>(slope_s + S::kMaxRows);

    const int tid = threadIdx.x;
    CtaWork w;
    if (!cta_work(p, int32_t(blockIdx.x), &w)) return;
    const int32_t rows = w.rows;  // <= S::kMaxRows by construction in the dispatcher

    // Keys this CTA may need: up to its last query's position; from its first query's window start.
    const int32_t range_begin = w.key_begin, range_end = w.key_end;

    // Rows: r = query * gc + head-in-chunk. q is pre-scaled so scores need one FMA chain only.
    for (int r = tid; r < rows; r += kAttnThreads) {
        m_s[r] = kNegInf;
        l_s[r] = 0.0f;
        qpos_s[r] = w.pos_of_row(r);
        slope_s[r] = p.alibi_slopes ? p.alibi_slopes[w.head_of_row(r, p)] : 0.0f;
    }
    for (int i = tid; i < rows * kHeadDim; i += kAttnThreads) {
        const int32_t r = i / kHeadDim, d = i - r * kHeadDim;
        q_s[r * S::kQPitch + d] = load_qo(p.q, p.q_dtype, w.qo_offset(r, p, kHeadDim) + d) * p.q_scale;
    }

    const int32_t *table = p.block_tables + int64_t(w.seq) * p.max_blocks_per_seq;
    const unsigned char *head_base = p.layer_base + int64_t(w.kv_head) * p.head_stride;

    // Issues the cp.async copies of tile `tile` (K and V) into pipeline stage `stage`.
    auto issue_tile = [&](int32_t tile, int stage) {
        unsigned char *k_dst = kv_smem + stage * S::kStageBytes;
        issue_kv_tile<kAttnThreads, S::kChunksPerThread, S::kChunksPerTile, kChunks>(
            p, table, head_base, range_begin + tile * T, range_end, k_dst, k_dst + T * S::kRowPitch, S::kRowPitch, tid);
    };

    const int32_t span = range_end - range_begin;
    const int32_t num_tiles = span > 0 ? (span + T - 1) / T : 0;

    // Accumulators: item = (row, 8 consecutive dims).
    constexpr int kDG = S::kDimGroups;
    float acc[S::kItemsPerThread][8];
#pragma unroll
    for (int k = 0; k < S::kItemsPerThread; ++k)
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[k][e] = 0.0f;

    // Accumulation split: with fewer (row, 8-dim) items than threads (small GQA groups), the
    // threads left over take every `slices`-th token of the tile instead of idling; their partial
    // accumulators are summed once at the end.
    const int n_items = rows * kDG;
    const int slices = n_items >= kAttnThreads ? 1 : kAttnThreads / n_items;
    const int my_slice = n_items >= kAttnThreads ? 0 : tid / n_items;
    const int first_item = n_items >= kAttnThreads ? tid : tid - my_slice * n_items;
    const bool accumulates = my_slice < slices;

    const int score_t = tid / S::kSlices;
    const int score_slice = tid % S::kSlices;
    const int lane = tid & 31, warp = tid >> 5;

    if (num_tiles > 0) issue_tile(0, 0);
    cp_async_commit();
    __syncthreads();  // q_s and row state visible

    for (int32_t tile = 0; tile < num_tiles; ++tile) {
        if (tile + 1 < num_tiles) issue_tile(tile + 1, (tile + 1) & 1);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();

        const unsigned char *k_tile = kv_smem + (tile & 1) * S::kStageBytes;
        const unsigned char *v_tile = k_tile + T * S::kRowPitch;
        const int32_t t0 = range_begin + tile * T;
        const int32_t count = min(T, range_end - t0);

        // 1. Scores: thread (token, slice) dots its share of the token's K chunks with every row's
        //    q; the slices of a token (adjacent lanes) then sum by shuffles.
        {
            float dot[S::kMaxRows];
#pragma unroll
            for (int r = 0; r < S::kMaxRows; ++r) dot[r] = 0.0f;
            const unsigned char *k_row = k_tile + score_t * S::kRowPitch;
#pragma unroll 2
            for (int c = score_slice; c < kChunks; c += S::kSlices) {
                float kf[kEpc];
                Chunk16<KV>::widen(k_row + c * 16, kf);
#pragma unroll
                for (int r = 0; r < S::kMaxRows; ++r) {
                    if (r < rows) {
                        const float4 *qv = reinterpret_cast<const float4 *>(q_s + r * S::kQPitch + c * kEpc);
#pragma unroll
                        for (int e = 0; e < kEpc / 4; ++e) {
                            const float4 qq = qv[e];
                            dot[r] = fmaf(kf[4 * e], qq.x, dot[r]);
                            dot[r] = fmaf(kf[4 * e + 1], qq.y, dot[r]);
                            dot[r] = fmaf(kf[4 * e + 2], qq.z, dot[r]);
                            dot[r] = fmaf(kf[4 * e + 3], qq.w, dot[r]);
                        }
                    }
                }
            }
            const int32_t pos = t0 + score_t;
#pragma unroll
            for (int r = 0; r < S::kMaxRows; ++r) {
                if (r < rows) {  // uniform across the CTA: every lane joins the shuffles
#pragma unroll
                    for (int o = S::kSlices / 2; o > 0; o >>= 1)
                        dot[r] += __shfl_xor_sync(0xffffffffu, dot[r], o);
                    if (r % S::kSlices == score_slice) {
                        const int32_t qpos = qpos_s[r];
                        const bool visible =
                            score_t < count && pos <= qpos && (p.window <= 0 || pos > qpos - p.window);
                        float x = dot[r];
                        if (p.alibi_slopes) x += slope_s[r] * float(pos - qpos);
                        if (p.softcap > 0.0f) x = p.softcap * tanhf(x / p.softcap);
                        score_s[r * T + score_t] = visible ? x : kNegInf;
                    }
                }
            }
        }
        __syncthreads();

        // 2. Online softmax: one warp per row.
        for (int r = warp; r < rows; r += kAttnThreads / 32) {
            float mx = kNegInf;
            for (int t = lane; t < T; t += 32) mx = fmaxf(mx, score_s[r * T + t]);
            mx = warp_max(mx);
            const float m_old = m_s[r];
            const float m_new = fmaxf(m_old, mx);
            float sum = 0.0f, corr = 1.0f;
            if (m_new == kNegInf) {
                for (int t = lane; t < T; t += 32) score_s[r * T + t] = 0.0f;
            } else {
                corr = __expf(m_old - m_new);
                for (int t = lane; t < T; t += 32) {
                    const float e = __expf(score_s[r * T + t] - m_new);
                    score_s[r * T + t] = e;
                    sum += e;
                }
            }
            sum = warp_sum(sum);
            if (lane == 0) {
                l_s[r] = l_s[r] * corr + sum;
                m_s[r] = m_new;
                corr_s[r] = corr;
            }
        }
        __syncthreads();

        // 3. acc = acc * corr + P V.
#pragma unroll
        for (int k = 0; k < S::kItemsPerThread; ++k) {
            const int item = first_item + k * kAttnThreads;
            if (accumulates && item < n_items) {
                const int r = item / kDG;
                const int dg = item - r * kDG;
                const float corr = corr_s[r];
#pragma unroll
                for (int e = 0; e < 8; ++e) acc[k][e] *= corr;
                const float *prob = score_s + r * T;
                const unsigned char *v_col = v_tile + dg * 8 * int(sizeof(KV));
#pragma unroll 4
                for (int t = my_slice; t < count; t += slices) {
                    float vf[8];
                    widen8<KV>(v_col + t * S::kRowPitch, vf);
                    const float pr = prob[t];
#pragma unroll
                    for (int e = 0; e < 8; ++e) acc[k][e] = fmaf(pr, vf[e], acc[k][e]);
                }
            }
        }
        __syncthreads();  // the stage read above is refilled by the next iteration's issue
    }
    cp_async_wait<0>();

    // Token slices of one item meet in shared memory (the K/V stages are free now: the loop ended
    // with a barrier). slices > 1 implies n_items < kAttnThreads, so each thread has one item.
    if (slices > 1) {
        float *partial = reinterpret_cast<float *>(kv_smem);
        if (accumulates && my_slice > 0) {
#pragma unroll
            for (int e = 0; e < 8; ++e) partial[((my_slice - 1) * n_items + first_item) * 8 + e] = acc[0][e];
        }
        __syncthreads();
        if (my_slice == 0) {
            for (int sl = 1; sl < slices; ++sl)
#pragma unroll
                for (int e = 0; e < 8; ++e) acc[0][e] += partial[((sl - 1) * n_items + first_item) * 8 + e];
        }
    }

    // 4. Output: normalized rows.
#pragma unroll
    for (int k = 0; k < S::kItemsPerThread; ++k) {
        const int item = first_item + k * kAttnThreads;
        if (my_slice != 0 || item >= n_items) continue;
        const int r = item / kDG;
        const int dg = item - r * kDG;
        const float l = l_s[r];
        const float inv = l > 0.0f ? p.v_scale / l : 0.0f;
        const int64_t o = w.qo_offset(r, p, kHeadDim) + dg * 8;
#pragma unroll
        for (int e = 0; e < 8; ++e) store_qo(p.out, p.q_dtype, o + e, acc[k][e] * inv);
    }
}

template <typename KV, int kHeadDim>
cudaError_t launch_attention_kernel(const AttnParams &p, dim3 grid, cudaStream_t stream) {
    using S = TileShape<int(sizeof(KV)), kHeadDim>;
    static_assert(S::kSmemBytes <= kAttnSmemLimit, "tile shape must fit the kernel's shared-memory limit");
    static_assert(S::kRowBytes % 16 == 0, "rows must be whole 16-byte chunks");
    static_assert(S::kKvBytes >= size_t(kAttnThreads) * 8 * sizeof(float), "slice partials reuse the K/V stages");
    auto *kernel = paged_attention_kernel<KV, kHeadDim>;
    if (S::kSmemBytes > 48 * 1024) {
        static std::atomic<uint64_t> opted_in{0};
        if (cudaError_t err = opt_in_dynamic_smem(reinterpret_cast<const void *>(kernel), S::kSmemBytes, opted_in);
            err != cudaSuccess)
            return err;
    }
    KVC_LAUNCH(kernel, grid, kAttnThreads, S::kSmemBytes, stream, p);
    return cudaGetLastError();
}

// One translation unit per KV dtype instantiates the five supported head dims.
#define KVC_INSTANTIATE_ATTENTION(KV)                                                          \
    template cudaError_t launch_attention_kernel<KV, 64>(const AttnParams &, dim3, cudaStream_t);  \
    template cudaError_t launch_attention_kernel<KV, 80>(const AttnParams &, dim3, cudaStream_t);  \
    template cudaError_t launch_attention_kernel<KV, 96>(const AttnParams &, dim3, cudaStream_t);  \
    template cudaError_t launch_attention_kernel<KV, 128>(const AttnParams &, dim3, cudaStream_t); \
    template cudaError_t launch_attention_kernel<KV, 256>(const AttnParams &, dim3, cudaStream_t);

}  // namespace kvc::cuda::detail
