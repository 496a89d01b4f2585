"""Reference rows computed by the board: ``prior``, ``majority`` and ``uniform`` from the training split.

The same predictors and the same rule as the semsoft ``reference_predictor`` filter
(:mod:`semcal_eval.semsoft.filters`): binary soft-label tasks use the mean training annotator fraction
(:func:`semcal_eval.core.recalibration.prior_rate`; majority = 1 if that rate is >= 0.5), other tasks the
training class frequencies (:func:`~semcal_eval.core.recalibration.prior_predictor`, add-one smoothed) and the
most frequent training class (:func:`~semcal_eval.core.recalibration.majority_predictor`); ``uniform`` is 1/K.
Gold labels and soft targets of the evaluated documents come from the dataset (:mod:`.dataset_check`), so a
submitted reference row can neither be faked nor left out: the board ignores submitted reference rows.
"""

from __future__ import annotations

import numpy as np

from semcal_eval.core import recalibration
from semcal_eval.core.records import classification_record, first_gold
from semcal_eval.semsoft.rows import REFERENCES

from .dataset_check import TaskDocs

__all__ = ["KINDS", "reference_records"]

KINDS = REFERENCES  # the rows table's model-free rows (Contract 3: reference predictors are filters)


def reference_records(docs: TaskDocs, doc_ids: list[int]) -> dict[str, list[dict]]:
    """{kind: one classification record per document of ``doc_ids``} for the task's reference predictors.

    Empty for tasks without labels to predict (QA: no ``doc_to_choice``). ``prior``/``majority`` are left out
    when the task has no training split (only ``uniform`` needs none).
    """
    k = docs.n_classes
    if not k or k < 2 or not doc_ids:
        return {}
    n = len(doc_ids)
    golds = [docs.gold(i) for i in doc_ids]
    softs = [docs.soft(i) for i in doc_ids]
    if any(g is None for g, s in zip(golds, softs) if s is None):
        return {}
    rows: dict[str, np.ndarray] = {"uniform": recalibration.uniform_predictor(k, n)}
    if softs[0] is not None and docs.train_soft:
        rate = float(recalibration.prior_rate(docs.train_soft))
        for kind, p1 in (("prior", rate), ("majority", float(rate >= 0.5))):
            rows[kind] = np.tile([1.0 - p1, p1], (n, 1))
    else:
        train = [first_gold(g) for g in docs.train_golds if g is not None]
        if train:
            rows["prior"] = recalibration.prior_predictor(np.asarray(train), k, n)
            rows["majority"] = recalibration.majority_predictor(np.asarray(train), k, n)
    return {
        kind: [classification_record(p, g, s) for p, g, s in zip(rows[kind], golds, softs)]
        for kind in KINDS if kind in rows
    }
