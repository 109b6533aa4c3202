// The reference model of the differential fuzzer: what a pool *should* do, written for clarity
// with plain containers and linear scans, straight from kvc.h and tests/../REFERENCES (vLLM block
// manager semantics). It shares no code with lib/.
//
// A cached block is identified by everything that determines its KV content: the LoRA id, the cache
// salt, the multimodal items that start before the block's end, and every token id from the start of
// the prompt to the block's end (the chained hash of the library stands for exactly this; with
// XXH3-128 a collision is not expected, so the model treats hash equality as identity equality).
//
// Free-block order (what makes block ids predictable, so tables are compared id for id):
//   - a block with no cache entry goes to the *front* of the "unhashed" list when freed;
//   - a cached block goes to the *back* of the LRU list of its retention priority;
//   - a fresh block comes from the front of the unhashed list, else from the front of the lowest
//     non-empty priority list (its cache entry is evicted then: lazy eviction);
//   - blocks are released deepest first (kvc_free, kvc_prefix_unpin);
//   - a cache hit or a pin takes a refcount-0 block out of its list; initially 0..N-1 in order.
//
// Copies (vLLM v1's duplicate blocks; lib/core/prefix_cache.hpp): a full block is entered in the device
// cache whenever a sequence completes it (or a restore brings it up), even when its identity is
// cached already: it becomes another copy, stamped with the order it entered in; each copy has its
// own STORED and REMOVED event and evicting one leaves the others. A hit (kvc_alloc, kvc_can_alloc,
// lookups, promotion rounds) takes, of the 8 newest copies, the newest in no free list
// (referenced, pinned or held by a pending pair), else the newest; kvc_prefix_pin / unpin take the
// newest pinned copy (of all) before those. (The library keeps copies newest first in a chain; the
// model sorts by the stamp.)
//
// Copy-on-write pairs: a pending pair holds its source (a refcount-0 source is in no free list until
// the pair is drained; it is not a sharer); when a pair's destination becomes free (refcount, pins
// and holds 0) the pair is cancelled and its hold on the source dropped (which may free that too).
//
// Truncate: blocks past the new end are released deepest first; a block being written that is still
// cached (a truncate cut into it) is copied if shared or pinned, else leaves the cache first (event
// BLOCK_REMOVED, after the copy-on-write and new blocks of the append). Hashing resumes at the cut
// block when the library can trust that block's record: the block is cached, or it is the last
// hashed block and its record (what was last staged in it: by filling it uncached, or by a restore)
// is this sequence's content there; otherwise the sequence never offers blocks to the cache again.
//
// Host tier (kvc_tier_attach_host; CPU backend, so every copy has completed when a call returns):
// H slots, each free, cached (an identity, in the LRU list of its priority) or held (a block of a
// swapped-out sequence). A slot is taken from the free list's front, else from the front of the
// lowest non-empty priority list (dropping the cached block there). Copies planned during a call
// finish in order at its end: a spilled or restored slot then joins the back of its LRU list, a slot
// a swap-in read goes back to the front of the free list.
//   - Spill (lib/tier/plan.cpp tier_plan_spills; README "Tiers"): before a call takes n fresh
//     device blocks (kvc_alloc: its restores and fresh blocks; kvc_append: copy-on-write and new
//     blocks; kvc_swap_in; a promotion's restore round), the cached blocks among the next n of the
//     free order (the ones those takes evict) are decided together. In the reverse of that order
//     (chain heads first: blocks are released deepest first) each is chosen while a slot is left to
//     take (free or cached ones, counted before any is taken), unless the host holds its identity
//     already, or another device copy of it is kept (one that is not a victim, or a victim chosen
//     already: of two evicted copies only the one evicted later is spilled), or its parent is not
//     kept. A parent is kept when the block is a prompt's first, or a copy of the parent is cached
//     on the device and not one of these victims (chosen ones excepted: a victim decided later, or
//     left out, counts as not kept), or indexed in the host or disk tier.
//     The chosen blocks are then copied, in the free order, each into a slot taken as below; every
//     other evicted block is dropped. So a lower tier never gets a block a lookup cannot walk to
//     through its parent, and when slots run short the heads get them.
//   - Re-hit: kvc_alloc's walk continues into the host tier where the device misses; each host hit is
//     copied into a fresh device block which enters the device cache. kvc_prefix_lookup and
//     kvc_can_alloc count host hits (a restore still takes a fresh block); pin/unpin look at the device.
//   - Swap out: refcount-1 unpinned blocks go to held slots (deepest first); the table shows -1 there.
//     Swap in: fresh device blocks in table order; the held slots are freed.
//   - Counts (kvc_tier_stats): blocks_in = spills + swap-outs (+ promotions, below), blocks_out =
//     restores + swap-ins; hits = restores; evictions = cached slots taken for new content.
//
// Disk tier (kvc_tier_attach_disk, below the host tier): D slots, each free, cached or busy (never
// held), with the host tier's lists: free front first, else the LRU front of the lowest priority.
//   - Spill: a cached host slot taken for new content (by a device spill, a swap-out or a promotion)
//     first has its block copied to a disk slot, keeping its identity and retention priority, unless
//     the disk holds that identity already (in any state), every disk slot is busy or its parent is
//     not kept (as for device spills, the victims of a spill plan that are left out counting as not
//     kept; then it is dropped). A cached disk slot taken so is an eviction. kvc.h/README say "a host
//     victim goes to the disk keeping its identity"; the "already there" and "all busy" cases and the
//     priority carried are lib/tier/plan.cpp's (spill_host_slot_to_disk).
//   - Lookups: kvc_prefix_lookup and kvc_prefix_lookup_tiers continue host -> disk (a block is
//     counted in the highest tier holding it). kvc_can_alloc walks host -> disk too, counting a
//     disk hit as a restore (a fresh block), as kvc_alloc's own walk does after promoting it: a
//     device block behind a disk hit is a hit for both (kvc.h: "would kvc_alloc succeed?"; it
//     once walked the host tier only and could answer NEVER for a prompt kvc_alloc admitted).
//     Pin/unpin look at the device only.
//   - Promotion (kvc_alloc, after its argument checks; first the sequence-exists and capacity
//     checks are made with the host -> disk walk, so that a refused kvc_alloc promotes nothing --
//     kvc.h's all-or-nothing rule; lib/capi/seq.cpp, tier/promote.cpp's
//     tier_promote_prefix; kvc.h says only that disk blocks are verified before they are restored):
//     when the prompt's hit (the same search, host -> disk) has disk blocks, its host and disk
//     blocks are kept from eviction; each disk block in prompt order takes a host slot (the host
//     victim's own disk spill cannot take a kept disk slot) and gets the disk slot's identity and
//     priority; where no host slot can be taken (all held or kept) or the host holds that identity
//     already (a copy in flight), this and every later disk block of the hit go back to the back of
//     their disk LRU lists (touched) and the hit ends there (for this round: see the rounds
//     below). Then the kept host blocks go back to the back of their LRU lists, in prompt order,
//     and the copies complete in order: each disk
//     slot stays cached (back of its list), its host slot becomes cached (back of its list); disk
//     hits, disk blocks_out and host blocks_in count it. kvc_alloc's own walk then sees the promoted
//     blocks as host hits (restored as above). kvc_tier_prefetch is this promotion alone, without
//     the refusal checks before it (prefetch()).
//   - Promotion rounds (kvc_alloc only; lib/tier/promote.cpp): when a disk block of the hit found no
//     host slot (not when the host had its identity already), a restore round follows the copies:
//     the hit is searched again (host -> disk); with no host block in it, or fewer free device
//     blocks (not counting its free device blocks) than host blocks, the rounds end. Else its
//     device blocks are pinned (prompt order; a free one leaves its list), its disk and then its
//     host blocks kept, each host block restored as kvc_alloc restores one (fresh block, cached,
//     STORED event with the prompt's tokens at that block, slot priority, host hit) and the new
//     block pinned, its reference dropped (no blocks_freed); the disk blocks go back to the backs
//     of their lists (prompt order), and the previous round's pins (its device and restored
//     blocks, prompt order) are dropped last first (a block left unpinned and unreferenced joins
//     its free list; pairs into it are cancelled). The restores complete, and the next round
//     promotes again from the new search. When the rounds end, the last round's pins are dropped
//     the same way, and kvc_alloc goes on as above: the round-restored blocks are device hits
//     then. So the allocation gets the whole hit kvc_prefix_lookup announced unless the host slots
//     are held or the device blocks run short. kvc_tier_prefetch makes one round only.
//   - Counts: blocks_in = disk spills, blocks_out = hits = promotions, evictions as above.
//   - reachable_blocks (every tier, kvc_tier_stats): of the cached blocks (device: refcount 0, not
//     pinned), those whose every ancestor identity is cached on the device or indexed in a host or
//     disk slot.
//   - kvc_prefix_cache_reset frees every cached host and disk slot (lowest priority list first,
//     each list front first, each freed slot to the front of the free list).
//   - Injected faults (lib/testing.h kvct_disk_fault, kvc.h's kvc_tier_get_stats doc): the next
//     `count` disk writes (or reads) fail, in the order the copies were planned. A failed write
//     drops the block (its disk slot freed, to the front); a failed read is a miss -- both the disk
//     slot and the host slot it was read into are freed; each counts one failure (and no hit).
//
// The disk file (KVC_DISK_PERSISTENT; kvc.h kvc_tier_attach_disk, lib/tier/disk.cpp): each slot's
// header in the file is either erased or names a block (identity, priority, write stamp) and the
// disk identity it was written under (kvc_tier_attach_disk_with_identity; NULL, "" and the old
// kvc_tier_attach_disk are one identity, "none"). A disk spill stamps its slot when it is planned
// (stamps only grow, across restarts too) and writes the header, under the pool's identity, when
// its write succeeds; a failed write erases the slot's header (whatever it held: the block it was
// evicting, or another identity's header in a slot that attach left free). Erased also: a slot
// whose read failed (kvc.h: "a slot whose read failed verification is erased too"), and every cached slot at
// kvc_prefix_cache_reset (in slot order; an injected header-write fault leaves the first `count`
// of them in the file, each counting one failure and one I/O error). A restart (pool destroyed,
// re-created, the same file attached with KVC_DISK_PERSISTENT) starts with an empty device cache
// and host tier (blocks there are not written back) and re-indexes every valid header written
// under the new attach's disk identity: on a duplicate block the newer stamp wins (the older slot
// stays free), the winners join their priority's LRU list oldest stamp first, the other slots are
// free in slot order (DiskTier::scan). recovered_blocks counts them. A valid header of another
// disk identity is foreign (foreign_blocks counts it at each attach): its slot is free, but at the
// back of the free list (the foreign slots in slot order, after every erased, empty or duplicate
// one: kvc.h "reused, after every empty one"; DiskTier::scan's defer_free), and untouched until a
// write reuses it (which makes it the writer's; a reset does not erase it, since it is not
// cached; a slot freed later goes to the front, so foreign slots stay last until written); an
// attach under its own identity later recovers it. Stamps are
// compared only among one identity's headers (the library restarts its count per identity, at the
// newest recovered stamp + 1), and the model's one global count orders them the same way.
//
// Sliding window W (kvc_pool_set_sliding_window) with prefix caching: a prompt's queries from its
// first uncached position c on see no key before c - W + 1, so a hit needs only the blocks from the
// one holding max(0, c - W + 1) (but at least the last one, so W = 1 still needs one) through the
// one ending at c. The hit is the largest block-aligned c <= n - 1 whose needed blocks are all
// available (device, or host where the call looks there), found by trying every candidate from
// the top: a block missing below the window does not stop the search, and a later candidate can
// fail where an earlier one holds. Blocks wholly before the window start out released (-1): not
// taken, not counted against capacity, a cached one left where it is. Without a window the hit is
// the leading run of available blocks, as before.
//
// KV content (the byte oracle, tests/kv_oracle.h): the model also knows what every device block
// and every host and disk slot *holds*, token slot by token slot: the identity of the position
// whose K/V was written there, or kUnknown. A position's identity chains the request's keys that
// enter block identities (LoRA id and cache salt at the root, each multimodal item at the start
// of the block its offset lies in) and every token up to it: the positions of two blocks the
// library may share (one Identity above) have the same identities, and a block holding another
// prefix's or another tenant's KV differs from the expectation even where token and position agree.
// Sequences carry their positions' identities (Seq::ids). Content moves with every copy the model
// knows, when the copy is planned (the library runs its copies in the order planned, before any
// later write of their source): the driver's writes (record_write), kvc_copy_pending (dst := src,
// pair by pair in queue order, so a pair reading an earlier pair's destination reads the copy),
// spills, restores, swap-out / swap-in, disk spills and promotions, and the file keeps what each
// successful disk write put in its slot (a restart recovers it). A block taken fresh holds
// unknown content (the library promises nothing about it); freeing, truncating, aborting,
// uncaching and resetting move nothing, so a free block (cached or not) keeps its content.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "../kv_oracle.h"
#include "kvc/kvc.h"

namespace model {

struct MmItem {
    uint64_t hi = 0, lo = 0;
    int64_t offset = 0, length = 0;
    bool operator<(const MmItem &o) const {
        return std::tie(hi, lo, offset, length) < std::tie(o.hi, o.lo, o.offset, o.length);
    }
    bool operator==(const MmItem &o) const {
        return hi == o.hi && lo == o.lo && offset == o.offset && length == o.length;
    }
};

struct Keys {
    uint64_t lora = 0;
    std::string salt;
    int32_t priority = KVC_PRIORITY_DEFAULT;
    std::vector<MmItem> mm;
    int32_t group = 0;  // hybrid pools (fuzz_hybrid.cpp): the KV-cache group whose blocks these keys name (0 elsewhere)
};

// Identity of a full block's content (see the header comment).
struct Identity {
    uint64_t lora = 0;
    std::string salt;
    std::vector<MmItem> mm;
    std::vector<int32_t> tokens;
    int32_t group = 0;  // a hybrid pool caches each group's blocks under its own keys
    bool operator<(const Identity &o) const {
        return std::tie(lora, salt, mm, tokens, group) < std::tie(o.lora, o.salt, o.mm, o.tokens, o.group);
    }
    bool operator==(const Identity &o) const {
        return lora == o.lora && salt == o.salt && mm == o.mm && tokens == o.tokens && group == o.group;
    }
};

inline Identity identity_of(const Keys &k, const std::vector<int32_t> &tokens, int64_t block, int32_t bs) {
    Identity id;
    id.lora = k.lora;
    id.salt = k.salt;
    id.group = k.group;
    const int64_t end = (block + 1) * bs;
    for (const MmItem &m : k.mm)
        if (m.offset < end) id.mm.push_back(m);
    id.tokens.assign(tokens.begin(), tokens.begin() + end);
    return id;
}

// ---- KV content (see the header comment) ----
// One entry per token slot of a block: a position's identity, or kUnknown. Empty = all unknown.
using Content = std::vector<uint64_t>;
constexpr uint64_t kUnknown = 0;  // kvo ids are 64-bit hashes: 0 stands for "never written"

// The identity of a request's empty prefix: the keys every block identity carries (LoRA id, salt).
inline uint64_t content_root(const Keys &k) {
    uint64_t salt = kvo_mix(k.lora);
    for (unsigned char ch : k.salt) salt = kvo_mix(salt ^ ch);
    return kvo_root(salt);
}

inline uint64_t mm_digest(const MmItem &m) {
    return kvo_mix(m.hi ^ kvo_mix(m.lo ^ kvo_mix((uint64_t(m.offset) << 32) ^ uint64_t(m.length))));
}

// Extends ids (identities of positions 0..ids.size()-1) to every token of `tokens`. A multimodal
// item enters at the start of the block its offset lies in: the first block whose identity has it.
inline void extend_ids(const Keys &k, const std::vector<int32_t> &tokens, int32_t bs, std::vector<uint64_t> *ids) {
    uint64_t id = ids->empty() ? content_root(k) : ids->back();
    for (size_t p = ids->size(); p < tokens.size(); ++p) {
        if (p % size_t(bs) == 0)
            for (const MmItem &m : k.mm)
                if (m.offset / bs == int64_t(p) / bs) id = kvo_mix(id ^ mm_digest(m));
        ids->push_back(id = kvo_next(id, tokens[p]));
    }
}

struct Block {
    int32_t ref = 0;
    int32_t pins = 0;
    int32_t holds = 0;  // pending copy-on-write pairs reading it
    bool staged_valid = false;
    Identity staged;    // the content the library's per-block record last received
    int32_t priority = KVC_PRIORITY_DEFAULT;
    bool cached = false;
    Identity id;  // valid while cached
    uint64_t entered = 0;  // when it entered the cache (Pool::next_entered): copies are taken newest first
    Content kv;   // what its storage holds (see "KV content")
};

struct Seq {
    std::vector<int32_t> table;
    int64_t num_tokens = 0;
    int64_t reserved = 0;         // confirmed + lookahead slots
    std::vector<int32_t> tokens;  // confirmed tokens (kept even with caching off; unused then)
    Keys keys;
    int64_t num_hashed = 0;       // leading full blocks already offered to the cache
    bool hash_stopped = false;    // a truncate could not resume hashing: no block is offered again
    bool swapped = false;
    std::vector<int32_t> swap_slots;  // per table entry: the held host slot, or -1
    int64_t released = 0;         // leading table entries released by the sliding window (-1)
    int64_t window_from = 0;      // first position the latest alloc (first uncached) / append added
    int64_t hit_blocks = 0;       // table entries kvc_alloc found cached (a fork's inherits them, a
                                  // truncate lowers them to n / bs): kvc_abort leaves those cached
    std::vector<uint64_t> ids;    // the identity of each confirmed position: what its KV must be
};

struct HostSlot {
    enum State { kFree, kCached, kHeld, kBusy };
    State state = kFree;
    bool indexed = false;  // carries an identity (cached, or busy with a spill/restore copy)
    Identity id;
    int32_t priority = KVC_PRIORITY_DEFAULT;
    bool recovered = false;  // disk: re-indexed at a restart and not reused since (coverage only)
    Content kv;              // what the slot holds once its copy in has run
};

// A lower tier's block counts (kvc_tier_stats; failures only with injected disk faults).
struct HostCounters {
    int64_t hits = 0, evictions = 0, blocks_in = 0, blocks_out = 0, failures = 0;
    int64_t io_errors = 0, checksum_failures = 0;  // disk
};

// The host and disk tiers keep their slots alike: a slot array, a free list and an LRU list per
// priority. These helpers take one tier's three; the Model's host_* / disk_* name the tier.
using SlotLru = std::vector<std::deque<int32_t>>;  // per priority; front = evicted first
inline int32_t slot_find_indexed(const std::vector<HostSlot> &slots, const Identity &id) {
    for (size_t i = 0; i < slots.size(); ++i)
        if (slots[i].indexed && slots[i].id == id) return int32_t(i);
    return -1;
}
inline int32_t slot_find_usable(const std::vector<HostSlot> &slots, const Identity &id) {
    const int32_t v = slot_find_indexed(slots, id);
    return v >= 0 && slots[size_t(v)].state == HostSlot::kCached ? v : -1;
}
inline void slot_unlink(std::deque<int32_t> &free, SlotLru &lru, int32_t v) {
    auto rm = [v](std::deque<int32_t> &l) {
        auto it = std::find(l.begin(), l.end(), v);
        if (it != l.end()) l.erase(it);
    };
    rm(free);
    for (auto &l : lru) rm(l);
}
// The slot new content takes: the free list's front, else the lowest priority's LRU front; -1 if none.
inline int32_t slot_next_victim(const std::deque<int32_t> &free, const SlotLru &lru) {
    if (!free.empty()) return free.front();
    for (const auto &l : lru)
        if (!l.empty()) return l.front();
    return -1;
}
inline void slot_release(std::vector<HostSlot> &slots, std::deque<int32_t> &free, int32_t v) {
    slots[size_t(v)].indexed = false;
    slots[size_t(v)].recovered = false;
    slots[size_t(v)].state = HostSlot::kFree;
    free.push_front(v);
}
inline void slot_commit_cached(std::vector<HostSlot> &slots, SlotLru &lru, int32_t v) {
    slots[size_t(v)].state = HostSlot::kCached;
    lru[size_t(slots[size_t(v)].priority)].push_back(v);
}
inline int64_t slot_count(const std::vector<HostSlot> &slots, HostSlot::State st) {
    int64_t n = 0;
    for (const HostSlot &hs : slots) n += hs.state == st;
    return n;
}

// A copy planned during a call (tier/tiers.hpp's TierJob kinds); finish_call() commits them in order.
struct Job {
    // kPersist: kvc_tier_flush's write of a host slot that stays cached (busy until the write
    // commits, then at its LRU tail; the disk side commits as kDiskSpill's).
    enum Kind { kSpill, kRestore, kSwapIn, kDiskSpill, kPromote, kPersist };
    Kind kind = kSpill;
    int32_t host = -1, disk = -1;
    uint64_t stamp = 0;  // kDiskSpill: the slot's write stamp (taken when planned)
};

// One disk slot's header in the file (see the header comment, "The disk file").
struct FileHeader {
    bool valid = false;
    Identity id;
    int32_t priority = KVC_PRIORITY_DEFAULT;
    uint64_t stamp = 0;
    int32_t owner = 0;          // the disk identity it was written under (an identity class, 0 = none)
    bool seen_foreign = false;  // counted foreign at an attach since it was written (coverage only)
    Content kv;                 // the block's bytes the write put in the file
};

// Where the prefix walk looks past the device (lib/core/pool.hpp's WalkTiers).
enum Lower { kDeviceOnly = 0, kHostTier = 1, kHostDisk = 2 };

struct Event {
    int32_t type = 0;
    int32_t block = -1;
    std::vector<int32_t> tokens;  // STORED: the block's token ids
    Identity id;                  // STORED: for hash-consistency checks
    int64_t depth = 0;            // STORED: block index in its prompt
    uint64_t seqno = 0;
};

struct Counters {
    int64_t allocs = 0, frees = 0, forks = 0, appends = 0, blocks_allocated = 0, blocks_freed = 0,
            cow_copies = 0, prefix_query_tokens = 0, prefix_hit_tokens = 0, evictions = 0;
    int64_t device_hits = 0;  // hit blocks kvc_alloc found on the device (tier stats' device hits)
};

// Result of a call: the status and the out-values the library reports.
struct Result {
    kvc_status status = KVC_OK;
    int64_t value = 0;  // cached tokens / new blocks / verdict / count ...
};

class Pool {
public:
    int32_t bs = 1;
    int32_t num_blocks = 1;
    bool caching = true;
    int64_t max_seq_len = 0;
    int64_t watermark_blocks = 0;
    int32_t event_capacity = 0;
    int32_t window = 0;  // kvc_pool_set_sliding_window
    int64_t window_released = 0;  // blocks released by the window (coverage report only)
    int64_t window_skip_allocs = 0;    // allocs whose hit starts past block 0 (coverage only)
    int64_t window_beyond_allocs = 0;  // allocs whose hit exceeds the leading run (coverage only)
    int64_t window_beyond_lookups = 0; // the same for kvc_prefix_lookup (coverage only)
    int64_t window_pins_skipping = 0;  // windowed pins that left leading blocks unpinned (coverage only)

    std::vector<Block> blocks;
    std::deque<int32_t> unhashed;                 // front = reused first
    std::vector<std::deque<int32_t>> lru;         // per priority; front = evicted first
    std::map<uint64_t, Seq> seqs;
    std::deque<std::pair<int32_t, int32_t>> pending;
    std::deque<Event> events;
    uint64_t next_seqno = 0;
    uint64_t next_entered = 1;  // stamps blocks entering the device cache (Block::entered)
    int64_t copies_entered = 0;  // blocks entered while their identity was cached already (coverage)
    int64_t copy_hits = 0;       // hits that had several copies to choose from (coverage)
    int64_t events_dropped = 0;
    Counters c;

    // Host tier (empty when not attached).
    bool host = false;
    std::vector<HostSlot> hslots;
    std::deque<int32_t> hfree;                // front = taken first
    SlotLru hlru;                             // per priority; front = evicted first
    std::vector<Job> jobs;                    // this call's copies, in the order planned
    HostCounters hc;

    // Disk tier (empty when not attached): the same slot states but kHeld, lists and counters.
    bool disk = false;
    std::vector<HostSlot> dslots;
    std::deque<int32_t> dfree;                // front = taken first
    SlotLru dlru;                             // per priority; front = evicted first
    HostCounters dc;
    // Injected disk faults (kvct_disk_fault): the next fault_left reads (read kind) or writes
    // (write kind) fail, consumed in the order the copies run (= planned).
    bool fault_write = false;
    bool fault_checksum = false;  // a read fault that corrupts the bytes (else an I/O error)
    int32_t fault_left = 0;
    int64_t promotions_refused = 0;  // disk hits that found no host slot (coverage only)
    // The disk file (persistent inputs restart from it): a header per slot, the next write stamp.
    std::vector<FileHeader> dfile;
    uint64_t next_stamp = 1;
    int64_t recovered = 0;            // disk slots re-indexed at this pool's attach (recovered_blocks)
    int64_t recovered_hits = 0;       // promotions of such slots (coverage only)
    int64_t recovered_stale = 0;      // recovered blocks the disk did not cache at the restart (coverage)
    int64_t erased = 0, erase_faults = 0;  // headers erased / left by a failed erasure (coverage)
    int64_t recovered_dups = 0;       // valid headers a newer one of the same block outranked (coverage)
    int32_t owner = 0;                // this pool's disk identity (class; 0 = none): the headers it writes
    int64_t foreign = 0;              // valid headers of another identity at this pool's attach (foreign_blocks)
    int64_t reclaimed = 0;            // recovered headers an earlier attach had counted foreign (coverage)

    void attach_host(int32_t slots) {
        host = true;
        hslots.assign(size_t(slots), HostSlot{});
        hfree.clear();
        for (int32_t i = 0; i < slots; ++i) hfree.push_back(i);
        hlru.assign(KVC_PRIORITY_MAX + 1, {});
    }

    void attach_disk(int32_t slots) {
        disk = true;
        dslots.assign(size_t(slots), HostSlot{});
        dfree.clear();
        for (int32_t i = 0; i < slots; ++i) dfree.push_back(i);
        dlru.assign(KVC_PRIORITY_MAX + 1, {});
        if (dfile.size() < size_t(slots)) dfile.resize(size_t(slots));
    }

    // A KVC_DISK_PERSISTENT attach of the file `file` under disk identity `who` (after attach_host
    // and attach_disk on a fresh pool): re-indexes its valid headers of that identity and counts
    // the others' as foreign (see the header comment). `cached_before`: the identities the
    // previous pool's disk cached at its destruction (coverage only).
    void recover(const std::vector<FileHeader> &file, uint64_t stamp, const std::vector<Identity> &cached_before,
                 int32_t who) {
        dfile = file;
        next_stamp = stamp;
        owner = who;
        std::vector<std::pair<uint64_t, int32_t>> found;  // (stamp, slot)
        std::vector<int32_t> foreign_slots;
        for (size_t ds = 0; ds < dslots.size(); ++ds) {
            if (!dfile[ds].valid) continue;
            if (dfile[ds].owner != owner) {  // foreign: left free, header kept
                ++foreign;
                dfile[ds].seen_foreign = true;
                foreign_slots.push_back(int32_t(ds));
                continue;
            }
            found.push_back({dfile[ds].stamp, int32_t(ds)});
        }
        std::sort(found.begin(), found.end());
        std::vector<bool> keep(dslots.size(), false);
        for (auto it = found.rbegin(); it != found.rend(); ++it) {  // newest first: a duplicate loses
            bool dup = false;
            for (size_t ds = 0; ds < dslots.size(); ++ds) dup = dup || (keep[ds] && dfile[ds].id == dfile[size_t(it->second)].id);
            keep[size_t(it->second)] = !dup;
            recovered_dups += dup;
        }
        for (const auto &f : found) {  // oldest first: the previous run's write order is the LRU order
            if (!keep[size_t(f.second)]) continue;
            HostSlot &d = dslots[size_t(f.second)];
            disk_unlink(f.second);
            d.indexed = true;
            d.recovered = true;
            d.id = dfile[size_t(f.second)].id;
            d.priority = dfile[size_t(f.second)].priority;
            d.kv = dfile[size_t(f.second)].kv;
            disk_commit_cached(f.second);
            ++recovered;
            recovered_stale += std::find(cached_before.begin(), cached_before.end(), d.id) == cached_before.end();
            reclaimed += dfile[size_t(f.second)].seen_foreign;
            dfile[size_t(f.second)].seen_foreign = false;
        }
        // Foreign slots go to the back of the free list, in slot order: every other free slot
        // (erased, never written, an older duplicate) is written first, so another identity's
        // blocks survive while there is room (kvc.h; lib/tier/disk.cpp DiskTier::scan since 5c5c43a).
        for (int32_t ds : foreign_slots) {
            dfree.erase(std::find(dfree.begin(), dfree.end(), ds));
            dfree.push_back(ds);
        }
    }
    // The identities the disk caches now (for recover's coverage count).
    std::vector<Identity> disk_cached() const {
        std::vector<Identity> ids;
        for (const HostSlot &d : dslots)
            if (d.state == HostSlot::kCached) ids.push_back(d.id);
        return ids;
    }

    void init(int32_t bs_, int32_t n, bool caching_, int64_t max_len, double watermark, int32_t ev_cap) {
        bs = bs_;
        num_blocks = n;
        caching = caching_;
        max_seq_len = max_len;
        watermark_blocks = int64_t(watermark * double(n));  // floor for the small non-negative values used
        event_capacity = caching_ ? ev_cap : 0;
        blocks.assign(size_t(n), Block{});
        unhashed.clear();
        for (int32_t b = 0; b < n; ++b) unhashed.push_back(b);
        lru.assign(KVC_PRIORITY_MAX + 1, {});
    }

    // ---- derived counts ----
    int64_t num_free() const {
        int64_t n = 0;
        for (const Block &b : blocks) n += is_free(b);
        return n;
    }
    static bool is_free(const Block &b) { return b.ref == 0 && b.pins == 0 && b.holds == 0; }
    int64_t num_used() const {
        int64_t n = 0;
        for (const Block &b : blocks) n += b.ref > 0 || b.holds > 0;
        return n;
    }
    int64_t num_pinned() const {
        int64_t n = 0;
        for (const Block &b : blocks) n += b.pins > 0;
        return n;
    }
    int64_t num_cached_free() const {
        int64_t n = 0;
        for (const Block &b : blocks) n += is_free(b) && b.cached;
        return n;
    }
    static int64_t blocks_for(int64_t tokens, int32_t bs) { return tokens <= 0 ? 0 : (tokens - 1) / bs + 1; }

    // ---- free lists ----
    bool in_lists(int32_t b) const {
        if (std::find(unhashed.begin(), unhashed.end(), b) != unhashed.end()) return true;
        for (const auto &l : lru)
            if (std::find(l.begin(), l.end(), b) != l.end()) return true;
        return false;
    }
    void unlink(int32_t b) {
        auto rm = [b](std::deque<int32_t> &l) {
            auto it = std::find(l.begin(), l.end(), b);
            if (it != l.end()) l.erase(it);
        };
        rm(unhashed);
        for (auto &l : lru) rm(l);
    }
    void enqueue_free(int32_t b) {
        if (blocks[size_t(b)].cached) lru[size_t(blocks[size_t(b)].priority)].push_back(b);
        else unhashed.push_front(b);
    }
    int32_t victim() const {
        if (!unhashed.empty()) return unhashed.front();
        for (const auto &l : lru)
            if (!l.empty()) return l.front();
        return -1;
    }

    // ---- events ----
    void push_event(Event e) {
        if (event_capacity == 0) return;
        e.seqno = next_seqno++;
        if (int64_t(events.size()) == event_capacity) {
            ++events_dropped;
            return;
        }
        events.push_back(std::move(e));
    }

    // ---- cache ----
    // The device blocks cached with this identity (its copies), newest first.
    std::vector<int32_t> copies_of(const Identity &id) const {
        std::vector<int32_t> cs;
        for (int32_t b = 0; b < num_blocks; ++b)
            if (blocks[size_t(b)].cached && blocks[size_t(b)].id == id) cs.push_back(b);
        std::sort(cs.begin(), cs.end(),
                  [this](int32_t x, int32_t y) { return blocks[size_t(x)].entered > blocks[size_t(y)].entered; });
        return cs;
    }
    // The copy a device hit takes (see the header comment, "Copies"): of the kPickScan newest, the
    // newest one in no free list, else the newest; with `pin` (kvc_prefix_pin / unpin) the newest
    // pinned one (of all) before those. -1 when none is cached.
    static constexpr size_t kPickScan = 8;  // lib/core/pool.hpp kPickScan
    int32_t pick_cached(const Identity &id, bool pin = false) const {
        const std::vector<int32_t> cs = copies_of(id);
        if (cs.empty()) return -1;
        if (pin)
            for (int32_t b : cs)
                if (blocks[size_t(b)].pins > 0) return b;
        for (size_t i = 0; i < cs.size() && i < kPickScan; ++i)
            if (!is_free(blocks[size_t(cs[i])])) return cs[i];
        return cs.front();
    }

    // Where full block i of the prompt is available: its device block (pick_cached's), else (lower
    // >= kHostTier) -2 - its host slot, else (lower == kHostDisk) -2 - host slots - its disk slot,
    // else -1.
    int32_t locate(const std::vector<int32_t> &tokens, int64_t i, const Keys &k, int lower, bool pin = false) const {
        Identity id = identity_of(k, tokens, i, bs);
        int32_t b = pick_cached(id, pin);
        if (b < 0 && lower >= kHostTier && host) {
            int32_t v = host_find_usable(id);
            if (v >= 0) b = -2 - v;
            else if (lower == kHostDisk && disk && (v = disk_find_usable(id)) >= 0) b = disk_ref(v);
        }
        return b;
    }
    int32_t disk_ref(int32_t ds) const { return -2 - int32_t(hslots.size()) - ds; }
    bool is_disk_ref(int32_t b) const { return b <= -2 - int32_t(hslots.size()); }
    int32_t disk_slot_of(int32_t b) const { return -2 - int32_t(hslots.size()) - b; }

    // Leading full blocks of the prompt that are cached now (at most max_blocks), as locate() gives them.
    std::vector<int32_t> walk(const std::vector<int32_t> &tokens, int64_t max_blocks, const Keys &k,
                              int lower = kDeviceOnly, bool pin = false) const {
        std::vector<int32_t> hits;
        for (int64_t i = 0; i < max_blocks && i < num_blocks; ++i) {
            int32_t b = locate(tokens, i, k, lower, pin);
            if (b == -1) break;
            hits.push_back(b);
        }
        return hits;
    }

    // A prompt's prefix hit: its first `skip` blocks are not needed (sliding window), blocks
    // skip .. skip + blocks.size() - 1 are taken (locate()'s entries); cached tokens =
    // (skip + blocks.size()) x bs.
    struct Hit {
        int64_t skip = 0;
        std::vector<int32_t> blocks;
        int64_t tokens(int32_t block_size) const { return (skip + int64_t(blocks.size())) * block_size; }
    };

    // The hit of a prompt of n tokens (see the header comment). Without a window: the leading run.
    Hit find_hit(const std::vector<int32_t> &tokens, int64_t n, const Keys &k, int lower) const {
        Hit h;
        const int64_t max_blocks = (n - 1) / bs;  // c <= n - 1
        if (window <= 0) {
            h.blocks = walk(tokens, max_blocks, k, lower);
            return h;
        }
        for (int64_t e = max_blocks - 1; e >= 0; --e) {
            const int64_t first_uncached = (e + 1) * bs;
            const int64_t first_key = std::max<int64_t>(0, first_uncached - window + 1);
            const int64_t f = std::min(first_key / bs, e);
            std::vector<int32_t> got;
            for (int64_t i = f; i <= e; ++i) {
                int32_t b = locate(tokens, i, k, lower);
                if (b == -1) break;
                got.push_back(b);
            }
            if (int64_t(got.size()) != e - f + 1) continue;
            h.skip = f;
            h.blocks = got;
            return h;
        }
        return h;  // no candidate: no hit
    }

    // ---- host tier ----
    int32_t host_find_indexed(const Identity &id) const { return slot_find_indexed(hslots, id); }
    int32_t host_find_usable(const Identity &id) const { return slot_find_usable(hslots, id); }
    void host_unlink(int32_t v) { slot_unlink(hfree, hlru, v); }
    // Takes a free or cached slot for new content (busy, no identity); -1 if all held or busy.
    int32_t host_take_slot() {
        const int32_t v = slot_next_victim(hfree, hlru);
        if (v < 0) return -1;
        HostSlot &hs = hslots[size_t(v)];
        if (hs.state == HostSlot::kCached) {
            if (disk) disk_spill(v);
            ++hc.evictions;
        }
        host_unlink(v);
        hs.indexed = false;
        hs.state = HostSlot::kBusy;
        return v;
    }
    void host_release(int32_t v) { slot_release(hslots, hfree, v); }
    void host_commit_cached(int32_t v) { slot_commit_cached(hslots, hlru, v); }
    // The end of a call: its copies complete in the order they were planned (disk faults, where
    // injected, hit the disk copies in that order too).
    void finish_call() {
        for (const Job &j : jobs) {
            switch (j.kind) {
                case Job::kSpill: host_commit_cached(j.host); ++hc.blocks_in; break;
                case Job::kRestore: host_commit_cached(j.host); ++hc.blocks_out; break;
                case Job::kSwapIn: host_release(j.host); ++hc.blocks_out; break;
                case Job::kPersist:
                    host_commit_cached(j.host);
                    [[fallthrough]];
                case Job::kDiskSpill:
                    if (take_fault(true)) {  // a failed write drops the block, and the slot is erased
                        disk_release(j.disk);
                        dfile[size_t(j.disk)].valid = false;
                        ++erased;
                        ++dc.failures;
                        ++dc.io_errors;
                    } else {
                        dfile[size_t(j.disk)] = {true, dslots[size_t(j.disk)].id, dslots[size_t(j.disk)].priority, j.stamp,
                                                 owner, false, dslots[size_t(j.disk)].kv};
                        disk_commit_cached(j.disk);
                        ++dc.blocks_in;
                    }
                    break;
                case Job::kPromote:
                    if (take_fault(false)) {  // a bad read is a miss: neither copy is kept, nor the file's
                        dfile[size_t(j.disk)].valid = false;
                        ++erased;
                        disk_release(j.disk);
                        host_release(j.host);
                        ++dc.failures;
                        ++(fault_checksum ? dc.checksum_failures : dc.io_errors);
                    } else {
                        disk_commit_cached(j.disk);
                        host_commit_cached(j.host);
                        ++dc.blocks_out;
                        ++hc.blocks_in;
                        ++dc.hits;
                        recovered_hits += dslots[size_t(j.disk)].recovered;
                    }
                    break;
            }
        }
        jobs.clear();
    }
    bool take_fault(bool write) {
        if (fault_left == 0 || fault_write != write) return false;
        --fault_left;
        return true;
    }

    // ---- disk tier ----
    int32_t disk_find_indexed(const Identity &id) const { return slot_find_indexed(dslots, id); }
    int32_t disk_find_usable(const Identity &id) const { return slot_find_usable(dslots, id); }
    void disk_unlink(int32_t ds) { slot_unlink(dfree, dlru, ds); }
    void disk_release(int32_t ds) { slot_release(dslots, dfree, ds); }
    void disk_commit_cached(int32_t ds) { slot_commit_cached(dslots, dlru, ds); }
    int64_t disk_count(HostSlot::State st) const { return slot_count(dslots, st); }
    // Host slot v (cached) is being reused: its block goes to a disk slot (free first, then the
    // lowest-priority LRU head, evicted) keeping its identity and priority, unless its parent is not
    // kept, the disk has that identity already (in any state) or every disk slot is busy.
    void disk_spill(int32_t v) {
        if (parent_kept(hslots[size_t(v)].id)) (void)write_to_disk(v, Job::kDiskSpill);
        else ++disk_orphans;
    }
    // Queues the write of host slot v's block to a disk slot (disk_spill's rule); false when the
    // disk has the block or no disk slot is to be had.
    bool write_to_disk(int32_t v, Job::Kind kind) {
        const HostSlot &hs = hslots[size_t(v)];
        if (disk_find_indexed(hs.id) >= 0) return false;
        const int32_t ds = slot_next_victim(dfree, dlru);
        if (ds < 0) return false;
        HostSlot &d = dslots[size_t(ds)];
        if (d.state == HostSlot::kCached) ++dc.evictions;
        disk_unlink(ds);
        d.state = HostSlot::kBusy;
        d.indexed = true;
        d.recovered = false;
        d.id = hs.id;
        d.priority = hs.priority;
        d.kv = hs.kv;
        jobs.push_back({kind, v, ds, next_stamp++});
        return true;
    }
    // Host slot v (kept busy by the caller), block i of the prompt `tokens`: copied into a fresh
    // device block (one reference) that enters the device cache (event STORED); the slot takes the
    // keys' priority, counts a hit, and becomes cached again when the copy completes.
    int32_t restore_hit(int32_t v, const std::vector<int32_t> &tokens, int64_t i, const Keys &k) {
        const int32_t b = take_fresh(k.priority);
        Block &blk = blocks[size_t(b)];
        copies_entered += !copies_of(hslots[size_t(v)].id).empty();
        blk.cached = true;
        blk.id = hslots[size_t(v)].id;
        blk.entered = next_entered++;
        blk.kv = hslots[size_t(v)].kv;
        blk.staged = blk.id;
        blk.staged_valid = true;
        Event e;
        e.type = KVC_EVENT_BLOCK_STORED;
        e.block = b;
        e.tokens.assign(tokens.begin() + i * bs, tokens.begin() + (i + 1) * bs);
        e.id = blk.id;
        e.depth = i;
        push_event(e);
        hslots[size_t(v)].priority = k.priority;
        ++hc.hits;
        jobs.push_back({Job::kRestore, v});
        return b;
    }
    bool has_disk_hit(const Hit &h) const {
        return std::any_of(h.blocks.begin(), h.blocks.end(), [this](int32_t b) { return is_disk_ref(b); });
    }
    bool is_host_hit(int32_t b) const { return b < 0 && !is_disk_ref(b); }
    // The hit's host (or disk) slots are kept from eviction: out of their lists, busy.
    void keep_lower_hits(const Hit &h, bool disk_tier) {
        for (int32_t b : h.blocks) {
            if (disk_tier && is_disk_ref(b)) {
                disk_unlink(disk_slot_of(b));
                dslots[size_t(disk_slot_of(b))].state = HostSlot::kBusy;
            } else if (!disk_tier && is_host_hit(b)) {
                host_unlink(-2 - b);
                hslots[size_t(-2 - b)].state = HostSlot::kBusy;
            }
        }
    }
    // One disk -> host round of the promotion (see the header comment, "Promotion"): the hit's disk
    // blocks are read up into host slots, in prompt order, while slots can be taken; the copies are
    // queued (the caller runs them). True when a disk block found no host slot (not when the host
    // had its identity already): only then can a restore round free slots for another round.
    bool promote_round(const Hit &h) {
        keep_lower_hits(h, false);  // the hit's host and disk blocks are kept from eviction meanwhile
        keep_lower_hits(h, true);
        bool promoting = true, short_of_slots = false;
        for (int32_t b : h.blocks) {
            if (!is_disk_ref(b)) continue;
            const int32_t ds = disk_slot_of(b);
            promoting = promoting && host_find_indexed(dslots[size_t(ds)].id) < 0;
            const int32_t v = promoting ? host_take_slot() : -1;
            if (v < 0) {  // no host slot: the hit ends here; this and later disk hits are touched
                short_of_slots = short_of_slots || promoting;
                promotions_refused += promoting;
                promoting = false;
                disk_commit_cached(ds);
                continue;
            }
            HostSlot &hs = hslots[size_t(v)];
            hs.indexed = true;
            hs.id = dslots[size_t(ds)].id;
            hs.priority = dslots[size_t(ds)].priority;
            hs.kv = dslots[size_t(ds)].kv;
            jobs.push_back({Job::kPromote, v, ds});
        }
        for (int32_t b : h.blocks)
            if (is_host_hit(b)) host_commit_cached(-2 - b);
        return short_of_slots;
    }
    // A pin (kvc_prefix_pin's and the promotion rounds'): a free block leaves its list; the last
    // unpin of an unreferenced block puts it back (pairs into it are cancelled).
    void pin_block(int32_t b) {
        if (blocks[size_t(b)].pins++ == 0) unlink(b);
    }
    void unpin_block(int32_t b) {
        Block &blk = blocks[size_t(b)];
        if (--blk.pins == 0 && is_free(blk)) became_free(b);
    }
    // One host -> device round (kvc_alloc only; see the header comment, "Promotion"): the hit's
    // device blocks are pinned, its host blocks restored into fresh device blocks (cached, pinned,
    // unreferenced); `pins` lists both in prompt order, then the previous round's `prev` pins are
    // dropped, last first. False, changing nothing, without a host block or free blocks for them.
    bool restore_round(const std::vector<int32_t> &tokens, const Hit &h, const Keys &k, std::vector<int32_t> *pins,
                       std::vector<int32_t> *prev) {
        int64_t host_hits = 0, free_hits = 0;
        for (int32_t b : h.blocks) {
            host_hits += is_host_hit(b);
            if (b >= 0) free_hits += is_free(blocks[size_t(b)]);
        }
        if (host_hits == 0 || num_free() - free_hits < host_hits) return false;
        pins->clear();
        for (int32_t b : h.blocks)  // before any fresh block is taken: eviction must not take them
            if (b >= 0) pin_block(b);
        round_free_hits += free_hits;
        const int64_t evictions_before = c.evictions;
        keep_lower_hits(h, true);  // a host victim's disk spill must not take them
        keep_lower_hits(h, false);
        spill_victims(host_hits);  // one fresh block per restore below
        for (size_t j = 0; j < h.blocks.size(); ++j) {
            int32_t b = h.blocks[j];
            if (b < 0) {
                if (!is_host_hit(b)) continue;
                b = restore_hit(-2 - b, tokens, h.skip + int64_t(j), k);
                pin_block(b);  // the pin replaces the restore's reference (no blocks_freed)
                --blocks[size_t(b)].ref;
                ++round_restores;
            }
            pins->push_back(b);
        }
        for (int32_t b : h.blocks)
            if (is_disk_ref(b)) disk_commit_cached(disk_slot_of(b));
        round_evictions += c.evictions - evictions_before;
        for (auto it = prev->rbegin(); it != prev->rend(); ++it) unpin_block(*it);
        prev->clear();
        ++restore_rounds;
        return true;
    }
    int64_t restore_rounds = 0, round_restores = 0;  // restore rounds run, blocks they restored (coverage)
    int64_t round_allocs = 0;    // promotions with at least one restore round (coverage only)
    int64_t round_free_hits = 0;   // free device blocks restore rounds pinned (coverage only)
    int64_t round_evictions = 0;   // device blocks their restores evicted (coverage only)
    int64_t rounds_refused = 0;  // restore rounds not run: no host block, or too few free blocks (coverage)
    // kvc_alloc's first step (see the header comment, "Promotion"): the prompt's disk hits are read
    // up into host slots, and those copies complete, before the allocation itself; with `rounds`
    // (kvc_alloc, not kvc_tier_prefetch) in rounds while host slots run short.
    void promote(const std::vector<int32_t> *tokens, int64_t n, const Keys &k, bool rounds) {
        if (!disk || !caching || (n - 1) / bs <= 0) return;
        std::vector<int32_t> pins, prev;
        bool restored = false;
        for (;;) {
            const Hit h = find_hit(*tokens, n, k, kHostDisk);
            if (!has_disk_hit(h)) break;
            const bool short_of_slots = promote_round(h);
            finish_call();
            if (!short_of_slots || !rounds) break;
            prev.swap(pins);
            pins.clear();
            if (!restore_round(*tokens, find_hit(*tokens, n, k, kHostDisk), k, &pins, &prev)) {
                pins.swap(prev);  // nothing changed: the previous round's list is still pinned
                ++rounds_refused;
                break;
            }
            restored = true;
            finish_call();
        }
        round_allocs += restored;
        for (auto it = pins.rbegin(); it != pins.rend(); ++it) unpin_block(*it);
    }
    // kvc_tier_prefetch (kvc.h; lib/capi/tiers.cpp): kvc_alloc's promotion (promote(), with no
    // refusal before it: no sequence-exists or capacity check), its first round only (no restore
    // round: the hit ends where the host slots did), and nothing else -- no sequence, no device
    // block, no event. value = the prompt's hit through the device and host tiers once the
    // copies are done (what kvc_alloc's own walk would now find), 0 with prefix caching off (then
    // nothing moves). Its argument checks come before the pool's state: NULL tokens is refused even
    // with caching off (kvc_alloc accepts them there), and a pool without a disk tier (with no
    // tiers, or a host tier only) is KVC_ERR_STATE.
    Result prefetch(const std::vector<int32_t> *tokens, int64_t n, const Keys &k) {
        if (!tokens) return {KVC_ERR_NULL_ARG, 0};
        if (n < 1) return {KVC_ERR_INVALID_ARG, 0};
        if (max_seq_len > 0 && n > max_seq_len) return {KVC_ERR_MAX_LEN, 0};
        if (!disk) return {KVC_ERR_STATE, 0};
        promote(tokens, n, k, false);
        return {KVC_OK, caching ? find_hit(*tokens, n, k, kHostTier).tokens(bs) : 0};
    }

    // ---- spill planning (see the header comment, "Spill") ----
    // The identity of block `id`'s parent; false for a prompt's first block.
    bool parent_identity(const Identity &id, Identity *parent) const {
        if (id.tokens.size() <= size_t(bs)) return false;
        *parent = id;
        parent->tokens.resize(id.tokens.size() - size_t(bs));
        const int64_t end = int64_t(parent->tokens.size());
        auto &mm = parent->mm;
        mm.erase(std::remove_if(mm.begin(), mm.end(), [end](const MmItem &m) { return m.offset >= end; }), mm.end());
        return true;
    }
    // A copy of `id` cached on the device other than block `except` and not in `unkept`.
    bool device_copy_kept(const Identity &id, int32_t except, const std::vector<int32_t> &unkept) const {
        for (int32_t b : copies_of(id))
            if (b != except && std::find(unkept.begin(), unkept.end(), b) == unkept.end()) return true;
        return false;
    }
    // Cached on the device (a copy not in `unkept`) or indexed in a host or disk slot.
    bool cached_anywhere(const Identity &id, const std::vector<int32_t> &unkept) const {
        return device_copy_kept(id, -1, unkept) || host_find_indexed(id) >= 0 || disk_find_indexed(id) >= 0;
    }
    bool parent_kept(const Identity &id) const {
        Identity parent;
        return !parent_identity(id, &parent) || cached_anywhere(parent, spill_unkept);
    }
    // The cached blocks the next n fresh takes evict, in the order they are taken.
    std::vector<int32_t> next_evictions(int64_t n) const {
        std::vector<int32_t> order(unhashed.begin(), unhashed.end());
        for (const auto &l : lru) order.insert(order.end(), l.begin(), l.end());
        order.resize(size_t(std::min<int64_t>(n, int64_t(order.size()))));
        order.erase(std::remove_if(order.begin(), order.end(), [this](int32_t b) { return !blocks[size_t(b)].cached; }),
                    order.end());
        return order;
    }
    // Before n fresh takes: their victims are chosen heads first and the chosen ones spilled in order.
    void spill_victims(int64_t n) {
        if (!host) return;
        const std::vector<int32_t> victims = next_evictions(n);
        spill_unkept = victims;  // undecided ones count as not kept
        int64_t slots = int64_t(hfree.size());
        for (const auto &l : hlru) slots += int64_t(l.size());
        std::vector<bool> chosen(victims.size(), false);
        for (size_t i = victims.size(); i-- > 0;) {
            const Identity &id = blocks[size_t(victims[i])].id;
            chosen[i] = slots > 0 && host_find_indexed(id) < 0 && !device_copy_kept(id, victims[i], spill_unkept) &&
                        parent_kept(id);
            spill_copies_dropped += slots > 0 && host_find_indexed(id) < 0 && !chosen[i] &&
                                    device_copy_kept(id, victims[i], spill_unkept);
            if (!chosen[i]) continue;
            --slots;
            spill_unkept.erase(std::find(spill_unkept.begin(), spill_unkept.end(), victims[i]));
        }
        spills_left_out += int64_t(std::count(chosen.begin(), chosen.end(), false));
        for (size_t i = 0; i < victims.size(); ++i)
            if (chosen[i]) spill(victims[i]);
        spill_unkept.clear();
    }
    std::vector<int32_t> spill_unkept;  // during spill_victims: its victims not chosen (yet)
    int64_t spill_copies_dropped = 0;   // victims left out because another copy stays (coverage only)
    int64_t spills_left_out = 0;        // evicted cached blocks not spilled (coverage only)
    int64_t disk_orphans = 0;           // host victims not written to disk: parent not kept (coverage)

    // kvc_tier_stats.reachable_blocks: every ancestor of `id` is cached somewhere.
    bool chain_cached(const Identity &id) const {
        Identity cur = id, parent;
        for (; parent_identity(cur, &parent); cur = parent)
            if (!cached_anywhere(parent, {})) return false;
        return true;
    }
    int64_t reachable(const std::vector<HostSlot> &slots) const {
        int64_t n = 0;
        for (const HostSlot &hs : slots) n += hs.state == HostSlot::kCached && chain_cached(hs.id);
        return n;
    }
    int64_t device_reachable() const {
        int64_t n = 0;
        for (const Block &b : blocks) n += is_free(b) && b.cached && chain_cached(b.id);
        return n;
    }

    void spill(int32_t b) {
        const Block &blk = blocks[size_t(b)];
        int32_t v = host_take_slot();
        if (v < 0) return;
        HostSlot &hs = hslots[size_t(v)];
        hs.indexed = true;
        hs.id = blk.id;
        hs.priority = blk.priority;
        hs.kv = blk.kv;
        jobs.push_back({Job::kSpill, v});
    }

    int32_t take_fresh(int32_t priority) {
        int32_t b = victim();
        Block &blk = blocks[size_t(b)];
        if (blk.cached) {  // spilled, if at all, by spill_victims before the takes
            Event e;
            e.type = KVC_EVENT_BLOCK_REMOVED;
            e.block = b;
            push_event(e);
            blk.cached = false;
            ++c.evictions;
        }
        unlink(b);
        blk.ref = 1;
        blk.priority = priority;
        blk.kv.assign(size_t(bs), kUnknown);  // whatever it held is no longer anyone's KV
        return b;
    }

    void add_ref(int32_t b) {
        if (blocks[size_t(b)].ref++ == 0) unlink(b);
    }

    // Returns true when the block's refcount reached 0.
    bool release(int32_t b) {
        Block &blk = blocks[size_t(b)];
        if (--blk.ref != 0) return false;
        if (is_free(blk)) became_free(b);
        return true;
    }

    void became_free(int32_t b) {
        enqueue_free(b);
        // Pairs into a free block are cancelled, oldest first, each dropping its source's hold.
        for (;;) {
            auto it = std::find_if(pending.begin(), pending.end(), [b](const auto &pr) { return pr.second == b; });
            if (it == pending.end()) return;
            const int32_t src = it->first;
            pending.erase(it);
            unhold(src);
        }
    }

    void unhold(int32_t b) {
        Block &blk = blocks[size_t(b)];
        --blk.holds;
        if (is_free(blk)) became_free(b);
    }

    // ---- KV content (see the header comment) ----
    // The driver wrote the KV of positions first .. first + count - 1 of q into q's blocks.
    void record_write(const Seq &q, int64_t first, int64_t count) {
        for (int64_t p = first; p < first + count; ++p) {
            Content &kv = blocks[size_t(q.table[size_t(p / bs)])].kv;
            kv.resize(size_t(bs), kUnknown);
            kv[size_t(p % bs)] = q.ids[size_t(p)];
        }
    }
    static uint64_t content_at(const Content &kv, int64_t t) { return size_t(t) < kv.size() ? kv[size_t(t)] : kUnknown; }
    // What token slot t of block b holds once the pending pairs are copied: what a sequence
    // holding b reads at its next forward pass (kvc_copy_pending runs first). Pairs apply in
    // queue order, so a destination gets its source's content as of its own pair.
    uint64_t settled_content(int32_t b, int64_t t) const { return settled_before(b, t, pending.size()); }
    uint64_t settled_before(int32_t b, int64_t t, size_t end) const {
        for (size_t j = end; j-- > 0;)
            if (pending[j].second == b) return settled_before(pending[j].first, t, j);
        return content_at(blocks[size_t(b)].kv, t);
    }
    bool is_pending_dst(int32_t b) const {
        return std::any_of(pending.begin(), pending.end(), [b](const auto &pr) { return pr.second == b; });
    }

    // Drains up to n pending pairs into out (may be null), then drops their holds in order.
    void drain(int64_t n, std::vector<std::pair<int32_t, int32_t>> *out) {
        std::vector<std::pair<int32_t, int32_t>> taken;
        for (int64_t i = 0; i < n && !pending.empty(); ++i) {
            taken.push_back(pending.front());
            pending.pop_front();
            blocks[size_t(taken.back().second)].kv = blocks[size_t(taken.back().first)].kv;  // queue order
        }
        for (const auto &pr : taken) unhold(pr.first);
        if (out) out->insert(out->end(), taken.begin(), taken.end());
    }
    void drain_all() { drain(int64_t(pending.size()), nullptr); }

    void hash_full_blocks(Seq &s) {
        if (s.hash_stopped) return;
        const int64_t full = s.num_tokens / bs;
        for (int64_t i = s.num_hashed; i < full; ++i) {
            Identity id = identity_of(s.keys, s.tokens, i, bs);
            int32_t b = s.table[size_t(i)];
            if (!blocks[size_t(b)].cached) {  // the library stages an uncached block in its own record
                blocks[size_t(b)].staged = id;
                blocks[size_t(b)].staged_valid = true;
            }
            if (!blocks[size_t(b)].cached) {  // a new identity, or another copy of a cached one
                copies_entered += !copies_of(id).empty();
                blocks[size_t(b)].cached = true;
                blocks[size_t(b)].id = id;
                blocks[size_t(b)].entered = next_entered++;
                Event e;
                e.type = KVC_EVENT_BLOCK_STORED;
                e.block = b;
                e.tokens.assign(s.tokens.begin() + i * bs, s.tokens.begin() + (i + 1) * bs);
                e.id = id;
                e.depth = i;
                push_event(e);
            }
        }
        s.num_hashed = full;
    }

    // ---- API ----
    // `tokens` == nullptr stands for a NULL token pointer.
    kvc_status prompt_args(const std::vector<int32_t> *tokens, int64_t n) const {
        if (!tokens && caching) return KVC_ERR_NULL_ARG;
        if (n < 1) return KVC_ERR_INVALID_ARG;
        if (max_seq_len > 0 && n > max_seq_len) return KVC_ERR_MAX_LEN;
        return KVC_OK;
    }

    // What kvc_alloc would do: table entries `blocks`, of which the first `skip` start released,
    // `hits` taken from the cache (host ones restored into fresh blocks), `fresh` blocks to take.
    struct Plan {
        int64_t blocks = 0, fresh = 0, free_now = 0, host_hits = 0, skip = 0;
        std::vector<int32_t> hits;
        int64_t held() const { return blocks - skip; }  // entries the sequence holds: the capacity rule
    };
    Plan plan(const std::vector<int32_t> *tokens, int64_t n, const Keys &k, int lower = kDeviceOnly) const {
        Plan p;
        p.blocks = blocks_for(n, bs);
        // Without a window a prompt longer than the pool can never fit; with one it may, when
        // enough of it lies before the window of its hit.
        if (caching && (window > 0 || p.blocks <= num_blocks)) {
            Hit h = find_hit(*tokens, n, k, lower);
            p.skip = h.skip;
            p.hits = h.blocks;
        }
        for (int32_t b : p.hits) p.host_hits += b < 0;
        p.fresh = p.held() - (int64_t(p.hits.size()) - p.host_hits);  // restores need fresh blocks
        int64_t free_hits = 0;
        for (int32_t b : p.hits)
            if (b >= 0) free_hits += is_free(blocks[size_t(b)]);
        p.free_now = num_free() - free_hits;
        return p;
    }

    Result can_alloc(const std::vector<int32_t> *tokens, int64_t n, const Keys &k) const {
        Result r;
        if ((r.status = prompt_args(tokens, n)) != KVC_OK) return r;
        // What kvc_alloc would take: host and disk hits need fresh blocks (see the header comment,
        // "Lookups").
        Plan p = plan(tokens, n, k, kHostDisk);
        if (p.held() > num_blocks || num_blocks - p.fresh < watermark_blocks) r.value = KVC_ALLOC_NEVER;
        else if (p.free_now - p.fresh >= watermark_blocks) r.value = KVC_ALLOC_OK;
        else r.value = KVC_ALLOC_LATER;
        return r;
    }

    Result alloc(uint64_t id, const std::vector<int32_t> *tokens, int64_t n, const Keys &k) {
        Result r;
        if ((r.status = prompt_args(tokens, n)) != KVC_OK) return r;
        if (disk && caching) {  // refused before the promotion too (see the header comment)
            if (seqs.count(id)) return {KVC_ERR_SEQ_EXISTS, 0};
            const Plan before = plan(tokens, n, k, kHostDisk);
            if (before.held() > num_blocks || before.fresh > before.free_now) return {KVC_ERR_OUT_OF_BLOCKS, 0};
        }
        promote(tokens, n, k, true);
        if (seqs.count(id)) return {KVC_ERR_SEQ_EXISTS, 0};
        Plan p = plan(tokens, n, k, kHostTier);
        if (p.held() > num_blocks || p.fresh > p.free_now) return {KVC_ERR_OUT_OF_BLOCKS, 0};
        if (window > 0 && caching && p.skip + int64_t(p.hits.size()) > 0) {  // coverage only
            window_skip_allocs += p.skip > 0;
            window_beyond_allocs += int64_t(walk(*tokens, (n - 1) / bs, k, kHostTier).size()) < p.skip + int64_t(p.hits.size());
        }
        Seq &s = seqs[id];
        s.keys = k;
        if (tokens) s.tokens.assign(tokens->begin(), tokens->begin() + n);
        else s.tokens.assign(size_t(n), 0);  // NULL tokens (caching off): ids unknown, 0 stands for them
        s.ids.clear();
        extend_ids(k, s.tokens, bs, &s.ids);
        s.table.assign(size_t(p.skip), -1);  // before the window: never taken, a cached one left alone
        for (int32_t b : p.hits) {
            if (b >= 0) {
                copy_hits += copies_of(blocks[size_t(b)].id).size() > 1;
                add_ref(b);
                blocks[size_t(b)].priority = k.priority;
                ++c.device_hits;
            }
            s.table.push_back(b);
        }
        // Host hits: their slots are kept from eviction, then each is copied into a fresh device block
        // that enters the device cache.
        for (int32_t b : p.hits)
            if (b < 0) {
                host_unlink(-2 - b);
                hslots[size_t(-2 - b)].state = HostSlot::kBusy;
            }
        spill_victims(p.fresh);
        for (size_t j = 0; j < p.hits.size(); ++j) {
            if (p.hits[j] >= 0) continue;
            const size_t i = size_t(p.skip) + j;  // table index = block index in the prompt
            s.table[i] = restore_hit(-2 - p.hits[j], s.tokens, int64_t(i), k);
        }
        for (int64_t i = p.host_hits; i < p.fresh; ++i) s.table.push_back(take_fresh(k.priority));
        const int64_t hit_blocks = p.skip + int64_t(p.hits.size());
        s.num_tokens = s.reserved = n;
        s.num_hashed = hit_blocks;
        s.hit_blocks = hit_blocks;
        s.released = p.skip;
        s.window_from = hit_blocks * bs;
        if (caching) {
            hash_full_blocks(s);
            c.prefix_query_tokens += n;
            c.prefix_hit_tokens += hit_blocks * bs;
        }
        ++c.allocs;
        c.blocks_allocated += p.fresh;
        r.value = hit_blocks * bs;
        return r;
    }

    Result append(uint64_t id, const std::vector<int32_t> *tokens, int64_t nt, int64_t nl) {
        if (nt < 0 || nl < 0 || (nt == 0 && nl == 0)) return {KVC_ERR_INVALID_ARG, 0};
        if (!tokens && nt > 0 && caching) return {KVC_ERR_NULL_ARG, 0};
        auto it = seqs.find(id);
        if (it == seqs.end()) return {KVC_ERR_UNKNOWN_SEQ, 0};
        if (it->second.swapped) return {KVC_ERR_STATE, 0};
        Seq &s = it->second;
        const int64_t new_tokens = s.num_tokens + nt, want_end = new_tokens + nl;
        if (max_seq_len > 0 && want_end > max_seq_len) return {KVC_ERR_MAX_LEN, 0};
        const int64_t new_end = std::max(s.reserved, want_end);
        const int64_t new_nb = blocks_for(new_end, bs), old_nb = int64_t(s.table.size());
        // Sliding window: the blocks wholly before the first new token's first key are released
        // first and count as free for this append.
        int64_t release_to = s.released, freeable = 0;
        if (window > 0) {
            const int64_t first_key = s.window_from - window + 1;
            if (first_key > 0) release_to = std::max(release_to, first_key / bs);
            for (int64_t i = s.released; i < release_to; ++i) {
                const Block &blk = blocks[size_t(s.table[size_t(i)])];
                freeable += blk.ref == 1 && blk.pins == 0 && blk.holds == 0;
            }
        }
        if (new_nb - release_to > num_blocks) return {KVC_ERR_OUT_OF_BLOCKS, 0};
        const int64_t first = s.num_tokens / bs, last = std::min(old_nb, blocks_for(want_end, bs));
        int64_t cows = 0;
        // Shared or pinned blocks are copied (pins only ever sit on cached blocks, which only a
        // truncate leaves in the written range).
        auto must_copy = [this](int32_t b) { return blocks[size_t(b)].ref > 1 || blocks[size_t(b)].pins > 0; };
        for (int64_t i = first; i < last; ++i) cows += must_copy(s.table[size_t(i)]);
        const int64_t fresh = cows + new_nb - old_nb;
        if (fresh > num_free() + freeable) return {KVC_ERR_OUT_OF_BLOCKS, 0};
        for (int64_t i = s.released; i < release_to; ++i) {  // oldest first
            c.blocks_freed += release(s.table[size_t(i)]);
            s.table[size_t(i)] = -1;
        }
        window_released += release_to - s.released;
        s.released = release_to;
        if (window > 0) s.window_from = s.num_tokens;
        spill_victims(fresh);
        for (int64_t i = first; i < last; ++i) {
            int32_t src = s.table[size_t(i)];
            if (!must_copy(src)) continue;
            int32_t dst = take_fresh(s.keys.priority);
            c.blocks_freed += release(src);
            ++blocks[size_t(src)].holds;
            pending.push_back({src, dst});
            s.table[size_t(i)] = dst;
            ++c.cow_copies;
        }
        for (int64_t i = old_nb; i < new_nb; ++i) s.table.push_back(take_fresh(s.keys.priority));
        for (int64_t i = first; i < last; ++i) {  // still cached after a truncate: leaves the cache
            Block &blk = blocks[size_t(s.table[size_t(i)])];
            if (!blk.cached) continue;
            blk.cached = false;
            Event e;
            e.type = KVC_EVENT_BLOCK_REMOVED;
            e.block = s.table[size_t(i)];
            push_event(e);
        }
        if (tokens) s.tokens.insert(s.tokens.end(), tokens->begin(), tokens->begin() + nt);
        else s.tokens.insert(s.tokens.end(), size_t(nt), 0);
        extend_ids(s.keys, s.tokens, bs, &s.ids);
        s.num_tokens = new_tokens;
        s.reserved = new_end;
        if (caching) hash_full_blocks(s);
        ++c.appends;
        c.blocks_allocated += fresh;
        return {KVC_OK, fresh};
    }

    kvc_status fork(uint64_t parent, uint64_t child) {
        if (parent == child) return KVC_ERR_INVALID_ARG;
        auto it = seqs.find(parent);
        if (it == seqs.end()) return KVC_ERR_UNKNOWN_SEQ;
        if (seqs.count(child)) return KVC_ERR_SEQ_EXISTS;
        if (it->second.swapped) return KVC_ERR_STATE;
        Seq copy = it->second;
        for (int32_t b : copy.table)
            if (b >= 0) add_ref(b);  // -1: released by the window
        seqs[child] = copy;
        ++c.forks;
        return KVC_OK;
    }

    kvc_status free_seq(uint64_t id) {
        auto it = seqs.find(id);
        if (it == seqs.end()) return KVC_ERR_UNKNOWN_SEQ;
        for (int32_t v : it->second.swap_slots)
            if (v >= 0) host_release(v);
        const std::vector<int32_t> &t = it->second.table;
        for (auto b = t.rbegin(); b != t.rend(); ++b)
            if (*b >= 0) c.blocks_freed += release(*b);
        seqs.erase(it);
        ++c.frees;
        return KVC_OK;
    }

    // kvc_abort: the blocks past the sequence's cache hit that only it holds (refcount 1, no pin)
    // leave the cache first (REMOVED events, table order), then it is freed as by kvc_free.
    // value = blocks taken out of the cache.
    Result abort_seq(uint64_t id) {
        auto it = seqs.find(id);
        if (it == seqs.end()) return {KVC_ERR_UNKNOWN_SEQ, 0};
        const Seq &s = it->second;
        int64_t uncached = 0;
        for (size_t i = size_t(s.hit_blocks); i < s.table.size(); ++i) {
            const int32_t b = s.table[i];
            if (b < 0) continue;  // in a host slot (swapped out) or released by the window
            Block &blk = blocks[size_t(b)];
            if (!blk.cached || blk.ref != 1 || blk.pins != 0) continue;
            blk.cached = false;
            Event e;
            e.type = KVC_EVENT_BLOCK_REMOVED;
            e.block = b;
            push_event(e);
            ++uncached;
        }
        return {free_seq(id), uncached};
    }

    // ---- kvc_tier_flush (lib/capi/tiers.cpp, tier/plan.cpp) ----
    // Host slot v: written to disk when cached and the disk lacks it (1), skipped (0), or -1 when
    // no disk slot is to be had now (the round stops there).
    int flush_host_slot(int32_t v) {
        HostSlot &hs = hslots[size_t(v)];
        if (hs.state != HostSlot::kCached) return 0;
        if (disk_find_indexed(hs.id) >= 0) return 0;
        if (slot_next_victim(dfree, dlru) < 0) return -1;
        host_unlink(v);  // busy (indexed) until the write commits
        hs.state = HostSlot::kBusy;
        (void)write_to_disk(v, Job::kPersist);
        return 1;
    }
    // Device block b (cached, refcount 0): skipped when the disk has it, written from its host
    // slot when the host has it, else copied into a host slot taken as for a spill (its victim
    // spills to disk) and written from there. -1: no disk or host slot now; note that the host
    // victim's own spill can take the last disk slot, and the copy into the host slot stays queued.
    int flush_device_block(int32_t b) {
        const Block &blk = blocks[size_t(b)];
        if (disk_find_indexed(blk.id) >= 0) return 0;
        const int32_t hv = host_find_indexed(blk.id);
        if (hv >= 0) return flush_host_slot(hv);
        if (slot_next_victim(dfree, dlru) < 0) return -1;
        const int32_t v = host_take_slot();
        if (v < 0) return -1;
        HostSlot &hs = hslots[size_t(v)];
        hs.indexed = true;
        hs.id = blk.id;
        hs.priority = blk.priority;
        hs.kv = blk.kv;
        jobs.push_back({Job::kSpill, v});
        return write_to_disk(v, Job::kDiskSpill) ? 1 : -1;
    }
    // Rounds: host slots in slot order, then device blocks in id order, while the reserved job
    // capacity (2 x host slots + 2 x disk slots) has room for 3 more; then the round's copies run
    // (finish_call) and the next round goes on from where it stopped. A round that stopped for want
    // of a slot and queued nothing ends the flush. value = writes queued. (The capacity rule never
    // decides alone: a round queues at most one job per host slot taken plus one per disk slot, so
    // the slots run out first; the model keeps the rule as the library states it.)
    Result flush() {
        if (!disk) return {KVC_ERR_STATE, 0};
        finish_call();
        const size_t capacity = 2 * hslots.size() + 2 * dslots.size();
        const int32_t slots = int32_t(hslots.size());
        int32_t next_slot = 0, next_block = 0;
        int64_t queued = 0;
        while (next_slot < slots || next_block < num_blocks) {
            const auto room = [&] { return jobs.size() + 3 <= capacity; };
            int r = 0;
            for (; next_slot < slots && room(); ++next_slot) {
                if ((r = flush_host_slot(next_slot)) < 0) break;
                queued += r;
            }
            for (; r >= 0 && next_slot == slots && next_block < num_blocks && room(); ++next_block) {
                const Block &blk = blocks[size_t(next_block)];
                if (!caching || !blk.cached || blk.ref != 0) continue;
                if ((r = flush_device_block(next_block)) < 0) break;
                queued += r;
            }
            const bool ours = !jobs.empty();
            ++flush_rounds;
            if (r < 0 && !ours) break;  // no slot to be had (nothing in flight either)
            finish_call();
        }
        finish_call();
        return {KVC_OK, queued};
    }
    int64_t flush_rounds = 0;  // coverage only

    Result lookup(const std::vector<int32_t> *tokens, int64_t n, const Keys &k) {
        if (!tokens) return {KVC_ERR_NULL_ARG, 0};
        if (n < 1) return {KVC_ERR_INVALID_ARG, 0};
        if (!caching) return {KVC_OK, 0};
        const int64_t got = find_hit(*tokens, n, k, kHostDisk).tokens(bs);
        if (window > 0)  // coverage only
            window_beyond_lookups += int64_t(walk(*tokens, (n - 1) / bs, k, kHostDisk).size()) * bs < got;
        return {KVC_OK, got};
    }

    // kvc_prefix_pin / kvc_prefix_unpin with a sliding window: for the largest e < full whose
    // window blocks f(e)..e are all on the device (and pinned, for unpin), those blocks, plus block
    // f(e - 1) when it lies before them and qualifies too (a block-aligned prefix's own admission
    // hits one block short, at e - 1). tokens() = (e + 1) x bs; no candidate: empty.
    Hit window_pin_range(const std::vector<int32_t> &tokens, int64_t full, const Keys &k, bool pinned_only) const {
        auto qualifying = [&](int64_t i) {
            const int32_t b = locate(tokens, i, k, kDeviceOnly, true);
            return b >= 0 && (!pinned_only || blocks[size_t(b)].pins > 0) ? b : -1;
        };
        auto first_needed = [&](int64_t e) {
            const int64_t first_key = std::max<int64_t>(0, (e + 1) * bs - window + 1);
            return std::min(first_key / bs, e);
        };
        for (int64_t e = full - 1; e >= 0; --e) {
            const int64_t f = first_needed(e);
            Hit h;
            h.skip = f;
            for (int64_t i = f; i <= e; ++i) {
                const int32_t b = qualifying(i);
                if (b < 0) break;
                h.blocks.push_back(b);
            }
            if (int64_t(h.blocks.size()) != e - f + 1) continue;
            if (e >= 1 && first_needed(e - 1) < f) {
                const int32_t b = qualifying(f - 1);
                if (b >= 0) {
                    h.blocks.insert(h.blocks.begin(), b);
                    h.skip = f - 1;
                }
            }
            return h;
        }
        return Hit{};
    }

    Result pin(const std::vector<int32_t> *tokens, int64_t n, const Keys &k) {
        if (!tokens) return {KVC_ERR_NULL_ARG, 0};
        if (n < 1) return {KVC_ERR_INVALID_ARG, 0};
        if (!caching) return {KVC_ERR_UNSUPPORTED, 0};
        if (window > 0) {
            const Hit h = window_pin_range(*tokens, n / bs, k, false);
            for (int32_t b : h.blocks) pin_block(b);
            if (h.skip > 0) ++window_pins_skipping;
            return {KVC_OK, h.blocks.empty() ? 0 : h.tokens(bs)};
        }
        std::vector<int32_t> hits = walk(*tokens, n / bs, k, kDeviceOnly, true);
        for (int32_t b : hits) pin_block(b);
        return {KVC_OK, int64_t(hits.size()) * bs};
    }

    Result unpin(const std::vector<int32_t> *tokens, int64_t n, const Keys &k) {
        if (!tokens) return {KVC_ERR_NULL_ARG, 0};
        if (n < 1) return {KVC_ERR_INVALID_ARG, 0};
        if (!caching) return {KVC_ERR_UNSUPPORTED, 0};
        const int64_t full = n / bs;
        if (window > 0) {
            const Hit h = window_pin_range(*tokens, full, k, true);
            if (full > 0 && h.blocks.empty()) return {KVC_ERR_STATE, 0};
            for (size_t i = h.blocks.size(); i-- > 0;) unpin_block(h.blocks[i]);
            return {KVC_OK, h.blocks.empty() ? 0 : h.tokens(bs)};
        }
        std::vector<int32_t> hits = walk(*tokens, full, k, kDeviceOnly, true);
        size_t run = 0;
        while (run < hits.size() && blocks[size_t(hits[run])].pins > 0) ++run;
        if (full > 0 && run == 0) return {KVC_ERR_STATE, 0};
        for (size_t i = run; i-- > 0;) unpin_block(hits[i]);
        return {KVC_OK, int64_t(run) * bs};
    }

    kvc_status set_window(int32_t w) {
        if (w < 0) return KVC_ERR_INVALID_ARG;
        if (!seqs.empty()) return KVC_ERR_STATE;
        window = w;
        return KVC_OK;
    }

    // header_faults: the reset's first erasures that fail (an injected header-write fault).
    kvc_status cache_reset(int32_t header_faults = 0) {
        if (num_used() > 0 || num_pinned() > 0) return KVC_ERR_BUSY;
        if (!caching) return KVC_OK;
        for (size_t ds = 0; ds < dslots.size(); ++ds) {  // the file forgets them, in slot order
            if (dslots[ds].state != HostSlot::kCached) continue;
            if (header_faults > 0) {
                --header_faults;
                ++dc.failures;
                ++dc.io_errors;
                ++erase_faults;
            } else {
                dfile[ds].valid = false;
                ++erased;
            }
        }
        for (auto &l : lru) {
            for (int32_t b : l) {
                blocks[size_t(b)].cached = false;
                unhashed.push_back(b);
            }
            l.clear();
        }
        for (auto &l : hlru) {
            std::deque<int32_t> copy = l;
            for (int32_t v : copy) {
                host_unlink(v);
                host_release(v);
            }
        }
        for (auto &l : dlru) {  // the disk's cached blocks are forgotten the same way
            std::deque<int32_t> copy = l;
            for (int32_t ds : copy) {
                disk_unlink(ds);
                disk_release(ds);
            }
        }
        Event e;
        e.type = KVC_EVENT_ALL_BLOCKS_CLEARED;
        push_event(e);
        return KVC_OK;
    }

    bool swappable(int32_t b) const { return b >= 0 && blocks[size_t(b)].ref == 1 && blocks[size_t(b)].pins == 0; }

    kvc_status swap_out(uint64_t id) {
        auto it = seqs.find(id);
        if (it == seqs.end()) return KVC_ERR_UNKNOWN_SEQ;
        Seq &s = it->second;
        if (s.swapped || !host) return KVC_ERR_STATE;
        for (const auto &pr : pending)  // a pair into one of its blocks (kvc.h: a pair reading one is fine)
            if (std::find(s.table.begin(), s.table.end(), pr.second) != s.table.end()) return KVC_ERR_BUSY;
        int64_t need = 0, evictable = int64_t(hfree.size());
        for (int32_t b : s.table) need += swappable(b);
        for (const auto &l : hlru) evictable += int64_t(l.size());
        if (need > evictable) return KVC_ERR_OUT_OF_BLOCKS;
        s.swap_slots.assign(s.table.size(), -1);
        for (size_t i = s.table.size(); i-- > 0;) {
            const int32_t b = s.table[i];
            if (!swappable(b)) continue;
            const int32_t v = host_take_slot();
            hslots[size_t(v)].state = HostSlot::kHeld;
            hslots[size_t(v)].kv = blocks[size_t(b)].kv;
            ++hc.blocks_in;
            s.swap_slots[i] = v;
            s.table[i] = -1;
            c.blocks_freed += release(b);
        }
        s.swapped = true;
        return KVC_OK;
    }

    kvc_status swap_in(uint64_t id) {
        auto it = seqs.find(id);
        if (it == seqs.end()) return KVC_ERR_UNKNOWN_SEQ;
        Seq &s = it->second;
        if (!s.swapped) return KVC_ERR_STATE;
        int64_t need = 0;
        for (int32_t v : s.swap_slots) need += v >= 0;
        if (need > num_free()) return KVC_ERR_OUT_OF_BLOCKS;
        spill_victims(need);
        for (size_t i = 0; i < s.table.size(); ++i) {
            const int32_t v = s.swap_slots[i];
            if (v < 0) continue;
            s.table[i] = take_fresh(s.keys.priority);
            blocks[size_t(s.table[i])].kv = hslots[size_t(v)].kv;
            hslots[size_t(v)].state = HostSlot::kBusy;
            jobs.push_back({Job::kSwapIn, v});
        }
        s.swap_slots.clear();
        s.swapped = false;
        c.blocks_allocated += need;
        return KVC_OK;
    }

    // kvc_preemption_cost: blocks a swap would move.
    Result swap_cost(uint64_t id) const {
        auto it = seqs.find(id);
        if (it == seqs.end()) return {KVC_ERR_UNKNOWN_SEQ, 0};
        int64_t n = 0;
        if (it->second.swapped)
            for (int32_t v : it->second.swap_slots) n += v >= 0;
        else
            for (int32_t b : it->second.table) n += swappable(b);
        return {KVC_OK, n};
    }

    // kvc_prefix_lookup_tiers: (device, host, disk) blocks of the hit, each block in the highest
    // tier holding it; the blocks before a window are in none.
    std::tuple<int64_t, int64_t, int64_t> lookup_tiers(const std::vector<int32_t> &tokens, int64_t n,
                                                       const Keys &k) const {
        if (!caching) return {0, 0, 0};
        std::vector<int32_t> hits = find_hit(tokens, n, k, kHostDisk).blocks;
        int64_t h = 0, d = 0;
        for (int32_t b : hits) {
            d += is_disk_ref(b);
            h += b < 0 && !is_disk_ref(b);
        }
        return {int64_t(hits.size()) - h - d, h, d};
    }

    int64_t host_count(HostSlot::State st) const { return slot_count(hslots, st); }

    Result take_pending(int64_t cap, std::vector<std::pair<int32_t, int32_t>> *out) {
        if (cap < 0) return {KVC_ERR_INVALID_ARG, 0};
        if (cap == 0) return {KVC_OK, int64_t(pending.size())};
        int64_t n = std::min<int64_t>(cap, int64_t(pending.size()));
        drain(n, out);
        return {KVC_OK, n};
    }

    Result truncate(uint64_t id, int64_t n) {
        if (n < 1) return {KVC_ERR_INVALID_ARG, 0};
        auto it = seqs.find(id);
        if (it == seqs.end()) return {KVC_ERR_UNKNOWN_SEQ, 0};
        Seq &s = it->second;
        if (s.swapped) return {KVC_ERR_STATE, 0};
        if (n > s.num_tokens) return {KVC_ERR_INVALID_ARG, 0};
        if (s.released > 0 && n - window + 1 < s.released * bs) return {KVC_ERR_STATE, 0};
        const int64_t m = n / bs;
        s.hit_blocks = std::min(s.hit_blocks, m);
        if (caching && !s.hash_stopped && m < s.num_hashed) {
            const Block &blk = blocks[size_t(s.table[size_t(m)])];
            bool trusted = blk.cached;
            if (!trusted && m == s.num_hashed - 1)
                trusted = blk.staged_valid && blk.staged == identity_of(s.keys, s.tokens, m, bs);
            s.num_hashed = m;
            if (!trusted) s.hash_stopped = true;
        }
        const int64_t keep = blocks_for(n, bs), dropped = int64_t(s.table.size()) - keep;
        for (int64_t i = int64_t(s.table.size()); i-- > keep;) c.blocks_freed += release(s.table[size_t(i)]);
        s.table.resize(size_t(keep));
        s.tokens.resize(size_t(n));
        s.ids.resize(size_t(n));
        s.num_tokens = s.reserved = n;
        s.window_from = std::min(s.window_from, n);
        return {KVC_OK, dropped};
    }
};

}  // namespace model
