// Sequence id -> Sequence*: open addressing with linear probing over power-of-two arrays.
// std::unordered_map costs a modulo by a prime (an integer division, tens of cycles) and a node
// pointer chase per lookup; a decode step does 256 lookups, so this matters. Ids are caller-chosen
// (often sequential), so they are mixed before masking. Load stays <= 1/2; growth rehashes (the
// only allocation, amortized, and it happens in insert() before the caller mutates anything).
// Deletion is backward-shift (no tombstones).
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
        keys_.assign(cap, 0);
        vals_.assign(cap, nullptr);
        mask_ = cap - 1;
        size_ = 0;
    }

    Sequence *find(uint64_t id) const {
        for (size_t i = home(id);; i = (i + 1) & mask_) {
            if (!vals_[i]) return nullptr;
            if (keys_[i] == id) return vals_[i];
        }
    }

    // id must be absent. May throw std::bad_alloc (growth) before inserting.
    void insert(uint64_t id, Sequence *s) {
        if ((size_ + 1) * 2 > keys_.size()) grow();
        place(id, s);
        ++size_;
    }

    // id must be present.
    void erase(uint64_t id) {
        size_t i = home(id);
        while (keys_[i] != id || !vals_[i]) i = (i + 1) & mask_;
        size_t hole = i;
        for (size_t j = (i + 1) & mask_; vals_[j]; j = (j + 1) & mask_) {
            size_t h = home(keys_[j]);
            bool home_after_hole = hole <= j ? (h > hole && h <= j) : (h > hole || h <= j);
            if (!home_after_hole) {
                keys_[hole] = keys_[j];
                vals_[hole] = vals_[j];
                hole = j;
            }
        }
        vals_[hole] = nullptr;
        keys_[hole] = 0;
        --size_;
    }

    size_t size() const { return size_; }

    template <class F>
    void for_each(F &&f) const {
        for (size_t i = 0; i < keys_.size(); ++i)
            if (vals_[i]) f(keys_[i], vals_[i]);
    }

private:
    size_t home(uint64_t id) const {
        uint64_t x = id * 0x9E3779B97F4A7C15ull;  // Fibonacci hashing: high bits are well mixed
        return size_t(x >> 32 ^ x) & mask_;
    }

    void place(uint64_t id, Sequence *s) {
        size_t i = home(id);
        while (vals_[i]) i = (i + 1) & mask_;
        keys_[i] = id;
        vals_[i] = s;
    }

    void grow() {
        std::vector<uint64_t> keys(keys_.size() * 2, 0);
        std::vector<Sequence *> vals(vals_.size() * 2, nullptr);
        keys.swap(keys_);
        vals.swap(vals_);
        mask_ = keys_.size() - 1;
        for (size_t i = 0; i < keys.size(); ++i)
            if (vals[i]) place(keys[i], vals[i]);
    }

    std::vector<uint64_t> keys_;
    std::vector<Sequence *> vals_;
    size_t mask_ = 0;
    size_t size_ = 0;
};

}  // namespace kvc
