// UCX's UCP API, loaded at run time (dlopen "libucp.so.0", never linked): libkvc.so keeps no
// NEEDED entry for UCX and loads and works where UCX is not installed; only a transfer agent needs
// it, and kvc_xfer_agent_create reports KVC_ERR_UNSUPPORTED when it cannot be loaded. The headers
// are a build-time dependency only (Debian libucx-dev); without them KVC_HAVE_UCX is undefined and
// the loader always reports UCX as absent.
#pragma once

#include "kvc/kvc.h"

#ifdef KVC_HAVE_UCX
#include <ucp/api/ucp.h>

// Every UCP/UCS entry point the agent calls.
#define KVC_UCX_FUNCTIONS(X)          \
    X(ucp_config_read)                \
    X(ucp_config_modify)              \
    X(ucp_config_release)             \
    X(ucp_init_version)               \
    X(ucp_cleanup)                    \
    X(ucp_get_version)                \
    X(ucp_worker_create)              \
    X(ucp_worker_destroy)             \
    X(ucp_worker_get_address)         \
    X(ucp_worker_release_address)     \
    X(ucp_worker_progress)            \
    X(ucp_worker_get_efd)             \
    X(ucp_worker_arm)                 \
    X(ucp_worker_signal)              \
    X(ucp_worker_set_am_recv_handler) \
    X(ucp_mem_map)                    \
    X(ucp_mem_unmap)                  \
    X(ucp_mem_query)                  \
    X(ucp_rkey_pack)                  \
    X(ucp_rkey_buffer_release)        \
    X(ucp_ep_create)                  \
    X(ucp_ep_close_nbx)               \
    X(ucp_ep_rkey_unpack)             \
    X(ucp_rkey_destroy)               \
    X(ucp_rkey_ptr)                   \
    X(ucp_get_nbx)                    \
    X(ucp_am_send_nbx)                \
    X(ucp_am_recv_data_nbx)           \
    X(ucp_request_check_status)       \
    X(ucp_request_free)               \
    X(ucs_status_string)

namespace kvc::xfer {

struct UcxApi {
#define KVC_UCX_MEMBER(name) decltype(&::name) name = nullptr;
    KVC_UCX_FUNCTIONS(KVC_UCX_MEMBER)
#undef KVC_UCX_MEMBER
};

}  // namespace kvc::xfer
#else
namespace kvc::xfer {
struct UcxApi {};
}  // namespace kvc::xfer
#endif

namespace kvc::xfer {

// Loads UCX once per process (KVC_UCX_LIBRARY overrides the file name: tests point it at a
// missing file to check the fallback). A failure is retried by the next call. *out valid for the
// process's lifetime (never dlclose'd). KVC_OK, or KVC_ERR_UNSUPPORTED with a message (fn: the
// calling C function's name).
kvc_status load_ucx(const UcxApi **out, const char *fn);

}  // namespace kvc::xfer
