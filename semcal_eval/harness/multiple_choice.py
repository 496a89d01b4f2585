"""Stock ``multiple_choice`` variants scored with semcal's metrics (the ``*_base`` tasks).

lm-eval's own loglikelihood requests give one full-label log-likelihood per choice; the record is the softmax
over them, so the stock baseline is scored with the same metric table as the semsoft rows.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from semcal_eval.core import metric_table as T
from semcal_eval.core.records import classification_record
from semcal_eval.harness.base import metric_values


def mc_record(lls, gold, soft: float | None = None) -> dict:
    """The per-document record of a multiple_choice document: probs = softmax over the choices' full-label
    log-likelihoods. ``soft`` (binary soft-label tasks) is the annotator fraction of the positive class, index 1."""
    lls = np.asarray(lls, dtype=float)
    p = np.exp(lls - lls.max())
    return classification_record(p / p.sum(), gold, soft)


def make_mc_process_results(gold_fn: Callable, kind: str, soft_fn: Callable | None = None) -> Callable:
    """process_results for stock ``multiple_choice`` variants: the same record under each of the headline
    metrics of ``kind`` and their stderrs (:func:`semcal_eval.core.metric_table.lm_eval_metric_names`, no
    fitted parameters), so the logs are recomputable. ``soft_fn(doc)`` (optional) gives the annotator fraction
    of the positive class. A stock task's process_results is a plain function, so its YAML must declare exactly
    these names (tests/test_metric_table.py)."""
    names = tuple(T.lm_eval_metric_names(kind, ()))

    def process_results(doc, results):
        soft = soft_fn(doc) if soft_fn is not None else None
        record = mc_record([ll for ll, _ in results], gold_fn(doc), soft)
        return metric_values(names, record)

    return process_results
