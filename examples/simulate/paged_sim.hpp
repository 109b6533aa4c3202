// Replays a trace through libkvc's block manager (a metadata-only pool: block tables, refcounts,
// prefix cache, copy-on-write bookkeeping; no KV bytes, no attention math).
#pragma once

#include <vector>

#include "sim_types.hpp"

namespace sim {

// Throws std::runtime_error naming the libkvc call and its message if the library reports an
// unexpected error.
SimResult run_paged(const std::vector<TraceRequest> &trace, const SimConfig &cfg);

}  // namespace sim
