#include "progress.hpp"

#include <unistd.h>

#include <cstdio>
#include <string>

namespace serve {

ProgressBar::ProgressBar(bool enabled) : enabled_(enabled && isatty(STDOUT_FILENO)) {}

void ProgressBar::update(int64_t done, int64_t total, double tokens_per_s, double utilization, int64_t preemptions) {
    if (!enabled_) return;
    auto now = std::chrono::steady_clock::now();
    if (drawn_ && done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    drawn_ = true;
    const int width = 30;
    int filled = total > 0 ? int(double(width) * double(done) / double(total)) : width;
    std::string bar(size_t(filled), '#');
    bar.append(size_t(width - filled), '-');
    std::printf("\r[%s] %lld/%lld requests  %.0f tok/s  pool %3.0f%% used  %lld preemptions\033[K", bar.c_str(),
                (long long)done, (long long)total, tokens_per_s, 100.0 * utilization, (long long)preemptions);
    std::fflush(stdout);
}

void ProgressBar::finish() {
    if (!enabled_ || !drawn_) return;
    std::printf("\r\033[K");
    std::fflush(stdout);
}

}  // namespace serve
