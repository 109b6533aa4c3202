#!/usr/bin/env bash
# Runs libkvc's CUDA code paths on a machine without a GPU: configures a KVC_CUDA=EMULATE build
# (cuda/*.cu compiled as host C++ against the fiber emulator in this folder, which also serves the
# CUDA runtime calls from host memory) and runs the ctest entries labelled cuda-emulated: the GPU
# kernel grid (tests/test_gpu_kernels.cpp, quick size), the C API glue on a CUDA pool
# (tests/test_kernels_capi_cuda.cpp) and kvc_serve --backend cuda. The test command (.ci/run) runs
# the same stage. Extra arguments go to ctest (e.g. -R serve_cuda -V).
# KVC_SANITIZE=address,undefined instruments the kernels too: a kernel access past a device
# allocation is then reported with its source line (the hardening stage runs the glue and the
# demo that way; the whole grid under ASan takes ~10 min on 2 cores). KVC_EMU_THREAD_ORDER=reverse or
# random[:SEED] resumes each CTA's threads in that order (a missing barrier shows up whichever way
# its threads' indices lie; ctest runs the grid once with random:1).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
SAN="${KVC_SANITIZE:-}"
BUILD="${KVC_EMU_BUILD:-$ROOT/build/emulated${SAN:+-asan}}"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=$([ -n "$SAN" ] && echo RelWithDebInfo || echo Release) \
    -DKVC_CUDA=EMULATE -DKVC_SANITIZE="$SAN" -DKVC_BUILD_BINDINGS=OFF -DKVC_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD" -j"${KVC_JOBS:-2}" --target test_gpu_kernels test_kernels_capi_cuda test_gpu_access_audit test_gpu_emulator test_tp_ranks kvc_serve
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
cd "$BUILD" && ctest --output-on-failure -j"${KVC_JOBS:-2}" -L cuda-emulated --timeout 900 "$@"
