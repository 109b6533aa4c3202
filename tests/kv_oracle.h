/* Content-addressed KV for tests: the byte oracle.
 *
 * Every K/V element a test writes is a function of the *identity of the prefix that produced it*
 * -- the request's keys (LoRA id, cache salt: folded into a salt), the token ids at positions
 * 0..pos -- and of (layer, kv, head, d). So any read of the KV of position pos (a prefix hit, a
 * swap-in, a restore from the host or disk tier, a block shared by fork, the copy made by
 * copy-on-write, attention's input) can be checked against what that position *must* hold, with no
 * record of who wrote what: a block holding another sequence's or another prefix's KV differs in
 * almost every element (each element is one of 256 values, so a wrong token matches all of a
 * row's elements with probability 256^-(2 x heads x head_dim)).
 *
 * Values are k/16 for k in [-128, 127]: exact in f32, f16 and bf16 KV caches, so the check is
 * bit-exact whatever the pool's KV dtype (FP8 pools are not supported by this oracle).
 *
 *   uint64_t id = kvo_root(salt);
 *   for each position p: id = kvo_next(id, tokens[p]);  ids[p] = id;
 *   kvo_write(pool, &shape, slots, ids, n, scratch, stream)   -- every layer, via kvc_cache_write
 *   kvo_check_block(&shape, bytes_of_block, first_token_in_block, ids, n)  -- after
 *   kvo_read_block(pool, &shape, block, bytes)  (kvc_storage_copy_blocks)
 *
 * Header-only C99 so C suites, the C++ fuzzer and the stress tests share one definition. */
#ifndef KVC_TESTS_KV_ORACLE_H
#define KVC_TESTS_KV_ORACLE_H

#include <stdint.h>
#include <string.h>

#include "kvc/kvc.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kvo_shape {
    int32_t layers, kv_heads, head_dim, block_size, dtype, elem_bytes;
    int64_t block_stride, layer_stride, kv_stride, head_stride, token_stride;
} kvo_shape;

/* splitmix64's finalizer: a bijective, well-mixing step. */
static inline uint64_t kvo_mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Identity of the empty prefix under a request's keys (fold LoRA id, salt, ... into `salt`;
 * requests whose prefixes may share KV must use the same salt). */
static inline uint64_t kvo_root(uint64_t salt) { return kvo_mix(salt ^ 0x6B76635F6F72636Cull); }

/* Identity of the prefix extended by one token. The chain makes it depend on every earlier token
 * and, through its length, on the position. */
static inline uint64_t kvo_next(uint64_t prefix, int32_t token) {
    return kvo_mix(prefix * 0x100000001B3ull ^ (uint64_t)(uint32_t)token);
}

/* Identities of positions 0..n-1 of tokens under salt. */
static inline void kvo_ids(uint64_t salt, const int32_t *tokens, int64_t n, uint64_t *ids) {
    uint64_t id = kvo_root(salt);
    for (int64_t i = 0; i < n; ++i) ids[i] = id = kvo_next(id, tokens[i]);
}

/* The element (layer, kv, head, d) of the position whose identity is id: one of 256 values k/16. */
static inline float kvo_value(uint64_t id, int32_t layer, int32_t kv, int32_t head, int32_t d) {
    uint64_t x = kvo_mix(id ^ ((uint64_t)(uint32_t)layer << 40) ^ ((uint64_t)(uint32_t)kv << 39) ^
                         ((uint64_t)(uint32_t)head << 24) ^ (uint64_t)(uint32_t)d);
    return (float)((int32_t)(x & 255u) - 128) / 16.0f;
}

/* The pool's storage shape; KVC_OK or the status of kvc_storage_get_info / kvc_pool_get_config. */
static inline kvc_status kvo_shape_of(kvc_pool *pool, kvo_shape *out) {
    kvc_storage_info si;
    memset(&si, 0, sizeof si);
    si.struct_size = sizeof si;
    kvc_status st = kvc_storage_get_info(pool, &si);
    if (st != KVC_OK) return st;
    kvc_pool_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.struct_size = sizeof cfg;
    st = kvc_pool_get_config(pool, &cfg);
    if (st != KVC_OK) return st;
    out->layers = cfg.num_layers;
    out->kv_heads = cfg.num_kv_heads;
    out->head_dim = cfg.head_dim;
    out->block_size = cfg.block_size;
    out->dtype = si.kv_dtype;
    out->elem_bytes = si.elem_bytes;
    out->block_stride = si.block_stride;
    out->layer_stride = si.layer_stride;
    out->kv_stride = si.kv_stride;
    out->head_stride = si.head_stride;
    out->token_stride = si.token_stride;
    return KVC_OK;
}

/* Floats per token and layer in kvc_cache_write's source layout ([kv_heads][head_dim]). */
static inline int64_t kvo_row_floats(const kvo_shape *s) { return (int64_t)s->kv_heads * s->head_dim; }

/* Floats kvo_write's scratch must hold for n positions: K and V of every layer, each layer in a
 * region of its own (on CUDA a layer's write may still be queued when the next layer's is made). */
static inline int64_t kvo_scratch_floats(const kvo_shape *s, int64_t n) { return 2 * n * kvo_row_floats(s) * s->layers; }

/* Writes the oracle's K and V of n positions (identities ids[i]) into slots[i], every layer.
 * scratch holds kvo_scratch_floats(s, n) floats and must stay untouched until the writes ran (CPU:
 * on return; CUDA: when `stream` reaches them). On CUDA the pool reads k/v from device memory: this
 * helper is for CPU pools and the emulated CUDA backend, whose device memory is host memory. */
static inline kvc_status kvo_write(kvc_pool *pool, const kvo_shape *s, const int64_t *slots, const uint64_t *ids,
                                   int64_t n, float *scratch, void *stream) {
    const int64_t row = kvo_row_floats(s);
    for (int32_t l = 0; l < s->layers; ++l) {
        float *k = scratch + 2 * n * row * l, *v = k + n * row;
        for (int64_t i = 0; i < n; ++i)
            for (int32_t h = 0; h < s->kv_heads; ++h)
                for (int32_t d = 0; d < s->head_dim; ++d) {
                    k[i * row + h * s->head_dim + d] = kvo_value(ids[i], l, 0, h, d);
                    v[i * row + h * s->head_dim + d] = kvo_value(ids[i], l, 1, h, d);
                }
        kvc_status st = kvc_cache_write(pool, l, slots, n, k, v, KVC_DTYPE_F32, 1.0f, 1.0f, stream);
        if (st != KVC_OK) return st;
    }
    return KVC_OK;
}

/* Reads one whole block (block_stride bytes) into buf. */
static inline kvc_status kvo_read_block(kvc_pool *pool, int32_t block, void *buf) {
    return kvc_storage_copy_blocks(pool, &block, 1, buf, 1);
}

/* A stored element back as float (f32, f16, bf16). */
static inline float kvo_load(const kvo_shape *s, const unsigned char *p) {
    if (s->dtype == KVC_DTYPE_F32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    uint32_t bits;
    if (s->dtype == KVC_DTYPE_BF16) {
        bits = (uint32_t)h << 16;
    } else { /* f16: the oracle's values are normal numbers or zero */
        const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
        bits = exp == 0 ? sign : sign | ((exp + 112u) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Checks positions first_tok .. first_tok + n - 1 of a block read by kvo_read_block (token index
 * inside the block) against identities ids[0..n). Returns the number of wrong elements (0 = all
 * right); *bad_tok (may be NULL) receives the first wrong token index inside the block, or -1. */
static inline int64_t kvo_check_block(const kvo_shape *s, const void *block_bytes, int32_t first_tok,
                                      const uint64_t *ids, int32_t n, int32_t *bad_tok) {
    const unsigned char *b = (const unsigned char *)block_bytes;
    int64_t bad = 0;
    if (bad_tok) *bad_tok = -1;
    for (int32_t t = 0; t < n; ++t)
        for (int32_t l = 0; l < s->layers; ++l)
            for (int32_t kv = 0; kv < 2; ++kv)
                for (int32_t h = 0; h < s->kv_heads; ++h)
                    for (int32_t d = 0; d < s->head_dim; ++d) {
                        const unsigned char *p = b + l * s->layer_stride + kv * s->kv_stride + h * s->head_stride +
                                                 (int64_t)(first_tok + t) * s->token_stride +
                                                 (int64_t)d * s->elem_bytes;
                        if (kvo_load(s, p) != kvo_value(ids[t], l, kv, h, d)) {
                            if (bad == 0 && bad_tok) *bad_tok = first_tok + t;
                            ++bad;
                        }
                    }
    return bad;
}

#ifdef __cplusplus
}
#endif

#endif /* KVC_TESTS_KV_ORACLE_H */
