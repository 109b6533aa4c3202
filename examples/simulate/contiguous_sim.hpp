// The baseline the PagedAttention paper compares against: every sequence reserves one contiguous
// region of max_len token slots at admission (no sharing, no growth), run on the same trace with
// the same engine model and the same memory.
#pragma once

#include <vector>

#include "sim_types.hpp"

namespace sim {

SimResult run_contiguous(const std::vector<TraceRequest> &trace, const SimConfig &cfg);

}  // namespace sim
