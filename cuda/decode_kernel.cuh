// Paged decode attention (one query token per sequence), laid out to be limited by memory bandwidth
// rather than by instruction issue. Instantiated per KV dtype x head dim x query rows per CTA
// (1, 2, 4, 8, 16: the GQA group rounded up to a power of two) x score unit (CUDA or tensor cores)
// in decode_<dtype>.cu; prefill and append run prefill_mma_kernel.cuh or attention_kernel.cuh.
//
// Work split. A CTA of 4 warps serves one (sequence, KV head, chunk of up to 16 query heads of the
// KV head's group[, split-K partition]), so every K/V byte it reads serves the whole chunk. A warp
// holds kWarpRows <= 4 query rows (q and accumulators in registers); kRowWarps warps cover the CTA's
// rows, and the warps of the other dimension, the token groups, split the keys: group g streams
// keys [g * kTokens, (g + 1) * kTokens) of every CTA tile into its own double-buffered stage and keeps
// its own online-softmax state; the groups are merged once, at the end. With up to 4 rows (GQA
// groups <= 4) each warp is a token group of its own, its stage is private and the tile loop has no
// CTA barrier at all (__syncwarp only); with 8 or 16 rows the warps of a group share its stage and
// one __syncthreads per tile orders it.
//
// Per tile, what one lane issues (the budget that tests/gpu/kernel_report.sh measures):
//   loads    lane-contiguous 16-byte cp.async, so a warp request uses whole sectors; the byte offset
//            of each key is computed once per key (not per chunk) by one thread of its group, from
//            a block-table entry fetched a tile earlier, with a multiply-shift division (FastDiv);
//   scores   on CUDA cores, lane (j, c) of a step dots 8 dims of key j with every row's q
//            (registers, fp32, pre-scaled by softmax scale x log2 e); the rows' FMA chains
//            interleave. The partial dots of a (key, row) meet in the lane that owns that score
//            through a warp-private scratch, XOR-swizzled so both its writes and its 16-byte reads
//            are conflict-free. On tensor cores (MmaT: q f16/bf16 with KV in q's type or fp8, 4
//            rows a warp), S^T = K Q^T on mma.m16n8k16 with q's fragments in registers and K rows
//            XOR-swizzled in shared memory, so the fragment loads are conflict-free: no widening of
//            K, no cross-lane reduction;
//   softmax  in log2 units, one score per lane; the running reference max is raised only when a
//            score exceeds it by more than 2^8 (lazy rescale: exact, the accumulators merely carry a
//            factor <= 256), so a tile that raises nothing rescales nothing;
//   P.V      each V element is widened once and accumulated into every row of the warp.
#pragma once

#include <atomic>
#include <cstdint>

#include "attention_params.cuh"
#include "cta_work.cuh"
#include "device_primitives.cuh"
#include "dtype_convert.cuh"
#include "mma_ops.cuh"

namespace kvc::cuda::detail {

constexpr int pow2_ceil(int x) { return x <= 1 ? 1 : 2 * pow2_ceil((x + 1) / 2); }
constexpr int pow2_floor(int x) { return x < 2 ? 1 : 2 * pow2_floor(x / 2); }
constexpr int min_of(int a, int b) { return a < b ? a : b; }
constexpr int max_of(int a, int b) { return a > b ? a : b; }

// How the 32 lanes of a warp cover one key row when each lane takes kElems of its dims: kLanes
// lanes per key (padded to a power of two: head dims 80 / 96 leave some lanes without dims), so a
// step covers kKeysPerStep keys. A lane's dims come in pieces of at most 16 bytes; piece `k` of
// lane c starts at dim (k * kLanes + c) * kPieceElems, so the lanes of a key read consecutive
// pieces: one shared-memory wavefront per 128 contiguous bytes, no bank conflict.
template <int kElemBytes, int kHeadDim, int kElems>
struct LaneMap {
    static constexpr int kLanes = pow2_ceil(kHeadDim / kElems);
    static constexpr int kKeysPerStep = 32 / kLanes;
    static constexpr int kPieceElems = kElems * kElemBytes > 16 ? 16 / kElemBytes : kElems;
    static constexpr int kPieces = kElems / kPieceElems;
    static_assert(kLanes <= 32, "a key row takes at most one warp");
    __device__ __forceinline__ static int dim(int lane_in_key, int piece) {
        return (piece * kLanes + lane_in_key) * kPieceElems;
    }
    // Whether that piece exists (always, unless the head dim left lanes over).
    __device__ __forceinline__ static bool has(int lane_in_key, int piece) {
        return kLanes * kElems == kHeadDim || dim(lane_in_key, piece) < kHeadDim;
    }
};

// The probabilities of one key for a warp's kRows rows, stored adjacently: one 4-, 8- or 16-byte
// shared-memory load (a broadcast to the lanes that take that key).
template <int kRows>
__device__ __forceinline__ void load_probs(const float *src, float (&out)[kRows]) {
    if constexpr (kRows == 4) {
        const float4 v = *reinterpret_cast<const float4 *>(src);
        out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
    } else if constexpr (kRows == 2) {
        const float2 v = *reinterpret_cast<const float2 *>(src);
        out[0] = v.x; out[1] = v.y;
    } else {
        out[0] = src[0];
    }
}

// Whether the tensor-core scores can take this KV row: whole 128-byte lines of 16-byte chunks, a
// power of two of them (the K swizzle permutes chunks within 8-chunk groups).
template <typename KV, int kHeadDim>
constexpr bool kTensorCoreRow = kHeadDim * int(sizeof(KV)) >= 128 && (kHeadDim & (kHeadDim - 1)) == 0;

// Compile-time shape of one decode instantiation, and its shared-memory carve-up. MmaT: void for
// scores on CUDA cores, else the mma input type (q's dtype) of tensor-core scores.
template <typename KV, int kHeadDim, int kRows, typename MmaT>
struct DecodeShape {
    using Kv = KV;
    static constexpr int kDim = kHeadDim;
    static constexpr bool kTensorCores = !std::is_void_v<MmaT>;
    static constexpr int kThreads = 128;
    static constexpr int kWarps = kThreads / 32;
    static constexpr int kElemBytes = int(sizeof(KV));
    static constexpr int kRowBytes = kHeadDim * kElemBytes;  // one key of one head, whole 16-byte chunks
    static constexpr int kChunksPerRow = kRowBytes / 16;

    static constexpr int kWarpRows = kRows < 4 ? kRows : 4;
    static constexpr int kRowWarps = kRows / kWarpRows;
    static constexpr int kGroups = kWarps / kRowWarps;  // token groups
    static constexpr int kGroupThreads = 32 * kRowWarps;

    using KMap = LaneMap<kElemBytes, kHeadDim, 8>;
    // P.V: 4 dims per lane keeps the accumulators at 16 registers for 4 rows; d = 256 needs 8.
    using VMap = LaneMap<kElemBytes, kHeadDim, (kHeadDim / 32 > 4 ? kHeadDim / 32 : 4)>;

    // Score scratch: one 32-float row (128 B) per (row, step) of partial dots. It overlays the K
    // rows of its own step when the warp owns its stage and they are large enough (K is dead once
    // the step's dots are taken), else it has its own space.
    static constexpr int kStepKBytes = KMap::kKeysPerStep * kRowBytes;
    static constexpr bool kScratchInStage =
        kRowWarps == 1 && kWarpRows * 128 <= kStepKBytes && kStepKBytes % 128 == 0;
    static constexpr int kScratchStepStride = kScratchInStage ? kStepKBytes : kWarpRows * 128;

    // Keys per group and tile: every lane owns at most one score (kTokens * kWarpRows <= 32), a
    // group's stage holds at most 4 KiB of K+V and a scratch of its own (CUDA-core scores only) at
    // most 2 KiB: 6 CTAs of 4 warps fit an H100 SM's shared memory.
    static constexpr int kTokens = max_of(
        max_of(kTensorCores ? 1 : KMap::kKeysPerStep, VMap::kKeysPerStep),
        pow2_floor(min_of(min_of(32 / kWarpRows, 2048 / kRowBytes),
                          kScratchInStage || kTensorCores ? 32 : 16 * KMap::kKeysPerStep / kWarpRows)));
    // Tensor-core scores: 16-key m-tiles (a group tile of fewer keys repeats its rows in the rest).
    static constexpr int kMTiles = (kTokens + 15) / 16;
    static_assert(!kTensorCores || (kWarpRows == 4 && kTensorCoreRow<KV, kHeadDim>),
                  "tensor-core scores: 4 rows a warp, rows of 8-chunk groups");
    // 16-byte chunk position of K row `key`'s chunk `col` in shared memory: XOR-swizzled within its
    // group of 8 for tensor-core scores (the 8 keys of a fragment load then hit 8 bank groups),
    // plain for CUDA-core scores (a key's lanes read its row front to back).
    __device__ __forceinline__ static int k_chunk(int key, int col) {
        return kTensorCores ? col ^ (key & 7) : col;
    }
    static constexpr int kCtaTokens = kTokens * kGroups;
    static constexpr int kKSteps = kTokens / KMap::kKeysPerStep;
    static constexpr int kVSteps = kTokens / VMap::kKeysPerStep;
    static constexpr int kScores = kTokens * kWarpRows;
    static_assert(kScores <= 32, "one score per lane");

    // Loads: group thread g copies chunks g, g + kGroupThreads, ... of the tile's K (and V) rows.
    static constexpr int kChunksPerTile = kTokens * kChunksPerRow;
    static constexpr int kLoadIters = (kChunksPerTile + kGroupThreads - 1) / kGroupThreads;
    // Key (row) and 16-byte column of chunk i * kGroupThreads + g: consecutive chunks of a row on
    // consecutive threads. Compile-time arithmetic (the column fixed per thread) whenever a row's
    // chunk count divides, or is a multiple of, the group's threads: every head dim but 80 and 96.
    static constexpr bool kColumnFixed = kGroupThreads % kChunksPerRow == 0;
    __device__ __forceinline__ static void chunk(int i, int g, int &key, int &col) {
        if constexpr (kColumnFixed) {
            key = i * (kGroupThreads / kChunksPerRow) + g / kChunksPerRow;
            col = g % kChunksPerRow;
        } else if constexpr (kChunksPerRow % kGroupThreads == 0) {
            key = i * kGroupThreads / kChunksPerRow;
            col = i * kGroupThreads % kChunksPerRow + g;
        } else {
            const int c = i * kGroupThreads + g;
            key = c / kChunksPerRow;
            col = c - key * kChunksPerRow;
        }
    }

    static constexpr int kStageBytes = 2 * kTokens * kRowBytes;  // K rows, then V rows
    static constexpr int kScratchOffset = kGroups * 2 * kStageBytes;
    static constexpr int kScratchBytes = kScratchInStage || kTensorCores ? 0 : kWarps * kKSteps * kWarpRows * 128;
    static constexpr int kProbsOffset = kScratchOffset + kScratchBytes;  // kScores floats per warp
    static constexpr int kOffsetsOffset = kProbsOffset + kWarps * 32 * 4;  // key offsets, 2 stages per group
    static constexpr int kLoopBytes = kOffsetsOffset + kGroups * 2 * kTokens * 8;
    // After the loop: (m, l) and the accumulators of every warp, for the merge of the token groups.
    static constexpr int kMergeBytes = kWarps * kWarpRows * (kHeadDim + 2) * 4;
    static constexpr int kSmemBytes = max_of(kLoopBytes, kMergeBytes);
    static_assert(kSmemBytes <= 48 * 1024, "no dynamic shared-memory opt-in needed");

    // Registers: q (fp32: 8 dims x rows; tensor cores: packed pairs, head dim / 8 of them) and the
    // accumulators; within 80 a thread, 6 CTAs (24 warps) fit an SM. CUDA-core scores with 4 rows
    // fit 80 only in the plain case (16-bit K, scratch in the warp's own stage, every lane with
    // dims): rows shared across warps (8, 16), head dims 80 / 96, f32 and fp8 K spilled there
    // (ptxas, sm_90: 4 to 64 bytes), so they take 96 (5 CTAs).
    static constexpr int kQRegs = kTensorCores ? kHeadDim / 8 : 8 * kWarpRows;
    static constexpr bool kPlainCudaCores = kElemBytes == 2 && kScratchInStage && KMap::kLanes * 8 == kHeadDim;
    static constexpr int kMinCtasPerSm = kQRegs + kWarpRows * VMap::kPieces * VMap::kPieceElems > 48 ? 4
                                         : kTensorCores || kWarpRows < 4 || kPlainCudaCores     ? 6
                                                                                                 : 5;
};

// Shared-memory scratch row of partial dots: 8 units of 16 bytes, unit u stored at u ^ (row & 7).
// Writes (lane l to float l) stay a permutation of the 32 banks; the owners' 16-byte reads of
// adjacent rows land in distinct bank groups.
__device__ __forceinline__ int swizzled_float(int row, int f) { return (((f >> 2) ^ (row & 7)) << 2) | (f & 3); }

// CUDA-core scores, step 1: this lane's partial dots (its 8 dims of key (step, kj) with every row's
// q), one scratch row of 32 lanes per (row, step). Over the step's own K rows when the scratch lives
// in the stage: the barrier before the stores lets every lane finish reading them first.
template <class S>
__device__ __forceinline__ void cuda_core_partial_dots(const unsigned char *k_tile, unsigned char *scratch,
                                                       const float (&q)[S::kWarpRows][8], int kc, int kj, int lane) {
    using KMap = typename S::KMap;
    constexpr int R = S::kWarpRows;
#pragma unroll
    for (int s = 0; s < S::kKSteps; ++s) {
        const unsigned char *k_row = k_tile + (s * KMap::kKeysPerStep + kj) * S::kRowBytes;
        float kf[8];
#pragma unroll
        for (int k = 0; k < KMap::kPieces; ++k) {
            if (KMap::has(kc, k))
                widen_vec<typename S::Kv, KMap::kPieceElems>(k_row + KMap::dim(kc, k) * S::kElemBytes,
                                                             kf + k * KMap::kPieceElems);
            else
#pragma unroll
                for (int e = 0; e < KMap::kPieceElems; ++e) kf[k * KMap::kPieceElems + e] = 0.0f;
        }
        float dot[R];
#pragma unroll
        for (int r = 0; r < R; ++r) dot[r] = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e)
#pragma unroll
            for (int r = 0; r < R; ++r) dot[r] = fmaf(q[r][e], kf[e], dot[r]);
        if constexpr (S::kScratchInStage) warp_barrier();
        float *row = reinterpret_cast<float *>(scratch + s * S::kScratchStepStride);
#pragma unroll
        for (int r = 0; r < R; ++r) row[r * 32 + swizzled_float(r * S::kKSteps + s, lane)] = dot[r];
    }
}

// CUDA-core scores, step 2: the owner of (row r, key t) sums that score's kLanes partial dots.
template <class S>
__device__ __forceinline__ float sum_partial_dots(const unsigned char *scratch, int r, int t) {
    using KMap = typename S::KMap;
    const int s = t / KMap::kKeysPerStep, j = t % KMap::kKeysPerStep;
    const int srow = r * S::kKSteps + s;
    const float *row = reinterpret_cast<const float *>(scratch + s * S::kScratchStepStride) + r * 32;
    float sum = 0.0f;
#pragma unroll
    for (int u = 0; u < KMap::kLanes / 4; ++u) {
        const float4 v = *reinterpret_cast<const float4 *>(row + swizzled_float(srow, j * KMap::kLanes + 4 * u));
        sum += (v.x + v.y) + (v.z + v.w);
    }
    return sum;
}

// Tensor-core scores: S^T = K Q^T for the group tile, A = 16 keys x 16 dims per m-tile (rows past
// kTokens repeat earlier keys and are dropped), B = q's fragments; lane (g, t) gets keys g and
// g + 8, rows 2t and 2t + 1 (valid for t < 2: 4 rows), stored scaled in probs[key * 4 + row].
template <class S, typename MmaT>
__device__ __forceinline__ void tensor_core_scores(const unsigned char *k_tile, const uint32_t (&qf)[S::kDim / 16][2],
                                                   float scale, int lane, float *probs) {
    constexpr int kT = S::kTokens;
    const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int mt = 0; mt < S::kMTiles; ++mt) {
        const int key_lo = (mt * 16 + g) % kT, key_hi = (mt * 16 + g + 8) % kT;
        const unsigned char *row_lo = k_tile + key_lo * S::kRowBytes + 4 * t4;
        const unsigned char *row_hi = k_tile + key_hi * S::kRowBytes + 4 * t4;
        float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int kk = 0; kk < S::kDim / 16; ++kk) {
            uint32_t a[4];
            if constexpr (S::kElemBytes == 1) {  // 16 dims = one chunk; dims 4t..4t+3 from one load
                const uint32_t lo = lds32(row_lo + S::k_chunk(key_lo, kk) * 16);
                const uint32_t hi = kT > 8 ? lds32(row_hi + S::k_chunk(key_hi, kk) * 16) : lo;
                a[0] = widen_fp8x2<MmaT>(lo);
                a[1] = widen_fp8x2<MmaT>(hi);
                a[2] = widen_fp8x2<MmaT>(lo >> 16);
                a[3] = widen_fp8x2<MmaT>(hi >> 16);
            } else {  // 16 dims = two chunks; dims 2t, 2t + 1 of each
                a[0] = lds32(row_lo + S::k_chunk(key_lo, 2 * kk) * 16);
                a[2] = lds32(row_lo + S::k_chunk(key_lo, 2 * kk + 1) * 16);
                a[1] = kT > 8 ? lds32(row_hi + S::k_chunk(key_hi, 2 * kk) * 16) : a[0];
                a[3] = kT > 8 ? lds32(row_hi + S::k_chunk(key_hi, 2 * kk + 1) * 16) : a[2];
            }
            MmaOp<MmaT>::run(c, a, qf[kk][0], qf[kk][1]);
        }
        if (t4 < 2) {
            if (mt * 16 + g < kT)
                *reinterpret_cast<float2 *>(probs + (mt * 16 + g) * 4 + 2 * t4) = make_float2(c[0] * scale, c[1] * scale);
            if (mt * 16 + g + 8 < kT)
                *reinterpret_cast<float2 *>(probs + (mt * 16 + g + 8) * 4 + 2 * t4) = make_float2(c[2] * scale, c[3] * scale);
        }
    }
}

// The running softmax state of the score a lane owns: its row's reference max (log2 units) and the
// lane's share of that row's exp-sum; the row's accumulators live with the P.V lanes.
struct SoftmaxState {
    float m_ref, l;
};

// Online softmax over one group tile: the row max over the row's kTokens lanes; the reference max
// is raised only when some score exceeds it by more than kRescaleSlack (2^8: the first visible keys,
// or a much larger score), then every row's state and accumulators are rescaled. Returns this
// lane's probability (relative to the reference max, so at most 2^8).
template <class S, int kAccElems>
__device__ __forceinline__ float softmax_step(float x, SoftmaxState &st, float (&acc)[S::kWarpRows][kAccElems]) {
    constexpr float kRescaleSlack = 8.0f;
    const float neg_inf = -__int_as_float(0x7f800000);
    float mx = x;
#pragma unroll
    for (int o = 1; o < S::kTokens; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if (warp_any(mx > st.m_ref + kRescaleSlack)) {
        const float m_new = fmaxf(st.m_ref, mx);
        const float corr = m_new == neg_inf ? 1.0f : fast_exp2(st.m_ref - m_new);
        st.m_ref = m_new;
        st.l *= corr;
#pragma unroll
        for (int r = 0; r < S::kWarpRows; ++r) {
            const float c = shfl_idx(corr, r * S::kTokens);  // lane r * kTokens owns a score of row r
#pragma unroll
            for (int e = 0; e < kAccElems; ++e) acc[r][e] *= c;
        }
    }
    const float p = x == neg_inf ? 0.0f : fast_exp2(x - st.m_ref);
    st.l += p;
    return p;
}

// acc += P V for this lane's dims (lane vc of a key's VMap lanes) of the keys vj, vj + kKeysPerStep,
// ...: each V element widened once and used for every row.
template <class S, int kAccElems>
__device__ __forceinline__ void accumulate_pv(const unsigned char *v_tile, const float *probs, int vc, int vj,
                                              float (&acc)[S::kWarpRows][kAccElems]) {
    using VMap = typename S::VMap;
    constexpr int R = S::kWarpRows;
#pragma unroll
    for (int s = 0; s < S::kVSteps; ++s) {
        const int t = s * VMap::kKeysPerStep + vj;
        float pt[R];
        load_probs<R>(probs + t * R, pt);
        const unsigned char *v_row = v_tile + t * S::kRowBytes;
#pragma unroll
        for (int k = 0; k < VMap::kPieces; ++k) {
            if (VMap::has(vc, k)) {
                float vf[VMap::kPieceElems];
                widen_vec<typename S::Kv, VMap::kPieceElems>(v_row + VMap::dim(vc, k) * S::kElemBytes, vf);
#pragma unroll
                for (int e = 0; e < VMap::kPieceElems; ++e)
#pragma unroll
                    for (int r = 0; r < R; ++r)
                        acc[r][k * VMap::kPieceElems + e] = fmaf(pt[r], vf[e], acc[r][k * VMap::kPieceElems + e]);
            }
        }
    }
}

// Epilogue: row sums over a row's lanes, accumulators over the lanes that took other keys of a
// step; then every warp's (m, l) and accumulators meet in shared memory (the stages are free once
// every warp is past its loop), and each thread combines whole output elements over the token
// groups: out = sum_g 2^(m_g - M) acc_g / sum_g 2^(m_g - M) l_g, or, split-K, the unnormalized
// partial with (M, L) for attention_reduce_kernel.
template <class S, int kAccElems>
__device__ __forceinline__ void finish_rows(unsigned char *smem, SoftmaxState st, float (&acc)[S::kWarpRows][kAccElems],
                                            const CtaWork &w, const AttnParams &p, int lane, int warp, int tid) {
    using VMap = typename S::VMap;
    constexpr int R = S::kWarpRows, kT = S::kTokens, D = S::kDim;
    const float neg_inf = -__int_as_float(0x7f800000);
#pragma unroll
    for (int o = 1; o < kT; o <<= 1) st.l += __shfl_xor_sync(0xffffffffu, st.l, o);
#pragma unroll
    for (int o = VMap::kLanes; o < 32; o <<= 1)
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int e = 0; e < kAccElems; ++e) acc[r][e] += __shfl_xor_sync(0xffffffffu, acc[r][e], o);

    __syncthreads();
    float *const m_s = reinterpret_cast<float *>(smem);
    float *const l_s = m_s + S::kWarps * R;
    float *const acc_s = l_s + S::kWarps * R;
    if (lane % kT == 0 && lane / kT < R) {
        m_s[warp * R + lane / kT] = st.m_ref;
        l_s[warp * R + lane / kT] = st.l;
    }
    const int vc = lane % VMap::kLanes;
    if (lane < VMap::kLanes) {
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int k = 0; k < VMap::kPieces; ++k)
                if (VMap::has(vc, k))
#pragma unroll
                    for (int e = 0; e < VMap::kPieceElems; ++e)
                        acc_s[(warp * R + r) * D + VMap::dim(vc, k) + e] = acc[r][k * VMap::kPieceElems + e];
    }
    __syncthreads();
    for (int i = tid; i < S::kWarpRows * S::kRowWarps * D; i += S::kThreads) {
        const int row = i / D, d = i - row * D;
        if (row >= w.gc) break;  // rows are consecutive in i
        const int rw = row / R, r = row - rw * R;
        float m_max = neg_inf;
#pragma unroll
        for (int g = 0; g < S::kGroups; ++g) m_max = fmaxf(m_max, m_s[(g * S::kRowWarps + rw) * R + r]);
        float sum = 0.0f, a = 0.0f;
#pragma unroll
        for (int g = 0; g < S::kGroups; ++g) {
            const int wr = (g * S::kRowWarps + rw) * R + r;
            const float scale = m_s[wr] == neg_inf ? 0.0f : fast_exp2(m_s[wr] - m_max);
            sum += l_s[wr] * scale;
            a += acc_s[wr * D + d] * scale;
        }
        if (p.num_parts == 1) {
            store_qo(p.out, p.q_dtype, w.qo_offset(row, p, D) + d, sum > 0.0f ? a * p.v_scale / sum : 0.0f);
        } else {
            const int64_t prow = (int64_t(w.seq) * p.num_q_heads + w.head_of_row(row, p)) * p.num_parts + blockIdx.x;
            p.ws_acc[prow * D + d] = a * p.v_scale;
            if (d == 0) {
                p.ws_ml[prow * 2] = m_max;  // log2 units (attention_reduce_kernel)
                p.ws_ml[prow * 2 + 1] = sum;
            }
        }
    }
}

// Where one key lives: its block-table entry and slot, fetched a tile before the key's byte offset
// is published for the copies (so the table load's latency hides behind a tile of work).
struct KeySlot {
    int32_t block, slot;  // slot < 0: past the CTA's keys, copied as a zero fill
};

template <typename KV, int kHeadDim, int kRows, typename MmaT>
__global__ void __launch_bounds__(DecodeShape<KV, kHeadDim, kRows, MmaT>::kThreads,
                                  DecodeShape<KV, kHeadDim, kRows, MmaT>::kMinCtasPerSm)
    paged_decode_kernel(const AttnParams p) {
    using S = DecodeShape<KV, kHeadDim, kRows, MmaT>;
    using KMap = typename S::KMap;
    using VMap = typename S::VMap;
    constexpr int R = S::kWarpRows;
    constexpr int kT = S::kTokens;
    constexpr float kLog2e = 1.4426950408889634f;
    const float kNegInf = -__int_as_float(0x7f800000);

    KVC_DYNAMIC_SMEM(smem);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int row_warp = warp % S::kRowWarps, group = warp / S::kRowWarps;
    const int gtid = row_warp * 32 + lane;  // thread index inside the token group

    CtaWork w;
    if (!cta_work(p, 0, &w)) return;  // q_len 0: no query, nothing to write (the reduce skips it too)
    int32_t range_begin = w.key_begin, range_end = w.key_end;
    if (p.num_parts > 1) {
        range_begin = w.key_begin + int32_t(blockIdx.x) * p.part_size;
        range_end = min(w.key_end, range_begin + p.part_size);
        if (blockIdx.x > 0 && range_begin >= w.key_end) return;  // the reduce never reads this partition
    }
    const int row0 = row_warp * R;  // the warp's first row of the CTA

    // q of the warp's rows. CUDA-core scores: fp32, this lane's key dims, scaled so that a dot is a
    // log2-unit score. Tensor-core scores: B fragments (dims x rows, row g = lane / 4 of the warp's
    // rows, zero past them) as stored, scaled after the product; for fp8 K the k index is permuted
    // as the K fragments are (4 consecutive dims from one 32-bit load).
    [[maybe_unused]] const int kc = lane % KMap::kLanes, kj = lane / KMap::kLanes;
    [[maybe_unused]] const int g = lane >> 2, t4 = lane & 3;
    [[maybe_unused]] float q[S::kTensorCores ? 1 : R][8];
    [[maybe_unused]] uint32_t qf[S::kTensorCores ? kHeadDim / 16 : 1][2];
    const float score_scale = p.q_scale * kLog2e;
    if constexpr (S::kTensorCores) {
        const bool live = g < R && row0 + g < w.gc;
        const MmaT *q_row = static_cast<const MmaT *>(p.q) + (live ? w.qo_offset(row0 + g, p, kHeadDim) : 0);
#pragma unroll
        for (int kk = 0; kk < kHeadDim / 16; ++kk)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int d = 16 * kk + (S::kElemBytes == 1 ? 4 * t4 + 2 * h : 2 * t4 + 8 * h);
                qf[kk][h] = live ? *reinterpret_cast<const uint32_t *>(q_row + d) : 0u;
            }
    } else {
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int k = 0; k < KMap::kPieces; ++k)
#pragma unroll
                for (int e = 0; e < KMap::kPieceElems; ++e) {
                    const int d = KMap::dim(kc, k) + e;
                    const bool live = row0 + r < w.gc && KMap::has(kc, k);
                    q[r][k * KMap::kPieceElems + e] =
                        live ? load_qo(p.q, p.q_dtype, w.qo_offset(row0 + r, p, kHeadDim) + d) * score_scale : 0.0f;
                }
    }

    // The score this lane owns: key own_t of the group's tile for row own_r (lanes of one row are
    // contiguous, so a row's max is a shuffle tree over kT lanes). Lanes past kScores own none.
    const int own_r = lane / kT, own_t = lane % kT;
    const bool owns = own_r < R;
    const int32_t qpos = w.first_pos;
    const float slope = p.alibi_slopes && owns && row0 + own_r < w.gc
                            ? p.alibi_slopes[w.head_of_row(row0 + own_r, p)] * kLog2e
                            : 0.0f;
    const float softcap = p.softcap * kLog2e;  // the cap in log2 units: same tanh argument
    const float inv_softcap = p.softcap > 0.0f ? 1.0f / softcap : 0.0f;

    unsigned char *const stages = smem + group * 2 * S::kStageBytes;
    float *const probs = reinterpret_cast<float *>(smem + S::kProbsOffset) + warp * 32;
    int64_t *const key_offsets = reinterpret_cast<int64_t *>(smem + S::kOffsetsOffset) + group * 2 * kT;
    unsigned char *const own_scratch = smem + S::kScratchOffset + warp * (S::kKSteps * R * 128);

    const int32_t *table = p.block_tables + int64_t(w.seq) * p.max_blocks_per_seq;
    const unsigned char *k_base = p.layer_base + int64_t(w.kv_head) * p.head_stride;
    const unsigned char *v_base = k_base + p.kv_stride;
    auto first_key = [&](int32_t tile) { return range_begin + tile * S::kCtaTokens + group * kT; };

    // Key bookkeeping: group thread t < kT tracks key t of the group's tiles. A key's byte offset in
    // its block is slot * token_stride < block_size * head_dim * 4 bytes: 32-bit arithmetic.
    const bool tracks = gtid < kT;
    const int32_t token_stride = int32_t(p.token_stride);
    auto fetch = [&](int32_t tile) {
        const int32_t pos = first_key(tile) + gtid;
        const int32_t idx = int32_t(p.block_div.div(uint32_t(pos)));
        const bool live = tracks && pos < range_end;
        return KeySlot{live ? table[idx] : 0, live ? pos - idx * p.block_size : -1};
    };
    auto publish = [&](const KeySlot &k, int stage) {
        if (tracks)
            // PagedStrides::token_row with the in-block part in 32 bits (a block is far below 2 GiB).
            key_offsets[stage * kT + gtid] = k.slot < 0 ? 0 : int64_t(k.block) * p.block_stride + k.slot * token_stride;
    };
    // The group's share of tile `tile`'s copies (K and V), keys past range_end zero-filled. Only the
    // key offset changes from tile to tile: destinations and column sources are per-thread constants.
    const SmemAddr stage0 = smem_addr(stages);
    int key0, col0;
    S::chunk(0, gtid, key0, col0);
    const unsigned char *const k_col0 = k_base + col0 * 16;
    const unsigned char *const v_col0 = v_base + col0 * 16;
    auto issue = [&](int32_t tile, int stage) {
        const int32_t valid_keys = range_end - first_key(tile);
        const int64_t *offsets = key_offsets + stage * kT;
        const SmemAddr k_dst = stage0 + stage * S::kStageBytes, v_dst = k_dst + kT * S::kRowBytes;
#pragma unroll
        for (int i = 0; i < S::kLoadIters; ++i) {
            if (S::kChunksPerTile % S::kGroupThreads == 0 || i * S::kGroupThreads + gtid < S::kChunksPerTile) {
                int key, col;
                S::chunk(i, gtid, key, col);
                const int64_t off = offsets[key];
                const bool valid = key < valid_keys;
                const unsigned char *k_col = S::kColumnFixed ? k_col0 : k_base + col * 16;
                const unsigned char *v_col = S::kColumnFixed ? v_col0 : v_base + col * 16;
                cp_async16(k_dst + key * S::kRowBytes + S::k_chunk(key, col) * 16, k_col + off, valid);
                cp_async16(v_dst + key * S::kRowBytes + col * 16, v_col + off, valid);
            }
        }
    };
    auto group_sync = [] {
        if constexpr (S::kRowWarps == 1) warp_barrier();
        else __syncthreads();
    };

    const int32_t span = range_end - range_begin;
    const int32_t num_tiles = span > 0 ? (span + S::kCtaTokens - 1) / S::kCtaTokens : 0;

    float acc[R][VMap::kPieces * VMap::kPieceElems];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int e = 0; e < VMap::kPieces * VMap::kPieceElems; ++e) acc[r][e] = 0.0f;
    SoftmaxState st{kNegInf, 0.0f};

    // Pipeline: the offsets of tile n + 1 are published during tile n - 1, its table entries fetched
    // during tile n - 2; its copies are issued at the top of tile n, after the one group barrier.
    KeySlot next = fetch(0);
    publish(next, 0);
    next = fetch(1);
    group_sync();
    if (num_tiles > 0) issue(0, 0);
    cp_async_commit();
    publish(next, 1);
    next = fetch(2);

    const int vc = lane % VMap::kLanes, vj = lane / VMap::kLanes;
    for (int32_t tile = 0; tile < num_tiles; ++tile) {
        cp_async_wait<0>();
        // Tile `tile` visible to the group; everyone is past tile - 1, whose stage is refilled now;
        // the offsets published last iteration are visible.
        group_sync();
        if (tile + 1 < num_tiles) issue(tile + 1, (tile + 1) & 1);
        cp_async_commit();
        publish(next, tile & 1);  // tile + 2 (its offsets' last reader issued tile, before the barrier)
        next = fetch(tile + 3);

        const unsigned char *k_tile = stages + (tile & 1) * S::kStageBytes;
        const unsigned char *v_tile = k_tile + kT * S::kRowBytes;
        unsigned char *scratch = S::kScratchInStage ? const_cast<unsigned char *>(k_tile) : own_scratch;
        (void)scratch;

        // 1-2. The score this lane owns (log2 units), masked, with ALiBi and soft-cap.
        float dot = 0.0f;
        if constexpr (S::kTensorCores) {
            tensor_core_scores<S, MmaT>(k_tile, qf, score_scale, lane, probs);
            warp_barrier();
            if (owns) dot = probs[own_t * R + own_r];
        } else {
            cuda_core_partial_dots<S>(k_tile, scratch, q, kc, kj, lane);
            warp_barrier();
            if (owns) dot = sum_partial_dots<S>(scratch, own_r, own_t);
        }
        float x = kNegInf;
        const int32_t pos = first_key(tile) + own_t;
        if (owns && pos < range_end) {
            if (p.alibi_slopes) dot += slope * float(pos - qpos);
            if (p.softcap > 0.0f) dot = softcap * tanhf(dot * inv_softcap);
            x = dot;
        }

        // 3. Online softmax; this lane's probability goes to its key's row vector in probs.
        const float pr = softmax_step<S>(x, st, acc);
        if (owns) probs[own_t * R + own_r] = pr;
        warp_barrier();

        // 4. acc += P V.
        accumulate_pv<S>(v_tile, probs, vc, vj, acc);
    }
    cp_async_wait<0>();

    finish_rows<S>(smem, st, acc, w, p, lane, warp, tid);
}

// Resident CTAs per SM of one instantiation on the current device, from the occupancy API (cached
// per device: it depends only on the kernel and the device).
template <typename KV, int kHeadDim, int kRows, typename MmaT>
cudaError_t decode_ctas_per_sm(int *n) {
    using S = DecodeShape<KV, kHeadDim, kRows, MmaT>;
    static std::atomic<int> cached[64];  // 0: not asked yet
    int dev = 0;
    if (cudaError_t err = cudaGetDevice(&dev); err != cudaSuccess) return err;
    if (dev >= 0 && dev < 64 && (*n = cached[dev].load(std::memory_order_relaxed)) > 0) return cudaSuccess;
    cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        n, reinterpret_cast<const void *>(paged_decode_kernel<KV, kHeadDim, kRows, MmaT>), S::kThreads, S::kSmemBytes);
    if (err == cudaSuccess && dev >= 0 && dev < 64) cached[dev].store(*n, std::memory_order_relaxed);
    return err;
}

template <typename KV, int kHeadDim, int kRows, typename MmaT>
cudaError_t launch_decode_kernel(const AttnParams &p, dim3 grid, cudaStream_t stream) {
    using S = DecodeShape<KV, kHeadDim, kRows, MmaT>;
    auto *kernel = paged_decode_kernel<KV, kHeadDim, kRows, MmaT>;
    KVC_LAUNCH(kernel, grid, S::kThreads, S::kSmemBytes, stream, p);
    return cudaGetLastError();
}

template <typename KV, int kHeadDim, int kRows, typename MmaT>
DecodeKernel decode_entry() {
    return {launch_decode_kernel<KV, kHeadDim, kRows, MmaT>, decode_ctas_per_sm<KV, kHeadDim, kRows, MmaT>};
}

template <typename KV, int kHeadDim, typename MmaT>
DecodeKernel decode_kernel_for_rows(int rows_idx) {
    if constexpr (std::is_void_v<MmaT>) {
        switch (rows_idx) {
            case 0: return decode_entry<KV, kHeadDim, 1, MmaT>();
            case 1: return decode_entry<KV, kHeadDim, 2, MmaT>();
            case 2: return decode_entry<KV, kHeadDim, 4, MmaT>();
            case 3: return decode_entry<KV, kHeadDim, 8, MmaT>();
            default: return decode_entry<KV, kHeadDim, 16, MmaT>();
        }
    } else if constexpr (!kTensorCoreRow<KV, kHeadDim>) {
        return decode_kernel_for_rows<KV, kHeadDim, void>(rows_idx);
    } else {  // tensor-core scores: 4 rows a warp
        switch (rows_idx) {
            case 3: return decode_entry<KV, kHeadDim, 8, MmaT>();
            case 4: return decode_entry<KV, kHeadDim, 16, MmaT>();
            default: return decode_entry<KV, kHeadDim, 4, MmaT>();
        }
    }
}

template <typename KV, typename MmaT>
DecodeKernel decode_kernel_for(int dim_idx, int rows_idx) {
    switch (dim_idx) {
        case 0: return decode_kernel_for_rows<KV, 64, MmaT>(rows_idx);
        case 1: return decode_kernel_for_rows<KV, 80, MmaT>(rows_idx);
        case 2: return decode_kernel_for_rows<KV, 96, MmaT>(rows_idx);
        case 3: return decode_kernel_for_rows<KV, 128, MmaT>(rows_idx);
        default: return decode_kernel_for_rows<KV, 256, MmaT>(rows_idx);
    }
}

// Tensor-core scores take q f16 / bf16 with KV in q's type (exact operands) or fp8 (widened to q's
// type exactly), from 4 rows up (below, an m16n8 product would be mostly padding) and q aligned for
// 32-bit pair loads; everything else scores on CUDA cores.
template <typename KV>
DecodeKernel find_decode_kernel(int dim_idx, int rows_idx, int32_t q_dtype, bool q_pairs_aligned) {
    const bool tc = rows_idx >= 2 && q_pairs_aligned;
    if constexpr (std::is_same_v<KV, __half> || std::is_same_v<KV, fp8_t>)
        if (tc && q_dtype == KVC_DTYPE_F16) return decode_kernel_for<KV, __half>(dim_idx, rows_idx);
    if constexpr (std::is_same_v<KV, __nv_bfloat16> || std::is_same_v<KV, fp8_t>)
        if (tc && q_dtype == KVC_DTYPE_BF16) return decode_kernel_for<KV, __nv_bfloat16>(dim_idx, rows_idx);
    return decode_kernel_for<KV, void>(dim_idx, rows_idx);
}

#define KVC_INSTANTIATE_DECODE(KV) template DecodeKernel find_decode_kernel<KV>(int, int, int32_t, bool);

}  // namespace kvc::cuda::detail
