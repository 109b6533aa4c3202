#!/usr/bin/env bash
# valgrind memcheck over the C test suites and the Rust binding's test binaries: no leaks
# (definite, indirect, possible), no invalid reads or writes, no uninitialized use.
#
#   tests/stress/memcheck.sh [c-build-dir] [rust-deps-dir rust-lib-dir]
#     c-build-dir    a plain (unsanitized) build with tests; default: builds build/memcheck
#     rust-deps-dir  cargo's target/debug/deps holding the kvc test binaries (e.g.
#                    build/ci/bindings/rust/cargo-target/debug/deps), rust-lib-dir the libkvc.so
#                    they load. Without them the Rust part is skipped with a message.
# Skipped: GPU suites (names with gpu/cuda; the CUDA runtime under valgrind is noise), and the
# CPU-kernel suites test_kernels_cpu / test_kernels_capi (dense math over large grids, minutes under
# valgrind; they run under ASan+UBSan in .ci/run). The kernels run here through the Rust binding's
# `kernels` tests instead. Also skipped: test_transfer (UCX under valgrind: its memory hooks and the
# agents' busy-polling progress threads take tens of minutes; the transfer suite runs under ASan+UBSan
# in .ci/run and under TSan in the hardening stage).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SUPP=$ROOT/tests/stress/valgrind.supp
BUILD=${1:-}
RUST_DEPS=${2:-}
RUST_LIB=${3:-}
[ -n "$RUST_DEPS" ] && [ -d "$RUST_DEPS" ] && RUST_DEPS=$(cd "$RUST_DEPS" && pwd)
[ -n "$RUST_LIB" ] && [ -d "$RUST_LIB" ] && RUST_LIB=$(cd "$RUST_LIB" && pwd)
if [ -z "$BUILD" ]; then
  BUILD=$ROOT/build/memcheck
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DKVC_CUDA=OFF -DKVC_BUILD_BINDINGS=OFF \
    -DKVC_BUILD_BENCH=OFF -DKVC_BUILD_EXAMPLES=OFF >/dev/null || exit 1
  cmake --build "$BUILD" -j"${KVC_JOBS:-2}" >/dev/null || exit 1
fi
BUILD=$(cd "$BUILD" && pwd)
VG=(valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect,possible
    --errors-for-leak-kinds=definite,indirect,possible --track-origins=yes --suppressions="$SUPP")
SKIP="^(test_kernels_cpu|test_kernels_capi|test_transfer)\$|gpu|cuda"
# Programs run KVC_JOBS at a time (valgrind runs a program's threads on one core): the stage took
# ~215 s one at a time on CI's 2 cores. The slowest go first, so that the last ones to finish are
# short. Each program's status goes to a file (the counts are made at the end, as the jobs are
# subshells) and its report is printed in one piece when it ends.
JOBS=${KVC_JOBS:-2}
RESULTS=$(mktemp -d)
trap 'rm -rf "$RESULTS"' EXIT
SLOW_FIRST=(test_bad_input test_tp_ranks test_e2e_hybrid_pools)
n_started=0
run_one() {  # name, command... (in the background: its own subshell)
  local name=$1; shift
  local log="$RESULTS/$name.log" report="$RESULTS/$name.report"
  local t0=$SECONDS
  timeout 600 "${VG[@]}" "$@" >"$log" 2>&1
  local rc=$?
  if [ $rc -ne 0 ]; then
    { echo "memcheck: FAIL $name (exit $rc)"
      grep -E '^\[  (ERROR|FAILED) +\]|^\[   LINE   \]' "$log" | head -n 20  # a failed assertion, above the leaks it caused
      tail -n 60 "$log"; } >"$report"
    echo fail >"$RESULTS/$name.status"
  else
    echo "memcheck: ok   $name ($((SECONDS - t0))s)" >"$report"
    echo ok >"$RESULTS/$name.status"
  fi
  cat "$report"
}
start() {  # dir, name, command...: runs in dir once a job slot is free
  local dir=$1; shift
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  n_started=$((n_started + 1))
  (cd "$dir" && run_one "$@") &
}

c_suites=()
for name in "${SLOW_FIRST[@]}"; do [ -x "$BUILD/tests/$name" ] && c_suites+=("$name"); done
for t in "$BUILD"/tests/test_*; do
  name=$(basename "$t")
  [ -x "$t" ] || continue
  if [[ "$name" =~ $SKIP ]]; then echo "memcheck: skip $name (GPU, CPU-kernel or UCX transfer suite, see above)"; continue; fi
  [[ " ${SLOW_FIRST[*]} " == *" $name "* ]] || c_suites+=("$name")
done
for name in "${c_suites[@]}"; do
  start "$BUILD/tests" "$name" "$BUILD/tests/$name"  # suites find their data relative to the build
done

failed_missing=0
if [ -n "$RUST_DEPS" ] && [ -d "$RUST_DEPS" ]; then
  for test in api errors raw threads conformance kernels; do
    bin=$(ls -t "$RUST_DEPS"/"$test"-* 2>/dev/null | grep -v '\.d$' | head -1)
    [ -n "$bin" ] || { echo "memcheck: FAIL rust $test: no test binary in $RUST_DEPS"; failed_missing=$((failed_missing + 1)); continue; }
    LD_LIBRARY_PATH="$RUST_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" start "$ROOT" "rust:$test" "$bin" -q
  done
else
  echo "memcheck: rust binding skipped (no cargo test binaries given)"
fi
wait
ran=$(ls "$RESULTS"/*.status 2>/dev/null | wc -l)
failed=$(( $(grep -l fail "$RESULTS"/*.status 2>/dev/null | wc -l) + failed_missing ))
if [ "$ran" -ne "$n_started" ]; then
  echo "memcheck: $n_started programs started, $ran reported a result"; failed=$((failed + 1))
fi
ran=$((ran + failed_missing))
echo "memcheck: $ran programs, $failed failed"
[ $failed -eq 0 ]
