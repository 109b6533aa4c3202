// The transfer agent's fault injection (lib/testing.h: kvct_xfer_device_fault, kvct_xfer_stuck_gets):
// its state, in the test archive only (lib/CMakeLists.txt, KVC_TEST_ONLY_SOURCES). The translation
// units that consult it (agent_staging.cpp, agent_import.cpp) are compiled a second time with
// KVC_TEST_HOOKS for that archive; libkvc.so and libkvc.a have neither the state nor a test branch.
#include <atomic>

#include "transfer/agent.hpp"

namespace kvc::xfer {
namespace {
std::atomic<int32_t> g_device_faults{0};
std::atomic<int64_t> g_stuck_gets_ms{0};
}  // namespace

void device_fault_set(int32_t count) { g_device_faults.store(count > 0 ? count : 0); }
void stuck_gets_set(int64_t abandon_ms) { g_stuck_gets_ms.store(abandon_ms > 0 ? abandon_ms : 0); }

namespace detail {
bool device_fault_take() {
    int32_t n = g_device_faults.load();
    while (n > 0 && !g_device_faults.compare_exchange_weak(n, n - 1)) {
    }
    return n > 0;
}
int64_t stuck_gets_ms() { return g_stuck_gets_ms.load(); }
}  // namespace detail
}  // namespace kvc::xfer
