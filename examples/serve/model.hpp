// A tiny decoder-only transformer (Llama-style: RMSNorm, RoPE, grouped-query attention, SwiGLU MLP)
// with seeded random weights. Nothing is downloaded; the point is a real forward pass whose KV cache
// and attention go through libkvc, checked against a dense reference.
#pragma once

#include <cstdint>
#include <vector>

namespace serve {

struct ModelConfig {
    int32_t vocab = 512;
    int32_t d_model = 256;
    int32_t num_layers = 4;
    int32_t num_q_heads = 8;
    int32_t num_kv_heads = 2;  // GQA: 4 query heads per KV head
    int32_t head_dim = 32;
    int32_t ffn_dim = 512;
    float rope_theta = 10000.0f;
    float rms_eps = 1e-5f;

    int32_t q_dim() const { return num_q_heads * head_dim; }
    int32_t kv_dim() const { return num_kv_heads * head_dim; }
};

// Row-major weights: a matrix [in][out] multiplies activations from the right (y = x W).
struct LayerWeights {
    std::vector<float> attn_norm;           // [d_model]
    std::vector<float> wq, wk, wv;          // [d_model][q_dim], [d_model][kv_dim] x 2
    std::vector<float> wo;                  // [q_dim][d_model]
    std::vector<float> mlp_norm;            // [d_model]
    std::vector<float> w_gate, w_up;        // [d_model][ffn_dim]
    std::vector<float> w_down;              // [ffn_dim][d_model]
};

struct Model {
    ModelConfig cfg;
    std::vector<float> embedding;           // [vocab][d_model]
    std::vector<LayerWeights> layers;
    std::vector<float> final_norm;          // [d_model]
    std::vector<float> lm_head;             // [d_model][vocab]
    std::vector<float> rope_inv_freq;       // [head_dim / 2]

    // Random weights from `seed` (Gaussian, std 1/sqrt(fan_in); norms near 1).
    static Model random(const ModelConfig &cfg, uint64_t seed);
    int64_t parameter_count() const;
};

// ---- building blocks shared by the paged forward pass and the dense reference ----------------

// y[rows][out] = x[rows][in] * w[in][out] (y overwritten).
void matmul(const float *x, const float *w, float *y, int64_t rows, int64_t in, int64_t out);
// y[rows][out] += x[rows][in] * w[in][out].
void matmul_add(const float *x, const float *w, float *y, int64_t rows, int64_t in, int64_t out);
// out[rows][d] = x / rms(x) * gain.
void rms_norm(const float *x, const float *gain, float *out, int64_t rows, int32_t d, float eps);
// Rotates pairs (2i, 2i+1) of every head of row r by position pos[r] (in place).
void apply_rope(float *x, const int64_t *pos, int64_t rows, int32_t heads, int32_t head_dim, const float *inv_freq);
// SwiGLU MLP on normalized rows h, accumulated into the residual: x += down(silu(h Wg) * (h Wu)).
// `scratch` must hold 2 x rows x ffn_dim floats.
void mlp_add(const LayerWeights &w, const ModelConfig &cfg, const float *h, float *x, int64_t rows, float *scratch);
// logits[rows][vocab] from hidden rows (final norm + LM head). `scratch`: rows x d_model floats.
void lm_logits(const Model &m, const float *x, float *logits, int64_t rows, float *scratch);

}  // namespace serve
