// The agent's state, shared by the files that implement it (agent_*.cpp): the lease-check messages,
// exports, endpoints, imports and struct kvc_xfer_agent itself, and the functions one file calls in
// another. Internal to lib/transfer; only compiled with the UCX headers (KVC_HAVE_UCX).
#pragma once
#ifdef KVC_HAVE_UCX

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "block_hash.hpp"
#include "kvc/kvc.h"
#include "transfer/descriptor.hpp"
#include "transfer/pool_hooks.hpp"
#include "transfer/ucx_api.hpp"

namespace kvc::xfer::detail {

// Active message ids: an importer asks whether an export's lease held while its gets ran.
constexpr unsigned kAmCheck = 0x6b76;
constexpr unsigned kAmReply = 0x6b77;
// How long the progress thread keeps polling after the worker last did something, ms.
constexpr int64_t kSpinAfterActivityMs = 20;

struct CheckMsg {
    uint64_t export_id;
    uint64_t exporter_nonce;
    uint64_t op_id;
    uint64_t importer_nonce;
};
struct ReplyMsg {
    uint64_t op_id;
    uint64_t importer_nonce;
    uint32_t ok;
    uint32_t pad;
};

struct Export {
    std::vector<int32_t> blocks;
    std::vector<uint8_t> desc;
    int64_t expires_ms = 0;  // steady clock
};

struct Endpoint {
    ucp_ep_h ep = nullptr;
    bool failed = false;
    bool queued = false;  // taken out of the agent's map, to be closed
    bool closed = false;
    ucs_status_t error = UCS_OK;  // set by the error callback
    std::string why;
};

enum class OpState { kPulling, kChecking, kDone };

struct ImportOp {
    uint64_t id = 0;
    OpState state = OpState::kPulling;
    kvc_status status = KVC_OK;
    int32_t failure = KVC_XFER_OK;
    bool failing = false;  // failed; waiting for its gets to stop before the blocks go back
    std::string message;
    Descriptor desc;
    std::vector<BlockKey> keys;
    Reservation res;
    std::shared_ptr<Endpoint> ep;
    ucp_rkey_h rkey = nullptr;
    int64_t outstanding = 0;  // gets posted and not completed
    std::vector<void *> gets; // their requests
    ucs_status_t get_error = UCS_OK;
    int64_t deadline_ms = 0;
    std::chrono::steady_clock::time_point start;
    int32_t check = -1;  // lease check answer: -1 none yet, 0 not held, 1 held
    CheckMsg check_msg{};
    kvc_xfer_import_result result{};
};

struct PendingReply {
    ucp_ep_h ep;
    ReplyMsg msg;
};

}  // namespace kvc::xfer::detail

struct kvc_xfer_agent {
    kvc_pool *pool = nullptr;
    const kvc::xfer::UcxApi *u = nullptr;
    std::string identity;
    int64_t lease_ms = 0, timeout_ms = 0;
    uint64_t nonce = 0;
    // Largest single get: runs of blocks contiguous on both sides are merged up to this size
    // (KVC_XFER_MAX_GET_BYTES, default 4 MiB; one huge get is slower over shared memory).
    int64_t max_get_bytes = 4 << 20;
    int64_t last_activity_ms = 0;  // progress thread only: when the worker last progressed something
    // Storage (immutable).
    char *base = nullptr;
    int64_t total_bytes = 0, block_bytes = 0;
    // UCX (every call under mu, worker in SERIALIZED mode).
    ucp_context_h ctx = nullptr;
    ucp_worker_h worker = nullptr;
    ucp_mem_h memh = nullptr;
    std::vector<uint8_t> rkey;
    std::vector<uint8_t> address;
    int efd = -1;

    std::mutex mu;
    std::condition_variable cv;  // an op finished
    std::thread thread;
    bool stop = false;
    uint64_t next_export = 1, next_op = 1;
    std::map<uint64_t, kvc::xfer::detail::Export> exports;
    std::map<uint64_t, std::unique_ptr<kvc::xfer::detail::ImportOp>> ops;
    std::map<std::string, std::shared_ptr<kvc::xfer::detail::Endpoint>> eps;  // by worker address
    std::vector<std::shared_ptr<kvc::xfer::detail::Endpoint>> dead_eps;       // failed, to close
    std::vector<void *> closing;                           // ep close requests in flight
    std::vector<kvc::xfer::detail::PendingReply> replies;
    kvc_xfer_stats stats{};
};

namespace kvc::xfer::detail {

// agent_worker.cpp: the worker, its endpoints and the progress thread (every function under a->mu).
void ep_mark_failed(kvc_xfer_agent *a, const std::shared_ptr<Endpoint> &e, const std::string &why);
void ep_error_cb(void *arg, ucp_ep_h, ucs_status_t status);
bool progress_round(kvc_xfer_agent *a);

// agent_lease_check.cpp: the lease check's active messages.
ucs_status_t am_check_cb(void *arg, const void *header, size_t header_length, void *, size_t,
                         const ucp_am_recv_param_t *param);
ucs_status_t am_reply_cb(void *arg, const void *header, size_t header_length, void *, size_t,
                         const ucp_am_recv_param_t *);
// Sends an active message with header hdr (valid until completion: owned, or in a live op).
ucs_status_t am_send(kvc_xfer_agent *a, ucp_ep_h ep, unsigned id, const void *hdr, size_t len, ReplyMsg *owned,
                     unsigned flags);

// agent_export.cpp: leases end (released exports are erased by their caller). Under a->mu.
void reap_leases(kvc_xfer_agent *a);

// agent_import.cpp: the import state machine. Under a->mu.
__attribute__((format(printf, 5, 6))) void op_fail(kvc_xfer_agent *a, ImportOp *op, kvc_status st, int32_t failure,
                                                   const char *fmt, ...);
void record_failure(kvc_xfer_agent *a, int32_t failure);
void step(kvc_xfer_agent *a, ImportOp *op);

int64_t now_ms();
uint64_t unix_ms();

}  // namespace kvc::xfer::detail

#endif  // KVC_HAVE_UCX
