// See agent.hpp and lib/transfer/README.md.
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

#else

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/block_hash.hpp"
#include "core/pool.hpp"
#include "storage/pool_access.hpp"
#include "transfer/descriptor.hpp"
#include "transfer/pool_hooks.hpp"

namespace kvc::xfer {
namespace {

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

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
uint64_t unix_ms() {
    return uint64_t(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
}

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
    int64_t outstanding = 0;   // gets posted and not completed
    std::vector<void *> gets;  // their requests
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

}  // namespace
}  // namespace kvc::xfer

using kvc::xfer::Endpoint;
using kvc::xfer::Export;
using kvc::xfer::ImportOp;

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
    std::map<uint64_t, Export> exports;
    std::map<uint64_t, std::unique_ptr<ImportOp> > ops;
    std::map<std::string, std::shared_ptr<Endpoint> > eps;  // by worker address
    std::vector<std::shared_ptr<Endpoint> > dead_eps;       // failed, to close
    std::vector<void *> closing;                            // ep close requests in flight
    std::vector<kvc::xfer::PendingReply> replies;
    kvc_xfer_stats stats{};
};

namespace kvc::xfer {
namespace {

std::string vformat(const char *fmt, va_list ap) {
    char buf[512];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    return buf;
}

// Marks op failed (once). Its blocks go back when its gets have stopped (step()).
__attribute__((format(printf, 5, 6))) void op_fail(kvc_xfer_agent *a, ImportOp *op, kvc_status st, int32_t failure,
                                                   const char *fmt, ...) {
    if (op->failing || op->state == OpState::kDone) return;
    va_list ap;
    va_start(ap, fmt);
    op->message = vformat(fmt, ap);
    va_end(ap);
    op->status = st;
    op->failure = failure;
    op->failing = true;
    (void)a;
}

void ep_mark_failed(kvc_xfer_agent *a, const std::shared_ptr<Endpoint> &e, const std::string &why) {
    if (e->queued) return;
    if (!e->failed) e->why = why;
    e->failed = true;
    e->queued = true;
    for (auto it = a->eps.begin(); it != a->eps.end(); ++it)
        if (it->second == e) {
            a->eps.erase(it);
            break;
        }
    a->dead_eps.push_back(e);
}

void ep_error_cb(void *arg, ucp_ep_h, ucs_status_t status) {
    // Called from ucp_worker_progress, under a->mu. arg: the Endpoint (kept alive by dead_eps).
    Endpoint *e = static_cast<Endpoint *>(arg);
    if (!e->failed) {
        e->failed = true;
        e->error = status;
    }
}

// The send callbacks free their requests: user = the agent's api.
struct SendCtx {
    const UcxApi *u;
    ReplyMsg *owned;  // a reply message to delete, or null
};
void send_done_cb(void *request, ucs_status_t, void *user) {
    SendCtx *c = static_cast<SendCtx *>(user);
    delete c->owned;
    c->u->ucp_request_free(request);
    delete c;
}

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
    a->replies.push_back(PendingReply{param->reply_ep, ReplyMsg{m.op_id, m.importer_nonce, ok ? 1u : 0u, 0}});
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

// Sends an active message with header hdr (valid until completion: owned, or in a live op).
ucs_status_t am_send(kvc_xfer_agent *a, ucp_ep_h ep, unsigned id, const void *hdr, size_t len, ReplyMsg *owned,
                     unsigned flags) {
    SendCtx *c = new SendCtx{a->u, owned};
    ucp_request_param_t prm{};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    prm.cb.send = send_done_cb;
    prm.user_data = c;
    prm.flags = flags;
    ucs_status_ptr_t r = a->u->ucp_am_send_nbx(ep, id, hdr, len, nullptr, 0, &prm);
    if (r == nullptr || UCS_PTR_IS_ERR(r)) {
        delete c->owned;
        delete c;
        return r == nullptr ? UCS_OK : UCS_PTR_STATUS(r);
    }
    return UCS_INPROGRESS;
}

void close_ep(kvc_xfer_agent *a, Endpoint *e) {
    if (e->closed || !e->ep) return;
    e->closed = true;
    ucp_request_param_t prm{};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t r = a->u->ucp_ep_close_nbx(e->ep, &prm);
    if (r && !UCS_PTR_IS_ERR(r)) a->closing.push_back(r);
    e->ep = nullptr;
}

void record_failure(kvc_xfer_agent *a, int32_t failure) {
    ++a->stats.imports_failed;
    if (failure > 0 && failure < 9) ++a->stats.failures[failure];
}

// Advances one import; under mu.
void step(kvc_xfer_agent *a, ImportOp *op) {
    if (op->state == OpState::kDone) return;
    for (size_t i = 0; i < op->gets.size();) {
        const ucs_status_t gs = a->u->ucp_request_check_status(op->gets[i]);
        if (gs == UCS_INPROGRESS) {
            ++i;
            continue;
        }
        if (gs != UCS_OK && op->get_error == UCS_OK) op->get_error = gs;
        a->u->ucp_request_free(op->gets[i]);
        op->gets[i] = op->gets.back();
        op->gets.pop_back();
        --op->outstanding;
    }
    const int64_t now = now_ms();
    if (!op->failing) {
        if (op->ep && op->ep->failed) {
            if (op->ep->why.empty()) op->ep->why = a->u->ucs_status_string(op->ep->error);
            ep_mark_failed(a, op->ep, op->ep->why);
            op_fail(a, op, KVC_ERR_IO, KVC_XFER_FAIL_PEER, "kvc_xfer_op_wait: import %llu: the exporter went away (%s)",
                    (unsigned long long)op->id, op->ep->why.c_str());
        } else if (now >= op->deadline_ms)
            op_fail(a, op, KVC_ERR_IO, KVC_XFER_FAIL_TIMEOUT, "kvc_xfer_op_wait: import %llu timed out after %lld ms",
                    (unsigned long long)op->id, (long long)a->timeout_ms);
        else if (op->state == OpState::kPulling && op->outstanding == 0) {
            if (op->get_error != UCS_OK) {
                op_fail(a, op, KVC_ERR_IO, KVC_XFER_FAIL_PEER, "kvc_xfer_op_wait: import %llu: a get failed: %s",
                        (unsigned long long)op->id, a->u->ucs_status_string(op->get_error));
            } else {
                op->state = OpState::kChecking;
                op->check_msg = CheckMsg{op->desc.export_id, op->desc.nonce, op->id, a->nonce};
                ucs_status_t st = am_send(a, op->ep->ep, kAmCheck, &op->check_msg, sizeof op->check_msg, nullptr,
                                          UCP_AM_SEND_FLAG_REPLY);
                if (st != UCS_OK && st != UCS_INPROGRESS)
                    op_fail(a, op, KVC_ERR_IO, KVC_XFER_FAIL_PEER,
                            "kvc_xfer_op_wait: import %llu: the lease check could not be sent: %s",
                            (unsigned long long)op->id, a->u->ucs_status_string(st));
            }
        } else if (op->state == OpState::kChecking && op->check == 0) {
            op_fail(a, op, KVC_ERR_STATE, KVC_XFER_FAIL_LEASE,
                    "kvc_xfer_op_wait: import %llu: the exporter no longer holds export %llu (released, expired or "
                    "another agent); nothing cached",
                    (unsigned long long)op->id, (unsigned long long)op->desc.export_id);
        } else if (op->state == OpState::kChecking && op->check == 1) {
            // Bytes landed while the lease held: enter the blocks.
            const int64_t pulled = int64_t(op->res.fresh.size());
            const int64_t cached =
                commit_import(a->pool, op->keys.data(), op->desc.tokens.data(), op->desc.count(), &op->res);
            op->result.blocks_pulled = pulled;
            op->result.blocks_cached = cached;
            op->result.bytes_pulled = pulled * a->block_bytes;
            op->result.cached_tokens = op->desc.count() * op->desc.block_size;
            a->stats.blocks_pulled += pulled;
            a->stats.blocks_cached += cached;
            a->stats.bytes_pulled += pulled * a->block_bytes;
            ++a->stats.imports_ok;
            op->state = OpState::kDone;
        }
    }
    if (op->failing && op->state != OpState::kDone) {
        // The gets must stop before the blocks go back: force-close the endpoint (it fails every
        // import using it) unless they are done already.
        if (op->outstanding > 0 && op->ep) ep_mark_failed(a, op->ep, "closed after a failed import");
        if (op->outstanding == 0) {
            abort_import(a->pool, &op->res);
            record_failure(a, op->failure);
            op->state = OpState::kDone;
        }
    }
    if (op->state == OpState::kDone) {
        if (op->rkey) {
            a->u->ucp_rkey_destroy(op->rkey);
            op->rkey = nullptr;
        }
        op->ep.reset();
        op->result.status = op->status;
        op->result.failure = op->failure;
        op->result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - op->start).count();
        a->stats.import_seconds += op->result.seconds;
        a->cv.notify_all();
    }
}

void reap_leases(kvc_xfer_agent *a) {
    const int64_t now = now_ms();
    for (auto it = a->exports.begin(); it != a->exports.end();) {
        if (it->second.expires_ms <= now) {
            release_blocks(a->pool, it->second.blocks);
            ++a->stats.exports_expired;
            it = a->exports.erase(it);
        } else {
            ++it;
        }
    }
}

// One round of everything the progress thread does; under mu.
bool progress_round(kvc_xfer_agent *a) {
    while (a->u->ucp_worker_progress(a->worker) != 0) a->last_activity_ms = now_ms();
    for (PendingReply &r : a->replies) {
        ReplyMsg *m = new ReplyMsg(r.msg);
        am_send(a, r.ep, kAmReply, m, sizeof *m, m, 0);
    }
    a->replies.clear();
    std::vector<std::shared_ptr<Endpoint> > broken;
    for (auto &kv : a->eps)
        if (kv.second->failed) broken.push_back(kv.second);
    for (auto &e : broken) ep_mark_failed(a, e, e->why);
    bool busy = false;
    for (auto &kv : a->ops) {
        step(a, kv.second.get());
        busy |= kv.second->state != OpState::kDone;
    }
    for (auto &e : a->dead_eps) close_ep(a, e.get());
    a->dead_eps.clear();
    for (size_t i = 0; i < a->closing.size();) {
        if (a->u->ucp_request_check_status(a->closing[i]) != UCS_INPROGRESS) {
            a->u->ucp_request_free(a->closing[i]);
            a->closing[i] = a->closing.back();
            a->closing.pop_back();
        } else {
            ++i;
        }
    }
    reap_leases(a);
    return busy || !a->closing.empty();
}

void progress_thread(kvc_xfer_agent *a) {
    std::unique_lock<std::mutex> lk(a->mu);
    while (!a->stop) {
        const bool busy = progress_round(a);
        // Spin while imports run, and for a moment after the worker last did something (an
        // exporter serving gets emulated over active messages must progress to answer them).
        if (busy || now_ms() - a->last_activity_ms < kSpinAfterActivityMs) {
            // Imports in flight: keep progressing (shared-memory transports complete gets only
            // through progress calls, and a sleep per round would add its length to every get).
            lk.unlock();
            std::this_thread::yield();
            lk.lock();
            continue;
        }
        const ucs_status_t armed = a->u->ucp_worker_arm(a->worker);
        lk.unlock();
        if (armed == UCS_OK) {
            pollfd p{a->efd, POLLIN, 0};
            ::poll(&p, 1, 5);
        }
        lk.lock();
    }
}

kvc_status ucx_fail(kvc_status st, const char *fn, const char *what, const UcxApi *u, ucs_status_t s) {
    return fail(st, "%s: %s failed: %s", fn, what, u->ucs_status_string(s));
}

void teardown(kvc_xfer_agent *a) {
    const UcxApi *u = a->u;
    // The worker first: destroying it purges requests still pending on its endpoints (answers to
    // an importer that died, over shared memory, never drain), and those deregister memory of the
    // storage's registration; unmapped first, that was a use after free inside UCX.
    if (a->worker) u->ucp_worker_destroy(a->worker);
    if (a->memh) u->ucp_mem_unmap(a->ctx, a->memh);
    if (a->ctx) u->ucp_cleanup(a->ctx);
    a->memh = nullptr;
    a->worker = nullptr;
    a->ctx = nullptr;
}

kvc_status publish_export(kvc_xfer_agent *a, HeldPrefix &held, int64_t lease_ms, uint64_t *out_export,
                          int64_t *out_tokens) {
    const kvc_pool_config &c = a->pool->config;
    Descriptor d;
    d.nonce = a->nonce;
    d.lease_unix_ms = unix_ms() + uint64_t(lease_ms);
    d.block_size = c.block_size;
    d.num_layers = c.num_layers;
    d.num_kv_heads = c.num_kv_heads;
    d.head_dim = c.head_dim;
    d.kv_dtype = c.kv_dtype;
    d.block_bytes = a->block_bytes;
    d.identity = a->identity;
    d.address = a->address;
    d.rkey = a->rkey;
    d.tokens = held.tokens;
    d.hashes = held.hashes;
    d.addrs.resize(held.blocks.size());
    for (size_t i = 0; i < held.blocks.size(); ++i)
        d.addrs[i] = uint64_t(reinterpret_cast<uintptr_t>(a->base + int64_t(held.blocks[i]) * a->block_bytes));
    Export e;
    e.blocks = held.blocks;
    e.expires_ms = now_ms() + lease_ms;
    std::lock_guard<std::mutex> lk(a->mu);
    d.export_id = a->next_export++;
    e.desc = encode(d);
    const int64_t n = int64_t(held.blocks.size());
    a->exports.emplace(d.export_id, std::move(e));
    ++a->stats.exports_total;
    *out_export = d.export_id;
    if (out_tokens) *out_tokens = n * c.block_size;
    return KVC_OK;
}

}  // namespace

namespace {
kvc_status agent_setup(std::unique_ptr<kvc_xfer_agent> &a, const kvc_xfer_config &cfg, kvc_xfer_agent **out,
                       const char *fn);
}  // namespace

kvc_status agent_create(kvc_pool *pool, const kvc_xfer_config &cfg, kvc_xfer_agent **out, const char *fn) {
    const UcxApi *u = nullptr;
    if (kvc_status st = load_ucx(&u, fn); st != KVC_OK) return st;
    kvc_storage_info si{};
    si.struct_size = sizeof si;
    if (pool->backend != KVC_BACKEND_CPU || kvc_storage_get_info(pool, &si) != KVC_OK)
        return fail(KVC_ERR_UNSUPPORTED, "%s: KV transfer needs a CPU-backend pool (CUDA pools: not yet)", fn);
    if (!pool->caching) return fail(KVC_ERR_UNSUPPORTED, "%s: KV transfer needs prefix caching on", fn);
    auto a = std::make_unique<kvc_xfer_agent>();
    a->pool = pool;
    a->u = u;
    a->identity = cfg.model_identity ? cfg.model_identity : "";
    a->lease_ms = cfg.lease_ms;
    a->timeout_ms = cfg.timeout_ms;
    a->base = static_cast<char *>(pool->storage);
    a->total_bytes = si.total_bytes;
    a->block_bytes = si.block_stride;
    if (const char *mg = std::getenv("KVC_XFER_MAX_GET_BYTES"); mg && std::atoll(mg) > 0)
        a->max_get_bytes = std::atoll(mg);
    std::random_device rd;
    a->nonce = (uint64_t(rd()) << 32 | rd()) ^ uint64_t(getpid()) ^ uint64_t(now_ms()) << 20;
    if (a->nonce == 0) a->nonce = 1;

    try {
        return agent_setup(a, cfg, out, fn);
    } catch (...) {
        teardown(a.get());  // UCX objects made before the failure
        throw;
    }
}

namespace {
kvc_status agent_setup(std::unique_ptr<kvc_xfer_agent> &a, const kvc_xfer_config &cfg, kvc_xfer_agent **out,
                       const char *fn) {
    const UcxApi *u = a->u;
    ucp_config_t *uc = nullptr;
    ucs_status_t s = u->ucp_config_read(nullptr, nullptr, &uc);
    if (s != UCS_OK) return ucx_fail(KVC_ERR_IO, fn, "ucp_config_read", u, s);
    if (cfg.transports && (s = u->ucp_config_modify(uc, "TLS", cfg.transports)) != UCS_OK) {
        u->ucp_config_release(uc);
        return fail(KVC_ERR_INVALID_ARG, "%s: transports \"%s\" refused by UCX: %s", fn, cfg.transports,
                    u->ucs_status_string(s));
    }
    if (cfg.net_devices && (s = u->ucp_config_modify(uc, "NET_DEVICES", cfg.net_devices)) != UCS_OK) {
        u->ucp_config_release(uc);
        return fail(KVC_ERR_INVALID_ARG, "%s: net_devices \"%s\" refused by UCX: %s", fn, cfg.net_devices,
                    u->ucs_status_string(s));
    }
    ucp_params_t pp{};
    pp.field_mask = UCP_PARAM_FIELD_FEATURES;
    pp.features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    s = u->ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &pp, uc, &a->ctx);
    u->ucp_config_release(uc);
    if (s != UCS_OK) return ucx_fail(KVC_ERR_IO, fn, "ucp_init", u, s);
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    if ((s = u->ucp_worker_create(a->ctx, &wp, &a->worker)) != UCS_OK) {
        teardown(a.get());
        return ucx_fail(KVC_ERR_IO, fn, "ucp_worker_create", u, s);
    }
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = a->base;
    mp.length = size_t(a->total_bytes);
    if ((s = u->ucp_mem_map(a->ctx, &mp, &a->memh)) != UCS_OK) {
        teardown(a.get());
        return ucx_fail(KVC_ERR_IO, fn, "registering the pool's storage (ucp_mem_map)", u, s);
    }
    void *rk = nullptr;
    size_t rk_len = 0;
    if ((s = u->ucp_rkey_pack(a->ctx, a->memh, &rk, &rk_len)) != UCS_OK) {
        teardown(a.get());
        return ucx_fail(KVC_ERR_IO, fn, "ucp_rkey_pack", u, s);
    }
    a->rkey.assign(static_cast<uint8_t *>(rk), static_cast<uint8_t *>(rk) + rk_len);
    u->ucp_rkey_buffer_release(rk);
    ucp_address_t *wa = nullptr;
    size_t wa_len = 0;
    if ((s = u->ucp_worker_get_address(a->worker, &wa, &wa_len)) != UCS_OK) {
        teardown(a.get());
        return ucx_fail(KVC_ERR_IO, fn, "ucp_worker_get_address", u, s);
    }
    a->address.assign(reinterpret_cast<uint8_t *>(wa), reinterpret_cast<uint8_t *>(wa) + wa_len);
    u->ucp_worker_release_address(a->worker, wa);
    if (a->rkey.size() > kMaxWireBlob || a->address.size() > kMaxWireBlob) {
        teardown(a.get());
        return fail(KVC_ERR_UNSUPPORTED, "%s: UCX address (%zu bytes) or rkey (%zu) too large for a descriptor", fn,
                    a->address.size(), a->rkey.size());
    }
    if ((s = u->ucp_worker_get_efd(a->worker, &a->efd)) != UCS_OK) {
        teardown(a.get());
        return ucx_fail(KVC_ERR_IO, fn, "ucp_worker_get_efd", u, s);
    }
    const std::pair<unsigned, ucp_am_recv_callback_t> handlers[] = {{kAmCheck, am_check_cb}, {kAmReply, am_reply_cb}};
    for (const auto &h : handlers) {
        ucp_am_handler_param_t hp{};
        hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
        hp.id = h.first;
        hp.cb = h.second;
        hp.arg = a.get();
        if ((s = u->ucp_worker_set_am_recv_handler(a->worker, &hp)) != UCS_OK) {
            teardown(a.get());
            return ucx_fail(KVC_ERR_IO, fn, "ucp_worker_set_am_recv_handler", u, s);
        }
    }
    try {
        a->thread = std::thread(progress_thread, a.get());
    } catch (...) {
        teardown(a.get());
        return fail(KVC_ERR_NO_MEMORY, "%s: cannot start the progress thread", fn);
    }
    *out = a.release();
    return KVC_OK;
}
}  // namespace

void agent_destroy(kvc_xfer_agent *a) {
    {
        std::lock_guard<std::mutex> lk(a->mu);
        a->stop = true;
        a->u->ucp_worker_signal(a->worker);
    }
    a->thread.join();
    std::unique_lock<std::mutex> lk(a->mu);
    for (auto &kv : a->ops) {
        ImportOp *op = kv.second.get();
        op_fail(a, op, KVC_ERR_STATE, KVC_XFER_FAIL_CANCELLED, "kvc_xfer_op_wait: import %llu: the agent was destroyed",
                (unsigned long long)op->id);
        if (op->ep) ep_mark_failed(a, op->ep, "agent destroyed");
    }
    for (auto &kv : a->eps) a->dead_eps.push_back(kv.second);
    a->eps.clear();
    // Let every get stop (force-closed endpoints complete them) before blocks go back; bounded.
    const int64_t until = now_ms() + 10000;
    for (;;) {
        progress_round(a);
        bool pending = !a->closing.empty();
        for (auto &kv : a->ops) pending |= kv.second->state != OpState::kDone;
        if (!pending || now_ms() > until) break;
    }
    for (auto &kv : a->ops)
        if (kv.second->state != OpState::kDone) {
            // Gets still in flight after 10 s: leak the blocks rather than let a late get write
            // into a block someone else owns.
            kv.second->res.fresh.clear();
            abort_import(a->pool, &kv.second->res);
        }
    for (auto &kv : a->exports) release_blocks(a->pool, kv.second.blocks);
    a->exports.clear();
    a->ops.clear();
    lk.unlock();
    teardown(a);
    delete a;
}

kvc_status agent_export_prompt(kvc_xfer_agent *a, const int32_t *tokens, int64_t num_tokens, const KeySet &keys,
                               int64_t lease_ms, uint64_t *out_export, int64_t *out_tokens, const char *fn) {
    if (num_tokens < a->pool->block_size)
        return fail(KVC_ERR_INVALID_ARG, "%s: num_tokens %lld holds no full block (block size %d)", fn,
                    (long long)num_tokens, a->pool->block_size);
    HeldPrefix held;
    if (kvc_status st = hold_prompt(a->pool, tokens, num_tokens, keys, &held, fn); st != KVC_OK) return st;
    try {
        return publish_export(a, held, lease_ms > 0 ? lease_ms : a->lease_ms, out_export, out_tokens);
    } catch (...) {
        release_blocks(a->pool, held.blocks);
        throw;
    }
}

kvc_status agent_export_seq(kvc_xfer_agent *a, uint64_t seq_id, int64_t lease_ms, uint64_t *out_export,
                            int64_t *out_tokens, const char *fn) {
    HeldPrefix held;
    if (kvc_status st = hold_seq(a->pool, seq_id, &held, fn); st != KVC_OK) return st;
    try {
        return publish_export(a, held, lease_ms > 0 ? lease_ms : a->lease_ms, out_export, out_tokens);
    } catch (...) {
        release_blocks(a->pool, held.blocks);
        throw;
    }
}

kvc_status agent_export_descriptor(kvc_xfer_agent *a, uint64_t id, uint8_t *buf, int64_t cap, int64_t *out_len,
                                   const char *fn) {
    std::lock_guard<std::mutex> lk(a->mu);
    reap_leases(a);
    auto it = a->exports.find(id);
    if (it == a->exports.end())
        return fail(KVC_ERR_INVALID_ARG, "%s: export %llu is unknown, released or expired", fn, (unsigned long long)id);
    const int64_t n = int64_t(it->second.desc.size());
    *out_len = n;
    if (cap < n) {
        if (buf == nullptr && cap == 0) return KVC_OK;
        return fail(KVC_ERR_BUFFER_TOO_SMALL, "%s: the descriptor needs %lld bytes, cap is %lld", fn, (long long)n,
                    (long long)cap);
    }
    std::memcpy(buf, it->second.desc.data(), size_t(n));
    return KVC_OK;
}

kvc_status agent_export_release(kvc_xfer_agent *a, uint64_t id, const char *fn) {
    std::vector<int32_t> blocks;
    {
        std::lock_guard<std::mutex> lk(a->mu);
        reap_leases(a);
        auto it = a->exports.find(id);
        if (it == a->exports.end())
            return fail(KVC_ERR_INVALID_ARG, "%s: export %llu is unknown, released or expired", fn,
                        (unsigned long long)id);
        blocks.swap(it->second.blocks);
        a->exports.erase(it);
    }
    release_blocks(a->pool, blocks);
    return KVC_OK;
}

kvc_status agent_import(kvc_xfer_agent *a, const uint8_t *buf, int64_t len, const KeySet &keys, uint64_t *out_op,
                        const char *fn) {
    auto refuse = [a](int32_t failure, kvc_status st) {
        std::lock_guard<std::mutex> lk(a->mu);
        ++a->stats.imports_started;
        record_failure(a, failure);
        return st;
    };
    auto op = std::make_unique<ImportOp>();
    op->start = std::chrono::steady_clock::now();
    Descriptor &d = op->desc;
    if (kvc_status st = decode(buf, len, &d, fn); st != KVC_OK) return refuse(KVC_XFER_FAIL_DESCRIPTOR, st);
    const kvc_pool_config &c = a->pool->config;
    if (d.block_size != c.block_size || d.num_layers != c.num_layers || d.num_kv_heads != c.num_kv_heads ||
        d.head_dim != c.head_dim || d.kv_dtype != c.kv_dtype || d.block_bytes != a->block_bytes)
        return refuse(
            KVC_XFER_FAIL_LAYOUT,
            fail(KVC_ERR_INVALID_ARG,
                 "%s: layout mismatch: descriptor block size %d, %d layers, %d KV heads, head dim %d, dtype "
                 "%d, %lld bytes/block; this pool %d, %d, %d, %d, %d, %lld",
                 fn, d.block_size, d.num_layers, d.num_kv_heads, d.head_dim, d.kv_dtype, (long long)d.block_bytes,
                 c.block_size, c.num_layers, c.num_kv_heads, c.head_dim, c.kv_dtype, (long long)a->block_bytes));
    if (d.identity != a->identity)
        return refuse(
            KVC_XFER_FAIL_LAYOUT,
            fail(KVC_ERR_INVALID_ARG, "%s: model identity mismatch: descriptor \"%.200s\", this agent \"%.200s\"", fn,
                 d.identity.c_str(), a->identity.c_str()));
    // The hash chain, recomputed from the token ids and this request's keys.
    const int64_t n = d.count();
    op->keys.resize(size_t(n));
    {
        BlockHasher h;
        h.init(d.block_size);
        Hash128 parent = kRootHash;
        for (int64_t i = 0; i < n; ++i) {
            op->keys[size_t(i)] = h.hash_block(parent, d.tokens.data() + i * d.block_size, i, keys);
            if (op->keys[size_t(i)].hash != d.hashes[size_t(i)])
                return refuse(KVC_XFER_FAIL_HASH,
                              fail(KVC_ERR_INVALID_ARG,
                                   "%s: block %lld's hash is not that of its token ids under these keys (other keys, "
                                   "salt or LoRA, or a forged descriptor); nothing imported",
                                   fn, (long long)i));
            parent = d.hashes[size_t(i)];
        }
    }
    if (n > a->pool->num_blocks)
        return refuse(KVC_XFER_FAIL_POOL_FULL, fail(KVC_ERR_OUT_OF_BLOCKS, "%s: %lld blocks exceed the pool's %d", fn,
                                                    (long long)n, a->pool->num_blocks));
    if (kvc_status st = reserve_import(a->pool, op->keys.data(), d.tokens.data(), n, keys.priority, &op->res, fn);
        st != KVC_OK)
        return refuse(KVC_XFER_FAIL_POOL_FULL, st);
    // The reservation may have evicted cached blocks whose spill to the host tier is queued: those
    // copies read the blocks the gets are about to write, so they run first (rule 4 of
    // lib/DESIGN.md: a storage access completes what was queued before it).
    if (kvc_status st = pool_storage_barrier(a->pool, nullptr); st != KVC_OK) {
        abort_import(a->pool, &op->res);
        return refuse(KVC_XFER_FAIL_POOL_FULL, st);
    }
    op->result.struct_size = sizeof op->result;
    op->result.blocks = n;
    op->result.blocks_skipped = op->res.skipped;

    std::unique_lock<std::mutex> lk(a->mu);
    const UcxApi *u = a->u;
    ++a->stats.imports_started;
    a->stats.blocks_skipped += op->res.skipped;
    op->id = a->next_op++;
    op->deadline_ms = now_ms() + a->timeout_ms;
    ImportOp *o = op.get();
    if (op->res.fresh.empty()) {
        // Everything is cached here already: nothing to pull, nothing to check.
        commit_import(a->pool, op->keys.data(), d.tokens.data(), n, &op->res);
        op->result.cached_tokens = n * d.block_size;
        ++a->stats.imports_ok;
        op->state = OpState::kDone;
        op->result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - op->start).count();
        a->ops.emplace(op->id, std::move(op));
        *out_op = o->id;
        return KVC_OK;
    }
    // The endpoint to the exporter (one per remote worker, shared by its imports).
    std::string key(reinterpret_cast<const char *>(d.address.data()), d.address.size());
    std::shared_ptr<Endpoint> ep;
    auto found = a->eps.find(key);
    if (found != a->eps.end() && !found->second->failed) {
        ep = found->second;
    } else {
        ep = std::make_shared<Endpoint>();
        ucp_ep_params_t ep_p{};
        ep_p.field_mask =
            UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
        ep_p.address = reinterpret_cast<const ucp_address_t *>(d.address.data());
        ep_p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
        ep_p.err_handler.cb = ep_error_cb;
        ep_p.err_handler.arg = ep.get();
        ucs_status_t s = u->ucp_ep_create(a->worker, &ep_p, &ep->ep);
        if (s == UCS_ERR_UNREACHABLE) {
            // Shared-memory transports have no peer-failure detection in UCX: without it the
            // endpoint is created in the default mode, and a dead exporter is noticed by the
            // import's timeout (lib/transfer/README.md).
            ep_p.field_mask &= ~uint64_t(UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE);
            s = u->ucp_ep_create(a->worker, &ep_p, &ep->ep);
        }
        if (s != UCS_OK) {
            record_failure(a, KVC_XFER_FAIL_PEER);
            lk.unlock();
            abort_import(a->pool, &op->res);
            return fail(KVC_ERR_IO, "%s: cannot reach the exporter (ucp_ep_create: %s)", fn, u->ucs_status_string(s));
        }
        a->eps[key] = ep;
    }
    op->ep = ep;
    ucs_status_t s = u->ucp_ep_rkey_unpack(ep->ep, d.rkey.data(), &op->rkey);
    if (s != UCS_OK) {
        record_failure(a, KVC_XFER_FAIL_PEER);
        op->rkey = nullptr;
        lk.unlock();
        abort_import(a->pool, &op->res);
        return fail(KVC_ERR_IO, "%s: the exporter's memory key was refused (ucp_ep_rkey_unpack: %s)", fn,
                    u->ucs_status_string(s));
    }
    // One get per run of blocks contiguous on both sides.
    const int64_t skip = op->res.skipped;
    const int64_t bb = a->block_bytes;
    const int64_t m = int64_t(op->res.fresh.size());
    const int64_t max_run = std::max<int64_t>(1, a->max_get_bytes / bb);
    for (int64_t j = 0; j < m;) {
        int64_t run = 1;
        while (j + run < m && run < max_run && op->res.fresh[size_t(j + run)] == op->res.fresh[size_t(j)] + run &&
               d.addrs[size_t(skip + j + run)] == d.addrs[size_t(skip + j)] + uint64_t(run * bb))
            ++run;
        ucp_request_param_t prm{};
        prm.op_attr_mask = 0;
        char *local = a->base + int64_t(op->res.fresh[size_t(j)]) * bb;
        ucs_status_ptr_t r = u->ucp_get_nbx(ep->ep, local, size_t(run * bb), d.addrs[size_t(skip + j)], op->rkey, &prm);
        if (UCS_PTR_IS_ERR(r)) {
            op->get_error = UCS_PTR_STATUS(r);
            break;
        }
        if (r != nullptr) {
            ++op->outstanding;
            op->gets.push_back(r);
        }
        j += run;
    }
    a->ops.emplace(op->id, std::move(op));
    u->ucp_worker_signal(a->worker);
    *out_op = o->id;
    return KVC_OK;
}

kvc_status agent_op_query(kvc_xfer_agent *a, uint64_t id, int32_t *out_done, const char *fn) {
    std::lock_guard<std::mutex> lk(a->mu);
    auto it = a->ops.find(id);
    if (it == a->ops.end())
        return fail(KVC_ERR_INVALID_ARG, "%s: import %llu was never issued by this agent or was already waited for", fn,
                    (unsigned long long)id);
    *out_done = it->second->state == OpState::kDone ? 1 : 0;
    return KVC_OK;
}

kvc_status agent_op_wait(kvc_xfer_agent *a, uint64_t id, int64_t timeout_ms, kvc_xfer_import_result *out,
                         const char *fn) {
    std::unique_lock<std::mutex> lk(a->mu);
    auto it = a->ops.find(id);
    if (it == a->ops.end())
        return fail(KVC_ERR_INVALID_ARG, "%s: import %llu was never issued by this agent or was already waited for", fn,
                    (unsigned long long)id);
    ImportOp *op = it->second.get();
    auto done = [op] { return op->state == OpState::kDone; };
    if (timeout_ms < 0)
        a->cv.wait(lk, done);
    else if (!a->cv.wait_for(lk, std::chrono::milliseconds(timeout_ms), done))
        return fail(KVC_ERR_BUSY, "%s: import %llu still running after %lld ms", fn, (unsigned long long)id,
                    (long long)timeout_ms);
    op->result.status = op->status;
    op->result.failure = op->failure;
    if (out) {  // a larger (newer) struct keeps the fields this library does not know
        const uint32_t size = out->struct_size;
        std::memcpy(out, &op->result, sizeof op->result);
        out->struct_size = size;
    }
    const kvc_status st = op->status;
    const std::string msg = op->message;
    a->ops.erase(it);
    if (st != KVC_OK) return fail(st, "%s", msg.c_str());
    return KVC_OK;
}

kvc_status agent_stats(kvc_xfer_agent *a, kvc_xfer_stats *out) {
    std::lock_guard<std::mutex> lk(a->mu);
    reap_leases(a);
    kvc_xfer_stats s = a->stats;
    s.exports_active = int64_t(a->exports.size());
    s.export_blocks_held = 0;
    for (auto &kv : a->exports) s.export_blocks_held += int64_t(kv.second.blocks.size());
    s.struct_size = out->struct_size;
    *out = s;
    return KVC_OK;
}

}  // namespace kvc::xfer

#endif  // KVC_HAVE_UCX
