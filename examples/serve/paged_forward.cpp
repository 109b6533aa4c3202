#include "paged_forward.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kvc_check.hpp"

namespace serve {

PagedForward::PagedForward(const Model &m, const KvStore &store, int32_t backend, int32_t max_seqs, int64_t max_tokens,
                           int64_t max_logit_rows, int32_t max_blocks_per_seq)
    : m_(m), placement_(store.placement()), max_tokens_(max_tokens),
      max_logit_rows_(std::min(max_logit_rows, max_tokens)), on_device_(backend == KVC_BACKEND_CUDA) {
    const ModelConfig &c = m.cfg;
    auto add_group = [&](ReplicatedPool *pool, int32_t window) {
        Group g;
        g.pool = pool;
        g.batch = std::make_unique<ReplicatedBatch>(*pool, max_seqs, max_tokens, max_blocks_per_seq);
        kvc_check(kvc_attention_params_default(&g.params), "kvc_attention_params_default");
        g.params.num_q_heads = c.num_q_heads / pool->ranks();
        g.params.q_dtype = KVC_DTYPE_F32;  // activations are fp32; scale 0 = 1/sqrt(head_dim)
        g.params.sliding_window = window;
        groups_.push_back(std::move(g));
    };
    if (store.one_pool_hybrid()) {
        // One hybrid pool: a batch per KV-cache group (all attention groups here: SLIDING, FULL),
        // each recording its group's tables (kvc_batch_set_group before its first build). A layer
        // attends with its group's batch and window; libkvc maps the model layer to its group.
        ReplicatedPool *pool = store.groups()[0].pool.get();
        kvc_pool *p = pool->rank(0);
        for (int32_t grp = 0; grp < pool->num_groups(); grp++) {
            kvc_group_info gi;
            gi.struct_size = sizeof gi;
            kvc_check(kvc_pool_get_group_info(p, grp, &gi), "kvc_pool_get_group_info");
            if (gi.kind == KVC_GROUP_SSM) throw std::runtime_error("internal: kvc_serve's model has no SSM layers");
            add_group(pool, gi.kind == KVC_GROUP_SLIDING ? gi.sliding_window : 0);
            groups_.back().batch->set_group(grp);
        }
        placement_.clear();
        for (int32_t l = 0; l < c.num_layers; l++) {
            int32_t grp = 0, in_group = 0;
            kvc_check(kvc_pool_layer_group(p, l, &grp, &in_group), "kvc_pool_layer_group");
            placement_.push_back({grp, l});
        }
    } else {
        // The same for every layer of a pool (it stores all of them per block): the pool's own window.
        for (const PoolGroup &pg : store.groups()) add_group(pg.pool.get(), pg.window);
    }
    const size_t T = size_t(max_tokens);
    x_.resize(T * size_t(c.d_model));
    h_.resize(T * size_t(c.d_model));
    q_.resize(T * size_t(c.q_dim()));
    k_.resize(T * size_t(c.kv_dim()));
    v_.resize(T * size_t(c.kv_dim()));
    attn_.resize(T * size_t(c.q_dim()));
    if (store.ranks() > 1) {
        q_shard_.resize(q_.size() / size_t(store.ranks()));
        k_shard_.resize(k_.size() / size_t(store.ranks()));
        v_shard_.resize(v_.size() / size_t(store.ranks()));
        attn_shard_.resize(attn_.size() / size_t(store.ranks()));
    }
    scratch_.resize(2 * T * size_t(c.ffn_dim));
    last_.resize(size_t(max_logit_rows_) * size_t(c.d_model));  // h_ (max_tokens rows) is lm_logits' scratch
    pos_.resize(T);
    ids_.reserve(size_t(max_seqs));
    if (on_device_) {
        dq_ = DeviceBuffer(q_.size() * sizeof(float));
        dk_ = DeviceBuffer(k_.size() * sizeof(float));
        dv_ = DeviceBuffer(v_.size() * sizeof(float));
        dattn_ = DeviceBuffer(attn_.size() * sizeof(float));
    }
    q_lens_.reserve(size_t(max_seqs));
}

PagedForward::~PagedForward() = default;

void PagedForward::run(const std::vector<BatchEntry> &entries, float *logits) {
    const ModelConfig &c = m_.cfg;
    const int64_t d = c.d_model;
    ids_.clear();
    q_lens_.clear();
    int64_t total = 0, rows = 0;
    for (const BatchEntry &e : entries) {
        if (e.logit_rows < 1 || e.logit_rows > e.q_len)
            throw std::runtime_error("batch entry wants " + std::to_string(e.logit_rows) + " logit rows of " +
                                     std::to_string(e.q_len) + " new tokens");
        total += e.q_len;
        rows += e.logit_rows;
    }
    if (total > max_tokens_ || rows > max_logit_rows_)
        throw std::runtime_error("batch of " + std::to_string(entries.size()) + " sequences / " + std::to_string(total) +
                                 " tokens / " + std::to_string(rows) + " logit rows exceeds the forward pass capacity");
    int64_t T = 0;
    for (const BatchEntry &e : entries) {
        ids_.push_back(e.seq_id);
        q_lens_.push_back(e.q_len);
        for (int64_t j = 0; j < e.q_len; j++) {
            pos_[size_t(T)] = e.first_pos + j;
            std::copy_n(m_.embedding.data() + int64_t(e.new_tokens[j]) * d, d, x_.data() + T * d);
            T++;
        }
    }
    // Every group holds every sequence, so each builds a batch of the same sequences and query
    // lengths (its own block tables and slots). The batch's arrays live in the backend's memory
    // (device memory on CUDA); the slot mapping built once per step is reused by every cache write of
    // the group's layers.
    for (Group &g : groups_) g.batch->build(ids_.data(), q_lens_.data(), int32_t(entries.size()));
    for (int32_t l = 0; l < c.num_layers; l++) {
        const LayerWeights &w = m_.layers[size_t(l)];
        rms_norm(x_.data(), w.attn_norm.data(), h_.data(), T, c.d_model, c.rms_eps);
        matmul(h_.data(), w.wq.data(), q_.data(), T, d, c.q_dim());
        matmul(h_.data(), w.wk.data(), k_.data(), T, d, c.kv_dim());
        matmul(h_.data(), w.wv.data(), v_.data(), T, d, c.kv_dim());
        apply_rope(q_.data(), pos_.data(), T, c.num_q_heads, c.head_dim, m_.rope_inv_freq.data());
        apply_rope(k_.data(), pos_.data(), T, c.num_kv_heads, c.head_dim, m_.rope_inv_freq.data());
        attention(l, T);
        matmul_add(attn_.data(), w.wo.data(), x_.data(), T, c.q_dim(), d);
        rms_norm(x_.data(), w.mlp_norm.data(), h_.data(), T, c.d_model, c.rms_eps);
        mlp_add(w, c, h_.data(), x_.data(), T, scratch_.data());
    }
    // Only each sequence's newest logit_rows tokens need logits (usually just the last one).
    int64_t end = 0, out = 0;
    for (const BatchEntry &e : entries) {
        end += e.q_len;
        std::copy_n(x_.data() + (end - e.logit_rows) * d, e.logit_rows * d, last_.data() + out * d);
        out += e.logit_rows;
    }
    lm_logits(m_, last_.data(), logits, out, h_.data());
}

// The step's new K/V into the cache, then paged attention over it: directly on host buffers on the
// CPU backend; through device buffers on CUDA (synchronous copies on the default stream, the stream
// libkvc launches on when given NULL, so no extra synchronization is needed). Each rank gets its
// heads' columns and its output goes back to the same columns of attn_.
void PagedForward::attention(int32_t model_layer, int64_t T) {
    const LayerPlacement &at = placement_[size_t(model_layer)];
    const Group &g = groups_[size_t(at.group)];
    const int32_t layer = at.pool_layer;
    const ModelConfig &c = m_.cfg;
    const int32_t ranks = g.pool->ranks();
    const int64_t q_width = c.q_dim() / ranks, kv_width = c.kv_dim() / ranks;
    const size_t q_bytes = size_t(T * q_width) * sizeof(float), kv_bytes = size_t(T * kv_width) * sizeof(float);
    kvc_check(g.pool->each_rank("kvc_cache_write", 0,
                                [&](int32_t r) {
                                    const void *k = shard(k_, T, c.kv_dim(), r, ranks, &k_shard_);
                                    const void *v = shard(v_, T, c.kv_dim(), r, ranks, &v_shard_);
                                    if (on_device_) {
                                        dk_.upload(k, kv_bytes);
                                        dv_.upload(v, kv_bytes);
                                        k = dk_.get();
                                        v = dv_.get();
                                    }
                                    return kvc_cache_write(g.pool->rank(r), layer, g.batch->slots(r), T, k, v,
                                                           KVC_DTYPE_F32, 1.0f, 1.0f, nullptr);
                                }),
              "kvc_cache_write");
    kvc_check(g.pool->each_rank("kvc_launch_attention", 0,
                                [&](int32_t r) {
                                    const void *q = shard(q_, T, c.q_dim(), r, ranks, &q_shard_);
                                    float *host_out = ranks == 1 ? attn_.data() : attn_shard_.data();
                                    void *out = host_out;
                                    if (on_device_) {
                                        dq_.upload(q, q_bytes);
                                        q = dq_.get();
                                        out = dattn_.get();
                                    }
                                    const kvc_status st = kvc_launch_attention(g.pool->rank(r), g.batch->rank(r), layer,
                                                                               q, out, &g.params, nullptr);
                                    if (st != KVC_OK) return st;
                                    if (on_device_) dattn_.download(host_out, q_bytes);
                                    if (ranks > 1)
                                        for (int64_t t = 0; t < T; t++)
                                            std::copy_n(host_out + t * q_width, q_width,
                                                        attn_.data() + t * c.q_dim() + r * q_width);
                                    return st;
                                }),
              "kvc_launch_attention");
}

const float *PagedForward::shard(const std::vector<float> &all, int64_t rows, int64_t width, int32_t r, int32_t ranks,
                                 std::vector<float> *shard) const {
    if (ranks == 1) return all.data();
    const int64_t w = width / ranks;
    for (int64_t t = 0; t < rows; t++) std::copy_n(all.data() + t * width + r * w, w, shard->data() + t * w);
    return shard->data();
}

}  // namespace serve
