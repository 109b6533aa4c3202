// reshape_and_cache: scatters the step's new K/V rows into their cache slots (one CTA per token).
#include <climits>

#include "storage/cuda_api.hpp"
#include "cuda_check.cuh"
#include "device_primitives.cuh"
#include "dtype_convert.cuh"

namespace kvc::cuda {
namespace {

using detail::fp8_t;

struct WriteGeometry : kvc::PagedStrides {  // the offset math of storage/kv_layout.hpp
    unsigned char *layer_base;                 // base + layer * layer_stride
    int32_t block_size, num_kv_heads, head_dim;
};

template <typename Src, typename Dst>
__global__ void cache_write_kernel(WriteGeometry g, const int64_t *__restrict__ slots,
                                   const Src *__restrict__ k, const Src *__restrict__ v, float k_scale,
                                   float v_scale) {
    const int64_t token = blockIdx.x;
    const int64_t slot = slots[token];
    if (slot < 0) return;  // padding
    const int64_t block = slot / g.block_size;
    const int64_t in_block = slot % g.block_size;
    unsigned char *dst_k = g.layer_base + g.token_row(block, in_block);
    const int32_t row = g.num_kv_heads * g.head_dim;
    const Src *src_k = k + token * row;
    const Src *src_v = v + token * row;
    constexpr bool kQuantized = sizeof(Dst) == 1;
    for (int32_t i = threadIdx.x; i < row; i += blockDim.x) {
        const int32_t head = i / g.head_dim;
        const int32_t d = i - head * g.head_dim;
        Dst *pk = reinterpret_cast<Dst *>(dst_k + head * g.head_stride) + d;
        Dst *pv = reinterpret_cast<Dst *>(dst_k + g.kv_stride + head * g.head_stride) + d;
        float kx = detail::to_float(src_k[i]);
        float vx = detail::to_float(src_v[i]);
        if constexpr (kQuantized) {
            // IEEE division (no fast-math): the CPU backend computes the same quotient bit for bit.
            kx = kx / k_scale;
            vx = vx / v_scale;
        }
        *pk = detail::from_float<Dst>(kx);
        *pv = detail::from_float<Dst>(vx);
    }
}

template <typename Src, typename Dst>
kvc_status launch_write(const CacheWriteArgs &a, const WriteGeometry &g, cudaStream_t stream) {
    const int threads = g.num_kv_heads * g.head_dim >= 256 ? 256 : 128;
    auto *kernel = cache_write_kernel<Src, Dst>;
    KVC_LAUNCH(kernel, unsigned(a.num_tokens), threads, 0, stream, g, a.slots, static_cast<const Src *>(a.k),
               static_cast<const Src *>(a.v), a.k_scale, a.v_scale);
    return check_launch("kvc cache write");
}

template <typename Src>
kvc_status dispatch_dst(const CacheWriteArgs &a, const WriteGeometry &g, cudaStream_t stream) {
    switch (a.layout.dtype) {
        case KVC_DTYPE_F32: return launch_write<Src, float>(a, g, stream);
        case KVC_DTYPE_F16: return launch_write<Src, __half>(a, g, stream);
        case KVC_DTYPE_BF16: return launch_write<Src, __nv_bfloat16>(a, g, stream);
        case KVC_DTYPE_FP8_E4M3: return launch_write<Src, fp8_t>(a, g, stream);
        default:
            return fail(KVC_ERR_UNSUPPORTED, "kvc cache write: unsupported cache dtype %d", a.layout.dtype);
    }
}

}  // namespace

kvc_status cache_write(const CacheWriteArgs &a, void *stream) {
    if (a.num_tokens == 0) return KVC_OK;
    if (a.num_tokens < 0 || a.num_tokens > INT_MAX)
        return fail(KVC_ERR_INVALID_ARG, "kvc cache write: num_tokens %lld out of range for one launch",
                    (long long)a.num_tokens);
    if (kvc_status st = use_device_of(a.base, "kvc cache write"); st != KVC_OK) return st;
    WriteGeometry g;
    g.layer_base = static_cast<unsigned char *>(a.base) + int64_t(a.layer) * a.layout.layer_stride;
    static_cast<kvc::PagedStrides &>(g) = a.layout.strides();
    g.block_size = a.layout.block_size;
    g.num_kv_heads = a.layout.num_kv_heads;
    g.head_dim = a.layout.head_dim;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    switch (a.src_dtype) {
        case KVC_DTYPE_F32: return dispatch_dst<float>(a, g, s);
        case KVC_DTYPE_F16: return dispatch_dst<__half>(a, g, s);
        case KVC_DTYPE_BF16: return dispatch_dst<__nv_bfloat16>(a, g, s);
        default:
            return fail(KVC_ERR_UNSUPPORTED, "kvc cache write: unsupported source dtype %d (F32/F16/BF16)",
                        a.src_dtype);
    }
}

}  // namespace kvc::cuda
