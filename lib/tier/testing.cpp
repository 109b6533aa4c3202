// Test-only hooks for the memory tiers (testing.h): fault injection and slot-state counts. The
// test archive kvc_testing only (lib/CMakeLists.txt), never libkvc.so / libkvc.a.
#include "testing.h"
#include "core/tier_view.hpp"
#include "tier/disk_mac.hpp"
#include "tier/tiers.hpp"

namespace kvc {
// The one way a test overwrites a slot's state (TierSlots' friend).
struct TierSlotsTestAccess {
    static void set_state(TierSlots &s, int32_t slot, TierSlots::State st) { s.state_[size_t(slot)] = st; }
};
}  // namespace kvc

extern "C" {

void kvct_disk_fault(int32_t kind, int32_t count) { kvc::tier_fault_set(count > 0 ? kind : 0, count); }

void kvct_disk_force_sync_io(int32_t on) { kvc::tier_force_sync_io(on != 0); }

void kvct_sodium_library(const char *name) { kvc::disk_mac_set_library(name); }

void kvct_tier_hold_jobs(kvc_pool *pool, int32_t on) {
    kvc::Tiers *t = pool ? kvc::pool_tiers(pool) : nullptr;
    if (!t) return;
    t->hold_jobs.store(on > 0);
    if (on == 0) kvc::tier_run_pending(pool);
}

int64_t kvct_tier_slots_in_state(kvc_pool *pool, int32_t tier, int32_t state) {
    if (!pool) return -1;
    std::lock_guard<kvc::PoolMutex> lock(kvc::pool_mutex(pool));
    const kvc::Tiers *t = kvc::pool_tiers(pool);
    const kvc::TierSlots *s = !t                                 ? nullptr
                              : tier == KVC_TIER_HOST            ? &t->host->slots
                              : tier == KVC_TIER_DISK && t->disk ? &t->disk->slots
                                                                 : nullptr;
    if (!s) return -1;
    int64_t n = 0;
    for (int32_t i = 0; i < s->capacity(); ++i) n += s->state(i) == state ? 1 : 0;
    return n;
}

int32_t kvct_tier_corrupt_slot(kvc_pool *pool, int32_t tier, int32_t slot, int32_t state) {
    if (!pool || state < 0 || state > 3) return -1;
    std::lock_guard<kvc::PoolMutex> lock(kvc::pool_mutex(pool));
    kvc::Tiers *t = kvc::pool_tiers(pool);
    kvc::TierSlots *s = !t                                 ? nullptr
                        : tier == KVC_TIER_HOST            ? &t->host->slots
                        : tier == KVC_TIER_DISK && t->disk ? &t->disk->slots
                                                           : nullptr;
    if (!s || slot < 0 || slot >= s->capacity()) return -1;
    const int32_t old = s->state(slot);
    kvc::TierSlotsTestAccess::set_state(*s, slot, kvc::TierSlots::State(state));
    return old;
}

}  // extern "C"
