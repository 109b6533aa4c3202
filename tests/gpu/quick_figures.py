#!/usr/bin/env python3
"""The figures of tests/gpu/quick_check.sh, read from the benchmark JSON it leaves in $OUT.

  quick_figures.py copy FILE          DeviceCopy GB/s (bytes read + written per second)
  quick_figures.py headline FILE      the headline decode: GB/s, % of 3.35 TB/s, % of the copy
  quick_figures.py swap FILE          CUDA swap vs pinned cudaMemcpyAsync (bench_tiers medians)
  quick_figures.py all OUT COPYFILE [TAG]   the figures block of summary.txt (whatever JSON exists)

Missing or partial files (a step that timed out) print what is there and say what is not; the
script never fails the check itself: the verdicts come from quick_check.sh.
"""
import json
import os
import re
import sys

PEAK_GBS = 3350.0  # H100 SXM HBM3


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def runs(doc):
    return [b for b in (doc or {}).get("benchmarks", []) if not b.get("error_occurred")]


def copy_gbs(doc):
    for b in runs(doc):
        if b["name"].startswith("DeviceCopy") and "GB/s" in b:
            return b["GB/s"]
    return None


def gbs(x):
    """GB/s: whole numbers on a GPU, three significant digits for the emulator's tiny figures."""
    return "%.0f" % x if x >= 100 else "%.3g" % x


def args_of(name):
    return dict(re.findall(r"(\w+):(-?\d+)", name))


def headline(doc):
    """The auto split-K, fp16-q headline row (the first Decode/headline with part:0 q:1)."""
    for b in runs(doc):
        if b["name"].startswith("Decode/headline/"):
            a = args_of(b["name"])
            if a.get("part") == "0" and a.get("q") == "1":
                return b
    return None


def fmt_headline(b):
    a = args_of(b["name"])
    text = "B=%s ctx %s bs %s: %s GB/s = %.1f%% of 3.35 TB/s" % (a["B"], a["ctx"], a["bs"], gbs(b["GB/s"]),
                                                                b["pct_3.35TB/s"])
    if "pct_copy" in b:
        text += ", %.1f%% of the measured copy" % b["pct_copy"]
    return text + " (%.1f us)" % b["us"]


def swap(doc):
    med = {}
    for b in runs(doc):
        if b.get("aggregate_name", "median") == "median" and "bytes_per_second" in b:
            med[b["name"].split("/")[0].replace("_median", "")] = b["bytes_per_second"] / 1e9
    s, p = med.get("BM_HostSwapCuda"), med.get("BM_PinnedCopyCuda")
    if s is None or p is None:
        return None
    return "swap %.1f GB/s vs pinned copy %.1f GB/s = %.0f%% (goal >= 80%%)" % (s, p, 100.0 * s / p)


def all_figures(out, copy_file, tag=""):
    print("figures" + tag)
    c = copy_gbs(load(copy_file)) or copy_gbs(load(os.path.join(out, "bench_gpu_attention.json")))
    print("  d2d copy: %s" % ("%s GB/s (read + written), %.1f%% of 3.35 TB/s" % (gbs(c), 100 * c / PEAK_GBS)
                              if c else "not measured"))
    doc = load(os.path.join(out, "bench_gpu_attention.json"))
    h = headline(doc)
    print("  decode headline: %s (goal >= 85%% of 3.35 TB/s)" % (fmt_headline(h) if h else "not measured"))
    rows = runs(doc)
    other = [b for b in rows if b["name"].startswith("Decode/headline") and b is not h]
    if other:
        print("    split-K / score path: " + "; ".join(
            "%s q, split %s: %s" % ("f32" if "q_f32" in b["name"] else "f16",
                                    {"0": "auto", "-1": "never"}.get(args_of(b["name"])["part"],
                                                                     args_of(b["name"])["part"]),
                                    gbs(b["GB/s"])) for b in other) + " GB/s")
    sweep = [b for b in rows if b["name"].startswith("Decode/sweep/")]
    if sweep:
        print("  decode sweep (GB/s, % of 3.35 TB/s):")
        line = []
        for b in sweep:
            a = args_of(b["name"])
            line.append("B%s/ctx%s/bs%s %s (%.0f%%)" % (a["B"], a["ctx"], a["bs"], gbs(b["GB/s"]), b["pct_3.35TB/s"]))
            if len(line) == 4:
                print("    " + "; ".join(line))
                line = []
        if line:
            print("    " + "; ".join(line))
    p = load(os.path.join(out, "prefill_vs_sdpa.json"))
    if p:
        print("  prefill vs SDPA (%s, torch %s; goal >= 0.8x): %s" % (p.get("device"), p.get("torch"),
                                                                     "correct" if p.get("passed") else "FAILED"))
        for r in p.get("results", []):
            if "error" in r:
                print("    %s: FAILED: %s" % (r["shape"], r["error"][:60]))
            else:
                print("    %s: kvc %.3g ms, SDPA %.3g ms, ratio %.2fx, max err %.1e" % (
                    r["shape"], r["kvc_ms"], r["baseline_ms"], r["ratio"], r["max_abs_err"]))
    else:
        print("  prefill vs SDPA: not measured")
    print("  CUDA swap: %s" % (swap(load(os.path.join(out, "bench_tiers.json"))) or "not measured"))


def main(argv):
    mode = argv[1] if len(argv) > 1 else ""
    if mode == "copy":
        c = copy_gbs(load(argv[2]))
        if c is None:
            return 1
        print(gbs(c))
    elif mode == "headline":
        h = headline(load(argv[2]))
        print(fmt_headline(h) if h else "no headline row")
    elif mode == "swap":
        print(swap(load(argv[2])) or "no swap medians")
    elif mode == "all":
        all_figures(argv[2], argv[3] if len(argv) > 3 else "", argv[4] if len(argv) > 4 else "")
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
