"""Issue 22, item 5, and issue 31, item 6: the warm-up targets are in each method's exact format (its own parser
says so); their confidence is the base model's agreement through a calibration map fitted on the warm-up
questions, so it has the spread the model's signal allows and the base rate where there is none (never the raw
share's 0); target_report states spread and ECE; warmup_sft is refused for methods without a format."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from semcal_eval.qa.verbalized import parse_rd, parse_rlcr
from trainers import config as tcfg
from trainers.warmup import agreement_targets, calibrated_targets, format_target, target_report, taught_confidence

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("answer", ["Paris", "Jane  Austen", "1969", ""])
@pytest.mark.parametrize("conf, agree, k", [(0.0, 0, 4), (0.04, 1, 4), (0.25, 1, 4), (0.75, 3, 4), (1.0, 4, 4),
                                            (0.7, 7, 10), (0.137, 2, 4)])
def test_targets_parse_with_the_methods_own_parser(answer, conf, agree, k):
    ok, a, c = parse_rd(format_target("rd", answer, conf))
    assert ok and a == (" ".join(answer.split()) or "unknown") and c == int(conf * 10 + 0.5)
    assert c / 10 == taught_confidence("rd", conf)
    ok, a, c = parse_rlcr(format_target("rlcr", answer, conf, agree, k))
    assert ok and a == (" ".join(answer.split()) or "unknown") and c == pytest.approx(round(conf, 2))
    assert c == pytest.approx(taught_confidence("rlcr", conf))


def test_bad_targets_are_errors():
    with pytest.raises(ValueError, match="confidence"):
        format_target("rd", "x", 1.5)
    with pytest.raises(ValueError, match="rlcr, rd"):
        format_target("csr", "x", 0.5)
    with pytest.raises(ValueError, match="one agreement share"):
        calibrated_targets([0.5, 0.5], [1])


def test_agreement_share_uses_the_rewards_judge():
    q = "Capital of France?"
    # case, punctuation and chatter variants of the greedy answer agree with it under the rewards' cover judge, and
    # so does a list that names it (it makes that claim too); another answer and an empty one do not
    assert agreement_targets(q, ["Paris"], " Paris", ["paris.", "Paris, I think", "Lyon", ""]) == (2, 4)
    assert agreement_targets(q, ["Paris"], " Paris", ["Paris or Lyon", "Lyon"]) == (1, 2)
    assert agreement_targets(q, ["Paris"], " Paris", ["PARIS", "The answer is Paris"]) == (2, 2)
    assert agreement_targets(q, ["Paris"], "", ["Paris", "Paris"]) == (0, 2)  # an empty greedy answer: 0


def test_targets_without_signal_are_the_base_rate_not_zero():
    """The failure of the first protocol run: a 135M model's samples almost never agree, so the raw share is 0
    everywhere and the format lesson taught "confidence 0". Through the calibration map the target is the base
    rate: calibrated (ECE 0 on these questions), where the raw share's ECE is the accuracy."""
    share = np.zeros(40)
    correct = np.array([1] * 10 + [0] * 30)
    t = calibrated_targets(share, correct)
    assert np.allclose(t, 0.25, atol=1e-3)
    raw, taught = target_report(share, correct), target_report([taught_confidence("rlcr", v) for v in t], correct)
    assert raw["ece"] == pytest.approx(0.25) and raw["mean"] == 0.0
    assert taught["ece"] == pytest.approx(0.0, abs=1e-9) and taught["distinct"] == 1 and taught["std"] == 0.0
    assert taught["base_rate"] == 0.25 and taught["n"] == 40
    # one class among the labels: the base rate itself
    assert calibrated_targets([0.0, 0.5, 1.0], [0, 0, 0]).tolist() == [0.0, 0.0, 0.0]


def test_targets_keep_the_spread_the_signal_allows():
    """Where agreement predicts correctness the target spreads with it (monotone in the share, so the order is
    the model's own), and it is better calibrated on these questions than the raw share."""
    rng = np.random.default_rng(0)
    share = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=200)
    correct = (rng.random(200) < 0.1 + 0.5 * share).astype(int)  # accuracy 0.1 .. 0.6: the share overstates it
    for method in ("platt", "isotonic"):
        t = calibrated_targets(share, correct, method)
        assert np.all(np.diff(t[np.argsort(share, kind="stable")]) >= -1e-12)  # monotone in the share
        rep, raw = target_report(t, correct), target_report(share, correct)
        assert rep["distinct"] >= 3 and rep["std"] > 0.1
        assert rep["ece"] < 0.5 * raw["ece"]
        assert abs(rep["mean"] - correct.mean()) < 0.02  # calibrated in the large
    # the report's numbers, by hand
    r = target_report([0.2, 0.2, 0.9, 0.9], [0, 1, 1, 1])
    assert r["distinct"] == 2 and r["std"] == pytest.approx(0.35) and r["mean"] == pytest.approx(0.55)
    assert r["ece"] == pytest.approx(0.5 * abs(0.5 - 0.2) + 0.5 * abs(1 - 0.9))


def test_warmup_only_for_formatted_methods():
    for m in ("rlcr", "rd"):
        cfg = tcfg.load_config(ROOT / f"trainers/configs/{m}.yaml")
        assert cfg.warmup_sft.enabled
        tcfg.check_warmup(cfg)
    cfg = tcfg.load_config(ROOT / "trainers/configs/csr.yaml", ["warmup_sft.enabled=true"])
    with pytest.raises(ValueError, match="warmup_sft.enabled=false"):
        tcfg.check_warmup(cfg)
    with pytest.raises(ValueError, match="unknown warmup_sft keys"):
        tcfg.load_config(ROOT / "trainers/configs/rd.yaml", ["warmup_sft.stepz=3"])


@pytest.mark.slow
def test_saved_lora_model_keeps_the_warmup(data_dir, tmp_path):
    """warm-up (full weights) + GRPO with LoRA: the adapter names the warmed base, and OUTPUT/final (adapter merged
    onto the base read from disk) holds the warm-up's weights, not the untrained model's. Before the fix the
    protocol's RLCR/RD checkpoints were the base model plus GRPO's adapter (0 % parsed at evaluation)."""
    import json

    from safetensors.torch import load_file

    from semcal_eval.models import resolve_pretrained
    from trainers.config import load_config
    from trainers.train import train

    cfg = load_config(ROOT / "trainers/configs/rd.yaml", [
        f"output_dir={tmp_path}", "grpo.use_cpu=true", "grpo.bf16=false", "grpo.activation_checkpointing=false",
        "lora.enabled=true", "lora.r=4", "lora.alpha=8", "grpo.num_generations=2", "grpo.per_device_train_batch_size=2",
        "grpo.max_steps=1", "grpo.save_steps=1000", "grpo.max_completion_length=8", "data.limit=4",
        "warmup_sft.limit=2", "warmup_sft.steps=2", "warmup_sft.num_samples=2", "warmup_sft.batch_size=2",
        "warmup_sft.max_answer_tokens=6", "warmup_sft.learning_rate=1e-3"])
    res = train(cfg)
    warm = tmp_path / "warmup_sft" / "model"
    adapter = json.loads((Path(res["adapter_dir"]) / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == res["base_model"] == str(warm)
    k = "model.layers.0.self_attn.q_proj.weight"
    w, f = load_file(str(warm / "model.safetensors"))[k], load_file(str(Path(res["model_dir"]) / "model.safetensors"))[k]
    b = load_file(str(Path(resolve_pretrained("semcal:smollm2-135m")) / "model.safetensors"))[k]
    moved = (w - b).abs().max().item()
    assert moved > 1e-4  # the warm-up moved the weights
    assert (f - w).abs().max().item() < 0.1 * moved  # final = warmed base + a 1-step adapter, not the base
