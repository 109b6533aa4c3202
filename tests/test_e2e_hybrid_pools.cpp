// Hybrid models (GPT-OSS, Gemma 2/3: some layers use a sliding window, the others full attention)
// as one pool per attention type: a sliding window applies to every layer of a pool, so the
// windowed layers get pool L (kvc_pool_set_sliding_window) and the global layers pool G. Every
// sequence is allocated, appended, forked and freed in both under the same id, each pool builds its
// batch once per step, and each layer attends against its group's pool and batch. A prefill starts
// at one position for all layers, so a prompt starts at the largest prefix hit valid in both pools
// (the common hit, see Hybrid::common_hit). Checked here on the CPU backend: a 4-layer model
// (layers 0 and 2 windowed, 1 and 3 global), every layer's attention against the dense reference
// at every step, through prefix hits, chunked prefill, a fork, decoding far past the window (pool L
// stays near window / block_size + 2 blocks per sequence, pool G holds everything), and a prompt
// whose hits differ between the pools.
#include <cstring>
#include <vector>

#include "kernels_world.hpp"

namespace {

using kvc_test::World;

constexpr int32_t kBs = 4, kWindow = 10, kKvHeads = 2, kQHeads = 8, kHeadDim = 64;
constexpr int32_t kModelLayers = 4;

uint64_t mix64(uint64_t x) {  // splitmix64's finalizer
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Keys capping the prefix hit at max_tokens (kvc_keys_set_max_cached_tokens; -1: no cap).
struct HitCap {
    kvc_keys *keys = nullptr;
    explicit HitCap(int64_t max_tokens) {
        OK(kvc_keys_create(&keys));
        OK(kvc_keys_set_max_cached_tokens(keys, max_tokens));
    }
    ~HitCap() { kvc_keys_destroy(keys); }
};

int64_t lookup(World &w, const std::vector<int32_t> &prompt, int64_t num_tokens, int64_t cap = -1) {
    HitCap k(cap);
    int64_t cached = -1;
    OK(kvc_prefix_lookup(w.pool, prompt.data(), num_tokens, k.keys, &cached));
    return cached;
}

// Entries of the sequence's block table that hold a block (released ones read -1).
int64_t held_blocks(World &w, uint64_t id, int64_t *table_len) {
    std::vector<int32_t> table(256);
    OK(kvc_seq_block_table(w.pool, id, table.data(), int64_t(table.size()), table_len));
    return std::count_if(table.begin(), table.begin() + *table_len, [](int32_t b) { return b >= 0; });
}

// The model: model layer l is windowed (pool L) when even, global (pool G) when odd, and is layer
// l / 2 of its pool. A layer's K/V at a position is a function of the token prefix up to it (as in
// a real model), so the dense reference of a prefix hit or a fork child needs no donor sequence.
struct Hybrid {
    World global, local;
    std::map<uint64_t, std::vector<int32_t>> toks;
    std::map<uint64_t, std::vector<uint64_t>> prefix_hash;  // [pos]: hash of tokens 0..pos
    std::vector<int64_t> rounds;                            // the last common_hit's lookups, in order
    std::mt19937 rng{17};

    Hybrid(int64_t global_blocks, int64_t local_blocks)
        : global(kBs, kKvHeads, kQHeads, kHeadDim, KVC_DTYPE_F16, global_blocks, 1),
          local(kBs, kKvHeads, kQHeads, kHeadDim, KVC_DTYPE_F16, local_blocks, 1) {
        OK(kvc_pool_set_sliding_window(local.pool, kWindow));
        local.window = kWindow;
        local.kv_source = [this](uint64_t id, int32_t layer, int64_t pos, float *k, float *v) {
            kv_row(id, 2 * layer, pos, k, v);
        };
        global.kv_source = [this](uint64_t id, int32_t layer, int64_t pos, float *k, float *v) {
            kv_row(id, 2 * layer + 1, pos, k, v);
        };
    }

    void kv_row(uint64_t id, int32_t model_layer, int64_t pos, float *k, float *v) {
        uint64_t x = prefix_hash.at(id).at(size_t(pos)) ^ (uint64_t(model_layer + 1) << 56);
        for (int32_t e = 0; e < kKvHeads * kHeadDim; ++e) {
            x = mix64(x);
            k[e] = float(x >> 40) / float(1 << 23) - 1.0f;
            v[e] = float((x >> 16) & 0xffffff) / float(1 << 23) - 1.0f;
        }
    }

    std::vector<int32_t> fresh_tokens(int64_t n) {
        std::vector<int32_t> t(static_cast<size_t>(n));
        for (auto &x : t) x = int32_t(rng() % 30000);
        return t;
    }

    void record(uint64_t id, const int32_t *t, int64_t n) {
        auto &tk = toks[id];
        auto &h = prefix_hash[id];
        for (int64_t i = 0; i < n; ++i) {
            h.push_back(mix64((h.empty() ? 0x51ed270b27ull : h.back()) ^ uint32_t(t[i])));
            tk.push_back(t[i]);
        }
    }

    // The largest prefix hit valid in both pools. A lookup capped at c
    // (kvc_keys_set_max_cached_tokens) reports the pool's largest valid hit <= c (window-aware in
    // L, the leading run in G), so alternating the two from c = n - 1 only ever steps down, never
    // past a hit both accept, and stops at the largest one. Cross-check: a lookup of the first
    // c + 1 tokens without a cap reports the same in each pool.
    int64_t common_hit(const std::vector<int32_t> &prompt) {
        rounds.clear();
        const int64_t n = int64_t(prompt.size());
        int64_t c = n - 1;
        for (;;) {
            const int64_t before = c;
            c = lookup(local, prompt, n, c);
            rounds.push_back(c);
            c = lookup(global, prompt, n, c);
            rounds.push_back(c);
            if (c == before) break;
        }
        for (World *w : {&local, &global})
            if (lookup(*w, prompt, c + 1) != c) fail_msg("common hit %lld: a lookup of %lld tokens disagrees", (long long)c, (long long)(c + 1));
        return c;
    }

    // Starts sequence `id` at the common hit c: kvc_alloc, under the cap c, of the prompt up to
    // c + chunk (chunked prefill; the rest is appended by later steps) -- each pool then hits
    // exactly c. Returns c; the step's query for it is min(n, c + chunk) - c tokens.
    int64_t admit(uint64_t id, const std::vector<int32_t> &prompt, int64_t chunk) {
        const int64_t n = int64_t(prompt.size());
        const int64_t c = common_hit(prompt);
        const int64_t placed = std::max(c + 1, std::min(n, c + chunk));
        HitCap cap(c);
        for (World *w : {&local, &global}) {
            int64_t cached = -1;
            OK(kvc_alloc(w->pool, id, prompt.data(), placed, cap.keys, &cached));
            if (cached != c) fail_msg("sequence %llu: %s pool hit %lld, common hit %lld", (unsigned long long)id,
                                      w == &local ? "windowed" : "global", (long long)cached, (long long)c);
        }
        record(id, prompt.data(), placed);
        return c;
    }

    void append(uint64_t id, const std::vector<int32_t> &t) {
        for (World *w : {&local, &global}) OK(kvc_append(w->pool, id, t.data(), int64_t(t.size()), 0, nullptr));
        record(id, t.data(), int64_t(t.size()));
    }

    void fork(uint64_t parent, uint64_t child) {
        for (World *w : {&local, &global}) OK(kvc_fork(w->pool, parent, child));
        toks[child] = toks[parent];
        prefix_hash[child] = prefix_hash[parent];
    }

    void free(uint64_t id) {
        for (World *w : {&local, &global}) {
            OK(kvc_free(w->pool, id));
            for (int32_t l = 0; l < kvc_test::kLayers; ++l) {
                w->layer_k[size_t(l)].erase(id);
                w->layer_v[size_t(l)].erase(id);
            }
        }
        toks.erase(id);
        prefix_hash.erase(id);
    }

    // One forward pass: each pool's pending copy-on-write pairs copied and its batch built once,
    // then every model layer attends against its own pool's batch.
    void step(const std::vector<uint64_t> &ids, const std::vector<int64_t> &q_lens, int32_t q_dtype,
              int32_t partition_size) {
        OK(kvc_copy_pending(local.pool, nullptr, nullptr));
        OK(kvc_copy_pending(global.pool, nullptr, nullptr));
        const World::Step sl = local.build(ids, q_lens), sg = global.build(ids, q_lens);
        for (int32_t l = 0; l < kModelLayers; ++l) {
            if (l % 2 == 0)
                local.attend(sl, l / 2, q_dtype, partition_size);
            else
                global.attend(sg, l / 2, q_dtype, partition_size);
        }
    }

    // Every sequence in `ids` decodes one token, then one step runs.
    void decode(const std::vector<uint64_t> &ids, int s) {
        for (uint64_t id : ids) append(id, fresh_tokens(1));
        step(ids, std::vector<int64_t>(ids.size(), 1), s % 2 ? KVC_DTYPE_BF16 : KVC_DTYPE_F16,
             s % 3 == 0 ? 4 : (s % 3 == 1 ? -1 : 0));
    }

    void check_pools() {
        OK(kvc_pool_check(local.pool));
        OK(kvc_pool_check(global.pool));
    }
};

std::vector<int32_t> concat(const std::vector<int32_t> &a, const std::vector<int32_t> &b) {
    std::vector<int32_t> r = a;
    r.insert(r.end(), b.begin(), b.end());
    return r;
}

// Sequences sharing system prompts: prefix hits in both pools, a chunked prefill next to decodes,
// 64 decode steps far past the window with a fork and a sequence replaced half way, every layer of
// every step against the dense reference. Pool L holds a window's worth of blocks per sequence;
// pool G every block.
void test_hybrid_shared_prompts_decode_fork(void **) {
    Hybrid m(256, 40);
    const std::vector<int32_t> s1 = m.fresh_tokens(22), s2 = m.fresh_tokens(13);
    const std::vector<int32_t> p1 = concat(s1, m.fresh_tokens(8)), p2 = concat(s1, m.fresh_tokens(5)),
                               p3 = concat(s2, m.fresh_tokens(7)), p4 = concat(s1, m.fresh_tokens(23)),
                               p6 = concat(s2, m.fresh_tokens(9));
    assert_int_equal(m.admit(1, p1, 1000), 0);
    assert_int_equal(m.admit(3, p3, 1000), 0);
    m.step({1, 3}, {30, 20}, KVC_DTYPE_F16, -1);
    // Sequence 2 hits s1's 5 full blocks in both pools (sequence 1 holds them all still).
    for (uint64_t id : {1, 3}) m.append(id, m.fresh_tokens(1));
    assert_int_equal(m.admit(2, p2, 1000), 20);
    m.step({1, 3, 2}, {1, 1, 7}, KVC_DTYPE_F16, 0);
    // Sequence 4 (45 tokens) hits them too -- in L through the window: sequence 1 released s1's
    // blocks there, and sequence 2 never took its blocks 0 and 1 -- and prefills in two chunks
    // (positions 20..31, then 32..44) next to decodes.
    for (uint64_t id : {1, 3, 2}) m.append(id, m.fresh_tokens(1));
    assert_int_equal(m.admit(4, p4, 12), 20);
    m.step({1, 3, 2, 4}, {1, 1, 1, 12}, KVC_DTYPE_BF16, 4);
    for (uint64_t id : {1, 3, 2}) m.append(id, m.fresh_tokens(1));
    m.append(4, std::vector<int32_t>(p4.begin() + 32, p4.end()));
    m.step({1, 3, 2, 4}, {1, 1, 1, 13}, KVC_DTYPE_F16, 0);

    std::vector<uint64_t> live = {1, 3, 2, 4};
    for (int s = 0; s < 64; ++s) {
        if (s == 20) {  // a fork: the child shares every block of both pools, then diverges
            m.fork(2, 5);
            live.push_back(5);
        }
        if (s == 40) {
            // Sequence 3 finishes and sequence 6 arrives with s2 again. G still caches s2's 3 full
            // blocks, but L released them around step 3 and has evicted them since, so the common
            // hit is 0: both pools recompute the prompt (the windowed pool bounds every hit).
            m.free(3);
            live.erase(std::find(live.begin(), live.end(), 3));
            assert_int_equal(lookup(m.global, p6, int64_t(p6.size())), 12);
            assert_int_equal(lookup(m.local, p6, int64_t(p6.size())), 0);
            for (uint64_t id : live) m.append(id, m.fresh_tokens(1));
            assert_int_equal(m.admit(6, p6, 1000), 0);
            std::vector<uint64_t> ids = live;
            ids.push_back(6);
            std::vector<int64_t> q(live.size(), 1);
            q.push_back(int64_t(p6.size()));
            m.step(ids, q, KVC_DTYPE_F16, 0);
            live.push_back(6);
            continue;
        }
        m.decode(live, s);
        if (s % 16 == 0) m.check_pools();
    }

    // The memory effect: in L a decoding sequence holds at most window / block_size + 2 blocks
    // (the last call's window plus the block being filled), in G all of its blocks.
    kvc_stats sl, sg;
    sl.struct_size = sg.struct_size = sizeof sl;
    OK(kvc_pool_stats(m.local.pool, &sl));
    OK(kvc_pool_stats(m.global.pool, &sg));
    int64_t total_len = 0;
    for (uint64_t id : live) {
        int64_t len = 0, table_l = 0, table_g = 0;
        OK(kvc_seq_num_tokens(m.global.pool, id, &len));
        total_len += len;
        const int64_t held_l = held_blocks(m.local, id, &table_l), held_g = held_blocks(m.global, id, &table_g);
        assert_int_equal(table_l, (len + kBs - 1) / kBs);
        assert_int_equal(table_g, table_l);
        assert_int_equal(held_g, table_g);
        if (held_l > kWindow / kBs + 2 || held_l < kWindow / kBs)
            fail_msg("sequence %llu (%lld tokens) holds %lld blocks of pool L", (unsigned long long)id, (long long)len,
                     (long long)held_l);
    }
    print_message("%zu sequences, %lld tokens: pool L uses %lld blocks, pool G %lld\n", live.size(),
                  (long long)total_len, (long long)sl.used_blocks, (long long)sg.used_blocks);
    assert_true(sl.used_blocks <= int64_t(live.size()) * (kWindow / kBs + 2));
    assert_true(sl.evictions > 0);                           // L's released blocks were reused
    assert_int_equal(sg.evictions, 0);
    m.check_pools();
    for (uint64_t id : live) m.free(id);
    m.check_pools();
}

// A prompt whose two pools report different hits. A conversation (a pinned 24-token system
// prompt + 6 tokens) decodes to 70 tokens and ends; another request then evicts 5 of its cached
// blocks in G (the deepest first: G released them from the end) and 9 in L (the oldest first: L
// released its early blocks during the decode, its last three at the end; L's pin holds only the
// system prompt's blocks 2..5, the ones a hit at its end needs). Its follow-up turn (the first 68
// tokens + 5 new) hits 68 tokens in L (blocks 14..16 cover the window of position 68, its leading
// ones are gone) and 48 in G (blocks 12..16 are gone). Neither is valid in the other pool: L misses
// blocks 9..11 that a start at 48 reads, and below that everything but the pinned system prompt's
// window; so the common hit is 24. Both allocs report 24 and every layer of the 49-token prefill
// and the decode after it matches the dense reference.
void test_hybrid_common_hit_when_pools_differ(void **) {
    Hybrid m(40, 36);
    const std::vector<int32_t> sys = m.fresh_tokens(24), turn1 = concat(sys, m.fresh_tokens(6));
    assert_int_equal(m.admit(1, turn1, 1000), 0);
    m.step({1}, {30}, KVC_DTYPE_F16, -1);
    for (World *w : {&m.local, &m.global}) {
        int64_t pinned = -1;
        OK(kvc_prefix_pin(w->pool, sys.data(), int64_t(sys.size()), nullptr, &pinned));
        assert_int_equal(pinned, 24);
    }
    for (int s = 0; s < 40; ++s) m.decode({1}, s);
    const std::vector<int32_t> history = m.toks.at(1);  // 70 tokens: full blocks 0..16
    assert_int_equal(int64_t(history.size()), 70);
    m.free(1);
    m.check_pools();

    // Another request: 28 blocks, of which G has 23 never-cached ones free and L 19.
    const std::vector<int32_t> other = m.fresh_tokens(112);
    assert_int_equal(m.admit(2, other, 1000), 0);
    m.step({2}, {112}, KVC_DTYPE_BF16, -1);
    m.free(2);

    std::vector<int32_t> turn2(history.begin(), history.begin() + 68);
    turn2 = concat(turn2, m.fresh_tokens(5));
    const int64_t n = int64_t(turn2.size());
    assert_int_equal(lookup(m.local, turn2, n), 68);
    assert_int_equal(lookup(m.global, turn2, n), 48);
    // What the recipe rests on, in each pool: a lookup of the first m tokens reports at most m - 1,
    // grows with m, and a reported hit c is reported again for the first c + 1 tokens -- so it is
    // the largest valid hit <= m - 1.
    for (World *w : {&m.local, &m.global}) {
        int64_t prev = 0;
        for (int64_t len = 1; len <= n; ++len) {
            const int64_t c = lookup(*w, turn2, len);
            if (c > len - 1 || c < prev || c % kBs != 0 || lookup(*w, turn2, c + 1) != c)
                fail_msg("%s pool: lookup of %lld tokens = %lld (previous %lld)", w == &m.local ? "windowed" : "global",
                         (long long)len, (long long)c, (long long)prev);
            prev = c;
        }
    }
    assert_int_equal(m.admit(3, turn2, 1000), 24);
    const std::vector<int64_t> expected_rounds = {68, 48, 24, 24, 24, 24};
    assert_true(m.rounds == expected_rounds);
    int64_t table_l = 0, table_g = 0;
    assert_int_equal(held_blocks(m.local, 3, &table_l), 19 - 3);  // blocks 0..2 start out released
    assert_int_equal(held_blocks(m.global, 3, &table_g), 19);
    m.step({3}, {n - 24}, KVC_DTYPE_F16, 0);
    for (int s = 0; s < 8; ++s) m.decode({3}, s);
    m.check_pools();
    m.free(3);
    for (World *w : {&m.local, &m.global}) OK(kvc_prefix_unpin(w->pool, sys.data(), int64_t(sys.size()), nullptr, nullptr));
    m.check_pools();
}

}  // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hybrid_shared_prompts_decode_fork),
        cmocka_unit_test(test_hybrid_common_hit_when_pools_differ),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
