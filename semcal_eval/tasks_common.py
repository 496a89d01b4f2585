"""Hooks shared by several task folders (reached through each folder's utils.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np


def mc_item(lls, gold) -> dict:
    """Contract-1 item from multiple_choice log-likelihoods: probs = softmax over the choices' full-label lls."""
    lls = np.asarray(lls, dtype=float)
    p = np.exp(lls - lls.max())
    return {"probs": (p / p.sum()).tolist(), "gold": gold}


def make_mc_process_results(gold_fn: Callable, metrics: Iterable[str]) -> Callable:
    """process_results for stock ``multiple_choice`` variants: lm-eval's own loglikelihood requests, scored
    with semcal's calibration metrics (the same item under every metric name, so logs are recomputable)."""
    names = tuple(metrics)

    def process_results(doc, results):
        item = mc_item([ll for ll, _ in results], gold_fn(doc))
        return {m: item for m in names}

    return process_results
