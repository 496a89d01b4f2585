"""Reference implementations written from the papers' definitions, independent of semcal's metrics, for tests
that compare a semcal number with what it should be (not with another call of the same code)."""

from __future__ import annotations

import numpy as np


def ref_ece(conf, correct, n_bins: int) -> float:
    """Equal-width top-label ECE (Guo et al. 2017) by a plain loop: bins [0, 1/M], (1/M, 2/M], ...;
    ECE = Σ_b n_b/n · |acc_b − conf_b|."""
    conf, correct = np.asarray(conf, dtype=float), np.asarray(correct, dtype=float)
    total = 0.0
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        m = (conf > lo) & (conf <= hi) if b else (conf >= lo) & (conf <= hi)
        if m.any():
            total += m.sum() / len(conf) * abs(conf[m].mean() - correct[m].mean())
    return float(total)


def ref_top_label(records: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """(confidence, correct) of classification records: max probability, argmax among the gold labels (first
    index on ties, as numpy's argmax)."""
    conf, correct = [], []
    for r in records:
        p = np.asarray(r["probs"], dtype=float)
        gold = r["gold"] if isinstance(r["gold"], list) else [r["gold"]]
        conf.append(p.max())
        correct.append(float(int(np.argmax(p)) in gold))
    return np.asarray(conf), np.asarray(correct)
