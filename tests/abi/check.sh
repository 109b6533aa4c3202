#!/usr/bin/env bash
# ABI guard: compares libkvc.so with the committed baseline tests/abi/libkvc.so.0.abi (abidiff from
# Debian's abigail-tools). Fails on an incompatible change unless the SONAME major was bumped;
# compatible additions (new kvc_* functions, fields appended to struct_size-versioned structs, new
# enumerators) pass and are printed.
#
#   tests/abi/check.sh [path/to/libkvc.so]   check (builds build/abi first when no library is given)
#   tests/abi/check.sh --update [lib.so]     regenerate the baseline (see tests/abi/README.md)
#
# The library needs DWARF (-g: RelWithDebInfo or Debug).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BASELINE="$HERE/libkvc.so.0.abi"
HEADERS="$ROOT/include/kvc"

update=0
if [ "${1:-}" = "--update" ]; then update=1; shift; fi
LIB="${1:-}"
if [ -z "$LIB" ]; then
  BUILD="$ROOT/build/abi"
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVC_CUDA=OFF -DKVC_BUILD_TESTS=OFF \
    -DKVC_BUILD_BINDINGS=OFF -DKVC_BUILD_BENCH=OFF -DKVC_BUILD_EXAMPLES=OFF >/dev/null
  cmake --build "$BUILD" -j"${KVC_JOBS:-2}" --target kvc >/dev/null
  LIB="$BUILD/lib/libkvc.so"
fi
LIB=$(readlink -f "$LIB")
for tool in abidw abidiff readelf; do
  command -v "$tool" >/dev/null || { echo "abi: $tool not found (Debian package abigail-tools / binutils)"; exit 1; }
done
readelf -S "$LIB" | grep -q '\.debug_info' || { echo "abi: $LIB has no DWARF; build with -g (RelWithDebInfo)"; exit 1; }

# The compat rule "fields appended at the end are compatible" (compat.suppr) is sound only for
# struct_size-versioned structs: every public struct must start with struct_size.
bad_structs=$(awk '/^typedef struct kvc_[a-z0-9_]+ \{/ {name=$3; getline; if ($0 !~ /^ *uint32_t struct_size;/) print name}' \
  "$HEADERS/kvc.h")
if [ -n "$bad_structs" ]; then
  echo "abi: public structs not starting with 'uint32_t struct_size;': $bad_structs"
  echo "abi: (appending fields to them would break callers; version them like kvc_stats)"
  exit 1
fi

soname_of_lib() { readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p'; }
major_of() { echo "$1" | sed -n 's/^libkvc\.so\.\([0-9][0-9]*\).*/\1/p'; }

if [ "$update" = 1 ]; then
  abidw --headers-dir "$HEADERS" --drop-private-types --suppressions "$HERE/public.suppr" \
    --no-corpus-path --no-comp-dir-path --short-locs --out-file "$BASELINE" "$LIB"
  echo "abi: baseline regenerated from $LIB ($(soname_of_lib "$LIB"), $(grep -c '<function-decl' "$BASELINE") functions)"
  exit 0
fi

[ -f "$BASELINE" ] || { echo "abi: no baseline $BASELINE (run tests/abi/check.sh --update)"; exit 1; }
base_soname=$(sed -n "s/.*<abi-corpus[^>]*soname='\([^']*\)'.*/\1/p" "$BASELINE" | head -1)
new_soname=$(soname_of_lib "$LIB")
echo "abi: baseline $base_soname, candidate $new_soname ($LIB)"

set +e
report=$(abidiff --headers-dir2 "$HEADERS" --drop-private-types \
  --suppressions "$HERE/public.suppr" --suppressions "$HERE/compat.suppr" "$BASELINE" "$LIB" 2>&1)
rc=$?
set -e
echo "$report" | sed 's/^/  /'
if [ $((rc & 3)) -ne 0 ]; then echo "abi: abidiff failed to run (exit $rc)"; exit 1; fi

# abidiff sets bit 8 (ABIDIFF_ABI_INCOMPATIBLE_CHANGE) only for removals; a changed signature or a
# reordered struct is bit 4 with "N Changed" in the summary. Both break callers.
incompatible=0
[ $((rc & 8)) -ne 0 ] && incompatible=1
if [ $((rc & 4)) -ne 0 ]; then
  echo "$report" | grep -Eq 'changes summary: ([1-9][0-9]*) Removed|, ([1-9][0-9]*) Changed' && incompatible=1
fi
if [ "$incompatible" = 1 ]; then
  if [ "$(major_of "$new_soname")" != "$(major_of "$base_soname")" ]; then
    echo "abi: incompatible changes, but the SONAME major moved ($base_soname -> $new_soname): allowed;"
    echo "abi: regenerate the baseline (tests/abi/check.sh --update) in the same commit"
    exit 0
  fi
  echo "abi: FAIL: incompatible ABI change without a SONAME major bump (see the report above;"
  echo "abi: tests/abi/README.md explains what to do)"
  exit 1
fi
if [ $((rc & 4)) -ne 0 ]; then
  echo "abi: ok: compatible additions only (listed above)"
else
  echo "abi: ok: no ABI change"
fi
