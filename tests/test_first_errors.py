"""Issue 32 item 8, the errors a user meets first, on real runs of ``semcal-eval`` (subprocesses, the real
SmolLM2 and real lm-eval): a semcal error raised inside lm-eval's run prints its message, not a traceback; a
short ``--limit`` run works, its cross-fitted rows skipped with one line saying why; the output folder of a
``semcal:`` model is named after the model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from semcal_eval.cli import register_backends, resolve_model_args

ROOT = Path(__file__).resolve().parents[1]
MODEL = ["--model", "hf-semsoft", "--model_args", "pretrained=semcal:smollm2-135m,dtype=float32", "--device", "cpu"]


def _semcal_eval(args: list[str], data_dir) -> subprocess.CompletedProcess:
    env = {**os.environ, "SEMCAL_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1", "SEMCAL_TRACEBACK": "0"}
    return subprocess.run([sys.executable, "-m", "semcal_eval", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=900)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory, data_dir):
    """One real ``--limit 20`` run of goemotions_semsoft (the cross-fitted rows need 40 documents; no tuned row,
    so that only the 20 evaluated documents are scored)."""
    out = tmp_path_factory.mktemp("short")
    meta = '{"split": "validation", "tune": false}'
    res = _semcal_eval([*MODEL, "--tasks", "goemotions_semsoft", "--limit", "20", "--batch_size", "8",
                        "--output_path", str(out), "--log_samples", "--metadata", meta], data_dir)
    return res, out


@pytest.mark.slow
def test_short_limit_run_skips_the_crossfit_rows_with_one_line(short_run):
    res, out = short_run
    assert res.returncode == 0, res.stderr[-3000:]
    skip = [ln for ln in (res.stdout + res.stderr).splitlines() if "skipped" in ln and "_ts" in ln]
    assert len(skip) == 1, skip
    assert "constrained_ts, semsoft_ts skipped" in skip[0] and "at least 40 documents" in skip[0] \
        and "got 20" in skip[0]
    (results,) = out.rglob("results_*.json")
    row = json.loads(results.read_text())["results"]["goemotions_semsoft"]
    # the skipped rows are absent from the results; the other rows are there
    assert not [k for k in row if k.endswith(("constrained_ts", "semsoft_ts"))]
    assert "acc,semsoft" in row and "acc,constrained" in row
    # the reason is in the logged samples of the skipped rows
    (samples,) = out.rglob("samples_goemotions_semsoft_*.jsonl")
    rows = [json.loads(ln) for ln in samples.read_text().splitlines()]
    ts = [r for r in rows if r["filter"] == "semsoft_ts"]
    assert len(ts) == 20 and all(r["metrics"] == [] for r in ts)
    assert "at least 40 documents" in json.loads(ts[0]["filtered_resps"][0])["skipped"]


@pytest.mark.slow
def test_board_accepts_the_short_run_without_its_skipped_rows(short_run, tmp_path, capsys):
    from leaderboards import cli as board_cli

    res, out = short_run
    assert res.returncode == 0, res.stderr[-3000:]
    rc = board_cli.main(["submit", str(out), "--model-name", "short", "--method", "base",
                         "--db", str(tmp_path / "board.sqlite"), "--no-spot-check"])
    assert rc == 0, capsys.readouterr().err[-3000:]


def test_board_refuses_a_skipped_row_on_a_run_long_enough_to_fit():
    from types import SimpleNamespace

    from leaderboards.errors import SubmissionError
    from leaderboards.stages.records import skipped_row

    spec = SimpleNamespace(filters=("constrained", "semsoft_ts"))
    row = {"filter": "semsoft_ts", "metrics": []}
    assert skipped_row(row, "s:1", spec, {"constrained": {}}, effective=39)
    with pytest.raises(SubmissionError, match="logs no metric on 40 documents, enough for its cross-fit"):
        skipped_row(row, "s:1", spec, {"constrained": {}}, effective=40)
    # a reported filter, a row with metrics or an undeclared filter is no skip: the normal checks take it
    assert not skipped_row({**row, "filter": "constrained"}, "s:1", spec, {"constrained": {}}, effective=20)
    assert not skipped_row({**row, "metrics": ["acc"]}, "s:1", spec, {"constrained": {}}, effective=20)
    assert not skipped_row({**row, "filter": "made_up"}, "s:1", spec, {"constrained": {}}, effective=20)


@pytest.mark.slow
def test_output_folder_is_named_after_the_model(short_run):
    res, out = short_run
    assert res.returncode == 0, res.stderr[-3000:]
    (results,) = out.rglob("results_*.json")
    assert results.parent.name == "semcal__smollm2-135m"  # lm-eval's sanitised "semcal:smollm2-135m"
    data = json.loads(results.read_text())
    assert data["config"]["model_args"]["pretrained"] == "semcal:smollm2-135m"  # the results name the model too
    assert data["model_name"] == "semcal:smollm2-135m"


@pytest.mark.slow
def test_a_semcal_error_inside_lm_evals_run_prints_its_message(data_dir, tmp_path):
    """The task is built inside lm-eval's simple_evaluate (after the model is loaded); its SemSoftError ends
    the run with one line and exit code 2."""
    res = _semcal_eval([*MODEL, "--tasks", "goemotions_semsoft", "--limit", "2", "--output_path", str(tmp_path),
                        "--metadata", '{"split": "validation", "tune_by": "ece_uw15"}'], data_dir)
    assert res.returncode == 2, res.stderr[-3000:]
    assert "Traceback" not in res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("semcal-eval: error: ") and "tune_by" in last, last


def test_a_bug_keeps_its_traceback():
    """Only semcal's own errors are shortened: an error no semcal code raised keeps its traceback."""
    from semcal_eval import cli

    assert cli._is_semcal_error(__import__("semcal_eval.semsoft.scoring").semsoft.scoring.SemSoftError("x"))
    try:
        int("not a number")  # a ValueError raised outside semcal's code
    except ValueError as e:
        assert not cli._is_semcal_error(e)
    assert not cli._is_semcal_error(KeyError("k"))


def test_semcal_backends_keep_the_catalogue_name(smollm2_path, monkeypatch):
    """hf-semsoft and lm-eval's hf (served as CatalogueHFLM) resolve ``semcal:NAME`` where the model loads, so
    ``pretrained`` and ``tokenizer`` stay (the folder and the results name the model); a backend that cannot read
    catalogue names gets the cached folder; unknown names fail before any model loads."""
    import lm_eval.api.registry as registry

    monkeypatch.setattr(registry, "get_model", registry.get_model)  # restored after the test: the rebinding is per run
    register_backends()
    args = "pretrained=semcal:smollm2-135m,tokenizer=semcal:smollm2-135m,dtype=float32"
    assert resolve_model_args(["--model", "hf-semsoft", "--model_args", args])[3] == args
    assert resolve_model_args(["--model=hf", "--model_args", args])[2] == args
    assert resolve_model_args(["--model", "dummy", "--model_args", args])[3] == \
        f"pretrained={smollm2_path},tokenizer={smollm2_path},dtype=float32"
    with pytest.raises(Exception, match="no-such-model"):
        resolve_model_args(["--model", "hf-semsoft", "--model_args", "pretrained=semcal:no-such-model"])
