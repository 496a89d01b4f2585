"""Issue 22, item 1: no surface trick on a wrong answer earns more total CSR reward than the answer itself.

The adversaries (trainers/adversaries.py) run through the trainer's own reward functions; the short-answer
matching is checked against a reference written here from its definition (no model, fast)."""

from __future__ import annotations

import math
import re
import string

import numpy as np
import pytest

from trainers import adversaries as ADV
from trainers.rewards import calibration_reward, correctness_reward

Q = "What is the capital of France?"
EPS = 1e-3


def cols(k, gold="Paris", q=Q):
    return dict(answers=[[gold]] * k, question=[q] * k)


# ------------------------------------------------------------------------------------------------ reference


def _norm_tokens(s: str) -> list[str]:
    s = "".join(ch for ch in s.lower() if ch not in string.punctuation)
    return [t for t in s.split() if t not in ("a", "an", "the")]


def _key(ans: str, q: str) -> list[str]:
    t, r = _norm_tokens(ans), _norm_tokens(q)
    out, i = [], 0
    while i < len(t):
        if r and t[i : i + len(r)] == r:
            i += len(r)
        else:
            out.append(t[i])
            i += 1
    return out


def _f1(a: list[str], b: list[str]) -> float:
    common = sum(min(a.count(w), b.count(w)) for w in set(a))
    if not common:
        return 0.0
    p, r = common / len(a), common / len(b)
    return 2 * p * r / (p + r)


def reference_rcal(comps, gold, q, lam):
    """λ·r_cal from the definition: short answer = key cut to 1 + len(gold key); y = F1(short, gold) ≥ ½;
    a correct rollout's partner agrees iff F1 of short answers ≥ ½; a wrong rollout's partner agrees iff
    the content words (not stopwords, not question words; or the key when none) intersect, or F1 ≥ ½."""
    from trainers.answer_match import STOPWORDS

    K = len(comps)
    budget = len(_key(gold, q)) + 1
    keys = [_key(c.split("\n")[0], q) for c in comps]
    short = [k[:budget] for k in keys]
    y = [bool(s) and _f1(s, _key(gold, q)) >= 0.5 for s in short]
    qw = set(_norm_tokens(q))

    def content(c, k):
        spaced = _key(re.sub("[" + re.escape(string.punctuation) + "]", " ", c), q)
        toks = set(k) | set(spaced)
        cs = {t for t in toks if t not in STOPWORDS and t not in qw} or toks
        return cs | {"".join(t for t in k if t in cs)}

    cont = [content(c, k) if k else set() for c, k in zip(comps, keys)]
    out = []
    for j in range(K):
        if not short[j]:
            out.append(-lam)
            continue
        s = 0.0
        for i in range(K):
            if i == j:
                continue
            strict = bool(short[i]) and _f1(short[j], short[i]) >= 0.5
            agree = strict if y[j] else (strict or bool(cont[j] & cont[i]))
            a = min(max(float(agree), EPS), 1 - EPS)
            s += math.log(a) if y[j] else math.log(1 - a)
        out.append(lam * s / (K - 1) / math.log(1 / EPS))
    return [float(v) for v in y], out


@pytest.mark.parametrize("comps", [
    ["Paris", "paris.", "Lyon", "Lyon apple river", ""],
    ["PARIS, I think", Q + " Paris", "Lyon", "New-York", "new york city"],
    [Q, "Lyon", "lyon!", "Nice", "Nice"],
])
def test_span_matching_matches_reference(comps):
    K = len(comps)
    y = correctness_reward(["p"] * K, comps, **cols(K))
    out = calibration_reward(["p"] * K, comps, num_generations=K, eps=EPS, **cols(K))
    ry, rout = reference_rcal(comps, "Paris", Q, 0.5)
    assert y == ry
    assert out == pytest.approx(rout, abs=1e-12)


# ------------------------------------------------------------------------------------------------ adversaries


def test_issue_table_padding_paid_before_and_not_now():
    """The issue's table (λ = ½, K = 8): under whole-line matching padding every wrong guess with 1–5 random
    words beats the honest consistent guess; under the default short-answer matching it earns exactly the same."""
    before = ADV.policy_table(match="line", n_groups=40)
    after = ADV.policy_table(n_groups=40)
    for a in (0.0, 0.1, 0.5):
        assert before[a]["transformed"] > before[a]["honest"] + 0.05, a
        assert after[a]["transformed"] <= after[a]["honest"] + 1e-12, a
    assert after[0.0]["honest"] == pytest.approx(-0.5, abs=1e-3)  # all agree, all wrong: λ·(−1)


@pytest.mark.parametrize("adversary", list(ADV.ADVERSARIES))
def test_no_adversary_pays_for_a_policy(adversary):
    after = ADV.policy_table(accuracies=(0.0, 0.25), n_groups=12, adversary=adversary, seed=3)
    for a, v in after.items():
        assert v["transformed"] <= v["honest"] + 1e-12, (adversary, a)


GROUPS = [
    # honest consistent wrong guess with some right answers
    ["Paris", "Paris", "Lyon", "Lyon", "Lyon", "Lyon", "Paris", "Lyon"],
    # distinct wrong answers (nothing to gain: they already disagree)
    ["Lyon", "Nice", "Rome", "Berlin"],
    # multi-word wrong answers, a gold with chatter in the group
    ["New York", "new york", "Paris, I believe", "Los Angeles"],
]


@pytest.mark.parametrize("adversary", list(ADV.ADVERSARIES))
@pytest.mark.parametrize("g", range(len(GROUPS)))
def test_no_adversary_pays_unilaterally(adversary, g):
    group = GROUPS[g]
    wrong = [j for j, c in enumerate(group) if correctness_reward(["p"], [c], **cols(1)) == [0.0]]
    for j in wrong[:2]:
        gain = ADV.deviation_gain(adversary, group, j, "Paris", Q, n_draws=5)
        assert gain <= 1e-12, (adversary, group, j, gain)


def test_whole_line_matching_is_gamed_unilaterally():
    """The check can fail: under whole-line matching a padded copy of the repeated wrong guess gains."""
    gain = ADV.deviation_gain("suffix_3", GROUPS[0], 2, "Paris", Q, match="line", n_draws=5)
    assert gain > 0.05


def test_gold_with_chatter_is_correct_and_agrees_with_the_bare_gold():
    rng = np.random.default_rng(0)
    chatter = ADV.transform("gold_chatter", "Paris", Q, rng)
    comps = ["Paris", chatter, "Lyon", "Lyon"]
    assert correctness_reward(["p"] * 4, comps, **cols(4)) == [1.0, 1.0, 0.0, 0.0]
    out = calibration_reward(["p"] * 4, comps, num_generations=4, eps=EPS, **cols(4))
    # each sees one agreeing partner (the other) and two disagreeing ones
    one_of_three = 0.5 * (math.log(1 - EPS) + 2 * math.log(EPS)) / 3 / math.log(1 / EPS)
    assert out[0] == pytest.approx(one_of_three, abs=1e-12) and out[1] == pytest.approx(one_of_three, abs=1e-12)
    # the same for a two-word gold and chatter after it
    c2 = correctness_reward(["p"] * 2, ["Barack Obama was the president", "Obama"],
                            answers=[["Barack Obama"]] * 2, question=["Who was president?"] * 2)
    assert c2 == [1.0, 1.0]


def test_repeating_the_question_is_no_answer():
    out = calibration_reward(["p"] * 3, [Q, Q.upper(), "Lyon"], num_generations=3, eps=EPS, **cols(3))
    assert out[0] == out[1] == pytest.approx(-0.5)  # empty key: the worst value, like an empty answer
    assert correctness_reward(["p"] * 2, [Q, Q + " Paris"], **cols(2)) == [0.0, 1.0]


def test_unknown_match_is_a_clear_error():
    with pytest.raises(ValueError, match="reward.match"):
        correctness_reward(["p"], ["Paris"], match="fuzzy", **cols(1))
