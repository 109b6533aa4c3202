// Differential fuzzer for hybrid pools (kvc_pool_create_hybrid; kvc.h "Hybrid models", design
// lib/core/HYBRID.md), libFuzzer. Decodes the input into a hybrid pool (1-4 groups of kinds FULL,
// SLIDING W, SSM; block size, block count, caching, watermark, max_seq_len) and a sequence of
// operations (kvc_alloc, kvc_admit, kvc_can_alloc, kvc_prefix_lookup, kvc_append with lookahead,
// kvc_append_batch, kvc_fork, kvc_free, kvc_abort, kvc_truncate, kvc_take_pending_copies), runs each against libkvc and against a
// reference model, and after every operation compares everything observable: statuses, cached
// tokens, new blocks, verdicts, every sequence's token count and every group's block table (block
// id for block id, released entries -1), the full kvc_pool_stats, and runs kvc_pool_check. It also
// checks, on the library's answers alone, the invariants that hold whatever the model says: within
// a sequence no block id appears in two groups (or twice), each table is ceil(reserved / bs) long
// with its released entries a -1 prefix, free + used = total, and a refused call changes nothing
// (stats and tables as before).
//
// The model is model.hpp's block pool (one free queue: unhashed list + per-priority LRU, refcounts,
// copy-on-write pairs, evictions, block identities with the group as an extra key) driven group by
// group as the hybrid rules say (kvc.h and lib/core/hybrid_alloc.cpp's header): each group's
// table is a model::Seq stored under key(id, group); the coordinated hit is the fixpoint of
// L = min over groups of (the group's hit capped at L), FULL the leading cached run, SLIDING W and
// SSM (W = 1) the largest end whose window blocks are cached; kvc_alloc holds every group's hits
// first, then takes every group's fresh blocks in group order; kvc_append checks every group's
// plan, then releases every group's window blocks, then takes; kvc_free releases group n-1 first.
//
// Two library disagreements this fuzzer found on its first runs are fixed (session 16):
// kvc_prefix_lookup reported group 0's leading cached run instead of the coordinated hit, and
// hybrid_append checked each group's fresh blocks against its own window releases only (a later
// group's releases did not count for an earlier group). The model follows the documented rules.
//
// No tiers, no byte checks: hybrid pools refuse tiers, and the CPU kernels become group-aware
// elsewhere (backend NONE here). KVC_FUZZ_TRACE=1 prints each operation.
#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "kvc/kvc.h"
#include "model.hpp"
#include "stats_compare.hpp"

namespace {

// KVC_FUZZ_HYBRID_SKEW=hit: the model reports every nonzero hit one block short -- the self-test
// that a wrong coordinated hit is reported (run.sh, ctest fuzz_hybrid_skew_hit).
const bool kSkewHit = std::getenv("KVC_FUZZ_HYBRID_SKEW") != nullptr;

constexpr int kMaxIds = 6;
constexpr int kMaxGroups = 4;
constexpr int kMaxPrompt = 48;

class Input {
public:
    Input(const uint8_t *d, size_t n) : d_(d), n_(n) {}
    bool done() const { return pos_ >= n_; }
    uint8_t byte() { return pos_ < n_ ? d_[pos_++] : 0; }
    int64_t below(int64_t n) { return n <= 1 ? 0 : int64_t(byte()) % n; }

private:
    const uint8_t *d_;
    size_t n_;
    size_t pos_ = 0;
};

int g_op = 0;
const char *g_opname = "";
const bool g_trace = std::getenv("KVC_FUZZ_TRACE") != nullptr;
uint64_t g_runs = 0, g_ops = 0, g_hits = 0, g_hit_tokens = 0, g_lowered = 0, g_evictions = 0, g_refused = 0;
uint64_t g_window_released = 0, g_cows = 0, g_skip_hits = 0;

[[noreturn]] void diverge(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void diverge(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "\n*** libkvc (hybrid pool) diverges from the model: ");
    std::vfprintf(stderr, fmt, ap);
    std::fprintf(stderr, " (op #%d %s)\n    (last library error: %s)\n", g_op, g_opname, kvc_last_error());
    va_end(ap);
    std::abort();
}

#define EXPECT_EQ(what, got, want)                                                            \
    do {                                                                                      \
        long long g_ = (long long)(got), w_ = (long long)(want);                              \
        if (g_ != w_) diverge("%s: library %lld, model %lld", what, g_, w_);                  \
    } while (0)

struct Group {
    int32_t kind = KVC_GROUP_FULL;
    int32_t window = 0;  // the window its tables use: SLIDING W, SSM 1, FULL 0
};

// A hybrid sequence: its prompt and confirmed tokens live in each group's model::Seq (all equal).
struct HSeq {
    int64_t num_tokens = 0;
};

struct Model {
    model::Pool m;  // blocks, free lists, counters; its seqs hold the groups' tables under key()
    std::vector<Group> groups;
    std::map<uint64_t, HSeq> seqs;

    int32_t n() const { return int32_t(groups.size()); }
    static uint64_t key(uint64_t id, int32_t g) { return id * kMaxGroups + uint64_t(g); }
    model::Seq &gs(uint64_t id, int32_t g) { return m.seqs.at(key(id, g)); }
    model::Keys group_keys(model::Keys k, int32_t g) const {
        k.group = g;
        return k;
    }

    // ---- the coordinated hit ----
    // Group g's hit capped at `cap` blocks: its length, the first block it holds (skip) and the
    // held blocks' ids (locate()'s copy choice).
    int64_t group_hit(int32_t g, const std::vector<int32_t> &toks, int64_t cap, const model::Keys &k, int64_t *skip,
                      std::vector<int32_t> *held) const {
        *skip = 0;
        held->clear();
        const int32_t w = groups[size_t(g)].window;
        if (w <= 0) {
            for (int64_t i = 0; i < cap && i < m.num_blocks; ++i) {
                const int32_t b = m.locate(toks, i, k, model::kDeviceOnly);
                if (b < 0) break;
                held->push_back(b);
            }
            return int64_t(held->size());
        }
        for (int64_t e = cap - 1; e >= 0; --e) {
            const int64_t first_key = (e + 1) * m.bs - w + 1;
            const int64_t f = std::min(first_key > 0 ? first_key / m.bs : 0, e);
            if (e - f + 1 > m.num_blocks) continue;
            std::vector<int32_t> got;
            for (int64_t i = f; i <= e; ++i) {
                const int32_t b = m.locate(toks, i, k, model::kDeviceOnly);
                if (b < 0) break;
                got.push_back(b);
            }
            if (int64_t(got.size()) != e - f + 1) continue;
            *skip = f;
            *held = got;
            return e + 1;
        }
        return 0;
    }

    struct Plan {
        int64_t hit = 0, blocks = 0, held = 0, fresh = 0, free_now = 0;
        int64_t skip[kMaxGroups] = {};
        std::vector<int32_t> hits[kMaxGroups];
        bool lowered = false;  // some group found more than the admitted hit (coverage)
    };
    Plan plan(const std::vector<int32_t> &toks, int64_t num, const model::Keys &k, int64_t max_cached) const {
        Plan p;
        p.blocks = model::Pool::blocks_for(num, m.bs);
        if (m.caching) {
            int64_t cap = (num - 1) / m.bs;
            if (max_cached >= 0) cap = std::min(cap, max_cached / m.bs);
            int64_t first = 0;  // the best group's hit at the first cap
            for (int32_t g = 0; g < n() && cap > 0; ++g)
                first = std::max(first, group_hit(g, toks, cap, group_keys(k, g), &p.skip[g], &p.hits[g]));
            for (bool moved = true; moved && cap > 0;) {
                moved = false;
                for (int32_t g = 0; g < n() && cap > 0; ++g) {
                    const int64_t h = group_hit(g, toks, cap, group_keys(k, g), &p.skip[g], &p.hits[g]);
                    if (h < cap) {
                        cap = h;
                        moved = true;
                    }
                }
            }
            p.lowered = first > cap;
            p.hit = cap;
            for (int32_t g = 0; g < n(); ++g)
                if (cap == 0) {
                    p.skip[g] = 0;
                    p.hits[g].clear();
                } else {  // every group's hit at the final cap (each was searched there)
                    group_hit(g, toks, cap, group_keys(k, g), &p.skip[g], &p.hits[g]);
                }
        }
        int64_t free_hits = 0;
        for (int32_t g = 0; g < n(); ++g) {
            p.held += p.blocks - p.skip[g];
            p.fresh += p.blocks - p.skip[g] - int64_t(p.hits[g].size());
            for (int32_t b : p.hits[g]) free_hits += model::Pool::is_free(m.blocks[size_t(b)]);
        }
        p.free_now = m.num_free() - free_hits;
        return p;
    }
    int32_t verdict(const Plan &p) const {
        const int64_t w = m.watermark_blocks;
        if (m.num_blocks - p.fresh < w || p.held > m.num_blocks) return KVC_ALLOC_NEVER;
        if (p.free_now - p.fresh >= w) return KVC_ALLOC_OK;
        return KVC_ALLOC_LATER;
    }
    // kvc_prefix_lookup (README: lookup and can_alloc count kvc_alloc's hit): the coordinated hit.
    int64_t lookup(const std::vector<int32_t> &toks, int64_t num, const model::Keys &k, int64_t max_cached) const {
        if (!m.caching) return 0;
        return plan(toks, num, k, max_cached).hit * m.bs;
    }
    kvc_status prompt_args(int64_t num) const {
        if (num < 1) return KVC_ERR_INVALID_ARG;
        if (m.max_seq_len > 0 && num > m.max_seq_len) return KVC_ERR_MAX_LEN;
        return KVC_OK;
    }

    void commit(uint64_t id, const std::vector<int32_t> &toks, int64_t num, const model::Keys &k, const Plan &p) {
        seqs[id].num_tokens = num;
        for (int32_t g = 0; g < n(); ++g) {
            model::Seq &s = m.seqs[key(id, g)];
            s = model::Seq{};
            s.keys = group_keys(k, g);
            s.tokens.assign(toks.begin(), toks.begin() + num);
            s.table.assign(size_t(p.skip[g]), -1);
            for (int32_t b : p.hits[g]) {
                m.add_ref(b);
                m.blocks[size_t(b)].priority = k.priority;
                s.table.push_back(b);
            }
        }
        for (int32_t g = 0; g < n(); ++g) {
            model::Seq &s = gs(id, g);
            while (int64_t(s.table.size()) < p.blocks) s.table.push_back(m.take_fresh(k.priority));
            s.num_tokens = s.reserved = num;
            s.num_hashed = s.hit_blocks = p.hit;
            s.released = p.skip[g];
            s.window_from = p.hit * m.bs;
            if (m.caching) m.hash_full_blocks(s);
        }
        if (m.caching) {
            m.c.prefix_query_tokens += num;
            m.c.prefix_hit_tokens += p.hit * m.bs;
        }
        ++m.c.allocs;
        m.c.blocks_allocated += p.fresh;
    }

    model::Result alloc(uint64_t id, const std::vector<int32_t> &toks, int64_t num, const model::Keys &k, int64_t max_cached,
                        Plan *out) {
        if (kvc_status st = prompt_args(num); st != KVC_OK) return {st, 0};
        *out = plan(toks, num, k, max_cached);
        if (seqs.count(id)) return {KVC_ERR_SEQ_EXISTS, 0};
        if (out->held > m.num_blocks || out->fresh > out->free_now) return {KVC_ERR_OUT_OF_BLOCKS, 0};
        commit(id, toks, num, k, *out);
        return {KVC_OK, (out->hit - (kSkewHit && out->hit > 0)) * m.bs};
    }

    // kvc_admit: status, verdict, cached tokens.
    model::Result admit(uint64_t id, const std::vector<int32_t> &toks, int64_t num, const model::Keys &k, int64_t max_cached,
                        int32_t *verdict_out, Plan *out) {
        if (kvc_status st = prompt_args(num); st != KVC_OK) return {st, 0};
        if (seqs.count(id)) return {KVC_ERR_SEQ_EXISTS, 0};
        *out = plan(toks, num, k, max_cached);
        *verdict_out = verdict(*out);
        if (*verdict_out != KVC_ALLOC_OK) return {KVC_OK, 0};
        commit(id, toks, num, k, *out);
        return {KVC_OK, out->hit * m.bs};
    }

    // ---- append (lib/core/seq_append.cpp hybrid_append) ----
    struct GPlan {
        int64_t new_tokens = 0, new_end = 0, new_nb = 0, release_to = 0, freeable = 0, first = 0, last = 0, fresh = 0;
    };
    bool must_copy(int32_t b) const { return m.blocks[size_t(b)].ref > 1 || m.blocks[size_t(b)].pins > 0; }

    model::Result append(uint64_t id, const std::vector<int32_t> &toks, int64_t nt, int64_t nl) {
        if (nt < 0 || nl < 0 || (nt == 0 && nl == 0)) return {KVC_ERR_INVALID_ARG, 0};
        if (!seqs.count(id)) return {KVC_ERR_UNKNOWN_SEQ, 0};
        GPlan gp[kMaxGroups];
        int64_t fresh_total = 0, free_total = 0;
        for (int32_t g = 0; g < n(); ++g) {
            const model::Seq &s = gs(id, g);
            const int32_t w = groups[size_t(g)].window;
            GPlan &p = gp[g];
            p.new_tokens = s.num_tokens + nt;
            const int64_t want_end = p.new_tokens + nl;
            if (m.max_seq_len > 0 && want_end > m.max_seq_len) return {KVC_ERR_MAX_LEN, 0};
            p.new_end = std::max(s.reserved, want_end);
            const int64_t old_nb = int64_t(s.table.size());
            p.new_nb = model::Pool::blocks_for(p.new_end, m.bs);
            p.release_to = s.released;
            if (w > 0) {
                const int64_t first_key = s.window_from - w + 1;
                if (first_key > 0) p.release_to = std::max(p.release_to, first_key / m.bs);
                for (int64_t i = s.released; i < p.release_to; ++i) {
                    const model::Block &blk = m.blocks[size_t(s.table[size_t(i)])];
                    p.freeable += blk.ref == 1 && blk.pins == 0 && blk.holds == 0;
                }
            }
            if (p.new_nb - p.release_to > m.num_blocks) return {KVC_ERR_OUT_OF_BLOCKS, 0};
            p.first = s.num_tokens / m.bs;
            p.last = std::min(old_nb, model::Pool::blocks_for(want_end, m.bs));
            int64_t cows = 0;
            for (int64_t i = p.first; i < p.last; ++i) cows += must_copy(s.table[size_t(i)]);
            p.fresh = cows + p.new_nb - old_nb;
            fresh_total += p.fresh;
            free_total += p.freeable;
        }
        if (fresh_total > m.num_free() + free_total) return {KVC_ERR_OUT_OF_BLOCKS, 0};
        // Every group's window releases first (oldest first), then every group's takes.
        for (int32_t g = 0; g < n(); ++g) {
            model::Seq &s = gs(id, g);
            if (groups[size_t(g)].window <= 0) continue;
            for (int64_t i = s.released; i < gp[g].release_to; ++i) {
                m.c.blocks_freed += m.release(s.table[size_t(i)]);
                s.table[size_t(i)] = -1;
            }
            g_window_released += uint64_t(gp[g].release_to - s.released);
            s.released = gp[g].release_to;
            s.window_from = s.num_tokens;
        }
        for (int32_t g = 0; g < n(); ++g) {
            model::Seq &s = gs(id, g);
            const GPlan &p = gp[g];
            for (int64_t i = p.first; i < p.last; ++i) {
                const int32_t src = s.table[size_t(i)];
                if (!must_copy(src)) continue;
                const int32_t dst = m.take_fresh(s.keys.priority);
                m.c.blocks_freed += m.release(src);
                ++m.blocks[size_t(src)].holds;
                m.pending.push_back({src, dst});
                s.table[size_t(i)] = dst;
                ++m.c.cow_copies;
                ++g_cows;
            }
            while (int64_t(s.table.size()) < p.new_nb) s.table.push_back(m.take_fresh(s.keys.priority));
            for (int64_t i = p.first; i < p.last; ++i) {  // still cached after a truncate: leaves the cache
                model::Block &blk = m.blocks[size_t(s.table[size_t(i)])];
                blk.cached = false;
            }
            s.tokens.insert(s.tokens.end(), toks.begin(), toks.begin() + nt);
            s.num_tokens = p.new_tokens;
            s.reserved = p.new_end;
            if (m.caching) m.hash_full_blocks(s);
        }
        seqs[id].num_tokens += nt;
        ++m.c.appends;
        m.c.blocks_allocated += fresh_total;
        return {KVC_OK, fresh_total};
    }

    kvc_status fork(uint64_t parent, uint64_t child) {
        if (parent == child) return KVC_ERR_INVALID_ARG;
        if (!seqs.count(parent)) return KVC_ERR_UNKNOWN_SEQ;
        if (seqs.count(child)) return KVC_ERR_SEQ_EXISTS;
        for (int32_t g = 0; g < n(); ++g)
            if (m.fork(key(parent, g), key(child, g)) != KVC_OK) diverge("model: group fork failed");
        m.c.forks -= n() - 1;
        seqs[child] = seqs[parent];
        return KVC_OK;
    }

    model::Result free_seq(uint64_t id, bool abort) {
        if (!seqs.count(id)) return {KVC_ERR_UNKNOWN_SEQ, 0};
        int64_t uncached = 0;
        for (int32_t g = n(); g-- > 0;) {
            if (abort) uncached += m.abort_seq(key(id, g)).value;
            else m.free_seq(key(id, g));
        }
        m.c.frees -= n() - 1;
        seqs.erase(id);
        return {KVC_OK, uncached};
    }

    model::Result truncate(uint64_t id, int64_t num) {
        if (num < 1) return {KVC_ERR_INVALID_ARG, 0};
        if (!seqs.count(id)) return {KVC_ERR_UNKNOWN_SEQ, 0};
        if (num > seqs[id].num_tokens) return {KVC_ERR_INVALID_ARG, 0};
        for (int32_t g = 0; g < n(); ++g) {
            if (groups[size_t(g)].kind == KVC_GROUP_SSM && num < seqs[id].num_tokens) return {KVC_ERR_UNSUPPORTED, 0};
            const model::Seq &s = gs(id, g);
            if (s.released > 0 && num - groups[size_t(g)].window + 1 < s.released * m.bs) return {KVC_ERR_STATE, 0};
        }
        int64_t dropped = 0;
        for (int32_t g = 0; g < n(); ++g) {
            m.window = groups[size_t(g)].window;
            const model::Result r = m.truncate(key(id, g), num);
            if (r.status != KVC_OK) diverge("model: group truncate failed");
            dropped += r.value;
        }
        m.window = 0;
        seqs[id].num_tokens = num;
        return {KVC_OK, dropped};
    }
};

struct Session {
    kvc_pool *pool = nullptr;
    kvc_keys *keys = nullptr;
    Model md;
    int32_t alphabet = 3;
    std::vector<std::vector<int32_t>> past;  // freed sequences' tokens: later prompts repeat them
    ~Session() {
        kvc_keys_destroy(keys);
        kvc_pool_destroy(pool);
    }
};

int32_t template_token(int t, int64_t i, int32_t alphabet) {
    uint64_t x = uint64_t(t) * 0x9E3779B97F4A7C15ull + uint64_t(i) * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    return int32_t(x % uint64_t(alphabet));
}

// A prompt: a template prefix, or a live / freed sequence's tokens a few shorter or longer.
std::vector<int32_t> read_prompt(Input &in, Session &s, int64_t *n_out) {
    const uint8_t how = in.byte();
    std::vector<int32_t> toks;
    if (how & 1) {
        std::vector<const std::vector<int32_t> *> src;
        for (const auto &kv : s.md.seqs) src.push_back(&s.md.gs(kv.first, 0).tokens);
        for (const auto &p : s.past) src.push_back(&p);
        if (!src.empty()) {
            const std::vector<int32_t> &from = *src[size_t(how >> 1) % src.size()];
            const int64_t n = std::max<int64_t>(1, int64_t(from.size()) + in.below(9) - 4);
            for (int64_t i = 0; i < n; ++i)
                toks.push_back(i < int64_t(from.size()) ? from[size_t(i)] : template_token(0, i, s.alphabet));
            *n_out = n;
            return toks;
        }
    }
    const int64_t n = 1 + in.below(kMaxPrompt);
    const int t = int(in.below(3));
    const int64_t keep = in.below(n + 1);
    for (int64_t i = 0; i < n; ++i) toks.push_back(template_token(t, i, s.alphabet));
    for (int64_t i = keep; i < n && i < keep + 3; ++i) toks[size_t(i)] = int32_t(in.below(s.alphabet + 1));
    *n_out = n;
    return toks;
}

// Keys: NULL, or a LoRA id / priority / hit cap. *max_cached: the cap (-1 none).
const kvc_keys *read_keys(Input &in, Session &s, model::Keys *k, int64_t *max_cached) {
    const uint8_t v = in.byte();
    *k = model::Keys{};
    *max_cached = -1;
    if ((v & 3) == 0) return nullptr;
    kvc_keys_clear(s.keys);
    static const int32_t prios[] = {0, 50, 50, 100};
    k->lora = (v >> 2) & 1;
    k->priority = prios[(v >> 3) & 3];
    if (kvc_keys_set_lora(s.keys, k->lora) != KVC_OK) diverge("kvc_keys_set_lora failed");
    if (kvc_keys_set_priority(s.keys, k->priority) != KVC_OK) diverge("kvc_keys_set_priority failed");
    if (v & 0x20) {
        *max_cached = in.below(40);
        if (kvc_keys_set_max_cached_tokens(s.keys, *max_cached) != KVC_OK) diverge("set_max_cached failed");
    }
    return s.keys;
}

// ---- comparisons ----
// Group g's table of sequence id (the library's), sized by a first query.
kvc_status group_table(Session &s, uint64_t id, int32_t g, std::vector<int32_t> *out) {
    int64_t len = -1;
    kvc_status st = kvc_seq_group_block_table(s.pool, id, g, nullptr, 0, &len);
    if (st != KVC_OK) return st;
    out->assign(size_t(len) + 1, -9);
    int64_t len2 = -1;
    st = kvc_seq_group_block_table(s.pool, id, g, out->data(), len, &len2);
    if (st != KVC_OK || len2 != len) diverge("kvc_seq_group_block_table: size query %lld, then %lld (status %d)",
                                             (long long)len, (long long)len2, int(st));
    out->resize(size_t(len));
    return KVC_OK;
}

struct Snapshot {
    kvc_stats st{};
    std::vector<std::vector<int32_t>> tables;  // per id and group, in order
};

Snapshot snapshot(Session &s) {
    Snapshot snap;
    snap.st.struct_size = sizeof snap.st;
    if (kvc_pool_stats(s.pool, &snap.st) != KVC_OK) diverge("kvc_pool_stats failed");
    for (uint64_t id = 0; id < kMaxIds; ++id)
        for (int32_t g = 0; g < s.md.n(); ++g) {
            std::vector<int32_t> t;
            if (group_table(s, id, g, &t) != KVC_OK) t.assign(1, -7);  // no such sequence
            snap.tables.push_back(t);
        }
    return snap;
}

void same_snapshot(const Snapshot &a, const Snapshot &b, const char *what) {
    if (std::memcmp(&a.st, &b.st, sizeof a.st) != 0) diverge("a refused %s changed the pool's stats", what);
    if (a.tables != b.tables) diverge("a refused %s changed a block table", what);
}

void compare(Session &s) {
    Model &md = s.md;
    const model::Pool &m = md.m;
    kvc_stats st{};
    st.struct_size = sizeof st;
    if (kvc_pool_stats(s.pool, &st) != KVC_OK) diverge("kvc_pool_stats failed");
    EXPECT_EQ("free + used (library)", st.free_blocks + st.used_blocks, st.total_blocks);
    const fuzz::CounterMismatch d = fuzz::first_counter_mismatch(st, m, md.seqs.size());
    if (d.what) EXPECT_EQ(d.what, d.library, d.model);
    g_evictions = std::max<uint64_t>(g_evictions, uint64_t(st.evictions));
    for (uint64_t id = 0; id < kMaxIds; ++id) {
        int64_t nt = -1;
        const kvc_status sst = kvc_seq_num_tokens(s.pool, id, &nt);
        auto it = md.seqs.find(id);
        if (it == md.seqs.end()) {
            EXPECT_EQ("kvc_seq_num_tokens status of a dead id", sst, KVC_ERR_UNKNOWN_SEQ);
            continue;
        }
        EXPECT_EQ("kvc_seq_num_tokens status", sst, KVC_OK);
        EXPECT_EQ("kvc_seq_num_tokens", nt, it->second.num_tokens);
        std::vector<int32_t> seen;
        for (int32_t g = 0; g < md.n(); ++g) {
            std::vector<int32_t> tab;
            EXPECT_EQ("kvc_seq_group_block_table status", group_table(s, id, g, &tab), KVC_OK);
            const int32_t *buf = tab.data();
            const int64_t len = int64_t(tab.size());
            const model::Seq &q = md.gs(id, g);
            // Library-only invariants first (they name the rule broken, whatever the model says).
            EXPECT_EQ("group table length = ceil(reserved / block_size)", len, model::Pool::blocks_for(q.reserved, m.bs));
            bool in_prefix = true;
            for (int64_t i = 0; i < len; ++i) {
                if (buf[i] < 0) {
                    if (!in_prefix) diverge("seq %" PRIu64 " group %d: released entry %" PRId64 " after a held one", id, g, i);
                    continue;
                }
                in_prefix = false;
                if (std::find(seen.begin(), seen.end(), buf[i]) != seen.end())
                    diverge("seq %" PRIu64 ": block %d appears twice across its group tables (group %d entry %" PRId64 ")",
                            id, buf[i], g, i);
                seen.push_back(buf[i]);
            }
            EXPECT_EQ("group table length", len, q.table.size());
            for (int64_t i = 0; i < len; ++i)
                if (buf[i] != q.table[size_t(i)])
                    diverge("seq %" PRIu64 " group %d entry %" PRId64 ": library %d, model %d", id, g, i, buf[i],
                            q.table[size_t(i)]);
            if (g == 0) {  // kvc_seq_block_table reads group 0
                std::vector<int32_t> t0(size_t(len) + 1, -9);
                int64_t l0 = -1;
                EXPECT_EQ("kvc_seq_block_table status", kvc_seq_block_table(s.pool, id, t0.data(), len, &l0), KVC_OK);
                EXPECT_EQ("kvc_seq_block_table length (group 0)", l0, len);
                if (std::memcmp(t0.data(), buf, size_t(len) * sizeof(int32_t)) != 0) diverge("kvc_seq_block_table != group 0's");
            }
        }
    }
    if (kvc_pool_check(s.pool) != KVC_OK) diverge("kvc_pool_check: %s", kvc_last_error());
}

// ---- setup ----
bool setup(Input &in, Session &s) {
    static const int32_t sizes[] = {1, 2, 4, 4, 8, 16};
    kvc_pool_config cfg;
    kvc_pool_config_default(&cfg);
    cfg.block_size = sizes[in.below(6)];
    cfg.num_blocks = 4 + in.below(61);
    cfg.prefix_caching = in.below(8) != 0;
    static const double wms[] = {0, 0, 0.1, 0.25};
    cfg.watermark = wms[in.below(4)];
    cfg.max_seq_len = in.below(4) == 0 ? 24 + in.below(64) : 0;
    cfg.backend = KVC_BACKEND_NONE;
    cfg.event_capacity = 0;
    s.alphabet = 2 + int32_t(in.below(3));
    const int32_t ng = 1 + int32_t(in.below(kMaxGroups));
    kvc_group_config gc[kMaxGroups];
    int32_t layer_to_group[kMaxGroups];
    s.md.groups.clear();
    for (int32_t g = 0; g < ng; ++g) {
        kvc_group_config_default(&gc[g]);
        gc[g].head_dim = 8;
        const uint8_t b = in.byte();
        Group G;
        switch (b % 3) {
            case 0: G.kind = KVC_GROUP_FULL; break;
            case 1:
                G.kind = KVC_GROUP_SLIDING;
                G.window = 1 + int32_t((b / 3) % 24);
                gc[g].sliding_window = G.window;
                break;
            default:
                G.kind = KVC_GROUP_SSM;
                G.window = 1;
                gc[g].state_bytes = 32;
                break;
        }
        gc[g].kind = G.kind;
        layer_to_group[g] = g;
        s.md.groups.push_back(G);
    }
    if (kvc_pool_create_hybrid(&cfg, gc, ng, layer_to_group, ng, &s.pool) != KVC_OK)
        diverge("kvc_pool_create_hybrid refused a valid configuration: %s", kvc_last_error());
    if (kvc_keys_create(&s.keys) != KVC_OK) diverge("kvc_keys_create failed");
    s.md.m.init(cfg.block_size, int32_t(cfg.num_blocks), cfg.prefix_caching != 0, cfg.max_seq_len, cfg.watermark, 0);
    if (g_trace) {
        std::fprintf(stderr, "pool: bs %d blocks %lld caching %d watermark %.2f max_len %lld groups", cfg.block_size,
                     (long long)cfg.num_blocks, cfg.prefix_caching, cfg.watermark, (long long)cfg.max_seq_len);
        for (const Group &G : s.md.groups) std::fprintf(stderr, " %d/%d", G.kind, G.window);
        std::fprintf(stderr, "\n");
    }
    return true;
}

void remember(Session &s, uint64_t id) {
    auto it = s.md.seqs.find(id);
    if (it == s.md.seqs.end()) return;
    if (s.past.size() == 4) s.past.erase(s.past.begin());
    s.past.push_back(s.md.gs(id, 0).tokens);
}

void note_refusal(Session &s, kvc_status st, const Snapshot &before, const char *what) {
    if (st == KVC_OK) return;
    ++g_refused;
    same_snapshot(before, snapshot(s), what);
}

void op(Input &in, Session &s) {
    const uint8_t code = in.byte();
    const uint64_t id = uint64_t(in.below(kMaxIds));
    Model &md = s.md;
    switch (code % 10) {
        case 0: case 1: case 2: {  // alloc / admit
            g_opname = code % 10 == 2 ? "admit" : "alloc";
            int64_t n = 0;
            std::vector<int32_t> toks = read_prompt(in, s, &n);
            model::Keys k;
            int64_t max_cached = -1;
            const kvc_keys *keys = read_keys(in, s, &k, &max_cached);
            const Snapshot before = snapshot(s);
            Model::Plan plan;
            int64_t cached = -7;
            if (code % 10 == 2) {
                int32_t verdict = -7, want_verdict = -7;
                const model::Result r = md.admit(id, toks, n, k, max_cached, &want_verdict, &plan);
                const kvc_status st = kvc_admit(s.pool, id, toks.data(), n, keys, &verdict, &cached);
                EXPECT_EQ("kvc_admit status", st, r.status);
                if (st == KVC_OK) {
                    EXPECT_EQ("kvc_admit verdict", verdict, want_verdict);
                    if (verdict == KVC_ALLOC_OK) EXPECT_EQ("kvc_admit cached tokens", cached, r.value);
                    else same_snapshot(before, snapshot(s), "admit (verdict not OK)");
                }
                note_refusal(s, st, before, "admit");
            } else {
                const model::Result r = md.alloc(id, toks, n, k, max_cached, &plan);
                const kvc_status st = kvc_alloc(s.pool, id, toks.data(), n, keys, &cached);
                EXPECT_EQ("kvc_alloc status", st, r.status);
                if (st == KVC_OK) EXPECT_EQ("kvc_alloc cached tokens (coordinated hit)", cached, r.value);
                note_refusal(s, st, before, "alloc");
            }
            g_lowered += plan.lowered;
            if (cached > 0) {
                ++g_hits;
                g_hit_tokens += uint64_t(cached);
                for (int32_t g = 0; g < md.n(); ++g) g_skip_hits += plan.skip[g] > 0;
            }
            break;
        }
        case 3: {  // can_alloc
            g_opname = "can_alloc";
            int64_t n = 0;
            std::vector<int32_t> toks = read_prompt(in, s, &n);
            model::Keys k;
            int64_t max_cached = -1;
            const kvc_keys *keys = read_keys(in, s, &k, &max_cached);
            if (in.below(2)) {  // kvc_prefix_lookup
                g_opname = "lookup";
                int64_t cached = -7;
                const kvc_status st = kvc_prefix_lookup(s.pool, toks.data(), n, keys, &cached);
                EXPECT_EQ("kvc_prefix_lookup status", st, md.prompt_args(n) == KVC_ERR_INVALID_ARG ? KVC_ERR_INVALID_ARG : KVC_OK);
                if (st == KVC_OK) EXPECT_EQ("kvc_prefix_lookup cached tokens", cached, md.lookup(toks, n, k, max_cached));
                break;
            }
            int32_t verdict = -7;
            const kvc_status st = kvc_can_alloc(s.pool, toks.data(), n, keys, &verdict);
            const kvc_status want = md.prompt_args(n);
            EXPECT_EQ("kvc_can_alloc status", st, want);
            if (st == KVC_OK) EXPECT_EQ("kvc_can_alloc verdict", verdict, md.verdict(md.plan(toks, n, k, max_cached)));
            break;
        }
        case 6:
            if (in.below(2)) {  // kvc_append_batch: entries in order, stopping at the first refusal
                g_opname = "append_batch";
                const int32_t ns = 1 + int32_t(in.below(3));
                std::vector<uint64_t> ids{id};
                std::vector<int64_t> offs{0}, las;
                std::vector<int32_t> toks;
                for (int32_t i = 0; i < ns; ++i) {
                    if (i > 0) ids.push_back(uint64_t(in.below(kMaxIds)));
                    const int64_t nt = in.below(4);
                    for (int64_t j = 0; j < nt; ++j) toks.push_back(int32_t(in.below(s.alphabet + 1)));
                    offs.push_back(int64_t(toks.size()));
                    las.push_back(in.below(4) == 0 ? in.below(3) : 0);
                }
                toks.push_back(0);
                kvc_status want = KVC_OK;
                int32_t want_done = 0;
                std::vector<int64_t> want_nb;
                for (int32_t i = 0; i < ns && want == KVC_OK; ++i) {
                    const int64_t nt = offs[size_t(i) + 1] - offs[size_t(i)];
                    if (nt == 0 && las[size_t(i)] == 0) want = KVC_ERR_INVALID_ARG;
                }
                const Snapshot before = snapshot(s);
                for (int32_t i = 0; i < ns && want == KVC_OK; ++i) {
                    std::vector<int32_t> et(toks.begin() + offs[size_t(i)], toks.begin() + offs[size_t(i) + 1]);
                    et.push_back(0);
                    const model::Result r = md.append(ids[size_t(i)], et, offs[size_t(i) + 1] - offs[size_t(i)], las[size_t(i)]);
                    want = r.status;
                    if (r.status == KVC_OK) {
                        ++want_done;
                        want_nb.push_back(r.value);
                    }
                }
                std::vector<int32_t> nb(size_t(ns), -7);
                int32_t done = -7;
                const kvc_status st = kvc_append_batch(s.pool, ns, ids.data(), offs.data(), toks.data(), 0, las.data(),
                                                       nb.data(), &done);
                EXPECT_EQ("kvc_append_batch status", st, want);
                EXPECT_EQ("kvc_append_batch done", done, want_done);
                for (int32_t i = 0; i < want_done; ++i) EXPECT_EQ("kvc_append_batch new blocks", nb[size_t(i)], want_nb[size_t(i)]);
                if (want_done == 0) note_refusal(s, st, before, "append_batch");
                break;
            }
            [[fallthrough]];
        case 4: case 5: {  // append
            g_opname = "append";
            const int64_t nt = in.below(8) == 0 ? 0 : 1 + in.below(code % 10 == 6 ? 9 : 3);
            const int64_t nl = in.below(4) == 0 ? in.below(4) : 0;
            std::vector<int32_t> toks;
            for (int64_t i = 0; i < nt; ++i) toks.push_back(int32_t(in.below(s.alphabet + 1)));
            toks.push_back(0);  // never an empty vector's data()
            const Snapshot before = snapshot(s);
            const model::Result r = md.append(id, toks, nt, nl);
            int32_t nb = -7;
            const kvc_status st = kvc_append(s.pool, id, toks.data(), nt, nl, &nb);
            EXPECT_EQ("kvc_append status", st, r.status);
            if (st == KVC_OK) EXPECT_EQ("kvc_append new blocks", nb, r.value);
            note_refusal(s, st, before, "append");
            break;
        }
        case 7: {  // fork
            g_opname = "fork";
            const uint64_t child = uint64_t(in.below(kMaxIds));
            const kvc_status want = md.fork(id, child);
            EXPECT_EQ("kvc_fork status", kvc_fork(s.pool, id, child), want);
            break;
        }
        case 8: {  // free / abort
            const bool abort = in.below(3) == 0;
            g_opname = abort ? "abort" : "free";
            remember(s, id);
            const model::Result r = md.free_seq(id, abort);
            EXPECT_EQ(abort ? "kvc_abort status" : "kvc_free status", abort ? kvc_abort(s.pool, id) : kvc_free(s.pool, id),
                      r.status);
            break;
        }
        default: {  // truncate / take pending copies
            if (in.below(2)) {
                g_opname = "truncate";
                auto it = md.seqs.find(id);
                const int64_t cur = it == md.seqs.end() ? 4 : it->second.num_tokens;
                const int64_t num = cur - in.below(10) + 1;
                const Snapshot before = snapshot(s);
                const model::Result r = md.truncate(id, num);
                int32_t freed = -7;
                const kvc_status st = kvc_truncate(s.pool, id, num, &freed);
                EXPECT_EQ("kvc_truncate status", st, r.status);
                if (st == KVC_OK) EXPECT_EQ("kvc_truncate freed blocks", freed, r.value);
                note_refusal(s, st, before, "truncate");
            } else {
                g_opname = "take_pending_copies";
                const int64_t cap = in.below(4);
                std::vector<int32_t> src(8), dst(8);
                int64_t got = -7;
                const kvc_status st = kvc_take_pending_copies(s.pool, src.data(), dst.data(), cap, &got);
                std::vector<std::pair<int32_t, int32_t>> want;
                const model::Result r = md.m.take_pending(cap, &want);
                EXPECT_EQ("kvc_take_pending_copies status", st, r.status);
                EXPECT_EQ("kvc_take_pending_copies count", got, r.value);
                for (size_t i = 0; i < want.size(); ++i) {
                    EXPECT_EQ("pending src", src[i], want[i].first);
                    EXPECT_EQ("pending dst", dst[i], want[i].second);
                }
            }
            break;
        }
    }
}

void print_summary() {
    std::fprintf(stderr,
                 "fuzz_hybrid: %llu inputs, %llu ops; allocs with a hit %llu (%llu tokens), allocs where a group "
                 "found more than the admitted hit %llu, group hits starting past block 0 %llu, window-released blocks %llu, copy-on-write "
                 "copies %llu, refusals checked unchanged %llu, most evictions in one input %llu\n",
                 (unsigned long long)g_runs, (unsigned long long)g_ops, (unsigned long long)g_hits,
                 (unsigned long long)g_hit_tokens, (unsigned long long)g_lowered, (unsigned long long)g_skip_hits,
                 (unsigned long long)g_window_released, (unsigned long long)g_cows, (unsigned long long)g_refused,
                 (unsigned long long)g_evictions);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    std::atexit(print_summary);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Input in(data, size);
    Session s;
    g_op = 0;
    g_opname = "setup";
    if (!setup(in, s)) return 0;
    ++g_runs;
    compare(s);
    while (!in.done() && g_op < 400) {
        ++g_op;
        ++g_ops;
        op(in, s);
        if (g_trace) std::fprintf(stderr, "op #%d %s\n", g_op, g_opname);
        compare(s);
    }
    return 0;
}
