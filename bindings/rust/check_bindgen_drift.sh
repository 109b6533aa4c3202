#!/usr/bin/env bash
# Fails when the checked-in kvc-sys/src/bindings.rs differs from a fresh bindgen run over the
# current include/kvc/kvc.h (someone changed the header without running regen.sh, or edited the
# generated file by hand).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$here/regen.sh" "$tmp/bindings.rs"
if ! diff -u "$here/kvc-sys/src/bindings.rs" "$tmp/bindings.rs"; then
  echo "check_bindgen_drift: kvc-sys/src/bindings.rs is stale; run bindings/rust/regen.sh" >&2
  # A different bindgen formats differently; say so rather than blame the header.
  checked_in="$(head -1 "$here/kvc-sys/src/bindings.rs")"
  fresh="$(head -1 "$tmp/bindings.rs")"
  [ "$checked_in" = "$fresh" ] || echo "check_bindgen_drift: generator differs: '$checked_in' vs '$fresh'" >&2
  exit 1
fi
echo "check_bindgen_drift: bindings.rs matches bindgen $(bindgen --version | awk '{print $2}') output"
