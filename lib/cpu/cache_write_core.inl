// The CPU cache write (reshape_and_cache, storage/kernel_args.hpp) body, compiled once per instruction set
// like attention_core.inl (same include rules): lib/cpu/cache_ops.cpp (baseline),
// kernels_avx2.cpp and kernels_avx512.cpp. The per-ISA part is the dtype conversion of each head
// row (convert_rows.hpp); same-dtype rows are a memcpy at every ISA.
#include "cpu/convert_rows.hpp"

namespace kvc {
namespace {

// Converts one head row (head_dim elements) from src_dtype into the cache dtype, through fp32 in
// pieces that stay in registers / L1 (no scratch to allocate). FP8 stores value / scale.
void store_row(void *dst, int32_t dst_dtype, const void *src, int32_t src_dtype, int32_t n, float scale) {
    if (dst_dtype == src_dtype) {
        std::memcpy(dst, src, size_t(n) * size_t(dtype_bytes(src_dtype)));
        return;
    }
    constexpr int32_t kPiece = 64;
    float tmp[kPiece];
    const int32_t sb = dtype_bytes(src_dtype), db = dtype_bytes(dst_dtype);
    for (int32_t i = 0; i < n; i += kPiece) {
        const int32_t m = std::min(kPiece, n - i);
        cpu::to_float(tmp, static_cast<const char *>(src) + int64_t(i) * sb, src_dtype, m, 1.0f);
        cpu::from_float(static_cast<char *>(dst) + int64_t(i) * db, tmp, dst_dtype, m, scale);
    }
}

kvc_status run_cache_write(const CacheWriteArgs &a) {
    const KvLayout &L = a.layout;
    const int64_t src_row = int64_t(L.head_dim) * dtype_bytes(a.src_dtype);
    const int64_t src_token = src_row * L.num_kv_heads;
    char *base = static_cast<char *>(a.base);
    const bool fp8 = L.dtype == KVC_DTYPE_FP8_E4M3;
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
    // Same-dtype writes are memcpy-bound and small per step: threads would cost more than they save.
    if (a.num_tokens >= 64 && L.dtype != a.src_dtype) {
        cpu::parallel_for_each(a.num_tokens, write_token);
    } else {
        for (int64_t i = 0; i < a.num_tokens; ++i) write_token(i);
    }
    return KVC_OK;
}

}  // namespace
}  // namespace kvc
