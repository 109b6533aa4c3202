#!/usr/bin/env bash
# Prepares /work/main/.gpu (git-ignored) for a session that gets a GPU machine, which has the CUDA
# driver but may lack cmocka, Google Benchmark, xxhash, pkg-config, even cmake/nvcc:
#   .gpu/prefix/  headers, shared libraries, relocatable .pc files and CMake package configs of
#                 cmocka, libxxhash and benchmark (+ a pkg-config binary), for building there;
#   .gpu/bin/     test_gpu_kernels, test_kernels_capi_cuda, bench_gpu_attention, bench_tiers and
#                 kvc_serve (+ libkvc.so.0) prebuilt here with nvcc (sm_90 SASS only: H100/H200;
#                 static cudart; stripped), for running there when the machine cannot build.
#                 Each test program carries every kernel: for sm_80 + sm_90 + PTX they were 27 MB
#                 apiece, and the three of them alone broke the 64 MiB limit.
# Then: run(command="tests/gpu/run_on_device.sh", carry=[".gpu"]). Total stays well under 64 MiB.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="$ROOT/.gpu"
PREFIX="$OUT/prefix"
MULTIARCH="$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
SYSLIB="/usr/lib/$MULTIARCH"
rm -rf "$OUT"
mkdir -p "$PREFIX/include" "$PREFIX/lib/pkgconfig" "$PREFIX/bin" "$OUT/bin"

# --- cmocka and xxhash: headers, libraries, .pc files relative to their own location -----------
cp /usr/include/cmocka.h /usr/include/cmocka_pbc.h "$PREFIX/include/"
cp /usr/include/xxhash.h /usr/include/xxh3.h "$PREFIX/include/"
cp -L "$SYSLIB/libcmocka.so.0" "$PREFIX/lib/libcmocka.so.0"
ln -sf libcmocka.so.0 "$PREFIX/lib/libcmocka.so"
cp -L "$SYSLIB/libxxhash.so.0" "$PREFIX/lib/libxxhash.so.0"
ln -sf libxxhash.so.0 "$PREFIX/lib/libxxhash.so"
write_pc() {  # name version libs
    cat > "$PREFIX/lib/pkgconfig/$1.pc" <<PC
prefix=\${pcfiledir}/../..
libdir=\${prefix}/lib
includedir=\${prefix}/include
Name: $1
Description: carried for the GPU machine by tests/gpu/prepare_carry.sh
Version: $2
Libs: -L\${libdir} $3
Cflags: -I\${includedir}
PC
}
write_pc cmocka "$(pkg-config --modversion cmocka)" -lcmocka
write_pc libxxhash "$(pkg-config --modversion libxxhash)" -lxxhash

# --- Google Benchmark: the Debian layout, so its CMake config finds itself relative to prefix ----
mkdir -p "$PREFIX/lib/$MULTIARCH/cmake" "$PREFIX/include/benchmark"
cp /usr/include/benchmark/*.h "$PREFIX/include/benchmark/"
cp -r "$SYSLIB/cmake/benchmark" "$PREFIX/lib/$MULTIARCH/cmake/"
for f in "$SYSLIB"/libbenchmark.so*; do cp -P "$f" "$PREFIX/lib/$MULTIARCH/"; done
cp "$SYSLIB/libbenchmark_main.a" "$PREFIX/lib/$MULTIARCH/"
# The config's fallback for a symlinked install points at /usr; the carried copy is never a symlink.
sed -i 's|set(_IMPORT_PREFIX "/usr/lib/[^"]*/cmake/benchmark")|get_filename_component(_IMPORT_PREFIX "${CMAKE_CURRENT_LIST_FILE}" PATH)|' \
    "$PREFIX/lib/$MULTIARCH/cmake/benchmark/benchmarkTargets.cmake"

# --- pkg-config (CMake's FindPkgConfig needs the binary) -----------------------------------------
cp -L "$(command -v pkg-config)" "$PREFIX/bin/pkg-config"
for lib in $(ldd "$(command -v pkg-config)" | awk '/libpkgconf/ {print $3}'); do cp -L "$lib" "$PREFIX/lib/"; done

# --- prebuilt test and benchmark binaries ------------------------------------------------------
BUILD="${KVC_CARRY_BUILD:-$ROOT/build-gpu-carry}"  # e.g. build/carry on a machine shared with other builds
cmake -S "$ROOT" -B "$BUILD" -DKVC_CUDA=ON -DKVC_BUILD_BINDINGS=OFF -DKVC_BUILD_EXAMPLES=ON \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90-real \
    -DCMAKE_CXX_FLAGS="-isystem /usr/local/cuda/include" >/dev/null
cmake --build "$BUILD" -j2 --target test_gpu_kernels test_kernels_capi_cuda bench_gpu_attention bench_tiers kvc_serve
cp "$BUILD/tests/test_gpu_kernels" "$BUILD/tests/test_kernels_capi_cuda" "$BUILD/tests/bench_gpu_attention" \
    "$BUILD/tests/bench_tiers" "$OUT/bin/"
# kvc_serve links libkvc.so.0 (RUNPATH of the build tree): carry the library next to it.
cp "$BUILD/examples/serve/kvc_serve" "$OUT/bin/"
cp -L "$BUILD/lib/libkvc.so.0" "$OUT/bin/"
cp -L "$SYSLIB/libcmocka.so.0" "$SYSLIB/libbenchmark.so.1debian" "$OUT/bin/"
strip --strip-unneeded "$OUT/bin/test_gpu_kernels" "$OUT/bin/test_kernels_capi_cuda" "$OUT/bin/bench_gpu_attention" \
    "$OUT/bin/bench_tiers" "$OUT/bin/kvc_serve" "$OUT/bin/libkvc.so.0"
git -C "$ROOT" rev-parse HEAD > "$OUT/bin/BUILT_FROM_COMMIT"
git -C "$ROOT" status --porcelain -- cuda tests lib >> "$OUT/bin/BUILT_FROM_COMMIT" || true

# The device tool carries at most 64 MiB: drop the optional prebuilt programs (the device normally
# builds everything itself) rather than the ones the GPU tests need.
for optional in bench_tiers kvc_serve libkvc.so.0; do
    [ "$(du -sm "$OUT" | cut -f1)" -le 60 ] && break
    echo "carry over 60 MiB: not carrying prebuilt $optional"
    rm -f "$OUT/bin/$optional"
done
du -sh "$OUT"
if [ "$(du -sm "$OUT" | cut -f1)" -gt 63 ]; then
    echo "prepare_carry: $OUT is over the device tool's 64 MiB carry limit" >&2
    exit 1
fi
echo "ready: run tests/gpu/run_on_device.sh on the device with carry=[\".gpu\"]"
