// The CUDA runtime subset libkvc uses, served from host memory with CUDA's stream semantics.
//
// By default work is as late as CUDA allows, never earlier: a launch or an asynchronous copy waits
// in its stream's queue until something forces it — a synchronization of its stream, event or device,
// an event query, a synchronous copy or free, or work on another stream ordered after it (an event
// wait, the legacy default stream's implicit ordering with blocking streams). Then the stream runs
// in order up to the forced point, each operation first forcing what it depends on. So a missing
// stream wait, a result read before its synchronization, or a pinned host buffer rewritten before
// the copy reading it has run produce wrong data, as they can on a GPU; the tests see them.
// KVC_EMU_SCHEDULE picks other legal schedules: `eager` runs work at issue (a host that relies on
// work not having run yet is caught), `random[:SEED]` lets queued work of random streams run at
// random API calls, as a GPU progressing beside the host would.
//
// Copies follow cudaMemcpyAsync's documented host behaviour: from pageable host memory the source
// is read at the call (staged), into pageable host memory the call waits for the stream and
// copies; only pinned (cudaMallocHost) and device memory take part in deferred copies. cudaFree and
// cudaFreeHost synchronize the device first, as CUDA does.
//
// Stream capture records launches and copies into a graph that cudaGraphLaunch queues as one
// operation, and refuses what CUDA refuses while a capture is open: waits on events recorded
// outside it, synchronizing a capturing stream, allocation and synchronous copies in global mode,
// and the legacy stream next to a capturing blocking stream.
//
// Everything runs under one recursive mutex: kernels execute (on fibers, cuda_emulation.cpp) on
// the thread that forces them.
#include "cuda_emulation.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace kvc_emu {
namespace {

struct Stream;

// A point in a stream's order: satisfied once the stream has executed `seq` operations.
struct Point {
    Stream *stream = nullptr;
    uint64_t seq = 0;
};

struct Op {
    std::function<void()> work;  // empty: a pure ordering point (event wait)
    std::vector<Point> deps;     // forced before `work` runs
};

struct Stream {
    bool blocking = true;  // orders with the legacy default stream
    std::deque<Op> queue;
    uint64_t enqueued = 0, executed = 0;
};

struct Event {
    Point at;                 // where it was last recorded; stream null = never recorded
    uint64_t capture_id = 0;  // the capture it was last recorded in; 0 = outside any capture
};

struct Capture {
    uint64_t id;
    cudaStreamCaptureMode mode;
    bool blocking;
    bool invalidated;
    std::vector<std::function<void()>> nodes;
};

struct Graph {
    std::vector<std::function<void()>> nodes;
};

std::recursive_mutex g_mu;
Stream g_legacy;                        // the legacy default stream (NULL, cudaStreamLegacy)
// Every stream created. Neither the streams nor the list are ever freed: ordering points may name
// a destroyed stream (drained at destroy), and the list must outlive static destruction so that the
// leak checker still sees them reachable at exit.
std::vector<Stream *> &g_streams = *new std::vector<Stream *>;
std::map<cudaStream_t, Capture> g_captures;  // open captures by stream
uint64_t g_next_capture_id = 1;
std::map<uintptr_t, size_t> g_device_allocs, g_pinned_allocs;  // start -> bytes
thread_local cudaError_t g_last_error = cudaSuccess;

// Dynamic shared memory a launch may use: 48 KiB unless the kernel opted in to more
// (cudaFuncAttributeMaxDynamicSharedMemorySize), up to the H100's 227 KiB per block.
constexpr size_t kDefaultDynamicSmem = 48 * 1024, kMaxDynamicSmemOptIn = 227 * 1024;
std::map<const void *, int> g_max_dynamic_smem;

enum class Schedule { kLazy, kEager, kRandom };
struct ScheduleConfig {
    Schedule mode = Schedule::kLazy;
    uint64_t state = 0x9e3779b97f4a7c15ull;  // xorshift state for kRandom
};
ScheduleConfig read_schedule() {
    ScheduleConfig c;
    const char *env = std::getenv("KVC_EMU_SCHEDULE");
    if (!env || !*env || std::strcmp(env, "lazy") == 0) return c;
    if (std::strcmp(env, "eager") == 0) {
        c.mode = Schedule::kEager;
    } else if (std::strncmp(env, "random", 6) == 0) {
        c.mode = Schedule::kRandom;
        if (env[6] == ':') c.state ^= std::strtoull(env + 7, nullptr, 10) * 0xff51afd7ed558ccdull;
    } else {
        std::fprintf(stderr, "kvc_emu: KVC_EMU_SCHEDULE=%s is not lazy, eager or random[:SEED]\n", env);
        std::abort();
    }
    return c;
}
ScheduleConfig g_schedule = read_schedule();
uint64_t next_random() {
    uint64_t &x = g_schedule.state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
}

bool is_legacy(cudaStream_t s) { return s == nullptr || s == cudaStreamLegacy; }
Stream *stream_of(cudaStream_t s) { return is_legacy(s) ? &g_legacy : reinterpret_cast<Stream *>(s); }

bool in_allocs(const std::map<uintptr_t, size_t> &allocs, const void *p) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    auto it = allocs.upper_bound(a);
    if (it == allocs.begin()) return false;
    --it;
    return a < it->first + std::max<size_t>(it->second, 1);
}
bool is_pageable_host(const void *p) { return !in_allocs(g_device_allocs, p) && !in_allocs(g_pinned_allocs, p); }

// Runs `s` in order until `upto` operations have executed, forcing each operation's dependencies.
void drain(Stream *s, uint64_t upto) {
    while (s->executed < upto) {
        Op op = std::move(s->queue.front());
        s->queue.pop_front();
        for (const Point &d : op.deps) drain(d.stream, d.seq);
        if (op.work) op.work();
        ++s->executed;
    }
}
void drain_all(Stream *s) { drain(s, s->enqueued); }
void drain_device() {
    drain_all(&g_legacy);
    for (Stream *s : g_streams) drain_all(s);
}
bool done(const Point &p) { return !p.stream || p.stream->executed >= p.seq; }

// The device making progress beside the host, per KVC_EMU_SCHEDULE: nothing (lazy), everything just
// queued on `s` (eager), or some queued operations of a random stream (random).
void progress(Stream *s) {
    if (g_schedule.mode == Schedule::kEager) {
        drain_all(s);
    } else if (g_schedule.mode == Schedule::kRandom && next_random() % 2 == 0) {
        Stream *t = &g_legacy;
        const size_t pick = size_t(next_random() % (g_streams.size() + 1));
        if (pick < g_streams.size()) t = g_streams[pick];
        const uint64_t pending = t->enqueued - t->executed;
        if (pending > 0) drain(t, t->executed + 1 + next_random() % pending);
    }
}

// Queues `work` on `s` behind `extra` and the legacy stream's implicit ordering: legacy work waits
// for earlier work of every blocking stream, blocking streams' work for earlier legacy work.
void enqueue(Stream *s, std::function<void()> work, Point extra = {}) {
    Op op{std::move(work), {}};
    if (extra.stream && !done(extra)) op.deps.push_back(extra);
    if (s == &g_legacy) {
        for (Stream *t : g_streams)
            if (t->blocking && t->enqueued > t->executed) op.deps.push_back({t, t->enqueued});
    } else if (s->blocking && g_legacy.enqueued > g_legacy.executed) {
        op.deps.push_back({&g_legacy, g_legacy.enqueued});
    }
    s->queue.push_back(std::move(op));
    ++s->enqueued;
    progress(s);
}

Capture *capture_of(cudaStream_t s) {
    auto it = g_captures.find(s);
    return it == g_captures.end() ? nullptr : &it->second;
}

// Use of the legacy stream while a blocking stream captures would be an implicit dependency on the
// capture: CUDA refuses it and invalidates that capture.
bool legacy_conflict() {
    bool conflict = false;
    for (auto &kv : g_captures)
        if (kv.second.blocking) kv.second.invalidated = conflict = true;
    return conflict;
}

// "Potentially unsafe" calls (allocation, synchronous copies) while a global-mode capture is open.
bool global_capture_conflict() {
    bool conflict = false;
    for (auto &kv : g_captures)
        if (kv.second.mode == cudaStreamCaptureModeGlobal) kv.second.invalidated = conflict = true;
    return conflict;
}

// Queues `work` on `s`, or records it when `s` is capturing. Returns the error CUDA would report.
cudaError_t issue(cudaStream_t s, std::function<void()> work) {
    if (Capture *c = capture_of(s)) {
        if (c->invalidated) return cudaErrorStreamCaptureInvalidated;
        c->nodes.push_back(std::move(work));
        return cudaSuccess;
    }
    if (is_legacy(s) && legacy_conflict()) return cudaErrorStreamCaptureImplicit;
    enqueue(stream_of(s), std::move(work));
    return cudaSuccess;
}

cudaError_t allocate(void **p, size_t bytes, std::map<uintptr_t, size_t> &allocs) {
    if (global_capture_conflict()) return cudaErrorStreamCaptureUnsupported;
    if (bytes > (size_t(1) << 40)) return cudaErrorMemoryAllocation;
    // Exactly `bytes` (256-aligned like cudaMalloc): an access past the allocation is a bug the real
    // device may not fault on, and ASan builds of the emulator report it.
    if (posix_memalign(p, 256, bytes ? bytes : 1) != 0) *p = nullptr;
    if (!*p) return cudaErrorMemoryAllocation;
    allocs[reinterpret_cast<uintptr_t>(*p)] = bytes;
    return cudaSuccess;
}

cudaError_t release(void *p, std::map<uintptr_t, size_t> &allocs) {
    if (global_capture_conflict()) return cudaErrorStreamCaptureUnsupported;
    drain_device();  // the free synchronizes: queued work may still use the memory
    if (p) allocs.erase(reinterpret_cast<uintptr_t>(p));
    std::free(p);
    return cudaSuccess;
}

}  // namespace

void launch(const void *kernel, dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
            std::function<void()> body) {
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    // Launch errors surface through cudaGetLastError, as on the device.
    const uint64_t threads = uint64_t(block.x) * block.y * block.z;
    if (threads == 0 || threads > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
        grid.y > 65535 || grid.z > 65535) {
        g_last_error = cudaErrorInvalidConfiguration;
        return;
    }
    auto opted = g_max_dynamic_smem.find(kernel);
    const size_t smem_limit = opted == g_max_dynamic_smem.end() ? kDefaultDynamicSmem : size_t(opted->second);
    if (smem_bytes > smem_limit) {
        g_last_error = cudaErrorInvalidValue;
        return;
    }
    cudaError_t err = issue(stream, [grid, block, smem_bytes, body] { run_grid(grid, block, smem_bytes, body); });
    if (err != cudaSuccess) g_last_error = err;
}

}  // namespace kvc_emu

using kvc_emu::g_mu;
using Lock = std::lock_guard<std::recursive_mutex>;

extern "C" {

cudaError_t cudaGetDeviceCount(int *count) {
    *count = 1;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaGetDevice(int *device) {
    *device = 0;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int) {
    *value = attr == cudaDevAttrMultiProcessorCount ? 132 : 0;
    return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *p) {
    Lock lk(g_mu);
    std::memset(attr, 0, sizeof(*attr));
    attr->type = kvc_emu::in_allocs(kvc_emu::g_device_allocs, p)   ? cudaMemoryTypeDevice
                 : kvc_emu::in_allocs(kvc_emu::g_pinned_allocs, p) ? cudaMemoryTypeHost
                                                                    : cudaMemoryTypeUnregistered;
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    *free_bytes = size_t(1) << 34;
    *total_bytes = size_t(1) << 35;
    return cudaSuccess;
}
cudaError_t cudaMalloc(void **p, size_t bytes) {
    Lock lk(g_mu);
    return kvc_emu::allocate(p, bytes, kvc_emu::g_device_allocs);
}
cudaError_t cudaFree(void *p) {
    Lock lk(g_mu);
    return kvc_emu::release(p, kvc_emu::g_device_allocs);
}
cudaError_t cudaMallocHost(void **p, size_t bytes) {
    Lock lk(g_mu);
    return kvc_emu::allocate(p, bytes, kvc_emu::g_pinned_allocs);
}
cudaError_t cudaFreeHost(void *p) {
    Lock lk(g_mu);
    return kvc_emu::release(p, kvc_emu::g_pinned_allocs);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind, cudaStream_t stream) {
    Lock lk(g_mu);
    const bool src_pageable = kvc_emu::is_pageable_host(src), dst_pageable = kvc_emu::is_pageable_host(dst);
    if (kvc_emu::capture_of(stream) || (!src_pageable && !dst_pageable))
        return kvc_emu::issue(stream, [dst, src, bytes] { std::memmove(dst, src, bytes); });
    if (kvc_emu::is_legacy(stream) && kvc_emu::legacy_conflict()) return cudaErrorStreamCaptureImplicit;
    kvc_emu::Stream *s = kvc_emu::stream_of(stream);
    if (dst_pageable) {
        // Into pageable memory (or host to host): returns once the copy is done.
        kvc_emu::enqueue(s, [dst, src, bytes] { std::memmove(dst, src, bytes); });
        kvc_emu::drain_all(s);
        return cudaSuccess;
    }
    // From pageable memory: staged at the call, the transfer itself stays in the stream.
    auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char *>(src),
                                                               static_cast<const unsigned char *>(src) + bytes);
    kvc_emu::enqueue(s, [dst, staged] { std::memmove(dst, staged->data(), staged->size()); });
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind) {
    Lock lk(g_mu);
    if (kvc_emu::global_capture_conflict() || kvc_emu::legacy_conflict()) return cudaErrorStreamCaptureImplicit;
    // On the legacy stream, and synchronous.
    kvc_emu::enqueue(&kvc_emu::g_legacy, [dst, src, bytes] { std::memmove(dst, src, bytes); });
    kvc_emu::drain_all(&kvc_emu::g_legacy);
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    Lock lk(g_mu);
    if (kvc_emu::Capture *c = kvc_emu::capture_of(stream)) {
        c->invalidated = true;
        return cudaErrorStreamCaptureUnsupported;
    }
    if (kvc_emu::is_legacy(stream) && kvc_emu::legacy_conflict()) return cudaErrorStreamCaptureImplicit;
    kvc_emu::drain_all(kvc_emu::stream_of(stream));
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
    Lock lk(g_mu);
    if (!kvc_emu::g_captures.empty()) return cudaErrorStreamCaptureUnsupported;
    kvc_emu::drain_device();
    return cudaSuccess;
}
cudaError_t cudaGetLastError(void) { return std::exchange(kvc_emu::g_last_error, cudaSuccess); }
const char *cudaGetErrorString(cudaError_t err) {
    switch (err) {
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureIsolation: return "dependency created on uncaptured work in another stream";
    case cudaErrorStreamCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorCapturedEvent: return "operation not permitted on an event last recorded in a capturing stream";
    default: return "emulated CUDA error";
    }
}
const char *cudaGetErrorName(cudaError_t err) {
    switch (err) {
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureIsolation: return "cudaErrorStreamCaptureIsolation";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case cudaErrorCapturedEvent: return "cudaErrorCapturedEvent";
    default: return "cudaErrorEmulated";
    }
}
// Resident CTAs per SM, as the occupancy calculator of an H100 (sm_90) would count them from threads
// and shared memory: 2048 threads, 32 CTAs, 228 KiB of shared memory per SM with 1 KiB reserved per
// CTA. Registers are not modelled (host code has none to count): a kernel's register limit comes
// from its __launch_bounds__, which tests/gpu/kernel_report.sh checks against the same target.
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *num_blocks, const void *func, int block_size,
                                                           size_t dynamic_smem) {
    Lock lk(g_mu);
    auto opted = kvc_emu::g_max_dynamic_smem.find(func);
    const size_t smem_limit =
        opted == kvc_emu::g_max_dynamic_smem.end() ? kvc_emu::kDefaultDynamicSmem : size_t(opted->second);
    if (block_size < 1 || block_size > 1024 || dynamic_smem > smem_limit) {
        *num_blocks = 0;
        return cudaSuccess;
    }
    const size_t by_smem = (size_t(228) * 1024) / (dynamic_smem + 1024);
    const size_t by_threads = size_t(2048) / size_t((block_size + 31) / 32 * 32);
    *num_blocks = int(std::min<size_t>({by_smem, by_threads, 32}));
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value) {
    Lock lk(g_mu);
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
    if (value < 0 || size_t(value) > kvc_emu::kMaxDynamicSmemOptIn) return cudaErrorInvalidValue;
    kvc_emu::g_max_dynamic_smem[func] = value;
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
    Lock lk(g_mu);
    auto *s = new kvc_emu::Stream;
    s->blocking = (flags & cudaStreamNonBlocking) == 0;
    kvc_emu::g_streams.push_back(s);
    *stream = reinterpret_cast<cudaStream_t>(s);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    Lock lk(g_mu);
    if (kvc_emu::capture_of(stream)) return cudaErrorStreamCaptureUnsupported;
    // CUDA lets queued work finish after the destroy; running it now is one legal schedule. The
    // object stays (ordering points may still name it).
    if (!kvc_emu::is_legacy(stream)) kvc_emu::drain_all(kvc_emu::stream_of(stream));
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int) {
    *event = reinterpret_cast<cudaEvent_t>(new kvc_emu::Event);
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
    delete reinterpret_cast<kvc_emu::Event *>(event);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    Lock lk(g_mu);
    auto *e = reinterpret_cast<kvc_emu::Event *>(event);
    if (kvc_emu::Capture *c = kvc_emu::capture_of(stream)) {
        e->capture_id = c->id;
        e->at = {};
        return cudaSuccess;
    }
    if (kvc_emu::is_legacy(stream) && kvc_emu::legacy_conflict()) return cudaErrorStreamCaptureImplicit;
    kvc_emu::Stream *s = kvc_emu::stream_of(stream);
    if (s == &kvc_emu::g_legacy) kvc_emu::enqueue(s, {});  // the legacy stream's record also covers blocking streams
    e->capture_id = 0;
    e->at = {s, s->enqueued};
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t event) {
    Lock lk(g_mu);
    auto *e = reinterpret_cast<kvc_emu::Event *>(event);
    if (e->capture_id) return cudaErrorCapturedEvent;
    if (kvc_emu::done(e->at)) return cudaSuccess;
    // Not yet: the device makes progress on its own, so the next query will find it done.
    kvc_emu::drain(e->at.stream, e->at.seq);
    return cudaErrorNotReady;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    Lock lk(g_mu);
    auto *e = reinterpret_cast<kvc_emu::Event *>(event);
    if (e->capture_id) return cudaErrorCapturedEvent;
    if (e->at.stream) kvc_emu::drain(e->at.stream, e->at.seq);
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
    Lock lk(g_mu);
    const auto *e = reinterpret_cast<kvc_emu::Event *>(event);
    if (kvc_emu::Capture *c = kvc_emu::capture_of(stream)) {
        // Only events of the same capture join it; an event from outside needs cudaEventWaitExternal.
        if (e->capture_id == c->id || (e->capture_id == 0 && (flags & cudaEventWaitExternal))) return cudaSuccess;
        c->invalidated = true;
        return cudaErrorStreamCaptureIsolation;
    }
    if (e->capture_id != 0) return cudaErrorStreamCaptureIsolation;  // joining a capture from outside it
    if (kvc_emu::is_legacy(stream) && kvc_emu::legacy_conflict()) return cudaErrorStreamCaptureImplicit;
    kvc_emu::enqueue(kvc_emu::stream_of(stream), {}, e->at);
    return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
    Lock lk(g_mu);
    if (kvc_emu::is_legacy(stream)) return cudaErrorStreamCaptureUnsupported;
    if (kvc_emu::capture_of(stream)) return cudaErrorIllegalState;
    kvc_emu::Capture c{kvc_emu::g_next_capture_id++, mode, kvc_emu::stream_of(stream)->blocking, false, {}};
    kvc_emu::g_captures.emplace(stream, std::move(c));
    return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status) {
    Lock lk(g_mu);
    if (kvc_emu::is_legacy(stream)) {
        for (auto &kv : kvc_emu::g_captures)
            if (kv.second.blocking) return cudaErrorStreamCaptureImplicit;  // not invalidated by a query
        *status = cudaStreamCaptureStatusNone;
        return cudaSuccess;
    }
    const kvc_emu::Capture *c = kvc_emu::capture_of(stream);
    *status = !c ? cudaStreamCaptureStatusNone
                 : c->invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
    Lock lk(g_mu);
    auto it = kvc_emu::g_captures.find(stream);
    if (it == kvc_emu::g_captures.end()) return cudaErrorIllegalState;
    const bool invalidated = it->second.invalidated;
    auto *g = new kvc_emu::Graph{std::move(it->second.nodes)};
    kvc_emu::g_captures.erase(it);
    if (invalidated) {
        delete g;
        *graph = nullptr;
        return cudaErrorStreamCaptureInvalidated;
    }
    *graph = reinterpret_cast<cudaGraph_t>(g);
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long) {
    *exec = reinterpret_cast<cudaGraphExec_t>(new kvc_emu::Graph(*reinterpret_cast<kvc_emu::Graph *>(graph)));
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
    Lock lk(g_mu);
    // The nodes as they are when the launch runs (an executable graph is not changed after
    // instantiation here, and must outlive its queued launches, as in CUDA).
    auto *g = reinterpret_cast<kvc_emu::Graph *>(exec);
    return kvc_emu::issue(stream, [g] {
        for (auto &node : g->nodes) node();
    });
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    Lock lk(g_mu);
    kvc_emu::drain_device();  // a queued launch may still use it
    delete reinterpret_cast<kvc_emu::Graph *>(exec);
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    delete reinterpret_cast<kvc_emu::Graph *>(graph);
    return cudaSuccess;
}

}  // extern "C"
