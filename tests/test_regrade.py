"""``semcal-eval regrade`` (semcal_eval/qa/regrade.py) on an lm-eval output folder written as lm-eval 0.4 writes a
stock ``generate_until`` run with ``--log_samples`` (the target logged as text, a list as its Python repr). The
real run on NQ-Open (Qwen2.5-Coder-0.5B, 100 questions) is in benchmarks/results/regrade_stock/."""

from __future__ import annotations

import json

import pytest

from semcal_eval.qa.grading import grade_cover
from semcal_eval.qa.regrade import RegradeError, main, regrade_run
from semcal_eval.runs import RunError

STAMP = "2026-12-07T00-00-00.000000"
DOCS = [  # (question, golds, logged answer)
    ("What is the capital of France?", ["Paris"], " The capital is Paris."),
    ("Who wrote Hamlet?", ["William Shakespeare", "Shakespeare"], " Shakespeare"),
    ("Largest planet?", ["Jupiter"], " Saturn or Jupiter"),
    ("When did WW2 end?", ["1945"], " 1945"),
    ("Who painted the Mona Lisa?", ["Leonardo da Vinci"], " Michelangelo"),
]


def _run(tmp_path, docs=DOCS, field="answer", samples=True, output_type="generate_until"):
    d = tmp_path / "run" / "model"
    d.mkdir(parents=True)
    cfg = {"task": "qa", "output_type": output_type, "doc_to_target": field,
           "metric_list": [{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True}]}
    (d / f"results_{STAMP}.json").write_text(json.dumps({"results": {"qa": {"exact_match,none": 0.0}},
                                                         "configs": {"qa": cfg}}))
    if samples:
        with open(d / f"samples_qa_{STAMP}.jsonl", "w") as f:
            for i, (q, golds, a) in enumerate(docs):
                em = float(a.strip() in golds)
                f.write(json.dumps({"doc_id": i, "doc": {"question": q, field: golds}, "target": str(golds),
                                    "resps": [[a]], "filtered_resps": [a], "exact_match": em}) + "\n")
    return tmp_path / "run"


def test_regraded_records_recompute_the_table(tmp_path):
    out = regrade_run(_run(tmp_path), graders=("cover",))
    row = out["tasks"]["qa"]
    recs = [json.loads(x) for x in (tmp_path / "run/model/regrade_qa.jsonl").read_text().splitlines()]
    assert len(recs) == row["n"] == len(DOCS)
    # each verdict is cover's on the logged answer against the document's own aliases (not the repr string)
    assert [r["cover"] for r in recs] == [int(grade_cover(a.strip(), g, q)) for q, g, a in DOCS] == [1, 1, 0, 1, 0]
    assert [r["golds"] for r in recs] == [g for _, g, _ in DOCS]
    assert row["cover"] == pytest.approx(sum(r["cover"] for r in recs) / len(recs))
    assert row["lm_eval_exact_match"] == pytest.approx(sum(r["exact_match"] for r in recs) / len(recs)) == 0.4
    md = (tmp_path / "run/model/regrade.md").read_text()
    assert "### qa (5 documents)" in md and f"| 0.400 | {row['cover']:.3f} |" in md


def test_golds_come_from_the_logged_target_when_the_doc_has_no_such_field(tmp_path):
    run = _run(tmp_path, field="answer")
    p = next((run / "model").glob("samples_*.jsonl"))
    rows = [json.loads(x) for x in p.read_text().splitlines()]
    for r in rows:
        r["doc"] = {"question": r["doc"]["question"]}  # the target is all that is left: "['Paris']"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    regrade_run(run, graders=("cover",))
    recs = [json.loads(x) for x in (run / "model/regrade_qa.jsonl").read_text().splitlines()]
    assert [r["golds"] for r in recs] == [g for _, g, _ in DOCS]


@pytest.mark.parametrize("make, err, match", [
    (lambda t: _run(t, samples=False), RegradeError, "--log_samples"),
    (lambda t: _run(t, output_type="multiple_choice"), RegradeError, "no generate_until task"),
    (lambda t: _run(t, docs=[("Q?", [""], " x")]), RegradeError, "no gold answer"),
    (lambda t: t / "nowhere", RunError, "does not exist"),
])
def test_bad_runs_get_one_line_naming_the_fix(tmp_path, make, err, match):
    with pytest.raises(err, match=match):
        regrade_run(make(tmp_path), graders=("cover",))


def test_cli_refuses_unknown_graders_and_reports_bad_runs(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main([str(_run(tmp_path)), "--graders", "bem"])
    assert e.value.code == 2 and "--graders takes learned and/or cover" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main([str(tmp_path / "missing"), "--graders", "cover"])
    assert e.value.code == 2 and "does not exist" in capsys.readouterr().err
