#!/usr/bin/env python3
"""Builds a database laid out as the Python tt-device-queue's jobs.sqlite3,
for the import tests. Reads a JSON spec on stdin:

  path          the file to create (its directory must exist)
  user_version  PRAGMA user_version (2 for the tool's current layout, 1
                for the previous release's, bb03448, whose jobs table is
                the same and whose device_state the current tool rebuilds
                with its constraints; 3 for a newer one)
  layout        "pre-v2" for the original layout the tool refuses: jobs
                without seq, status, log_truncated and dropped_log_bytes
  card_column   "device_id", "device" or null (the single-card generation)
  card_type     "INTEGER" or "TEXT", the card column's declared type
  rows          jobs rows: objects of column -> value (seq is assigned)
  device_state  device_state rows (singleton = 1 unless a card column)
  keep_wal      leave the last commits in jobs.sqlite3-wal, as a tool that
                was killed leaves them, instead of checkpointing on close

Only the standard library's sqlite3 module is used.
"""
import json
import os
import sqlite3
import sys

spec = json.load(sys.stdin)
card = spec.get("card_column")
ctype = spec.get("card_type", "INTEGER")
v1 = spec.get("layout") == "pre-v2"
uv = spec.get("user_version", 0 if v1 else 2)

cols = [
    ("seq", "INTEGER PRIMARY KEY AUTOINCREMENT"), ("id", "TEXT UNIQUE NOT NULL"),
    ("cmd", "TEXT NOT NULL"), ("cwd", "TEXT"), ("timeout", "INTEGER"), ("repeat", "INTEGER"),
    ("env_json", "TEXT"), ("mode", "TEXT"), ("client_id", "TEXT"), ("reset_epoch", "INTEGER"),
    ("submitted", "REAL"), ("status", "TEXT"), ("exit_code", "INTEGER"), ("elapsed", "REAL"),
    ("output_file", "TEXT"), ("started_at", "REAL"), ("finished_at", "REAL"),
    ("repeat_current", "INTEGER"), ("repeat_completed", "INTEGER"),
    ("first_iteration_elapsed", "REAL"), ("per_iter_estimate_sec", "REAL"),
    ("stop_requested_at", "REAL"), ("stop_escalated_at", "REAL"), ("log_size", "INTEGER"),
    ("log_truncated", "INTEGER"), ("dropped_log_bytes", "INTEGER"), ("timed_out", "INTEGER"),
    ("error", "TEXT"), ("updated_at", "REAL"),
]
if v1:
    cols = [c for c in cols if c[0] not in ("seq", "status", "log_truncated", "dropped_log_bytes")]
if card:
    cols.append((card, ctype))

db = sqlite3.connect(spec["path"], isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
if spec.get("keep_wal"):
    db.execute("PRAGMA wal_autocheckpoint=0")
db.execute("CREATE TABLE jobs (%s)" % ", ".join("%s %s" % c for c in cols))
if not v1:
    db.execute("CREATE INDEX jobs_status_seq ON jobs(status, seq)")
db.execute("CREATE INDEX jobs_finished ON jobs(finished_at DESC)")
if card:
    state_cols = [card + " " + ctype + " PRIMARY KEY"]
elif uv == 1:
    state_cols = ["singleton INTEGER PRIMARY KEY"]
else:
    state_cols = ["singleton INTEGER PRIMARY KEY CHECK (singleton = 1)"]
state_cols += ["state TEXT", "reset_epoch INTEGER", "reset_pending INTEGER", "boot_id TEXT",
               "last_reset_at REAL", "dead_since REAL", "dead_reason TEXT", "updated_at REAL"]
db.execute("CREATE TABLE device_state (%s)" % ", ".join(state_cols))
db.execute("PRAGMA user_version=%d" % uv)


def insert(table, row):
    names = [n for n in row if n]
    db.execute("INSERT INTO %s (%s) VALUES (%s)" % (table, ", ".join(names), ", ".join("?" * len(names))),
               [row[n] for n in names])


for row in spec.get("device_state", []):
    if not card:
        row = dict(row, singleton=1)
    insert("device_state", row)
# The first rows are checkpointed into the main file; with keep_wal the
# rest stay in the WAL.
rows = spec.get("rows", [])
half = len(rows) // 2 if spec.get("keep_wal") else len(rows)
for row in rows[:half]:
    insert("jobs", row)
if spec.get("keep_wal"):
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
for row in rows[half:]:
    insert("jobs", row)
os.chmod(spec["path"], 0o600)
if spec.get("keep_wal"):
    # Exit without closing: the WAL keeps the newest commits.
    sys.stdout.flush()
    os._exit(0)
db.close()
