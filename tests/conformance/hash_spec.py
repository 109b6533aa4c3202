#!/usr/bin/env python3
"""libkvc's block hashes, re-implemented from the README's "Block hash specification" alone.

This file must not be written from lib/core/block_hash.cpp: it is the proof that the written
specification is enough to compute the hashes a pool reports in its KV events. It needs only
Python's standard library and the xxhash module (Debian: python3-xxhash).

  hash_spec.py --check hash_vectors.txt        the vectors' expected hashes equal this file's
  hash_spec.py --against-lib [--cases N]       random prompts and keys: equal to libkvc's
                                               kvc_hash_blocks (ctypes; the library is $KVC_LIB)
  hash_spec.py --generate hash_vectors.txt     rewrite the vectors' count= and hashes= from this file
"""
import argparse
import ctypes
import os
import random
import struct
import sys

import xxhash

# --- the specification ---------------------------------------------------------------------------

ROOT_PARENT = (0x78666572702D6376, 0x31762D6B696C6269)  # (hi, lo) "parent" of block 0
TAG_LORA, TAG_SALT, TAG_MM = 1, 2, 3
MASK64 = (1 << 64) - 1


def tagged(kind, payload):
    """One extra key: kind byte, payload length (u32 LE), payload."""
    return bytes([kind]) + struct.pack("<I", len(payload)) + payload


def block_input(parent, block_tokens, index, block_size, lora, salt, mm):
    start, end = index * block_size, (index + 1) * block_size
    data = struct.pack("<QQ", parent[0], parent[1])
    data += struct.pack("<%di" % block_size, *block_tokens)
    if index == 0 and salt:
        data += tagged(TAG_SALT, salt)
    for hi, lo, offset, length in mm:  # in increasing offset order
        if offset < end and offset + length > start:
            rel = (offset - start) & MASK64  # negative when the item starts in an earlier block
            data += tagged(TAG_MM, struct.pack("<QQQQ", hi, lo, rel, length))
    if lora != 0:
        data += tagged(TAG_LORA, struct.pack("<Q", lora))
    return data


def hash_blocks(block_size, tokens, lora=0, salt=b"", mm=()):
    """[(hi, lo)] of every full block of the prompt."""
    out, parent = [], ROOT_PARENT
    for i in range(len(tokens) // block_size):
        block = tokens[i * block_size:(i + 1) * block_size]
        h = xxhash.xxh3_128_intdigest(block_input(parent, block, i, block_size, lora, salt, mm))
        parent = (h >> 64, h & MASK64)
        out.append(parent)
    return out


# --- the shared vectors (format: tests/conformance/README.md) ------------------------------------

def parse_tokens(text):
    if text.startswith("range:"):
        _, a, b = text.split(":")
        return list(range(int(a), int(b)))
    return [int(t) for t in text.split(",")]


def parse_hash(text):
    if len(text) != 32:
        raise ValueError("a hash is 32 hex digits (hi then lo): %r" % text)
    return int(text[:16], 16), int(text[16:], 16)


def parse_vector(line):
    op, *pairs = line.split()
    if op != "vector":
        raise ValueError("unknown op %r" % op)
    kv = dict(p.split("=", 1) for p in pairs)
    allowed = {"block_size", "tokens", "lora", "salt", "mm", "count", "hashes"}
    if set(kv) - allowed:
        raise ValueError("unknown keys %s" % sorted(set(kv) - allowed))
    mm = []
    for item in kv["mm"].split(",") if "mm" in kv else []:
        h, off, length = item.split(":")
        mm.append(parse_hash(h) + (int(off), int(length)))
    return {
        "block_size": int(kv["block_size"]), "tokens": parse_tokens(kv["tokens"]),
        "lora": int(kv.get("lora", "0")), "salt": kv.get("salt", "").encode(), "mm": mm,
        "count": int(kv["count"]) if "count" in kv else None,
        "hashes": [parse_hash(h) for h in kv["hashes"].split(",")] if "hashes" in kv else [],
    }


def vector_lines(path):
    """(line number, raw line, parsed vector or None for comments/blank lines)."""
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            body = raw.split("#", 1)[0].strip()
            yield n, raw, parse_vector(body) if body else None


def compute(v):
    return hash_blocks(v["block_size"], v["tokens"], v["lora"], v["salt"], v["mm"])


def check(path):
    bad = total = 0
    for n, _, v in vector_lines(path):
        if v is None:
            continue
        total += 1
        got = compute(v)
        if v["count"] != len(got) or v["hashes"] != got:
            print("line %d: expected count %s %s, the spec gives %d %s" % (n, v["count"], v["hashes"], len(got), got))
            bad += 1
    print("hash_spec: %d vectors, %d mismatches" % (total, bad))
    return bad == 0 and total > 0


def fmt_hash(h):
    return "%016x%016x" % h


def generate(path):
    out = []
    for _, raw, v in vector_lines(path):
        if v is None:
            out.append(raw)
            continue
        got = compute(v)
        keep = [p for p in raw.split("#", 1)[0].split() if not p.startswith(("count=", "hashes="))]
        keep.append("count=%d" % len(got))
        if got:
            keep.append("hashes=" + ",".join(fmt_hash(h) for h in got))
        out.append(" ".join(keep) + "\n")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(out)


# --- against the library -------------------------------------------------------------------------

def load_lib():
    lib = ctypes.CDLL(os.environ.get("KVC_LIB", "libkvc.so.0"))
    lib.kvc_keys_create.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    lib.kvc_keys_destroy.argtypes = [ctypes.c_void_p]
    lib.kvc_keys_set_lora.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
    lib.kvc_keys_set_salt.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.kvc_keys_add_mm.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int64, ctypes.c_int64]
    lib.kvc_hash_blocks.argtypes = [ctypes.c_int32, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32), ctypes.c_int64,
                                    ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64), ctypes.c_int64,
                                    ctypes.POINTER(ctypes.c_int64)]
    lib.kvc_last_error.restype = ctypes.c_char_p
    return lib


def lib_hash_blocks(lib, block_size, tokens, lora, salt, mm):
    def ok(st):
        if st != 0:
            raise RuntimeError("libkvc status %d: %s" % (st, lib.kvc_last_error().decode()))
    keys = ctypes.c_void_p()
    ok(lib.kvc_keys_create(ctypes.byref(keys)))
    try:
        ok(lib.kvc_keys_set_lora(keys, lora))
        ok(lib.kvc_keys_set_salt(keys, salt))
        for hi, lo, off, length in mm:
            ok(lib.kvc_keys_add_mm(keys, hi, lo, off, length))
        cap = len(tokens) // block_size
        toks = (ctypes.c_int32 * max(1, len(tokens)))(*tokens)
        his, los, n = (ctypes.c_uint64 * max(1, cap))(), (ctypes.c_uint64 * max(1, cap))(), ctypes.c_int64()
        ok(lib.kvc_hash_blocks(block_size, keys, toks, len(tokens), his, los, cap, ctypes.byref(n)))
        return [(his[i], los[i]) for i in range(n.value)]
    finally:
        lib.kvc_keys_destroy(keys)


def random_case(rng):
    block_size = rng.choice([1, 2, 3, 4, 16, 32])
    tokens = [rng.randrange(-2**31, 2**31) for _ in range(rng.randrange(0, 6 * block_size))]
    mm, pos = [], rng.randrange(0, 8)
    while pos < len(tokens) and rng.random() < 0.6:
        length = rng.randrange(1, 2 * block_size + 2)
        mm.append((rng.getrandbits(64), rng.getrandbits(64), pos, length))
        pos += length + rng.randrange(0, 5)
    lora = rng.choice([0, 0, 1, rng.getrandbits(64)])
    salt = bytes(rng.choice(b"abcXYZ019-_") for _ in range(rng.choice([0, 0, 1, 7, 256])))
    return block_size, tokens, lora, salt, mm


def against_lib(cases):
    lib, rng, bad = load_lib(), random.Random(20261126), 0
    for i in range(cases):
        case = random_case(rng)
        want, got = hash_blocks(*case), lib_hash_blocks(lib, *case)
        if want != got:
            print("case %d %r: spec %s, libkvc %s" % (i, case[:1], want, got))
            bad += 1
    print("hash_spec: %d random prompts against libkvc, %d mismatches" % (cases, bad))
    return bad == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", metavar="VECTORS")
    ap.add_argument("--generate", metavar="VECTORS")
    ap.add_argument("--against-lib", action="store_true")
    ap.add_argument("--cases", type=int, default=500)
    a = ap.parse_args()
    if a.generate:
        generate(a.generate)
        return 0
    ok = True
    if a.check:
        ok = check(a.check) and ok
    if a.against_lib:
        ok = against_lib(a.cases) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
