// The pool core's narrow interface to the storage / batch / attention layer (storage/pool_access.hpp).
#include "storage/pool_access.hpp"

#include <algorithm>

#include "core/pool.hpp"
#include "storage/copy_pending.hpp"
#include "storage/cuda_api.hpp"
#include "tier/tiers.hpp"

namespace kvc {

kvc::PoolMutex &pool_mutex(kvc_pool *p) { return p->mu; }

int32_t pool_group_window(const kvc_pool *p, int32_t group) {
    return p->hybrid ? p->groups[size_t(group)].window : p->sliding_window;
}

bool pool_find_seq(kvc_pool *p, uint64_t seq_id, int32_t group, SeqRef *out) {
    const Sequence *s = p->seqs.find(seq_id);
    if (!s) return false;
    // Lengths, residency and life are the sequence's (every group moves with it); the table and
    // its window-released prefix are the group's own.
    const Sequence *t = group_seq(s, group);
    out->blocks = t->table.data();
    out->num_blocks = int64_t(t->table.size());
    out->num_tokens = s->num_tokens;
    out->reserved_tokens = s->reserved_end;
    out->swapped_out = s->swapped_out;
    out->released_blocks = t->released;
    out->incarnation = s->incarnation;
    return true;
}

int64_t pool_take_pending_copies(kvc_pool *p, int32_t *src, int32_t *dst, int64_t cap) {
    if (cap <= 0) return 0;
    const int64_t n = p->copies.take(src, dst, cap);
    for (int64_t i = 0; i < n; ++i) p->blocks.hold(dst[i]);
    return n;
}

int64_t pool_pending_copy_count(kvc_pool *p) { return p->copies.size(); }

const KvLayout &pool_layout(const kvc_pool *p) { return p->layout; }
int32_t pool_backend(const kvc_pool *p) { return p->backend; }
int32_t pool_device(const kvc_pool *p) { return p->device; }
int32_t pool_num_q_heads(const kvc_pool *p) { return p->config.num_q_heads; }
void *pool_storage_base(const kvc_pool *p) { return p->storage; }

int32_t pool_num_layers(const kvc_pool *p) { return p->config.num_layers; }
int32_t pool_num_groups(const kvc_pool *p) { return p->hybrid ? int32_t(p->groups.size()) : 1; }
bool pool_is_hybrid(const kvc_pool *p) { return p->hybrid; }
int32_t pool_group_kind(const kvc_pool *p, int32_t group) {
    return p->hybrid ? p->groups[size_t(group)].kind : KVC_GROUP_FULL;
}
const KvLayout &pool_group_layout(const kvc_pool *p, int32_t group) {
    return p->hybrid ? p->groups[size_t(group)].layout : p->layout;
}
int32_t pool_max_head_dim(const kvc_pool *p) {
    int32_t d = p->layout.head_dim;
    for (const PoolGroup &G : p->groups)
        if (G.kind != KVC_GROUP_SSM) d = std::max(d, G.layout.head_dim);
    return d;
}
LayerPlace pool_layer_place(const kvc_pool *p, int32_t layer) {
    if (!p->hybrid) return LayerPlace{0, layer};
    return LayerPlace{p->layer_group[size_t(layer)], p->layer_in_group[size_t(layer)]};
}
kvc_status pool_storage_barrier(kvc_pool *p, void *stream) {
    if (kvc_status st = tier_barrier(p, stream); st != KVC_OK) return st;
    const bool outstanding = p->copies.outstanding() > 0;
    if (!outstanding && !p->copy_staging.used.load(std::memory_order_acquire)) return KVC_OK;  // common case
    if (p->backend == KVC_BACKEND_CUDA) {
        // A capture may not wait on events recorded outside it; kvc_batch_build orders replays.
        bool capturing = false;
        if (kvc_status st = cuda::stream_capturing(stream, &capturing); st != KVC_OK) return st;
        if (capturing) return KVC_OK;
    }
    // Copy-on-write pairs queued before this access are copied first (or, being copied by another
    // thread, waited for): a writer can never overtake a copy that reads the block it writes (a
    // sole holder writing in place after kvc_truncate), nor a reader a copy into its block.
    if (outstanding) {
        int64_t copied = 0;
        return storage_copy_pending(p, stream, &copied);  // CUDA: also orders stream after copies
    }
    return storage_order_after_copies(p, stream);
}
uint64_t pool_seq_generation(kvc_pool *p) { return p->seq_generation.load(std::memory_order_relaxed); }

CopyStaging &pool_copy_staging(kvc_pool *p) { return p->copy_staging; }

}  // namespace kvc
