"""Correct accuracy and calibration figures for the measured errors of an imperfect correctness judge.

The QA answers are graded by an automatic judge; on a labelled set its verdicts are compared with human
verdicts, giving the judge's sensitivity Se = P(judge says correct | people say correct) and specificity
Sp = P(judge says wrong | people say wrong). If p is the true (human) accuracy, the judge reports a
correct answer with probability

    q = Se * p + (1 - Sp) * (1 - p),

so the Rogan-Gladen estimator inverts it:

    p = (q - (1 - Sp)) / (Se - (1 - Sp)) = (q + Sp - 1) / (Se + Sp - 1),

clipped to [0, 1]. It exists only when Se + Sp > 1 (a judge no better than chance carries no information).

Assumption: the judge's errors are *non-differential*: Se and Sp are the same on the evaluation set as on
the labelled set, and (for the reliability correction) the same in every confidence bin, i.e. the judge's
verdict is independent of the model's confidence given the human verdict. :func:`check_independence` tests
the latter on a labelled set; the correction is only as good as its rates.

* :func:`rogan_gladen`: the point correction of one observed rate.
* :class:`JudgeRates`: the judge-vs-people 2x2 table, with ``sensitivity`` / ``specificity``.
* :func:`corrected_accuracy`: corrected accuracy with a bootstrap CI carrying both the evaluation set's
  sampling error and the uncertainty of Se and Sp.
* :func:`corrected_reliability`: per-bin corrected accuracy and the corrected ECE beside the raw one.
* :func:`check_independence`: chi-square tests that Se and Sp do not vary with the confidence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np
from scipy.stats import chi2_contingency

from semcal_eval.core.metrics import check_binary, check_unit

__all__ = ["rogan_gladen", "JudgeRates", "corrected_accuracy", "stratified_corrected_accuracy", "corrected_reliability",
           "stratified_corrected_reliability",
           "check_independence"]


def _rate(x: Any, name: str) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in [0, 1], got {x!r}") from None
    if not math.isfinite(v) or not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} must be a finite number in [0, 1], got {x!r}")
    return v


def _check_informative(se: float, sp: float) -> None:
    if se + sp <= 1.0:
        raise ValueError(
            f"sensitivity + specificity = {se:.4g} + {sp:.4g} <= 1: the judge is no better than chance, "
            "so no correction exists"
        )


def _rg(q: Any, se: Any, sp: Any) -> Any:
    # Written as (q - (1 - Sp)) / (Se - (1 - Sp)) rather than (q + Sp - 1) / (Se + Sp - 1): the same value,
    # but with a perfect judge (Se = Sp = 1) it returns q bit for bit ((q + 1) - 1 is not always q in floats).
    fp_rate = 1.0 - sp
    return np.clip((q - fp_rate) / (se - fp_rate), 0.0, 1.0)


def rogan_gladen(observed: float, sensitivity: float, specificity: float) -> float:
    """Rogan-Gladen estimate of the true positive rate: clip((q + Sp - 1) / (Se + Sp - 1), 0, 1).

    ValueError when an input is not finite or outside [0, 1], or when Se + Sp <= 1.

    >>> round(rogan_gladen(0.5, 0.9, 0.8), 6)
    0.428571
    >>> rogan_gladen(0.01, 0.9, 0.8)  # below the false-positive rate 1 - Sp: clipped
    0.0
    """
    q = _rate(observed, "observed")
    se = _rate(sensitivity, "sensitivity")
    sp = _rate(specificity, "specificity")
    _check_informative(se, sp)
    return float(_rg(q, se, sp))


@dataclass(frozen=True)
class JudgeRates:
    """The judge-vs-people 2x2 table on a labelled set (counts of answers):

    ``tp``: judge correct, people correct; ``fp``: judge correct, people wrong;
    ``fn``: judge wrong, people correct; ``tn``: judge wrong, people wrong.

    >>> r = JudgeRates(tp=90, fp=5, fn=10, tn=45)
    >>> r.sensitivity, r.specificity
    (0.9, 0.9)
    """

    tp: int
    fp: int
    fn: int
    tn: int

    def __post_init__(self) -> None:
        for name in ("tp", "fp", "fn", "tn"):
            v = getattr(self, name)
            # bool is an Integral but a True count is almost surely a bug; floats (even 3.0) are refused so
            # that a rate passed where a count belongs fails loudly.
            if isinstance(v, bool) or not isinstance(v, Integral):
                raise ValueError(f"JudgeRates.{name} must be an integer count, got {v!r}")
            if v < 0:
                raise ValueError(f"JudgeRates.{name} must be >= 0, got {v}")
            object.__setattr__(self, name, int(v))
        if self.tp + self.fn == 0:
            raise ValueError("JudgeRates has no people-correct answers (tp + fn = 0): sensitivity is undefined")
        if self.tn + self.fp == 0:
            raise ValueError("JudgeRates has no people-wrong answers (tn + fp = 0): specificity is undefined")

    @classmethod
    def from_verdicts(cls, judge_correct: Any, human_correct: Any) -> JudgeRates:
        """The table from paired 0/1 verdicts (judge, people) on the same answers."""
        j, h = _paired_binary(judge_correct, human_correct)
        return cls(tp=int(np.sum((j == 1) & (h == 1))), fp=int(np.sum((j == 1) & (h == 0))),
                   fn=int(np.sum((j == 0) & (h == 1))), tn=int(np.sum((j == 0) & (h == 0))))

    @property
    def sensitivity(self) -> float:
        """Se = tp / (tp + fn)."""
        return self.tp / (self.tp + self.fn)

    @property
    def specificity(self) -> float:
        """Sp = tn / (tn + fp)."""
        return self.tn / (self.tn + self.fp)


def _paired_binary(a: Any, b: Any, names: tuple[str, str] = ("judge_correct", "human_correct")):
    x, y = check_binary(a, names[0]), check_binary(b, names[1])
    if len(x) != len(y):
        raise ValueError(f"shape mismatch: {names[0]} has {len(x)} answers but {names[1]} has {len(y)}")
    return x, y


def _conf_correct(conf: Any, correct: Any) -> tuple[np.ndarray, np.ndarray]:
    c, y = check_unit(conf, "conf"), check_binary(correct, "correct")
    if len(c) != len(y):
        raise ValueError(f"shape mismatch: conf has {len(c)} answers but correct has {len(y)}")
    return c, y


def _check_rates(rates: Any) -> JudgeRates:
    if not isinstance(rates, JudgeRates):
        raise ValueError(f"rates must be a JudgeRates table, got {type(rates).__name__}")
    _check_informative(rates.sensitivity, rates.specificity)
    return rates


def corrected_accuracy(correct: Any, rates: JudgeRates, n_boot: int = 2000, seed: int = 0,
                       alpha: float = 0.05) -> dict:
    """Judge-corrected accuracy: RG(mean(correct), Se, Sp) with Se, Sp the table's point estimates, and a
    (1 - alpha) percentile CI.

    The CI is a parametric bootstrap with uniform priors on the rates: each replicate resamples the
    evaluation verdicts with replacement (its mean q* ~ Binomial(n, q) / n, which is exactly the distribution
    of a resample's mean) and draws Se* ~ Beta(tp + 1, fn + 1), Sp* ~ Beta(tn + 1, fp + 1) (the posteriors
    under Beta(1, 1) priors), then takes RG(q*, Se*, Sp*). Replicates with Se* + Sp* <= 1 have no correction
    and are dropped (counted in ``dropped``); with every replicate dropped the CI is [nan, nan].

    Returns ``{"observed", "corrected", "ci": [lo, hi], "sensitivity", "specificity", "n", "dropped"}``.

    >>> r = corrected_accuracy([1, 1, 0, 1] * 50, JudgeRates(tp=90, fp=5, fn=10, tn=45))
    >>> r["observed"], round(r["corrected"], 4), r["n"]
    (0.75, 0.8125, 200)
    """
    y = check_binary(correct, "correct")
    rates = _check_rates(rates)
    if isinstance(n_boot, bool) or not isinstance(n_boot, Integral) or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    n, q = len(y), float(y.mean())
    se, sp = rates.sensitivity, rates.specificity

    rng = np.random.default_rng(seed)
    # Binomial draw instead of an (n_boot, n) index matrix: same distribution, O(n_boot) memory.
    q_b = rng.binomial(n, q, size=n_boot) / n
    se_b = rng.beta(rates.tp + 1, rates.fn + 1, size=n_boot)
    sp_b = rng.beta(rates.tn + 1, rates.fp + 1, size=n_boot)
    ok = se_b + sp_b > 1.0
    est = _rg(q_b[ok], se_b[ok], sp_b[ok])
    if est.size:
        lo, hi = (float(v) for v in np.quantile(est, [alpha / 2, 1 - alpha / 2]))
    else:
        lo = hi = math.nan
    return {"observed": q, "corrected": float(_rg(q, se, sp)), "ci": [lo, hi], "sensitivity": se,
            "specificity": sp, "n": n, "dropped": int(n_boot - ok.sum())}


def stratified_corrected_accuracy(strata: dict, n_boot: int = 2000, seed: int = 0, alpha: float = 0.05) -> dict:
    """Judge-corrected accuracy over strata with rates of their own (e.g. short and sentence answers):
    p = Σ_s (n_s / n) · RG(q_s, Se_s, Sp_s), ``strata`` = {name: (verdicts, JudgeRates)}; empty strata are left
    out. The CI combines, replicate by replicate, each stratum's parametric bootstrap of
    :func:`corrected_accuracy` (a replicate is dropped where any stratum's Se* + Sp* ≤ 1).

    >>> r = stratified_corrected_accuracy({"a": ([1, 0] * 50, JudgeRates(90, 5, 10, 45)),
    ...                                    "b": ([1] * 10, JudgeRates(50, 0, 0, 50))})
    >>> round(r["corrected"], 4), r["n"], r["by_stratum"]["b"]["corrected"]
    (0.5455, 110, 1.0)
    """
    if not isinstance(strata, dict) or not strata:
        raise ValueError("strata must be a non-empty {name: (verdicts, JudgeRates)} mapping")
    rng = np.random.default_rng(seed)
    total = np.zeros(n_boot)
    ok = np.ones(n_boot, bool)
    point, n_all, by = 0.0, 0, {}
    for name, (correct, rates) in strata.items():
        y = np.asarray(correct, dtype=float)
        if y.size == 0:
            continue
        y = check_binary(y, f"correct[{name}]")
        rates = _check_rates(rates)
        n, q = len(y), float(y.mean())
        q_b = rng.binomial(n, q, size=n_boot) / n
        se_b = rng.beta(rates.tp + 1, rates.fn + 1, size=n_boot)
        sp_b = rng.beta(rates.tn + 1, rates.fp + 1, size=n_boot)
        good = se_b + sp_b > 1.0
        ok &= good
        total += n * np.where(good, _rg(q_b, se_b, np.where(good, sp_b, 1.0)), 0.0)
        c = float(_rg(q, rates.sensitivity, rates.specificity))
        point += n * c
        n_all += n
        by[name] = {"n": n, "observed": q, "corrected": c, "sensitivity": rates.sensitivity,
                    "specificity": rates.specificity}
    if not n_all:
        raise ValueError("every stratum is empty: nothing to correct")
    est = total[ok] / n_all
    lo, hi = ((float(v) for v in np.quantile(est, [alpha / 2, 1 - alpha / 2])) if est.size else (math.nan,) * 2)
    observed = sum(b["n"] * b["observed"] for b in by.values()) / n_all
    return {"observed": observed, "corrected": point / n_all, "ci": [lo, hi], "n": n_all,
            "dropped": int(n_boot - ok.sum()), "by_stratum": by}


def corrected_reliability(conf: Any, correct: Any, rates: JudgeRates, n_bins: int = 10) -> dict:
    """Reliability table with the judge's errors corrected bin by bin.

    Equal-width bins [0, 1/M), [1/M, 2/M), ..., [(M-1)/M, 1] (the last closed at 1). Per bin b: ``n``,
    ``mean_conf``, ``observed_acc`` (the judge's accuracy) and ``corrected_acc`` = RG(observed_acc_b, Se, Sp).
    ``ece`` = sum_b (n_b / N) |observed_acc_b - mean_conf_b| and ``corrected_ece`` = sum_b (n_b / N)
    |corrected_acc_b - mean_conf_b| over the non-empty bins (empty bins are listed with n = 0 and NaN means).

    Assumes the judge's errors are independent of the confidence given the answer's true correctness (the
    same Se and Sp in every bin); :func:`check_independence` tests that. Like the raw ECE, ``corrected_ece`` is
    biased upward in small bins by sampling noise, more so since RG scales that noise by 1 / (Se + Sp - 1).

    >>> t = corrected_reliability([0.2, 0.3, 0.9, 0.8], [0, 1, 1, 1], JudgeRates(tp=9, fp=2, fn=1, tn=8),
    ...                           n_bins=2)
    >>> [b["n"] for b in t["bins"]], round(t["ece"], 4), round(t["corrected_ece"], 4)
    ([2, 2], 0.2, 0.1643)
    """
    rates = _check_rates(rates)
    c, _ = _conf_correct(conf, correct)
    out = stratified_corrected_reliability(conf, correct, ["all"] * len(c), {"all": rates}, n_bins)
    return {**out, "sensitivity": rates.sensitivity, "specificity": rates.specificity}


def stratified_corrected_reliability(conf: Any, correct: Any, strata: Sequence[str], rates: dict,
                                     n_bins: int = 10) -> dict:
    """:func:`corrected_reliability` where each answer's stratum (e.g. its shape: short span or sentence) has
    rates of its own: per bin b, corrected_acc_b = Σ_s (n_bs / n_b) · RG(observed_acc_bs, Se_s, Sp_s), so the
    correction assumes the judge's errors are independent of the confidence *given the stratum*.
    ``rates`` = {stratum: JudgeRates}, one for every stratum named in ``strata``.

    >>> t = stratified_corrected_reliability([0.9, 0.9, 0.9, 0.9], [1, 1, 1, 0], ["a", "a", "b", "b"],
    ...     {"a": JudgeRates(9, 1, 1, 9), "b": JudgeRates(10, 0, 0, 10)}, n_bins=2)
    >>> t["bins"][1]["corrected_acc"], round(t["corrected_ece"], 4)
    (0.75, 0.15)
    """
    c, y = _conf_correct(conf, correct)
    st = np.asarray(list(strata), dtype=object)
    if len(st) != len(c):
        raise ValueError(f"shape mismatch: conf has {len(c)} answers but strata has {len(st)}")
    if not isinstance(rates, dict):
        raise ValueError("rates must be a {stratum: JudgeRates} mapping")
    missing = sorted(set(st.tolist()) - set(rates))
    if missing:
        raise ValueError(f"no judge rates for strata {missing}: give rates= an entry for each")
    checked = {k: _check_rates(v) for k, v in rates.items()}
    if isinstance(n_bins, bool) or not isinstance(n_bins, Integral) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    M, N = int(n_bins), len(c)
    edges = np.arange(M + 1) / M  # i / M exactly, so a confidence on an edge lands where a reader expects
    idx = np.minimum(np.searchsorted(edges, c, side="right") - 1, M - 1)  # [lo, hi); 1.0 into the last bin
    in_stratum = {k: st == k for k in checked}
    bins, ece, cece = [], 0.0, 0.0
    for b in range(M):
        m = idx == b
        nb = int(m.sum())
        row = {"lower": float(edges[b]), "upper": float(edges[b + 1]), "n": nb, "mean_conf": math.nan,
               "observed_acc": math.nan, "corrected_acc": math.nan}
        if nb:
            mc, acc = float(c[m].mean()), float(y[m].mean())
            cacc = 0.0
            for k, r in checked.items():
                mk = m & in_stratum[k]
                if mk.any():
                    cacc += float(mk.sum()) * float(_rg(y[mk].mean(), r.sensitivity, r.specificity))
            cacc /= nb
            row.update(mean_conf=mc, observed_acc=acc, corrected_acc=cacc)
            ece += nb / N * abs(acc - mc)
            cece += nb / N * abs(cacc - mc)
        bins.append(row)
    return {"bins": bins, "ece": ece, "corrected_ece": cece, "n": N}


def _homogeneity_p(yes: np.ndarray, no: np.ndarray) -> float:
    """Chi-square p-value that P(yes) is the same in every column of the 2 x k table [yes; no]."""
    if len(yes) < 2:
        return math.nan
    if yes.sum() == 0 or no.sum() == 0:
        # Every bin has the same rate (0 or 1): homogeneous by construction, and chi2_contingency would
        # refuse the table's zero expected counts.
        return 1.0
    return float(chi2_contingency(np.vstack([yes, no]))[1])


def check_independence(conf: Any, judge_correct: Any, human_correct: Any, n_bins: int = 5) -> dict:
    """Test on a labelled set whether the judge's Se and Sp are constant across confidence bins.

    Quantile bins of ``conf`` (tied cut points merged). Per bin: Se_b = P(judge 1 | human 1) and
    Sp_b = P(judge 0 | human 0). ``sensitivity_p``: chi-square test of homogeneity
    (scipy.stats.chi2_contingency) of the judge's verdict among the people-correct answers across the bins
    that have any; ``specificity_p`` likewise among the people-wrong answers. A test with fewer than 2 usable
    bins gives NaN. ``holds`` = both p >= 0.05, or None (cannot tell) when either is NaN. Not rejecting is not
    proof of independence: with few labelled answers the tests have little power.

    Returns ``{"bins": [{"lower", "upper", "n", "n_pos", "n_neg", "sensitivity", "specificity"}, ...],
    "sensitivity_p", "specificity_p", "holds"}``.
    """
    c = check_unit(conf, "conf")
    j, h = _paired_binary(judge_correct, human_correct)
    if len(c) != len(j):
        raise ValueError(f"shape mismatch: conf has {len(c)} answers but judge_correct has {len(j)}")
    if isinstance(n_bins, bool) or not isinstance(n_bins, Integral) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    inner = np.unique(np.quantile(c, np.linspace(0, 1, int(n_bins) + 1))[1:-1])
    edges = np.concatenate([[c.min()], inner, [c.max()]])
    idx = np.searchsorted(inner, c, side="right")
    bins, tp, fn, tn, fp = [], [], [], [], []
    for b in range(len(inner) + 1):
        m = idx == b
        pos, neg = m & (h == 1), m & (h == 0)
        n_pos, n_neg = int(pos.sum()), int(neg.sum())
        k_tp, k_tn = int(j[pos].sum()), int((1 - j[neg]).sum())
        bins.append({"lower": float(edges[b]), "upper": float(edges[b + 1]), "n": int(m.sum()),
                     "n_pos": n_pos, "n_neg": n_neg,
                     "sensitivity": k_tp / n_pos if n_pos else math.nan,
                     "specificity": k_tn / n_neg if n_neg else math.nan})
        # A bin without people-correct (people-wrong) answers says nothing about Se (Sp): left out of that test.
        if n_pos:
            tp.append(k_tp)
            fn.append(n_pos - k_tp)
        if n_neg:
            tn.append(k_tn)
            fp.append(n_neg - k_tn)
    se_p = _homogeneity_p(np.array(tp), np.array(fn))
    sp_p = _homogeneity_p(np.array(tn), np.array(fp))
    holds = None if math.isnan(se_p) or math.isnan(sp_p) else bool(se_p >= 0.05 and sp_p >= 0.05)
    return {"bins": bins, "sensitivity_p": se_p, "specificity_p": sp_p, "holds": holds}
