"""The QA task family (tasks/{nq_open,triviaqa,hotpotqa,msmarco}): task construction through lm-eval's own
TaskManager, requests, filters, the --gen_kwargs guard, and real end-to-end runs with SmolLM2."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest

from semcal_eval import TASKS_DIR
from semcal_eval.qa import QA_DEFAULTS, conf_cluster_share, conf_entropy, qa_settings

FIXTURES = Path(__file__).resolve().parent / "fixtures"
DATASETS = ("nq_open", "triviaqa", "hotpotqa", "msmarco")


def _tm(include_defaults: bool = False, **metadata):
    from lm_eval.tasks import TaskManager

    # lm-eval's own ~10k task YAMLs take seconds to index; only the registry test needs them
    return TaskManager(include_path=str(TASKS_DIR), include_defaults=include_defaults, metadata=metadata)


def _task(name: str, **metadata):
    return _tm(**metadata).load([name])["tasks"][name]


def _meta(ds: str, **kw) -> dict:
    base = {"split": "validation", **kw}
    if ds == "msmarco":
        base["data_dir"] = str(FIXTURES)  # hub-schema fixture: no local MS MARCO questions exist
    return base


# ---------------------------------------------------------------- registry and construction (no model)


def test_task_names_registered_without_clashing_with_lm_eval():
    tm = _tm(include_defaults=True)
    names = set(tm.all_tasks)
    for ds in DATASETS:
        for v in ("semagree", "semagree_judges", "verbalized"):
            assert f"{ds}_{v}" in names
    # lm-eval's own tasks of the same datasets are still there, untouched
    assert {"nq_open", "triviaqa"} <= names


@pytest.mark.parametrize("ds", DATASETS)
def test_each_dataset_builds_requests(data_dir, ds):
    task = _task(f"{ds}_semagree", **_meta(ds, num_samples=4, temperature=0.7))
    docs = list(task.eval_docs)
    assert docs and all(d["qa_golds"] and d["qa_question"] for d in docs)
    task.build_all_requests(limit=2)
    inst = task.instances
    assert len(inst) == 4  # greedy + sampled per question
    greedy, sampled = inst[0], inst[1]
    assert (greedy.idx, greedy.repeats, sampled.idx, sampled.repeats) == (0, 1, 1, 4)
    assert greedy.doc is sampled.doc
    gk, sk = greedy.arguments[1], sampled.arguments[1]
    assert gk["do_sample"] is False and "temperature" not in gk
    assert sk["do_sample"] is True and sk["temperature"] == 0.7 and sk["top_k"] == 0 and sk["top_p"] == 1.0
    assert gk["until"] == sk["until"] == ["\n", "Q:"] and gk["max_gen_toks"] == sk["max_gen_toks"] == 32
    ctx = greedy.arguments[0]
    assert ctx.endswith(f"Q: {greedy.doc['qa_question']}\nA:") and "short answer" in ctx


def test_msmarco_fixture_drops_unanswerable_with_warning(caplog):
    from semcal_eval.data import load
    from semcal_eval.qa import make_process_docs

    ds = load("msmarco", "validation", data_dir=FIXTURES)
    process_docs = make_process_docs("query", lambda d: d["answers"], unanswerable=("No Answer Present.",))
    with caplog.at_level(logging.WARNING, logger="semcal_eval.qa"):
        kept = process_docs(ds)
    n_bad = sum(1 for d in ds if not [a for a in d["answers"] if a.strip() and a != "No Answer Present."])
    assert n_bad >= 1 and len(kept) == len(ds) - n_bad
    assert ["Blue", "Light blue"] in kept["qa_golds"] and all(kept["qa_golds"])
    assert any(f"dropped {n_bad} of {len(ds)}" in r.message for r in caplog.records)
    assert process_docs(ds) is kept  # memoised: lm-eval calls process_docs on every eval_docs access
    task = _task("msmarco_semagree", **_meta("msmarco"))
    assert list(task.eval_docs["qa_golds"]) == list(kept["qa_golds"])


def test_gen_kwargs_cannot_override_sampling(data_dir):
    task = _task("nq_open_semagree", split="validation")
    task.set_config(key="generation_kwargs", value={"temperature": 0.2, "do_sample": True}, update=True)
    with pytest.raises(ValueError, match=r"--gen_kwargs would change \['do_sample', 'temperature'\].*--metadata"):
        task.build_all_requests(limit=1)
    ok = _task("nq_open_semagree", split="validation")
    ok.set_config(key="generation_kwargs", value={"max_gen_toks": 8}, update=True)  # allowed, warned
    ok.build_all_requests(limit=1)
    assert [i.arguments[1]["max_gen_toks"] for i in ok.instances] == [8, 8]


def test_settings_validation_and_k1():
    assert qa_settings(None) == {**QA_DEFAULTS, "judges": None}
    assert qa_settings({"judges": "f1+embed"})["judges"] == ["f1", "embed"]
    with pytest.raises(ValueError, match="K ≥ 2"):
        qa_settings({"num_samples": 1})
    with pytest.raises(ValueError, match="judges"):
        qa_settings({"judges": ["f1", "bleu"]})
    with pytest.raises(ValueError, match="temperature"):
        qa_settings({"temperature": 0})
    assert qa_settings({"mode": "verbalized", "num_samples": 1})["num_samples"] == 1  # K unused there


def test_metadata_judges_replace_filters(data_dir):
    task = _task("nq_open_semagree", split="validation", judges=["f1", "em"], correct_threshold=0.8)
    assert [f.name for f in task._filters] == ["judge_f1", "judge_em"]


# ---------------------------------------------------------------- filters and process_results on given generations


def test_judge_filter_and_process_results(data_dir):
    task = _task("nq_open_semagree", split="validation", num_samples=4)
    task.build_all_requests(limit=2)
    gold0 = task.instances[0].doc["qa_golds"][0]
    gens = {0: [f" {gold0}\n"], 1: [f" {gold0}", f"{gold0}!", " something else", ""],
            2: [" no idea"], 3: [" no idea", " a guess", " another", " no idea"]}
    for k, inst in enumerate(task.instances):
        inst.resps = gens[k]
    task.apply_filters()
    f = task.instances[1].filtered_resps["judge_f1"]
    rec = json.loads(f)
    assert task.instances[0].filtered_resps["judge_f1"] == gold0
    assert rec["cluster_ids"] == [0, 0, 1, 2] and rec["greedy_cluster"] == 0
    assert rec["conf"] == conf_cluster_share(0, [0, 0, 1, 2]) == 0.5
    assert rec["conf_entropy"] == pytest.approx(conf_entropy([0, 0, 1, 2]))
    assert rec["correct"] == 1 and rec["em"] == 1
    res0 = task.process_results(task.instances[0].doc, [i.filtered_resps["judge_f1"] for i in task.instances[:2]])
    assert res0["acc"] == {"conf": 0.5, "correct": 1}
    assert res0["auroc_conf_entropy"]["conf"] == pytest.approx(1 - (-(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25))) / math.log(4))
    rec1 = json.loads(task.instances[3].filtered_resps["judge_f1"])
    assert rec1["conf"] == 0.5 and rec1["cluster_ids"] == [0, 1, 2, 0]
    with pytest.raises(TypeError, match="JudgeFilter"):
        task.process_results(task.instances[0].doc, ["x", "y"])


def test_verbalized_filter(data_dir):
    task = _task("nq_open_verbalized", split="validation")
    task.build_all_requests(limit=2)
    assert len(task.instances) == 2 and all(i.repeats == 1 for i in task.instances)
    gold = task.instances[0].doc["qa_golds"][0]
    task.instances[0].resps = [f" {gold}\nConfidence: 0.8"]
    task.instances[1].resps = [" dunno"]
    task.apply_filters()
    r0 = json.loads(task.instances[0].filtered_resps["verbalized"])
    r1 = json.loads(task.instances[1].filtered_resps["verbalized"])
    assert (r0["greedy"], r0["conf"], r0["conf_parsed"], r0["correct"]) == (gold, 0.8, True, 1)
    assert (r1["conf"], r1["conf_parsed"]) == (0.5, False)
    res = task.process_results(task.instances[1].doc, [task.instances[1].filtered_resps["verbalized"]])
    assert res["conf_parse_rate"]["correct"] == 0 and res["acc"]["conf"] == 0.5


# ---------------------------------------------------------------- real end-to-end runs with SmolLM2-135M


@pytest.fixture(scope="module")
def smol_hflm(smollm2_path):
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=smollm2_path, dtype="float32", device="cpu", batch_size=8)


def _run(lm, task, limit, **metadata):
    from lm_eval import simple_evaluate

    return simple_evaluate(model=lm, tasks=[task], task_manager=_tm(**metadata), limit=limit, log_samples=True,
                           random_seed=0, numpy_random_seed=0, torch_random_seed=0, fewshot_random_seed=0,
                           bootstrap_iters=0)


@pytest.mark.slow
def test_end_to_end_nq_open_k3_deterministic(data_dir, smol_hflm):
    out = _run(smol_hflm, "nq_open_semagree", 3, split="validation", num_samples=3)
    res = out["results"]["nq_open_semagree"]
    for m in ("acc", "em", "ece_uw10", "ece_uw15", "ece_em15", "brier_conf", "nll_conf", "aurc", "auroc_conf"):
        assert f"{m},judge_f1" in res
    assert 0.0 <= res["acc,judge_f1"] <= 1.0 and 0.0 <= res["brier_conf,judge_f1"] <= 1.0
    samples = out["samples"]["nq_open_semagree"]
    assert len(samples) == 3
    confs = []
    for s in samples:
        greedy_resps, sampled_resps = s["resps"]
        assert len(greedy_resps) == 1 and len(sampled_resps) == 3
        rec = json.loads(s["filtered_resps"][1])
        assert len(rec["samples"]) == len(rec["cluster_ids"]) == 3
        # the logged record recomputes the logged metric item
        assert s["acc"]["conf"] == conf_cluster_share(rec["greedy_cluster"], rec["cluster_ids"]) == rec["conf"]
        confs.append(rec["conf"])
    again = _run(smol_hflm, "nq_open_semagree", 3, split="validation", num_samples=3)
    assert [s["resps"] for s in again["samples"]["nq_open_semagree"]] == [s["resps"] for s in samples]


@pytest.mark.slow
def test_end_to_end_msmarco_fixture(smol_hflm):
    out = _run(smol_hflm, "msmarco_semagree", 2, **_meta("msmarco", num_samples=2))
    assert "acc,judge_f1" in out["results"]["msmarco_semagree"]
    assert len(out["samples"]["msmarco_semagree"]) == 2


@pytest.mark.slow
def test_end_to_end_verbalized(data_dir, smol_hflm):
    out = _run(smol_hflm, "triviaqa_verbalized", 2, split="validation")
    res = out["results"]["triviaqa_verbalized"]
    assert 0.0 <= res["conf_parse_rate,verbalized"] <= 1.0 and "ece_uw10,verbalized" in res
    for s in out["samples"]["triviaqa_verbalized"]:
        assert len(s["resps"]) == 1 and len(s["resps"][0]) == 1  # one greedy answer, no samples
        rec = json.loads(s["filtered_resps"][0])
        assert rec["raw"] == s["resps"][0][0] and s["acc"]["conf"] == rec["conf"]
