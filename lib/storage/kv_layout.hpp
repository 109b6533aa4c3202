// The one KV storage layout of libkvc, named once (see kvc.h "KV storage").
//
//   byte offset of element (block, layer, kv, head, token, d) =
//       block * block_stride + layer * layer_stride + kv * kv_stride
//     + head * head_stride + token * token_stride + d * elem_bytes
//
// Block-major with every layer of a block contiguous: a block is one contiguous range of
// block_stride bytes, so tiers move it with one copy; kernels use layer_stride to pick a layer.
// Inside a layer the order is [K|V][kv_head][token][dim] (HND): a decode CTA that serves one KV head
// reads block_size x head_dim contiguous elements per block.
#pragma once

#include <cstdint>

#include "kvc/kvc.h"

// Functions the CUDA kernels share with the host (nvcc compiles them for both sides).
#if defined(__CUDACC__)
#define KVC_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define KVC_HOST_DEVICE inline
#endif

namespace kvc {

// The paged layout's offset math inside one layer, written once: the CPU kernels reach it through
// KvLayout::offset, the CUDA kernels' parameter blocks carry these strides (cuda/attention_params.cuh,
// cuda/cache_write.cu) and call the same functions on the device.
struct PagedStrides {
    int64_t kv_stride = 0;     // K -> V of one layer
    int64_t head_stride = 0;   // one KV head's block_size rows
    int64_t token_stride = 0;  // one row: head_dim elements
    int64_t block_stride = 0;  // one block: every layer, K and V
    // Byte offset of (block, K = 0 / V = 1, KV head, token in block) from the layer's base.
    KVC_HOST_DEVICE int64_t row(int64_t block, int32_t kv, int32_t head, int64_t token) const {
        return block * block_stride + kv * kv_stride + head * head_stride + token * token_stride;
    }
    // The same from a base that already points at one K head of the layer (kernels that serve one
    // KV head fold kv and head into their base pointer).
    KVC_HOST_DEVICE int64_t token_row(int64_t block, int64_t token) const {
        return block * block_stride + token * token_stride;
    }
};

inline int32_t dtype_bytes(int32_t dtype) {
    switch (dtype) {
        case KVC_DTYPE_F32: return 4;
        case KVC_DTYPE_F16: return 2;
        case KVC_DTYPE_BF16: return 2;
        case KVC_DTYPE_FP8_E4M3: return 1;
        default: return 0;
    }
}

struct KvLayout {
    int64_t num_blocks = 0;
    int32_t block_size = 0;
    int32_t num_layers = 0;
    int32_t num_kv_heads = 0;
    int32_t head_dim = 0;
    int32_t dtype = KVC_DTYPE_F16;
    int32_t elem_bytes = 0;
    // Strides in bytes. All int64: block ids are widened before multiplying (a 2^31-block pool of
    // MB-sized blocks must not overflow).
    int64_t token_stride = 0;  // head_dim * elem_bytes
    int64_t head_stride = 0;   // block_size * token_stride
    int64_t kv_stride = 0;     // num_kv_heads * head_stride
    int64_t layer_stride = 0;  // 2 * kv_stride
    int64_t block_stride = 0;  // num_layers * layer_stride
    int64_t total_bytes = 0;   // num_blocks * block_stride

    // Fills strides from the shape. Returns false on overflow or an invalid shape/dtype.
    bool init(int64_t blocks, int32_t bs, int32_t layers, int32_t kv_heads, int32_t hdim, int32_t dt) {
        num_blocks = blocks;
        block_size = bs;
        num_layers = layers;
        num_kv_heads = kv_heads;
        head_dim = hdim;
        dtype = dt;
        elem_bytes = dtype_bytes(dt);
        if (bs < 1 || layers < 1 || kv_heads < 1 || hdim < 1 || elem_bytes == 0 || blocks < 0) return false;
        token_stride = int64_t(hdim) * elem_bytes;
        if (__builtin_mul_overflow(token_stride, int64_t(bs), &head_stride)) return false;
        if (__builtin_mul_overflow(head_stride, int64_t(kv_heads), &kv_stride)) return false;
        if (__builtin_mul_overflow(kv_stride, int64_t(2), &layer_stride)) return false;
        if (__builtin_mul_overflow(layer_stride, int64_t(layers), &block_stride)) return false;
        if (__builtin_mul_overflow(block_stride, blocks, &total_bytes)) return false;
        return true;
    }

    PagedStrides strides() const { return PagedStrides{kv_stride, head_stride, token_stride, block_stride}; }
    int64_t offset(int64_t block, int32_t layer, int32_t kv, int32_t head, int32_t token) const {
        return layer * layer_stride + strides().row(block, kv, head, token);
    }
};

}  // namespace kvc
