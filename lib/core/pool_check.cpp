// The invariant checker behind kvc_pool_check. O(blocks + table entries); allocates freely (it is
// a debugging aid, not a hot path). Reports the first violation found.
#include <cstring>
#include <vector>

#include "core/pool.hpp"
#include "core/tier_port.hpp"
#include "error.hpp"

namespace kvc {

#define KVC_CHECK(cond, ...)                                                        \
    do {                                                                            \
        if (!(cond)) return fail(KVC_ERR_INTERNAL, "kvc_pool_check: " __VA_ARGS__); \
    } while (0)

kvc_status pool_check_invariants(kvc_pool *p) {
    const int32_t n = p->num_blocks;
    const int32_t bs = p->block_size;
    const BlockPool &bp = p->blocks;
    const FreeQueues &q = bp.queues();

    std::vector<int32_t> host_refs = tier_host_refs(p);  // per host tier slot: swapped-out entries

    // 1. Refcount of each block == number of table references.
    std::vector<int64_t> refs(size_t(n), 0);
    std::vector<const Sequence *> live;
    kvc_status bad = KVC_OK;
    p->seqs.for_each([&](uint64_t id, const Sequence *s) {
        if (s->id != id && bad == KVC_OK)
            bad = fail(KVC_ERR_INTERNAL, "kvc_pool_check: sequence %llu stored under id %llu",
                       (unsigned long long)s->id, (unsigned long long)id);
        live.push_back(s);
    });
    if (bad != KVC_OK) return bad;
    KVC_CHECK(live.size() == p->seqs.size(), "%zu sequences found, the table counts %zu", live.size(), p->seqs.size());
    // A hybrid pool's sequences have one table per group: each is checked as a sequence of its own,
    // with its group's window, and must agree with group 0's on the lengths.
    std::vector<int32_t> table_group(live.size(), 0);
    if (p->hybrid) {
        const size_t n0 = live.size();
        for (size_t i = 0; i < n0; ++i) {
            const Sequence *s0 = live[i];
            KVC_CHECK(s0->group_seqs.size() + 1 >= p->groups.size(), "sequence %llu has %zu group tables of %zu",
                      (unsigned long long)s0->id, s0->group_seqs.size() + 1, p->groups.size());
            for (int32_t g = 1; g < int32_t(p->groups.size()); ++g) {
                const Sequence *sg = group_seq(s0, g);
                KVC_CHECK(sg->id == s0->id && sg->num_tokens == s0->num_tokens && sg->reserved_end == s0->reserved_end,
                          "sequence %llu: group %d's table has %lld tokens (%lld reserved), group 0's %lld (%lld)",
                          (unsigned long long)s0->id, g, (long long)sg->num_tokens, (long long)sg->reserved_end,
                          (long long)s0->num_tokens, (long long)s0->reserved_end);
                live.push_back(sg);
                table_group.push_back(g);
            }
        }
    }
    for (size_t t = 0; t < live.size(); ++t) {
        const Sequence *s = live[t];
        const int32_t window = p->hybrid ? p->groups[size_t(table_group[t])].window : p->sliding_window;
        KVC_CHECK(table_group[t] > 0 || p->seqs.find(s->id) == s, "sequence %llu is not found under its own id",
                  (unsigned long long)s->id);
        KVC_CHECK(s->window == window, "sequence %llu (group %d) has window %d, its table's is %d",
                  (unsigned long long)s->id, table_group[t], s->window, window);
        KVC_CHECK(s->num_tokens >= 0 && s->num_tokens <= s->reserved_end,
                  "sequence %llu has %lld tokens but %lld reserved slots", (unsigned long long)s->id,
                  (long long)s->num_tokens, (long long)s->reserved_end);
        int64_t want = s->reserved_end == 0 ? 0 : (s->reserved_end - 1) / bs + 1;
        KVC_CHECK(int64_t(s->table.size()) == want, "sequence %llu has %zu blocks for %lld reserved slots",
                  (unsigned long long)s->id, s->table.size(), (long long)s->reserved_end);
        if (p->caching && s->hash_stopped) {
            KVC_CHECK(s->tail.empty() && s->num_hashed <= s->num_tokens / bs,
                      "sequence %llu stopped hashing but keeps %zu token ids, %lld hashed blocks of %lld tokens",
                      (unsigned long long)s->id, s->tail.size(), (long long)s->num_hashed, (long long)s->num_tokens);
        } else if (p->caching) {
            KVC_CHECK(int64_t(s->tail.size()) == s->num_tokens - s->num_hashed * bs,
                      "sequence %llu keeps %zu unhashed token ids for %lld tokens, %lld hashed blocks",
                      (unsigned long long)s->id, s->tail.size(), (long long)s->num_tokens, (long long)s->num_hashed);
            KVC_CHECK(!p->caching || s->tail.capacity() >= size_t(bs), "sequence %llu tail capacity %zu < block size",
                      (unsigned long long)s->id, s->tail.capacity());
            KVC_CHECK(s->num_hashed == s->num_tokens / bs, "sequence %llu hashed %lld blocks of %lld full ones",
                      (unsigned long long)s->id, (long long)s->num_hashed, (long long)(s->num_tokens / bs));
        }
        if (kvc_status st = tier_check_sequence(p, s, &host_refs); st != KVC_OK) return st;
        KVC_CHECK(s->window_from >= 0 && s->window_from <= s->num_tokens,
                  "sequence %llu: window_from %lld of %lld tokens", (unsigned long long)s->id,
                  (long long)s->window_from, (long long)s->num_tokens);
        KVC_CHECK(s->released >= 0 && s->released <= int64_t(s->table.size()) && (s->released == 0 || window > 0) &&
                      (s->released == 0 || s->released * bs <= s->num_tokens - window + 1),
                  "sequence %llu released %lld blocks of %zu (%lld tokens, window %d)", (unsigned long long)s->id,
                  (long long)s->released, s->table.size(), (long long)s->num_tokens, window);
        for (int64_t i = 0; i < s->released; ++i)
            KVC_CHECK(s->table[size_t(i)] == -1, "sequence %llu released entry %lld still names block %d",
                      (unsigned long long)s->id, (long long)i, s->table[size_t(i)]);
        for (size_t i = size_t(s->released); i < s->table.size(); ++i) {
            const int32_t b = s->table[i];
            if (b < 0 && s->swapped_out) continue;  // in a host tier slot (checked by tier_check)
            KVC_CHECK(b >= 0 && b < n, "sequence %llu references block %d outside [0, %d)", (unsigned long long)s->id,
                      b, n);
            ++refs[size_t(b)];
        }
    }
    // Blocks leased by a transfer export or being filled by an import (lib/transfer/pool_hooks.cpp).
    if (!p->ext_refs.empty())
        for (int32_t b = 0; b < n; ++b) refs[size_t(b)] += p->ext_refs[size_t(b)];
    // A pending copy-on-write pair holds its source until the copy has read it.
    std::vector<int64_t> holds(size_t(n), 0);
    for (int64_t i = 0; i < p->copies.size(); ++i) {
        const int32_t s = p->copies.src_at(i);
        if (s >= 0 && s < n) ++holds[size_t(s)];
    }
    int64_t used = 0, pinned = 0, total_holds = 0;
    for (int32_t b = 0; b < n; ++b) {
        KVC_CHECK(bp.refcount(b) == refs[size_t(b)], "block %d has refcount %d but %lld table references", b,
                  bp.refcount(b), (long long)refs[size_t(b)]);
        // Drained pairs still being copied (kvc_copy_pending, outside the lock) keep their holds.
        if (p->copies.in_flight() == 0)
            KVC_CHECK(bp.copy_holds(b) == holds[size_t(b)],
                      "block %d has %d copy holds but is the source of %lld pending pairs", b, bp.copy_holds(b),
                      (long long)holds[size_t(b)]);
        else
            KVC_CHECK(bp.copy_holds(b) >= holds[size_t(b)],
                      "block %d has %d copy holds but is the source of %lld pending pairs", b, bp.copy_holds(b),
                      (long long)holds[size_t(b)]);
        total_holds += bp.copy_holds(b);
        KVC_CHECK(bp.pins(b) >= 0, "block %d has negative pin count %d", b, bp.pins(b));
        KVC_CHECK(bp.priority(b) >= KVC_PRIORITY_MIN && bp.priority(b) <= KVC_PRIORITY_MAX, "block %d has priority %d",
                  b, bp.priority(b));
        if (bp.refcount(b) > 0 || bp.copy_holds(b) > 0) ++used;
        if (bp.pins(b) > 0) {
            ++pinned;
            KVC_CHECK(bp.cached(b), "block %d is pinned but not cached", b);
        }
    }
    // A pending pair holds its src; a pair being copied holds its src and its dst.
    KVC_CHECK(total_holds == p->copies.size() + 2 * p->copies.in_flight(),
              "%lld copy holds for %lld pending pairs and %lld being copied", (long long)total_holds,
              (long long)p->copies.size(), (long long)p->copies.in_flight());
    KVC_CHECK(used == bp.num_used(), "%lld blocks in use but the counter says %lld", (long long)used,
              (long long)bp.num_used());
    KVC_CHECK(pinned == bp.num_pinned(), "%lld blocks pinned but the counter says %lld", (long long)pinned,
              (long long)bp.num_pinned());

    // 2. Free lists hold exactly the refcount-0 unpinned blocks, each once, in the right list.
    std::vector<uint8_t> seen(size_t(n), 0);
    int64_t listed = 0;
    for (int list = 0; list < FreeQueues::kNumLists; ++list) {
        int64_t len = 0;
        int32_t prev = -1;
        for (int32_t b = q.head(uint8_t(list)); b >= 0; b = q.next(b)) {
            KVC_CHECK(b < n, "free list %d holds block %d outside the pool", list, b);
            KVC_CHECK(!seen[size_t(b)], "block %d appears twice in the free lists", b);
            seen[size_t(b)] = 1;
            KVC_CHECK(q.prev(b) == prev, "free list %d: block %d has prev %d, expected %d", list, b, q.prev(b), prev);
            KVC_CHECK(q.list_of(b) == list, "block %d is linked in free list %d but tagged %d", b, list, q.list_of(b));
            KVC_CHECK(bp.refcount(b) == 0, "block %d is in free list %d with refcount %d", b, list, bp.refcount(b));
            KVC_CHECK(bp.pins(b) == 0, "block %d is in free list %d while pinned", b, list);
            if (list == FreeQueues::kUnhashedList)
                KVC_CHECK(!bp.cached(b), "cached block %d is in the unhashed free list", b);
            else
                KVC_CHECK(bp.cached(b) && bp.priority(b) == list,
                          "block %d (cached %d, priority %d) is in priority list %d", b, bp.cached(b) ? 1 : 0,
                          bp.priority(b), list);
            prev = b;
            ++len;
            KVC_CHECK(len <= n, "free list %d is cyclic", list);
        }
        KVC_CHECK(q.tail(uint8_t(list)) == prev, "free list %d tail is %d, expected %d", list, q.tail(uint8_t(list)),
                  prev);
        KVC_CHECK(q.size(uint8_t(list)) == len, "free list %d has %lld blocks but its size says %lld", list,
                  (long long)len, (long long)q.size(uint8_t(list)));
        if (list < FreeQueues::kNumPriorities)
            KVC_CHECK(q.priority_occupied(list) == (len > 0), "occupancy bit of priority list %d is wrong", list);
        listed += len;
    }
    KVC_CHECK(listed == q.total(), "%lld blocks in free lists but the total says %lld", (long long)listed,
              (long long)q.total());
    for (int32_t b = 0; b < n; ++b) {
        bool should = bp.refcount(b) == 0 && bp.pins(b) == 0 && bp.copy_holds(b) == 0;
        KVC_CHECK(should == bool(seen[size_t(b)]),
                  "block %d (refcount %d, pins %d, copy holds %d) is %s the free lists", b, bp.refcount(b), bp.pins(b),
                  bp.copy_holds(b), seen[size_t(b)] ? "in" : "missing from");
        KVC_CHECK(should == q.contains(b), "block %d list tag disagrees with its state", b);
    }

    // 3. Cache map: every cached block is in the map under its hash (in its hash's chain of
    // copies), and nothing else is; the copies of a hash hold one content; the size counts copies.
    if (p->caching) {
        const PrefixCache &c = p->cache;
        int64_t cached = 0, chained = 0, hashes = 0, only = 0, flagged = 0;
        for (int32_t b = 0; b < n; ++b) {
            if (c.only_copy(b)) ++flagged;
            if (!bp.cached(b)) {
                KVC_CHECK(!c.only_copy(b), "block %d is not cached but flagged as its hash's only copy", b);
                continue;
            }
            ++cached;
            int32_t x = c.find(c.hash_of(b));
            for (int64_t steps = 0; x >= 0 && x != b && steps < n; ++steps) x = c.next_copy(x);
            KVC_CHECK(x == b, "cached block %d is not found under its hash", b);
            bool more = false;
            const bool alone = c.find(c.hash_of(b), &more) == b && !more;
            KVC_CHECK(c.only_copy(b) == alone, "cached block %d is %sflagged as its hash's only copy, but %s", b,
                      c.only_copy(b) ? "" : "not ", alone ? "it is" : "it is not");
        }
        for (int64_t i = 0; i < c.slot_count(); ++i) {
            const int32_t head = c.slot(i);
            if (head < 0) continue;
            ++hashes;
            int64_t len = 0;
            for (int32_t x = head, newer = -1; x >= 0; newer = x, x = c.next_copy(x)) {
                KVC_CHECK(x < n && bp.cached(x), "cache map slot %lld holds block %d which is not cached", (long long)i,
                          x);
                KVC_CHECK(++len <= n, "cache map slot %lld: its chain of copies is cyclic", (long long)i);
                KVC_CHECK(!c.slot_has_copies(i) || c.prev_copy(x) == newer,
                          "cache map slot %lld: block %d links back to %d, not %d", (long long)i, x, c.prev_copy(x),
                          newer);
                if (x == head) continue;
                KVC_CHECK(c.hash_of(x) == c.hash_of(head) && c.parent_of(x) == c.parent_of(head) &&
                              c.lora_of(x) == c.lora_of(head) && c.digest_of(x) == c.digest_of(head) &&
                              std::memcmp(c.tokens_of(x), c.tokens_of(head), size_t(bs) * sizeof(int32_t)) == 0,
                          "blocks %d and %d are copies of one hash with different content", head, x);
            }
            KVC_CHECK(c.slot_has_copies(i) == (len > 1), "cache map slot %lld says %s copy but holds %lld",
                      (long long)i, c.slot_has_copies(i) ? "more than one" : "one", (long long)len);
            if (len == 1) ++only;
            chained += len;
        }
        KVC_CHECK(flagged == only, "%lld blocks flagged as their hash's only copy, %lld hashes with one copy",
                  (long long)flagged, (long long)only);
        KVC_CHECK(cached == chained && cached == c.size() && hashes == c.num_hashes(),
                  "%lld cached blocks, %lld in the map's chains, map size %lld; %lld map entries, %lld hashes counted",
                  (long long)cached, (long long)chained, (long long)c.size(), (long long)hashes,
                  (long long)c.num_hashes());
    } else {
        for (int32_t b = 0; b < n; ++b) KVC_CHECK(!bp.cached(b), "block %d is cached while caching is off", b);
    }

    // 5. Tier slots and indexes; host slots held by swapped-out sequences.
    if (kvc_status st = tier_check(p, host_refs); st != KVC_OK) return st;

    // 4. Pending copies name real blocks.
    for (int64_t i = 0; i < p->copies.size(); ++i) {
        int32_t s = p->copies.src_at(i), d = p->copies.dst_at(i);
        KVC_CHECK(s >= 0 && s < n && d >= 0 && d < n && s != d, "pending copy %lld is (%d -> %d)", (long long)i, s, d);
        // A pair into a free block would overwrite the block's next owner (it must be cancelled).
        KVC_CHECK(!bp.is_free(d), "pending copy %lld writes into block %d, which is free", (long long)i, d);
    }
    return KVC_OK;
}

}  // namespace kvc
