"""`semcal-eval calibrate` on stock lm-eval tasks (issue 33): a real run of a stock multiple_choice YAML on SST-2
(tests/fixtures/stock_tasks/sst2_stock.yaml, which does not import semcal), a generate_until task beside it, and
the three-line Semantic Softmax YAML on the same documents and prompt (sst2_stock_semsoft.yaml).

Every number calibrate reports for the stock task is recomputed here from the samples file with numpy written
out below (and sklearn for AUROC), never through semcal's metric code; its `loglik` row is checked against the
semsoft task's `constrained` row (the labels are single tokens, so the two are the same distribution)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from semcal_eval import calibrate as C

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "stock_tasks"
LIMIT = 40  # two folds of >= 20 documents: the cross-fitted temperature needs 20 to fit on

GEN_YAML = """\
task: sst2_stock_gen
include: sst2_stock.yaml
output_type: generate_until
doc_to_target: "{{ ['negative', 'positive'][label] }}"
doc_to_choice: null
generation_kwargs: {until: ["\\n"], max_gen_toks: 2, do_sample: false}
metric_list:
  - {metric: exact_match, aggregation: mean, higher_is_better: true}
"""


def _write_tasks(folder: Path, data_dir: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for src in FIXTURES.glob("*.yaml"):
        (folder / src.name).write_text(src.read_text().replace("{DATA}", str(data_dir)))
    (folder / "sst2_stock_gen.yaml").write_text(GEN_YAML)


def _semcal_eval(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "semcal_eval", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}, timeout=1800)


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory, data_dir, smollm2_path):
    """One real run: the stock multiple_choice task, a generate_until task and the three-line semsoft task."""
    tmp = tmp_path_factory.mktemp("calibrate")
    _write_tasks(tmp / "tasks", data_dir)
    r = _semcal_eval("--model", "hf-semsoft", "--model_args", "pretrained=semcal:smollm2-135m,dtype=float32",
                     "--tasks", "sst2_stock,sst2_stock_gen,sst2_stock_semsoft", "--include_path", str(tmp / "tasks"),
                     "--limit", str(LIMIT), "--batch_size", "8", "--device", "cpu", "--log_samples",
                     "--output_path", str(tmp / "out"), cwd=tmp)
    assert r.returncode == 0, r.stderr[-3000:]
    (results,) = (tmp / "out").glob("*/results_*.json")
    return results, r.stdout, r.stderr


def _samples(results: Path, task: str) -> list[dict]:
    date = results.stem[len("results_"):]
    path = results.with_name(f"samples_{task}_{date}.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# -- independent references (numpy written out; sklearn for AUROC) ----------------------------------------------
def _softmax(z):
    z = np.asarray(z, dtype=float)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _metrics(P: np.ndarray, y: np.ndarray) -> dict:
    from sklearn.metrics import roc_auc_score

    conf, pred = P.max(axis=1), P.argmax(axis=1)
    correct = (pred == y).astype(float)
    b = np.clip(np.ceil(conf * 15).astype(int) - 1, 0, 14)  # 15 equal-width bins (lo, hi], 0 in the first
    ece = sum(abs(correct[b == k].mean() - conf[b == k].mean()) * (b == k).mean() for k in range(15) if (b == k).any())
    onehot = np.eye(P.shape[1])[y]
    return {"acc": correct.mean(), "ece_uw15": ece, "brier_mc": ((P - onehot) ** 2).sum(axis=1).mean(),
            "nll": -np.log(P[np.arange(len(y)), y]).mean(), "auroc_conf": roc_auc_score(correct, conf)}


def _fit_t(P: np.ndarray, y: np.ndarray) -> float:
    from scipy.optimize import minimize_scalar

    z = np.log(P)

    def nll(log_t):
        return -np.mean(np.log(_softmax(z / math.exp(log_t))[np.arange(len(y)), y]))

    return math.exp(minimize_scalar(nll, bounds=(math.log(0.05), math.log(20)), method="bounded",
                                    options={"xatol": 1e-10}).x)


def _stock_arrays(results: Path):
    rows = sorted(_samples(results, "sst2_stock"), key=lambda r: r["doc_id"])
    lls = np.array([[float(x[0]) for x in r["filtered_resps"]] for r in rows])
    y = np.array([int(r["doc"]["label"]) for r in rows])
    return rows, lls, y


# -- the stock multiple_choice task ------------------------------------------------------------------------------
def test_calibrate_matches_an_independent_recomputation(mixed_run):
    results, _, _ = mixed_run
    cal = json.loads(results.with_name("calibration.json").read_text())  # written by the run itself
    task = cal["tasks"]["sst2_stock"]
    assert task["status"] == "computed" and task["n_docs"] == LIMIT
    rows, lls, y = _stock_arrays(results)
    lengths = np.array([len("negative"), len("positive")], dtype=float)
    expected = {"loglik": _softmax(lls), "loglik_norm": _softmax(lls / lengths)}
    for name, P in expected.items():
        for metric, value in _metrics(P, y).items():
            assert task["rows"][name][metric] == pytest.approx(value, abs=1e-9), (name, metric)
    # the rows' predictions are lm-eval's own acc / acc_norm, document by document
    assert np.mean([r["acc"] for r in rows]) == pytest.approx(task["rows"]["loglik"]["acc"], abs=1e-12)
    assert np.mean([r["acc_norm"] for r in rows]) == pytest.approx(task["rows"]["loglik_norm"]["acc"], abs=1e-12)
    assert task["lm_eval"]["acc"] == pytest.approx(task["rows"]["loglik"]["acc"], abs=1e-12)
    # cross-fitted temperature scaling: fold = position % 2 in doc_id order, each fold scaled by the other's T
    P = expected["loglik"]
    scaled = np.empty_like(P)
    temps = []
    for k in (0, 1):
        fit, apply = np.arange(len(y)) % 2 != k, np.arange(len(y)) % 2 == k
        t = _fit_t(P[fit], y[fit])
        temps.append(t)
        scaled[apply] = _softmax(np.log(P[apply]) / t)
    ts = task["rows"]["loglik_ts"]
    assert ts["temperature"] == pytest.approx(np.mean(temps), rel=1e-4)
    assert ts["nll"] == pytest.approx(_metrics(scaled, y)["nll"], rel=1e-5)
    assert ts["brier_mc"] == pytest.approx(_metrics(scaled, y)["brier_mc"], rel=1e-5)
    # cross-fitted prior: add-one smoothed class frequencies of the other fold's golds
    prior = np.empty((len(y), 2))
    for k in (0, 1):
        other = y[np.arange(len(y)) % 2 != k]
        prior[np.arange(len(y)) % 2 == k] = (np.bincount(other, minlength=2) + 1) / (len(other) + 2)
    assert task["rows"]["prior"]["brier_mc"] == pytest.approx(_metrics(prior, y)["brier_mc"], abs=1e-9)
    assert task["rows"]["uniform"]["nll"] == pytest.approx(math.log(2), abs=1e-12)
    # CIs: present for ECE, Brier and NLL and bracket the point value
    for metric in ("ece_uw15", "brier_mc", "nll"):
        m = task["rows"]["loglik"]
        assert m[f"{metric}_ci_lo"] <= m[metric] <= m[f"{metric}_ci_hi"]


def test_semsoft_constrained_row_is_the_stock_loglik_row(mixed_run):
    """The three-line YAML runs Semantic Softmax on the stock task's documents and prompt: its constrained row
    (softmax over the single-token labels' log-probabilities) is the stock task's softmax over lm-eval's
    loglikelihoods, document by document."""
    results, _, _ = mixed_run
    _, lls, y = _stock_arrays(results)
    con = sorted((r for r in _samples(results, "sst2_stock_semsoft") if r["filter"] == "constrained"),
                 key=lambda r: r["doc_id"])
    assert [r["doc_id"] for r in con] == list(range(LIMIT))
    records = [r[r["metrics"][0]] for r in con]
    np.testing.assert_allclose([rec["probs"] for rec in records], _softmax(lls), atol=1e-4)
    assert [rec["gold"] for rec in records] == y.tolist()
    semsoft_filters = {r["filter"] for r in _samples(results, "sst2_stock_semsoft")}
    assert {"constrained", "semsoft", "constrained_ts", "semsoft_ts", "semsoft_tuned"} <= semsoft_filters
    assert "prior" not in semsoft_filters  # no training_split in the stock YAML: no reference rows


def test_mixed_run_lists_what_was_skipped_and_why(mixed_run):
    results, stdout, _ = mixed_run
    cal = json.loads(results.with_name("calibration.json").read_text())
    gen = cal["tasks"]["sst2_stock_gen"]
    assert gen["status"] == "skipped" and "StockSemAgreeTask" in gen["reason"] and "K sampled" in gen["reason"]
    assert cal["tasks"]["sst2_stock_semsoft"]["status"] == "skipped"  # its rows are in the semcal summary
    assert "### sst2_stock (40 documents" in stdout and "sst2_stock_gen`: skipped" in stdout
    # the three-line task lives in the user's folder, yet its rows are in the semcal summary
    assert "### sst2_stock_semsoft (40 documents)" in stdout


def test_calibrate_verb_on_the_output_folder_gives_the_same_numbers(mixed_run, tmp_path):
    """What a plain lm_eval user runs on an existing output folder."""
    results, _, _ = mixed_run
    auto = json.loads(results.with_name("calibration.json").read_text())
    copy = tmp_path / "run"
    shutil.copytree(results.parent, copy)
    r = _semcal_eval("calibrate", str(copy), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    again = json.loads((copy / "calibration.json").read_text())
    assert again["tasks"] == auto["tasks"]
    assert "| loglik_ts |" in r.stdout


def test_missing_samples_is_a_clear_error(mixed_run, tmp_path):
    results, _, _ = mixed_run
    (tmp_path / "run").mkdir()
    shutil.copy(results, tmp_path / "run" / results.name)
    r = _semcal_eval("calibrate", str(tmp_path / "run"), cwd=tmp_path)
    assert r.returncode == 2 and "--log_samples" in r.stderr and "samples_sst2_stock_" in r.stderr


# -- no model ----------------------------------------------------------------------------------------------------
def test_generate_until_only_run_is_listed_as_skipped(tmp_path):
    (tmp_path / "results_2026-01-01T00-00-00.json").write_text(json.dumps({
        "results": {"my_qa": {"exact_match,none": 0.5}, "my_ppl": {"word_perplexity,none": 3.0}},
        "configs": {"my_qa": {"output_type": "generate_until"}, "my_ppl": {"output_type": "loglikelihood_rolling"}}}))
    assert not C.has_multiple_choice(tmp_path)
    cal = C.calibrate_run(tmp_path)
    assert {t: v["status"] for t, v in cal["tasks"].items()} == {"my_qa": "skipped", "my_ppl": "skipped"}
    assert "StockSemAgreeTask" in cal["tasks"]["my_qa"]["reason"]
    md = C.markdown(cal)
    assert "`my_qa`: skipped" in md and "`my_ppl`: skipped" in md


@pytest.mark.parametrize("target, choices, gold", [
    (1, ["a", "b"], 1), ("1", ["a", "b"], 1), ("b", ["a", "b"], 1), ([0, 1], ["a", "b"], [0, 1]),
    ("[1]", ["a", "b"], [1]), (2, ["a", "b"], None), ("c", ["a", "b"], None), (True, ["a", "b"], None),
])
def test_gold_is_resolved_as_lm_eval_does(target, choices, gold):
    assert C.mc_gold(target, choices) == gold


def test_choice_logliks_reads_lm_eval_0_4_13_rows():
    row = {"doc_id": 3, "filtered_resps": [["-1.5", "False"], ["-0.25", "True"]],
           "arguments": {"gen_args_1": {"arg_0": "Q:", "arg_1": " yes"}, "gen_args_0": {"arg_0": "Q:", "arg_1": " no"}}}
    ll, choices = C.choice_logliks(row, " ")
    assert ll.tolist() == [-1.5, -0.25] and choices == ["no", "yes"]


def test_ragged_choice_counts_pad_and_skip_the_fitted_rows():
    lls = [np.array([-1.0, -2.0]), np.array([-1.0, -2.0, -0.5])] * 30
    rows, notes = C.calibration_rows(lls, [["a", "bb"], ["a", "bb", "c"]] * 30, [0, 2] * 30)
    assert set(rows) == {"loglik", "loglik_norm", "uniform"}
    assert rows["uniform"][0]["probs"] == [0.5, 0.5, 0.0]
    assert any("padded" in n for n in notes)


def test_report_carries_the_stock_tasks_calibration(mixed_run, tmp_path):
    """`semcal-eval report` on the same run: the semcal task's rows as before, and the stock task's rows with the
    numbers `calibrate` wrote (the same function, the same CIs)."""
    from semcal_eval.report import build_report

    results, _, _ = mixed_run
    md = build_report(results.parent.parent, tmp_path / "report").read_text()
    assert "## sst2_stock_semsoft" in md and "## Stock multiple-choice tasks" in md
    cal = json.loads(results.with_name("calibration.json").read_text())
    ece = cal["tasks"]["sst2_stock"]["rows"]["loglik"]["ece_uw15"]
    row = next(ln for ln in md.split("### sst2_stock ")[1].splitlines() if ln.startswith("| loglik |"))
    assert f"{ece:.3f}" in row
    assert "`sst2_stock_gen`: skipped" in md
