// The engine's KV cache: one libkvc pool — under --hybrid one hybrid pool (kvc_pool_create_hybrid:
// a SLIDING group for the windowed layers, a FULL group for the others, one coordinated prefix hit)
// — or under --hybrid=two-pools the former recipe, two pools — pool L for the sliding-window
// layers (kvc_pool_set_sliding_window) and pool G for the full-attention ones (a window applies to
// every layer of a pool, so a model mixing both needs one pool per attention type). Every sequence
// lives in all pools under the same id; each operation here is applied to every pool and is
// all-or-nothing across them (a failure in one pool undoes what the others did), so the engine
// schedules as if there were one pool. See the README of libkvc, "Hybrid models". The hybrid pool
// swaps and spills through its host tier like a plain pool (every group's pages together); its disk
// tier is refused (options.cpp).
// Under --tp N each pool is a ReplicatedPool: N tensor-parallel ranks, each holding its shard of the
// KV heads, given the same calls and checked to decide the same (replicated_pool.hpp).
#pragma once

#include <kvc/kvc.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model.hpp"
#include "replicated_pool.hpp"
#include "swap_tier.hpp"

namespace serve {

struct KvStoreConfig {
    int32_t block_size = 16;
    int64_t num_blocks = 128;  // per pool
    int64_t window_blocks = 0; // --hybrid: pool L's blocks instead (0 = num_blocks)
    int32_t kv_dtype = KVC_DTYPE_F32;
    int32_t backend = KVC_BACKEND_CPU;
    int64_t max_seq_len = 1024;
    int64_t host_blocks = 0;   // per pool; 0 = no swap tier
    int32_t window = 0;        // sliding window in tokens; 0 = full attention everywhere
    bool hybrid = false;       // window only on the even model layers (Gemma 2 / GPT-OSS style)
    bool two_pools = false;    // hybrid as two pools L and G (the former recipe), not one hybrid pool
    int32_t tp = 1;            // tensor-parallel ranks: each pool's KV heads sharded over tp pools
    DiskTierConfig disk;       // per pool, below its host tier (needs host_blocks > 0)
};

// What a restart (KvStore::restart) found and lost, summed over the pools (rank 0's counts).
struct RestartFigures {
    bool flushed = false;            // cached blocks pushed down to disk first (flush_to_disk)
    int64_t flush_disk_writes = 0;   // blocks the flush wrote to disk
    int64_t device_cached_at_shutdown = 0;  // cached device blocks: lost unless flushed
    int64_t host_cached_at_shutdown = 0;    // cached host-tier blocks (some also on disk already)
    int64_t disk_cached_kept = 0;    // cached disk blocks when the pools were destroyed
    int64_t recovered_blocks = 0;    // re-indexed by the new pools' persistent attach
};

// One pool and the model layers whose KV it stores (model layer layers[i] is the pool's layer i).
struct PoolGroup {
    std::string name;            // "L" (windowed) / "G" (global) under --hybrid=two-pools, "hybrid"
                                 // under --hybrid, else "pool"
    HybridLayout hybrid_layout;  // --hybrid: the hybrid pool's groups (SLIDING, FULL) and layer map
    std::unique_ptr<ReplicatedPool> pool;  // its tensor-parallel ranks (one without --tp)
    int32_t window = 0;          // the pool's window and the layers' attention window
    std::vector<int32_t> layers;
    std::unique_ptr<SwapTier> swap;
    int64_t num_blocks = 0;
    int64_t bytes_per_block = 0, kv_bytes = 0;  // one rank's
    kvc_pool_config config{};    // one rank's, to create the pool again at a restart
    std::vector<DiskFile> disk_files;  // one file per rank
    // Counters of the pools a restart destroyed (added to the live pool's in the report).
    kvc_stats retired{};
    TierFigures retired_host, retired_disk;
};

enum class SwapIn {
    done,     // back on the device in every pool
    not_yet,  // nothing changed: some pool has no device room yet
    dropped,  // a pool failed half way and could not be undone: the sequence was freed in every
              // pool, and the caller recomputes it
};

// Where a model layer's KV lives.
struct LayerPlacement {
    int32_t group;       // index into KvStore::groups()
    int32_t pool_layer;  // the layer index inside that pool
};

// The attention window of each model layer (0 = full attention): what the dense reference applies.
std::vector<int32_t> layer_windows(int32_t num_layers, int32_t window, bool hybrid);

class KvStore {
public:
    // *swap_unavailable says why there is no swap tier, when there is none.
    KvStore(const ModelConfig &mc, const KvStoreConfig &cfg, std::string *swap_unavailable);
    ~KvStore();
    KvStore(const KvStore &) = delete;
    KvStore &operator=(const KvStore &) = delete;

    std::vector<PoolGroup> &groups() { return groups_; }
    const std::vector<PoolGroup> &groups() const { return groups_; }
    const std::vector<LayerPlacement> &placement() const { return placement_; }
    bool hybrid() const { return groups_.size() > 1; }  // two pools (--hybrid=two-pools)
    // One hybrid pool (--hybrid): its layers are placed by kvc_pool_layer_group, pool_layer = the
    // model layer.
    bool one_pool_hybrid() const { return one_pool_hybrid_; }
    bool has_swap() const { return groups_.front().swap != nullptr; }
    int32_t ranks() const { return groups_.front().pool->ranks(); }
    // Calls fanned out to every rank, over the pools.
    int64_t fanned_calls() const;
    // The engine step, for the messages of a disagreement.
    void set_step(int64_t step);
    // After an engine step, with several ranks: these sequences' block tables and every pool's and
    // tier's block counters are the same on every rank (LockstepError otherwise).
    void check_lockstep(const std::vector<uint64_t> &seqs);

    // The prefix hit a prompt starts at: the largest one valid in every pool. With one pool its own
    // kvc_prefix_lookup; with two, alternate the pools' lookups capped at c
    // (kvc_keys_set_max_cached_tokens) from c = n - 1 until c stops changing (each reports its
    // largest valid hit <= c, so c only steps down and stops at the largest hit both accept).
    int64_t common_hit(const std::vector<int32_t> &tokens);
    // kvc_can_alloc in every pool for a start at the common hit c: the worst verdict (NEVER before
    // LATER before OK).
    int32_t can_alloc(const std::vector<int32_t> &tokens, int64_t c);
    // Each pool's own prefix hit for the whole prompt (what it alone would skip), for the report.
    void own_hits(const std::vector<int32_t> &tokens, std::vector<int64_t> *out);
    // Creates the sequence in every pool starting at the common hit c (from common_hit): each pool
    // allocates the whole prompt with its hit capped at c (so each hits exactly c). KVC_OK with
    // *cached the hit taken (c; with one pool, whatever kvc_alloc took), or KVC_ERR_OUT_OF_BLOCKS
    // with nothing changed (other errors throw).
    kvc_status alloc(uint64_t id, const std::vector<int32_t> &tokens, int64_t c, int64_t *cached);
    // kvc_append in every pool. KVC_OK, or KVC_ERR_OUT_OF_BLOCKS with the sequence as it was in
    // every pool (see kv_store.cpp for how, without ever undoing a confirmed append).
    kvc_status append(uint64_t id, const int32_t *tokens, int64_t n);
    // kvc_truncate in every pool; the blocks freed, summed.
    int32_t truncate(uint64_t id, int64_t keep);
    void fork(uint64_t parent, uint64_t child);
    void free(uint64_t id);
    // Swap out through every pool's host tier. false when a pool's tier has no room: the sequence
    // may then be swapped out in the pools before it, and the caller frees it (recompute
    // preemption; kvc_free takes swapped-out sequences). Swapping those pools back in would only
    // take device blocks that the preemption is meant to free.
    bool swap_out(uint64_t id);
    // Swap in through every pool, after checking each has the device blocks (kvc_preemption_cost)
    // and spare_blocks more free (engine.cpp, admit: room for the sequence's next append; per group
    // of a hybrid pool, where that append may take a page in each).
    SwapIn swap_in(uint64_t id, int64_t spare_blocks = 0);
    // Whether the sequence still holds a device block in some pool (a swapped-out one keeps the
    // blocks it shares).
    bool holds_device_blocks(uint64_t id);
    // kvc_copy_pending in every pool (before the step's K/V writes); the copies made.
    int64_t copy_pending();
    // Every pool's invariant check, and that no sequence or used block is left.
    void check_empty();
    // A server restart, with no sequence left in any pool: optionally kvc_prefix_cache_reset (as
    // after a weight update: the disk file forgets its blocks), then every pool destroyed and
    // created again with the same configuration and tiers, the disk tier re-attached to the same
    // files (KVC_DISK_PERSISTENT when the config says so: a warm restart). The caller rebuilds
    // whatever holds the old pools (batches). Counters of the old pools carry into the lifetime
    // figures below.
    // flush: first push every cached block down to the disk tier (flush_to_disk).
    RestartFigures restart(bool flush, bool reset_prefix_cache);
    // Pool g's kvc_pool_stats with the counters of the pools restarts destroyed added (its state —
    // blocks, sequences — is the live pool's; the hit rate is over the whole run).
    kvc_stats lifetime_stats(size_t g);
    // Host / disk tier figures summed over the pools, over the whole run.
    TierFigures host_figures() const;
    TierFigures disk_figures() const;
    bool has_disk() const { return has_swap() && cfg_.disk.blocks > 0; }
    // Bytes moved to / from the host tiers (summed over the ranks too), and prefix blocks re-hit
    // there, summed over the pools.
    int64_t bytes_to_host() const;
    int64_t bytes_to_device() const;
    int64_t host_prefix_hits() const;
    // Admissions whose kvc_alloc hit fewer tokens than kvc_prefix_lookup had reported for the same
    // prompt and keys (a run of disk hits longer than the host tier can stage; one pool only:
    // under --hybrid common_hit keeps the hit within what the tiers can stage).
    int64_t short_hits() const { return short_hits_; }
    // Swap-outs that stopped half way (some pool's tier full) and swap-ins that had to be dropped.
    int64_t partial_swap_outs() const { return partial_swap_outs_; }
    int64_t dropped_swap_ins() const { return dropped_swap_ins_; }

private:
    KvStoreConfig cfg_;
    bool one_pool_hybrid_ = false;
    std::vector<PoolGroup> groups_;
    std::vector<LayerPlacement> placement_;
    // Keys whose only setting is the hit cap of common_hit / can_alloc / alloc (reused, so no
    // allocation per request); without a cap the calls pass no keys.
    kvc_keys *cap_keys_ = nullptr;
    kvc_keys *capped(int64_t c) const;
    // A graceful shutdown's write-back (kvc_tier_flush on every rank, no sequence left): every
    // cached device and host-tier block the disk lacks is written to it. Adds to *rf.
    void flush_to_disk(PoolGroup &g, RestartFigures *rf);
    // Creates g's pool (its ranks), window and tiers from g.config; *why as in the constructor.
    void open_pool(PoolGroup &g, std::string *swap_unavailable);
    int64_t partial_swap_outs_ = 0, dropped_swap_ins_ = 0;
    int64_t short_hits_ = 0;
    // common_hit's alternation from a cap of c tokens down.
    int64_t common_hit_below(const std::vector<int32_t> &tokens, int64_t c);
    // The largest hit <= c of pool g whose disk blocks the host tier can stage: kvc_alloc reads disk
    // hits up through host slots (in rounds when they are few), but with none to take at all (all
    // held by swapped-out sequences) its hit ends at the first disk block — the call succeeds with
    // fewer cached tokens than kvc_prefix_lookup reported.
    int64_t stageable_hit(PoolGroup &g, const std::vector<int32_t> &tokens, int64_t c);
};

}  // namespace serve
