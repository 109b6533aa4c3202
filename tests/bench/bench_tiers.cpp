// Memory-tier throughput.
//   BM_DiskWrite / BM_DiskRead: the disk tier's own I/O path (slot header + XXH3 checksum, batches of
//     64 slots through io_uring or preadv/pwritev, O_DIRECT when the file system allows), on a file
//     in $KVC_BENCH_DIR (default /tmp). Compare with raw O_DIRECT dd on the same file system:
//     tests/bench/bench_tiers.sh runs both and prints the ratio (goal >= 80%).
//   BM_HostSwap vs BM_Memcpy: a whole-sequence swap-out + swap-in through the C API on the CPU
//     backend against two plain memcpy of the same bytes.
//   BM_HostSwapCuda vs BM_PinnedCopyCuda: the same swap on a CUDA pool (pinned host tier, tier
//     stream) against cudaMemcpyAsync device -> pinned -> device of the same bytes (goal >= 80%).
//     Skipped without a GPU.
//   BM_AdmitFromDisk vs BM_AdmitAfterPrefetch: the latency of one kvc_alloc whose 64-block prefix
//     is in the disk tier (a warm restart: read, verify, host -> device inside the call) against the
//     same kvc_alloc after kvc_tier_prefetch brought the blocks up into the host tier (what an I/O
//     thread does while the request waits in the queue); BM_Prefetch is that I/O thread's call.
//     BM_AdmitFromDiskInRounds: BM_AdmitFromDisk with a host tier of 16 slots, so the call reads
//     the 64 blocks in 4 promotion rounds (each round's reads waited for before the next).
//   BM_PersistentAttach vs BM_HeaderReadsQD1: a warm restart's attach of a KVC_DISK_PERSISTENT file
//     of 65536 slots (every header read back and checked, 64 in flight) against reading the same
//     headers with one blocking O_DIRECT pread each.
//   BM_DiskSlotMac vs BM_DiskSlotXxh3: what authenticating a slot (kvc_tier_attach_disk_keyed)
//     costs per block: the keyed BLAKE2b-256 MAC (libsodium) over a slot header (16 tokens) and a
//     32 KiB / 256 KiB block, against the XXH3-64 checksum of the same block bytes that every slot
//     already pays. BM_DiskWrite / BM_DiskRead with keyed:1 show it on the whole I/O path.
// Run: bench_tiers --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "storage/cuda_api.hpp"
#include "kvc/kvc.h"
#include "tier/disk.hpp"
#include "tier/host.hpp"

namespace {

void check(kvc_status st, const char *what) {
    if (st != KVC_OK) {
        std::fprintf(stderr, "%s failed: %s\n", what, kvc_last_error());
        std::abort();
    }
}

// A Llama-8B-like block: 16 tokens x 8 KV heads x 128 dims x F16 x 2 (K, V) x 8 layers = 512 KiB.
kvc_pool_config block_config(int64_t num_blocks) {
    kvc_pool_config c;
    check(kvc_pool_config_default(&c), "config");
    c.block_size = 16;
    c.num_layers = 8;
    c.num_kv_heads = 8;
    c.head_dim = 128;
    c.kv_dtype = KVC_DTYPE_F16;
    c.num_blocks = num_blocks;
    c.watermark = 0.0;
    c.backend = KVC_BACKEND_CPU;
    c.event_capacity = 0;
    return c;
}

std::string bench_file(const char *name) {
    const char *dir = std::getenv("KVC_BENCH_DIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/" + name;
}

constexpr int32_t kDiskSlots = 512;  // 256 MiB of block data per pass

// A block hash for slot s: both halves well mixed, as a real (XXH3-128) block hash is — the prefix
// index probes by the low half, so a constant one would make every lookup walk one long chain.
kvc::Hash128 bench_hash(int32_t s, uint64_t salt) {
    uint64_t z = (uint64_t(s) + 1) * 0x9e3779b97f4a7c15ull ^ salt;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return kvc::Hash128{uint64_t(s) + 1, z ^ (z >> 31)};
}

// A 32-byte slot MAC key (kvc_tier_attach_disk_keyed); its value does not matter here.
constexpr uint8_t kBenchKey[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                   17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

// A disk tier whose slots all carry an identity, plus host buffers to write from / read into.
// keyed: every slot authenticated with kBenchKey.
struct DiskBench {
    kvc::DiskTier disk;
    kvc::KvLayout layout;
    std::vector<int32_t> slots;
    std::vector<char *> data;
    void *buffers = nullptr;

    DiskBench(int32_t flags, bool keyed) {
        kvc_pool_config c = block_config(1);
        layout.init(1, c.block_size, c.num_layers, c.num_kv_heads, c.head_dim, c.kv_dtype);
        const std::string path = bench_file("kvc_bench_tier.bin");
        check(disk.open(path.c_str(), kDiskSlots, layout, flags, nullptr, "bench", keyed ? kBenchKey : nullptr,
                        keyed ? sizeof kBenchKey : 0),
              "disk open");
        const int64_t stride = kvc::tier_round_up(layout.block_stride);
        buffers = std::aligned_alloc(4096, size_t(stride) * kDiskSlots);
        std::memset(buffers, 0x5a, size_t(stride) * kDiskSlots);
        std::vector<int32_t> toks(size_t(layout.block_size), 7);
        for (int32_t s = 0; s < kDiskSlots; ++s) {
            kvc::BlockKey key;
            key.hash = bench_hash(s, 0x1234);
            disk.slots.claim(s);
            disk.slots.index_busy(s, kvc::kRootHash, key, toks.data(), KVC_PRIORITY_DEFAULT);
            slots.push_back(s);
            data.push_back(static_cast<char *>(buffers) + int64_t(s) * stride);
        }
    }
    ~DiskBench() { std::free(buffers); }
};

void report(benchmark::State &state, const DiskBench &b) {
    state.SetBytesProcessed(int64_t(state.iterations()) * kDiskSlots * b.layout.block_stride);
    state.counters["direct_io"] = b.disk.direct ? 1 : 0;
    state.counters["io_uring"] = b.disk.uring ? 1 : 0;
}

// BM_DiskWrite / BM_DiskRead: open flags 0, unkeyed and keyed slots.
void disk_io_args(benchmark::internal::Benchmark *b) {
    b->Args({0, 0})->Args({0, 1})->ArgNames({"flags", "keyed"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

void BM_DiskWrite(benchmark::State &state) {
    DiskBench b(int32_t(state.range(0)), state.range(1) != 0);
    std::vector<int32_t> out(kDiskSlots);
    for (auto _ : state) {
        b.disk.write_slots(b.slots.data(), b.data.data(), out.data(), kDiskSlots);
        for (int32_t o : out)
            if (o != kvc::kDiskOk) state.SkipWithError("disk write failed");
    }
    report(state, b);
}
BENCHMARK(BM_DiskWrite)->Apply(disk_io_args);

void BM_DiskRead(benchmark::State &state) {
    DiskBench b(int32_t(state.range(0)), state.range(1) != 0);
    std::vector<int32_t> out(kDiskSlots);
    b.disk.write_slots(b.slots.data(), b.data.data(), out.data(), kDiskSlots);
    for (auto _ : state) {
        b.disk.read_slots(b.slots.data(), b.data.data(), out.data(), kDiskSlots);
        for (int32_t o : out)
            if (o != kvc::kDiskOk) state.SkipWithError("disk read failed verification");
    }
    report(state, b);
}
BENCHMARK(BM_DiskRead)->Apply(disk_io_args);

// One slot's bytes as the MAC sees them: the header of a 16-token block (112 bytes of fixed fields,
// DiskHeader in lib/tier/disk.cpp, then the token ids) and state.range(0) block bytes.
struct SlotBytes {
    std::vector<char> header = std::vector<char>(112 + 16 * sizeof(int32_t), 0x11);
    std::vector<char> block;
    explicit SlotBytes(int64_t bytes) : block(size_t(bytes), 0x5a) {}
};

void BM_DiskSlotMac(benchmark::State &state) {
    SlotBytes s(state.range(0));
    kvc::DiskMac mac;
    check(mac.init(kBenchKey, sizeof kBenchKey, "bench"), "load libsodium");
    unsigned char tag[kvc::DiskMac::kTagBytes];
    for (auto _ : state) {
        mac.tag(s.header.data(), s.header.size(), s.block.data(), s.block.size(), tag);
        benchmark::DoNotOptimize(tag);
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
}
BENCHMARK(BM_DiskSlotMac)->Arg(32 << 10)->Arg(256 << 10)->ArgName("block_bytes");

void BM_DiskSlotXxh3(benchmark::State &state) {
    SlotBytes s(state.range(0));
    for (auto _ : state) benchmark::DoNotOptimize(XXH3_64bits_withSeed(s.block.data(), s.block.size(), 42));
    state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
}
BENCHMARK(BM_DiskSlotXxh3)->Arg(32 << 10)->Arg(256 << 10)->ArgName("block_bytes");

constexpr int64_t kSwapBlocks = 64;  // 32 MiB sequence

bool have_gpu() {
    int32_t n = 0;
    return kvc_cuda_device_count(&n) == KVC_OK && n > 0;
}

// kvc_swap_out + kvc_swap_in of one 64-block sequence (2 x 32 MiB moved per iteration).
void swap_bench(benchmark::State &state, int32_t backend) {
    kvc_pool_config c = block_config(kSwapBlocks + 4);
    c.prefix_caching = 0;
    c.backend = backend;
    kvc_pool *p = nullptr;
    check(kvc_pool_create(&c, &p), "pool");
    check(kvc_tier_attach_host(p, kSwapBlocks), "attach host");
    check(kvc_alloc(p, 1, nullptr, kSwapBlocks * c.block_size, nullptr, nullptr), "alloc");
    int64_t bytes = 0;
    check(kvc_preemption_cost(p, 1, &bytes, nullptr), "cost");
    for (auto _ : state) {
        uint64_t op = 0;
        check(kvc_swap_out(p, 1, &op), "swap out");
        check(kvc_op_wait(p, op), "wait");
        check(kvc_swap_in(p, 1, &op), "swap in");
        check(kvc_op_wait(p, op), "wait");
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * 2 * bytes);
    kvc_pool_destroy(p);
}

void BM_HostSwap(benchmark::State &state) { swap_bench(state, KVC_BACKEND_CPU); }
BENCHMARK(BM_HostSwap)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_HostSwapCuda(benchmark::State &state) {
    if (!have_gpu()) {
        state.SkipWithError("no CUDA device");
        return;
    }
    swap_bench(state, KVC_BACKEND_CUDA);
}
BENCHMARK(BM_HostSwapCuda)->Unit(benchmark::kMillisecond)->UseRealTime();

// The copy bound of BM_HostSwapCuda: one cudaMemcpyAsync per block device -> pinned, then back.
void BM_PinnedCopyCuda(benchmark::State &state) {
    if (!have_gpu()) {
        state.SkipWithError("no CUDA device");
        return;
    }
    kvc_pool_config c = block_config(1);
    int64_t block = 0;
    check(kvc_bytes_per_block(&c, &block), "bytes");
    const size_t total = size_t(block * kSwapBlocks);
    void *dev = nullptr, *host = nullptr;
    check(kvc::cuda::malloc_device(0, total, &dev), "device alloc");
    check(kvc::cuda::malloc_pinned(total, &host), "pinned alloc");
    char *d = static_cast<char *>(dev), *h = static_cast<char *>(host);
    for (auto _ : state) {
        for (int64_t i = 0; i < kSwapBlocks; ++i)
            check(kvc::cuda::memcpy_d2h(h + i * block, d + i * block, size_t(block), nullptr), "d2h");
        for (int64_t i = 0; i < kSwapBlocks; ++i)
            check(kvc::cuda::memcpy_h2d(d + i * block, h + i * block, size_t(block), nullptr), "h2d");
        check(kvc::cuda::stream_sync(nullptr), "sync");
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * 2 * int64_t(total));
    (void)kvc::cuda::free_pinned(host);
    (void)kvc::cuda::free_device(0, dev);
}
BENCHMARK(BM_PinnedCopyCuda)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same bytes with memcpy, block by block into a separate buffer and back.
void BM_Memcpy(benchmark::State &state) {
    kvc_pool_config c = block_config(1);
    int64_t block = 0;
    check(kvc_bytes_per_block(&c, &block), "bytes");
    const size_t total = size_t(block * kSwapBlocks);
    char *a = static_cast<char *>(std::aligned_alloc(4096, total));
    char *b = static_cast<char *>(std::aligned_alloc(4096, total));
    std::memset(a, 1, total);
    std::memset(b, 2, total);
    for (auto _ : state) {
        for (int64_t i = 0; i < kSwapBlocks; ++i) std::memcpy(b + i * block, a + i * block, size_t(block));
        for (int64_t i = 0; i < kSwapBlocks; ++i) std::memcpy(a + i * block, b + i * block, size_t(block));
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * 2 * int64_t(total));
    std::free(a);
    std::free(b);
}
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

// ---- admission from disk, with and without a prefetch --------------------------------------------

namespace {

constexpr int64_t kAdmitBlocks = 64;  // a 1024-token prefix: 32 MiB of KV

std::vector<int32_t> admit_prompt() {
    std::vector<int32_t> t(size_t(kAdmitBlocks * 16 + 1));
    for (size_t i = 0; i < t.size(); ++i) t[i] = int32_t(1000 + i);
    return t;
}

kvc_pool *admit_pool(const std::string &path, int64_t host_slots = kAdmitBlocks) {
    kvc_pool_config c = block_config(kAdmitBlocks + 8);
    kvc_pool *p = nullptr;
    check(kvc_pool_create(&c, &p), "pool");
    check(kvc_tier_attach_host(p, host_slots), "attach host");
    check(kvc_tier_attach_disk_with_identity(p, path.c_str(), 2 * kAdmitBlocks, KVC_DISK_PERSISTENT, "bench"),
          "attach disk");
    return p;
}

// The prompt's blocks written to a persistent file once; every iteration restarts from it (pool
// created and the file re-attached outside the timed region), so the timed kvc_alloc finds them on
// disk only (O_DIRECT reads: no page cache).
// kInRounds: kCold with a host tier of a quarter of the prefix, so kvc_alloc promotes in 4 rounds.
enum class Admit { kCold, kPrefetched, kPrefetchOnly, kInRounds };

void admit_bench(benchmark::State &state, Admit mode) {
    const std::string path = bench_file("kvc_bench_admit.bin");
    std::remove(path.c_str());
    const std::vector<int32_t> prompt = admit_prompt();
    const int64_t n = int64_t(prompt.size());
    {
        kvc_pool *p = admit_pool(path);
        check(kvc_alloc(p, 1, prompt.data(), n, nullptr, nullptr), "alloc");
        check(kvc_free(p, 1), "free");
        int64_t written = 0;
        check(kvc_tier_flush(p, &written), "flush");
        if (written != kAdmitBlocks) std::abort();
        kvc_pool_destroy(p);
    }
    int64_t cached = 0;
    for (auto _ : state) {
        state.PauseTiming();
        kvc_pool *p = admit_pool(path, mode == Admit::kInRounds ? kAdmitBlocks / 4 : kAdmitBlocks);
        if (mode == Admit::kPrefetched) check(kvc_tier_prefetch(p, prompt.data(), n, nullptr, nullptr), "prefetch");
        state.ResumeTiming();
        if (mode == Admit::kPrefetchOnly) check(kvc_tier_prefetch(p, prompt.data(), n, nullptr, &cached), "prefetch");
        else check(kvc_alloc(p, 1, prompt.data(), n, nullptr, &cached), "alloc");
        state.PauseTiming();
        if (cached != kAdmitBlocks * 16) std::abort();
        kvc_pool_destroy(p);
        state.ResumeTiming();
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * kAdmitBlocks * (int64_t(512) << 10));  // KV bytes admitted
    state.counters["cached_tokens"] = double(cached);
    std::remove(path.c_str());
}

void BM_AdmitFromDisk(benchmark::State &state) { admit_bench(state, Admit::kCold); }
BENCHMARK(BM_AdmitFromDisk)->Unit(benchmark::kMillisecond)->UseRealTime();
void BM_AdmitAfterPrefetch(benchmark::State &state) { admit_bench(state, Admit::kPrefetched); }
BENCHMARK(BM_AdmitAfterPrefetch)->Unit(benchmark::kMillisecond)->UseRealTime();
void BM_Prefetch(benchmark::State &state) { admit_bench(state, Admit::kPrefetchOnly); }
BENCHMARK(BM_Prefetch)->Unit(benchmark::kMillisecond)->UseRealTime();
void BM_AdmitFromDiskInRounds(benchmark::State &state) { admit_bench(state, Admit::kInRounds); }
BENCHMARK(BM_AdmitFromDiskInRounds)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- a warm restart's attach: the header scan ------------------------------------------------------

constexpr int32_t kScanSlots = 65536;

// A small block (16 tokens x 1 layer x 1 KV head x 64 dims x f16 x K,V = 4 KiB) so that the file
// holds many slots (8 KiB each with the header: 512 MiB): the scan reads headers only.
kvc::KvLayout scan_layout() {
    kvc::KvLayout l;
    l.init(1, 16, 1, 1, 64, KVC_DTYPE_F16);
    return l;
}

// Writes kScanSlots distinct blocks into a persistent file once (through DiskTier itself).
std::string scan_file() {
    const std::string path = bench_file("kvc_bench_scan.bin");
    std::remove(path.c_str());
    const kvc::KvLayout layout = scan_layout();
    kvc::DiskTier d;
    check(d.open(path.c_str(), kScanSlots, layout, KVC_DISK_PERSISTENT, "bench", "scan setup"), "scan setup");
    const int64_t stride = kvc::tier_round_up(layout.block_stride);
    char *buf = static_cast<char *>(std::aligned_alloc(4096, size_t(stride) * kvc::DiskTier::kBatch));
    std::memset(buf, 0x3c, size_t(stride) * kvc::DiskTier::kBatch);
    std::vector<int32_t> toks(size_t(layout.block_size), 11);
    for (int32_t base = 0; base < kScanSlots; base += kvc::DiskTier::kBatch) {
        int32_t slots[kvc::DiskTier::kBatch], out[kvc::DiskTier::kBatch];
        char *data[kvc::DiskTier::kBatch];
        for (int i = 0; i < kvc::DiskTier::kBatch; ++i) {
            const int32_t s = base + i;
            kvc::BlockKey key;
            key.hash = bench_hash(s, 0x5ca9);
            d.slots.claim(s);
            d.slots.index_busy(s, kvc::kRootHash, key, toks.data(), KVC_PRIORITY_DEFAULT);
            d.stamps[size_t(s)] = d.next_stamp++;
            slots[i] = s;
            data[i] = buf + int64_t(i) * stride;
        }
        d.write_slots(slots, data, out, kvc::DiskTier::kBatch);
        for (int32_t o : out)
            if (o != kvc::kDiskOk) std::abort();
    }
    std::free(buf);
    return path;
}

void BM_PersistentAttach(benchmark::State &state) {
    const std::string path = scan_file();
    const kvc::KvLayout layout = scan_layout();
    int64_t recovered = 0;
    for (auto _ : state) {
        auto *d = new kvc::DiskTier;
        check(d->open(path.c_str(), kScanSlots, layout, KVC_DISK_PERSISTENT, "bench", "attach"), "attach");
        state.PauseTiming();
        recovered = d->recovered;
        if (recovered != kScanSlots || !d->direct) std::abort();
        delete d;  // closes the file (and its lock) for the next iteration
        state.ResumeTiming();
    }
    state.counters["slots_per_s"] = benchmark::Counter(double(kScanSlots), benchmark::Counter::kIsIterationInvariantRate);
    state.counters["recovered"] = double(recovered);
    std::remove(path.c_str());
}
BENCHMARK(BM_PersistentAttach)->Unit(benchmark::kMillisecond)->UseRealTime();

// The baseline: the same headers, one blocking 4 KiB O_DIRECT pread each, nothing checked.
void BM_HeaderReadsQD1(benchmark::State &state) {
    const std::string path = scan_file();
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
    if (fd < 0) std::abort();
    struct stat st;
    if (fstat(fd, &st) != 0) std::abort();
    const int64_t slot_bytes = int64_t(st.st_size) / kScanSlots;
    void *hdr = std::aligned_alloc(4096, 4096);
    for (auto _ : state)
        for (int32_t s = 0; s < kScanSlots; ++s)
            if (pread(fd, hdr, 4096, off_t(int64_t(s) * slot_bytes)) != 4096) std::abort();
    state.counters["slots_per_s"] = benchmark::Counter(double(kScanSlots), benchmark::Counter::kIsIterationInvariantRate);
    std::free(hdr);
    ::close(fd);
    std::remove(path.c_str());
}
BENCHMARK(BM_HeaderReadsQD1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
