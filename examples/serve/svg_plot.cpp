#include "svg_plot.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

namespace serve {

namespace {

constexpr double kWidth = 960, kHeight = 520;
constexpr double kLeft = 80, kRight = 80, kTop = 78, kBottom = 64;
constexpr const char *kUsedColor = "#3b6fb6", *kCachedColor = "#f2a541", *kFreeColor = "#e4e7eb";
constexpr const char *kHitColor = "#c0392b", *kRecomputeColor = "#7b3294", *kSwapColor = "#1b9e77";

std::string fmt(const char *f, double a) {
    char b[64];
    std::snprintf(b, sizeof b, f, a);
    return b;
}

std::string escape(const std::string &s) {
    std::string o;
    for (char c : s) {
        if (c == '<') o += "&lt;";
        else if (c == '>') o += "&gt;";
        else if (c == '&') o += "&amp;";
        else if (c == '"') o += "&quot;";
        else o += c;
    }
    return o;
}

// A "nice" tick step (1, 2 or 5 x 10^k) giving about `target` ticks over [0, span].
double nice_step(double span, int target) {
    if (span <= 0) return 1;
    double raw = span / target, mag = std::pow(10.0, std::floor(std::log10(raw)));
    double n = raw / mag;
    return (n < 1.5 ? 1 : n < 3.5 ? 2 : n < 7.5 ? 5 : 10) * mag;
}

}  // namespace

std::string render_occupancy_svg(const Timeline &t, const std::string &title, const std::string &subtitle) {
    const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
    const std::vector<StepSample> &s = t.steps;
    const double last = s.empty() ? 1.0 : double(std::max<int64_t>(1, s.back().step));
    const double total = double(std::max<int64_t>(1, t.total_blocks));
    auto X = [&](double step) { return kLeft + pw * step / last; };
    auto Y = [&](double blocks) { return kTop + ph * (1.0 - blocks / total); };
    auto Yr = [&](double rate) { return kTop + ph * (1.0 - rate); };

    // Thin out very long runs so the file stays small (the stack is still exact at kept points).
    size_t stride = std::max<size_t>(1, s.size() / 1500);
    std::vector<const StepSample *> pts;
    for (size_t i = 0; i < s.size(); i += stride) pts.push_back(&s[i]);
    if (!s.empty() && pts.back() != &s.back()) pts.push_back(&s.back());

    std::string o;
    o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", kWidth) + "\" height=\"" + fmt("%.0f", kHeight) +
         "\" viewBox=\"0 0 " + fmt("%.0f", kWidth) + " " + fmt("%.0f", kHeight) +
         "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
    o += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    o += "<text x=\"" + fmt("%.0f", kWidth / 2) + "\" y=\"24\" text-anchor=\"middle\" font-size=\"17\" font-weight=\"bold\">" +
         escape(title) + "</text>\n";
    o += "<text x=\"" + fmt("%.0f", kWidth / 2) + "\" y=\"43\" text-anchor=\"middle\" fill=\"#555\">" + escape(subtitle) +
         "</text>\n";

    // Stacked areas: used (bottom), cached-free, free (top). Each band is a polygon from its upper
    // edge left to right and its lower edge back.
    auto band = [&](auto lower, auto upper, const char *color) {
        if (pts.empty()) return;
        o += "<polygon fill=\"" + std::string(color) + "\" stroke=\"none\" points=\"";
        for (const StepSample *p : pts) o += fmt("%.1f,", X(double(p->step))) + fmt("%.1f ", Y(upper(*p)));
        for (auto it = pts.rbegin(); it != pts.rend(); ++it)
            o += fmt("%.1f,", X(double((*it)->step))) + fmt("%.1f ", Y(lower(**it)));
        o += "\"/>\n";
    };
    auto used = [](const StepSample &p) { return double(p.used_blocks); };
    auto used_cached = [](const StepSample &p) { return double(p.used_blocks + p.cached_free); };
    auto all = [](const StepSample &p) { return double(p.used_blocks + p.cached_free + p.free_blocks); };
    band([](const StepSample &) { return 0.0; }, used, kUsedColor);
    band(used, used_cached, kCachedColor);
    band(used_cached, all, kFreeColor);

    // Grid, axes and ticks.
    double ystep = nice_step(total, 5);
    for (double v = 0; v <= total + 1e-9; v += ystep) {
        o += "<line x1=\"" + fmt("%.1f", kLeft) + "\" x2=\"" + fmt("%.1f", kLeft + pw) + "\" y1=\"" + fmt("%.1f", Y(v)) +
             "\" y2=\"" + fmt("%.1f", Y(v)) + "\" stroke=\"#000\" stroke-opacity=\"0.12\"/>\n";
        o += "<text x=\"" + fmt("%.1f", kLeft - 8) + "\" y=\"" + fmt("%.1f", Y(v) + 4) + "\" text-anchor=\"end\">" +
             fmt("%.0f", v) + "</text>\n";
    }
    for (int pct = 0; pct <= 100; pct += 25)
        o += "<text x=\"" + fmt("%.1f", kLeft + pw + 8) + "\" y=\"" + fmt("%.1f", Yr(pct / 100.0) + 4) + "\" fill=\"" +
             kHitColor + "\">" + fmt("%.0f%%", pct) + "</text>\n";
    double xstep = nice_step(last, 8);
    for (double v = 0; v <= last + 1e-9; v += xstep)
        o += "<line x1=\"" + fmt("%.1f", X(v)) + "\" x2=\"" + fmt("%.1f", X(v)) + "\" y1=\"" + fmt("%.1f", kTop + ph) +
             "\" y2=\"" + fmt("%.1f", kTop + ph + 5) + "\" stroke=\"#000\"/>\n<text x=\"" + fmt("%.1f", X(v)) + "\" y=\"" +
             fmt("%.1f", kTop + ph + 19) + "\" text-anchor=\"middle\">" + fmt("%.0f", v) + "</text>\n";
    o += "<rect x=\"" + fmt("%.1f", kLeft) + "\" y=\"" + fmt("%.1f", kTop) + "\" width=\"" + fmt("%.1f", pw) +
         "\" height=\"" + fmt("%.1f", ph) + "\" fill=\"none\" stroke=\"#000\"/>\n";
    o += "<text x=\"" + fmt("%.1f", kLeft + pw / 2) + "\" y=\"" + fmt("%.1f", kHeight - 18) +
         "\" text-anchor=\"middle\">engine step</text>\n";
    o += "<text transform=\"translate(22," + fmt("%.1f", kTop + ph / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">KV blocks</text>\n";
    o += "<text transform=\"translate(" + fmt("%.1f", kWidth - 18) + "," + fmt("%.1f", kTop + ph / 2) +
         ") rotate(90)\" text-anchor=\"middle\" fill=\"" + kHitColor + "\">prefix cache hit rate (pool counter, cumulative)</text>\n";

    // Preemptions: a mark on the top edge at each step where a count rose (swap and recompute).
    int64_t prev_swap = 0, prev_recompute = 0;
    for (const StepSample &p : s) {
        const double x = X(double(p.step));
        auto mark = [&](const char *color) {
            o += "<path d=\"M" + fmt("%.1f", x - 4) + "," + fmt("%.1f", kTop - 9) + " L" + fmt("%.1f", x + 4) + "," +
                 fmt("%.1f", kTop - 9) + " L" + fmt("%.1f", x) + "," + fmt("%.1f", kTop - 1) + " Z\" fill=\"" + color +
                 "\"/>\n";
        };
        if (p.recompute_preemptions > prev_recompute) mark(kRecomputeColor);
        if (p.swap_preemptions > prev_swap) mark(kSwapColor);
        prev_swap = p.swap_preemptions;
        prev_recompute = p.recompute_preemptions;
    }

    // Hit rate line.
    if (!pts.empty()) {
        o += "<polyline fill=\"none\" stroke=\"" + std::string(kHitColor) + "\" stroke-width=\"2\" points=\"";
        for (const StepSample *p : pts) o += fmt("%.1f,", X(double(p->step))) + fmt("%.1f ", Yr(p->hit_rate));
        o += "\"/>\n";
    }

    // Legend, above the plot.
    struct Item { const char *label; const char *color; int kind; };  // 0 box, 1 line, 2 triangle
    const Item items[] = {{"used blocks", kUsedColor, 0}, {"cached, free (reusable on a hit)", kCachedColor, 0},
                          {"free", kFreeColor, 0}, {"prefix hit rate", kHitColor, 1},
                          {"recompute preemption", kRecomputeColor, 2}, {"swap preemption", kSwapColor, 2}};
    double lx = kLeft;
    const double ly = 58;
    for (const Item &it : items) {
        if (it.kind == 0)
            o += "<rect x=\"" + fmt("%.1f", lx) + "\" y=\"" + fmt("%.1f", ly - 9) + "\" width=\"14\" height=\"11\" fill=\"" +
                 it.color + "\" stroke=\"#888\" stroke-width=\"0.5\"/>\n";
        else if (it.kind == 1)
            o += "<line x1=\"" + fmt("%.1f", lx) + "\" x2=\"" + fmt("%.1f", lx + 14) + "\" y1=\"" + fmt("%.1f", ly - 4) +
                 "\" y2=\"" + fmt("%.1f", ly - 4) + "\" stroke=\"" + it.color + "\" stroke-width=\"2\"/>\n";
        else
            o += "<path d=\"M" + fmt("%.1f", lx + 3) + "," + fmt("%.1f", ly - 9) + " L" + fmt("%.1f", lx + 11) + "," +
                 fmt("%.1f", ly - 9) + " L" + fmt("%.1f", lx + 7) + "," + fmt("%.1f", ly) + " Z\" fill=\"" + it.color + "\"/>\n";
        o += "<text x=\"" + fmt("%.1f", lx + 19) + "\" y=\"" + fmt("%.1f", ly) + "\">" + escape(it.label) + "</text>\n";
        lx += 19 + 6.4 * double(std::strlen(it.label)) + 14;  // ~6.4 px per character at 12 px
    }
    o += "</svg>\n";
    return o;
}

bool write_file_atomically(const std::string &path, const std::string &content, std::string *err) {
    std::filesystem::path p(path);
    std::error_code ec;
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
    std::string tmp = path + ".tmp";
    FILE *f = std::fopen(tmp.c_str(), "wb");
    if (!f) {
        *err = tmp + ": " + std::strerror(errno);
        return false;
    }
    bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
    ok = (std::fclose(f) == 0) && ok;
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
        *err = path + ": " + std::strerror(errno);
        std::remove(tmp.c_str());
        return false;
    }
    return true;
}

}  // namespace serve
