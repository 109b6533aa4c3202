#!/usr/bin/env bash
# Codegen guard: the decode kernels' in-place K/V paths (attend_rows<uint16_t> of the AVX2 and
# AVX-512 variants, lib/cpu/attention_core.inl) must carry software prefetch instructions.
# Nothing else can see their loss: results stay exact and no test times anything. They were lost
# once -- GCC found RowPointers::prefetch_next "pure" (it treats __builtin_prefetch as free of side
# effects) and deleted every call -- and batched decode ran ~1.9x slower for it (prefetch_l2 in
# lib/cpu/simd.hpp, tests/bench/RESULTS.md session 20).
# Usage: prefetch_kept.sh LIBRARY (libkvc.so or libkvc.a with its symbol table)
set -euo pipefail
lib="$1"
command -v objdump >/dev/null || { echo "prefetch_kept: objdump not found (binutils)"; exit 1; }
report=$(objdump -d --no-show-raw-insn -C "$lib" | awk '
  /^[0-9a-f]+ <.*>:$/ { fn = $0; next }
  /prefetch/ && fn ~ /attend_rows<unsigned short>/ { n[fn]++ }
  END { for (f in n) print n[f] }')
funcs=$(objdump -d --no-show-raw-insn -C "$lib" | grep -c '^[0-9a-f]* <.*attend_rows<unsigned short>.*>:$' || true)
with=$(printf '%s\n' "$report" | grep -c '[0-9]' || true)
echo "prefetch_kept: $funcs attend_rows<unsigned short> function(s), $with with prefetch instructions"
if [ "$funcs" -lt 2 ] || [ "$with" -lt "$funcs" ]; then
  echo "prefetch_kept: FAIL: every in-place decode variant (AVX2, AVX-512) must prefetch the next chunk"
  exit 1
fi
