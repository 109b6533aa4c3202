// What the storage / batch / attention layer (lib/storage*.cpp, lib/batch*.cpp, lib/capi/kernels.cpp)
// needs from the pool core (lib/pool*.cpp). Keeping this narrow lets the two evolve separately.
#pragma once

#include <cstdint>
#include <mutex>

#include "core/pool_mutex.hpp"
#include "storage/kv_layout.hpp"

namespace kvc {

// A read-only view of one sequence. Valid only while the pool mutex is held.
struct SeqRef {
    const int32_t *blocks = nullptr;  // block table
    int64_t num_blocks = 0;
    int64_t num_tokens = 0;       // confirmed tokens (the context length)
    int64_t reserved_tokens = 0;  // num_tokens + reserved lookahead slots
    bool swapped_out = false;     // not resident on the device tier: may not be used by a batch
    int64_t released_blocks = 0;  // leading table entries released by the sliding window (-1)
    uint64_t incarnation = 0;     // which life of the id (Sequence::incarnation)
};

// The pool's lock. Hold it only for metadata work: never across I/O, GPU syncs or attention math.
kvc::PoolMutex &pool_mutex(kvc_pool *p);

// Under the lock: looks up a sequence and views its table of `group` (0 for a plain pool; a valid
// group of a hybrid pool, checked by the caller). False if unknown.
bool pool_find_seq(kvc_pool *p, uint64_t seq_id, int32_t group, SeqRef *out);

// Under the lock: moves up to cap pending copy-on-write pairs (oldest first) into src/dst and
// returns how many were moved. With cap == 0 returns 0 and moves nothing. The moved pairs hold
// their src (as a pending pair does) and now their dst too, so that neither block can be freed,
// reused and written by another sequence while the copy runs outside the lock: drop both holds
// with pool_release_copy_pairs once the copies are done (or, on CUDA, queued).
int64_t pool_take_pending_copies(kvc_pool *p, int32_t *src, int32_t *dst, int64_t cap);
// Under the lock: drops the holds drained pairs src[i] -> dst[i], i < n, had on both blocks.
void pool_release_copy_pairs(kvc_pool *p, const int32_t *src, const int32_t *dst, int64_t n);
// Under the lock: number of pending pairs.
int64_t pool_pending_copy_count(kvc_pool *p);

// Under the lock: the sliding window group `group`'s tables release blocks for, 0 when none: a
// plain pool's kvc_pool_set_sliding_window (group 0), a hybrid pool's group window (SLIDING: W).
int32_t pool_group_window(const kvc_pool *p, int32_t group);

// Immutable after kvc_pool_create: no lock needed.
const KvLayout &pool_layout(const kvc_pool *p);  // num_blocks and shape always set
int32_t pool_backend(const kvc_pool *p);         // resolved: NONE, CPU or CUDA
int32_t pool_device(const kvc_pool *p);          // CUDA ordinal, -1 otherwise
int32_t pool_num_q_heads(const kvc_pool *p);     // resolved config num_q_heads
void *pool_storage_base(const kvc_pool *p);      // nullptr for metadata-only pools

// KV-cache groups (kvc_pool_create_hybrid), immutable too. A plain pool is one group whose layout
// is pool_layout and whose layers are the model's; a hybrid pool's pool_layout describes only the
// page (block_stride = page_bytes) and group 0, so kernels must take a layer's group layout.
int32_t pool_num_layers(const kvc_pool *p);  // the model's layers (every group's together)
int32_t pool_num_groups(const kvc_pool *p);  // 1 for a plain pool
bool pool_is_hybrid(const kvc_pool *p);
int32_t pool_group_kind(const kvc_pool *p, int32_t group);  // KVC_GROUP_*; a plain pool's is FULL
// The group's layout in the pool's storage: its layers, heads and head_dim, block_stride = the
// page. group in [0, pool_num_groups).
const KvLayout &pool_group_layout(const kvc_pool *p, int32_t group);
int32_t pool_max_head_dim(const kvc_pool *p);  // over the attention groups (batch workspace size)
// Where a model layer lives: its group and its index among that group's layers (the layer index
// the group layout's layer_stride multiplies). layer in [0, pool_num_layers).
struct LayerPlace {
    int32_t group = 0;
    int32_t index = 0;
};
LayerPlace pool_layer_place(const kvc_pool *p, int32_t layer);

// CUDA backend: kvc_copy_pending's preallocated pair buffers (storage/copy_staging.hpp); has its own mutex.
struct CopyStaging;
CopyStaging &pool_copy_staging(kvc_pool *p);

// Bumped (under the lock) every time a sequence is freed, truncated, swapped out or has blocks
// released by the sliding window; a batch records it at build time and re-validates its sequences
// at launch when it changed.
uint64_t pool_seq_generation(kvc_pool *p);

// Before reading or writing KV storage (no lock held): tier copies and copy-on-write pairs queued
// earlier are complete (CPU: copied now if still pending, waited for if another thread is copying
// them) or ordered before `stream` (CUDA; a capturing stream is left alone: kvc_batch_build orders a
// graph's replays). KVC_OK after two atomic loads when no tier job or pair is outstanding.
kvc_status pool_storage_barrier(kvc_pool *p, void *stream);

// Storage allocation, implemented by lib/storage/storage.cpp and called by kvc_pool_create/destroy.
// backend is CPU or CUDA (already resolved). On failure returns a status set with kvc::fail.
kvc_status storage_allocate(const KvLayout &layout, int32_t backend, int32_t device, void **out_base);
void storage_release(int32_t backend, int32_t device, void *base);

}  // namespace kvc
