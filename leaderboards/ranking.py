"""Ranking rules of the board.

Entries are ranked only against entries on the **same document set** (issue 12, D5):

* a **full** entry covers the task's whole evaluation split (``coverage == "full"``, computed by the board
  from the split's true size; entries stored without the key count as full when ``n_docs`` equals
  ``n_split``, else ``n_original``). Full entries of one task, split and document set (doc-set hash: the
  documents and their labels) are ranked together; the main table and the overall view hold only them;
* a **partial** entry (a ``--limit`` run) is never ranked with full entries. It is ranked only among
  partial entries of the same task on the very same documents (same doc-set hash), in a separate
  "partial" view.

Within a rank group:

* every non-reference entry gets an **ECE rank** (the main metric: 15-bin ECE for classification,
  10-bin for QA) and a **Brier rank** (a proper score, which a constant predictor cannot game);
  lower is better, NaN ranks last, ties share the best rank ("1224" competition ranking);
* **tolerance ties** (issue 34): the spot check accepts any probability within ``TOLERANCE`` of the model's,
  so an entry's value is only known up to the change such an edit can make (:func:`tolerance_interval`:
  Brier ± (4·tol + K·tol²); ECE ± (tol + 2/N per document within tol of a bin edge); PRR between the worst
  and the best ordering of confidences within 2·tol of each other). Entries whose intervals overlap,
  chained in value order, are **tied** and share a rank, so an edit inside the tolerance never ranks a run
  above its honest twin;
* the same ranks are also computed among the group's **verified** entries only (``ece_rank_verified``,
  ``brier_rank_verified``; None for other tiers), so the site can restrict the ranking to them;
* an entry **beats the prior** when its Brier score is strictly below the class-prior reference row
  (filter ``prior``) scored on the same documents (same doc-set hash, the same submission preferred);
  without such a row the flag is "n/a";
* reference rows (filters ``prior``, ``majority``, ``uniform``) are shown, unranked, once per task and
  document set.

Overall view: full model rows grouped by (model, method, scoring filter); for each group the mean of its
per-task ranks (ECE and Brier) over the tasks it covers, with the count of tasks. Sorted by mean Brier
rank, then mean ECE rank: a proper score first, so collapsing confidence onto the base rate cannot buy a
top place. If a group has several submissions for one task the latest one counts.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict

import numpy as np

from semcal_eval.core import metric_table as T

from .tolerance import TOLERANCE

#: The ranked board columns (roles of the metric table, :data:`semcal_eval.core.metric_table.ROLES`), main
#: first: ECE (the main metric), Brier (a proper score beside it) and PRR.
RANKED = ("ece", "brier", "prr")
#: ranked columns where higher is better (ranked by the negated value): the direction of the role's metrics
RANKED_HIGHER = frozenset(role for role in RANKED if T.ROLE_HIGHER_IS_BETTER[role])
#: Verification tiers, most trusted first (set by the board at submit time, see docs/LEADERBOARD.md).
TIERS = ("verified", "spot-checked", "self-reported")
COVERAGES = ("full", "partial")
#: Tiers ranked in the default views (site table, Markdown, overall): the board re-ran or re-scored them.
TRUSTED = ("verified", "spot-checked")


def tier_of(e: dict) -> str:
    """The entry's tier; absent or unknown values count as the least trusted, ``self-reported``."""
    t = e.get("tier")
    return t if t in TIERS else "self-reported"


def coverage_of(e: dict) -> str:
    """``"full"`` or ``"partial"``: the board-computed key when stored, else n_docs against the split size."""
    c = e.get("coverage")
    if c in COVERAGES:
        return c
    size = e.get("n_split") or e.get("n_original")
    return "full" if size and e["n_docs"] == size else "partial"


def rank_group(e: dict) -> tuple:
    """The set of entries ``e`` is ranked against: (coverage, task, split, doc-set hash). Full runs too are
    ranked only on the same document set: the doc-set hash covers each document's hash (its fields, the label
    among them) and, for a stock task, the registration the documents were checked against (issue 43: a run on
    relabelled data ranked first beside runs on the real labels)."""
    return (coverage_of(e), e["task"], e.get("split") or "", e["doc_set_hash"])


#: Most classes of a classification task the Brier band allows for (the K·tol² term; GoEmotions has 28).
MAX_CLASSES = 100
#: ECE bins of the board's ECE column per record kind: the bins of each kind's ECE role (ece_uw15 / ece_uw10)
ECE_BINS = T.ROLE_BINS


def _prr_extreme(conf: np.ndarray, correct: np.ndarray, best: bool) -> float:
    """PRR when confidences within 2·tol of each other (single-linkage groups in sorted order) are ordered as
    favourably (``best``: wrong answers rejected first) or as unfavourably as an edit within tol allows."""
    from semcal_eval.core.metrics import prr

    order = np.argsort(conf, kind="stable")
    gaps = np.diff(conf[order]) > 2 * TOLERANCE
    group = np.empty(len(conf), dtype=int)
    group[order] = np.r_[0, np.cumsum(gaps)]
    y = correct.astype(bool)
    key = np.lexsort((conf, y if best else ~y, group))  # within a group: wrong first when best
    ranked = np.empty(len(conf))
    ranked[key] = np.arange(len(conf), dtype=float) / max(1, len(conf) - 1)  # PRR reads only the order
    with warnings.catch_warnings():  # an undefined PRR (one class) is NaN, handled by the caller
        warnings.simplefilter("ignore")
        return float(prr(y_true=correct, y_prob=ranked))


def tolerance_interval(e: dict, col: str) -> tuple[float, float]:
    """[lo, hi] of board column ``col`` over every edit of the entry's probabilities by at most ``TOLERANCE``
    each (tol), from its stored per-document confidences where the bound needs them:

    * Brier: per document |Σ_k (p_k+Δ_k−t_k)² − (p_k−t_k)²| ≤ 2·tol·Σ_k|p_k−t_k| + K·tol² ≤ 4·tol + K·tol²
      (Σ_k|p_k−t_k| ≤ 2 for two probability vectors; K ≤ MAX_CLASSES), and the mean keeps the bound;
    * ECE (equal-width bins): moving each confidence by ≤ tol changes each bin's |Σ (conf − correct)| by at most
      its count·tol, so the ECE by ≤ tol; a document within tol of a bin edge may change bins, which changes
      the two bins' sums by |conf − correct| ≤ 1 each: + 2/N per such document;
    * PRR (depends on the confidence order only): between :func:`_prr_extreme` worst and best.

    Not covered: an edit that flips a top label (top-2 probabilities within 2·tol) changes that document's
    correctness for ECE and PRR (Brier, over the whole vector, is covered)."""
    v = e["board"].get(col, math.nan)
    if v is None or math.isnan(v):
        return (math.nan, math.nan)
    conf, correct = e.get("conf"), e.get("correct")
    have = conf is not None and correct is not None and len(conf) == len(correct) and len(conf) > 0
    if col == "brier":
        band = 4 * TOLERANCE + MAX_CLASSES * TOLERANCE**2
        return (v - band, v + band)
    if col == "ece":
        band = TOLERANCE
        if have:
            c = np.asarray(conf, dtype=float)
            n_bins = ECE_BINS.get(e.get("kind"), ECE_BINS[T.CLASSIFICATION])
            edges = np.arange(1, n_bins) / n_bins
            near = np.min(np.abs(c[:, None] - edges[None, :]), axis=1) <= TOLERANCE
            band += 2.0 * float(near.sum()) / len(c)
        return (v - band, v + band)
    if col == "prr" and have:
        c, y = np.asarray(conf, dtype=float), np.asarray(correct, dtype=float)
        lo, hi = _prr_extreme(c, y, best=False), _prr_extreme(c, y, best=True)
        if math.isnan(lo) or math.isnan(hi):
            return (v, v)
        return (min(lo, v), max(hi, v))
    return (v, v)


def _tied_ranks(intervals: list[tuple[float, float]], values: list[float]) -> list[int]:
    """Competition ranks ("1224"), ascending by value, NaN last, where an entry whose interval overlaps the
    interval of an entry of the current tie group (chained in value order) joins that group's rank."""
    order = sorted(range(len(values)), key=lambda i: (math.isnan(values[i]), values[i] if not math.isnan(values[i]) else 0.0))
    ranks = [0] * len(values)
    group_hi, group_rank = -math.inf, 0
    for pos, i in enumerate(order):
        lo, hi = intervals[i]
        if math.isnan(values[i]):
            ranks[i] = group_rank if pos and math.isnan(values[order[pos - 1]]) else pos + 1
            group_rank = ranks[i]
            continue
        if pos and lo <= group_hi:
            ranks[i] = group_rank
            group_hi = max(group_hi, hi)
        else:
            ranks[i] = group_rank = pos + 1
            group_hi = hi
    return ranks


def _rank(values: list[float]) -> list[int]:
    """Competition ranks ("1224"), ascending, NaN last, without tolerance bands (equal values tie)."""
    return _tied_ranks([(v, v) for v in values], values)


def rank_entries(entries: list[dict]) -> list[dict]:
    """Annotate entries (from :func:`leaderboards.db.load_entries`) in place with ``coverage``, ``tier``,
    ``ece_rank``, ``brier_rank`` (within the entry's :func:`rank_group`), ``ece_rank_verified``,
    ``brier_rank_verified``, ``beats_prior`` (True/False/None) and ``prior_brier``; drop duplicate reference
    rows. Returns the kept rows: full before partial, then by task (partial: by document set), model rows
    first, best ECE first."""
    priors: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for e in entries:
        e["coverage"], e["tier"] = coverage_of(e), tier_of(e)
        if e["is_reference"] and e["filter"] == "prior":
            priors[(e["task"], e["doc_set_hash"])].append(e)
    kept: list[dict] = []
    seen_ref: set[tuple] = set()
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for e in entries:
        for col in RANKED:
            e[f"{col}_rank"] = e[f"{col}_rank_verified"] = None
        e["beats_prior"] = e["prior_brier"] = None
        if e["is_reference"]:
            k = (e["task"], e["filter"], e["doc_set_hash"])
            if k not in seen_ref:  # a reference row shown once per task and document set
                seen_ref.add(k)
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
        groups[rank_group(e)].append(e)
        kept.append(e)
    for rows in groups.values():
        # default ranks: among trusted entries (verified + spot-checked); self-reported entries are ranked only
        # among themselves, in their own table (issue 25: a fabricated run must never rank beside a checked one)
        trusted = [e for e in rows if e["tier"] in TRUSTED]
        self_rep = [e for e in rows if e["tier"] not in TRUSTED]
        verified = [e for e in rows if e["tier"] == "verified"]
        for e in rows:
            e["ranked_among"] = "verified+spot-checked" if e["tier"] in TRUSTED else "self-reported"
        for col in RANKED:
            sign = -1.0 if col in RANKED_HIGHER else 1.0
            iv = {id(e): tuple(sorted(sign * x for x in tolerance_interval(e, col))) for e in rows}
            for subset, key in ((trusted, "rank"), (self_rep, "rank"), (verified, "rank_verified")):
                vals = [sign * e["board"].get(col, math.nan) for e in subset]
                for e, r in zip(subset, _tied_ranks([iv[id(e)] for e in subset], vals)):
                    e[f"{col}_{key}"] = r
    kept.sort(key=lambda e: (e["coverage"] != "full", e["task"], "" if e["coverage"] == "full" else e["doc_set_hash"],
                             e["is_reference"], e.get("ece_rank") or 0, e["entry_id"]))
    return kept


def identity(e: dict) -> tuple:
    """An entry's owner-scoped identity: (model from model_args, revision, method, submitter). The displayed
    name is derived from it; rows of one identity are one line of the overall view (the latest counts), and
    no submission of another identity can replace them. Entries stored without an identity (older boards) and
    anonymous ones are their own identity (keyed by submission), so they never merge with anyone's."""
    sub = e.get("submitter") or ""
    if not sub or sub == "anonymous" or not e.get("model_id"):
        return ("", "", e["method"], f"#{e['submission_id']}")
    return (e["model_id"], e.get("revision") or "", e["method"], sub)


def overall(entries: list[dict], verified_only: bool = False, tiers: tuple = TRUSTED) -> list[dict]:
    """Cross-task summary of ranked **full** model rows of ``tiers`` (default: verified + spot-checked; see
    module docstring); with ``verified_only``, of verified rows by their ranks among verified entries."""
    suffix = "_verified" if verified_only else ""
    allowed = ("verified",) if verified_only else tiers
    latest: dict[tuple, dict] = {}
    for e in entries:
        if e["is_reference"] or coverage_of(e) != "full" or tier_of(e) not in allowed:
            continue
        k = (identity(e), e["filter"], e["task"])
        if k not in latest or e["submission_id"] > latest[k]["submission_id"]:
            latest[k] = e
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for (ident, filt, _task), e in latest.items():
        groups[(ident, filt)].append(e)
    out = []
    for (ident, filt), rows in groups.items():
        last = max(rows, key=lambda r: r["submission_id"])
        model, method = last["model_name"], last["method"]
        out.append(
            {
                "submitter": last.get("submitter") or "",
                "model_name": model,
                "method": method,
                "filter": filt,
                "n_tasks": len(rows),
                "tasks": sorted(r["task"] for r in rows),
                "tiers": sorted({tier_of(r) for r in rows}, key=TIERS.index),
                "mean_ece_rank": sum(r[f"ece_rank{suffix}"] for r in rows) / len(rows),
                "mean_brier_rank": sum(r[f"brier_rank{suffix}"] for r in rows) / len(rows),
                "beats_prior_all": all(r["beats_prior"] is True for r in rows),
                "degenerate_any": any(r["degenerate"] for r in rows),
            }
        )
    out.sort(key=lambda g: (g["mean_brier_rank"], g["mean_ece_rank"], g["model_name"], g["method"], g["filter"]))
    return out
