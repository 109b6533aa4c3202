// One logical KV pool served as N tensor-parallel ranks: rank r's libkvc pool holds only its shard of
// the KV heads, every rank has the same num_blocks, block size, window and tier sizes, and every
// call the engine makes goes to all ranks in the same order. libkvc's determinism contract (kvc.h,
// "Determinism (tensor parallelism)") says their decisions are then identical; this wrapper checks
// it on every call instead of taking it on trust: the status and every out-value (block counts,
// cached tokens, verdicts, operation ids) of each rank must equal rank 0's, else LockstepError names
// the call and the first value that differs. With one rank it is a thin pass-through.
#pragma once

#include <kvc/kvc.h>

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace serve {

// Raised when ranks that were given the same calls decided differently.
struct LockstepError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A named counter of a libkvc statistics struct, compared across ranks.
template <class S>
struct Counter {
    const char *name;
    int64_t S::*field;
};

// A hybrid pool's groups and layer map (kvc_pool_create_hybrid); empty groups = a plain pool.
struct HybridLayout {
    std::vector<kvc_group_config> groups;
    std::vector<int32_t> layer_to_group;
};

class ReplicatedPool {
public:
    // `ranks` pools from cfg, whose head counts are already one rank's shard. name: the pool's name
    // in messages ("pool", or "L" / "G" under --hybrid).
    ReplicatedPool(std::string name, const kvc_pool_config &cfg, int32_t ranks, const HybridLayout *hybrid = nullptr);
    ~ReplicatedPool();
    ReplicatedPool(const ReplicatedPool &) = delete;
    ReplicatedPool &operator=(const ReplicatedPool &) = delete;

    int32_t ranks() const { return int32_t(pools_.size()); }
    kvc_pool *rank(int32_t r) const { return pools_[size_t(r)]; }
    const std::string &name() const { return name_; }
    int64_t block_stride() const { return block_stride_; }  // one rank's bytes per block
    int64_t rank_bytes() const { return rank_bytes_; }      // one rank's KV storage
    // Calls fanned out to every rank so far (one per logical call, whatever the rank count).
    int64_t calls() const { return calls_; }
    // The engine step, for messages.
    void set_step(int64_t step) { step_ = step; }

    // f(rank) on every rank, for calls whose arguments differ per rank (its slice of q, k, v): the
    // statuses must agree. Returns the common status.
    template <class F>
    kvc_status each_rank(const char *what, uint64_t seq, F &&f);
    // f(pool, out...) on every rank, each with its own out-values: the status and every out-value
    // must agree. Returns the common status; *outs (each may be null) get the common values.
    template <class F, class... Out>
    kvc_status call(const char *what, uint64_t seq, F &&f, Out *...outs);
    // Every listed counter of per_rank[r] must equal per_rank[0]'s.
    template <class S>
    void agree(const char *what, const std::vector<S> &per_rank, std::initializer_list<Counter<S>> counters) const;

    // The libkvc calls the engine makes, fanned out (statuses returned as libkvc returns them).
    kvc_status prefix_lookup(const int32_t *tokens, int64_t n, const kvc_keys *keys, int64_t *cached);
    kvc_status prefix_lookup_tiers(const int32_t *tokens, int64_t n, const kvc_keys *keys, int64_t *device,
                                   int64_t *host, int64_t *disk);
    kvc_status can_alloc(const int32_t *tokens, int64_t n, const kvc_keys *keys, int32_t *verdict);
    kvc_status alloc(uint64_t seq, const int32_t *tokens, int64_t n, const kvc_keys *keys, int64_t *cached);
    kvc_status append(uint64_t seq, const int32_t *tokens, int64_t n, int64_t lookahead);
    kvc_status truncate(uint64_t seq, int64_t keep, int32_t *freed);
    kvc_status fork(uint64_t parent, uint64_t child);
    kvc_status free(uint64_t seq);
    kvc_status abort(uint64_t seq);  // kvc_abort: a sequence whose KV was never computed
    kvc_status seq_num_tokens(uint64_t seq, int64_t *tokens);
    kvc_status copy_pending(int64_t *copied);
    // kvc_preemption_cost as blocks (bytes / block stride: the bytes scale with the shard).
    kvc_status swap_cost_blocks(uint64_t seq, int64_t *blocks);
    kvc_status check();
    kvc_status set_sliding_window(int32_t window);

    // kvc_pool_stats of every rank, every block counter compared; rank 0's (throws on failure).
    kvc_stats stats();
    // seq's block table on every rank, compared entry by entry; rank 0's (valid until the next call).
    // group >= 0: that KV-cache group's table of a hybrid pool (kvc_seq_group_block_table).
    const std::vector<int32_t> &block_table(uint64_t seq, int32_t group = -1);
    // A hybrid pool's KV-cache groups (0 for a plain pool).
    int32_t num_groups() const { return num_groups_; }
    // After an engine step: the tables of these sequences and the pool's counters agree.
    void check_lockstep(const std::vector<uint64_t> &seqs);

    [[noreturn]] void disagree(const char *what, uint64_t seq, int32_t r, const std::string &rank0,
                               const std::string &rank_r) const;

private:
    std::string name_;
    std::vector<kvc_pool *> pools_;
    int64_t block_stride_ = 0, rank_bytes_ = 0;
    int32_t num_groups_ = 0;
    int64_t calls_ = 0;
    int64_t step_ = -1;
    std::vector<kvc_stats> stats_;          // per rank, reused
    std::vector<int32_t> table_, other_;    // rank 0's table, another rank's (reused)
};

namespace lockstep_detail {

inline std::string str(kvc_status st) { return kvc_status_str(st); }
template <class T>
std::string str(T v) {
    return std::to_string(v);
}
template <class... T>
std::string values(const std::tuple<kvc_status, T...> &v) {
    return std::apply([](kvc_status st, const T &...x) { return (str(st) + ... + (", " + str(x))); }, v);
}

}  // namespace lockstep_detail

template <class F>
kvc_status ReplicatedPool::each_rank(const char *what, uint64_t seq, F &&f) {
    calls_++;
    const kvc_status first = f(int32_t(0));
    for (int32_t r = 1; r < ranks(); r++) {
        const kvc_status st = f(r);
        if (st != first) disagree(what, seq, r, kvc_status_str(first), kvc_status_str(st));
    }
    return first;
}

template <class F, class... Out>
kvc_status ReplicatedPool::call(const char *what, uint64_t seq, F &&f, Out *...outs) {
    calls_++;
    using Result = std::tuple<kvc_status, Out...>;
    auto run = [&](int32_t r, Result *res) {
        *res = Result{};
        std::get<0>(*res) = std::apply([&](kvc_status, Out &...o) { return f(pools_[size_t(r)], &o...); }, *res);
    };
    Result first, other;
    run(0, &first);
    for (int32_t r = 1; r < ranks(); r++) {
        run(r, &other);
        if (other != first) disagree(what, seq, r, lockstep_detail::values(first), lockstep_detail::values(other));
    }
    std::apply([&](kvc_status, const Out &...o) { ((outs ? void(*outs = o) : void()), ...); }, first);
    return std::get<0>(first);
}

template <class S>
void ReplicatedPool::agree(const char *what, const std::vector<S> &per_rank,
                           std::initializer_list<Counter<S>> counters) const {
    for (size_t r = 1; r < per_rank.size(); r++)
        for (const Counter<S> &c : counters)
            if (per_rank[r].*c.field != per_rank[0].*c.field)
                disagree(what, 0, int32_t(r), std::string(c.name) + " " + std::to_string(per_rank[0].*c.field),
                         std::string(c.name) + " " + std::to_string(per_rank[r].*c.field));
}

}  // namespace serve
