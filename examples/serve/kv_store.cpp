#include "kv_store.hpp"

#include <algorithm>
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

KvStore::KvStore(const ModelConfig &mc, const KvStoreConfig &cfg, std::string *swap_unavailable) {
    if (cfg.hybrid && cfg.window <= 0) throw std::runtime_error("a hybrid model needs a sliding window");
    if (cfg.tp < 1 || mc.num_kv_heads % cfg.tp != 0)
        throw std::runtime_error("--tp " + std::to_string(cfg.tp) + " does not divide the model's " +
                                 std::to_string(mc.num_kv_heads) + " KV heads");
    groups_.resize(cfg.hybrid ? 2 : 1);
    if (cfg.hybrid) {
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
        const int32_t g = cfg.hybrid && !windowed_layer(l, cfg.window, true) ? 1 : 0;
        placement_[size_t(l)] = {g, int32_t(groups_[size_t(g)].layers.size())};
        groups_[size_t(g)].layers.push_back(l);
    }
    for (PoolGroup &g : groups_) {
        kvc_pool_config pc;
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
        kvc_check(kvc_bytes_per_block(&pc, &g.bytes_per_block), "kvc_bytes_per_block");
        g.pool = std::make_unique<ReplicatedPool>(g.name, pc, cfg.tp);
        // Before any sequence exists (libkvc refuses it later): from now on every kvc_append lets go
        // of the blocks wholly before the window of the first token the sequence's previous call
        // added (a step's pending token, then its drafts, may go in two appends before one launch).
        if (g.window > 0) kvc_check(g.pool->set_sliding_window(g.window), "kvc_pool_set_sliding_window");
        g.kv_bytes = g.pool->rank_bytes();
        g.swap = make_swap_tier(*g.pool, cfg.host_blocks, swap_unavailable);
    }
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
    for (PoolGroup &g : groups_) g.pool->check_lockstep(seqs);
}

int64_t KvStore::common_hit(const std::vector<int32_t> &tokens) {
    if (!hybrid()) return lookup(*groups_[0].pool, tokens, nullptr);
    int64_t c = int64_t(tokens.size()) - 1;
    for (;;) {
        const int64_t before = c;
        for (PoolGroup &g : groups_) c = lookup(*g.pool, tokens, capped(c));
        if (c == before) return c;
    }
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
        if (hit != c)
            throw std::runtime_error("pool " + groups_[done].name + " hit " + std::to_string(hit) +
                                     " tokens where the common hit is " + std::to_string(c));
    }
    if (st != KVC_OK) {
        for (size_t g = 0; g < done; g++) kvc_check(groups_[g].pool->free(id), "kvc_free");
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
            if (blocks + spare_blocks > g.pool->stats().free_blocks) return SwapIn::not_yet;
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
    for (PoolGroup &g : groups_) {
        const std::vector<int32_t> &table = g.pool->block_table(id);
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

int64_t KvStore::bytes_to_host() const {
    int64_t b = 0;
    for (const PoolGroup &g : groups_)
        if (g.swap) b += g.swap->bytes_to_host();
    return b;
}

int64_t KvStore::bytes_to_device() const {
    int64_t b = 0;
    for (const PoolGroup &g : groups_)
        if (g.swap) b += g.swap->bytes_to_device();
    return b;
}

int64_t KvStore::host_prefix_hits() const {
    int64_t h = 0;
    for (const PoolGroup &g : groups_)
        if (g.swap) h += g.swap->prefix_hits();
    return h;
}

}  // namespace serve
