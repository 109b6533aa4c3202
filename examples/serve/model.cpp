#include "model.hpp"

#include <cmath>
#include <cstring>
#include <random>

namespace serve {

namespace {

std::vector<float> gaussian(std::mt19937_64 &rng, size_t n, float stddev) {
    std::normal_distribution<float> dist(0.0f, stddev);
    std::vector<float> v(n);
    for (float &x : v) x = dist(rng);
    return v;
}

std::vector<float> near_one(std::mt19937_64 &rng, size_t n) {
    std::uniform_real_distribution<float> dist(0.8f, 1.2f);
    std::vector<float> v(n);
    for (float &x : v) x = dist(rng);
    return v;
}

}  // namespace

Model Model::random(const ModelConfig &c, uint64_t seed) {
    std::mt19937_64 rng(seed);
    Model m;
    m.cfg = c;
    const size_t d = size_t(c.d_model), qd = size_t(c.q_dim()), kvd = size_t(c.kv_dim()), ff = size_t(c.ffn_dim);
    m.embedding = gaussian(rng, size_t(c.vocab) * d, 1.0f);
    for (int32_t l = 0; l < c.num_layers; l++) {
        LayerWeights w;
        w.attn_norm = near_one(rng, d);
        w.wq = gaussian(rng, d * qd, 1.0f / std::sqrt(float(d)));
        w.wk = gaussian(rng, d * kvd, 1.0f / std::sqrt(float(d)));
        w.wv = gaussian(rng, d * kvd, 1.0f / std::sqrt(float(d)));
        // Output projections scaled down so the residual stream stays O(1) across layers.
        w.wo = gaussian(rng, qd * d, 0.5f / std::sqrt(float(qd)));
        w.mlp_norm = near_one(rng, d);
        w.w_gate = gaussian(rng, d * ff, 1.0f / std::sqrt(float(d)));
        w.w_up = gaussian(rng, d * ff, 1.0f / std::sqrt(float(d)));
        w.w_down = gaussian(rng, ff * d, 0.5f / std::sqrt(float(ff)));
        m.layers.push_back(std::move(w));
    }
    m.final_norm = near_one(rng, d);
    // A larger LM-head scale gives peaked next-token distributions, so sampling is not uniform noise.
    m.lm_head = gaussian(rng, d * size_t(c.vocab), 3.0f / std::sqrt(float(d)));
    m.rope_inv_freq.resize(size_t(c.head_dim / 2));
    for (int32_t i = 0; i < c.head_dim / 2; i++)
        m.rope_inv_freq[size_t(i)] = std::pow(c.rope_theta, -2.0f * float(i) / float(c.head_dim));
    return m;
}

int64_t Model::parameter_count() const {
    int64_t n = int64_t(embedding.size() + final_norm.size() + lm_head.size());
    for (const LayerWeights &w : layers)
        n += int64_t(w.attn_norm.size() + w.wq.size() + w.wk.size() + w.wv.size() + w.wo.size() + w.mlp_norm.size() +
                     w.w_gate.size() + w.w_up.size() + w.w_down.size());
    return n;
}

void matmul(const float *x, const float *w, float *y, int64_t rows, int64_t in, int64_t out) {
    std::memset(y, 0, size_t(rows * out) * sizeof(float));
    matmul_add(x, w, y, rows, in, out);
}

void matmul_add(const float *x, const float *w, float *y, int64_t rows, int64_t in, int64_t out) {
    // i-k-j order: the inner loop runs over a contiguous weight row and vectorizes.
    for (int64_t r = 0; r < rows; r++) {
        float *yr = y + r * out;
        const float *xr = x + r * in;
        for (int64_t k = 0; k < in; k++) {
            const float a = xr[k];
            const float *wk = w + k * out;
            for (int64_t j = 0; j < out; j++) yr[j] += a * wk[j];
        }
    }
}

void rms_norm(const float *x, const float *gain, float *out, int64_t rows, int32_t d, float eps) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * d;
        float ss = 0;
        for (int32_t i = 0; i < d; i++) ss += xr[i] * xr[i];
        const float inv = 1.0f / std::sqrt(ss / float(d) + eps);
        for (int32_t i = 0; i < d; i++) out[r * d + i] = xr[i] * inv * gain[i];
    }
}

void apply_rope(float *x, const int64_t *pos, int64_t rows, int32_t heads, int32_t head_dim, const float *inv_freq) {
    for (int64_t r = 0; r < rows; r++) {
        for (int32_t i = 0; i < head_dim / 2; i++) {
            const float angle = float(pos[r]) * inv_freq[i];
            const float c = std::cos(angle), s = std::sin(angle);
            for (int32_t h = 0; h < heads; h++) {
                float *p = x + (r * heads + h) * head_dim + 2 * i;
                const float a = p[0], b = p[1];
                p[0] = a * c - b * s;
                p[1] = a * s + b * c;
            }
        }
    }
}

void mlp_add(const LayerWeights &w, const ModelConfig &cfg, const float *h, float *x, int64_t rows, float *scratch) {
    const int64_t ff = cfg.ffn_dim;
    float *gate = scratch, *up = scratch + rows * ff;
    matmul(h, w.w_gate.data(), gate, rows, cfg.d_model, ff);
    matmul(h, w.w_up.data(), up, rows, cfg.d_model, ff);
    for (int64_t i = 0; i < rows * ff; i++) {
        const float g = gate[i];
        gate[i] = g / (1.0f + std::exp(-g)) * up[i];  // SiLU(gate) * up
    }
    matmul_add(gate, w.w_down.data(), x, rows, ff, cfg.d_model);
}

void lm_logits(const Model &m, const float *x, float *logits, int64_t rows, float *scratch) {
    rms_norm(x, m.final_norm.data(), scratch, rows, m.cfg.d_model, m.cfg.rms_eps);
    matmul(scratch, m.lm_head.data(), logits, rows, m.cfg.d_model, m.cfg.vocab);
}

}  // namespace serve
