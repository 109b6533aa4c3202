#!/usr/bin/env python3
"""Static SASS report of the decode attention kernels in a cubin, without cuobjdump or nvdisasm.

Used by tests/gpu/kernel_report.sh. Reads a cubin built with -lineinfo and, per kernel:
  * splits its .text section into 128-bit SASS instructions; the opcode is bits 0..11 (the operand
    form in bits 9..11, so the low 9 bits name the operation);
  * decodes branch targets (BRA, opcode 0x947: byte offset = signed(bits 32..81) * 256 +
    bits 16..23 * 4 from the next instruction, as read off the loops of probe kernels; every decoded
    target is checked to land on an instruction of the kernel);
  * maps each instruction to its source line (.debug_line, a DWARF v2 line program over the SASS
    addresses, relocated against the kernel's .text section);
  * finds the tile loop: the outermost backward branch whose body holds the instruction compiled
    from `cp.async.wait_group`. Inner loops (backward branches inside it) are listed with their
    source line and counted times a trip count given with --trips (a regex on the latch's source
    line = N); a forward branch whose source line matches a --skip regex (ALiBi, soft-cap, the lazy
    rescale: uniform branches the headline never takes) leaves the instructions it jumps over off
    the headline path, and --take gives the pattern of a run of unrolled guards (which of 16 row
    guards a group of 4 passes). Predicated instructions count: they are issued either way.
It counts instructions, not time: issue stalls, latencies and memory are not modelled.
"""
import argparse
import json
import re
import struct
import sys

# Low 9 bits of the opcode -> name, for the instruction mix (best effort; sm_80/sm_90 encodings as
# seen in probe kernels; any other opcode is printed as op_ and its 3 hex digits).
OPS = {
    0x023: "FFMA", 0x021: "FADD", 0x020: "FMUL", 0x009: "FMNMX", 0x008: "FSEL", 0x00B: "FSETP",
    0x010: "IADD3", 0x024: "IMAD", 0x025: "IMAD.WIDE", 0x027: "IMAD.HI", 0x00C: "ISETP", 0x011: "LEA",
    0x012: "LOP3", 0x019: "SHF", 0x016: "PRMT", 0x007: "SEL", 0x002: "MOV", 0x005: "CS2R",
    0x108: "MUFU", 0x184: "LDS", 0x188: "STS", 0x181: "LDG", 0x186: "STG", 0x1AE: "LDGSTS",
    0x1AF: "LDGDEPBAR", 0x11A: "DEPBAR", 0x189: "SHFL", 0x11D: "BAR", 0x147: "BRA", 0x148: "WARPSYNC",
    0x141: "BSYNC", 0x145: "BSSY", 0x14D: "EXIT", 0x118: "NOP", 0x119: "S2R", 0x1C3: "S2UR",
    0x182: "LDC", 0x0B9: "ULDC", 0x030: "HADD2.F32", 0x032: "HADD2", 0x031: "HFMA2", 0x03E: "F2FP",
    0x104: "I2F", 0x105: "F2I", 0x106: "I2F", 0x110: "F2F", 0x086: "VOTE", 0x0C6: "VOTEU",
    0x006: "VOTE", 0x01C: "P2R", 0x04C: "ISETP", 0x00A: "FSETP",
}
NOP = 0x918


def u(fmt, data, off):
    return struct.unpack_from(fmt, data, off)


class Elf:
    def __init__(self, path):
        self.d = d = open(path, "rb").read()
        shoff = u("<Q", d, 0x28)[0]
        shentsize, shnum, shstrndx = u("<HHH", d, 0x3A)
        self.secs = [u("<IIQQQQIIQQ", d, shoff + i * shentsize) for i in range(shnum)]
        stro = self.secs[shstrndx][4]
        self.names = [d[stro + s[0]:d.index(b"\0", stro + s[0])].decode() for s in self.secs]

    def index(self, name):
        return self.names.index(name) if name in self.names else -1

    def data(self, i):
        s = self.secs[i]
        return self.d[s[4]:s[4] + s[5]]

    def symbols(self):
        i = next(k for k, s in enumerate(self.secs) if s[1] == 2)  # SHT_SYMTAB
        strtab = self.secs[self.secs[i][6]][4]
        data = self.data(i)
        out = []
        for k in range(len(data) // 24):
            name, info, other, shndx, value, size = u("<IBBHQQ", data, k * 24)
            out.append((self.d[strtab + name:self.d.index(b"\0", strtab + name)].decode(), shndx))
        return out


def line_rows(elf, section=".debug_line"):
    """(text section index, address, (file name, line)) rows of a cubin's line table."""
    li = elf.index(section)
    if li < 0:
        sys.exit(f"no {section}: build the cubin with -lineinfo")
    data = elf.data(li)
    syms = elf.symbols()
    # DW_LNE_set_address operands are relocated against the section symbol of a .text section.
    reloc = {}
    ri = elf.index(".rela" + section)
    if ri >= 0:
        rd = elf.data(ri)
        for k in range(len(rd) // 24):
            off, info, _ = u("<QQq", rd, k * 24)
            reloc[off] = syms[info >> 32][1]
    rows = []
    pos = 0
    while pos < len(data):
        unit_len = u("<I", data, pos)[0]
        end = pos + 4 + unit_len
        hdr_len = u("<I", data, pos + 6)[0]
        min_inst, _, line_base, line_range, opcode_base = u("<BBbBB", data, pos + 10)
        i = pos + 15 + opcode_base - 1
        dirs = [""]
        while data[i]:
            z = data.index(b"\0", i)
            dirs.append(data[i:z].decode())
            i = z + 1
        i += 1
        names = [None]
        while data[i]:
            z = data.index(b"\0", i)
            name = data[i:z].decode()
            d, i = uleb(data, z + 1)
            _, i = uleb(data, i)
            _, i = uleb(data, i)
            names.append(name if name.startswith("/") or not dirs[d] else dirs[d] + "/" + name)
        i = pos + 10 + hdr_len
        addr, line, fidx, sec = 0, 1, 1, -1

        def emit():
            rows.append((sec, addr, (names[fidx] if 0 < fidx < len(names) else None, line)))

        while i < end:
            op = data[i]
            i += 1
            if op >= opcode_base:
                adj = op - opcode_base
                addr += (adj // line_range) * min_inst
                line += line_base + adj % line_range
                emit()
            elif op == 0:
                n, k = uleb(data, i)
                sub = data[k]
                if sub == 1:  # end_sequence
                    rows.append((sec, addr, None))
                    addr, line, fidx = 0, 1, 1
                elif sub == 2:  # set_address
                    sec = reloc.get(k + 1, sec)
                    addr = u("<Q", data, k + 1)[0]
                i = k + n
            elif op == 1:  # copy
                emit()
            elif op == 2:
                v, i = uleb(data, i)
                addr += v * min_inst
            elif op == 3:
                v, i = sleb(data, i)
                line += v
            elif op == 4:
                fidx, i = uleb(data, i)
            elif op == 5:
                _, i = uleb(data, i)
            elif op == 9:
                addr += u("<H", data, i)[0]
                i += 2
            elif op == 8:
                addr += ((255 - opcode_base) // line_range) * min_inst
            # 6, 7: flags without operands
        pos = end
    return rows


def uleb(d, i):
    v = s = 0
    while True:
        b = d[i]
        i += 1
        v |= (b & 0x7F) << s
        s += 7
        if b < 0x80:
            return v, i


def sleb(d, i):
    v = s = 0
    while True:
        b = d[i]
        i += 1
        v |= (b & 0x7F) << s
        s += 7
        if b < 0x80:
            if b & 0x40:
                v -= 1 << s
            return v, i


def branch_target(pc, word):
    hi = (word >> 32) & ((1 << 50) - 1)
    if hi >> 49:
        hi -= 1 << 50
    return pc + 16 + hi * 256 + ((word >> 16) & 0xFF) * 4


def analyze(path, kernel_re, skip_res, trips, takes=()):
    elf = Elf(path)
    src_cache = {}

    def src_text(fl):
        if not fl or not fl[0]:
            return ""
        if fl[0] not in src_cache:
            try:
                src_cache[fl[0]] = open(fl[0]).read().split("\n")
            except OSError:
                src_cache[fl[0]] = []
        lines = src_cache[fl[0]]
        return lines[fl[1] - 1] if 0 < fl[1] <= len(lines) else ""

    by_sec = {}
    for sec, addr, loc in line_rows(elf):
        by_sec.setdefault(sec, []).append((addr, loc))

    out = []
    for si, name in enumerate(elf.names):
        if not name.startswith(".text.") or not re.search(kernel_re, name):
            continue
        text = elf.data(si)
        n = len(text) // 16
        words = [int.from_bytes(text[k * 16:(k + 1) * 16], "little") for k in range(n)]
        ops = [w & 0xFFF for w in words]
        source = [None] * n  # (file, line) of each instruction
        seq = sorted(by_sec.get(si, []), key=lambda r: r[0])
        for k, (addr, loc) in enumerate(seq):
            nxt = seq[k + 1][0] if k + 1 < len(seq) else n * 16
            for a in range(addr, min(nxt, n * 16), 16):
                source[a // 16] = loc
        target = {}
        for k in range(n):
            if ops[k] == 0x947:
                t = branch_target(k * 16, words[k])
                if t % 16 or not 0 <= t < n * 16:
                    sys.exit(f"{name}: branch at {k * 16:#x} decodes to {t:#x}, outside the kernel")
                target[k] = t // 16
        loops = [(t, k) for k, t in target.items() if t <= k]
        waits = [k for k in range(n) if "cp.async.wait_group" in src_text(source[k])]
        tile = [lp for lp in loops if any(lp[0] <= w <= lp[1] for w in waits)]
        if not tile:
            out.append({"kernel": name[6:], "error": "no loop around cp.async.wait_group"})
            continue
        head, tail = max(tile, key=lambda lp: lp[1] - lp[0])
        inner = [lp for lp in loops if head <= lp[0] and lp[1] <= tail and lp != (head, tail)]

        # Off the headline path: what a forward branch from a --skip source line jumps over, and
        # for a --take REGEX=N/M line, what its k-th branch (address order) jumps over unless
        # k mod M < N (unrolled row guards of which the headline passes the first N).
        skipped_at = [False] * n
        seen = {}
        for k, t in sorted(target.items()):
            if not head <= k < t <= tail + 1:
                continue
            txt = src_text(source[k])
            skip = any(re.search(r, txt) for r in skip_res)
            for r, bits in takes:
                if re.search(r, txt):
                    idx = seen[r] = seen.get(r, -1) + 1
                    skip = skip or bits[idx % len(bits)] == "0"
            if skip:
                for j in range(k + 1, t):
                    skipped_at[j] = True
        weight = [1] * n
        inner_report = []
        latch_seen = {}
        for lh, lt in sorted(inner):
            txt = src_text(source[lt]).strip()
            trip = None
            for r, counts in trips:
                if re.search(r, txt):
                    idx = latch_seen[r] = latch_seen.get(r, -1) + 1
                    trip = counts[min(idx, len(counts) - 1)]
                    break
            fl = source[lt]
            inner_report.append({"source": f"{fl[0]}:{fl[1]}" if fl else "?", "text": txt,
                                 "instructions": lt - lh + 1, "trips": trip})
            for j in range(lh, lt + 1):
                weight[j] *= trip if trip is not None else 1
        mix, total, skipped, bars, warpsyncs, by_line = {}, 0, 0, 0, 0, {}
        for k in range(head, tail + 1):
            if ops[k] == NOP:
                continue
            if skipped_at[k]:
                skipped += weight[k]
                continue
            total += weight[k]
            op = OPS.get(ops[k] & 0x1FF, f"op_{ops[k]:03x}")
            mix[op] = mix.get(op, 0) + weight[k]
            fl = source[k]
            key = f"{fl[0].rsplit('/', 1)[-1]}:{fl[1]}" if fl and fl[0] else "?"
            by_line.setdefault(key, {})
            by_line[key][op] = by_line[key].get(op, 0) + weight[k]
            bars += weight[k] if op == "BAR" else 0
            warpsyncs += weight[k] if op == "WARPSYNC" else 0
        out.append({
            "kernel": name[6:], "instructions": n, "loop_start": head * 16, "loop_end": tail * 16,
            "loop_static": sum(1 for k in range(head, tail + 1) if ops[k] != NOP),
            "per_tile": total, "skipped_rare": skipped, "barriers": bars, "warpsyncs": warpsyncs,
            "inner_loops": inner_report, "mix": dict(sorted(mix.items(), key=lambda kv: -kv[1])),
            "by_source_line": {k: dict(sorted(v.items(), key=lambda kv: -kv[1])) for k, v in sorted(
                by_line.items(), key=lambda kv: (kv[0].rsplit(":", 1)[0], int(kv[0].rsplit(":", 1)[-1]) if kv[0] != "?" else 0))},
            "branches": [{"at": k * 16, "to": t * 16, "source": (f"{source[k][0].rsplit('/', 1)[-1]}:{source[k][1]}" if source[k] and source[k][0] else "?"),
                          "skipped": head <= k < t <= tail + 1 and any(re.search(r, src_text(source[k])) for r in skip_res)}
                         for k, t in sorted(target.items()) if head <= k <= tail],
            "unresolved_inner_loops": sum(1 for r in inner_report if r["trips"] is None),
        })
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cubin")
    ap.add_argument("--kernel", default="attention|decode", help="regex on the mangled kernel name")
    ap.add_argument("--skip", action="append", default=[], help="regex of source lines left off the headline path")
    ap.add_argument("--trips", action="append", default=[],
                    help="REGEX=N[,N2..]: trip counts of the inner loops whose latch line matches, in address order")
    ap.add_argument("--take", action="append", default=[],
                    help="REGEX=BITS: the k-th forward branch (address order) from a matching line runs the code it "
                         "can jump over iff BITS[k mod len(BITS)] is 1 (e.g. unrolled row guards: 1111000000000000)")
    a = ap.parse_args()
    trips = [(t.rsplit("=", 1)[0], [int(x) for x in t.rsplit("=", 1)[1].split(",")]) for t in a.trips]
    takes = [(t.rsplit("=", 1)[0], t.rsplit("=", 1)[1]) for t in a.take]
    json.dump(analyze(a.cubin, a.kernel, a.skip, trips, takes), sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
