#!/usr/bin/env bash
# build-queued.sh DIR [GO] — builds queued, queued-exec and tt-device-queue
# into DIR, from the module root. queued-exec's C start (start.c) is
# linked statically, which needs the static C library (libc6-dev on
# Debian and Ubuntu, glibc-static on Fedora); where that link fails, the
# Go helper is built instead (CGO_ENABLED=0), with a note that says why:
# the same steps, a few milliseconds slower to start a job. The second
# argument names the go command (default: $GO, else go).
set -euo pipefail
dir=${1:?usage: build-queued.sh DIR [GO]}
GO=${2:-${GO:-go}}
"$GO" build -o "$dir/" ./queued/cmd/queued ./queued/cmd/tt-device-queue
if ! out=$("$GO" build -o "$dir/" ./queued/cmd/queued-exec 2>&1); then
	CGO_ENABLED=0 "$GO" build -o "$dir/" ./queued/cmd/queued-exec
	echo "build-queued: queued-exec's C start did not build, so it takes its steps in Go (install the static C library for the faster start):" >&2
	printf '%s\n' "$out" | sed 's/^/  /' >&2
fi
