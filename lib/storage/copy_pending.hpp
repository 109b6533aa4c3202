// kvc_copy_pending's engine (storage/copy_pending.cpp): the library executing queued copy-on-write pairs,
// and the ordering other storage users need after it.
#pragma once

#include <cstdint>

#include "kvc/kvc.h"

struct kvc_pool;

namespace kvc {

// Copies every pair queued before the call (and any queued meanwhile) with the pool's backend;
// *out_copied receives the pairs this call copied. On return the copies are complete (CPU) or
// ordered before later work on `stream` (CUDA), including pairs another thread's call drained.
// No pool lock held on entry; not for a capturing stream (the C entry point handles that).
kvc_status storage_copy_pending(kvc_pool *p, void *stream, int64_t *out_copied);

// kvc_take_pending_copies (cap > 0): drains up to cap pairs for the caller to copy, after running
// the tier jobs planned before them (and any kvc_copy_pending in progress), so that the caller's
// copies cannot overtake the spill of a block evicted to make a dst. Keeps no hold.
kvc_status take_pending_for_caller(kvc_pool *p, int32_t *src, int32_t *dst, int64_t cap, int64_t *out_count);

// CUDA: makes `stream` wait (on the GPU) for the latest copy-on-write kernel, so work touching the
// storage there cannot overtake a copy still reading a released src or writing a released dst.
// KVC_OK at once on CPU (copies are complete when kvc_copy_pending returns) and before any copy.
kvc_status storage_order_after_copies(kvc_pool *p, void *stream);

}  // namespace kvc
