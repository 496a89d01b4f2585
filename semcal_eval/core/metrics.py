"""Calibration and proper-score metrics: arrays in, floats out.

Pure numpy (plus sklearn/scipy where they already do the job). Every public function validates
its input and raises ``ValueError`` naming the problem (NaN/inf, shape mismatch, confidence outside
[0, 1], probability rows that do not sum to 1, labels out of range, empty input).

Conventions
-----------
* Argument names and order: every metric that scores predictions against the truth takes them by keyword
  under scikit-learn's names, ``y_true=`` (the outcome: ``correct``, ``labels`` or the annotator fraction ``t``)
  and ``y_prob=`` (the prediction: ``conf``, ``probs`` or ``p``), e.g. ``ece(y_true=correct, y_prob=conf)``.
  The older positional order ``(conf, correct)`` / ``(probs, labels)`` / ``(p, t)`` is the reverse of
  scikit-learn's ``(y_true, y_score)``; it keeps working and is deprecated (one ``DeprecationWarning`` per
  function and process). It will become an error, never scikit-learn's positional order, so a call written
  either way can never silently swap the two. :func:`calibration_error` takes them by keyword only.
* ``conf``: top-label confidence in [0, 1]; ``correct``: 0/1 correctness of the top label.
* ``probs``: (n, K) probability matrix, rows sum to 1 within :data:`PROB_SUM_ATOL`.
* ``labels``: the gold label per document. Accepted forms:
  a 1-D integer array; a list whose entries are an ``int`` or a list of acceptable gold ints
  (any-gold, Contract 1 of docs/ARCHITECTURE.md); or a 2-D *boolean* (n, K) multi-hot matrix.
  With several golds a prediction is correct when it is any of them; proper scores
  (multiclass Brier, NLL) and class-wise ECE score against the *normalised multi-hot target*
  t = multi-hot / (number of golds), which reduces to the one-hot target for a single gold.
* Soft-label (binary) metrics take ``p`` = predicted P(positive) and ``t`` = annotator fraction.

Binning
-------
Equal-width ("uniform") bins with M bins are [0, 1/M], (1/M, 2/M], ..., ((M-1)/M, 1]: a confidence of
exactly 0.0 lands in the first bin and exactly 1.0 in the last. Equal-mass ("mass") bins cut at the
order statistics s[ceil(b*n/M) - 1] (b = 1..M-1) of the sorted confidences and assign by *value*
(bin b = (edge_b, edge_{b+1}]), so tied confidences always share a bin and the result does not
depend on document order; heavy ties can leave some bins empty (they are skipped).

Empty bins never break a metric: they contribute weight 0 to ECE/RMS-CE and are ignored by MCE;
:func:`reliability_table` reports them with count 0 and NaN means.
"""

from __future__ import annotations

import functools
import inspect
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "SemcalMetricWarning",
    "PROB_SUM_ATOL",
    "NLL_EPS",
    "bin_indices",
    "bin_edges",
    "reliability_table",
    "NORMS",
    "calibration_error",
    "ece",
    "mce",
    "rms_ce",
    "classwise_ece",
    "brier_multiclass",
    "brier_confidence",
    "brier_soft",
    "murphy_decomposition",
    "brier_multiclass_decomposition",
    "nll_multiclass",
    "nll_confidence",
    "nll_soft",
    "auroc_confidence",
    "auroc_class",
    "aurc",
    "expected_cumsum",
    "acc_at_coverage",
    "rejection_curve",
    "prr",
    "auarc",
    "ece_1bin",
    "accuracy",
    "macro_f1",
    "soft_ece",
    "pearson",
    "spearman",
    "mae",
    "extreme_rate",
    "bootstrap_ci",
    "bootstrap_replicates",
    "bootstrap_stderr",
    "percentile_interval",
    "replicate_stderr",
    "gold_matrix",
    "gold_target",
    "top_label",
    "check_probs",
    "check_unit",
    "check_binary",
]

#: Rows of a probability matrix must sum to 1 within this absolute tolerance (float16/float32
#: softmax outputs over a few dozen classes stay well inside it).
PROB_SUM_ATOL = 1e-3
#: Confidences/probabilities may overshoot [0, 1] by this much (float rounding) and are clipped.
RANGE_ATOL = 1e-6
#: Log-loss clipping: probabilities are clipped to [eps, 1 - eps] with the float64 machine epsilon
#: (~2.2e-16, so a zero probability costs -log(eps) ~= 36.04 nats), exactly as sklearn.metrics.log_loss.
NLL_EPS = float(np.finfo(np.float64).eps)


class SemcalMetricWarning(UserWarning):
    """A metric is undefined on this input (e.g. AUROC with one class) and was returned as NaN."""


def _warn(msg: str) -> None:
    warnings.warn(msg, SemcalMetricWarning, stacklevel=4)  # the caller of the public (wrapped) metric


# --------------------------------------------------------------------------------------------
# argument order: scikit-learn's names, by keyword (module docstring, "Conventions")
# --------------------------------------------------------------------------------------------

#: metrics whose deprecated positional call has warned in this process (each warns once)
_ORDER_WARNED: set[str] = set()


def _sklearn_names(fn: Callable) -> Callable:
    """Let metric ``fn(<prediction>, <truth>, ...)`` be called as ``fn(y_true=<truth>, y_prob=<prediction>, ...)``.

    Both keywords are needed together, and never with the data passed the old way (TypeError), so the two
    cannot be mixed up. The old names as keywords (``conf=``, ``correct=``, ...) stay valid; passing the data by
    position warns once per function (DeprecationWarning) and keeps its old meaning.
    """
    params = list(inspect.signature(fn).parameters.values())
    pred, truth = params[0].name, params[1].name

    @functools.wraps(fn)
    def metric(*args, y_true: Any = None, y_prob: Any = None, **kwargs):
        if y_true is None and y_prob is None:
            if args and fn.__name__ not in _ORDER_WARNED:
                _ORDER_WARNED.add(fn.__name__)
                warnings.warn(
                    f"{fn.__name__}({pred}, {truth}, ...) by position is deprecated: its order is the reverse of "
                    f"scikit-learn's (y_true, y_score); call {fn.__name__}(y_true={truth}, y_prob={pred}, ...)",
                    DeprecationWarning, stacklevel=2)
            return fn(*args, **kwargs)
        if y_true is None or y_prob is None:
            raise TypeError(f"{fn.__name__}() needs both y_true= and y_prob= (got only "
                            f"{'y_true' if y_prob is None else 'y_prob'})")
        if args or pred in kwargs or truth in kwargs:
            raise TypeError(f"{fn.__name__}(): pass the data either as y_true=/y_prob= or as {pred}/{truth}, "
                            "not both")
        return fn(y_prob, y_true, **kwargs)

    sig = inspect.signature(fn)
    metric.__signature__ = sig.replace(parameters=[
        *sig.parameters.values(),
        inspect.Parameter("y_true", inspect.Parameter.KEYWORD_ONLY, default=None),
        inspect.Parameter("y_prob", inspect.Parameter.KEYWORD_ONLY, default=None)])
    return metric


# --------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------


def _float_1d(x: Any, name: str) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be a 1-D array of numbers ({e})") from None
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"{name} is empty: metrics need at least one document")
    bad = ~np.isfinite(a)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{name} contains {int(bad.sum())} NaN/inf value(s) (first at index {i}: {a[i]}); "
            "drop or fix those documents before computing metrics"
        )
    return a


def check_unit(x: Any, name: str) -> np.ndarray:
    """``x`` as a validated 1-D float array in [0, 1] (float overshoot of :data:`RANGE_ATOL` clipped);
    ValueError naming ``name`` otherwise."""
    a = _float_1d(x, name)
    lo, hi = a.min(), a.max()
    if lo < -RANGE_ATOL or hi > 1 + RANGE_ATOL:
        raise ValueError(
            f"{name} must lie in [0, 1], got values in [{lo:.6g}, {hi:.6g}]; "
            "pass probabilities, not logits or percentages"
        )
    return np.clip(a, 0.0, 1.0)


def check_binary(x: Any, name: str) -> np.ndarray:
    """``x`` as a validated 1-D float array of 0/1 outcomes; ValueError naming ``name`` otherwise."""
    a = _float_1d(x, name)
    if not np.all((a == 0) | (a == 1)):
        bad = a[(a != 0) & (a != 1)][:3]
        raise ValueError(f"{name} must be 0/1 (or bool), got values such as {bad.tolist()}")
    return a


_unit, _binary = check_unit, check_binary  # the module's own short names


def _same_len(*pairs: tuple[str, np.ndarray]) -> None:
    n0 = len(pairs[0][1])
    for name, a in pairs[1:]:
        if len(a) != n0:
            raise ValueError(
                f"shape mismatch: {pairs[0][0]} has {n0} documents but {name} has {len(a)}"
            )


def _conf_correct(conf: Any, correct: Any,
                  names: tuple[str, str] = ("conf", "correct")) -> tuple[np.ndarray, np.ndarray]:
    c = _unit(conf, names[0])
    y = _binary(correct, names[1])
    _same_len((names[0], c), (names[1], y))
    return c, y


def _p_t(p: Any, t: Any) -> tuple[np.ndarray, np.ndarray]:
    pp = _unit(p, "p")
    tt = _unit(t, "t")
    _same_len(("p", pp), ("t", tt))
    return pp, tt


def check_probs(probs: Any) -> np.ndarray:
    """``probs`` as a validated (n, K) float matrix, K >= 2, rows summing to 1 within :data:`PROB_SUM_ATOL`
    (values clipped to [0, 1]); ValueError naming the problem otherwise."""
    try:
        P = np.asarray(probs, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"probs must be an (n, K) array of numbers ({e})") from None
    if P.ndim != 2:
        raise ValueError(f"probs must be 2-D (n documents, K classes), got shape {P.shape}")
    if P.shape[0] == 0:
        raise ValueError("probs is empty: metrics need at least one document")
    if P.shape[1] < 2:
        raise ValueError(f"probs needs at least 2 classes, got shape {P.shape}")
    bad = ~np.isfinite(P)
    if bad.any():
        i = int(np.flatnonzero(bad.any(axis=1))[0])
        raise ValueError(f"probs contains NaN/inf (first in row {i}: {P[i].tolist()})")
    if P.min() < -RANGE_ATOL or P.max() > 1 + RANGE_ATOL:
        raise ValueError(
            f"probs must lie in [0, 1], got values in [{P.min():.6g}, {P.max():.6g}]; "
            "apply softmax to logits first"
        )
    s = P.sum(axis=1)
    off = np.abs(s - 1.0) > PROB_SUM_ATOL
    if off.any():
        i = int(np.flatnonzero(off)[0])
        raise ValueError(
            f"{int(off.sum())} probability row(s) do not sum to 1 (tolerance {PROB_SUM_ATOL}); "
            f"row {i} sums to {s[i]:.6g}; renormalise them first"
        )
    return np.clip(P, 0.0, 1.0)


_probs = check_probs


def gold_matrix(labels: Any, n_classes: int) -> np.ndarray:
    """Boolean (n, K) multi-hot matrix of acceptable golds.

    ``labels`` may be a 1-D int array, a list of ``int | list[int]`` (any-gold), or a 2-D (n, K) one-hot /
    multi-hot array (bool or 0/1 numbers; any other 2-D array is an error).

    >>> gold_matrix([1, [0, 2]], 3).astype(int).tolist()
    [[0, 1, 0], [1, 0, 1]]
    """
    K = int(n_classes)
    if isinstance(labels, np.ndarray) and labels.ndim == 2 and labels.dtype != bool and labels.dtype != object:
        # A 2-D numeric array is a one-hot / multi-hot matrix (what sklearn's label_binarize returns), never a
        # table of gold indices: reading its rows as index lists turned [1, 0, 0] into golds {1, 0}.
        if labels.shape[1] != K:
            raise ValueError(
                f"a 2-D label array is read as an (n, {K}) one-hot/multi-hot matrix, got shape {labels.shape}; "
                "pass gold indices as a 1-D array, or several golds per document as a list of lists"
            )
        a = np.asarray(labels, dtype=np.float64)
        if not np.all((a == 0) | (a == 1)):
            raise ValueError(
                "a 2-D label array must be a 0/1 one-hot/multi-hot matrix; pass gold indices as a 1-D array, "
                "or several golds per document as a list of lists"
            )
        labels = a.astype(bool)
    if isinstance(labels, np.ndarray) and labels.dtype == bool:
        if labels.ndim != 2 or labels.shape[1] != K:
            raise ValueError(f"boolean gold matrix must have shape (n, {K}), got {labels.shape}")
        if not labels.any(axis=1).all():
            i = int(np.flatnonzero(~labels.any(axis=1))[0])
            raise ValueError(f"document {i} has no gold label")
        return labels
    arr = None
    if isinstance(labels, np.ndarray) and labels.ndim == 1 and labels.dtype != object:
        arr = labels
    elif isinstance(labels, (list, tuple)) and all(
        isinstance(g, (int, np.integer, float, np.floating)) and not isinstance(g, bool)
        for g in labels
    ):
        arr = np.asarray(labels)
    if arr is not None:
        if arr.size == 0:
            raise ValueError("labels is empty: metrics need at least one document")
        a = np.asarray(arr, dtype=np.float64)
        if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
            raise ValueError("labels must be integer class indices (no NaN, no fractions)")
        a = a.astype(np.int64)
        if a.min() < 0 or a.max() >= K:
            raise ValueError(f"labels must be in [0, {K - 1}], got values in [{a.min()}, {a.max()}]")
        M = np.zeros((len(a), K), dtype=bool)
        M[np.arange(len(a)), a] = True
        return M
    if not isinstance(labels, (list, tuple, np.ndarray)):
        raise ValueError(f"labels must be a sequence of gold indices, got {type(labels).__name__}")
    if len(labels) == 0:
        raise ValueError("labels is empty: metrics need at least one document")
    M = np.zeros((len(labels), K), dtype=bool)
    for i, g in enumerate(labels):
        gs = list(g) if isinstance(g, (list, tuple, np.ndarray)) else [g]
        if not gs:
            raise ValueError(f"document {i} has an empty gold list")
        for k in gs:
            if isinstance(k, bool) or not float(k).is_integer():
                raise ValueError(f"document {i}: gold {k!r} is not an integer class index")
            k = int(k)
            if not 0 <= k < K:
                raise ValueError(f"document {i}: gold {k} outside [0, {K - 1}]")
            M[i, k] = True
    return M


def _probs_gold(probs: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    P = _probs(probs)
    G = gold_matrix(labels, P.shape[1])
    if G.shape[0] != P.shape[0]:
        raise ValueError(
            f"shape mismatch: probs has {P.shape[0]} documents but labels has {G.shape[0]}"
        )
    return P, G


def top_label(probs: Any, labels: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(conf, pred, correct): conf = max prob, pred = argmax (ties -> lowest index), correct = pred in gold.

    >>> c, p, y = top_label([[0.2, 0.8], [0.5, 0.5]], [1, 1])
    >>> c.tolist(), p.tolist(), y.tolist()
    ([0.8, 0.5], [1, 0], [1.0, 0.0])
    """
    P, G = _probs_gold(probs, labels)
    pred = P.argmax(axis=1)
    conf = P[np.arange(len(P)), pred]
    correct = G[np.arange(len(P)), pred].astype(np.float64)
    return conf, pred, correct


# --------------------------------------------------------------------------------------------
# binning
# --------------------------------------------------------------------------------------------


def _check_bins(n_bins: int) -> int:
    if int(n_bins) != n_bins or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    return int(n_bins)


def bin_edges(conf: Any, n_bins: int = 15, scheme: str = "uniform") -> np.ndarray:
    """The M+1 bin edges; bin b is (edges[b], edges[b+1]] and the first bin also holds edges[0]=0.

    >>> bin_edges([0.1, 0.9], 4).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    >>> bin_edges([0.1, 0.2, 0.3, 0.4], 2, "mass").tolist()
    [0.0, 0.2, 1.0]
    """
    M = _check_bins(n_bins)
    if scheme == "uniform":
        return np.linspace(0.0, 1.0, M + 1)
    if scheme == "mass":
        c = np.sort(_unit(conf, "conf"))
        n = len(c)
        b = np.arange(1, M)
        # upper edge of bin b-1 = the ceil(b*n/M)-th smallest value; computed in integers so
        # float rounding can never move a cut
        idx = np.maximum((b * n + M - 1) // M - 1, 0)
        return np.concatenate([[0.0], c[idx], [1.0]])
    raise ValueError(f"scheme must be 'uniform' or 'mass', got {scheme!r}")


def bin_indices(conf: Any, n_bins: int = 15, scheme: str = "uniform") -> np.ndarray:
    """Bin index (0..M-1) of every confidence; see the module docstring for the bin definitions.

    >>> bin_indices([0.0, 0.25, 0.26, 1.0], 4).tolist()
    [0, 0, 1, 3]
    """
    c = _unit(conf, "conf")
    edges = bin_edges(c, n_bins, scheme)
    # number of interior edges strictly below c  ==  b with edges[b] < c <= edges[b+1]
    return np.searchsorted(edges[1:-1], c, side="left")


def _binned(x: np.ndarray, y: np.ndarray, n_bins: int, scheme: str):
    M = _check_bins(n_bins)
    edges = bin_edges(x, M, scheme)
    idx = np.searchsorted(edges[1:-1], x, side="left")
    cnt = np.bincount(idx, minlength=M).astype(np.float64)
    sx = np.bincount(idx, weights=x, minlength=M)
    sy = np.bincount(idx, weights=y, minlength=M)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = np.where(cnt > 0, sx / np.where(cnt > 0, cnt, 1), np.nan)
        my = np.where(cnt > 0, sy / np.where(cnt > 0, cnt, 1), np.nan)
    return edges, idx, cnt, mx, my


@_sklearn_names
def reliability_table(
    conf: Any, correct: Any, n_bins: int = 15, scheme: str = "uniform"
) -> dict[str, np.ndarray]:
    """Per-bin reliability statistics.

    Returns a dict of arrays of length ``n_bins``: ``lower``, ``upper`` (bin (lower, upper]),
    ``count``, ``conf`` (mean confidence), ``acc`` (accuracy). Empty bins have count 0 and NaN means.

    >>> t = reliability_table(y_true=[1, 0, 0], y_prob=[0.9, 0.8, 0.1], n_bins=2)
    >>> t["count"].tolist(), t["conf"].round(3).tolist(), t["acc"].tolist()
    ([1.0, 2.0], [0.1, 0.85], [0.0, 0.5])
    """
    c, y = _conf_correct(conf, correct)
    edges, _, cnt, mc, my = _binned(c, y, n_bins, scheme)
    return {"lower": edges[:-1], "upper": edges[1:], "count": cnt, "conf": mc, "acc": my}


def _gaps(x: np.ndarray, y: np.ndarray, n_bins: int, scheme: str):
    _, _, cnt, mx, my = _binned(x, y, n_bins, scheme)
    keep = cnt > 0
    return cnt[keep] / len(x), np.abs(mx[keep] - my[keep])


# --------------------------------------------------------------------------------------------
# calibration errors
# --------------------------------------------------------------------------------------------


#: the norms of :func:`calibration_error` (torchmetrics' names)
NORMS = ("l1", "l2", "max")


def calibration_error(*, y_true: Any, y_prob: Any, norm: str = "l1", n_bins: int = 15,
                      scheme: str = "uniform") -> float:
    """Top-label calibration error of confidences ``y_prob`` against 0/1 outcomes ``y_true`` (keywords only),
    over ``n_bins`` bins of the confidence (``scheme`` "uniform": equal width, "mass": equal mass; module
    docstring), with w_b = n_b / n and gap_b = |acc_b - conf_b| over the non-empty bins:

    * ``norm="l1"``: ECE = sum_b w_b gap_b (Guo et al. 2017), :func:`ece`;
    * ``norm="l2"``: RMS calibration error, sqrt(sum_b w_b gap_b^2), :func:`rms_ce`;
    * ``norm="max"``: MCE = max_b gap_b, :func:`mce`.

    The ``norm`` names are torchmetrics' ``calibration_error(norm=)``; the bins are scikit-learn's
    ``calibration_curve(strategy="uniform")`` bins, (lo, hi] with 0 in the first (torchmetrics puts a
    confidence equal to an inner edge in the upper bin instead).

    Hand check: conf [0.9, 0.8, 0.1], correct [1, 0, 0], 2 uniform bins -> bin [0, .5]: {0.1}, gap 0.1;
    bin (.5, 1]: {0.9, 0.8}, gap |0.5 - 0.85| = 0.35. L1 = 1/3 * 0.1 + 2/3 * 0.35 = 0.2667,
    L2 = sqrt(0.01/3 + 2 * 0.1225/3) = 0.2915, max = 0.35.

    >>> [round(calibration_error(y_true=[1, 0, 0], y_prob=[0.9, 0.8, 0.1], norm=k, n_bins=2), 4) for k in NORMS]
    [0.2667, 0.2915, 0.35]
    """
    if norm not in NORMS:
        raise ValueError(f"calibration_error: norm must be one of {NORMS}, got {norm!r}")
    c, y = _conf_correct(y_prob, y_true, ("y_prob", "y_true"))
    return _calibration_error(c, y, norm, n_bins, scheme)


def _calibration_error(c: np.ndarray, y: np.ndarray, norm: str, n_bins: int, scheme: str) -> float:
    w, g = _gaps(c, y, n_bins, scheme)
    if norm == "l1":
        return float(np.sum(w * g))
    if norm == "l2":
        return float(math.sqrt(np.sum(w * g * g)))
    return float(g.max())


@_sklearn_names
def ece(conf: Any, correct: Any, n_bins: int = 15, scheme: str = "uniform") -> float:
    """Expected calibration error: ``calibration_error(norm="l1")``, kept under its usual name.

    >>> round(ece(y_true=[1, 0, 0], y_prob=[0.9, 0.8, 0.1], n_bins=2), 4)
    0.2667
    """
    return _calibration_error(*_conf_correct(conf, correct), "l1", n_bins, scheme)


@_sklearn_names
def mce(conf: Any, correct: Any, n_bins: int = 15, scheme: str = "uniform") -> float:
    """Maximum calibration error: ``calibration_error(norm="max")``, kept under its usual name.

    >>> round(mce(y_true=[1, 0, 0], y_prob=[0.9, 0.8, 0.1], n_bins=2), 4)
    0.35
    """
    return _calibration_error(*_conf_correct(conf, correct), "max", n_bins, scheme)


@_sklearn_names
def rms_ce(conf: Any, correct: Any, n_bins: int = 15, scheme: str = "uniform") -> float:
    """Root-mean-square calibration error: ``calibration_error(norm="l2")``, kept under its usual name.

    >>> round(rms_ce(y_true=[1, 0, 0], y_prob=[0.9, 0.8, 0.1], n_bins=2), 4)  # sqrt(0.01/3 + 2*0.1225/3)
    0.2915
    """
    return _calibration_error(*_conf_correct(conf, correct), "l2", n_bins, scheme)


@_sklearn_names
def classwise_ece(probs: Any, labels: Any, n_bins: int = 15) -> float:
    """Class-wise ECE (Kull et al. 2019): mean over *all* K classes of the equal-width ECE of
    P(class k) against the target for k (1[y = k]; with several golds the normalised multi-hot
    weight). Classes that never occur still count: mass put on them is miscalibration.

    Hand check, 2 bins: class 0 has P = [0.9, 0.4] vs target [1, 1] -> (0.1 + 0.6) / 2 = 0.35;
    class 1 has P = [0.1, 0.6] vs [0, 0] -> (0.1 + 0.6) / 2 = 0.35; mean 0.35.

    >>> round(classwise_ece(y_true=[0, 0], y_prob=[[0.9, 0.1], [0.4, 0.6]], n_bins=2), 4)
    0.35
    """
    P, G = _probs_gold(probs, labels)
    T = gold_target(G)
    M = _check_bins(n_bins)
    tot = 0.0
    for k in range(P.shape[1]):
        w, g = _gaps(P[:, k], T[:, k], M, "uniform")
        tot += float(np.sum(w * g))
    return tot / P.shape[1]


# --------------------------------------------------------------------------------------------
# Brier scores and decompositions
# --------------------------------------------------------------------------------------------


def gold_target(G: np.ndarray) -> np.ndarray:
    """The target distribution of a boolean gold matrix (:func:`gold_matrix`): the multi-hot rows normalised
    to sum to 1 (one-hot for a single gold), what the proper scores and class-wise ECE score against.

    >>> gold_target(gold_matrix([1, [0, 2]], 3)).tolist()
    [[0.0, 1.0, 0.0], [0.5, 0.0, 0.5]]
    """
    G = np.asarray(G)
    return G / G.sum(axis=1, keepdims=True)


@_sklearn_names
def brier_multiclass(probs: Any, labels: Any) -> float:
    """Multiclass Brier score (Brier 1950), mean_i sum_k (p_ik - t_ik)^2, range [0, 2].

    t is one-hot (normalised multi-hot with several golds).

    >>> brier_multiclass(y_true=[0, 1], y_prob=[[0.5, 0.5], [1.0, 0.0]])  # (0.25+0.25 + 1+1) / 2
    1.25
    """
    P, G = _probs_gold(probs, labels)
    return float(np.mean(np.sum((P - gold_target(G)) ** 2, axis=1)))


@_sklearn_names
def brier_confidence(conf: Any, correct: Any) -> float:
    """Top-label (confidence) Brier score, mean (conf - correct)^2, range [0, 1].

    >>> round(brier_confidence(y_true=[1, 1], y_prob=[0.9, 0.2]), 4)  # (0.01 + 0.64) / 2
    0.325
    """
    c, y = _conf_correct(conf, correct)
    return float(np.mean((c - y) ** 2))


@_sklearn_names
def brier_soft(p: Any, t: Any) -> float:
    """Soft-label Brier score, mean (p - t)^2 with t the annotator fraction.

    >>> round(brier_soft(y_true=[0.5, 0.0], y_prob=[0.7, 0.2]), 4)  # (0.04 + 0.04) / 2
    0.04
    """
    pp, tt = _p_t(p, t)
    return float(np.mean((pp - tt) ** 2))


def _murphy(f: np.ndarray, o: np.ndarray, n_bins: int, scheme: str) -> dict[str, float]:
    _, _, cnt, mf, mo = _binned(f, o, n_bins, scheme)
    keep = cnt > 0
    w = cnt[keep] / len(f)
    obar = float(np.mean(o))
    rel = float(np.sum(w * (mf[keep] - mo[keep]) ** 2))
    res = float(np.sum(w * (mo[keep] - obar) ** 2))
    unc = obar * (1 - obar)
    bs = float(np.mean((f - o) ** 2))
    return {
        "brier": bs,
        "reliability": rel,
        "resolution": res,
        "uncertainty": unc,
        "residual": bs - (rel - res + unc),
    }


@_sklearn_names
def murphy_decomposition(
    conf: Any, correct: Any, n_bins: int = 15, scheme: str = "uniform"
) -> dict[str, float]:
    """Murphy (1973) decomposition of the confidence Brier score: BS ~ REL - RES + UNC.

    REL = sum_b w_b (conf_b - acc_b)^2, RES = sum_b w_b (acc_b - acc)^2, UNC = acc (1 - acc),
    with w_b = n_b / n over bins. The identity is exact only when confidences are constant within
    each bin; ``residual`` = BS - (REL - RES + UNC) is the within-bin variance term that binning
    leaves over. Binning bias: with few documents per bin the sample REL is biased upwards (sampling
    noise in acc_b adds ~acc_b(1-acc_b)/n_b; Broecker 2012), so compare REL only at equal n.

    >>> d = murphy_decomposition(y_true=[1, 0, 0, 0], y_prob=[0.8, 0.8, 0.2, 0.2], n_bins=2)
    >>> [round(d[k], 4) for k in ("brier", "reliability", "resolution", "uncertainty")]
    [0.19, 0.065, 0.0625, 0.1875]
    >>> abs(d["residual"]) < 1e-12  # confidences constant within bins -> exact identity
    True
    """
    c, y = _conf_correct(conf, correct)
    return _murphy(c, y, n_bins, scheme)


@_sklearn_names
def brier_multiclass_decomposition(
    probs: Any, labels: Any, n_bins: int = 15
) -> dict[str, float]:
    """Class-wise Murphy decomposition of the multiclass Brier score.

    The multiclass Brier score is the sum over classes of the binary Brier score of P(k) vs t_k,
    so each term (reliability, resolution, uncertainty, residual) is the sum of the per-class
    binned binary terms (equal-width bins on P(k)); same binning caveats as
    :func:`murphy_decomposition`.
    """
    P, G = _probs_gold(probs, labels)
    T = gold_target(G)
    out = dict.fromkeys(("brier", "reliability", "resolution", "uncertainty", "residual"), 0.0)
    for k in range(P.shape[1]):
        d = _murphy(P[:, k], T[:, k], n_bins, "uniform")
        for key in out:
            out[key] += d[key]
    return out


# --------------------------------------------------------------------------------------------
# log scores
# --------------------------------------------------------------------------------------------


@_sklearn_names
def nll_multiclass(probs: Any, labels: Any) -> float:
    """Negative log-likelihood, mean_i -sum_k t_ik log clip(p_ik, eps, 1-eps)  (nats).

    Probabilities are clipped with :data:`NLL_EPS` (float64 machine epsilon), the same rule as
    ``sklearn.metrics.log_loss``, so a zero probability on the gold costs ~36.04 nats instead of inf.

    >>> round(nll_multiclass(y_true=[0, 0], y_prob=[[0.5, 0.5], [0.8, 0.2]]), 4)  # (ln 2 + ln 1.25) / 2
    0.4581
    """
    P, G = _probs_gold(probs, labels)
    Pc = np.clip(P, NLL_EPS, 1 - NLL_EPS)
    T = gold_target(G)
    return float(np.mean(-np.sum(T * np.log(Pc), axis=1)))


def _bernoulli_ce(p: np.ndarray, t: np.ndarray) -> float:
    pc = np.clip(p, NLL_EPS, 1 - NLL_EPS)
    return float(np.mean(-(t * np.log(pc) + (1 - t) * np.log1p(-pc))))


@_sklearn_names
def nll_confidence(conf: Any, correct: Any) -> float:
    """Binary log loss of the confidence as P(correct): mean -[y log c + (1-y) log(1-c)] (eps-clipped).

    >>> round(nll_confidence(y_true=[1, 0], y_prob=[0.5, 0.9]), 4)  # (ln 2 + ln 10) / 2
    1.4979
    """
    c, y = _conf_correct(conf, correct)
    return _bernoulli_ce(c, y)


@_sklearn_names
def nll_soft(p: Any, t: Any) -> float:
    """Cross-entropy to Bernoulli(t): mean -[t log p + (1-t) log(1-p)] (eps-clipped, nats).

    Its minimum over p is the entropy H(t), not 0, when annotators disagree.

    >>> round(nll_soft(y_true=[0.3], y_prob=[0.5]), 4)  # ln 2
    0.6931
    """
    pp, tt = _p_t(p, t)
    return _bernoulli_ce(pp, tt)


# --------------------------------------------------------------------------------------------
# discrimination and selective prediction
# --------------------------------------------------------------------------------------------


@_sklearn_names
def auroc_confidence(conf: Any, correct: Any) -> float:
    """AUROC of the confidence for separating correct from wrong answers (sklearn roc_auc_score).

    If all answers are correct (or all wrong) AUROC is undefined: returns NaN and emits a
    :class:`SemcalMetricWarning` (never a silent 0.5).
    """
    from sklearn.metrics import roc_auc_score

    c, y = _conf_correct(conf, correct)
    if y.min() == y.max():
        _warn(
            f"auroc_confidence undefined: all {len(y)} answers are "
            f"{'correct' if y[0] else 'wrong'}; returning NaN"
        )
        return float("nan")
    return float(roc_auc_score(y, c))


def auroc_confidence_rows(conf: np.ndarray, correct: np.ndarray, chunk_cells: int = 4_000_000) -> np.ndarray:
    """:func:`auroc_confidence` of each row of (B, n) arrays at once, by the Mann–Whitney statistic:
    AUROC = (Σ_{correct} rank(conf) − n₁(n₁ + 1)/2) / (n₁ n₀), ties at their average rank, which is the area under
    the ROC curve sklearn's roc_auc_score computes; NaN for a row with one class. The bootstrap's form of it
    (:func:`bootstrap_replicates` with ``batched=True``), in chunks of at most ``chunk_cells`` cells.

    >>> auroc_confidence_rows(np.array([[0.9, 0.2, 0.2, 0.1], [0.5, 0.5, 0.5, 0.5]]), np.array([[1, 0, 1, 0]] * 2))
    array([0.875, 0.5  ])
    """
    from scipy.stats import rankdata

    c = np.atleast_2d(np.asarray(conf, dtype=float))
    y = np.atleast_2d(np.asarray(correct)).astype(bool)
    if c.shape != y.shape:
        raise ValueError(f"conf has shape {c.shape} but correct has {y.shape}")
    out = np.empty(len(c))
    step = max(1, chunk_cells // max(1, c.shape[1]))
    for lo in range(0, len(c), step):
        cc, yy = c[lo:lo + step], y[lo:lo + step]
        n1 = yy.sum(axis=1).astype(float)
        n0 = yy.shape[1] - n1
        u = np.where(yy, rankdata(cc, axis=1), 0.0).sum(axis=1) - n1 * (n1 + 1) / 2
        with np.errstate(invalid="ignore", divide="ignore"):
            out[lo:lo + step] = np.where((n1 > 0) & (n0 > 0), u / (n1 * n0), np.nan)
    return out


@_sklearn_names
def auroc_class(probs: Any, labels: Any) -> float:
    """One-vs-rest macro AUROC: mean over classes k of roc_auc_score(1[k in gold], P(k)).

    Only classes that are *present* (at least one document with k among its golds) and not
    universal (at least one without) are averaged; the others have no defined AUROC and are
    skipped (their count is not reported here). If no class qualifies: NaN + SemcalMetricWarning.
    """
    from sklearn.metrics import roc_auc_score

    P, G = _probs_gold(probs, labels)
    pos = G.sum(axis=0)
    ok = np.flatnonzero((pos > 0) & (pos < len(G)))
    if len(ok) == 0:
        _warn("auroc_class undefined: no class has both positive and negative documents; returning NaN")
        return float("nan")
    return float(np.mean([roc_auc_score(G[:, k], P[:, k]) for k in ok]))


def expected_cumsum(conf: np.ndarray, values: np.ndarray) -> np.ndarray:
    """E[Σ values of the k most confident documents], k = 1..n, ties in ``conf`` broken uniformly at random: a
    tie group contributes its mean value per position, so the result never depends on the input order (AURC's
    risks use values = errors, PRR against a continuous quality uses values = quality)."""
    order = np.argsort(-conf, kind="stable")
    c = conf[order]
    v = np.asarray(values, dtype=float)[order]
    n = len(c)
    # tie groups in the sorted order
    start = np.r_[True, c[1:] != c[:-1]]
    gid = np.cumsum(start) - 1
    gstart = np.flatnonzero(start)
    gsize = np.diff(np.r_[gstart, n])
    gsum = np.add.reduceat(v, gstart)
    before = np.r_[0.0, np.cumsum(gsum)[:-1]]
    j = np.arange(n) - gstart[gid] + 1  # position within the tie group, 1-based
    return before[gid] + j * gsum[gid] / gsize[gid]


def _expected_cum_errors(conf: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """E[# errors among the k most confident], k = 1..n (:func:`expected_cumsum` of the errors)."""
    return expected_cumsum(conf, 1.0 - correct)


@_sklearn_names
def aurc(conf: Any, correct: Any) -> float:
    """Area under the risk-coverage curve (Geifman & El-Yaniv 2017; Geifman et al. 2018).

    Documents are ranked by decreasing confidence; risk(k) = error rate among the k most confident;
    AURC = (1/n) sum_{k=1..n} risk(k). Lower is better. Ties: a tied group is scored by the expected
    risk over uniformly random orderings within the group, so the value never depends on input order.

    >>> round(aurc(y_true=[1, 0, 1], y_prob=[0.9, 0.8, 0.7]), 4)  # risks 0, 1/2, 1/3 -> mean 0.2778
    0.2778
    >>> aurc(y_true=[1, 0], y_prob=[0.5, 0.5])  # tie: expected risks 1/2, 1/2
    0.5
    """
    c, y = _conf_correct(conf, correct)
    E = _expected_cum_errors(c, y)
    return float(np.mean(E / np.arange(1, len(c) + 1)))


@_sklearn_names
def acc_at_coverage(conf: Any, correct: Any, coverage: float = 0.1) -> float:
    """Accuracy on the ceil(coverage * n) most confident documents (ties: expected value over random
    tie-breaking, as in :func:`aurc`).

    >>> acc_at_coverage(y_true=[1, 0, 1, 1], y_prob=[0.9, 0.8, 0.7, 0.6], coverage=0.5)
    0.5
    """
    if not 0 < coverage <= 1:
        raise ValueError(f"coverage must be in (0, 1], got {coverage}")
    c, y = _conf_correct(conf, correct)
    n = len(c)
    k = max(1, min(n, math.ceil(coverage * n - 1e-9)))
    E = _expected_cum_errors(c, y)
    return float(1.0 - E[k - 1] / k)


@_sklearn_names
def rejection_curve(conf: Any, correct: Any, max_rejection: float = 1.0) -> np.ndarray:
    """Accuracy of the retained documents when the least confident are rejected first: entry j is the
    (expected, ties broken uniformly at random) accuracy of the n − j most confident, j = 0 … m − 1 with
    m = max(1, floor(max_rejection · n)) — lm-polygraph's ``PredictionRejectionArea`` grid (it rejects one
    document per step from 0 up to, not including, m; ``max_rejection=1`` is its default, the whole curve)."""
    if not 0 < max_rejection <= 1:
        raise ValueError(f"max_rejection must be in (0, 1], got {max_rejection}")
    c, y = _conf_correct(conf, correct)
    n = len(c)
    m = max(1, int(max_rejection * n + 1e-9))
    k = np.arange(n, n - m, -1)  # retained sizes n, n-1, ..., n-m+1
    E = _expected_cum_errors(c, y)
    return 1.0 - E[k - 1] / k


@_sklearn_names
def prr(conf: Any, correct: Any, max_rejection: float = 1.0) -> float:
    """Prediction–rejection ratio (Malinin et al. 2017; lm-polygraph's metric of record, Fadeeva et al. 2023):

    PRR = (AUC_unc − AUC_rnd) / (AUC_orc − AUC_rnd), each AUC the mean of the :func:`rejection_curve`
    (accuracy of the retained documents, rejection rates 0, 1/n, …, (m−1)/n with m = ⌊max_rejection·n⌋;
    polygraph's convention, default max_rejection = 1: the whole curve). The random order retains accuracy
    acc at every rate (AUC_rnd = acc); the oracle rejects every wrong answer first (retained accuracy
    min(1, n_correct / k) with k retained). 1 = oracle, 0 = random, < 0 worse than random. Undefined (NaN with
    a :class:`SemcalMetricWarning`) when the oracle is no better than random: all answers correct or all wrong.
    Ties in conf: expected value over random tie-breaking (polygraph's argsort breaks them by position), so a
    constant confidence scores exactly 0.

    >>> round(prr(y_true=[1, 1, 0, 0], y_prob=[0.9, 0.8, 0.7, 0.6]), 12)  # the oracle order
    1.0
    """
    c, y = _conf_correct(conf, correct)
    if y.min() == y.max():
        _warn(f"prr undefined: all {len(y)} answers are {'correct' if y[0] else 'wrong'}; returning NaN")
        return float("nan")
    n = len(c)
    m = max(1, int(max_rejection * n + 1e-9))
    k = np.arange(n, n - m, -1)
    auc_unc = float(np.mean(rejection_curve(y_true=y, y_prob=c, max_rejection=max_rejection)))
    auc_orc = float(np.mean(np.minimum(1.0, y.sum() / k)))
    auc_rnd = float(y.mean())
    if auc_orc - auc_rnd <= 1e-15:  # one document rejected from a curve whose oracle cannot improve
        _warn("prr undefined: the oracle rejection curve equals the random one; returning NaN")
        return float("nan")
    return (auc_unc - auc_rnd) / (auc_orc - auc_rnd)


@_sklearn_names
def auarc(conf: Any, correct: Any) -> float:
    """Area under the accuracy–rejection curve (Nadeem et al. 2009; Lin et al. 2023's AUARC):
    (1/n) Σ_{k=1..n} acc(k most confident) = 1 − :func:`aurc`. Higher is better; ties as in :func:`aurc`.

    >>> round(auarc(y_true=[1, 0, 1], y_prob=[0.9, 0.8, 0.7]), 4)  # accuracies 1, 1/2, 2/3
    0.7222
    """
    c, y = _conf_correct(conf, correct)
    E = _expected_cum_errors(c, y)
    k = np.arange(1, len(c) + 1)
    return float(np.mean(1.0 - E / k))


@_sklearn_names
def ece_1bin(conf: Any, correct: Any) -> float:
    """One-bin ECE (HELM's ``ece_1_bin``): |mean(conf) − accuracy|, the overall over/under-confidence.

    >>> round(ece_1bin(y_true=[1, 0], y_prob=[0.9, 0.7]), 6)
    0.3
    """
    c, y = _conf_correct(conf, correct)
    return float(abs(c.mean() - y.mean()))


# --------------------------------------------------------------------------------------------
# accuracy / F1
# --------------------------------------------------------------------------------------------


def accuracy(correct_or_pred: Any, labels: Any = None, n_classes: int | None = None) -> float:
    """Accuracy: mean of a 0/1 correctness vector, or, with ``labels``, share of predictions among
    the golds (``n_classes`` defaults to max index + 1).

    >>> accuracy([1, 0, 1, 1])
    0.75
    >>> accuracy([2, 0, 1], [2, [1, 0], 0])
    0.6666666666666666
    """
    if labels is None:
        return float(np.mean(_binary(correct_or_pred, "correct")))
    pr = _float_1d(correct_or_pred, "pred")
    if not np.all(pr == np.round(pr)) or pr.min() < 0:
        raise ValueError("pred must be non-negative integer class indices")
    pr = pr.astype(np.int64)
    if n_classes is None:
        if isinstance(labels, np.ndarray) and labels.dtype == bool:
            n_classes = labels.shape[1]
        else:
            flat = [g for x in labels for g in (x if isinstance(x, (list, tuple, np.ndarray)) else [x])]
            n_classes = int(max(max(flat, default=0), pr.max())) + 1
    G = gold_matrix(labels, n_classes)
    if len(G) != len(pr):
        raise ValueError(f"shape mismatch: pred has {len(pr)} documents but labels has {len(G)}")
    if pr.max() >= G.shape[1]:
        raise ValueError(f"pred contains class {pr.max()} but there are only {G.shape[1]} classes")
    return float(np.mean(G[np.arange(len(pr)), pr]))


def macro_f1(pred: Any, labels: Any, n_classes: int) -> float:
    """Macro F1 over all ``n_classes`` classes (sklearn f1_score, labels=range(K), zero_division=0).

    Every class is kept, so a class never predicted and never gold scores 0 and pulls the mean down.
    With several acceptable golds, the reference label of a document is the prediction when it is
    one of the golds, otherwise the lowest-index gold.
    """
    K = int(n_classes)
    pr = _float_1d(pred, "pred")
    if not np.all(pr == np.round(pr)) or pr.min() < 0 or pr.max() >= K:
        raise ValueError(f"pred must be integer class indices in [0, {K - 1}]")
    pr = pr.astype(np.int64)
    G = gold_matrix(labels, K)
    if len(G) != len(pr):
        raise ValueError(f"shape mismatch: pred has {len(pr)} documents but labels has {len(G)}")
    hit = G[np.arange(len(pr)), pr]
    ref = np.where(hit, pr, G.argmax(axis=1))
    # per-class F1 = 2TP / (2TP + FP + FN) from bincounts (what f1_score computes, ~100x faster: the
    # semsoft_tuned choice evaluates it for every grid configuration)
    tp = np.bincount(ref[ref == pr], minlength=K)
    den = np.bincount(pr, minlength=K) + np.bincount(ref, minlength=K)
    return float(np.mean(np.where(den > 0, 2 * tp / np.maximum(den, 1), 0.0)))


# --------------------------------------------------------------------------------------------
# soft-label metrics
# --------------------------------------------------------------------------------------------


@_sklearn_names
def soft_ece(p: Any, t: Any, n_bins: int = 15) -> float:
    """Soft-label ECE: equal-width bins on p, sum_b (n_b / n) |mean_b p - mean_b t|.

    >>> round(soft_ece(y_true=[0.5, 0.5, 0.0], y_prob=[0.9, 0.8, 0.1], n_bins=2), 4)  # 1/3*0.1 + 2/3*0.35
    0.2667
    """
    pp, tt = _p_t(p, t)
    w, g = _gaps(pp, tt, n_bins, "uniform")
    return float(np.sum(w * g))


def _corr(kind: str, x: Any, y: Any) -> float:
    from scipy import stats

    a, b = _float_1d(x, "p"), _float_1d(y, "t")
    _same_len(("p", a), ("t", b))
    if len(a) < 2 or a.min() == a.max() or b.min() == b.max():
        _warn(f"{kind} correlation undefined (fewer than 2 documents or a constant input); returning NaN")
        return float("nan")
    fn = stats.pearsonr if kind == "pearson" else stats.spearmanr
    return float(fn(a, b)[0])


def pearson(p: Any, t: Any) -> float:
    """Pearson correlation of predicted p and annotator fraction t (scipy); NaN + warning if constant."""
    return _corr("pearson", p, t)


def spearman(p: Any, t: Any) -> float:
    """Spearman rank correlation of p and t (scipy); NaN + warning if constant."""
    return _corr("spearman", p, t)


def mae(p: Any, t: Any) -> float:
    """Mean absolute error, mean |p - t|.

    >>> round(mae([0.7, 0.2], [0.5, 0.0]), 4)
    0.2
    """
    pp, tt = _p_t(p, t)
    return float(np.mean(np.abs(pp - tt)))


def extreme_rate(p: Any, lo: float = 0.1, hi: float = 0.9) -> float:
    """Share of documents with an extreme prediction, p < lo or p > hi.

    >>> extreme_rate([0.05, 0.5, 0.95, 0.9])
    0.5
    """
    pp = _unit(p, "p")
    return float(np.mean((pp < lo) | (pp > hi)))


# --------------------------------------------------------------------------------------------
# bootstrap
# --------------------------------------------------------------------------------------------


def bootstrap_replicates(
    metric_fn: Callable[..., float],
    *arrays: Any,
    n_boot: int = 1000,
    seed: int = 0,
    batched: bool = False,
) -> np.ndarray:
    """The finite bootstrap replicates of ``metric_fn(*arrays)``: documents (rows, shared across all
    ``arrays``) resampled with replacement ``n_boot`` times with ``numpy.random.default_rng(seed)``.
    ``batched``: ``metric_fn`` takes every resample at once (one row per resample) and returns one value per row
    (:func:`auroc_confidence_rows`): the same resamples, one vectorised call instead of ``n_boot``.

    Replicates where the metric is NaN (e.g. a resample with a single class for AUROC) are dropped; if more
    than half are NaN a SemcalMetricWarning says so. SemcalMetricWarnings raised inside replicates are
    silenced (they are summarised by that count instead). Shared by :func:`bootstrap_ci` and
    :func:`bootstrap_stderr`, so an interval and a standard error come from the same resamples.
    """
    if not arrays:
        raise ValueError("bootstrap needs at least one array to resample")
    if n_boot < 1:
        raise ValueError(f"need n_boot >= 1, got n_boot={n_boot}")
    arrs = [a if isinstance(a, np.ndarray) else np.asarray(a) for a in arrays]
    n = len(arrs[0])
    if n == 0:
        raise ValueError("bootstrap got an empty array")
    for i, a in enumerate(arrs[1:], 1):
        if len(a) != n:
            raise ValueError(f"shape mismatch: array 0 has {n} documents but array {i} has {len(a)}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    vals = np.empty(n_boot)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SemcalMetricWarning)
        if batched:
            vals[:] = metric_fn(*[a[idx] for a in arrs])
        else:
            for r in range(n_boot):
                vals[r] = metric_fn(*[a[idx[r]] for a in arrs])
    ok = np.isfinite(vals)
    if ok.sum() < n_boot / 2:
        _warn(
            f"bootstrap: {n_boot - int(ok.sum())} of {n_boot} replicates of "
            f"{getattr(metric_fn, '__name__', 'metric')} were NaN"
        )
    return vals[ok]


def percentile_interval(replicates: np.ndarray, alpha: float = 0.05) -> tuple[float, float]:
    """The (alpha/2, 1 - alpha/2) quantiles of bootstrap replicates; (NaN, NaN) when there are none."""
    if not 0 < alpha < 1:
        raise ValueError(f"need 0 < alpha < 1, got alpha={alpha}")
    if len(replicates) == 0:
        return float("nan"), float("nan")
    lo, hi = np.quantile(replicates, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def replicate_stderr(replicates: np.ndarray) -> float:
    """Bootstrap standard error: the sample standard deviation (ddof = 1) of the replicates, as lm-eval's
    ``bootstrap_stderr`` defines it; NaN with fewer than two replicates."""
    return float(np.std(replicates, ddof=1)) if len(replicates) > 1 else float("nan")


def bootstrap_ci(
    metric_fn: Callable[..., float],
    *arrays: Any,
    n_boot: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap (1 - alpha) confidence interval of ``metric_fn(*arrays)`` over
    :func:`bootstrap_replicates` (NaN replicates ignored; (NaN, NaN) if all are NaN)."""
    if not 0 < alpha < 1:
        raise ValueError(f"need n_boot >= 1 and 0 < alpha < 1, got n_boot={n_boot}, alpha={alpha}")
    return percentile_interval(bootstrap_replicates(metric_fn, *arrays, n_boot=n_boot, seed=seed), alpha)


def bootstrap_stderr(metric_fn: Callable[..., float], *arrays: Any, n_boot: int = 1000, seed: int = 0) -> float:
    """Bootstrap standard error of ``metric_fn(*arrays)``: :func:`replicate_stderr` of
    :func:`bootstrap_replicates` (the same resamples as :func:`bootstrap_ci` with the same seed)."""
    return replicate_stderr(bootstrap_replicates(metric_fn, *arrays, n_boot=n_boot, seed=seed))
