// CPU kernel benchmarks: paged decode attention effective bandwidth (bytes of K/V/Q/O moved per
// second) next to a plain memcpy of the same number of bytes in the same run, and prefill
// throughput. Storage, tables and inputs are built once per benchmark; only the kernel is timed.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/dtype_convert.hpp"
#include "cpu/thread_pool.hpp"
#include "kernel_args.hpp"

namespace {

struct Setup {
    kvc::KvLayout layout;
    std::vector<uint64_t> storage;
    std::vector<int32_t> tables, seq_lens, qsl;
    std::vector<uint16_t> q, out;
    std::vector<float> workspace;
    int32_t width = 0, nqh = 0, q_len = 0;
    int64_t ctx = 0, kv_bytes = 0;

    Setup(int32_t batch, int64_t context, int32_t query_len, int32_t q_heads, int32_t kv_heads, int32_t d,
          int32_t block_size, int32_t dtype)
        : nqh(q_heads), q_len(query_len), ctx(context) {
        width = int32_t((context + block_size - 1) / block_size);
        layout.init(int64_t(batch) * width, block_size, 1, kv_heads, d, dtype);
        storage.assign(size_t(layout.total_bytes / 8 + 1), 0);
        std::mt19937 rng(1);
        // Random finite values of the dtype (small magnitudes).
        uint8_t *bytes = reinterpret_cast<uint8_t *>(storage.data());
        for (int64_t i = 0; i < layout.total_bytes / layout.elem_bytes; ++i) {
            float x = std::uniform_real_distribution<float>(-1.f, 1.f)(rng);
            if (dtype == KVC_DTYPE_F16) reinterpret_cast<uint16_t *>(bytes)[i] = kvc::cpu::float_to_half(x);
            else if (dtype == KVC_DTYPE_BF16) reinterpret_cast<uint16_t *>(bytes)[i] = kvc::cpu::float_to_bf16(x);
            else if (dtype == KVC_DTYPE_FP8_E4M3) bytes[i] = kvc::cpu::float_to_fp8_e4m3(x);
            else reinterpret_cast<float *>(bytes)[i] = x;
        }
        std::vector<int32_t> ids(size_t(layout.num_blocks));
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
        std::shuffle(ids.begin(), ids.end(), rng);  // non-contiguous tables, like a busy pool
        tables = ids;
        qsl.push_back(0);
        for (int32_t s = 0; s < batch; ++s) {
            seq_lens.push_back(int32_t(context));
            qsl.push_back(qsl.back() + query_len);
        }
        const size_t qn = size_t(batch) * size_t(query_len) * size_t(q_heads) * size_t(d);
        q.assign(qn, kvc::cpu::float_to_half(0.5f));
        for (auto &x : q) x = kvc::cpu::float_to_half(std::uniform_real_distribution<float>(-1.f, 1.f)(rng));
        out.assign(qn, 0);
        workspace.resize(kvc::cpu_attention_workspace_bytes(batch, q_heads, d, context) / 4);
        kv_bytes = int64_t(batch) * context * kv_heads * d * layout.elem_bytes * 2;
    }

    kvc::AttentionArgs args(int32_t partition_size) {
        kvc::AttentionArgs a;
        a.layout = layout;
        a.base = storage.data();
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

// Decode of batch x context (st.range(0), st.range(1)), 32 query heads, d = 128: bytes moved per second.
void run_decode(benchmark::State &st, int32_t kv_heads, int32_t block_size, int32_t dtype) {
    Setup s(int32_t(st.range(0)), st.range(1), 1, 32, kv_heads, 128, block_size, dtype);
    kvc::AttentionArgs a = s.args(0);
    for (auto _ : st) {
        kvc::cpu_attention(a);
        benchmark::ClobberMemory();
    }
    st.SetBytesProcessed(int64_t(st.iterations()) * (s.kv_bytes + s.qo_bytes()));
    st.counters["threads"] = kvc::cpu::parallel_width();
}

// Args: batch, context, block size, kv dtype.
void BM_DecodeAttention(benchmark::State &st) { run_decode(st, 8, int32_t(st.range(2)), int32_t(st.range(3))); }

// Decode with a GQA group of 8 (32 q / 4 kv heads; args: batch, context): a vector of rows, so the
// AVX2 kernel takes its rows-in-lanes path, where group 4 (above) takes the row-at-a-time one.
void BM_DecodeAttentionGroup8(benchmark::State &st) { run_decode(st, 4, 16, KVC_DTYPE_F16); }

// A plain memcpy of the decode benchmark's byte count (f16, B x ctx x 8 kv heads x 128 x 2),
// in the same run: the machine's copy bandwidth at that size.
void BM_MemcpySameBytes(benchmark::State &st) {
    const size_t bytes = size_t(st.range(0)) * size_t(st.range(1)) * 8 * 128 * 2 * 2;
    std::vector<uint8_t> src(bytes, 1), dst(bytes, 0);
    for (auto _ : st) {
        std::memcpy(dst.data(), src.data(), bytes);
        benchmark::ClobberMemory();
    }
    st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(bytes));
}

// Prefill: batch sequences whose whole context (args: batch, prompt length) is new, causal.
void BM_PrefillAttention(benchmark::State &st) {
    const int32_t batch = int32_t(st.range(0));
    const int64_t len = st.range(1);
    Setup s(batch, len, int32_t(len), 32, 8, 128, 16, KVC_DTYPE_F16);
    kvc::AttentionArgs a = s.args(-1);
    for (auto _ : st) {
        kvc::cpu_attention(a);
        benchmark::ClobberMemory();
    }
    // Causal: ~len^2/2 (q, k) pairs per head, 2 matmuls of 2*d flops each.
    const double flops = double(batch) * 32 * (double(len) * double(len + 1) / 2) * 128 * 4;
    st.counters["tokens/s"] = benchmark::Counter(double(batch) * double(len) * double(st.iterations()),
                                                 benchmark::Counter::kIsRate);
    st.counters["GFLOP/s"] = benchmark::Counter(flops * double(st.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK(BM_DecodeAttention)
    ->Args({16, 1024, 16, KVC_DTYPE_F16})
    ->Args({16, 1024, 1, KVC_DTYPE_F16})
    ->Args({16, 1024, 256, KVC_DTYPE_F16})
    ->Args({16, 1024, 16, KVC_DTYPE_BF16})
    ->Args({16, 1024, 16, KVC_DTYPE_F32})
    ->Args({16, 1024, 16, KVC_DTYPE_FP8_E4M3})
    ->Args({1, 16384, 16, KVC_DTYPE_F16})
    ->MeasureProcessCPUTime()->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeAttentionGroup8)->Args({16, 1024})->Args({16, 4096})->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MemcpySameBytes)->Args({16, 1024})->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PrefillAttention)->Args({1, 512})->Args({4, 512})->Args({1, 2048})->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
