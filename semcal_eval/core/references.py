"""The model-free reference predictors ``prior``, ``majority`` and ``uniform``: the one rule both the semsoft
``reference_predictor`` filter (:mod:`semcal_eval.semsoft.filters`) and the board's own reference rows
(:mod:`leaderboards.references`) compute them by.

* A binary soft-label task (the evaluated documents carry an annotator fraction, and the training split has
  them too): ``prior`` = the mean training annotator fraction as P(positive)
  (:func:`~semcal_eval.core.recalibration.prior_rate`, no smoothing); ``majority`` = all mass on the positive
  class when that rate is >= 0.5, else on the negative one.
* Any other classification task: ``prior`` = the training class frequencies, add-one smoothed
  (:func:`~semcal_eval.core.recalibration.prior_predictor`), ``majority`` = one-hot on the most frequent training
  class (:func:`~semcal_eval.core.recalibration.majority_predictor`; ties -> lowest index). A training gold
  with several acceptable labels counts as its first one (:func:`~semcal_eval.core.records.first_gold`).
* ``uniform`` = 1/K, needing no training split.

Per document and from the training split only, so neither sharding nor the evaluated documents change them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Union

import numpy as np

from . import recalibration
from .records import first_gold

__all__ = ["KINDS", "NEEDS_TRAINING", "reference_probs", "reference_rows"]

#: training labels, or a callable that reads them (called only when the rule needs them: a task's training
#: split is then read lazily, e.g. never for ``uniform``)
Training = Union[Iterable[Any], Callable[[], Iterable[Any]]]

#: every reference predictor, in the rows table's order (semcal_eval.semsoft.rows.REFERENCES names the same)
KINDS: tuple[str, ...] = ("prior", "majority", "uniform")
#: the ones that read the training split
NEEDS_TRAINING: frozenset[str] = frozenset({"prior", "majority"})


def _read(train: Training) -> Iterable[Any]:
    return train() if callable(train) else train


def _once(train: Training) -> Training:
    if not callable(train):
        return train
    memo: list = []

    def read():
        if not memo:
            memo.append(list(train()))
        return memo[0]

    return read


def reference_probs(kind: str, n_classes: int, n_docs: int, *, train_golds: Training = (),
                    train_soft: Training = (), soft: bool = False) -> np.ndarray | None:
    """The (n_docs, n_classes) probabilities of reference predictor ``kind`` for every evaluated document.

    ``train_golds``: the training split's gold labels (an index, or a list of acceptable indices; None skipped);
    ``train_soft``: its annotator fractions (None skipped); either may be a callable returning them, called
    only when the rule reads it; ``soft``: the evaluated documents carry annotator
    fractions (then, with ``train_soft``, the binary soft-label rule applies). Returns None when ``kind`` needs
    the training split and there is nothing to read from it.

    >>> reference_probs("prior", 2, 1, train_soft=[0.2, 0.4], soft=True).round(4).tolist()
    [[0.7, 0.3]]
    >>> reference_probs("majority", 3, 1, train_golds=[2, [1, 0], 2]).tolist()
    [[0.0, 0.0, 1.0]]
    >>> reference_probs("prior", 3, 1) is None
    True
    """
    if kind not in KINDS:
        raise ValueError(f"reference predictor {kind!r} must be one of {KINDS}")
    if kind == "uniform":
        return recalibration.uniform_predictor(n_classes, n_docs)
    rates = [t for t in _read(train_soft) if t is not None] if soft else []
    if rates:
        rate = float(recalibration.prior_rate(rates))
        p1 = rate if kind == "prior" else float(rate >= 0.5)
        return np.tile([1.0 - p1, p1], (int(n_docs), 1))
    train = [first_gold(g) for g in _read(train_golds) if g is not None]
    if not train:
        return None
    fn = recalibration.prior_predictor if kind == "prior" else recalibration.majority_predictor
    return np.asarray(fn(np.asarray(train), n_classes, n_docs))


def reference_rows(n_classes: int, n_docs: int, *, train_golds: Training = (),
                   train_soft: Training = (), soft: bool = False,
                   kinds: Iterable[str] = KINDS) -> dict[str, np.ndarray]:
    """{kind: :func:`reference_probs`} for each of ``kinds`` that can be computed (``prior`` / ``majority``
    are left out without a training split), in ``kinds`` order; each training input is read at most once."""
    train_golds, train_soft = _once(train_golds), _once(train_soft)
    out = {}
    for kind in kinds:
        p = reference_probs(kind, n_classes, n_docs, train_golds=train_golds, train_soft=train_soft, soft=soft)
        if p is not None:
            out[kind] = p
    return out
