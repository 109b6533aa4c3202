#include "core/block_hash.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

#define XXH_INLINE_ALL  // header-only: libkvc.so carries no runtime dependency on libxxhash
#include <xxhash.h>

#ifdef KVC_TEST_HOOKS  // the test archive only (lib/CMakeLists.txt): libkvc.so has no override
#include "testing.h"
#endif

namespace kvc {
namespace {

#ifdef KVC_TEST_HOOKS
std::atomic<kvct_hash_fn> g_hash_override{nullptr};
#endif

enum ExtraKind : unsigned char { kKindLora = 1, kKindSalt = 2, kKindMultimodal = 3, kKindGroup = 4 };

// Payload bytes of the largest tagged extras of one block: LoRA, salt, and at most block_size
// multimodal items (items do not overlap and each covers >= 1 token).
constexpr size_t kTagHeader = 1 + 4;
constexpr size_t kLoraBytes = kTagHeader + 8;
constexpr size_t kSaltBytes = kTagHeader + KVC_MAX_SALT_LEN;
constexpr size_t kMmBytes = kTagHeader + 32;
constexpr size_t kGroupBytes = kTagHeader + 4;

unsigned char *put_tag(unsigned char *p, unsigned char kind, uint32_t len) {
    *p++ = kind;
    std::memcpy(p, &len, 4);
    return p + 4;
}

unsigned char *put_u64(unsigned char *p, uint64_t v) {
    std::memcpy(p, &v, 8);
    return p + 8;
}

}  // namespace

// flatten: XXH3_128bits and its short-input paths are inlined here (GCC otherwise leaves a call
// to the public entry point, which dispatches on the length again).
// The override's result has its own variable: sharing one whose address escapes to the override
// would send XXH3's result through memory too.
__attribute__((flatten)) Hash128 hash_bytes(const void *data, size_t len) {
#ifdef KVC_TEST_HOOKS
    if (kvct_hash_fn fn = g_hash_override.load(std::memory_order_relaxed)) {
        Hash128 o;
        fn(data, len, &o.hi, &o.lo);
        return o;
    }
#endif
    const XXH128_hash_t x = XXH3_128bits(data, len);
    Hash128 h;
    h.hi = x.high64;
    h.lo = x.low64;
    return h;
}

void BlockHasher::init(int32_t block_size) {
    block_size_ = block_size;
    staged_bytes_ = sizeof(Hash128) + size_t(block_size) * sizeof(int32_t);
    buf_.assign(staged_bytes_ + kLoraBytes + kSaltBytes + kGroupBytes + size_t(block_size) * kMmBytes, 0);
}

// A block with no extra key (no LoRA, no multimodal item, no salt on block 0): LoRA id and digest
// are 0 and its hash covers "parent || token ids" alone (README, "Block hash specification").
static inline bool plain_block(int64_t index, const KeySet &keys) {
    return keys.lora_id == 0 && keys.group == 0 && keys.mm.empty() && (index != 0 || keys.salt_len == 0);
}

int32_t *BlockHasher::stage_in_scratch(const Hash128 &parent) {
    unsigned char *p = buf_.data();
    p = put_u64(p, parent.hi);
    put_u64(p, parent.lo);
    return reinterpret_cast<int32_t *>(buf_.data() + sizeof(Hash128));
}

BlockKey BlockHasher::hash_block(const Hash128 &parent, const int32_t *block_tokens, int64_t index,
                                 const KeySet &keys) {
    copy_block_tokens(stage_in_scratch(parent), block_tokens, staged_bytes_ - sizeof(Hash128));
    // Always through finish(), also for a block without extra keys: returning hash_bytes() here
    // directly ran 23 instructions fewer per block but made prefix lookups ~50 % slower on this
    // machine (bench_core PrefixLookup/0: 31 vs 20.5 ns/block; likely the loads of the freshly
    // staged bytes stalling on the stores) -- measured and reverted, session 13.
    return finish(index, keys);
}

BlockKey BlockHasher::hash_staged(const void *staged, int64_t index, const KeySet &keys) {
    if (plain_block(index, keys)) {
        BlockKey key;  // no extra keys: LoRA id and digest 0, the hash covers the staged bytes only
        key.hash = hash_bytes(staged, staged_bytes_);
        return key;
    }
    if (staged != buf_.data()) std::memcpy(buf_.data(), staged, staged_bytes_);
    return finish(index, keys);
}

BlockKey BlockHasher::finish(int64_t index, const KeySet &keys) {
    BlockKey key;
    unsigned char *p = buf_.data() + staged_bytes_;

    // Salt and multimodal keys first: they form the digest recorded per block.
    unsigned char *extras = p;
    if (index == 0 && keys.salt_len > 0) {
        p = put_tag(p, kKindSalt, uint32_t(keys.salt_len));
        std::memcpy(p, keys.salt, size_t(keys.salt_len));
        p += keys.salt_len;
    }
    if (!keys.mm.empty()) {
        int64_t start = index * block_size_, end = start + block_size_;
        // First item ending after the block start (items are sorted and disjoint, so ends are too).
        auto it = std::upper_bound(keys.mm.begin(), keys.mm.end(), start,
                                   [](int64_t s, const MmItem &m) { return s < m.offset + m.length; });
        for (; it != keys.mm.end() && it->offset < end; ++it) {
            p = put_tag(p, kKindMultimodal, 32);
            p = put_u64(p, it->hash_hi);
            p = put_u64(p, it->hash_lo);
            p = put_u64(p, uint64_t(it->offset - start));
            p = put_u64(p, uint64_t(it->length));
        }
    }
    if (p != extras) key.extras_digest = XXH3_64bits(extras, size_t(p - extras));
    if (keys.lora_id != 0) {
        p = put_tag(p, kKindLora, 8);
        p = put_u64(p, keys.lora_id);
    }
    key.lora_id = keys.lora_id;
    if (keys.group != 0) {  // a hybrid pool's group >= 1: its blocks are other entries than group 0's
        p = put_tag(p, kKindGroup, 4);
        std::memcpy(p, &keys.group, 4);
        p += 4;
    }
    key.hash = hash_bytes(buf_.data(), size_t(p - buf_.data()));
    return key;
}

}  // namespace kvc

#ifdef KVC_TEST_HOOKS
extern "C" void kvct_set_hash_override(kvct_hash_fn fn) { kvc::g_hash_override.store(fn, std::memory_order_relaxed); }
#endif
