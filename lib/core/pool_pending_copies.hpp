// Pending copy-on-write pairs (src block -> dst block), drained oldest first by the caller
// (kvc_take_pending_copies) or by the storage layer (kvc_copy_pending).
// Lifetime rules (kept by the pool, core/pool_blocks.cpp): a pending pair holds its src (BlockPool::hold),
// so the bytes it will copy cannot be reused (or overwritten by a tier restore) before the copy;
// and a pair whose dst goes back to the free lists is cancelled, so a late copy cannot land in a
// block that has a new owner.
// A ring preallocated for num_blocks pairs, never resized: every pending pair writes into its own
// live block (a pair whose destination is freed is cancelled), so there are never more pairs than
// blocks.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

namespace kvc {

class PendingCopies {
public:
    void init(int64_t capacity) {
        src_.assign(size_t(capacity < 1 ? 1 : capacity), -1);
        dst_.assign(src_.size(), -1);
        head_ = count_ = 0;
        outstanding_.store(0, std::memory_order_relaxed);
    }

    int64_t size() const { return count_; }

    // Pairs queued or being copied: changed under the pool lock, read without it by the storage
    // barrier (pool_storage_barrier), whose common case is one load of 0.
    int64_t outstanding() const { return outstanding_.load(std::memory_order_acquire); }
    // Drained pairs whose copies are done (or handed to the caller): no longer outstanding.
    void finished(int64_t n) { outstanding_.fetch_sub(n, std::memory_order_release); }
    // Pairs drained (pool_take_pending_copies) and not finished: their copies run outside the pool
    // lock and they hold their src and dst. Only the invariant checker asks.
    int64_t in_flight() const { return outstanding() - count_; }

    // Never full: see the header comment.
    void push(int32_t src, int32_t dst) {
        outstanding_.fetch_add(1, std::memory_order_release);
        int64_t cap = int64_t(src_.size());
        int64_t slot = (head_ + count_) % cap;
        src_[size_t(slot)] = src;
        dst_[size_t(slot)] = dst;
        ++count_;
    }

    int64_t take(int32_t *src, int32_t *dst, int64_t cap) {
        int64_t n = cap < count_ ? cap : count_;
        int64_t ring = int64_t(src_.size());
        for (int64_t i = 0; i < n; ++i) {
            src[i] = src_[size_t(head_)];
            dst[i] = dst_[size_t(head_)];
            head_ = (head_ + 1) % ring;
        }
        count_ -= n;
        return n;
    }

    // Index (0 = oldest) of the oldest pending pair copying into dst, or -1. O(pending pairs),
    // which is 0 almost always: only releases that end a block's life ask.
    int64_t find_dst(int32_t dst) const {
        for (int64_t i = 0; i < count_; ++i)
            if (dst_at(i) == dst) return i;
        return -1;
    }

    // Removes the i-th pending pair (order of the others kept) and returns its src.
    int32_t remove_at(int64_t i) {
        const int64_t ring = int64_t(src_.size());
        const int32_t src = src_at(i);
        for (int64_t k = i; k + 1 < count_; ++k) {
            src_[size_t((head_ + k) % ring)] = src_[size_t((head_ + k + 1) % ring)];
            dst_[size_t((head_ + k) % ring)] = dst_[size_t((head_ + k + 1) % ring)];
        }
        --count_;
        outstanding_.fetch_sub(1, std::memory_order_release);
        return src;
    }

    // i-th pending pair (0 = oldest), for the invariant checker.
    int32_t src_at(int64_t i) const { return src_[size_t((head_ + i) % int64_t(src_.size()))]; }
    int32_t dst_at(int64_t i) const { return dst_[size_t((head_ + i) % int64_t(src_.size()))]; }

private:
    std::vector<int32_t> src_, dst_;
    int64_t head_ = 0;
    int64_t count_ = 0;
    std::atomic<int64_t> outstanding_{0};
};

}  // namespace kvc
