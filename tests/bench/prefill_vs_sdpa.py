#!/usr/bin/env python3
"""Prefill attention of libkvc against PyTorch scaled_dot_product_attention on the same shapes.

For each shape: a pool on the chosen backend, sequences allocated through the library (with a real
prefix-cache hit for the "+cached" shapes), the prompt's K/V written with kvc_cache_write through
the batch's own slot mapping, the written cache checked byte for byte against the source K/V
(kvc_storage_copy_blocks + kvc_storage_get_info strides, so layout and slot mapping are verified
independently of the attention kernel), then one layer of kvc_launch_attention timed against SDPA on
contiguous [B, H, L, D] K/V in the same process, and the outputs compared (max |kvc - SDPA| must be
<= --tol and finite, else exit 1).

--device cuda (default): fp16, CUDA events, the GPU kept busy (torch.cuda._sleep) while the host
queues the timed launches so host overhead is not measured. --device cpu: the same code path on the
CPU backend with small shapes and a float32 reference (SDPA if this torch has it, else an explicit
softmax(QK^T * scale + causal mask) V "math reference"), for checking the plumbing without a GPU;
its timings mean little.

Exit status: 0 all shapes correct; 1 a correctness check or a libkvc call failed; 2 setup error;
77 skipped (torch not importable, or no CUDA device in cuda mode).
Speed is reported as medians and as the ratio to the SDPA baseline timed in the same run.
"""
import argparse
import contextlib
import ctypes
import datetime
import json
import math
import os
import platform
import random
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True  # importing the demo must leave no __pycache__ in the tree
sys.path.insert(0, os.path.join(ROOT, "examples", "python"))
import kvc_demo  # noqa: E402  library discovery, PoolConfig and the status/error helpers live there

SKIP = 77
c_i32, c_i64, c_u32, c_u64, c_f32 = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_float
P, VOID = ctypes.POINTER, ctypes.c_void_p
BACKEND_CPU, BACKEND_CUDA = 1, 2
DTYPE_F16 = 1


class StorageInfo(ctypes.Structure):
    _fields_ = [("struct_size", c_u32), ("backend", c_i32), ("kv_dtype", c_i32), ("elem_bytes", c_i32),
                ("device", c_i32), ("base_address", c_u64), ("total_bytes", c_i64), ("block_stride", c_i64),
                ("layer_stride", c_i64), ("kv_stride", c_i64), ("head_stride", c_i64), ("token_stride", c_i64)]


class BatchInfo(ctypes.Structure):
    _fields_ = [("struct_size", c_u32), ("num_seqs", c_i32), ("num_tokens", c_i64), ("max_blocks_per_seq", c_i32),
                ("max_q_len", c_i32), ("max_seq_len", c_i64), ("num_indices", c_i64), ("is_decode", c_i32),
                ("rows_uploaded", c_i32)] + [(name, c_u64) for name in (
                    "block_tables", "seq_lens", "query_start_loc", "slot_mapping", "kv_indptr", "kv_indices",
                    "kv_last_page_len")]


class AttentionParams(ctypes.Structure):
    _fields_ = [("struct_size", c_u32), ("num_q_heads", c_i32), ("q_dtype", c_i32), ("scale", c_f32),
                ("k_scale", c_f32), ("v_scale", c_f32), ("logit_softcap", c_f32), ("sliding_window", c_i32),
                ("alibi_slopes", VOID), ("partition_size", c_i32)]


# LP64 sizes, checked against kvc.h with offsetof/sizeof when this file was written.
assert (ctypes.sizeof(StorageInfo), ctypes.sizeof(BatchInfo), ctypes.sizeof(AttentionParams)) == (80, 104, 48)
assert BatchInfo.slot_mapping.offset == 72 and AttentionParams.partition_size.offset == 40

PROTOTYPES = {
    "kvc_cuda_device_count": [P(c_i32)],
    "kvc_storage_get_info": [VOID, P(StorageInfo)],
    "kvc_cache_write": [VOID, c_i32, VOID, c_i64, VOID, VOID, c_i32, c_f32, c_f32, VOID],
    "kvc_storage_copy_blocks": [VOID, P(c_i32), c_i64, VOID, c_i32],
    "kvc_batch_create": [VOID, c_i32, c_i64, c_i32, P(VOID)],
    "kvc_batch_destroy": [VOID],
    "kvc_batch_set_stream": [VOID, VOID],
    "kvc_batch_build": [VOID, P(c_u64), P(c_i64), c_i32],
    "kvc_batch_get_info": [VOID, P(BatchInfo)],
    "kvc_batch_copy_slot_mapping": [VOID, P(c_i64), c_i64],
    "kvc_batch_copy_block_tables": [VOID, P(c_i32), c_i64],
    "kvc_attention_params_default": [P(AttentionParams)],
    "kvc_launch_attention": [VOID, VOID, c_i32, VOID, VOID, P(AttentionParams), VOID],
}


def load_kvc(path):
    lib = kvc_demo.load(path)
    for name, argtypes in PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = c_i32, argtypes
    return kvc_demo.Kvc(lib)


class Shape:
    """batch sequences, each with `new` query tokens after `cached` tokens found in the prefix cache."""

    def __init__(self, batch, new, cached, head_dim, block_size, q_heads, kv_heads):
        self.batch, self.new, self.cached, self.head_dim, self.block_size = batch, new, cached, head_dim, block_size
        self.q_heads, self.kv_heads = q_heads, kv_heads
        self.context = cached + new

    def label(self):
        cached = " + %d cached" % self.cached if self.cached else ""
        return "%d × %d%s, d=%d, bs %d" % (self.batch, self.new, cached, self.head_dim, self.block_size)

    def visible_pairs(self):
        """(query, key) pairs the causal mask lets through, over the whole batch."""
        q, c = self.new, self.cached
        return self.batch * (q * c + q * (q + 1) // 2)

    def flops(self):
        return 4 * self.head_dim * self.q_heads * self.visible_pairs()


# "BxNEW[+CACHED]:HEAD_DIM:BLOCK_SIZE"
DEFAULT_SHAPES = {
    "cuda": ["1x512:128:16", "4x512:128:16", "1x2048:128:16", "4x2048:128:16", "1x8192:128:16",
             "1x2048:256:16", "1x512+2048:128:16"],
    "cpu": ["1x128:64:16", "2x100:64:1", "1x128:128:1", "2x100:128:16", "2x40+48:128:16", "1x24+32:64:1"],
}
DEFAULT_HEADS = {"cuda": (32, 8), "cpu": (8, 2)}


def parse_shape(text, q_heads, kv_heads):
    try:
        lens, d, bs = text.split(":")
        b, rest = lens.lower().split("x")
        new, cached = (rest.split("+") + ["0"])[:2]
        return Shape(int(b), int(new), int(cached), int(d), int(bs), q_heads, kv_heads)
    except ValueError:
        raise SystemExit("bad shape %r: expected BxNEW[+CACHED]:HEAD_DIM:BLOCK_SIZE, e.g. 4x2048:128:16" % text)


# ---------------------------------------------------------------------------------------------
# The one place where the CPU and CUDA runs differ: device, stream, reference dtype, clock
# ---------------------------------------------------------------------------------------------
class Target:
    def __init__(self, torch, kind):
        self.torch, self.kind = torch, kind
        self.cuda = kind == "cuda"
        if self.cuda:
            self.device = torch.device("cuda", torch.cuda.current_device())
            self.backend = BACKEND_CUDA
            self.ordinal = self.device.index
            # A stream of our own, made current for the whole run (see scope()), as an engine would
            # have: libkvc gets the same stream torch's work and the timing events use.
            self.torch_stream = torch.cuda.Stream(self.device)
            self.stream_handle = self.torch_stream.cuda_stream  # cudaStream_t as an integer
            self.ref_dtype = torch.float16  # SDPA runs in the same dtype as libkvc
            self.name = torch.cuda.get_device_name(self.device)
        else:
            self.device = torch.device("cpu")
            self.backend, self.ordinal, self.stream_handle = BACKEND_CPU, 0, 0
            self.ref_dtype = torch.float32  # CPU fp16 matmul is missing or slow in older torch
            self.name = cpu_name()
        self.stream = VOID(self.stream_handle or None)

    def scope(self):
        """Context in which torch.cuda.current_stream() is the stream handed to libkvc."""
        return self.torch.cuda.stream(self.torch_stream) if self.cuda else contextlib.nullcontext()

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def time_ms(self, fn, reps):
        """Milliseconds of each of `reps` calls of fn."""
        if not self.cuda:
            samples = []
            for _ in range(reps):
                t0 = time.perf_counter()
                fn()
                samples.append((time.perf_counter() - t0) * 1e3)
            return samples
        torch = self.torch
        # Host cost of queueing one call (ctypes / dispatcher / event record), to keep the GPU busy
        # long enough that the timed launches run back to back: events then time the GPU work only.
        self.sync()
        t0 = time.perf_counter()
        for _ in range(4):
            fn()
        host_s = (time.perf_counter() - t0) / 4
        self.sync()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(int(min(2e9, 4 * (host_s + 20e-6) * reps * 2.0e9)))  # ~2 GHz SM clock
        for start, end in events:
            start.record()
            fn()
            end.record()
        self.sync()
        return [start.elapsed_time(end) for start, end in events]


def cpu_name():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return "%s (%d CPUs)" % (line.split(":", 1)[1].strip(), os.cpu_count() or 0)
    except OSError:
        pass
    return platform.processor() or "CPU"


# ---------------------------------------------------------------------------------------------
# libkvc side: pool, sequences, batch, cache write, layout check, attention launch
# ---------------------------------------------------------------------------------------------
class KvcPrefill:
    """Owns one shape's pool and batch; close() releases them."""

    def __init__(self, kvc, target, shape):
        self.kvc, self.lib, self.target, self.shape = kvc, kvc.lib, target, shape
        self.pool = self.batch = self.info = None

    def setup(self, k, v, rng):
        """Pool sized for the shape, sequences, one built batch, the prompt's K/V in the cache."""
        kvc, s, target = self.kvc, self.shape, self.target
        blocks_per_seq = -(-s.context // s.block_size)
        prefix_blocks = s.cached // s.block_size
        cfg = kvc_demo.PoolConfig()
        kvc.check(self.lib.kvc_pool_config_default(ctypes.byref(cfg)))
        cfg.block_size, cfg.num_layers, cfg.num_kv_heads, cfg.num_q_heads = s.block_size, 1, s.kv_heads, s.q_heads
        cfg.head_dim, cfg.kv_dtype, cfg.backend, cfg.device = s.head_dim, DTYPE_F16, target.backend, target.ordinal
        cfg.num_blocks = s.batch * blocks_per_seq + prefix_blocks + 1
        cfg.watermark, cfg.event_capacity, cfg.prefix_caching = 0.0, 0, 1 if s.cached else 0
        pool = VOID()
        kvc.check(self.lib.kvc_pool_create(ctypes.byref(cfg), ctypes.byref(pool)))
        self.pool = pool
        self.storage = StorageInfo(struct_size=ctypes.sizeof(StorageInfo))
        kvc.check(self.lib.kvc_storage_get_info(pool, ctypes.byref(self.storage)))
        expect(self.storage.backend == target.backend and self.storage.elem_bytes == 2,
               "storage on backend %d with %d-byte elements" % (self.storage.backend, self.storage.elem_bytes))
        batch = VOID()
        kvc.check(self.lib.kvc_batch_create(pool, s.batch, max(s.batch * s.new, s.cached, 1), blocks_per_seq,
                                            ctypes.byref(batch)))
        self.batch = batch
        kvc.check(self.lib.kvc_batch_set_stream(batch, target.stream))

        prefix_tokens = [rng.randrange(1, 1 << 30) for _ in range(s.cached)]
        if s.cached:
            # An earlier request prefilled the shared prefix: its full blocks are now in the prefix
            # cache, and every sequence of the batch hits them (their K/V are the same for all).
            donor = 1 << 40
            kvc.alloc(pool, donor, prefix_tokens)
            self.build([donor], [s.cached])
            self.write(k[0, :s.cached].contiguous(), v[0, :s.cached].contiguous(), s.cached)
        self.seq_ids = list(range(1, s.batch + 1))
        for seq in self.seq_ids:
            hit = kvc.alloc(pool, seq, prefix_tokens + [rng.randrange(1, 1 << 30) for _ in range(s.new)])
            expect(hit == s.cached, "sequence %d: %d cached tokens, expected a prefix hit of %d" % (seq, hit, s.cached))
        self.info = self.build(self.seq_ids, [s.new] * s.batch)
        expect((self.info.num_seqs, self.info.num_tokens, self.info.max_q_len, self.info.max_seq_len) ==
               (s.batch, s.batch * s.new, s.new, s.context), "batch info %s" % info_text(self.info))
        new_k = k[:, s.cached:].reshape(s.batch * s.new, s.kv_heads, s.head_dim).contiguous()
        new_v = v[:, s.cached:].reshape(s.batch * s.new, s.kv_heads, s.head_dim).contiguous()
        self.write(new_k, new_v, s.batch * s.new)

    def build(self, seq_ids, q_lens):
        n = len(seq_ids)
        self.kvc.check(self.lib.kvc_batch_build(self.batch, (c_u64 * n)(*seq_ids), (c_i64 * n)(*q_lens), n))
        info = BatchInfo(struct_size=ctypes.sizeof(BatchInfo))
        self.kvc.check(self.lib.kvc_batch_get_info(self.batch, ctypes.byref(info)))
        self.info = info
        return info

    def write(self, k, v, num_tokens):
        """reshape_and_cache of the last build's new tokens, through the batch's slot mapping (backend memory)."""
        self.kvc.check(self.lib.kvc_cache_write(self.pool, 0, VOID(self.info.slot_mapping), num_tokens,
                                                VOID(k.data_ptr()), VOID(v.data_ptr()), DTYPE_F16, 1.0, 1.0,
                                                self.target.stream))

    def check_layout(self, torch, k, v):
        """The cache read back byte for byte equals the source K/V, position by position, found via the
        block tables and the storage strides: verifies slot mapping, layout and pointer passing
        without the attention kernel."""
        s, st, lib = self.shape, self.storage, self.lib
        self.target.sync()
        width = self.info.max_blocks_per_seq
        tables = (c_i32 * (s.batch * width))()
        self.kvc.check(lib.kvc_batch_copy_block_tables(self.batch, tables, len(tables)))
        slots = (c_i64 * (s.batch * s.new))()
        self.kvc.check(lib.kvc_batch_copy_slot_mapping(self.batch, slots, len(slots)))
        nb = -(-s.context // s.block_size)
        strides = [st.block_stride, st.kv_stride, st.head_stride, st.token_stride]
        expect(all(x % st.elem_bytes == 0 for x in strides), "strides %s are whole elements" % strides)
        for b in range(s.batch):
            row = list(tables[b * width:b * width + nb])
            expect(all(blk >= 0 for blk in row), "sequence %d: block table %s has padding in use" % (b, row))
            for j in range(s.new):  # slot = block x block_size + position mod block_size (kvc.h)
                pos = s.cached + j
                want = row[pos // s.block_size] * s.block_size + pos % s.block_size
                got = slots[b * s.new + j]
                expect(got == want, "sequence %d position %d: slot %d, expected %d" % (b, pos, got, want))
            raw = (ctypes.c_uint8 * (nb * st.block_stride))()
            self.kvc.check(lib.kvc_storage_copy_blocks(self.pool, (c_i32 * nb)(*row), nb, raw, 1))
            flat = torch.frombuffer(raw, dtype=torch.float16)
            blocks = flat.as_strided((nb, 2, s.kv_heads, s.block_size, s.head_dim),
                                     tuple(x // st.elem_bytes for x in strides) + (1,))
            kv = blocks.permute(1, 0, 3, 2, 4).reshape(2, nb * s.block_size, s.kv_heads, s.head_dim)[:, :s.context]
            for name, got, want in (("K", kv[0], k[b]), ("V", kv[1], v[b])):
                bad = (got != want.cpu()).any(dim=2).any(dim=1).nonzero()
                expect(bad.numel() == 0, "sequence %d: cached %s differs from the source at positions %s" %
                       (b, name, bad.flatten()[:8].tolist()))

    def attention_fn(self, q_flat, out):
        s, lib, check = self.shape, self.lib, self.kvc.check
        params = AttentionParams()
        check(lib.kvc_attention_params_default(ctypes.byref(params)))
        params.num_q_heads, params.q_dtype = s.q_heads, DTYPE_F16
        args = (self.pool, self.batch, 0, VOID(q_flat.data_ptr()), VOID(out.data_ptr()), ctypes.byref(params),
                self.target.stream)
        self._params = params  # keep alive with args
        launch = lib.kvc_launch_attention
        return lambda: check(launch(*args))

    def close(self):
        if self.batch:
            self.lib.kvc_batch_destroy(self.batch)
        if self.pool:
            self.lib.kvc_pool_destroy(self.pool)
        self.batch = self.pool = None


def info_text(info):
    return "(seqs %d, tokens %d, max_q_len %d, max_seq_len %d)" % (
        info.num_seqs, info.num_tokens, info.max_q_len, info.max_seq_len)


# ---------------------------------------------------------------------------------------------
# PyTorch side: SDPA variants on contiguous [B, H, L, D] K/V, or the math reference
# ---------------------------------------------------------------------------------------------
class TorchFeatures:
    def __init__(self, torch, target):
        F = torch.nn.functional
        self.sdpa = getattr(F, "scaled_dot_product_attention", None)
        self.gqa = False
        self.gqa_note = "this torch has no enable_gqa"
        self.lower_right = None
        if self.sdpa is None:
            return
        tiny = torch.zeros(1, 2, 4, 64, device=target.device, dtype=target.ref_dtype)
        try:
            self.sdpa(tiny, tiny[:, :1], tiny[:, :1], is_causal=True, enable_gqa=True)
            self.gqa = True
        except TypeError:
            pass
        except RuntimeError as e:
            self.gqa_note = "enable_gqa failed here: %s" % str(e).splitlines()[0][:120]
        try:
            from torch.nn.attention.bias import causal_lower_right
            self.lower_right = causal_lower_right
        except ImportError:
            pass


def math_attention(torch, q_s, k_s, v_s, offset, scale):
    """softmax(q k^T * scale + causal mask) v in float32; query row i sees keys <= i + offset.
    K/V already expanded to q's heads. Chunked over query rows to bound memory."""
    q32, k32, v32 = q_s.float(), k_s.float(), v_s.float()
    B, H, Q, _ = q32.shape
    C = k32.shape[2]
    out = torch.empty_like(q32)
    chunk = max(1, (64 << 20) // max(1, B * H * C))
    kpos = torch.arange(C, device=q32.device)
    for lo in range(0, Q, chunk):
        hi = min(Q, lo + chunk)
        scores = torch.matmul(q32[:, :, lo:hi], k32.transpose(-1, -2)) * scale
        qpos = torch.arange(lo, hi, device=q32.device) + offset
        scores.masked_fill_(kpos[None, :] > qpos[:, None], float("-inf"))
        out[:, :, lo:hi] = torch.matmul(torch.softmax(scores, dim=-1), v32)
    return out


def reference_variants(torch, feats, shape, q_s, k_s, v_s):
    """[(label, fn returning [B, Hq, Q, D])] plus [(label, reason)] for variants that cannot run."""
    s = shape
    group = s.q_heads // s.kv_heads
    k_x, v_x = k_s.repeat_interleave(group, dim=1), v_s.repeat_interleave(group, dim=1)  # before timing
    if feats.sdpa is None:
        scale = 1.0 / math.sqrt(s.head_dim)
        return [("math reference fp32, expanded K/V",
                 lambda: math_attention(torch, q_s, k_x, v_x, s.cached, scale))], []
    sdpa, skipped = feats.sdpa, []
    if s.cached == 0:
        mask, mask_label = {"is_causal": True}, "is_causal"
    elif feats.lower_right is not None:
        mask, mask_label = {"attn_mask": feats.lower_right(s.new, s.context)}, "causal_lower_right"
    else:
        rows = torch.arange(s.new, device=q_s.device)[:, None] + s.cached
        mask = {"attn_mask": torch.arange(s.context, device=q_s.device)[None, :] <= rows}
        mask_label = "explicit bool mask"
    dtype = "" if q_s.dtype == torch.float16 else " fp32"
    variants = [("SDPA%s %s, expanded K/V" % (dtype, mask_label), lambda: sdpa(q_s, k_x, v_x, **mask))]
    if feats.gqa:
        variants.insert(0, ("SDPA%s %s, enable_gqa" % (dtype, mask_label),
                            lambda: sdpa(q_s, k_s, v_s, enable_gqa=True, **mask)))
    else:
        skipped.append(("enable_gqa", "%s (torch %s)" % (feats.gqa_note, torch.__version__)))
    runnable = []
    for label, fn in variants:
        try:
            fn()
            runnable.append((label, fn))
        except (RuntimeError, TypeError, ValueError) as e:
            skipped.append((label, str(e).splitlines()[0][:160]))
    return runnable, skipped


SDPA_OPS = (("cudnn_attention", "cuDNN"), ("flash_attention", "flash"), ("efficient_attention", "mem-efficient"),
            ("attention_math", "math"))


def sdpa_backend(torch, fn):
    """Which SDPA kernel a call dispatches to, read from the profiler's aten op names."""
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            fn()
        names = " ".join(evt.key for evt in prof.key_averages())
    except Exception as e:  # the profiler is diagnostics only; never fail the benchmark over it
        return "unknown (%s)" % type(e).__name__
    for op, label in SDPA_OPS:
        if op in names:
            return label
    return "explicit ops" if "aten::softmax" in names else "unknown"


# ---------------------------------------------------------------------------------------------
# One shape
# ---------------------------------------------------------------------------------------------
def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def run_shape(kvc, torch, target, feats, shape, args, seed):
    s = shape
    torch.manual_seed(seed)
    rng = random.Random(seed)
    dev = target.device
    # Generated in float32 and rounded: older CPU torch cannot sample fp16 directly.
    q = torch.randn(s.batch, s.new, s.q_heads, s.head_dim, device=dev).half()
    k = torch.randn(s.batch, s.context, s.kv_heads, s.head_dim, device=dev).half()
    v = torch.randn(s.batch, s.context, s.kv_heads, s.head_dim, device=dev).half()
    if s.cached:  # the shared prefix has one K/V for all sequences
        k[:, :s.cached] = k[:1, :s.cached]
        v[:, :s.cached] = v[:1, :s.cached]

    prefill = KvcPrefill(kvc, target, s)
    try:
        prefill.setup(k, v, rng)
        prefill.check_layout(torch, k, v)
        q_flat = q.reshape(s.batch * s.new, s.q_heads, s.head_dim)
        out = torch.empty_like(q_flat)
        kvc_fn = prefill.attention_fn(q_flat, out)

        rd = target.ref_dtype
        q_s = q.transpose(1, 2).contiguous().to(rd)
        k_s, v_s = k.transpose(1, 2).contiguous().to(rd), v.transpose(1, 2).contiguous().to(rd)
        variants, skipped = reference_variants(torch, feats, s, q_s, k_s, v_s)
        for label, reason in skipped:
            print("  [%s] baseline variant %s skipped: %s" % (s.label(), label, reason))
        expect(variants, "%s: no baseline variant runs here" % s.label())

        for _ in range(args.warmup):
            kvc_fn()
            for _, fn in variants:
                fn()
        target.sync()
        samples = {"kvc": []}
        samples.update((label, []) for label, _ in variants)
        for _ in range(args.rounds):  # alternate, so clock or thermal drift hits both sides alike
            samples["kvc"] += target.time_ms(kvc_fn, args.reps)
            for label, fn in variants:
                samples[label] += target.time_ms(fn, args.reps)

        kvc_fn()
        target.sync()
        got = out.view(s.batch, s.new, s.q_heads, s.head_dim).float()
        finite = bool(torch.isfinite(got).all())
        errors = {}
        for label, fn in variants:
            ref = fn().transpose(1, 2).float()
            errors[label] = float((got - ref).abs().max()) if finite else float("nan")
        medians = {label: statistics.median(x) for label, x in samples.items()}
        base = min((label for label, _ in variants), key=lambda label: medians[label])
        base_fn = dict(variants)[base]
        backend = sdpa_backend(torch, base_fn) if base.startswith("SDPA") else "torch ops"
    finally:
        prefill.close()

    err = max(errors.values())
    ok = finite and err <= args.tol
    kvc_ms, base_ms = medians["kvc"], medians[base]
    tokens = s.batch * s.new
    return {
        "shape": s.label(), "batch": s.batch, "new_tokens": s.new, "cached_tokens": s.cached,
        "head_dim": s.head_dim, "block_size": s.block_size, "q_heads": s.q_heads, "kv_heads": s.kv_heads,
        "kvc_ms": kvc_ms, "baseline_ms": base_ms, "baseline": base, "baseline_backend": backend,
        "variants_ms": {k: v for k, v in medians.items() if k != "kvc"},
        "skipped_variants": dict(skipped),
        "kvc_tokens_per_s": tokens / (kvc_ms * 1e-3), "baseline_tokens_per_s": tokens / (base_ms * 1e-3),
        "kvc_tflops": s.flops() / (kvc_ms * 1e-3) / 1e12, "baseline_tflops": s.flops() / (base_ms * 1e-3) / 1e12,
        "ratio": base_ms / kvc_ms, "max_abs_err": err, "max_abs_err_by_variant": errors, "finite": finite,
        "passed": ok, "samples": len(samples["kvc"]),
    }


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------
def table(rows, target):
    flop_unit, scale = ("TFLOP/s", 1.0) if target.cuda else ("GFLOP/s", 1e3)
    lines = ["| shape (B × new tokens, head dim, block size) | kvc ms | baseline ms | baseline (kernel) | "
             "kvc tokens/s | kvc %s | baseline %s | kvc/baseline | max abs err |" % (flop_unit, flop_unit),
             "|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            lines.append("| %s | — | — | %s | | | | | FAILED |" % (r["shape"], r["error"][:80].replace("|", "/")))
            continue
        lines.append("| %s | %.4g | %.4g | %s (%s) | %s | %.3g | %.3g | %.2f× | %.2e%s |" % (
            r["shape"], r["kvc_ms"], r["baseline_ms"], r["baseline"], r["baseline_backend"],
            "{:,.0f}".format(r["kvc_tokens_per_s"]).replace(",", " "), r["kvc_tflops"] * scale,
            r["baseline_tflops"] * scale, r["ratio"], r["max_abs_err"], "" if r["passed"] else " FAILED"))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--shapes", nargs="+", metavar="BxNEW[+CACHED]:D:BS",
                        help="shapes to run (default: the issue's list on cuda, small ones on cpu)")
    parser.add_argument("--q-heads", type=int)
    parser.add_argument("--kv-heads", type=int)
    parser.add_argument("--reps", type=int, help="timed calls per round (default 50 cuda, 3 cpu)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating kvc/baseline rounds (default 3)")
    parser.add_argument("--warmup", type=int, help="untimed calls first (default 10 cuda, 1 cpu)")
    parser.add_argument("--tol", type=float, default=2e-2, help="max |kvc - baseline| allowed (default 2e-2)")
    parser.add_argument("--seed", type=int, default=1234)
    default_out = os.path.join(os.environ["OUT"], "prefill_vs_sdpa.json") if os.environ.get("OUT") else None
    parser.add_argument("--out", default=default_out, help="JSON results (default $OUT/prefill_vs_sdpa.json)")
    args = parser.parse_args()
    cuda = args.device == "cuda"
    args.reps = args.reps or (50 if cuda else 3)
    args.warmup = args.warmup if args.warmup is not None else (10 if cuda else 1)

    try:
        import torch
    except Exception as e:  # ImportError, or a broken install raising something else
        print("SKIPPED: torch not importable (%s: %s)" % (type(e).__name__, e))
        return SKIP
    if cuda and not torch.cuda.is_available():
        print("SKIPPED: no usable CUDA device for torch (torch %s, CUDA build %s)" % (
            torch.__version__, torch.version.cuda))
        return SKIP

    path = kvc_demo.find_library()
    try:
        kvc = load_kvc(path)
    except (OSError, AttributeError) as e:
        print("cannot load libkvc (%s): %s; set KVC_LIB to libkvc.so.0 or its directory" % (path, e), file=sys.stderr)
        return 2
    if cuda:
        count = c_i32(0)
        kvc.lib.kvc_cuda_device_count(ctypes.byref(count))
        if count.value < 1:
            print("libkvc at %s sees no CUDA device while torch does: built without CUDA (-DKVC_CUDA=ON)?" % path,
                  file=sys.stderr)
            return 2

    target = Target(torch, args.device)
    q_heads = args.q_heads or DEFAULT_HEADS[args.device][0]
    kv_heads = args.kv_heads or DEFAULT_HEADS[args.device][1]
    shapes = [parse_shape(t, q_heads, kv_heads) for t in (args.shapes or DEFAULT_SHAPES[args.device])]
    with target.scope():
        return run_all(kvc, torch, target, shapes, args, path, q_heads, kv_heads)


def run_all(kvc, torch, target, shapes, args, path, q_heads, kv_heads):
    cuda = target.cuda
    feats = TorchFeatures(torch, target)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    version = kvc.lib.kvc_version_string().decode()
    print("prefill attention: libkvc %s (%s) vs PyTorch %s on %s (%s backend), %s" % (
        version, path, torch.__version__, target.name, args.device, date))

    rows, failed = [], False
    for i, shape in enumerate(shapes):
        try:
            r = run_shape(kvc, torch, target, feats, shape, args, args.seed + i)
        except (AssertionError, kvc_demo.KvcError) as e:
            r = {"shape": shape.label(), "error": str(e), "passed": False}
        failed |= not r["passed"]
        rows.append(r)
        if "error" in r:
            print("  %s: FAILED: %s" % (r["shape"], r["error"]))
        else:
            print("  %s: kvc %.4g ms, %s %.4g ms [%s], kvc/baseline %.2f×, max abs err %.2e%s" % (
                r["shape"], r["kvc_ms"], r["baseline"], r["baseline_ms"], r["baseline_backend"], r["ratio"],
                r["max_abs_err"], "" if r["passed"] else "  FAILED (tolerance %g; by variant: %s)" % (
                    args.tol, ", ".join("%s %.2e" % kv for kv in r["max_abs_err_by_variant"].items()))))

    timing = ("CUDA events per call, GPU kept busy while the host queues (torch.cuda._sleep)" if cuda
              else "time.perf_counter per call (CPU timings: plumbing check, not a performance figure)")
    gqa = ("enable_gqa=True and K/V expanded with repeat_interleave before timing, the faster one is the baseline"
           if feats.gqa else "K/V expanded with repeat_interleave before timing (%s)" % feats.gqa_note)
    if feats.sdpa is None:
        gqa = "no SDPA in torch %s: math reference in float32" % torch.__version__
    print()
    print("Program: `tests/bench/prefill_vs_sdpa.py --device %s` (ctypes, libkvc %s). Device: %s; torch %s%s; %s." % (
        args.device, version, target.name, torch.__version__,
        " (CUDA %s)" % torch.version.cuda if cuda else "", date))
    print("%d q / %d kv heads, fp16 q/K/V/out, one layer. Medians of %d rounds × %d calls after %d warmup; %s. "
          "Baseline in the same process on contiguous [B, H, L, D] K/V; GQA: %s. FLOP/s count 4·d flops per "
          "visible (q, k) pair per q head; kvc/baseline = baseline time / kvc time (goal ≥ 0.8×)." % (
              q_heads, kv_heads, args.rounds, args.reps, args.warmup, timing, gqa))
    print()
    print(table(rows, target))
    good = [r for r in rows if r["passed"]]
    if cuda and good:
        met = sum(r["ratio"] >= 0.8 for r in good)
        print("\ngoal kvc/baseline ≥ 0.8× met in %d of %d shapes" % (met, len(good)))
    print("\n%s: %d of %d shapes correct (tolerance %g)" % ("FAILED" if failed else "ok", len(good), len(rows),
                                                          args.tol))

    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"program": "tests/bench/prefill_vs_sdpa.py", "device_kind": args.device, "device": target.name,
                       "torch": torch.__version__, "torch_cuda": torch.version.cuda, "libkvc": version,
                       "libkvc_path": path, "date_utc": date, "reps": args.reps, "rounds": args.rounds,
                       "warmup": args.warmup, "tolerance": args.tol, "sdpa": feats.sdpa is not None,
                       "enable_gqa": feats.gqa, "passed": not failed, "results": rows}, f, indent=2)
        print("wrote %s" % args.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
