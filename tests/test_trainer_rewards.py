"""CSR / RLVR / RLCR reward values against groups computed by hand (no model, fast)."""

from __future__ import annotations

import math
import os
import random
import re
import string
import subprocess
import sys
import textwrap
import unicodedata
from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from semcal_eval import qa
from trainers import config as tcfg
from trainers.config import RewardSettings
from trainers.rewards import (
    GroupLayoutError,
    calibration_reward,
    calibration_scores,
    correctness_reward,
    group_calibration_scores,
    lambda_at,
    parse_rlcr,
    rlcr_brier_reward,
    rlcr_correctness_reward,
    rlcr_format_reward,
)

ROOT = Path(__file__).resolve().parents[1]
EPS = 0.01
L1, L0 = math.log(1 - EPS), math.log(EPS)


def cols(golds, question="Capital of France?", k=None):
    k = k or 1
    return {"answers": [golds] * k, "question": [question] * k}


_OPTIONS = {f.name for f in fields(RewardSettings)}


def cal_reward(prompts, comps, trainer_state=None, *, num_generations, **kw):
    """calibration_reward with its keyword options built once into RewardSettings (the only form it takes)."""
    opts = {k: kw.pop(k) for k in list(kw) if k in _OPTIONS}
    return calibration_reward(prompts, comps, None, trainer_state, settings=RewardSettings(**opts),
                              num_generations=num_generations, **kw)


def gcs(A, y, eps=1e-3, reading="pairwise", *, empty=None, agreement_wrong=None, **opts):
    """group_calibration_scores with the options as RewardSettings."""
    return group_calibration_scores(A, y, RewardSettings(eps=eps, reading=reading, **opts), empty=empty,
                                    agreement_wrong=agreement_wrong)


def cs(A, y, *, empty=None, **opts):
    """calibration_scores with the options as RewardSettings."""
    return calibration_scores(A, y, RewardSettings(**opts), empty=empty)


def rlcr(answer, conf, think="t", analysis="a"):
    return f"<think>{think}</think><answer>{answer}</answer><analysis>{analysis}</analysis><confidence>{conf}</confidence>"


# ------------------------------------------------------------------------------------------------ correctness


#: An independent re-statement of the strict rule (semcal_eval/qa/grading.py's docstring) for short golds, written
#: from the definition with the standard library only: fold (NFKC, diacritics dropped, case folded), SQuAD
#: normalisation (punctuation, articles a/an/the, whitespace), at most one content-free lead-in removed (only the
#: lead-ins the pool below uses), then equality with a normalised gold alias. No confusable letters in the pool.
_LEADS = (("answer", "is"), ("answer",), ("it", "is"), ("its",))


def _ref_norm(s: str) -> str:
    s = unicodedata.normalize("NFKC", s)
    s = "".join(c for c in unicodedata.normalize("NFKD", s) if not unicodedata.combining(c)).casefold()
    s = "".join(c for c in s if c not in string.punctuation and not unicodedata.category(c).startswith("P"))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())


def _ref_core(s: str) -> str:
    toks = _ref_norm(s).split()
    for lead in _LEADS:
        if len(toks) > len(lead) and tuple(toks[: len(lead)]) == lead:
            return " ".join(toks[len(lead):])
    return " ".join(toks)


def _ref_first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _ref_correct(pred: str, golds) -> float:
    core = _ref_core(_ref_first_line(pred))
    return float(bool(core) and any(core == _ref_norm(g) for g in golds))


def test_correctness_matches_the_strict_rule_on_near_misses():
    """RLVR correctness is the one grader (semcal_eval.qa.grading.grade, the cover judge); the strict rule of
    task version 2 (folded, normalised answer core equals a gold alias, one lead-in allowed) stays as
    grade_strict, checked against the re-statement above on near misses: partial names, lists, hedges,
    negations, lead-ins."""
    from semcal_eval.qa.grading import grade, grade_strict

    rng = random.Random(0)
    golds = ["Barack Obama", "the Eiffel Tower", "1945", "New York City"]
    preds = ["Obama", "Barack Obama", "barack obama.", "The answer is Barack Obama", "Barack Hussein Obama",
             "Barack Obama, Michelle Obama", "Eiffel", "tower", "Eiffel Tower!", "THE ÉIFFEL TOWER", "1944",
             "1945.", "Answer: 1945", "It's 1945", "it is 1945", "The answer is: it's 1945", "not 1945",
             "maybe 1945", "1945 or 1946", "New York", "York", "Ｎｅｗ Ｙｏｒｋ Ｃｉｔｙ", "New York City\nQ: next",
             "\n1945", "The answer is", "", "  ", "a"]
    cases = [(rng.choice(preds), rng.sample(golds, 2)) for _ in range(80)]
    got = []
    for p, g in cases:
        got += correctness_reward(["x"], [p], answers=[g], question=["q"])
    assert got == [float(grade(qa.clean_answer(p), g, "q")) for p, g in cases]
    assert [grade_strict(qa.clean_answer(p), g) for p, g in cases] == [bool(_ref_correct(p, g)) for p, g in cases]
    assert 0 < sum(got) < len(got)  # the sample exercises both outcomes
    # by hand: dressing and a partial name are free; a list, a hedge or a negation is not (token-F1 ≥ ½ would
    # accept the list); the strict rule refused the partial name
    comps = ["The answer is Barack Obama.", "It's 1945", "Ｎｅｗ Ｙｏｒｋ Ｃｉｔｙ", "Obama", "Barack Obama, Michelle Obama",
             "not 1945", "maybe 1945", "1945 or 1946"]
    g = [["Barack Obama"], ["1945"], ["New York City"], ["Barack Obama"], ["Barack Obama"], ["1945"], ["1945"],
         ["1945"]]
    assert correctness_reward(["x"] * 8, comps, answers=g, question=["q"] * 8) == [1, 1, 1, 1, 0, 0, 0, 0]
    assert [grade_strict(c, gg) for c, gg in zip(comps, g)] == [1, 1, 1, 0, 0, 0, 0, 0]
    assert qa.is_correct(comps[4], g[4], 0.5)


def test_correctness_reads_first_line_and_conversational_and_empty():
    comps = [" Paris\nQ: What is ...", [{"role": "assistant", "content": "paris"}], "", None, [], "\n\n"]
    assert correctness_reward(["p"] * 6, comps, **cols(["Paris"], k=6)) == [1, 1, 0, 0, 0, 0]


def test_correctness_missing_column_is_a_clear_error():
    with pytest.raises(KeyError, match="answers"):
        correctness_reward(["p"], ["Paris"], question=["q"])


# ------------------------------------------------------------------------------------------------ calibration

# The default (method csr, the paper): pairwise BCE in nats, a_ji = clip(J(C_j, C_i), ε, 1 − ε), an empty answer
# agreeing with nothing, λ linear 0 → 0.1 (λ = λ_max = 0.1 without a trainer state). The design before the
# reward lab (rollout reading, unbounded log score, empty answers scored as disagreeing wrong answers, λ up to 1,
# TRL's group scaling) and semcal's bounded scale (÷ log(1/ε), empty answers worst) are options, checked by hand.
OLD_SCORE = dict(reading="rollout", bounded=False, empty_answer="disagree")  # the score before the lab
BOUNDED = dict(bounded=True, empty_answer="worst")  # semcal's scale before issue 31 (r_cal ∈ [−1, 0])
LAM = 0.1  # the paper's λ_max, the default
LB = math.log(1 / EPS)
B1 = L1 / LB  # ≈ 0: a pair scored right, bounded


def test_calibration_group_by_hand_default():
    # K=4, λ = λ_max = 0.1 (no trainer state): "Paris"≡"paris" correct, "Lyon" wrong and alone, "" empty.
    comps = ["Paris", "paris", "Lyon", ""]
    out = cal_reward(["p"] * 4, comps, num_generations=4, eps=EPS, **cols(["Paris"], k=4))
    # correct: one partner agrees (log(1 − ε)), two do not (log ε each); Lyon: nobody agrees, log(1 − ε) per
    # partner; the empty answer agrees with nobody either, so the formula scores it like Lyon
    expected = [(L1 + 2 * L0) / 3, (L1 + 2 * L0) / 3, L1, L1]
    assert out == pytest.approx([LAM * v for v in expected], abs=1e-12)
    # semcal's bounded scale with empty answers worst (λ = ½ on that scale)
    bounded = cal_reward(["p"] * 4, comps, num_generations=4, eps=EPS, lambda_max=0.5, **BOUNDED,
                                 **cols(["Paris"], k=4))
    assert bounded == pytest.approx([0.5 * v for v in [(B1 - 2) / 3, (B1 - 2) / 3, B1, -1.0]], abs=1e-12)


def test_calibration_group_by_hand_old_readings():
    comps = ["Paris", "paris", "Lyon", ""]
    kw = dict(num_generations=4, eps=EPS, lambda_max=1.0, **cols(["Paris"], k=4))
    rollout = cal_reward(["p"] * 4, comps, **OLD_SCORE, **kw)
    assert rollout == pytest.approx([math.log(1 / 3), math.log(1 / 3), L1, L1], abs=1e-12)
    pairwise = cal_reward(["p"] * 4, comps, **{**OLD_SCORE, "reading": "pairwise"}, **kw)
    assert pairwise == pytest.approx([(L1 + 2 * L0) / 3] * 2 + [L1, L1], abs=1e-12)
    # pairwise ≤ rollout reading (Jensen: mean of logs ≤ log of mean)
    assert all(a <= b + 1e-12 for a, b in zip(pairwise, rollout))
    # bounded = unbounded / log(1/ε); Brier = −(y − p)² (rollout) or the mean squared pair error (pairwise)
    bounded = cal_reward(["p"] * 4, comps, **{**OLD_SCORE, "bounded": True}, **kw)
    assert bounded == pytest.approx([v / LB for v in rollout], abs=1e-12)
    brier = cal_reward(["p"] * 4, comps, **{**OLD_SCORE, "score": "brier"}, **kw)
    assert brier == pytest.approx([-(2 / 3) ** 2] * 2 + [-(EPS**2)] * 2, abs=1e-12)
    brier_pw = cal_reward(["p"] * 4, comps, score="brier", **kw)  # the empty answer as the formula gives it
    assert brier_pw == pytest.approx([-2 / 3] * 2 + [0.0, 0.0], abs=1e-12)
    brier_worst = cal_reward(["p"] * 4, comps, score="brier", empty_answer="worst", **kw)
    assert brier_worst == pytest.approx([-2 / 3] * 2 + [0.0, -1.0], abs=1e-12)


def test_calibration_collapse_modes():
    """The reward's collapse modes (docs/TRAINING.md): before the lab, the paper's BCE, and bounded."""
    kw = dict(num_generations=4, eps=EPS, lambda_max=1.0, **cols(["Bern"], k=4))
    diverse = ["Zurich", "Geneva", "Basel", "Lugano"]
    trap = ["Zurich", "Zurich", "Zurich", "Bern"]
    # before: one wrong answer repeated scores log ε for all (no spread: no GRPO signal); all different and
    # wrong scores log(1-ε) ≈ 0, the supremum; a lone correct answer among a repeated wrong one gets log ε
    assert cal_reward(["p"] * 4, ["Zurich"] * 4, **OLD_SCORE, **kw) == pytest.approx([L0] * 4)
    assert cal_reward(["p"] * 4, diverse, **OLD_SCORE, **kw) == pytest.approx([L1] * 4)
    assert cal_reward(["p"] * 4, trap, **OLD_SCORE, **kw) == pytest.approx([math.log(1 / 3)] * 3 + [L0])
    # the paper's pairwise BCE: the same ordering (scatter is the best wrong state), per partner
    assert cal_reward(["p"] * 4, ["Zurich"] * 4, **kw) == pytest.approx([L0] * 4)
    assert cal_reward(["p"] * 4, diverse, **kw) == pytest.approx([L1] * 4)
    assert cal_reward(["p"] * 4, trap, **kw) == pytest.approx([(2 * L0 + L1) / 3] * 3 + [L0])
    # bounded: the same divided by log(1/ε), in [−1, 0]
    assert cal_reward(["p"] * 4, ["Zurich"] * 4, **BOUNDED, **kw) == pytest.approx([-1.0] * 4)
    assert cal_reward(["p"] * 4, diverse, **BOUNDED, **kw) == pytest.approx([B1] * 4)
    assert cal_reward(["p"] * 4, trap, **BOUNDED, **kw) == pytest.approx([(B1 - 2) / 3] * 3 + [-1.0])


def _group_advantages(comps, golds, lam, old=False, K=None, **opts):
    """Advantages of one group under r_RLVR + λ·r_cal: the design before the lab (group scaling) or the given
    options (default: the paper's reward) with csr.yaml's scaling (none)."""
    from research.advantages import grpo_advantages

    K = K or len(comps)
    c = cols(golds, k=len(comps))
    y = correctness_reward(["p"] * len(comps), comps, **c)
    opts = dict(OLD_SCORE, **opts) if old else opts
    cal = cal_reward(["p"] * len(comps), comps, num_generations=K, lambda_schedule="constant",
                             lambda_max=lam, **opts, **c)
    return grpo_advantages(np.stack([y, cal], axis=1), K, [1.0, 1.0], "group" if old else "none")


def test_lone_correct_rollout_keeps_a_positive_advantage():
    """K=8, one correct rollout among 7 distinct wrong ones (the issue's measurement)."""
    comps = ["Bern"] + ["Zurich", "Geneva", "Basel", "Lugano", "Chur", "Sion", "Thun"]
    # before: +2.47 at λ = 0, −2.39 at step 73 of 500 (λ = 0.146) under the linear schedule from 0 to 1
    assert _group_advantages(comps, ["Bern"], 0.0, old=True)[0] == pytest.approx(2.474, abs=1e-3)
    assert _group_advantages(comps, ["Bern"], 0.144, old=True)[0] > 0
    assert _group_advantages(comps, ["Bern"], 73 / 500, old=True)[0] == pytest.approx(-2.39, abs=0.01)
    # the paper's BCE (ε = 10⁻³): the correct rollout earns 1 + λ·log ε, each wrong one λ·log(1 − ε), so with
    # unscaled advantages A_0 = 7/8·(1 − λ·log((1 − ε)/ε)): positive up to λ_max = 0.1 < 1/log(999) ≈ 0.145
    e = 1e-3
    for lam in np.linspace(0, 0.1, 11):
        a = _group_advantages(comps, ["Bern"], float(lam))
        assert a[0] == pytest.approx(7 / 8 * (1 - lam * math.log((1 - e) / e)), abs=1e-12)
        assert a[0] > 0 and np.all(a[1:] < 0)
    assert _group_advantages(comps, ["Bern"], 0.15)[0] < 0  # just past 1/log(1/ε) the lone correct one loses
    # bounded (÷ log(1/ε)): 1 − λ ≥ ½ against ≈ 0, positive for every λ < 1
    for lam in np.linspace(0, 0.99, 12):
        a = _group_advantages(comps, ["Bern"], float(lam), **BOUNDED)
        assert a[0] > 0 and np.all(a[1:] < 0)


def _expected_reward(a, lam, K=8, **opts):
    """E[r_RLVR + λ·r_cal] per rollout for a question answered correctly with probability a, the wrong answers
    all different; exact over the number of correct rollouts n ~ Binomial(K, a)."""
    total = 0.0
    for n in range(K + 1):
        A = np.eye(K)
        A[:n, :n] = 1
        y = np.array([[1.0] * n + [0.0] * (K - n)])
        r, _ = gcs(A[None], y, 1e-3, **opts)
        total += math.comb(K, n) * a**n * (1 - a) ** (K - n) * float(np.mean(y[0] + lam * r[0]))
    return total


def _increasing(vals):
    return all(b > a for a, b in zip(vals, vals[1:]))


def test_accuracy_always_pays_in_expectation():
    grid = np.linspace(0, 1, 21)
    # before (λ = 1): any accuracy below ≈ 0.44 earns less than accuracy 0
    old = [_expected_reward(a, 1.0, **OLD_SCORE) for a in grid]
    below = [a for a, v in zip(grid, old) if a > 0 and v < old[0]]
    assert below and max(below) == pytest.approx(0.40, abs=0.03) and _expected_reward(0.45, 1.0, **OLD_SCORE) > old[0]
    # the paper's BCE in nats: strictly increasing in accuracy at every λ up to λ_max = 0.1 ...
    for lam in (0.0, 0.05, 0.1):
        assert _increasing([_expected_reward(a, lam) for a in grid]), lam
    # ... but not at λ = 0.3 (> 1/log(1/ε)): some accuracy > 0 earns less than accuracy 0
    paper = [_expected_reward(a, 0.3) for a in grid]
    assert any(v < paper[0] for v in paper[1:])
    # bounded (÷ log(1/ε)): strictly increasing at every λ up to (just below) 1
    for lam in (0.0, 0.5, 0.99):
        assert _increasing([_expected_reward(a, lam, **BOUNDED) for a in grid]), lam


def test_empty_answers_under_the_formula_and_the_worst_option():
    kw = dict(num_generations=4, eps=EPS, **cols(["Bern"], k=4))
    # the paper's J (default empty_answer "judge"): reflexive, so two empty answers agree, and an all-empty group
    # is a repeated wrong answer, charged log ε per partner; a punctuation-only answer is empty too
    out = cal_reward(["p"] * 4, ["", "Zurich", "Geneva", "..."], **kw)
    assert out == pytest.approx([LAM * (L0 + 2 * L1) / 3, LAM * L1, LAM * L1, LAM * (L0 + 2 * L1) / 3], abs=1e-12)
    assert cal_reward(["p"] * 4, [""] * 4, **kw) == pytest.approx([LAM * L0] * 4, abs=1e-12)
    # semcal's rule "disagree" (before issue 41 the default): an empty answer agrees with nobody, so it scores like
    # a wrong answer that stands alone, log(1 − ε) per partner, the best a wrong rollout can get
    kw = dict(kw, empty_answer="disagree")
    out = cal_reward(["p"] * 4, ["", "Zurich", "Geneva", ""], **kw)
    assert out == pytest.approx([LAM * L1] * 4, abs=1e-12)
    assert cal_reward(["p"] * 4, [""] * 4, **kw) == pytest.approx([LAM * L1] * 4, abs=1e-12)
    # ... where a repeated wrong answer is charged: "Zurich" ×2 agree once each (log ε of 3 partners)
    out = cal_reward(["p"] * 4, ["", "Zurich", "Zurich", ""], **kw)
    assert out == pytest.approx([LAM * L1, LAM * (L0 + 2 * L1) / 3, LAM * (L0 + 2 * L1) / 3, LAM * L1], abs=1e-12)
    # empty_answer="worst" (bounded, λ = ½): an empty rollout gets the worst score; saying something does better
    kw_w = dict(kw, lambda_max=0.5, **BOUNDED)
    out = cal_reward(["p"] * 4, ["", "Zurich", "Geneva", ""], **kw_w)
    assert out[0] == out[3] == pytest.approx(-0.5) and out[1] > out[0]
    # all-empty: the worst group there is, not the best
    assert cal_reward(["p"] * 4, [""] * 4, **kw_w) == pytest.approx([-0.5] * 4)
    assert cal_reward(["p"] * 4, [""] * 4, eps=EPS, num_generations=4, empty_answer="worst",
                              **cols(["Bern"], k=4)) == pytest.approx([LAM * L0] * 4)  # unbounded worst: log ε
    # so in a group of one empty answer and three different wrong ones, the empty one has the lowest advantage
    a = _group_advantages(["", "Zurich", "Geneva", "Basel"], ["Bern"], 0.5, **BOUNDED)
    assert a[0] < 0 and np.all(a[1:] > 0)
    # under the formula it is no different from the other lone wrong answers: no advantage at all
    assert np.abs(_group_advantages(["", "Zurich", "Geneva", "Basel"], ["Bern"], LAM)).max() <= 1e-12


def _ref_agree(a: str, b: str) -> bool:
    """J(a, b) of the strict judge in the trainer's agreement matrix, from the definition: two non-empty answers
    agree iff they are the same stripped string or have equal non-empty cores."""
    a, b = a.strip(), b.strip()
    return bool(a and b) and (a == b or bool(_ref_core(a)) and _ref_core(a) == _ref_core(b))


def test_calibration_matches_direct_formula_on_random_groups():
    """r_cal from the reward function = the formulas applied to an independently built agreement matrix
    (the strict judge, ``judge: strict`` with semcal's ``empty_answer: disagree``, re-stated by _ref_agree;
    correctness from the grader, whose own tests are tests/test_judge_cases.py)."""
    from semcal_eval.qa.grading import grade

    rng = random.Random(1)
    pool = ["Paris", "paris", "The answer is Paris", "PARIS!", "Paris France", "Lyon", "Lyon city", "It's Lyon",
            "Nice", "", "the", "Paris or Lyon"]
    for _ in range(40):
        K = rng.randint(2, 6)
        comps = [rng.choice(pool) for _ in range(K)]
        kw = dict(num_generations=K, eps=EPS, lambda_max=1.0, judge="strict", **cols(["Paris"], k=K))
        old = cal_reward(["p"] * K, comps, **OLD_SCORE, **kw)
        paper = cal_reward(["p"] * K, comps, empty_answer="disagree", **kw)
        bounded = cal_reward(["p"] * K, comps, **BOUNDED, **kw)
        exp_old, exp_paper, exp_bounded = [], [], []
        for j in range(K):
            agree = [_ref_agree(comps[j], comps[i]) for i in range(K) if i != j]
            p = min(max(sum(agree) / (K - 1), EPS), 1 - EPS)
            y = float(grade(comps[j], ["Paris"], "q"))
            exp_old.append(y * math.log(p) + (1 - y) * math.log(1 - p))
            pair = [min(max(float(g), EPS), 1 - EPS) for g in agree]
            bce = float(np.mean([y * math.log(q) + (1 - y) * math.log(1 - q) for q in pair]))
            exp_paper.append(bce)
            exp_bounded.append(-1.0 if not comps[j].strip() else bce / LB)
        assert old == pytest.approx(exp_old, abs=1e-12)
        assert paper == pytest.approx(exp_paper, abs=1e-12)
        assert bounded == pytest.approx(exp_bounded, abs=1e-12)


def test_calibration_scores_edges():
    # K = 2, exact 0/1 agreements, ε at both extremes of its range
    A = np.array([[1, 1], [1, 1]])
    r, p = cs(A, [1, 0], eps=1e-6, **OLD_SCORE)
    assert p.tolist() == [1 - 1e-6, 1 - 1e-6]
    assert r == pytest.approx([math.log(1 - 1e-6), math.log(1e-6)])
    r, _ = cs(A, [1, 0], eps=1e-6)  # the paper's pairwise BCE: one partner, agreeing
    assert r == pytest.approx([math.log(1 - 1e-6), math.log(1e-6)])
    r, _ = cs(A, [1, 0], eps=1e-6, bounded=True)
    assert r == pytest.approx([math.log(1 - 1e-6) / math.log(1e6), -1.0])
    r, p = cs(np.eye(3), [0, 0, 0], eps=0.49)
    assert np.all(np.isfinite(r)) and p.tolist() == [0.49] * 3
    rng = np.random.default_rng(0)
    A = rng.uniform(size=(50, 5, 5))
    y = rng.integers(0, 2, size=(50, 5))
    empty = rng.uniform(size=(50, 5)) < 0.2
    for reading in ("rollout", "pairwise"):
        for empty_answer in ("disagree", "worst"):
            # raw log score in [log ε, 0] nats; bounded log and Brier in [−1, 0], on random soft agreements
            r, _ = gcs(A, y, 1e-3, reading, empty=empty, empty_answer=empty_answer)
            assert r.min() >= math.log(1e-3) - 1e-12 and r.max() <= 0
            assert r.min() < -1  # the raw scale really is nats, not [−1, 0]
            for kw in (dict(score="log", bounded=True), dict(score="brier")):
                r, _ = gcs(A, y, 1e-3, reading, empty=empty, empty_answer=empty_answer, **kw)
                assert r.min() >= -1 - 1e-12 and r.max() <= 0
    with pytest.raises(ValueError, match=r"\[0, 1\]"):  # the data is checked on every call; the options are not
        cs(2 * np.eye(2), [1, 0])
    with pytest.raises(ValueError, match="K >= 2"):
        cs(np.eye(1), [1])


def test_lambda_schedules_and_weighting():
    st = SimpleNamespace(global_step=30, max_steps=100)
    kw = dict(num_generations=2, eps=EPS, **cols(["Paris"], k=2))
    base = cal_reward(["p"] * 2, ["Paris", "Lyon"], lambda_max=1.0, **kw)
    assert base == pytest.approx([L0, L1], abs=1e-12)  # Paris: its partner disagrees; Lyon: it disagrees, rightly
    lin = cal_reward(["p"] * 2, ["Paris", "Lyon"], trainer_state=st, lambda_max=2.0, **kw)
    assert lin == pytest.approx([0.6 * v for v in base])
    default = cal_reward(["p"] * 2, ["Paris", "Lyon"], **kw)  # no trainer state: λ = λ_max = 0.1
    assert default == pytest.approx([0.1 * v for v in base])
    at_30 = cal_reward(["p"] * 2, ["Paris", "Lyon"], trainer_state=st, **kw)  # linear 0 → 0.1: λ = 0.03
    assert at_30 == pytest.approx([0.03 * v for v in base])
    R = RewardSettings
    assert lambda_at(st, R(lambda_schedule="constant", lambda_max=0.7)) == 0.7
    assert lambda_at(st, R(lambda_schedule="step", lambda_max=1.0, lambda_min=0.1, lambda_step_fraction=0.3)) == 1.0
    assert lambda_at(st, R(lambda_schedule="step", lambda_max=1.0, lambda_min=0.1, lambda_step_fraction=0.31)) == 0.1
    assert lambda_at(SimpleNamespace(global_step=0, max_steps=10), R(lambda_max=1.0)) == 0.0
    assert lambda_at(SimpleNamespace(global_step=15, max_steps=10), R(lambda_max=1.0)) == 1.0  # clipped at t = 1
    for sched in ("linear", "constant", "step"):  # non-decreasing in t
        opts = R(lambda_schedule=sched, lambda_max=1.5, lambda_min=0.2)
        vals = [lambda_at(SimpleNamespace(global_step=s, max_steps=20), opts) for s in range(21)]
        assert all(b >= a for a, b in zip(vals, vals[1:]))


def test_metrics_logged_through_trl_hooks():
    logged, extra = {}, {}
    st = SimpleNamespace(global_step=1, max_steps=4)
    cal_reward(
        ["p"] * 2, ["Paris", "Paris"], trainer_state=st, num_generations=2, eps=EPS,
        log_metric=lambda k, v: logged.setdefault(k, v), log_extra=lambda k, v: extra.setdefault(k, v),
        **cols(["Paris"], k=2),
    )
    assert logged["csr/lambda"] == pytest.approx(0.025)  # ¼ of λ_max = 0.1
    assert logged["csr/r_cal"] == pytest.approx(L1)  # both right, both agreeing: log(1 − ε), unweighted
    assert logged["csr/confidence"] == pytest.approx(1 - EPS)
    assert extra["confidence"] == pytest.approx([1 - EPS] * 2)


# ------------------------------------------------------------------------------------------------ λ at step 1


def _rollout_batch():
    """Groups of K=4 covering every case: all right, all wrong and different, all wrong and equal, all empty,
    mixed with and without empty answers."""
    groups = [
        (["Paris", "paris", "Paris", "the Paris"], ["Paris"]),
        (["Zurich", "Geneva", "Basel", "Lugano"], ["Bern"]),
        (["Zurich", "Zurich", "Zurich", "Zurich"], ["Bern"]),
        (["", "", "", ""], ["Oslo"]),
        (["Rome", "Rome", "Milan", "Roma"], ["Rome"]),
        (["Lyon", "", "Paris", "Lyon city"], ["Paris"]),
        (["Bern", "Zurich", "Zurich", "Zurich"], ["Bern"]),
        (["Zurich", "Zurich", "Geneva", "Basel"], ["Bern"]),
    ]
    prompts, comps, answers = [], [], []
    for g, (cs, golds) in enumerate(groups):
        prompts += [f"q{g}"] * 4
        comps += [" " + c for c in cs]
        answers += [golds] * 4
    return prompts, comps, dict(answers=answers, question=prompts)


def _trainer_advantages(cfg, step, max_steps=500):
    """Advantages as the real trainer forms them: build_reward_funcs' functions and weights, the config's
    scale_rewards, TRL's trainer state at ``step``."""
    from research.advantages import grpo_advantages
    from trainers.train import build_reward_funcs

    funcs, weights = build_reward_funcs(cfg)
    prompts, comps, c = _rollout_batch()
    st = SimpleNamespace(global_step=step, max_steps=max_steps)
    rpf = np.array([f(prompts, comps, None, st, **c) for f in funcs]).T
    return grpo_advantages(rpf, cfg.grpo["num_generations"], weights, cfg.grpo.get("scale_rewards", "group"))


def test_first_step_advantages_equal_rlvr_and_differ_later():
    """csr.yaml vs rlvr.yaml (same GRPO settings): TRL scores the first step's rollouts at global_step 0,
    where λ = 0, and the advantages equal RLVR's in every group, all-right and all-wrong ones included. Right
    after (λ = 0.1·1/500) they differ by O(λ) — not by O(1) as with group scaling — and later clearly."""
    # csr.yaml as shipped: the paper's BCE with its curriculum, λ linear 0 → 0.1
    csr = tcfg.load_config(ROOT / "trainers/configs/csr.yaml", ["grpo.num_generations=4"])
    assert (csr.reward.score, csr.reward.lambda_schedule, csr.reward.lambda_max) == (
        "log", "linear", 0.1)
    rlvr = tcfg.load_config(ROOT / "trainers/configs/rlvr.yaml", ["grpo.num_generations=4"])
    assert csr.grpo["scale_rewards"] == rlvr.grpo["scale_rewards"] == "none"
    base = _trainer_advantages(rlvr, 0)
    assert np.all(base[4:16] == 0)  # all right, all wrong, all empty: RLVR has nothing to say
    first = _trainer_advantages(csr, 0)
    assert np.abs(first - base).max() <= 1e-6
    second = _trainer_advantages(csr, 1)
    assert 0 < np.abs(second - base).max() <= 0.01
    later = _trainer_advantages(csr, 250)
    assert np.abs(later - base).max() > 0.05  # unscaled advantages: λ·(r_cal − mean), λ = 0.05 here
    # the all-wrong group with a repeated answer: RLVR is silent, CSR now pushes the repeated answer down
    assert np.all(base[28:32] == 0) and later[28] < 0 and later[29] < 0 and later[30] > 0 and later[31] > 0
    # with TRL's group scaling instead, λ = 0.1·1/500 already moves that group by O(1)
    grouped = csr.override("grpo.scale_rewards=group")
    assert np.abs(_trainer_advantages(grouped, 1)[28:32]).max() > 0.5


def test_shipped_likelihood_spread_advantages_by_hand():
    """csr_spread.yaml as shipped (likelihood_spread, λ ≡ 1): a correct rollout earns K/n_c, a wrong one minus the
    share of its partners that give (or, by a shared content word, may give) its answer, an empty one −1;
    advantages are those rewards minus the group mean (scale_rewards: none). Worked by hand for _rollout_batch."""
    csr = tcfg.load_config(ROOT / "trainers/configs/csr_spread.yaml", ["grpo.num_generations=4"])
    r_ = csr.reward
    assert (csr.method, r_.score, r_.lambda_schedule, r_.lambda_max, r_.empty_answer,
            r_.agreement_wrong, csr.grpo["scale_rewards"]) == (
        "csr_spread", "likelihood_spread", "constant", 1.0, "worst", "overlap", "none")
    r = np.array([
        [1, 1, 1, 1],                  # all right: K/n_c = 1
        [0, 0, 0, 0],                  # all wrong, all different: nobody shares an answer
        [-1, -1, -1, -1],              # one wrong answer ×4: fully shared
        [-1, -1, -1, -1],              # all empty
        [2, 2, 0, 0],                  # Rome ×2 correct (n_c = 2); Milan and Roma share no word with anyone
        [-1 / 3, -1, 4, -1 / 3],       # Lyon ~ "Lyon city" (1 of 3 partners each), empty −1, Paris alone correct
        [4, -2 / 3, -2 / 3, -2 / 3],   # Bern alone correct; Zurich ×3 shares with 2 of 3
        [-1 / 3, -1 / 3, 0, 0],        # Zurich ×2 wrong and shared; Geneva, Basel unshared
    ])
    want = (r - r.mean(axis=1, keepdims=True)).reshape(-1)
    assert _trainer_advantages(csr, 123) == pytest.approx(want, abs=1e-12)
    # no group with every rollout alike (right, wrong or empty) moves: those stay silent like RLVR's
    assert np.all(want[:16] == 0)


def test_likelihood_advantages_from_the_definition():
    """csr_likelihood.yaml (λ ≡ 1): a group's advantages are y·K/n_c − 1 (0 when n_c = 0), so all-right,
    all-wrong and all-empty groups stay silent like RLVR's, and a lone correct rollout gets K − 1; with λ linear
    0 → 1 the first step equals RLVR and the advantages move by O(λ) after."""
    csr = tcfg.load_config(ROOT / "trainers/configs/csr_likelihood.yaml", ["grpo.num_generations=4"])
    rlvr = tcfg.load_config(ROOT / "trainers/configs/rlvr.yaml", ["grpo.num_generations=4"])
    assert (csr.method, csr.reward.score, csr.reward.lambda_schedule, csr.reward.lambda_max) == (
        "csr_likelihood", "likelihood", "constant", 1.0)
    y = np.array(_trainer_advantages(rlvr, 0)).reshape(-1, 4)  # RLVR advantage y − mean(y)
    y = np.round(y + np.array([correctness_reward(*_rollout_batch()[:2], **_rollout_batch()[2])]).reshape(-1, 4)
                 .mean(axis=1, keepdims=True), 12)
    n_c = y.sum(axis=1, keepdims=True)
    want = np.where(n_c > 0, y * 4 / np.maximum(n_c, 1) - 1, 0.0).reshape(-1)
    assert _trainer_advantages(csr, 123) == pytest.approx(want, abs=1e-12)
    assert np.all(want[4:16] == 0) and want.max() == pytest.approx(3.0)
    linear = csr.override("reward.lambda_schedule=linear")
    base = _trainer_advantages(rlvr, 0)
    assert np.abs(_trainer_advantages(linear, 0) - base).max() <= 1e-12
    assert 0 < np.abs(_trainer_advantages(linear, 1) - base).max() <= 0.01


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(eps=0.0), r"reward\.eps=0\.0 must lie in the open interval \(0, 0\.5\).*e\.g\. reward\.eps=0\.001"),
        (dict(eps=0.5), r"reward\.eps=0\.5 must lie"),
        (dict(eps=-1), r"reward\.eps=-1\.0 must lie"),
        (dict(eps="tiny"), r"reward\.eps='tiny' must be a number"),
        (dict(lambda_schedule="cosine"), r"reward\.lambda_schedule='cosine' is not one of linear, constant, step"),
        (dict(lambda_min=0.5, lambda_max=0.1), "non-decreasing"),
        (dict(lambda_min=-0.1, lambda_max=0.1), r"reward\.lambda_min=-0\.1 must be >= 0"),
        (dict(lambda_step_fraction=1.5), r"reward\.lambda_step_fraction=1\.5 must lie in \[0, 1\]"),
        (dict(lambda_max=float("nan")), r"reward\.lambda_max=nan must be a finite number"),
        (dict(reading="mean"), r"reward\.reading='mean' is not one of rollout, pairwise"),
        (dict(score="spherical"), r"reward\.score='spherical' is not one of"),
        (dict(empty_answer="skip"), r"reward\.empty_answer='skip' is not one of"),
        (dict(agreement_wrong="span"), r"reward\.agreement_wrong='span' is not one of"),
        (dict(bounded=1), r"reward\.bounded=1 must be true/false"),
    ],
)
def test_bad_options_are_refused_when_the_settings_are_built(kw, match):
    """Every reward option is checked once, when RewardSettings is built (from a config or directly), with the
    key, the value and a fix in the message."""
    with pytest.raises(ValueError, match=match):
        RewardSettings(**kw)


def test_reward_functions_take_only_the_built_settings(monkeypatch):
    """The reward functions read the typed settings and never check them again: they refuse any other form of
    the options (a dict, loose keywords), and calling them builds (so checks) no settings."""
    c = cols(["a"], k=2)
    with pytest.raises(TypeError, match="RewardSettings"):
        calibration_reward(["p"] * 2, ["a", "b"], settings={"eps": 0.01}, num_generations=2, **c)
    with pytest.raises(TypeError, match=r"reward option\(s\) \['eps'\] as keywords"):
        calibration_reward(["p"] * 2, ["a", "b"], settings=RewardSettings(), num_generations=2, eps=0.7, **c)
    with pytest.raises(TypeError, match="settings"):
        calibration_reward(["p"] * 2, ["a", "b"], num_generations=2, **c)  # no default options either
    with pytest.raises(TypeError, match="RewardSettings"):
        group_calibration_scores(np.ones((1, 2, 2)), np.ones((1, 2)), {"eps": 0.01})
    cfg = tcfg.load_config(ROOT / "trainers/configs/csr_spread.yaml", ["grpo.num_generations=4"])
    from trainers.train import build_reward_funcs

    funcs, _ = build_reward_funcs(cfg)
    checks = []
    real = tcfg._Section.__post_init__
    monkeypatch.setattr(tcfg._Section, "__post_init__", lambda self: checks.append(self) or real(self))
    prompts, comps, c = _rollout_batch()
    for step in (0, 1, 2):
        out = funcs[1](prompts, comps, None, SimpleNamespace(global_step=step, max_steps=3), **c)
        assert len(out) == len(comps)
    assert checks == []  # no settings built or checked per call
    RewardSettings()
    assert len(checks) == 1  # (the spy does see a build)


def test_a_group_of_one_rollout_is_a_clear_error():
    with pytest.raises(ValueError, match="num_generations"):
        calibration_reward(["p"] * 2, ["Paris", "Lyon"], settings=RewardSettings(), num_generations=1,
                           **cols(["Paris"], k=2))


def test_split_group_is_a_clear_error():
    with pytest.raises(GroupLayoutError, match="not a multiple of num_generations"):
        cal_reward(["p"] * 3, ["a", "b", "c"], num_generations=2, **cols(["a"], k=3))
    with pytest.raises(GroupLayoutError, match="do not share one prompt"):
        cal_reward(["p", "q", "q", "p"], ["a"] * 4, num_generations=2, **cols(["a"], k=4))


def test_unparseable_and_empty_completions_have_finite_rewards():
    comps = ["", None, [], "\n", "<answer></answer>", "<confidence>2</confidence>", "🙂" * 50, "\x00"]
    n = len(comps)
    c = cols(["Paris"], k=n)
    for f, kw in [
        (correctness_reward, {}),
        (cal_reward, dict(num_generations=n)),
        (cal_reward, dict(num_generations=2, reading="pairwise")),
        (rlcr_format_reward, {}),
        (rlcr_correctness_reward, {}),
        (rlcr_brier_reward, {}),
    ]:
        out = f(["p"] * n, comps, **kw, **c)
        assert len(out) == n and all(isinstance(v, float) and math.isfinite(v) for v in out), f.__name__


# ------------------------------------------------------------------------------------------------ RLCR


def rlcr_total(comps, golds):
    n = len(comps)
    parts = [f(["p"] * n, comps, **cols(golds, k=n)) for f in (rlcr_format_reward, rlcr_correctness_reward, rlcr_brier_reward)]
    return [0.5 * a + 0.5 * b + 0.5 * c for a, b, c in zip(*parts)]


def test_rlcr_reward_by_hand():
    comps = [
        rlcr("Paris", "0.8"),  # 0.5 + 0.5 + 0.5·(1 − 0.2²) = 1.48
        rlcr("Lyon", "0.8"),  # 0.5 + 0   + 0.5·(1 − 0.8²) = 0.68
        rlcr("Paris", "1.0"),  # exact 1.0, correct: 1.5
        rlcr("Lyon", "0"),  # exact 0.0, wrong: 0.5 + 0.5 = 1.0
        rlcr("Paris", "80%"),  # percentage → 0.8: 1.48
        "<answer>Paris</answer><confidence>0.8</confidence>",  # no think/analysis: format 0 → 0.98
        rlcr("Paris", "1.5"),  # confidence out of range: no format, Brier term 0 → 0.5
        "Paris",  # free text: correct by the first line, nothing else → 0.5
        "",  # nothing → 0
    ]
    assert rlcr_total(comps, ["Paris"]) == pytest.approx([1.48, 0.68, 1.5, 1.0, 1.48, 0.98, 0.5, 0.5, 0.0])


def test_rlcr_format_strictness():
    ok = rlcr("Paris", "0.5")
    assert parse_rlcr(ok) == (True, "Paris", 0.5)
    assert parse_rlcr("  \n" + ok + "\n")[0]  # surrounding whitespace is fine
    assert not parse_rlcr(ok + " trailing text")[0]
    assert not parse_rlcr(ok + ok)[0]  # tags repeated
    assert not parse_rlcr(ok.replace("<think>t</think>", ""))[0]
    order = "<answer>Paris</answer><think>t</think><analysis>a</analysis><confidence>0.5</confidence>"
    assert not parse_rlcr(order)[0]


# ------------------------------------------------------------------------------------------------ config


def test_config_override_and_validation(tmp_path):
    cfg = tcfg.load_config(ROOT / "trainers/configs/csr.yaml", ["grpo.max_steps=3", "reward.eps=1e-2", "method=rlvr"])
    assert cfg.grpo["max_steps"] == 3 and cfg.reward.eps == 0.01 and cfg.method == "rlvr"
    assert isinstance(cfg, tcfg.TrainConfig) and isinstance(cfg.reward, RewardSettings)
    for bad, match in [
        ("method=ppo", r"method='ppo' is not one of csr, .*e\.g\. method=csr"),
        ("grpo.num_generations=1", "grpo.num_generations"),
        ("reward.eps=0.7", r"reward\.eps=0\.7 must lie in the open interval \(0, 0\.5\)"),
        ("reward.lambda_schedule=exp", r"reward\.lambda_schedule='exp' is not one of"),
        ("lora.r=0", r"lora\.r=0 must be >= 1: e\.g\. lora\.r=16"),
        ("warmup_sft.steps=two", r"warmup_sft\.steps='two' must be an integer"),
        ("data.prompt_template=Q", r"data\.prompt_template=Q must contain the placeholder \{question\}"),
    ]:
        with pytest.raises(ValueError, match=match):  # refused when the config is built
            cfg.override(bad)
        with pytest.raises(ValueError, match=match):
            tcfg.load_config(ROOT / "trainers/configs/csr.yaml", [bad])
    with pytest.raises(ValueError, match="key.sub=value"):
        cfg.override("grpo.max_steps")
    with pytest.raises(ValueError, match="unknown reward keys"):
        cfg.override("reward.lambda_mx=0.3")
    with pytest.raises(ValueError, match="scale_rewards"):
        cfg.override("grpo.scale_rewards=std")
    csr = tcfg.load_config(ROOT / "trainers/configs/csr.yaml")
    for bad, match in [
        ("reward.empty_answer=skip", "empty_answer"),
        ("reward.agreement_wrong=span", "agreement_wrong"),
        ("reward.bounded=1", "bounded"),
        ("reward.score=spherical", "score"),
        ("reward.match=span", "unknown reward keys"),  # the match option is gone (issue 31)
    ]:
        with pytest.raises(ValueError, match=match):
            csr.override(bad)
    # built once, frozen: a change is a new config, checked again
    with pytest.raises(AttributeError):
        csr.reward.eps = 0.7
    with pytest.raises(TypeError, match="override"):
        csr.grpo["num_generations"] = 1
    assert csr.override("reward.eps=0.01").reward.eps == 0.01 and csr.reward.eps == 1e-3


def test_the_cli_refuses_a_bad_value_before_anything_runs(capsys):
    from trainers.cli import main

    assert main([str(ROOT / "trainers/configs/csr.yaml"), "reward.eps=0.7", "--print-config"]) == 2
    err = capsys.readouterr().err
    assert "reward.eps=0.7 must lie in the open interval (0, 0.5)" in err and "e.g. reward.eps=0.001" in err


def test_resolved_config_round_trips_through_yaml():
    """What semcal_train.yaml and --print-config write (as_dict) reads back as the same config."""
    import yaml

    for path in sorted((ROOT / "trainers/configs").glob("*.yaml")):
        cfg = tcfg.load_config(path, ["evaluate.metadata={num_samples: 2}"])
        assert tcfg.TrainConfig.from_dict(yaml.safe_load(yaml.safe_dump(cfg.as_dict(), sort_keys=False))) == cfg
    assert "metadata" not in tcfg.load_config(None).as_dict()["evaluate"]  # optional keys only when set


#: CSR as the paper writes it (arXiv 2605.15588): pairwise BCE of each partner's strict-judge agreement against the
#: rollout's correctness, in nats, ε = 10⁻³, an empty answer agreeing with nothing, λ linear 0 → 0.1, unscaled
#: advantages. Written out here, not imported from the code under test.
PAPER = dict(score="log", reading="pairwise", bounded=False, eps=1e-3, empty_answer="judge", judge="cover",
             agreement_wrong="judge", lambda_schedule="linear", lambda_min=0.0, lambda_max=0.1)


def test_csr_reward_is_the_papers():
    """method csr — the trainer's DEFAULTS and csr.yaml — trains the paper's reward, and the reward functions'
    own defaults are the same; the shipped designs of both labs are csr.yaml's."""
    import inspect

    from research import policy_lab, reward_lab
    from trainers.rewards import CSR_METHODS

    for cfg in (tcfg.load_config(None), tcfg.load_config(ROOT / "trainers/configs/csr.yaml")):
        assert cfg.method == "csr"
        assert {k: getattr(cfg.reward, k) for k in PAPER} == PAPER
        assert cfg.grpo["scale_rewards"] == "none"
    # the reward settings' own defaults (one table, trainers.config) are the paper's; the functions have none
    assert {k: getattr(RewardSettings(), k) for k in PAPER} == PAPER
    for f in (calibration_reward, group_calibration_scores, calibration_scores):
        assert inspect.signature(f).parameters["settings"].default is inspect.Parameter.empty
    assert CSR_METHODS["csr"] == {"score": "log", "reading": "pairwise"}
    for lab in (policy_lab.CHOSEN, reward_lab.CHOSEN):
        assert lab.method == "csr"
        assert {k: getattr(lab, k) for k in ("score", "reading", "bounded", "eps", "empty_answer", "lambda_schedule",
                                             "lambda_max", "scale_rewards")} == {
            **{k: PAPER[k] for k in ("score", "reading", "bounded", "eps", "empty_answer", "lambda_schedule",
                                     "lambda_max")}, "scale_rewards": "none"}


def test_a_method_name_promises_its_score():
    """A config cannot train another reward under a method's name; semcal's variants have names of their own."""
    csr = tcfg.load_config(ROOT / "trainers/configs/csr.yaml")
    for bad in ("reward.score=likelihood", "reward.score=likelihood_spread", "reward.score=brier",
                "reward.reading=rollout"):
        with pytest.raises(ValueError, match="promises"):
            csr.override(bad)
    for name, score in (("csr_likelihood", "likelihood"), ("csr_spread", "likelihood_spread")):
        cfg = tcfg.load_config(ROOT / f"trainers/configs/{name}.yaml")
        assert cfg.method == name and cfg.reward.score == score
        with pytest.raises(ValueError, match="promises"):
            cfg.override("reward.score=log")
    # the options the paper fixes may still be tuned under its name: λ, ε, bounded, empty answers
    for ok in ("reward.lambda_max=0.05", "reward.eps=1e-2", "reward.bounded=true", "reward.empty_answer=worst"):
        csr.override(ok)


def test_group_layout_check_uses_trl_arithmetic():
    from trl import GRPOConfig

    common = dict(output_dir="/tmp/x", use_cpu=True, report_to=[], num_generations=4, activation_checkpointing=False)
    ok = GRPOConfig(per_device_train_batch_size=4, **common)
    tcfg.check_group_layout(ok, gather_groups=False, method="csr")
    # 2 rows per step × steps_per_generation 2 = 4 rows per rank: whole groups although a step holds half a group
    ok2 = GRPOConfig(per_device_train_batch_size=2, gradient_accumulation_steps=2, **common)
    assert (ok2.steps_per_generation, ok2.generation_batch_size) == (2, 4)
    tcfg.check_group_layout(ok2, gather_groups=False, method="csr")
    # With 2 processes, 3 rows per rank and K = 2 pass TRL's own check (global 6) but split a group;
    # a single-process run cannot build such a GRPOConfig, so the 2-process layout is written out.
    bad = SimpleNamespace(num_generations=2, per_device_train_batch_size=3, steps_per_generation=1, world_size=2)
    with pytest.raises(ValueError, match="gather_groups"):
        tcfg.check_group_layout(bad, gather_groups=False, method="csr")
    tcfg.check_group_layout(bad, gather_groups=True, method="csr")
    tcfg.check_group_layout(bad, gather_groups=False, method="rlvr")  # per-completion rewards don't care


# ------------------------------------------------------------------------------------------------ 2 processes

_DIST_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import torch.distributed as dist
    from trainers.config import RewardSettings
    from trainers.rewards import calibration_reward, GroupLayoutError
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    # global batch: 3 prompts × K=2 = 6 rows; 3 rows per rank, so prompt b's group straddles the ranks
    prompts = ["a", "a", "b", "b", "c", "c"]
    comps = ["Paris", "Paris", "Rome", "Bern", "Oslo", "Oslo"]
    golds = [["Paris"]] * 2 + [["Bern"]] * 2 + [["Oslo"]] * 2
    sl = slice(rank * 3, rank * 3 + 3)
    kw = dict(num_generations=2, answers=golds[sl], question=prompts[sl])
    out = {"rank": rank}
    out["gathered"] = calibration_reward(prompts[sl], comps[sl], settings=RewardSettings(eps=0.01, gather_groups=True), **kw)
    try:
        calibration_reward(prompts[sl], comps[sl], settings=RewardSettings(eps=0.01), **kw)
        out["error"] = None
    except GroupLayoutError as e:
        out["error"] = str(e)
    with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as f:
        json.dump(out, f)
    dist.destroy_process_group()
    """
)


def test_two_process_groups_gathered_or_rejected(tmp_path):
    script = tmp_path / "dist_rewards.py"
    script.write_text(_DIST_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script), str(tmp_path)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]
    import json

    outs = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    single = cal_reward(
        ["a", "a", "b", "b", "c", "c"], ["Paris", "Paris", "Rome", "Bern", "Oslo", "Oslo"], num_generations=2,
        eps=0.01, answers=[["Paris"]] * 2 + [["Bern"]] * 2 + [["Oslo"]] * 2, question=["a", "a", "b", "b", "c", "c"],
    )
    assert outs[0]["gathered"] + outs[1]["gathered"] == pytest.approx(single)
    # by hand (λ = 0.1): agreeing correct pairs and Rome (wrong, alone) score log(1 − ε); Bern (correct, alone) log ε
    assert single == pytest.approx([LAM * L1, LAM * L1, LAM * L1, LAM * L0, LAM * L1, LAM * L1], abs=1e-12)
    for o in outs:
        assert o["error"] and "gather_groups" in o["error"]


# ------------------------------------------------------------------------------------------------ configs and data


@pytest.mark.parametrize("path", sorted((ROOT / "trainers/configs").glob("*.yaml")), ids=lambda p: p.name)
def test_example_configs_resolve(path):
    cfg = tcfg.load_config(path)
    assert cfg.method in tcfg.METHODS
    if path.name == "cpu_smoke.yaml":  # the CPU path: fp32, no activation checkpointing, CPU device
        g = cfg.grpo
        assert g["use_cpu"] and not g["bf16"] and not g["activation_checkpointing"]


@pytest.mark.parametrize("path", sorted((ROOT / "trainers/configs/accelerate").glob("*.yaml")), ids=lambda p: p.name)
def test_accelerate_configs_parse(path):
    import yaml

    c = yaml.safe_load(path.read_text())
    assert c["distributed_type"] in ("MULTI_GPU", "DEEPSPEED") and c["num_processes"] >= c["num_machines"] >= 1
    if c["distributed_type"] == "DEEPSPEED":
        assert c["deepspeed_config"]["zero_stage"] == 3


def test_training_dataset_from_hotpotqa_sample(data_dir):
    from trainers.data import build_dataset

    cfg = tcfg.load_config(ROOT / "trainers/configs/cpu_smoke.yaml", ["data.limit=5"])
    ds = build_dataset(cfg)
    assert len(ds) == 5 and set(ds.column_names) == {"prompt", "question", "answers"}
    for row in ds:
        # the training prompt is the QA tasks' own prompt for that question
        assert row["prompt"] == qa.qa_doc_to_text({"qa_question": row["question"].strip()})
        assert row["answers"] and all(a.strip() for a in row["answers"])
    again = build_dataset(cfg)
    assert again["question"] == ds["question"]  # seeded shuffle: same rows every time
    rlcr_ds = build_dataset(cfg.override("method=rlcr"))
    assert all("<confidence>" in p for p in rlcr_ds["prompt"])
