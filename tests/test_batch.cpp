// Batch metadata (kvc_batch_*): padded tables, seq_lens, query_start_loc, slot mapping and CSR
// form against what the pool reports per sequence; incremental upload row counts; failed builds
// keep the previous step's metadata; many builds in a row through the two alternating host
// buffers; capacity and argument errors; kvc_batch_set_stream off CUDA.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kvc/kvc.h"

extern "C" {
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
}

#define OK(call)                                                                                         \
    do {                                                                                                 \
        kvc_status st_ = (call);                                                                         \
        if (st_ != KVC_OK) fail_msg("%s -> %s: %s", #call, kvc_status_str(st_), kvc_last_error());     \
    } while (0)

#define EXPECT_ERR(call, code)                                                                           \
    do {                                                                                                 \
        (void)kvc_pool_config_default(nullptr);                                                          \
        kvc_status st_ = (call);                                                                         \
        if (st_ != (code))                                                                               \
            fail_msg("%s -> %s, expected %s: %s", #call, kvc_status_str(st_), kvc_status_str(code),      \
                     kvc_last_error());                                                                  \
        if (std::strcmp(kvc_last_error(), "kvc_pool_config_default: cfg is NULL") == 0)                  \
            fail_msg("%s left no message of its own", #call);                                           \
    } while (0)

namespace {

constexpr int32_t kBs = 4, kMaxSeqs = 6, kWidth = 8;
constexpr int64_t kMaxTokens = 40;

struct Fixture {
    kvc_pool *pool = nullptr;
    kvc_batch *batch = nullptr;
    explicit Fixture(int32_t backend) {
        kvc_pool_config c;
        OK(kvc_pool_config_default(&c));
        c.block_size = kBs;
        c.num_blocks = 64;
        c.head_dim = 8;
        c.prefix_caching = 0;
        c.watermark = 0;
        c.backend = backend;
        OK(kvc_pool_create(&c, &pool));
        OK(kvc_batch_create(pool, kMaxSeqs, kMaxTokens, kWidth, &batch));
    }
    ~Fixture() {
        kvc_batch_destroy(batch);
        kvc_pool_destroy(pool);
    }
};

kvc_batch_info info_of(const kvc_batch *b) {
    kvc_batch_info i;
    std::memset(&i, 0, sizeof i);
    i.struct_size = sizeof i;
    OK(kvc_batch_get_info(b, &i));
    return i;
}

template <class T>
std::vector<T> device_array(uint64_t addr, int64_t n) {  // CPU backend: "device" arrays are host memory
    const T *p = reinterpret_cast<const T *>(uintptr_t(addr));
    return std::vector<T>(p, p + n);
}

// Checks every array of the last build against the pool's own view of each sequence.
void check_metadata(kvc_pool *pool, const kvc_batch *b, const std::vector<uint64_t> &ids, const std::vector<int64_t> &q) {
    const kvc_batch_info in = info_of(b);
    const int32_t n = int32_t(ids.size());
    assert_int_equal(in.num_seqs, n);
    assert_int_equal(in.max_blocks_per_seq, kWidth);
    std::vector<int32_t> tables(size_t(n) * kWidth);
    OK(kvc_batch_copy_block_tables(b, tables.data(), int64_t(tables.size())));
    assert_memory_equal(tables.data(), device_array<int32_t>(in.block_tables, n * kWidth).data(), tables.size() * 4);
    auto seq_lens = device_array<int32_t>(in.seq_lens, n);
    auto qsl = device_array<int32_t>(in.query_start_loc, n + 1);
    auto indptr = device_array<int32_t>(in.kv_indptr, n + 1);
    auto indices = device_array<int32_t>(in.kv_indices, in.num_indices);
    auto last = device_array<int32_t>(in.kv_last_page_len, n);
    std::vector<int64_t> slots(static_cast<size_t>(in.num_tokens));
    OK(kvc_batch_copy_slot_mapping(b, slots.data(), in.num_tokens));
    assert_memory_equal(slots.data(), device_array<int64_t>(in.slot_mapping, in.num_tokens).data(), slots.size() * 8);

    int64_t tok = 0, idx = 0, max_len = 0;
    int32_t max_q = 0;
    assert_int_equal(qsl[0], 0);
    assert_int_equal(indptr[0], 0);
    for (int32_t i = 0; i < n; ++i) {
        int64_t len = 0, nblocks = 0;
        OK(kvc_seq_num_tokens(pool, ids[size_t(i)], &len));
        OK(kvc_seq_block_table(pool, ids[size_t(i)], nullptr, 0, &nblocks));
        std::vector<int32_t> table(static_cast<size_t>(nblocks));
        OK(kvc_seq_block_table(pool, ids[size_t(i)], table.data(), nblocks, &nblocks));
        const int64_t used = (len + kBs - 1) / kBs;
        assert_int_equal(seq_lens[size_t(i)], len);
        for (int64_t c = 0; c < kWidth; ++c)
            assert_int_equal(tables[size_t(i) * kWidth + size_t(c)], c < used ? table[size_t(c)] : -1);
        assert_int_equal(indptr[size_t(i) + 1] - indptr[size_t(i)], used);
        for (int64_t c = 0; c < used; ++c) assert_int_equal(indices[size_t(idx + c)], table[size_t(c)]);
        idx += used;
        assert_int_equal(last[size_t(i)], len - (used - 1) * kBs);
        std::vector<int64_t> want(static_cast<size_t>(q[size_t(i)]));
        OK(kvc_seq_slot_mapping(pool, ids[size_t(i)], len - q[size_t(i)], q[size_t(i)], want.data(), q[size_t(i)]));
        assert_memory_equal(&slots[size_t(tok)], want.data(), want.size() * 8);
        tok += q[size_t(i)];
        assert_int_equal(qsl[size_t(i) + 1], tok);
        max_len = std::max(max_len, len);
        max_q = std::max<int32_t>(max_q, int32_t(q[size_t(i)]));
    }
    assert_int_equal(in.num_tokens, tok);
    assert_int_equal(in.num_indices, idx);
    assert_int_equal(in.max_seq_len, max_len);
    assert_int_equal(in.max_q_len, max_q);
    assert_int_equal(in.is_decode, max_q == 1 ? 1 : 0);
}

void test_metadata_matches_pool(void **) {
    for (int32_t backend : {KVC_BACKEND_CPU, KVC_BACKEND_NONE}) {  // metadata-only pools build batches too
        Fixture f(backend);
        OK(kvc_alloc(f.pool, 10, nullptr, 9, nullptr, nullptr));   // 3 blocks, last holds 1
        OK(kvc_alloc(f.pool, 20, nullptr, 4, nullptr, nullptr));   // exactly 1 full block
        OK(kvc_alloc(f.pool, 30, nullptr, 17, nullptr, nullptr));  // 5 blocks
        OK(kvc_append(f.pool, 20, nullptr, 0, 3, nullptr));        // lookahead: not in the context
        const std::vector<uint64_t> ids = {30, 10, 20};
        const std::vector<int64_t> q = {17, 2, 1};
        OK(kvc_batch_build(f.batch, ids.data(), q.data(), 3));
        check_metadata(f.pool, f.batch, ids, q);
        const std::vector<int64_t> d = {1, 1, 1};
        OK(kvc_batch_build(f.batch, ids.data(), d.data(), 3));
        check_metadata(f.pool, f.batch, ids, d);
    }
}

void test_incremental_upload(void **) {
    Fixture f(KVC_BACKEND_CPU);
    for (uint64_t id = 1; id <= 4; ++id) OK(kvc_alloc(f.pool, id, nullptr, 3, nullptr, nullptr));
    std::vector<uint64_t> ids = {1, 2, 3, 4};
    std::vector<int64_t> q = {1, 1, 1, 1};
    OK(kvc_batch_build(f.batch, ids.data(), q.data(), 4));
    assert_int_equal(info_of(f.batch).rows_uploaded, 4);  // first build: everything
    OK(kvc_batch_build(f.batch, ids.data(), q.data(), 4));
    assert_int_equal(info_of(f.batch).rows_uploaded, 0);  // nothing changed
    // Decode step: every sequence grows 3 -> 4 tokens, same blocks: tables unchanged.
    for (uint64_t id : ids) OK(kvc_append(f.pool, id, nullptr, 1, 0, nullptr));
    OK(kvc_batch_build(f.batch, ids.data(), q.data(), 4));
    assert_int_equal(info_of(f.batch).rows_uploaded, 0);
    check_metadata(f.pool, f.batch, ids, q);
    // Sequences 2 and 4 cross a block boundary: exactly their rows are sent.
    OK(kvc_append(f.pool, 2, nullptr, 1, 0, nullptr));
    OK(kvc_append(f.pool, 4, nullptr, 1, 0, nullptr));
    OK(kvc_batch_build(f.batch, ids.data(), q.data(), 4));
    assert_int_equal(info_of(f.batch).rows_uploaded, 2);
    check_metadata(f.pool, f.batch, ids, q);
    // Dropping the last sequence changes no remaining row; swapping two rows changes both.
    OK(kvc_batch_build(f.batch, ids.data(), q.data(), 3));
    assert_int_equal(info_of(f.batch).rows_uploaded, 0);
    std::vector<uint64_t> swapped = {2, 1, 3};
    OK(kvc_batch_build(f.batch, swapped.data(), q.data(), 3));
    assert_int_equal(info_of(f.batch).rows_uploaded, 2);
    check_metadata(f.pool, f.batch, swapped, {1, 1, 1});
}

void test_failed_build_keeps_previous(void **) {
    Fixture f(KVC_BACKEND_CPU);
    OK(kvc_alloc(f.pool, 1, nullptr, 6, nullptr, nullptr));
    OK(kvc_alloc(f.pool, 2, nullptr, 30, nullptr, nullptr));
    OK(kvc_alloc(f.pool, 3, nullptr, 33, nullptr, nullptr));  // 9 blocks: wider than the batch rows
    const std::vector<uint64_t> ids = {1, 2};
    const std::vector<int64_t> q = {6, 3};
    OK(kvc_batch_build(f.batch, ids.data(), q.data(), 2));
    const kvc_batch_info before = info_of(f.batch);
    std::vector<int32_t> tables(2 * kWidth);
    OK(kvc_batch_copy_block_tables(f.batch, tables.data(), int64_t(tables.size())));
    std::vector<int64_t> slots(9);
    OK(kvc_batch_copy_slot_mapping(f.batch, slots.data(), 9));
    auto dev_tables = device_array<int32_t>(before.block_tables, 2 * kWidth);

    struct Case { std::vector<uint64_t> ids; std::vector<int64_t> q; kvc_status code; };
    const Case cases[] = {
        {{2, 99}, {1, 1}, KVC_ERR_UNKNOWN_SEQ},
        {{2, 1, 2}, {1, 1, 1}, KVC_ERR_INVALID_ARG},   // duplicate id
        {{2, 1}, {1, 0}, KVC_ERR_INVALID_ARG},         // q_len < 1
        {{1, 2}, {7, 1}, KVC_ERR_INVALID_ARG},         // q_len > the sequence's tokens
        {{2, 3}, {1, 1}, KVC_ERR_BUFFER_TOO_SMALL},    // table wider than max_blocks_per_seq
    };
    for (const Case &c : cases) {
        EXPECT_ERR(kvc_batch_build(f.batch, c.ids.data(), c.q.data(), int32_t(c.ids.size())), c.code);
    }
    OK(kvc_alloc(f.pool, 4, nullptr, 12, nullptr, nullptr));
    const uint64_t big_ids[] = {2, 4};
    const int64_t big_q[] = {30, 11};  // 41 > kMaxTokens
    EXPECT_ERR(kvc_batch_build(f.batch, big_ids, big_q, 2), KVC_ERR_BUFFER_TOO_SMALL);
    const uint64_t many[kMaxSeqs + 1] = {1, 2, 3, 4, 5, 6, 7};
    const int64_t ones[kMaxSeqs + 1] = {1, 1, 1, 1, 1, 1, 1};
    EXPECT_ERR(kvc_batch_build(f.batch, many, ones, kMaxSeqs + 1), KVC_ERR_INVALID_ARG);
    EXPECT_ERR(kvc_batch_build(f.batch, many, ones, 0), KVC_ERR_INVALID_ARG);
    EXPECT_ERR(kvc_batch_build(f.batch, nullptr, ones, 1), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_batch_build(f.batch, many, nullptr, 1), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_batch_build(nullptr, many, ones, 1), KVC_ERR_NULL_ARG);

    // Everything of the last good build is intact, on the host and in the "device" arrays.
    const kvc_batch_info after = info_of(f.batch);
    assert_memory_equal(&before, &after, sizeof before);
    std::vector<int32_t> tables2(2 * kWidth);
    OK(kvc_batch_copy_block_tables(f.batch, tables2.data(), int64_t(tables2.size())));
    assert_memory_equal(tables.data(), tables2.data(), tables.size() * 4);
    std::vector<int64_t> slots2(9);
    OK(kvc_batch_copy_slot_mapping(f.batch, slots2.data(), 9));
    assert_memory_equal(slots.data(), slots2.data(), slots.size() * 8);
    assert_memory_equal(dev_tables.data(), device_array<int32_t>(after.block_tables, 2 * kWidth).data(),
                        dev_tables.size() * 4);
    check_metadata(f.pool, f.batch, ids, q);
}

// Thirty builds in a row with the batch changing every step (sequences join, leave, grow across
// blocks, change rows), a failed build every third step: the build alternates two host buffers
// and keeps a mirror of the device table, so this checks every array after every build, and that
// rows_uploaded is exactly the number of rows that differ from what the device table holds (a
// model of it kept here: a failed validation uploads nothing).
void test_many_builds_alternating_buffers(void **) {
    Fixture f(KVC_BACKEND_CPU);
    std::vector<uint64_t> live;
    std::vector<std::vector<int32_t>> device_rows(kMaxSeqs);  // what the "device" table row holds
    uint64_t next_id = 100;
    for (int step = 0; step < 30; ++step) {
        // Sequences finish: the oldest every fourth step, and any about to outgrow the batch rows.
        for (size_t i = live.size(); i-- > 0;) {
            int64_t len = 0;
            OK(kvc_seq_num_tokens(f.pool, live[i], &len));
            if (len >= kBs * kWidth - 2 || (i == 0 && step % 4 == 3)) {
                OK(kvc_free(f.pool, live[i]));
                live.erase(live.begin() + long(i));
            }
        }
        std::vector<int64_t> q;
        for (uint64_t id : live) {
            OK(kvc_append(f.pool, id, nullptr, 1, 0, nullptr));
            q.push_back(1);
        }
        if (live.size() < size_t(kMaxSeqs) && step % 3 != 1) {  // a new sequence with its prompt
            const int64_t len = 1 + (step * 5) % 8;
            OK(kvc_alloc(f.pool, next_id, nullptr, len, nullptr, nullptr));
            live.push_back(next_id++);
            q.push_back(len);
        }
        // Rows move: rotate the order (and the q_lens with it).
        const size_t by = size_t(step) % live.size();
        std::rotate(live.begin(), live.begin() + by, live.end());
        std::rotate(q.begin(), q.begin() + by, q.end());
        if (step % 3 == 2) {
            std::vector<uint64_t> bad = live;
            bad.back() = 99999;  // unknown: fails after the earlier rows were staged
            EXPECT_ERR(kvc_batch_build(f.batch, bad.data(), q.data(), int32_t(bad.size())), KVC_ERR_UNKNOWN_SEQ);
        }
        OK(kvc_batch_build(f.batch, live.data(), q.data(), int32_t(live.size())));
        check_metadata(f.pool, f.batch, live, q);

        std::vector<int32_t> tables(live.size() * kWidth);
        OK(kvc_batch_copy_block_tables(f.batch, tables.data(), int64_t(tables.size())));
        int32_t changed = 0;
        for (size_t r = 0; r < live.size(); ++r) {
            std::vector<int32_t> row(tables.begin() + long(r * kWidth), tables.begin() + long((r + 1) * kWidth));
            if (row != device_rows[r]) ++changed;
            device_rows[r] = row;
        }
        assert_int_equal(info_of(f.batch).rows_uploaded, changed);
    }
}

void test_batch_api_errors(void **) {
    Fixture f(KVC_BACKEND_CPU);
    kvc_batch *b = nullptr;
    EXPECT_ERR(kvc_batch_create(nullptr, 1, 1, 1, &b), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_batch_create(f.pool, 1, 1, 1, nullptr), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_batch_create(f.pool, 0, 1, 1, &b), KVC_ERR_INVALID_ARG);
    EXPECT_ERR(kvc_batch_create(f.pool, 1, 0, 1, &b), KVC_ERR_INVALID_ARG);
    EXPECT_ERR(kvc_batch_create(f.pool, 1, 1, -4, &b), KVC_ERR_INVALID_ARG);
    EXPECT_ERR(kvc_batch_create(f.pool, 1 << 20, 1, 1 << 20, &b), KVC_ERR_OVERFLOW);
    EXPECT_ERR(kvc_batch_create(f.pool, 1, int64_t(1) << 40, 1, &b), KVC_ERR_OVERFLOW);
    assert_null(b);
    OK(kvc_batch_destroy(nullptr));

    kvc_batch_info in;
    in.struct_size = sizeof in;
    EXPECT_ERR(kvc_batch_get_info(f.batch, &in), KVC_ERR_STATE);  // never built
    EXPECT_ERR(kvc_batch_get_info(nullptr, &in), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_batch_get_info(f.batch, nullptr), KVC_ERR_NULL_ARG);
    int64_t s[4];
    int32_t t[64];
    EXPECT_ERR(kvc_batch_copy_slot_mapping(f.batch, s, 4), KVC_ERR_STATE);
    EXPECT_ERR(kvc_batch_copy_block_tables(f.batch, t, 64), KVC_ERR_STATE);

    OK(kvc_alloc(f.pool, 1, nullptr, 5, nullptr, nullptr));
    const uint64_t id = 1;
    const int64_t q = 3;
    OK(kvc_batch_build(f.batch, &id, &q, 1));
    in.struct_size = sizeof in - 8;
    EXPECT_ERR(kvc_batch_get_info(f.batch, &in), KVC_ERR_VERSION);
    EXPECT_ERR(kvc_batch_copy_slot_mapping(f.batch, s, 2), KVC_ERR_BUFFER_TOO_SMALL);
    EXPECT_ERR(kvc_batch_copy_slot_mapping(f.batch, nullptr, 4), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_batch_copy_slot_mapping(nullptr, s, 4), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_batch_copy_block_tables(f.batch, t, kWidth - 1), KVC_ERR_BUFFER_TOO_SMALL);
    EXPECT_ERR(kvc_batch_copy_block_tables(f.batch, nullptr, 64), KVC_ERR_NULL_ARG);
    OK(kvc_batch_copy_slot_mapping(f.batch, s, 3));
    OK(kvc_batch_copy_block_tables(f.batch, t, kWidth));
}

// kvc_batch_set_stream off CUDA: accepted (any pointer: the stream is only ever handed to CUDA) and
// without effect on what builds produce, on storage and metadata-only pools alike.
void test_set_stream_ignored_off_cuda(void **) {
    for (int32_t backend : {KVC_BACKEND_CPU, KVC_BACKEND_NONE}) {
        Fixture plain(backend), streamed(backend);
        int dummy_stream = 0;  // never dereferenced: any non-NULL address stands for a cudaStream_t
        OK(kvc_batch_set_stream(streamed.batch, &dummy_stream));
        for (Fixture *f : {&plain, &streamed}) {
            OK(kvc_alloc(f->pool, 7, nullptr, 13, nullptr, nullptr));
            OK(kvc_alloc(f->pool, 8, nullptr, 3, nullptr, nullptr));
        }
        const std::vector<uint64_t> ids = {8, 7};
        std::vector<int64_t> q = {3, 13};
        for (int step = 0; step < 3; ++step) {
            for (Fixture *f : {&plain, &streamed}) {
                OK(kvc_batch_build(f->batch, ids.data(), q.data(), 2));
                check_metadata(f->pool, f->batch, ids, q);
            }
            const kvc_batch_info a = info_of(plain.batch), b = info_of(streamed.batch);
            assert_int_equal(a.num_tokens, b.num_tokens);
            assert_int_equal(a.num_indices, b.num_indices);
            assert_int_equal(a.rows_uploaded, b.rows_uploaded);
            assert_memory_equal(device_array<int32_t>(a.block_tables, 2 * kWidth).data(),
                                device_array<int32_t>(b.block_tables, 2 * kWidth).data(), 2 * kWidth * 4);
            assert_memory_equal(device_array<int64_t>(a.slot_mapping, a.num_tokens).data(),
                                device_array<int64_t>(b.slot_mapping, b.num_tokens).data(), size_t(a.num_tokens) * 8);
            assert_memory_equal(device_array<int32_t>(a.kv_indices, a.num_indices).data(),
                                device_array<int32_t>(b.kv_indices, b.num_indices).data(), size_t(a.num_indices) * 4);
            // Next step: decode, every sequence one token longer (7 crosses into a new block at 17).
            for (Fixture *f : {&plain, &streamed})
                for (uint64_t id : ids) OK(kvc_append(f->pool, id, nullptr, step == 0 ? 4 : 1, 0, nullptr));
            q = {1, 1};
        }
        OK(kvc_batch_set_stream(streamed.batch, nullptr));  // back to the default stream
        OK(kvc_batch_build(streamed.batch, ids.data(), q.data(), 2));
        check_metadata(streamed.pool, streamed.batch, ids, q);
    }
}

void test_set_stream_errors(void **) {
    int dummy_stream = 0;
    EXPECT_ERR(kvc_batch_set_stream(nullptr, &dummy_stream), KVC_ERR_NULL_ARG);
    assert_non_null(std::strstr(kvc_last_error(), "kvc_batch_set_stream"));
    EXPECT_ERR(kvc_batch_set_stream(nullptr, nullptr), KVC_ERR_NULL_ARG);
    assert_non_null(std::strstr(kvc_last_error(), "kvc_batch_set_stream"));
}

}  // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metadata_matches_pool),
        cmocka_unit_test(test_incremental_upload),
        cmocka_unit_test(test_failed_build_keeps_previous),
        cmocka_unit_test(test_many_builds_alternating_buffers),
        cmocka_unit_test(test_batch_api_errors),
        cmocka_unit_test(test_set_stream_ignored_off_cuda),
        cmocka_unit_test(test_set_stream_errors),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
