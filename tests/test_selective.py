"""Issue 23: the selective-prediction metrics (PRR, AUARC, accuracy at coverage, 1-bin ECE) against references
written here from the papers' definitions, on random data and on the edge cases that bite: all correct, all
wrong, ties and constant scores."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

from semcal_eval.core import metric_table as T
from semcal_eval.core import metrics as M
from semcal_eval.core import records as R


# ---------------------------------------------------------------- references from the definitions


def polygraph_prr_raw(uncertainty, quality, max_rejection=1.0):
    """lm-polygraph's rejection-curve area, from its definition: sort by increasing uncertainty, the mean
    quality of the first n − j documents for j = 0 … m−1 (m = floor(max_rejection·n)), averaged."""
    u = np.asarray(uncertainty, float)
    q = np.asarray(quality, float)
    n = len(u)
    m = int(max_rejection * n)
    order = np.argsort(u, kind="stable")
    means = [q[order[: n - j]].mean() for j in range(m)]
    return float(np.mean(means))


def reference_prr(conf, correct, max_rejection=1.0):
    """PRR = (AUC_unc − AUC_rnd) / (AUC_orc − AUC_rnd) with polygraph's areas; random = the flat mean quality."""
    conf, correct = np.asarray(conf, float), np.asarray(correct, float)
    unc = polygraph_prr_raw(-conf, correct, max_rejection)
    orc = polygraph_prr_raw(-correct, correct, max_rejection)
    rnd = correct.mean()
    return (unc - rnd) / (orc - rnd)


def tie_averaged(fn, conf, correct):
    """E over uniformly random tie-breaking: the mean of ``fn`` over every ordering of the documents, each
    turned into strictly decreasing confidences that keep the given order between different values."""
    conf, correct = np.asarray(conf, float), np.asarray(correct, float)
    n = len(conf)
    vals = []
    for perm in itertools.permutations(range(n)):
        rank = np.empty(n)
        rank[list(perm)] = np.arange(n)  # position within the permutation breaks ties
        key = conf * 10 * n - rank * 1e-3  # same order as conf between different values
        vals.append(fn(key, correct))
    return float(np.mean(vals))


def reference_auarc(conf, correct):
    """(1/n) Σ_k accuracy of the k most confident (no ties)."""
    order = np.argsort(-np.asarray(conf, float), kind="stable")
    y = np.asarray(correct, float)[order]
    return float(np.mean([y[:k].mean() for k in range(1, len(y) + 1)]))


def reference_acc_at(conf, correct, coverage):
    order = np.argsort(-np.asarray(conf, float), kind="stable")
    k = max(1, math.ceil(coverage * len(order) - 1e-9))
    return float(np.asarray(correct, float)[order][:k].mean())


def _random(n, seed, ties=False):
    rng = np.random.default_rng(seed)
    conf = rng.uniform(size=n)
    if ties:
        conf = np.round(conf * 3) / 3
    correct = (rng.uniform(size=n) < conf).astype(float)
    if correct.min() == correct.max():
        correct[0] = 1 - correct[0]
    return conf, correct


# ---------------------------------------------------------------- PRR


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("max_rej", [1.0, 0.5])
def test_prr_equals_polygraph_definition_on_random_data(seed, max_rej):
    conf, correct = _random(57, seed)
    assert M.prr(y_true=correct, y_prob=conf, max_rejection=max_rej) \
        == pytest.approx(reference_prr(conf, correct, max_rej), abs=1e-12)


def test_prr_oracle_random_and_reversed():
    conf, correct = _random(40, 3)
    assert M.prr(y_true=correct, y_prob=correct * 0.5 + 0.25) == pytest.approx(1.0)  # the oracle ranking
    assert M.prr(y_true=correct, y_prob=np.full(40, 0.3)) \
        == pytest.approx(0.0, abs=1e-12)  # constant: random order, exactly
    rev = M.prr(y_true=correct, y_prob=1 - (correct * 0.5 + 0.25))
    assert rev < 0 and rev == pytest.approx(reference_prr(1 - correct, correct))


def test_prr_with_ties_is_the_tie_averaged_definition():
    conf = np.array([0.9, 0.9, 0.5, 0.5, 0.5, 0.9])
    correct = np.array([1, 0, 1, 0, 0, 1.0])
    for mr in (1.0, 0.5):
        ref = tie_averaged(lambda c, y: reference_prr(c, y, mr), conf, correct)
        assert M.prr(y_true=correct, y_prob=conf, max_rejection=mr) == pytest.approx(ref, abs=1e-12)
    # and the value does not depend on the input order
    perm = np.random.default_rng(0).permutation(6)
    assert M.prr(y_true=correct[perm], y_prob=conf[perm]) \
        == pytest.approx(M.prr(y_true=correct, y_prob=conf), abs=1e-15)


@pytest.mark.parametrize("y", [1.0, 0.0])
def test_prr_all_correct_or_all_wrong_is_nan_with_warning(y):
    with pytest.warns(M.SemcalMetricWarning, match="prr undefined"):
        assert math.isnan(M.prr(y_true=[y, y, y], y_prob=[0.2, 0.9, 0.5]))


def test_prr_adversaries_cannot_beat_the_oracle():
    """Cheap strategies: a constant, a copy of the base rate, two-level scores; none exceeds 1 or a ranking
    that knows the answers."""
    conf, correct = _random(80, 7)
    oracle = M.prr(y_true=correct, y_prob=correct)
    for adv in (np.zeros(80), np.ones(80), np.full(80, correct.mean()), (conf > 0.5).astype(float)):
        assert M.prr(y_true=correct, y_prob=adv) <= oracle + 1e-12


# ---------------------------------------------------------------- AUARC, accuracy at coverage, 1-bin ECE


@pytest.mark.parametrize("seed", range(4))
def test_auarc_matches_definition_and_is_one_minus_aurc(seed):
    conf, correct = _random(63, seed)
    assert M.auarc(y_true=correct, y_prob=conf) == pytest.approx(reference_auarc(conf, correct), abs=1e-12)
    assert M.auarc(y_true=correct, y_prob=conf) == pytest.approx(1 - M.aurc(y_true=correct, y_prob=conf), abs=1e-12)


def test_auarc_ties_constant_all_correct_all_wrong():
    conf = np.array([0.7, 0.7, 0.2, 0.7, 0.2, 0.9])
    correct = np.array([1, 0, 0, 1, 1, 0.0])
    assert M.auarc(y_true=correct, y_prob=conf) \
        == pytest.approx(tie_averaged(reference_auarc, conf, correct), abs=1e-12)
    # constant confidence: every top-k has the expected accuracy = the base rate
    assert M.auarc(y_true=correct, y_prob=np.full(6, 0.4)) == pytest.approx(correct.mean())
    assert M.auarc(y_true=np.ones(6), y_prob=conf) == 1.0 and M.auarc(y_true=np.zeros(6), y_prob=conf) == 0.0


@pytest.mark.parametrize("cov", [0.5, 0.8, 0.9])
def test_acc_at_coverage_matches_definition(cov):
    for seed in range(3):
        conf, correct = _random(41, seed)
        assert M.acc_at_coverage(y_true=correct, y_prob=conf, coverage=cov) \
            == pytest.approx(reference_acc_at(conf, correct, cov))
    conf = np.array([0.9, 0.9, 0.5, 0.5, 0.1])
    correct = np.array([1, 0, 1, 0, 1.0])
    ref = tie_averaged(lambda c, y: reference_acc_at(c, y, cov), conf, correct)
    assert M.acc_at_coverage(y_true=correct, y_prob=conf, coverage=cov) == pytest.approx(ref, abs=1e-12)


def test_ece_1bin():
    conf, correct = _random(50, 2)
    assert M.ece_1bin(y_true=correct, y_prob=conf) == pytest.approx(abs(np.mean(conf) - np.mean(correct)))
    assert M.ece_1bin(y_true=[0, 1], y_prob=[0.3, 0.7]) \
        == pytest.approx(0.0)  # over- and under-confidence cancel in one bin
    assert M.ece_1bin(y_true=np.zeros(4), y_prob=np.ones(4)) == 1.0


# ---------------------------------------------------------------- the table rows and their CIs


def test_table_rows_and_cis():
    conf, correct = _random(120, 11)
    recs = [R.confidence_record(c, y) for c, y in zip(conf, correct)]
    names = ["prr", "auarc", "acc_at_50cov", "acc_at_80cov", "acc_at_90cov", "ece_1bin"]
    out = T.compute_all(recs, ["prr_50", *names], ci_names=names, n_boot=50)  # the CI machinery is the table's; its equality to a plain
    # document bootstrap is checked for every CI metric in tests/test_metric_table.py
    assert out["prr"] == pytest.approx(reference_prr(conf, correct))
    assert out["prr_50"] == pytest.approx(reference_prr(conf, correct, 0.5))
    assert out["auarc"] == pytest.approx(reference_auarc(conf, correct))
    assert out["acc_at_90cov"] == pytest.approx(reference_acc_at(conf, correct, 0.9))
    for name in names:
        lo, hi = out[f"{name}_ci_lo"], out[f"{name}_ci_hi"]
        assert lo <= out[name] <= hi and hi - lo > 0, name
    # RANK_METRICS read only the ranking: an increasing map of conf leaves them unchanged, ECE not
    a = R.to_arrays(recs)
    b = R.to_arrays([R.confidence_record(c**3, y) for c, y in zip(conf, correct)])
    for name in T.RANK_METRICS - {"em"}:
        assert T.compute(name, a) == pytest.approx(T.compute(name, b), abs=1e-12), name
    assert T.compute("ece_uw10", a) != pytest.approx(T.compute("ece_uw10", b))


def test_prr_ci_with_one_class_resamples_is_defined():
    conf = np.linspace(0, 1, 30)
    correct = np.zeros(30)
    correct[-2:] = 1  # most resamples still have both classes; the NaN ones are skipped
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", M.SemcalMetricWarning)
        lo, hi = T.ci("prr", R.to_arrays([R.confidence_record(c, y) for c, y in zip(conf, correct)]))
    assert 0.5 < lo <= hi <= 1.0 + 1e-12


# ---------------------------------------------------------------- report pieces (issue 23)


def test_risk_coverage_plot_and_judge_band_table(tmp_path):
    from semcal_eval import plots, report

    conf, correct = _random(30, 4)
    path = plots.risk_coverage_plot(tmp_path / "rc.png", {"a": (conf, correct), "const": (np.full(30, 0.5), correct)})
    assert path.stat().st_size > 1000 and path.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="non-empty"):
        plots.risk_coverage_plot(tmp_path / "x.png", {})
    table = {"judge_f1": {"n": 30, "auroc_conf": 0.70, "prr": 0.30, "ece_uw10": 0.10},
             "judge_em": {"n": 30, "auroc_conf": 0.60, "prr": 0.10, "ece_uw10": 0.25},
             "msp": {"n": 30, "auroc_conf": 0.99, "prr": 0.99, "ece_uw10": 0.0}}
    md = report.judge_band_table(table)
    assert "msp" not in md and "0.600–0.700 (spread 0.100)" in md and "0.100–0.300 (spread 0.200)" in md
    assert "0.100–0.250 (spread 0.150)" in md and report.judge_band_table({"msp": {}}) is None
    # a ranking score's calibration columns are blanked, its ranking ones kept; a probability row untouched
    t = {"eigv": {"n": 3, "ece_uw10": 0.2, "auroc_conf": 0.7, "prr": 0.1, "prr_ci_lo": 0.0, "brier_conf_ci_lo": 0.1},
         "msp": {"n": 3, "ece_uw10": 0.2}}
    report._mask_ranking_rows(t)
    assert math.isnan(t["eigv"]["ece_uw10"]) and math.isnan(t["eigv"]["brier_conf_ci_lo"])
    assert t["eigv"]["prr"] == 0.1 and t["eigv"]["prr_ci_lo"] == 0.0 and t["msp"]["ece_uw10"] == 0.2
