// Memory-access audit of the CUDA attention kernels (cuda/attention_kernel.cuh for decode,
// cuda/prefill_mma_kernel.cuh for tensor-core prefill), on the CPU emulator of CUDA. Every K/V
// global load of both kernels (and the MMA kernel's Q tile) is a 16-byte cp.async; the emulator
// records each call (cuda/emulation/access_audit.hpp), and this suite proves the properties
// decode bandwidth depends on — it measures access pattern, not speed:
//   (a) bytes: exactly the attended keys' K and V rows are loaded, each once per KV head (the GQA
//       read-once claim), only the window's keys with a sliding window, none past a sequence end;
//       prefill: each CTA loads exactly the keys its queries may see, once;
//   (b) coalescing: the 32-byte sectors a warp's cp.async instruction touches versus the bytes it
//       requests (sector efficiency), and whether each CTA uses every byte of every sector it
//       touches (what DRAM traffic depends on when L2 holds a sector between two requests);
//   (c) bounds: every valid load lies inside the KV storage or the q buffer, K/V loads in the
//       launch's layer and in the CTA's own sequence and KV head.
// The recorder exists only in a KVC_CUDA=EMULATE build (KVC_TEST_ACCESS_AUDIT, tests/CMakeLists.txt):
// elsewhere, a real GPU included, every test reports SKIPPED.
extern "C" {
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
}

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "storage/cuda_api.hpp"
#include "gpu/gpu_problem.hpp"
#include "test_kernels_fixture.hpp"
#if KVC_TEST_ACCESS_AUDIT
#include "../cuda/emulation/access_audit.hpp"
#endif

using kvc_gpu_test::DeviceBuffer;
using kvc_gpu_test::upload_vector;

namespace {


#if KVC_TEST_ACCESS_AUDIT

#define REQUIRE_AUDIT() KVC_REQUIRE_GPU("(emulated) CUDA")

constexpr int64_t kChunk = 16;   // bytes per cp.async
constexpr int64_t kSector = 32;  // bytes per DRAM/L2 sector

// K/V sector efficiency of a warp's cp.async instruction, both kernels: issue_kv_tile
// (cuda/cta_work.cuh) gives lane l of a warp chunk l of 32 consecutive 16-byte chunks, so every
// sector a request touches is used whole. (Until 2026-11-23 each thread took consecutive chunks:
// lanes 64 / 128 bytes apart, half of every sector per request, 0.5 measured here.)
constexpr double kKvSectorEfficiencyFloor = 1.0;

using kvc_gpu_test::GpuProblem;

// Workspace for every partition a forced partition size asks for (the dispatcher would otherwise
// grow the partitions to fit a smaller workspace).
size_t workspace_for(const kvc_test::PagedProblem &P, int32_t partition_size) {
    const int64_t parts = partition_size > 0 ? (P.max_seq_len + partition_size - 1) / partition_size : 1;
    return size_t(int64_t(P.spec.seqs.size()) * P.spec.num_q_heads * parts * (P.spec.head_dim + 2) *
                  int64_t(sizeof(float)));
}

// Runs the attention dispatcher on D with the recorder on; returns what the kernels loaded.
std::vector<kvc_emu::AsyncCopyRecord> run_recorded(GpuProblem &D, int32_t partition_size) {
    const kvc::AttentionArgs a = D.args(partition_size, SIZE_MAX);
    ASSERT_OK(kvc::cuda::stream_sync(nullptr));  // nothing else may run while recording
    kvc_emu::access_audit_begin();
    const kvc_status st = kvc::cuda::attention(a, nullptr);
    const kvc_status sync = kvc::cuda::stream_sync(nullptr);
    std::vector<kvc_emu::AsyncCopyRecord> rec = kvc_emu::access_audit_end();
    ASSERT_OK(st);
    ASSERT_OK(sync);
    return rec;
}

// A K/V chunk address taken apart with the storage layout (storage/kv_layout.hpp).
struct KvSlot {
    int64_t block;
    int32_t layer, kv, head, token, chunk;
};

// What the audit needs to know about the launch's buffers and sequences.
struct Geometry {
    const kvc_test::PagedProblem *P;
    uintptr_t storage, q;
    int64_t q_bytes;
    std::map<int64_t, std::pair<int32_t, int32_t>> block_owner;  // block id -> (sequence, logical block)

    explicit Geometry(const GpuProblem &D)
        : P(D.host), storage(reinterpret_cast<uintptr_t>(D.storage.get())),
          q(reinterpret_cast<uintptr_t>(D.q.get())), q_bytes(int64_t(D.host->q.size())) {
        for (size_t s = 0; s < P->spec.seqs.size(); ++s)
            for (int32_t b = 0; b < P->max_blocks_per_seq; ++b) {
                const int32_t id = P->tables[s * size_t(P->max_blocks_per_seq) + size_t(b)];
                if (id >= 0) block_owner[id] = {int32_t(s), b};
            }
    }
    bool in_storage(uintptr_t a) const {
        return a >= storage && a + kChunk <= storage + uintptr_t(P->layout.total_bytes);
    }
    bool in_q(uintptr_t a) const { return a >= q && a + kChunk <= q + uintptr_t(q_bytes); }
    int64_t row_bytes() const { return int64_t(P->layout.head_dim) * P->layout.elem_bytes; }
    int32_t group() const { return P->spec.num_q_heads / P->spec.num_kv_heads; }

    KvSlot slot(uintptr_t a) const {
        const kvc::KvLayout &L = P->layout;
        int64_t off = int64_t(a - storage);
        KvSlot s;
        s.block = off / L.block_stride, off -= s.block * L.block_stride;
        s.layer = int32_t(off / L.layer_stride), off -= s.layer * L.layer_stride;
        s.kv = int32_t(off / L.kv_stride), off -= s.kv * L.kv_stride;
        s.head = int32_t(off / L.head_stride), off -= s.head * L.head_stride;
        s.token = int32_t(off / L.token_stride), off -= s.token * L.token_stride;
        s.chunk = int32_t(off / kChunk);
        return s;
    }
    // Address of chunk c of the K (kv 0) or V (kv 1) row of sequence s's position pos, KV head h.
    uintptr_t chunk_addr(size_t s, int32_t kv, int32_t h, int64_t pos, int64_t c) const {
        const kvc::KvLayout &L = P->layout;
        const int32_t id = P->tables[s * size_t(P->max_blocks_per_seq) + size_t(pos / L.block_size)];
        return storage + uintptr_t(L.offset(id, P->layer, kv, h, int32_t(pos % L.block_size)) + c * kChunk);
    }
    // Adds `times` x the K and V chunks of keys [begin, end) of sequence s, KV head h.
    void add_keys(std::map<uintptr_t, int64_t> *m, size_t s, int32_t h, int64_t begin, int64_t end,
                  int64_t times) const {
        for (int64_t pos = begin; pos < end; ++pos)
            for (int32_t kv = 0; kv < 2; ++kv)
                for (int64_t c = 0; c < row_bytes() / kChunk; ++c) (*m)[chunk_addr(s, kv, h, pos, c)] += times;
    }
    // First key the query at position pos sees: the window start, or 0.
    int64_t window_start(int64_t pos) const {
        const int32_t W = P->spec.sliding_window;
        return W > 0 ? std::max<int64_t>(0, pos - W + 1) : 0;
    }
};

using CtaKey = std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>;  // launch, blockIdx z, y, x

// What one recorded launch did, summed.
struct Summary {
    int64_t kv_chunks = 0, q_chunks = 0, invalid_lanes = 0;
    int64_t kv_requests = 0, kv_sectors = 0;  // warp instructions with a valid K/V lane; sectors they touch
    int64_t q_requests = 0, q_sectors = 0;
    std::map<uintptr_t, int64_t> kv_loaded;  // chunk address -> times loaded (whole launch)
    std::map<CtaKey, std::map<uintptr_t, int64_t>> kv_by_cta;
    std::map<CtaKey, std::vector<uintptr_t>> q_by_cta;

    static double efficiency(int64_t chunks, int64_t sectors) {
        return sectors ? double(chunks * kChunk) / double(sectors * kSector) : 1.0;
    }
    double kv_sector_efficiency() const { return efficiency(kv_chunks, kv_sectors); }
    double q_sector_efficiency() const { return efficiency(q_chunks, q_sectors); }
};

// Classifies every record (bounds: (c)), groups lanes into warp requests and counts their sectors
// (coalescing: (b)), and collects the K/V chunks per CTA and per launch (bytes: (a)).
Summary summarize(const std::vector<kvc_emu::AsyncCopyRecord> &rec, const Geometry &G, const char *what) {
    Summary S;
    // A warp request: the seq-th cp.async of every lane of one warp of one CTA.
    using ReqKey = std::tuple<uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t>;
    std::map<ReqKey, std::vector<const kvc_emu::AsyncCopyRecord *>> requests;
    for (const kvc_emu::AsyncCopyRecord &r : rec) {
        requests[ReqKey{r.launch, r.block[2], r.block[1], r.block[0], r.warp(), r.seq}].push_back(&r);
        if (!r.valid) {  // zero-filled without a read: no traffic
            ++S.invalid_lanes;
            continue;
        }
        const CtaKey cta{r.launch, r.block[2], r.block[1], r.block[0]};
        if (r.gmem % kChunk != 0)
            fail_msg("%s: cp.async source %#lx is not 16-byte aligned", what, (unsigned long)r.gmem);
        if (G.in_storage(r.gmem)) {
            const KvSlot s = G.slot(r.gmem);
            if (s.layer != G.P->layer)
                fail_msg("%s: CTA (%u,%u,%u) loads layer %d of block %lld (the launch's layer is %d)", what, r.block[0],
                         r.block[1], r.block[2], s.layer, (long long)s.block, G.P->layer);
            auto owner = G.block_owner.find(s.block);
            if (owner == G.block_owner.end() || owner->second.first != int32_t(r.block[2]))
                fail_msg("%s: CTA (%u,%u,%u) loads block %lld, not in its sequence's table", what, r.block[0],
                         r.block[1], r.block[2], (long long)s.block);
            ++S.kv_chunks;
            ++S.kv_loaded[r.gmem];
            ++S.kv_by_cta[cta][r.gmem];
        } else if (G.in_q(r.gmem)) {
            ++S.q_chunks;
            S.q_by_cta[cta].push_back(r.gmem);
        } else {
            fail_msg("%s: CTA (%u,%u,%u) thread %u reads %#lx, outside the KV storage and the q buffer", what,
                     r.block[0], r.block[1], r.block[2], r.thread, (unsigned long)r.gmem);
        }
    }
    for (const auto &kv : requests) {
        std::set<uintptr_t> sectors;
        bool is_kv = false, is_q = false;
        uintptr_t site = 0;
        for (const kvc_emu::AsyncCopyRecord *r : kv.second) {
            if (!r->valid) continue;
            // Grouping by sequence number matches the hardware's only if the lanes ran the same
            // instruction (warp-uniform control flow around the copies). Zero-fill lanes are left
            // out: the host compiler may branch where the GPU predicates on `valid`.
            if (site && r->call_site != site)
                fail_msg("%s: warp %u of CTA (%u,%u,%u): lanes' cp.async #%u come from different instructions",
                         what, r->warp(), r->block[0], r->block[1], r->block[2], r->seq);
            site = r->call_site;
            sectors.insert(r->gmem / kSector);
            (G.in_storage(r->gmem) ? is_kv : is_q) = true;
        }
        if (is_kv && is_q) fail_msg("%s: one warp instruction loads both K/V and Q", what);
        if (is_kv) ++S.kv_requests, S.kv_sectors += int64_t(sectors.size());
        if (is_q) ++S.q_requests, S.q_sectors += int64_t(sectors.size());
    }
    return S;
}

// Per CTA: the distinct bytes it loads over the sectors it touches. 1.0 means every sector a CTA
// touches is used whole by that CTA (its DRAM traffic is the bytes it needs).
double cta_sector_completeness(const Summary &S) {
    int64_t bytes = 0, sectors = 0;
    for (const auto &cta : S.kv_by_cta) {
        std::set<uintptr_t> sec;
        for (const auto &c : cta.second) sec.insert(c.first / kSector);
        bytes += int64_t(cta.second.size()) * kChunk;
        sectors += int64_t(sec.size());
    }
    return sectors ? double(bytes) / double(sectors * kSector) : 1.0;
}

// Recorded multiset == expected multiset, else the first difference with its storage coordinates.
void expect_same_chunks(const std::map<uintptr_t, int64_t> &got, const std::map<uintptr_t, int64_t> &want,
                        const Geometry &G, const char *what, const char *scope) {
    auto report = [&](uintptr_t a, int64_t g, int64_t w) {
        const KvSlot s = G.slot(a);
        auto owner = G.block_owner.find(s.block);
        const int32_t seq = owner == G.block_owner.end() ? -1 : owner->second.first;
        const int64_t pos =
            seq < 0 ? -1 : int64_t(owner->second.second) * G.P->layout.block_size + s.token;
        fail_msg("%s (%s): %s of sequence %d position %lld KV head %d chunk %d loaded %lld times, expected %lld",
                 what, scope, s.kv ? "V" : "K", seq, (long long)pos, s.head, s.chunk, (long long)g, (long long)w);
    };
    for (const auto &w : want) {
        auto it = got.find(w.first);
        const int64_t g = it == got.end() ? 0 : it->second;
        if (g != w.second) report(w.first, g, w.second);
    }
    for (const auto &g : got)
        if (!want.count(g.first)) report(g.first, g.second, 0);
}

// With a sliding window the pool may release the blocks wholly before every query's window (their
// table entries become -1, see kvc.h): the kernels must never look them up. Blanking them here turns
// any such load into an out-of-storage address, which summarize() reports.
void release_blocks_before_window(kvc_test::PagedProblem *P) {
    const int32_t W = P->spec.sliding_window, bs = P->layout.block_size;
    if (W <= 0) return;
    for (size_t s = 0; s < P->spec.seqs.size(); ++s) {
        const int64_t first_query = P->spec.seqs[s].ctx_len - P->spec.seqs[s].q_len;
        const int64_t keep_from = std::max<int64_t>(0, first_query - W + 1);
        for (int64_t b = 0; (b + 1) * bs <= keep_from; ++b)
            P->tables[s * size_t(P->max_blocks_per_seq) + size_t(b)] = -1;
    }
}

kvc_test::CaseSpec spec_of(int32_t bs, int32_t q_heads, int32_t kv_heads, std::vector<kvc_ref::Seq> seqs,
                           int32_t window, uint32_t seed) {
    kvc_test::CaseSpec s;
    s.block_size = bs;
    s.head_dim = 128;
    s.num_q_heads = q_heads;
    s.num_kv_heads = kv_heads;
    s.kv_dtype = s.q_dtype = KVC_DTYPE_F16;
    s.sliding_window = window;
    s.seqs = std::move(seqs);
    s.seed = seed;
    return s;
}

// ---- decode ------------------------------------------------------------------------------------

// Query heads one decode CTA serves: the dispatcher's group chunk (cuda/attention.cu: at most
// kDecodeMaxRows = 16, every head dim). A group larger than that is split over CTAs, each of which
// streams the KV head's keys: the read-once claim holds for groups of up to 16.
int64_t decode_reads_per_byte(const kvc_test::CaseSpec &s) {
    const int64_t group = s.num_q_heads / s.num_kv_heads;
    const int64_t chunk = std::min<int64_t>(group, 16);
    return (group + chunk - 1) / chunk;
}

struct DecodeFigures {
    int64_t kv_bytes = 0, expected_bytes = 0, requests = 0, sectors = 0;
};

// Audits one decode launch (single pass when partition_size is -1, split-K when > 0).
DecodeFigures audit_decode(const kvc_test::CaseSpec &spec, int32_t partition_size, const char *what) {
    kvc_test::PagedProblem P = kvc_test::make_problem(spec);
    release_blocks_before_window(&P);
    GpuProblem D(P, workspace_for(P, partition_size));
    const Geometry G(D);
    const std::vector<kvc_emu::AsyncCopyRecord> rec = run_recorded(D, partition_size);
    const Summary S = summarize(rec, G, what);

    // Decode q is read with plain loads by the generic kernel: every cp.async is K/V.
    assert_int_equal(S.q_chunks, 0);
    // (a) Each attended key's K and V rows exactly once per KV head (times the CTAs a query group
    // is split over, 1 for groups of up to 16): keys [max(0, L - W), L) with a window W (the query is
    // at position L - 1 and sees L - 1 - W < pos <= L - 1: whole keys, not whole blocks, so the
    // window's partial first block is loaded only from the window start), [0, L) without one.
    // Split-K partitions tile that range without overlap.
    std::map<uintptr_t, int64_t> want;
    const int64_t times = decode_reads_per_byte(spec);
    for (size_t s = 0; s < spec.seqs.size(); ++s) {
        const int64_t L = spec.seqs[s].ctx_len;
        for (int32_t h = 0; h < spec.num_kv_heads; ++h) G.add_keys(&want, s, h, G.window_start(L - 1), L, times);
    }
    expect_same_chunks(S.kv_loaded, want, G, what, "whole launch");
    // Every CTA serves one KV head (blockIdx.y / head chunks), of its sequence (checked per record).
    for (const auto &cta : S.kv_by_cta) {
        std::set<int32_t> heads;
        for (const auto &c : cta.second) heads.insert(G.slot(c.first).head);
        if (heads.size() != 1) fail_msg("%s: one decode CTA loads %zu KV heads", what, heads.size());
    }
    // (b) Coalescing.
    const double eff = S.kv_sector_efficiency(), whole = cta_sector_completeness(S);
    if (eff < kKvSectorEfficiencyFloor)
        fail_msg("%s: K/V sector efficiency %.3f below the floor %.3f", what, eff, kKvSectorEfficiencyFloor);
    if (whole != 1.0) fail_msg("%s: CTAs use %.3f of the sectors they touch (expected all)", what, whole);

    DecodeFigures f;
    f.kv_bytes = S.kv_chunks * kChunk;
    for (const auto &w : want) f.expected_bytes += w.second * kChunk;
    f.requests = S.kv_requests;
    f.sectors = S.kv_sectors;
    print_message("%s: bs=%d heads=%d/%d window=%d partition=%d: K/V %lld B loaded (expected %lld B), %lld warp "
                  "requests, %lld sectors, sector efficiency %.3f, per-CTA sector use %.3f, %lld zero-fill lanes\n",
                  what, spec.block_size, spec.num_q_heads, spec.num_kv_heads, spec.sliding_window, partition_size,
                  (long long)f.kv_bytes, (long long)f.expected_bytes, (long long)f.requests, (long long)f.sectors,
                  eff, whole, (long long)S.invalid_lanes);
    return f;
}

const std::vector<kvc_ref::Seq> kDecodeSeqs = {{150, 1}, {67, 1}, {16, 1}, {1, 1}};

// GQA 32/8 and MHA 8/8, block sizes 16, 1, 64, single pass.
void test_decode_reads_each_kv_byte_once(void **) {
    REQUIRE_AUDIT();
    uint32_t seed = 1;
    for (int32_t bs : {16, 1, 64})
        for (const auto &h : {std::pair<int32_t, int32_t>{32, 8}, {8, 8}}) {
            const kvc_test::CaseSpec s = spec_of(bs, h.first, h.second, kDecodeSeqs, 0, seed++);
            const DecodeFigures f = audit_decode(s, -1, "decode");
            // GQA: the bytes do not depend on the query heads per KV head.
            int64_t keys = 0;
            for (const auto &q : s.seqs) keys += q.ctx_len;
            assert_int_equal(f.kv_bytes, keys * s.num_kv_heads * 2 * 128 * 2);
        }
}

// Sliding window: only the window's keys (a window of 40 over 150 keys starts mid-block at
// every block size but 1; the blocks wholly before it are released, -1), single pass and forced
// split-K partitions of 32 keys.
void test_decode_window_and_split_k(void **) {
    REQUIRE_AUDIT();
    uint32_t seed = 100;
    for (int32_t bs : {16, 1, 64}) {
        audit_decode(spec_of(bs, 32, 8, kDecodeSeqs, 40, seed++), -1, "decode window");
        audit_decode(spec_of(bs, 32, 8, kDecodeSeqs, 0, seed++), 32, "decode split-K");
        audit_decode(spec_of(bs, 32, 8, kDecodeSeqs, 40, seed++), 32, "decode window split-K");
    }
}

// Where the read-once claim stops: 32 query heads on one KV head exceed the 16 rows a decode CTA
// holds, so two CTAs each stream the KV head (measured, asserted as the dispatcher's rule).
void test_decode_large_group_reads_per_chunk(void **) {
    REQUIRE_AUDIT();
    const kvc_test::CaseSpec s = spec_of(16, 32, 1, {{150, 1}, {33, 1}}, 0, 7);
    assert_int_equal(decode_reads_per_byte(s), 2);
    const DecodeFigures f = audit_decode(s, -1, "decode group 32");
    assert_int_equal(f.kv_bytes, (150 + 33) * 2 * 128 * 2 * 2);
}

// ---- prefill (tensor cores) --------------------------------------------------------------------

// Audits one prefill launch on the MMA kernel (f16 q and KV take it). Per CTA, its rows are read
// off its own Q tile loads, and its expected K/V follow from them.
void audit_prefill(const kvc_test::CaseSpec &spec, const char *what) {
    kvc_test::PagedProblem P = kvc_test::make_problem(spec);
    release_blocks_before_window(&P);
    GpuProblem D(P);
    const Geometry G(D);
    const std::vector<kvc_emu::AsyncCopyRecord> rec = run_recorded(D, -1);
    const Summary S = summarize(rec, G, what);
    if (S.q_chunks == 0) fail_msg("%s: no Q tile loads: the tensor-core prefill did not run", what);

    const int32_t H = spec.num_q_heads, d = spec.head_dim;
    const int64_t q_row = int64_t(d) * 2;  // f16 q
    std::map<uintptr_t, int64_t> want_all;
    int64_t unique_bytes = 0;  // K/V of the keys some query of a KV head sees, once
    for (size_t s = 0; s < spec.seqs.size(); ++s)
        unique_bytes += (spec.seqs[s].ctx_len - G.window_start(spec.seqs[s].ctx_len - spec.seqs[s].q_len)) *
                        spec.num_kv_heads * 2 * G.row_bytes();
    std::set<CtaKey> ctas;
    for (const auto &c : S.kv_by_cta) ctas.insert(c.first);
    for (const auto &c : S.q_by_cta) ctas.insert(c.first);
    for (const CtaKey &cta : ctas) {
        const uint32_t seq = std::get<1>(cta);
        auto q_it = S.q_by_cta.find(cta);
        if (q_it == S.q_by_cta.end()) fail_msg("%s: a CTA of sequence %u loads K/V but no Q rows", what, seq);
        // The CTA's rows: (token, query head) of every Q row it loads, whole rows only.
        std::map<int64_t, int64_t> row_chunks;
        for (uintptr_t a : q_it->second) ++row_chunks[int64_t(a - G.q) / q_row];
        const int32_t q_begin = P.query_start_loc[seq], q_len = P.query_start_loc[seq + 1] - q_begin;
        const int64_t ctx = spec.seqs[seq].ctx_len;
        int64_t min_pos = INT64_MAX, max_pos = -1;
        std::set<int32_t> kv_heads;
        for (const auto &r : row_chunks) {
            if (r.second != q_row / kChunk) fail_msg("%s: a Q row loaded %lld times 16 B", what, (long long)r.second);
            const int64_t token = r.first / H;
            const int32_t head = int32_t(r.first % H);
            if (token < q_begin || token >= q_begin + q_len)
                fail_msg("%s: a CTA of sequence %u loads query token %lld of another sequence", what, seq,
                         (long long)token);
            const int64_t pos = ctx - q_len + (token - q_begin);
            min_pos = std::min(min_pos, pos);
            max_pos = std::max(max_pos, pos);
            kv_heads.insert(head / G.group());
        }
        if (kv_heads.size() != 1) fail_msg("%s: one CTA's rows span %zu KV heads", what, kv_heads.size());
        // (a) Exactly the keys some row of the CTA may see, each once: from the first query's
        // window start (0 without a window) to the last query's position. Keys after the last
        // query — every tile wholly above the causal diagonal — are never loaded; keys between the
        // first and last query's positions are (the diagonal tile), masked per row.
        std::map<uintptr_t, int64_t> want;
        G.add_keys(&want, seq, *kv_heads.begin(), G.window_start(min_pos), max_pos + 1, 1);
        auto kv_it = S.kv_by_cta.find(cta);
        static const std::map<uintptr_t, int64_t> kNone;
        char scope[96];
        std::snprintf(scope, sizeof scope, "CTA of sequence %u, positions %lld..%lld", seq, (long long)min_pos,
                      (long long)max_pos);
        expect_same_chunks(kv_it == S.kv_by_cta.end() ? kNone : kv_it->second, want, G, what, scope);
        for (const auto &w : want) want_all[w.first] += w.second;
    }
    expect_same_chunks(S.kv_loaded, want_all, G, what, "whole launch");

    // (b) Coalescing: K/V as in decode; the Q tile is lane-contiguous (c = tid + i * threads), 100%.
    const double eff = S.kv_sector_efficiency(), whole = cta_sector_completeness(S), q_eff = S.q_sector_efficiency();
    if (eff < kKvSectorEfficiencyFloor)
        fail_msg("%s: K/V sector efficiency %.3f below the floor %.3f", what, eff, kKvSectorEfficiencyFloor);
    if (whole != 1.0) fail_msg("%s: CTAs use %.3f of the sectors they touch (expected all)", what, whole);
    if (q_eff != 1.0) fail_msg("%s: Q tile sector efficiency %.3f (expected 1)", what, q_eff);
    print_message("%s: bs=%d heads=%d/%d window=%d: %zu CTAs, K/V %lld B loaded (%.2fx the %lld B of distinct "
                  "attended K/V: query tiles re-stream shared keys), %lld warp requests, sector efficiency %.3f, "
                  "per-CTA sector use %.3f; Q %lld B, sector efficiency %.3f; %lld zero-fill lanes\n",
                  what, spec.block_size, spec.num_q_heads, spec.num_kv_heads, spec.sliding_window, ctas.size(),
                  (long long)(S.kv_chunks * kChunk), double(S.kv_chunks * kChunk) / double(unique_bytes),
                  (long long)unique_bytes, (long long)S.kv_requests, eff, whole, (long long)(S.q_chunks * kChunk),
                  q_eff, (long long)S.invalid_lanes);
}

// A prompt from scratch, a chunked-prefill chunk after a cached prefix, and an append of a few
// tokens; GQA 32/8 (16 queries per CTA) and MHA 8/8 (64 per CTA); block sizes 16, 1, 64.
void test_prefill_loads_visible_tiles_only(void **) {
    REQUIRE_AUDIT();
    const std::vector<kvc_ref::Seq> seqs = {{40, 40}, {100, 36}, {75, 3}};
    uint32_t seed = 200;
    for (int32_t bs : {16, 1, 64})
        for (const auto &h : {std::pair<int32_t, int32_t>{32, 8}, {8, 8}})
            audit_prefill(spec_of(bs, h.first, h.second, seqs, 0, seed++), "prefill");
}

// Window 24 over prompts and chunks: the blocks wholly before a sequence's first query's window are
// released (-1).
void test_prefill_window(void **) {
    REQUIRE_AUDIT();
    const std::vector<kvc_ref::Seq> seqs = {{40, 40}, {100, 36}, {75, 3}};
    uint32_t seed = 300;
    for (int32_t bs : {16, 64}) audit_prefill(spec_of(bs, 32, 8, seqs, 24, seed++), "prefill window");
}

// The recorder itself: off unless begun, and one record per cp.async with its CTA and lane.
void test_recorder_is_opt_in(void **) {
    REQUIRE_AUDIT();
    kvc_test::PagedProblem P = kvc_test::make_problem(spec_of(16, 8, 8, {{20, 1}}, 0, 9));
    GpuProblem D(P);
    assert_true(kvc_emu::access_audit_end().empty());  // nothing recorded outside begin/end
    const std::vector<kvc_emu::AsyncCopyRecord> rec = run_recorded(D, -1);
    // One decode CTA per KV head (8), 128 threads: 4 token groups (one warp each, one row: MHA) of
    // 8 keys per tile, 20 keys in one tile; each thread copies 4 chunks x (K, V) of its group's keys.
    assert_int_equal(rec.size(), 8 * 128 * 8);
    std::set<uint32_t> heads;
    for (const auto &r : rec) {
        assert_int_equal(r.launch, 0);
        assert_true(r.thread < 128 && r.seq < 8);
        heads.insert(r.block[1]);
    }
    assert_int_equal(heads.size(), 8);
}

#else  // no recorder in this build

#define REQUIRE_AUDIT()                                                                                 \
    do {                                                                                                \
        print_message("the cp.async recorder exists only in a KVC_CUDA=EMULATE build: test skipped\n"); \
        skip();                                                                                         \
    } while (0)

void test_recorder_is_opt_in(void **) { REQUIRE_AUDIT(); }
void test_decode_reads_each_kv_byte_once(void **) { REQUIRE_AUDIT(); }
void test_decode_window_and_split_k(void **) { REQUIRE_AUDIT(); }
void test_decode_large_group_reads_per_chunk(void **) { REQUIRE_AUDIT(); }
void test_prefill_loads_visible_tiles_only(void **) { REQUIRE_AUDIT(); }
// Window 24 over prompts and chunks: the blocks wholly before a sequence's first query's window are
// released (-1).
void test_prefill_window(void **) { REQUIRE_AUDIT(); }

#endif

}  // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recorder_is_opt_in),
        cmocka_unit_test(test_decode_reads_each_kv_byte_once),
        cmocka_unit_test(test_decode_window_and_split_k),
        cmocka_unit_test(test_decode_large_group_reads_per_chunk),
        cmocka_unit_test(test_prefill_loads_visible_tiles_only),
        cmocka_unit_test(test_prefill_window),
    };
    const int failed = cmocka_run_group_tests(tests, nullptr, nullptr);
    // ctest turns this line into SKIPPED (tests/CMakeLists.txt SKIP_REGULAR_EXPRESSION), so a build
    // without the recorder (or without a device) never reports the audit as passed.
#if KVC_TEST_ACCESS_AUDIT
    if (!kvc_gpu_test::gpu_available()) std::printf("[  SKIPPED ] ALL access audit tests: no (emulated) CUDA device\n");
#else
    std::printf("[  SKIPPED ] ALL access audit tests: the cp.async recorder is part of KVC_CUDA=EMULATE builds only\n");
#endif
    return failed;
}
