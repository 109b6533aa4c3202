// The simulator's printed report: per-class hit rates and memory waste, paged vs contiguous.
#pragma once

#include <cstdio>
#include <string>

#include "sim_types.hpp"

namespace sim {

void print_report(FILE *out, const std::string &title, const SimConfig &cfg, const SimResult &paged,
                  const SimResult *contiguous);

}  // namespace sim
