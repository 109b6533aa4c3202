// Fixed buffers for kvc_copy_pending on the CUDA backend, allocated once with the pool so draining
// copy-on-write pairs never allocates: a host array and a device array of 2 x num_blocks int32
// (src ids then dst ids; there are never more pending pairs than blocks) and an event that marks the
// last copy kernel which read the device array.
//
// Why an event instead of a host sync: the next kvc_copy_pending may run on another stream; it
// makes that stream wait (on the GPU) for the previous kernel before overwriting the device array.
// The host array is pageable, and cudaMemcpyAsync from pageable memory has consumed it when it
// returns, so it can be refilled right away. `mu` serializes users of the buffers; it is never the
// pool mutex, and nothing waits on the host while holding it.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "kvc/kvc.h"

namespace kvc {

struct CopyStaging {
    std::mutex mu;
    std::vector<int32_t> host;  // 2 x capacity
    int32_t *device = nullptr;  // 2 x capacity, device memory
    void *last_use = nullptr;   // cudaEvent_t recorded after the last copy kernel
    // last_use has been recorded at least once. Written under mu; read without it by the storage
    // barrier's quick check (pool_storage_barrier), hence atomic.
    std::atomic<bool> used{false};
    int64_t capacity = 0;  // pairs
    int32_t device_ordinal = -1;

    kvc_status init(int32_t device_ordinal, int64_t max_pairs);
    void release();
};

}  // namespace kvc
