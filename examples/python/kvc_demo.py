#!/usr/bin/env python3
"""libkvc from Python through ctypes: no build step, no compiled extension.

Finds libkvc.so.0 through $KVC_LIB (the library file, or a directory holding it), else a build
tree next to this checkout (build*/lib), else the system loader (ldconfig cache, LD_LIBRARY_PATH).
Runs a small scheduler scenario (shared-prefix hit, decode across a block boundary, fork with
copy-on-write, stats, an error with its kvc_last_error message) and, with --conformance FILE,
the shared conformance scenario (tests/conformance/README.md). Exits non-zero on any unexpected
result.
"""
import argparse
import ctypes
import ctypes.util
import glob
import os
import sys

# ---------------------------------------------------------------------------------------------
# Loading the library and declaring the prototypes used here (kvc.h is the reference)
# ---------------------------------------------------------------------------------------------
c_i32, c_i64, c_u32, c_u64, c_f64 = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_double
P = ctypes.POINTER

STATUS_NAMES = ["OK", "NULL_ARG", "INVALID_ARG", "OVERFLOW", "NO_MEMORY", "OUT_OF_BLOCKS", "UNKNOWN_SEQ",
                "SEQ_EXISTS", "BUFFER_TOO_SMALL", "MAX_LEN", "BUSY", "UNSUPPORTED", "DEVICE", "IO", "VERSION",
                "STATE", "INTERNAL"]
STATUS = {name: code for code, name in enumerate(STATUS_NAMES)}
VERDICTS = {"OK": 0, "LATER": 1, "NEVER": 2}
BACKEND_NONE = 0


class PoolConfig(ctypes.Structure):
    _fields_ = [("struct_size", c_u32), ("block_size", c_i32), ("num_layers", c_i32), ("num_kv_heads", c_i32),
                ("num_q_heads", c_i32), ("head_dim", c_i32), ("kv_dtype", c_i32), ("num_blocks", c_i64),
                ("memory_budget_bytes", c_i64), ("memory_utilization", c_f64), ("watermark", c_f64),
                ("max_seq_len", c_i64), ("prefix_caching", c_i32), ("backend", c_i32), ("device", c_i32),
                ("event_capacity", c_i32), ("gpu_memory_utilization", c_f64)]


class Stats(ctypes.Structure):
    _fields_ = [("struct_size", c_u32)] + [(name, c_i64) for name in (
        "total_blocks", "free_blocks", "used_blocks", "cached_free_blocks", "pinned_blocks", "num_seqs")] + [
        ("utilization", c_f64)] + [(name, c_i64) for name in (
            "allocs", "frees", "forks", "appends", "blocks_allocated", "blocks_freed", "cow_copies",
            "pending_copies", "prefix_query_tokens", "prefix_hit_tokens")] + [
        ("prefix_hit_rate", c_f64), ("evictions", c_i64), ("verify_misses", c_i64), ("events_dropped", c_i64)]


# Sizes on the LP64 ABI (the same ones bindgen's layout tests check for the Rust binding).
assert ctypes.sizeof(PoolConfig) == 96 and ctypes.sizeof(Stats) == 176

pool_p, keys_p = ctypes.c_void_p, ctypes.c_void_p
PROTOTYPES = {
    "kvc_version": (c_i32, []),
    "kvc_version_string": (ctypes.c_char_p, []),
    "kvc_status_str": (ctypes.c_char_p, [c_i32]),
    "kvc_last_error": (ctypes.c_char_p, []),
    "kvc_pool_config_default": (c_i32, [P(PoolConfig)]),
    "kvc_pool_create": (c_i32, [P(PoolConfig), P(pool_p)]),
    "kvc_pool_destroy": (c_i32, [pool_p]),
    "kvc_pool_check": (c_i32, [pool_p]),
    "kvc_pool_stats": (c_i32, [pool_p, P(Stats)]),
    "kvc_keys_create": (c_i32, [P(keys_p)]),
    "kvc_keys_destroy": (c_i32, [keys_p]),
    "kvc_keys_set_lora": (c_i32, [keys_p, c_u64]),
    "kvc_keys_set_salt": (c_i32, [keys_p, ctypes.c_char_p]),
    "kvc_keys_set_priority": (c_i32, [keys_p, c_i32]),
    "kvc_keys_set_max_cached_tokens": (c_i32, [keys_p, c_i64]),
    "kvc_can_alloc": (c_i32, [pool_p, P(c_i32), c_i64, keys_p, P(c_i32)]),
    "kvc_alloc": (c_i32, [pool_p, c_u64, P(c_i32), c_i64, keys_p, P(c_i64)]),
    "kvc_append": (c_i32, [pool_p, c_u64, P(c_i32), c_i64, c_i64, P(c_i32)]),
    "kvc_truncate": (c_i32, [pool_p, c_u64, c_i64, P(c_i32)]),
    "kvc_pool_set_sliding_window": (c_i32, [pool_p, c_i32]),
    "kvc_pool_get_sliding_window": (c_i32, [pool_p, P(c_i32)]),
    "kvc_fork": (c_i32, [pool_p, c_u64, c_u64]),
    "kvc_free": (c_i32, [pool_p, c_u64]),
    "kvc_seq_block_table": (c_i32, [pool_p, c_u64, P(c_i32), c_i64, P(c_i64)]),
    "kvc_seq_num_tokens": (c_i32, [pool_p, c_u64, P(c_i64)]),
    "kvc_seq_slot_mapping": (c_i32, [pool_p, c_u64, c_i64, c_i64, P(c_i64), c_i64]),
    "kvc_take_pending_copies": (c_i32, [pool_p, P(c_i32), P(c_i32), c_i64, P(c_i64)]),
    "kvc_prefix_lookup": (c_i32, [pool_p, P(c_i32), c_i64, keys_p, P(c_i64)]),
    "kvc_prefix_cache_reset": (c_i32, [pool_p]),
}


def find_library():
    env = os.environ.get("KVC_LIB")
    if env:
        return os.path.join(env, "libkvc.so.0") if os.path.isdir(env) else env
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    built = sorted(glob.glob(os.path.join(root, "build*", "lib", "libkvc.so.0")) +
                   glob.glob(os.path.join(root, "build*", "*", "lib", "libkvc.so.0")), key=os.path.getmtime)
    if built:
        return built[-1]  # the most recently built tree
    return ctypes.util.find_library("kvc") or "libkvc.so.0"


def load(path):
    lib = ctypes.CDLL(path)
    for name, (restype, argtypes) in PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


class KvcError(Exception):
    def __init__(self, status, message):
        super().__init__("%s: %s" % (status_name(status), message))
        self.status, self.message = status, message


def status_name(code):
    return STATUS_NAMES[code] if 0 <= code < len(STATUS_NAMES) else "UNKNOWN(%d)" % code


class Kvc:
    """Thin Pythonic layer: every call checks its status and raises KvcError with the message.

    kvc_last_error() is per OS thread; ctypes runs the call and the read on the calling Python
    thread (an OS thread), one right after the other, so the message is that call's.
    """

    def __init__(self, lib):
        self.lib = lib

    def check(self, status):
        if status != 0:
            raise KvcError(status, self.lib.kvc_last_error().decode("utf-8", "replace"))

    def pool(self, block_size, num_blocks, watermark, prefix_caching, max_seq_len=0):
        cfg = PoolConfig()
        self.check(self.lib.kvc_pool_config_default(ctypes.byref(cfg)))
        cfg.block_size, cfg.num_blocks, cfg.watermark = block_size, num_blocks, watermark
        cfg.prefix_caching, cfg.max_seq_len, cfg.backend = prefix_caching, max_seq_len, BACKEND_NONE
        handle = pool_p()
        self.check(self.lib.kvc_pool_create(ctypes.byref(cfg), ctypes.byref(handle)))
        return handle

    def keys(self, lora=None, salt=None, priority=None, max_cached=None):
        if lora is None and salt is None and priority is None and max_cached is None:
            return None
        k = keys_p()
        self.check(self.lib.kvc_keys_create(ctypes.byref(k)))
        try:
            if lora is not None:
                self.check(self.lib.kvc_keys_set_lora(k, lora))
            if salt is not None:
                self.check(self.lib.kvc_keys_set_salt(k, salt.encode()))
            if priority is not None:
                self.check(self.lib.kvc_keys_set_priority(k, priority))
            if max_cached is not None:
                self.check(self.lib.kvc_keys_set_max_cached_tokens(k, max_cached))
        except KvcError:
            self.lib.kvc_keys_destroy(k)
            raise
        return k

    def drop_keys(self, k):
        if k is not None:
            self.lib.kvc_keys_destroy(k)

    @staticmethod
    def tokens(values):
        return (c_i32 * len(values))(*values)

    def alloc(self, pool, seq, toks, keys=None):
        cached = c_i64()
        self.check(self.lib.kvc_alloc(pool, seq, self.tokens(toks), len(toks), keys, ctypes.byref(cached)))
        return cached.value

    def can_alloc(self, pool, toks, keys=None):
        verdict = c_i32()
        self.check(self.lib.kvc_can_alloc(pool, self.tokens(toks), len(toks), keys, ctypes.byref(verdict)))
        return verdict.value

    def lookup(self, pool, toks, keys=None):
        cached = c_i64()
        self.check(self.lib.kvc_prefix_lookup(pool, self.tokens(toks), len(toks), keys, ctypes.byref(cached)))
        return cached.value

    def append(self, pool, seq, toks, lookahead=0):
        new_blocks = c_i32()
        self.check(self.lib.kvc_append(pool, seq, self.tokens(toks), len(toks), lookahead, ctypes.byref(new_blocks)))
        return new_blocks.value

    def truncate(self, pool, seq, num_tokens):
        freed_blocks = c_i32()
        self.check(self.lib.kvc_truncate(pool, seq, num_tokens, ctypes.byref(freed_blocks)))
        return freed_blocks.value

    def set_window(self, pool, window):
        self.check(self.lib.kvc_pool_set_sliding_window(pool, window))

    def get_window(self, pool):
        window = c_i32()
        self.check(self.lib.kvc_pool_get_sliding_window(pool, ctypes.byref(window)))
        return window.value

    def fork(self, pool, parent, child):
        self.check(self.lib.kvc_fork(pool, parent, child))

    def free(self, pool, seq):
        self.check(self.lib.kvc_free(pool, seq))

    def table(self, pool, seq):
        n = c_i64()
        self.check(self.lib.kvc_seq_block_table(pool, seq, None, 0, ctypes.byref(n)))
        buf = (c_i32 * n.value)()
        self.check(self.lib.kvc_seq_block_table(pool, seq, buf, n.value, ctypes.byref(n)))
        return list(buf[:n.value])

    def num_tokens(self, pool, seq):
        n = c_i64()
        self.check(self.lib.kvc_seq_num_tokens(pool, seq, ctypes.byref(n)))
        return n.value

    def slots(self, pool, seq, first, count):
        buf = (c_i64 * max(count, 0))()
        self.check(self.lib.kvc_seq_slot_mapping(pool, seq, first, count, buf, max(count, 0)))
        return list(buf)

    def take_pending_copies(self, pool):
        n = c_i64()
        self.check(self.lib.kvc_take_pending_copies(pool, None, None, 0, ctypes.byref(n)))
        src, dst = (c_i32 * n.value)(), (c_i32 * n.value)()
        self.check(self.lib.kvc_take_pending_copies(pool, src, dst, n.value, ctypes.byref(n)))
        return list(zip(src[:n.value], dst[:n.value]))

    def stats(self, pool):
        s = Stats()
        s.struct_size = ctypes.sizeof(Stats)
        self.check(self.lib.kvc_pool_stats(pool, ctypes.byref(s)))
        return s

    def check_pool(self, pool):
        self.check(self.lib.kvc_pool_check(pool))

    def reset(self, pool):
        self.check(self.lib.kvc_prefix_cache_reset(pool))


def expect(cond, what):
    if not cond:
        raise AssertionError("unexpected: " + what)


# ---------------------------------------------------------------------------------------------
# The demo scenario
# ---------------------------------------------------------------------------------------------
def demo(kvc):
    lib = kvc.lib
    print("libkvc %s (version number %d)" % (lib.kvc_version_string().decode(), lib.kvc_version()))
    pool = kvc.pool(block_size=16, num_blocks=8, watermark=0.0, prefix_caching=1)
    try:
        system = list(range(1000, 1032))  # a 32-token system prompt: two full blocks
        a = kvc.alloc(pool, 1, system + [1, 2, 3])
        b = kvc.alloc(pool, 2, system + [7, 8])
        print("request 1: cached %d, table %s" % (a, kvc.table(pool, 1)))
        print("request 2: cached %d, table %s" % (b, kvc.table(pool, 2)))
        expect((a, b) == (0, 32), "shared prefix hit of 32 tokens")

        new = sum(kvc.append(pool, 1, [2000 + i]) for i in range(14))
        print("request 1 after 14 decode steps: %d tokens, table %s" % (kvc.num_tokens(pool, 1), kvc.table(pool, 1)))
        expect(new == 1 and len(kvc.table(pool, 1)) == 4, "one new block at the 48-token boundary")

        kvc.fork(pool, 2, 3)
        kvc.append(pool, 3, [5])
        copies = kvc.take_pending_copies(pool)
        print("fork 2 -> 3 and decode: copy-on-write pairs %s" % copies)
        expect(len(copies) == 1 and kvc.table(pool, 3)[2] == copies[0][1], "one copy-on-write pair into seq 3")
        newest = kvc.num_tokens(pool, 3) - 1
        print("slot of request 3's newest token: %d" % kvc.slots(pool, 3, newest, 1)[0])

        try:
            kvc.free(pool, 99)
            expect(False, "freeing an unknown sequence must fail")
        except KvcError as e:
            print("error as expected: %s" % e)
            expect(e.status == STATUS["UNKNOWN_SEQ"] and "99" in e.message, "UNKNOWN_SEQ naming sequence 99")
        try:
            kvc.alloc(pool, 4, list(range(5000, 5200)))
            expect(False, "a 200-token prompt cannot fit 8 blocks of 16")
        except KvcError as e:
            print("error as expected: %s" % e)
            expect(e.status == STATUS["OUT_OF_BLOCKS"], "OUT_OF_BLOCKS")

        s = kvc.stats(pool)
        print("stats: %d used, %d free, %d seqs, hit rate %.2f, %d cow copies" %
              (s.used_blocks, s.free_blocks, s.num_seqs, s.prefix_hit_rate, s.cow_copies))
        expect((s.num_seqs, s.cow_copies, s.prefix_hit_tokens) == (3, 1, 32), "stats after the demo")
        kvc.check_pool(pool)
    finally:
        lib.kvc_pool_destroy(pool)


# ---------------------------------------------------------------------------------------------
# The shared conformance scenario
# ---------------------------------------------------------------------------------------------
STATS_KEYS = ("free_blocks", "used_blocks", "num_seqs", "cow_copies", "prefix_hit_tokens", "prefix_query_tokens",
              "cached_free_blocks", "evictions", "allocs", "frees")


def parse_list(value):
    if value.startswith("range:"):
        a, b = value[len("range:"):].split(":")
        return list(range(int(a), int(b)))
    return [int(x) for x in value.split(",")]


def run_op(kvc, state, op, kv, used):
    def get(key, default=None):
        if key in kv:
            used.add(key)
            return kv[key]
        return default

    def compare(key, actual):
        want = get(key)
        if want is None:
            return
        want = parse_list(want) if isinstance(actual, list) else int(want)
        if want != actual:
            raise AssertionError("%s: expected %s, got %s" % (key, want, actual))

    def with_keys(fn):
        keys = kvc.keys(lora=int(get("lora")) if "lora" in kv else None, salt=get("salt"),
                        priority=int(get("priority")) if "priority" in kv else None,
                        max_cached=int(get("max_cached")) if "max_cached" in kv else None)
        try:
            return fn(keys)
        finally:
            kvc.drop_keys(keys)

    if op == "pool":
        handle = kvc.pool(int(get("block_size")), int(get("num_blocks")), float(get("watermark")),
                          int(get("prefix_caching")), int(get("max_seq_len", 0)))
        if state["pool"]:
            kvc.lib.kvc_pool_destroy(state["pool"])
        state["pool"] = handle
        return
    if op == "destroy":
        kvc.lib.kvc_pool_destroy(state["pool"])
        state["pool"] = None
        return
    pool = state["pool"]
    if pool is None:
        raise AssertionError("no pool")
    if op == "alloc":
        compare("cached", with_keys(lambda k: kvc.alloc(pool, int(get("seq")), parse_list(get("tokens")), k)))
    elif op == "can_alloc":
        verdict = with_keys(lambda k: kvc.can_alloc(pool, parse_list(get("tokens")), k))
        if VERDICTS[get("verdict")] != verdict:
            raise AssertionError("verdict: expected %s, got %d" % (kv["verdict"], verdict))
    elif op == "lookup":
        compare("cached", with_keys(lambda k: kvc.lookup(pool, parse_list(get("tokens")), k)))
    elif op == "append":
        compare("new_blocks", kvc.append(pool, int(get("seq")), parse_list(get("tokens")), int(get("lookahead", 0))))
    elif op == "truncate":
        compare("freed_blocks", kvc.truncate(pool, int(get("seq")), int(get("num_tokens"))))
    elif op == "set_window":
        kvc.set_window(pool, int(get("window")))
    elif op == "get_window":
        compare("window", kvc.get_window(pool))
    elif op == "fork":
        kvc.fork(pool, int(get("parent")), int(get("child")))
    elif op == "free":
        kvc.free(pool, int(get("seq")))
    elif op == "table":
        table = kvc.table(pool, int(get("seq")))
        compare("len", len(table))
        compare("blocks", table)
    elif op == "num_tokens":
        compare("value", kvc.num_tokens(pool, int(get("seq"))))
    elif op == "slots":
        compare("values", kvc.slots(pool, int(get("seq")), int(get("first")), int(get("count"))))
    elif op == "pending_copies":
        pairs = kvc.take_pending_copies(pool)
        compare("count", len(pairs))
        compare("src", [p[0] for p in pairs])
        compare("dst", [p[1] for p in pairs])
    elif op == "stats":
        s = kvc.stats(pool)
        for key in STATS_KEYS:
            compare(key, getattr(s, key))
    elif op == "check":
        kvc.check_pool(pool)
    elif op == "reset":
        kvc.reset(pool)
    else:
        raise AssertionError("unknown op")


def conformance(kvc, path):
    state = {"pool": None}
    ops = errors = 0
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            op, kv = words[0], dict(w.split("=", 1) for w in words[1:])
            want = kv.get("expect", "OK")
            used = {"expect"}
            try:
                try:
                    run_op(kvc, state, op, kv, used)
                    got = "OK"
                except KvcError as e:
                    got = status_name(e.status)
                    if not e.message:
                        raise AssertionError("%s without a kvc_last_error message" % got)
                if got != want:
                    raise AssertionError("status: expected %s, got %s (%s)" % (want, got, kvc.lib.kvc_last_error()))
                unknown = set(kv) - used
                if got == "OK" and unknown:
                    raise AssertionError("unknown keys %s" % sorted(unknown))
            except AssertionError as e:
                raise AssertionError("%s:%d (%s): %s" % (os.path.basename(path), no, op, e))
            ops += 1
            errors += want != "OK"
    if state["pool"]:
        kvc.lib.kvc_pool_destroy(state["pool"])
    expect(ops >= 100 and errors >= 15, "the scenario has %d ops and %d error cases" % (ops, errors))
    print("conformance: %d operations, %d expected errors: ok" % (ops, errors))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conformance", metavar="FILE", help="also run this conformance scenario")
    args = parser.parse_args()
    path = find_library()
    try:
        lib = load(path)
    except OSError as e:
        print("cannot load libkvc (%s): %s; set KVC_LIB to libkvc.so.0" % (path, e), file=sys.stderr)
        return 2
    kvc = Kvc(lib)
    try:
        demo(kvc)
        if args.conformance:
            conformance(kvc, args.conformance)
    except (AssertionError, KvcError) as e:
        print("FAILED: %s" % e, file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
