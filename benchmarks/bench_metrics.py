"""Timing of semcal_eval.core.metrics against the obvious alternatives, measured side by side.

    PYTHONPATH=. python benchmarks/bench_metrics.py [n_docs]

* ECE: bincount binning vs a per-bin masked loop (same bins, same result).
* AURC: vectorised tie-aware expected risk vs an explicit per-coverage loop (no ties in the data).
* bootstrap CI of NLL: resampling per-document losses vs recomputing on resampled (n, K) matrices.
* bootstrap CI of ece_uw15 and every metric of the table with its CIs (what report.py / the
  leaderboard pay per model x task).
* bootstrap replicates of auroc_conf: the rank formula on every resample at once (auroc_confidence_rows) vs a loop
  of sklearn's roc_auc_score (same resamples; equal to 1e-12).
"""

import sys
import time

import numpy as np

from semcal_eval.core import metric_table as T
from semcal_eval.core import metrics as M
from semcal_eval.core.records import classification_record, to_arrays


def _t(fn, reps=5):
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def naive_ece(conf, correct, n_bins=15):
    tot = 0.0
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        sel = (conf > lo) & (conf <= hi) if b else (conf <= hi)
        if sel.any():
            tot += sel.mean() * abs(conf[sel].mean() - correct[sel].mean())
    return tot


def naive_aurc(conf, correct):
    order = np.argsort(-conf)
    err = 1 - correct[order]
    return np.mean([err[:k].mean() for k in range(1, len(err) + 1)])


def main(n=5000):
    rng = np.random.default_rng(0)
    z = rng.normal(size=(n, 28)) * 2
    P = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    y = rng.integers(0, 28, n)
    conf, pred, corr = M.top_label(P, y)
    assert abs(M.ece(y_true=corr, y_prob=conf) - naive_ece(conf, corr)) < 1e-12
    assert abs(M.aurc(y_true=corr, y_prob=conf) - naive_aurc(conf, corr)) < 1e-12
    a, b = _t(lambda: M.ece(y_true=corr, y_prob=conf)), _t(lambda: naive_ece(conf, corr))
    print(f"n={n}  ece_uw15: {a * 1e3:.3f} ms   per-bin loop: {b * 1e3:.3f} ms   ratio loop/ours {b / a:.2f}")
    a, b = _t(lambda: M.aurc(y_true=corr, y_prob=conf)), _t(lambda: naive_aurc(conf, corr), reps=1)
    print(f"n={n}  aurc:     {a * 1e3:.3f} ms   per-k loop:   {b * 1e3:.1f} ms   ratio loop/ours {b / a:.0f}")
    ece15 = lambda c, y: M.calibration_error(y_true=y, y_prob=c, n_bins=15)  # noqa: E731 (the table's ece_uw15)
    a = _t(lambda: M.bootstrap_ci(ece15, conf, corr, n_boot=1000), reps=1)
    print(f"n={n}  bootstrap_ci(ece_uw15, 1000 resamples): {a:.2f} s")
    for m in (50, 1000, n):
        c, k = conf[:m], corr[:m]
        loop = lambda: M.bootstrap_replicates(lambda c, y: M.auroc_confidence(y_true=y, y_prob=c), c, k)  # noqa: E731
        rows = lambda: M.bootstrap_replicates(M.auroc_confidence_rows, c, k, batched=True)  # noqa: E731
        assert np.allclose(loop(), rows(), rtol=0, atol=1e-12)
        a, b = _t(rows, reps=3), _t(loop, reps=1)
        print(f"n={m}  auroc_conf bootstrap (1000 resamples): rank rows {a:.3f} s, sklearn loop {b:.2f} s, "
              f"ratio loop/ours {b / a:.0f}")
    G = M.gold_matrix(y, 28)
    arrays = to_arrays([classification_record(P[i], int(y[i])) for i in range(n)])
    a = _t(lambda: T.ci("nll", arrays, n_boot=200), reps=1)
    b = _t(lambda: M.bootstrap_ci(lambda p, g: M.nll_multiclass(y_true=g, y_prob=p), P, G, n_boot=200), reps=1)
    print(f"n={n}, K=28  nll CI (200 resamples): per-doc losses {a:.3f} s, recompute {b:.2f} s, ratio {b / a:.0f}")
    T.compute_all(arrays.take(np.arange(50)), with_ci=False)  # warm-up: sklearn/scipy imports
    a = _t(lambda: T.compute_all(arrays, with_ci=False), reps=1)
    b = _t(lambda: T.compute_all(arrays, with_ci=True), reps=1)
    print(f"n={n}, K=28  every table metric: no CI {a:.2f} s, with CIs (1000 resamples) {b:.2f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5000)
