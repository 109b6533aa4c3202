// A step's batch metadata on every tensor-parallel rank of a ReplicatedPool: one kvc_batch per rank,
// built from the same sequences and query lengths. The block ids in the tables and the slot mapping
// are decisions of the pools, so with several ranks every build is compared with rank 0's.
#pragma once

#include <kvc/kvc.h>

#include <cstdint>
#include <vector>

#include "replicated_pool.hpp"

namespace serve {

class ReplicatedBatch {
public:
    ReplicatedBatch(ReplicatedPool &pool, int32_t max_seqs, int64_t max_tokens, int32_t max_blocks_per_seq);
    ~ReplicatedBatch();
    ReplicatedBatch(const ReplicatedBatch &) = delete;
    ReplicatedBatch &operator=(const ReplicatedBatch &) = delete;

    // kvc_batch_set_group on every rank: the KV-cache group of a hybrid pool whose tables the next
    // builds record (one batch per attention group; kvc_launch_attention refuses other groups' layers).
    void set_group(int32_t group);
    // kvc_batch_build on every rank (throws on failure, LockstepError when the ranks' batches differ).
    void build(const uint64_t *seqs, const int64_t *q_lens, int32_t n);
    kvc_batch *rank(int32_t r) const { return batches_[size_t(r)]; }
    // Rank r's slot mapping of the last build, in backend memory (what kvc_cache_write takes).
    const int64_t *slots(int32_t r) const { return slots_[size_t(r)]; }

private:
    ReplicatedPool &pool_;
    std::vector<kvc_batch *> batches_;
    std::vector<const int64_t *> slots_;
    // Host copies of rank 0's and another rank's slot mapping and tables, sized once (several
    // ranks only).
    std::vector<int64_t> slots0_, slots_r_;
    std::vector<int32_t> tables0_, tables_r_;

    void compare(int32_t r, const kvc_batch_info &first, const kvc_batch_info &info);
};

}  // namespace serve
