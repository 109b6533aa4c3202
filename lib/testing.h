/* Test-only hooks into libkvc internals. Linked from the static archive (kvc_static) by white-box
 * tests; these symbols are hidden and not exported from libkvc.so (they are not kvc_* names).
 * Not thread-safe with respect to concurrent pool use: set them before creating pools. */
#ifndef KVC_TESTING_H
#define KVC_TESTING_H

#include <stddef.h>
#include <stdint.h>

#include "kvc/kvc.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Replacement for the 128-bit block hash (e.g. a constant, to force collisions).
 *  NULL restores XXH3-128. */
typedef void (*kvct_hash_fn)(const void *data, size_t len, uint64_t *out_hi, uint64_t *out_lo);
void kvct_set_hash_override(kvct_hash_fn fn);

/** Per-block metadata, read under the pool lock. Out-of-range block ids return -1. */
int32_t kvct_block_refcount(kvc_pool *pool, int32_t block);
int32_t kvct_block_pin_count(kvc_pool *pool, int32_t block);
int32_t kvct_block_priority(kvc_pool *pool, int32_t block);
/** 1 if the block is in the prefix cache (its hash is in the map), else 0. */
int32_t kvct_block_is_cached(kvc_pool *pool, int32_t block);
/** The block the next fresh allocation would take (the free queues' head), -1 if none. */
int32_t kvct_next_victim(kvc_pool *pool);

/** Adds delta to a block's refcount without touching anything else, so a test can prove that
 *  kvc_pool_check detects the violation (then undo it with -delta). */
void kvct_corrupt_refcount(kvc_pool *pool, int32_t block, int32_t delta);

#ifdef __cplusplus
}
#endif

#endif /* KVC_TESTING_H */
