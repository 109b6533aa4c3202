#!/usr/bin/env bash
# Regenerates the SWIG layer of the Go binding, internal/raw/raw.go and internal/raw/raw_wrap.c,
# from internal/raw/raw.i and include/kvc/kvc.h. The output is checked in, so a Go consumer needs
# only cgo and pkg-config (no SWIG); check_swig_drift.sh proves it is exactly what this produces,
# so the files are never edited by hand. Run it after every change to kvc.h (or raw.i):
#     bash bindings/go/regen.sh
# (the build does the same: `cmake --build <build> --target kvc_go_regen`).
#   usage: regen.sh [OUTDIR]   (default: internal/raw)
# Flags: -cgo -intgosize 64 are what the go tool passed when it ran SWIG itself at build time;
# -module raw names the package. SWIG runs from this directory with relative paths, so the
# "source:" line it writes is the same on every machine.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/internal/raw}"
command -v swig >/dev/null || { echo "regen.sh: swig not found (apt-get install swig)" >&2; exit 1; }
mkdir -p "$out"
cd "$here"
swig -go -cgo -intgosize 64 -module raw -I../../include \
  -outdir "$out" -o "$out/raw_wrap.c" internal/raw/raw.i
