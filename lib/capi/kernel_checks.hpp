// Argument checks shared by the C entry points of the storage, batch and attention layer
// (capi/storage.cpp, capi/batch.cpp, capi/attention.cpp): one status and one message per refusal.
#pragma once

#include <cmath>

#include "error.hpp"
#include "storage/cuda_api.hpp"
#include "storage/kv_layout.hpp"
#include "storage/pool_access.hpp"

namespace kvc {

// The storage every storage / attention call needs; KVC_ERR_STATE for metadata-only pools.
inline kvc_status require_storage(kvc_pool *pool, const char *fn) {
    if (pool_backend(pool) == KVC_BACKEND_NONE || !pool_storage_base(pool))
        return fail(KVC_ERR_STATE, "%s: the pool is metadata-only (backend NONE) and has no KV storage", fn);
    return KVC_OK;
}

inline bool is_known_dtype(int32_t dt) { return dt >= KVC_DTYPE_F32 && dt <= KVC_DTYPE_FP8_E4M3; }
inline bool is_activation_dtype(int32_t dt) {
    return dt == KVC_DTYPE_F32 || dt == KVC_DTYPE_F16 || dt == KVC_DTYPE_BF16;
}

inline kvc_status check_activation_dtype(int32_t dt, const char *fn, const char *what) {
    if (!is_known_dtype(dt)) return fail(KVC_ERR_INVALID_ARG, "%s: unknown %s dtype %d", fn, what, dt);
    if (!is_activation_dtype(dt))
        return fail(KVC_ERR_UNSUPPORTED, "%s: %s dtype %d unsupported (F32, F16 or BF16)", fn, what, dt);
    return KVC_OK;
}

inline kvc_status check_layer(kvc_pool *pool, int32_t layer, const char *fn) {
    const int32_t n = pool_num_layers(pool);  // the model's: a hybrid pool_layout holds group 0's
    if (layer < 0 || layer >= n) return fail(KVC_ERR_INVALID_ARG, "%s: layer %d outside [0, %d)", fn, layer, n);
    return KVC_OK;
}

// A K/V layer's group and index in it (a plain pool: group 0, the layer itself), after
// check_layer. A hybrid pool's SSM layer is refused: its pages hold state, not K/V rows.
inline kvc_status kv_layer_place(kvc_pool *pool, int32_t layer, const char *fn, LayerPlace *out) {
    *out = pool_layer_place(pool, layer);
    if (pool_group_kind(pool, out->group) == KVC_GROUP_SSM)
        return fail(KVC_ERR_INVALID_ARG, "%s: layer %d is in group %d, an SSM group: its pages hold state, not K/V", fn,
                    layer, out->group);
    return KVC_OK;
}

inline bool positive_finite(float x) { return std::isfinite(x) && x > 0.f; }

// What each backend's attention kernels can run. The CPU kernels take any head_dim and block size;
// the CUDA kernels are compiled for a fixed head-dim list and block sizes up to 256.
inline kvc_status check_attention_supported(int32_t backend, const KvLayout &L, const char *fn) {
    if (backend != KVC_BACKEND_CUDA) return KVC_OK;
    if (cuda::head_dim_index(L.head_dim) < 0)
        return fail(KVC_ERR_UNSUPPORTED, "%s: head_dim %d has no CUDA attention kernel (%s)", fn, L.head_dim,
                    cuda::kHeadDimsText);
    if (L.block_size > 256)
        return fail(KVC_ERR_UNSUPPORTED, "%s: block_size %d has no CUDA attention kernel (1..256)", fn, L.block_size);
    return KVC_OK;
}

}  // namespace kvc
