#!/usr/bin/env python3
"""Runs the Python tt-device-queue's server tests against queued.

Usage: run_peer_tests.py ROOT DOC

ROOT is a temporary copy of the Python tool's tree whose server.py is the
stand-in that starts queued (test/peer/server.py); DOC is docs/switching.md,
whose table "Peer tests that do not pass" lists, with the reason, every test
expected to fail. The only thing added to the tests' requests is queued's
bearer token (see add_token). The run fails when a test fails that the table
does not list, or when a listed test passes (the table must then be updated),
so the documentation and the results cannot drift apart.
"""

import os
import re
import sys
import tempfile
import unittest
import urllib.parse
import urllib.request

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def token_for(tokens_dir: str, port: int | None) -> str | None:
    """The token of the queued listening on port, from the state directory
    the stand-in recorded for that port; None before queued has written it."""
    if port is None:
        return None
    try:
        with open(os.path.join(tokens_dir, str(port)), encoding="utf-8") as f:
            state = f.read().strip()
        with open(os.path.join(state, "token"), encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None


def add_token(tokens_dir: str) -> None:
    """Wraps urllib.request.urlopen so that every request to a loopback port
    carries Authorization: Bearer <that queued's token>. Nothing else of a
    request is changed."""
    original = urllib.request.urlopen

    def urlopen(url, *args, **kwargs):
        request = url if isinstance(url, urllib.request.Request) else urllib.request.Request(url)
        parsed = urllib.parse.urlsplit(request.full_url)
        if parsed.hostname in LOOPBACK and not request.has_header("Authorization"):
            token = token_for(tokens_dir, parsed.port)
            if token:
                request.add_header("Authorization", "Bearer " + token)
        return original(request, *args, **kwargs)

    urllib.request.urlopen = urlopen


def documented_failures(doc: str) -> dict[str, str]:
    """The tests the table under "Peer tests that do not pass" lists, with
    their reasons."""
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^#+ Peer tests that do not pass\s*$(.*?)(?=^#+ |\Z)", text, re.M | re.S)
    if not m:
        sys.exit(f"{doc}: no section 'Peer tests that do not pass'")
    out = {}
    for row in re.finditer(r"^\|\s*`(test_\w+)`\s*\|(.*)\|\s*$", m.group(1), re.M):
        out[row.group(1)] = row.group(2).strip()
    return out


def main() -> int:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    root, doc = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    expected = documented_failures(doc)
    with tempfile.TemporaryDirectory(prefix="ttq-peer-tokens-") as tokens:
        os.environ["TTQ_PEER_TOKENS"] = tokens
        add_token(tokens)
        sys.path.insert(0, root)
        suite = unittest.defaultTestLoader.loadTestsFromName("tests.test_queue_server")
        result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    failed = {t.id().rsplit(".", 1)[-1] for t, _ in result.failures + result.errors}
    total = result.testsRun - len(result.skipped)
    print(f"\npeer tests against queued: {total - len(failed)}/{total} pass")
    for name in sorted(failed & expected.keys()):
        print(f"  does not pass, as documented: {name}: {expected[name]}")
    code = 0
    for name in sorted(failed - expected.keys()):
        print(f"  FAILS and {os.path.basename(doc)} does not list it: {name}")
        code = 1
    for name in sorted(expected.keys() - failed):
        print(f"  PASSES but {os.path.basename(doc)} lists it as not passing: {name}; update the table")
        code = 1
    return code


if __name__ == "__main__":
    sys.exit(main())
