// A one-line progress bar, drawn only when stdout is a terminal (a log file gets the report only).
#pragma once

#include <chrono>
#include <cstdint>

namespace serve {

class ProgressBar {
public:
    explicit ProgressBar(bool enabled);
    // Redraws at most every 100 ms (and always on the last item).
    void update(int64_t done, int64_t total, double tokens_per_s, double utilization, int64_t preemptions);
    // Clears the line so the report starts on a clean one.
    void finish();

private:
    bool enabled_;
    bool drawn_ = false;
    std::chrono::steady_clock::time_point last_;
};

}  // namespace serve
