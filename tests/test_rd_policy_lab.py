"""Issue 22, item 3: the policy lab's precomputed rewards are the trainer's reward functions on the candidate
strings, its trick forms are what trainers/adversaries.py tests, and a small run is reproducible (fast)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from trainers import policy_lab as P
from trainers.rewards import calibration_reward, correctness_reward


@pytest.fixture(scope="module")
def world():
    return P.make_world(12, seed=5)


@pytest.mark.parametrize("design", [P.CHOSEN, P.BCE, P.BEFORE], ids=["chosen", "bce", "before"])
def test_lab_rewards_are_the_trainers(world, design):
    rng = np.random.default_rng(2)
    K, G = 8, 6
    M = world.theta0.shape[1]
    idx = rng.integers(0, M, size=(G, K))
    idx[0] = M - 1  # an all-empty group
    rows = rng.choice(12, size=G, replace=False)
    step, steps = 200, 500
    lab = P.group_rewards(world, design, idx, step, steps)
    # candidate index i means the same string pattern for every question; the rewards use the row's own strings
    prompts = [world.questions[q] for q in rows for _ in range(K)]
    comps = [world.candidates[q][m] for q, g in zip(rows, idx) for m in g]
    cols = dict(answers=[world.golds[q] for q in rows for _ in range(K)], question=prompts)
    y = correctness_reward(prompts, comps, match=design.match, **cols)
    cal = calibration_reward(prompts, comps, trainer_state=SimpleNamespace(global_step=step, max_steps=steps),
                             num_generations=K, match=design.match, score=design.score, reading=design.reading,
                             lambda_schedule=design.lambda_schedule, lambda_max=design.lambda_max, **cols)
    assert lab[:, 0].tolist() == y
    assert lab[:, 1] == pytest.approx(cal, abs=1e-12)


def test_truth_is_meaning_and_chatter_is_correct(world):
    y_span = world.judged["span"][0]
    assert np.array_equal(y_span, (world.meaning == 0).astype(float))
    # whole-line matching calls the gold with 3 or 5 words of chatter wrong: the bias the span matching removes
    y_line = world.judged["line"][0]
    chatter = (world.meaning == 0) & np.isin(world.form, [world.forms.index("suffix_3"), world.forms.index("suffix_5")])
    assert np.all(y_line[chatter] == 0)


def test_small_run_is_reproducible_and_held_out():
    a = P.run([P.RLVR, P.CHOSEN], seeds=(0, 1), n_questions=40, steps=30)
    b = P.run([P.RLVR, P.CHOSEN], seeds=(0, 1), n_questions=40, steps=30)
    assert [r for k, r in a.items() if k != "_meta"] == [r for k, r in b.items() if k != "_meta"]
    rows = P.summarise(a)
    assert {r["design"] for r in rows} == {"initial", P.RLVR.name, P.CHOSEN.name}
    ch = next(r for r in rows if r["design"] == P.CHOSEN.name)
    assert set(ch) >= {"acc", "ece", "brier", "auroc", "trick", "trick_pay", "dacc", "ece_ratio", "dtrick"}


def test_trick_pay_catches_whole_line_matching_and_not_span():
    """The lab's adversary measure can fail: under whole-line matching (before issue 22) a wrong answer in a
    trick form earns more than its plain form in the same group; under span matching it never does."""
    res = P.run([P.BEFORE, P.BCE, P.CHOSEN], seeds=(0, 1), n_questions=40, steps=60)
    pay = {r["design"]: r["trick_pay"][0] for r in P.summarise(res, ref=P.BCE.name)}
    assert pay[P.BEFORE.name] > 0.005
    assert pay[P.BCE.name] == 0.0 and pay[P.CHOSEN.name] == 0.0


def test_likelihood_fit_is_calibrated_in_the_family():
    """The reference row: the family's likelihood fit is far better calibrated on held-out questions than the
    untrained policy (so the family can express calibration), computed without any reward code."""
    world = P.make_world(120, seed=3)
    perm = np.random.default_rng(0).permutation(120)
    fit = P.evaluate(world, P.fit_likelihood(world, perm[:60], steps=400), perm[60:])
    base = P.evaluate(world, P.init_params(world), perm[60:])
    assert fit["ece"] < 0.6 * base["ece"] and fit["brier"] < base["brier"]
