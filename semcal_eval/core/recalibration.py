"""Post-hoc recalibration fits and reference predictors.

* :func:`fit_temperature` (Guo et al. 2017): one scalar T, p = softmax(z / T), fitted by minimising
  the NLL over log T with scipy (L-BFGS-B, analytic gradient, bounds on T).
* :func:`fit_platt` (Platt 1999): binary, P = sigmoid(a * logit(clip(p)) + b), and :func:`fit_isotonic`
  (Zadrozny & Elkan 2002): binary, P = an increasing map of p. The one definition of each post-hoc map in semcal
  (the QA ``_iso`` / ``_platt`` rows, the trainer protocol's post-hoc rows, the warm-up targets);
  :func:`fit_posthoc` picks one by name. scikit-learn does the fitting.
* :func:`fit_vector_scaling` (Guo et al. 2017): p = softmax(w * z + b) with per-class w, b.
* Reference predictors: :func:`prior_predictor`, :func:`majority_predictor`,
  :func:`uniform_predictor`, :func:`prior_rate` (binary soft labels).
* :func:`split_halves`: deterministic fit/eval split ("tune on one half of dev, evaluate on the other").

The multi-class fits (temperature, vector scaling) refuse fewer than :data:`MIN_FIT_DOCS` documents or a single
gold class (ValueError); the binary maps (Platt, isotonic) give the constant base rate on a single class and leave
the minimum size to their callers. A fit that
stops at a bound or does not converge is flagged on the fit object and announced with a
:class:`RecalibrationWarning`; it is never silently used as if it were fine.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize
from scipy.special import log_softmax, logit, softmax

from .metrics import _unit, gold_matrix

__all__ = [
    "MIN_FIT_DOCS",
    "PROB_FLOOR",
    "RecalibrationWarning",
    "TemperatureFit",
    "PLATT_C",
    "PLATT_EPS",
    "POSTHOC_METHODS",
    "PlattFit",
    "IsotonicFit",
    "platt_features",
    "fit_isotonic",
    "fit_posthoc",
    "VectorScalingFit",
    "fit_temperature",
    "apply_temperature",
    "temperature_scale",
    "fit_platt",
    "fit_vector_scaling",
    "prior_predictor",
    "majority_predictor",
    "uniform_predictor",
    "prior_rate",
    "split_halves",
]

#: Fewest documents a recalibration map may be fitted on; below that the fit mostly models noise.
MIN_FIT_DOCS = 20
#: A class with probability 0 (log-prob -inf, e.g. from a constrained or Semantic-Softmax distribution) is
#: treated as 1e-12 times the top class (or as the row's lowest finite score, if lower), so the NLL stays
#: finite and temperature scaling can still move it. Finite scores are never changed.
PROB_FLOOR = 1e-12
#: Platt scaling reads logit(p) with p clipped to [PLATT_EPS, 1 − PLATT_EPS]: a confidence of exactly 0 or 1 (an
#: agreement share, a stated confidence of 0/10) becomes ±6.9, a finite point that does not dominate the slope.
PLATT_EPS = 1e-3
#: Inverse L2 strength of the Platt fit (scikit-learn's C): 1e6 is effectively unregularised maximum likelihood,
#: yet keeps a and b finite when the fit set is separable.
PLATT_C = 1e6


class RecalibrationWarning(UserWarning):
    """A recalibration fit hit a parameter bound or did not converge."""


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _scores(x: Any, name: str = "logits") -> np.ndarray:
    try:
        Z = np.array(x, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be an (n, K) array of numbers ({e})") from None
    if Z.ndim != 2 or Z.shape[1] < 2:
        raise ValueError(f"{name} must be 2-D (n documents, K >= 2 classes), got shape {Z.shape}")
    if Z.shape[0] == 0:
        raise ValueError(f"{name} is empty")
    if np.isnan(Z).any() or np.isposinf(Z).any():
        i = int(np.flatnonzero((np.isnan(Z) | np.isposinf(Z)).any(axis=1))[0])
        raise ValueError(f"{name} contains NaN or +inf (first in row {i}); -inf (log 0) is allowed")
    top = Z.max(axis=1, keepdims=True)
    if not np.isfinite(top).all():
        i = int(np.flatnonzero(~np.isfinite(top[:, 0]))[0])
        raise ValueError(f"{name} row {i} is all -inf (every class has probability 0)")
    # Only -inf (log 0) is replaced: finite scores are data, however far below the top they are (raising
    # them biased the fitted T). A -inf class gets PROB_FLOOR times the top class, or the row's lowest
    # finite score if that is lower, so it never outranks a class the model gave mass to.
    neg = np.isneginf(Z)
    if neg.any():
        finite_min = np.where(neg, np.inf, Z).min(axis=1, keepdims=True)
        floor = np.minimum(top + math.log(PROB_FLOOR), finite_min)
        Z = np.where(neg, floor, Z)
    return Z


def _fit_targets(Z: np.ndarray, labels: Any) -> np.ndarray:
    G = gold_matrix(labels, Z.shape[1])
    if len(G) != len(Z):
        raise ValueError(f"shape mismatch: {len(Z)} score rows but {len(G)} labels")
    if len(G) < MIN_FIT_DOCS:
        raise ValueError(
            f"refusing to fit a recalibration map on {len(G)} documents "
            f"(minimum {MIN_FIT_DOCS}); evaluate without recalibration or use more dev documents"
        )
    if G.any(axis=0).sum() < 2:
        raise ValueError(
            "all fit documents have the same gold class; a recalibration fit needs at least two classes"
        )
    return G / G.sum(axis=1, keepdims=True)


def _nll(Z: np.ndarray, T: np.ndarray) -> float:
    return float(-np.mean(np.sum(T * log_softmax(Z, axis=1), axis=1)))


# --------------------------------------------------------------------------------------------
# temperature scaling
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TemperatureFit:
    """Result of :func:`fit_temperature`. ``at_bound``/``converged`` must be checked before use."""

    T: float
    nll_before: float
    nll_after: float
    at_bound: bool
    converged: bool
    n_docs: int = 0

    @property
    def ok(self) -> bool:
        """True when the fit converged strictly inside its bounds."""
        return self.converged and not self.at_bound

    def apply(self, logits_or_logprobs: Any) -> np.ndarray:
        """softmax(z / T) of new scores."""
        return apply_temperature(logits_or_logprobs, self.T)


def fit_temperature(
    logits_or_logprobs: Any, labels: Any, bounds: tuple[float, float] = (0.05, 20.0)
) -> TemperatureFit:
    """Fit T = argmin_T mean_i -log softmax(z_i / T)[y_i] (Guo et al. 2017).

    ``logits_or_logprobs``: (n, K) logits, or log-probabilities (log of any distribution, e.g. the
    Semantic-Softmax or constrained one; log 0 = -inf is floored at :data:`PROB_FLOOR`).
    ``labels``: gold index per document (or lists of acceptable golds: normalised multi-hot target).
    Optimised over u = log T in [log lo, log hi] from T = 1. If T ends within 1e-3 (relative) of a
    bound, ``at_bound`` is set; if the optimiser reports failure, ``converged`` is False; either case
    emits a :class:`RecalibrationWarning`.
    """
    lo, hi = bounds
    if not 0 < lo < 1 < hi:
        raise ValueError(f"bounds must satisfy 0 < lo < 1 < hi, got {bounds}")
    Z = _scores(logits_or_logprobs)
    Tg = _fit_targets(Z, labels)

    def f(u: np.ndarray) -> tuple[float, np.ndarray]:
        A = Z * math.exp(-u[0])
        ls = log_softmax(A, axis=1)
        val = -np.mean(np.sum(Tg * ls, axis=1))
        # d/du of A = -A; d NLL / dA = softmax(A) - t
        grad = np.mean(np.sum((np.exp(ls) - Tg) * -A, axis=1))
        return float(val), np.array([grad])

    res = optimize.minimize(
        f, x0=np.array([0.0]), jac=True, method="L-BFGS-B",
        bounds=[(math.log(lo), math.log(hi))], options={"gtol": 1e-9, "ftol": 1e-12},
    )
    T = float(math.exp(res.x[0]))
    at_bound = T <= lo * (1 + 1e-3) or T >= hi * (1 - 1e-3)
    fit = TemperatureFit(
        T=T,
        nll_before=_nll(Z, Tg),
        nll_after=_nll(Z / T, Tg),
        at_bound=bool(at_bound),
        converged=bool(res.success),
        n_docs=len(Z),
    )
    if at_bound:
        warnings.warn(
            f"temperature fit stopped at the bound T={T:.4g} (bounds {bounds}); the scores are "
            "degenerate (e.g. near one-hot or constant) and T should not be trusted",
            RecalibrationWarning, stacklevel=2,
        )
    if not res.success:
        warnings.warn(f"temperature fit did not converge: {res.message}", RecalibrationWarning, stacklevel=2)
    return fit


def apply_temperature(logprobs: Any, T: float) -> np.ndarray:
    """softmax(z / T) row-wise; z may be logits or log-probabilities (-inf floored, see PROB_FLOOR).

    >>> apply_temperature([[0.0, math.log(3.0)]], 1.0).round(4).tolist()
    [[0.25, 0.75]]
    """
    if not (isinstance(T, (int, float)) and math.isfinite(T) and T > 0):
        raise ValueError(f"temperature must be a positive finite number, got {T!r}")
    Z = _scores(logprobs, "logprobs")
    return softmax(Z / T, axis=1)


def temperature_scale(fit_probs: Any, fit_labels: Any, apply_probs: Any) -> tuple[np.ndarray, TemperatureFit]:
    """Fit T on the log of ``fit_probs`` (probability vectors; zeros floored at :data:`PROB_FLOOR`) against
    ``fit_labels`` and return (softmax(log apply_probs / T), the fit): temperature scaling of a distribution
    whose logits are gone, as for the constrained and Semantic-Softmax rows."""
    fit = fit_temperature(np.log(np.clip(np.asarray(fit_probs, dtype=float), PROB_FLOOR, 1.0)), fit_labels)
    scaled = apply_temperature(np.log(np.clip(np.asarray(apply_probs, dtype=float), PROB_FLOOR, 1.0)), fit.T)
    return scaled, fit


# --------------------------------------------------------------------------------------------
# Platt and isotonic: the one post-hoc map of a binary confidence to P(positive)
# --------------------------------------------------------------------------------------------


def _binary_fit_set(scores: Any, labels: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    p = _unit(scores, "scores")
    y = _unit(labels, "labels")
    if len(p) != len(y):
        raise ValueError(f"{what}: shape mismatch: {len(p)} scores but {len(y)} labels")
    if not len(p):
        raise ValueError(f"{what}: no documents to fit on; pass one score and one label per document")
    return p, y


def platt_features(scores: Any, eps: float = PLATT_EPS) -> np.ndarray:
    """The input of a Platt map: x = logit(clip(p, eps, 1 − eps)), one column per document."""
    return logit(np.clip(_unit(scores, "scores"), eps, 1 - eps))[:, None]


@dataclass(frozen=True)
class PlattFit:
    """P(positive) = sigmoid(a * logit(clip(p, eps, 1 − eps)) + b), fitted by :func:`fit_platt`. With one class
    in the fit set (``one_class``) the map is the constant ``base_rate`` (a = 0, b = logit(base rate))."""

    a: float
    b: float
    nll_before: float
    nll_after: float
    converged: bool
    n_docs: int = 0
    eps: float = PLATT_EPS
    base_rate: float = float("nan")
    one_class: bool = False
    model: Any = field(default=None, repr=False, compare=False)  # the fitted sklearn LogisticRegression

    def apply(self, scores: Any) -> np.ndarray:
        """P(positive) of new scores (probabilities in [0, 1])."""
        if self.one_class:
            return np.full(len(_unit(scores, "scores")), self.base_rate)
        return self.model.predict_proba(platt_features(scores, self.eps))[:, 1]

    def params(self) -> dict:
        """The fit as JSON values: ``a``, ``b`` (or ``base_rate`` with one class)."""
        return {"base_rate": self.base_rate} if self.one_class else {"a": self.a, "b": self.b}


def _bin_nll(x: np.ndarray, y: np.ndarray, a: float, b: float) -> float:
    s = a * x + b
    # -[y log sig(s) + (1-y) log(1-sig(s))] = logaddexp(0, s) - y s
    return float(np.mean(np.logaddexp(0.0, s) - y * s))


def fit_platt(scores: Any, labels: Any, eps: float = PLATT_EPS) -> PlattFit:
    """Platt scaling (Platt 1999) of a binary confidence p = P(positive), the one definition in semcal:

    P(positive | p) = sigmoid(a * x + b), x = logit(clip(p, eps, 1 − eps)), (a, b) maximising the Bernoulli
    likelihood of the labels (scikit-learn ``LogisticRegression(C=PLATT_C)``, lbfgs: C = 1e6 is effectively
    unregularised, and keeps a, b finite when the fit set is separable).

    * Input: the **logit** of the confidence, not the raw confidence, so that a = 1, b = 0 is the identity map;
      p is clipped to [eps, 1 − eps] (:data:`PLATT_EPS` = 1e-3) so that an exact 0 or 1 (an agreement share, a
      stated 0/10) is a finite point rather than ±inf (with a tighter clip those ends dominate the slope).
    * ``labels``: 0/1, or soft targets t in [0, 1] (cross-entropy to Bernoulli(t), fitted as two weighted
      copies of each document).
    * One class in the fit set (all labels equal): nothing to rank on, so the map is the constant base rate
      (``one_class``; the limit of the likelihood fit, a → 0). Every caller gets this, never an error.
    """
    if not 0 < eps < 0.5:
        raise ValueError(f"fit_platt: eps={eps} must be in (0, 0.5)")
    p, y = _binary_fit_set(scores, labels, "fit_platt")
    x = platt_features(p, eps)
    rate = float(y.mean())
    if y.min() == y.max():
        b = float(logit(rate))  # ±inf when every label is 0 or every label is 1
        nll_after = _bin_nll(x[:, 0], y, 0.0, b) if math.isfinite(b) else 0.0
        return PlattFit(0.0, b, _bin_nll(x[:, 0], y, 1.0, 0.0), nll_after, True, len(p), eps, rate, True)
    from sklearn.linear_model import LogisticRegression

    lr = LogisticRegression(C=PLATT_C)
    hard = bool(np.all((y == 0) | (y == 1)))
    if hard:
        lr.fit(x, y.astype(int))
    else:  # soft targets: the document with weight t as a positive and weight 1 − t as a negative
        lr.fit(np.r_[x, x], np.r_[np.ones(len(y), int), np.zeros(len(y), int)], sample_weight=np.r_[y, 1 - y])
    converged = bool(np.all(lr.n_iter_ < lr.max_iter))
    a, b = float(lr.coef_[0, 0]), float(lr.intercept_[0])
    if not converged:
        warnings.warn(f"Platt fit did not converge in {lr.max_iter} iterations", RecalibrationWarning, stacklevel=2)
    return PlattFit(a, b, _bin_nll(x[:, 0], y, 1.0, 0.0), _bin_nll(x[:, 0], y, a, b), converged, len(p), eps, rate,
                    False, lr)


@dataclass(frozen=True)
class IsotonicFit:
    """P(positive | p) = the increasing step-and-ramp map fitted by :func:`fit_isotonic` (knots ``x`` → ``y``);
    constant ``base_rate`` with one class in the fit set (``one_class``)."""

    x: tuple[float, ...]
    y: tuple[float, ...]
    n_docs: int
    base_rate: float
    one_class: bool = False
    model: Any = field(default=None, repr=False, compare=False)  # the fitted sklearn IsotonicRegression

    def apply(self, scores: Any) -> np.ndarray:
        """P(positive) of new scores: linear between the knots, clipped to the end knots outside them."""
        s = np.asarray(scores, dtype=np.float64)
        if self.one_class:
            return np.full(len(s), self.base_rate)
        return self.model.predict(s)

    def params(self) -> dict:
        """The fit as JSON values: the knots ``x``, ``y`` (or ``base_rate`` with one class)."""
        return {"base_rate": self.base_rate} if self.one_class else {"x": list(self.x), "y": list(self.y)}


def fit_isotonic(scores: Any, labels: Any) -> IsotonicFit:
    """Isotonic regression of the label on the confidence (Zadrozny & Elkan 2002), the one definition in semcal:
    the increasing map m minimising Σ (y_i − m(p_i))² (pool adjacent violators, scikit-learn
    ``IsotonicRegression(y_min=0, y_max=1, increasing=True, out_of_bounds="clip")``), read on the **raw**
    confidence (a monotone map needs no logit), linear between its knots and constant beyond the fitted range.
    Labels 0/1 or soft targets in [0, 1]. One class in the fit set: the constant base rate (``one_class``).
    """
    p, y = _binary_fit_set(scores, labels, "fit_isotonic")
    rate = float(y.mean())
    if y.min() == y.max():
        return IsotonicFit((), (), len(p), rate, True)
    from sklearn.isotonic import IsotonicRegression

    m = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip").fit(p, y)
    return IsotonicFit(tuple(float(v) for v in m.X_thresholds_), tuple(float(v) for v in m.y_thresholds_),
                       len(p), rate, False, m)


#: the post-hoc maps by name (``method`` of :func:`fit_posthoc`)
POSTHOC_METHODS = ("platt", "isotonic")


def fit_posthoc(method: str, scores: Any, labels: Any) -> PlattFit | IsotonicFit:
    """:func:`fit_platt` or :func:`fit_isotonic` by name (:data:`POSTHOC_METHODS`); ``.apply`` maps new scores."""
    if method == "platt":
        return fit_platt(scores, labels)
    if method == "isotonic":
        return fit_isotonic(scores, labels)
    raise ValueError(f"post-hoc method {method!r} is unknown: choose one of {', '.join(POSTHOC_METHODS)}")


# --------------------------------------------------------------------------------------------
# vector scaling
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VectorScalingFit:
    """p = softmax(w * z + b) with per-class vectors w, b, fitted by :func:`fit_vector_scaling`."""

    w: np.ndarray
    b: np.ndarray
    nll_before: float
    nll_after: float
    converged: bool
    n_docs: int = 0

    def apply(self, logits_or_logprobs: Any) -> np.ndarray:
        Z = _scores(logits_or_logprobs)
        if Z.shape[1] != len(self.w):
            raise ValueError(f"fit has {len(self.w)} classes, scores have {Z.shape[1]}")
        return softmax(Z * self.w + self.b, axis=1)


def fit_vector_scaling(logits_or_logprobs: Any, labels: Any, l2: float = 1e-4) -> VectorScalingFit:
    """Vector scaling (Guo et al. 2017): minimise NLL of softmax(w * z + b) + l2 * (|w - 1|^2 + |b|^2).

    The tiny ridge term ``l2`` keeps w, b finite for classes absent from the fit set.
    """
    Z = _scores(logits_or_logprobs)
    Tg = _fit_targets(Z, labels)
    n, K = Z.shape

    def f(v: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = v[:K], v[K:]
        ls = log_softmax(Z * w + b, axis=1)
        val = -np.mean(np.sum(Tg * ls, axis=1)) + l2 * (np.sum((w - 1) ** 2) + np.sum(b**2))
        R = (np.exp(ls) - Tg) / n
        gw = np.sum(R * Z, axis=0) + 2 * l2 * (w - 1)
        gb = np.sum(R, axis=0) + 2 * l2 * b
        return float(val), np.concatenate([gw, gb])

    res = optimize.minimize(f, x0=np.r_[np.ones(K), np.zeros(K)], jac=True, method="L-BFGS-B")
    w, b = res.x[:K].copy(), res.x[K:].copy()
    if not res.success:
        warnings.warn(f"vector scaling did not converge: {res.message}", RecalibrationWarning, stacklevel=2)
    return VectorScalingFit(w, b, _nll(Z, Tg), _nll(Z * w + b, Tg), bool(res.success), n)


# --------------------------------------------------------------------------------------------
# reference predictors
# --------------------------------------------------------------------------------------------


def _check_n(n_docs: int) -> int:
    if int(n_docs) != n_docs or n_docs < 1:
        raise ValueError(f"n_docs must be a positive integer, got {n_docs!r}")
    return int(n_docs)


def _class_freq(train_labels: Any, n_classes: int) -> np.ndarray:
    G = gold_matrix(train_labels, n_classes)
    # a document with several golds spreads its unit of mass evenly over them
    return (G / G.sum(axis=1, keepdims=True)).sum(axis=0)


def prior_predictor(train_labels: Any, n_classes: int, n_docs: int, alpha: float = 1.0) -> np.ndarray:
    """Training class frequencies for every evaluated document, (n_docs, K).

    p_k = (count_k + alpha) / (n_train + alpha * K): Laplace (add-one) smoothing by default so a
    class unseen in training keeps a small nonzero probability (finite NLL); ``alpha=0`` gives the
    raw frequencies.

    >>> prior_predictor([0, 0, 1], 3, 2).round(4).tolist()
    [[0.5, 0.3333, 0.1667], [0.5, 0.3333, 0.1667]]
    """
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    c = _class_freq(train_labels, n_classes) + alpha
    return np.tile(c / c.sum(), (_check_n(n_docs), 1))


def majority_predictor(train_labels: Any, n_classes: int, n_docs: int) -> np.ndarray:
    """One-hot on the most frequent training class (ties -> lowest index), (n_docs, K).

    Deliberately overconfident: its NLL is the clipped -log(eps) ~ 36 nats on every miss.

    >>> majority_predictor([2, 1, 2], 3, 1).tolist()
    [[0.0, 0.0, 1.0]]
    """
    k = int(np.argmax(_class_freq(train_labels, n_classes)))
    P = np.zeros((_check_n(n_docs), int(n_classes)))
    P[:, k] = 1.0
    return P


def uniform_predictor(n_classes: int, n_docs: int) -> np.ndarray:
    """1/K for every class and document, (n_docs, K).

    >>> uniform_predictor(4, 1).tolist()
    [[0.25, 0.25, 0.25, 0.25]]
    """
    if int(n_classes) != n_classes or n_classes < 2:
        raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")
    return np.full((_check_n(n_docs), int(n_classes)), 1.0 / n_classes)


def prior_rate(train_targets: Any, n_docs: int | None = None) -> float | np.ndarray:
    """Binary soft-label reference: the mean training annotator fraction (no smoothing).

    Returns the rate as a float, or an array of ``n_docs`` copies of it (P(positive) per document).

    >>> prior_rate([0.0, 0.5, 1.0, 0.1])
    0.4
    >>> prior_rate([0.2, 0.4], n_docs=2).round(4).tolist()
    [0.3, 0.3]
    """
    r = float(np.mean(_unit(train_targets, "train_targets")))
    return r if n_docs is None else np.full(_check_n(n_docs), r)


# --------------------------------------------------------------------------------------------
# splits
# --------------------------------------------------------------------------------------------


def split_halves(doc_ids: Sequence[Any], seed: int = 0) -> tuple[list[Any], list[Any]]:
    """Deterministic split into (fit, eval) halves of sizes ceil(n/2), floor(n/2).

    Documents are ranked by sha256(f"{seed}:{doc_id}"), so the split depends only on the set of ids
    and the seed (not on input order, Python's hash seed or numpy); each half keeps input order.
    """
    ids = list(doc_ids)
    if len(ids) < 2:
        raise ValueError(f"need at least 2 documents to split, got {len(ids)}")
    keys = [str(d) for d in ids]
    if len(set(keys)) != len(keys):
        raise ValueError("doc_ids contain duplicates; pass one id per document")
    rank = sorted(range(len(ids)), key=lambda i: hashlib.sha256(f"{seed}:{keys[i]}".encode()).hexdigest())
    fit = set(rank[: (len(ids) + 1) // 2])
    return [d for i, d in enumerate(ids) if i in fit], [d for i, d in enumerate(ids) if i not in fit]
