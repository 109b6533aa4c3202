// C API: configuration, sizing, pool lifetime, checker and statistics.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>

#include "core/group_config.hpp"
#include "core/pool.hpp"
#include "core/pool_config.hpp"
#include "error.hpp"
#include "storage/cuda_api.hpp"
#include "storage/pool_access.hpp"
#include "struct_size.hpp"
#include "tier/tiers.hpp"

namespace {

using kvc::fail;

bool in_unit_interval(double v) { return v > 0.0 && v <= 1.0; }  // false for NaN

// Resolves AUTO and checks the device. On success *backend is NONE, CPU or CUDA.
kvc_status resolve_backend(const kvc_pool_config &c, int32_t *backend, int32_t *device) {
    *backend = c.backend;
    *device = -1;
    if (c.backend == KVC_BACKEND_NONE || c.backend == KVC_BACKEND_CPU) return KVC_OK;
    int32_t count = 0;
    kvc_status st = kvc::cuda::device_count(&count);
    if (st != KVC_OK) return st;
    if (c.backend == KVC_BACKEND_AUTO && count == 0) {
        *backend = KVC_BACKEND_CPU;
        return KVC_OK;
    }
    if (count == 0)
        return fail(KVC_ERR_DEVICE, "kvc_pool_create: backend CUDA requested but no usable CUDA device "
                                    "(built without CUDA, no driver, or no GPU)");
    if (c.device >= count)
        return fail(KVC_ERR_DEVICE, "kvc_pool_create: device %d requested but only %d CUDA device(s) exist", c.device,
                    count);
    *backend = KVC_BACKEND_CUDA;
    *device = c.device;
    return KVC_OK;
}

// Checks the non-shape fields of a config.
kvc_status validate_policy(const kvc_pool_config &c) {
    const char *fn = "kvc_pool_create";
    if (c.num_q_heads < 0 || (c.num_q_heads > 0 && c.num_q_heads % c.num_kv_heads != 0))
        return fail(KVC_ERR_INVALID_ARG, "%s: num_q_heads %d must be 0 or a positive multiple of num_kv_heads %d", fn,
                    c.num_q_heads, c.num_kv_heads);
    if (c.num_blocks < 0)
        return fail(KVC_ERR_INVALID_ARG, "%s: num_blocks must be >= 0, got %lld", fn, (long long)c.num_blocks);
    if (c.memory_budget_bytes < 0)
        return fail(KVC_ERR_INVALID_ARG, "%s: memory_budget_bytes must be >= 0, got %lld", fn,
                    (long long)c.memory_budget_bytes);
    if (!in_unit_interval(c.memory_utilization))
        return fail(KVC_ERR_INVALID_ARG, "%s: memory_utilization must be in (0, 1], got %g", fn, c.memory_utilization);
    if (!(c.watermark >= 0.0 && c.watermark < 1.0))
        return fail(KVC_ERR_INVALID_ARG, "%s: watermark must be in [0, 1), got %g", fn, c.watermark);
    if (!(c.gpu_memory_utilization >= 0.0 && c.gpu_memory_utilization <= 1.0))
        return fail(KVC_ERR_INVALID_ARG, "%s: gpu_memory_utilization must be in [0, 1], got %g", fn,
                    c.gpu_memory_utilization);
    if (c.max_seq_len < 0)
        return fail(KVC_ERR_INVALID_ARG, "%s: max_seq_len must be >= 0, got %lld", fn, (long long)c.max_seq_len);
    if (c.prefix_caching != 0 && c.prefix_caching != 1)
        return fail(KVC_ERR_INVALID_ARG, "%s: prefix_caching must be 0 or 1, got %d", fn, c.prefix_caching);
    if (c.backend < KVC_BACKEND_NONE || c.backend > KVC_BACKEND_AUTO)
        return fail(KVC_ERR_INVALID_ARG, "%s: unknown backend %d", fn, c.backend);
    if (c.device < 0) return fail(KVC_ERR_INVALID_ARG, "%s: device must be >= 0, got %d", fn, c.device);
    if (c.event_capacity < 0)
        return fail(KVC_ERR_INVALID_ARG, "%s: event_capacity must be >= 0, got %d", fn, c.event_capacity);
    return KVC_OK;
}

// num_blocks as configured, or derived from the GPU's free memory or the host budget.
kvc_status resolve_num_blocks(const kvc_pool_config &c, int32_t backend, int32_t device, int64_t block_bytes,
                              int64_t *out) {
    const char *fn = "kvc_pool_create";
    int64_t n = c.num_blocks;
    if (n == 0) {
        if (backend == KVC_BACKEND_CUDA && c.gpu_memory_utilization > 0.0) {
            size_t free_bytes = 0, total_bytes = 0;
            kvc_status st = kvc::cuda::mem_get_info(device, &free_bytes, &total_bytes);
            if (st != KVC_OK) return st;
            int64_t budget = free_bytes > size_t(INT64_MAX) ? INT64_MAX : int64_t(free_bytes);
            n = kvc::blocks_in_budget(budget, c.gpu_memory_utilization, block_bytes);
            if (n == 0)
                return fail(KVC_ERR_INVALID_ARG, "%s: %g of the device's %zu free bytes holds no block of %lld bytes",
                            fn, c.gpu_memory_utilization, free_bytes, (long long)block_bytes);
        } else {
            if (c.memory_budget_bytes == 0)
                return fail(KVC_ERR_INVALID_ARG, "%s: no blocks: set num_blocks or memory_budget_bytes", fn);
            n = kvc::blocks_in_budget(c.memory_budget_bytes, c.memory_utilization, block_bytes);
            if (n == 0)
                return fail(KVC_ERR_INVALID_ARG,
                            "%s: no blocks: a budget of %lld bytes x %g holds no block of %lld bytes", fn,
                            (long long)c.memory_budget_bytes, c.memory_utilization, (long long)block_bytes);
        }
    }
    if (n > INT32_MAX)
        return fail(KVC_ERR_INVALID_ARG, "%s: %lld blocks exceed the maximum of %d (block ids are int32)", fn,
                    (long long)n, INT32_MAX);
    *out = n;
    return KVC_OK;
}

struct PoolDeleter {
    void operator()(kvc_pool *p) const {
        kvc::tier_destroy(p);  // finishes tier copies that still read or write the storage
        p->copy_staging.release();
        if (p->storage) kvc::storage_release(p->backend, p->device, p->storage);
        delete p;
    }
};

// kvc_pool_create and kvc_pool_create_hybrid once the shape is checked: c is the configuration
// with its shape resolved, page_bytes the bytes of one block, hy the groups of a hybrid pool.
kvc_status create_pool(const kvc_pool_config &c, int64_t page_bytes, kvc::HybridShape *hy, kvc_pool **out) {
    kvc_status st;
    if ((st = validate_policy(c)) != KVC_OK) return st;
    int32_t backend = 0, device = -1;
    if ((st = resolve_backend(c, &backend, &device)) != KVC_OK) return st;
    int64_t num_blocks = 0;
    if ((st = resolve_num_blocks(c, backend, device, page_bytes, &num_blocks)) != KVC_OK) return st;

    std::unique_ptr<kvc_pool, PoolDeleter> p(new kvc_pool());
    if (!hy) {
        if (!p->layout.init(num_blocks, c.block_size, c.num_layers, c.num_kv_heads, c.head_dim, c.kv_dtype))
            return fail(KVC_ERR_OVERFLOW, "kvc_pool_create: %lld blocks x %lld bytes overflow int64",
                        (long long)num_blocks, (long long)page_bytes);
    } else {
        int64_t total;
        if (kvc::mul_overflows(num_blocks, page_bytes, &total))
            return fail(KVC_ERR_OVERFLOW, "kvc_pool_create_hybrid: %lld pages x %lld bytes overflow int64",
                        (long long)num_blocks, (long long)page_bytes);
        // The pool's layout is the page's: what tiers, swaps and copies move per block. Its other
        // strides are group 0's when it is an attention group (kvc_storage_get_info).
        p->layout = hy->groups[0].layout;
        if (hy->groups[0].kind == KVC_GROUP_SSM) p->layout.init(0, c.block_size, 1, 1, 1, c.kv_dtype);
        kvc::group_layout_resize(&p->layout, num_blocks, page_bytes);
        for (kvc::PoolGroup &G : hy->groups) kvc::group_layout_resize(&G.layout, num_blocks, page_bytes);
        p->groups = std::move(hy->groups);
        p->layer_group = std::move(hy->layer_group);
        p->layer_in_group = std::move(hy->layer_in_group);
        p->hybrid = true;
    }
    int64_t token_slots;
    if (c.prefix_caching && kvc::mul_overflows(num_blocks, c.block_size, &token_slots))
        return fail(KVC_ERR_OVERFLOW, "kvc_pool_create: %lld blocks x block_size %d overflow", (long long)num_blocks,
                    c.block_size);
    p->config = c;
    p->config.num_blocks = num_blocks;
    p->config.backend = backend;
    if (p->config.num_q_heads == 0) p->config.num_q_heads = c.num_kv_heads;
    p->block_size = c.block_size;
    if ((c.block_size & (c.block_size - 1)) == 0) p->block_shift = __builtin_ctz(uint32_t(c.block_size));
    p->num_blocks = int32_t(num_blocks);
    p->watermark_blocks = int64_t(std::floor(c.watermark * double(num_blocks)));
    p->caching = c.prefix_caching != 0;
    p->backend = backend;
    p->device = device;

    p->blocks.init(p->num_blocks);
    if (p->caching) {
        p->cache.init(p->num_blocks, c.block_size);
        p->hasher.init(c.block_size);
    }
    p->events.init(p->caching ? c.event_capacity : 0, c.block_size);
    p->seqs.init(size_t(num_blocks < 1024 ? 1024 : (num_blocks > 65536 ? 65536 : num_blocks)));
    p->copies.init(num_blocks);
    p->hit_scratch.assign(size_t(num_blocks), -1);
    kvc::pool_refresh_walk_hits(p.get());

    if (backend != KVC_BACKEND_NONE) {
        if ((st = kvc::storage_allocate(p->layout, backend, device, &p->storage)) != KVC_OK) return st;
        if (backend == KVC_BACKEND_CUDA && (st = p->copy_staging.init(device, int64_t(num_blocks))) != KVC_OK)
            return st;
    }
    *out = p.release();
    return KVC_OK;
}

}  // namespace

extern "C" {

KVC_API kvc_status kvc_pool_config_default(kvc_pool_config *cfg) {
    if (!cfg) return fail(KVC_ERR_NULL_ARG, "kvc_pool_config_default: cfg is NULL");
    *cfg = kvc_pool_config{};
    cfg->struct_size = sizeof(kvc_pool_config);
    cfg->block_size = 16;
    cfg->num_layers = 1;
    cfg->num_kv_heads = 1;
    cfg->num_q_heads = 0;
    cfg->head_dim = 128;
    cfg->kv_dtype = KVC_DTYPE_F16;
    cfg->num_blocks = 0;
    cfg->memory_budget_bytes = 0;
    cfg->memory_utilization = 0.9;
    cfg->watermark = 0.01;
    cfg->max_seq_len = 0;
    cfg->prefix_caching = 1;
    cfg->backend = KVC_BACKEND_NONE;
    cfg->device = 0;
    cfg->event_capacity = 4096;
    cfg->gpu_memory_utilization = 0.0;
    return KVC_OK;
}

KVC_API kvc_status kvc_bytes_per_block(const kvc_pool_config *cfg, int64_t *out_bytes) {
    KVC_GUARD({
        if (!out_bytes) return fail(KVC_ERR_NULL_ARG, "kvc_bytes_per_block: out_bytes is NULL");
        kvc::KvLayout l;
        kvc_status st = kvc::config_layout(cfg, "kvc_bytes_per_block", &l);
        if (st != KVC_OK) return st;
        *out_bytes = l.block_stride;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_blocks_for_budget(const kvc_pool_config *cfg, int64_t budget_bytes, double utilization,
                                         int64_t *out_blocks) {
    KVC_GUARD({
        if (!out_blocks) return fail(KVC_ERR_NULL_ARG, "kvc_blocks_for_budget: out_blocks is NULL");
        kvc::KvLayout l;
        kvc_status st = kvc::config_layout(cfg, "kvc_blocks_for_budget", &l);
        if (st != KVC_OK) return st;
        if (budget_bytes < 0)
            return fail(KVC_ERR_INVALID_ARG, "kvc_blocks_for_budget: budget_bytes must be >= 0, got %lld",
                        (long long)budget_bytes);
        if (!in_unit_interval(utilization))
            return fail(KVC_ERR_INVALID_ARG, "kvc_blocks_for_budget: utilization must be in (0, 1], got %g", utilization);
        *out_blocks = kvc::blocks_in_budget(budget_bytes, utilization, l.block_stride);
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_pool_create(const kvc_pool_config *cfg, kvc_pool **out) {
    KVC_GUARD({
        if (!out) return fail(KVC_ERR_NULL_ARG, "kvc_pool_create: out is NULL");
        kvc::KvLayout shape;
        kvc_status st = kvc::config_layout(cfg, "kvc_pool_create", &shape);
        if (st != KVC_OK) return st;
        return create_pool(*cfg, shape.block_stride, nullptr, out);
    })
}

KVC_API kvc_status kvc_pool_create_hybrid(const kvc_pool_config *cfg, const kvc_group_config *groups, int32_t num_groups,
                                          const int32_t *layer_to_group, int32_t num_layers, kvc_pool **out) {
    KVC_GUARD({
        if (!out) return fail(KVC_ERR_NULL_ARG, "kvc_pool_create_hybrid: out is NULL");
        kvc::HybridShape h;
        kvc_status st = kvc::hybrid_shape(cfg, groups, num_groups, layer_to_group, num_layers, &h);
        if (st != KVC_OK) return st;
        const kvc_pool_config c = h.config;
        return create_pool(c, h.page_bytes, &h, out);
    })
}

KVC_API kvc_status kvc_group_config_default(kvc_group_config *group) {
    if (!group) return fail(KVC_ERR_NULL_ARG, "kvc_group_config_default: group is NULL");
    *group = kvc_group_config{};
    group->struct_size = sizeof(kvc_group_config);
    group->kind = KVC_GROUP_FULL;
    group->num_layers = 1;
    group->num_kv_heads = 1;
    group->head_dim = 128;
    return KVC_OK;
}

KVC_API kvc_status kvc_pool_get_group_info(kvc_pool *pool, int32_t group, kvc_group_info *out) {
    const char *fn = "kvc_pool_get_group_info";
    if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
    if (!out) return fail(KVC_ERR_NULL_ARG, "%s: out is NULL", fn);
    if (kvc_status st =
            kvc::check_struct_size(out->struct_size, {sizeof(kvc_group_info)}, kvc::StructUse::kFill, fn, "out");
        st != KVC_OK)
        return st;
    const int32_t n = pool->hybrid ? int32_t(pool->groups.size()) : 1;
    if (group < 0 || group >= n)
        return fail(KVC_ERR_INVALID_ARG, "%s: group %d is not a group of this pool (it has %d)", fn, group, n);
    kvc_group_info i{};
    i.struct_size = out->struct_size;
    i.num_groups = n;
    i.page_bytes = pool->layout.block_stride;
    if (!pool->hybrid) {                             // the one group of a plain pool, as its layout says
        std::lock_guard<kvc::PoolMutex> lock(pool->mu);  // the window may change while no sequence exists
        i.kind = pool->sliding_window > 0 ? KVC_GROUP_SLIDING : KVC_GROUP_FULL;
        i.sliding_window = pool->sliding_window;
        i.num_layers = pool->layout.num_layers;
        i.num_kv_heads = pool->layout.num_kv_heads;
        i.head_dim = pool->layout.head_dim;
        i.group_bytes = pool->layout.block_stride;
        i.layer_stride = pool->layout.layer_stride;
    } else {
        const kvc::PoolGroup &G = pool->groups[size_t(group)];
        i.kind = G.kind;
        i.sliding_window = G.config_window;
        i.num_layers = G.layout.num_layers;
        i.num_kv_heads = G.layout.num_kv_heads;
        i.head_dim = G.layout.head_dim;
        i.state_bytes = G.state_bytes;
        i.group_bytes = G.group_bytes;
        i.layer_stride = G.layout.layer_stride;
    }
    *out = i;
    return KVC_OK;
}

KVC_API kvc_status kvc_pool_layer_group(kvc_pool *pool, int32_t layer, int32_t *out_group,
                                        int32_t *out_layer_in_group) {
    const char *fn = "kvc_pool_layer_group";
    if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
    if (!out_group) return fail(KVC_ERR_NULL_ARG, "%s: out_group is NULL", fn);
    const int32_t layers = pool->config.num_layers;
    if (layer < 0 || layer >= layers)
        return fail(KVC_ERR_INVALID_ARG, "%s: layer %d is outside [0, %d)", fn, layer, layers);
    *out_group = pool->hybrid ? pool->layer_group[size_t(layer)] : 0;
    if (out_layer_in_group) *out_layer_in_group = pool->hybrid ? pool->layer_in_group[size_t(layer)] : layer;
    return KVC_OK;
}

KVC_API kvc_status kvc_pool_destroy(kvc_pool *pool) {
    if (pool) PoolDeleter()(pool);
    return KVC_OK;
}

KVC_API kvc_status kvc_pool_get_config(const kvc_pool *pool, kvc_pool_config *out) {
    if (!pool) return fail(KVC_ERR_NULL_ARG, "kvc_pool_get_config: pool is NULL");
    if (!out) return fail(KVC_ERR_NULL_ARG, "kvc_pool_get_config: out is NULL");
    *out = pool->config;  // immutable after creation: no lock
    return KVC_OK;
}

KVC_API kvc_status kvc_pool_set_sliding_window(kvc_pool *pool, int32_t window) {
    KVC_GUARD({
        const char *fn = "kvc_pool_set_sliding_window";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (pool->hybrid)
            return fail(KVC_ERR_UNSUPPORTED, "%s: a hybrid pool's windows are its groups' (kvc_group_config)", fn);
        if (window < 0) return fail(KVC_ERR_INVALID_ARG, "%s: window must be >= 0 (0 = off), got %d", fn, window);
        std::lock_guard<kvc::PoolMutex> lock(pool->mu);
        // A sequence that lived under another window may already miss blocks a wider one reads.
        if (pool->seqs.size() > 0)
            return fail(KVC_ERR_STATE, "%s: the pool has %zu sequences; set the window before the first kvc_alloc",
                        fn, pool->seqs.size());
        pool->sliding_window = window;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_pool_get_sliding_window(kvc_pool *pool, int32_t *out_window) {
    KVC_GUARD({
        if (!pool) return fail(KVC_ERR_NULL_ARG, "kvc_pool_get_sliding_window: pool is NULL");
        if (!out_window) return fail(KVC_ERR_NULL_ARG, "kvc_pool_get_sliding_window: out_window is NULL");
        std::lock_guard<kvc::PoolMutex> lock(pool->mu);
        *out_window = pool->sliding_window;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_pool_check(kvc_pool *pool) {
    KVC_GUARD({
        if (!pool) return fail(KVC_ERR_NULL_ARG, "kvc_pool_check: pool is NULL");
        std::lock_guard<kvc::PoolMutex> lock(pool->mu);
        return kvc::pool_check_invariants(pool);
    })
}

KVC_API kvc_status kvc_pool_stats(kvc_pool *pool, kvc_stats *out) {
    if (!pool) return fail(KVC_ERR_NULL_ARG, "kvc_pool_stats: pool is NULL");
    if (!out) return fail(KVC_ERR_NULL_ARG, "kvc_pool_stats: out is NULL");
    // Callers built before cached_blocks_total was appended pass the shorter size and get the fields
    // they know.
    const size_t size_v1 = offsetof(kvc_stats, cached_blocks_total);
    if (kvc_status st = kvc::check_struct_size(out->struct_size, {size_v1, sizeof(kvc_stats)}, kvc::StructUse::kFill,
                                               "kvc_pool_stats", "out");
        st != KVC_OK)
        return st;
    kvc_stats s{};
    s.struct_size = out->struct_size;
    {
        std::lock_guard<kvc::PoolMutex> lock(pool->mu);
        const kvc::BlockPool &b = pool->blocks;
        const kvc::PoolCounters &c = pool->counters;
        s.total_blocks = pool->num_blocks;
        s.free_blocks = b.num_free();
        s.used_blocks = b.num_used();
        s.cached_free_blocks = b.num_cached_free();
        s.cached_blocks_total = pool->cache.size();
        s.pinned_blocks = b.num_pinned();
        s.num_seqs = int64_t(pool->seqs.size());
        s.allocs = c.allocs;
        s.frees = c.frees;
        s.forks = c.forks;
        s.appends = c.appends;
        s.blocks_allocated = c.blocks_allocated;
        s.blocks_freed = c.blocks_freed;
        s.cow_copies = c.cow_copies;
        s.pending_copies = pool->copies.size();
        s.prefix_query_tokens = c.prefix_query_tokens;
        s.prefix_hit_tokens = c.prefix_hit_tokens;
        s.evictions = c.evictions;
        s.verify_misses = c.verify_misses;
        s.events_dropped = pool->events.dropped();
    }
    s.utilization = s.total_blocks ? double(s.used_blocks) / double(s.total_blocks) : 0.0;
    s.prefix_hit_rate = s.prefix_query_tokens ? double(s.prefix_hit_tokens) / double(s.prefix_query_tokens) : 0.0;
    // The fields the caller's struct has room for; a larger caller struct keeps its tail.
    std::memcpy(out, &s, std::min(size_t(out->struct_size), sizeof s));
    return KVC_OK;
}

}  // extern "C"
