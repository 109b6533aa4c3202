// kvc_serve's command line.
#pragma once

#include <cstdint>
#include <string>

namespace serve {

struct Options {
    int32_t requests = 40;
    uint64_t seed = 1;
    int64_t blocks = 64;
    int64_t window_blocks = 0;     // --hybrid: pool L's blocks (0 = --blocks)
    int32_t block_size = 16;
    std::string backend = "cpu";
    std::string svg = "build/serve.svg";
    int32_t kv_dtype = 0;  // KVC_DTYPE_F32
    int32_t check_every = 1;
    int64_t host_blocks = 128;
    int64_t corrupt_kv_at = -1;
    int32_t speculate = 0;
    int32_t window = 0;            // sliding-window attention in tokens; 0 = full attention
    bool hybrid = false;           // window only in the even layers, full attention in the odd ones;
                                   // needs --window. One hybrid pool (kvc_pool_create_hybrid: a
                                   // SLIDING and a FULL group), or with --hybrid=two-pools the former
                                   // recipe: pool L (windowed) and pool G (global)
    bool two_pools = false;        // --hybrid=two-pools
    std::string corrupt_kv_pool;   // --hybrid: "L" or "G" (default L)
    int32_t tp = 1;                // tensor-parallel ranks (a divisor of the model's KV heads)
    int64_t tp_skew_at = -1;       // self-test: the last rank alone takes a block at this step
    int64_t disk_blocks = 0;       // disk tier below each host tier; 0 = none
    std::string disk_file = "build/serve-kv.disk";
    bool disk_persistent = false;  // KVC_DISK_PERSISTENT at every attach
    int64_t restart_at = -1;       // restart the server (new pools) at this engine step
    bool reset_before_restart = false;
    bool flush_before_restart = false;
    int32_t max_new_tokens = 40;   // each request generates min(12, N)..N tokens
    double temperature = 0.8;
    bool quiet = false;
    bool help = false;
};

extern const char *const kUsage;

// Parses argv. Returns false with *err naming the bad flag or value.
bool parse_options(int argc, char **argv, Options *out, std::string *err);

}  // namespace serve
