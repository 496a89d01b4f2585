"""The QA task family (tasks/{nq_open,triviaqa,hotpotqa,msmarco} on the shared template tasks/qa_common):
task construction through lm-eval's own TaskManager, data, requests, filters, the one per-document record,
the --gen_kwargs guard, and real end-to-end runs with SmolLM2."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import numpy as np
import pytest

from semcal_eval import TASKS_DIR
from semcal_eval.qa import conf_cluster_share, conf_entropy
from semcal_eval.qa.settings import QASettings
from semcal_eval.harness.base import unwrap
from semcal_eval.runs import row_record

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
    # the QA tasks come from the family folders; the template folder holds no task (its files are not *.yaml)
    qa = {n: e.yaml_path for n, e in tm.task_index.items() if e.yaml_path and "qa_common" in str(e.yaml_path)}
    assert qa == {}
    for ds in DATASETS:
        assert tm.task_index[f"{ds}_semagree"].yaml_path.parent.name == ds


VARIANTS = ("semagree", "semagree_judges", "verbalized")


def test_families_differ_only_by_dataset():
    """The 12 QA tasks are one template per variant; a family file names only its task and its dataset."""
    from semcal_eval.harness.task_yaml import load_task_yaml

    for v in VARIANTS:
        merged = {}
        for ds in DATASETS:
            path = TASKS_DIR / ds / f"{ds}_{v}.yaml"
            own = yaml_keys(path)
            assert own == {"include", "task", "dataset_kwargs"}, (path, own)
            cfg = load_task_yaml(path)
            assert cfg.pop("task") == f"{ds}_{v}" and cfg.pop("dataset_kwargs") == {"qa_dataset": ds}
            merged[ds] = cfg
        assert all(merged[ds] == merged["nq_open"] for ds in DATASETS), v
        assert merged["nq_open"]["class"] == "!function utils.QATask"


def yaml_keys(path: Path) -> set[str]:
    import yaml

    return set(yaml.safe_load(path.read_text()))


def test_metric_lists_follow_the_metric_table():
    """Every metric_list entry is {metric: X, aggregation: semcal_X, higher_is_better: the table's value}."""
    from semcal_eval.harness.aggregations import declared_metric_list, metric_list
    from semcal_eval.harness.task_yaml import load_task_yaml

    for v in VARIANTS:
        ml = declared_metric_list(load_task_yaml(TASKS_DIR / "nq_open" / f"nq_open_{v}.yaml"))
        assert ml and ml == metric_list([e["metric"] for e in ml]), v


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
    # QA sampling's top-k has its own name: "top_k" is Semantic Softmax's K in the same --metadata
    assert QASettings.from_metadata({"top_k": 50}).sample_top_k == 0
    assert QASettings.from_metadata({"sample_top_k": 7}).sample_top_k == 7
    assert gk["until"] == sk["until"] == ["\n", "Q:"] and gk["max_gen_toks"] == sk["max_gen_toks"] == 32
    ctx = greedy.arguments[0]
    assert ctx.endswith(f"Q: {greedy.doc['qa_question']}\nA:") and "short answer" in ctx


def test_msmarco_fixture_drops_unanswerable_with_warning(caplog):
    from semcal_eval.data import load
    from semcal_eval.qa.task import qa_docs

    ds = load("msmarco", "validation", data_dir=FIXTURES)
    with caplog.at_level(logging.WARNING, logger="semcal_eval.qa"):
        kept = qa_docs("msmarco", ds)
    n_bad = sum(1 for d in ds if not [a for a in d["answers"] if a.strip() and a != "No Answer Present."])
    assert n_bad >= 1 and len(kept) == len(ds) - n_bad
    assert ["Blue", "Light blue"] in kept["qa_golds"] and all(kept["qa_golds"])
    assert any(f"dropped {n_bad} of {len(ds)}" in r.message for r in caplog.records)
    task = _task("msmarco_semagree", **_meta("msmarco"))
    assert list(task.eval_docs["qa_golds"]) == list(kept["qa_golds"])


def test_qa_docs_none_left_and_unnamed_dataset_raise_clear_errors():
    from datasets import Dataset

    from semcal_eval.qa import EmptyGoldError
    from semcal_eval.qa.task import load, qa_docs

    rows = Dataset.from_list([{"query": "q1", "answers": ["No Answer Present."]}, {"query": "q2", "answers": [""]}])
    with pytest.raises(EmptyGoldError, match="none of the 2 questions"):
        qa_docs("msmarco", rows)
    with pytest.raises(ValueError, match="is not a QA dataset"):
        qa_docs("goemotions", rows)
    with pytest.raises(ValueError, match=r"dataset_kwargs: \{qa_dataset: <name>\}"):
        load(split="validation")


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
    """QASettings (semcal_eval.qa.settings): built and checked once from the task's metadata; a bad value names
    its key and a --metadata that fixes it."""
    assert QASettings.from_metadata(None) == QASettings() and QASettings().judges is None
    assert QASettings.from_metadata(QASettings().as_metadata()) == QASettings()
    assert QASettings.from_metadata({"judges": "f1+embed"}).judges == ("f1", "embed")
    assert QASettings.from_metadata({"tau": 0.3, "num_samples": "5"}).num_samples == 5  # other tasks' keys: ignored
    with pytest.raises(ValueError, match="K ≥ 2"):
        QASettings.from_metadata({"num_samples": 1})
    for bad, key in (({"judges": ["f1", "bleu"]}, "judges"), ({"temperature": 0}, "temperature"),
                     ({"num_samples": 2.5}, "num_samples"), ({"estimator_calibration": "beta"}, "estimator_calibration"),
                     ({"cluster_greedy": "yes"}, "cluster_greedy"), ({"mode": "chat"}, "mode"),
                     ({"min_new_tokens": -1}, "min_new_tokens"), ({"estimators": "msp+bleurt"}, "estimators")):
        with pytest.raises(ValueError, match=rf"QA task: {key}=.*--metadata '\{{\"{key}\": "):
            QASettings.from_metadata(bad)
    assert QASettings.from_metadata({"mode": "verbalized", "num_samples": 1}).num_samples == 1  # K unused there
    with pytest.raises(AttributeError):  # frozen: checked once, never changed after
        QASettings().num_samples = 1  # type: ignore[misc]


def test_metadata_judges_replace_filters(data_dir):
    task = _task("nq_open_semagree", split="validation", judges=["f1", "em"], correct_threshold=0.8)
    names = [f.name for f in task._filters]
    # the judges replace the judge rows; the estimator rows (issue 23) follow, each non-probability score with
    # its cross-fitted isotonic row
    assert names == ["judge_f1", "judge_em", "msp", "perplexity", "perplexity_iso", "token_entropy",
                     "token_entropy_iso", "num_sets", "num_sets_iso", "degree", "degree_iso", "eccentricity",
                     "eccentricity_iso", "eigv", "eigv_iso", "lexsim", "lexsim_iso"]
    task = _task("nq_open_semagree", split="validation", judges="f1", estimators=[])
    assert [f.name for f in task._filters] == ["judge_f1"]
    task = _task("nq_open_semagree", split="validation", estimators="msp+eigv+ptrue", estimator_calibration=None)
    # the template's judge rows: the cover judge (the default, CSR's agreement) and token-F1
    assert [f.name for f in task._filters] == ["judge_cover", "judge_f1", "msp", "eigv", "ptrue"]
    with pytest.raises(ValueError, match="estimators='bleurt'"):
        _task("nq_open_semagree", split="validation", estimators="bleurt")


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
    # one record, the same object under every metric name; the metric table reads each metric's view of it
    record = unwrap(next(iter(res0.values())))
    assert set(res0) == set(task._metric_fn_list) and all(unwrap(v) is record for v in res0.values())
    assert {k: record[k] for k in ("conf", "correct", "em")} == {"conf": 0.5, "correct": 1, "em": 1}
    assert record["conf_entropy"] == pytest.approx(1 - (-(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25))) / math.log(4))
    assert set(record) == {"conf", "correct", "em", "conf_entropy"}
    rec1 = json.loads(task.instances[3].filtered_resps["judge_f1"])
    assert rec1["conf"] == 0.5 and rec1["cluster_ids"] == [0, 1, 2, 0]
    with pytest.raises(TypeError, match="JudgeFilter"):
        task.process_results(task.instances[0].doc, ["x", "y"])


def test_estimator_filters_on_given_generations(data_dir):
    """Issue 23: each estimator row reads the same greedy answer + K samples; the logit rows read the log-probs
    the backend attached to the greedy response; ranking scores report only ranking metrics."""
    from sklearn.isotonic import IsotonicRegression

    from semcal_eval.harness.sampling import GeneratedText

    task = _task("nq_open_semagree", split="validation", num_samples=4)
    task.build_all_requests(limit=6)
    lp = [math.log(0.5), math.log(0.5)]
    for d in range(6):
        g, s = task.instances[2 * d], task.instances[2 * d + 1]
        gold = g.doc["qa_golds"][0]
        right = d % 3 != 2
        g.resps = [GeneratedText(f" {gold if right else 'wrong answer'}\n", lp[: 1 + d % 2], [1.0, 3.0][: 1 + d % 2])]
        s.resps = [f" {gold}", f"{gold}!", " something else", ""] if d % 2 == 0 else [" x y", " x y", " x y", " z"]
    task.apply_filters()
    rec = {name: [json.loads(task.instances[2 * d + 1].filtered_resps[name]) for d in range(6)]
           for name in ("msp", "perplexity", "token_entropy", "num_sets", "degree", "eigv", "eccentricity",
                        "lexsim", "degree_iso")}
    assert rec["msp"][0]["conf"] == pytest.approx(0.5) and rec["msp"][1]["conf"] == pytest.approx(0.25)
    assert rec["perplexity"][1]["score"] == pytest.approx(2.0) and rec["perplexity"][1]["conf"] == pytest.approx(0.5)
    assert rec["token_entropy"][1]["score"] == pytest.approx(2.0)
    assert rec["token_entropy"][1]["conf"] == pytest.approx(math.exp(-2.0))
    # doc 0 samples: gold ≡ gold! (token-F1 1), "something else", "" → 3 sets; W has 4 + 2 ones of 16
    assert rec["num_sets"][0]["score"] == 3 and rec["num_sets"][0]["conf"] == pytest.approx(1 / 3)
    assert rec["degree"][0]["score"] == pytest.approx(1 - 6 / 16)
    assert rec["eigv"][0]["score"] == pytest.approx(3.0)  # three disjoint cliques
    assert rec["num_sets"][1]["score"] == 2 and rec["eigv"][1]["score"] == pytest.approx(2.0)
    assert rec["lexsim"][1]["score"] == pytest.approx(3 / 6)  # 3 identical pairs of 6
    assert [r["correct"] for r in rec["msp"]] == [1, 1, 0, 1, 1, 0]
    docs = [task.instances[2 * d].doc for d in range(6)]

    def results(name, d):
        return task.process_results(docs[d], [task.instances[2 * d + k].filtered_resps[name] for k in (0, 1)])

    assert {"ece_uw10", "brier_conf", "prr", "auroc_conf"} <= set(results("msp", 0))  # a probability
    got = set(results("degree", 0))
    assert {"prr", "prr_ci_lo", "auroc_conf", "auarc", "acc", "acc_at_80cov"} <= got
    assert not {m for m in got if m.startswith(("ece", "brier", "nll"))}  # a ranking score: no calibration metrics
    assert {"ece_uw10", "brier_conf"} <= set(results("degree_iso", 0))
    # the _iso row of fold 0 (even positions) is the isotonic map fitted on fold 1 only
    x = np.array([r["conf"] for r in rec["degree"]])
    y = np.array([r["correct"] for r in rec["degree"]])
    iso = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(x[1::2], y[1::2])
    assert [r["conf"] for r in rec["degree_iso"][0::2]] == pytest.approx(iso.predict(x[0::2]).tolist())
    # a backend without log-probs (stock HFLM, --use_cache): the logit rows have no metrics, the others do
    for d in range(6):
        task.instances[2 * d].resps = [str(task.instances[2 * d].resps[0])]
    task.apply_filters()
    assert results("msp", 0) == {} and results("token_entropy", 0) == {} and results("eigv", 0)


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
    record = unwrap(next(iter(res.values())))
    assert all(unwrap(v) is record for v in res.values())  # one record, logged once (the rest "=<first>")
    assert record == {"conf": 0.5, "correct": 0, "em": 0, "conf_parsed": 0}


def test_metric_needing_a_field_the_mode_lacks_fails_at_construction(data_dir):
    from lm_eval.tasks._yaml_loader import load_yaml

    from semcal_eval.harness.aggregations import declared_metric_list
    from semcal_eval.qa.task import QATask

    cfg = load_yaml(TASKS_DIR / "nq_open" / "nq_open_verbalized.yaml")
    # the mode's own metrics (the metric table's default), plus one the mode's records cannot feed
    cfg["metric_list"] = declared_metric_list(cfg) + [
        {"metric": "ece_uw10_entropy", "aggregation": "semcal_ece_uw10_entropy", "higher_is_better": False}]
    with pytest.raises(ValueError, match=r"ece_uw10_entropy reads the record field\(s\) \['conf_entropy'\].*mode 'agreement'"):
        QATask(config=cfg)


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
    every = out["samples"]["nq_open_semagree"]
    # one logged row per document and filter row: judge_f1 plus the estimator rows (issue 23); stock HFLM
    # gives no token log-probs, so the logit rows log no metrics and 3 documents are too few for the _iso rows
    assert {s["filter"] for s in every} >= {"judge_f1", "msp", "eigv", "lexsim", "degree_iso"}
    assert all(s["metrics"] == [] for s in every if s["filter"] in ("msp", "perplexity", "token_entropy"))
    assert all("prr" in s["metrics"] and "ece_uw10" not in s["metrics"] for s in every if s["filter"] == "eigv")
    assert "prr,eigv" in res and "msp" not in {k.split(",")[1] for k in res if "," in k}
    samples = [s for s in every if s["filter"] == "judge_f1"]
    assert len(samples) == 3
    # the card lm-eval writes into results_*.json names the grader the records name
    assert out["configs"]["nq_open_semagree"]["judge_card"]["grader"] == "cover"
    assert {json.loads(s["filtered_resps"][1])["grader"] for s in samples} == {"cover"}
    confs = []
    for s in samples:
        greedy_resps, sampled_resps = s["resps"]
        assert len(greedy_resps) == 1 and len(sampled_resps) == 3
        rec = json.loads(s["filtered_resps"][1])
        assert len(rec["samples"]) == len(rec["cluster_ids"]) == 3
        # the logged record recomputes the logged metric item
        assert row_record(s)[1]["conf"] == conf_cluster_share(rec["greedy_cluster"], rec["cluster_ids"]) == rec["conf"]
        confs.append(rec["conf"])
    again = _run(smol_hflm, "nq_open_semagree", 3, split="validation", num_samples=3)
    assert [s["resps"] for s in again["samples"]["nq_open_semagree"]] == [s["resps"] for s in every]


@pytest.mark.slow
def test_end_to_end_msmarco_fixture(smol_hflm):
    out = _run(smol_hflm, "msmarco_semagree", 2, **_meta("msmarco", num_samples=2))
    assert "acc,judge_f1" in out["results"]["msmarco_semagree"]
    assert len([s for s in out["samples"]["msmarco_semagree"] if s["filter"] == "judge_f1"]) == 2


@pytest.mark.slow
def test_end_to_end_verbalized(data_dir, smol_hflm):
    out = _run(smol_hflm, "triviaqa_verbalized", 2, split="validation")
    res = out["results"]["triviaqa_verbalized"]
    assert 0.0 <= res["conf_parse_rate,verbalized"] <= 1.0 and "ece_uw10,verbalized" in res
    for s in out["samples"]["triviaqa_verbalized"]:
        assert len(s["resps"]) == 1 and len(s["resps"][0]) == 1  # one greedy answer, no samples
        rec = json.loads(s["filtered_resps"][0])
        assert rec["raw"] == s["resps"][0][0] and row_record(s)[1]["conf"] == rec["conf"]


def test_results_configs_carry_the_judge_card_of_the_grader(data_dir):
    """lm-eval writes ``dump_config()`` into results_*.json's ``configs``: a QA task's dump names its grader's
    card, read from the shipped card file (the learned rule by its judge's version), and no made-up figures for a
    grader without a card."""
    from semcal_eval.qa.judge_card import load_card
    from semcal_eval.qa.labels import learned_judge

    shipped = load_card()["graders"]
    got = _task("nq_open_semagree", **_meta("nq_open")).dump_config()["judge_card"]
    assert got["grader"] == "cover" and got["model"] is None
    assert got["all"]["agreement"] == shipped["cover"]["all"]["agreement"]
    assert got["sentence"]["fnr"] == shipped["cover"]["sentence"]["fnr"]
    json.dumps(got)  # it must serialise as lm-eval writes it
    learned = _task("triviaqa_semagree", **_meta("triviaqa", correctness="learned")).dump_config()["judge_card"]
    assert learned["grader"] == learned_judge().version in shipped
    assert learned["all"]["kappa"] == shipped[learned["grader"]]["all"]["kappa"]
    assert "veto lift" in learned["model"]
    strict = _task("nq_open_semagree", **_meta("nq_open", correctness="strict")).dump_config()["judge_card"]
    assert strict["card"] is None and "no card for grader 'strict'" in strict["why"]
    mixed = _task("nq_open_semagree", **_meta("nq_open", judges=["cover", "f1"],
                                              judge_kwargs={"f1": {"correctness": "strict"}})).dump_config()
    assert mixed["judge_card"]["card"] is None and "several rules" in mixed["judge_card"]["why"]
