// Sequences: a caller-chosen 64-bit id, a block table, and (with prefix caching) what is needed to
// hash blocks as decode fills them: the token ids of the partial block, the request's keys and the
// running chain hash.
//
// Token layout (kvc.h): cached | computed | new | lookahead. `num_tokens` counts confirmed tokens;
// `reserved_end` is one past the last reserved slot (>= num_tokens); the table covers
// ceil(reserved_end / block_size) blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "core/block_hash.hpp"
#include "core/keys.hpp"
#include "core/sequence_map.hpp"

namespace kvc {

// A sequence's unhashed token ids (Sequence::tail): a buffer of fixed capacity (block_size,
// reserved at alloc) and a length, with the few std::vector operations the core uses. Not a
// std::vector because the decode step appends to it once per token, and a vector's push_back
// tests its capacity and keeps its length as an end pointer (size() a subtraction and a shift):
// here the step writes data()[size()] and bumps the length, the capacity being the caller's to
// know (the tail never holds block_size ids: a full block is hashed and leaves it). 24 bytes, as
// the vector was, so the fields after it keep their offsets.
class TokenTail {
public:
    TokenTail() = default;
    TokenTail(const TokenTail &) = delete;
    TokenTail &operator=(const TokenTail &) = delete;
    ~TokenTail() { delete[] data_; }

    size_t size() const { return size_t(size_); }
    size_t capacity() const { return size_t(cap_); }
    bool empty() const { return size_ == 0; }
    int32_t *data() { return data_; }
    const int32_t *data() const { return data_; }
    const int32_t *begin() const { return data_; }
    const int32_t *end() const { return data_ + size_; }

    // Room for n ids; the ids kept. May throw std::bad_alloc (nothing changed then).
    void reserve(size_t n) {
        if (int64_t(n) <= cap_) return;
        int32_t *d = new int32_t[n];
        if (size_ > 0) std::memcpy(d, data_, size_t(size_) * sizeof(int32_t));
        delete[] data_;
        data_ = d;
        cap_ = int64_t(n);
    }
    void clear() { size_ = 0; }
    // Callers stay within the capacity (a tail holds fewer than block_size ids): not checked here.
    void push_back(int32_t id) { data_[size_++] = id; }
    void append(const int32_t *first, const int32_t *last) {
        int32_t *d = data_ + size_;
        size_ += last - first;
        for (; first != last; ++first) *d++ = *first;
    }
    void assign(const int32_t *first, const int32_t *last) {
        size_ = 0;
        append(first, last);
    }
    // Shrinking (kvc_truncate), or growing over ids the caller wrote at data() (the decode step).
    void resize(size_t n) { size_ = int64_t(n); }

private:
    int32_t *data_ = nullptr;
    int64_t size_ = 0;
    int64_t cap_ = 0;
};
static_assert(sizeof(TokenTail) == 24, "the tail keeps the size of the std::vector it replaced");

// Aligned to a cache line: the decode step's fields (num_tokens to the tail) then lie in
// two lines, the two kvc_append_batch asks for ahead (prefetch_for_append); at malloc's 16-byte
// alignment one sequence in four spread them over three. bench_trace's batch replay, cachegrind:
// D1 misses in the step loop 752k -> 422k, in the whole replay 2.07M -> 1.72M.
struct alignas(64) Sequence {
    // Layout: the first 64 bytes are everything a decode step without caching reads; the token
    // tail and chain (caching) follow; the large KeySet (inline salt) comes last and is read on
    // the hot paths only when extra_keys says it matters.
    uint64_t id = 0;
    int64_t num_tokens = 0;
    int64_t reserved_end = 0;
    std::vector<int32_t> table;
    bool swapped_out = false;  // not resident in the pool's storage (tiering)
    // Set on both sides of a fork and never cleared: only a fork makes a block this sequence may
    // still write into shared (cache hits are full blocks, never written). When false, append
    // skips the copy-on-write refcount check, saving a cache miss per decode step. Always set on a
    // hybrid pool's sequences, which kvc_append must send to hybrid_append (seq_ops.hpp).
    bool may_share_tail = false;
    // False when the keys add nothing to any block's hash (no LoRA id, salt or multimodal item):
    // filling a block then never reads `keys`, which sit several cache lines further on.
    bool extra_keys = false;
    // kvc_truncate cut into a block whose token ids it could not recover: the chain cannot go on,
    // so blocks this sequence fills from now on are not entered in the cache (tail stays empty).
    // (In the padding before `priority`: the first 64 bytes stay as they were.)
    bool hash_stopped = false;
    // Sliding window of this sequence's blocks, 0 = none: the pool's (kvc_pool_set_sliding_window)
    // for a plain pool, its group's in a hybrid one (an SSM group's is 1: only the newest
    // position's page is needed). Set when the sequence is created; right after the flags because
    // the decode step's loop tests them and it in one load (not_plain_step()).
    int32_t window = 0;
    int32_t priority = KVC_PRIORITY_DEFAULT;  // = keys.priority, kept here for the same reason
    int64_t num_hashed = 0;  // leading full blocks whose hash is known (cached or not)
    // Confirmed token ids not yet in a hashed block: positions [num_hashed x bs, num_tokens), fewer
    // than block_size (hashing is incremental through `chain`, so older ids are never needed).
    // Capacity block_size, reserved at alloc. Empty when prefix caching is off.
    TokenTail tail;
    Hash128 chain = kRootHash;  // hash of block num_hashed - 1 (kRootHash when none)
    // While swapped out: per table entry, the host tier slot holding that block (table entry -1),
    // or -1 for a block that stayed on the device (shared). Empty while resident.
    std::vector<int32_t> swap_slots;
    KeySet keys;
    // Sliding window (read only when the pool has one, so last: the fields the decode step touches
    // keep their offsets). released: leading table entries released (-1), never read again.
    // window_from: the first position the latest kvc_alloc (its first uncached one) or kvc_append
    // added; the next append releases only what no query from there on can see, so a step may
    // append its tokens in two calls before its launch.
    int64_t released = 0;
    int64_t window_from = 0;
    // Leading blocks kvc_alloc found in the cache (lowered by kvc_truncate): kvc_abort drops from
    // the cache only the blocks after them, which this sequence filled itself.
    int64_t hit_blocks = 0;
    // Which life of this id it is: unique per pool, set when the sequence is created (kvc_alloc,
    // kvc_fork). A batch built for one life of an id must not launch over the next one's blocks
    // (kvc_abort, then another kvc_alloc of the same id that lands on the same block ids).
    uint64_t incarnation = 0;
    // Hybrid pools (kvc_pool_create_hybrid): the sequence of groups 1.. (this object is group 0's).
    // Owned here and kept when the id is freed, so that recycled sequences reuse them.
    std::vector<std::unique_ptr<Sequence>> group_seqs;

    // swapped_out or may_share_tail: the in-place append does not apply. One 16-bit load for the
    // two adjacent flags (the decode step tests them for every sequence).
    bool no_append_in_place() const {
        uint16_t both;
        std::memcpy(&both, &swapped_out, sizeof both);
        return both != 0;
    }

    // kvc_append_batch's decode-step loop (append_step_in_place) takes an entry only when none of
    // swapped_out, may_share_tail, hash_stopped is set and there is no window: the four fields,
    // extra_keys between them masked out, are one 8-byte load and one test per entry instead of
    // three loads and tests (~5 instructions per decode token).
    bool not_plain_step() const {
        uint64_t word;
        std::memcpy(&word, &swapped_out, sizeof word);
        return (word & kPlainStepMask) != 0;
    }
    static constexpr uint64_t kPlainStepMask = 0xFFFFFFFF'FF00FFFFull;  // all but extra_keys' byte

    // Takes the request's keys (may throw std::bad_alloc before changing anything).
    void set_keys(const KeySet &k) {
        keys.assign(k);
        extra_keys = k.lora_id != 0 || k.salt_len > 0 || !k.mm.empty() || k.group != 0;
        priority = k.priority;
    }

    void reset(uint64_t new_id) {
        id = new_id;
        table.clear();
        tail.clear();
        keys.clear();
        swap_slots.clear();
        num_tokens = reserved_end = num_hashed = released = window_from = hit_blocks = 0;
        window = 0;
        chain = kRootHash;
        swapped_out = false;
        may_share_tail = false;
        hash_stopped = false;
        extra_keys = false;
        priority = KVC_PRIORITY_DEFAULT;
    }
};
static_assert(offsetof(Sequence, may_share_tail) == offsetof(Sequence, swapped_out) + 1,
              "no_append_in_place() reads the two flags as one 16-bit word");
static_assert(offsetof(Sequence, extra_keys) == offsetof(Sequence, swapped_out) + 2 &&
                  offsetof(Sequence, hash_stopped) == offsetof(Sequence, swapped_out) + 3 &&
                  offsetof(Sequence, window) == offsetof(Sequence, swapped_out) + 4 && sizeof(bool) == 1 &&
                  sizeof(Sequence::window) == 4 && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "not_plain_step() reads the flags and the window as one 8-byte word (little-endian)");

// Group g's table of a sequence (g = 0: the sequence itself; hybrid pools only for g > 0).
inline Sequence *group_seq(Sequence *s, int32_t g) { return g == 0 ? s : s->group_seqs[size_t(g - 1)].get(); }
inline const Sequence *group_seq(const Sequence *s, int32_t g) {
    return g == 0 ? s : s->group_seqs[size_t(g - 1)].get();
}

// id -> Sequence. Freed Sequence objects are recycled, so their vectors keep their capacity and a
// steady state of alloc/free does not allocate block tables again.
class SequenceTable {
public:
    void init(size_t expected) {
        map_.init(expected);
        spare_.reserve(expected);
    }

    Sequence *find(uint64_t id) const { return map_.find(id); }

    // Inserts a fresh sequence (id must be unused). May throw std::bad_alloc before changing anything.
    Sequence *create(uint64_t id) {
        std::unique_ptr<Sequence> s;
        if (!spare_.empty()) {
            s = std::move(spare_.back());
            spare_.pop_back();
        } else {
            s.reset(new Sequence());
        }
        s->reset(id);
        s->incarnation = ++incarnations_;
        try {
            map_.insert(id, s.get());
        } catch (...) {
            if (spare_.size() < spare_.capacity()) spare_.push_back(std::move(s));
            throw;
        }
        return s.release();
    }

    // Removes a sequence and keeps its object for reuse. Never throws.
    void erase(Sequence *s) {
        map_.erase(s->id);
        if (spare_.size() < spare_.capacity())
            spare_.emplace_back(s);
        else
            delete s;
    }

    size_t size() const { return map_.size(); }

    // f(id, const Sequence *) for every live sequence, in no particular order.
    template <class F>
    void for_each(F &&f) const {
        map_.for_each([&](uint64_t id, Sequence *s) { f(id, static_cast<const Sequence *>(s)); });
    }

    SequenceTable() = default;
    SequenceTable(const SequenceTable &) = delete;
    SequenceTable &operator=(const SequenceTable &) = delete;
    ~SequenceTable() {
        map_.for_each([](uint64_t, Sequence *s) { delete s; });
    }

private:
    SequenceMap map_;
    std::vector<std::unique_ptr<Sequence>> spare_;
    uint64_t incarnations_ = 0;  // sequences created so far
};

}  // namespace kvc
