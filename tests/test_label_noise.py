"""semcal_eval.core.label_noise: correcting accuracy and calibration for a correctness judge's errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from semcal_eval.core.label_noise import (
    JudgeRates,
    check_independence,
    corrected_accuracy,
    corrected_reliability,
    rogan_gladen,
    stratified_corrected_accuracy,
    stratified_corrected_reliability,
)

P_TRUE, SE, SP = 0.55, 0.75, 0.95


def simulate(rng: np.random.Generator, p_true, n: int, se, sp) -> tuple[np.ndarray, np.ndarray]:
    """(true correctness, judge verdict): the judge says correct w.p. ``se`` on a correct answer and
    w.p. 1 - ``sp`` on a wrong one (``p_true``, ``se`` may be arrays of length n)."""
    truth = rng.random(n) < p_true
    u = rng.random(n)
    judge = np.where(truth, u < se, u >= sp)
    return truth.astype(float), judge.astype(float)


def table(rng: np.random.Generator, n: int, se: float, sp: float) -> JudgeRates:
    truth, judge = simulate(rng, 0.5, n, se, sp)
    return JudgeRates.from_verdicts(judge, truth)


def rg_fixed(q, se: float, sp: float):
    return np.clip((q - (1 - sp)) / (se - (1 - sp)), 0, 1)


# ---------------------------------------------------------------------------------------- recovery


def test_correction_recovers_known_accuracy():
    rng = np.random.default_rng(0)
    _, judge = simulate(rng, P_TRUE, 20000, SE, SP)
    observed = judge.mean()
    assert abs(observed - P_TRUE) > 0.1  # the judge's errors do bias the raw figure (expected ~0.435)
    assert abs(rogan_gladen(observed, SE, SP) - P_TRUE) < 0.01

    rates = table(rng, 2000, SE, SP)
    res = corrected_accuracy(judge, rates)
    lo, hi = res["ci"]
    assert lo <= P_TRUE <= hi
    assert lo < res["corrected"] < hi
    assert res["observed"] == observed and res["n"] == 20000
    assert res["sensitivity"] == rates.sensitivity and res["specificity"] == rates.specificity

    # The correction is only as good as its rates: claiming a near-perfect judge leaves the bias in.
    assert abs(rogan_gladen(observed, 0.99, 0.99) - P_TRUE) > 0.05
    wrong = corrected_accuracy(judge, JudgeRates(tp=990, fp=10, fn=10, tn=990))
    assert abs(wrong["corrected"] - P_TRUE) > 0.05
    assert not wrong["ci"][0] <= P_TRUE <= wrong["ci"][1]


def test_ci_coverage_and_width_include_rate_uncertainty():
    rng = np.random.default_rng(1)
    reps, n_eval, n_lab, se, sp = 100, 1000, 400, 0.8, 0.9
    covered, widths, ref_widths = 0, [], []
    for r in range(reps):
        _, judge = simulate(rng, P_TRUE, n_eval, se, sp)
        rates = table(rng, n_lab, se, sp)
        lo, hi = corrected_accuracy(judge, rates, seed=r)["ci"]
        covered += lo <= P_TRUE <= hi
        widths.append(hi - lo)
        # Reference: resample the verdicts only, rates fixed at their point estimates.
        idx = rng.integers(0, n_eval, size=(1000, n_eval))
        est = rg_fixed(judge[idx].mean(axis=1), rates.sensitivity, rates.specificity)
        rlo, rhi = np.quantile(est, [0.025, 0.975])
        ref_widths.append(rhi - rlo)
    assert covered / reps >= 0.85
    assert np.mean(widths) > 1.2 * np.mean(ref_widths)


def test_bootstrap_matches_verdict_resampling_when_rates_are_known():
    # With a huge labelled table the rates' posterior is a spike, so the CI must reduce to the plain
    # bootstrap of the verdicts: checks the binomial shortcut for resampling.
    rng = np.random.default_rng(2)
    _, judge = simulate(rng, P_TRUE, 2000, SE, SP)
    rates = JudgeRates(tp=7_500_000, fn=2_500_000, tn=9_500_000, fp=500_000)
    lo, hi = corrected_accuracy(judge, rates, n_boot=4000)["ci"]
    idx = rng.integers(0, len(judge), size=(4000, len(judge)))
    rlo, rhi = np.quantile(rg_fixed(judge[idx].mean(axis=1), SE, SP), [0.025, 0.975])
    assert hi - lo == pytest.approx(rhi - rlo, rel=0.1)
    assert (lo + hi) / 2 == pytest.approx((rlo + rhi) / 2, abs=0.005)


def test_deterministic_and_drops_chance_replicates():
    correct = np.r_[np.ones(60), np.zeros(40)]
    near_chance = JudgeRates(tp=6, fn=4, tn=6, fp=4)  # Se = Sp = 0.6: many posterior draws have Se+Sp <= 1
    a = corrected_accuracy(correct, near_chance, seed=3)
    assert a == corrected_accuracy(correct, near_chance, seed=3)
    assert a["dropped"] != corrected_accuracy(correct, near_chance, seed=4)["dropped"]
    assert 0 < a["dropped"] < 2000
    assert a["ci"] == [0.0, 1.0]  # near chance the corrected accuracy is barely constrained
    assert corrected_accuracy(correct, JudgeRates(tp=900, fn=100, tn=900, fp=100))["dropped"] == 0


# ---------------------------------------------------------------------------------------- edge cases


@pytest.mark.parametrize("se,sp", [(0.5, 0.5), (0.3, 0.6), (0.0, 0.0)])
def test_no_better_than_chance_raises(se, sp):
    with pytest.raises(ValueError, match="no better than chance"):
        rogan_gladen(0.5, se, sp)


def test_chance_table_raises():
    with pytest.raises(ValueError, match="no better than chance"):
        corrected_accuracy([1, 0, 1], JudgeRates(tp=5, fn=5, tn=5, fp=5))


@pytest.mark.parametrize("args", [(1.2, 0.9, 0.9), (0.5, -0.1, 0.9), (0.5, 0.9, math.nan), (math.inf, 0.9, 0.9),
                                  ("x", 0.9, 0.9)])
def test_invalid_rates_raise(args):
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        rogan_gladen(*args)


def test_clipping():
    assert rogan_gladen(0.03, 0.9, 0.95) == 0.0  # below the false-positive rate 1 - Sp = 0.05
    assert rogan_gladen(0.95, 0.9, 0.95) == 1.0  # above Se
    assert 0 < rogan_gladen(0.5, 0.9, 0.95) < 1


@pytest.mark.parametrize("q", [0.0, 0.1, 0.1234, 0.7, 1.0])
def test_perfect_judge_returns_observed_exactly(q):
    assert rogan_gladen(q, 1.0, 1.0) == q
    correct = np.r_[np.ones(7), np.zeros(3)]
    assert corrected_accuracy(correct, JudgeRates(tp=50, fn=0, tn=50, fp=0))["corrected"] == 0.7


@pytest.mark.parametrize("kwargs,match", [
    ({"tp": -1, "fp": 1, "fn": 1, "tn": 1}, "tp must be >= 0"),
    ({"tp": 1, "fp": 1.5, "fn": 1, "tn": 1}, "fp must be an integer"),
    ({"tp": 1, "fp": 1, "fn": 2.0, "tn": 1}, "fn must be an integer"),
    ({"tp": 1, "fp": 1, "fn": 1, "tn": True}, "tn must be an integer"),
    ({"tp": 0, "fp": 3, "fn": 0, "tn": 3}, "no people-correct answers"),
    ({"tp": 3, "fp": 0, "fn": 3, "tn": 0}, "no people-wrong answers"),
])
def test_invalid_counts_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        JudgeRates(**kwargs)


def test_rates_and_numpy_counts():
    r = JudgeRates(tp=np.int64(30), fp=5, fn=10, tn=15)
    assert (r.sensitivity, r.specificity) == (0.75, 0.75)
    assert type(r.tp) is int
    with pytest.raises(Exception):  # frozen
        r.tp = 3  # type: ignore[misc]


def test_empty_and_bad_correct_raise():
    rates = JudgeRates(tp=9, fn=1, tn=9, fp=1)
    with pytest.raises(ValueError, match="empty"):
        corrected_accuracy([], rates)
    with pytest.raises(ValueError, match="0/1"):
        corrected_accuracy([0, 0.5, 1], rates)
    with pytest.raises(ValueError, match="n_boot"):
        corrected_accuracy([0, 1], rates, n_boot=0)
    with pytest.raises(ValueError, match="empty"):
        corrected_reliability([], [], rates)
    with pytest.raises(ValueError, match="shape mismatch"):
        corrected_reliability([0.1, 0.2], [1], rates)


# ---------------------------------------------------------------------------------------- reliability


def reference_ece(conf, correct, n_bins: int) -> float:
    """Plain loops: bins [b/M, (b+1)/M), the last one closed at 1."""
    total, n = 0.0, len(conf)
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        members = [i for i, c in enumerate(conf) if lo <= c < hi or (b == n_bins - 1 and c == 1.0)]
        if members:
            acc = sum(correct[i] for i in members) / len(members)
            mc = sum(conf[i] for i in members) / len(members)
            total += len(members) / n * abs(acc - mc)
    return total


def test_reliability_perfect_judge_matches_reference():
    rng = np.random.default_rng(4)
    conf = np.r_[rng.random(500) * 0.7, [0.0, 0.1, 0.3, 0.5, 0.7, 1.0, 1.0]]  # edges included, bins 8-9 empty
    correct = (rng.random(len(conf)) < conf ** 2).astype(float)
    res = corrected_reliability(conf, correct, JudgeRates(tp=10, fn=0, tn=10, fp=0), n_bins=10)
    assert res["corrected_ece"] == res["ece"]
    assert res["ece"] == pytest.approx(reference_ece(conf.tolist(), correct.tolist(), 10), abs=1e-12)
    assert res["ece"] > 0.05
    counts = [b["n"] for b in res["bins"]]
    assert len(counts) == 10 and sum(counts) == len(conf)
    assert counts[7] == 1 and counts[8] == 0 and counts[9] == 2  # 0.7 -> [0.7, 0.8); 1.0 -> the last bin
    assert math.isnan(res["bins"][8]["corrected_acc"])


def test_reliability_noisy_judge_on_calibrated_data():
    rng = np.random.default_rng(5)
    n = 20000
    conf = rng.random(n)
    _, judge = simulate(rng, conf, n, SE, SP)  # truly calibrated: P(correct | conf) = conf
    res = corrected_reliability(conf, judge, table(rng, 2000, SE, SP))
    assert res["ece"] > 0.1  # the judge's errors make a calibrated model look miscalibrated
    assert res["corrected_ece"] < res["ece"] / 3
    accs = [b["corrected_acc"] for b in res["bins"]]
    mids = [(b["lower"] + b["upper"]) / 2 for b in res["bins"]]
    assert np.allclose(accs, mids, atol=0.06)


# ---------------------------------------------------------------------------------------- independence


def labelled_set(seed: int, se, sp: float = 0.9, n: int = 20000):
    rng = np.random.default_rng(seed)
    conf = rng.random(n)
    human, judge = simulate(rng, conf, n, se(conf) if callable(se) else se, sp)
    return conf, judge, human


def test_independence_rejected_when_sensitivity_depends_on_confidence():
    conf, judge, human = labelled_set(0, lambda c: 0.95 - 0.45 * c)  # Se 0.95 -> 0.5 as confidence rises
    res = check_independence(conf, judge, human)
    assert res["holds"] is False
    assert res["sensitivity_p"] < 1e-6
    se_bins = [b["sensitivity"] for b in res["bins"]]
    assert len(se_bins) == 5 and se_bins[0] > se_bins[-1] + 0.25


def test_independence_holds_when_rates_are_constant():
    conf, judge, human = labelled_set(0, 0.8)
    res = check_independence(conf, judge, human)
    assert res["holds"] is True
    assert res["sensitivity_p"] >= 0.05 and res["specificity_p"] >= 0.05
    assert all(abs(b["sensitivity"] - 0.8) < 0.05 for b in res["bins"])
    assert sum(b["n"] for b in res["bins"]) == len(conf)


def test_independence_cannot_tell_without_negatives():
    rng = np.random.default_rng(6)
    conf = rng.random(300)
    human = np.ones(300)
    judge = (rng.random(300) < 0.9).astype(float)
    res = check_independence(conf, judge, human)
    assert math.isnan(res["specificity_p"]) and res["holds"] is None
    assert not math.isnan(res["sensitivity_p"])
    assert all(math.isnan(b["specificity"]) and b["n_neg"] == 0 for b in res["bins"])


def test_independence_skips_bins_without_positives():
    # Low-confidence answers are all wrong: the first bins have no positives and drop out of the Se test.
    conf = np.linspace(0, 1, 1000)
    human = (conf > 0.5).astype(float)
    judge = human.copy()
    judge[::7] = 1 - judge[::7]
    res = check_independence(conf, judge, human, n_bins=4)
    assert [b["n_pos"] > 0 for b in res["bins"]] == [False, False, True, True]
    assert not math.isnan(res["sensitivity_p"]) and not math.isnan(res["specificity_p"])


# ---------------------------------------------------------------------------------------- strata
def test_stratified_correction_recovers_a_mix_that_pooled_rates_get_wrong():
    """Short answers graded well, sentence answers badly (as a lexical judge does): the evaluation set has
    more sentences than the labelled set, so pooled rates mis-correct and per-shape rates do not."""
    rng = np.random.default_rng(3)
    p_short, p_sent = 0.6, 0.5
    t_s, j_s = simulate(rng, p_short, 4000, 0.95, 0.97)
    t_l, j_l = simulate(rng, p_sent, 16000, 0.55, 0.95)
    truth = (t_s.sum() + t_l.sum()) / 20000
    rates_s = table(rng, 3000, 0.95, 0.97)
    rates_l = table(rng, 3000, 0.55, 0.95)
    r = stratified_corrected_accuracy({"short": (j_s, rates_s), "sentence": (j_l, rates_l)})
    assert abs(r["corrected"] - truth) < 0.015 and r["ci"][0] <= truth <= r["ci"][1]
    # pooled rates from a labelled set with the shapes half and half
    pooled = JudgeRates(rates_s.tp + rates_l.tp, rates_s.fp + rates_l.fp, rates_s.fn + rates_l.fn,
                        rates_s.tn + rates_l.tn)
    wrong = corrected_accuracy(np.concatenate([j_s, j_l]), pooled)["corrected"]
    assert abs(wrong - truth) > 0.04
    assert r["by_stratum"]["short"]["n"] == 4000 and r["n"] == 20000


def test_stratified_correction_refuses_nothing_to_correct():
    with pytest.raises(ValueError, match="non-empty"):
        stratified_corrected_accuracy({})
    with pytest.raises(ValueError, match="every stratum is empty"):
        stratified_corrected_accuracy({"a": ([], JudgeRates(9, 1, 1, 9))})
    with pytest.raises(ValueError, match="no better than chance"):
        stratified_corrected_accuracy({"a": ([1, 0], JudgeRates(5, 5, 5, 5))})


def test_stratified_reliability_recovers_calibration_where_pooled_rates_do_not():
    """A calibrated model whose short answers the judge grades well and sentences badly, the sentences more
    common at high confidence: per-shape rates bin by bin recover the calibration, pooled rates do not."""
    rng = np.random.default_rng(8)
    n = 30000
    conf = rng.random(n)
    sentence = rng.random(n) < conf  # sentences grow with confidence: the pooled correction is off bin by bin
    truth = (rng.random(n) < conf).astype(float)
    se = np.where(sentence, 0.6, 0.95)
    sp = np.where(sentence, 0.93, 0.97)
    judge = np.where(truth == 1, rng.random(n) < se, rng.random(n) >= sp).astype(float)
    shapes = np.where(sentence, "sentence", "short").tolist()
    rates = {"short": table(rng, 4000, 0.95, 0.97), "sentence": table(rng, 4000, 0.6, 0.93)}
    res = stratified_corrected_reliability(conf, judge, shapes, rates, n_bins=10)
    assert res["ece"] == pytest.approx(reference_ece(conf.tolist(), judge.tolist(), 10), abs=1e-12)
    assert res["ece"] > 0.1 and res["corrected_ece"] < 0.03
    pooled = JudgeRates(*(getattr(rates["short"], k) + getattr(rates["sentence"], k) for k in ("tp", "fp", "fn", "tn")))
    assert corrected_reliability(conf, judge, pooled, n_bins=10)["corrected_ece"] > 2 * res["corrected_ece"]
    # the wrong rates (shapes swapped) do not recover it either
    swapped = stratified_corrected_reliability(conf, judge, shapes, {"short": rates["sentence"],
                                                                     "sentence": rates["short"]}, n_bins=10)
    assert swapped["corrected_ece"] > 0.05


def test_stratified_reliability_refuses_a_stratum_without_rates():
    with pytest.raises(ValueError, match="no judge rates for strata \\['sentence'\\]"):
        stratified_corrected_reliability([0.5, 0.6], [1, 0], ["short", "sentence"], {"short": JudgeRates(9, 1, 1, 9)})
    with pytest.raises(ValueError, match="shape mismatch"):
        stratified_corrected_reliability([0.5, 0.6], [1, 0], ["short"], {"short": JudgeRates(9, 1, 1, 9)})
