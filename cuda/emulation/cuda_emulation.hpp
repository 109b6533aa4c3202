// A CUDA emulator for checking libkvc's kernels without a GPU (see cuda/device_primitives.cuh).
//
// cuda/*.cu are compiled as host C++ with KVC_CUDA_EMULATION and this header force-included.
// Every CUDA thread of a CTA becomes a fiber (ucontext) of one OS thread; __syncthreads and warp
// shuffles are real rendezvous points, so a missing barrier or a wrong lane exchange shows up as a
// wrong result (under the thread order that runs a reader before its writer: set_thread_order). cp.async copies are queued per thread and land only at cp.async.wait_group, like
// the hardware's; shared memory starts as 0xff garbage (NaN in every float format). mma.sync is
// computed from the PTX ISA fragment layouts. The CUDA runtime calls libkvc makes are served from
// host memory (cuda_runtime_emulation.cpp) with real stream semantics, as late as CUDA allows:
// launches and asynchronous copies wait in their stream until something forces them (a
// synchronization, an event wait, work on a stream ordered after them), so a missing wait or a
// host buffer reused before its copy ran shows up as a wrong result. Stream capture records work
// into a graph that cudaGraphLaunch replays, and refuses what CUDA refuses while a capture is
// open. Slow (fibers, scalar math): use small problems.
#pragma once

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>

#include "access_audit.hpp"  // opt-in recording of cp_async16 (kvc_emu::access_audit_begin/end)

namespace kvc_emu {

struct Index3 {
    unsigned x, y, z;
};
const Index3 &thread_idx();
const Index3 &block_idx();
const Index3 &block_dim();
const Index3 &grid_dim();
unsigned char *dynamic_smem();

void syncthreads();
float shfl_xor(float v, int lane_mask);
// __syncwarp(), __shfl_sync(full, v, src_lane) and __any_sync(full, pred) over all 32 lanes.
void syncwarp();
float shfl_idx(float v, int src_lane);
bool any_sync(bool pred);
void cp_async16(void *smem, const void *gmem, bool valid);
void cp_async_commit();
void cp_async_wait(int pending);
void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, bool bf16);

// Queues a kernel launch on `stream` (cuda_runtime_emulation.cpp): it runs when the stream's work
// is forced (a synchronization, or work that depends on it), or is recorded into the graph when
// the stream is being captured. The body owns copies of the kernel's arguments. The launch is
// refused as a real one would be (cudaGetLastError) when its configuration exceeds the device's
// limits, e.g. more than 48 KiB of dynamic shared memory without cudaFuncSetAttribute opt-in.
void launch(const void *kernel, dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
            std::function<void()> body);
// Runs body once per thread of every CTA of the grid (CTAs one after another), now.
void run_grid(dim3 grid, dim3 block, size_t smem_bytes, const std::function<void()> &body);
// The order in which the threads of a CTA are resumed at every scheduler pass: "forward" (index
// order, the default), "reverse" or "random[:SEED]"; the environment's KVC_EMU_THREAD_ORDER until
// this is called. Between barriers a thread runs alone to its next one, so each order leaves other
// missing barriers invisible; running the kernels under several finds them (cuda_emulation.cpp).
void set_thread_order(const char *spec);

inline float int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, 4);
    return f;
}
inline float uint_as_float(unsigned u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

}  // namespace kvc_emu

#define __launch_bounds__(...)
#define threadIdx (::kvc_emu::thread_idx())
#define blockIdx (::kvc_emu::block_idx())
#define blockDim (::kvc_emu::block_dim())
#define gridDim (::kvc_emu::grid_dim())
#define __syncthreads() ::kvc_emu::syncthreads()
#define __shfl_xor_sync(mask, v, lane_mask) ::kvc_emu::shfl_xor((v), (lane_mask))
#define __expf(x) ::expf(x)
#define __int_as_float(i) ::kvc_emu::int_as_float(i)
#define __uint_as_float(u) ::kvc_emu::uint_as_float(u)

using std::max;
using std::min;
