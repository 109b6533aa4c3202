// The host-side view of the CUDA backend, the one interface lib/ has to it: devices, memory, copies,
// streams and events, kernels. Implemented in cuda/*.cu when libkvc is built with CUDA
// (KVC_HAVE_CUDA), and by lib/storage/cuda_unavailable.cpp otherwise, where every call reports that CUDA is not
// available. Functions return KVC_OK or a status whose message was set with kvc::fail; none
// throws. `stream` is a cudaStream_t passed as void* so this header needs no CUDA includes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "storage/kernel_args.hpp"

namespace kvc::cuda {

// The head dims the CUDA attention kernels are instantiated for, in the order of the kernels'
// tables (cuda/attention.cu, decode_kernel.cuh's dim_idx); the CPU kernels take any head dim.
inline constexpr int32_t kHeadDims[] = {64, 80, 96, 128, 256};
inline constexpr const char *kHeadDimsText = "64, 80, 96, 128, 256";  // for messages
// Index of `d` in kHeadDims, or -1.
constexpr int head_dim_index(int32_t d) {
    for (int i = 0; i < int(sizeof kHeadDims / sizeof kHeadDims[0]); ++i)
        if (kHeadDims[i] == d) return i;
    return -1;
}

// Usable devices; 0 (and KVC_OK) without driver or GPU. Never fails hard.
kvc_status device_count(int32_t *out);
kvc_status mem_get_info(int32_t device, size_t *free_bytes, size_t *total_bytes);
kvc_status malloc_device(int32_t device, size_t bytes, void **out);
kvc_status free_device(int32_t device, void *ptr);
kvc_status malloc_pinned(size_t bytes, void **out);
kvc_status free_pinned(void *ptr);
// Asynchronous on `stream` (NULL = default); host buffers should be pinned for true overlap.
kvc_status memcpy_h2d(void *dst, const void *src, size_t bytes, void *stream);
kvc_status memcpy_d2h(void *dst, const void *src, size_t bytes, void *stream);
kvc_status memcpy_d2d(void *dst, const void *src, size_t bytes, void *stream);
kvc_status stream_sync(void *stream);
// *out = true when work enqueued on `stream` now would be recorded into a CUDA graph instead of run:
// the stream is being captured (cudaStreamBeginCapture), or it is the legacy default stream while a
// blocking stream captures (using it would join that capture). A host call, no synchronization.
kvc_status stream_capturing(void *stream, bool *out);
// Makes `device` current for the calling thread when the process sees more than one GPU (nothing to
// do with one), so that the legacy default stream (stream NULL) and new events are that device's.
kvc_status use_device(int32_t device, const char *what);

// ---- streams and events (cuda/tier_stream.cu): a dedicated copy stream per pool's tiers, an event
// per swap operation, the copy-on-write staging's ordering. cudaStream_t / cudaEvent_t as void*.
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
// A cudaEvent_t (timing disabled) created on `device` (event_create: on the current device); an
// event can only be recorded on a stream of its device.
kvc_status event_create_on(int32_t device, void **out_event);

// ---- kernels (cuda/*.cu) ----

kvc_status cache_write(const CacheWriteArgs &a, void *stream);
kvc_status copy_blocks(const CopyBlocksArgs &a, void *stream);
kvc_status attention(const AttentionArgs &a, void *stream);
// Bytes of split-K scratch attention() needs for a batch of these capacities.
// The batch allocates it once at creation with max_context = max_blocks_per_seq * block_size.
size_t attention_workspace_bytes(int32_t max_seqs, int32_t num_q_heads, int32_t head_dim, int64_t max_context);

}  // namespace kvc::cuda
