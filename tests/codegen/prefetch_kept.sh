#!/usr/bin/env bash
# Codegen guard: the decode kernels' in-place K/V paths (attend_rows<uint16_t> of the AVX2 and
# AVX-512 variants, lib/cpu/attention_core.inl) must carry software prefetch instructions.
# Nothing else can see their loss: results stay exact and no test times anything. They were lost
# once -- GCC found RowPointers::prefetch_next "pure" (it treats __builtin_prefetch as free of side
# effects) and deleted every call -- and batched decode ran ~1.9x slower for it (lib/prefetch.hpp,
# tests/bench/RESULTS.md session 20).
# Usage: prefetch_kept.sh LIBRARY (libkvc.so or libkvc.a with its symbol table)
set -euo pipefail
lib="$1"
command -v objdump >/dev/null || { echo "prefetch_kept: objdump not found (binutils)"; exit 1; }
# One pass over the disassembly: "funcs with": the attend_rows<unsigned short> functions, and how
# many of them contain a prefetch instruction.
read -r funcs with < <(objdump -d --no-show-raw-insn -C "$lib" | awk '
  /^[0-9a-f]+ <.*>:$/ { fn = $0; if (fn ~ /attend_rows<unsigned short>/) f[fn] = 1; next }
  /prefetch/ && (fn in f) { p[fn] = 1 }
  END { nf = 0; np = 0; for (x in f) nf++; for (x in p) np++; print nf, np }')
echo "prefetch_kept: $funcs attend_rows<unsigned short> function(s), $with with prefetch instructions"
if [ "$funcs" -lt 2 ] || [ "$with" -lt "$funcs" ]; then
  echo "prefetch_kept: FAIL: every in-place decode variant (AVX2, AVX-512) must prefetch the next chunk"
  exit 1
fi
