"""Stage 2, **provenance**: what the run says about itself (versions, hashes, date, ``config``), bounded so that
no stored entry can break a later render, and ``config.limit`` read as lm-eval records it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from semcal_eval.core.records import canonical

from ..errors import SubmissionError
from .shape import MAX_DOCS

#: Plausible Unix times for provenance ``date`` (1970 .. 2100).
MAX_DATE = 4102444800.0
MAX_PROVENANCE_DEPTH = 8
#: Bounds of the free-form provenance (issue 34: a 30 MB config of 7,600 keys made a 244 MB board.json).
#: lm-eval writes about 20 config keys; a task map has one key per task (64 tasks at most per run).
MAX_CONFIG_KEYS = 64
MAX_CONFIG_BYTES = 16 * 1024
MAX_MAP_KEYS = 128
MAX_PROVENANCE_BYTES = 32 * 1024
_PROV_STR = ("git_hash", "lm_eval_version", "transformers_version", "model_name", "model_source",
             "chat_template_sha", "system_instruction_sha")


@dataclass
class RunProvenance:
    """Stage 2's output: the provenance to store, the run's ``--limit`` and its ``model_args`` text."""

    provenance: dict
    limit: float | int | None
    model_args: str


def check_provenance(results: dict, config: dict, where: str) -> RunProvenance:
    """Stage 2: the stored provenance (:func:`provenance`), ``config.limit`` (:func:`run_limit`) and
    ``config.model_args`` when it is text (a dict is kept in the provenance's config only)."""
    limit = run_limit(config, where)  # first: a bad limit is named before any provenance field
    model_args = config.get("model_args") if isinstance(config.get("model_args"), str) else ""
    return RunProvenance(provenance=provenance(results, config, where), limit=limit, model_args=model_args)


def run_limit(config: dict, where: str) -> float | int | None:
    """``config.limit`` as lm-eval records it: None, an integer >= 1, or a fraction in (0, 1)."""
    limit = config.get("limit")
    if limit is None:
        return None
    bad = isinstance(limit, bool) or not isinstance(limit, (int, float))
    if not bad and isinstance(limit, float):
        bad = not math.isfinite(limit) or limit <= 0 or (limit >= 1.0 and not limit.is_integer())
    if not bad and isinstance(limit, int):
        bad = not 1 <= limit <= MAX_DOCS
    if bad:
        raise SubmissionError(
            f"{where}: config.limit {str(limit)[:40]} is not a document count (>= 1) or a fraction in (0, 1); "
            "NaN, infinity and non-numbers are refused"
        )
    return int(limit) if isinstance(limit, float) and limit >= 1.0 else limit


def _depth(v) -> int:
    """Nesting depth of a JSON value, without recursion (the value may be nested to the parser's limit)."""
    best, stack = 0, [(v, 1)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, (dict, list)):
            best = max(best, d)
            stack.extend((y, d + 1) for y in (x.values() if isinstance(x, dict) else x))
    return best


def provenance(results: dict, config: dict, where: str) -> dict:
    """The run's provenance as stored: strings of at most 200 characters, ``date`` and
    ``total_evaluation_time_seconds`` finite numbers in range (``date`` a Unix time in 1970..2100), the
    per-task maps (``task_hashes``, ``n-shot``) objects of short scalars, and the run's ``config``
    (:func:`run_config`). A value outside these is refused at submit, so that no stored entry can break a
    later render."""
    out: dict = {}
    for k in _PROV_STR:
        v = results.get(k)
        if v is None:
            continue
        if not isinstance(v, str) or len(v) > 200:
            raise SubmissionError(f"{where}: provenance {k!r} must be a string of at most 200 characters")
        out[k] = v
    for k, hi in (("date", MAX_DATE), ("total_evaluation_time_seconds", 10**9)):
        v = results.get(k)
        if v is None:
            continue
        if isinstance(v, str):  # lm-eval writes total_evaluation_time_seconds as a string
            try:
                v = float(v)
            except ValueError:
                raise SubmissionError(f"{where}: provenance {k!r} {v[:40]!r} is not a number") from None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 <= v <= hi):
            raise SubmissionError(f"{where}: provenance {k!r} {str(v)[:40]} is not a number between 0 and {hi:g}"
                                  + (" (a Unix time, 1970..2100)" if k == "date" else ""))
        out[k] = float(v)
    for k in ("task_hashes", "n-shot"):
        v = results.get(k)
        if v is None:
            continue
        if not isinstance(v, dict) or len(v) > MAX_MAP_KEYS or not all(
            isinstance(x, str) and len(x) <= 200 and isinstance(y, (str, int)) and not isinstance(y, bool)
            and len(str(y)) <= 200 for x, y in v.items()
        ):
            raise SubmissionError(f"{where}: provenance {k!r} must map at most {MAX_MAP_KEYS} task names to short "
                                  "strings or integers")
        out[k] = v
    out["config"] = run_config(config, where)
    size = len(canonical(out))
    if size > MAX_PROVENANCE_BYTES:
        raise SubmissionError(f"{where}: the run's provenance is {size} bytes of JSON; the board keeps at most "
                              f"{MAX_PROVENANCE_BYTES} (lm-eval writes a few KiB)")
    return out


def run_config(config: dict, where: str) -> dict:
    """The run's ``config`` as stored: string keys only; finite numbers, short text, shallow small JSON; at most
    MAX_CONFIG_KEYS keys (of at most 200 characters) and MAX_CONFIG_BYTES of JSON in all."""
    if len(config) > MAX_CONFIG_KEYS:
        raise SubmissionError(f"{where}: config has {len(config)} keys; the board keeps at most {MAX_CONFIG_KEYS} "
                              "(lm-eval writes about 20): submit lm-eval's own results file")
    cfg = {}
    for k, v in config.items():
        if not isinstance(k, str):
            continue
        if len(k) > 200:
            raise SubmissionError(f"{where}: a config key of {len(k)} characters; at most 200")
        if isinstance(v, float) and not math.isfinite(v):
            raise SubmissionError(f"{where}: config.{k} is {v}; a finite number or a string is expected")
        if isinstance(v, (dict, list)) and _depth(v) > MAX_PROVENANCE_DEPTH:
            raise SubmissionError(f"{where}: config.{k} is nested more than {MAX_PROVENANCE_DEPTH} levels deep; "
                                  "lm-eval writes flat settings")
        if isinstance(v, (dict, list)) and len(canonical(v)) > 4096:
            raise SubmissionError(f"{where}: config.{k} is over 4096 bytes of JSON")
        if isinstance(v, str) and len(v) > 4096:
            raise SubmissionError(f"{where}: config.{k} is over 4096 characters")
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**62:
            raise SubmissionError(f"{where}: config.{k} {str(v)[:30]} is out of range")
        cfg[k] = v
    size = len(canonical(cfg))
    if size > MAX_CONFIG_BYTES:
        raise SubmissionError(f"{where}: config is {size} bytes of JSON; the board keeps at most {MAX_CONFIG_BYTES}")
    return cfg
