// Configuration and results shared by the paged (libkvc) and the contiguous (baseline) simulators.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace.hpp"

namespace sim {

// The engine model both simulators share: iteration-level (continuous) batching. Each step admits
// waiting requests (FIFO) within a prefill-token budget and a sequence cap, then every running
// sequence decodes one token. Steps last step_s simulated seconds; arrivals come from the trace.
struct SimConfig {
    int32_t block_size = 16;
    // 28000 blocks x 16 tokens: Llama-3-8B (128 KiB of fp16 KV per token) on an 80 GB H100 with
    // 0.9 utilization and 16 GB of weights leaves ~56 GB = ~28000 blocks of 2 MiB.
    int64_t num_blocks = 28000;      // paged pool size; the contiguous baseline gets the same slots
    int64_t max_len = 4096;          // longest sequence; the contiguous allocator reserves this much
    int32_t max_seqs = 256;          // running sequences at most
    int64_t max_batched_tokens = 8192;  // prefill tokens admitted per step (at least one request)
    double step_s = 0.02;
    double watermark = 0.01;
    bool prefix_caching = true;
    uint64_t seed = 1;
};

// Per workload class (and the total row).
struct ClassStats {
    std::string name;
    int64_t requests = 0;         // in the trace
    int64_t completed = 0;
    int64_t rejected = 0;         // could never fit (prompt + output > max_len or larger than the pool)
    int64_t prompt_tokens = 0;    // of first admissions
    int64_t hit_tokens = 0;       // of those, served from the prefix cache
    int64_t generated_tokens = 0;
    int64_t preemptions = 0;      // recompute preemptions (paged only)
    int64_t recomputed_tokens = 0;
    double slot_steps_allocated = 0;  // sum over steps of slots held by this class's sequences
    double slot_steps_unused = 0;     // ... of which reserved but not holding a token
    double latency_sum = 0;           // arrival -> completion, simulated seconds

    double hit_rate() const { return prompt_tokens ? double(hit_tokens) / double(prompt_tokens) : 0.0; }
    double waste() const { return slot_steps_allocated > 0 ? slot_steps_unused / slot_steps_allocated : 0.0; }
};

struct SimResult {
    std::vector<ClassStats> classes;  // in order of first appearance in the trace
    ClassStats total;
    int64_t steps = 0;
    double sim_seconds = 0;       // simulated time until the last request completed
    double wall_seconds = 0;      // real time the simulation took
    double mean_running = 0;      // running sequences, averaged over steps
    int64_t peak_running = 0;
    double mean_utilization = 0;  // used blocks / total (paged) or reserved slots / total (contiguous)
    double peak_utilization = 0;
    int64_t cow_copies = 0;       // paged only
    int64_t evictions = 0;        // paged only
    int64_t forks = 0;            // paged only
    double pool_hit_rate = 0;     // the pool's own counter (includes re-admissions after preemption)
};

// Index of each request's class in SimResult::classes (built once per trace).
struct ClassIndex {
    std::vector<std::string> names;
    std::vector<int32_t> of_request;
};
ClassIndex index_classes(const std::vector<TraceRequest> &trace);

// Per-request seed for Random segments and outputs (same in both simulators).
uint64_t request_seed(uint64_t run_seed, size_t request_index);

}  // namespace sim
