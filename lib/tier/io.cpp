#include "tier/io.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#ifdef KVC_HAVE_URING
#include <liburing.h>
#endif

namespace kvc {
namespace {

#ifdef KVC_TEST_HOOKS  // fault injection: the test archive only (lib/CMakeLists.txt)
std::atomic<int32_t> g_fault_kind{kFaultNone};
std::atomic<int32_t> g_fault_count{0};
std::atomic<bool> g_force_sync{false};

// The fault to inject into the next op of this kind, if any (consumes one count). Block copies and
// header-only I/O (a persistent file's scan, a forgotten slot's erasure) have faults of their own,
// so a test counts exactly the operations it plans.
int32_t take_fault(const IoOp &op) {
    int32_t kind = g_fault_kind.load(std::memory_order_relaxed);
    if (kind == kFaultNone) return kFaultNone;
    const bool header_only = op.data_len == 0;
    if (header_only != (kind == kFaultHeaderWriteIo)) return kFaultNone;
    const bool write_fault = kind == kFaultWriteNoSpace || kind == kFaultWriteIo || kind == kFaultHeaderWriteIo;
    if (write_fault != op.write) return kFaultNone;
    int32_t left = g_fault_count.load(std::memory_order_relaxed);
    while (left > 0 && !g_fault_count.compare_exchange_weak(left, left - 1)) {}
    if (left <= 0) return kFaultNone;
    return kind;
}
bool force_sync() { return g_force_sync.load(std::memory_order_relaxed); }
#else
// libkvc.so: no faults, and io_uring whenever the kernel offers it.
constexpr int32_t take_fault(const IoOp &) { return kFaultNone; }
constexpr bool force_sync() { return false; }
#endif

int64_t full_len(const IoOp &op) { return int64_t(op.header_len + op.data_len); }

}  // namespace

#ifdef KVC_TEST_HOOKS
void tier_fault_set(int32_t kind, int32_t count) {
    g_fault_count.store(count, std::memory_order_relaxed);
    g_fault_kind.store(kind, std::memory_order_relaxed);
}

void tier_force_sync_io(bool on) { g_force_sync.store(on, std::memory_order_relaxed); }
#endif

IoEngine::~IoEngine() {
#ifdef KVC_HAVE_URING
    if (ring_) {
        io_uring_queue_exit(static_cast<io_uring *>(ring_));
        delete static_cast<io_uring *>(ring_);
    }
#endif
}

bool IoEngine::init(unsigned depth) {
    depth_ = depth;
#ifdef KVC_HAVE_URING
    if (force_sync()) return false;
    io_uring *r = new io_uring();
    if (io_uring_queue_init(depth, r, 0) < 0) {
        delete r;
        return false;
    }
    ring_ = r;
    return true;
#else
    return false;
#endif
}

void IoEngine::run_sync(int fd, IoOp &op) {
    iovec iov[2] = {{op.header, op.header_len}, {op.data, op.data_len}};
    ssize_t r;
    do {
        r = op.write ? pwritev(fd, iov, 2, op.offset) : preadv(fd, iov, 2, op.offset);
    } while (r < 0 && errno == EINTR);
    op.result = r < 0 ? -int64_t(errno) : int64_t(r);
}

void IoEngine::run(int fd, IoOp *ops, int n) {
    // Injected write faults replace the I/O; read faults corrupt its outcome afterwards.
    int32_t fault[64];
    bool skip[64];
    int done = 0;
    while (done < n) {
        const int m = n - done < 64 ? n - done : 64;
        IoOp *batch = ops + done;
        for (int i = 0; i < m; ++i) {
            fault[i] = take_fault(batch[i]);
            skip[i] = fault[i] == kFaultWriteNoSpace || fault[i] == kFaultWriteIo || fault[i] == kFaultReadIo ||
                      fault[i] == kFaultHeaderWriteIo;
            if (skip[i]) batch[i].result = fault[i] == kFaultWriteNoSpace ? -ENOSPC : -EIO;
        }
#ifdef KVC_HAVE_URING
        if (ring_) {
            io_uring *r = static_cast<io_uring *>(ring_);
            iovec iov[64][2];
            int queued = 0;
            for (int i = 0; i < m; ++i) {
                if (skip[i]) continue;
                batch[i].result = -EIO;  // until a completion says otherwise
                io_uring_sqe *sqe = io_uring_get_sqe(r);
                if (!sqe) {  // ring smaller than the batch: do this one synchronously
                    run_sync(fd, batch[i]);
                    continue;
                }
                iov[i][0] = {batch[i].header, batch[i].header_len};
                iov[i][1] = {batch[i].data, batch[i].data_len};
                if (batch[i].write)
                    io_uring_prep_writev(sqe, fd, iov[i], 2, uint64_t(batch[i].offset));
                else
                    io_uring_prep_readv(sqe, fd, iov[i], 2, uint64_t(batch[i].offset));
                io_uring_sqe_set_data64(sqe, uint64_t(i));
                ++queued;
            }
            int submitted = queued ? io_uring_submit(r) : 0;
            if (submitted < 0) submitted = 0;
            int reaped = 0;
            while (reaped < submitted) {
                io_uring_cqe *cqe = nullptr;
                int rc = io_uring_wait_cqe(r, &cqe);
                // Transient (a signal, the kernel short of resources for a moment): wait again.
                // Giving up here would let the synchronous fallback below reuse buffers that
                // submitted ops may still write into.
                if (rc == -EINTR || rc == -EAGAIN || rc == -EBUSY) continue;
                if (rc < 0) break;  // the ring itself is broken (EBADF, EFAULT...): nothing to wait for
                batch[io_uring_cqe_get_data64(cqe)].result = cqe->res;
                io_uring_cqe_seen(r, cqe);
                ++reaped;
            }
            if (submitted < queued || reaped < submitted) {
                // The ring failed us: finish whatever did not complete synchronously. Reset results
                // first so a stale value is never mistaken for success.
                for (int i = 0; i < m; ++i)
                    if (!skip[i] && batch[i].result != full_len(batch[i])) run_sync(fd, batch[i]);
            }
        } else
#endif
        {
            for (int i = 0; i < m; ++i)
                if (!skip[i]) run_sync(fd, batch[i]);
        }
        for (int i = 0; i < m; ++i) {
            IoOp &op = batch[i];
            if (op.write || op.result != full_len(op)) continue;
            if (fault[i] == kFaultReadShort) {
                op.result = full_len(op) - 512;
            } else if (fault[i] == kFaultReadBitFlip && op.data_len > 0) {
                static_cast<unsigned char *>(op.data)[0] ^= 0x10;  // byte 0 is always payload
            }
        }
        done += m;
    }
}

}  // namespace kvc
