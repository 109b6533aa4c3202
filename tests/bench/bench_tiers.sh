#!/usr/bin/env bash
# Disk tier throughput vs raw O_DIRECT dd on the same file system, in the same run.
# Usage: tests/bench/bench_tiers.sh [path/to/bench_tiers] [directory]
#   directory: where both the tier file and the dd file go (default /tmp); 256 MiB each.
# Prints the medians of 5 runs and the ratio tier / dd (goal >= 80%), then the host swap figures.
set -euo pipefail
BENCH=${1:-build/tests/bench_tiers}
DIR=${2:-/tmp}
REPS=5
MIB=256
DDFILE="$DIR/kvc_bench_dd.bin"
trap 'rm -f "$DDFILE" "$DIR/kvc_bench_tier.bin"' EXIT

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# dd reports bytes and seconds; compute MB/s (10^6) ourselves so the units match the benchmark.
dd_rate() {  # args: dd arguments...
    dd "$@" 2>&1 | awk '/bytes/ && /copied/ {print $1 / $(NF-3) / 1e6}'
}

echo "machine: $(uname -srm), $(nproc) cores; file system of $DIR: $(df -T "$DIR" | awk 'NR==2 {print $2}')"
dd_w=(); dd_r=()
for _ in $(seq $REPS); do
    dd_w+=("$(dd_rate if=/dev/zero of="$DDFILE" bs=512K count=$((MIB * 2)) oflag=direct)")
    dd_r+=("$(dd_rate if="$DDFILE" of=/dev/null bs=512K iflag=direct)")
done
DDW=$(printf '%s\n' "${dd_w[@]}" | median)
DDR=$(printf '%s\n' "${dd_r[@]}" | median)

JSON=$(KVC_BENCH_DIR="$DIR" "$BENCH" --benchmark_repetitions=$REPS --benchmark_report_aggregates_only=true \
       --benchmark_format=json 2>/dev/null)
get() {  # benchmark name prefix -> median bytes/s in MB/s
    python3 -c '
import json, sys
d = json.load(sys.stdin)
for b in d["benchmarks"]:
    if b["name"].startswith(sys.argv[1] + "/") and b.get("aggregate_name") == "median":
        print(b["bytes_per_second"] / 1e6); break
' "$1" <<<"$JSON"
}
TW=$(get BM_DiskWrite/flags:0/keyed:0)  # unkeyed: the raw I/O path
TR=$(get BM_DiskRead/flags:0/keyed:0)
HS=$(get BM_HostSwap)
MC=$(get BM_Memcpy)
GS=$(get BM_HostSwapCuda)
GP=$(get BM_PinnedCopyCuda)
awk -v tw="$TW" -v dw="$DDW" -v tr="$TR" -v dr="$DDR" -v hs="$HS" -v mc="$MC" 'BEGIN {
    printf "disk write: tier %8.1f MB/s  dd O_DIRECT %8.1f MB/s  ratio %5.1f%%\n", tw, dw, 100 * tw / dw
    printf "disk read:  tier %8.1f MB/s  dd O_DIRECT %8.1f MB/s  ratio %5.1f%%\n", tr, dr, 100 * tr / dr
    printf "host swap:  tier %8.1f MB/s  memcpy      %8.1f MB/s  ratio %5.1f%%\n", hs, mc, 100 * hs / mc
}'
if [ -n "$GS" ] && [ -n "$GP" ]; then
    awk -v gs="$GS" -v gp="$GP" 'BEGIN {
        printf "cuda swap:  tier %8.1f MB/s  pinned copy %8.1f MB/s  ratio %5.1f%%\n", gs, gp, 100 * gs / gp }'
else
    echo "cuda swap:  no CUDA device (skipped)"
fi
