"""Reference rows computed by the board: ``prior``, ``majority`` and ``uniform`` from the training split.

The predictors and their rule are :mod:`semcal_eval.core.references`, the same code the semsoft
``reference_predictor`` filter (:mod:`semcal_eval.semsoft.filters`) runs: binary soft-label tasks use the mean
training annotator fraction (majority = 1 if that rate is >= 0.5), other tasks the training class frequencies
(add-one smoothed) and the most frequent training class; ``uniform`` is 1/K. Gold labels and soft targets of
the evaluated documents and of the training split come from the dataset, read by the task's gold reader
(:mod:`.dataset_check`), so a submitted reference row can neither be faked nor left out: the board ignores
submitted reference rows.
"""

from __future__ import annotations

from semcal_eval.core.records import classification_record
# KINDS: the reference predictors, named once (semcal_eval.core.references); the board computes every one of them
from semcal_eval.core.references import KINDS, reference_rows

from .dataset_check import TaskDocs

__all__ = ["KINDS", "reference_records"]


def reference_records(docs: TaskDocs, doc_ids: list[int]) -> dict[str, list[dict]]:
    """{kind: one classification record per document of ``doc_ids``} for the task's reference predictors.

    Empty for tasks without labels to predict (QA: no ``doc_to_choice``). ``prior``/``majority`` are left out
    when the task has no training split (only ``uniform`` needs none).
    """
    k = docs.n_classes
    if not k or k < 2 or not doc_ids:
        return {}
    golds = [docs.gold(i) for i in doc_ids]
    softs = [docs.soft(i) for i in doc_ids]
    if any(g is None for g, s in zip(golds, softs) if s is None):
        return {}
    rows = reference_rows(k, len(doc_ids), train_golds=lambda: docs.train_golds, train_soft=lambda: docs.train_soft,
                          soft=softs[0] is not None, kinds=KINDS)
    return {kind: [classification_record(p, g, s) for p, g, s in zip(probs, golds, softs)]
            for kind, probs in rows.items()}
