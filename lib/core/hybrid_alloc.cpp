// Admission and allocation in a hybrid pool (seq_ops.hpp, design lib/core/HYBRID.md): one
// coordinated prefix hit for every group, then plan → check → commit over all groups together.
//
// The coordinated hit. Each group's hit rule is the plain pool's with the group's window (FULL:
// none, the leading run; SLIDING: the blocks the window of the first uncached token reads; SSM:
// window 1, the snapshot page of the hit's last block). Capped at L blocks, each rule finds the
// longest hit <= L; a hit valid for a group at L is valid at L only, so the admitted length is the
// fixpoint of L = min over groups of (group's hit at cap L). Each group is searched again only when
// L moved since its last search: with one FULL and one SLIDING/SSM group that is at most three
// searches.
#include <algorithm>
#include <memory>
#include <utility>

#include "core/seq_ops.hpp"
#include "core/tier_port.hpp"

namespace kvc {
namespace {

// Runs one prefix search with group G's walk buffers standing in for the pool's, then gives the
// pool its buffers back. The result's views point at G's buffers, where they stay valid while
// other groups search (until G's next search).
template <class Search>
PrefixWalk walk_in_group(kvc_pool *p, PoolGroup &G, Search &&search) {
    // Buffers sized as the pool's (the host tier's attach sizes the lower-tier ones later).
    if (G.hit_scratch.size() != p->hit_scratch.size()) G.hit_scratch.assign(p->hit_scratch.size(), -1);
    if (G.walk_tier.size() != p->walk_tier.size()) G.walk_tier.assign(p->walk_tier.size(), 0);
    if (G.walk_slot.size() != p->walk_slot.size()) G.walk_slot.assign(p->walk_slot.size(), -1);
    auto exchange = [&] {
        p->hit_scratch.swap(G.hit_scratch);
        p->walk_tier.swap(G.walk_tier);
        p->walk_slot.swap(G.walk_slot);
        p->walk_keys.swap(G.walk_keys);
        pool_refresh_walk_hits(p);
    };
    exchange();
    PrefixWalk w;
    try {
        w = search();
    } catch (...) {
        exchange();
        throw;
    }
    G.walk_hits = p->walk_hits;  // views on the buffers that go back to G (vector swaps move no data)
    exchange();
    w.hits = &G.walk_hits;
    return w;
}

// Gives every group the request's keys tagged with the group's index (KeySet::group). May throw
// std::bad_alloc (the multimodal items' copies) before anything changed.
void tag_group_keys(kvc_pool *p, const KeySet &keys) {
    for (size_t g = 0; g < p->groups.size(); ++g) {
        KeySet &k = p->groups[g].keys;
        k.assign(keys);
        k.group = uint32_t(g);
    }
}

// The coordinated length over n groups: the fixpoint of L = min over groups of search(g, L),
// from L = cap. search(g, c) runs group g's search capped at c (keeping its walk) and returns the
// length that group can give; a group is searched again only when L moved since its last search.
template <class Search>
int64_t coordinate(int32_t n, int64_t cap, Search &&search) {
    int64_t searched_at[KVC_MAX_GROUPS];
    std::fill(searched_at, searched_at + n, int64_t(-1));
    for (bool moved = true; moved && cap > 0;) {
        moved = false;
        for (int32_t g = 0; g < n && cap > 0; ++g) {
            if (searched_at[g] == cap) continue;
            const int64_t len = search(g, cap);
            searched_at[g] = cap;
            if (len < cap) {
                cap = len;
                moved = true;
            }
        }
    }
    return cap;
}

}  // namespace

void hybrid_prepare_seq(kvc_pool *p, Sequence *s) {
    const size_t others = p->groups.size() - 1;
    while (s->group_seqs.size() < others) s->group_seqs.push_back(std::make_unique<Sequence>());
    s->window = p->groups[0].window;
    s->may_share_tail = true;  // keeps kvc_append off the in-place path: hybrid_append handles every group
    for (size_t g = 1; g <= others; ++g) {
        Sequence *c = s->group_seqs[g - 1].get();
        c->reset(s->id);
        c->incarnation = s->incarnation;
        c->window = p->groups[g].window;
    }
}

void hybrid_plan_alloc(kvc_pool *p, const int32_t *tokens, int64_t num_tokens, const KeySet &keys, WalkTiers lower,
                       HybridPlan *out) {
    const int32_t n = int32_t(p->groups.size());
    PrefixWalk walks[KVC_MAX_GROUPS];
    if (p->caching) {
        tag_group_keys(p, keys);
        const int64_t cap = coordinate(n, pool_max_hit_blocks(p, num_tokens, keys), [&](int32_t g, int64_t c) {
            PoolGroup &G = p->groups[size_t(g)];
            walks[g] = walk_in_group(p, G, [&] { return pool_find_hit_blocks(p, tokens, c, G.keys, lower, G.window); });
            return walks[g].hit_blocks;
        });
        // cap 0: every group starts from scratch (drop the partial hits the searches found).
        if (cap == 0)
            for (int32_t g = 0; g < n; ++g) walks[g] = PrefixWalk{};
        out->hit_blocks = cap;
    }
    out->held = out->fresh = 0;
    int64_t free_hits = 0;
    for (int32_t g = 0; g < n; ++g) {
        out->g[g] = plan_alloc_from_walk(p, num_tokens, walks[g]);
        out->held += out->g[g].held;
        out->fresh += out->g[g].fresh;
        free_hits += walks[g].free_hits;
    }
    out->free_now = p->blocks.num_free() - free_hits;
}

kvc_status hybrid_check_alloc(kvc_pool *p, uint64_t seq_id, int64_t num_tokens, const HybridPlan &plan) {
    if (p->seqs.find(seq_id))
        return fail(KVC_ERR_SEQ_EXISTS, "kvc_alloc: sequence %llu already exists", (unsigned long long)seq_id);
    if (plan.held > p->num_blocks)
        return fail(KVC_ERR_OUT_OF_BLOCKS,
                    "kvc_alloc: %lld tokens need %lld blocks over the pool's %zu groups, the pool has only %d",
                    (long long)num_tokens, (long long)plan.held, p->groups.size(), p->num_blocks);
    if (plan.fresh > plan.free_now)
        return fail(KVC_ERR_OUT_OF_BLOCKS,
                    "kvc_alloc: sequence %llu needs %lld new blocks over the pool's %zu groups (%lld blocks of "
                    "prefix cached), only %lld are free",
                    (unsigned long long)seq_id, (long long)plan.fresh, p->groups.size(), (long long)plan.hit_blocks,
                    (long long)plan.free_now);
    return KVC_OK;
}

int32_t hybrid_alloc_verdict(const kvc_pool *p, const HybridPlan &plan) {
    return alloc_verdict_of(p, plan.held, plan.fresh, plan.free_now);
}

kvc_status hybrid_commit_alloc(kvc_pool *p, uint64_t seq_id, const int32_t *tokens, int64_t num_tokens,
                               const KeySet &keys, const HybridPlan &plan, int64_t *out_cached_tokens) {
    const int32_t n = int32_t(p->groups.size());
    Sequence *s = p->seqs.create(seq_id);
    try {
        hybrid_prepare_seq(p, s);
        for (int32_t g = 0; g < n; ++g) {
            Sequence *sg = group_seq(s, g);
            sg->table.reserve(size_t(plan.g[g].blocks));
            if (p->caching) {
                sg->tail.reserve(size_t(p->block_size));
                sg->set_keys(p->groups[size_t(g)].keys);  // the request's keys tagged by the plan
            } else {
                sg->priority = keys.priority;
            }
        }
    } catch (...) {
        p->seqs.erase(s);
        throw;
    }
    // ---- from here on nothing can fail ----
    // Every group's hits are held before any group takes a fresh block (which could evict them),
    // and the spills for all fresh blocks are planned together.
    for (int32_t g = 0; g < n; ++g) commit_alloc_hold(p, group_seq(s, g), keys, plan.g[g]);
    pool_spill_before_taking(p, plan.fresh);
    for (int32_t g = 0; g < n; ++g) commit_alloc_fill(p, group_seq(s, g), tokens, num_tokens, plan.g[g], g == 0);
    ++p->counters.allocs;
    if (out_cached_tokens) *out_cached_tokens = plan.hit_blocks * p->block_size;
    return KVC_OK;
}

// ---- kvc_prefix_pin / kvc_prefix_unpin --------------------------------------------------------
//
// Each group pins what a hit at the end of the prefix's full blocks needs in that group -- FULL its
// leading run, a windowed group its pin range (pool_window_pin_range: the blocks its window reads
// there, plus the one the block-aligned prefix's own admission needs) -- at the one length every
// group can give: the same fixpoint as the allocation's hit, with these searches. Unpinning
// searches among pinned blocks only and undoes the same ranges.
namespace {

// Group g's search at cap blocks; *len: the length this group can give there.
PrefixWalk pin_search(kvc_pool *p, PoolGroup &G, const int32_t *tokens, int64_t cap, bool pinned_only, int64_t *len) {
    if (G.window > 0) {
        PrefixWalk w =
            walk_in_group(p, G, [&] { return pool_window_pin_range(p, G.window, tokens, cap, G.keys, pinned_only); });
        *len = w.hit_blocks;
        return w;
    }
    PrefixWalk w = walk_in_group(p, G, [&] { return pool_walk_prefix(p, tokens, cap, G.keys, kWalkDevice, kPickPin); });
    int64_t run = w.hit_blocks;
    if (pinned_only) {
        run = 0;
        while (run < w.hit_blocks && p->blocks.pins(w.block(run)) > 0) ++run;
    }
    *len = run;
    return w;
}

}  // namespace

int64_t hybrid_prefix_pin(kvc_pool *p, const int32_t *tokens, int64_t full_blocks, const KeySet &keys, bool unpin) {
    const int32_t n = int32_t(p->groups.size());
    tag_group_keys(p, keys);
    PrefixWalk walks[KVC_MAX_GROUPS];
    const int64_t cap = coordinate(n, full_blocks, [&](int32_t g, int64_t c) {
        int64_t len = 0;
        walks[g] = pin_search(p, p->groups[size_t(g)], tokens, c, unpin, &len);
        return len;
    });
    if (cap == 0) return 0;
    for (int32_t g = 0; g < n; ++g) {
        const PrefixWalk &w = walks[g];
        // FULL: blocks 0 .. cap - 1 (its walk may have found more); windowed: the range held.
        const int64_t count = p->groups[size_t(g)].window > 0 ? w.held() : cap;
        if (!unpin)
            for (int64_t i = 0; i < count; ++i) p->blocks.pin(w.block(i));
        else  // deepest first, as kvc_free: blocks return to an LRU list in eviction order
            for (int64_t i = count - 1; i >= 0; --i) pool_unpin_block(p, w.block(i));
    }
    return cap;
}

}  // namespace kvc
