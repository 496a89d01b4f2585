"""`method: csr` with the shipped trainers/configs/csr.yaml computes the paper's reward (issue 31 item 1).

The reference below is written from the paper's formula alone, with plain Python loops and the agreement classes
of each hand-worked group written out by hand (which answers are "the same answer", which is correct):

    r_j = y_j + λ(t) · (1/(K−1)) Σ_{i≠j} [ y_j·log a_ji + (1 − y_j)·log(1 − a_ji) ],  a_ji = clip(J_ji, ε, 1−ε)

with λ(t) = λ_max · step / max_steps. The rewards under test are the trainer's own, built from the shipped
config by trainers.train.build_reward_funcs and called as TRL calls them.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from trainers.config import load_config
from trainers.train import build_reward_funcs

CONFIGS = Path(__file__).resolve().parents[1] / "trainers" / "configs"
Q = "What is the capital of France?"

#: (answers, gold, correct by hand, claims by hand: two answers agree when their labels share a letter; None
#: agrees with nothing). The judge is the cover judge (semcal_eval.qa.grading): a sentence that states the gold
#: is the gold; a hedged answer is wrong but makes the same claim as the bare one; an enumeration is wrong and
#: makes each of its claims (it agrees with each member, and the members not with each other); J is reflexive,
#: so identical answers agree, empty ones included (the paper's J; semcal's rule before issue 41 made them
#: disagree)
GROUPS = [
    # the review's group: a sentence that states the gold is the gold; an enumeration is wrong
    (["Paris", "Paris", "Paris is the capital", "Lyon", "Lyon", "Lyon and Nice", "Nice", ""], "Paris",
     [1, 1, 1, 0, 0, 0, 0, 0], ["P", "P", "P", "L", "L", "LN", "N", None]),
    # spelling variants are the same answer (folding); a hedge is wrong and claims the same; two empties agree
    (["Lyon", "LYÓN!", "L\u0443on", "maybe Lyon", "Paris.", "The answer is Paris", "", ""], "Paris",
     [0, 0, 0, 0, 1, 1, 0, 0], ["L", "L", "L", "L", "P", "P", "E", "E"]),
    # all right, all one wrong answer repeated, all empty (eight empties agree: the group repeats one answer)
    (["Paris"] * 8, "Paris", [1] * 8, ["P"] * 8),
    (["Rome"] * 8, "Paris", [0] * 8, ["R"] * 8),
    ([""] * 8, "Paris", [0] * 8, ["E"] * 8),
    # yes/no: listing both is wrong, and claims both
    (["yes", "yes, no", "yes, no", "no", "Yes.", "yes or no", "no", "yes"], "yes",
     [1, 0, 0, 0, 1, 0, 0, 1], ["y", "yn", "yn", "n", "y", "yn", "n", "y"]),
]


def paper_reward(correct, classes, lam, eps):
    K = len(correct)
    out = []
    for j in range(K):
        s = 0.0
        for i in range(K):
            if i == j:
                continue
            agree = 1.0 if classes[j] is not None and classes[i] is not None and set(classes[j]) & set(
                classes[i]) else 0.0
            a = min(max(agree, eps), 1 - eps)
            s += correct[j] * math.log(a) + (1 - correct[j]) * math.log(1 - a)
        out.append(correct[j] + lam * s / (K - 1))
    return out


def trainer_reward(cfg, answers, gold, state=None):
    funcs, weights = build_reward_funcs(cfg)
    n = len(answers)
    cols = dict(answers=[[gold]] * n, question=[Q] * n)
    comps = [" " + a for a in answers]
    parts = [f([Q] * n, comps, trainer_state=state, **cols) for f in funcs]
    return [sum(w * p[k] for w, p in zip(weights, parts, strict=True)) for k in range(n)]


@pytest.mark.parametrize("g", range(len(GROUPS)))
def test_shipped_csr_is_the_papers_reward_on_hand_worked_groups(g):
    cfg = load_config(CONFIGS / "csr.yaml")
    answers, gold, correct, classes = GROUPS[g]
    r = cfg.reward
    assert (cfg.method, r.score, r.reading, r.lambda_schedule, r.lambda_min) == \
        ("csr", "log", "pairwise", "linear", 0.0)
    for step, max_steps in ((0, 100), (30, 100), (100, 100)):
        state = SimpleNamespace(global_step=step, max_steps=max_steps)
        lam = r.lambda_max * step / max_steps
        want = paper_reward(correct, classes, lam, r.eps)
        got = trainer_reward(cfg, answers, gold, state)
        assert got == pytest.approx(want, abs=1e-12), (step, answers)


def test_review_group_numbers():
    """The review's group: the shipped reward now *charges* each correct rollout for its disagreeing partners
    (before: +1.667 each). By hand at λ = 0.1, ε = 10⁻³: a correct "Paris" has 2 agreeing ("Paris", "Paris is
    the capital") and 5 disagreeing partners: r = 1 + 0.1·(2·log 0.999 + 5·log 0.001)/7. The list "Lyon and
    Nice" agrees with both Lyons and the Nice: charged 3·log ε of 7, more than a Lyon (2 agreeing partners)."""
    cfg = load_config(CONFIGS / "csr.yaml")
    answers, gold, _, _ = GROUPS[0]
    got = trainer_reward(cfg, answers, gold)
    assert got[0] == pytest.approx(1 + 0.1 * (2 * math.log(0.999) + 5 * math.log(0.001)) / 7, abs=1e-12)
    assert got[0] < 1.0
    assert got[5] == pytest.approx(0.1 * (3 * math.log(0.001) + 4 * math.log(0.999)) / 7, abs=1e-12)
    assert got[5] < got[3]
    # the one empty answer, as the formula gives it: it agrees with nobody here, r_cal = log(1 − ε) ≈ 0
    assert got[7] == pytest.approx(0.1 * math.log(0.999), abs=1e-12)
    # eight empty answers agree with each other (J reflexive): each is charged like a repeated wrong answer,
    # r_cal = log ε, no longer the best wrong answer
    empty = trainer_reward(cfg, [""] * 8, gold)
    assert empty == pytest.approx([0.1 * math.log(0.001)] * 8, abs=1e-12)


def test_every_correct_rollout_outearns_every_wrong_one_at_the_shipped_lambda():
    """λ_max < 1/log(1/ε): the worst correct reward (1 + λ·log ε) beats the best wrong one (λ·log(1 − ε))."""
    cfg = load_config(CONFIGS / "csr.yaml")
    lam, eps = cfg.reward.lambda_max, cfg.reward.eps
    assert 1 + lam * math.log(eps) > lam * math.log(1 - eps)
    for answers, gold, correct, _ in GROUPS:
        r = trainer_reward(cfg, answers, gold)
        right = [x for x, y in zip(r, correct, strict=True) if y]
        wrong = [x for x, y in zip(r, correct, strict=True) if not y]
        if right and wrong:
            assert min(right) > max(wrong)


@pytest.mark.parametrize("method,score", [("csr", "likelihood"), ("csr", "likelihood_spread"),
                                          ("csr_spread", "log"), ("csr_likelihood", "likelihood_spread")])
def test_a_method_name_cannot_carry_another_methods_reward(method, score):
    with pytest.raises(ValueError, match="promises reward.score"):
        load_config(CONFIGS / "csr.yaml", overrides=[f"method={method}", f"reward.score={score}"])


@pytest.mark.parametrize("key,value", [("bounded", "true"), ("empty_answer", "worst"), ("agreement_wrong", "overlap"),
                                       ("eps", "0.01"), ("lambda_max", "0.05")])
def test_every_documented_reward_option_is_settable_from_a_config(key, value):
    """(``reading: rollout`` and ``score: brier`` are research options of the reward functions: no method name
    promises them, so a config refuses them — test_a_method_name_cannot_carry_another_methods_reward.)"""
    cfg = load_config(CONFIGS / "csr.yaml", overrides=[f"reward.{key}={value}"])
    funcs, _ = build_reward_funcs(cfg)
    bound = getattr(funcs[1].keywords["settings"], key)
    assert str(bound).lower() == value or bound == float(value)
