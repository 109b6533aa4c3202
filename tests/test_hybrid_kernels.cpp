// Batches, cache writes and attention on a hybrid pool (kvc_pool_create_hybrid) through the public
// API, on the CPU backend and (with a CUDA device or the emulator) the CUDA backend: one batch per
// attention group (kvc_batch_set_group), every attention layer written through its group's slot
// mapping and attended with its group's batch, compared with the dense reference (the SLIDING
// group windowed); every byte of the storage compared with a model that places each written row
// where the group layout says (kvc_pool_get_group_info), so a row landing in another group's page,
// another layer or another block fails; and the refusals (a layer with another group's batch, an
// SSM layer, kvc_batch_set_group out of range or SSM), each leaving the storage and the batch
// unchanged.
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "gpu/device_buffer.hpp"
#include "kernels_world.hpp"  // OK(), cmocka, kvc_ref

#define EXPECT_ERR(call, code, ...)                                                                      \
    do {                                                                                                 \
        kvc_status st_ = (call);                                                                         \
        if (st_ != (code))                                                                               \
            fail_msg("%s -> %s, expected %s: %s", #call, kvc_status_str(st_), kvc_status_str(code),      \
                     kvc_last_error());                                                                  \
        for (const char *w_ : {__VA_ARGS__})                                                             \
            if (!std::strstr(kvc_last_error(), w_))                                                      \
                fail_msg("%s: message '%s' does not contain '%s'", #call, kvc_last_error(), w_);         \
    } while (0)

namespace {

constexpr int32_t kBs = 16, kWindow = 8, kQHeads = 4, kBlocks = 40, kStateBytes = 512;
constexpr int32_t kFull = 0, kSliding = 1, kSsm = 2;
// Model layers: FULL, SLIDING, SSM, SLIDING, FULL (layer_in_group: 0, 0, 0, 1, 1).
const std::vector<int32_t> kLayerGroup = {kFull, kSliding, kSsm, kSliding, kFull};

struct GroupShape {
    int32_t kv_heads, head_dim;
};
// Different shapes per group, so a kernel using another group's (or the pool's) layout misplaces
// rows: FULL 2 x 64 (32 KiB a page for its 2 layers), SLIDING 1 x 80 (20 KiB, padded to 32 KiB).
// Head dims the CUDA kernels are built for.
const GroupShape kShape[2] = {{2, 64}, {1, 80}};

// Host data as the pool's kernels take it: the vector itself on CPU, a device copy on CUDA.
template <class T>
void *on_backend(int32_t backend, kvc_gpu_test::DeviceBuffer &buf, std::vector<T> &v) {
    if (backend != KVC_BACKEND_CUDA) return v.data();
    OK(kvc_gpu_test::upload_vector(buf, v));
    return buf.get();
}

struct Hybrid {
    kvc_pool *pool = nullptr;
    kvc_batch *batch[2] = {nullptr, nullptr};  // one per attention group
    kvc_group_info info[3];
    kvc_storage_info storage;
    std::vector<uint8_t> model;  // what every byte of the storage must hold
    // Dense K/V as written, per (layer, sequence): [position][kv head][d].
    std::map<std::pair<int32_t, uint64_t>, std::vector<float>> dense_k, dense_v;
    std::mt19937 rng{11};
    int32_t backend;

    explicit Hybrid(int32_t backend_ = KVC_BACKEND_CPU) : backend(backend_) {
        kvc_pool_config c;
        OK(kvc_pool_config_default(&c));
        c.block_size = kBs;
        c.kv_dtype = KVC_DTYPE_F32;  // exact: the byte model needs no rounding
        c.num_q_heads = kQHeads;
        c.num_blocks = kBlocks;
        c.backend = backend;
        c.prefix_caching = 0;
        c.watermark = 0.0;
        kvc_group_config g[3];
        for (auto &x : g) OK(kvc_group_config_default(&x));
        g[kFull].kind = KVC_GROUP_FULL;
        g[kFull].num_layers = 2;
        g[kFull].num_kv_heads = kShape[kFull].kv_heads;
        g[kFull].head_dim = kShape[kFull].head_dim;
        g[kSliding].kind = KVC_GROUP_SLIDING;
        g[kSliding].num_layers = 2;
        g[kSliding].num_kv_heads = kShape[kSliding].kv_heads;
        g[kSliding].head_dim = kShape[kSliding].head_dim;
        g[kSliding].sliding_window = kWindow;
        g[kSsm].kind = KVC_GROUP_SSM;
        g[kSsm].num_layers = 1;
        g[kSsm].state_bytes = kStateBytes;
        OK(kvc_pool_create_hybrid(&c, g, 3, kLayerGroup.data(), int32_t(kLayerGroup.size()), &pool));
        for (int32_t i = 0; i < 3; ++i) {
            info[i].struct_size = sizeof info[i];
            OK(kvc_pool_get_group_info(pool, i, &info[i]));
        }
        storage.struct_size = sizeof storage;
        OK(kvc_storage_get_info(pool, &storage));
        // The storage's block stride is the page, whatever group 0's own bytes are.
        assert_int_equal(storage.block_stride, info[0].page_bytes);
        assert_int_equal(storage.total_bytes, int64_t(kBlocks) * info[0].page_bytes);
        assert_int_equal(info[kFull].layer_stride, 2LL * 2 * kBs * 64 * 4);
        assert_int_equal(info[kSliding].layer_stride, 2LL * 1 * kBs * 80 * 4);
        assert_true(info[kSliding].group_bytes < info[kSliding].page_bytes);  // padded
        model = read_storage();  // whatever it starts with
        for (int32_t g2 = 0; g2 < 2; ++g2) {
            OK(kvc_batch_create(pool, 4, 256, 16, &batch[g2]));
            OK(kvc_batch_set_group(batch[g2], g2));
        }
    }
    ~Hybrid() {
        for (kvc_batch *b : batch) kvc_batch_destroy(b);
        kvc_pool_destroy(pool);
    }
    Hybrid(const Hybrid &) = delete;
    Hybrid &operator=(const Hybrid &) = delete;

    // Every page of the storage, through the public copy (device memory on CUDA).
    std::vector<uint8_t> read_storage() const {
        if (backend == KVC_BACKEND_CUDA) OK(kvc::cuda::stream_sync(nullptr));
        std::vector<int32_t> all(kBlocks);
        for (int32_t b = 0; b < kBlocks; ++b) all[size_t(b)] = b;
        std::vector<uint8_t> bytes(size_t(storage.total_bytes));
        OK(kvc_storage_copy_blocks(pool, all.data(), kBlocks, bytes.data(), 1));
        return bytes;
    }

    int32_t layer_in_group(int32_t layer) const {
        int32_t g = -1, i = -1;
        OK(kvc_pool_layer_group(pool, layer, &g, &i));
        assert_int_equal(g, kLayerGroup[size_t(layer)]);
        return i;
    }

    std::vector<int32_t> table(uint64_t id, int32_t group) const {
        int32_t t[64];
        int64_t n = 0;
        OK(kvc_seq_group_block_table(pool, id, group, t, 64, &n));
        return std::vector<int32_t>(t, t + n);
    }

    // Offset in the storage of (layer, K/V, head, position) of sequence `id`, from the group info
    // alone: page of the group's table entry, the layer's place in the page, then [kv][head][token].
    int64_t row_offset(uint64_t id, int32_t layer, int32_t kv, int32_t head, int64_t pos) const {
        const int32_t g = kLayerGroup[size_t(layer)];
        const std::vector<int32_t> t = table(id, g);
        assert_true(pos / kBs < int64_t(t.size()));
        const int32_t block = t[size_t(pos / kBs)];
        assert_true(block >= 0 && block < kBlocks);
        const int64_t token_stride = int64_t(info[g].head_dim) * 4, head_stride = token_stride * kBs,
                      kv_stride = head_stride * info[g].num_kv_heads;
        assert_int_equal(info[g].layer_stride, 2 * kv_stride);
        return int64_t(block) * info[g].page_bytes + layer_in_group(layer) * info[g].layer_stride + kv * kv_stride +
               head * head_stride + (pos % kBs) * token_stride;
    }

    void check_storage(const char *when) const {
        const std::vector<uint8_t> bytes = read_storage();
        for (int64_t i = 0; i < storage.total_bytes; ++i)
            if (bytes[size_t(i)] != model[size_t(i)])
                fail_msg("%s: storage byte %lld (block %lld, offset %lld in the page) is %u, expected %u", when,
                         (long long)i, (long long)(i / storage.block_stride), (long long)(i % storage.block_stride),
                         bytes[size_t(i)], model[size_t(i)]);
    }

    // No block id is in two groups' tables at once (the pages are one pool's).
    void check_groups_disjoint(const std::vector<uint64_t> &ids) const {
        std::map<int32_t, int32_t> owner;
        for (uint64_t id : ids)
            for (int32_t g = 0; g < 3; ++g)
                for (int32_t b : table(id, g)) {
                    if (b < 0) continue;
                    auto [it, fresh] = owner.emplace(b, g);
                    if (!fresh && it->second != g)
                        fail_msg("block %d is in group %d and group %d", b, it->second, g);
                }
    }

    // One forward step over `ids` with `q_lens` new tokens each (already in the pool): builds each
    // attention group's batch, checks its slot mapping against the group's tables, writes every
    // attention layer's new K/V and checks attention against the dense reference.
    void step(const std::vector<uint64_t> &ids, const std::vector<int64_t> &q_lens, int32_t partition_size) {
        std::vector<int64_t> lens(ids.size());
        for (size_t i = 0; i < ids.size(); ++i) OK(kvc_seq_num_tokens(pool, ids[i], &lens[i]));
        std::vector<int64_t> slots[2];
        for (int32_t g = 0; g < 2; ++g) {
            OK(kvc_batch_build(batch[g], ids.data(), q_lens.data(), int32_t(ids.size())));
            kvc_batch_info bi;
            bi.struct_size = sizeof bi;
            OK(kvc_batch_get_info(batch[g], &bi));
            slots[g].resize(size_t(bi.num_tokens));
            OK(kvc_batch_copy_slot_mapping(batch[g], slots[g].data(), bi.num_tokens));
            // The slots are the group's table entries, not group 0's.
            int64_t tok = 0;
            for (size_t i = 0; i < ids.size(); ++i) {
                const std::vector<int32_t> t = table(ids[i], g);
                for (int64_t p = lens[i] - q_lens[i]; p < lens[i]; ++p, ++tok)
                    assert_int_equal(slots[g][size_t(tok)], int64_t(t[size_t(p / kBs)]) * kBs + p % kBs);
            }
        }
        for (int32_t layer = 0; layer < int32_t(kLayerGroup.size()); ++layer) {
            const int32_t g = kLayerGroup[size_t(layer)];
            if (g == kSsm) continue;
            write_layer(ids, lens, q_lens, layer, slots[g]);
            attend_layer(ids, lens, q_lens, layer, partition_size);
        }
        check_storage("after the step's writes");
        check_groups_disjoint(ids);
    }

    void write_layer(const std::vector<uint64_t> &ids, const std::vector<int64_t> &lens,
                     const std::vector<int64_t> &q_lens, int32_t layer, const std::vector<int64_t> &slots) {
        const GroupShape sh = kShape[kLayerGroup[size_t(layer)]];
        const int64_t row = int64_t(sh.kv_heads) * sh.head_dim;
        std::uniform_real_distribution<float> uni(-1.f, 1.f);
        std::vector<float> k(slots.size() * size_t(row)), v(k.size());
        int64_t tok = 0;
        for (size_t i = 0; i < ids.size(); ++i) {
            std::vector<float> &K = dense_k[{layer, ids[i]}], &V = dense_v[{layer, ids[i]}];
            K.resize(size_t(lens[i] * row));
            V.resize(K.size());
            for (int64_t p = lens[i] - q_lens[i]; p < lens[i]; ++p, ++tok)
                for (int32_t h = 0; h < sh.kv_heads; ++h) {
                    for (int32_t d = 0; d < sh.head_dim; ++d) {
                        const size_t src = size_t(tok * row + h * sh.head_dim + d);
                        k[src] = uni(rng);
                        v[src] = uni(rng);
                        K[size_t(p * row + h * sh.head_dim + d)] = k[src];
                        V[size_t(p * row + h * sh.head_dim + d)] = v[src];
                    }
                    // Where the group layout says the rows go.
                    std::memcpy(&model[size_t(row_offset(ids[i], layer, 0, h, p))], &k[size_t(tok * row + h * sh.head_dim)],
                                size_t(sh.head_dim) * 4);
                    std::memcpy(&model[size_t(row_offset(ids[i], layer, 1, h, p))], &v[size_t(tok * row + h * sh.head_dim)],
                                size_t(sh.head_dim) * 4);
                }
        }
        std::vector<int64_t> slot_copy = slots;
        kvc_gpu_test::DeviceBuffer dslots, dk, dv;
        OK(kvc_cache_write(pool, layer, static_cast<const int64_t *>(on_backend(backend, dslots, slot_copy)),
                           int64_t(slots.size()), on_backend(backend, dk, k), on_backend(backend, dv, v), KVC_DTYPE_F32,
                           1.0f, 1.0f, nullptr));
    }

    void attend_layer(const std::vector<uint64_t> &ids, const std::vector<int64_t> &lens,
                      const std::vector<int64_t> &q_lens, int32_t layer, int32_t partition_size) {
        const int32_t g = kLayerGroup[size_t(layer)];
        const GroupShape sh = kShape[g];
        kvc_ref::Problem P;
        P.num_q_heads = kQHeads;
        P.num_kv_heads = sh.kv_heads;
        P.head_dim = sh.head_dim;
        P.scale = 1.5 / std::sqrt(double(sh.head_dim));
        P.sliding_window = g == kSliding ? kWindow : 0;
        int64_t tokens = 0;
        std::vector<const float *> kp, vp;
        for (size_t i = 0; i < ids.size(); ++i) {
            P.seqs.push_back({lens[i], q_lens[i]});
            tokens += q_lens[i];
            kp.push_back(dense_k[{layer, ids[i]}].data());
            vp.push_back(dense_v[{layer, ids[i]}].data());
        }
        const int64_t qn = tokens * kQHeads * sh.head_dim;
        std::uniform_real_distribution<float> uni(-1.f, 1.f);
        std::vector<float> q(static_cast<size_t>(qn)), out(static_cast<size_t>(qn), NAN);
        for (float &x : q) x = uni(rng);
        kvc_attention_params ap;
        OK(kvc_attention_params_default(&ap));
        ap.q_dtype = KVC_DTYPE_F32;
        ap.scale = float(P.scale);
        ap.sliding_window = int32_t(P.sliding_window);
        ap.partition_size = partition_size;
        kvc_gpu_test::DeviceBuffer dq, dout;
        OK(kvc_launch_attention(pool, batch[g], layer, on_backend(backend, dq, q), on_backend(backend, dout, out), &ap,
                                nullptr));
        if (backend == KVC_BACKEND_CUDA) OK(dout.download(out.data(), out.size() * sizeof(float)));
        std::vector<double> ref(static_cast<size_t>(qn));
        kvc_ref::dense_attention(P, q.data(), kp, vp, ref.data());
        for (int64_t i = 0; i < qn; ++i)
            if (!(std::fabs(double(out[size_t(i)]) - ref[size_t(i)]) <= 1e-4 + 1e-4 * std::fabs(ref[size_t(i)])))
                fail_msg("layer %d (group %d): out[%lld] = %.7g, reference %.7g", layer, g, (long long)i,
                         double(out[size_t(i)]), ref[size_t(i)]);
    }

    void append(uint64_t id, int64_t n) { OK(kvc_append(pool, id, nullptr, n, 0, nullptr)); }
};

// Prefill, decode far past the window (the SLIDING group releases its leading blocks and the pool
// reuses them), a chunked prefill next to decodes, split-K on and off: every attention layer equal
// to the dense reference and every storage byte where the group layouts put it.
void prefill_decode_bytes(int32_t backend, int decode_steps) {
    Hybrid w(backend);
    const std::vector<uint64_t> ids = {1, 2, 3};
    const std::vector<int64_t> prompts = {37, 20, 5};
    for (size_t i = 0; i < ids.size(); ++i) OK(kvc_alloc(w.pool, ids[i], nullptr, prompts[i], nullptr, nullptr));
    w.step(ids, prompts, -1);
    for (int s = 0; s < decode_steps; ++s) {
        for (uint64_t id : ids) w.append(id, 1);
        w.step(ids, {1, 1, 1}, s % 3 == 0 ? 4 : s % 3 == 1 ? 0 : -1);
    }
    // Chunked prefill of 9 tokens on sequence 2 next to two decodes.
    w.append(2, 9);
    w.append(1, 1);
    w.append(3, 1);
    w.step({2, 1, 3}, {9, 1, 1}, 0);
    // The SLIDING group released blocks the FULL group still holds: the test ran over released
    // entries (and a window smaller than a block keeps at most two pages per sequence).
    for (uint64_t id : ids) {
        const std::vector<int32_t> full = w.table(id, kFull), sliding = w.table(id, kSliding);
        assert_int_equal(full.size(), sliding.size());
        int64_t live = 0;
        for (int32_t b : full) assert_true(b >= 0);
        for (int32_t b : sliding) live += b >= 0;
        if (live > 2 || live == int64_t(sliding.size()))
            fail_msg("sequence %llu: %lld of %zu SLIDING entries live", (unsigned long long)id, (long long)live,
                     sliding.size());
    }
    OK(kvc_pool_check(w.pool));
}

void test_hybrid_prefill_decode_bytes(void **) { prefill_decode_bytes(KVC_BACKEND_CPU, 40); }

// The same on the CUDA backend (fewer steps: the emulator is slow; 20 still release blocks of
// every sequence): the CUDA host path takes the group layout's strides too.
void test_hybrid_prefill_decode_bytes_cuda(void **) {
    KVC_REQUIRE_GPU("CUDA");
    prefill_decode_bytes(KVC_BACKEND_CUDA, 20);
}

// Refusals: each names the layer and groups, and leaves the storage, the output and the batch as
// they were.
void test_hybrid_refusals(void **) {
    Hybrid w;
    const std::vector<uint64_t> ids = {5};
    OK(kvc_alloc(w.pool, 5, nullptr, 20, nullptr, nullptr));
    w.step(ids, {20}, 0);
    const std::vector<uint8_t> before = w.read_storage();

    std::vector<float> q(size_t(20) * kQHeads * 80, 0.5f), out(q.size(), 7.0f), kv(size_t(20) * 2 * 80, 1.0f);
    std::vector<int64_t> slots(20, 0);
    kvc_attention_params ap;
    OK(kvc_attention_params_default(&ap));
    ap.q_dtype = KVC_DTYPE_F32;
    const char *fn = "kvc_launch_attention";
    // A SLIDING layer with the FULL group's batch, and the other way round.
    ap.sliding_window = kWindow;
    EXPECT_ERR(kvc_launch_attention(w.pool, w.batch[kFull], 1, q.data(), out.data(), &ap, nullptr),
               KVC_ERR_INVALID_ARG, fn, "layer 1", "group 1", "group 0");
    ap.sliding_window = 0;
    EXPECT_ERR(kvc_launch_attention(w.pool, w.batch[kSliding], 4, q.data(), out.data(), &ap, nullptr),
               KVC_ERR_INVALID_ARG, fn, "layer 4", "group 0", "group 1");
    // The SSM layer, with either batch; and its cache write.
    EXPECT_ERR(kvc_launch_attention(w.pool, w.batch[kFull], 2, q.data(), out.data(), &ap, nullptr),
               KVC_ERR_INVALID_ARG, fn, "layer 2", "SSM");
    EXPECT_ERR(kvc_launch_attention(w.pool, w.batch[kSliding], 2, q.data(), out.data(), &ap, nullptr),
               KVC_ERR_INVALID_ARG, fn, "layer 2", "SSM");
    EXPECT_ERR(kvc_cache_write(w.pool, 2, slots.data(), 20, kv.data(), kv.data(), KVC_DTYPE_F32, 1.f, 1.f, nullptr),
               KVC_ERR_INVALID_ARG, "kvc_cache_write", "layer 2", "SSM");
    // Layers past the model's (5; group 0 alone has 2).
    EXPECT_ERR(kvc_launch_attention(w.pool, w.batch[kFull], 5, q.data(), out.data(), &ap, nullptr),
               KVC_ERR_INVALID_ARG, fn, "[0, 5)");
    EXPECT_ERR(kvc_cache_write(w.pool, 5, slots.data(), 20, kv.data(), kv.data(), KVC_DTYPE_F32, 1.f, 1.f, nullptr),
               KVC_ERR_INVALID_ARG, "kvc_cache_write", "[0, 5)");
    // The SLIDING group's window bounds the launch window: none (0) or a wider one is refused.
    for (int32_t bad : {0, kWindow + 1}) {
        ap.sliding_window = bad;
        EXPECT_ERR(kvc_launch_attention(w.pool, w.batch[kSliding], 3, q.data(), out.data(), &ap, nullptr),
                   KVC_ERR_INVALID_ARG, fn, "group 1", "sliding window of 8");
    }
    // kvc_batch_set_group: out of range, or the SSM group.
    EXPECT_ERR(kvc_batch_set_group(w.batch[kFull], kSsm), KVC_ERR_INVALID_ARG, "kvc_batch_set_group", "group 2",
               "SSM");
    EXPECT_ERR(kvc_batch_set_group(w.batch[kFull], 3), KVC_ERR_INVALID_ARG, "kvc_batch_set_group", "group 3", "3)");
    EXPECT_ERR(kvc_batch_set_group(w.batch[kFull], -1), KVC_ERR_INVALID_ARG, "kvc_batch_set_group", "group -1");
    EXPECT_ERR(kvc_batch_set_group(nullptr, 0), KVC_ERR_NULL_ARG, "kvc_batch_set_group");
    for (float x : out) assert_true(x == 7.0f);
    assert_true(w.read_storage() == before);
    // The refused set_group left the batch on group 0: it still builds and launches group 0's layers.
    ap.sliding_window = 0;
    const int64_t ql = 1;
    OK(kvc_batch_build(w.batch[kFull], ids.data(), &ql, 1));
    OK(kvc_launch_attention(w.pool, w.batch[kFull], 0, q.data(), out.data(), &ap, nullptr));

    // set_group acts at the next build: until then the batch serves the group it was built for.
    OK(kvc_batch_set_group(w.batch[kFull], kSliding));
    OK(kvc_launch_attention(w.pool, w.batch[kFull], 4, q.data(), out.data(), &ap, nullptr));
    ap.sliding_window = kWindow;
    EXPECT_ERR(kvc_launch_attention(w.pool, w.batch[kFull], 3, q.data(), out.data(), &ap, nullptr),
               KVC_ERR_INVALID_ARG, fn, "layer 3", "group 1", "built for group 0");
    OK(kvc_batch_build(w.batch[kFull], ids.data(), &ql, 1));
    OK(kvc_launch_attention(w.pool, w.batch[kFull], 3, q.data(), out.data(), &ap, nullptr));
    // Its block tables are now the SLIDING group's.
    std::vector<int32_t> rows(16);
    OK(kvc_batch_copy_block_tables(w.batch[kFull], rows.data(), 16));
    const std::vector<int32_t> t = w.table(5, kSliding);
    for (size_t i = 0; i < t.size(); ++i) assert_int_equal(rows[i], t[i]);
    ap.sliding_window = 0;
    EXPECT_ERR(kvc_launch_attention(w.pool, w.batch[kFull], 0, q.data(), out.data(), &ap, nullptr),
               KVC_ERR_INVALID_ARG, fn, "layer 0", "built for group 1");
    assert_true(w.read_storage() == before);
}

// A hybrid pool whose group 0 is SSM: a new batch (group 0) refuses to build until an attention
// group is chosen, then serves that group's layer; the model's layer 1 is the FULL group's layer 0.
void test_hybrid_ssm_group_first(void **) {
    kvc_pool_config c;
    OK(kvc_pool_config_default(&c));
    c.block_size = kBs;
    c.kv_dtype = KVC_DTYPE_F32;
    c.num_blocks = 16;
    c.backend = KVC_BACKEND_CPU;
    c.prefix_caching = 0;
    c.watermark = 0.0;
    kvc_group_config g[2];
    for (auto &x : g) OK(kvc_group_config_default(&x));
    g[0].kind = KVC_GROUP_SSM;
    g[0].state_bytes = 4096;
    g[1].num_kv_heads = 2;
    g[1].head_dim = 16;
    const int32_t layer_group[2] = {0, 1};
    kvc_pool *pool = nullptr;
    kvc_batch *batch = nullptr;
    OK(kvc_pool_create_hybrid(&c, g, 2, layer_group, 2, &pool));
    OK(kvc_batch_create(pool, 2, 64, 8, &batch));
    OK(kvc_alloc(pool, 9, nullptr, 20, nullptr, nullptr));
    const uint64_t id = 9;
    const int64_t ql = 20;
    EXPECT_ERR(kvc_batch_build(batch, &id, &ql, 1), KVC_ERR_STATE, "kvc_batch_build", "group 0", "SSM",
               "kvc_batch_set_group");
    EXPECT_ERR(kvc_batch_set_group(batch, 0), KVC_ERR_INVALID_ARG, "kvc_batch_set_group", "SSM");
    OK(kvc_batch_set_group(batch, 1));
    OK(kvc_batch_build(batch, &id, &ql, 1));
    std::vector<int64_t> slots(20);
    OK(kvc_batch_copy_slot_mapping(batch, slots.data(), 20));
    std::vector<float> kv(size_t(20) * 2 * 16, 0.25f), q(size_t(20) * 2 * 16, 1.0f), out(q.size(), NAN);
    OK(kvc_cache_write(pool, 1, slots.data(), 20, kv.data(), kv.data(), KVC_DTYPE_F32, 1.f, 1.f, nullptr));
    kvc_attention_params ap;
    OK(kvc_attention_params_default(&ap));
    ap.q_dtype = KVC_DTYPE_F32;
    OK(kvc_launch_attention(pool, batch, 1, q.data(), out.data(), &ap, nullptr));
    for (float x : out) assert_true(std::fabs(x - 0.25f) < 1e-6f);  // every value row is 0.25, so is any average
    EXPECT_ERR(kvc_launch_attention(pool, batch, 0, q.data(), out.data(), &ap, nullptr), KVC_ERR_INVALID_ARG,
               "kvc_launch_attention", "layer 0", "SSM");
    kvc_batch_destroy(batch);
    kvc_pool_destroy(pool);
}

// A plain pool is group 0 only: kvc_batch_set_group(0) is accepted and changes nothing, 1 is refused.
void test_plain_pool_set_group(void **) {
    kvc_test::World w(16, 2, 4, 16, KVC_DTYPE_F16, 32, 0);
    OK(kvc_alloc(w.pool, 1, nullptr, 20, nullptr, nullptr));
    OK(kvc_batch_set_group(w.batch, 0));
    EXPECT_ERR(kvc_batch_set_group(w.batch, 1), KVC_ERR_INVALID_ARG, "kvc_batch_set_group", "group 1", "has 1");
    w.step({1}, {20}, KVC_DTYPE_F16, 0);
}

}  // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hybrid_prefill_decode_bytes),
        cmocka_unit_test(test_hybrid_prefill_decode_bytes_cuda),
        cmocka_unit_test(test_hybrid_refusals),
        cmocka_unit_test(test_hybrid_ssm_group_first),
        cmocka_unit_test(test_plain_pool_set_group),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
