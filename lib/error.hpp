// Error reporting shared by every layer of the implementation.
//
// A failure is reported by returning a kvc_status *and* storing a message for the calling OS thread
// (kvc_last_error). The message lives in a fixed thread-local buffer: no allocation, so reporting
// out-of-memory cannot itself fail. See README "Error messages" for why thread-local is safe for Go
// (the binding pins the goroutine across call + read) and for pools shared by many threads.
#pragma once

#include "kvc/kvc.h"

namespace kvc {

// Formats the message (printf-style) into the thread's buffer and returns `status`, so call sites
// read `return fail(KVC_ERR_INVALID_ARG, "block_size must be >= 1, got %d", bs);`.
kvc_status fail(kvc_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// True if a * b or a + b overflows int64 (both operands must be >= 0).
inline bool mul_overflows(int64_t a, int64_t b, int64_t *out) { return __builtin_mul_overflow(a, b, out); }
inline bool add_overflows(int64_t a, int64_t b, int64_t *out) { return __builtin_add_overflow(a, b, out); }

}  // namespace kvc

// Wraps an extern "C" entry point body so that no C++ exception crosses the ABI:
//   KVC_GUARD({ ...body returning kvc_status... })
#define KVC_GUARD(...)                                                                      \
    try {                                                                                   \
        __VA_ARGS__                                                                         \
    } catch (const std::bad_alloc &) {                                                      \
        return ::kvc::fail(KVC_ERR_NO_MEMORY, "%s: out of host memory", __func__);          \
    } catch (const std::exception &e) {                                                     \
        return ::kvc::fail(KVC_ERR_INTERNAL, "%s: internal error: %s", __func__, e.what()); \
    } catch (...) {                                                                         \
        return ::kvc::fail(KVC_ERR_INTERNAL, "%s: unknown internal error", __func__);       \
    }
