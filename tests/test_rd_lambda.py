"""Issue 22, item 2: λ(t) schedules in every generation batch at the shipped configs' batch sizes.

Advantages are TRL 1.16's (trainers.reward_lab.grpo_advantages, checked against a real GRPOTrainer step's logged
advantages in tests/test_reward_lab.py::test_grpo_advantages_match_trl) of the rewards the real
``build_reward_funcs`` returns for csr.yaml / rlvr.yaml, on one generation batch of csr.yaml's size
(per_device_train_batch_size × steps_per_generation = 8 × 4 = 32 completions = 4 prompts × K = 8)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from trainers import config as tcfg
from trainers.reward_lab import grpo_advantages
from trainers.train import build_reward_funcs

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = [("Capital of France?", ["Paris"]), ("Largest US city?", ["New York", "NYC"]),
             ("Author of Emma?", ["Jane Austen"]), ("Red planet?", ["Mars"])]
WRONG = {0: ["Lyon"] * 5 + ["Nice", "Rome", ""], 1: ["Chicago"] * 3 + ["Boston"] * 3 + ["LA", "Houston"],
         2: ["Charlotte Bronte"] * 8, 3: ["Venus", "Jupiter", "Saturn", "Venus", "Venus", "Pluto", "Moon", "Sun"]}
RIGHT = {0: ["Paris"] * 8, 1: ["NYC"] * 6 + ["New York"] * 2, 2: ["Jane Austen"] * 7 + ["Austen"],
         3: ["Mars"] * 6 + ["mars.", "Mars!"]}


def _batch(kind: str):
    comps, prompts, answers, questions = [], [], [], []
    for i, (q, g) in enumerate(QUESTIONS):
        if kind == "wrong":
            c = WRONG[i]
        elif kind == "right":
            c = RIGHT[i]
        else:  # mixed: half of each
            c = RIGHT[i][:4] + WRONG[i][:4]
        comps += c
        prompts += [f"Q: {q}\nA:"] * 8
        answers += [g] * 8
        questions += [q] * 8
    return prompts, comps, dict(answers=answers, question=questions)


#: the paper's BCE score with its curriculum (λ linear 0 → ½): the csr.yaml option whose schedule these tests pin
BCE = ("reward.score=log", "reward.lambda_schedule=linear", "reward.lambda_max=0.5")


def _cfg(name: str, *over: str) -> dict:
    return tcfg.load_config(ROOT / f"trainers/configs/{name}.yaml", list(over))


def _adv(cfg: dict, kind: str, step: int) -> np.ndarray:
    funcs, weights = build_reward_funcs(cfg)
    prompts, comps, cols = _batch(kind)
    st = SimpleNamespace(global_step=step, max_steps=cfg["grpo"]["max_steps"])
    rpf = np.array([f(prompts, comps, None, st, **cols) for f in funcs], dtype=float).T
    return grpo_advantages(rpf, cfg["grpo"]["num_generations"], weights, cfg["grpo"]["scale_rewards"])


def test_generation_batch_is_the_configs():
    from trl import GRPOConfig

    g = _cfg("csr")["grpo"]
    args = GRPOConfig(output_dir="/tmp/x", use_cpu=True, report_to=[], activation_checkpointing=False,
                      num_generations=g["num_generations"], per_device_train_batch_size=g["per_device_train_batch_size"],
                      gradient_accumulation_steps=g["gradient_accumulation_steps"])
    assert args.generation_batch_size == len(_batch("mixed")[1]) == 32


@pytest.mark.parametrize("kind", ["wrong", "right", "mixed"])
def test_csr_equals_rlvr_at_lambda_zero_and_grows_with_lambda(kind):
    csr, rlvr = _cfg("csr", *BCE), _cfg("rlvr")
    assert csr["grpo"]["scale_rewards"] == rlvr["grpo"]["scale_rewards"] == "none"
    base = _adv(rlvr, kind, 0)
    assert np.abs(_adv(csr, kind, 0) - base).max() <= 1e-6  # λ(0) = 0
    steps = [1, 50, 250, 500]  # λ = ½·t: 0.001, 0.05, 0.25, 0.5
    dev = [np.abs(_adv(csr, kind, s) - base).max() for s in steps]
    assert all(b > a for a, b in zip(dev, dev[1:])), dev
    lams = np.array(steps) / 500 * 0.5
    # unscaled: the calibration part of the advantage is exactly λ·(r_cal − group mean), linear in λ
    assert np.array(dev) / lams == pytest.approx([dev[-1] / lams[-1]] * 4, rel=1e-4)
    assert dev[0] < 0.01  # λ = 0.001 moves nothing by more than 1 %


def test_batch_scaling_cancels_lambda_in_an_all_wrong_batch():
    """The issue's finding, kept as the reason for the default: with scale_rewards: batch, λ = 0.001 already
    gives O(1) advantages in an all-wrong batch, about as large as λ = ½."""
    csr = _cfg("csr", *BCE, "grpo.scale_rewards=batch")
    small, full = np.abs(_adv(csr, "wrong", 1)).max(), np.abs(_adv(csr, "wrong", 500)).max()
    assert small > 0.3 and full / small < 3
    # the default scaling: 500× smaller λ, 500× smaller advantages
    csr = _cfg("csr", *BCE)
    small, full = np.abs(_adv(csr, "wrong", 1)).max(), np.abs(_adv(csr, "wrong", 500)).max()
    assert full / small == pytest.approx(500, rel=1e-3)


@pytest.mark.parametrize("kind", ["wrong", "right", "mixed"])
def test_shipped_score_schedules_in_every_batch(kind):
    """csr.yaml's likelihood_spread score with λ linear 0 → 1: CSR = RLVR at λ = 0; after, the calibration part
    of the advantage is λ·(r_cal − group mean), linear in λ, in the all-wrong batch (the charge on shared wrong
    answers: this is where the likelihood score alone is silent) and in the mixed one; in the all-right batch
    r_cal = K/K − 1 = 0 for every rollout, so CSR stays RLVR there at every λ."""
    csr, rlvr = _cfg("csr", "reward.lambda_schedule=linear"), _cfg("rlvr")
    assert csr["reward"]["score"] == "likelihood_spread" and csr["reward"]["lambda_max"] == 1.0
    base = _adv(rlvr, kind, 0)
    steps = [0, 1, 50, 250, 500]
    dev = np.array([np.abs(_adv(csr, kind, s) - base).max() for s in steps])
    if kind == "right":
        assert dev.max() <= 1e-9
        return
    assert dev[0] <= 1e-9 and 0 < dev[1] < 0.01
    lams = np.array(steps[1:]) / 500
    assert dev[1:] / lams == pytest.approx([dev[-1]] * 4, rel=1e-4)
    if kind == "wrong":
        adv = _adv(csr, kind, 500).reshape(4, 8)
        # Lyon ×5 (shared wrong answer) is pushed below Nice/Rome (unshared); the empty answer lowest of all;
        # the one repeated answer (Charlotte Bronte ×8) is charged equally: no signal, like RLVR
        assert adv[0, 0] < adv[0, 5] and adv[0, 7] < adv[0, 0] and np.abs(adv[2]).max() <= 1e-12


@pytest.mark.parametrize("kind", ["wrong", "right", "mixed"])
def test_likelihood_score_schedules_in_every_batch(kind):
    """The likelihood score (option, the default before likelihood_spread) with λ linear 0 → 1: CSR = RLVR at
    λ = 0; in all-wrong and all-right batches r_cal is 0 for every rollout (nothing to share out), so CSR stays
    RLVR there at every λ; in the mixed batch the calibration part is λ·(r_cal − group mean), linear in λ."""
    csr, rlvr = _cfg("csr", "reward.lambda_schedule=linear", "reward.score=likelihood"), _cfg("rlvr")
    assert csr["reward"]["score"] == "likelihood" and csr["reward"]["lambda_max"] == 1.0
    base = _adv(rlvr, kind, 0)
    steps = [0, 1, 50, 250, 500]
    dev = np.array([np.abs(_adv(csr, kind, s) - base).max() for s in steps])
    if kind != "mixed":
        assert dev.max() <= 1e-9
        return
    assert dev[0] <= 1e-9 and dev[1] < 0.01
    lams = np.array(steps[1:]) / 500
    assert dev[1:] / lams == pytest.approx([dev[-1]] * 4, rel=1e-4)
