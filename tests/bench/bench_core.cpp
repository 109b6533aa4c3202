// Host-core costs: per-block alloc / append / fork / free, a 256-sequence decode step, prefix
// lookup per block (hash + verify), and alloc with cache hits per block (each also with a window);
// lookups through blocks cached several times (copies) and allocs that enter a copy.
// Run: bench_core --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// "ns/block" (or "ns/step") is the figure to read; goals: <= 50 ns per block op, <= 10 us per
// 256-sequence decode step, lookup <= 100 ns per block.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kvc/kvc.h"

namespace {

constexpr int32_t kBlockSize = 16;

void check(kvc_status st, const char *what) {
    if (st != KVC_OK) {
        std::fprintf(stderr, "%s failed: %s\n", what, kvc_last_error());
        std::abort();
    }
}

kvc_pool *make_pool(int64_t blocks, int caching) {
    kvc_pool_config c;
    check(kvc_pool_config_default(&c), "config");
    c.block_size = kBlockSize;
    c.num_blocks = blocks;
    c.prefix_caching = caching;
    c.event_capacity = 0;  // routers drain events; here nobody does
    c.watermark = 0.0;
    kvc_pool *p = nullptr;
    check(kvc_pool_create(&c, &p), "pool_create");
    return p;
}

// Distinct token ids per sequence so that nothing hits the cache unless intended.
std::vector<int32_t> tokens_for(uint64_t seq, int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) t[size_t(i)] = int32_t(seq * 100003 + uint64_t(i)) & 0x7fffffff;
    return t;
}

// Adds "ns/block": timed seconds / blocks handled (printed in ns).
void per_block(benchmark::State &state, int64_t blocks_per_iter) {
    state.counters["ns/block"] = benchmark::Counter(double(state.iterations() * blocks_per_iter) * 1e-9,
                                                    benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

constexpr int kSeqs = 64;         // sequences per timed batch
constexpr int64_t kBlocksPerSeq = 32;

// kvc_alloc of 64 prompts of 32 blocks (fresh blocks only); frees are untimed.
// Args: prefix caching off/on; sliding window (0 = none; 256: every prompt is first searched for a
// window-aware hit, which hashes all of its blocks and finds none).
void BM_Alloc(benchmark::State &state) {
    const int caching = int(state.range(0));
    kvc_pool *p = make_pool(kSeqs * kBlocksPerSeq + 16, caching);
    check(kvc_pool_set_sliding_window(p, int32_t(state.range(1))), "set_sliding_window");
    std::vector<std::vector<int32_t>> prompts;
    for (int s = 0; s < kSeqs; ++s) prompts.push_back(tokens_for(uint64_t(s), kBlocksPerSeq * kBlockSize));
    for (auto _ : state) {
        for (int s = 0; s < kSeqs; ++s)
            check(kvc_alloc(p, uint64_t(s), prompts[size_t(s)].data(), kBlocksPerSeq * kBlockSize, nullptr, nullptr), "alloc");
        state.PauseTiming();
        for (int s = 0; s < kSeqs; ++s) check(kvc_free(p, uint64_t(s)), "free");
        if (caching) check(kvc_prefix_cache_reset(p), "reset");  // keep measuring fresh blocks
        state.ResumeTiming();
    }
    per_block(state, kSeqs * kBlocksPerSeq);
    kvc_pool_destroy(p);
}

// kvc_free of 64 sequences of 32 blocks; allocs are untimed.
void BM_Free(benchmark::State &state) {
    const int caching = int(state.range(0));
    kvc_pool *p = make_pool(kSeqs * kBlocksPerSeq + 16, caching);
    std::vector<std::vector<int32_t>> prompts;
    for (int s = 0; s < kSeqs; ++s) prompts.push_back(tokens_for(uint64_t(s), kBlocksPerSeq * kBlockSize));
    for (auto _ : state) {
        state.PauseTiming();
        if (caching) check(kvc_prefix_cache_reset(p), "reset");
        for (int s = 0; s < kSeqs; ++s)
            check(kvc_alloc(p, uint64_t(s), prompts[size_t(s)].data(), kBlocksPerSeq * kBlockSize, nullptr, nullptr), "alloc");
        state.ResumeTiming();
        for (int s = 0; s < kSeqs; ++s) check(kvc_free(p, uint64_t(s)), "free");
    }
    per_block(state, kSeqs * kBlocksPerSeq);
    kvc_pool_destroy(p);
}

// kvc_append of one block's worth of tokens (one new block per call), 64 sequences x 32 calls.
void BM_AppendBlock(benchmark::State &state) {
    const int caching = int(state.range(0));
    kvc_pool *p = make_pool(kSeqs * (kBlocksPerSeq + 1) + 16, caching);
    std::vector<int32_t> chunk = tokens_for(999, kBlockSize);
    for (auto _ : state) {
        state.PauseTiming();
        if (caching) check(kvc_prefix_cache_reset(p), "reset");
        for (int s = 0; s < kSeqs; ++s) {
            int32_t first = int32_t(s);
            check(kvc_alloc(p, uint64_t(s), &first, 1, nullptr, nullptr), "alloc");
        }
        state.ResumeTiming();
        for (int64_t b = 0; b < kBlocksPerSeq; ++b)
            for (int s = 0; s < kSeqs; ++s) check(kvc_append(p, uint64_t(s), chunk.data(), kBlockSize, 0, nullptr), "append");
        state.PauseTiming();
        for (int s = 0; s < kSeqs; ++s) check(kvc_free(p, uint64_t(s)), "free");
        state.ResumeTiming();
    }
    per_block(state, kSeqs * kBlocksPerSeq);
    kvc_pool_destroy(p);
}

// kvc_fork of a 32-block parent into 64 children (refcount + 1 per block); frees untimed.
void BM_Fork(benchmark::State &state) {
    const int caching = int(state.range(0));
    kvc_pool *p = make_pool(kBlocksPerSeq + 16, caching);
    std::vector<int32_t> prompt = tokens_for(1, kBlocksPerSeq * kBlockSize - 3);
    check(kvc_alloc(p, 1000, prompt.data(), int64_t(prompt.size()), nullptr, nullptr), "alloc");
    for (auto _ : state) {
        for (int s = 0; s < kSeqs; ++s) check(kvc_fork(p, 1000, uint64_t(s)), "fork");
        state.PauseTiming();
        for (int s = 0; s < kSeqs; ++s) check(kvc_free(p, uint64_t(s)), "free");
        state.ResumeTiming();
    }
    per_block(state, kSeqs * kBlocksPerSeq);
    kvc_pool_destroy(p);
}

// One decode step: append 1 token to each of 256 running sequences (context ~512-1500 tokens);
// a new block is taken by 1 in 16 appends, and with caching the filled block is hashed.
// With window > 0 the pool has a sliding window of that many tokens: every append also checks what
// the window releases (and 1 in 16 releases a block), the cost kvc_pool_set_sliding_window adds.
// batch: the step is one kvc_append_batch call (a server's decode step) instead of 256 kvc_append calls.
void decode_step_256(benchmark::State &state, int32_t window, bool batch = false) {
    const int caching = int(state.range(0));
    constexpr int kRunning = 256;
    constexpr int64_t kPrompt = 512;
    constexpr int kStepsPerRound = 1024;
    kvc_pool *p = make_pool(kRunning * ((kPrompt + kStepsPerRound) / kBlockSize + 2), caching);
    if (window > 0) check(kvc_pool_set_sliding_window(p, window), "window");
    auto start_round = [&] {
        if (caching) check(kvc_prefix_cache_reset(p), "reset");
        for (int s = 0; s < kRunning; ++s) {
            std::vector<int32_t> t = tokens_for(uint64_t(s), kPrompt);
            check(kvc_alloc(p, uint64_t(s), t.data(), kPrompt, nullptr, nullptr), "alloc");
        }
    };
    start_round();
    int step = 0;
    int32_t tok = 7;
    std::vector<uint64_t> ids(kRunning);
    std::vector<int32_t> toks(kRunning);
    for (int s = 0; s < kRunning; ++s) ids[size_t(s)] = uint64_t(s);
    for (auto _ : state) {
        if (batch) {
            for (int s = 0; s < kRunning; ++s) toks[size_t(s)] = ++tok;
            check(kvc_append_batch(p, kRunning, ids.data(), nullptr, toks.data(), 0, nullptr, nullptr, nullptr),
                  "append_batch");
        } else {
            for (int s = 0; s < kRunning; ++s) {
                ++tok;
                check(kvc_append(p, uint64_t(s), &tok, 1, 0, nullptr), "append");
            }
        }
        if (++step == kStepsPerRound) {
            state.PauseTiming();
            for (int s = 0; s < kRunning; ++s) check(kvc_free(p, uint64_t(s)), "free");
            start_round();
            step = 0;
            state.ResumeTiming();
        }
    }
    state.counters["ns/seq"] = benchmark::Counter(double(state.iterations() * kRunning) * 1e-9,
                                                  benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    kvc_pool_destroy(p);
}

void BM_DecodeStep256(benchmark::State &state) { decode_step_256(state, 0); }
void BM_DecodeStep256Window(benchmark::State &state) { decode_step_256(state, 256); }
void BM_DecodeStep256Batch(benchmark::State &state) { decode_step_256(state, 0, true); }

// kvc_prefix_lookup of a 64-block prompt (+1 token) in a pool whose cache also holds 60 other
// 64-block prompts (so the map is not trivially small). cached_too: the prompt itself is cached
// (every block hits: hash + map probe + token verify per block) or not (a miss). window: the
// pool's sliding window (0 = none: the leading walk; 256 = the window-aware search, which hashes
// all 64 blocks and on a hit probes only the last 17, those the window needs). ns/block divides
// by 64 either way.
void prefix_lookup(benchmark::State &state, bool cached_too) {
    constexpr int64_t kBlocks = 64;
    kvc_pool *p = make_pool(4096, 1);
    check(kvc_pool_set_sliding_window(p, int32_t(state.range(0))), "set_sliding_window");
    for (uint64_t s = 0; s < 60; ++s) {
        std::vector<int32_t> t = tokens_for(s + 10, kBlocks * kBlockSize);
        check(kvc_alloc(p, s + 10, t.data(), int64_t(t.size()), nullptr, nullptr), "alloc");
    }
    std::vector<int32_t> prompt = tokens_for(1, kBlocks * kBlockSize + 1);
    if (cached_too) check(kvc_alloc(p, 1, prompt.data(), int64_t(prompt.size()), nullptr, nullptr), "alloc");
    int64_t cached = 0;
    for (auto _ : state) {
        check(kvc_prefix_lookup(p, prompt.data(), int64_t(prompt.size()), nullptr, &cached), "lookup");
        benchmark::DoNotOptimize(cached);
    }
    if (cached != (cached_too ? kBlocks * kBlockSize : 0)) state.SkipWithError("unexpected hit length");
    per_block(state, kBlocks);
    kvc_pool_destroy(p);
}

// A hit, and a miss: without a window the walk stops at block 0; the window-aware search must
// hash every block and probe each once before it knows there is no hit.
void BM_PrefixLookup(benchmark::State &state) { prefix_lookup(state, true); }
void BM_PrefixLookupMiss(benchmark::State &state) { prefix_lookup(state, false); }

// Shared by BM_AllocWithHits and BM_AllocRerun: the prompt is allocated once (sequence 1000, held
// throughout, so its blocks stay cached), then each timed batch allocates it 16 times (frees
// untimed); every alloc must report want_cached tokens. ns/block divides by blocks_per_alloc.
void time_allocs_of_cached_prompt(benchmark::State &state, kvc_pool *p, const std::vector<int32_t> &prompt,
                                  int64_t want_cached, int64_t blocks_per_alloc, const char *miss) {
    constexpr int kAllocs = 16;
    check(kvc_alloc(p, 1000, prompt.data(), int64_t(prompt.size()), nullptr, nullptr), "alloc");
    int64_t cached = 0;
    for (auto _ : state) {
        for (int s = 0; s < kAllocs; ++s)
            check(kvc_alloc(p, uint64_t(s), prompt.data(), int64_t(prompt.size()), nullptr, &cached), "alloc");
        state.PauseTiming();
        for (int s = 0; s < kAllocs; ++s) check(kvc_free(p, uint64_t(s)), "free");
        state.ResumeTiming();
    }
    if (cached != want_cached) state.SkipWithError(miss);
    per_block(state, kAllocs * blocks_per_alloc);
}

// kvc_alloc of a prompt whose 64 full blocks are all cached (refcount + 1 each, one fresh block):
// 16 such allocs per timed batch, frees untimed. Arg: sliding window as in BM_PrefixLookup (with
// 256, each alloc takes 17 hit blocks and leaves 47 entries released; ns/block still divides by 65).
void BM_AllocWithHits(benchmark::State &state) {
    constexpr int64_t kBlocks = 64;
    kvc_pool *p = make_pool(4096, 1);
    check(kvc_pool_set_sliding_window(p, int32_t(state.range(0))), "set_sliding_window");
    time_allocs_of_cached_prompt(state, p, tokens_for(1, kBlocks * kBlockSize + 1), kBlocks * kBlockSize, kBlocks + 1,
                                 "alloc did not hit every block");
    kvc_pool_destroy(p);
}
// kvc_prefix_lookup of a 64-block prompt (+1 token) each of whose blocks is cached `copies` times
// (Arg), every copy free: `copies` sequences each allocated the prompt's first token and appended
// the rest, so each block they filled was entered as another copy of the same hash (before the
// duplicate-block change only the first sequence's blocks were cached, so this was BM_PrefixLookup
// on a smaller map). The worst case for choosing a copy: none is in use, so a hit looks at the
// newest kPickScan (8) before it takes the newest. ns/block divides by 64.
void BM_PrefixLookupCopies(benchmark::State &state) {
    constexpr int64_t kBlocks = 64;
    const int copies = int(state.range(0));
    kvc_pool *p = make_pool(4096, 1);
    std::vector<int32_t> prompt = tokens_for(1, kBlocks * kBlockSize + 1);
    for (int c = 0; c < copies; ++c) {
        check(kvc_alloc(p, uint64_t(c), prompt.data(), 1, nullptr, nullptr), "alloc");
        check(kvc_append(p, uint64_t(c), prompt.data() + 1, kBlocks * kBlockSize, 0, nullptr), "append");
    }
    for (int c = 0; c < copies; ++c) check(kvc_free(p, uint64_t(c)), "free");
    int64_t cached = 0;
    for (auto _ : state) {
        check(kvc_prefix_lookup(p, prompt.data(), int64_t(prompt.size()), nullptr, &cached), "lookup");
        benchmark::DoNotOptimize(cached);
    }
    if (cached != kBlocks * kBlockSize) state.SkipWithError("unexpected hit length");
    per_block(state, kBlocks);
    kvc_pool_destroy(p);
}

// kvc_alloc of a block-aligned 64-block prompt whose blocks are cached (held by another sequence):
// 63 hit, and the last one is computed again (the last-token rule) -- since the duplicate-block
// change it is entered as another copy of the cached last block (one verify of its 16 token ids
// and a chain link), where before it stayed uncached. 16 allocs per timed batch, frees untimed;
// the free copies pile up in the LRU list until the unhashed blocks run out, and are then evicted
// oldest first (each a copy erased from the middle of a long chain). ns/block divides by 64.
void BM_AllocRerun(benchmark::State &state) {
    constexpr int64_t kBlocks = 64;
    kvc_pool *p = make_pool(4096, 1);
    time_allocs_of_cached_prompt(state, p, tokens_for(1, kBlocks * kBlockSize), (kBlocks - 1) * kBlockSize, kBlocks,
                                 "alloc did not hit 63 blocks");
    kvc_pool_destroy(p);
}
}  // namespace

// With --benchmark_repetitions, also report the fastest repetition: on a shared, busy machine the
// minimum is the least disturbed figure (the median is what RESULTS.md records).
double min_of(const std::vector<double> &v) {
    double m = v.empty() ? 0.0 : v[0];
    for (double x : v) m = x < m ? x : m;
    return m;
}
#define KVC_BENCH(fn) BENCHMARK(fn)->ComputeStatistics("min", min_of)

// Arg: prefix caching off (0) / on (1).
KVC_BENCH(BM_Alloc)->Args({0, 0})->Args({1, 0})->Args({1, 256});
KVC_BENCH(BM_Free)->Arg(0)->Arg(1);
KVC_BENCH(BM_AppendBlock)->Arg(0)->Arg(1);
KVC_BENCH(BM_Fork)->Arg(0)->Arg(1);
KVC_BENCH(BM_DecodeStep256)->Arg(0)->Arg(1);
KVC_BENCH(BM_DecodeStep256Window)->Arg(0)->Arg(1);
KVC_BENCH(BM_DecodeStep256Batch)->Arg(0)->Arg(1);
// Arg: sliding window 0 (none) / 256 tokens.
KVC_BENCH(BM_PrefixLookup)->Arg(0)->Arg(256);
KVC_BENCH(BM_PrefixLookupMiss)->Arg(0)->Arg(256);
KVC_BENCH(BM_AllocWithHits)->Arg(0)->Arg(256);
KVC_BENCH(BM_PrefixLookupCopies)->Arg(4)->Arg(16);
KVC_BENCH(BM_AllocRerun);

BENCHMARK_MAIN();
