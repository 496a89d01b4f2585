"""A dataset that also has semcal tasks, expressed as a stock lm-eval YAML (issue 33, item 5): GoEmotions.

tests/fixtures/stock_tasks/goemotions/goemotions_stock.yaml reads the raw GoEmotions dev file with lm-eval's csv
loader, writes semcal's prompt out in Jinja, lists the 28 labels as ``doc_to_choice`` and keeps single-label rows
with a ``process_docs`` of its own (no semcal import). One real run (SmolLM2-135M, 20 validation documents) of it
beside semcal's ``goemotions_base`` (lm-eval's multiple_choice requests, semcal's metrics) and
``goemotions_semsoft`` (whose ``constrained`` row renormalises the labels' first-token probabilities):

* the stock task sends the very requests ``goemotions_base`` sends, and ``semcal-eval calibrate``'s ``loglik`` row
  of it is ``goemotions_base``'s row: the same probabilities and the same headline metrics;
* against ``goemotions_semsoft``'s ``constrained`` row: on the labels that are one token for this tokenizer the
  two distributions agree up to renormalisation (a label's full log-likelihood is its first token's); the labels
  of several tokens are where they differ, and the test finds those labels with the tokenizer, not a list.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from semcal_eval import calibrate
from semcal_eval.runs import row_record

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "stock_tasks" / "goemotions"
LIMIT = 20


@pytest.fixture(scope="module")
def run(tmp_path_factory, data_dir, smollm2_path):
    tmp = tmp_path_factory.mktemp("goemotions_stock")
    tasks = tmp / "tasks"
    tasks.mkdir()
    (tasks / "goemotions_stock.yaml").write_text(
        (FIXTURE / "goemotions_stock.yaml").read_text().replace("{DATA}", str(data_dir)))
    shutil.copy(FIXTURE / "utils.py", tasks / "utils.py")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "semcal_eval", "--model", "hf-semsoft", "--model_args",
         "pretrained=semcal:smollm2-135m,dtype=float32", "--tasks", "goemotions_stock,goemotions_base,goemotions_semsoft",
         "--include_path", str(tasks), "--limit", str(LIMIT), "--batch_size", "8", "--device", "cpu", "--log_samples",
         "--output_path", str(tmp / "out"), "--metadata", json.dumps({"split": "validation"})],
        cwd=tmp, env=env, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    (results,) = (tmp / "out").glob("*/results_*.json")
    return results, smollm2_path


def _rows(results: Path, task: str) -> dict[str, dict[int, dict]]:
    date = results.stem[len("results_"):]
    out: dict[str, dict[int, dict]] = {}
    for line in results.with_name(f"samples_{task}_{date}.jsonl").read_text().splitlines():
        r = json.loads(line)
        out.setdefault(r["filter"], {})[r["doc_id"]] = r
    return out


def _stock_probs(row: dict) -> np.ndarray:
    ll = np.array([float(x[0]) for x in row["filtered_resps"]])
    p = np.exp(ll - ll.max())
    return p / p.sum()


def test_stock_yaml_is_goemotions_base_request_for_request(run):
    results, _ = run
    stock, base = _rows(results, "goemotions_stock")["none"], _rows(results, "goemotions_base")["none"]
    assert sorted(stock) == sorted(base) == list(range(LIMIT))
    for i in stock:
        assert stock[i]["arguments"] == base[i]["arguments"]  # the same prompt, document and 28 continuations
        np.testing.assert_allclose(_stock_probs(stock[i]), row_record(base[i])[1]["probs"], rtol=0, atol=1e-12)
        assert row_record(base[i])[1]["gold"] == int(stock[i]["target"])


def test_calibrate_loglik_row_is_goemotions_base_row(run):
    results, _ = run
    cal = calibrate.calibrate_run(results)["tasks"]
    assert cal["goemotions_base"]["status"] == "skipped" and cal["goemotions_stock"]["status"] == "computed"
    loglik = cal["goemotions_stock"]["rows"]["loglik"]
    reported = json.loads(results.read_text())["results"]["goemotions_base"]
    for m in ("acc", "ece_uw15", "brier_mc", "nll", "auroc_conf"):
        assert loglik[m] == pytest.approx(reported[f"{m},none"], abs=1e-12), m


def test_constrained_row_agrees_on_the_single_token_labels(run):
    from transformers import AutoTokenizer

    results, model = run
    tok = AutoTokenizer.from_pretrained(model)
    stock, semsoft = _rows(results, "goemotions_stock")["none"], _rows(results, "goemotions_semsoft")["constrained"]
    labels = [a["arg_1"] for a in stock[0]["arguments"].values()]  # " admiration", ...: with the delimiter
    single = [i for i, lab in enumerate(labels) if len(tok(lab, add_special_tokens=False)["input_ids"]) == 1]
    assert 0 < len(single) < len(labels)  # both kinds present, so the test says something about each
    worst_multi = 0.0
    for i in stock:
        p, q = _stock_probs(stock[i]), np.asarray(row_record(semsoft[i])[1]["probs"])
        np.testing.assert_allclose(p[single] / p[single].sum(), q[single] / q[single].sum(), rtol=0, atol=1e-5)
        worst_multi = max(worst_multi, float(np.abs(p - q).max()))
    assert worst_multi > 1e-5  # the first-token renormalisation is a different distribution where labels split
