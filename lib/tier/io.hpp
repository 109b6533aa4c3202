// Block I/O for the disk tier: batches of (header + data) reads and writes at slot offsets, through
// io_uring (liburing, when the library was built with it and the kernel allows it) or
// preadv/pwritev otherwise. Test fault injection (lib/testing.h) is applied here, below every
// caller, so the tier code sees injected faults exactly like real ones.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvc {

struct IoOp {
    bool write = false;
    int64_t offset = 0;
    void *header = nullptr;  // 4 KiB aligned, header_len bytes
    size_t header_len = 0;
    void *data = nullptr;  // 4 KiB aligned, data_len bytes
    size_t data_len = 0;
    int64_t result = 0;  // bytes transferred, or -errno
};

class IoEngine {
public:
    IoEngine() = default;
    IoEngine(const IoEngine &) = delete;
    IoEngine &operator=(const IoEngine &) = delete;
    ~IoEngine();

    // Sets up io_uring with `depth` entries; false (and the pread/pwrite fallback) when liburing is
    // missing, the kernel refuses, or a test forced the fallback.
    bool init(unsigned depth);

    // Runs every op; each gets its own result. Not thread-safe (one caller at a time).
    void run(int fd, IoOp *ops, int n);

private:
    void run_sync(int fd, IoOp &op);
    void *ring_ = nullptr;  // struct io_uring *
    unsigned depth_ = 0;
};

// Test fault injection (set through lib/testing.h; the setters exist in the test archive only,
// built with KVC_TEST_HOOKS: in libkvc.so no operation ever takes a fault).
enum TierFault : int32_t {
    kFaultNone = 0,
    kFaultWriteNoSpace = 1,
    kFaultWriteIo = 2,
    kFaultReadIo = 3,
    kFaultReadShort = 4,
    kFaultReadBitFlip = 5,
    kFaultHeaderWriteIo = 6,  // header-only writes (a forgotten slot's erasure) only
};
void tier_fault_set(int32_t kind, int32_t count);
void tier_force_sync_io(bool on);

}  // namespace kvc
