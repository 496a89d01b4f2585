"""Stock ``multiple_choice`` variants scored with semcal's metrics (the ``*_base`` tasks).

lm-eval's own loglikelihood requests give one full-label log-likelihood per choice; the record is the softmax
over them, so the stock baseline is scored with the same metric table as the semsoft rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from semcal_eval.core.records import classification_record


def mc_record(lls, gold, soft: float | None = None) -> dict:
    """The per-document record of a multiple_choice document: probs = softmax over the choices' full-label
    log-likelihoods. ``soft`` (binary soft-label tasks) is the annotator fraction of the positive class, index 1."""
    lls = np.asarray(lls, dtype=float)
    p = np.exp(lls - lls.max())
    return classification_record(p / p.sum(), gold, soft)


def make_mc_process_results(gold_fn: Callable, metrics: Iterable[str], soft_fn: Callable | None = None) -> Callable:
    """process_results for stock ``multiple_choice`` variants: the same record under every metric name, so the
    logs are recomputable. ``soft_fn(doc)`` (optional) gives the annotator fraction of the positive class."""
    names = tuple(metrics)

    def process_results(doc, results):
        soft = soft_fn(doc) if soft_fn is not None else None
        record = mc_record([ll for ll, _ in results], gold_fn(doc), soft)
        return {m: record for m in names}

    return process_results
