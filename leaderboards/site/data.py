"""The site's ``board.json``: every ranked row with its board metrics and reported values; each submission's
provenance and verification **once** (``submissions``, keyed by submission id, paths cut by
:func:`~leaderboards.site.rows.public`), not once per row: a 32-filter submission repeats only its metrics
(issue 34); the overall rankings and the submissions left out (non-finite numbers written as null)."""

from __future__ import annotations

import json
import math

from .rows import _verification, entry_slug, public
from .tables import _flat

def _jsonable(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def _export_row(r: dict) -> dict:
    return _jsonable({**_flat(r), "task_version": r["task_version"], "kind": r["kind"], "board": r["board"],
                      "reported": r["reported"], "submission_id": r["submission_id"],
                      "page": f"entries/{entry_slug(r['content_hash'], r['task'])}.html"})


def _submissions(rows: list[dict]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for r in rows:
        if str(r["submission_id"]) not in out:
            out[str(r["submission_id"])] = _jsonable(public({"provenance": r["provenance"],
                                                             "verification": _verification(r)}))
    return out


def board_json(rows: list[dict], groups: list[dict], vgroups: list[dict], generated: str, skipped: list[str]) -> str:
    """``board.json``: the export of every ranked row, the two overall rankings and the left-out submissions."""
    export = {"generated": generated, "entries": [_export_row(r) for r in rows], "submissions": _submissions(rows),
              "overall": groups,
              "overall_verified": vgroups, "not_shown": skipped}
    return json.dumps(export, indent=1, sort_keys=True, ensure_ascii=False)
