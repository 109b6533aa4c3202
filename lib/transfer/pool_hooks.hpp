// The transfer module's only door into the pool core: holding blocks outside sequence tables
// (kvc_pool::ext_refs, counted by the invariant checker), reserving fresh blocks for an import and
// entering them in the prefix cache once their bytes have landed. Every function takes the pool
// mutex itself; none is called with it held. Nothing here knows about UCX.
#pragma once

#include <cstdint>
#include <vector>

#include "core/block_hash.hpp"
#include "core/keys.hpp"
#include "kvc/kvc.h"

namespace kvc::xfer {

// The full blocks an export leases: device block ids, their token ids (block_size each) and
// chained hashes, in prompt order.
struct HeldPrefix {
    std::vector<int32_t> blocks;
    std::vector<int32_t> tokens;
    std::vector<Hash128> hashes;
};

// Leases the leading cached device blocks of the prompt's full blocks (verified as a prefix hit
// is; at most num_tokens / block_size, not the last-token rule: an export hands out what is
// there). KVC_ERR_STATE when not even the first block is cached. Runs the storage barrier first so
// that restored blocks' bytes are in place.
kvc_status hold_prompt(kvc_pool *p, const int32_t *tokens, int64_t num_tokens, const KeySet &keys, HeldPrefix *out,
                       const char *fn);
// The same for sequence seq_id's leading full blocks that are cached (its hashed blocks).
kvc_status hold_seq(kvc_pool *p, uint64_t seq_id, HeldPrefix *out, const char *fn);

// Drops one outside reference from each block (a lease ends, an import gives its blocks back
// uncached or, after commit_import, cached). Deepest first, as kvc_free releases.
void release_blocks(kvc_pool *p, const std::vector<int32_t> &blocks);

// An import's reservation: the leading blocks of the prefix already cached on this device (held
// so that the reservation's evictions cannot take them), and fresh blocks for the rest.
struct Reservation {
    int64_t skipped = 0;         // leading blocks already cached here: not pulled
    std::vector<int32_t> held;   // those blocks (held)
    std::vector<int32_t> fresh;  // blocks [skipped, n) of the prefix, refcount 1, uncached
};

// keys[i] is block i's identity (recomputed by the caller from tokens + the importer's keys),
// tokens block_size ids per block. Refuses with KVC_ERR_OUT_OF_BLOCKS, nothing changed, when the
// fresh blocks would leave fewer free blocks than the watermark.
kvc_status reserve_import(kvc_pool *p, const BlockKey *keys, const int32_t *tokens, int64_t n, int32_t priority,
                          Reservation *out, const char *fn);

// The fresh blocks hold their bytes: enters each in the prefix cache under its identity (unless
// its hash is cached here meanwhile: then it goes back uncached), with BLOCK_STORED events, and
// releases every block of the reservation (they stay cached, refcount 0, evictable). Returns the
// number of blocks entered.
int64_t commit_import(kvc_pool *p, const BlockKey *keys, const int32_t *tokens, int64_t n, Reservation *r);

// Gives every block of the reservation back (fresh ones uncached). Nothing is entered.
void abort_import(kvc_pool *p, Reservation *r);

}  // namespace kvc::xfer
