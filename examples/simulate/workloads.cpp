#include "workloads.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace sim {

namespace {

const std::vector<WorkloadClass> kClasses = {
    {"chat", "chatbot, one of 4 shared 2048-token system prompts + a short user turn", 0.92},
    {"multiturn", "conversations of 3-8 turns; each turn re-sends the whole history", 0.78},
    {"rag", "instruction + one of 2000 documents (Zipf popularity) + a question", 0.65},
    {"fewshot", "one of 24 few-shot templates (600-1400 tokens) + a new problem; 15% ask for 2-4 samples", 0.55},
    {"unique", "a 32-token chat template + a unique prompt", 0.05},
};

using Rng = std::mt19937_64;

int64_t uniform(Rng &rng, int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }

// Zipf(s) sampler over [0, n) by inverse CDF on a precomputed table.
class Zipf {
public:
    Zipf(int64_t n, double s) : cdf_(size_t(n)) {
        double acc = 0;
        for (int64_t i = 0; i < n; i++) cdf_[size_t(i)] = acc += 1.0 / std::pow(double(i + 1), s);
        for (double &c : cdf_) c /= acc;
    }
    int64_t operator()(Rng &rng) const {
        double u = std::uniform_real_distribution<double>(0, 1)(rng);
        return int64_t(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
    }

private:
    std::vector<double> cdf_;
};

Segment stream(const std::string &id, int64_t len) {
    Segment s;
    s.kind = Segment::Kind::Stream;
    s.id = id;
    s.len = len;
    return s;
}

Segment random_seg(int64_t len) {
    Segment s;
    s.kind = Segment::Kind::Random;
    s.len = len;
    return s;
}

// Arrival times: a Poisson process of `rate` requests/s.
class Arrivals {
public:
    Arrivals(Rng &rng, double rate) : rng_(rng), gap_(rate) {}
    double next() { return t_ += gap_(rng_); }

private:
    Rng &rng_;
    std::exponential_distribution<double> gap_;
    double t_ = 0;
};

void gen_chat(int64_t count, Rng &rng, double rate, std::vector<TraceRequest> *out) {
    Arrivals arr(rng, rate);
    std::discrete_distribution<int> which({40, 30, 20, 10});
    for (int64_t i = 0; i < count; i++) {
        TraceRequest r;
        r.t = arr.next();
        r.cls = "chat";
        r.segments = {stream("chat-sys" + std::to_string(which(rng)), 2048), random_seg(uniform(rng, 20, 200))};
        r.output_len = uniform(rng, 50, 300);
        out->push_back(std::move(r));
    }
}

// Conversations start as a Poisson process; each next turn arrives after the previous reply would
// have been generated (output tokens x ~20 ms) plus a think time.
void gen_multiturn(int64_t count, Rng &rng, double rate, int64_t max_len, std::vector<TraceRequest> *out) {
    // Each conversation contributes its turns; starting rate is rate / mean turns.
    Arrivals starts(rng, rate / 5.5);
    std::exponential_distribution<double> think(1.0 / 8.0);
    int64_t made = 0;
    for (int64_t conv = 0; made < count; conv++) {
        std::string sys = "mt-sys" + std::to_string(uniform(rng, 0, 3));
        std::string id = "conv" + std::to_string(conv);
        int64_t sys_len = 256, history = 0;
        int64_t turns = uniform(rng, 3, 8);
        double t = starts.next();
        for (int64_t k = 0; k < turns && made < count; k++) {
            int64_t user = uniform(rng, 20, 150), reply = uniform(rng, 50, 250);
            if (sys_len + history + user + reply > max_len) break;
            TraceRequest r;
            r.t = t;
            r.cls = "multiturn";
            r.segments = {stream(sys, sys_len), stream(id, history + user)};
            r.output_len = reply;
            out->push_back(std::move(r));
            made++;
            history += user + reply;
            t += double(reply) * 0.02 + think(rng);
        }
    }
}

void gen_rag(int64_t count, Rng &rng, double rate, std::vector<TraceRequest> *out) {
    Arrivals arr(rng, rate);
    const int64_t docs = 2000;
    Zipf pick(docs, 1.1);
    for (int64_t i = 0; i < count; i++) {
        int64_t d = pick(rng);
        // Document length is a property of the document, not of the request.
        int64_t doc_len = 300 + int64_t((uint64_t(d) * 2654435761ull) % 901);
        TraceRequest r;
        r.t = arr.next();
        r.cls = "rag";
        r.segments = {stream("rag-inst", 64), stream("doc" + std::to_string(d), doc_len), random_seg(uniform(rng, 20, 100))};
        r.output_len = uniform(rng, 30, 200);
        out->push_back(std::move(r));
    }
}

void gen_fewshot(int64_t count, Rng &rng, double rate, std::vector<TraceRequest> *out) {
    Arrivals arr(rng, rate);
    const int64_t tasks = 24;
    Zipf pick(tasks, 0.8);
    for (int64_t i = 0; i < count; i++) {
        int64_t k = pick(rng);
        int64_t shots_len = 600 + (k * 379) % 801;
        TraceRequest r;
        r.t = arr.next();
        r.cls = "fewshot";
        r.segments = {stream("fewshot-task" + std::to_string(k), shots_len), random_seg(uniform(rng, 300, 900))};
        r.output_len = uniform(rng, 50, 300);
        // Code generation often asks for several candidates (pass@k): parallel samples that share
        // the prompt through kvc_fork and diverge by copy-on-write.
        if (uniform(rng, 0, 99) < 15) r.n = int32_t(uniform(rng, 2, 4));
        out->push_back(std::move(r));
    }
}

void gen_unique(int64_t count, Rng &rng, double rate, std::vector<TraceRequest> *out) {
    Arrivals arr(rng, rate);
    for (int64_t i = 0; i < count; i++) {
        TraceRequest r;
        r.t = arr.next();
        r.cls = "unique";
        r.segments = {stream("chat-template", 32), random_seg(uniform(rng, 200, 1500))};
        r.output_len = uniform(rng, 50, 400);
        out->push_back(std::move(r));
    }
}

bool gen_one(const std::string &name, int64_t count, Rng &rng, double rate, int64_t max_len,
             std::vector<TraceRequest> *out) {
    if (name == "chat") gen_chat(count, rng, rate, out);
    else if (name == "multiturn") gen_multiturn(count, rng, rate, max_len, out);
    else if (name == "rag") gen_rag(count, rng, rate, out);
    else if (name == "fewshot") gen_fewshot(count, rng, rate, out);
    else if (name == "unique") gen_unique(count, rng, rate, out);
    else return false;
    return true;
}

}  // namespace

const std::vector<WorkloadClass> &workload_classes() { return kClasses; }

double published_hit_rate(const std::string &cls) {
    for (const WorkloadClass &c : kClasses)
        if (cls == c.name) return c.published_hit_rate;
    return -1.0;
}

bool generate_workload(const std::string &name, int64_t requests, uint64_t seed, double rate, int64_t max_len,
                       std::vector<TraceRequest> *out, std::string *err) {
    out->clear();
    Rng rng(seed);
    if (name == "all") {
        // Equal shares, each class at rate / 5, merged by arrival time.
        size_t nc = kClasses.size();
        for (size_t i = 0; i < nc; i++) {
            int64_t share = requests / int64_t(nc) + (int64_t(i) < requests % int64_t(nc) ? 1 : 0);
            Rng sub(seed * 1000003ull + i);
            gen_one(kClasses[i].name, share, sub, rate / double(nc), max_len, out);
        }
        std::stable_sort(out->begin(), out->end(), [](const TraceRequest &a, const TraceRequest &b) { return a.t < b.t; });
        return true;
    }
    if (!gen_one(name, requests, rng, rate, max_len, out)) {
        *err = "unknown workload '" + name + "' (expected chat, multiturn, rag, fewshot, unique or all)";
        return false;
    }
    std::stable_sort(out->begin(), out->end(), [](const TraceRequest &a, const TraceRequest &b) { return a.t < b.t; });
    return true;
}

}  // namespace sim
