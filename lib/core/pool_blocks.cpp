// Block-level pool operations that combine the block bookkeeping with the prefix cache: lazy
// eviction on reuse, entering filled blocks into the cache, and walking a prompt's cached prefix.
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/pool.hpp"
#include "core/tier_port.hpp"
#include "storage/pool_access.hpp"

namespace kvc {

// How many blocks ahead the prompt's token ids are asked for where they are read once, in order,
// a block (usually one cache line) per step: the walks and the hashing of a prompt's blocks. For
// a prompt not in cache (bench_trace's, read from a 10 MB trace) an admission took ~5.3k cycles
// without and ~4.7k with (4.1k with the prompt in cache); the whole batch replay ~1 % faster.
constexpr int64_t kPromptAhead = 6;
// The hint walk (walk_child_hints) takes a block in a few tens of cycles (~45 instructions), so
// six blocks ahead can be shorter than a prompt line's trip from memory: it asks 16 blocks (1 KiB
// at block size 16) ahead. bench_trace's admission, interleaved series of 6-8 runs: 0.8 ns/op
// (5-7 %) less than with six.
constexpr int64_t kWalkAhead = 16;

void pool_uncache_block(kvc_pool *p, int32_t b) {
    if (p->events.enabled()) {  // the record is read only for the event (erase needs no hash)
        EventRecord ev;
        ev.type = KVC_EVENT_BLOCK_REMOVED;
        ev.block_id = b;
        ev.hash = p->cache.hash_of(b);
        ev.parent = p->cache.parent_of(b);
        p->events.push(ev, nullptr);
    }
    p->cache.erase(b);
    p->blocks.set_cached(b, false);
}

int32_t pool_take_fresh_block(kvc_pool *p, int32_t priority) {
    int32_t b = p->blocks.next_victim();
    if (p->blocks.cached(b)) {
        // Lazy eviction: the block kept its cache entry while it waited in the LRU list. With a host
        // tier, pool_spill_before_taking has already queued the copy of what is worth keeping.
        pool_uncache_block(p, b);
        ++p->counters.evictions;
    }
    p->blocks.take_fresh(b, priority);
    // The next fresh block's entries are asked for now, to arrive while the caller stages this one:
    // from the LRU lists it is the least recently used cached block, cold (the decode step takes
    // one every block_size tokens per sequence, an admission several in a row); from the unhashed
    // list it is cold too after kvc_prefix_cache_reset or at start. Asked on every take: with a
    // block's state in one entry and its slot and flag in its record, that is a line each of
    // state, links and list plus the record's, and bench_core's BM_Alloc/0/0, where everything is
    // in cache, stays level; bench_trace's replays were ~8 % faster (tests/bench/RESULTS.md,
    // session 22). With eight arrays' lines plus the record it cost BM_Alloc/0/0 ~11 %.
    const int32_t next = p->blocks.next_victim();
    if (next >= 0) {
        p->blocks.prefetch_take(next);
        if (p->caching) {
            p->cache.prefetch_block(next);
            // And two takes ahead: the one after next. Its link is next's, asked for by the take
            // before (as this one asks for the one after's), so in a run of takes (an admission's
            // suffix) each victim's lines have two takes to arrive instead of one. On every take:
            // asked only inside runs of three or more, the lone decode-step takes no longer
            // readied a run's first two victims and the trace's admission was slower again.
            // Only with caching: without, no block is evicted and the unhashed list hands out
            // the blocks freed last, in cache (bench_core's AppendBlock/0 paid +11 instructions
            // per take, ~2 %). bench_trace, session 24: batch admission 11.6 -> 10.8 ns/op.
            const int32_t after = p->blocks.queues().next(next);
            if (after >= 0) {
                p->blocks.prefetch_take(after);
                p->cache.prefetch_block(after);
            }
        }
    }
    return b;
}

// A pending pair copying into a free block would overwrite whatever its next owner puts there (a
// tier restore writes at once), so those pairs are cancelled, and with them their holds on their
// sources, which may free those in turn (depth bounded by the pending pairs).
void pool_cancel_copies_into(kvc_pool *p, int32_t b) {
    for (int64_t i; p->copies.size() > 0 && (i = p->copies.find_dst(b)) >= 0;) {
        const int32_t src = p->copies.remove_at(i);
        if (p->blocks.unhold(src)) pool_cancel_copies_into(p, src);
    }
}

void pool_unpin_block(kvc_pool *p, int32_t b) {
    p->blocks.unpin(b);
    if (p->copies.size() > 0 && p->blocks.is_free(b)) pool_cancel_copies_into(p, b);
}

void pool_release_copy_pairs(kvc_pool *p, const int32_t *src, const int32_t *dst, int64_t n) {
    p->copies.finished(n);
    for (int64_t i = 0; i < n; ++i) {
        // A block that became free here (its holders let it go during the copy) takes the pairs
        // still queued into it with it, as any block that becomes free does.
        if (p->blocks.unhold(src[i]) && p->copies.size() > 0) pool_cancel_copies_into(p, src[i]);
        if (p->blocks.unhold(dst[i]) && p->copies.size() > 0) pool_cancel_copies_into(p, dst[i]);
    }
}

namespace {

// Writes the block's token ids (head[0..n_head), n_head < bs, then rest[0..bs - n_head)) into its
// staged row with 8-byte stores at 8-byte-aligned offsets. The hash reads the row back at once in
// aligned 8-byte words; a word that straddles two stores (what a memcpy to an odd position leaves)
// cannot be forwarded from the store buffer and stalls the hash until those stores reach the cache.
void stage_tokens(int32_t *row, const int32_t *head, int64_t n_head, const int32_t *rest, int64_t bs) {
    auto put2 = [row](int64_t k, uint64_t pair) { std::memcpy(row + k, &pair, sizeof pair); };
    auto get2 = [](const int32_t *src) {
        uint64_t pair;
        std::memcpy(&pair, src, sizeof pair);
        return pair;
    };
    int64_t k = 0;
    for (; k + 2 <= n_head; k += 2) put2(k, get2(head + k));
    if (k < n_head) {  // odd n_head: one word holds the last held-back id and the first new one
        put2(k, uint64_t(uint32_t(head[k])) | uint64_t(uint32_t(rest[0])) << 32);  // little-endian
        k += 2;
    }
    for (; k + 2 <= bs; k += 2) put2(k, get2(rest + (k - n_head)));
    if (k < bs) row[k] = rest[k - n_head];
}

// stage_tokens for the decode step's block fill: n_head = bs - 1 held-back ids and one new id, bs
// even. The first bs - 2 ids are one constant-size copy (inlined as vector moves) and the last two
// one 8-byte store, so that the hash's aligned 8-byte reads are each forwarded from one store as
// stage_tokens' are. ~50 instructions fewer per filled block than stage_tokens' loop (measured).
void stage_last_token(int32_t *row, const int32_t *head, int32_t last, int64_t bs) {
    switch (bs) {  // bs - 2 ids: never past the head's bs - 1
        case 16: __builtin_memcpy(row, head, 14 * sizeof(int32_t)); break;
        case 32: __builtin_memcpy(row, head, 30 * sizeof(int32_t)); break;
        case 8: __builtin_memcpy(row, head, 6 * sizeof(int32_t)); break;
        default: std::memcpy(row, head, size_t(bs - 2) * sizeof(int32_t)); break;
    }
    const uint64_t pair = uint64_t(uint32_t(head[bs - 2])) | uint64_t(uint32_t(last)) << 32;  // little-endian
    std::memcpy(row + bs - 2, &pair, sizeof pair);
}

// b, staged with the content of key.hash's cached copies (verified here), joins them as their
// newest copy; false (b stays uncached) when its content differs: a hash collision. Out of line:
// the common path enters a new hash.
__attribute__((noinline)) bool enter_copy(kvc_pool *p, Sequence *s, int32_t b, int32_t newest, uint64_t slot,
                                          const BlockKey &key, const int32_t *row) {
    if (!p->cache.verify(newest, s->chain, key, row)) return false;
    p->cache.add_copy_at(slot, b, key);
    return true;
}

// Enters the sequence's next block b (index num_hashed), its token ids staged at `row`, under key:
// in the cache (a new hash, or another copy of a cached one) unless b is cached already, with its
// event; the chain moves on. Always inlined: hash_next_block's key must stay in registers (see
// there).
__attribute__((always_inline)) inline void enter_block(kvc_pool *p, Sequence *s, int32_t b, bool cached,
                                                       const BlockKey key, const int32_t *row) {
    bool entered = false;
    if (!cached) {
        uint64_t slot = 0;
        bool more;
        const int32_t newest = p->cache.find_or_slot(key.hash, &slot, &more);
        entered = true;
        if (__builtin_expect(newest < 0, 1))
            p->cache.insert_at(slot, b, key);
        else
            entered = enter_copy(p, s, b, newest, slot, key, row);
    }
    if (entered) {
        p->blocks.set_cached(b, true);
        pool_report_stored(p, b, s->chain, key, row);
    }
    s->chain = key.hash;
    s->num_hashed += 1;
}

// Hashes the sequence's next block (index num_hashed) and caches it. Its token ids are
// head[0..n_head) followed by rest[0..block_size - n_head): the ids held back in the sequence's
// tail, then the new ones. They are laid out once, behind the parent hash, in the block's own cache
// record (the hash input and the cached copy at once; PrefixCache::stage), and hashed there.
void hash_next_block(kvc_pool *p, Sequence *s, const int32_t *head, int64_t n_head, const int32_t *rest) {
    const int64_t i = s->num_hashed;
    const int32_t b = s->table[size_t(i)];
    // A block already cached (not expected from the paths that fill blocks, but its record must
    // not be touched then) is staged in the hasher's scratch buffer instead.
    const bool cached = p->blocks.cached(b);
    int32_t *row = cached ? p->hasher.stage_in_scratch(s->chain) : p->cache.stage(b, s->chain);
    const int64_t bs = p->block_size;
    if (n_head == 0)
        copy_block_tokens(row, rest, size_t(bs) * sizeof(int32_t));
    else if (n_head == bs - 1 && (bs & 1) == 0)
        stage_last_token(row, head, rest[0], bs);
    else
        stage_tokens(row, head, n_head, rest, bs);
    const void *input = cached ? p->hasher.scratch() : p->cache.staged_input(b);
    // The hash stays in two general registers. Left to itself, GCC moved the returned halves into a
    // vector register through the stack (two 8-byte stores read back as one 16-byte load, which the
    // store buffer cannot forward) on the way to the map probe: ~7 ns per block measured. The empty
    // asm statement below pins hi and lo in registers.
    uint64_t hi, lo, lora = 0, digest = 0;
    if (__builtin_expect(!s->extra_keys, 1)) {
        const Hash128 h = p->hasher.hash_plain(input);
        hi = h.hi;
        lo = h.lo;
    } else {
        const BlockKey k = p->hasher.hash_staged(input, i, s->keys);
        hi = k.hash.hi;
        lo = k.hash.lo;
        lora = k.lora_id;
        digest = k.extras_digest;
    }
    asm("" : "+r"(hi), "+r"(lo));
    BlockKey key;
    key.hash.hi = hi;
    key.hash.lo = lo;
    key.lora_id = lora;
    key.extras_digest = digest;
    enter_block(p, s, b, cached, key, row);
}

}  // namespace

// pool_hash_full_blocks()'s work for everything but a single id that completes no block (core/pool.hpp).
void pool_add_tokens(kvc_pool *p, Sequence *s, const int32_t *src, int64_t n) {
    const int64_t bs = p->block_size;
    TokenTail &tail = s->tail;  // capacity >= bs
    const int64_t have = int64_t(tail.size());
    if (have + n < bs) {  // no block filled
        tail.append(src, src + n);
        return;
    }
    // The first block filled continues the tail; the ones after it come from src alone.
    hash_next_block(p, s, tail.data(), have, src);
    int64_t i = bs - have;
    for (; n - i >= bs; i += bs) {
        if (n - i >= (kPromptAhead + 1) * bs) __builtin_prefetch(src + i + kPromptAhead * bs);  // a prompt's ids
        hash_next_block(p, s, nullptr, 0, src + i);
    }
    // What is left (< block_size ids) becomes the new tail (an element loop: for the few ids
    // usually left, a call to memmove costs more than the copy).
    tail.assign(src + i, src + n);
}

void pool_hash_prompt_blocks(kvc_pool *p, Sequence *s, const int32_t *src, int64_t n, const BlockKey *known,
                             int64_t num_known) {
    const int64_t bs = p->block_size;
    int64_t i = 0;
    // Blocks whose key the hit search computed: their token ids are staged in their cache record
    // (what a hit verifies against) without hashing them again.
    for (int64_t k = 0; k < num_known && n - i >= bs; ++k, i += bs) {
        const int32_t b = s->table[size_t(s->num_hashed)];
        const bool cached = p->blocks.cached(b);
        int32_t *row = cached ? p->hasher.stage_in_scratch(s->chain) : p->cache.stage(b, s->chain);
        copy_block_tokens(row, src + i, size_t(bs) * sizeof(int32_t));
        enter_block(p, s, b, cached, known[k], row);
    }
    pool_hash_full_blocks(p, s, src + i, n - i);
}

void pool_rewind_hashing(kvc_pool *p, Sequence *s, int64_t n) {
    const int64_t bs = p->block_size;
    const int64_t m = n / bs;  // the first block not kept whole
    if (m >= s->num_hashed) {  // the cut is inside the unhashed tail (then m == num_hashed)
        s->tail.resize(size_t(n - m * bs));
        return;
    }
    // Block m was hashed. Its record holds its parent hash and token ids, from which the chain and
    // the tail continue -- when the record can be trusted. A cached block's can: it is what hits are
    // verified against. An uncached block's record was staged when this sequence filled the block
    // but may have been rewritten since (a swap-in takes fresh blocks), so it is trusted only for
    // the last hashed block, whose hash the sequence still has to check it against.
    const int32_t b = s->table[size_t(m)];
    bool trusted = p->blocks.cached(b);
    if (!trusted && m == s->num_hashed - 1) {
        const void *input = p->cache.staged_input(b);
        const Hash128 h = s->extra_keys ? p->hasher.hash_staged(input, m, s->keys).hash : p->hasher.hash_plain(input);
        trusted = h == s->chain;
    }
    s->num_hashed = m;
    s->tail.clear();  // capacity (block_size) kept: the assign below never allocates
    if (!trusted) {
        s->hash_stopped = true;
        return;
    }
    s->chain = p->cache.parent_of(b);
    const int32_t *ids = p->cache.tokens_of(b);
    s->tail.assign(ids, ids + (n - m * bs));
}

void pool_record_device_hit(kvc_pool *p, PrefixWalk *w, int64_t j, int32_t b) {
    p->hit_scratch[size_t(j)] = b;
    if (p->blocks.queues().contains(b)) ++w->free_hits;
}

void pool_record_lower_hit(kvc_pool *p, PrefixWalk *w, int64_t j, int32_t tier, int32_t slot) {
    p->walk_tier[size_t(j)] = uint8_t(tier);
    p->walk_slot[size_t(j)] = slot;
    p->hit_scratch[size_t(j)] = -1;
    ++(tier == KVC_TIER_HOST ? w->host_hits : w->disk_hits);
}

__attribute__((noinline)) int32_t pool_pick_copy(const kvc_pool *p, int32_t newest, CopyPick pick) {
    const FreeQueues &q = p->blocks.queues();
    if (pick == kPickPin)
        for (int32_t c = newest; c >= 0; c = p->cache.next_copy(c))
            if (p->blocks.pins(c) > 0) return c;
    int32_t c = newest;
    for (int i = 0; i < kPickScan && c >= 0; ++i, c = p->cache.next_copy(c))
        if (!q.contains(c)) return c;
    return newest;
}

// The blocks after device hit `b` (block i) that the child hints give (PrefixCache::child_of):
// while the hinted block is cached, holds the walk's parent hash and the prompt's next token ids,
// and is its hash's only copy, it is exactly what hashing the block and probing the index would
// find and verify -- recorded as a hit without either. Returns the last block index handled; the
// caller's loop goes on from the next one the usual way (a miss, another copy, a lower tier).
// Only for keys that add nothing to blocks past 0 (the caller checks). Out of line, so that the
// usual loop (and a prompt that misses at once) keeps its registers and instructions.
__attribute__((noinline)) int64_t walk_child_hints(kvc_pool *p, PrefixWalk *w, const int32_t *tokens,
                                                   int64_t i, int64_t max_blocks, int32_t b) {
    // pool_hinted_child + only_copy + pool_record_device_hit per block, with what they read copied
    // into locals once and the walk's chain and counts kept in registers until the end.
    const int64_t bs = p->block_size;
    const PrefixCache::HintReader hints = p->cache.hint_reader();
    const BlockPool &blocks = p->blocks;
    const FreeQueues &queues = blocks.queues();
    int32_t *hits = p->hit_scratch.data();
    int64_t free_hits = 0, j = i + 1;
    const int32_t *row = tokens + j * bs;
    // Asked for whether or not the prompt reaches that far: a prefetch never faults (the address
    // is computed as an integer: a pointer past the prompt's end would be undefined).
    const uintptr_t ahead = uintptr_t(kWalkAhead * bs) * sizeof(int32_t);
#if defined(__SSE2__)
    if (bs == 16) {  // the usual block size: the chain stays in a vector register
        __m128i chain = _mm_loadu_si128(reinterpret_cast<const __m128i *>(&w->chain));
        for (; j < max_blocks; ++j, row += 16) {
            __builtin_prefetch(reinterpret_cast<const void *>(uintptr_t(row) + ahead));
            const int32_t c = hints.child[b];
            if (c < 0 || !hints.any_plain_only_copy64(c, chain, row)) break;
            hits[j] = c;
            free_hits += queues.contains(c);
            chain = hints.hash_lane(c);
            b = c;
        }
        _mm_storeu_si128(reinterpret_cast<__m128i *>(&w->chain), chain);
        w->hit_blocks = j;  // the caller set it to i + 1 for block i
        w->free_hits += free_hits;
        return j - 1;
    }
#endif
    Hash128 chain = w->chain;
    for (; j < max_blocks; ++j, row += bs) {
        __builtin_prefetch(reinterpret_cast<const void *>(uintptr_t(row) + ahead));
        const int32_t c = hints.child[b];
        if (c < 0 || !blocks.cached(c) || !hints.plain_only_copy(c, chain, row)) break;
        hits[j] = c;
        free_hits += queues.contains(c);
        chain = hints.hash_of(c);
        b = c;
    }
    w->chain = chain;
    w->hit_blocks = j;  // the caller set it to i + 1 for block i
    w->free_hits += free_hits;
    return j - 1;
}

PrefixWalk pool_walk_prefix(kvc_pool *p, const int32_t *tokens, int64_t max_blocks, const KeySet &keys, WalkTiers lower,
                            CopyPick pick) {
    PrefixWalk w = pool_begin_walk(p);
    const int32_t bs = p->block_size;
    if (max_blocks > p->num_blocks) max_blocks = p->num_blocks;  // bounds hit_scratch
    int32_t prev = -1;  // the device block of block i - 1, when it was one
    for (int64_t i = 0; i < max_blocks; ++i) {
        const int32_t *toks = tokens + i * bs;
        if (i + kPromptAhead < max_blocks) __builtin_prefetch(toks + kPromptAhead * bs);
        BlockKey key = p->hasher.hash_block(w.chain, toks, i, keys);
        bool more;
        int32_t b = p->cache.find(key.hash, &more);
        if (b < 0) {  // not on the device: perhaps in a lower tier
            Tiers *t = lower != kWalkDevice ? p->tiers.load() : nullptr;
            if (!t) break;
            int32_t slot = -1;
            const int32_t tier = tier_find_lower(p, w.chain, key, toks, lower == kWalkHostDisk, &slot);
            if (tier < 0) break;
            pool_record_lower_hit(p, &w, i, tier, slot);
            w.chain = key.hash;
            w.hit_blocks = i + 1;
            prev = -1;
            continue;
        }
        // Block 0 is on the device: the prompt's next kWalkAhead blocks are asked for at once. The
        // walks ask kPromptAhead or kWalkAhead blocks ahead of the one they read, so those would
        // otherwise come one after another from memory (a prompt the caller has not touched
        // lately: bench_trace's). Not before the probe: a prompt that misses at once
        // (bench_core's PrefixLookupMiss/0, ~22 ns) would pay for them (+8 %, measured).
        if (i == 0) {
            const int64_t n = max_blocks < kWalkAhead + 1 ? max_blocks : kWalkAhead + 1;
            const uintptr_t at = uintptr_t(tokens), end = at + uintptr_t(n * bs) * sizeof(int32_t);
            for (uintptr_t a = at + 64; a < end; a += 64) __builtin_prefetch(reinterpret_cast<const void *>(a));
        }
        // Picked after the miss branch, so that the hot path knows b >= 0 (picking first made GCC
        // test the block id and the tiers pointer again: 16 instructions per block, measured).
        if (__builtin_expect(more, 0)) b = pool_pick_copy(p, b, pick);
        if (!p->cache.verify(b, w.chain, key, toks)) {
            w.verify_miss = true;
            break;
        }
        pool_record_device_hit(p, &w, i, b);
        w.chain = key.hash;
        w.hit_blocks = i + 1;
        // The hints are learnt here: b follows prev in a prompt, so the next walk that hits prev
        // can take b without hashing. (Learnt on hits, not when blocks enter the cache: filling a
        // block then costs nothing more, and a prompt seen once needs none.)
        if (prev >= 0) p->cache.set_child(prev, b);
        prev = b;
        // Past block 0 a block's key is its plain hash when the keys add nothing to it (the salt
        // covers block 0 only): the hints may then carry the walk on without hashing.
        if (keys.lora_id == 0 && keys.group == 0 && keys.mm.empty()) {
            i = walk_child_hints(p, &w, tokens, i, max_blocks, b);
            prev = p->hit_scratch[size_t(i)];
        }
    }
    return w;
}

}  // namespace kvc
