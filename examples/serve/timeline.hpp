// What the engine records each step, for the report and the SVG plot.
#pragma once

#include <cstdint>
#include <vector>

namespace serve {

struct StepSample {
    int64_t step;
    double seconds;          // wall time since the run started
    int64_t used_blocks;     // refcount > 0
    int64_t cached_free;     // refcount 0, still in the prefix cache (reusable on a hit)
    int64_t free_blocks;     // refcount 0, not cached
    double hit_rate;         // pool's cumulative prefix hit rate (tokens)
    int32_t running;         // sequences in the step's batch
    int64_t batch_tokens;    // new tokens in the step's batch
    int64_t swap_preemptions;       // cumulative
    int64_t recompute_preemptions;  // cumulative
};

struct Timeline {
    int64_t total_blocks = 0;
    std::vector<StepSample> steps;
};

}  // namespace serve
