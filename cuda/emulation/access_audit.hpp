// Opt-in recorder of the emulated kernels' cp.async global loads (cuda_emulation.cpp), for tests
// that audit memory-access patterns: which bytes a kernel reads, how often, and how a warp's lanes
// would coalesce. Every K/V (and MMA Q) global load of cuda/ goes through cp_async16, so the
// records are the kernels' whole streamed traffic.
//
// Plain C++ (no CUDA headers) so a test program can include it; the definitions exist only in a
// KVC_CUDA=EMULATE build. Not recording costs one pointer load per cp_async16.
#pragma once

#include <cstdint>
#include <vector>

namespace kvc_emu {

// One cp_async16 call of one emulated CUDA thread.
struct AsyncCopyRecord {
    uintptr_t gmem;       // global source address (16 bytes from here)
    bool valid;           // false: the destination is zero-filled and nothing is read
    uint32_t launch;      // grid run number since access_audit_begin (0, 1, ...)
    uint32_t block[3];    // blockIdx x, y, z
    uint32_t thread;      // linear thread index in the CTA
    uint32_t seq;         // this thread's n-th cp_async16 in this CTA: lanes of a warp with equal seq
                          // executed the same dynamic instruction when control flow is warp-uniform
    uintptr_t call_site;  // return address of the call (tells instructions apart)

    uint32_t warp() const { return thread / 32; }
    uint32_t lane() const { return thread % 32; }
};

// Starts recording (discarding anything recorded before). Call while no emulated work is running,
// i.e. after a stream synchronization: launches run on the host thread when forced.
void access_audit_begin();
// Stops recording and returns the records in execution order.
std::vector<AsyncCopyRecord> access_audit_end();

}  // namespace kvc_emu
