#!/usr/bin/env python3
# Writes the disk-tier seeds of tests/fuzz/corpus (named by SHA-1, as libFuzzer names inputs):
#   python3 tests/fuzz/disk_seeds.py tests/fuzz/corpus
# Each input is spelled in the decoding of fuzz_pool.cpp (setup(), then one opcode byte and that
# operation's bytes): a CPU pool of 4 device blocks (block size 2) with a host tier of 1-4 slots and
# a disk tier of 1-6 slots; a prompt is cached, pushed down the tiers one block per call by
# unrelated traffic (each call can move only as many blocks into the host tier as it has slots),
# probed (lookup_tiers, lookup, can_alloc) and requested again (promotions), with swaps and a cache
# reset; the last seven arm disk faults (op_alloc's last byte v = 15 + 16 j).
import hashlib, os, sys

out = sys.argv[1]
def cfg(host, disk, nbyte=1, bs_idx=1, alpha=3):
    tier = 6 * (2 * (disk - 1) + 1)          # CPU + host tier, disk of `disk` slots
    return [bs_idx, nbyte, 1, 0, 0, 0, alpha, tier, host - 1]
def prompt(n, t): return [n - 1, t, n, 0]
def alloc(i, n, t, pick=6, v=2): return [0, i] + prompt(n, t) + [pick, 0, v]
def free(i): return [5, 1, i]
def traffic(nb): return [9, 3, nb - 1, 0]
def tiers(n, t): return [13, 1] + prompt(n, t) + [1, 0]
def lookup(n, t): return [6] + prompt(n, t) + [1, 0]
def can(n, t): return [7] + prompt(n, t) + [1, 0]
def swap_out(i): return [14, i, 0]
def swap_in(i): return [14, i, 2]
def reset(): return [9, 0]
def sink(k): return sum((traffic(1) for _ in range(k)), [])
def probe(n, t): return tiers(n, t) + lookup(n, t) + can(n, t)
seeds = []
for host, disk, k in [(1, 3, 5), (1, 6, 5), (2, 6, 6), (2, 2, 4), (1, 1, 4), (3, 6, 7), (4, 5, 8), (2, 4, 9)]:
    ops = alloc(0, 7, 0) + free(0) + sink(k) + probe(7, 0) + alloc(1, 7, 0, 0) + free(1)
    ops += alloc(2, 5, 1) + free(2) + sink(k - 1) + probe(5, 1) + alloc(3, 5, 1, 1) + probe(7, 0)
    ops += alloc(4, 7, 0, 0) + swap_out(4) + swap_out(3) + probe(7, 0) + free(3) + sink(2) + swap_in(4)
    ops += free(4) + sink(k) + alloc(5, 7, 0, 0) + free(5) + reset() + probe(7, 0) + alloc(0, 7, 0) + free(0)
    seeds.append(cfg(host, disk) + ops)
# Injected faults: write faults while host victims spill, read faults while promoting (v = 15 + 16 j:
# kind 1 + j % 5, count 1 + (v / 80) % 2).
for v in [15, 31, 47, 63, 79, 111, 143]:
    ops = alloc(0, 7, 0) + free(0) + sink(3) + alloc(1, 5, 1, 6, v) + free(1) + sink(2)
    ops += alloc(2, 7, 0, 0, v) + free(2) + sink(6) + alloc(3, 7, 0, 0, v) + probe(7, 0) + free(3)
    ops += sink(6) + alloc(4, 5, 1, 1, v) + free(4) + probe(5, 1)
    seeds.append(cfg(2, 6) + ops)
for s in seeds:
    b = bytes(s)
    open(os.path.join(out, hashlib.sha1(b).hexdigest()), 'wb').write(b)
print(len(seeds))
