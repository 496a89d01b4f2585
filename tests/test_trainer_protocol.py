"""Issue 22, item 6: the paper's protocol as one command (trainers/protocol.py).

Fast: the HotpotQA training questions never meet the evaluated ones, the protocol configs resolve, bad settings
are clear errors. Slow: the command end to end on SmolLM2 at a tiny size; the table is complete and every number
is recomputed here from the (confidence, correct, tokens) triples the JSON carries."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from trainers import protocol as PR

ROOT = Path(__file__).resolve().parents[1]


def test_training_questions_are_hotpotqa_and_disjoint_from_evaluation(data_dir):
    from semcal_eval.data.fields import qa_example

    rows = PR.training_rows()
    train = [e[0] for e in (qa_example("hotpotqa", r) for r in rows) if e]
    assert len(rows) == 1700 and len(train) == 1699  # dev rows 2000..3699 of the local file (one has no gold)
    evaluated = PR.eval_questions(2000)  # the most the protocol allows: every dev question before row 2000
    assert len(evaluated) == 2000
    assert not {PR._norm(q) for q in train} & {PR._norm(q) for q in evaluated}
    PR.check_disjoint(train, evaluated)
    with pytest.raises(PR.ProtocolError, match="shared|also evaluation"):
        PR.check_disjoint(train[:3], evaluated[:5] + [train[1].upper()])
    # the evaluation reads the task's first questions in order: the QA task's own doc list
    from semcal_eval.data import load

    dev = load("hotpotqa", split="validation")
    assert evaluated[:3] == [e[0] for e in (qa_example("hotpotqa", dev[i]) for i in range(3))]


def test_limit_that_reaches_the_training_rows_is_refused(data_dir):
    with pytest.raises(PR.ProtocolError, match=r"--limit 2000 or less"):
        PR.eval_questions(2001)


@pytest.mark.parametrize("name", ["paper.yaml", "cpu.yaml"])
def test_protocol_configs_resolve(name, tmp_path):
    proto = PR.load_protocol(ROOT / "trainers/configs/protocol" / name)
    cfgs = {n: PR.run_config(proto, n, tmp_path) for n in proto["runs"]}
    assert {c["method"] for c in cfgs.values()} == {"csr", "rlvr", "rlcr", "rd"}
    ks = {c["grpo"]["num_generations"] for n, c in cfgs.items() if c["method"] == "csr"}
    assert ks == {4, 8}  # the K ablation
    sched = {c["reward"]["lambda_schedule"] for c in cfgs.values() if c["method"] == "csr"}
    assert sched == {"linear", "constant"}  # the λ ablation
    for n, c in cfgs.items():
        assert c["data"]["dataset"] == "hotpotqa" and c["output_dir"] == str(tmp_path / n)
        assert not c["evaluate"]["enabled"] and not c["submit"]["enabled"]
        assert c["grpo"]["per_device_train_batch_size"] % c["grpo"]["num_generations"] == 0
    assert proto["eval"]["sets"] == list(PR.EVAL_SETS)


def test_bad_protocol_settings_are_clear_errors(tmp_path, capsys):
    with pytest.raises(PR.ProtocolError, match="eval.sets"):
        PR.load_protocol(None, sets=["squad"])
    with pytest.raises(PR.ProtocolError, match="--runs"):
        PR.load_protocol(None, runs=["ppo"])
    bad = tmp_path / "p.yaml"
    bad.write_text(yaml.safe_dump({"runs": {"csr": {}}, "evals": {}}))
    with pytest.raises(PR.ProtocolError, match="unknown protocol keys"):
        PR.load_protocol(bad)
    from trainers.cli import main

    assert main(["protocol", "--config", str(bad)]) == 2
    assert "unknown protocol keys" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ end to end


def _ece10(conf, y):
    edges = np.linspace(0, 1, 11)
    b = np.clip(np.searchsorted(edges[1:], conf, side="left"), 0, 9)  # right-closed bins, 0 in the first
    return sum(abs(y[b == k].mean() - conf[b == k].mean()) * (b == k).mean() for k in range(10) if (b == k).any())


def _auroc(conf, y):
    pos, neg = conf[y == 1], conf[y == 0]
    if not len(pos) or not len(neg):
        return float("nan")
    return float(np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg]))


TINY = {
    "runs": {"base": {"config": "csr.yaml", "train": False}, "csr": {"config": "csr.yaml"}, "rd": {"config": "rd.yaml"}},
    "common": ["grpo.use_cpu=true", "grpo.bf16=false", "grpo.activation_checkpointing=false", "lora.enabled=true",
               "lora.r=4", "lora.alpha=8", "grpo.num_generations=2", "grpo.per_device_train_batch_size=2",
               "grpo.gradient_accumulation_steps=1", "grpo.max_completion_length=8", "grpo.save_steps=100000",
               "warmup_sft.limit=2", "warmup_sft.steps=1", "warmup_sft.num_samples=2", "warmup_sft.batch_size=2",
               "warmup_sft.max_answer_tokens=6"],
    "train": {"limit": 4},
    "eval": {"limit": 2, "num_samples": 2, "batch_size": 4},
}


@pytest.mark.slow
def test_protocol_end_to_end_on_smollm2(data_dir, tmp_path):
    from transformers import AutoTokenizer

    from trainers.cli import main

    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(TINY))
    out = tmp_path / "out"
    assert main(["protocol", "--config", str(cfg), "--max-steps", "1", "--out", str(out)]) == 0
    report = json.loads((out / "protocol.json").read_text())
    md = (out / "protocol.md").read_text()
    assert report["train"]["questions"] == 4
    for s in PR.EVAL_SETS:
        assert f"## {s} (" in md
    assert list(report["runs"]) == ["base", "csr", "rd"]
    for name, run in report["runs"].items():
        # the `train: false` run evaluates the base model (its folder is made for the evaluation alone)
        assert run["steps"] == (0 if name == "base" else 1) and Path(run["model_dir"]).is_dir()
        for s in PR.EVAL_SETS:
            row = run["sets"][s]
            assert row["n"] == 2 and row["task"] == f"{s}_{'rd' if name == 'rd' else 'semagree'}"
            conf = np.array([t[0] for t in row["items"]], float)
            y = np.array([t[1] for t in row["items"]], float)
            toks = [t[2] for t in row["items"]]
            assert row["acc"][0] == pytest.approx(y.mean())
            assert row["brier_conf"][0] == pytest.approx(np.mean((conf - y) ** 2))
            assert row["ece_uw10"][0] == pytest.approx(_ece10(conf, y))
            a = _auroc(conf, y)
            assert (math.isnan(a) and math.isnan(row["auroc_conf"][0])) or row["auroc_conf"][0] == pytest.approx(a)
            assert row["mean_tokens"] == pytest.approx(np.mean(toks)) and min(toks) >= 0
            assert row["n_correct"] == int(y.sum())
            assert ("parse_rate" in row) == (name == "rd")
            assert f"| {name}" in md
    ratios = report["token_ratios"]["csr:rd"]
    for s in PR.EVAL_SETS:
        num, den = (report["runs"][r]["sets"][s]["mean_tokens"] for r in ("csr", "rd"))
        # a run that generated nothing on a set (an untrained RD model can stop at once) has no ratio there
        assert math.isnan(ratios[s]) if den == 0 else ratios[s] == pytest.approx(num / den)
    assert "CSR : other" in md and "csr:rd" in md
    # read back at a smaller limit: the first documents' rows, metrics recomputed on them
    tok = AutoTokenizer.from_pretrained(str(report["runs"]["base"]["model_dir"]))
    one = PR.read_eval(out / "rd" / "eval", "rd", list(PR.EVAL_SETS), tok, limit=1)
    for s in PR.EVAL_SETS:
        assert one[s]["n"] == 1 and one[s]["items"] == report["runs"]["rd"]["sets"][s]["items"][:1]
        assert one[s]["acc"][0] == pytest.approx(one[s]["items"][0][1])
