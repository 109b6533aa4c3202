// CUDA streams and events for the tiers (a dedicated copy stream per pool, one event per swap op).
// Implemented in cuda/tier_stream.cu with CUDA and by lib/tier/cuda_unavailable.cpp without it. Handles are
// cudaStream_t / cudaEvent_t passed as void* so this header needs no CUDA includes. None throws.
#pragma once

#include <cstdint>

#include "kvc/kvc.h"

namespace kvc::cuda {

kvc_status tier_stream_create(int32_t device, void **out_stream);
void tier_stream_destroy(void *stream);
kvc_status event_create(void **out_event);
void event_destroy(void *event);
kvc_status event_record(void *event, void *stream);
// *out_done = true once every piece of work recorded before the event has finished.
kvc_status event_query(void *event, bool *out_done);
kvc_status event_sync(void *event);
// Work submitted to `stream` after this call waits for the event on the GPU (no host sync).
kvc_status stream_wait_event(void *stream, void *event);

}  // namespace kvc::cuda
