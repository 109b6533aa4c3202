// C entry points of batch metadata (kvc_batch_*): create, build from sequences, read out.
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

KVC_API kvc_status kvc_batch_set_group(kvc_batch *batch, int32_t group) {
    KVC_GUARD({
        const char *fn = "kvc_batch_set_group";
        if (!batch) return fail(KVC_ERR_NULL_ARG, "%s: batch is NULL", fn);
        const int32_t n = pool_num_groups(batch->pool);
        if (group < 0 || group >= n)
            return fail(KVC_ERR_INVALID_ARG, "%s: group %d is not a group of the batch's pool (it has %d)", fn, group,
                        n);
        // An SSM group's pages hold state, not K/V: there is nothing to launch attention over.
        if (pool_group_kind(batch->pool, group) == KVC_GROUP_SSM)
            return fail(KVC_ERR_INVALID_ARG,
                        "%s: group %d is an SSM group, which has no block tables to launch attention over", fn,
                        group);
        // Only the next build reads it: the committed arrays (and launches' group check) keep the
        // group of the last build.
        batch->group = group;
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

}  // extern "C"
