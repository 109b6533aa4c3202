/* stress_bytes: the concurrent byte oracle (issue 21). Many threads share one pool and every KV
 * byte any of them reads is checked against what it must be.
 *
 * Every K/V element written is a function of the identity of the prefix that produced it
 * (tests/kv_oracle.h: the tenant's salt, the token ids up to the position, layer, kv, head, d), so
 * a prefix hit, a restore from the host or disk tier, a swap-in, a forked shared block, the copy a
 * copy-on-write made and attention's input can all be verified with no record of who wrote what.
 *
 * Modes (stress_bytes MODE [options]):
 *   all  >= 16 workers over every documented-concurrent call: kvc_alloc / kvc_admit with prefix hits (the hit
 *        verified at once, the rest written), kvc_append / kvc_append_batch with lookahead, kvc_fork + copy-on-write +
 *        kvc_copy_pending (also from a drainer thread), kvc_free, kvc_abort, kvc_truncate + append,
 *        swap out / in, spill and re-hit through the host and disk tiers (--tiers), prefetch, flush,
 *        prefix pin / unpin, batch build + attention (a zero query attends uniformly: the output is
 *        the mean of the oracle's V over the context), stats / check / events (a monitor thread).
 *        Three tenants (cache salts) over eight prompt families, so tenants share token ids but
 *        never KV.
 *   d1   issue 21's D1: copy-on-write copies racing host-tier spills. 64 blocks, host tier of 256
 *        slots; 4 threads alloc a 49-token prompt of ~3000 families, verify its hit, write the rest,
 *        free; 4 threads fork a parent whose last block is partial, append one token, copy the
 *        pending pairs (serialized among them by a mutex of the test), write, verify, free.
 *   d2   issue 21's D2: kvc_copy_pending from several threads, no tiers. One thread forks P -> C,
 *        appends a token to C, copies, writes it, reads it back with the shared positions, frees C;
 *        two threads loop kvc_copy_pending.
 * Options: --seconds S (10) --ops N (total, 0 = no bound) --threads N (all: workers, 16)
 *          --tiers (all) --dtype f32|f16 --backend cpu|cuda --seed N --watchdog S (60)
 *          --families N (d1: 3000; fewer make more of the spilled blocks hit again, so a wrong one
 *          is found sooner) --no-d4 (all: every write follows its writer's own kvc_copy_pending, the
 *          only order the library guaranteed before issue 21; see rewrite_parent_tail).
 *          --hybrid (all): the pool is a hybrid one (kvc_pool_create_hybrid): FULL (2 layers) +
 *          SLIDING window 6 (2 layers) + SSM (2 layers of state), with --tiers a host tier (no disk
 *          tier, pins, prefetch, flush or lookup_tiers: refused on hybrid pools, left out). Every
 *          group's table is checked: group 0 as a plain pool's KV (kvc_cache_write, attention), the
 *          SLIDING group's rows in its own layout keyed by (group, token chain), the SSM group's page
 *          of block i as the state after the last confirmed token of block i (whole-page content
 *          keyed by (group, chain up to that token)); released entries (-1) are skipped unless the
 *          window still needs them (then a failure). With the SSM group kvc_truncate (and the D4
 *          parent rewrite, as with --no-d4) is left out: state cannot be rewound. --no-ssm: FULL +
 *          SLIDING, truncate on (never below what the next token's window needs).
 * Exit status 0 = every read matched, every call returned a documented status, and at the end
 * (everything freed and unpinned) the pool has all blocks free and passes kvc_pool_check.
 *
 * Rules the threads keep, as a real server would (the library's contract covers the rest):
 *  - A sequence is used by one thread at a time (its owner); a kvc_batch and kvc_keys belong to one
 *    thread. Batches are built over the owner's own sequences and launched before they change.
 *  - KV writes to a sequence's slots are made by its owner, after its own kvc_copy_pending that
 *    follows the append (the pairs that append queued must be copied before the write lands).
 *    One exception on purpose, rewrite_parent_tail (issue 21's D4): a parent writes in place while
 *    its child's pair is still queued, relying on the newer rule that a storage access completes
 *    the pairs queued before it (kvc.h); --no-d4 leaves it out.
 *  - A sequence's KV is written before it is freed, swapped out or truncated, and before the owner's
 *    next call (alloc and append enter full blocks in the prefix cache before their KV exists).
 *  - Another thread's prefix hit on a block whose KV its producer is still writing is the
 *    caller's race, not the library's: before a call that can enter blocks in the cache, the
 *    caller registers their identities as in production (InFlight below) until written, and a
 *    thread verifying a hit first waits until no one produces those identities. A hit is a prefix
 *    and a producer never waits on a longer one, so the waits cannot form a cycle.
 *  - kvc_abort of a sequence whose KV was never written: only for a prompt under a salt private to
 *    the thread (nobody else can hit its blocks); other aborts are of written sequences.
 *  - CUDA (emulated: device memory is host memory, so the oracle writes from host pointers): the
 *    emulator may run a launch as late as CUDA allows, so after each write and launch the test
 *    waits for the default stream (a zero-block kvc_storage_copy_blocks synchronizes it) before
 *    reusing its buffers (kvo_write gives every layer its own part of the scratch). */
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <unistd.h>

#include "kv_oracle.h"

namespace {

using Clock = std::chrono::steady_clock;

// ---- options and shared state ---------------------------------------------------------------

struct Options {
    std::string mode = "all";
    double seconds = 10;
    int64_t max_ops = 0;
    int threads = 16;
    bool tiers = false;
    int32_t dtype = KVC_DTYPE_F32;
    int32_t backend = KVC_BACKEND_CPU;
    uint64_t seed = 1;
    double watchdog = 60;
    int64_t families = 3000;  // d1's prompt families
    bool d4_window = true;    // all: some forks open issue 21's D4 window (rewrite_parent_tail)
    bool hybrid = false;      // all: a hybrid pool, FULL + SLIDING + SSM groups (see the header)
    bool ssm = true;          // hybrid: with the SSM group (--no-ssm: FULL + SLIDING, truncate on)
};

enum Op {
    OP_ALLOC, OP_PREFETCH, OP_APPEND, OP_FORK, OP_FORK_REWRITE, OP_COPY_PENDING, OP_FREE, OP_ABORT, OP_TRUNCATE,
    OP_SWAP_OUT, OP_SWAP_IN, OP_FLUSH, OP_PIN, OP_UNPIN, OP_BATCH_LAUNCH, OP_STATS, OP_CHECK,
    OP_EVENTS, OP_REFUSED, NUM_OPS
};
const char *const kOpNames[NUM_OPS] = {
    "alloc", "prefetch", "append", "fork", "fork+parent rewrite (D4)", "copy_pending", "free", "abort", "truncate", "swap_out",
    "swap_in", "flush", "pin", "unpin", "batch+launch", "stats", "check", "events", "refused(OUT_OF_BLOCKS)"};

// Where a byte check happened: the summary reports checks and mismatches per site.
enum Site { SITE_HIT, SITE_APPEND_TAIL, SITE_FORK_PARENT, SITE_TRUNCATE_KEPT, SITE_SWAP_IN, SITE_WHOLE_SEQ,
            SITE_ATTENTION, SITE_SSM_READ, NUM_SITES };
const char *const kSiteNames[NUM_SITES] = {"prefix hit after kvc_alloc", "append tail (copy-on-write)",
                                           "fork parent's tail", "kept tokens after truncate",
                                           "after swap-in", "whole sequence", "attention output",
                                           "SSM state read by the forward pass (hybrid)"};

// A sequence whose bytes a wrong block may hold (d1/d2: the copy-on-write parents): named in
// mismatch messages when one of its positions matches.
struct Suspect {
    std::string name;
    std::vector<uint64_t> ids;
};

// Hybrid mode: one KV-cache group of the pool as the oracle addresses it inside a page.
struct GroupView {
    int32_t kind = KVC_GROUP_FULL, window = 0;  // window: SLIDING W, SSM 1 (the table's rule), FULL 0
    kvo_shape shape{};        // attention groups: the group's layout inside a page (layer_stride ...)
    int64_t group_bytes = 0;  // bytes of a page the group uses (SSM: state_bytes x layers)
    const char *name = "";
};

struct Shared {
    Options opt;
    bool hybrid = false, has_ssm = false;
    std::vector<GroupView> groups;  // hybrid: every group (group 0 is written and read through g.shape)
    std::atomic<int64_t> group_blocks[KVC_MAX_GROUPS]{};  // blocks checked per group
    std::atomic<int64_t> released_skipped{0};             // released (-1) entries left unchecked
    kvc_pool *pool = nullptr;
    kvo_shape shape{};
    int32_t q_heads = 0;
    bool cuda = false;
    Clock::time_point start;
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> progress{0};
    std::atomic<int64_t> ops[NUM_OPS]{};
    std::atomic<int64_t> checks[NUM_SITES]{}, bad_checks[NUM_SITES]{};
    std::atomic<int64_t> failures{0}, corruptions{0}, first_mismatch_us{-1};
    std::mutex cow_mu;          // d1: kvc_copy_pending serialized among the copy-on-write threads
    bool serialize_cow = false;
    std::vector<Suspect> suspects;  // filled before the threads start
};
Shared g;

double elapsed() { return std::chrono::duration<double>(Clock::now() - g.start).count(); }
int64_t total_mismatches() {
    int64_t n = 0;
    for (auto &b : g.bad_checks) n += b.load();
    return n;
}

constexpr int kMaxPrinted = 20;  // detailed messages per kind; counts go on

void failure(int line, const char *fmt, ...) {
    const int64_t n = g.failures.fetch_add(1);
    if (n >= kMaxPrinted) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "FAIL line %d at %.3fs: %s (last error: %s)\n", line, elapsed(), msg, kvc_last_error());
}
#define FAIL(...) failure(__LINE__, __VA_ARGS__)

void count(Op op) { g.ops[op].fetch_add(1, std::memory_order_relaxed); }

// A call's status must be OK or one of the refusals listed (counted as refused). Returns st == OK.
bool expect(kvc_status st, const char *fn, uint64_t seq, std::initializer_list<kvc_status> refusals = {}) {
    if (st == KVC_OK) return true;
    for (kvc_status r : refusals)
        if (st == r) {
            count(OP_REFUSED);
            return false;
        }
    FAIL("%s(seq %" PRIu64 ") -> %s", fn, seq, kvc_status_str(st));
    return false;
}

uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
int64_t rnd(uint64_t *s, int64_t n) { return int64_t(rng_next(s) % uint64_t(n)); }

// ---- blocks in production -------------------------------------------------------------------

// Identities of full blocks a thread's call may enter in the prefix cache before their KV is
// written (see the header's rules): hits on them wait until their producers are done.
class InFlight {
   public:
    void add(const uint64_t *ids, size_t n) {
        std::lock_guard<std::mutex> lk(mu_);
        for (size_t i = 0; i < n; ++i) ++count_[ids[i]];
    }
    void remove(const uint64_t *ids, size_t n) {
        {
            std::lock_guard<std::mutex> lk(mu_);
            for (size_t i = 0; i < n; ++i)
                if (--count_[ids[i]] == 0) count_.erase(ids[i]);
        }
        if (n > 0) cv_.notify_all();
    }
    // False if some identity is still in production after timeout_s (a test bug, or a hang).
    bool wait_clear(const uint64_t *ids, size_t n, double timeout_s) {
        std::unique_lock<std::mutex> lk(mu_);
        const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
        return cv_.wait_until(lk, deadline, [&] {
            for (size_t i = 0; i < n; ++i)
                if (count_.count(ids[i])) return false;
            return true;
        });
    }

   private:
    std::mutex mu_;
    std::condition_variable cv_;
    std::unordered_map<uint64_t, int> count_;
};
InFlight g_inflight;

// ---- sequences and workers ------------------------------------------------------------------

constexpr int kTenants = 3, kFamilies = 8, kSlots = 4, kMaxLen = 48, kMaxLookahead = 2, kBatchSeqs = 4,
              kMaxQLen = 8;

struct Seq {
    uint64_t id = 0;
    bool live = false, swapped = false;
    bool corrupt = false;       // a check of its bytes failed (they stay wrong)
    int tenant = 0;
    std::vector<int32_t> toks;  // confirmed tokens
    std::vector<uint64_t> ids;  // the oracle's identity of each confirmed position
    int64_t f = 0;  // hybrid: the first position its last kvc_alloc (uncached) / kvc_append added (kvc.h
                    // windows: no block holding a position >= f - W + 1 may have been released)
    int64_t f_before = -1;  // f before the last kvc_append (-1 after kvc_alloc: nothing released yet)
    int64_t n() const { return int64_t(toks.size()); }
};

struct Pin {
    int tenant;
    std::vector<int32_t> toks;  // exactly the pinned tokens (the pin's out_pinned_tokens)
};

struct Worker {
    int idx = 0;
    uint64_t rng = 1;
    std::atomic<const char *> doing{"starting"};  // for the watchdog's report
    std::atomic<int64_t> beat_ms{0};               // when its current operation began; -1: done
    std::vector<Seq> seqs;
    std::vector<kvc_keys *> keys;  // one per tenant, then the thread's private salt
    kvc_batch *batch = nullptr;
    std::vector<Pin> pins;
    std::vector<float> scratch;
    std::vector<unsigned char> block, page;  // page: hybrid, a page being built or the expected one
    std::vector<uint64_t> gids;              // hybrid: a group's identities of a range of positions
    std::vector<int64_t> slots;
    std::vector<int32_t> table;
};

int private_tenant() { return kTenants; }
uint64_t oracle_salt(const Worker &w, int tenant) {
    return tenant == private_tenant() ? 0x5A17000000ull + uint64_t(w.idx) : 0x7E4A0000ull + uint64_t(tenant);
}

void make_keys(Worker &w) {
    for (int t = 0; t <= kTenants; ++t) {
        kvc_keys *k = nullptr;
        if (kvc_keys_create(&k) != KVC_OK) FAIL("kvc_keys_create");
        char salt[64];
        if (t == private_tenant()) snprintf(salt, sizeof salt, "private-%d", w.idx);
        else snprintf(salt, sizeof salt, "tenant-%d", t);
        if (k && kvc_keys_set_salt(k, salt) != KVC_OK) FAIL("kvc_keys_set_salt");
        w.keys.push_back(k);
    }
}

std::unique_ptr<Worker> make_worker(int idx, int slots) {
    auto w = std::make_unique<Worker>();
    w->idx = idx;
    w->rng = kvo_mix(g.opt.seed * 0x9E3779B97F4A7C15ull + uint64_t(idx)) | 1;
    w->seqs.resize(size_t(slots));
    for (int k = 0; k < slots; ++k) w->seqs[size_t(k)].id = uint64_t(idx + 1) * 1000 + uint64_t(k);
    make_keys(*w);
    const int64_t rows = kMaxLen + kMaxLookahead + g.shape.block_size;
    w->scratch.resize(size_t(kvo_scratch_floats(&g.shape, rows)));
    w->block.resize(size_t(g.shape.block_stride));
    w->page.resize(size_t(g.shape.block_stride));
    w->gids.resize(size_t(rows));
    w->slots.resize(size_t(rows));
    w->table.resize(size_t(rows / g.shape.block_size + 2));
    return w;
}

void destroy_worker(Worker &w) {
    for (kvc_keys *k : w.keys) kvc_keys_destroy(k);
    kvc_batch_destroy(w.batch);
}

// Family f's shared tokens (a "system prompt"); the tails that follow come from a small alphabet,
// so prompts of one family also share blocks past it.
int32_t family_token(int64_t family, int64_t i) { return int32_t(kvo_mix(uint64_t(family) << 32 | uint64_t(i)) % 30000) + 16; }
std::vector<int32_t> family_prompt(int64_t family, int64_t shared, int64_t total, uint64_t *rng) {
    std::vector<int32_t> t(static_cast<size_t>(total));
    for (int64_t i = 0; i < total; ++i) t[size_t(i)] = i < shared ? family_token(family, i) : int32_t(rnd(rng, 4));
    return t;
}

// Appends tokens to s's record with their identities.
void push_tokens(Worker &w, Seq &s, const std::vector<int32_t> &toks) {
    uint64_t id = s.ids.empty() ? kvo_root(oracle_salt(w, s.tenant)) : s.ids.back();
    for (int32_t t : toks) {
        s.toks.push_back(t);
        s.ids.push_back(id = kvo_next(id, t));
    }
}
void cut_tokens(Seq &s, int64_t n) {
    s.toks.resize(size_t(n));
    s.ids.resize(size_t(n));
}

// Identities of the blocks whose last position lies in [from, to): a call confirming those
// positions enters the blocks in the prefix cache.
std::vector<uint64_t> completed_blocks(const Seq &s, int64_t from, int64_t to) {
    std::vector<uint64_t> out;
    const int64_t bs = g.shape.block_size;
    for (int64_t p = from; p < to; ++p)
        if ((p + 1) % bs == 0) out.push_back(s.ids[size_t(p)]);
    return out;
}

// ---- KV bytes -------------------------------------------------------------------------------

// Waits until the default stream's work (writes, launches) is done; nothing to do on CPU.
void sync_device() {
    if (g.cuda && kvc_storage_copy_blocks(g.pool, nullptr, 0, nullptr, 1) != KVC_OK) FAIL("stream sync");
}

// ---- hybrid pools: the groups after group 0 --------------------------------------------------
//
// Group 0 (FULL) is written with kvc_cache_write and read exactly as a plain pool's KV (g.shape is
// its layout inside a page). The other groups' pages are read and written whole with
// kvc_storage_copy_blocks, as a server addresses an SSM state page itself (kvc.h "Hybrid models"):
//  - an attention group's rows hold the oracle's K/V (kvo_value) of the identities group_id(id, g),
//    in the group's own layout (its layer_stride, heads, head_dim);
//  - an SSM group's page of block b holds ssm_page(g, identity of the last confirmed position of
//    block b): "the state after the last token of block b the sequence has confirmed", so a full
//    block's page is the snapshot at its boundary, a function of the token chain up to it.
// Only the owner writes, only pages of positions its last call added (fresh or copied by
// copy-on-write: kvc_copy_pending before, or the read's storage access completing the pairs).

uint64_t group_id(uint64_t id, int32_t grp) { return grp == 0 ? id : kvo_mix(id ^ (0x67725F6F72636C00ull + uint64_t(grp))); }

void ssm_page(int32_t grp, uint64_t id, unsigned char *out, int64_t bytes) {
    const uint64_t key = group_id(id, grp);
    for (int64_t i = 0; i < bytes; i += 8) {
        const uint64_t x = kvo_mix(key + uint64_t(i) * 0x9E3779B97F4A7C15ull);
        memcpy(out + i, &x, size_t(std::min<int64_t>(8, bytes - i)));
    }
}

// kvo_load's inverse for the oracle's values (k/16: exact in f32, f16 and bf16).
void kvo_store(const kvo_shape *sh, unsigned char *p, float v) {
    if (sh->dtype == KVC_DTYPE_F32) {
        memcpy(p, &v, 4);
        return;
    }
    uint32_t bits;
    memcpy(&bits, &v, 4);
    uint16_t h;
    if (sh->dtype == KVC_DTYPE_BF16) {
        h = uint16_t(bits >> 16);
    } else {
        const uint32_t sign = (bits >> 16) & 0x8000u, exp = (bits >> 23) & 0xFFu;
        h = exp == 0 ? uint16_t(sign) : uint16_t(sign | ((exp - 112u) << 10) | ((bits >> 13) & 0x3FFu));
    }
    memcpy(p, &h, 2);
}

// Sets the rows first_tok .. first_tok + n - 1 of an attention group's page to the oracle's K/V.
void set_rows(const kvo_shape &sh, int32_t grp, unsigned char *page, int64_t first_tok, const uint64_t *ids, int64_t n) {
    for (int64_t t = 0; t < n; ++t) {
        const uint64_t id = group_id(ids[t], grp);
        for (int32_t l = 0; l < sh.layers; ++l)
            for (int32_t kv = 0; kv < 2; ++kv)
                for (int32_t h = 0; h < sh.kv_heads; ++h)
                    for (int32_t d = 0; d < sh.head_dim; ++d)
                        kvo_store(&sh,
                                  page + l * sh.layer_stride + kv * sh.kv_stride + h * sh.head_stride +
                                      (first_tok + t) * sh.token_stride + int64_t(d) * sh.elem_bytes,
                                  kvo_value(id, l, kv, h, d));
    }
}

bool group_table(Worker &w, const Seq &s, int32_t grp, int64_t *len) {
    const kvc_status st = kvc_seq_group_block_table(g.pool, s.id, grp, w.table.data(), int64_t(w.table.size()), len);
    if (st != KVC_OK) FAIL("kvc_seq_group_block_table(seq %" PRIu64 ", group %d) -> %s", s.id, grp, kvc_status_str(st));
    return st == KVC_OK;
}

// Whether group G of s must still hold block b: kvc.h's windows release only blocks whose positions
// all lie before f - W + 1 (f: the first position of the previous call, <= s.f); FULL keeps all.
bool must_hold(const GroupView &G, const Seq &s, int64_t b) {
    if (G.window == 0) return true;
    const int64_t last = std::min(s.n(), (b + 1) * g.shape.block_size) - 1;
    return last >= s.f - G.window + 1;
}

void mismatch(const Worker &w, Seq &s, Site site, const char *detail);

// An SSM group's forward pass first reads the state after position from - 1 (kvc.h: from the page
// of the block holding it): it must be that state (a copy-on-write pair copied, a restored
// snapshot). The page must be held, unless the call before the one being written added no token
// (a lookahead-only kvc_append: the window's release, one call late, may then reach position
// from - 1). Returns false after a failure.
bool check_ssm_read(Worker &w, const Seq &s, int32_t grp, int64_t len, int64_t from) {
    if (from == 0) return true;
    const int64_t b = (from - 1) / g.shape.block_size;
    const int32_t block = b < len ? w.table[size_t(b)] : -1;
    if (block < 0) {
        if (s.f_before >= from) return true;
        FAIL("seq %" PRIu64 " (%" PRId64 " tokens): group %d (SSM) released block #%" PRId64 " (table of %" PRId64
             "), the state after position %" PRId64 " its next tokens start from",
             s.id, s.n(), grp, b, len, from - 1);
        return false;
    }
    g.checks[SITE_SSM_READ].fetch_add(1, std::memory_order_relaxed);
    if (kvo_read_block(g.pool, block, w.block.data()) != KVC_OK) {
        FAIL("kvo_read_block(%d) of seq %" PRIu64 ", group %d", block, s.id, grp);
        return false;
    }
    ssm_page(grp, s.ids[size_t(from - 1)], w.page.data(), int64_t(w.page.size()));
    if (memcmp(w.block.data(), w.page.data(), size_t(g.groups[size_t(grp)].group_bytes)) == 0) return true;
    char msg[256];
    snprintf(msg, sizeof msg, "seq %" PRIu64 " (tenant %d, %" PRId64 " tokens) group %d (SSM) block #%" PRId64
             " = block id %d does not hold the state after position %" PRId64 " when its next tokens are computed",
             s.id, s.tenant, s.n(), grp, b, block, from - 1);
    mismatch(w, const_cast<Seq &>(s), SITE_SSM_READ, msg);  // the owner's record: only its corrupt flag changes
    return false;
}

// The forward pass of positions [from, to) in every group after 0 (to = s.n()).
void write_groups(Worker &w, const Seq &s, int64_t from, int64_t to) {
    const int64_t bs = g.shape.block_size;
    for (int32_t grp = 1; grp < int32_t(g.groups.size()); ++grp) {
        const GroupView &G = g.groups[size_t(grp)];
        int64_t len = 0;
        if (!group_table(w, s, grp, &len)) return;
        if (G.kind == KVC_GROUP_SSM) check_ssm_read(w, s, grp, len, from);  // then computes on, as a model would
        for (int64_t b = from / bs; b <= (to - 1) / bs; ++b) {
            const int32_t block = b < len ? w.table[size_t(b)] : -1;
            const int64_t lo = std::max(from, b * bs), hi = std::min(to, (b + 1) * bs);
            if (block < 0) {
                FAIL("seq %" PRIu64 " (%" PRId64 " tokens): group %d (%s) has no page for block #%" PRId64
                     " (entry %d of a %" PRId64 "-entry table) to write positions [%" PRId64 ", %" PRId64 ")",
                     s.id, s.n(), grp, G.name, b, block, len, lo, hi);
                return;
            }
            kvc_status st = KVC_OK;
            if (G.kind == KVC_GROUP_SSM) {
                ssm_page(grp, s.ids[size_t(hi - 1)], w.page.data(), int64_t(w.page.size()));
            } else {
                st = kvo_read_block(g.pool, block, w.page.data());
                set_rows(G.shape, grp, w.page.data(), lo - b * bs, &s.ids[size_t(lo)], hi - lo);
            }
            if (st == KVC_OK) st = kvc_storage_copy_blocks(g.pool, &block, 1, w.page.data(), 0);
            if (st != KVC_OK) {
                FAIL("writing group %d's page %d of seq %" PRIu64 " -> %s", grp, block, s.id, kvc_status_str(st));
                return;
            }
        }
    }
}

// Writes the oracle's KV of positions [from, to) of s (every layer).
void write_kv(Worker &w, const Seq &s, int64_t from, int64_t to) {
    if (to <= from) return;
    kvc_status st = kvc_seq_slot_mapping(g.pool, s.id, from, to - from, w.slots.data(), int64_t(w.slots.size()));
    if (st == KVC_OK) st = kvo_write(g.pool, &g.shape, w.slots.data(), &s.ids[size_t(from)], to - from, w.scratch.data(), nullptr);
    if (st != KVC_OK) FAIL("writing KV of seq %" PRIu64 " [%" PRId64 ", %" PRId64 ") -> %s", s.id, from, to, kvc_status_str(st));
    if (g.hybrid) write_groups(w, s, from, to);
    sync_device();
}

// Names a suspect whose bytes the wrong token of the block holds, or "".
std::string whose_bytes(const unsigned char *block, int32_t tok) {
    const int32_t bs = g.shape.block_size;
    for (const Suspect &sp : g.suspects)
        for (size_t p = size_t(tok); p < sp.ids.size(); p += size_t(bs))
            if (kvo_check_block(&g.shape, block, tok, &sp.ids[p], 1, nullptr) == 0)
                return "; it holds " + sp.name + "'s position " + std::to_string(p);
    return "";
}

// Counts a failed check. Wrong bytes stay wrong, so every later check of the same sequence (and of
// its forks) fails too: only the first one, a new corruption, is printed and counted as such.
void mismatch(const Worker &w, Seq &s, Site site, const char *detail) {
    int64_t none = -1;
    const int64_t us = int64_t(elapsed() * 1e6);
    g.first_mismatch_us.compare_exchange_strong(none, us);
    g.bad_checks[site].fetch_add(1);
    if (s.corrupt) return;
    s.corrupt = true;
    if (g.corruptions.fetch_add(1) < kMaxPrinted)
        fprintf(stderr, "MISMATCH at %.3fs, thread %d, %s: %s\n", double(us) / 1e6, w.idx, kSiteNames[site], detail);
}

// Reads every page after group 0's that s's groups hold for positions [from, to) and checks it
// (blocks a window released, -1, are skipped unless the window still needs them).
void verify_groups(Worker &w, Seq &s, int64_t from, int64_t to, Site site, const char *context) {
    const int64_t bs = g.shape.block_size, n = s.n();
    for (int32_t grp = 1; grp < int32_t(g.groups.size()); ++grp) {
        const GroupView &G = g.groups[size_t(grp)];
        int64_t len = 0;
        if (!group_table(w, s, grp, &len)) return;
        for (int64_t b = from / bs; b <= (to - 1) / bs; ++b) {
            const int32_t block = b < len ? w.table[size_t(b)] : -1;
            if (block < 0) {
                if (must_hold(G, s, b)) {
                    FAIL("seq %" PRIu64 " (%" PRId64 " tokens, last call from %" PRId64 "): group %d (%s) released block #%" PRId64
                         " (table of %" PRId64 ") that its window still needs",
                         s.id, n, s.f, grp, G.name, b, len);
                    return;
                }
                g.released_skipped.fetch_add(1, std::memory_order_relaxed);
                continue;
            }
            if (kvo_read_block(g.pool, block, w.block.data()) != KVC_OK) {
                FAIL("kvo_read_block(%d) of seq %" PRIu64 ", group %d", block, s.id, grp);
                return;
            }
            g.group_blocks[grp].fetch_add(1, std::memory_order_relaxed);
            const int64_t lo = std::max(from, b * bs), hi = std::min(to, (b + 1) * bs);
            char msg[640];
            if (G.kind == KVC_GROUP_SSM) {
                const int64_t last = std::min(n, (b + 1) * bs) - 1;
                ssm_page(grp, s.ids[size_t(last)], w.page.data(), int64_t(w.page.size()));
                if (memcmp(w.block.data(), w.page.data(), size_t(G.group_bytes)) == 0) continue;
                std::string held = "not the state after any position of this sequence";
                for (int64_t p = 0; p < n; ++p) {
                    ssm_page(grp, s.ids[size_t(p)], w.page.data(), int64_t(w.page.size()));
                    if (memcmp(w.block.data(), w.page.data(), size_t(G.group_bytes)) == 0) {
                        held = "the state after its position " + std::to_string(p);
                        break;
                    }
                }
                snprintf(msg, sizeof msg,
                         "seq %" PRIu64 " (tenant %d, %" PRId64 " tokens) group %d (%s) block #%" PRId64 " = block id %d: "
                         "expected the state after position %" PRId64 ", the page holds %s%s",
                         s.id, s.tenant, n, grp, G.name, b, block, last, held.c_str(), context);
            } else {
                for (int64_t p = lo; p < hi; ++p) w.gids[size_t(p - lo)] = group_id(s.ids[size_t(p)], grp);
                int32_t bad_tok = -1;
                const int64_t bad = kvo_check_block(&G.shape, w.block.data(), int32_t(lo - b * bs), w.gids.data(),
                                                    int32_t(hi - lo), &bad_tok);
                if (bad == 0) continue;
                snprintf(msg, sizeof msg,
                         "seq %" PRIu64 " (tenant %d, %" PRId64 " tokens) group %d (%s) block #%" PRId64 " = block id %d, "
                         "positions [%" PRId64 ", %" PRId64 "): %" PRId64 " wrong elements, first at position %" PRId64 "%s",
                         s.id, s.tenant, n, grp, G.name, b, block, lo, hi, bad, b * bs + bad_tok, context);
            }
            mismatch(w, s, site, msg);
            return;  // one message per check
        }
    }
}

// Reads the blocks holding positions [from, to) of s and checks them against the oracle (hybrid:
// group 0's as on a plain pool, then the other groups').
void verify_kv(Worker &w, Seq &s, int64_t from, int64_t to, Site site, const char *context = "") {
    if (to <= from) return;
    g.checks[site].fetch_add(1, std::memory_order_relaxed);
    int64_t len = 0;
    if (kvc_seq_block_table(g.pool, s.id, w.table.data(), int64_t(w.table.size()), &len) != KVC_OK) {
        FAIL("kvc_seq_block_table(seq %" PRIu64 ")", s.id);
        return;
    }
    const int64_t bs = g.shape.block_size;
    for (int64_t b = from / bs; b <= (to - 1) / bs; ++b) {
        const int64_t lo = std::max(from, b * bs), hi = std::min(to, (b + 1) * bs);
        const int32_t block = w.table[size_t(b)];
        if (kvo_read_block(g.pool, block, w.block.data()) != KVC_OK) {
            FAIL("kvo_read_block(%d) of seq %" PRIu64, block, s.id);
            return;
        }
        g.group_blocks[0].fetch_add(1, std::memory_order_relaxed);
        int32_t bad_tok = -1;
        const int64_t bad = kvo_check_block(&g.shape, w.block.data(), int32_t(lo - b * bs), &s.ids[size_t(lo)],
                                            int32_t(hi - lo), &bad_tok);
        if (bad == 0) continue;
        char msg[512];
        snprintf(msg, sizeof msg,
                 "seq %" PRIu64 " (tenant %d, %" PRId64 " tokens) block #%" PRId64 " = block id %d, positions [%" PRId64
                 ", %" PRId64 "): %" PRId64 " wrong elements, first at position %" PRId64 "%s%s",
                 s.id, s.tenant, s.n(), b, block, lo, hi, bad, b * bs + bad_tok, whose_bytes(w.block.data(), bad_tok).c_str(),
                 context);
        mismatch(w, s, site, msg);
        return;  // one message per check
    }
    if (g.hybrid) verify_groups(w, s, from, to, site, context);
}

// ---- sequence operations --------------------------------------------------------------------

kvc_keys *keys_of(Worker &w, const Seq &s) { return w.keys[size_t(s.tenant)]; }

// kvc_copy_pending as the owner calls it after an append (d1: serialized among the COW threads).
void copy_pending() {
    std::unique_lock<std::mutex> lk(g.cow_mu, std::defer_lock);
    if (g.serialize_cow) lk.lock();
    int64_t copied = -1;
    if (kvc_copy_pending(g.pool, nullptr, &copied) == KVC_OK && copied >= 0) count(OP_COPY_PENDING);
    else FAIL("kvc_copy_pending");
}

// Where a prefix lookup found the prompt just before the alloc (racy: for messages only).
std::string tiers_before(Worker &w, const Seq &s) {
    if (g.hybrid) return "";  // kvc_prefix_lookup_tiers: KVC_ERR_UNSUPPORTED on hybrid pools
    int64_t dev = 0, host = 0, disk = 0;
    if (kvc_prefix_lookup_tiers(g.pool, s.toks.data(), s.n(), keys_of(w, s), &dev, &host, &disk) != KVC_OK) return "";
    char buf[128];
    snprintf(buf, sizeof buf, " (lookup just before the alloc: %" PRId64 " tokens on the device, %" PRId64
             " in the host tier, %" PRId64 " on disk)", dev, host, disk);
    return buf;
}

// kvc_alloc of s's prompt (its record already filled): verifies the hit, writes the rest.
// Returns false when the pool refused (OUT_OF_BLOCKS); the record is then not live.
bool alloc_seq(Worker &w, Seq &s) {
    w.doing = "kvc_alloc, hit check, write";
    const std::vector<uint64_t> made = completed_blocks(s, 0, s.n());
    const std::string where = tiers_before(w, s);
    g_inflight.add(made.data(), made.size());
    int64_t cached = -1;
    // Half the admissions go through kvc_admit (verdict + allocation in one walk): a verdict other
    // than OK is a refusal, as OUT_OF_BLOCKS is for kvc_alloc.
    const bool admit = rng_next(&w.rng) % 2 == 0;
    int32_t verdict = KVC_ALLOC_OK;
    const kvc_status st = admit ? kvc_admit(g.pool, s.id, s.toks.data(), s.n(), keys_of(w, s), &verdict, &cached)
                                : kvc_alloc(g.pool, s.id, s.toks.data(), s.n(), keys_of(w, s), &cached);
    if (!expect(st, admit ? "kvc_admit" : "kvc_alloc", s.id, {KVC_ERR_OUT_OF_BLOCKS}) || verdict != KVC_ALLOC_OK) {
        if (st == KVC_OK) count(OP_REFUSED);
        g_inflight.remove(made.data(), made.size());
        return false;
    }
    count(OP_ALLOC);
    s.live = true;
    s.swapped = false;
    if (cached < 0 || cached >= s.n() || cached % g.shape.block_size != 0)
        FAIL("kvc_alloc(seq %" PRIu64 ") reported %" PRId64 " cached of %" PRId64, s.id, cached, s.n());
    cached = std::max<int64_t>(0, std::min<int64_t>(cached, int64_t(made.size()) * g.shape.block_size));
    const size_t hit_blocks = size_t(cached / g.shape.block_size);
    s.f = cached;
    s.f_before = -1;
    g_inflight.remove(made.data(), hit_blocks);  // not ours to produce: someone else's, maybe in progress
    if (!g_inflight.wait_clear(made.data(), hit_blocks, g.opt.watchdog / 2))
        FAIL("seq %" PRIu64 ": a hit block is still being written by its producer", s.id);
    verify_kv(w, s, 0, cached, SITE_HIT, where.c_str());
    write_kv(w, s, cached, s.n());
    g_inflight.remove(made.data() + hit_blocks, made.size() - hit_blocks);
    return true;
}

// Fills s's record with a new prompt and allocates it.
bool start_seq(Worker &w, Seq &s, int tenant, const std::vector<int32_t> &toks) {
    s.tenant = tenant;
    s.corrupt = false;
    cut_tokens(s, 0);
    push_tokens(w, s, toks);
    return alloc_seq(w, s);
}

// An append whose KV is not written yet: the positions it confirmed, and the blocks it may have
// entered in the prefix cache (in production until written).
struct Appended {
    bool ok = false;
    int64_t from = 0;
    std::vector<uint64_t> made;
};

// kvc_append of toks (+ lookahead slots) to s; the record follows on success.
Appended append_tokens(Worker &w, Seq &s, const std::vector<int32_t> &toks, int64_t lookahead) {
    w.doing = "kvc_append";
    Appended a;
    a.from = s.n();
    push_tokens(w, s, toks);
    a.made = completed_blocks(s, a.from, s.n());
    g_inflight.add(a.made.data(), a.made.size());
    const int32_t none = 0;  // a lookahead-only append passes no token
    const int32_t *ids = toks.empty() ? &none : toks.data();
    // Half the appends go through kvc_append_batch (one entry: its semantics are kvc_append's).
    const bool batch = rng_next(&w.rng) % 2 == 0;
    const int64_t offsets[2] = {0, int64_t(toks.size())};
    const kvc_status st = batch ? kvc_append_batch(g.pool, 1, &s.id, offsets, ids, lookahead, nullptr, nullptr, nullptr)
                                : kvc_append(g.pool, s.id, ids, int64_t(toks.size()), lookahead, nullptr);
    a.ok = expect(st, batch ? "kvc_append_batch" : "kvc_append", s.id, {KVC_ERR_OUT_OF_BLOCKS});
    if (a.ok) {
        count(OP_APPEND);
        s.f_before = s.f;
        s.f = a.from;
        return a;
    }
    g_inflight.remove(a.made.data(), a.made.size());
    cut_tokens(s, a.from);
    return a;
}

// The forward pass of an append: the owner's kvc_copy_pending (copy_first; without it the write
// itself completes the pairs queued before it, kvc.h), the new tokens' KV, and a check of the
// block(s) they went to, shared positions included (what a copy-on-write copied).
void finish_append(Worker &w, Seq &s, const Appended &a, bool copy_first) {
    w.doing = "kvc_copy_pending, write, check";
    if (copy_first) copy_pending();  // the pairs the append queued are copied when it returns, whoever drained them
    write_kv(w, s, a.from, s.n());
    g_inflight.remove(a.made.data(), a.made.size());
    verify_kv(w, s, a.from / g.shape.block_size * g.shape.block_size, s.n(), SITE_APPEND_TAIL);
}

bool extend_seq(Worker &w, Seq &s, const std::vector<int32_t> &toks, int64_t lookahead) {
    const Appended a = append_tokens(w, s, toks, lookahead);
    if (a.ok) finish_append(w, s, a, true);
    return a.ok;
}

std::vector<int32_t> random_tokens(Worker &w, int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto &x : t) x = int32_t(rnd(&w.rng, 4));
    return t;
}

// A sequence found corrupt is aborted, so that its wrong blocks leave the prefix cache where no
// one else holds them (later hits would count the same corruption again).
void release_seq(Worker &w, Seq &s, bool abort) {
    abort = abort || s.corrupt;
    s.corrupt = false;
    const kvc_status st = abort ? kvc_abort(g.pool, s.id) : kvc_free(g.pool, s.id);
    if (expect(st, abort ? "kvc_abort" : "kvc_free", s.id)) count(abort ? OP_ABORT : OP_FREE);
    s.live = s.swapped = false;
}

// The fewest tokens kvc_truncate may keep of s: 1, or on a hybrid pool what the next token's window
// needs (kvc.h: no cut below what the next token attends to): m - W + 1 >= the end of the blocks a
// windowed group released.
int64_t min_kept(Worker &w, const Seq &s) {
    int64_t lowest = 1;
    for (int32_t grp = 1; grp < int32_t(g.groups.size()); ++grp) {
        const GroupView &G = g.groups[size_t(grp)];
        int64_t len = 0, released = 0;
        if (G.window == 0 || !group_table(w, s, grp, &len)) continue;
        while (released < len && w.table[size_t(released)] < 0) ++released;
        if (released > 0) lowest = std::max(lowest, released * g.shape.block_size + G.window - 1);
    }
    return lowest;
}

// Issue 21's D4 window, between a child's append and its copy: the parent truncates into its last
// block and writes a new token there in place, with no kvc_copy_pending of its own (it may: the
// write completes the child's queued pair first, kvc.h). Both must keep their own bytes.
void rewrite_parent_tail(Worker &w, Seq &parent) {
    const int64_t n = parent.n(), start = (n - 1) / g.shape.block_size * g.shape.block_size;
    const int64_t lowest = min_kept(w, parent);
    if (lowest > n) return;
    const int64_t m = std::max(lowest, start + 1 + rnd(&w.rng, n - start));  // keeps at least one token of the block
    if (!expect(kvc_truncate(g.pool, parent.id, m, nullptr), "kvc_truncate", parent.id)) return;
    count(OP_TRUNCATE);
    cut_tokens(parent, m);
    parent.f = std::min(parent.f, m);
    const Appended a = append_tokens(w, parent, random_tokens(w, 1), 0);
    if (a.ok) finish_append(w, parent, a, false);
}

// kvc_fork parent -> child, then one token into the child (copy-on-write of a partial last
// block; rewrite_parent: with the parent's D4 rewrite before the child's copy); the parent's tail
// must be untouched.
bool fork_seq(Worker &w, Seq &parent, Seq &child, bool rewrite_parent) {
    w.doing = "kvc_fork";
    if (!expect(kvc_fork(g.pool, parent.id, child.id), "kvc_fork", parent.id)) return false;
    count(OP_FORK);
    child.live = true;
    child.swapped = false;
    child.corrupt = parent.corrupt;
    child.tenant = parent.tenant;
    child.toks = parent.toks;
    child.ids = parent.ids;
    child.f = parent.f;
    child.f_before = parent.f_before;
    const Appended a = append_tokens(w, child, random_tokens(w, 1), 0);
    if (a.ok && rewrite_parent) {
        count(OP_FORK_REWRITE);
        rewrite_parent_tail(w, parent);
    }
    if (a.ok) finish_append(w, child, a, true);
    const int64_t n = parent.n();
    verify_kv(w, parent, (n - 1) / g.shape.block_size * g.shape.block_size, n, SITE_FORK_PARENT);
    return true;
}

// kvc_truncate to a random length, the kept tail checked, then a different continuation appended.
void truncate_seq(Worker &w, Seq &s) {
    w.doing = "kvc_truncate";
    const int64_t lowest = min_kept(w, s);
    if (lowest > s.n()) return;
    const int64_t m = lowest + rnd(&w.rng, s.n() - lowest + 1);
    if (!expect(kvc_truncate(g.pool, s.id, m, nullptr), "kvc_truncate", s.id)) return;
    count(OP_TRUNCATE);
    cut_tokens(s, m);
    s.f = std::min(s.f, m);
    verify_kv(w, s, (m - 1) / g.shape.block_size * g.shape.block_size, m, SITE_TRUNCATE_KEPT);
    extend_seq(w, s, random_tokens(w, 1 + rnd(&w.rng, 2)), rnd(&w.rng, kMaxLookahead + 1));
}

void swap_seq(Worker &w, Seq &s) {
    w.doing = s.swapped ? "kvc_swap_in, check" : "kvc_swap_out";
    if (s.swapped) {
        if (!expect(kvc_swap_in(g.pool, s.id, nullptr), "kvc_swap_in", s.id, {KVC_ERR_OUT_OF_BLOCKS})) return;
        count(OP_SWAP_IN);
        s.swapped = false;
        sync_device();  // the copies run on the tier stream; the read below orders after them too
        verify_kv(w, s, 0, s.n(), SITE_SWAP_IN);
        return;
    }
    uint64_t op = 0;
    if (!expect(kvc_swap_out(g.pool, s.id, &op), "kvc_swap_out", s.id, {KVC_ERR_OUT_OF_BLOCKS})) return;
    count(OP_SWAP_OUT);
    s.swapped = true;
    if (kvc_op_wait(g.pool, op) != KVC_OK) FAIL("kvc_op_wait(%" PRIu64 ")", op);
}

// Pins the first two blocks of a family's prefix under a tenant's keys, or undoes this thread's pin.
void pin_or_unpin(Worker &w) {
    w.doing = "kvc_prefix_pin / unpin";
    if (!w.pins.empty()) {
        Pin &p = w.pins.back();
        if (expect(kvc_prefix_unpin(g.pool, p.toks.data(), int64_t(p.toks.size()), w.keys[size_t(p.tenant)], nullptr),
                   "kvc_prefix_unpin", 0))
            count(OP_UNPIN);
        w.pins.pop_back();
        return;
    }
    const int tenant = int(rnd(&w.rng, kTenants));
    std::vector<int32_t> toks = family_prompt(rnd(&w.rng, kFamilies), 2 * g.shape.block_size, 2 * g.shape.block_size, &w.rng);
    int64_t pinned = -1;
    if (!expect(kvc_prefix_pin(g.pool, toks.data(), int64_t(toks.size()), w.keys[size_t(tenant)], &pinned), "kvc_prefix_pin", 0))
        return;
    count(OP_PIN);
    if (pinned > 0) w.pins.push_back(Pin{tenant, std::vector<int32_t>(toks.begin(), toks.begin() + pinned)});
}

// ---- attention --------------------------------------------------------------------------------

// What a zero query's (uniform) attention returns for the q_len newest tokens of s at `layer`: for
// query j, the mean of the oracle's V over positions 0 .. n - q_len + j. Layout [q_len][q_heads][d].
std::vector<double> uniform_attention(const Seq &s, int32_t layer, int64_t q_len) {
    const int32_t D = g.shape.head_dim, H = g.shape.kv_heads, group = g.q_heads / H;
    std::vector<double> sum(size_t(H * D), 0.0), out;
    for (int64_t p = 0; p < s.n(); ++p) {
        for (int32_t h = 0; h < H; ++h)
            for (int32_t d = 0; d < D; ++d) sum[size_t(h * D + d)] += kvo_value(s.ids[size_t(p)], layer, 1, h, d);
        if (p < s.n() - q_len) continue;
        for (int32_t qh = 0; qh < g.q_heads; ++qh)
            for (int32_t d = 0; d < D; ++d) out.push_back(sum[size_t(qh / group * D + d)] / double(p + 1));
    }
    return out;
}

// Compares the launch output of one sequence (rows of its q_len queries) with the oracle.
void check_attention(Worker &w, Seq &s, int32_t layer, int64_t q_len, const float *out) {
    g.checks[SITE_ATTENTION].fetch_add(1, std::memory_order_relaxed);
    const std::vector<double> want = uniform_attention(s, layer, q_len);
    for (size_t i = 0; i < want.size(); ++i) {
        if (std::abs(double(out[i]) - want[i]) <= 2e-3) continue;
        const size_t row = size_t(g.q_heads) * size_t(g.shape.head_dim);
        char msg[256];
        snprintf(msg, sizeof msg, "seq %" PRIu64 " (%" PRId64 " tokens) layer %d query %zu of %" PRId64 ": %.6f, expected %.6f",
                 s.id, s.n(), layer, i / row, q_len, double(out[i]), want[i]);
        mismatch(w, s, SITE_ATTENTION, msg);
        return;
    }
}

// Builds a batch over up to kBatchSeqs of this thread's resident sequences (decode or a prefill
// of their newest tokens), launches attention with a zero query and checks every output row.
void batch_and_launch(Worker &w) {
    w.doing = "kvc_batch_build, kvc_launch_attention";
    uint64_t ids[kBatchSeqs];
    int64_t qlens[kBatchSeqs];
    Seq *picked[kBatchSeqs];
    int n = 0;
    int64_t tokens = 0;
    for (Seq &s : w.seqs) {
        if (!s.live || s.swapped || n == kBatchSeqs) continue;
        picked[n] = &s;
        ids[n] = s.id;
        qlens[n] = rnd(&w.rng, 2) ? 1 : 1 + rnd(&w.rng, std::min<int64_t>(s.n(), kMaxQLen));
        tokens += qlens[n++];
    }
    if (n == 0) return;
    if (!expect(kvc_batch_build(w.batch, ids, qlens, n), "kvc_batch_build", ids[0])) return;
    const size_t row = size_t(g.q_heads) * size_t(g.shape.head_dim);
    std::vector<float> q(size_t(tokens) * row, 0.0f), out(size_t(tokens) * row, -1.0f);
    kvc_attention_params params;
    kvc_attention_params_default(&params);
    params.q_dtype = KVC_DTYPE_F32;
    const int32_t layer = int32_t(rnd(&w.rng, g.shape.layers));
    if (!expect(kvc_launch_attention(g.pool, w.batch, layer, q.data(), out.data(), &params, nullptr), "kvc_launch_attention", ids[0]))
        return;
    sync_device();
    count(OP_BATCH_LAUNCH);
    size_t at = 0;
    for (int i = 0; i < n; ++i) {
        check_attention(w, *picked[i], layer, qlens[i], &out[at]);
        at += size_t(qlens[i]) * row;
    }
}

// ---- the mixed worker (mode all) --------------------------------------------------------------

std::vector<int32_t> random_prompt(Worker &w) {
    const int64_t family = rnd(&w.rng, kFamilies);
    const int64_t shared = 6 + family * 5 % 19;  // 6 .. 24 tokens of the family
    return family_prompt(family, shared, shared + 1 + rnd(&w.rng, 10), &w.rng);
}

Seq *free_slot(Worker &w) {
    for (Seq &s : w.seqs)
        if (!s.live) return &s;
    return nullptr;
}

// An unwritten sequence under the thread's private salt, aborted: its blocks must leave the cache
// (the same prompt must then miss, or a later hit would serve KV that was never written).
void abort_unwritten(Worker &w, Seq &s) {
    std::vector<int32_t> toks = family_prompt(1000 + w.idx, 12, 12 + rnd(&w.rng, 5), &w.rng);
    int64_t before = -1, cached = -1;
    kvc_keys *priv = w.keys[size_t(private_tenant())];
    if (kvc_prefix_lookup(g.pool, toks.data(), int64_t(toks.size()), priv, &before) != KVC_OK || before != 0)
        FAIL("thread %d's private prompt has %" PRId64 " cached tokens after its aborts", w.idx, before);
    s.tenant = private_tenant();
    cut_tokens(s, 0);
    push_tokens(w, s, toks);
    if (!expect(kvc_alloc(g.pool, s.id, toks.data(), s.n(), priv, &cached), "kvc_alloc", s.id, {KVC_ERR_OUT_OF_BLOCKS}))
        return;
    count(OP_ALLOC);
    if (cached != 0) FAIL("thread %d's private prompt hit %" PRId64 " tokens after its aborts", w.idx, cached);
    s.live = true;
    s.corrupt = false;
    release_seq(w, s, true);
}

void new_sequence(Worker &w, Seq &s) {
    const int64_t r = rnd(&w.rng, 10);
    if (r == 0) return abort_unwritten(w, s);
    std::vector<int32_t> toks = random_prompt(w);
    const int tenant = int(rnd(&w.rng, kTenants));
    if (g.opt.tiers && !g.hybrid && r < 4) {  // a queued request's disk hits read up ahead of its alloc
        int64_t c = -1;
        if (expect(kvc_tier_prefetch(g.pool, toks.data(), int64_t(toks.size()), w.keys[size_t(tenant)], &c),
                   "kvc_tier_prefetch", s.id))
            count(OP_PREFETCH);
    }
    start_seq(w, s, tenant, toks);
}

void read_stats() {
    kvc_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    if (kvc_pool_stats(g.pool, &st) != KVC_OK) FAIL("kvc_pool_stats");
    else if (st.free_blocks + st.used_blocks > st.total_blocks) FAIL("stats: free %" PRId64 " + used %" PRId64 " > total", st.free_blocks, st.used_blocks);
    count(OP_STATS);
}

void check_pool() {
    if (kvc_pool_check(g.pool) != KVC_OK) FAIL("kvc_pool_check mid-run");
    count(OP_CHECK);
}

// 0-3 tokens with 0-2 lookahead slots (a speculative step reserves them; a later append confirms them).
void decode_step(Worker &w, Seq &s) {
    int64_t add = rnd(&w.rng, 4), look = rnd(&w.rng, kMaxLookahead + 1);
    if (add == 0 && look == 0) add = 1;
    extend_seq(w, s, random_tokens(w, add), look);
}

// One operation on a resident sequence, drawn by weight.
void operate(Worker &w, Seq &s) {
    const int64_t r = rnd(&w.rng, 100);
    Seq *other = free_slot(w);
    if (r < 30 && s.n() + 3 + kMaxLookahead <= kMaxLen) {
        decode_step(w, s);
    } else if (r < 30) {
        release_seq(w, s, false);  // long enough
    } else if (r < 42 && other && s.n() < kMaxLen) {
        fork_seq(w, s, *other, g.opt.d4_window && rnd(&w.rng, 4) == 0);
    } else if (r < 50 && g.has_ssm) {
        verify_kv(w, s, 0, s.n(), SITE_WHOLE_SEQ);  // no kvc_truncate below the confirmed tokens with SSM state
    } else if (r < 50 && s.n() + 3 <= kMaxLen) {
        truncate_seq(w, s);
    } else if (r < 58) {
        release_seq(w, s, r < 52);  // abort of a sequence whose KV was written: as free, uncached
    } else if (r < 63 && g.opt.tiers) {
        swap_seq(w, s);
    } else if (r < 78) {
        batch_and_launch(w);
    } else if (r < 88) {
        verify_kv(w, s, 0, s.n(), SITE_WHOLE_SEQ);
    } else if (r < 92) {
        copy_pending();
    } else if (r < 96 && !g.hybrid) {  // kvc_prefix_pin / unpin: KVC_ERR_UNSUPPORTED on hybrid pools
        pin_or_unpin(w);
    } else if (r < 97 && g.opt.tiers && !g.hybrid && rnd(&w.rng, 8) == 0) {
        int64_t blocks = -1;
        if (expect(kvc_tier_flush(g.pool, &blocks), "kvc_tier_flush", 0)) count(OP_FLUSH);
    } else {
        read_stats();
    }
}

// A random slot of the thread: start a sequence there, bring it back, or operate on it.
void operate_or_start(Worker &w) {
    Seq &s = w.seqs[size_t(rnd(&w.rng, int64_t(w.seqs.size())))];
    if (!s.live) return new_sequence(w, s);
    if (s.swapped) return rnd(&w.rng, 4) ? swap_seq(w, s) : release_seq(w, s, false);
    operate(w, s);
}

int64_t now_ms() { return int64_t(elapsed() * 1000); }

// Starts the thread's next operation if the run goes on (time, --ops), and beats its heart.
bool budget_left(Worker &w) {
    w.beat_ms = now_ms();
    if (g.stop.load()) return false;
    const uint64_t done = g.progress.fetch_add(1) + 1;
    if (g.opt.max_ops > 0 && int64_t(done) >= g.opt.max_ops) g.stop.store(true);
    return true;
}

// Frees every sequence and pin of the thread (at the end of the run).
void release_all(Worker &w) {
    w.beat_ms = now_ms();
    w.doing = "final release";
    for (Seq &s : w.seqs)
        if (s.live) release_seq(w, s, false);
    while (!w.pins.empty()) pin_or_unpin(w);
}

void mixed_worker(Worker &w) {
    if (kvc_batch_create(g.pool, kBatchSeqs, kBatchSeqs * kMaxQLen, int32_t(w.table.size()), &w.batch) != KVC_OK)
        FAIL("kvc_batch_create");
    while (w.batch && budget_left(w)) {
        w.doing = "choosing";
        operate_or_start(w);
    }
    release_all(w);
}

// ---- d1 / d2 roles -----------------------------------------------------------------------------

constexpr int kD1Prompt = 49;

// d1: alloc a 49-token prompt of one of ~3000 families, verify the hit, write the rest, free.
void prompt_worker(Worker &w) {
    Seq &s = w.seqs[0];
    while (budget_left(w)) {
        w.doing = "alloc + verify hit + write";
        const int64_t family = rnd(&w.rng, g.opt.families);
        if (start_seq(w, s, 0, family_prompt(family, kD1Prompt - 1, kD1Prompt, &w.rng))) release_seq(w, s, false);
    }
}

// d1/d2: fork the parent (seqs[0], last block partial), one token into the child, copy, write,
// verify, free.
void cow_worker(Worker &w) {
    Seq &parent = w.seqs[0], &child = w.seqs[1];
    while (budget_left(w)) {
        w.doing = "fork + append + copy_pending + write + verify";
        if (fork_seq(w, parent, child, false)) release_seq(w, child, false);
    }
    release_all(w);
}

// A parent whose last block is partial (one full block and 4 tokens), for cow_worker.
void make_parent(Worker &w) {
    const int64_t n = g.shape.block_size + 4;
    if (!start_seq(w, w.seqs[0], 0, family_prompt(100000 + w.idx, n, n, &w.rng))) {
        FAIL("parent of thread %d", w.idx);
        return;
    }
    g.suspects.push_back(Suspect{"copy-on-write parent " + std::to_string(w.seqs[0].id), w.seqs[0].ids});
}

// ---- background threads -----------------------------------------------------------------------

void drainer(std::atomic<bool> *quit) {
    while (!quit->load()) {
        int64_t copied = -1;
        if (kvc_copy_pending(g.pool, nullptr, &copied) != KVC_OK) FAIL("drainer's kvc_copy_pending");
        count(OP_COPY_PENDING);
        if (copied == 0) std::this_thread::yield();
    }
}

void pop_events() {
    kvc_event e;
    std::vector<int32_t> toks(size_t(g.shape.block_size));
    for (int i = 0; i < 16; ++i) {
        memset(&e, 0, sizeof e);
        e.struct_size = sizeof e;
        int32_t has = 0;
        if (kvc_event_pop(g.pool, &e, toks.data(), int64_t(toks.size()), &has) != KVC_OK) FAIL("kvc_event_pop");
        if (!has) return;
        count(OP_EVENTS);
        if (e.type < KVC_EVENT_BLOCK_STORED || e.type > KVC_EVENT_ALL_BLOCKS_CLEARED) FAIL("event type %d", e.type);
    }
}

// Stats, the invariant checker and the event ring, all the time (paced: kvc_pool_check holds the
// pool lock for O(blocks) and std::mutex is not fair).
void monitor(std::atomic<bool> *quit) {
    while (!quit->load()) {
        read_stats();
        check_pool();
        pop_events();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

// Aborts the process when a thread spent opt.watchdog seconds in one operation (or the final
// release): a hang (a deadlock in the library, a copy never done) must fail the test, not stall CI.
void watchdog(std::atomic<bool> *quit, const std::vector<std::unique_ptr<Worker>> *workers) {
    while (!quit->load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const int64_t now = now_ms();
        const Worker *stuck = nullptr;
        for (const auto &w : *workers) {
            const int64_t beat = w->beat_ms.load();
            if (beat >= 0 && double(now - beat) > g.opt.watchdog * 1000) stuck = w.get();
        }
        if (!stuck) continue;
        fprintf(stderr, "WATCHDOG: thread %d made no progress for %gs (at %.1fs); threads:\n", stuck->idx,
                g.opt.watchdog, elapsed());
        for (const auto &w : *workers) fprintf(stderr, "  thread %d: %s\n", w->idx, w->doing.load());
        fflush(stderr);
        abort();
    }
}

// ---- pools and modes --------------------------------------------------------------------------

struct PoolSpec {
    int32_t block_size, num_blocks, host_slots, disk_slots;
};

char g_disk_path[64];

bool create_hybrid_pool(const PoolSpec &ps);

bool create_pool(const PoolSpec &ps) {
    if (g.hybrid) return create_hybrid_pool(ps);
    kvc_pool_config cfg;
    kvc_pool_config_default(&cfg);
    cfg.block_size = ps.block_size;
    cfg.num_blocks = ps.num_blocks;
    cfg.num_layers = 2;
    cfg.num_kv_heads = 2;
    cfg.num_q_heads = 4;
    cfg.head_dim = g.cuda ? 64 : 16;  // CUDA kernels take 64/80/96/128/256
    cfg.kv_dtype = g.opt.dtype;
    cfg.backend = g.opt.backend;
    cfg.watermark = 0.0;
    cfg.event_capacity = 256;
    if (kvc_pool_create(&cfg, &g.pool) != KVC_OK || kvo_shape_of(g.pool, &g.shape) != KVC_OK) {
        fprintf(stderr, "pool: %s\n", kvc_last_error());
        return false;
    }
    g.q_heads = cfg.num_q_heads;
    if (ps.host_slots > 0 && (kvc_pool_set_tier_events(g.pool, 1) != KVC_OK || kvc_tier_attach_host(g.pool, ps.host_slots) != KVC_OK)) {
        fprintf(stderr, "host tier: %s\n", kvc_last_error());
        return false;
    }
    if (ps.disk_slots > 0) {
        snprintf(g_disk_path, sizeof g_disk_path, "/tmp/kvc_stress_bytes_%d.bin", int(getpid()));
        const kvc_status st = kvc_tier_attach_disk(g.pool, g_disk_path, ps.disk_slots, 0);
        unlink(g_disk_path);  // the open file lives on; nothing is left behind
        if (st != KVC_OK) {
            fprintf(stderr, "disk tier: %s\n", kvc_last_error());
            return false;
        }
    }
    return true;
}

constexpr int32_t kHybridWindow = 6;  // the SLIDING group's window (not a multiple of the block size)

// Fills G from kvc_pool_get_group_info (attention groups: the layout inside a page, kv_layout.hpp).
bool group_view(int32_t grp, GroupView *G) {
    kvc_group_info gi;
    memset(&gi, 0, sizeof gi);
    gi.struct_size = sizeof gi;
    if (kvc_pool_get_group_info(g.pool, grp, &gi) != KVC_OK) return false;
    G->kind = gi.kind;
    G->window = gi.kind == KVC_GROUP_SLIDING ? gi.sliding_window : gi.kind == KVC_GROUP_SSM ? 1 : 0;
    G->group_bytes = gi.group_bytes;
    G->name = gi.kind == KVC_GROUP_FULL ? "FULL" : gi.kind == KVC_GROUP_SLIDING ? "SLIDING" : "SSM";
    kvo_shape &sh = G->shape;
    sh = g.shape;  // dtype, element size, block size
    sh.layers = gi.num_layers;
    sh.kv_heads = gi.num_kv_heads;
    sh.head_dim = gi.head_dim;
    sh.block_stride = gi.page_bytes;
    sh.layer_stride = gi.layer_stride;
    sh.token_stride = int64_t(sh.head_dim) * sh.elem_bytes;
    sh.head_stride = sh.block_size * sh.token_stride;
    sh.kv_stride = sh.kv_heads * sh.head_stride;
    if (gi.page_bytes != g.shape.block_stride || gi.group_bytes > gi.page_bytes ||
        (gi.kind != KVC_GROUP_SSM && gi.layer_stride != 2 * sh.kv_stride)) {
        fprintf(stderr, "group %d: unexpected geometry (page %" PRId64 ", group bytes %" PRId64 ", layer stride %" PRId64 ")\n",
                grp, gi.page_bytes, gi.group_bytes, gi.layer_stride);
        return false;
    }
    return true;
}

// --hybrid: FULL (model layers 0, 1) + SLIDING(kHybridWindow) + SSM (2 layers of 300 bytes of state),
// interleaved. Group 0's layers are the model's first ones so that kvc_cache_write and
// kvc_launch_attention reach them whether they take a model layer (kvc.h) or, as the library does
// today, a layer of group 0's layout; kvc_batch_set_group is declared but not in the library yet,
// so the SLIDING group has no launch here.
bool create_hybrid_pool(const PoolSpec &ps) {
    kvc_pool_config cfg;
    kvc_pool_config_default(&cfg);
    cfg.block_size = ps.block_size;
    cfg.num_blocks = ps.num_blocks;
    cfg.num_q_heads = 4;
    cfg.kv_dtype = g.opt.dtype;
    cfg.backend = g.opt.backend;
    cfg.watermark = 0.0;
    cfg.event_capacity = 256;
    kvc_group_config gc[3];
    for (auto &c : gc) kvc_group_config_default(&c);
    gc[0].num_layers = 2;
    gc[0].num_kv_heads = 2;
    gc[0].head_dim = 16;
    gc[1].kind = KVC_GROUP_SLIDING;
    gc[1].sliding_window = kHybridWindow;
    gc[1].num_layers = 2;
    gc[1].num_kv_heads = 1;
    gc[1].head_dim = 16;
    gc[2].kind = KVC_GROUP_SSM;
    gc[2].num_layers = 2;
    gc[2].state_bytes = 300;
    const int32_t l2g[6] = {0, 0, 1, 2, 1, 2}, l2g_no_ssm[4] = {0, 0, 1, 1};
    const int32_t groups = g.has_ssm ? 3 : 2;
    if (kvc_pool_create_hybrid(&cfg, gc, groups, g.has_ssm ? l2g : l2g_no_ssm, g.has_ssm ? 6 : 4, &g.pool) != KVC_OK ||
        kvo_shape_of(g.pool, &g.shape) != KVC_OK) {
        fprintf(stderr, "hybrid pool: %s\n", kvc_last_error());
        return false;
    }
    g.q_heads = cfg.num_q_heads;
    g.groups.resize(size_t(groups));
    for (int32_t i = 0; i < groups; ++i)
        if (!group_view(i, &g.groups[size_t(i)])) return false;
    // Group 0 goes through kvo_write / kvo_check_block with g.shape: its layout must be the storage's.
    const kvo_shape &g0 = g.groups[0].shape;
    if (g0.layer_stride != g.shape.layer_stride || g0.kv_stride != g.shape.kv_stride || g0.head_stride != g.shape.head_stride ||
        g0.token_stride != g.shape.token_stride || g0.kv_heads != g.shape.kv_heads || g0.head_dim != g.shape.head_dim) {
        fprintf(stderr, "hybrid pool: kvc_storage_get_info's strides are not group 0's\n");
        return false;
    }
    g.shape.layers = g0.layers;  // kvc_pool_get_config reports the model's layers
    if (ps.host_slots > 0 && (kvc_pool_set_tier_events(g.pool, 1) != KVC_OK || kvc_tier_attach_host(g.pool, ps.host_slots) != KVC_OK)) {
        fprintf(stderr, "host tier: %s\n", kvc_last_error());
        return false;
    }
    return true;
}

using Role = void (*)(Worker &);

struct Plan {
    PoolSpec pool;
    std::vector<Role> roles;  // one worker thread each
    int drainers;
    bool monitor;
};

Plan plan_for(const Options &o) {
    if (o.mode == "d1") {
        Plan p{{16, 64, 256, 0}, {}, 0, false};
        for (int i = 0; i < 4; ++i) p.roles.push_back(prompt_worker);
        for (int i = 0; i < 4; ++i) p.roles.push_back(cow_worker);
        return p;
    }
    if (o.mode == "d2") return Plan{{16, 64, 0, 0}, {cow_worker}, 2, false};
    if (o.hybrid)  // pages for three groups; host tier only (no disk tier on hybrid pools)
        return Plan{{4, 640, o.tiers ? 96 : 0, 0}, std::vector<Role>(size_t(o.threads), mixed_worker), 1, true};
    Plan p{{4, 320, o.tiers ? 48 : 0, o.tiers ? 512 : 0}, std::vector<Role>(size_t(o.threads), mixed_worker), 1, true};
    return p;
}

// ---- the end: everything freed, the pool whole --------------------------------------------------

void final_checks() {
    int64_t copied = -1;
    if (kvc_copy_pending(g.pool, nullptr, &copied) != KVC_OK) FAIL("final kvc_copy_pending");
    kvc_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    if (kvc_pool_stats(g.pool, &st) != KVC_OK) FAIL("final stats");
    if (kvc_pool_check(g.pool) != KVC_OK) FAIL("final kvc_pool_check");
    if (st.num_seqs != 0 || st.used_blocks != 0 || st.pinned_blocks != 0 || st.free_blocks != st.total_blocks ||
        st.pending_copies != 0)
        FAIL("pool not empty at the end: seqs %" PRId64 " used %" PRId64 " pinned %" PRId64 " free %" PRId64 " of %" PRId64
             " pending copies %" PRId64, st.num_seqs, st.used_blocks, st.pinned_blocks, st.free_blocks, st.total_blocks,
             st.pending_copies);
    kvc_tier_stats hs, ds;
    memset(&hs, 0, sizeof hs);
    memset(&ds, 0, sizeof ds);
    hs.struct_size = ds.struct_size = sizeof hs;
    kvc_tier_get_stats(g.pool, KVC_TIER_HOST, &hs);
    kvc_tier_get_stats(g.pool, KVC_TIER_DISK, &ds);
    if (hs.held_blocks != 0) FAIL("host tier still holds %" PRId64 " swapped-out blocks", hs.held_blocks);
    printf("pool: %" PRId64 " allocs, %" PRId64 " appends, %" PRId64 " forks, %" PRId64 " cow pairs, hits %" PRId64 "/%" PRId64
           " tokens, %" PRId64 " evictions; host tier %" PRId64 " in / %" PRId64 " out / %" PRId64 " hits; disk tier %" PRId64
           " in / %" PRId64 " hits / %" PRId64 " failures\n",
           st.allocs, st.appends, st.forks, st.cow_copies, st.prefix_hit_tokens, st.prefix_query_tokens, st.evictions,
           hs.blocks_in, hs.blocks_out, hs.hits, ds.blocks_in, ds.hits, ds.failures);
}

void print_summary(double seconds) {
    std::string pool_kind;
    if (g.hybrid) {
        pool_kind = ", hybrid pool";
        for (size_t i = 0; i < g.groups.size(); ++i) {
            pool_kind += (i ? " + " : " ") + std::string(g.groups[i].name);
            if (g.groups[i].kind == KVC_GROUP_SLIDING) pool_kind += "(" + std::to_string(g.groups[i].window) + ")";
        }
    }
    printf("stress_bytes %s (%s, %s KV%s%s): %.1fs, %" PRIu64 " worker operations\n  calls:", g.opt.mode.c_str(),
           g.cuda ? "CUDA backend" : "CPU backend", g.opt.dtype == KVC_DTYPE_F16 ? "f16" : "f32", pool_kind.c_str(),
           g.opt.tiers ? (g.hybrid ? ", host tier" : ", host+disk tiers") : "", seconds, uint64_t(g.progress.load()));
    for (int i = 0; i < NUM_OPS; ++i)
        if (g.ops[i].load()) printf(" %s %" PRId64, kOpNames[i], g.ops[i].load());
    printf("\n  byte checks (mismatches):");
    for (int i = 0; i < NUM_SITES; ++i)
        if (g.checks[i].load()) printf(" %s %" PRId64 " (%" PRId64 ")", kSiteNames[i], g.checks[i].load(), g.bad_checks[i].load());
    if (g.hybrid) {
        printf("\n  pages checked per group:");
        for (size_t i = 0; i < g.groups.size(); ++i) printf(" %zu %s %" PRId64, i, g.groups[i].name, g.group_blocks[i].load());
        printf("; released entries skipped %" PRId64, g.released_skipped.load());
    }
    const int64_t first = g.first_mismatch_us.load();
    printf("\n  mismatches %" PRId64 " (new corruptions %" PRId64 "), failures %" PRId64, total_mismatches(),
           g.corruptions.load(), g.failures.load());
    if (first >= 0) printf(", first mismatch after %.3fs", double(first) / 1e6);
    printf("\n");
}

bool parse(int argc, char **argv, Options *o) {
    if (argc < 2) return false;
    o->mode = argv[1];
    for (int i = 2; i < argc; ++i) {
        const std::string a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a == "--tiers") o->tiers = true;
        else if (a == "--no-d4") o->d4_window = false;
        else if (a == "--hybrid") o->hybrid = true;
        else if (a == "--no-ssm") o->ssm = false;
        else if (!v) return false;
        else if (a == "--seconds") o->seconds = atof(argv[++i]);
        else if (a == "--ops") o->max_ops = atoll(argv[++i]);
        else if (a == "--threads") o->threads = atoi(argv[++i]);
        else if (a == "--seed") o->seed = strtoull(argv[++i], nullptr, 10);
        else if (a == "--watchdog") o->watchdog = atof(argv[++i]);
        else if (a == "--families") o->families = atoll(argv[++i]);
        else if (a == "--dtype") o->dtype = strcmp(argv[++i], "f16") == 0 ? KVC_DTYPE_F16 : KVC_DTYPE_F32;
        else if (a == "--backend") o->backend = strcmp(argv[++i], "cuda") == 0 ? KVC_BACKEND_CUDA : KVC_BACKEND_CPU;
        else return false;
    }
    return (o->mode == "all" || o->mode == "d1" || o->mode == "d2") && o->seconds > 0 && o->threads >= 1 && o->watchdog > 0 &&
           o->families >= 1 && (!o->hybrid || (o->mode == "all" && o->backend == KVC_BACKEND_CPU)) && (o->ssm || o->hybrid);
}

}  // namespace

int main(int argc, char **argv) {
    if (!parse(argc, argv, &g.opt)) {
        fprintf(stderr, "usage: stress_bytes all|d1|d2 [--seconds S] [--ops N] [--threads N] [--tiers] "
                        "[--dtype f32|f16] [--backend cpu|cuda] [--seed N] [--watchdog S] [--families N] [--no-d4] "
                        "[--hybrid [--no-ssm]]\n");
        return 2;
    }
    g.cuda = g.opt.backend == KVC_BACKEND_CUDA;
    g.hybrid = g.opt.hybrid;
    g.has_ssm = g.hybrid && g.opt.ssm;
    if (g.has_ssm) g.opt.d4_window = false;  // its parent rewrite truncates below the confirmed tokens
    const Plan plan = plan_for(g.opt);
    if (!create_pool(plan.pool)) return 2;
    g.serialize_cow = g.opt.mode == "d1";
    g.start = Clock::now();

    std::vector<std::unique_ptr<Worker>> workers;
    for (size_t i = 0; i < plan.roles.size(); ++i) {
        workers.push_back(make_worker(int(i), plan.roles[i] == mixed_worker ? kSlots : 2));
        if (plan.roles[i] == cow_worker) make_parent(*workers.back());  // before any thread reads suspects
    }
    std::atomic<bool> quit_background{false}, quit_watchdog{false};
    std::vector<std::thread> threads, background;
    for (size_t i = 0; i < workers.size(); ++i)
        threads.emplace_back([role = plan.roles[i], w = workers[i].get()] {
            role(*w);
            w->beat_ms = -1;  // done: the watchdog stops watching it
        });
    for (int i = 0; i < plan.drainers; ++i) background.emplace_back(drainer, &quit_background);
    if (plan.monitor) background.emplace_back(monitor, &quit_background);
    std::thread dog(watchdog, &quit_watchdog, &workers);

    while (!g.stop.load() && elapsed() < g.opt.seconds) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    g.stop.store(true);
    for (auto &t : threads) t.join();
    const double seconds = elapsed();
    quit_background.store(true);
    for (auto &t : background) t.join();
    for (auto &w : workers) release_all(*w);  // d1's prompt workers hold nothing; the rest already did
    final_checks();
    quit_watchdog.store(true);
    dog.join();
    print_summary(seconds);
    for (auto &w : workers) destroy_worker(*w);
    kvc_pool_destroy(g.pool);
    return total_mismatches() == 0 && g.failures.load() == 0 ? 0 : 1;
}
