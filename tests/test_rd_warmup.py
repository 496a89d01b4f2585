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
