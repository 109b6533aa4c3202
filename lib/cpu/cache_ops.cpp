// CPU backend of the storage kernels: reshape_and_cache and copy_blocks (kernel_args.hpp).
#include <cstring>

#include "cpu/dtype_convert.hpp"
#include "cpu/thread_pool.hpp"
#include "error.hpp"
#include "kernel_args.hpp"

namespace kvc {
namespace {

// Converts one head row (head_dim elements) from src_dtype into the cache dtype. FP8 stores
// value / scale; the division is done in fp32 like the CUDA kernel, so both round identically.
void store_row(void *dst, int32_t dst_dtype, const void *src, int32_t src_dtype, int32_t n, float scale) {
    if (dst_dtype == src_dtype) {
        std::memcpy(dst, src, size_t(n) * size_t(dtype_bytes(src_dtype)));
        return;
    }
    switch (dst_dtype) {
        case KVC_DTYPE_F32: {
            float *d = static_cast<float *>(dst);
            for (int32_t i = 0; i < n; ++i) d[i] = cpu::load_elem(src, i, src_dtype);
            break;
        }
        case KVC_DTYPE_F16: {
            uint16_t *d = static_cast<uint16_t *>(dst);
            for (int32_t i = 0; i < n; ++i) d[i] = cpu::float_to_half(cpu::load_elem(src, i, src_dtype));
            break;
        }
        case KVC_DTYPE_BF16: {
            uint16_t *d = static_cast<uint16_t *>(dst);
            for (int32_t i = 0; i < n; ++i) d[i] = cpu::float_to_bf16(cpu::load_elem(src, i, src_dtype));
            break;
        }
        default: {
            uint8_t *d = static_cast<uint8_t *>(dst);
            for (int32_t i = 0; i < n; ++i) d[i] = cpu::float_to_fp8_e4m3(cpu::load_elem(src, i, src_dtype) / scale);
            break;
        }
    }
}

}  // namespace

kvc_status cpu_cache_write(const CacheWriteArgs &a) {
    const KvLayout &L = a.layout;
    const int64_t src_row = int64_t(L.head_dim) * dtype_bytes(a.src_dtype);
    const int64_t src_token = src_row * L.num_kv_heads;
    char *base = static_cast<char *>(a.base);
    const bool fp8 = L.dtype == KVC_DTYPE_FP8_E4M3;
    // Same-dtype writes are memcpy-bound and small per step: threads would cost more than they save.
    auto write_token = [&](int64_t i) {
        int64_t slot = a.slots[i];
        if (slot < 0) return;  // padding
        int64_t block = slot / L.block_size;
        int32_t tok = int32_t(slot % L.block_size);
        const char *ks = static_cast<const char *>(a.k) + i * src_token;
        const char *vs = static_cast<const char *>(a.v) + i * src_token;
        for (int32_t h = 0; h < L.num_kv_heads; ++h) {
            store_row(base + L.offset(block, a.layer, 0, h, tok), L.dtype, ks + h * src_row, a.src_dtype,
                      L.head_dim, fp8 ? a.k_scale : 1.0f);
            store_row(base + L.offset(block, a.layer, 1, h, tok), L.dtype, vs + h * src_row, a.src_dtype,
                      L.head_dim, fp8 ? a.v_scale : 1.0f);
        }
    };
    if (a.num_tokens >= 64 && L.dtype != a.src_dtype) {
        cpu::parallel_for_each(a.num_tokens, write_token);
    } else {
        for (int64_t i = 0; i < a.num_tokens; ++i) write_token(i);
    }
    return KVC_OK;
}

kvc_status cpu_copy_blocks(const CopyBlocksArgs &a) {
    // A block is one contiguous range of block_stride bytes (all layers, K and V): one memcpy each.
    char *base = static_cast<char *>(a.base);
    const int64_t stride = a.layout.block_stride;
    for (int64_t p = 0; p < a.num_pairs; ++p) {
        if (a.src[p] == a.dst[p]) continue;
        std::memcpy(base + int64_t(a.dst[p]) * stride, base + int64_t(a.src[p]) * stride, size_t(stride));
    }
    return KVC_OK;
}

}  // namespace kvc
