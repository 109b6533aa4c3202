// GPU kernels (cuda/) against the CPU backend (lib/cpu/, the oracle): cache write and copy blocks
// bit-exact, paged attention (decode single-pass and split-K, prefill/append) within atol 1e-3
// (fp8 KV 1e-2) plus one ulp of the output dtype (both backends round the same fp32 result).
// Without a usable GPU every test reports SKIPPED. The file needs no CUDA headers: it drives the
// backend through lib/storage/cuda_api.hpp, whose no-CUDA implementation reports zero devices.
extern "C" {
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
}

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "storage/cuda_api.hpp"
#include "gpu/gpu_problem.hpp"
#include "test_kernels_fixture.hpp"

using kvc_gpu_test::DeviceBuffer;
using kvc_gpu_test::upload_vector;

namespace {

#define REQUIRE_GPU() KVC_REQUIRE_GPU("CUDA")


// KVC_GPU_TEST_QUICK=1 (the CPU emulator, cuda/emulation/) shrinks contexts and prompts.
bool quick_mode() {
    static const bool quick = std::getenv("KVC_GPU_TEST_QUICK") != nullptr;
    return quick;
}
int64_t len(int64_t n) { return quick_mode() ? std::max<int64_t>(1, n / 10) : n; }

// A subset of the attention cases, for compute-sanitizer (tests/gpu/quick_check.sh), which slows
// kernels down 10-100x: KVC_GPU_TEST_STRIDE=k runs every k-th case of the run (a spread over every
// grid), KVC_GPU_TEST_MAX_CASES=n at most n cases in all (racecheck on one case, with
// KVC_GPU_TEST_FILTER naming one test). Cases left out are counted and printed at the end, so a
// subset run never reads as the whole grid.
long env_long(const char *name, long fallback) {
    const char *v = std::getenv(name);
    return v && *v ? std::strtol(v, nullptr, 10) : fallback;
}
long g_cases_run = 0, g_cases_left_out = 0;
bool case_selected() {
    static const long stride = std::max(1L, env_long("KVC_GPU_TEST_STRIDE", 1));
    static const long max_cases = env_long("KVC_GPU_TEST_MAX_CASES", -1);
    static long seen = 0;
    const long index = seen++;
    if (index % stride != 0 || (max_cases >= 0 && g_cases_run >= max_cases)) {
        ++g_cases_left_out;
        return false;
    }
    ++g_cases_run;
    return true;
}

const char *dtype_name(int32_t dt) {
    switch (dt) {
        case KVC_DTYPE_F32: return "f32";
        case KVC_DTYPE_F16: return "f16";
        case KVC_DTYPE_BF16: return "bf16";
        default: return "fp8";
    }
}

// ---- attention ---------------------------------------------------------------------------------

// The fixture's host problem uploaded to the device, and run.
struct GpuRun : kvc_gpu_test::GpuProblem {
    using GpuProblem::GpuProblem;

    // Runs the GPU kernel and returns its output decoded to float.
    std::vector<float> run(int32_t partition_size, size_t workspace_bytes = SIZE_MAX) {
        // Poison the output so rows the kernel forgets to write cannot pass by accident.
        std::vector<uint8_t> poison(out_bytes(), 0xff);
        if (!poison.empty()) ASSERT_OK(out.upload(poison.data(), poison.size()));
        ASSERT_OK(kvc::cuda::attention(args(partition_size, workspace_bytes), nullptr));
        ASSERT_OK(kvc::cuda::stream_sync(nullptr));
        std::vector<uint8_t> raw(out_bytes());
        if (!raw.empty()) ASSERT_OK(out.download(raw.data(), raw.size()));
        std::vector<float> f(raw.size() / size_t(kvc_ref::dtype_size(host->spec.q_dtype)));
        for (size_t i = 0; i < f.size(); ++i) f[i] = kvc_ref::decode(raw.data(), int64_t(i), host->spec.q_dtype);
        return f;
    }
};

// One ulp (relative) of the output dtype: both backends round their fp32 result to it.
double output_ulp(int32_t dt) {
    switch (dt) {
        case KVC_DTYPE_F16: return std::ldexp(1.0, -10);
        case KVC_DTYPE_BF16: return std::ldexp(1.0, -7);
        default: return 0.0;
    }
}

void expect_close(const std::vector<float> &gpu, const std::vector<float> &cpu, const kvc_test::CaseSpec &s,
                  const char *what) {
    assert_int_equal(gpu.size(), cpu.size());
    const double atol = s.kv_dtype == KVC_DTYPE_FP8_E4M3 ? 1e-2 : 1e-3;
    const double rel = output_ulp(s.q_dtype);
    for (size_t i = 0; i < gpu.size(); ++i) {
        const double g = gpu[i], c = cpu[i];
        if (!std::isfinite(g) || std::fabs(g - c) > atol + rel * std::fabs(c)) {
            const size_t d = size_t(s.head_dim), h = size_t(s.num_q_heads);
            fail_msg("%s: bs=%d d=%d heads=%d/%d kv=%s q=%s window=%d softcap=%g alibi=%d: token %zu head %zu "
                     "dim %zu: gpu %.6f cpu %.6f",
                     what, s.block_size, s.head_dim, s.num_q_heads, s.num_kv_heads, dtype_name(s.kv_dtype),
                     dtype_name(s.q_dtype), s.sliding_window, double(s.softcap), int(s.alibi), i / (d * h),
                     (i / d) % h, i % d, g, c);
        }
    }
}

// Builds the case, runs the CPU oracle once (single pass) and the GPU with each partition size.
void check_case(const kvc_test::CaseSpec &spec, std::initializer_list<int32_t> partitions, const char *what,
                size_t workspace_bytes = SIZE_MAX) {
    if (!case_selected()) return;
    if (quick_mode())  // the emulator is slow: show where it is
        print_message("%s: bs=%d d=%d heads=%d/%d kv=%s q=%s seqs=%zu\n", what, spec.block_size, spec.head_dim,
                      spec.num_q_heads, spec.num_kv_heads, dtype_name(spec.kv_dtype), dtype_name(spec.q_dtype),
                      spec.seqs.size());
    kvc_test::PagedProblem P = kvc_test::make_problem(spec);
    kvc_status st = KVC_OK;
    const std::vector<float> ref = P.run_cpu(-1, &st);
    assert_int_equal(st, KVC_OK);
    GpuRun G(P);
    for (int32_t part : partitions) expect_close(G.run(part, workspace_bytes), ref, spec, what);
}

const int32_t kBlockSizes[] = {1, 8, 16, 32, 64, 128, 256};
const int32_t kHeadDims[] = {64, 80, 96, 128, 256};
const int32_t kHeads[][2] = {{8, 8}, {32, 8}, {32, 4}, {64, 8}};
const int32_t kKvDtypes[] = {KVC_DTYPE_F16, KVC_DTYPE_BF16, KVC_DTYPE_F32, KVC_DTYPE_FP8_E4M3};
const int32_t kQDtypes[] = {KVC_DTYPE_F16, KVC_DTYPE_BF16, KVC_DTYPE_F32};

// Every block size x head dim x head layout; dtypes rotate through the grid so each KV dtype meets
// every block size and head dim; every case runs single-pass, auto and forced split-K.
void test_decode_grid(void **) {
    REQUIRE_GPU();
    std::mt19937 rng(42);
    int n = 0;
    for (int32_t bs : kBlockSizes)
        for (int32_t d : kHeadDims)
            for (const auto &h : kHeads) {
                kvc_test::CaseSpec s;
                s.block_size = bs;
                s.head_dim = d;
                s.num_q_heads = h[0];
                s.num_kv_heads = h[1];
                s.kv_dtype = kKvDtypes[n % 4];
                s.q_dtype = kQDtypes[(n / 4) % 3];
                if (s.kv_dtype == KVC_DTYPE_FP8_E4M3) { s.k_scale = 0.5f; s.v_scale = 2.0f; }
                s.seed = uint32_t(1000 + n);
                std::uniform_int_distribution<int64_t> ctx(1, len(bs == 1 ? 700 : 2500));
                for (int i = 0; i < 3; ++i) s.seqs.push_back({ctx(rng), 1});
                s.seqs.push_back({1, 1});  // a one-token context
                check_case(s, {-1, 0, 64}, "decode grid");
                ++n;
            }
}

// Every KV dtype x q dtype at two shapes, incl. fp8 scales.
void test_dtype_matrix(void **) {
    REQUIRE_GPU();
    int n = 0;
    for (int32_t kv : kKvDtypes)
        for (int32_t qd : kQDtypes)
            for (int shape = 0; shape < 2; ++shape) {
                kvc_test::CaseSpec s;
                s.block_size = shape ? 16 : 7;  // 7: a block size no kernel special-cases
                s.head_dim = shape ? 128 : 80;
                s.num_q_heads = 32;
                s.num_kv_heads = shape ? 8 : 4;
                s.kv_dtype = kv;
                s.q_dtype = qd;
                if (kv == KVC_DTYPE_FP8_E4M3) { s.k_scale = 0.25f; s.v_scale = 1.5f; }
                s.seed = uint32_t(77 + n++);
                s.seqs = {{len(1234), 1}, {17, 1}, {len(900), 1}};
                check_case(s, {-1, 128}, "dtype matrix");
                s.seqs = {{len(700), len(700)}, {len(300), 41}, {65, 1}};
                check_case(s, {-1}, "dtype matrix prefill");
            }
}

// Split-K vs single pass on long contexts: auto, explicit sizes (incl. not a multiple of any tile),
// and a workspace too small for the requested partitions (the kernel must grow partitions).
void test_split_k(void **) {
    REQUIRE_GPU();
    kvc_test::CaseSpec s;
    s.block_size = 16;
    s.head_dim = 128;
    s.num_q_heads = 32;
    s.num_kv_heads = 8;
    s.seqs = {{len(6000), 1}, {len(4096), 1}, {33, 1}, {1, 1}};
    check_case(s, {-1, 0, 16, 100, 512, 4096, 100000}, "split-K");
    // Room for only 3 partitions of one sequence: fewer, larger partitions.
    const size_t small = size_t(3) * 32 * (128 + 2) * 4 * 4;
    check_case(s, {0, 16}, "split-K small workspace", small);
    check_case(s, {16}, "split-K no workspace", 0);
    s.num_q_heads = 8;  // one sequence, few CTAs: auto must split
    s.num_kv_heads = 1;
    s.seqs = {{len(20000), 1}};
    check_case(s, {0, -1}, "split-K single sequence");
}

// Sliding window, logit soft-cap and ALiBi, alone and together, decode (split and not) and prefill.
void test_window_softcap_alibi(void **) {
    REQUIRE_GPU();
    for (int variant = 0; variant < 8; ++variant) {
        kvc_test::CaseSpec s;
        s.block_size = variant % 2 ? 16 : 5;
        s.head_dim = variant % 3 == 0 ? 64 : 128;
        s.num_q_heads = 32;
        s.num_kv_heads = 8;
        s.q_dtype = variant % 2 ? KVC_DTYPE_BF16 : KVC_DTYPE_F16;
        s.sliding_window = (variant & 1) ? 300 : 0;
        s.softcap = (variant & 2) ? 5.0f : 0.0f;
        s.alibi = (variant & 4) != 0;
        if (variant == 0) s.sliding_window = 1;  // only the token itself
        s.scale_mult = 4.0f;  // sharp logits so the cap and the window matter
        s.seed = uint32_t(500 + variant);
        s.seqs = {{len(3000), 1}, {250, 1}, {len(1700), 1}};
        check_case(s, {-1, 0, 128}, "features decode");
        s.seqs = {{len(1000) + 200, 200}, {len(310), len(310)}, {40, 3}};
        check_case(s, {-1}, "features prefill");
    }
}

// Prefill / append: queries at the end of each context (causal), cached prefix in shuffled blocks,
// varlen batch mixing prompt-from-scratch, chunked-prefill chunks and single decode tokens.
void test_prefill_grid(void **) {
    REQUIRE_GPU();
    std::mt19937 rng(7);
    int n = 0;
    for (int32_t bs : kBlockSizes)
        for (int32_t d : kHeadDims) {
            const auto &h = kHeads[n % 4];
            kvc_test::CaseSpec s;
            s.block_size = bs;
            s.head_dim = d;
            s.num_q_heads = h[0];
            s.num_kv_heads = h[1];
            s.kv_dtype = kKvDtypes[(n / 4) % 4];
            s.q_dtype = kQDtypes[n % 3];
            if (s.kv_dtype == KVC_DTYPE_FP8_E4M3) { s.k_scale = 2.0f; s.v_scale = 0.5f; }
            s.seed = uint32_t(3000 + n);
            std::uniform_int_distribution<int64_t> prefix(0, len(900)), qlen(1, 150);
            for (int i = 0; i < 3; ++i) {
                const int64_t q = qlen(rng);
                s.seqs.push_back({prefix(rng) + q, q});
            }
            s.seqs.push_back({1, 1});
            check_case(s, {-1}, "prefill grid");
            ++n;
        }
}

// bf16 q over an fp8 cache with every feature on (window, soft-cap, ALiBi, a large scale): the
// tensor-core paths' widening and epilogue under the options that change the scores.
kvc_test::CaseSpec fp8_features_case(int32_t head_dim, int32_t q_heads, int32_t kv_heads, float k_scale, float v_scale,
                                     int32_t window, uint32_t seed) {
    kvc_test::CaseSpec s;
    s.block_size = 16;
    s.head_dim = head_dim;
    s.num_q_heads = q_heads;
    s.num_kv_heads = kv_heads;
    s.q_dtype = KVC_DTYPE_BF16;
    s.kv_dtype = KVC_DTYPE_FP8_E4M3;
    s.k_scale = k_scale;
    s.v_scale = v_scale;
    s.sliding_window = window;
    s.softcap = 5.0f;
    s.alibi = true;
    s.scale_mult = 4.0f;
    s.seed = seed;
    return s;
}

// The tensor-core prefill's dtype pairs (q f16/bf16 x KV same or FP8 with scales) at the head dims
// the grids above reach rarely for them: 64 (the smallest tile) and 256 (32-key tiles, 128
// accumulator registers); GQA so rows span several heads; one FP8 case with every feature on.
void test_prefill_tensor_core_dtypes(void **) {
    REQUIRE_GPU();
    int n = 0;
    for (int32_t d : {64, 256})
        for (int32_t qd : {KVC_DTYPE_F16, KVC_DTYPE_BF16})
            for (bool fp8 : {false, true}) {
                kvc_test::CaseSpec s;
                s.block_size = n % 2 ? 16 : 3;
                s.head_dim = d;
                s.num_q_heads = 8;
                s.num_kv_heads = 2;
                s.q_dtype = qd;
                s.kv_dtype = fp8 ? KVC_DTYPE_FP8_E4M3 : qd;
                if (fp8) { s.k_scale = 0.75f; s.v_scale = 3.0f; }
                s.seed = uint32_t(9100 + n++);
                s.seqs = {{len(400) + 37, 37}, {21, 21}, {9, 1}};
                check_case(s, {-1}, "tensor-core prefill");
            }
    kvc_test::CaseSpec s = fp8_features_case(96, 8, 4, 1.5f, 0.25f, 50, 9200);
    s.seqs = {{len(500) + 70, 70}, {33, 33}};
    check_case(s, {-1}, "tensor-core prefill fp8 features");
}

// Blocks shared after a fork (the same physical block in several tables) and a large GQA group
// that needs several head chunks per KV head (64 query heads on 1 KV head).
void test_shared_blocks_and_large_groups(void **) {
    REQUIRE_GPU();
    kvc_test::CaseSpec s;
    s.block_size = 16;
    s.head_dim = 128;
    s.num_q_heads = 32;
    s.num_kv_heads = 8;
    s.fork_shared_blocks = 20;
    s.seqs = {{len(800) + 320, 1}, {len(700) + 320, 1}, {len(900) + 320, 1}, {len(600) + 320, 33}};
    check_case(s, {-1, 0, 64}, "forked tables");
    for (int32_t d : kHeadDims) {
        kvc_test::CaseSpec g;
        g.block_size = 32;
        g.head_dim = d;
        g.num_q_heads = 64;
        g.num_kv_heads = 1;
        g.seqs = {{len(1500), 1}, {90, 1}};
        check_case(g, {-1, 0, 256}, "large group decode");
        g.seqs = {{len(400) + 77, 77}, {90, 90}};
        check_case(g, {-1}, "large group prefill");
    }
}

// GQA groups that are not a power of two (3, 5, 6, 12, 24 query heads per KV head): the decode
// kernel rounds its rows per CTA up to 4, 8 or 16 and must neither let the padding rows disturb the
// real ones nor store them; f16 q (tensor-core scores from 4 rows) and f32 q (CUDA-core scores).
void test_decode_odd_groups(void **) {
    REQUIRE_GPU();
    const int32_t heads[][2] = {{12, 4}, {20, 4}, {24, 4}, {48, 4}, {24, 1}};
    int n = 0;
    for (const auto &h : heads)
        for (int32_t qd : {KVC_DTYPE_F16, KVC_DTYPE_F32}) {
            kvc_test::CaseSpec s;
            s.block_size = n % 3 ? 16 : 5;
            s.head_dim = n % 2 ? 64 : 128;
            s.num_q_heads = h[0];
            s.num_kv_heads = h[1];
            s.q_dtype = qd;
            s.seed = uint32_t(7000 + n++);
            s.seqs = {{len(1500), 1}, {77, 1}};
            check_case(s, {-1, 0, 128}, "odd group decode");
        }
}

// The tensor-core decode scores: q f16 / bf16 with KV in q's type or fp8 (widened to q's type), at
// the head dims they take (rows of whole 128-byte lines) and 4, 8, 16 rows per CTA (groups 4, 8,
// 16), fp8 with scales; one case with window, soft-cap and ALiBi.
void test_decode_tensor_core_scores(void **) {
    REQUIRE_GPU();
    const int32_t pairs[][2] = {{KVC_DTYPE_F16, KVC_DTYPE_F16},
                                {KVC_DTYPE_BF16, KVC_DTYPE_BF16},
                                {KVC_DTYPE_F16, KVC_DTYPE_FP8_E4M3},
                                {KVC_DTYPE_BF16, KVC_DTYPE_FP8_E4M3}};
    const int32_t groups[] = {4, 8, 16};
    int n = 0;
    for (int32_t d : {64, 128, 256})
        for (const auto &qk : pairs) {
            kvc_test::CaseSpec s;
            s.block_size = n % 2 ? 16 : 7;
            s.head_dim = d;
            s.num_kv_heads = 2;
            s.num_q_heads = 2 * groups[n % 3];
            s.q_dtype = qk[0];
            s.kv_dtype = qk[1];
            if (qk[1] == KVC_DTYPE_FP8_E4M3) { s.k_scale = 0.5f; s.v_scale = 1.5f; }
            s.seed = uint32_t(7100 + n++);
            s.seqs = {{len(1300), 1}, {40, 1}, {1, 1}};
            check_case(s, {-1, 0, 96}, "tensor-core decode");
        }
    kvc_test::CaseSpec s = fp8_features_case(128, 16, 2, 2.0f, 0.5f, 200, 7200);
    s.seqs = {{len(2000), 1}, {150, 1}};
    check_case(s, {-1, 0, 64}, "tensor-core decode features");
}

// Sequences without a query (q_len 0) among decode queries: nothing is computed for them, and the
// split-K reduce must not write their (absent) rows: in the middle that would be the next
// sequence's first token (hidden wherever that sequence's reduce runs later, as on the emulator),
// at the end past the output (an ASan build of the emulator reports it).
void test_decode_empty_query(void **) {
    REQUIRE_GPU();
    kvc_test::CaseSpec s;
    s.block_size = 16;
    s.head_dim = 128;
    s.num_q_heads = 32;
    s.num_kv_heads = 8;
    s.seqs = {{len(900), 1}, {len(600), 0}, {len(800), 1}, {len(500), 0}};
    check_case(s, {-1, 0, 64}, "decode with an empty query");
}

// Unsupported shapes come back as statuses before any launch.
void test_attention_bad_input(void **) {
    REQUIRE_GPU();
    kvc_test::CaseSpec s;
    s.seqs = {{100, 1}};
    kvc_test::PagedProblem P = kvc_test::make_problem(s);
    GpuRun G(P);
    kvc::AttentionArgs a = G.args(-1, SIZE_MAX);
    a.layout.head_dim = 72;
    assert_int_equal(kvc::cuda::attention(a, nullptr), KVC_ERR_UNSUPPORTED);
    assert_non_null(strstr(kvc_last_error(), "head_dim 72"));
    a = G.args(-1, SIZE_MAX);
    a.q_dtype = KVC_DTYPE_FP8_E4M3;
    assert_int_equal(kvc::cuda::attention(a, nullptr), KVC_ERR_UNSUPPORTED);
    a = G.args(-1, SIZE_MAX);
    a.num_q_heads = 12;  // not a multiple of 8 KV heads
    assert_int_equal(kvc::cuda::attention(a, nullptr), KVC_ERR_INVALID_ARG);
}

// ---- cache write / copy blocks -----------------------------------------------------------------

// Random K/V rows in src dtype, some padding slots; GPU and CPU write into identical NaN-poisoned
// storage; the storages must match byte for byte.
void test_cache_write_exact(void **) {
    REQUIRE_GPU();
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> uni(-3.0f, 3.0f);
    int n = 0;
    for (int32_t kv : kKvDtypes)
        for (int32_t src : kQDtypes)
            for (int32_t bs : {1, 16, 48}) {
                const int32_t d = kHeadDims[n % 5], heads = 1 + n % 4;
                ++n;
                kvc::KvLayout L;
                assert_true(L.init(40, bs, 3, heads, d, kv));
                std::vector<uint8_t> storage(size_t(L.total_bytes));
                kvc_test::fill_nan(storage.data(), L.total_bytes / L.elem_bytes, kv);
                // Distinct slots in shuffled order, with padding (-1) mixed in.
                std::vector<int64_t> all(size_t(40) * bs);
                for (size_t i = 0; i < all.size(); ++i) all[i] = int64_t(i);
                std::shuffle(all.begin(), all.end(), rng);
                const int64_t tokens = std::min<int64_t>(int64_t(all.size()), 200);
                std::vector<int64_t> slots(all.begin(), all.begin() + tokens);
                for (int64_t i = 0; i < tokens; i += 7) slots[size_t(i)] = -1;
                const int64_t row = int64_t(heads) * d;
                const int32_t sb = kvc_ref::dtype_size(src);
                std::vector<uint8_t> k(size_t(tokens * row * sb)), v(k.size());
                for (int64_t i = 0; i < tokens * row; ++i) {
                    kvc_test::store_value(k.data(), i, src, kvc_ref::round_to(uni(rng), src));
                    kvc_test::store_value(v.data(), i, src, kvc_ref::round_to(uni(rng), src));
                }
                kvc::CacheWriteArgs a;
                a.layout = L;
                a.layer = 1 + n % 2;
                a.num_tokens = tokens;
                a.src_dtype = src;
                a.k_scale = kv == KVC_DTYPE_FP8_E4M3 ? 0.37f : 1.0f;
                a.v_scale = kv == KVC_DTYPE_FP8_E4M3 ? 0.011f : 1.0f;  // some values saturate at 448

                DeviceBuffer dstore, dslots, dk, dv;
                ASSERT_OK(upload_vector(dstore, storage));
                ASSERT_OK(upload_vector(dslots, slots));
                ASSERT_OK(upload_vector(dk, k));
                ASSERT_OK(upload_vector(dv, v));
                kvc::CacheWriteArgs g = a;
                g.base = dstore.get();
                g.slots = dslots.as<int64_t>();
                g.k = dk.get();
                g.v = dv.get();
                ASSERT_OK(kvc::cuda::cache_write(g, nullptr));
                ASSERT_OK(kvc::cuda::stream_sync(nullptr));

                a.base = storage.data();
                a.slots = slots.data();
                a.k = k.data();
                a.v = v.data();
                ASSERT_OK(kvc::cpu_cache_write(a));
                std::vector<uint8_t> got(storage.size());
                ASSERT_OK(dstore.download(got.data(), got.size()));
                for (size_t i = 0; i < got.size(); ++i)
                    if (got[i] != storage[i])
                        fail_msg("cache write kv=%s src=%s bs=%d d=%d heads=%d: byte %zu gpu 0x%02x cpu 0x%02x",
                                 dtype_name(kv), dtype_name(src), bs, d, heads, i, got[i], storage[i]);
            }
}

void test_copy_blocks_exact(void **) {
    REQUIRE_GPU();
    std::mt19937 rng(5);
    // (block_size, head_dim, dtype, layers, kv heads): block strides that are multiples of 16, 8, 4
    // and 2 bytes exercise every vector width of the copy kernel.
    const int32_t shapes[][5] = {{16, 128, KVC_DTYPE_F16, 2, 2}, {1, 4, KVC_DTYPE_FP8_E4M3, 1, 1},
                                 {1, 2, KVC_DTYPE_FP8_E4M3, 1, 1}, {1, 3, KVC_DTYPE_FP8_E4M3, 1, 1},
                                 {256, 256, KVC_DTYPE_BF16, 3, 1}, {5, 80, KVC_DTYPE_F32, 1, 3}};
    for (const auto &sh : shapes) {
        kvc::KvLayout L;
        assert_true(L.init(64, sh[0], sh[3], sh[4], sh[1], sh[2]));
        std::vector<uint8_t> storage(size_t(L.total_bytes));
        for (auto &b : storage) b = uint8_t(rng());
        std::vector<int32_t> ids(64);
        for (int i = 0; i < 64; ++i) ids[size_t(i)] = i;
        std::shuffle(ids.begin(), ids.end(), rng);
        // 20 pairs: sources from the first half, distinct destinations from the second.
        std::vector<int32_t> src(ids.begin(), ids.begin() + 20), dst(ids.begin() + 32, ids.begin() + 52);
        src[3] = src[4];  // one source copied twice
        DeviceBuffer dstore, dsrc, ddst;
        ASSERT_OK(upload_vector(dstore, storage));
        ASSERT_OK(upload_vector(dsrc, src));
        ASSERT_OK(upload_vector(ddst, dst));
        kvc::CopyBlocksArgs a;
        a.layout = L;
        a.num_pairs = int64_t(src.size());
        kvc::CopyBlocksArgs g = a;
        g.base = dstore.get();
        g.src = dsrc.as<int32_t>();
        g.dst = ddst.as<int32_t>();
        ASSERT_OK(kvc::cuda::copy_blocks(g, nullptr));
        ASSERT_OK(kvc::cuda::stream_sync(nullptr));
        a.base = storage.data();
        a.src = src.data();
        a.dst = dst.data();
        ASSERT_OK(kvc::cpu_copy_blocks(a));
        std::vector<uint8_t> got(storage.size());
        ASSERT_OK(dstore.download(got.data(), got.size()));
        assert_memory_equal(got.data(), storage.data(), got.size());
    }
}

// ---- runtime wrappers ---------------------------------------------------------------------------

void test_runtime_wrappers(void **) {
    REQUIRE_GPU();
    int32_t n = 0;
    ASSERT_OK(kvc::cuda::device_count(&n));
    assert_true(n >= 1);
    size_t free_b = 0, total_b = 0;
    ASSERT_OK(kvc::cuda::mem_get_info(0, &free_b, &total_b));
    assert_true(free_b > 0 && free_b <= total_b);

    const size_t bytes = 1 << 20;
    void *pinned = nullptr;
    ASSERT_OK(kvc::cuda::malloc_pinned(bytes, &pinned));
    auto *h = static_cast<uint8_t *>(pinned);
    for (size_t i = 0; i < bytes; ++i) h[i] = uint8_t(i * 31 + 7);
    DeviceBuffer a(bytes), b(bytes);
    ASSERT_OK(kvc::cuda::memcpy_h2d(a.get(), h, bytes, nullptr));
    ASSERT_OK(kvc::cuda::memcpy_d2d(b.get(), a.get(), bytes, nullptr));
    std::vector<uint8_t> back(bytes);
    ASSERT_OK(kvc::cuda::memcpy_d2h(back.data(), b.get(), bytes, nullptr));
    ASSERT_OK(kvc::cuda::stream_sync(nullptr));
    assert_memory_equal(back.data(), h, bytes);
    ASSERT_OK(kvc::cuda::free_pinned(pinned));

    void *p = nullptr;
    assert_int_equal(kvc::cuda::malloc_device(n, 16, &p), KVC_ERR_DEVICE);  // no such device
    assert_null(p);
    assert_int_equal(kvc::cuda::malloc_device(0, size_t(1) << 60, &p), KVC_ERR_NO_MEMORY);
    assert_null(p);
    // The failed allocation must not poison later calls.
    ASSERT_OK(kvc::cuda::malloc_device(0, 256, &p));
    ASSERT_OK(kvc::cuda::free_device(0, p));
    ASSERT_OK(kvc::cuda::free_device(0, nullptr));
}

}  // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runtime_wrappers),
        cmocka_unit_test(test_cache_write_exact),
        cmocka_unit_test(test_copy_blocks_exact),
        cmocka_unit_test(test_decode_grid),
        cmocka_unit_test(test_dtype_matrix),
        cmocka_unit_test(test_split_k),
        cmocka_unit_test(test_window_softcap_alibi),
        cmocka_unit_test(test_prefill_grid),
        cmocka_unit_test(test_prefill_tensor_core_dtypes),
        cmocka_unit_test(test_shared_blocks_and_large_groups),
        cmocka_unit_test(test_decode_odd_groups),
        cmocka_unit_test(test_decode_tensor_core_scores),
        cmocka_unit_test(test_decode_empty_query),
        cmocka_unit_test(test_attention_bad_input),
    };
    if (const char *filter = std::getenv("KVC_GPU_TEST_FILTER")) cmocka_set_test_filter(filter);
    if (const char *skip = std::getenv("KVC_GPU_TEST_SKIP")) cmocka_set_skip_filter(skip);
    const int failed = cmocka_run_group_tests(tests, nullptr, nullptr);
    // ctest turns this line into SKIPPED (tests/CMakeLists.txt SKIP_REGULAR_EXPRESSION), so a
    // machine without a GPU never reports these tests as passed.
    if (!kvc_gpu_test::gpu_available()) std::printf("[  SKIPPED ] ALL GPU tests: no CUDA device or driver\n");
    if (g_cases_left_out > 0)
        std::printf("[  SUBSET  ] %ld attention cases run, %ld left out (KVC_GPU_TEST_STRIDE / KVC_GPU_TEST_MAX_CASES)\n",
                    g_cases_run, g_cases_left_out);
    return failed;
}
