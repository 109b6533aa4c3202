// Synthetic trace generators for the workload classes whose prefix-cache hit rates the seed article
// publishes (REFERENCES.md §3): chat with a shared 2K-token system prompt, multi-turn conversations,
// RAG over popular (Zipf) documents, few-shot prompts, and unique prompts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace.hpp"

namespace sim {

struct WorkloadClass {
    const char *name;
    const char *description;
    double published_hit_rate;  // seed 000's figure, for comparison (fraction)
};

// The five classes in report order.
const std::vector<WorkloadClass> &workload_classes();

// Published hit rate for a class name, or a negative value when there is none (user traces).
double published_hit_rate(const std::string &cls);

// Generates `requests` requests of class `name` ("all" mixes the five classes in equal shares),
// arrivals Poisson at `rate` requests/s (all classes together), output lengths and prompt pieces
// drawn from `seed`. Every request fits in max_len tokens (prompt + output). Returns false with *err
// for an unknown class.
bool generate_workload(const std::string &name, int64_t requests, uint64_t seed, double rate, int64_t max_len,
                       std::vector<TraceRequest> *out, std::string *err);

}  // namespace sim
