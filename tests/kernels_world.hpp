// A CPU-backend test world for end-to-end checks through the public C API: one pool and one batch,
// a dense copy of every sequence's K/V per layer, and a forward step that writes the new tokens'
// K/V through the batch's slot mapping, launches kvc_launch_attention and compares it with
// kvc_ref::dense_attention. Shared by test_kernels_capi (one layer per step) and
// test_e2e_hybrid_pools (two pools, every layer of each checked against the pool's batch).
#pragma once

extern "C" {
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
}

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <vector>

#include "dense_reference.hpp"
#include "kvc/kvc.h"

#define OK(call)                                                                                         \
    do {                                                                                                 \
        kvc_status st_ = (call);                                                                         \
        if (st_ != KVC_OK) fail_msg("%s -> %s: %s", #call, kvc_status_str(st_), kvc_last_error());     \
    } while (0)

namespace kvc_test {

// Layers of every World pool, and the one World::step checks (layer 0 stays untouched there, so a
// kernel that ignored the layer stride would read zeros).
constexpr int kLayers = 2, kLayer = 1;

struct World {
    using DenseKV = std::map<uint64_t, std::vector<float>>;  // per sequence: [position][kv head][d]

    kvc_pool *pool = nullptr;
    kvc_batch *batch = nullptr;
    int32_t bs, nkv, nqh, d, kv_dtype;
    int32_t window = 0;  // the launches' sliding window (0 = none)
    std::mt19937 rng{5};
    // Dense K/V as stored (rounded), per layer; k / v are layer kLayer's, the one step() checks.
    std::array<DenseKV, kLayers> layer_k, layer_v;
    DenseKV &k = layer_k[kLayer], &v = layer_v[kLayer];
    // Where the K/V of (sequence, layer, position) comes from: unset, step() draws fresh random
    // rows for the new tokens; set, it fills row_k / row_v (nkv x d floats, before rounding) --
    // a function of the token prefix, as in a real model -- and every position the dense copy
    // lacks (a prefix hit, a fork child) is drawn from it too, so the reference needs no donor.
    std::function<void(uint64_t id, int32_t layer, int64_t pos, float *row_k, float *row_v)> kv_source;

    World(int32_t block_size, int32_t kv_heads, int32_t q_heads, int32_t head_dim, int32_t dtype, int64_t blocks,
          int32_t caching) : bs(block_size), nkv(kv_heads), nqh(q_heads), d(head_dim), kv_dtype(dtype) {
        kvc_pool_config c;
        OK(kvc_pool_config_default(&c));
        c.block_size = block_size;
        c.num_layers = kLayers;
        c.num_kv_heads = kv_heads;
        c.num_q_heads = q_heads;
        c.head_dim = head_dim;
        c.kv_dtype = dtype;
        c.num_blocks = blocks;
        c.backend = KVC_BACKEND_CPU;
        c.prefix_caching = caching;
        c.watermark = 0.0;
        OK(kvc_pool_create(&c, &pool));
        OK(kvc_batch_create(pool, 8, 4096, int32_t(std::max<int64_t>(64, blocks)), &batch));
    }
    ~World() {
        kvc_batch_destroy(batch);
        kvc_pool_destroy(pool);
    }
    World(const World &) = delete;
    World &operator=(const World &) = delete;

    std::vector<int32_t> tokens(int64_t n) {
        std::vector<int32_t> t(static_cast<size_t>(n));
        for (auto &x : t) x = int32_t(rng() % 30000);
        return t;
    }

    // The batch of one forward step: built once, then attended by every layer.
    struct Step {
        std::vector<uint64_t> ids;
        std::vector<int64_t> q_lens;
        kvc_batch_info info;
        std::vector<int64_t> slots;
    };

    // Builds the batch over `ids` with `q_lens` new tokens each (already confirmed in the pool).
    Step build(const std::vector<uint64_t> &ids, const std::vector<int64_t> &q_lens) {
        Step s{ids, q_lens, {}, {}};
        OK(kvc_batch_build(batch, ids.data(), q_lens.data(), int32_t(ids.size())));
        s.info.struct_size = sizeof s.info;
        OK(kvc_batch_get_info(batch, &s.info));
        s.slots.resize(static_cast<size_t>(s.info.num_tokens));
        OK(kvc_batch_copy_slot_mapping(batch, s.slots.data(), int64_t(s.slots.size())));
        // CPU backend: the "device" slot mapping is host memory holding the same values.
        assert_memory_equal(reinterpret_cast<const int64_t *>(uintptr_t(s.info.slot_mapping)), s.slots.data(),
                            s.slots.size() * 8);
        return s;
    }

    // One layer of the step: writes the new tokens' K/V through the slot mapping, runs attention
    // and checks it against the dense reference (windowed when `window` is set).
    void attend(const Step &s, int32_t layer, int32_t q_dtype, int32_t partition_size, float k_scale = 1.0f,
                float v_scale = 1.0f) {
        const std::vector<uint64_t> &ids = s.ids;
        const kvc_batch_info &info = s.info;
        const int64_t row = int64_t(nkv) * d;
        std::vector<float> ksrc(static_cast<size_t>(info.num_tokens * row)), vsrc(ksrc.size());
        std::vector<float> kx(static_cast<size_t>(row)), vx(kx.size());
        std::uniform_real_distribution<float> uni(-1.f, 1.f);
        kvc_ref::Problem P;
        P.num_q_heads = nqh;
        P.num_kv_heads = nkv;
        P.head_dim = d;
        P.scale = 1.0 / std::sqrt(double(d)) * 2.0;
        P.sliding_window = window;
        int64_t tok = 0;
        const bool fp8 = kv_dtype == KVC_DTYPE_FP8_E4M3;
        for (size_t i = 0; i < ids.size(); ++i) {
            int64_t L;
            OK(kvc_seq_num_tokens(pool, ids[i], &L));
            P.seqs.push_back({L, s.q_lens[i]});
            auto &K = layer_k[size_t(layer)][ids[i]], &V = layer_v[size_t(layer)][ids[i]];
            const int64_t first_new = L - s.q_lens[i];
            // Positions the dense copy lacks before the new tokens (known only from kv_source).
            const int64_t first = kv_source ? std::min(int64_t(K.size()) / row, first_new) : first_new;
            K.resize(size_t(L * row));
            V.resize(size_t(L * row));
            for (int64_t p = first; p < L; ++p) {
                const bool fresh = p >= first_new;
                if (kv_source) kv_source(ids[i], layer, p, kx.data(), vx.data());
                for (int64_t e = 0; e < row; ++e) {
                    if (!kv_source) {
                        kx[size_t(e)] = uni(rng);
                        vx[size_t(e)] = uni(rng);
                    }
                    if (fresh) {
                        ksrc[size_t(tok * row + e)] = kx[size_t(e)];
                        vsrc[size_t(tok * row + e)] = vx[size_t(e)];
                    }
                    float kr = kvc_ref::round_to(fp8 ? kx[size_t(e)] / k_scale : kx[size_t(e)], kv_dtype);
                    float vr = kvc_ref::round_to(fp8 ? vx[size_t(e)] / v_scale : vx[size_t(e)], kv_dtype);
                    K[size_t(p * row + e)] = fp8 ? kr * k_scale : kr;
                    V[size_t(p * row + e)] = fp8 ? vr * v_scale : vr;
                }
                if (fresh) ++tok;
            }
        }
        OK(kvc_cache_write(pool, layer, s.slots.data(), info.num_tokens, ksrc.data(), vsrc.data(), KVC_DTYPE_F32,
                           k_scale, v_scale, nullptr));

        const int64_t qn = info.num_tokens * nqh * d;
        const int qb = kvc_ref::dtype_size(q_dtype);
        std::vector<uint8_t> q(static_cast<size_t>(qn * qb)), out(q.size());
        std::vector<float> qref(static_cast<size_t>(qn));
        for (int64_t i = 0; i < qn; ++i) {
            float x = kvc_ref::round_to(uni(rng), q_dtype);
            qref[size_t(i)] = x;
            kvc_ref::encode_exact(q.data(), i, q_dtype, x);
        }
        kvc_attention_params ap;
        OK(kvc_attention_params_default(&ap));
        ap.q_dtype = q_dtype;
        ap.scale = float(P.scale);
        ap.k_scale = k_scale;
        ap.v_scale = v_scale;
        ap.partition_size = partition_size;
        ap.sliding_window = window;
        OK(kvc_launch_attention(pool, batch, layer, q.data(), out.data(), &ap, nullptr));

        std::vector<const float *> kp, vp;
        for (uint64_t id : ids) {
            kp.push_back(layer_k[size_t(layer)][id].data());
            vp.push_back(layer_v[size_t(layer)][id].data());
        }
        std::vector<double> ref(static_cast<size_t>(qn));
        kvc_ref::dense_attention(P, qref.data(), kp, vp, ref.data());
        const double atol = fp8 ? 1e-2 : 1e-3, rel = kvc_ref::output_rounding(q_dtype);
        for (int64_t i = 0; i < qn; ++i) {
            float got = kvc_ref::decode(out.data(), i, q_dtype);
            if (!(std::fabs(double(got) - ref[size_t(i)]) <= atol + rel * std::fabs(ref[size_t(i)])))
                fail_msg("layer %d: out[%lld] = %.7g, reference %.7g", layer, (long long)i, double(got),
                         ref[size_t(i)]);
        }
    }

    // One forward step of layer kLayer over `ids` with `q_lens` new tokens each.
    void step(const std::vector<uint64_t> &ids, const std::vector<int64_t> &q_lens, int32_t q_dtype,
              int32_t partition_size, float k_scale = 1.0f, float v_scale = 1.0f) {
        attend(build(ids, q_lens), kLayer, q_dtype, partition_size, k_scale, v_scale);
    }

    void append(uint64_t id, int64_t n) {
        std::vector<int32_t> t = tokens(n);
        OK(kvc_append(pool, id, t.data(), n, 0, nullptr));
    }
};

}  // namespace kvc_test
