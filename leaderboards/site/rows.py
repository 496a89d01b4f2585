"""What one board row shows, whatever the output (HTML, CSV/Markdown, JSON): labels, tiers, formatted values,
coverage, flags, and the stored fields each export carries."""

from __future__ import annotations

import hashlib
import json
import math

from semcal_eval.core import metric_table as T
from semcal_eval.core.records import CLASSIFICATION

from ..errors import SubmissionError
from ..ranking import RANKED
from ..recompute import NO_CI_ROLES

#: The board's metric columns: the headline roles of the metric table (the same for every record kind; which
#: metric fills a role depends on the kind, see :data:`semcal_eval.core.metric_table.ROLES`).
COLUMNS: tuple[str, ...] = tuple(T.ROLES[CLASSIFICATION])
_LABEL = {"ece": "ECE", "brier": "Brier", "nll": "NLL", "auroc": "AUROC", "acc": "Acc"}  # display names
#: How each tier is shown, and what it means (index legend and entry pages).
TIER_LABEL = {"verified": "verified", "spot-checked": "spot-checked", "self-reported": "self-reported, unverified"}
TIER_MEANING = {
    "verified": "the board ran the evaluation itself, with pinned settings (board evaluate)",
    "spot-checked": "a random sample of documents, drawn after submission with a board secret, was re-scored with the named model and agreed "
                    "within the stated tolerance",
    "self-reported": "every number is recomputed from the submitted logs, but the probabilities themselves "
                     "were not checked against the model",
}


class RenderError(SubmissionError):
    """The site could not be written (bad ``--out``, disk error); the previous site is left untouched.

    A :class:`SubmissionError` so the CLI reports it as one line with exit status 2."""


def _label(col: str) -> str:
    return _LABEL.get(col, col.upper())


def entry_slug(content_hash: str, task: str) -> str:
    """File-name-safe id of a (submission, task) page: hex only, so no path traversal is possible."""
    return hashlib.sha256(f"{content_hash}\x00{task}".encode()).hexdigest()[:16]


def _fmt(v, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:.{digits}f}"


def _ci(b: dict, col: str) -> str:
    lo, hi = b.get(f"{col}_ci_lo"), b.get(f"{col}_ci_hi")
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return ""
    return f"[{lo:.3f}, {hi:.3f}]"


def _split_size(r: dict):
    return r.get("n_split") or r["n_original"]


def _coverage(r: dict) -> str:
    size = _split_size(r)
    if r["limit"] is None:
        return f"{r['n_docs']}" if r["n_docs"] == size else f"{r['n_docs']} of {size}"
    lim = r["limit"]
    if isinstance(lim, float) and lim.is_integer():
        lim = int(lim)  # lm-eval records --limit 40 as 40.0
    return f"{r['n_docs']} of {size} (limit {lim})"


def _doc_set(r: dict) -> str:
    """Short label of a partial row's document set: rows with the same label are ranked together."""
    return r["doc_set_hash"][:8]


def _flags(r: dict) -> list[str]:
    out = []
    if r["degenerate"]:
        out.append(f"degenerate: {r['degenerate']}")
    if r["beats_prior"] is False:
        out.append("not better than class prior on Brier")
    if r["is_reference"]:
        out.append("reference predictor")
    out += _judge(r["board"])
    return out


def _judge(b: dict) -> list[str]:
    """A QA row's judge card (semcal_eval.qa.judge_card.board_fields): who graded, how far people agree with it
    on EVOUNA, and the accuracy corrected for its errors, or why not."""
    if not b.get("judge"):
        return []
    line = f"judge {b['judge']}"
    if isinstance(b.get("judge_agreement"), (int, float)):
        line += f": agrees with people on {b['judge_agreement']:.3f} (EVOUNA, systems it was not fit on)"
    if isinstance(b.get("acc_corrected"), (int, float)):
        line += (f"; accuracy corrected for its errors {b['acc_corrected']:.3f} {_ci(b, 'acc_corrected')}"
                 + (f", ECE {b['ece_corrected']:.3f}" if isinstance(b.get("ece_corrected"), (int, float)) else ""))
    elif b.get("judge_note"):
        line += f"; {b['judge_note']}"
    return [line]


def _text(v) -> str:
    # provenance values are the submitter's JSON: show scalars as they are, anything else as JSON text
    if v is None or isinstance(v, str):
        return v or ""
    return json.dumps(v, ensure_ascii=False, default=str)


_PATH_RE = None


def public(v):
    """``v`` with every absolute or home-relative file path cut to its last component (``…/name``): the board's
    own paths (its model cache, work folders) and a submitter's never reach the site (issue 34)."""
    global _PATH_RE
    import re

    if _PATH_RE is None:
        _PATH_RE = re.compile(r"(?<![\w.:/])(?:~|[A-Za-z]:)?(?:[/\\][^\s,;'\"=/\\]+)+[/\\]([^\s,;'\"=/\\]*)")
    if isinstance(v, str):
        return _PATH_RE.sub(lambda m: "…/" + m.group(1), v)
    if isinstance(v, dict):
        return {k: public(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [public(x) for x in v]
    return v


def _verification(r: dict) -> dict:
    """The stored verification record (JSON text or a dict) as a dict; anything else as {"note": text}."""
    v = r.get("verification")
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return {"note": v}
    if v is None or v == {}:
        return {}
    return v if isinstance(v, dict) else {"note": _text(v)}


def _board_fields(col: str) -> list[str]:
    """A column's stored values: the metric and, for roles with one, its CI bounds."""
    return [col] if col in NO_CI_ROLES else [col, f"{col}_ci_lo", f"{col}_ci_hi"]

_BOARD_FIELDS = [k for col in COLUMNS for k in _board_fields(col)]
_RANK_FIELDS = [f"{col}_rank{s}" for col in RANKED for s in ("", "_verified")]
