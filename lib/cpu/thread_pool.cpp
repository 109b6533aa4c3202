#include "cpu/thread_pool.hpp"

#include <sched.h>

#include <unistd.h>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace kvc::cpu {
namespace {

class WorkerPool {
public:
    WorkerPool() {
        owner_pid_ = getpid();
        cpu_set_t set;
        const int32_t allowed = sched_getaffinity(0, sizeof set, &set) == 0 ? int32_t(CPU_COUNT(&set)) : 0;
        const int workers =
            thread_count_for(std::getenv("KVC_CPU_THREADS"), allowed, std::thread::hardware_concurrency()) - 1;
        threads_.reserve(size_t(workers));
        for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { worker_loop(); });
    }

    ~WorkerPool() {
        {
            std::lock_guard<std::mutex> lk(mu_);
            stop_ = true;
        }
        wake_.notify_all();
        for (auto &t : threads_) t.join();
    }

    int32_t width() const { return int32_t(threads_.size()) + 1; }

    void run(int64_t count, ParallelFn fn, void *ctx) {
        if (count <= 0) return;
        // One job at a time; a second concurrent (or nested) caller runs its items itself.
        std::unique_lock<std::mutex> job(job_mu_, std::try_to_lock);
        // In a child created by fork() the workers do not exist: run inline there too.
        if (!job.owns_lock() || threads_.empty() || count == 1 || getpid() != owner_pid_) {
            for (int64_t i = 0; i < count; ++i) fn(ctx, i);
            return;
        }
        {
            std::lock_guard<std::mutex> lk(mu_);
            fn_ = fn;
            ctx_ = ctx;
            count_ = count;
            next_.store(0, std::memory_order_relaxed);
            active_ = int(threads_.size());
            ++epoch_;
        }
        wake_.notify_all();
        drain();
        std::unique_lock<std::mutex> lk(mu_);
        done_.wait(lk, [this] { return active_ == 0; });
    }

private:
    void drain() {
        for (;;) {
            int64_t i = next_.fetch_add(1, std::memory_order_relaxed);
            if (i >= count_) return;
            fn_(ctx_, i);
        }
    }

    void worker_loop() {
        uint64_t seen = 0;
        for (;;) {
            {
                std::unique_lock<std::mutex> lk(mu_);
                wake_.wait(lk, [&] { return stop_ || epoch_ != seen; });
                if (stop_) return;
                seen = epoch_;
            }
            drain();
            std::lock_guard<std::mutex> lk(mu_);
            if (--active_ == 0) done_.notify_one();
        }
    }

    pid_t owner_pid_ = 0;
    std::vector<std::thread> threads_;
    std::mutex job_mu_;  // serializes jobs
    std::mutex mu_;      // guards the job description and the counters below
    std::condition_variable wake_, done_;
    bool stop_ = false;
    uint64_t epoch_ = 0;
    int active_ = 0;
    ParallelFn fn_ = nullptr;
    void *ctx_ = nullptr;
    int64_t count_ = 0;
    std::atomic<int64_t> next_{0};
};

WorkerPool &pool() {
    // Function-local static: created on first use, thread-safe, joined at process exit.
    static WorkerPool p;
    return p;
}

}  // namespace

void parallel_for(int64_t count, ParallelFn fn, void *ctx) { pool().run(count, fn, ctx); }
int32_t parallel_width() { return pool().width(); }

int32_t thread_count_for(const char *env_value, int32_t allowed_cpus, unsigned hardware_threads) {
    int32_t n = 0;
    if (env_value && *env_value) {
        char *end = nullptr;
        const long v = std::strtol(env_value, &end, 10);
        if (*end == '\0' && v > 0) n = v > kMaxThreads ? kMaxThreads : int32_t(v);
    }
    if (n == 0) n = allowed_cpus > 0 ? allowed_cpus : int32_t(hardware_threads);
    return n < 1 ? 1 : n > kMaxThreads ? kMaxThreads : n;
}

}  // namespace kvc::cpu
