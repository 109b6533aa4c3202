// Tensor-core paged prefill/append attention for f16/bf16 (q and KV in the same dtype), head dims
// up to 128. A FlashAttention-2 style loop on mma.sync.m16n8k16 (fp32 accumulate):
//
//   CTA = (sequence, KV head, group chunk, tile of query tokens); 4 warps x 16 rows, a row being a
//   (query token, query head) pair of the KV head's GQA group, so each K/V tile in shared memory is
//   used by the whole group. Per 64-key tile: S = Q K^T on tensor cores, mask (causal, window),
//   ALiBi, soft-cap and the online softmax in registers (fp32), then O += P V with P re-packed from
//   the S accumulators into A fragments (their layouts coincide), O rescaled per row in registers.
//
// Fragment layouts are those of the PTX ISA for mma.m16n8k16 (g = lane / 4, t = lane % 4):
//   A (16x16, row): {a0,a1} row g, cols 2t..2t+1; {a2,a3} row g+8; {a4,a5} row g, cols 2t+8..;
//                   {a6,a7} row g+8, cols 2t+8..
//   B (16x8, col):  {b0,b1} rows (k) 2t..2t+1, col (n) g; {b2,b3} rows 2t+8..2t+9
//   C (16x8, f32):  c0,c1 row g, cols 2t..2t+1; c2,c3 row g+8
#pragma once

#include <atomic>
#include <cstdint>

#include "attention_kernel.cuh"
#include "attention_params.cuh"

namespace kvc::cuda::detail {

template <int kHeadDim>
struct MmaShape {
    static constexpr int kThreads = 128;            // 4 warps
    static constexpr int kRows = 64;                // 16 per warp
    static constexpr int kKeys = 64;                // keys per tile
    static constexpr int kRowBytes = kHeadDim * 2;  // 16-bit elements
    static constexpr int kChunksPerRow = kRowBytes / 16;
    // +16 bytes: the 8 rows a fragment load touches (g = 0..7) start in 8 different bank quads.
    static constexpr int kPitch = kRowBytes + 16;
    static constexpr int kStages = 2;
    static constexpr size_t kStageBytes = size_t(2) * kKeys * kPitch;
    static constexpr size_t kQBytes = size_t(kRows) * kPitch;
    static constexpr size_t kSmemBytes = kStageBytes * kStages + kQBytes;
    static constexpr int kChunksPerTile = kKeys * kChunksPerRow;
    static constexpr int kChunksPerThread = (kChunksPerTile + kThreads - 1) / kThreads;
    static constexpr int kQChunksPerThread = (kRows * kChunksPerRow + kThreads - 1) / kThreads;
};

template <typename T> struct MmaOp;
template <> struct MmaOp<__half> {
    __device__ __forceinline__ static void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
        mma_m16n8k16<false>(d, a, b0, b1);
    }
    __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
        return bit_cast<uint32_t>(__floats2half2_rn(lo, hi));
    }
    // fp16 keeps 11 significant bits of P in [0, 1]: one product suffices.
    static constexpr bool kSplitP = false;
    __device__ __forceinline__ static uint32_t residual(float, float, uint32_t) { return 0; }
};
template <> struct MmaOp<__nv_bfloat16> {
    __device__ __forceinline__ static void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
        mma_m16n8k16<true>(d, a, b0, b1);
    }
    __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
        return bit_cast<uint32_t>(__floats2bfloat162_rn(lo, hi));
    }
    // bf16 keeps only 8 bits of P: a weight error of 2^-9 shows up directly in the output when
    // attention is sharp. P = hi + lo (both bf16) with a second product restores ~16 bits.
    static constexpr bool kSplitP = true;
    __device__ __forceinline__ static uint32_t residual(float lo, float hi, uint32_t packed_hi) {
        const float lo_hi = __uint_as_float(packed_hi << 16);
        const float hi_hi = __uint_as_float(packed_hi & 0xffff0000u);
        return pack(lo - lo_hi, hi - hi_hi);
    }
};

__device__ __forceinline__ uint32_t lds32(const unsigned char *p) { return *reinterpret_cast<const uint32_t *>(p); }
__device__ __forceinline__ uint32_t lds16(const unsigned char *p) { return *reinterpret_cast<const uint16_t *>(p); }

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(128, 2) prefill_mma_kernel(const AttnParams p) {
    using S = MmaShape<kHeadDim>;
    using Op = MmaOp<T>;
    constexpr int kNT = kHeadDim / 8;     // output n-tiles (8 dims each)
    constexpr int kST = S::kKeys / 8;     // score n-tiles (8 keys each)
    const float kNegInf = -__int_as_float(0x7f800000);

    KVC_DYNAMIC_SMEM(smem);
    unsigned char *q_smem = smem + S::kStageBytes * S::kStages;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t4 = lane & 3;
    CtaWork w;
    if (!cta_work(p, int32_t(blockIdx.x), &w)) return;
    const int32_t rows = w.rows;  // <= 64
    const int32_t range_begin = w.key_begin, range_end = w.key_end;

    // Q tile -> shared memory (rows past `rows` zero-filled).
#pragma unroll
    for (int i = 0; i < S::kQChunksPerThread; ++i) {
        const int c = tid + i * S::kThreads;
        if (c < S::kRows * S::kChunksPerRow) {
            const int r = c / S::kChunksPerRow, ch = c - r * S::kChunksPerRow;
            const unsigned char *src = static_cast<const unsigned char *>(p.q);
            const bool valid = r < rows;
            if (valid) src += w.qo_offset(r, p, kHeadDim) * 2 + ch * 16;
            cp_async16(q_smem + r * S::kPitch + ch * 16, src, valid);
        }
    }

    // This lane's two rows: r_lo = warp * 16 + g and r_lo + 8.
    int32_t qpos[2];
    float slope[2];
    bool row_ok[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = warp * 16 + g + 8 * h;
        row_ok[h] = r < rows;
        qpos[h] = row_ok[h] ? w.pos_of_row(r) : -1;  // -1: sees nothing
        slope[h] = (p.alibi_slopes && row_ok[h]) ? p.alibi_slopes[w.head_of_row(r, p)] : 0.0f;
    }

    const int32_t *table = p.block_tables + int64_t(w.seq) * p.max_blocks_per_seq;
    const unsigned char *head_base = p.layer_base + int64_t(w.kv_head) * p.head_stride;
    auto issue_tile = [&](int32_t tile, int stage) {
        unsigned char *k_dst = smem + stage * S::kStageBytes;
        unsigned char *v_dst = k_dst + S::kKeys * S::kPitch;
        const int32_t t0 = range_begin + tile * S::kKeys;
        int last_t = -1;
        const unsigned char *row_src = head_base;
        bool valid = false;
#pragma unroll
        for (int i = 0; i < S::kChunksPerThread; ++i) {
            const int c = tid * S::kChunksPerThread + i;
            if (c < S::kChunksPerTile) {
                const int t = c / S::kChunksPerRow;
                const int chunk = c - t * S::kChunksPerRow;
                if (t != last_t) {
                    last_t = t;
                    const int32_t pos = t0 + t;
                    valid = pos < range_end;
                    row_src = valid ? paged_k_row(p, table, head_base, pos) : head_base;
                }
                const unsigned char *src = valid ? row_src + chunk * 16 : head_base;
                cp_async16(k_dst + t * S::kPitch + chunk * 16, src, valid);
                cp_async16(v_dst + t * S::kPitch + chunk * 16, valid ? src + p.kv_stride : src, valid);
            }
        }
    };

    const int32_t span = range_end - range_begin;
    const int32_t num_tiles = span > 0 ? (span + S::kKeys - 1) / S::kKeys : 0;

    float o[kNT][4];
#pragma unroll
    for (int n = 0; n < kNT; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m_run[2] = {kNegInf, kNegInf}, l_run[2] = {0.0f, 0.0f};

    if (num_tiles > 0) issue_tile(0, 0);
    cp_async_commit();  // the Q tile travels in this group too

    const unsigned char *q_lo = q_smem + (warp * 16 + g) * S::kPitch + t4 * 4;
    const unsigned char *q_hi = q_lo + 8 * S::kPitch;

    for (int32_t tile = 0; tile < num_tiles; ++tile) {
        if (tile + 1 < num_tiles) issue_tile(tile + 1, (tile + 1) & 1);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();

        const unsigned char *k_tile = smem + (tile & 1) * S::kStageBytes;
        const unsigned char *v_tile = k_tile + S::kKeys * S::kPitch;
        const int32_t t0 = range_begin + tile * S::kKeys;

        // S = Q K^T (fp32 accumulators).
        float s[kST][4];
#pragma unroll
        for (int j = 0; j < kST; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < kHeadDim / 16; ++kk) {
            const uint32_t a[4] = {lds32(q_lo + kk * 32), lds32(q_hi + kk * 32), lds32(q_lo + kk * 32 + 16),
                                   lds32(q_hi + kk * 32 + 16)};
#pragma unroll
            for (int j = 0; j < kST; ++j) {
                const unsigned char *k_row = k_tile + (j * 8 + g) * S::kPitch + kk * 32 + t4 * 4;
                Op::run(s[j], a, lds32(k_row), lds32(k_row + 16));
            }
        }

        // Mask, scale, ALiBi, soft-cap; online softmax per row (a row lives in one lane quad).
        float mx[2] = {kNegInf, kNegInf};
#pragma unroll
        for (int j = 0; j < kST; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int h = e >> 1;
                const int32_t pos = t0 + j * 8 + 2 * t4 + (e & 1);
                const bool visible =
                    pos < range_end && pos <= qpos[h] && (p.window <= 0 || pos > qpos[h] - p.window);
                float x = s[j][e] * p.q_scale;
                if (p.alibi_slopes) x += slope[h] * float(pos - qpos[h]);
                if (p.softcap > 0.0f) x = p.softcap * tanhf(x / p.softcap);
                x = visible ? x : kNegInf;
                s[j][e] = x;
                mx[h] = fmaxf(mx[h], x);
            }
        float corr[2], m_use[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
            const float m_new = fmaxf(m_run[h], mx[h]);
            m_use[h] = m_new == kNegInf ? 0.0f : m_new;  // a row that has seen nothing stays at 0
            corr[h] = __expf(m_run[h] - m_use[h]);
            m_run[h] = m_new;
        }
        float psum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < kST; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float pe = __expf(s[j][e] - m_use[e >> 1]);
                s[j][e] = pe;
                psum[e >> 1] += pe;
            }
#pragma unroll
        for (int h = 0; h < 2; ++h) l_run[h] = l_run[h] * corr[h] + psum[h];  // lane-partial sums
#pragma unroll
        for (int n = 0; n < kNT; ++n) {
            o[n][0] *= corr[0];
            o[n][1] *= corr[0];
            o[n][2] *= corr[1];
            o[n][3] *= corr[1];
        }

        // O += P V: P from the S accumulators, V^T fragments gathered as 16-bit pairs.
#pragma unroll
        for (int kk = 0; kk < S::kKeys / 16; ++kk) {
            const float *pa[4] = {&s[2 * kk][0], &s[2 * kk][2], &s[2 * kk + 1][0], &s[2 * kk + 1][2]};
            uint32_t a[4], a_lo[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                a[i] = Op::pack(pa[i][0], pa[i][1]);
                a_lo[i] = Op::residual(pa[i][0], pa[i][1], a[i]);
            }
            const unsigned char *v0 = v_tile + (kk * 16 + 2 * t4) * S::kPitch + g * 2;
#pragma unroll
            for (int n = 0; n < kNT; ++n) {
                const unsigned char *v = v0 + n * 16;
                const uint32_t b0 = lds16(v) | (lds16(v + S::kPitch) << 16);
                const uint32_t b1 = lds16(v + 8 * S::kPitch) | (lds16(v + 9 * S::kPitch) << 16);
                Op::run(o[n], a, b0, b1);
                if constexpr (Op::kSplitP) Op::run(o[n], a_lo, b0, b1);
            }
        }
        __syncthreads();  // this stage is refilled by the next iteration's issue
    }
    cp_async_wait<0>();

    // Normalize and store: row sums meet across the quad.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 1);
        l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 2);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        if (!row_ok[h]) continue;
        const int r = warp * 16 + g + 8 * h;
        const float inv = l_run[h] > 0.0f ? 1.0f / l_run[h] : 0.0f;
        uint32_t *out = reinterpret_cast<uint32_t *>(static_cast<T *>(p.out) + w.qo_offset(r, p, kHeadDim) + 2 * t4);
#pragma unroll
        for (int n = 0; n < kNT; ++n) out[n * 4] = Op::pack(o[n][2 * h] * inv, o[n][2 * h + 1] * inv);
    }
}

template <typename T, int kHeadDim>
cudaError_t launch_prefill_mma(const AttnParams &p, dim3 grid, cudaStream_t stream) {
    using S = MmaShape<kHeadDim>;
    // Above 48 KiB a kernel must opt in, once per device.
    static std::atomic<uint64_t> opted_in{0};
    int dev = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err != cudaSuccess) return err;
    const uint64_t bit = dev < 64 ? (uint64_t(1) << dev) : 0;
    if (!bit || !(opted_in.load(std::memory_order_relaxed) & bit)) {
        err = cudaFuncSetAttribute(reinterpret_cast<const void *>(prefill_mma_kernel<T, kHeadDim>),
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, int(S::kSmemBytes));
        if (err != cudaSuccess) return err;
        opted_in.fetch_or(bit, std::memory_order_relaxed);
    }
    auto *kernel = prefill_mma_kernel<T, kHeadDim>;
    KVC_LAUNCH(kernel, grid, S::kThreads, S::kSmemBytes, stream, p);
    return cudaGetLastError();
}

}  // namespace kvc::cuda::detail
