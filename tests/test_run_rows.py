"""Issue 42 item 1: the rows of a run (semcal_eval.run_rows) hold the one cross-fitted temperature step and its skip
rule; the filter, the stock rows and the board's re-check all call it, and a run too short for a cross-fitted row
skips that row (never refuses the run) — the temperature rows below 40 documents, the tuned row below 20."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from semcal_eval import run_rows
from semcal_eval.core import crossfit as CF
from semcal_eval.core import recalibration


def _probs(n: int, k: int = 3, seed: int = 0):
    """Overconfident distributions (logits × 3 of the labels' own) and labels drawn from the calibrated ones."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 1, size=(n, k))
    p = np.exp(3 * z - (3 * z).max(1, keepdims=True))
    q = np.exp(z - z.max(1, keepdims=True))
    q /= q.sum(1, keepdims=True)
    return p / p.sum(1, keepdims=True), np.array([rng.choice(k, p=row) for row in q])


def test_the_temperature_step_scales_each_fold_with_the_other_folds_fit():
    P, y = _probs(45, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        steps = run_rows.temperature_step(P, y)
        for k, fit_on, apply_to in CF.splits(45):
            scaled, fit = recalibration.temperature_scale(P[fit_on], y[fit_on], P[apply_to])
            for i, p in zip(apply_to, scaled):
                got, got_fit, fold = steps[i]
                assert fold == k and got_fit.T == fit.T and np.array_equal(got, p)
    with pytest.raises(ValueError, match="45 distributions but 44 labels"):
        run_rows.temperature_step(P, y[:-1])


def test_the_skip_rule_is_two_folds_of_a_temperature_fit():
    assert run_rows.MIN_TEMPERATURE_DOCS == CF.N_FOLDS * recalibration.MIN_FIT_DOCS == 40
    assert run_rows.temperature_skip_reason(40) is None
    assert "at least 40 documents (20 per fold), got 39" in run_rows.temperature_skip_reason(39)


def test_stock_ts_rows_are_the_temperature_step():
    """calibration_rows' ``loglik_ts`` row is the step applied to the ``loglik`` row (same folds, same T)."""
    P, y = _probs(44, k=4, seed=5)
    lls = [np.log(p) for p in P]
    rows, notes = run_rows.calibration_rows(lls, [["a", "bb", "ccc", "dddd"]] * 44, [int(g) for g in y])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        steps = run_rows.temperature_step([r["probs"] for r in rows["loglik"]], y)
    assert not notes
    for rec, (p, fit, _) in zip(rows["loglik_ts"], steps):
        assert np.allclose(rec["probs"], p, rtol=0, atol=1e-15) and rec["temperature"] == fit.T
    short, notes = run_rows.calibration_rows(lls[:39], [["a", "bb", "ccc", "dddd"]] * 39, [int(g) for g in y[:39]])
    assert "loglik_ts" not in short and "loglik" in short
    assert any(n.startswith("loglik_ts skipped: cross-fitted rows need at least 40") for n in notes)


class _View:
    """The filters' task view over synthetic documents: gold = doc['y'], doc_ids = doc['id']; no tuning documents."""

    def gold(self, doc):
        return doc["y"]

    def soft_target(self, doc):
        return None

    def doc_ids(self, docs):
        return [d["id"] for d in docs]

    def tuning_rows(self):
        return [], []


def _tuned(n: int):
    from semcal_eval.semsoft.filters import SemSoftTuned
    from semcal_eval.semsoft.spec import SemSoftResponse
    from semcal_eval.semsoft.tuning import GridPoint

    P, y = _probs(n, seed=7)
    keys = [GridPoint("first", 10, 0.1), GridPoint("first", 10, 0.3)]
    resps = [[SemSoftResponse(baseline=list(p), grid={k: list(p) for k in keys})] for p in P]
    return SemSoftTuned(_View()).apply(resps, [{"id": i, "y": int(g)} for i, g in enumerate(y)])


def test_a_tuned_row_without_enough_documents_is_skipped_not_refused():
    """Too few validation documents and fewer than 2 × MIN_TUNE_DOCS evaluated ones: the row is skipped with the
    reason (as the temperature rows are), where the task used to refuse the run."""
    from semcal_eval.semsoft.filters import SkippedRow, tuned_skip_reason
    from semcal_eval.semsoft.spec import SemSoftRow
    from semcal_eval.semsoft.tuning import MIN_TUNE_DOCS

    out = _tuned(2 * MIN_TUNE_DOCS - 1)
    assert all(isinstance(r, SkippedRow) for r in out)
    assert "0 validation documents to tune on" in out[0].reason and "got 19" in out[0].reason
    assert all(isinstance(r, SemSoftRow) and r.tuned["tuned_on"] == "crossfit" for r in _tuned(2 * MIN_TUNE_DOCS))
    assert tuned_skip_reason(MIN_TUNE_DOCS, 0) is None and tuned_skip_reason(0, 2 * MIN_TUNE_DOCS) is None
