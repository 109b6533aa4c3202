// Sequences: a caller-chosen 64-bit id, a block table, and (with prefix caching) what is needed to
// hash blocks as decode fills them: the confirmed token ids, the request's keys and the running
// chain hash.
//
// Token layout (kvc.h): cached | computed | new | lookahead. `num_tokens` counts confirmed tokens;
// `reserved_end` is one past the last reserved slot (>= num_tokens); the table covers
// ceil(reserved_end / block_size) blocks.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "block_hash.hpp"
#include "keys.hpp"

namespace kvc {

struct Sequence {
    uint64_t id = 0;
    std::vector<int32_t> table;
    int64_t num_tokens = 0;
    int64_t reserved_end = 0;
    std::vector<int32_t> tokens;  // confirmed token ids; empty when prefix caching is off
    KeySet keys;
    Hash128 chain = kRootHash;    // hash of block num_hashed - 1 (kRootHash when none)
    int64_t num_hashed = 0;       // leading full blocks whose hash is known (cached or not)
    bool swapped_out = false;     // not resident in the pool's storage (tiering)
    // While swapped out: per table entry, the host tier slot holding that block (table entry -1),
    // or -1 for a block that stayed on the device (shared). Empty while resident.
    std::vector<int32_t> swap_slots;

    void reset(uint64_t new_id) {
        id = new_id;
        table.clear();
        tokens.clear();
        keys.clear();
        swap_slots.clear();
        num_tokens = reserved_end = num_hashed = 0;
        chain = kRootHash;
        swapped_out = false;
    }
};

// id -> Sequence. Freed Sequence objects are recycled, so their vectors keep their capacity and a
// steady state of alloc/free does not allocate block tables again.
class SequenceTable {
public:
    void init(size_t expected) {
        map_.reserve(expected);
        spare_.reserve(expected);
    }

    Sequence *find(uint64_t id) const {
        auto it = map_.find(id);
        return it == map_.end() ? nullptr : it->second;
    }

    // Inserts a fresh sequence (id must be unused). May throw std::bad_alloc before changing anything.
    Sequence *create(uint64_t id) {
        std::unique_ptr<Sequence> s;
        if (!spare_.empty()) {
            s = std::move(spare_.back());
            spare_.pop_back();
        } else {
            s.reset(new Sequence());
        }
        s->reset(id);
        try {
            map_.emplace(id, s.get());
        } catch (...) {
            spare_.push_back(std::move(s));  // capacity reserved by the pop above: cannot throw
            throw;
        }
        return s.release();
    }

    // Removes a sequence and keeps its object for reuse. Never throws.
    void erase(Sequence *s) {
        map_.erase(s->id);
        if (spare_.size() < spare_.capacity()) spare_.emplace_back(s);
        else delete s;
    }

    size_t size() const { return map_.size(); }
    const std::unordered_map<uint64_t, Sequence *> &all() const { return map_; }

    ~SequenceTable() {
        for (auto &kv : map_) delete kv.second;
    }

private:
    std::unordered_map<uint64_t, Sequence *> map_;
    std::vector<std::unique_ptr<Sequence>> spare_;
};

}  // namespace kvc
