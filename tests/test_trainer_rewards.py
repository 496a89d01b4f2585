"""CSR / RLVR / RLCR reward values against groups computed by hand (no model, fast)."""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from semcal_eval import qa
from semcal_eval.qa.judges import F1Judge
from trainers import config as tcfg
from trainers.rewards import (
    GroupLayoutError,
    calibration_reward,
    calibration_scores,
    correctness_reward,
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


def rlcr(answer, conf, think="t", analysis="a"):
    return f"<think>{think}</think><answer>{answer}</answer><analysis>{analysis}</analysis><confidence>{conf}</confidence>"


# ------------------------------------------------------------------------------------------------ correctness


def test_correctness_matches_squad_f1_reference():
    """F1-judge correctness = SQuAD best-F1 ≥ 0.5 (qa.is_correct), on a set of near misses."""
    rng = random.Random(0)
    golds = ["Barack Obama", "the Eiffel Tower", "1945", "New York City"]
    preds = ["Obama", "Barack Hussein Obama", "Eiffel", "tower", "1944", "1945.", "New York", "York", "", "  ", "a"]
    cases = [(rng.choice(preds), rng.sample(golds, 2)) for _ in range(60)]
    got = []
    for p, g in cases:
        got += correctness_reward(["x"], [p], answers=[g], question=["q"])
    ref = [float(bool(p.strip()) and qa.is_correct(p, g, 0.5)) for p, g in cases]
    assert got == ref
    assert 0 < sum(got) < len(got)  # the sample exercises both outcomes


def test_correctness_reads_first_line_and_conversational_and_empty():
    comps = [" Paris\nQ: What is ...", [{"role": "assistant", "content": "paris"}], "", None, [], "\n\n"]
    assert correctness_reward(["p"] * 6, comps, **cols(["Paris"], k=6)) == [1, 1, 0, 0, 0, 0]


def test_correctness_missing_column_is_a_clear_error():
    with pytest.raises(KeyError, match="answers"):
        correctness_reward(["p"], ["Paris"], question=["q"])


# ------------------------------------------------------------------------------------------------ calibration


def test_calibration_group_by_hand_rollout_reading():
    # K=4: "Paris"≡"paris" (correct); "Lyon" wrong and alone; "" empty (wrong, agrees with nothing).
    comps = ["Paris", "paris", "Lyon", ""]
    out = calibration_reward(["p"] * 4, comps, num_generations=4, eps=EPS, **cols(["Paris"], k=4))
    expected = [math.log(1 / 3), math.log(1 / 3), L1, L1]
    assert out == pytest.approx(expected, abs=1e-12)


def test_calibration_group_by_hand_pairwise_reading():
    comps = ["Paris", "paris", "Lyon", ""]
    out = calibration_reward(["p"] * 4, comps, num_generations=4, eps=EPS, reading="pairwise", **cols(["Paris"], k=4))
    # correct rollouts: one agreeing partner (log(1-ε)) and two disagreeing (log ε), averaged
    expected = [(L1 + 2 * L0) / 3] * 2 + [L1, L1]
    assert out == pytest.approx(expected, abs=1e-12)
    # pairwise ≤ rollout reading (Jensen: mean of logs ≤ log of mean)
    rollout = calibration_reward(["p"] * 4, comps, num_generations=4, eps=EPS, **cols(["Paris"], k=4))
    assert all(a <= b + 1e-12 for a, b in zip(out, rollout))


def test_calibration_collapse_modes():
    """Both collapse modes of the calibration reward alone (docs/TRAINING.md)."""
    kw = dict(num_generations=4, eps=EPS, **cols(["Bern"], k=4))
    # one wrong answer repeated: p = 1-ε, y = 0 → log ε for everyone (and zero spread: no GRPO signal)
    same = calibration_reward(["p"] * 4, ["Zurich"] * 4, **kw)
    assert same == pytest.approx([L0] * 4)
    # maximally diverse wrong answers: p = ε, y = 0 → log(1-ε) ≈ 0, the supremum of r_cal
    diverse = calibration_reward(["p"] * 4, ["Zurich", "Geneva", "Basel", "Lugano"], **kw)
    assert diverse == pytest.approx([L1] * 4)
    # a lone correct answer among a repeated wrong one is punished by log ε: the trap λ(t) avoids early on
    trap = calibration_reward(["p"] * 4, ["Zurich", "Zurich", "Zurich", "Bern"], **kw)
    assert trap == pytest.approx([math.log(1 / 3)] * 3 + [L0])
    assert max(diverse) > max(trap)


def test_calibration_matches_direct_formula_on_random_groups():
    """r_cal from the reward function = formula applied to an independently built agreement matrix."""
    rng = random.Random(1)
    pool = ["Paris", "paris", "Paris France", "Lyon", "Lyon city", "Nice", "", "the"]
    judge = F1Judge()
    for _ in range(30):
        K = rng.randint(2, 6)
        comps = [rng.choice(pool) for _ in range(K)]
        out = calibration_reward(["p"] * K, comps, num_generations=K, eps=EPS, **cols(["Paris"], k=K))
        exp = []
        for j in range(K):
            agree = []
            for i in range(K):
                if i == j:
                    continue
                a, b = comps[j].strip(), comps[i].strip()
                agree.append(bool(a and b) and (a == b or judge.equivalent("q", [(a, b)])[0]))
            p = min(max(sum(agree) / (K - 1), EPS), 1 - EPS)
            y = float(bool(comps[j].strip()) and qa.is_correct(comps[j], ["Paris"]))
            exp.append(y * math.log(p) + (1 - y) * math.log(1 - p))
        assert out == pytest.approx(exp, abs=1e-12)


def test_calibration_scores_edges():
    # K = 2, exact 0/1 agreements, ε at both extremes of its range
    A = np.array([[1, 1], [1, 1]])
    r, p = calibration_scores(A, [1, 0], eps=1e-6)
    assert p.tolist() == [1 - 1e-6, 1 - 1e-6]
    assert r == pytest.approx([math.log(1 - 1e-6), math.log(1e-6)])
    r, p = calibration_scores(np.eye(3), [0, 0, 0], eps=0.49)
    assert np.all(np.isfinite(r)) and p.tolist() == [0.49] * 3


def test_lambda_schedules_and_weighting():
    st = SimpleNamespace(global_step=30, max_steps=100)
    kw = dict(num_generations=2, eps=EPS, **cols(["Paris"], k=2))
    base = calibration_reward(["p"] * 2, ["Paris", "Lyon"], **kw)
    lin = calibration_reward(["p"] * 2, ["Paris", "Lyon"], trainer_state=st, lambda_max=2.0, **kw)
    assert lin == pytest.approx([0.6 * v for v in base])
    assert lambda_at(st, "constant", lambda_max=0.7) == 0.7
    assert lambda_at(st, "step", lambda_max=1.0, lambda_min=0.1, step_fraction=0.3) == 1.0
    assert lambda_at(st, "step", lambda_max=1.0, lambda_min=0.1, step_fraction=0.31) == 0.1
    assert lambda_at(SimpleNamespace(global_step=0, max_steps=10)) == 0.0
    assert lambda_at(SimpleNamespace(global_step=15, max_steps=10)) == 1.0  # clipped at t = 1
    for sched in ("linear", "constant", "step"):  # non-decreasing in t
        vals = [lambda_at(SimpleNamespace(global_step=s, max_steps=20), sched, 1.5, 0.2) for s in range(21)]
        assert all(b >= a for a, b in zip(vals, vals[1:]))


def test_metrics_logged_through_trl_hooks():
    logged, extra = {}, {}
    st = SimpleNamespace(global_step=1, max_steps=4)
    calibration_reward(
        ["p"] * 2, ["Paris", "Paris"], trainer_state=st, num_generations=2, eps=EPS,
        log_metric=lambda k, v: logged.setdefault(k, v), log_extra=lambda k, v: extra.setdefault(k, v),
        **cols(["Paris"], k=2),
    )
    assert logged["csr/lambda"] == 0.25
    assert logged["csr/r_cal"] == pytest.approx(L1)
    assert logged["csr/confidence"] == pytest.approx(1 - EPS)
    assert extra["confidence"] == pytest.approx([1 - EPS] * 2)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(num_generations=1), "num_generations"),
        (dict(num_generations=None), "num_generations"),
        (dict(num_generations=2, eps=0.0), "eps"),
        (dict(num_generations=2, eps=0.5), "eps"),
        (dict(num_generations=2, eps=-1), "eps"),
        (dict(num_generations=2, lambda_schedule="cosine"), "schedule"),
        (dict(num_generations=2, lambda_min=0.5, lambda_max=0.1), "non-decreasing"),
        (dict(num_generations=2, lambda_step_fraction=1.5), "lambda_step_fraction"),
        (dict(num_generations=2, reading="mean"), "reading"),
    ],
)
def test_bad_options_are_clear_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        calibration_reward(["p"] * 2, ["a", "b"], **cols(["a"], k=2), **kw)


def test_split_group_is_a_clear_error():
    with pytest.raises(GroupLayoutError, match="not a multiple of num_generations"):
        calibration_reward(["p"] * 3, ["a", "b", "c"], num_generations=2, **cols(["a"], k=3))
    with pytest.raises(GroupLayoutError, match="do not share one prompt"):
        calibration_reward(["p", "q", "q", "p"], ["a"] * 4, num_generations=2, **cols(["a"], k=4))


def test_unparseable_and_empty_completions_have_finite_rewards():
    comps = ["", None, [], "\n", "<answer></answer>", "<confidence>2</confidence>", "🙂" * 50, "\x00"]
    n = len(comps)
    c = cols(["Paris"], k=n)
    for f, kw in [
        (correctness_reward, {}),
        (calibration_reward, dict(num_generations=n)),
        (calibration_reward, dict(num_generations=2, reading="pairwise")),
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
    assert cfg["grpo"]["max_steps"] == 3 and cfg["reward"]["eps"] == 0.01 and cfg["method"] == "rlvr"
    tcfg.validate(cfg)
    for bad, match in [
        ("method=ppo", "method"),
        ("grpo.num_generations=1", "num_generations"),
        ("reward.eps=0.7", "eps"),
        ("reward.lambda_schedule=exp", "schedule"),
    ]:
        with pytest.raises(ValueError, match=match):
            tcfg.validate(tcfg.apply_override(cfg, bad))
    with pytest.raises(ValueError, match="key.sub=value"):
        tcfg.apply_override(cfg, "grpo.max_steps")


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
    from trainers.rewards import calibration_reward, GroupLayoutError
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    # global batch: 3 prompts × K=2 = 6 rows; 3 rows per rank, so prompt b's group straddles the ranks
    prompts = ["a", "a", "b", "b", "c", "c"]
    comps = ["Paris", "Paris", "Rome", "Bern", "Oslo", "Oslo"]
    golds = [["Paris"]] * 2 + [["Bern"]] * 2 + [["Oslo"]] * 2
    sl = slice(rank * 3, rank * 3 + 3)
    kw = dict(num_generations=2, eps=0.01, answers=golds[sl], question=prompts[sl])
    out = {"rank": rank}
    out["gathered"] = calibration_reward(prompts[sl], comps[sl], gather_groups=True, **kw)
    try:
        calibration_reward(prompts[sl], comps[sl], gather_groups=False, **kw)
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
    single = calibration_reward(
        ["a", "a", "b", "b", "c", "c"], ["Paris", "Paris", "Rome", "Bern", "Oslo", "Oslo"], num_generations=2,
        eps=0.01, answers=[["Paris"]] * 2 + [["Bern"]] * 2 + [["Oslo"]] * 2, question=["a", "a", "b", "b", "c", "c"],
    )
    assert outs[0]["gathered"] + outs[1]["gathered"] == pytest.approx(single)
    # by hand: agreeing correct pairs log(1-ε); the split group b: Rome wrong & alone log(1-ε), Bern correct & alone log ε
    assert single == pytest.approx([L1, L1, L1, L0, L1, L1])
    for o in outs:
        assert o["error"] and "gather_groups" in o["error"]


# ------------------------------------------------------------------------------------------------ configs and data


@pytest.mark.parametrize("path", sorted((ROOT / "trainers/configs").glob("*.yaml")), ids=lambda p: p.name)
def test_example_configs_resolve(path):
    cfg = tcfg.load_config(path)
    tcfg.validate(cfg)
    assert cfg["method"] in tcfg.METHODS
    if path.name == "cpu_smoke.yaml":  # the CPU path: fp32, no activation checkpointing, CPU device
        g = cfg["grpo"]
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
    rlcr_ds = build_dataset(tcfg.apply_override(cfg, "method=rlcr"))
    assert all("<confidence>" in p for p in rlcr_ds["prompt"])
