#include "tier/disk_mac.hpp"

#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <string>

#include "error.hpp"

namespace kvc {
namespace {

constexpr const char *kDefaultLibrary = "libsodium.so.23";
// crypto_generichash_blake2b_state is 384 bytes, 64-byte aligned, in libsodium 1.0.x; a library
// reporting more is refused at load rather than overrun.
constexpr size_t kStateCap = 512;
// Domain of derive(): its input never starts like a slot header (the magic "SVCTIER1").
constexpr char kDeriveDomain[] = "libkvc disk tier key fingerprint";

struct Loader {
    std::mutex mu;
    std::string library = kDefaultLibrary;
    bool loaded = false;
    SodiumApi api{};
};

Loader &loader() {
    static Loader l;  // never destroyed before a tier that still uses it: function-local static
    return l;
}

// Resolves every entry point; returns the first missing name, or nullptr.
const char *resolve(void *lib, SodiumApi *api, int (**sodium_init)()) {
    const char *missing = nullptr;
    auto sym = [&](const char *name) {
        void *p = dlsym(lib, name);
        if (!p && !missing) missing = name;
        return p;
    };
    *sodium_init = reinterpret_cast<int (*)()>(sym("sodium_init"));
    api->statebytes = reinterpret_cast<decltype(api->statebytes)>(sym("crypto_generichash_blake2b_statebytes"));
    api->init = reinterpret_cast<decltype(api->init)>(sym("crypto_generichash_blake2b_init"));
    api->update = reinterpret_cast<decltype(api->update)>(sym("crypto_generichash_blake2b_update"));
    api->final = reinterpret_cast<decltype(api->final)>(sym("crypto_generichash_blake2b_final"));
    api->memcmp = reinterpret_cast<decltype(api->memcmp)>(sym("sodium_memcmp"));
    return missing;
}

// Loads libsodium on first use. A success is kept for the process (never dlclose'd: tiers hold its
// function pointers); a failure is retried by the next keyed attach (the library may be installed
// meanwhile).
kvc_status load_sodium(SodiumApi *out, const char *fn) {
    Loader &l = loader();
    std::lock_guard<std::mutex> lk(l.mu);
    if (l.loaded) {
        *out = l.api;
        return KVC_OK;
    }
    const char *name = l.library.c_str();
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return fail(KVC_ERR_UNSUPPORTED,
                    "%s: cannot load %s for the slot MAC (%s); install libsodium23 -- a keyed disk tier is never "
                    "attached unauthenticated",
                    fn, name, dlerror());
    SodiumApi api{};
    int (*sodium_init)() = nullptr;
    const char *missing = resolve(lib, &api, &sodium_init);
    const char *why = missing                        ? missing
                      : sodium_init() < 0            ? "sodium_init failed"
                      : api.statebytes() > kStateCap ? "BLAKE2b state larger than expected"
                                                     : nullptr;
    if (why) {
        dlclose(lib);
        return fail(KVC_ERR_UNSUPPORTED,
                    "%s: %s is not a usable libsodium (%s); a keyed disk tier is never attached "
                    "unauthenticated",
                    fn, name, why);
    }
    l.api = api;
    l.loaded = true;
    *out = api;
    return KVC_OK;
}

}  // namespace

#ifdef KVC_TEST_HOOKS  // kvct_sodium_library: the test archive only
void disk_mac_set_library(const char *name) {
    Loader &l = loader();
    std::lock_guard<std::mutex> lk(l.mu);
    l.library = name ? name : kDefaultLibrary;
    l.loaded = false;
}
#endif

DiskMac::~DiskMac() { explicit_bzero(key_, sizeof key_); }

kvc_status DiskMac::init(const uint8_t *key, size_t key_len, const char *fn) {
    if (kvc_status st = load_sodium(&api_, fn); st != KVC_OK) return st;
    std::memcpy(key_, key, key_len);
    key_len_ = key_len;
    return KVC_OK;
}

bool DiskMac::tag(const void *head, size_t head_len, const void *body, size_t body_len, void *out) const {
    // The hash state after the key block is as secret as the key: wiped before returning.
    alignas(64) unsigned char state[kStateCap];
    const bool ok = api_.init(state, key_, key_len_, kTagBytes) == 0 &&
                    api_.update(state, static_cast<const unsigned char *>(head), head_len) == 0 &&
                    api_.update(state, static_cast<const unsigned char *>(body), body_len) == 0 &&
                    api_.final(state, static_cast<unsigned char *>(out), kTagBytes) == 0;
    explicit_bzero(state, sizeof state);
    if (!ok) std::memset(out, 0, kTagBytes);
    return ok;
}

bool DiskMac::verify(const void *head, size_t head_len, const void *body, size_t body_len, const void *expected) const {
    unsigned char actual[kTagBytes];
    return tag(head, head_len, body, body_len, actual) && api_.memcmp(actual, expected, kTagBytes) == 0;
}

uint64_t DiskMac::derive(uint64_t value) const {
    unsigned char out[kTagBytes];
    tag(kDeriveDomain, sizeof kDeriveDomain, &value, sizeof value, out);
    uint64_t v;
    std::memcpy(&v, out, sizeof v);
    return v;
}

}  // namespace kvc
