"""The board's named stages (leaderboards.stages, and the tier stage in leaderboards.spotcheck), each tested
directly on small hand-built inputs: one passing case, and the failure the stage exists to catch, whose message
must name the problem.

The dataset, records and metrics stages read real documents: the synthetic classification task of
tests/board_fixtures.py (a 12-document split written next to its YAML), built by the board as for any run.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

import board_fixtures as S
from leaderboards import spotcheck
from leaderboards.dataset_check import load_task_docs
from leaderboards.errors import SubmissionError
from leaderboards.registry import load_registry, tasks_root
from leaderboards.stages import (check_dataset, check_document, check_filters, check_labels, check_metrics,
                                 check_provenance, check_shape, read_task_rows, record_of, reported_metrics)
from leaderboards.stages.metrics import aggregation
from leaderboards.stages.records import FilterRows, check_values

CLS = "semcal_synth_cls"
N = 12


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """The synthetic tasks, their registry and the classification task's documents (N of them)."""
    tasks = S.write_synth_tasks(tmp_path_factory.mktemp("tasks"))
    S.write_synth_data(tasks, CLS, N)
    registry = load_registry(tasks)
    docs = load_task_docs(CLS, tasks_root(tasks), None, where="test")
    return {"tasks": tasks, "registry": registry, "spec": registry[CLS], "docs": docs}


def results_of(**over) -> dict:
    """A minimal results file of one full run of CLS, with ``over`` replacing top-level fields."""
    res = {
        "results": {CLS: {"alias": CLS, "acc,constrained": 0.5, "acc_stderr,constrained": "N/A"}},
        "versions": {CLS: "2.0"},
        "config": {"model_args": "pretrained=m,dtype=float32", "limit": None, "batch_size": 8},
        "n-samples": {CLS: {"original": N, "effective": N}},
        "configs": {CLS: {"task": CLS, "metadata": {"version": "2.0"}}},
        "group_subtasks": {CLS: []},
        "date": 1795000000.0,
        "git_hash": "abc1234",
    }
    res.update(over)
    return res


# ---------------------------------------------------------------- 1. shape


def test_shape_reads_an_lm_eval_results_file(board):
    shape = check_shape(results_of(), Path("results_x.json"), board["registry"])
    assert shape.tasks == [CLS] and shape.n_samples[CLS]["original"] == N


@pytest.mark.parametrize("over, needle", [
    ({"versions": [2.0]}, "'versions' must be a JSON object"),
    ({"results": {"no_such_task": {"acc,none": 1.0}}}, "'no_such_task' is not a semcal task"),
    ({"versions": {CLS: "1.0"}}, "has version 1.0, the board knows version 2.0"),
    ({"results": {}}, "the results hold no task"),
])
def test_shape_refuses_retyped_fields_and_unknown_tasks(board, over, needle):
    with pytest.raises(SubmissionError, match="results_x.json") as e:
        check_shape(results_of(**over), Path("results_x.json"), board["registry"])
    assert needle in str(e.value)


def test_reported_values_by_filter(board):
    rep = reported_metrics({"alias": CLS, "acc,constrained": 0.5, "acc_stderr,constrained": "N/A",
                            "nll,semsoft": 1.25}, CLS, board["spec"], "r.json")
    assert rep.numbers == {"constrained": {"acc": 0.5}, "semsoft": {"nll": 1.25}}  # _stderr is not recomputed


@pytest.mark.parametrize("value, needle", [("0.5", "reported value '0.5' is not a number"),
                                           (True, "is not a number")])
def test_reported_value_must_be_a_number(board, value, needle):
    with pytest.raises(SubmissionError, match="acc,constrained") as e:
        reported_metrics({"acc,constrained": value}, CLS, board["spec"], "r.json")
    assert needle in str(e.value)


def test_reported_metric_must_be_declared(board):
    with pytest.raises(SubmissionError, match="reports metric 'flattering', which task .* does not declare"):
        reported_metrics({"flattering,constrained": 0.1}, CLS, board["spec"], "r.json")


# ---------------------------------------------------------------- 2. provenance


def test_provenance_keeps_what_is_stored():
    res = results_of()
    prov = check_provenance(res, res["config"], "r.json")
    assert prov.limit is None and prov.model_args == "pretrained=m,dtype=float32"
    assert prov.provenance["git_hash"] == "abc1234" and prov.provenance["config"]["batch_size"] == 8


@pytest.mark.parametrize("edit, needle", [
    (lambda r: r["config"].__setitem__("limit", float("nan")), "config.limit nan is not a document count"),
    (lambda r: r.__setitem__("date", 1e300), "provenance 'date' 1e+300 is not a number between 0"),
    (lambda r: r.__setitem__("git_hash", "x" * 201), "'git_hash' must be a string of at most 200"),
    (lambda r: r["config"].__setitem__("gen_kwargs", [[[[[[[[[[]]]]]]]]]]), "nested more than 8 levels"),
])
def test_provenance_refuses_what_could_break_a_render(edit, needle):
    res = results_of()
    edit(res)
    with pytest.raises(SubmissionError) as e:
        check_provenance(res, res["config"], "r.json")
    assert needle in str(e.value)


# ---------------------------------------------------------------- 3. dataset


def shape_with(board, **over):
    return check_shape(results_of(**over), Path("results_x.json"), board["registry"])


def test_dataset_full_and_limited_coverage(board):
    root = tasks_root(board["tasks"])
    cov = check_dataset(CLS, shape_with(board), None, root, None)
    assert (cov.effective, cov.n_split, cov.coverage, cov.subset) == (N, N, "full", None)
    part = check_dataset(CLS, shape_with(board, **{"n-samples": {CLS: {"original": N, "effective": 5}}}), 5,
                         root, None)
    assert (part.effective, part.coverage) == (5, "partial")


@pytest.mark.parametrize("counts, limit, needle", [
    ({"original": N + 1, "effective": N + 1}, None, f"n-samples.original is {N + 1} but the test split the board loads has {N} documents"),
    ({"original": N, "effective": 5}, None, f"evaluated 5 of {N} documents without a recorded --limit"),
    ({"original": N, "effective": 6}, 5, f"n-samples.effective is 6 but limit 5 of {N} documents gives 5"),
    ({"original": N, "effective": True}, None, "n-samples.semcal_synth_cls.effective must be an integer"),
])
def test_dataset_counts_come_from_the_board_s_split(board, counts, limit, needle):
    with pytest.raises(SubmissionError) as e:
        check_dataset(CLS, shape_with(board, **{"n-samples": {CLS: counts}}), limit, tasks_root(board["tasks"]),
                      None)
    assert needle in str(e.value)


def honest_row(board, i: int, record: dict | None = None) -> dict:
    """Row ``i`` as lm-eval logs it for the board's document ``i`` (hashes recomputed from the dataset)."""
    docs = board["docs"]
    return {"doc_id": i, "filter": "constrained", "doc_hash": docs.doc_hash(i), "target_hash": docs.target_hash(i),
            "_line": i + 1, **({} if record is None else {"metrics": ["acc"], "acc": record})}


def test_document_hashes_and_labels_match_the_dataset(board):
    docs = board["docs"]
    check_document(honest_row(board, 3), 3, docs, CLS, "s.jsonl:4", {})
    check_labels({"probs": [0.25] * 4, "gold": docs.gold(3), "soft": None}, 3, "constrained", docs, "s.jsonl:4")


def test_document_of_another_row_is_refused(board):
    row = {**honest_row(board, 3), "doc_hash": board["docs"].doc_hash(4)}  # the rows reordered
    with pytest.raises(SubmissionError, match=r"s.jsonl:4: doc_id 3 has doc_hash .* but document 3 of "):
        check_document(row, 3, board["docs"], CLS, "s.jsonl:4", {})


def test_gold_label_other_than_the_dataset_s_is_refused(board):
    docs = board["docs"]
    wrong = (docs.gold(3) + 1) % 4
    with pytest.raises(SubmissionError, match=f"document 3 .filter constrained. has gold label {wrong} but the "):
        check_labels({"probs": [0.25] * 4, "gold": wrong, "soft": None}, 3, "constrained", docs, "s.jsonl:4")


# ---------------------------------------------------------------- 4. records

REC = {"probs": [0.7, 0.1, 0.1, 0.1], "gold": 0, "soft": None}
REPORTED = {"acc": 0.5, "ece_uw15": 0.1, "brier_mc": 0.2}


def row(**values) -> dict:
    """A samples row logging ``values`` under its metric names, in the given order."""
    return {"doc_id": 0, "filter": "constrained", "_line": 1, "metrics": list(values), **values}


def test_record_logged_once_and_referenced_elsewhere():
    # the harness's layout: the record under the first name, "=<first name>" under every other one
    r = row(acc=REC, ece_uw15="=acc", brier_mc="=acc", acc_stderr="=acc", ece_uw15_stderr="=acc")
    holder, rec = record_of(r, "s:1", "constrained", REPORTED)
    assert holder == "acc" and rec is r["acc"]


def test_record_in_older_layouts():
    copies = row(**{m: copy.deepcopy(REC) for m in REPORTED}, acc_stderr="=acc")  # equal copies
    assert record_of(copies, "s:1", "constrained", REPORTED) == ("acc", REC)
    base_refs = row(acc=REC, ece_uw15=copy.deepcopy(REC), brier_mc=copy.deepcopy(REC), ece_uw15_stderr="=ece_uw15")
    assert record_of(base_refs, "s:1", "constrained", REPORTED)[1] == REC  # stderr names its own metric's copy


def test_two_different_records_are_refused():
    other = {**REC, "probs": [0.1, 0.7, 0.1, 0.1]}
    r = row(acc=REC, ece_uw15="=acc", brier_mc=other)
    with pytest.raises(SubmissionError, match="s:1: .*different records under 'acc' and 'brier_mc'"):
        record_of(r, "s:1", "constrained", REPORTED)


def test_reference_to_a_name_without_the_record_is_refused():
    r = row(acc=REC, ece_uw15="=acc", brier_mc="=nll")  # nll: not in the row at all
    with pytest.raises(SubmissionError, match="metric 'brier_mc' refers to '=nll', which holds no record"):
        record_of(r, "s:1", "constrained", REPORTED)
    chained = row(acc=REC, ece_uw15="=acc", brier_mc="=ece_uw15")  # a reference to a reference
    with pytest.raises(SubmissionError, match="refers to '=ece_uw15'"):
        record_of(chained, "s:1", "constrained", REPORTED)


@pytest.mark.parametrize("value", [0.5, None, "acc", [REC]])
def test_a_name_holding_neither_record_nor_reference_is_refused(value):
    r = row(acc=REC, ece_uw15="=acc", brier_mc=value)
    with pytest.raises(SubmissionError, match="metric 'brier_mc' of filter constrained holds .*neither the row's "
                                              "record .logged under 'acc'. nor the reference '=acc'"):
        record_of(r, "s:1", "constrained", REPORTED)


def test_row_must_log_exactly_the_reported_metrics():
    with pytest.raises(SubmissionError, match="made_up logged per document but not reported"):
        record_of(row(acc=REC, ece_uw15="=acc", brier_mc="=acc", made_up="=acc"), "s:1", "constrained", REPORTED)
    with pytest.raises(SubmissionError, match="row for filter constrained lacks metric brier_mc"):
        record_of(row(acc=REC, ece_uw15="=acc"), "s:1", "constrained", REPORTED)
    with pytest.raises(SubmissionError, match="holds no record under any of its metrics"):
        record_of(row(acc="=brier_mc", ece_uw15="=acc", brier_mc="=acc"), "s:1", "constrained", REPORTED)


def test_record_values_are_bounded_and_of_one_kind():
    assert check_values(REC, "s:1 metric acc", "") == "classification"
    with pytest.raises(SubmissionError, match="s:2 metric acc: a classification record was expected"):
        check_values({"conf": 0.5, "correct": 1}, "s:2 metric acc", "classification")
    with pytest.raises(SubmissionError, match="field gold is an integer of 40 digits"):
        check_values({**REC, "gold": 10**39}, "s:1 metric acc", "")


def write_samples(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "_line"}) + "\n" for r in rows))
    return path


def test_read_task_rows_streams_one_record_per_document(board, tmp_path):
    docs = board["docs"]
    items = S.cls_items(N, k=4, seed=3)
    rows = []
    for i, it in enumerate(items):
        rec = {**it, "gold": docs.gold(i)}
        rows.append({**honest_row(board, i), "metrics": list(REPORTED) + ["acc_stderr"], "acc": rec,
                     "ece_uw15": "=acc", "brier_mc": "=acc", "acc_stderr": "=acc"})
    sp = write_samples(tmp_path / "s.jsonl", rows)
    filters = read_task_rows(sp, CLS, board["spec"], docs, N, {"constrained": REPORTED})
    assert sorted(filters["constrained"].records) == list(range(N)) and filters["constrained"].kind == "classification"
    check_filters(filters, {"constrained": REPORTED}, N, sp, "r.json", CLS)

    rows[5] = {**rows[5], "doc_id": 4}  # a document logged twice
    with pytest.raises(SubmissionError, match=r"s.jsonl:6: doc_id 4 appears twice for filter constrained"):
        read_task_rows(write_samples(sp, rows), CLS, board["spec"], docs, N, {"constrained": REPORTED})


def test_check_filters_wants_every_reported_filter_and_every_document(tmp_path):
    flt = FilterRows(records={i: REC for i in range(3)})
    with pytest.raises(SubmissionError, match="filter constrained has 3 sample rows but n-samples.effective is 4"):
        check_filters({"constrained": flt}, {"constrained": {}}, 4, tmp_path / "s", "r.json", CLS)
    with pytest.raises(SubmissionError, match="reports filter 'semsoft' but the samples have no row of it"):
        check_filters({"constrained": flt}, {"constrained": {}, "semsoft": {}}, 3, tmp_path / "s", "r.json", CLS)
    with pytest.raises(SubmissionError, match="has only reference rows"):
        check_filters({"prior": flt}, {"prior": {}}, 3, tmp_path / "s", "r.json", CLS)


# ---------------------------------------------------------------- 5. metrics


def test_reported_metrics_recompute_from_the_records(board):
    spec = board["spec"]
    records = [{**it, "gold": board["docs"].gold(i)} for i, it in enumerate(S.cls_items(N, k=4, seed=5))]
    numbers = {m: float(aggregation(spec, m)(records)) for m in spec.metrics}
    check_metrics(records, "constrained", spec, numbers, {}, "r.json", Path("s.jsonl"))

    nudged = {**numbers, "ece_uw15": numbers["ece_uw15"] * (1 - 1e-3)}  # outside ATOL + RTOL*|x|
    with pytest.raises(SubmissionError, match="metric ece_uw15,constrained is reported as .* but recomputes to"):
        check_metrics(records, "constrained", spec, nudged, {}, "r.json", Path("s.jsonl"))
    within = {**numbers, "ece_uw15": numbers["ece_uw15"] * (1 + 1e-7)}  # float formatting noise
    check_metrics(records, "constrained", spec, within, {}, "r.json", Path("s.jsonl"))


def test_declared_metric_missing_from_results_is_refused(board):
    spec = board["spec"]
    records = [{**it, "gold": board["docs"].gold(i)} for i, it in enumerate(S.cls_items(N, k=4, seed=5))]
    numbers = {m: float(aggregation(spec, m)(records)) for m in spec.metrics if m != "nll"}
    with pytest.raises(SubmissionError, match="metric.s. nll declared by the task but not reported"):
        check_metrics(records, "constrained", spec, numbers, {}, "r.json", Path("s.jsonl"))


# ---------------------------------------------------------------- 6. tier (leaderboards.spotcheck)


def test_tier_self_reported_when_the_model_cannot_be_loaded(tmp_path):
    S.write_run(tmp_path / "run", CLS, {"constrained": S.cls_items(N, k=4)}, {"acc": "semcal_acc"},
                model_name="some-org/hub-model")
    (rp,) = (tmp_path / "run").rglob("results_*.json")
    sc = spotcheck.spot_check(rp, progress=lambda *_: None)
    assert sc.tier == "self-reported"
    assert "neither a semcal catalogue model nor a model folder on this machine" in sc.verification["reason"]


def test_tier_rescorable_tasks_only():
    kinds = ({"goemotions_semsoft"}, {"goemotions_base"})
    spotcheck._rescorable("goemotions_semsoft", {"n-shot": {"goemotions_semsoft": 0}}, kinds)
    with pytest.raises(spotcheck.NotCheckable, match="generation .QA. tasks are not spot-checked"):
        spotcheck._rescorable("nq_open", {}, kinds)
    with pytest.raises(spotcheck.NotCheckable, match="few-shot contexts"):
        spotcheck._rescorable("goemotions_base", {"n-shot": {"goemotions_base": 5}}, kinds)
    with pytest.raises(spotcheck.NotCheckable, match="chat template"):
        spotcheck._rescorable("goemotions_base", {"chat_template": "x"}, kinds)


def test_tier_compares_only_per_document_filters(tmp_path):
    items = S.cls_items(N, k=4)
    S.write_run(tmp_path / "run", CLS, {"constrained": items, "constrained_ts": items, "prior": S.prior_items(items)},
                {"acc": "semcal_acc"})
    (sp,) = (tmp_path / "run").rglob("samples_*.jsonl")
    rows, filters = spotcheck._submitted_rows(sp)
    assert filters == ["constrained"] and sorted(rows) == ["constrained", "constrained_ts", "prior"]
    S.write_run(tmp_path / "ref", CLS, {"prior": S.prior_items(items)}, {"acc": "semcal_acc"})
    (sp,) = (tmp_path / "ref").rglob("samples_*.jsonl")
    with pytest.raises(spotcheck.NotCheckable, match="no filter of this run is a per-document function"):
        spotcheck._submitted_rows(sp)
