#!/usr/bin/env bash
# Builds interop/go (the Go clients' scenarios, see main.go) into .cache/go/bin/kafka-compat-go:
#     bash interop/go/build.sh
# Idempotent: the build is skipped while a digest of the Go version, go.mod, go.sum and the .go
# files equals the stamp written next to the binary. The modules come from the Go module proxy
# (GOPROXY, default proxy.golang.org) into .cache/go/mod, the build cache is .cache/go/build; both
# are ignored by git, as is the binary. go.mod and go.sum pin every module, so a fresh machine that
# reaches only the module proxy builds exactly what was tested.
#
# The toolchain: $GO, else `go` on PATH, else /usr/local/go/bin/go. Exit status 3 when there is
# none (interop/test_go_clients.py skips then). KAFKA_COMPAT_GO_CACHE moves .cache/go elsewhere.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${KAFKA_COMPAT_GO_CACHE:-$ROOT/.cache/go}"
BIN="$CACHE/bin/kafka-compat-go"
STAMP="$BIN.stamp"

say() { printf '[go] %s\n' "$*"; }

GO="${GO:-$(command -v go || true)}"
if [ -z "$GO" ] && [ -x /usr/local/go/bin/go ]; then
    GO=/usr/local/go/bin/go
fi
if [ -z "$GO" ] || ! command -v "$GO" >/dev/null 2>&1; then
    say "no Go toolchain (\$GO, go on PATH, /usr/local/go/bin/go): nothing built"
    exit 3
fi

mkdir -p "$CACHE/bin"
export GOMODCACHE="$CACHE/mod" GOCACHE="$CACHE/build" GOFLAGS="-mod=mod -buildvcs=false"
cd "$HERE"

# in the module's directory: with GOTOOLCHAIN=auto an older go switches to the one go.mod asks for
version="$("$GO" env GOVERSION GOOS GOARCH | paste -sd' ')"
digest="$({
    printf '%s\n' "$version"
    for f in go.mod go.sum $(LC_ALL=C ls ./*.go); do
        printf '%s\0' "${f#./}"
        cat "$f"
    done
} | sha256sum | cut -d' ' -f1)"

if [ -x "$BIN" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$digest" ]; then
    say "up to date: $BIN ($version)"
    exit 0
fi

say "building $BIN with $version (modules: $GOMODCACHE)"
tmp="$BIN.tmp.$$"
trap 'rm -f "$tmp"' EXIT
"$GO" build -o "$tmp" .
mv -f "$tmp" "$BIN"               # atomic: a concurrent run sees the old binary or the new one
printf '%s\n' "$digest" >"$STAMP"
say "built $BIN"
