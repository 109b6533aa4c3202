// Free-block queues: intrusive doubly-linked lists over block indices.
//
// Every block with refcount 0 that is not pinned sits in exactly one list; every other block in
// none. A block's links (prev, next) are one 8-byte entry of a flat array indexed by block id, so
// push, pop and remove-from-middle are O(1), never allocate, and read one line of links per block
// (two arrays made the least recently used block's removal two cold lines). The list holding it is
// a byte of an array of its own: contains(), which every cache hit asks, stays a byte load at the
// block's index (in the 12-byte entry it was, the index times 12 cost bench_core's PrefixLookup
// 4 %, PrefixLookupCopies 3 %) from an array small enough to stay in cache.
// Lists:
//   - kUnhashedList: blocks carrying no cache entry. They are reused first (nothing is lost).
//   - 0..100: cached refcount-0 blocks, one LRU list per retention priority (head = evicted next).
// The lowest non-empty priority list is found in O(1) from a 128-bit occupancy bitmap (ctz).
#pragma once

#include <cstdint>
#include <vector>

#include "prefetch.hpp"

namespace kvc {

class FreeQueues {
public:
    static constexpr int kNumPriorities = 101;  // KVC_PRIORITY_MIN..KVC_PRIORITY_MAX
    static constexpr uint8_t kUnhashedList = 101;
    static constexpr int kNumLists = 102;
    static constexpr uint8_t kNoList = 255;

    void init(int32_t num_blocks) {
        link_.assign(size_t(num_blocks), Link{});
        list_.assign(size_t(num_blocks), kNoList);
        for (int i = 0; i < kNumLists; ++i) {
            head_[i] = tail_[i] = -1;
            size_[i] = 0;
        }
        occupied_[0] = occupied_[1] = 0;
        total_ = 0;
    }

    void push_tail(uint8_t list, int32_t b) {
        link_[b].prev = tail_[list];
        link_[b].next = -1;
        if (tail_[list] >= 0)
            link_[tail_[list]].next = b;
        else
            head_[list] = b;
        tail_[list] = b;
        added(list, b);
    }

    void push_head(uint8_t list, int32_t b) {
        link_[b].next = head_[list];
        link_[b].prev = -1;
        if (head_[list] >= 0)
            link_[head_[list]].prev = b;
        else
            tail_[list] = b;
        head_[list] = b;
        added(list, b);
    }

    // Unlinks b from whatever list holds it (it must be in one).
    void remove(int32_t b) {
        Link &l = link_[b];
        const uint8_t list = list_[b];
        const int32_t p = l.prev, n = l.next;
        if (p >= 0)
            link_[p].next = n;
        else
            head_[list] = n;
        if (n >= 0)
            link_[n].prev = p;
        else
            tail_[list] = p;
        l = Link{};
        list_[b] = kNoList;
        --total_;
        if (--size_[list] == 0 && list < kNumPriorities) occupied_[list >> 6] &= ~(uint64_t(1) << (list & 63));
    }

    // Head of the next list to reuse from: unhashed first, then the lowest non-empty priority.
    // -1 when every list is empty.
    int32_t next_victim() const {
        if (head_[kUnhashedList] >= 0) return head_[kUnhashedList];
        if (occupied_[0]) return head_[__builtin_ctzll(occupied_[0])];
        if (occupied_[1]) return head_[64 + __builtin_ctzll(occupied_[1])];
        return -1;
    }

    // The block next_victim() would hand out after b if b were taken (b still listed): b's successor
    // in its list, else the head of the next list in reuse order. -1 after the last.
    int32_t victim_after(int32_t b) const {
        if (link_[b].next >= 0) return link_[b].next;
        for (int list = list_[b] == kUnhashedList ? 0 : list_[b] + 1; list < kNumPriorities; ++list)
            if (head_[list] >= 0) return head_[list];
        return -1;
    }

    // Asks for b's links and list (remove(b) reads and writes them).
    void prefetch(int32_t b) const {
        prefetch_write(&link_[size_t(b)]);
        prefetch_write(&list_[size_t(b)]);
    }

    bool contains(int32_t b) const { return list_[b] != kNoList; }
    uint8_t list_of(int32_t b) const { return list_[b]; }
    int32_t head(uint8_t list) const { return head_[list]; }
    int32_t next(int32_t b) const { return link_[b].next; }
    int32_t prev(int32_t b) const { return link_[b].prev; }
    int32_t tail(uint8_t list) const { return tail_[list]; }
    int64_t size(uint8_t list) const { return size_[list]; }
    int64_t total() const { return total_; }
    bool priority_occupied(int list) const { return (occupied_[list >> 6] >> (list & 63)) & 1; }

private:
    void added(uint8_t list, int32_t b) {
        list_[b] = list;
        ++total_;
        if (size_[list]++ == 0 && list < kNumPriorities) occupied_[list >> 6] |= uint64_t(1) << (list & 63);
    }

    struct Link {
        int32_t prev = -1, next = -1;
    };
    static_assert(sizeof(Link) == 8, "a block's links: 8 bytes");
    std::vector<Link> link_;
    std::vector<uint8_t> list_;  // per block: the list holding it, kNoList for none
    int32_t head_[kNumLists];
    int32_t tail_[kNumLists];
    int64_t size_[kNumLists];
    uint64_t occupied_[2];
    int64_t total_ = 0;
};

}  // namespace kvc
