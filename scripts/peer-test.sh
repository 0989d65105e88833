#!/usr/bin/env bash
# make peer-test: runs the Python tt-device-queue's own HTTP server tests
# (tests/test_queue_server.py of the peer's tarball) against queued.
#
# The peer's code stays where it is (../shared/peers): its tarball is
# unpacked into a temporary directory, whose server.py is replaced by the
# stand-in test/peer/server.py, which starts queued. The tests then run with
# the peer's own Python (3.12; the tests do not parse on 3.11), adding only
# queued's bearer token to their requests (test/peer/run_peer_tests.py), and
# the run passes when exactly the tests that docs/switching.md lists under
# "Peer tests that do not pass" fail.
#
# Settings (environment):
#   PEERS        directory of the peer tarball (default ../shared/peers)
#   PEER_PYTHON  Python 3.12 or later (default: pyenv's 3.12, else python3.12)
#   CI           when set, a missing tarball or Python fails the run; on a
#                developer machine without ../shared it is skipped with a note
set -euo pipefail

[[ -f go.mod && -d queued ]] || { echo "peer-test: run me from the repository root (make peer-test does)" >&2; exit 2; }
ROOT=$PWD
GO=${GO:-go}
PEERS=${PEERS:-$ROOT/../shared/peers}
TARBALL=$PEERS/tt-device-queue-1d677f3.tar.gz

unavailable() {
	if [[ -n ${CI:-} ]]; then
		echo "peer-test: FAILED: $*" >&2
		exit 1
	fi
	echo "peer-test: SKIPPED, nothing was tested: $* (with CI set this fails)" >&2
	exit 0
}

[[ -f $TARBALL ]] || unavailable "no peer tarball at $TARBALL (set PEERS to its directory)"

PY=${PEER_PYTHON:-}
if [[ -z $PY ]] && command -v pyenv >/dev/null; then
	for p in "$(pyenv root)"/versions/3.12*/bin/python3.12; do [[ -x $p ]] && PY=$p; done
fi
[[ -n $PY ]] || PY=$(command -v python3.12 || true)
[[ -n $PY ]] || unavailable "no Python 3.12 (install it with pyenv, or set PEER_PYTHON)"
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 12))' ||
	unavailable "$PY is older than 3.12; the peer's tests need 3.12 (set PEER_PYTHON)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ttkit-peer-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/peer" "$WORK/bin" "$WORK/home"
tar -xzf "$TARBALL" -C "$WORK/peer"
cp test/peer/server.py "$WORK/peer/server.py"
"$GO" build -o "$WORK/bin/" ./queued/cmd/queued
echo "peer-test: $(basename "$TARBALL") tests/test_queue_server.py against queued, with $("$PY" --version)"
# A HOME of its own: the jobs' shells read no profile of the machine's.
HOME=$WORK/home TTQ_QUEUED=$WORK/bin/queued "$PY" test/peer/run_peer_tests.py "$WORK/peer" docs/switching.md
