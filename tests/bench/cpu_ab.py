#!/usr/bin/env python3
"""Before/after runs of bench_kernels_cpu, interleaved shape by shape, as the RESULTS.md table.

    tests/bench/cpu_ab.py BEFORE_BINARY AFTER_BINARY [--rounds N] [--min-time S] [--filter RE]
                          [--per-variant]

Each round runs, for every shape, the "before" binary then the "after" one (each: 3 repetitions,
median), so that a shared machine's load changes hit both sides alike; the table gives the median
over rounds of wall and process-CPU milliseconds. The before binary is this program built against
an older libkvc (its only variant is called "default"); the after one times every variant the
machine runs, a memcpy of each decode shape's K/V bytes (one thread, and split over the kernels'
worker pool), a plain one-thread read of those bytes in the kernels' paged order, and the FMA
peak of 8- and 16-lane vectors on the same threads.

--filter RE keeps the shapes whose name RE matches (re.search); --variant RE times only the
variants RE matches (e.g. avx512; the memcpy / paged-read / FMA rows are then left out). --per-variant is for a "before"
binary that has the ISA variants too (this branch at an older commit): one row per shape and
variant, before against after of the same variant.
"""
import argparse
import json
import re
import statistics
import subprocess
import tempfile


def run(binary, pattern, min_time):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([binary, f"--benchmark_filter={pattern}", f"--benchmark_min_time={min_time}",
                        "--benchmark_repetitions=3", "--benchmark_report_aggregates_only=true",
                        f"--benchmark_out={out.name}", "--benchmark_out_format=json"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rows = {}
        for b in json.load(open(out.name))["benchmarks"]:
            if b.get("aggregate_name") != "median":
                continue
            name = b["run_name"].replace("/process_time", "").replace("/real_time", "")
            scale = {"ms": 1.0, "us": 1e-3, "ns": 1e-6}[b["time_unit"]]
            rows[name] = (b["real_time"] * scale, b["cpu_time"] * scale, b.get("bytes_per_second", 0) / 1e9,
                          b.get("GFLOP/s", 0))
        return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--min-time", default="0.2")
    ap.add_argument("--filter", default="")
    ap.add_argument("--per-variant", action="store_true")
    ap.add_argument("--variant", default="")
    args = ap.parse_args()
    names = subprocess.run([args.after, "--benchmark_list_tests"], check=True, capture_output=True, text=True).stdout
    shapes = []
    for n in names.split():
        s = n.split("/process_time")[0].rsplit("/", 1)[0]
        if s not in shapes and re.search(args.filter, s):
            shapes.append(s)
    got = {}
    for _ in range(args.rounds):
        for s in shapes:
            pattern = "^" + re.escape(s) + "/" + (f"({args.variant})/" if args.variant else "")
            for side, binary in (("before", args.before), ("after", args.after)):
                for name, v in run(binary, pattern, args.min_time).items():
                    got.setdefault((side, name), []).append(v)

    def med(side, name, i):
        v = got.get((side, name))
        return statistics.median(x[i] for x in v) if v else None

    if args.per_variant:
        print("| shape | variant | before wall / CPU ms | after wall / CPU ms | after vs before, wall / CPU"
              " | after rate | memcpy 1 thread / pool, paged read 1 thread, wall ms |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for s in shapes:
            for v in ("baseline", "avx2", "avx512"):
                bw, bc = med("before", f"{s}/{v}", 0), med("before", f"{s}/{v}", 1)
                aw, ac = med("after", f"{s}/{v}", 0), med("after", f"{s}/{v}", 1)
                if bw and aw:
                    gbs, gflops = med("after", f"{s}/{v}", 2), med("after", f"{s}/{v}", 3)
                    rate = f"{gbs:.2f} GB/s" if gbs else f"{gflops:.1f} GFLOP/s"
                    m1, mp = med("after", f"{s}/memcpy_1thread", 0), med("after", f"{s}/memcpy_pool", 0)
                    rp = med("after", f"{s}/read_paged_1thread", 0)
                    mem = (f"{m1:.3g} / {mp:.3g}" + (f", {rp:.3g}" if rp else "")) if m1 else "-"
                    print(f"| {s} | {v} | {bw:.3g} / {bc:.3g} | {aw:.3g} / {ac:.3g} | {bw / aw:.2f}x / {bc / ac:.2f}x"
                          f" | {rate} | {mem} |")
        for p in ("fma_peak/8_lanes", "fma_peak/16_lanes"):
            g = med("after", p, 3)
            if g:
                print(f"{p}: {g:.1f} GFLOP/s")
        return
    print("| shape | before wall / CPU ms | baseline | avx2 | avx512 | avx512 vs before, wall / CPU | avx512 rate"
          " | memcpy 1 thread / pool, wall ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for s in shapes:
        if s.startswith("fma_peak"):
            continue
        cells = []
        for v in ("baseline", "avx2", "avx512"):
            w, c = med("after", f"{s}/{v}", 0), med("after", f"{s}/{v}", 1)
            cells.append(f"{w:.3g} / {c:.3g}" if w else "-")
        bw, bc = med("before", f"{s}/default", 0), med("before", f"{s}/default", 1)
        aw, ac = med("after", f"{s}/avx512", 0), med("after", f"{s}/avx512", 1)
        gbs, gflops = med("after", f"{s}/avx512", 2), med("after", f"{s}/avx512", 3)
        rate = f"{gbs:.2f} GB/s" if gbs else f"{gflops:.1f} GFLOP/s"
        m1, mp = med("after", f"{s}/memcpy_1thread", 0), med("after", f"{s}/memcpy_pool", 0)
        mem = f"{m1:.3g} / {mp:.3g}" if m1 else "-"
        print(f"| {s} | {bw:.3g} / {bc:.3g} | " + " | ".join(cells) +
              f" | {bw / aw:.2f}x / {bc / ac:.2f}x | {rate} | {mem} |")
    for p in ("fma_peak/8_lanes", "fma_peak/16_lanes"):
        g = med("after", p, 3)
        if g:
            print(f"{p}: {g:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
