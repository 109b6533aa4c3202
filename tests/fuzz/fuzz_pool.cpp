// Differential fuzzer (libFuzzer): decodes the input into a pool configuration and a sequence of
// API operations, runs each against libkvc and against the reference model (model.hpp), and after
// every operation compares everything observable — status, cached-token counts, new-block counts,
// admission verdicts, every sequence's token count and block table (block id for block id), pending
// copy-on-write pairs, KV events (type, block, tokens, sequence number, hash consistency), batch
// metadata, and the full kvc_pool_stats — and runs kvc_pool_check. Any divergence aborts with a
// message (a crash for libFuzzer). Built with -fsanitize=fuzzer,address,undefined (tests/fuzz/run.sh).
//
// Mirror rank (mirror.hpp): every call is also made, with the same arguments, on a second pool with
// the same decision inputs but another shape, dtype and (where allowed) backend, and the two must
// agree on everything kvc.h's determinism contract covers (tensor-parallel ranks stay in lockstep).
// A disagreement is reported as "mirror rank diverges" with the field and the operation.
//
// KV bytes (CPU pools; "KV bytes" below): the fuzzer writes every computed position's K/V with the
// byte oracle (tests/kv_oracle.h: a function of the request's keys and the whole prefix), the model
// tracks what every device block and tier slot holds (model.hpp, "KV content"), and after every
// operation every device block the model knows -- the cache's free entries included -- is compared
// byte for byte, and every sequence's positions against its own KV. KVC_FUZZ_KV_SKEW=cached gives a
// cached block another prefix's KV on purpose: the self-test that this check can fail (run.sh).
//
// Disk tier: half of the host-tier inputs also get a disk tier (1-6 slots over 1-4 host slots),
// each pool in a file of its own under KVC_FUZZ_DISK_DIR (default /tmp), unlinked right after it is
// attached. The model (model.hpp) predicts spills, promotions, evictions, lookup_tiers' disk count
// and the disk's kvc_tier_stats; the KV bytes of blocks that came back from disk are checked like
// any other (check_kv). A sixteenth of the allocs on such a pool inject a disk fault (DiskFault).
// Half of the disk tiers are KVC_DISK_PERSISTENT and get restarts (op_restart): both pools are
// destroyed and re-created on the same files, and the model re-indexes its record of the file's
// slot headers (model.hpp, "The disk file": what a reset or a failed read erased does not come
// back; recovered_blocks is compared exactly). Those files are kept until the input ends.
// Disk identity (kvc_tier_attach_disk_with_identity): every disk tier is attached under an identity
// of a small set (kIdentities: the old kvc_tier_attach_disk, NULL, "", two short names, two of the
// longest allowed length); a restart may switch it, and the model predicts which headers come
// back (recovered_blocks) and which are another identity's (foreign_blocks, compared after every
// operation), and so the lookups and hits after it. Restarts now and then try an identity one byte
// too long first (KVC_ERR_INVALID_ARG, nothing attached, the file untouched).
// kvc_abort (uncaches what a sequence filled past its prompt's hit, then frees it) and
// kvc_tier_flush (writes every cached block above the disk down, in rounds; write faults injected
// now and then) take opcode 9's pick 5 on CPU pools (op_abort, op_flush).
// kvc_tier_prefetch (kvc_alloc's disk-to-host promotion alone: no refusal, no sequence, no device
// block; its out-value the hit through device and host afterwards) takes opcode 9's pick 5 with
// bit 7 of the pick byte set and bit 4 clear, on every pool (op_prefetch; bad input and pools
// without a disk tier now and then, injected disk faults too). Since 5c5c43a a persistent attach
// puts another identity's slots at the back of the disk's free list (model.hpp, "The disk file").
//
// Input format (all bytes optional; missing bytes read as 0):
//   config: block size, block count, caching, watermark, max_seq_len, event capacity, alphabet (its
//   high bits: a starting sliding window), tier mode (its high bits: a disk tier), host-tier slots
//   (with a disk tier, bit 4: KVC_DISK_PERSISTENT; bits 5-7: the disk identity, kIdentities)
//   then operations: one opcode byte followed by that operation's argument bytes.
//   The mirror rank's shape, dtype and backend come from a hash of the whole input (no bytes are read
//   for them, so the committed corpus decodes as before).
// KVC_FUZZ_TRACE=1 prints the model's state after every operation (for replaying one input).
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "kvc/kvc.h"
#include "mirror.hpp"
#include "model.hpp"
#include "stats_compare.hpp"
#include "testing.h"  // lib/: kvct_disk_fault, kvct_disk_force_sync_io

namespace {

// ---- input decoding --------------------------------------------------------------------------

class Input {
public:
    Input(const uint8_t *d, size_t n) : d_(d), n_(n) {}
    bool done() const { return pos_ >= n_; }
    uint8_t byte() { return pos_ < n_ ? d_[pos_++] : 0; }
    int64_t below(int64_t n) { return n <= 1 ? 0 : int64_t(byte()) % n; }  // [0, n) for n <= 256

private:
    const uint8_t *d_;
    size_t n_;
    size_t pos_ = 0;
};

// The disk files of persistent inputs (kept until the input ends, so that a restart can attach them
// again): removed at the input's end, and before a divergence aborts the process.
std::vector<std::string> g_disk_files;
void remove_disk_files() {
    for (const std::string &f : g_disk_files) ::unlink(f.c_str());
    g_disk_files.clear();
}

[[noreturn]] void diverge(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void diverge(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "\n*** libkvc diverges from the model: ");
    std::vfprintf(stderr, fmt, ap);
    std::fprintf(stderr, "\n    (last library error: %s)\n", kvc_last_error());
    va_end(ap);
    remove_disk_files();
    std::abort();
}

#define EXPECT_EQ(what, got, want)                                                                 \
    do {                                                                                           \
        long long g_ = (long long)(got), w_ = (long long)(want);                                   \
        if (g_ != w_) diverge("%s: library %lld, model %lld (op #%d %s)", what, g_, w_, g_op, g_opname); \
    } while (0)

int g_op = 0;
const bool g_trace = std::getenv("KVC_FUZZ_TRACE") != nullptr;  // replaying one input: print every op
const char *g_opname = "";
uint64_t g_total_ops = 0;  // over the whole fuzzing session (printed at exit)
uint64_t g_total_runs = 0;
uint64_t g_swaps = 0, g_host_hits = 0, g_host_runs = 0, g_spills = 0;  // tier coverage, printed at exit
// Spill planning (README "Tiers"): evicted cached blocks not spilled (no slot left, parent not kept,
// already in the host), host victims not written to disk for want of a kept parent, and host / disk
// blocks a lookup could not reach (summed over the checks after each operation).
uint64_t g_spills_left_out = 0, g_disk_orphans = 0, g_unreachable_seen = 0;
// Duplicate-content blocks (copies of one hash): blocks entered as another copy, allocations whose
// hit had several copies of a block to choose from, evicted copies not spilled (another stays).
uint64_t g_copies_entered = 0, g_copy_hits = 0, g_spill_copies_dropped = 0;
// Disk-tier coverage: inputs with a disk, blocks spilled to it, promotions (disk hits), disk
// evictions, disk hits left on disk for want of a host slot, injected faults that failed a copy.
uint64_t g_disk_runs = 0, g_disk_spills = 0, g_disk_hits = 0, g_disk_evictions = 0, g_disk_refused = 0;
uint64_t g_disk_faults = 0, g_disk_lookup_hits = 0;
// Persistent disk tiers: inputs, restarts, blocks recovered at them (of which the disk had not cached
// at the restart: headers a failed write or erasure left), valid headers a newer one of the same
// block outranked, recovered blocks promoted afterwards, headers erased (reset, failed reads) and
// erasures failed by injected faults.
uint64_t g_persistent_runs = 0, g_restarts = 0, g_recovered = 0, g_recovered_stale = 0, g_recovered_hits = 0;
uint64_t g_erased = 0, g_erase_faults = 0, g_recovered_dups = 0;
// Disk identities: restarts that changed the identity (to another fingerprint; NULL -> "" is no
// change), foreign blocks counted at attaches, recovered blocks an earlier attach had counted
// foreign (the identity went back), identities one byte too long refused (fuzzed pool's calls).
uint64_t g_identity_switches = 0, g_foreign = 0, g_reclaimed = 0, g_too_long = 0;
// kvc_abort and kvc_tier_flush: calls that succeeded, blocks an abort took out of the cache, flushes
// on a disk tier, writes they queued, flush rounds (more than one per flush: the job capacity or the
// slots ran out) and flushes with injected write faults.
uint64_t g_aborts = 0, g_abort_uncached = 0, g_flushes = 0, g_flush_queued = 0, g_flush_rounds = 0;
uint64_t g_flush_faults = 0;
// kvc_tier_prefetch: calls on a disk tier that succeeded, blocks they read up into the host tier,
// disk hits they left on disk for want of a host slot (the hit ended there), calls with an
// injected disk fault, calls refused (bad input, or no disk tier: KVC_ERR_STATE), prefetched
// prompts allocated later (the same tokens and keys) and of those, the allocs that found at
// least what the prefetch reported (nothing evicted it in between).
uint64_t g_prefetches = 0, g_prefetch_read = 0, g_prefetch_short = 0, g_prefetch_faults = 0, g_prefetch_refused = 0;
uint64_t g_prefetch_allocs = 0, g_prefetch_allocs_full = 0;
uint64_t g_append_batches = 0, g_append_batch_partial = 0, g_admits = 0, g_admits_not_ok = 0;
// kvc_alloc's promotion rounds (model::Pool::promote): allocs that ran at least one restore round,
// the restore rounds run, the blocks they restored into the device cache, and the restore rounds
// not run after a disk hit found no host slot (no host block in the hit, or too few free blocks);
// the free device blocks of the hit the restore rounds pinned and the device blocks their restores
// evicted (where pinning the hit's device blocks first matters).
uint64_t g_round_allocs = 0, g_restore_rounds = 0, g_round_restores = 0, g_rounds_refused = 0;
uint64_t g_round_free_hits = 0, g_round_evictions = 0;
uint64_t g_window_released = 0;  // sliding-window coverage, printed at exit
uint64_t g_window_ops = 0;  // operations run while a window was set
uint64_t g_window_skip_allocs = 0, g_window_beyond_allocs = 0, g_window_beyond_lookups = 0;  // window-aware hits
uint64_t g_window_pins_skipping = 0;  // windowed pins leaving leading blocks unpinned
// Mirror ranks by backend (fuzzed pool -> mirror) and the mirror's operations with its own KV bytes.
uint64_t g_mirror_none_cpu = 0, g_mirror_cpu_none = 0, g_mirror_cpu_cpu = 0, g_mirror_none_none = 0;
uint64_t g_mirror_data_ops = 0;
// The byte oracle (check_kv): checks of device blocks with known content, of which free cached blocks
// (the cache's entries, which no sequence reads), blocks several sequences share, and blocks decoded
// (changed since they last passed); operations checked while copy-on-write pairs were pending
// (their sequences' content only); sequence positions read through a pending pair.
uint64_t g_kv_block_checks = 0, g_kv_free_cached_checks = 0, g_kv_shared_checks = 0, g_kv_blocks_decoded = 0;
uint64_t g_kv_pending_ops = 0, g_kv_settled_reads = 0;
const char *g_mirror_desc = "";

constexpr int kMaxIds = 8;       // sequence ids 0..7: collisions (exists / unknown) are frequent
constexpr int kMaxPrompt = 40;
constexpr int kTemplates = 4;

// Disk identities (kvc_tier_attach_disk_with_identity), by index (3 bits of the input). Index 0
// calls the old kvc_tier_attach_disk; NULL and "" are the same (layout-only) fingerprint as it
// (kvc.h), so those three are one identity class (the model's owner, 0). Two short names (one of
// them twice, so that a random switch goes back often enough), and two of exactly
// KVC_MAX_DISK_IDENTITY_LEN bytes that differ only in their last byte: an identity cut short, or
// hashed only in part, would make them one. too_long_identity() (one byte more) must be refused.
constexpr int32_t kIdentities = 8;
const char *identity_string(int32_t i) {
    static const std::string long_a = std::string(KVC_MAX_DISK_IDENTITY_LEN - 1, 'x') + "a";
    static const std::string long_b = std::string(KVC_MAX_DISK_IDENTITY_LEN - 1, 'x') + "b";
    switch (i) {
        case 0: case 1: return nullptr;
        case 2: return "";
        case 3: case 5: return "a";
        case 4: return "b";
        case 6: return long_a.c_str();
        default: return long_b.c_str();
    }
}
int32_t identity_class(int32_t i) {
    static const int32_t cls[kIdentities] = {0, 0, 0, 1, 2, 1, 3, 4};
    return cls[i];
}
const char *identity_name(int32_t i) {
    static const char *names[kIdentities] = {"none (kvc_tier_attach_disk)", "NULL", "\"\"", "\"a\"", "\"b\"", "\"a\"",
                                             "1024 bytes x..xa", "1024 bytes x..xb"};
    return names[i];
}
// One byte longer than allowed; its first KVC_MAX_DISK_IDENTITY_LEN bytes are identity 6 (a
// library that cut it short instead of refusing it would attach as that one).
const char *too_long_identity() {
    static const std::string s = std::string(KVC_MAX_DISK_IDENTITY_LEN - 1, 'x') + "ax";
    return s.c_str();
}

struct Session {
    kvc_pool *pool = nullptr;
    kvc_keys *keys = nullptr;
    kvc_batch *batch = nullptr;
    model::Pool m;
    int32_t alphabet = 2;
    // Hash consistency of STORED events: one hash per identity, one identity per hash.
    std::map<model::Identity, std::pair<uint64_t, uint64_t>> hash_of;
    std::map<std::pair<uint64_t, uint64_t>, model::Identity> id_of;
    // The batch's last successful build, as the model predicts it.
    bool batch_built = false;
    std::vector<int32_t> batch_tables;
    std::vector<int64_t> batch_slots;
    int32_t batch_max_seqs = 3, batch_width = 6;
    int64_t batch_max_tokens = 24;
    bool cpu = false;          // CPU backend (KV storage; copy_pending works)
    // Recent prompts: re-requesting one later (after it was freed and perhaps evicted or spilled) is
    // what exercises re-hits.
    struct Recent {
        std::vector<int32_t> toks;
        int64_t n = 0;
    };
    Recent recent[4];
    int recent_next = 0;
    // Sequences freed lately (their prompt and every appended token, with their keys): a later prompt
    // that repeats or extends one (the next turn of a chat) hits what is left of it in the cache —
    // with a sliding window often only its later blocks, the early ones released and evicted.
    struct Past {
        std::vector<int32_t> toks;
        model::Keys keys;
    };
    Past past[4];
    int past_next = 0;
    int64_t block_bytes = 0;   // block_stride, for kvc_preemption_cost
    int64_t other_tokens = 0;  // op_other_traffic's next token id (offset by 1000: no template uses them)
    uint64_t input_hash = 0;   // picks the mirror's shape and backend
    std::vector<uint8_t> mirror_block;  // check_kv's buffer for one of the mirror's blocks
    // The byte oracle (CPU pools): the pool's storage layout, kvo_write's K/V rows, every block's
    // bytes as check_storage reads them, and the block ids 0 .. num_blocks - 1 it reads.
    kvo_shape shape{};
    std::vector<float> kv_scratch;
    std::vector<uint8_t> storage;
    std::vector<int32_t> all_blocks;
    // Each block's bytes and model content when it last passed check_storage (cleared at a restart).
    std::vector<uint8_t> passed_storage;
    std::vector<model::Content> passed_kv;
    int pending_ops = 0;  // operations that ended with copy-on-write pairs pending (check_kv)
    mirror::Rank mr;           // the mirror rank: every call below is made on mr.pool too
    // What a restart re-creates (op_restart): the configuration, the tiers' slot counts.
    kvc_pool_config cfg{};
    int32_t host_slots = 0, disk_slots = 0;
    bool persistent = false;   // disk tier attached with KVC_DISK_PERSISTENT (restarts possible)
    int32_t identity = 0;      // the disk tier's identity: an index into kIdentities
    double watermark = 0;
    // The latest successful prefetches (prompt, keys, reported cached tokens): an alloc of one of
    // them counts in the summary (g_prefetch_allocs) and forgets it.
    struct Prefetched {
        std::vector<int32_t> toks;
        model::Keys keys;
        int64_t cached = 0;
    };
    std::vector<Prefetched> prefetched;

    ~Session() {
        kvc_batch_destroy(batch);
        kvc_keys_destroy(keys);
        kvc_pool_destroy(pool);
        remove_disk_files();  // the mirror's pool (destroyed next) has its file open: unlinking is fine
    }
};

int32_t template_token(int t, int64_t i, int32_t alphabet) {
    uint64_t x = uint64_t(t) * 0x9E3779B97F4A7C15ull + uint64_t(i) * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    return int32_t(x % uint64_t(alphabet));
}

// A prompt: a template prefix (so prompts share prefixes), possibly one mutated position, and a
// tail of raw bytes from the input.
std::vector<int32_t> read_prompt(Input &in, int32_t alphabet, int64_t *n_out) {
    int64_t n = 1 + in.below(kMaxPrompt);
    int t = int(in.below(kTemplates));
    int64_t keep = in.below(n + 1);
    std::vector<int32_t> toks(size_t(n) + 8);
    for (int64_t i = 0; i < n; ++i) toks[size_t(i)] = template_token(t, i, alphabet);
    if (in.below(2)) {
        int64_t at = in.below(n);
        toks[size_t(at)] = int32_t(in.below(alphabet + 1));
    }
    for (int64_t i = keep; i < n && i < keep + 4; ++i) toks[size_t(i)] = int32_t(in.below(alphabet + 1));
    *n_out = n;
    return toks;
}

// Fills s.keys (library) and returns the model's keys; *use_null = pass NULL instead.
model::Keys read_keys(Input &in, Session &s, bool *use_null) {
    model::Keys k;
    uint8_t v = in.byte();
    *use_null = (v & 7) == 0;
    kvc_keys_clear(s.keys);
    if (*use_null) return k;
    if (v & 8) k.lora = 1 + (v >> 6 & 1);
    if (v & 16) k.salt = (v & 32) ? "tenant-a" : "b";
    static const int32_t prios[] = {0, 10, 50, 50, 90, 100};
    k.priority = prios[in.below(6)];
    if (in.below(4) == 0) {
        model::MmItem m;
        m.hi = 1;
        m.lo = uint64_t(in.below(3));
        m.offset = in.below(12);
        m.length = 1 + in.below(6);
        k.mm.push_back(m);
    }
    if (kvc_keys_set_lora(s.keys, k.lora) != KVC_OK) diverge("keys_set_lora failed");
    if (kvc_keys_set_salt(s.keys, k.salt.empty() ? (in.below(2) ? "" : nullptr) : k.salt.c_str()) != KVC_OK)
        diverge("keys_set_salt failed");
    if (kvc_keys_set_priority(s.keys, k.priority) != KVC_OK) diverge("keys_set_priority failed");
    for (const auto &m : k.mm)
        if (kvc_keys_add_mm(s.keys, m.hi, m.lo, m.offset, m.length) != KVC_OK) diverge("keys_add_mm failed");
    return k;
}

// Sets s.keys (library) to exactly k.
void apply_keys(Session &s, const model::Keys &k) {
    kvc_keys_clear(s.keys);
    if (kvc_keys_set_lora(s.keys, k.lora) != KVC_OK) diverge("keys_set_lora failed");
    if (kvc_keys_set_salt(s.keys, k.salt.empty() ? nullptr : k.salt.c_str()) != KVC_OK) diverge("keys_set_salt failed");
    if (kvc_keys_set_priority(s.keys, k.priority) != KVC_OK) diverge("keys_set_priority failed");
    for (const auto &m : k.mm)
        if (kvc_keys_add_mm(s.keys, m.hi, m.lo, m.offset, m.length) != KVC_OK) diverge("keys_add_mm failed");
}

// A prompt that repeats a live or lately freed sequence's tokens, a few shorter or longer (the
// extension continues template 0, as appends sometimes do); mostly with that sequence's keys.
// The source is picked among those that exist (live sequences by id, then the freed ones), half the
// time among the live ones a window has released blocks of (whose released blocks eviction may have
// taken while their later ones stay cached); false when there is none.
bool read_derived_prompt(Input &in, Session &s, std::vector<int32_t> *toks, int64_t *n, model::Keys *k,
                         bool *use_source_keys) {
    using Source = std::pair<const std::vector<int32_t> *, const model::Keys *>;
    std::vector<Source> sources, windowed;
    for (const auto &kv : s.m.seqs) {
        sources.push_back({&kv.second.tokens, &kv.second.keys});
        if (kv.second.released > 0) windowed.push_back(sources.back());
    }
    for (const auto &p : s.past)
        if (!p.toks.empty()) sources.push_back({&p.toks, &p.keys});
    const uint8_t pick = in.byte();
    const int64_t delta = in.below(8) - 3;  // -3 .. +4 tokens
    *use_source_keys = in.below(4) != 0;
    if (sources.empty()) return false;
    const Source &src = (pick & 1) && !windowed.empty() ? windowed[size_t(pick >> 1) % windowed.size()]
                                                        : sources[size_t(pick >> 1) % sources.size()];
    const std::vector<int32_t> *from = src.first;
    *k = *src.second;
    *n = std::max<int64_t>(1, int64_t(from->size()) + delta);
    toks->assign(size_t(*n) + 8, 0);
    for (int64_t i = 0; i < *n; ++i)
        (*toks)[size_t(i)] = i < int64_t(from->size()) ? (*from)[size_t(i)] : template_token(0, i, s.alphabet);
    return true;
}

// The prompt and keys of a query (can_alloc, lookup, lookup_tiers, pin/unpin): a fresh prompt, or a
// quarter of the time one derived from a sequence (read_derived_prompt), so queries also meet
// prompts whose early blocks a window released and eviction took.
std::vector<int32_t> read_query(Input &in, Session &s, int64_t *n, model::Keys *k, bool *null_keys) {
    std::vector<int32_t> toks = read_prompt(in, s.alphabet, n);
    model::Keys source_keys;
    bool use_source_keys = false;
    const bool derived = in.below(4) == 0 && read_derived_prompt(in, s, &toks, n, &source_keys, &use_source_keys);
    *k = read_keys(in, s, null_keys);
    if (derived && use_source_keys) {
        *k = source_keys;
        *null_keys = false;
        apply_keys(s, *k);
    }
    return toks;
}

void remember_seq(Session &s, uint64_t id) {
    auto it = s.m.seqs.find(id);
    if (it == s.m.seqs.end()) return;
    s.past[s.past_next] = {it->second.tokens, it->second.keys};
    s.past_next = (s.past_next + 1) % 4;
}

// ---- comparisons after every operation ---------------------------------------------------------


// What the host and disk tiers report alike, against the model's slots and counters (each tier's
// own fields are compared by the caller). *ts receives the library's stats.
void compare_slot_tier(Session &s, int32_t tier, const char *name, const std::vector<model::HostSlot> &slots,
                       size_t free_slots, const model::HostCounters &c, kvc_tier_stats *ts) {
    const model::Pool &m = s.m;
    std::memset(ts, 0, sizeof *ts);
    ts->struct_size = sizeof *ts;
    if (kvc_tier_get_stats(s.pool, tier, ts) != KVC_OK) diverge("kvc_tier_get_stats(%s) failed", name);
    char what[64];
    auto field = [&](const char *f) {
        std::snprintf(what, sizeof what, "%s.%s", name, f);
        return what;
    };
    EXPECT_EQ(field("capacity_blocks"), ts->capacity_blocks, slots.size());
    EXPECT_EQ(field("used_blocks"), ts->used_blocks, int64_t(slots.size()) - int64_t(free_slots));
    EXPECT_EQ(field("cached_blocks"), ts->cached_blocks, model::slot_count(slots, model::HostSlot::kCached));
    EXPECT_EQ(field("busy slots after a call"), model::slot_count(slots, model::HostSlot::kBusy), 0);
    EXPECT_EQ(field("hits"), ts->hits, c.hits);
    EXPECT_EQ(field("evictions"), ts->evictions, c.evictions);
    EXPECT_EQ(field("blocks_in"), ts->blocks_in, c.blocks_in);
    EXPECT_EQ(field("blocks_out"), ts->blocks_out, c.blocks_out);
    EXPECT_EQ(field("failures"), ts->failures, c.failures);
    EXPECT_EQ(field("reachable_blocks"), ts->reachable_blocks, m.reachable(slots));
    g_unreachable_seen += uint64_t(ts->cached_blocks - ts->reachable_blocks);
}
void compare_stats(Session &s) {
    kvc_stats st;
    std::memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    if (kvc_pool_stats(s.pool, &st) != KVC_OK) diverge("kvc_pool_stats failed");
    const model::Pool &m = s.m;
    const fuzz::CounterMismatch d = fuzz::first_counter_mismatch(st, m, m.seqs.size());
    if (d.what) EXPECT_EQ(d.what, d.library, d.model);
    EXPECT_EQ("stats.pinned_blocks", st.pinned_blocks, m.num_pinned());
    EXPECT_EQ("stats.events_dropped", st.events_dropped, m.events_dropped);
    if (!m.host) return;
    kvc_tier_stats ts;
    compare_slot_tier(s, KVC_TIER_HOST, "host", m.hslots, m.hfree.size(), m.hc, &ts);
    EXPECT_EQ("host.held_blocks", ts.held_blocks, m.host_count(model::HostSlot::kHeld));
    compare_slot_tier(s, KVC_TIER_DISK, "disk", m.dslots, m.dfree.size(), m.dc, &ts);
    EXPECT_EQ("disk.held_blocks", ts.held_blocks, 0);
    EXPECT_EQ("disk.io_errors", ts.io_errors, m.dc.io_errors);
    EXPECT_EQ("disk.checksum_failures", ts.checksum_failures, m.dc.checksum_failures);
    EXPECT_EQ("disk.recovered_blocks", ts.recovered_blocks, m.recovered);
    EXPECT_EQ("disk.foreign_blocks", ts.foreign_blocks, m.foreign);
    EXPECT_EQ("disk.persistent", ts.persistent, m.disk && s.persistent);
    std::memset(&ts, 0, sizeof ts);
    ts.struct_size = sizeof ts;
    if (kvc_tier_get_stats(s.pool, KVC_TIER_DEVICE, &ts) != KVC_OK) diverge("kvc_tier_get_stats(device) failed");
    EXPECT_EQ("device.used_blocks", ts.used_blocks, m.num_used());
    EXPECT_EQ("device.cached_blocks", ts.cached_blocks, m.num_cached_free());
    EXPECT_EQ("device.reachable_blocks", ts.reachable_blocks, m.device_reachable());
    EXPECT_EQ("device.hits", ts.hits, m.c.device_hits);
}

void compare_seqs(Session &s) {
    for (uint64_t id = 0; id < kMaxIds; ++id) {
        auto it = s.m.seqs.find(id);
        int64_t n = -1, len = -1;
        kvc_status st = kvc_seq_num_tokens(s.pool, id, &n);
        if (it == s.m.seqs.end()) {
            EXPECT_EQ("seq_num_tokens status of a dead id", st, KVC_ERR_UNKNOWN_SEQ);
            continue;
        }
        EXPECT_EQ("seq_num_tokens status", st, KVC_OK);
        EXPECT_EQ("seq_num_tokens", n, it->second.num_tokens);
        int32_t table[256];
        st = kvc_seq_block_table(s.pool, id, table, 256, &len);
        EXPECT_EQ("seq_block_table status", st, KVC_OK);
        EXPECT_EQ("block table length", len, it->second.table.size());
        for (int64_t i = 0; i < len; ++i)
            if (table[i] != it->second.table[size_t(i)])
                diverge("sequence %" PRIu64 " block %" PRId64 ": library %d, model %d (op #%d %s)", id, i, table[i],
                        it->second.table[size_t(i)], g_op, g_opname);
    }
}

void check_pool(Session &s) {
    if (kvc_pool_check(s.pool) != KVC_OK) diverge("kvc_pool_check: %s (op #%d %s)", kvc_last_error(), g_op, g_opname);
}

// Right after a disk attach (setup, restart): what the attach found in the file, before anything
// else is compared (compare_stats repeats it after every operation), so that a wrong re-index is
// named as such.
void check_attach(Session &s) {
    if (!s.m.disk) return;
    kvc_tier_stats ts;
    std::memset(&ts, 0, sizeof ts);
    ts.struct_size = sizeof ts;
    if (kvc_tier_get_stats(s.pool, KVC_TIER_DISK, &ts) != KVC_OK) diverge("kvc_tier_get_stats(disk) failed");
    if (ts.recovered_blocks != s.m.recovered || ts.foreign_blocks != s.m.foreign)
        diverge("disk attach under identity %s: recovered_blocks %lld, foreign_blocks %lld; model %lld, %lld (op #%d %s)",
                identity_name(s.identity), (long long)ts.recovered_blocks, (long long)ts.foreign_blocks,
                (long long)s.m.recovered, (long long)s.m.foreign, g_op, g_opname);
}

// The mirror's own invariants, after setup and at the end of each input: between those its
// metadata is compared with the fuzzed pool's after every operation, and a check per operation
// would cost a third of the fuzzing speed.
void check_mirror_pool(Session &s) {
    if (kvc_pool_check(s.mr.pool) != KVC_OK) mirror::report("kvc_pool_check of the mirror: %s", kvc_last_error());
}

// The mirror's counters and sequences against the fuzzed pool's (after every operation).
MIRROR_NO_COVERAGE void compare_mirror(Session &s) {
    mirror::compare_stats(s.pool, s.mr.pool);
    mirror::compare_tier_stats(s.pool, s.mr.pool);
    mirror::compare_seqs(s.pool, s.mr.pool, kMaxIds);
}

// ---- operations ------------------------------------------------------------------------------

// ---- KV bytes (CPU pools) ----------------------------------------------------------------------
// The fuzzer plays the forward pass: right after an alloc or append it writes the K/V of the tokens
// the step computed (not the cached ones) with the byte oracle (tests/kv_oracle.h): every element is
// a function of its position's identity, which chains the request's keys and every token up to it
// (model.hpp, "KV content"), so a block holding another prefix's or another tenant's KV differs even
// where the token and the position agree. A forward pass starts with kvc_copy_pending, as an engine
// drains the pairs before it (kvc.h: any storage access would copy them first anyway). After every
// operation check_kv compares:
//   - every device block whose content the model knows -- sequences' blocks, blocks forks share,
//     the cache's free entries, blocks restored, swapped in or copied -- byte for byte against the
//     model's content (check_storage: the library moved the bytes the model moved; the whole
//     storage after every operation, the fuzzer's pools being small);
//   - what each sequence will read at its next step (a pending pair's destination reads its source)
//     against the identities of its own positions (check_seq_content: the moves the model and the
//     library agree on hand every sequence its own KV; while swapped out, in its held host slots).
// Host and disk slots cannot be read through the API: their content is checked when it comes back
// (a restore, a swap-in, a promotion and its restore), against what the model says went in.
// Pending pairs: an append that only reserves lookahead slots computes nothing, so its pairs stay
// pending -- for up to kPendingOps operations (a free cancelling a pair, a fork sharing its
// destination, an append chaining a pair on it, a swap, a truncate, restores and spills around a
// held source). Reading the storage would copy them (kvc.h), so meanwhile check_kv checks the
// sequences' settled content only; then it copies them (kvc_copy_pending) and checks every block.
constexpr int kPendingOps = 3;

// The checks' branches follow the data, not the library's behaviour (mirror.hpp's reason).
#define CHECK_NO_COVERAGE MIRROR_NO_COVERAGE

// The fuzzed pool copies its pending pairs. A storage mirror does the same; a metadata-only one
// drains them with kvc_take_pending_copies (what an engine without library storage does), and they
// must be the pairs the model says the fuzzed pool had.
MIRROR_NO_COVERAGE void mirror_copy_pending(Session &s, int64_t pool_copied) {
    if (s.mr.storage) {
        int64_t copied = -7;
        MIRROR_EQ("kvc_copy_pending status", KVC_OK, kvc_copy_pending(s.mr.pool, nullptr, &copied));
        MIRROR_EQ("kvc_copy_pending pairs", pool_copied, copied);
        return;
    }
    const size_t n = s.m.pending.size();
    std::vector<int32_t> src(n + 1), dst(n + 1);
    int64_t count = -7;
    MIRROR_EQ("kvc_take_pending_copies status (for the pool's kvc_copy_pending)", KVC_OK,
              kvc_take_pending_copies(s.mr.pool, src.data(), dst.data(), int64_t(n) + 1, &count));
    MIRROR_EQ("kvc_take_pending_copies pairs (for the pool's kvc_copy_pending)", pool_copied, count);
    size_t i = 0;
    for (const auto &pair : s.m.pending) {
        MIRROR_EQ("pending src (for the pool's kvc_copy_pending)", pair.first, src[i]);
        MIRROR_EQ("pending dst (for the pool's kvc_copy_pending)", pair.second, dst[i]);
        ++i;
    }
}

void copy_pending_now(Session &s) {
    if (!s.cpu || s.m.pending.empty()) return;
    int64_t copied = -7;
    EXPECT_EQ("kvc_copy_pending status", kvc_copy_pending(s.pool, nullptr, &copied), KVC_OK);
    EXPECT_EQ("kvc_copy_pending pairs", copied, s.m.pending.size());
    mirror_copy_pending(s, copied);
    s.m.drain_all();
}

// Writes the KV of positions first .. first + count - 1 of sequence id, after the pending pairs
// are copied (the mirror writes the same tokens' K/V in its own shape, mirror.hpp, when it has data).
void write_kv(Session &s, uint64_t id, int64_t first, int64_t count) {
    if (!s.cpu || count <= 0) return;
    copy_pending_now(s);
    const model::Seq &q = s.m.seqs.at(id);
    std::vector<int64_t> slots;
    for (int64_t p = first; p < first + count; ++p)
        slots.push_back(int64_t(q.table[size_t(p / s.m.bs)]) * s.m.bs + p % s.m.bs);
    s.kv_scratch.resize(size_t(2 * count * kvo_row_floats(&s.shape)));
    if (kvo_write(s.pool, &s.shape, slots.data(), q.ids.data() + first, count, s.kv_scratch.data(), nullptr) != KVC_OK)
        diverge("kvc_cache_write failed: %s", kvc_last_error());
    s.m.record_write(q, first, count);
    if (s.mr.data) mirror::write_kv(s.mr, slots, q.tokens, first, count);
}

// Does token slot t of a block read as the KV of identity id?
bool holds(const Session &s, const uint8_t *block_bytes, int64_t t, uint64_t id) {
    return kvo_check_block(&s.shape, block_bytes, int32_t(t), &id, 1, nullptr) == 0;
}

// For a divergence message: the first sequence holding block b, and the block's state.
std::string block_holder(const Session &s, int32_t b) {
    for (const auto &kv : s.m.seqs)
        for (size_t i = 0; i < kv.second.table.size(); ++i)
            if (kv.second.table[i] == b) return "block " + std::to_string(i) + " of sequence " + std::to_string(kv.first);
    return "held by no sequence";
}
std::string block_role(const Session &s, int32_t b) {
    const model::Block &blk = s.m.blocks[size_t(b)];
    return block_holder(s, b) + ", refcount " + std::to_string(blk.ref) + (blk.cached ? ", cached" : ", uncached");
}

// For a divergence message: whose KV token slot t of a block holds, among every content the model
// knows (device blocks, host and disk slots, sequences' positions), e.g. the evicted block's.
std::string whose_kv(const Session &s, const uint8_t *bytes, int64_t t) {
    auto find_in = [&](const char *what, size_t n, const auto &content_of) -> std::string {
        for (size_t i = 0; i < n; ++i) {
            const model::Content &kv = content_of(i);
            for (size_t u = 0; u < kv.size(); ++u)
                if (kv[u] != model::kUnknown && holds(s, bytes, t, kv[u]))
                    return std::string(what) + " " + std::to_string(i) + " token " + std::to_string(u);
        }
        return "";
    };
    std::string r = find_in("device block", s.m.blocks.size(), [&](size_t i) -> const model::Content & { return s.m.blocks[i].kv; });
    if (r.empty()) r = find_in("host slot", s.m.hslots.size(), [&](size_t i) -> const model::Content & { return s.m.hslots[i].kv; });
    if (r.empty()) r = find_in("disk slot", s.m.dslots.size(), [&](size_t i) -> const model::Content & { return s.m.dslots[i].kv; });
    for (const auto &kv : s.m.seqs)
        for (size_t p = 0; p < kv.second.ids.size() && r.empty(); ++p)
            if (holds(s, bytes, t, kv.second.ids[p]))
                r = "position " + std::to_string(p) + " of sequence " + std::to_string(kv.first);
    return r.empty() ? "KV the model knows nothing of" : "the KV of " + r;
}

// Block b's bytes against the model's content, token slot by token slot. Unknown slots (taken
// fresh and not written since) are skipped.
void check_block_bytes(Session &s, int32_t b, const uint8_t *bytes) {
    const model::Block &blk = s.m.blocks[size_t(b)];
    for (size_t t = 0; t < blk.kv.size(); ++t) {
        if (blk.kv[t] == model::kUnknown) continue;
        if (!holds(s, bytes, int64_t(t), blk.kv[t]))
            diverge("KV bytes of block %d token %zu (%s) hold %s, not the content the model moved there (op #%d %s)",
                    b, t, block_role(s, b).c_str(), whose_kv(s, bytes, int64_t(t)).c_str(), g_op, g_opname);
    }
}

// Every device block (one read of the whole storage: the fuzzer's pools are small). A block whose
// bytes and model content are both what they were when it last passed passes again without being
// decoded: only the blocks an operation wrote, or whose content the model moved, cost oracle work.
CHECK_NO_COVERAGE void check_storage(Session &s) {
    const size_t stride = size_t(s.shape.block_stride), n = size_t(s.m.num_blocks);
    s.storage.resize(stride * n);
    s.passed_storage.resize(stride * n);
    s.passed_kv.resize(n);
    if (kvc_storage_copy_blocks(s.pool, s.all_blocks.data(), s.m.num_blocks, s.storage.data(), 1) != KVC_OK)
        diverge("kvc_storage_copy_blocks failed: %s", kvc_last_error());
    for (size_t b = 0; b < n; ++b) {
        const model::Block &blk = s.m.blocks[b];
        if (std::all_of(blk.kv.begin(), blk.kv.end(), [](uint64_t id) { return id == model::kUnknown; })) continue;
        ++g_kv_block_checks;
        g_kv_free_cached_checks += model::Pool::is_free(blk) && blk.cached;
        g_kv_shared_checks += blk.ref > 1;
        const uint8_t *bytes = s.storage.data() + b * stride;
        uint8_t *passed = s.passed_storage.data() + b * stride;
        if (s.passed_kv[b] == blk.kv && std::memcmp(bytes, passed, stride) == 0) continue;
        ++g_kv_blocks_decoded;
        check_block_bytes(s, int32_t(b), bytes);
        s.passed_kv[b] = blk.kv;
        std::memcpy(passed, bytes, stride);
    }
}

// What sequence id reads at position p at its next step: its block's content once the pending pairs
// are copied, or its held host slot's while swapped out.
uint64_t seq_reads(const Session &s, const model::Seq &q, int64_t p) {
    const size_t i = size_t(p / s.m.bs);
    if (q.table[i] >= 0) return s.m.settled_content(q.table[i], p % s.m.bs);
    if (!q.swapped || q.swap_slots[i] < 0) return model::kUnknown;  // no block: a model bug
    return model::Pool::content_at(s.m.hslots[size_t(q.swap_slots[i])].kv, p % s.m.bs);
}

// Every confirmed position of every sequence (not those a sliding window released: never read
// again) reads its own KV.
CHECK_NO_COVERAGE void check_seq_content(Session &s) {
    for (const auto &kv : s.m.seqs) {
        const model::Seq &q = kv.second;
        for (int64_t p = q.released * s.m.bs; p < q.num_tokens; ++p) {
            const uint64_t got = seq_reads(s, q, p);
            if (got != q.ids[size_t(p)])
                diverge("sequence %" PRIu64 " position %" PRId64 " (block %d%s) would read %s, not its own KV (op #%d %s)",
                        kv.first, p, q.table[size_t(p / s.m.bs)], q.swapped ? ", swapped out" : "",
                        got == model::kUnknown ? "KV never written" : "another position's KV", g_op, g_opname);
            g_kv_settled_reads += q.table[size_t(p / s.m.bs)] >= 0 && s.m.is_pending_dst(q.table[size_t(p / s.m.bs)]);
        }
    }
}

// The mirror's own KV bytes of the resident sequences' confirmed positions.
CHECK_NO_COVERAGE void check_mirror_kv(Session &s) {
    const int32_t bs = s.m.bs;
    for (const auto &kv : s.m.seqs) {
        const model::Seq &q = kv.second;
        if (q.swapped) continue;
        for (int64_t b = q.released; b * bs < q.num_tokens; ++b)
            mirror::check_block(s.mr, q.table[size_t(b)], q.tokens, b * bs, std::min<int64_t>(bs, q.num_tokens - b * bs),
                                &s.mirror_block, kv.first);
    }
}

// KVC_FUZZ_KV_SKEW=cached, the self-test that the byte checks can fail (run.sh): the first time a
// free cached block holds known KV, the fuzzer overwrites one of its token slots with the KV of
// the same token at the same position under another prefix (another LoRA id) -- which the old
// position-and-token values could not tell apart, and which no sequence reads: only the check of
// the cache's own entries sees it.
void skew_kv_once(Session &s) {
    static const char *skew = std::getenv("KVC_FUZZ_KV_SKEW");
    static bool done = false;
    if (!skew || done) return;
    if (std::strcmp(skew, "cached") != 0) {
        std::fprintf(stderr, "KVC_FUZZ_KV_SKEW=%s: unknown (cached)\n", skew);
        std::exit(2);
    }
    for (int32_t b = 0; b < s.m.num_blocks; ++b) {
        const model::Block &blk = s.m.blocks[size_t(b)];
        if (!model::Pool::is_free(blk) || !blk.cached || blk.kv.empty() || blk.kv[0] == model::kUnknown) continue;
        model::Keys other;
        other.lora = blk.id.lora + 1;
        other.salt = blk.id.salt;
        other.mm = blk.id.mm;
        std::vector<uint64_t> ids;
        model::extend_ids(other, blk.id.tokens, s.m.bs, &ids);
        const int64_t slot = int64_t(b) * s.m.bs;  // token 0 of the block
        s.kv_scratch.resize(size_t(2 * kvo_row_floats(&s.shape)));
        if (kvo_write(s.pool, &s.shape, &slot, &ids[ids.size() - size_t(s.m.bs)], 1, s.kv_scratch.data(), nullptr) != KVC_OK)
            diverge("kvc_cache_write (KVC_FUZZ_KV_SKEW) failed: %s", kvc_last_error());
        done = true;
        return;
    }
}

// After every operation (see the section comment for pending pairs).
void check_kv(Session &s) {
    if (!s.cpu) return;
    if (!s.m.pending.empty() && ++s.pending_ops < kPendingOps) {
        check_seq_content(s);
        ++g_kv_pending_ops;
        return;
    }
    s.pending_ops = 0;
    copy_pending_now(s);
    skew_kv_once(s);
    check_storage(s);
    check_seq_content(s);
    if (s.mr.data) check_mirror_kv(s);
}

void op_other_traffic(Input &in, Session &s);

// Disk fault injection (lib/testing.h) for one kvc_alloc: the next `count` disk writes (a host
// victim's spill) or reads (a promotion) fail as `kind` says. The hook is process-wide and counts
// I/O operations in the order they run. The mirror makes exactly the same disk I/O in the same
// order (the determinism contract holds for disk tiers up to their I/O failures), so the fault is
// armed again, identically, for the mirror's call: both fail the same copies and stay comparable
// (a real rank's disk fails on its own; README, "Tensor parallelism").
struct DiskFault {
    int32_t kind = KVCT_FAULT_NONE, count = 0;
    void arm() const { kvct_disk_fault(kind, count); }
    static void disarm() { kvct_disk_fault(KVCT_FAULT_NONE, 0); }
    void arm_model(model::Pool &m) const {
        m.fault_write = kind == KVCT_FAULT_WRITE_ENOSPC || kind == KVCT_FAULT_WRITE_EIO;
        m.fault_checksum = kind == KVCT_FAULT_READ_BITFLIP;
        m.fault_left = count;
    }
};

void note_prefetched_alloc(Session &s, const std::vector<int32_t> &toks, int64_t n, const model::Keys &k, int64_t cached);
void op_admit(Session &s, uint64_t id, const std::vector<int32_t> &toks, int64_t n, const model::Keys &k, bool null_keys,
              bool null_tokens);

// The prompt of kvc_alloc and kvc_tier_prefetch (the same bytes for both): a recent one, one derived
// from a live sequence (read_derived_prompt), or a fresh one, remembered among the recent ones.
struct PromptChoice {
    std::vector<int32_t> toks;
    int64_t n = 0;
    model::Keys source_keys;
    bool use_source_keys = false, derived = false;
};

PromptChoice pick_prompt(Input &in, Session &s) {
    PromptChoice c;
    c.toks = read_prompt(in, s.alphabet, &c.n);
    const int64_t pick = in.below(8);
    if (pick < 4 && s.recent[pick].n > 0) {
        c.toks = s.recent[pick].toks;
        c.n = s.recent[pick].n;
    } else if ((pick == 4 || pick == 5) &&
               read_derived_prompt(in, s, &c.toks, &c.n, &c.source_keys, &c.use_source_keys)) {
        c.derived = true;
    } else {
        s.recent[s.recent_next] = {c.toks, c.n};
        s.recent_next = (s.recent_next + 1) % 4;
    }
    return c;
}

// Its keys: read from the input, or the source sequence's for a derived prompt that reuses them.
model::Keys pick_keys(Input &in, Session &s, const PromptChoice &c, bool *null_keys) {
    model::Keys k = read_keys(in, s, null_keys);
    if (c.derived && c.use_source_keys) {
        k = c.source_keys;
        *null_keys = false;
        apply_keys(s, k);
    }
    return k;
}

void op_alloc(Input &in, Session &s) {
    uint64_t id = uint64_t(in.below(kMaxIds));
    PromptChoice c = pick_prompt(in, s);
    if (c.derived) {
        // on a free id (if any), so that the new sequence is not refused for its id
        for (uint64_t free_id = 0; s.m.seqs.count(id) && free_id < kMaxIds; ++free_id)
            if (!s.m.seqs.count(free_id)) id = free_id;
        // a quarter of the time other requests came and went since the source's turn
        if (in.below(4) == 0) op_other_traffic(in, s);
    }
    int64_t n = c.n;
    std::vector<int32_t> toks = std::move(c.toks);
    bool null_keys;
    model::Keys k = pick_keys(in, s, c, &null_keys);
    uint8_t v = in.byte();
    if (v % 16 == 0) n = -int64_t(v / 16);  // invalid sizes now and then
    bool null_tokens = v % 16 == 1 || (!s.m.caching && v % 4 == 2);
    DiskFault fault;  // a sixteenth of the allocs on a pool with a disk tier (the byte's high bits)
    if (v % 16 == 15 && s.m.disk) {
        fault.kind = KVCT_FAULT_WRITE_ENOSPC + (v / 16) % 5;
        fault.count = 1 + (v / 80) % 2;
    }
    int64_t cached = -7;
    if (g_trace) {
        std::fprintf(stderr, "  alloc seq %" PRIu64 " n %" PRId64 " lora %" PRIu64 " salt '%s' mm %zu tokens", id, n,
                     k.lora, k.salt.c_str(), k.mm.size());
        for (int64_t i = 0; i < n && !null_tokens; ++i) std::fprintf(stderr, " %d", toks[size_t(i)]);
        std::fprintf(stderr, "\n");
    }
    // Every fourth allocation goes through kvc_admit (chosen by the op's index: inputs decode as
    // before): the model's can_alloc verdict, and only on OK its alloc.
    if (g_op % 4 == 3 && fault.count == 0) {
        op_admit(s, id, toks, n, k, null_keys, null_tokens);
        return;
    }
    fault.arm();
    kvc_status st = kvc_alloc(s.pool, id, null_tokens ? nullptr : toks.data(), n, null_keys ? nullptr : s.keys,
                              &cached);
    fault.arm_model(s.m);  // consumed by the copies' commits (in alloc, and run()'s finish_call)
    model::Result r = s.m.alloc(id, null_tokens ? nullptr : &toks, n, k);
    EXPECT_EQ("kvc_alloc status", st, r.status);
    if (st == KVC_OK) EXPECT_EQ("kvc_alloc cached tokens", cached, r.value);
    int64_t m_cached = -7;
    fault.arm();
    const kvc_status m_st = kvc_alloc(s.mr.pool, id, null_tokens ? nullptr : toks.data(), n,
                                      null_keys ? nullptr : s.keys, &m_cached);
    DiskFault::disarm();
    MIRROR_EQ("kvc_alloc status", st, m_st);
    MIRROR_EQ("kvc_alloc cached tokens", cached, m_cached);
    if (st == KVC_OK) write_kv(s, id, cached, n - cached);
    else EXPECT_EQ("kvc_alloc wrote its out-param on failure", cached, -7);
    if (st == KVC_OK && !null_tokens) note_prefetched_alloc(s, toks, n, k, cached);
}

// kvc_admit: kvc_can_alloc's verdict, then kvc_alloc only for OK. The model: the prompt's argument
// checks, then an existing id (KVC_ERR_SEQ_EXISTS whatever the verdict), then can_alloc's verdict,
// then alloc; with a disk tier the library allocates through kvc_alloc after the verdict, and a
// refusal there (another walk found the blocks gone) reads as LATER.
void op_admit(Session &s, uint64_t id, const std::vector<int32_t> &toks, int64_t n, const model::Keys &k, bool null_keys,
              bool null_tokens) {
    int32_t verdict = -7, m_verdict = -7;
    int64_t cached = -7, m_cached = -7;
    const int32_t *tp = null_tokens ? nullptr : toks.data();
    const kvc_keys *kp = null_keys ? nullptr : s.keys;
    if (g_trace) std::fprintf(stderr, "  admit seq %" PRIu64 " n %" PRId64 "%s\n", id, n, null_tokens ? " NULL tokens" : "");
    const kvc_status st = kvc_admit(s.pool, id, tp, n, kp, &verdict, &cached);
    model::Result want = s.m.can_alloc(null_tokens ? nullptr : &toks, n, k);
    int64_t want_cached = 0;
    if (want.status == KVC_OK && s.m.seqs.count(id)) want = {KVC_ERR_SEQ_EXISTS, 0};
    if (want.status == KVC_OK && want.value == KVC_ALLOC_OK) {
        const model::Result r = s.m.alloc(id, null_tokens ? nullptr : &toks, n, k);
        if (r.status == KVC_ERR_OUT_OF_BLOCKS && s.m.disk && s.m.caching) want.value = KVC_ALLOC_LATER;
        else if (r.status != KVC_OK) want = {r.status, 0};
        else want_cached = r.value;
    }
    EXPECT_EQ("kvc_admit status", st, want.status);
    if (st == KVC_OK) {
        EXPECT_EQ("kvc_admit verdict", verdict, want.value);
        EXPECT_EQ("kvc_admit cached tokens", cached, want_cached);
    } else {
        EXPECT_EQ("kvc_admit wrote its out-param on failure", cached, -7);
    }
    MIRROR_EQ("kvc_admit status", st, kvc_admit(s.mr.pool, id, tp, n, kp, &m_verdict, &m_cached));
    MIRROR_EQ("kvc_admit verdict", verdict, m_verdict);
    MIRROR_EQ("kvc_admit cached tokens", cached, m_cached);
    ++g_admits;
    g_admits_not_ok += st == KVC_OK && verdict != KVC_ALLOC_OK;
    if (st == KVC_OK && verdict == KVC_ALLOC_OK) {
        write_kv(s, id, cached, n - cached);
        if (!null_tokens) note_prefetched_alloc(s, toks, n, k, cached);
    }
}

// The same block identities: tokens and the keys that enter the hash (not the priority).
bool same_prompt(const std::vector<int32_t> &a, const model::Keys &ka, const std::vector<int32_t> &b, int64_t n,
                 const model::Keys &kb) {
    return int64_t(a.size()) == n && std::equal(a.begin(), a.end(), b.begin()) && ka.lora == kb.lora &&
           ka.salt == kb.salt && ka.mm == kb.mm;
}
void note_prefetched_alloc(Session &s, const std::vector<int32_t> &toks, int64_t n, const model::Keys &k, int64_t cached) {
    for (auto it = s.prefetched.begin(); it != s.prefetched.end(); ++it)
        if (same_prompt(it->toks, it->keys, toks, n, k)) {
            ++g_prefetch_allocs;
            g_prefetch_allocs_full += cached >= it->cached;
            s.prefetched.erase(it);
            return;
        }
}

// kvc_tier_prefetch (opcode 9, see run()): reads the prompt's disk hits up into the host tier as
// kvc_alloc's promotion would, refusing nothing and allocating nothing (model::Pool::prefetch);
// *out_cached_tokens is the prompt's hit through device and host afterwards. The prompt is one of
// the recent ones (pick 0-3: what an alloc may then request again, the queued request the prefetch
// is for), derived from a live or freed sequence (4-5), else a fresh one, remembered as recent.
// Byte v: v % 16 == 0: num_tokens -(v / 16) (KVC_ERR_INVALID_ARG); 1: NULL tokens (KVC_ERR_NULL_ARG,
// with prefix caching off too); 2: num_tokens max_seq_len + 1 where there is a max (KVC_ERR_MAX_LEN);
// 3: a NULL out-param; 4: a NULL pool (KVC_ERR_NULL_ARG; the mirror is not called); 15 on a disk tier:
// an injected disk fault as in op_alloc (kind 1 + (v / 16) % 5: write faults hit the host victims'
// spills, read faults the blocks read up; 1-2 I/O operations), armed identically for the mirror.
// A pool without a disk tier answers KVC_ERR_STATE once the arguments pass.
void op_prefetch(Input &in, Session &s) {
    PromptChoice c = pick_prompt(in, s);
    int64_t n = c.n;
    std::vector<int32_t> toks = std::move(c.toks);
    bool null_keys;
    model::Keys k = pick_keys(in, s, c, &null_keys);
    const uint8_t v = in.byte();
    if (v % 16 == 0) n = -int64_t(v / 16);
    if (v % 16 == 2 && s.m.max_seq_len > 0) n = s.m.max_seq_len + 1;
    if (int64_t(toks.size()) < n) toks.resize(size_t(n), 0);  // readable for the library's MAX_LEN path
    const bool null_tokens = v % 16 == 1, null_out = v % 16 == 3, null_pool = v % 16 == 4;
    DiskFault fault;
    if (v % 16 == 15 && s.m.disk) {
        fault.kind = KVCT_FAULT_WRITE_ENOSPC + (v / 16) % 5;
        fault.count = 1 + (v / 80) % 2;
    }
    if (g_trace) {
        std::fprintf(stderr, "  prefetch n %" PRId64 " lora %" PRIu64 " salt '%s' mm %zu%s%s%s fault %d x%d tokens", n,
                     k.lora, k.salt.c_str(), k.mm.size(), null_tokens ? " NULL tokens" : "", null_out ? " NULL out" : "",
                     null_pool ? " NULL pool" : "", fault.kind, fault.count);
        for (int64_t i = 0; i < n && !null_tokens; ++i) std::fprintf(stderr, " %d", toks[size_t(i)]);
        std::fprintf(stderr, "\n");
    }
    const int32_t *tp = null_tokens ? nullptr : toks.data();
    const kvc_keys *kp = null_keys ? nullptr : s.keys;
    int64_t cached = -7, m_cached = -7;
    if (null_pool) {
        EXPECT_EQ("kvc_tier_prefetch status (NULL pool)", kvc_tier_prefetch(nullptr, tp, n, kp, &cached), KVC_ERR_NULL_ARG);
        EXPECT_EQ("kvc_tier_prefetch wrote its out-param (NULL pool)", cached, -7);
        ++g_prefetch_refused;
        return;
    }
    const int64_t read_before = s.m.dc.hits, short_before = s.m.promotions_refused;
    fault.arm();
    const kvc_status st = kvc_tier_prefetch(s.pool, tp, n, kp, null_out ? nullptr : &cached);
    DiskFault::disarm();
    fault.arm_model(s.m);  // consumed by promote()'s copies
    const model::Result r = s.m.prefetch(null_tokens ? nullptr : &toks, n, k);
    if (g_trace)
        std::fprintf(stderr, "  prefetch: status %d, cached tokens %" PRId64 ", disk blocks read up %" PRId64 "\n", int(st),
                     null_out ? r.value : cached, s.m.dc.hits - read_before);
    EXPECT_EQ("kvc_tier_prefetch status", st, r.status);
    if (st == KVC_OK && !null_out) EXPECT_EQ("kvc_tier_prefetch cached tokens", cached, r.value);
    else EXPECT_EQ("kvc_tier_prefetch wrote its out-param", cached, -7);
    fault.arm();
    const kvc_status m_st = kvc_tier_prefetch(s.mr.pool, tp, n, kp, null_out ? nullptr : &m_cached);
    DiskFault::disarm();
    MIRROR_EQ("kvc_tier_prefetch status", st, m_st);
    MIRROR_EQ("kvc_tier_prefetch cached tokens", cached, m_cached);
    if (st != KVC_OK) {
        ++g_prefetch_refused;
        return;
    }
    ++g_prefetches;
    g_prefetch_read += uint64_t(s.m.dc.hits - read_before);
    g_prefetch_short += uint64_t(s.m.promotions_refused - short_before);
    g_prefetch_faults += fault.count > 0;
    s.prefetched.push_back({std::vector<int32_t>(toks.begin(), toks.begin() + n), k, r.value});
    if (s.prefetched.size() > 4) s.prefetched.erase(s.prefetched.begin());
}

void op_can_alloc(Input &in, Session &s) {
    int64_t n;
    bool null_keys;
    model::Keys k;
    std::vector<int32_t> toks = read_query(in, s, &n, &k, &null_keys);
    int32_t verdict = -7;
    kvc_status st = kvc_can_alloc(s.pool, toks.data(), n, null_keys ? nullptr : s.keys, &verdict);
    model::Result r = s.m.can_alloc(&toks, n, k);
    EXPECT_EQ("kvc_can_alloc status", st, r.status);
    if (st == KVC_OK) EXPECT_EQ("kvc_can_alloc verdict", verdict, r.value);
    int32_t m_verdict = -7;
    MIRROR_EQ("kvc_can_alloc status", st, kvc_can_alloc(s.mr.pool, toks.data(), n, null_keys ? nullptr : s.keys, &m_verdict));
    MIRROR_EQ("kvc_can_alloc verdict", verdict, m_verdict);
}

// kvc_append_batch of one entry (id: nt tokens, nl lookahead), or two (then id + 1 mod kMaxIds:
// one token, toks[0]). The model applies kvc_append's rules entry after entry: every entry's
// arguments are checked first (a bad one: its status, nothing changed), then the entries run in
// order until one is refused; the library must report that status, the entries done and each
// appended entry's new blocks, and write nothing for the others.
void op_append_batch(Session &s, uint64_t id, const std::vector<int32_t> &toks, int64_t nt, int64_t nl, bool null_tokens,
                     bool two) {
    const int32_t n = two ? 2 : 1;
    const uint64_t ids[2] = {id, (id + 1) % kMaxIds};
    const int64_t counts[2] = {nt, 1}, lookahead[2] = {nl, 0};
    // CSR offsets; entry 1's token is toks[0], copied after entry 0's.
    std::vector<int32_t> flat(toks.begin(), toks.begin() + (nt > 0 ? nt : 0));
    flat.push_back(toks[0]);
    const int64_t offsets[3] = {0, nt, nt + 1};
    int32_t fresh[2] = {-7, -7}, m_fresh[2] = {-7, -7}, done = -7, m_done = -7;
    if (g_trace)
        std::fprintf(stderr, "  append_batch %d entries: seq %" PRIu64 " nt %" PRId64 " nl %" PRId64 "%s%s\n", n, id, nt, nl,
                     two ? " + 1 token to the next id" : "", null_tokens ? " NULL tokens" : "");
    const kvc_status st = kvc_append_batch(s.pool, n, ids, offsets, null_tokens ? nullptr : flat.data(), 0, lookahead,
                                           fresh, &done);
    // The model: arguments of every entry first, then the entries in order.
    kvc_status want = KVC_OK;
    int32_t want_done = 0;
    int32_t want_fresh[2] = {-7, -7};
    for (int32_t e = 0; e < n && want == KVC_OK; ++e) {
        const int64_t c = counts[e], l = lookahead[e];
        if (c < 0 || l < 0 || (c == 0 && l == 0)) want = KVC_ERR_INVALID_ARG;
        else if (null_tokens && c > 0 && s.m.caching) want = KVC_ERR_NULL_ARG;
    }
    std::vector<std::pair<uint64_t, int64_t>> written;  // (id, first position) of each appended entry
    for (int32_t e = 0; e < n && want == KVC_OK; ++e) {
        auto at = s.m.seqs.find(ids[e]);
        const int64_t before = at == s.m.seqs.end() ? 0 : at->second.num_tokens;
        const std::vector<int32_t> entry(flat.begin() + offsets[e], flat.begin() + offsets[e + 1]);
        const model::Result r = s.m.append(ids[e], null_tokens ? nullptr : &entry, counts[e], lookahead[e]);
        if (r.status != KVC_OK) {
            want = r.status;
            break;
        }
        want_fresh[e] = int32_t(r.value);
        written.push_back({ids[e], before});
        ++want_done;
    }
    EXPECT_EQ("kvc_append_batch status", st, want);
    EXPECT_EQ("kvc_append_batch entries done", done, want_done);
    for (int32_t e = 0; e < n; ++e) EXPECT_EQ("kvc_append_batch new blocks", fresh[e], want_fresh[e]);
    MIRROR_EQ("kvc_append_batch status", st,
              kvc_append_batch(s.mr.pool, n, ids, offsets, null_tokens ? nullptr : flat.data(), 0, lookahead, m_fresh, &m_done));
    MIRROR_EQ("kvc_append_batch entries done", done, m_done);
    for (int32_t e = 0; e < n; ++e) MIRROR_EQ("kvc_append_batch new blocks", fresh[e], m_fresh[e]);
    for (int32_t e = 0; e < int32_t(written.size()); ++e) write_kv(s, written[size_t(e)].first, written[size_t(e)].second, counts[e]);
    g_append_batches += 1;
    g_append_batch_partial += want != KVC_OK && want_done > 0;
}

void op_append(Input &in, Session &s) {
    uint64_t id = uint64_t(in.below(kMaxIds));
    int64_t nt = in.below(2 * s.m.bs + 2), nl = in.below(4) == 0 ? in.below(2 * s.m.bs + 1) : 0;
    if (in.below(32) == 0) nt = -1;
    if (in.below(32) == 0) nl = -2;
    std::vector<int32_t> toks(size_t(nt > 0 ? nt : 0) + 1);
    for (auto &t : toks) t = int32_t(in.below(s.alphabet + 1));
    // Sometimes continue a template, so that decode-filled blocks match cached prompts.
    auto it = s.m.seqs.find(id);
    if (in.below(2) && it != s.m.seqs.end())
        for (int64_t i = 0; i < nt; ++i) toks[size_t(i)] = template_token(0, it->second.num_tokens + i, s.alphabet);
    bool null_tokens = in.below(16) == 0 || (!s.m.caching && in.below(2));
    // Every third append goes through kvc_append_batch (chosen by the op's index, so inputs decode
    // as before): the drawn entry, and every other time a second entry appending one token to the
    // next id (which may not exist: the stop rule).
    if (g_op % 3 == 2) {
        op_append_batch(s, id, toks, nt, nl, null_tokens, g_op % 6 == 5);
        return;
    }
    int32_t fresh = -7;
    const int64_t before = it == s.m.seqs.end() ? 0 : it->second.num_tokens;
    kvc_status st = kvc_append(s.pool, id, null_tokens ? nullptr : toks.data(), nt, nl, &fresh);
    model::Result r = s.m.append(id, null_tokens ? nullptr : &toks, nt, nl);
    EXPECT_EQ("kvc_append status", st, r.status);
    if (st == KVC_OK) EXPECT_EQ("kvc_append new blocks", fresh, r.value);
    int32_t m_fresh = -7;
    MIRROR_EQ("kvc_append status", st, kvc_append(s.mr.pool, id, null_tokens ? nullptr : toks.data(), nt, nl, &m_fresh));
    MIRROR_EQ("kvc_append new blocks", fresh, m_fresh);
    if (st == KVC_OK) write_kv(s, id, before, nt);  // none for a lookahead-only append: its pairs wait
    else EXPECT_EQ("kvc_append wrote its out-param on failure", fresh, -7);
}

void op_fork(Input &in, Session &s) {
    uint64_t parent = uint64_t(in.below(kMaxIds)), child = uint64_t(in.below(kMaxIds));
    const kvc_status st = kvc_fork(s.pool, parent, child);
    EXPECT_EQ("kvc_fork status", st, s.m.fork(parent, child));
    MIRROR_EQ("kvc_fork status", st, kvc_fork(s.mr.pool, parent, child));
}

void op_free(Input &in, Session &s) {
    uint64_t id = uint64_t(in.below(kMaxIds));
    remember_seq(s, id);
    const kvc_status st = kvc_free(s.pool, id);
    EXPECT_EQ("kvc_free status", st, s.m.free_seq(id));
    MIRROR_EQ("kvc_free status", st, kvc_free(s.mr.pool, id));
}

// kvc_abort: a request cancelled before its forward pass (kvc.h): the blocks it filled past its
// prompt's cache hit that only it holds leave the cache (REMOVED events), then it is freed.
void op_abort(Input &in, Session &s) {
    uint64_t id = uint64_t(in.below(kMaxIds));
    remember_seq(s, id);
    const kvc_status st = kvc_abort(s.pool, id);
    const model::Result r = s.m.abort_seq(id);
    EXPECT_EQ("kvc_abort status", st, r.status);
    MIRROR_EQ("kvc_abort status", st, kvc_abort(s.mr.pool, id));
    if (st != KVC_OK) return;
    ++g_aborts;
    g_abort_uncached += uint64_t(r.value);
}

// kvc_tier_flush: KVC_ERR_STATE without a disk tier; with one, every cached block above the disk
// is written down in rounds (model::Pool::flush). Byte v: v / 2 % 8 == 7 injects a write fault (ENOSPC
// or EIO, the first 1-3 writes fail), armed identically for the mirror's call; bit 7 passes a NULL
// out-param.
void op_flush(uint8_t v, Session &s) {
    DiskFault fault;
    if ((v >> 1) % 8 == 7 && s.m.disk) {
        fault.kind = (v >> 4) & 1 ? KVCT_FAULT_WRITE_EIO : KVCT_FAULT_WRITE_ENOSPC;
        fault.count = 1 + (v >> 5) % 3;
    }
    const bool null_out = (v >> 7) & 1;
    int64_t queued = -7, m_queued = -7;
    fault.arm();
    const kvc_status st = kvc_tier_flush(s.pool, null_out ? nullptr : &queued);
    DiskFault::disarm();
    fault.arm_model(s.m);
    const int64_t rounds_before = s.m.flush_rounds;
    const model::Result r = s.m.flush();
    EXPECT_EQ("kvc_tier_flush status", st, r.status);
    if (st == KVC_OK && !null_out) EXPECT_EQ("kvc_tier_flush queued blocks", queued, r.value);
    else EXPECT_EQ("kvc_tier_flush wrote its out-param", queued, -7);
    fault.arm();
    MIRROR_EQ("kvc_tier_flush status", st, kvc_tier_flush(s.mr.pool, null_out ? nullptr : &m_queued));
    DiskFault::disarm();
    MIRROR_EQ("kvc_tier_flush queued blocks", queued, m_queued);
    if (st != KVC_OK) return;
    ++g_flushes;
    g_flush_queued += uint64_t(r.value);
    g_flush_rounds += uint64_t(s.m.flush_rounds - rounds_before);
    g_flush_faults += fault.count > 0;
}

// Rolls a sequence back (speculative decoding): mostly a few tokens, sometimes into earlier blocks,
// now and then an invalid count.
void op_truncate(Input &in, Session &s) {
    uint64_t id = uint64_t(in.below(kMaxIds));
    auto it = s.m.seqs.find(id);
    const int64_t have = it == s.m.seqs.end() ? 4 : it->second.num_tokens;
    int64_t n = in.below(2) ? have - in.below(s.m.bs + 2) : 1 + in.below(have + 1);
    if (in.below(16) == 0) n = in.below(2) ? 0 : have + 1;
    int32_t freed = -7;
    kvc_status st = kvc_truncate(s.pool, id, n, &freed);
    model::Result r = s.m.truncate(id, n);
    EXPECT_EQ("kvc_truncate status", st, r.status);
    if (st == KVC_OK) EXPECT_EQ("kvc_truncate freed blocks", freed, r.value);
    else EXPECT_EQ("kvc_truncate wrote its out-param on failure", freed, -7);
    int32_t m_freed = -7;
    MIRROR_EQ("kvc_truncate status", st, kvc_truncate(s.mr.pool, id, n, &m_freed));
    MIRROR_EQ("kvc_truncate freed blocks", freed, m_freed);
}

void op_lookup(Input &in, Session &s) {
    int64_t n;
    bool null_keys;
    model::Keys k;
    std::vector<int32_t> toks = read_query(in, s, &n, &k, &null_keys);
    int64_t cached = -7;
    kvc_status st = kvc_prefix_lookup(s.pool, toks.data(), n, null_keys ? nullptr : s.keys, &cached);
    model::Result r = s.m.lookup(&toks, n, k);
    EXPECT_EQ("kvc_prefix_lookup status", st, r.status);
    EXPECT_EQ("kvc_prefix_lookup cached tokens", cached, r.value);
    int64_t m_cached = -7;
    MIRROR_EQ("kvc_prefix_lookup status", st, kvc_prefix_lookup(s.mr.pool, toks.data(), n, null_keys ? nullptr : s.keys, &m_cached));
    MIRROR_EQ("kvc_prefix_lookup cached tokens", cached, m_cached);
}

void op_pin(Input &in, Session &s, bool pin) {
    int64_t n;
    bool null_keys;
    model::Keys k;
    std::vector<int32_t> toks = read_query(in, s, &n, &k, &null_keys);
    if (in.below(32) == 0) n = 0;
    int64_t got = -7;
    kvc_status st = pin ? kvc_prefix_pin(s.pool, toks.data(), n, null_keys ? nullptr : s.keys, &got)
                        : kvc_prefix_unpin(s.pool, toks.data(), n, null_keys ? nullptr : s.keys, &got);
    model::Result r = pin ? s.m.pin(&toks, n, k) : s.m.unpin(&toks, n, k);
    EXPECT_EQ(pin ? "kvc_prefix_pin status" : "kvc_prefix_unpin status", st, r.status);
    if (st == KVC_OK) EXPECT_EQ(pin ? "pinned tokens" : "unpinned tokens", got, r.value);
    int64_t m_got = -7;
    const kvc_status m_st = pin ? kvc_prefix_pin(s.mr.pool, toks.data(), n, null_keys ? nullptr : s.keys, &m_got)
                                : kvc_prefix_unpin(s.mr.pool, toks.data(), n, null_keys ? nullptr : s.keys, &m_got);
    MIRROR_EQ(pin ? "kvc_prefix_pin status" : "kvc_prefix_unpin status", st, m_st);
    MIRROR_EQ(pin ? "pinned tokens" : "unpinned tokens", got, m_got);
}

// kvc_pool_set_sliding_window (only while the pool has no sequences) and its getter.
// Half the time the pool is drained first (every sequence freed, lowest id first), as an engine
// would before reconfiguring: otherwise a window could only be set on a pool that happens to be
// empty, and windowed runs would be rare.
void op_window(Input &in, Session &s) {
    const int32_t w = int32_t(in.below(12)) - (in.below(16) == 0 ? 12 : 0);
    if (in.below(2)) {
        std::vector<uint64_t> ids;
        for (const auto &kv : s.m.seqs) ids.push_back(kv.first);
        for (uint64_t id : ids) {
            remember_seq(s, id);
            const kvc_status st = kvc_free(s.pool, id);
            EXPECT_EQ("kvc_free status (draining for set_window)", st, s.m.free_seq(id));
            MIRROR_EQ("kvc_free status (draining for set_window)", st, kvc_free(s.mr.pool, id));
        }
    }
    const kvc_status st = kvc_pool_set_sliding_window(s.pool, w);
    EXPECT_EQ("kvc_pool_set_sliding_window status", st, s.m.set_window(w));
    MIRROR_EQ("kvc_pool_set_sliding_window status", st, kvc_pool_set_sliding_window(s.mr.pool, w));
    int32_t got = -7, m_got = -7;
    EXPECT_EQ("kvc_pool_get_sliding_window status", kvc_pool_get_sliding_window(s.pool, &got), KVC_OK);
    EXPECT_EQ("kvc_pool_get_sliding_window", got, s.m.window);
    MIRROR_EQ("kvc_pool_get_sliding_window status", KVC_OK, kvc_pool_get_sliding_window(s.mr.pool, &m_got));
    MIRROR_EQ("kvc_pool_get_sliding_window", got, m_got);
}

// An unrelated request passes through: a prompt of tokens no other prompt uses, on a free id, taking
// up to the whole pool, then freed at once. Its fresh blocks come from the free lists' fronts, so it
// evicts the oldest cached blocks first: with a window, the leading blocks sequences released,
// leaving their later blocks cached (what window-aware hits then find).
void op_other_traffic(Input &in, Session &s) {
    const int64_t nb = 1 + in.below(s.m.num_blocks);
    uint64_t id = 0;
    while (id < kMaxIds && s.m.seqs.count(id)) ++id;
    if (id == kMaxIds) return;
    const int64_t n = nb * s.m.bs;
    std::vector<int32_t> toks(static_cast<size_t>(n));
    for (auto &t : toks) t = 1000 + int32_t(s.other_tokens++ % 1000000);
    bool null_keys;
    model::Keys k = read_keys(in, s, &null_keys);
    int64_t cached = -7;
    kvc_status st = kvc_alloc(s.pool, id, toks.data(), n, null_keys ? nullptr : s.keys, &cached);
    model::Result r = s.m.alloc(id, &toks, n, k);
    s.m.finish_call();  // its host-tier copies complete with the call (it may run inside another op)
    EXPECT_EQ("kvc_alloc status (other traffic)", st, r.status);
    int64_t m_cached = -7;
    MIRROR_EQ("kvc_alloc status (other traffic)", st, kvc_alloc(s.mr.pool, id, toks.data(), n, null_keys ? nullptr : s.keys, &m_cached));
    MIRROR_EQ("kvc_alloc cached tokens (other traffic)", cached, m_cached);
    if (st != KVC_OK) return;
    EXPECT_EQ("kvc_alloc cached tokens (other traffic)", cached, 0);
    write_kv(s, id, 0, n);  // its forward pass ran: what it leaves in the cache is real KV
    st = kvc_free(s.pool, id);
    EXPECT_EQ("kvc_free status (other traffic)", st, s.m.free_seq(id));
    MIRROR_EQ("kvc_free status (other traffic)", st, kvc_free(s.mr.pool, id));
}

// kvc_prefix_cache_reset. With a persistent disk tier (only then: the bytes of the other inputs
// decode as before) a byte may make the first 1-3 erasures of the disk's headers fail (an injected
// header-write fault, armed identically for the mirror's call), leaving those blocks in the file.
void op_reset(Input &in, Session &s) {
    int32_t header_faults = 0;
    if (s.persistent) {
        const uint8_t v = in.byte();
        if (v % 4 == 3) header_faults = 1 + (v >> 2) % 3;
    }
    kvct_disk_fault(KVCT_FAULT_HEADER_WRITE_EIO, header_faults);
    const kvc_status st = kvc_prefix_cache_reset(s.pool);
    DiskFault::disarm();
    EXPECT_EQ("kvc_prefix_cache_reset status", st, s.m.cache_reset(header_faults));
    kvct_disk_fault(KVCT_FAULT_HEADER_WRITE_EIO, header_faults);
    MIRROR_EQ("kvc_prefix_cache_reset status", st, kvc_prefix_cache_reset(s.mr.pool));
    DiskFault::disarm();
}

void op_take_pending(Input &in, Session &s) {
    if (s.cpu) {  // KV bytes are checked in these pools: the pool copies the pairs itself
        copy_pending_now(s);
        return;
    }
    int64_t cap = in.below(5) - (in.below(32) == 0 ? 3 : 0);
    int32_t src[8], dst[8];
    int64_t count = -7;
    kvc_status st = kvc_take_pending_copies(s.pool, cap > 0 ? src : nullptr, cap > 0 ? dst : nullptr, cap, &count);
    std::vector<std::pair<int32_t, int32_t>> want;
    model::Result r = s.m.take_pending(cap, &want);
    EXPECT_EQ("kvc_take_pending_copies status", st, r.status);
    int32_t m_src[8], m_dst[8];
    int64_t m_count = -7;
    MIRROR_EQ("kvc_take_pending_copies status", st, kvc_take_pending_copies(s.mr.pool, cap > 0 ? m_src : nullptr,
                                                                             cap > 0 ? m_dst : nullptr, cap, &m_count));
    MIRROR_EQ("pending pairs taken", count, m_count);
    for (int64_t i = 0; st == KVC_OK && i < count && i < cap; ++i) {
        MIRROR_EQ("pending src", src[i], m_src[i]);
        MIRROR_EQ("pending dst", dst[i], m_dst[i]);
    }
    if (st != KVC_OK) return;
    EXPECT_EQ("pending pairs taken", count, r.value);
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ("pending src", src[i], want[i].first);
        EXPECT_EQ("pending dst", dst[i], want[i].second);
    }
}

void check_event_hash(Session &s, const model::Event &e, const kvc_event &got) {
    auto h = std::make_pair(got.hash_hi, got.hash_lo);
    auto known = s.hash_of.find(e.id);
    if (known != s.hash_of.end() && known->second != h) diverge("one block identity got two different hashes");
    auto other = s.id_of.find(h);
    if (other != s.id_of.end() && !(other->second == e.id)) diverge("two block identities share a hash");
    s.hash_of[e.id] = h;
    s.id_of[h] = e.id;
    // The parent hash is the previous block's hash (or the fixed root seed for block 0).
    if (e.depth == 0) {
        if (got.parent_hash_hi != 0x78666572702d6376ull || got.parent_hash_lo != 0x31762d6b696c6269ull)
            diverge("first block's parent hash is not the root seed");
    } else {
        model::Identity parent = e.id;
        parent.tokens.resize(size_t(e.depth) * size_t(s.m.bs));
        std::vector<model::MmItem> mm;
        for (const auto &m : parent.mm)
            if (m.offset < e.depth * s.m.bs) mm.push_back(m);
        parent.mm = mm;
        auto p = s.hash_of.find(parent);
        if (p != s.hash_of.end() && p->second != std::make_pair(got.parent_hash_hi, got.parent_hash_lo))
            diverge("block's parent hash differs from the previous block's hash");
    }
    EXPECT_EQ("event lora_id", got.lora_id, e.id.lora);
}

void op_event_pop(Input &in, Session &s) {
    int64_t cap = in.below(2) ? s.m.bs : in.below(s.m.bs + 1);
    std::vector<int32_t> toks(size_t(s.m.bs) + 1, -9);
    kvc_event ev;
    std::memset(&ev, 0, sizeof ev);
    ev.struct_size = sizeof ev;
    int32_t has = -7;
    kvc_status st = kvc_event_pop(s.pool, &ev, toks.data(), cap, &has);
    {  // the mirror's event: equal in every field, hashes and block id included
        std::vector<int32_t> m_toks(toks.size(), -9);
        kvc_event m_ev;
        std::memset(&m_ev, 0, sizeof m_ev);
        m_ev.struct_size = sizeof m_ev;
        int32_t m_has = -7;
        MIRROR_EQ("kvc_event_pop status", st, kvc_event_pop(s.mr.pool, &m_ev, m_toks.data(), cap, &m_has));
        MIRROR_EQ("kvc_event_pop has_event", has, m_has);
        mirror::compare_event(ev, m_ev, toks.data(), m_toks.data(), int64_t(toks.size()));
    }
    if (s.m.events.empty()) {
        EXPECT_EQ("kvc_event_pop status (none pending)", st, KVC_OK);
        EXPECT_EQ("kvc_event_pop has_event", has, 0);
        return;
    }
    const model::Event &e = s.m.events.front();
    if (e.type == KVC_EVENT_BLOCK_STORED && cap < s.m.bs) {
        EXPECT_EQ("kvc_event_pop status (small buffer)", st, KVC_ERR_BUFFER_TOO_SMALL);
        return;
    }
    EXPECT_EQ("kvc_event_pop status", st, KVC_OK);
    EXPECT_EQ("kvc_event_pop has_event", has, 1);
    EXPECT_EQ("event type", ev.type, e.type);
    EXPECT_EQ("event block", ev.block_id, e.block);
    EXPECT_EQ("event sequence number", ev.sequence_number, e.seqno);
    if (e.type == KVC_EVENT_BLOCK_STORED) {
        EXPECT_EQ("event num_tokens", ev.num_tokens, s.m.bs);
        for (int32_t i = 0; i < s.m.bs; ++i) EXPECT_EQ("event token", toks[size_t(i)], e.tokens[size_t(i)]);
        check_event_hash(s, e, ev);
    }
    s.m.events.pop_front();
}

void op_read(Input &in, Session &s) {
    uint64_t id = uint64_t(in.below(kMaxIds));
    auto it = s.m.seqs.find(id);
    // Block table into a buffer that may be too small.
    int64_t cap = in.below(6), len = -7;
    int32_t table[8];
    kvc_status st = kvc_seq_block_table(s.pool, id, cap ? table : nullptr, cap, &len);
    if (it == s.m.seqs.end()) {
        EXPECT_EQ("kvc_seq_block_table status (dead id)", st, KVC_ERR_UNKNOWN_SEQ);
    } else {
        int64_t n = int64_t(it->second.table.size());
        EXPECT_EQ("kvc_seq_block_table status", st, cap == 0 || cap >= n ? KVC_OK : KVC_ERR_BUFFER_TOO_SMALL);
        EXPECT_EQ("kvc_seq_block_table length", len, n);
    }
    int32_t m_table[8];
    int64_t m_len = -7;
    MIRROR_EQ("kvc_seq_block_table status", st, kvc_seq_block_table(s.mr.pool, id, cap ? m_table : nullptr, cap, &m_len));
    MIRROR_EQ("kvc_seq_block_table length", len, m_len);
    for (int64_t i = 0; st == KVC_OK && i < len && i < cap; ++i) MIRROR_EQ("kvc_seq_block_table entry", table[i], m_table[i]);
    // Slot mapping of a range that may run past the reserved slots.
    int64_t first = in.below(24), count = in.below(12);
    int64_t slots[16];
    int64_t slot_cap = in.below(8) == 0 ? count - 1 : 16;
    st = kvc_seq_slot_mapping(s.pool, id, first, count, slots, slot_cap);
    kvc_status want = KVC_OK;
    if (slot_cap < 0) want = KVC_ERR_INVALID_ARG;
    else if (it == s.m.seqs.end()) want = KVC_ERR_UNKNOWN_SEQ;
    else if (it->second.swapped) want = KVC_ERR_STATE;
    else if (first > it->second.reserved || count > it->second.reserved - first) want = KVC_ERR_INVALID_ARG;
    else if (count > 0 && first < it->second.released * s.m.bs) want = KVC_ERR_INVALID_ARG;
    else if (slot_cap < count) want = KVC_ERR_BUFFER_TOO_SMALL;
    EXPECT_EQ("kvc_seq_slot_mapping status", st, want);
    if (st == KVC_OK)
        for (int64_t i = 0; i < count; ++i) {
            int64_t p = first + i;
            EXPECT_EQ("slot", slots[i], int64_t(it->second.table[size_t(p / s.m.bs)]) * s.m.bs + p % s.m.bs);
        }
    int64_t m_slots[16];
    MIRROR_EQ("kvc_seq_slot_mapping status", st, kvc_seq_slot_mapping(s.mr.pool, id, first, count, m_slots, slot_cap));
    for (int64_t i = 0; st == KVC_OK && i < count; ++i) MIRROR_EQ("slot", slots[i], m_slots[i]);
}

// The mirror's batch (built with the same ids and query lengths) holds the fuzzed pool's block
// tables, slot mapping and sizes. Not compared: the array addresses and rows_uploaded (how much of
// it a device upload re-sent: a storage detail).
MIRROR_NO_COVERAGE void compare_mirror_batch(Session &s) {
    int32_t tables[2][3 * 6];
    int64_t slots[2][24];
    std::memset(tables, 0xab, sizeof tables);
    std::memset(slots, 0xab, sizeof slots);
    MIRROR_EQ("kvc_batch_copy_block_tables status", kvc_batch_copy_block_tables(s.batch, tables[0], 3 * 6),
              kvc_batch_copy_block_tables(s.mr.batch, tables[1], 3 * 6));
    MIRROR_EQ("kvc_batch_copy_slot_mapping status", kvc_batch_copy_slot_mapping(s.batch, slots[0], 24),
              kvc_batch_copy_slot_mapping(s.mr.batch, slots[1], 24));
    for (int i = 0; i < 3 * 6; ++i) MIRROR_EQ("batch table entry", tables[0][i], tables[1][i]);
    for (int i = 0; i < 24; ++i) MIRROR_EQ("batch slot", slots[0][i], slots[1][i]);
    kvc_batch_info a, b;
    std::memset(&a, 0, sizeof a);
    std::memset(&b, 0, sizeof b);
    a.struct_size = b.struct_size = sizeof a;
    const kvc_status st = kvc_batch_get_info(s.batch, &a);
    MIRROR_EQ("kvc_batch_get_info status", st, kvc_batch_get_info(s.mr.batch, &b));
    if (st != KVC_OK) return;
    MIRROR_EQ("batch num_seqs", a.num_seqs, b.num_seqs);
    MIRROR_EQ("batch num_tokens", a.num_tokens, b.num_tokens);
    MIRROR_EQ("batch max_blocks_per_seq", a.max_blocks_per_seq, b.max_blocks_per_seq);
    MIRROR_EQ("batch max_q_len", a.max_q_len, b.max_q_len);
    MIRROR_EQ("batch max_seq_len", a.max_seq_len, b.max_seq_len);
    MIRROR_EQ("batch num_indices", a.num_indices, b.num_indices);
    MIRROR_EQ("batch is_decode", a.is_decode, b.is_decode);
}

// Builds the batch (metadata-only pool: host arrays) over up to 3 ids and compares what it holds.
void op_batch(Input &in, Session &s) {
    int32_t n = int32_t(in.below(s.batch_max_seqs + 1));  // 0 is invalid
    uint64_t ids[4];
    int64_t q[4];
    for (int32_t i = 0; i < n; ++i) {
        ids[i] = uint64_t(in.below(kMaxIds));
        q[i] = 1 + in.below(8);
    }
    kvc_status st = kvc_batch_build(s.batch, ids, q, n);
    MIRROR_EQ("kvc_batch_build status", st, kvc_batch_build(s.mr.batch, ids, q, n));
    compare_mirror_batch(s);
    // The model's verdict, in the library's documented order.
    kvc_status want = KVC_OK;
    int64_t total = 0;
    if (n < 1 || n > s.batch_max_seqs) want = KVC_ERR_INVALID_ARG;
    for (int32_t i = 0; i < n && want == KVC_OK; ++i) total += q[i];
    if (want == KVC_OK && total > s.batch_max_tokens) want = KVC_ERR_BUFFER_TOO_SMALL;
    for (int32_t i = 0; i < n && want == KVC_OK; ++i)
        for (int32_t j = 0; j < i; ++j)
            if (ids[i] == ids[j]) want = KVC_ERR_INVALID_ARG;
    std::vector<int32_t> tables;
    std::vector<int64_t> slots;
    for (int32_t i = 0; i < n && want == KVC_OK; ++i) {
        auto it = s.m.seqs.find(ids[i]);
        if (it == s.m.seqs.end()) { want = KVC_ERR_UNKNOWN_SEQ; break; }
        const model::Seq &sq = it->second;
        if (sq.swapped) { want = KVC_ERR_STATE; break; }
        if (q[i] > sq.num_tokens) { want = KVC_ERR_INVALID_ARG; break; }
        int64_t nb = model::Pool::blocks_for(sq.num_tokens, s.m.bs);
        if (nb > s.batch_width) { want = KVC_ERR_BUFFER_TOO_SMALL; break; }
        if (sq.num_tokens - q[i] < sq.released * s.m.bs) { want = KVC_ERR_INVALID_ARG; break; }
        for (int32_t c = 0; c < s.batch_width; ++c) tables.push_back(c < nb ? sq.table[size_t(c)] : -1);
        for (int64_t p = sq.num_tokens - q[i]; p < sq.num_tokens; ++p)
            slots.push_back(int64_t(sq.table[size_t(p / s.m.bs)]) * s.m.bs + p % s.m.bs);
    }
    EXPECT_EQ("kvc_batch_build status", st, want);
    if (st == KVC_OK) {
        s.batch_built = true;
        s.batch_tables = tables;
        s.batch_slots = slots;
    }
    // A failed build keeps the previous one.
    int32_t got_tables[3 * 6];
    int64_t got_slots[24];
    kvc_status t = kvc_batch_copy_block_tables(s.batch, got_tables, 3 * 6);
    kvc_status u = kvc_batch_copy_slot_mapping(s.batch, got_slots, 24);
    if (!s.batch_built) {
        EXPECT_EQ("kvc_batch_copy_block_tables status (never built)", t, KVC_ERR_STATE);
        EXPECT_EQ("kvc_batch_copy_slot_mapping status (never built)", u, KVC_ERR_STATE);
        return;
    }
    EXPECT_EQ("kvc_batch_copy_block_tables status", t, KVC_OK);
    EXPECT_EQ("kvc_batch_copy_slot_mapping status", u, KVC_OK);
    for (size_t i = 0; i < s.batch_tables.size(); ++i) EXPECT_EQ("batch table entry", got_tables[i], s.batch_tables[i]);
    for (size_t i = 0; i < s.batch_slots.size(); ++i) EXPECT_EQ("batch slot", got_slots[i], s.batch_slots[i]);
}

// ---- memory tiers (CPU pools with a host tier) -----------------------------------------------

void op_swap(Input &in, Session &s) {
    uint64_t id = uint64_t(in.below(kMaxIds));
    uint64_t op = 0, m_op = 0;
    switch (in.below(4)) {
        case 0:
        case 1: {
            g_opname = "swap_out";
            kvc_status st = kvc_swap_out(s.pool, id, &op);
            EXPECT_EQ("kvc_swap_out status", st, s.m.swap_out(id));
            MIRROR_EQ("kvc_swap_out status", st, kvc_swap_out(s.mr.pool, id, &m_op));
            MIRROR_EQ("kvc_swap_out op id", op, m_op);
            g_swaps += st == KVC_OK;
            if (st == KVC_OK) {
                int32_t done = -1, m_done = -1;
                EXPECT_EQ("kvc_op_query status", kvc_op_query(s.pool, op, &done), KVC_OK);
                EXPECT_EQ("kvc_op_query done (CPU: complete on return)", done, 1);
                // kvc_op_query's answer (copy progress) is outside the contract: only its status.
                MIRROR_EQ("kvc_op_query status", KVC_OK, kvc_op_query(s.mr.pool, m_op, &m_done));
                EXPECT_EQ("kvc_op_wait status", kvc_op_wait(s.pool, op), KVC_OK);
                MIRROR_EQ("kvc_op_wait status", KVC_OK, kvc_op_wait(s.mr.pool, m_op));
            }
            break;
        }
        case 2: {
            g_opname = "swap_in";
            kvc_status st = kvc_swap_in(s.pool, id, &op);
            EXPECT_EQ("kvc_swap_in status", st, s.m.swap_in(id));
            MIRROR_EQ("kvc_swap_in status", st, kvc_swap_in(s.mr.pool, id, &m_op));
            MIRROR_EQ("kvc_swap_in op id", op, m_op);
            g_swaps += st == KVC_OK;
            if (st == KVC_OK) {
                EXPECT_EQ("kvc_op_wait status", kvc_op_wait(s.pool, op), KVC_OK);
                MIRROR_EQ("kvc_op_wait status", KVC_OK, kvc_op_wait(s.mr.pool, m_op));
            }
            break;
        }
        default: {
            g_opname = "preemption_cost";
            int64_t bytes = -7, tokens = -7, m_bytes = -7, m_tokens = -7;
            kvc_status st = kvc_preemption_cost(s.pool, id, &bytes, &tokens);
            model::Result r = s.m.swap_cost(id);
            EXPECT_EQ("kvc_preemption_cost status", st, r.status);
            // Swap bytes scale with the shard (outside the contract): each pool's own block_stride.
            MIRROR_EQ("kvc_preemption_cost status", st, kvc_preemption_cost(s.mr.pool, id, &m_bytes, &m_tokens));
            MIRROR_EQ("kvc_preemption_cost recompute tokens", tokens, m_tokens);
            if (st != KVC_OK) break;
            EXPECT_EQ("kvc_preemption_cost swap bytes", bytes, r.value * s.block_bytes);
            EXPECT_EQ("kvc_preemption_cost recompute tokens", tokens, s.m.seqs[id].num_tokens);
            EXPECT_EQ("mirror's kvc_preemption_cost swap bytes (its block_stride)", m_bytes, r.value * s.mr.block_bytes);
            break;
        }
    }
}

void op_tier_misc(Input &in, Session &s) {
    switch (in.below(3)) {
        case 0: {  // preempt by recomputation = free + report
            g_opname = "preempt_recompute";
            uint64_t id = uint64_t(in.below(kMaxIds));
            auto it = s.m.seqs.find(id);
            int64_t want_tokens = it == s.m.seqs.end() ? -7 : it->second.num_tokens;
            int64_t tokens = -7, m_tokens = -7;
            remember_seq(s, id);
            kvc_status st = kvc_preempt_recompute(s.pool, id, &tokens);
            EXPECT_EQ("kvc_preempt_recompute status", st, s.m.free_seq(id));
            EXPECT_EQ("kvc_preempt_recompute tokens", tokens, want_tokens);
            MIRROR_EQ("kvc_preempt_recompute status", st, kvc_preempt_recompute(s.mr.pool, id, &m_tokens));
            MIRROR_EQ("kvc_preempt_recompute tokens", tokens, m_tokens);
            break;
        }
        case 1: {
            g_opname = "lookup_tiers";
            int64_t n;
            bool null_keys;
            model::Keys k;
            std::vector<int32_t> toks = read_query(in, s, &n, &k, &null_keys);
            int64_t dev = -7, host = -7, disk = -7, m_dev = -7, m_host = -7, m_disk = -7;
            kvc_status st = kvc_prefix_lookup_tiers(s.pool, toks.data(), n, null_keys ? nullptr : s.keys, &dev, &host, &disk);
            EXPECT_EQ("kvc_prefix_lookup_tiers status", st, KVC_OK);
            auto want = s.m.lookup_tiers(toks, n, k);
            EXPECT_EQ("lookup_tiers device tokens", dev, std::get<0>(want) * s.m.bs);
            EXPECT_EQ("lookup_tiers host tokens", host, std::get<1>(want) * s.m.bs);
            EXPECT_EQ("lookup_tiers disk tokens", disk, std::get<2>(want) * s.m.bs);
            g_disk_lookup_hits += std::get<2>(want) > 0;
            MIRROR_EQ("kvc_prefix_lookup_tiers status", st, kvc_prefix_lookup_tiers(s.mr.pool, toks.data(), n,
                      null_keys ? nullptr : s.keys, &m_dev, &m_host, &m_disk));
            MIRROR_EQ("lookup_tiers device tokens", dev, m_dev);
            MIRROR_EQ("lookup_tiers host tokens", host, m_host);
            MIRROR_EQ("lookup_tiers disk tokens", disk, m_disk);
            break;
        }
        default: {  // the pool copies its pending copy-on-write pairs itself
            g_opname = "copy_pending";
            int64_t copied = -7;
            kvc_status st = kvc_copy_pending(s.pool, nullptr, &copied);
            if (!s.cpu) {
                EXPECT_EQ("kvc_copy_pending status (metadata-only)", st, KVC_ERR_STATE);
                // Refused on the metadata-only pool, which changed nothing: a metadata-only mirror is
                // refused too; a storage mirror does not make this storage call (it would copy).
                if (!s.mr.storage) {
                    int64_t m_copied = -7;
                    MIRROR_EQ("kvc_copy_pending status (metadata-only)", st, kvc_copy_pending(s.mr.pool, nullptr, &m_copied));
                    MIRROR_EQ("kvc_copy_pending pairs (metadata-only)", copied, m_copied);
                }
                break;
            }
            EXPECT_EQ("kvc_copy_pending status", st, KVC_OK);
            EXPECT_EQ("kvc_copy_pending pairs", copied, s.m.pending.size());
            mirror_copy_pending(s, copied);
            s.m.drain_all();
            break;
        }
    }
}

// The model's state after an operation (KVC_FUZZ_TRACE=1 when replaying one input): its sequences
// and free lists (LRU entries with their block's depth in its prompt).
void trace_state(Session &s) {
    const model::Pool &m = s.m;
    std::fprintf(stderr, "#%d %s (bs %d, blocks %d, window %d, host slots %zu, disk slots %zu)\n", g_op, g_opname, m.bs,
                 m.num_blocks, m.window, m.hslots.size(), m.dslots.size());
    for (const auto &kv : m.seqs) {
        std::fprintf(stderr, "  seq %" PRIu64 ": %" PRId64 " tokens, released %" PRId64 ", hit %" PRId64 ", table",
                     kv.first, kv.second.num_tokens, kv.second.released, kv.second.hit_blocks);
        for (int32_t b : kv.second.table) std::fprintf(stderr, " %d", b);
        std::fprintf(stderr, "\n");
    }
    if (!m.pending.empty()) {
        std::fprintf(stderr, "  pending pairs:");
        for (const auto &pr : m.pending) std::fprintf(stderr, " %d->%d", pr.first, pr.second);
        std::fprintf(stderr, "\n");
    }
    std::fprintf(stderr, "  free: unhashed");
    for (int32_t b : m.unhashed) std::fprintf(stderr, " %d", b);
    for (size_t p = 0; p < m.lru.size(); ++p)
        if (!m.lru[p].empty()) {
            std::fprintf(stderr, " | lru[%zu]", p);
            for (int32_t b : m.lru[p]) std::fprintf(stderr, " %d(depth %zu)", b, m.blocks[size_t(b)].id.tokens.size() / size_t(m.bs) - 1);
        }
    std::fprintf(stderr, "\n");
    auto tier = [&](const char *name, const std::deque<int32_t> &free_list, const std::vector<std::deque<int32_t>> &lrus,
                    const std::vector<model::HostSlot> &slots) {
        if (slots.empty()) return;
        std::fprintf(stderr, "  %s: free", name);
        for (int32_t v : free_list) std::fprintf(stderr, " %d", v);
        for (size_t p = 0; p < lrus.size(); ++p)
            if (!lrus[p].empty()) {
                std::fprintf(stderr, " | lru[%zu]", p);
                for (int32_t v : lrus[p]) std::fprintf(stderr, " %d(depth %zu)", v, slots[size_t(v)].id.tokens.size() / size_t(m.bs) - 1);
            }
        std::fprintf(stderr, "\n");
    };
    tier("host", m.hfree, m.hlru, m.hslots);
    tier("disk", m.dfree, m.dlru, m.dslots);
    if (m.disk && s.persistent)
        std::fprintf(stderr, "  disk identity %s (class %d): recovered %" PRId64 ", foreign %" PRId64 " at its attach\n",
                     identity_name(s.identity), m.owner, m.recovered, m.foreign);
}

// ---- one input -------------------------------------------------------------------------------

// Attaches a disk tier of `slots` slots to `pool` in a file of its own: unique per process and pool
// (KVC_FUZZ_DISK_DIR, else /tmp). sync_io: pread/pwrite instead of io_uring (the I/O mode is no
// decision input, so the mirror may use the other one). Without `persistent` the file is unlinked
// as soon as it is attached (the tier keeps its descriptor), so nothing is left behind, even by a
// crash. With it (KVC_DISK_PERSISTENT) the file must outlive the pool for a restart to attach it
// again: it is removed at the input's end or before a divergence aborts (remove_disk_files), and
// an input's first attach (`fresh`) removes a file left over first.
// `identity`: an index into kIdentities (0: the old kvc_tier_attach_disk), or -1: an identity one
// byte too long (a call that must fail and leave the pool, and the file, as they were).
std::string disk_path(const char *who) {
    const char *dir = std::getenv("KVC_FUZZ_DISK_DIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/kvc-fuzz-disk-" + std::to_string(long(getpid())) + "-" + who;
}
kvc_status attach_disk(kvc_pool *pool, int32_t slots, const char *who, bool sync_io, bool persistent, bool fresh,
                       int32_t identity) {
    const std::string path = disk_path(who);
    if (persistent && fresh) {
        ::unlink(path.c_str());
        g_disk_files.push_back(path);
    }
    kvct_disk_force_sync_io(sync_io ? 1 : 0);
    const int32_t flags = persistent ? KVC_DISK_PERSISTENT : 0;
    const kvc_status st =
        identity == 0 ? kvc_tier_attach_disk(pool, path.c_str(), slots, flags)
                      : kvc_tier_attach_disk_with_identity(pool, path.c_str(), slots, flags,
                                                           identity < 0 ? too_long_identity() : identity_string(identity));
    kvct_disk_force_sync_io(0);
    if (!persistent && identity >= 0) ::unlink(path.c_str());
    return st;
}

// Creates the mirror's pool with its tiers and batch (at setup and at each restart). `fresh`: the
// input's first.
void open_mirror(Session &s, bool fresh) {
    mirror::Rank &r = s.mr;
    const char *skew = std::getenv("KVC_FUZZ_MIRROR_SKEW");
    if (kvc_pool_create(&r.cfg, &r.pool) != KVC_OK) mirror::report("kvc_pool_create of the mirror failed: %s", kvc_last_error());
    if (kvc_bytes_per_block(&r.cfg, &r.block_bytes) != KVC_OK) mirror::report("kvc_bytes_per_block of the mirror failed");
    if (r.storage) {
        r.info.struct_size = sizeof r.info;
        if (kvc_storage_get_info(r.pool, &r.info) != KVC_OK) mirror::report("kvc_storage_get_info of the mirror failed");
        if (r.info.block_stride != r.block_bytes) mirror::report("mirror block_stride %lld, kvc_bytes_per_block %lld",
                                                                 (long long)r.info.block_stride, (long long)r.block_bytes);
    }
    if (s.host_slots > 0 && kvc_tier_attach_host(r.pool, s.host_slots) != KVC_OK)
        mirror::report("kvc_tier_attach_host of the mirror failed: %s", kvc_last_error());
    // Its own disk file of the same slot count; pread/pwrite for half of the inputs.
    if (s.disk_slots > 0 &&
        attach_disk(r.pool, s.disk_slots, "mirror", (s.input_hash >> 40) & 1, s.persistent, fresh, s.identity) != KVC_OK)
        mirror::report("kvc_tier_attach_disk of the mirror failed: %s", kvc_last_error());
    if (kvc_batch_create(r.pool, s.batch_max_seqs, s.batch_max_tokens, s.batch_width, &r.batch) != KVC_OK)
        mirror::report("kvc_batch_create of the mirror failed: %s", kvc_last_error());
    if (skew && std::strcmp(skew, "alloc") == 0) {  // one sequence (id kMaxIds) on the mirror only
        const int32_t token = 0;
        if (kvc_alloc(r.pool, kMaxIds, &token, 1, nullptr, nullptr) != KVC_OK)
            mirror::report("the skewed mirror's extra kvc_alloc failed: %s", kvc_last_error());
    } else if (skew && std::strcmp(skew, "blocks") != 0) {
        std::fprintf(stderr, "KVC_FUZZ_MIRROR_SKEW=%s: unknown (blocks or alloc)\n", skew);
        std::exit(2);
    }
}

// The mirror rank (mirror.hpp): the fuzzed pool's decision inputs, its own shape, dtype and backend,
// the same host tier slots and batch capacities. KVC_FUZZ_MIRROR_SKEW makes it differ on purpose
// (the self-test that the comparison can fail).
void setup_mirror(Session &s) {
    mirror::Rank &r = s.mr;
    r.cfg = mirror::choose_config(s.cfg, s.host_slots > 0, s.input_hash);
    r.storage = r.cfg.backend == KVC_BACKEND_CPU;
    r.data = r.storage && s.cpu;
    r.value_range = r.cfg.kv_dtype == KVC_DTYPE_FP8_E4M3 ? 16 : 256;
    const char *skew = std::getenv("KVC_FUZZ_MIRROR_SKEW");
    if (skew && std::strcmp(skew, "blocks") == 0) r.cfg.num_blocks += 1;
    mirror::describe(r);
    g_mirror_desc = r.desc;
    open_mirror(s, true);
    const bool pool_cpu = s.cpu;
    (pool_cpu ? (r.storage ? g_mirror_cpu_cpu : g_mirror_cpu_none) : (r.storage ? g_mirror_none_cpu : g_mirror_none_none))++;
}

// Creates the fuzzed pool with its tiers and batch (at setup and at each restart).
void open_pool(Session &s, bool fresh) {
    if (kvc_pool_create(&s.cfg, &s.pool) != KVC_OK) diverge("kvc_pool_create failed: %s", kvc_last_error());
    if (kvc_bytes_per_block(&s.cfg, &s.block_bytes) != KVC_OK) diverge("kvc_bytes_per_block failed");
    if (s.cpu && kvo_shape_of(s.pool, &s.shape) != KVC_OK) diverge("kvo_shape_of failed: %s", kvc_last_error());
    s.all_blocks.resize(size_t(s.cfg.num_blocks));
    for (size_t b = 0; b < s.all_blocks.size(); ++b) s.all_blocks[b] = int32_t(b);
    s.passed_storage.clear();  // a new pool: nothing has passed yet
    s.passed_kv.clear();
    if (s.host_slots > 0 && kvc_tier_attach_host(s.pool, s.host_slots) != KVC_OK)
        diverge("kvc_tier_attach_host failed: %s", kvc_last_error());
    if (s.disk_slots > 0 && attach_disk(s.pool, s.disk_slots, "pool", false, s.persistent, fresh, s.identity) != KVC_OK)
        diverge("kvc_tier_attach_disk (identity %s) failed: %s", identity_name(s.identity), kvc_last_error());
    if (kvc_batch_create(s.pool, s.batch_max_seqs, s.batch_max_tokens, s.batch_width, &s.batch) != KVC_OK)
        diverge("kvc_batch_create failed: %s", kvc_last_error());
}

// A fresh model of the pool's configuration and tiers.
void init_model(Session &s, model::Pool *m) {
    m->init(s.cfg.block_size, s.cfg.num_blocks, s.cfg.prefix_caching != 0, s.cfg.max_seq_len, s.watermark,
            s.cfg.event_capacity);
    if (s.host_slots > 0) m->attach_host(s.host_slots);
    if (s.disk_slots > 0) m->attach_disk(s.disk_slots);
    m->owner = identity_class(s.identity);
}

bool setup(Input &in, Session &s) {
    static const int32_t block_sizes[] = {1, 2, 3, 4, 8};
    static const double watermarks[] = {0.0, 0.0, 0.1, 0.25};
    static const int64_t max_lens[] = {0, 0, 12, 30};
    static const int32_t event_caps[] = {64, 0, 1, 3};
    const int32_t bs = block_sizes[in.below(5)];
    int32_t n = int32_t(1 + in.below(24));
    const bool caching = in.below(4) != 0;
    const double wm = watermarks[in.below(4)];
    const int64_t max_len = max_lens[in.below(4)];
    const int32_t ev_cap = event_caps[in.below(4)];
    // The alphabet byte's high bits pick a starting sliding window for half of the inputs (so a
    // windowed pool need not wait for a set_window op on an empty pool).
    const uint8_t alphabet_byte = in.byte();
    s.alphabet = int32_t(1 + alphabet_byte % 4);
    const int32_t start_window = (alphabet_byte >> 2) & 1 ? int32_t((alphabet_byte >> 3) % 12) : 0;
    // A third of the inputs: KV storage on the CPU backend, mostly with a host tier. The tier byte's
    // high bits (byte / 6, unused before the disk tier) attach a disk tier to half of the host-tier
    // inputs: 1-6 slots, over a host tier of 1-4 slots (tiny tiers are where the corner cases are:
    // promotions that find no host slot, disk victims that are the prompt's own hits). Bit 4 of the
    // host-slots byte (unused with a disk tier) makes half of those disks KVC_DISK_PERSISTENT: they
    // get restarts (op_restart). Its bits 5-7 (unused too) pick the disk identity: the corpus from
    // before identities decodes as before (a fresh file behaves alike under every identity; the
    // seeds of disk_seeds.py have 0 there, the old kvc_tier_attach_disk).
    const uint8_t tier_byte = in.byte();
    const int64_t tier_mode = tier_byte % 6;
    s.cpu = tier_mode < 3;
    const uint8_t host_byte = tier_mode < 2 ? in.byte() : 0;
    int32_t host_slots = tier_mode < 2 ? int32_t(1 + host_byte % 12) : 0;
    const int32_t disk_code = tier_byte / 6;
    const int32_t disk_slots = host_slots > 0 && (disk_code & 1) ? 1 + (disk_code >> 1) % 6 : 0;
    if (disk_slots > 0) host_slots = 1 + (host_slots - 1) % 4;
    if (host_slots > 0) n = 2 + n % 8;  // small device tier: evictions (spills) and re-hits are common
    s.host_slots = host_slots;
    s.disk_slots = disk_slots;
    s.persistent = disk_slots > 0 && (host_byte & 16);
    s.identity = disk_slots > 0 ? int32_t(host_byte >> 5) % kIdentities : 0;
    s.watermark = wm;
    g_persistent_runs += s.persistent;

    kvc_pool_config &cfg = s.cfg;
    kvc_pool_config_default(&cfg);
    cfg.block_size = bs;
    cfg.num_blocks = n;
    cfg.prefix_caching = caching ? 1 : 0;
    cfg.watermark = wm;
    cfg.max_seq_len = max_len;
    cfg.event_capacity = ev_cap;
    cfg.backend = s.cpu ? KVC_BACKEND_CPU : KVC_BACKEND_NONE;
    // Two KV heads of dimension 2: a token slot holds 8 oracle values, so another position's KV
    // matches by chance with probability 2^-64 (one head of dimension 1: 2^-16), at little cost.
    cfg.num_kv_heads = 2;
    cfg.head_dim = 2;
    cfg.kv_dtype = KVC_DTYPE_F32;
    open_pool(s, true);
    if (kvc_keys_create(&s.keys) != KVC_OK) diverge("kvc_keys_create failed");
    init_model(s, &s.m);
    setup_mirror(s);
    if (start_window > 0) {
        const kvc_status st = kvc_pool_set_sliding_window(s.pool, start_window);
        EXPECT_EQ("kvc_pool_set_sliding_window status (setup)", st, s.m.set_window(start_window));
        MIRROR_EQ("kvc_pool_set_sliding_window status (setup)", st, kvc_pool_set_sliding_window(s.mr.pool, start_window));
    }
    return true;
}

// Coverage counts of the pool now ending (at a restart, or the input's end), into the session's.
void add_coverage(Session &s) {
    g_host_hits += uint64_t(s.m.hc.hits);
    g_window_released += uint64_t(s.m.window_released);
    g_window_skip_allocs += uint64_t(s.m.window_skip_allocs);
    g_window_beyond_allocs += uint64_t(s.m.window_beyond_allocs);
    g_window_beyond_lookups += uint64_t(s.m.window_beyond_lookups);
    g_window_pins_skipping += uint64_t(s.m.window_pins_skipping);
    kvc_tier_stats ts;
    std::memset(&ts, 0, sizeof ts);
    ts.struct_size = sizeof ts;
    if (s.m.host && kvc_tier_get_stats(s.pool, KVC_TIER_HOST, &ts) == KVC_OK) g_spills += uint64_t(ts.blocks_in);
    g_disk_spills += uint64_t(s.m.dc.blocks_in);
    g_spills_left_out += uint64_t(s.m.spills_left_out);
    g_disk_orphans += uint64_t(s.m.disk_orphans);
    g_copies_entered += uint64_t(s.m.copies_entered);
    g_copy_hits += uint64_t(s.m.copy_hits);
    g_spill_copies_dropped += uint64_t(s.m.spill_copies_dropped);
    g_disk_hits += uint64_t(s.m.dc.hits);
    g_disk_evictions += uint64_t(s.m.dc.evictions);
    g_disk_refused += uint64_t(s.m.promotions_refused);
    g_disk_faults += uint64_t(s.m.dc.failures);
    g_round_allocs += uint64_t(s.m.round_allocs);
    g_restore_rounds += uint64_t(s.m.restore_rounds);
    g_round_restores += uint64_t(s.m.round_restores);
    g_rounds_refused += uint64_t(s.m.rounds_refused);
    g_round_free_hits += uint64_t(s.m.round_free_hits);
    g_round_evictions += uint64_t(s.m.round_evictions);
    if (!s.persistent) return;
    g_recovered += uint64_t(s.m.recovered);
    g_recovered_stale += uint64_t(s.m.recovered_stale);
    g_recovered_hits += uint64_t(s.m.recovered_hits);
    g_erased += uint64_t(s.m.erased);
    g_erase_faults += uint64_t(s.m.erase_faults);
    g_recovered_dups += uint64_t(s.m.recovered_dups);
    g_foreign += uint64_t(s.m.foreign);
    g_reclaimed += uint64_t(s.m.reclaimed);
}

// A restart (persistent disk tier only): the process ends and a new one attaches the same files,
// for the fuzzed pool and the mirror alike. Both pools are destroyed (their sequences, device cache
// and host tier are gone: nothing is written back), re-created with the same configuration and
// tiers (the disk with KVC_DISK_PERSISTENT on the same file) and the sliding window they had, and
// the model does the same: its disk re-indexes the file's valid headers (model::Pool::recover),
// recovered_blocks is compared exactly (compare_stats), and later prompts re-hit what came back
// (their KV bytes checked once promoted, as any other). The session's recent and past prompts are
// kept: what the next process is asked again.
// The restart's byte v (its low 3 bits picked the restart): bit 7 re-attaches under identity
// (v >> 3) & 7 (kIdentities; its headers come back, the others' are foreign), else under the same
// one; bit 6 first tries an identity one byte too long on both pools, before their disk tier is
// attached and again after (KVC_ERR_INVALID_ARG both times: kvc_tier_attach_disk_with_identity
// checks its arguments before the pool's state; nothing may be attached or read, and the file
// must be left as it was, which the attach in between and compare_stats verify). The corpus from
// before identities decodes as before: no restart byte in it has bit 6 or 7 set (disk_seeds.py's
// are [9, 6]; its replay's figures are unchanged); a later input with bit 7 set there switches.
void try_too_long_identity(Session &s, const char *when) {
    const kvc_status st = attach_disk(s.pool, s.disk_slots, "pool", false, s.persistent, false, -1);
    if (st != KVC_ERR_INVALID_ARG)
        diverge("kvc_tier_attach_disk_with_identity (identity of %zu bytes, %s): status %d, expected KVC_ERR_INVALID_ARG"
                " (op #%d %s)", std::strlen(too_long_identity()), when, int(st), g_op, g_opname);
    MIRROR_EQ("kvc_tier_attach_disk_with_identity status (identity one byte too long)", st,
              attach_disk(s.mr.pool, s.disk_slots, "mirror", false, s.persistent, false, -1));
    ++g_too_long;
}
void op_restart(Session &s, uint8_t v) {
    add_coverage(s);
    ++g_restarts;
    const std::vector<model::Identity> cached = s.m.disk_cached();
    const int32_t window = s.m.window;
    const bool too_long = (v & 0x40) != 0;
    const int32_t before = s.identity;
    if (v & 0x80) s.identity = int32_t(v >> 3) % kIdentities;
    g_identity_switches += identity_class(s.identity) != identity_class(before);
    kvc_batch_destroy(s.batch);
    kvc_pool_destroy(s.pool);
    s.batch = nullptr;
    s.pool = nullptr;
    kvc_batch_destroy(s.mr.batch);
    kvc_pool_destroy(s.mr.pool);
    s.mr.batch = nullptr;
    s.mr.pool = nullptr;
    if (too_long) {  // the pools as open_pool / open_mirror make them, up to their host tier
        if (kvc_pool_create(&s.cfg, &s.pool) != KVC_OK || kvc_tier_attach_host(s.pool, s.host_slots) != KVC_OK)
            diverge("kvc_pool_create / kvc_tier_attach_host failed: %s", kvc_last_error());
        if (kvc_pool_create(&s.mr.cfg, &s.mr.pool) != KVC_OK || kvc_tier_attach_host(s.mr.pool, s.host_slots) != KVC_OK)
            mirror::report("kvc_pool_create / kvc_tier_attach_host of the mirror failed: %s", kvc_last_error());
        try_too_long_identity(s, "no disk tier yet");
        kvc_pool_destroy(s.pool);
        kvc_pool_destroy(s.mr.pool);
        s.pool = s.mr.pool = nullptr;
    }
    open_pool(s, false);
    open_mirror(s, false);
    if (too_long) try_too_long_identity(s, "disk tier attached");
    model::Pool fresh;
    init_model(s, &fresh);
    fresh.recover(s.m.dfile, s.m.next_stamp, cached, identity_class(s.identity));
    s.m = std::move(fresh);
    check_attach(s);
    s.batch_built = false;
    if (window > 0) {
        const kvc_status st = kvc_pool_set_sliding_window(s.pool, window);
        EXPECT_EQ("kvc_pool_set_sliding_window status (restart)", st, s.m.set_window(window));
        MIRROR_EQ("kvc_pool_set_sliding_window status (restart)", st, kvc_pool_set_sliding_window(s.mr.pool, window));
    }
    check_mirror_pool(s);
}

void run(const uint8_t *data, size_t size) {
    Input in(data, size);
    Session s;
    s.input_hash = mirror::input_hash(data, size);
    g_opname = "setup";
    setup(in, s);
    struct Tally {  // coverage of this input's last pool, added to the session total when it ends
        Session &s;
        ~Tally() { add_coverage(s); }
    } tally{s};
    g_disk_runs += s.m.disk;
    ++g_total_runs;
    check_pool(s);
    check_attach(s);  // a fresh file: nothing recovered, nothing foreign
    compare_stats(s);
    check_mirror_pool(s);
    compare_mirror(s);
    for (g_op = 0; !in.done() && g_op < 400; ++g_op) {
        switch (in.below(16)) {
            case 0: case 1: g_opname = "alloc"; op_alloc(in, s); break;
            case 2: case 3: g_opname = "append"; op_append(in, s); break;
            case 4: g_opname = "fork"; op_fork(in, s); break;
            case 5: g_opname = in.below(2) ? "free" : "truncate";
                if (g_opname[0] == 'f') op_free(in, s); else op_truncate(in, s);
                break;
            case 6: g_opname = "lookup"; op_lookup(in, s); break;
            case 7: g_opname = "can_alloc"; op_can_alloc(in, s); break;
            case 8: g_opname = in.below(2) ? "pin" : "unpin"; op_pin(in, s, g_opname[0] == 'p'); break;
            case 9: {
                // With a persistent disk tier, 6 and 7 restart. On CPU pools 5 (take_pending there
                // is copy_pending's work, which op_tier_misc covers) is kvc_abort or kvc_tier_flush:
                // a byte v, v % 2 == 1 flushes on a disk tier (v % 16 == 1 elsewhere: refused).
                const uint8_t pick_byte = in.byte();  // its high bits: op_restart's identity choice
                const int64_t pick = pick_byte % 8;
                const bool restart = s.persistent && pick >= 6;
                // kvc_tier_prefetch: pick 5 with bit 7 of the byte set and bit 4 clear, on every pool
                // (those without a disk tier answer KVC_ERR_STATE). Bits 3-7 were read by restarts
                // only; the committed corpus's pick-5 bytes (5, 13, 93, 189, 245: seen with a probe
                // when this was added) have bit 7 clear or bit 4 set, so it decodes as before.
                if (pick == 5 && (pick_byte & 0x90) == 0x80) {
                    g_opname = "tier_prefetch";
                    op_prefetch(in, s);
                    break;
                }
                if (s.cpu && pick == 5) {
                    const uint8_t v = in.byte();
                    const bool flush = s.m.disk ? v % 2 == 1 : v % 16 == 1;
                    g_opname = flush ? "tier_flush" : "abort";
                    if (flush) op_flush(v, s);
                    else op_abort(in, s);
                    break;
                }
                g_opname = pick == 0 ? "cache_reset" : pick <= 2 ? "set_window" : pick <= 4 ? "other_traffic"
                                                     : restart ? "restart" : "take_pending";
                if (pick == 0) op_reset(in, s);
                else if (pick <= 2) op_window(in, s);
                else if (pick <= 4) op_other_traffic(in, s);
                else if (restart) op_restart(s, pick_byte);
                else op_take_pending(in, s);
                break;
            }
            case 10: g_opname = "event_pop"; op_event_pop(in, s); break;
            case 11: g_opname = "read"; op_read(in, s); break;
            case 12: g_opname = "batch_build"; op_batch(in, s); break;
            case 13: op_tier_misc(in, s); break;  // preempt_recompute / lookup_tiers / copy_pending
            default: op_swap(in, s); break;       // swap_out / swap_in / preemption_cost
        }
        s.m.finish_call();
        s.m.fault_left = 0;  // an injected fault lasts one call (op_alloc disarms the library's)
        if (g_trace) trace_state(s);
        check_kv(s);
        if (s.m.host && g_op == 0) ++g_host_runs;
        g_window_ops += s.m.window > 0;
        ++g_total_ops;
        compare_stats(s);
        compare_seqs(s);
        compare_mirror(s);
        check_pool(s);
        g_mirror_data_ops += s.mr.data;
    }
    check_mirror_pool(s);
}

void report_totals() {
    std::fprintf(stderr, "fuzz_pool: %" PRIu64 " inputs, %" PRIu64 " operations compared with the model, 0 divergences"
                 " (host-tier inputs %" PRIu64 ", swaps %" PRIu64 ", blocks into the host tier %" PRIu64
                 ", host re-hits %" PRIu64 ", operations under a sliding window %" PRIu64
                 ", blocks released by one %" PRIu64 ", window-aware hits: allocs starting released %" PRIu64 ", allocs beyond the leading run %" PRIu64
                 ", lookups beyond the leading run %" PRIu64 ", pins leaving leading blocks unpinned %" PRIu64 ")\n",
                 g_total_runs, g_total_ops, g_host_runs, g_swaps, g_spills, g_host_hits, g_window_ops, g_window_released,
                 g_window_skip_allocs, g_window_beyond_allocs, g_window_beyond_lookups, g_window_pins_skipping);
    std::fprintf(stderr, "fuzz_pool: disk tier: inputs %" PRIu64 ", blocks spilled to disk %" PRIu64 ", disk hits promoted %"
                 PRIu64 ", disk evictions %" PRIu64 ", disk hits without a host slot %" PRIu64
                 ", lookup_tiers with disk blocks %" PRIu64 ", copies failed by injected faults %" PRIu64 "\n",
                 g_disk_runs, g_disk_spills, g_disk_hits, g_disk_evictions, g_disk_refused, g_disk_lookup_hits,
                 g_disk_faults);
    std::fprintf(stderr, "fuzz_pool: spills: evicted cached blocks not spilled %" PRIu64
                 ", host victims not written to disk (parent not kept) %" PRIu64
                 ", lower-tier blocks seen unreachable after an operation %" PRIu64 "\n",
                 g_spills_left_out, g_disk_orphans, g_unreachable_seen);
    std::fprintf(stderr, "fuzz_pool: copies of one hash: blocks entered as another copy %" PRIu64
                 ", allocs choosing among copies %" PRIu64 ", evicted copies not spilled (another stays) %" PRIu64 "\n",
                 g_copies_entered, g_copy_hits, g_spill_copies_dropped);
    std::fprintf(stderr, "fuzz_pool: kvc_alloc promotion rounds: allocs with restore rounds %" PRIu64
                 ", restore rounds %" PRIu64 ", blocks restored by them %" PRIu64
                 ", restore rounds not possible (no host block, too few free blocks) %" PRIu64
                 ", free device blocks of the hit pinned by them %" PRIu64 ", device blocks their restores evicted %" PRIu64 "\n",
                 g_round_allocs, g_restore_rounds, g_round_restores, g_rounds_refused, g_round_free_hits, g_round_evictions);
    std::fprintf(stderr, "fuzz_pool: persistent disk tier: inputs %" PRIu64 ", restarts %" PRIu64 ", blocks recovered %"
                 PRIu64 " (not cached on disk at the restart %" PRIu64 "; older duplicates left free %" PRIu64
                 "), recovered blocks promoted %" PRIu64
                 ", headers erased %" PRIu64 ", erasures failed by injected faults %" PRIu64 "\n",
                 g_persistent_runs, g_restarts, g_recovered, g_recovered_stale, g_recovered_dups, g_recovered_hits, g_erased,
                 g_erase_faults);
    std::fprintf(stderr, "fuzz_pool: disk identity: restarts switching identity %" PRIu64 ", foreign blocks at attaches %"
                 PRIu64 ", foreign blocks recovered again by going back %" PRIu64
                 ", identities one byte too long refused %" PRIu64 "\n",
                 g_identity_switches, g_foreign, g_reclaimed, g_too_long);
    std::fprintf(stderr, "fuzz_pool: kvc_abort: %" PRIu64 " aborts, blocks taken out of the cache by them %" PRIu64
                 "; kvc_tier_flush: %" PRIu64 " flushes, blocks queued by them %" PRIu64 ", rounds %" PRIu64
                 ", flushes with injected write faults %" PRIu64 "\n",
                 g_aborts, g_abort_uncached, g_flushes, g_flush_queued, g_flush_rounds, g_flush_faults);
    std::fprintf(stderr, "fuzz_pool: kvc_tier_prefetch: %" PRIu64 " prefetches on disk tiers, blocks read up by them %" PRIu64
                 ", disk hits left for want of a host slot %" PRIu64 ", with injected disk faults %" PRIu64
                 ", refused (bad input, no disk tier) %" PRIu64 ", prefetched prompts allocated later %" PRIu64
                 " (finding at least the prefetched hit %" PRIu64 ")\n",
                 g_prefetches, g_prefetch_read, g_prefetch_short, g_prefetch_faults, g_prefetch_refused, g_prefetch_allocs,
                 g_prefetch_allocs_full);
    std::fprintf(stderr, "fuzz_pool: kvc_append_batch: %" PRIu64 " batches (%" PRIu64 " stopped after an appended entry); "
                 "kvc_admit: %" PRIu64 " admissions (%" PRIu64 " not admitted: LATER or NEVER)\n",
                 g_append_batches, g_append_batch_partial, g_admits, g_admits_not_ok);
    std::fprintf(stderr, "fuzz_pool: mirror ranks in lockstep, 0 divergences (fuzzed pool -> mirror backend: NONE->CPU %"
                 PRIu64 ", CPU->NONE %" PRIu64 ", CPU->CPU %" PRIu64 ", NONE->NONE %" PRIu64
                 "; operations with the mirror's own KV bytes checked %" PRIu64 ")\n",
                 g_mirror_none_cpu, g_mirror_cpu_none, g_mirror_cpu_cpu, g_mirror_none_none, g_mirror_data_ops);
    std::fprintf(stderr, "fuzz_pool: KV bytes: device blocks compared with the model's content %" PRIu64
                 " (free cached %" PRIu64 ", shared %" PRIu64 "; decoded, the others unchanged since they passed %" PRIu64
                 "), operations checked with copy-on-write pairs pending %" PRIu64
                 ", sequence positions read through a pending pair %" PRIu64 "\n",
                 g_kv_block_checks, g_kv_free_cached_checks, g_kv_shared_checks, g_kv_blocks_decoded, g_kv_pending_ops,
                 g_kv_settled_reads);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    std::atexit(report_totals);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    run(data, size);
    return 0;
}

// The mirror's failure path: the fuzzer's (a message, then abort), naming the operation and the mirror.
void mirror::report(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "\n*** libkvc mirror rank diverges from the fuzzed pool: ");
    std::vfprintf(stderr, fmt, ap);
    std::fprintf(stderr, " (op #%d %s; %s)\n    (last library error: %s)\n", g_op, g_opname, g_mirror_desc,
                 kvc_last_error());
    va_end(ap);
    remove_disk_files();
    std::abort();
}
