// A serving trace replayed through the C ABI: the host metadata cost per operation of a prefix-
// caching server, the figure [perf-host-2] sets a goal for (<= 20 ns/op with the batch calls,
// <= 30 ns/op with single calls).
//
// The trace (deterministic, generated here): 2000 requests, each one of 8 shared 1024-token system
// prompts followed by a unique 64..256-token suffix, generating 64..256 tokens; 64 requests run at
// once; block size 16; prefix caching on; a metadata-only pool (no KV storage). A scheduler step
// admits waiting requests while fewer than 64 run and the watermark verdict is OK, appends one
// token to every running request, and frees the ones that are done.
//
// Three replays of the same trace:
//   twostep one call per operation as before kvc_admit: kvc_can_alloc + kvc_alloc per admission,
//           kvc_append per token, kvc_free per request (what the 44x figure against nano-vllm's
//           BlockManager measured);
//   single  one call per operation: kvc_admit per admission (one walk of the prompt), kvc_append
//           per token, kvc_free per request;
//   batch   kvc_admit per admission, one kvc_append_batch per step, kvc_free per request.
// "ns/op" divides the replay's time by the same count of logical operations in both (admission
// = 2: verdict + allocation; append = 1 per token; free = 1), so the two figures compare directly.
// Hit tokens (the sum of the cached prefixes) must come out the same in all; the program fails
// otherwise. Medians over --reps replays of each, interleaved; each kind replays on its own pool,
// reused (prefix cache emptied between replays) and warmed by one untimed replay, as a server's
// long-lived pool is warm (a fresh pool per replay timed the kernel's first touch of its pages).
//
// Built against an older libkvc without the new calls (they are weak references here), only the
// twostep replay runs: that is how RESULTS.md compares before and after in one run.
//
// usage: bench_trace [--requests N] [--reps R] [--verify] [--only single|batch] [--breakdown]
//   --only    runs that replay alone, once per rep, and prints nothing (for callgrind)
//   --breakdown  replays single and batch with each library call timed by the TSC (x86-64 only) and
//             prints where each replay's time goes (admission, append, free, the benchmark's own
//             loop) in ns per op of the whole replay, medians over --reps: which part of the
//             library a change moved, where callgrind (no prefetch, no timing) cannot say.
//   --verify  replays twostep and batch side by side on two pools and compares every request's block
//             table after every step (a ctest entry runs it on a short trace).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "../kv_oracle.h"
#include "kvc/kvc.h"

// Weak: present in this libkvc, absent from older ones (the baseline build).
extern "C" {
#pragma weak kvc_admit
#pragma weak kvc_append_batch
}

namespace {

constexpr int32_t kBlockSize = 16;
constexpr int kSystemPrompts = 8;
constexpr int64_t kSystemTokens = 1024;
constexpr int kRunning = 64;

void check(kvc_status st, const char *what) {
    if (st != KVC_OK) {
        std::fprintf(stderr, "bench_trace: %s failed: %s\n", what, kvc_last_error());
        std::exit(1);
    }
}

// splitmix64 (its step is the byte oracle's kvo_mix): a fixed generator, so every build replays
// the same trace.
struct Rng {
    uint64_t s;
    uint64_t next() {
        const uint64_t x = s;
        s += 0x9E3779B97F4A7C15ull;
        return kvo_mix(x);
    }
    int64_t uniform(int64_t lo, int64_t hi) { return lo + int64_t(next() % uint64_t(hi - lo + 1)); }
    int32_t token() { return int32_t(next() % 32000); }
};

// A request's output tokens are not stored: the replay makes them as it goes, as a server's sampler
// does, so its own loop reads no cold trace memory per token (stored per request, the output ids
// were one cache miss per request every 16 steps: a fifth of the replay's time, measured). Each
// request's tokens are a Weyl sequence seeded by its id (a 64-bit add and a shift per token): the
// ids only have to be arbitrary and deterministic, and what the benchmark's own loop costs is
// counted in every ns/op it prints.
struct Request {
    std::vector<int32_t> prompt;
    int64_t output_len = 0;
};

constexpr uint64_t kTokenStep = 0x9E3779B97F4A7C15ull;
uint64_t output_seed(uint64_t request) { return kvo_mix(request ^ 0x5EED0000000000ull); }
int32_t output_token(uint64_t *state) {
    *state += kTokenStep;
    return int32_t(*state >> 49);  // 0..32767
}

std::vector<Request> make_trace(int n) {
    Rng rng{20261126};
    std::vector<std::vector<int32_t>> system(kSystemPrompts);
    for (auto &s : system)
        for (int64_t i = 0; i < kSystemTokens; ++i) s.push_back(rng.token());
    std::vector<Request> trace(static_cast<size_t>(n));
    for (auto &r : trace) {
        const std::vector<int32_t> &sys = system[size_t(rng.next() % kSystemPrompts)];
        const int64_t suffix = rng.uniform(64, 256);
        r.output_len = rng.uniform(64, 256);
        // One buffer of the prompt's size, as a tokenizer hands over per request (a copy of the
        // system prompt grown by push_back sat in an 8 KiB buffer between freed 4 KiB ones).
        r.prompt.reserve(sys.size() + size_t(suffix));
        r.prompt = sys;
        for (int64_t i = 0; i < suffix; ++i) r.prompt.push_back(rng.token());
        // The draws the stored output ids took: the prompts stay those of earlier runs.
        for (int64_t i = 0; i < r.output_len; ++i) rng.next();
    }
    return trace;
}

kvc_pool *make_pool() {
    kvc_pool_config c;
    check(kvc_pool_config_default(&c), "config");
    c.block_size = kBlockSize;
    // Room for 64 requests of the longest shape (1024 + 256 + 256 tokens = 96 blocks) plus the
    // system prompts; what is left holds finished requests' cached blocks until evicted.
    c.num_blocks = 8192;
    c.prefix_caching = 1;
    c.event_capacity = 0;  // no router reads events here
    c.watermark = 0.01;
    c.backend = KVC_BACKEND_NONE;  // metadata only: no KV storage
    kvc_pool *p = nullptr;
    check(kvc_pool_create(&c, &p), "pool_create");
    return p;
}

enum class Mode { kTwoStep, kSingle, kBatch };
const char *const kModeNames[] = {"twostep", "single", "batch"};

// One scheduler replaying the trace on one pool. step() runs one scheduler step; done() when every
// request finished. The running requests are a persistent batch (as vLLM's input batch is): their
// ids, positions and lengths in arrays that change only when a request joins or leaves, so the
// ids array is kvc_append_batch's argument as it stands.
struct Replay {
    Mode mode;
    const std::vector<Request> &trace;
    kvc_pool *pool;  // not owned: a server's pool lives across requests
    size_t next_waiting = 0;
    std::vector<uint64_t> ids;            // running requests, in admission order
    std::vector<uint64_t> seed;           // their output tokens' generator state
    std::vector<int64_t> left;            // their output tokens still to come
    std::vector<int32_t> step_tokens;     // this step's token per running request
    size_t finished[kRunning];            // this step's finishing requests' batch indices, ascending
    int64_t hit_tokens = 0, ops = 0;
    // --breakdown: TSC ticks spent in the library's admission, append and free calls.
    bool timed = false;
    uint64_t ticks[3] = {0, 0, 0};
    enum { kAdmitTicks, kAppendTicks, kFreeTicks };

    Replay(Mode m, const std::vector<Request> &t, kvc_pool *p) : mode(m), trace(t), pool(p) {
        ids.reserve(kRunning);
        seed.reserve(kRunning);
        left.reserve(kRunning);
        step_tokens.resize(kRunning);
    }

    bool done() const { return next_waiting == trace.size() && ids.empty(); }
    // The TSC when timed (--breakdown), else 0: the timed replays pay only a predictable branch.
    uint64_t now() const {
#if defined(__x86_64__)
        if (timed) {
            _mm_lfence();  // the call before has issued; rdtsc is not ordered by itself
            return __rdtsc();
        }
#endif
        return 0;
    }
    size_t running() const { return ids.size(); }

    bool admit(uint64_t id) {
        const Request &r = trace[id];
        const int64_t n = int64_t(r.prompt.size());
        int32_t verdict = KVC_ALLOC_NEVER;
        int64_t cached = 0;
        if (mode != Mode::kTwoStep) {
            const uint64_t t0 = now();
            check(kvc_admit(pool, id, r.prompt.data(), n, nullptr, &verdict, &cached), "admit");
            ticks[kAdmitTicks] += now() - t0;
        } else {
            check(kvc_can_alloc(pool, r.prompt.data(), n, nullptr, &verdict), "can_alloc");
            if (verdict == KVC_ALLOC_OK) check(kvc_alloc(pool, id, r.prompt.data(), n, nullptr, &cached), "alloc");
        }
        if (verdict == KVC_ALLOC_NEVER) {
            std::fprintf(stderr, "bench_trace: request %llu can never be admitted\n", (unsigned long long)id);
            std::exit(1);
        }
        if (verdict != KVC_ALLOC_OK) return false;
        hit_tokens += cached;
        ops += 2;
        return true;
    }

    void step() {
        while (next_waiting < trace.size() && ids.size() < kRunning && admit(next_waiting)) {
            ids.push_back(next_waiting);
            seed.push_back(output_seed(next_waiting));
            left.push_back(trace[next_waiting].output_len);
            ++next_waiting;
        }
        // The step's tokens, and which requests this token finishes: one pass over the batch, as a
        // server's sampler makes them. The batch arrays change only when a request leaves.
        const size_t n = ids.size();
        size_t finishing = 0;
        for (size_t i = 0; i < n; ++i) {
            step_tokens[i] = output_token(&seed[i]);
            if (--left[i] == 0) finished[finishing++] = i;
        }
        const uint64_t t0 = now();
        if (mode == Mode::kBatch) {
            int32_t appended = 0;
            check(kvc_append_batch(pool, int32_t(n), ids.data(), nullptr, step_tokens.data(), 0, nullptr, nullptr,
                                   &appended),
                  "append_batch");
        } else {
            for (size_t i = 0; i < n; ++i) check(kvc_append(pool, ids[i], &step_tokens[i], 1, 0, nullptr), "append");
        }
        ticks[kAppendTicks] += now() - t0;
        ops += int64_t(n);
        if (finishing == 0) return;
        // Finished requests leave, in batch order; the others keep their order.
        for (size_t k = 0; k < finishing; ++k) {
            const uint64_t f0 = now();
            check(kvc_free(pool, ids[finished[k]]), "free");
            ticks[kFreeTicks] += now() - f0;
        }
        ops += int64_t(finishing);
        size_t kept = finished[0];
        for (size_t i = finished[0] + 1, k = 1; i < n; ++i) {
            if (k < finishing && finished[k] == i) {
                ++k;
                continue;
            }
            ids[kept] = ids[i];
            seed[kept] = seed[i];
            left[kept] = left[i];
            ++kept;
        }
        ids.resize(kept);
        seed.resize(kept);
        left.resize(kept);
    }
};

// One replay on `pool`, which holds no sequence: its prefix cache is emptied first, so every
// replay starts from the same state (the system prompts not yet cached). The pool is reused across
// replays, as a server's is: its memory is touched before the timed replays (main's warm-up).
double run_once(Mode mode, const std::vector<Request> &trace, kvc_pool *pool, int64_t *hits, int64_t *ops,
                uint64_t *ticks = nullptr) {
    check(kvc_prefix_cache_reset(pool), "prefix_cache_reset");
    Replay r(mode, trace, pool);
    r.timed = ticks != nullptr;
    const uint64_t c0 = r.now();
    const auto t0 = std::chrono::steady_clock::now();
    while (!r.done()) r.step();
    const auto t1 = std::chrono::steady_clock::now();
    if (ticks) {  // admission, append, free, whole replay
        std::copy(r.ticks, r.ticks + 3, ticks);
        ticks[3] = r.now() - c0;
    }
    *hits = r.hit_tokens;
    *ops = r.ops;
    return std::chrono::duration<double, std::nano>(t1 - t0).count();
}

std::vector<int32_t> table_of(kvc_pool *p, uint64_t id) {
    int64_t len = 0;
    check(kvc_seq_block_table(p, id, nullptr, 0, &len), "block_table size");
    std::vector<int32_t> t(static_cast<size_t>(len));
    check(kvc_seq_block_table(p, id, t.data(), len, &len), "block_table");
    return t;
}

// Twostep (kvc_can_alloc + kvc_alloc, kvc_append) and batch (kvc_admit, kvc_append_batch) replays
// in lockstep: the same requests run, with the same block tables, after every step (the two pools
// start equal and the calls are meant to be equivalent). The single replay's calls are checked by
// its hit tokens and op count, which main compares with the others'.
int verify(const std::vector<Request> &trace) {
    kvc_pool *pa = make_pool(), *pb = make_pool();
    Replay a(Mode::kTwoStep, trace, pa), b(Mode::kBatch, trace, pb);
    int64_t steps = 0;
    while (!a.done() || !b.done()) {
        a.step();
        b.step();
        ++steps;
        if (a.running() != b.running()) {
            std::fprintf(stderr, "verify: step %lld: running sets differ\n", (long long)steps);
            return 1;
        }
        for (size_t k = 0; k < a.running(); ++k) {
            const uint64_t id = a.ids[k];
            if (b.ids[k] != id || table_of(a.pool, id) != table_of(b.pool, id)) {
                std::fprintf(stderr, "verify: step %lld: request %llu has different block tables\n", (long long)steps,
                             (unsigned long long)id);
                return 1;
            }
        }
    }
    kvc_stats sa, sb;
    check(kvc_pool_stats(a.pool, &sa), "stats");
    check(kvc_pool_stats(b.pool, &sb), "stats");
    if (a.hit_tokens != b.hit_tokens || sa.free_blocks != sb.free_blocks || sa.cached_free_blocks != sb.cached_free_blocks) {
        std::fprintf(stderr, "verify: end state differs (hits %lld vs %lld)\n", (long long)a.hit_tokens,
                     (long long)b.hit_tokens);
        return 1;
    }
    std::printf("verify: %zu requests, %lld steps, block tables equal after every step, %lld hit tokens\n",
                trace.size(), (long long)steps, (long long)a.hit_tokens);
    kvc_pool_destroy(pa);
    kvc_pool_destroy(pb);
    return 0;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// --breakdown: single and batch replays, interleaved, each call timed; ns per op of the replay
// for each part (ticks scaled by the replay's steady-clock time, so no TSC frequency is assumed).
// The timing itself (lfence + rdtsc around each call) adds to the figures: compare builds with it,
// not against the untimed replays.
int breakdown(const std::vector<Request> &trace, int reps) {
#if defined(__x86_64__)
    const Mode modes[2] = {Mode::kSingle, Mode::kBatch};
    kvc_pool *pools[2];
    std::vector<double> parts[2][5];  // admit, append, free, benchmark loop, whole
    for (int m = 0; m < 2; ++m) {
        int64_t hits, ops;
        pools[m] = make_pool();
        run_once(modes[m], trace, pools[m], &hits, &ops);  // warm-up
    }
    for (int r = 0; r < reps; ++r)
        for (int m = 0; m < 2; ++m) {
            int64_t hits = 0, ops = 0;
            uint64_t t[4];
            const double ns = run_once(modes[m], trace, pools[m], &hits, &ops, t);
            const double ns_per_tick = ns / double(t[3]);
            for (int k = 0; k < 3; ++k) parts[m][k].push_back(double(t[k]) * ns_per_tick / double(ops));
            parts[m][3].push_back(double(t[3] - t[0] - t[1] - t[2]) * ns_per_tick / double(ops));
            parts[m][4].push_back(ns / double(ops));
        }
    std::printf("breakdown, ns per op of the replay (median of %d; timed calls, so above the untimed figures)\n",
                reps);
    std::printf("%-8s %8s %8s %8s %8s %8s\n", "replay", "admit", "append", "free", "loop", "whole");
    for (int m = 0; m < 2; ++m) {
        std::printf("%-8s", kModeNames[int(modes[m])]);
        for (int k = 0; k < 5; ++k) std::printf(" %8.2f", median(parts[m][k]));
        std::printf("\n");
        kvc_pool_destroy(pools[m]);
    }
    return 0;
#else
    (void)trace;
    (void)reps;
    std::printf("breakdown: x86-64 only (the TSC)\n");
    return 0;
#endif
}

}  // namespace

int main(int argc, char **argv) {
    int requests = 2000, reps = 7;
    bool do_verify = false, do_breakdown = false;
    std::string only;  // a replay's name: run that one alone (profiling)
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--requests" && i + 1 < argc) requests = std::atoi(argv[++i]);
        else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
        else if (a == "--verify") do_verify = true;
        else if (a == "--breakdown") do_breakdown = true;
        else if (a == "--only" && i + 1 < argc) only = argv[++i];
        else {
            std::fprintf(stderr, "usage: bench_trace [--requests N] [--reps R] [--verify] [--only twostep|single|batch] "
                                 "[--breakdown]\n");
            return 2;
        }
    }
    const std::vector<Request> trace = make_trace(requests);
    const bool have_batch = kvc_append_batch != nullptr && kvc_admit != nullptr;
    if (do_verify) {
        if (!have_batch) {
            std::printf("verify: skipped (this libkvc has no kvc_append_batch)\n");
            return 0;
        }
        return verify(trace);
    }
    if (do_breakdown) {
        if (!have_batch) return 2;
        return breakdown(trace, reps);
    }
    if (!only.empty()) {
        int m = 0;
        while (m < 3 && only != kModeNames[m]) ++m;
        if (m == 3 || (m > 0 && !have_batch)) return 2;
        int64_t hits = 0, n = 0;
        kvc_pool *pool = make_pool();
        for (int r = 0; r < reps; ++r) run_once(Mode(m), trace, pool, &hits, &n);
        kvc_pool_destroy(pool);
        return 0;
    }
    const int modes = have_batch ? 3 : 1;
    std::vector<double> times[3];
    int64_t hits[3] = {-1, -1, -1}, ops[3] = {0, 0, 0};
    kvc_pool *pools[3] = {nullptr, nullptr, nullptr};
    for (int m = 0; m < modes; ++m) {  // one pool per replay kind, warmed by an untimed replay
        pools[m] = make_pool();
        run_once(Mode(m), trace, pools[m], &hits[m], &ops[m]);
    }
    for (int r = 0; r < reps; ++r)
        for (int m = 0; m < modes; ++m) times[m].push_back(run_once(Mode(m), trace, pools[m], &hits[m], &ops[m]));
    for (int m = 0; m < modes; ++m) kvc_pool_destroy(pools[m]);
    std::printf("trace: %d requests (8 x 1024-token system prompts + 64..256-token suffix, 64..256 output "
                "tokens), %d running, block size %d, median of %d replays each\n",
                requests, kRunning, kBlockSize, reps);
    for (int m = 0; m < modes; ++m)
        std::printf("%-8s %8.2f ns/op  (%lld ops, %lld hit tokens, %.2f ms)\n", kModeNames[m],
                    median(times[m]) / double(ops[m]), (long long)ops[m], (long long)hits[m], median(times[m]) / 1e6);
    if (!have_batch) std::printf("single, batch: skipped (this libkvc has no kvc_append_batch / kvc_admit)\n");
    for (int m = 1; m < modes; ++m)
        if (hits[m] != hits[0] || ops[m] != ops[0]) {
            std::fprintf(stderr, "bench_trace: the %s replay differs (hits %lld vs %lld, ops %lld vs %lld)\n",
                         kModeNames[m], (long long)hits[m], (long long)hits[0], (long long)ops[m], (long long)ops[0]);
            return 1;
        }
    return 0;
}
