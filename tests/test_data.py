"""Tests for semcal_eval.data: real files of the shared mirror, synthetic fixtures, lm-eval hook.

References are independent of the loader: counts from each dataset's SOURCE.md, rows re-read from
the raw files with the plain csv/json modules, hand-computed normalisations and subsets.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import datasets
import pytest

from semcal_eval import data as D

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
TASKS = FIXTURES / "lm_eval_tasks"
MIRROR = Path(os.environ.get("SEMCAL_DATA_DIR") or (REPO.parent / "shared" / "data"))

needs_mirror = pytest.mark.skipif(
    not MIRROR.is_dir(), reason=f"local data mirror {MIRROR} (SEMCAL_DATA_DIR) does not exist"
)


@pytest.fixture(autouse=True)
def _no_env_data_dir(monkeypatch):
    # Every test states its source explicitly; the hub is never reachable in CI.
    monkeypatch.delenv(D.ENV_VAR, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def assert_hub_schema(ds: datasets.Dataset, name: str, extra: tuple[str, ...] = ()) -> None:
    hub = D.HUB_FEATURES[name]
    assert list(ds.features)[: len(hub)] == list(hub), "hub columns first, in hub order"
    for col, ftype in hub.items():
        assert ds.features[col] == ftype, col
    assert tuple(list(ds.features)[len(hub) :]) == extra


# --------------------------------------------------------------------------------------------------
# Real files (counts from SOURCE.md)
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mirror_loads():
    if not MIRROR.is_dir():
        pytest.skip(f"local data mirror {MIRROR} (SEMCAL_DATA_DIR) does not exist")
    return {
        "goemotions": D.load("goemotions", data_dir=MIRROR),
        "civil_comments": D.load("civil_comments", data_dir=MIRROR),
        "nq_open": D.load("nq_open", data_dir=MIRROR),
        "triviaqa": D.load("triviaqa", data_dir=MIRROR),
        "hotpotqa": D.load("hotpotqa", data_dir=MIRROR),
    }


@needs_mirror
def test_real_split_counts_match_source_md(mirror_loads):
    counts = {name: {s: len(ds) for s, ds in dd.items()} for name, dd in mirror_loads.items()}
    assert counts == {
        "goemotions": {"train": 43_410, "validation": 5_426},
        "civil_comments": {"train": 4_960},
        "nq_open": {"validation": 3_610, "efficientqa_validation": 1_800, "train_sample": 8_757},
        "triviaqa": {"validation": 8_837},
        "hotpotqa": {"validation": 3_700, "train": 8_148},
    }
    assert all(n == 0 for dd in mirror_loads.values() for n in D.skipped_rows(dd).values())


@needs_mirror
def test_real_schema_equals_hub_schema(mirror_loads):
    for name, dd in mirror_loads.items():
        extra = ("toxicity_annotator_count",) if name == "civil_comments" else ()
        for ds in dd.values():
            assert_hub_schema(ds, name, extra)


@needs_mirror
def test_goemotions_labels_and_single_label_counts(mirror_loads):
    names = (MIRROR / "goemotions" / "emotions.txt").read_text().split()
    assert D.goemotions_label_names() == names and len(names) == 28
    dd = mirror_loads["goemotions"]
    assert dd["train"].features["labels"].feature.names == names
    # SOURCE.md: rows with 1 label
    assert len(D.single_label(dd["train"])) == 36_308
    assert len(D.single_label(dd["validation"])) == 4_548
    assert len(D.multi_label(dd["validation"])) == 809 + 62 + 7
    # first dev line, re-read by hand
    text, labels, cid = (MIRROR / "goemotions" / "dev.tsv").read_text().split("\n")[0].split("\t")
    row = dd["validation"][0]
    assert (row["text"], row["labels"], row["id"]) == (text, [int(x) for x in labels.split(",")], cid)
    counts = D.goemotions_label_counts(dd["validation"])
    assert len(counts) == 28 and sum(counts) == 4_548 + 2 * 809 + 3 * 62 + 4 * 7


@needs_mirror
def test_civil_comments_real_subsets(mirror_loads):
    ds = mirror_loads["civil_comments"]["train"]
    with open(MIRROR / "civil_comments" / "train_sample.csv", newline="", encoding="utf-8") as f:
        raw = list(csv.DictReader(f))
    ref_amb = sum(0.2 < float(r["target"]) < 0.8 for r in raw)  # float64 on the original strings
    assert ref_amb == 445
    amb = D.civil_comments_subset(ds, "ambiguous")
    clear = D.civil_comments_subset(ds, "clear")
    assert len(amb) == 445 and len(clear) == 4_960 - 445
    assert len(D.civil_comments_subset(ds, "full")) == 4_960
    # SOURCE.md: all 445 ambiguous rows have >= 10 raters; 656 rows overall do
    assert len(D.civil_comments_subset(ds, "ambiguous", min_annotators=10)) == 445
    assert len(D.civil_comments_subset(ds, "full", min_annotators=10)) == 656
    # 0.3 <= target <= 0.7 is 425 rows; the open band (0.3, 0.7) excludes exact 0.3 / 0.7
    ref_open = sum(0.3 < float(r["target"]) < 0.7 for r in raw)
    assert len(D.civil_comments_subset(ds, band=(0.3, 0.7))) == ref_open
    assert ds[0]["toxicity_annotator_count"] == int(raw[0]["toxicity_annotator_count"])
    assert ds[4]["text"] == raw[4]["comment_text"]


@needs_mirror
def test_nq_open_rows_match_raw_files(mirror_loads):
    dd = mirror_loads["nq_open"]
    last = json.loads((MIRROR / "nq_open" / "NQ-open.dev.jsonl").read_text().strip().split("\n")[-1])
    assert dd["validation"][-1] == {"question": last["question"], "answer": last["answer"]}
    assert dd["train_sample"][0] == {"question": "who sings does he love me with reba", "answer": ["Linda Davis"]}


@needs_mirror
def test_triviaqa_aliases_and_normalisation(mirror_loads):
    ds = mirror_loads["triviaqa"]["validation"]
    assert len(set(ds["question_id"])) == len(ds)
    assert ds[0]["question_id"] == "topics-dpr-trivia-dev-000000"
    idx = ds["question"].index("What are the international registration letters of a vehicle from Belize?")
    ans = ds[idx]["answer"]
    assert ans["aliases"] == ["Bh.", "BH (disambiguation)", "BH", "Bh", "B H", "B.H.", "B.h."]
    # hand-normalised: lowercase, punctuation -> space, collapse, dedupe keeping first
    assert ans["normalized_aliases"] == ["bh", "bh disambiguation", "b h"]
    assert ans["value"] is None and ans["normalized_value"] is None
    assert ds[idx]["entity_pages"] == {"doc_source": [], "filename": [], "title": [], "wiki_context": []}


@needs_mirror
def test_hotpotqa_defaults(mirror_loads):
    val, train = mirror_loads["hotpotqa"]["validation"], mirror_loads["hotpotqa"]["train"]
    assert val[0]["question"] == "Were Scott Derrickson and Ed Wood of the same nationality?"
    assert val[0]["answer"] == "yes" and val[0]["type"] == "comparison" and val[0]["level"] is None
    assert len(set(val["id"])) == 3_700 and len(set(train["id"])) == 8_148
    assert train[0]["id"] == "r1searcher-stage-2-1" and train[0]["type"] is None
    assert set(val["type"]) == {"bridge", "comparison"}


@needs_mirror
def test_missing_split_files_are_named():
    cases = [
        ("goemotions", "test", "test.tsv"),
        ("triviaqa", "test", "topics.dpr.trivia.test.txt"),
        ("nq_open", "train", "NQ-open.train.jsonl"),
        ("civil_comments", "validation", "test_public_expanded.csv"),
    ]
    for name, split, fname in cases:
        with pytest.raises(D.MissingSplitFileError) as e:
            D.load(name, split, data_dir=MIRROR)
        msg = str(e.value)
        assert str(MIRROR / D.get_spec(name).name / fname) in msg
        assert f"split {split!r}" in msg and "--metadata" in msg and '"split"' in msg


@needs_mirror
def test_msmarco_local_mirror_explains_hub_need():
    """Only the test sample has questions: another split names dev_as_references.json (no query text), the
    hub-schema file that would provide it and the split that exists."""
    with pytest.raises(D.MissingSplitFileError, match="no query text") as e:
        D.load("msmarco", "validation", data_dir=MIRROR)
    msg = str(e.value)
    assert "dev_as_references.json" in msg and "validation.jsonl" in msg
    assert "msmarco_v1.1_test_qa_1000.parquet" in msg and "available under this data dir: test." in msg
    assert sorted(D.load("msmarco", data_dir=MIRROR)) == ["test"]  # split=None: every split the mirror has


@needs_mirror
def test_msmarco_local_test_sample_from_the_parquet():
    """msmarco_v1.1_test_qa_1000.parquet (SOURCE.md: 1,000 rows; 877 with one answer, 116 with two, 7 with
    three): the hub schema, every row kept, answers = generation_gt lists, re-read with pyarrow here."""
    import pyarrow.parquet as pq

    path = MIRROR / "msmarco" / "msmarco_v1.1_test_qa_1000.parquet"
    ref = pq.read_table(path).to_pylist()
    ds = D.load("msmarco", "test", data_dir=MIRROR)
    assert_hub_schema(ds, "msmarco")
    assert len(ref) == len(ds) == 1000 and D.skipped_rows(ds) == 0
    assert ds["query"] == [r["query"] for r in ref]
    assert ds["answers"] == [list(r["generation_gt"]) for r in ref]
    assert ds["query_id"] == [r["qid"] for r in ref]
    assert sorted(Counter(len(a) for a in ds["answers"]).items()) == [(1, 877), (2, 116), (3, 7)]
    assert all(isinstance(a, str) and a for answers in ds["answers"] for a in answers)
    assert ds[0]["query"] == "does human hair stop squirrels" and ds[0]["answers"] == ["Yes"]
    assert ds[0]["passages"] == {"is_selected": [], "passage_text": [], "url": []} and ds[0]["query_type"] is None
    # every row is a scorable QA example (no "No Answer Present." row in the sample)
    from semcal_eval.data.fields import qa_example

    assert sum(qa_example("msmarco", r) is not None for r in ds) == 1000
    assert qa_example("msmarco", ds[2]) == ("what is a apothem", ref[2]["generation_gt"])


@needs_mirror
def test_msmarco_lm_eval_hook_evaluates_the_mirrors_test_sample(caplog):
    """The QA tasks name no split: from the mirror they get its test sample (logged), from a folder that has
    the standard validation split (the fixture) that split, and a named split is always honoured."""
    with caplog.at_level(logging.INFO, logger="semcal_eval.data"):
        dd = D.lm_eval_dataset("msmarco", data_dir=MIRROR)
    assert len(dd["eval"]) == 1000 and dd["eval"][0]["query_id"] == 0
    assert "has no 'validation' split; evaluating its 'test' split" in caplog.text
    assert len(D.lm_eval_dataset("msmarco", data_dir=FIXTURES)["eval"]) == 4  # validation.jsonl
    with pytest.raises(D.MissingSplitFileError, match="no query text"):
        D.lm_eval_dataset("msmarco", split="validation", data_dir=MIRROR)
    # the QA task's own hook: 1,000 documents with the question and gold list the tasks read
    from semcal_eval.qa.task import load as qa_load

    docs = qa_load(qa_dataset="msmarco", data_dir=str(MIRROR))["eval"]
    assert len(docs) == 1000 and docs[0]["qa_question"] == "does human hair stop squirrels"


@needs_mirror
def test_env_var_selects_mirror(monkeypatch):
    monkeypatch.setenv(D.ENV_VAR, str(MIRROR))
    assert len(D.load("nq_open", "efficientqa_validation")) == 1_800


# --------------------------------------------------------------------------------------------------
# Fixtures in the hub schema / raw format (synthetic rows)
# --------------------------------------------------------------------------------------------------


def test_msmarco_hub_schema_fixture(caplog):
    with caplog.at_level(logging.WARNING, logger="semcal_eval.data"):
        ds = D.load("msmarco", "validation", data_dir=FIXTURES)
    assert_hub_schema(ds, "msmarco")
    assert len(ds) == 4
    assert D.load_report(ds).skipped == 3
    assert D.load_report(ds).reasons == {"missing query": 2, "missing answers": 1}
    assert "skipped 3 row(s)" in caplog.text
    assert ds[0]["passages"]["is_selected"] == [1, 0] and ds[0]["query_id"] == 900001
    minimal = ds[2]  # only query + answers in the file: documented defaults
    assert minimal["query_id"] == 2 and minimal["query_type"] is None
    assert minimal["passages"] == {"is_selected": [], "passage_text": [], "url": []}
    assert minimal["wellFormedAnswers"] == []
    assert ds[3]["answers"] == []  # unanswerable query kept


def test_civil_hub_schema_fixture_skips_and_band():
    ds = D.load("civil_comments", "test", data_dir=FIXTURES)
    assert_hub_schema(ds, "civil_comments")
    assert len(ds) == 7 and D.skipped_rows(ds) == 3
    assert D.load_report(ds).reasons == {"missing text": 2, "missing toxicity": 1}
    # toxicity kept: 0.0, 0.2, 0.2000001, 0.5, 0.8, 1.0, 0.7 -> open band (0.2, 0.8): 3 rows
    amb = D.civil_comments_subset(ds, "ambiguous")
    assert sorted(round(t, 7) for t in amb["toxicity"]) == [0.2000001, 0.5, 0.7]
    assert len(D.civil_comments_subset(ds, "clear")) == 4
    assert len(D.civil_comments_subset(ds, band=(0.0, 1.0))) == 5  # 0.0 and 1.0 are outside
    only_text = ds.filter(lambda r: r["toxicity"] > 0.69 and r["toxicity"] < 0.71)[0]
    assert only_text["severe_toxicity"] is None and only_text["insult"] is None
    with pytest.raises(ValueError, match="toxicity_annotator_count"):
        D.civil_comments_subset(ds, min_annotators=10)


def test_civil_raw_jigsaw_test_file_fixture():
    ds = D.load("civil_comments", "validation", data_dir=FIXTURES)  # test_public_expanded.csv
    assert_hub_schema(ds, "civil_comments", ("toxicity_annotator_count",))
    assert len(ds) == 5 and D.load_report(ds).reasons == {"missing toxicity": 1}
    assert ds[0]["text"] == 'A synthetic comment,\nwith an embedded newline and a "quoted" word.'
    assert ds["toxicity_annotator_count"] == [4, 10, 5, 60, 12]
    assert ds[4]["obscene"] is None
    assert len(D.civil_comments_subset(ds, "ambiguous")) == 3  # 0.3, 0.4, 0.5
    assert len(D.civil_comments_subset(ds, "ambiguous", min_annotators=10)) == 2
    assert len(D.civil_comments_subset(ds, "clear", min_annotators=12)) == 1  # 0.9 with 12 raters


def test_fixture_dir_split_none_lists_available():
    dd = D.load("civil_comments", data_dir=FIXTURES)
    assert sorted(dd) == ["test", "validation"]
    assert D.local_splits("msmarco", FIXTURES) == ["validation"]


# --------------------------------------------------------------------------------------------------
# Skip counting on raw formats, errors, validation
# --------------------------------------------------------------------------------------------------


def test_skip_counting_raw_formats(tmp_path, caplog):
    (tmp_path / "goemotions").mkdir()
    (tmp_path / "goemotions" / "dev.tsv").write_text(
        "fine row\t3,10\tc1\n"
        "bad label id\t28\tc2\n"
        "   \t4\tc3\n"
        "no labels\t\tc4\n"
        'quotes "kept" as is\t27\tc5\n',
        encoding="utf-8",
    )
    (tmp_path / "nq_open").mkdir()
    (tmp_path / "nq_open" / "NQ-open.dev.jsonl").write_text(
        '{"question": "q1", "answer": ["a"]}\n{"question": "q2", "answer": []}\n{"answer": ["x"]}\n'
    )
    (tmp_path / "triviaqa").mkdir()
    (tmp_path / "triviaqa" / "topics.dpr.trivia.dev.txt").write_text(
        "ok?\t['The Answer', 'answer']\nbroken?\tnot a list\n"
    )
    with caplog.at_level(logging.WARNING, logger="semcal_eval.data"):
        go = D.load("goemotions", "validation", data_dir=tmp_path)
        nq = D.load("nq_open", "validation", data_dir=tmp_path)
        tq = D.load("triviaqa", "validation", data_dir=tmp_path)
    assert go["id"] == ["c1", "c5"] and go[1]["text"] == 'quotes "kept" as is'
    assert D.load_report(go).reasons == {"missing labels": 2, "missing text": 1}
    assert D.load_report(nq).reasons == {"missing answer": 1, "missing question": 1} and len(nq) == 1
    assert D.load_report(tq).skipped == 1 and tq[0]["answer"]["normalized_aliases"] == ["answer"]
    assert caplog.text.count("skipped") == 3


def test_split_with_no_usable_rows_is_an_error(tmp_path):
    (tmp_path / "nq_open").mkdir()
    (tmp_path / "nq_open" / "validation.jsonl").write_text('{"question": "q", "answer": []}\n')
    with pytest.raises(ValueError, match="no usable rows"):
        D.load("nq_open", "validation", data_dir=tmp_path)


def test_missing_file_in_empty_dir_and_bad_data_dir(tmp_path):
    with pytest.raises(D.MissingSplitFileError, match="dev.tsv") as e:
        D.load("goemotions", "validation", data_dir=tmp_path)
    assert "google-research goemotions/data/dev.tsv" in str(e.value)
    with pytest.raises(FileNotFoundError, match="not a directory"):
        D.load("goemotions", data_dir=tmp_path / "nope")
    with pytest.raises(D.MissingSplitFileError, match="no split 'dev'"):
        D.load("hotpotqa", "dev", data_dir=tmp_path)


def test_goemotions_label_file_mismatch_is_an_error(tmp_path):
    (tmp_path / "goemotions").mkdir()
    (tmp_path / "goemotions" / "dev.tsv").write_text("x\t1\tc1\n")
    (tmp_path / "goemotions" / "emotions.txt").write_text("\n".join(reversed(D.GOEMOTIONS_LABELS)))
    with pytest.raises(ValueError, match="misread"):
        D.load("goemotions", "validation", data_dir=tmp_path)


def test_unknown_dataset_lists_known_names():
    with pytest.raises(ValueError) as e:
        D.load("imagenet")
    for name in D.known_datasets():
        assert name in str(e.value)
    assert D.get_spec("Trivia_QA").name == "triviaqa"


def test_qa_fields_read_the_hub_schema():
    """The QA field table (question field, golds, unanswerable markers) names fields of the loader's schema."""
    for name, f in D.QA_FIELDS.items():
        assert name in D.SPECS and f.question in D.HUB_FEATURES[name], name
    ds = D.load("msmarco", "validation", data_dir=FIXTURES)
    assert [D.qa_question("msmarco", r) for r in ds][:1] == ["how long to bake synthetic muffins"]
    assert [D.qa_golds("msmarco", r) for r in ds] == [
        ["About 12 minutes at 180 C."], ["A made-up river in a test fixture."], ["Blue", "Light blue"], []
    ]
    assert D.qa_golds("msmarco", {"query": "q", "answers": ["No Answer Present.", "Yes"]}) == ["Yes"]
    with pytest.raises(ValueError, match=r"choose one of \['hotpotqa', 'msmarco', 'nq_open', 'triviaqa'\]"):
        D.qa_fields("goemotions")


def test_generic_loader_names_no_dataset():
    """Dataset-specific steps are hooks on the spec rows, never `if spec.name == ...` in the loader."""
    import importlib
    import inspect
    import re

    names = "|".join(D.SPECS)
    branch = re.compile(rf"(==|!=|\bin)\s*[(\[{{]?\s*['\"]({names})['\"]")
    for mod in ("load", "local", "required", "source"):
        src = inspect.getsource(importlib.import_module(f"semcal_eval.data.{mod}"))
        assert "spec.name ==" not in src and not branch.search(src), mod
    assert branch.search('if spec.name == "goemotions":') and branch.search("if name in ('msmarco', 'x'):")


@pytest.mark.parametrize(
    "band", [(0.8, 0.2), (0.5, 0.5), (-0.1, 0.5), (0.2, 1.1), (float("nan"), 0.5), (0.1,), "ab", None, (0.1, "x")]
)
def test_band_validation(band):
    ds = D.load("civil_comments", "test", data_dir=FIXTURES)
    with pytest.raises(ValueError, match="band"):
        D.civil_comments_subset(ds, band=band)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "10"])
def test_min_annotators_validation(bad):
    ds = D.load("civil_comments", "validation", data_dir=FIXTURES)
    with pytest.raises(ValueError, match="min_annotators"):
        D.civil_comments_subset(ds, min_annotators=bad)


def test_subset_name_and_extreme_band():
    ds = D.load("civil_comments", "validation", data_dir=FIXTURES)
    with pytest.raises(ValueError, match="subset"):
        D.civil_comments_subset(ds, "ambiguos")
    assert D.validate_band((0, 1)) == (0.0, 1.0)
    # band (0, 1): only exact 0.0 and 1.0 are clear
    assert len(D.civil_comments_subset(ds, "clear", band=(0, 1))) == 1


def test_normalize_triviaqa_answer_hand_cases():
    assert D.normalize_triviaqa_answer("Scorpio (disambiguation)") == "scorpio disambiguation"
    assert D.normalize_triviaqa_answer("The  Who’s_Next") == "who s next"
    assert D.normalize_triviaqa_answer("An apple a day") == "apple day"
    assert D.normalize_triviaqa_answer("") == ""


# --------------------------------------------------------------------------------------------------
# Hub path (datasets.load_dataset replaced by an offline stand-in that returns hub-schema data)
# --------------------------------------------------------------------------------------------------


def test_hub_path_arguments_and_postprocessing(monkeypatch):
    rows = [json.loads(line) for line in (FIXTURES / "civil_comments" / "test.jsonl").read_text().splitlines()]
    feats = D.HUB_FEATURES["civil_comments"]
    full = [{k: r.get(k) for k in feats} for r in rows]
    calls = []

    def fake_load_dataset(path, name=None, split=None, **kw):
        calls.append((path, name, split))
        dd = datasets.DatasetDict(
            {s: datasets.Dataset.from_list(full, features=feats) for s in ("train", "validation", "test")}
        )
        return dd if split is None else dd[split]

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    ds = D.load("civil_comments", "test")
    assert calls == [("google/civil_comments", None, "test")]
    assert len(ds) == 7 and D.load_report(ds).skipped == 3 and D.load_report(ds).source == "hub:google/civil_comments"
    hook = D.lm_eval_dataset("civil_comments", version=1.0, pretrained="semcal:x")
    assert sorted(hook) == ["eval", "train", "validation"] and len(hook["eval"]) == 7
    with pytest.raises(ValueError, match="only in the local mirror"):
        D.load("nq_open", "train_sample", data_dir="hub")


def test_hub_unreachable_error_points_to_mirror(monkeypatch):
    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach the Hub")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(ConnectionError) as e:
        D.load("nq_open", "validation", data_dir="hub")
    notes = getattr(e.value, "__notes__", [])
    assert any(D.ENV_VAR in n and "google-research-datasets/nq_open" in n for n in notes)


# --------------------------------------------------------------------------------------------------
# lm-eval custom_dataset hook
# --------------------------------------------------------------------------------------------------


@needs_mirror
def test_lm_eval_dataset_split_selection():
    dd = D.lm_eval_dataset("nq_open", data_dir=str(MIRROR), version=0.0, config_source="x.yaml")
    assert len(dd["eval"]) == 3_610 and len(dd["validation"]) == 3_610 and "train" not in dd
    dd = D.lm_eval_dataset("nq_open", split="efficientqa_validation", train_split="train_sample", data_dir=MIRROR)
    assert (len(dd["eval"]), len(dd["train"]), len(dd["validation"])) == (1_800, 8_757, 3_610)
    with pytest.raises(D.MissingSplitFileError, match=r"--metadata '\{\"split\": \"validation\"\}'"):
        D.lm_eval_dataset("goemotions", data_dir=MIRROR)  # default eval split is test, absent here
    hook = D.make_lm_eval_loader("hotpotqa")
    assert len(hook(data_dir=MIRROR, name="unrelated metadata key")["eval"]) == 3_700


@needs_mirror
def test_metadata_split_reaches_hook_through_task_manager(monkeypatch):
    from lm_eval.tasks import TaskManager

    monkeypatch.setenv(D.ENV_VAR, str(MIRROR))
    sizes = {}
    for meta in (None, {"split": "efficientqa_validation"}):
        tm = TaskManager(include_path=str(TASKS), include_defaults=False, metadata=meta)
        task = tm.load(["semcal_data_probe"])["tasks"]["semcal_data_probe"]
        sizes[str(meta)] = len(task.eval_docs)
    assert sizes == {"None": 3_610, "{'split': 'efficientqa_validation'}": 1_800}


@pytest.mark.slow  # a CLI subprocess: indexes lm-eval's own task folder (~40-120 s on 2 cores)
@needs_mirror
def test_cli_metadata_reaches_hook(tmp_path):
    env = {
        **os.environ,
        D.ENV_VAR: str(MIRROR),
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    cmd = [
        sys.executable, "-m", "lm_eval", "run", "--model", "dummy", "--tasks", "semcal_data_probe",
        "--include_path", str(TASKS), "--metadata", '{"split": "efficientqa_validation"}',
        "--limit", "2", "--output_path", str(tmp_path),
    ]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (results,) = tmp_path.rglob("results_*.json")
    out = json.loads(results.read_text())
    assert out["n-samples"]["semcal_data_probe"] == {"original": 1_800, "effective": 2}
    assert out["configs"]["semcal_data_probe"]["metadata"]["split"] == "efficientqa_validation"


def test_load_report_is_semcals_own_record_and_never_guessed():
    """The skip report lives beside the dataset, not on it; a derived dataset has none until semcal carries it."""
    from collections import Counter

    from semcal_eval.data.required import attach_skips

    ds = attach_skips(datasets.Dataset.from_dict({"x": [1, 2, 3]}), Counter({"missing x": 2}), "here")
    assert D.load_report(ds) == D.LoadReport(2, {"missing x": 2}, "here")
    assert not [k for k in vars(ds) if k.startswith("semcal")], "nothing is set on the datasets object"
    flt = ds.filter(lambda r: r["x"] > 1)
    assert D.load_report(flt) is None and D.skipped_rows(flt) == 0
    D.carry_report(ds, flt, subset={"rows_after": 2})
    assert D.load_report(flt) == D.LoadReport(2, {"missing x": 2}, "here", {"rows_after": 2})
    with pytest.raises(ValueError, match="no LoadReport"):
        D.carry_report(flt.select([0]), ds)
