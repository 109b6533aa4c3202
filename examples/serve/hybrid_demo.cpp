// kvc_hybrid: one hybrid pool (kvc_pool_create_hybrid, kvc.h "Hybrid models") serving a toy model
// whose layers mix sliding-window attention, full attention and a linear-attention state layer
// (an SSM-style recurrence), on the CPU backend. Every generated token is checked against a dense
// reference that recomputes the whole sequence from position 0 without any cache.
//
// The forward pass addresses the pool's pages itself (kvc_storage_get_info for the base,
// kvc_pool_get_group_info for each group's page geometry, kvc_seq_group_block_table for the page
// ids): an SSM group has no kernel, and the attention layers are addressed the same way here (it
// predates kvc_batch_set_group; kvc_serve --hybrid runs its attention layers on libkvc's kernels,
// one batch per group: paged_forward.cpp). What it shows:
//  - one pool, three KV-cache groups (SLIDING W, FULL, SSM), one block table per group, one
//    coordinated prefix hit for every group;
//  - SSM state snapshots: the state after the last token of every block is written to that block's
//    page of the SSM group and cached by the pool; a prompt that shares a cached prefix resumes from
//    the snapshot page of the hit's last block, and the run checks that (a) the snapshot equals the
//    state a full recompute reaches at that position, bit for bit, and (b) every generated token and
//    its logits equal the dense reference's;
//  - recompute preemption (kvc_free, re-admit: the re-admission resumes from its own snapshots);
//  - kvc_fork of a sample after its prefill (every --fork-every'th request): KV pages and the SSM
//    state page shared, kvc_copy_pending copies them before the first write that diverges; the
//    child's first token is the parent's second choice, every later one checked like the rest.
// With --compare it runs no model: the same request trace is scheduled on one hybrid pool (FULL +
// SLIDING groups) and on the two-pool recipe that kvc_serve --hybrid=two-pools keeps (KvStore: pool L with a
// window, pool G without, the capped-lookup loop, kvc_abort rollback), and prints blocks needed,
// hit tokens and admissions at fixed memory budgets (tests/bench/RESULTS.md, "[hybrid-groups]").
#include <kvc/kvc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kv_store.hpp"
#include "kvc_check.hpp"
#include "model.hpp"

using namespace serve;

namespace {

enum Kind { kSliding = 0, kFull = 1, kSsm = 2 };
const char *group_kind_name(int32_t k) { return k == KVC_GROUP_SLIDING ? "SLIDING" : k == KVC_GROUP_FULL ? "FULL" : "SSM"; }

struct Opts {
    int32_t window = 32;
    int32_t block_size = 16;
    int32_t requests = 16;
    int32_t system_prompts = 3;
    int32_t system_len = 72;
    int32_t suffix_min = 6, suffix_max = 40;
    int32_t gen_tokens = 24;
    int64_t blocks = 160;
    int32_t max_running = 4;
    int32_t fork_every = 3;  // every K-th request forks a second sample after its prefill (0 = none)
    uint64_t seed = 1;
    std::string layers = "SFMSFM";  // S = sliding window, F = full attention, M = SSM state
    bool compare = false;
    bool quiet = false;
    // Self-test: at the first admission with a prefix hit, change one float of a cached page it
    // resumes from, behind libkvc's back: 'M' the SSM snapshot page of the hit's last block, 'F' a
    // FULL group's first block, 'S' a SLIDING group's block holding the hit's last token. The run
    // must then fail its checks.
    char corrupt = 0;
};

const char *kUsage =
    "usage: kvc_hybrid [--requests N] [--seed S] [--blocks B] [--block-size BS] [--window W]\n"
    "                  [--layers SFM...] [--gen N] [--system-len N] [--max-running N] [--fork-every K]\n"
    "                  [--corrupt S|F|M (self-test: the checks must fail)]\n"
    "       kvc_hybrid --compare [same flags; --layers must have no M]\n";

// ---- the workload: shared system prompts + unique suffixes ------------------------------------

struct Req {
    std::vector<int32_t> prompt;
    int32_t gen = 0;
    bool fork = false;  // a second sample, forked after the prefill
};

std::vector<Req> make_trace(const Opts &o, int32_t vocab) {
    std::mt19937_64 rng(o.seed * 7919 + 17);
    std::uniform_int_distribution<int32_t> tok(0, vocab - 1);
    std::vector<std::vector<int32_t>> sys(size_t(o.system_prompts));
    for (auto &s : sys)
        for (int32_t i = 0; i < o.system_len; i++) s.push_back(tok(rng));
    std::vector<Req> reqs(size_t(o.requests));
    std::uniform_int_distribution<int32_t> pick(0, o.system_prompts - 1), len(o.suffix_min, o.suffix_max);
    for (Req &r : reqs) {
        r.prompt = sys[size_t(pick(rng))];
        const int32_t n = len(rng);
        for (int32_t i = 0; i < n; i++) r.prompt.push_back(tok(rng));
        r.gen = o.gen_tokens;
        r.fork = o.fork_every > 0 && int32_t(&r - reqs.data()) % o.fork_every == o.fork_every - 1;
    }
    return reqs;
}

// ---- the model ---------------------------------------------------------------------------------

struct Hybrid {
    Model m;
    std::vector<int32_t> kind;  // per layer
    std::vector<float> decay;   // SSM: per KV head
    int32_t window = 0;
    int64_t state_floats() const { return int64_t(m.cfg.num_kv_heads) * m.cfg.head_dim * m.cfg.head_dim; }
};

// One token of the linear-attention state layer, shared by the paged pass and the reference so that
// both do the same arithmetic: per KV head j, S_j = a_j S_j + k_j v_j^T (k normalized), and query
// head h reads o_h = (q_h S_{h/group}) / sqrt(head_dim).
void ssm_token(const Hybrid &hy, const float *q, const float *k, const float *v, float *S, float *out) {
    const ModelConfig &c = hy.m.cfg;
    const int32_t hd = c.head_dim, group = c.num_q_heads / c.num_kv_heads;
    for (int32_t j = 0; j < c.num_kv_heads; j++) {
        const float *kj = k + j * hd, *vj = v + j * hd;
        float nrm = 0;
        for (int32_t e = 0; e < hd; e++) nrm += kj[e] * kj[e];
        const float inv = 1.0f / std::sqrt(nrm + 1e-6f);
        float *Sj = S + int64_t(j) * hd * hd;
        const float a = hy.decay[size_t(j)];
        for (int32_t e = 0; e < hd; e++) {
            const float ke = kj[e] * inv;
            for (int32_t f = 0; f < hd; f++) Sj[e * hd + f] = a * Sj[e * hd + f] + ke * vj[f];
        }
    }
    const float scale = 1.0f / std::sqrt(float(hd));
    for (int32_t h = 0; h < c.num_q_heads; h++) {
        const float *qh = q + h * hd;
        const float *Sj = S + int64_t(h / group) * hd * hd;
        float *o = out + h * hd;
        for (int32_t f = 0; f < hd; f++) o[f] = 0;
        for (int32_t e = 0; e < hd; e++)
            for (int32_t f = 0; f < hd; f++) o[f] += qh[e] * Sj[e * hd + f];
        for (int32_t f = 0; f < hd; f++) o[f] *= scale;
    }
}

// Causal softmax attention of one query row at position t over keys first..t, GQA; key(j, kv_head)
// and val(j, kv_head) give the rows. Shared by both passes (the same arithmetic).
template <class K, class V>
void attend_token(const Hybrid &hy, const float *q, int64_t first, int64_t t, K &&key, V &&val, float *out,
                  std::vector<float> &p) {
    const ModelConfig &c = hy.m.cfg;
    const int32_t hd = c.head_dim, group = c.num_q_heads / c.num_kv_heads;
    const float scale = 1.0f / std::sqrt(float(hd));
    p.resize(size_t(t + 1));
    for (int32_t h = 0; h < c.num_q_heads; h++) {
        const float *qh = q + h * hd;
        const int32_t j = h / group;
        float mx = -INFINITY;
        for (int64_t s = first; s <= t; s++) {
            const float *ks = key(s, j);
            float d = 0;
            for (int32_t e = 0; e < hd; e++) d += qh[e] * ks[e];
            p[size_t(s)] = d * scale;
            mx = std::max(mx, p[size_t(s)]);
        }
        float sum = 0;
        for (int64_t s = first; s <= t; s++) sum += p[size_t(s)] = std::exp(p[size_t(s)] - mx);
        float *o = out + h * hd;
        for (int32_t f = 0; f < hd; f++) o[f] = 0;
        for (int64_t s = first; s <= t; s++) {
            const float *vs = val(s, j);
            const float w = p[size_t(s)] / sum;
            for (int32_t f = 0; f < hd; f++) o[f] += w * vs[f];
        }
    }
}

// The layer-independent part of a layer for T rows: q, k, v from the normalized residual (RoPE on
// attention layers only).
void project(const Hybrid &hy, int32_t l, const float *x, const int64_t *pos, int64_t T, std::vector<float> &h,
             std::vector<float> &q, std::vector<float> &k, std::vector<float> &v) {
    const ModelConfig &c = hy.m.cfg;
    const LayerWeights &w = hy.m.layers[size_t(l)];
    h.resize(size_t(T * c.d_model));
    q.resize(size_t(T * c.q_dim()));
    k.resize(size_t(T * c.kv_dim()));
    v.resize(size_t(T * c.kv_dim()));
    rms_norm(x, w.attn_norm.data(), h.data(), T, c.d_model, c.rms_eps);
    matmul(h.data(), w.wq.data(), q.data(), T, c.d_model, c.q_dim());
    matmul(h.data(), w.wk.data(), k.data(), T, c.d_model, c.kv_dim());
    matmul(h.data(), w.wv.data(), v.data(), T, c.d_model, c.kv_dim());
    if (hy.kind[size_t(l)] != kSsm) {
        apply_rope(q.data(), pos, T, c.num_q_heads, c.head_dim, hy.m.rope_inv_freq.data());
        apply_rope(k.data(), pos, T, c.num_kv_heads, c.head_dim, hy.m.rope_inv_freq.data());
    }
}

void finish_layer(const Hybrid &hy, int32_t l, const float *attn, float *x, int64_t T, std::vector<float> &h,
                  std::vector<float> &scratch) {
    const ModelConfig &c = hy.m.cfg;
    const LayerWeights &w = hy.m.layers[size_t(l)];
    matmul_add(attn, w.wo.data(), x, T, c.q_dim(), c.d_model);
    rms_norm(x, w.mlp_norm.data(), h.data(), T, c.d_model, c.rms_eps);
    scratch.resize(size_t(2 * T * c.ffn_dim));
    mlp_add(w, c, h.data(), x, T, scratch.data());
}

// The dense reference: the whole sequence from position 0, K/V in plain arrays, the state
// recurrence run from zero. logits: rows [first_row, n) of positions; states (optional): the SSM
// state after position `state_at` for every SSM layer, in layer order.
void dense_forward(const Hybrid &hy, const std::vector<int32_t> &tokens, int64_t n, int64_t first_row,
                   std::vector<float> *logits, int64_t state_at = -1, std::vector<float> *states = nullptr) {
    const ModelConfig &c = hy.m.cfg;
    const int64_t d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), hd = c.head_dim;
    std::vector<float> x(size_t(n * d)), h, q, k, v, attn(size_t(n * qd)), scratch, p;
    std::vector<int64_t> pos(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; t++) {
        pos[size_t(t)] = t;
        std::copy_n(hy.m.embedding.data() + int64_t(tokens[size_t(t)]) * d, d, x.data() + t * d);
    }
    if (states) states->clear();
    for (int32_t l = 0; l < c.num_layers; l++) {
        project(hy, l, x.data(), pos.data(), n, h, q, k, v);
        const int32_t kd = hy.kind[size_t(l)];
        if (kd == kSsm) {
            std::vector<float> S(size_t(hy.state_floats()), 0.0f);
            for (int64_t t = 0; t < n; t++) {
                ssm_token(hy, q.data() + t * qd, k.data() + t * kvd, v.data() + t * kvd, S.data(), attn.data() + t * qd);
                if (states && t == state_at) states->insert(states->end(), S.begin(), S.end());
            }
        } else {
            const int32_t W = kd == kSliding ? hy.window : 0;
            for (int64_t t = 0; t < n; t++) {
                const int64_t first = W > 0 ? std::max<int64_t>(0, t - W + 1) : 0;
                attend_token(
                    hy, q.data() + t * qd, first, t, [&](int64_t s, int32_t j) { return k.data() + s * kvd + j * hd; },
                    [&](int64_t s, int32_t j) { return v.data() + s * kvd + j * hd; }, attn.data() + t * qd, p);
            }
        }
        finish_layer(hy, l, attn.data(), x.data(), n, h, scratch);
    }
    const int64_t rows = n - first_row;
    logits->assign(size_t(rows * c.vocab), 0.0f);
    std::vector<float> tmp(size_t(rows * d));
    lm_logits(hy.m, x.data() + first_row * d, logits->data(), rows, tmp.data());
}

// ---- the hybrid pool and the paged forward pass ------------------------------------------------

struct PagedPool {
    kvc_pool *pool = nullptr;
    int32_t num_groups = 0, block_size = 0;
    std::vector<kvc_group_info> info;
    std::vector<int32_t> group_of, layer_in_group;  // per model layer
    unsigned char *base = nullptr;
    int64_t page_bytes = 0;
    ~PagedPool() {
        if (pool) kvc_pool_destroy(pool);
    }
};

// Groups in the order S, F, M of their first layer; the model's layer map from the layer kinds.
void create_hybrid_pool(const ModelConfig &mc, const std::vector<int32_t> &kinds, int32_t window, int32_t block_size,
                        int64_t num_blocks, int32_t backend, PagedPool *out) {
    std::vector<kvc_group_config> groups;
    std::vector<int32_t> group_of_kind(3, -1), layer_to_group;
    for (int32_t kd : kinds) {
        if (group_of_kind[size_t(kd)] < 0) {
            group_of_kind[size_t(kd)] = int32_t(groups.size());
            kvc_group_config g;
            kvc_check(kvc_group_config_default(&g), "kvc_group_config_default");
            g.num_layers = 0;
            g.kind = kd == kSliding ? KVC_GROUP_SLIDING : kd == kFull ? KVC_GROUP_FULL : KVC_GROUP_SSM;
            if (kd == kSsm) {
                g.state_bytes = int64_t(mc.num_kv_heads) * mc.head_dim * mc.head_dim * int64_t(sizeof(float));
            } else {
                g.num_kv_heads = mc.num_kv_heads;
                g.head_dim = mc.head_dim;
                g.sliding_window = kd == kSliding ? window : 0;
            }
            groups.push_back(g);
        }
        groups[size_t(group_of_kind[size_t(kd)])].num_layers++;
        layer_to_group.push_back(group_of_kind[size_t(kd)]);
    }
    kvc_pool_config pc;
    kvc_check(kvc_pool_config_default(&pc), "kvc_pool_config_default");
    pc.block_size = block_size;
    pc.num_blocks = num_blocks;
    pc.num_q_heads = mc.num_q_heads;
    pc.kv_dtype = KVC_DTYPE_F32;
    pc.backend = backend;
    pc.event_capacity = 0;
    kvc_check(kvc_pool_create_hybrid(&pc, groups.data(), int32_t(groups.size()), layer_to_group.data(),
                                     int32_t(layer_to_group.size()), &out->pool),
              "kvc_pool_create_hybrid");
    out->num_groups = int32_t(groups.size());
    out->block_size = block_size;
    for (int32_t g = 0; g < out->num_groups; g++) {
        kvc_group_info gi;
        gi.struct_size = sizeof gi;
        kvc_check(kvc_pool_get_group_info(out->pool, g, &gi), "kvc_pool_get_group_info");
        out->info.push_back(gi);
        out->page_bytes = gi.page_bytes;
    }
    for (int32_t l = 0; l < int32_t(kinds.size()); l++) {
        int32_t g = -1, li = -1;
        kvc_check(kvc_pool_layer_group(out->pool, l, &g, &li), "kvc_pool_layer_group");
        out->group_of.push_back(g);
        out->layer_in_group.push_back(li);
    }
    if (backend == KVC_BACKEND_CPU) {
        kvc_storage_info si;
        si.struct_size = sizeof si;
        kvc_check(kvc_storage_get_info(out->pool, &si), "kvc_storage_get_info");
        if (si.block_stride != out->page_bytes)
            throw std::runtime_error("storage block stride differs from the groups' page_bytes");
        out->base = reinterpret_cast<unsigned char *>(uintptr_t(si.base_address));
    }
}

std::vector<int32_t> group_table(const PagedPool &pp, uint64_t seq, int32_t g) {
    int64_t len = 0;
    kvc_status st = kvc_seq_group_block_table(pp.pool, seq, g, nullptr, 0, &len);
    if (st != KVC_OK && st != KVC_ERR_BUFFER_TOO_SMALL) kvc_check(st, "kvc_seq_group_block_table");
    std::vector<int32_t> t(static_cast<size_t>(len));
    kvc_check(kvc_seq_group_block_table(pp.pool, seq, g, t.data(), len, &len), "kvc_seq_group_block_table");
    return t;
}

// Computes positions [first, n) of a sequence whose tokens [0, n) are confirmed in the pool, its
// K/V and state going into the pages; returns the logits of position n - 1. *resumed_state (when
// first > 0 and the model has SSM layers) receives the state read from the snapshot page of the
// block holding first - 1, for the snapshot check.
void paged_forward(const Hybrid &hy, const PagedPool &pp, uint64_t seq, const std::vector<int32_t> &tokens,
                   int64_t first, int64_t n, float *logits, std::vector<float> *resumed_state) {
    const ModelConfig &c = hy.m.cfg;
    const int64_t d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), hd = c.head_dim, bs = pp.block_size;
    const int64_t T = n - first;
    std::vector<std::vector<int32_t>> tables;
    for (int32_t g = 0; g < pp.num_groups; g++) tables.push_back(group_table(pp, seq, g));
    std::vector<float> x(size_t(T * d)), h, q, k, v, attn(size_t(T * qd)), scratch, p;
    std::vector<int64_t> pos(static_cast<size_t>(T));
    for (int64_t i = 0; i < T; i++) {
        pos[size_t(i)] = first + i;
        std::copy_n(hy.m.embedding.data() + int64_t(tokens[size_t(first + i)]) * d, d, x.data() + i * d);
    }
    if (resumed_state) resumed_state->clear();
    auto page = [&](int32_t g, int64_t position, const char *what) {
        const std::vector<int32_t> &t = tables[size_t(g)];
        const int64_t b = position / bs;
        if (b >= int64_t(t.size()) || t[size_t(b)] < 0)
            throw std::runtime_error(std::string("group ") + std::to_string(g) + " holds no page for position " +
                                     std::to_string(position) + " (" + what + ")");
        return pp.base + int64_t(t[size_t(b)]) * pp.page_bytes;
    };
    for (int32_t l = 0; l < c.num_layers; l++) {
        project(hy, l, x.data(), pos.data(), T, h, q, k, v);
        const int32_t g = pp.group_of[size_t(l)];
        const kvc_group_info &gi = pp.info[size_t(g)];
        const int64_t layer_off = int64_t(pp.layer_in_group[size_t(l)]) * gi.layer_stride;
        if (hy.kind[size_t(l)] == kSsm) {
            // The state after position first - 1: the snapshot page of its block (zero at the start).
            std::vector<float> S(size_t(hy.state_floats()), 0.0f);
            const size_t state_bytes = S.size() * sizeof(float);
            if (first > 0) {
                std::memcpy(S.data(), page(g, first - 1, "state read") + layer_off, state_bytes);
                if (resumed_state) resumed_state->insert(resumed_state->end(), S.begin(), S.end());
            }
            for (int64_t i = 0; i < T; i++) {
                const int64_t t = first + i;
                ssm_token(hy, q.data() + i * qd, k.data() + i * kvd, v.data() + i * kvd, S.data(), attn.data() + i * qd);
                // The state after t into the page of t's block: at every block's last token (the
                // snapshot the pool caches with the block) and after the newest token.
                if ((t + 1) % bs == 0 || t == n - 1) std::memcpy(page(g, t, "state write") + layer_off, S.data(), state_bytes);
            }
        } else {
            // [K|V][kv_head][token][dim] inside the group's layer.
            const int64_t head_stride = bs * hd * int64_t(sizeof(float));
            const int64_t kv_stride = c.num_kv_heads * head_stride;
            auto row = [&](int64_t s, int32_t j, int32_t kv) {
                return reinterpret_cast<float *>(page(g, s, kv ? "V" : "K") + layer_off + kv * kv_stride +
                                                 j * head_stride + (s % bs) * hd * int64_t(sizeof(float)));
            };
            for (int64_t i = 0; i < T; i++)
                for (int32_t j = 0; j < c.num_kv_heads; j++) {
                    std::copy_n(k.data() + i * kvd + j * hd, hd, row(first + i, j, 0));
                    std::copy_n(v.data() + i * kvd + j * hd, hd, row(first + i, j, 1));
                }
            const int32_t W = gi.sliding_window;
            for (int64_t i = 0; i < T; i++) {
                const int64_t t = first + i;
                const int64_t from = W > 0 ? std::max<int64_t>(0, t - W + 1) : 0;
                attend_token(
                    hy, q.data() + i * qd, from, t, [&](int64_t s, int32_t j) { return (const float *)row(s, j, 0); },
                    [&](int64_t s, int32_t j) { return (const float *)row(s, j, 1); }, attn.data() + i * qd, p);
            }
        }
        finish_layer(hy, l, attn.data(), x.data(), T, h, scratch);
    }
    std::vector<float> tmp(static_cast<size_t>(d));
    lm_logits(hy.m, x.data() + (T - 1) * d, logits, 1, tmp.data());
}

// The --corrupt self-test (see Opts::corrupt).
void corrupt_page(const PagedPool &pp, uint64_t seq, char which, int64_t hit) {
    const int32_t want = which == 'M' ? KVC_GROUP_SSM : which == 'F' ? KVC_GROUP_FULL : KVC_GROUP_SLIDING;
    for (int32_t g = 0; g < pp.num_groups; g++) {
        if (pp.info[size_t(g)].kind != want) continue;
        const std::vector<int32_t> t = group_table(pp, seq, g);
        const int64_t b = which == 'F' ? 0 : (hit - 1) / pp.block_size;
        if (b >= int64_t(t.size()) || t[size_t(b)] < 0) throw std::runtime_error("--corrupt: no such page");
        float *f = reinterpret_cast<float *>(pp.base + int64_t(t[size_t(b)]) * pp.page_bytes);
        // The first float of the group's first layer: a K element (attention) or S[0][0] (state).
        f[0] += 1.0f;
        return;
    }
    throw std::runtime_error(std::string("--corrupt: the model has no ") + which + " layer");
}

int32_t argmax(const float *row, int32_t V) { return int32_t(std::max_element(row, row + V) - row); }

// ---- the serving loop with the model (one hybrid pool) ------------------------------------------

struct Sample {
    uint64_t seq = 0;
    int32_t req = 0;
    std::vector<int32_t> tokens;   // confirmed in the pool
    int32_t pending = -1;          // sampled, appended next step
    int64_t prompt_len = 0;
    std::vector<float> logits;     // [generated][vocab]
    int32_t generated = 0;
    // Snapshot resumes (admissions with a hit, the model having SSM layers): the hit position and
    // the state read from the snapshot pages, checked against the reference's state at hit - 1.
    std::vector<std::pair<int64_t, std::vector<float>>> resumes;
    bool child = false;  // forked: its first token is the parent's second choice, not the argmax
    bool forked = false; // has forked its child (a re-admission does not fork again)
};

struct Figures {
    int64_t admissions = 0, hit_admissions = 0, prompt_tokens = 0, hit_tokens = 0, computed_tokens = 0;
    int64_t preemptions = 0, steps = 0, peak_used = 0, generated = 0;
    int64_t checked_tokens = 0, snapshot_checks = 0, forks = 0, cow_copies = 0;
    double max_diff = 0, max_state_diff = 0;
};

int run_demo(Opts o) {
    ModelConfig mc;
    mc.vocab = 256;
    mc.d_model = 128;
    mc.num_layers = int32_t(o.layers.size());
    mc.num_q_heads = 4;
    mc.num_kv_heads = 2;
    mc.head_dim = 32;
    mc.ffn_dim = 256;
    Hybrid hy;
    hy.m = Model::random(mc, o.seed);
    hy.window = o.window;
    bool has_ssm = false;
    for (char ch : o.layers) {
        hy.kind.push_back(ch == 'S' ? kSliding : ch == 'F' ? kFull : kSsm);
        has_ssm |= ch == 'M';
    }
    for (int32_t j = 0; j < mc.num_kv_heads; j++) hy.decay.push_back(0.90f + 0.05f * float(j));
    PagedPool pp;
    create_hybrid_pool(mc, hy.kind, o.window, o.block_size, o.blocks, KVC_BACKEND_CPU, &pp);
    std::printf("kvc_hybrid: one hybrid pool, %lld pages of %lld bytes, block size %d, CPU backend\n",
                (long long)o.blocks, (long long)pp.page_bytes, o.block_size);
    for (int32_t g = 0; g < pp.num_groups; g++) {
        const kvc_group_info &gi = pp.info[size_t(g)];
        std::string layers;
        for (int32_t l = 0; l < mc.num_layers; l++)
            if (pp.group_of[size_t(l)] == g) layers += (layers.empty() ? "" : ",") + std::to_string(l);
        std::printf("  group %d %-7s layers %-6s", g, group_kind_name(gi.kind), layers.c_str());
        if (gi.kind == KVC_GROUP_SLIDING) std::printf(" window %d,", gi.sliding_window);
        if (gi.kind == KVC_GROUP_SSM) std::printf(" state %lld bytes/layer,", (long long)gi.state_bytes);
        std::printf(" uses %lld of %lld page bytes\n", (long long)gi.group_bytes, (long long)gi.page_bytes);
    }
    const std::vector<Req> reqs = make_trace(o, mc.vocab);
    const int32_t V = mc.vocab;
    Figures f;
    std::deque<std::unique_ptr<Sample>> waiting;
    for (size_t i = 0; i < reqs.size(); i++) {
        auto s = std::make_unique<Sample>();
        s->req = int32_t(i);
        s->tokens = reqs[i].prompt;
        s->prompt_len = int64_t(reqs[i].prompt.size());
        waiting.push_back(std::move(s));
    }
    std::vector<std::unique_ptr<Sample>> running;
    uint64_t next_seq = 1;
    int32_t done = 0, samples = 0;
    for (const Req &r : reqs) samples += r.fork ? 2 : 1;
    std::vector<float> row(static_cast<size_t>(V));
    auto check = [&](const Sample &s) {
        // Positions prompt_len - 1 .. end - 1 produced the generated tokens.
        std::vector<int32_t> all = s.tokens;
        all.push_back(s.pending);
        const int64_t n = int64_t(all.size()) - 1;
        std::vector<float> ref;
        dense_forward(hy, all, n, s.prompt_len - 1, &ref);
        for (int32_t gi = 0; gi < s.generated; gi++) {
            const float *a = s.logits.data() + int64_t(gi) * V, *b = ref.data() + int64_t(gi) * V;
            for (int32_t vv = 0; vv < V; vv++) f.max_diff = std::max(f.max_diff, double(std::fabs(a[vv] - b[vv])));
            const int32_t want = argmax(b, V), got = all[size_t(s.prompt_len + gi)];
            // A forked sample's first token is its parent's second choice (so the two diverge).
            if ((want != got && !(s.child && gi == 0)) || !(f.max_diff <= 1e-4))
                throw std::runtime_error("request " + std::to_string(s.req) + " generated token " + std::to_string(gi) +
                                         ": paged " + std::to_string(got) + " vs dense reference " +
                                         std::to_string(want) + " (max |logit diff| " + std::to_string(f.max_diff) + ")");
        }
        f.checked_tokens += s.generated;
        for (const auto &r : s.resumes) {
            std::vector<float> ref_logits, states;
            dense_forward(hy, all, r.first, r.first - 1, &ref_logits, r.first - 1, &states);
            if (states.size() != r.second.size()) throw std::runtime_error("snapshot size mismatch");
            double worst = 0;
            for (size_t i = 0; i < states.size(); i++) worst = std::max(worst, double(std::fabs(states[i] - r.second[i])));
            f.max_state_diff = std::max(f.max_state_diff, worst);
            if (worst != 0)
                throw std::runtime_error("request " + std::to_string(s.req) + ": the snapshot resumed at position " +
                                         std::to_string(r.first) + " differs from the recomputed state by " +
                                         std::to_string(worst));
            f.snapshot_checks++;
        }
    };
    auto take = [&](Sample &s, const float *logits) {
        s.logits.insert(s.logits.end(), logits, logits + V);
        s.pending = argmax(logits, V);  // greedy: the reference must pick the same token
        s.generated++;
        f.generated++;
    };
    auto preempt = [&](std::unique_ptr<Sample> s) {
        kvc_check(kvc_free(pp.pool, s->seq), "kvc_free");
        s->tokens.push_back(s->pending);  // recomputed with the rest
        s->pending = -1;
        f.preemptions++;
        waiting.push_front(std::move(s));
    };
    for (f.steps = 0; done < samples; f.steps++) {
        if (f.steps > 100000) throw std::runtime_error("no progress");
        // Decode: every running sample appends its pending token (preempting the newest on a miss).
        std::vector<Sample *> decoding;
        for (size_t i = 0; i < running.size(); i++) {
            Sample &s = *running[i];
            for (;;) {
                const kvc_status st = kvc_append(pp.pool, s.seq, &s.pending, 1, 0, nullptr);
                if (st == KVC_OK) break;
                if (st != KVC_ERR_OUT_OF_BLOCKS) kvc_check(st, "kvc_append");
                std::unique_ptr<Sample> victim = std::move(running.back());
                running.pop_back();
                const bool self = victim.get() == &s;
                preempt(std::move(victim));
                if (self) break;
            }
            if (i >= running.size()) break;
            s.tokens.push_back(s.pending);
            s.pending = -1;
            decoding.push_back(&s);
        }
        // Copy-on-write pairs (a forked sample's shared partial block and SSM page) before the
        // step's writes.
        int64_t copied = 0;
        kvc_check(kvc_copy_pending(pp.pool, nullptr, &copied), "kvc_copy_pending");
        f.cow_copies += copied;
        for (Sample *s : decoding) {
            const int64_t n = int64_t(s->tokens.size());
            paged_forward(hy, pp, s->seq, s->tokens, n - 1, n, row.data(), nullptr);
            f.computed_tokens++;
            take(*s, row.data());
        }
        // Admit (preempted samples first) while there is room.
        while (!waiting.empty() && int32_t(running.size()) < o.max_running) {
            Sample &s = *waiting.front();
            const int64_t n = int64_t(s.tokens.size());
            int32_t verdict = 0;
            kvc_check(kvc_can_alloc(pp.pool, s.tokens.data(), n, nullptr, &verdict), "kvc_can_alloc");
            if (verdict == KVC_ALLOC_NEVER) throw std::runtime_error("a request can never fit this pool");
            if (verdict != KVC_ALLOC_OK) break;
            s.seq = next_seq++;
            int64_t hit = 0;
            const kvc_status st = kvc_alloc(pp.pool, s.seq, s.tokens.data(), n, nullptr, &hit);
            if (st == KVC_ERR_OUT_OF_BLOCKS) break;
            kvc_check(st, "kvc_alloc");
            f.admissions++;
            f.prompt_tokens += n;
            f.hit_tokens += hit;
            f.hit_admissions += hit > 0;
            if (o.corrupt && hit > 0) {
                corrupt_page(pp, s.seq, o.corrupt, hit);
                std::printf("corrupted  one float of a cached %c page that request %d resumes from at position %lld\n",
                            o.corrupt, s.req, (long long)hit);
                o.corrupt = 0;
            }
            std::vector<float> resumed;
            paged_forward(hy, pp, s.seq, s.tokens, hit, n, row.data(), has_ssm && hit > 0 ? &resumed : nullptr);
            if (has_ssm && hit > 0) s.resumes.emplace_back(hit, std::move(resumed));
            f.computed_tokens += n - hit;
            take(s, row.data());
            std::unique_ptr<Sample> admitted = std::move(waiting.front());
            waiting.pop_front();
            if (reqs[size_t(admitted->req)].fork && !admitted->child && !admitted->forked) {
                admitted->forked = true;
                // A second sample: shares every page (KV and the SSM state) and diverges by
                // copy-on-write from its first own token, which is the parent's second choice.
                auto c = std::make_unique<Sample>();
                c->seq = next_seq++;
                kvc_check(kvc_fork(pp.pool, admitted->seq, c->seq), "kvc_fork");
                c->req = admitted->req;
                c->tokens = admitted->tokens;
                c->prompt_len = admitted->prompt_len;
                c->logits = admitted->logits;
                c->generated = 1;
                c->child = true;
                std::vector<float> r2(admitted->logits.end() - V, admitted->logits.end());
                r2[size_t(admitted->pending)] = -INFINITY;
                c->pending = argmax(r2.data(), V);
                f.forks++;
                f.generated++;
                running.push_back(std::move(admitted));
                running.push_back(std::move(c));
            } else {
                running.push_back(std::move(admitted));
            }
        }
        kvc_stats st;
        st.struct_size = sizeof st;
        kvc_check(kvc_pool_stats(pp.pool, &st), "kvc_pool_stats");
        f.peak_used = std::max(f.peak_used, st.used_blocks);
        // Finish.
        for (auto &s : running)
            if (s->generated >= reqs[size_t(s->req)].gen) {
                kvc_check(kvc_free(pp.pool, s->seq), "kvc_free");
                check(*s);
                done++;
                s.reset();
            }
        running.erase(std::remove(running.begin(), running.end(), nullptr), running.end());
    }
    kvc_check(kvc_pool_check(pp.pool), "kvc_pool_check");
    std::printf("served     %d requests in %lld steps, %lld tokens generated, peak %lld of %lld pages in use\n",
                o.requests, (long long)f.steps, (long long)f.generated, (long long)f.peak_used, (long long)o.blocks);
    std::printf("prefix     %lld admissions, %lld with a hit; %lld of %lld prompt tokens hit (%.1f%%), %lld computed\n",
                (long long)f.admissions, (long long)f.hit_admissions, (long long)f.hit_tokens,
                (long long)f.prompt_tokens, f.prompt_tokens ? 100.0 * double(f.hit_tokens) / double(f.prompt_tokens) : 0.0,
                (long long)f.computed_tokens);
    std::printf("preempt    %lld by recompute (kvc_free, re-admitted from the cached prefix)\n", (long long)f.preemptions);
    std::printf("fork       %lld samples forked after their prefill (KV and SSM pages shared), %lld copy-on-write "
                "page copies\n",
                (long long)f.forks, (long long)f.cow_copies);
    if (has_ssm)
        std::printf("snapshots  %lld resumes from a cached SSM state snapshot, each equal to the recomputed state "
                    "(max |diff| %g)\n",
                    (long long)f.snapshot_checks, f.max_state_diff);
    std::printf("reference  %lld generated tokens equal the dense reference's (greedy), max |logit diff| %g -- OK\n",
                (long long)f.checked_tokens, f.max_diff);
    return 0;
}

// ---- --compare: one hybrid pool vs two pools, bookkeeping only ----------------------------------

struct Compare {
    int64_t steps = 0, admissions = 0, prompt_tokens = 0, hit_tokens = 0, preemptions = 0, evictions = 0;
    int64_t first_hit_tokens = 0;  // hit at each request's first admission (not its re-admissions)
    int64_t peak_used = 0, peak_running = 0, running_steps = 0;
    int64_t peak_l = 0, peak_g = 0;  // two pools: each pool's own peak
};

// The tokens a request generates: a function of (request, position) only, so both layouts see the
// same sequences whatever their scheduling.
int32_t gen_token(int32_t req, int64_t pos, int32_t vocab) {
    uint64_t h = (uint64_t(req) * 0x9E3779B97F4A7C15ull) ^ (uint64_t(pos) * 0xC2B2AE3D27D4EB4Full);
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return int32_t(h % uint64_t(vocab));
}

// The backend the comparison needs: admission (hit, verdict, alloc), append, free, used blocks.
struct Layout {
    virtual ~Layout() = default;
    virtual int32_t admit(uint64_t seq, const std::vector<int32_t> &tokens, int64_t *hit) = 0;  // kvc_alloc_verdict
    virtual kvc_status append(uint64_t seq, int32_t token) = 0;
    virtual void free(uint64_t seq) = 0;
    virtual void used(int64_t *total, int64_t *l, int64_t *g) = 0;
    virtual int64_t evictions() = 0;
};

struct OnePool : Layout {
    PagedPool pp;
    int32_t admit(uint64_t seq, const std::vector<int32_t> &t, int64_t *hit) override {
        int32_t verdict = 0;
        kvc_check(kvc_can_alloc(pp.pool, t.data(), int64_t(t.size()), nullptr, &verdict), "kvc_can_alloc");
        if (verdict != KVC_ALLOC_OK) return verdict;
        const kvc_status st = kvc_alloc(pp.pool, seq, t.data(), int64_t(t.size()), nullptr, hit);
        if (st == KVC_ERR_OUT_OF_BLOCKS) return KVC_ALLOC_LATER;
        kvc_check(st, "kvc_alloc");
        return KVC_ALLOC_OK;
    }
    kvc_status append(uint64_t seq, int32_t token) override {
        const kvc_status st = kvc_append(pp.pool, seq, &token, 1, 0, nullptr);
        if (st != KVC_ERR_OUT_OF_BLOCKS) kvc_check(st, "kvc_append");
        return st;
    }
    void free(uint64_t seq) override { kvc_check(kvc_free(pp.pool, seq), "kvc_free"); }
    kvc_stats stats() {
        kvc_stats st;
        st.struct_size = sizeof st;
        kvc_check(kvc_pool_stats(pp.pool, &st), "kvc_pool_stats");
        return st;
    }
    void used(int64_t *total, int64_t *l, int64_t *g) override {
        *total = stats().used_blocks;
        *l = *g = 0;
    }
    int64_t evictions() override { return stats().evictions; }
};

struct TwoPools : Layout {
    std::unique_ptr<KvStore> kv;
    int32_t admit(uint64_t seq, const std::vector<int32_t> &t, int64_t *hit) override {
        const int64_t c = kv->common_hit(t);
        const int32_t verdict = kv->can_alloc(t, c);
        if (verdict != KVC_ALLOC_OK) return verdict;
        if (kv->alloc(seq, t, c, hit) == KVC_ERR_OUT_OF_BLOCKS) return KVC_ALLOC_LATER;
        return KVC_ALLOC_OK;
    }
    kvc_status append(uint64_t seq, int32_t token) override { return kv->append(seq, &token, 1); }
    void free(uint64_t seq) override { kv->free(seq); }
    void used(int64_t *total, int64_t *l, int64_t *g) override {
        *l = kv->groups()[0].pool->stats().used_blocks;
        *g = kv->groups()[1].pool->stats().used_blocks;
        *total = *l + *g;
    }
    int64_t evictions() override {
        return kv->groups()[0].pool->stats().evictions + kv->groups()[1].pool->stats().evictions;
    }
};

Compare simulate(Layout &lay, const std::vector<Req> &reqs, int32_t max_running, int32_t vocab) {
    struct S {
        int32_t req;
        uint64_t seq = 0;
        std::vector<int32_t> tokens;
        int64_t end = 0;  // length when done
        bool admitted_before = false;
    };
    Compare c;
    std::deque<S> waiting;
    for (size_t i = 0; i < reqs.size(); i++)
        waiting.push_back({int32_t(i), 0, reqs[i].prompt, int64_t(reqs[i].prompt.size()) + reqs[i].gen, false});
    std::vector<S> running;
    uint64_t next = 1;
    size_t done = 0;
    for (c.steps = 0; done < reqs.size(); c.steps++) {
        if (c.steps > 1000000) throw std::runtime_error("compare: no progress");
        for (size_t i = 0; i < running.size();) {
            S &s = running[i];
            const int32_t tok = gen_token(s.req, int64_t(s.tokens.size()), vocab);
            if (lay.append(s.seq, tok) == KVC_OK) {
                s.tokens.push_back(tok);
                i++;
                continue;
            }
            // Recompute preemption of the newest sample (maybe this one).
            lay.free(running.back().seq);
            waiting.push_front(std::move(running.back()));
            running.pop_back();
            c.preemptions++;
        }
        while (!waiting.empty() && int32_t(running.size()) < max_running) {
            S &s = waiting.front();
            s.seq = next++;
            int64_t hit = 0;
            const int32_t v = lay.admit(s.seq, s.tokens, &hit);
            if (v == KVC_ALLOC_NEVER) throw std::runtime_error("compare: a request never fits");
            if (v != KVC_ALLOC_OK) break;
            c.admissions++;
            c.prompt_tokens += int64_t(s.tokens.size());
            c.hit_tokens += hit;
            if (!s.admitted_before) c.first_hit_tokens += hit;
            s.admitted_before = true;
            running.push_back(std::move(s));
            waiting.pop_front();
        }
        int64_t total = 0, l = 0, g = 0;
        lay.used(&total, &l, &g);
        c.peak_used = std::max(c.peak_used, total);
        c.peak_l = std::max(c.peak_l, l);
        c.peak_g = std::max(c.peak_g, g);
        c.peak_running = std::max(c.peak_running, int64_t(running.size()));
        c.running_steps += int64_t(running.size());
        for (size_t i = 0; i < running.size();)
            if (int64_t(running[i].tokens.size()) >= running[i].end) {
                lay.free(running[i].seq);
                running.erase(running.begin() + int64_t(i));
                done++;
            } else {
                i++;
            }
    }
    c.evictions = lay.evictions();
    return c;
}

int run_compare(const Opts &o) {
    ModelConfig mc;
    mc.num_layers = int32_t(o.layers.size());
    std::vector<int32_t> kinds;
    for (char ch : o.layers) {
        if (ch == 'M') throw std::runtime_error("--compare: the two-pool recipe has no SSM layers (drop M from --layers)");
        kinds.push_back(ch == 'S' ? kSliding : kFull);
    }
    // KvStore (the two-pool recipe) puts the even layers in pool L: the layer string must say so.
    for (int32_t l = 0; l < mc.num_layers; l++)
        if (kinds[size_t(l)] != (l % 2 == 0 ? kSliding : kFull))
            throw std::runtime_error("--compare needs alternating layers starting with S (SFSF...)");
    const std::vector<Req> reqs = make_trace(o, mc.vocab);
    int64_t longest = 0, total_tokens = 0;
    for (const Req &r : reqs) {
        longest = std::max<int64_t>(longest, int64_t(r.prompt.size()) + r.gen);
        total_tokens += int64_t(r.prompt.size()) + r.gen;
    }
    auto one = [&](int64_t blocks) {
        OnePool p;
        create_hybrid_pool(mc, kinds, o.window, o.block_size, blocks, KVC_BACKEND_CPU, &p.pp);
        return simulate(p, reqs, o.max_running, mc.vocab);
    };
    auto two = [&](int64_t l_blocks, int64_t g_blocks) {
        TwoPools p;
        KvStoreConfig kc;
        kc.block_size = o.block_size;
        kc.num_blocks = g_blocks;
        kc.window_blocks = l_blocks;
        kc.kv_dtype = KVC_DTYPE_F32;
        kc.backend = KVC_BACKEND_CPU;
        kc.max_seq_len = 0;
        kc.window = o.window;
        kc.hybrid = true;
        kc.two_pools = true;  // the former recipe (kvc_serve --hybrid=two-pools)
        std::string why;
        p.kv = std::make_unique<KvStore>(mc, kc, &why);
        return simulate(p, reqs, o.max_running, mc.vocab);
    };
    // A page of the hybrid pool and a block of either pool hold the same bytes here (half the layers
    // each): page counts compare directly.
    PagedPool probe;
    create_hybrid_pool(mc, kinds, o.window, o.block_size, 8, KVC_BACKEND_CPU, &probe);
    std::printf("kvc_hybrid --compare: %d requests (%d system prompts of %d tokens + %d..%d unique, %d generated), "
                "%d running at most\n",
                o.requests, o.system_prompts, o.system_len, o.suffix_min, o.suffix_max, o.gen_tokens, o.max_running);
    std::printf("model %d layers %s, window %d, block size %d; one page = one block of pool L = one of pool G "
                "(%lld bytes at f32, %d heads x %d)\n",
                mc.num_layers, o.layers.c_str(), o.window, o.block_size, (long long)probe.page_bytes, mc.num_kv_heads,
                mc.head_dim);
    // 1. Unconstrained (nothing evicted, nothing preempted): blocks in use at the peak.
    const int64_t big = (total_tokens / o.block_size + 2 * int64_t(reqs.size()) + 16) * 2;
    const Compare h = one(big), t = two(big, big);
    std::printf("\n[unconstrained: %lld blocks per pool]\n", (long long)big);
    std::printf("  one hybrid pool: peak %lld pages in use; hit %lld of %lld prompt tokens; %lld steps\n",
                (long long)h.peak_used, (long long)h.hit_tokens, (long long)h.prompt_tokens, (long long)h.steps);
    std::printf("  two pools:       peak %lld blocks in use together (pool L %lld + pool G %lld at their own peaks = "
                "%lld); hit %lld of %lld; %lld steps\n",
                (long long)t.peak_used, (long long)t.peak_l, (long long)t.peak_g, (long long)(t.peak_l + t.peak_g),
                (long long)t.hit_tokens, (long long)t.prompt_tokens, (long long)t.steps);
    // 2. The least memory that serves the trace without a preemption: the hybrid pool's pages; for
    // two pools each pool's least size with the other one unconstrained, then both grown together
    // until the pair serves it too.
    auto no_preemption = [](const Compare &c) { return c.preemptions == 0; };
    int64_t hb = h.peak_used;
    while (hb > 1 && no_preemption(one(hb - 1))) hb--;
    int64_t lb = t.peak_l, gb = t.peak_g;
    auto two_ok = [&](int64_t l, int64_t g) {
        try {
            return no_preemption(two(l, g));
        } catch (const std::exception &) {
            return false;  // a request that never fits
        }
    };
    while (lb > 1 && two_ok(lb - 1, big)) lb--;
    while (gb > 1 && two_ok(big, gb - 1)) gb--;
    while (!two_ok(lb, gb)) lb++, gb++;
    std::printf("\n[least memory without a preemption]\n");
    std::printf("  one hybrid pool: %lld pages\n", (long long)hb);
    std::printf("  two pools:       %lld blocks (pool L %lld + pool G %lld)\n", (long long)(lb + gb), (long long)lb,
                (long long)gb);
    // 3. Fixed budgets (in pages): the hybrid pool takes them all; two pools must split them.
    std::printf("\n[fixed budgets: B pages of memory; two pools split B as L:G]\n");
    std::printf("  %-5s %-24s %6s %9s %9s %9s %8s %7s %8s %8s\n", "B", "layout", "steps", "1st hit", "all hits",
                "computed", "preempt", "evicted", "mean run", "peak run");
    auto row = [&](int64_t B, const std::string &name, const Compare &c) {
        std::printf("  %-5lld %-24s %6lld %9lld %9lld %9lld %8lld %7lld %8.2f %8lld\n", (long long)B, name.c_str(),
                    (long long)c.steps, (long long)c.first_hit_tokens, (long long)c.hit_tokens,
                    (long long)(c.prompt_tokens - c.hit_tokens), (long long)c.preemptions, (long long)c.evictions,
                    c.steps ? double(c.running_steps) / double(c.steps) : 0.0, (long long)c.peak_running);
    };
    const int64_t min_pages = 2 * ((longest + o.block_size - 1) / o.block_size) + 2;
    for (const int64_t B : {h.peak_used, h.peak_used * 3 / 4, h.peak_used / 2, h.peak_used / 3}) {
        if (B < min_pages) continue;
        row(B, "one hybrid pool", one(B));
        // The caller's split: 50:50, and the best (fewest steps) in steps of B/10, known only after
        // the fact.
        std::string best_name;
        Compare best;
        best.steps = -1;
        for (int32_t tenth = 1; tenth <= 9; tenth++) {
            const int64_t l = B * tenth / 10, g = B - l;
            Compare c;
            try {
                c = two(l, g);
            } catch (const std::exception &) {
                continue;  // a request that never fits this split
            }
            if (tenth == 5) row(B, "two pools 50:50 (" + std::to_string(l) + ":" + std::to_string(g) + ")", c);
            if (best.steps < 0 || c.steps < best.steps) {
                best = c;
                best_name = "two pools best (" + std::to_string(l) + ":" + std::to_string(g) + ")";
            }
        }
        if (best.steps >= 0) row(B, best_name, best);
    }
    return 0;
}

bool parse(int argc, char **argv, Opts *o, std::string *err) {
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        auto num = [&](auto *out) {
            if (i + 1 >= argc) {
                *err = a + " needs a value";
                return false;
            }
            *out = decltype(+*out)(std::stoll(argv[++i]));
            return true;
        };
        bool ok = true;
        if (a == "--requests") ok = num(&o->requests);
        else if (a == "--seed") ok = num(&o->seed);
        else if (a == "--blocks") ok = num(&o->blocks);
        else if (a == "--block-size") ok = num(&o->block_size);
        else if (a == "--window") ok = num(&o->window);
        else if (a == "--gen") ok = num(&o->gen_tokens);
        else if (a == "--system-len") ok = num(&o->system_len);
        else if (a == "--system-prompts") ok = num(&o->system_prompts);
        else if (a == "--suffix-max") ok = num(&o->suffix_max);
        else if (a == "--max-running") ok = num(&o->max_running);
        else if (a == "--fork-every") ok = num(&o->fork_every);
        else if (a == "--layers" && i + 1 < argc) o->layers = argv[++i];
        else if (a == "--compare") o->compare = true;
        else if (a == "--corrupt" && i + 1 < argc) o->corrupt = argv[++i][0];
        else if (a == "--quiet") o->quiet = true;
        else {
            *err = "unknown flag " + a;
            return false;
        }
        if (!ok) return false;
    }
    if (o->layers.empty() || o->layers.find_first_not_of("SFM") != std::string::npos) {
        *err = "--layers takes S, F and M letters";
        return false;
    }
    if (o->window < 1 || o->block_size < 1 || o->requests < 1 || o->system_prompts < 1 || o->max_running < 1 ||
        o->suffix_max < o->suffix_min || o->gen_tokens < 1) {
        *err = "bad value";
        return false;
    }
    return true;
}

}  // namespace

int main(int argc, char **argv) {
    Opts o;
    std::string err;
    try {
        if (!parse(argc, argv, &o, &err)) {
            std::fprintf(stderr, "kvc_hybrid: %s\n%s", err.c_str(), kUsage);
            return 2;
        }
        return o.compare ? run_compare(o) : run_demo(o);
    } catch (const std::exception &e) {
        std::fflush(stdout);
        std::fprintf(stderr, "kvc_hybrid: FAILED: %s\n", e.what());
        return 1;
    }
}
