// A CUDA pool's KV crosses UCX through host memory. Debian 12's UCX (1.13) has no CUDA transport
// (no cuda_copy / cuda_ipc: `ucx_info -d` lists self, tcp, posix, sysv, cma), so no get can read
// or write device memory; the staging is used for every CUDA pool, whatever UCX is installed
// (lib/transfer/README.md, "CUDA pools").
//
// Export: the leased device blocks are copied into slots of a pinned host chunk when exported;
// the descriptor names those slots and that chunk's rkey, so importers' gets never touch the GPU.
// Import: the gets land in slots of this agent's staging; after the lease check the progress
// thread copies them into the reserved device blocks (outside every lock), then they are committed.
// Chunks are registered once and live as long as the agent: a slot goes back to its chunk when
// its export ends or its import finishes, never to the OS, so a late get aimed at a released
// export reads reused host memory (which the lease check then refuses), never unmapped memory —
// the same argument as for a CPU pool's storage. The staging grows to the peak of concurrently
// staged blocks, up to a cap (KVC_XFER_STAGING_BYTES, default the pool's KV storage size).
// Device copies go through the library's CUDA interface (lib/storage/cuda_api.hpp, lib/storage/cuda_api.hpp)
// as the tier code's do.
#include "transfer/agent.hpp"

#ifdef KVC_HAVE_UCX

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/pool.hpp"
#include "error.hpp"
#include "storage/cuda_api.hpp"
#include "storage/pool_access.hpp"
#include "transfer/agent_state.hpp"

namespace kvc::xfer::detail {
namespace {

// A new chunk holds at least this much (fewer registrations), or one export's blocks if larger.
constexpr int64_t kChunkBytes = 64 << 20;

// Prefixes the message of a failed CUDA call with what it was for (copied first: fail() formats
// into the buffer kvc_last_error() points at).
kvc_status rethrow(kvc_status st, const char *fn, const char *what) {
    const std::string why = kvc_last_error();
    return fail(st, "%s: %s: %s", fn, what, why.c_str());
}

// n free slots of one chunk, lowest first (so that runs stay contiguous); under a->mu.
bool staging_take(kvc_xfer_agent *a, int64_t n, StagingLease *out) {
    for (size_t c = 0; c < a->chunks.size(); ++c) {
        StagingChunk &k = *a->chunks[c];
        if (k.free < n) continue;
        out->slots.clear();
        out->slots.reserve(size_t(n));  // may throw: before anything is marked
        for (int64_t s = 0; s < k.slots && int64_t(out->slots.size()) < n; ++s)
            if (!k.used[size_t(s)]) out->slots.push_back(int32_t(s));
        for (int32_t s : out->slots) k.used[size_t(s)] = 1;
        k.free -= n;
        out->chunk = int32_t(c);
        out->ck = &k;
        return true;
    }
    return false;
}

}  // namespace

kvc_status staging_init(kvc_xfer_agent *a, const char *fn) {
    a->staging_cap = a->total_bytes;
    if (const char *e = std::getenv("KVC_XFER_STAGING_BYTES"); e && std::atoll(e) > 0) a->staging_cap = std::atoll(e);
    if (!a->staged) return KVC_OK;  // a CPU pool's export staging: no device, no stream
    if (kvc_status st = cuda::tier_stream_create(a->pool->device, &a->stream); st != KVC_OK)
        return rethrow(st, fn, "cannot create the transfer's copy stream");
    return KVC_OK;
}

kvc_status staging_reserve(kvc_xfer_agent *a, int64_t n, StagingLease *out, const char *fn) {
    const int64_t bb = a->block_bytes;
    std::unique_lock<std::mutex> lk(a->mu);
    if (staging_take(a, n, out)) return KVC_OK;
    const int64_t room = (a->staging_cap - a->staging_bytes) / bb;
    const int64_t slots = std::min(room, std::max(n, std::max<int64_t>(1, kChunkBytes / bb)));
    if (slots < n)
        return fail(KVC_ERR_NO_MEMORY,
                    "%s: the host staging of this CUDA pool's transfers is full: %lld blocks (%lld bytes) needed, "
                    "%lld of %lld bytes allocated (KVC_XFER_STAGING_BYTES); nothing changed",
                    fn, (long long)n, (long long)(n * bb), (long long)a->staging_bytes, (long long)a->staging_cap);
    a->staging_bytes += slots * bb;  // the budget is taken before the lock is dropped
    auto chunk = std::make_unique<StagingChunk>();
    chunk->used.assign(size_t(slots), 0);
    const UcxApi *u = a->u;
    void *mem = nullptr;
    ucs_status_t s = UCS_OK;
    if (!a->staged) {
        // A CPU pool's export staging: UCX allocates it (a SysV or POSIX shared segment that its
        // shared-memory transports map into the importer), registered by the same call. After the
        // slots: one lease word per slot (StagingChunk::words), in the same memory and rkey.
        const size_t words_bytes = (size_t(slots) * 8 + 63) & ~size_t(63);
        ucp_mem_map_params_t mp{};
        mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                        UCP_MEM_MAP_PARAM_FIELD_FLAGS;
        mp.address = nullptr;
        mp.length = size_t(slots * bb) + words_bytes;
        mp.flags = UCP_MEM_MAP_ALLOCATE;
        s = u->ucp_mem_map(a->ctx, &mp, &chunk->memh);
        ucp_mem_attr_t ma{};
        ma.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
        if (s == UCS_OK) s = u->ucp_mem_query(chunk->memh, &ma);
        if (s == UCS_OK && ma.length < mp.length) s = UCS_ERR_NO_MEMORY;
        if (s == UCS_OK && (reinterpret_cast<uintptr_t>(ma.address) + size_t(slots * bb)) % 8 != 0)
            s = UCS_ERR_UNSUPPORTED;  // the words must be 8-aligned (bb is, and UCX's segments are)
        if (s != UCS_OK) {
            if (chunk->memh) u->ucp_mem_unmap(a->ctx, chunk->memh);
            a->staging_bytes -= slots * bb;
            return fail(KVC_ERR_NO_MEMORY, "%s: UCX cannot allocate export staging (ucp_mem_map): %s", fn,
                        u->ucs_status_string(s));
        }
        mem = ma.address;
        chunk->ucx_allocated = true;
        chunk->words = reinterpret_cast<uint64_t *>(static_cast<char *>(mem) + slots * bb);
        for (int64_t w = 0; w < slots; ++w) __atomic_store_n(&chunk->words[w], uint64_t(0), __ATOMIC_RELAXED);
    } else {
        // Pinning host memory can take long (page faults, IOMMU): not under the agent's lock.
        lk.unlock();
        kvc_status st = cuda::malloc_pinned(size_t(slots * bb), &mem);
        lk.lock();
        if (st != KVC_OK) {
            a->staging_bytes -= slots * bb;
            return rethrow(st, fn, "cannot allocate pinned host staging");
        }
        ucp_mem_map_params_t mp{};
        mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
        mp.address = mem;
        mp.length = size_t(slots * bb);
        s = u->ucp_mem_map(a->ctx, &mp, &chunk->memh);
    }
    void *rk = nullptr;
    size_t rk_len = 0;
    if (s == UCS_OK) s = u->ucp_rkey_pack(a->ctx, chunk->memh, &rk, &rk_len);
    if (s != UCS_OK || rk_len > kMaxWireBlob) {
        if (rk) u->ucp_rkey_buffer_release(rk);
        if (chunk->memh) u->ucp_mem_unmap(a->ctx, chunk->memh);  // frees UCX-allocated memory
        a->staging_bytes -= slots * bb;
        lk.unlock();
        if (!chunk->ucx_allocated) (void)cuda::free_pinned(mem);  // synchronizes the device: not under the lock
        return fail(KVC_ERR_IO, "%s: registering the host staging failed: %s", fn,
                    s != UCS_OK ? u->ucs_status_string(s) : "rkey too large for a descriptor");
    }
    chunk->rkey.assign(static_cast<uint8_t *>(rk), static_cast<uint8_t *>(rk) + rk_len);
    u->ucp_rkey_buffer_release(rk);
    chunk->base = static_cast<char *>(mem);
    chunk->slots = slots;
    chunk->free = slots;
    a->chunks.push_back(std::move(chunk));
    if (!staging_take(a, n, out))  // the new chunk has n free slots
        return fail(KVC_ERR_INTERNAL, "%s: a new staging chunk of %lld slots cannot hold %lld", fn, (long long)slots,
                    (long long)n);
    return KVC_OK;
}

void staging_release(kvc_xfer_agent *a, StagingLease *l) {
    if (l->chunk < 0) return;
    StagingChunk &k = *a->chunks[size_t(l->chunk)];
    for (int32_t s : l->slots) k.used[size_t(s)] = 0;
    k.free += int64_t(l->slots.size());
    l->slots.clear();
    l->chunk = -1;
    l->ck = nullptr;
}

char *staging_slot(const kvc_xfer_agent *a, const StagingLease &l, int64_t i) {
    return l.ck->base + int64_t(l.slots[size_t(i)]) * a->block_bytes;
}

kvc_status stage_out(kvc_xfer_agent *a, const std::vector<int32_t> &blocks, const StagingLease &l, const char *fn) {
    kvc_pool *p = a->pool;
    const int64_t bb = a->block_bytes;
    if (!a->staged) {
        // A CPU pool: the leased blocks are cached, so never written by the pool, and hold_prompt /
        // hold_seq ran the storage barrier (restored blocks' bytes are in place).
        for (size_t i = 0; i < blocks.size(); ++i)
            std::memcpy(staging_slot(a, l, int64_t(i)), a->base + int64_t(blocks[i]) * bb, size_t(bb));
        return KVC_OK;
    }
    if (kvc_status st = cuda::use_device(p->device, fn); st != KVC_OK) return st;
    // The legacy default stream, as kvc_storage_copy_blocks reads the pool: the barrier orders it
    // after the tier copies and copy-on-write kernels, and the legacy stream itself after the KV
    // writes queued on blocking streams (a caller that wrote on a non-blocking stream must have
    // synchronized it: export after the forward pass, as on the CPU).
    if (kvc_status st = pool_storage_barrier(p, nullptr); st != KVC_OK) return st;
    const int64_t n = int64_t(blocks.size());
    kvc_status st = KVC_OK;
    for (int64_t i = 0; i < n && st == KVC_OK;) {
        int64_t run = 1;
        while (i + run < n && blocks[size_t(i + run)] == blocks[size_t(i)] + run &&
               l.slots[size_t(i + run)] == l.slots[size_t(i)] + run)
            ++run;
        st = cuda::memcpy_d2h(staging_slot(a, l, i), a->base + int64_t(blocks[size_t(i)]) * bb, size_t(run * bb),
                              nullptr);
        i += run;
    }
    // Waited for even after a failed enqueue: the slots go back to the staging on failure.
    const kvc_status ss = cuda::stream_sync(nullptr);
    if (st == KVC_OK) st = ss;
    if (st != KVC_OK) return rethrow(st, fn, "copying the exported blocks to host staging failed");
    return KVC_OK;
}

kvc_status land(kvc_xfer_agent *a, ImportOp *op) {
    const int64_t bb = a->block_bytes;
    const std::vector<int32_t> &f = op->res.fresh;
    const StagingLease &l = op->staged;
    const int64_t m = int64_t(f.size());
    if (kvc_status st = cuda::use_device(a->pool->device, "kvc_xfer_op_wait"); st != KVC_OK) return st;
    // This agent's own stream, ordered after the tier copies and copy-on-write kernels that could
    // still read these blocks by the barrier at kvc_xfer_import; waiting for it does not wait for
    // the server's compute stream.
    kvc_status st = KVC_OK;
    for (int64_t j = 0; j < m && st == KVC_OK;) {
        int64_t run = 1;
        while (j + run < m && f[size_t(j + run)] == f[size_t(j)] + run &&
               l.slots[size_t(j + run)] == l.slots[size_t(j)] + run)
            ++run;
#ifdef KVC_TEST_HOOKS
        if (device_fault_take()) {
            st = fail(KVC_ERR_DEVICE, "cuda memcpy host->device: injected failure (kvct_xfer_device_fault)");
            break;
        }
#endif
        st = cuda::memcpy_h2d(a->base + int64_t(f[size_t(j)]) * bb, staging_slot(a, l, j), size_t(run * bb), a->stream);
        j += run;
    }
    // Waited for even after a failed enqueue: the blocks go back to the pool on failure, and no
    // copy may still be writing one then.
    const kvc_status ss = cuda::stream_sync(a->stream);
    return st != KVC_OK ? st : ss;
}

void staging_unmap(kvc_xfer_agent *a) {
    for (auto &c : a->chunks)
        if (c->memh) {
            a->u->ucp_mem_unmap(a->ctx, c->memh);
            c->memh = nullptr;
        }
}

void staging_free(kvc_xfer_agent *a) {
    for (auto &c : a->chunks)
        if (!c->ucx_allocated) (void)cuda::free_pinned(c->base);  // UCX's own went with ucp_mem_unmap
    a->chunks.clear();
    if (a->stream) cuda::tier_stream_destroy(a->stream);  // synchronizes first
    a->stream = nullptr;
}

}  // namespace kvc::xfer::detail

#endif  // KVC_HAVE_UCX
