// The prefix cache index: block hash -> block id, plus what each cached block must match on a hit
// (parent hash, LoRA id, extras digest, token ids).
//
// The map is open addressing with linear probing over a preallocated power-of-two slot array of
// at least 2 x num_blocks entries (load <= 0.5): insert/find/erase are O(1) expected and never
// allocate. A hash's probe starts at a keyed mix of it (home()), the key random per index: block
// hashes use a fixed seed (stable across restarts and ranks), so without the key anyone could aim
// prompts at one region of the table and make every probe there walk a long run. Each hash maps to one block: when a second block fills with content whose hash is
// already cached, the existing entry is kept and the new block stays uncached.
//
// Per block one record, preallocated and aligned to a cache line, no per-block allocation:
//   [hash 16][lora id 8][extras digest 8][parent hash 16][token ids block_size x 4]
// A hit's comparison reads the first line; the parent hash sits right before the token ids so that
// "parent || token ids", the input of the block's chained hash (block_hash.hpp), is one contiguous
// run: a filling block is staged there and hashed in place, and entering it in the cache then
// writes only the hash, the LoRA id, the digest and the map slot (no copy of the token ids).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "block_hash.hpp"

namespace kvc {

class PrefixCache {
public:
    void init(int32_t num_blocks, int32_t block_size);

    int64_t size() const { return size_; }
    // The longest distance from an entry's home slot to where it sits (tests: a bound on probe
    // lengths). O(capacity).
    int64_t longest_displacement() const;

    // Block cached under this hash, or -1. Slots carry 32 bits of the hash, so a probe past a
    // different entry does not touch that block's record.
    int32_t find(const Hash128 &h) const {
        uint64_t unused;
        return find_or_slot(h, &unused);
    }

    // find(), and on a miss the empty slot that ended the probe: insert_at() uses it, so entering a
    // block after a miss does not probe again.
    int32_t find_or_slot(const Hash128 &h, uint64_t *empty_slot) const {
        const uint32_t tag = tag_of(h);
        for (uint64_t i = home(h);; i = (i + 1) & mask_) {
            const Slot &sl = slots_[i];
            if (sl.block < 0) {
                *empty_slot = i;
                return -1;
            }
            if (sl.tag == tag && rec(sl.block)->hash == h) return sl.block;
        }
    }

    // True when block b (found under key.hash) holds exactly this content.
    bool verify(int32_t b, const Hash128 &parent, const BlockKey &key, const int32_t *tokens) const {
        const Record *r = rec(b);
        return r->parent == parent && r->lora_id == key.lora_id && r->extras_digest == key.extras_digest &&
               std::memcmp(tokens_of(b), tokens, token_bytes_) == 0;
    }

    // ---- Staging a filling block in its own record (b must not be cached) ----
    // Writes `parent` in front of b's token row and returns the row for the caller to fill with the
    // block's token ids; staged_input(b) is then "parent || token ids" (staged_input_bytes() long),
    // ready to hash. Until insert_at(), nothing reads an uncached block's record.
    int32_t *stage(int32_t b, const Hash128 &parent) {
        Record *r = rec(b);
        r->parent = parent;
        return tokens_of_mut(b);
    }
    const void *staged_input(int32_t b) const { return &rec(b)->parent; }
    size_t staged_input_bytes() const { return sizeof(Hash128) + token_bytes_; }

    // Enters block b, staged with stage(), under key.hash at the empty slot find_or_slot() gave
    // (nothing else may have changed the map in between).
    void insert_at(uint64_t empty_slot, int32_t b, const BlockKey &key) {
        Record *r = rec(b);
        r->hash = key.hash;
        r->lora_id = key.lora_id;
        r->extras_digest = key.extras_digest;
        slots_[empty_slot].block = b;
        slots_[empty_slot].tag = tag_of(key.hash);
        ++size_;
    }

    // Enters block b (not cached, key.hash not in the map) with its identity and tokens.
    void insert(int32_t b, const Hash128 &parent, const BlockKey &key, const int32_t *tokens);

    // Removes block b's entry (b must be cached).
    void erase(int32_t b);

    // Drops every entry (the blocks' cached flags are the caller's business).
    void clear();

    const Hash128 &hash_of(int32_t b) const { return rec(b)->hash; }
    const Hash128 &parent_of(int32_t b) const { return rec(b)->parent; }
    uint64_t lora_of(int32_t b) const { return rec(b)->lora_id; }
    uint64_t digest_of(int32_t b) const { return rec(b)->extras_digest; }
    const int32_t *tokens_of(int32_t b) const { return reinterpret_cast<const int32_t *>(rec(b) + 1); }

    // For the invariant checker: slot contents.
    int64_t slot_count() const { return int64_t(slots_.size()); }
    int32_t slot(int64_t i) const { return slots_[size_t(i)].block; }

private:
    // The fixed-size head of a block's record; the token ids follow it directly (48 bytes in, so
    // they are 16-byte aligned).
    struct Record {
        Hash128 hash;
        uint64_t lora_id = 0;
        uint64_t extras_digest = 0;
        Hash128 parent;
    };
    static_assert(sizeof(Record) == 48, "the parent hash must end where the token ids start");
    struct alignas(64) Line {
        unsigned char bytes[64];
    };
    struct Slot {
        int32_t block = -1;
        uint32_t tag = 0;
    };
    static uint32_t tag_of(const Hash128 &h) { return uint32_t(h.hi >> 32); }
    // The probe start: multiply-shift hashing (a universal family: for any two distinct hashes, a
    // random odd multiplier puts them in one slot with probability about 2 / capacity) of each half
    // with its own random key, combined. Not cryptographic: it makes the layout unpredictable to a
    // client who can compute block hashes offline, which is what aiming collisions needs. Nothing
    // observable depends on it. Two multiplies: a lookup per cached block runs through here.
    uint64_t home(const Hash128 &h) const { return ((h.lo * key_[0]) ^ (h.hi * key_[1])) >> shift_; }

    Record *rec(int32_t b) const { return reinterpret_cast<Record *>(lines_.get() + int64_t(b) * lines_per_record_); }
    int32_t *tokens_of_mut(int32_t b) { return reinterpret_cast<int32_t *>(rec(b) + 1); }

    int32_t block_size_ = 0;
    int32_t lines_per_record_ = 0;
    size_t token_bytes_ = 0;
    uint64_t mask_ = 0;
    uint64_t key_[2] = {1, 1};  // random odd multipliers, per init()
    int shift_ = 60;            // 64 - log2(capacity)
    int64_t size_ = 0;
    std::vector<Slot> slots_;
    std::unique_ptr<Line[]> lines_;  // num_blocks records of lines_per_record_ lines
};

}  // namespace kvc
