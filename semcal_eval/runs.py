"""Read an lm-eval output folder: ``results_<date>.json`` plus ``samples_<task>_<date>.jsonl``.

Used by the report (:mod:`semcal_eval.report`) and the leaderboard (``leaderboards.recompute``); this module
knows files and JSON, not metrics: what a per-document record must hold is :mod:`semcal_eval.core.records`.

lm-eval 0.4.13 (``EvaluationTracker``) writes ``<output_path>/<model_name_sanitized>/results_<date>.json``
and, with ``--log_samples``, one ``samples_<task>_<date>.jsonl`` per task with the same ``<date>``.
Each JSONL line is one (document, filter) pair: ``doc_id``, ``doc``, ``target``, ``arguments``,
``resps``, ``filtered_resps``, ``filter``, ``metrics`` (names) and, under each metric name, that
document's per-document value (for semcal tasks: the record).

Python's ``json`` accepts bare ``NaN`` / ``Infinity``, which lm-eval writes for undefined metrics;
they are parsed as floats here and judged by the caller (a NaN aggregate is allowed, a NaN confidence is not).

Size limits (bytes; override with environment variables of the same name — the names predate this module,
which was the board's reader first):

* ``SEMCAL_BOARD_MAX_RESULTS_BYTES`` — one results JSON, default 32 MiB;
* ``SEMCAL_BOARD_MAX_SAMPLES_BYTES`` — one samples JSONL, default 512 MiB;
* ``SEMCAL_BOARD_MAX_LINE_BYTES`` — one JSONL line, default 16 MiB.

Only regular files are read (a FIFO, a device or a symlink to one is refused before any byte is read), the size
limit is checked on the opened file before reading and again while reading, and a samples file is streamed
(:func:`iter_samples`), so memory does not grow with the file. Every failure raises :class:`RunError` naming the
file (and line) and the fix.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "DEFAULT_LIMITS",
    "RunError",
    "RunFiles",
    "limit",
    "find_results",
    "read_results",
    "read_samples",
    "iter_samples",
    "locate_run",
    "REF_PREFIX",
    "row_record",
    "iter_records",
    "records_by_filter",
    "load_records",
]

DEFAULT_LIMITS = {
    "SEMCAL_BOARD_MAX_RESULTS_BYTES": 32 * 2**20,
    "SEMCAL_BOARD_MAX_SAMPLES_BYTES": 512 * 2**20,
    "SEMCAL_BOARD_MAX_LINE_BYTES": 16 * 2**20,
}


class RunError(ValueError):
    """An lm-eval output folder that cannot be read; the message names the file (and line) and the fix."""


def limit(name: str) -> int:
    """Current size limit ``name`` (see module docstring), from the environment or the default."""
    raw = os.environ.get(name)
    if raw is None:
        return DEFAULT_LIMITS[name]
    try:
        return int(raw)
    except ValueError as e:
        raise RunError(f"{name}={raw!r} is not an integer number of bytes") from e


@dataclass
class RunFiles:
    """The files of one lm-eval run."""

    results_path: Path
    date_id: str
    samples_paths: dict[str, Path] = field(default_factory=dict)  # task -> samples file


def find_results(output_dir: str | Path) -> Path:
    """Locate the single ``results_*.json`` under ``output_dir`` (or accept a results file itself)."""
    p = Path(output_dir)
    if os.path.lexists(p) and not p.is_dir():  # a file of any type: its reader refuses what is not regular
        if not (p.name.startswith("results_") and p.suffix == ".json"):
            raise RunError(f"{p} is not an lm-eval results_<date>.json file")
        return p
    if not p.is_dir():
        raise RunError(f"{p} does not exist; pass the --output_path folder given to lm-eval")
    # lm-eval nests one level (<output_path>/<model_name_sanitized>/); look no deeper than that.
    found = sorted({*p.glob("results_*.json"), *p.glob("*/results_*.json")})
    if not found:
        raise RunError(f"no results_*.json in {p} or its subfolders; run lm-eval with --output_path {p} --log_samples")
    if len(found) > 1:
        names = ", ".join(str(f.relative_to(p)) for f in found)
        raise RunError(f"{p} holds {len(found)} runs ({names}); pass one results_*.json file instead")
    return found[0]


def _open_regular(path: Path, env: str) -> tuple[int, int]:
    """Open ``path`` for reading only if it is a regular file within size limit ``env``; return (fd, size).

    ``O_NONBLOCK`` makes opening a FIFO return at once instead of waiting for a writer, and the type and size
    come from ``fstat`` on the opened descriptor, so a file swapped between a check and the open cannot get
    past them (a symlink to /dev/zero is a character device: refused before any byte is read)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise RunError(f"{path}: cannot be opened ({e.strerror}); pass the lm-eval output folder") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode)
                    or stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a file")
            raise RunError(f"{path}: is {kind}, not a regular file; only regular files are read, "
                           "copy the lm-eval output into a plain folder")
        cap = limit(env)
        if st.st_size > cap:
            raise RunError(
                f"{path}: {st.st_size} bytes exceeds the limit of {cap} bytes ({env}); "
                "use a run with fewer documents or raise the limit"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def _decode_error(where: str, e: Exception) -> RunError:
    if isinstance(e, UnicodeDecodeError):
        return RunError(f"{where}: not UTF-8 text ({e})")
    # json recurses once per nesting level: a deeply nested document is not an lm-eval output
    return RunError(f"{where}: JSON nested too deeply to be an lm-eval output; submit lm-eval's unedited files")


def read_results(path: Path) -> dict:
    """Parse a results JSON (bare NaN accepted), with a size limit and a line-numbered error.

    Only a regular file is read, and at most the size limit plus one byte (a file that grows while being
    read is refused, not followed)."""
    path = Path(path)
    fd, _ = _open_regular(path, "SEMCAL_BOARD_MAX_RESULTS_BYTES")
    cap = limit("SEMCAL_BOARD_MAX_RESULTS_BYTES")
    with os.fdopen(fd, "rb") as f:
        raw = f.read(cap + 1)
    if len(raw) > cap:
        raise RunError(f"{path}: more than {cap} bytes (SEMCAL_BOARD_MAX_RESULTS_BYTES); raise the limit")
    try:
        data = json.loads(raw.decode("utf-8-sig"))  # a BOM is accepted, as in samples files (json.loads of bytes)
    except (UnicodeDecodeError, RecursionError) as e:
        raise _decode_error(str(path), e) from None
    except json.JSONDecodeError as e:
        raise RunError(f"{path}: malformed JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise RunError(f"{path}: not an lm-eval results file (no top-level 'results' object)")
    return data


def iter_samples(path: Path) -> Iterator[dict]:
    """Stream a samples JSONL one row at a time (one object a line; bare NaN accepted); each row gets
    ``_line`` (1-based); errors name file and line.

    Streaming keeps memory to one line (at most ``SEMCAL_BOARD_MAX_LINE_BYTES``) plus whatever the caller
    keeps; the whole file is bounded by ``SEMCAL_BOARD_MAX_SAMPLES_BYTES``, checked before the first read and
    again while reading."""
    path = Path(path)
    fd, _ = _open_regular(path, "SEMCAL_BOARD_MAX_SAMPLES_BYTES")
    max_line = limit("SEMCAL_BOARD_MAX_LINE_BYTES")
    cap = limit("SEMCAL_BOARD_MAX_SAMPLES_BYTES")
    total = 0
    with os.fdopen(fd, "rb") as f:
        lineno = 0
        while True:
            raw = f.readline(max_line + 1)
            if not raw:
                return
            lineno += 1
            total += len(raw)
            if len(raw) > max_line:
                raise RunError(f"{path}:{lineno}: line of more than {max_line} bytes exceeds "
                               f"SEMCAL_BOARD_MAX_LINE_BYTES={max_line}")
            if total > cap:
                raise RunError(f"{path}: more than {cap} bytes (SEMCAL_BOARD_MAX_SAMPLES_BYTES); raise the limit")
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except (UnicodeDecodeError, RecursionError) as e:
                raise _decode_error(f"{path}:{lineno}", e) from None
            except json.JSONDecodeError as e:
                raise RunError(f"{path}:{lineno}: malformed JSON at column {e.colno}: {e.msg}") from None
            if not isinstance(row, dict):
                raise RunError(f"{path}:{lineno}: expected a JSON object per line, got {type(row).__name__}")
            row["_line"] = lineno
            yield row


def read_samples(path: Path) -> list[dict]:
    """Every row of a samples JSONL as a list (:func:`iter_samples`); for small runs (the report)."""
    return list(iter_samples(path))


def locate_run(output_dir: str | Path, tasks: list[str]) -> RunFiles:
    """Find the results file and the samples file of each of ``tasks`` from the same run (same date)."""
    results_path = find_results(output_dir)
    date_id = results_path.stem[len("results_") :]
    run = RunFiles(results_path=results_path, date_id=date_id)
    for task in tasks:
        sp = results_path.with_name(f"samples_{task}_{date_id}.jsonl")
        if not os.path.lexists(sp):
            raise RunError(
                f"{sp.name} is missing next to {results_path.name}: every metric is recomputed from the "
                "per-document logs, so rerun lm-eval with --log_samples"
            )
        run.samples_paths[task] = sp
    return run


#: A per-document metric value that is not the record but a reference to it: ``"=<name>"`` (the record logged
#: under metric ``name`` of the same row; written by :class:`semcal_eval.harness.base.SameAs`).
REF_PREFIX = "="


def row_record(row: dict) -> tuple[str, dict] | None:
    """``(holder, record)`` of one samples row: the metric name under which the row's record is logged, and the
    record. None for a row with no semcal record (an lm-eval task's floats, ``--predict_only``).

    A semcal row logs its record (a JSON object) under its first metric name and ``"=<holder>"`` under every
    other one. Older logs that repeat the record under several names are read too, when every copy is equal.
    Anything else — two different records, a reference to a name that holds none — raises :class:`RunError`:
    one row must mean one record, whoever reads it (report, summary, board, spot check).
    """
    names = row.get("metrics")
    if not isinstance(names, list):
        return None
    holder, rec = None, None
    for n in names:
        v = row.get(n) if isinstance(n, str) else None
        if isinstance(v, dict):
            if rec is None:
                holder, rec = n, v
            elif v != rec:
                raise RunError(f"samples row {row.get('_line', '?')} (doc_id {row.get('doc_id')}, filter "
                               f"{row.get('filter')}): different records under {holder!r} and {n!r}; a row holds "
                               "one record, submit lm-eval's unedited output")
    if rec is None:
        return None
    for n in names:
        v = row.get(n)
        if isinstance(v, str) and v.startswith(REF_PREFIX) and v != REF_PREFIX + holder:
            target = row.get(v[len(REF_PREFIX):])
            if target is not rec and target != rec:
                raise RunError(f"samples row {row.get('_line', '?')}: metric {n!r} refers to {v!r}, which holds "
                               f"no record of this row (the record is under {holder!r})")
    return holder, rec


def iter_records(path: Path) -> Iterator[tuple[dict, str, dict]]:
    """``(row, filter, record)`` for every samples row of ``path`` that holds a semcal record (streamed)."""
    for row in iter_samples(path):
        got = row_record(row)
        if got is not None:
            yield row, row.get("filter", "none"), got[1]


def records_by_filter(rows) -> dict[str, dict]:
    """Group samples rows by filter: {filter: {"doc_ids": [...], "items": [...]}} in row order; rows without a
    semcal record (``--predict_only``, lm-eval's own tasks) are left out."""
    out: dict[str, dict] = {}
    for row in rows:
        got = row_record(row)
        if got is not None:
            f = out.setdefault(row.get("filter", "none"), {"doc_ids": [], "items": []})
            f["doc_ids"].append(row["doc_id"])
            f["items"].append(got[1])
    return out


def load_records(output_dir: str | Path) -> dict[str, dict[str, dict]]:
    """{task: {filter: {"doc_ids", "items"}}} of every task of the newest run in ``output_dir`` that logged
    semcal records (groups, which have no samples file, and tasks without records are left out)."""
    results_path = find_results(output_dir)
    results = read_results(results_path)
    date_id = results_path.stem[len("results_"):]
    out: dict[str, dict[str, dict]] = {}
    for task in results["results"]:
        sp = results_path.with_name(f"samples_{task}_{date_id}.jsonl")
        if not sp.is_file():
            continue  # groups have no samples of their own
        by_filter = records_by_filter(iter_samples(sp))
        if by_filter:
            out[task] = by_filter
    return out
