// kvc_simulate: replays workload traces through libkvc's block manager (no attention math) and
// compares memory waste with a contiguous max-length allocator. See README.md.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "contiguous_sim.hpp"
#include "flags.hpp"
#include "paged_sim.hpp"
#include "report.hpp"
#include "trace.hpp"
#include "workloads.hpp"

namespace {

const char *kUsage =
    "usage: kvc_simulate [--workload chat|multiturn|rag|fewshot|unique|all | --trace FILE] [options]\n"
    "\n"
    "Workload (one of):\n"
    "  --workload NAME         generate a synthetic trace of that class (default all = the five mixed)\n"
    "  --trace FILE            replay a JSON-lines trace (format: examples/simulate/README.md)\n"
    "  --requests N            requests to generate (default 10000)\n"
    "  --seed S                generator and random-token seed (default 1)\n"
    "  --rate R                arrivals per simulated second (default 40)\n"
    "  --emit-trace FILE       also write the generated trace to FILE\n"
    "  --emit-only             write the trace (needs --emit-trace) and do not simulate\n"
    "Engine:\n"
    "  --blocks N              paged pool blocks (default 28000: Llama-3-8B KV on an 80 GB GPU);\n"
    "                          the contiguous baseline gets the same token slots\n"
    "  --block-size N          tokens per block (default 16)\n"
    "  --max-len N             longest sequence; the contiguous baseline reserves this (default 4096)\n"
    "  --max-seqs N            running sequences at most (default 256)\n"
    "  --max-batched-tokens N  prefill tokens admitted per step (default 8192)\n"
    "  --step-ms MS            simulated duration of one engine step (default 20)\n"
    "  --no-prefix-cache       turn libkvc's prefix cache off\n"
    "  --no-baseline           skip the contiguous baseline\n"
    "  --help                  this text\n";

int usage_error(const std::string &msg) {
    std::fprintf(stderr, "kvc_simulate: %s\n\n%s", msg.c_str(), kUsage);
    return 2;
}

}  // namespace

int main(int argc, char **argv) {
    sim::SimConfig cfg;
    std::string workload = "all", trace_path, emit_path;
    int64_t requests = 10000, tmp = 0;
    double rate = 40.0, step_ms = 20.0;
    bool emit_only = false, baseline = true, workload_given = false;
    std::string err;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : nullptr;
        auto int_flag = [&](int64_t lo, int64_t hi, int64_t *out) {
            bool ok = flags::parse_int_flag(a, val, lo, hi, out, &err);
            i++;
            return ok;
        };
        if (a == "--help" || a == "-h") {
            std::fputs(kUsage, stdout);
            return 0;
        } else if (a == "--workload") {
            if (!val) return usage_error("--workload needs a value");
            workload = val;
            workload_given = true;
            i++;
        } else if (a == "--trace") {
            if (!val) return usage_error("--trace needs a file");
            trace_path = val;
            i++;
        } else if (a == "--emit-trace") {
            if (!val) return usage_error("--emit-trace needs a file");
            emit_path = val;
            i++;
        } else if (a == "--requests") {
            if (!int_flag(1, 100000000, &requests)) return usage_error(err);
        } else if (a == "--seed") {
            if (!int_flag(0, INT64_MAX, &tmp)) return usage_error(err);
            cfg.seed = uint64_t(tmp);
        } else if (a == "--rate") {
            if (!flags::parse_double_flag(a, val, 1e-6, 1e9, &rate, &err)) return usage_error(err);
            i++;
        } else if (a == "--blocks") {
            if (!int_flag(1, int64_t(1) << 31, &cfg.num_blocks)) return usage_error(err);
        } else if (a == "--block-size") {
            if (!int_flag(1, 4096, &tmp)) return usage_error(err);
            cfg.block_size = int32_t(tmp);
        } else if (a == "--max-len") {
            if (!int_flag(1, int64_t(1) << 30, &cfg.max_len)) return usage_error(err);
        } else if (a == "--max-seqs") {
            if (!int_flag(1, 1 << 20, &tmp)) return usage_error(err);
            cfg.max_seqs = int32_t(tmp);
        } else if (a == "--max-batched-tokens") {
            if (!int_flag(1, int64_t(1) << 40, &cfg.max_batched_tokens)) return usage_error(err);
        } else if (a == "--step-ms") {
            if (!flags::parse_double_flag(a, val, 1e-3, 1e6, &step_ms, &err)) return usage_error(err);
            i++;
        } else if (a == "--no-prefix-cache") {
            cfg.prefix_caching = false;
        } else if (a == "--no-baseline") {
            baseline = false;
        } else if (a == "--emit-only") {
            emit_only = true;
        } else {
            return usage_error("unknown flag '" + a + "'");
        }
    }
    cfg.step_s = step_ms / 1000.0;
    if (!trace_path.empty() && workload_given) return usage_error("--trace and --workload are exclusive");
    if (!trace_path.empty() && !emit_path.empty()) return usage_error("--emit-trace only applies to generated workloads");
    if (emit_only && emit_path.empty()) return usage_error("--emit-only needs --emit-trace FILE");

    std::vector<sim::TraceRequest> trace;
    std::string title;
    if (!trace_path.empty()) {
        if (!sim::read_trace_file(trace_path, &trace, &err)) {
            std::fprintf(stderr, "kvc_simulate: %s\n", err.c_str());
            return 1;
        }
        title = "kvc_simulate: trace " + trace_path + ", " + std::to_string(trace.size()) + " requests";
    } else {
        if (!sim::generate_workload(workload, requests, cfg.seed, rate, cfg.max_len, &trace, &err))
            return usage_error(err);
        title = "kvc_simulate: workload " + workload + ", " + std::to_string(trace.size()) + " requests, seed " +
                std::to_string(cfg.seed) + ", " + std::to_string(rate).substr(0, std::to_string(rate).find('.') + 2) +
                " arrivals/s";
        if (!emit_path.empty()) {
            if (!sim::write_trace_file(emit_path, trace, &err)) {
                std::fprintf(stderr, "kvc_simulate: %s\n", err.c_str());
                return 1;
            }
            std::printf("trace written to %s (%zu requests)\n", emit_path.c_str(), trace.size());
            if (emit_only) return 0;
        }
    }
    try {
        sim::SimResult paged = sim::run_paged(trace, cfg);
        sim::SimResult contiguous;
        if (baseline) contiguous = sim::run_contiguous(trace, cfg);
        sim::print_report(stdout, title, cfg, paged, baseline ? &contiguous : nullptr);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "kvc_simulate: %s\n", e.what());
        return 1;
    }
    return 0;
}
