#!/usr/bin/env bash
# KV transfer import throughput vs ucx_perftest's ucp_get over the same UCX transport, in the same
# run (issue [kv-transfer]: goal >= 80%), and the latency of importing a 64-block prefix.
# Usage: tests/bench/bench_transfer.sh [path/to/bench_transfer] [transports...]
#   default transports: tcp sm,self. Each figure is the median of REPS runs (default 3), perftest
#   and bench_transfer alternating so that load on the machine hits both alike.
# perftest runs with 16 gets outstanding (-O 16), as an import has its blocks in flight at once.
# Four ways of importing alternate with it: "default" (what the library does unless told: since
# session 19, over shared memory the export staged in UCX-allocated memory, mapped and copied by
# the importer, its lease word read by the importer; over TCP gets of the exporter pool's storage),
# "push" (KVC_XFER_DATA_PATH=push: each run asked for and sent back by active-message rendezvous),
# "get" (KVC_XFER_EXPORT_STAGING=1: exports staged in UCX-allocated shared memory, which over
# shared memory the importer maps and copies itself, streaming; KVC_XFER_MAPPED_COPY=0 in the
# environment makes those gets again, the way before session 18) and "plain" (gets, staging off
# explicitly: the default's path before session 19).
# ucx_perftest prints MB/s with MB = 2^20 bytes; bench_transfer prints MiB/s: the same unit.
set -euo pipefail
BENCH=${1:-build/tests/bench_transfer}
shift || true
TLS_LIST=("$@")
[ ${#TLS_LIST[@]} -gt 0 ] || TLS_LIST=(tcp sm,self)
REPS=${REPS:-3}
command -v ucx_perftest >/dev/null || { echo "ucx_perftest not found (Debian ucx-utils)"; exit 77; }
export UCX_LOG_LEVEL=${UCX_LOG_LEVEL:-fatal}

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# perftest TLS SIZE ITERS -> MiB/s (overall bandwidth of ucp_get of SIZE-byte messages)
perftest() {
    local tls=$1 size=$2 iters=$3 port=$((20000 + RANDOM % 20000))
    UCX_TLS=$tls timeout 120 ucx_perftest -p $port >/dev/null 2>&1 &
    local srv=$!
    sleep 0.5
    UCX_TLS=$tls timeout 120 ucx_perftest 127.0.0.1 -p $port -t ucp_get -s "$size" -n "$iters" -w 3 -O 16 2>/dev/null |
        awk '/^Final:/ {print $7}'
    wait $srv 2>/dev/null || true
}

ours() {  # WAY TLS ARGS... -> the key=value output
    local way=$1
    shift
    case $way in
        default) "$BENCH" --transports "$@" ;;
        push) KVC_XFER_DATA_PATH=push "$BENCH" --transports "$@" ;;
        get) KVC_XFER_DATA_PATH=get KVC_XFER_EXPORT_STAGING=1 "$BENCH" --transports "$@" ;;
        plain) KVC_XFER_DATA_PATH=get KVC_XFER_EXPORT_STAGING=0 "$BENCH" --transports "$@" ;;
    esac
}

echo "machine: $(uname -srm), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "UCX: $(ucx_info -v | head -1)"
printf '%-9s %-26s %8s %8s %8s %8s %8s %6s %6s %6s %6s\n' transport case default push get plain perftest default push get plain
# One way of importing ($1: default, push, get, plain) of the loops' current shape ($tls, $layers,
# ${extra[@]}): prints "MiB/s median-ms".
import_run() {
    local out
    out=$(ours "$1" "$tls" --layers $layers --blocks 64 --reps 15 "${extra[@]}")
    echo "$(sed -n 's/^import_MiBps=//p' <<<"$out") $(sed -n 's/^import_ms_median=//p' <<<"$out")"
}

for tls in "${TLS_LIST[@]}"; do
    for layers in 32 1; do
        block=$((2 * 16 * 8 * 128 * 2 * layers))
        prefix=$((64 * block))
        for mode in contiguous scatter; do
            extra=(); [ $mode = scatter ] && extra=(--scatter)
            o=(); g=(); q=(); w=(); pb=(); pp=(); lat=(); glat=(); qlat=(); wlat=()
            for _ in $(seq "$REPS"); do
                pb+=("$(perftest "$tls" "$block" $((layers == 32 ? 100 : 2000)))")
                read -r r l < <(import_run default); o+=("$r"); lat+=("$l")
                read -r r l < <(import_run push); g+=("$r"); glat+=("$l")
                pp+=("$(perftest "$tls" "$prefix" $((layers == 32 ? 10 : 200)))")
                read -r r l < <(import_run get); w+=("$r"); wlat+=("$l")
                read -r r l < <(import_run plain); q+=("$r"); qlat+=("$l")
            done
            O=$(printf '%s\n' "${o[@]}" | median)
            G=$(printf '%s\n' "${g[@]}" | median)
            PB=$(printf '%s\n' "${pb[@]}" | median)
            PP=$(printf '%s\n' "${pp[@]}" | median)
            L=$(printf '%s\n' "${lat[@]}" | median)
            GL=$(printf '%s\n' "${glat[@]}" | median)
            Q=$(printf '%s\n' "${q[@]}" | median)
            QL=$(printf '%s\n' "${qlat[@]}" | median)
            W=$(printf '%s\n' "${w[@]}" | median)
            WL=$(printf '%s\n' "${wlat[@]}" | median)
            # The comparator: perftest at the size of one block (what a scattered import issues)
            # and at the whole prefix (what a contiguous one does); the better of the two.
            BEST=$(awk -v a="$PB" -v b="$PP" 'BEGIN {print (a > b) ? a : b}')
            pct() { awk -v o="$1" -v p="$BEST" 'BEGIN {print 100 * o / p}'; }
            printf '%-9s %-26s %8.0f %8.0f %8.0f %8.0f %8.0f %5.0f%% %5.0f%% %5.0f%% %5.0f%%\n' "$tls" \
                "$((block / 1024)) KiB x 64, $mode" "$O" "$G" "$W" "$Q" "$BEST" "$(pct "$O")" "$(pct "$G")" "$(pct "$W")" \
                "$(pct "$Q")"
            printf '%-9s %-26s ms: default %s, push %s, get %s, plain %s (64-block import, median); perftest block %.0f, prefix %.0f MiB/s\n' \
                "" "  latency" "$L" "$GL" "$WL" "$QL" "$PB" "$PP"
        done
    done
done
