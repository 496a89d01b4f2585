"""Issue 22, item 2: λ(t) schedules in every generation batch at the shipped configs' batch sizes.

Advantages are TRL 1.16's (research.advantages.grpo_advantages, checked against a real GRPOTrainer step's logged
advantages in tests/test_reward_lab.py::test_grpo_advantages_match_trl) of the rewards the real
``build_reward_funcs`` returns for csr.yaml (the paper's BCE, λ linear 0 → 0.1), csr_spread.yaml,
csr_likelihood.yaml and rlvr.yaml, on one generation batch of csr.yaml's size
(per_device_train_batch_size × steps_per_generation = 8 × 4 = 32 completions = 4 prompts × K = 8)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from trainers import config as tcfg
from research.advantages import grpo_advantages
from trainers.train import build_reward_funcs

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = [("Capital of France?", ["Paris"]), ("Largest US city?", ["New York", "NYC"]),
             ("Author of Emma?", ["Jane Austen"]), ("Red planet?", ["Mars"])]
WRONG = {0: ["Lyon"] * 5 + ["Nice", "Rome", ""], 1: ["Chicago"] * 3 + ["Boston"] * 3 + ["LA", "Houston"],
         2: ["Charlotte Bronte"] * 8, 3: ["Venus", "Jupiter", "Saturn", "Venus", "Venus", "Pluto", "Moon", "Sun"]}
#: every answer correct under the strict grader (a gold alias, dressed at most by case, punctuation or a lead-in);
#: "NYC" and "New York" are both gold aliases, but the strict judge does not call them the same answer
RIGHT = {0: ["Paris"] * 8, 1: ["NYC"] * 6 + ["New York"] * 2, 2: ["Jane Austen"] * 7 + ["The answer is Jane Austen."],
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


#: csr.yaml's schedule, written out (the paper's: λ linear from 0 to 0.1 over max_steps)
LAMBDA_MAX = 0.1


def _cfg(name: str, *over: str) -> tcfg.TrainConfig:
    return tcfg.load_config(ROOT / f"trainers/configs/{name}.yaml", list(over))


def _adv(cfg: tcfg.TrainConfig, kind: str, step: int) -> np.ndarray:
    funcs, weights = build_reward_funcs(cfg)
    prompts, comps, cols = _batch(kind)
    st = SimpleNamespace(global_step=step, max_steps=cfg.grpo["max_steps"])
    rpf = np.array([f(prompts, comps, None, st, **cols) for f in funcs], dtype=float).T
    return grpo_advantages(rpf, cfg.grpo["num_generations"], weights, cfg.grpo["scale_rewards"])


def test_generation_batch_is_the_configs():
    from trl import GRPOConfig

    g = _cfg("csr").grpo
    args = GRPOConfig(output_dir="/tmp/x", use_cpu=True, report_to=[], activation_checkpointing=False,
                      num_generations=g["num_generations"], per_device_train_batch_size=g["per_device_train_batch_size"],
                      gradient_accumulation_steps=g["gradient_accumulation_steps"])
    assert args.generation_batch_size == len(_batch("mixed")[1]) == 32


def test_the_batches_are_what_they_say():
    from trainers.rewards import correctness_reward

    for kind, want in (("wrong", 0.0), ("right", 1.0)):
        prompts, comps, cols = _batch(kind)
        assert set(correctness_reward(prompts, comps, **cols)) == {want}, kind
    prompts, comps, cols = _batch("mixed")
    assert correctness_reward(prompts, comps, **cols) == ([1.0] * 4 + [0.0] * 4) * 4


@pytest.mark.parametrize("kind", ["wrong", "right", "mixed"])
def test_csr_equals_rlvr_at_lambda_zero_and_grows_with_lambda(kind):
    """csr.yaml as shipped: CSR = RLVR at step 0 (λ = 0); after, the calibration part of the advantage is
    λ·(r_cal − group mean), exactly linear in λ = 0.1·t, in every batch — the all-right one included, where the
    correct "NYC" and "New York" rollouts disagree under the strict judge and the BCE charges each of them."""
    csr, rlvr = _cfg("csr"), _cfg("rlvr")
    r = csr.reward
    assert (csr.method, r.score, r.reading, r.bounded, r.lambda_schedule, r.lambda_min,
            r.lambda_max) == ("csr", "log", "pairwise", False, "linear", 0.0, LAMBDA_MAX)
    assert csr.grpo["scale_rewards"] == rlvr.grpo["scale_rewards"] == "none"
    base = _adv(rlvr, kind, 0)
    assert np.abs(_adv(csr, kind, 0) - base).max() <= 1e-9  # λ(0) = 0
    steps = [1, 50, 250, 500]  # λ = 0.1·t: 0.0002, 0.01, 0.05, 0.1
    dev = [np.abs(_adv(csr, kind, s) - base).max() for s in steps]
    assert all(b > a for a, b in zip(dev, dev[1:])), dev
    lams = np.array(steps) / 500 * LAMBDA_MAX
    # unscaled: the calibration part of the advantage is exactly λ·(r_cal − group mean), linear in λ
    assert np.array(dev) / lams == pytest.approx([dev[-1] / lams[-1]] * 4, rel=1e-6)
    assert dev[0] < 0.01  # λ = 0.0002 moves nothing by more than 1 %
    if kind == "right":
        # only the NYC / New York group moves: the others agree throughout and r_cal is the same for all
        adv = (_adv(csr, kind, 500) - base).reshape(4, 8)
        assert np.abs(adv[[0, 2, 3]]).max() <= 1e-12 and np.abs(adv[1]).max() > 0
        # by hand: "New York" (2 of 8) agrees with 1 of 7 partners, "NYC" (6 of 8) with 5 of 7; correct rollouts
        # score log a per partner, log(1 − ε) for agreeing and log ε for not: r = ((k·log(1 − ε) + (7 − k)·log ε)/7
        e = r.eps
        nyc = (5 * np.log1p(-e) + 2 * np.log(e)) / 7
        ny = (1 * np.log1p(-e) + 6 * np.log(e)) / 7
        mean = (6 * nyc + 2 * ny) / 8
        assert adv[1] == pytest.approx(LAMBDA_MAX * (np.array([nyc] * 6 + [ny] * 2) - mean), abs=1e-12)


def test_batch_scaling_cancels_lambda_in_an_all_wrong_batch():
    """The issue's finding, kept as the reason for the default: with scale_rewards: batch, λ = 0.0002 already
    gives O(1) advantages in an all-wrong batch, about as large as λ = 0.1."""
    csr = _cfg("csr", "grpo.scale_rewards=batch")
    small, full = np.abs(_adv(csr, "wrong", 1)).max(), np.abs(_adv(csr, "wrong", 500)).max()
    assert small > 0.3 and full / small < 3
    # the default scaling: 500× smaller λ, 500× smaller advantages
    csr = _cfg("csr")
    small, full = np.abs(_adv(csr, "wrong", 1)).max(), np.abs(_adv(csr, "wrong", 500)).max()
    assert full / small == pytest.approx(500, rel=1e-3)


@pytest.mark.parametrize("kind", ["wrong", "right", "mixed"])
def test_spread_schedules_in_every_batch(kind):
    """csr_spread.yaml's likelihood_spread score, its λ ≡ 1 put on a linear schedule 0 → 1: CSR = RLVR at λ = 0;
    after, the calibration part of the advantage is λ·(r_cal − group mean), linear in λ, in the all-wrong batch
    (the charge on shared wrong answers: this is where the likelihood score alone is silent) and in the mixed
    one; in the all-right batch r_cal = K/K − 1 = 0 for every rollout, so CSR stays RLVR there at every λ."""
    shipped = _cfg("csr_spread")
    assert (shipped.method, shipped.reward.score, shipped.reward.lambda_schedule) == (
        "csr_spread", "likelihood_spread", "constant")
    csr, rlvr = _cfg("csr_spread", "reward.lambda_schedule=linear"), _cfg("rlvr")
    assert csr.reward.score == "likelihood_spread" and csr.reward.lambda_max == 1.0
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
    """csr_likelihood.yaml's likelihood score, its λ ≡ 1 put on a linear schedule 0 → 1: CSR = RLVR at λ = 0; in
    all-wrong and all-right batches r_cal is 0 for every rollout (nothing to share out), so CSR stays RLVR there
    at every λ; in the mixed batch the calibration part is λ·(r_cal − group mean), linear in λ."""
    shipped = _cfg("csr_likelihood")
    assert (shipped.method, shipped.reward.score, shipped.reward.lambda_schedule) == (
        "csr_likelihood", "likelihood", "constant")
    csr, rlvr = _cfg("csr_likelihood", "reward.lambda_schedule=linear"), _cfg("rlvr")
    assert csr.reward.score == "likelihood" and csr.reward.lambda_max == 1.0
    base = _adv(rlvr, kind, 0)
    steps = [0, 1, 50, 250, 500]
    dev = np.array([np.abs(_adv(csr, kind, s) - base).max() for s in steps])
    if kind != "mixed":
        assert dev.max() <= 1e-9
        return
    assert dev[0] <= 1e-9 and dev[1] < 0.01
    lams = np.array(steps[1:]) / 500
    assert dev[1:] / lams == pytest.approx([dev[-1]] * 4, rel=1e-4)
