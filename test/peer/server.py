#!/usr/bin/env python3
"""Stand-in for the Python tt-device-queue's server.py: starts queued instead.

make peer-test (scripts/peer-test.sh) runs the Python tool's own server tests
(tests/test_queue_server.py) against queued. Those tests start
REPO_ROOT/server.py with the test's interpreter and the tool's settings in the
environment, then talk HTTP to 127.0.0.1:$TT_DEVICE_PORT. This file takes the
place of that server.py in a temporary copy of the tool's tree: it replaces
itself (exec) with queued, so the process the tests stop, or kill with
SIGKILL, is queued itself.

Settings pass through unchanged, with three exceptions, each a name the two
tools spell differently:
  - TT_DEVICE_IDS defaults to 0: the Python tool at this commit serves one card.
  - TT_DEVICE_STOP_GRACE_SEC (seconds, fractions allowed) becomes
    TT_DEVICE_KILL_GRACE (whole seconds, rounded up).
  - The state directory is TT_DEVICE_LOG_DIR in both.
The bearer token is added on the client side (see run_peer_tests.py): this
file writes where queued keeps it, under $TTQ_PEER_TOKENS/<port>, so the
tests' requests to that port can carry it.
"""

import math
import os
import sys


def main() -> None:
    queued = os.environ.get("TTQ_QUEUED")
    if not queued:
        sys.exit("server.py (queued stand-in): TTQ_QUEUED must name the queued binary")
    env = dict(os.environ)
    env.setdefault("TT_DEVICE_IDS", "0")
    grace = env.pop("TT_DEVICE_STOP_GRACE_SEC", "")
    if grace and "TT_DEVICE_KILL_GRACE" not in env:
        env["TT_DEVICE_KILL_GRACE"] = str(math.ceil(float(grace)))
    port = env.get("TT_DEVICE_PORT", "5741")
    tokens = env.get("TTQ_PEER_TOKENS")
    state = env.get("TT_DEVICE_LOG_DIR")
    if tokens and state:
        with open(os.path.join(tokens, port), "w", encoding="utf-8") as f:
            f.write(os.path.abspath(state))
    sys.stdout.flush()
    os.execve(queued, [queued], env)


if __name__ == "__main__":
    main()
