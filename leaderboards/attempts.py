"""The spot-check attempts: every attempt recorded (rejections included, with what the submitter is not told), and
the cap on rejected attempts per (weights, submitter), so that a forger cannot re-roll the draw until it misses.

Keyed on :func:`leaderboards.identity.weights_key` (the weights actually re-scored), so aliases, revisions and
path spellings of the same weights share one count. The operator reviews and clears attempts with
``semcal-eval board attempts [--clear WEIGHTS]``.
"""

from __future__ import annotations

import os
import sqlite3

from .errors import SubmissionError

__all__ = ["DEFAULT_MAX_ATTEMPTS", "ATTEMPTS_SCHEMA", "max_attempts", "record_attempt", "attempts", "rejected_attempts",
           "clear_attempts", "check_attempt_cap"]

#: Rejected spot checks allowed per (weights, submitter) before the board refuses further submissions of those
#: weights from that submitter ($SEMCAL_BOARD_MAX_ATTEMPTS). Each submission gets a fresh, unpredictable draw
#: (draw_tag), so over every attempt a forgery is missed with probability 1 - (1 - q)^MAX_ATTEMPTS at most
#: (reach_probability; q = C(N-m, k)/C(N, k) <= MISS_PROB per attempt: <= 2.97 % for 3 attempts).
DEFAULT_MAX_ATTEMPTS = 3


def max_attempts() -> int:
    """Rejected spot checks allowed per (weights, submitter): ``$SEMCAL_BOARD_MAX_ATTEMPTS``, default 3."""
    raw = os.environ.get("SEMCAL_BOARD_MAX_ATTEMPTS", "")
    if not raw:
        return DEFAULT_MAX_ATTEMPTS
    if not raw.isdigit() or not 1 <= int(raw) <= 1000:
        raise SubmissionError(f"$SEMCAL_BOARD_MAX_ATTEMPTS={raw[:20]!r} must be a whole number in 1..1000")
    return int(raw)


ATTEMPTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS spot_check_attempts (
    id INTEGER PRIMARY KEY,
    at TEXT NOT NULL,
    model TEXT NOT NULL,
    tasks TEXT NOT NULL,
    doc_set_hashes TEXT NOT NULL,
    predictions_hash TEXT NOT NULL,
    submitter TEXT NOT NULL DEFAULT '',
    outcome TEXT NOT NULL,
    detail TEXT NOT NULL,
    weights TEXT NOT NULL DEFAULT ''
);
"""
_ATTEMPT_COLS = ("id", "at", "model", "tasks", "doc_set_hashes", "predictions_hash", "submitter", "outcome",
                 "detail", "weights")


def _attempts_table(con: sqlite3.Connection) -> None:
    con.executescript(ATTEMPTS_SCHEMA)
    cols = {r[1] for r in con.execute("PRAGMA table_info(spot_check_attempts)")}
    if "weights" not in cols:  # a table from before issue 34: attempts keyed on the model id only
        con.execute("ALTER TABLE spot_check_attempts ADD COLUMN weights TEXT NOT NULL DEFAULT ''")


def record_attempt(con: sqlite3.Connection, *, model: str, tasks: list[str], doc_sets: list[str],
                   predictions_hash: str, outcome: str, detail: str, submitter: str = "", weights: str = "") -> int:
    """Store one spot-check attempt (every rejection: a mismatch, a filter the task does not produce, a document
    or configuration the re-scoring refutes). ``weights`` is :func:`leaderboards.identity.weights_key`, the key
    the cap counts on; ``detail`` holds what the submitter is not told (the worst document and difference)."""
    from datetime import datetime, timezone

    _attempts_table(con)
    cur = con.execute(
        "INSERT INTO spot_check_attempts (at, model, tasks, doc_set_hashes, predictions_hash, submitter, outcome, "
        "detail, weights) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (datetime.now(timezone.utc).isoformat(timespec="seconds"), model, ",".join(tasks), ",".join(doc_sets),
         predictions_hash, submitter, outcome, detail, weights))
    return cur.lastrowid


def attempts(con: sqlite3.Connection) -> list[dict]:
    """All recorded spot-check attempts, oldest first."""
    _attempts_table(con)
    return [dict(zip(_ATTEMPT_COLS, r))
            for r in con.execute(f"SELECT {', '.join(_ATTEMPT_COLS)} FROM spot_check_attempts ORDER BY id")]


def rejected_attempts(con: sqlite3.Connection, weights: str, submitter: str) -> int:
    """Rejected spot checks recorded for these weights and this submitter (the cap's count)."""
    _attempts_table(con)
    return con.execute("SELECT COUNT(*) FROM spot_check_attempts WHERE weights = ? AND submitter = ? AND "
                       "outcome = 'rejected'", (weights, submitter)).fetchone()[0]


def clear_attempts(con: sqlite3.Connection, weights: str, submitter: str | None = None) -> int:
    """Operator: mark the rejected attempts of ``weights`` (of one submitter, or all) as cleared, which lifts the
    cap; the rows stay in the table (outcome ``rejected (cleared)``). Returns how many were cleared."""
    _attempts_table(con)
    q = "UPDATE spot_check_attempts SET outcome = 'rejected (cleared)' WHERE weights = ? AND outcome = 'rejected'"
    args: tuple = (weights,)
    if submitter is not None:
        q, args = q + " AND submitter = ?", (weights, submitter)
    return con.execute(q, args).rowcount


def check_attempt_cap(con: sqlite3.Connection, weights: str, submitter: str) -> int:
    """SubmissionError when these weights have used up their rejected attempts for this submitter (checked
    before any re-scoring); else the number of earlier rejections (shown on the entry)."""
    n, cap = rejected_attempts(con, weights, submitter), max_attempts()
    if n >= cap:
        raise SubmissionError(
            f"spot check refused: {n} earlier submissions of these weights ({weights[:28]}…) by {submitter} failed "
            f"their spot check, and the board allows {cap}; nothing was re-scored. Ask the board operator, who "
            "reviews the attempts (`semcal-eval board attempts`) and can run the model itself (`board evaluate`, "
            "a verified entry) or clear the attempts")
    return n
