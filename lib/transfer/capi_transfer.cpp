// C API: KV transfer between pools (kvc_xfer_*). Plain argument checks here, the work in
// agent_*.cpp; no exception crosses the boundary.
#include <cstddef>
#include <cstring>

#include "capi/args.hpp"
#include "core/pool.hpp"
#include "error.hpp"
#include "struct_size.hpp"
#include "transfer/agent.hpp"
#include "transfer/ucx_api.hpp"

using kvc::fail;

extern "C" {

KVC_API kvc_status kvc_xfer_config_default(kvc_xfer_config *cfg) {
    if (!cfg) return fail(KVC_ERR_NULL_ARG, "kvc_xfer_config_default: cfg is NULL");
    std::memset(cfg, 0, sizeof *cfg);
    cfg->struct_size = sizeof *cfg;
    cfg->lease_ms = 30000;
    cfg->timeout_ms = 30000;
    return KVC_OK;
}

KVC_API kvc_status kvc_xfer_available(int32_t *out_available) {
    KVC_GUARD({
        if (!out_available) return fail(KVC_ERR_NULL_ARG, "kvc_xfer_available: out_available is NULL");
        const kvc::xfer::UcxApi *u = nullptr;
        *out_available = kvc::xfer::load_ucx(&u, "kvc_xfer_available") == KVC_OK ? 1 : 0;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_xfer_agent_create(kvc_pool *pool, const kvc_xfer_config *cfg, kvc_xfer_agent **out) {
    KVC_GUARD({
        const char *fn = "kvc_xfer_agent_create";
        if (!pool) return fail(KVC_ERR_NULL_ARG, "%s: pool is NULL", fn);
        if (!out) return fail(KVC_ERR_NULL_ARG, "%s: out is NULL", fn);
        if (pool->hybrid)
            return fail(KVC_ERR_UNSUPPORTED, "%s: not available on a hybrid pool (kvc_pool_create_hybrid) yet: the "
                        "descriptor carries one block table", fn);
        kvc_xfer_config c;
        kvc_xfer_config_default(&c);
        if (cfg) {
            if (kvc_status st = kvc::check_struct_size(cfg->struct_size, {sizeof(kvc_xfer_config)},
                                                       kvc::StructUse::kRead, fn, "cfg");
                st != KVC_OK)
                return st;
            c = *cfg;
        }
        if (c.model_identity && std::strlen(c.model_identity) > KVC_MAX_XFER_IDENTITY_LEN)
            return fail(KVC_ERR_INVALID_ARG, "%s: model_identity longer than %d bytes", fn, KVC_MAX_XFER_IDENTITY_LEN);
        if (c.lease_ms < 1 || c.timeout_ms < 1)
            return fail(KVC_ERR_INVALID_ARG, "%s: lease_ms (%lld) and timeout_ms (%lld) must be >= 1", fn,
                        (long long)c.lease_ms, (long long)c.timeout_ms);
        return kvc::xfer::agent_create(pool, c, out, fn);
    })
}

KVC_API kvc_status kvc_xfer_agent_destroy(kvc_xfer_agent *agent) {
    if (!agent) return KVC_OK;
    try {
        kvc::xfer::agent_destroy(agent);
    } catch (...) {}
    return KVC_OK;
}

KVC_API kvc_status kvc_xfer_export_prompt(kvc_xfer_agent *agent, const int32_t *tokens, int64_t num_tokens,
                                          const kvc_keys *keys, int64_t lease_ms, uint64_t *out_export,
                                          int64_t *out_tokens) {
    KVC_GUARD({
        const char *fn = "kvc_xfer_export_prompt";
        if (!agent) return fail(KVC_ERR_NULL_ARG, "%s: agent is NULL", fn);
        if (!tokens) return fail(KVC_ERR_NULL_ARG, "%s: tokens is NULL", fn);
        if (!out_export) return fail(KVC_ERR_NULL_ARG, "%s: out_export is NULL", fn);
        if (num_tokens < 1) return fail(KVC_ERR_INVALID_ARG, "%s: num_tokens must be >= 1, got %lld", fn, (long long)num_tokens);
        if (lease_ms < 0) return fail(KVC_ERR_INVALID_ARG, "%s: lease_ms must be >= 0, got %lld", fn, (long long)lease_ms);
        return kvc::xfer::agent_export_prompt(agent, tokens, num_tokens, kvc::keys_or_empty(keys), lease_ms, out_export,
                                              out_tokens, fn);
    })
}

KVC_API kvc_status kvc_xfer_export_seq(kvc_xfer_agent *agent, uint64_t seq_id, int64_t lease_ms, uint64_t *out_export,
                                       int64_t *out_tokens) {
    KVC_GUARD({
        const char *fn = "kvc_xfer_export_seq";
        if (!agent) return fail(KVC_ERR_NULL_ARG, "%s: agent is NULL", fn);
        if (!out_export) return fail(KVC_ERR_NULL_ARG, "%s: out_export is NULL", fn);
        if (lease_ms < 0) return fail(KVC_ERR_INVALID_ARG, "%s: lease_ms must be >= 0, got %lld", fn, (long long)lease_ms);
        return kvc::xfer::agent_export_seq(agent, seq_id, lease_ms, out_export, out_tokens, fn);
    })
}

KVC_API kvc_status kvc_xfer_export_descriptor(kvc_xfer_agent *agent, uint64_t export_id, uint8_t *buf, int64_t cap,
                                              int64_t *out_len) {
    KVC_GUARD({
        const char *fn = "kvc_xfer_export_descriptor";
        if (!agent) return fail(KVC_ERR_NULL_ARG, "%s: agent is NULL", fn);
        if (!out_len) return fail(KVC_ERR_NULL_ARG, "%s: out_len is NULL", fn);
        if (cap < 0) return fail(KVC_ERR_INVALID_ARG, "%s: cap must be >= 0, got %lld", fn, (long long)cap);
        if (!buf && cap > 0) return fail(KVC_ERR_NULL_ARG, "%s: buf is NULL with cap %lld", fn, (long long)cap);
        return kvc::xfer::agent_export_descriptor(agent, export_id, buf, cap, out_len, fn);
    })
}

KVC_API kvc_status kvc_xfer_export_release(kvc_xfer_agent *agent, uint64_t export_id) {
    KVC_GUARD({
        if (!agent) return fail(KVC_ERR_NULL_ARG, "kvc_xfer_export_release: agent is NULL");
        return kvc::xfer::agent_export_release(agent, export_id, "kvc_xfer_export_release");
    })
}

KVC_API kvc_status kvc_xfer_import(kvc_xfer_agent *agent, const uint8_t *desc, int64_t len, const kvc_keys *keys,
                                   uint64_t *out_op) {
    KVC_GUARD({
        const char *fn = "kvc_xfer_import";
        if (!agent) return fail(KVC_ERR_NULL_ARG, "%s: agent is NULL", fn);
        if (!desc) return fail(KVC_ERR_NULL_ARG, "%s: desc is NULL", fn);
        if (!out_op) return fail(KVC_ERR_NULL_ARG, "%s: out_op is NULL", fn);
        if (len < 1) return fail(KVC_ERR_INVALID_ARG, "%s: len must be >= 1, got %lld", fn, (long long)len);
        return kvc::xfer::agent_import(agent, desc, len, kvc::keys_or_empty(keys), out_op, fn);
    })
}

KVC_API kvc_status kvc_xfer_op_query(kvc_xfer_agent *agent, uint64_t op, int32_t *out_done) {
    KVC_GUARD({
        if (!agent) return fail(KVC_ERR_NULL_ARG, "kvc_xfer_op_query: agent is NULL");
        if (!out_done) return fail(KVC_ERR_NULL_ARG, "kvc_xfer_op_query: out_done is NULL");
        return kvc::xfer::agent_op_query(agent, op, out_done, "kvc_xfer_op_query");
    })
}

KVC_API kvc_status kvc_xfer_op_wait(kvc_xfer_agent *agent, uint64_t op, int64_t timeout_ms,
                                    kvc_xfer_import_result *out) {
    KVC_GUARD({
        if (!agent) return fail(KVC_ERR_NULL_ARG, "kvc_xfer_op_wait: agent is NULL");
        if (out)
            if (kvc_status st = kvc::check_struct_size(out->struct_size, {sizeof(kvc_xfer_import_result)},
                                                       kvc::StructUse::kFill, "kvc_xfer_op_wait", "out");
                st != KVC_OK)
                return st;
        return kvc::xfer::agent_op_wait(agent, op, timeout_ms, out, "kvc_xfer_op_wait");
    })
}

KVC_API kvc_status kvc_xfer_get_stats(kvc_xfer_agent *agent, kvc_xfer_stats *out) {
    KVC_GUARD({
        if (!agent) return fail(KVC_ERR_NULL_ARG, "kvc_xfer_get_stats: agent is NULL");
        if (!out) return fail(KVC_ERR_NULL_ARG, "kvc_xfer_get_stats: out is NULL");
        // Released sizes: without failures_device (the first release), and now.
        if (kvc_status st = kvc::check_struct_size(out->struct_size,
                                                   {offsetof(kvc_xfer_stats, failures_device), sizeof(kvc_xfer_stats)},
                                                   kvc::StructUse::kFill, "kvc_xfer_get_stats", "out");
            st != KVC_OK)
            return st;
        return kvc::xfer::agent_stats(agent, out);
    })
}

}  // extern "C"
