#!/usr/bin/env bash
# Builds examples/c/main.c against an *installed* libkvc twice — once with pkg-config, once with
# find_package(kvc) — and runs both. Usage: build_and_run.sh INSTALL_PREFIX
set -euo pipefail
PREFIX=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"

echo "[examples/c] pkg-config build"
cc -std=c99 -Wall -Werror "$HERE/main.c" $(pkg-config --cflags --libs kvc) \
   -Wl,-rpath,"$(pkg-config --variable=libdir kvc)" -o "$OUT/example_pc"
"$OUT/example_pc"

echo "[examples/c] find_package(kvc) build"
cmake -S "$HERE/cmake" -B "$OUT/cmake" -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DCMAKE_BUILD_RPATH="$PREFIX/lib" >/dev/null
cmake --build "$OUT/cmake" >/dev/null
"$OUT/cmake/kvc_example_c" >/dev/null && echo "[examples/c] find_package build ran ok"
