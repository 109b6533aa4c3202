// See ucx_api.hpp.
#include "transfer/ucx_api.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "error.hpp"

namespace kvc::xfer {

#ifdef KVC_HAVE_UCX
namespace {
struct Loader {
    std::mutex mu;
    bool loaded = false;
    UcxApi api;
};
Loader &loader() {
    static Loader *l = new Loader;  // never destroyed: agents may outlive static destructors
    return *l;
}
}  // namespace

kvc_status load_ucx(const UcxApi **out, const char *fn) {
    Loader &l = loader();
    std::lock_guard<std::mutex> lk(l.mu);
    if (!l.loaded) {
        const char *name = std::getenv("KVC_UCX_LIBRARY");
        if (!name || !*name) name = "libucp.so.0";
        // UCX installs handlers for SIGSEGV, SIGBUS, SIGILL and SIGFPE when libucs loads (its
        // UCX_ERROR_SIGNALS, read from the environment by the library's constructor). A library
        // must not take a host runtime's fatal signals: the JVM uses SIGSEGV for its own checks
        // and crashed in ~1 of 6 runs of the Java binding's tests with UCX's handlers in place
        // (Go's runtime uses them too). Off unless the caller set UCX_ERROR_SIGNALS itself.
        setenv("UCX_ERROR_SIGNALS", "", 0);
        void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (!lib)
            return fail(KVC_ERR_UNSUPPORTED, "%s: UCX is not available (%s): install libucx0 (Debian) for KV transfer",
                        fn, dlerror());
        UcxApi api;
        const char *missing = nullptr;
#define KVC_UCX_RESOLVE(name)                                           \
    api.name = reinterpret_cast<decltype(api.name)>(dlsym(lib, #name)); \
    if (!api.name && !missing) missing = #name;
        KVC_UCX_FUNCTIONS(KVC_UCX_RESOLVE)
#undef KVC_UCX_RESOLVE
        if (missing) {
            dlclose(lib);
            return fail(KVC_ERR_UNSUPPORTED, "%s: %s lacks %s (UCX too old?)", fn, name, missing);
        }
        unsigned major = 0, minor = 0, release = 0;
        api.ucp_get_version(&major, &minor, &release);
        if (major < 1 || (major == 1 && minor < 10)) {
            dlclose(lib);
            return fail(KVC_ERR_UNSUPPORTED, "%s: UCX %u.%u.%u is too old (1.10 or later needed)", fn, major, minor,
                        release);
        }
        l.api = api;
        l.loaded = true;
    }
    *out = &l.api;
    return KVC_OK;
}
#else
kvc_status load_ucx(const UcxApi **, const char *fn) {
    return fail(KVC_ERR_UNSUPPORTED, "%s: this libkvc was built without the UCX headers (libucx-dev): no KV transfer",
                fn);
}
#endif

}  // namespace kvc::xfer
