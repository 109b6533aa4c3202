// A small persistent worker pool for the CPU kernels. Created lazily on first use, once per process,
// with one worker per usable CPU minus the caller (who works too; thread_count_for), so a kernel
// call never creates threads. Items are handed out through an atomic counter: uneven items (long and short
// sequences) balance by themselves.
#pragma once

#include <cstdint>

namespace kvc::cpu {

// Calls fn(ctx, item) for every item in [0, count) on the pool and the calling thread, and returns
// when all are done. fn must not throw. When the pool is busy serving another caller (several
// threads launching at once, or a nested call) the items run on the calling thread instead, so
// callers never wait on each other and nesting cannot deadlock.
using ParallelFn = void (*)(void *ctx, int64_t item);
void parallel_for(int64_t count, ParallelFn fn, void *ctx);

// Threads that parallel_for may use (workers + caller); >= 1.
int32_t parallel_width();

// The pool's thread count (workers + caller): KVC_CPU_THREADS's value when it is a positive
// integer (a server sharing the machine; a container whose CPU quota the CPU count does not
// show), else the CPUs this process may run on (sched_getaffinity: taskset, cpusets), else the
// hardware threads; within [1, kMaxThreads]. Read once, when the pool starts.
constexpr int32_t kMaxThreads = 64;
int32_t thread_count_for(const char *env_value, int32_t allowed_cpus, unsigned hardware_threads);

// Typed convenience wrapper: body(item) for a lambda or functor.
template <class Body>
void parallel_for_each(int64_t count, Body &body) {
    parallel_for(
        count, [](void *c, int64_t i) { (*static_cast<Body *>(c))(i); }, &body);
}

}  // namespace kvc::cpu
