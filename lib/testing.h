/* Test-only hooks into libkvc internals. Linked from the static archive (kvc_static) by white-box
 * tests; these symbols are hidden and not exported from libkvc.so (they are not kvc_* names).
 * Not thread-safe with respect to concurrent pool use: set them before creating pools. */
#ifndef KVC_TESTING_H
#define KVC_TESTING_H

#include <stddef.h>
#include <stdint.h>

#include "kvc/kvc.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Replacement for the 128-bit block hash (e.g. a constant, to force collisions).
 *  NULL restores XXH3-128. */
typedef void (*kvct_hash_fn)(const void *data, size_t len, uint64_t *out_hi, uint64_t *out_lo);
void kvct_set_hash_override(kvct_hash_fn fn);

/** Per-block metadata, read under the pool lock. Out-of-range block ids return -1. */
int32_t kvct_block_refcount(kvc_pool *pool, int32_t block);
int32_t kvct_block_pin_count(kvc_pool *pool, int32_t block);
int32_t kvct_block_priority(kvc_pool *pool, int32_t block);
/** 1 if the block is in the prefix cache (its hash is in the map), else 0. */
int32_t kvct_block_is_cached(kvc_pool *pool, int32_t block);
/** The block the next fresh allocation would take (the free queues' head), -1 if none. */
int32_t kvct_next_victim(kvc_pool *pool);

/** Adds delta to a block's refcount without touching anything else, so a test can prove that
 *  kvc_pool_check detects the violation (then undo it with -delta). */
void kvct_corrupt_refcount(kvc_pool *pool, int32_t block, int32_t delta);

/* ---- Memory tiers ---------------------------------------------------------------------------- */

/** Disk tier fault injection: the next `count` disk block writes (ENOSPC / EIO kinds) or reads
 *  (EIO, short read, flipped bit in the block bytes) fail that way. KVCT_FAULT_NONE (or count 0) clears. */
#define KVCT_FAULT_NONE 0
#define KVCT_FAULT_WRITE_ENOSPC 1
#define KVCT_FAULT_WRITE_EIO 2
#define KVCT_FAULT_READ_EIO 3
#define KVCT_FAULT_READ_SHORT 4
#define KVCT_FAULT_READ_BITFLIP 5
/** Header-only writes (the erasure of a freed slot's header) get EIO; block copies are untouched. */
#define KVCT_FAULT_HEADER_WRITE_EIO 6
void kvct_disk_fault(int32_t kind, int32_t count);
/** on != 0: disk tiers attached afterwards use pread/pwrite instead of io_uring. */
void kvct_disk_force_sync_io(int32_t on);
/** The file keyed disk attaches (kvc_tier_attach_disk_keyed) load libsodium from: a name that
 *  cannot be loaded stands in for a machine without libsodium23. NULL restores libsodium.so.23. */
void kvct_sodium_library(const char *name);
/** on > 0: the pool's planned tier copies stay pending (not run, not committed); on = 0 runs them;
 *  on < 0 lets them be run by the next call that runs copies, leaving them pending meanwhile (as
 *  copies another thread planned and has not run yet). Lets a test put a call between another
 *  call's planning and its copies, as a second thread could. */
void kvct_tier_hold_jobs(kvc_pool *pool, int32_t on);
/** Slots of a tier (KVC_TIER_HOST / KVC_TIER_DISK) in state 0 free, 1 cached, 2 held, 3 busy;
 *  -1 without that tier. */
int64_t kvct_tier_slots_in_state(kvc_pool *pool, int32_t tier, int32_t state);
/** Overwrites one slot's state (0..3) without touching lists, index or counts; returns the old
 *  state, or -1 for a bad tier/slot. For proving that kvc_pool_check sees tier corruption. */
int32_t kvct_tier_corrupt_slot(kvc_pool *pool, int32_t tier, int32_t slot, int32_t state);
/** The next count host-to-device copies with which transfer imports into CUDA pools land their
 *  pulled blocks fail with KVC_ERR_DEVICE (as a failed cudaMemcpyAsync would); 0 ends it. */
void kvct_xfer_device_fault(int32_t count);
/** While abandon_ms > 0, every get of a transfer import reads as still in progress (as UCX 1.13's
 *  emulated gets were once seen to stay after their endpoint was force-closed), so the import
 *  times out, and it abandons them abandon_ms (instead of 10 s) after its endpoint was closed,
 *  leaking its fresh blocks. 0 ends it. */
void kvct_xfer_stuck_gets(int64_t abandon_ms);

#ifdef __cplusplus
}
#endif

#endif /* KVC_TESTING_H */
