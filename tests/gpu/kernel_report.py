#!/usr/bin/env python3
"""Driver of tests/gpu/kernel_report.sh (see there): compile, probe, analyze, tabulate.

The decode kernel is cuda/decode_kernel.cuh (paged_decode_kernel<KV, D, rows, MmaT>); revisions
before it decoded with the generic cuda/attention_kernel.cuh (paged_attention_kernel<KV, D>). For
that legacy kernel the tile loop holds inner loops and 16 unrolled row guards whose outcome
depends on the problem, so its per-tile count is given for the headline only, under the profile
LEGACY_HEADLINE (derived from its source; it reproduces issue #31's SASS review, ~1,361 per warp
per tile, within 1%).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sass_loop  # noqa: E402

# H100 SXM (sm_90) per-SM limits.
SM_REGS, SM_SMEM, SM_THREADS, SM_CTAS, SMEM_RESERVED = 65536, 228 * 1024, 2048, 32, 1024
RARE = ["alibi_slopes", r"softcap > 0", "warp_any"]  # uniform branches the headline never takes
# The legacy kernel at the headline (4 rows, 32-key tiles of 16 chunks, 4 score slices, 2 V slices):
LEGACY_HEADLINE = {
    "skip": RARE + [r"m_new == kNegInf"],  # the all-masked branch of the softmax
    "take": [r"if \(r < rows\)=" + "1" * 4 + "0" * 12,  # rows 0..3 of 16 unrolled row guards
             r"for \(int c = score_slice=01",  # 4 chunk iterations, unrolled by 2: no odd one peeled
             r"item < n_items=10"],  # one (row, 8-dim) item per thread
    "trips": [r"for \(int c = score_slice=2", r"for \(int r = warp=0",  # one row per warp (peeled)
              r"for \(int t = my_slice=4"],  # 16 keys per thread, unrolled by 4
}
DTYPES = {"__half": "f16", "__nv_bfloat16": "bf16", "float": "f32", "__nv_fp8_e4m3": "fp8"}


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def compile_tree(root, arch, work, label):
    """Cubins of the tree's decode translation units; returns (cubins, ptxas text, legacy?)."""
    legacy = not os.path.exists(os.path.join(root, "cuda", "decode_kernel.cuh"))
    stem = "attention" if legacy else "decode"
    cubins, ptxas = [], ""
    for dt in ["f16", "bf16", "fp8", "f32"]:
        src = os.path.join(root, "cuda", f"{stem}_{dt}.cu")
        out = os.path.join(work, f"{label}_{dt}.cubin")
        r = run(["nice", "nvcc", f"-arch={arch}", "-cubin", "-lineinfo", "-O3", "--expt-relaxed-constexpr",
                 "-I", os.path.join(root, "include"), "-I", os.path.join(root, "lib"), "-I", os.path.join(root, "cuda"),
                 "-Xptxas", "-v", "-o", out, src])
        ptxas += r.stderr
        cubins.append(out)
    return cubins, ptxas, legacy


def ptxas_resources(text):
    """mangled name -> registers, spill bytes, static shared memory."""
    res, cur = {}, None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            cur = m.group(1)
            res[cur] = {"regs": 0, "spill": 0, "static_smem": 0}
            continue
        if not cur:
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            res[cur]["spill"] = int(m.group(1)) + int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            res[cur]["regs"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            res[cur]["static_smem"] = int(s.group(1)) if s else 0
    return res


def template_args(mangled):
    name = run(["c++filt"], input=mangled + "\n").stdout.strip()
    m = re.search(r"kernel<(.*)>\(", name)
    return [a.strip() for a in m.group(1).split(",")]


def probe_shapes(root, arch, work, label, kernels, legacy):
    """Shared memory, threads and K/V bytes per CTA tile of each kernel, from its own shape."""
    lines = []
    for k in kernels:
        a = template_args(k)
        if legacy:
            lines.append(f'{{ using S = kvc::cuda::detail::TileShape<int(sizeof({a[0]})), {a[1]}>; '
                         f'std::printf("%s %zu %d %d\\n", "{k}", S::kSmemBytes, kvc::cuda::detail::kAttnThreads, '
                         f'2 * S::kTile * S::kRowBytes); }}')
        else:
            lines.append(f'{{ using S = kvc::cuda::detail::DecodeShape<{", ".join(a)}>; '
                         f'std::printf("%s %d %d %d\\n", "{k}", S::kSmemBytes, S::kThreads, '
                         f'2 * S::kCtaTokens * S::kRowBytes); }}')
    header = "attention_kernel.cuh" if legacy else "decode_kernel.cuh"
    src = os.path.join(work, f"{label}_probe.cu")
    with open(src, "w") as f:
        f.write(f'#include <cstdio>\n#include "{header}"\nint main() {{\n' + "\n".join(lines) + "\n}\n")
    exe = os.path.join(work, f"{label}_probe")
    run(["nice", "nvcc", f"-arch={arch}", "--expt-relaxed-constexpr", "-I", os.path.join(root, "include"),
         "-I", os.path.join(root, "lib"), "-I", os.path.join(root, "cuda"), "-o", exe, src])
    out = {}
    for line in run([exe]).stdout.splitlines():
        k, smem, threads, tile_bytes = line.split()
        out[k] = {"smem": int(smem), "threads": int(threads), "tile_bytes": int(tile_bytes)}
    return out


def ctas_per_sm(regs, smem, threads):
    warps = (threads + 31) // 32
    by_regs = SM_REGS // (warps * 32 * ((regs + 7) // 8 * 8)) if regs else SM_CTAS
    by_smem = SM_SMEM // (smem + SMEM_RESERVED)
    by_threads = SM_THREADS // (warps * 32)
    return min(by_regs, by_smem, by_threads, SM_CTAS), by_regs, by_smem


def report_tree(root, arch, work, label, select_all):
    cubins, ptxas, legacy = compile_tree(root, arch, work, label)
    res = ptxas_resources(ptxas)
    kernels = [k for k in res if ("paged_attention_kernel" if legacy else "paged_decode_kernel") in k]
    shapes = probe_shapes(root, arch, work, label, kernels, legacy)
    rows = []
    for cubin in cubins:
        for kernel_re, opts in ([("paged_attention_kernel", LEGACY_HEADLINE)] if legacy else
                                [("paged_decode_kernel", {"skip": RARE, "take": [], "trips": []})]):
            takes = [(t.rsplit("=", 1)[0], t.rsplit("=", 1)[1]) for t in opts["take"]]
            trips = [(t.rsplit("=", 1)[0], [int(x) for x in t.rsplit("=", 1)[1].split(",")]) for t in opts["trips"]]
            for a in sass_loop.analyze(cubin, kernel_re, opts["skip"], trips, takes):
                k = a["kernel"]
                args = template_args(k)
                kv, d = DTYPES.get(args[0], args[0]), int(args[1])
                rows_per_cta = int(args[2]) if not legacy else None
                scores = "" if legacy else ("CUDA cores" if args[3] == "void" else f"tensor cores ({DTYPES[args[3]]} q)")
                headline = kv == "f16" and d == 128 and (legacy or (rows_per_cta == 4 and args[3] == "__half"))
                if not select_all and not (d == 128 or (kv == "f16" and not legacy)):
                    continue
                r, sh = res[k], shapes[k]
                smem = sh["smem"] + r["static_smem"]
                ctas, by_regs, by_smem = ctas_per_sm(r["regs"], smem, sh["threads"])
                warps = sh["threads"] // 32
                exact = "error" not in a and (not legacy or headline) and a["unresolved_inner_loops"] == 0
                per_tile = a.get("per_tile") if exact else None
                rows.append({
                    "kernel": f"{kv} d={d}" + (f" rows={rows_per_cta}" if rows_per_cta else "") +
                              (f", {scores}" if scores else ""),
                    "headline": headline, "regs": r["regs"], "spill": r["spill"], "smem": smem,
                    "ctas": ctas, "by_regs": by_regs, "by_smem": by_smem, "warps_per_sm": ctas * warps,
                    "tile_bytes": sh["tile_bytes"], "per_tile": per_tile,
                    "per_byte": per_tile * warps / sh["tile_bytes"] if per_tile else None,
                    "per_16k": per_tile * warps * 16384 / sh["tile_bytes"] if per_tile else None,
                    "loop_static": a.get("loop_static"), "barriers": a.get("barriers"),
                    "mix": a.get("mix", {}),
                })
    rows.sort(key=lambda x: (not x["headline"], x["kernel"]))
    return rows


def table(label, rows):
    out = [f"**{label}**", "",
           "| kernel | registers | spills (B) | shared mem (B) | CTAs/SM (regs, smem) | warps/SM | K/V B per CTA tile "
           "| SASS per warp per tile | warp-instr per K/V byte | per 16 KiB | CTA barriers per tile |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        name = f"**{r['kernel']}** (headline)" if r["headline"] else r["kernel"]
        per = f"{r['per_tile']}" if r["per_tile"] else f"({r['loop_static']} static)"
        out.append(f"| {name} | {r['regs']} | {r['spill']} | {r['smem']} | {r['ctas']} ({r['by_regs']}, {r['by_smem']}) "
                   f"| {r['warps_per_sm']} | {r['tile_bytes']} | {per} | "
                   f"{'%.3f' % r['per_byte'] if r['per_byte'] else '–'} | "
                   f"{'%.0f' % r['per_16k'] if r['per_16k'] else '–'} | {r['barriers']} |")
    head = next((r for r in rows if r["headline"]), None)
    if head and head["per_tile"]:
        top = ", ".join(f"{k} {v}" for k, v in list(head["mix"].items())[:10])
        out += ["", f"Headline instruction mix per warp per tile: {top}."]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--before")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kvc_kernel_report_") as work:
        results = {}
        if a.before:
            old = os.path.join(work, "before")
            os.makedirs(old)
            archive = subprocess.run(["git", "-C", a.root, "archive", a.before, "cuda", "include", "lib"],
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", old], input=archive, check=True)
            results[f"before ({a.before})"] = report_tree(old, a.arch, work, "before", a.all)
        # A snapshot: the analysis reads the sources the cubins' line tables name, which must not
        # change under it.
        cur = os.path.join(work, "after")
        for d in ("cuda", "include", "lib"):
            shutil.copytree(os.path.join(a.root, d), os.path.join(cur, d))
        results["after (working tree)"] = report_tree(cur, a.arch, work, "after", a.all)
    for label, rows in results.items():
        print(table(f"{label}, {a.arch}", rows))
        print()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
