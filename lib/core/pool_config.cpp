#include "core/pool_config.hpp"

#include "error.hpp"
#include "struct_size.hpp"

namespace kvc {

kvc_status config_layout(const kvc_pool_config *cfg, const char *fn, KvLayout *out) {
    if (!cfg) return fail(KVC_ERR_NULL_ARG, "%s: cfg is NULL", fn);
    if (kvc_status st = check_struct_size(cfg->struct_size, {sizeof(kvc_pool_config)}, StructUse::kRead, fn, "cfg");
        st != KVC_OK)
        return st;  // initialize with kvc_pool_config_default
    if (cfg->block_size < 1)
        return fail(KVC_ERR_INVALID_ARG, "%s: block_size must be >= 1, got %d", fn, cfg->block_size);
    if (cfg->num_layers < 1)
        return fail(KVC_ERR_INVALID_ARG, "%s: num_layers must be >= 1, got %d", fn, cfg->num_layers);
    if (cfg->num_kv_heads < 1)
        return fail(KVC_ERR_INVALID_ARG, "%s: num_kv_heads must be >= 1, got %d", fn, cfg->num_kv_heads);
    if (cfg->head_dim < 1) return fail(KVC_ERR_INVALID_ARG, "%s: head_dim must be >= 1, got %d", fn, cfg->head_dim);
    if (dtype_bytes(cfg->kv_dtype) == 0) return fail(KVC_ERR_INVALID_ARG, "%s: unknown kv_dtype %d", fn, cfg->kv_dtype);
    KvLayout l;
    if (!l.init(0, cfg->block_size, cfg->num_layers, cfg->num_kv_heads, cfg->head_dim, cfg->kv_dtype))
        return fail(KVC_ERR_OVERFLOW,
                    "%s: bytes per block overflow int64 (block_size %d, layers %d, "
                    "kv heads %d, head_dim %d)",
                    fn, cfg->block_size, cfg->num_layers, cfg->num_kv_heads, cfg->head_dim);
    *out = l;
    return KVC_OK;
}

int64_t blocks_in_budget(int64_t budget, double utilization, int64_t bytes_per_block) {
    // In double like the reference formula (so 1000 x 0.7 / 100 gives 7, not 6.999...), capped by
    // the exact integer bound budget / bytes_per_block (no out-of-range conversion near INT64_MAX).
    int64_t exact_max = budget / bytes_per_block;
    double blocks = double(budget) * utilization / double(bytes_per_block);
    if (!(blocks < double(exact_max))) return exact_max;
    return int64_t(blocks);
}

}  // namespace kvc
