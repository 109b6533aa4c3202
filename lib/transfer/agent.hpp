// The transfer agent behind kvc_xfer_agent: one UCP context and worker per agent (per pool and
// process), the pool's storage registered once, a progress thread, the exports' leases and the
// imports' state machines. lib/transfer/README.md describes the protocol.
#pragma once

#include <cstdint>

#include "core/keys.hpp"
#include "kvc/kvc.h"

namespace kvc::xfer {

// C API back ends (capi_transfer.cpp checks the plain arguments first). Each returns a status set
// with fail(). Without UCX headers at build time agent_create always fails (KVC_ERR_UNSUPPORTED).
kvc_status agent_create(kvc_pool *pool, const kvc_xfer_config &cfg, kvc_xfer_agent **out, const char *fn);
void agent_destroy(kvc_xfer_agent *a);
kvc_status agent_export_prompt(kvc_xfer_agent *a, const int32_t *tokens, int64_t num_tokens, const KeySet &keys,
                               int64_t lease_ms, uint64_t *out_export, int64_t *out_tokens, const char *fn);
kvc_status agent_export_seq(kvc_xfer_agent *a, uint64_t seq_id, int64_t lease_ms, uint64_t *out_export,
                            int64_t *out_tokens, const char *fn);
kvc_status agent_export_descriptor(kvc_xfer_agent *a, uint64_t id, uint8_t *buf, int64_t cap, int64_t *out_len,
                                   const char *fn);
kvc_status agent_export_release(kvc_xfer_agent *a, uint64_t id, const char *fn);
kvc_status agent_import(kvc_xfer_agent *a, const uint8_t *desc, int64_t len, const KeySet &keys, uint64_t *out_op,
                        const char *fn);
kvc_status agent_op_query(kvc_xfer_agent *a, uint64_t op, int32_t *out_done, const char *fn);
kvc_status agent_op_wait(kvc_xfer_agent *a, uint64_t op, int64_t timeout_ms, kvc_xfer_import_result *out,
                         const char *fn);
kvc_status agent_stats(kvc_xfer_agent *a, kvc_xfer_stats *out);

#ifdef KVC_TEST_HOOKS
// kvct_xfer_device_fault (lib/testing.h): the next count landing copies of CUDA imports fail.
void device_fault_set(int32_t count);
// kvct_xfer_stuck_gets (lib/testing.h): while abandon_ms > 0 every get reads as still in progress,
// and a failed import abandons its requests abandon_ms after its endpoint was closed.
void stuck_gets_set(int64_t abandon_ms);
namespace detail {
bool device_fault_take();  // an injected landing failure is due (consumes one)
int64_t stuck_gets_ms();   // > 0: kvct_xfer_stuck_gets is on
}  // namespace detail
#endif

}  // namespace kvc::xfer
