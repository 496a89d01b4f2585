"""The adversary search over the shipped training rewards (tests/test_reward_adversary_search.py and
benchmarks/adversary_search.py).

A *world* is a set of groups of K rollouts to one question, drawn from an honest policy that is right with
probability ``accuracy`` and otherwise gives a wrong guess (its favourite wrong answer 70 % of the time, another
30 %). An *attack* (research/answer_grammar.py) rewrites the answer of one rollout per group; the attacked rollout's
reward is compared with its honest reward in the same group, every other rollout unchanged. The rewards are the
real ones: :func:`trainers.train.build_reward_funcs` of the shipped config of each method, called as TRL calls
them. The pay is split into the correctness term (r_RLVR, or RLCR's/RD's correctness inside their reward) and
the rest (λ(t)·r_cal for the CSR methods, the format and calibration terms for RLCR and RD).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainers import rewards as R
from trainers.config import load_config
from trainers.train import build_reward_funcs

from research import answer_grammar as G

#: the checkout whose trainers package is imported (its shipped configs; another one with PYTHONPATH)
REPO = Path(sys.modules[load_config.__module__].__file__).resolve().parents[1]
METHODS = ("csr", "csr_likelihood", "csr_spread", "rlvr", "rlcr", "rd")
ACCURACIES = (0.0, 0.1, 0.3, 0.5)
QUESTION = "What is the capital of France?"
GOLD = "Paris"
FAVOURITE = "Lyon"
OTHER_WRONG = ("Marseille", "Nice", "Toulouse", "London")


@dataclass
class Pay:
    """Mean reward change of the attacked rollout over the honest one: total, correctness term, the rest."""

    total: float
    correctness: float
    rest: float
    max_correctness: float  # the largest single-group correctness change (must be ≤ 0)


def shipped(method: str, K: int = 8):
    """The shipped config of ``method`` (a trainers.config.TrainConfig) with groups of K rollouts."""
    return load_config(REPO / "trainers" / "configs" / f"{method}.yaml", [f"grpo.num_generations={K}"])


def honest_groups(accuracy: float, K: int, n_groups: int, seed: int) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    groups = []
    for _ in range(n_groups):
        g = []
        for _ in range(K):
            if rng.random() < accuracy:
                g.append(GOLD)
            elif rng.random() < 0.7:
                g.append(FAVOURITE)
            else:
                g.append(OTHER_WRONG[int(rng.integers(len(OTHER_WRONG)))])
        groups.append(g)
    return groups


def _format(method: str, answer: str) -> str:
    if method == "rlcr":
        return f"<think>t</think><answer>{answer}</answer><analysis>a</analysis><confidence>0.5</confidence>"
    if method == "rd":
        return f"Answer: {answer}, Confidence: 5"
    return " " + answer


def _rewards(method: str, funcs, groups: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
    """(total, correctness) reward of every rollout, G×K, at full λ (no trainer state: t = 1)."""
    K = len(groups[0])
    comps = [_format(method, a) for g in groups for a in g]
    n = len(comps)
    cols = dict(answers=[[GOLD]] * n, question=[QUESTION] * n)
    fns, weights = funcs
    per = [np.asarray(f([QUESTION] * n, comps, **cols), dtype=float) * w for f, w in zip(fns, weights, strict=True)]
    total = np.sum(per, axis=0)
    # the grade of each plain answer, through the public RLVR reward (the same function in every version)
    correct = np.asarray(R.correctness_reward([QUESTION] * n, [" " + c for g in groups for c in g], **cols))
    # RLCR weighs its correctness term ½; RD's correctness sits inside its one log-score reward, so its
    # correctness pay is read as the change of the grade itself
    corr_term = 0.5 * correct if method == "rlcr" else correct
    return total.reshape(-1, K), corr_term.reshape(-1, K)


def attack_pay(method: str, program, accuracy: float, K: int = 8, n_groups: int = 40, seed: int = 0,
               who: str = "wrong", cfg=None) -> Pay:
    """The attacked rollout's mean reward change. ``who``: which rollout is attacked — the first ``wrong``
    one (groups without one are skipped), the first ``correct`` one, or ``any`` (rollout 0)."""
    funcs = build_reward_funcs(cfg or shipped(method, K))
    honest = honest_groups(accuracy, K, n_groups, seed)
    attacked, picks = [], []
    for g in honest:
        if who == "any":
            j = 0
        else:
            want = who == "correct"
            js = [i for i, a in enumerate(g) if (a == GOLD) == want]
            if not js:
                continue
            j = js[0]
        h = list(g)
        h[j] = G.run(program, g[j], GOLD, QUESTION)
        attacked.append(h)
        picks.append(j)
    if not attacked:
        return Pay(0.0, 0.0, 0.0, 0.0)
    keep = [g for g in honest if (who == "any") or any((a == GOLD) == (who == "correct") for a in g)]
    t0, c0 = _rewards(method, funcs, keep)
    t1, c1 = _rewards(method, funcs, attacked)
    rows = np.arange(len(picks))
    dt, dc = t1[rows, picks] - t0[rows, picks], c1[rows, picks] - c0[rows, picks]
    return Pay(float(dt.mean()), float(dc.mean()), float((dt - dc).mean()), float(dc.max()))


def scatter_pay(method: str, accuracy: float, K: int = 8, n_groups: int = 40, seed: int = 0) -> float:
    """Mean reward change of a wrong rollout that gives a unique noise answer instead of the group's favourite
    wrong answer (the paper's design pays wrong rollouts for disagreeing; this is the size of that pay)."""
    return attack_pay(method, [("garble", 7)], accuracy, K, n_groups, seed, who="wrong").rest
