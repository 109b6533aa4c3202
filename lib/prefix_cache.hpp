// The prefix cache index: block hash -> block id, plus what each cached block must match on a hit
// (parent hash, LoRA id, extras digest, token ids).
//
// The map is open addressing with linear probing over a preallocated power-of-two slot array of
// at least 2 x num_blocks entries (load <= 0.5): insert/find/erase are O(1) expected and never
// allocate. Each hash maps to one block: when a second block fills with content whose hash is
// already cached, the existing entry is kept and the new block stays uncached.
//
// Token ids are stored in one flat array [num_blocks x block_size], written when a block enters the
// cache; no per-block allocation.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "block_hash.hpp"

namespace kvc {

class PrefixCache {
public:
    void init(int32_t num_blocks, int32_t block_size);

    int64_t size() const { return size_; }

    // Block cached under this hash, or -1. Slots carry 32 bits of the hash, so a probe past a
    // different entry does not touch that block's metadata.
    int32_t find(const Hash128 &h) const {
        const uint32_t tag = tag_of(h);
        for (uint64_t i = h.lo & mask_;; i = (i + 1) & mask_) {
            const Slot &sl = slots_[i];
            if (sl.block < 0) return -1;
            if (sl.tag == tag && meta_[sl.block].hash == h) return sl.block;
        }
    }

    // True when block b (found under key.hash) holds exactly this content.
    bool verify(int32_t b, const Hash128 &parent, const BlockKey &key, const int32_t *tokens) const {
        const Meta &m = meta_[b];
        return m.parent == parent && m.lora_id == key.lora_id && m.extras_digest == key.extras_digest &&
               std::memcmp(tokens_of(b), tokens, token_bytes_) == 0;
    }

    // Starts loading block b's metadata and token row (about to be written by insert), so the
    // misses overlap with hashing instead of following it.
    void prefetch_for_insert(int32_t b) const {
        __builtin_prefetch(&meta_[size_t(b)], 1);
        __builtin_prefetch(tokens_.data() + int64_t(b) * block_size_, 1);
    }

    // Enters block b (not cached, key.hash not in the map) with its identity and tokens.
    void insert(int32_t b, const Hash128 &parent, const BlockKey &key, const int32_t *tokens);

    // Removes block b's entry (b must be cached).
    void erase(int32_t b);

    // Drops every entry (the blocks' cached flags are the caller's business).
    void clear();

    const Hash128 &hash_of(int32_t b) const { return meta_[b].hash; }
    const Hash128 &parent_of(int32_t b) const { return meta_[b].parent; }
    uint64_t lora_of(int32_t b) const { return meta_[b].lora_id; }
    uint64_t digest_of(int32_t b) const { return meta_[b].extras_digest; }
    const int32_t *tokens_of(int32_t b) const { return tokens_.data() + int64_t(b) * block_size_; }

    // For the invariant checker: slot contents.
    int64_t slot_count() const { return int64_t(slots_.size()); }
    int32_t slot(int64_t i) const { return slots_[size_t(i)].block; }

private:
    // One cache line holds everything a hit compares except the tokens (one miss, not four).
    struct Meta {
        Hash128 hash;
        Hash128 parent;
        uint64_t lora_id = 0;
        uint64_t extras_digest = 0;
    };
    struct Slot {
        int32_t block = -1;
        uint32_t tag = 0;
    };
    static uint32_t tag_of(const Hash128 &h) { return uint32_t(h.hi >> 32); }

    int32_t block_size_ = 0;
    size_t token_bytes_ = 0;
    uint64_t mask_ = 0;
    int64_t size_ = 0;
    std::vector<Slot> slots_;
    std::vector<Meta> meta_;
    std::vector<int32_t> tokens_;
};

}  // namespace kvc
