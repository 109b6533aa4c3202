// core/tier_view.hpp: the pool as the memory tiers see it.
#include "core/tier_view.hpp"

#include "core/pool.hpp"

namespace kvc {

Tiers *pool_tiers(const kvc_pool *p) { return p->tiers.load(std::memory_order_acquire); }
void pool_detach_tiers(kvc_pool *p) { p->tiers.store(nullptr, std::memory_order_release); }
int32_t pool_block_size(const kvc_pool *p) { return p->block_size; }
int32_t pool_num_blocks(const kvc_pool *p) { return p->num_blocks; }
bool pool_caching(const kvc_pool *p) { return p->caching; }

CachedIdentity pool_cached_identity(const kvc_pool *p, int32_t b) {
    CachedIdentity id;
    id.parent = p->cache.parent_of(b);
    id.key.hash = p->cache.hash_of(b);
    id.key.lora_id = p->cache.lora_of(b);
    id.key.extras_digest = p->cache.digest_of(b);
    id.tokens = p->cache.tokens_of(b);
    id.priority = p->blocks.priority(b);
    return id;
}
const Hash128 &pool_block_hash(const kvc_pool *p, int32_t b) { return p->cache.hash_of(b); }
const Hash128 &pool_block_parent(const kvc_pool *p, int32_t b) { return p->cache.parent_of(b); }
int32_t pool_first_copy(const kvc_pool *p, const Hash128 &h) { return p->cache.find(h); }
int32_t pool_next_copy(const kvc_pool *p, int32_t b) { return p->cache.next_copy(b); }
bool pool_block_cached(const kvc_pool *p, int32_t b) { return p->blocks.cached(b); }
bool pool_block_is_free(const kvc_pool *p, int32_t b) { return p->blocks.is_free(b); }
int64_t pool_num_free(const kvc_pool *p) { return p->blocks.num_free(); }
const FreeQueues &pool_free_queues(const kvc_pool *p) { return p->blocks.queues(); }

void pool_enter_restored(kvc_pool *p, int32_t b, const Hash128 &parent, const BlockKey &key, const int32_t *tokens) {
    p->cache.insert(b, parent, key, tokens);
    p->blocks.set_cached(b, true);
    pool_report_stored(p, b, parent, key, tokens);
}

void pool_pin_block(kvc_pool *p, int32_t b) { p->blocks.pin(b); }
void pool_ref_to_pin(kvc_pool *p, int32_t b) {
    p->blocks.pin(b);
    p->blocks.release(b);
}

void pool_push_tier_event(kvc_pool *p, const EventRecord &ev, const int32_t *tokens) {
    if (p->tier_events) p->events.push(ev, tokens);
}

}  // namespace kvc
