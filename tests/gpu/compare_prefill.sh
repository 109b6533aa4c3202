#!/usr/bin/env bash
# Prefill kernel variants side by side on one GPU, in one device call after quick_check.sh: each
# carried libkvc.so.0 (the packed build's, plus every .gpu/variants/NAME/libkvc.so.0[.xz], e.g. the
# previous commit's kernels or another launch bound) runs tests/bench/prefill_vs_sdpa.py on the same
# shapes against the same SDPA in the same process-free order, then one Nsight Compute profile of
# the packed build's prefill kernel (1 x 2048, d = 128) where ncu exists. Nothing is built here.
#
# usage: OUT=... bash tests/gpu/compare_prefill.sh     (after tests/gpu/prepare_carry.sh + variants)
#   NCU_VARIANT=NAME profiles that variant instead of the packed build; ROUNDS (default 2).
# Writes $OUT/prefill_variants.txt (one line per shape and variant) and $OUT/prefill_ncu.txt.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
CARRY="${KVC_QUICK_CARRY:-$ROOT/.gpu}"
OUT="${OUT:-$ROOT/gpu-results}"
mkdir -p "$OUT"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export PATH="/usr/local/cuda/bin:$PATH"
export LD_LIBRARY_PATH="$CARRY/prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

PY=""
for candidate in python3 /opt/torch/.venv/bin/python3 /usr/bin/python3 /opt/conda/bin/python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c "import torch" 2>/dev/null; then PY="$candidate"; break; fi
done
[ -n "$PY" ] || { echo "no python3 with torch: nothing to compare" | tee "$OUT/prefill_variants.txt"; exit 0; }

# The variants: packed (this commit), then each carried one.
mkdir -p "$WORK/packed"
if [ -f "$CARRY/bin/programs.tar.xz" ]; then tar -xJf "$CARRY/bin/programs.tar.xz" -C "$WORK/packed" ./libkvc.so.0 ./bench_gpu_attention
else cp "$CARRY/bin/libkvc.so.0" "$CARRY/bin/bench_gpu_attention" "$WORK/packed/"; fi
VARIANTS=(packed)
for dir in "$CARRY"/variants/*/; do
    [ -d "$dir" ] || continue
    name="$(basename "$dir")"
    mkdir -p "$WORK/$name"
    if [ -f "$dir/libkvc.so.0.xz" ]; then xz -dc "$dir/libkvc.so.0.xz" >"$WORK/$name/libkvc.so.0"; else cp "$dir/libkvc.so.0" "$WORK/$name/"; fi
    VARIANTS+=("$name")
done

RES="$OUT/prefill_variants.txt"
{
    echo "prefill variants, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null)"
    echo "packed = $(head -1 "$CARRY/bin/BUILT_FROM_COMMIT" 2>/dev/null); variants: ${VARIANTS[*]}"
    for name in "${VARIANTS[@]}"; do cat "$CARRY/variants/$name/ABOUT" 2>/dev/null | sed "s/^/  $name: /"; done
} >"$RES"
# Two rounds, variants interleaved, so a drift of clocks or temperature shows as round-to-round
# spread rather than as a difference between variants.
for round in $(seq 1 "${ROUNDS:-2}"); do
    for name in "${VARIANTS[@]}"; do
        timeout 90 env KVC_LIB="$WORK/$name" PYTHONDONTWRITEBYTECODE=1 "$PY" "$ROOT/tests/bench/prefill_vs_sdpa.py" \
            --rounds 2 --out "$WORK/$name-$round.json" >"$WORK/$name-$round.log" 2>&1
        echo "round $round $name: exit $?" >>"$RES"
        "$PY" - "$WORK/$name-$round.json" "$name" >>"$RES" 2>&1 <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    print("  %-8s %-36s kvc %8.4f ms  sdpa %8.4f ms  ratio %.2fx  %6.1f TFLOP/s  err %.1e  %s" % (
        sys.argv[2], r["shape"], r["kvc_ms"], r["baseline_ms"], r["ratio"], r.get("kvc_tflops", 0),
        r["max_abs_err"], "ok" if r["passed"] else "FAILED"))
EOF
        grep -E "Error|error|FAIL" "$WORK/$name-$round.log" | head -3 >>"$RES"
    done
done
cat "$RES"

NCU="$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"
if [ -n "$NCU" ]; then
    timeout 120 env KVC_LIB="$WORK/${NCU_VARIANT:-packed}" PYTHONDONTWRITEBYTECODE=1 "$NCU" --kernel-name regex:prefill_mma_kernel \
        --launch-skip 3 --launch-count 1 --section SpeedOfLight --section Occupancy --section SchedulerStats \
        --section WarpStateStats --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
        "$PY" "$ROOT/tests/bench/prefill_vs_sdpa.py" --shapes 1x2048:128:16 --rounds 1 --reps 2 --warmup 2 \
        >"$OUT/prefill_ncu.txt" 2>&1
    echo "ncu exit $?" >>"$OUT/prefill_ncu.txt"
    grep -E "^ +(Duration|DRAM Throughput|Compute \(SM\) Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per Thread|No Eligible|Warp Cycles Per Issued) " "$OUT/prefill_ncu.txt"
fi
