#!/usr/bin/env bash
# The single-call GPU check (issue 22): runs binaries prebuilt here by tests/gpu/prepare_carry.sh
# (carried as .gpu/), builds NOTHING on the device, and fits one device call of <= 7 minutes even
# when every step runs into its own time cap. Steps, in priority order (tests/gpu/README.md):
#   1 device      nvidia-smi; device-to-device copy bandwidth (bench_gpu_attention DeviceCopy)
#   2 kernels     kernel grid (quick size) vs the CPU backend; C API glue on a CUDA pool incl. CUDA
#                 graph capture/replay
#   3 serve       kvc_serve --backend cuda vs its dense reference; swap and copy-on-write must happen
#   4 sanitizer   memcheck on a reduced grid + the glue; racecheck on one decode and one prefill case
#   5 decode      the headline decode (B=64, ctx 4096, 32/8 heads, d=128, fp16, block 16) as % of
#                 3.35 TB/s and of the measured copy; a small batch x context x block-size sweep
#   6 prefill     prefill vs PyTorch SDPA on the same shapes, outputs compared
#   7 swap        CUDA swap vs pinned cudaMemcpyAsync (bench_tiers)
#   8 ncu         one profiled headline decode launch where Nsight Compute exists (informative)
# Each step's verdict goes to $OUT/summary.txt the moment it finishes, its output to $OUT/steps.log
# (sanitizer output to $OUT/sanitizer.log), benchmark JSON beside them: six files at most, since the
# device tool returns at most 8. A kill of the whole command therefore still leaves what ran.
#
# usage: quick_check.sh [--emulated]
#   --emulated (or KVC_QUICK_EMULATED=1): the rehearsal without a GPU: the same steps on binaries
#   built with -DKVC_CUDA=EMULATE (tests/gpu/prepare_carry.sh --emulated -> .gpu-emu/). Steps whose
#   tool is missing (nvidia-smi, compute-sanitizer, torch) report SKIPPED, never PASS; every figure
#   is marked EMULATED and means nothing about a GPU.
# Environment: OUT (default ./gpu-results), KVC_QUICK_BUDGET_S (all steps together, default 445),
#   KVC_QUICK_CARRY (the carried folder, default .gpu or .gpu-emu).
# Exit status: 0 when no step FAILED or TIMED OUT (SKIPPED steps are listed, not hidden), else 1.
set -uo pipefail
START=$SECONDS
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
EMULATED="${KVC_QUICK_EMULATED:-0}"
[ "${1:-}" = "--emulated" ] && EMULATED=1
if [ "$EMULATED" = 1 ]; then CARRY="${KVC_QUICK_CARRY:-$ROOT/.gpu-emu}"; else CARRY="${KVC_QUICK_CARRY:-$ROOT/.gpu}"; fi
BUDGET="${KVC_QUICK_BUDGET_S:-445}"
OUT="${OUT:-$ROOT/gpu-results}"
mkdir -p "$OUT"
WORK="$(mktemp -d)"  # removed at the end (rm -rf "$WORK")
SUMMARY="$OUT/summary.txt"
STEPS="$OUT/steps.log"
SANLOG="$OUT/sanitizer.log"
: >"$SUMMARY"
: >"$STEPS"
: >"$SANLOG"
FAILED=0
CURRENT=""
COUNTS=""  # every verdict so far, for the last line

say() { echo "$*" | tee -a "$SUMMARY"; }
on_signal() {
    say "!! interrupted (signal) during step '$CURRENT' at $((SECONDS - START)) s: the steps above are all that ran"
    exit 1
}
trap on_signal TERM INT HUP

TAG=""
[ "$EMULATED" = 1 ] && TAG=" (EMULATED: CPU emulator of CUDA, not a GPU)"
say "libkvc quick GPU check$TAG"
say "date $(date -u '+%Y-%m-%d %H:%M:%S UTC'); host $(hostname); budget ${BUDGET} s for all steps"

# ---- the carried binaries ---------------------------------------------------------------------
if [ ! -f "$CARRY/bin/BUILT_FROM_COMMIT" ]; then
    say "no prebuilt binaries in $CARRY: run tests/gpu/prepare_carry.sh$([ "$EMULATED" = 1 ] && echo " --emulated") here and carry it"
    exit 2
fi
BIN="$CARRY/bin"
if [ -f "$CARRY/bin/programs.tar.xz" ]; then  # compressed to fit the carry limit: unpack to /tmp
    BIN="$WORK/bin"
    mkdir -p "$BIN"
    cp -p "$CARRY/bin/"*.so* "$BIN/" 2>/dev/null
    # xz if the image has it, else Python's own lzma (the device image has Python; xz is not promised).
    if command -v xz >/dev/null; then tar -xJf "$CARRY/bin/programs.tar.xz" -C "$BIN"
    else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))' "$CARRY/bin/programs.tar.xz" "$BIN"
    fi || { say "cannot unpack $CARRY/bin/programs.tar.xz"; exit 2; }
fi
export LD_LIBRARY_PATH="$BIN:$CARRY/prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH"
CARRY_MB="$(du -sm "$CARRY" | cut -f1)"
# The working tree that travelled (the device copy may have no .git: then everything but the carry).
TREE_MB="$(cd "$ROOT" && { git ls-files -z 2>/dev/null | xargs -0 -r du -cb 2>/dev/null | tail -1 | grep . ||
    du -sb --exclude=./.gpu --exclude=./.gpu-emu --exclude=./.git .; } | awk '{printf "%.1f", $1 / 1048576}')"
say "binaries from commit $(head -1 "$BIN/BUILT_FROM_COMMIT" 2>/dev/null || head -1 "$CARRY/bin/BUILT_FROM_COMMIT")," \
    "tree at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'); carry ${CARRY_MB} MiB + tree ${TREE_MB} MiB" \
    "(unpacked in $((SECONDS - START)) s)"
if [ "$CARRY_MB" -gt 64 ]; then say "carried folder over 64 MiB: the device tool would not have sent it"; exit 2; fi
say ""
say "step                       verdict    time  detail"

SAN="$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)"

# ---- one step: its cap, its log, its verdict --------------------------------------------------
# run_step NAME CAP LOGFILE CMD...: runs CMD under `timeout` with min(CAP, time left) seconds;
# leaves RC (124 = timed out) and LOG (the step's own output file) for the verdict.
run_step() {
    local name="$1" cap="$2" dest="$3"
    shift 3
    CURRENT="$name"
    local left=$((BUDGET - (SECONDS - START)))
    [ "$cap" -gt "$left" ] && cap=$left
    LOG="$WORK/$name.log"  # the program's output alone: the patterns judged below must not match the command line
    STEP_T0=$SECONDS
    if [ "$cap" -lt 5 ]; then
        echo "not run: the budget of $BUDGET s is spent" >"$LOG"
        RC=125
    else
        timeout -k 5 "$cap" "$@" >"$LOG" 2>&1
        RC=$?
    fi
    STEP_CAP=$cap
    {   # the step's output, head and tail if long (16 MiB per returned file)
        echo "===== $name (exit $RC, $((SECONDS - STEP_T0)) s of cap $cap s) ====="
        echo "\$ $*"
        if [ "$(wc -l <"$LOG")" -gt 1500 ]; then head -700 "$LOG"; echo "[... $(($(wc -l <"$LOG") - 1400)) lines cut ...]"; tail -700 "$LOG"; else cat "$LOG"; fi
        echo
    } >>"$dest"
}
# verdict NAME VERDICT DETAIL: one summary line; FAIL and TIMEOUT make the exit status 1.
verdict() {
    local v="$2" detail="$3"
    if [ "$RC" = 124 ] || [ "$RC" = 137 ]; then
        v="TIMEOUT"
        detail="killed at its ${STEP_CAP} s cap; last output: $(grep -v '^$' "$LOG" | tail -1 | cut -c1-60)"
    fi
    if [ "$RC" = 125 ]; then v="NOT-RUN"; detail="the ${BUDGET} s budget was spent before this step"; fi
    case "$v" in FAIL | TIMEOUT) FAILED=1 ;; esac
    [ "$v" = PASS ] && [ "$EMULATED" = 1 ] && v="PASS-EMU"
    COUNTS="$COUNTS $v"
    printf '%-26s %-9s %4ss  %s\n' "$1" "$v" "$((SECONDS - STEP_T0))" "$detail" | tee -a "$SUMMARY"
}
skip_step() {  # NAME REASON
    RC=0
    STEP_T0=$SECONDS
    echo "===== $1: SKIPPED: $2 =====" >>"$STEPS"
    verdict "$1" SKIPPED "$2"
}
# PASS when the program exited 0 and the log has every given pattern (so a run that silently did
# nothing cannot pass); SKIPPED when the program said it skipped.
judge() {  # NAME PATTERN...
    local name="$1" missing=""
    shift
    # Only a whole-program skip (no device) is SKIPPED; one test skipped among others misses its
    # pattern below and FAILS: on a GPU machine nothing may skip.
    local whole='SKIPPED \] ALL|: SKIPPED|no CUDA device or driver; skipped'
    if grep -Eq "$whole" "$LOG" && [ "$RC" = 0 ] || [ "$RC" = 77 ]; then
        # Where nvidia-smi sees a GPU, a program that finds no device is a finding, not a skip.
        [ "$HAVE_GPU" = 1 ] && { verdict "$name" FAIL "found no device though nvidia-smi lists one: $(grep -Em1 "$whole" "$LOG" | cut -c1-50)"; return; }
        verdict "$name" SKIPPED "$({ grep -Em1 "$whole" "$LOG" || grep -m1 SKIPPED "$LOG"; } | cut -c1-70)"
        return
    fi
    for p in "$@"; do grep -Eq -- "$p" "$LOG" || missing="$missing '$p'"; done
    if [ "$RC" = 0 ] && [ -z "$missing" ]; then
        verdict "$name" PASS "${PASS_DETAIL:-$(grep -Eo '\[  PASSED  \] [0-9]+ test\(s\)|\[  SUBSET  \] [0-9]+ attention cases run' "$LOG" | tr '\n' ' ')}"
    else
        verdict "$name" FAIL "exit $RC${missing:+; missing:$missing}; $(grep -Em1 'FAILED|ERROR|error' "$LOG" | cut -c1-60)"
    fi
}
# A compute-sanitizer run: PASS only with its "ERROR SUMMARY: 0 errors" line and a passing program.
judge_san() {  # NAME PATTERN...
    local name="$1" errors
    shift
    # memcheck ends with "ERROR SUMMARY: n errors", racecheck with "RACECHECK SUMMARY: n hazards
    # displayed (e errors, w warnings)": clean means 0 errors (and, for racecheck, 0 hazards).
    errors="$(grep -Eo 'ERROR SUMMARY: [0-9]+ error|RACECHECK SUMMARY: [0-9]+ hazards displayed \([0-9]+ errors, [0-9]+ warnings' "$LOG" | tail -1)"
    if [ "$RC" = 0 ] && { [ "$errors" = "ERROR SUMMARY: 0 error" ] ||
        [ "$errors" = "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings" ]; }; then judge "$name" "$@"; return; fi
    verdict "$name" FAIL "exit $RC; ${errors:-no ERROR SUMMARY line}; $(grep -Em1 '^=+ +(Invalid|Race|Error|[A-Z][a-z]+ (read|write))' "$LOG" | cut -c1-60)"
}

# ---- 1. device ----------------------------------------------------------------------------------
HAVE_GPU=0
timeout 10 nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && HAVE_GPU=1
if command -v nvidia-smi >/dev/null; then
    run_step device_info 10 "$STEPS" nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv
    verdict "1 device info" "$([ "$RC" = 0 ] && echo INFO || echo FAIL)" "$(sed -n 3p "$LOG" | cut -c1-90)"
    { timeout 10 nvidia-smi; [ -n "$SAN" ] && "$SAN" --version | tail -1; command -v nvcc >/dev/null && nvcc --version | tail -1; } >>"$STEPS" 2>&1
else
    skip_step "1 device info" "no nvidia-smi on this machine"
fi
[ "$EMULATED" = 1 ] && export KVC_BENCH_TINY=1  # emulator-sized shapes (bench_gpu_attention.cpp)
run_step copy_bandwidth 20 "$STEPS" "$BIN/bench_gpu_attention" --benchmark_filter='^DeviceCopy' \
    --benchmark_out="$WORK/copy.json" --benchmark_out_format=json
COPY_GBS="$(python3 "$ROOT/tests/gpu/quick_figures.py" copy "$WORK/copy.json" 2>/dev/null)"
if [ "$RC" = 0 ] && [ -n "$COPY_GBS" ]; then verdict "1 d2d copy bandwidth" INFO "$COPY_GBS GB/s (read + written)$TAG"
else judge "1 d2d copy bandwidth" 'DeviceCopy'; fi

# ---- 2. kernels vs the CPU backend, C API glue incl. CUDA graphs ---------------------------------
GRID_ENV=(KVC_GPU_TEST_QUICK=1)
# The emulator runs a kernel thousands of times slower: a spread of every 20th case rehearses the step.
[ "$EMULATED" = 1 ] && GRID_ENV+=(KVC_GPU_TEST_STRIDE=20)
run_step kernel_grid 50 "$STEPS" env "${GRID_ENV[@]}" "$BIN/test_gpu_kernels"
judge "2 kernel grid vs CPU" '\[  PASSED  \] 14 test\(s\)'
GLUE_ENV=()
GLUE_PASSED=9
# The emulator spends ~50 s on the end-to-end test alone: the rehearsal runs the other eight.
[ "$EMULATED" = 1 ] && GLUE_ENV=(KVC_GPU_TEST_SKIP=test_cuda_e2e_prefill_decode) && GLUE_PASSED=8
run_step capi_glue 35 "$STEPS" env "${GLUE_ENV[@]}" "$BIN/test_kernels_capi_cuda"
judge "2 C API glue + graphs" '\[       OK \] test_cuda_graph_capture_replay' "\\[  PASSED  \\] $GLUE_PASSED test\\(s\\)"

# ---- 3. the demo on the CUDA backend --------------------------------------------------------------
run_step serve_cuda 30 "$STEPS" "$BIN/kvc_serve" --backend cuda --kv-dtype f16 --requests 4 --seed 5 --blocks 20 \
    --quiet --svg "$WORK/serve_cuda.svg"
# The same evidence as ctest's serve_cuda (examples/serve/CMakeLists.txt): swaps both ways, COW copies, OK.
PASS_DETAIL="$(grep -Eo '^preemptions +[0-9]+ swap|device->host [0-9.]+ [KMG]iB|^copy-on-write [0-9]+ block copies|max \|logit diff\| [0-9.e+-]+' "$LOG" |
    sed 's/  */ /g' | paste -sd ';' -)" judge "3 kvc_serve cuda vs dense" 'served +4 requests' 'preemptions +[1-9][0-9]* swap' 'device->host [1-9]' \
    'copy-on-write [1-9][0-9]* block copies' '-- OK'

# ---- 4. compute-sanitizer -------------------------------------------------------------------------
if [ -n "$SAN" ]; then
    # test_runtime_wrappers provokes a cudaMalloc out-of-memory on purpose (its status is what it
    # checks, in step 2); memcheck would count that API error, so it is left out here.
    run_step memcheck_grid 55 "$SANLOG" env KVC_GPU_TEST_QUICK=1 KVC_GPU_TEST_STRIDE=8 KVC_GPU_TEST_SKIP=test_runtime_wrappers \
        "$SAN" --tool memcheck --error-exitcode 3 --leak-check full "$BIN/test_gpu_kernels"
    judge_san "4 memcheck grid (1/8)" '\[  SUBSET  \]'
    run_step memcheck_glue 40 "$SANLOG" "$SAN" --tool memcheck --error-exitcode 3 --leak-check full "$BIN/test_kernels_capi_cuda"
    judge_san "4 memcheck C API glue" '\[  PASSED  \] 9 test\(s\)'
    run_step racecheck_decode 20 "$SANLOG" env KVC_GPU_TEST_QUICK=1 KVC_GPU_TEST_FILTER=test_decode_tensor_core_scores \
        KVC_GPU_TEST_MAX_CASES=1 "$SAN" --tool racecheck --error-exitcode 3 "$BIN/test_gpu_kernels"
    judge_san "4 racecheck decode" '\[  SUBSET  \] 1 attention cases run'
    run_step racecheck_prefill 20 "$SANLOG" env KVC_GPU_TEST_QUICK=1 KVC_GPU_TEST_FILTER=test_prefill_tensor_core_dtypes \
        KVC_GPU_TEST_MAX_CASES=1 "$SAN" --tool racecheck --error-exitcode 3 "$BIN/test_gpu_kernels"
    judge_san "4 racecheck prefill" '\[  SUBSET  \] 1 attention cases run'
else
    for s in "4 memcheck grid (1/8)" "4 memcheck C API glue" "4 racecheck decode" "4 racecheck prefill"; do
        skip_step "$s" "no compute-sanitizer on this machine"
    done
fi

# ---- 5. decode benchmark: headline and a small sweep ----------------------------------------------
# DeviceCopy again in the same process: the % of the measured copy is taken against it.
if [ "$EMULATED" = 1 ]; then HB='B:2/ctx:256'; SW='B:(1|2)/ctx:(64|256)'; else HB='B:64/ctx:4096'; SW='B:(8|64)/ctx:(1024|4096)'; fi
run_step decode_bench 45 "$STEPS" "$BIN/bench_gpu_attention" \
    --benchmark_filter="^(DeviceCopy|Decode/headline(_q_f32)?/$HB/bs:16/|Decode/sweep/$SW/bs:(1|16|32|128)/)" \
    --benchmark_out="$OUT/bench_gpu_attention.json" --benchmark_out_format=json
if [ "$RC" = 0 ] && grep -q "Decode/headline" "$LOG"; then
    verdict "5 decode headline" INFO "$(python3 "$ROOT/tests/gpu/quick_figures.py" headline "$OUT/bench_gpu_attention.json")$TAG"
else judge "5 decode headline" 'Decode/headline'; fi

# ---- 6. prefill vs PyTorch SDPA -------------------------------------------------------------------
PY=""
for candidate in python3 /opt/torch/.venv/bin/python3 /usr/bin/python3 /opt/conda/bin/python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c "import torch" 2>/dev/null; then PY="$candidate"; break; fi
done
if [ -z "$PY" ]; then
    skip_step "6 prefill vs SDPA" "no python3 with torch on this machine"
else
    run_step prefill_sdpa 55 "$STEPS" env KVC_LIB="$BIN" PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
        "$PY" "$ROOT/tests/bench/prefill_vs_sdpa.py" --out "$OUT/prefill_vs_sdpa.json"
    judge "6 prefill vs SDPA" 'shapes correct'
fi

# ---- 7. CUDA swap vs pinned cudaMemcpyAsync -------------------------------------------------------
run_step swap_bench 25 "$STEPS" "$BIN/bench_tiers" --benchmark_filter='^BM_(HostSwapCuda|PinnedCopyCuda)' \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_out="$OUT/bench_tiers.json" --benchmark_out_format=json
if grep -q "no CUDA device" "$LOG"; then
    verdict "7 swap vs pinned copy" "$([ "$HAVE_GPU" = 1 ] && echo FAIL || echo SKIPPED)" "bench_tiers: no CUDA device"
elif [ "$RC" = 0 ] && grep -q "BM_HostSwapCuda" "$LOG"; then
    verdict "7 swap vs pinned copy" INFO "$(python3 "$ROOT/tests/gpu/quick_figures.py" swap "$OUT/bench_tiers.json")$TAG"
else judge "7 swap vs pinned copy" 'BM_HostSwapCuda'; fi

# ---- 8. one profiled headline launch (issue 31: confirm or refute the decode diagnosis) -------------
NCU="$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"
if [ "$EMULATED" = 1 ] || [ -z "$NCU" ]; then
    skip_step "8 ncu decode headline" "$([ "$EMULATED" = 1 ] && echo "emulated run" || echo "no ncu on this machine")"
else
    # The second launch of the headline decode kernel (the first warms caches and the table), with the
    # sections that answer the review's questions: DRAM %, issue activity, occupancy, stall reasons.
    run_step ncu_headline 45 "$STEPS" "$NCU" --kernel-name regex:paged_decode_kernel --launch-skip 1 --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats --section LaunchStats \
        --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
        "$BIN/bench_gpu_attention" --benchmark_filter='^Decode/headline/B:64/ctx:4096/bs:16/part:0/'
    NCU_DETAIL="$(grep -E '^ +(DRAM Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per Thread|No Eligible) ' "$LOG" |
        awk '{v=$NF; $NF=""; sub(/ +[%a-z/]* *$/, ""); gsub(/^ +/, ""); printf "%s%s %s", (n++ ? "; " : ""), $0, v}')"
    if [ "$RC" = 0 ] && [ -n "$NCU_DETAIL" ]; then verdict "8 ncu decode headline" INFO "$NCU_DETAIL"
    elif [ "$RC" = 124 ] || [ "$RC" = 137 ]; then verdict "8 ncu decode headline" INFO "timed out"
    else verdict "8 ncu decode headline" INFO "no profile (exit $RC): $(grep -Em1 'ERR|rror|==PROF==' "$LOG" | cut -c1-60)"; fi
fi

# ---- the figures, one screen ------------------------------------------------------------------------
CURRENT="summary"
say ""
python3 "$ROOT/tests/gpu/quick_figures.py" all "$OUT" "$WORK/copy.json" "$TAG" 2>&1 | tee -a "$SUMMARY"
say ""
say "verdicts:$(printf '%s\n' $COUNTS | sort | uniq -c | awk '{printf " %s %s", $1, $2}')"
say "total $((SECONDS - START)) s; $([ "$FAILED" = 0 ] && echo "no step failed or timed out" || echo "SOME STEPS FAILED OR TIMED OUT: see steps.log / sanitizer.log")$TAG"
rm -rf "$WORK"
exit $FAILED
