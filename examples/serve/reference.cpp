#include "reference.hpp"

#include <algorithm>
#include <cmath>

#include "half.hpp"

namespace serve {

void reference_logits(const Model &m, const int32_t *tokens, int64_t num_tokens, int64_t first_pos,
                      bool round_kv_to_half, const std::vector<int32_t> &layer_windows, std::vector<float> *logits) {
    const ModelConfig &c = m.cfg;
    const int64_t L = num_tokens, d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), hd = c.head_dim;
    const int32_t group = c.num_q_heads / c.num_kv_heads;
    const double scale = 1.0 / std::sqrt(double(hd));
    std::vector<float> x(size_t(L * d)), h(size_t(L * d)), q(size_t(L * qd)), k(size_t(L * kvd)), v(size_t(L * kvd)),
        attn(size_t(L * qd)), scratch(size_t(2 * L * c.ffn_dim));
    std::vector<int64_t> pos(static_cast<size_t>(L));
    std::vector<double> p(static_cast<size_t>(L)), acc(static_cast<size_t>(hd));
    for (int64_t t = 0; t < L; t++) {
        pos[size_t(t)] = t;
        std::copy_n(m.embedding.data() + int64_t(tokens[t]) * d, d, x.data() + t * d);
    }
    for (size_t l = 0; l < m.layers.size(); l++) {
        const LayerWeights &w = m.layers[l];
        const int32_t window = layer_windows.at(l);
        rms_norm(x.data(), w.attn_norm.data(), h.data(), L, c.d_model, c.rms_eps);
        matmul(h.data(), w.wq.data(), q.data(), L, d, qd);
        matmul(h.data(), w.wk.data(), k.data(), L, d, kvd);
        matmul(h.data(), w.wv.data(), v.data(), L, d, kvd);
        apply_rope(q.data(), pos.data(), L, c.num_q_heads, c.head_dim, m.rope_inv_freq.data());
        apply_rope(k.data(), pos.data(), L, c.num_kv_heads, c.head_dim, m.rope_inv_freq.data());
        if (round_kv_to_half) {
            for (float &e : k) e = round_to_half(e);
            for (float &e : v) e = round_to_half(e);
        }
        // Causal softmax attention, one query at a time, GQA: query head qh reads KV head qh / group.
        // With a window, keys before t - window + 1 are simply not looked at: the dense K/V are all
        // still here, so agreement with the paged pass shows it never needed the blocks it released.
        for (int64_t t = 0; t < L; t++) {
            const int64_t first = window > 0 ? std::max<int64_t>(0, t - window + 1) : 0;
            for (int32_t qh = 0; qh < c.num_q_heads; qh++) {
                const float *qv = q.data() + t * qd + qh * hd;
                const int64_t kvo = int64_t(qh / group) * hd;
                double mx = -INFINITY;
                for (int64_t j = first; j <= t; j++) {
                    const float *kv = k.data() + j * kvd + kvo;
                    double s = 0;
                    for (int64_t e = 0; e < hd; e++) s += double(qv[e]) * double(kv[e]);
                    p[size_t(j)] = s * scale;
                    mx = std::max(mx, p[size_t(j)]);
                }
                double sum = 0;
                for (int64_t j = first; j <= t; j++) sum += p[size_t(j)] = std::exp(p[size_t(j)] - mx);
                std::fill(acc.begin(), acc.end(), 0.0);
                for (int64_t j = first; j <= t; j++) {
                    const float *vv = v.data() + j * kvd + kvo;
                    for (int64_t e = 0; e < hd; e++) acc[size_t(e)] += p[size_t(j)] * double(vv[e]);
                }
                for (int64_t e = 0; e < hd; e++) attn[size_t(t * qd + qh * hd + e)] = float(acc[size_t(e)] / sum);
            }
        }
        matmul_add(attn.data(), w.wo.data(), x.data(), L, qd, d);
        rms_norm(x.data(), w.mlp_norm.data(), h.data(), L, c.d_model, c.rms_eps);
        mlp_add(w, c, h.data(), x.data(), L, scratch.data());
    }
    const int64_t rows = L - first_pos;
    logits->assign(size_t(rows * c.vocab), 0.0f);
    lm_logits(m, x.data() + first_pos * d, logits->data(), rows, h.data());
}

}  // namespace serve
