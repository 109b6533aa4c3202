#!/usr/bin/env bash
# On a GPU machine: build libkvc with CUDA and run the GPU tests, the same tests under
# compute-sanitizer memcheck, and the GPU benchmark. Needs only the CUDA driver; cmocka,
# Google Benchmark, xxhash and pkg-config come from .gpu/ (tests/gpu/prepare_carry.sh). Without
# cmake or nvcc on the machine it runs the binaries prebuilt into .gpu/bin instead.
# Results (logs, benchmark JSON) go to $OUT when set (the device tool returns that folder), else
# to ./gpu-results. Exit status: nonzero if any test step failed.
set -uo pipefail
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
if command -v cmake >/dev/null && command -v nvcc >/dev/null; then
    BUILD="$ROOT/build-gpu"
    CUDA_INC="$(dirname "$(dirname "$(command -v nvcc)")")/include"
    if cmake -S "$ROOT" -B "$BUILD" -DKVC_CUDA=ON -DKVC_BUILD_BINDINGS=OFF -DKVC_BUILD_EXAMPLES=OFF \
        -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PREFIX" \
        -Dbenchmark_DIR="$PREFIX/lib/$MULTIARCH/cmake/benchmark" \
        -DCMAKE_CXX_FLAGS="-isystem $CUDA_INC" >"$RESULTS/configure.log" 2>&1 &&
        cmake --build "$BUILD" -j"$(nproc)" --target test_gpu_kernels bench_gpu_attention >"$RESULTS/build.log" 2>&1; then
        BIN="$BUILD/tests"
        echo "built on the device" | tee -a "$RESULTS/device.txt"
    else
        echo "device build failed (see build.log / configure.log); falling back to .gpu/bin" | tee -a "$RESULTS/device.txt"
        tail -30 "$RESULTS/configure.log" "$RESULTS/build.log" 2>/dev/null
    fi
fi
if [ -z "$BIN" ]; then
    if [ ! -x "$CARRY/bin/test_gpu_kernels" ]; then
        echo "no cmake/nvcc here and no prebuilt binaries: run tests/gpu/prepare_carry.sh and carry .gpu" >&2
        exit 2
    fi
    BIN="$CARRY/bin"
    echo "using prebuilt binaries from $(head -1 "$CARRY/bin/BUILT_FROM_COMMIT")" | tee -a "$RESULTS/device.txt"
fi

echo "=== GPU tests ==="
"$BIN/test_gpu_kernels" 2>&1 | tee "$RESULTS/test_gpu_kernels.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
grep -q "SKIPPED" "$RESULTS/test_gpu_kernels.log" && { echo "GPU tests were skipped on a GPU machine" >&2; status=1; }

echo "=== GPU tests under compute-sanitizer memcheck ==="
SAN="$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer /usr/local/cuda*/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)"
if [ -n "$SAN" ]; then
    "$SAN" --tool memcheck --error-exitcode 3 --leak-check full "$BIN/test_gpu_kernels" >"$RESULTS/memcheck.log" 2>&1
    rc=$?
    tail -25 "$RESULTS/memcheck.log"
    [ "$rc" -eq 0 ] || status=1
else
    echo "compute-sanitizer not found on this machine: memcheck NOT run" | tee "$RESULTS/memcheck.log"
    status=1
fi

echo "=== GPU benchmark ==="
"$BIN/bench_gpu_attention" --benchmark_out="$RESULTS/bench_gpu_attention.json" --benchmark_out_format=json \
    2>&1 | tee "$RESULTS/bench_gpu_attention.log"
exit $status
