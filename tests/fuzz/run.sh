#!/usr/bin/env bash
# Builds the differential fuzzer with clang (libFuzzer + ASan + UBSan, library instrumented for
# coverage), replays the committed corpus, checks that a skewed mirror rank is reported (the
# determinism self-test, see mirror.hpp) and that KV bytes made wrong are reported (the byte
# oracle's self-test, KVC_FUZZ_KV_SKEW in fuzz_pool.cpp), then fuzzes for a bounded time.
#
#   tests/fuzz/run.sh [seconds]        default 60; 0 = replay only
#   KVC_FUZZ_BUILD=dir                 build directory (default build/fuzz)
#   KVC_FUZZ_HYBRID_SECONDS=n          how long fuzz_hybrid (hybrid pools, fuzz_hybrid.cpp) fuzzes after
#                                      fuzz_pool (default: the same seconds; its corpus: corpus-hybrid)
#   KVC_FUZZ_WORK=dir                  where new inputs go (default <build>/corpus-new; the committed
#                                      corpus is read, never written)
#   KVC_FUZZ_DISK_DIR=dir              where the inputs' disk tier files are made (default /tmp); each
#                                      is unlinked as soon as it is attached, or, for a persistent
#                                      disk tier (restarts attach it again), when its input ends or a
#                                      divergence aborts, so none is left behind (a crash of another
#                                      kind may leave kvc-fuzz-disk-<pid>-* there)
# Exit status non-zero on a build failure, a crash or a divergence from the model.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SECONDS_TO_FUZZ=${1:-60}
BUILD=${KVC_FUZZ_BUILD:-$ROOT/build/fuzz}
WORK=${KVC_FUZZ_WORK:-$BUILD/corpus-new}
CORPUS=$ROOT/tests/fuzz/corpus

CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVC_CUDA=OFF \
  -DKVC_FUZZ=ON -DKVC_SANITIZE=address,undefined,fuzzer-no-link -DKVC_WERROR=OFF \
  -DKVC_BUILD_TESTS=OFF -DKVC_BUILD_BINDINGS=OFF -DKVC_BUILD_BENCH=OFF -DKVC_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$BUILD" -j"${KVC_JOBS:-2}" --target fuzz_pool fuzz_hybrid >/dev/null
FUZZ=$BUILD/tests/fuzz/fuzz_pool
unset KVC_FUZZ_MIRROR_SKEW KVC_FUZZ_KV_SKEW KVC_FUZZ_HYBRID_SKEW  # only the self-tests below set them
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

echo "fuzz: replaying $(ls "$CORPUS" | wc -l) corpus inputs"
"$FUZZ" -runs=0 -artifact_prefix="$BUILD/" "$CORPUS" 2>&1 | grep -E '^fuzz_pool:|INITED|DONE|ERROR|diverges' || true
# (-artifact_prefix: a failing input is written under the build directory, not the current one.)
"$FUZZ" -runs=0 -artifact_prefix="$BUILD/" "$CORPUS" >/dev/null 2>&1 ||
  { echo "fuzz: corpus replay failed"; "$FUZZ" -runs=0 -artifact_prefix="$BUILD/" "$CORPUS"; exit 1; }

# The mirror-rank comparison can fail: a mirror made to differ must be reported as a divergence.
for skew in blocks alloc; do
  out=$(KVC_FUZZ_MIRROR_SKEW=$skew "$FUZZ" -runs=0 -artifact_prefix="$BUILD/mirror-skew-$skew-" "$CORPUS" 2>&1 || true)
  if ! grep -q 'mirror rank diverges from the fuzzed pool' <<<"$out"; then
    echo "fuzz: self-test failed: a mirror skewed by '$skew' was not reported"; exit 1
  fi
  echo "fuzz: self-test: skewed mirror ($skew) reported: $(grep -m1 -o 'mirror rank diverges.*' <<<"$out")"
done

# The byte checks can fail: a free cached block given another prefix's KV (same token, same position)
# must be reported.
out=$(KVC_FUZZ_KV_SKEW=cached "$FUZZ" -runs=0 -artifact_prefix="$BUILD/kv-skew-" "$CORPUS" 2>&1 || true)
if ! grep -q 'diverges from the model: KV bytes of block' <<<"$out"; then
  echo "fuzz: self-test failed: a cached block holding another prefix's KV was not reported"; exit 1
fi
echo "fuzz: self-test: wrong KV in a cached block reported: $(grep -m1 -o 'KV bytes of block.*' <<<"$out")"

# The bounded fuzzing of plain pools and everything of hybrid pools (corpus replay, self-test,
# fuzzing) are independent, and libFuzzer runs on one core: with KVC_JOBS >= 2 they run side by
# side (CI's fuzz stage ~45 s shorter on 2 cores), each into its own log, printed in order when
# both are done. A failure in either fails the script.
# fuzz_for LABEL BINARY SECONDS MAX_LEN WORK_DIR CORPUS ARTIFACT_PREFIX: one bounded fuzzing run,
# new inputs into WORK_DIR; prints the end of its output and, if it failed, says so and exits 1
# (its output goes to a file first: through a pipe, errexit would end the script before the message).
fuzz_for() {
  local label=$1 bin=$2 seconds=$3 max_len=$4 work=$5 corpus=$6 prefix=$7 status=0
  mkdir -p "$work"
  echo "fuzz: fuzzing $label for ${seconds}s (new inputs in $work)"
  "$bin" -max_total_time="$seconds" -max_len="$max_len" -timeout=20 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$prefix" "$work" "$corpus" >"$work.log" 2>&1 || status=$?
  tail -n 25 "$work.log"
  [ "$status" -eq 0 ] || { echo "fuzz: $label FAILED (exit $status); crashing input saved under $BUILD/"; exit 1; }
}
fuzz_plain() {
  if [ "$SECONDS_TO_FUZZ" -gt 0 ]; then
    fuzz_for "plain pools" "$FUZZ" "$SECONDS_TO_FUZZ" 512 "$WORK" "$CORPUS" "$BUILD/"
  fi
}
# Hybrid pools: fuzz_hybrid, its own corpus and self-test (a model reporting hits one block short).
fuzz_hybrid_pools() {
  HYBRID=$BUILD/tests/fuzz/fuzz_hybrid
  HCORPUS=$ROOT/tests/fuzz/corpus-hybrid
  HYBRID_SECONDS=${KVC_FUZZ_HYBRID_SECONDS:-$SECONDS_TO_FUZZ}
  echo "fuzz: replaying $(ls "$HCORPUS" | wc -l) hybrid corpus inputs"
  "$HYBRID" -runs=0 -artifact_prefix="$BUILD/hybrid-" "$HCORPUS" >/dev/null 2>&1 ||
    { echo "fuzz: hybrid corpus replay failed"; "$HYBRID" -runs=0 -artifact_prefix="$BUILD/hybrid-" "$HCORPUS"; exit 1; }
  out=$(KVC_FUZZ_HYBRID_SKEW=hit "$HYBRID" -runs=0 -artifact_prefix="$BUILD/hybrid-skew-" "$HCORPUS" 2>&1 || true)
  if ! grep -q 'diverges from the model: kvc_alloc cached tokens' <<<"$out"; then
    echo "fuzz: self-test failed: a hybrid model reporting hits one block short was not reported"; exit 1
  fi
  echo "fuzz: self-test: skewed hybrid hit reported: $(grep -m1 -o 'kvc_alloc cached tokens.*' <<<"$out")"
  if [ "$HYBRID_SECONDS" -gt 0 ]; then
    fuzz_for "hybrid pools" "$HYBRID" "$HYBRID_SECONDS" 1024 "$WORK-hybrid" "$HCORPUS" "$BUILD/hybrid-"
  fi
}
if [ "${KVC_JOBS:-2}" -ge 2 ]; then
  fuzz_plain >"$BUILD/fuzz-plain.log" 2>&1 &
  plain_pid=$!
  fuzz_hybrid_pools >"$BUILD/fuzz-hybrid.log" 2>&1 &
  hybrid_pid=$!
  plain_status=0 hybrid_status=0
  wait "$plain_pid" || plain_status=$?
  wait "$hybrid_pid" || hybrid_status=$?
  cat "$BUILD/fuzz-plain.log" "$BUILD/fuzz-hybrid.log"
  [ "$plain_status" -eq 0 ] && [ "$hybrid_status" -eq 0 ] || exit 1
else
  fuzz_plain
  fuzz_hybrid_pools
fi
echo "fuzz: ok"
