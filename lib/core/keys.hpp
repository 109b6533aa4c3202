// What besides token ids identifies a block's KV content (kvc_keys), plus the request's retention
// priority and its cap on prefix hits. A sequence keeps its own copy (taken at kvc_alloc, copied by kvc_fork) because
// blocks are hashed later, as decode fills them.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "kvc/kvc.h"

namespace kvc {

struct MmItem {
    uint64_t hash_hi = 0;
    uint64_t hash_lo = 0;
    int64_t offset = 0;  // first prompt token covered
    int64_t length = 0;  // tokens covered, >= 1
};

struct KeySet {
    uint64_t lora_id = 0;
    int32_t salt_len = 0;
    int32_t priority = KVC_PRIORITY_DEFAULT;
    int64_t max_cached_tokens = -1;  // kvc_keys_set_max_cached_tokens; -1: no cap
    // Hybrid pools: the KV-cache group whose blocks these keys hash (a tagged extra key of every
    // block when non-zero, core/block_hash.md). Never set from the C API: the pool sets it on its
    // per-group copies.
    uint32_t group = 0;
    char salt[KVC_MAX_SALT_LEN] = {};
    std::vector<MmItem> mm;  // increasing, non-overlapping offsets

    void clear() {
        lora_id = 0;
        salt_len = 0;
        priority = KVC_PRIORITY_DEFAULT;
        max_cached_tokens = -1;
        group = 0;
        mm.clear();
    }

    // Copy that reuses this object's vector capacity (no allocation when it suffices). May throw
    // std::bad_alloc, before changing anything.
    void assign(const KeySet &o) {
        if (&o == this) return;
        mm.reserve(o.mm.size());
        lora_id = o.lora_id;
        salt_len = o.salt_len;
        priority = o.priority;
        max_cached_tokens = o.max_cached_tokens;
        group = o.group;
        if (o.salt_len > 0) std::memcpy(salt, o.salt, size_t(o.salt_len));
        mm.assign(o.mm.begin(), o.mm.end());
    }

    // The keys used when a caller passes NULL.
    static const KeySet &empty();
};

}  // namespace kvc

struct kvc_keys {
    kvc::KeySet set;
};
