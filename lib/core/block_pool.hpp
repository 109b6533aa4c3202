// Physical blocks: refcounts, pin counts, retention priorities, the "cached" flag and the free
// queues. Pure bookkeeping over flat arrays indexed by block id; the pool (core/pool_blocks.cpp) adds the
// prefix-cache side effects (lazy eviction, events).
//
// States of a block:
//   refcount > 0                 in use by >= 1 sequence table; in no free list
//   refcount 0, pinned           held by kvc_prefix_pin; in no free list, never reused
//   refcount 0, copy holds > 0   source of pending copy-on-write pairs; in no free list until the
//                                copies have read it (counted as used)
//   refcount 0, cached           in the LRU list of its priority (evicted lowest priority first)
//   refcount 0, not cached       in the unhashed list (reused first)
// Priority of a block = the priority of the request that most recently allocated or hit it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/free_queue.hpp"
#include "prefetch.hpp"
#include "kvc/kvc.h"

namespace kvc {

class BlockPool {
public:
    void init(int32_t num_blocks) {
        num_blocks_ = num_blocks;
        state_.assign(size_t(num_blocks), State{});
        pins_.assign(size_t(num_blocks), 0);
        holds_.assign(size_t(num_blocks), 0);
        total_holds_ = 0;
        free_.init(num_blocks);
        // Initially block ids are handed out in increasing order.
        for (int32_t b = 0; b < num_blocks; ++b) free_.push_tail(FreeQueues::kUnhashedList, b);
        used_ = pinned_ = 0;
    }

    int32_t num_blocks() const { return num_blocks_; }
    int32_t refcount(int32_t b) const { return state_[b].refcount; }
    int32_t pins(int32_t b) const { return pins_[b]; }
    int32_t priority(int32_t b) const { return state_[b].priority; }
    bool cached(int32_t b) const { return state_[b].cached != 0; }
    int32_t copy_holds(int32_t b) const { return holds_[b]; }
    bool is_free(int32_t b) const { return free_.contains(b); }
    int64_t num_free() const { return free_.total(); }  // refcount 0 and not pinned
    int64_t num_cached_free() const { return free_.total() - free_.size(FreeQueues::kUnhashedList); }
    int64_t num_used() const { return used_; }
    int64_t num_pinned() const { return pinned_; }
    const FreeQueues &queues() const { return free_; }

    // The block a fresh allocation takes next (-1 if none); the caller evicts its cache entry.
    int32_t next_victim() const { return free_.next_victim(); }

    // Asks for what taking b (take_fresh, after a test of cached(b)) reads and writes: its state
    // and its links, a line each, cold for the least recently used block.
    void prefetch_take(int32_t b) const {
        prefetch_write(&state_[size_t(b)]);
        free_.prefetch(b);
    }

    // Takes a free block b (normally next_victim()) as a new reference with this priority.
    void take_fresh(int32_t b, int32_t priority) {
        free_.remove(b);
        state_[b].refcount = 1;
        state_[b].priority = uint8_t(priority);
        ++used_;
    }

    // One more reference to b (a cache hit or a fork). A refcount-0 block leaves its free list (a
    // held one is in none, and already counted as used).
    void add_ref(int32_t b) {
        if (state_[b].refcount++ == 0) first_ref(b);
    }

    void set_priority(int32_t b, int32_t priority) { state_[b].priority = uint8_t(priority); }

    // add_ref() then set_priority() for each of ids[0..n), skipping ids < 0 (an admission's held
    // hits: its cached prefix). The array in a local: through the member, every byte store of a
    // priority made GCC reload the array's address (~6 of ~16 instructions per block, measured
    // with separate arrays).
    // kHoles false: the caller knows no id is < 0 (no host-tier hit), and the loop skips the test
    // (2 of ~12 instructions per block of an admission's cached prefix).
    template <bool kHoles = true>
    void add_refs(const int32_t *ids, int64_t n, int32_t priority) {
        State *const st = state_.data();
        const uint8_t pr = uint8_t(priority);
        for (int64_t j = 0; j < n; ++j) {
            const int32_t b = ids[j];
            if (kHoles && b < 0) continue;
            if (st[b].refcount++ == 0) first_ref(b);
            st[b].priority = pr;
        }
    }

    // Drops one reference; returns true when the refcount reached 0. Then, unless pinned or held
    // by a pending copy, a cached block goes to the LRU tail of its priority, an uncached one to
    // the head of the unhashed list.
    bool release(int32_t b) {
        if (--state_[b].refcount != 0) return false;
        last_ref(b);
        return true;
    }

    // release() for ids[n - 1] down to ids[0], skipping ids < 0, calling freed(b) after each
    // block whose refcount reached 0 (a sequence's table at its end). The array in a local:
    // through the member, GCC reloaded its address for every block.
    // kHoles false: the caller knows no id is < 0 (a resident sequence's table past the blocks its
    // window released), and the loop skips the test (2 of ~10 instructions per shared block).
    template <bool kHoles = true, class F>
    void release_reverse(const int32_t *ids, int64_t n, F &&freed) {
        State *const st = state_.data();
        for (int64_t j = n; j-- > 0;) {
            const int32_t b = ids[j];
            if ((kHoles && b < 0) || --st[b].refcount != 0) continue;
            last_ref(b);
            freed(b);
        }
    }

    // A pending copy-on-write pair will read b: b keeps its bytes (no free list, no reuse) until
    // unhold(), without counting as a sharer (a last holder still writes in place).
    void hold(int32_t b) {
        ++total_holds_;
        if (holds_[b]++ == 0 && state_[b].refcount == 0) {
            ++used_;
            if (free_.contains(b)) free_.remove(b);
        }
    }

    // The copy has read b; returns true when that was the last thing keeping b (it is free now).
    bool unhold(int32_t b) {
        --total_holds_;
        if (--holds_[b] != 0 || state_[b].refcount != 0) return false;
        --used_;
        if (pins_[b] == 0) enqueue_free(b);
        return pins_[b] == 0;
    }

    void pin(int32_t b) {
        if (pins_[b]++ == 0) {
            ++pinned_;
            if (free_.contains(b)) free_.remove(b);
        }
    }

    void unpin(int32_t b) {
        if (--pins_[b] == 0) {
            --pinned_;
            if (state_[b].refcount == 0 && (total_holds_ == 0 || holds_[b] == 0)) enqueue_free(b);
        }
    }

    // kvct_corrupt_refcount (lib/testing.cpp, the test archive only) breaks the refcount invariant
    // on purpose through this friend; the class itself has no test-only member.
    friend struct BlockPoolTestAccess;

    // Marks b cached / uncached. A block changing state while in a free list moves between lists.
    void set_cached(int32_t b, bool cached) { state_[b].cached = cached ? 1 : 0; }

    // Moves every refcount-0 cached block to the unhashed list (prefix cache reset).
    void uncache_all_free() {
        for (int p = 0; p < FreeQueues::kNumPriorities; ++p) {
            while (free_.head(uint8_t(p)) >= 0) {
                int32_t b = free_.head(uint8_t(p));
                free_.remove(b);
                state_[b].cached = 0;
                free_.push_tail(FreeQueues::kUnhashedList, b);
            }
        }
    }

private:
    // b's refcount went from 0 to 1 (add_ref).
    void first_ref(int32_t b) {
        if (total_holds_ == 0 || holds_[b] == 0) {
            ++used_;
            if (free_.contains(b)) free_.remove(b);
        }
    }

    // b's refcount reached 0 (release): unless pinned or held by a pending copy, it is free now.
    void last_ref(int32_t b) {
        // Almost always no pair is pending: skip the holds array (one cache miss per block).
        if (total_holds_ == 0 || holds_[b] == 0) {
            --used_;
            if (pins_[b] == 0) enqueue_free(b);
        }
    }

    void enqueue_free(int32_t b) {
        if (state_[b].cached)
            free_.push_tail(state_[b].priority, b);
        else
            free_.push_head(FreeQueues::kUnhashedList, b);
    }

    // A block's refcount, retention priority and cached flag: one 8-byte entry, so that taking
    // or releasing a block touches one line of them, not one per array (three lines for the cold
    // least recently used block a fresh allocation takes).
    struct State {
        int32_t refcount = 0;
        uint8_t priority = uint8_t(KVC_PRIORITY_DEFAULT);
        uint8_t cached = 0;
    };
    static_assert(sizeof(State) == 8, "a block's state: 8 bytes");

    int32_t num_blocks_ = 0;
    std::vector<State> state_;
    std::vector<int32_t> pins_;
    FreeQueues free_;
    int64_t used_ = 0;
    int64_t pinned_ = 0;
    // Last: the fields above keep the offsets the hot paths were tuned with.
    int64_t total_holds_ = 0;     // sum of holds_ (= pending pairs)
    std::vector<int32_t> holds_;  // pending copy-on-write pairs reading the block
};

}  // namespace kvc
