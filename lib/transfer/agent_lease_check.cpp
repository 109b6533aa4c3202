// The lease check (protocol step 3): when an import's gets have completed, the importer asks the
// exporter with an active message whether the export is still held; the exporter answers from its
// progress thread. Handlers run inside ucp_worker_progress, under a->mu.
#include "transfer/agent.hpp"

#ifdef KVC_HAVE_UCX

#include <cstring>
#include <new>

#include "transfer/agent_state.hpp"

namespace kvc::xfer::detail {
namespace {

// The send callbacks free their requests and the copied header.
struct SendCtx {
    const UcxApi *u;
    alignas(8) unsigned char hdr[64];
};
void send_done_cb(void *request, ucs_status_t, void *user) {
    SendCtx *c = static_cast<SendCtx *>(user);
    c->u->ucp_request_free(request);
    delete c;
}

}  // namespace

ucs_status_t am_check_cb(void *arg, const void *header, size_t header_length, void *, size_t,
                         const ucp_am_recv_param_t *param) {
    kvc_xfer_agent *a = static_cast<kvc_xfer_agent *>(arg);
    if (header_length != sizeof(CheckMsg) || !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)) return UCS_OK;
    CheckMsg m;
    std::memcpy(&m, header, sizeof m);
    bool ok = false;
    if (m.exporter_nonce == a->nonce) {
        auto it = a->exports.find(m.export_id);
        ok = it != a->exports.end() && it->second.expires_ms > now_ms();
    }
    ++a->stats.lease_checks;
    try {  // nothing may throw into UCX: without memory the check goes unanswered (the importer times out)
        a->replies.push_back(PendingReply{param->reply_ep, ReplyMsg{m.op_id, m.importer_nonce, ok ? 1u : 0u, 0}});
    } catch (...) {
    }
    return UCS_OK;
}

ucs_status_t am_reply_cb(void *arg, const void *header, size_t header_length, void *, size_t,
                         const ucp_am_recv_param_t *) {
    kvc_xfer_agent *a = static_cast<kvc_xfer_agent *>(arg);
    if (header_length != sizeof(ReplyMsg)) return UCS_OK;
    ReplyMsg m;
    std::memcpy(&m, header, sizeof m);
    if (m.importer_nonce != a->nonce) return UCS_OK;
    auto it = a->ops.find(m.op_id);
    if (it != a->ops.end() && it->second->state == OpState::kChecking && it->second->check < 0)
        it->second->check = m.ok ? 1 : 0;
    return UCS_OK;
}

// Sends an active message; the header is copied (it lives until the send completes), the data
// must stay valid that long.
ucs_status_t am_send(kvc_xfer_agent *a, ucp_ep_h ep, unsigned id, const void *hdr, size_t len, unsigned flags,
                     const void *src, size_t src_len) {
    if (len > sizeof(SendCtx::hdr)) return UCS_ERR_INVALID_PARAM;
    SendCtx *c = new (std::nothrow) SendCtx{a->u, {}};  // no throw: called where nothing may throw
    if (!c) return UCS_ERR_NO_MEMORY;
    std::memcpy(c->hdr, hdr, len);
    ucp_request_param_t prm{};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    prm.cb.send = send_done_cb;
    prm.user_data = c;
    prm.flags = flags;
    ucs_status_ptr_t r = a->u->ucp_am_send_nbx(ep, id, c->hdr, len, src, src_len, &prm);
    if (r == nullptr || UCS_PTR_IS_ERR(r)) {
        delete c;
        return r == nullptr ? UCS_OK : UCS_PTR_STATUS(r);
    }
    return UCS_INPROGRESS;
}

}  // namespace kvc::xfer::detail

#endif  // KVC_HAVE_UCX
