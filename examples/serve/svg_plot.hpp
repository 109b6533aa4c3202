// Pool occupancy over time as a standalone SVG (written by hand, no libraries): stacked used /
// cached-free / free blocks per engine step, the prefix hit rate on a second axis, and preemption
// marks.
#pragma once

#include <string>

#include "timeline.hpp"

namespace serve {

std::string render_occupancy_svg(const Timeline &t, const std::string &title, const std::string &subtitle);

// Writes `content` to PATH.tmp and renames it to PATH, so a reader never sees a partial file.
// Creates missing parent directories. Returns false with *err on failure (nothing left behind).
bool write_file_atomically(const std::string &path, const std::string &content, std::string *err);

}  // namespace serve
