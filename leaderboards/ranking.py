"""Ranking rules of the board.

Per task:

* every non-reference entry gets an **ECE rank** (the main metric: 15-bin ECE for classification,
  10-bin for QA) and a **Brier rank** (a proper score, which a constant predictor cannot game);
  lower is better, NaN ranks last, ties share the best rank ("1224" competition ranking);
* an entry **beats the prior** when its Brier score is strictly below the class-prior reference row
  (filter ``prior``) scored on the same documents (same doc-set hash, the same submission preferred);
  without such a row the flag is "n/a";
* reference rows (filters ``prior``, ``majority``, ``uniform``) are shown, unranked, once per task and
  document set.

Overall view: model rows grouped by (model, method, scoring filter); for each group the mean of its
per-task ranks (ECE and Brier) over the tasks it covers, with the count of tasks. Sorted by mean Brier
rank, then mean ECE rank: a proper score first, so collapsing confidence onto the base rate cannot buy a
top place. If a group has several submissions for one task the latest one counts.
"""

from __future__ import annotations

import math
from collections import defaultdict

#: The ranked board columns, main first: ECE (the main metric) and Brier (a proper score beside it).
RANKED = ("ece", "brier")


def _rank(values: list[float]) -> list[int]:
    """Competition ranks ("1224"), ascending, NaN last."""
    key = [(math.isnan(v), v if not math.isnan(v) else 0.0) for v in values]
    order = sorted(range(len(values)), key=lambda i: key[i])
    ranks = [0] * len(values)
    for pos, i in enumerate(order):
        if pos and key[i] == key[order[pos - 1]]:
            ranks[i] = ranks[order[pos - 1]]
        else:
            ranks[i] = pos + 1
    return ranks


def rank_entries(entries: list[dict]) -> list[dict]:
    """Annotate entries (from :func:`leaderboards.db.load_entries`) in place with ``ece_rank``,
    ``brier_rank``, ``beats_prior`` (True/False/None) and ``prior_brier``; drop duplicate reference rows.
    Returns the kept rows, model rows first within each task."""
    priors: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for e in entries:
        if e["is_reference"] and e["filter"] == "prior":
            priors[(e["task"], e["doc_set_hash"])].append(e)
    kept: list[dict] = []
    seen_ref: set[tuple] = set()
    by_task: dict[str, list[dict]] = defaultdict(list)
    for e in entries:
        if e["is_reference"]:
            k = (e["task"], e["filter"], e["doc_set_hash"])
            if k in seen_ref:
                continue
            seen_ref.add(k)
            e["ece_rank"] = e["brier_rank"] = None
            e["beats_prior"] = None
            e["prior_brier"] = None
            kept.append(e)
            continue
        cands = priors.get((e["task"], e["doc_set_hash"]), [])
        same = [p for p in cands if p["submission_id"] == e["submission_id"]]
        prior = (same or cands or [None])[0]
        e["prior_brier"] = prior["board"]["brier"] if prior else None
        if prior is None or math.isnan(e["prior_brier"]) or math.isnan(e["board"]["brier"]):
            e["beats_prior"] = None
        else:
            e["beats_prior"] = e["board"]["brier"] < e["prior_brier"]
        by_task[e["task"]].append(e)
        kept.append(e)
    for rows in by_task.values():
        for col in RANKED:
            for e, r in zip(rows, _rank([e["board"][col] for e in rows])):
                e[f"{col}_rank"] = r
    kept.sort(key=lambda e: (e["task"], e["is_reference"], e.get("ece_rank") or 0, e["entry_id"]))
    return kept


def overall(entries: list[dict]) -> list[dict]:
    """Cross-task summary of ranked model rows (see module docstring)."""
    latest: dict[tuple, dict] = {}
    for e in entries:
        if e["is_reference"]:
            continue
        k = (e["model_name"], e["method"], e["filter"], e["task"])
        if k not in latest or e["submission_id"] > latest[k]["submission_id"]:
            latest[k] = e
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for (model, method, filt, _task), e in latest.items():
        groups[(model, method, filt)].append(e)
    out = []
    for (model, method, filt), rows in groups.items():
        out.append(
            {
                "model_name": model,
                "method": method,
                "filter": filt,
                "n_tasks": len(rows),
                "tasks": sorted(r["task"] for r in rows),
                "mean_ece_rank": sum(r["ece_rank"] for r in rows) / len(rows),
                "mean_brier_rank": sum(r["brier_rank"] for r in rows) / len(rows),
                "beats_prior_all": all(r["beats_prior"] is True for r in rows),
                "degenerate_any": any(r["degenerate"] for r in rows),
            }
        )
    out.sort(key=lambda g: (g["mean_brier_rank"], g["mean_ece_rank"], g["model_name"], g["method"], g["filter"]))
    return out
