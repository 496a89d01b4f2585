"""GoEmotions tasks end to end through lm-eval on the real SmolLM2 and the real dev data: side-by-side filter
rows, τ sweeps, --predict_only, chat templates, reference predictors, cross-fitted temperature, the report."""

from __future__ import annotations

import json
from collections import Counter

import lm_eval
import numpy as np
import pytest
from lm_eval.tasks import TaskManager

from semcal_eval import TASKS_DIR
from semcal_eval.data import GOEMOTIONS_LABELS, load
from semcal_eval.semsoft.filters import CrossfitTemperature, ReferencePredictor
from semcal_eval.semsoft.scoring import SemSoftError
from semcal_eval.semsoft.spec import SemSoftParams, SemSoftResponse, SemSoftRow
from semcal_eval.semsoft.task import semsoft_task_names
from semcal_eval.runs import row_record

from references import ref_ece, ref_top_label  # noqa: E402  (tests/references.py)


def evaluate(lm, tasks, limit, **meta_and_kw):
    kw = {k: meta_and_kw.pop(k) for k in ("apply_chat_template", "predict_only") if k in meta_and_kw}
    meta = {"split": "validation", **meta_and_kw}
    tm = TaskManager(include_path=str(TASKS_DIR), metadata=meta)
    return lm_eval.simple_evaluate(model=lm, tasks=tasks, limit=limit, task_manager=tm, metadata=meta,
                                   log_samples=True, verbosity="ERROR", **kw)


@pytest.fixture(scope="module")
def run6(semsoft_lm, data_dir):
    return evaluate(semsoft_lm, ["goemotions_semsoft"], 6, recalibrate=False, tau=[0.2, 0.1, 0.3])


def test_rows_side_by_side_from_one_pass(run6):
    res = run6["results"]["goemotions_semsoft"]
    rows = {k.split(",")[1] for k in res if "," in k and not k.endswith("_stderr")}
    rows = {r for r in rows if not r.startswith("alias")}
    assert {"constrained", "semsoft", "semsoft_tau0.1", "semsoft_tau0.3", "prior", "majority", "uniform"} <= rows
    samples = run6["samples"]["goemotions_semsoft"]
    per_filter = Counter(s["filter"] for s in samples)
    assert set(per_filter.values()) == {6}
    # every row of one document comes from the same single semsoft response
    by_doc = {}
    for s in samples:
        assert len(s["resps"]) == 1 and len(s["resps"][0]) == 1
        by_doc.setdefault(s["doc_id"], []).append(str(s["resps"][0][0]))  # the logged form (compact JSON)
    assert all(len(set(v)) == 1 for v in by_doc.values())


def test_items_are_recomputable_and_match_the_results(run6):

    samples = [s for s in run6["samples"]["goemotions_semsoft"] if s["filter"] == "semsoft"]
    item = row_record(samples[0])[1]
    assert len(item["probs"]) == 28 and abs(sum(item["probs"]) - 1) < 1e-5
    gold = load("goemotions", split="validation").filter(lambda d: len(d["labels"]) == 1)[samples[0]["doc_id"]]
    assert item["gold"] == gold["labels"][0]
    items = [row_record(s)[1] for s in samples]
    conf, correct = ref_top_label(items)  # the reported numbers against a plain re-implementation
    assert run6["results"]["goemotions_semsoft"]["ece_uw15,semsoft"] == pytest.approx(ref_ece(conf, correct, 15),
                                                                                        abs=1e-9)
    assert run6["results"]["goemotions_semsoft"]["acc,semsoft"] == pytest.approx(correct.mean(), abs=1e-12)
    P = np.asarray([r["probs"] for r in items])
    nll = -np.mean(np.log(P[np.arange(len(items)), [r["gold"] for r in items]]))
    assert run6["results"]["goemotions_semsoft"]["nll,semsoft"] == pytest.approx(nll, rel=1e-9)


def test_prior_row_is_the_training_class_frequency(run6, data_dir):
    train = load("goemotions", split="train").filter(lambda d: len(d["labels"]) == 1)
    counts = np.bincount([d[0] for d in train["labels"]], minlength=28) + 1.0  # add-one, as documented
    expected = counts / counts.sum()
    prior = [s for s in run6["samples"]["goemotions_semsoft"] if s["filter"] == "prior"][0]
    prior = row_record(prior)[1]["probs"]
    np.testing.assert_allclose(prior, expected, atol=1e-9)
    majority = [s for s in run6["samples"]["goemotions_semsoft"] if s["filter"] == "majority"][0]
    assert np.argmax(row_record(majority)[1]["probs"]) == GOEMOTIONS_LABELS.index("neutral")


def test_predict_only_logs_responses_without_metrics(semsoft_lm, data_dir):
    res = evaluate(semsoft_lm, ["goemotions_semsoft"], 2, recalibrate=False, predict_only=True)
    samples = res["samples"]["goemotions_semsoft"]
    assert samples and all(json.loads(str(s["resps"][0][0]))["baseline"] for s in samples)


def test_chat_template_keeps_the_labels_leading_space(semsoft_lm, data_dir):
    res = evaluate(semsoft_lm, ["goemotions_semsoft"], 2, recalibrate=False, apply_chat_template=True)
    s = res["samples"]["goemotions_semsoft"][0]
    ctx, spec = s["arguments"][0]
    assert "<|im_start|>assistant" in ctx and ctx.rstrip().endswith("Emotion:")
    assert all(c.startswith(" ") for c in spec["choices"])


def test_semsoft_task_names_are_found():
    names = semsoft_task_names()
    assert {"goemotions_semsoft", "goemotions_semsoft_anygold", "goemotions_semsoft_multilabel"} <= names
    assert "goemotions_base" not in names


@pytest.mark.parametrize(
    "meta,msg",
    [({"tau": 1.2}, "tau"), ({"top_k": 0}, "top_k"), ({"semsoft": {"taus": 0.1}}, "unknown"),
     ({"label_embedding": "last"}, "label_embedding"), ({"tau": []}, "empty")],
)
def test_bad_hyperparameters_are_named(meta, msg):
    with pytest.raises(SemSoftError, match=msg):
        SemSoftParams.from_metadata(meta)


def test_cli_metadata_overrides_yaml_defaults():
    p = SemSoftParams.from_metadata({"semsoft": {"tau": 0.3, "top_k": 50}, "top_k": 20})
    assert p.tau == 0.3 and p.top_k == 20 and p.label_embedding == "first"


class _View:
    """A stand-in task view over synthetic documents (gold = doc['y'])."""

    def __init__(self, train=()):
        self.train = list(train)

    def gold(self, doc):
        return doc["y"]

    def soft_target(self, doc):
        return None

    def train_golds(self):
        return self.train

    def train_soft_targets(self):
        return []

    def doc_ids(self, docs):  # lm-eval's contiguous doc_ids
        return list(range(len(docs)))


def _overconfident(n, T, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 2.0, size=(n, 4))
    p_true = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    y = np.array([rng.choice(4, p=p) for p in p_true])
    zT = z * T  # the "model" is overconfident by a factor T
    p_model = np.exp(zT - zT.max(1, keepdims=True))
    return p_model / p_model.sum(1, keepdims=True), y


def test_crossfit_temperature_recovers_t_and_never_uses_a_documents_own_label():
    probs, y = _overconfident(400, 2.5, 0)
    docs = [{"y": int(v)} for v in y]
    out = CrossfitTemperature(_View()).apply([SemSoftRow(p) for p in probs], docs)
    temps = {o.temperature for o in out}
    assert len(temps) == 2 and all(2.0 < t < 3.1 for t in temps)
    flipped = [dict(d) for d in docs]
    flipped[0]["y"] = (flipped[0]["y"] + 1) % 4  # doc 0 is in fold 0: its T comes from fold 1 only
    out2 = CrossfitTemperature(_View()).apply([SemSoftRow(p) for p in probs], flipped)
    np.testing.assert_allclose(out2[0].probs, out[0].probs)
    assert out2[1].temperature != out[1].temperature


def test_crossfit_on_too_few_documents_skips_with_the_reason():
    from semcal_eval.semsoft.filters import SkippedRow

    probs, y = _overconfident(30, 2.0, 1)  # 30 < 2 folds x 20 documents
    out = CrossfitTemperature(_View()).apply([SemSoftRow(p) for p in probs], [{"y": int(v)} for v in y])
    assert len(out) == 30 and all(isinstance(r, SkippedRow) for r in out)
    assert "at least 40 documents (20 per fold), got 30" in out[0].reason
    assert json.loads(str(out[0])) == {"skipped": out[0].reason}  # what lm-eval logs in filtered_resps
    probs, y = _overconfident(40, 2.0, 1)  # enough: fitted rows, not skips
    out = CrossfitTemperature(_View()).apply([SemSoftRow(p) for p in probs], [{"y": int(v)} for v in y])
    assert all(isinstance(r, SemSoftRow) for r in out)


def test_reference_predictors():
    resps = [[SemSoftResponse(baseline=[0.25] * 4)]] * 3
    docs = [{"y": 0}] * 3
    prior = ReferencePredictor("prior", _View([0, 0, 1, 3])).apply(resps, docs)
    np.testing.assert_allclose(prior[0].probs, np.array([3, 2, 1, 2]) / 8)  # add-one smoothing
    majority = ReferencePredictor("majority", _View([0, 0, 1, 3])).apply(resps, docs)
    assert majority[0].probs == (1.0, 0.0, 0.0, 0.0)
    assert ReferencePredictor("uniform", _View()).apply(resps, docs)[2].probs == (0.25,) * 4
    with pytest.raises(ValueError, match="training split"):
        ReferencePredictor("prior", _View([])).apply(resps, docs)


def test_report_from_saved_samples(tmp_path, semsoft_lm, data_dir):
    from semcal_eval.report import build_report

    out = tmp_path / "run"
    meta = {"split": "validation", "tau": [0.2, 0.1]}
    tm = TaskManager(include_path=str(TASKS_DIR), metadata=meta)
    from lm_eval.loggers import EvaluationTracker

    tracker = EvaluationTracker(output_path=str(out))
    res = lm_eval.simple_evaluate(model=semsoft_lm, tasks=["goemotions_semsoft"], limit=40, task_manager=tm,
                                  metadata=meta, log_samples=True, evaluation_tracker=tracker, verbosity="ERROR")
    tracker.save_results_aggregated(results=res, samples=res["samples"])
    for task in res["configs"]:
        tracker.save_results_samples(task_name=task, samples=res["samples"][task])
    md = build_report(out, tmp_path / "rep").read_text()
    for row in ("| constrained |", "| semsoft |", "| semsoft_ts |", "| prior |"):
        assert row in md
    for png in ("reliability", "confidence", "tau_sweep"):
        p = tmp_path / "rep" / f"goemotions_semsoft_{png}.png"
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000
    halves = build_report(out, tmp_path / "rep2", halves=True).read_text()
    assert "constrained+T(half)" in halves and "semsoft+T(half)" in halves
    assert res["results"]["goemotions_semsoft"]["temperature,semsoft_ts"] > 0
