// CPU kernel benchmarks, each kernel variant (instruction set, lib/cpu/cpu_isa.hpp) this machine
// runs, in one run: paged decode attention's effective bandwidth (bytes of K/V/Q/O moved per
// second) next to a plain memcpy of the same number of bytes (one thread, and split over the
// kernels' worker pool), prefill / append throughput in GFLOP/s next to the FMA peak of each
// variant's vectors measured on the same threads. Storage, tables and inputs are built once per
// shape; only the kernel is timed. Built against a libkvc from before cpu_isa.hpp (the "before"
// figures of RESULTS.md), it times the default variant only, named "default".
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cpu/cpu_backend.hpp"
#include "cpu/dtype_convert.hpp"
#include "cpu/thread_pool.hpp"
#include "storage/kernel_args.hpp"
#include "storage/pool_access.hpp"
#if __has_include("cpu/cpu_isa.hpp")
#include "cpu/cpu_isa.hpp"
#define KVC_BENCH_ISAS 1
#endif

namespace {

// Host memory allocated as a CPU pool allocates its KV storage (lib/storage/storage.cpp: 4 KiB
// aligned, 2 MiB aligned and offered to transparent huge pages from 2 MiB on), for the KV and for
// the memcpy baseline alike: the kernels see the same alignment and pages as in a pool, and the
// baseline the same kind of memory. (A std::vector's bytes began 16 bytes past a page, so every
// 256-byte row straddled five cache lines and every block's rows two pages.)
struct PoolBytes {
    void *base = nullptr;
    explicit PoolBytes(int64_t bytes) {
        kvc::KvLayout L;
        L.total_bytes = bytes;
        if (kvc::storage_allocate(L, KVC_BACKEND_CPU, 0, &base) != KVC_OK) {
            std::fprintf(stderr, "bench_kernels_cpu: cannot allocate %lld bytes\n", (long long)bytes);
            std::exit(1);
        }
    }
    PoolBytes(const PoolBytes &) = delete;
    PoolBytes &operator=(const PoolBytes &) = delete;
    ~PoolBytes() { kvc::storage_release(KVC_BACKEND_CPU, 0, base); }
    uint8_t *data() const { return static_cast<uint8_t *>(base); }
};

struct Setup {
    kvc::KvLayout layout;
    std::unique_ptr<PoolBytes> storage;
    std::vector<int32_t> tables, seq_lens, qsl;
    std::vector<uint16_t> q, out;
    std::vector<float> workspace;
    int32_t width = 0, nqh = 0, q_len = 0;
    int64_t ctx = 0, kv_bytes = 0;

    Setup(int32_t batch, int64_t context, int32_t query_len, int32_t q_heads, int32_t kv_heads, int32_t d,
          int32_t block_size, int32_t dtype)
        : nqh(q_heads), q_len(query_len), ctx(context) {
        // Value generation: a fast LCG (hundreds of MiB of KV for the large shapes).
        uint64_t lcg = 0x9e3779b97f4a7c15ull;
        auto uni = [&lcg]() {
            lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
            return float(int32_t(lcg >> 33) - (1 << 30)) * 0x1p-30f;
        };
        width = int32_t((context + block_size - 1) / block_size);
        layout.init(int64_t(batch) * width, block_size, 1, kv_heads, d, dtype);
        storage = std::make_unique<PoolBytes>(layout.total_bytes);
        std::mt19937 rng(1);
        // Random finite values of the dtype (small magnitudes).
        uint8_t *bytes = storage->data();
        for (int64_t i = 0; i < layout.total_bytes / layout.elem_bytes; ++i) {
            float x = uni();
            if (dtype == KVC_DTYPE_F16) reinterpret_cast<uint16_t *>(bytes)[i] = kvc::cpu::float_to_half(x);
            else if (dtype == KVC_DTYPE_BF16) reinterpret_cast<uint16_t *>(bytes)[i] = kvc::cpu::float_to_bf16(x);
            else if (dtype == KVC_DTYPE_FP8_E4M3) bytes[i] = kvc::cpu::float_to_fp8_e4m3(x);
            else reinterpret_cast<float *>(bytes)[i] = x;
        }
        std::vector<int32_t> ids(size_t(layout.num_blocks));
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
        std::shuffle(ids.begin(), ids.end(), rng);  // non-contiguous tables, like a busy pool
        tables = ids;
        // KVC_BENCH_HOT=1: every table names the pool's first 4 blocks, so the K/V a kernel reads
        // stays in the caches -- its compute-only time, next to the normal (memory-bound) run.
        if (const char *e = std::getenv("KVC_BENCH_HOT"); e && *e == '1')
            for (size_t i = 0; i < tables.size(); ++i) tables[i] = int32_t(i % 4);
        qsl.push_back(0);
        for (int32_t s = 0; s < batch; ++s) {
            seq_lens.push_back(int32_t(context));
            qsl.push_back(qsl.back() + query_len);
        }
        const size_t qn = size_t(batch) * size_t(query_len) * size_t(q_heads) * size_t(d);
        q.assign(qn, kvc::cpu::float_to_half(0.5f));
        for (auto &x : q) x = kvc::cpu::float_to_half(uni());
        out.assign(qn, 0);
        workspace.resize(kvc::cpu_attention_workspace_bytes(batch, q_heads, d, context) / 4);
        kv_bytes = int64_t(batch) * context * kv_heads * d * layout.elem_bytes * 2;
    }

    kvc::AttentionArgs args(int32_t partition_size) {
        kvc::AttentionArgs a;
        a.layout = layout;
        a.base = storage->data();
        a.q = q.data();
        a.out = out.data();
        a.q_dtype = KVC_DTYPE_F16;
        a.num_q_heads = nqh;
        a.scale = 1.0f / std::sqrt(float(layout.head_dim));
        a.partition_size = partition_size;
        a.num_seqs = int32_t(seq_lens.size());
        a.num_tokens = int64_t(q.size()) / (int64_t(nqh) * layout.head_dim);
        a.block_tables = tables.data();
        a.max_blocks_per_seq = width;
        a.seq_lens = seq_lens.data();
        a.query_start_loc = qsl.data();
        a.max_q_len = q_len;
        a.max_seq_len = ctx;
        a.is_decode = q_len == 1;
        a.workspace = workspace.data();
        a.workspace_bytes = workspace.size() * 4;
        return a;
    }
    int64_t qo_bytes() const { return int64_t(q.size() + out.size()) * 2; }
};

// ---- what each benchmark runs --------------------------------------------------------------------

struct Shape {
    const char *kind;  // "decode", "append", "prefill"
    int32_t batch;
    int64_t cached;    // context positions before the new tokens
    int32_t q_len;     // new tokens per sequence (1: decode)
    int32_t kv_heads;  // of 32 query heads
    int32_t dtype;
};

const char *dtype_name(int32_t dt) {
    return dt == KVC_DTYPE_F32 ? "f32" : dt == KVC_DTYPE_F16 ? "f16" : dt == KVC_DTYPE_BF16 ? "bf16" : "fp8";
}

// One shape's problem, kept while consecutive benchmarks (its variants) use it.
Setup &setup_for(const Shape &sh) {
    static std::unique_ptr<Setup> cached;
    static const Shape *cached_for = nullptr;
    if (cached_for != &sh) {
        cached.reset();
        cached.reset(new Setup(sh.batch, sh.cached + sh.q_len, sh.q_len, 32, sh.kv_heads, 128, 16, sh.dtype));
        cached_for = &sh;
    }
    return *cached;
}

#ifdef KVC_BENCH_ISAS
struct IsaScope {
    explicit IsaScope(int32_t isa) { if (isa >= 0) kvc::cpu::force_isa(kvc::cpu::Isa(isa)); }
    ~IsaScope() { kvc::cpu::force_isa_reset(); }
};
#else
struct IsaScope {
    explicit IsaScope(int32_t) {}
};
#endif

// Attention on shape `sh` with variant `isa` (-1: the library's default choice).
void run_attention(benchmark::State &st, const Shape *sh, int32_t isa) {
    Setup &s = setup_for(*sh);
    IsaScope scope(isa);
    kvc::AttentionArgs a = s.args(sh->q_len == 1 ? 0 : -1);
    for (auto _ : st) {
        if (kvc::cpu_attention(a) != KVC_OK) {
            st.SkipWithError("cpu_attention failed");
            break;
        }
        benchmark::ClobberMemory();
    }
    st.counters["threads"] = kvc::cpu::parallel_width();
    if (sh->q_len == 1) {
        st.SetBytesProcessed(int64_t(st.iterations()) * (s.kv_bytes + s.qo_bytes()));
        return;
    }
    // Causal: new token j of a sequence sees cached + j + 1 keys; 2 matmuls of 2 d flops per (q, k).
    const double pairs = double(sh->q_len) * double(sh->cached) + double(sh->q_len) * double(sh->q_len + 1) / 2;
    const double flops = double(sh->batch) * 32 * pairs * 128 * 4;
    st.counters["GFLOP/s"] = benchmark::Counter(flops * double(st.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

// A memcpy of `bytes` (one thread), or split in parallel_width() pieces over the worker pool.
void run_memcpy(benchmark::State &st, int64_t bytes, bool pool) {
    PoolBytes src(bytes), dst(bytes);  // zero-filled, every page touched
    std::memset(src.data(), 1, size_t(bytes));
    const int64_t pieces = pool ? kvc::cpu::parallel_width() : 1;
    auto copy_piece = [&](int64_t i) {
        const int64_t lo = bytes * i / pieces, hi = bytes * (i + 1) / pieces;
        std::memcpy(dst.data() + lo, src.data() + lo, size_t(hi - lo));
    };
    for (auto _ : st) {
        kvc::cpu::parallel_for_each(pieces, copy_piece);
        benchmark::ClobberMemory();
    }
    st.SetBytesProcessed(int64_t(st.iterations()) * bytes);
}

// A plain read of the decode shape's K/V bytes in the kernels' order -- sequence by
// sequence, KV head by KV head, each block's K then V rows through the shuffled table -- summing
// 64-byte lines: what the memory bandwidth gives for the bytes decode must read, next to
// memcpy (which also writes) and decode itself.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target("avx512f"))) uint64_t read_lines_512(const char *p, int64_t bytes) {
    __m512i acc = _mm512_setzero_si512();
    for (int64_t o = 0; o + 64 <= bytes; o += 64)
        acc = _mm512_add_epi64(acc, _mm512_loadu_si512(reinterpret_cast<const void *>(p + o)));
    alignas(64) uint64_t lanes[8];  // (not _mm512_reduce_add_epi64: GCC 12 warns in it, bug 105593)
    _mm512_store_si512(reinterpret_cast<void *>(lanes), acc);
    uint64_t sum = 0;
    for (uint64_t x : lanes) sum += x;
    return sum;
}
#endif
uint64_t read_lines(const char *p, int64_t bytes) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    if (__builtin_cpu_supports("avx512f")) return read_lines_512(p, bytes);
#endif
    uint64_t acc = 0, x;
    for (int64_t o = 0; o + 8 <= bytes; o += 8) {
        std::memcpy(&x, p + o, 8);
        acc += x;
    }
    return acc;
}

// How the paged read is split: one thread; by sequence over the worker pool's parallel_width()
// threads (does a paged read scale with threads as memcpy does?); or (sequence, KV head) items
// handed out one at a time, as decode did before session 28 -- the threads then read the
// neighbouring head regions of the same blocks at once (attention_core.inl, decode_unit).
enum class ReadSplit { one_thread, by_sequence, by_head };

void run_read_paged(benchmark::State &st, const Shape *sh, ReadSplit split) {
    Setup &s = setup_for(*sh);
    const kvc::KvLayout &L = s.layout;
    const char *base = reinterpret_cast<const char *>(s.storage->data());
    const int64_t nseq = int64_t(s.seq_lens.size());
    const int64_t width = kvc::cpu::parallel_width();
    std::vector<uint64_t> sinks(size_t(nseq * L.num_kv_heads), 0);
    auto read_head = [&](int64_t q, int32_t h) {
        uint64_t sink = 0;
        for (int64_t p = 0; p < s.ctx; p += L.block_size) {
            const int64_t block = s.tables[size_t(q * s.width + p / L.block_size)];
            const int64_t run = std::min<int64_t>(L.block_size, s.ctx - p) * L.token_stride;
            for (int32_t kv = 0; kv < 2; ++kv) sink += read_lines(base + L.offset(block, 0, kv, h, 0), run);
        }
        sinks[size_t(q * L.num_kv_heads + h)] += sink;
    };
    const int64_t pieces = split == ReadSplit::one_thread ? 1 : width;
    auto read_piece = [&](int64_t i) {
        for (int64_t q = nseq * i / pieces; q < nseq * (i + 1) / pieces; ++q)
            for (int32_t h = 0; h < L.num_kv_heads; ++h) read_head(q, h);
    };
    auto read_item = [&](int64_t i) { read_head(i / L.num_kv_heads, int32_t(i % L.num_kv_heads)); };
    for (auto _ : st) {
        if (split == ReadSplit::by_head) kvc::cpu::parallel_for_each(nseq * L.num_kv_heads, read_item);
        else kvc::cpu::parallel_for_each(pieces, read_piece);
        benchmark::DoNotOptimize(sinks.data());
        benchmark::ClobberMemory();
    }
    st.SetBytesProcessed(int64_t(st.iterations()) * s.kv_bytes);
}

// The FMA peak of 8- or 16-lane fp32 vectors on the worker pool's threads: 10 independent
// accumulator chains each (two FMA ports x 4-5 cycles of latency, and within AVX2's 16 registers
// with the two operands), 2 flops per lane per FMA; every chain feeds the result so none is dropped.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
constexpr int kChains = 10;
__attribute__((target("avx2,fma"))) float fma_loop_256(int64_t iters) {
    __m256 acc[kChains];
    for (int j = 0; j < kChains; ++j) acc[j] = _mm256_set1_ps(float(j));
    const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.001f);
    for (int64_t i = 0; i < iters; ++i)
        for (int j = 0; j < kChains; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
    for (int j = 1; j < kChains; ++j) acc[0] = _mm256_add_ps(acc[0], acc[j]);
    return _mm256_cvtss_f32(acc[0]);
}
__attribute__((target("avx512f"))) float fma_loop_512(int64_t iters) {
    __m512 acc[kChains];
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(float(j));
    const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(0.001f);
    for (int64_t i = 0; i < iters; ++i)
        for (int j = 0; j < kChains; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
    for (int j = 1; j < kChains; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
    float out[16];
    _mm512_storeu_ps(out, acc[0]);
    return out[0];
}

void run_fma_peak(benchmark::State &st, int32_t lanes) {
    const int64_t iters = 1 << 20;
    float sink[kvc::cpu::kMaxThreads] = {};
    auto body = [&](int64_t i) { sink[i] = lanes == 16 ? fma_loop_512(iters) : fma_loop_256(iters); };
    const int64_t n = kvc::cpu::parallel_width();
    for (auto _ : st) {
        kvc::cpu::parallel_for_each(n, body);
        benchmark::DoNotOptimize(sink);
    }
    const double flops = double(n) * double(iters) * kChains * lanes * 2;
    st.counters["GFLOP/s"] = benchmark::Counter(flops * double(st.iterations()) / 1e9, benchmark::Counter::kIsRate);
}
#endif

// The shapes (32 query heads, d = 128, block size 16): decode, appends over a cached
// 4 x 1024 context, whole-prompt prefill.
const Shape kShapes[] = {
    {"decode", 16, 1023, 1, 8, KVC_DTYPE_F16},   {"decode", 16, 1023, 1, 8, KVC_DTYPE_F32},
    {"decode", 64, 1023, 1, 8, KVC_DTYPE_F16},   {"decode", 16, 4095, 1, 8, KVC_DTYPE_F16},
    {"decode", 1, 16383, 1, 8, KVC_DTYPE_F16},   {"decode", 16, 1023, 1, 4, KVC_DTYPE_F16},
    {"decode", 16, 4095, 1, 4, KVC_DTYPE_F16},   {"decode", 16, 1023, 1, 8, KVC_DTYPE_BF16},
    {"decode", 16, 1023, 1, 8, KVC_DTYPE_FP8_E4M3},
    {"append", 4, 1024, 16, 8, KVC_DTYPE_F16},   {"append", 4, 1024, 128, 8, KVC_DTYPE_F16},
    {"prefill", 1, 0, 512, 8, KVC_DTYPE_F16},    {"prefill", 4, 0, 512, 8, KVC_DTYPE_F16},
    {"prefill", 1, 0, 2048, 8, KVC_DTYPE_F16},
};

void register_all() {
    std::vector<std::pair<int32_t, std::string>> isas;
#ifdef KVC_BENCH_ISAS
    for (int32_t i = 0; i < kvc::cpu::kIsaCount; ++i)
        if (kvc::cpu::isa_available(kvc::cpu::Isa(i))) isas.push_back({i, kvc::cpu::isa_name(kvc::cpu::Isa(i))});
#else
    isas.push_back({-1, "default"});
#endif
    for (const Shape &sh : kShapes) {
        const int64_t ctx = sh.cached + sh.q_len;
        // decode/BxCTX/dtype/gG, append/BxCACHED+NEW/..., prefill/BxLEN/...
        std::string name = std::string(sh.kind) + "/" + std::to_string(sh.batch) + "x" +
                           std::to_string(sh.q_len == 1 || sh.cached == 0 ? ctx : sh.cached);
        if (sh.q_len > 1 && sh.cached > 0) name += "+" + std::to_string(sh.q_len);
        name += std::string("/") + dtype_name(sh.dtype) + "/g" + std::to_string(32 / sh.kv_heads);
        for (const auto &isa : isas) {
            auto *b = benchmark::RegisterBenchmark((name + "/" + isa.second).c_str(), run_attention, &sh, isa.first);
            b->MeasureProcessCPUTime()->UseRealTime()->Unit(sh.q_len == 1 ? benchmark::kMicrosecond : benchmark::kMillisecond);
        }
        if (sh.q_len == 1) {
            const int64_t bytes = int64_t(sh.batch) * ctx * sh.kv_heads * 128 * 2 * (sh.dtype == KVC_DTYPE_F32 ? 4 : sh.dtype == KVC_DTYPE_FP8_E4M3 ? 1 : 2);
            for (bool pool : {false, true})
                benchmark::RegisterBenchmark((name + (pool ? "/memcpy_pool" : "/memcpy_1thread")).c_str(), run_memcpy, bytes, pool)
                    ->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMicrosecond);
            const std::pair<ReadSplit, const char *> splits[] = {{ReadSplit::one_thread, "/read_paged_1thread"},
                                                                 {ReadSplit::by_sequence, "/read_paged_pool"},
                                                                 {ReadSplit::by_head, "/read_paged_pool_by_head"}};
            for (const auto &sp : splits)
                benchmark::RegisterBenchmark((name + sp.second).c_str(), run_read_paged, &sh, sp.first)
                    ->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMicrosecond);
        }
    }
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        benchmark::RegisterBenchmark("fma_peak/8_lanes", run_fma_peak, 8)->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMillisecond);
    if (__builtin_cpu_supports("avx512f"))
        benchmark::RegisterBenchmark("fma_peak/16_lanes", run_fma_peak, 16)->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMillisecond);
#endif
}

}  // namespace

int main(int argc, char **argv) {
    register_all();
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
