"""Issue 22, item 1 for every reward a policy can optimise: CSR's r_cal (both scores), RD's log score and RLCR's
Brier term meet the cheap adversaries — padding, the question repeated, the empty answer, a constant confidence.

The rule (issue 22): in expectation no transformation of a wrong answer earns more total reward than the answer
itself, and no confidence that ignores the question beats the honest one. Each check runs the trainer's reward
functions on real strings and can fail: the whole-line CSR reward and an improper (linear) confidence score are
shown to lose the same checks (fast, no model).
"""

from __future__ import annotations

import numpy as np
import pytest

from trainers import adversaries as ADV
from trainers.rewards import (
    calibration_reward,
    correctness_reward,
    rd_reward,
    rd_score,
    rlcr_brier_reward,
    rlcr_correctness_reward,
    rlcr_format_reward,
)

Q = "What is the capital of France?"
GOLD = "Paris"
COLS1 = dict(answers=[[GOLD]], question=[Q])


def _rlcr(answer: str, conf: str = "0.3") -> str:
    return f"<think>hm</think><answer>{answer}</answer><analysis>unsure</analysis><confidence>{conf}</confidence>"


def _rd(answer: str, conf: int = 3) -> str:
    return f"Answer: {answer}, Confidence: {conf}"


def _rlcr_total(comp: str) -> float:
    """RLCR's total reward 0.5·format + 0.5·correct + 0.5·Brier term, as rlcr.yaml weighs it."""
    parts = (rlcr_format_reward, rlcr_correctness_reward, rlcr_brier_reward)
    return 0.5 * sum(f([""], [comp], **COLS1)[0] for f in parts)


def _rd_total(comp: str) -> float:
    return rd_reward([""], [comp], **COLS1)[0]


# ------------------------------------------------------------------------------ CSR, the likelihood score


def test_likelihood_score_by_hand():
    comps = ["Paris", "paris.", "Lyon", "", "Paris, I think", "Nice", "Lyon", "Rome"]
    K = len(comps)
    cols = dict(answers=[[GOLD]] * K, question=[Q] * K)
    y = correctness_reward(["p"] * K, comps, **cols)
    assert y == [1, 1, 0, 0, 1, 0, 0, 0]
    out = calibration_reward(["p"] * K, comps, num_generations=K, score="likelihood", lambda_schedule="constant",
                             lambda_max=1.0, **cols)
    # 3 correct of 8: r_cal = 8/3 − 1 for each correct, 0 for the wrong and the empty one; r = y·K/n_c at λ = 1
    assert out == pytest.approx([5 / 3, 5 / 3, 0, 0, 5 / 3, 0, 0, 0])
    none = calibration_reward(["p"] * 4, ["Lyon", "Nice", "", "Rome"], num_generations=4, score="likelihood",
                              answers=[[GOLD]] * 4, question=[Q] * 4)
    assert none == [0.0] * 4  # no correct rollout: nothing to share out


def test_likelihood_spread_score_by_hand():
    """csr.yaml's score: a correct rollout earns K/n_c − 1 on top of y; a wrong one is charged the share of its
    partners that give, or by a shared content word may give, its answer; an empty one −1."""
    comps = ["Paris", "Lyon", "Lyon, I think", "", "Nice"]
    out = calibration_reward(["p"] * 5, comps, num_generations=5, score="likelihood_spread",
                             lambda_schedule="constant", lambda_max=1.0, answers=[[GOLD]] * 5, question=[Q] * 5)
    # Paris alone correct: 5/1 − 1; each Lyon shares with 1 of its 4 partners (the padding does not hide it)
    assert out == pytest.approx([4.0, -0.25, -0.25, -1.0, 0.0])


@pytest.mark.parametrize("score", ["likelihood", "likelihood_spread"])
@pytest.mark.parametrize("adversary", list(ADV.ADVERSARIES))
def test_no_adversary_pays_under_the_likelihood_scores(adversary, score):
    table = ADV.policy_table(accuracies=(0.0, 0.25, 0.5), n_groups=10, adversary=adversary, seed=4,
                             lam=1.0, score=score)
    for a, v in table.items():
        assert v["transformed"] <= v["honest"] + 1e-12, (adversary, a)
    gain = ADV.deviation_gain(adversary, ["Paris", "Lyon", "Lyon", "Paris"], 1, GOLD, Q, lam=1.0, n_draws=4,
                              score=score)
    assert gain <= 1e-12


def test_padding_the_gold_keeps_its_likelihood_reward():
    """The gold with chatter is correct, so it shares the correct mass like the bare gold."""
    rng = np.random.default_rng(0)
    comps = ["Paris", ADV.transform("gold_chatter", "Paris", Q, rng), "Lyon", "Lyon"]
    out = calibration_reward(["p"] * 4, comps, num_generations=4, score="likelihood", lambda_schedule="constant",
                             lambda_max=1.0, answers=[[GOLD]] * 4, question=[Q] * 4)
    assert out == pytest.approx([1.0, 1.0, 0.0, 0.0])
    out = calibration_reward(["p"] * 4, comps, num_generations=4, score="likelihood_spread",
                             lambda_schedule="constant", lambda_max=1.0, answers=[[GOLD]] * 4, question=[Q] * 4)
    assert out == pytest.approx([1.0, 1.0, -1 / 3, -1 / 3])  # each Lyon shares with one of three partners


def test_empty_answers_never_beat_a_wrong_answer_under_either_score():
    for score in ("log", "likelihood", "likelihood_spread"):
        out = calibration_reward(["p"] * 4, ["Lyon", "", "Paris", "Nice"], num_generations=4, score=score,
                                 answers=[[GOLD]] * 4, question=[Q] * 4)
        assert out[1] <= min(out[0], out[3]), score


# ------------------------------------------------------------------------------ RD and RLCR: surface tricks


@pytest.mark.parametrize("adversary", list(ADV.ADVERSARIES))
@pytest.mark.parametrize("method", ["rd", "rlcr"])
def test_no_surface_trick_on_a_wrong_answer_pays(adversary, method):
    total, wrap = (_rd_total, _rd) if method == "rd" else (_rlcr_total, _rlcr)
    rng = np.random.default_rng(1)
    for wrong in ("Lyon", "New York"):
        base = total(wrap(wrong))
        got = np.mean([total(wrap(ADV.transform(adversary, wrong, Q, rng))) for _ in range(5)])
        assert got <= base + 1e-12, (method, adversary, wrong)


@pytest.mark.parametrize("method", ["rd", "rlcr"])
def test_gold_with_chatter_is_still_correct(method):
    total, wrap = (_rd_total, _rd) if method == "rd" else (_rlcr_total, _rlcr)
    chatter = ADV.transform("gold_chatter", GOLD, Q, np.random.default_rng(0))
    assert total(wrap(chatter)) == pytest.approx(total(wrap(GOLD)))
    assert total(wrap(GOLD)) > total(wrap("Lyon"))


@pytest.mark.parametrize("method", ["rd", "rlcr"])
def test_repeating_the_question_or_answering_nothing_never_beats_a_wrong_answer(method):
    total, wrap = (_rd_total, _rd) if method == "rd" else (_rlcr_total, _rlcr)
    for conf in ((0, 3, 10) if method == "rd" else ("0", "0.3", "1")):
        wrong = total(wrap("Lyon", conf))
        assert total(wrap("", conf)) <= wrong + 1e-12, (method, conf)
        assert total(wrap(Q, conf)) <= wrong + 1e-12, (method, conf)
    # and leaving the confidence (or the whole format) out is worse than any stated confidence
    bare = total("Lyon")
    assert all(bare < total(wrap("Lyon", c)) for c in ((0, 5, 10) if method == "rd" else ("0", "0.5", "1")))


# ------------------------------------------------------------------------------ constant confidence


def _expected(score, conf, q):
    return q * score(conf, True) + (1 - q) * score(conf, False)


def _rlcr_brier(conf, correct):
    return 1 - (float(correct) - conf) ** 2


def _linear(conf, correct):  # an improper score: −|y − c|; the check below must reject it
    return -abs(float(correct) - conf)


@pytest.mark.parametrize("name", ["rd", "rlcr", "linear (improper, must fail)"])
def test_constant_confidence_never_beats_the_honest_one(name):
    """A policy that knows each question's chance q of being right: stating q (RD: the nearest bin) earns more in
    expectation than any constant confidence over a spread of q's. The improper linear score fails it."""
    qs = np.linspace(0.05, 0.95, 19)
    if name == "rd":
        score, honest, grid = rd_score, [int(round(10 * q)) for q in qs], range(11)
    else:
        score = _rlcr_brier if name == "rlcr" else _linear
        honest, grid = list(qs), np.linspace(0, 1, 21)
    honest_value = np.mean([_expected(score, c, q) for c, q in zip(honest, qs)])
    best_constant = max(np.mean([_expected(score, c, q) for q in qs]) for c in grid)
    if name.startswith("linear"):
        # the linear score prefers 0/1 statements: the honest policy *ties or loses* to the extremes per question
        per_q = [max(_expected(score, c, q) for c in (0.0, 1.0)) - _expected(score, q, q) for q in qs]
        assert max(per_q) > 0.1
    else:
        assert honest_value > best_constant + 0.01, (honest_value, best_constant)


def test_rlcr_brier_reward_reads_the_stated_confidence():
    """The constant-confidence check above uses the Brier term's formula; this ties it to the reward function."""
    for conf in ("0", "0.3", "0.85", "1"):
        for ans, y in (("Paris", 1), ("Lyon", 0)):
            got = rlcr_brier_reward([""], [_rlcr(ans, conf)], **COLS1)[0]
            assert got == pytest.approx(_rlcr_brier(float(conf), y))
