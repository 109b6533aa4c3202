#include "error.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace {
constexpr size_t kMessageCap = 512;
thread_local char t_message[kMessageCap] = {0};
}  // namespace

namespace kvc {

kvc_status fail(kvc_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(t_message, kMessageCap, fmt, ap);
    va_end(ap);
    if (n < 0) std::snprintf(t_message, kMessageCap, "%s", kvc_status_str(status));
    return status;
}

}  // namespace kvc

extern "C" {

KVC_API const char *kvc_status_str(int32_t status) {
    switch (status) {
        case KVC_OK: return "KVC_OK: success";
        case KVC_ERR_NULL_ARG: return "KVC_ERR_NULL_ARG: a required pointer was NULL";
        case KVC_ERR_INVALID_ARG: return "KVC_ERR_INVALID_ARG: argument out of range";
        case KVC_ERR_OVERFLOW: return "KVC_ERR_OVERFLOW: size computation overflows";
        case KVC_ERR_NO_MEMORY: return "KVC_ERR_NO_MEMORY: allocation failed";
        case KVC_ERR_OUT_OF_BLOCKS: return "KVC_ERR_OUT_OF_BLOCKS: not enough free blocks";
        case KVC_ERR_UNKNOWN_SEQ: return "KVC_ERR_UNKNOWN_SEQ: no such sequence";
        case KVC_ERR_SEQ_EXISTS: return "KVC_ERR_SEQ_EXISTS: sequence id already in use";
        case KVC_ERR_BUFFER_TOO_SMALL: return "KVC_ERR_BUFFER_TOO_SMALL: caller buffer too small";
        case KVC_ERR_MAX_LEN: return "KVC_ERR_MAX_LEN: sequence would exceed max_seq_len";
        case KVC_ERR_BUSY: return "KVC_ERR_BUSY: resources in use";
        case KVC_ERR_UNSUPPORTED: return "KVC_ERR_UNSUPPORTED: not supported";
        case KVC_ERR_DEVICE: return "KVC_ERR_DEVICE: device error";
        case KVC_ERR_IO: return "KVC_ERR_IO: I/O error";
        case KVC_ERR_VERSION: return "KVC_ERR_VERSION: unknown struct_size";
        case KVC_ERR_STATE: return "KVC_ERR_STATE: wrong state for this operation";
        case KVC_ERR_INTERNAL: return "KVC_ERR_INTERNAL: internal invariant failed";
        default: return "KVC_ERR_?: unknown status";
    }
}

KVC_API const char *kvc_last_error(void) { return t_message; }

KVC_API kvc_status kvc_last_error_copy(char *buf, int64_t cap, int64_t *out_len) {
    size_t len = std::strlen(t_message);
    if (cap < 0)
        return kvc::fail(KVC_ERR_INVALID_ARG, "kvc_last_error_copy: cap must be >= 0, got %lld", (long long)cap);
    if (cap > 0 && buf == nullptr) return KVC_ERR_NULL_ARG;  // keep the message being asked for intact
    if (cap > 0) {
        size_t n = len < (size_t)cap - 1 ? len : (size_t)cap - 1;
        std::memcpy(buf, t_message, n);
        buf[n] = '\0';
    }
    if (out_len) *out_len = (int64_t)len;
    return KVC_OK;
}

}  // extern "C"
