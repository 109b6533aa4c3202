// Fiber-based execution of emulated kernels (the CUDA runtime part: cuda_runtime_emulation.cpp).
#include "cuda_emulation.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

// Under AddressSanitizer (an emulated build with KVC_SANITIZE=address,...) every switch between the
// scheduler's stack and a fiber's is announced, so ASan's stack bookkeeping follows the fibers and
// the kernels' global and shared memory accesses are checked like any host code's.
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define KVC_EMU_ASAN 1
#else
#define KVC_EMU_ASAN 0
#endif

#include "cpu/dtype_convert.hpp"

// ---- Fiber contexts --------------------------------------------------------------------------------
// x86-64: a register-only switch (callee-saved registers, MXCSR and the x87 control word; the SysV ABI
// lets everything else be clobbered across the call). ucontext's swapcontext also saves the signal
// mask with a system call on every switch, which made the emulator spend half its time in the kernel.
// Other architectures keep ucontext.
#if defined(__x86_64__)
extern "C" void kvc_emu_switch(void **save_sp, void *load_sp);
asm(R"(
    .text
    .globl kvc_emu_switch
    .hidden kvc_emu_switch
    .type kvc_emu_switch, @function
kvc_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size kvc_emu_switch, .-kvc_emu_switch
)");
#endif

namespace kvc_emu {
namespace {

#if defined(__x86_64__)
struct Context {
    void *sp = nullptr;
};
// A fresh stack laid out as if kvc_emu_switch had saved it inside a call made from `entry`'s caller:
// control word slot, six callee-saved registers, then `entry` as the return address, so the first
// switch to it "returns" into entry with the stack aligned as after a call (rsp = 8 mod 16).
void context_init(Context *c, char *stack, size_t bytes, void (*entry)()) {
#if KVC_EMU_ASAN
    // The previous fiber on this stack ended inside fiber_main -> switch_to_scheduler, whose frames'
    // redzones are still poisoned; those frames sit at the top of the stack.
    ASAN_UNPOISON_MEMORY_REGION(stack + bytes - 65536, 65536);
#endif
    const uintptr_t top = (reinterpret_cast<uintptr_t>(stack) + bytes) & ~uintptr_t(15);
    auto *slots = reinterpret_cast<uint64_t *>(top - 72);
    uint32_t mxcsr;
    uint16_t fpucw;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpucw));
    std::memset(slots, 0, 72);
    std::memcpy(&slots[0], &mxcsr, 4);
    std::memcpy(reinterpret_cast<char *>(&slots[0]) + 4, &fpucw, 2);
    slots[7] = reinterpret_cast<uint64_t>(entry);
    c->sp = slots;
}
void context_switch(Context *from, Context *to) { kvc_emu_switch(&from->sp, to->sp); }
#else
struct Context {
    ucontext_t uc;
};
void context_init(Context *c, char *stack, size_t bytes, void (*entry)()) {
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = bytes;
    c->uc.uc_link = nullptr;  // fibers never return: they switch back to the scheduler
    makecontext(&c->uc, entry, 0);
}
void context_switch(Context *from, Context *to) { swapcontext(&from->uc, &to->uc); }
#endif

constexpr size_t kStackBytes = 512 * 1024;
constexpr int kMaxThreads = 1024;

struct Copy {
    void *dst;
    const void *src;
    bool valid;
};

struct Fiber {
    Context ctx;
    Index3 tid;
    bool done = false;
    std::vector<Copy> open;                 // cp.async issued since the last commit
    std::vector<std::vector<Copy>> groups;  // committed, not yet landed
    uint32_t copies_recorded = 0;           // cp_async16 calls recorded so far (the access audit's seq)
};

struct Cta {
    Index3 block, bdim, gdim;
    std::vector<Fiber> fibers;
    std::vector<unsigned char> smem;
    Context sched;
    const std::function<void()> *body = nullptr;
    int current = -1;
    int live = 0;
    int block_arrived = 0;
    unsigned block_gen = 0;
    std::vector<int> warp_arrived, warp_live;
    std::vector<unsigned> warp_gen;
    std::vector<float> shfl;
    std::vector<uint32_t> mma_a, mma_b;
};

Cta g_cta;
std::unique_ptr<char[]> g_stacks;  // kMaxThreads stacks, left uninitialized (untouched pages cost nothing)
uint64_t g_events = 0;  // barrier arrivals and thread exits: a scheduler pass without one is a deadlock
uint64_t g_grid_ctas = 0;  // CTAs run so far: seeds each CTA's random thread order differently

// The access audit (access_audit.hpp): null unless recording, so cp_async16 pays one load.
std::atomic<std::vector<AsyncCopyRecord> *> g_audit{nullptr};
uint32_t g_audit_launch = 0;  // grid runs since access_audit_begin

Fiber &me() { return g_cta.fibers[size_t(g_cta.current)]; }
int my_index() { return g_cta.current; }

#if KVC_EMU_ASAN
const void *g_sched_stack_bottom = nullptr;  // the scheduler's (launching thread's) stack
size_t g_sched_stack_size = 0;
#endif

// Switches from the running fiber back to the scheduler; `exiting` fibers are never resumed.
void switch_to_scheduler(bool exiting) {
#if KVC_EMU_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(exiting ? nullptr : &fake, g_sched_stack_bottom, g_sched_stack_size);
    context_switch(&me().ctx, &g_cta.sched);
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
    (void)exiting;
    context_switch(&me().ctx, &g_cta.sched);
#endif
}

void switch_to_fiber(Fiber &f, char *stack) {
#if KVC_EMU_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, stack, kStackBytes);
    context_switch(&g_cta.sched, &f.ctx);
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
    (void)stack;
    context_switch(&g_cta.sched, &f.ctx);
#endif
}

void yield() { switch_to_scheduler(false); }

void fiber_main() {
#if KVC_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &g_sched_stack_bottom, &g_sched_stack_size);
#endif
    (*g_cta.body)();
    Fiber &f = me();
    f.done = true;
    ++g_events;
    --g_cta.live;
    --g_cta.warp_live[size_t(my_index() / 32)];
    switch_to_scheduler(true);  // never resumed
}

void warp_sync() {
    const size_t w = size_t(my_index() / 32);
    const unsigned gen = g_cta.warp_gen[w];
    ++g_events;
    if (++g_cta.warp_arrived[w] == g_cta.warp_live[w]) {
        g_cta.warp_arrived[w] = 0;
        ++g_cta.warp_gen[w];
        return;
    }
    while (g_cta.warp_gen[w] == gen) yield();
}

void land(const std::vector<Copy> &group) {
    for (const Copy &c : group) {
        if (c.valid) std::memcpy(c.dst, c.src, 16);
        else std::memset(c.dst, 0, 16);
    }
}

float half_bits(uint32_t h, bool bf16) {
    return bf16 ? kvc::cpu::bf16_to_float(uint16_t(h)) : kvc::cpu::half_to_float(uint16_t(h));
}

}  // namespace

const Index3 &thread_idx() { return me().tid; }
const Index3 &block_idx() { return g_cta.block; }
const Index3 &block_dim() { return g_cta.bdim; }
const Index3 &grid_dim() { return g_cta.gdim; }
unsigned char *dynamic_smem() { return g_cta.smem.data(); }

void syncthreads() {
    const unsigned gen = g_cta.block_gen;
    ++g_events;
    if (++g_cta.block_arrived == g_cta.live) {
        g_cta.block_arrived = 0;
        ++g_cta.block_gen;
        return;
    }
    while (g_cta.block_gen == gen) yield();
}

float shfl_xor(float v, int lane_mask) {
    const int t = my_index(), w = t / 32, lane = t % 32;
    g_cta.shfl[size_t(w * 32 + lane)] = v;
    warp_sync();
    const float r = g_cta.shfl[size_t(w * 32 + (lane ^ lane_mask))];
    warp_sync();
    return r;
}

void syncwarp() { warp_sync(); }

float shfl_idx(float v, int src_lane) {
    const int t = my_index(), w = t / 32, lane = t % 32;
    g_cta.shfl[size_t(w * 32 + lane)] = v;
    warp_sync();
    const float r = g_cta.shfl[size_t(w * 32 + (src_lane & 31))];
    warp_sync();
    return r;
}

// True on every lane when the pred of any live lane of the warp is (each posts, then all read).
bool any_sync(bool pred) {
    const int t = my_index(), w = t / 32, lane = t % 32;
    g_cta.shfl[size_t(w * 32 + lane)] = pred ? 1.0f : 0.0f;
    warp_sync();
    bool any = false;
    for (int l = w * 32; l < std::min(w * 32 + 32, int(g_cta.fibers.size())); ++l)
        any = any || (!g_cta.fibers[size_t(l)].done && g_cta.shfl[size_t(l)] != 0.0f);
    warp_sync();
    return any;
}

// noinline: the return address names the kernel's call site (one per unrolled copy instruction).
__attribute__((noinline)) void cp_async16(void *smem, const void *gmem, bool valid) {
    Fiber &f = me();
    f.open.push_back({smem, gmem, valid});
    if (std::vector<AsyncCopyRecord> *audit = g_audit.load(std::memory_order_relaxed)) {
        const uint32_t t = uint32_t(my_index());
        audit->push_back({reinterpret_cast<uintptr_t>(gmem), valid, g_audit_launch,
                          {g_cta.block.x, g_cta.block.y, g_cta.block.z}, t, f.copies_recorded++,
                          reinterpret_cast<uintptr_t>(__builtin_return_address(0))});
    }
}

void access_audit_begin() {
    delete g_audit.exchange(new std::vector<AsyncCopyRecord>(), std::memory_order_relaxed);
    g_audit_launch = 0;
}
std::vector<AsyncCopyRecord> access_audit_end() {
    std::unique_ptr<std::vector<AsyncCopyRecord>> audit(g_audit.exchange(nullptr, std::memory_order_relaxed));
    return audit ? std::move(*audit) : std::vector<AsyncCopyRecord>{};
}
void cp_async_commit() {
    Fiber &f = me();
    f.groups.push_back(std::move(f.open));
    f.open.clear();
}
void cp_async_wait(int pending) {
    Fiber &f = me();
    while (int(f.groups.size()) > pending) {
        land(f.groups.front());
        f.groups.erase(f.groups.begin());
    }
}

// PTX ISA, mma.m16n8k16 with 16-bit inputs (g = lane / 4, t = lane % 4):
//   A regs: 0 -> (g, 2t..2t+1), 1 -> (g+8, 2t..), 2 -> (g, 2t+8..), 3 -> (g+8, 2t+8..)
//   B regs: 0 -> (k 2t..2t+1, n g), 1 -> (k 2t+8..2t+9, n g)
//   C/D:    0,1 -> (g, 2t..2t+1), 2,3 -> (g+8, 2t..2t+1)
void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, bool bf16) {
    const int t = my_index(), w = t / 32, lane = t % 32;
    for (int i = 0; i < 4; ++i) g_cta.mma_a[size_t((w * 32 + lane) * 4 + i)] = a[i];
    g_cta.mma_b[size_t((w * 32 + lane) * 2)] = b0;
    g_cta.mma_b[size_t((w * 32 + lane) * 2 + 1)] = b1;
    warp_sync();
    float A[16][16], B[16][8];
    for (int l = 0; l < 32; ++l) {
        const int g = l / 4, q = l % 4;
        const uint32_t *ar = &g_cta.mma_a[size_t((w * 32 + l) * 4)];
        const int rows[4] = {g, g + 8, g, g + 8}, cols[4] = {2 * q, 2 * q, 2 * q + 8, 2 * q + 8};
        for (int i = 0; i < 4; ++i) {
            A[rows[i]][cols[i]] = half_bits(ar[i] & 0xffffu, bf16);
            A[rows[i]][cols[i] + 1] = half_bits(ar[i] >> 16, bf16);
        }
        const uint32_t *br = &g_cta.mma_b[size_t((w * 32 + l) * 2)];
        B[2 * q][g] = half_bits(br[0] & 0xffffu, bf16);
        B[2 * q + 1][g] = half_bits(br[0] >> 16, bf16);
        B[2 * q + 8][g] = half_bits(br[1] & 0xffffu, bf16);
        B[2 * q + 9][g] = half_bits(br[1] >> 16, bf16);
    }
    warp_sync();
    const int g = lane / 4, q = lane % 4;
    const int rr[4] = {g, g, g + 8, g + 8}, cc[4] = {2 * q, 2 * q + 1, 2 * q, 2 * q + 1};
    for (int i = 0; i < 4; ++i) {
        float acc = d[i];
        for (int k = 0; k < 16; ++k) acc += A[rr[i]][k] * B[k][cc[i]];
        d[i] = acc;
    }
}

// The order in which a scheduler pass resumes a CTA's threads (KVC_EMU_THREAD_ORDER): `forward`
// (the default: index order), `reverse`, or `random[:SEED]` (a fresh permutation every pass).
// Between two barriers each thread runs alone up to its next one, so under `forward` a thread
// that reads shared data without the barrier it needs still sees everything lower-indexed threads
// wrote; the other orders make those races change the results too. A stand-in for
// compute-sanitizer's racecheck, which needs a GPU.
namespace {

struct ThreadOrder {
    enum Mode { kForward, kReverse, kRandom } mode = kForward;
    uint64_t seed = 0;
};

ThreadOrder parse_thread_order(const char *spec) {
    ThreadOrder o;
    if (!spec || !*spec || std::strcmp(spec, "forward") == 0) return o;
    if (std::strcmp(spec, "reverse") == 0) {
        o.mode = ThreadOrder::kReverse;
        return o;
    }
    if (std::strncmp(spec, "random", 6) == 0 && (spec[6] == '\0' || spec[6] == ':')) {
        o.mode = ThreadOrder::kRandom;
        o.seed = spec[6] == ':' ? std::strtoull(spec + 7, nullptr, 10) : 1;
        return o;
    }
    std::fprintf(stderr, "kvc_emu: thread order '%s' is not forward, reverse or random[:SEED]\n", spec);
    std::abort();
}

ThreadOrder g_thread_order;
bool g_thread_order_set = false;

const ThreadOrder &thread_order() {
    if (!g_thread_order_set) {
        g_thread_order = parse_thread_order(std::getenv("KVC_EMU_THREAD_ORDER"));
        g_thread_order_set = true;
    }
    return g_thread_order;
}

}  // namespace

void set_thread_order(const char *spec) {
    g_thread_order = parse_thread_order(spec);
    g_thread_order_set = true;
}

void run_grid(dim3 grid, dim3 block, size_t smem_bytes, const std::function<void()> &body) {
    const int threads = int(block.x * block.y * block.z);
    if (threads < 1 || threads > kMaxThreads) {
        std::fprintf(stderr, "kvc_emu: bad block size %d\n", threads);
        std::abort();
    }
    if (!g_stacks) g_stacks.reset(new char[kStackBytes * kMaxThreads]);
    const int warps = (threads + 31) / 32;
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x) {
                Cta &c = g_cta;
                c.block = {x, y, z};
                c.bdim = {block.x, block.y, block.z};
                c.gdim = {grid.x, grid.y, grid.z};
                // Exactly the launch's dynamic shared memory (an access past it is a bug, and ASan
                // builds report it); uninitialized shared memory reads as NaN.
                c.smem.assign(std::max<size_t>(smem_bytes, 1), 0xff);
                c.body = &body;
                c.fibers.assign(size_t(threads), Fiber{});
                c.live = threads;
                c.block_arrived = 0;
                c.warp_arrived.assign(size_t(warps), 0);
                c.warp_gen.assign(size_t(warps), 0);
                c.warp_live.assign(size_t(warps), 0);
                for (int t = 0; t < threads; ++t) ++c.warp_live[size_t(t / 32)];
                c.shfl.assign(size_t(warps) * 32, 0.0f);
                c.mma_a.assign(size_t(warps) * 32 * 4, 0);
                c.mma_b.assign(size_t(warps) * 32 * 2, 0);
                for (int t = 0; t < threads; ++t) {
                    Fiber &f = c.fibers[size_t(t)];
                    f.tid = {unsigned(t) % block.x, (unsigned(t) / block.x) % block.y, unsigned(t) / (block.x * block.y)};
                    context_init(&f.ctx, g_stacks.get() + size_t(t) * kStackBytes, kStackBytes, fiber_main);
                }
                const ThreadOrder &order = thread_order();
                std::vector<int> pass(static_cast<size_t>(threads));
                for (int t = 0; t < threads; ++t) pass[size_t(t)] = order.mode == ThreadOrder::kReverse ? threads - 1 - t : t;
                std::mt19937_64 rng(order.seed ^ (uint64_t(++g_grid_ctas) * 0x9e3779b97f4a7c15ull));
                while (c.live > 0) {
                    const uint64_t events = g_events;
                    if (order.mode == ThreadOrder::kRandom) std::shuffle(pass.begin(), pass.end(), rng);
                    for (int t : pass) {
                        if (c.fibers[size_t(t)].done) continue;
                        c.current = t;
                        switch_to_fiber(c.fibers[size_t(t)], g_stacks.get() + size_t(t) * kStackBytes);
                    }
                    if (g_events == events) {
                        std::fprintf(stderr, "kvc_emu: deadlock in block (%u,%u,%u): %d threads wait at barriers "
                                     "that can never complete\n", x, y, z, c.live);
                        std::abort();
                    }
                }
                c.current = -1;
            }
    if (g_audit.load(std::memory_order_relaxed)) ++g_audit_launch;
}

}  // namespace kvc_emu
