"""SQLite store of the leaderboard (stdlib ``sqlite3``).

One submission is written in one ``BEGIN IMMEDIATE … COMMIT`` transaction, so a crash or a kill at
any point leaves the database exactly as it was before (SQLite's rollback journal). Submissions are
identified by their ``predictions_hash`` (a hash of the canonical per-document records, see
:mod:`leaderboards.recompute`), so the same predictions submitted again, whatever else was edited, are caught
with a clear error; so are predictions within :data:`DUP_ATOL` of a stored submission's on the same documents.

Schema version 2 (issue 12) adds the trust tier and how it was established (``tier``, ``verification``), the
predictions hash, and per entry the split, its board-computed true size and the coverage. A version-1 file is
refused with the way to rebuild it.

The database path is ``--db PATH``, else ``$SEMCAL_BOARD_DB``, else ``<user data dir>/semcal/leaderboard.sqlite``
(``$XDG_DATA_HOME`` or ``~/.local/share`` on Linux, ``~/Library/Application Support`` on macOS,
``%LOCALAPPDATA%`` on Windows).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import secrets
import sqlite3
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from .errors import SubmissionError
from .identity import model_identity, parse_model_args
from .recompute import Submission
from .registry import DERIVED_FILTERS
from .tolerance import TOLERANCE

SCHEMA_VERSION = 3
TIERS = ("verified", "spot-checked", "self-reported")
#: Two submissions whose every model row has top-label confidences within this of a stored submission's rows
#: (same task, same documents, same correctness) are one measurement: the spot check's own tolerance, so two
#: runs the spot check cannot tell apart are duplicates (issue 25).
DUP_ATOL = TOLERANCE
#: Rows fitted or chosen across the run's documents (the rows table's): they amplify a tolerance-sized edit of
#: their source row (constrained_ts turned 6.5e-6 into 5.4e-5, issue 34), so the near-duplicate test compares
#: only the raw, per-document rows.

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY,
    content_hash TEXT NOT NULL UNIQUE,
    predictions_hash TEXT NOT NULL UNIQUE,
    model_name TEXT NOT NULL,
    method TEXT NOT NULL,
    submitted_at TEXT NOT NULL,
    limit_json TEXT NOT NULL,
    provenance TEXT NOT NULL,
    model_args TEXT NOT NULL DEFAULT '',
    tier TEXT NOT NULL CHECK (tier IN ('verified', 'spot-checked', 'self-reported')),
    verification TEXT NOT NULL,
    submitter TEXT NOT NULL DEFAULT '',
    model_id TEXT NOT NULL DEFAULT '',
    revision TEXT NOT NULL DEFAULT '',
    label TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS submitters (
    name TEXT PRIMARY KEY,
    token_sha256 TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL
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
    split TEXT,
    n_split INTEGER,
    coverage TEXT CHECK (coverage IN ('full', 'partial')),
    predictions_hash TEXT NOT NULL,
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


def _floats(d):
    if not isinstance(d, dict):
        return None  # a corrupted stored column: the site leaves that submission out (leaderboards.site)
    return {k: (float("nan") if v is None else float(v) if v in ("inf", "-inf") else v) for k, v in d.items()}


def _f8(blob):
    """A stored little-endian float64 vector, or None when the blob is not one (see :func:`_stored_json`)."""
    try:
        return np.frombuffer(blob, dtype="<f8")
    except (TypeError, ValueError):
        return None


def _stored_json(text):
    """A stored JSON column, or None when it cannot be decoded (edited by hand, truncated, nested too deep):
    one bad row must not stop ``load_entries`` and with it every later render."""
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return None


#: Suffixes of SQLite's side files (rollback journal, WAL, shared memory): they hold pages of the database,
#: secret included, so they are held to the same permissions as the file itself.
_SIDE_FILES = ("-journal", "-wal", "-shm")


def check_private(p: Path) -> None:
    """SubmissionError when the board file ``p`` (or one of its SQLite side files) can be read or written by
    anyone but its owner: it holds the spot-check secret and the attempt store (docs/LEADERBOARD.md, "Threat
    model"). The board refuses to run rather than widen who can compute the draw."""
    for f in (p, *(Path(str(p) + s) for s in _SIDE_FILES)):
        try:
            mode = os.stat(f).st_mode
        except FileNotFoundError:
            continue
        if mode & 0o077:
            raise SubmissionError(
                f"{f}: the board database is accessible to other users (mode {mode & 0o777:04o}); it holds the "
                f"spot-check secret and the attempt store, so the board refuses to use it: run `chmod 600 {f}` "
                "(and check who could have read it: if anyone did, retire the secret)")


def _create_private(p: Path) -> None:
    """Create an empty board file readable and writable by its owner only (0600, whatever the umask); SQLite
    gives its journal files the database's own mode."""
    if not p.parent.exists():
        p.parent.mkdir(parents=True, mode=0o700)
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except FileExistsError:
        return  # created meanwhile (another board command): check_private judges it
    os.fchmod(fd, 0o600)  # O_CREAT's mode is masked by the umask; 0600 is the point
    os.close(fd)


def connect(path: str | Path) -> sqlite3.Connection:
    """Open (creating if needed, mode 0600) the board database; autocommit mode, transactions are explicit.
    A database (or SQLite side file) that others can access is refused (:func:`check_private`)."""
    p = Path(path)
    created = not p.exists()
    if created:
        _create_private(p)
    check_private(p)
    con = sqlite3.connect(p, isolation_level=None, timeout=30)
    con.execute("PRAGMA foreign_keys = ON")
    con.execute("PRAGMA synchronous = FULL")  # a committed attempt row is on disk before its draw is made
    # check the version before creating anything: an old file's tables lack the new columns
    has_meta = con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() if has_meta else None
    if row is not None and row[0] == "2":  # issue 25 adds the entry identity columns: added in place
        con.execute("BEGIN IMMEDIATE")
        for col in ("submitter", "model_id", "revision", "label"):
            con.execute(f"ALTER TABLE submissions ADD COLUMN {col} TEXT NOT NULL DEFAULT ''")
        _backfill_identity(con)
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        con.execute("COMMIT")
        row = (str(SCHEMA_VERSION),)
    if row is not None and row[0] != str(SCHEMA_VERSION):
        con.close()
        raise SubmissionError(
            f"{p}: board schema version {row[0]}, this semcal expects {SCHEMA_VERSION} (trust tiers, predictions "
            "hash, board-computed coverage); rebuild it: move the file away and submit the runs again "
            "(`semcal-eval board submit` / `board evaluate`)"
        )
    if row is None and con.execute("SELECT 1 FROM sqlite_master WHERE name = 'submissions'").fetchone():
        con.close()
        raise SubmissionError(f"{p}: a board database without a schema version; move it away and rebuild the board")
    con.executescript(_SCHEMA)
    con.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
    _init_settings(con, created)
    return con


#: Board settings fixed in ``meta`` when the board is created (operator: ``board config``); the environment
#: variable that used to set each one. For an existing board a variable that disagrees is refused
#: (:func:`board_setting`): whoever runs ``board submit`` must not lift the cap or point the spot check at
#: other weights (issue 43).
SETTINGS = {"max_attempts": "SEMCAL_BOARD_MAX_ATTEMPTS", "model_cache": "SEMCAL_MODEL_CACHE"}
#: the ``max_attempts`` setting of a new board: rejected spot checks allowed per (weights, submitter)
#: (:mod:`leaderboards.attempts` enforces it; :func:`leaderboards.spotcheck.reach_probability` for what 3 buys)
DEFAULT_MAX_ATTEMPTS = 3


def _default_setting(key: str, created: bool = True) -> str:
    """A setting's value for a board that has none: the cap's default; the model cache of whoever creates the
    board (``$SEMCAL_MODEL_CACHE``, XDG, ``~/.cache``), or, for a board from before issue 43 (``created``
    False), the default cache of the account that owns the process, read without any environment variable."""
    if key == "max_attempts":
        return str(DEFAULT_MAX_ATTEMPTS)
    if not created:
        import pwd

        return str((Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "semcal" / "models").resolve())
    from semcal_eval.models import cache_dir

    return str(cache_dir().resolve())


def _init_settings(con: sqlite3.Connection, created: bool) -> None:
    """Store each :data:`SETTINGS` key once, when the board (or a board from before issue 43) is first opened
    (:func:`_default_setting`); from then on only ``board config`` changes them."""
    for key in SETTINGS:
        if con.execute("SELECT 1 FROM meta WHERE key = ?", (key,)).fetchone() is None:
            con.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", (key, _default_setting(key, created)))


def board_setting(con: sqlite3.Connection, key: str) -> str:
    """The board's stored ``key`` (:data:`SETTINGS`). SubmissionError when its environment variable is set to
    another value: environment variables do not change an existing board (the operator uses ``board config``)."""
    row = con.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    value = row[0] if row else _default_setting(key)
    var = SETTINGS[key]
    env = os.environ.get(var)
    if env:
        same = (Path(env).expanduser().resolve() == Path(value)) if key == "model_cache" else env.strip() == value
        if not same:
            raise SubmissionError(
                f"${var}={env[:80]!r} disagrees with this board's {key} {value!r}, fixed when the board was "
                f"created; environment variables do not change an existing board: unset {var} (the operator "
                f"changes it with `semcal-eval board config --{key.replace('_', '-')} VALUE`)")
    return value


@contextlib.contextmanager
def pinned_model_cache(con: sqlite3.Connection):
    """While in effect, this process (and the re-scoring subprocesses it starts) resolve ``semcal:NAME`` in the
    board's model cache, the weights the board trusts, never in a folder named by the caller's
    ``$SEMCAL_MODEL_CACHE`` or ``$XDG_CACHE_HOME`` (issue 43: Gemma's outputs stored as SmolLM2's). Refused when
    ``$SEMCAL_MODEL_CACHE`` names another folder (:func:`board_setting`). Yields the cache folder."""
    root = board_setting(con, "model_cache")
    old = os.environ.get("SEMCAL_MODEL_CACHE")
    os.environ["SEMCAL_MODEL_CACHE"] = root
    try:
        yield Path(root)
    finally:
        if old is None:
            os.environ.pop("SEMCAL_MODEL_CACHE", None)
        else:
            os.environ["SEMCAL_MODEL_CACHE"] = old


def set_board_setting(con: sqlite3.Connection, key: str, value: str) -> None:
    """Operator (``board config``): change a board setting (:data:`SETTINGS`)."""
    if key not in SETTINGS:
        raise SubmissionError(f"unknown board setting {key!r}; known: {', '.join(SETTINGS)}")
    con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))


def _backfill_identity(con: sqlite3.Connection) -> None:
    """Schema 2 -> 3: each stored submission gets its identity from its own model_args (the name it was
    submitted under becomes its label); verified entries belong to the board, the others to nobody
    (``anonymous``: each its own identity, so none can replace another)."""
    from . import names

    for sid, name, tier, margs, prov in con.execute(
            "SELECT id, model_name, tier, model_args, provenance FROM submissions").fetchall():
        p = _stored_json(prov) or {}
        model_args = margs or ((p.get("config") or {}).get("model_args") if isinstance(p, dict) else None)
        model_id, revision, derived = model_identity(model_args)
        shown = derived if name == derived else f"{derived} ({name})"
        con.execute("UPDATE submissions SET submitter = ?, model_id = ?, revision = ?, label = ?, model_name = ? "
                    "WHERE id = ?", ("board" if tier == "verified" else "anonymous", model_id, revision, name,
                                     shown[:names.MAX_MODEL_NAME], sid))


def _near_duplicate(con: sqlite3.Connection, sub: Submission) -> int | None:
    """The id of a stored submission whose rows match every raw model row of ``sub`` (same task and documents,
    same correctness, confidences within :data:`DUP_ATOL`, filter names ignored), else None. Raw rows: not the
    re-calibrated or tuned ones (:data:`DERIVED_FILTERS`), which amplify an edit of the row they come from;
    a run of derived rows only is compared on those."""
    candidates: set[int] | None = None
    model_rows = [e for e in sub.entries if not e.is_reference]
    raw = [e for e in model_rows if e.filter not in DERIVED_FILTERS]
    # stored rows compared against: the raw ones, or every model row when the run has derived rows only
    rows, leave_out = (raw, sorted(DERIVED_FILTERS)) if raw else (model_rows, [])
    where = f" AND filter NOT IN ({', '.join('?' * len(leave_out))})" if leave_out else ""
    for e in rows:
        conf, correct = np.asarray(e.conf, dtype="<f8"), np.asarray(e.correct, dtype="<f8")
        match = set()
        for sid, c, y in con.execute(
            "SELECT submission_id, conf, correct FROM entries WHERE task = ? AND doc_set_hash = ? AND n_docs = ? "
            "AND is_reference = 0" + where, (e.task, e.doc_set_hash, e.n_docs, *leave_out),
        ):
            c, y = np.frombuffer(c, dtype="<f8"), np.frombuffer(y, dtype="<f8")
            if len(c) == len(conf) and np.array_equal(y, correct) and np.allclose(c, conf, rtol=0, atol=DUP_ATOL):
                match.add(sid)
        candidates = match if candidates is None else candidates & match
        if not candidates:
            return None
    return min(candidates) if candidates else None


def _token_hash(token: str) -> str:
    return hashlib.sha256(("semcal-board-submitter\x00" + token).encode()).hexdigest()


def add_submitter(con: sqlite3.Connection, name: str) -> str:
    """Register submitter ``name`` and return its token (shown once; only its sha256 is stored)."""
    from . import names

    name = names.submitter(name)
    token = secrets.token_urlsafe(32)
    try:
        con.execute("INSERT INTO submitters VALUES (?, ?, ?)",
                    (name, _token_hash(token), datetime.now(timezone.utc).isoformat(timespec="seconds")))
    except sqlite3.IntegrityError:
        raise SubmissionError(f"submitter {name!r} already exists; each name has one token") from None
    return token


def submitter_of(con: sqlite3.Connection, token: str | None) -> str:
    """The submitter a token belongs to; ``anonymous`` without a token; SubmissionError for an unknown one."""
    if not token:
        return "anonymous"
    row = con.execute("SELECT name FROM submitters WHERE token_sha256 = ?", (_token_hash(token.strip()),)).fetchone()
    if row is None:
        raise SubmissionError("unknown submitter token; ask the board operator for one "
                              "(`semcal-eval board submitter add NAME`)")
    return row[0]


#: Self-reported (submission, task) pages a submitter may have on the board unless the operator sets another
#: number (``board quota``): each is an entry page, its diagrams and its rows in every render (issue 43: one
#: anonymous 64-task self-reported submission cost 80 s of rendering and 25 MB of site). ``anonymous`` is one
#: submitter for this count: every token-less submission shares its quota.
SELF_REPORTED_QUOTA = 256


def self_reported_quota(con: sqlite3.Connection, submitter: str) -> int:
    """The submitter's quota of self-reported (submission, task) entries: the operator's setting for that
    submitter, else the operator's default, else :data:`SELF_REPORTED_QUOTA`."""
    for key in (f"self_reported_quota:{submitter}", "self_reported_quota"):
        row = con.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        if row is not None and str(row[0]).isdigit():
            return int(row[0])
    return SELF_REPORTED_QUOTA


def set_self_reported_quota(con: sqlite3.Connection, n: int, submitter: str | None = None) -> None:
    """Set the self-reported quota (operator): of ``submitter`` (``anonymous`` included), or the default."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise SubmissionError(f"quota {n!r} must be a whole number >= 0")
    key = "self_reported_quota" + (f":{submitter}" if submitter else "")
    con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, str(n)))


def self_reported_used(con: sqlite3.Connection, submitter: str) -> int:
    """The submitter's stored self-reported (submission, task) entries."""
    (n,) = con.execute("SELECT COUNT(*) FROM (SELECT DISTINCT e.submission_id, e.task FROM entries e JOIN submissions s "
                       "ON s.id = e.submission_id WHERE s.tier = 'self-reported' AND s.submitter = ?)",
                       (submitter,)).fetchone()
    return int(n)


def check_self_reported_quota(con: sqlite3.Connection, submitter: str, n_tasks: int) -> None:
    """SubmissionError when storing ``n_tasks`` more self-reported task entries would take ``submitter`` over
    their quota (:func:`self_reported_quota`); the message names the count and the ways out."""
    used, quota = self_reported_used(con, submitter), self_reported_quota(con, submitter)
    if used + n_tasks > quota:
        raise SubmissionError(
            f"self-reported quota: submitter {submitter!r} has {used} self-reported task entries stored and this "
            f"submission adds {n_tasks}; the quota is {quota}. Get the run spot-checked (float32, a model the board "
            "can load), use your own submitter token, or ask the operator to raise it "
            f"(`semcal-eval board quota --self-reported N --submitter {submitter}`); nothing was stored")


def entry_names(sub: Submission, model_name: str | None, method: str) -> tuple[str, str, str, str, str]:
    """(method, label, model id, revision, displayed name) of a submission, every name checked by
    :mod:`leaderboards.names` (SubmissionError otherwise). Cheap: ``board submit`` runs it before the spot check."""
    from . import names


    method = names.method(method)
    label = names.model_name(model_name) if model_name else ""
    model_args = sub.model_args or (sub.provenance.get("config") or {}).get("model_args")
    for key in ("pretrained", "revision"):
        v = parse_model_args(model_args or "").get(key)
        if isinstance(v, str):
            names.check_path_text(v, f"model_args {key}")
    model_id, revision, derived = model_identity(model_args)
    # the displayed name comes from model_args; a submitter's label is shown beside it, never instead of it
    shown = derived if not label or label == derived else f"{derived} ({label})"
    return method, label, model_id, revision, names.model_name(shown[:names.MAX_MODEL_NAME])


def stored_names(con: sqlite3.Connection) -> list[str]:
    """Every displayed model name, model id and label on the board (for
    :func:`leaderboards.names.check_unconfusable`)."""
    out = set()
    for row in con.execute("SELECT DISTINCT model_name, model_id, label FROM submissions"):
        out.update(v for v in row if v)
    return sorted(out)


def check_names_unconfusable(con: sqlite3.Connection, names_: tuple[str, ...]) -> None:
    """Each of an entry's names (displayed name, model id, label) against every stored one: SubmissionError for
    a look-alike of a different stored name (:func:`leaderboards.names.check_unconfusable`)."""
    from . import names

    stored = stored_names(con)
    for n in names_:
        if n:
            names.check_unconfusable(n, stored)


def duplicate_of(con: sqlite3.Connection, sub: Submission) -> str | None:
    """``#id ('name', method, at)`` of a stored submission with the same predictions, content, or predictions
    within :data:`DUP_ATOL` on the raw rows (:func:`_near_duplicate`); None for a new measurement."""
    ph = sub.predictions_hash or sub.content_hash
    dup = con.execute(
        "SELECT id, model_name, method, submitted_at FROM submissions WHERE predictions_hash = ? OR content_hash = ?",
        (ph, sub.content_hash),
    ).fetchone()
    if dup is None:
        near = _near_duplicate(con, sub)
        if near is not None:
            dup = con.execute("SELECT id, model_name, method, submitted_at FROM submissions WHERE id = ?",
                              (near,)).fetchone()
    return None if dup is None else f"#{dup[0]} ({dup[1]!r}, method {dup[2]}, at {dup[3]})"


def insert(con: sqlite3.Connection, sub: Submission, model_name: str | None, method: str, *,
           tier: str = "self-reported", verification: dict | None = None, submitter: str = "anonymous") -> int:
    """Store a validated submission in one transaction; return its id.

    ``model_name`` / ``method`` are checked and NFC-normalised by :mod:`leaderboards.names`; ``tier`` is one of
    :data:`TIERS` and ``verification`` says how it was established (JSON object). The same predictions
    (``predictions_hash``), or predictions within :data:`DUP_ATOL` of a stored submission's, raise
    SubmissionError naming the stored submission.
    """

    method, label, model_id, revision, model_name = entry_names(sub, model_name, method)
    if tier not in TIERS:
        raise SubmissionError(f"tier {tier!r} must be one of {', '.join(TIERS)}")
    ph = sub.predictions_hash or sub.content_hash
    dup = duplicate_of(con, sub)
    if dup:
        raise SubmissionError(
            f"duplicate submission: these predictions (sha256 {ph[:16]}…) were already submitted as "
            f"{dup}; editing the results file, names or hashes does not make a new measurement"
        )
    check_names_unconfusable(con, (model_name, model_id, label))
    con.execute("BEGIN IMMEDIATE")
    try:
        if tier == "self-reported":  # inside the transaction: two concurrent submits cannot both pass
            check_self_reported_quota(con, submitter, len({e.task for e in sub.entries}))
        cur = con.execute(
            "INSERT INTO submissions (content_hash, predictions_hash, model_name, method, submitted_at, limit_json, "
            "provenance, model_args, tier, verification, submitter, model_id, revision, label) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                sub.content_hash,
                ph,
                model_name,
                method,
                datetime.now(timezone.utc).isoformat(timespec="seconds"),
                _json(sub.limit),
                _json(sub.provenance),
                sub.model_args or "",
                tier,
                _json(verification or {}),
                submitter,
                model_id,
                revision,
                label,
            ),
        )
        sid = cur.lastrowid
        for e in sub.entries:
            con.execute(
                "INSERT INTO entries (submission_id, task, task_version, filter, kind, is_reference, n_docs, "
                "n_original, doc_set_hash, reported, board, conf, correct, degenerate, split, n_split, coverage, "
                "predictions_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sid, e.task, e.task_version, e.filter, e.kind, int(e.is_reference), e.n_docs, e.n_original,
                    e.doc_set_hash, _json(e.reported), _json(e.board),
                    np.asarray(e.conf, dtype="<f8").tobytes(), np.asarray(e.correct, dtype="<f8").tobytes(),
                    e.degenerate, e.split, e.n_split, e.coverage, e.predictions_hash,
                ),
            )
        con.execute("COMMIT")
    except sqlite3.IntegrityError as e:
        con.execute("ROLLBACK")
        # a concurrent submit of the same run won the race between our check and our insert
        raise SubmissionError(f"duplicate submission: sha256 {ph[:16]}… is already stored ({e})") from e
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return sid


def load_entries(con: sqlite3.Connection) -> list[dict]:
    """All entries joined with their submission, as plain dicts (board metrics with NaN restored)."""
    rows = con.execute(
        "SELECT e.id, e.task, e.task_version, e.filter, e.kind, e.is_reference, e.n_docs, e.n_original, "
        "e.doc_set_hash, e.reported, e.board, e.conf, e.correct, e.degenerate, s.id, s.content_hash, "
        "s.model_name, s.method, s.submitted_at, s.limit_json, s.provenance, s.tier, s.verification, "
        "s.predictions_hash, s.model_args, e.split, e.n_split, e.coverage, e.predictions_hash, s.submitter, "
        "s.model_id, s.revision, s.label "
        "FROM entries e JOIN submissions s ON s.id = e.submission_id ORDER BY e.task, s.id, e.filter"
    ).fetchall()
    out = []
    for r in rows:
        out.append(
            {
                "entry_id": r[0], "task": r[1], "task_version": r[2], "filter": r[3], "kind": r[4],
                "is_reference": bool(r[5]), "n_docs": r[6], "n_original": r[7], "doc_set_hash": r[8],
                "reported": _floats(_stored_json(r[9])), "board": _floats(_stored_json(r[10])),
                "conf": _f8(r[11]), "correct": _f8(r[12]),
                "degenerate": r[13], "submission_id": r[14], "content_hash": r[15], "model_name": r[16],
                "method": r[17], "submitted_at": r[18], "limit": _stored_json(r[19]),
                "provenance": _stored_json(r[20]), "tier": r[21], "verification": _stored_json(r[22]),
                "predictions_hash": r[23], "model_args": r[24], "split": r[25], "n_split": r[26],
                "coverage": r[27], "entry_predictions_hash": r[28], "submitter": r[29], "model_id": r[30],
                "revision": r[31], "label": r[32],
            }
        )
    return out


def list_submissions(con: sqlite3.Connection) -> list[tuple]:
    """(id, model_name, method, submitted_at, n_entries, tasks) per submission."""
    return con.execute(
        "SELECT s.id, s.model_name, s.method, s.submitted_at, COUNT(e.id), GROUP_CONCAT(DISTINCT e.task) "
        "FROM submissions s LEFT JOIN entries e ON e.submission_id = s.id GROUP BY s.id ORDER BY s.id"
    ).fetchall()
