#!/usr/bin/env python3
"""A stand-in for a live Python tt-device-queue server, for the import
tests: it uses a database built by make_db.py as the real server.py does
and answers on its port as the real one names itself. Arguments:

  live_server.py DB PORT MODE

DB is the jobs.sqlite3 to use; PORT the loopback port to answer on (0:
none); MODE one of
  hold   keep one connection open (WAL, its -shm locked), as the server
         does while it works
  idle   open the database only for each write, as the real server does
         between requests: an idle server holds nothing
  busy   like idle, and add a queued job every 5 ms, each acknowledged
         on stdout ("ack ID") only once committed

It prints "ready" once listening and stops cleanly on SIGTERM. Run as a
file named server.py beside a queue_core.py it is also found by its
process, as the real server is. Only the standard library is used.
"""
import json
import os
import signal
import sqlite3
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, HTTPServer

path, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
stop = threading.Event()


def connect():
    conn = sqlite3.connect(path, timeout=5, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


class Handler(BaseHTTPRequestHandler):
    server_version = "tt-device-queue/2"

    def log_message(self, *args):
        pass

    def do_GET(self):
        out = os.path.join(os.path.dirname(os.path.abspath(path)), "aaaa0001", "output")
        body = json.dumps({"recent": [{"id": "aaaa0001", "output_file": out}], "pending": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


held = connect() if mode == "hold" else None
if held:
    held.execute("BEGIN")
    held.execute("SELECT count(*) FROM jobs").fetchone()
    held.execute("COMMIT")
httpd = HTTPServer(("127.0.0.1", port), Handler) if port else None


def on_term(*_):
    stop.set()
    if httpd:
        threading.Thread(target=httpd.shutdown, daemon=True).start()


signal.signal(signal.SIGTERM, on_term)


def busy():
    n = 0
    while not stop.is_set():
        n += 1
        job = uuid.uuid4().hex
        conn = connect()
        conn.execute("INSERT INTO jobs (id, cmd, cwd, timeout, repeat, env_json, mode, client_id, submitted, status, "
                     "log_truncated, dropped_log_bytes, updated_at) VALUES (?, 'true', '/', 60, 1, '{}', 'run', 'busy', ?, 'queued', 0, 0, ?)",
                     (job, time.time(), time.time()))
        conn.close()
        print("ack", job, flush=True)
        stop.wait(0.005)


if mode == "busy":
    threading.Thread(target=busy, daemon=True).start()
print("ready", flush=True)
if httpd:
    httpd.serve_forever(poll_interval=0.05)
else:
    stop.wait()
if held:
    held.close()
print("stopped", flush=True)
