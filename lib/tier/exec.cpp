// Executing tier jobs outside the pool lock, committing their results under it, and the ordering
// barrier used by everything that touches KV storage. See tier/tiers.hpp for the model.
#include <chrono>
#include <cstring>
#include <thread>

#include "core/tier_view.hpp"
#include "error.hpp"
#include "storage/copy_staging.hpp"
#include "storage/cuda_api.hpp"
#include "tier/plan.hpp"

namespace kvc {
namespace {

using Clock = std::chrono::steady_clock;

bool is_disk_job(uint8_t k) {
    return k == kJobDiskSpill || k == kJobPromote || k == kJobDiskForget || k == kJobPersist;
}
bool is_to_host(uint8_t k) { return k == kJobSpill || k == kJobSwapOut; }

// Time spent per kind of copy in one executor pass, folded into the counters at commit.
struct PassTimes {
    double device_s = 0, disk_write_s = 0, disk_read_s = 0;
    int64_t device_batches = 0, disk_write_batches = 0, disk_read_batches = 0;
};

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void execute(kvc_pool *p, Tiers *t, PassTimes *times) {
    const int64_t stride = pool_layout(p).block_stride;
    char *dev = static_cast<char *>(pool_storage_base(p));
    const bool cuda = pool_backend(p) == KVC_BACKEND_CUDA;
    HostTier &host = *t->host;
    std::vector<TierJob> &jobs = t->running;
    bool &dirty = t->device_dirty;  // CUDA copies issued on the tier stream, not yet waited for
    bool any_device = false;
    const size_t n = jobs.size();
    size_t i = 0;
    while (i < n) {
        TierJob &j = jobs[i];
        if (is_disk_job(j.kind)) {
            size_t e = i;
            while (e < n && jobs[e].kind == j.kind && e - i < size_t(DiskTier::kBatch)) ++e;
            // Disk I/O touches host slots that asynchronous device copies (of this pass or an
            // earlier one) may still be writing or reading: wait for the tier stream first.
            if (cuda && dirty) {
                (void)cuda::stream_sync(t->stream);
                dirty = false;
            }
            int32_t slots[DiskTier::kBatch], out[DiskTier::kBatch];
            char *data[DiskTier::kBatch];
            const int m = int(e - i);
            for (int k = 0; k < m; ++k) {
                slots[k] = jobs[i + size_t(k)].disk;
                data[k] = j.kind == kJobDiskForget ? nullptr : host.slot_ptr(jobs[i + size_t(k)].host);
            }
            const Clock::time_point t0 = Clock::now();
            if (j.kind == kJobDiskForget) {  // not a block copy: not timed as a transfer
                t->disk->forget_slots(slots, out, m);
                for (int k = 0; k < m; ++k) jobs[i + size_t(k)].outcome = out[k];
                i = e;
                continue;
            }
            if (j.kind == kJobDiskSpill || j.kind == kJobPersist) {
                t->disk->write_slots(slots, data, out, m);
                times->disk_write_s += since(t0);
                ++times->disk_write_batches;
            } else {
                t->disk->read_slots(slots, data, out, m);
                times->disk_read_s += since(t0);
                ++times->disk_read_batches;
            }
            for (int k = 0; k < m; ++k) jobs[i + size_t(k)].outcome = out[k];
            i = e;
            continue;
        }
        // Device copies: consecutive ones are timed together.
        if (cuda && !any_device && pool_copy_staging(p).used) {
            // kvc_copy_pending drops the pairs' holds on their sources as soon as its kernel is queued,
            // so a copy here may write a block that kernel has yet to read: order after it, on the
            // GPU. The event is recorded under the exec lock, which this executor holds.
            (void)cuda::stream_wait_event(t->stream, pool_copy_staging(p).last_use);
        }
        const Clock::time_point t0 = Clock::now();
        size_t e = i;
        for (; e < n && !is_disk_job(jobs[e].kind); ++e) {
            TierJob &c = jobs[e];
            char *d = dev + int64_t(c.block) * stride;
            char *h = host.slot_ptr(c.host);
            if (cuda) {
                kvc_status st = is_to_host(c.kind) ? cuda::memcpy_d2h(h, d, size_t(stride), t->stream)
                                                   : cuda::memcpy_h2d(d, h, size_t(stride), t->stream);
                c.outcome = st == KVC_OK ? 0 : 1;
                dirty = true;
            } else if (is_to_host(c.kind)) {
                std::memcpy(h, d, size_t(stride));
            } else {
                std::memcpy(d, h, size_t(stride));
            }
        }
        times->device_s += since(t0);
        ++times->device_batches;
        any_device = true;
        i = e;
    }
    if (cuda && any_device) {
        std::lock_guard<std::mutex> lk(t->cuda_mu);
        if (cuda::event_record(t->last_event, t->stream) == KVC_OK) t->last_event_recorded = true;
    }
}

void count_copy(TierCounters &c, bool in, int64_t bytes) {
    if (in) {
        ++c.blocks_in;
        c.bytes_in += bytes;
    } else {
        ++c.blocks_out;
        c.bytes_out += bytes;
    }
}

// Pool mutex held.
void commit(kvc_pool *p, Tiers *t, const PassTimes &times) {
    const int64_t stride = pool_layout(p).block_stride;
    TierSlots &hs = t->host->slots;
    for (const TierJob &j : t->running) {
        // Planned before a kvc_prefix_cache_reset: the copy is done, but its block is no longer
        // to be cached (a file header it wrote is erased too).
        const bool reset_since = j.epoch != t->cache_epoch;
        switch (j.kind) {
            case kJobSpill:
                if (j.outcome == 0) {
                    if (reset_since) {
                        hs.release(j.host);
                    } else {
                        hs.commit_cached(j.host);
                        tier_event(p, KVC_EVENT_BLOCK_STORED, hs, j.host, KVC_TIER_HOST);
                    }
                    count_copy(t->device, false, stride);
                    count_copy(t->host->stats, true, stride);
                } else {
                    hs.release(j.host);
                    ++t->host->stats.failures;
                }
                break;
            case kJobSwapOut:
                // The slot is held already; a failed device copy can only be counted.
                if (j.outcome != 0) ++t->host->stats.failures;
                count_copy(t->device, false, stride);
                count_copy(t->host->stats, true, stride);
                break;
            case kJobRestore:
                if (reset_since)
                    hs.release(j.host);
                else
                    hs.commit_cached(j.host);
                if (j.outcome != 0) ++t->host->stats.failures;
                count_copy(t->host->stats, false, stride);
                count_copy(t->device, true, stride);
                break;
            case kJobSwapIn:
                hs.release(j.host);
                if (j.outcome != 0) ++t->host->stats.failures;
                count_copy(t->host->stats, false, stride);
                count_copy(t->device, true, stride);
                break;
            case kJobDiskSpill:
            case kJobPersist: {
                // A flushed host slot stays cached (it was busy for the write only).
                if (j.kind == kJobPersist) {
                    if (reset_since)
                        hs.release(j.host);
                    else
                        hs.commit_cached(j.host);
                }
                DiskTier &d = *t->disk;
                if (j.outcome == kDiskOk && reset_since) {
                    d.slots.release(j.disk);
                    tier_push_job(t, kJobDiskForget, -1, -1, j.disk);
                    count_copy(d.stats, true, stride);
                } else if (j.outcome == kDiskOk) {
                    d.slots.commit_cached(j.disk);
                    tier_event(p, KVC_EVENT_BLOCK_STORED, d.slots, j.disk, KVC_TIER_DISK);
                    count_copy(d.stats, true, stride);
                } else {
                    // The host slot is being reused: the block is dropped, never half-registered.
                    // The slot's old header (the block it evicted, or a part of this one's) may
                    // still be in the file: erase it, or a persistent attach would bring it back.
                    d.slots.release(j.disk);
                    tier_push_job(t, kJobDiskForget, -1, -1, j.disk);
                    ++d.stats.failures;
                    ++d.stats.io_errors;
                }
                break;
            }
            case kJobPromote: {
                DiskTier &d = *t->disk;
                if (j.outcome == kDiskOk && reset_since) {
                    d.slots.release(j.disk);
                    tier_push_job(t, kJobDiskForget, -1, -1, j.disk);
                    hs.release(j.host);
                    count_copy(d.stats, false, stride);
                    count_copy(t->host->stats, true, stride);
                } else if (j.outcome == kDiskOk) {
                    d.slots.commit_cached(j.disk);
                    hs.commit_cached(j.host);
                    tier_event(p, KVC_EVENT_BLOCK_STORED, hs, j.host, KVC_TIER_HOST);
                    count_copy(d.stats, false, stride);
                    count_copy(t->host->stats, true, stride);
                    ++d.stats.hits;
                } else {
                    // A bad read is a miss: neither copy is trusted any more, nor the file's.
                    // (After a reset the router has dropped it already, with ALL_BLOCKS_CLEARED.)
                    if (!reset_since) tier_event(p, KVC_EVENT_BLOCK_REMOVED, d.slots, j.disk, KVC_TIER_DISK);
                    d.slots.release(j.disk);
                    tier_push_job(t, kJobDiskForget, -1, -1, j.disk);
                    hs.release(j.host);
                    ++d.stats.failures;
                    ++(j.outcome == kDiskChecksum ? d.stats.checksum_failures : d.stats.io_errors);
                }
                break;
            }
            case kJobDiskForget:
                // The slot is free already; a header left valid is counted, so that a caller who
                // relies on the file forgetting (a reset before a restart) can tell.
                if (j.outcome != kDiskOk) {
                    ++t->disk->stats.failures;
                    ++t->disk->stats.io_errors;
                }
                break;
        }
    }
    if (times.device_batches) {
        t->device.transfers += times.device_batches;
        t->device.seconds += times.device_s;
        t->host->stats.transfers += times.device_batches;
        t->host->stats.seconds += times.device_s;
    }
    if (times.disk_write_batches + times.disk_read_batches) {
        TierCounters &dc = t->disk->stats;
        dc.transfers += times.disk_write_batches + times.disk_read_batches;
        dc.seconds += times.disk_write_s + times.disk_read_s;
    }
    t->inflight.fetch_sub(int64_t(t->running.size()), std::memory_order_release);
}

}  // namespace

void tier_run_pending_locked(kvc_pool *p, Tiers *t) {
    for (;;) {
        {
            std::lock_guard<kvc::PoolMutex> lk(pool_mutex(p));
            if (t->pending.empty()) return;
            t->running.swap(t->pending);
        }
        PassTimes times;
        execute(p, t, &times);
        {
            std::lock_guard<kvc::PoolMutex> lk(pool_mutex(p));
            commit(p, t, times);
        }
        t->running.clear();
    }
}

void tier_run_pending(kvc_pool *p) {
    Tiers *t = pool_tiers(p);
    if (!t) return;
#ifdef KVC_TEST_HOOKS  // kvct_tier_hold_jobs: the test archive only
    if (t->hold_jobs.load(std::memory_order_relaxed)) return;
#endif
    std::lock_guard<std::mutex> ex(t->exec_mu);
    tier_run_pending_locked(p, t);
}

kvc_status tier_order_stream(kvc_pool *p, Tiers *t, void *stream) {
    if (pool_backend(p) != KVC_BACKEND_CUDA) return KVC_OK;
    std::lock_guard<std::mutex> lk(t->cuda_mu);
    if (!t->last_event_recorded) return KVC_OK;
    return cuda::stream_wait_event(stream, t->last_event);
}

kvc_status tier_barrier(kvc_pool *p, void *stream) {
    Tiers *t = pool_tiers(p);
    if (!t) return KVC_OK;
    if (pool_backend(p) == KVC_BACKEND_CUDA) {
        // Inside a CUDA graph capture, neither run jobs (they may synchronize, which a capture refuses)
        // nor wait on the copy stream's event (a capture refuses events recorded outside it, and the
        // graph would keep waiting on a stale one). Replays are ordered after the tier copies by the
        // kvc_batch_build that precedes them on the batch's stream instead (storage/batch.cpp, prepare_stream).
        bool capturing = false;
        if (kvc_status st = cuda::stream_capturing(stream, &capturing); st != KVC_OK) return st;
        if (capturing) return KVC_OK;
    }
    if (t->inflight.load(std::memory_order_acquire) > 0) tier_run_pending(p);
    return tier_order_stream(p, t, stream);
}

Tiers::~Tiers() {
    if (stream) cuda::tier_stream_destroy(stream);  // synchronizes first
    if (last_event) cuda::event_destroy(last_event);
}

void tier_destroy(kvc_pool *p) {
    Tiers *t = pool_tiers(p);
    if (!t) return;
    t->hold_jobs.store(false);
    tier_run_pending(p);
    pool_detach_tiers(p);
    delete t;
}

}  // namespace kvc
