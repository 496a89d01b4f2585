"""Semantic-agreement confidence on a stock generate_until task through a three-line YAML (issue 33 item 3).

Two real runs on SmolLM2-135M (hf-semsoft, 5 NQ-Open dev questions, K = 3 samples):

* the stock task of tests/fixtures/stock_tasks/nq_stock_gen.yaml (plain Jinja prompt, ``doc_to_target: answer``,
  no semcal import) wrapped by nq_stock_semagree.yaml, the three lines;
* the same wrapper over a copy whose prompt is semcal's QA prompt with ``question_field: question``, run beside
  semcal's own ``nq_open_semagree`` on the same documents: the requests, greedy answers and correctness must be
  the same, which shows the wrapper hands the judges the question and gold aliases semcal's task does.

Sampled answers are not compared across the two runs (their random streams follow the batch order); each run's
confidence is checked against its own logged samples and clusters.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from semcal_eval.qa.grading import grade
from semcal_eval.qa.stock import golds_of

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "stock_tasks"
LIMIT = 5
META = {"num_samples": 3, "estimators": []}
SAME_PROMPT = """\
include: nq_stock_gen.yaml
task: nq_stock_same_semagree
class: !function semcal_eval.qa.stock.StockSemAgreeTask
doc_to_text: !function semcal_eval.qa.prompts.qa_doc_to_text
"""


def _run(tmp: Path, tasks: str, out: str, meta: dict) -> Path:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    r = subprocess.run([sys.executable, "-m", "semcal_eval", "--model", "hf-semsoft", "--model_args",
                        "pretrained=semcal:smollm2-135m,dtype=float32", "--tasks", tasks, "--include_path",
                        str(tmp / "tasks"), "--limit", str(LIMIT), "--batch_size", "8", "--device", "cpu",
                        "--log_samples", "--output_path", str(tmp / out), "--metadata", json.dumps(meta)],
                       cwd=tmp, env=env, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    (results,) = (tmp / out).glob("*/results_*.json")
    return results


def _rows(results: Path, task: str) -> dict[int, dict]:
    date = results.stem[len("results_"):]
    path = results.with_name(f"samples_{task}_{date}.jsonl")
    return {r["doc_id"]: r for r in map(json.loads, path.read_text().splitlines())}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_dir, smollm2_path):
    tmp = tmp_path_factory.mktemp("semagree")
    (tmp / "tasks").mkdir()
    for src in FIXTURES.glob("nq_stock_*.yaml"):
        (tmp / "tasks" / src.name).write_text(src.read_text().replace("{DATA}", str(data_dir)))
    (tmp / "tasks" / "nq_stock_same_semagree.yaml").write_text(SAME_PROMPT)
    plain = _run(tmp, "nq_stock_semagree", "plain", META)
    same = _run(tmp, "nq_stock_same_semagree", "same", {**META, "question_field": "question"})
    ours = _run(tmp, "nq_open_semagree", "ours", META)
    return plain, same, ours


def test_three_line_yaml_reports_agreement_confidence_from_its_own_samples(runs, data_dir):
    plain, _, _ = runs
    res = json.loads(plain.read_text())["results"]["nq_stock_semagree"]
    assert {"acc,judge_f1", "ece_uw10,judge_f1", "brier_conf,judge_f1", "auroc_conf,judge_f1"} <= set(res)
    assert "exact_match,none" not in res  # the stock metric_list is replaced by semcal's
    questions = [json.loads(x) for x in (data_dir / "nq_open" / "NQ-open.dev.jsonl").read_text().splitlines()[:LIMIT]]
    for doc_id, row in _rows(plain, "nq_stock_semagree").items():
        rec = json.loads(row["filtered_resps"][1])
        assert len(rec["samples"]) == META["num_samples"]
        # confidence: the share of the samples in the greedy answer's cluster, from the logged clusters
        share = sum(c == rec["greedy_cluster"] for c in rec["cluster_ids"]) / len(rec["cluster_ids"])
        assert rec["conf"] == pytest.approx(share)
        # the stock task's prompt, and its doc_to_target list as the gold aliases
        q = questions[doc_id]
        assert row["arguments"]["gen_args_0"]["arg_0"] == f"Q: {q['question']}\nA:"
        assert row["doc"]["qa_golds"] == [a for a in q["answer"] if a.strip()]
        assert rec["correct"] == int(grade(rec["greedy"], row["doc"]["qa_golds"]))


def test_same_prompt_gives_semcals_own_task_greedy_answers_and_correctness(runs):
    _, same, ours = runs
    a, b = _rows(same, "nq_stock_same_semagree"), _rows(ours, "nq_open_semagree")
    assert sorted(a) == sorted(b) == list(range(LIMIT))
    for i in a:
        assert a[i]["arguments"] == b[i]["arguments"]  # the greedy request and the K-sample request
        # what the judges and the grader read: the same question and gold aliases as semcal's loader gives
        assert (a[i]["doc"]["qa_question"], a[i]["doc"]["qa_golds"]) == (b[i]["doc"]["qa_question"],
                                                                          b[i]["doc"]["qa_golds"])
        ra, rb = json.loads(a[i]["filtered_resps"][1]), json.loads(b[i]["filtered_resps"][1])
        assert (ra["greedy"], ra["correct"], ra["em"], ra["f1"]) == (rb["greedy"], rb["correct"], rb["em"], rb["f1"])


def test_calibrate_lists_the_wrapped_task_as_semcals(runs):
    from semcal_eval import calibrate

    plain, _, _ = runs
    cal = calibrate.calibrate_run(plain)
    assert cal["tasks"]["nq_stock_semagree"]["reason"].startswith("semcal task")


# -- no model --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target, choices, golds", [
    (["Paris", " ", "the city of Paris"], None, ["Paris", "the city of Paris"]), (["The", "a"], None, []),
    ("1988", None, ["1988"]), (1, ["no", "yes"], ["yes"]), (7, None, ["7"]), ([], None, []), (None, None, []),
])
def test_golds_of(target, choices, golds):
    assert golds_of(target, choices) == golds


def test_multiple_choice_is_refused_with_the_right_tool(tmp_path):
    from semcal_eval.qa.stock import StockSemAgreeTask

    with pytest.raises(ValueError, match="calibrate"):
        StockSemAgreeTask({"task": "x", "output_type": "multiple_choice"})


def test_documents_without_gold_are_dropped_loudly(tmp_path, caplog):
    from lm_eval.tasks import TaskManager

    rows = ({"question": "a?", "answer": ["x"]}, {"question": "b?", "answer": []},
            {"question": "c?", "answer": ["", "z"]}, {"question": "d?", "answer": ["The", "a"]})
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    stock_yaml = (FIXTURES / "nq_stock_gen.yaml").read_text()
    (tmp_path / "t.yaml").write_text(stock_yaml.replace("{DATA}/nq_open/NQ-open.dev.jsonl", str(tmp_path / "qa.jsonl")))
    wrapper = (FIXTURES / "nq_stock_semagree.yaml").read_text()
    (tmp_path / "w.yaml").write_text(wrapper.replace("nq_stock_gen.yaml", "t.yaml"))
    with caplog.at_level(logging.WARNING):
        task = TaskManager(include_path=str(tmp_path), include_defaults=False).load(["nq_stock_semagree"])["tasks"][
            "nq_stock_semagree"]
    docs = list(task.eval_docs)
    assert [d["qa_golds"] for d in docs] == [["x"], ["z"]]
    assert "2 of 4 documents have no gold" in caplog.text  # ["The", "a"] normalises to nothing: dropped, counted
