// C API: attaching memory tiers to a pool — the host tier, and the disk tier plain, with an identity,
// or keyed (a MAC over every block). All checks first; a refused attach leaves the pool as it was.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "capi/args.hpp"
#include "core/pool.hpp"
#include "error.hpp"
#include "storage/cuda_api.hpp"
#include "struct_size.hpp"
#include "tier/plan.hpp"
#include "tier/tiers.hpp"

namespace {

using kvc::check_struct_size;
using kvc::fail;
using kvc::Sequence;
using kvc::StructUse;
using kvc::Tiers;
using kvc::TierSlots;

// The MAC key of kvc_tier_attach_disk_keyed; not given for the unkeyed attaches (given with a NULL
// key is an error, never "unkeyed").
struct DiskKey {
    bool given = false;
    const uint8_t *bytes = nullptr;
    int64_t len = 0;
};

kvc_status check_key(const DiskKey &key, const char *fn) {
    if (!key.bytes) return fail(KVC_ERR_NULL_ARG, "%s: key is NULL", fn);
    if (key.len < KVC_DISK_KEY_MIN_LEN || key.len > KVC_DISK_KEY_MAX_LEN)
        return fail(KVC_ERR_INVALID_ARG, "%s: key_len must be in [%d, %d], got %lld", fn, KVC_DISK_KEY_MIN_LEN,
                    KVC_DISK_KEY_MAX_LEN, (long long)key.len);
    return KVC_OK;
}

// The kvc_tier_attach_disk* functions; `fn` names the caller in messages.
kvc_status attach_disk(kvc_pool *pool, const char *path, int64_t num_blocks, int32_t flags, const char *identity,
                       const DiskKey &key, const char *fn) {
    if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
    if (!path) return fail(KVC_ERR_NULL_ARG, "%s: path is NULL", fn);
    if (pool->hybrid) return kvc::refuse_hybrid(fn, "kvc_alloc would have to promote every group's disk hits");
    if (!*path) return fail(KVC_ERR_INVALID_ARG, "%s: path is empty", fn);
    if (num_blocks < 1 || num_blocks > INT32_MAX)
        return fail(KVC_ERR_INVALID_ARG, "%s: num_blocks must be in [1, %d], got %lld", fn, INT32_MAX,
                    (long long)num_blocks);
    if (flags & ~(KVC_DISK_PERSISTENT | KVC_DISK_NO_DIRECT))
        return fail(KVC_ERR_INVALID_ARG, "%s: unknown flags 0x%x", fn, unsigned(flags));
    if (identity && strnlen(identity, KVC_MAX_DISK_IDENTITY_LEN + 1) > KVC_MAX_DISK_IDENTITY_LEN)
        return fail(KVC_ERR_INVALID_ARG, "%s: identity is longer than %d bytes", fn, KVC_MAX_DISK_IDENTITY_LEN);
    if (key.given)
        if (kvc_status st = check_key(key, fn); st != KVC_OK) return st;
    Tiers *t = pool->tiers.load(std::memory_order_acquire);
    if (!t) return fail(KVC_ERR_STATE, "%s: attach a host tier first (kvc_tier_attach_host)", fn);
    {
        std::lock_guard<kvc::PoolMutex> lk(pool->mu);
        if (t->disk) return fail(KVC_ERR_STATE, "%s: this pool already has a disk tier", fn);
    }
    std::unique_ptr<kvc::DiskTier> d(new kvc::DiskTier());
    kvc_status st = d->open(path, int32_t(num_blocks), pool->layout, flags, identity, fn, key.bytes, size_t(key.len));
    if (st != KVC_OK) return st;
    // Job capacity grows by the disk slots (see Tiers::pending); exec_mu first, as the executor.
    std::lock_guard<std::mutex> ex(t->exec_mu);
    std::lock_guard<kvc::PoolMutex> lk(pool->mu);
    if (t->disk) return fail(KVC_ERR_STATE, "%s: this pool already has a disk tier", fn);
    const size_t jobs = 2 * size_t(t->host->slots.capacity()) + 2 * size_t(num_blocks);
    t->pending.reserve(jobs);
    t->running.reserve(jobs);
    t->disk = std::move(d);
    // Blocks a persistent file brought back are news to a KV-aware router.
    const kvc::TierSlots &ds = t->disk->slots;
    for (int32_t s = 0; s < ds.capacity(); ++s)
        if (ds.state(s) == kvc::TierSlots::kCached) kvc::tier_event(pool, KVC_EVENT_BLOCK_STORED, ds, s, KVC_TIER_DISK);
    return KVC_OK;
}

}  // namespace

extern "C" {

KVC_API kvc_status kvc_tier_attach_host(kvc_pool *pool, int64_t num_blocks) {
    KVC_GUARD({
        const char *fn = "kvc_tier_attach_host";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (num_blocks < 1 || num_blocks > INT32_MAX)
            return fail(KVC_ERR_INVALID_ARG, "%s: num_blocks must be in [1, %d], got %lld", fn, INT32_MAX,
                        (long long)num_blocks);
        if (pool->backend == KVC_BACKEND_NONE || !pool->storage)
            return fail(KVC_ERR_STATE, "%s: the pool is metadata-only (backend NONE): no KV bytes to move", fn);
        if (pool->tiers.load()) return fail(KVC_ERR_STATE, "%s: this pool already has a host tier", fn);
        // Everything is allocated before the tier becomes visible; the allocation runs unlocked.
        std::unique_ptr<Tiers> t(new Tiers());
        t->host.reset(new kvc::HostTier());
        const bool cuda = pool->backend == KVC_BACKEND_CUDA;
        if (kvc_status st = t->host->allocate(int32_t(num_blocks), pool->layout.block_stride, pool->block_size, cuda, fn);
            st != KVC_OK)
            return st;
        t->pending.reserve(2 * size_t(num_blocks));  // see Tiers::pending
        t->running.reserve(2 * size_t(num_blocks));
        // The prefix walks' lower-tier hit buffers (kvc_pool::walk_tier / walk_slot), swapped in
        // under the lock with the tier: walks read them under it.
        std::vector<uint8_t> walk_tier(size_t(pool->num_blocks), 0);
        std::vector<int32_t> walk_slot(size_t(pool->num_blocks), -1);
        t->victims.reserve(size_t(pool->num_blocks));
        t->victim_state.assign(size_t(pool->num_blocks), 0);
        if (cuda) {
            if (kvc_status st = kvc::cuda::tier_stream_create(pool->device, &t->stream); st != KVC_OK) return st;
            if (kvc_status st = kvc::cuda::event_create(&t->last_event); st != KVC_OK) return st;
        }
        std::lock_guard<kvc::PoolMutex> lk(pool->mu);
        if (pool->tiers.load()) return fail(KVC_ERR_STATE, "%s: this pool already has a host tier", fn);
        pool->walk_tier.swap(walk_tier);
        pool->walk_slot.swap(walk_slot);
        kvc::pool_refresh_walk_hits(pool);
        pool->tiers.store(t.release(), std::memory_order_release);
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_tier_attach_disk(kvc_pool *pool, const char *path, int64_t num_blocks, int32_t flags) {
    KVC_GUARD({ return attach_disk(pool, path, num_blocks, flags, nullptr, DiskKey{}, "kvc_tier_attach_disk"); })
}

KVC_API kvc_status kvc_tier_attach_disk_with_identity(kvc_pool *pool, const char *path, int64_t num_blocks,
                                                      int32_t flags, const char *identity) {
    KVC_GUARD({
        return attach_disk(pool, path, num_blocks, flags, identity, DiskKey{}, "kvc_tier_attach_disk_with_identity");
    })
}

KVC_API kvc_status kvc_tier_attach_disk_keyed(kvc_pool *pool, const char *path, int64_t num_blocks, int32_t flags,
                                              const char *identity, const uint8_t *key, int64_t key_len) {
    KVC_GUARD({
        return attach_disk(pool, path, num_blocks, flags, identity, DiskKey{true, key, key_len},
                           "kvc_tier_attach_disk_keyed");
    })
}

}  // extern "C"
