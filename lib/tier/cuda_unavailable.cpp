// Tier stream/event entry points for builds without CUDA: tiers on a CPU pool never call them, so
// each reports that CUDA is missing. Compiled only when KVC_HAVE_CUDA is not defined.
#ifndef KVC_HAVE_CUDA

#include "error.hpp"
#include "tier/cuda.hpp"

namespace kvc::cuda {

static kvc_status no_cuda(const char *what) {
    return fail(KVC_ERR_DEVICE, "%s: libkvc was built without CUDA support", what);
}

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
