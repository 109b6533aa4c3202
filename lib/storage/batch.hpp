// Batch metadata for one forward step (kvc_batch_*): the object behind the opaque kvc_batch handle.
//
// Fixed capacity, everything allocated in create: two host buffers of every array the kernels read
// (BatchHostArrays: one holds the last successful build, "committed", the other is "staging" for
// the next), a host mirror of the device block table ("shadow"), and one backend allocation holding
// every array the kernels read ("device" arrays: device memory on CUDA; a host allocation on CPU
// and for metadata-only pools, so the addresses in kvc_batch_info never change either way).
//
// Build = validate, copy the sequences' tables under the pool lock into staging, fill the derived
// arrays, upload what changed, then commit by swapping staging and committed (O(1), no
// allocation). A failed validation touches neither the committed arrays nor the device arrays.
// Block-table rows are uploaded only when they differ from what the device will hold when the
// upload runs (shadow_tables mirrors it), in as few contiguous copies as there are dirty runs.
//
// CUDA ordering (no host wait for the stream):
//  - The host buffers are pinned (cudaMallocHost), so each cudaMemcpyAsync is a DMA that reads its
//    source when the stream reaches it, possibly long after the build returned. After a build's
//    copies, an event is recorded on the batch's stream into the buffer they read (upload_done).
//  - A build first waits for its staging buffer's event (cudaEventSynchronize), i.e. for the copies
//    of the last build that read that buffer, and only then writes it. Because commits alternate
//    the two buffers, that is normally the build before the previous one: its copies ran ahead of
//    the previous step's kernels, so the wait is normally already satisfied. A single buffer would
//    instead wait for the previous build's copies, which sit behind the previous step's kernels on
//    the stream, and cap the host at one step ahead of the GPU; the derived arrays were double
//    already for the O(1) commit, so the second buffer costs only one more pinned table.
//  - The copies go onto the stream after the work already there (the previous step's kernels that
//    read the device arrays) and before any later work (this step's kernels). When the stream
//    changes between builds (kvc_batch_set_stream), the new stream first waits on the GPU for the
//    previous build's event, so uploads never overtake each other and the shadow stays exact.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvc/kvc.h"

namespace kvc {

// A fixed array inside a BatchHostArrays allocation (not owning). data()/[] like the std::vector
// it replaces, so readers of the committed arrays do not care where the memory comes from.
template <class T>
struct HostArray {
    T *ptr = nullptr;
    T *data() const { return ptr; }
    T &operator[](size_t i) const { return ptr[i]; }
};

// The arrays of one build, on the host, in one allocation: pinned memory on CUDA (copies read it
// asynchronously), plain memory otherwise.
struct BatchHostArrays {
    HostArray<int32_t> tables;  // [max_seqs][width], -1 padded
    HostArray<int32_t> seq_lens, query_start_loc, kv_indptr, kv_indices, kv_last_page_len;
    HostArray<int64_t> slot_mapping;
    HostArray<uint64_t> seq_ids;
    HostArray<uint64_t> seq_incarnations;  // which life of each id the build saw (re-validation)
    int32_t num_seqs = 0;
    int64_t num_tokens = 0;
    int32_t max_q_len = 0;
    int64_t max_seq_len = 0;
    int64_t num_indices = 0;
    bool is_decode = false;
    // Sliding window: the window the recorded group's tables release blocks for at build time
    // (kvc_pool_set_sliding_window, or a hybrid pool's group window; 0 = off) and the widest
    // launch window that reads no released block (INT32_MAX when none is released).
    int32_t pool_window = 0;
    int32_t max_window = 0;
    // The KV-cache group whose tables this build recorded (kvc_batch_set_group at build time):
    // launches check their layer's group against it.
    int32_t group = 0;

    void *memory = nullptr;       // the allocation holding every array above
    void *upload_done = nullptr;  // CUDA: cudaEvent_t recorded after the last copies reading it
    bool upload_pending = false;  // upload_done was recorded and not waited for since
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
    int32_t group = 0;  // the group the next build records (kvc_batch_set_group); never SSM

    // Commit swaps the two structs whole: each keeps its memory and its event.
    kvc::BatchHostArrays staging, committed;
    std::vector<int32_t> shadow_tables;  // [max_seqs][width]: what the device table holds (or will,
                                         // once the copies already enqueued have run)
    std::vector<uint8_t> shadow_valid;   // per row: shadow_tables row is known to be on the device
    std::vector<uint64_t> sort_scratch;  // duplicate-id check without allocation
    kvc::BatchDeviceArrays dev;
    void *workspace = nullptr;  // split-K partials (backend memory)
    size_t workspace_bytes = 0;
    void *stream = nullptr;  // cudaStream_t of the uploads (kvc_batch_set_stream); unused off CUDA
    // CUDA: the event recorded after the most recent build's copies (either buffer's upload_done,
    // or null before the first upload) and the stream they went to.
    void *last_upload_event = nullptr;
    void *last_upload_stream = nullptr;

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
// is resident, and still owns the blocks the batch references (in the group the build recorded).
// KVC_ERR_STATE otherwise.
kvc_status batch_revalidate(const kvc_batch *b, const char *fn);

}  // namespace kvc
