// Tensor-core paged prefill/append attention: q in f16 or bf16, KV in the same dtype or FP8 (e4m3),
// head dims 64..256. A FlashAttention-2 style loop on mma.sync.m16n8k16 (fp32 accumulate):
//
//   CTA = (sequence, KV head, group chunk, tile of query tokens); 8 warps x 16 rows (16-bit KV up to
//   d = 128) or 4 warps x 16 rows (FP8 KV, d = 256), a row being a (query token, query head) pair
//   of the KV head's GQA group, so each K/V tile in shared memory is used by the whole group. Per key tile: S = Q K^T on tensor cores, mask (causal, window), ALiBi,
//   soft-cap and the online softmax in registers (fp32), then O += P V with P re-packed from the S
//   accumulators into A fragments (their layouts coincide), O rescaled per row in registers.
//
// 16-bit KV: every operand fragment comes from shared memory by ldmatrix (Q and K plain, V
// transposed), one instruction per 16x16 operand; the tile loop is at most a few instructions per
// mma (GPU run of 2026-11-27: the earlier scalar-load version reached 0.14-0.28x of cuDNN's SDPA,
// issue-bound on shared loads, masks and address math).
//
// Fragment layouts are those of the PTX ISA for mma.m16n8k16 (g = lane / 4, t = lane % 4):
//   A (16x16, row): {a0,a1} row g, cols 2t..2t+1; {a2,a3} row g+8; {a4,a5} row g, cols 2t+8..;
//                   {a6,a7} row g+8, cols 2t+8..
//   B (16x8, col):  {b0,b1} rows (k) 2t..2t+1, col (n) g; {b2,b3} rows 2t+8..2t+9
//   C (16x8, f32):  c0,c1 row g, cols 2t..2t+1; c2,c3 row g+8
//
// FP8 KV: tiles travel to shared memory as e4m3 bytes (half the traffic and the footprint) and are
// widened to q's 16-bit type pair by pair while B fragments are built; e4m3 -> f16/bf16 is exact,
// so the products are those of the generic kernel's fp32 path up to accumulation order. k_scale is
// folded into q_scale by the dispatcher (applied to the fp32 scores), v_scale into the final
// normalization, exactly as the generic kernel applies them.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "attention_kernel.cuh"
#include "attention_params.cuh"
#include "mma_ops.cuh"

namespace kvc::cuda::detail {

// Shared-memory row pitch: the row rounded up to an odd number of `unit`-byte units, so the 8 rows
// one fragment load touches (g = 0..7) start in 8 different bank groups of that width.
constexpr int odd_pitch(int row_bytes, int unit) {
    const int units = (row_bytes + unit - 1) / unit;
    return (units % 2 ? units : units + 1) * unit;
}

template <int kKvBytes, int kHeadDim>
struct MmaShape {
    // 128 rows where registers and shared memory allow: every K/V tile brought into shared memory
    // then serves twice the rows, halving L2 -> SM traffic per FLOP (mma_rows, attention_params.cuh).
    static constexpr int kRows = mma_rows(kKvBytes, kHeadDim);
    static constexpr int kWarps = kRows / 16;
    static constexpr int kThreads = kWarps * 32;
    // CTAs per SM the register allocation must allow (launch bound). 8 warps: 2 CTAs cap registers
    // at 128 a thread (small spills at d = 80/96/128), 1 lets the loop keep everything in registers
    // at half the resident warps; KVC_PREFILL_MIN_CTAS picks at build time (measured on an H100:
    // tests/bench/RESULTS.md "GPU").
#ifndef KVC_PREFILL_MIN_CTAS
#define KVC_PREFILL_MIN_CTAS 2
#endif
    static constexpr int kMinCtasPerSm = kWarps == 8 ? KVC_PREFILL_MIN_CTAS : 2;
    // Keys per tile. At d = 256 a 64-key tile of 16-bit K+V in two stages plus Q is 165 KiB, over
    // the 163 KiB a CTA may opt into on sm_80, and the S accumulators would add 32 registers to
    // the 128 the O accumulators already hold; 32 keys keep both in bounds at the price of twice
    // as many barriers and softmax rescales per key.
#ifndef KVC_PREFILL_KEYS
#define KVC_PREFILL_KEYS 64
#endif
    static constexpr int kKeys = kHeadDim > 128 ? 32 : KVC_PREFILL_KEYS;
    static constexpr int kKvRowBytes = kHeadDim * kKvBytes;
    static constexpr int kQRowBytes = kHeadDim * 2;  // q is always 16-bit here
    static constexpr int kChunksPerRow = kKvRowBytes / 16;
    static constexpr int kQChunksPerRow = kQRowBytes / 16;
    // 16-bit KV: 32-bit fragment loads, pitches in odd multiples of 16 bytes. FP8 KV: K fragments
    // are 32-bit loads of 4 bytes (odd multiples of 16 bytes again) and the Q fragments become
    // 64-bit loads (a half-warp of 4 rows x 32 bytes: odd multiples of 32 bytes).
    static constexpr int kKvPitch = odd_pitch(kKvRowBytes, 16);
    static constexpr int kQPitch = odd_pitch(kQRowBytes, kKvBytes == 1 ? 32 : 16);
    static constexpr int kStages = 2;
    static constexpr size_t kStageBytes = size_t(2) * kKeys * kKvPitch;  // K tile + V tile
    static constexpr size_t kQBytes = size_t(kRows) * kQPitch;
    static constexpr size_t kSmemBytes = kStageBytes * kStages + kQBytes;
    static constexpr int kChunksPerTile = kKeys * kChunksPerRow;
    static constexpr int kChunksPerThread = (kChunksPerTile + kThreads - 1) / kThreads;
    static constexpr int kQChunksPerThread = (kRows * kQChunksPerRow + kThreads - 1) / kThreads;
    static_assert(kKvRowBytes % 16 == 0, "KV rows travel in 16-byte cp.async chunks");
    // The largest instantiation (16-bit, d = 256) must fit sm_80's opt-in limit (163 KiB).
    static_assert(kSmemBytes <= 163 * 1024, "tile too large for one CTA's shared memory");
};

// T: q/out and mma input type (__half or __nv_bfloat16); KV: T or fp8_t.
//
// d = 256 keeps one warp per 16 rows, so the O accumulators take 128 registers per thread (kNT =
// 32). Splitting the dims over two warps would halve that but double the Q fragment and softmax
// work per row and need a cross-warp row max/sum every tile; occupancy of two CTAs per SM (the
// launch bound, up to 255 registers a thread) is what is kept instead.
template <typename T, typename KV, int kHeadDim>
__global__ void __launch_bounds__(MmaShape<int(sizeof(KV)), kHeadDim>::kThreads,
                                  MmaShape<int(sizeof(KV)), kHeadDim>::kMinCtasPerSm)
    prefill_mma_kernel(const AttnParams p) {
    constexpr bool kFp8 = sizeof(KV) == 1;
    static_assert(sizeof(KV) == sizeof(T) || kFp8, "KV is q's 16-bit type or fp8");
    using S = MmaShape<int(sizeof(KV)), kHeadDim>;
    using Op = MmaOp<T>;
    constexpr int kNT = kHeadDim / 8;     // output n-tiles (8 dims each)
    constexpr int kST = S::kKeys / 8;     // score n-tiles (8 keys each)
    static_assert(kNT % 2 == 0 && kST % 2 == 0, "ldmatrix.x4 takes n-tiles in pairs");
    constexpr float kLog2e = 1.4426950408889634f;
    const float kNegInf = -__int_as_float(0x7f800000);

    KVC_DYNAMIC_SMEM(smem);
    unsigned char *q_smem = smem + S::kStageBytes * S::kStages;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t4 = lane & 3;
    CtaWork w;
    // Causal work grows with the query tile: the longest tiles start first (the grid's x runs from
    // the last tile down), so the short ones fill the tail of the launch instead of the long ones.
    if (!cta_work(p, int32_t(gridDim.x - 1 - blockIdx.x), &w)) return;
    const int32_t rows = w.rows;  // <= kRows
    const int32_t range_begin = w.key_begin, range_end = w.key_end;

    // Q tile -> shared memory (rows past `rows` zero-filled).
#pragma unroll
    for (int i = 0; i < S::kQChunksPerThread; ++i) {
        const int c = tid + i * S::kThreads;
        if (c < S::kRows * S::kQChunksPerRow) {
            const int r = c / S::kQChunksPerRow, ch = c - r * S::kQChunksPerRow;
            const unsigned char *src = static_cast<const unsigned char *>(p.q);
            const bool valid = r < rows;
            if (valid) src += w.qo_offset(r, p, kHeadDim) * 2 + ch * 16;
            cp_async16(q_smem + r * S::kQPitch + ch * 16, src, valid);
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
    // A tile needs no per-element mask when every row sees every key of it: below the first
    // query's position (causal), inside the last query's window, before range_end. Plain scores
    // (no ALiBi, no soft-cap) then take one multiply each.
    const int32_t last_pos = w.first_pos + w.nq - 1;
    const bool plain_scores = !p.alibi_slopes && !(p.softcap > 0.0f);
    const float scale_log2 = p.q_scale * kLog2e;

    const int32_t *table = p.block_tables + int64_t(w.seq) * p.max_blocks_per_seq;
    const unsigned char *head_base = p.layer_base + int64_t(w.kv_head) * p.head_stride;
    auto issue_tile = [&](int32_t tile, int stage) {
        unsigned char *k_dst = smem + stage * S::kStageBytes;
        issue_kv_tile<S::kThreads, S::kChunksPerThread, S::kChunksPerTile, S::kChunksPerRow>(
            p, table, head_base, range_begin + tile * S::kKeys, range_end, k_dst, k_dst + S::kKeys * S::kKvPitch,
            S::kKvPitch, tid);
    };

    const int32_t span = range_end - range_begin;
    const int32_t num_tiles = span > 0 ? (span + S::kKeys - 1) / S::kKeys : 0;

    float o[kNT][4];
#pragma unroll
    for (int n = 0; n < kNT; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    // Running maxima in log2 units (scores times scale * log2(e)), exp-sums lane-partial.
    float m_run[2] = {kNegInf, kNegInf}, l_run[2] = {0.0f, 0.0f};

    if (num_tiles > 0) issue_tile(0, 0);
    cp_async_commit();  // the Q tile travels in this group too

    // Fragment addresses. 16-bit KV: ldmatrix of 16x16 blocks (device_primitives.cuh), each lane
    // naming one row at a fixed offset in the block: Q and V^T take the quarters rows-first, K^T
    // columns-first (two key n-tiles per instruction).
    // FP8: K fragments come from one 32-bit load of 4 consecutive dims (4t..4t+3 of each 16), so
    // the k index of the mma is permuted: slots {2t, 2t+1, 2t+8, 2t+9} hold dims 4t..4t+3 for
    // both operands; the dot product does not care. Q follows with 8 consecutive bytes.
    const SmemAddr q_block = smem_addr(q_smem + warp * 16 * S::kQPitch);
    const int q_off = ldmatrix_lane_offset<false>(lane, S::kQPitch);
    const int k_off = ldmatrix_lane_offset<true>(lane, S::kKvPitch);
    const int v_off = ldmatrix_lane_offset<false>(lane, S::kKvPitch);
    const SmemAddr stage0 = smem_addr(smem);
    const unsigned char *q_lo = q_smem + (warp * 16 + g) * S::kQPitch + t4 * (kFp8 ? 8 : 4);
    const unsigned char *q_hi = q_lo + 8 * S::kQPitch;

    for (int32_t tile = 0; tile < num_tiles; ++tile) {
        if (tile + 1 < num_tiles) issue_tile(tile + 1, (tile + 1) & 1);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();

        const unsigned char *k_tile = smem + (tile & 1) * S::kStageBytes;
        const unsigned char *v_tile = k_tile + S::kKeys * S::kKvPitch;
        const SmemAddr k_tile_lm = stage0 + SmemAddr((tile & 1) * S::kStageBytes);
        const SmemAddr v_tile_lm = k_tile_lm + SmemAddr(S::kKeys * S::kKvPitch);
        const int32_t t0 = range_begin + tile * S::kKeys;

        // S = Q K^T (fp32 accumulators).
        float s[kST][4];
#pragma unroll
        for (int j = 0; j < kST; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
        // Fully unrolled at d = 256, ptxas hoists the Q fragment loads of many k-steps while the 128
        // O registers are live and spills (CUDA 13, sm_90, bf16: 76 bytes a thread); two k-steps
        // per iteration bring that to 4. s[] is indexed by j only, so it stays in registers either
        // way. (sm_80 bf16 d = 256 still spills ~68 bytes, not from this loop.)
        [[maybe_unused]] constexpr int kQkUnroll = kHeadDim > 128 ? 2 : kHeadDim / 16;  // host builds: no pragma
#pragma unroll kQkUnroll
        for (int kk = 0; kk < kHeadDim / 16; ++kk) {
            if constexpr (kFp8) {
                const uint2 lo = lds64(q_lo + kk * 32), hi = lds64(q_hi + kk * 32);
                const uint32_t a[4] = {lo.x, hi.x, lo.y, hi.y};
#pragma unroll
                for (int j = 0; j < kST; ++j) {
                    const uint32_t w4 = lds32(k_tile + (j * 8 + g) * S::kKvPitch + kk * 16 + t4 * 4);
                    Op::run(s[j], a, widen_fp8x2<T>(w4), widen_fp8x2<T>(w4 >> 16));
                }
            } else {
                uint32_t a[4];
                ldmatrix_x4<false, false>(a, q_block + SmemAddr(kk * 32), S::kQPitch, q_off);
#pragma unroll
                for (int j = 0; j < kST; j += 2) {
                    uint32_t b[4];  // b0, b1 of key n-tile j, then of j + 1
                    ldmatrix_x4<false, true>(b, k_tile_lm + SmemAddr(j * 8 * S::kKvPitch + kk * 32), S::kKvPitch, k_off);
                    Op::run(s[j], a, b[0], b[1]);
                    Op::run(s[j + 1], a, b[2], b[3]);
                }
            }
        }

        // Scores in log2 units; masked keys -inf. Online softmax per row (a row lives in one quad).
        const bool unmasked = t0 + S::kKeys <= range_end && t0 + S::kKeys - 1 <= w.first_pos &&
                              (p.window <= 0 || t0 > last_pos - p.window);
        // Plain unmasked tiles keep the raw dot products: the scale (> 0) commutes with the max
        // and rides in the exponential's FFMA below.
        float mx[2] = {kNegInf, kNegInf};
        const bool raw = unmasked && plain_scores;
        if (raw) {
#pragma unroll
            for (int j = 0; j < kST; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) mx[e >> 1] = fmaxf(mx[e >> 1], s[j][e]);
        } else {
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
                    x = visible ? x * kLog2e : kNegInf;
                    s[j][e] = x;
                    mx[h] = fmaxf(mx[h], x);
                }
        }
        float corr[2], m_use[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
            if (raw) mx[h] *= scale_log2;
            const float m_new = fmaxf(m_run[h], mx[h]);
            m_use[h] = m_new == kNegInf ? 0.0f : m_new;  // a row that has seen nothing stays at 0
            corr[h] = fast_exp2(m_run[h] - m_use[h]);
            m_run[h] = m_new;
        }
        const float s_mul = raw ? scale_log2 : 1.0f;
        float psum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < kST; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float pe = fast_exp2(fmaf(s[j][e], s_mul, -m_use[e >> 1]));
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

        // O += P V: P from the S accumulators (their layout is the A fragment's), V^T fragments.
#pragma unroll
        for (int kk = 0; kk < S::kKeys / 16; ++kk) {
            const float *pa[4] = {&s[2 * kk][0], &s[2 * kk][2], &s[2 * kk + 1][0], &s[2 * kk + 1][2]};
            uint32_t a[4], a_lo[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                a[i] = Op::pack(pa[i][0], pa[i][1]);
                a_lo[i] = Op::residual(pa[i][0], pa[i][1], a[i]);
            }
            if constexpr (kFp8) {  // keys 2t, 2t+1 (and 2t+8, 2t+9) of dim n * 8 + g, widened
                constexpr int kP = S::kKvPitch;
                const unsigned char *v0 = v_tile + (kk * 16 + 2 * t4) * kP + g;
#pragma unroll
                for (int n = 0; n < kNT; ++n) {
                    const unsigned char *v = v0 + n * 8;
                    const uint32_t b0 = widen_fp8x2<T>(lds8(v) | (lds8(v + kP) << 8));
                    const uint32_t b1 = widen_fp8x2<T>(lds8(v + 8 * kP) | (lds8(v + 9 * kP) << 8));
                    Op::run(o[n], a, b0, b1);
                    if constexpr (Op::kSplitP) Op::run(o[n], a_lo, b0, b1);
                }
            } else {
#pragma unroll
                for (int n = 0; n < kNT; n += 2) {
                    uint32_t b[4];  // b0, b1 of dim n-tile n, then of n + 1
                    ldmatrix_x4<true, false>(b, v_tile_lm + SmemAddr(kk * 16 * S::kKvPitch + n * 16), S::kKvPitch, v_off);
                    Op::run(o[n], a, b[0], b[1]);
                    Op::run(o[n + 1], a, b[2], b[3]);
                    if constexpr (Op::kSplitP) {
                        Op::run(o[n], a_lo, b[0], b[1]);
                        Op::run(o[n + 1], a_lo, b[2], b[3]);
                    }
                }
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
        const float inv = l_run[h] > 0.0f ? p.v_scale / l_run[h] : 0.0f;  // v_scale: 1 unless FP8 KV
        uint32_t *out = reinterpret_cast<uint32_t *>(static_cast<T *>(p.out) + w.qo_offset(r, p, kHeadDim) + 2 * t4);
#pragma unroll
        for (int n = 0; n < kNT; ++n) out[n * 4] = Op::pack(o[n][2 * h] * inv, o[n][2 * h + 1] * inv);
    }
}

template <typename T, typename KV, int kHeadDim>
cudaError_t launch_prefill_mma(const AttnParams &p, dim3 grid, cudaStream_t stream) {
    using S = MmaShape<int(sizeof(KV)), kHeadDim>;
    static std::atomic<uint64_t> opted_in{0};
    auto *kernel = prefill_mma_kernel<T, KV, kHeadDim>;
    if (cudaError_t err = opt_in_dynamic_smem(reinterpret_cast<const void *>(kernel), S::kSmemBytes, opted_in);
        err != cudaSuccess)
        return err;
    KVC_LAUNCH(kernel, grid, S::kThreads, S::kSmemBytes, stream, p);
    return cudaGetLastError();
}

}  // namespace kvc::cuda::detail
