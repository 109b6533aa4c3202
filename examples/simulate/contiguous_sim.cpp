#include "contiguous_sim.hpp"

#include <chrono>
#include <cstdint>
#include <vector>

namespace sim {

namespace {

struct Slot {
    size_t req;
    int64_t tokens;
    int64_t generated;
    int64_t admitted_step;
};

}  // namespace

// Same engine model as run_paged, but a sequence holds max_len slots from admission to completion.
// All regions have the same size, so there is no external fragmentation: the only waste is the
// reservation itself, which is what the paper's "Orca (Max)" baseline loses.
SimResult run_contiguous(const std::vector<TraceRequest> &trace, const SimConfig &cfg) {
    auto start = std::chrono::steady_clock::now();
    ClassIndex ci = index_classes(trace);
    SimResult res;
    res.classes.resize(ci.names.size());
    for (size_t i = 0; i < ci.names.size(); i++) res.classes[i].name = ci.names[i];
    for (size_t i = 0; i < trace.size(); i++) res.classes[size_t(ci.of_request[i])].requests++;
    auto cls = [&](size_t req) -> ClassStats & { return res.classes[size_t(ci.of_request[req])]; };

    const int64_t capacity = cfg.num_blocks * cfg.block_size;
    const int64_t regions = capacity / cfg.max_len;  // sequences that fit at once
    std::vector<int32_t> remaining(trace.size());
    for (size_t i = 0; i < trace.size(); i++) remaining[i] = trace[i].n;
    std::vector<Slot> running;
    size_t next = 0, done = 0;
    double now = 0, util_sum = 0, running_sum = 0;
    int64_t step = 0;
    while (done < trace.size()) {
        if (running.empty() && next < trace.size() && trace[next].t > now) now = trace[next].t;
        int64_t budget = cfg.max_batched_tokens;
        bool first = true;
        while (next < trace.size() && trace[next].t <= now && (first || budget > 0)) {
            const TraceRequest &r = trace[next];
            int64_t plen = r.prompt_len();
            if (plen + r.output_len > cfg.max_len || r.n > regions) {
                cls(next).rejected++;
                done++;
                next++;
                continue;
            }
            if (int64_t(running.size()) + r.n > cfg.max_seqs || int64_t(running.size()) + r.n > regions) break;
            ClassStats &c = cls(next);
            c.prompt_tokens += plen;  // no prefix sharing: every prompt token is computed
            budget -= plen;
            first = false;
            for (int32_t s = 0; s < r.n; s++) running.push_back({next, plen, 0, step});
            next++;
        }
        if (running.empty() && next < trace.size() && trace[next].t <= now)
            break;  // cannot happen: an admissible request always fits an empty pool
        size_t w = 0;
        for (size_t i = 0; i < running.size(); i++) {
            Slot &s = running[i];
            if (s.admitted_step != step) {
                s.tokens++;
                s.generated++;
                cls(s.req).generated_tokens++;
                if (s.generated == trace[s.req].output_len) {
                    if (--remaining[s.req] == 0) {
                        ClassStats &c = cls(s.req);
                        c.completed++;
                        c.latency_sum += now - trace[s.req].t;
                        done++;
                    }
                    continue;
                }
            }
            running[w++] = s;
        }
        running.resize(w);
        for (const Slot &s : running) {
            ClassStats &c = cls(s.req);
            c.slot_steps_allocated += double(cfg.max_len);
            c.slot_steps_unused += double(cfg.max_len - s.tokens);
        }
        double util = double(int64_t(running.size()) * cfg.max_len) / double(capacity);
        util_sum += util;
        if (util > res.peak_utilization) res.peak_utilization = util;
        running_sum += double(running.size());
        if (int64_t(running.size()) > res.peak_running) res.peak_running = int64_t(running.size());
        step++;
        now += cfg.step_s;
    }
    res.steps = step;
    res.sim_seconds = now;
    res.mean_utilization = step ? util_sum / double(step) : 0;
    res.mean_running = step ? running_sum / double(step) : 0;
    ClassStats &t = res.total;
    t.name = "total";
    for (const ClassStats &c : res.classes) {
        t.requests += c.requests;
        t.completed += c.completed;
        t.rejected += c.rejected;
        t.prompt_tokens += c.prompt_tokens;
        t.generated_tokens += c.generated_tokens;
        t.slot_steps_allocated += c.slot_steps_allocated;
        t.slot_steps_unused += c.slot_steps_unused;
        t.latency_sum += c.latency_sum;
    }
    res.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return res;
}

}  // namespace sim
