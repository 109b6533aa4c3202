#include "tier/disk.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "error.hpp"
#include "tier/host.hpp"

namespace kvc {
namespace {

constexpr uint64_t kMagic = 0x3152454954435653ull;  // "SVCTIER1" little-endian: identifies a slot
constexpr uint32_t kVersion = 1;

// Fixed part of a slot header; block_size token ids follow it.
struct DiskHeader {
    uint64_t magic;
    uint32_t version;
    int32_t block_size;
    uint64_t layout_fingerprint;
    uint64_t stamp;
    uint64_t hash_hi, hash_lo;
    uint64_t parent_hi, parent_lo;
    uint64_t lora_id;
    uint64_t extras_digest;
    int32_t priority;
    int32_t slot;
    int64_t block_bytes;
    uint64_t header_check;  // XXH3-64 of this header (with both checks 0) and the token ids
    uint64_t checksum;      // XXH3-64 of the block's bytes seeded with header_check
};

size_t token_bytes(const KvLayout &L) { return size_t(L.block_size) * sizeof(int32_t); }

// What every header of this tier carries to say whose slot it is: the layout, and the caller's
// identity if any. No identity keeps the layout-only fingerprint: files written before identities
// existed, or without one, stay recoverable.
uint64_t tier_fingerprint(const KvLayout &L, const char *identity) {
    const int32_t words[] = {L.block_size, L.num_layers, L.num_kv_heads, L.head_dim, L.dtype, int32_t(kVersion)};
    const uint64_t fp = XXH3_64bits_withSeed(words, sizeof words, uint64_t(L.block_stride));
    return identity && *identity ? XXH3_64bits_withSeed(identity, std::strlen(identity), fp) : fp;
}

uint64_t header_hash(const char *hdr, size_t tokens_len) {
    DiskHeader h;
    std::memcpy(&h, hdr, sizeof h);
    h.header_check = 0;
    h.checksum = 0;
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, &h, sizeof h);
    XXH3_64bits_update(&st, hdr + sizeof h, tokens_len);
    return XXH3_64bits_digest(&st);
}

}  // namespace

DiskTier::~DiskTier() {
    if (fd_ >= 0) ::close(fd_);
    std::free(scratch_);
}

// Opens (creating it owner-only if missing) the tier file. Never follows a symbolic link: the
// path would otherwise let whoever controls the link point the tier at any file the process may
// write -- a non-persistent attach truncates, a persistent one extends. Callers that mean a link
// resolve it first (realpath). Never O_TRUNC here: the file may be another disk tier's, which the
// lock must find first.
kvc_status DiskTier::open_file(const char *path, int32_t flags, bool *created, const char *fn) {
    const int base = O_RDWR | O_CLOEXEC | O_NOFOLLOW;
    auto open_as = [&](int extra) {
        // O_EXCL first: then this attach knows it made the file (and removes it if refused).
        int fd = ::open(path, base | extra | O_CREAT | O_EXCL, 0600);
        if (fd >= 0) {
            *created = true;
            return fd;
        }
        return errno == EEXIST ? ::open(path, base | extra) : -1;
    };
    if (!(flags & KVC_DISK_NO_DIRECT)) {
        fd_ = open_as(O_DIRECT);
        if (fd_ >= 0)
            direct = true;
        else if (errno != EINVAL)
            return open_failed(path, fn);
    }
    if (fd_ < 0 && (fd_ = open_as(0)) < 0) return open_failed(path, fn);
    struct stat sb;
    if (fstat(fd_, &sb) != 0 || !S_ISREG(sb.st_mode))
        return fail(KVC_ERR_IO, "%s: '%s' is not a regular file", fn, path);
    return KVC_OK;
}

kvc_status DiskTier::open_failed(const char *path, const char *fn) const {
    if (errno == ELOOP)
        return fail(KVC_ERR_IO, "%s: '%s' is a symbolic link; a disk tier never follows one (pass the resolved path)",
                    fn, path);
    return fail(KVC_ERR_IO, "%s: cannot open '%s': %s", fn, path, std::strerror(errno));
}

namespace {

// How long an attach waits for another tier's lock (a crashed server's: the kernel may release it
// a few ms after the process died, while io_uring tears down) before reporting KVC_ERR_BUSY.
// KVC_DISK_LOCK_WAIT_MS overrides the default of 200 ms (0: do not wait).
int lock_wait_ms() {
    const char *env = std::getenv("KVC_DISK_LOCK_WAIT_MS");
    if (!env || !*env) return 200;
    const long v = std::strtol(env, nullptr, 10);
    return v < 0 ? 0 : v > 60000 ? 60000 : int(v);
}

// True when the file may be overwritten as a tier file: empty, or its first slot header is a tier
// header or all zero (a slot this library erased). Anything else is someone else's data.
bool looks_like_tier_file(const char *first_header, int64_t header_bytes, int64_t file_size, uint64_t magic) {
    if (file_size == 0) return true;
    uint64_t m;
    std::memcpy(&m, first_header, sizeof m);
    if (m == magic) return true;
    return std::all_of(first_header, first_header + header_bytes, [](char c) { return c == 0; });
}

}  // namespace

// Locks the file for this tier, checks it is a tier file (or empty), empties it unless persistent,
// and reserves its space.
kvc_status DiskTier::claim_file(const char *path, int64_t file_bytes, int32_t num_slots, const char *fn) {
    // One disk tier per file: an exclusive advisory lock for the tier's lifetime (released when the
    // descriptor closes). Two tiers writing one file would corrupt each other's slots. File systems
    // without flock (some network ones) are used unlocked.
    for (int waited = 0, limit = lock_wait_ms();; waited += 5) {
        if (flock(fd_, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK) break;
        if (waited >= limit)
            return fail(KVC_ERR_BUSY, "%s: '%s' is in use by another disk tier (locked for %d ms)", fn, path, waited);
        usleep(5000);
    }
    scratch_ = static_cast<char *>(std::aligned_alloc(size_t(kTierAlign), size_t(header_bytes_) * kBatch));
    if (!scratch_) return fail(KVC_ERR_NO_MEMORY, "%s: cannot allocate disk tier header buffers", fn);
    std::memset(scratch_, 0, size_t(header_bytes_) * kBatch);
    // The first header, read with one aligned read: it tells whose file this is, and it probes
    // O_DIRECT, which some file systems accept at open and refuse per I/O.
    ssize_t r = pread(fd_, scratch_, size_t(header_bytes_), 0);
    if (r < 0 && errno == EINVAL && direct) {
        int fl = fcntl(fd_, F_GETFL);
        if (fl < 0 || fcntl(fd_, F_SETFL, fl & ~O_DIRECT) != 0)
            return fail(KVC_ERR_IO, "%s: '%s': cannot turn off O_DIRECT: %s", fn, path, std::strerror(errno));
        direct = false;
        r = pread(fd_, scratch_, size_t(header_bytes_), 0);
    }
    if (r < 0) return fail(KVC_ERR_IO, "%s: cannot read '%s': %s", fn, path, std::strerror(errno));
    struct stat sb;
    if (fstat(fd_, &sb) != 0) return fail(KVC_ERR_IO, "%s: cannot stat '%s': %s", fn, path, std::strerror(errno));
    if (!looks_like_tier_file(scratch_, header_bytes_, sb.st_size, kMagic))
        return fail(KVC_ERR_IO, "%s: '%s' holds data that is not a libkvc disk tier; refusing to overwrite it", fn,
                    path);
    std::memset(scratch_, 0, size_t(header_bytes_) * kBatch);
    if (!persistent && ftruncate(fd_, 0) != 0)
        return fail(KVC_ERR_IO, "%s: cannot truncate '%s': %s", fn, path, std::strerror(errno));
    // Reserve the space now -- also the holes of a sparse file already long enough -- so that a
    // full disk is reported here rather than as failed spills. fallocate(2), not posix_fallocate:
    // on a file system without it glibc would write zeros over the whole file; a sparse file
    // (ftruncate) is the fallback then, and spills may meet ENOSPC later (counted as io_errors).
    int rc = fallocate(fd_, 0, 0, file_bytes) == 0 ? 0 : errno;
    if (rc == ENOSPC)
        return fail(KVC_ERR_IO, "%s: '%s': no space for %lld bytes (%d slots)", fn, path, (long long)file_bytes,
                    num_slots);
    if (rc != 0 && (persistent ? sb.st_size : 0) < file_bytes && ftruncate(fd_, file_bytes) != 0)
        return fail(KVC_ERR_IO, "%s: cannot size '%s' to %lld bytes: %s", fn, path, (long long)file_bytes,
                    std::strerror(errno));
    return KVC_OK;
}

size_t DiskTier::signed_bytes() const { return sizeof(DiskHeader) + token_bytes(layout_); }

kvc_status DiskTier::open(const char *path, int32_t num_slots, const KvLayout &layout, int32_t flags,
                          const char *identity, const char *fn, const uint8_t *key, size_t key_len) {
    layout_ = layout;
    persistent = (flags & KVC_DISK_PERSISTENT) != 0;
    // The key first: a keyed attach that cannot load libsodium fails before the file is touched.
    if (key)
        if (kvc_status st = mac_.init(key, key_len, fn); st != KVC_OK) return st;
    // A keyed header holds the MAC after the token ids.
    header_bytes_ = tier_round_up(int64_t(signed_bytes() + (mac_.keyed() ? DiskMac::kTagBytes : 0)));
    data_bytes_ = tier_round_up(layout.block_stride);
    slot_bytes_ = header_bytes_ + data_bytes_;
    int64_t file_bytes;
    if (mul_overflows(slot_bytes_, num_slots, &file_bytes))
        return fail(KVC_ERR_OVERFLOW, "%s: %d slots of %lld bytes overflow", fn, num_slots, (long long)slot_bytes_);
    // A keyed fingerprint makes another key's slots, and unkeyed ones, foreign at a persistent attach
    // (and ours foreign to them); forged headers that copy it still fail the MAC when read.
    fingerprint_ = tier_fingerprint(layout, identity);
    if (mac_.keyed()) fingerprint_ = mac_.derive(fingerprint_);

    bool created = false;
    if (kvc_status st = open_file(path, flags, &created, fn); st != KVC_OK) return st;
    // A refused attach leaves no file behind that it created (an empty one would look like a tier).
    kvc_status st = claim_file(path, file_bytes, num_slots, fn);
    if (st != KVC_OK && created) ::unlink(path);
    if (st != KVC_OK) return st;
    uring = io_.init(2 * kBatch);
    slots.init(num_slots, layout.block_size);
    stamps.assign(size_t(num_slots), 0);
    if (persistent) scan();
    return KVC_OK;
}

void DiskTier::run_io(IoOp *ops, int n) {
    io_.run(fd_, ops, n);
    if (!direct) return;
    // A file system that refuses O_DIRECT for this I/O: switch it off once and redo those ops.
    bool einval = false;
    for (int i = 0; i < n; ++i) einval |= ops[i].result == -EINVAL;
    if (!einval) return;
    int fl = fcntl(fd_, F_GETFL);
    if (fl >= 0 && fcntl(fd_, F_SETFL, fl & ~O_DIRECT) == 0) direct = false;
    for (int i = 0; i < n; ++i)
        if (ops[i].result == -EINVAL) io_.run(fd_, &ops[i], 1);
}

void DiskTier::build_header(int32_t slot, const char *data, char *hdr) const {
    const PrefixCache &ix = slots.index();
    DiskHeader h{};
    h.magic = kMagic;
    h.version = kVersion;
    h.block_size = layout_.block_size;
    h.layout_fingerprint = fingerprint_;
    h.stamp = stamps[size_t(slot)];
    h.hash_hi = ix.hash_of(slot).hi;
    h.hash_lo = ix.hash_of(slot).lo;
    h.parent_hi = ix.parent_of(slot).hi;
    h.parent_lo = ix.parent_of(slot).lo;
    h.lora_id = ix.lora_of(slot);
    h.extras_digest = ix.digest_of(slot);
    h.priority = slots.priority(slot);
    h.slot = slot;
    h.block_bytes = layout_.block_stride;
    std::memset(hdr, 0, size_t(header_bytes_));
    std::memcpy(hdr + sizeof h, ix.tokens_of(slot), token_bytes(layout_));
    std::memcpy(hdr, &h, sizeof h);
    h.header_check = header_hash(hdr, token_bytes(layout_));
    h.checksum = XXH3_64bits_withSeed(data, size_t(layout_.block_stride), h.header_check);
    std::memcpy(hdr, &h, sizeof h);
    if (mac_.keyed()) mac_.tag(hdr, signed_bytes(), data, size_t(layout_.block_stride), hdr + signed_bytes());
}

int32_t DiskTier::verify(int32_t slot, const char *hdr, const char *data) const {
    DiskHeader h;
    std::memcpy(&h, hdr, sizeof h);
    const PrefixCache &ix = slots.index();
    if (h.magic != kMagic || h.version != kVersion || h.layout_fingerprint != fingerprint_ ||
        h.block_size != layout_.block_size || h.block_bytes != layout_.block_stride || h.slot != slot)
        return kDiskChecksum;
    if (h.hash_hi != ix.hash_of(slot).hi || h.hash_lo != ix.hash_of(slot).lo || h.parent_hi != ix.parent_of(slot).hi ||
        h.parent_lo != ix.parent_of(slot).lo || h.lora_id != ix.lora_of(slot) ||
        h.extras_digest != ix.digest_of(slot) ||
        std::memcmp(hdr + sizeof h, ix.tokens_of(slot), token_bytes(layout_)) != 0)
        return kDiskChecksum;
    if (header_hash(hdr, token_bytes(layout_)) != h.header_check) return kDiskChecksum;
    if (XXH3_64bits_withSeed(data, size_t(layout_.block_stride), h.header_check) != h.checksum) return kDiskChecksum;
    // Last: the framing above is cheap and catches plain corruption; only the MAC catches forgery.
    if (mac_.keyed() && !mac_.verify(hdr, signed_bytes(), data, size_t(layout_.block_stride), hdr + signed_bytes()))
        return kDiskChecksum;
    return kDiskOk;
}

void DiskTier::write_slots(const int32_t *disk_slots, char *const *data, int32_t *out, int n) {
    for (int base = 0; base < n; base += kBatch) {
        const int m = std::min(kBatch, n - base);
        IoOp ops[kBatch];
        for (int i = 0; i < m; ++i) {
            const int32_t s = disk_slots[base + i];
            char *hdr = scratch_ + int64_t(i) * header_bytes_;
            build_header(s, data[base + i], hdr);
            ops[i].write = true;
            ops[i].offset = int64_t(s) * slot_bytes_;
            ops[i].header = hdr;
            ops[i].header_len = size_t(header_bytes_);
            ops[i].data = data[base + i];
            ops[i].data_len = size_t(data_bytes_);
        }
        run_io(ops, m);
        for (int i = 0; i < m; ++i) {
            const int64_t r = ops[i].result;
            out[base + i] = r == int64_t(header_bytes_ + data_bytes_) ? kDiskOk
                            : r == -ENOSPC                            ? kDiskNoSpace
                                                                      : kDiskIoError;
        }
    }
}

void DiskTier::read_slots(const int32_t *disk_slots, char *const *data, int32_t *out, int n) {
    for (int base = 0; base < n; base += kBatch) {
        const int m = std::min(kBatch, n - base);
        IoOp ops[kBatch];
        for (int i = 0; i < m; ++i) {
            const int32_t s = disk_slots[base + i];
            ops[i].write = false;
            ops[i].offset = int64_t(s) * slot_bytes_;
            ops[i].header = scratch_ + int64_t(i) * header_bytes_;
            ops[i].header_len = size_t(header_bytes_);
            ops[i].data = data[base + i];
            ops[i].data_len = size_t(data_bytes_);
        }
        run_io(ops, m);
        for (int i = 0; i < m; ++i) {
            const int64_t r = ops[i].result;
            if (r < 0)
                out[base + i] = kDiskIoError;
            else if (r != int64_t(header_bytes_ + data_bytes_))
                out[base + i] = kDiskShortRead;
            else
                out[base + i] = verify(disk_slots[base + i], static_cast<char *>(ops[i].header), data[base + i]);
        }
    }
}

void DiskTier::forget_slots(const int32_t *disk_slots, int32_t *out, int n) {
    for (int base = 0; base < n; base += kBatch) {
        const int m = std::min(kBatch, n - base);
        std::memset(scratch_, 0, size_t(m) * size_t(header_bytes_));
        IoOp ops[kBatch];
        for (int i = 0; i < m; ++i) {
            ops[i].write = true;
            ops[i].offset = int64_t(disk_slots[base + i]) * slot_bytes_;
            ops[i].header = scratch_ + int64_t(i) * header_bytes_;
            ops[i].header_len = size_t(header_bytes_);
        }
        run_io(ops, m);
        for (int i = 0; i < m; ++i) out[base + i] = ops[i].result == int64_t(header_bytes_) ? kDiskOk : kDiskIoError;
    }
}

// Re-indexes the slots of a persistent file: headers only (bytes are verified on use). Slots whose
// header is invalid, of another layout or identity (counted as foreign, and reused after every other
// free slot), or a duplicate of a newer slot's hash stay free.
void DiskTier::scan() {
    const int32_t n = slots.capacity();
    std::vector<std::pair<uint64_t, int32_t>> found;  // (stamp, slot)
    std::vector<int32_t> foreign_slots;
    std::vector<DiskHeader> headers(size_t(n), DiskHeader{});
    std::vector<int32_t> tokens(size_t(n) * size_t(layout_.block_size));
    for (int32_t base = 0; base < n; base += kBatch) {
        const int m = std::min<int32_t>(kBatch, n - base);
        IoOp ops[kBatch];
        for (int i = 0; i < m; ++i) {
            ops[i].offset = int64_t(base + i) * slot_bytes_;
            ops[i].header = scratch_ + int64_t(i) * header_bytes_;
            ops[i].header_len = size_t(header_bytes_);
        }
        run_io(ops, m);
        for (int i = 0; i < m; ++i) {
            if (ops[i].result != header_bytes_) continue;
            const char *hdr = static_cast<const char *>(ops[i].header);
            DiskHeader h;
            std::memcpy(&h, hdr, sizeof h);
            // A well-formed header (its own check holds, over the token ids of its own block size)
            // that is not ours was written under another identity or layout: foreign, not garbage.
            const int64_t own_token_bytes = int64_t(h.block_size) * int64_t(sizeof(int32_t));
            const bool framed = h.magic == kMagic && h.slot == base + i && h.block_size >= 1 &&
                                int64_t(sizeof h) + own_token_bytes <= header_bytes_ &&
                                header_hash(hdr, size_t(own_token_bytes)) == h.header_check;
            if (!framed) continue;
            if (h.version != kVersion || h.layout_fingerprint != fingerprint_ || h.block_size != layout_.block_size ||
                h.block_bytes != layout_.block_stride || h.priority < KVC_PRIORITY_MIN ||
                h.priority > KVC_PRIORITY_MAX) {
                foreign_slots.push_back(base + i);
                continue;
            }
            headers[size_t(base + i)] = h;
            std::memcpy(&tokens[size_t(base + i) * size_t(layout_.block_size)], hdr + sizeof h, token_bytes(layout_));
            found.emplace_back(h.stamp, base + i);
        }
    }
    // Oldest first, so the LRU order is the write order of the previous run; on a duplicate hash the
    // newer slot wins.
    std::sort(found.begin(), found.end());
    for (auto it = found.rbegin(); it != found.rend(); ++it) {
        const DiskHeader &h = headers[size_t(it->second)];
        if (slots.find(Hash128{h.hash_hi, h.hash_lo}) >= 0)
            it->second = -1;
        else {
            BlockKey key;
            key.hash = Hash128{h.hash_hi, h.hash_lo};
            key.lora_id = h.lora_id;
            key.extras_digest = h.extras_digest;
            slots.claim(it->second);
            slots.index_busy(it->second, Hash128{h.parent_hi, h.parent_lo}, key,
                             &tokens[size_t(it->second) * size_t(layout_.block_size)], h.priority);
        }
    }
    for (const auto &f : found) {
        if (f.second < 0) continue;
        slots.commit_cached(f.second);
        stamps[size_t(f.second)] = f.first;
        next_stamp = std::max(next_stamp, f.first + 1);
        ++recovered;
    }
    // Another identity's blocks are free for us, but they are that identity's cache should it come
    // back (a rollback, two models taking turns on one file): empty slots are written first.
    for (int32_t s : foreign_slots) slots.defer_free(s);
    foreign = int64_t(foreign_slots.size());
}

}  // namespace kvc
