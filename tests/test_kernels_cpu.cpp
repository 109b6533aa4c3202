// CPU kernels (lib/cpu/) against the dense double-precision reference, called directly through
// storage/kernel_args.hpp. Every unused slot of the storage (other layer, other blocks, slots past each
// context, padding tokens) holds NaN, so any out-of-context read shows up as a non-finite output.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <random>

#include <sys/wait.h>
#include <unistd.h>

#include "cpu/attention_isa.hpp"
#include "cpu/dtype_convert.hpp"
#include "cpu/cpu_isa.hpp"
#include "cpu/thread_pool.hpp"
#include "test_kernels_fixture.hpp"

extern "C" {
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
}

using kvc_test::CaseSpec;
using kvc_test::PagedProblem;

namespace {

const int32_t kBlockSizes[] = {1, 8, 16, 32, 64, 128, 256};
const int32_t kHeadDims[] = {64, 80, 96, 128, 256};
const int32_t kHeads[][2] = {{8, 8}, {32, 8}, {32, 4}, {64, 8}};
// (q dtype, kv dtype): f32, f16, bf16, and fp8 KV with f16 / bf16 queries.
const int32_t kDtypes[][2] = {{KVC_DTYPE_F32, KVC_DTYPE_F32},
                              {KVC_DTYPE_F16, KVC_DTYPE_F16},
                              {KVC_DTYPE_BF16, KVC_DTYPE_BF16},
                              {KVC_DTYPE_F16, KVC_DTYPE_FP8_E4M3},
                              {KVC_DTYPE_BF16, KVC_DTYPE_FP8_E4M3}};

double atol_for(const CaseSpec &c) {
    if (c.kv_dtype == KVC_DTYPE_FP8_E4M3) return 1e-2;
    if (c.q_dtype == KVC_DTYPE_F32 && c.kv_dtype == KVC_DTYPE_F32) return 1e-4;
    return 1e-3;
}

// Compares kernel output with the reference; fails with the first offending element.
void expect_close(const std::vector<float> &got, const std::vector<double> &want, const CaseSpec &c,
                  const char *what) {
    const double atol = atol_for(c), rel = kvc_ref::output_rounding(c.q_dtype);
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        double err = std::fabs(double(got[i]) - want[i]);
        if (!std::isfinite(got[i]) || err > atol + rel * std::fabs(want[i])) {
            fail_msg("%s: bs=%d d=%d heads=%d/%d q=%d kv=%d seed=%u: out[%zu] = %.7g, reference %.7g",
                     what, c.block_size, c.head_dim, c.num_q_heads, c.num_kv_heads, c.q_dtype, c.kv_dtype,
                     c.seed, i, double(got[i]), want[i]);
        }
        worst = std::max(worst, err);
    }
    (void)worst;
}

// The kernel variants to test: every one this machine can run (baseline, AVX2, AVX-512), or with
// KVC_CPU_TEST_BEST_ONLY=1 (the one-thread ctest entry, whose point is the thread count) only the
// one the library would pick.
std::vector<kvc::cpu::Isa> isas_to_test() {
    std::vector<kvc::cpu::Isa> isas;
    for (int32_t i = 0; i < kvc::cpu::kIsaCount; ++i)
        if (kvc::cpu::isa_available(kvc::cpu::Isa(i))) isas.push_back(kvc::cpu::Isa(i));
    const char *best_only = std::getenv("KVC_CPU_TEST_BEST_ONLY");
    if (best_only && best_only[0] == '1' && !isas.empty()) isas.erase(isas.begin(), isas.end() - 1);
    return isas;
}

// P's kernel output with variant isa forced (reset again before the caller asserts anything).
std::vector<float> run_with(PagedProblem &P, kvc::cpu::Isa isa, int32_t partition_size) {
    kvc::cpu::force_isa(isa);
    kvc_status st;
    std::vector<float> got = P.run_cpu(partition_size, &st);
    kvc::cpu::force_isa_reset();
    assert_int_equal(st, KVC_OK);
    return got;
}

// Runs problem P on every variant to test, each against the same reference and tolerances.
void run_problem(PagedProblem &P, const CaseSpec &c, const char *what) {
    const std::vector<double> ref = P.run_reference();
    for (kvc::cpu::Isa isa : isas_to_test()) {
        std::vector<float> got = run_with(P, isa, c.partition_size);
        char label[96];
        std::snprintf(label, sizeof label, "%s [%s]", what, kvc::cpu::isa_name(isa));
        expect_close(got, ref, c, label);
    }
}

void run_case(const CaseSpec &c, const char *what) {
    PagedProblem P = kvc_test::make_problem(c);
    run_problem(P, c, what);
}

std::vector<kvc_ref::Seq> random_seqs(std::mt19937 &rng, int n, int64_t max_ctx, int64_t max_q) {
    std::vector<kvc_ref::Seq> seqs;
    for (int i = 0; i < n; ++i) {
        kvc_ref::Seq s;
        s.q_len = 1 + int64_t(rng() % uint32_t(max_q));
        s.ctx_len = s.q_len + int64_t(rng() % uint32_t(max_ctx));
        seqs.push_back(s);
    }
    return seqs;
}

// ---- conversions --------------------------------------------------------------------------------

void test_half_conversions(void **) {
    for (uint32_t c = 0; c < 65536; ++c) {
        float a = kvc::cpu::half_to_float(uint16_t(c)), b = kvc_ref::decode_half(uint16_t(c));
        if (std::isnan(b)) assert_true(std::isnan(a));
        else assert_true(a == b && std::signbit(a) == std::signbit(b));
        // Round trip of every non-NaN code is exact.
        if (!std::isnan(b)) assert_int_equal(kvc::cpu::float_to_half(a), c);
        if (!std::isnan(b)) assert_int_equal(kvc_ref::encode_half(b), c);  // the oracle's own inverse
    }
    std::mt19937 rng(7);
    for (int i = 0; i < 200000; ++i) {
        uint32_t u = rng();
        float f;
        std::memcpy(&f, &u, 4);
        if (i % 2) f = std::ldexp(float(rng() % 100000) / 100000.0f, int(rng() % 44) - 28);  // half range
        if (std::isnan(f)) continue;
        float want = kvc_ref::round_to(f, kvc_ref::F16);
        float got = kvc_ref::decode_half(kvc::cpu::float_to_half(f));
        assert_true(got == want && std::signbit(got) == std::signbit(want));
    }
    // Ties go to even, overflow goes to infinity.
    assert_int_equal(kvc::cpu::float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
    assert_int_equal(kvc::cpu::float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
    assert_int_equal(kvc::cpu::float_to_half(65519.0f), 0x7bff);
    assert_int_equal(kvc::cpu::float_to_half(65520.0f), 0x7c00);
    assert_int_equal(kvc::cpu::float_to_half(std::ldexp(1.0f, -25)), 0x0000);      // tie to 0
    assert_int_equal(kvc::cpu::float_to_half(3 * std::ldexp(1.0f, -25)), 0x0002);  // tie to even 2
    assert_true(std::isnan(kvc::cpu::half_to_float(kvc::cpu::float_to_half(NAN))));
}

void test_bf16_conversions(void **) {
    std::mt19937 rng(8);
    for (int i = 0; i < 300000; ++i) {
        uint32_t u = rng();
        float f;
        std::memcpy(&f, &u, 4);
        if (std::isnan(f)) {
            assert_true(std::isnan(kvc::cpu::bf16_to_float(kvc::cpu::float_to_bf16(f))));
            continue;
        }
        float want = kvc_ref::round_to(f, kvc_ref::BF16);
        float got = kvc::cpu::bf16_to_float(kvc::cpu::float_to_bf16(f));
        assert_true(got == want && std::signbit(got) == std::signbit(want));
    }
    assert_int_equal(kvc::cpu::float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie to even
    assert_int_equal(kvc::cpu::float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie to even
}

void test_fp8_conversions(void **) {
    for (int c = 0; c < 256; ++c) {
        float a = kvc::cpu::fp8_e4m3_to_float(uint8_t(c)), b = kvc_ref::decode_fp8(uint8_t(c));
        if (std::isnan(b)) { assert_true(std::isnan(a)); continue; }
        assert_true(a == b && std::signbit(a) == std::signbit(b));
        assert_int_equal(kvc::cpu::float_to_fp8_e4m3(a), c);
        assert_int_equal(kvc_ref::encode_fp8(b), c);
    }
    std::mt19937 rng(9);
    for (int i = 0; i < 300000; ++i) {
        float f = std::ldexp(float(rng() % 1000000) / 1000000.0f, int(rng() % 24) - 12);
        if (rng() % 2) f = -f;
        float want = kvc_ref::round_to(f, kvc_ref::FP8_E4M3);
        float got = kvc::cpu::fp8_e4m3_to_float(kvc::cpu::float_to_fp8_e4m3(f));
        if (!(got == want && std::signbit(got) == std::signbit(want)))
            fail_msg("fp8(%.9g) = %.9g, reference %.9g", double(f), double(got), double(want));
    }
    assert_int_equal(kvc::cpu::float_to_fp8_e4m3(448.0f), 0x7e);
    assert_int_equal(kvc::cpu::float_to_fp8_e4m3(1000.0f), 0x7e);       // saturates
    assert_int_equal(kvc::cpu::float_to_fp8_e4m3(-INFINITY), 0xfe);     // saturates, keeps sign
    assert_int_equal(kvc::cpu::float_to_fp8_e4m3(NAN) & 0x7f, 0x7f);    // NaN stays NaN
    assert_int_equal(kvc::cpu::float_to_fp8_e4m3(1.0625f), 0x38);       // tie to even (1.0)
    assert_int_equal(kvc::cpu::float_to_fp8_e4m3(1.1875f), 0x3a);       // tie to even (1.25)
    assert_int_equal(kvc::cpu::float_to_fp8_e4m3(std::ldexp(1.0f, -10)), 0x00);  // tie to 0
    assert_int_equal(kvc::cpu::float_to_fp8_e4m3(std::ldexp(3.0f, -10)), 0x02);  // tie to even 2
}

// ---- cache write and copy blocks ----------------------------------------------------------------

void check_cache_write(int32_t kv_dt, int32_t src_dt, int32_t bs, int32_t d, uint32_t seed) {
    std::mt19937 rng(seed);
    const int32_t KH = 3;
    kvc::KvLayout L;
    assert_true(L.init(9, bs, 2, KH, d, kv_dt));
    std::vector<uint64_t> words(size_t(L.total_bytes + 7) / 8);
    void *base = words.data();
    const int64_t elems = L.total_bytes / L.elem_bytes;
    kvc_test::fill_nan(base, elems, kv_dt);
    std::vector<uint8_t> nan_image(size_t(L.total_bytes));
    std::memcpy(nan_image.data(), base, nan_image.size());

    // Distinct random slots plus padding entries.
    std::vector<int64_t> all(size_t(L.num_blocks * bs));
    for (size_t i = 0; i < all.size(); ++i) all[i] = int64_t(i);
    std::shuffle(all.begin(), all.end(), rng);
    const int64_t n = std::min<int64_t>(int64_t(all.size()) - 1, 40);
    std::vector<int64_t> slots(all.begin(), all.begin() + n);
    slots[1] = -1;
    slots[size_t(n) / 2] = -7;
    const int64_t row = int64_t(KH) * d;
    const int sb = kvc_ref::dtype_size(src_dt);
    std::vector<uint8_t> k(size_t(n * row * sb)), v(size_t(n * row * sb));
    std::vector<float> kval(size_t(n * row)), vval(size_t(n * row));
    std::uniform_real_distribution<float> uni(-600.0f, 600.0f);  // past fp8's 448: saturation
    for (int64_t i = 0; i < n * row; ++i) {
        float a = uni(rng), b = uni(rng) * 1e-4f;  // V small: fp8 subnormals
        kval[size_t(i)] = kvc_ref::round_to(a, src_dt);
        vval[size_t(i)] = kvc_ref::round_to(b, src_dt);
        kvc_test::store_value(k.data(), i, src_dt, kval[size_t(i)]);
        kvc_test::store_value(v.data(), i, src_dt, vval[size_t(i)]);
    }
    kvc::CacheWriteArgs w;
    w.layout = L;
    w.base = base;
    w.layer = 1;
    w.slots = slots.data();
    w.num_tokens = n;
    w.k = k.data();
    w.v = v.data();
    w.src_dtype = src_dt;
    w.k_scale = 0.75f;
    w.v_scale = 0.001f;
    assert_int_equal(kvc::cpu_cache_write(w), KVC_OK);

    const bool fp8 = kv_dt == KVC_DTYPE_FP8_E4M3;
    std::vector<uint8_t> expect_written(size_t(elems), 0);
    for (int64_t i = 0; i < n; ++i) {
        if (slots[size_t(i)] < 0) continue;
        const int64_t block = slots[size_t(i)] / bs;
        const int32_t tok = int32_t(slots[size_t(i)] % bs);
        for (int32_t kv = 0; kv < 2; ++kv)
            for (int32_t h = 0; h < KH; ++h)
                for (int32_t e = 0; e < d; ++e) {
                    const int64_t at = (L.offset(block, 1, kv, h, tok) / L.elem_bytes) + e;
                    float x = (kv ? vval : kval)[size_t(i * row + h * d + e)];
                    if (fp8) x = x / (kv ? w.v_scale : w.k_scale);
                    float want = kvc_ref::round_to(x, kv_dt);
                    float got = kvc_ref::decode(base, at, kv_dt);
                    if (!(got == want && std::signbit(got) == std::signbit(want)))
                        fail_msg("cache write kv=%d src=%d: elem %lld = %.9g, want %.9g", kv_dt, src_dt,
                                 (long long)at, double(got), double(want));
                    expect_written[size_t(at)] = 1;
                }
    }
    // Everything else (other layer, other slots, padding tokens' data) is untouched.
    const uint8_t *bytes = static_cast<const uint8_t *>(base);
    for (int64_t e = 0; e < elems; ++e) {
        if (expect_written[size_t(e)]) continue;
        assert_memory_equal(bytes + e * L.elem_bytes, nan_image.data() + e * L.elem_bytes, size_t(L.elem_bytes));
    }
}

void test_cache_write_exact(void **) {
    const int32_t srcs[] = {KVC_DTYPE_F32, KVC_DTYPE_F16, KVC_DTYPE_BF16};
    const int32_t kvs[] = {KVC_DTYPE_F32, KVC_DTYPE_F16, KVC_DTYPE_BF16, KVC_DTYPE_FP8_E4M3};
    for (int32_t i = 0; i < kvc::cpu::kIsaCount; ++i) {
        if (!kvc::cpu::isa_available(kvc::cpu::Isa(i))) continue;
        kvc::cpu::force_isa(kvc::cpu::Isa(i));
        uint32_t seed = 100;
        for (int32_t kv : kvs)
            for (int32_t src : srcs) {
                check_cache_write(kv, src, kBlockSizes[seed % 7], kHeadDims[seed % 5], seed);
                ++seed;
            }
        kvc::cpu::force_isa_reset();
    }
}

// The vectorized encoders of each variant (cpu/convert_rows.hpp, through the cache write) give
// the scalar encoders' exact bits on every kind of input: random bit patterns (NaNs with payloads,
// infinities, float subnormals), values around each format's rounding ties, overflow and subnormal
// ranges. A row of 1000 elements runs both the vector body and the scalar tail.
void test_row_encoders_exact(void **) {
    const int32_t n = 1000;
    std::mt19937 rng(31);
    std::vector<float> src(size_t(n) * 40);
    for (size_t i = 0; i < src.size(); ++i) {
        uint32_t u = rng();
        if (i % 4 == 1) u = (u & 0x8000ffffu) | (uint32_t(100 + rng() % 60) << 23);  // near fp8/f16 ranges
        if (i % 4 == 2) u = (u & 0x80000000u) | ((u & 0x7fffffffu) % 0x48000000u);   // 0 .. 2^17
        if (i % 4 == 3) u = (u & 0xffff0000u) | ((i / 4) % 2 ? 0x8000u : 0x1000u);      // exact bf16 ties
        std::memcpy(&src[i], &u, 4);
    }
    const float specials[] = {0.f, -0.f, INFINITY, -INFINITY, NAN, -NAN, 65504.f, 65519.f, 65520.f, 448.f, 464.f,
                              -1e-45f, 0x1p-24f, 0x1p-25f, 3 * 0x1p-25f, 0x1p-9f, 0x1p-10f, 3 * 0x1p-10f, 1e30f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; ++i) src[i * 37] = specials[i];
    const int32_t dsts[] = {KVC_DTYPE_F16, KVC_DTYPE_BF16, KVC_DTYPE_FP8_E4M3};
    for (int32_t isa = 0; isa < kvc::cpu::kIsaCount; ++isa) {
        if (!kvc::cpu::isa_available(kvc::cpu::Isa(isa))) continue;
        kvc::cpu::force_isa(kvc::cpu::Isa(isa));
        for (int32_t dt : dsts) {
            kvc::KvLayout L;
            assert_true(L.init(1, 40, 1, 1, n, dt));
            std::vector<uint8_t> mem(size_t(L.total_bytes));
            std::vector<int64_t> slots(40);
            for (int64_t t = 0; t < 40; ++t) slots[size_t(t)] = t;
            kvc::CacheWriteArgs w;
            w.layout = L;
            w.base = mem.data();
            w.slots = slots.data();
            w.num_tokens = 40;
            w.k = w.v = src.data();
            w.src_dtype = KVC_DTYPE_F32;
            w.k_scale = dt == KVC_DTYPE_FP8_E4M3 ? 0.375f : 1.0f;
            w.v_scale = 1.0f;
            assert_int_equal(kvc::cpu_cache_write(w), KVC_OK);
            for (int64_t t = 0; t < 40; ++t)
                for (int32_t e = 0; e < n; ++e) {
                    const float x = src[size_t(t * n + e)];
                    const uint8_t *at = mem.data() + L.offset(0, 0, 0, 0, int32_t(t)) + int64_t(e) * L.elem_bytes;
                    uint32_t got = 0, want = 0;
                    std::memcpy(&got, at, size_t(L.elem_bytes));
                    if (dt == KVC_DTYPE_F16) want = kvc::cpu::float_to_half(x);
                    else if (dt == KVC_DTYPE_BF16) want = kvc::cpu::float_to_bf16(x);
                    else want = kvc::cpu::float_to_fp8_e4m3(x / w.k_scale);
                    if (got != want)
                        fail_msg("[%s] encode dtype %d of %a (bits %08x): got %#x, scalar %#x",
                                 kvc::cpu::isa_name(kvc::cpu::Isa(isa)), dt, double(x), kvc::cpu::float_bits(x), got, want);
                }
        }
        kvc::cpu::force_isa_reset();
    }
}

void test_copy_blocks_exact(void **) {
    std::mt19937 rng(3);
    kvc::KvLayout L;
    assert_true(L.init(12, 16, 3, 2, 80, KVC_DTYPE_BF16));
    std::vector<uint8_t> mem(size_t(L.total_bytes));
    for (auto &b : mem) b = uint8_t(rng());
    std::vector<uint8_t> before = mem;
    const int32_t src[] = {0, 5, 7, 3};
    const int32_t dst[] = {9, 1, 11, 3};  // the last pair is a self-copy: no change
    kvc::CopyBlocksArgs a;
    a.layout = L;
    a.base = mem.data();
    a.src = src;
    a.dst = dst;
    a.num_pairs = 4;
    assert_int_equal(kvc::cpu_copy_blocks(a), KVC_OK);
    std::vector<uint8_t> want = before;
    for (int p = 0; p < 4; ++p)
        std::memcpy(want.data() + dst[p] * L.block_stride, before.data() + src[p] * L.block_stride,
                    size_t(L.block_stride));
    assert_memory_equal(mem.data(), want.data(), mem.size());
}

// ---- attention ------------------------------------------------------------------------------------

// Decode over the grid: every value of every axis appears (index i walks each axis at a different
// stride), random long contexts, shuffled tables, blocks shared after a fork.
void test_decode_grid(void **) {
    std::mt19937 rng(11);
    // Cases 20 .. 27: batches of 9 to 30 sequences, where a thread claims a whole sequence (every
    // KV head) at a time (attention_core.inl, decode_unit) instead of one item.
    for (int i = 0; i < 28; ++i) {
        CaseSpec c;
        c.block_size = kBlockSizes[i % 7];
        c.head_dim = kHeadDims[(i * 3) % 5];
        c.num_q_heads = kHeads[(i / 2) % 4][0];
        c.num_kv_heads = kHeads[(i / 2) % 4][1];
        c.q_dtype = kDtypes[i % 5][0];
        c.kv_dtype = kDtypes[i % 5][1];
        if (c.kv_dtype == KVC_DTYPE_FP8_E4M3) { c.k_scale = 0.02f; c.v_scale = 0.01f; }
        const int64_t max_ctx = c.head_dim * c.num_q_heads >= 8192 ? 1200 : 3000;
        c.seqs = i < 20 ? random_seqs(rng, 3, max_ctx, 1) : random_seqs(rng, 9 + (i % 4) * 7, max_ctx / 4, 1);
        c.fork_shared_blocks = i % 3 == 0 ? 1000 : 0;
        c.scale_mult = 1.0f + float(i % 3);
        c.partition_size = i % 4 == 1 ? 0 : -1;
        c.seed = 1000u + uint32_t(i);
        run_case(c, "decode grid");
    }
}

// Prefill / append: cached prefix + several new tokens, causal, varlen batch (q_len 1 mixed in).
void test_prefill_grid(void **) {
    std::mt19937 rng(12);
    for (int i = 0; i < 14; ++i) {
        CaseSpec c;
        c.block_size = kBlockSizes[(i + 3) % 7];
        c.head_dim = kHeadDims[i % 5];
        c.num_q_heads = kHeads[i % 4][0];
        c.num_kv_heads = kHeads[i % 4][1];
        c.q_dtype = kDtypes[(i + 1) % 5][0];
        c.kv_dtype = kDtypes[(i + 1) % 5][1];
        if (c.kv_dtype == KVC_DTYPE_FP8_E4M3) { c.k_scale = 0.01f; c.v_scale = 0.005f; }
        c.seqs = random_seqs(rng, 3, 300, 70);
        c.seqs[1].q_len = 1;  // a decode row inside a prefill batch
        c.seqs[1].ctx_len = std::max<int64_t>(c.seqs[1].ctx_len, 1);
        c.fork_shared_blocks = i % 2 ? 4 : 0;
        c.scale_mult = 2.0f;
        c.seed = 2000u + uint32_t(i);
        run_case(c, "prefill grid");
    }
}

// Appends of a few tokens over a cached context (speculative decoding's verification pass, small
// chunked-prefill tails) with GQA groups of 1 and 2: fewer query rows than a vector, so the CPU
// kernel takes its row-major path, where the causal mask inside a chunk decides what each of the
// new tokens sees. Plus a window, soft-cap and ALiBi variant.
void test_short_appends(void **) {
    const int32_t heads[][2] = {{8, 8}, {16, 8}};
    for (int i = 0; i < 8; ++i) {
        CaseSpec c;
        c.block_size = kBlockSizes[(i * 3) % 7];
        c.head_dim = kHeadDims[i % 5];
        c.num_q_heads = heads[i % 2][0];
        c.num_kv_heads = heads[i % 2][1];
        c.q_dtype = kDtypes[i % 5][0];
        c.kv_dtype = kDtypes[i % 5][1];
        if (c.kv_dtype == KVC_DTYPE_FP8_E4M3) { c.k_scale = 0.01f; c.v_scale = 0.005f; }
        c.seqs = {{70, 3}, {33, 2}, {200, 5}, {4, 4}, {97, 1}};
        if (i >= 6) {
            c.sliding_window = 40;
            c.softcap = 8.0f;
            c.alibi = true;
        }
        c.scale_mult = 3.0f;
        c.seed = 2500u + uint32_t(i);
        run_case(c, "short appends");
    }
}

// Whole prompt (no cached prefix): query j sees exactly positions 0..j.
void test_prefill_from_scratch(void **) {
    CaseSpec c;
    c.block_size = 16;
    c.head_dim = 64;
    c.num_q_heads = 32;
    c.num_kv_heads = 4;
    c.q_dtype = c.kv_dtype = KVC_DTYPE_F32;
    c.seqs = {{200, 200}, {37, 37}, {1, 1}};
    c.scale_mult = 3.0f;
    run_case(c, "prefill from scratch");
}

void test_sliding_window_softcap_alibi(void **) {
    std::mt19937 rng(13);
    for (int i = 0; i < 10; ++i) {
        CaseSpec c;
        c.block_size = kBlockSizes[(i * 2) % 7];
        c.head_dim = kHeadDims[i % 5];
        c.num_q_heads = kHeads[i % 4][0];
        c.num_kv_heads = kHeads[i % 4][1];
        c.q_dtype = kDtypes[i % 3][0];
        c.kv_dtype = kDtypes[i % 3][1];
        c.seqs = random_seqs(rng, 3, 900, i % 2 ? 40 : 1);
        c.sliding_window = i % 3 == 2 ? 0 : 1 + int32_t(rng() % 300);
        c.softcap = i % 3 == 1 ? 0.0f : 5.0f + float(i);
        c.alibi = i % 3 != 0;
        c.scale_mult = 4.0f;  // large logits so the soft-cap actually bends them
        c.partition_size = i % 2 ? -1 : 64;
        c.seed = 3000u + uint32_t(i);
        run_case(c, "window/softcap/alibi");
    }
    // A window alone (no ALiBi, no soft-cap) on prefill / append tiles: the rows-in-lanes path then
    // masks diagonal and window-edge tiles lane-vectorised and takes the row maxima from the score
    // blocks everywhere else; windows shorter and longer than its 64-position K/V tiles, edges
    // falling inside a tile.
    for (int i = 0; i < 6; ++i) {
        CaseSpec c;
        c.block_size = kBlockSizes[1 + i % 4];
        c.head_dim = kHeadDims[i % 5];
        c.num_q_heads = kHeads[1 + i % 3][0];
        c.num_kv_heads = kHeads[1 + i % 3][1];
        c.q_dtype = kDtypes[i % 3][0];
        c.kv_dtype = kDtypes[i % 3][1];
        c.seqs = random_seqs(rng, 3, 700, 90);
        c.sliding_window = i % 2 ? 1 + int32_t(rng() % 60) : 65 + int32_t(rng() % 200);
        c.scale_mult = 3.0f;
        c.seed = 3100u + uint32_t(i);
        run_case(c, "window only, prefill tiles");
    }
}

// Prefill and long appends read K / V from each thread's fp32 copy of the KV head, up to a bound
// (4096 positions at head_dim 128); past it, tiles are gathered. With the bound shrunk to 80-320
// positions (by head_dim), the grids above cross it inside and between tiles, with windows that
// restart the copy further on.
void test_prefill_past_kv_copy_bound(void **) {
    kvc::cpu::set_kv_copy_floats(20480);
    test_prefill_grid(nullptr);
    test_prefill_from_scratch(nullptr);
    test_sliding_window_softcap_alibi(nullptr);
    kvc::cpu::set_kv_copy_floats(0);
}

// Split-K decode equals the single pass (and the reference) for explicit and auto partitions,
// including partitions that fall entirely outside a sliding window, on every kernel variant. The
// GQA-16 case puts a decode row block in vector lanes at every width (attend_lanes, whose running
// maxima are in base-2 units inside the item: its partials must leave in natural units).
void test_split_k_matches_single_pass(void **) {
    std::mt19937 rng(14);
    const int32_t parts[] = {1, 16, 100, 512, 0};
    const int32_t heads[][2] = {{8, 8}, {32, 8}, {32, 4}, {64, 8}, {32, 2}};
    for (int i = 0; i < 5; ++i) {
        CaseSpec c;
        c.block_size = kBlockSizes[i % 4 + 1];
        c.head_dim = kHeadDims[i % 4];
        c.num_q_heads = heads[i][0];
        c.num_kv_heads = heads[i][1];
        c.q_dtype = c.kv_dtype = KVC_DTYPE_F32;
        c.seqs = random_seqs(rng, 2, 2500, 1);
        c.seqs[0].ctx_len = 2500;
        c.sliding_window = i == 3 ? 300 : 0;
        c.scale_mult = 3.0f;
        c.seed = 4000u + uint32_t(i);
        PagedProblem P = kvc_test::make_problem(c);
        const std::vector<double> ref = P.run_reference();
        for (kvc::cpu::Isa isa : isas_to_test()) {
            const std::vector<float> single = run_with(P, isa, -1);
            char label[96];
            std::snprintf(label, sizeof label, "single pass [%s]", kvc::cpu::isa_name(isa));
            expect_close(single, ref, c, label);
            for (int32_t ps : parts) {
                const std::vector<float> split = run_with(P, isa, ps);
                for (size_t e = 0; e < single.size(); ++e)
                    if (!(std::fabs(split[e] - single[e]) <= 2e-6f + 1e-5f * std::fabs(single[e])))
                        fail_msg("[%s] partition %d: out[%zu] split %.9g vs single %.9g", kvc::cpu::isa_name(isa), ps,
                                 e, double(split[e]), double(single[e]));
            }
        }
    }
}

// A tiny workspace forces rounds and fewer partitions; without one there is no split. Same result.
void test_split_k_small_workspace(void **) {
    CaseSpec c;
    c.block_size = 8;
    c.head_dim = 64;
    c.num_q_heads = 8;
    c.num_kv_heads = 8;
    c.q_dtype = c.kv_dtype = KVC_DTYPE_F32;
    c.seqs = {{700, 1}, {1500, 1}, {90, 1}, {1200, 1}};
    c.scale_mult = 2.0f;
    PagedProblem P = kvc_test::make_problem(c);
    kvc_status st;
    std::vector<float> single = P.run_cpu(-1, &st);
    std::vector<double> ref = P.run_reference();
    const size_t full = P.workspace.size();
    for (size_t floats : {size_t(0), size_t(8 * 66 * 3), size_t(8 * 66 * 40), full}) {
        P.workspace.assign(floats, 0.f);
        std::vector<float> split = P.run_cpu(32, &st);
        assert_int_equal(st, KVC_OK);
        expect_close(split, ref, c, "small workspace");
        for (size_t e = 0; e < single.size(); ++e) assert_true(std::fabs(split[e] - single[e]) <= 1e-5f);
    }
}

// The output may only depend on the positions < seq_len: changing the NaN poison to huge finite
// values, and widening the table padding, must not change a single bit.
void test_masking_never_reads_unused(void **) {
    CaseSpec c;
    c.block_size = 32;
    c.head_dim = 96;
    c.num_q_heads = 32;
    c.num_kv_heads = 8;
    c.q_dtype = c.kv_dtype = KVC_DTYPE_F16;
    c.seqs = {{33, 1}, {100, 5}, {64, 64}, {1, 1}};
    PagedProblem P = kvc_test::make_problem(c);
    kvc_status st;
    std::vector<float> a = P.run_cpu(-1, &st);
    for (float x : a) assert_true(std::isfinite(x));
    expect_close(a, P.run_reference(), c, "masking");
    // Overwrite every slot past each context (and every unreferenced block) with 60000.
    std::vector<uint8_t> used(size_t(P.layout.num_blocks * c.block_size), 0);
    for (size_t s = 0; s < c.seqs.size(); ++s)
        for (int64_t p = 0; p < c.seqs[s].ctx_len; ++p)
            used[size_t(P.tables[s * P.max_blocks_per_seq + p / c.block_size]) * c.block_size + p % c.block_size] = 1;
    uint16_t *h = static_cast<uint16_t *>(P.storage);
    for (int64_t slot = 0; slot < int64_t(used.size()); ++slot) {
        if (used[size_t(slot)]) continue;
        for (int32_t layer = 0; layer < 2; ++layer)
            for (int32_t kv = 0; kv < 2; ++kv)
                for (int32_t hd = 0; hd < c.num_kv_heads; ++hd) {
                    int64_t at = P.layout.offset(slot / c.block_size, layer, kv, hd, int32_t(slot % c.block_size)) / 2;
                    for (int32_t e = 0; e < c.head_dim; ++e) h[at + e] = 0x7b53;  // 60000
                }
    }
    std::vector<float> b = P.run_cpu(-1, &st);
    assert_memory_equal(a.data(), b.data(), a.size() * sizeof(float));
}

// Every fp8 e4m3 code, subnormals and the largest included, as K and as V of a decode, against
// the reference on every variant; then a NaN code (0x7f, and 0xff) in one visible V element must
// come out as NaN in that output dimension. GQA 4 reads the KV in place (attend_rows<Fp8>: fp16
// bit moves, scales folded into q and the output), GQA 16 gathers it (fp8v_to_float).
void check_fp8_every_code(int32_t num_kv_heads) {
    CaseSpec c;
    c.block_size = 16;
    c.head_dim = 128;
    c.num_q_heads = 32;
    c.num_kv_heads = num_kv_heads;
    c.q_dtype = KVC_DTYPE_F16;
    c.kv_dtype = KVC_DTYPE_FP8_E4M3;
    c.k_scale = 0.004f;
    c.v_scale = 0.02f;
    c.seqs = {{64, 1}, {37, 1}};
    PagedProblem P = kvc_test::make_problem(c);
    const int32_t d = c.head_dim, KH = c.num_kv_heads;
    auto code_at = [](int64_t p, int32_t h, int32_t e, int32_t kv) {
        uint32_t x = kv == 0 ? uint32_t(p * 7 + e + h) : uint32_t(p * 13 + e * 3 + h);
        x &= 0xffu;
        return uint8_t((x & 0x7fu) == 0x7fu ? x - 1 : x);  // NaN codes only in the second part
    };
    auto put = [&](size_t s, int64_t p, int32_t kv, int32_t h, int32_t e, uint8_t code) {
        const int32_t block = P.tables[s * size_t(P.max_blocks_per_seq) + size_t(p / c.block_size)];
        const int64_t at = P.layout.offset(block, P.layer, kv, h, int32_t(p % c.block_size)) + e;
        static_cast<uint8_t *>(P.storage)[at] = code;
        std::vector<float> &ref = kv == 0 ? P.k_ref[s] : P.v_ref[s];
        ref[size_t((p * KH + h) * d + e)] = kvc_ref::decode_fp8(code) * (kv == 0 ? c.k_scale : c.v_scale);
    };
    std::vector<int> seen(256, 0);
    for (size_t s = 0; s < c.seqs.size(); ++s)
        for (int64_t p = 0; p < c.seqs[s].ctx_len; ++p)
            for (int32_t kv = 0; kv < 2; ++kv)
                for (int32_t h = 0; h < KH; ++h)
                    for (int32_t e = 0; e < d; ++e) {
                        const uint8_t code = code_at(p, h, e, kv);
                        seen[code] |= 1 << kv;
                        put(s, p, kv, h, e, code);
                    }
    for (int code = 0; code < 256; ++code)
        if ((code & 0x7f) != 0x7f) assert_int_equal(seen[size_t(code)], 3);  // every code as K and as V
    char label[64];
    std::snprintf(label, sizeof label, "fp8 every code, %d KV heads", KH);
    run_problem(P, c, label);
    // NaN in V at (seq 1, position 3, the last KV head, dim 5), the other NaN code at dim 6.
    const int32_t hn = KH - 1;
    put(1, 3, 1, hn, 5, 0x7f);
    put(1, 3, 1, hn, 6, 0xff);
    for (kvc::cpu::Isa isa : isas_to_test()) {
        const std::vector<float> got = run_with(P, isa, c.partition_size);
        for (int32_t qh = 0; qh < c.num_q_heads; ++qh)
            for (int32_t e = 0; e < d; ++e) {
                const float x = got[size_t((1 * c.num_q_heads + qh) * d + e)];
                const bool want_nan = qh / (c.num_q_heads / KH) == hn && (e == 5 || e == 6);
                if (std::isnan(x) != want_nan)
                    fail_msg("fp8 NaN, %d KV heads [%s]: head %d dim %d = %g", KH, kvc::cpu::isa_name(isa), qh, e,
                             double(x));
            }
    }
}

void test_fp8_every_code(void **) {
    check_fp8_every_code(8);  // GQA 4: in place
    check_fp8_every_code(2);  // GQA 16: gathered
}

// After fork() the child has no worker threads: kernels must still run (inline), not wait forever.
void test_kernels_run_in_forked_child(void **) {
    CaseSpec c;
    c.block_size = 16;
    c.head_dim = 64;
    c.num_q_heads = 8;
    c.num_kv_heads = 2;
    c.q_dtype = c.kv_dtype = KVC_DTYPE_F32;
    c.seqs = {{300, 1}, {200, 1}, {50, 20}};
    PagedProblem P = kvc_test::make_problem(c);
    kvc_status st;
    std::vector<float> parent = P.run_cpu(32, &st);  // the worker pool exists from here on
    assert_true(kvc::cpu::parallel_width() >= 1);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        std::vector<float> child = P.run_cpu(32, &st);
        _exit(st == KVC_OK && std::memcmp(child.data(), parent.data(), child.size() * 4) == 0 ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

// The vector exponentials of the rows-in-lanes softmax (cpu/simd.hpp), each variant's own code
// (kvc::cpu::vector_exp): within 4 ulp of the double result where the softmax's exponents lie
// (x <= 0 after the running-max subtraction, and some headroom above), exactly 1 at 0, exactly 0
// for -inf and below the underflow edge (masked keys must weigh nothing), NaN in, NaN out.
// expv (natural base, with ALiBi / soft-cap) over [-87, 87.9], finite at the top; exp2v (base 2,
// the plain softmax; no clamps at AVX-512) over [-126, 10].
void check_vector_exp(bool base2) {
    constexpr int64_t kN = 1 << 14;  // a multiple of every variant's lanes
    const double lo = base2 ? -126.0 : -87.0, span = base2 ? 136.0 : 174.9;
    std::vector<float> in(kN), out(kN);
    for (kvc::cpu::Isa isa : isas_to_test()) {
        const char *name = kvc::cpu::isa_name(isa);
        double worst = 0;
        for (int64_t base = 0; base < 2000000; base += kN) {
            for (int64_t i = 0; i < kN; ++i)
                in[size_t(i)] = float(lo + span * double(std::min<int64_t>(base + i, 2000000)) / 2000000.0);
            kvc::cpu::vector_exp(isa, in.data(), out.data(), kN, base2);
            for (int64_t i = 0; i < kN; ++i) {
                const double x = in[size_t(i)], want = base2 ? std::exp2(x) : std::exp(x);
                const double rel = std::fabs(double(out[size_t(i)]) - want) / want;
                worst = std::max(worst, rel);
                if (!(rel <= 4 * 0x1p-24))
                    fail_msg("[%s] %s(%.9g) = %.9g, want %.9g (relative error %.3g)", name, base2 ? "exp2v" : "expv", x,
                             double(out[size_t(i)]), want, rel);
            }
        }
        print_message("[%s] %s: worst relative error %.3g\n", name, base2 ? "exp2v" : "expv", worst);
        const float under = base2 ? -126.01f : -87.31f;
        const float edge[] = {-INFINITY, -1e30f, -200.0f, under, 0.0f, NAN, 88.0f, 89.0f, 1e30f};
        for (float x : edge) {
            if (base2 && x > 1.f) continue;  // exp2v's inputs are <= 0 (scores minus their maximum)
            std::fill(in.begin(), in.end(), x);
            kvc::cpu::vector_exp(isa, in.data(), out.data(), kN, base2);
            for (int64_t i = 0; i < kN; i += 7) {
                const float y = out[size_t(i)];
                if (std::isnan(x)) assert_true(std::isnan(y));
                else if (x <= under) assert_true(y == 0.0f);
                else if (x == 0.0f) assert_true(y == 1.0f);
                else assert_true(std::isfinite(y) && y > 1e38f);
            }
        }
    }
}
void test_vector_exp(void **) { check_vector_exp(false); }
void test_vector_exp2(void **) { check_vector_exp(true); }

// The worker pool's size: KVC_CPU_THREADS wins when it is a positive integer (capped), else the
// CPUs the process may run on, else the hardware threads. Run under KVC_CPU_THREADS=1 (ctest
// test_kernels_cpu_one_thread), the pool must have exactly one thread: the caller.
void test_thread_count(void **) {
    using kvc::cpu::thread_count_for;
    assert_int_equal(thread_count_for("3", 8, 16), 3);
    assert_int_equal(thread_count_for("1", 8, 16), 1);
    assert_int_equal(thread_count_for("100000", 8, 16), kvc::cpu::kMaxThreads);
    for (const char *bad : {"", "0", "-2", "abc", "4x", " "}) assert_int_equal(thread_count_for(bad, 8, 16), 8);
    assert_int_equal(thread_count_for(nullptr, 8, 16), 8);   // a cpuset / taskset of 8 CPUs
    assert_int_equal(thread_count_for(nullptr, 0, 16), 16);  // affinity unknown
    assert_int_equal(thread_count_for(nullptr, 0, 0), 1);    // nothing known
    assert_int_equal(thread_count_for(nullptr, 0, 512), kvc::cpu::kMaxThreads);
    const char *env = std::getenv("KVC_CPU_THREADS");
    if (env && std::strcmp(env, "1") == 0) assert_int_equal(kvc::cpu::parallel_width(), 1);
}

}  // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half_conversions),
        cmocka_unit_test(test_bf16_conversions),
        cmocka_unit_test(test_fp8_conversions),
        cmocka_unit_test(test_vector_exp),
        cmocka_unit_test(test_vector_exp2),
        cmocka_unit_test(test_cache_write_exact),
        cmocka_unit_test(test_row_encoders_exact),
        cmocka_unit_test(test_copy_blocks_exact),
        cmocka_unit_test(test_decode_grid),
        cmocka_unit_test(test_prefill_grid),
        cmocka_unit_test(test_prefill_from_scratch),
        cmocka_unit_test(test_short_appends),
        cmocka_unit_test(test_sliding_window_softcap_alibi),
        cmocka_unit_test(test_prefill_past_kv_copy_bound),
        cmocka_unit_test(test_split_k_matches_single_pass),
        cmocka_unit_test(test_split_k_small_workspace),
        cmocka_unit_test(test_masking_never_reads_unused),
        cmocka_unit_test(test_fp8_every_code),
        cmocka_unit_test(test_kernels_run_in_forked_child),
        cmocka_unit_test(test_thread_count),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
