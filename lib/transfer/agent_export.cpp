// The export side: leasing a prompt's or a sequence's cached blocks, their descriptors, release and
// expiry, the agent's stats. lib/transfer/README.md, protocol step 1.
#include "transfer/agent.hpp"

#ifdef KVC_HAVE_UCX

#include <algorithm>
#include <cstring>

#include "core/pool.hpp"
#include "error.hpp"
#include "transfer/agent_state.hpp"

namespace kvc::xfer {
namespace detail {

// The word is in the exporter's UCX-allocated staging, mapped (or read by gets) by importers in
// other processes: written with atomic operations. Published with release order after stage_out's
// copies; cleared by an atomic exchange before the slots can go back (staging_release) and be
// overwritten by another export, so an importer that reads the tag after its copies (with a fence
// between) read the leased bytes (lib/transfer/README.md, "Lease check").
void lease_word_set(kvc_xfer_agent *a, Export *e, uint64_t export_id) {
    if (!e->lease_word) return;
    __atomic_store_n(e->lease_word, lease_tag(a->nonce, export_id), __ATOMIC_RELEASE);
}

void lease_word_end(Export *e) {
    if (!e->lease_word) return;
    // An atomic exchange, not a store: its acquire half keeps every later store (stage_out's copy
    // of another export into these slots, after staging_release) after it; on x86 a locked
    // instruction, which no later store, non-temporal ones included, passes.
    (void)__atomic_exchange_n(e->lease_word, uint64_t(0), __ATOMIC_SEQ_CST);
    e->lease_word = nullptr;
}

void reap_leases(kvc_xfer_agent *a) {
    const int64_t now = now_ms();
    for (auto it = a->exports.begin(); it != a->exports.end();) {
        if (it->second.expires_ms <= now) {
            lease_word_end(&it->second);
            release_blocks(a->pool, it->second.blocks);
            staging_release(a, &it->second.staged);
            ++a->stats.exports_expired;
            it = a->exports.erase(it);
        } else {
            ++it;
        }
    }
}

}  // namespace detail

using namespace detail;
namespace {

// st: a CUDA pool's staged copy of the blocks (the descriptor names it instead of the storage);
// copied into the export, so that the caller still owns it if this throws.
kvc_status publish_export(kvc_xfer_agent *a, HeldPrefix &held, const StagingLease &st, int64_t lease_ms,
                          uint64_t *out_export, int64_t *out_tokens) {
    const kvc_pool_config &c = a->pool->config;
    Descriptor d;
    d.nonce = a->nonce;
    d.lease_unix_ms = unix_ms() + uint64_t(lease_ms);
    d.block_size = c.block_size;
    d.num_layers = c.num_layers;
    d.num_kv_heads = c.num_kv_heads;
    d.head_dim = c.head_dim;
    d.kv_dtype = c.kv_dtype;
    d.block_bytes = a->block_bytes;
    d.identity = a->identity;
    d.address = a->address;
    d.rkey = st.ck ? st.ck->rkey : a->rkey;
    d.tokens = held.tokens;
    d.hashes = held.hashes;
    d.addrs.resize(held.blocks.size());
    for (size_t i = 0; i < held.blocks.size(); ++i) {
        const char *at =
            st.ck ? staging_slot(a, st, int64_t(i)) : a->base + int64_t(held.blocks[i]) * a->block_bytes;
        d.addrs[i] = uint64_t(reinterpret_cast<uintptr_t>(at));
    }
    Export e;
    if (st.ck && st.ck->words) {
        // A staged CPU export: its lease word (the first slot's), named by a version 2 descriptor.
        e.lease_word = &st.ck->words[st.slots[0]];
        d.lease_addr = uint64_t(reinterpret_cast<uintptr_t>(e.lease_word));
    }
    e.blocks = held.blocks;
    e.staged = st;
    e.addrs = d.addrs;
    std::sort(e.addrs.begin(), e.addrs.end());
    e.expires_ms = now_ms() + lease_ms;
    std::lock_guard<std::mutex> lk(a->mu);
    d.export_id = a->next_export++;
    e.desc = encode(d);
    const int64_t n = int64_t(held.blocks.size());
    auto placed = a->exports.emplace(d.export_id, std::move(e));
    lease_word_set(a, &placed.first->second, d.export_id);
    ++a->stats.exports_total;
    *out_export = d.export_id;
    if (out_tokens) *out_tokens = n * c.block_size;
    return KVC_OK;
}

// Leases held (CUDA pools: stages it first) and publishes the export; on any failure the blocks
// and staging slots go back and nothing is exported.
kvc_status export_held(kvc_xfer_agent *a, HeldPrefix &held, int64_t lease_ms, uint64_t *out_export, int64_t *out_tokens,
                       const char *fn) {
    StagingLease st;
    auto give_back = [&] {
        if (st.ck) {
            std::lock_guard<std::mutex> lk(a->mu);
            staging_release(a, &st);
        }
        release_blocks(a->pool, held.blocks);
    };
    kvc_status s = KVC_OK;
    try {
        if (a->staged) {
            s = staging_reserve(a, int64_t(held.blocks.size()), &st, fn);
            if (s == KVC_OK) s = stage_out(a, held.blocks, st, fn);
        } else if (a->stage_cpu_exports) {
            // Best effort: without room in the staging the export names the pool's storage (gets
            // over shared memory are then emulated, slower, but the export works).
            if (staging_reserve(a, int64_t(held.blocks.size()), &st, fn) == KVC_OK) s = stage_out(a, held.blocks, st, fn);
        }
        if (s == KVC_OK) s = publish_export(a, held, st, lease_ms, out_export, out_tokens);
    } catch (...) {
        give_back();
        throw;
    }
    if (s != KVC_OK) give_back();
    return s;
}

}  // namespace

kvc_status agent_export_prompt(kvc_xfer_agent *a, const int32_t *tokens, int64_t num_tokens, const KeySet &keys,
                               int64_t lease_ms, uint64_t *out_export, int64_t *out_tokens, const char *fn) {
    if (num_tokens < a->pool->block_size)
        return fail(KVC_ERR_INVALID_ARG, "%s: num_tokens %lld holds no full block (block size %d)", fn,
                    (long long)num_tokens, a->pool->block_size);
    HeldPrefix held;
    if (kvc_status st = hold_prompt(a->pool, tokens, num_tokens, keys, &held, fn); st != KVC_OK) return st;
    return export_held(a, held, lease_ms > 0 ? lease_ms : a->lease_ms, out_export, out_tokens, fn);
}

kvc_status agent_export_seq(kvc_xfer_agent *a, uint64_t seq_id, int64_t lease_ms, uint64_t *out_export,
                            int64_t *out_tokens, const char *fn) {
    HeldPrefix held;
    if (kvc_status st = hold_seq(a->pool, seq_id, &held, fn); st != KVC_OK) return st;
    return export_held(a, held, lease_ms > 0 ? lease_ms : a->lease_ms, out_export, out_tokens, fn);
}

kvc_status agent_export_descriptor(kvc_xfer_agent *a, uint64_t id, uint8_t *buf, int64_t cap, int64_t *out_len,
                                   const char *fn) {
    std::lock_guard<std::mutex> lk(a->mu);
    reap_leases(a);
    auto it = a->exports.find(id);
    if (it == a->exports.end())
        return fail(KVC_ERR_INVALID_ARG, "%s: export %llu is unknown, released or expired", fn, (unsigned long long)id);
    const int64_t n = int64_t(it->second.desc.size());
    *out_len = n;
    if (cap < n) {
        if (buf == nullptr && cap == 0) return KVC_OK;
        return fail(KVC_ERR_BUFFER_TOO_SMALL, "%s: the descriptor needs %lld bytes, cap is %lld", fn, (long long)n,
                    (long long)cap);
    }
    std::memcpy(buf, it->second.desc.data(), size_t(n));
    return KVC_OK;
}

kvc_status agent_export_release(kvc_xfer_agent *a, uint64_t id, const char *fn) {
    std::vector<int32_t> blocks;
    {
        std::lock_guard<std::mutex> lk(a->mu);
        reap_leases(a);
        auto it = a->exports.find(id);
        if (it == a->exports.end())
            return fail(KVC_ERR_INVALID_ARG, "%s: export %llu is unknown, released or expired", fn,
                        (unsigned long long)id);
        blocks.swap(it->second.blocks);
        lease_word_end(&it->second);  // before its slots can be reused
        staging_release(a, &it->second.staged);
        a->exports.erase(it);
    }
    release_blocks(a->pool, blocks);
    return KVC_OK;
}

kvc_status agent_stats(kvc_xfer_agent *a, kvc_xfer_stats *out) {
    std::lock_guard<std::mutex> lk(a->mu);
    reap_leases(a);
    kvc_xfer_stats s = a->stats;
    s.exports_active = int64_t(a->exports.size());
    s.export_blocks_held = 0;
    for (auto &kv : a->exports) s.export_blocks_held += int64_t(kv.second.blocks.size());
    // The caller's struct may be an older release's (without failures_device): fill only what it
    // has, and of a newer one only what this library knows.
    const uint32_t size = out->struct_size;
    std::memcpy(out, &s, std::min<size_t>(size, sizeof s));
    out->struct_size = size;
    return KVC_OK;
}

}  // namespace kvc::xfer

#endif  // KVC_HAVE_UCX
