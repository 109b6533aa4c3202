// kvc_copy_pending's engine: executes the queued copy-on-write pairs (src block -> dst block).
//
// Three rules make the bytes right whatever other threads do meanwhile (README, Thread safety):
//  1. One drainer at a time, from drain to done. Callers serialize on kvc_pool::copy_mu, held
//     until their copies are complete (CPU) or queued (CUDA). A call that finds the queue empty
//     because another thread drained "its" pairs has waited for that thread's copies, so when
//     kvc_copy_pending returns, every pair queued before the call has been copied (CPU), or is
//     ordered before later work on the caller's stream (CUDA: each call ends by making its stream
//     wait for the latest copy kernel, whichever stream it ran on).
//  2. Tier jobs first. Pairs are drained only when no tier job is pending, with the tier executor
//     excluded (exec_mu held) from that check until the copies are done (CPU) or queued behind the
//     tier stream (CUDA). A job planned before a pair -- the spill of the cached block evicted to
//     make its dst, the restore of its src -- has then run, so the spill saves the evicted block's
//     bytes, not the copy's; a job planned later waits until the copies are done.
//  3. A drained pair holds its src and its dst (BlockPool::hold) until its copy is done (CPU) or
//     queued (CUDA): neither can be freed, reused by another sequence and written meanwhile. On
//     CUDA, everything that later touches the storage waits for the copy kernel's event
//     (pool_storage_barrier), and the tier executor does too (tier/exec.cpp).
#include <cstring>
#include <mutex>

#include "core/pool.hpp"
#include "cpu/cpu_backend.hpp"
#include "storage/copy_pending.hpp"
#include "storage/cuda_api.hpp"
#include "storage/kernel_args.hpp"
#include "storage/pool_access.hpp"
#include "tier/tiers.hpp"

namespace kvc {
namespace {

constexpr int64_t kCpuCopyChunk = 256;  // pairs drained per step on the CPU backend

// Rule 2: runs the pending tier jobs (exec_mu held by the caller) until none is pending, then
// drains up to cap pairs under the same pool lock that saw no job pending. Returns the pairs drained.
// With finish_tier_copies (CUDA) the tier stream is also synchronized before draining, for copies
// that cannot wait for its event; a failed sync drains nothing (*st says why).
int64_t drain_after_tier_jobs(kvc_pool *p, Tiers *t, int32_t *src, int32_t *dst, int64_t cap,
                              bool finish_tier_copies = false, kvc_status *st = nullptr) {
    for (;;) {
        if (t) tier_run_pending_locked(p, t);
        if (t && finish_tier_copies) {
            *st = cuda::stream_sync(t->stream);
            if (*st != KVC_OK) return 0;
        }
        std::lock_guard<kvc::PoolMutex> lk(p->mu);
        if (t && !t->pending.empty()) continue;  // planned since: run those first
        return pool_take_pending_copies(p, src, dst, cap);
    }
}

void release_pairs(kvc_pool *p, const int32_t *src, const int32_t *dst, int64_t n) {
    std::lock_guard<kvc::PoolMutex> lk(p->mu);
    pool_release_copy_pairs(p, src, dst, n);
}

kvc_status copy_pending_cpu(kvc_pool *p, Tiers *t, int64_t *out_copied) {
    // Fixed chunks: no allocation, and the pool lock is never held across a copy.
    int32_t src[kCpuCopyChunk], dst[kCpuCopyChunk];
    CopyBlocksArgs a;
    a.layout = p->layout;
    a.base = p->storage;
    a.src = src;
    a.dst = dst;
    int64_t copied = 0;
    for (;;) {
        const int64_t n = drain_after_tier_jobs(p, t, src, dst, kCpuCopyChunk);
        if (n == 0) break;
        a.num_pairs = n;
        const kvc_status st = cpu_copy_blocks(a);
        release_pairs(p, src, dst, n);  // copied: both blocks may change hands now
        if (st != KVC_OK) return st;
        copied += n;
    }
    *out_copied = copied;
    return KVC_OK;
}

kvc_status copy_pending_cuda(kvc_pool *p, Tiers *t, void *stream, int64_t *out_copied) {
    // The kernel reads the pairs from the pool's preallocated device array (storage/copy_staging.hpp): no
    // allocation and no host synchronization per call. Every pending pair fits (never more pairs
    // than blocks), so one drain takes them all.
    CopyStaging &cs = p->copy_staging;
    int32_t *src = cs.host.data(), *dst = cs.host.data() + cs.capacity;
    const int64_t copied = drain_after_tier_jobs(p, t, src, dst, cs.capacity);
    std::lock_guard<std::mutex> staging_lock(cs.mu);
    kvc_status st = KVC_OK;
    if (copied > 0) {
        // After the tier copies just run (a spill must read dst before the kernel writes it).
        if (t) st = tier_order_stream(p, t, stream);
        // Pack src then dst contiguously for one upload.
        if (copied < cs.capacity) std::memmove(src + copied, dst, size_t(copied) * 4);
        // The previous copy kernel (maybe on another stream) must be done reading the array.
        if (st == KVC_OK && cs.used) st = cuda::stream_wait_event(stream, cs.last_use);
        if (st == KVC_OK) st = cuda::memcpy_h2d(cs.device, src, size_t(2 * copied) * 4, stream);
        if (st == KVC_OK) {
            CopyBlocksArgs a;
            a.layout = p->layout;
            a.base = p->storage;
            a.src = cs.device;
            a.dst = cs.device + copied;
            a.num_pairs = copied;
            st = cuda::copy_blocks(a, stream);
        }
        if (st == KVC_OK && (st = cuda::event_record(cs.last_use, stream)) == KVC_OK) cs.used = true;
        // Queued: later work on this stream follows the kernel, other streams and the tier
        // executor wait for last_use. The packed array still names each pair's src and dst.
        release_pairs(p, src, src + copied, copied);
    } else if (cs.used) {
        // Rule 1 on CUDA: pairs another thread drained before this call are ordered before this
        // stream's later work too.
        st = cuda::stream_wait_event(stream, cs.last_use);
    }
    if (st != KVC_OK) return st;
    *out_copied = copied;
    return KVC_OK;
}

}  // namespace

kvc_status storage_copy_pending(kvc_pool *p, void *stream, int64_t *out_copied) {
    std::lock_guard<std::mutex> one_drainer(p->copy_mu);  // rule 1
    Tiers *t = p->tiers.load(std::memory_order_acquire);
    std::unique_lock<std::mutex> exec;  // rule 2: no tier copy runs while pairs are copied
    if (t) exec = std::unique_lock<std::mutex>(t->exec_mu);
    // A tier attached after this load has planned no job before the pairs drained here.
    return p->backend == KVC_BACKEND_CUDA ? copy_pending_cuda(p, t, stream, out_copied)
                                          : copy_pending_cpu(p, t, out_copied);
}

kvc_status take_pending_for_caller(kvc_pool *p, int32_t *src, int32_t *dst, int64_t cap, int64_t *out_count) {
    std::lock_guard<std::mutex> one_drainer(p->copy_mu);  // after any kvc_copy_pending in progress
    Tiers *t = p->tiers.load(std::memory_order_acquire);
    std::unique_lock<std::mutex> exec;
    if (t) exec = std::unique_lock<std::mutex>(t->exec_mu);
    // Rule 2 for the caller's copies: the spills of the blocks evicted to make these pairs' dsts
    // have run (CUDA: finished -- the caller's own kernels cannot wait for the tier stream's event).
    kvc_status st = KVC_OK;
    const int64_t n = drain_after_tier_jobs(p, t, src, dst, cap, p->backend == KVC_BACKEND_CUDA, &st);
    if (st != KVC_OK) return st;
    release_pairs(p, src, dst, n);  // the caller copies them: no hold is kept (kvc.h)
    *out_count = n;
    return KVC_OK;
}

kvc_status storage_order_after_copies(kvc_pool *p, void *stream) {
    if (p->backend != KVC_BACKEND_CUDA) return KVC_OK;  // CPU copies are complete when drained
    CopyStaging &cs = p->copy_staging;
    std::lock_guard<std::mutex> lk(cs.mu);
    return cs.used ? cuda::stream_wait_event(stream, cs.last_use) : KVC_OK;
}

}  // namespace kvc
