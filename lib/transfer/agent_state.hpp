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

#include "core/block_hash.hpp"
#include "kvc/kvc.h"
#include "transfer/descriptor.hpp"
#include "transfer/pool_hooks.hpp"
#include "transfer/ucx_api.hpp"

namespace kvc::xfer::detail {

// Active message ids: an importer asks whether an export's lease held while its gets ran.
constexpr unsigned kAmCheck = 0x6b76;
constexpr unsigned kAmReply = 0x6b77;
// The push data path (lib/transfer/README.md, "Data paths"): an importer asks for one run of an
// export's blocks (kAmPull); the exporter answers with the bytes as the data of kAmData, which UCX
// sends by rendezvous for large runs (over shared memory: the importer reads them with one
// process_vm_readv through the cma transport, instead of a get emulated over active messages).
constexpr unsigned kAmPull = 0x6b78;
constexpr unsigned kAmData = 0x6b79;
// A failed import whose endpoint was force-closed waits this long for its requests to complete
// (UCX 1.13 was seen to leave emulated gets in progress for ever there); then it abandons them,
// leaks the blocks they could still write, and finishes with its failure (step()).
constexpr int64_t kAbandonAfterCloseMs = 10000;
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
struct PullMsg {
    uint64_t export_id;
    uint64_t exporter_nonce;
    uint64_t op_id;
    uint64_t importer_nonce;
    uint64_t run;   // the importer's index of the run
    uint64_t addr;  // the run's first block, as the descriptor names it
    uint64_t len;   // bytes: whole blocks, each one of the export's
};
struct DataMsg {
    uint64_t op_id;
    uint64_t importer_nonce;
    uint64_t run;
    uint32_t ok;  // 0: refused (the export is not held, or the range is not the export's); no data
    uint32_t pad;
};

// A CUDA pool's KV crosses UCX through host memory (agent_staging.cpp): chunks of pinned host
// memory, each registered once with its own rkey, cut into block-sized slots.
struct StagingChunk {
    char *base = nullptr;
    bool ucx_allocated = false;  // a CPU pool's export staging: UCX's own memory, freed by ucp_mem_unmap
    int64_t slots = 0;
    int64_t free = 0;
    std::vector<uint8_t> used;  // per slot
    ucp_mem_h memh = nullptr;
    std::vector<uint8_t> rkey;  // packed
    // A CPU pool's export staging only: one 64-bit lease word per slot, after the slots in the same
    // UCX-allocated memory (so the chunk's rkey covers them). The export whose first slot is s owns
    // word s while it holds its slots: lease_tag(nonce, export id) while held, 0 once ended, written
    // by the exporter only (under the agent's mutex), read by importers (lib/transfer/README.md,
    // "Lease check").
    uint64_t *words = nullptr;
};
// Slots of one chunk (an export's descriptor has one rkey), in block order. A chunk's base and
// rkey never change once it exists, so they are read through `ck` without the agent's lock.
struct StagingLease {
    int32_t chunk = -1;
    StagingChunk *ck = nullptr;
    std::vector<int32_t> slots;
};

struct Export {
    std::vector<int32_t> blocks;
    std::vector<uint64_t> addrs;  // the blocks' addresses as the descriptor names them, sorted
    StagingLease staged;  // CUDA pool: the blocks' bytes, copied at export
    uint64_t *lease_word = nullptr;  // staged CPU export: its lease word (staged.ck->words), cleared at its end
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
    // Unpacked memory keys of the exporter, by packed bytes: unpacked once per endpoint, not per
    // import (over shared memory an unpack attaches the exporter's segment, and every import would
    // page-fault its mapping afresh). Destroyed once the endpoint is closed and no get uses them.
    std::map<std::string, ucp_rkey_h> rkeys;
    // An import using this endpoint abandoned requests that never completed after the close
    // (step(), kAbandonAfterCloseMs): UCX may still use its rkeys, so they live until teardown.
    bool abandoned = false;
};

// kLanding (CUDA pools): the lease check passed and the progress thread copies the pulled bytes
// from host staging into the pool's blocks, outside the agent's lock; then back to kChecking with
// `landed` set, and the next step commits.
enum class OpState { kPulling, kChecking, kLanding, kDone };

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
    ucp_rkey_h rkey = nullptr;  // borrowed from ep->rkeys
    int64_t outstanding = 0;   // gets posted and not completed (+1 while its mapped copies run)
    std::vector<void *> gets;  // their requests
    // Runs whose exporter memory is mapped here (ucp_rkey_ptr): copied by kvc_xfer_import's
    // thread without the agent's lock, instead of a get (agent_import.cpp, copy_mapped).
    struct MappedCopy {
        char *dst;
        const char *src;
        size_t len;
    };
    std::vector<MappedCopy> copies;
    // Version 2 descriptors (a staged export): the lease check reads the export's lease word, by a
    // load where it is mapped here (lease_ptr), else by one more get into lease_buf (lease_reading
    // while it runs): no message to the exporter.
    const uint64_t *lease_ptr = nullptr;
    // Where the get of the word lands (not mapped): its own allocation, leaked if that get is
    // abandoned (it could still land after the op is gone).
    std::unique_ptr<uint64_t> lease_buf;
    bool lease_reading = false;
    int64_t failing_since_ms = 0;  // when the op began failing (the bound on its requests)
    ucs_status_t get_error = UCS_OK;
    int64_t deadline_ms = 0;
    std::chrono::steady_clock::time_point start;
    int32_t check = -1;  // lease check answer: -1 none yet, 0 not held, 1 held
    CheckMsg check_msg{};
    kvc_xfer_import_result result{};
    StagingLease staged;  // CUDA pool: where the gets land, blocks res.fresh in order
    bool landed = false;  // CUDA pool: staged bytes copied into res.fresh
    // The push data path: the runs asked for, and how many have not answered yet. A failed op
    // stops waiting for them: an answer for an op that is failing, done or gone is dropped.
    struct Run {
        char *local;
        int64_t len;
        bool answered;
    };
    bool push = false;
    std::vector<Run> runs;
    int64_t awaiting = 0;
    bool refused = false;  // the exporter refused a run: the lease no longer held
};

struct PendingReply {
    ucp_ep_h ep;
    ReplyMsg msg;
};
// An exporter's answer to a PullMsg, sent after the progress call that received it.
struct PendingData {
    ucp_ep_h ep;
    DataMsg msg;
    const char *src;  // null when refused
    size_t len;
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
    // The same for runs of exporter memory this process has mapped (ucp_rkey_ptr succeeds: a
    // staged export over shared memory), which the importer copies itself (agent_import.cpp,
    // copy_mapped): not cut by default (KVC_XFER_MAX_GET_BYTES sets both caps).
    int64_t max_mapped_get_bytes = int64_t(1) << 40;
    // Whether mapped exporter memory is copied by the importer itself (default) or read with gets
    // like any other (KVC_XFER_MAPPED_COPY=0: the behaviour before, for comparison).
    bool mapped_copy = true;
    // The importer's data path: false one-sided ucp_get_nbx (the default), true pull requests
    // answered by active messages (KVC_XFER_DATA_PATH=push). lib/transfer/README.md, "Data paths".
    bool push = false;
    int64_t last_activity_ms = 0;  // progress thread only: when the worker last progressed something
    // Storage (immutable).
    char *base = nullptr;
    int64_t total_bytes = 0, block_bytes = 0;
    // UCX (every call under mu, worker in SERIALIZED mode).
    ucp_context_h ctx = nullptr;
    ucp_worker_h worker = nullptr;
    ucp_mem_h memh = nullptr;
    std::vector<uint8_t> rkey;  // the storage's (CPU pools)
    std::vector<uint8_t> address;
    int efd = -1;
    // CUDA pools: no UCX transport here reads device memory, so exports and imports go through
    // host staging (agent_staging.cpp, lib/transfer/README.md "CUDA pools").
    bool staged = false;
    // CPU pools: exports copied into UCX-allocated shared memory (ucp_mem_map with
    // UCP_MEM_MAP_ALLOCATE: a SysV/POSIX segment), which UCX's shared-memory transports read with
    // one memcpy; ordinary pool memory they can only reach by gets emulated with two copies.
    // KVC_XFER_EXPORT_STAGING=0/1, default: when the agent's transports may include shared memory.
    // Imports into a CPU pool are never staged. lib/transfer/README.md, "Data paths".
    bool stage_cpu_exports = false;
    void *stream = nullptr;                      // the imports' host-to-device copies (non-blocking, this agent's own)
    int64_t staging_cap = 0, staging_bytes = 0;  // bytes allowed / allocated
    std::vector<std::unique_ptr<kvc::xfer::detail::StagingChunk>> chunks;  // under mu

    std::mutex mu;
    std::condition_variable cv;  // an op finished
    std::thread thread;
    bool stop = false;
    uint64_t next_export = 1, next_op = 1;
    std::map<uint64_t, kvc::xfer::detail::Export> exports;
    std::map<uint64_t, std::unique_ptr<kvc::xfer::detail::ImportOp>> ops;
    std::map<std::string, std::shared_ptr<kvc::xfer::detail::Endpoint>> eps;  // by worker address
    std::vector<std::shared_ptr<kvc::xfer::detail::Endpoint>> dead_eps;       // failed, to close
    std::vector<void *> closing;                                              // ep close requests in flight
    std::vector<std::shared_ptr<kvc::xfer::detail::Endpoint>> closed_eps;  // closed; their rkeys to destroy
    std::vector<kvc::xfer::detail::PendingReply> replies;
    std::vector<kvc::xfer::detail::PendingData> pushes;  // exporter: runs to send
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
ucs_status_t am_pull_cb(void *arg, const void *header, size_t header_length, void *data, size_t length,
                        const ucp_am_recv_param_t *param);
ucs_status_t am_data_cb(void *arg, const void *header, size_t header_length, void *data, size_t length,
                        const ucp_am_recv_param_t *param);
// Sends an active message; the header (at most 64 bytes) is copied, the data (src, len; may be
// null) must stay valid until the send completes (the pool's storage or a staging chunk).
ucs_status_t am_send(kvc_xfer_agent *a, ucp_ep_h ep, unsigned id, const void *hdr, size_t len, unsigned flags,
                     const void *src = nullptr, size_t src_len = 0);

// agent_export.cpp: leases end (released exports are erased by their caller). Under a->mu.
void reap_leases(kvc_xfer_agent *a);

// agent_import.cpp: the import state machine. Under a->mu.
__attribute__((format(printf, 5, 6))) void op_fail(kvc_xfer_agent *a, ImportOp *op, kvc_status st, int32_t failure,
                                                   const char *fmt, ...);
void record_failure(kvc_xfer_agent *a, int32_t failure);
void step(kvc_xfer_agent *a, ImportOp *op);

int64_t now_ms();
uint64_t unix_ms();

// agent_staging.cpp: a CUDA pool's host staging. staging_init at create (the stream, the cap);
// staging_reserve takes n slots of one chunk, growing the staging if needed (takes a->mu itself);
// staging_release gives them back (under a->mu); stage_out copies leased device blocks into their
// slots and land copies an import's pulled slots into its fresh blocks (both without any lock,
// waiting for their copies); staging_unmap before ucp_cleanup, staging_free after.
kvc_status staging_init(kvc_xfer_agent *a, const char *fn);
kvc_status staging_reserve(kvc_xfer_agent *a, int64_t n, StagingLease *out, const char *fn);
void staging_release(kvc_xfer_agent *a, StagingLease *l);
// A staged CPU export's lease word: set to its tag when published, cleared (before its slots may
// be reused) when it ends. Under a->mu.
void lease_word_set(kvc_xfer_agent *a, Export *e, uint64_t export_id);
void lease_word_end(Export *e);
char *staging_slot(const kvc_xfer_agent *a, const StagingLease &l, int64_t i);
kvc_status stage_out(kvc_xfer_agent *a, const std::vector<int32_t> &blocks, const StagingLease &l, const char *fn);
kvc_status land(kvc_xfer_agent *a, ImportOp *op);
void staging_unmap(kvc_xfer_agent *a);
void staging_free(kvc_xfer_agent *a);

}  // namespace kvc::xfer::detail

#endif  // KVC_HAVE_UCX
