// Test-only introspection hooks (testing.h). Hidden symbols; compiled into the test archive
// kvc_testing only (lib/CMakeLists.txt), never into libkvc.so / libkvc.a.
#include "testing.h"

#include "core/pool.hpp"
#include "transfer/agent.hpp"

namespace kvc {
// The one way a test reaches into BlockPool's counters (its friend).
struct BlockPoolTestAccess {
    static void add_refcount(BlockPool &b, int32_t block, int32_t delta) { b.state_[size_t(block)].refcount += delta; }
};
}  // namespace kvc

namespace {
bool valid(kvc_pool *p, int32_t b) { return p && b >= 0 && b < p->num_blocks; }
}  // namespace

extern "C" {

int32_t kvct_block_refcount(kvc_pool *p, int32_t b) {
    if (!valid(p, b)) return -1;
    std::lock_guard<kvc::PoolMutex> lock(p->mu);
    return p->blocks.refcount(b);
}

int32_t kvct_block_pin_count(kvc_pool *p, int32_t b) {
    if (!valid(p, b)) return -1;
    std::lock_guard<kvc::PoolMutex> lock(p->mu);
    return p->blocks.pins(b);
}

int32_t kvct_block_priority(kvc_pool *p, int32_t b) {
    if (!valid(p, b)) return -1;
    std::lock_guard<kvc::PoolMutex> lock(p->mu);
    return p->blocks.priority(b);
}

int32_t kvct_block_is_cached(kvc_pool *p, int32_t b) {
    if (!valid(p, b)) return -1;
    std::lock_guard<kvc::PoolMutex> lock(p->mu);
    return p->blocks.cached(b) ? 1 : 0;
}

int32_t kvct_next_victim(kvc_pool *p) {
    if (!p) return -1;
    std::lock_guard<kvc::PoolMutex> lock(p->mu);
    return p->blocks.next_victim();
}

void kvct_corrupt_refcount(kvc_pool *p, int32_t b, int32_t delta) {
    if (!valid(p, b)) return;
    std::lock_guard<kvc::PoolMutex> lock(p->mu);
    kvc::BlockPoolTestAccess::add_refcount(p->blocks, b, delta);
}

void kvct_xfer_device_fault(int32_t count) { kvc::xfer::device_fault_set(count); }
void kvct_xfer_stuck_gets(int64_t abandon_ms) { kvc::xfer::stuck_gets_set(abandon_ms); }

}  // extern "C"
