#include "engine.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <unordered_set>

#include "kv_store.hpp"
#include "kvc_check.hpp"
#include "ngram_draft.hpp"
#include "paged_forward.hpp"
#include "reference.hpp"

namespace serve {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One sample of a request: a libkvc sequence.
struct Sample {
    uint64_t seq_id = 0;
    int32_t req = 0;
    int32_t index = 0;            // sample number within its request
    std::vector<int32_t> tokens;  // confirmed in the pool: prompt + appended outputs
    int32_t pending = -1;         // sampled, not yet appended (its KV is computed next step)
    int64_t drafts = 0;           // this step's draft tokens: the newest `drafts` of `tokens`,
                                  // appended to the pool to be verified, kept or truncated after it
    int64_t prompt_len = 0;
    int64_t generated = 0;        // outputs sampled so far
    std::vector<float> logits;    // [generated][vocab]: the rows the engine sampled from
    std::mt19937_64 rng;
    bool first_admission = true;
    int64_t appends_since_alloc = 0;  // decode steps appended since the sequence was (re)allocated
    bool drained = false;             // freed by a restart, not yet re-admitted
};

struct RequestState {
    int32_t samples_left = 0;
    bool arrived = false, done = false;
    std::vector<int32_t> output;  // sample 0's outputs, for follow-ups
    std::vector<int32_t> prompt;
};

class Engine {
public:
    Engine(const Model &m, const Workload &w, const EngineConfig &cfg) : m_(m), w_(w), cfg_(cfg) {
        KvStoreConfig kc;
        kc.block_size = cfg.block_size;
        kc.num_blocks = cfg.num_blocks;
        kc.window_blocks = cfg.window_blocks;
        kc.kv_dtype = cfg.kv_dtype;
        kc.backend = cfg.backend;
        kc.max_seq_len = cfg.max_seq_len;
        kc.host_blocks = cfg.host_blocks;
        kc.window = cfg.window;
        kc.hybrid = cfg.hybrid;
        kc.two_pools = cfg.two_pools;
        kc.tp = cfg.tp;
        kc.disk = cfg.disk;
        kv_ = std::make_unique<KvStore>(m.cfg, kc, &report_.swap_unavailable);
        report_.disk_attached = kv_->has_disk();
        if (report_.disk_attached) {
            report_.recovered_at_start = kv_->disk_figures().recovered_blocks;
            report_.foreign_at_start = kv_->disk_figures().foreign_blocks;
        }
        report_.window = cfg.window;
        report_.hybrid = cfg.hybrid;
        report_.one_pool = kv_->one_pool_hybrid();
        report_.tp = cfg.tp;
        int64_t total_blocks = 0;
        for (const PoolGroup &g : kv_->groups()) {
            // Over all ranks: the whole model's KV, whatever --tp.
            report_.bytes_per_block += g.bytes_per_block * cfg.tp;
            report_.kv_bytes += g.kv_bytes * cfg.tp;
            report_.rank_kv_bytes += g.kv_bytes;
            PoolReport pr;
            pr.name = g.name;
            pr.window = g.window;
            pr.layers = g.layers;
            pr.bytes_per_block = g.bytes_per_block * cfg.tp;
            pr.num_blocks = g.num_blocks;
            total_blocks += g.num_blocks;
            report_.pools.push_back(pr);
        }
        layer_windows_ = layer_windows(m.cfg.num_layers, cfg.window, cfg.hybrid);
        if (cfg.corrupt_kv_group < 0 || cfg.corrupt_kv_group >= (kv_->one_pool_hybrid() ? 2 : int32_t(kv_->groups().size())))
            throw std::runtime_error("no pool " + std::to_string(cfg.corrupt_kv_group) + " to corrupt");
        // A lone prefill may exceed the per-step budget, up to a whole sequence.
        batch_capacity_ = cfg.max_batched_tokens + cfg.max_seq_len;
        open_forward();
        logits_.resize(size_t(max_logit_rows()) * size_t(m.cfg.vocab));
        report_.speculate = cfg.speculate;
        reqs_.resize(w.requests.size());
        for (size_t i = 0; i < w.requests.size(); i++) reqs_[i].samples_left = w.requests[i].n;
        // Under --hybrid the plot shows both pools together (their blocks are the same size).
        report_.timeline.total_blocks = total_blocks;
        report_.swap_available = kv_->has_swap();
    }
    ~Engine() {
        forward_.reset();  // its batches before the pools
        kv_.reset();
    }

    EngineReport run(const std::function<void(int64_t, int64_t, const EngineReport &)> &progress) {
        t0_ = Clock::now();
        double util_sum = 0;
        for (step_ = 0; report_.requests_done < int64_t(w_.requests.size()); step_++) {
            if (step_ == cfg_.restart_at_step) restart();
            kv_->set_step(step_);
            if (cfg_.tp_skew_at_step >= 0 && step_ >= cfg_.tp_skew_at_step) skew_last_rank();
            arrivals();
            entries_.clear();
            forks_due_ = 0;
            batch_samples_.clear();
            batch_tokens_ = 0;
            decode_appends();
            report_.cow_copies += kv_->copy_pending();  // COW before writes
            bool swapped_in = admit();
            if (cfg_.corrupt_kv_at_step >= 0 && step_ >= cfg_.corrupt_kv_at_step) corrupt_one_block();
            if (entries_.empty()) {
                if (!swapped_in && (!waiting_.empty() || !preempted_.empty() || !swapped_.empty()))
                    throw std::runtime_error("engine stalled at step " + std::to_string(step_) +
                                             ": nothing running and the next request cannot be admitted");
                // Idle steps only wait for a later arrival; anything else repeating is a livelock.
                const bool arrival_due = next_arrival_ < w_.requests.size() &&
                                         w_.requests[next_arrival_].arrival_step > step_;
                if (!arrival_due && ++idle_steps_ > 1000)
                    throw std::runtime_error("engine made no progress for 1000 steps (step " + std::to_string(step_) + ")");
                record_step(&util_sum);
                check_lockstep();
                continue;  // idle until the next arrival
            }
            idle_steps_ = 0;
            forward_->run(entries_, logits_.data());
            after_forward();
            record_step(&util_sum);
            check_lockstep();
            if (progress) progress(report_.requests_done, int64_t(w_.requests.size()), report_);
        }
        kv_->check_empty();
        report_.steps = step_;
        report_.mean_utilization = step_ ? util_sum / double(step_) : 0;
        for (size_t g = 0; g < kv_->groups().size(); g++) {
            const kvc_stats st = kv_->lifetime_stats(g);
            PoolReport &pr = report_.pools[g];
            pr.hit_rate = st.prefix_hit_rate;
            pr.evictions = st.evictions;
            // The first pool's counters are the headline (the pools fork the same sequences).
            if (g == 0) {
                report_.pool_hit_rate = st.prefix_hit_rate;
                report_.forks = st.forks;
            }
            report_.evictions += st.evictions;
        }
        report_.engine_seconds = seconds_since(t0_) - report_.check_seconds;
        if (kv_->has_swap()) {
            report_.bytes_to_host = kv_->bytes_to_host();
            report_.bytes_to_device = kv_->bytes_to_device();
            report_.host_prefix_hits = kv_->host_prefix_hits();
            report_.partial_swap_outs = kv_->partial_swap_outs();
            report_.dropped_swap_ins = kv_->dropped_swap_ins();
            report_.short_hits = kv_->short_hits();
            report_.host = kv_->host_figures();
            report_.disk = kv_->disk_figures();
            if (report_.restarted) report_.after_disk_hits = report_.disk.hits - disk_hits_before_restart_;
        }
        report_.fanned_calls = kv_->fanned_calls();
        return report_;
    }

private:
    const Model &m_;
    const Workload &w_;
    EngineConfig cfg_;
    std::unique_ptr<KvStore> kv_;                    // the pool, or pools L and G under --hybrid
    std::unique_ptr<PagedForward> forward_;
    std::vector<int32_t> layer_windows_;             // each layer's window, for the reference
    int64_t batch_capacity_ = 0;
    EngineReport report_;
    Clock::time_point t0_;
    int64_t step_ = 0;
    uint64_t next_seq_id_ = 1;
    size_t next_arrival_ = 0;
    std::vector<RequestState> reqs_;
    std::deque<int32_t> waiting_;                    // arrived requests, FIFO
    std::vector<int32_t> blocked_;                   // arrived follow-ups whose conversation is still running
    std::deque<std::unique_ptr<Sample>> swapped_;    // on the host tier; swapped in first
    std::deque<std::unique_ptr<Sample>> preempted_;  // to recompute; re-admitted before new requests
    std::vector<std::unique_ptr<Sample>> running_;   // admission order; preemption victims from the back
    std::vector<BatchEntry> entries_;
    std::vector<Sample *> batch_samples_;            // entries_[i] belongs to batch_samples_[i]
    std::vector<float> logits_;
    int64_t batch_tokens_ = 0;
    int64_t forks_due_ = 0;  // samples admitted this step will fork into this many more after it
    int64_t finished_samples_ = 0;
    int64_t idle_steps_ = 0;  // consecutive steps without a forward pass
    int64_t disk_hits_before_restart_ = 0;

    int64_t max_logit_rows() const {
        // One logit row per sequence, plus one per draft token when speculating.
        return int64_t(cfg_.max_seqs) * (1 + int64_t(cfg_.speculate));
    }

    // The forward pass holds each pool's batches: made again for new pools after a restart.
    void open_forward() {
        const int32_t max_blocks_per_seq = int32_t((cfg_.max_seq_len + cfg_.block_size - 1) / cfg_.block_size);
        forward_ = std::make_unique<PagedForward>(m_, *kv_, cfg_.backend, cfg_.max_seqs, batch_capacity_,
                                                  max_logit_rows(), max_blocks_per_seq);
    }

    // A server restart between two steps (--restart-at). A real server would stop admitting and let
    // the running requests finish; here they are drained by recompute instead, which keeps the
    // restart at one known step and makes the drained samples the first prompts of the new server:
    // every running and swapped-out sample is freed (its KV is lost with the pools unless its blocks
    // reach the disk: spilled earlier, or pushed down by --flush-before-restart) and re-admitted
    // first with prompt + outputs so far, as after a recompute preemption. Then the pools are
    // destroyed and made again, the disk tier re-attached to the same files: KVC_DISK_PERSISTENT
    // finds the blocks that had reached the disk.
    void restart() {
        report_.restarted = true;
        report_.restart_step = step_;
        report_.restart_reset = cfg_.reset_before_restart;
        report_.restart_flush = cfg_.flush_before_restart;
        std::deque<std::unique_ptr<Sample>> drained;
        auto drain = [&](std::unique_ptr<Sample> s) {
            kv_->free(s->seq_id);
            if (s->pending >= 0) {
                s->tokens.push_back(s->pending);
                s->pending = -1;
            }
            s->drained = true;
            report_.drained_tokens += int64_t(s->tokens.size());
            drained.push_back(std::move(s));
        };
        // Swapped-out samples were preempted before the running ones; each list keeps its order.
        report_.drained_swapped = int64_t(swapped_.size());
        report_.drained_running = int64_t(running_.size());
        for (auto &s : swapped_) drain(std::move(s));
        swapped_.clear();
        for (auto &s : running_) drain(std::move(s));
        running_.clear();
        for (auto &s : drained) preempted_.push_back(std::move(s));
        if (kv_->has_disk()) disk_hits_before_restart_ = kv_->disk_figures().hits;
        forward_.reset();  // its batches belong to the old pools
        report_.restart = kv_->restart(cfg_.flush_before_restart, cfg_.reset_before_restart);
        open_forward();
    }

    void arrivals() {
        while (next_arrival_ < w_.requests.size() && w_.requests[next_arrival_].arrival_step <= step_)
            blocked_.push_back(int32_t(next_arrival_++));
        // A follow-up can only be sent once the reply it quotes exists.
        size_t keep = 0;
        for (int32_t r : blocked_) {
            const Request &req = w_.requests[size_t(r)];
            if (req.follows < 0 || reqs_[size_t(req.follows)].done) {
                reqs_[size_t(r)].arrived = true;
                waiting_.push_back(r);
            } else {
                blocked_[keep++] = r;
            }
        }
        blocked_.resize(keep);
    }

    void add_entry(Sample *s, int64_t q_len, int64_t logit_rows = 1) {
        const int64_t len = int64_t(s->tokens.size());
        entries_.push_back({s->seq_id, s->tokens.data() + (len - q_len), q_len, len - q_len, logit_rows});
        batch_samples_.push_back(s);
        batch_tokens_ += q_len;
    }

    // Preempts the most recently admitted running sample. By swap when libkvc has a host tier with
    // room: its KV moves down and comes back intact later. Otherwise by recompute: its blocks are
    // freed now and it is re-admitted first, re-prefilling what the prefix cache no longer holds.
    void preempt_last() {
        std::unique_ptr<Sample> victim = std::move(running_.back());
        running_.pop_back();
        if (kv_->swap_out(victim->seq_id)) {
            report_.swap_preemptions++;
            swapped_.push_front(std::move(victim));
            return;
        }
        kv_->free(victim->seq_id);
        recompute_later(victim.get());
        preempted_.push_front(std::move(victim));
    }

    // A sample whose sequence was freed, to be re-admitted and re-prefilled.
    void recompute_later(Sample *s) {
        if (s->pending >= 0) {
            // The sampled-but-unwritten token becomes part of what is recomputed.
            s->tokens.push_back(s->pending);
            s->pending = -1;
        }
        report_.recompute_preemptions++;
    }

    // A swapped-out sequence keeps its blocks shared with others (a fork's prompt, a prefix hit) on
    // the device. When the lone running sample cannot grow, swapping it out and straight back in
    // would repeat forever, so instead the most recently admitted swapped-out sample that still
    // holds device blocks is preempted by recompute (kvc_free drops its references). Returns false
    // when no swapped-out sample holds any.
    bool release_swapped_holder() {
        for (auto it = swapped_.rbegin(); it != swapped_.rend(); ++it) {
            if (!kv_->holds_device_blocks((*it)->seq_id)) continue;
            std::unique_ptr<Sample> victim = std::move(*it);
            swapped_.erase(std::next(it).base());
            kv_->free(victim->seq_id);
            recompute_later(victim.get());
            preempted_.push_back(std::move(victim));
            return true;
        }
        return false;
    }

    // Every running sample appends the token it sampled last step (preempting others when the pool
    // is full), then, when speculating, its draft tokens; 1 + drafts new query tokens each. The two
    // passes keep guesses from ever preempting a sequence: drafts only take blocks nobody needs now.
    void decode_appends() {
        for (size_t i = 0; i < running_.size(); i++) {
            Sample *s = running_[i].get();
            bool preempted_self = false;
            for (;;) {
                // All pools or none: a pool short of blocks preempts, whichever it is.
                if (kv_->append(s->seq_id, &s->pending, 1) == KVC_OK) break;
                if (running_.size() == 1 && release_swapped_holder()) continue;
                preempted_self = running_.back().get() == s;
                preempt_last();
                if (preempted_self) break;
            }
            if (preempted_self) break;  // it was the last one: everything after it is preempted too
            s->appends_since_alloc++;
            s->tokens.push_back(s->pending);
            s->pending = -1;
        }
        for (auto &s : running_) add_decode_entry(s.get());
    }

    // Speculative decoding: the verify step's query is the pending token + the drafts (confirmed in
    // the pool like any appended token, so they get K/V slots and causal attention over the cached
    // prefix and each other: the prefill path). The logits at each of those positions are what plain
    // decoding would have computed one step at a time, so after_forward samples the next token from
    // each row in turn and stops at the first one that differs from the draft.
    void add_decode_entry(Sample *s) {
        int64_t k = 0;
        if (cfg_.speculate > 0) {
            // A step generates up to drafts + 1 tokens: never past max_new_tokens or the batch budget.
            const Request &req = w_.requests[size_t(s->req)];
            const int64_t room = std::min({int64_t(cfg_.speculate), req.max_new_tokens - s->generated - 1,
                                           cfg_.max_batched_tokens - batch_tokens_ - 1});
            // Under a window the drafts' append releases only what the pending token's query (the
            // previous call's first position) no longer sees, so the launch with W still goes through.
            propose_ngram_drafts(s->tokens, room, &drafts_);
            const int64_t proposed = int64_t(drafts_.size());
            k = proposed;
            while (k > 0) {
                if (kv_->append(s->seq_id, drafts_.data(), k) == KVC_OK) break;
                k /= 2;  // fewer drafts may fit in the blocks left; none = a plain decode step
            }
            if (k < proposed) report_.draft_cutbacks++;
            s->tokens.insert(s->tokens.end(), drafts_.begin(), drafts_.begin() + k);
        }
        s->drafts = k;
        report_.decode_steps++;
        if (k > 0) report_.verify_steps++;
        report_.drafted_tokens += k;
        add_entry(s, 1 + k, 1 + k);
    }
    std::vector<int32_t> drafts_;

    // Room in this step's batch for q_len new tokens, and in later batches for `seqs` more samples
    // (a request with n samples forks into n running sequences after its prefill).
    // Samples admitted this step fork after the forward pass (forks_due_ more sequences): counted
    // too, or two multi-sample requests admitted in one step could overfill the next batch.
    bool budget_allows(int64_t q_len, int32_t seqs) const {
        if (int64_t(running_.size()) + forks_due_ + seqs > cfg_.max_seqs) return false;
        if (entries_.empty()) return q_len <= batch_capacity_;
        return batch_tokens_ + q_len <= cfg_.max_batched_tokens;
    }

    // Allocates `tokens` as a new sequence if the pools (watermark rule, every pool) and the step
    // budget allow. Returns the cached token count, or -1 to stop admitting this step.
    // first_admission: count each pool's own hit for the report (before the alloc changes them).
    int64_t try_alloc(uint64_t id, const std::vector<int32_t> &tokens, int32_t req, int32_t seqs,
                      bool first_admission = false) {
        int64_t cached = kv_->common_hit(tokens);
        if (!budget_allows(int64_t(tokens.size()) - cached, seqs)) return -1;
        const int32_t verdict = kv_->can_alloc(tokens, cached);
        if (verdict == KVC_ALLOC_NEVER) {
            std::string sizes = std::to_string(cfg_.num_blocks) + " blocks";
            if (kv_->hybrid()) sizes += " (pool G) and " + std::to_string(kv_->groups()[0].num_blocks) + " (pool L)";
            throw std::runtime_error("request " + std::to_string(req) + " (" + std::to_string(tokens.size()) +
                                     " tokens) can never fit in " + (kv_->hybrid() ? "pools of " : "a pool of ") +
                                     sizes + "; use more --blocks");
        }
        if (verdict != KVC_ALLOC_OK) return -1;
        if (first_admission && kv_->hybrid()) kv_->own_hits(tokens, &own_hits_);
        if (kv_->alloc(id, tokens, cached, &cached) != KVC_OK) {
            report_.alloc_rollbacks++;
            return -1;
        }
        if (first_admission && kv_->hybrid())
            for (size_t g = 0; g < own_hits_.size(); g++) report_.pools[g].own_hit_tokens += own_hits_[g];
        return cached;
    }

    std::vector<int64_t> own_hits_;

    // Returns true if a swapped-out sample came back (it decodes from the next step on: its pending
    // token is appended then).
    bool admit() {
        bool swapped_in = false;
        while (!swapped_.empty()) {
            if (int64_t(running_.size()) + 1 > cfg_.max_seqs) return swapped_in;
            // With others running it comes back only if a block stays free for its next append:
            // at zero spare, a fork pair whose first own tokens need copy-on-write blocks was
            // swapped in and straight back out every step without decoding a token (53 of the 65
            // swaps of `--window 64 --max-new-tokens 200`, where window-aware hits keep the pool
            // full). Alone it may take the pool to the last block (the lone-sample rule applies).
            const int64_t spare = running_.empty() ? 0 : 1;
            const SwapIn got = kv_->swap_in(swapped_.front()->seq_id, spare);
            if (got == SwapIn::not_yet) return swapped_in;  // FIFO: nothing overtakes a swapped-out sample
            std::unique_ptr<Sample> s = std::move(swapped_.front());
            swapped_.pop_front();
            swapped_in = true;
            if (got == SwapIn::dropped) {  // --hybrid only: freed in both pools, recomputed instead
                recompute_later(s.get());
                preempted_.push_back(std::move(s));
                continue;
            }
            running_.push_back(std::move(s));
        }
        while (!preempted_.empty()) {
            Sample *s = preempted_.front().get();
            int64_t cached = try_alloc(s->seq_id, s->tokens, s->req, 1);
            if (cached < 0) return swapped_in;  // FIFO: nothing overtakes a preempted sample
            const int64_t computed = int64_t(s->tokens.size()) - cached;
            if (s->drained) {
                // Not a preemption: the restart's work, counted on its own.
                report_.drained_readmitted_tokens += int64_t(s->tokens.size());
                report_.drained_hit_tokens += cached;
                s->drained = false;
            } else {
                report_.recomputed_tokens += computed;
            }
            count_admission(int64_t(s->tokens.size()), cached);
            s->appends_since_alloc = 0;
            running_.push_back(std::move(preempted_.front()));
            preempted_.pop_front();
            add_entry(s, int64_t(s->tokens.size()) - cached);
        }
        while (!waiting_.empty()) {
            const int32_t r = waiting_.front();
            const Request &req = w_.requests[size_t(r)];
            RequestState &rs = reqs_[size_t(r)];
            if (rs.prompt.empty()) build_prompt(req, &rs.prompt);
            auto s = std::make_unique<Sample>();
            s->seq_id = next_seq_id_;
            int64_t cached = try_alloc(s->seq_id, rs.prompt, r, req.n, true);
            if (cached < 0) return swapped_in;
            next_seq_id_++;
            waiting_.pop_front();
            forks_due_ += req.n - 1;
            s->req = r;
            s->tokens = rs.prompt;
            s->prompt_len = int64_t(rs.prompt.size());
            s->rng.seed(cfg_.seed * 0x9E3779B97F4A7C15ull + uint64_t(r) * 64);
            report_.prompt_tokens += s->prompt_len;
            report_.hit_tokens += cached;
            report_.prefill_tokens += s->prompt_len - cached;
            count_admission(s->prompt_len, cached);
            Sample *raw = s.get();
            running_.push_back(std::move(s));
            add_entry(raw, raw->prompt_len - cached);
        }
        return swapped_in;
    }

    // Prefill work of an admission (first or re-admission) of `tokens` tokens, `cached` of them hit.
    void count_admission(int64_t tokens, int64_t cached) {
        report_.prefill_computed += tokens - cached;
        if (!report_.restarted) return;
        report_.after_admitted_tokens += tokens;
        report_.after_hit_tokens += cached;
        report_.after_prefill_computed += tokens - cached;
    }

    void build_prompt(const Request &req, std::vector<int32_t> *out) {
        if (req.follows >= 0) {
            // Earlier conversation + its reply + the new user turn: a prefix-cache hit if still cached.
            const RequestState &prev = reqs_[size_t(req.follows)];
            *out = prev.prompt;
            out->insert(out->end(), prev.output.begin(), prev.output.end());
        } else {
            *out = w_.system_prompts[size_t(req.system_prompt)];
        }
        out->insert(out->end(), req.user_turn.begin(), req.user_turn.end());
        if (int64_t(out->size()) != req.prompt_len)
            throw std::runtime_error("internal: request " + std::to_string(req.index) + " prompt length mismatch");
    }

    int32_t sample_token(const float *logits, std::mt19937_64 &rng) {
        const int32_t V = m_.cfg.vocab;
        float mx = logits[0];
        int32_t argmax = 0;
        for (int32_t i = 1; i < V; i++)
            if (logits[i] > mx) {
                mx = logits[i];
                argmax = i;
            }
        if (cfg_.temperature == 0.0f) return argmax;  // greedy: the RNG is not used
        probs_.resize(size_t(V));
        double sum = 0;
        for (int32_t i = 0; i < V; i++) sum += probs_[size_t(i)] = std::exp(double(logits[i] - mx) / cfg_.temperature);
        double u = std::uniform_real_distribution<double>(0.0, sum)(rng);
        for (int32_t i = 0; i < V; i++) {
            u -= probs_[size_t(i)];
            if (u <= 0) return i;
        }
        return V - 1;
    }
    std::vector<double> probs_;

    void take_token(Sample *s, const float *row) {
        const int32_t V = m_.cfg.vocab;
        s->logits.insert(s->logits.end(), row, row + V);
        s->pending = sample_token(row, s->rng);
        s->generated++;
        report_.generated_tokens++;
    }

    // Accepts the drafts of s while the token sampled from the verifier's row equals them; the first
    // sampled token that differs (or the one after the last draft) becomes the pending token, and the
    // pool is truncated to the accepted tokens. Each row is sampled with the sample's own RNG exactly
    // once per generated token, as in plain decoding, so the outputs are the same tokens that plain
    // decoding would produce (a deterministic draft is accepted with probability p(draft)), and every
    // row used is recorded for the reference check.
    void verify_drafts(Sample *s, const float *rows) {
        const int32_t V = m_.cfg.vocab;
        const int64_t k = s->drafts;
        const int64_t first_draft = int64_t(s->tokens.size()) - k;
        int64_t accepted = 0;
        for (;;) {
            take_token(s, rows + accepted * V);
            if (accepted == k || s->pending != s->tokens[size_t(first_draft + accepted)]) break;
            s->pending = -1;  // it is the draft, already confirmed in the pool
            accepted++;
        }
        report_.accepted_tokens += accepted;
        report_.verify_generated += accepted + 1;
        s->drafts = 0;
        if (accepted == k) {
            report_.full_accepts++;
            return;
        }
        // Rejected drafts leave the sequence; blocks they filled stay in the prefix cache (their KV
        // is right for those tokens) and libkvc never writes into a cached block it cut.
        const int64_t keep = first_draft + accepted;
        const int32_t freed = kv_->truncate(s->seq_id, keep);
        s->tokens.resize(size_t(keep));
        report_.truncates++;
        report_.truncate_freed_blocks += freed;
    }

    void after_forward() {
        const int32_t V = m_.cfg.vocab;
        report_.batch_seqs_sum += int64_t(entries_.size());
        report_.batch_tokens_sum += batch_tokens_;
        std::vector<Sample *> forked;
        size_t next_row = 0;
        for (size_t i = 0; i < batch_samples_.size(); i++) {
            Sample *s = batch_samples_[i];
            const float *row = logits_.data() + next_row * size_t(V);
            next_row += size_t(entries_[i].logit_rows);
            const Request &req = w_.requests[size_t(s->req)];
            if (s->first_admission && s->generated == 0 && req.n > 1) {
                // Parallel sampling: the prompt was prefilled once; every other sample forks it
                // (shares all blocks) and diverges by copy-on-write from its first own token on.
                for (int32_t k = 1; k < req.n; k++) {
                    auto c = std::make_unique<Sample>();
                    c->seq_id = next_seq_id_++;
                    kv_->fork(s->seq_id, c->seq_id);
                    c->req = s->req;
                    c->index = k;
                    c->tokens = s->tokens;
                    c->prompt_len = s->prompt_len;
                    c->rng.seed(cfg_.seed * 0x9E3779B97F4A7C15ull + uint64_t(s->req) * 64 + uint64_t(k));
                    c->first_admission = false;
                    take_token(c.get(), row);
                    forked.push_back(c.get());
                    running_.push_back(std::move(c));
                }
            }
            s->first_admission = false;
            if (s->drafts > 0)
                verify_drafts(s, row);
            else
                take_token(s, row);
        }
        // Finish samples that have all their tokens (forked ones included).
        for (Sample *s : batch_samples_) maybe_finish(s);
        for (Sample *s : forked) maybe_finish(s);
        size_t keep = 0;
        for (auto &s : running_)
            if (s) running_[keep++] = std::move(s);
        running_.resize(keep);
    }

    void maybe_finish(Sample *s) {
        const Request &req = w_.requests[size_t(s->req)];
        if (s->generated < req.max_new_tokens) return;
        kv_->free(s->seq_id);
        std::vector<int32_t> all = s->tokens;
        all.push_back(s->pending);
        RequestState &rs = reqs_[size_t(s->req)];
        if (s->index == 0) rs.output.assign(all.begin() + s->prompt_len, all.end());
        report_.output_digest += output_hash(*s, all);
        if (finished_samples_++ % cfg_.check_every == 0) check_against_reference(*s, all);
        report_.samples_done++;
        if (--rs.samples_left == 0) {
            rs.done = true;
            report_.requests_done++;
        }
        for (auto &r : running_)
            if (r.get() == s) r.reset();
    }

    // FNV-1a over (request, sample, generated tokens); summed over samples, so the digest does not
    // depend on the order in which samples finish.
    static uint64_t output_hash(const Sample &s, const std::vector<int32_t> &all) {
        uint64_t h = 0xcbf29ce484222325ull;
        auto mix = [&h](int64_t v) {
            for (int b = 0; b < 8; b++) {
                h ^= uint64_t(v >> (8 * b)) & 0xffu;
                h *= 0x100000001b3ull;
            }
        };
        mix(s.req);
        mix(s.index);
        for (size_t i = size_t(s.prompt_len); i < all.size(); i++) mix(all[i]);
        return h;
    }

    void check_against_reference(const Sample &s, const std::vector<int32_t> &all) {
        auto t = Clock::now();
        const int32_t V = m_.cfg.vocab;
        // Logits of positions prompt_len - 1 .. end - 2 produced the generated tokens.
        std::vector<float> ref;
        reference_logits(m_, all.data(), int64_t(all.size()) - 1, s.prompt_len - 1, cfg_.kv_dtype == KVC_DTYPE_F16,
                         layer_windows_, &ref);
        for (int64_t g = 0; g < s.generated; g++) {
            double worst = 0;
            int32_t worst_at = 0;
            for (int32_t v = 0; v < V; v++) {
                double diff = std::fabs(double(s.logits[size_t(g * V + v)]) - double(ref[size_t(g * V + v)]));
                if (!(diff <= worst)) {  // NaN counts as a mismatch
                    worst = std::isnan(diff) ? INFINITY : diff;
                    worst_at = v;
                }
            }
            report_.max_abs_diff = std::max(report_.max_abs_diff, worst);
            if (worst > cfg_.tolerance) {
                char buf[400];
                std::snprintf(buf, sizeof buf,
                              "request %d sample %d, generated token %lld (position %lld): logit[%d] paged %.6f vs dense "
                              "reference %.6f, |diff| %.3g > tolerance %.3g",
                              s.req, s.index, (long long)g, (long long)(s.prompt_len + g), worst_at,
                              double(s.logits[size_t(g * V + worst_at)]), double(ref[size_t(g * V + worst_at)]), worst,
                              cfg_.tolerance);
                throw CorrectnessError(buf);
            }
        }
        report_.checked_tokens += s.generated;
        report_.checked_samples++;
        report_.check_seconds += seconds_since(t);
    }

    // Under --hybrid the block is in pool cfg_.corrupt_kv_group (L or G), so a run shows that each
    // pool's KV is checked.
    void corrupt_one_block() {
        const PoolGroup &g = kv_->groups()[kv_->one_pool_hybrid() ? 0 : size_t(cfg_.corrupt_kv_group)];
        kvc_pool *pool = g.pool->rank(0);  // under --tp, rank 0's shard: its heads' logits go wrong
        // The oldest running sequence that was in the pool before this step (its first block holds KV).
        for (const auto &s : running_) {
            // Decoding this step (its pending token appended): its queries start at q0.
            if (s->generated == 0 || s->pending >= 0) continue;
            std::vector<int32_t> table = g.pool->block_table(s->seq_id);
            int32_t window = g.window;
            if (kv_->one_pool_hybrid()) {
                // One hybrid pool: the block of group corrupt_kv_group (0 SLIDING, 1 FULL), a page
                // of its own.
                int64_t n = 0;
                const kvc_status st = kvc_seq_group_block_table(pool, s->seq_id, cfg_.corrupt_kv_group, nullptr, 0, &n);
                if (st != KVC_ERR_BUFFER_TOO_SMALL) kvc_check(st, "kvc_seq_group_block_table");
                table.resize(size_t(n));
                kvc_check(kvc_seq_group_block_table(pool, s->seq_id, cfg_.corrupt_kv_group, table.data(), n, &n),
                          "kvc_seq_group_block_table");
                window = cfg_.corrupt_kv_group == 0 ? cfg_.window : 0;
            }
            const int64_t len = int64_t(table.size());
            // The block holding the oldest key this step reads: the first one, or with a sliding
            // window the one holding q0 - W + 1. Not simply the first held block: libkvc releases
            // by the previous call's first token, so that block may hold only keys no query of
            // this step sees.
            const int64_t q0 = int64_t(s->tokens.size()) - 1 - s->drafts;
            const int64_t oldest_key = window > 0 ? std::max<int64_t>(0, q0 - window + 1) : 0;
            const int64_t index = oldest_key / cfg_.block_size;
            if (index >= len || table[size_t(index)] < 0) continue;
            int32_t block = table[size_t(index)];
            kvc_storage_info si;
            si.struct_size = sizeof si;
            kvc_check(kvc_storage_get_info(pool, &si), "kvc_storage_get_info");
            std::vector<unsigned char> bytes(size_t(si.block_stride));
            kvc_check(kvc_storage_copy_blocks(pool, &block, 1, bytes.data(), 1), "kvc_storage_copy_blocks");
            for (size_t i = size_t(si.elem_bytes) - 1; i < bytes.size(); i += size_t(si.elem_bytes)) bytes[i] ^= 0x80;
            kvc_check(kvc_storage_copy_blocks(pool, &block, 1, bytes.data(), 0), "kvc_storage_copy_blocks");
            cfg_.corrupt_kv_at_step = -1;
            return;
        }
    }

    // The plot and the utilization figures take all pools together (one pool unless --hybrid).
    void record_step(double *util_sum) {
        kvc_stats st{};
        int64_t used_first = 0;
        for (size_t g = 0; g < kv_->groups().size(); g++) {
            const kvc_stats ps = kv_->lifetime_stats(g);  // the hit rate over the whole run
            if (g == 0) {
                st = ps;
                used_first = ps.used_blocks;
            } else {
                st.used_blocks += ps.used_blocks;
                st.cached_free_blocks += ps.cached_free_blocks;
                st.free_blocks += ps.free_blocks;
                st.total_blocks += ps.total_blocks;
                st.utilization = double(st.used_blocks) / double(st.total_blocks);
            }
            PoolReport &pr = report_.pools[g];
            pr.peak_used_blocks = std::max(pr.peak_used_blocks, ps.used_blocks);
            pr.used_block_steps += ps.used_blocks;
        }
        *util_sum += st.utilization;
        report_.peak_utilization = std::max(report_.peak_utilization, st.utilization);
        StepSample smp;
        smp.step = step_;
        smp.seconds = seconds_since(t0_) - report_.check_seconds;
        smp.used_blocks = st.used_blocks;
        smp.cached_free = st.cached_free_blocks;
        smp.free_blocks = st.free_blocks - st.cached_free_blocks;
        smp.hit_rate = st.prefix_hit_rate;
        smp.running = int32_t(entries_.size());
        smp.batch_tokens = batch_tokens_;
        smp.swap_preemptions = report_.swap_preemptions;
        smp.recompute_preemptions = report_.recompute_preemptions;
        report_.timeline.steps.push_back(smp);
        report_.peak_used_blocks = std::max(report_.peak_used_blocks, st.used_blocks);
        // The windowed pool is the first one (the only one without --hybrid).
        if (cfg_.window > 0) record_window_span(used_first);
        if (kv_->hybrid() || kv_->one_pool_hybrid()) record_window_holding();
    }

    // Blocks of pool L each running sequence holds, once it has appended twice since its (re)alloc:
    // by then libkvc releases by a decode token's position, so it holds about W / block_size + 2.
    void record_window_holding() {
        ReplicatedPool &pool = *kv_->groups()[0].pool;
        for (const auto &s : running_) {
            if (!s || s->appends_since_alloc < 2) continue;
            const std::vector<int32_t> &table = pool.block_table(s->seq_id);
            const int64_t held = std::count_if(table.begin(), table.end(), [](int32_t b) { return b >= 0; });
            report_.window_held_peak = std::max(report_.window_held_peak, held);
            report_.window_held_sum += held;
            report_.window_held_samples++;
        }
    }

    // --tp: after every step the block table of every sequence the pools hold (running and swapped
    // out) and every pool's block counters are the same on every rank.
    void check_lockstep() {
        if (kv_->ranks() == 1) return;
        lockstep_ids_.clear();
        for (const auto &s : running_) lockstep_ids_.push_back(s->seq_id);
        for (const auto &s : swapped_) lockstep_ids_.push_back(s->seq_id);
        kv_->check_lockstep(lockstep_ids_);
    }
    std::vector<uint64_t> lockstep_ids_;

    // Self-test of the lockstep check (--tp-skew-at): the last rank alone, behind the replicated
    // pool's back, allocates a one-token sequence (a fresh block: one token is never a prefix hit)
    // and keeps it. From then on that rank has one block fewer to give, so its decisions must part
    // from the others' and the run must fail. Retried each step until that rank has a free block.
    void skew_last_rank() {
        kvc_pool *last = kv_->groups()[0].pool->rank(kv_->ranks() - 1);
        const int32_t token = 0;
        int64_t cached = 0;
        const kvc_status st = kvc_alloc(last, UINT64_MAX, &token, 1, nullptr, &cached);
        if (st == KVC_ERR_OUT_OF_BLOCKS) return;
        kvc_check(st, "kvc_alloc (--tp-skew-at)");
        cfg_.tp_skew_at_step = -1;
    }

    // The blocks the running sequences' tables span, each identified by the token prefix it ends
    // (a full block: its last token; the partial last block: the sequence's end), so blocks that
    // forks and prefix hits would share without the window are counted once. Swapped-out sequences
    // hold no device blocks of their own and are left out, as in the pool's used count.
    void record_window_span(int64_t used_blocks) {
        span_ids_.clear();
        for (const auto &s : running_) {
            if (!s) continue;
            uint64_t h = 0xcbf29ce484222325ull;
            const size_t n = s->tokens.size();
            for (size_t t = 0; t < n; t++) {
                h = (h ^ uint64_t(uint32_t(s->tokens[t]))) * 0x100000001b3ull;
                if ((t + 1) % size_t(cfg_.block_size) == 0 || t + 1 == n) span_ids_.insert(h);
            }
        }
        const int64_t span = int64_t(span_ids_.size());
        report_.peak_span_blocks = std::max(report_.peak_span_blocks, span);
        report_.used_block_steps += used_blocks;
        report_.span_block_steps += span;
    }
    std::unordered_set<uint64_t> span_ids_;
};

}  // namespace

EngineReport run_engine(const Model &model, const Workload &work, const EngineConfig &cfg,
                        const std::function<void(int64_t, int64_t, const EngineReport &)> &progress) {
    Engine e(model, work, cfg);
    return e.run(progress);
}

}  // namespace serve
