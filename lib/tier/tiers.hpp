// The memory tiers of one pool (kvc_pool::tiers, created by kvc_tier_attach_host) and the hooks the
// pool core calls into.
//
// Moving data: every copy between tiers is a TierJob. Jobs are planned under the pool mutex (slots
// and blocks are reserved, metadata updated, the job appended to `pending`) and executed outside it
// by tier_run_pending(), which any thread may call: it takes `exec_mu`, grabs the pending jobs in
// FIFO order, runs them (memcpy / cudaMemcpyAsync on the tier stream / disk I/O) without the pool
// lock, then commits their results under the lock. One executor at a time and FIFO order make every
// dependency hold (a host slot is written to disk before a later job overwrites it; a device block
// is read by a swap-out before a later restore writes it).
// The call that planned jobs runs tier_run_pending() before it returns, so on the CPU backend its
// copies are complete when it returns. Everything that reads or writes KV storage calls
// tier_barrier() first: it runs jobs still pending (inflight > 0) and, on CUDA, makes the caller's
// stream wait for the tier stream's last event.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/tier_port.hpp"
#include "kvc/kvc.h"
#include "tier/disk.hpp"
#include "tier/host.hpp"

namespace kvc {

struct PrefixWalk;  // core/pool.hpp

struct Sequence;
struct KeySet;

enum TierJobKind : uint8_t {
    kJobSpill,       // device block -> host slot (evicted cached block keeps its identity)
    kJobRestore,     // host slot -> device block (prefix re-hit)
    kJobSwapOut,     // device block -> host slot held by a swapped-out sequence
    kJobSwapIn,      // held host slot -> device block
    kJobDiskSpill,   // host slot -> disk slot (host LRU victim keeps its identity)
    kJobPromote,     // disk slot -> host slot (prefix re-hit from disk, verified)
    kJobDiskForget,  // a freed disk slot's header is zeroed in the file: a later KVC_DISK_PERSISTENT
                     // attach must not bring back a block the cache dropped (reset, a failed read)
    kJobPersist,     // cached host slot -> disk slot, the host slot stays cached (kvc_tier_flush)
};

struct TierJob {
    uint8_t kind = kJobSpill;
    int32_t block = -1;
    int32_t host = -1;
    int32_t disk = -1;
    int32_t outcome = 0;  // DiskOutcome for disk jobs, 0/1 (ok/failed) for device copies
    uint32_t epoch = 0;   // Tiers::cache_epoch when planned
};

struct Tiers {
    Tiers() = default;
    Tiers(const Tiers &) = delete;
    Tiers &operator=(const Tiers &) = delete;
    ~Tiers();  // synchronizes and destroys the CUDA stream and event

    std::unique_ptr<HostTier> host;
    std::unique_ptr<DiskTier> disk;
    TierCounters device;  // transfers into / out of the device tier

    // Jobs: `pending` guarded by the pool mutex; `running` by exec_mu. A planned job owns a busy or
    // held slot until it is committed (a disk slot for disk spills, a host slot otherwise), and a
    // host slot is named by at most two uncommitted jobs (a swap-out, then the swap-in that undoes
    // it); a disk slot has at most one forget job besides (planned when it is freed, run before any
    // later job on it), so both vectors are reserved for 2 x host + 2 x disk jobs at attach:
    // planning never allocates.
    std::vector<TierJob> pending, running;
    std::mutex exec_mu;
    std::atomic<int64_t> inflight{0};  // jobs planned and not yet committed
    // Bumped by kvc_prefix_cache_reset (pool mutex). A job planned before a reset and committed
    // after it (another thread's swap-out or promotion between its planning and its copies) must
    // not make its block a cache entry again: its slot is released instead.
    uint32_t cache_epoch = 0;
    // Test hook (kvct_tier_hold_jobs; read only in the test archive, KVC_TEST_HOOKS — the member
    // stays in every build so that Tiers has one layout): planned jobs stay pending, as if the planning thread were
    // still on its way to running them, so a test can interleave another call deterministically.
    std::atomic<bool> hold_jobs{false};

    // Operation ids (swap in/out). Guarded by the pool mutex, except the CUDA event ring.
    uint64_t next_op = 1;
    std::atomic<uint64_t> recorded_op{0};  // highest op whose event is recorded (CUDA)

    // CUDA: the tier stream, an event after the latest executed job, and one event per recent op.
    static constexpr int kOpEvents = 64;
    void *stream = nullptr;
    void *last_event = nullptr;
    bool last_event_recorded = false;
    // Copies were issued on the tier stream and not waited for since: host slots they write may be
    // incomplete. Guarded by exec_mu; persists across executor passes.
    bool device_dirty = false;
    void *op_events[kOpEvents] = {};
    std::mutex cuda_mu;  // orders event records with stream waits on last_event

    // Prefix-walk scratch (num_blocks entries): where lower-tier hit i lives.
    // tier_plan_spills scratch: the cached blocks the next takes evict (capacity num_blocks) and,
    // per device block, what the plan decided for it (0 outside tier_plan_spills).
    std::vector<int32_t> victims;
    std::vector<uint8_t> victim_state;
};

// ---- lifetime (capi/tiers.cpp / tier/exec.cpp) --------------------------------------------------
void tier_destroy(kvc_pool *p);  // runs pending copies, then frees everything; pool not in use

// ---- planning, pool mutex held (tier/plan.cpp) --------------------------------------------------

// A KV event about slot s of the host or disk tier (its identity names the block), queued only
// when the pool reports tier events (kvc_pool_set_tier_events). type: KVC_EVENT_BLOCK_STORED when
// the block became usable there (its copy committed), KVC_EVENT_BLOCK_REMOVED when it left.
void tier_event(kvc_pool *p, int32_t type, const TierSlots &slots, int32_t s, int32_t tier);

// kvc_tier_flush (disk tier attached; the caller checks the job capacity, at most 3 jobs each):
// tier_flush_host_slot queues the write of cached host slot v to the disk if the disk lacks its
// block; tier_flush_device_block copies refcount-0 cached device block b through a host slot to
// the disk unless a lower tier has it. Both: 1 queued, 0 nothing to do, -1 no host or disk slot
// free of copies (try again after running the pending jobs).
int tier_flush_host_slot(kvc_pool *p, int32_t v);
int tier_flush_device_block(kvc_pool *p, int32_t b);

// kvc_tier_get_stats (tier/reach.cpp): of the tier's cached blocks, those whose whole chain is
// cached in some tier (kvc_tier_stats.reachable_blocks). Linear in the blocks the tiers hold;
// allocates its memo. Works without tiers (the device's).
int64_t tier_reachable_blocks(const kvc_pool *p, int32_t tier);

// kvc_prefix_cache_reset: drops the cached blocks of the lower tiers.
void tier_reset_cache(kvc_pool *p);

// ---- outside the pool mutex (tier/exec.cpp) -----------------------------------------------------

// The same with t->exec_mu already held by the caller (kvc_copy_pending, storage/copy_pending.cpp), and
// regardless of the hold_jobs test hook: it returns when no job is pending any more.
void tier_run_pending_locked(kvc_pool *p, Tiers *t);
// CUDA: makes `stream` wait (on the GPU) for the tier copies issued so far. KVC_OK on CPU.
kvc_status tier_order_stream(kvc_pool *p, Tiers *t, void *stream);

// Before touching KV storage: pending copies done (CPU) or ordered before `stream` (CUDA).
kvc_status tier_barrier(kvc_pool *p, void *stream);

// kvc_alloc, before its main step (and kvc_tier_prefetch, with a check that accepts everything):
// brings the prompt's disk-tier hits up into the host tier (reading and verifying them), so the
// allocation sees them as host hits (tier/promote.cpp). When there is something to promote,
// `refuse` first judges the allocation on the prompt's hit through the disk tier (lock held); its
// error is returned before anything moves, so a refused kvc_alloc changes nothing. With
// `restore_in_rounds` (kvc_alloc), disk hits beyond the host slots it can take are promoted in
// further rounds, each after the previous round's blocks went on into the device cache; kvc_alloc's
// walk then finds those on the device. Without it (a prefetch), the hit ends where the slots did.
struct PrefixWalk;
struct PromotionCheck {
    kvc_status (*refuse)(const void *ctx, const PrefixWalk &walk);
    const void *ctx;
    bool restore_in_rounds;
};
kvc_status tier_promote_prefix(kvc_pool *p, const int32_t *tokens, int64_t num_tokens, const KeySet &keys,
                               PromotionCheck check);

}  // namespace kvc
