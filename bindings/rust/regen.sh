#!/usr/bin/env bash
# Regenerates kvc-sys/src/bindings.rs from include/kvc/kvc.h with the Debian bindgen CLI (0.60).
# The output is checked in (cargo builds need no libclang); check_bindgen_drift.sh proves it is
# exactly what these flags produce, so the file is never edited by hand.
#   usage: regen.sh [OUTPUT]   (default: kvc-sys/src/bindings.rs)
# Flags, and why:
#   --allowlist-*            only the kvc_ / KVC_ API, not libc's stdint internals' neighbours
#   --default-enum-style consts --no-prepend-enum-name
#                            C enums become an integer type alias plus constants (KVC_OK, ...):
#                            a Rust enum would be undefined behaviour for a value this header
#                            does not know (a newer libkvc may add statuses).
#   --rustfmt-configuration-file
#                            bindgen formats its output with rustfmt; a fixed config keeps the
#                            result independent of rustfmt.toml files around the caller.
#   layout tests are kept: they assert sizes, alignments and offsets of the kvc_* structs, which
#   are fixed by the C ABI of the LP64 targets libkvc supports (checked by `cargo test`).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$here/kvc-sys/src/bindings.rs}"
command -v bindgen >/dev/null || { echo "regen.sh: bindgen not found (apt-get install bindgen)" >&2; exit 1; }
# Without rustfmt bindgen silently writes one unformatted line, which would never match.
command -v rustfmt >/dev/null || { echo "regen.sh: rustfmt not found (rustup component add rustfmt, or apt-get install rustfmt)" >&2; exit 1; }
bindgen "$root/include/kvc/kvc.h" \
  --allowlist-function 'kvc_.*' \
  --allowlist-type 'kvc_.*' \
  --allowlist-var 'KVC_.*' \
  --default-enum-style consts \
  --no-prepend-enum-name \
  --rustfmt-configuration-file "$here/kvc-sys/bindgen-rustfmt.toml" \
  -o "$out" \
  -- -I"$root/include"
