// Sliding-window block release (kvc_pool_set_sliding_window): the blocks a sequence's queries can
// no longer see go back to the pool while the sequence keeps growing. Out of line from kvc_append:
// only pools with a window reach it, and then about once per block_size tokens per sequence.
#include "core/pool.hpp"

namespace kvc {
namespace {

// Leading blocks of s whose tokens all lie before the first key of the token at window_from: no
// query of the previous call's tokens, or of any later one, sees them.
int64_t release_target(const kvc_pool *p, const Sequence *s) {
    const int64_t target = pool_window_first_block(p, s->window, s->window_from);
    return target > s->released ? target : s->released;
}

}  // namespace

int64_t pool_window_plan(const kvc_pool *p, const Sequence *s, int64_t *out_free) {
    const int64_t target = release_target(p, s);
    int64_t n = 0;
    for (int64_t i = s->released; i < target; ++i) {
        const int32_t b = s->table[size_t(i)];
        // The same condition under which BlockPool::release puts a block in a free list.
        n += p->blocks.refcount(b) == 1 && p->blocks.pins(b) == 0 && p->blocks.copy_holds(b) == 0;
    }
    *out_free = n;
    return target;
}

void pool_window_release(kvc_pool *p, Sequence *s) {
    const int64_t target = release_target(p, s);
    s->window_from = s->num_tokens;  // this call's first position, for the next one
    if (target == s->released) return;
    // Oldest first: the LRU keeps them in the order the window left them, as they would have been
    // released one by one.
    for (int64_t i = s->released; i < target; ++i) {
        pool_release_block(p, s->table[size_t(i)]);
        s->table[size_t(i)] = -1;
    }
    s->released = target;
    p->seq_generation.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace kvc
