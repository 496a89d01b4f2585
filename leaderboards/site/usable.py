"""Which stored entries the site can show: each row checked field by field, then rendered once on its own in
every output; a submission with a row that fails is left out whole, with a message naming it."""

from __future__ import annotations

import json
import math
import re

import numpy as np

from ..ranking import RANKED
from .data import _export_row
from .html import _entry_page, _row_cells
from .rows import _BOARD_FIELDS
from .tables import _markdown

class _BadEntry(ValueError):
    pass


def _is_num(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _check_entry(r: dict) -> None:
    """Raise :class:`_BadEntry` naming the first field of a stored entry that the site cannot show."""
    for k in ("task", "model_name", "method", "filter", "doc_set_hash", "submitted_at", "kind", "degenerate"):
        if not isinstance(r.get(k), str):
            raise _BadEntry(f"{k} is {type(r.get(k)).__name__}, not text")
    if not isinstance(r.get("content_hash"), str) or not re.fullmatch(r"[0-9a-f]{16,128}", r["content_hash"]):
        raise _BadEntry("content_hash is not a hex digest")
    for k in ("entry_id", "submission_id", "n_docs", "n_original"):
        if not isinstance(r.get(k), int) or isinstance(r.get(k), bool) or r[k] < 0:
            raise _BadEntry(f"{k} is {r.get(k)!r:.40}, not a count")
    if r.get("n_split") is not None and (not isinstance(r["n_split"], int) or isinstance(r["n_split"], bool)):
        raise _BadEntry(f"n_split is {r['n_split']!r:.40}, not a count")
    if not isinstance(r.get("is_reference"), bool):
        raise _BadEntry("is_reference is not true/false")
    if r.get("split") is not None and not isinstance(r["split"], str):
        raise _BadEntry("split is not text")
    lim = r.get("limit")
    if lim is not None and not (_is_num(lim) and math.isfinite(lim)):
        raise _BadEntry(f"limit is {lim!r:.40}, not a finite number")
    if not isinstance(r.get("task_version"), (str, int, float)):
        raise _BadEntry("task_version is not text")
    b = r.get("board")
    if not isinstance(b, dict):
        raise _BadEntry("board metrics are not a mapping")
    for k in _BOARD_FIELDS:
        if k in b and b[k] is not None and not _is_num(b[k]):
            raise _BadEntry(f"board value {k} is {b[k]!r:.40}, not a number")
        if k in RANKED and not _is_num(b.get(k)):
            raise _BadEntry(f"board value {k} is missing")
    if not isinstance(b.get("n_bins"), int) or isinstance(b["n_bins"], bool) or not 1 <= b["n_bins"] <= 10_000:
        raise _BadEntry(f"board n_bins is {b.get('n_bins')!r:.40}, not a bin count")
    rep = r.get("reported")
    if not isinstance(rep, dict) or not all(isinstance(k, str) and _is_num(v) for k, v in rep.items()):
        raise _BadEntry("reported metrics are not a mapping of names to numbers")
    for k in ("conf", "correct"):
        a = r.get(k)
        if not isinstance(a, np.ndarray) or a.ndim != 1 or a.dtype.kind != "f":
            raise _BadEntry(f"{k} is not a float array")
        if len(a) != r["n_docs"] or not (np.isfinite(a).all() and (a >= 0).all() and (a <= 1).all()):
            raise _BadEntry(f"{k} does not hold {r['n_docs']} values in [0, 1]")


def _usable(entries: list[dict]) -> tuple[list[dict], list[str]]:
    """Split the stored entries into those of renderable submissions and one message per left-out submission.

    A submission is left out whole (not row by row) so the board never shows a part of one run. Each of its
    rows is checked field by field, then rendered once on its own, which catches what the checks did not
    foresee (e.g. provenance nested too deeply to serialise)."""
    bad: dict[object, str] = {}
    for r in entries:
        sid = r.get("submission_id") if isinstance(r, dict) else None
        if sid in bad:
            continue
        try:
            if not isinstance(r, dict):
                raise _BadEntry(f"entry is {type(r).__name__}, not a mapping")
            _check_entry(r)
            trial = {**r, "beats_prior": None, "prior_brier": None}
            _row_cells(trial)
            _markdown([trial], [], [], [])
            _entry_page("0" * 16, [trial], {r["entry_id"]: "x.png"})
            json.dumps(_export_row(trial), allow_nan=False, ensure_ascii=False)
        except Exception as exc:  # noqa: BLE001 - any failure of a stored row leaves out its submission
            msg = str(exc) if isinstance(exc, _BadEntry) else f"{type(exc).__name__}: {str(exc)[:120]}"
            name = r.get("model_name") if isinstance(r, dict) else None
            where = f"{r.get('task')}/{r.get('filter')}" if isinstance(r, dict) else "?"
            bad[sid] = f"submission #{sid} ({str(name)[:60]!r}), {where}: {msg}"
    good = [r for r in entries if isinstance(r, dict) and r.get("submission_id") not in bad]
    return good, list(bad.values())
