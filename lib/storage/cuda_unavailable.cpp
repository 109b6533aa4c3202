// The CUDA backend's entry points for builds without CUDA: no device exists, every other call
// reports KVC_ERR_DEVICE. Compiled only when KVC_HAVE_CUDA is not defined.
#ifndef KVC_HAVE_CUDA

#include "error.hpp"
#include "storage/cuda_api.hpp"

namespace kvc::cuda {

static kvc_status no_cuda(const char *what) {
    return fail(KVC_ERR_DEVICE, "%s: libkvc was built without CUDA support", what);
}

kvc_status device_count(int32_t *out) {
    *out = 0;
    return KVC_OK;
}
kvc_status mem_get_info(int32_t, size_t *, size_t *) { return no_cuda("mem_get_info"); }
kvc_status malloc_device(int32_t, size_t, void **) { return no_cuda("device allocation"); }
kvc_status free_device(int32_t, void *) { return KVC_OK; }
kvc_status malloc_pinned(size_t, void **) { return no_cuda("pinned allocation"); }
kvc_status free_pinned(void *) { return KVC_OK; }
kvc_status memcpy_h2d(void *, const void *, size_t, void *) { return no_cuda("memcpy"); }
kvc_status memcpy_d2h(void *, const void *, size_t, void *) { return no_cuda("memcpy"); }
kvc_status memcpy_d2d(void *, const void *, size_t, void *) { return no_cuda("memcpy"); }
kvc_status stream_sync(void *) { return no_cuda("stream sync"); }
kvc_status use_device(int32_t, const char *what) { return no_cuda(what); }
kvc_status stream_capturing(void *, bool *out) {
    *out = false;  // without CUDA nothing is ever captured
    return KVC_OK;
}
kvc_status event_create_on(int32_t, void **) { return no_cuda("cuda event"); }
kvc_status cache_write(const CacheWriteArgs &, void *) { return no_cuda("cache write"); }
kvc_status copy_blocks(const CopyBlocksArgs &, void *) { return no_cuda("copy blocks"); }
kvc_status attention(const AttentionArgs &, void *) { return no_cuda("attention"); }
size_t attention_workspace_bytes(int32_t, int32_t, int32_t, int64_t) { return 0; }

// Streams and events: tiers on a CPU pool never call them.
kvc_status tier_stream_create(int32_t, void **) { return no_cuda("tier stream"); }
void tier_stream_destroy(void *) {}
kvc_status event_create(void **) { return no_cuda("cuda event"); }
void event_destroy(void *) {}
kvc_status event_record(void *, void *) { return no_cuda("cuda event record"); }
kvc_status event_query(void *, bool *done) {
    *done = true;
    return KVC_OK;
}
kvc_status event_sync(void *) { return KVC_OK; }
kvc_status stream_wait_event(void *, void *) { return no_cuda("cuda stream wait"); }

}  // namespace kvc::cuda

#endif  // !KVC_HAVE_CUDA
