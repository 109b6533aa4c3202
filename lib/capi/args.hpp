// Argument checks shared by the C API functions that take a prompt (kvc_prefix_*, kvc_tier_prefetch,
// kvc_prefix_lookup_tiers, kvc_can_alloc, kvc_alloc), so that each refusal has one status and one
// message wherever it comes from.
#pragma once

#include <cstdint>

#include "core/pool.hpp"
#include "error.hpp"

namespace kvc {

// pool and tokens not NULL, num_tokens >= 1.
inline kvc_status check_token_args(const kvc_pool *pool, const int32_t *tokens, int64_t num_tokens, const char *fn) {
    if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
    if (!tokens) return fail(KVC_ERR_NULL_ARG, "%s: tokens is NULL", fn);
    if (num_tokens < 1)
        return fail(KVC_ERR_INVALID_ARG, "%s: num_tokens must be >= 1, got %lld", fn, (long long)num_tokens);
    return KVC_OK;
}

// num_tokens within the pool's max_seq_len (0: no limit).
inline kvc_status check_max_len(const kvc_pool *pool, int64_t num_tokens, const char *fn) {
    const int64_t max = pool->config.max_seq_len;
    if (max > 0 && num_tokens > max)
        return fail(KVC_ERR_MAX_LEN, "%s: %lld tokens exceed max_seq_len %lld", fn, (long long)num_tokens,
                    (long long)max);
    return KVC_OK;
}

// A function a hybrid pool (kvc_pool_create_hybrid) does not offer yet (kvc.h, "Hybrid models").
inline kvc_status refuse_hybrid(const char *fn, const char *why) {
    return fail(KVC_ERR_UNSUPPORTED, "%s: not available on a hybrid pool (kvc_pool_create_hybrid) yet: %s", fn, why);
}

// The keys a call was given, or the empty set for NULL.
inline const KeySet &keys_or_empty(const kvc_keys *keys) { return keys ? keys->set : KeySet::empty(); }

}  // namespace kvc
