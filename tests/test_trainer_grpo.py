"""Real GRPO runs (TRL's GRPOTrainer, SmolLM2-135M on CPU) for csr / rlvr / rlcr: 2 steps each, resume after a
crash, the saved model in lm-eval, and a 2-process run with groups split across ranks.

Kept small (K = 2, 2 prompts a step, ≤ 8 new tokens, LoRA) so the file fits a 2-core CI.
"""

from __future__ import annotations

import json
import re
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from datasets import Dataset  # noqa: E402

from trainers.config import TrainConfig, load_config  # noqa: E402
from trainers.data import build_dataset  # noqa: E402
from trainers.train import build_trainer, read_metrics, train  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]

# Easy questions, so that a 135M model is sometimes right and rewards differ within a group (non-zero advantage).
ROWS = Dataset.from_dict(
    {
        "id": [str(i) for i in range(8)],
        "question": [
            "What is the capital of France?",
            "What is the capital of Japan?",
            "What is the capital of Italy?",
            "What is the largest planet in the solar system?",
            "Who wrote Romeo and Juliet?",
            "What color is the sky on a clear day?",
            "What is the capital of Germany?",
            "How many days are in a week?",
        ],
        "answer": [["Paris"], ["Tokyo"], ["Rome"], ["Jupiter"], ["William Shakespeare", "Shakespeare"], ["blue"], ["Berlin"], ["7", "seven"]],
    }
)


def _cfg(out: Path, method: str, *extra: str) -> TrainConfig:
    return load_config(
        ROOT / "trainers/configs/cpu_smoke.yaml",
        [
            f"output_dir={out}",
            f"method={method}",
            "grpo.max_steps=2",
            "grpo.save_steps=2",
            "grpo.num_generations=2",
            "grpo.per_device_train_batch_size=4",
            "grpo.max_completion_length=8",
            "grpo.learning_rate=1e-3",
            "data.dataset=nq_open",  # ROWS are in NQ-Open's schema (answer: list of aliases)
            'data.prompt_template="Q: {question}\\nA:"',
            *extra,
        ],
    )


def _dataset(cfg: TrainConfig) -> Dataset:
    return build_dataset(cfg, rows=ROWS)


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # 2 threads on 2 busy cores are slower than 1
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = {}
    for method in ("csr", "rlvr", "rlcr"):
        d = tmp_path_factory.mktemp(method)
        # csr: the paper's linear λ(t) curriculum as csr.yaml ships it, so the schedule is read at both steps
        cfg = _cfg(d, method)
        res = train(cfg, train_dataset=_dataset(cfg))
        out[method] = (cfg, res, read_metrics(d))
    return out


EXPECTED_FUNCS = {
    "csr": ["correctness_reward", "calibration_reward"],
    "rlvr": ["correctness_reward"],
    "rlcr": ["rlcr_format_reward", "rlcr_correctness_reward", "rlcr_brier_reward"],
}


@pytest.mark.parametrize("method", ["csr", "rlvr", "rlcr"])
def test_two_grpo_steps_log_every_component(runs, method):
    cfg, res, logs = runs[method]
    steps = [r for r in logs if "reward" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for r in steps:
        for f in EXPECTED_FUNCS[method]:
            assert math.isfinite(r[f"rewards/{f}/mean"]) and math.isfinite(r[f"rewards/{f}/std"])
        assert math.isfinite(r["reward"]) and math.isfinite(r["loss"])
    if method == "csr":
        # linear λ(t) = lambda_max · global_step / max_steps, read when the step's rollouts are scored: 0, then ½·λ_max
        # (TRL logs metrics as float32)
        r_ = cfg.reward
        assert (r_.score, r_.bounded, r_.lambda_schedule) == ("log", False, "linear")
        lam_max = r_.lambda_max
        assert [r["csr/lambda"] for r in steps] == pytest.approx([0.0, 0.5 * lam_max], rel=1e-6, abs=0)
        # the ranges of r_cal: likelihood y·(K/n_c − 1) ∈ [0, K−1]; likelihood_spread adds −(1−y)·agreement, so
        # [−1, K−1]; the paper's BCE in nats [log ε, 0] (bounded: [−1, 0])
        K = cfg.grpo["num_generations"]
        log_lo = -1 if r_.bounded else math.log(r_.eps) * (1 + 1e-6)
        lo, hi = {"likelihood": (0, K - 1), "likelihood_spread": (-1, K - 1), "log": (log_lo, 0)}[r_.score]
        assert all(math.isfinite(r["csr/r_cal"]) and lo <= r["csr/r_cal"] <= hi for r in steps)
        assert steps[0]["rewards/calibration_reward/mean"] == 0.0  # λ = 0 at the first step
    if method == "rlcr":
        assert all("rlcr/confidence_parsed_frac" in r for r in steps)
    # the saved model: plain HF folder, KV cache on, the newline stop of training not leaked into it
    final = Path(res["model_dir"])
    conf = json.loads((final / "config.json").read_text())
    assert conf["use_cache"] is True
    gen = json.loads((final / "generation_config.json").read_text())
    assert gen.get("eos_token_id") in (2, [2])
    assert (Path(res["adapter_dir"]) / "adapter_config.json").is_file()
    saved = Path(cfg.output_dir) / "checkpoint-2" / "semcal_train.yaml"
    assert saved.is_file() and load_config(saved) == cfg  # the resolved config, read back as it was


def test_rewards_move_the_policy(runs):
    """Where a group's rewards differ, GRPO gets an advantage and the LoRA B matrices (zero at init) move."""
    from safetensors.torch import load_file

    moved_any = False
    for method, (cfg, res, logs) in runs.items():
        signal = any(r.get("frac_reward_zero_std", 1.0) < 1.0 for r in logs if "reward" in r)
        w = load_file(str(Path(res["adapter_dir"]) / "adapter_model.safetensors"))
        b_norm = sum(float(v.abs().sum()) for k, v in w.items() if "lora_B" in k)
        if signal:
            assert b_norm > 0, method
            moved_any = True
        else:
            assert b_norm == 0, method  # no advantage anywhere → no gradient (dapo loss, β = 0)
    assert moved_any, "no method saw a group with differing rewards on the easy questions"


class _Crash(Exception):
    pass


def test_resume_after_crash_matches_straight_run(tmp_path):
    """4 steps straight vs. crash after step 3 (last checkpoint: step 2) and resume: same weights and logs.

    Tolerance: atol 1e-6 on the adapter weights (same seed, same thread count; the RNG of sampling, the data
    order and optimizer/scheduler state are restored from the checkpoint)."""
    from safetensors.torch import load_file
    from transformers import TrainerCallback

    extra = ("grpo.max_steps=4", "reward.lambda_schedule=constant")
    a_cfg = _cfg(tmp_path / "straight", "csr", *extra)
    a = train(a_cfg, train_dataset=_dataset(a_cfg))

    b_cfg = _cfg(tmp_path / "resumed", "csr", *extra)

    class CrashAtStep3(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if state.global_step == 3:
                raise _Crash

    tr = build_trainer(b_cfg, train_dataset=_dataset(b_cfg))
    tr.add_callback(CrashAtStep3())
    with pytest.raises(_Crash):
        train(b_cfg, trainer=tr)
    del tr
    assert sorted(p.name for p in (tmp_path / "resumed").glob("checkpoint-*")) == ["checkpoint-2"]

    b_cfg = b_cfg.override("resume_from_checkpoint=auto")
    b = train(b_cfg, train_dataset=_dataset(b_cfg))
    assert b["resumed_from"].endswith("checkpoint-2")

    wa = load_file(str(Path(a["adapter_dir"]) / "adapter_model.safetensors"))
    wb = load_file(str(Path(b["adapter_dir"]) / "adapter_model.safetensors"))
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], atol=1e-6, rtol=0)
    la = {r["step"]: r for r in read_metrics(a["output_dir"]) if "reward" in r}
    lb = {}
    for r in read_metrics(b["output_dir"]):  # the crashed attempt logged step 3 too; the resumed run's wins
        if "reward" in r:
            lb[r["step"]] = r
    for step in (1, 2, 3, 4):
        for key in ("reward", "rewards/calibration_reward/mean", "completions/mean_length", "csr/lambda"):
            assert lb[step][key] == pytest.approx(la[step][key], abs=1e-6), (step, key)


def test_checkpoint_loads_in_lm_eval(runs, data_dir):
    """The saved folders load in lm-eval with no conversion: merged (pretrained=DIR) and adapter (peft=DIR)
    give the same log-likelihood; the QA task runs on the merged folder through the semcal-eval CLI."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    cfg, res, _ = runs["rlvr"]
    req = [Instance("loglikelihood", {}, ("Q: What is the capital of France?\nA:", " Paris"), 0)]
    merged = HFLM(pretrained=res["model_dir"], dtype="float32", device="cpu", batch_size=1)
    ll_merged = merged.loglikelihood(req)[0][0]
    del merged
    adapter = HFLM(pretrained=res["base_model"], peft=res["adapter_dir"], dtype="float32", device="cpu", batch_size=1)
    ll_adapter = adapter.loglikelihood(req)[0][0]
    del adapter
    assert math.isfinite(ll_merged) and ll_merged == pytest.approx(ll_adapter, abs=1e-3)

    from trainers import pipeline

    cfg = cfg.merged({"evaluate": {"enabled": True, "tasks": ["hotpotqa_semagree"], "limit": 2, "batch_size": 2,
                                   "metadata": {"num_samples": 2, "split": "validation"}, "extra_args": []}})
    cmd = pipeline.eval_command(cfg, res)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "SEMCAL_DATA_DIR": str(data_dir)}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results = list((Path(cfg.output_dir) / "eval").rglob("results_*.json"))
    assert results, done.stdout[-2000:]
    r = json.loads(results[0].read_text())["results"]["hotpotqa_semagree"]
    assert 0.0 <= r["acc,judge_f1"] <= 1.0 and "ece_uw15,judge_f1" in r


def test_two_processes_split_groups(tmp_path, data_dir):
    """torchrun, 2 CPU processes, 3 rows per rank and K = 2: a group straddles the ranks. Without
    gather_groups the run stops up front with the fix in the message; with it, the step runs."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "SEMCAL_DATA_DIR": str(data_dir)}
    base = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m",
            "trainers.cli", str(ROOT / "trainers/configs/cpu_smoke.yaml"), "grpo.max_steps=1",
            "grpo.num_generations=2", "grpo.per_device_train_batch_size=3", "grpo.max_completion_length=6",
            "data.limit=12", 'data.prompt_template="Q: {question}\\nA:"', "reward.lambda_schedule=constant"]
    bad = subprocess.run(base + [f"output_dir={tmp_path / 'split'}"], env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0
    assert "not a multiple of num_generations = 2" in bad.stderr and "gather_groups=true" in bad.stderr
    ok = subprocess.run(base + [f"output_dir={tmp_path / 'gathered'}", "reward.gather_groups=true"], env=env,
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr[-3000:]
    logs = [r for r in read_metrics(tmp_path / "gathered") if "reward" in r]
    lam_max = load_config(ROOT / "trainers/configs/cpu_smoke.yaml").reward.lambda_max
    assert len(logs) == 1 and math.isfinite(logs[0]["csr/r_cal"])
    assert logs[0]["csr/lambda"] == pytest.approx(lam_max, rel=1e-6)  # λ ≡ λ_max, logged as float32


# ------------------------------------------------------------------------------------------------ data and config
# (cheap: no model; questions and golds come from semcal_eval.data.fields, the table the QA tasks read)

FIXTURES = ROOT / "tests" / "fixtures"


def _data_cfg(*extra: str) -> TrainConfig:
    return load_config(ROOT / "trainers/configs/cpu_smoke.yaml", ["data.limit=null", *extra])


def test_msmarco_config_validates_and_builds(caplog):
    """MS MARCO: questions from ``query``, golds from ``answers``; the fixture's row with an empty answer list is
    dropped with a logged count (the loader already skipped the rows without query text or answers)."""
    cfg = _data_cfg("data.dataset=msmarco", "data.split=validation", f"data.data_dir={FIXTURES}")
    with caplog.at_level("WARNING", logger="trainers.data"):
        ds = build_dataset(cfg)
    rows = [json.loads(line) for line in (FIXTURES / "msmarco/validation.jsonl").read_text().splitlines()]
    want = {r["query"]: r["answers"] for r in rows if (r.get("query") or "").strip() and r.get("answers")}
    assert dict(zip(ds["question"], ds["answers"])) == want and len(ds) == 3
    assert "dropped 1 of 4 training rows" in caplog.text


def test_msmarco_without_its_split_in_the_mirror_fails_before_loading(data_dir, tmp_path, capsys):
    """The shared mirror holds only MS MARCO's dev answers: `semcal-train` must stop while it validates the
    config (exit 2, the fix named), not after the model has loaded."""
    from trainers.cli import main

    cfg = ROOT / "trainers/configs/cpu_smoke.yaml"
    out = tmp_path / "run"
    rc = main([str(cfg), "--set", "data.dataset=msmarco", "--set", "data.split=train",
               "--set", f"data.data_dir={data_dir}", "--set", f"output_dir={out}"])
    assert rc == 2 and not out.exists()  # nothing was started
    assert re.search(r"data.split='train' of msmarco is not in the local data mirror.*data_dir: hub",
                     capsys.readouterr().err)


def test_no_answer_present_is_never_a_gold(tmp_path, caplog):
    (tmp_path / "msmarco").mkdir()
    rows = [
        {"query": "q1", "answers": ["No Answer Present."]},
        {"query": "q2", "answers": ["No Answer Present.", "Paris"]},
        {"query": "q3", "answers": ["no answer present"]},  # same marker after SQuAD normalisation
        {"query": "q4", "answers": ["Rome"]},
    ]
    (tmp_path / "msmarco/validation.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = _data_cfg("data.dataset=msmarco", "data.split=validation", f"data.data_dir={tmp_path}")
    with caplog.at_level("WARNING", logger="trainers.data"):
        ds = build_dataset(cfg)
    assert dict(zip(ds["question"], ds["answers"])) == {"q2": ["Paris"], "q4": ["Rome"]}
    assert "dropped 2 of 4 training rows" in caplog.text
    only_marker = _data_cfg("data.dataset=msmarco", "data.split=validation", f"data.data_dir={tmp_path}")
    with pytest.raises(ValueError, match="none of the 2 rows"):
        build_dataset(only_marker, rows=Dataset.from_list(rows[:1] + rows[2:3]))


def test_limit_counts_usable_rows():
    rows = Dataset.from_dict({"question": ["a", "b", "c", "d"], "answer": [[""], ["B"], [], ["D"]]})
    cfg = _data_cfg("data.dataset=nq_open", "data.shuffle_seed=null", "data.limit=2")
    ds = build_dataset(cfg, rows=rows)
    assert ds["question"] == ["b", "d"] and ds["answers"] == [["B"], ["D"]]


@pytest.mark.parametrize("name", ["squad", "goemotions"])
def test_unknown_dataset_fails_validate_with_the_choices(name):
    from semcal_eval.data.fields import QA_FIELDS

    with pytest.raises(ValueError, match="data.dataset") as e:
        _data_cfg(f"data.dataset={name}")
    assert all(q in str(e.value) for q in QA_FIELDS)


def test_unknown_data_key_fails_validate():
    with pytest.raises(ValueError, match=r"unknown data keys \['datadir'\]"):
        _data_cfg("data.datadir=/tmp")


def test_rows_of_another_schema_are_an_error():
    """NQ-Open rows (answer: list) under data.dataset=hotpotqa (answer: str) would train on the gold "['x']"."""
    rows = Dataset.from_dict({"question": ["q"], "answer": [["x"]]})
    with pytest.raises(ValueError, match="not in the hotpotqa hub schema"):
        build_dataset(_data_cfg("data.dataset=hotpotqa"), rows=rows)


def test_trainers_data_does_not_import_lm_eval():
    code = "import sys, trainers.data, trainers.config; print([m for m in sys.modules if m.startswith('lm_eval')])"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
