// C API: kvc_hash_blocks, a prompt's chained block hashes without a pool (for KV-aware routers).
// It runs the pool's own BlockHasher from the same root, so the values cannot drift from what a
// pool caches and reports in its KV events; the README's "Block hash specification" describes
// the bytes for re-implementations (tests/conformance/hash_spec.py is one, checked against this).
#include "capi/args.hpp"
#include "core/block_hash.hpp"
#include "error.hpp"

namespace {

using kvc::fail;

kvc_status check_hash_args(int32_t block_size, const int32_t *tokens, int64_t num_tokens, const uint64_t *hash_hi,
                           const uint64_t *hash_lo, int64_t cap, const int64_t *out_count) {
    const char *fn = "kvc_hash_blocks";
    if (!out_count) return fail(KVC_ERR_NULL_ARG, "%s: out_count is NULL", fn);
    if (block_size < 1) return fail(KVC_ERR_INVALID_ARG, "%s: block_size must be >= 1, got %d", fn, block_size);
    if (num_tokens < 0)
        return fail(KVC_ERR_INVALID_ARG, "%s: num_tokens must be >= 0, got %lld", fn, (long long)num_tokens);
    if (cap < 0) return fail(KVC_ERR_INVALID_ARG, "%s: cap must be >= 0, got %lld", fn, (long long)cap);
    if (!tokens && num_tokens > 0) return fail(KVC_ERR_NULL_ARG, "%s: tokens is NULL", fn);
    if (cap > 0 && (!hash_hi || !hash_lo))
        return fail(KVC_ERR_NULL_ARG, "%s: %s is NULL with cap %lld", fn, hash_hi ? "hash_lo" : "hash_hi",
                    (long long)cap);
    return KVC_OK;
}

// A size query (no arrays, cap 0) succeeds with the count alone; any other cap below it is refused
// with the count as the required size.
bool is_size_query(const uint64_t *hash_hi, const uint64_t *hash_lo, int64_t cap) {
    return cap == 0 && !hash_hi && !hash_lo;
}

}  // namespace

extern "C" {

KVC_API kvc_status kvc_hash_blocks(int32_t block_size, const kvc_keys *keys, const int32_t *tokens, int64_t num_tokens,
                                   uint64_t *hash_hi, uint64_t *hash_lo, int64_t cap, int64_t *out_count) {
    KVC_GUARD({
        kvc_status st = check_hash_args(block_size, tokens, num_tokens, hash_hi, hash_lo, cap, out_count);
        if (st != KVC_OK) return st;
        const int64_t full = num_tokens / block_size;
        if (is_size_query(hash_hi, hash_lo, cap)) {
            *out_count = full;
            return KVC_OK;
        }
        if (cap < full) {
            *out_count = full;
            return fail(KVC_ERR_BUFFER_TOO_SMALL, "kvc_hash_blocks: cap %lld, the prompt has %lld full blocks",
                        (long long)cap, (long long)full);
        }
        if (full > 0) {
            // A hasher per call: its scratch is sized for this block_size, and no state is shared,
            // so concurrent callers need no lock.
            kvc::BlockHasher hasher;
            hasher.init(block_size);
            const kvc::KeySet &ks = kvc::keys_or_empty(keys);
            kvc::Hash128 chain = kvc::kRootHash;
            for (int64_t i = 0; i < full; ++i) {
                chain = hasher.hash_block(chain, tokens + i * block_size, i, ks).hash;
                hash_hi[i] = chain.hi;
                hash_lo[i] = chain.lo;
            }
        }
        *out_count = full;
        return KVC_OK;
    })
}

}  // extern "C"
