"""The reward lab (trainers/reward_lab.py): TRL's advantage, the lab's rewards = the trainer's, and a small lab run
that must show what docs/TRAINING.md claims (~10 s)."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from trainers import reward_lab as L
from trainers.rewards import calibration_reward, correctness_reward

# ------------------------------------------------------------------------------------------------ TRL's advantage


def trl_reference(rewards_per_func, weights, K, scale, aggregation="sum_then_normalize"):
    """TRL 1.16's advantage, restated in torch with TRL's own ``nanstd`` (trl.trainer.utils), float64."""
    import torch
    from trl.trainer.utils import nanstd

    R = torch.tensor(rewards_per_func, dtype=torch.float64)
    w = torch.tensor(weights, dtype=torch.float64)
    unscorable = torch.isnan(R).all(dim=1)
    if aggregation == "sum_then_normalize":
        r = (R * w).nansum(dim=1)
        r[unscorable] = float("nan")
        base = torch.nanmean(r.view(-1, K), dim=1).repeat_interleave(K)
        if scale == "batch":
            sd = nanstd(r).expand_as(r)
        else:
            sd = nanstd(r.view(-1, K), dim=1).repeat_interleave(K)
        adv = r - base if scale == "none" else (r - base) / (sd + 1e-4)
    else:
        g = R.view(-1, K, R.shape[1])
        z = ((g - torch.nanmean(g, dim=1, keepdim=True)) / (nanstd(g, dim=1, keepdim=True) + 1e-4)).view(-1, R.shape[1])
        r = (z * w).nansum(dim=1)
        r[unscorable] = float("nan")
        adv = (r - torch.nanmean(r)) / (nanstd(r) + 1e-4)
    return torch.nan_to_num(adv, nan=0.0).numpy()


def test_grpo_advantages_by_hand():
    # one right of four: mean ¼, Bessel std √(¼) = ½ → (¾, −¼)/(½ + 1e-4)
    a = L.grpo_advantages([[1.0], [0.0], [0.0], [0.0]], 4)
    assert a == pytest.approx([0.75 / 0.5001] + [-0.25 / 0.5001] * 3, abs=1e-12)
    # all equal: zero spread, zero advantage in every mode
    for mode in L.SCALE_MODES:
        assert np.all(L.grpo_advantages([[0.3]] * 4, 2, scale_rewards=mode) == 0)
    # weights and sum: two functions, weights (1, 0.5); "none" keeps the raw centred sum
    a = L.grpo_advantages([[1, -1], [0, 0]], 2, weights=[1.0, 0.5], scale_rewards="none")
    assert a.tolist() == [0.25, -0.25]
    # batch: centred per group, divided by the std of all four rewards (0, 1, 0, 3 → std √2)
    a = L.grpo_advantages([[0.0], [1.0], [0.0], [3.0]], 2, scale_rewards="batch")
    s = math.sqrt(2.0) + 1e-4
    assert a == pytest.approx([-0.5 / s, 0.5 / s, -1.5 / s, 1.5 / s], abs=1e-12)
    # True / False are TRL's aliases of "group" / "none"
    one = [[1.0], [0.0]]
    assert np.array_equal(L.grpo_advantages(one, 2, scale_rewards=True), L.grpo_advantages(one, 2))
    assert L.grpo_advantages([[1.0], [0.0]], 2, scale_rewards=False).tolist() == [0.5, -0.5]
    # a row where every function returned None: excluded from the baseline, advantage 0
    a = L.grpo_advantages([[1.0], [np.nan], [0.0], [0.0]], 4, scale_rewards="none")
    assert a == pytest.approx([2 / 3, 0, -1 / 3, -1 / 3])
    with pytest.raises(ValueError, match="scale_rewards"):
        L.grpo_advantages([[1.0], [0.0]], 2, scale_rewards="std")
    with pytest.raises(ValueError, match="whole groups"):
        L.grpo_advantages([[1.0], [0.0], [0.0]], 2)


@pytest.mark.parametrize("aggregation", L.AGGREGATIONS)
@pytest.mark.parametrize("scale", L.SCALE_MODES)
def test_grpo_advantages_match_trl(scale, aggregation):
    rng = np.random.default_rng(0)
    K, G, F = 4, 6, 2
    R = rng.normal(size=(G * K, F))
    R[:K, 0] = 1.0  # a group with constant first reward
    R[K : 2 * K] = 0.5  # a group with constant total reward
    R[9, 1] = np.nan  # one function returned None
    R[13] = np.nan  # every function returned None
    w = [1.0, 0.3]
    got = L.grpo_advantages(R, K, w, scale, aggregation)
    ref = trl_reference(R, w, K, scale, aggregation)
    # TRL's nanstd computes Bessel's count/(count−1) in float32 (integer division), hence ~1e-8 relative
    assert got == pytest.approx(ref, rel=1e-6, abs=1e-7)


def test_scale_mode_names_are_trls():
    from trl import GRPOConfig

    common = dict(output_dir="/tmp/x", use_cpu=True, report_to=[], activation_checkpointing=False)
    assert GRPOConfig(scale_rewards=True, **common).scale_rewards == "group"
    assert GRPOConfig(scale_rewards=False, **common).scale_rewards == "none"
    for mode in L.SCALE_MODES:
        assert GRPOConfig(scale_rewards=mode, **common).scale_rewards == mode
    help_text = GRPOConfig.__dataclass_fields__["multi_objective_aggregation"].metadata["help"]
    assert set(L.AGGREGATIONS) <= set(help_text.split("'"))


# ------------------------------------------------------------------------------------------------ the world


@pytest.fixture(scope="module")
def world():
    return L.make_world(12, seed=3)


def test_world_is_what_the_judge_sees(world):
    jd = world.judge
    c = world.candidates[5]
    assert world.correct[5].tolist() == [float(m == 0) for m in world.meaning[5]]
    base, para, pad1, pad2 = c[4:8]
    assert jd.equivalent("q", [(base, para)]) == [True]
    # padded variants of one wrong answer: the judge counts them as distinct from each other and from the base
    assert jd.equivalent("q", [(pad1, pad2), (base, pad1), (para, pad1)]) == [False, False, False]
    assert world.agree[5, 4, 6] == 0 and world.soft[5, 6, 7] == pytest.approx(0.25)
    assert c[-1] == "" and world.meaning[5, -1] == -1
    p0 = L._softmax(world.theta0)
    assert np.allclose(p0.sum(axis=1), 1) and np.all(p0[:, -1] == pytest.approx(0.03))


@pytest.mark.parametrize("design", [L.CHOSEN, L.TODAY, replace(L.CHOSEN, name="rollout", reading="rollout")],
                         ids=lambda d: d.name[:20])
def test_lab_rewards_are_the_trainers(world, design):
    """The lab's (precomputed, vectorised) rewards = trainers.rewards' reward functions on the strings."""
    rng = np.random.default_rng(1)
    K, N = 8, world.theta0.shape[0]
    M = world.theta0.shape[1]
    idx = rng.integers(0, M, size=(N, K))
    idx[0] = world.empty_index  # an all-empty group
    idx[1, :4] = 0  # half the group correct and agreeing
    step, max_steps = 120, 300
    lab = L.group_rewards(world, design, idx, step, max_steps)
    prompts = [world.questions[q] for q in range(N) for _ in range(K)]
    comps = [" " + world.candidates[q][m] for q in range(N) for m in idx[q]]
    cols = dict(answers=[world.golds[q] for q in range(N) for _ in range(K)], question=prompts)
    # this tabular lab judges whole lines (the matching before issue 22); trainers/policy_lab.py the short answers
    y = correctness_reward(prompts, comps, match="line", **cols)
    cal = calibration_reward(
        prompts, comps, trainer_state=SimpleNamespace(global_step=step, max_steps=max_steps), num_generations=K,
        eps=design.eps, reading=design.reading, lambda_schedule=design.lambda_schedule, lambda_max=design.lambda_max,
        bounded=design.bounded, empty_answer=design.empty_answer, score=design.score, match="line", **cols,
    )
    assert lab[:, 0].tolist() == y
    assert lab[:, 1] == pytest.approx(cal, abs=1e-12)


# ------------------------------------------------------------------------------------------------ the lab


def test_lab_is_reproducible():
    a = L.run_lab([L.CHOSEN], seeds=(0,), n_questions=20, steps=10)
    b = L.run_lab([L.CHOSEN], seeds=(0,), n_questions=20, steps=10)
    assert a[L.CHOSEN.name]["runs"] == b[L.CHOSEN.name]["runs"]
    assert "| design |" in L.format_table(a)


@pytest.fixture(scope="module")
def small_lab():
    alone = [d for d in L.DESIGNS if d.name.startswith("r_cal alone")]
    return L.run_lab([L.RLVR, L.TODAY, L.CHOSEN, *alone], seeds=(0, 1, 2, 3, 4), n_questions=100)


def test_chosen_design_passes_the_lab(small_lab):
    """At equal steps, mean over 5 seeds: accuracy within 2 points of RLVR, ECE ≤ 0.6× RLVR's, Brier lower,
    AUROC higher, and no learnable question lost."""
    rl, ch = small_lab[L.RLVR.name]["mean"], small_lab[L.CHOSEN.name]["mean"]
    assert ch["acc"] >= rl["acc"] - 0.02
    assert ch["ece"] <= 0.6 * rl["ece"]
    assert ch["brier"] < rl["brier"]
    assert ch["auroc"] > rl["auroc"]
    assert ch["empty"] == 0 and ch["lost"] <= 0.02


def test_rcal_alone_degenerates_and_the_curriculum_prevents_it(small_lab):
    ch = small_lab[L.CHOSEN.name]["mean"]
    alone = small_lab["r_cal alone, λ ≡ 1 (chosen r_cal)"]["mean"]
    # the paper's modes: maximally diverse wrong answers (padded variants included) and collapse on one wrong one
    assert alone["acc"] < 0.05 and alone["lost"] > 0.9
    assert alone["distinct_wrong"] + alone["collapsed_wrong"] > 0.5 and alone["padded"] > 0.2
    assert ch["distinct_wrong"] + ch["collapsed_wrong"] < 0.4 * (alone["distinct_wrong"] + alone["collapsed_wrong"])
    # the r_cal before the lab, alone: every question ends empty (confidence 0, wrong: "perfectly calibrated")
    assert small_lab["r_cal alone, λ ≡ 1 (r_cal before the lab)"]["mean"]["empty"] > 0.9


def test_design_before_the_lab_fails_it(small_lab):
    """The old design's near-zero ECE comes from answering worse: empty answers on a fifth of the questions."""
    rl, old = small_lab[L.RLVR.name]["mean"], small_lab[L.TODAY.name]["mean"]
    assert old["acc"] < rl["acc"] - 0.1
    assert old["empty"] > 0.2 and old["lost"] > 0.05
    assert old["ece"] < 0.01
