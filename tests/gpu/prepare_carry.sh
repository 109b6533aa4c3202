#!/usr/bin/env bash
# Prepares .gpu/ (git-ignored) for a session that gets a GPU machine, which has the CUDA driver,
# nvcc, cmake and Python with PyTorch, but no cmocka, Google Benchmark, xxhash headers or pkg-config:
#   .gpu/bin/     test_gpu_kernels, test_kernels_capi_cuda, bench_gpu_attention, bench_tiers and
#                 kvc_serve (+ libkvc.so.0) prebuilt here with nvcc (sm_90 SASS only: H100/H200;
#                 static cudart; stripped), packed into programs.tar.xz, beside the shared libraries
#                 they need (libcmocka, libbenchmark). Each program carries every kernel (~28 MB
#                 apiece stripped, ~137 MB together: over the device tool's 64 MiB); xz packs them
#                 to ~12 MiB. tests/gpu/quick_check.sh unpacks them to /tmp in a few seconds.
#   .gpu/prefix/  headers, shared libraries, relocatable .pc files and CMake package configs of
#                 cmocka, libxxhash and benchmark (+ a pkg-config binary), for building on the
#                 device with tests/gpu/run_on_device.sh (the slower phase-based procedure).
# Then, in ONE device call (tests/gpu/README.md):
#   run(command="bash tests/gpu/quick_check.sh", carry=[".gpu"], timeout_s=480)
#
# usage: prepare_carry.sh [--emulated]
#   --emulated: the same binaries built with -DKVC_CUDA=EMULATE (the CPU emulator of CUDA) into
#   .gpu-emu/, for rehearsing quick_check.sh here (quick_check.sh --emulated); no prefix.
# KVC_CARRY_BUILD: the build tree to (re)use (default build/carry, or build/emu-quick emulated).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
EMULATED=0
[ "${1:-}" = "--emulated" ] && EMULATED=1
MULTIARCH="$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
SYSLIB="/usr/lib/$MULTIARCH"
PROGRAMS=(test_gpu_kernels test_kernels_capi_cuda bench_gpu_attention bench_tiers kvc_serve)
# The device tool's limit covers the working tree and the carried paths together
# (/work/.library/device/README.md, "the working tree that travels"): keep both under it.
LIMIT_MB=64

# --- prebuilt test and benchmark programs, packed -------------------------------------------------
pack_programs() {  # BUILD_DIR OUT_DIR
    local build="$1" out="$2" stage
    stage="$(mktemp -d)"
    cmake --build "$build" -j2 --target kvc "${PROGRAMS[@]}"
    for p in test_gpu_kernels test_kernels_capi_cuda bench_gpu_attention bench_tiers; do cp "$build/tests/$p" "$stage/"; done
    # kvc_serve links libkvc.so.0 (RUNPATH of the build tree): the library goes next to it, and
    # prefill_vs_sdpa.py loads the same library through KVC_LIB.
    cp "$build/examples/serve/kvc_serve" "$stage/"
    cp -L "$build/lib/libkvc.so.0" "$stage/"
    strip --strip-unneeded "$stage"/*
    mkdir -p "$out/bin"
    # One xz stream over all of them: the kernels they share compress far below their sum.
    tar -C "$stage" -cf - . | xz -6 -T2 >"$out/bin/programs.tar.xz"
    echo "programs: $(du -sm "$stage" | cut -f1) MiB stripped, $(du -sm "$out/bin/programs.tar.xz" | cut -f1) MiB packed"
    # Their shared libraries that a bare image lacks (ldd: everything outside glibc / libstdc++).
    ldd "$stage"/* 2>/dev/null | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
        case "$name" in libc.so* | libm.so* | libstdc++* | libgcc_s* | libpthread* | libdl.so* | librt.so* | libkvc.so*) ;;
            *) cp -L "$path" "$out/bin/$name" ;;
        esac
    done
    {
        git -C "$ROOT" rev-parse HEAD
        git -C "$ROOT" status --porcelain -- cuda tests lib examples || true
        echo "newest glibc symbol needed: $(objdump -T "$stage"/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"
        echo "newest libstdc++ symbol needed: $(objdump -T "$stage"/* 2>/dev/null | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -1)"
    } >"$out/bin/BUILT_FROM_COMMIT"
    rm -rf "$stage"
}

check_size() {  # OUT_DIR
    local carry_kb tree_kb
    carry_kb="$(du -sk "$1" | cut -f1)"
    tree_kb="$(git -C "$ROOT" ls-files -z | (cd "$ROOT" && xargs -0 du -ck 2>/dev/null) | tail -1 | cut -f1)"
    echo "carry $1: $((carry_kb / 1024)) MiB; working tree (tracked files): $((tree_kb / 1024)) MiB; together $(((carry_kb + tree_kb) / 1024)) MiB of $LIMIT_MB"
    if [ $((carry_kb + tree_kb)) -gt $((LIMIT_MB * 1024 - 1024)) ]; then
        echo "prepare_carry: carry + working tree over the device tool's $LIMIT_MB MiB (1 MiB margin for untracked files)" >&2
        exit 1
    fi
}

if [ "$EMULATED" = 1 ]; then
    OUT="$ROOT/.gpu-emu"
    BUILD="${KVC_CARRY_BUILD:-$ROOT/build/emu-quick}"
    rm -rf "$OUT"
    cmake -S "$ROOT" -B "$BUILD" -DKVC_CUDA=EMULATE -DKVC_BUILD_BINDINGS=OFF -DKVC_BUILD_EXAMPLES=ON -DKVC_BUILD_BENCH=ON \
        -DCMAKE_BUILD_TYPE=Release >/dev/null
    pack_programs "$BUILD" "$OUT"
    check_size "$OUT"
    echo "ready: OUT=/tmp/quick-out tests/gpu/quick_check.sh --emulated"
    exit 0
fi

OUT="$ROOT/.gpu"
PREFIX="$OUT/prefix"
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

# --- prebuilt test and benchmark programs (sm_90 SASS only) --------------------------------------
BUILD="${KVC_CARRY_BUILD:-$ROOT/build/carry}"
cmake -S "$ROOT" -B "$BUILD" -DKVC_CUDA=ON -DKVC_BUILD_BINDINGS=OFF -DKVC_BUILD_EXAMPLES=ON \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90-real \
    -DCMAKE_CXX_FLAGS="-isystem /usr/local/cuda/include" >/dev/null
pack_programs "$BUILD" "$OUT"
check_size "$OUT"
echo "ready: one device call, run(command=\"bash tests/gpu/quick_check.sh\", carry=[\".gpu\"], timeout_s=480)"
