// The few device primitives written in PTX (cp.async, mma.sync) plus the launch and dynamic
// shared-memory spellings, in one place.
//
// KVC_CUDA_EMULATION: cuda/emulation/ compiles cuda/*.cu with a host C++ compiler and a
// fiber-based CUDA emulator (one fiber per thread, real barriers and warp shuffles), so the
// kernels, the dispatcher and the GPU test suite run — slowly — on machines without a GPU. In
// that build these primitives forward to the emulator; nothing else in cuda/ changes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#ifdef KVC_CUDA_EMULATION
#include <cstdio>
#include <cstdlib>

#include "cuda_emulation.hpp"  // cuda/emulation/, on the include path of that build only
#define KVC_DYNAMIC_SMEM(name) unsigned char *name = ::kvc_emu::dynamic_smem()
#define KVC_LAUNCH(kernel, grid, block, smem_bytes, stream, ...) \
    ::kvc_emu::launch(reinterpret_cast<const void *>(kernel), dim3(grid), dim3(block), size_t(smem_bytes), (stream), \
                      [=] { kernel(__VA_ARGS__); })
#else
#define KVC_DYNAMIC_SMEM(name) extern __shared__ __align__(16) unsigned char name[]
#define KVC_LAUNCH(kernel, grid, block, smem_bytes, stream, ...) \
    kernel<<<(grid), (block), (smem_bytes), (stream)>>>(__VA_ARGS__)
#endif

namespace kvc::cuda::detail {

// A kernel using more than 48 KiB of dynamic shared memory must opt in (cudaFuncSetAttribute),
// once per device: `opted_in` is that kernel's bit set of devices already done.
inline cudaError_t opt_in_dynamic_smem(const void *kernel, size_t bytes, std::atomic<uint64_t> &opted_in) {
    if (bytes <= 48 * 1024) return cudaSuccess;
    int dev = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err != cudaSuccess) return err;
    const uint64_t bit = dev < 64 ? (uint64_t(1) << dev) : 0;
    if (bit && (opted_in.load(std::memory_order_relaxed) & bit)) return cudaSuccess;
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
    if (err == cudaSuccess) opted_in.fetch_or(bit, std::memory_order_relaxed);
    return err;
}

// 16-byte global -> shared copy, asynchronous (sm_80+); !valid zero-fills without reading memory.
// The three cp.async statements carry a "memory" clobber: they write (or order) shared memory the
// compiler cannot see, so without it a shared-memory load of the landed tile could be hoisted above
// the wait, or a store into a stage still being copied sunk below the copy.
//
// SmemAddr is a shared-memory address as cp.async takes it (32 bits, shared window): a kernel that
// computes it once per thread, outside its loops, pays no generic-to-shared conversion per copy.
using SmemAddr = uint32_t;
__device__ __forceinline__ SmemAddr smem_addr(const void *p) {
#ifdef KVC_CUDA_EMULATION
    return SmemAddr(static_cast<const unsigned char *>(p) - ::kvc_emu::dynamic_smem());
#else
    return static_cast<SmemAddr>(__cvta_generic_to_shared(p));
#endif
}
__device__ __forceinline__ void cp_async16(SmemAddr smem, const void *gmem, bool valid) {
#ifdef KVC_CUDA_EMULATION
    ::kvc_emu::cp_async16(::kvc_emu::dynamic_smem() + smem, gmem, valid);
#else
    const int src_bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem), "r"(src_bytes) : "memory");
#endif
}
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool valid) {
    cp_async16(smem_addr(smem), gmem, valid);
}
__device__ __forceinline__ void cp_async_commit() {
#ifdef KVC_CUDA_EMULATION
    ::kvc_emu::cp_async_commit();
#else
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#ifdef KVC_CUDA_EMULATION
    ::kvc_emu::cp_async_wait(kPending);
#else
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

// Warp-level primitives over all 32 lanes (every caller is warp-uniform). __syncwarp also orders
// the lanes' shared-memory accesses, which is what makes a warp-private cp.async stage readable by
// the lanes that did not copy it.
__device__ __forceinline__ void warp_barrier() {
#ifdef KVC_CUDA_EMULATION
    ::kvc_emu::syncwarp();
#else
    __syncwarp();
#endif
}
__device__ __forceinline__ float shfl_idx(float v, int src_lane) {
#ifdef KVC_CUDA_EMULATION
    return ::kvc_emu::shfl_idx(v, src_lane);
#else
    return __shfl_sync(0xffffffffu, v, src_lane);
#endif
}
__device__ __forceinline__ bool warp_any(bool pred) {
#ifdef KVC_CUDA_EMULATION
    return ::kvc_emu::any_sync(pred);
#else
    return __any_sync(0xffffffffu, pred) != 0;
#endif
}

// 2^x in one MUFU.EX2 (ex2.approx, ~2 ulp; exp2(-inf) = 0): the softmax works in log2 units so an
// exponential is this plus one subtraction.
__device__ __forceinline__ float fast_exp2(float x) {
#ifdef KVC_CUDA_EMULATION
    return exp2f(x);
#else
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#endif
}

// Division by a runtime divisor that stays fixed for a launch (the block size), as a multiply-high,
// an add and a shift (Granlund-Montgomery round-up method): exact for every n < 2^31. The host
// builds it once per launch (FastDiv::of), so no integer division runs on the device.
struct FastDiv {
    uint32_t divisor, mul, shift;
    static FastDiv of(uint32_t d) {  // d >= 1
        uint32_t l = 0;
        while ((uint64_t(1) << l) < d) ++l;
        const uint64_t m = ((uint64_t(1) << 32) * ((uint64_t(1) << l) - d)) / d + 1;
        return {d, uint32_t(m), l};
    }
    __device__ __forceinline__ uint32_t div(uint32_t n) const {
#ifdef KVC_CUDA_EMULATION
        const uint32_t hi = uint32_t((uint64_t(n) * mul) >> 32);
#else
        const uint32_t hi = __umulhi(n, mul);
#endif
        return (hi + n) >> shift;
    }
};

// ldmatrix: four 8x8 matrices of 16-bit elements from shared memory in one warp instruction, here
// always the four quarters of a 16x16 block stored row-major (`pitch` bytes per row, 16-byte
// aligned rows). Lane (g = lane / 4, t = lane % 4) receives elements 2t, 2t + 1 of row g of matrix
// i in r[i] (kTrans: rows 2t, 2t + 1 of column g) -- the A and B operand layouts of mma.m16n8k16,
// so one instruction replaces four scalar loads (an A operand, or B of two n-tiles).
// Matrix order: kColsFirst false: i = rows 8 * (i % 2), columns 8 * (i / 2) (an A operand; V^T
// for two dim n-tiles); true: rows 8 * (i / 2), columns 8 * (i % 2) (K^T for two key n-tiles).
//
// ldmatrix_lane_offset: the byte offset of the row this lane names (lanes 8i .. 8i + 7 name matrix
// i's rows), computed once per thread outside the loops; ldmatrix_x4 then takes block + offset.
template <bool kColsFirst>
__device__ __forceinline__ int ldmatrix_lane_offset(int lane, int pitch) {
    const int i = lane >> 3;
    const int row_blk = kColsFirst ? i >> 1 : i & 1, col_blk = kColsFirst ? i & 1 : i >> 1;
    return (8 * row_blk + (lane & 7)) * pitch + 16 * col_blk;
}
template <bool kTrans, bool kColsFirst>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], SmemAddr block, [[maybe_unused]] int pitch, int lane_offset) {
#ifdef KVC_CUDA_EMULATION
    // Each lane reads what the instruction would hand it, straight from the block (no shuffles:
    // the emulator's warp collectives are costly); the kernel's own lane offset must be the one the
    // instruction expects, which this checks.
    const int lane = int(::kvc_emu::thread_idx().x) & 31, g = lane >> 2, t = lane & 3;
    if (lane_offset != ldmatrix_lane_offset<kColsFirst>(lane, pitch)) {
        std::fprintf(stderr, "ldmatrix_x4: lane %d names offset %d, the instruction expects %d\n", lane, lane_offset,
                     ldmatrix_lane_offset<kColsFirst>(lane, pitch));
        std::abort();
    }
    const unsigned char *base = ::kvc_emu::dynamic_smem() + block;
    auto ld16 = [&](int row, int col) {  // element (row, col) of the 16x16 block
        uint16_t v;
        std::memcpy(&v, base + row * pitch + 2 * col, 2);
        return uint32_t(v);
    };
    for (int i = 0; i < 4; ++i) {
        const int r0 = 8 * (kColsFirst ? i >> 1 : i & 1), c0 = 8 * (kColsFirst ? i & 1 : i >> 1);
        if (kTrans) r[i] = ld16(r0 + 2 * t, c0 + g) | (ld16(r0 + 2 * t + 1, c0 + g) << 16);
        else r[i] = ld16(r0 + g, c0 + 2 * t) | (ld16(r0 + g, c0 + 2 * t + 1) << 16);
    }
#else
    const SmemAddr row_addr = block + SmemAddr(lane_offset);
    if constexpr (kTrans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(row_addr));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(row_addr));
#endif
}

// d += a * b for one m16n8k16 tile, fp32 accumulate; kBf16 selects bf16 inputs over f16.
template <bool kBf16>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#ifdef KVC_CUDA_EMULATION
    ::kvc_emu::mma_m16n8k16(d, a, b0, b1, kBf16);
#else
    if constexpr (kBf16) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
#endif
}

}  // namespace kvc::cuda::detail
