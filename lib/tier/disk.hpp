// The disk tier: num_slots block slots in one file the user names.
//
// File format: slot s occupies [s * slot_bytes, (s + 1) * slot_bytes): a header region (4 KiB
// multiple) and a data region (block_stride rounded up to 4 KiB), so every I/O is aligned for
// O_DIRECT. The header carries the block's identity (hash, parent hash, LoRA id, extras digest,
// priority, token ids), the fingerprint (layout, and the caller's identity string if any), a write stamp (LRU order
// across restarts), a hash of the header itself and an XXH3-64 checksum over the block's bytes seeded with that header
// hash — so the checksum covers bytes and identity together. A read is used only when all of it matches what the index
// expects; anything else (I/O error, short read, mismatch) is a miss. A keyed tier (kvc_tier_attach_disk_keyed) also
// writes a MAC (tier/disk_mac.hpp) after the token ids, over the header fields, token ids and block bytes, and mixes a
// key-derived value into the fingerprint: XXH3 framing can be recomputed by whoever writes the file, the MAC cannot
// without the key.
//
// With KVC_DISK_PERSISTENT the file is kept and, on attach, every slot header is read back and valid
// ones re-enter the index (their bytes are verified later, when a prefix hit reads them). Without
// it the file is truncated on attach.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "storage/kv_layout.hpp"
#include "tier/disk_mac.hpp"
#include "tier/io.hpp"
#include "tier/slots.hpp"
#include "tier/stats.hpp"

namespace kvc {

enum DiskOutcome : int32_t { kDiskOk = 0, kDiskIoError = 1, kDiskNoSpace = 2, kDiskShortRead = 3, kDiskChecksum = 4 };

class DiskTier {
public:
    static constexpr int kBatch = 64;  // slots per I/O submission

    DiskTier() = default;
    DiskTier(const DiskTier &) = delete;
    DiskTier &operator=(const DiskTier &) = delete;
    ~DiskTier();

    // Opens (creates, owner-only) the file and, if persistent, re-indexes its valid slots. Not yet visible to
    // other threads: no lock needed. Errors carry `fn` and the path.
    // `identity` (may be NULL; at most KVC_MAX_DISK_IDENTITY_LEN bytes, checked by the caller) is
    // mixed into the fingerprint every header carries. With a key (key_len bytes, range checked by
    // the caller) every slot is authenticated; KVC_ERR_UNSUPPORTED before the file is touched when
    // libsodium cannot be loaded.
    kvc_status open(const char *path, int32_t num_slots, const KvLayout &layout, int32_t flags, const char *identity,
                    const char *fn, const uint8_t *key = nullptr, size_t key_len = 0);

    // Writes host slot data to disk slots (identity taken from this tier's index, where the slots
    // are busy and indexed) / reads disk slots into host slot buffers and verifies them. Run
    // outside the pool lock by the tier executor (one caller at a time); out[i] gets a DiskOutcome.
    void write_slots(const int32_t *disk_slots, char *const *data, int32_t *out, int n);
    void read_slots(const int32_t *disk_slots, char *const *data, int32_t *out, int n);
    // Zeroes the slots' headers in the file, so that no later attach re-indexes what they held.
    // A failed write (out[i] = kDiskIoError) leaves a header a persistent attach would re-index.
    void forget_slots(const int32_t *disk_slots, int32_t *out, int n);

    TierSlots slots;
    TierCounters stats;
    std::vector<uint64_t> stamps;  // per slot: write order (for LRU order after a reopen)
    uint64_t next_stamp = 1;
    std::atomic<bool> direct{false};  // may turn off at the first I/O (executor) while stats read it
    bool persistent = false;
    bool uring = false;
    int64_t recovered = 0;  // slots re-indexed from a persistent file at attach
    int64_t foreign = 0;    // slots whose well-formed header at attach had another fingerprint

private:
    kvc_status open_file(const char *path, int32_t flags, bool *created, const char *fn);
    kvc_status open_failed(const char *path, const char *fn) const;
    kvc_status claim_file(const char *path, int64_t file_bytes, int32_t num_slots, const char *fn);
    size_t signed_bytes() const;  // the header's part the MAC covers: fixed fields + token ids
    void build_header(int32_t slot, const char *data, char *hdr) const;
    int32_t verify(int32_t slot, const char *hdr, const char *data) const;
    void run_io(IoOp *ops, int n);
    void scan();

    int fd_ = -1;
    IoEngine io_;
    KvLayout layout_;
    int64_t header_bytes_ = 0;
    int64_t data_bytes_ = 0;
    int64_t slot_bytes_ = 0;
    uint64_t fingerprint_ = 0;
    DiskMac mac_;              // keyed only for kvc_tier_attach_disk_keyed
    char *scratch_ = nullptr;  // kBatch header buffers, 4 KiB aligned
};

}  // namespace kvc
