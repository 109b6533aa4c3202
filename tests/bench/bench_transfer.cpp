// KV transfer benchmark (lib/transfer): a child process exports a prefix of --blocks blocks, the
// parent imports it --reps times (the importer's cache reset between imports) and reports the
// median import time and throughput. tests/bench/bench_transfer.sh runs it next to ucx_perftest
// over the same transport (the goal: >= 80% of ucp_get's bandwidth at the block size).
//   bench_transfer [--transports tcp] [--layers 32] [--blocks 64] [--reps 20] [--scatter]
// Layout: block 16 tokens, 8 KV heads, head dim 128, fp16; --layers 32 gives Llama-3-8B's
// 2 MiB blocks, --layers 1 64 KiB ones. --scatter: the exported blocks are every other block of
// the exporter's pool (one get per block, as after churn) instead of one contiguous run.
// Output: key=value lines.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kvc/kvc.h"

#define CHECK(call)                                                                                 \
    do {                                                                                            \
        kvc_status st_ = (call);                                                                    \
        if (st_ != KVC_OK) {                                                                        \
            std::fprintf(stderr, "%s failed: %s (%s)\n", #call, kvc_status_str(st_), kvc_last_error()); \
            std::exit(2);                                                                           \
        }                                                                                           \
    } while (0)

namespace {

constexpr int kBs = 16;

kvc_pool *make_pool(int layers, int64_t blocks) {
    kvc_pool_config c;
    CHECK(kvc_pool_config_default(&c));
    c.block_size = kBs;
    c.num_layers = layers;
    c.num_kv_heads = 8;
    c.head_dim = 128;
    c.kv_dtype = KVC_DTYPE_F16;
    c.num_blocks = blocks;
    c.backend = KVC_BACKEND_CPU;
    c.watermark = 0;
    kvc_pool *p = nullptr;
    CHECK(kvc_pool_create(&c, &p));
    return p;
}

kvc_xfer_agent *make_agent(kvc_pool *p, const char *tls) {
    kvc_xfer_config xc;
    CHECK(kvc_xfer_config_default(&xc));
    xc.transports = tls;
    xc.model_identity = "bench";
    xc.lease_ms = 600000;
    xc.timeout_ms = 120000;
    kvc_xfer_agent *a = nullptr;
    CHECK(kvc_xfer_agent_create(p, &xc, &a));
    return a;
}

std::vector<int32_t> prompt(int64_t n, int32_t seed) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) t[size_t(i)] = int32_t(seed * 100003 + i);
    return t;
}

// The child: exports `blocks` blocks and writes the descriptor to fd, then waits for EOF on go.
[[noreturn]] void exporter(const char *tls, int layers, int64_t blocks, bool scatter, int fd, int go) {
    kvc_pool *p = make_pool(layers, 2 * blocks + 4);
    kvc_xfer_agent *a = make_agent(p, tls);
    const std::vector<int32_t> t = prompt(blocks * kBs, 1), other = prompt(blocks * kBs, 2);
    if (scatter) {
        // Two sequences filled a block at a time in turn: the prompt's blocks are every other one.
        CHECK(kvc_alloc(p, 1, t.data(), kBs, nullptr, nullptr));
        CHECK(kvc_alloc(p, 2, other.data(), kBs, nullptr, nullptr));
        for (int64_t b = 1; b < blocks; ++b) {
            CHECK(kvc_append(p, 1, t.data() + b * kBs, kBs, 0, nullptr));
            CHECK(kvc_append(p, 2, other.data() + b * kBs, kBs, 0, nullptr));
        }
    } else {
        CHECK(kvc_alloc(p, 1, t.data(), blocks * kBs, nullptr, nullptr));
    }
    // Some bytes in the blocks (the importer checks the first block's).
    kvc_storage_info si{};
    si.struct_size = sizeof si;
    CHECK(kvc_storage_get_info(p, &si));
    std::vector<int32_t> table(size_t(blocks) + 1);
    int64_t nb = 0;
    CHECK(kvc_seq_block_table(p, 1, table.data(), int64_t(table.size()), &nb));
    std::vector<unsigned char> bytes(size_t(si.block_stride));
    for (int64_t b = 0; b < nb; ++b) {
        for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = (unsigned char)(i * 7 + size_t(b));
        CHECK(kvc_storage_copy_blocks(p, &table[size_t(b)], 1, bytes.data(), 0));
    }
    uint64_t ex = 0;
    CHECK(kvc_xfer_export_seq(a, 1, 0, &ex, nullptr));
    int64_t len = 0;
    CHECK(kvc_xfer_export_descriptor(a, ex, nullptr, 0, &len));
    std::vector<uint8_t> d(static_cast<size_t>(len));
    CHECK(kvc_xfer_export_descriptor(a, ex, d.data(), len, &len));
    if (write(fd, &len, sizeof len) != ssize_t(sizeof len) || write(fd, d.data(), size_t(len)) != ssize_t(len)) _exit(3);
    close(fd);
    char c;
    while (read(go, &c, 1) > 0) {
    }
    kvc_xfer_agent_destroy(a);
    kvc_pool_destroy(p);
    _exit(0);
}

}  // namespace

int main(int argc, char **argv) {
    const char *tls = "tcp";
    int layers = 32, reps = 20;
    int64_t blocks = 64;
    bool scatter = false;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--transports") && i + 1 < argc) tls = argv[++i];
        else if (!std::strcmp(argv[i], "--layers") && i + 1 < argc) layers = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--blocks") && i + 1 < argc) blocks = std::atoll(argv[++i]);
        else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--scatter")) scatter = true;
        else {
            std::fprintf(stderr, "usage: %s [--transports TLS] [--layers L] [--blocks N] [--reps R] [--scatter]\n",
                         argv[0]);
            return 2;
        }
    }
    int32_t avail = 0;
    CHECK(kvc_xfer_available(&avail));
    if (!avail) {
        std::printf("skipped: UCX not available\n");
        return 77;
    }
    int out[2], go[2];
    if (pipe(out) != 0 || pipe(go) != 0) return 2;
    const pid_t pid = fork();
    if (pid == 0) {
        close(out[0]);
        close(go[1]);
        exporter(tls, layers, blocks, scatter, out[1], go[0]);
    }
    close(out[1]);
    close(go[0]);
    int64_t len = 0;
    if (read(out[0], &len, sizeof len) != ssize_t(sizeof len)) return 2;
    std::vector<uint8_t> desc(static_cast<size_t>(len));
    for (int64_t got = 0; got < len;) {
        const ssize_t r = read(out[0], desc.data() + got, size_t(len - got));
        if (r <= 0) return 2;
        got += r;
    }

    kvc_pool *p = make_pool(layers, blocks + 4);
    kvc_xfer_agent *a = make_agent(p, tls);
    kvc_storage_info si{};
    si.struct_size = sizeof si;
    CHECK(kvc_storage_get_info(p, &si));
    std::vector<double> secs;
    const int warmup = 3;
    for (int r = 0; r < warmup + reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        uint64_t op = 0;
        CHECK(kvc_xfer_import(a, desc.data(), len, nullptr, &op));
        kvc_xfer_import_result res{};
        res.struct_size = sizeof res;
        CHECK(kvc_xfer_op_wait(a, op, -1, &res));
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (res.blocks_pulled != blocks) {
            std::fprintf(stderr, "pulled %lld of %lld blocks\n", (long long)res.blocks_pulled, (long long)blocks);
            return 2;
        }
        if (r == 0) {  // the first block's bytes are the exporter's
            const std::vector<int32_t> t = prompt(blocks * kBs + 1, 1);
            CHECK(kvc_alloc(p, 1, t.data(), blocks * kBs + 1, nullptr, nullptr));
            int32_t b0 = -1;
            int64_t nb = 0;
            std::vector<int32_t> table(size_t(blocks) + 2);
            CHECK(kvc_seq_block_table(p, 1, table.data(), int64_t(table.size()), &nb));
            b0 = table[0];
            std::vector<unsigned char> got(size_t(si.block_stride));
            CHECK(kvc_storage_copy_blocks(p, &b0, 1, got.data(), 1));
            for (size_t i = 0; i < got.size(); ++i)
                if (got[i] != (unsigned char)(i * 7)) {
                    std::fprintf(stderr, "imported byte %zu differs\n", i);
                    return 1;
                }
            CHECK(kvc_free(p, 1));
        }
        CHECK(kvc_prefix_cache_reset(p));
        if (r >= warmup) secs.push_back(s);
    }
    std::sort(secs.begin(), secs.end());
    const double med = secs[secs.size() / 2];
    const double bytes = double(blocks) * double(si.block_stride);
    std::printf("transports=%s\nblock_bytes=%lld\nblocks=%lld\nscatter=%d\nreps=%d\n", tls, (long long)si.block_stride,
                (long long)blocks, scatter ? 1 : 0, reps);
    std::printf("import_ms_median=%.3f\nimport_ms_p10=%.3f\nimport_ms_p90=%.3f\n", med * 1e3,
                secs[secs.size() / 10] * 1e3, secs[secs.size() * 9 / 10] * 1e3);
    std::printf("import_MiBps=%.1f\n", bytes / med / 1048576.0);
    CHECK(kvc_xfer_agent_destroy(a));
    CHECK(kvc_pool_check(p));
    CHECK(kvc_pool_destroy(p));
    close(go[1]);
    int ws = 0;
    waitpid(pid, &ws, 0);
    return 0;
}
