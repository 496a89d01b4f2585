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

Every failure raises :class:`RunError` naming the file (and line) and the fix.
"""

from __future__ import annotations

import json
import os
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
    "locate_run",
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
    if p.is_file():
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


def _check_size(path: Path, env: str) -> None:
    size = path.stat().st_size
    cap = limit(env)
    if size > cap:
        raise RunError(
            f"{path}: {size} bytes exceeds the limit of {cap} bytes ({env}); "
            "use a run with fewer documents or raise the limit"
        )


def read_results(path: Path) -> dict:
    """Parse a results JSON (bare NaN accepted), with a size limit and a line-numbered error."""
    _check_size(path, "SEMCAL_BOARD_MAX_RESULTS_BYTES")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise RunError(f"{path}: not UTF-8 text ({e})") from e
    except json.JSONDecodeError as e:
        raise RunError(f"{path}: malformed JSON at line {e.lineno}, column {e.colno}: {e.msg}") from e
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise RunError(f"{path}: not an lm-eval results file (no top-level 'results' object)")
    return data


def read_samples(path: Path) -> list[dict]:
    """Parse a samples JSONL (one object a line; bare NaN accepted); each row gets ``_line`` (1-based);
    errors name file and line."""
    _check_size(path, "SEMCAL_BOARD_MAX_SAMPLES_BYTES")
    max_line = limit("SEMCAL_BOARD_MAX_LINE_BYTES")
    rows: list[dict] = []
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if len(raw) > max_line:
                raise RunError(f"{path}:{lineno}: line of {len(raw)} bytes exceeds SEMCAL_BOARD_MAX_LINE_BYTES={max_line}")
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except UnicodeDecodeError as e:
                raise RunError(f"{path}:{lineno}: not UTF-8 text ({e})") from e
            except json.JSONDecodeError as e:
                raise RunError(f"{path}:{lineno}: malformed JSON at column {e.colno}: {e.msg}") from e
            if not isinstance(row, dict):
                raise RunError(f"{path}:{lineno}: expected a JSON object per line, got {type(row).__name__}")
            row["_line"] = lineno
            rows.append(row)
    return rows


def locate_run(output_dir: str | Path, tasks: list[str]) -> RunFiles:
    """Find the results file and the samples file of each of ``tasks`` from the same run (same date)."""
    results_path = find_results(output_dir)
    date_id = results_path.stem[len("results_") :]
    run = RunFiles(results_path=results_path, date_id=date_id)
    for task in tasks:
        sp = results_path.with_name(f"samples_{task}_{date_id}.jsonl")
        if not sp.is_file():
            raise RunError(
                f"{sp.name} is missing next to {results_path.name}: every metric is recomputed from the "
                "per-document logs, so rerun lm-eval with --log_samples"
            )
        run.samples_paths[task] = sp
    return run
