// PoolMutex's slow paths (core/pool_mutex.hpp).
#include "core/pool_mutex.hpp"

#include <thread>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace kvc {

__attribute__((noinline)) void PoolMutex::lock_contended() {
    // A short spin first: the pool's critical sections are mostly well under a microsecond.
    for (int i = 0; i < 64; ++i) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        uint32_t unlocked = 0;
        if (state_.load(std::memory_order_relaxed) == 0 &&
            state_.compare_exchange_weak(unlocked, 1, std::memory_order_acquire, std::memory_order_relaxed))
            return;
    }
    // From here on the word says 2 (a waiter may sleep) while this thread wants the lock: an
    // unlock then wakes one sleeper, which retries the same way.
    while (state_.exchange(2, std::memory_order_acquire) != 0) {
#if defined(__linux__)
        syscall(SYS_futex, reinterpret_cast<uint32_t *>(&state_), FUTEX_WAIT_PRIVATE, 2u, nullptr, nullptr, 0);
#else
        std::this_thread::yield();
#endif
    }
}

__attribute__((noinline)) void PoolMutex::wake_one() {
#if defined(__linux__)
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(&state_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
#endif
}

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "the futex word is the atomic itself");

}  // namespace kvc
