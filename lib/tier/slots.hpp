// Slot bookkeeping of one lower tier (host or disk): which slots are free, which hold a cached
// prefix block (and its identity), which hold a swapped-out sequence's block, and which are busy
// with a copy in progress. Pure metadata over flat arrays, guarded by the pool mutex.
//
// States of a slot:
//   kFree    in the free list; reused first
//   kCached  indexed under its block hash (identity + token ids in the index) and in the LRU list
//            of its retention priority (lowest priority, least recently used, is evicted first)
//   kHeld    owns a block of a swapped-out sequence; in no list, never evicted
//   kBusy    a copy into or out of the slot is in flight; in no list, never evicted. A busy slot may
//            stay indexed (a restore source, or a spill target whose identity is known already),
//            but lookups treat it as a miss until the copy is committed.
//
// The lists reuse FreeQueues (its "unhashed" list is the free list, its priority lists the LRU) and
// the index reuses PrefixCache, so a tier has exactly the device tier's eviction order and
// identity checks. Unlike the device's, a tier's index holds at most one slot per hash: every path
// that indexes a slot first checks that the tier lacks the hash (tier/plan.cpp, tier/promote.cpp,
// DiskTier::scan), and kvc_pool_check checks it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/block_hash.hpp"
#include "core/free_queue.hpp"
#include "core/prefix_cache.hpp"

namespace kvc {

class TierSlots {
public:
    enum State : uint8_t { kFree = 0, kCached = 1, kHeld = 2, kBusy = 3 };

    void init(int32_t num_slots, int32_t block_size) {
        n_ = num_slots;
        state_.assign(size_t(num_slots), kFree);
        indexed_.assign(size_t(num_slots), 0);
        priority_.assign(size_t(num_slots), uint8_t(KVC_PRIORITY_DEFAULT));
        lists_.init(num_slots);
        index_.init(num_slots, block_size);
        for (int32_t s = 0; s < num_slots; ++s) lists_.push_tail(FreeQueues::kUnhashedList, s);
        held_ = busy_ = 0;
    }

    int32_t capacity() const { return n_; }
    State state(int32_t s) const { return State(state_[size_t(s)]); }
    bool indexed(int32_t s) const { return indexed_[size_t(s)] != 0; }
    int32_t priority(int32_t s) const { return priority_[size_t(s)]; }
    int64_t num_free() const { return lists_.size(FreeQueues::kUnhashedList); }
    int64_t num_cached() const { return lists_.total() - num_free(); }  // in an LRU list
    int64_t num_evictable() const { return lists_.total(); }            // free + cached
    int64_t num_held() const { return held_; }
    int64_t num_busy() const { return busy_; }
    int64_t num_used() const { return int64_t(n_) - num_free(); }
    const FreeQueues &lists() const { return lists_; }
    const PrefixCache &index() const { return index_; }

    // Slot holding this hash (any state), or -1.
    int32_t find(const Hash128 &h) const { return n_ ? index_.find(h) : -1; }
    // Slot holding this exact content and usable now (cached, not busy), or -1.
    int32_t find_usable(const Hash128 &parent, const BlockKey &key, const int32_t *tokens) const {
        int32_t s = find(key.hash);
        if (s < 0 || state_[size_t(s)] != kCached) return -1;
        return index_.verify(s, parent, key, tokens) ? s : -1;
    }

    // The slot the next claim should take: a free one first, then the LRU head of the lowest
    // priority. -1 when every slot is held or busy.
    int32_t next_victim() const { return lists_.next_victim(); }

    // Takes a free or cached slot for new content: out of its list, out of the index -> kBusy.
    // Returns true when it dropped a cached block (an eviction).
    bool claim(int32_t s) {
        const bool evicted = state_[size_t(s)] == kCached;
        lists_.remove(s);
        if (indexed_[size_t(s)]) unindex(s);
        set_state(s, kBusy);
        return evicted;
    }

    // A claimed (busy, unindexed) slot gets the identity of the block being copied into it; it
    // stays busy until commit_cached().
    void index_busy(int32_t s, const Hash128 &parent, const BlockKey &key, const int32_t *tokens, int32_t prio) {
        index_.insert(s, parent, key, tokens);
        indexed_[size_t(s)] = 1;
        priority_[size_t(s)] = uint8_t(prio);
    }

    // A cached slot becomes busy for a copy out of it (it keeps its index entry).
    void pin_cached(int32_t s) {
        lists_.remove(s);
        set_state(s, kBusy);
    }

    // A free slot moves to the back of the free list: every other free slot is reused first.
    void defer_free(int32_t s) {
        lists_.remove(s);
        lists_.push_tail(FreeQueues::kUnhashedList, s);
    }

    // A busy, indexed slot becomes usable: LRU tail of its priority (most recently used).
    void commit_cached(int32_t s) {
        set_state(s, kCached);
        lists_.push_tail(priority_[size_t(s)], s);
    }

    void set_priority(int32_t s, int32_t prio) { priority_[size_t(s)] = uint8_t(prio); }

    // A busy slot becomes held by a swapped-out sequence (must not be indexed).
    void hold(int32_t s) { set_state(s, kHeld); }
    // A held slot becomes busy (swap-in copy in flight).
    void unhold(int32_t s) { set_state(s, kBusy); }

    // A busy or held slot goes back to the free list, dropping its index entry if it has one.
    void release(int32_t s) {
        if (indexed_[size_t(s)]) unindex(s);
        set_state(s, kFree);
        lists_.push_head(FreeQueues::kUnhashedList, s);
    }

    // kvct_tier_corrupt_slot (lib/tier/testing.cpp, the test archive only) overwrites a slot's
    // state and nothing else through this friend, so a test can break the index on purpose.
    friend struct TierSlotsTestAccess;

    // Drops every cached (listed, indexed) slot (prefix cache reset).
    void drop_all_cached() {
        for (int p = 0; p < FreeQueues::kNumPriorities; ++p) {
            while (lists_.head(uint8_t(p)) >= 0) {
                int32_t s = lists_.head(uint8_t(p));
                claim(s);
                release(s);
            }
        }
    }

private:
    void unindex(int32_t s) {
        index_.erase(s);
        indexed_[size_t(s)] = 0;
    }
    void set_state(int32_t s, State st) {
        uint8_t &cur = state_[size_t(s)];
        if (cur == kHeld) --held_;
        if (cur == kBusy) --busy_;
        if (st == kHeld) ++held_;
        if (st == kBusy) ++busy_;
        cur = st;
    }

    int32_t n_ = 0;
    std::vector<uint8_t> state_;
    std::vector<uint8_t> indexed_;
    std::vector<uint8_t> priority_;
    FreeQueues lists_;
    PrefixCache index_;
    int64_t held_ = 0;
    int64_t busy_ = 0;
};

}  // namespace kvc
