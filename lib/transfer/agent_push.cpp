// The push data path (lib/transfer/README.md, "Data paths"): the importer asks for each run of
// blocks with an active message (kAmPull); the exporter checks that the run is blocks of an export
// it still holds and answers with the bytes as the data of an active message (kAmData), or with a
// refusal; the importer receives the data straight into the run's blocks. UCX sends large data by
// rendezvous: over shared memory the importer then reads it with one process_vm_readv (the cma
// transport), where a ucp_get of ordinary memory is emulated with two copies. Handlers run inside
// ucp_worker_progress, under a->mu.
#include "transfer/agent.hpp"

#ifdef KVC_HAVE_UCX

#include <algorithm>
#include <cstring>

#include "transfer/agent_state.hpp"

namespace kvc::xfer::detail {

// Exporter: a run asked for. Answered from progress_round (a->pushes), not from inside the callback.
ucs_status_t am_pull_cb(void *arg, const void *header, size_t header_length, void *, size_t,
                        const ucp_am_recv_param_t *param) {
    kvc_xfer_agent *a = static_cast<kvc_xfer_agent *>(arg);
    if (header_length != sizeof(PullMsg) || !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)) return UCS_OK;
    PullMsg m;
    std::memcpy(&m, header, sizeof m);
    const char *src = nullptr;
    if (m.exporter_nonce == a->nonce && m.len > 0 && m.len % uint64_t(a->block_bytes) == 0) {
        auto it = a->exports.find(m.export_id);
        if (it != a->exports.end() && it->second.expires_ms > now_ms()) {
            // Every block of the run must be one of this export's: a descriptor grants its own
            // blocks, nothing else of the storage.
            const std::vector<uint64_t> &ad = it->second.addrs;
            bool all = true;
            for (uint64_t off = 0; all && off < m.len; off += uint64_t(a->block_bytes))
                all = std::binary_search(ad.begin(), ad.end(), m.addr + off);
            if (all) src = reinterpret_cast<const char *>(uintptr_t(m.addr));
        }
    }
    try {  // nothing may throw into UCX: without memory the run goes unanswered (the importer times out)
        a->pushes.push_back(PendingData{param->reply_ep,
                                        DataMsg{m.op_id, m.importer_nonce, m.run, src ? 1u : 0u, 0}, src,
                                        src ? size_t(m.len) : 0});
    } catch (...) {
    }
    return UCS_OK;
}

// Importer: a run's answer. Its bytes land only in a live, not failing op's reserved blocks, once
// per run; anything else is dropped (returning UCS_OK without receiving a rendezvous discards it).
ucs_status_t am_data_cb(void *arg, const void *header, size_t header_length, void *data, size_t length,
                        const ucp_am_recv_param_t *param) {
    kvc_xfer_agent *a = static_cast<kvc_xfer_agent *>(arg);
    if (header_length != sizeof(DataMsg)) return UCS_OK;
    DataMsg m;
    std::memcpy(&m, header, sizeof m);
    if (m.importer_nonce != a->nonce) return UCS_OK;
    auto it = a->ops.find(m.op_id);
    if (it == a->ops.end()) return UCS_OK;
    ImportOp *op = it->second.get();
    if (!op->push || op->state != OpState::kPulling || op->failing || m.run >= op->runs.size() ||
        op->runs[m.run].answered)
        return UCS_OK;
    ImportOp::Run &r = op->runs[m.run];
    r.answered = true;
    --op->awaiting;
    if (!m.ok) {
        op->refused = true;
        return UCS_OK;
    }
    if (length != size_t(r.len)) {
        if (op->get_error == UCS_OK) op->get_error = UCS_ERR_MESSAGE_TRUNCATED;
        return UCS_OK;
    }
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        ucp_request_param_t prm{};
        prm.op_attr_mask = 0;
        ucs_status_ptr_t q = a->u->ucp_am_recv_data_nbx(a->worker, data, r.local, size_t(r.len), &prm);
        if (UCS_PTR_IS_ERR(q)) {
            if (op->get_error == UCS_OK) op->get_error = UCS_PTR_STATUS(q);
        } else if (q != nullptr) {
            op->gets.push_back(q);  // reserved for one per block: cannot throw
            ++op->outstanding;
        }
    } else {
        std::memcpy(r.local, data, size_t(r.len));
    }
    return UCS_OK;
}

}  // namespace kvc::xfer::detail

#endif  // KVC_HAVE_UCX
