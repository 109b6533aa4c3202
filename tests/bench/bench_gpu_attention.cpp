// GPU paged attention throughput (Google Benchmark). Without a usable GPU it says so and exits 0.
//
//  - DeviceCopy: device-to-device cudaMemcpy of 1 GiB, the achievable-bandwidth baseline
//    (bytes read + written / time).
//  - Decode: effective bandwidth = bytes of K/V actually attended + Q + O, divided by kernel time;
//    reported in GB/s, as % of the H100 SXM HBM3 peak (3.35 TB/s) and as % of the measured copy.
//    Headline shape: B=64, ctx=4096, 32 q / 8 kv heads, d=128, fp16, block 16, under every split-K
//    setting (auto, never, forced), scores on tensor cores (fp16 q) and on CUDA cores (fp32 q:
//    the decode kernel's other score path, same K/V bytes); then a sweep over batch x context x
//    block size.
//  - Prefill: causal prompt of 2048 tokens per sequence, TFLOP/s (4 * visible q-k pairs * d * heads);
//    fp16 q with fp16 or FP8 (e4m3) KV, head dim 128 or 256 (all on the tensor-core prefill kernel).
//
// Kernel time comes from CUDA events when cuda_runtime.h is on the include path (tests/gpu/
// run_on_device.sh puts it there), else from the host clock around a synchronized batch of launches.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "storage/cuda_api.hpp"
#include "storage/kernel_args.hpp"

#if __has_include(<cuda_runtime.h>)
#include <cuda_runtime.h>
#define KVC_BENCH_EVENTS 1
#else
#define KVC_BENCH_EVENTS 0
#endif

namespace {

constexpr double kH100PeakBytesPerSec = 3.35e12;
double g_copy_bytes_per_sec = 0.0;  // measured by DeviceCopy, which runs first

#define BENCH_CHECK(expr)                                                          \
    do {                                                                           \
        kvc_status st_ = (expr);                                                   \
        if (st_ != KVC_OK) {                                                       \
            std::fprintf(stderr, "%s failed: %s\n", #expr, kvc_last_error());      \
            std::exit(1);                                                          \
        }                                                                          \
    } while (0)

struct DevMem {
    void *p = nullptr;
    size_t bytes = 0;
    void alloc(size_t n) {
        if (p && bytes >= n) return;
        if (p) (void)kvc::cuda::free_device(0, p);
        BENCH_CHECK(kvc::cuda::malloc_device(0, n ? n : 1, &p));
        bytes = n;
    }
    template <typename T> void upload(const std::vector<T> &v) {
        alloc(v.size() * sizeof(T));
        BENCH_CHECK(kvc::cuda::memcpy_h2d(p, v.data(), v.size() * sizeof(T), nullptr));
        BENCH_CHECK(kvc::cuda::stream_sync(nullptr));
    }
    void release() {
        if (p) (void)kvc::cuda::free_device(0, p);
        p = nullptr;
        bytes = 0;
    }
    ~DevMem() { release(); }
};

// Times `launch` (one kernel sequence on the default stream); returns seconds per launch.
template <typename F>
double time_launches(F &&launch, int reps) {
#if KVC_BENCH_EVENTS
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start, nullptr);
    for (int i = 0; i < reps; ++i) launch();
    cudaEventRecord(stop, nullptr);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return double(ms) * 1e-3 / reps;
#else
    BENCH_CHECK(kvc::cuda::stream_sync(nullptr));
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) launch();
    BENCH_CHECK(kvc::cuda::stream_sync(nullptr));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
#endif
}

// Random fp16 values in [-1, 1) (bit patterns built directly: sign, small exponent, mantissa).
// Mantissa bits 3 and 6 stay clear so every byte is also a finite e4m3 value below 1 in magnitude
// (the FP8 cases read the same storage): the low byte's e4m3 exponent is at most 6, the high
// byte's is 5 or 6.
std::vector<uint16_t> random_halves(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint16_t> v(n);
    for (auto &x : v) x = uint16_t((rng() & 0x83b7u) | ((10u + rng() % 4u) << 10));  // |x| in [2^-5, 1)
    return v;
}

float half_to_float(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {  // random_halves makes no zeros or subnormals; kept exact anyway
        bits = sign;
        if (man) {
            float f = std::ldexp(float(man), -24);
            std::memcpy(&bits, &f, 4);
            bits |= sign;
        }
    } else {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// One device KV storage shared by every case (largest shape), filled once with random halves by
// uploading 64 MiB and doubling on the device.
struct SharedStorage {
    DevMem mem;
    size_t filled = 0;
    void *get(size_t bytes) {
        if (filled >= bytes) return mem.p;
        mem.alloc(bytes);
        const std::vector<uint16_t> seed = random_halves(size_t(32) << 20, 1);
        const size_t seed_bytes = std::min(bytes, seed.size() * 2);
        BENCH_CHECK(kvc::cuda::memcpy_h2d(mem.p, seed.data(), seed_bytes, nullptr));
        for (size_t done = seed_bytes; done < bytes;) {
            const size_t n = std::min(done, bytes - done);
            BENCH_CHECK(kvc::cuda::memcpy_d2d(static_cast<char *>(mem.p) + done, mem.p, n, nullptr));
            done += n;
        }
        BENCH_CHECK(kvc::cuda::stream_sync(nullptr));
        filled = bytes;
        return mem.p;
    }
};
SharedStorage g_storage;

// A batch of num_seqs sequences of ctx_len tokens each (q_len queries each), shuffled block tables.
struct AttentionCase {
    kvc::KvLayout layout;
    DevMem tables, seq_lens, qsl, q, out, workspace;
    kvc::AttentionArgs args;
    double kv_bytes = 0, qo_bytes = 0, flops = 0;

    AttentionCase(int32_t num_seqs, int32_t ctx_len, int32_t q_len, int32_t block_size, int32_t partition,
                  int32_t kv_dtype = KVC_DTYPE_F16, int32_t d = 128, int32_t q_dtype = KVC_DTYPE_F16) {
        const int32_t hq = 32, hkv = 8;
        const int32_t blocks_per_seq = (ctx_len + block_size - 1) / block_size;
        const int64_t num_blocks = int64_t(num_seqs) * blocks_per_seq;
        layout.init(num_blocks, block_size, 1, hkv, d, kv_dtype);
        void *base = g_storage.get(size_t(layout.total_bytes));
        std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
        std::iota(ids.begin(), ids.end(), 0);
        std::shuffle(ids.begin(), ids.end(), std::mt19937(3));
        tables.upload(ids);  // row s = ids[s * blocks_per_seq ...]: exactly the padded table
        seq_lens.upload(std::vector<int32_t>(size_t(num_seqs), ctx_len));
        std::vector<int32_t> starts(size_t(num_seqs) + 1);
        for (int32_t s = 0; s <= num_seqs; ++s) starts[size_t(s)] = s * q_len;
        qsl.upload(starts);
        const size_t q_elems = size_t(num_seqs) * q_len * hq * d;
        const size_t q_bytes = q_dtype == KVC_DTYPE_F32 ? 4 : 2;
        std::vector<uint16_t> q_halves = random_halves(q_elems, 2);
        if (q_bytes == 4) {  // the same values, widened: fp16 -> fp32 is exact
            std::vector<float> wide(q_elems);
            for (size_t i = 0; i < q_elems; ++i) wide[i] = half_to_float(q_halves[i]);
            q.upload(wide);
        } else {
            q.upload(q_halves);
        }
        out.alloc(q_elems * q_bytes);
        const size_t ws = kvc::cuda::attention_workspace_bytes(num_seqs, hq, d, int64_t(blocks_per_seq) * block_size);
        workspace.alloc(ws);

        args.layout = layout;
        args.base = base;
        args.layer = 0;
        args.q = q.p;
        args.out = out.p;
        args.q_dtype = q_dtype;
        args.num_q_heads = hq;
        args.scale = 1.0f / std::sqrt(float(d));
        args.partition_size = partition;
        args.num_seqs = num_seqs;
        args.num_tokens = int64_t(num_seqs) * q_len;
        args.block_tables = static_cast<const int32_t *>(tables.p);
        args.max_blocks_per_seq = blocks_per_seq;
        args.seq_lens = static_cast<const int32_t *>(seq_lens.p);
        args.query_start_loc = static_cast<const int32_t *>(qsl.p);
        args.max_q_len = q_len;
        args.max_seq_len = ctx_len;
        args.is_decode = q_len == 1;
        args.workspace = workspace.p;
        args.workspace_bytes = ws;

        kv_bytes = double(num_seqs) * ctx_len * hkv * d * 2.0 * double(layout.elem_bytes);
        qo_bytes = 2.0 * double(q_elems) * double(q_bytes);
        // Causal: query j (of q_len, at the end of ctx_len) sees ctx_len - q_len + j + 1 keys.
        const double pairs = double(q_len) * (ctx_len - q_len) + double(q_len) * (q_len + 1) / 2.0;
        flops = 4.0 * pairs * d * hq * num_seqs;
    }
};

// KVC_BENCH_TINY=1: every shape shrunk (a 4 MiB copy, B <= 2, ctx <= 256, 64-token prompts) so
// that the CPU emulator of CUDA can rehearse the benchmark steps of tests/gpu/quick_check.sh.
// Its figures say nothing about a GPU; the names carry the real arguments, so no one mistakes them.
bool tiny() {
    static const bool t = std::getenv("KVC_BENCH_TINY") != nullptr;
    return t;
}

void BM_DeviceCopy(benchmark::State &state) {
    const size_t bytes = tiny() ? size_t(4) << 20 : size_t(1) << 30;
    DevMem a, b;
    a.alloc(bytes);
    b.alloc(bytes);
    double sec = 0;
    for (auto _ : state) {
        sec = time_launches([&] { BENCH_CHECK(kvc::cuda::memcpy_d2d(b.p, a.p, bytes, nullptr)); }, 10);
        state.SetIterationTime(sec);
    }
    g_copy_bytes_per_sec = 2.0 * double(bytes) / sec;
    state.counters["GB/s"] = g_copy_bytes_per_sec / 1e9;
    state.counters["pct_peak"] = 100.0 * g_copy_bytes_per_sec / kH100PeakBytesPerSec;
}

void BM_Decode(benchmark::State &state) {
    const int32_t batch = int32_t(state.range(0)), ctx = int32_t(state.range(1)), bs = int32_t(state.range(2));
    const int32_t partition = int32_t(state.range(3));
    const int32_t q_dtype = int32_t(state.range(4));
    AttentionCase c(batch, ctx, 1, bs, partition, KVC_DTYPE_F16, 128, q_dtype);
    double sec = 0;
    for (auto _ : state) {
        sec = time_launches([&] { BENCH_CHECK(kvc::cuda::attention(c.args, nullptr)); }, tiny() ? 2 : 20);
        state.SetIterationTime(sec);
    }
    const double bw = (c.kv_bytes + c.qo_bytes) / sec;
    state.counters["GB/s"] = bw / 1e9;
    state.counters["pct_3.35TB/s"] = 100.0 * bw / kH100PeakBytesPerSec;
    if (g_copy_bytes_per_sec > 0) state.counters["pct_copy"] = 100.0 * bw / g_copy_bytes_per_sec;
    state.counters["us"] = sec * 1e6;
}

void BM_Prefill(benchmark::State &state) {
    const int32_t batch = int32_t(state.range(0)), q_len = int32_t(state.range(1)), prefix = int32_t(state.range(2));
    const int32_t kv_dtype = int32_t(state.range(3)), d = int32_t(state.range(4));
    AttentionCase c(batch, prefix + q_len, q_len, 16, -1, kv_dtype, d);
    double sec = 0;
    for (auto _ : state) {
        sec = time_launches([&] { BENCH_CHECK(kvc::cuda::attention(c.args, nullptr)); }, tiny() ? 1 : 3);
        state.SetIterationTime(sec);
    }
    state.counters["TFLOP/s"] = c.flops / sec / 1e12;
    state.counters["ms"] = sec * 1e3;
}

}  // namespace

int main(int argc, char **argv) {
    int32_t devices = 0;
    if (kvc::cuda::device_count(&devices) != KVC_OK || devices == 0) {
        std::printf("bench_gpu_attention: no CUDA device or driver; skipped\n");
        return 0;
    }
    benchmark::Initialize(&argc, argv);
    const bool t = tiny();
    benchmark::RegisterBenchmark(t ? "DeviceCopy/4MiB" : "DeviceCopy/1GiB", BM_DeviceCopy)->UseManualTime()->Iterations(3);
    // Headline: B=64, ctx=4096, block 16, auto / never / forced split-K; fp16 q (tensor-core scores)
    // and fp32 q (CUDA-core scores).
    for (int64_t q : {KVC_DTYPE_F16, KVC_DTYPE_F32})
        for (int64_t part : {0, -1, 1024, 512})
            benchmark::RegisterBenchmark(q == KVC_DTYPE_F16 ? "Decode/headline" : "Decode/headline_q_f32", BM_Decode)
                ->Args({t ? 2 : 64, t ? 256 : 4096, 16, t && part > 0 ? part / 8 : part, q})
                ->ArgNames({"B", "ctx", "bs", "part", "q"})->UseManualTime()->Iterations(t ? 1 : 5);
    const std::vector<int64_t> batches = t ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1, 8, 64, 256};
    const std::vector<int64_t> contexts = t ? std::vector<int64_t>{64, 256} : std::vector<int64_t>{1024, 4096, 16384};
    for (int64_t b : batches)
        for (int64_t ctx : contexts)
            for (int64_t bs : {1, 8, 16, 32, 128, 256}) {
                if (b * ctx > (int64_t(1) << 20)) continue;  // 4 GiB of KV at most
                benchmark::RegisterBenchmark("Decode/sweep", BM_Decode)
                    ->Args({b, ctx, bs, 0, KVC_DTYPE_F16})->ArgNames({"B", "ctx", "bs", "part", "q"})->UseManualTime()
                    ->Iterations(3);
            }
    // kv: KVC_DTYPE_* (F16 or FP8_E4M3); q is always fp16.
    for (int64_t kv : {KVC_DTYPE_F16, KVC_DTYPE_FP8_E4M3})
        for (int64_t d : {128, 256})
            for (int64_t prefix : {0, 2048}) {
                if (d == 256 && prefix > 0) continue;
                benchmark::RegisterBenchmark(kv == KVC_DTYPE_F16 ? "Prefill/f16" : "Prefill/fp8", BM_Prefill)
                    ->Args({t ? 1 : 4, t ? 64 : 2048, t ? prefix / 32 : prefix, kv, d})
                    ->ArgNames({"B", "q_len", "prefix", "kv", "d"})->UseManualTime()->Iterations(t ? 1 : 2);
            }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    // Freed here, not by a static destructor that may run after the CUDA runtime (or its emulator)
    // has torn itself down: the emulated build aborted with a double free at exit.
    g_storage.mem.release();
    return 0;
}
