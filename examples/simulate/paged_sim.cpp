#include "paged_sim.hpp"

#include <kvc/kvc.h>

#include <chrono>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>

namespace sim {

namespace {

void check(kvc_status st, const char *what) {
    if (st != KVC_OK) throw std::runtime_error(std::string(what) + " failed: " + kvc_status_str(st) + " (" + kvc_last_error() + ")");
}

// One running (or preempted) sample of a request.
struct Seq {
    uint64_t id = 0;
    size_t req = 0;
    int32_t sample = 0;
    std::vector<int32_t> tokens;  // prompt + generated so far (what a recompute re-prefills)
    int64_t generated = 0;
    int64_t admitted_step = 0;
};

class PagedSimulator {
public:
    PagedSimulator(const std::vector<TraceRequest> &trace, const SimConfig &cfg) : trace_(trace), cfg_(cfg) {
        kvc_pool_config pc;
        check(kvc_pool_config_default(&pc), "kvc_pool_config_default");
        pc.block_size = cfg.block_size;
        pc.num_blocks = cfg.num_blocks;
        pc.max_seq_len = cfg.max_len;
        pc.watermark = cfg.watermark;
        pc.prefix_caching = cfg.prefix_caching ? 1 : 0;
        pc.backend = KVC_BACKEND_NONE;
        pc.event_capacity = 0;  // nobody consumes events here
        check(kvc_pool_create(&pc, &pool_), "kvc_pool_create");
        check(kvc_keys_create(&keys_), "kvc_keys_create");
        classes_ = index_classes(trace);
        result_.classes.resize(classes_.names.size());
        for (size_t i = 0; i < classes_.names.size(); i++) result_.classes[i].name = classes_.names[i];
        for (size_t i = 0; i < trace.size(); i++) cls(i).requests++;
        seeds_.resize(trace.size());
        for (size_t i = 0; i < trace.size(); i++) seeds_[i] = request_seed(cfg.seed, i);
        remaining_samples_.resize(trace.size());
        for (size_t i = 0; i < trace.size(); i++) remaining_samples_[i] = trace[i].n;
    }
    ~PagedSimulator() {
        kvc_keys_destroy(keys_);
        kvc_pool_destroy(pool_);
    }

    SimResult run() {
        auto start = std::chrono::steady_clock::now();
        double util_sum = 0, running_sum = 0;
        int64_t step = 0;
        double now = 0;
        while (done_requests_ < trace_.size()) {
            if (running_.empty() && preempted_.empty() && next_ < trace_.size() && trace_[next_].t > now)
                now = trace_[next_].t;  // idle: jump to the next arrival
            admit(now, step);
            if (running_.empty() && preempted_.empty() && next_ < trace_.size() && trace_[next_].t <= now)
                throw std::runtime_error("simulator stalled: request at trace position " + std::to_string(next_) +
                                         " cannot be admitted into an empty pool");
            decode(now, step);
            int64_t drained = 0;
            check(kvc_take_pending_copies(pool_, nullptr, nullptr, 0, &drained), "kvc_take_pending_copies");
            if (drained > 0) {
                // Metadata-only pool: nothing to copy; drain the queue so it does not grow.
                copy_buf_src_.resize(size_t(drained));
                copy_buf_dst_.resize(size_t(drained));
                check(kvc_take_pending_copies(pool_, copy_buf_src_.data(), copy_buf_dst_.data(), drained, &drained),
                      "kvc_take_pending_copies");
            }
            account_memory();
            kvc_stats st;
            st.struct_size = sizeof st;
            check(kvc_pool_stats(pool_, &st), "kvc_pool_stats");
            util_sum += st.utilization;
            if (st.utilization > result_.peak_utilization) result_.peak_utilization = st.utilization;
            running_sum += double(running_.size());
            if (int64_t(running_.size()) > result_.peak_running) result_.peak_running = int64_t(running_.size());
            step++;
            now += cfg_.step_s;
        }
        kvc_stats st;
        st.struct_size = sizeof st;
        check(kvc_pool_stats(pool_, &st), "kvc_pool_stats");
        check(kvc_pool_check(pool_), "kvc_pool_check");
        result_.steps = step;
        result_.sim_seconds = now;
        result_.mean_utilization = step ? util_sum / double(step) : 0;
        result_.mean_running = step ? running_sum / double(step) : 0;
        result_.cow_copies = st.cow_copies;
        result_.evictions = st.evictions;
        result_.forks = st.forks;
        result_.pool_hit_rate = st.prefix_hit_rate;
        result_.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        finish_totals();
        return result_;
    }

private:
    const std::vector<TraceRequest> &trace_;
    SimConfig cfg_;
    kvc_pool *pool_ = nullptr;
    kvc_keys *keys_ = nullptr;
    ClassIndex classes_;
    SimResult result_;
    std::vector<uint64_t> seeds_;
    std::vector<int32_t> remaining_samples_;
    size_t next_ = 0;            // next trace request not yet admitted
    size_t done_requests_ = 0;   // completed or rejected
    uint64_t next_seq_id_ = 1;
    std::vector<std::unique_ptr<Seq>> running_;   // admission order; preemption victims from the back
    std::deque<std::unique_ptr<Seq>> preempted_;  // re-admitted before new requests
    std::vector<int32_t> prompt_;
    StreamCache streams_;
    std::vector<int32_t> copy_buf_src_, copy_buf_dst_;

    ClassStats &cls(size_t req) { return result_.classes[size_t(classes_.of_request[req])]; }

    void set_keys(const TraceRequest &r) {
        check(kvc_keys_clear(keys_), "kvc_keys_clear");
        if (!r.salt.empty()) check(kvc_keys_set_salt(keys_, r.salt.c_str()), "kvc_keys_set_salt");
        if (r.lora) check(kvc_keys_set_lora(keys_, r.lora), "kvc_keys_set_lora");
        if (r.priority != KVC_PRIORITY_DEFAULT) check(kvc_keys_set_priority(keys_, r.priority), "kvc_keys_set_priority");
    }

    void reject(size_t req) {
        cls(req).rejected++;
        done_requests_++;
    }

    // Tries to allocate `tokens` for a new sequence; false when the pool says "later".
    bool try_alloc(uint64_t id, const std::vector<int32_t> &tokens, int64_t *cached, int32_t *verdict) {
        check(kvc_can_alloc(pool_, tokens.data(), int64_t(tokens.size()), keys_, verdict), "kvc_can_alloc");
        if (*verdict != KVC_ALLOC_OK) return false;
        kvc_status st = kvc_alloc(pool_, id, tokens.data(), int64_t(tokens.size()), keys_, cached);
        if (st == KVC_ERR_OUT_OF_BLOCKS) return false;
        check(st, "kvc_alloc");
        return true;
    }

    void admit(double now, int64_t step) {
        int64_t budget = cfg_.max_batched_tokens;
        bool first = true;
        // Preempted sequences first, in their original order (vLLM puts them at the queue front).
        while (!preempted_.empty() && (first || budget > 0) && int64_t(running_.size()) < cfg_.max_seqs) {
            Seq &s = *preempted_.front();
            set_keys(trace_[s.req]);
            int64_t cached = 0;
            int32_t verdict = 0;
            if (!try_alloc(s.id, s.tokens, &cached, &verdict)) return;  // FIFO: nothing overtakes it
            int64_t recompute = int64_t(s.tokens.size()) - cached;
            cls(s.req).recomputed_tokens += recompute;
            budget -= recompute;
            first = false;
            s.admitted_step = step;
            running_.push_back(std::move(preempted_.front()));
            preempted_.pop_front();
        }
        if (!preempted_.empty()) return;
        while (next_ < trace_.size() && trace_[next_].t <= now && (first || budget > 0)) {
            const TraceRequest &r = trace_[next_];
            if (int64_t(running_.size()) + r.n > cfg_.max_seqs) return;
            if (r.prompt_len() + r.output_len > cfg_.max_len) {
                reject(next_++);
                continue;
            }
            build_prompt(r, seeds_[next_], &streams_, &prompt_);
            set_keys(r);
            int64_t cached = 0;
            int32_t verdict = 0;
            uint64_t id = next_seq_id_;
            if (!try_alloc(id, prompt_, &cached, &verdict)) {
                if (verdict == KVC_ALLOC_NEVER) {
                    reject(next_++);
                    continue;
                }
                return;
            }
            next_seq_id_++;
            ClassStats &c = cls(next_);
            c.prompt_tokens += int64_t(prompt_.size());
            c.hit_tokens += cached;
            budget -= int64_t(prompt_.size()) - cached;
            first = false;
            for (int32_t sample = 0; sample < r.n; sample++) {
                auto s = std::make_unique<Seq>();
                s->id = sample == 0 ? id : next_seq_id_++;
                if (sample > 0) check(kvc_fork(pool_, id, s->id), "kvc_fork");  // shares every block
                s->req = next_;
                s->sample = sample;
                s->tokens = prompt_;
                s->admitted_step = step;
                running_.push_back(std::move(s));
            }
            next_++;
        }
    }

    // Frees the latest-admitted running sequence and queues it for recompute.
    void preempt_last() {
        std::unique_ptr<Seq> victim = std::move(running_.back());
        running_.pop_back();
        check(kvc_free(pool_, victim->id), "kvc_free");
        cls(victim->req).preemptions++;
        preempted_.push_front(std::move(victim));
    }

    void complete(Seq &s, double now) {
        check(kvc_free(pool_, s.id), "kvc_free");
        if (--remaining_samples_[s.req] == 0) {
            ClassStats &c = cls(s.req);
            c.completed++;
            c.latency_sum += now - trace_[s.req].t;
            done_requests_++;
        }
    }

    void decode(double now, int64_t step) {
        // Every sequence admitted in an earlier step appends the token its last step produced.
        for (size_t i = 0; i < running_.size(); i++) {
            Seq *s = running_[i].get();
            if (!s || s->admitted_step == step) continue;
            const TraceRequest &r = trace_[s->req];
            int32_t tok = output_token(r, seeds_[s->req], s->sample, s->generated);
            for (;;) {
                kvc_status st = kvc_append(pool_, s->id, &tok, 1, 0, nullptr);
                if (st == KVC_OK) break;
                if (st != KVC_ERR_OUT_OF_BLOCKS) check(st, "kvc_append");
                // Out of blocks: preempt from the back until this sequence fits (or is the victim).
                while (!running_.empty() && !running_.back()) running_.pop_back();
                bool self = running_.back().get() == s;
                preempt_last();
                if (self) {
                    s = nullptr;
                    break;
                }
            }
            if (!s) break;  // this sequence was the last one left to preempt: every later one is gone
            s->tokens.push_back(tok);
            s->generated++;
            cls(s->req).generated_tokens++;
            if (s->generated == r.output_len) {
                complete(*s, now);
                running_[i].reset();
            }
        }
        // Compact: drop completed slots, keep admission order.
        size_t w = 0;
        for (size_t i = 0; i < running_.size(); i++)
            if (running_[i]) running_[w++] = std::move(running_[i]);
        running_.resize(w);
    }

    void account_memory() {
        const int64_t bs = cfg_.block_size;
        for (const auto &s : running_) {
            int64_t n = int64_t(s->tokens.size());
            int64_t slots = (n + bs - 1) / bs * bs;
            ClassStats &c = cls(s->req);
            c.slot_steps_allocated += double(slots);
            c.slot_steps_unused += double(slots - n);
        }
    }

    void finish_totals() {
        ClassStats &t = result_.total;
        t.name = "total";
        for (const ClassStats &c : result_.classes) {
            t.requests += c.requests;
            t.completed += c.completed;
            t.rejected += c.rejected;
            t.prompt_tokens += c.prompt_tokens;
            t.hit_tokens += c.hit_tokens;
            t.generated_tokens += c.generated_tokens;
            t.preemptions += c.preemptions;
            t.recomputed_tokens += c.recomputed_tokens;
            t.slot_steps_allocated += c.slot_steps_allocated;
            t.slot_steps_unused += c.slot_steps_unused;
            t.latency_sum += c.latency_sum;
        }
    }
};

}  // namespace

SimResult run_paged(const std::vector<TraceRequest> &trace, const SimConfig &cfg) {
    PagedSimulator s(trace, cfg);
    return s.run();
}

}  // namespace sim
