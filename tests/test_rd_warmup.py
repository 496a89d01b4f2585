"""Issue 22, item 5: the warm-up targets are in each method's exact format (its own parser says so), their
confidence is the agreement share, and warmup_sft is refused for methods without a format (no model, fast)."""

from __future__ import annotations

from pathlib import Path

import pytest

from semcal_eval.qa.verbalized import parse_rd, parse_rlcr
from trainers import config as tcfg
from trainers.warmup import agreement_targets, format_target

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("answer", ["Paris", "Jane  Austen", "1969", ""])
@pytest.mark.parametrize("agree, k", [(0, 4), (1, 4), (3, 4), (4, 4), (7, 10)])
def test_targets_parse_with_the_methods_own_parser(answer, agree, k):
    share = agree / k
    ok, a, c = parse_rd(format_target("rd", answer, share))
    assert ok and a == (" ".join(answer.split()) or "unknown") and c == int(share * 10 + 0.5)
    ok, a, c = parse_rlcr(format_target("rlcr", answer, share, agree, k))
    assert ok and a == (" ".join(answer.split()) or "unknown") and c == pytest.approx(round(share + 1e-9, 1))


def test_bad_targets_are_errors():
    with pytest.raises(ValueError, match="confidence"):
        format_target("rd", "x", 1.5)
    with pytest.raises(ValueError, match="rlcr, rd"):
        format_target("csr", "x", 0.5)


def test_agreement_share_uses_the_rewards_matching():
    q = "Capital of France?"
    # padded and case variants of the greedy answer agree with it; another answer and an empty one do not
    assert agreement_targets(q, ["Paris"], " Paris", ["paris.", "Paris, I think", "Lyon", ""]) == (2, 4)
    assert agreement_targets(q, ["Paris"], "", ["Paris", "Paris"]) == (0, 2)  # an empty greedy answer: 0


def test_warmup_only_for_formatted_methods():
    for m in ("rlcr", "rd"):
        cfg = tcfg.load_config(ROOT / f"trainers/configs/{m}.yaml")
        assert cfg["warmup_sft"]["enabled"]
        tcfg.validate(cfg)
        tcfg.check_warmup(cfg)
    cfg = tcfg.load_config(ROOT / "trainers/configs/csr.yaml", ["warmup_sft.enabled=true"])
    with pytest.raises(ValueError, match="warmup_sft.enabled=false"):
        tcfg.check_warmup(cfg)
    with pytest.raises(ValueError, match="unknown warmup_sft keys"):
        tcfg.validate(tcfg.load_config(ROOT / "trainers/configs/rd.yaml", ["warmup_sft.stepz=3"]))


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
