// The dense, non-paged reference: the same model recomputed from scratch over a sequence's whole
// token history with contiguous K/V and plain loops (attention accumulated in double). It shares no
// code with libkvc, so agreement means the paged path (block tables, prefix hits, copy-on-write,
// preemption and recompute) produced the right KV.
#pragma once

#include <cstdint>
#include <vector>

#include "model.hpp"

namespace serve {

// Logits for positions [first_pos, num_tokens) of `tokens`, row-major [num_tokens - first_pos][vocab].
// round_kv_to_half: store K/V rounded to binary16 first, as an F16 KV cache does.
// layer_windows[l] > 0: layer l uses sliding-window attention, the query at position t sees keys
// max(0, t - window + 1) .. t; 0 = full causal attention (one entry per layer, see layer_windows()).
void reference_logits(const Model &m, const int32_t *tokens, int64_t num_tokens, int64_t first_pos,
                      bool round_kv_to_half, const std::vector<int32_t> &layer_windows, std::vector<float> *logits);

}  // namespace serve
