// Host side of paged attention: validation of what the kernels assume, the split-K decision,
// instantiation lookup, and the split-K reduce kernel.
#include <algorithm>
#include <climits>

#include "attention_params.cuh"
#include "storage/cuda_api.hpp"
#include "cuda_check.cuh"
#include "device_primitives.cuh"
#include "dtype_convert.cuh"

namespace kvc::cuda {
namespace {

using detail::AttnLauncher;
using detail::AttnParams;

constexpr int kHeadDimCount = int(sizeof kHeadDims / sizeof kHeadDims[0]);
// Split-K partitions are never shorter than this: below it the partial writes and the reduce cost
// more than the parallelism gains.
constexpr int64_t kMinPartition = 256;
// Workspace sizing: enough partial rows for this many (sequence, KV head-chunk, partition) CTAs
// per query head — several waves on a 132-SM part.
constexpr int64_t kWorkspaceSeqParts = 1024;

template <typename KV>
AttnLauncher launcher_for(int idx) {
    static const AttnLauncher table[kHeadDimCount] = {
        detail::launch_attention_kernel<KV, 64>, detail::launch_attention_kernel<KV, 80>,
        detail::launch_attention_kernel<KV, 96>, detail::launch_attention_kernel<KV, 128>,
        detail::launch_attention_kernel<KV, 256>};
    return table[idx];
}

AttnLauncher find_launcher(int32_t kv_dtype, int idx) {
    switch (kv_dtype) {
        case KVC_DTYPE_F32: return launcher_for<float>(idx);
        case KVC_DTYPE_F16: return launcher_for<__half>(idx);
        case KVC_DTYPE_BF16: return launcher_for<__nv_bfloat16>(idx);
        case KVC_DTYPE_FP8_E4M3: return launcher_for<detail::fp8_t>(idx);
        default: return nullptr;
    }
}

template <typename T, typename KV>
AttnLauncher mma_launcher_for(int idx) {
    static const AttnLauncher table[kHeadDimCount] = {
        detail::launch_prefill_mma<T, KV, 64>, detail::launch_prefill_mma<T, KV, 80>,
        detail::launch_prefill_mma<T, KV, 96>, detail::launch_prefill_mma<T, KV, 128>,
        detail::launch_prefill_mma<T, KV, 256>};
    return table[idx];
}

// The tensor-core prefill for q F16/BF16 with KV in q's dtype or FP8; nullptr for other pairs.
AttnLauncher find_mma_launcher(int32_t q_dtype, int32_t kv_dtype, int idx) {
    const bool fp8 = kv_dtype == KVC_DTYPE_FP8_E4M3;
    if (q_dtype == KVC_DTYPE_F16 && (kv_dtype == q_dtype || fp8))
        return fp8 ? mma_launcher_for<__half, detail::fp8_t>(idx) : mma_launcher_for<__half, __half>(idx);
    if (q_dtype == KVC_DTYPE_BF16 && (kv_dtype == q_dtype || fp8))
        return fp8 ? mma_launcher_for<__nv_bfloat16, detail::fp8_t>(idx)
                   : mma_launcher_for<__nv_bfloat16, __nv_bfloat16>(idx);
    return nullptr;
}

// Rows (query token x query head) one CTA holds for this head dim; mirrors TileShape::kMaxRows.
int32_t max_rows(int32_t head_dim) { return std::max<int32_t>(1, detail::kMaxRowElems / head_dim); }

// The decode instantiation whose rows per CTA (a power of two up to kDecodeMaxRows) cover `chunk`
// query heads; rows past the chunk are computed on zeros and never stored.
detail::DecodeKernel find_decode_kernel(const AttentionArgs &a, int idx, int32_t chunk) {
    int rows_idx = 0;
    while ((1 << rows_idx) < chunk) ++rows_idx;
    const bool aligned = reinterpret_cast<uintptr_t>(a.q) % 4 == 0;
    switch (a.layout.dtype) {
        case KVC_DTYPE_F32: return detail::find_decode_kernel<float>(idx, rows_idx, a.q_dtype, aligned);
        case KVC_DTYPE_F16: return detail::find_decode_kernel<__half>(idx, rows_idx, a.q_dtype, aligned);
        case KVC_DTYPE_BF16: return detail::find_decode_kernel<__nv_bfloat16>(idx, rows_idx, a.q_dtype, aligned);
        default: return detail::find_decode_kernel<detail::fp8_t>(idx, rows_idx, a.q_dtype, aligned);
    }
}

// Combines the partitions of one (sequence, query head): out = sum_i 2^(m_i - M) acc_i / L with
// M = max m_i and L = sum_i 2^(m_i - M) l_i (the decode kernel's maxima are in log2 units). One
// thread per output dim. A sequence without a query (q_len 0) has no output row: its
// query_start_loc is the next sequence's first token, which must not be written.
__global__ void attention_reduce_kernel(const float *__restrict__ ws_acc, const float *__restrict__ ws_ml,
                                        const int32_t *__restrict__ seq_lens,
                                        const int32_t *__restrict__ query_start_loc, void *out, int32_t q_dtype,
                                        int32_t num_q_heads, int32_t head_dim, int32_t num_parts,
                                        int32_t part_size, int32_t window) {
    const int head = blockIdx.x;
    const int seq = blockIdx.y;
    if (query_start_loc[seq + 1] - query_start_loc[seq] != 1) return;
    const int32_t ctx_len = seq_lens[seq];
    const int32_t key_begin = window > 0 ? max(0, ctx_len - window) : 0;
    const int32_t span = ctx_len - key_begin;
    const int32_t parts = max(1, min(num_parts, (span + part_size - 1) / part_size));
    const int64_t row0 = (int64_t(seq) * num_q_heads + head) * num_parts;

    float m_max = -__int_as_float(0x7f800000);
    for (int i = 0; i < parts; ++i)
        if (ws_ml[(row0 + i) * 2 + 1] > 0.0f) m_max = fmaxf(m_max, ws_ml[(row0 + i) * 2]);
    const int64_t token = query_start_loc[seq];
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
        float sum = 0.0f, acc = 0.0f;
        for (int i = 0; i < parts; ++i) {
            const float l = ws_ml[(row0 + i) * 2 + 1];
            if (!(l > 0.0f)) continue;
            const float w = exp2f(ws_ml[(row0 + i) * 2] - m_max);
            sum += l * w;
            acc += ws_acc[(row0 + i) * head_dim + d] * w;
        }
        detail::store_qo(out, q_dtype, (token * num_q_heads + head) * head_dim + d, sum > 0.0f ? acc / sum : 0.0f);
    }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Split-K for decode: the keys of the longest sequence (its window, if any) in partitions of
// part_size, each partition a CTA of its own, combined by attention_reduce_kernel. A forced
// partition size (> 0) is taken as given. Auto (0) splits only while the (sequence, KV head chunk)
// CTAs leave resident slots of one wave empty (the occupancy API's CTAs per SM x SMs), and into at
// most as many partitions as fill them: a second, partial wave plus the reduce would cost more than
// the idle slots save (the headline, 512 CTAs against 132 x 6 slots, runs unsplit).
kvc_status plan_split_k(const AttentionArgs &a, const detail::DecodeKernel &k, void *stream, AttnParams *p) {
    if (a.partition_size < 0) return KVC_OK;
    const KvLayout &L = a.layout;
    const int64_t ctas = int64_t(a.num_seqs) * L.num_kv_heads * p->head_chunks;
    int64_t fill_parts = 0;  // auto: partitions per CTA that one wave holds
    if (a.partition_size == 0) {
        int per_sm = 0;
        if (cudaError_t err = k.ctas_per_sm(&per_sm); err != cudaSuccess)
            return device_error(err, "kvc attention (CUDA) occupancy");
        fill_parts = int64_t(std::max(per_sm, 1)) * current_sm_count() / ctas;
        if (fill_parts < 2) return KVC_OK;
    }
    // A launch captured into a CUDA graph replays with this plan while the contexts grow: plan for
    // the batch's capacity then, so the partitions cover any context a replay can see (the
    // partitions past a sequence's end exit at once).
    bool capturing = false;
    if (kvc_status st = stream_capturing(stream, &capturing); st != KVC_OK) return st;
    int64_t span = capturing ? int64_t(a.max_blocks_per_seq) * L.block_size : a.max_seq_len;
    if (a.sliding_window > 0) span = std::min<int64_t>(span, a.sliding_window);
    int64_t part = a.partition_size > 0 ? int64_t(a.partition_size)
                                        : std::max(kMinPartition, ceil_div(span, fill_parts));
    if (part >= span) return KVC_OK;
    // The workspace bounds the number of partitions: a partition grows rather than overflow it.
    const int64_t row_bytes = int64_t(L.head_dim + 2) * int64_t(sizeof(float));
    const int64_t cap =
        int64_t(a.workspace ? a.workspace_bytes : 0) / row_bytes / (int64_t(a.num_seqs) * a.num_q_heads);
    int64_t parts = ceil_div(span, part);
    if (parts > cap) {
        parts = cap;
        if (parts >= 2) part = ceil_div(span, parts), parts = ceil_div(span, part);
    }
    if (parts < 2) return KVC_OK;
    p->num_parts = int32_t(parts);
    p->part_size = int32_t(part);
    p->ws_acc = static_cast<float *>(a.workspace);
    p->ws_ml = p->ws_acc + int64_t(a.num_seqs) * a.num_q_heads * parts * L.head_dim;
    return KVC_OK;
}

}  // namespace

size_t attention_workspace_bytes(int32_t max_seqs, int32_t num_q_heads, int32_t head_dim, int64_t max_context) {
    if (max_seqs < 1 || num_q_heads < 1 || head_dim < 1 || max_context < 1) return 0;
    const int64_t parts_per_seq = std::max<int64_t>(1, ceil_div(max_context, kMinPartition));
    if (parts_per_seq < 2) return 0;  // never split: no scratch needed
    const int64_t seq_parts = std::min<int64_t>(int64_t(max_seqs) * parts_per_seq, kWorkspaceSeqParts);
    return size_t(seq_parts) * size_t(num_q_heads) * size_t(head_dim + 2) * sizeof(float);
}

kvc_status attention(const AttentionArgs &a, void *stream) {
    const KvLayout &L = a.layout;
    const int hidx = head_dim_index(L.head_dim);
    if (hidx < 0)
        return fail(KVC_ERR_UNSUPPORTED, "kvc attention (CUDA): head_dim %d unsupported (%s)", L.head_dim,
                    kHeadDimsText);
    AttnLauncher launch = find_launcher(L.dtype, hidx);
    if (!launch) return fail(KVC_ERR_UNSUPPORTED, "kvc attention (CUDA): KV dtype %d unsupported", L.dtype);
    if (a.q_dtype != KVC_DTYPE_F32 && a.q_dtype != KVC_DTYPE_F16 && a.q_dtype != KVC_DTYPE_BF16)
        return fail(KVC_ERR_UNSUPPORTED, "kvc attention (CUDA): q dtype %d unsupported (F32/F16/BF16)", a.q_dtype);
    if (a.num_q_heads < 1 || L.num_kv_heads < 1 || a.num_q_heads % L.num_kv_heads != 0)
        return fail(KVC_ERR_INVALID_ARG, "kvc attention (CUDA): %d query heads are not a multiple of %d KV heads",
                    a.num_q_heads, L.num_kv_heads);
    if (a.num_seqs == 0) return KVC_OK;
    if (a.num_seqs < 0 || a.num_seqs > 65535)
        return fail(KVC_ERR_UNSUPPORTED, "kvc attention (CUDA): %d sequences in one launch (at most 65535)",
                    a.num_seqs);
    if (reinterpret_cast<uintptr_t>(a.base) % 16 != 0)
        return fail(KVC_ERR_INVALID_ARG, "kvc attention (CUDA): KV base %p is not 16-byte aligned", a.base);
    if (a.max_seq_len > INT_MAX || a.max_q_len < 1)
        return fail(KVC_ERR_INVALID_ARG, "kvc attention (CUDA): max_seq_len %lld / max_q_len %d out of range",
                    (long long)a.max_seq_len, a.max_q_len);
    if (kvc_status st = use_device_of(a.base, "kvc attention (CUDA)"); st != KVC_OK) return st;

    const bool fp8 = L.dtype == KVC_DTYPE_FP8_E4M3;
    AttnParams p{};
    p.layer_base = static_cast<const unsigned char *>(a.base) + int64_t(a.layer) * L.layer_stride;
    static_cast<kvc::PagedStrides &>(p) = L.strides();
    p.block_size = L.block_size;
    p.block_tables = a.block_tables;
    p.max_blocks_per_seq = a.max_blocks_per_seq;
    p.seq_lens = a.seq_lens;
    p.query_start_loc = a.query_start_loc;
    p.q = a.q;
    p.out = a.out;
    p.q_dtype = a.q_dtype;
    p.num_q_heads = a.num_q_heads;
    p.group_size = a.num_q_heads / L.num_kv_heads;
    const bool decode = a.max_q_len == 1;
    p.q_scale = a.scale * (fp8 ? a.k_scale : 1.0f);
    p.v_scale = fp8 ? a.v_scale : 1.0f;
    p.softcap = a.softcap;
    p.window = a.sliding_window;
    p.alibi_slopes = a.alibi_slopes;
    p.num_parts = 1;
    p.part_size = 0;

    p.block_div = detail::FastDiv::of(uint32_t(L.block_size));
    if (decode) {
        // One query per sequence: the decode kernel, up to kDecodeMaxRows query heads per CTA.
        p.group_chunk = std::min(p.group_size, detail::kDecodeMaxRows);
        p.head_chunks = int32_t(ceil_div(p.group_size, p.group_chunk));
        p.queries_per_cta = 1;
        const detail::DecodeKernel k = find_decode_kernel(a, hidx, p.group_chunk);
        launch = k.launch;
        if (kvc_status st = plan_split_k(a, k, stream, &p); st != KVC_OK) return st;
    } else {
        const int32_t rows = max_rows(L.head_dim);
        p.group_chunk = std::min(p.group_size, rows);
        p.head_chunks = int32_t(ceil_div(p.group_size, p.group_chunk));
        p.queries_per_cta = std::max<int32_t>(1, std::min<int32_t>(a.max_q_len, rows / p.group_chunk));
        // Prefill with 16-bit q and KV in q's dtype or FP8 runs on tensor cores (the same scales:
        // k_scale is in q_scale, v_scale applied to the output); F32 on either side stays on the
        // generic kernel.
        const bool aligned = (reinterpret_cast<uintptr_t>(a.q) | reinterpret_cast<uintptr_t>(a.out)) % 16 == 0;
        if (const AttnLauncher mma = aligned ? find_mma_launcher(a.q_dtype, L.dtype, hidx) : nullptr) {
            launch = mma;
            const int32_t mma_rows = detail::mma_rows(fp8 ? 1 : 2, L.head_dim);
            p.group_chunk = std::min(p.group_size, mma_rows);
            p.head_chunks = int32_t(ceil_div(p.group_size, p.group_chunk));
            p.queries_per_cta = std::max<int32_t>(1, std::min<int32_t>(a.max_q_len, mma_rows / p.group_chunk));
        }
    }

    const int64_t q_tiles = ceil_div(a.max_q_len, p.queries_per_cta);
    const int64_t grid_x = q_tiles * p.num_parts;
    const int64_t grid_y = int64_t(L.num_kv_heads) * p.head_chunks;
    if (grid_x > INT_MAX || grid_y > 65535)
        return fail(KVC_ERR_UNSUPPORTED, "kvc attention (CUDA): launch grid too large (%lld x %lld)",
                    (long long)grid_x, (long long)grid_y);
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    dim3 grid(unsigned(grid_x), unsigned(grid_y), unsigned(a.num_seqs));
    cudaError_t err = launch(p, grid, s);
    if (err != cudaSuccess) return device_error(err, "kvc attention (CUDA) launch");
    if (p.num_parts > 1) {
        dim3 rgrid(unsigned(a.num_q_heads), unsigned(a.num_seqs));
        KVC_LAUNCH(attention_reduce_kernel, rgrid, std::min(L.head_dim, 256), 0, s, p.ws_acc, p.ws_ml, a.seq_lens,
                   a.query_start_loc, a.out, a.q_dtype, a.num_q_heads, L.head_dim, p.num_parts, p.part_size,
                   a.sliding_window);
        return check_launch("kvc attention (CUDA) split-K reduce");
    }
    return KVC_OK;
}

}  // namespace kvc::cuda
