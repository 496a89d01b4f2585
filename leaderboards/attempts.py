"""The spot-check attempts: every attempt recorded (rejections included, with what the submitter is not told), and
the cap on rejected attempts per (weights, submitter), so that a forger cannot re-roll the draw until it misses.

Keyed on :func:`leaderboards.identity.weights_key` (the weights actually re-scored), so aliases, revisions and
path spellings of the same weights share one count. The operator reviews and clears attempts with
``semcal-eval board attempts [--clear WEIGHTS]``.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone

# the cap is a board setting: its default and the stored value are the settings' (leaderboards.db), re-exported here
from .db import DEFAULT_MAX_ATTEMPTS, board_setting
from .errors import SubmissionError

__all__ = ["DEFAULT_MAX_ATTEMPTS", "ATTEMPTS_SCHEMA", "max_attempts", "record_attempt", "attempts", "rejected_attempts",
           "clear_attempts", "check_attempt_cap", "start_attempt", "finish_attempt", "COUNTED"]

#: Rejected spot checks allowed per (weights, submitter) before the board refuses further submissions of those
#: weights from that submitter: :data:`leaderboards.db.DEFAULT_MAX_ATTEMPTS` (3) unless the operator set another
#: (``board config --max-attempts N``). Each submission gets a fresh, unpredictable draw (draw_tag), so over every
#: attempt a forgery is missed with probability 1 - (1 - q)^MAX_ATTEMPTS at most (reach_probability;
#: q = C(N-m, k)/C(N, k) <= MISS_PROB per attempt: <= 2.97 % for 3 attempts).
MAX_CAP = 1000
#: Outcomes that count towards the cap: a rejection, an attempt interrupted after its draw was made, and an
#: attempt still ``started`` (its process was killed, or it is running now): an attempt counts from the moment
#: its draw exists, so Ctrl-C or kill -9 during the re-scoring does not give a free re-roll (issue 43).
COUNTED = ("rejected", "interrupted", "started")


def parse_cap(raw: str) -> int:
    """A cap as the operator writes it: a whole number in 1..:data:`MAX_CAP` (SubmissionError otherwise)."""
    raw = str(raw).strip()
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_CAP:
        raise SubmissionError(f"max attempts {raw[:20]!r} must be a whole number in 1..{MAX_CAP}")
    return int(raw)


def max_attempts(con: sqlite3.Connection | None = None) -> int:
    """Rejected spot checks allowed per (weights, submitter): the board's stored cap (meta ``max_attempts``, set
    by ``board config``), or the default without a board. ``$SEMCAL_BOARD_MAX_ATTEMPTS`` never changes it; set to
    another value it is refused (:func:`leaderboards.db.board_setting`)."""
    if con is None:
        return DEFAULT_MAX_ATTEMPTS
    return parse_cap(board_setting(con, "max_attempts"))


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
    # one statement through execute(), not executescript(), which would COMMIT a caller's open transaction
    con.execute(ATTEMPTS_SCHEMA)
    cols = {r[1] for r in con.execute("PRAGMA table_info(spot_check_attempts)")}
    if "weights" not in cols:  # a table from before issue 34: attempts keyed on the model id only
        con.execute("ALTER TABLE spot_check_attempts ADD COLUMN weights TEXT NOT NULL DEFAULT ''")


def record_attempt(con: sqlite3.Connection, *, model: str, tasks: list[str], doc_sets: list[str],
                   predictions_hash: str, outcome: str, detail: str, submitter: str = "", weights: str = "") -> int:
    """Store one spot-check attempt (every rejection: a mismatch, a filter the task does not produce, a document
    or configuration the re-scoring refutes). ``weights`` is :func:`leaderboards.identity.weights_key`, the key
    the cap counts on; ``detail`` holds what the submitter is not told (the worst document and difference)."""
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
    """Spot checks of these weights by this submitter that count towards the cap (:data:`COUNTED`: rejected,
    interrupted, or started and never finished)."""
    _attempts_table(con)
    return con.execute(f"SELECT COUNT(*) FROM spot_check_attempts WHERE weights = ? AND submitter = ? AND "
                       f"outcome IN ({', '.join('?' * len(COUNTED))})", (weights, submitter, *COUNTED)).fetchone()[0]


def start_attempt(con: sqlite3.Connection, *, model: str, tasks: list[str], doc_sets: list[str],
                  predictions_hash: str, submitter: str, weights: str) -> tuple[int, int]:
    """Check the cap and record the attempt as ``started``, in one ``BEGIN IMMEDIATE`` transaction, committed
    (SQLite syncs the journal) **before** the caller computes the draw: from then on the attempt counts, whether
    it is rejected, interrupted (Ctrl-C) or killed. Two submits racing on the same weights cannot both pass the
    cap. Returns ``(attempt id, attempts counted before this one)``; SubmissionError when the cap is reached."""
    _attempts_table(con)
    con.execute("BEGIN IMMEDIATE")
    try:
        before = check_attempt_cap(con, weights, submitter)
        aid = record_attempt(con, model=model, tasks=tasks, doc_sets=doc_sets, predictions_hash=predictions_hash,
                             outcome="started", detail="{}", submitter=submitter, weights=weights)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return aid, before


def finish_attempt(con: sqlite3.Connection, attempt_id: int, outcome: str, detail: str | None = None) -> None:
    """Close a ``started`` attempt: ``passed``, ``not checked`` (stored self-reported), ``rejected`` or
    ``interrupted`` (the last two count towards the cap). An attempt already closed is left as it is."""
    if detail is None:
        con.execute("UPDATE spot_check_attempts SET outcome = ? WHERE id = ? AND outcome = 'started'",
                    (outcome, attempt_id))
    else:
        con.execute("UPDATE spot_check_attempts SET outcome = ?, detail = ? WHERE id = ? AND outcome = 'started'",
                    (outcome, detail, attempt_id))


def clear_attempts(con: sqlite3.Connection, weights: str, submitter: str | None = None) -> int:
    """Operator: mark the counted attempts (:data:`COUNTED`) of ``weights`` (of one submitter, or all) as cleared,
    which lifts the cap; the rows stay in the table (outcome ``rejected (cleared)``, ``interrupted (cleared)``,
    ...). Returns how many were cleared."""
    _attempts_table(con)
    q = (f"UPDATE spot_check_attempts SET outcome = outcome || ' (cleared)' WHERE weights = ? AND outcome IN "
         f"({', '.join('?' * len(COUNTED))})")
    args: tuple = (weights, *COUNTED)
    if submitter is not None:
        q, args = q + " AND submitter = ?", (*args, submitter)
    return con.execute(q, args).rowcount


def check_attempt_cap(con: sqlite3.Connection, weights: str, submitter: str) -> int:
    """SubmissionError when these weights have used up their rejected attempts for this submitter (checked
    before any re-scoring); else the number of earlier rejections (shown on the entry)."""
    n, cap = rejected_attempts(con, weights, submitter), max_attempts(con)
    if n >= cap:
        raise SubmissionError(
            f"spot check refused: {n} earlier submissions of these weights ({weights[:28]}…) by {submitter} failed "
            f"their spot check or were interrupted during it, and the board allows {cap}; nothing was re-scored. Ask the board operator, who "
            "reviews the attempts (`semcal-eval board attempts`) and can run the model itself (`board evaluate`, "
            "a verified entry) or clear the attempts")
    return n
