#include "core/prefix_cache.hpp"

#include <algorithm>
#include <chrono>
#include <new>
#include <random>

namespace kvc {

void PrefixCache::init(int32_t num_blocks, int32_t block_size) {
    block_size_ = block_size;
    token_bytes_ = size_t(block_size) * sizeof(int32_t);
    lines_per_record_ = int32_t((sizeof(Record) + token_bytes_ + sizeof(Trailer) + sizeof(Line) - 1) / sizeof(Line));
    uint64_t cap = 16;
    while (cap < uint64_t(num_blocks) * 2) cap <<= 1;
    mask_ = cap - 1;
    shift_ = 64;
    for (uint64_t c = cap; c > 1; c >>= 1) --shift_;
    try {
        std::random_device rd;  // getrandom(2) on Linux
        key_[0] = (uint64_t(rd()) << 32) ^ rd();
        key_[1] = (uint64_t(rd()) << 32) ^ rd();
    } catch (...) {  // no entropy source: a weaker key from the clock and this object's address
        key_[0] = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) * 0x9e3779b97f4a7c15ull;
        key_[1] = uint64_t(reinterpret_cast<uintptr_t>(this)) * 0xbf58476d1ce4e5b9ull;
    }
    key_[0] |= 1;  // odd: multiplication by it is a bijection
    key_[1] |= 1;
    size_ = hashes_ = 0;
    slots_.assign(cap, Slot{});
    next_.assign(size_t(num_blocks), -1);
    prev_.assign(size_t(num_blocks), -1);
    child_.assign(size_t(num_blocks), -1);
    lines_.reset(new Line[size_t(num_blocks) * size_t(lines_per_record_)]());  // zeroed token rows
    for (int32_t b = 0; b < num_blocks; ++b) {
        new (rec(b)) Record();
        new (trailer(b)) Trailer();
    }
}

void PrefixCache::insert(int32_t b, const Hash128 &parent, const BlockKey &key, const int32_t *tokens) {
    int32_t *row = stage(b, parent);
    if (row != tokens) copy_block_tokens(row, tokens, token_bytes_);
    uint64_t slot;
    bool more;
    if (find_or_slot(key.hash, &slot, &more) < 0)
        insert_at(slot, b, key);
    else
        add_copy_at(slot, b, key);
}

void PrefixCache::erase(int32_t b) {
    Trailer *const t = trailer(b);
    uint64_t i = t->slot;
    bool newest = slots_[i].block == b;  // a block is named by one slot at most
    if (!newest) {  // an older copy: its hash's slot, from its record
        const Hash128 h = rec(b)->hash;
        const uint64_t m = mix(h);
        const uint32_t tag = tag_of_mix(m);
        for (i = m >> shift_;; i = (i + 1) & mask_) {
            const Slot &sl = slots_[i];
            if ((sl.tag ^ tag) <= kCopies && sl.block >= 0 && rec(sl.block)->hash == h) break;
        }
    }
    Slot &sl = slots_[i];
    --size_;
    t->only = 0;
    if (sl.tag & kCopies) {  // unlink b from the chain: O(1) wherever it is
        const int32_t older = next_[size_t(b)], newer = prev_[size_t(b)];
        if (older >= 0) prev_[size_t(older)] = newer;
        if (newest) {
            sl.block = older;
            trailer(older)->slot = uint32_t(i);
        } else {
            next_[size_t(newer)] = older;
        }
        if (next_[size_t(sl.block)] < 0) {  // one copy left
            sl.tag &= ~kCopies;
            trailer(sl.block)->only = 1;
        }
        return;
    }
    // b was the hash's last copy. Backward-shift deletion: pull later entries of the probe run into
    // the hole so every entry stays reachable from its home slot without tombstones.
    uint64_t hole = i;
    for (uint64_t j = (i + 1) & mask_; slots_[j].block >= 0; j = (j + 1) & mask_) {
        const uint64_t hj = home_of_slot(slots_[j]);
        // Move j into the hole unless its home lies cyclically in (hole, j].
        bool home_after_hole = hole <= j ? (hj > hole && hj <= j) : (hj > hole || hj <= j);
        if (!home_after_hole) {
            slots_[hole] = slots_[j];
            trailer(slots_[j].block)->slot = uint32_t(hole);
            hole = j;
        }
    }
    slots_[hole] = Slot{};
    --hashes_;
}

int64_t PrefixCache::longest_displacement() const {
    int64_t longest = 0;
    for (uint64_t i = 0; i <= mask_; ++i)
        if (slots_[i].block >= 0) longest = std::max<int64_t>(longest, int64_t((i - home_of_slot(slots_[i])) & mask_));
    return longest;
}

void PrefixCache::clear() {
    for (Slot &sl : slots_) {
        // A slot without copies names its hash's only copy; every other block's flag is 0.
        if (sl.block >= 0 && !(sl.tag & kCopies)) trailer(sl.block)->only = 0;
        sl = Slot{};
    }
    size_ = hashes_ = 0;
}

}  // namespace kvc
