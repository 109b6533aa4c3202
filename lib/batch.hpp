// Batch metadata for one forward step (kvc_batch_*): the object behind the opaque kvc_batch handle.
//
// Fixed capacity, everything allocated in create: host arrays for the step being built ("staging")
// and for the last successful build ("committed"), and one backend allocation holding every array
// the kernels read ("device" arrays: device memory on CUDA; a host allocation on CPU and for
// metadata-only pools, so the addresses in kvc_batch_info never change either way).
//
// Build = validate, copy the sequences' tables under the pool lock, fill the derived arrays into
// staging, upload what changed, then commit by swapping staging and committed (O(1), no
// allocation). A failed validation touches neither the committed arrays nor the device arrays.
// Block-table rows are uploaded only when they differ from what the device already holds
// (shadow_tables mirrors the device table), in as few contiguous copies as there are dirty runs.
//
// CUDA ordering: uploads are cudaMemcpyAsync from the pageable staging arrays on the batch's stream
// (kvc_batch_set_stream; NULL = the legacy default stream), so they start after the work already on
// that stream (the previous step's kernels reading these arrays). The build then synchronizes that
// stream: a pageable-source cudaMemcpyAsync is not documented to have read its source when it
// returns (older CUDA documentation says a worker thread may stage it later), and the next build
// rewrites staging_tables and, after the swap, the staging arrays. So when a build returns the
// device arrays are complete, whatever stream the caller launches on next.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "kvc/kvc.h"

namespace kvc {

// The arrays of one build, on the host.
struct BatchHostArrays {
    std::vector<int32_t> seq_lens, query_start_loc, kv_indptr, kv_indices, kv_last_page_len;
    std::vector<int64_t> slot_mapping;
    std::vector<uint64_t> seq_ids;
    int32_t num_seqs = 0;
    int64_t num_tokens = 0;
    int32_t max_q_len = 0;
    int64_t max_seq_len = 0;
    int64_t num_indices = 0;
    bool is_decode = false;
};

// Device-side array pointers, all inside one backend allocation.
struct BatchDeviceArrays {
    void *memory = nullptr;
    size_t bytes = 0;
    int32_t *block_tables = nullptr, *seq_lens = nullptr, *query_start_loc = nullptr;
    int32_t *kv_indptr = nullptr, *kv_indices = nullptr, *kv_last_page_len = nullptr;
    int64_t *slot_mapping = nullptr;
};

}  // namespace kvc

struct kvc_batch {
    kvc_pool *pool = nullptr;
    int32_t backend = KVC_BACKEND_NONE;  // the pool's backend, kept to free memory without the pool
    int32_t device = -1;
    int32_t block_size = 0;
    int32_t max_seqs = 0;
    int64_t max_tokens = 0;
    int32_t width = 0;  // max_blocks_per_seq

    kvc::BatchHostArrays staging, committed;
    std::vector<int32_t> staging_tables;  // [max_seqs][width]
    std::vector<int32_t> shadow_tables;   // [max_seqs][width]: what the device table holds
    std::vector<uint8_t> shadow_valid;    // per row: shadow_tables row is known to be on the device
    std::vector<uint64_t> sort_scratch;   // duplicate-id check without allocation
    kvc::BatchDeviceArrays dev;
    void *workspace = nullptr;  // split-K partials (backend memory)
    size_t workspace_bytes = 0;
    void *stream = nullptr;     // cudaStream_t of the uploads (kvc_batch_set_stream); unused off CUDA

    bool built = false;
    int32_t rows_uploaded = 0;
    // Pool sequence generation seen at build; a launch re-validates the sequences when it moved.
    // Atomic because launches (which take the batch as const) may update it from several threads.
    mutable std::atomic<uint64_t> generation{0};
};

namespace kvc {

// Creates / destroys a batch (the C entry points validate arguments first).
kvc_status batch_create(kvc_pool *pool, int32_t max_seqs, int64_t max_tokens, int32_t max_blocks_per_seq,
                        kvc_batch **out);
void batch_destroy(kvc_batch *b);
kvc_status batch_build(kvc_batch *b, const uint64_t *seq_ids, const int64_t *q_lens, int32_t num_seqs);

// Before a launch: if any sequence was freed or swapped out since the build (the pool's sequence
// generation moved), checks under the pool lock that every sequence of the batch still exists,
// is resident, and still owns the blocks the batch references. KVC_ERR_STATE otherwise.
kvc_status batch_revalidate(const kvc_batch *b, const char *fn);

}  // namespace kvc
