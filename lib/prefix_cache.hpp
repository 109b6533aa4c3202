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

    // Block cached under this hash, or -1.
    int32_t find(const Hash128 &h) const {
        for (uint64_t i = h.lo & mask_;; i = (i + 1) & mask_) {
            int32_t b = slots_[i];
            if (b < 0) return -1;
            if (hash_[b] == h) return b;
        }
    }

    // True when block b (found under key.hash) holds exactly this content.
    bool verify(int32_t b, const Hash128 &parent, const BlockKey &key, const int32_t *tokens) const {
        return parent_[b] == parent && lora_[b] == key.lora_id && digest_[b] == key.extras_digest &&
               std::memcmp(tokens_of(b), tokens, token_bytes_) == 0;
    }

    // Enters block b (not cached, key.hash not in the map) with its identity and tokens.
    void insert(int32_t b, const Hash128 &parent, const BlockKey &key, const int32_t *tokens);

    // Removes block b's entry (b must be cached).
    void erase(int32_t b);

    // Drops every entry (the blocks' cached flags are the caller's business).
    void clear();

    const Hash128 &hash_of(int32_t b) const { return hash_[b]; }
    const Hash128 &parent_of(int32_t b) const { return parent_[b]; }
    uint64_t lora_of(int32_t b) const { return lora_[b]; }
    uint64_t digest_of(int32_t b) const { return digest_[b]; }
    const int32_t *tokens_of(int32_t b) const { return tokens_.data() + int64_t(b) * block_size_; }

    // For the invariant checker: slot contents.
    int64_t slot_count() const { return int64_t(slots_.size()); }
    int32_t slot(int64_t i) const { return slots_[size_t(i)]; }

private:
    int32_t block_size_ = 0;
    size_t token_bytes_ = 0;
    uint64_t mask_ = 0;
    int64_t size_ = 0;
    std::vector<int32_t> slots_;
    std::vector<Hash128> hash_;
    std::vector<Hash128> parent_;
    std::vector<uint64_t> lora_;
    std::vector<uint64_t> digest_;
    std::vector<int32_t> tokens_;
};

}  // namespace kvc
