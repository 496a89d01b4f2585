"""Two-fold cross-fitting: the one definition of the folds and of "fit on the other fold, apply to this one".

Every row that is fitted on the evaluated documents themselves uses it: the cross-fitted temperature step
(:func:`semcal_eval.run_rows.temperature_step`, called by the ``constrained_ts`` / ``semsoft_ts`` filter, the stock
tasks' ``_ts`` rows and the board's re-check :func:`leaderboards.spotcheck.check_crossfit`), the stock tasks'
``prior`` / ``majority`` rows, the ``semsoft_tuned`` row when it has too few validation documents
(:class:`~semcal_eval.semsoft.filters.SemSoftTuned`), the QA ``<estimator>_iso`` rows
(:func:`semcal_eval.qa.estimators.crossfit_calibrate`) and the board's re-check of the tuned row
(:func:`leaderboards.spotcheck.check_tuned_row`).

The folds: the documents in their canonical order (sorted by lm-eval's ``doc_id``; with contiguous ids
0..n-1 the fold is ``doc_id % 2``), fold = position % 2. They depend only on the documents' order, so
data-parallel sharding does not move them. This is scikit-learn's
``PredefinedSplit(test_fold=folds(n))``: split ``k`` fits on the documents of the other fold and is applied
to fold ``k`` (tests/test_crossfit.py checks the two give the same index sets); it is written in numpy here so
that the filters do not import ``sklearn.model_selection`` on lm-eval's task-loading path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

__all__ = ["N_FOLDS", "folds", "fold_of", "splits", "crossfit", "skip_reason"]

#: the number of folds (documents of fold k are scored by what was fitted on the others)
N_FOLDS = 2


def skip_reason(n: int, min_fit: int) -> str | None:
    """Why a cross-fitted row cannot be fitted on ``n`` documents (each fold is fitted on the others, so every
    fold needs ``min_fit``: ``n >= N_FOLDS * min_fit``), or None when it can. The filters skip such a row on a
    short ``--limit`` run and the board accepts the skip only under the same condition."""
    need = N_FOLDS * min_fit
    if n >= need:
        return None
    return (f"cross-fitted rows need at least {need} documents ({min_fit} per fold), got {n}; "
            "raise --limit to get these rows")


def folds(n: int) -> np.ndarray:
    """The fold of each of ``n`` documents in canonical order: position % 2.

    >>> folds(5).tolist()
    [0, 1, 0, 1, 0]
    """
    if int(n) != n or n < 0:
        raise ValueError(f"folds: n must be a number of documents >= 0, got {n!r}")
    return np.arange(int(n)) % N_FOLDS


def fold_of(position: int) -> int:
    """The fold of the document at ``position`` of the canonical order (:func:`folds` of one document).

    >>> fold_of(0), fold_of(7)
    (0, 1)
    """
    return int(position) % N_FOLDS


def splits(n: int | None = None, fold: Sequence[int] | None = None) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """``(k, fit_on, apply_to)`` for k = 0, 1: the positions to fit on (every other fold) and the positions of
    fold ``k`` to apply the fit to, both ascending. ``fold`` overrides :func:`folds` (``n`` documents) with a
    given 0/1 assignment.

    >>> [(k, a.tolist(), b.tolist()) for k, a, b in splits(5)]
    [(0, [1, 3], [0, 2, 4]), (1, [0, 2, 4], [1, 3])]
    """
    if fold is None:
        if n is None:
            raise ValueError("splits: pass n (documents) or fold (a 0/1 fold per document)")
        f = folds(n)
    else:
        f = np.asarray(fold)
        if f.ndim != 1 or (n is not None and len(f) != n):
            raise ValueError(f"splits: fold must be one 0/1 value per document, got shape {f.shape}")
        if f.size and not np.isin(f, range(N_FOLDS)).all():
            raise ValueError(f"splits: fold values must be in {list(range(N_FOLDS))}, "
                             f"got {sorted(set(f.tolist()))[:5]}")
    for k in range(N_FOLDS):
        yield k, np.flatnonzero(f != k), np.flatnonzero(f == k)


def crossfit(n: int, fit_apply: Callable[[int, np.ndarray, np.ndarray], Sequence[Any]],
             fold: Sequence[int] | None = None) -> list[Any]:
    """Out-of-fold values for ``n`` documents in canonical order: for each fold ``k`` (:func:`splits`),
    ``fit_apply(k, fit_on, apply_to)`` fits on the positions ``fit_on`` and returns one value per position
    of ``apply_to``; the result holds, at each position, the value its own fold got. A fold with no
    documents is not called.

    >>> crossfit(4, lambda k, fit_on, apply_to: [f"fold {k} fitted on {fit_on.tolist()}"] * len(apply_to))[:2]
    ['fold 0 fitted on [1, 3]', 'fold 1 fitted on [0, 2]']
    """
    out: list[Any] = [None] * int(n)
    for k, fit_on, apply_to in splits(n, fold):
        if not len(apply_to):
            continue
        vals = list(fit_apply(k, fit_on, apply_to))
        if len(vals) != len(apply_to):
            raise ValueError(f"crossfit: fold {k} returned {len(vals)} values for {len(apply_to)} documents")
        for i, v in zip(apply_to, vals):
            out[int(i)] = v
    return out
