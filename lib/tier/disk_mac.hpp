// Authenticated disk slots (kvc_tier_attach_disk_keyed): a keyed MAC over a slot's header and
// block bytes, so that whoever can write the tier file but lacks the key cannot make it serve
// chosen KV. XXH3 framing alone can be recomputed by anyone.
//
// The MAC is BLAKE2b-256 in keyed mode, computed by libsodium (crypto_generichash_blake2b_*:
// the primitive is named, so a future libsodium default cannot change the file format). libsodium
// is not linked: the first keyed attach loads it with dlopen("libsodium.so.23"), declaring the few
// entry points used here. So libkvc.so keeps its minimal runtime dependencies and loads anywhere,
// building needs no libsodium-dev, and only a caller asking for authenticated slots needs Debian's
// libsodium23 — which gets KVC_ERR_UNSUPPORTED without it, never unauthenticated slots.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kvc/kvc.h"

namespace kvc {

// The libsodium entry points the MAC uses, resolved by dlsym (prototypes as in libsodium 1.0.x;
// the state is an opaque buffer of statebytes() bytes, 64-byte aligned).
struct SodiumApi {
    size_t (*statebytes)();
    int (*init)(void *state, const unsigned char *key, size_t key_len, size_t out_len);
    int (*update)(void *state, const unsigned char *in, unsigned long long in_len);
    int (*final)(void *state, unsigned char *out, size_t out_len);
    int (*memcmp)(const void *a, const void *b, size_t len);  // sodium_memcmp: constant time
};

// A disk tier's MAC key and the functions that use it. Unkeyed (keyed() false) until init.
class DiskMac {
public:
    static constexpr size_t kTagBytes = 32;

    DiskMac() = default;
    DiskMac(const DiskMac &) = delete;
    DiskMac &operator=(const DiskMac &) = delete;
    ~DiskMac();  // wipes the key

    // Loads libsodium (once per process) and copies the key (KVC_DISK_KEY_MIN_LEN..MAX_LEN bytes,
    // checked by the caller). KVC_ERR_UNSUPPORTED, naming `fn`, when libsodium cannot be loaded.
    kvc_status init(const uint8_t *key, size_t key_len, const char *fn);
    bool keyed() const { return key_len_ > 0; }

    // tag = MAC(key, head || body). False only if libsodium refused its arguments (then `out` is
    // zeros, which no read will accept).
    bool tag(const void *head, size_t head_len, const void *body, size_t body_len, void *out) const;
    // True when `expected` is the MAC of head || body (compared in constant time).
    bool verify(const void *head, size_t head_len, const void *body, size_t body_len, const void *expected) const;
    // A 64-bit value only the key's holder can compute from `value`: mixed into the disk
    // fingerprint, so that slots of another key (or none) are foreign at a persistent attach.
    uint64_t derive(uint64_t value) const;

private:
    SodiumApi api_{};
    unsigned char key_[KVC_DISK_KEY_MAX_LEN] = {};
    size_t key_len_ = 0;
};

// Test hook (kvct_sodium_library): the library later keyed attaches load; nullptr restores
// libsodium.so.23. Forgets a library loaded before (tiers keep using the one they loaded).
void disk_mac_set_library(const char *name);

}  // namespace kvc
