// The transfer descriptor: what an importer needs to pull an exported prefix, serialized by the
// exporter and moved by the caller through its own channel (gRPC, HTTP, a queue), as NIXL's agent
// metadata is. Versioned and bounds-checked; a trailing XXH3-64 checksum makes truncation and
// accidental damage (a flipped bit) a clean refusal. It is not authenticated: whoever can forge a
// descriptor can point an import at other memory of the exporter's pool (the import still checks
// that the hash chain matches the tokens and keys, and the exporter that the lease is held), so
// the channel must be as trusted as the services at its ends (lib/transfer/README.md).
//
// Format, version 1 or 2, every integer little-endian (version 2 differs only at offset 88):
//   off  size
//   0    4   magic "KVCX"
//   4    2   version (1, or 2 when the export has a lease word)
//   6    2   fixed header size (96)
//   8    4   total length, checksum included
//   12   4   flags (0)
//   16   8   exporter nonce (random per agent: tells a restarted exporter apart)
//   24   8   export id (per agent)
//   32   8   lease expiry, Unix time in ms (informational: the exporter decides)
//   40   4×6 block_size, num_layers, num_kv_heads, head_dim, kv_dtype, num_blocks (count)
//   64   8   bytes per block (the pool's block stride)
//   72   4×4 identity length, worker address length, rkey length, reserved (0)
//   88   8   version 1: reserved (0). Version 2: the address of the export's lease word in the
//            memory the rkey covers (non-zero, 8-aligned): a 64-bit word that holds
//            lease_tag(nonce, export id) while the export is held and something else (0, or
//            another export's tag) once its lease has ended. An importer reads it after its data
//            gets/copies instead of asking the exporter (lib/transfer/README.md, "Lease check").
//   96   identity bytes, worker address bytes, rkey bytes,
//        token ids (count × block_size i32), hashes (count × (u64 hi, u64 lo)),
//        remote block addresses (count × u64)
//   end  8   XXH3-64 (seed 0x6b76632d78666572) of every byte before it
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/block_hash.hpp"
#include "kvc/kvc.h"

namespace kvc::xfer {

constexpr uint32_t kDescMagic = 0x5843564bu;  // "KVCX"
constexpr uint16_t kDescVersion = 2;    // the newest this library reads and writes
constexpr uint16_t kDescVersionMin = 1;  // version 1: no lease word (the lease check by message)
constexpr uint32_t kDescFixed = 96;
constexpr uint64_t kDescSeed = 0x6b76632d78666572ull;
// Bounds a parser enforces before allocating anything.
constexpr uint32_t kMaxIdentity = KVC_MAX_XFER_IDENTITY_LEN;
constexpr uint32_t kMaxWireBlob = 1u << 16;  // worker address, rkey
constexpr uint32_t kMaxDescBlocks = 1u << 22;

struct Descriptor {
    uint64_t nonce = 0;
    uint64_t export_id = 0;
    uint64_t lease_unix_ms = 0;
    uint64_t lease_addr = 0;  // the lease word's remote address; 0: none (written as version 1)
    int32_t block_size = 0, num_layers = 0, num_kv_heads = 0, head_dim = 0, kv_dtype = 0;
    int64_t block_bytes = 0;
    std::string identity;
    std::vector<uint8_t> address;  // UCP worker address
    std::vector<uint8_t> rkey;     // packed rkey of the exporter's storage
    std::vector<int32_t> tokens;   // count × block_size
    std::vector<Hash128> hashes;   // count
    std::vector<uint64_t> addrs;   // count
    int64_t count() const { return int64_t(hashes.size()); }
};

// The value of a held export's lease word: a mix of the exporter's nonce and the export id, never 0.
inline uint64_t lease_tag(uint64_t nonce, uint64_t export_id) {
    uint64_t z = nonce ^ (export_id * 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return z ? z : 1;
}

// Serializes d (sizes consistent: tokens = count × block_size, addrs = count): version 2 when it
// names a lease word, else version 1 (readable by importers that know only version 1).
std::vector<uint8_t> encode(const Descriptor &d);

// Parses and checks buf[0, len) of version 1 or 2: KVC_OK, KVC_ERR_VERSION (another version), or
// KVC_ERR_INVALID_ARG naming what is wrong (truncated, bad magic, checksum, a length out of
// bounds or inconsistent). Message prefixed with fn. May throw std::bad_alloc.
kvc_status decode(const uint8_t *buf, int64_t len, Descriptor *out, const char *fn);

}  // namespace kvc::xfer
