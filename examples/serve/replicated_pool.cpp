#include "replicated_pool.hpp"

#include "kvc_check.hpp"

namespace serve {

ReplicatedPool::ReplicatedPool(std::string name, const kvc_pool_config &cfg, int32_t ranks, const HybridLayout *hybrid)
    : name_(std::move(name)) {
    if (ranks < 1) throw std::runtime_error("a pool needs at least one rank");
    pools_.reserve(size_t(ranks));
    try {
        for (int32_t r = 0; r < ranks; r++) {
            kvc_pool *p = nullptr;
            if (hybrid && !hybrid->groups.empty())
                kvc_check(kvc_pool_create_hybrid(&cfg, hybrid->groups.data(), int32_t(hybrid->groups.size()),
                                                 hybrid->layer_to_group.data(), int32_t(hybrid->layer_to_group.size()), &p),
                          "kvc_pool_create_hybrid");
            else
                kvc_check(kvc_pool_create(&cfg, &p), "kvc_pool_create");
            pools_.push_back(p);
        }
    } catch (...) {
        for (kvc_pool *p : pools_) kvc_pool_destroy(p);
        throw;
    }
    kvc_storage_info si;
    si.struct_size = sizeof si;
    kvc_check(kvc_storage_get_info(pools_[0], &si), "kvc_storage_get_info");
    block_stride_ = si.block_stride;
    if (hybrid) num_groups_ = int32_t(hybrid->groups.size());
    rank_bytes_ = si.total_bytes;
    stats_.resize(size_t(ranks));
}

ReplicatedPool::~ReplicatedPool() {
    for (kvc_pool *p : pools_) kvc_pool_destroy(p);
}

void ReplicatedPool::disagree(const char *what, uint64_t seq, int32_t r, const std::string &rank0,
                              const std::string &rank_r) const {
    std::string where = name_ == "pool" ? "" : " of pool " + name_;
    std::string msg = "ranks 0 and " + std::to_string(r) + where + " decided differently on the same calls: " + what;
    if (seq != 0) msg += " (sequence " + std::to_string(seq) + ")";
    msg += ", call " + std::to_string(calls_);
    if (step_ >= 0) msg += " at engine step " + std::to_string(step_);
    msg += ": rank 0 " + rank0 + ", rank " + std::to_string(r) + " " + rank_r;
    throw LockstepError(msg);
}

kvc_status ReplicatedPool::prefix_lookup(const int32_t *tokens, int64_t n, const kvc_keys *keys, int64_t *cached) {
    return call("kvc_prefix_lookup", 0,
                [&](kvc_pool *p, int64_t *c) { return kvc_prefix_lookup(p, tokens, n, keys, c); }, cached);
}

kvc_status ReplicatedPool::prefix_lookup_tiers(const int32_t *tokens, int64_t n, const kvc_keys *keys, int64_t *device,
                                               int64_t *host, int64_t *disk) {
    return call("kvc_prefix_lookup_tiers", 0,
                [&](kvc_pool *p, int64_t *d, int64_t *h, int64_t *k) {
                    return kvc_prefix_lookup_tiers(p, tokens, n, keys, d, h, k);
                },
                device, host, disk);
}

kvc_status ReplicatedPool::can_alloc(const int32_t *tokens, int64_t n, const kvc_keys *keys, int32_t *verdict) {
    return call("kvc_can_alloc", 0, [&](kvc_pool *p, int32_t *v) { return kvc_can_alloc(p, tokens, n, keys, v); },
                verdict);
}

kvc_status ReplicatedPool::alloc(uint64_t seq, const int32_t *tokens, int64_t n, const kvc_keys *keys,
                                 int64_t *cached) {
    return call("kvc_alloc", seq, [&](kvc_pool *p, int64_t *c) { return kvc_alloc(p, seq, tokens, n, keys, c); },
                cached);
}

kvc_status ReplicatedPool::append(uint64_t seq, const int32_t *tokens, int64_t n, int64_t lookahead) {
    int32_t taken = 0;  // compared: the blocks each rank took
    return call("kvc_append", seq,
                [&](kvc_pool *p, int32_t *b) { return kvc_append(p, seq, tokens, n, lookahead, b); }, &taken);
}

kvc_status ReplicatedPool::truncate(uint64_t seq, int64_t keep, int32_t *freed) {
    return call("kvc_truncate", seq, [&](kvc_pool *p, int32_t *f) { return kvc_truncate(p, seq, keep, f); }, freed);
}

kvc_status ReplicatedPool::fork(uint64_t parent, uint64_t child) {
    return call("kvc_fork", child, [&](kvc_pool *p) { return kvc_fork(p, parent, child); });
}

kvc_status ReplicatedPool::free(uint64_t seq) {
    return call("kvc_free", seq, [&](kvc_pool *p) { return kvc_free(p, seq); });
}

kvc_status ReplicatedPool::abort(uint64_t seq) {
    return call("kvc_abort", seq, [&](kvc_pool *p) { return kvc_abort(p, seq); });
}

kvc_status ReplicatedPool::seq_num_tokens(uint64_t seq, int64_t *tokens) {
    return call("kvc_seq_num_tokens", seq, [&](kvc_pool *p, int64_t *t) { return kvc_seq_num_tokens(p, seq, t); },
                tokens);
}

kvc_status ReplicatedPool::copy_pending(int64_t *copied) {
    return call("kvc_copy_pending", 0, [&](kvc_pool *p, int64_t *c) { return kvc_copy_pending(p, nullptr, c); },
                copied);
}

kvc_status ReplicatedPool::swap_cost_blocks(uint64_t seq, int64_t *blocks) {
    return call("kvc_preemption_cost", seq,
                [&](kvc_pool *p, int64_t *b) {
                    int64_t bytes = 0;
                    const kvc_status st = kvc_preemption_cost(p, seq, &bytes, nullptr);
                    *b = bytes / block_stride_;
                    return st;
                },
                blocks);
}

kvc_status ReplicatedPool::check() {
    return call("kvc_pool_check", 0, [](kvc_pool *p) { return kvc_pool_check(p); });
}

kvc_status ReplicatedPool::set_sliding_window(int32_t window) {
    return call("kvc_pool_set_sliding_window", 0, [&](kvc_pool *p) { return kvc_pool_set_sliding_window(p, window); });
}

kvc_stats ReplicatedPool::stats() {
    kvc_check(each_rank("kvc_pool_stats", 0,
                        [&](int32_t r) {
                            kvc_stats &s = stats_[size_t(r)];
                            s.struct_size = sizeof s;
                            return kvc_pool_stats(pools_[size_t(r)], &s);
                        }),
              "kvc_pool_stats");
    // Every block count and counter of calls (the contract's "every block count in kvc_stats"); the
    // two rates follow from them.
    agree<kvc_stats>("kvc_pool_stats", stats_,
                     {{"total_blocks", &kvc_stats::total_blocks},
                      {"free_blocks", &kvc_stats::free_blocks},
                      {"used_blocks", &kvc_stats::used_blocks},
                      {"cached_free_blocks", &kvc_stats::cached_free_blocks},
                      {"pinned_blocks", &kvc_stats::pinned_blocks},
                      {"num_seqs", &kvc_stats::num_seqs},
                      {"allocs", &kvc_stats::allocs},
                      {"frees", &kvc_stats::frees},
                      {"forks", &kvc_stats::forks},
                      {"appends", &kvc_stats::appends},
                      {"blocks_allocated", &kvc_stats::blocks_allocated},
                      {"blocks_freed", &kvc_stats::blocks_freed},
                      {"cow_copies", &kvc_stats::cow_copies},
                      {"pending_copies", &kvc_stats::pending_copies},
                      {"prefix_query_tokens", &kvc_stats::prefix_query_tokens},
                      {"prefix_hit_tokens", &kvc_stats::prefix_hit_tokens},
                      {"evictions", &kvc_stats::evictions},
                      {"verify_misses", &kvc_stats::verify_misses},
                      {"events_dropped", &kvc_stats::events_dropped}});
    return stats_[0];
}

const std::vector<int32_t> &ReplicatedPool::block_table(uint64_t seq, int32_t group) {
    auto fetch = [seq, group](kvc_pool *p, std::vector<int32_t> *out) {
        int64_t len = 0;
        if (group >= 0) {
            kvc_status st = kvc_seq_group_block_table(p, seq, group, nullptr, 0, &len);
            if (st != KVC_OK && st != KVC_ERR_BUFFER_TOO_SMALL) return st;
            out->resize(size_t(len));
            return kvc_seq_group_block_table(p, seq, group, out->data(), len, &len);
        }
        kvc_status st = kvc_seq_block_table(p, seq, nullptr, 0, &len);
        if (st != KVC_OK) return st;
        out->resize(size_t(len));
        return kvc_seq_block_table(p, seq, out->data(), len, &len);
    };
    calls_++;
    const kvc_status first = fetch(pools_[0], &table_);
    for (int32_t r = 1; r < ranks(); r++) {
        const kvc_status st = fetch(pools_[size_t(r)], &other_);
        if (st != first) disagree("kvc_seq_block_table", seq, r, kvc_status_str(first), kvc_status_str(st));
        if (st != KVC_OK) continue;
        if (other_.size() != table_.size())
            disagree("kvc_seq_block_table", seq, r, std::to_string(table_.size()) + " entries",
                     std::to_string(other_.size()) + " entries");
        for (size_t i = 0; i < table_.size(); i++)
            if (other_[i] != table_[i])
                disagree("kvc_seq_block_table", seq, r, "entry " + std::to_string(i) + " = block " + std::to_string(table_[i]),
                         "entry " + std::to_string(i) + " = block " + std::to_string(other_[i]));
    }
    kvc_check(first, "kvc_seq_block_table");
    return table_;
}

void ReplicatedPool::check_lockstep(const std::vector<uint64_t> &seqs) {
    if (ranks() == 1) return;
    for (uint64_t s : seqs) {
        block_table(s);
        for (int32_t g = 1; g < num_groups_; g++) block_table(s, g);  // group 0's is the one above
    }
    stats();
}

}  // namespace serve
