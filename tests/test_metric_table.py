"""The one metric table: it drives the aggregations, every task's metric_list (filled in by the task classes), the
reports and the CIs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score

from semcal_eval import TASKS_DIR
from semcal_eval.core import metric_table as T
from semcal_eval.core import metrics as M
from semcal_eval.core import records as R
from semcal_eval.harness import aggregations as A
from semcal_eval.harness.task_yaml import iter_task_configs

from references import ref_ece  # noqa: E402  (tests/references.py)


def _cls_records(n=150, k=4, seed=0, soft=False):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 2 if soft else k)) * 2
    P = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    if soft:
        t = np.clip(P[:, 1] + rng.normal(0, 0.2, n), 0, 1)
        return [R.classification_record(P[i], None, float(t[i])) for i in range(n)], P, t
    y = rng.integers(0, k, n)
    return [R.classification_record(P[i], int(y[i])) for i in range(n)], P, y


def _qa_records(n=120, seed=1):
    rng = np.random.default_rng(seed)
    conf = rng.uniform(size=n)
    correct = (rng.uniform(size=n) < conf).astype(int)
    em = correct * (rng.uniform(size=n) < 0.7)
    ent = np.clip(conf + rng.normal(0, 0.1, n), 0, 1)
    return [R.confidence_record(conf[i], correct[i], em=em[i], conf_entropy=ent[i]) for i in range(n)], conf, correct, em, ent


def test_every_packaged_yaml_metric_list_follows_the_table():
    """Every metric a packaged task declares (its YAML's own list, else its class's default) is aggregated by
    semcal_<metric> with the table's direction."""
    seen = 0
    for path, cfg in iter_task_configs(TASKS_DIR):
        for entry in A.declared_metric_list(cfg):
            name = entry["metric"]
            assert name in T.HIGHER_IS_BETTER, f"{path}: {name} is not in the metric table"
            assert entry.get("aggregation") == A.AGGREGATIONS[name], f"{path}: {name} -> {entry.get('aggregation')}"
            assert entry.get("higher_is_better") == T.HIGHER_IS_BETTER[name], f"{path}: direction of {name}"
            seen += 1
    assert seen > 100  # the GoEmotions, Civil Comments and QA families were all read


def test_registry_is_built_from_the_table():
    assert set(A.AGGREGATIONS) == set(T.HIGHER_IS_BETTER)
    for name in T.CI_METRICS:
        assert {f"{name}_ci_lo", f"{name}_ci_hi"} <= set(T.HIGHER_IS_BETTER)


def test_compute_all_matches_independent_references():
    recs, P, y = _cls_records()
    out = T.compute_all(recs, with_ci=False)
    conf, pred = P.max(1), P.argmax(1)
    correct = (pred == y).astype(float)
    assert out["acc"] == pytest.approx(np.mean(correct))
    assert out["nll"] == pytest.approx(log_loss(y, P, labels=range(4)), rel=1e-12)
    assert out["brier_mc"] == pytest.approx(np.mean(np.sum((P - np.eye(4)[y]) ** 2, 1)), rel=1e-12)
    assert out["auroc_conf"] == pytest.approx(roc_auc_score(correct, conf))
    assert out["brier_conf"] == pytest.approx(brier_score_loss(correct, conf))
    assert out["ece_uw15"] == pytest.approx(ref_ece(conf, correct, 15), abs=1e-12)
    assert out["ece_uw10"] == pytest.approx(ref_ece(conf, correct, 10), abs=1e-12)
    assert "soft_brier" not in out and "em" not in out  # only what applies to plain classification records
    soft, Ps, t = _cls_records(soft=True)
    out_s = T.compute_all(soft, with_ci=False)
    assert out_s["soft_brier"] == pytest.approx(np.mean((Ps[:, 1] - t) ** 2))
    assert out_s["spearman"] == pytest.approx(M.spearman(Ps[:, 1], t))


@pytest.mark.parametrize("kind", ["cls", "soft", "qa"])
def test_every_ci_equals_resampling_documents_and_recomputing(kind):
    """The fast per-document-loss path and the generic path both equal a plain document bootstrap."""
    recs = _cls_records(soft=kind == "soft")[0] if kind != "qa" else _qa_records()[0]
    a = R.to_arrays(recs)
    names = [n for n in T.CI_METRICS if T.METRICS[n].applies_to(a)]
    assert len(names) >= 4
    order = T.canonical_order(a)  # the documents in their records' canonical order (see ci)
    assert sorted(order.tolist()) == list(range(a.n))
    recs = [recs[i] for i in order]
    for name in names:
        rng_idx = np.random.default_rng(5).integers(0, a.n, size=(60, a.n))
        vals = []
        for idx in rng_idx:
            v = T.METRICS[name].fn(R.to_arrays([recs[i] for i in idx]))
            vals.append(v)
        vals = np.asarray(vals)
        vals = vals[np.isfinite(vals)]
        ref = tuple(np.quantile(vals, [0.025, 0.975]))
        assert T.ci(name, a, n_boot=60, seed=5) == pytest.approx(ref, rel=1e-9, abs=1e-12), name


@pytest.mark.parametrize("kind", ["cls", "soft", "qa"])
def test_cis_do_not_depend_on_the_order_of_the_records(kind):
    """Data parallel: lm-eval gathers records rank by rank, so the same documents arrive in another order."""
    recs = _cls_records(soft=kind == "soft")[0] if kind != "qa" else _qa_records()[0]
    perm = np.random.default_rng(1).permutation(len(recs))
    a, b = R.to_arrays(recs), R.to_arrays([recs[i] for i in perm])
    for name in (n for n in T.CI_METRICS if T.METRICS[n].applies_to(a)):
        assert T.ci(name, a, n_boot=200) == T.ci(name, b, n_boot=200), name


def test_confidence_record_views():
    recs, conf, correct, em, ent = _qa_records()
    assert A.aggregate("acc", recs) == pytest.approx(correct.mean())
    assert A.aggregate("em", recs) == pytest.approx(em.mean())
    assert A.aggregate("ece_uw10_entropy", recs) == M.calibration_error(y_true=correct, y_prob=ent, n_bins=10)
    assert A.aggregate("auroc_conf_entropy", recs) == pytest.approx(roc_auc_score(correct, ent))
    assert A.aggregate("brier_conf_entropy", recs) == pytest.approx(np.mean((ent - correct) ** 2))
    with pytest.raises(ValueError, match="lacks 'conf'/'conf_parsed'"):
        A.aggregate("conf_parse_rate", recs)
    with pytest.raises(ValueError, match="reads the confidence-record fields"):
        T.compute("em", R.to_arrays(_cls_records()[0]))


def test_report_columns_and_roles_name_table_metrics():
    for cols in T.REPORT_COLUMNS.values():
        assert set(cols) <= set(T.METRICS)
    for roles in T.ROLES.values():
        assert set(roles) == {"ece", "brier", "nll", "auroc", "acc", "prr"} and set(roles.values()) <= set(T.METRICS)


def test_temperature_row():
    recs = [R.classification_record([0.5, 0.5], 0, temperature=2.0, at_bound=False),
            R.classification_record([0.5, 0.5], 1, temperature=4.0, at_bound=False)]
    assert A.aggregate("temperature", recs) == 3.0
    assert math.isnan(A.aggregate("temperature", _cls_records()[0]))


# -- what lm-eval's own table shows (issue 24) -------------------------------------------------------------------
def _yaml(name):
    from semcal_eval.harness.task_yaml import load_task_yaml

    return load_task_yaml(TASKS_DIR / name)


@pytest.mark.parametrize("path, kind, params", [
    ("goemotions/goemotions_semsoft.yaml", "classification", ("temperature",)),
    ("goemotions/goemotions_base.yaml", "classification", ()),
    ("civil_comments/civil_comments_ambiguous_semsoft.yaml", "soft", ("temperature",)),
    ("civil_comments/civil_comments_full_base.yaml", "soft", ()),
])
def test_classification_yamls_declare_the_headline_metrics_with_stderrs(path, kind, params):
    names = [e["metric"] for e in A.declared_metric_list(_yaml(path))]
    assert names == T.lm_eval_metric_names(kind, params)
    assert len([n for n in names if not n.endswith("_stderr")]) <= 7  # ~6 metrics a row in lm-eval's table
    assert not any(n.startswith("tuned_") or n.endswith(("_ci_lo", "_ci_hi")) for n in names)


@pytest.mark.parametrize("family, task", [("goemotions", "goemotions_base"), ("civil_comments", "civil_comments_full_base")])
def test_stock_process_results_emit_exactly_what_the_yaml_declares(family, task):
    """A stock task's process_results is a plain function: if it emitted a name the YAML lacks, lm-eval would
    aggregate it with `mean` of records and fail after the model pass."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_{family}_utils", TASKS_DIR / family / "utils.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    doc = {"labels": [2], "toxicity": 0.4, "text": "x"}
    out = mod.process_mc_results(doc, [(-1.0, False), (-2.0, False)] + ([(-3.0, False)] * 26 if family == "goemotions" else []))
    assert list(out) == [e["metric"] for e in A.declared_metric_list(_yaml(f"{family}/{task}.yaml"))]
    from semcal_eval.harness.base import unwrap

    assert len({id(unwrap(v)) for v in out.values()}) == 1  # one record, every name


def test_the_yamls_leave_metric_list_to_the_task_classes():
    """A task with a semcal class declares the table's list for its records (TASK_METRICS) unless its YAML sets
    its own; a YAML that copies the default fails (the class fills it in: delete the copy). Only a plain lm-eval
    task (the stock multiple_choice *_base variants) must name its metrics, or lm-eval would fill acc/acc_norm."""
    layouts = set()
    for path, cfg in iter_task_configs(TASKS_DIR):
        layout = A.config_layout(cfg)
        if layout is None:
            assert cfg.get("metric_list"), f"{path}: a plain lm-eval task must name its metric_list"
            continue
        layouts.add(layout)
        default = A.default_metric_list(layout)
        assert cfg.get("metric_list") != default, (
            f"{path}: its metric_list copies the {layout} default that {cfg['class']} fills in; delete it")
        if not cfg.get("metric_list"):
            assert A.declared_metric_list(cfg) == default
    assert layouts == set(T.TASK_METRICS)  # every default of the table is some packaged task's


def test_each_layouts_default_reads_only_what_its_records_carry():
    from semcal_eval.qa.settings import RECORD_FIELDS, QASettings

    # the registry's reading of a YAML agrees with the classes' own settings
    assert A.config_layout({"class": "!function utils.QATask"}) == QASettings().mode
    assert A.config_layout({"class": "!function utils.SemSoftTask", "metadata": {"soft_field": "t"}}) == "soft"
    assert A.config_layout({"class": "!function utils.SemSoftTask"}) == T.CLASSIFICATION
    assert A.config_layout({"output_type": "multiple_choice"}) is None
    assert set(RECORD_FIELDS) <= set(T.TASK_METRICS)
    for mode, have in RECORD_FIELDS.items():
        for n in T.TASK_METRICS[mode]:
            m = T.METRICS[T.base_metric(n)]
            assert m.needs == "any" and set(m.view) <= set(have), (mode, n)
    for layout in (T.CLASSIFICATION, "soft"):
        assert T.TASK_METRICS[layout] == tuple(T.lm_eval_metric_names(layout))
    with pytest.raises(ValueError, match="no default metric_list for 'judged'.*TASK_METRICS"):
        A.default_metric_list("judged")


def _tiny_data(**kwargs):
    from datasets import Dataset, DatasetDict

    return DatasetDict({"eval": Dataset.from_list([
        {"text": "a", "label": 0, "tox": 0.2, "qa_question": "q?", "qa_golds": ["a"]},
        {"text": "b", "label": 1, "tox": 0.7, "qa_question": "r?", "qa_golds": ["b"]}])})


def _tiny_semsoft(**metadata) -> dict:
    return {"task": "tiny_semsoft", "custom_dataset": _tiny_data, "test_split": "eval", "doc_to_text": "{{text}}",
            "doc_to_target": "label", "doc_to_choice": ["no", "yes"],
            "metadata": {"version": 1.0, "recalibrate": False, "reference_predictors": False, "tune": False,
                         **metadata}}


def _tiny_qa(**metadata) -> dict:
    return {"task": "tiny_qa", "custom_dataset": _tiny_data, "test_split": "eval", "output_type": "generate_until",
            "doc_to_text": "{{qa_question}}", "doc_to_target": "{{qa_golds[0]}}",
            "metadata": {"version": 3.0, **metadata}}


def test_task_classes_fill_in_the_default_and_keep_an_override():
    """Built tasks (what lm-eval logs as the run's config): no metric_list gives the table's list for the
    records; a YAML's own list is kept as written."""
    from semcal_eval.qa.task import QATask
    from semcal_eval.semsoft.task import SemSoftTask

    assert SemSoftTask(config=_tiny_semsoft()).config.metric_list == A.default_metric_list(T.CLASSIFICATION)
    assert SemSoftTask(config=_tiny_semsoft(soft_field="tox")).config.metric_list == A.default_metric_list("soft")
    for mode in ("agreement", "verbalized"):
        assert QATask(config=_tiny_qa(mode=mode)).config.metric_list == A.default_metric_list(mode)
    own = A.metric_list(["acc", "brier_mc"])
    assert SemSoftTask(config={**_tiny_semsoft(), "metric_list": own}).config.metric_list == own
    own = A.metric_list(["acc", "prr"])
    assert QATask(config={**_tiny_qa(), "metric_list": own}).config.metric_list == own


def test_reported_names_drop_parameters_a_row_did_not_fit_and_put_stderrs_last():
    declared = ["acc_stderr", "acc", "temperature", "tuned_tau", "ece_uw15", "ece_uw15_stderr"]
    plain = {"probs": [0.6, 0.4], "gold": 0}
    assert T.reported_names(declared, plain) == ["acc", "ece_uw15", "acc_stderr", "ece_uw15_stderr"]
    ts = {**plain, "temperature": 1.7, "at_bound": False}
    assert T.reported_names(declared, ts) == ["acc", "temperature", "ece_uw15", "acc_stderr", "ece_uw15_stderr"]
    assert "tuned_tau" in T.reported_names(declared, {**plain, "tuned_tau": 0.1})


def test_stderr_of_accuracy_matches_the_binomial_formula():
    """Independent reference: the bootstrap SE of a mean of 0/1 is sqrt(p(1-p)/n) up to Monte-Carlo noise."""
    rng = np.random.default_rng(2)
    n = 2000
    recs = [R.confidence_record(float(c), int(rng.uniform() < 0.3)) for c in rng.uniform(size=n)]
    a = R.to_arrays(recs)
    p = a.correct.mean()
    assert T.stderr("acc", a) == pytest.approx(math.sqrt(p * (1 - p) / n), rel=0.08)
    assert A.aggregate("acc_stderr", recs) == T.stderr("acc", a)
    lo, hi = A.aggregate("acc_ci_lo", recs), A.aggregate("acc_ci_hi", recs)
    assert (hi - lo) == pytest.approx(2 * 1.96 * T.stderr("acc", a), rel=0.1)  # same resamples, normal shape
    one = R.to_arrays(recs[:1])
    assert math.isnan(T.stderr("acc", one)) or T.stderr("acc", one) == 0.0  # one document: no spread
