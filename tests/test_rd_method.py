"""Issue 22, item 4: Rewarding Doubt (RD) as the fourth method — parser on real-looking and malformed outputs,
the reward from its definition (Stangel et al. 2025, the authors' code: c ∈ 0..10, p = clip(c/10, 10⁻³), log
score normalised by [½·log 10⁻³, log(1 − 10⁻³)], +0.25 if correct, ×10, −30 without a confidence), its
properness, the config, and the ``*_rd`` tasks (built with lm-eval's TaskManager, no model)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from semcal_eval.qa.verbalized import parse_rd, rd_prompt
from trainers.rewards import rd_reward, rd_score

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("nq_open", "triviaqa", "hotpotqa", "msmarco")


@pytest.mark.parametrize("text, expected", [
    ("Answer: Paris, Confidence: 8", (True, "Paris", 8)),
    (" Answer: Jane Austen, Confidence: 10", (True, "Jane Austen", 10)),
    ("Answer: 1969, Confidence: 0.", (True, "1969", 0)),
    ("Answer: New York City, Confidence: 7 ", (True, "New York City", 7)),
    # readable but not the exact format: parsed, format_ok false
    ("answer: Paris confidence: 6", (False, "Paris", 6)),
    ("Answer: Paris; Confidence: 6", (False, "Paris", 6)),
    ("Answer: Paris, Confidence: 9\nQuestion: Who wrote Emma?", (False, "Paris", 9)),
    ("I think so. Answer: Paris, Confidence: 9", (False, "Paris", 9)),
    # malformed confidences: never guessed
    ("Answer: Paris, Confidence: 80", (False, "Paris", None)),
    ("Answer: Paris, Confidence: 7.5", (False, "Paris", None)),
    ("Answer: Paris, Confidence: -1", (False, "Paris", None)),
    ("Answer: Paris, Confidence: high", (False, "Paris, Confidence: high", None)),
    ("Answer: Paris", (False, "Paris", None)),
    ("Paris", (False, "Paris", None)),
    ("", (False, "", None)),
])
def test_parse_rd(text, expected):
    assert parse_rd(text) == expected


def test_parse_rd_none_is_empty():
    assert parse_rd(None) == (False, "", None)


def _ref(c, correct):
    if c is None or c < 0 or c > 10:
        return -30.0
    p = min(0.999, max(0.001, c / 10))
    s = math.log(p) if correct else math.log(1 - p)
    lo, hi = math.log(0.001) / 2, math.log(0.999)
    return 10 * ((s - lo) / (hi - lo) + (0.25 if correct else 0.0))


@pytest.mark.parametrize("c", [None, 0, 1, 3, 5, 7, 9, 10, 11, -2])
@pytest.mark.parametrize("correct", [True, False])
def test_rd_score_from_the_definition(c, correct):
    assert rd_score(c, correct) == pytest.approx(_ref(c, correct), abs=1e-9)


def test_rd_score_is_proper_on_the_bins():
    """E[r | c] = q·r(c, 1) + (1 − q)·r(c, 0) is maximised by the bin nearest q (log score: strictly proper)."""
    for q in (0.05, 0.2, 0.5, 0.73, 0.95):
        best = max(range(11), key=lambda c: q * rd_score(c, True) + (1 - q) * rd_score(c, False))
        assert abs(best / 10 - q) <= 0.1, q
    # and stating nothing is worse than any stated bin, whatever the accuracy
    assert rd_score(None, True) < min(rd_score(c, False) for c in range(11))


def test_rd_reward_reads_completions_with_the_parser_and_the_short_answer():
    # the answer is graded by the cover judge (semcal_eval.qa.grading): a lead-in and a sentence that states the
    # gold are free; an alternative is not
    comps = ["Answer: Paris, Confidence: 9", "Answer: The answer is Paris., Confidence: 9",
             "Answer: Paris is the capital, Confidence: 9", "Answer: Paris or Lyon, Confidence: 9",
             "Answer: Lyon, Confidence: 9", "Answer: Lyon", "Paris, 9"]
    out = rd_reward([""] * 7, comps, answers=[["Paris"]] * 7, question=["Capital of France?"] * 7)
    assert out == pytest.approx([_ref(9, True), _ref(9, True), _ref(9, True), _ref(9, False), _ref(9, False),
                                 -30.0, -30.0])
    # padding the wrong answer does not change its reward (same parsed bin, still wrong)
    pad = rd_reward([""], ["Answer: Lyon apple river, Confidence: 9"], answers=[["Paris"]], question=["q"])
    assert pad == pytest.approx([_ref(9, False)])


def test_rd_config_prompt_and_tasks_match(data_dir):
    from trainers import config as tcfg
    from trainers import data as tdata
    from trainers.pipeline import check_eval_tasks
    from trainers.train import build_reward_funcs

    cfg = tcfg.load_config(ROOT / "trainers/configs/rd.yaml")
    check_eval_tasks(cfg)
    funcs, weights = build_reward_funcs(cfg)
    assert weights == [1.0] and funcs == [rd_reward]  # no options: correctness is the grader's, no judge
    assert tdata.make_prompt(" Who wrote Emma? ", "rd") == rd_prompt("Who wrote Emma?")
    with pytest.raises(ValueError, match="rd"):
        check_eval_tasks(cfg.override("evaluate.tasks=[hotpotqa_semagree]"))

    from lm_eval.tasks import TaskManager

    from semcal_eval import TASKS_DIR

    tm = TaskManager(include_path=str(TASKS_DIR), include_defaults=False, metadata={"split": "validation"})
    task = tm.load(["nq_open_rd"])["tasks"]["nq_open_rd"]
    task.build_all_requests(limit=3)
    for inst in task.instances:
        ctx, gen = inst.arguments
        assert ctx == tdata.make_prompt(inst.doc["qa_question"], "rd")  # byte for byte the training prompt
        assert gen["until"] == ["\n"] and gen["max_gen_toks"] == cfg.grpo["max_completion_length"]
    outs = ["Answer: x, Confidence: 8", "no format", "Answer: y, Confidence: 80"]
    for inst, o in zip(task.instances, outs):
        inst.resps = [o]
    task.apply_filters()
    recs = [json.loads(next(iter(i.filtered_resps.values()))) for i in task.instances]
    assert [r["conf"] for r in recs] == [0.8, 0.5, 0.5]  # unparsed: missing_confidence, counted as unparsed
    assert [r["conf_parsed"] for r in recs] == [True, False, False]
    assert [r["format_ok"] for r in recs] == [True, False, False]


def test_every_family_has_its_rd_task():
    import yaml

    for ds in FAMILIES:
        y = yaml.safe_load((ROOT / "tasks" / ds / f"{ds}_rd.yaml").read_text())
        assert y == {"include": "../qa_common/_qa_rd_template_yaml", "task": f"{ds}_rd",
                     "dataset_kwargs": {"qa_dataset": ds}}
