"""SQLite store of the leaderboard (stdlib ``sqlite3``).

One submission is written in one ``BEGIN IMMEDIATE … COMMIT`` transaction, so a crash or a kill at
any point leaves the database exactly as it was before (SQLite's rollback journal). Submissions are
identified by the sha256 of their canonicalised inputs (what was measured, not when), so submitting
the same run twice is caught with a clear error.

The database path is ``--db PATH``, else ``$SEMCAL_BOARD_DB``, else ``<user data dir>/semcal/leaderboard.sqlite``
(``$XDG_DATA_HOME`` or ``~/.local/share`` on Linux, ``~/Library/Application Support`` on macOS,
``%LOCALAPPDATA%`` on Windows).
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from .errors import SubmissionError
from .recompute import Submission

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY,
    content_hash TEXT NOT NULL UNIQUE,
    model_name TEXT NOT NULL,
    method TEXT NOT NULL,
    submitted_at TEXT NOT NULL,
    limit_json TEXT NOT NULL,
    provenance TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY,
    submission_id INTEGER NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
    task TEXT NOT NULL,
    task_version TEXT NOT NULL,
    filter TEXT NOT NULL,
    kind TEXT NOT NULL,
    is_reference INTEGER NOT NULL,
    n_docs INTEGER NOT NULL,
    n_original INTEGER NOT NULL,
    doc_set_hash TEXT NOT NULL,
    reported TEXT NOT NULL,
    board TEXT NOT NULL,
    conf BLOB NOT NULL,
    correct BLOB NOT NULL,
    degenerate TEXT NOT NULL,
    UNIQUE (submission_id, task, filter)
);
CREATE INDEX IF NOT EXISTS entries_task ON entries(task);
"""


def default_db_path() -> Path:
    """``$SEMCAL_BOARD_DB`` or ``<user data dir>/semcal/leaderboard.sqlite``."""
    env = os.environ.get("SEMCAL_BOARD_DB")
    if env:
        return Path(env)
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "semcal" / "leaderboard.sqlite"


def _json(obj) -> str:
    # NaN is not JSON; store it as null and turn it back into NaN on reading (see _floats).
    def fix(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [fix(x) for x in v]
        return v

    return json.dumps(fix(obj), sort_keys=True, allow_nan=False, ensure_ascii=False, default=str)


def _floats(d: dict) -> dict:
    return {k: (float("nan") if v is None else float(v) if v in ("inf", "-inf") else v) for k, v in d.items()}


def connect(path: str | Path) -> sqlite3.Connection:
    """Open (creating if needed) the board database; autocommit mode, transactions are explicit."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(p, isolation_level=None, timeout=30)
    con.execute("PRAGMA foreign_keys = ON")
    con.executescript(_SCHEMA)
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        con.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
    elif int(row[0]) != SCHEMA_VERSION:
        raise SubmissionError(f"{p}: board schema version {row[0]}, this semcal expects {SCHEMA_VERSION}")
    return con


def insert(con: sqlite3.Connection, sub: Submission, model_name: str, method: str) -> int:
    """Store a validated submission in one transaction; return its id. Duplicate → SubmissionError."""
    dup = con.execute(
        "SELECT id, model_name, method, submitted_at FROM submissions WHERE content_hash = ?", (sub.content_hash,)
    ).fetchone()
    if dup:
        raise SubmissionError(
            f"duplicate submission: these results (sha256 {sub.content_hash[:16]}…) were already submitted as "
            f"#{dup[0]} ({dup[1]!r}, method {dup[2]}, at {dup[3]})"
        )
    con.execute("BEGIN IMMEDIATE")
    try:
        cur = con.execute(
            "INSERT INTO submissions (content_hash, model_name, method, submitted_at, limit_json, provenance) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                sub.content_hash,
                model_name,
                method,
                datetime.now(timezone.utc).isoformat(timespec="seconds"),
                _json(sub.limit),
                _json(sub.provenance),
            ),
        )
        sid = cur.lastrowid
        for e in sub.entries:
            con.execute(
                "INSERT INTO entries (submission_id, task, task_version, filter, kind, is_reference, n_docs, "
                "n_original, doc_set_hash, reported, board, conf, correct, degenerate) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sid, e.task, e.task_version, e.filter, e.kind, int(e.is_reference), e.n_docs, e.n_original,
                    e.doc_set_hash, _json(e.reported), _json(e.board),
                    np.asarray(e.conf, dtype="<f8").tobytes(), np.asarray(e.correct, dtype="<f8").tobytes(),
                    e.degenerate,
                ),
            )
        con.execute("COMMIT")
    except sqlite3.IntegrityError as e:
        con.execute("ROLLBACK")
        # a concurrent submit of the same run won the race between our check and our insert
        raise SubmissionError(f"duplicate submission: sha256 {sub.content_hash[:16]}… is already stored ({e})") from e
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return sid


def load_entries(con: sqlite3.Connection) -> list[dict]:
    """All entries joined with their submission, as plain dicts (board metrics with NaN restored)."""
    rows = con.execute(
        "SELECT e.id, e.task, e.task_version, e.filter, e.kind, e.is_reference, e.n_docs, e.n_original, "
        "e.doc_set_hash, e.reported, e.board, e.conf, e.correct, e.degenerate, s.id, s.content_hash, "
        "s.model_name, s.method, s.submitted_at, s.limit_json, s.provenance "
        "FROM entries e JOIN submissions s ON s.id = e.submission_id ORDER BY e.task, s.id, e.filter"
    ).fetchall()
    out = []
    for r in rows:
        out.append(
            {
                "entry_id": r[0], "task": r[1], "task_version": r[2], "filter": r[3], "kind": r[4],
                "is_reference": bool(r[5]), "n_docs": r[6], "n_original": r[7], "doc_set_hash": r[8],
                "reported": _floats(json.loads(r[9])), "board": _floats(json.loads(r[10])),
                "conf": np.frombuffer(r[11], dtype="<f8"), "correct": np.frombuffer(r[12], dtype="<f8"),
                "degenerate": r[13], "submission_id": r[14], "content_hash": r[15], "model_name": r[16],
                "method": r[17], "submitted_at": r[18], "limit": json.loads(r[19]),
                "provenance": json.loads(r[20]),
            }
        )
    return out


def list_submissions(con: sqlite3.Connection) -> list[tuple]:
    """(id, model_name, method, submitted_at, n_entries, tasks) per submission."""
    return con.execute(
        "SELECT s.id, s.model_name, s.method, s.submitted_at, COUNT(e.id), GROUP_CONCAT(DISTINCT e.task) "
        "FROM submissions s LEFT JOIN entries e ON e.submission_id = s.id GROUP BY s.id ORDER BY s.id"
    ).fetchall()
