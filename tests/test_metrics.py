"""semcal_eval.core.metrics against sklearn/scipy, hand-computed cases and edge cases; the argument order."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import brier_score_loss, f1_score, log_loss, roc_auc_score

from semcal_eval.core import metrics as m
from semcal_eval.core.metrics import SemcalMetricWarning

# Most tests call the metrics in the old positional order on purpose: it must keep working. Its deprecation
# warning is checked by test_old_positional_order_still_works_and_warns_once.
pytestmark = pytest.mark.filterwarnings("ignore:.*by position is deprecated:DeprecationWarning")


def _rand_probs(n, k, seed=0, temp=1.0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 2 / temp
    p = np.exp(z - z.max(1, keepdims=True))
    return p / p.sum(1, keepdims=True), rng


def _naive_ece(conf, correct, n_bins):
    """Independent loop implementation of the documented bins [0,1/M], ((b-1)/M, b/M]."""
    conf, correct = np.asarray(conf, float), np.asarray(correct, float)
    tot, n = 0.0, len(conf)
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        sel = (conf > lo) & (conf <= hi) if b > 0 else (conf >= lo) & (conf <= hi)
        if sel.any():
            tot += sel.sum() / n * abs(conf[sel].mean() - correct[sel].mean())
    return tot


def _em15(conf, correct):
    """ECE with 15 equal-mass bins (the table's ece_em15)."""
    return m.calibration_error(y_true=correct, y_prob=conf, n_bins=15, scheme="mass")


# ---------------------------------------------------------------- binning


def test_conf_one_in_last_bin_and_zero_in_first():
    for M in (1, 10, 15):
        idx = m.bin_indices([0.0, 1.0], M)
        assert idx.tolist() == [0, M - 1]
    t = m.reliability_table([1.0, 1.0, 0.0], [1, 1, 0], n_bins=15)
    assert t["count"][-1] == 2 and t["count"][0] == 1
    assert m.ece([1.0, 1.0, 0.0], [1, 1, 0]) == 0.0


def test_bin_upper_edge_is_inclusive():
    # 0.5 with 2 bins belongs to [0, 0.5]; 0.5000001 to (0.5, 1]
    assert m.bin_indices([0.5, 0.5000001], 2).tolist() == [0, 1]
    # 0.6 with 5 bins: (0.4, 0.6]; a naive ceil(c*M)-1 gives 3 because 0.6*5 = 3.0000000000000004
    assert m.bin_indices([0.6], 5).tolist() == [2]


def test_ece_matches_naive_loop_on_random_data():
    rng = np.random.default_rng(1)
    for n in (1, 7, 200):
        conf = rng.uniform(size=n)
        conf[: n // 3] = np.round(conf[: n // 3], 1)  # values on bin edges
        correct = (rng.uniform(size=n) < conf).astype(int)
        for M in (1, 10, 15):
            assert m.ece(conf, correct, M) == pytest.approx(_naive_ece(conf, correct, M), abs=1e-12)


def test_ece_hand_computed():
    # 4 docs, 2 bins: [0,0.5] holds 0.2 (wrong) and 0.4 (right): conf 0.3, acc 0.5, gap 0.2
    # (0.5,1] holds 0.6 (right) and 1.0 (right): conf 0.8, acc 1, gap 0.2 -> ECE 0.2, MCE 0.2
    conf, correct = [0.2, 0.4, 0.6, 1.0], [0, 1, 1, 1]
    assert m.ece(conf, correct, 2) == pytest.approx(0.2)
    assert m.mce(conf, correct, 2) == pytest.approx(0.2)
    assert m.rms_ce(conf, correct, 2) == pytest.approx(0.2)
    # one bin: |mean conf 0.55 - acc 0.75| = 0.2 as well; 4 bins: gaps .2,.6,.4,0 each weight 1/4
    assert m.ece(conf, correct, 4) == pytest.approx((0.2 + 0.6 + 0.4 + 0.0) / 4)
    assert m.mce(conf, correct, 4) == pytest.approx(0.6)
    assert m.rms_ce(conf, correct, 4) == pytest.approx(math.sqrt((0.04 + 0.36 + 0.16) / 4))


def test_empty_bins_reported_not_breaking():
    t = m.reliability_table([0.95, 0.97], [1, 0], n_bins=15)
    assert t["count"].sum() == 2 and (t["count"] == 0).sum() == 14
    assert np.isnan(t["conf"][0]) and np.isnan(t["acc"][0])
    assert t["lower"][0] == 0.0 and t["upper"][-1] == 1.0
    assert m.ece([0.95, 0.97], [1, 0]) == pytest.approx(abs(0.96 - 0.5))
    assert np.isfinite(m.mce([0.95, 0.97], [1, 0]))


def test_equal_mass_bins():
    rng = np.random.default_rng(2)
    conf = rng.uniform(size=150)
    idx = m.bin_indices(conf, 15, "mass")
    assert np.bincount(idx, minlength=15).tolist() == [10] * 15
    correct = (rng.uniform(size=150) < conf).astype(int)
    # reference: split the sorted confidences into 15 chunks of 10
    order = np.argsort(conf)
    ref = sum(
        len(ch) / 150 * abs(conf[ch].mean() - correct[ch].mean()) for ch in np.array_split(order, 15)
    )
    assert _em15(conf, correct) == pytest.approx(ref)
    # permutation invariance, and ties never split across bins
    perm = rng.permutation(150)
    assert _em15(conf[perm], correct[perm]) == pytest.approx(_em15(conf, correct))
    tied = np.r_[np.full(60, 1.0), rng.uniform(size=40)]
    idx = m.bin_indices(tied, 15, "mass")
    assert len(set(idx[:60].tolist())) == 1
    assert m.bin_indices([0.3] * 5, 15, "mass").tolist() == [0] * 5


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "conf, correct, msg",
    [
        ([0.5, float("nan")], [1, 0], "NaN"),
        ([0.5, float("inf")], [1, 0], "NaN/inf"),
        ([0.5, 1.2], [1, 0], r"\[0, 1\]"),
        ([0.5, -0.1], [1, 0], r"\[0, 1\]"),
        ([0.5, 0.6], [1, 0, 1], "shape mismatch"),
        ([0.5, 0.6], [1, 2], "0/1"),
        ([], [], "empty"),
        ([[0.5, 0.6]], [[1, 0]], "1-D"),
    ],
)
def test_confidence_input_errors(conf, correct, msg):
    with pytest.raises(ValueError, match=msg):
        m.ece(conf, correct)


def test_probs_input_errors():
    with pytest.raises(ValueError, match="do not sum to 1"):
        m.brier_multiclass([[0.5, 0.6]], [0])
    with pytest.raises(ValueError, match="NaN"):
        m.nll_multiclass([[float("nan"), 1.0]], [0])
    with pytest.raises(ValueError, match="shape mismatch"):
        m.nll_multiclass([[0.5, 0.5]], [0, 1])
    with pytest.raises(ValueError, match=r"outside \[0, 1\]|in \[0, 1\]"):
        m.nll_multiclass([[0.5, 0.5]], [2])
    with pytest.raises(ValueError, match="2-D"):
        m.nll_multiclass([0.5, 0.5], [0])
    with pytest.raises(ValueError, match="integer"):
        m.nll_multiclass([[0.5, 0.5]], [0.5])
    with pytest.raises(ValueError, match="empty gold"):
        m.nll_multiclass([[0.5, 0.5]], [[]])
    # float rounding just outside [0, 1] is tolerated
    assert m.ece([1.0 + 1e-9, 0.0], [1, 0]) == pytest.approx(0.0)


# ---------------------------------------------------------------- Brier / NLL vs sklearn


def test_brier_and_nll_vs_sklearn():
    p, rng = _rand_probs(500, 5, seed=4)
    y = rng.integers(0, 5, 500)
    assert m.nll_multiclass(p, y) == pytest.approx(log_loss(y, y_proba=p, labels=range(5)), rel=1e-12)
    onehot = np.eye(5)[y]
    assert m.brier_multiclass(p, y) == pytest.approx(np.mean(np.sum((p - onehot) ** 2, 1)))
    c, _, corr = m.top_label(p, y)
    assert m.brier_confidence(c, corr) == pytest.approx(brier_score_loss(corr, c))
    assert m.nll_confidence(c, corr) == pytest.approx(log_loss(corr, y_proba=c, labels=[0, 1]))
    # binary: multiclass Brier = 2 x sklearn's binary Brier of P(class 1)
    pb, rng = _rand_probs(200, 2, seed=5)
    yb = rng.integers(0, 2, 200)
    assert m.brier_multiclass(pb, yb) == pytest.approx(2 * brier_score_loss(yb, pb[:, 1]))


def test_nll_zero_probability_is_clipped_like_sklearn():
    p = np.array([[1.0, 0.0], [0.3, 0.7]])
    y = [1, 1]
    assert m.nll_multiclass(p, y) == pytest.approx(log_loss(y, y_proba=p, labels=[0, 1]))
    assert m.nll_multiclass(p, y) == pytest.approx((-math.log(m.NLL_EPS) - math.log(0.7)) / 2)
    assert math.isfinite(m.nll_confidence([1.0], [0]))


def test_brier_ranges_and_extremes():
    assert m.brier_multiclass([[1.0, 0.0, 0.0]], [1]) == 2.0
    assert m.brier_multiclass([[0.0, 1.0, 0.0]], [1]) == 0.0
    assert m.brier_confidence([1.0], [0]) == 1.0


def test_any_gold_uses_normalised_multihot_target():
    p = [[0.5, 0.3, 0.2]]
    # golds {0, 2}: target [.5, 0, .5]
    assert m.brier_multiclass(p, [[0, 2]]) == pytest.approx(0 + 0.09 + 0.09)
    assert m.nll_multiclass(p, [[0, 2]]) == pytest.approx(-(0.5 * math.log(0.5) + 0.5 * math.log(0.2)))
    c, pred, corr = m.top_label([[0.2, 0.5, 0.3], [0.2, 0.5, 0.3]], [[0, 1], [2, 0]])
    assert corr.tolist() == [1.0, 0.0]
    # bool multi-hot matrix is the same as the list form
    G = m.gold_matrix([[0, 1], [2, 0]], 3)
    assert m.nll_multiclass([[0.2, 0.5, 0.3]] * 2, G) == m.nll_multiclass(
        [[0.2, 0.5, 0.3]] * 2, [[0, 1], [2, 0]]
    )


def test_soft_scores_hand_computed():
    p, t = [0.8, 0.1, 0.5], [0.6, 0.0, 0.5]
    assert m.brier_soft(p, t) == pytest.approx((0.04 + 0.01 + 0) / 3)
    assert m.mae(p, t) == pytest.approx((0.2 + 0.1 + 0) / 3)
    ce = -(0.6 * math.log(0.8) + 0.4 * math.log(0.2)) - math.log(0.9) + math.log(2)
    assert m.nll_soft(p, t) == pytest.approx(ce / 3)
    # hard targets: equals sklearn log loss
    assert m.nll_soft([0.8, 0.3], [1, 0]) == pytest.approx(log_loss([1, 0], y_proba=[0.8, 0.3]))
    # 3 bins on p: [0,1/3]: {0.1 vs 0}; (1/3,2/3]: {0.5 vs 0.5}; (2/3,1]: {0.8 vs 0.6}
    assert m.soft_ece(p, t, n_bins=3) == pytest.approx((0.1 + 0 + 0.2) / 3)
    assert m.extreme_rate([0.05, 0.1, 0.9, 0.95, 0.5]) == pytest.approx(2 / 5)


def test_correlations_vs_scipy_and_constant_input():
    rng = np.random.default_rng(6)
    p, t = rng.uniform(size=50), rng.uniform(size=50)
    assert m.pearson(p, t) == pytest.approx(stats.pearsonr(p, t)[0])
    assert m.spearman(p, t) == pytest.approx(stats.spearmanr(p, t)[0])
    for fn in (m.pearson, m.spearman):
        with pytest.warns(SemcalMetricWarning, match="constant"):
            assert math.isnan(fn([0.5] * 5, t[:5]))
        with pytest.warns(SemcalMetricWarning):
            assert math.isnan(fn([0.5], [0.2]))


def test_murphy_decomposition_identity():
    rng = np.random.default_rng(7)
    # confidences on bin midpoints -> constant within bins -> exact identity
    conf = (rng.integers(0, 10, 400) + 0.5) / 10
    corr = (rng.uniform(size=400) < conf).astype(int)
    d = m.murphy_decomposition(conf, corr, n_bins=10)
    assert d["brier"] == pytest.approx(brier_score_loss(corr, conf))
    assert d["reliability"] - d["resolution"] + d["uncertainty"] == pytest.approx(d["brier"])
    assert abs(d["residual"]) < 1e-12
    p, rng = _rand_probs(300, 3, seed=8)
    y = rng.integers(0, 3, 300)
    dm = m.brier_multiclass_decomposition(p, y)
    assert dm["brier"] == pytest.approx(m.brier_multiclass(p, y))
    assert dm["reliability"] - dm["resolution"] + dm["uncertainty"] + dm["residual"] == pytest.approx(
        dm["brier"]
    )


# ---------------------------------------------------------------- AUROC


def test_auroc_vs_sklearn():
    p, rng = _rand_probs(400, 4, seed=9)
    y = rng.integers(0, 4, 400)
    c, _, corr = m.top_label(p, y)
    assert m.auroc_confidence(c, corr) == pytest.approx(roc_auc_score(corr, c))
    assert m.auroc_class(p, y) == pytest.approx(roc_auc_score(y, p, multi_class="ovr", average="macro"))
    pb, rng = _rand_probs(100, 2, seed=10)
    yb = rng.integers(0, 2, 100)
    assert m.auroc_class(pb, yb) == pytest.approx(roc_auc_score(yb, pb[:, 1]))


def test_auroc_single_class_is_nan_with_warning():
    with pytest.warns(SemcalMetricWarning, match="all 3 answers are correct"):
        assert math.isnan(m.auroc_confidence([0.2, 0.9, 0.5], [1, 1, 1]))
    with pytest.warns(SemcalMetricWarning):
        assert math.isnan(m.auroc_confidence([0.2], [0]))
    with pytest.warns(SemcalMetricWarning, match="no class"):
        assert math.isnan(m.auroc_class([[0.3, 0.7], [0.6, 0.4]], [1, 1]))


def test_auroc_class_skips_absent_classes():
    p, rng = _rand_probs(200, 4, seed=11)
    y = rng.integers(0, 3, 200)  # class 3 never gold
    ref = np.mean([roc_auc_score(y == k, p[:, k]) for k in range(3)])
    assert m.auroc_class(p, y) == pytest.approx(ref)


# ---------------------------------------------------------------- selective prediction


def test_aurc_hand_computed_and_ties():
    # sorted by conf: right, wrong, right, wrong -> risks 0, 1/2, 1/3, 1/2
    conf, corr = [0.9, 0.7, 0.8, 0.1], [1, 1, 0, 0]
    assert m.aurc(conf, corr) == pytest.approx((0 + 0.5 + 1 / 3 + 0.5) / 4)
    # a full tie is the mean over orderings: enumerate both orderings of [right, wrong]
    #   (R, W): risks 0, 1/2 ; (W, R): risks 1, 1/2 -> expected (0.25 + 0.75)/2 = 0.5
    assert m.aurc([0.4, 0.4], [1, 0]) == pytest.approx(0.5)
    # order of input never matters with ties
    rng = np.random.default_rng(12)
    c = np.round(rng.uniform(size=60), 1)
    y = (rng.uniform(size=60) < c).astype(int)
    perm = rng.permutation(60)
    assert m.aurc(c[perm], y[perm]) == pytest.approx(m.aurc(c, y))
    # perfect ranking of 2 right then 2 wrong: risks 0, 0, 1/3, 1/2
    assert m.aurc([0.9, 0.8, 0.2, 0.1], [1, 1, 0, 0]) == pytest.approx((1 / 3 + 1 / 2) / 4)


def test_aurc_tie_expectation_matches_enumeration():
    import itertools

    conf = np.array([0.9, 0.5, 0.5, 0.5, 0.2])
    corr = np.array([1, 0, 1, 0, 1])
    vals = []
    for perm in itertools.permutations([1, 2, 3]):
        order = [0, *perm, 4]
        y = corr[order]
        vals.append(np.mean(np.cumsum(1 - y) / np.arange(1, 6)))
    assert m.aurc(conf, corr) == pytest.approx(np.mean(vals))


def test_acc_at_coverage():
    conf = np.linspace(0.01, 1.0, 100)
    corr = (conf > 0.5).astype(int)
    assert m.acc_at_coverage(conf, corr, 0.1) == 1.0
    assert m.acc_at_coverage(conf, corr, 1.0) == pytest.approx(0.5)
    assert m.acc_at_coverage([0.3], [1], 0.1) == 1.0  # n = 1 -> one document
    with pytest.raises(ValueError, match="coverage"):
        m.acc_at_coverage(conf, corr, 0.0)


# ---------------------------------------------------------------- accuracy / F1


def test_macro_f1_vs_sklearn_keeps_all_classes():
    rng = np.random.default_rng(13)
    y = rng.integers(0, 3, 100)
    pred = rng.integers(0, 3, 100)
    ref = f1_score(y, pred, labels=range(5), average="macro", zero_division=0)
    assert m.macro_f1(pred, y, 5) == pytest.approx(ref)
    # classes 3, 4 count as zeros: 5-class macro F1 = 3/5 of the 3-class one
    assert m.macro_f1(pred, y, 5) == pytest.approx(f1_score(y, pred, average="macro") * 3 / 5)
    # any-gold: a prediction within the gold list is a hit
    assert m.macro_f1([1, 0], [[0, 1], [0]], 2) == 1.0
    assert m.accuracy([True, False]) == 0.5


def test_n_equals_one():
    assert m.ece([0.7], [1]) == pytest.approx(0.3)
    assert _em15([0.7], [1]) == pytest.approx(0.3)
    assert m.aurc([0.7], [0]) == 1.0
    assert m.brier_multiclass([[0.6, 0.4]], [0]) == pytest.approx(0.32)
    assert m.classwise_ece([[0.6, 0.4]], [0]) == pytest.approx(0.4)


# ---------------------------------------------------------------- bootstrap / reports


def test_bootstrap_ci_seeded_and_covers():
    rng = np.random.default_rng(14)
    y = (rng.uniform(size=400) < 0.7).astype(int)
    lo, hi = m.bootstrap_ci(m.accuracy, y, n_boot=300, seed=1)
    assert (lo, hi) == m.bootstrap_ci(m.accuracy, y, n_boot=300, seed=1)
    assert (lo, hi) != m.bootstrap_ci(m.accuracy, y, n_boot=300, seed=2)
    se = math.sqrt(y.mean() * (1 - y.mean()) / 400)
    assert lo < y.mean() < hi
    assert hi - lo == pytest.approx(2 * 1.96 * se, rel=0.2)


def test_bootstrap_ci_nan_replicates():
    # 1 wrong of 3: ~30% of resamples are single-class -> ignored silently
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # sklearn's argument names: the positional form warns once per process (DeprecationWarning), so a
        # positional call here passed or failed by test order
        lo, hi = m.bootstrap_ci(lambda c, y: m.auroc_confidence(y_true=y, y_prob=c), [0.9, 0.8, 0.1], [1, 1, 0],
                                n_boot=200)
    assert lo == hi == 1.0
    with pytest.warns(SemcalMetricWarning, match="200 of 200"):
        lo, hi = m.bootstrap_ci(m.auroc_confidence, [0.9, 0.8], [1, 1], n_boot=200)
    assert math.isnan(lo) and math.isnan(hi)
    with pytest.raises(ValueError, match="shape mismatch"):
        m.bootstrap_ci(m.ece, [0.1, 0.2], [1])


@pytest.mark.parametrize("n,ties,p_correct", [(3, False, 0.5), (40, True, 0.9), (500, True, 0.5), (200, False, 0.02)])
def test_batched_auroc_replicates_are_sklearns(n, ties, p_correct):
    """The vectorised AUROC replicates (rank formula) equal a loop of sklearn's roc_auc_score over the same
    resamples: same values, same single-class resamples dropped; conf with heavy ties and rare classes too."""
    rng = np.random.default_rng(n)
    conf = rng.uniform(size=n)
    if ties:
        conf = np.round(conf, 1)
    correct = (rng.uniform(size=n) < p_correct).astype(int)
    correct[0], correct[-1] = 1, 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SemcalMetricWarning)
        loop = m.bootstrap_replicates(lambda c, y: m.auroc_confidence(y_true=y, y_prob=c), conf, correct,
                                      n_boot=300, seed=3)
        rows = m.bootstrap_replicates(m.auroc_confidence_rows, conf, correct, n_boot=300, seed=3, batched=True)
    assert len(rows) == len(loop) and len(loop) > 0
    np.testing.assert_allclose(rows, loop, rtol=0, atol=1e-12)
    # chunking changes nothing
    idx = np.random.default_rng(0).integers(0, n, size=(7, n))
    np.testing.assert_array_equal(m.auroc_confidence_rows(conf[idx], correct[idx], chunk_cells=n),
                                  m.auroc_confidence_rows(conf[idx], correct[idx]))


def test_accuracy_from_predictions():
    assert m.accuracy([2, 0, 1], [2, [1, 0], 0]) == pytest.approx(2 / 3)
    assert m.accuracy(np.array([1, 1]), np.array([1, 0]), n_classes=2) == 0.5
    with pytest.raises(ValueError, match="shape mismatch"):
        m.accuracy([1, 1], [1])
    with pytest.raises(ValueError, match="only 2 classes"):
        m.accuracy([2], [1], n_classes=2)
    with pytest.warns(SemcalMetricWarning, match="auroc_class"):  # one gold class only
        assert math.isnan(m.auroc_class(np.array([[0.3, 0.7], [0.8, 0.2]]), [1, 1]))


def test_integer_one_hot_labels_are_read_as_one_hot():
    """Regression (issue 15): gold_matrix(np.eye(3, dtype=int)) read row [1, 0, 0] as golds {1, 0}."""
    P = np.array([[0.5, 0.3, 0.2], [0.2, 0.5, 0.3], [0.1, 0.1, 0.8]])
    onehot = np.eye(3, dtype=int)
    assert m.gold_matrix(onehot, 3).tolist() == np.eye(3, dtype=bool).tolist()
    assert m.brier_multiclass(P, onehot) == pytest.approx(m.brier_multiclass(P, [0, 1, 2]))
    assert m.nll_multiclass(P, onehot) == pytest.approx(log_loss([0, 1, 2], P, labels=[0, 1, 2]))
    assert m.gold_matrix(np.array([[1.0, 1.0, 0.0]]), 3).tolist() == [[True, True, False]]  # float multi-hot
    with pytest.raises(ValueError, match="one-hot/multi-hot matrix, got shape"):
        m.gold_matrix(np.array([[0, 1], [1, 2]]), 3)  # a table of index pairs: ambiguous, rejected
    with pytest.raises(ValueError, match="must be a 0/1"):
        m.gold_matrix(np.array([[0, 2, 1]]), 3)
    # lists of lists stay lists of acceptable gold indices
    assert m.gold_matrix([[1, 0, 0]], 3).tolist() == [[True, True, False]]


# ---------------------------------------------------------------- calibration_error (one function, three norms)


def _sklearn_binned(conf, correct, n_bins):
    """(weights, |acc - conf|) of the non-empty equal-width bins: per-bin means from scikit-learn's
    calibration_curve, bin sizes counted by hand on the documented bins [0, 1/M], ((b-1)/M, b/M]."""
    from sklearn.calibration import calibration_curve

    acc, mean_conf = calibration_curve(correct, conf, n_bins=n_bins, strategy="uniform")
    counts = []
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        k = int(np.sum(((conf > lo) | (b == 0)) & (conf <= hi)))
        if k:
            counts.append(k)
    return np.asarray(counts) / len(conf), np.abs(acc - mean_conf)


@pytest.mark.parametrize("n_bins", [1, 5, 10, 15])
def test_calibration_error_norms_against_sklearn_calibration_curve(n_bins):
    rng = np.random.default_rng(11)
    conf = rng.uniform(size=400)
    correct = (rng.uniform(size=400) < conf**2).astype(int)  # overconfident
    w, gap = _sklearn_binned(conf, correct, n_bins)
    assert len(w) == len(gap) and w.sum() == pytest.approx(1.0)
    ce = lambda norm: m.calibration_error(y_true=correct, y_prob=conf, norm=norm, n_bins=n_bins)  # noqa: E731
    assert ce("l1") == pytest.approx(float(np.sum(w * gap)), abs=1e-12)
    assert ce("l2") == pytest.approx(math.sqrt(float(np.sum(w * gap**2))), abs=1e-12)
    assert ce("max") == pytest.approx(float(gap.max()), abs=1e-12)
    assert ce("l1") == pytest.approx(_naive_ece(conf, correct, n_bins), abs=1e-12)


def test_calibration_error_hand_values():
    # the hand case of test_ece_hand_computed, 4 bins: gaps .2, .6, .4, 0, each weight 1/4
    y, c = [0, 1, 1, 1], [0.2, 0.4, 0.6, 1.0]
    assert m.calibration_error(y_true=y, y_prob=c, n_bins=4) == pytest.approx(0.3)
    assert m.calibration_error(y_true=y, y_prob=c, n_bins=4, norm="l2") == pytest.approx(math.sqrt(0.14))
    assert m.calibration_error(y_true=y, y_prob=c, n_bins=4, norm="max") == pytest.approx(0.6)
    # perfectly calibrated bins: 0 under every norm; one document: |conf - correct|
    for norm in m.NORMS:
        assert m.calibration_error(y_true=[1, 0], y_prob=[1.0, 0.0], norm=norm) == 0.0
        assert m.calibration_error(y_true=[1], y_prob=[0.7], norm=norm) == pytest.approx(0.3)
    # the three names are the three norms (the values of the docstring's hand check)
    y3, c3 = [1, 0, 0], [0.9, 0.8, 0.1]
    assert m.ece(y_true=y3, y_prob=c3, n_bins=2) == pytest.approx(0.8 / 3)
    assert m.rms_ce(y_true=y3, y_prob=c3, n_bins=2) == pytest.approx(math.sqrt(0.01 / 3 + 2 * 0.1225 / 3))
    assert m.mce(y_true=y3, y_prob=c3, n_bins=2) == pytest.approx(0.35)


def test_calibration_error_takes_its_data_by_keyword_only():
    with pytest.raises(TypeError):
        m.calibration_error([1, 0], [0.9, 0.2])  # no positional order to get wrong
    with pytest.raises(ValueError, match="norm"):
        m.calibration_error(y_true=[1], y_prob=[0.5], norm="l3")
    with pytest.raises(ValueError, match="y_prob must lie in"):
        m.calibration_error(y_true=[1], y_prob=[1.5])
    with pytest.raises(ValueError, match="y_true must be 0/1"):
        m.calibration_error(y_true=[0.5], y_prob=[0.5])


# ---------------------------------------------------------------- scikit-learn's argument names


def test_sklearn_names_give_sklearns_numbers():
    rng = np.random.default_rng(12)
    conf = rng.uniform(0.01, 0.99, size=300)
    correct = (rng.uniform(size=300) < conf).astype(int)
    assert m.brier_confidence(y_true=correct, y_prob=conf) == pytest.approx(brier_score_loss(correct, conf))
    assert m.nll_confidence(y_true=correct, y_prob=conf) == pytest.approx(log_loss(correct, conf))
    assert m.auroc_confidence(y_true=correct, y_prob=conf) == pytest.approx(roc_auc_score(correct, conf))
    p, rng = _rand_probs(200, 4, seed=13)
    y = rng.integers(0, 4, 200)
    assert m.nll_multiclass(y_true=y, y_prob=p) == pytest.approx(log_loss(y, p, labels=range(4)))
    t = rng.uniform(size=200)
    assert m.brier_soft(y_true=t, y_prob=p[:, 1]) == pytest.approx(np.mean((p[:, 1] - t) ** 2))


def test_old_positional_order_still_works_and_warns_once(monkeypatch):
    monkeypatch.setattr(m, "_ORDER_WARNED", set())
    c, y = [0.9, 0.8, 0.1], [1, 0, 0]
    with pytest.warns(DeprecationWarning, match=r"ece\(y_true=correct, y_prob=conf"):
        old = m.ece(c, y, 2)
    assert old == m.ece(y_true=y, y_prob=c, n_bins=2) == pytest.approx(0.8 / 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert m.ece(c, y, 2) == old  # one warning per function and process
        assert m.ece(conf=c, correct=y, n_bins=2) == old  # the old names by keyword: unambiguous, no warning
        assert m.brier_multiclass(y_true=[0, 1], y_prob=[[0.5, 0.5], [1.0, 0.0]]) == 1.25


def test_the_two_orders_cannot_be_mixed_or_swapped_silently():
    c, y = [0.9, 0.8, 0.1], [1, 0, 0]
    with pytest.raises(TypeError, match="both y_true= and y_prob="):
        m.ece(y_true=y)
    with pytest.raises(TypeError, match="not both"):
        m.ece(c, y_prob=c, y_true=y)
    with pytest.raises(TypeError, match="not both"):
        m.brier_multiclass(probs=[[0.5, 0.5]], y_true=[0], y_prob=[[0.5, 0.5]])
    # scikit-learn's positional order (y_true, y_prob) given to the old positional signature is refused
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(ValueError, match="correct must be 0/1"):
            m.ece(y, c)
        with pytest.raises(ValueError, match="probs must be 2-D"):
            m.brier_multiclass([0, 1], [[0.5, 0.5], [1.0, 0.0]])


def test_public_validators_and_target():
    assert m.check_probs([[0.25, 0.75]]).tolist() == [[0.25, 0.75]]
    with pytest.raises(ValueError, match="sum to 1"):
        m.check_probs([[0.5, 0.6]])
    assert m.check_unit([1.0000001, 0.0], "conf").tolist() == [1.0, 0.0]
    with pytest.raises(ValueError, match="flag must be 0/1"):
        m.check_binary([0.5], "flag")
    # the normalised multi-hot target, by hand
    assert m.gold_target(np.array([[True, False, True], [False, True, False]])).tolist() == [[0.5, 0, 0.5], [0, 1, 0]]
