"""semcal_eval.harness.aggregations: items -> metrics, registry behaviour, and lm-eval resolving the names."""

import importlib
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml
from sklearn.metrics import log_loss, roc_auc_score

from lm_eval.api.model import LM
from lm_eval.api.registry import aggregation_registry, get_aggregation

from semcal_eval.core import metric_table as T
from semcal_eval.core import metrics as M
from semcal_eval.core import records as R
from semcal_eval.harness import aggregations as A

FIXTURE = Path(__file__).parent / "fixtures" / "semcal_agg_task"


def _cls_items(n=60, k=3, seed=0, soft=False):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 2
    P = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    y = rng.integers(0, k, n)
    t = rng.uniform(size=n) if soft else [None] * n
    return [{"probs": P[i].tolist(), "gold": int(y[i]), "soft": None if t[i] is None else float(t[i])} for i in range(n)], P, y


def test_every_metric_has_a_registered_aggregation():
    assert set(A.AGGREGATIONS) == set(T.HIGHER_IS_BETTER)
    for name, agg in A.AGGREGATIONS.items():
        assert agg == "semcal_" + name
        assert agg_fn_ok(get_aggregation(agg))
    # lm-eval's own aggregations are still there and untouched
    for builtin in ("mean", "f1", "brier_score", "median"):
        assert aggregation_registry.get(builtin).__module__.startswith("lm_eval")
    assert set(T.CI_METRICS) <= set(T.HIGHER_IS_BETTER)


def agg_fn_ok(fn):
    return fn is not None and fn.__module__ == "semcal_eval.harness.aggregations"


def test_reimport_does_not_crash():
    before = aggregation_registry.get("semcal_ece_uw15")
    importlib.reload(A)
    assert aggregation_registry.get("semcal_ece_uw15") is before
    assert before(_cls_items()[0]) == A.aggregate("ece_uw15", _cls_items()[0])


def test_foreign_clash_is_a_clear_error():
    aggregation_registry.register("semcal_test_clash")(lambda xs: 0.0)
    with pytest.raises(ValueError, match="already registered"):
        A._register("semcal_test_clash", A._make("acc"))


def test_classification_aggregations_match_metrics():
    items, P, y = _cls_items()
    conf, pred, corr = P.max(1), P.argmax(1), (P.argmax(1) == y).astype(float)
    assert get_aggregation("semcal_acc")(items) == pytest.approx(np.mean(pred == y))
    assert get_aggregation("semcal_nll")(items) == pytest.approx(log_loss(y, y_proba=P, labels=range(3)))
    assert get_aggregation("semcal_ece_uw15")(items) == M.ece(y_true=corr, y_prob=conf, n_bins=15)
    assert get_aggregation("semcal_ece_em15")(items) == M.ece(y_true=corr, y_prob=conf, n_bins=15, scheme="mass")
    assert get_aggregation("semcal_auroc_conf")(items) == pytest.approx(roc_auc_score(corr, conf))
    assert get_aggregation("semcal_auroc_class")(items) == pytest.approx(roc_auc_score(y, P, multi_class="ovr"))
    assert get_aggregation("semcal_macro_f1")(items) == M.macro_f1(pred, y, 3)
    assert get_aggregation("semcal_brier_mc")(items) == pytest.approx(np.mean(np.sum((P - np.eye(3)[y]) ** 2, 1)))
    lo = get_aggregation("semcal_ece_uw15_ci_lo")(items)
    hi = get_aggregation("semcal_ece_uw15_ci_hi")(items)
    o = T.canonical_order(R.to_arrays(items))  # documents are resampled in the records' canonical order
    assert (lo, hi) == M.bootstrap_ci(lambda c, yy: M.ece(y_true=yy, y_prob=c, n_bins=15), conf[o], corr[o],
                                      n_boot=T.CI_N_BOOT, seed=T.CI_SEED)
    with pytest.raises(ValueError, match="soft"):
        A.aggregate("soft_brier", items)


def test_confidence_items_and_kind_errors():
    rng = np.random.default_rng(1)
    conf = rng.uniform(size=50)
    corr = (rng.uniform(size=50) < conf).astype(int)
    items = [{"conf": float(c), "correct": int(y), "answer": "x"} for c, y in zip(conf, corr)]
    assert A.aggregate("aurc", items) == M.aurc(y_true=corr, y_prob=conf)
    assert A.aggregate("acc_at_10cov", items) == M.acc_at_coverage(y_true=corr, y_prob=conf, coverage=0.1)
    assert A.aggregate("brier_conf", items) == pytest.approx(np.mean((conf - corr) ** 2))
    with pytest.raises(ValueError, match="needs classification records"):
        A.aggregate("nll", items)
    with pytest.raises(ValueError, match="one kind"):
        R.to_arrays(items[:2] + [{"probs": [0.5, 0.5], "gold": 0}])
    with pytest.raises(ValueError, match="0 documents"):
        A.aggregate("acc", [])
    with pytest.raises(ValueError, match="record 1 is a float"):
        A.aggregate("acc", [items[0], 0.5])
    with pytest.raises(ValueError, match="NaN"):
        A.aggregate("acc", [{"conf": float("nan"), "correct": 1}])
    with pytest.raises(ValueError, match="same label set"):
        R.to_arrays([{"probs": [0.5, 0.5], "gold": 0}, {"probs": [0.2, 0.3, 0.5], "gold": 0}])
    with pytest.raises(ValueError, match="unknown semcal metric"):
        A.aggregate("ece_uw16", items)


def test_soft_items_and_hard_label_from_soft():
    rng = np.random.default_rng(2)
    p = rng.uniform(size=80)
    t = np.clip(p + rng.normal(0, 0.2, 80), 0, 1)
    items = [{"probs": [1 - a, a], "gold": None, "soft": float(b)} for a, b in zip(p, t)]
    assert A.aggregate("soft_brier", items) == pytest.approx(np.mean((p - t) ** 2))
    assert A.aggregate("soft_mae", items) == pytest.approx(np.mean(np.abs(p - t)))
    assert A.aggregate("pearson", items) == pytest.approx(np.corrcoef(p, t)[0, 1])
    hard = (t >= 0.5).astype(int)
    assert A.aggregate("acc", items) == pytest.approx(np.mean((p > 0.5).astype(int) == hard))
    # single-class AUROC over a tiny batch: NaN + warning, never 0.5
    with pytest.warns(M.SemcalMetricWarning):
        assert math.isnan(A.aggregate("auroc_conf", items[:1]))


def test_any_gold_items():
    items = [{"probs": [0.6, 0.3, 0.1], "gold": [0, 1]}, {"probs": [0.2, 0.7, 0.1], "gold": [2]}]
    assert A.aggregate("acc", items) == 0.5
    assert A.aggregate("nll", items) == pytest.approx((-(0.5 * math.log(0.6) + 0.5 * math.log(0.3)) - math.log(0.1)) / 2)


def test_record_builders_validate():
    assert R.classification_record(np.array([0.25, 0.75]), 1, 0.6) == {"probs": [0.25, 0.75], "gold": 1, "soft": 0.6}
    assert R.confidence_record(np.float32(0.5), True) == {"conf": 0.5, "correct": 1}
    with pytest.raises(ValueError, match="sum to 1"):
        R.classification_record([0.5, 0.6], 0)
    with pytest.raises(ValueError):
        R.classification_record([0.5, 0.5], 2)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        R.confidence_record(1.5, 1)
    with pytest.raises(ValueError, match="unknown confidence-record field"):
        R.confidence_record(0.5, 1, exact=1)


# ------------------------------------------------------------- a real lm-eval run of a YAML task


class _FixedLM(LM):
    """Deterministic loglikelihoods from the request text: lm-eval needs *some* LM to run a task."""

    def loglikelihood(self, requests, disable_tqdm=False):
        out = []
        for req in requests:
            ctx, cont = req.args
            i = int(ctx.split()[-1])
            out.append((-((i * 13 + (5 if "yes" in cont else 0)) % 9) / 3.0, False))
        return out

    def loglikelihood_rolling(self, requests, disable_tqdm=False):
        raise NotImplementedError

    def generate_until(self, requests, disable_tqdm=False):
        raise NotImplementedError


def test_yaml_task_resolves_every_aggregation_and_evaluates():
    from lm_eval.evaluator import evaluate
    from lm_eval.tasks import TaskManager

    cfg_names = [e["metric"] for e in yaml.load(
        (FIXTURE / "semcal_agg_fixture.yaml").read_text().replace("!function", ""), Loader=yaml.SafeLoader
    )["metric_list"]]
    assert set(cfg_names) == set(T.classification_metric_names()), "fixture must list every classification metric"

    tm = TaskManager(include_path=str(FIXTURE), include_defaults=False)
    loaded = tm.load(["semcal_agg_fixture"])
    task = loaded["tasks"]["semcal_agg_fixture"]
    aggs = task.aggregation()
    for name in cfg_names:
        assert agg_fn_ok(aggs[name]), f"lm-eval did not resolve the aggregation of {name}"
        assert task.higher_is_better()[name] == T.HIGHER_IS_BETTER[name]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = evaluate(_FixedLM(), loaded, bootstrap_iters=0, log_samples=True, verbosity="ERROR")
    from semcal_eval.runs import row_record

    row = res["results"]["semcal_agg_fixture"]
    samples = res["samples"]["semcal_agg_fixture"]
    items = [row_record(s)[1] for s in sorted(samples, key=lambda s: s["doc_id"])]
    assert len(items) == 40
    rep = T.compute_all(items, with_ci=False)
    for name in ("acc", "ece_uw15", "brier_mc", "nll", "soft_brier", "spearman", "aurc", "macro_f1"):
        assert row[f"{name},none"] == pytest.approx(rep[name]), name
    assert row["ece_uw15_ci_lo,none"] <= row["ece_uw15,none"] <= row["ece_uw15_ci_hi,none"]
    # lm-eval's ± column: our <metric>_stderr lands under lm-eval's own stderr key, even with bootstrap_iters=0
    # (which makes lm-eval write "N/A" there first); an independent bootstrap of the same documents agrees
    from lm_eval.utils import make_table

    a = R.to_arrays(items)
    for name in ("acc", "ece_uw15", "brier_mc", "nll", "auroc_conf"):
        se = row[f"{name}_stderr,none"]
        assert isinstance(se, float) and se > 0, (name, se)
        ref = _plain_bootstrap_std(name, items)
        assert se == pytest.approx(ref, rel=0.25), name  # other resamples: agree to Monte-Carlo noise
        assert se == T.stderr(name, a)
    table = make_table(res)
    line = next(ln for ln in table.splitlines() if "|ece_uw15 " in ln)
    assert line.rstrip("|").split("|")[-1].strip() == f"{row['ece_uw15_stderr,none']:.4f}"


def _plain_bootstrap_std(name, items, n_boot=400, seed=11):
    """Resample documents, rebuild their records' arrays, recompute the metric: the definition, no shortcut."""
    rng = np.random.default_rng(seed)
    vals = [T.METRICS[name].fn(R.to_arrays([items[i] for i in rng.integers(0, len(items), len(items))]))
            for _ in range(n_boot)]
    vals = np.asarray(vals)
    return float(np.std(vals[np.isfinite(vals)], ddof=1))


def test_yaml_resolves_in_a_fresh_interpreter_without_importing_semcal_first():
    # what `lm_eval --include_path ...` does: only the task's `!function` module imports semcal_eval
    import os
    import subprocess
    import sys

    code = (
        "from lm_eval.tasks import TaskManager\n"
        f"tm = TaskManager(include_path={str(FIXTURE)!r}, include_defaults=False)\n"
        "task = tm.load(['semcal_agg_fixture'])['tasks']['semcal_agg_fixture']\n"
        "bad = [k for k, v in task.aggregation().items() if v is None or not v.__name__.startswith('semcal_')]\n"
        "print('UNRESOLVED', bad)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "UNRESOLVED []" in out.stdout


def test_temperature_is_the_mean_fitted_t_and_nan_where_not_recalibrated():
    import math

    assert A.aggregate("temperature", [{"probs": [1.0], "gold": 0, "temperature": 2.0},
                                        {"probs": [1.0], "gold": 0, "temperature": 4.0}]) == 3.0
    assert math.isnan(A.aggregate("temperature", [{"probs": [0.5, 0.5], "gold": 0}]))


def test_a_row_logs_its_record_once_and_references_under_every_other_name():
    """lm-eval writes samples with json.dumps(default=handle_non_serializable): the record is logged under the
    row's first metric name and every other name is the string "=<first>"; the aggregations still read the
    record behind each name, and the one reader of a row (runs.row_record) gets it back from the JSON."""
    import json

    from lm_eval.utils import handle_non_serializable

    from semcal_eval.harness.base import SameAs, metric_values
    from semcal_eval.runs import row_record

    recs = [R.classification_record([p, 1 - p], int(p < 0.5)) for p in np.linspace(0.05, 0.95, 30)]
    names = ["acc", "acc_stderr", "nll", "nll_stderr"]
    vals = [metric_values(names, r) for r in recs]
    line = json.loads(json.dumps({"metrics": names, **vals[0]}, default=handle_non_serializable))
    assert line["acc"] == recs[0] and all(line[n] == "=acc" for n in names[1:])
    assert row_record(line) == ("acc", recs[0])
    assert sum(isinstance(v, dict) for v in line.values()) == 1  # one copy of the record
    assert isinstance(vals[0]["nll_stderr"], SameAs)
    assert A.aggregate("nll_stderr", [v["nll_stderr"] for v in vals]) == A.aggregate("nll_stderr", recs) > 0
    assert A.aggregate("nll", [v["nll"] for v in vals]) == pytest.approx(
        -np.mean([np.log(r["probs"][r["gold"]]) for r in recs]), abs=1e-12)


def test_row_record_refuses_forged_rows():
    """Two different records in one row, or a reference to a name that holds none, are errors, not a pick."""
    from semcal_eval.runs import RunError, row_record

    a, b = R.classification_record([0.3, 0.7], 1), R.classification_record([0.6, 0.4], 1)
    with pytest.raises(RunError, match="different records"):
        row_record({"metrics": ["acc", "nll"], "acc": a, "nll": b})
    with pytest.raises(RunError, match="refers to"):
        row_record({"metrics": ["acc", "nll"], "acc": a, "nll": "=brier_mc"})
    assert row_record({"metrics": ["acc"], "acc": 0.5}) is None  # an lm-eval task's own float
    assert row_record({"metrics": ["acc", "nll"], "acc": a, "nll": dict(a)}) == ("acc", a)  # older logs: copies


def test_metrics_of_one_row_share_one_conversion_and_cannot_write_into_it():
    """Every metric of a row reads one RecordArrays (converted once), read-only, and gives what a fresh
    conversion per metric gives."""
    from semcal_eval.core import records as Rmod

    rng = np.random.default_rng(3)
    recs = [R.classification_record(p, int(rng.integers(3))) for p in rng.dirichlet(np.ones(3), 40)]
    calls = []
    real = A.to_arrays

    def counting(records, view=("conf", "correct")):
        calls.append(view)
        return real(records, view=view)

    A.to_arrays = counting
    try:
        A._arrays_cache.clear()
        got = {n: A.aggregate(n, list(recs)) for n in ("acc", "nll", "brier_mc", "ece_uw15", "macro_f1")}
    finally:
        A.to_arrays = real
    assert len(calls) == 1
    for n, v in got.items():
        assert v == pytest.approx(T.compute(n, Rmod.to_arrays(recs)), abs=1e-12)
    shared = A.shared_arrays(recs)
    with pytest.raises(ValueError):
        shared.probs[0, 0] = 1.0
    assert A.shared_arrays([dict(r) for r in recs]) is not shared  # equal but other objects: converted anew
