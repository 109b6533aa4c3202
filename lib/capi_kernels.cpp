// C entry points of the storage / batch / attention layer: validation and backend dispatch.
// Every check happens before anything is launched or changed; kernels (lib/cpu, cuda/) then assume
// valid arguments.
#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "batch.hpp"
#include "cpu/cpu_backend.hpp"
#include "copy_pending.hpp"
#include "cuda_api.hpp"
#include "struct_size.hpp"
#include "tier_cuda.hpp"
#include "error.hpp"
#include "kernel_args.hpp"
#include "pool_access.hpp"

using namespace kvc;

namespace {

// The storage every storage / attention call needs; KVC_ERR_STATE for metadata-only pools.
kvc_status require_storage(kvc_pool *pool, const char *fn) {
    if (pool_backend(pool) == KVC_BACKEND_NONE || !pool_storage_base(pool))
        return fail(KVC_ERR_STATE, "%s: the pool is metadata-only (backend NONE) and has no KV storage", fn);
    return KVC_OK;
}

bool is_known_dtype(int32_t dt) { return dt >= KVC_DTYPE_F32 && dt <= KVC_DTYPE_FP8_E4M3; }
bool is_activation_dtype(int32_t dt) {
    return dt == KVC_DTYPE_F32 || dt == KVC_DTYPE_F16 || dt == KVC_DTYPE_BF16;
}

kvc_status check_activation_dtype(int32_t dt, const char *fn, const char *what) {
    if (!is_known_dtype(dt)) return fail(KVC_ERR_INVALID_ARG, "%s: unknown %s dtype %d", fn, what, dt);
    if (!is_activation_dtype(dt))
        return fail(KVC_ERR_UNSUPPORTED, "%s: %s dtype %d unsupported (F32, F16 or BF16)", fn, what, dt);
    return KVC_OK;
}

kvc_status check_layer(kvc_pool *pool, int32_t layer, const char *fn) {
    const int32_t n = pool_layout(pool).num_layers;
    if (layer < 0 || layer >= n) return fail(KVC_ERR_INVALID_ARG, "%s: layer %d outside [0, %d)", fn, layer, n);
    return KVC_OK;
}

bool positive_finite(float x) { return std::isfinite(x) && x > 0.f; }

// What each backend's attention kernels can run. The CPU kernels take any head_dim and block size;
// the CUDA kernels are compiled for a fixed head-dim list and block sizes up to 256.
kvc_status check_attention_supported(int32_t backend, const KvLayout &L, const char *fn) {
    if (backend != KVC_BACKEND_CUDA) return KVC_OK;
    if (cuda::head_dim_index(L.head_dim) < 0)
        return fail(KVC_ERR_UNSUPPORTED, "%s: head_dim %d has no CUDA attention kernel (%s)", fn, L.head_dim,
                    cuda::kHeadDimsText);
    if (L.block_size > 256)
        return fail(KVC_ERR_UNSUPPORTED, "%s: block_size %d has no CUDA attention kernel (1..256)", fn, L.block_size);
    return KVC_OK;
}

}  // namespace

extern "C" {

KVC_API kvc_status kvc_cuda_device_count(int32_t *out_count) {
    KVC_GUARD({
        if (!out_count) return fail(KVC_ERR_NULL_ARG, "kvc_cuda_device_count: out_count is NULL");
        int32_t n = 0;
        if (kvc_status st = cuda::device_count(&n); st != KVC_OK) return st;
        *out_count = n;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_storage_get_info(kvc_pool *pool, kvc_storage_info *out) {
    KVC_GUARD({
        const char *fn = "kvc_storage_get_info";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (!out) return fail(KVC_ERR_NULL_ARG, "%s: out is NULL", fn);
        if (kvc_status st = check_struct_size(out->struct_size, {sizeof(kvc_storage_info)}, StructUse::kFill, fn, "out");
            st != KVC_OK)
            return st;
        if (kvc_status st = require_storage(pool, fn); st != KVC_OK) return st;
        const KvLayout &L = pool_layout(pool);
        kvc_storage_info info;
        std::memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        info.backend = pool_backend(pool);
        info.kv_dtype = L.dtype;
        info.elem_bytes = L.elem_bytes;
        info.device = info.backend == KVC_BACKEND_CUDA ? pool_device(pool) : -1;
        info.base_address = uint64_t(reinterpret_cast<uintptr_t>(pool_storage_base(pool)));
        info.total_bytes = L.total_bytes;
        info.block_stride = L.block_stride;
        info.layer_stride = L.layer_stride;
        info.kv_stride = L.kv_stride;
        info.head_stride = L.head_stride;
        info.token_stride = L.token_stride;
        info.struct_size = out->struct_size;
        std::memcpy(out, &info, sizeof info);  // a newer caller's larger struct keeps its tail
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_cache_write(kvc_pool *pool, int32_t layer, const int64_t *slot_mapping, int64_t num_tokens,
                                   const void *k, const void *v, int32_t src_dtype, float k_scale, float v_scale,
                                   void *stream) {
    KVC_GUARD({
        const char *fn = "kvc_cache_write";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (num_tokens < 0) return fail(KVC_ERR_INVALID_ARG, "%s: num_tokens %lld < 0", fn, (long long)num_tokens);
        if (num_tokens > 0 && (!slot_mapping || !k || !v))
            return fail(KVC_ERR_NULL_ARG, "%s: %s is NULL", fn, !slot_mapping ? "slot_mapping" : !k ? "k" : "v");
        if (kvc_status st = require_storage(pool, fn); st != KVC_OK) return st;
        if (kvc_status st = check_layer(pool, layer, fn); st != KVC_OK) return st;
        if (kvc_status st = check_activation_dtype(src_dtype, fn, "source"); st != KVC_OK) return st;
        if (!positive_finite(k_scale) || !positive_finite(v_scale))
            return fail(KVC_ERR_INVALID_ARG, "%s: k_scale %g and v_scale %g must be finite and > 0", fn,
                        double(k_scale), double(v_scale));
        const KvLayout &L = pool_layout(pool);
        const int32_t backend = pool_backend(pool);
        if (backend == KVC_BACKEND_CPU) {
            // Slots are host memory here, so a slot past the pool is caught instead of corrupting memory.
            const int64_t slots = L.num_blocks * L.block_size;
            for (int64_t i = 0; i < num_tokens; ++i)
                if (slot_mapping[i] >= slots)
                    return fail(KVC_ERR_INVALID_ARG, "%s: slot_mapping[%lld] = %lld is past the pool's %lld slots", fn,
                                (long long)i, (long long)slot_mapping[i], (long long)slots);
        }
        if (num_tokens == 0) return KVC_OK;
        // Slots may be blocks a tier copy is still reading (swap-out, spill) or writing (restore), or a
        // copy-on-write copy on another stream is still reading or writing (CUDA).
        if (kvc_status st = pool_storage_barrier(pool, stream); st != KVC_OK) return st;
        CacheWriteArgs a;
        a.layout = L;
        a.base = pool_storage_base(pool);
        a.layer = layer;
        a.slots = slot_mapping;
        a.num_tokens = num_tokens;
        a.k = k;
        a.v = v;
        a.src_dtype = src_dtype;
        a.k_scale = k_scale;
        a.v_scale = v_scale;
        return backend == KVC_BACKEND_CUDA ? cuda::cache_write(a, stream) : cpu_cache_write(a);
    })
}

KVC_API kvc_status kvc_copy_pending(kvc_pool *pool, void *stream, int64_t *out_copied) {
    KVC_GUARD({
        const char *fn = "kvc_copy_pending";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (kvc_status st = require_storage(pool, fn); st != KVC_OK) return st;
        if (pool_backend(pool) == KVC_BACKEND_CUDA) {
            // The pairs differ every step, and the pair upload reads a host buffer the next call
            // rewrites: a graph replaying this copy would copy the wrong blocks. Refuse, pool unchanged.
            bool capturing = false;
            if (kvc_status st = cuda::stream_capturing(stream, &capturing); st != KVC_OK) return st;
            if (capturing) {
                int64_t pending;
                {
                    std::lock_guard<std::mutex> lk(pool_mutex(pool));
                    pending = pool_pending_copy_count(pool);
                }
                if (pending > 0)
                    return fail(KVC_ERR_STATE,
                                "%s: %lld copy-on-write pairs are pending and the stream is being captured into a "
                                "CUDA graph; copy them before capturing or replaying", fn, (long long)pending);
                if (out_copied) *out_copied = 0;
                return KVC_OK;
            }
        }
        // Ordering against other threads' copies and tier jobs: copy_pending.cpp.
        int64_t copied = 0;
        if (kvc_status st = storage_copy_pending(pool, stream, &copied); st != KVC_OK) return st;
        if (out_copied) *out_copied = copied;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_storage_copy_blocks(kvc_pool *pool, const int32_t *block_ids, int64_t count, void *host,
                                           int32_t to_host) {
    KVC_GUARD({
        const char *fn = "kvc_storage_copy_blocks";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (count < 0) return fail(KVC_ERR_INVALID_ARG, "%s: count %lld < 0", fn, (long long)count);
        if (count > 0 && (!block_ids || !host))
            return fail(KVC_ERR_NULL_ARG, "%s: %s is NULL", fn, !block_ids ? "block_ids" : "host");
        if (kvc_status st = require_storage(pool, fn); st != KVC_OK) return st;
        const KvLayout &L = pool_layout(pool);
        for (int64_t i = 0; i < count; ++i)
            if (block_ids[i] < 0 || block_ids[i] >= L.num_blocks)
                return fail(KVC_ERR_INVALID_ARG, "%s: block_ids[%lld] = %d outside [0, %lld)", fn, (long long)i,
                            block_ids[i], (long long)L.num_blocks);
        int64_t total;
        if (mul_overflows(count, L.block_stride, &total))
            return fail(KVC_ERR_OVERFLOW, "%s: %lld blocks overflow the byte count", fn, (long long)count);
        if (kvc_status st = pool_storage_barrier(pool, nullptr); st != KVC_OK) return st;
        const bool cuda_backend = pool_backend(pool) == KVC_BACKEND_CUDA;
        char *base = static_cast<char *>(pool_storage_base(pool));
        char *h = static_cast<char *>(host);
        // Runs of consecutive block ids are one contiguous range on both sides: one copy per run.
        for (int64_t i = 0; i < count;) {
            int64_t j = i + 1;
            while (j < count && block_ids[j] == block_ids[j - 1] + 1) ++j;
            char *dev = base + int64_t(block_ids[i]) * L.block_stride;
            char *hp = h + i * L.block_stride;
            const size_t bytes = size_t((j - i) * L.block_stride);
            if (cuda_backend) {
                kvc_status st = to_host ? cuda::memcpy_d2h(hp, dev, bytes, nullptr) : cuda::memcpy_h2d(dev, hp, bytes, nullptr);
                if (st != KVC_OK) return st;
            } else if (to_host) {
                std::memcpy(hp, dev, bytes);
            } else {
                std::memcpy(dev, hp, bytes);
            }
            i = j;
        }
        if (cuda_backend) return cuda::stream_sync(nullptr);
        return KVC_OK;
    })
}

// ---- batches ------------------------------------------------------------------------------------

KVC_API kvc_status kvc_batch_create(kvc_pool *pool, int32_t max_seqs, int64_t max_tokens, int32_t max_blocks_per_seq,
                                    kvc_batch **out) {
    KVC_GUARD({
        const char *fn = "kvc_batch_create";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (!out) return fail(KVC_ERR_NULL_ARG, "%s: out is NULL", fn);
        if (max_seqs < 1 || max_tokens < 1 || max_blocks_per_seq < 1)
            return fail(KVC_ERR_INVALID_ARG, "%s: capacities must be >= 1 (max_seqs %d, max_tokens %lld, "
                        "max_blocks_per_seq %d)", fn, max_seqs, (long long)max_tokens, max_blocks_per_seq);
        return batch_create(pool, max_seqs, max_tokens, max_blocks_per_seq, out);
    })
}

KVC_API kvc_status kvc_batch_destroy(kvc_batch *batch) {
    KVC_GUARD({
        if (batch) batch_destroy(batch);
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_batch_build(kvc_batch *batch, const uint64_t *seq_ids, const int64_t *q_lens, int32_t num_seqs) {
    KVC_GUARD({
        const char *fn = "kvc_batch_build";
        if (!batch) return fail(KVC_ERR_NULL_ARG, "%s: batch is NULL", fn);
        if (!seq_ids || !q_lens) return fail(KVC_ERR_NULL_ARG, "%s: %s is NULL", fn, !seq_ids ? "seq_ids" : "q_lens");
        return batch_build(batch, seq_ids, q_lens, num_seqs);
    })
}

KVC_API kvc_status kvc_batch_set_stream(kvc_batch *batch, void *stream) {
    KVC_GUARD({
        if (!batch) return fail(KVC_ERR_NULL_ARG, "kvc_batch_set_stream: batch is NULL");
        // Kept on every backend (only CUDA builds use it), so a caller's setting survives as given.
        batch->stream = stream;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_batch_get_info(const kvc_batch *batch, kvc_batch_info *out) {
    KVC_GUARD({
        const char *fn = "kvc_batch_get_info";
        if (!batch) return fail(KVC_ERR_NULL_ARG, "%s: batch is NULL", fn);
        if (!out) return fail(KVC_ERR_NULL_ARG, "%s: out is NULL", fn);
        if (kvc_status st = check_struct_size(out->struct_size, {sizeof(kvc_batch_info)}, StructUse::kFill, fn, "out");
            st != KVC_OK)
            return st;
        if (!batch->built) return fail(KVC_ERR_STATE, "%s: the batch was never built", fn);
        const BatchHostArrays &h = batch->committed;
        const BatchDeviceArrays &d = batch->dev;
        kvc_batch_info info;
        std::memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        info.num_seqs = h.num_seqs;
        info.num_tokens = h.num_tokens;
        info.max_blocks_per_seq = batch->width;
        info.max_q_len = h.max_q_len;
        info.max_seq_len = h.max_seq_len;
        info.num_indices = h.num_indices;
        info.is_decode = h.is_decode ? 1 : 0;
        info.rows_uploaded = batch->rows_uploaded;
        auto addr = [](const void *p) { return uint64_t(reinterpret_cast<uintptr_t>(p)); };
        info.block_tables = addr(d.block_tables);
        info.seq_lens = addr(d.seq_lens);
        info.query_start_loc = addr(d.query_start_loc);
        info.slot_mapping = addr(d.slot_mapping);
        info.kv_indptr = addr(d.kv_indptr);
        info.kv_indices = addr(d.kv_indices);
        info.kv_last_page_len = addr(d.kv_last_page_len);
        info.struct_size = out->struct_size;
        std::memcpy(out, &info, sizeof info);  // a newer caller's larger struct keeps its tail
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_batch_copy_slot_mapping(const kvc_batch *batch, int64_t *out, int64_t cap) {
    KVC_GUARD({
        const char *fn = "kvc_batch_copy_slot_mapping";
        if (!batch) return fail(KVC_ERR_NULL_ARG, "%s: batch is NULL", fn);
        if (!out) return fail(KVC_ERR_NULL_ARG, "%s: out is NULL", fn);
        if (!batch->built) return fail(KVC_ERR_STATE, "%s: the batch was never built", fn);
        const BatchHostArrays &h = batch->committed;
        if (cap < h.num_tokens)
            return fail(KVC_ERR_BUFFER_TOO_SMALL, "%s: cap %lld < %lld tokens", fn, (long long)cap,
                        (long long)h.num_tokens);
        std::memcpy(out, h.slot_mapping.data(), size_t(h.num_tokens) * sizeof(int64_t));
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_batch_copy_block_tables(const kvc_batch *batch, int32_t *out, int64_t cap) {
    KVC_GUARD({
        const char *fn = "kvc_batch_copy_block_tables";
        if (!batch) return fail(KVC_ERR_NULL_ARG, "%s: batch is NULL", fn);
        if (!out) return fail(KVC_ERR_NULL_ARG, "%s: out is NULL", fn);
        if (!batch->built) return fail(KVC_ERR_STATE, "%s: the batch was never built", fn);
        const int64_t n = int64_t(batch->committed.num_seqs) * batch->width;
        if (cap < n)
            return fail(KVC_ERR_BUFFER_TOO_SMALL, "%s: cap %lld < %lld entries (%d rows x %d)", fn, (long long)cap,
                        (long long)n, batch->committed.num_seqs, batch->width);
        // The shadow rows are exactly what the last build uploaded.
        std::memcpy(out, batch->shadow_tables.data(), size_t(n) * sizeof(int32_t));
        return KVC_OK;
    })
}

// ---- attention ----------------------------------------------------------------------------------

KVC_API kvc_status kvc_attention_params_default(kvc_attention_params *p) {
    KVC_GUARD({
        if (!p) return fail(KVC_ERR_NULL_ARG, "kvc_attention_params_default: p is NULL");
        std::memset(p, 0, sizeof *p);
        p->struct_size = sizeof *p;
        p->num_q_heads = 0;
        p->q_dtype = KVC_DTYPE_F16;
        p->scale = 0.0f;
        p->k_scale = 1.0f;
        p->v_scale = 1.0f;
        p->logit_softcap = 0.0f;
        p->sliding_window = 0;
        p->alibi_slopes = nullptr;
        p->partition_size = 0;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_launch_attention(kvc_pool *pool, const kvc_batch *batch, int32_t layer, const void *q, void *out,
                                        const kvc_attention_params *params, void *stream) {
    KVC_GUARD({
        const char *fn = "kvc_launch_attention";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (!batch) return fail(KVC_ERR_NULL_ARG, "%s: batch is NULL", fn);
        if (!q) return fail(KVC_ERR_NULL_ARG, "%s: q is NULL", fn);
        if (!out) return fail(KVC_ERR_NULL_ARG, "%s: out is NULL", fn);
        if (!params) return fail(KVC_ERR_NULL_ARG, "%s: params is NULL (use kvc_attention_params_default)", fn);
        if (kvc_status st =
                check_struct_size(params->struct_size, {sizeof(kvc_attention_params)}, StructUse::kRead, fn, "params");
            st != KVC_OK)
            return st;
        if (kvc_status st = require_storage(pool, fn); st != KVC_OK) return st;
        if (batch->pool != pool) return fail(KVC_ERR_STATE, "%s: the batch belongs to another pool", fn);
        if (!batch->built) return fail(KVC_ERR_STATE, "%s: the batch was never built", fn);
        if (kvc_status st = check_layer(pool, layer, fn); st != KVC_OK) return st;

        const KvLayout &L = pool_layout(pool);
        const int32_t pool_heads = pool_num_q_heads(pool);
        const int32_t heads = params->num_q_heads == 0 ? pool_heads : params->num_q_heads;
        if (heads < 1 || heads > pool_heads || heads % L.num_kv_heads != 0)
            return fail(KVC_ERR_INVALID_ARG, "%s: num_q_heads %d must be a multiple of the %d KV heads and <= the "
                        "pool's %d", fn, heads, L.num_kv_heads, pool_heads);
        if (kvc_status st = check_activation_dtype(params->q_dtype, fn, "q/out"); st != KVC_OK) return st;
        if (!std::isfinite(params->scale) || params->scale < 0.f)
            return fail(KVC_ERR_INVALID_ARG, "%s: scale %g must be finite and >= 0 (0 = 1/sqrt(head_dim))", fn,
                        double(params->scale));
        if (!positive_finite(params->k_scale) || !positive_finite(params->v_scale))
            return fail(KVC_ERR_INVALID_ARG, "%s: k_scale %g and v_scale %g must be finite and > 0", fn,
                        double(params->k_scale), double(params->v_scale));
        if (!std::isfinite(params->logit_softcap) || params->logit_softcap < 0.f)
            return fail(KVC_ERR_INVALID_ARG, "%s: logit_softcap %g must be finite and >= 0", fn,
                        double(params->logit_softcap));
        if (params->sliding_window < 0)
            return fail(KVC_ERR_INVALID_ARG, "%s: sliding_window %d < 0", fn, params->sliding_window);
        if (params->partition_size < -1)
            return fail(KVC_ERR_INVALID_ARG, "%s: partition_size %d (0 = auto, -1 = never, > 0 tokens)", fn,
                        params->partition_size);
        const int32_t backend = pool_backend(pool);
        if (kvc_status st = check_attention_supported(backend, L, fn); st != KVC_OK) return st;
        if (kvc_status st = batch_revalidate(batch, fn); st != KVC_OK) return st;
        const BatchHostArrays &h = batch->committed;
        // A window wider than the one blocks were released for would read entries that are -1.
        const int32_t w = params->sliding_window;
        if (h.pool_window > 0 && (w < 1 || w > h.pool_window))
            return fail(KVC_ERR_INVALID_ARG, "%s: the pool releases blocks for a sliding window of %d; "
                        "params->sliding_window must be 1..%d, got %d", fn, h.pool_window, h.pool_window, w);
        if (h.max_window < INT32_MAX && (w < 1 || w > h.max_window))
            return fail(KVC_ERR_INVALID_ARG, "%s: sliding_window %d reaches blocks the batch's sequences released; "
                        "at most %d here", fn, w, h.max_window);
        if (kvc_status st = pool_storage_barrier(pool, stream); st != KVC_OK) return st;

        AttentionArgs a;
        a.layout = L;
        a.base = pool_storage_base(pool);
        a.layer = layer;
        a.q = q;
        a.out = out;
        a.q_dtype = params->q_dtype;
        a.num_q_heads = heads;
        a.scale = params->scale > 0.f ? params->scale : 1.0f / std::sqrt(float(L.head_dim));
        a.k_scale = params->k_scale;
        a.v_scale = params->v_scale;
        a.softcap = params->logit_softcap;
        a.sliding_window = params->sliding_window;
        a.alibi_slopes = params->alibi_slopes;
        a.partition_size = params->partition_size;
        a.num_seqs = h.num_seqs;
        a.num_tokens = h.num_tokens;
        a.block_tables = batch->dev.block_tables;
        a.max_blocks_per_seq = batch->width;
        a.seq_lens = batch->dev.seq_lens;
        a.query_start_loc = batch->dev.query_start_loc;
        a.max_q_len = h.max_q_len;
        a.max_seq_len = h.max_seq_len;
        a.is_decode = h.is_decode;
        a.workspace = batch->workspace;
        a.workspace_bytes = batch->workspace_bytes;
        return backend == KVC_BACKEND_CUDA ? cuda::attention(a, stream) : cpu_attention(a);
    })
}

}  // extern "C"
