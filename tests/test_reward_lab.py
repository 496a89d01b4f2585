"""The reward lab (trainers/reward_lab.py): TRL's advantage (checked against a real GRPOTrainer step's own logged
advantages), the lab's rewards = the trainer's, and a small lab run that must show what docs/TRAINING.md claims."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from trainers import reward_lab as L
from trainers.rewards import calibration_reward, correctness_reward

# ------------------------------------------------------------------------------------------------ TRL's advantage


def _trl_logged(R, weights, K, scale, aggregation, tmp_path):
    """One step of TRL's own GRPOTrainer on a tiny (randomly initialised, SmolLM2-shaped) model whose reward
    functions return the rows of ``R`` (None for NaN); returns what TRL logged through its public
    ``log_completions`` table (``completions/completions_00001.parquet``): the rewards per function it received
    and the advantages it formed. Nothing of TRL is restated or patched."""
    import pandas as pd
    import torch
    from datasets import Dataset
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from semcal_eval.models import resolve_pretrained

    path = resolve_pretrained("semcal:smollm2-135m")
    tok = AutoTokenizer.from_pretrained(path)
    tok.pad_token = tok.pad_token or tok.eos_token
    cfg = AutoConfig.from_pretrained(path)
    cfg.update(dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                    num_key_value_heads=1, head_dim=8))
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg)
    B = len(R)

    def make(col):
        def reward(prompts, completions, **kw):
            assert len(completions) == B  # one call per generation batch, in TRL's row order
            return [None if np.isnan(v) else float(v) for v in R[:, col]]

        reward.__name__ = f"r{col}"
        return reward

    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], activation_checkpointing=False,
                      num_generations=K, per_device_train_batch_size=B, gradient_accumulation_steps=1,
                      max_completion_length=3, max_steps=1, logging_steps=1, save_strategy="no",
                      log_completions=True, scale_rewards=scale, multi_objective_aggregation=aggregation,
                      reward_weights=list(weights), bf16=False, seed=0)
    data = Dataset.from_dict({"prompt": [f"Q{i}:" for i in range(B // K)]})
    GRPOTrainer(model=model, reward_funcs=[make(c) for c in range(R.shape[1])], args=args, train_dataset=data,
                processing_class=tok).train()
    df = pd.read_parquet(tmp_path / "completions" / "completions_00001.parquet")
    return df[[f"r{c}" for c in range(R.shape[1])]].to_numpy(float), df["advantage"].to_numpy(float)


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


@pytest.mark.slow
@pytest.mark.parametrize("aggregation", L.AGGREGATIONS)
@pytest.mark.parametrize("scale", L.SCALE_MODES)
def test_grpo_advantages_match_trl(scale, aggregation, tmp_path):
    """L.grpo_advantages against TRL's own code path: the advantages a real GRPOTrainer step formed and logged
    (not a second copy of TRL's formula)."""
    rng = np.random.default_rng(0)
    K, G, F = 4, 6, 2
    R = rng.normal(size=(G * K, F))
    R[:K, 0] = 1.0  # a group with constant first reward
    R[K : 2 * K] = 0.5  # a group with constant total reward
    R[9, 1] = np.nan  # one function returned None
    R[13] = np.nan  # every function returned None
    w = [1.0, 0.3]
    seen, trl_adv = _trl_logged(R, w, K, scale, aggregation, tmp_path)
    # TRL logs the rewards it was given (NaN where None), in the batch order it formed the advantages in
    assert np.allclose(np.nan_to_num(seen, nan=-99), np.nan_to_num(R, nan=-99).astype(np.float32), atol=1e-6)
    got = L.grpo_advantages(seen, K, w, scale, aggregation)
    # TRL computes in float32 (and Bessel's count/(count−1) in float32), hence ~1e-6 relative
    assert got == pytest.approx(trl_adv, rel=1e-5, abs=1e-6)
    assert np.abs(trl_adv).max() > 0.1  # the batch is not trivially all-zero


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
