#!/usr/bin/env bash
# Static report of the CUDA decode attention kernels, for machines without a GPU (nvcc and ptxas
# only; no cuobjdump/nvdisasm needed). Per decode kernel instantiation: registers and spills
# (ptxas -v), shared memory (the kernel's own shape, printed by a host-side probe), CTAs and warps
# per SM on an H100 (from registers, shared memory and threads), and the SASS instructions one warp
# issues per tile of the decode loop, per K/V byte and per 16 KiB of K/V, with the barriers per
# tile (tests/gpu/sass_loop.py decodes them from the cubin). The headline row (B=64, ctx 4096,
# 32 q / 8 KV heads, d = 128, fp16, block 16) is the f16 d = 128 instantiation with 4 rows per warp.
#
# usage: tests/gpu/kernel_report.sh [--before REF] [--arch sm_90] [--all] [--json FILE]
#   --before REF  also report the decode kernel of git revision REF (its cuda/, include/, lib/ are
#                 exported to a temporary folder), e.g. --before HEAD while cuda/ has changes
#   --all         every instantiation (default: head dim 128 of every dtype, and the f16 family)
# Prints Markdown tables (tests/bench/RESULTS.md keeps one). Takes a few minutes on 2 cores.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
export PATH="/usr/local/cuda/bin:$PATH"
exec python3 "$ROOT/tests/gpu/kernel_report.py" --root "$ROOT" "$@"
