"""Choosing (τ, K, label embedding) for the ``semsoft_tuned`` row, from documents that are never reported.

Every configuration of the grid is scored by the backend from the one forward pass of each document
(:class:`~semcal_eval.semsoft.spec.SemSoftResponse.grid`), so tuning costs no model pass. The choice is

    c* = argmin_c  S(c; D_tune)   subject to  macro-F1(c; D_tune) ≥ macro-F1(constrained; D_tune)

with S a strictly proper score: the multiclass Brier score by default (``brier_mc``; ``soft_brier``, the
squared error against the annotator fraction, on soft-label tasks), or the log loss with
``tune_by: nll``. Why Brier by default: both are proper, so neither rewards the flattening towards the base
rate that ECE alone rewards; but at τ > 0 a few documents get no mass on their gold label, and the log loss
of those few (−log 1e−15 each) then decides the whole choice — on Qwen2.5-Coder-1.5B's GoEmotions validation
split NLL picks τ = 0 and twice the ECE of the Brier choice, with the lower NLL not carried by the other
documents (docs/SWEEP.md). Brier is bounded per document, so the choice reflects all of them; the NLL column
still reports the zero-mass documents. The macro-F1 guard keeps the choice from buying calibration with
discrimination (the failure issue 14 measured); when no configuration meets it, the best-scoring one is taken
and the record says ``tuned_guard: false``. Ties go to the earlier
configuration of the grid's order (embedding, K, τ as given), so the choice is deterministic.

D_tune is (``tuning_plan``) either validation-split documents whose prompts are not among the evaluated
ones, or, when too few such documents exist (the evaluated split *is* the validation split, or the task has
none), the other fold of a 2-fold split of the evaluated documents by doc_id — the same folds as
``crossfit_temperature``. Pure numpy; the lm-eval glue is ``semcal_eval.semsoft.filters.SemSoftTuned``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from semcal_eval.core import metric_table as T
from semcal_eval.core.records import classification_record, to_arrays

from .rows import tau_key
from .scoring import SemSoftError

__all__ = ["GridPoint", "grid_points", "Choice", "select", "MIN_TUNE_DOCS", "CRITERIA"]

#: ``tune_by`` -> (the metric on hard-label tasks, the metric on soft-label tasks): the metric table's proper
#: scores by their ``tune_by`` (:data:`semcal_eval.core.metric_table.TUNING_CRITERIA`)
CRITERIA = {by: (m[T.CLASSIFICATION], m["soft"]) for by, m in T.TUNING_CRITERIA.items()}

#: fewest tuning documents a choice is made on (per fold when cross-fitting)
MIN_TUNE_DOCS = 10


class GridPoint(NamedTuple):
    """One configuration of the tuning grid, the typed key of ``SemSoftResponse.grid`` (never parsed back from a
    string); ``str()`` gives the display form ``first/k100/tau0.2``."""

    label_embedding: str
    top_k: int
    tau: float

    def __str__(self) -> str:
        return f"{self.label_embedding}/k{int(self.top_k)}/tau{tau_key(self.tau)}"


def grid_points(grid: dict) -> list[GridPoint]:
    """The grid's configurations in its order: embedding, then K, then τ."""
    return [GridPoint(e, int(k), float(t)) for e in grid["label_embeddings"] for k in grid["top_k"]
            for t in grid["taus"]]


@dataclass
class Choice:
    """The chosen configuration and how it was chosen (``table``: key → (criterion, macro-F1 or None))."""

    key: GridPoint
    criterion: str
    score: float
    n_tune: int
    guard: bool
    table: dict[GridPoint, tuple[float, float | None]] = field(default_factory=dict)

    def fields(self) -> dict:
        """What each reported record of the row carries (``tuned_*``)."""
        p = self.key
        return {"tuned_tau": p.tau, "tuned_top_k": p.top_k, "tuned_embedding": p.label_embedding,
                "tuned_n": self.n_tune, "tuned_guard": self.guard}


def _score(probs: Sequence, golds: Sequence, softs: Sequence | None, names: list[str]) -> dict[str, float]:
    recs = [classification_record(p, g, s) for p, g, s in zip(probs, golds, softs or [None] * len(probs))]
    a = to_arrays(recs)
    return {n: T.compute(n, a) for n in names}


def select(grid_rows: Sequence[dict], baseline_rows: Sequence, golds: Sequence, softs: Sequence | None = None,
           keys: Sequence[GridPoint] | None = None, by: str = "brier") -> Choice:
    """The configuration of ``grid_rows`` (one ``{GridPoint: probs}`` per tuning document) chosen as the module
    docstring says, with ``baseline_rows`` the constrained distributions of the same documents."""
    if len(grid_rows) < MIN_TUNE_DOCS:
        raise SemSoftError(f"semsoft_tuned needs at least {MIN_TUNE_DOCS} tuning documents, got {len(grid_rows)}")
    keys = list(keys or grid_rows[0])
    missing = [k for k in keys if any(k not in r for r in grid_rows)]
    if missing:
        raise SemSoftError(f"tuning responses lack grid configurations {missing[:3]}: every request must carry the "
                           "same grid")
    if by not in CRITERIA:
        raise SemSoftError(f"tune_by={by!r} is unknown: choose one of {sorted(CRITERIA)}")
    soft = softs is not None and all(s is not None for s in softs)
    crit = CRITERIA[by][1 if soft else 0]
    names = [crit] if soft else [crit, "macro_f1"]
    floor = None if soft else _score(baseline_rows, golds, None, ["macro_f1"])["macro_f1"]
    table = {}
    for k in keys:
        m = _score([r[k] for r in grid_rows], golds, softs if soft else None, names)
        table[k] = (m[crit], m.get("macro_f1"))
    ok = [k for k in keys if floor is None or table[k][1] >= floor - 1e-12]
    pool = ok or keys
    best = min(pool, key=lambda k: (table[k][0], pool.index(k)))
    return Choice(key=best, criterion=crit, score=table[best][0], n_tune=len(grid_rows), guard=bool(ok), table=table)
