#!/usr/bin/env bash
# Fails when the checked-in SWIG output (internal/raw/raw.go, internal/raw/raw_wrap.c) differs from
# a fresh regen.sh run over the current include/kvc/kvc.h and internal/raw/raw.i: someone changed
# the header (e.g. added a function) without regenerating, or edited the generated files by hand.
# Also checks that the Go module's LICENSE is the repository's.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$here/regen.sh" "$tmp"
status=0
for f in raw.go raw_wrap.c; do
  if ! diff -u "$here/internal/raw/$f" "$tmp/$f" > "$tmp/$f.diff"; then
    head -n 40 "$tmp/$f.diff"
    echo "check_swig_drift: internal/raw/$f is stale or hand-edited; regenerate with: bash bindings/go/regen.sh" >&2
    status=1
  fi
done
if [ "$status" -ne 0 ]; then
  # Another SWIG version writes other code; say so rather than blame the header.
  checked_in="$(sed -n 3p "$here/internal/raw/raw.go")"; fresh="$(sed -n 3p "$tmp/raw.go")"
  [ "$checked_in" = "$fresh" ] || echo "check_swig_drift: SWIG differs: '$checked_in' (checked in) vs '$fresh' (here)" >&2
  exit 1
fi
cmp -s "$here/LICENSE" "$here/../../LICENSE" || { echo "check_swig_drift: bindings/go/LICENSE differs from LICENSE; copy it" >&2; exit 1; }
echo "check_swig_drift: internal/raw matches $(swig -version | awk '/SWIG Version/ {print "SWIG " $3}') output"
