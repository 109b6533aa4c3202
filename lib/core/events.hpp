// KV events for KV-aware routers: a bounded ring of fixed-size records plus a flat token ring
// (block_size ids per record slot), both allocated at pool creation. Producing an event never
// blocks and never allocates: when the ring is full the new event is dropped and counted; its
// sequence number is still consumed, so the consumer sees the gap.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/block_hash.hpp"

namespace kvc {

struct EventRecord {
    int32_t type = 0;
    int32_t block_id = -1;
    int32_t num_tokens = 0;
    Hash128 hash;
    Hash128 parent;
    uint64_t lora_id = 0;
    uint64_t extras_digest = 0;
    uint64_t sequence_number = 0;
    int32_t tier = 0;  // kvc_tier; host/disk only with kvc_pool_set_tier_events
};

class EventRing {
public:
    void init(int32_t capacity, int32_t block_size) {
        capacity_ = capacity;
        block_size_ = block_size;
        records_.assign(size_t(capacity), EventRecord{});
        tokens_.assign(size_t(capacity) * size_t(block_size), 0);
        head_ = count_ = 0;
    }

    bool enabled() const { return capacity_ > 0; }
    int64_t pending() const { return count_; }
    int64_t dropped() const { return dropped_; }

    // Queues an event; `tokens` (block_size ids) only for BLOCK_STORED, else NULL.
    void push(EventRecord rec, const int32_t *tokens) {
        if (capacity_ == 0) return;
        rec.sequence_number = next_sequence_++;
        if (count_ == capacity_) {
            ++dropped_;
            return;
        }
        int64_t slot = (head_ + count_) % capacity_;
        records_[size_t(slot)] = rec;
        if (tokens) std::memcpy(&tokens_[size_t(slot * block_size_)], tokens, size_t(block_size_) * sizeof(int32_t));
        ++count_;
    }

    const EventRecord &front() const { return records_[size_t(head_)]; }
    const int32_t *front_tokens() const { return &tokens_[size_t(head_ * block_size_)]; }

    void pop() {
        head_ = (head_ + 1) % capacity_;
        --count_;
    }

private:
    int64_t capacity_ = 0;
    int64_t block_size_ = 0;
    std::vector<EventRecord> records_;
    std::vector<int32_t> tokens_;
    int64_t head_ = 0;
    int64_t count_ = 0;
    int64_t dropped_ = 0;
    uint64_t next_sequence_ = 0;
};

}  // namespace kvc
