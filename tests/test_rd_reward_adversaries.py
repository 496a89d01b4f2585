"""Issue 22 item 1 / issue 31 item 4, for every reward a policy can optimise: semcal's CSR variants (csr_likelihood,
csr_spread, with their shipped configs), RD's log score and RLCR's Brier term meet the trick grammar of
research/answer_grammar.py (checks: research/adversaries.py) — padding, lists with the gold, hedges, negations,
homoglyphs, translations, the question repeated, the empty answer — and a constant confidence.

The rule: no transformation of a wrong answer earns more *correctness* (the strict grader), and no confidence that
ignores the question beats the honest one. Where a calibration term does pay a trick, the test states the size
by hand (csr_spread pays a wrong rollout for a translation or "not <gold>" that shares no word with its group).
Each check runs the trainer's reward functions on real strings and can fail: an improper (linear) confidence
score is shown to lose the constant-confidence check (fast, no model).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from research import adversaries as ADV
from research import answer_grammar as G
from trainers.rewards import (
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


# ------------------------------------------------------------------------------ CSR, the likelihood scores


def _cal(comps, method):
    """λ·r_cal of each rollout under a shipped config (λ = λ_max: no trainer state)."""
    return ADV.group_rewards(comps, GOLD, Q, ADV.reward_options(method))[1].tolist()


def test_likelihood_score_by_hand():
    comps = ["Paris", "paris.", "Lyon", "", "PАRIS", "Nice", "Lyon", "Paris, I think"]
    K = len(comps)
    cols = dict(answers=[[GOLD]] * K, question=[Q] * K)
    y = correctness_reward(["p"] * K, comps, **cols)
    # a Cyrillic "А" is the same answer, and so (cover judge) is the gold with chatter after it
    assert y == [1, 1, 0, 0, 1, 0, 0, 1]
    # 4 correct of 8: r_cal = 8/4 − 1 for each correct, 0 for the wrong and the empty one; r = y·K/n_c at λ = 1
    assert _cal(comps, "csr_likelihood") == pytest.approx([1, 1, 0, 0, 1, 0, 0, 1])
    assert _cal(["Lyon", "Nice", "", "Rome"], "csr_likelihood") == [0.0] * 4  # no correct rollout: nothing to share


def test_likelihood_spread_score_by_hand():
    """csr_spread: a correct rollout earns K/n_c − 1 on top of y; a wrong one is charged the share of its
    partners that give, or by a shared content word may give, its answer; an empty one −1."""
    comps = ["Paris", "Lyon", "Lyon, I think", "", "Nice"]
    # Paris alone correct: 5/1 − 1; each Lyon shares "lyon" with 1 of its 4 partners (the chatter does not hide it)
    assert _cal(comps, "csr_spread") == pytest.approx([4.0, -0.25, -0.25, -1.0, 0.0])


@pytest.mark.parametrize("adversary", list(G.GRAMMAR))
def test_no_trick_pays_under_csr_likelihood(adversary):
    """csr_likelihood reads correctness only: a wrong rollout earns 0 whatever its form, so no trick pays in
    either term, for a policy or for one rollout."""
    table = ADV.policy_table("csr_likelihood", accuracies=(0.0, 0.25, 0.5), n_groups=8, adversary=adversary, seed=4)
    for a, v in table.items():
        assert v["transformed"] <= v["honest"] + 1e-12, (adversary, a)
        assert v["transformed_cal"] <= v["honest_cal"] + 1e-12, (adversary, a)
    assert ADV.deviation_gain(adversary, ["Paris", "Lyon", "Lyon", "Paris"], 1, GOLD, Q, "csr_likelihood",
                              n_draws=3) == (0.0, 0.0)


#: tricks that keep a word of the wrong guess (or are the same answer): csr_spread's overlap still charges them
SPREAD_CHARGED = [n for n in G.GRAMMAR if n not in ("translation", "negation")]


@pytest.mark.parametrize("adversary", SPREAD_CHARGED)
def test_csr_spread_charges_tricks_that_keep_the_guess(adversary):
    table = ADV.policy_table("csr_spread", accuracies=(0.0, 0.25, 0.5), n_groups=8, adversary=adversary, seed=4)
    for a, v in table.items():
        assert v["transformed"] <= v["honest"] + 1e-12, (adversary, a)
    _, dc = ADV.deviation_gain(adversary, ["Paris", "Lyon", "Lyon", "Paris"], 1, GOLD, Q, "csr_spread", n_draws=3)
    assert dc <= 1e-12


@pytest.mark.parametrize("adversary", ["translation", "negation"])
def test_csr_spread_pays_tricks_that_drop_the_guess(adversary):
    """The known exploit of csr_spread, by hand: a wrong guess rewritten so that it shares no word with its
    copies ("Lione", "not Paris") sheds the charge for those copies. A policy wrong on every rollout, one guess
    repeated: the honest charge is −1 per rollout (λ = 1); rewritten it is −(share of copies of the same
    rewrite) — a translation drawn from three, "not Paris" one string for all."""
    table = ADV.policy_table("csr_spread", accuracies=(0.0,), n_groups=20, adversary=adversary, seed=4)[0.0]
    assert table["honest_cal"] == pytest.approx(-1.0) and table["transformed_correct"] == 0.0
    if adversary == "negation":  # every rollout says "not Paris": all agree again, nothing gained
        assert table["transformed_cal"] == pytest.approx(-1.0)
    else:
        assert -1.0 + 0.5 < table["transformed_cal"] < 0.0  # three translations of Lyon: ≈ −1/3 charge
    # one rollout rewritten in a group of four copies: its charge drops from 3/3 to 0
    _, dc = ADV.deviation_gain(adversary, ["Lyon"] * 4, 0, GOLD, Q, "csr_spread", n_draws=3)
    assert dc == pytest.approx(1.0)


def test_empty_answers_under_each_config():
    """semcal's variants charge an empty answer the worst value; the paper's formula scores it as a wrong answer
    that agrees with nobody (r_cal = log(1 − ε) ≈ 0, the best a wrong rollout can get): saying nothing is never
    worse, in the calibration term, than a wrong answer under csr.yaml — it still loses the correctness term."""
    comps = ["Lyon", "", "Paris", "Nice"]
    for method in ("csr_likelihood", "csr_spread"):
        out = _cal(comps, method)
        assert out[1] <= min(out[0], out[3]), method
    paper = ADV.reward_options("csr")["settings"]
    out = _cal(comps, "csr")
    assert out[1] == pytest.approx(paper.lambda_max * math.log1p(-paper.eps))
    assert out[1] >= max(out[0], out[3]) - 1e-12


# ------------------------------------------------------------------------------ RD and RLCR: surface tricks


@pytest.mark.parametrize("adversary", list(G.GRAMMAR))
@pytest.mark.parametrize("method", ["rd", "rlcr"])
def test_no_trick_on_a_wrong_answer_pays(adversary, method):
    total, wrap = (_rd_total, _rd) if method == "rd" else (_rlcr_total, _rlcr)
    rng = np.random.default_rng(1)
    for wrong in ("Lyon", "New York"):
        base = total(wrap(wrong))
        got = np.mean([total(wrap(G.transform(adversary, wrong, Q, rng, gold=GOLD))) for _ in range(5)])
        assert got <= base + 1e-12, (method, adversary, wrong)


@pytest.mark.parametrize("method", ["rd", "rlcr"])
def test_the_gold_keeps_its_reward_only_in_a_surface_form(method):
    """Under the cover judge the gold hedged or translated is wrong (padded with bare words too, unless a word
    happens to be a title or place: tests/test_rd_adversaries.py); case, homoglyphs,
    diacritics, a lead-in, chatter and the question repeated keep it right (they claim nothing beside it)."""
    total, wrap = (_rd_total, _rd) if method == "rd" else (_rlcr_total, _rlcr)
    rng = np.random.default_rng(0)
    for name in ("hedge", "translation"):
        assert total(wrap(G.transform(name, GOLD, Q, rng))) == pytest.approx(total(wrap("Lyon"))), name
    for name in (*G.SURFACE, "chatter", "question_before"):
        assert total(wrap(G.transform(name, GOLD, Q, rng))) == pytest.approx(total(wrap(GOLD))), name
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
