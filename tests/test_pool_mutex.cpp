// The pool's lock (lib/core/pool_mutex.hpp) on its own, so that a fault in it shows here and not
// only as a rare failure of the pool's thread stresses:
//   - the step from one thread to several while the lock is held: the holder took it with plain
//     stores (the process had one thread), a second thread then waits on it, and the holder's
//     unlock must see the new thread and wake the waiter (an unlock that kept to the one-thread
//     path would leave it asleep: this test then fails by its deadline instead of hanging);
//   - a waiter that sleeps is woken by every unlock that finds it, repeatedly;
//   - mutual exclusion: increments of a plain counter by several threads all survive.
// The first test must run first: it needs the process to have no thread yet (under a sanitizer
// whose runtime starts threads it still runs, on the atomic path).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "core/pool_mutex.hpp"

extern "C" {
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
}

namespace {

using Clock = std::chrono::steady_clock;

// Waits up to `seconds` for `done()`; true when it came.
template <class Done>
bool wait_until(Done done, double seconds) {
    const auto until = Clock::now() + std::chrono::duration<double>(seconds);
    while (!done()) {
        if (Clock::now() > until) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return true;
}

bool wait_for(const std::atomic<bool> &flag, double seconds) {
    return wait_until([&] { return flag.load(std::memory_order_acquire); }, seconds);
}

void test_waiter_woken_after_first_thread_starts(void **) {
    kvc::PoolMutex mu;
    std::printf("pool_mutex: the one-thread path %s exercised here\n",
                KVC_SINGLE_THREADED() ? "is" : "is not (the process already has threads)");
    mu.lock();  // the process may have one thread here: the plain path
    std::atomic<bool> started{false}, entered{false};
    std::thread waiter([&] {
        started.store(true, std::memory_order_release);
        mu.lock();  // held: spins, then sleeps on the futex
        entered.store(true, std::memory_order_release);
        mu.unlock();
    });
    assert_true(wait_for(started, 10.0));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // past the spin: asleep by now
    assert_false(entered.load(std::memory_order_acquire));       // the lock still excludes it
    mu.unlock();  // must take the atomic path now and wake the sleeper
    if (!wait_for(entered, 10.0)) {
        waiter.detach();  // asleep for good: fail instead of hanging on a join
        fail_msg("the waiter was not woken by the unlock after the second thread started");
    }
    waiter.join();
}

void test_sleeping_waiter_woken_each_time(void **) {
    kvc::PoolMutex mu;
    std::atomic<int> stage{0};
    std::atomic<bool> done{false};
    constexpr int kRounds = 20;
    mu.lock();
    std::thread waiter([&] {
        for (int r = 0; r < kRounds; ++r) {
            stage.store(2 * r + 1, std::memory_order_release);
            mu.lock();
            stage.store(2 * r + 2, std::memory_order_release);
            mu.unlock();
            while (stage.load(std::memory_order_acquire) != -(r + 1)) std::this_thread::yield();
        }
        done.store(true, std::memory_order_release);
    });
    for (int r = 0; r < kRounds; ++r) {
        while (stage.load(std::memory_order_acquire) != 2 * r + 1) std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the waiter goes to sleep
        assert_int_equal(stage.load(std::memory_order_acquire), 2 * r + 1);  // still excluded
        mu.unlock();
        wait_until([&] { return stage.load(std::memory_order_acquire) == 2 * r + 2; }, 10.0);
        assert_int_equal(stage.load(std::memory_order_acquire), 2 * r + 2);  // woken and through
        mu.lock();
        stage.store(-(r + 1), std::memory_order_release);
    }
    mu.unlock();
    waiter.join();
    assert_true(done.load());
}

void test_counts_survive_contention(void **) {
    kvc::PoolMutex mu;
    int64_t count = 0;  // plain: only the lock protects it
    constexpr int kThreads = 4, kIters = 100000;
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t)
        ts.emplace_back([&] {
            for (int i = 0; i < kIters; ++i) {
                mu.lock();
                ++count;
                mu.unlock();
            }
        });
    for (auto &t : ts) t.join();
    assert_int_equal(count, int64_t(kThreads) * kIters);
    assert_true(mu.try_lock());  // left unlocked
    assert_false(mu.try_lock());
    mu.unlock();
}

}  // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_waiter_woken_after_first_thread_starts),  // first: see the top
        cmocka_unit_test(test_sleeping_waiter_woken_each_time),
        cmocka_unit_test(test_counts_survive_contention),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
