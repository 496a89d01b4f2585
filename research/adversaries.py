"""Expected-reward checks of the trainer's reward functions against the named tricks of
:data:`research.answer_grammar.GRAMMAR`.

:func:`policy_table` (a policy right with probability a, otherwise one consistent wrong guess, honest or through a
trick) and :func:`deviation_gain` (one wrong rollout of a group rewritten, the others not) run the trainer's own
reward functions with a shipped config's reward options (:func:`reward_options`), and report the correctness
term and the calibration term separately (tests/test_rd_adversaries.py, tests/test_rd_reward_adversaries.py).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

import trainers
from research.answer_grammar import transform

__all__ = ["reward_options", "group_rewards", "policy_table", "deviation_gain"]


# ----------------------------------------------------------------------------------------------------------
# expected-reward checks through the trainer's reward functions

_CONFIGS = Path(trainers.__file__).resolve().parent / "configs"


def reward_options(method_or_path: str) -> dict:
    """The calibration reward's options as a shipped config sets them (``csr``, ``csr_likelihood``,
    ``csr_spread`` or a YAML path): ``method``, ``num_generations`` and ``settings``, the config's typed
    :class:`trainers.config.RewardSettings` that :func:`trainers.rewards.calibration_reward` takes."""
    from trainers.config import load_config

    p = Path(method_or_path)
    path = p if p.suffix in (".yaml", ".yml") else _CONFIGS / f"{method_or_path}.yaml"
    cfg = load_config(path)
    return {"method": cfg.method, "num_generations": cfg.grpo["num_generations"], "settings": cfg.reward}


def group_rewards(comps: list[str], gold: str, question: str, options: dict, lam: float | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(correctness term, calibration term λ·r_cal) of one group of rollouts under ``options``
    (:func:`reward_options`); ``lam`` fixes λ (else the config's λ at the end of training)."""
    from trainers.rewards import calibration_reward, correctness_reward

    n = len(comps)
    cols = dict(answers=[[gold]] * n, question=[question] * n)
    y = np.asarray(correctness_reward([question] * n, comps, **cols), float)
    if options["method"] == "rlvr":
        return y, np.zeros(n)
    settings = options["settings"]
    if lam is not None:
        settings = replace(settings, lambda_schedule="constant", lambda_max=float(lam), lambda_min=0.0)
    cal = np.asarray(calibration_reward([question] * n, comps, settings=settings, num_generations=n, **cols), float)
    return y, cal


def policy_table(
    options: dict | str = "csr", accuracies=(0.0, 0.1, 0.5), lam: float | None = None, n_groups: int = 300,
    K: int = 8, seed: int = 0, adversary: str = "suffix_random", question: str = "What is the capital of France?",
    gold: str = "Paris", guess: str = "Lyon",
) -> dict[float, dict[str, float]]:
    """Mean reward per rollout over ``n_groups`` groups of K rollouts, each right ("Paris") with probability a,
    else the consistent wrong guess ("Lyon"); in the tricked policy every wrong guess goes through ``adversary``
    (``suffix_random``: 1–5 random words). Groups share their random draws between the two policies.

    Returns ``{a: {"transformed", "honest", "transformed_correct", "honest_correct", "transformed_cal",
    "honest_cal"}}``: total, correctness term and calibration term."""
    opts = reward_options(options) if isinstance(options, str) else options
    out = {}
    for a in accuracies:
        rng = np.random.default_rng(seed)
        acc = {k: 0.0 for k in ("transformed_correct", "transformed_cal", "honest_correct", "honest_cal")}
        for _ in range(n_groups):
            right = rng.random(K) < a
            honest = [gold if r else guess for r in right]
            if adversary == "suffix_random":
                tricked = [h if r else transform(f"suffix_{int(rng.integers(1, 6))}", h, question, rng)
                           for h, r in zip(honest, right)]
            else:
                tricked = [h if r else transform(adversary, h, question, rng, gold=gold) for h, r in zip(honest, right)]
            for key, comps in (("honest", honest), ("transformed", tricked)):
                y, c = group_rewards(comps, gold, question, opts, lam)
                acc[f"{key}_correct"] += float(y.mean()) / n_groups
                acc[f"{key}_cal"] += float(c.mean()) / n_groups
        acc["honest"] = acc["honest_correct"] + acc["honest_cal"]
        acc["transformed"] = acc["transformed_correct"] + acc["transformed_cal"]
        out[float(a)] = acc
    return out


def deviation_gain(
    adversary: str, group: list[str], j: int, gold: str, question: str, options: dict | str = "csr",
    lam: float | None = None, n_draws: int = 20, seed: int = 0,
) -> tuple[float, float]:
    """E[reward of rollout j after ``adversary`` rewrites it] − its reward as it is, the other rollouts of
    ``group`` unchanged, over ``n_draws`` draws of the trick's randomness: ``(correctness gain, calibration
    gain)``."""
    opts = reward_options(options) if isinstance(options, str) else options
    y0, c0 = group_rewards(group, gold, question, opts, lam)
    rng = np.random.default_rng(seed)
    gy, gc = [], []
    for _ in range(n_draws):
        g = list(group)
        g[j] = transform(adversary, g[j], question, rng, gold=gold)
        y, c = group_rewards(g, gold, question, opts, lam)
        gy.append(y[j] - y0[j])
        gc.append(c[j] - c0[j])
    return float(np.mean(gy)), float(np.mean(gc))
