// CPU backend of the storage kernels: reshape_and_cache and copy_blocks (storage/kernel_args.hpp). The
// cache write's body is cache_write_core.inl, compiled here for the build's baseline ISA and in
// kernels_avx2.cpp / kernels_avx512.cpp for those; cpu_cache_write runs the variant that
// cpu::kernel_isa chooses (the same one as the attention).
#include <algorithm>
#include <cstring>

#include "cpu/attention_isa.hpp"
#include "cpu/cpu_isa.hpp"
#include "cpu/dtype_convert.hpp"
#include "cpu/thread_pool.hpp"
#include "error.hpp"
#include "storage/kernel_args.hpp"

#include "cpu/cache_write_core.inl"

namespace kvc {

kvc_status cpu_cache_write(const CacheWriteArgs &a) {
    cpu::Isa isa;
    if (kvc_status st = cpu::kernel_isa(&isa)) return st;
    switch (isa) {
        case cpu::Isa::avx512: return cpu::cache_write_avx512(a);
        case cpu::Isa::avx2: return cpu::cache_write_avx2(a);
        default: return run_cache_write(a);
    }
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
