// End-to-end through the public API on the CPU backend: pool -> alloc/append/fork -> batch build ->
// kvc_cache_write -> kvc_launch_attention, compared with the dense reference; and every bad-input
// status of the storage / batch / attention entry points.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels_world.hpp"

// Fails unless `call` returns `code` with a fresh message naming `fn`.
#define EXPECT_ERR(call, code, fn)                                                                       \
    do {                                                                                                 \
        (void)kvc_pool_config_default(nullptr); /* plant another message */                           \
        kvc_status st_ = (call);                                                                         \
        if (st_ != (code))                                                                               \
            fail_msg("%s -> %s, expected %s: %s", #call, kvc_status_str(st_), kvc_status_str(code),      \
                     kvc_last_error());                                                                  \
        if (!std::strstr(kvc_last_error(), fn)) fail_msg("%s: message '%s' does not name %s", #call,     \
                                                         kvc_last_error(), fn);                          \
    } while (0)

namespace {

using kvc_test::kLayer;
using kvc_test::kLayers;
using kvc_test::World;

// Prefill of three prompts, then decode steps; f16 cache, f16 and bf16 queries, split and not.
void test_e2e_prefill_then_decode(void **) {
    World w(16, 4, 16, 64, KVC_DTYPE_F16, 128, 0);
    const std::vector<uint64_t> ids = {7, 3, 11};
    const std::vector<int64_t> lens = {37, 16, 120};
    for (size_t i = 0; i < ids.size(); ++i) OK(kvc_alloc(w.pool, ids[i], nullptr, lens[i], nullptr, nullptr));
    w.step(ids, lens, KVC_DTYPE_F16, -1);
    for (int s = 0; s < 20; ++s) {
        for (uint64_t id : ids) w.append(id, 1);
        w.step(ids, {1, 1, 1}, s % 2 ? KVC_DTYPE_BF16 : KVC_DTYPE_F16, s % 3 == 0 ? 8 : 0);
    }
    // Chunked prefill: 50 more tokens of sequence 3 on top of its cached context, next to a decode.
    w.append(3, 50);
    w.append(7, 1);
    w.step({3, 7}, {50, 1}, KVC_DTYPE_F16, 0);
    OK(kvc_pool_check(w.pool));
}

// Sliding window with block release (kvc_pool_set_sliding_window): three sequences decode far
// past the window in a pool too small to hold them whole, so released blocks are reused by the
// others (and by fresh sequences) while attention stays equal to the dense windowed reference.
// Mixed steps (chunked prefill next to decode) and split-K partitions included; a fork shares
// the released prefix.
void test_e2e_sliding_window_releases_blocks(void **) {
    constexpr int32_t kBs = 4, kWindow = 10, kBlocks = 24;
    World w(kBs, 2, 8, 64, KVC_DTYPE_F16, kBlocks, 1);
    OK(kvc_pool_set_sliding_window(w.pool, kWindow));
    w.window = kWindow;
    const std::vector<uint64_t> ids = {1, 2, 3};
    std::vector<int32_t> t = w.tokens(16);  // prompts t[id .. id + 12), id <= 3
    for (uint64_t id : ids) OK(kvc_alloc(w.pool, id, t.data() + id, 12, nullptr, nullptr));
    w.step(ids, {12, 12, 12}, KVC_DTYPE_F16, -1);
    for (int s = 0; s < 60; ++s) {  // 72 tokens each: 54 blocks unwindowed, the pool has 24
        for (uint64_t id : ids) w.append(id, 1);
        w.step(ids, {1, 1, 1}, s % 2 ? KVC_DTYPE_BF16 : KVC_DTYPE_F16, s % 3 == 0 ? 4 : 0);
        if (s % 10 == 0) OK(kvc_pool_check(w.pool));
    }
    // Each holds only the blocks from (70 - 10 + 1) / 4 = 15 on (the append of token 71 releases
    // what the previous call's token, 70, no longer sees): 3 of its 18 table entries.
    for (uint64_t id : ids) {
        int32_t table[32];
        int64_t n = 0;
        OK(kvc_seq_block_table(w.pool, id, table, 32, &n));
        assert_int_equal(n, 18);
        for (int64_t i = 0; i < n; ++i)
            if ((table[i] < 0) != (i < 15)) fail_msg("sequence %llu entry %lld is %d", (unsigned long long)id, (long long)i, table[i]);
    }
    // A chunked prefill of 9 tokens next to decodes: its first query (position 72) sees from 63.
    w.append(2, 9);
    w.append(1, 1);
    w.append(3, 1);
    w.step({2, 1, 3}, {9, 1, 1}, KVC_DTYPE_F16, 0);
    // A fork shares the released prefix and the window; both go on decoding.
    OK(kvc_fork(w.pool, 3, 4));
    w.k[4] = w.k[3];
    w.v[4] = w.v[3];
    int64_t pending = 0;
    for (int s = 0; s < 12; ++s) {
        w.append(3, 1);
        w.append(4, 1);
        OK(kvc_copy_pending(w.pool, nullptr, &pending));
        w.step({3, 4}, {1, 1}, KVC_DTYPE_F16, s % 2 ? 4 : 0);
    }
    // Launch windows the released blocks forbid: none (0) and wider than the pool's.
    std::vector<uint8_t> q(size_t(2 * 8 * 64 * 2)), out(q.size());
    kvc_attention_params ap;
    OK(kvc_attention_params_default(&ap));
    ap.sliding_window = 0;
    EXPECT_ERR(kvc_launch_attention(w.pool, w.batch, kLayer, q.data(), out.data(), &ap, nullptr), KVC_ERR_INVALID_ARG,
               "kvc_launch_attention");
    ap.sliding_window = kWindow + 1;
    EXPECT_ERR(kvc_launch_attention(w.pool, w.batch, kLayer, q.data(), out.data(), &ap, nullptr), KVC_ERR_INVALID_ARG,
               "kvc_launch_attention");
    // A query reaching into released blocks is refused at build time: sequence 3 has 85 tokens,
    // its last append (at 84, after one at 83) released the blocks before (83 - 10 + 1) / 4 = 18,
    // i.e. position 72.
    const uint64_t id3 = 3;
    int64_t q_len = 13;  // starts at 72: its own slot is still there
    OK(kvc_batch_build(w.batch, &id3, &q_len, 1));
    q_len = 14;  // starts at 71
    EXPECT_ERR(kvc_batch_build(w.batch, &id3, &q_len, 1), KVC_ERR_INVALID_ARG, "kvc_batch_build");
    for (uint64_t id : {1, 2, 3, 4}) OK(kvc_free(w.pool, id));
    OK(kvc_pool_check(w.pool));
}

// Window-aware prefix hit: a prompt whose leading blocks were evicted still hits through the
// blocks its first uncached token's window reads (kvc_pool_set_sliding_window). Its table starts
// with -1 entries and is longer than the pool; the prefill of its uncached tail, batched with the
// first sequence's decode, must equal the dense windowed reference over the shared K/V.
void test_e2e_window_prefix_hit(void **) {
    constexpr int32_t kBs = 4, kWindow = 10, kBlocks = 12;
    World w(kBs, 2, 8, 64, KVC_DTYPE_F16, kBlocks, 1);
    OK(kvc_pool_set_sliding_window(w.pool, kWindow));
    w.window = kWindow;
    std::vector<int32_t> t = w.tokens(80);
    OK(kvc_alloc(w.pool, 1, t.data(), 12, nullptr, nullptr));
    w.step({1}, {12}, KVC_DTYPE_F16, -1);
    for (int64_t pos = 12; pos < 60; ++pos) {  // 15 blocks in a 12-block pool: early ones evicted
        OK(kvc_append(w.pool, 1, t.data() + pos, 1, 0, nullptr));
        w.step({1}, {1}, KVC_DTYPE_F16, pos % 3 == 0 ? 4 : 0);
    }
    // 67 tokens: block 15 (60..63) is not cached, so the hit ends with block 14 (c = 60), whose
    // window from 51 needs blocks 12..14 -- held by sequence 1. Block 0 is long gone.
    int64_t cached = -1;
    OK(kvc_alloc(w.pool, 2, t.data(), 67, nullptr, &cached));
    assert_int_equal(cached, 60);
    int32_t table[32];
    int64_t n = 0;
    OK(kvc_seq_block_table(w.pool, 2, table, 32, &n));
    assert_int_equal(n, 17);
    for (int64_t i = 0; i < n; ++i)
        if ((table[i] < 0) != (i < 12)) fail_msg("entry %lld is %d", (long long)i, table[i]);
    w.k[2] = w.k[1];  // positions 0..59 as sequence 1 wrote them (only 51.. are read)
    w.v[2] = w.v[1];
    OK(kvc_append(w.pool, 1, t.data() + 60, 1, 0, nullptr));
    w.step({2, 1}, {7, 1}, KVC_DTYPE_F16, 0);
    w.step({2, 1}, {7, 1}, KVC_DTYPE_BF16, 4);  // the same step again, split-K
    for (int s = 0; s < 6; ++s) {
        w.append(1, 1);
        w.append(2, 1);
        w.step({1, 2}, {1, 1}, KVC_DTYPE_F16, s % 2 ? 4 : 0);
    }
    OK(kvc_pool_check(w.pool));
}

// Prefix caching + fork: the child shares the parent's blocks; appending into the shared partial
// block queues a copy-on-write pair, kvc_copy_pending copies it, and attention over the child is
// still right (it reads the copied block).
void test_e2e_fork_copy_on_write(void **) {
    World w(8, 2, 8, 128, KVC_DTYPE_BF16, 64, 1);
    std::vector<int32_t> prompt = w.tokens(29);  // 3 full blocks + 5 tokens in a partial block
    OK(kvc_alloc(w.pool, 1, prompt.data(), 29, nullptr, nullptr));
    w.step({1}, {29}, KVC_DTYPE_F32, -1);
    OK(kvc_fork(w.pool, 1, 2));
    w.k[2] = w.k[1];
    w.v[2] = w.v[1];
    w.append(2, 1);  // writes into the shared partial block: copy-on-write
    int64_t pending = -1;
    OK(kvc_take_pending_copies(w.pool, nullptr, nullptr, 0, &pending));
    assert_int_equal(pending, 1);
    int64_t copied = -1;
    OK(kvc_copy_pending(w.pool, nullptr, &copied));
    assert_int_equal(copied, 1);
    OK(kvc_take_pending_copies(w.pool, nullptr, nullptr, 0, &pending));
    assert_int_equal(pending, 0);
    w.append(1, 1);
    w.step({1, 2}, {1, 1}, KVC_DTYPE_F16, -1);
    // A second prompt with the same prefix hits the cache: only its uncached part is computed.
    int64_t cached = 0;
    std::vector<int32_t> p2(prompt.begin(), prompt.end());
    p2.push_back(5);
    p2.push_back(6);
    OK(kvc_alloc(w.pool, 3, p2.data(), int64_t(p2.size()), nullptr, &cached));
    assert_int_equal(cached, 24);
    w.k[3] = w.k[1];
    w.v[3] = w.v[1];
    w.k[3].resize(size_t(24) * 2 * 128);
    w.v[3].resize(size_t(24) * 2 * 128);
    w.step({3}, {int64_t(p2.size()) - cached}, KVC_DTYPE_BF16, -1);
    OK(kvc_pool_check(w.pool));
}

// FP8 cache with per-tensor scales, block size 1 and a long context with auto split-K.
void test_e2e_fp8_and_long_context(void **) {
    World w(1, 1, 4, 80, KVC_DTYPE_FP8_E4M3, 3000, 0);
    OK(kvc_alloc(w.pool, 42, nullptr, 2500, nullptr, nullptr));
    w.step({42}, {2500}, KVC_DTYPE_F16, -1, 0.01f, 0.005f);
    w.append(42, 1);
    w.step({42}, {1}, KVC_DTYPE_F16, 0, 0.01f, 0.005f);
}

void test_storage_info_and_copy_blocks(void **) {
    World w(16, 2, 2, 64, KVC_DTYPE_F16, 10, 0);
    kvc_storage_info si;
    si.struct_size = sizeof si;
    OK(kvc_storage_get_info(w.pool, &si));
    assert_int_equal(si.backend, KVC_BACKEND_CPU);
    assert_int_equal(si.device, -1);
    assert_int_equal(si.elem_bytes, 2);
    assert_int_equal(si.token_stride, 64 * 2);
    assert_int_equal(si.head_stride, 16 * 64 * 2);
    assert_int_equal(si.kv_stride, 2 * 16 * 64 * 2);
    assert_int_equal(si.layer_stride, 2 * si.kv_stride);
    assert_int_equal(si.block_stride, kLayers * si.layer_stride);
    assert_int_equal(si.total_bytes, 10 * si.block_stride);
    assert_true(si.base_address != 0);
    // Round trip: host -> blocks 3,4 (one run) and 8 -> host, byte-exact; neighbours untouched.
    const int32_t ids[] = {3, 4, 8};
    std::vector<uint8_t> src(static_cast<size_t>(3 * si.block_stride)), back(src.size());
    uint32_t x = 777;  // distinct per block: a 256-periodic pattern would not see blocks swapped
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t((x = x * 1103515245u + 12345u) >> 16);
    OK(kvc_storage_copy_blocks(w.pool, ids, 3, src.data(), 0));
    OK(kvc_storage_copy_blocks(w.pool, ids, 3, back.data(), 1));
    assert_memory_equal(src.data(), back.data(), src.size());
    const uint8_t *base = reinterpret_cast<const uint8_t *>(uintptr_t(si.base_address));
    assert_memory_equal(base + 8 * si.block_stride, src.data() + 2 * si.block_stride, size_t(si.block_stride));
    for (int64_t b : {int64_t(2), int64_t(5), int64_t(7), int64_t(9)})
        for (int64_t i = 0; i < si.block_stride; ++i) assert_int_equal(base[b * si.block_stride + i], 0);
    int32_t devices = -1;
    OK(kvc_cuda_device_count(&devices));
    assert_true(devices >= 0);
}

void test_bad_input_storage_calls(void **) {
    World w(16, 2, 4, 64, KVC_DTYPE_F16, 10, 0);
    kvc_pool_config c;
    OK(kvc_pool_config_default(&c));
    c.num_blocks = 4;
    kvc_pool *meta = nullptr;
    OK(kvc_pool_create(&c, &meta));  // backend NONE: metadata only

    EXPECT_ERR(kvc_cuda_device_count(nullptr), KVC_ERR_NULL_ARG, "kvc_cuda_device_count");
    kvc_storage_info si;
    si.struct_size = sizeof si;
    EXPECT_ERR(kvc_storage_get_info(nullptr, &si), KVC_ERR_NULL_ARG, "kvc_storage_get_info");
    EXPECT_ERR(kvc_storage_get_info(w.pool, nullptr), KVC_ERR_NULL_ARG, "kvc_storage_get_info");
    EXPECT_ERR(kvc_storage_get_info(meta, &si), KVC_ERR_STATE, "kvc_storage_get_info");
    si.struct_size = 12;
    EXPECT_ERR(kvc_storage_get_info(w.pool, &si), KVC_ERR_VERSION, "kvc_storage_get_info");

    std::vector<float> kv(size_t(3 * 2 * 64), 0.5f);
    int64_t slots[3] = {0, 5, 17};
    kvc_storage_info before;
    before.struct_size = sizeof before;
    OK(kvc_storage_get_info(w.pool, &before));
    std::vector<uint8_t> image(static_cast<size_t>(before.total_bytes));
    const uint8_t *base = reinterpret_cast<const uint8_t *>(uintptr_t(before.base_address));
    std::memcpy(image.data(), base, image.size());
    const char *cw = "kvc_cache_write";
    EXPECT_ERR(kvc_cache_write(nullptr, 0, slots, 3, kv.data(), kv.data(), KVC_DTYPE_F32, 1, 1, nullptr), KVC_ERR_NULL_ARG, cw);
    EXPECT_ERR(kvc_cache_write(w.pool, 0, nullptr, 3, kv.data(), kv.data(), KVC_DTYPE_F32, 1, 1, nullptr), KVC_ERR_NULL_ARG, cw);
    EXPECT_ERR(kvc_cache_write(w.pool, 0, slots, 3, nullptr, kv.data(), KVC_DTYPE_F32, 1, 1, nullptr), KVC_ERR_NULL_ARG, cw);
    EXPECT_ERR(kvc_cache_write(w.pool, 0, slots, 3, kv.data(), nullptr, KVC_DTYPE_F32, 1, 1, nullptr), KVC_ERR_NULL_ARG, cw);
    EXPECT_ERR(kvc_cache_write(w.pool, 2, slots, 3, kv.data(), kv.data(), KVC_DTYPE_F32, 1, 1, nullptr), KVC_ERR_INVALID_ARG, cw);
    EXPECT_ERR(kvc_cache_write(w.pool, -1, slots, 3, kv.data(), kv.data(), KVC_DTYPE_F32, 1, 1, nullptr), KVC_ERR_INVALID_ARG, cw);
    EXPECT_ERR(kvc_cache_write(w.pool, 0, slots, -1, kv.data(), kv.data(), KVC_DTYPE_F32, 1, 1, nullptr), KVC_ERR_INVALID_ARG, cw);
    EXPECT_ERR(kvc_cache_write(w.pool, 0, slots, 3, kv.data(), kv.data(), KVC_DTYPE_F32, 0, 1, nullptr), KVC_ERR_INVALID_ARG, cw);
    EXPECT_ERR(kvc_cache_write(w.pool, 0, slots, 3, kv.data(), kv.data(), KVC_DTYPE_F32, 1, NAN, nullptr), KVC_ERR_INVALID_ARG, cw);
    EXPECT_ERR(kvc_cache_write(w.pool, 0, slots, 3, kv.data(), kv.data(), KVC_DTYPE_FP8_E4M3, 1, 1, nullptr), KVC_ERR_UNSUPPORTED, cw);
    EXPECT_ERR(kvc_cache_write(w.pool, 0, slots, 3, kv.data(), kv.data(), 9, 1, 1, nullptr), KVC_ERR_INVALID_ARG, cw);
    slots[2] = 10 * 16;  // one past the last slot
    EXPECT_ERR(kvc_cache_write(w.pool, 0, slots, 3, kv.data(), kv.data(), KVC_DTYPE_F32, 1, 1, nullptr), KVC_ERR_INVALID_ARG, cw);
    EXPECT_ERR(kvc_cache_write(meta, 0, slots, 3, kv.data(), kv.data(), KVC_DTYPE_F32, 1, 1, nullptr), KVC_ERR_STATE, cw);
    // None of the failed writes touched the storage (the bad slot came last: all-or-nothing).
    assert_memory_equal(base, image.data(), image.size());
    OK(kvc_cache_write(w.pool, 0, slots, 0, nullptr, nullptr, KVC_DTYPE_F32, 1, 1, nullptr));  // empty: no-op

    EXPECT_ERR(kvc_copy_pending(nullptr, nullptr, nullptr), KVC_ERR_NULL_ARG, "kvc_copy_pending");
    EXPECT_ERR(kvc_copy_pending(meta, nullptr, nullptr), KVC_ERR_STATE, "kvc_copy_pending");

    const char *sc = "kvc_storage_copy_blocks";
    int32_t ids[2] = {1, 10};
    std::vector<uint8_t> host(static_cast<size_t>(2 * before.block_stride));
    EXPECT_ERR(kvc_storage_copy_blocks(nullptr, ids, 2, host.data(), 1), KVC_ERR_NULL_ARG, sc);
    EXPECT_ERR(kvc_storage_copy_blocks(w.pool, nullptr, 2, host.data(), 1), KVC_ERR_NULL_ARG, sc);
    EXPECT_ERR(kvc_storage_copy_blocks(w.pool, ids, 2, nullptr, 1), KVC_ERR_NULL_ARG, sc);
    EXPECT_ERR(kvc_storage_copy_blocks(w.pool, ids, -1, host.data(), 1), KVC_ERR_INVALID_ARG, sc);
    EXPECT_ERR(kvc_storage_copy_blocks(w.pool, ids, 2, host.data(), 0), KVC_ERR_INVALID_ARG, sc);
    ids[1] = -1;
    EXPECT_ERR(kvc_storage_copy_blocks(w.pool, ids, 2, host.data(), 0), KVC_ERR_INVALID_ARG, sc);
    EXPECT_ERR(kvc_storage_copy_blocks(meta, ids, 1, host.data(), 1), KVC_ERR_STATE, sc);
    assert_memory_equal(base, image.data(), image.size());
    kvc_pool_destroy(meta);
}

void test_bad_input_attention(void **) {
    World w(16, 2, 8, 64, KVC_DTYPE_F16, 32, 0);
    const char *fn = "kvc_launch_attention";
    std::vector<uint16_t> q(size_t(4 * 8 * 64), 0x3c00), out(q.size(), 0);
    kvc_attention_params ap;
    OK(kvc_attention_params_default(&ap));
    EXPECT_ERR(kvc_attention_params_default(nullptr), KVC_ERR_NULL_ARG, "kvc_attention_params_default");
    assert_int_equal(ap.struct_size, sizeof ap);
    assert_int_equal(ap.q_dtype, KVC_DTYPE_F16);
    assert_true(ap.k_scale == 1.0f && ap.v_scale == 1.0f && ap.scale == 0.0f && ap.partition_size == 0);

    // Never built.
    EXPECT_ERR(kvc_launch_attention(w.pool, w.batch, 0, q.data(), out.data(), &ap, nullptr), KVC_ERR_STATE, fn);
    OK(kvc_alloc(w.pool, 1, nullptr, 3, nullptr, nullptr));
    OK(kvc_alloc(w.pool, 2, nullptr, 1, nullptr, nullptr));
    const uint64_t ids[] = {1, 2};
    const int64_t ql[] = {3, 1};
    OK(kvc_batch_build(w.batch, ids, ql, 2));
    OK(kvc_launch_attention(w.pool, w.batch, 0, q.data(), out.data(), &ap, nullptr));

    EXPECT_ERR(kvc_launch_attention(nullptr, w.batch, 0, q.data(), out.data(), &ap, nullptr), KVC_ERR_NULL_ARG, fn);
    EXPECT_ERR(kvc_launch_attention(w.pool, nullptr, 0, q.data(), out.data(), &ap, nullptr), KVC_ERR_NULL_ARG, fn);
    EXPECT_ERR(kvc_launch_attention(w.pool, w.batch, 0, nullptr, out.data(), &ap, nullptr), KVC_ERR_NULL_ARG, fn);
    EXPECT_ERR(kvc_launch_attention(w.pool, w.batch, 0, q.data(), nullptr, &ap, nullptr), KVC_ERR_NULL_ARG, fn);
    EXPECT_ERR(kvc_launch_attention(w.pool, w.batch, 0, q.data(), out.data(), nullptr, nullptr), KVC_ERR_NULL_ARG, fn);
    EXPECT_ERR(kvc_launch_attention(w.pool, w.batch, 2, q.data(), out.data(), &ap, nullptr), KVC_ERR_INVALID_ARG, fn);
    EXPECT_ERR(kvc_launch_attention(w.pool, w.batch, -1, q.data(), out.data(), &ap, nullptr), KVC_ERR_INVALID_ARG, fn);
    struct Bad { void (*set)(kvc_attention_params *); kvc_status code; };
    const Bad bad[] = {
        {[](kvc_attention_params *p) { p->struct_size = 8; }, KVC_ERR_VERSION},
        {[](kvc_attention_params *p) { p->q_dtype = KVC_DTYPE_FP8_E4M3; }, KVC_ERR_UNSUPPORTED},
        {[](kvc_attention_params *p) { p->q_dtype = 17; }, KVC_ERR_INVALID_ARG},
        {[](kvc_attention_params *p) { p->num_q_heads = 3; }, KVC_ERR_INVALID_ARG},   // not a multiple of 2 KV heads
        {[](kvc_attention_params *p) { p->num_q_heads = 16; }, KVC_ERR_INVALID_ARG},  // more than the pool's 8
        {[](kvc_attention_params *p) { p->num_q_heads = -2; }, KVC_ERR_INVALID_ARG},
        {[](kvc_attention_params *p) { p->scale = -1.0f; }, KVC_ERR_INVALID_ARG},
        {[](kvc_attention_params *p) { p->scale = INFINITY; }, KVC_ERR_INVALID_ARG},
        {[](kvc_attention_params *p) { p->k_scale = 0.0f; }, KVC_ERR_INVALID_ARG},
        {[](kvc_attention_params *p) { p->v_scale = -1.0f; }, KVC_ERR_INVALID_ARG},
        {[](kvc_attention_params *p) { p->logit_softcap = -1.0f; }, KVC_ERR_INVALID_ARG},
        {[](kvc_attention_params *p) { p->sliding_window = -3; }, KVC_ERR_INVALID_ARG},
        {[](kvc_attention_params *p) { p->partition_size = -2; }, KVC_ERR_INVALID_ARG},
    };
    for (const Bad &b : bad) {
        kvc_attention_params p = ap;
        b.set(&p);
        std::fill(out.begin(), out.end(), 0x1234);
        EXPECT_ERR(kvc_launch_attention(w.pool, w.batch, 0, q.data(), out.data(), &p, nullptr), b.code, fn);
        for (uint16_t x : out) assert_int_equal(x, 0x1234);  // nothing was launched
    }
    // Fewer query heads than the pool's is allowed (a multiple of the KV heads).
    kvc_attention_params p6 = ap;
    p6.num_q_heads = 6;
    OK(kvc_launch_attention(w.pool, w.batch, 0, q.data(), out.data(), &p6, nullptr));

    // A batch of another pool.
    World other(16, 2, 8, 64, KVC_DTYPE_F16, 32, 0);
    EXPECT_ERR(kvc_launch_attention(other.pool, w.batch, 0, q.data(), out.data(), &ap, nullptr), KVC_ERR_STATE, fn);
    // A metadata-only pool.
    kvc_pool_config c;
    OK(kvc_pool_config_default(&c));
    c.num_blocks = 4;
    kvc_pool *meta = nullptr;
    OK(kvc_pool_create(&c, &meta));
    EXPECT_ERR(kvc_launch_attention(meta, w.batch, 0, q.data(), out.data(), &ap, nullptr), KVC_ERR_STATE, fn);
    kvc_pool_destroy(meta);

    // A sequence of the batch freed after the build: refused before anything runs.
    OK(kvc_free(w.pool, 2));
    std::fill(out.begin(), out.end(), 0x1234);
    EXPECT_ERR(kvc_launch_attention(w.pool, w.batch, 0, q.data(), out.data(), &ap, nullptr), KVC_ERR_STATE, fn);
    for (uint16_t x : out) assert_int_equal(x, 0x1234);
    // Freed and re-created under the same id with other blocks: still refused.
    OK(kvc_alloc(w.pool, 3, nullptr, 20, nullptr, nullptr));
    OK(kvc_alloc(w.pool, 2, nullptr, 1, nullptr, nullptr));
    EXPECT_ERR(kvc_launch_attention(w.pool, w.batch, 0, q.data(), out.data(), &ap, nullptr), KVC_ERR_STATE, fn);
    // Freeing an unrelated sequence does not invalidate the batch once rebuilt.
    OK(kvc_batch_build(w.batch, ids, ql, 2));
    OK(kvc_free(w.pool, 3));
    OK(kvc_launch_attention(w.pool, w.batch, 0, q.data(), out.data(), &ap, nullptr));
}

}  // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e2e_prefill_then_decode),
        cmocka_unit_test(test_e2e_fork_copy_on_write),
        cmocka_unit_test(test_e2e_sliding_window_releases_blocks),
        cmocka_unit_test(test_e2e_window_prefix_hit),
        cmocka_unit_test(test_e2e_fp8_and_long_context),
        cmocka_unit_test(test_storage_info_and_copy_blocks),
        cmocka_unit_test(test_bad_input_storage_calls),
        cmocka_unit_test(test_bad_input_attention),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
