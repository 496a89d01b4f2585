"""Hooks shared by several task folders (reached through each folder's utils.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np


def mc_item(lls, gold, soft: float | None = None) -> dict:
    """Contract-1 item from multiple_choice log-likelihoods: probs = softmax over the choices' full-label lls.

    ``soft`` (binary soft-label tasks) is the annotator fraction for the positive class, index 1."""
    lls = np.asarray(lls, dtype=float)
    p = np.exp(lls - lls.max())
    item = {"probs": (p / p.sum()).tolist(), "gold": gold}
    if soft is not None:
        t = float(soft)
        if not 0.0 <= t <= 1.0:  # also rejects NaN
            raise ValueError(f"soft target {soft!r} is outside [0, 1]")
        if len(lls) != 2:
            raise ValueError(f"a soft target needs exactly 2 choices (positive class = index 1), got {len(lls)}")
        item["soft"] = t
    return item


def make_mc_process_results(gold_fn: Callable, metrics: Iterable[str], soft_fn: Callable | None = None) -> Callable:
    """process_results for stock ``multiple_choice`` variants: lm-eval's own loglikelihood requests, scored
    with semcal's calibration metrics (the same item under every metric name, so logs are recomputable).

    ``soft_fn(doc)`` (optional) gives the annotator fraction of the positive class, stored as the item's
    ``soft`` so the soft-label metrics (soft Brier, soft ECE, ...) apply."""
    names = tuple(metrics)

    def process_results(doc, results):
        soft = soft_fn(doc) if soft_fn is not None else None
        item = mc_item([ll for ll, _ in results], gold_fn(doc), soft)
        return {m: item for m in names}

    return process_results
