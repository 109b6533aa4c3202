#include "prefix_cache.hpp"

#include <algorithm>

namespace kvc {

void PrefixCache::init(int32_t num_blocks, int32_t block_size) {
    block_size_ = block_size;
    token_bytes_ = size_t(block_size) * sizeof(int32_t);
    uint64_t cap = 16;
    while (cap < uint64_t(num_blocks) * 2) cap <<= 1;
    mask_ = cap - 1;
    size_ = 0;
    slots_.assign(cap, -1);
    hash_.assign(size_t(num_blocks), Hash128{});
    parent_.assign(size_t(num_blocks), Hash128{});
    lora_.assign(size_t(num_blocks), 0);
    digest_.assign(size_t(num_blocks), 0);
    tokens_.assign(size_t(num_blocks) * size_t(block_size), 0);
}

void PrefixCache::insert(int32_t b, const Hash128 &parent, const BlockKey &key, const int32_t *tokens) {
    hash_[b] = key.hash;
    parent_[b] = parent;
    lora_[b] = key.lora_id;
    digest_[b] = key.extras_digest;
    std::memcpy(tokens_.data() + int64_t(b) * block_size_, tokens, token_bytes_);
    uint64_t i = key.hash.lo & mask_;
    while (slots_[i] >= 0) i = (i + 1) & mask_;
    slots_[i] = b;
    ++size_;
}

void PrefixCache::erase(int32_t b) {
    uint64_t i = hash_[b].lo & mask_;
    while (slots_[i] != b) i = (i + 1) & mask_;
    // Backward-shift deletion: pull later entries of the probe run into the hole so every entry
    // stays reachable from its home slot without tombstones.
    uint64_t hole = i;
    for (uint64_t j = (i + 1) & mask_; slots_[j] >= 0; j = (j + 1) & mask_) {
        uint64_t home = hash_[slots_[j]].lo & mask_;
        // Move j into the hole unless its home lies cyclically in (hole, j].
        bool home_after_hole = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!home_after_hole) {
            slots_[hole] = slots_[j];
            hole = j;
        }
    }
    slots_[hole] = -1;
    --size_;
}

void PrefixCache::clear() {
    std::fill(slots_.begin(), slots_.end(), -1);
    size_ = 0;
}

}  // namespace kvc
