// The CPU kernels' instruction-set choice (lib/cpu/cpu_isa.hpp): names, the best-available default,
// refusal of an unknown or unrunnable KVC_CPU_ISA (an error with a message, never a fault), and,
// when the suite runs with KVC_CPU_ISA set (ctest test_cpu_isa_env_*), that the kernels honour it:
// a launch computes exactly what the named variant does, a refused one fails. The full kernel grid
// on each variant, against the reference, is test_kernels_cpu's (run_case). Under valgrind (the
// hardening stage's memcheck), whose emulated CPU reports no AVX-512, test_refusals sees the
// avx512 variant refused for the missing CPU features.
#include <cstdlib>
#include <cstring>

#include "cpu/cpu_isa.hpp"
#include "test_kernels_fixture.hpp"

extern "C" {
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
}

namespace {

using kvc::cpu::Isa;

void test_names_and_default(void **) {
    for (int32_t i = 0; i < kvc::cpu::kIsaCount; ++i) {
        Isa parsed;
        assert_true(kvc::cpu::parse_isa(kvc::cpu::isa_name(Isa(i)), &parsed));
        assert_int_equal(int32_t(parsed), i);
        print_message("%-8s built %d, CPU+OS support %d -> %s\n", kvc::cpu::isa_name(Isa(i)),
                      kvc::cpu::isa_built(Isa(i)), kvc::cpu::cpu_supports(Isa(i)),
                      kvc::cpu::isa_available(Isa(i)) ? "runs here" : "refused here");
    }
    assert_true(kvc::cpu::isa_available(Isa::baseline));
    // The default is the best variant that can run; "auto" and an empty value mean the default.
    Isa best = Isa::baseline;
    for (int32_t i = 0; i < kvc::cpu::kIsaCount; ++i)
        if (kvc::cpu::isa_available(Isa(i))) best = Isa(i);
    for (const char *v : {(const char *)nullptr, "", "auto"}) {
        Isa got;
        assert_int_equal(kvc::cpu::isa_for(v, &got), KVC_OK);
        assert_int_equal(int32_t(got), int32_t(best));
    }
    print_message("default: %s\n", kvc::cpu::isa_name(best));
}

void test_refusals(void **) {
    Isa got;
    for (const char *bad : {"sse9", "AVX2", "avx512 ", "avx-512"}) {
        assert_int_equal(kvc::cpu::isa_for(bad, &got), KVC_ERR_UNSUPPORTED);
        assert_non_null(std::strstr(kvc_last_error(), "is not one of"));
    }
    for (int32_t i = 0; i < kvc::cpu::kIsaCount; ++i) {
        const kvc_status st = kvc::cpu::isa_for(kvc::cpu::isa_name(Isa(i)), &got);
        if (kvc::cpu::isa_available(Isa(i))) {
            assert_int_equal(st, KVC_OK);
            assert_int_equal(int32_t(got), i);
        } else {
            // Says what is missing: the CPU feature / OS state, or the build.
            assert_int_equal(st, KVC_ERR_UNSUPPORTED);
            assert_non_null(std::strstr(kvc_last_error(), kvc::cpu::isa_name(Isa(i))));
            print_message("refused: %s\n", kvc_last_error());
        }
    }
}

// Under KVC_CPU_ISA: the launch runs the named variant (and matches the reference) or is refused.
void test_environment_honoured(void **) {
    const char *env = std::getenv("KVC_CPU_ISA");
    if (!env) {
        print_message("KVC_CPU_ISA not set: nothing to check (ctest test_cpu_isa_env_* set it)\n");
        return;
    }
    Isa want;
    const kvc_status expect = kvc::cpu::isa_for(env, &want);
    Isa used;
    assert_int_equal(kvc::cpu::kernel_isa(&used), expect);
    kvc_test::CaseSpec c;
    c.block_size = 16;
    c.head_dim = 128;
    c.num_q_heads = 32;
    c.num_kv_heads = 8;
    c.q_dtype = c.kv_dtype = KVC_DTYPE_F16;
    c.seqs = {{300, 1}, {90, 40}, {17, 17}};
    kvc_test::PagedProblem P = kvc_test::make_problem(c);
    kvc_status st;
    std::vector<float> got = P.run_cpu(-1, &st);
    assert_int_equal(st, expect);
    if (expect != KVC_OK) {
        assert_non_null(std::strstr(kvc_last_error(), "KVC_CPU_ISA"));
        print_message("KVC_CPU_ISA=%s refused: %s\n", env, kvc_last_error());
        return;
    }
    assert_int_equal(int32_t(used), int32_t(want));
    // Bit for bit what the named variant computes (test_kernels_cpu holds each variant to the
    // reference).
    kvc::cpu::force_isa(want);
    std::vector<float> named = P.run_cpu(-1, &st);
    kvc::cpu::force_isa_reset();
    assert_int_equal(st, KVC_OK);
    assert_memory_equal(got.data(), named.data(), got.size() * sizeof(float));
    print_message("KVC_CPU_ISA=%s: kernels ran on %s\n", env, kvc::cpu::isa_name(used));
}

}  // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_default),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_environment_honoured),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
