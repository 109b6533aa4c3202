// See descriptor.hpp.
#include "transfer/descriptor.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstring>

#include "error.hpp"

namespace kvc::xfer {
namespace {

struct Writer {
    std::vector<uint8_t> *out;
    void bytes(const void *p, size_t n) {
        const uint8_t *b = static_cast<const uint8_t *>(p);
        out->insert(out->end(), b, b + n);
    }
    template <class T>
    void le(T v) {  // x86-64 and aarch64 Linux are little-endian
        static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian hosts only");
        bytes(&v, sizeof v);
    }
};

struct Reader {
    const uint8_t *p;
    size_t left;
    bool ok = true;
    void bytes(void *dst, size_t n) {
        if (!ok || n > left) {
            ok = false;
            return;
        }
        if (n) std::memcpy(dst, p, n);
        p += n;
        left -= n;
    }
    template <class T>
    T le() {
        T v{};
        bytes(&v, sizeof v);
        return v;
    }
};

}  // namespace

std::vector<uint8_t> encode(const Descriptor &d) {
    std::vector<uint8_t> out;
    const size_t n = size_t(d.count());
    const size_t total = kDescFixed + d.identity.size() + d.address.size() + d.rkey.size() +
                         n * size_t(d.block_size) * 4 + n * 16 + n * 8 + 8;
    out.reserve(total);
    Writer w{&out};
    w.le<uint32_t>(kDescMagic);
    w.le<uint16_t>(d.lease_addr ? kDescVersion : kDescVersionMin);
    w.le<uint16_t>(uint16_t(kDescFixed));
    w.le<uint32_t>(uint32_t(total));
    w.le<uint32_t>(0);
    w.le<uint64_t>(d.nonce);
    w.le<uint64_t>(d.export_id);
    w.le<uint64_t>(d.lease_unix_ms);
    w.le<int32_t>(d.block_size);
    w.le<int32_t>(d.num_layers);
    w.le<int32_t>(d.num_kv_heads);
    w.le<int32_t>(d.head_dim);
    w.le<int32_t>(d.kv_dtype);
    w.le<int32_t>(int32_t(n));
    w.le<int64_t>(d.block_bytes);
    w.le<uint32_t>(uint32_t(d.identity.size()));
    w.le<uint32_t>(uint32_t(d.address.size()));
    w.le<uint32_t>(uint32_t(d.rkey.size()));
    w.le<uint32_t>(0);
    w.le<uint64_t>(d.lease_addr);
    w.bytes(d.identity.data(), d.identity.size());
    w.bytes(d.address.data(), d.address.size());
    w.bytes(d.rkey.data(), d.rkey.size());
    w.bytes(d.tokens.data(), d.tokens.size() * 4);
    for (const Hash128 &h : d.hashes) {
        w.le<uint64_t>(h.hi);
        w.le<uint64_t>(h.lo);
    }
    w.bytes(d.addrs.data(), d.addrs.size() * 8);
    w.le<uint64_t>(XXH3_64bits_withSeed(out.data(), out.size(), kDescSeed));
    return out;
}

kvc_status decode(const uint8_t *buf, int64_t len, Descriptor *out, const char *fn) {
    if (len < int64_t(kDescFixed) + 8)
        return fail(KVC_ERR_INVALID_ARG, "%s: descriptor truncated: %lld bytes, a descriptor has at least %u", fn,
                    (long long)len, kDescFixed + 8);
    Reader r{buf, size_t(len)};
    const uint32_t magic = r.le<uint32_t>();
    if (magic != kDescMagic) return fail(KVC_ERR_INVALID_ARG, "%s: not a libkvc transfer descriptor (bad magic)", fn);
    const uint16_t version = r.le<uint16_t>();
    if (version < kDescVersionMin || version > kDescVersion)
        return fail(KVC_ERR_VERSION, "%s: descriptor version %u, this library reads versions %u to %u", fn, version,
                    kDescVersionMin, kDescVersion);
    const uint16_t fixed = r.le<uint16_t>();
    const uint32_t total = r.le<uint32_t>();
    if (fixed != kDescFixed || int64_t(total) != len)
        return fail(KVC_ERR_INVALID_ARG, "%s: descriptor truncated or padded: %lld bytes, its header says %u", fn,
                    (long long)len, total);
    uint64_t want;
    std::memcpy(&want, buf + len - 8, 8);
    if (XXH3_64bits_withSeed(buf, size_t(len) - 8, kDescSeed) != want)
        return fail(KVC_ERR_INVALID_ARG, "%s: descriptor checksum mismatch (damaged or tampered in transit)", fn);
    const uint32_t flags = r.le<uint32_t>();
    Descriptor d;
    d.nonce = r.le<uint64_t>();
    d.export_id = r.le<uint64_t>();
    d.lease_unix_ms = r.le<uint64_t>();
    d.block_size = r.le<int32_t>();
    d.num_layers = r.le<int32_t>();
    d.num_kv_heads = r.le<int32_t>();
    d.head_dim = r.le<int32_t>();
    d.kv_dtype = r.le<int32_t>();
    const int32_t count = r.le<int32_t>();
    d.block_bytes = r.le<int64_t>();
    const uint32_t id_len = r.le<uint32_t>(), addr_len = r.le<uint32_t>(), rkey_len = r.le<uint32_t>();
    const uint32_t reserved = r.le<uint32_t>();
    const uint64_t reserved2 = r.le<uint64_t>();
    if (flags != 0 || reserved != 0 || (version == 1 && reserved2 != 0))
        return fail(KVC_ERR_INVALID_ARG, "%s: descriptor has unknown flags or non-zero reserved fields", fn);
    if (version == 2 && (reserved2 == 0 || reserved2 % 8 != 0))
        return fail(KVC_ERR_INVALID_ARG, "%s: descriptor version 2 with a bad lease word address (0x%llx)", fn,
                    (unsigned long long)reserved2);
    d.lease_addr = version == 2 ? reserved2 : 0;
    if (d.block_size < 1 || d.num_layers < 1 || d.num_kv_heads < 1 || d.head_dim < 1 || d.block_bytes < 1 ||
        count < 1 || uint32_t(count) > kMaxDescBlocks || d.block_size > (1 << 20))
        return fail(KVC_ERR_INVALID_ARG,
                    "%s: descriptor shape out of range (block size %d, %d blocks, %lld bytes each)", fn, d.block_size,
                    count, (long long)d.block_bytes);
    if (id_len > kMaxIdentity || addr_len == 0 || addr_len > kMaxWireBlob || rkey_len == 0 || rkey_len > kMaxWireBlob)
        return fail(KVC_ERR_INVALID_ARG, "%s: descriptor field lengths out of range (identity %u, address %u, rkey %u)",
                    fn, id_len, addr_len, rkey_len);
    // Every length is bounded above, so this sum cannot overflow 64 bits.
    const uint64_t n = uint64_t(count);
    const uint64_t body = uint64_t(id_len) + addr_len + rkey_len + n * uint64_t(d.block_size) * 4 + n * 16 + n * 8;
    if (uint64_t(kDescFixed) + body + 8 != uint64_t(len))
        return fail(KVC_ERR_INVALID_ARG, "%s: descriptor lengths do not add up to its size (%lld bytes)", fn,
                    (long long)len);
    d.identity.resize(id_len);
    r.bytes(d.identity.data(), id_len);
    d.address.resize(addr_len);
    r.bytes(d.address.data(), addr_len);
    d.rkey.resize(rkey_len);
    r.bytes(d.rkey.data(), rkey_len);
    d.tokens.resize(size_t(n) * size_t(d.block_size));
    r.bytes(d.tokens.data(), d.tokens.size() * 4);
    d.hashes.resize(size_t(n));
    for (Hash128 &h : d.hashes) {
        h.hi = r.le<uint64_t>();
        h.lo = r.le<uint64_t>();
    }
    d.addrs.resize(size_t(n));
    r.bytes(d.addrs.data(), d.addrs.size() * 8);
    if (!r.ok || r.left != 8) return fail(KVC_ERR_INVALID_ARG, "%s: descriptor truncated", fn);
    *out = std::move(d);
    return KVC_OK;
}

}  // namespace kvc::xfer
