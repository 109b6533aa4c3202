#include "kv_store.hpp"

#include <algorithm>
#include <utility>
#include <stdexcept>

#include "kvc_check.hpp"

namespace serve {

namespace {

// Gemma 2 / GPT-OSS alternate local and global attention layer by layer, local first.
bool windowed_layer(int32_t layer, int32_t window, bool hybrid) { return window > 0 && (!hybrid || layer % 2 == 0); }

int64_t lookup(ReplicatedPool &pool, const std::vector<int32_t> &tokens, const kvc_keys *keys) {
    int64_t cached = 0;
    kvc_check(pool.prefix_lookup(tokens.data(), int64_t(tokens.size()), keys, &cached), "kvc_prefix_lookup");
    return cached;
}

}  // namespace

std::vector<int32_t> layer_windows(int32_t num_layers, int32_t window, bool hybrid) {
    std::vector<int32_t> w(size_t(num_layers), 0);
    for (int32_t l = 0; l < num_layers; l++)
        if (windowed_layer(l, window, hybrid)) w[size_t(l)] = window;
    return w;
}

KvStore::KvStore(const ModelConfig &mc, const KvStoreConfig &cfg, std::string *swap_unavailable) : cfg_(cfg) {
    if (cfg.hybrid && cfg.window <= 0) throw std::runtime_error("a hybrid model needs a sliding window");
    if (cfg.tp < 1 || mc.num_kv_heads % cfg.tp != 0)
        throw std::runtime_error("--tp " + std::to_string(cfg.tp) + " does not divide the model's " +
                                 std::to_string(mc.num_kv_heads) + " KV heads");
    if (cfg.disk.blocks > 0 && cfg.host_blocks <= 0)
        throw std::runtime_error("a disk tier needs a host tier above it (--host-blocks > 0)");
    one_pool_hybrid_ = cfg.hybrid && !cfg.two_pools;
    groups_.resize(cfg.hybrid && cfg.two_pools ? 2 : 1);
    if (one_pool_hybrid_) {
        // One pool, two KV-cache groups: SLIDING (the windowed layers, group 0: layer 0 is one)
        // and FULL. The windows are the groups' (kvc_pool_set_sliding_window is refused).
        PoolGroup &g = groups_[0];
        g.name = "hybrid";
        for (int32_t kind : {KVC_GROUP_SLIDING, KVC_GROUP_FULL}) {
            kvc_group_config gc;
            kvc_check(kvc_group_config_default(&gc), "kvc_group_config_default");
            gc.kind = kind;
            gc.num_layers = 0;
            gc.num_kv_heads = mc.num_kv_heads / cfg.tp;
            gc.head_dim = mc.head_dim;
            gc.sliding_window = kind == KVC_GROUP_SLIDING ? cfg.window : 0;
            g.hybrid_layout.groups.push_back(gc);
        }
        for (int32_t l = 0; l < mc.num_layers; l++) {
            const int32_t grp = windowed_layer(l, cfg.window, true) ? 0 : 1;
            g.hybrid_layout.groups[size_t(grp)].num_layers++;
            g.hybrid_layout.layer_to_group.push_back(grp);
        }
    } else if (cfg.hybrid) {
        groups_[0].name = "L";
        groups_[0].window = cfg.window;
        groups_[1].name = "G";
    } else {
        groups_[0].name = "pool";
        groups_[0].window = cfg.window;
    }
    kvc_check(kvc_keys_create(&cap_keys_), "kvc_keys_create");
    placement_.resize(size_t(mc.num_layers));
    for (int32_t l = 0; l < mc.num_layers; l++) {
        const int32_t g = cfg.hybrid && cfg.two_pools && !windowed_layer(l, cfg.window, true) ? 1 : 0;
        placement_[size_t(l)] = {g, int32_t(groups_[size_t(g)].layers.size())};
        groups_[size_t(g)].layers.push_back(l);
    }
    for (PoolGroup &g : groups_) {
        kvc_pool_config &pc = g.config;
        kvc_check(kvc_pool_config_default(&pc), "kvc_pool_config_default");
        pc.block_size = cfg.block_size;
        // Pool L needs fewer blocks than G (it lets go of what its window left behind), so under
        // --hybrid it can be given its own size and the same KV memory buys G more blocks.
        g.num_blocks = cfg.hybrid && g.window > 0 && cfg.window_blocks > 0 ? cfg.window_blocks : cfg.num_blocks;
        pc.num_blocks = g.num_blocks;
        pc.num_layers = int32_t(g.layers.size());
        // One rank's shard: whole KV heads, each with its GQA group of query heads.
        pc.num_kv_heads = mc.num_kv_heads / cfg.tp;
        pc.num_q_heads = mc.num_q_heads / cfg.tp;
        pc.head_dim = mc.head_dim;
        pc.kv_dtype = cfg.kv_dtype;
        pc.max_seq_len = cfg.max_seq_len;
        pc.backend = cfg.backend;
        pc.event_capacity = 0;
        if (!one_pool_hybrid_) kvc_check(kvc_bytes_per_block(&pc, &g.bytes_per_block), "kvc_bytes_per_block");
        // Every pool and rank needs a file of its own: PATH for the only one, else PATH.L / PATH.G
        // and .rankN appended. Its identity names the pool and the rank too: the files of two
        // ranks (or of L and G) have the same layout, so only the identity tells them apart.
        if (cfg.disk.blocks > 0)
            for (int32_t r = 0; r < cfg.tp; r++)
                g.disk_files.push_back({cfg.disk.path + (cfg.hybrid ? "." + g.name : "") +
                                            (cfg.tp > 1 ? ".rank" + std::to_string(r) : ""),
                                        cfg.disk.identity + ";pool " + g.name + ";tp " + std::to_string(r) + "/" +
                                            std::to_string(cfg.tp)});
        open_pool(g, swap_unavailable);
        if (one_pool_hybrid_) g.bytes_per_block = g.pool->block_stride();  // page_bytes
    }
}

void KvStore::open_pool(PoolGroup &g, std::string *swap_unavailable) {
    g.pool = std::make_unique<ReplicatedPool>(g.name, g.config, cfg_.tp, &g.hybrid_layout);
    // Before any sequence exists (libkvc refuses it later): from now on every kvc_append lets go
    // of the blocks wholly before the window of the first token the sequence's previous call
    // added (a step's pending token, then its drafts, may go in two appends before one launch).
    if (g.window > 0) kvc_check(g.pool->set_sliding_window(g.window), "kvc_pool_set_sliding_window");
    g.kv_bytes = g.pool->rank_bytes();
    // A hybrid pool's host tier spills and restores every group's pages, and kvc_swap_out /
    // kvc_swap_in move all of a sequence's groups together (the disk tier is refused: options.cpp).
    g.swap = make_swap_tier(*g.pool, cfg_.host_blocks, cfg_.disk, g.disk_files, swap_unavailable);
}

kvc_keys *KvStore::capped(int64_t c) const {
    kvc_check(kvc_keys_set_max_cached_tokens(cap_keys_, c), "kvc_keys_set_max_cached_tokens");
    return cap_keys_;
}

KvStore::~KvStore() {
    kvc_keys_destroy(cap_keys_);
    for (PoolGroup &g : groups_) {
        g.swap.reset();
        g.pool.reset();
    }
}

int64_t KvStore::fanned_calls() const {
    int64_t n = 0;
    for (const PoolGroup &g : groups_) n += g.pool->calls();
    return n;
}

void KvStore::set_step(int64_t step) {
    for (PoolGroup &g : groups_) g.pool->set_step(step);
}

void KvStore::check_lockstep(const std::vector<uint64_t> &seqs) {
    for (PoolGroup &g : groups_) {
        g.pool->check_lockstep(seqs);
        // The tiers' block counters too (each read compares them across the ranks).
        if (g.swap && ranks() > 1) {
            g.swap->host();
            if (has_disk()) g.swap->disk();
        }
    }
}

int64_t KvStore::common_hit(const std::vector<int32_t> &tokens) {
    if (!hybrid()) return lookup(*groups_[0].pool, tokens, nullptr);
    return common_hit_below(tokens, int64_t(tokens.size()) - 1);
}

int64_t KvStore::common_hit_below(const std::vector<int32_t> &tokens, int64_t c) {
    for (;;) {
        const int64_t before = c;
        for (PoolGroup &g : groups_) c = lookup(*g.pool, tokens, capped(c));
        if (has_disk())
            for (PoolGroup &g : groups_) c = stageable_hit(g, tokens, c);
        if (c == before) return c;
    }
}

int64_t KvStore::stageable_hit(PoolGroup &g, const std::vector<int32_t> &tokens, int64_t c) {
    const int64_t bs = cfg_.block_size;
    const TierFigures host = g.swap->host();
    // Host slots kvc_alloc's promotion rounds can go through: free or cached ones (not held by a
    // swapped-out sequence, not mid-copy). One is enough for any run of disk hits.
    if (host.capacity_blocks - (host.used_blocks - host.cached_blocks) > 0) return c;
    while (c > 0) {
        int64_t on_host = 0, on_disk = 0;
        kvc_check(g.pool->prefix_lookup_tiers(tokens.data(), int64_t(tokens.size()), capped(c), nullptr, &on_host,
                                              &on_disk),
                  "kvc_prefix_lookup_tiers");
        if (on_disk == 0) return c;
        c = lookup(*g.pool, tokens, capped(c - bs));  // one block less, and the largest hit below
    }
    return 0;
}

int32_t KvStore::can_alloc(const std::vector<int32_t> &tokens, int64_t c) {
    // With two pools a pool's own hit can exceed the common one, and kvc_can_alloc of the prompt
    // would count on it: capped at c, each pool's hit is exactly c (its largest valid hit <= c,
    // which common_hit established), so the verdict is the one for this admission.
    kvc_keys *keys = hybrid() ? capped(c) : nullptr;
    int32_t worst = KVC_ALLOC_OK;
    for (PoolGroup &g : groups_) {
        int32_t verdict = KVC_ALLOC_OK;
        kvc_check(g.pool->can_alloc(tokens.data(), int64_t(tokens.size()), keys, &verdict), "kvc_can_alloc");
        worst = std::max(worst, verdict);  // OK < LATER < NEVER
    }
    return worst;
}

void KvStore::own_hits(const std::vector<int32_t> &tokens, std::vector<int64_t> *out) {
    out->clear();
    for (PoolGroup &g : groups_) out->push_back(lookup(*g.pool, tokens, nullptr));
}

kvc_status KvStore::alloc(uint64_t id, const std::vector<int32_t> &tokens, int64_t c, int64_t *cached) {
    const int64_t n = int64_t(tokens.size());
    if (!hybrid()) {
        kvc_status st = groups_[0].pool->alloc(id, tokens.data(), n, nullptr, cached);
        if (st != KVC_ERR_OUT_OF_BLOCKS) kvc_check(st, "kvc_alloc");
        if (st == KVC_OK && *cached < c) short_hits_++;
        return st;
    }
    size_t done = 0;
    kvc_status st = KVC_OK;
    kvc_keys *keys = capped(c);
    for (; done < groups_.size(); done++) {
        int64_t hit = -1;
        st = groups_[done].pool->alloc(id, tokens.data(), n, keys, &hit);
        if (st == KVC_ERR_OUT_OF_BLOCKS) break;
        kvc_check(st, "kvc_alloc");
        // kvc_alloc entered the prompt's new full blocks in the prefix cache before their KV exists:
        // a rollback must use kvc_abort (below), and a pool taking a shorter hit than promised would
        // desync the pools. common_hit keeps disk hits within what the host tier can stage, so that
        // kvc_alloc takes the hit it was promised.
        if (hit != c)
            throw std::runtime_error("pool " + groups_[done].name + " hit " + std::to_string(hit) +
                                     " tokens where the common hit is " + std::to_string(c));
    }
    if (st != KVC_OK) {
        // Not kvc_free: those pools' fresh blocks would stay cached without their KV.
        for (size_t g = 0; g < done; g++) kvc_check(groups_[g].pool->abort(id), "kvc_abort");
        return st;
    }
    *cached = c;
    return KVC_OK;
}

kvc_status KvStore::append(uint64_t id, const int32_t *tokens, int64_t n) {
    if (!hybrid()) {
        kvc_status st = groups_[0].pool->append(id, tokens, n, 0);
        if (st != KVC_ERR_OUT_OF_BLOCKS) kvc_check(st, "kvc_append");
        return st;
    }
    // All or nothing without undoing a confirmed append: kvc_append enters the blocks it fills in
    // the prefix cache before the forward pass writes their KV, so taking tokens back with
    // kvc_truncate would leave cached blocks whose KV was never computed (a later prompt hitting
    // them reads garbage; a first version did that and the reference check caught it). So pool G
    // first reserves the slots as lookahead (taken, not cached), then pool L appends for real, then
    // G confirms its reservation, which takes no block and cannot run short. G has no window: a
    // lookahead-only append moves where a windowed pool releases from, so L is never asked to.
    ReplicatedPool &l = *groups_[0].pool, &g = *groups_[1].pool;
    kvc_status st = g.append(id, nullptr, 0, n);
    if (st == KVC_ERR_OUT_OF_BLOCKS) return st;
    kvc_check(st, "kvc_append (pool G, reserve)");
    st = l.append(id, tokens, n, 0);
    if (st == KVC_ERR_OUT_OF_BLOCKS) {
        int64_t len = 0;
        kvc_check(g.seq_num_tokens(id, &len), "kvc_seq_num_tokens");
        kvc_check(g.truncate(id, len, nullptr), "kvc_truncate (pool G, drop the reservation)");
        return st;
    }
    kvc_check(st, "kvc_append (pool L)");
    kvc_check(g.append(id, tokens, n, 0), "kvc_append (pool G, confirm)");
    return KVC_OK;
}

int32_t KvStore::truncate(uint64_t id, int64_t keep) {
    int32_t total = 0;
    for (PoolGroup &g : groups_) {
        int32_t freed = 0;
        kvc_check(g.pool->truncate(id, keep, &freed), "kvc_truncate");
        total += freed;
    }
    return total;
}

void KvStore::fork(uint64_t parent, uint64_t child) {
    for (PoolGroup &g : groups_) kvc_check(g.pool->fork(parent, child), "kvc_fork");
}

void KvStore::free(uint64_t id) {
    for (PoolGroup &g : groups_) kvc_check(g.pool->free(id), "kvc_free");
}

bool KvStore::swap_out(uint64_t id) {
    if (!has_swap()) return false;
    for (size_t g = 0; g < groups_.size(); g++)
        if (!groups_[g].swap->swap_out(id)) {
            partial_swap_outs_ += g > 0;
            return false;
        }
    return true;
}

SwapIn KvStore::swap_in(uint64_t id, int64_t spare_blocks) {
    if (!has_swap()) return SwapIn::not_yet;
    if (hybrid() || spare_blocks > 0)
        for (PoolGroup &g : groups_) {
            int64_t blocks = 0;
            kvc_check(g.pool->swap_cost_blocks(id, &blocks), "kvc_preemption_cost");
            // One append at a block boundary takes a page in every group of a hybrid pool: the
            // spare room for the next append is spare_blocks per group (with 1, the SLIDING and
            // the FULL page of that append did not both fit, and the sequence was swapped in and
            // straight back out: 51 swaps instead of 4 in serve_cuda_hybrid_one_pool's run).
            const int64_t spare = spare_blocks * std::max(1, g.pool->num_groups());
            if (blocks + spare > g.pool->stats().free_blocks) return SwapIn::not_yet;
        }
    for (size_t g = 0; g < groups_.size(); g++) {
        if (groups_[g].swap->swap_in(id)) continue;
        if (g == 0) return SwapIn::not_yet;
        // Swapping the earlier pools back out can fail: blocks that were shared at swap-out and
        // stayed on the device may be this sequence's alone now and need host slots too. A
        // seen failure (serve_hybrid's run with --host-blocks 4), so the sequence is recomputed
        // instead.
        for (size_t u = 0; u < g; u++)
            if (!groups_[u].swap->swap_out(id)) {
                free(id);
                dropped_swap_ins_++;
                return SwapIn::dropped;
            }
        return SwapIn::not_yet;
    }
    return SwapIn::done;
}

bool KvStore::holds_device_blocks(uint64_t id) {
    for (PoolGroup &g : groups_)
        // Every KV-cache group's table of a hybrid pool (group 0's is kvc_seq_block_table's).
        for (int32_t grp = 0; grp < std::max(1, g.pool->num_groups()); grp++) {
            const std::vector<int32_t> &table = g.pool->block_table(id, g.pool->num_groups() > 0 ? grp : -1);
            if (std::any_of(table.begin(), table.end(), [](int32_t b) { return b >= 0; })) return true;
        }
    return false;
}

int64_t KvStore::copy_pending() {
    int64_t total = 0;
    for (PoolGroup &g : groups_) {
        int64_t copied = 0;
        kvc_check(g.pool->copy_pending(&copied), "kvc_copy_pending");
        total += copied;
    }
    return total;
}

void KvStore::check_empty() {
    for (PoolGroup &g : groups_) {
        kvc_check(g.pool->check(), "kvc_pool_check");
        const kvc_stats st = g.pool->stats();
        if (st.used_blocks != 0 || st.num_seqs != 0)
            throw std::runtime_error("pool " + g.name + " not empty after the run: " + std::to_string(st.used_blocks) +
                                     " blocks in use");
    }
}

int64_t KvStore::bytes_to_host() const { return host_figures().bytes_in; }
int64_t KvStore::bytes_to_device() const { return host_figures().bytes_out; }
int64_t KvStore::host_prefix_hits() const { return host_figures().hits; }

TierFigures KvStore::host_figures() const {
    TierFigures all;
    for (const PoolGroup &g : groups_) {
        all.add_counters(g.retired_host);
        if (!g.swap) continue;
        const TierFigures f = g.swap->host();
        all.add_counters(f);
        all.capacity_blocks += f.capacity_blocks;
        all.used_blocks += f.used_blocks;
        all.cached_blocks += f.cached_blocks;
    }
    return all;
}

TierFigures KvStore::disk_figures() const {
    TierFigures all;
    for (const PoolGroup &g : groups_) {
        all.add_counters(g.retired_disk);
        if (!g.swap) continue;
        const TierFigures f = g.swap->disk();
        all.add_counters(f);
        all.capacity_blocks += f.capacity_blocks;
        all.used_blocks += f.used_blocks;
        all.cached_blocks += f.cached_blocks;
        all.direct_io = f.direct_io;
        all.io_uring = f.io_uring;
        all.persistent = f.persistent;
    }
    return all;
}

kvc_stats KvStore::lifetime_stats(size_t g) {
    PoolGroup &pg = groups_[g];
    kvc_stats s = pg.pool->stats();
    const kvc_stats &r = pg.retired;
    for (int64_t kvc_stats::*f :
         {&kvc_stats::allocs, &kvc_stats::frees, &kvc_stats::forks, &kvc_stats::appends, &kvc_stats::blocks_allocated,
          &kvc_stats::blocks_freed, &kvc_stats::cow_copies, &kvc_stats::prefix_query_tokens,
          &kvc_stats::prefix_hit_tokens, &kvc_stats::evictions, &kvc_stats::verify_misses, &kvc_stats::events_dropped})
        s.*f += r.*f;
    s.prefix_hit_rate = s.prefix_query_tokens ? double(s.prefix_hit_tokens) / double(s.prefix_query_tokens) : 0.0;
    return s;
}

void KvStore::flush_to_disk(PoolGroup &g, RestartFigures *rf) {
    if (!g.swap || cfg_.disk.blocks <= 0) return;
    const int64_t writes_before = g.swap->disk().blocks_in;
    g.swap->flush_to_disk();  // the host tier's cached blocks, then the device's, through host slots
    rf->flushed = true;
    rf->flush_disk_writes += g.swap->disk().blocks_in - writes_before;
}

RestartFigures KvStore::restart(bool flush, bool reset_prefix_cache) {
    RestartFigures rf;
    for (size_t i = 0; i < groups_.size(); i++) {
        PoolGroup &g = groups_[i];
        if (g.pool->stats().num_seqs != 0)
            throw std::runtime_error("internal: restart of pool " + g.name + " with sequences left");
        if (reset_prefix_cache)
            kvc_check(g.pool->call("kvc_prefix_cache_reset", 0, [](kvc_pool *p) { return kvc_prefix_cache_reset(p); }),
                      "kvc_prefix_cache_reset");
        // The pool's counters retire now; the tiers' after the flush (what it moved is real I/O).
        const kvc_stats st = lifetime_stats(i);
        rf.device_cached_at_shutdown += st.cached_free_blocks;
        g.retired = st;
        if (g.swap) {
            rf.host_cached_at_shutdown += g.swap->host().cached_blocks;
            if (flush) flush_to_disk(g, &rf);
            const TierFigures host = g.swap->host(), disk = g.swap->disk();
            rf.disk_cached_kept += disk.cached_blocks;
            g.retired_host.add_counters(host);
            g.retired_disk.add_counters(disk);
        }
        // The tier before its pool: it refers to it.
        g.swap.reset();
        g.pool.reset();
        std::string why;
        open_pool(g, &why);
        if (g.swap) rf.recovered_blocks += g.swap->disk().recovered_blocks;
    }
    return rf;
}

}  // namespace serve
