#!/usr/bin/env python3
# Writes the disk-tier seeds of tests/fuzz/corpus (named by SHA-1, as libFuzzer names inputs):
#   python3 tests/fuzz/disk_seeds.py tests/fuzz/corpus
# Each input is spelled in the decoding of fuzz_pool.cpp (setup(), then one opcode byte and that
# operation's bytes): a CPU pool of 4 device blocks (block size 2) with a host tier of 1-4 slots and
# a disk tier of 1-6 slots; a prompt is cached, pushed down the tiers one block per call by
# unrelated traffic (each call can move only as many blocks into the host tier as it has slots),
# probed (lookup_tiers, lookup, can_alloc) and requested again (promotions), with swaps and a cache
# reset; the next seven arm disk faults (op_alloc's last byte v = 15 + 16 j). The next 13 have a
# KVC_DISK_PERSISTENT disk tier (bit 4 of the host-slots byte) and restart (opcode 9, pick 6):
# blocks pushed down to the disk come back after a restart and are promoted again; blocks left in
# the host tier or on the device are lost; a cache reset (its byte v: v % 4 == 3 fails the first
# 1 + (v >> 2) % 3 erasures) or a failed read erases what the next restart would have recovered;
# a failed erasure leaves a header (a newer copy of the block then wins at the restart); a failed
# write erases the header of the block its slot was evicting (since be98b8f; it used to leave it);
# priorities and repeated restarts.
# The next 13 exercise kvc_abort and kvc_tier_flush (see there); the next 6 disk identities (a
# restart switching identity and back; see there); then 2 more on the order a persistent attach
# leaves another identity's slots in, and the last 15 kvc_tier_prefetch (see there).
import hashlib, os, sys

out = sys.argv[1]
def cfg(host, disk, nbyte=1, bs_idx=1, alpha=3, persistent=False, ident=0):
    tier = 6 * (2 * (disk - 1) + 1)          # CPU + host tier, disk of `disk` slots
    return [bs_idx, nbyte, 1, 0, 0, 0, alpha, tier, host - 1 + (16 if persistent else 0) + 32 * ident]
def prompt(n, t): return [n - 1, t, n, 0]
def keys(prio_idx):  # non-NULL keys with priority prios[prio_idx] (0, 10, 50, 50, 90, 100)
    return [1, prio_idx, 1, 0] if prio_idx is not None else [0]
def alloc(i, n, t, pick=6, v=2, prio=None): return [0, i] + prompt(n, t) + [pick] + keys(prio) + [v]
def free(i): return [5, 1, i]
def traffic(nb): return [9, 3, nb - 1, 0]
def tiers(n, t): return [13, 1] + prompt(n, t) + [1, 0]
def lookup(n, t): return [6] + prompt(n, t) + [1, 0]
def can(n, t): return [7] + prompt(n, t) + [1, 0]
def swap_out(i): return [14, i, 0]
def swap_in(i): return [14, i, 2]
def reset(): return [9, 0]
def preset(v=0): return [9, 0, v]            # reset on a persistent input: reads its fault byte
def restart(to=None, too_long=False):       # to: switch to disk identity `to` (fuzz_pool.cpp kIdentities)
    return [9, 6 | (0x80 | to << 3 if to is not None else 0) | (0x40 if too_long else 0)]
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
# Persistent disk tier, restarts.
P = dict(persistent=True)
def push(i, n, t, k, pick=6, prio=None):  # cache a prompt, then push it down the tiers
    return alloc(i, n, t, pick, 2, prio) + free(i) + sink(k)
# Pushed to disk, restart, probed and promoted again (bytes checked), twice.
ops = push(0, 7, 0, 6) + probe(7, 0) + restart() + probe(7, 0) + alloc(1, 7, 0, 0) + free(1) + sink(6)
ops += restart() + probe(7, 0) + alloc(2, 7, 0, 0) + free(2) + restart() + probe(7, 0)
seeds.append(cfg(2, 6, **P) + ops)
# One prompt on disk, one in the host tier, one on the device at the restart: only the first returns.
ops = push(0, 7, 0, 6) + push(1, 5, 1, 1, 6) + alloc(2, 5, 2) + free(2) + restart()
ops += probe(7, 0) + probe(5, 1) + probe(5, 2) + alloc(3, 7, 0, 0) + alloc(4, 5, 1, 1) + free(3) + free(4)
seeds.append(cfg(2, 5, **P) + ops)
# A reset erases the disk's headers: nothing comes back (and with a small disk, evictions first).
for host, disk in [(1, 3), (2, 2)]:
    ops = push(0, 7, 0, 5) + push(1, 5, 1, 5, 6) + probe(7, 0) + preset(0) + restart() + probe(7, 0)
    ops += alloc(2, 7, 0, 0) + free(2) + sink(5) + restart() + probe(7, 0)
    seeds.append(cfg(host, disk, **P) + ops)
# A reset whose first one or two erasures fail: those blocks come back.
for v in [3, 7]:
    ops = push(0, 7, 0, 6) + push(1, 5, 1, 6, 6) + preset(v) + restart() + probe(7, 0) + probe(5, 1)
    ops += alloc(2, 7, 0, 0) + alloc(3, 5, 1, 1) + free(2) + free(3)
    seeds.append(cfg(2, 6, **P) + ops)
# A failed read erases its slot (EIO, short read, flipped bit): not recovered by the restart.
for v in [47, 63, 79]:
    ops = push(0, 7, 0, 6) + alloc(1, 7, 0, 0, v) + free(1) + probe(7, 0) + restart() + probe(7, 0)
    ops += alloc(2, 7, 0, 0) + free(2)
    seeds.append(cfg(2, 6, **P) + ops)
# A reset's failed erasure leaves a block's header in a free slot; the block is computed again and
# spilled to another slot: after the restart the newer copy wins, the older slot stays free.
for host, disk, k, v, k2 in [(2, 6, 6, 3, 6), (1, 4, 5, 11, 4)]:
    ops = push(0, 7, 0, k) + preset(v) + push(1, 7, 0, k2, 0) + restart() + probe(7, 0) + alloc(2, 7, 0, 0) + free(2)
    seeds.append(cfg(host, disk, **P) + ops)
# A failed write into a slot that was evicting a cached block (one disk slot), then a reset and a
# restart: the failed write erased the evicted block's header (be98b8f), so nothing comes back
# (before that fix the header stayed, the reset did not erase it as the slot was free, and the
# block came back although the disk had dropped it).
ops = push(0, 7, 0, 4) + alloc(1, 5, 1, 6, 15 + 16) + free(1) + probe(7, 0) + preset(0) + restart() + probe(7, 0)
ops += probe(5, 1) + alloc(2, 7, 0, 0) + free(2)
seeds.append(cfg(1, 1, **P) + ops)
# Priorities: a low- and a high-priority prompt on disk; after the restart new traffic evicts the
# low one first (disk LRU by priority, oldest write first).
ops = push(0, 7, 0, 5, prio=1) + push(1, 5, 1, 5, 6, prio=5) + restart() + probe(7, 0) + probe(5, 1)
ops += alloc(2, 3, 2) + free(2) + sink(6) + probe(7, 0) + probe(5, 1) + alloc(3, 5, 1, 1, 2, 5) + free(3)
seeds.append(cfg(1, 3, **P) + ops)
# kvc_abort and kvc_tier_flush (opcode 9, pick 5 on CPU pools: a byte v, then abort's id when v is
# even; on a disk tier an odd v flushes, v / 2 % 8 == 7 injecting 1-3 write faults (ENOSPC, or EIO
# when bit 4 is set), bit 7 passing a NULL out-param; elsewhere v = 1 is a refused flush).
def abort(i): return [9, 5, 0, i]
def flush(v=1): return [9, 5, v]
def fork(p, c): return [4, p, c]
def append(i, nt): return [2, i, nt, 1, 1, 1] + [0] * (nt + 1) + [1, 1]
def pops(k): return [10, 1] * k
def cfg_plain(alpha=3): return [1, 7, 1, 0, 0, 0, alpha, 2]   # CPU pool of 8 blocks, no tiers
# Abort on a pool without tiers: what the sequence filled leaves the cache (a re-request misses),
# what it hit stays; a fork's shared blocks stay until its last holder aborts; appended blocks go;
# a truncate lowers the hit; a flush is refused.
ops = alloc(0, 7, 0) + abort(0) + pops(4) + lookup(7, 0) + alloc(1, 7, 0, 0) + free(1) + lookup(7, 0)
ops += alloc(2, 7, 0, 0) + append(2, 3) + abort(2) + pops(6) + lookup(7, 0)
ops += alloc(3, 5, 1) + fork(3, 4) + abort(3) + lookup(5, 1) + append(4, 2) + abort(4) + pops(6) + lookup(5, 1)
ops += alloc(5, 7, 0) + free(5) + alloc(6, 7, 0, 0) + [5, 0, 6, 1, 4, 1] + append(6, 4) + abort(6) + pops(6)
ops += lookup(7, 0) + flush(1) + abort(7)
seeds.append(cfg_plain() + ops)
# Flush on disk tiers of every shape: host blocks, then device blocks through host slots; a small
# tier stalls rounds (job capacity, slots) and evicts on disk; persistent ones restart and promote
# what the flush wrote. Aborts of sequences whose blocks are in tiers.
for host, disk, persistent in [(1, 1, True), (1, 3, True), (2, 6, True), (4, 2, True), (2, 4, False), (3, 5, True)]:
    ops = alloc(0, 7, 0) + free(0) + alloc(1, 5, 1) + free(1) + sink(2) + flush(1) + probe(7, 0) + probe(5, 1)
    ops += alloc(2, 7, 0, 0) + abort(2) + flush(129) + flush(1)
    ops += (restart() if persistent else reset()) + probe(7, 0) + probe(5, 1) + alloc(3, 7, 0, 0) + free(3)
    ops += alloc(4, 5, 1, 1) + append(4, 3) + abort(4) + probe(5, 1)
    seeds.append(cfg(host, disk, persistent=persistent) + ops)
# Flush with write faults (v = 15 + 16 j: ENOSPC/EIO, 1-3 writes), then a restart: only what was
# written comes back.
for v in [15, 31, 47, 63, 79]:
    ops = alloc(0, 7, 0) + free(0) + alloc(1, 5, 1) + free(1) + sink(1) + flush(v) + probe(7, 0)
    ops += restart() + probe(7, 0) + probe(5, 1) + alloc(2, 7, 0, 0) + free(2) + flush(1)
    seeds.append(cfg(2, 3, persistent=True) + ops)
# Every host slot held by a swapped-out sequence: device blocks cannot be written (the flush ends);
# aborting the swapped-out sequence frees its slots, and the next flush writes them.
ops = alloc(0, 5, 2) + swap_out(0) + alloc(1, 7, 0) + free(1) + flush(1) + probe(7, 0) + abort(0)
ops += flush(1) + probe(7, 0) + restart() + probe(7, 0) + alloc(2, 7, 0, 0) + free(2)
seeds.append(cfg(1, 4, persistent=True) + ops)
# Disk identities (kvc_tier_attach_disk_with_identity; cfg's ident and restart's `to` index
# fuzz_pool.cpp's kIdentities: 0 the old kvc_tier_attach_disk, 1 NULL, 2 "", 3 and 5 "a", 4 "b", 6
# and 7 two 1024-byte names differing in their last byte). A restart under another identity
# recovers none of the file's blocks (foreign_blocks counts them; their slots are free, but behind
# every empty one since 5c5c43a, so the new owner's writes take empty slots first and another
# identity's blocks survive while there is room); going back recovers those it left alone.
A, B, LA, LB = 3, 4, 6, 7
# "a" -> "b" (nothing back; its two writes take empty slots, not a's) -> "a" (all of it back; b's
# two foreign) -> "a" by the other index (the same identity) -> "b" (its two back, a's foreign).
# (Before 5c5c43a b's writes took two of a's slots and "a" got one block back.)
ops = push(0, 7, 0, 6) + probe(7, 0) + restart(B) + probe(7, 0) + push(1, 5, 1, 6) + restart(A) + probe(7, 0)
ops += probe(5, 1) + restart(5) + probe(7, 0) + restart(B) + probe(5, 1) + alloc(2, 5, 1, 1) + free(2)
seeds.append(cfg(2, 6, persistent=True, ident=A) + ops)
# "a" -> "b" writing nothing (an identity one byte too long refused first) -> "a": all of it back.
ops = push(0, 7, 0, 6) + restart(B, True) + probe(7, 0) + restart(A, True) + probe(7, 0) + alloc(1, 7, 0, 0) + free(1)
seeds.append(cfg(2, 6, persistent=True, ident=A) + ops)
# No identity three ways (old function, NULL, ""), one identity: then the two longest names, which
# differ only in their last byte (each other's foreign), and back to none.
ops = push(0, 7, 0, 6) + restart(1) + probe(7, 0) + restart(2) + probe(7, 0) + restart(LA) + probe(7, 0)
ops += push(1, 5, 1, 6) + restart(LB, True) + probe(5, 1) + restart(LA) + probe(5, 1) + restart(0) + probe(7, 0)
ops += alloc(2, 7, 0, 0) + free(2)
seeds.append(cfg(2, 6, persistent=True) + ops)
# A reset under "b" erases b's cached headers only: a's (free, foreign) survive it and come back.
ops = push(0, 7, 0, 6) + restart(B) + push(1, 5, 1, 6) + preset(0) + restart(A) + probe(7, 0) + probe(5, 1)
ops += restart(B) + probe(5, 1) + restart(A) + alloc(2, 7, 0, 0) + free(2)
seeds.append(cfg(2, 6, persistent=True, ident=A) + ops)
# A failed write into a slot "a" left free: under "b" a host victim's spill fails (v = 15): the block
# is dropped and the slot's header (a's first block) erased, so going back to "a" recovers its other
# two, which the prompt cannot reach (its first block is gone); "b" gets nothing back; under "a"
# again the prompt is computed and flushed (into the erased slot), and "b" finds three foreign.
ops = alloc(0, 7, 0) + free(0) + flush(1) + restart(B) + alloc(1, 5, 1) + free(1) + sink(3)
ops += alloc(2, 7, 2, 6, 15) + free(2) + restart(A) + probe(7, 0) + alloc(3, 7, 0, 0) + free(3) + restart(B)
ops += probe(5, 1) + alloc(4, 5, 1, 1) + free(4) + restart(A) + alloc(5, 7, 0, 0) + free(5) + flush(1)
ops += restart(B) + probe(5, 1)
seeds.append(cfg(1, 3, persistent=True, ident=A) + ops)
# Flush under each identity in turn on a 2-slot disk, switching back and forth (with a too-long try).
ops = alloc(0, 7, 0) + free(0) + flush(1) + restart(B) + alloc(1, 5, 1) + free(1) + flush(1) + restart(A, True)
ops += probe(7, 0) + probe(5, 1) + alloc(2, 7, 0, 0) + free(2) + flush(1) + restart(B) + probe(5, 1) + restart(A)
ops += probe(7, 0) + alloc(3, 7, 0, 0) + free(3)
seeds.append(cfg(1, 2, persistent=True, ident=A) + ops)
# Foreign slots last (5c5c43a): "a" fills half of a 6-slot file; under "b" its three writes take the
# three empty slots, so back under "a" all of a's blocks come back (b's three foreign), and under
# "b" again all of b's; then b writes two more with no empty slot left: they take a's slots in slot
# order (0 and 1, a's two deeper blocks), and "a" recovers only slot 2 (its prompt's first block).
ops = push(0, 7, 0, 6) + restart(B) + probe(7, 0) + push(1, 7, 1, 6) + restart(A) + probe(7, 0) + probe(7, 1)
ops += alloc(2, 7, 0, 0) + free(2) + restart(B) + probe(7, 1) + alloc(3, 7, 1, 1) + free(3)
ops += push(4, 5, 2, 7) + restart(A) + probe(7, 0) + probe(7, 1) + restart(B) + probe(5, 2) + probe(7, 1)
seeds.append(cfg(2, 6, persistent=True, ident=A) + ops)
# Slots whose headers a reset erased are empty too, and come before the foreign ones: "a" writes 2
# blocks, "b" 3 into empty slots and resets (erasing its 3), and after a restart under "b" its next
# 3 writes take those again, not a's: back under "a" both of a's blocks come back.
ops = push(0, 5, 0, 6) + restart(B) + push(1, 7, 1, 6) + preset(0) + restart(B) + probe(7, 1)
ops += push(2, 7, 2, 6) + restart(A) + probe(5, 0) + alloc(3, 5, 0, 0) + free(3) + restart(B) + probe(7, 2)
seeds.append(cfg(2, 6, persistent=True, ident=A) + ops)
# kvc_tier_prefetch: opcode 9 with a pick byte of 5 | 0x80 (bit 4 clear), then a prompt, op_alloc's
# pick byte (0-3: the recent prompt of that index instead, the n-th fresh prompt of the input, as a
# queued request's prefetch; 6: the prompt read, kept as recent), keys and a byte v: 0 num_tokens 0
# (INVALID_ARG), 1 NULL tokens (NULL_ARG), 2 num_tokens max_seq_len + 1 (MAX_LEN where there is a
# max), 3 a NULL out-param, 4 a NULL pool, 15 + 16 j on a disk tier an injected fault as op_alloc's,
# else a plain call.
def prefetch(n, t, v=5, pick=6, prio=None): return [9, 0x85] + prompt(n, t) + [pick] + keys(prio) + [v]
def cfg_host(host=2, caching=1): return [1, 1, caching, 0, 0, 0, 3, 0, host - 1]  # host tier, no disk
# Prefetch a prompt pushed to disk, then allocate it: restored from the host tier (the alloc reads no
# disk); a second prefetch finds nothing left to read and reports the same; a second prompt
# prefetched with a NULL out-param; after more traffic (and, persistent, a restart) again.
for host, disk, persistent in [(2, 6, False), (3, 5, True), (4, 6, False)]:
    ops = push(0, 7, 0, 6) + probe(7, 0) + prefetch(7, 0, 5, 0) + probe(7, 0) + prefetch(7, 0, 5, 0)
    ops += alloc(1, 7, 0, 0) + free(1)
    ops += push(2, 5, 1, 4) + prefetch(5, 1, 3, 1) + probe(5, 1) + alloc(3, 5, 1, 1) + free(3) + sink(6)
    ops += (restart() if persistent else []) + prefetch(7, 0, 5, 0) + probe(7, 0) + alloc(4, 7, 0, 0) + free(4)
    seeds.append(cfg(host, disk, persistent=persistent) + ops)
# Prefetch with injected faults: read faults (EIO, short, flipped bit; 1 or 2 reads) fail the first
# block read up (erased, counted), which ends the hit (a later block read up is in the host tier but
# unreachable); write faults (ENOSPC, 2 x EIO) drop the host victims' spills to disk. Then the prompts
# are allocated: what the prefetch left is found, the rest computed.
for v in [47, 63, 79, 143, 15, 111]:
    ops = push(0, 7, 0, 6) + push(1, 5, 1, 2) + prefetch(7, 0, v, 0) + probe(7, 0) + probe(5, 1)
    ops += alloc(2, 7, 0, 0) + free(2) + prefetch(5, 1, 5, 1) + alloc(3, 5, 1, 1) + free(3)
    seeds.append(cfg(2, 6, persistent=True) + ops)
# A run of disk hits longer than the host slots (3 blocks, 1 or 2 slots): the prefetch reads up what
# the slots take and the hit ends there (the rest stays on disk); prefetching again reads nothing
# more (the host hits are kept, no other slot); the alloc finds the same. Then traffic, and again.
for host in [1, 2]:
    ops = push(0, 7, 0, 8) + probe(7, 0) + prefetch(7, 0, 5, 0) + probe(7, 0) + prefetch(7, 0, 5, 0)
    ops += alloc(1, 7, 0, 0) + free(1) + sink(8) + prefetch(7, 0, 5, 0) + alloc(2, 7, 0, 0) + free(2)
    seeds.append(cfg(host, 6) + ops)
# Refusals: bad input on a disk tier (nothing moves: lookup_tiers unchanged), KVC_ERR_STATE on a
# pool with a host tier only and on one without tiers; with prefix caching off, out 0 and nothing
# moves (NULL tokens still refused).
ops = push(0, 7, 0, 6) + prefetch(7, 0, 0, 0) + prefetch(7, 0, 1, 0) + prefetch(7, 0, 4, 0) + prefetch(7, 0, 2, 0)
ops += probe(7, 0)
seeds.append([1, 1, 1, 0, 2, 0, 3, 6 * 11, 1] + ops)  # max_seq_len 12: the v = 2 try is MAX_LEN
ops = alloc(0, 7, 0) + free(0) + sink(4) + prefetch(7, 0, 5, 0) + prefetch(7, 0, 1, 0) + alloc(1, 7, 0, 0)
seeds.append(cfg_host() + ops)
seeds.append(cfg_plain() + ops)
ops = alloc(0, 7, 0) + free(0) + sink(6) + prefetch(7, 0, 5, 0) + prefetch(7, 0, 1, 0) + probe(7, 0)
ops += alloc(1, 7, 0, 0) + free(1)
seeds.append([1, 1, 0, 0, 0, 0, 3, 6 * 11, 1] + ops)  # prefix caching off, disk tier of 6
for s in seeds:
    b = bytes(s)
    open(os.path.join(out, hashlib.sha1(b).hexdigest()), 'wb').write(b)
print(len(seeds))
