// C entry points of attention: default parameters and kvc_launch_attention (validation, then the
// CPU or CUDA backend).
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
        LayerPlace at;
        if (kvc_status st = kv_layer_place(pool, layer, fn, &at); st != KVC_OK) return st;
        // The batch's tables are one group's (hybrid pools): another group's block ids would point
        // at pages laid out for other layers.
        if (at.group != batch->committed.group)
            return fail(KVC_ERR_INVALID_ARG,
                        "%s: layer %d is in group %d but the batch was built for group %d (kvc_batch_set_group)", fn,
                        layer, at.group, batch->committed.group);

        const KvLayout &L = pool_group_layout(pool, at.group);
        const int32_t pool_heads = pool_num_q_heads(pool);
        const int32_t heads = params->num_q_heads == 0 ? pool_heads : params->num_q_heads;
        if (heads < 1 || heads > pool_heads || heads % L.num_kv_heads != 0)
            return fail(KVC_ERR_INVALID_ARG,
                        "%s: num_q_heads %d must be a multiple of the %d KV heads and <= the "
                        "pool's %d",
                        fn, heads, L.num_kv_heads, pool_heads);
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
        if (h.pool_window > 0 && (w < 1 || w > h.pool_window)) {
            if (pool_is_hybrid(pool))
                return fail(KVC_ERR_INVALID_ARG,
                            "%s: group %d (layer %d) releases blocks for a sliding window of %d; "
                            "params->sliding_window must be 1..%d, got %d",
                            fn, at.group, layer, h.pool_window, h.pool_window, w);
            return fail(KVC_ERR_INVALID_ARG,
                        "%s: the pool releases blocks for a sliding window of %d; "
                        "params->sliding_window must be 1..%d, got %d",
                        fn, h.pool_window, h.pool_window, w);
        }
        if (h.max_window < INT32_MAX && (w < 1 || w > h.max_window))
            return fail(KVC_ERR_INVALID_ARG,
                        "%s: sliding_window %d reaches blocks the batch's sequences released; "
                        "at most %d here",
                        fn, w, h.max_window);
        if (kvc_status st = pool_storage_barrier(pool, stream); st != KVC_OK) return st;

        AttentionArgs a;
        a.layout = L;
        a.base = pool_storage_base(pool);
        a.layer = at.index;  // the group layout's layer_stride counts the group's layers only
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
