#!/usr/bin/env bash
# A Rust crate outside the tree (tests/consumers/rust, copied to a scratch directory) built against an
# *installed* libkvc every way kvc-sys supports, each run and checked; any packaging break fails it:
#   1. KVC_LIB_DIR given as a *relative* path (kvc-sys must make it absolute), dynamic link;
#   2. pkg-config (PKG_CONFIG_PATH), dynamic link; the binary runs through the ldconfig-free path
#      LD_LIBRARY_PATH;
#   3. the `static` feature through pkg-config --static and through KVC_LIB_DIR: no libkvc.so
#      NEEDED, runs with no LD_LIBRARY_PATH;
#   4. `cargo doc` with DOCS_RS=1 on a machine without libkvc (and without it, the build fails
#      with kvc-sys's message, so the docs case is not passing by accident);
#   5. the minimum Rust version: Debian 12's own rustc 1.63 (/usr/bin/cargo, /usr/bin/rustc).
# Usage: rust.sh INSTALL_PREFIX (installed with -DKVC_INSTALL_STATIC=ON). Env: CARGO_TARGET_DIR
# (reused between runs if set), KVC_REQUIRE_ALL (a missing Debian rustc is then an error).
set -euo pipefail
PREFIX=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
TARGET=${CARGO_TARGET_DIR:-$WORK/target}
unset CARGO_TARGET_DIR KVC_LIB_DIR KVC_INCLUDE_DIR DOCS_RS KVC_SYS_DOCS_ONLY
export PKG_CONFIG_PATH=/nonexistent   # nothing found by accident: each case says where libkvc is
mkdir -p "$WORK/crate/src"
sed "s|@KVC_RUST_DIR@|$ROOT/bindings/rust|" "$HERE/rust/Cargo.toml.in" > "$WORK/crate/Cargo.toml"
cp "$HERE/rust/build.rs" "$WORK/crate/"
cp "$HERE/rust/src/main.rs" "$WORK/crate/src/"
cd "$WORK/crate"
say() { echo "[consumer rust] $*"; }
needs_libkvc_so() { readelf -d "$1" | grep NEEDED | grep -q 'libkvc\.so'; }
expect_ok() { grep -q "kvc-consumer ok: libkvc .*cached, header $PREFIX/include/kvc/kvc.h" "$1" || { cat "$1"; exit 1; }; }

rel=$(python3 -c 'import os,sys; print(os.path.relpath(sys.argv[1]))' "$PREFIX/lib")
say "1. KVC_LIB_DIR=$rel (relative), dynamic"
KVC_LIB_DIR=$rel cargo build --offline --quiet --target-dir "$TARGET/dyn"
needs_libkvc_so "$TARGET/dyn/debug/kvc-consumer" || { say "not linked to libkvc.so"; exit 1; }
LD_LIBRARY_PATH="$PREFIX/lib" "$TARGET/dyn/debug/kvc-consumer" | tee "$WORK/out1"; expect_ok "$WORK/out1"
# Without a loader path the program must not start (it is dynamically linked to the installed copy).
if "$TARGET/dyn/debug/kvc-consumer" >/dev/null 2>&1; then say "ran without LD_LIBRARY_PATH?"; exit 1; fi

say "2. pkg-config, dynamic"
PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" cargo build --offline --quiet --target-dir "$TARGET/pc"
LD_LIBRARY_PATH="$PREFIX/lib" "$TARGET/pc/debug/kvc-consumer" | tee "$WORK/out2"; expect_ok "$WORK/out2"

if [ ! -f "$PREFIX/lib/libkvc.a" ]; then
  [ "${KVC_REQUIRE_ALL:-OFF}" = ON ] && { say "no libkvc.a in $PREFIX/lib (configure with -DKVC_INSTALL_STATIC=ON)"; exit 1; }
  say "3 skipped: no libkvc.a in $PREFIX/lib (configure with -DKVC_INSTALL_STATIC=ON)"
else
say "3a. --features static through pkg-config --static"
PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" cargo build --offline --quiet --features static --target-dir "$TARGET/static-pc"
needs_libkvc_so "$TARGET/static-pc/debug/kvc-consumer" && { say "static build still needs libkvc.so"; exit 1; }
"$TARGET/static-pc/debug/kvc-consumer" | tee "$WORK/out3"; expect_ok "$WORK/out3"
say "3b. --features static through KVC_LIB_DIR"
KVC_LIB_DIR="$PREFIX/lib" cargo build --offline --quiet --features static --target-dir "$TARGET/static-dir"
needs_libkvc_so "$TARGET/static-dir/debug/kvc-consumer" && { say "static build still needs libkvc.so"; exit 1; }
"$TARGET/static-dir/debug/kvc-consumer" | tee "$WORK/out3b"; expect_ok "$WORK/out3b"
fi

say "4. docs without the library (DOCS_RS=1)"
if cargo build --offline --quiet --target-dir "$TARGET/nolib" >"$WORK/nolib.log" 2>&1; then
  say "built without libkvc?"; exit 1
fi
grep -q "kvc-sys: cannot find libkvc" "$WORK/nolib.log" || { cat "$WORK/nolib.log"; exit 1; }
DOCS_RS=1 cargo doc --offline --quiet --target-dir "$TARGET/doc"
[ -f "$TARGET/doc/doc/kvc/struct.Pool.html" ] || { say "no docs for kvc::Pool"; exit 1; }

say "5. minimum Rust version (rust-version = 1.63, Debian 12's rustc)"
if [ -x /usr/bin/cargo ] && [ -x /usr/bin/rustc ]; then
  /usr/bin/rustc --version
  RUSTC=/usr/bin/rustc KVC_LIB_DIR="$PREFIX/lib" /usr/bin/cargo build --offline --quiet --target-dir "$TARGET/msrv"
  LD_LIBRARY_PATH="$PREFIX/lib" "$TARGET/msrv/debug/kvc-consumer" | tee "$WORK/out5"; expect_ok "$WORK/out5"
elif [ "${KVC_REQUIRE_ALL:-OFF}" = ON ]; then
  say "Debian's rustc/cargo (apt-get install rustc cargo) missing: cannot check the minimum version"; exit 1
else
  say "5 skipped: no /usr/bin/cargo + /usr/bin/rustc (apt-get install rustc cargo)"
fi
say "all cases passed"
