"""Issue 42: the board checks a ``semsoft_tuned`` record's τ by the rule every semsoft run is built with
(:class:`semcal_eval.semsoft.spec.SemSoftParams`: τ ∈ [−1, 1)), not by a second rule of its own.

Each test submits a synthetic lm-eval-shaped run (tests/board_fixtures.py) through ``board submit`` into a real
SQLite board; no model.
"""

from __future__ import annotations

import pytest

import board_fixtures as S
from semcal_eval.semsoft.scoring import SemSoftError
from semcal_eval.semsoft.spec import SemSoftParams
from test_board_tamper import CLS, N, env, rejected, stored, submit  # noqa: F401


def _tuned_run(env, name, tau, fold_taus=None):
    """A run whose semsoft_tuned row was cross-fitted: fold f of the documents (sorted by id, position % 2)
    names τ = ``fold_taus[f]`` (both ``tau`` by default), K = 10, first-token embeddings."""
    items = S.cls_items(N)
    fold_taus = fold_taus or (tau, tau)
    tuned = [{**it, "tuned_tau": fold_taus[i % 2], "tuned_top_k": 10, "tuned_embedding": "first",
              "tuned_on": "crossfit", "tuned_n": N // 2, "tuned_guard": True, "tuned_fold": i % 2}
             for i, it in enumerate(items)]
    S.write_run(env["tmp"] / name, CLS, {"constrained": items, "semsoft_tuned": tuned}, env["reg"][CLS].metrics)
    return env["tmp"] / name


def test_an_honest_negative_tau_run_is_accepted(env, capsys):
    """τ = −0.2 is a grid value SemSoftParams builds a run with; the board stores the run that chose it."""
    assert -0.2 in SemSoftParams.from_metadata({"tune_taus": [-0.2, 0.0, 0.2]}).tune_taus
    assert submit(_tuned_run(env, "neg", -0.2, fold_taus=(-0.2, 0.1))) == 0, capsys.readouterr().err
    (entry,) = [e for e in stored() if e["filter"] == "semsoft_tuned"]
    chosen = entry["verification"]["tuned_configuration"][CLS]
    assert chosen["0"]["tau"] == -0.2 and chosen["1"]["tau"] == 0.1


@pytest.mark.parametrize("tau", [1.0, -1.5])
def test_a_tau_semsoft_params_refuses_is_rejected_naming_the_range(env, capsys, tau):
    with pytest.raises(SemSoftError):
        SemSoftParams.from_metadata({"tau": tau})
    line = rejected(capsys, _tuned_run(env, "bad", tau))
    assert f"tuned fields tau={tau}" in line and "outside [-1, 1)" in line and "rejected" in line, line
