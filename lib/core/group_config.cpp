#include "core/group_config.hpp"

#include "core/pool_config.hpp"
#include "error.hpp"
#include "struct_size.hpp"

namespace kvc {

void group_layout_resize(KvLayout *l, int64_t num_blocks, int64_t page_bytes) {
    l->num_blocks = num_blocks;
    l->block_stride = page_bytes;
    l->total_bytes = num_blocks * page_bytes;  // checked by the caller (the pool's storage size)
}

kvc_status hybrid_shape(const kvc_pool_config *cfg, const kvc_group_config *groups, int32_t num_groups,
                        const int32_t *layer_to_group, int32_t num_layers, HybridShape *out) {
    const char *fn = "kvc_pool_create_hybrid";
    if (!cfg) return fail(KVC_ERR_NULL_ARG, "%s: cfg is NULL", fn);
    if (!groups) return fail(KVC_ERR_NULL_ARG, "%s: groups is NULL", fn);
    if (!layer_to_group) return fail(KVC_ERR_NULL_ARG, "%s: layer_to_group is NULL", fn);
    if (num_groups < 1 || num_groups > KVC_MAX_GROUPS)
        return fail(KVC_ERR_INVALID_ARG, "%s: num_groups must be in [1, %d], got %d", fn, KVC_MAX_GROUPS, num_groups);
    if (kvc_status st = check_struct_size(cfg->struct_size, {sizeof(kvc_pool_config)}, StructUse::kRead, fn, "cfg");
        st != KVC_OK)
        return st;
    const int32_t elem = dtype_bytes(cfg->kv_dtype);
    if (elem == 0) return fail(KVC_ERR_INVALID_ARG, "%s: unknown kv_dtype %d", fn, cfg->kv_dtype);
    if (cfg->block_size < 1)
        return fail(KVC_ERR_INVALID_ARG, "%s: block_size must be >= 1, got %d", fn, cfg->block_size);

    HybridShape h;
    h.groups.resize(size_t(num_groups));
    int64_t layers_sum = 0, page = 0;
    int32_t max_heads = 0, first_attention = -1;
    for (int32_t g = 0; g < num_groups; ++g) {
        const kvc_group_config &c = groups[g];
        if (kvc_status st =
                check_struct_size(c.struct_size, {sizeof(kvc_group_config)}, StructUse::kRead, fn, "groups[]");
            st != KVC_OK)
            return st;
        PoolGroup &G = h.groups[size_t(g)];
        G.kind = c.kind;
        G.config_window = c.sliding_window;
        if (c.kind != KVC_GROUP_FULL && c.kind != KVC_GROUP_SLIDING && c.kind != KVC_GROUP_SSM)
            return fail(KVC_ERR_INVALID_ARG, "%s: group %d has unknown kind %d", fn, g, c.kind);
        if (c.num_layers < 1)
            return fail(KVC_ERR_INVALID_ARG, "%s: group %d has %d layers (>= 1 needed)", fn, g, c.num_layers);
        layers_sum += c.num_layers;
        if (c.kind == KVC_GROUP_SLIDING && c.sliding_window < 1)
            return fail(KVC_ERR_INVALID_ARG, "%s: group %d is SLIDING but its sliding_window is %d (>= 1 needed)", fn,
                        g, c.sliding_window);
        if (c.kind != KVC_GROUP_SLIDING && c.sliding_window != 0)
            return fail(KVC_ERR_INVALID_ARG, "%s: group %d is not SLIDING but has sliding_window %d (must be 0)", fn, g,
                        c.sliding_window);
        if (c.kind == KVC_GROUP_SSM) {
            if (c.state_bytes < 1)
                return fail(KVC_ERR_INVALID_ARG, "%s: group %d is SSM but its state_bytes is %lld (>= 1 needed)", fn, g,
                            (long long)c.state_bytes);
            G.window = 1;
            G.state_bytes = c.state_bytes;
            if (__builtin_mul_overflow(c.state_bytes, int64_t(c.num_layers), &G.group_bytes))
                return fail(KVC_ERR_OVERFLOW, "%s: group %d's state (%lld bytes x %d layers) overflows", fn, g,
                            (long long)c.state_bytes, c.num_layers);
            KvLayout &l = G.layout;  // one "row" of state per layer
            l.block_size = cfg->block_size;
            l.num_layers = c.num_layers;
            l.num_kv_heads = 0;
            l.head_dim = 0;
            l.dtype = cfg->kv_dtype;
            l.elem_bytes = elem;
            l.layer_stride = c.state_bytes;
        } else {
            if (c.state_bytes != 0)
                return fail(KVC_ERR_INVALID_ARG,
                            "%s: group %d is an attention group but has state_bytes %lld (must be 0)", fn, g,
                            (long long)c.state_bytes);
            if (c.num_kv_heads < 1 || c.head_dim < 1)
                return fail(KVC_ERR_INVALID_ARG, "%s: group %d needs num_kv_heads and head_dim >= 1, got %d and %d", fn,
                            g, c.num_kv_heads, c.head_dim);
            G.window = c.kind == KVC_GROUP_SLIDING ? c.sliding_window : 0;
            if (!G.layout.init(0, cfg->block_size, c.num_layers, c.num_kv_heads, c.head_dim, cfg->kv_dtype))
                return fail(KVC_ERR_OVERFLOW,
                            "%s: group %d's page (block_size %d, %d layers, %d heads, head_dim %d) "
                            "overflows",
                            fn, g, cfg->block_size, c.num_layers, c.num_kv_heads, c.head_dim);
            G.group_bytes = G.layout.block_stride;
            if (c.num_kv_heads > max_heads) max_heads = c.num_kv_heads;
            if (first_attention < 0) first_attention = g;
        }
        if (G.group_bytes > page) page = G.group_bytes;
    }
    if (num_layers != layers_sum)
        return fail(KVC_ERR_INVALID_ARG, "%s: num_layers is %d but the groups have %lld layers", fn, num_layers,
                    (long long)layers_sum);
    if (page > INT64_MAX - kPageAlign) return fail(KVC_ERR_OVERFLOW, "%s: page size overflows", fn);
    h.page_bytes = (page + kPageAlign - 1) / kPageAlign * kPageAlign;
    // The layer map: every layer in a group, each group with as many layers as it declares.
    h.layer_group.assign(layer_to_group, layer_to_group + num_layers);
    h.layer_in_group.resize(size_t(num_layers));
    std::vector<int32_t> seen(size_t(num_groups), 0);
    for (int32_t l = 0; l < num_layers; ++l) {
        const int32_t g = layer_to_group[l];
        if (g < 0 || g >= num_groups)
            return fail(KVC_ERR_INVALID_ARG, "%s: layer %d names group %d, which does not exist (%d groups)", fn, l, g,
                        num_groups);
        h.layer_in_group[size_t(l)] = seen[size_t(g)]++;
    }
    for (int32_t g = 0; g < num_groups; ++g)
        if (seen[size_t(g)] != groups[g].num_layers)
            return fail(KVC_ERR_INVALID_ARG, "%s: group %d declares %d layers but layer_to_group names %d", fn, g,
                        groups[g].num_layers, seen[size_t(g)]);
    // The resolved configuration: the model's layers, the first attention group's heads.
    h.config = *cfg;
    h.config.num_layers = num_layers;
    h.config.num_kv_heads = first_attention >= 0 ? groups[first_attention].num_kv_heads : 1;
    h.config.head_dim = first_attention >= 0 ? groups[first_attention].head_dim : 1;
    if (cfg->num_q_heads < 0)
        return fail(KVC_ERR_INVALID_ARG, "%s: num_q_heads must be >= 0, got %d", fn, cfg->num_q_heads);
    h.config.num_q_heads = cfg->num_q_heads > 0 ? cfg->num_q_heads : (max_heads > 0 ? max_heads : 1);
    for (int32_t g = 0; g < num_groups; ++g)
        if (groups[g].kind != KVC_GROUP_SSM && h.config.num_q_heads % groups[g].num_kv_heads != 0)
            return fail(KVC_ERR_INVALID_ARG, "%s: num_q_heads %d is not a multiple of group %d's num_kv_heads %d", fn,
                        h.config.num_q_heads, g, groups[g].num_kv_heads);
    *out = std::move(h);
    return KVC_OK;
}

}  // namespace kvc
