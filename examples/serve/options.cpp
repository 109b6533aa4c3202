#include "options.hpp"

#include <kvc/kvc.h>

#include "flags.hpp"

#include <cstdint>

namespace serve {

const char *const kUsage =
    "usage: kvc_serve [options]\n"
    "\n"
    "Serves a synthetic workload with a tiny transformer whose KV cache and attention go through\n"
    "libkvc, checks every generated token against a dense reference, and plots pool occupancy.\n"
    "\n"
    "  --requests N       requests to serve (default 40)\n"
    "  --seed S           weights, workload and sampling seed (default 1)\n"
    "  --blocks N         KV blocks in the pool (default 64: small enough that preemption happens)\n"
    "  --block-size N     tokens per block (default 16)\n"
    "  --host-blocks N    host-tier blocks for swap preemption when libkvc has tiers (default 128;\n"
    "                     0 = preempt by recompute only; each pool's under --hybrid=two-pools)\n"
    "  --backend B        cpu (default) or cuda (libkvc's CUDA backend: KV cache and attention on the\n"
    "                     GPU, head_dim 64; exits 77 with SKIPPED when there is no usable GPU)\n"
    "  --kv-dtype T       f32 (default) or f16 KV cache\n"
    "  --speculate K      speculative decoding: each decoding sample proposes up to K draft tokens by\n"
    "                     n-gram prompt lookup in its own history, verified in one pass, rejected\n"
    "                     ones truncated (default 0 = off; at most 32)\n"
    "  --window W         sliding-window attention: every layer's query at position p sees keys\n"
    "                     p - W + 1 .. p, and the pool releases the blocks no query can see any more\n"
    "                     (kvc_pool_set_sliding_window); the reference applies the same window\n"
    "                     (default 0 = full attention)\n"
    "  --hybrid           hybrid model (Gemma 2 / GPT-OSS style): layers 0, 2 use the sliding window\n"
    "                     of --window W (required), layers 1, 3 full attention; served from one\n"
    "                     hybrid pool (kvc_pool_create_hybrid: a SLIDING and a FULL group, --blocks\n"
    "                     pages, one batch per group; swap, host tier, --tp, CUDA; no --disk-blocks yet)\n"
    "  --hybrid=two-pools the former recipe: two libkvc pools, L (windowed, releases blocks) and G\n"
    "                     (global), --blocks blocks each (swap, tiers incl. disk, --tp, CUDA)\n"
    "  --window-blocks N  with --hybrid=two-pools: blocks of pool L instead of --blocks (pool L needs about\n"
    "                     W / block size + 2 per decoding sequence, so the same memory buys G more)\n"
    "  --tp N             tensor parallelism: every pool's KV heads sharded over N ranks (N must\n"
    "                     divide the model's 2 KV heads), each rank a libkvc pool of the same size\n"
    "                     holding its heads and given the same calls; every decision (statuses,\n"
    "                     block tables, slot mappings, counters) is compared across ranks (default 1)\n"
    "  --disk-blocks N    a disk tier of N blocks below each pool's host tier (kvc_tier_attach_disk;\n"
    "                     needs --host-blocks > 0): host-tier victims spill to the file and come back\n"
    "                     on prefix re-hits (default 0 = none)\n"
    "  --disk-file PATH   the disk tier's file (default build/serve-kv.disk; PATH.L / PATH.G under\n"
    "                     --hybrid, .rankN appended under --tp); left in place after the run\n"
    "  --disk-persistent  attach the disk tier with KVC_DISK_PERSISTENT: the blocks a file already\n"
    "                     holds (an earlier run, or the pools before --restart-at) are found again\n"
    "  --restart-at S     restart the server at engine step S: running and swapped-out samples are\n"
    "                     freed (recomputed later), the pools destroyed and created again, the disk\n"
    "                     tier re-attached to the same file (warm with --disk-persistent, else cold)\n"
    "  --flush-before-restart  before the restart, write every cached block to the disk tier\n"
    "                     (kvc_tier_flush), so the restart also finds the blocks that were on the\n"
    "                     device or in the host tier\n"
    "  --reset-before-restart  kvc_prefix_cache_reset before the restart (as after a weight update:\n"
    "                     the disk file forgets its blocks, so the restart recovers none)\n"
    "  --max-new-tokens N each request generates between min(12, N) and N tokens (default 40; at most\n"
    "                     800): long outputs run sequences far past a --window\n"
    "  --temperature T    sampling temperature, seeded per sample (default 0.8; 0 = greedy)\n"
    "  --check-every K    check every K-th finished sample against the reference (default 1 = all)\n"
    "  --svg PATH         where the occupancy plot goes (default build/serve.svg)\n"
    "  --quiet            no progress bar\n"
    "  --corrupt-kv-at S  self-test: at engine step S, negate the KV of one block of a running\n"
    "                     sequence behind libkvc's back; the correctness check must fail the run\n"
    "  --corrupt-kv-pool P with --hybrid: corrupt a page of the SLIDING group (L, default) or of the\n"
    "                     FULL group (G); with --hybrid=two-pools a block of pool L or G\n"
    "  --tp-skew-at S     self-test (with --tp 2 or more): from engine step S the last rank alone\n"
    "                     allocates one extra block; the rank comparison must fail the run\n"
    "  --help             this text\n";

bool parse_options(int argc, char **argv, Options *o, std::string *err) {
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : nullptr;
        int64_t v = 0;
        auto need_value = [&]() {
            if (!val) *err = a + " needs a value";
            return val != nullptr;
        };
        if (a == "--help" || a == "-h") {
            o->help = true;
        } else if (a == "--quiet") {
            o->quiet = true;
        } else if (a == "--hybrid" || a == "--hybrid=pool") {
            o->hybrid = true;
            o->two_pools = false;
        } else if (a == "--hybrid=two-pools") {
            o->hybrid = true;
            o->two_pools = true;
        } else if (a == "--disk-persistent") {
            o->disk_persistent = true;
        } else if (a == "--reset-before-restart") {
            o->reset_before_restart = true;
        } else if (a == "--flush-before-restart") {
            o->flush_before_restart = true;
        } else if (a == "--disk-blocks") {
            if (!flags::parse_int_flag(a, val, 0, INT32_MAX, &o->disk_blocks, err)) return false;
            i++;
        } else if (a == "--disk-file") {
            if (!need_value()) return false;
            o->disk_file = val;
            i++;
            if (o->disk_file.empty()) {
                *err = "--disk-file: empty path";
                return false;
            }
        } else if (a == "--restart-at") {
            if (!flags::parse_int_flag(a, val, 0, INT64_MAX, &o->restart_at, err)) return false;
            i++;
        } else if (a == "--corrupt-kv-pool") {
            if (!need_value()) return false;
            o->corrupt_kv_pool = val;
            i++;
            if (o->corrupt_kv_pool != "L" && o->corrupt_kv_pool != "G") {
                *err = "--corrupt-kv-pool: '" + o->corrupt_kv_pool + "' is not L or G";
                return false;
            }
        } else if (a == "--requests") {
            if (!flags::parse_int_flag(a, val, 1, 100000, &v, err)) return false;
            o->requests = int32_t(v);
            i++;
        } else if (a == "--seed") {
            if (!flags::parse_int_flag(a, val, 0, INT64_MAX, &v, err)) return false;
            o->seed = uint64_t(v);
            i++;
        } else if (a == "--blocks") {
            if (!flags::parse_int_flag(a, val, 1, 1 << 24, &o->blocks, err)) return false;
            i++;
        } else if (a == "--window-blocks") {
            if (!flags::parse_int_flag(a, val, 1, 1 << 24, &o->window_blocks, err)) return false;
            i++;
        } else if (a == "--block-size") {
            if (!flags::parse_int_flag(a, val, 1, 256, &v, err)) return false;
            o->block_size = int32_t(v);
            i++;
        } else if (a == "--check-every") {
            if (!flags::parse_int_flag(a, val, 1, 1 << 30, &v, err)) return false;
            o->check_every = int32_t(v);
            i++;
        } else if (a == "--host-blocks") {
            if (!flags::parse_int_flag(a, val, 0, 1 << 24, &o->host_blocks, err)) return false;
            i++;
        } else if (a == "--speculate") {
            if (!flags::parse_int_flag(a, val, 0, 32, &v, err)) return false;
            o->speculate = int32_t(v);
            i++;
        } else if (a == "--window") {
            if (!flags::parse_int_flag(a, val, 0, 1 << 20, &v, err)) return false;
            o->window = int32_t(v);
            i++;
        } else if (a == "--tp") {
            if (!flags::parse_int_flag(a, val, 1, 64, &v, err)) return false;
            o->tp = int32_t(v);
            i++;
        } else if (a == "--tp-skew-at") {
            if (!flags::parse_int_flag(a, val, 0, INT64_MAX, &o->tp_skew_at, err)) return false;
            i++;
        } else if (a == "--max-new-tokens") {
            if (!flags::parse_int_flag(a, val, 1, 800, &v, err)) return false;
            o->max_new_tokens = int32_t(v);
            i++;
        } else if (a == "--temperature") {
            if (!flags::parse_double_flag(a, val, 0.0, 100.0, &o->temperature, err)) return false;
            i++;
        } else if (a == "--corrupt-kv-at") {
            if (!flags::parse_int_flag(a, val, 0, INT64_MAX, &o->corrupt_kv_at, err)) return false;
            i++;
        } else if (a == "--backend") {
            if (!need_value()) return false;
            o->backend = val;
            i++;
            if (o->backend != "cpu" && o->backend != "cuda") {
                *err = "--backend: '" + o->backend + "' is not cpu or cuda";
                return false;
            }
        } else if (a == "--kv-dtype") {
            if (!need_value()) return false;
            std::string t = val;
            i++;
            if (t == "f32") o->kv_dtype = KVC_DTYPE_F32;
            else if (t == "f16") o->kv_dtype = KVC_DTYPE_F16;
            else {
                *err = "--kv-dtype: '" + t + "' is not f32 or f16";
                return false;
            }
        } else if (a == "--svg") {
            if (!need_value()) return false;
            o->svg = val;
            i++;
            if (o->svg.empty()) {
                *err = "--svg: empty path";
                return false;
            }
        } else {
            *err = "unknown flag '" + a + "'";
            return false;
        }
    }
    if (o->hybrid && o->window <= 0) {
        *err = "--hybrid needs --window W > 0 (the window of its sliding-window layers)";
        return false;
    }
    if (o->window_blocks > 0 && !o->two_pools) {
        *err = "--window-blocks needs --hybrid=two-pools (otherwise there is one pool: --blocks)";
        return false;
    }
    // What hybrid pools do not do yet (kvc.h, "Hybrid models"): the disk tier.
    if (o->hybrid && !o->two_pools && o->disk_blocks > 0) {
        *err = "--hybrid (one hybrid pool) does not take --disk-blocks yet (libkvc's disk tier does not serve "
               "hybrid pools yet): use --hybrid=two-pools";
        return false;
    }
    if (o->tp_skew_at >= 0 && o->tp < 2) {
        *err = "--tp-skew-at needs --tp 2 or more (it makes one rank differ from the others)";
        return false;
    }
    if (o->disk_blocks > 0 && o->host_blocks == 0) {
        *err = "--disk-blocks needs a host tier above it: --host-blocks > 0";
        return false;
    }
    if (o->disk_persistent && o->disk_blocks == 0) {
        *err = "--disk-persistent needs --disk-blocks N > 0";
        return false;
    }
    if (o->reset_before_restart && o->restart_at < 0) {
        *err = "--reset-before-restart needs --restart-at S";
        return false;
    }
    if (o->flush_before_restart && (o->restart_at < 0 || o->disk_blocks == 0)) {
        *err = "--flush-before-restart needs --restart-at S and --disk-blocks N > 0";
        return false;
    }
    if (!o->corrupt_kv_pool.empty() && !o->hybrid) {
        *err = "--corrupt-kv-pool needs --hybrid (without it there is one pool)";
        return false;
    }
    return true;
}

}  // namespace serve
