// The agent's UCP side: context, worker, the pool's storage registered once, endpoints and their
// failures, the progress thread; agent_create and agent_destroy. lib/transfer/README.md, "Threads".
#include "transfer/agent.hpp"

#ifdef KVC_HAVE_UCX

#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "core/pool.hpp"
#include "error.hpp"
#include "transfer/agent_state.hpp"

namespace kvc::xfer {
namespace detail {

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
uint64_t unix_ms() {
    return uint64_t(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
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

// Destroys the memory keys of closed endpoints once no close is in flight and no import with gets
// outstanding uses them. all: at teardown, whatever is left.
void reap_rkeys(kvc_xfer_agent *a, bool all) {
    if (!all && !a->closing.empty()) return;
    for (size_t i = 0; i < a->closed_eps.size();) {
        Endpoint *e = a->closed_eps[i].get();
        bool used = false;
        if (!all)
            for (auto &kv : a->ops) used |= kv.second->ep.get() == e && kv.second->outstanding > 0;
        if (used || (!all && e->abandoned)) {
            ++i;
            continue;
        }
        for (auto &kv : e->rkeys) a->u->ucp_rkey_destroy(kv.second);
        e->rkeys.clear();
        a->closed_eps[i] = a->closed_eps.back();
        a->closed_eps.pop_back();
    }
}

// Whether UCX may connect this agent over shared memory: its transports (the config's, else the
// environment's UCX_TLS) are UCX's default (all) or name a shared-memory one.
static bool may_use_shared_memory(const kvc_xfer_config &cfg) {
    const char *tls = cfg.transports && *cfg.transports ? cfg.transports : std::getenv("UCX_TLS");
    if (!tls || !*tls) return true;
    for (const char *w : {"all", "sm", "shm", "posix", "sysv"})
        if (std::strstr(tls, w)) return true;
    return false;
}

// One round of everything the progress thread does; under mu.
bool progress_round(kvc_xfer_agent *a) {
    // Bounded: with sends pending towards a peer that died (shared memory has no failure
    // detection) the worker can report progress on every call, and the answers queued below must
    // still go out.
    for (int i = 0; i < 64 && a->u->ucp_worker_progress(a->worker) != 0; ++i) a->last_activity_ms = now_ms();
    for (PendingReply &r : a->replies) am_send(a, r.ep, kAmReply, &r.msg, sizeof r.msg, 0);
    a->replies.clear();
    // Runs asked for by importers (the push data path): the bytes as the message's data, sent by
    // rendezvous when large. A failed send is the importer's to notice (its timeout, or its
    // endpoint's failure).
    for (PendingData &d : a->pushes) am_send(a, d.ep, kAmData, &d.msg, sizeof d.msg, 0, d.src, d.len);
    a->pushes.clear();
    std::vector<std::shared_ptr<Endpoint>> broken;
    for (auto &kv : a->eps)
        if (kv.second->failed) broken.push_back(kv.second);
    for (auto &e : broken) ep_mark_failed(a, e, e->why);
    bool busy = false;
    for (auto &kv : a->ops) {
        step(a, kv.second.get());
        busy |= kv.second->state != OpState::kDone;
    }
    for (auto &e : a->dead_eps) {
        close_ep(a, e.get());
        if (!e->rkeys.empty()) a->closed_eps.push_back(e);
    }
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
    reap_rkeys(a, false);
    reap_leases(a);
    return busy || !a->closing.empty();
}

}  // namespace detail

using namespace detail;
namespace {

// CUDA pools: copies the staged bytes of the imports whose lease check passed into their blocks,
// without the agent's lock (a GPU wait), then lets them commit. The ops stay in the agent's map
// meanwhile; in kLanding nothing else touches them (step() passes them over, op_wait waits for
// kDone, and agent_destroy joins this thread before it fails the rest).
void land_ready(kvc_xfer_agent *a, std::unique_lock<std::mutex> &lk) {
    if (!a->staged) return;
    std::vector<ImportOp *> ready;
    for (auto &kv : a->ops)
        if (kv.second->state == OpState::kLanding) ready.push_back(kv.second.get());
    if (ready.empty()) return;
    std::vector<kvc_status> st(ready.size());
    std::vector<std::string> why(ready.size());
    lk.unlock();
    for (size_t i = 0; i < ready.size(); ++i)
        if ((st[i] = land(a, ready[i])) != KVC_OK) why[i] = kvc_last_error();
    lk.lock();
    for (size_t i = 0; i < ready.size(); ++i) {
        ImportOp *op = ready[i];
        op->state = OpState::kChecking;
        if (st[i] == KVC_OK)
            op->landed = true;
        else
            op_fail(a, op, st[i], st[i] == KVC_ERR_DEVICE ? KVC_XFER_FAIL_DEVICE : KVC_XFER_FAIL_POOL_FULL,
                    "kvc_xfer_op_wait: import %llu: copying the pulled blocks into the CUDA pool failed: %s",
                    (unsigned long long)op->id, why[i].c_str());
        step(a, op);
    }
}

void progress_thread(kvc_xfer_agent *a) {
    std::unique_lock<std::mutex> lk(a->mu);
    while (!a->stop) {
        const bool busy = progress_round(a);
        land_ready(a, lk);
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
    if (a->ctx) staging_unmap(a);
    if (a->ctx) u->ucp_cleanup(a->ctx);
    staging_free(a);
    a->memh = nullptr;
    a->worker = nullptr;
    a->ctx = nullptr;
}

kvc_status agent_setup(std::unique_ptr<kvc_xfer_agent> &a, const kvc_xfer_config &cfg, kvc_xfer_agent **out,
                       const char *fn);
}  // namespace

kvc_status agent_create(kvc_pool *pool, const kvc_xfer_config &cfg, kvc_xfer_agent **out, const char *fn) {
    const UcxApi *u = nullptr;
    if (kvc_status st = load_ucx(&u, fn); st != KVC_OK) return st;
    kvc_storage_info si{};
    si.struct_size = sizeof si;
    if ((pool->backend != KVC_BACKEND_CPU && pool->backend != KVC_BACKEND_CUDA) ||
        kvc_storage_get_info(pool, &si) != KVC_OK)
        return fail(KVC_ERR_UNSUPPORTED, "%s: KV transfer needs a pool with KV storage (CPU or CUDA backend)", fn);
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
        a->max_get_bytes = a->max_mapped_get_bytes = std::atoll(mg);
    if (const char *mc = std::getenv("KVC_XFER_MAPPED_COPY"); mc && std::atoi(mc) == 0) a->mapped_copy = false;
    // The importer's data path (lib/transfer/README.md, "Data paths"): one-sided gets unless
    // KVC_XFER_DATA_PATH=push asks for pushes. Gets are what every exporter answers (one built
    // before the push path would leave a push import to time out), and the push path's gain over
    // TCP was not reproducible on the measuring machine (1.4-2x in one run, level in another).
    const char *dp = std::getenv("KVC_XFER_DATA_PATH");
    a->push = dp && std::strcmp(dp, "push") == 0;
    std::random_device rd;
    a->nonce = (uint64_t(rd()) << 32 | rd()) ^ uint64_t(getpid()) ^ uint64_t(now_ms()) << 20;
    if (a->nonce == 0) a->nonce = 1;
    // A CUDA pool's blocks go through host staging (agent_staging.cpp): no UCX transport here
    // reads device memory.
    a->staged = pool->backend == KVC_BACKEND_CUDA;
    if (!a->staged) {
        // A CPU pool's exports go to UCX-allocated shared memory where an importer may come over
        // shared memory (KVC_XFER_EXPORT_STAGING=0 turns it off): importers there map it and copy
        // once, and read the export's lease word in it instead of asking the exporter (version 2
        // descriptors), so they need no message answered by the exporter — whose shared-memory
        // receive path a killed importer can wedge for good (lib/transfer/README.md, "Lease check").
        const char *e = std::getenv("KVC_XFER_EXPORT_STAGING");
        a->stage_cpu_exports = (!e || !*e || std::atoi(e) != 0) && may_use_shared_memory(cfg);
    }
    if (a->staged || a->stage_cpu_exports)
        if (kvc_status st = staging_init(a.get(), fn); st != KVC_OK) return st;

    try {
        const kvc_status st = agent_setup(a, cfg, out, fn);
        if (st != KVC_OK && a) teardown(a.get());  // idempotent: some failures tore down already
        return st;
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
    if (!a->staged) {  // a CUDA pool's device memory is not registered: its staging chunks are
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
    }
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
    const std::pair<unsigned, ucp_am_recv_callback_t> handlers[] = {
        {kAmCheck, am_check_cb}, {kAmReply, am_reply_cb}, {kAmPull, am_pull_cb}, {kAmData, am_data_cb}};
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
            (void)kv.second->lease_buf.release();  // a get of the lease word may still land there
            abort_import(a->pool, &kv.second->res);
        }
    for (auto &kv : a->exports) {
        lease_word_end(&kv.second);  // importers that still map the staging see the lease end
        release_blocks(a->pool, kv.second.blocks);
    }
    a->exports.clear();
    a->ops.clear();
    reap_rkeys(a, true);
    lk.unlock();
    teardown(a);
    delete a;
}

}  // namespace kvc::xfer

#endif  // KVC_HAVE_UCX
