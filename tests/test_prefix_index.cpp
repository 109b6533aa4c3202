// The prefix index (lib/core/prefix_cache.hpp) under aimed hashes: block hashes use a fixed seed, so a
// client can compute them offline and choose prompts whose hashes share their low bits — with the
// probe start taken from those bits, every one of them would land in one run of the table. The
// index starts probes at a keyed mix of the whole hash instead; here thousands of entries share
// their whole low half (worse than any aiming), and the runs stay short while every entry is still
// found and erased correctly. Also: several blocks under one hash (copies), entered and erased in
// any order against a plain reference.
#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "core/prefix_cache.hpp"

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

// Copies: a reference (hash -> its blocks, newest first) against the index through random inserts
// and erases of any copy (newest, middle, oldest, last one), with a few hashes sharing their low
// half so that backward shifts move slots whose chains must follow. After every step: find gives
// the newest copy and says whether more follow, next_copy walks the rest in order, prev_copy walks
// back, and size / num_hashes count blocks / hashes.
void test_copies_against_a_reference(void **) {
    constexpr int32_t kN = 256, kHashes = 12;
    kvc::PrefixCache c;
    c.init(kN, kBlockSize);
    std::map<int32_t, std::vector<int32_t>> ref;  // hash index -> blocks, newest first
    std::vector<int32_t> hash_of(kN, -1);         // cached block -> hash index
    std::mt19937 rng(23);
    int64_t multi_erasures = 0;
    for (int step = 0; step < 40000; ++step) {
        const int32_t b = int32_t(rng() % kN);
        if (hash_of[size_t(b)] < 0) {
            const int32_t h = int32_t(rng() % kHashes);
            const std::vector<int32_t> t = tokens_of(h);
            c.insert(b, kvc::kRootHash, key_of(h), t.data());
            ref[h].insert(ref[h].begin(), b);
            hash_of[size_t(b)] = h;
        } else {
            const int32_t h = hash_of[size_t(b)];
            std::vector<int32_t> &v = ref[h];
            multi_erasures += v.size() > 1;
            c.erase(b);
            v.erase(std::find(v.begin(), v.end(), b));
            if (v.empty()) ref.erase(h);
            hash_of[size_t(b)] = -1;
        }
        int64_t blocks = 0;
        for (int32_t h = 0; h < kHashes; ++h) {
            bool more = true;
            const int32_t head = c.find(key_of(h).hash, &more);
            auto it = ref.find(h);
            if (it == ref.end()) {
                assert_int_equal(head, -1);
                assert_false(more);
                continue;
            }
            const std::vector<int32_t> &v = it->second;
            blocks += int64_t(v.size());
            assert_int_equal(head, v[0]);
            assert_int_equal(more, v.size() > 1);
            int32_t x = head, newer = -1;
            for (size_t k = 0; k < v.size(); ++k, newer = x, x = c.next_copy(x)) {
                assert_int_equal(x, v[k]);
                if (v.size() > 1) assert_int_equal(c.prev_copy(x), newer);
            }
            assert_int_equal(x, -1);
        }
        assert_int_equal(c.size(), blocks);
        assert_int_equal(c.num_hashes(), int64_t(ref.size()));
    }
    assert_true(multi_erasures > 1000);  // the erasures of a copy among others did happen
}

}  // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aimed_hashes_keep_short_runs),
        cmocka_unit_test(test_erase_and_reinsert),
        cmocka_unit_test(test_copies_against_a_reference),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
