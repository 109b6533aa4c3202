// C entry points of the KV storage: device count, storage info, cache writes, the pending
// copy-on-write copies, block copies to and from the host. Every check happens before anything is
// launched or changed; kernels (lib/cpu, cuda/) then assume valid arguments.
#include <cstring>
#include <mutex>
#include <vector>

#include "capi/kernel_checks.hpp"
#include "cpu/cpu_backend.hpp"
#include "error.hpp"
#include "storage/batch.hpp"
#include "storage/copy_pending.hpp"
#include "storage/cuda_api.hpp"
#include "storage/kernel_args.hpp"
#include "storage/pool_access.hpp"
#include "struct_size.hpp"

using namespace kvc;

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
        LayerPlace at;
        if (kvc_status st = kv_layer_place(pool, layer, fn, &at); st != KVC_OK) return st;
        if (kvc_status st = check_activation_dtype(src_dtype, fn, "source"); st != KVC_OK) return st;
        if (!positive_finite(k_scale) || !positive_finite(v_scale))
            return fail(KVC_ERR_INVALID_ARG, "%s: k_scale %g and v_scale %g must be finite and > 0", fn,
                        double(k_scale), double(v_scale));
        // The layer's group layout: its heads and head_dim, its layers' stride inside a page.
        const KvLayout &L = pool_group_layout(pool, at.group);
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
        a.layer = at.index;
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
                    std::lock_guard<kvc::PoolMutex> lk(pool_mutex(pool));
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
        // Ordering against other threads' copies and tier jobs: storage/copy_pending.cpp.
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
                kvc_status st =
                    to_host ? cuda::memcpy_d2h(hp, dev, bytes, nullptr) : cuda::memcpy_h2d(dev, hp, bytes, nullptr);
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

}  // extern "C"
