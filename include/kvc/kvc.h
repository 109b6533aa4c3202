/**
 * @file kvc.h
 * @brief libkvc — a paged KV-cache manager for LLM inference: the whole public C API.
 *
 * This header is the whole public API. It compiles as C99 and as C++. It is organised by object;
 * each section is a Doxygen group (the "Modules" page of the HTML reference, `docs` target) and
 * opens with what holds for all of its calls.
 *
 * Contents, in header order:
 *  - @ref kvc_conventions "Conventions" — statuses, all-or-nothing failures, struct_size
 *    versioning, thread safety, determinism (this block).
 *  - @ref kvc_version_group "Versions" — KVC_VERSION_*, kvc_version(), kvc_version_string().
 *  - @ref kvc_status_group "Status codes and error messages" — kvc_status, kvc_status_str(),
 *    kvc_last_error(), kvc_last_error_copy().
 *  - @ref kvc_types_group "Common enumerations" — kvc_dtype, kvc_backend.
 *  - @ref kvc_pool_group "Pool" — kvc_pool_config and sizing helpers, kvc_pool_create /
 *    kvc_pool_destroy, kvc_pool_get_config, kvc_pool_check, kvc_pool_stats (kvc_stats), the
 *    sliding window, kvc_cuda_device_count.
 *  - @ref kvc_keys_group "Cache keys" — kvc_keys: LoRA id, salt, multimodal items, retention
 *    priority, hit cap.
 *  - @ref kvc_seq_group "Sequences" — admission (kvc_can_alloc, kvc_admit, kvc_alloc), growth
 *    (kvc_append, kvc_append_batch), kvc_fork, kvc_truncate, release (kvc_free, kvc_abort),
 *    queries (kvc_seq_block_table, kvc_seq_num_tokens, kvc_seq_slot_mapping).
 *  - @ref kvc_prefix_group "Prefix cache" — kvc_prefix_lookup, kvc_prefix_lookup_tiers,
 *    kvc_prefix_pin / kvc_prefix_unpin, kvc_prefix_cache_reset, kvc_hash_blocks.
 *  - @ref kvc_events_group "KV events" — kvc_event, kvc_event_pop, kvc_pool_set_tier_events.
 *  - @ref kvc_tiers_group "Memory tiers" — attaching host and disk tiers, kvc_tier_prefetch,
 *    kvc_tier_flush, kvc_tier_get_stats; preemption (kvc_swap_out, kvc_swap_in, kvc_op_query,
 *    kvc_op_wait, kvc_preempt_recompute, kvc_preemption_cost).
 *  - @ref kvc_storage_group "KV storage and copies" — kvc_storage_get_info, kvc_cache_write,
 *    kvc_storage_copy_blocks, copy-on-write (kvc_copy_pending, kvc_take_pending_copies).
 *  - @ref kvc_batch_group "Batch metadata" — kvc_batch: create, build, stream, info, copies.
 *  - @ref kvc_attention_group "Attention" — kvc_attention_params, kvc_launch_attention.
 *  - @ref kvc_xfer_group "KV transfer" — kvc_xfer_*: agents, exports, imports, stats.
 *
 * Each function's doc block says what it does, then its parameters (@c param), what it returns
 * (@c retval: the statuses it gives besides KVC_OK, and when) and, under "Thread safety", who may
 * call it when.
 *
 * @anchor kvc_conventions
 * <b>Conventions</b> (they hold for every function below unless its doc block says otherwise):
 *  - Every function returns a kvc_status; KVC_OK (0) means success. No C++ exception, abort or crash
 *    crosses this boundary.
 *  - A failing call changes nothing: the pool is exactly as before the call (all-or-nothing).
 *  - On failure a readable message is stored for the *calling OS thread*; read it with
 *    kvc_last_error(). See the README ("Error messages") for why this survives Go goroutine migration
 *    (the Go binding pins the goroutine to its OS thread across call + read) and many threads sharing
 *    one pool (each thread has its own message).
 *  - Handles are opaque. Objects created by kvc_X_create are released by kvc_X_destroy; destroying
 *    NULL is a no-op that returns KVC_OK.
 *  - Out-params are written only on success, except the documented "required size" out-params of
 *    KVC_ERR_BUFFER_TOO_SMALL.
 *  - Counts are signed 64-bit so that negative values from callers are detected, not wrapped.
 *  - Config and info structs start with struct_size; set it with the matching *_default()/init
 *    function (or sizeof). Fields are only ever appended, so older callers keep working. One rule
 *    for every struct: the library takes the size of any release of it (the functions name the
 *    older sizes they take); a struct the library fills (stats, info, events) may also be larger —
 *    a caller built against a newer kvc.h gets the fields this library knows and keeps the rest;
 *    a struct the library reads (kvc_pool_config, kvc_attention_params) may not, since this
 *    library could not honour fields it does not know. Anything else is KVC_ERR_VERSION.
 *  - Thread safety: every function taking a kvc_pool* may be called from many threads at once.
 *    kvc_keys and kvc_batch objects are owned by one caller at a time (no internal locking), but
 *    may be read (const) by several threads.
 *  - Determinism (tensor parallelism): what a pool decides — statuses, block ids in tables and
 *    batches, slot mappings, cached-token counts, verdicts, copy-on-write pairs, evictions, tier
 *    slots, operation ids, events and every block count in kvc_stats / kvc_tier_stats — is a
 *    function of the calls made on it, in order, with their arguments, and of block_size,
 *    num_blocks, prefix_caching, watermark, max_seq_len, event_capacity, the sliding window and the
 *    tiers' slot counts. It does not depend on num_layers, the head counts, head_dim, kv_dtype,
 *    device, addresses or timing, nor on the backend among pools with KV storage (CPU, CUDA; a
 *    metadata-only pool decides alike but refuses tiers and storage calls). So tensor-parallel
 *    ranks, each with a pool of the same num_blocks holding its shard of the KV heads, stay in
 *    lockstep when each makes the same calls (README, "Tensor parallelism"). Not covered: byte
 *    counts and times (they scale with the shard), kvc_op_query's answer (it reports the copies'
 *    progress), the storage and kernel calls' own failures (a launch refused for a head dim is the
 *    rank's shape), calls made concurrently from several threads (their order is the
 *    scheduler's), and disk tier I/O or checksum failures (a rank's own disk decides those;
 *    kvc_tier_stats counts them).
 */
#ifndef KVC_KVC_H
#define KVC_KVC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KVC_BUILDING_LIBRARY) && defined(__GNUC__)
#define KVC_API __attribute__((visibility("default")))
#else
#define KVC_API
#endif

/* ================================================================================================
 * Versions
 * ============================================================================================= */
/**
 * @defgroup kvc_version_group Versions
 * @brief Compile-time and run-time version of libkvc, to detect a header/library mismatch.
 * @{
 */

/** Major version of this header. */
#define KVC_VERSION_MAJOR 0
/** Minor version of this header. */
#define KVC_VERSION_MINOR 1
/** Patch version of this header. */
#define KVC_VERSION_PATCH 0
/** Single comparable number: major * 10000 + minor * 100 + patch. */
#define KVC_VERSION_NUMBER (KVC_VERSION_MAJOR * 10000 + KVC_VERSION_MINOR * 100 + KVC_VERSION_PATCH)

/**
 * @brief Runtime version of the loaded library as KVC_VERSION_NUMBER.
 *
 * Compare with the macro to detect a header/library mismatch.
 * @return The version number. Never fails.
 * @par Thread safety
 * Any thread, any time.
 */
KVC_API int32_t kvc_version(void);

/**
 * @brief Runtime version as a static string "major.minor.patch".
 * @return The string: never NULL, static, not freed by the caller. Never fails.
 * @par Thread safety
 * Any thread, any time.
 */
KVC_API const char *kvc_version_string(void);
/** @} */

/* ================================================================================================
 * Status codes and error messages
 * ============================================================================================= */
/**
 * @defgroup kvc_status_group Status codes and error messages
 * @brief What every call returns, and the per-thread message that explains a failure.
 * @{
 */

/** @brief Status of a call: KVC_OK, or why it failed (nothing was changed). */
typedef enum kvc_status {
    KVC_OK = 0,
    KVC_ERR_NULL_ARG = 1,         /**< a required pointer argument was NULL */
    KVC_ERR_INVALID_ARG = 2,      /**< a value outside its documented range */
    KVC_ERR_OVERFLOW = 3,         /**< a size or count computation would overflow */
    KVC_ERR_NO_MEMORY = 4,        /**< a host or device allocation failed */
    KVC_ERR_OUT_OF_BLOCKS = 5,    /**< not enough free blocks now; nothing was changed */
    KVC_ERR_UNKNOWN_SEQ = 6,      /**< no sequence with that id */
    KVC_ERR_SEQ_EXISTS = 7,       /**< a sequence with that id already exists */
    KVC_ERR_BUFFER_TOO_SMALL = 8, /**< caller buffer too small; the required size was reported */
    KVC_ERR_MAX_LEN = 9,          /**< the sequence would exceed the pool's max_seq_len */
    KVC_ERR_BUSY = 10,            /**< refused while resources are in use (e.g. cache reset) */
    KVC_ERR_UNSUPPORTED = 11,     /**< valid but unsupported here (dtype, head dim, backend) */
    KVC_ERR_DEVICE = 12,          /**< CUDA error, no device, or no driver */
    KVC_ERR_IO = 13,              /**< file or disk I/O failed */
    KVC_ERR_VERSION = 14,         /**< struct_size unknown to this library version */
    KVC_ERR_STATE = 15,           /**< the object is in the wrong state for this operation */
    KVC_ERR_INTERNAL = 16         /**< an internal invariant failed (a bug; please report) */
} kvc_status;

/**
 * @brief Static English name of a status ("KVC_ERR_OUT_OF_BLOCKS: ...").
 * @param[in] status A kvc_status value; unknown values give a generic string.
 * @return The string: never NULL, static, never freed by the caller. Never fails.
 * @par Thread safety
 * Any thread, any time.
 */
KVC_API const char *kvc_status_str(int32_t status);

/**
 * @brief Message of the most recent failing kvc_* call made *by this OS thread*, or "" if none.
 *
 * The pointer stays valid until this thread's next failing kvc_* call; copy it if needed.
 * Successful calls do not clear it.
 * @return The message, never NULL. Never fails.
 * @par Thread safety
 * Any thread; each OS thread reads its own message.
 */
KVC_API const char *kvc_last_error(void);

/**
 * @brief Copies kvc_last_error() into a caller buffer.
 * @param[out] buf     Receives the message, always NUL-terminated, truncated to cap bytes. May be
 *                     NULL when cap is 0.
 * @param[in]  cap     Size of buf in bytes, >= 0.
 * @param[out] out_len If non-NULL, receives the full message length without the NUL.
 * @retval KVC_ERR_NULL_ARG    buf is NULL while cap > 0 — the one failure that does *not* replace
 *                             the stored message, so the message being asked for survives a
 *                             mistaken call.
 * @retval KVC_ERR_INVALID_ARG cap < 0.
 * @par Thread safety
 * Any thread; each OS thread reads its own message.
 */
KVC_API kvc_status kvc_last_error_copy(char *buf, int64_t cap, int64_t *out_len);
/** @} */

/* ================================================================================================
 * Common enumerations
 * ============================================================================================= */
/**
 * @defgroup kvc_types_group Common enumerations
 * @brief Element types and backends, used by the pool configuration and the storage calls.
 * @{
 */

/** @brief Element type of the KV cache (kvc_pool_config.kv_dtype) and of kernel inputs. */
typedef enum kvc_dtype {
    KVC_DTYPE_F32 = 0,
    KVC_DTYPE_F16 = 1,
    KVC_DTYPE_BF16 = 2,
    KVC_DTYPE_FP8_E4M3 = 3 /**< KV cache only; values are scaled by per-tensor k/v scales */
} kvc_dtype;

/** @brief Where a pool keeps its KV storage and runs its kernels (kvc_pool_config.backend). */
typedef enum kvc_backend {
    KVC_BACKEND_NONE = 0, /**< metadata only: block tables, no KV storage (schedulers, simulators) */
    KVC_BACKEND_CPU = 1,  /**< KV storage in host memory; CPU kernels */
    KVC_BACKEND_CUDA = 2, /**< KV storage in device memory; CUDA kernels */
    KVC_BACKEND_AUTO = 3  /**< CUDA if a usable device exists, else CPU */
} kvc_backend;
/** @} */

/* ================================================================================================
 * Pool
 * ============================================================================================= */
/**
 * @defgroup kvc_pool_group Pool
 * @brief A pool: the blocks, their block tables and (with a backend) their KV storage.
 *
 * Configure with kvc_pool_config (kvc_pool_config_default, then the fields you need), size with
 * kvc_bytes_per_block / kvc_blocks_for_budget, create with kvc_pool_create and release with
 * kvc_pool_destroy. kvc_pool_stats reports its counters, kvc_pool_check its invariants, and
 * kvc_pool_set_sliding_window makes it a sliding-window pool.
 * @{
 */

/** @brief Pool configuration: shape, sizing, policy and backend (kvc_pool_create). */
typedef struct kvc_pool_config {
    uint32_t struct_size;         /**< sizeof(kvc_pool_config); set by kvc_pool_config_default */
    int32_t block_size;           /**< tokens per block, >= 1 (default 16) */
    int32_t num_layers;           /**< model layers, >= 1 (default 1) */
    int32_t num_kv_heads;         /**< KV heads, >= 1 (default 1) */
    int32_t num_q_heads;          /**< query heads, a multiple of num_kv_heads; 0 = num_kv_heads.
                                       Sizes attention scratch; launches may use fewer. */
    int32_t head_dim;             /**< head dimension, >= 1 (default 128) */
    int32_t kv_dtype;             /**< kvc_dtype of the KV cache (default KVC_DTYPE_F16) */
    int64_t num_blocks;           /**< blocks in the pool; 0 = derive from the budget below */
    int64_t memory_budget_bytes;  /**< used when num_blocks == 0 (and not gpu_memory_utilization) */
    double memory_utilization;    /**< fraction of the budget used for KV, (0,1] (default 0.9) */
    double watermark;             /**< fraction of blocks kept free by kvc_can_alloc, [0,1) (0.01) */
    int64_t max_seq_len;          /**< longest allowed sequence in tokens; 0 = unlimited */
    int32_t prefix_caching;       /**< 1 = on (default), 0 = off */
    int32_t backend;              /**< kvc_backend (default KVC_BACKEND_NONE) */
    int32_t device;               /**< CUDA device ordinal (default 0) */
    int32_t event_capacity;       /**< KV event ring size, 0 disables events (default 4096: on,
                                       so a router attached to a service configured without it
                                       still gets events; unread, the ring costs its fixed memory,
                                       about 4096 x (80 + 4 x block_size) bytes, and then one
                                       counter increment per dropped event: README, "KV events") */
    double gpu_memory_utilization;/**< CUDA: if > 0 and num_blocks == 0, size the pool from this
                                       fraction of the device's free memory (default 0) */
} kvc_pool_config;

/**
 * @brief Fills *cfg with defaults (including struct_size).
 * @param[out] cfg The configuration to fill.
 * @retval KVC_ERR_NULL_ARG cfg is NULL.
 * @par Thread safety
 * Any thread (touches only *cfg).
 */
KVC_API kvc_status kvc_pool_config_default(kvc_pool_config *cfg);

/**
 * @brief Bytes one block occupies across all layers with cfg's shape and dtype, in the storage
 *        layout.
 *
 * 2 (K,V) x block_size x num_kv_heads x head_dim x dtype_bytes x num_layers.
 * @param[in]  cfg       The configuration (struct_size set).
 * @param[out] out_bytes Receives the byte count.
 * @retval KVC_ERR_NULL_ARG    cfg or out_bytes is NULL.
 * @retval KVC_ERR_VERSION     cfg->struct_size unknown.
 * @retval KVC_ERR_INVALID_ARG shape <= 0, unknown dtype.
 * @retval KVC_ERR_OVERFLOW    the byte count overflows.
 * @par Thread safety
 * Any thread (reads only *cfg).
 */
KVC_API kvc_status kvc_bytes_per_block(const kvc_pool_config *cfg, int64_t *out_bytes);

/**
 * @brief Blocks that fit in budget_bytes: floor(budget_bytes x utilization / bytes_per_block).
 * @param[in]  cfg          The configuration (struct_size set).
 * @param[in]  budget_bytes Memory budget in bytes, >= 0.
 * @param[in]  utilization  Fraction of the budget to use, in (0,1].
 * @param[out] out_blocks   Receives the number of blocks.
 * @retval KVC_ERR_NULL_ARG    cfg or out_blocks is NULL.
 * @retval KVC_ERR_VERSION     cfg->struct_size unknown.
 * @retval KVC_ERR_INVALID_ARG as kvc_bytes_per_block, and budget_bytes < 0 or utilization not in
 *                             (0,1].
 * @retval KVC_ERR_OVERFLOW    as kvc_bytes_per_block.
 * @par Thread safety
 * Any thread (reads only *cfg).
 */
KVC_API kvc_status kvc_blocks_for_budget(const kvc_pool_config *cfg, int64_t budget_bytes,
                                         double utilization, int64_t *out_blocks);

/**
 * @brief Number of CUDA devices usable by this library.
 *
 * 0 when built without CUDA, or when no driver or no GPU is present (that is not an error). Never
 * loads anything that can crash.
 * @param[out] out_count Receives the device count.
 * @retval KVC_ERR_NULL_ARG out_count is NULL.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_cuda_device_count(int32_t *out_count);

/** @brief Opaque handle of a pool (kvc_pool_create / kvc_pool_destroy). */
typedef struct kvc_pool kvc_pool;

/**
 * @brief Creates a pool.
 *
 * The pool owns its KV storage (when backend != NONE), allocated once here and freed by
 * kvc_pool_destroy.
 * @param[in]  cfg The configuration (struct_size set, e.g. by kvc_pool_config_default).
 * @param[out] out Receives the new pool; release it with kvc_pool_destroy.
 * @retval KVC_ERR_NULL_ARG    cfg or out is NULL.
 * @retval KVC_ERR_VERSION     cfg->struct_size unknown.
 * @retval KVC_ERR_INVALID_ARG block_size 0, bad shape, watermark/utilization out of range, no
 *                             blocks.
 * @retval KVC_ERR_OVERFLOW    the storage size overflows.
 * @retval KVC_ERR_NO_MEMORY   the storage or the bookkeeping could not be allocated.
 * @retval KVC_ERR_DEVICE      CUDA requested but unavailable.
 * @retval KVC_ERR_UNSUPPORTED a configuration this build cannot serve.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_pool_create(const kvc_pool_config *cfg, kvc_pool **out);

/**
 * @brief Destroys a pool, its sequences and its storage.
 * @param[in] pool The pool; NULL is a no-op.
 * @return Always KVC_OK.
 * @par Thread safety
 * The caller must ensure no other thread is using the pool (like free()). Destroy the pool's
 * batches and transfer agents first.
 */
KVC_API kvc_status kvc_pool_destroy(kvc_pool *pool);

/**
 * @brief The resolved configuration (num_blocks filled in).
 * @param[in]  pool The pool.
 * @param[out] out  Receives a whole kvc_pool_config (out->struct_size is not read).
 * @retval KVC_ERR_NULL_ARG pool or out is NULL.
 * @par Thread safety
 * Any thread (the configuration is immutable after creation).
 */
KVC_API kvc_status kvc_pool_get_config(const kvc_pool *pool, kvc_pool_config *out);

/**
 * @brief Runs the internal invariant checker.
 *
 * Each block's refcount equals its number of table references, the free queues hold exactly the
 * refcount-0 unpinned blocks, no block twice, cache map consistent; with memory tiers also every
 * tier slot's state against its free/LRU list and hash index, and the host slots held by
 * swapped-out sequences. O(blocks).
 * @param[in] pool The pool.
 * @retval KVC_ERR_NULL_ARG pool is NULL.
 * @retval KVC_ERR_INTERNAL an invariant is violated; the message names the first violation.
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_pool_check(kvc_pool *pool);

/** @brief Snapshot of a pool's counters (kvc_pool_stats). */
typedef struct kvc_stats {
    uint32_t struct_size;           /**< set by the caller to sizeof(kvc_stats) */
    int64_t total_blocks;
    int64_t free_blocks;            /**< refcount 0 and not pinned (including cached-but-unused
                                         blocks): what allocation can take */
    int64_t used_blocks;            /**< refcount > 0 */
    int64_t cached_free_blocks;     /**< of free_blocks, those still in the prefix cache */
    int64_t pinned_blocks;          /**< blocks held by kvc_prefix_pin (and, during a kvc_alloc
                                         that promotes disk hits in rounds, by that call) */
    int64_t num_seqs;
    double utilization;             /**< used_blocks / total_blocks */
    int64_t allocs;                 /**< successful kvc_alloc calls */
    int64_t frees;                  /**< successful kvc_free calls */
    int64_t forks;
    int64_t appends;
    int64_t blocks_allocated;       /**< fresh blocks handed out (not counting cache hits) */
    int64_t blocks_freed;           /**< blocks whose refcount reached 0 */
    int64_t cow_copies;             /**< copy-on-write pairs queued */
    int64_t pending_copies;         /**< pairs queued and not yet drained */
    int64_t prefix_query_tokens;    /**< prompt tokens looked up by kvc_alloc */
    int64_t prefix_hit_tokens;      /**< of those, tokens served from the cache */
    double prefix_hit_rate;         /**< hit_tokens / query_tokens (0 when no queries) */
    int64_t evictions;              /**< cached blocks dropped to reuse their memory */
    int64_t verify_misses;          /**< hash matched but tokens/keys differed: treated as a miss */
    int64_t events_dropped;         /**< KV events lost because the ring was full */
    /* Appended after the first release: older callers pass offsetof(kvc_stats, cached_blocks_total). */
    int64_t cached_blocks_total;    /**< device blocks in the prefix cache, held by sequences,
                                         pinned or free: blocks, every copy of a hash counted, not
                                         distinct hashes (see "Prefix cache"). cached_free_blocks
                                         is its free part; kvc_tier_stats.cached_blocks of the
                                         device tier counts refcount-0 ones only. What a router
                                         fed by this pool's device KV events holds, at any time */
} kvc_stats;

/**
 * @brief Snapshot of the pool's counters.
 * @param[in]     pool The pool.
 * @param[in,out] out  out->struct_size must be set: sizeof(kvc_stats), or
 *                     offsetof(kvc_stats, cached_blocks_total) (the struct before
 *                     cached_blocks_total was appended, which gets every field but that one).
 * @retval KVC_ERR_NULL_ARG pool or out is NULL.
 * @retval KVC_ERR_VERSION  out->struct_size unknown.
 * @par Thread safety
 * Any thread (one consistent snapshot under the pool lock).
 */
KVC_API kvc_status kvc_pool_stats(kvc_pool *pool, kvc_stats *out);

/**
 * @brief Sets the pool's sliding-window attention (Mistral-style: every layer's query at position
 *        p sees only the keys p - window + 1 .. p).
 *
 * From now on kvc_append releases, of the sequence it extends, every block
 * whose tokens all lie before position f - window + 1, where f is the first position the
 * sequence's previous kvc_append added (for the first append after kvc_alloc: the prompt's first
 * uncached position; kvc_truncate to n lowers f to n if it was higher; a fork starts with its
 * parent's f). No query of the previous call's tokens or of later ones can see those
 * keys, so a step may append its tokens in one call or two (e.g. the pending token, then its
 * draft tokens) before its launch, and a decoding sequence holds about window / block_size + 2
 * blocks however long it grows. With chunked prefill through kvc_append, memory stays near the
 * window.
 *
 * Prefix hits become window-aware: a prompt's queries from its first uncached position c on see
 * no key before c - window + 1, so kvc_alloc (and kvc_can_alloc, kvc_prefix_lookup,
 * kvc_prefix_lookup_tiers) takes the largest block-aligned c <= num_tokens - 1 for which the full
 * blocks from the one holding position max(0, c - window + 1) through the one ending at c (at
 * least that last one) are all cached (in any tier), even if earlier blocks were evicted. Blocks
 * wholly before that are never taken: they start out released (-1), cached or not, as if the
 * first append had released them.
 *
 * A released block is let go as by kvc_free (a cached one stays in the prefix cache); its table
 * entry reads -1 in kvc_seq_block_table, in batch block tables and in kv_indices (your own kernels
 * must not read keys before a query's window). Checks that keep released blocks unread:
 * kvc_batch_build refuses a query whose own slot was released, kvc_launch_attention refuses a
 * params->sliding_window of 0 or wider than this window (or than a batch's released blocks
 * allow), kvc_truncate refuses to cut below what the next token attends to,
 * kvc_seq_slot_mapping refuses released positions (all KVC_ERR_INVALID_ARG / KVC_ERR_STATE,
 * before anything changes). The window applies to every layer of the pool (a block stores all
 * of them): models that mix windowed and full-attention layers (or SSM state) use a hybrid pool
 * (kvc_pool_create_hybrid), whose groups have their own windows; on a hybrid pool this function
 * is refused (KVC_ERR_UNSUPPORTED).
 * @param[in] pool   The pool.
 * @param[in] window Window in tokens; 0 turns it off (the default).
 * @retval KVC_ERR_NULL_ARG    pool is NULL.
 * @retval KVC_ERR_INVALID_ARG window < 0.
 * @retval KVC_ERR_STATE       the pool has sequences: it may be called only while it has none.
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_pool_set_sliding_window(kvc_pool *pool, int32_t window);

/**
 * @brief The pool's sliding window (kvc_pool_set_sliding_window).
 * @param[in]  pool       The pool.
 * @param[out] out_window Receives the window in tokens (0 = off).
 * @retval KVC_ERR_NULL_ARG pool or out_window is NULL.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_pool_get_sliding_window(kvc_pool *pool, int32_t *out_window);
/** @} */

/* ================================================================================================
 * Hybrid models: several KV-cache groups in one pool
 * ============================================================================================= */
/**
 * @defgroup kvc_hybrid_group Hybrid models
 * @brief One pool for a model whose layers mix full attention, sliding-window attention and
 *        SSM (Mamba / linear-attention) state: KV-cache groups sharing one block pool.
 *
 * Declare the model's layer groups once with kvc_pool_create_hybrid; kvc_alloc, kvc_admit,
 * kvc_can_alloc, kvc_append, kvc_append_batch, kvc_fork, kvc_free and kvc_abort then act on every
 * group of a sequence at once, all-or-nothing, exactly as on a plain pool:
 *  - **One block pool.** Every group takes its pages from the pool's one free list, LRU and
 *    watermark; a block id belongs to one group at a time. A page has the same byte size in every
 *    group (page_bytes = the largest group page, rounded up to 256 bytes; smaller pages are
 *    padded: kvc_pool_get_group_info reports each group's own bytes so the waste is visible, and
 *    block_size is the knob that balances them).
 *  - **One block table per group** (kvc_seq_group_block_table; kvc_seq_block_table and
 *    kvc_seq_slot_mapping read group 0). FULL groups hold every block, SLIDING groups release
 *    the blocks their window no longer sees (the kvc_pool_set_sliding_window rules, per group),
 *    SSM groups hold the page of the block holding the newest position and release the older
 *    ones (the rules of a window of one token).
 *  - **Coordinated prefix hit.** Each group caches its blocks under its own keys (the block hash
 *    with the group's index as an extra key; group 0's hashes equal a plain pool's, README "Block
 *    hash specification"). kvc_alloc admits the longest block-aligned prefix that every group
 *    can resume from: FULL groups need every block of it cached, SLIDING groups the blocks their
 *    window reads at its end, SSM groups the state snapshot page of its last block.
 *    kvc_can_alloc, kvc_admit and kvc_prefix_lookup count the same hit, and the watermark counts
 *    every group's pages.
 *  - **SSM state.** An SSM group's page of block i holds the state after the last token of block
 *    i that the sequence has confirmed; the caller's forward pass reads the state from the page
 *    of the block holding position n - 1 and writes it to the page of the block holding
 *    position n (the same page inside a block; a new one when n starts a block). kvc_alloc holds
 *    a page for every block of the prompt, so that the state at each block boundary of the
 *    prefill can be written there and cached (a later prompt sharing that prefix resumes from
 *    it); the next append releases the pages no longer needed (they stay cached). kvc_fork
 *    shares the pages and the next write copies the newest one (a copy-on-write pair, as for KV).
 *  - **Batches and kernels** serve one attention group at a time: kvc_batch_set_group chooses
 *    the group whose tables a batch records; kvc_launch_attention and kvc_cache_write map a layer
 *    to its group and refuse a layer of another group.
 *  - **Tiers:** the host tier spills and restores every group's pages; kvc_swap_out /
 *    kvc_swap_in move all of a sequence's groups together.
 *  - **Pins:** kvc_prefix_pin pins in every group what a hit at the end of the prefix needs there
 *    (FULL every block, windowed groups the blocks their window reads, as on a plain pool with a
 *    window), at the longest length every group can give; kvc_prefix_unpin undoes it.
 *  - **Not yet for hybrid pools** (KVC_ERR_UNSUPPORTED): kvc_truncate below the confirmed tokens
 *    of a sequence with an SSM group (state cannot be rewound), kvc_prefix_lookup_tiers, the disk
 *    tier (kvc_tier_attach_disk*, hence kvc_tier_prefetch), KV transfer agents,
 *    kvc_pool_set_sliding_window (windows are per group).
 * @{
 */

/** @brief Kind of a KV-cache group (kvc_group_config.kind). */
typedef enum kvc_group_kind {
    KVC_GROUP_FULL = 0,    /**< full attention: every position's K and V */
    KVC_GROUP_SLIDING = 1, /**< sliding-window attention of sliding_window tokens */
    KVC_GROUP_SSM = 2      /**< fixed-size per-sequence state (Mamba conv + SSM state) */
} kvc_group_kind;

/** @brief Most groups a hybrid pool may have. */
#define KVC_MAX_GROUPS 8

/** @brief One KV-cache group of a hybrid pool (kvc_pool_create_hybrid). */
typedef struct kvc_group_config {
    uint32_t struct_size;   /**< sizeof(kvc_group_config); set by kvc_group_config_default */
    int32_t kind;           /**< kvc_group_kind (default KVC_GROUP_FULL) */
    int32_t num_layers;     /**< layers of this group, >= 1 (default 1); layer_to_group names them */
    int32_t num_kv_heads;   /**< FULL / SLIDING: KV heads, >= 1 (default 1); SSM: ignored */
    int32_t head_dim;       /**< FULL / SLIDING: head dimension, >= 1 (default 128); SSM: ignored */
    int32_t sliding_window; /**< SLIDING: window in tokens, >= 1; must be 0 for the other kinds */
    int64_t state_bytes;    /**< SSM: bytes of one layer's state for one sequence, >= 1; 0 otherwise */
} kvc_group_config;

/**
 * @brief Fills *group with defaults (including struct_size): a FULL group of one layer, one KV
 *        head of dimension 128.
 * @param[out] group The group to fill.
 * @retval KVC_ERR_NULL_ARG group is NULL.
 * @par Thread safety
 * Any thread (touches only *group).
 */
KVC_API kvc_status kvc_group_config_default(kvc_group_config *group);

/**
 * @brief Creates a pool for a hybrid model: num_groups KV-cache groups sharing one block pool.
 *
 * cfg is read as by kvc_pool_create except its shape: num_layers, num_kv_heads and head_dim come
 * from the groups (kvc_pool_get_config then reports num_layers = the model's layers and the first
 * attention group's heads). num_q_heads, if set, must be a multiple of every attention group's
 * num_kv_heads (0 = the largest num_kv_heads). A pool sized from a memory budget divides it by
 * page_bytes. One group of kind FULL gives a pool that behaves like kvc_pool_create's.
 * @param[in]  cfg            The pool configuration (struct_size set).
 * @param[in]  groups         num_groups group configurations (struct_size set).
 * @param[in]  num_groups     Groups, in [1, KVC_MAX_GROUPS].
 * @param[in]  layer_to_group num_layers entries: the group of each model layer. Group g's layers
 *                            are numbered 0..groups[g].num_layers - 1 in model order (its storage
 *                            order in a page).
 * @param[in]  num_layers     The model's layers: the sum of the groups' num_layers.
 * @param[out] out            Receives the pool; release it with kvc_pool_destroy.
 * @retval KVC_ERR_NULL_ARG    cfg, groups, layer_to_group or out is NULL.
 * @retval KVC_ERR_VERSION     a struct_size unknown.
 * @retval KVC_ERR_INVALID_ARG num_groups out of range, an unknown kind, a group without layers, a
 *                             layer naming no group or the wrong number of layers for its group,
 *                             num_layers not the sum, a window on a non-SLIDING group or none on a
 *                             SLIDING one, state_bytes 0 on an SSM group, bad heads or head_dim;
 *                             and what kvc_pool_create refuses.
 * @retval KVC_ERR_OVERFLOW    a page or the storage size overflows.
 * @retval KVC_ERR_NO_MEMORY   the storage or the bookkeeping could not be allocated.
 * @retval KVC_ERR_DEVICE      CUDA requested but unavailable.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_pool_create_hybrid(const kvc_pool_config *cfg, const kvc_group_config *groups,
                                          int32_t num_groups, const int32_t *layer_to_group,
                                          int32_t num_layers, kvc_pool **out);

/** @brief One group of a pool as created (kvc_pool_get_group_info). */
typedef struct kvc_group_info {
    uint32_t struct_size;    /**< set by the caller to sizeof(kvc_group_info) */
    int32_t num_groups;      /**< groups of the pool (1 for a pool from kvc_pool_create) */
    int32_t kind;            /**< kvc_group_kind */
    int32_t num_layers;      /**< layers of the group */
    int32_t num_kv_heads;    /**< FULL / SLIDING; 0 for SSM */
    int32_t head_dim;        /**< FULL / SLIDING; 0 for SSM */
    int32_t sliding_window;  /**< SLIDING: the window; 0 otherwise */
    int32_t reserved;        /**< 0 */
    int64_t state_bytes;     /**< SSM: one layer's state; 0 otherwise */
    int64_t group_bytes;     /**< bytes of a page this group uses (the rest is padding) */
    int64_t page_bytes;      /**< bytes of every page of the pool (= the storage's block_stride) */
    int64_t layer_stride;    /**< bytes between two layers of this group inside a page */
} kvc_group_info;

/**
 * @brief Describes group `group` of a pool. A plain pool has one group (FULL, or SLIDING after
 *        kvc_pool_set_sliding_window).
 *
 * Inside a page, group g's layer l starts at l x layer_stride; an attention layer is laid out as
 * in kvc_storage_info ([K|V][kv_head][token][dim]), an SSM layer's state is state_bytes bytes.
 * @param[in]     pool  The pool.
 * @param[in]     group The group, in [0, num_groups).
 * @param[in,out] out   Receives the description; out->struct_size set by the caller.
 * @retval KVC_ERR_NULL_ARG    pool or out is NULL.
 * @retval KVC_ERR_VERSION     out->struct_size unknown.
 * @retval KVC_ERR_INVALID_ARG group out of range.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_pool_get_group_info(kvc_pool *pool, int32_t group, kvc_group_info *out);

/**
 * @brief The group of a model layer and the layer's index inside that group.
 * @param[in]  pool               The pool.
 * @param[in]  layer              The model layer, in [0, num_layers).
 * @param[out] out_group          Receives the group.
 * @param[out] out_layer_in_group Receives the layer's index among its group's layers (optional).
 * @retval KVC_ERR_NULL_ARG    pool or out_group is NULL.
 * @retval KVC_ERR_INVALID_ARG layer out of range.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_pool_layer_group(kvc_pool *pool, int32_t layer, int32_t *out_group,
                                        int32_t *out_layer_in_group);

/**
 * @brief Copies group `group`'s block table of seq_id into out[0..cap) (kvc_seq_block_table for
 *        one group; group 0 reads the same table).
 *
 * Released entries (a SLIDING group's window, an SSM group's older pages) read -1.
 * @param[in]  pool    The pool.
 * @param[in]  seq_id  The sequence.
 * @param[in]  group   The group, in [0, num_groups).
 * @param[out] out     Receives the block ids.
 * @param[in]  cap     Entries out can hold, >= 0 (out NULL and cap 0: size query).
 * @param[out] out_len Receives the table length.
 * @retval KVC_ERR_NULL_ARG         pool, out_len, or out with cap > 0.
 * @retval KVC_ERR_INVALID_ARG      cap < 0, group out of range.
 * @retval KVC_ERR_UNKNOWN_SEQ      no such sequence.
 * @retval KVC_ERR_BUFFER_TOO_SMALL cap below the table length (*out_len = required).
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_seq_group_block_table(kvc_pool *pool, uint64_t seq_id, int32_t group, int32_t *out,
                                             int64_t cap, int64_t *out_len);
/** @} */

/* ================================================================================================
 * Cache keys
 * ============================================================================================= */
/**
 * @defgroup kvc_keys_group Cache keys
 * @brief kvc_keys: what besides token ids identifies a block's KV content, and the retention
 *        policy of a request's blocks.
 *
 * A key set is passed to the prompt calls (kvc_can_alloc, kvc_admit, kvc_alloc, the prefix calls,
 * kvc_tier_prefetch, kvc_hash_blocks, kvc_xfer_*); NULL means no LoRA, no salt, no multimodal
 * items, default priority, no hit cap. A kvc_keys object is owned by one caller at a time (no
 * internal locking); const uses by several threads at once are fine.
 * @{
 */
#define KVC_PRIORITY_MIN 0      /**< lowest retention priority (kvc_keys_set_priority) */
#define KVC_PRIORITY_MAX 100    /**< highest retention priority */
#define KVC_PRIORITY_DEFAULT 50 /**< retention priority of keys that set none (and of NULL keys) */
#define KVC_MAX_SALT_LEN 256    /**< longest cache salt, bytes (kvc_keys_set_salt) */

/** @brief Opaque handle of a key set (kvc_keys_create / kvc_keys_destroy). */
typedef struct kvc_keys kvc_keys;

/**
 * @brief Creates an empty key set (no LoRA, no salt, no multimodal items, priority default, no hit
 *        cap).
 * @param[out] out Receives the key set; release it with kvc_keys_destroy.
 * @retval KVC_ERR_NULL_ARG  out is NULL.
 * @retval KVC_ERR_NO_MEMORY out of host memory.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_keys_create(kvc_keys **out);

/**
 * @brief Destroys a key set.
 * @param[in] keys The key set; NULL is a no-op.
 * @return Always KVC_OK.
 * @par Thread safety
 * No other call may use the key set meanwhile or afterwards.
 */
KVC_API kvc_status kvc_keys_destroy(kvc_keys *keys);

/**
 * @brief Resets to empty so the object can be reused for another request.
 * @param[in,out] keys The key set.
 * @retval KVC_ERR_NULL_ARG keys is NULL.
 * @par Thread safety
 * The key set's owner only (no concurrent use of it).
 */
KVC_API kvc_status kvc_keys_clear(kvc_keys *keys);

/**
 * @brief Sets the LoRA adapter id.
 * @param[in,out] keys    The key set.
 * @param[in]     lora_id The adapter id; 0 means no adapter.
 * @retval KVC_ERR_NULL_ARG keys is NULL.
 * @par Thread safety
 * The key set's owner only (no concurrent use of it).
 */
KVC_API kvc_status kvc_keys_set_lora(kvc_keys *keys, uint64_t lora_id);

/**
 * @brief Sets the cache salt (tenant isolation).
 *
 * The salt is mixed into the first block only, so prompts with different salts share no block.
 * @param[in,out] keys The key set.
 * @param[in]     salt A NUL-terminated string of at most KVC_MAX_SALT_LEN bytes. NULL or "" = none.
 * @retval KVC_ERR_NULL_ARG    keys is NULL.
 * @retval KVC_ERR_INVALID_ARG salt too long.
 * @par Thread safety
 * The key set's owner only (no concurrent use of it).
 */
KVC_API kvc_status kvc_keys_set_salt(kvc_keys *keys, const char *salt);

/**
 * @brief Adds a multimodal item: a 128-bit content hash (hi, lo) covering the prompt tokens
 *        [offset, offset + length).
 *
 * Every full block whose token range overlaps it carries its hash *and its position*: the item's
 * offset relative to the block's first token and its length are part of the block's key (README,
 * "Block hash specification"), so the same image at another position in the prompt gives other
 * block hashes. Items must be added in increasing, non-overlapping offset order.
 * @param[in,out] keys    The key set.
 * @param[in]     hash_hi High 64 bits of the item's content hash.
 * @param[in]     hash_lo Low 64 bits of the item's content hash.
 * @param[in]     offset  First prompt token the item covers, >= 0.
 * @param[in]     length  Tokens the item covers, >= 1.
 * @retval KVC_ERR_NULL_ARG    keys is NULL.
 * @retval KVC_ERR_INVALID_ARG offset < 0, length <= 0, overlap/out of order.
 * @retval KVC_ERR_OVERFLOW    offset + length overflows.
 * @retval KVC_ERR_NO_MEMORY   out of host memory.
 * @par Thread safety
 * The key set's owner only (no concurrent use of it).
 */
KVC_API kvc_status kvc_keys_add_mm(kvc_keys *keys, uint64_t hash_hi, uint64_t hash_lo,
                                   int64_t offset, int64_t length);

/**
 * @brief Sets the retention priority of the blocks of requests using these keys.
 *
 * Refcount-0 cached blocks of lower priority are evicted first (LRU within one priority).
 * @param[in,out] keys     The key set.
 * @param[in]     priority In [KVC_PRIORITY_MIN, KVC_PRIORITY_MAX].
 * @retval KVC_ERR_NULL_ARG    keys is NULL.
 * @retval KVC_ERR_INVALID_ARG priority out of range.
 * @par Thread safety
 * The key set's owner only (no concurrent use of it).
 */
KVC_API kvc_status kvc_keys_set_priority(kvc_keys *keys, int32_t priority);

/**
 * @brief Caps the prefix hit of requests using these keys at max_tokens tokens (rounded down to a
 *        block boundary).
 *
 * kvc_can_alloc, kvc_alloc, kvc_prefix_lookup and kvc_prefix_lookup_tiers then take
 * the longest hit of at most that many tokens (with a sliding window, the largest valid one
 * below the cap), and the rest of the prompt is computed. For a model served from several pools
 * (one per attention type, README "Hybrid models"), whose prefill must start at one position in
 * all of them: look up each pool under the cap, lower the cap to the result, repeat until it
 * stops changing, then allocate in every pool under that cap. Also for a caller that wants a
 * suffix recomputed. Does not affect kvc_prefix_pin / kvc_prefix_unpin (pass fewer tokens there).
 * @param[in,out] keys       The key set.
 * @param[in]     max_tokens The cap in tokens; -1 removes the cap (the default; kvc_keys_clear
 *                           resets it).
 * @retval KVC_ERR_NULL_ARG    keys is NULL.
 * @retval KVC_ERR_INVALID_ARG max_tokens < -1.
 * @par Thread safety
 * The key set's owner only (no concurrent use of it).
 */
KVC_API kvc_status kvc_keys_set_max_cached_tokens(kvc_keys *keys, int64_t max_tokens);
/** @} */

/* ================================================================================================
 * Sequences
 * ============================================================================================= */
/**
 * @defgroup kvc_seq_group Sequences
 * @brief Admitting, growing, forking, rewinding and releasing sequences, and reading their tables.
 *
 * A sequence is identified by a caller-chosen 64-bit id and owns a block table. Its tokens are laid
 * out as: cached (prefix hit) | computed | new | lookahead (reserved, not yet confirmed).
 * `tokens` arguments are token ids; they may be NULL only while prefix caching is off.
 * `keys` may be NULL (no LoRA, no salt, no multimodal items, default priority).
 * Every call here takes the pool and may be made from many threads at once (the pool lock orders
 * them); preemption (kvc_swap_out, kvc_swap_in, kvc_preempt_recompute) is under Memory tiers, and
 * the copy-on-write pairs these calls queue under KV storage and copies (kvc_take_pending_copies,
 * kvc_copy_pending).
 * @{
 */

/** @brief Result of kvc_can_alloc and kvc_admit (vLLM v0 watermark rule). */
typedef enum kvc_alloc_verdict {
    KVC_ALLOC_OK = 0,    /**< fits now and leaves the watermark free */
    KVC_ALLOC_LATER = 1, /**< fits once other sequences free blocks */
    KVC_ALLOC_NEVER = 2  /**< can never fit in this pool */
} kvc_alloc_verdict;

/**
 * @brief Would kvc_alloc of this prompt succeed?
 *
 * Cache hits are taken into account, in every tier (a host or disk hit is restored into a block
 * that counts as taken); refcount-0 hits are not counted as free. (A disk block that then fails
 * its verification makes the verdict optimistic.) With W = watermark x num_blocks and `needed`
 * the blocks to take: NEVER if num_blocks - needed < W or the sequence would hold more blocks
 * than the pool has (its table minus a windowed hit's released entries); OK if
 * free - needed >= W; else LATER. Read-only.
 * @param[in]  pool        The pool.
 * @param[in]  tokens      The prompt's token ids (NULL only while prefix caching is off).
 * @param[in]  num_tokens  Prompt length, >= 1.
 * @param[in]  keys        Cache keys, or NULL.
 * @param[out] out_verdict Receives a kvc_alloc_verdict.
 * @retval KVC_ERR_NULL_ARG    pool or out_verdict is NULL; tokens while caching is on.
 * @retval KVC_ERR_INVALID_ARG num_tokens < 1.
 * @retval KVC_ERR_MAX_LEN     num_tokens exceeds max_seq_len.
 * @retval KVC_ERR_OVERFLOW    a count overflows.
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_can_alloc(kvc_pool *pool, const int32_t *tokens, int64_t num_tokens,
                                 const kvc_keys *keys, int32_t *out_verdict);

/**
 * @brief kvc_can_alloc and, when its verdict is KVC_ALLOC_OK, kvc_alloc, in one call: how a
 *        scheduler admits a waiting request.
 *
 * The prompt is walked and hashed once (kvc_can_alloc then kvc_alloc walk it twice). Only with
 * KVC_ALLOC_OK was seq_id created (exactly as kvc_alloc creates it). LATER and NEVER return
 * KVC_OK and change nothing. With a disk tier the verdict is taken first and an admitted prompt
 * then goes through kvc_alloc (its disk hits are promoted only for a prompt that is admitted), so
 * the prompt is walked twice there; if kvc_alloc then refuses it for want of blocks (another
 * thread took them in between, or a disk block failed its verification), the verdict becomes
 * LATER with what kvc_alloc's refusal leaves: no sequence, disk blocks it read up possibly left
 * cached in the host tier.
 * @param[in]  pool              The pool.
 * @param[in]  seq_id            The new sequence's id.
 * @param[in]  tokens            The prompt's token ids (NULL only while prefix caching is off).
 * @param[in]  num_tokens        Prompt length, >= 1.
 * @param[in]  keys              Cache keys, or NULL.
 * @param[out] out_verdict       Receives the kvc_alloc_verdict.
 * @param[out] out_cached_tokens May be NULL; receives what kvc_alloc sets when admitted, else 0.
 * @retval KVC_ERR_NULL_ARG   as kvc_alloc, and out_verdict is NULL.
 * @retval KVC_ERR_SEQ_EXISTS seq_id exists: reported whatever the verdict would be.
 * @retval others             those of kvc_alloc except KVC_ERR_OUT_OF_BLOCKS (a verdict instead).
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_admit(kvc_pool *pool, uint64_t seq_id, const int32_t *tokens, int64_t num_tokens,
                             const kvc_keys *keys, int32_t *out_verdict, int64_t *out_cached_tokens);

/**
 * @brief Creates sequence seq_id holding num_tokens prompt tokens.
 *
 * With prefix caching, the longest cached prefix (full blocks, verified token by token, at most
 * num_tokens - 1 tokens) is shared (refcount + 1; of several copies of a block, the one "Prefix
 * cache" names); the rest is allocated, and its full blocks enter the prefix cache at once (as
 * kvc_append's do). With a sliding window (kvc_pool_set_sliding_window) only the hit's blocks
 * inside the window of the first uncached token need to be cached, and the ones before it start
 * out released (-1 in the table, not taken, not counted against capacity). Capacity is checked
 * before anything changes.
 *
 * With memory tiers (kvc_tier_attach_host) the cached prefix continues into the host and disk
 * tiers: those blocks are copied into fresh device blocks (they count as cached tokens and as
 * blocks to take in the capacity check), disk blocks only after their checksum and identity are
 * verified — a bad disk block ends the cached prefix there. The copies are done when this call
 * returns on the CPU backend; on CUDA they are queued on the tier stream, and kvc_cache_write /
 * kvc_launch_attention order after them. Disk blocks are read up into the host tier first, after
 * the sequence-exists and capacity checks; if the prompt then no longer fits (a disk block failed
 * its verification, or no host slot was left, or another thread's call came in between) the call
 * fails with the blocks it read up left cached in the host tier (or, after rounds, the device
 * cache), and nothing else changed.
 *
 * Disk blocks come up through host slots. When the prompt's disk run is longer than the host
 * slots this call can take (free or cached ones; not those held by swapped-out sequences), it
 * goes in rounds: the blocks read up so far go on into fresh device blocks (cached, pinned until
 * this call returns, so they count in kvc_stats.pinned_blocks meanwhile), which frees their host
 * slots for the next disk blocks. So the cached prefix is what kvc_prefix_lookup and
 * kvc_can_alloc counted (absent other calls in between) unless no host slot at all can be taken
 * (every one held by swapped-out sequences or busy with another thread's copies): then it ends at
 * the first disk block that found none, and the rest is allocated fresh. Each round waits for its
 * reads; a kvc_tier_prefetch of the prompt beforehand moves them off the scheduler's thread.
 * @param[in]  pool              The pool.
 * @param[in]  seq_id            The new sequence's id.
 * @param[in]  tokens            The prompt's token ids (NULL only while prefix caching is off).
 * @param[in]  num_tokens        Prompt length, >= 1.
 * @param[in]  keys              Cache keys, or NULL.
 * @param[out] out_cached_tokens May be NULL; receives the number of tokens whose KV the prefill
 *                               need not compute.
 * @retval KVC_ERR_NULL_ARG      pool is NULL; tokens while caching is on.
 * @retval KVC_ERR_INVALID_ARG   num_tokens < 1.
 * @retval KVC_ERR_SEQ_EXISTS    seq_id exists.
 * @retval KVC_ERR_MAX_LEN       num_tokens exceeds max_seq_len.
 * @retval KVC_ERR_OVERFLOW      a count overflows.
 * @retval KVC_ERR_OUT_OF_BLOCKS not enough free blocks (nothing changed but blocks read up from
 *                               disk, see above).
 * @retval KVC_ERR_NO_MEMORY     out of host memory.
 * @par Thread safety
 * Any thread (under the pool lock; tier copies run outside it).
 */
KVC_API kvc_status kvc_alloc(kvc_pool *pool, uint64_t seq_id, const int32_t *tokens,
                             int64_t num_tokens, const kvc_keys *keys, int64_t *out_cached_tokens);

/**
 * @brief Decode/extend step: appends num_tokens confirmed tokens and reserves num_lookahead
 *        further slots for speculative tokens.
 *
 * Reserved slots are not cached and not counted in the length; a later append confirms them by
 * writing into them. A block that becomes full of confirmed tokens is entered in the prefix cache
 * right away (as another copy when equal content is cached already: see "Prefix cache"), before
 * its KV exists: write it (kvc_cache_write) in the step's forward pass before any other
 * sequence's attention reads the block (a prompt that hits it and runs in the same batch is fine:
 * every layer writes before it attends). Writing into a block shared with another sequence
 * (refcount > 1) first copies it: a fresh block replaces it in this sequence only and the
 * (src, dst) pair is queued (see kvc_take_pending_copies). With a sliding window set
 * (kvc_pool_set_sliding_window) the blocks no query can see any more are released first, and
 * count as free for this call.
 * @param[in]  pool           The pool.
 * @param[in]  seq_id         The sequence.
 * @param[in]  tokens         The new tokens' ids (NULL only while prefix caching is off).
 * @param[in]  num_tokens     Confirmed tokens to append, >= 0.
 * @param[in]  num_lookahead  Slots to reserve beyond them, >= 0 (not both 0).
 * @param[out] out_new_blocks May be NULL; receives the number of blocks taken (including
 *                            copy-on-write blocks).
 * @retval KVC_ERR_NULL_ARG      pool is NULL; tokens while caching is on and num_tokens > 0.
 * @retval KVC_ERR_INVALID_ARG   num_tokens < 0, num_lookahead < 0, both 0.
 * @retval KVC_ERR_UNKNOWN_SEQ   no such sequence.
 * @retval KVC_ERR_STATE         sequence swapped out.
 * @retval KVC_ERR_MAX_LEN       the sequence would exceed max_seq_len.
 * @retval KVC_ERR_OVERFLOW      a count overflows.
 * @retval KVC_ERR_OUT_OF_BLOCKS not enough free blocks.
 * @retval KVC_ERR_NO_MEMORY     out of host memory.
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_append(kvc_pool *pool, uint64_t seq_id, const int32_t *tokens,
                              int64_t num_tokens, int64_t num_lookahead, int32_t *out_new_blocks);

/**
 * @brief A decode step for many sequences in one call (one lock, one tier run).
 *
 * Entry i appends the tokens tokens[token_offsets[i] .. token_offsets[i+1]) to seq_ids[i] and
 * reserves lookahead_per_seq[i] further slots (lookahead_per_seq NULL: num_lookahead for every
 * entry) — exactly what kvc_append(pool, seq_ids[i], tokens + token_offsets[i], count, lookahead,
 * out_new_blocks + i) would do, entry after entry (an id may appear more than once).
 *
 * Atomicity, per entry: every entry's arguments are checked first (a bad one: its status, nothing
 * changed); then the entries are applied in order and the call stops at the first one kvc_append
 * would refuse — the entries before it are appended, it and those after it are untouched (their
 * out_new_blocks too). The status and message are the refused entry's, the message naming the
 * entry. A scheduler that lists its running sequences by priority preempts from the end on
 * KVC_ERR_OUT_OF_BLOCKS and calls again from seq_ids + *out_done.
 * @param[in]  pool              The pool.
 * @param[in]  num_seqs          Number of entries, >= 0.
 * @param[in]  seq_ids           num_seqs sequence ids.
 * @param[in]  token_offsets     num_seqs + 1 offsets into tokens, starting at 0 and never
 *                               decreasing (CSR); NULL means one token per entry, tokens[i].
 * @param[in]  tokens            The token ids of all entries.
 * @param[in]  num_lookahead     Slots each entry reserves when lookahead_per_seq is NULL.
 * @param[in]  lookahead_per_seq num_seqs per-entry lookahead counts, or NULL.
 * @param[out] out_new_blocks    num_seqs entries, may be NULL: each entry's new blocks.
 * @param[out] out_done          May be NULL; receives the number of entries appended (num_seqs
 *                               on KVC_OK).
 * @retval KVC_ERR_NULL_ARG    pool; seq_ids with num_seqs > 0; tokens while caching is on and an
 *                             entry appends tokens.
 * @retval KVC_ERR_INVALID_ARG num_seqs < 0; token_offsets[0] != 0 or decreasing; an entry's
 *                             lookahead < 0; an entry appending nothing.
 * @retval others              per entry, those of kvc_append.
 * @par Thread safety
 * Any thread (one pool lock for the whole call).
 */
KVC_API kvc_status kvc_append_batch(kvc_pool *pool, int32_t num_seqs, const uint64_t *seq_ids,
                                    const int64_t *token_offsets, const int32_t *tokens, int64_t num_lookahead,
                                    const int64_t *lookahead_per_seq, int32_t *out_new_blocks, int32_t *out_done);

/**
 * @brief Creates child_id sharing every block of parent_id (refcount + 1 each; no data copied).
 *
 * The child starts with the parent's tokens, keys and priority.
 * @param[in] pool      The pool.
 * @param[in] parent_id The sequence to fork.
 * @param[in] child_id  The new sequence's id.
 * @retval KVC_ERR_NULL_ARG    pool is NULL.
 * @retval KVC_ERR_UNKNOWN_SEQ no parent.
 * @retval KVC_ERR_SEQ_EXISTS  child exists.
 * @retval KVC_ERR_INVALID_ARG parent == child.
 * @retval KVC_ERR_STATE       parent swapped out.
 * @retval KVC_ERR_NO_MEMORY   out of host memory.
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_fork(kvc_pool *pool, uint64_t parent_id, uint64_t child_id);

/**
 * @brief Rewinds seq_id to its first num_tokens confirmed tokens and drops its reserved lookahead
 *        slots.
 *
 * The rollback of speculative decoding (append the draft tokens, verify them in one pass with
 * kvc_batch_build / kvc_launch_attention, keep the accepted ones) and of any other undo (a
 * beam dropping tokens, "regenerate"). num_tokens equal to kvc_seq_num_tokens only drops
 * the lookahead. Blocks past the new end are released as kvc_free releases them (deepest first;
 * pending copy-on-write pairs into a block that becomes free are cancelled); the kept tokens' KV
 * is untouched. Blocks already entered in the prefix cache stay cached — their KV is taken to
 * belong to their tokens, so a later prompt with the same tokens (a rejected draft included)
 * still hits them. So truncate after the forward pass that wrote the cut tokens' KV (as
 * speculative decoding does): undoing an append before then would leave cached blocks whose KV
 * was never written. For tokens that may not stay, reserve lookahead slots (kvc_append's
 * num_lookahead) instead: those are not cached until an append confirms them.
 *
 * A cached block is never written: if the new last block is partial and cached, this
 * sequence's next kvc_append into it first copies it (copy-on-write: shared with another
 * sequence, or pinned by kvc_prefix_pin) or else takes it out of the cache. Prefix hashing of
 * later blocks continues where it stopped, except in the rare case where the cut block's token
 * ids cannot be recovered (a cut into a block that is not cached and not the last hashed one,
 * or whose record was lost, e.g. by a swap): then this sequence's later blocks are not entered
 * in the cache (their KV stays correct; they just cannot be hit).
 * Bumps the pool's sequence generation (built batches re-validate).
 * @param[in]  pool             The pool.
 * @param[in]  seq_id           The sequence.
 * @param[in]  num_tokens       Tokens to keep: 1 <= num_tokens <= kvc_seq_num_tokens.
 * @param[out] out_freed_blocks May be NULL; receives the number of blocks that left the
 *                              sequence's table.
 * @retval KVC_ERR_NULL_ARG    pool is NULL.
 * @retval KVC_ERR_INVALID_ARG num_tokens < 1 or > the confirmed count.
 * @retval KVC_ERR_UNKNOWN_SEQ no such sequence.
 * @retval KVC_ERR_STATE       sequence swapped out; with a sliding window, the token at
 *                             num_tokens would attend to positions whose blocks were already
 *                             released.
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_truncate(kvc_pool *pool, uint64_t seq_id, int64_t num_tokens,
                                int32_t *out_freed_blocks);

/**
 * @brief Frees sequence seq_id.
 *
 * Its blocks are released in reverse order (refcount - 1; at 0, cached blocks go to the LRU tail
 * of their priority, uncached ones are reused first).
 * @param[in] pool   The pool.
 * @param[in] seq_id The sequence.
 * @retval KVC_ERR_NULL_ARG    pool is NULL.
 * @retval KVC_ERR_UNKNOWN_SEQ no such sequence (including a second free).
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_free(kvc_pool *pool, uint64_t seq_id);

/**
 * @brief Frees a sequence whose KV may never have been computed.
 *
 * kvc_alloc and kvc_append enter a filled block in the prefix cache before the forward pass
 * writes it, so kvc_free of a request cancelled before its prefill ran, or the rollback of an
 * allocation made in one pool of several (hybrid models, README) would leave those blocks cached
 * without their KV. kvc_abort first takes out of the cache every block the sequence filled itself
 * — after its prompt's cache hit — that no one else holds or pinned (a fork's or another prompt's
 * hit keeps it cached: that holder's forward pass writes it), then frees as kvc_free. Blocks it
 * filled whose KV was written are lost to the cache too, so use kvc_free for sequences that ran.
 * @param[in] pool   The pool.
 * @param[in] seq_id The sequence.
 * @retval KVC_ERR_NULL_ARG    pool is NULL.
 * @retval KVC_ERR_UNKNOWN_SEQ no such sequence.
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_abort(kvc_pool *pool, uint64_t seq_id);

/**
 * @brief Copies the block table of seq_id into out[0..cap).
 *
 * Size query: out == NULL and cap == 0 returns KVC_OK with only *out_len set. Blocks released by
 * the sliding window, and blocks of a swapped-out sequence that are not on the device, read -1.
 * @param[in]  pool    The pool.
 * @param[in]  seq_id  The sequence.
 * @param[out] out     Receives the block ids.
 * @param[in]  cap     Entries out can hold, >= 0.
 * @param[out] out_len Receives the table length.
 * @retval KVC_ERR_NULL_ARG         pool, out_len, or out with cap > 0.
 * @retval KVC_ERR_INVALID_ARG      cap < 0.
 * @retval KVC_ERR_UNKNOWN_SEQ      no such sequence.
 * @retval KVC_ERR_BUFFER_TOO_SMALL cap below the table length (*out_len = required).
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_seq_block_table(kvc_pool *pool, uint64_t seq_id, int32_t *out, int64_t cap,
                                       int64_t *out_len);

/**
 * @brief Confirmed token count of seq_id (excludes lookahead).
 * @param[in]  pool       The pool.
 * @param[in]  seq_id     The sequence.
 * @param[out] out_tokens Receives the count.
 * @retval KVC_ERR_NULL_ARG    pool or out_tokens is NULL.
 * @retval KVC_ERR_UNKNOWN_SEQ no such sequence.
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_seq_num_tokens(kvc_pool *pool, uint64_t seq_id, int64_t *out_tokens);

/**
 * @brief Slot of each position in [first_pos, first_pos + count) of seq_id.
 *
 * slot = block_id x block_size + (pos mod block_size) — what the cache-write kernel consumes.
 * Positions may reach into reserved lookahead slots. The slots of the newest n tokens are
 * first_pos = num_tokens - n.
 * @param[in]  pool      The pool.
 * @param[in]  seq_id    The sequence.
 * @param[in]  first_pos First position, >= 0.
 * @param[in]  count     Positions, >= 0.
 * @param[out] out       Receives count slots.
 * @param[in]  cap       Entries out can hold, >= 0.
 * @retval KVC_ERR_NULL_ARG         pool, or out with cap > 0.
 * @retval KVC_ERR_INVALID_ARG      first_pos < 0, count < 0, cap < 0, range beyond reserved slots
 *                                  or into blocks released by the sliding window.
 * @retval KVC_ERR_UNKNOWN_SEQ      no such sequence.
 * @retval KVC_ERR_STATE            sequence swapped out.
 * @retval KVC_ERR_BUFFER_TOO_SMALL cap < count.
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_seq_slot_mapping(kvc_pool *pool, uint64_t seq_id, int64_t first_pos,
                                        int64_t count, int64_t *out, int64_t cap);
/** @} */

/* ================================================================================================
 * Prefix cache
 * ============================================================================================= */
/**
 * @defgroup kvc_prefix_group Prefix cache
 * @brief Looking up, pinning and resetting cached prompt blocks, and computing block hashes.
 *
 * Every full block of confirmed tokens is cached when it fills (kvc_alloc's prompt blocks,
 * kvc_append's), under its chained block hash (kvc_hash_blocks), even when a block of equal
 * content is cached already: it then becomes another copy of that hash (a cached prompt run again
 * computes its last block afresh, two sequences decode the same text), so one hash may name several
 * device blocks, as in vLLM v1. A hash stays cached while any of its copies is: evicting one copy
 * keeps the others, and the blocks cached after it stay reachable. A hit (kvc_alloc, kvc_can_alloc,
 * kvc_prefix_lookup) takes, of the 8 most recently cached copies, the most recent one in use (held
 * by a sequence, pinned, or read by a pending copy), else the most recently cached one: blocks are
 * shared where they can be, the free copies stay evictable, and the choice costs O(1).
 * kvc_prefix_pin and kvc_prefix_unpin take the most recently cached pinned copy before those, so
 * repeated pins of a prefix keep to one copy. (A block whose hash equals a cached block's but whose
 * content differs, a hash collision, is not cached.) Copies reach the memory tiers one per hash: of
 * two copies evicted together only one is spilled, and none while another copy stays on the
 * device.
 *
 * The prompt calls here need a non-NULL tokens array even while prefix caching is off.
 * @{
 */

/**
 * @brief How many leading tokens of this prompt are cached right now.
 *
 * Full blocks, verified, at most num_tokens - 1 rounded down to a block boundary: what kvc_alloc
 * would report (but see kvc_alloc for disk hits when no host slot can be taken). With a sliding
 * window, the window-aware count (see kvc_pool_set_sliding_window: blocks before the window of the
 * first uncached token need not be cached). No side effects: no refcount, LRU position or
 * statistic changes. 0 when prefix caching is off. With memory tiers, blocks found in the host
 * and disk tiers count too (kvc_alloc restores them; see kvc_prefix_lookup_tiers for the split).
 * @param[in]  pool              The pool.
 * @param[in]  tokens            The prompt's token ids.
 * @param[in]  num_tokens        Prompt length, >= 1.
 * @param[in]  keys              Cache keys, or NULL.
 * @param[out] out_cached_tokens Receives the cached token count.
 * @retval KVC_ERR_NULL_ARG    pool, tokens or out_cached_tokens is NULL.
 * @retval KVC_ERR_INVALID_ARG num_tokens < 1.
 * @retval KVC_ERR_OVERFLOW    a count overflows.
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_prefix_lookup(kvc_pool *pool, const int32_t *tokens, int64_t num_tokens,
                                     const kvc_keys *keys, int64_t *out_cached_tokens);

/**
 * @brief Like kvc_prefix_lookup, split by tier: the leading cached tokens found on the device, in
 *        the host tier and in the disk tier.
 *
 * Each block is counted in the highest tier holding it; the walk stops at the first block found
 * in none. With a sliding window, the hit's blocks before the window (kvc_alloc does not take
 * them) are counted in no tier, so the three can sum to less than kvc_prefix_lookup's count. Disk
 * hits are reported from the index; their bytes are verified only when kvc_alloc reads them (a
 * bad block then becomes a miss). Read-only. All three are 0 while prefix caching is off.
 * @param[in]  pool              The pool.
 * @param[in]  tokens            The prompt's token ids.
 * @param[in]  num_tokens        Prompt length, >= 1.
 * @param[in]  keys              Cache keys, or NULL.
 * @param[out] out_device_tokens May be NULL; tokens found on the device.
 * @param[out] out_host_tokens   May be NULL; tokens found in the host tier.
 * @param[out] out_disk_tokens   May be NULL; tokens found in the disk tier.
 * @retval KVC_ERR_NULL_ARG    pool or tokens is NULL.
 * @retval KVC_ERR_INVALID_ARG num_tokens < 1.
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_prefix_lookup_tiers(kvc_pool *pool, const int32_t *tokens, int64_t num_tokens,
                                           const kvc_keys *keys, int64_t *out_device_tokens,
                                           int64_t *out_host_tokens, int64_t *out_disk_tokens);

/**
 * @brief Pins the cached full blocks of this prefix: a pinned block is never evicted until
 *        unpinned, so every prompt that starts with the prefix (a system prompt) keeps its hit.
 *
 * Without a sliding window: all of the prefix's full blocks that are cached now, from the start,
 * stopping at the first miss. With one (kvc_pool_set_sliding_window): only the blocks a hit at the
 * end of the prefix needs -- for the longest run of the prefix's full blocks whose window is
 * cached, the blocks from that window's start to the run's end, plus the block before them when
 * the prefix's own admission (one block shorter when the prefix is block-aligned) reads it and it
 * is cached; the leading blocks no such hit reads stay evictable. Pins nest (a count per block).
 * @param[in]  pool              The pool.
 * @param[in]  tokens            The prefix's token ids.
 * @param[in]  num_tokens        Prefix length, >= 1.
 * @param[in]  keys              Cache keys, or NULL.
 * @param[out] out_pinned_tokens May be NULL; receives the length of the prefix whose hit is
 *                               protected: the covered full blocks x block_size (0: nothing was
 *                               cached, nothing pinned).
 * @retval KVC_ERR_NULL_ARG    pool or tokens is NULL.
 * @retval KVC_ERR_INVALID_ARG num_tokens < 1.
 * @retval KVC_ERR_UNSUPPORTED prefix caching is off.
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_prefix_pin(kvc_pool *pool, const int32_t *tokens, int64_t num_tokens,
                                  const kvc_keys *keys, int64_t *out_pinned_tokens);

/**
 * @brief Undoes one kvc_prefix_pin of the same prefix.
 *
 * Finds the blocks the pin would choose among the prefix's blocks that are cached and pinned, and
 * unpins them (deepest first). When pins of overlapping prefixes are held, pass the pin's
 * *out_pinned_tokens as num_tokens (with the same tokens), so that the blocks a longer pinned
 * prefix holds cannot join the search.
 * @param[in]  pool                The pool.
 * @param[in]  tokens              The prefix's token ids.
 * @param[in]  num_tokens          Prefix length, >= 1.
 * @param[in]  keys                Cache keys, or NULL.
 * @param[out] out_unpinned_tokens May be NULL; receives the length covered, as for
 *                                 kvc_prefix_pin.
 * @retval KVC_ERR_NULL_ARG    pool or tokens is NULL.
 * @retval KVC_ERR_INVALID_ARG num_tokens < 1.
 * @retval KVC_ERR_UNSUPPORTED prefix caching is off.
 * @retval KVC_ERR_STATE       the prefix has full blocks but no pinned ones that qualify -- its
 *                             first block, or with a window every candidate window; nothing
 *                             changed.
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_prefix_unpin(kvc_pool *pool, const int32_t *tokens, int64_t num_tokens,
                                    const kvc_keys *keys, int64_t *out_unpinned_tokens);

/**
 * @brief Drops every cached block from the prefix cache (emits AllBlocksCleared), in every tier.
 *
 * The host tier's cached blocks, and the disk tier's, whose headers are also erased in the file
 * before the call returns, so that a later KVC_DISK_PERSISTENT attach of the file (the next
 * process, after a weight update) finds none of them. Blocks another thread's call is still
 * copying into a lower tier (a swap-out's evictions) are dropped when their copies finish. An
 * erasure that fails is counted in the disk tier's failures and io_errors (then delete the file,
 * or attach it without KVC_DISK_PERSISTENT). One ALL_BLOCKS_CLEARED event covers every tier.
 * @param[in] pool The pool.
 * @retval KVC_ERR_NULL_ARG pool is NULL.
 * @retval KVC_ERR_BUSY     a block is in use or pinned.
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_prefix_cache_reset(kvc_pool *pool);

/**
 * @brief A prompt's block hashes, computed without a pool.
 *
 * hash_hi[i], hash_lo[i] receive the 128-bit chained hash of full block i (tokens
 * [i x block_size, (i + 1) x block_size)) for i < num_tokens / block_size, exactly as a pool with
 * this block_size computes it for the same tokens and keys: the hash its KV events report for that
 * block (kvc_event.hash_hi / hash_lo; block i's parent is hash i - 1). The trailing partial block
 * has no hash. For KV-aware routers, which predict hits from KV events without a pool; the
 * README's "Block hash specification" defines the bytes hashed, so a router in any language can
 * compute the same values. Size query: hash_hi and hash_lo NULL with cap 0 returns KVC_OK with
 * only *out_count set.
 * @param[in]  block_size Tokens per block, >= 1.
 * @param[in]  keys       May be NULL: its LoRA id, salt and multimodal items count; its priority
 *                        and hit cap do not.
 * @param[in]  tokens     The prompt's token ids; may be NULL only when num_tokens is 0.
 * @param[in]  num_tokens Prompt length, >= 0.
 * @param[out] hash_hi    Receives the high halves, cap entries.
 * @param[out] hash_lo    Receives the low halves, cap entries.
 * @param[in]  cap        Entries hash_hi and hash_lo can hold, >= 0.
 * @param[out] out_count  Receives the number of full blocks.
 * @retval KVC_ERR_NULL_ARG         out_count; tokens with num_tokens > 0; hash_hi or hash_lo with
 *                                  cap > 0.
 * @retval KVC_ERR_INVALID_ARG      block_size < 1, num_tokens < 0, cap < 0.
 * @retval KVC_ERR_BUFFER_TOO_SMALL cap below the number of full blocks (*out_count = that number).
 * @retval KVC_ERR_NO_MEMORY        out of host memory.
 * @par Thread safety
 * Stateless and thread-safe (keys is only read).
 */
KVC_API kvc_status kvc_hash_blocks(int32_t block_size, const kvc_keys *keys, const int32_t *tokens,
                                   int64_t num_tokens, uint64_t *hash_hi, uint64_t *hash_lo, int64_t cap,
                                   int64_t *out_count);
/** @} */

/* ================================================================================================
 * KV events
 * ============================================================================================= */
/**
 * @defgroup kvc_events_group KV events
 * @brief The prefix cache's changes, block by block, for KV-aware routers.
 *
 * One event per block and tier: by default the device tier's (block ids are device blocks); with
 * kvc_pool_set_tier_events also the host and disk tiers' (block ids are that tier's slots), so a
 * router can tell a fast hit from a slower one. Copies of one hash (see "Prefix cache") are blocks
 * like any other: each has its own BLOCK_STORED when it enters the cache and its own BLOCK_REMOVED
 * when it leaves, with its block_id and the hash they share. So a hash is cached on the device --
 * kvc_prefix_lookup hits it -- exactly while the device events show at least one block holding
 * it: a router keeps block_id -> hash (or a count of copies per hash) and must not forget a hash
 * at a BLOCK_REMOVED while another block still holds it. The blocks the device events show held
 * always number kvc_stats.cached_blocks_total. tests/test_router_view.c is such a router: from the
 * events and kvc_hash_blocks alone it predicts kvc_prefix_lookup exactly. The ring holds
 * kvc_pool_config.event_capacity events; when it is full, new events are dropped and counted
 * (kvc_stats.events_dropped; gaps in kvc_event.sequence_number).
 * @{
 */

/** @brief Kind of a KV event (kvc_event.type). */
typedef enum kvc_event_type {
    KVC_EVENT_BLOCK_STORED = 1,      /**< a full block entered the cache (of event.tier) */
    KVC_EVENT_BLOCK_REMOVED = 2,     /**< a cached block left the cache (of event.tier): evicted,
                                          or taken out before it is rewritten (kvc_abort, an append
                                          into a block kvc_truncate cut). Other copies of its
                                          hash stay cached */
    KVC_EVENT_ALL_BLOCKS_CLEARED = 3 /**< kvc_prefix_cache_reset */
} kvc_event_type;

/** @brief One KV event (kvc_event_pop). */
typedef struct kvc_event {
    uint32_t struct_size;   /**< set by the caller to sizeof(kvc_event) */
    int32_t type;           /**< kvc_event_type */
    uint64_t hash_hi;       /**< the block's 128-bit chained hash */
    uint64_t hash_lo;
    uint64_t parent_hash_hi;/**< previous block's hash (the fixed seed for block 0) */
    uint64_t parent_hash_lo;
    uint64_t lora_id;       /**< BLOCK_STORED: the block's LoRA adapter (0 = none) */
    uint64_t extra_keys_digest; /**< BLOCK_STORED: digest of salt/multimodal keys (0 = none) */
    int32_t block_id;       /**< physical block */
    int32_t num_tokens;     /**< BLOCK_STORED: token ids copied into the caller's buffer */
    uint64_t sequence_number; /**< increases by one per event produced (gaps = dropped events) */
    int32_t tier;           /**< kvc_tier holding (STORED) or no longer holding (REMOVED) the block;
                                 KVC_TIER_DEVICE for ALL_BLOCKS_CLEARED, which covers every tier */
} kvc_event;

/**
 * @brief Pops the oldest pending event.
 * @param[in]     pool          The pool.
 * @param[in,out] out           Receives the event. out->struct_size: sizeof(kvc_event), or
 *                              offsetof(kvc_event, tier) (the first release's struct, which gets
 *                              every field but tier).
 * @param[out]    tokens        Receives a BLOCK_STORED event's token ids (block_size of them) in
 *                              tokens[0..token_cap); may be NULL when token_cap is 0.
 * @param[in]     token_cap     Entries tokens can hold, >= 0.
 * @param[out]    out_has_event Receives 1 if an event was popped, 0 if none was pending.
 * @retval KVC_ERR_NULL_ARG         pool, out or out_has_event; tokens with token_cap > 0.
 * @retval KVC_ERR_VERSION          out->struct_size unknown.
 * @retval KVC_ERR_INVALID_ARG      token_cap < 0.
 * @retval KVC_ERR_BUFFER_TOO_SMALL token_cap < block_size for a BLOCK_STORED event (the event
 *                                  stays queued).
 * @par Thread safety
 * Any thread; concurrent poppers each get different events.
 */
KVC_API kvc_status kvc_event_pop(kvc_pool *pool, kvc_event *out, int32_t *tokens, int64_t token_cap,
                                 int32_t *out_has_event);

/**
 * @brief Makes KV events also report the host and disk tiers (off by default).
 *
 * Takes effect for later changes, so turn it on before attaching the tiers for a router to see
 * every block. A block evicted from the device to the host tier is then BLOCK_REMOVED (device) at
 * the eviction and BLOCK_STORED (host) once its copy is done; a host victim moving to disk
 * likewise; a disk hit promoted to the host tier is BLOCK_STORED (host) and stays on disk; a disk
 * block whose read fails verification is BLOCK_REMOVED (disk); blocks a KVC_DISK_PERSISTENT
 * attach recovers are BLOCK_STORED (disk), in slot order. Copies that fail store nothing.
 * block_id is the slot in that tier. A restore to the device is the usual device BLOCK_STORED.
 * @param[in] pool The pool.
 * @param[in] on   1 = on, 0 = off.
 * @retval KVC_ERR_NULL_ARG    pool is NULL.
 * @retval KVC_ERR_INVALID_ARG on not 0 or 1.
 * @retval KVC_ERR_UNSUPPORTED on = 1 in a pool without events (event_capacity 0).
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_pool_set_tier_events(kvc_pool *pool, int32_t on);
/** @} */

/* ================================================================================================
 * Memory tiers: device <-> host <-> disk, and preemption
 * ============================================================================================= */
/**
 * @defgroup kvc_tiers_group Memory tiers
 * @brief Host and disk tiers below the device (spill, re-hit, prefetch, flush, statistics), and
 *        preemption by swapping or by recomputation.
 *
 * A pool with storage (backend CPU or CUDA) can get a host tier (block slots in pinned host memory
 * on CUDA, plain host memory on CPU) and below it a disk tier (block slots in a file). Each tier
 * has its own capacity, free list, LRU (per retention priority, like the device's prefix cache)
 * and hash index. Blocks move as one contiguous copy of block_stride bytes.
 *
 *  - Swap (preemption by swapping): kvc_swap_out moves a sequence's exclusively owned blocks
 *    (refcount 1) to the host tier; blocks shared with other sequences (fork, prefix hits) stay on
 *    the device and keep the swapped sequence's reference. A swapped-out sequence is refused by
 *    kvc_append, kvc_fork, kvc_batch_build, kvc_seq_slot_mapping (KVC_ERR_STATE) until kvc_swap_in;
 *    kvc_seq_block_table reports -1 for its blocks that are not on the device; kvc_free works.
 *  - Spill and re-hit: with prefix caching, a cached refcount-0 block evicted from the device is
 *    copied to the host tier instead of being dropped (and a block evicted from the host tier goes
 *    to the disk tier), keeping its identity. Prefix lookups continue into the lower tiers, and
 *    kvc_alloc restores those blocks into fresh device blocks (counted as cached tokens). A lookup
 *    reaches a block only through every block before it, so a block whose parent is cached in no
 *    tier is not spilled, and when one call evicts more blocks than the host has slots to take,
 *    the slots go to the chain heads (kvc_tier_stats.reachable_blocks). Of the device's copies of
 *    one hash (see "Prefix cache") at most one is spilled, and none while another stays.
 *  - Integrity: every block on disk carries an XXH3 checksum over its bytes and identity; a bad
 *    read is a miss (the caller recomputes), never wrong data. A persistent file also records who
 *    computed its blocks (kvc_tier_attach_disk_with_identity): another model's are never hits.
 *    Checksums catch corruption, not forgery: kvc_tier_attach_disk_keyed adds a keyed MAC to every
 *    slot, so that whoever can write the file without the key cannot make it serve chosen KV.
 *  - Prefetch: kvc_tier_prefetch reads a queued prompt's disk hits up into the host tier from the
 *    caller's I/O thread, so that its kvc_alloc does not wait for the disk.
 *  - Pending tier jobs: the copies a call plans under the pool lock (spills, restores, swaps) are
 *    run (on CUDA: issued) after it releases the lock and before it returns; one thread at a time
 *    runs them, and a call that finds copies still pending (another thread's) helps run them.
 *    kvc_op_query / kvc_op_wait follow a swap's copies.
 *  - Ordering: copies run outside the pool lock. On CUDA they are asynchronous on a dedicated tier
 *    stream, and kvc_cache_write, kvc_copy_pending, kvc_launch_attention and
 *    kvc_storage_copy_blocks order their work after every tier copy issued before them
 *    (cudaStreamWaitEvent, no host sync); copy-on-write pairs run after the tier copies planned
 *    before them (see kvc_copy_pending). Callers touching the KV storage with their own kernels
 *    must kvc_op_wait the swap ops (or call one of those functions on their stream) first. The
 *    other direction is the caller's: tier copies read and reuse blocks when the tier stream runs,
 *    so KV writes of a sequence must be complete before kvc_swap_out, and kernels still reading
 *    blocks must be complete before those blocks are freed or swapped out (true between steps,
 *    since sampling synchronizes).
 *
 * Every call here takes the pool and may be made from many threads at once.
 * @{
 */

/** @brief A tier of a pool (kvc_tier_get_stats, kvc_event.tier). */
typedef enum kvc_tier { KVC_TIER_DEVICE = 0, KVC_TIER_HOST = 1, KVC_TIER_DISK = 2 } kvc_tier;

/* kvc_tier_attach_disk flags. */
#define KVC_DISK_PERSISTENT 1 /**< keep the file's blocks: re-attaching the same file with the same
                                   layout and identity finds them again (verified before use) */
#define KVC_DISK_NO_DIRECT 2  /**< never try O_DIRECT */
#define KVC_MAX_DISK_IDENTITY_LEN 1024 /**< longest identity of kvc_tier_attach_disk_with_identity, bytes */
#define KVC_DISK_KEY_MIN_LEN 16 /**< shortest slot-MAC key kvc_tier_attach_disk_keyed takes, bytes */
#define KVC_DISK_KEY_MAX_LEN 64 /**< longest slot-MAC key kvc_tier_attach_disk_keyed takes, bytes */

/**
 * @brief Attaches a host tier of num_blocks block slots (allocated here; once per pool).
 * @param[in] pool       The pool (with storage: backend CPU or CUDA).
 * @param[in] num_blocks Slots, in [1, INT32_MAX].
 * @retval KVC_ERR_NULL_ARG    pool is NULL.
 * @retval KVC_ERR_INVALID_ARG num_blocks < 1 or > INT32_MAX.
 * @retval KVC_ERR_STATE       metadata-only pool, or a host tier is already attached.
 * @retval KVC_ERR_OVERFLOW    the tier's size overflows.
 * @retval KVC_ERR_NO_MEMORY   the slots could not be allocated.
 * @retval KVC_ERR_DEVICE      CUDA refused the pinned host memory.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_tier_attach_host(kvc_pool *pool, int64_t num_blocks);

/**
 * @brief Attaches a disk tier of num_blocks slots in the file `path`.
 *
 * The file is created if missing, mode 0600 — slot headers hold token ids in clear; truncated
 * unless KVC_DISK_PERSISTENT. Needs the host tier (lower tiers reach the device through it). A
 * symbolic link is never followed (pass the resolved path), and an existing file is used only if
 * it is empty or a disk tier's: anything else is refused with KVC_ERR_IO and left as it was. The
 * file's space is reserved at attach (fallocate; holes of a sparse file too); an attach refused for
 * lack of space removes a file it created. The tier holds an exclusive lock (flock) on the file
 * until the pool is destroyed: a second tier on the same file — another process, or another pool
 * of this one (tensor-parallel ranks need a file each) — is refused with KVC_ERR_BUSY, and the file
 * is left untouched. A lock still held is waited for up to 200 ms first (environment
 * KVC_DISK_LOCK_WAIT_MS changes it): a server restarted right after it was killed gets its file
 * although the kernel releases the dead process's lock a few ms late.
 *
 * Trust: this unauthenticated mode trusts everyone who can write the file (or its directory,
 * or the block device under it) as much as the service itself. The XXH3 checksums detect
 * corruption, not forgery: anyone who can write the file can recompute them and make it serve
 * chosen KV for any prompt — the model then attends to what the writer chose. Keep the file where
 * only the service's user can write, or use kvc_tier_attach_disk_keyed.
 *
 * I/O uses io_uring where available (pread/pwrite otherwise) and O_DIRECT where the file system
 * allows it (silently falls back; see kvc_tier_stats.direct_io). Once per pool. Only blocks that
 * reached the disk are kept by KVC_DISK_PERSISTENT (blocks still in the host tier when the pool is
 * destroyed are not written back). The file forgets what the cache drops for good:
 * kvc_prefix_cache_reset erases its blocks, and so is a slot whose read failed verification or
 * whose write failed, so no later attach re-indexes them. kvc_tier_flush writes back what is
 * above the disk before a shutdown.
 * @param[in] pool       The pool (with a host tier).
 * @param[in] path       The file's path, NUL-terminated.
 * @param[in] num_blocks Slots, in [1, INT32_MAX].
 * @param[in] flags      0 or a combination of KVC_DISK_PERSISTENT and KVC_DISK_NO_DIRECT.
 * @retval KVC_ERR_NULL_ARG    pool or path is NULL.
 * @retval KVC_ERR_INVALID_ARG num_blocks < 1 or > INT32_MAX, unknown flags.
 * @retval KVC_ERR_STATE       no host tier, or a disk tier is already attached.
 * @retval KVC_ERR_BUSY        the file is another disk tier's.
 * @retval KVC_ERR_IO          cannot open, not a regular file, no space.
 * @retval KVC_ERR_OVERFLOW    the file's size overflows.
 * @retval KVC_ERR_NO_MEMORY   out of host memory.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_tier_attach_disk(kvc_pool *pool, const char *path, int64_t num_blocks,
                                        int32_t flags);

/**
 * @brief As kvc_tier_attach_disk, for KV produced by `identity`.
 *
 * identity names what computed the blocks — model and revision, KV dtype and, under tensor
 * parallelism, rank and world size (say "llama-3.1-8b-instruct@5206a32;tp=1/2"). Every slot header
 * records it, and a KVC_DISK_PERSISTENT re-attach recovers only the slots written under the same
 * identity and layout; the others count in foreign_blocks (kvc_tier_stats) and their slots are
 * reused, after every empty one (so two identities taking turns on one file keep each other's
 * blocks while there is room). Why: the layout (block size, layers, KV heads, head_dim, dtype) is
 * always checked, but a base and an instruct checkpoint of one architecture, or two ranks' shards,
 * share a layout; without an identity a restart with the other one would take its blocks as hits
 * — wrong KV, and no error.
 * @param[in] pool       As kvc_tier_attach_disk.
 * @param[in] path       As kvc_tier_attach_disk.
 * @param[in] num_blocks As kvc_tier_attach_disk.
 * @param[in] flags      As kvc_tier_attach_disk.
 * @param[in] identity   A NUL-terminated string of at most KVC_MAX_DISK_IDENTITY_LEN bytes. NULL or
 *                       "" = no identity (the same as kvc_tier_attach_disk, so files written by
 *                       either stay recoverable by either).
 * @retval KVC_ERR_INVALID_ARG as kvc_tier_attach_disk, and identity longer than
 *                             KVC_MAX_DISK_IDENTITY_LEN bytes.
 * @retval others              those of kvc_tier_attach_disk.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_tier_attach_disk_with_identity(kvc_pool *pool, const char *path, int64_t num_blocks,
                                                      int32_t flags, const char *identity);

/**
 * @brief As kvc_tier_attach_disk_with_identity, with every slot authenticated by a keyed MAC, so
 *        that the file need not be trusted.
 *
 * The key keys a BLAKE2b-256 MAC over each slot's header fields, token ids and block bytes,
 * written with the slot and checked before its bytes are used. A slot whose MAC does not verify
 * (its bytes or header forged or damaged by anyone without the key) is a miss counted like a
 * checksum failure (checksum_failures, failures) and erased, never wrong KV. A KVC_DISK_PERSISTENT
 * re-attach recovers only the slots written under the same key (and identity and layout): slots of
 * another key, or written without one, count in foreign_blocks, and an unkeyed attach recovers none
 * of the keyed slots either.
 * The key is copied into the tier (the caller may wipe its own copy when this returns) and wiped
 * when the pool is destroyed. libsodium (Debian libsodium23) computes the MAC: it is loaded
 * (dlopen "libsodium.so.23") by the first keyed attach, so libkvc.so itself does not depend on it.
 * What the key does not give: secrecy (slot headers still hold token ids in clear: the file stays
 * 0600), or freshness — a slot erased by kvc_prefix_cache_reset (a weight update) and put back from
 * an older copy of the file verifies again: change the identity or the key with the weights.
 * @param[in] pool       As kvc_tier_attach_disk.
 * @param[in] path       As kvc_tier_attach_disk.
 * @param[in] num_blocks As kvc_tier_attach_disk.
 * @param[in] flags      As kvc_tier_attach_disk.
 * @param[in] identity   As kvc_tier_attach_disk_with_identity.
 * @param[in] key        key_len bytes: a random secret from the service's secret store (32 bytes
 *                       is plenty).
 * @param[in] key_len    In [KVC_DISK_KEY_MIN_LEN, KVC_DISK_KEY_MAX_LEN].
 * @retval KVC_ERR_NULL_ARG    as kvc_tier_attach_disk, and key is NULL.
 * @retval KVC_ERR_INVALID_ARG as kvc_tier_attach_disk_with_identity, and key_len outside
 *                             [KVC_DISK_KEY_MIN_LEN, KVC_DISK_KEY_MAX_LEN].
 * @retval KVC_ERR_UNSUPPORTED libsodium cannot be loaded: the tier is not attached,
 *                             unauthenticated or otherwise; the pool and the file are left as they
 *                             were.
 * @retval others              those of kvc_tier_attach_disk_with_identity.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_tier_attach_disk_keyed(kvc_pool *pool, const char *path, int64_t num_blocks, int32_t flags,
                                              const char *identity, const uint8_t *key, int64_t key_len);

/**
 * @brief Reads the prompt's disk-tier prefix hits up into the host tier (verifying them) and
 *        returns when they are there.
 *
 * So a later kvc_alloc of the prompt restores them from host memory instead of waiting for the
 * disk. Meant for a request still queued: call it from a thread of your own (an I/O worker), and
 * the scheduler's kvc_alloc then costs host-to-device copies only. The hits and rules are
 * kvc_alloc's (the same walk, window and max_cached_tokens; each block verified, a bad one ends
 * the hit; a slot taken may evict a host block, to disk), except that it does not go in rounds:
 * it takes no device block, so a run of disk hits longer than the host slots it can take ends
 * where they run out (kvc_alloc then brings the rest up itself). Nothing else changes: no
 * sequence, no device block. The blocks read up are the host tier's most recently used, but later
 * spills can still evict them before the allocation. A kvc_alloc arriving while tier copies are in
 * flight (a prefetch still reading) waits for them before it looks for its hit, rather than
 * missing those blocks. With prefix caching off nothing moves.
 * @param[in]  pool              The pool (with a disk tier).
 * @param[in]  tokens            The prompt's token ids.
 * @param[in]  num_tokens        Prompt length, >= 1.
 * @param[in]  keys              Cache keys, or NULL.
 * @param[out] out_cached_tokens May be NULL; receives the prompt's cached prefix without the disk
 *                               tier once done — the tokens kvc_alloc would now find on the device
 *                               and in the host tier (a snapshot; a prompt kvc_alloc would refuse
 *                               for its length or capacity is read up all the same). 0 with prefix
 *                               caching off.
 * @retval KVC_ERR_NULL_ARG    pool or tokens is NULL.
 * @retval KVC_ERR_INVALID_ARG num_tokens < 1.
 * @retval KVC_ERR_MAX_LEN     num_tokens exceeds max_seq_len.
 * @retval KVC_ERR_STATE       no disk tier.
 * @par Thread safety
 * Thread-safe: meant to run on an I/O thread while other threads use the pool.
 */
KVC_API kvc_status kvc_tier_prefetch(kvc_pool *pool, const int32_t *tokens, int64_t num_tokens, const kvc_keys *keys,
                                     int64_t *out_cached_tokens);

/**
 * @brief Writes to the disk tier every cached block it does not hold yet.
 *
 * The host tier's, then the device's that no sequence uses (refcount 0; a block in use may still
 * be waiting for its KV, so free or preempt sequences first), the device's through host slots.
 * Returns when the writes are done. Meant for a shutdown before a restart with
 * KVC_DISK_PERSISTENT (the destroy itself writes nothing back), or a checkpoint. Device blocks
 * stay cached on the device; the host slots they pass through may evict host blocks (already on
 * disk by then). When the disk tier is smaller than what there is, its LRU blocks are evicted as
 * by spills (the ones written last win); when every host slot is held by swapped-out sequences,
 * device blocks cannot be written. Writes that fail are counted in the disk tier's failures and
 * io_errors, as spills.
 * @param[in]  pool       The pool (with a disk tier).
 * @param[out] out_blocks May be NULL; receives the blocks queued for writing.
 * @retval KVC_ERR_NULL_ARG pool is NULL.
 * @retval KVC_ERR_STATE    no disk tier.
 * @par Thread safety
 * Thread-safe; other calls may run between its rounds.
 */
KVC_API kvc_status kvc_tier_flush(kvc_pool *pool, int64_t *out_blocks);

/** @brief Statistics of one tier (kvc_tier_get_stats). */
typedef struct kvc_tier_stats {
    uint32_t struct_size;          /**< set by the caller to sizeof(kvc_tier_stats) */
    int32_t tier;                  /**< kvc_tier */
    int32_t direct_io;             /**< disk: 1 if O_DIRECT is in use */
    int32_t persistent;            /**< disk: 1 if KVC_DISK_PERSISTENT */
    int32_t io_uring;              /**< disk: 1 if io_uring is in use (else pread/pwrite) */
    int32_t reserved;
    int64_t capacity_blocks;       /**< 0 when the tier is not attached */
    int64_t used_blocks;           /**< slots holding a block (cached, held by a swapped-out
                                        sequence, or with a copy in flight); device: refcount > 0 */
    int64_t cached_blocks;         /**< slots holding a cached prefix block (device: refcount 0) */
    int64_t held_blocks;           /**< host: slots held by swapped-out sequences */
    int64_t bytes_used;            /**< used_blocks x block_stride */
    int64_t blocks_in;             /**< blocks copied into this tier */
    int64_t blocks_out;            /**< blocks copied out of this tier towards the device */
    int64_t bytes_in;
    int64_t bytes_out;
    int64_t transfers;             /**< batches of copies into or out of this tier */
    double transfer_seconds;       /**< wall time of those copies (issue time for async GPU copies) */
    double bandwidth_bytes_per_s;  /**< (bytes_in + bytes_out) / transfer_seconds, 0 if none */
    int64_t hits;                  /**< prefix blocks kvc_alloc found in this tier */
    int64_t evictions;             /**< cached blocks dropped from this tier to make room */
    int64_t failures;              /**< blocks whose transfer failed (dropped or kept, see below) */
    int64_t checksum_failures;     /**< disk: reads whose checksum or identity did not match */
    int64_t io_errors;             /**< disk: I/O errors, ENOSPC and short reads */
    int64_t recovered_blocks;      /**< disk: blocks re-indexed from a persistent file at attach */
    int64_t foreign_blocks;        /**< disk: slots that held, at a persistent attach, a block of
                                        another identity or layout (not recovered; reused) */
    int64_t reachable_blocks;      /**< of cached_blocks, those whose whole chain is cached: every
                                        block before it in its prompt is in the device's prefix
                                        cache or a host or disk slot, so a prefix lookup can reach
                                        it (the rest can only be evicted). Counted on demand */
} kvc_tier_stats;


/**
 * @brief Statistics of one tier (an unattached host/disk tier reports capacity 0).
 *
 * A failed disk write drops the block it was spilling (counted in failures and io_errors); a
 * failed disk read is a miss (counted in failures and io_errors or checksum_failures) and the bad
 * disk slot is freed and erased in the file; a failed erasure (see kvc_prefix_cache_reset) counts
 * in both too. reachable_blocks is counted by this call, under the pool lock, in time linear in
 * the blocks the three tiers hold (each chain walked once), and only for a struct that has the
 * field: call it between steps, not per token. With a sliding window a hit needs fewer blocks
 * than the whole chain, so more may be usable than it says.
 * @param[in]     pool The pool.
 * @param[in]     tier A kvc_tier.
 * @param[in,out] out  out->struct_size: sizeof(kvc_tier_stats); offsetof(kvc_tier_stats,
 *                     reachable_blocks) (the struct before that field); or
 *                     offsetof(kvc_tier_stats, foreign_blocks) (the first release's struct). A
 *                     shorter struct gets the fields that fit in it and nothing is written past
 *                     it.
 * @retval KVC_ERR_NULL_ARG    pool or out is NULL.
 * @retval KVC_ERR_INVALID_ARG unknown tier.
 * @retval KVC_ERR_VERSION     out->struct_size unknown.
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_tier_get_stats(kvc_pool *pool, int32_t tier, kvc_tier_stats *out);

/**
 * @brief Swaps sequence seq_id out: its blocks with refcount 1 are copied to host tier slots and
 *        their device blocks freed.
 *
 * On CUDA those blocks are reused only after the copy, by stream order. Host slots are taken from
 * free slots first, then by evicting cached blocks (which spill to disk if there is a disk tier).
 * A block that a pending copy-on-write pair reads (a fork of this sequence wrote into a shared
 * block) is swapped out too; the pair still reads it, and the block is reused only after the pair
 * is drained (kvc_copy_pending / kvc_take_pending_copies). Bumps the pool's sequence generation
 * (built batches re-validate).
 * @param[in]  pool   The pool (with a host tier).
 * @param[in]  seq_id The sequence.
 * @param[out] out_op May be NULL; receives an operation id for kvc_op_query / kvc_op_wait.
 * @retval KVC_ERR_NULL_ARG      pool is NULL.
 * @retval KVC_ERR_UNKNOWN_SEQ   no such sequence.
 * @retval KVC_ERR_STATE         already swapped out, no host tier.
 * @retval KVC_ERR_BUSY          a copy-on-write pair into one of this sequence's blocks is still
 *                               pending: kvc_copy_pending first.
 * @retval KVC_ERR_OUT_OF_BLOCKS not enough host slots; nothing moved.
 * @retval KVC_ERR_NO_MEMORY     out of host memory.
 * @par Thread safety
 * Any thread (planned under the pool lock, copied outside it).
 */
KVC_API kvc_status kvc_swap_out(kvc_pool *pool, uint64_t seq_id, uint64_t *out_op);

/**
 * @brief Swaps sequence seq_id back in: fresh device blocks receive its host-held blocks, the host
 *        slots are freed, and the sequence is usable again (batches and kernels order after the
 *        copy).
 * @param[in]  pool   The pool.
 * @param[in]  seq_id The sequence.
 * @param[out] out_op May be NULL; receives an operation id for kvc_op_query / kvc_op_wait.
 * @retval KVC_ERR_NULL_ARG      pool is NULL.
 * @retval KVC_ERR_UNKNOWN_SEQ   no such sequence.
 * @retval KVC_ERR_STATE         not swapped out.
 * @retval KVC_ERR_OUT_OF_BLOCKS not enough free device blocks; nothing moved.
 * @retval KVC_ERR_NO_MEMORY     out of host memory.
 * @par Thread safety
 * Any thread (planned under the pool lock, copied outside it).
 */
KVC_API kvc_status kvc_swap_in(kvc_pool *pool, uint64_t seq_id, uint64_t *out_op);

/**
 * @brief Whether the copies of a swap operation have completed.
 *
 * On the CPU backend an op is complete when its call returns.
 * @param[in]  pool     The pool.
 * @param[in]  op       An operation id from kvc_swap_out / kvc_swap_in.
 * @param[out] out_done Receives 1 when the copies have completed, else 0.
 * @retval KVC_ERR_NULL_ARG    pool or out_done is NULL.
 * @retval KVC_ERR_INVALID_ARG an id this pool never issued.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_op_query(kvc_pool *pool, uint64_t op, int32_t *out_done);

/**
 * @brief Blocks until operation `op` has completed.
 * @param[in] pool The pool.
 * @param[in] op   An operation id from kvc_swap_out / kvc_swap_in.
 * @retval KVC_ERR_NULL_ARG    pool is NULL.
 * @retval KVC_ERR_INVALID_ARG an id this pool never issued.
 * @retval KVC_ERR_DEVICE      waiting for the CUDA copies failed.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_op_wait(kvc_pool *pool, uint64_t op);

/**
 * @brief Preemption by recomputation: frees seq_id (as kvc_free) and reports its confirmed token
 *        count, which the caller must prefill again.
 * @param[in]  pool                    The pool.
 * @param[in]  seq_id                  The sequence.
 * @param[out] out_tokens_to_recompute May be NULL; receives the confirmed token count.
 * @retval KVC_ERR_NULL_ARG    pool is NULL.
 * @retval KVC_ERR_UNKNOWN_SEQ no such sequence.
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_preempt_recompute(kvc_pool *pool, uint64_t seq_id, int64_t *out_tokens_to_recompute);

/**
 * @brief What each way of preempting seq_id would cost. Read-only.
 * @param[in]  pool                 The pool.
 * @param[in]  seq_id               The sequence.
 * @param[out] out_swap_bytes       May be NULL; receives the bytes kvc_swap_out would move (its
 *                                  refcount-1 blocks x block_stride; for a swapped-out sequence,
 *                                  the bytes kvc_swap_in would move).
 * @param[out] out_recompute_tokens May be NULL; receives its confirmed tokens.
 * @retval KVC_ERR_NULL_ARG    pool is NULL.
 * @retval KVC_ERR_UNKNOWN_SEQ no such sequence.
 * @par Thread safety
 * Any thread (under the pool lock).
 */
KVC_API kvc_status kvc_preemption_cost(kvc_pool *pool, uint64_t seq_id, int64_t *out_swap_bytes,
                                       int64_t *out_recompute_tokens);
/** @} */

/* ================================================================================================
 * KV storage and copies
 * ============================================================================================= */
/**
 * @defgroup kvc_storage_group KV storage and copies
 * @brief The KV storage of a pool with a backend (backend != NONE), writing new K/V into it, raw
 *        block copies, and the copy-on-write pairs the sequence calls queue.
 *
 * Layout (one allocation, block-major, all layers of a block contiguous, HND inside a layer):
 * @verbatim
   element(block, layer, kv, head, token, d) at byte offset
     block * block_stride + layer * layer_stride + kv * kv_stride + head * head_stride
     + token * token_stride + d * elem_bytes
   @endverbatim
 * kv = 0 for K, 1 for V; token is the position inside the block (slot mod block_size).
 * A block therefore moves between tiers in one contiguous copy of block_stride bytes.
 *
 * Storage accesses and copy-on-write: kvc_cache_write, kvc_launch_attention,
 * kvc_storage_copy_blocks (and kvc_batch_build on CUDA) first complete the copy-on-write pairs
 * queued before them, as kvc_copy_pending would (CPU: copied, or waited for while another
 * thread copies them; CUDA: ordered before the call's work on its stream). So no access can
 * overtake a copy reading or writing the block it touches, even when the thread that queued the
 * pair has not called kvc_copy_pending yet. Calling kvc_copy_pending before the forward pass stays
 * the way to choose the stream and to know the count; with no pair outstanding this costs one
 * atomic load. Not inside a CUDA graph capture (copy before capturing). A caller that copies the
 * pairs itself drains them with kvc_take_pending_copies instead.
 * @{
 */

/** @brief Where and how a pool's KV storage is laid out (kvc_storage_get_info). */
typedef struct kvc_storage_info {
    uint32_t struct_size;  /**< set by the caller to sizeof(kvc_storage_info) */
    int32_t backend;       /**< kvc_backend actually used (CPU or CUDA) */
    int32_t kv_dtype;
    int32_t elem_bytes;
    int32_t device;        /**< CUDA device ordinal, -1 on CPU */
    uint64_t base_address; /**< address of the storage (device address on CUDA) */
    int64_t total_bytes;
    int64_t block_stride;  /**< all strides in bytes */
    int64_t layer_stride;
    int64_t kv_stride;
    int64_t head_stride;
    int64_t token_stride;
} kvc_storage_info;

/**
 * @brief Describes the pool's KV storage for callers bringing their own kernels.
 * @param[in]     pool The pool.
 * @param[in,out] out  Receives the description; out->struct_size set by the caller.
 * @retval KVC_ERR_NULL_ARG pool or out is NULL.
 * @retval KVC_ERR_VERSION  out->struct_size unknown.
 * @retval KVC_ERR_STATE    metadata-only pool.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_storage_get_info(kvc_pool *pool, kvc_storage_info *out);

/**
 * @brief Writes the step's new K and V into their slots of `layer` (reshape_and_cache).
 *
 * FP8 caches quantize with k_scale / v_scale (stored = value / scale). Can be captured into a CUDA
 * graph (see kvc_launch_attention).
 * @param[in] pool         The pool.
 * @param[in] layer        Layer index, in [0, num_layers).
 * @param[in] slot_mapping num_tokens slots in backend memory; slot < 0 = padding, skipped.
 * @param[in] num_tokens   Tokens to write, >= 0.
 * @param[in] k            [num_tokens, num_kv_heads, head_dim] in src_dtype, in backend memory
 *                         (device memory on CUDA).
 * @param[in] v            Same shape and memory as k.
 * @param[in] src_dtype    kvc_dtype of k and v: F32, F16 or BF16.
 * @param[in] k_scale      FP8 scale of K, > 0.
 * @param[in] v_scale      FP8 scale of V, > 0.
 * @param[in] stream       A cudaStream_t on CUDA (NULL = default stream), ignored on CPU.
 * @retval KVC_ERR_NULL_ARG    a required pointer is NULL.
 * @retval KVC_ERR_INVALID_ARG layer, num_tokens < 0, unknown src_dtype, scales <= 0, a slot past
 *                             the pool on CPU; on a hybrid pool, a layer of an SSM group (k and v
 *                             are shaped by the layer's group: its kv heads x head_dim).
 * @retval KVC_ERR_UNSUPPORTED src_dtype not F32, F16 or BF16; on a CPU pool also: KVC_CPU_ISA
 *                             refused, see kvc_launch_attention.
 * @retval KVC_ERR_STATE       metadata-only pool.
 * @retval KVC_ERR_DEVICE      the CUDA launch failed.
 * @par Thread safety
 * Any thread; concurrent writes to the same slots are the caller's race.
 */
KVC_API kvc_status kvc_cache_write(kvc_pool *pool, int32_t layer, const int64_t *slot_mapping,
                                   int64_t num_tokens, const void *k, const void *v,
                                   int32_t src_dtype, float k_scale, float v_scale, void *stream);

/**
 * @brief Copies raw bytes of `count` whole blocks between the pool storage and host memory, for
 *        tests, debugging and custom tiers. Synchronous.
 * @param[in]     pool      The pool.
 * @param[in]     block_ids count block ids.
 * @param[in]     count     Blocks, >= 0.
 * @param[in,out] host      count x block_stride bytes, block i at offset i x block_stride.
 * @param[in]     to_host   != 0: blocks -> host; else host -> blocks.
 * @retval KVC_ERR_NULL_ARG    a required pointer is NULL.
 * @retval KVC_ERR_INVALID_ARG count < 0, block out of range.
 * @retval KVC_ERR_OVERFLOW    count x block_stride overflows.
 * @retval KVC_ERR_STATE       metadata-only pool.
 * @retval KVC_ERR_DEVICE      a CUDA copy failed.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_storage_copy_blocks(kvc_pool *pool, const int32_t *block_ids, int64_t count,
                                           void *host, int32_t to_host);

/**
 * @brief Drains the pending copy-on-write pairs and copies those blocks (all layers, K and V) in
 *        one launch.
 *
 * Contract with many threads: when this call returns (CPU), every pair queued before it was made
 * has been copied, whichever thread's call drained it; on CUDA, every such copy is ordered before
 * later work on `stream` (a copy another call ran on another stream included). Tier copies planned
 * before a pair (the spill of the cached block evicted to make its destination) run before it.
 * Drained pairs keep both blocks from being reused until their copy is done (CPU) or queued (CUDA;
 * kvc_cache_write, kvc_launch_attention and tier copies on other streams wait for it on the GPU).
 * The pairs change every step, so this is not for CUDA graphs: while `stream` is being captured it
 * copies nothing and fails if pairs are pending.
 * @param[in]  pool       The pool.
 * @param[in]  stream     A cudaStream_t on CUDA (NULL = default stream), ignored on CPU.
 * @param[out] out_copied May be NULL; receives the number of pairs this call copied.
 * @retval KVC_ERR_NULL_ARG pool is NULL.
 * @retval KVC_ERR_STATE    metadata-only pool; pairs pending while `stream` is being captured
 *                          into a CUDA graph (nothing is drained).
 * @retval KVC_ERR_DEVICE   the CUDA copy failed.
 * @par Thread safety
 * Any thread; calls are serialized with each other while they copy.
 */
KVC_API kvc_status kvc_copy_pending(kvc_pool *pool, void *stream, int64_t *out_copied);

/**
 * @brief Drains up to cap pending copy-on-write pairs (src block -> dst block), oldest first, for a
 *        caller that copies them itself.
 *
 * The caller must copy those blocks' KV before the next forward pass and before its next call
 * that can take a block (kvc_alloc, kvc_append, kvc_swap_in may reuse a drained src at once) — or
 * let the pool do it: kvc_copy_pending. Count query: with cap == 0 (src and dst may then be NULL)
 * the call drains nothing and *out_count receives the number of pairs pending, so size the arrays
 * with one call and drain with the next (kvc_stats.pending_copies reports the same count). With
 * memory tiers, tier copies planned before the pairs (the spill of a block evicted to make a dst)
 * are run first (on CUDA: finished), so the caller's copies cannot overtake them.
 * While pending, a pair keeps its src block's bytes: even if every sequence lets the block go, it
 * is not reused, evicted or overwritten by a tier restore until the pair is drained (it does not
 * count as a sharer: a last holder still writes in place). A pair whose dst block is released
 * by its last holder (kvc_free, kvc_truncate) is cancelled.
 * @param[in]  pool      The pool.
 * @param[out] src       Receives the source blocks, cap entries.
 * @param[out] dst       Receives the destination blocks, cap entries.
 * @param[in]  cap       Pairs src and dst can hold, >= 0.
 * @param[out] out_count Receives the number drained (or, with cap 0, pending).
 * @retval KVC_ERR_NULL_ARG    pool or out_count; src or dst with cap > 0.
 * @retval KVC_ERR_INVALID_ARG cap < 0.
 * @par Thread safety
 * Any thread; each pair is drained by one call only.
 */
KVC_API kvc_status kvc_take_pending_copies(kvc_pool *pool, int32_t *src, int32_t *dst,
                                           int64_t cap, int64_t *out_count);
/** @} */

/* ================================================================================================
 * Batch metadata for one forward step
 * ============================================================================================= */
/**
 * @defgroup kvc_batch_group Batch metadata
 * @brief kvc_batch: the block tables, lengths, slot mapping and CSR indices of one forward step,
 *        built once per step and read by every layer.
 *
 * A kvc_batch is owned by one caller at a time: kvc_batch_build, kvc_batch_set_stream and
 * kvc_batch_destroy must not run concurrently with other calls on the same batch; the const calls
 * (kvc_batch_get_info, kvc_batch_copy_*, kvc_launch_attention) may run concurrently with each
 * other. A batch must not be destroyed after its pool.
 * @{
 */

/** @brief Opaque handle of a step's batch metadata (kvc_batch_create / kvc_batch_destroy). */
typedef struct kvc_batch kvc_batch;

/**
 * @brief Creates a batch with fixed capacity.
 *
 * All host and device buffers are allocated here, so building a step never allocates and device
 * addresses stay fixed (CUDA graph capture).
 * @param[in]  pool               The pool whose sequences the batch describes.
 * @param[in]  max_seqs           Sequences per step, >= 1.
 * @param[in]  max_tokens         New tokens per step, >= 1.
 * @param[in]  max_blocks_per_seq Table width, >= 1.
 * @param[out] out                Receives the batch; release it with kvc_batch_destroy.
 * @retval KVC_ERR_NULL_ARG    pool or out is NULL.
 * @retval KVC_ERR_INVALID_ARG capacities < 1.
 * @retval KVC_ERR_OVERFLOW    a buffer size overflows.
 * @retval KVC_ERR_NO_MEMORY   host memory could not be allocated.
 * @retval KVC_ERR_DEVICE      device or pinned memory could not be allocated.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_batch_create(kvc_pool *pool, int32_t max_seqs, int64_t max_tokens,
                                    int32_t max_blocks_per_seq, kvc_batch **out);

/**
 * @brief Destroys a batch. Must not be destroyed after its pool.
 * @param[in] batch The batch; NULL is a no-op.
 * @return Always KVC_OK.
 * @par Thread safety
 * No other call may use the batch meanwhile or afterwards.
 */
KVC_API kvc_status kvc_batch_destroy(kvc_batch *batch);

/**
 * @brief Builds the step's metadata.
 *
 * For sequence i (seq_ids[i]) the query is its newest q_lens[i] confirmed tokens (1 for decode;
 * the uncached prompt part for prefill), the context is all of its confirmed tokens. Fills padded
 * block tables [num_seqs, max_blocks_per_seq] (int32, -1 padding), seq_lens, query_start_loc
 * [num_seqs + 1], slot_mapping of the new tokens, and the CSR form (kv_indptr [num_seqs + 1],
 * kv_indices, kv_last_page_len), then uploads what changed (rows equal to the previous step's are
 * not re-sent) — once per step, reused by every layer. On failure the previous step's metadata
 * stays intact. On CUDA the upload is enqueued on the batch's stream (kvc_batch_set_stream),
 * ordered before any later work on that stream, and the call returns without waiting for it or
 * for earlier work on the stream (see kvc_batch_set_stream for the exact ordering).
 * @param[in,out] batch    The batch.
 * @param[in]     seq_ids  num_seqs distinct sequence ids.
 * @param[in]     q_lens   num_seqs query lengths, each in [1, the sequence's tokens].
 * @param[in]     num_seqs Sequences, in [1, max_seqs].
 * @retval KVC_ERR_NULL_ARG         batch, seq_ids or q_lens is NULL.
 * @retval KVC_ERR_INVALID_ARG      num_seqs < 1 or > capacity, q_len < 1 or > tokens, duplicate
 *                                  id, a query position in a block released by the sliding window.
 * @retval KVC_ERR_UNKNOWN_SEQ      no such sequence.
 * @retval KVC_ERR_STATE            sequence swapped out; the batch's stream is being captured into
 *                                  a CUDA graph; on a hybrid pool, the batch's group is an SSM group
 *                                  (a new batch records group 0: kvc_batch_set_group first when
 *                                  group 0 is SSM).
 * @retval KVC_ERR_BUFFER_TOO_SMALL tokens or table width over capacity.
 * @retval KVC_ERR_DEVICE           the upload failed.
 * @par Thread safety
 * The batch's owner only (no concurrent call on the same batch); the pool may be used by other
 * threads meanwhile.
 */
KVC_API kvc_status kvc_batch_build(kvc_batch *batch, const uint64_t *seq_ids, const int64_t *q_lens,
                                   int32_t num_seqs);

/**
 * @brief Sets the CUDA stream on which subsequent kvc_batch_build calls upload the metadata.
 *
 * NULL is the legacy default stream, the initial setting (with several GPUs a build makes the
 * pool's device current, so NULL is that device's). The stream must belong to the pool's device
 * and stay alive while builds use it. Accepted and ignored on the CPU backend and for
 * metadata-only pools. kvc_batch_copy_slot_mapping / kvc_batch_copy_block_tables read the
 * library's host copies and use no stream.
 *
 * Ordering: kvc_batch_build enqueues the upload (asynchronous copies from pinned host memory the
 * library owns) on the stream, after the work already enqueued there (e.g. the previous step's
 * attention reading the same arrays), and returns without waiting for that work or the upload.
 *  - Work enqueued later on the same stream sees the new arrays. Work on another stream must first
 *    be ordered after the build (cudaEventRecord on this stream after the build, cudaStreamWaitEvent
 *    on the other): kvc_cache_write and kvc_launch_attention take their own stream argument.
 *  - Work that reads the arrays (the previous step's kernels) must be enqueued on this stream, or
 *    ordered before it, before the next build: that build's copies overwrite the arrays in place.
 *  - After a stream change, the next upload is ordered on the GPU after the previous upload, not
 *    after other work on the old stream: order that work before the new stream yourself.
 *  - The host waits only when a build would overwrite host memory that an earlier upload has not
 *    read yet. Builds alternate two host buffers, so a build waits at most for the upload of the
 *    build before the previous one (and the work enqueued before it), never for the previous
 *    build's upload or the previous step's kernels (after a build failed with KVC_ERR_DEVICE, the
 *    next one waits for that build's copies).
 *  - A build also orders the stream after the pool's tier copies (swap-in, restore from the host
 *    tier, spill): a CUDA graph replayed on the stream after the build sees them done.
 *
 * CUDA graphs: a build while the stream is being captured fails with KVC_ERR_STATE (its copies
 * would be recorded into the graph instead of run). Build before each replay, on the stream the
 * graph is replayed on; the graph reads the fixed addresses of kvc_batch_info.
 * @param[in,out] batch  The batch.
 * @param[in]     stream A cudaStream_t passed as void*, or NULL.
 * @retval KVC_ERR_NULL_ARG batch is NULL.
 * @par Thread safety
 * Like kvc_batch_build, it must not run concurrently with other calls on the same batch.
 */
KVC_API kvc_status kvc_batch_set_stream(kvc_batch *batch, void *stream);

/**
 * @brief Chooses the KV-cache group whose block tables the next kvc_batch_build records (hybrid
 *        pools, kvc_pool_create_hybrid; default group 0).
 *
 * A hybrid server builds one batch per attention group each step (the groups' tables differ)
 * and launches each layer with its group's batch; kvc_launch_attention and a launch-time check
 * refuse a layer of another group. The batch's committed metadata stays that of its last build
 * until the next build.
 * @param[in,out] batch The batch.
 * @param[in]     group The group, in [0, num_groups); an SSM group has no block tables to launch
 *                      over and is refused.
 * @retval KVC_ERR_NULL_ARG    batch is NULL.
 * @retval KVC_ERR_INVALID_ARG group out of range, or an SSM group.
 * @par Thread safety
 * The batch's owner only.
 */
KVC_API kvc_status kvc_batch_set_group(kvc_batch *batch, int32_t group);

/** @brief Sizes and array addresses of a batch's last build (kvc_batch_get_info). */
typedef struct kvc_batch_info {
    uint32_t struct_size;          /**< set by the caller to sizeof(kvc_batch_info) */
    int32_t num_seqs;
    int64_t num_tokens;            /**< total new (query) tokens */
    int32_t max_blocks_per_seq;    /**< table row width */
    int32_t max_q_len;
    int64_t max_seq_len;
    int64_t num_indices;           /**< entries of kv_indices */
    int32_t is_decode;             /**< 1 when every q_len == 1 */
    int32_t rows_uploaded;         /**< table rows sent in the last build (incremental upload) */
    /* Addresses of the arrays in backend memory (device memory on CUDA), valid until destroy. */
    uint64_t block_tables;         /**< int32 [num_seqs][max_blocks_per_seq] */
    uint64_t seq_lens;             /**< int32 [num_seqs] */
    uint64_t query_start_loc;      /**< int32 [num_seqs + 1] */
    uint64_t slot_mapping;         /**< int64 [num_tokens] */
    uint64_t kv_indptr;            /**< int32 [num_seqs + 1] */
    uint64_t kv_indices;           /**< int32 [num_indices] */
    uint64_t kv_last_page_len;     /**< int32 [num_seqs] */
} kvc_batch_info;

/**
 * @brief Sizes and array addresses of the last build.
 * @param[in]     batch The batch.
 * @param[in,out] out   Receives the info; out->struct_size set by the caller.
 * @retval KVC_ERR_NULL_ARG batch or out is NULL.
 * @retval KVC_ERR_VERSION  out->struct_size unknown.
 * @retval KVC_ERR_STATE    never built.
 * @par Thread safety
 * Const: may run concurrently with other const calls on the batch, not with a build.
 */
KVC_API kvc_status kvc_batch_get_info(const kvc_batch *batch, kvc_batch_info *out);

/**
 * @brief Copies the last build's slot mapping (num_tokens entries) to host memory out[0..cap).
 * @param[in]  batch The batch.
 * @param[out] out   Receives the slots.
 * @param[in]  cap   Entries out can hold.
 * @retval KVC_ERR_NULL_ARG         batch or out is NULL.
 * @retval KVC_ERR_STATE            never built.
 * @retval KVC_ERR_BUFFER_TOO_SMALL cap below num_tokens.
 * @par Thread safety
 * Const: may run concurrently with other const calls on the batch, not with a build.
 */
KVC_API kvc_status kvc_batch_copy_slot_mapping(const kvc_batch *batch, int64_t *out, int64_t cap);

/**
 * @brief Copies the last build's padded block tables (num_seqs x max_blocks_per_seq) to host
 *        memory.
 * @param[in]  batch The batch.
 * @param[out] out   Receives the tables, row-major.
 * @param[in]  cap   Entries out can hold.
 * @retval KVC_ERR_NULL_ARG         batch or out is NULL.
 * @retval KVC_ERR_STATE            never built.
 * @retval KVC_ERR_BUFFER_TOO_SMALL cap below num_seqs x max_blocks_per_seq.
 * @par Thread safety
 * Const: may run concurrently with other const calls on the batch, not with a build.
 */
KVC_API kvc_status kvc_batch_copy_block_tables(const kvc_batch *batch, int32_t *out, int64_t cap);
/** @} */

/* ================================================================================================
 * Attention
 * ============================================================================================= */
/**
 * @defgroup kvc_attention_group Attention
 * @brief Paged attention over a built batch, on the pool's backend.
 * @{
 */

/** @brief Parameters of kvc_launch_attention (kvc_attention_params_default fills them). */
typedef struct kvc_attention_params {
    uint32_t struct_size;     /**< sizeof(kvc_attention_params); set by kvc_attention_params_default */
    int32_t num_q_heads;      /**< multiple of the pool's num_kv_heads (GQA), <= config num_q_heads;
                                   0 = the pool's num_q_heads */
    int32_t q_dtype;          /**< dtype of q and out: F32, F16 or BF16 */
    float scale;              /**< softmax scale; 0 = 1/sqrt(head_dim) */
    float k_scale;            /**< FP8 KV dequantization scales (1.0 otherwise) */
    float v_scale;
    float logit_softcap;      /**< > 0: logits = softcap * tanh(logits / softcap); 0 = off */
    int32_t sliding_window;   /**< > 0: attend only to the last sliding_window positions */
    const float *alibi_slopes;/**< NULL or num_q_heads slopes in backend memory */
    int32_t partition_size;   /**< decode split-K partition in tokens: 0 = auto, -1 = never split */
} kvc_attention_params;

/**
 * @brief Fills defaults: num_q_heads 0 (the pool's), q_dtype F16, scale 0, k/v scale 1, no
 *        softcap, no window, no ALiBi, auto partitioning (and struct_size).
 * @param[out] p The parameters to fill.
 * @retval KVC_ERR_NULL_ARG p is NULL.
 * @par Thread safety
 * Any thread (touches only *p).
 */
KVC_API kvc_status kvc_attention_params_default(kvc_attention_params *p);

/**
 * @brief Paged attention for one layer over the batch built last.
 *
 * Decode (every q_len = 1) and prefill/append (causal: query token j of a sequence of length L with
 * q_len Q sees positions <= L - Q + j) are dispatched automatically. The new tokens' K/V must
 * already be written (kvc_cache_write). On CUDA the launch is asynchronous on `stream`.
 *
 * CUDA graphs: this call and kvc_cache_write (with the batch's device slot_mapping) can be captured
 * and the graph replayed step after step, each replay preceded by a kvc_batch_build on the
 * replaying stream (which also orders it after tier copies: captured launches do not wait for
 * them). A replay keeps the captured launch shape: build the same number of sequences (pad a
 * smaller step with one-token dummy sequences kept for the purpose) and no longer query
 * (decode: 1) than at capture; contexts may grow up to the batch's capacity
 * (max_blocks_per_seq x block_size), which a captured decode launch plans its split-K partitions
 * for.
 *
 * With a sliding window set on the pool (kvc_pool_set_sliding_window), params->sliding_window must
 * be between 1 and the pool's window, and no wider than the batch's released blocks allow. On a
 * hybrid pool (kvc_pool_create_hybrid) the layer's group decides: heads, head_dim, the default
 * scale and the shapes of q and out are its group's, the window rule uses a SLIDING group's
 * window, and the batch must have been built for that group (kvc_batch_set_group).
 * CPU pools pick their kernel variant (baseline, AVX2, AVX-512) at run time from the CPU; the
 * environment variable KVC_CPU_ISA=baseline|avx2|avx512 forces one (auto: the default).
 * @param[in]  pool   The pool.
 * @param[in]  batch  A batch of this pool, built for this step.
 * @param[in]  layer  Layer index, in [0, num_layers).
 * @param[in]  q      [num_tokens, num_q_heads, head_dim] (num_tokens = the batch's new tokens, in
 *                    batch order), in backend memory.
 * @param[out] out    Same shape as q, in backend memory.
 * @param[in]  params The parameters (struct_size set, e.g. by kvc_attention_params_default).
 * @param[in]  stream A cudaStream_t on CUDA (NULL = default stream), ignored on CPU.
 * @retval KVC_ERR_NULL_ARG    pool, batch, q, out or params is NULL.
 * @retval KVC_ERR_VERSION     params->struct_size unknown.
 * @retval KVC_ERR_INVALID_ARG layer, heads, scale, window; on a hybrid pool, a layer of an SSM
 *                             group or of another group than the batch was built for.
 * @retval KVC_ERR_UNSUPPORTED head dim / dtype / block size combination; on a CPU pool,
 *                             KVC_CPU_ISA names an unknown variant or one this CPU cannot run.
 * @retval KVC_ERR_STATE       batch never built, metadata-only pool, batch of another pool.
 * @retval KVC_ERR_DEVICE      launch failed.
 * @par Thread safety
 * Any thread; the batch is only read (no build of it may run meanwhile).
 */
KVC_API kvc_status kvc_launch_attention(kvc_pool *pool, const kvc_batch *batch, int32_t layer,
                                        const void *q, void *out, const kvc_attention_params *params,
                                        void *stream);
/** @} */

/* ================================================================================================
 * KV transfer between pools in different processes or machines
 * ============================================================================================= */
/**
 * @defgroup kvc_xfer_group KV transfer
 * @brief kvc_xfer_*: moving cached prefixes between pools in different processes or machines
 *        (prefill/decode disaggregation, prefix sharing across replicas), over UCX
 *        (lib/transfer/README.md).
 *
 * One agent per pool and process. The exporter leases a cached prefix's full blocks and hands out
 * a descriptor (worker address, memory key, layout and model identity, hash chain, token ids,
 * block addresses, lease) that the caller moves to the importer through its own channel (gRPC,
 * HTTP, a queue). The importer's kvc_xfer_import is asynchronous (kvc_xfer_op_query /
 * kvc_xfer_op_wait, like the tier operations): it checks the descriptor, its layout and identity
 * against the importing pool, recomputes the hash chain from the token ids and the importer's
 * keys, takes fresh blocks, pulls them (one-sided RMA gets; a CPU exporter that may serve over
 * shared memory stages its exports in UCX-allocated memory unless its environment has
 * KVC_XFER_EXPORT_STAGING=0, and the importer then copies from its mapping of it; with the
 * importer's KVC_XFER_DATA_PATH=push each run is asked for and sent back by active-message
 * rendezvous), checks that the lease was held throughout (by asking the exporter, or for a staged
 * export by reading its lease word itself), and only then enters the blocks in the
 * prefix cache, so a later kvc_alloc of the prompt hits them. Any failure (peer gone, timeout, lease over, layout or
 * identity mismatch, a truncated or damaged descriptor, importing pool full) is a status and a
 * kvc_xfer_failure reason, with nothing cached and every block returned: the caller recomputes.
 *
 * UCX is loaded at run time (dlopen of libucp.so.0; libkvc.so does not link it): without it,
 * kvc_xfer_available reports 0 and kvc_xfer_agent_create KVC_ERR_UNSUPPORTED; every other call of
 * the library works as before. Pools: CPU or CUDA backend, prefix caching on, in any pairing. A
 * CUDA pool's blocks go through pinned host staging (copied at export; pulled into host memory,
 * then copied to the device before they are cached), at most KVC_XFER_STAGING_BYTES bytes per
 * agent (environment; default the pool's KV storage size). On a CUDA pool, KV written on a
 * non-blocking stream must be synchronized before it is exported.
 *
 * Thread safety: every kvc_xfer_* call on an agent may be made from many threads. Destroy an
 * agent before its pool. An exported block is KV the exporter has written: export a prompt after
 * the forward pass that wrote its KV.
 * @{
 */

/** @brief Opaque handle of a transfer agent (kvc_xfer_agent_create / kvc_xfer_agent_destroy). */
typedef struct kvc_xfer_agent kvc_xfer_agent;

#define KVC_MAX_XFER_IDENTITY_LEN 1024 /**< longest model identity string, bytes */

/** @brief Why a transfer failed (kvc_xfer_import_result.failure; also named in kvc_last_error). */
typedef enum kvc_xfer_failure {
    KVC_XFER_OK = 0,
    KVC_XFER_FAIL_DESCRIPTOR = 1, /**< truncated, damaged, malformed or another version (KVC_ERR_INVALID_ARG / KVC_ERR_VERSION) */
    KVC_XFER_FAIL_LAYOUT = 2,     /**< block size, shape, dtype, block bytes or model identity differ (KVC_ERR_INVALID_ARG) */
    KVC_XFER_FAIL_HASH = 3,       /**< the hash chain is not that of the token ids and the importer's keys (KVC_ERR_INVALID_ARG) */
    KVC_XFER_FAIL_POOL_FULL = 4,  /**< the importing pool cannot take the blocks now (KVC_ERR_OUT_OF_BLOCKS;
                                   a CUDA pool: KVC_ERR_NO_MEMORY when its host staging is full) */
    KVC_XFER_FAIL_PEER = 5,       /**< the exporter is unreachable or went away, or a get failed (KVC_ERR_IO) */
    KVC_XFER_FAIL_TIMEOUT = 6,    /**< not done within the agent's timeout_ms (KVC_ERR_IO) */
    KVC_XFER_FAIL_LEASE = 7,      /**< the exporter no longer held the blocks: released, expired, or another
                                       agent at that address (KVC_ERR_STATE) */
    KVC_XFER_FAIL_CANCELLED = 8,  /**< the agent was destroyed first (KVC_ERR_STATE) */
    KVC_XFER_FAIL_DEVICE = 9      /**< a CUDA pool: a device copy or stream wait of the import failed
                                       (moving the pulled blocks from host staging into the device
                                       blocks, or ordering the import after the pool's queued copies;
                                       KVC_ERR_DEVICE) */
} kvc_xfer_failure;

/** @brief Configuration of a transfer agent (kvc_xfer_agent_create). */
typedef struct kvc_xfer_config {
    uint32_t struct_size;         /**< sizeof(kvc_xfer_config); set by kvc_xfer_config_default */
    const char *model_identity;   /**< what computed the KV: model and revision, KV dtype, TP rank
                                       ("llama-3.1-8b@5206a32;tp=0/1"); exporter and importer must
                                       agree byte for byte. NUL-terminated, at most
                                       KVC_MAX_XFER_IDENTITY_LEN bytes; NULL = "" (default NULL) */
    const char *transports;       /**< UCX transports (UCX_TLS syntax: "tcp", "sm,self", "^ib");
                                       NULL = UCX's choice / the UCX_TLS environment (default) */
    const char *net_devices;      /**< UCX_NET_DEVICES ("eth0", "lo"); NULL = UCX's choice */
    int64_t lease_ms;             /**< default lease of an export, ms, >= 1 (default 30000) */
    int64_t timeout_ms;           /**< an import fails with KVC_XFER_FAIL_TIMEOUT after this, >= 1
                                       (default 30000) */
} kvc_xfer_config;

/**
 * @brief Fills *cfg with defaults (including struct_size).
 * @param[out] cfg The configuration to fill.
 * @retval KVC_ERR_NULL_ARG cfg is NULL.
 * @par Thread safety
 * Any thread (touches only *cfg).
 */
KVC_API kvc_status kvc_xfer_config_default(kvc_xfer_config *cfg);

/**
 * @brief Whether KV transfer works here: UCX can be loaded.
 * @param[out] out_available Receives 1 when UCX can be loaded, else 0 (kvc_last_error says why).
 * @retval KVC_ERR_NULL_ARG out_available is NULL.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_xfer_available(int32_t *out_available);

/**
 * @brief Creates a transfer agent for pool.
 *
 * Loads UCX, creates a UCP context and worker (RMA, active messages), registers the pool's KV
 * storage (CPU pool; a CUDA pool's transfers use host staging) and starts one progress thread (it answers the importers' pulls, gets and lease checks and
 * drives this agent's imports).
 * @param[in]  pool The pool (CPU or CUDA backend, prefix caching on).
 * @param[in]  cfg  The configuration, or NULL (defaults).
 * @param[out] out  Receives the agent; release it with kvc_xfer_agent_destroy, before the pool.
 * @retval KVC_ERR_NULL_ARG    pool or out is NULL.
 * @retval KVC_ERR_VERSION     cfg->struct_size unknown.
 * @retval KVC_ERR_INVALID_ARG identity too long, lease_ms or timeout_ms < 1.
 * @retval KVC_ERR_UNSUPPORTED UCX absent or too old; a metadata-only pool; prefix caching off.
 * @retval KVC_ERR_IO          UCX refused: no usable transport, the registration failed.
 * @retval KVC_ERR_NO_MEMORY   out of host memory.
 * @retval KVC_ERR_DEVICE      a CUDA pool's copy stream could not be created.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_xfer_agent_create(kvc_pool *pool, const kvc_xfer_config *cfg, kvc_xfer_agent **out);

/**
 * @brief Destroys an agent.
 *
 * Imports still running fail (KVC_XFER_FAIL_CANCELLED; their blocks are returned once their gets
 * have stopped), every export's lease ends, UCX resources are freed.
 * @param[in] agent The agent; NULL is a no-op.
 * @return Always KVC_OK.
 * @par Thread safety
 * Must not race with other calls on the agent.
 */
KVC_API kvc_status kvc_xfer_agent_destroy(kvc_xfer_agent *agent);

/**
 * @brief Exports the cached prompt: leases the leading full blocks of tokens[0, num_tokens) cached
 *        on the device.
 *
 * The blocks are verified as a prefix hit is, all full blocks (no last-token rule), and are neither
 * evicted nor reused until kvc_xfer_export_release or the lease ends.
 * @param[in]  agent      The agent.
 * @param[in]  tokens     The prompt's token ids.
 * @param[in]  num_tokens Prompt length, >= block_size.
 * @param[in]  keys       Cache keys, or NULL.
 * @param[in]  lease_ms   Lease in ms, >= 0; 0 = the agent's default.
 * @param[out] out_export Receives the export's id (for kvc_xfer_export_descriptor and
 *                        kvc_xfer_export_release).
 * @param[out] out_tokens May be NULL; receives the tokens exported (blocks × block_size).
 * @retval KVC_ERR_NULL_ARG    agent, tokens or out_export is NULL.
 * @retval KVC_ERR_INVALID_ARG num_tokens < block_size, lease_ms < 0.
 * @retval KVC_ERR_STATE       the prompt's first block is not cached.
 * @retval KVC_ERR_NO_MEMORY   out of host memory, or a CUDA pool's host staging is full.
 * @retval KVC_ERR_DEVICE      a CUDA pool's copy to staging failed. Nothing is leased on failure.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_xfer_export_prompt(kvc_xfer_agent *agent, const int32_t *tokens, int64_t num_tokens,
                                          const kvc_keys *keys, int64_t lease_ms, uint64_t *out_export,
                                          int64_t *out_tokens);

/**
 * @brief As kvc_xfer_export_prompt for sequence seq_id's leading full blocks that are in the
 *        prefix cache (a sequence the caller has just prefilled).
 *
 * The sequence may then be freed: the lease holds the blocks.
 * @param[in]  agent      The agent.
 * @param[in]  seq_id     The sequence.
 * @param[in]  lease_ms   Lease in ms, >= 0; 0 = the agent's default.
 * @param[out] out_export Receives the export's id.
 * @param[out] out_tokens May be NULL; receives the tokens exported.
 * @retval KVC_ERR_NULL_ARG    agent or out_export is NULL.
 * @retval KVC_ERR_INVALID_ARG lease_ms < 0.
 * @retval KVC_ERR_UNKNOWN_SEQ no such sequence.
 * @retval KVC_ERR_STATE       swapped out, or no cached full block.
 * @retval KVC_ERR_NO_MEMORY   out of host memory, or a CUDA pool's host staging is full.
 * @retval KVC_ERR_DEVICE      a CUDA pool's copy to staging failed. Nothing is leased on failure.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_xfer_export_seq(kvc_xfer_agent *agent, uint64_t seq_id, int64_t lease_ms,
                                       uint64_t *out_export, int64_t *out_tokens);

/**
 * @brief Copies export export_id's serialized descriptor into buf[0, cap).
 *
 * Size query: buf NULL with cap 0 sets only *out_len. The bytes are opaque to the caller and
 * versioned; move them to the importer unchanged.
 * @param[in]  agent     The agent.
 * @param[in]  export_id An export of this agent.
 * @param[out] buf       Receives the descriptor.
 * @param[in]  cap       Bytes buf can hold, >= 0.
 * @param[out] out_len   Receives the descriptor's length.
 * @retval KVC_ERR_NULL_ARG         agent, out_len; buf with cap > 0.
 * @retval KVC_ERR_INVALID_ARG      cap < 0, an unknown or ended export.
 * @retval KVC_ERR_BUFFER_TOO_SMALL *out_len = the size needed.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_xfer_export_descriptor(kvc_xfer_agent *agent, uint64_t export_id, uint8_t *buf, int64_t cap,
                                              int64_t *out_len);

/**
 * @brief Ends export export_id's lease now: its blocks go back to the pool's cache (evictable).
 *
 * Imports of it not yet checked fail with KVC_XFER_FAIL_LEASE.
 * @param[in] agent     The agent.
 * @param[in] export_id An export of this agent.
 * @retval KVC_ERR_NULL_ARG    agent is NULL.
 * @retval KVC_ERR_INVALID_ARG unknown, released or expired export.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_xfer_export_release(kvc_xfer_agent *agent, uint64_t export_id);

/**
 * @brief Starts importing a descriptor into the agent's pool.
 *
 * Checked before anything changes: the descriptor, its layout and model identity against this
 * pool and agent, the hash chain. Then the leading blocks already cached here are kept (not
 * pulled), fresh blocks are taken for the rest (KVC_ERR_OUT_OF_BLOCKS, nothing changed, when that
 * would leave fewer free blocks than the watermark) and the pulls are posted. When it completes
 * successfully every pulled block is cached (refcount 0, evictable; hashes cached here meanwhile
 * keep their own copy and the pulled block goes back). A failure here also counts in the agent's
 * stats.
 * @param[in]  agent  The agent.
 * @param[in]  desc   The descriptor, len bytes (from kvc_xfer_export_descriptor).
 * @param[in]  len    Its length, >= 1.
 * @param[in]  keys   The request's keys (LoRA, salt, multimodal items: the hash chain must be that
 *                    of the descriptor's token ids under these keys; its priority is the blocks'
 *                    retention priority); NULL = no keys.
 * @param[out] out_op Receives the operation id.
 * @retval KVC_ERR_NULL_ARG      agent, desc or out_op is NULL.
 * @retval KVC_ERR_INVALID_ARG   len < 1; a damaged, truncated or malformed descriptor; layout,
 *                               identity or hash chain mismatch.
 * @retval KVC_ERR_VERSION       a descriptor of another version.
 * @retval KVC_ERR_OUT_OF_BLOCKS the pool cannot take the blocks now.
 * @retval KVC_ERR_IO            the exporter's address cannot be reached.
 * @retval KVC_ERR_NO_MEMORY     out of host memory, or a CUDA pool's host staging is full (reason
 *                               KVC_XFER_FAIL_POOL_FULL).
 * @retval KVC_ERR_DEVICE        a CUDA pool: ordering the import after the pool's queued copies
 *                               failed (reason KVC_XFER_FAIL_DEVICE).
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_xfer_import(kvc_xfer_agent *agent, const uint8_t *desc, int64_t len, const kvc_keys *keys,
                                   uint64_t *out_op);

/**
 * @brief Whether import op has finished (successfully or not). Never blocks.
 * @param[in]  agent    The agent.
 * @param[in]  op       An operation id from kvc_xfer_import.
 * @param[out] out_done Receives 1 when finished, else 0.
 * @retval KVC_ERR_NULL_ARG    agent or out_done is NULL.
 * @retval KVC_ERR_INVALID_ARG an id this agent never issued or already waited for.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_xfer_op_query(kvc_xfer_agent *agent, uint64_t op, int32_t *out_done);

/** @brief Outcome of one import (kvc_xfer_op_wait). */
typedef struct kvc_xfer_import_result {
    uint32_t struct_size;   /**< set by the caller to sizeof(kvc_xfer_import_result) */
    int32_t status;         /**< the import's kvc_status (also the return value of kvc_xfer_op_wait) */
    int32_t failure;        /**< kvc_xfer_failure, KVC_XFER_OK on success */
    int32_t reserved;
    int64_t blocks;         /**< full blocks in the descriptor */
    int64_t blocks_pulled;  /**< blocks read from the exporter */
    int64_t blocks_cached;  /**< pulled blocks entered in the prefix cache */
    int64_t blocks_skipped; /**< leading blocks already cached here, not pulled */
    int64_t bytes_pulled;
    int64_t cached_tokens;  /**< on success: tokens of the prefix cached here, blocks × block_size */
    double seconds;         /**< from kvc_xfer_import to completion */
} kvc_xfer_import_result;

/**
 * @brief Waits until import op has finished, then retires it and returns its status.
 *
 * KVC_OK: the blocks are cached. Otherwise its failure (KVC_ERR_IO: peer gone or timeout;
 * KVC_ERR_STATE: lease over or agent destroyed; ...) with kvc_last_error naming the reason.
 * @param[in]  agent      The agent.
 * @param[in]  op         An operation id from kvc_xfer_import.
 * @param[in]  timeout_ms < 0 waits without limit; otherwise after timeout_ms an import still
 *                        running gives KVC_ERR_BUSY and is kept (*out untouched).
 * @param[out] out        May be NULL; receives the result *whenever the import has finished,
 *                        failed or not* (the documented exception to "out-params only on
 *                        success"). out->struct_size set by the caller.
 * @retval KVC_ERR_NULL_ARG    agent is NULL.
 * @retval KVC_ERR_INVALID_ARG unknown op.
 * @retval KVC_ERR_VERSION     out's struct_size.
 * @retval KVC_ERR_BUSY        still running after timeout_ms.
 * @retval others              the import's own status.
 * @par Thread safety
 * Any thread; one wait retires the op.
 */
KVC_API kvc_status kvc_xfer_op_wait(kvc_xfer_agent *agent, uint64_t op, int64_t timeout_ms,
                                    kvc_xfer_import_result *out);

/** @brief Counters of a transfer agent (kvc_xfer_get_stats). */
typedef struct kvc_xfer_stats {
    uint32_t struct_size;      /**< set by the caller to sizeof(kvc_xfer_stats) */
    int32_t reserved;
    int64_t exports_active;    /**< leases held now */
    int64_t exports_total;
    int64_t exports_expired;   /**< leases ended by expiry (not by kvc_xfer_export_release) */
    int64_t export_blocks_held;/**< blocks held by active leases (a block in two counts twice) */
    int64_t lease_checks;      /**< importers' lease checks answered by this agent */
    int64_t imports_started;
    int64_t imports_ok;
    int64_t imports_failed;    /**< every failure, those refused by kvc_xfer_import included */
    int64_t blocks_pulled;
    int64_t blocks_cached;
    int64_t blocks_skipped;
    int64_t bytes_pulled;
    double import_seconds;     /**< summed over finished imports */
    int64_t failures[9];       /**< imports failed per kvc_xfer_failure (index 0 unused), up to
                                    KVC_XFER_FAIL_CANCELLED */
    int64_t failures_device;   /**< imports failed with KVC_XFER_FAIL_DEVICE (added after failures[];
                                    filled when struct_size covers it) */
} kvc_xfer_stats;

/**
 * @brief The agent's counters.
 * @param[in]     agent The agent.
 * @param[in,out] out   Receives the counters; out->struct_size set by the caller.
 * @retval KVC_ERR_NULL_ARG agent or out is NULL.
 * @retval KVC_ERR_VERSION  out->struct_size unknown.
 * @par Thread safety
 * Any thread.
 */
KVC_API kvc_status kvc_xfer_get_stats(kvc_xfer_agent *agent, kvc_xfer_stats *out);
/** @} */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KVC_KVC_H */
