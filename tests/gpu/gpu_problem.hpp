// A kernel-fixture problem (tests/test_kernels_fixture.hpp) uploaded to the CUDA device (real or
// emulated), and the AttentionArgs that point the kernels at it. Shared by the GPU kernel grid
// (test_gpu_kernels.cpp) and the access audit (test_gpu_access_audit.cpp). Include after cmocka.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "storage/cuda_api.hpp"
#include "gpu/device_buffer.hpp"
#include "test_kernels_fixture.hpp"

#define ASSERT_OK(expr)                                                                              \
    do {                                                                                             \
        kvc_status st_ = (expr);                                                                     \
        if (st_ != KVC_OK) fail_msg("%s -> %d: %s", #expr, int(st_), kvc_last_error());              \
    } while (0)

namespace kvc_gpu_test {

struct GpuProblem {
    kvc_test::PagedProblem *host;
    DeviceBuffer storage, tables, seq_lens, qsl, q, out, alibi, workspace;

    // The workspace holds what the dispatcher plans for the problem's capacity, or min_workspace
    // bytes if more (a forced partition size may ask for more partitions than the plan would).
    explicit GpuProblem(kvc_test::PagedProblem &P, size_t min_workspace = 0) : host(&P) {
        ASSERT_OK(storage.allocate(size_t(P.layout.total_bytes)));
        ASSERT_OK(storage.upload(P.storage, size_t(P.layout.total_bytes)));
        ASSERT_OK(upload_vector(tables, P.tables));
        ASSERT_OK(upload_vector(seq_lens, P.seq_lens));
        ASSERT_OK(upload_vector(qsl, P.query_start_loc));
        ASSERT_OK(upload_vector(q, P.q));
        ASSERT_OK(upload_vector(alibi, P.alibi));
        ASSERT_OK(out.allocate(out_bytes()));
        const int64_t max_context = int64_t(P.max_blocks_per_seq) * P.layout.block_size;
        const size_t ws = kvc::cuda::attention_workspace_bytes(int32_t(P.spec.seqs.size()), P.spec.num_q_heads,
                                                               P.spec.head_dim, max_context);
        ASSERT_OK(workspace.allocate(std::max(ws, min_workspace)));
    }

    size_t out_bytes() const {
        return size_t(host->num_tokens) * size_t(host->spec.num_q_heads) * size_t(host->spec.head_dim) *
               size_t(kvc_ref::dtype_size(host->spec.q_dtype));
    }

    kvc::AttentionArgs args(int32_t partition_size, size_t workspace_bytes) {
        kvc::AttentionArgs a = host->args(nullptr, partition_size);
        a.base = storage.get();
        a.q = q.get();
        a.out = out.get();
        a.alibi_slopes = host->spec.alibi ? alibi.as<float>() : nullptr;
        a.block_tables = tables.as<int32_t>();
        a.seq_lens = seq_lens.as<int32_t>();
        a.query_start_loc = qsl.as<int32_t>();
        a.workspace = workspace.get();
        a.workspace_bytes = std::min(workspace_bytes, workspace.bytes());
        return a;
    }
};

}  // namespace kvc_gpu_test
