#!/usr/bin/env bash
# Makes a real hole in a staged exporter's shared-memory receive FIFO and checks that staged imports
# still succeed through it (lib/transfer/README.md, "Open"). Manual: needs gdb, and hole.gdb's
# offsets are those of Debian 12's UCX 1.13.1 libuct.so (the instruction after the successful
# `lock cmpxchg` of the FIFO head in uct_mm_ep_am_bcopy / uct_mm_ep_am_short: +138 / +141).
#   usage: tests/transfer_wedge/run.sh [BUILD_DIR]   (default build/dev; libkvc.so is linked)
# 1. an exporter process exports a 256-block prefix, staged (descriptor version 2);
# 2. a push import runs under gdb and is SIGKILLed right after its first shared-memory send took a
#    FIFO element (head CAS done) and before it published it: the exporter's FIFO has a hole;
# 3. twice: a push import (needs the exporter's answers) must time out — the exporter is wedged —
#    and a staged import must succeed with every byte right;
# 4. the exporter releases the export: a staged import must fail its lease check (the word).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=$(cd "${1:-$ROOT/build/dev}" && pwd)
command -v gdb >/dev/null || { echo "gdb not found"; exit 77; }
OUT=$(mktemp -d)
trap 'kill -9 ${EXP:-0} 2>/dev/null || true; rm -rf "$OUT"' EXIT
gcc -O1 -g -std=c11 -D_GNU_SOURCE -I"$ROOT/include" -I"$ROOT/tests" "$HERE/wedge.c" -o "$OUT/wedge" \
  -L"$BUILD/lib" -lkvc -Wl,-rpath,"$BUILD/lib" -lm
export UCX_LOG_LEVEL=fatal UCX_MEM_MALLOC_HOOKS=no UCX_MEM_EVENTS=no
"$OUT/wedge" export "$OUT/desc" > "$OUT/export.log" 2>&1 &
EXP=$!
for _ in $(seq 100); do [ -f "$OUT/desc" ] && break; sleep 0.1; done
cat "$OUT/export.log"
timeout 120 gdb -q -batch -x "$HERE/hole.gdb" --args "$OUT/wedge" probe "$OUT/desc" 2>&1 | grep -E "first|HOLE|in section" || true
status=0
for round in 1 2; do
  out=$(timeout 120 "$OUT/wedge" probe "$OUT/desc" 2>&1) || status=1
  echo "round $round: $out"
  case "$out" in *"wedged"*"staged import ok"*) ;; *) status=1 ;; esac
done
# The exporter releases the export (SIGUSR1): the lease word is cleared without any message, so a
# staged import now fails its lease check — still through the wedged exporter.
kill -USR1 $EXP
for _ in $(seq 50); do grep -q released "$OUT/export.log" && break; sleep 0.1; done
out=$(timeout 120 "$OUT/wedge" released "$OUT/desc" 2>&1) || status=1
echo "$out"
[ $status -eq 0 ] && echo "ok: the exporter was wedged; its staged export imported through it, and was refused after its release" || echo "FAILED"
exit $status
