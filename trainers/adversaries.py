"""Surface tricks a policy can play on the CSR reward, and the expected-reward check that none of them pays.

An adversary transforms one answer string (keeping its meaning): random-word suffixes of 1–5 words, the question
repeated before or after the answer, case and punctuation variants. ``gold_chatter`` is the one transformation
of a *correct* answer: the gold followed by chatter, which must stay correct and agree with the bare gold.

:func:`policy_table` reproduces the issue-22 table: total reward r_RLVR + λ·r_cal per rollout of a policy that is
right with probability a and otherwise gives one consistent wrong guess ("honest") or that guess padded with
random words ("padded"), averaged over simulated groups; :func:`deviation_gain` is the unilateral version (one
wrong rollout of a group transformed, the others not). Both call the trainer's own reward functions.
"""

from __future__ import annotations

import numpy as np

from trainers import rewards as R

__all__ = ["WORDS", "ADVERSARIES", "transform", "policy_table", "deviation_gain"]

#: Filler vocabulary for random suffixes: ordinary words that name no answer of the simulations.
WORDS = tuple(
    "apple river stone cloud garden window silver morning candle forest yellow bridge engine pocket summer "
    "thunder marble copper velvet meadow harbor lantern pepper saddle violin walnut feather glacier hammer "
    "island jungle kettle ladder magnet needle orchard pillow quartz ribbon shadow timber umbrella valley "
    "wagon yarn zipper anchor basket cactus dolphin eagle falcon goblet helmet igloo jacket koala lemon".split()
)

_PUNCT_SUFFIX = ("!", "?", ".", "...", ",", ";")


def _suffix(n: int):
    def f(answer: str, question: str, rng: np.random.Generator) -> str:
        return answer + " " + " ".join(rng.choice(WORDS, size=n))

    f.__name__ = f"suffix_{n}"
    return f


def _question_before(answer, question, rng):
    return f"{question} {answer}"


def _question_after(answer, question, rng):
    return f"{answer} {question}"


def _upper(answer, question, rng):
    return answer.upper()


def _lower(answer, question, rng):
    return answer.lower()


def _punct(answer, question, rng):
    return f'"{answer}"{rng.choice(_PUNCT_SUFFIX)}'


def _spaced_punct(answer, question, rng):
    return "-".join(answer.split()) + "."  # "New York" → "New-York."


def _gold_chatter(answer, question, rng):
    return f"{answer}, I think, but I am not sure about it"


#: name → f(answer, question, rng) → transformed answer (same meaning)
ADVERSARIES = {
    **{f"suffix_{n}": _suffix(n) for n in range(1, 6)},
    "question_before": _question_before,
    "question_after": _question_after,
    "upper": _upper,
    "lower": _lower,
    "punct": _punct,
    "hyphenated": _spaced_punct,
}


def transform(name: str, answer: str, question: str, rng: np.random.Generator) -> str:
    """Apply adversary ``name`` (a key of :data:`ADVERSARIES`, or ``gold_chatter``) to one answer."""
    if name == "gold_chatter":
        return _gold_chatter(answer, question, rng)
    if name not in ADVERSARIES:
        raise ValueError(f"unknown adversary {name!r}; choose one of {', '.join(ADVERSARIES)} or gold_chatter")
    return ADVERSARIES[name](answer, question, rng)


def _rewards(comps, gold, question, lam, K, match, score="log"):
    n = len(comps)
    cols = dict(answers=[[gold]] * n, question=[question] * n)
    y = np.asarray(R.correctness_reward([question] * n, comps, match=match, **cols))
    cal = np.asarray(R.calibration_reward([question] * n, comps, num_generations=K, lambda_schedule="constant",
                                          lambda_max=lam, match=match, score=score, **cols))
    return y + cal


def policy_table(
    accuracies=(0.0, 0.1, 0.5), lam: float = 0.5, n_groups: int = 300, K: int = 8, match: str = R.DEFAULT_MATCH,
    seed: int = 0, adversary: str = "suffix_random", question: str = "What is the capital of France?",
    gold: str = "Paris", guess: str = "Lyon", score: str = "log",
) -> dict[float, dict[str, float]]:
    """Mean total reward per rollout, ``{a: {"transformed": ..., "honest": ...}}``, over ``n_groups`` groups of
    K rollouts, each right ("Paris") with probability a, else the consistent wrong guess ("Lyon"); in the
    transformed policy every wrong guess goes through ``adversary`` (``suffix_random``: a suffix of 1–5 random
    words, the issue's "padded" policy). Groups share their random draws between the two policies. ``score``: the
    calibration score (:func:`trainers.rewards.group_calibration_scores`)."""
    out = {}
    for a in accuracies:
        rng = np.random.default_rng(seed)
        tot_t, tot_h = 0.0, 0.0
        for _ in range(n_groups):
            right = rng.random(K) < a
            honest = [gold if r else guess for r in right]
            if adversary == "suffix_random":
                padded = [h if r else _suffix(int(rng.integers(1, 6)))(h, question, rng) for h, r in zip(honest, right)]
            else:
                padded = [h if r else transform(adversary, h, question, rng) for h, r in zip(honest, right)]
            tot_h += float(_rewards(honest, gold, question, lam, K, match, score).mean())
            tot_t += float(_rewards(padded, gold, question, lam, K, match, score).mean())
        out[float(a)] = {"transformed": tot_t / n_groups, "honest": tot_h / n_groups}
    return out


def deviation_gain(
    adversary: str, group: list[str], j: int, gold: str, question: str, lam: float = 0.5,
    match: str = R.DEFAULT_MATCH, n_draws: int = 20, seed: int = 0, score: str = "log",
) -> float:
    """E[total reward of rollout j after ``adversary`` transforms it] − its reward untransformed, the other
    rollouts of ``group`` unchanged; expectation over ``n_draws`` draws of the adversary's randomness."""
    K = len(group)
    base = float(_rewards(group, gold, question, lam, K, match, score)[j])
    rng = np.random.default_rng(seed)
    got = []
    for _ in range(n_draws):
        g = list(group)
        g[j] = transform(adversary, g[j], question, rng)
        got.append(float(_rewards(g, gold, question, lam, K, match, score)[j]))
    return float(np.mean(got)) - base
