// The transfer agent in a build without the UCX headers: creating one reports that UCX is missing
// (KVC_ERR_UNSUPPORTED, from load_ucx), so none of the other functions can be reached with one.
#include "transfer/agent.hpp"

#include "error.hpp"
#include "transfer/ucx_api.hpp"

#ifndef KVC_HAVE_UCX

struct kvc_xfer_agent {
    int unused;
};

namespace kvc::xfer {
kvc_status agent_create(kvc_pool *, const kvc_xfer_config &, kvc_xfer_agent **, const char *fn) {
    const UcxApi *u = nullptr;
    return load_ucx(&u, fn);
}
void agent_destroy(kvc_xfer_agent *) {}
static kvc_status never(const char *fn) {
    return fail(KVC_ERR_STATE, "%s: no transfer agent can exist in this build", fn);
}
kvc_status agent_export_prompt(kvc_xfer_agent *, const int32_t *, int64_t, const KeySet &, int64_t, uint64_t *,
                               int64_t *, const char *fn) {
    return never(fn);
}
kvc_status agent_export_seq(kvc_xfer_agent *, uint64_t, int64_t, uint64_t *, int64_t *, const char *fn) {
    return never(fn);
}
kvc_status agent_export_descriptor(kvc_xfer_agent *, uint64_t, uint8_t *, int64_t, int64_t *, const char *fn) {
    return never(fn);
}
kvc_status agent_export_release(kvc_xfer_agent *, uint64_t, const char *fn) { return never(fn); }
kvc_status agent_import(kvc_xfer_agent *, const uint8_t *, int64_t, const KeySet &, uint64_t *, const char *fn) {
    return never(fn);
}
kvc_status agent_op_query(kvc_xfer_agent *, uint64_t, int32_t *, const char *fn) { return never(fn); }
kvc_status agent_op_wait(kvc_xfer_agent *, uint64_t, int64_t, kvc_xfer_import_result *, const char *fn) {
    return never(fn);
}
kvc_status agent_stats(kvc_xfer_agent *, kvc_xfer_stats *) { return never("kvc_xfer_get_stats"); }
}  // namespace kvc::xfer
#endif  // KVC_HAVE_UCX
