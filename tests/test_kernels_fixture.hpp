// Builds a random paged attention problem in host memory (NaN-filled storage, shuffled block
// tables, optional blocks shared after a fork), writes its K/V with cpu_cache_write, and keeps the
// dense (contiguous, already rounded) copy for kvc_ref::dense_attention. Shared by the CPU kernel
// tests and the GPU-vs-CPU tests (which upload storage/tables and compare against run_cpu()).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "dense_reference.hpp"
#include "storage/kernel_args.hpp"

namespace kvc_test {

struct CaseSpec {
    int32_t block_size = 16, head_dim = 128, num_q_heads = 8, num_kv_heads = 8;
    int32_t kv_dtype = KVC_DTYPE_F16, q_dtype = KVC_DTYPE_F16;
    std::vector<kvc_ref::Seq> seqs;
    int32_t fork_shared_blocks = 0;  // sequences 1.. share this many leading full blocks of seq 0
    float scale_mult = 1.0f;         // scale = scale_mult / sqrt(head_dim)
    float softcap = 0.0f;
    int32_t sliding_window = 0;
    bool alibi = false;
    float k_scale = 1.0f, v_scale = 1.0f;
    int32_t partition_size = -1;
    uint32_t seed = 1;
};

// Bit pattern of a NaN in each storage dtype, used to poison every slot that is not written.
inline void fill_nan(void *p, int64_t elems, int32_t dt) {
    for (int64_t i = 0; i < elems; ++i) {
        switch (dt) {
            case KVC_DTYPE_F32: static_cast<uint32_t *>(p)[i] = 0x7fc00000u; break;
            case KVC_DTYPE_F16: static_cast<uint16_t *>(p)[i] = 0x7e00u; break;
            case KVC_DTYPE_BF16: static_cast<uint16_t *>(p)[i] = 0x7fc0u; break;
            default: static_cast<uint8_t *>(p)[i] = 0x7fu; break;
        }
    }
}

struct PagedProblem {
    CaseSpec spec;
    kvc::KvLayout layout;
    int32_t layer = 1;  // of 2: layer 0 stays NaN, proving the layer stride is honoured
    std::vector<uint64_t> storage_words;
    void *storage = nullptr;
    int32_t max_blocks_per_seq = 0;
    std::vector<int32_t> tables, seq_lens, query_start_loc;
    int64_t num_tokens = 0;  // query tokens
    int32_t max_q_len = 0;
    int64_t max_seq_len = 0;
    std::vector<uint8_t> q;      // [num_tokens][num_q_heads][head_dim] in q_dtype
    std::vector<float> q_ref;    // same values as float
    std::vector<std::vector<float>> k_ref, v_ref;  // dense [ctx][kv_heads][d], as stored (dequantized)
    std::vector<float> alibi;
    std::vector<float> workspace;
    float scale = 0;

    kvc::AttentionArgs args(void *out, int32_t partition_size) {
        kvc::AttentionArgs a;
        a.layout = layout;
        a.base = storage;
        a.layer = layer;
        a.q = q.data();
        a.out = out;
        a.q_dtype = spec.q_dtype;
        a.num_q_heads = spec.num_q_heads;
        a.scale = scale;
        a.k_scale = spec.k_scale;
        a.v_scale = spec.v_scale;
        a.softcap = spec.softcap;
        a.sliding_window = spec.sliding_window;
        a.alibi_slopes = spec.alibi ? alibi.data() : nullptr;
        a.partition_size = partition_size;
        a.num_seqs = int32_t(spec.seqs.size());
        a.num_tokens = num_tokens;
        a.block_tables = tables.data();
        a.max_blocks_per_seq = max_blocks_per_seq;
        a.seq_lens = seq_lens.data();
        a.query_start_loc = query_start_loc.data();
        a.max_q_len = max_q_len;
        a.max_seq_len = max_seq_len;
        a.is_decode = max_q_len == 1;
        a.workspace = workspace.data();
        a.workspace_bytes = workspace.size() * sizeof(float);
        return a;
    }

    // Runs the CPU kernel; returns the output decoded to float.
    std::vector<float> run_cpu(int32_t partition_size, kvc_status *st) {
        std::vector<uint8_t> out(size_t(num_tokens) * spec.num_q_heads * spec.head_dim *
                                 size_t(kvc_ref::dtype_size(spec.q_dtype)));
        *st = kvc::cpu_attention(args(out.data(), partition_size));
        std::vector<float> f(size_t(num_tokens) * spec.num_q_heads * spec.head_dim);
        for (size_t i = 0; i < f.size(); ++i) f[i] = kvc_ref::decode(out.data(), int64_t(i), spec.q_dtype);
        return f;
    }

    std::vector<double> run_reference() const {
        kvc_ref::Problem P;
        P.num_q_heads = spec.num_q_heads;
        P.num_kv_heads = spec.num_kv_heads;
        P.head_dim = spec.head_dim;
        P.scale = scale;
        P.softcap = spec.softcap;
        P.sliding_window = spec.sliding_window;
        P.alibi = spec.alibi ? alibi.data() : nullptr;
        P.seqs = spec.seqs;
        std::vector<const float *> k, v;
        for (size_t s = 0; s < spec.seqs.size(); ++s) { k.push_back(k_ref[s].data()); v.push_back(v_ref[s].data()); }
        std::vector<double> out(size_t(num_tokens) * spec.num_q_heads * spec.head_dim);
        kvc_ref::dense_attention(P, q_ref.data(), k, v, out.data());
        return out;
    }
};

inline void store_value(void *p, int64_t i, int32_t dt, float r) { kvc_ref::encode_exact(p, i, dt, r); }

inline PagedProblem make_problem(const CaseSpec &spec) {
    PagedProblem P;
    P.spec = spec;
    std::mt19937 rng(spec.seed);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    const int32_t bs = spec.block_size, d = spec.head_dim, KH = spec.num_kv_heads, H = spec.num_q_heads;
    const size_t S = spec.seqs.size();

    // Block tables: shuffled ids; sequences 1.. may share seq 0's leading full blocks (a fork).
    std::vector<int64_t> nblocks(S), shared(S, 0);
    int64_t distinct = 0;
    for (size_t s = 0; s < S; ++s) {
        nblocks[s] = (spec.seqs[s].ctx_len + bs - 1) / bs;
        if (s > 0) {
            shared[s] = std::min<int64_t>({int64_t(spec.fork_shared_blocks), spec.seqs[s].ctx_len / bs,
                                           spec.seqs[0].ctx_len / bs});
            // The child's queries must not fall into the shared part (their K/V would differ).
            while (shared[s] > 0 && shared[s] * bs > spec.seqs[s].ctx_len - spec.seqs[s].q_len) --shared[s];
        }
        distinct += nblocks[s] - shared[s];
        P.max_blocks_per_seq = int32_t(std::max<int64_t>(P.max_blocks_per_seq, nblocks[s]));
        P.max_seq_len = std::max(P.max_seq_len, spec.seqs[s].ctx_len);
        P.max_q_len = int32_t(std::max<int64_t>(P.max_q_len, spec.seqs[s].q_len));
    }
    P.max_blocks_per_seq += 1;  // one padding column of -1
    const int64_t num_blocks = distinct + 3;
    std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
    for (int64_t i = 0; i < num_blocks; ++i) ids[size_t(i)] = int32_t(i);
    std::shuffle(ids.begin(), ids.end(), rng);
    P.tables.assign(S * size_t(P.max_blocks_per_seq), -1);
    size_t next = 0;
    for (size_t s = 0; s < S; ++s)
        for (int64_t b = 0; b < nblocks[s]; ++b)
            P.tables[s * P.max_blocks_per_seq + b] = b < shared[s] ? P.tables[size_t(b)] : ids[next++];

    P.layout.init(num_blocks, bs, 2, KH, d, spec.kv_dtype);
    P.storage_words.assign(size_t(P.layout.total_bytes + 7) / 8, 0);
    P.storage = P.storage_words.data();
    fill_nan(P.storage, P.layout.total_bytes / P.layout.elem_bytes, spec.kv_dtype);

    // K/V source values in the source dtype (= q dtype), written through cpu_cache_write.
    const int32_t src_dt = spec.q_dtype, src_bytes = kvc_ref::dtype_size(src_dt);
    const bool fp8 = spec.kv_dtype == KVC_DTYPE_FP8_E4M3;
    P.k_ref.resize(S);
    P.v_ref.resize(S);
    std::vector<int64_t> slots;
    std::vector<uint8_t> ksrc, vsrc;
    const int64_t row = int64_t(KH) * d;
    for (size_t s = 0; s < S; ++s) {
        const int64_t L = spec.seqs[s].ctx_len;
        P.k_ref[s].resize(size_t(L * row));
        P.v_ref[s].resize(size_t(L * row));
        for (int64_t p = 0; p < L; ++p) {
            if (p < shared[s] * bs) {  // the fork child sees the parent's values in shared blocks
                std::copy_n(P.k_ref[0].begin() + p * row, row, P.k_ref[s].begin() + p * row);
                std::copy_n(P.v_ref[0].begin() + p * row, row, P.v_ref[s].begin() + p * row);
                continue;
            }
            if (p % 97 == 5) {  // a padding token: slot -1 with garbage data, must be skipped
                slots.push_back(-1);
                ksrc.resize(ksrc.size() + size_t(row * src_bytes), 0xff);
                vsrc.resize(vsrc.size() + size_t(row * src_bytes), 0xff);
            }
            int32_t block = P.tables[s * P.max_blocks_per_seq + p / bs];
            slots.push_back(int64_t(block) * bs + p % bs);
            size_t at = ksrc.size() / size_t(src_bytes);
            ksrc.resize(ksrc.size() + size_t(row * src_bytes));
            vsrc.resize(vsrc.size() + size_t(row * src_bytes));
            for (int64_t i = 0; i < row; ++i) {
                float kx = kvc_ref::round_to(uni(rng), src_dt), vx = kvc_ref::round_to(uni(rng), src_dt);
                store_value(ksrc.data(), int64_t(at) + i, src_dt, kx);
                store_value(vsrc.data(), int64_t(at) + i, src_dt, vx);
                float ks = fp8 ? kx / spec.k_scale : kx, vs = fp8 ? vx / spec.v_scale : vx;
                float kr = kvc_ref::round_to(ks, spec.kv_dtype), vr = kvc_ref::round_to(vs, spec.kv_dtype);
                P.k_ref[s][size_t(p * row + i)] = fp8 ? kr * spec.k_scale : kr;
                P.v_ref[s][size_t(p * row + i)] = fp8 ? vr * spec.v_scale : vr;
            }
        }
    }
    kvc::CacheWriteArgs w;
    w.layout = P.layout;
    w.base = P.storage;
    w.layer = P.layer;
    w.slots = slots.data();
    w.num_tokens = int64_t(slots.size());
    w.k = ksrc.data();
    w.v = vsrc.data();
    w.src_dtype = src_dt;
    w.k_scale = spec.k_scale;
    w.v_scale = spec.v_scale;
    kvc::cpu_cache_write(w);

    // Queries: the last q_len positions of each sequence.
    P.query_start_loc.push_back(0);
    for (size_t s = 0; s < S; ++s) {
        P.seq_lens.push_back(int32_t(spec.seqs[s].ctx_len));
        P.num_tokens += spec.seqs[s].q_len;
        P.query_start_loc.push_back(int32_t(P.num_tokens));
    }
    const int64_t qn = P.num_tokens * H * d;
    P.q.resize(size_t(qn * src_bytes));
    P.q_ref.resize(size_t(qn));
    std::uniform_real_distribution<float> qdist(-2.0f, 2.0f);
    for (int64_t i = 0; i < qn; ++i) {
        float x = kvc_ref::round_to(qdist(rng), spec.q_dtype);
        P.q_ref[size_t(i)] = x;
        store_value(P.q.data(), i, spec.q_dtype, x);
    }
    if (spec.alibi) {
        for (int32_t h = 0; h < H; ++h) P.alibi.push_back(std::ldexp(1.0f, -(8 * (h + 1)) / H));
    }
    P.scale = spec.scale_mult / std::sqrt(float(d));
    P.workspace.resize(kvc::cpu_attention_workspace_bytes(int32_t(S), H, d, P.max_seq_len) / sizeof(float) + 1);
    return P;
}

}  // namespace kvc_test
