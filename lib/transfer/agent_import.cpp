// The import side: checks and reservation (kvc_xfer_import, caller's thread), the state machine the
// progress thread advances (gets, lease check, commit or failure), and waiting for an import.
// lib/transfer/README.md, protocol steps 2 to 5.
#include "transfer/agent.hpp"

#ifdef KVC_HAVE_UCX

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/pool.hpp"
#include "error.hpp"
#include "storage/pool_access.hpp"
#include "transfer/agent_state.hpp"

namespace kvc::xfer {
namespace detail {
namespace {

std::string vformat(const char *fmt, va_list ap) {
    char buf[512];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    return buf;
}

// Imports of at least this many mapped bytes are copied with non-temporal stores: the KV goes to
// memory anyway, and a block-sized memcpy (glibc streams only above x86_non_temporal_threshold,
// 99 MiB on the measuring VM) reads every destination line first and evicts the cache: 2 MiB
// pieces copied at 5620-7030 MiB/s that way, at 10320-10780 MiB/s streamed four pages at a time
// (as glibc's own large copy does), on the measuring VM (tests/bench/RESULTS.md, session 18).
// Smaller imports keep memcpy (their bytes may still be in cache).
constexpr size_t kStreamMinBytes = size_t(16) << 20;

#if defined(__x86_64__)
__attribute__((target("avx2"))) inline void stream128(char *d, const char *s) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(s));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(s + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(s + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(s + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i *>(d), a);
    _mm256_stream_si256(reinterpret_cast<__m256i *>(d + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i *>(d + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i *>(d + 96), e);
}

// memcpy with non-temporal stores (AVX2): the head up to 32-byte alignment of d and the tail by
// memcpy; the body four pages at a time, interleaved; fenced.
__attribute__((target("avx2"))) void copy_streaming(char *d, const char *s, size_t n) {
    size_t head = (32 - (reinterpret_cast<uintptr_t>(d) & 31)) & 31;
    if (head > n) head = n;
    std::memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    constexpr size_t kPage = 4096, kGroup = 4 * kPage;
    size_t i = 0;
    for (; i + kGroup <= n; i += kGroup)
        for (size_t off = 0; off < kPage; off += 128)
            for (size_t k = 0; k < 4; ++k) stream128(d + i + k * kPage + off, s + i + k * kPage + off);
    for (; i + 128 <= n; i += 128) stream128(d + i, s + i);
    std::memcpy(d + i, s + i, n - i);
    _mm_sfence();
}
#endif

// The mapped runs of one import (ImportOp::copies), without any lock.
void copy_mapped(const std::vector<ImportOp::MappedCopy> &copies) {
    size_t total = 0;
    for (const auto &c : copies) total += c.len;
#if defined(__x86_64__)
    static const bool avx2 = __builtin_cpu_supports("avx2");
    if (avx2 && total >= kStreamMinBytes) {
        for (const auto &c : copies) copy_streaming(c.dst, c.src, c.len);
        return;
    }
#endif
    for (const auto &c : copies) std::memcpy(c.dst, c.src, c.len);
}

}  // namespace

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

void record_failure(kvc_xfer_agent *a, int32_t failure) {
    ++a->stats.imports_failed;
    if (failure > 0 && failure < int32_t(sizeof a->stats.failures / sizeof a->stats.failures[0]))
        ++a->stats.failures[failure];
    else if (failure == KVC_XFER_FAIL_DEVICE)
        ++a->stats.failures_device;
}

namespace {

// The lease check of a version 2 descriptor (a staged export): the export's lease word, read after
// every data get and copy has completed (outstanding 0: the copies were made before the agent's
// mutex was taken again, the gets' completion seen by this thread). Mapped here: a load after a
// full fence (no data load may pass it; the exporter clears the word before the slots can be
// reused). Otherwise one more get, whose completion step() waits for. No message to the exporter.
void read_lease_word(kvc_xfer_agent *a, ImportOp *op) {
    const uint64_t want = lease_tag(op->desc.nonce, op->desc.export_id);
    if (op->lease_ptr) {
        // The copies' loads are ordered before this one by the agent's mutex already (the copying
        // thread released it after them, this thread acquired it since); the fence says so on
        // every architecture (not under TSan, which does not model fences: the mutex suffices).
#if !defined(__SANITIZE_THREAD__)
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
        op->check = __atomic_load_n(op->lease_ptr, __ATOMIC_ACQUIRE) == want ? 1 : 0;
        return;
    }
    ucp_request_param_t prm{};
    prm.op_attr_mask = 0;
    ucs_status_ptr_t r =
        a->u->ucp_get_nbx(op->ep->ep, op->lease_buf.get(), sizeof(uint64_t), op->desc.lease_addr, op->rkey, &prm);
    if (UCS_PTR_IS_ERR(r)) {
        op_fail(a, op, KVC_ERR_IO, KVC_XFER_FAIL_PEER, "kvc_xfer_op_wait: import %llu: reading the lease word failed: %s",
                (unsigned long long)op->id, a->u->ucs_status_string(UCS_PTR_STATUS(r)));
        return;
    }
    if (r == nullptr) {  // completed in place
        op->check = *op->lease_buf == want ? 1 : 0;
        return;
    }
    op->gets.push_back(r);  // capacity: one per fresh block, and every data get is done
    ++op->outstanding;
    op->lease_reading = true;
}

// A failed op whose endpoint is closed, with requests UCX never completed (seen with UCX 1.13's
// emulated gets after a force-close): after kAbandonAfterCloseMs they are freed (UCX releases a
// freed request when it completes, if ever) and every fresh block is leaked — never returned to
// the pool, since a late get could still write it — so that the op finishes with its failure.
bool abandon_due(kvc_xfer_agent *a, ImportOp *op, int64_t now) {
    if (op->outstanding == 0 || !op->copies.empty()) return false;  // mapped copies always finish
    if (op->ep && !op->ep->closed) return false;
    int64_t bound = kAbandonAfterCloseMs;
#ifdef KVC_TEST_HOOKS
    if (const int64_t t = stuck_gets_ms(); t > 0) bound = t;
#endif
    (void)a;
    return now - op->failing_since_ms >= bound;
}

void abandon_requests(kvc_xfer_agent *a, ImportOp *op) {
    const size_t reqs = op->gets.size();
    for (void *r : op->gets) a->u->ucp_request_free(r);
    op->gets.clear();
    op->outstanding = 0;
    if (op->ep) op->ep->abandoned = true;  // its rkeys may still be used by those requests
    const size_t leaked = op->res.fresh.size();
    op->res.fresh.clear();  // leaked: abort_import returns only the held (skipped) blocks
    op->staged = StagingLease{};  // CUDA pool: the slots the gets land in, leaked likewise
    (void)op->lease_buf.release();  // a get of the lease word may be among them
    char more[160];
    std::snprintf(more, sizeof more,
                  "; %zu request(s) never completed after its endpoint was closed: abandoned, %zu block(s) leaked",
                  reqs, leaked);
    op->message += more;
}

}  // namespace

// Advances one import; under mu.
void step(kvc_xfer_agent *a, ImportOp *op) {
    // kLanding: the progress thread is copying its bytes outside the lock (land_ready).
    if (op->state == OpState::kDone || op->state == OpState::kLanding) return;
    for (size_t i = 0; i < op->gets.size();) {
        ucs_status_t gs = a->u->ucp_request_check_status(op->gets[i]);
#ifdef KVC_TEST_HOOKS
        if (stuck_gets_ms() > 0) gs = UCS_INPROGRESS;  // kvct_xfer_stuck_gets
#endif
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
        } else if (now >= op->deadline_ms) {
            // In kChecking every block landed but the exporter never answered: its worker receives
            // nothing from this importer (over shared memory: a peer that died mid-send can leave a
            // hole in the exporter's receive FIFO that stops it for good; lib/transfer/README.md,
            // "Open").
            op_fail(a, op, KVC_ERR_IO, KVC_XFER_FAIL_TIMEOUT, "kvc_xfer_op_wait: import %llu timed out after %lld ms%s",
                    (unsigned long long)op->id, (long long)a->timeout_ms,
                    op->state == OpState::kChecking
                        ? ": every block had landed, but the exporter never answered the lease check"
                        : "");
        } else if (op->state == OpState::kPulling && op->outstanding == 0 && op->awaiting == 0) {
            if (op->refused) {
                op_fail(a, op, KVC_ERR_STATE, KVC_XFER_FAIL_LEASE,
                        "kvc_xfer_op_wait: import %llu: the exporter no longer holds export %llu (released, expired "
                        "or another agent) and refused to send its blocks; nothing cached",
                        (unsigned long long)op->id, (unsigned long long)op->desc.export_id);
            } else if (op->get_error != UCS_OK) {
                op_fail(a, op, KVC_ERR_IO, KVC_XFER_FAIL_PEER, "kvc_xfer_op_wait: import %llu: a get failed: %s",
                        (unsigned long long)op->id, a->u->ucs_status_string(op->get_error));
            } else if (op->desc.lease_addr && !op->push) {
                op->state = OpState::kChecking;
                read_lease_word(a, op);
            } else {
                op->state = OpState::kChecking;
                op->check_msg = CheckMsg{op->desc.export_id, op->desc.nonce, op->id, a->nonce};
                ucs_status_t st =
                    am_send(a, op->ep->ep, kAmCheck, &op->check_msg, sizeof op->check_msg, UCP_AM_SEND_FLAG_REPLY);
                if (st != UCS_OK && st != UCS_INPROGRESS)
                    op_fail(a, op, KVC_ERR_IO, KVC_XFER_FAIL_PEER,
                            "kvc_xfer_op_wait: import %llu: the lease check could not be sent: %s",
                            (unsigned long long)op->id, a->u->ucs_status_string(st));
            }
        } else if (op->state == OpState::kChecking && op->lease_reading) {
            if (op->outstanding == 0) {
                op->lease_reading = false;
                if (op->get_error != UCS_OK)
                    op_fail(a, op, KVC_ERR_IO, KVC_XFER_FAIL_PEER,
                            "kvc_xfer_op_wait: import %llu: reading the lease word failed: %s",
                            (unsigned long long)op->id, a->u->ucs_status_string(op->get_error));
                else
                    op->check = *op->lease_buf == lease_tag(op->desc.nonce, op->desc.export_id) ? 1 : 0;
            }
        } else if (op->state == OpState::kChecking && op->check == 0) {
            op_fail(a, op, KVC_ERR_STATE, KVC_XFER_FAIL_LEASE,
                    "kvc_xfer_op_wait: import %llu: the exporter no longer holds export %llu (released, expired or "
                    "another agent); nothing cached",
                    (unsigned long long)op->id, (unsigned long long)op->desc.export_id);
        } else if (op->state == OpState::kChecking && op->check == 1 && a->staged && !op->landed) {
            // CUDA pool: the bytes are in host staging; the progress thread copies them into the
            // blocks without the lock, then steps this op again.
            op->state = OpState::kLanding;
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
        if (op->failing_since_ms == 0) op->failing_since_ms = now;
        if (op->outstanding > 0 && op->ep) ep_mark_failed(a, op->ep, "closed after a failed import");
        if (abandon_due(a, op, now)) abandon_requests(a, op);
        if (op->outstanding == 0) {
            abort_import(a->pool, &op->res);
            record_failure(a, op->failure);
            op->state = OpState::kDone;
        }
    }
    if (op->state == OpState::kDone) {
        staging_release(a, &op->staged);  // no get or copy uses it any more
        op->rkey = nullptr;  // the endpoint's
        op->ep.reset();
        op->result.status = op->status;
        op->result.failure = op->failure;
        op->result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - op->start).count();
        a->stats.import_seconds += op->result.seconds;
        a->cv.notify_all();
    }
}

}  // namespace detail

using namespace detail;

static kvc_status start_import(kvc_xfer_agent *a, std::unique_ptr<ImportOp> &op, const Descriptor &d, int64_t n,
                               std::unique_lock<std::mutex> &lk, uint64_t *out_op, ImportOp **copy_op,
                               const char *fn);

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
    // CUDA pool: the barrier orders this agent's copy stream, which writes the blocks (land()).
    if (kvc_status st = pool_storage_barrier(a->pool, a->staged ? a->stream : nullptr); st != KVC_OK) {
        abort_import(a->pool, &op->res);
        return refuse(st == KVC_ERR_DEVICE ? KVC_XFER_FAIL_DEVICE : KVC_XFER_FAIL_POOL_FULL, st);
    }
    // CUDA pool: the gets land in host staging (agent_staging.cpp).
    if (a->staged && !op->res.fresh.empty()) {
        kvc_status st = KVC_OK;
        try {
            st = staging_reserve(a, int64_t(op->res.fresh.size()), &op->staged, fn);
        } catch (...) {
            abort_import(a->pool, &op->res);
            throw;
        }
        if (st != KVC_OK) {
            abort_import(a->pool, &op->res);
            return refuse(KVC_XFER_FAIL_POOL_FULL, st);
        }
    }
    op->result.struct_size = sizeof op->result;
    op->result.blocks = n;
    op->result.blocks_skipped = op->res.skipped;

    std::unique_lock<std::mutex> lk(a->mu);
    // From here until the gets are posted, host memory can run out (the endpoint table, the op
    // table): then everything reserved goes back, as for any other refusal. The gets' vector and the
    // op's entry in a->ops are in place before the first get is posted, so no throw can come while
    // a get writes into the reserved blocks.
    ImportOp *copy_op = nullptr;
    kvc_status st = KVC_OK;
    try {
        st = start_import(a, op, d, n, lk, out_op, &copy_op, fn);
    } catch (...) {
        // op is still ours: it moves into a->ops only where nothing can throw any more.
        if (!lk.owns_lock()) lk.lock();
        staging_release(a, &op->staged);
        lk.unlock();
        abort_import(a->pool, &op->res);
        throw;
    }
    if (copy_op) {
        // Runs of exporter memory mapped here (a staged export over shared memory): copied now, in
        // this thread, without the agent's lock (the progress thread and other callers go on).
        // The op is in the table with one count in `outstanding` for these copies, so its blocks
        // cannot go back and its rkey (the mapping) cannot be destroyed meanwhile; nothing else
        // writes its fresh blocks. Then the lease check follows as after gets.
        lk.unlock();  // start_import returned with it held
        copy_mapped(copy_op->copies);
        lk.lock();
        copy_op->copies.clear();
        --copy_op->outstanding;
        a->u->ucp_worker_signal(a->worker);
    }
    return st;
}

// kvc_xfer_import's second half, a->mu held through `lk`: the endpoint, the gets.
static kvc_status start_import(kvc_xfer_agent *a, std::unique_ptr<ImportOp> &op, const Descriptor &d, int64_t n,
                               std::unique_lock<std::mutex> &lk, uint64_t *out_op, ImportOp **copy_op,
                               const char *fn) {
    const UcxApi *u = a->u;
    ++a->stats.imports_started;
    a->stats.blocks_skipped += op->res.skipped;
    op->id = a->next_op++;
    op->deadline_ms = now_ms() + a->timeout_ms;
    ImportOp *o = op.get();
    if (op->res.fresh.empty()) {
        // Everything is cached here already: nothing to pull, nothing to check. The op enters the
        // table first: nothing after that can throw.
        a->ops.emplace(o->id, std::move(op));
        commit_import(a->pool, o->keys.data(), d.tokens.data(), n, &o->res);
        o->result.cached_tokens = n * d.block_size;
        ++a->stats.imports_ok;
        o->state = OpState::kDone;
        o->result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - o->start).count();
        *out_op = o->id;
        return KVC_OK;
    }
    op->gets.reserve(op->res.fresh.size());  // at most one get per block: push_back cannot throw
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
            staging_release(a, &op->staged);
            lk.unlock();
            abort_import(a->pool, &op->res);
            return fail(KVC_ERR_IO, "%s: cannot reach the exporter (ucp_ep_create: %s)", fn, u->ucs_status_string(s));
        }
        a->eps[key] = ep;
    }
    op->ep = ep;
    const std::string rkey_bytes(reinterpret_cast<const char *>(d.rkey.data()), d.rkey.size());
    auto cached = ep->rkeys.find(rkey_bytes);
    ucs_status_t s = UCS_OK;
    if (cached != ep->rkeys.end()) {
        op->rkey = cached->second;
    } else if ((s = u->ucp_ep_rkey_unpack(ep->ep, d.rkey.data(), &op->rkey)) == UCS_OK) {
        try {
            ep->rkeys.emplace(rkey_bytes, op->rkey);
        } catch (...) {
            u->ucp_rkey_destroy(op->rkey);
            op->rkey = nullptr;
            throw;
        }
    }
    if (s != UCS_OK) {
        record_failure(a, KVC_XFER_FAIL_PEER);
        op->rkey = nullptr;
        staging_release(a, &op->staged);
        lk.unlock();
        abort_import(a->pool, &op->res);
        return fail(KVC_ERR_IO, "%s: the exporter's memory key was refused (ucp_ep_rkey_unpack: %s)", fn,
                    u->ucs_status_string(s));
    }
    // One get per run of blocks contiguous on both sides.
    const int64_t skip = op->res.skipped;
    const int64_t bb = a->block_bytes;
    const int64_t m = int64_t(op->res.fresh.size());
    o->push = a->push;
    // Exporter memory this process has mapped (ucp_rkey_ptr succeeds: a staged export over shared
    // memory) is copied by the importer itself, not by gets (ImportOp::copies), in runs not cut
    // into max_get_bytes pieces (agent_state.hpp, max_mapped_get_bytes).
    void *mapped_at = nullptr;
    const bool mapped =
        a->mapped_copy && !o->push && u->ucp_rkey_ptr(o->rkey, d.addrs[size_t(skip)], &mapped_at) == UCS_OK;
    const int64_t max_run = std::max<int64_t>(1, (mapped ? a->max_mapped_get_bytes : a->max_get_bytes) / bb);
    // A version 2 descriptor's lease word, where it is mapped here (8 bytes, contiguous): read by a
    // load after the copies; otherwise by a get (read_lease_word).
    if (d.lease_addr && !o->push) {
        void *w0 = nullptr, *w7 = nullptr;
        if (u->ucp_rkey_ptr(o->rkey, d.lease_addr, &w0) == UCS_OK &&
            u->ucp_rkey_ptr(o->rkey, d.lease_addr + 7, &w7) == UCS_OK &&
            static_cast<char *>(w7) == static_cast<char *>(w0) + 7 && reinterpret_cast<uintptr_t>(w0) % 8 == 0)
            o->lease_ptr = static_cast<const uint64_t *>(w0);
        else
            o->lease_buf.reset(new uint64_t(0));  // may throw: the op is not in the table yet
    }
    if (o->push) o->runs.reserve(size_t(m));  // at most one run per block: push_back cannot throw
    if (mapped) o->copies.reserve(size_t(m));
    // The op enters the table before its first get: nothing after this can throw.
    a->ops.emplace(o->id, std::move(op));
    // Where fresh block j's bytes land: the block itself, or (CUDA pool) its staging slot.
    auto local_of = [&](int64_t j) {
        return o->staged.ck ? staging_slot(a, o->staged, j) : a->base + int64_t(o->res.fresh[size_t(j)]) * bb;
    };
    for (int64_t j = 0; j < m;) {
        int64_t run = 1;
        while (j + run < m && run < max_run && local_of(j + run) == local_of(j) + run * bb &&
               d.addrs[size_t(skip + j + run)] == d.addrs[size_t(skip + j)] + uint64_t(run * bb))
            ++run;
        if (o->push) {
            // Ask the exporter for the run; its answer lands in am_data_cb (agent_push.cpp).
            const PullMsg pm{d.export_id, d.nonce, o->id, a->nonce, uint64_t(o->runs.size()),
                             d.addrs[size_t(skip + j)], uint64_t(run * bb)};
            const ucs_status_t st = am_send(a, ep->ep, kAmPull, &pm, sizeof pm, UCP_AM_SEND_FLAG_REPLY);
            if (st != UCS_OK && st != UCS_INPROGRESS) {
                o->get_error = st;
                break;
            }
            o->runs.push_back(ImportOp::Run{local_of(j), run * bb, false});
            ++o->awaiting;
            j += run;
            continue;
        }
        if (mapped) {
            // Both ends of the run inside the mapping, contiguous there: copied after the lock is
            // dropped (agent_import); otherwise a get as usual.
            const uint64_t ra = d.addrs[size_t(skip + j)];
            void *first = nullptr, *last = nullptr;
            if (u->ucp_rkey_ptr(o->rkey, ra, &first) == UCS_OK &&
                u->ucp_rkey_ptr(o->rkey, ra + uint64_t(run * bb) - 1, &last) == UCS_OK &&
                static_cast<char *>(last) == static_cast<char *>(first) + run * bb - 1) {
                o->copies.push_back(ImportOp::MappedCopy{local_of(j), static_cast<const char *>(first), size_t(run * bb)});
                j += run;
                continue;
            }
        }
        ucp_request_param_t prm{};
        prm.op_attr_mask = 0;
        char *local = local_of(j);
        ucs_status_ptr_t r = u->ucp_get_nbx(ep->ep, local, size_t(run * bb), d.addrs[size_t(skip + j)], o->rkey, &prm);
        if (UCS_PTR_IS_ERR(r)) {
            o->get_error = UCS_PTR_STATUS(r);
            break;
        }
        if (r != nullptr) {
            ++o->outstanding;
            o->gets.push_back(r);
        }
        j += run;
    }
    if (!o->copies.empty()) {
        ++o->outstanding;  // the mapped copies, made by the caller once the lock is dropped
        *copy_op = o;
    }
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

}  // namespace kvc::xfer

#endif  // KVC_HAVE_UCX
