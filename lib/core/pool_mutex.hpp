// The pool's lock (kvc_pool::mu): a mutex whose uncontended lock and unlock are inline. std::mutex
// goes through pthread_mutex_lock / _unlock (~55 instructions per pair: type dispatch, owner and
// user counts), which every C call pays once; in bench_trace's single-call replay (one kvc_append
// per decode token) that was a sixth of the library's instructions (tests/bench/RESULTS.md,
// session 23).
//
// States (Drepper, "Futexes Are Tricky", mutex 3): 0 unlocked, 1 locked, 2 locked and a thread
// may be waiting. A waiter sets 2 and sleeps on the word (Linux futex; elsewhere it yields); the
// unlock that finds 2 wakes one. Not recursive, as std::mutex is not. Acquire / release ordering
// as std::mutex gives (ThreadSanitizer follows it through the atomics). While the process has a
// single thread, lock and unlock are plain loads and stores, as glibc's own lock is then (a
// locked instruction per lock and unlock made the single-call replay ~12 % slower, measured).
#pragma once

#include <atomic>
#include <cstdint>

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
#include <sys/single_threaded.h>
#define KVC_SINGLE_THREADED() (__libc_single_threaded != 0)
#else
#define KVC_SINGLE_THREADED() false
#endif

namespace kvc {

class PoolMutex {
public:
    PoolMutex() = default;
    PoolMutex(const PoolMutex &) = delete;
    PoolMutex &operator=(const PoolMutex &) = delete;

    void lock() {
        // A process with one thread (glibc's __libc_single_threaded, which only that thread can
        // clear, by starting another) takes the lock without a locked instruction, as glibc's own
        // lock does then: the atomic exchange costs ~2 ns a call (bench_trace, measured).
        if (KVC_SINGLE_THREADED() && state_.load(std::memory_order_acquire) == 0) {
            state_.store(1, std::memory_order_relaxed);  // plain moves on x86; the orders as in the atomic path
            return;
        }
        uint32_t unlocked = 0;
        if (__builtin_expect(
                !state_.compare_exchange_strong(unlocked, 1, std::memory_order_acquire, std::memory_order_relaxed), 0))
            lock_contended();
    }
    bool try_lock() {
        uint32_t unlocked = 0;
        return state_.compare_exchange_strong(unlocked, 1, std::memory_order_acquire, std::memory_order_relaxed);
    }
    void unlock() {
        if (KVC_SINGLE_THREADED()) {  // no other thread: nobody waits
            state_.store(0, std::memory_order_release);
            return;
        }
        if (__builtin_expect(state_.exchange(0, std::memory_order_release) == 2, 0)) wake_one();
    }

private:
    void lock_contended();  // core/pool_mutex.cpp
    void wake_one();
    std::atomic<uint32_t> state_{0};
};

}  // namespace kvc
