// Sequence id -> Sequence*: open addressing with linear probing over power-of-two arrays.
// std::unordered_map costs a modulo by a prime (an integer division, tens of cycles) and a node
// pointer chase per lookup; a decode step does 256 lookups, so this matters. Ids are caller-chosen
// (often sequential), so they are mixed before masking. Load stays <= 1/2; growth rehashes (the
// only allocation, amortized, and it happens in insert() before the caller mutates anything).
// Deletion is backward-shift (no tombstones). Key and value share a slot: one cache line per probe.
#pragma once

#include <cstdint>
#include <vector>

namespace kvc {

struct Sequence;

class SequenceMap {
public:
    void init(size_t expected) {
        size_t cap = 16;
        while (cap < expected * 2) cap <<= 1;
        slots_.assign(cap, Slot{});
        mask_ = cap - 1;
        size_ = 0;
    }

    Sequence *find(uint64_t id) const {
        // The usual case, the id in its home slot, first and alone: straight-line code without a
        // jump (in the probe loop GCC laid the hit out as a branch and a jump; the decode step
        // looks up every sequence of the batch). An empty home slot holding the id as a stale key
        // returns its nullptr, as the loop would.
        const size_t h = home(id);
        if (__builtin_expect(slots_[h].key == id, 1)) return slots_[h].val;
        for (size_t i = h;; i = (i + 1) & mask_) {
            // The id's slot, or an empty one (nullptr: it ends the probe, whatever key it holds).
            const Slot &s = slots_[i];
            if (s.key == id || !s.val) return s.val;
        }
    }

    // id must be absent. May throw std::bad_alloc (growth) before inserting.
    void insert(uint64_t id, Sequence *s) {
        if ((size_ + 1) * 2 > slots_.size()) grow();
        place(id, s);
        ++size_;
    }

    // id must be present.
    void erase(uint64_t id) {
        size_t i = home(id);
        while (slots_[i].key != id || !slots_[i].val) i = (i + 1) & mask_;
        size_t hole = i;
        for (size_t j = (i + 1) & mask_; slots_[j].val; j = (j + 1) & mask_) {
            size_t h = home(slots_[j].key);
            bool home_after_hole = hole <= j ? (h > hole && h <= j) : (h > hole || h <= j);
            if (!home_after_hole) {
                slots_[hole] = slots_[j];
                hole = j;
            }
        }
        slots_[hole] = Slot{};
        --size_;
    }

    size_t size() const { return size_; }

    template <class F>
    void for_each(F &&f) const {
        for (const Slot &s : slots_)
            if (s.val) f(s.key, s.val);
    }

private:
    struct Slot {
        uint64_t key = 0;
        Sequence *val = nullptr;  // nullptr = empty slot
    };

    size_t home(uint64_t id) const {
        uint64_t x = id * 0x9E3779B97F4A7C15ull;  // Fibonacci hashing: high bits are well mixed
        return size_t(x >> 32 ^ x) & mask_;
    }

    void place(uint64_t id, Sequence *s) {
        size_t i = home(id);
        while (slots_[i].val) i = (i + 1) & mask_;
        slots_[i].key = id;
        slots_[i].val = s;
    }

    void grow() {
        std::vector<Slot> old(slots_.size() * 2);
        old.swap(slots_);
        mask_ = slots_.size() - 1;
        for (const Slot &s : old)
            if (s.val) place(s.key, s.val);
    }

    std::vector<Slot> slots_;
    size_t mask_ = 0;
    size_t size_ = 0;
};

}  // namespace kvc
