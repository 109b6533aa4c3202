#include "report.hpp"

#include "workloads.hpp"

namespace sim {

namespace {

std::string pct(double f) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f%%", 100.0 * f);
    return b;
}

std::string published(const std::string &cls) {
    double p = published_hit_rate(cls);
    if (p < 0) return "-";
    char b[32];
    std::snprintf(b, sizeof b, "%.0f%%", 100.0 * p);
    return b;
}

double mean_latency(const ClassStats &c) { return c.completed ? c.latency_sum / double(c.completed) : 0.0; }

void row(FILE *out, const ClassStats &p, const ClassStats *c) {
    char contig_latency[32] = "-";
    if (c) std::snprintf(contig_latency, sizeof contig_latency, "%.2f", mean_latency(*c));
    std::fprintf(out, "%-11s %9lld %12lld %9s %9s %8s %8s %8lld %8lld %9.2f %9s\n", p.name.c_str(),
                 (long long)p.requests, (long long)p.prompt_tokens, pct(p.hit_rate()).c_str(), published(p.name).c_str(),
                 pct(p.waste()).c_str(), c ? pct(c->waste()).c_str() : "-", (long long)p.preemptions,
                 (long long)p.rejected, mean_latency(p), contig_latency);
}

}  // namespace

void print_report(FILE *out, const std::string &title, const SimConfig &cfg, const SimResult &paged,
                  const SimResult *contiguous) {
    std::fprintf(out, "%s\n", title.c_str());
    std::fprintf(out,
                 "engine: %lld blocks x %d tokens (%lld slots), max_len %lld, max_seqs %d, %lld prefill tokens/step, "
                 "step %.0f ms, prefix caching %s\n\n",
                 (long long)cfg.num_blocks, cfg.block_size, (long long)(cfg.num_blocks * cfg.block_size),
                 (long long)cfg.max_len, cfg.max_seqs, (long long)cfg.max_batched_tokens, cfg.step_s * 1000.0,
                 cfg.prefix_caching ? "on" : "off");
    std::fprintf(out, "%-11s %9s %12s %9s %9s %8s %8s %8s %8s %9s %9s\n", "class", "requests", "prompt_tok", "hit_rate",
                 "published", "waste", "contig", "preempt", "rejected", "lat_s", "contig_s");
    for (size_t i = 0; i < paged.classes.size(); i++)
        row(out, paged.classes[i], contiguous ? &contiguous->classes[i] : nullptr);
    if (paged.classes.size() > 1) row(out, paged.total, contiguous ? &contiguous->total : nullptr);
    std::fprintf(out,
                 "\n(hit_rate: prompt tokens served from the prefix cache at first admission; waste: slots reserved "
                 "but not holding a token,\n time-averaged over the run, libkvc paged vs a contiguous max_len "
                 "reservation on the same trace; lat_s: mean arrival-to-finish, simulated seconds)\n\n");
    auto thr = [](const SimResult &r) { return r.sim_seconds > 0 ? double(r.total.completed) / r.sim_seconds : 0.0; };
    std::fprintf(out,
                 "paged (libkvc):  %.1f requests/s, %.0f tokens/s (simulated time), mean %.1f running (peak %lld), block "
                 "utilization mean %s peak %s,\n                 %lld forks, %lld COW copies, %lld evictions, "
                 "%lld preemptions (%lld tokens recomputed), pool hit rate incl. re-admissions %s\n",
                 thr(paged), paged.sim_seconds > 0 ? double(paged.total.generated_tokens) / paged.sim_seconds : 0.0,
                 paged.mean_running, (long long)paged.peak_running, pct(paged.mean_utilization).c_str(),
                 pct(paged.peak_utilization).c_str(), (long long)paged.forks, (long long)paged.cow_copies,
                 (long long)paged.evictions, (long long)paged.total.preemptions,
                 (long long)paged.total.recomputed_tokens, pct(paged.pool_hit_rate).c_str());
    if (contiguous) {
        std::fprintf(out,
                     "contiguous:      %.1f requests/s, %.0f tokens/s (simulated time), mean %.1f running (peak %lld), "
                     "reserved mean %s peak %s\n",
                     thr(*contiguous),
                     contiguous->sim_seconds > 0 ? double(contiguous->total.generated_tokens) / contiguous->sim_seconds : 0.0,
                     contiguous->mean_running, (long long)contiguous->peak_running,
                     pct(contiguous->mean_utilization).c_str(), pct(contiguous->peak_utilization).c_str());
    }
    std::fprintf(out, "simulator speed: %lld requests through libkvc in %.2f s (%.0f requests/s wall, %lld steps)\n",
                 (long long)paged.total.requests, paged.wall_seconds,
                 paged.wall_seconds > 0 ? double(paged.total.requests) / paged.wall_seconds : 0.0, (long long)paged.steps);
}

}  // namespace sim
