#!/usr/bin/env bash
# Builds examples/c/main.c (the block manager) and data_path.c (one model step's kernels on a CPU
# pool, checked against dense attention) against an *installed* libkvc — with pkg-config and with
# find_package(kvc); when the prefix has libkvc.a (KVC_INSTALL_STATIC) also statically, both ways,
# checking that the program needs no libkvc.so — and runs each. With a second argument, the libkvc
# source tree, also as an add_subdirectory consumer (kvc::kvc; the library alone gets built).
# Usage: build_and_run.sh INSTALL_PREFIX [LIBKVC_SOURCE_DIR]
set -euo pipefail
PREFIX=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"

echo "[examples/c] pkg-config build"
cc -std=c99 -Wall -Werror "$HERE/main.c" $(pkg-config --cflags --libs kvc) \
   -Wl,-rpath,"$(pkg-config --variable=libdir kvc)" -o "$OUT/example_pc"
echo "[examples/c] data_path.c (batch build -> cache write -> attention, vs dense), pkg-config build"
cc -std=c99 -Wall -Wextra -Werror "$HERE/data_path.c" $(pkg-config --cflags --libs kvc) -lm \
   -Wl,-rpath,"$(pkg-config --variable=libdir kvc)" -o "$OUT/data_path"
"$OUT/data_path"
"$OUT/example_pc"

echo "[examples/c] README's quick start (extracted), pkg-config build"
awk '/^## Quick start \(C\)/ {f = 1} f && /^```c$/ {c = 1; next} c && /^```$/ {exit} c' \
  "$HERE/../../README.md" > "$OUT/quickstart.c"
[ -s "$OUT/quickstart.c" ] || { echo "[examples/c] no quick start found in README.md" >&2; exit 1; }
cc -std=c99 -Wall -Wextra -Werror "$OUT/quickstart.c" $(pkg-config --cflags --libs kvc) \
   -Wl,-rpath,"$(pkg-config --variable=libdir kvc)" -o "$OUT/quickstart"
"$OUT/quickstart" | tee "$OUT/quickstart.out"
grep -q "^32 cached, hit rate 0.40, 3 blocks used$" "$OUT/quickstart.out" \
  || { echo "[examples/c] the quick start's output changed; update README.md" >&2; exit 1; }

echo "[examples/c] find_package(kvc) build"
cmake -S "$HERE/cmake" -B "$OUT/cmake" -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DCMAKE_BUILD_RPATH="$PREFIX/lib" >/dev/null
cmake --build "$OUT/cmake" >/dev/null
"$OUT/cmake/kvc_example_c" >/dev/null && "$OUT/cmake/kvc_example_data_path" >/dev/null \
  && echo "[examples/c] find_package build ran ok"

no_libkvc_so() {  # a static link must not need libkvc.so at run time
  if readelf -d "$1" | grep NEEDED | grep -q libkvc; then
    echo "[examples/c] $1 needs libkvc.so although linked statically" >&2; exit 1
  fi
}
if [ -f "$PREFIX/lib/libkvc.a" ]; then
  echo "[examples/c] static build (pkg-config --static)"
  cc -std=c99 -Wall -Werror "$HERE/main.c" $(pkg-config --cflags kvc) "$PREFIX/lib/libkvc.a" \
     $(pkg-config --static --libs kvc | sed 's/ -lkvc / /') -o "$OUT/example_static"
  no_libkvc_so "$OUT/example_static"
  "$OUT/example_static" >/dev/null && echo "[examples/c] static pkg-config build ran ok"
  echo "[examples/c] static build (find_package(kvc), kvc::kvc_static)"
  cmake -S "$HERE/cmake_static" -B "$OUT/cmake_static" -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
  cmake --build "$OUT/cmake_static" >/dev/null
  no_libkvc_so "$OUT/cmake_static/kvc_example_c_static"
  "$OUT/cmake_static/kvc_example_c_static" >/dev/null && echo "[examples/c] static find_package build ran ok"
fi

if [ -n "${2:-}" ]; then
  echo "[examples/c] add_subdirectory(libkvc) build"
  cmake -S "$HERE/subdirectory" -B "$OUT/subdirectory" -DKVC_SOURCE_DIR="$(cd "$2" && pwd)" \
    -DKVC_CUDA=OFF >"$OUT/subdirectory.log"
  # Not the top-level project: no tests, benchmarks, examples or bindings are configured.
  if grep -E "kvc_serve|Go binding|Java binding|cmocka" "$OUT/subdirectory.log"; then
    echo "[examples/c] add_subdirectory configured optional parts of libkvc" >&2; exit 1
  fi
  cmake --build "$OUT/subdirectory" -j"${KVC_JOBS:-2}" >/dev/null
  "$OUT/subdirectory/kvc_example_subdirectory" >/dev/null && echo "[examples/c] add_subdirectory build ran ok"
fi
