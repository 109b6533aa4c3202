// Chained block hashes for the prefix cache.
//
//   hash_i = XXH3-128( hash_{i-1} || token ids of block i || tagged extra keys of block i )
//   hash_{-1} = kRootHash (a fixed seed)
//
// Extra keys are *tagged*: each is written as [kind byte][uint32 payload length][payload], so a
// LoRA id can never be read as a salt or a multimodal hash (vLLM mixes them untagged, issue #44701).
//   - LoRA id (when non-zero): every block.
//   - cache salt (when set): block 0 only, so prompts with different salts share no block.
//   - multimodal items: every item whose token range overlaps the block, as (hash hi, hash lo,
//     offset relative to the block start, length).
// Besides the hash, a block records its LoRA id and a 64-bit digest of its salt/multimodal keys
// (0 = none); a cache hit compares both, plus the parent hash and the token ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/keys.hpp"

namespace kvc {

struct Hash128 {
    uint64_t hi = 0;
    uint64_t lo = 0;
    bool operator==(const Hash128 &o) const { return hi == o.hi && lo == o.lo; }
    bool operator!=(const Hash128 &o) const { return !(*this == o); }
};

// Parent of block 0 ("libkvc-prefix-v1" as two little-endian words).
constexpr Hash128 kRootHash = {0x78666572702d6376ull, 0x31762d6b696c6269ull};

// Copies one block's token ids. The common block sizes get constant-size copies the compiler
// inlines (a libc memcpy call costs more than copying 64 bytes).
inline void copy_block_tokens(void *dst, const void *src, size_t bytes) {
    switch (bytes) {
        case 32: __builtin_memcpy(dst, src, 32); break;
        case 64: __builtin_memcpy(dst, src, 64); break;
        case 128: __builtin_memcpy(dst, src, 128); break;
        default: __builtin_memcpy(dst, src, bytes); break;
    }
}

// 128-bit hash of bytes: XXH3-128, or the test override (lib/testing.h) when one is set.
Hash128 hash_bytes(const void *data, size_t len);

// Identity of one full block's content.
struct BlockKey {
    Hash128 hash;
    uint64_t lora_id = 0;
    uint64_t extras_digest = 0;  // salt + multimodal keys, 0 = none
};

// Hashes blocks into a scratch buffer sized once for the pool's block size (no allocation per
// block). Not thread-safe: one per pool, used under the pool lock.
class BlockHasher {
public:
    void init(int32_t block_size);
    // Key of block `index` (tokens [index*bs, index*bs+bs) of the prompt) given its parent's hash.
    // `block_tokens` points at that block's block_size token ids.
    BlockKey hash_block(const Hash128 &parent, const int32_t *block_tokens, int64_t index, const KeySet &keys);

    // The same key, for a block whose "parent hash || token ids" (16 + block_size x 4 bytes, the
    // parent as hi then lo) the caller already laid out contiguously at `staged`. Blocks without
    // extra keys, the common case, are hashed right there: no copy into the scratch buffer.
    BlockKey hash_staged(const void *staged, int64_t index, const KeySet &keys);
    // hash_staged()'s hash for keys known to add nothing (no LoRA id, salt or multimodal item);
    // the LoRA id and digest are 0 then.
    Hash128 hash_plain(const void *staged) const { return hash_bytes(staged, staged_bytes_); }

    // Staging area in the scratch buffer, for callers with nowhere else to lay the block out:
    // writes `parent` and returns where the block_size token ids go; hash_staged(scratch(), ...).
    int32_t *stage_in_scratch(const Hash128 &parent);
    const void *scratch() const { return buf_.data(); }

private:
    // Appends the block's tagged extra keys behind the staged input in buf_ and hashes it all.
    BlockKey finish(int64_t index, const KeySet &keys);

    int32_t block_size_ = 0;
    size_t staged_bytes_ = 0;  // parent hash + token ids
    std::vector<unsigned char> buf_;
};

}  // namespace kvc
