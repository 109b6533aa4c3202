#!/usr/bin/env bash
# A Go module outside the tree (tests/consumers/go/main.go, copied to a scratch directory) using
# kvc.dev/kvc through a `replace` directive, built against an *installed* libkvc (kvc.pc) with a PATH
# that has go, a C compiler and pkg-config but no swig: the checked-in SWIG output must be enough.
# Runs it twice: found by the loader through LD_LIBRARY_PATH, and through an rpath (CGO_LDFLAGS).
# Usage: go.sh INSTALL_PREFIX. Env: KVC_CONSUMER_CACHE (Go build cache kept there if set).
set -euo pipefail
PREFIX=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
say() { echo "[consumer go] $*"; }

# The go tool runs with a PATH without swig: only the tools cgo needs.
mkdir -p "$WORK/bin"
for t in go gcc cc as ld ld.bfd pkg-config pkgconf; do
  p=$(command -v "$t" || true)
  if [ -n "$p" ]; then ln -s "$p" "$WORK/bin/$t"; fi
done
nosw() { PATH="$WORK/bin" "$@"; }
if nosw /bin/sh -c 'command -v swig' >/dev/null 2>&1; then say "swig still on PATH"; exit 1; fi

mkdir -p "$WORK/mod"
cp "$HERE/go/main.go" "$WORK/mod/"
cat > "$WORK/mod/go.mod" <<MOD
module example.com/kvc-consumer

go 1.19

require kvc.dev/kvc v0.0.0

// kvc.dev/kvc is not fetchable: point it at a checkout of libkvc (bindings/go).
replace kvc.dev/kvc => $ROOT/bindings/go
MOD
CACHE=${KVC_CONSUMER_CACHE:-$WORK/cache}
export GOCACHE="$CACHE/go-build" GOPATH="$WORK/gopath" GOMODCACHE="$WORK/gopath/pkg/mod" \
  GOPROXY=off GOFLAGS= GO111MODULE=on GOTOOLCHAIN=local GOSUMDB=off CGO_ENABLED=1 \
  PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" HOME="$WORK"
cd "$WORK/mod"

say "build against $PREFIX (pkg-config), no swig on PATH"
# The go tool does not key its cache on the installed header and library (a user runs `go build -a`
# after changing PKG_CONFIG_PATH, bindings/go/README.md). Here a new CGO_CPPFLAGS value each run
# makes every cgo package (kvc.dev/kvc/internal/raw, runtime/cgo) a cache miss: they are compiled
# against this install, and the pure-Go rest stays cached.
export CGO_CPPFLAGS="-DKVC_CONSUMER_RUN=$$_$(date +%s%N)"
nosw go build -o consumer .
LD_LIBRARY_PATH="$PREFIX/lib" ./consumer | tee out1
grep -q "kvc-consumer ok: libkvc" out1

say "build with an rpath to $PREFIX/lib, run with no LD_LIBRARY_PATH"
CGO_LDFLAGS="-Wl,-rpath,$PREFIX/lib" nosw go build -o consumer_rpath .
env -u LD_LIBRARY_PATH ./consumer_rpath | tee out2
grep -q "kvc-consumer ok: libkvc" out2
say "all cases passed"
