#!/usr/bin/env bash
# On a GPU machine: build libkvc with CUDA and run the GPU tests (kernel grid, C API glue on a CUDA
# pool), the same tests under compute-sanitizer memcheck, the demo on the CUDA backend
# (kvc_serve --backend cuda: every token checked against a dense reference), and the GPU benchmarks
# (attention, tiers), then prefill attention against PyTorch SDPA in the same process
# (tests/bench/prefill_vs_sdpa.py through ctypes: a failed correctness check fails the run; without
# torch it is skipped and logged). Needs only the CUDA driver; cmocka,
# Google Benchmark, xxhash and pkg-config come from .gpu/ (tests/gpu/prepare_carry.sh). Without
# cmake or nvcc on the machine it runs the binaries prebuilt into .gpu/bin instead.
# Results (logs, benchmark JSON) go to $OUT when set (the device tool returns that folder), else
# to ./gpu-results. Exit status: nonzero if any test step failed.
#
# For a 15-minute GPU window use the single-call check instead: `run_on_device.sh quick` runs
# tests/gpu/quick_check.sh (prebuilt binaries, no build, <= 7 minutes; tests/gpu/README.md). The
# phases below build on the device and take several calls: for a later, longer window, or to
# rebuild there after a fix.
#
# usage: run_on_device.sh [PHASE...]   PHASE: build test serve memcheck bench sdpa headline, or all
#   (default). headline: the decode headline under every split-K setting and both score paths
#   (bench_gpu_attention, a minute) and, where ncu exists, one profiled headline launch (issue
#   activity, stall reasons, DRAM throughput) to confirm or refute tests/bench/RESULTS.md's static
#   instruction budget (tests/gpu/kernel_report.sh).
# The device tool limits one command to 10 minutes: run the phases as separate calls (the build
# tree, build-gpu/, is git-ignored and stays on a warm machine between calls), e.g.
#   run_on_device.sh build; run_on_device.sh test serve; run_on_device.sh memcheck; ... bench; ... sdpa
# A phase after `build` reuses build-gpu/ when it holds the programs, else builds first.
set -uo pipefail
if [ "${1:-}" = quick ]; then
    shift
    exec bash "$(dirname "$0")/quick_check.sh" "$@"
fi
PHASES="${*:-all}"
want() { case " $PHASES " in *" all "* | *" $1 "*) return 0 ;; esac; return 1; }
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
CARRY="$ROOT/.gpu"
PREFIX="$CARRY/prefix"
RESULTS="${OUT:-$ROOT/gpu-results}"
mkdir -p "$RESULTS"
MULTIARCH="$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
export PATH="/usr/local/cuda/bin:$PATH"
export LD_LIBRARY_PATH="$PREFIX/lib:$PREFIX/lib/$MULTIARCH:$CARRY/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
command -v pkg-config >/dev/null || export PATH="$PREFIX/bin:$PATH"

{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv || true
    command -v nvcc && nvcc --version | tail -2
    command -v cmake && cmake --version | head -1
} 2>&1 | tee "$RESULTS/device.txt"

status=0
BIN=""
SERVE=""
KVC_LIB_DIR=""
BUILD="$ROOT/build-gpu"
if [ -x "$BUILD/tests/test_gpu_kernels" ] && ! want build; then
    BIN="$BUILD/tests"
    KVC_LIB_DIR="$BUILD/lib"
    SERVE="$BUILD/examples/serve/kvc_serve"
    export LD_LIBRARY_PATH="$BUILD/lib:$LD_LIBRARY_PATH"
    echo "reusing the device build in $BUILD (phases: $PHASES)" | tee -a "$RESULTS/device.txt"
elif command -v cmake >/dev/null && command -v nvcc >/dev/null; then
    CUDA_INC="$(dirname "$(dirname "$(command -v nvcc)")")/include"
    if cmake -S "$ROOT" -B "$BUILD" -DKVC_CUDA=ON -DKVC_BUILD_BINDINGS=OFF -DKVC_BUILD_EXAMPLES=ON \
        -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PREFIX" \
        -Dbenchmark_DIR="$PREFIX/lib/$MULTIARCH/cmake/benchmark" \
        -DCMAKE_CXX_FLAGS="-isystem $CUDA_INC" >"$RESULTS/configure.log" 2>&1 &&
        cmake --build "$BUILD" -j"$(nproc)" --target kvc test_gpu_kernels test_kernels_capi_cuda bench_gpu_attention \
            bench_tiers kvc_serve >"$RESULTS/build.log" 2>&1; then
        BIN="$BUILD/tests"
        KVC_LIB_DIR="$BUILD/lib"
        SERVE="$BUILD/examples/serve/kvc_serve"
        # LD_LIBRARY_PATH beats RUNPATH: the fresh libkvc.so.0 must come before the carried one.
        export LD_LIBRARY_PATH="$BUILD/lib:$LD_LIBRARY_PATH"
        echo "built on the device" | tee -a "$RESULTS/device.txt"
    else
        echo "device build failed (see build.log / configure.log); falling back to .gpu/bin" | tee -a "$RESULTS/device.txt"
        tail -30 "$RESULTS/configure.log" "$RESULTS/build.log" 2>/dev/null
    fi
fi
if [ -z "$BIN" ]; then
    if [ ! -f "$CARRY/bin/programs.tar.xz" ]; then
        echo "no cmake/nvcc here and no prebuilt binaries: run tests/gpu/prepare_carry.sh and carry .gpu" >&2
        exit 2
    fi
    # prepare_carry.sh packs the programs (137 MiB unpacked, over the carry limit): unpack to /tmp.
    BIN="/tmp/kvc-gpu-bin"
    mkdir -p "$BIN" && { tar -xJf "$CARRY/bin/programs.tar.xz" -C "$BIN" ||
        python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))' "$CARRY/bin/programs.tar.xz" "$BIN"; } || exit 2
    cp "$CARRY/bin/BUILT_FROM_COMMIT" "$BIN/"
    SERVE="$BIN/kvc_serve"
    KVC_LIB_DIR="$BIN"
    export LD_LIBRARY_PATH="$BIN:$LD_LIBRARY_PATH"
    echo "using prebuilt binaries from $(head -1 "$CARRY/bin/BUILT_FROM_COMMIT")" | tee -a "$RESULTS/device.txt"
fi

if want test; then
    for t in test_gpu_kernels test_kernels_capi_cuda; do
        echo "=== GPU tests: $t ==="
        "$BIN/$t" 2>&1 | tee "$RESULTS/$t.log"
        [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
        grep -q "SKIPPED" "$RESULTS/$t.log" && { echo "$t was skipped on a GPU machine" >&2; status=1; }
    done
fi

if want serve; then
    echo "=== demo on the CUDA backend (kvc_serve --backend cuda) ==="
    if [ -x "$SERVE" ]; then
        "$SERVE" --backend cuda --quiet --svg "$RESULTS/serve_cuda.svg" 2>&1 | tee "$RESULTS/serve_cuda.log"
        [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
        "$SERVE" --backend cuda --kv-dtype f16 --requests 4 --seed 5 --blocks 20 --quiet \
            --svg "$RESULTS/serve_cuda_small.svg" 2>&1 | tee "$RESULTS/serve_cuda_small.log"
        [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    else
        echo "kvc_serve not built" | tee "$RESULTS/serve_cuda.log"
        status=1
    fi
fi

if want memcheck; then
    echo "=== GPU tests under compute-sanitizer memcheck ==="
    SAN="$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer /usr/local/cuda*/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)"
    if [ -n "$SAN" ]; then
        # The kernel grid in its quick size under memcheck (every kernel family, dtype, head dim and
        # block-size class, fewer random cases), bounded so the phase fits one 10-minute device call.
        for t in test_gpu_kernels test_kernels_capi_cuda; do
            KVC_GPU_TEST_QUICK=1 timeout 420 "$SAN" --tool memcheck --error-exitcode 3 --leak-check full "$BIN/$t" \
                >"$RESULTS/memcheck_$t.log" 2>&1
            rc=$?
            [ "$rc" -eq 124 ] && echo "memcheck of $t timed out after 420 s" | tee -a "$RESULTS/memcheck_$t.log"
            tail -25 "$RESULTS/memcheck_$t.log"
            [ "$rc" -eq 0 ] || status=1
        done
        if [ -x "$SERVE" ]; then
            "$SAN" --tool memcheck --error-exitcode 3 "$SERVE" --backend cuda --kv-dtype f16 --requests 4 --seed 5 \
                --blocks 20 --quiet --svg "$RESULTS/serve_memcheck.svg" >"$RESULTS/memcheck_serve.log" 2>&1
            rc=$?
            tail -5 "$RESULTS/memcheck_serve.log"
            [ "$rc" -eq 0 ] || status=1
        fi
    else
        echo "compute-sanitizer not found on this machine: memcheck NOT run" | tee "$RESULTS/memcheck.log"
        status=1
    fi
fi

if want bench; then
    for b in bench_gpu_attention bench_tiers; do
        echo "=== GPU benchmark: $b ==="
        [ -x "$BIN/$b" ] || { echo "$b not built"; continue; }
        "$BIN/$b" --benchmark_out="$RESULTS/$b.json" --benchmark_out_format=json 2>&1 | tee "$RESULTS/$b.log"
    done
fi

if want headline; then
    echo "=== decode headline: every split-K setting, tensor-core and CUDA-core scores ==="
    "$BIN/bench_gpu_attention" --benchmark_filter='DeviceCopy|Decode/headline' \
        --benchmark_out="$RESULTS/headline.json" --benchmark_out_format=json 2>&1 | tee "$RESULTS/headline.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    NCU="$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"
    if [ -n "$NCU" ]; then
        # One decode launch of the headline (auto split-K, fp16 q), past the warm-up launches.
        timeout 300 "$NCU" --kernel-name regex:paged_decode_kernel --launch-skip 10 --launch-count 1 \
            --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
            --metrics smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
            "$BIN/bench_gpu_attention" --benchmark_filter='Decode/headline/B:64/ctx:4096/bs:16/part:0/q:1/' \
            >"$RESULTS/ncu_headline.log" 2>&1 || echo "ncu failed (exit $?; counters may need admin rights)"
        grep -E "issue_active|inst_executed|dram__|Issue Slots|Achieved Occupancy|Stall|Warp Cycles" \
            "$RESULTS/ncu_headline.log" | head -40
    else
        echo "ncu not found on this machine: no profiled launch" | tee "$RESULTS/ncu_headline.log"
    fi
fi

if want sdpa; then
    echo "=== prefill attention vs PyTorch SDPA (tests/bench/prefill_vs_sdpa.py) ==="
    # The first interpreter that has torch; without any, python3 runs it and it reports SKIPPED (77).
    PY=python3
    for candidate in python3 /usr/bin/python3 /opt/conda/bin/python3; do
        if command -v "$candidate" >/dev/null && "$candidate" -c "import torch" 2>/dev/null; then
            PY="$candidate"
            break
        fi
    done
    if [ -f "$KVC_LIB_DIR/libkvc.so.0" ]; then
        KVC_LIB="$KVC_LIB_DIR" PYTHONDONTWRITEBYTECODE=1 "$PY" "$ROOT/tests/bench/prefill_vs_sdpa.py" \
            --out "$RESULTS/prefill_vs_sdpa.json" 2>&1 | tee "$RESULTS/prefill_vs_sdpa.log"
        rc=${PIPESTATUS[0]}
        case "$rc" in
            0) ;;
            77) echo "prefill_vs_sdpa skipped (exit 77): not counted as a failure" | tee -a "$RESULTS/prefill_vs_sdpa.log" ;;
            *) echo "prefill_vs_sdpa failed (exit $rc)" | tee -a "$RESULTS/prefill_vs_sdpa.log"; status=1 ;;
        esac
    else
        echo "no libkvc.so.0 in '$KVC_LIB_DIR' (prebuilt carry dropped it?): prefill_vs_sdpa not run" |
            tee "$RESULTS/prefill_vs_sdpa.log"
    fi
fi
exit $status
