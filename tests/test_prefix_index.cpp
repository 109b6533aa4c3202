// The prefix index (lib/prefix_cache.hpp) under aimed hashes: block hashes use a fixed seed, so a
// client can compute them offline and choose prompts whose hashes share their low bits — with the
// probe start taken from those bits, every one of them would land in one run of the table. The
// index starts probes at a keyed mix of the whole hash instead; here thousands of entries share
// their whole low half (worse than any aiming), and the runs stay short while every entry is still
// found and erased correctly.
#include <vector>

#include "prefix_cache.hpp"

extern "C" {
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
}

namespace {

constexpr int32_t kBlocks = 4096, kBlockSize = 4;

kvc::BlockKey key_of(int32_t i) {
    kvc::BlockKey k;
    k.hash = kvc::Hash128{0x1000 + uint64_t(i) * 0x10001, 0x5eed5eed5eed5eedull};  // one low half for all
    return k;
}

std::vector<int32_t> tokens_of(int32_t i) { return std::vector<int32_t>(kBlockSize, i); }

void insert_all(kvc::PrefixCache &c, int32_t from, int32_t to) {
    for (int32_t i = from; i < to; ++i) {
        const std::vector<int32_t> t = tokens_of(i);
        c.insert(i, kvc::kRootHash, key_of(i), t.data());
    }
}

void expect_found(const kvc::PrefixCache &c, int32_t i, bool present) {
    const kvc::BlockKey k = key_of(i);
    const int32_t b = c.find(k.hash);
    if (!present) {
        assert_int_equal(b, -1);
        return;
    }
    assert_int_equal(b, i);
    const std::vector<int32_t> t = tokens_of(i);
    assert_true(c.verify(b, kvc::kRootHash, k, t.data()));
}

// Linear probing at load 1/2 with well-spread starts: the longest displacement of 4096 entries is
// a few dozen at most (its expectation is about 2 ln n ~ 17); with the starts taken from the
// shared low half it would be 4095, every find walking up to the whole run.
constexpr int64_t kShortRun = 200;

void test_aimed_hashes_keep_short_runs(void **) {
    kvc::PrefixCache c;
    c.init(kBlocks, kBlockSize);
    insert_all(c, 0, kBlocks);
    assert_int_equal(c.size(), kBlocks);
    assert_true(c.longest_displacement() < kShortRun);
    for (int32_t i = 0; i < kBlocks; ++i) expect_found(c, i, true);
}

// Erasure (backward shift) must use the same probe start: after erasing every other entry, the
// rest are found, the erased ones are not, and re-inserting them restores the whole set.
void test_erase_and_reinsert(void **) {
    kvc::PrefixCache c;
    c.init(kBlocks, kBlockSize);
    insert_all(c, 0, kBlocks);
    for (int32_t i = 0; i < kBlocks; i += 2) c.erase(i);
    assert_int_equal(c.size(), kBlocks / 2);
    for (int32_t i = 0; i < kBlocks; ++i) expect_found(c, i, i % 2 == 1);
    assert_true(c.longest_displacement() < kShortRun);
    for (int32_t i = 0; i < kBlocks; i += 2) {
        const std::vector<int32_t> t = tokens_of(i);
        c.insert(i, kvc::kRootHash, key_of(i), t.data());
    }
    for (int32_t i = 0; i < kBlocks; ++i) expect_found(c, i, true);
    c.clear();
    for (int32_t i = 0; i < kBlocks; ++i) expect_found(c, i, false);
}

}  // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aimed_hashes_keep_short_runs),
        cmocka_unit_test(test_erase_and_reinsert),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
