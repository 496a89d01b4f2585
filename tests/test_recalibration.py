"""semcal_eval.core.recalibration: temperature recovery on synthetic data, errors, reference predictors."""

import math
import warnings

import numpy as np
import pytest
from scipy.special import softmax
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

from semcal_eval.core import recalibration as r
from semcal_eval.core.recalibration import RecalibrationWarning


def _synthetic(T_true, n=4000, k=5, seed=0):
    """Logits z; labels sampled from softmax(z / T_true): the NLL-optimal temperature is T_true."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 3
    p = softmax(z / T_true, axis=1)
    # inverse-CDF sampling, one uniform per document
    y = np.minimum((np.cumsum(p, axis=1) < rng.uniform(size=(n, 1))).sum(axis=1), k - 1)
    return z, y


@pytest.mark.parametrize("T_true", [0.5, 1.0, 2.5])
def test_temperature_recovery(T_true):
    z, y = _synthetic(T_true, seed=int(T_true * 10))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecalibrationWarning)
        fit = r.fit_temperature(z, y)
    assert fit.T == pytest.approx(T_true, rel=0.08)
    assert fit.converged and not fit.at_bound and fit.ok
    assert fit.nll_after <= fit.nll_before + 1e-12
    # nll_after is the sklearn log loss of the rescaled probabilities
    assert fit.nll_after == pytest.approx(log_loss(y, y_proba=fit.apply(z), labels=range(5)))


def test_temperature_is_nll_minimiser():
    z, y = _synthetic(1.7, n=1500, seed=3)
    fit = r.fit_temperature(z, y)
    grid = np.exp(np.linspace(math.log(0.5), math.log(5), 150))
    nlls = [log_loss(y, y_proba=r.apply_temperature(z, t), labels=range(5)) for t in grid]
    assert fit.T == pytest.approx(grid[int(np.argmin(nlls))], rel=0.02)  # grid step ~1.5%
    assert fit.nll_after <= min(nlls) + 1e-9


def test_temperature_on_logprobs_with_zeros():
    # a distribution with exact zeros (constrained decoding): class 4 has p = 0 (log p = -inf) and is
    # never gold; labels come from softmax(z[:, :4] / 2) -> T = 2 must be recovered despite the -inf
    z4, y = _synthetic(2.0, n=3000, k=4, seed=4)
    logp = np.c_[np.log(softmax(z4, axis=1)), np.full(len(z4), -np.inf)]
    fit = r.fit_temperature(logp, y)
    assert fit.ok and fit.T == pytest.approx(2.0, rel=0.1)
    assert math.isfinite(fit.nll_before) and math.isfinite(fit.nll_after)
    p = r.apply_temperature(logp, fit.T)
    assert np.allclose(p.sum(1), 1) and (p[:, 4] > 0).all() and (p[:, 4] < 1e-5).all()
    # logits and log-probabilities give the same temperature (softmax is shift invariant)
    assert r.fit_temperature(np.log(softmax(z4, axis=1)), y).T == pytest.approx(
        r.fit_temperature(z4, y).T, rel=1e-5
    )
    # a gold on a zero-probability class costs -log(PROB_FLOOR)-ish, finite, and pushes T up
    y_bad = y.copy()
    y_bad[:300] = 4
    fit_bad = r.fit_temperature(logp, y_bad)
    assert math.isfinite(fit_bad.nll_before) and fit_bad.T > fit.T


def test_temperature_at_bound_is_flagged():
    # labels always equal the argmax of very peaked logits -> NLL keeps falling as T -> 0
    rng = np.random.default_rng(5)
    z = rng.normal(size=(100, 3))
    y = z.argmax(1)
    with pytest.warns(RecalibrationWarning, match="bound"):
        fit = r.fit_temperature(z, y, bounds=(0.05, 20.0))
    assert fit.at_bound and not fit.ok and fit.T == pytest.approx(0.05, rel=1e-3)


def test_fit_errors():
    z, y = _synthetic(1.0, n=50, seed=6)
    with pytest.raises(ValueError, match="minimum 20"):
        r.fit_temperature(z[:19], y[:19])
    with pytest.raises(ValueError, match="same gold class"):
        r.fit_temperature(z, np.zeros(50, int))
    with pytest.raises(ValueError, match="shape mismatch"):
        r.fit_temperature(z, y[:-1])
    bad = z.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        r.fit_temperature(bad, y)
    with pytest.raises(ValueError, match="bounds"):
        r.fit_temperature(z, y, bounds=(2.0, 3.0))
    with pytest.raises(ValueError, match="positive"):
        r.apply_temperature(z, 0.0)
    with pytest.raises(ValueError, match="shape mismatch"):
        r.fit_platt(np.full(5, 0.5), [0, 1, 0, 1])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        r.fit_isotonic([0.5, 1.5], [0, 1])
    with pytest.raises(ValueError, match="choose one of platt, isotonic"):
        r.fit_posthoc("beta", [0.5, 0.6], [0, 1])


def _platt_data(n=600, seed=7):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.0, 1.0, n)
    p[:20] = 0.0  # exact ends, as an agreement share has: read at the clip, logit(1e-3) = -6.9
    p[20:40] = 1.0
    x = np.log(np.clip(p, 1e-3, 1 - 1e-3) / (1 - np.clip(p, 1e-3, 1 - 1e-3)))
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(0.5 * x - 0.3)))).astype(int)
    return p, x, y


def test_platt_is_the_maximum_likelihood_sigmoid_on_the_clipped_logit():
    """Against an independent fit: the Bernoulli log-likelihood of sigmoid(a·logit(clip(p)) + b) maximised
    directly with scipy (Nelder-Mead, no gradient, no regularisation), and sklearn's own sigmoid calibrator
    (CalibratedClassifierCV(method="sigmoid") over a fixed score = logit(clip(p)))."""
    from scipy.optimize import minimize
    from sklearn.base import BaseEstimator, ClassifierMixin
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.frozen import FrozenEstimator

    p, x, y = _platt_data()
    fit = r.fit_platt(p, y)

    def nll(w):
        s = w[0] * x + w[1]
        return np.mean(np.logaddexp(0.0, s) - y * s)

    ref = minimize(nll, x0=[1.0, 0.0], method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-14})
    assert fit.a == pytest.approx(ref.x[0], abs=1e-4) and fit.b == pytest.approx(ref.x[1], abs=1e-4)
    assert fit.a == pytest.approx(0.5, abs=0.15) and fit.b == pytest.approx(-0.3, abs=0.25)  # recovers the truth
    assert fit.nll_after == pytest.approx(log_loss(y, fit.apply(p)))
    assert fit.nll_after < fit.nll_before and fit.converged and not fit.one_class

    class Score(ClassifierMixin, BaseEstimator):  # the clipped logit as a decision function
        classes_ = np.array([0, 1])

        def fit(self, X, y):
            self.fitted_ = True
            return self

        def decision_function(self, X):
            return np.log(np.clip(X[:, 0], 1e-3, 1 - 1e-3) / (1 - np.clip(X[:, 0], 1e-3, 1 - 1e-3)))

        def predict(self, X):
            return (self.decision_function(X) > 0).astype(int)

    # one sigmoid on all documents (ensemble=False; the frozen score needs no fold); sklearn smooths the targets
    # as Platt 1999 did ((N+ + 1) / (N+ + 2)), a difference of O(1/n) from the plain likelihood
    cal = CalibratedClassifierCV(FrozenEstimator(Score().fit(p, y)), method="sigmoid", ensemble=False)
    cal.fit(p[:, None], y)
    grid = np.linspace(0, 1, 21)
    assert np.allclose(fit.apply(grid), cal.predict_proba(grid[:, None])[:, 1], atol=5e-3)
    lr = LogisticRegression(C=np.inf, tol=1e-10, max_iter=1000).fit(x[:, None], y)  # truly unregularised
    assert fit.a == pytest.approx(lr.coef_[0, 0], rel=1e-4)


def test_platt_soft_targets_are_the_bernoulli_cross_entropy_fit():
    from scipy.optimize import minimize

    rng = np.random.default_rng(3)
    p = rng.uniform(0.05, 0.95, 300)
    x = np.log(p / (1 - p))
    t = np.clip(1 / (1 + np.exp(-(1.5 * x + 0.4))) + rng.normal(0, 0.05, 300), 0, 1)
    fit = r.fit_platt(p, t)
    ref = minimize(lambda w: np.mean(np.logaddexp(0.0, w[0] * x + w[1]) - t * (w[0] * x + w[1])),
                   x0=[1.0, 0.0], method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-14})
    # lbfgs stops at sklearn's default tol (1e-4 on the gradient): a few 1e-4 in the slope
    assert fit.a == pytest.approx(ref.x[0], abs=1e-3) and fit.b == pytest.approx(ref.x[1], abs=1e-3)
    assert fit.a == pytest.approx(1.5, abs=0.1)


def test_isotonic_is_the_pooled_adjacent_violators_fit():
    """Against a hand-written pool-adjacent-violators: the least-squares increasing step function at the
    fitted points, linear between distinct points, constant beyond them."""
    p, _, y = _platt_data(n=80, seed=4)
    p = np.round(p, 1)  # ties, as a discrete share has
    fit = r.fit_isotonic(p, y)
    xs = np.unique(p)
    mean = [y[p == v].mean() for v in xs]
    w = [float((p == v).sum()) for v in xs]
    blocks = []  # [value, weight, count]
    for m, k in zip(mean, w):
        blocks.append([m, k, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m2, k2, c2), (m1, k1, c1) = blocks.pop(), blocks.pop()
            blocks.append([(m1 * k1 + m2 * k2) / (k1 + k2), k1 + k2, c1 + c2])
    pav = np.concatenate([[v] * c for v, _, c in blocks])
    assert np.allclose(fit.apply(xs), pav)
    assert np.allclose(fit.apply([xs[0] - 1, xs[-1] + 1]), [pav[0], pav[-1]])  # constant beyond the fitted range
    mid = (xs[0] + xs[1]) / 2
    assert fit.apply([mid])[0] == pytest.approx((pav[0] + pav[1]) / 2)


@pytest.mark.parametrize("method", ["platt", "isotonic"])
def test_one_class_gives_the_base_rate(method):
    fit = r.fit_posthoc(method, [0.1, 0.5, 0.9], [0, 0, 0])
    assert fit.one_class and fit.apply([0.0, 0.3, 1.0]).tolist() == [0.0, 0.0, 0.0]
    assert fit.params() == {"base_rate": 0.0}
    soft = r.fit_posthoc(method, [0.1, 0.5, 0.9], [0.25, 0.25, 0.25])
    assert soft.one_class and soft.apply([0.7]).tolist() == [0.25]


def test_vector_scaling_improves_and_recovers_scale():
    z, y = _synthetic(2.0, n=2000, k=4, seed=8)
    fit = r.fit_vector_scaling(z, y)
    assert fit.converged and fit.nll_after < fit.nll_before
    assert np.allclose(fit.w, 0.5, atol=0.08)
    assert np.allclose(fit.apply(z).sum(1), 1)


def test_reference_predictors():
    train = [0, 0, 0, 1, 2, 2]
    P = r.prior_predictor(train, 4, 3)
    # add-one: (3+1, 1+1, 2+1, 0+1) / (6 + 4)
    assert P.shape == (3, 4) and np.allclose(P, [[0.4, 0.2, 0.3, 0.1]] * 3)
    assert np.allclose(r.prior_predictor(train, 4, 1, alpha=0), [[0.5, 1 / 6, 1 / 3, 0]])
    assert r.majority_predictor(train, 4, 2).tolist() == [[1, 0, 0, 0]] * 2
    assert r.majority_predictor([1, 0], 2, 1).tolist() == [[1, 0]]  # tie -> lowest index
    U = r.uniform_predictor(3, 5)
    assert U.shape == (5, 3) and np.allclose(U, 1 / 3)
    assert r.prior_rate([0.0, 0.2, 1.0]) == pytest.approx(0.4)
    assert r.prior_rate([0.0, 0.2, 1.0], n_docs=4).tolist() == pytest.approx([0.4] * 4)
    # any-gold training docs spread their unit of mass over their golds
    assert np.allclose(r.prior_predictor([[0, 1], 1], 2, 1, alpha=0), [[0.25, 0.75]])
    # the prior's NLL on the training labels equals the empirical entropy (alpha = 0)
    ytr = np.array([0, 0, 1, 2, 2, 2])
    Pp = r.prior_predictor(ytr, 3, len(ytr), alpha=0)
    freq = np.bincount(ytr) / len(ytr)
    assert log_loss(ytr, y_proba=Pp, labels=range(3)) == pytest.approx(-np.sum(freq * np.log(freq)))
    with pytest.raises(ValueError):
        r.prior_rate([0.2, 1.5])


def test_split_halves_deterministic_and_order_free():
    ids = [f"doc{i}" for i in range(11)]
    fit, ev = r.split_halves(ids, seed=0)
    assert len(fit) == 6 and len(ev) == 5 and sorted(fit + ev) == sorted(ids)
    assert (fit, ev) == r.split_halves(ids, seed=0)
    f2, e2 = r.split_halves(list(reversed(ids)), seed=0)
    assert set(f2) == set(fit) and set(e2) == set(ev)
    assert set(r.split_halves(ids, seed=1)[0]) != set(fit)
    with pytest.raises(ValueError, match="duplicates"):
        r.split_halves(["a", "a", "b"])
    with pytest.raises(ValueError, match="at least 2"):
        r.split_halves(["a"])


def test_temperature_fit_on_wide_logits_matches_torch_lbfgs():
    """Regression (issue 15): scores more than 27.63 below the row max used to be raised to that floor, which
    biased T (4.690 against torch's 5.073 on this setup). Finite logits must be used as they are."""
    import torch

    rng = np.random.default_rng(0)
    n, K, T_true = 600, 28, 5.0
    Z = rng.normal(0, 3, size=(n, K)) * T_true  # true logits of sd 3, scaled by T: rows span far more than 40
    assert np.median(Z.max(1) - Z.min(1)) > 40
    y = np.array([rng.choice(K, p=np.exp(z / T_true - (z / T_true).max()) / np.exp(z / T_true - (z / T_true).max()).sum()) for z in Z])
    fit = r.fit_temperature(Z, y)

    logT = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    Zt, yt = torch.tensor(Z), torch.tensor(y)
    opt = torch.optim.LBFGS([logT], lr=0.5, max_iter=200, tolerance_grad=1e-12, tolerance_change=1e-14,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(Zt / logT.exp(), yt)
        loss.backward()
        return loss

    opt.step(closure)
    assert fit.T == pytest.approx(float(logT.exp()), rel=1e-4)
    # and apply_temperature is a plain softmax of z / T on such rows
    assert np.allclose(r.apply_temperature([[0.0, -40.0]], 4.0), [[1 / (1 + np.exp(-10)), np.exp(-10) / (1 + np.exp(-10))]])


def test_log_zero_is_floored_below_every_finite_score():
    """-inf (probability 0) becomes PROB_FLOOR x the top class, or the row's lowest finite score if lower:
    a zero-probability class never outranks a class the model gave mass to."""
    out = r.apply_temperature([[0.0, -40.0, -np.inf]], 1.0)[0]
    assert out[2] <= out[1] and out[2] > 0
    out = r.apply_temperature([[0.0, -1.0, -np.inf]], 1.0)[0]
    assert out[2] == pytest.approx(r.PROB_FLOOR * out[0], rel=1e-6)


@pytest.mark.parametrize("method", ["platt", "isotonic"])
def test_every_posthoc_caller_uses_the_one_definition(method):
    """The QA estimators' cross-fitted rows, the trainer protocol's post-hoc rows and the warm-up targets map a
    confidence exactly as fit_posthoc does (one Platt, one isotonic definition)."""
    from semcal_eval.core.crossfit import splits
    from semcal_eval.qa.estimators import crossfit_calibrate
    from trainers.protocol import fit_map
    from trainers.warmup import calibrated_targets

    p, _, y = _platt_data(n=120, seed=11)
    ref = r.fit_posthoc(method, p, y)
    f, info = fit_map(method, p, y)
    assert np.array_equal(f(p), ref.apply(p)) and {k: info[k] for k in ref.params()} == ref.params()
    assert np.array_equal(calibrated_targets(p, y, method), ref.apply(p))
    out = crossfit_calibrate(p, y, method=method)
    for _, fit, app in splits(len(p), None):
        assert np.array_equal(out[app], np.clip(r.fit_posthoc(method, p[fit], y[fit]).apply(p[app]), 0, 1))
