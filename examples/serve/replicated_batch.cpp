#include "replicated_batch.hpp"

#include <string>

#include "kvc_check.hpp"

namespace serve {

ReplicatedBatch::ReplicatedBatch(ReplicatedPool &pool, int32_t max_seqs, int64_t max_tokens, int32_t max_blocks_per_seq)
    : pool_(pool), slots_(size_t(pool.ranks()), nullptr) {
    for (int32_t r = 0; r < pool.ranks(); r++) {
        kvc_batch *b = nullptr;
        kvc_status st = kvc_batch_create(pool.rank(r), max_seqs, max_tokens, max_blocks_per_seq, &b);
        if (st != KVC_OK) {
            for (kvc_batch *made : batches_) kvc_batch_destroy(made);
            kvc_check(st, "kvc_batch_create");
        }
        batches_.push_back(b);
    }
    if (pool.ranks() > 1) {
        slots0_.resize(size_t(max_tokens));
        slots_r_.resize(size_t(max_tokens));
        tables0_.resize(size_t(max_seqs) * size_t(max_blocks_per_seq));
        tables_r_.resize(tables0_.size());
    }
}

ReplicatedBatch::~ReplicatedBatch() {
    for (kvc_batch *b : batches_) kvc_batch_destroy(b);
}

void ReplicatedBatch::set_group(int32_t group) {
    kvc_check(pool_.each_rank("kvc_batch_set_group", 0,
                              [&](int32_t r) { return kvc_batch_set_group(batches_[size_t(r)], group); }),
              "kvc_batch_set_group");
}

void ReplicatedBatch::build(const uint64_t *seqs, const int64_t *q_lens, int32_t n) {
    kvc_batch_info first{};
    kvc_check(pool_.each_rank("kvc_batch_build", 0,
                              [&](int32_t r) {
                                  kvc_status st = kvc_batch_build(batches_[size_t(r)], seqs, q_lens, n);
                                  if (st != KVC_OK) return st;
                                  kvc_batch_info info;
                                  info.struct_size = sizeof info;
                                  kvc_check(kvc_batch_get_info(batches_[size_t(r)], &info), "kvc_batch_get_info");
                                  slots_[size_t(r)] =
                                      reinterpret_cast<const int64_t *>(static_cast<uintptr_t>(info.slot_mapping));
                                  if (r == 0)
                                      first = info;
                                  else
                                      compare(r, first, info);
                                  return st;
                              }),
              "kvc_batch_build");
}

void ReplicatedBatch::compare(int32_t r, const kvc_batch_info &first, const kvc_batch_info &info) {
    auto differ = [&](const char *what, int64_t a, int64_t b) {
        if (a != b)
            pool_.disagree("kvc_batch_build", 0, r, std::string(what) + " " + std::to_string(a),
                           std::string(what) + " " + std::to_string(b));
    };
    differ("num_tokens", first.num_tokens, info.num_tokens);
    differ("num_indices", first.num_indices, info.num_indices);
    differ("max_q_len", first.max_q_len, info.max_q_len);
    differ("max_seq_len", first.max_seq_len, info.max_seq_len);
    differ("is_decode", first.is_decode, info.is_decode);
    // The library's host copies (no device sync on CUDA). Rank 0's are fetched once per build.
    const int64_t tokens = first.num_tokens, cells = int64_t(first.num_seqs) * first.max_blocks_per_seq;
    if (r == 1) {
        kvc_check(kvc_batch_copy_slot_mapping(batches_[0], slots0_.data(), tokens), "kvc_batch_copy_slot_mapping");
        kvc_check(kvc_batch_copy_block_tables(batches_[0], tables0_.data(), cells), "kvc_batch_copy_block_tables");
    }
    kvc_check(kvc_batch_copy_slot_mapping(batches_[size_t(r)], slots_r_.data(), tokens), "kvc_batch_copy_slot_mapping");
    kvc_check(kvc_batch_copy_block_tables(batches_[size_t(r)], tables_r_.data(), cells), "kvc_batch_copy_block_tables");
    for (int64_t t = 0; t < tokens; t++)
        if (slots_r_[size_t(t)] != slots0_[size_t(t)])
            differ(("slot_mapping[" + std::to_string(t) + "]").c_str(), slots0_[size_t(t)], slots_r_[size_t(t)]);
    for (int64_t i = 0; i < cells; i++)
        if (tables_r_[size_t(i)] != tables0_[size_t(i)])
            differ(("block_tables[" + std::to_string(i / first.max_blocks_per_seq) + "][" +
                    std::to_string(i % first.max_blocks_per_seq) + "]")
                       .c_str(),
                   tables0_[size_t(i)], tables_r_[size_t(i)]);
}

}  // namespace serve
