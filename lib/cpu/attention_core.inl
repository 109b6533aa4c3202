// The CPU attention kernel body, compiled once per instruction set: lib/cpu/attention.cpp (the
// build's baseline ISA), lib/cpu/kernels_avx2.cpp (AVX2 + FMA + F16C) and kernels_avx512.cpp
// (AVX-512), chosen at run time (cpu_isa.hpp). Everything here has internal linkage (anonymous
// namespace, static helpers in simd.hpp), so the copies never merge at link time. Include only
// after every standard header the includer needs, and after cpu/dtype_convert.hpp and
// cpu/thread_pool.hpp (those stay baseline code).
//
// Work item = (sequence, KV head, query tile, context partition). One item computes every query
// head of the KV head's GQA group for the tile's query tokens, so each K/V element it gathers is
// converted to fp32 once and used by the whole group. The context is streamed in chunks of
// positions (kChunk, kLaneChunk) with an online (running max) softmax, so scratch does not grow
// with context length (prefill's per-thread K/V copy, KvCopy, grows up to a fixed bound).
// Only positions < seq_len of each sequence are ever read: slots past the context (padding, stale
// or NaN-filled) never enter the math.
//
// Decode split-K: with several partitions per sequence each item writes unnormalized partials
// (running max m, exp-sum l, accumulator) to the batch's workspace and a reduce pass combines them,
// rescaling partition i by exp(m_i - max_i m_i), as the CUDA backend does.
#include <type_traits>

#include "cpu/attention_tiles.hpp"
#include "cpu/convert_rows.hpp"
#include "cpu/simd.hpp"

namespace kvc {
namespace {

using namespace cpu;

constexpr int32_t kTargetRows = 64;      // query rows (tokens x group heads) per prefill item
// Context positions per K/V tile of the rows-in-lanes path (prefill, appends, wide GQA decode):
// each tile costs a fixed amount besides its products -- the accumulators' rescale pass in
// pv_block, the softmax's per-row-vector setup, the score blocks' epilogues, the gather's call and
// prefetch loop -- so longer tiles spread it thinner. 64 measured 5-10% faster than 32 on prefill
// at AVX2 and AVX-512, 128 no faster than 64 (tests/bench/RESULTS.md, "2026-11-27: prefill tiles,
// in-place decode rows"). The rows path keeps kChunk (its score scratch is [row][kChunk]).
constexpr int32_t kLaneChunk = 64;
constexpr int32_t kMaxChunk = kLaneChunk > kChunk ? kLaneChunk : kChunk;  // the scratch K/V and score tiles
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A float buffer whose data starts on a cache line. std::vector's heap blocks are only 16-byte
// aligned, so every 64-byte vector load or store of the tiles (q, accumulators, scores: rows of
// 16 lanes) straddled two lines; aligned, prefill 1x2048 at AVX-512 took 4% less CPU time.
struct LineBuf {
    std::vector<float> raw;
    float *p = nullptr;
    size_t n = 0;
    size_t size() const { return n; }
    float *data() { return p; }
    void resize(size_t want) {  // contents not kept
        raw.resize(want + 16);
        p = raw.data() + (16 - (reinterpret_cast<uintptr_t>(raw.data()) / 4) % 16) % 16;
        n = want;
    }
};

// Per-thread scratch, grown on first use and reused afterwards (no allocation in steady state).
// Rows are rounded up to whole vectors for the rows-in-lanes path (its m, l, corr, st and acc).
struct Scratch {
    LineBuf q, acc, m, l, corr, cmax, k, v, s;
    void ensure(int32_t rows, int32_t d) {
        const size_t lanes = (size_t(rows) + kLanes - 1) / kLanes * kLanes;
        size_t rd = lanes * size_t(d), cd = size_t(kMaxChunk) * size_t(d);
        if (q.size() < rd) { q.resize(rd); acc.resize(rd); }
        if (m.size() < lanes) { m.resize(lanes); l.resize(lanes); corr.resize(lanes); cmax.resize(lanes); }
        // v: the rows path's V tile (kChunk rows); the lanes path converts V into k.
        if (k.size() < cd) { k.resize(cd); v.resize(size_t(kChunk) * size_t(d)); }
        if (s.size() < size_t(kMaxChunk) * lanes) s.resize(size_t(kMaxChunk) * lanes);
    }
};
thread_local Scratch t_scratch;

struct Plan {
    const AttentionArgs *a = nullptr;
    uint64_t launch = 0;      // this run_attention call's number (KvCopy's key)
    int64_t copy_floats = 0;  // KvCopy's bound (kv_copy_floats)
    int32_t group = 1;        // query heads per KV head
    int32_t nkv = 1;
    int32_t d = 0;
    int32_t q_tile = 1;       // query tokens per item
    int32_t tiles = 1;        // query tiles per sequence (ceil(max_q_len / q_tile))
    int32_t parts = 1;        // context partitions per sequence (> 1: split-K)
    int64_t part_len = 0;
    int32_t seq_begin = 0;    // first sequence of this round
    int64_t items = 0;        // work items of this round
    int32_t width = 1;        // worker threads (parallel_width)
    int32_t unit = 1;         // consecutive items a thread claims at once (decode_unit, next_item)
    float *partials = nullptr;  // [seq in round][part][q head][2 + d]: m, l, acc

    int64_t partial_floats() const { return 2 + int64_t(d); }
    // The item this thread probably takes after `item`: the next one of its unit, else the first
    // of the unit after the other threads' (the pool hands out units in turn).
    int64_t next_item(int64_t item) const {
        return (item + 1) % unit != 0 ? item + 1 : item + 1 + int64_t(width - 1) * unit;
    }
    float *partial(int32_t s_local, int32_t part, int32_t head) const {
        return partials + ((int64_t(s_local) * parts + part) * a->num_q_heads + head) * partial_floats();
    }
};

// Software prefetch of the next chunk's K/V while the current one is computed. A block's rows are
// contiguous, but the next block is anywhere (paged tables), which the hardware prefetchers cannot
// guess. The prefetches are spread over the current chunk's work -- a few lines per row converted
// (gather) or per row used in place (RowPointers::prefetch_next) -- not issued as one burst of
// 2 x kChunk rows at the start of the chunk. With the burst, memory and compute took turns
// instead of overlapping -- decode's CPU time was the sum of its compute-only time (K/V in
// cache) and a plain read of the same bytes, and removing the burst changed nothing -- presumably
// because hundreds of prefetches fill the core's line-fill buffers and the chunk's own loads
// queue behind them (no hardware counters on the VM to check); spread, decode 64x1024 f16 went
// from 42.5 to 31.7 ms CPU (tests/bench/RESULTS.md, "2026-11-27 (session 17)").
//
// PrefetchStream: the bytes of K or V (kv) of positions [p0, p1) of one KV head as the runs they
// lie in (one per block touched); advance(b) prefetches the stream's next b bytes.
// kv_runs: calls f(row, rows) for each run of K or V (kv) rows of positions [p0, p1) of one KV
// head that lie together (one per block touched; rows token_stride bytes apart), in position
// order. The one walk of a sequence's block table that gather, row_ptrs and the prefetches share.
template <class F>
void kv_runs(const AttentionArgs &a, const int32_t *table, int32_t kv, int32_t head, int64_t p0, int64_t p1, F f) {
    const KvLayout &L = a.layout;
    const char *base = static_cast<const char *>(a.base);
    for (int64_t p = p0; p < p1;) {
        const int64_t block = table[p / L.block_size];
        const int32_t tok = int32_t(p % L.block_size);
        const int64_t run = std::min<int64_t>(p1 - p, L.block_size - tok);
        f(base + L.offset(block, a.layer, kv, head, tok), run);
        p += run;
    }
}

struct PrefetchStream {
    static constexpr int kMaxRuns = kMaxChunk;  // block_size >= 1: at most one run per position
    const char *ptr[kMaxRuns];
    int64_t len[kMaxRuns];
    int32_t nruns = 0, cur = 0;
    int64_t off = 0;
    void init(const AttentionArgs &a, const int32_t *table, int32_t kv, int32_t head, int64_t p0, int64_t p1) {
        nruns = cur = 0;
        off = 0;
        kv_runs(a, table, kv, head, p0, std::min<int64_t>(p1, p0 + kMaxRuns), [&](const char *row, int64_t rows) {
            ptr[nruns] = row;
            len[nruns++] = rows * a.layout.token_stride;
        });
    }
    // Prefetches the stream's next `bytes` bytes (whole lines from the cursor on).
    void advance(int64_t bytes) {
        while (bytes > 0 && cur < nruns) {
            __builtin_prefetch(ptr[cur] + off, 0, 1);
            off += 64;
            bytes -= 64;
            if (off >= len[cur]) { ++cur; off = 0; }
        }
    }
};

// Gathers K or V of positions [p0, p1) of sequence `table` for one KV head into dst[(p - p0) * d].
// Consecutive positions inside a block are contiguous in the HND layout: one conversion per run
// (per row when `pf` is given: each converted row advances the prefetch of the next chunk by as much).
void gather(float *dst, const AttentionArgs &a, const int32_t *table, int32_t kv, int32_t head,
            int64_t p0, int64_t p1, float scale, PrefetchStream *pf = nullptr) {
    const KvLayout &L = a.layout;
    float *out = dst;
    kv_runs(a, table, kv, head, p0, p1, [&](const char *src, int64_t run) {
        if (pf) {
            for (int64_t t = 0; t < run; ++t) {
                to_float(out + t * L.head_dim, src + t * L.token_stride, L.dtype, L.head_dim, scale);
                pf->advance(L.token_stride);
            }
        } else {
            to_float(out, src, L.dtype, run * L.head_dim, scale);
        }
        out += run * L.head_dim;
    });
}

// What one work item covers (see the header comment).
struct Item {
    int32_t s_local, s, kvh, part;
    int64_t L, q0, Q, j0, j1;  // context length, query start, query count; the tile's queries j0 .. j1 - 1
    int32_t rows;              // (j1 - j0) x group
    int64_t c_lo, c_hi;        // context positions any row of the item may see (partition, window, causal)
    int64_t first_pos;         // position of query j0
};

// Decodes work item `item` of the current round; false when its query tile is past the sequence.
// Numbered query tile fastest, then KV head, partition, sequence: the tiles of one KV head follow
// each other, so a thread's next item usually reuses its copy of that head's K / V (KvCopy).
// (Decode has one tile per sequence: KV head fastest, as before.)
bool decode_item(const Plan &P, int64_t item, Item *it) {
    const AttentionArgs &a = *P.a;
    const int32_t tile = int32_t(item % P.tiles);
    item /= P.tiles;
    it->kvh = int32_t(item % P.nkv);
    item /= P.nkv;
    it->part = int32_t(item % P.parts);
    it->s_local = int32_t(item / P.parts);
    it->s = P.seq_begin + it->s_local;
    it->L = a.seq_lens[it->s];
    it->q0 = a.query_start_loc[it->s];
    it->Q = a.query_start_loc[it->s + 1] - it->q0;
    it->j0 = int64_t(tile) * P.q_tile;
    if (it->j0 >= it->Q) return false;
    it->j1 = std::min<int64_t>(it->Q, it->j0 + P.q_tile);
    it->rows = int32_t(it->j1 - it->j0) * P.group;
    const int64_t p_begin = int64_t(it->part) * P.part_len;
    const int64_t p_end = P.parts > 1 ? std::min<int64_t>(it->L, p_begin + P.part_len) : it->L;
    // Positions the tile may see: the first query token's window start .. the last one's position.
    it->first_pos = it->L - it->Q + it->j0;
    const int64_t last_pos = it->L - it->Q + it->j1 - 1;
    const int64_t W = a.sliding_window;
    it->c_lo = std::max<int64_t>(std::max<int64_t>(p_begin, W > 0 ? it->first_pos - W + 1 : 0), 0);
    it->c_hi = std::min<int64_t>(p_end, last_pos + 1);
    return true;
}

// Row r's query, converted to fp32 and multiplied by the softmax scale (times `unit`), into dst[0 .. d).
void read_q_row(const Plan &P, const Item &it, int32_t r, float *dst, float unit = 1.f) {
    const AttentionArgs &a = *P.a;
    const int32_t d = P.d, G = P.group;
    const int64_t tok = it.q0 + it.j0 + r / G;
    const int32_t head = it.kvh * G + r % G;
    to_float(dst, static_cast<const char *>(a.q) + (tok * a.num_q_heads + head) * int64_t(d) * dtype_bytes(a.q_dtype),
             a.q_dtype, d, 1.0f);
    scale_row(dst, a.scale * unit, d);
}

// Row r's accumulated output: normalized into `out`, or (split-K) its partial (m, l, acc).
void write_row(const Plan &P, const Item &it, int32_t r, float m, float l, float *acc) {
    const AttentionArgs &a = *P.a;
    const int32_t d = P.d, G = P.group;
    const int32_t head = it.kvh * G + r % G;
    if (P.parts > 1) {
        float *dst = P.partial(it.s_local, it.part, head);
        dst[0] = m;
        dst[1] = l;
        std::memcpy(dst + 2, acc, size_t(d) * 4);
        return;
    }
    // l > 0 always (a query sees at least itself); the guard keeps an impossible 0 finite.
    scale_row(acc, l > 0.f ? 1.0f / l : 0.f, d);
    const int64_t tok = it.q0 + it.j0 + r / G;
    from_float(static_cast<char *>(a.out) + (tok * a.num_q_heads + head) * int64_t(d) * dtype_bytes(a.q_dtype), acc,
               a.q_dtype, d);
}

// Per-thread fp32 copy of one (sequence, KV head)'s K and V, positions [lo, hi), for prefill and
// long appends (items of several query tiles, attend_lanes). Each item reads its KV head's context
// from the start to its last query; gathered tile by tile, every item converted the same positions
// again into a 64-position fp32 tile: 32 KiB of stores per tile for K and again for V, into an L1
// that also holds the q tile and the accumulators (the gathers were 13% of prefill 1x2048's time;
// with the K/V already in cache, 5% less). Items are numbered query tile fastest (decode_item), so a
// thread's next item is usually the same KV head's next tile: it converts only the positions it has
// not yet, and the tiles read K and V where they lie in the copy. Keyed by the launch, so a copy is
// never read by a later call (whose pool contents may differ). Bounded: kKvCopyFloats floats each
// for K and V per thread (attention_isa.hpp; 4 MiB in all), grown to what a thread's prefills
// need and kept; positions past the bound are gathered tile by tile as before. Only items
// of several query tiles use it: an item alone on its head (a short append) would convert its
// K / V into the copy once and read it once, no better than the gather.
struct KvCopy {
    std::vector<float> k, v;
    uint64_t launch = 0;
    int32_t s = -1, kvh = -1;
    int64_t lo = 0, hi = 0;
    // Makes the copy hold [c_lo, ...) of item `it`'s head, as far towards c_hi as the bound allows;
    // returns the end of what it holds from c_lo on (c_lo: nothing).
    int64_t cover(const Plan &P, const Item &it, const int32_t *table) {
        const AttentionArgs &a = *P.a;
        const int64_t cap = P.copy_floats / P.d;
        if (launch != P.launch || s != it.s || kvh != it.kvh || it.c_lo < lo || it.c_lo > hi) {
            launch = P.launch;
            s = it.s;
            kvh = it.kvh;
            lo = hi = it.c_lo;
        }
        if (lo + cap < it.c_hi && it.c_lo > lo) {  // restart at c_lo (sliding windows) if that holds more
            lo = hi = it.c_lo;
        }
        const int64_t want = std::min<int64_t>(it.c_hi, lo + cap);
        if (want > hi) {
            const size_t need = size_t(want - lo) * size_t(P.d);
            if (k.size() < need) {  // grown as prompts need it (doubling, kept), never past the bound
                const size_t to = std::min(std::max(need, 2 * k.size()), size_t(P.copy_floats));
                k.resize(to);
                v.resize(to);
            }
            gather(k.data() + (hi - lo) * P.d, a, table, 0, it.kvh, hi, want, a.k_scale);
            gather(v.data() + (hi - lo) * P.d, a, table, 1, it.kvh, hi, want, a.v_scale);
            hi = want;
        }
        return std::min<int64_t>(hi, it.c_hi);
    }
};
thread_local KvCopy t_kvcopy;

// rows[r * d + i] (R rows, a multiple of kLanes) into lanes[i * R + r], and back.
void rows_to_lanes(float *lanes, const float *rows, int32_t R, int32_t d) {
    const int32_t dv = d / kLanes * kLanes;
    for (int32_t r = 0; r < R; r += kLanes) {
        for (int32_t i = 0; i < dv; i += kLanes)
            transpose_block(lanes + int64_t(i) * R + r, R, rows + int64_t(r) * d + i, d);
        for (int32_t i = dv; i < d; ++i)
            for (int32_t j = 0; j < kLanes; ++j) lanes[int64_t(i) * R + r + j] = rows[int64_t(r + j) * d + i];
    }
}
void lanes_to_rows(float *rows, const float *lanes, int32_t R, int32_t d) {
    const int32_t dv = d / kLanes * kLanes;
    for (int32_t r = 0; r < R; r += kLanes) {
        for (int32_t i = 0; i < dv; i += kLanes)
            transpose_block(rows + int64_t(r) * d + i, d, lanes + int64_t(i) * R + r, R);
        for (int32_t i = dv; i < d; ++i)
            for (int32_t j = 0; j < kLanes; ++j) rows[int64_t(r + j) * d + i] = lanes[int64_t(i) * R + r + j];
    }
}

// The q rows a work item reads (read_q_row), the output rows it writes (write_row) and the K/V
// positions it adds to the thread's copy (KvCopy::cover) lie outside the caches on the long prompts
// (4x512: q and output 16 MiB each): read and written when needed, their misses were 10% of prefill
// 4x512's time (perf: read_q_row 5.4%, write_row 5.2%, for ~0.5 us each of work per item), and
// an earlier try that requested an item's own rows at its start gained nothing measurable. This
// prefetches the lines of the item the thread probably takes next (Plan::next_item: the pool hands
// out units of items in turn) a few at a time over the current item's tile phases,
// so that they have arrived when that item starts; output lines for writing (prefetchw where the
// variant has it), so that write_row's stores do not wait for them either. A wrong guess (another
// thread took that item) costs only the prefetches and leaves the lines in the shared L3.
struct NextItemPrefetch {
    static constexpr int kMaxRuns = 2 * kTargetRows + 16;  // q and output per query token, K/V runs
    const char *ptr[kMaxRuns];
    int32_t len[kMaxRuns];
    bool write[kMaxRuns];
    int32_t nruns = 0, cur = 0, off = 0;
    int64_t left = 0;  // lines not yet prefetched
    void add(const char *p, int64_t bytes, bool w) {
        if (nruns == kMaxRuns || bytes <= 0) return;
        ptr[nruns] = p;
        len[nruns] = int32_t(bytes);
        write[nruns++] = w;
        left += (bytes + 63) / 64;
    }
    void init(const Plan &P, const Item &it, int64_t item) {
        nruns = cur = off = 0;
        left = 0;
        Item nx;
        if (item >= P.items || !decode_item(P, item, &nx) || nx.rows < kLanes) return;
        const AttentionArgs &a = *P.a;
        const int64_t eb = dtype_bytes(a.q_dtype);
        const int64_t run = int64_t(P.group) * P.d * eb;  // a token's heads of one KV head: contiguous
        const char *q = static_cast<const char *>(a.q), *o = static_cast<const char *>(a.out);
        for (int64_t j = nx.j0; j < nx.j1; ++j) {
            const int64_t at = ((nx.q0 + j) * a.num_q_heads + int64_t(nx.kvh) * P.group) * P.d * eb;
            add(q + at, run, false);
            add(o + at, run, P.parts == 1);  // split-K writes partials instead (decode: not here)
        }
        // The positions the next item adds to this thread's copy, when it continues this one's.
        if (P.tiles > 1 && nx.s == it.s && nx.kvh == it.kvh && nx.c_hi > it.c_hi) {
            const int32_t *table = a.block_tables + int64_t(it.s) * a.max_blocks_per_seq;
            for (int32_t kv = 0; kv < 2; ++kv)
                kv_runs(a, table, kv, it.kvh, std::max(it.c_hi, nx.c_lo), nx.c_hi,
                        [&](const char *row, int64_t rows) { add(row, rows * a.layout.token_stride, false); });
        }
    }
    // Prefetches `lines` more lines, into L2.
    void advance(int64_t lines) {
        for (; lines > 0 && cur < nruns; --lines, --left) {
            if (write[cur]) __builtin_prefetch(ptr[cur] + off, 1, 1);
            else __builtin_prefetch(ptr[cur] + off, 0, 1);
            off += 64;
            if (off >= len[cur]) { ++cur; off = 0; }
        }
    }
};

// Items of at least one vector of rows (prefill tiles, decode with GQA groups >= kLanes): rows in
// vector lanes, scores and P.V as register-blocked products (attention_tiles.hpp), the online
// softmax lane-parallel with a vector exp. Masks (causal, window) and the optional ALiBi / soft-cap
// terms are applied element-wise only where they change something.
void attend_lanes(const Plan &P, const Item &it, int64_t item) {
    const AttentionArgs &a = *P.a;
    const int32_t d = P.d, G = P.group, rows = it.rows;
    const int32_t R = (rows + kLanes - 1) / kLanes * kLanes;
    const int64_t W = a.sliding_window;
    Scratch &S = t_scratch;
    S.ensure(rows, d);
    float *qt = S.q.data(), *acct = S.acc.data(), *m = S.m.data(), *l = S.l.data(), *corr = S.corr.data();
    float *cmax = S.cmax.data(), *kbuf = S.k.data(), *st = S.s.data();
    const int32_t *table = a.block_tables + int64_t(it.s) * a.max_blocks_per_seq;
    // Without ALiBi or soft-capping (plain) the scores are kept in base-2 units -- q pre-multiplied
    // by log2 e -- so that the softmax's exponentials are exp2v, 10 vector ops where expv takes 16
    // (the softmax pass was 8-12% of prefill's time). m is then in those units too, and goes back
    // to natural units where it leaves the item (a split-K partial, write_row).
    const bool plain = !a.alibi_slopes && !(a.softcap > 0.f);
    const float unit = plain ? 1.44269504088896341f : 1.f;

    // q rows, converted and pre-scaled, row by row into acct (free until the first chunk), then
    // transposed into qt's lanes; padding rows zero.
    for (int32_t r = 0; r < rows; ++r) read_q_row(P, it, r, acct + int64_t(r) * d, unit);
    std::fill(acct + int64_t(rows) * d, acct + int64_t(R) * d, 0.f);
    rows_to_lanes(qt, acct, R, d);
    std::fill(acct, acct + int64_t(d) * R, 0.f);
    std::fill(m, m + R, kNegInf);
    std::fill(l, l + R, 0.f);

    // Positions [c_lo, copied) are read from the thread's K/V copy (KvCopy), the rest gathered.
    KvCopy &C = t_kvcopy;
    const int64_t copied = P.tiles > 1 ? C.cover(P, it, table) : it.c_lo;
    const int64_t last_pos = it.first_pos + (it.j1 - it.j0) - 1;
    // The next item's lines (NextItemPrefetch), spread evenly over this item's steps: per tile, one
    // per kPfKeys keys of the scores, one per row vector of the softmax, one before P.V. (Three
    // bursts per tile measured the prefetch loop itself at 3.5% of prefill 4x512: a burst fills
    // the core's miss buffers and its prefetches wait for them.)
    constexpr int32_t kPfKeys = 16;
    NextItemPrefetch next;
    next.init(P, it, P.next_item(item));
    int64_t steps = 0;
    for (int64_t c0 = it.c_lo; c0 < it.c_hi; c0 += kLaneChunk)
        steps += (std::min<int64_t>(it.c_hi - c0, kLaneChunk) + kPfKeys - 1) / kPfKeys + R / kLanes + 1;
    // Gathered tiles (past the copy, or every tile of an item alone on its head: short appends)
    // prefetch the next tile's K and V the same way, spread over the current tile's steps: as one
    // burst after the gather (as before), the gathers were still 21% of append 16 over 4x1024 (perf,
    // one thread), most of it waiting for the pool's lines.
    PrefetchStream nk, nv;
    int64_t tile_bytes = 0, tile_steps = 0;
    auto prefetch_step = [&] {
        next.advance(steps > 1 ? (next.left + steps - 1) / steps : next.left);
        --steps;
        if (tile_bytes > 0) {
            const int64_t b = tile_steps > 1 ? ((tile_bytes + tile_steps - 1) / tile_steps + 63) / 64 * 64 : tile_bytes;
            nk.advance(b);
            nv.advance(b);
            tile_bytes -= b;
        }
        --tile_steps;
    };
    for (int64_t c0 = it.c_lo; c0 < it.c_hi; c0 += kLaneChunk) {
        const int64_t c1 = std::min<int64_t>(it.c_hi, c0 + kLaneChunk);
        const int32_t n = int32_t(c1 - c0);
        const bool from_copy = c1 <= copied;
        const float *kt = kbuf;
        if (from_copy) {
            kt = C.k.data() + (c0 - C.lo) * d;
        } else {
            gather(kbuf, a, table, 0, it.kvh, c0, c1, a.k_scale);
        }
        tile_steps = (n + kPfKeys - 1) / kPfKeys + R / kLanes + 1;
        tile_bytes = 0;
        if (!from_copy && c1 < it.c_hi) {
            const int64_t e = std::min<int64_t>(it.c_hi, c1 + kLaneChunk);
            nk.init(a, table, 0, it.kvh, c1, e);
            nv.init(a, table, 1, it.kvh, c1, e);
            tile_bytes = (e - c1) * a.layout.token_stride;
        }
        // Every row sees every key of the chunk unless the chunk crosses the causal diagonal or a
        // window edge of some row; only then (and for ALiBi / soft-cap) the element-wise pass, and
        // only then are the chunk maxima of the score blocks stale (a masked key may have held one).
        const bool all_visible = c1 - 1 <= it.first_pos && (W <= 0 || c0 >= last_pos - W + 1);
        std::fill(cmax, cmax + R, kNegInf);
        for (int32_t p0 = 0; p0 < n; p0 += kPfKeys) {  // the same blocks as one call, in pieces
            prefetch_step();
            const int32_t pn = std::min(kPfKeys, n - p0);
            if (all_visible) {
                scores_lanes(st + int64_t(p0) * R, cmax, qt, kt + int64_t(p0) * d, pn, d, R);
                continue;
            }
            // Across the causal diagonal: each block of 4 keys only for the row vectors from the
            // one holding the first row that sees its first key (rows before it see none of the
            // block; the mask pass below sets their entries to -inf whatever they hold).
            for (int32_t b = p0; b < p0 + pn; b += 4) {
                const int64_t first_row = std::max<int64_t>(0, (c0 + b - it.first_pos) * G);
                const int32_t r0 = int32_t(std::min<int64_t>(first_row, rows - 1)) / kLanes * kLanes;
                scores_lanes(st + int64_t(b) * R, cmax, qt, kt + int64_t(b) * d, std::min(4, p0 + pn - b), d, R, r0);
            }
        }
        if (!all_visible && plain) {
            // Masks only, one lane vector of rows at a time: row r + lane (query position qpos)
            // sees key j iff j <= qpos - c0 and, with a window, j > qpos - c0 - W. Rows in padding
            // lanes get a position too; their results are never written out.
            for (int32_t r = 0; r < R; r += kLanes) {
                ivec qrel;
                for (int32_t u = 0; u < kLanes; ++u) qrel[u] = int32_t(it.first_pos + (r + u) / G - c0);
                const ivec wlo = qrel - int32_t(W > 0 ? W : 0);
                fvec mxr = splatv(kNegInf);
                for (int32_t j = 0; j < n; ++j) {
                    const ivec jv = ivec{} + j;
                    ivec vis = jv <= qrel;
                    if (W > 0) vis &= jv > wlo;
                    const fvec x = selectv(vis, loadv(st + int64_t(j) * R + r), splatv(kNegInf));
                    storev(st + int64_t(j) * R + r, x);
                    mxr = maxv(mxr, x);
                }
                storev(cmax + r, mxr);
            }
        } else if (!plain) {
            for (int32_t r = 0; r < rows; ++r) {
                const int64_t qpos = it.first_pos + r / G;
                const int32_t head = it.kvh * G + r % G;
                for (int32_t j = 0; j < n; ++j) {
                    const int64_t p = c0 + j;
                    float &x = st[int64_t(j) * R + r];
                    if (p > qpos || (W > 0 && p <= qpos - W)) {
                        x = kNegInf;
                        continue;
                    }
                    if (a.alibi_slopes) x += a.alibi_slopes[head] * float(p - qpos);
                    if (a.softcap > 0.f) x = a.softcap * std::tanh(x / a.softcap);
                }
            }
            for (int32_t r = 0; r < R; r += kLanes) {
                fvec mxr = splatv(kNegInf);
                for (int32_t j = 0; j < n; ++j) mxr = maxv(mxr, loadv(st + int64_t(j) * R + r));
                storev(cmax + r, mxr);
            }
        }

        // Online softmax per lane. A row that has seen no key yet keeps m = -inf; exponents are
        // taken against 0 there so that its weights and correction come out 0, never NaN.
        auto softmax = [&](auto exp_fn) {
            for (int32_t r = 0; r < R; r += kLanes) {
                prefetch_step();
                const fvec m_old = loadv(m + r);
                const fvec m_new = maxv(m_old, loadv(cmax + r));
                const fvec base = selectv(m_new == splatv(kNegInf), splatv(0.f), m_new);
                fvec sum = splatv(0.f);
                for (int32_t j = 0; j < n; ++j) {
                    const fvec w = exp_fn(loadv(st + int64_t(j) * R + r) - base);
                    storev(st + int64_t(j) * R + r, w);
                    sum += w;
                }
                const fvec c = exp_fn(m_old - base);
                storev(corr + r, c);
                storev(l + r, loadv(l + r) * c + sum);
                storev(m + r, m_new);
            }
        };
        if (plain) softmax([](fvec x) { return exp2v(x); });
        else softmax([](fvec x) { return expv(x); });
        // V converted only now, into K's buffer (done with): one fp32 K/V tile in the working set
        // instead of two, next to q and the accumulators (32 KiB each at 64 rows; L1d is 48 KiB
        // here). Measured no slower, within noise faster; a 128-row item, which doubles q and the
        // accumulators, measured 15-20% slower.
        const float *vt = kbuf;
        if (from_copy) vt = C.v.data() + (c0 - C.lo) * d;
        else gather(kbuf, a, table, 1, it.kvh, c0, c1, a.v_scale);
        prefetch_step();
        pv_lanes(acct, st, vt, corr, n, d, R);
    }

    lanes_to_rows(qt, acct, R, d);  // qt is free now: the accumulators row by row
    const float to_natural = plain ? 0.693147180559945309f : 1.f;  // m back from base 2
    for (int32_t r = 0; r < rows; ++r) write_row(P, it, r, m[r] * to_natural, l[r], qt + int64_t(r) * d);
}

// Row pointers to K (kv = 0) or V of positions [p0, p1) of sequence `table` for one KV head, in
// place in the pool (fp32, or fp16 where the loads convert it: attention_tiles.hpp). dst[j] for
// j in [p1 - p0, n_padded) repeats row 0: the padding keys' scores are masked, never read as data.
template <typename E>
void row_ptrs(const E **dst, const AttentionArgs &a, const int32_t *table, int32_t kv, int32_t head, int64_t p0,
              int64_t p1, int32_t n_padded) {
    const int64_t hd = a.layout.head_dim;
    const E **at = dst;
    kv_runs(a, table, kv, head, p0, p1, [&](const char *src, int64_t run) {
        const E *row = reinterpret_cast<const E *>(src);
        for (int64_t t = 0; t < run; ++t) *at++ = row + t * hd;
    });
    for (int64_t j = p1 - p0; j < n_padded; ++j) dst[j] = dst[0];
}

// Items of fewer rows than a vector (decode with small GQA groups): rows in memory order, scores
// kLanes keys at a time per row and P.V for up to 4 rows per value load (attention_tiles.hpp); the
// softmax vectorized along each row's keys. E = the type the tiles read K/V as: with `in_place`,
// the pool's own rows (fp32 / fp16 / Bf16); otherwise fp32 rows gathered and converted into scratch.
template <typename E>
void attend_rows(const Plan &P, const Item &it, int64_t item, bool in_place) {
    const AttentionArgs &a = *P.a;
    const int32_t d = P.d, G = P.group, rows = it.rows;
    const int64_t W = a.sliding_window;
    const bool plain = !a.alibi_slopes && !(a.softcap > 0.f);
    Scratch &S = t_scratch;
    S.ensure(rows, d);
    float *q = S.q.data(), *acc = S.acc.data(), *m = S.m.data(), *l = S.l.data(), *corr = S.corr.data();
    float *kbuf = S.k.data(), *vbuf = S.v.data(), *st = S.s.data();
    const int32_t *table = a.block_tables + int64_t(it.s) * a.max_blocks_per_seq;
    // In place: the chunk's K rows (kp[cur]; V's lie kv_stride bytes further) and the next chunk's
    // (kp[cur ^ 1]), prefetched row by row while the current ones are used. Padded to kChunk with
    // row 0.
    // During the item's last chunk the "next chunk" is the first one of the item this thread
    // probably takes next (Plan::next_item, as NextItemPrefetch guesses), so that no item
    // starts on a cold chunk: batched decode f16, 3-14 % faster (RESULTS.md, session 20).
    const E *kp[2][kChunk];
    const int64_t next = P.next_item(item);
    const int64_t v_delta = a.layout.kv_stride;
    int cur = 0;
    auto chunk_rows = [&](int slot, const int32_t *tab, int32_t kvh, int64_t p0, int64_t p1) {
        row_ptrs(kp[slot], a, tab, 0, kvh, p0, p1, kChunk);
    };
    if (in_place && it.c_lo < it.c_hi)
        chunk_rows(0, table, it.kvh, it.c_lo, std::min<int64_t>(it.c_hi, it.c_lo + kChunk));
    for (int32_t r = 0; r < rows; ++r) {
        read_q_row(P, it, r, q + int64_t(r) * d);
        if constexpr (std::is_same_v<E, Fp8>)  // q.(s k) = (s q).k; the rows read k / 256 (Fp8)
            scale_row(q + int64_t(r) * d, a.k_scale * kFp8InPlace, d);
        m[r] = kNegInf;
        l[r] = 0.f;
        std::fill(acc + int64_t(r) * d, acc + int64_t(r + 1) * d, 0.f);
    }

    for (int64_t c0 = it.c_lo; c0 < it.c_hi; c0 += kChunk) {
        const int64_t c1 = std::min<int64_t>(it.c_hi, c0 + kChunk);
        const int32_t n = int32_t(c1 - c0);
        const int32_t n_padded = (n + kLanes - 1) / kLanes * kLanes;
        const bool more = c1 < it.c_hi;  // a next chunk to prefetch
        const int64_t e = std::min<int64_t>(it.c_hi, c1 + kChunk);
        const E *const *kn = nullptr;
        Item nx;
        if (in_place && more) {
            chunk_rows(cur ^ 1, table, it.kvh, c1, e);
            kn = kp[cur ^ 1];
        } else if (in_place && next < P.items && decode_item(P, next, &nx) && nx.c_lo < nx.c_hi) {
            chunk_rows(cur ^ 1, a.block_tables + int64_t(nx.s) * a.max_blocks_per_seq, nx.kvh, nx.c_lo,
                       std::min<int64_t>(nx.c_hi, nx.c_lo + kChunk));
            kn = kp[cur ^ 1];
        } else if (!in_place) {
            // Keys n .. n_padded - 1 get scores from stale kbuf rows; the mask below overwrites them.
            PrefetchStream ps;
            if (more) ps.init(a, table, 0, it.kvh, c1, e);
            gather(kbuf, a, table, 0, it.kvh, c0, c1, a.k_scale, more ? &ps : nullptr);
            if (more) ps.init(a, table, 1, it.kvh, c1, e);
            gather(vbuf, a, table, 1, it.kvh, c0, c1, a.v_scale, more ? &ps : nullptr);
        }
        const int32_t rb = d * int32_t(sizeof(E));
        if (in_place) scores_rows(st, q, RowPointers<E>{kp[cur], 0, kn, rb}, rows, n_padded, d);
        else scores_rows(st, q, PackedRows{kbuf, d}, rows, n_padded, d);
        for (int32_t r = 0; r < rows; ++r) {
            const int64_t qpos = it.first_pos + r / G;
            const int64_t lo = std::max<int64_t>(c0, W > 0 ? qpos - W + 1 : 0) - c0;  // visible keys [lo, hi)
            const int64_t hi = std::min<int64_t>(c1, qpos + 1) - c0;
            const int32_t head = it.kvh * G + r % G;
            float *sr = st + int64_t(r) * kChunk;
            if (plain && lo <= 0 && hi >= n) {
                // Every key of the chunk visible (decode's usual case): only the padding masked.
                for (int32_t j = n; j < n_padded; ++j) sr[j] = kNegInf;
            } else {
                for (int32_t j = 0; j < n_padded; ++j) {
                    if (j < lo || j >= hi) {
                        sr[j] = kNegInf;
                        continue;
                    }
                    if (a.alibi_slopes) sr[j] += a.alibi_slopes[head] * float(c0 + j - qpos);
                    if (a.softcap > 0.f) sr[j] = a.softcap * std::tanh(sr[j] / a.softcap);
                }
            }
            fvec mx = splatv(kNegInf);
            for (int32_t j = 0; j < n_padded; j += kLanes) mx = maxv(mx, loadv(sr + j));
            const float m_new = std::max(m[r], hmax(mx));
            // A row that has seen no key yet keeps m = -inf: exponents against 0 give it weight 0.
            const float base = m_new == kNegInf ? 0.f : m_new;
            fvec sum = splatv(0.f);
            for (int32_t j = 0; j < n_padded; j += kLanes) {
                const fvec w = expv(loadv(sr + j) - base);
                storev(sr + j, w);
                sum += w;
            }
            corr[r] = std::exp(m[r] - base);
            l[r] = l[r] * corr[r] + hsum(sum);
            m[r] = m_new;
        }
        if (in_place) pv_rows(acc, st, RowPointers<E>{kp[cur], v_delta, kn, rb}, corr, rows, n, d);
        else pv_rows(acc, st, PackedRows{vbuf, d}, corr, rows, n, d);
        cur ^= 1;
    }

    for (int32_t r = 0; r < rows; ++r) {
        if constexpr (std::is_same_v<E, Fp8>)  // sum w (s v) = s sum w v; the rows read v / 256
            scale_row(acc + int64_t(r) * d, a.v_scale * kFp8InPlace, d);
        write_row(P, it, r, m[r], l[r], acc + int64_t(r) * d);
    }
}

void attend_item(const Plan &P, int64_t item) {
    Item it;
    if (!decode_item(P, item, &it)) return;
    if (it.rows >= kLanes) return attend_lanes(P, it, item);
    // K/V read in place only where it measured faster than gathering: fp32 at AVX-512 and AVX2
    // (AVX2 measured 0.95x once, in a build whose gathered path was slowed by a row-pointer table
    // too; with the spread prefetch, decode 16x1024 f32: 15.5 -> 10.8 ms CPU), fp16 up to 8 rows
    // (AVX-512's GQA 8: each element is converted once per block of four rows, twice, yet in place
    // measured 1.3-1.4x faster than gathering; the 0.97x of an earlier session was measured while
    // the in-place prefetch was compiled out, RowPointers::prefetch_next); bf16 likewise (widened and
    // shifted in registers: decode 16x1024 1.5x faster at AVX-512, 1.76x at AVX2 than gathered);
    // fp8 e4m3 up to 4 rows (each element converted once per item, as the gather does it, without
    // the gather's store and reload: decode 16x1024 1.32x at AVX-512, 1.17x at AVX2 with the old
    // integer conversion; with F16C's (simd.hpp fp8v_div256) 1.86x / 1.36x less CPU than session
    // 20's gathered path, RESULTS.md session 21; at 8 rows every element would be converted twice).
    const int32_t dtype = P.a->layout.dtype;
#if defined(KVC_SIMD_AVX2) || defined(KVC_SIMD_AVX512)
    if (dtype == KVC_DTYPE_F32) return attend_rows<float>(P, it, item, true);
#endif
    (void)dtype;
#if defined(KVC_SIMD_AVX2) || defined(KVC_SIMD_AVX512)
    if (dtype == KVC_DTYPE_F16 && it.rows <= 8) return attend_rows<uint16_t>(P, it, item, true);
    if (dtype == KVC_DTYPE_BF16 && it.rows <= 8) return attend_rows<Bf16>(P, it, item, true);
    if (dtype == KVC_DTYPE_FP8_E4M3 && it.rows <= 4) return attend_rows<Fp8>(P, it, item, true);
#endif
    attend_rows<float>(P, it, item, false);
}

// Combines the partitions of (sequence, query head) `item` of the current round.
void reduce_item(const Plan &P, int64_t item) {
    const AttentionArgs &a = *P.a;
    const int32_t head = int32_t(item % a.num_q_heads);
    const int32_t s_local = int32_t(item / a.num_q_heads);
    const int32_t s = P.seq_begin + s_local;
    const int32_t d = P.d;
    float mx = kNegInf;
    for (int32_t i = 0; i < P.parts; ++i) {
        const float *pi = P.partial(s_local, i, head);
        if (pi[1] > 0.f) mx = std::max(mx, pi[0]);
    }
    Scratch &S = t_scratch;
    S.ensure(1, d);
    float *acc = S.acc.data();
    std::fill(acc, acc + d, 0.f);
    float lsum = 0.f;
    for (int32_t i = 0; i < P.parts; ++i) {
        const float *pi = P.partial(s_local, i, head);
        if (!(pi[1] > 0.f)) continue;  // empty partition (past the context or outside the window)
        const float w = std::exp(pi[0] - mx);
        lsum += w * pi[1];
        axpy(acc, w, pi + 2, d);
    }
    scale_row(acc, lsum > 0.f ? 1.0f / lsum : 0.f, d);
    const int64_t tok = a.query_start_loc[s];
    from_float(static_cast<char *>(a.out) + (tok * a.num_q_heads + head) * int64_t(d) * dtype_bytes(a.q_dtype), acc,
               a.q_dtype, d);
}

// Test hook body (vector_exp in attention_isa.hpp): y = e^x, or 2^x, through this variant's expv /
// exp2v; n a multiple of kLanes.
void vector_exp_body(const float *x, float *y, int64_t n, bool base2) {
    for (int64_t i = 0; i + kLanes <= n; i += kLanes) storev(y + i, base2 ? exp2v(loadv(x + i)) : expv(loadv(x + i)));
}

// Partitions per sequence for a decode launch: explicit size, never, or auto (split long contexts
// only when there are too few work units to keep every thread busy). A thread takes every head of
// a (sequence, partition) at once where it can (decode_unit), so that two threads do not read the
// heads of the same blocks side by side: a few long sequences are cut into partitions of at least
// kUnitMinPartition positions, enough for 4 units per thread -- one sequence of 16384 into 8 of
// 2048 instead of 8 heads: 1.3-1.4x less wall time, 2x4096 1.17x (RESULTS.md, session 28). Shorter
// ones are split as before, so that there are enough (sequence, KV head) items.
int64_t choose_partition_len(const AttentionArgs &a, int32_t nkv) {
    if (a.max_q_len != 1 || a.partition_size < 0 || a.max_seq_len <= 0) return 0;
    if (a.partition_size > 0) return a.partition_size;
    const int64_t want = 4 * int64_t(parallel_width());
    if (a.num_seqs >= want) return 0;
    if (a.max_seq_len >= 2 * kUnitMinPartition) {
        const int64_t parts = (want + a.num_seqs - 1) / a.num_seqs;
        return std::max<int64_t>(kUnitMinPartition, (a.max_seq_len + parts - 1) / parts);
    }
    const int64_t items = int64_t(a.num_seqs) * nkv;
    if (a.max_seq_len < 2 * kAutoMinPartition || items >= want) return 0;
    const int64_t parts = (want + items - 1) / items;
    return std::max<int64_t>(kAutoMinPartition, (a.max_seq_len + parts - 1) / parts);
}

// Items per unit a thread claims from the pool: for decode (one query tile per sequence), every KV
// head of one (sequence, partition), so that one thread reads a sequence's blocks, all of whose
// heads lie together (HND: [K|V][head][token][dim] in each block), and no two threads stream
// neighbouring 4 KiB head regions of the same blocks at once. Handed out one item at a time, the
// two threads of this VM read the heads of each block in turn, and a plain read in that order
// (bench_kernels_cpu `read_paged_pool_by_head`, tests/bench/RESULTS.md session 28) takes 1.3-1.6x
// as long as one in which each thread keeps to its own sequences -- presumably each core's
// hardware prefetchers fetch the neighbouring head's region, which the other core then reads again
// from memory. Claimed a sequence at a time,
// batched f16 decode (two threads) took 1.3-1.7x less wall time. Only where that cannot unbalance
// the threads: at least 2 units per thread (4x1024 decode: 1.16x with 2 per thread; 4 were asked
// at first), and none longer than half a thread's fair share of the context (one long sequence
// among short ones stays split by KV head).
int32_t decode_unit(const Plan &P, int64_t first, int64_t seqs) {
    const AttentionArgs &a = *P.a;
    if (P.tiles != 1 || P.nkv <= 1) return 1;  // prefill / long appends: KvCopy's order (decode_item)
    if (seqs * P.parts < 2 * int64_t(P.width)) return 1;
    int64_t total = 0, longest = 0;
    for (int64_t s = first; s < first + seqs; ++s) {
        const int64_t L = a.seq_lens[s];
        total += L;
        longest = std::max(longest, P.parts > 1 ? std::min<int64_t>(L, P.part_len) : L);
    }
    return longest * 2 * P.width <= total ? P.nkv : 1;
}

kvc_status run_attention(const AttentionArgs &a) {
    Plan P;
    P.a = &a;
    static std::atomic<uint64_t> launches{0};
    P.launch = launches.fetch_add(1, std::memory_order_relaxed) + 1;
    P.copy_floats = kv_copy_floats();
    P.nkv = a.layout.num_kv_heads;
    P.group = a.num_q_heads / P.nkv;
    P.d = a.layout.head_dim;
    P.q_tile = a.max_q_len <= 1 ? 1 : std::max<int32_t>(1, kTargetRows / P.group);
    P.tiles = int32_t((std::max<int32_t>(a.max_q_len, 1) + P.q_tile - 1) / P.q_tile);
    P.width = parallel_width();
    if (a.num_seqs <= 0) return KVC_OK;

    int64_t part_len = choose_partition_len(a, P.nkv);
    int64_t parts = part_len > 0 ? (a.max_seq_len + part_len - 1) / part_len : 1;
    int64_t seqs_per_round = a.num_seqs;
    if (parts > 1) {
        // Fit the partials into the workspace: fewer partitions per sequence, then rounds.
        const int64_t per_part = int64_t(a.num_q_heads) * (2 + int64_t(P.d)) * 4;
        const int64_t fit_parts = a.workspace ? int64_t(a.workspace_bytes) / per_part : 0;
        if (fit_parts < parts) {
            parts = fit_parts;
            part_len = parts > 1 ? (a.max_seq_len + parts - 1) / parts : 0;
            if (part_len > 0) parts = (a.max_seq_len + part_len - 1) / part_len;
        }
        if (parts > 1) seqs_per_round = std::max<int64_t>(1, int64_t(a.workspace_bytes) / (per_part * parts));
    }
    if (parts <= 1) { parts = 1; part_len = 0; }
    P.parts = int32_t(parts);
    P.part_len = part_len;
    P.partials = static_cast<float *>(a.workspace);

    for (int64_t first = 0; first < a.num_seqs; first += seqs_per_round) {
        const int64_t n = std::min<int64_t>(seqs_per_round, a.num_seqs - first);
        P.seq_begin = int32_t(first);
        P.items = n * P.tiles * P.parts * P.nkv;
        P.unit = decode_unit(P, first, n);
        auto attend = [&P](int64_t u) {
            for (int64_t item = u * P.unit; item < (u + 1) * P.unit; ++item) attend_item(P, item);
        };
        parallel_for_each(P.items / P.unit, attend);
        if (P.parts > 1) {
            auto reduce = [&P](int64_t item) { reduce_item(P, item); };
            parallel_for_each(n * a.num_q_heads, reduce);
        }
    }
    return KVC_OK;
}

}  // namespace
}  // namespace kvc
