// Batch metadata: creation (all allocation), build (staging -> incremental upload -> commit) and
// launch-time re-validation. See storage/batch.hpp for the design.
#include "storage/batch.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <type_traits>

#include "cpu/cpu_backend.hpp"
#include "error.hpp"
#include "storage/cuda_api.hpp"
#include "storage/pool_access.hpp"

namespace kvc {
namespace {

constexpr size_t kAlign = 256;  // device array alignment (coalesced loads, cudaMalloc-like)

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

bool on_device(const kvc_batch *b) { return b->backend == KVC_BACKEND_CUDA; }

// Copies host -> batch "device" memory: cudaMemcpyAsync from the pinned host buffer on the batch's
// stream on CUDA (the DMA reads the source when the stream gets there: see fence_staging), memcpy
// otherwise.
kvc_status upload(const kvc_batch *b, void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return KVC_OK;
    if (on_device(b)) return cuda::memcpy_h2d(dst, src, bytes, b->stream);
    std::memcpy(dst, src, bytes);
    return KVC_OK;
}

void free_backend(int32_t backend, int32_t device, void *p) {
    if (!p) return;
    if (backend == KVC_BACKEND_CUDA)
        (void)cuda::free_device(device, p);
    else
        std::free(p);
}

kvc_status alloc_backend(kvc_batch *b, size_t bytes, void **out) {
    *out = nullptr;
    if (bytes == 0) return KVC_OK;
    if (on_device(b)) return cuda::malloc_device(b->device, bytes, out);
    *out = std::aligned_alloc(kAlign, align_up(bytes));
    if (!*out) return fail(KVC_ERR_NO_MEMORY, "kvc_batch_create: cannot allocate %zu bytes", bytes);
    std::memset(*out, 0, bytes);
    return KVC_OK;
}

// Places the arrays of one host buffer at aligned offsets of `mem` and returns the bytes they span
// (with mem == nullptr: only the size).
size_t place_host_arrays(BatchHostArrays &h, char *mem, int32_t max_seqs, int64_t max_tokens, int64_t table_elems) {
    const size_t n = size_t(max_seqs), t = size_t(table_elems);
    size_t at = 0;
    auto take = [&](auto &arr, size_t count) {
        using T = std::remove_reference_t<decltype(*arr.ptr)>;
        if (mem) arr.ptr = reinterpret_cast<T *>(mem + at);
        at += align_up(count * sizeof(T));
    };
    take(h.tables, t);
    take(h.seq_lens, n);
    take(h.query_start_loc, n + 1);
    take(h.kv_indptr, n + 1);
    take(h.kv_indices, t);
    take(h.kv_last_page_len, n);
    take(h.slot_mapping, size_t(max_tokens));
    take(h.seq_ids, n);
    take(h.seq_incarnations, n);
    return at;
}

// One host buffer: pinned memory and its upload event on CUDA (the copies read it asynchronously),
// plain memory on CPU and for metadata-only pools.
kvc_status alloc_host_arrays(kvc_batch *b, BatchHostArrays &h, int64_t table_elems) {
    const size_t bytes = place_host_arrays(h, nullptr, b->max_seqs, b->max_tokens, table_elems);
    void *mem = nullptr;
    if (on_device(b)) {
        // Pinned while the pool's device is current (with unified addressing every device may DMA
        // from it anyway); the event must belong to that device to be recorded on its streams.
        if (kvc_status st = cuda::use_device(b->device, "kvc_batch_create"); st != KVC_OK) return st;
        if (kvc_status st = cuda::malloc_pinned(bytes, &mem); st != KVC_OK) return st;
        h.memory = mem;
        if (kvc_status st = cuda::event_create_on(b->device, &h.upload_done); st != KVC_OK) return st;
    } else {
        mem = std::aligned_alloc(kAlign, bytes);
        if (!mem) return fail(KVC_ERR_NO_MEMORY, "kvc_batch_create: cannot allocate %zu bytes", bytes);
        h.memory = mem;
    }
    std::memset(mem, 0, bytes);
    place_host_arrays(h, static_cast<char *>(mem), b->max_seqs, b->max_tokens, table_elems);
    return KVC_OK;
}

// Waits (if needed) for the copies that last read `h`, and frees it. Errors are ignored: the memory
// must go either way, and after a device error no copy runs any more.
void free_host_arrays(int32_t backend, BatchHostArrays &h) {
    if (backend == KVC_BACKEND_CUDA) {
        if (h.upload_pending) (void)cuda::event_sync(h.upload_done);
        cuda::event_destroy(h.upload_done);
        (void)cuda::free_pinned(h.memory);
    } else {
        std::free(h.memory);
    }
    h = BatchHostArrays();
}

// Before a build writes the staging buffer: on CUDA, waits until the copies that last read it
// (normally those of the build before the previous one) have run. Off CUDA nothing is pending.
kvc_status wait_staging_free(kvc_batch *b) {
    BatchHostArrays &h = b->staging;
    if (!h.upload_pending) return KVC_OK;
    if (kvc_status st = cuda::event_sync(h.upload_done); st != KVC_OK) return st;
    h.upload_pending = false;
    return KVC_OK;
}

// After some or all of a build's copies were enqueued: records the staging buffer's event behind
// them, so the next build that writes this buffer waits for exactly these copies (and nothing
// enqueued later). If the event cannot be recorded (a device error), the stream is synchronized
// instead, best effort, so the buffer is never rewritten under a pending copy.
kvc_status fence_staging(kvc_batch *b) {
    BatchHostArrays &h = b->staging;
    if (kvc_status st = cuda::event_record(h.upload_done, b->stream); st != KVC_OK) {
        (void)cuda::stream_sync(b->stream);
        return st;
    }
    h.upload_pending = true;
    b->last_upload_event = h.upload_done;
    b->last_upload_stream = b->stream;
    return KVC_OK;
}

// CUDA, before the first copy of a build: makes the pool's device current (the NULL stream is the
// current device's) and, if the stream changed since the last upload, has the new stream wait on
// the GPU for the last upload's copies: the incremental upload assumes the device table will hold
// what those copies write before these run.
// Also orders the stream after the pool's tier copies (swap-in, restore, spill) and copy-on-write
// copies, so a CUDA graph
// replayed on it after the build sees them done: launches inside a capture cannot wait for them
// themselves (pool_storage_barrier skips capturing streams).
kvc_status prepare_stream(kvc_batch *b) {
    if (kvc_status st = cuda::use_device(b->device, "kvc_batch_build"); st != KVC_OK) return st;
    if (kvc_status st = pool_storage_barrier(b->pool, b->stream); st != KVC_OK) return st;
    if (b->last_upload_event && b->stream != b->last_upload_stream)
        return cuda::stream_wait_event(b->stream, b->last_upload_event);
    return KVC_OK;
}

// Enqueues the staging build: dirty block-table rows (coalesced into runs) and the used part of
// every other array. Returns the number of table rows sent in *rows.
kvc_status enqueue_copies(kvc_batch *b, int32_t *rows) {
    const BatchHostArrays &h = b->staging;
    const size_t row_bytes = size_t(b->width) * sizeof(int32_t);
    *rows = 0;
    int32_t r = 0;
    while (r < h.num_seqs) {
        auto dirty = [&](int32_t i) {
            return !b->shadow_valid[size_t(i)] || std::memcmp(&h.tables[size_t(i) * b->width],
                                                              &b->shadow_tables[size_t(i) * b->width], row_bytes) != 0;
        };
        if (!dirty(r)) {
            ++r;
            continue;
        }
        int32_t end = r + 1;
        while (end < h.num_seqs && dirty(end)) ++end;
        const size_t off = size_t(r) * b->width;
        if (kvc_status st = upload(b, b->dev.block_tables + off, &h.tables[off], row_bytes * size_t(end - r));
            st != KVC_OK)
            return st;
        // The shadow follows the enqueued copies, not their completion: later copies on the same
        // stream (or on a new stream made to wait, prepare_stream) land after these.
        std::memcpy(&b->shadow_tables[off], &h.tables[off], row_bytes * size_t(end - r));
        std::fill(b->shadow_valid.begin() + r, b->shadow_valid.begin() + end, uint8_t(1));
        *rows += end - r;
        r = end;
    }
    const size_t n = size_t(h.num_seqs);
    struct Piece {
        void *dst;
        const void *src;
        size_t bytes;
    };
    const Piece pieces[] = {
        {b->dev.seq_lens, h.seq_lens.data(), n * 4},
        {b->dev.query_start_loc, h.query_start_loc.data(), (n + 1) * 4},
        {b->dev.kv_indptr, h.kv_indptr.data(), (n + 1) * 4},
        {b->dev.kv_last_page_len, h.kv_last_page_len.data(), n * 4},
        {b->dev.kv_indices, h.kv_indices.data(), size_t(h.num_indices) * 4},
        {b->dev.slot_mapping, h.slot_mapping.data(), size_t(h.num_tokens) * 8},
    };
    for (const Piece &p : pieces)
        if (kvc_status st = upload(b, p.dst, p.src, p.bytes); st != KVC_OK) return st;
    return KVC_OK;
}

// Uploads the staging build. On CUDA nothing here waits for the stream: the copies are enqueued and
// fenced by the staging buffer's event.
kvc_status upload_staging(kvc_batch *b, int32_t *rows) {
    *rows = 0;
    if (!on_device(b)) return enqueue_copies(b, rows);
    if (kvc_status st = prepare_stream(b); st != KVC_OK) return st;
    const kvc_status copied = enqueue_copies(b, rows);
    const kvc_status fenced = fence_staging(b);  // also after a failed copy: earlier ones may be pending
    return copied != KVC_OK ? copied : fenced;
}

}  // namespace

kvc_status batch_create(kvc_pool *pool, int32_t max_seqs, int64_t max_tokens, int32_t max_blocks_per_seq,
                        kvc_batch **out) {
    const char *fn = "kvc_batch_create";
    const KvLayout &L = pool_layout(pool);
    int64_t table_elems, context;
    if (mul_overflows(max_seqs, max_blocks_per_seq, &table_elems) || table_elems > INT32_MAX)
        return fail(KVC_ERR_OVERFLOW, "%s: %d sequences x %d blocks exceeds the int32 index range", fn, max_seqs,
                    max_blocks_per_seq);
    if (max_tokens > INT32_MAX)
        return fail(KVC_ERR_OVERFLOW, "%s: max_tokens %lld exceeds the int32 offset range", fn, (long long)max_tokens);
    if (mul_overflows(max_blocks_per_seq, L.block_size, &context) || context > INT32_MAX)
        return fail(KVC_ERR_OVERFLOW, "%s: %d blocks of %d tokens exceeds the int32 length range", fn,
                    max_blocks_per_seq, L.block_size);

    // Every failure below frees what was made so far through batch_destroy (all of it null-safe).
    struct Destroy {
        void operator()(kvc_batch *p) const { batch_destroy(p); }
    };
    std::unique_ptr<kvc_batch, Destroy> b(new kvc_batch());
    b->pool = pool;
    b->backend = pool_backend(pool);
    b->device = pool_device(pool);
    b->block_size = L.block_size;
    b->max_seqs = max_seqs;
    b->max_tokens = max_tokens;
    b->width = max_blocks_per_seq;
    for (BatchHostArrays *h : {&b->staging, &b->committed})
        if (kvc_status st = alloc_host_arrays(b.get(), *h, table_elems); st != KVC_OK) return st;
    b->shadow_tables.assign(size_t(table_elems), -1);
    b->shadow_valid.assign(size_t(max_seqs), 0);
    b->sort_scratch.resize(size_t(max_seqs));

    // One backend allocation for every array, each at an aligned offset.
    const size_t n = size_t(max_seqs);
    const size_t sizes[] = {size_t(table_elems) * 4, n * 4, (n + 1) * 4,           (n + 1) * 4,
                            size_t(table_elems) * 4, n * 4, size_t(max_tokens) * 8};
    size_t offsets[7], total = 0;
    for (int i = 0; i < 7; ++i) {
        offsets[i] = total;
        total += align_up(sizes[i]);
    }
    void *mem = nullptr;
    if (kvc_status st = alloc_backend(b.get(), total, &mem); st != KVC_OK) return st;
    char *m = static_cast<char *>(mem);
    b->dev.memory = mem;
    b->dev.bytes = total;
    b->dev.block_tables = reinterpret_cast<int32_t *>(m + offsets[0]);
    b->dev.seq_lens = reinterpret_cast<int32_t *>(m + offsets[1]);
    b->dev.query_start_loc = reinterpret_cast<int32_t *>(m + offsets[2]);
    b->dev.kv_indptr = reinterpret_cast<int32_t *>(m + offsets[3]);
    b->dev.kv_indices = reinterpret_cast<int32_t *>(m + offsets[4]);
    b->dev.kv_last_page_len = reinterpret_cast<int32_t *>(m + offsets[5]);
    b->dev.slot_mapping = reinterpret_cast<int64_t *>(m + offsets[6]);

    // Split-K scratch, sized for the widest context this batch can describe.
    // A hybrid pool's groups may differ in head_dim and the batch may serve any of them.
    const int32_t nqh = pool_num_q_heads(pool), head_dim = pool_max_head_dim(pool);
    size_t ws = 0;
    if (b->backend == KVC_BACKEND_CUDA)
        ws = cuda::attention_workspace_bytes(max_seqs, nqh, head_dim, context);
    else if (b->backend == KVC_BACKEND_CPU)
        ws = cpu_attention_workspace_bytes(max_seqs, nqh, head_dim, context);
    if (ws > 0) {
        if (kvc_status st = alloc_backend(b.get(), ws, &b->workspace); st != KVC_OK) return st;
        b->workspace_bytes = ws;
    }
    *out = b.release();
    return KVC_OK;
}

void batch_destroy(kvc_batch *b) {
    // Host buffers first: freeing one waits for the copies still reading it.
    free_host_arrays(b->backend, b->staging);
    free_host_arrays(b->backend, b->committed);
    free_backend(b->backend, b->device, b->workspace);
    free_backend(b->backend, b->device, b->dev.memory);
    delete b;
}

kvc_status batch_build(kvc_batch *b, const uint64_t *seq_ids, const int64_t *q_lens, int32_t num_seqs) {
    const char *fn = "kvc_batch_build";
    if (num_seqs < 1 || num_seqs > b->max_seqs)
        return fail(KVC_ERR_INVALID_ARG, "%s: num_seqs %d outside [1, %d]", fn, num_seqs, b->max_seqs);
    // A new batch records group 0, which a hybrid pool may have made an SSM group: its slot
    // mapping would send K/V writes into state pages (kvc_batch_set_group refuses SSM groups).
    if (pool_group_kind(b->pool, b->group) == KVC_GROUP_SSM)
        return fail(KVC_ERR_STATE,
                    "%s: the batch's group %d is an SSM group, which has no block tables to launch attention "
                    "over; choose an attention group with kvc_batch_set_group",
                    fn, b->group);
    int64_t total = 0;
    for (int32_t i = 0; i < num_seqs; ++i) {
        if (q_lens[i] < 1)
            return fail(KVC_ERR_INVALID_ARG, "%s: q_lens[%d] = %lld, must be >= 1", fn, i, (long long)q_lens[i]);
        if (add_overflows(total, q_lens[i], &total))
            return fail(KVC_ERR_OVERFLOW, "%s: total query tokens overflow", fn);
    }
    if (total > b->max_tokens)
        return fail(KVC_ERR_BUFFER_TOO_SMALL, "%s: %lld new tokens exceed the batch capacity of %lld", fn,
                    (long long)total, (long long)b->max_tokens);
    std::copy(seq_ids, seq_ids + num_seqs, b->sort_scratch.begin());
    std::sort(b->sort_scratch.begin(), b->sort_scratch.begin() + num_seqs);
    for (int32_t i = 1; i < num_seqs; ++i)
        if (b->sort_scratch[size_t(i)] == b->sort_scratch[size_t(i - 1)])
            return fail(KVC_ERR_INVALID_ARG, "%s: sequence %llu appears twice", fn,
                        (unsigned long long)b->sort_scratch[size_t(i)]);

    if (on_device(b)) {
        // Copies recorded into a graph would not run now: the device arrays would not change while
        // the host mirrors did, and the fence event would belong to the capture.
        bool capturing = false;
        if (kvc_status st = cuda::stream_capturing(b->stream, &capturing); st != KVC_OK) return st;
        if (capturing)
            return fail(KVC_ERR_STATE,
                        "%s: the batch's stream is being captured into a CUDA graph; build before capturing or "
                        "replaying (the graph reads the batch's fixed device arrays)",
                        fn);
    }

    // The staging buffer may still be the source of an earlier build's copies: wait for them before
    // writing it (and before taking the pool lock, which never covers a device wait).
    if (kvc_status st = wait_staging_free(b); st != KVC_OK) return st;
    BatchHostArrays &h = b->staging;
    const int32_t bs = b->block_size, W = b->width, group = b->group;
    uint64_t generation;
    int64_t max_window = INT32_MAX;
    {
        // The only work under the pool lock: look up each sequence and copy its (group's) table row.
        std::lock_guard<kvc::PoolMutex> lk(pool_mutex(b->pool));
        generation = pool_seq_generation(b->pool);
        h.pool_window = pool_group_window(b->pool, group);
        h.group = group;
        for (int32_t i = 0; i < num_seqs; ++i) {
            SeqRef s;
            if (!pool_find_seq(b->pool, seq_ids[i], group, &s))
                return fail(KVC_ERR_UNKNOWN_SEQ, "%s: no sequence %llu", fn, (unsigned long long)seq_ids[i]);
            if (s.swapped_out)
                return fail(KVC_ERR_STATE, "%s: sequence %llu is swapped out", fn, (unsigned long long)seq_ids[i]);
            if (q_lens[i] > s.num_tokens)
                return fail(KVC_ERR_INVALID_ARG, "%s: q_lens[%d] = %lld exceeds the %lld tokens of sequence %llu", fn,
                            i, (long long)q_lens[i], (long long)s.num_tokens, (unsigned long long)seq_ids[i]);
            if (s.num_tokens > INT32_MAX)
                return fail(KVC_ERR_OVERFLOW, "%s: sequence %llu is longer than INT32_MAX", fn,
                            (unsigned long long)seq_ids[i]);
            const int64_t nb = (s.num_tokens + bs - 1) / bs;
            if (nb > W)
                return fail(KVC_ERR_BUFFER_TOO_SMALL, "%s: sequence %llu needs %lld blocks, the batch rows hold %d", fn,
                            (unsigned long long)seq_ids[i], (long long)nb, W);
            if (nb > s.num_blocks)
                return fail(KVC_ERR_INTERNAL, "%s: sequence %llu has %lld tokens but only %lld blocks", fn,
                            (unsigned long long)seq_ids[i], (long long)s.num_tokens, (long long)s.num_blocks);
            if (s.released_blocks > 0) {
                // The first query sees keys from its position - window + 1: none may be released.
                const int64_t first_query = s.num_tokens - q_lens[i], released_end = s.released_blocks * bs;
                if (first_query < released_end)
                    return fail(KVC_ERR_INVALID_ARG,
                                "%s: q_lens[%d] = %lld starts at position %lld of sequence %llu, "
                                "whose blocks before position %lld were released by the sliding window",
                                fn, i, (long long)q_lens[i], (long long)first_query, (unsigned long long)seq_ids[i],
                                (long long)released_end);
                max_window = std::min(max_window, first_query - released_end + 1);
            }
            int32_t *row = &h.tables[size_t(i) * W];
            std::copy(s.blocks, s.blocks + nb, row);
            std::fill(row + nb, row + W, -1);
            h.seq_lens[size_t(i)] = int32_t(s.num_tokens);
            h.seq_incarnations[size_t(i)] = s.incarnation;
        }
    }

    // Derived arrays, outside the lock.
    h.num_seqs = num_seqs;
    h.num_tokens = total;
    h.max_q_len = 0;
    h.max_seq_len = 0;
    h.query_start_loc[0] = 0;
    h.kv_indptr[0] = 0;
    int64_t tok = 0, idx = 0;
    for (int32_t i = 0; i < num_seqs; ++i) {
        const int64_t L = h.seq_lens[size_t(i)], Q = q_lens[i];
        const int64_t nb = (L + bs - 1) / bs;
        const int32_t *row = &h.tables[size_t(i) * W];
        for (int64_t p = L - Q; p < L; ++p) h.slot_mapping[size_t(tok++)] = int64_t(row[p / bs]) * bs + p % bs;
        std::copy(row, row + nb, &h.kv_indices[size_t(idx)]);
        idx += nb;
        h.query_start_loc[size_t(i) + 1] = int32_t(tok);
        h.kv_indptr[size_t(i) + 1] = int32_t(idx);
        h.kv_last_page_len[size_t(i)] = int32_t(L - (nb - 1) * bs);
        h.seq_ids[size_t(i)] = seq_ids[i];
        h.max_q_len = std::max<int32_t>(h.max_q_len, int32_t(Q));
        h.max_seq_len = std::max<int64_t>(h.max_seq_len, L);
    }
    h.num_indices = idx;
    h.is_decode = h.max_q_len == 1;
    h.max_window = int32_t(max_window);

    int32_t rows = 0;
    if (kvc_status st = upload_staging(b, &rows); st != KVC_OK) {
        // The device arrays may be half-written: forget what they hold and refuse launches until a
        // successful build.
        std::fill(b->shadow_valid.begin(), b->shadow_valid.end(), uint8_t(0));
        b->built = false;
        return st;
    }
    std::swap(b->staging, b->committed);  // commit: O(1), pointers and events trade places
    b->rows_uploaded = rows;
    b->generation.store(generation, std::memory_order_relaxed);
    b->built = true;
    return KVC_OK;
}

kvc_status batch_revalidate(const kvc_batch *b, const char *fn) {
    if (pool_seq_generation(b->pool) == b->generation.load(std::memory_order_relaxed)) return KVC_OK;
    const BatchHostArrays &h = b->committed;
    std::lock_guard<kvc::PoolMutex> lk(pool_mutex(b->pool));
    const uint64_t generation = pool_seq_generation(b->pool);
    for (int32_t i = 0; i < h.num_seqs; ++i) {
        const uint64_t id = h.seq_ids[size_t(i)];
        SeqRef s;
        if (!pool_find_seq(b->pool, id, h.group, &s))
            return fail(KVC_ERR_STATE, "%s: sequence %llu of the batch was freed; build the batch again", fn,
                        (unsigned long long)id);
        if (s.incarnation != h.seq_incarnations[size_t(i)])
            return fail(KVC_ERR_STATE,
                        "%s: sequence %llu of the batch was freed and the id now names a new "
                        "sequence; build the batch again",
                        fn, (unsigned long long)id);
        if (s.swapped_out)
            return fail(KVC_ERR_STATE, "%s: sequence %llu of the batch was swapped out; build the batch again", fn,
                        (unsigned long long)id);
        const int64_t nb = h.kv_indptr[size_t(i) + 1] - h.kv_indptr[size_t(i)];
        if (s.num_tokens < h.seq_lens[size_t(i)] || s.num_blocks < nb ||
            !std::equal(s.blocks, s.blocks + nb, &h.kv_indices[size_t(h.kv_indptr[size_t(i)])]))
            return fail(KVC_ERR_STATE,
                        "%s: sequence %llu no longer owns the blocks the batch references; build the "
                        "batch again",
                        fn, (unsigned long long)id);
    }
    b->generation.store(generation, std::memory_order_relaxed);
    return KVC_OK;
}

}  // namespace kvc
