// copy_blocks: every pending (src, dst) pair, all layers, one launch. A block is one contiguous
// range of block_stride bytes (storage/kv_layout.hpp), so a pair is a flat vectorized copy.
#include <climits>

#include "storage/cuda_api.hpp"
#include "cuda_check.cuh"
#include "device_primitives.cuh"

namespace kvc::cuda {
namespace {

constexpr int kCopyThreads = 256;

template <typename Vec>
__global__ void copy_blocks_kernel(unsigned char *base, int64_t block_stride, const int32_t *__restrict__ src,
                                   const int32_t *__restrict__ dst) {
    const int64_t pair = blockIdx.x;
    const Vec *from = reinterpret_cast<const Vec *>(base + int64_t(src[pair]) * block_stride);
    Vec *to = reinterpret_cast<Vec *>(base + int64_t(dst[pair]) * block_stride);
    const int64_t n = block_stride / int64_t(sizeof(Vec));
    const int64_t step = int64_t(gridDim.y) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.y) * blockDim.x + threadIdx.x; i < n; i += step) to[i] = from[i];
}

template <typename Vec>
kvc_status launch_copy(const CopyBlocksArgs &a, cudaStream_t stream) {
    const int64_t vecs = a.layout.block_stride / int64_t(sizeof(Vec));
    // Enough CTAs per pair to keep every SM streaming even for a single pair; each thread then
    // moves a handful of 16-byte vectors.
    int64_t per_pair = (vecs + kCopyThreads * 4 - 1) / (kCopyThreads * 4);
    if (per_pair < 1) per_pair = 1;
    if (per_pair > 1024) per_pair = 1024;
    dim3 grid(unsigned(a.num_pairs), unsigned(per_pair));
    auto *kernel = copy_blocks_kernel<Vec>;
    KVC_LAUNCH(kernel, grid, kCopyThreads, 0, stream, static_cast<unsigned char *>(a.base), a.layout.block_stride,
               a.src, a.dst);
    return check_launch("kvc copy blocks");
}

}  // namespace

kvc_status copy_blocks(const CopyBlocksArgs &a, void *stream) {
    if (a.num_pairs == 0) return KVC_OK;
    if (a.num_pairs < 0 || a.num_pairs > INT_MAX)
        return fail(KVC_ERR_INVALID_ARG, "kvc copy blocks: %lld pairs out of range for one launch",
                    (long long)a.num_pairs);
    if (kvc_status st = use_device_of(a.base, "kvc copy blocks"); st != KVC_OK) return st;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    // Widest vector that divides the stride and the base alignment.
    const uint64_t align = uint64_t(a.layout.block_stride) | reinterpret_cast<uintptr_t>(a.base);
    if (align % 16 == 0) return launch_copy<uint4>(a, s);
    if (align % 8 == 0) return launch_copy<uint2>(a, s);
    if (align % 4 == 0) return launch_copy<uint32_t>(a, s);
    return launch_copy<unsigned char>(a, s);
}

}  // namespace kvc::cuda
