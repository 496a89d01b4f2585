"""Leaderboard: submit (validate + recompute) -> SQLite -> static site, on lm-eval-shaped runs.

Reported numbers in the synthetic runs are produced by the registered aggregations, as lm-eval would;
the board's own columns are checked against independent references written here (numpy loops,
sklearn), and every rejection is checked for a message naming the problem.
"""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from leaderboards.cli import main
from leaderboards.registry import load_registry

import board_fixtures as S  # tests/board_fixtures.py: synthetic runs (tests/ is on sys.path)
from references import ref_ece  # tests/references.py: the plain-loop ECE

REPO = Path(__file__).resolve().parents[1]
CLS = "semcal_synth_cls"
QA = "semcal_synth_qa"


# ---------------------------------------------------------------- helpers


@pytest.fixture
def env(tmp_path, monkeypatch):
    tasks = S.write_synth_tasks(tmp_path / "tasks")
    monkeypatch.setenv("SEMCAL_BOARD_TASKS_DIR", str(tasks))
    monkeypatch.setenv("SEMCAL_BOARD_DB", str(tmp_path / "board.sqlite"))
    reg = load_registry(tasks)
    return {"tmp": tmp_path, "reg": reg, "db": tmp_path / "board.sqlite"}


def run_cls(env, name="run", n=300, seed=0, temperature=1.0, **kw) -> Path:
    items = S.cls_items(n, seed=seed)
    filters = {
        "constrained": items,
        "semsoft": S.cls_items(n, seed=seed, temperature=temperature if temperature != 1.0 else 2.0),
        "prior": S.prior_items(items),
    }
    filters.update(kw.pop("filters", {}))
    S.write_run(env["tmp"] / name, CLS, filters, env["reg"][CLS].metrics, **kw)
    return env["tmp"] / name


def submit(path, name="model-a", method="base", *extra) -> int:
    # the board derives the displayed name from the run's model_args (issue 25): let the run name the model
    for res in Path(path).rglob("results_*.json"):
        try:
            data = json.loads(res.read_text())
        except (ValueError, OSError):  # a malformed file is the test's point: submit it as it is
            continue
        if isinstance(data.get("config"), dict) and isinstance(data["config"].get("model_args"), str):
            data["config"]["model_args"] = f"pretrained={name},dtype=float32"
            res.write_text(json.dumps(data, allow_nan=True))
    return main(["submit", str(path), "--model-name", name, "--method", method, *extra])


def n_submissions(db: Path) -> tuple[int, int]:
    con = sqlite3.connect(db)
    try:
        return (con.execute("SELECT COUNT(*) FROM submissions").fetchone()[0],
                con.execute("SELECT COUNT(*) FROM entries").fetchone()[0])
    finally:
        con.close()


def files(path: Path) -> tuple[Path, Path]:
    (res,) = path.rglob("results_*.json")
    (samp,) = path.rglob("samples_*.jsonl")
    return res, samp


# ---------------------------------------------------------------- the happy path


def test_submit_recomputes_and_renders(env, capsys):
    from sklearn.metrics import roc_auc_score

    path = run_cls(env, n=400)
    assert submit(path) == 0
    # the model's two rows plus the board's own prior, majority and uniform rows (the submitted prior is ignored)
    assert n_submissions(env["db"]) == (1, 5)

    from leaderboards import db as DB

    entries = {e["filter"]: e for e in DB.load_entries(DB.connect(env["db"]))}
    items = S.cls_items(400, seed=0)
    P = np.array([it["probs"] for it in items])
    gold = np.array([it["gold"] for it in items])
    conf, pred = P.max(1), P.argmax(1)
    correct = (pred == gold).astype(float)
    b = entries["constrained"]["board"]
    onehot = np.eye(P.shape[1])[gold]
    assert b["ece"] == pytest.approx(ref_ece(conf, correct, 15), abs=1e-12)
    assert b["brier"] == pytest.approx(((P - onehot) ** 2).sum(1).mean(), abs=1e-12)
    assert b["nll"] == pytest.approx(-np.log(P[np.arange(len(P)), gold]).mean(), abs=1e-9)
    assert b["auroc"] == pytest.approx(roc_auc_score(correct, conf), abs=1e-12)
    assert b["acc"] == pytest.approx(correct.mean())
    assert b["ece_ci_lo"] <= b["ece"] <= b["ece_ci_hi"]
    assert b["brier_ci_lo"] < b["brier"] < b["brier_ci_hi"]
    np.testing.assert_allclose(entries["constrained"]["conf"], conf)
    # the prior is a constant predictor: flagged degenerate, shown as a reference row
    assert entries["prior"]["is_reference"] and "std" in entries["prior"]["degenerate"]
    assert entries["constrained"]["degenerate"] == ""

    site = env["tmp"] / "site"
    assert main(["render", "--out", str(site)]) == 0
    html = (site / "index.html").read_text()
    assert html.count('<tr class="model') == 2 and html.count('<tr class="ref') == 3
    assert "https://" not in html and "http://" not in html  # no CDN
    rows = list(csv.DictReader((site / "leaderboard.csv").open()))
    assert {r["filter"] for r in rows} == {"constrained", "semsoft", "prior", "majority", "uniform"}
    by = {r["filter"]: r for r in rows}
    # semsoft items here are temperature-2 softened copies: worse ECE than the calibrated baseline
    assert by["constrained"]["ece_rank"] == "1" and by["semsoft"]["ece_rank"] == "2"
    assert by["constrained"]["beats_prior"] == "True"
    (page,) = (site / "entries").glob("*.html")
    text = page.read_text()
    assert text.count('class="reliability"') == 5
    for png in (site / "entries").glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "0.4.13" in text and "abc1234" in text and "numpy_seed" in text  # provenance
    md = (site / "leaderboard.md").read_text()
    assert "| model-a | anonymous | base | constrained |" in md  # issue 43: the submitter on every row
    assert json.loads((site / "board.json").read_text())["entries"]


def test_qa_run_with_bare_nan(env):
    # every answer correct: AUROC is undefined, lm-eval writes a bare NaN into results_*.json
    items = [{"conf": float(c), "correct": 1} for c in np.linspace(0.5, 1.0, 50)]
    S.write_run(env["tmp"] / "qa", QA, {"judge_f1": items}, env["reg"][QA].metrics, version="1.0")
    res, _ = files(env["tmp"] / "qa")
    assert "NaN" in res.read_text()
    assert submit(env["tmp"] / "qa", "qa-model") == 0
    from leaderboards import db as DB

    (e,) = DB.load_entries(DB.connect(env["db"]))
    assert math.isnan(e["board"]["auroc"]) and math.isnan(e["reported"]["auroc_conf"])
    assert e["board"]["n_bins"] == 10
    conf = np.linspace(0.5, 1.0, 50)
    assert e["board"]["ece"] == pytest.approx(ref_ece(conf, np.ones(50), 10))
    site = env["tmp"] / "site"
    assert main(["render", "--out", str(site)]) == 0
    assert ">n/a<" in (site / "index.html").read_text()


def test_qa_metric_views_of_one_record(env):
    # QA tasks log one record carrying exact-match correctness as its "em" field; the em metric reads that view
    items = [{**it, "em": 1 - it["correct"]} for it in S.qa_items(80, seed=4)]
    S.write_run(env["tmp"] / "qa", QA, {"judge_f1": items}, env["reg"][QA].metrics, version="1.0")
    assert submit(env["tmp"] / "qa", "qa-model") == 0
    from leaderboards import db as DB

    (e,) = DB.load_entries(DB.connect(env["db"]))
    acc = np.mean([it["correct"] for it in items])
    assert e["board"]["acc"] == pytest.approx(acc) and e["reported"]["em"] == pytest.approx(1 - acc)


def test_limit_is_recorded_and_shown(env, capsys):
    path = run_cls(env, n=50, limit=50, original=5000)
    assert submit(path) == 0
    site = env["tmp"] / "site"
    main(["render", "--out", str(site)])
    assert "50 of 5000 (limit 50)" in (site / "index.html").read_text()


# ---------------------------------------------------------------- rejections


def test_tampered_metric_rejected(env, capsys):
    path = run_cls(env)
    res, _ = files(path)
    data = json.loads(res.read_text())
    true = data["results"][CLS]["ece_uw15,semsoft"]
    data["results"][CLS]["ece_uw15,semsoft"] = true - 0.05
    res.write_text(json.dumps(data))
    assert submit(path) == 2
    err = capsys.readouterr().err
    assert "ece_uw15,semsoft" in err and repr(true - 0.05) in err and repr(true)[:10] in err
    assert n_submissions(env["db"]) == (0, 0)


def test_tampered_item_rejected(env, capsys):
    # editing a per-document item changes the recomputation, so the reported number no longer matches
    path = run_cls(env)
    _, samp = files(path)
    lines = samp.read_text().splitlines()
    row = json.loads(lines[0])
    wrong = 1 - int(np.argmax(row["acc"]["probs"]) == row["acc"]["gold"])  # flip this document's correctness
    for m in row["metrics"]:
        row[m] = {"probs": [0.0, 0.0, 0.0, 1.0], "gold": 3 if wrong else 0, "soft": None}
    lines[0] = json.dumps(row)
    samp.write_text("\n".join(lines) + "\n")
    assert submit(path) == 2
    err = capsys.readouterr().err
    assert "is reported as" in err and "but recomputes to" in err

    # one metric's item alone: that metric no longer matches its reported value
    _, samp = files(run_cls(env, "fresh"))
    lines = samp.read_text().splitlines()
    row = json.loads(lines[0])
    row["brier_mc"] = {"probs": [0.0, 0.0, 0.0, 1.0], "gold": 0, "soft": None}
    lines[0] = json.dumps(row)
    samp.write_text("\n".join(lines) + "\n")
    assert submit(env["tmp"] / "fresh") == 2
    err = capsys.readouterr().err
    # the row's records differ between metric names: one canonical record per document (issue 12, D1)
    # (named by the holder, the row's first metric: the one reader's message, semcal_eval.runs.row_record)
    assert "doc_id 0, filter constrained): different records under 'acc' and 'brier_mc'" in err


def test_duplicate_submission_rejected(env, capsys):
    path = run_cls(env)
    assert submit(path, "first") == 0
    assert submit(path, "renamed copy", "csr") == 2
    err = capsys.readouterr().err
    assert "duplicate submission" in err and "'first'" in err
    assert n_submissions(env["db"]) == (1, 5)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["versions"].__setitem__(CLS, "1.0"), "has version 1.0"),
        (lambda d: d.__setitem__("results", {"hellaswag": d["results"][CLS]}), "not a semcal task"),
        (lambda d: d["n-samples"][CLS].__setitem__("original", 1000), "n-samples.original is 1000 but the test split"),
        (lambda d: d["n-samples"][CLS].__setitem__("effective", 200), "without a recorded --limit"),
        (lambda d: d["n-samples"].__setitem__(CLS, {"original": 299, "effective": 299}),
         "n-samples.original is 299 but the test split the board loads has 300 documents"),
        (lambda d: d["config"].__setitem__("limit", 100), "limit 100 of 300 documents gives 100"),
        (lambda d: d["results"][CLS].__setitem__("made_up,constrained", 0.1), "does not declare"),
        (lambda d: d["results"][CLS].pop("brier_mc,prior"), "brier_mc"),
    ],
)
def test_bad_results_rejected(env, capsys, edit, message):
    path = run_cls(env)
    res, _ = files(path)
    data = json.loads(res.read_text())
    edit(data)
    res.write_text(json.dumps(data))
    assert submit(path) == 2
    assert message in capsys.readouterr().err


def test_sample_rows_checked(env, capsys):
    path = run_cls(env)
    _, samp = files(path)
    lines = samp.read_text().splitlines()
    samp.write_text("\n".join(lines[:-1]) + "\n")  # drop the last prior row
    assert submit(path) == 2
    assert "filter prior has 299 sample rows but n-samples.effective is 300" in capsys.readouterr().err

    row = json.loads(lines[5])
    row["doc_id"] = 4
    lines[5] = json.dumps(row)
    samp.write_text("\n".join(lines) + "\n")
    assert submit(path) == 2
    err = capsys.readouterr().err
    assert "doc_id 4 appears twice" in err and ":6:" in err


def test_malformed_files_named_with_line(env, capsys):
    path = run_cls(env)
    res, samp = files(path)
    lines = samp.read_text().splitlines()
    lines[2] = lines[2][:-5]
    samp.write_text("\n".join(lines) + "\n")
    assert submit(path) == 2
    err = capsys.readouterr().err
    assert f"{samp}:3: malformed JSON" in err

    res.write_text('{"results": {,}}')
    assert submit(path) == 2
    assert f"{res}: malformed JSON at line 1" in capsys.readouterr().err

    assert submit(env["tmp"] / "does-not-exist") == 2
    assert "does not exist" in capsys.readouterr().err


def test_nan_item_rejected(env, capsys):
    S.write_run(env["tmp"] / "qa", QA, {"judge_f1": S.qa_items(20)}, env["reg"][QA].metrics, version="1.0")
    _, samp = files(env["tmp"] / "qa")
    lines = samp.read_text().splitlines()
    row = json.loads(lines[7])
    for m in row["metrics"]:
        row[m] = {"conf": float("nan"), "correct": 1}
    lines[7] = json.dumps(row)  # a bare NaN in the JSONL: parsed, then refused as a confidence
    assert "NaN" in lines[7]
    samp.write_text("\n".join(lines) + "\n")
    assert submit(env["tmp"] / "qa") == 2
    err = capsys.readouterr().err
    assert samp.name in err and "NaN" in err


def test_size_limits(env, capsys, monkeypatch):
    path = run_cls(env)
    monkeypatch.setenv("SEMCAL_BOARD_MAX_SAMPLES_BYTES", "10000")
    assert submit(path) == 2
    err = capsys.readouterr().err
    assert "exceeds the limit of 10000 bytes (SEMCAL_BOARD_MAX_SAMPLES_BYTES)" in err
    monkeypatch.delenv("SEMCAL_BOARD_MAX_SAMPLES_BYTES")
    monkeypatch.setenv("SEMCAL_BOARD_MAX_LINE_BYTES", "500")
    assert submit(path) == 2
    assert ":1: line of" in capsys.readouterr().err


def test_bad_names_rejected_by_cli(env, capsys):
    path = run_cls(env)
    assert submit(path, "a\x00b") == 2
    assert submit(path, "x" * 201) == 2
    assert submit(path, "ok", "../../etc") == 2
    err = capsys.readouterr().err
    assert err.count("model name") >= 2 and "method '../../etc'" in err
    assert not env["db"].exists()


def test_list_and_serve_errors(env, capsys):
    assert main(["list"]) == 0
    assert "no submissions" in capsys.readouterr().out
    assert submit(run_cls(env, n=40), "listed-model", "rlcr") == 0
    capsys.readouterr()
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "listed-model\trlcr" in out and "5 entries" in out
    assert main(["serve", "--site", str(env["tmp"] / "nothing-here"), "--port", "0"]) == 2
    assert "run `semcal-eval board render" in capsys.readouterr().err
    (env["tmp"] / "junk.sqlite").write_bytes(b"not a database" * 100)
    assert main(["list", "--db", str(env["tmp"] / "junk.sqlite")]) == 2
    assert "board database" in capsys.readouterr().err


# ---------------------------------------------------------------- ranking rules


def test_ranking_flags_and_overall(env, monkeypatch):
    from leaderboards import db as DB
    from leaderboards.ranking import TIERS, rank_entries
    from leaderboards.ranking import overall as trusted_overall

    def overall(rows):  # these synthetic runs are self-reported; the overall view's grouping rules are the same
        return trusted_overall(rows, tiers=TIERS)

    # one submitter for every run, so a model's two tasks are one identity (anonymous runs are each their own)
    monkeypatch.setenv("SEMCAL_BOARD_TOKEN", DB.add_submitter(DB.connect(env["db"]), "tester"))
    n = 300
    items = S.cls_items(n, seed=3)
    prior = S.prior_items(items)
    # a constant, base-rate "model": perfectly calibrated, no better than the prior on Brier
    S.write_run(env["tmp"] / "a", CLS, {"constrained": items, "semsoft": prior, "prior": prior},
                env["reg"][CLS].metrics, model_name="a")
    assert submit(env["tmp"] / "a", "model-a") == 0
    sharp = S.cls_items(n, seed=3, temperature=0.5)  # overconfident copy of the same documents
    S.write_run(env["tmp"] / "b", CLS, {"constrained": sharp, "prior": prior}, env["reg"][CLS].metrics,
                model_name="b")
    assert submit(env["tmp"] / "b", "model-b") == 0
    qa1, qa2 = S.qa_items(200, seed=1), [{"conf": 0.9, "correct": c["correct"]} for c in S.qa_items(200, seed=1)]
    S.write_run(env["tmp"] / "q", QA, {"constrained": qa1, "semsoft": qa2}, env["reg"][QA].metrics,
                model_name="a", version="1.0")
    assert submit(env["tmp"] / "q", "model-a") == 0

    rows = rank_entries(DB.load_entries(DB.connect(env["db"])))
    by = {(r["model_name"], r["task"], r["filter"]): r for r in rows}
    refs = [r for r in rows if r["is_reference"]]
    # the board's prior, majority and uniform on the same documents are shown once each
    assert sorted(r["filter"] for r in refs) == ["majority", "prior", "uniform"]
    cls_rows = [r for r in rows if r["task"] == CLS and not r["is_reference"]]
    eces = sorted(r["board"]["ece"] for r in cls_rows)
    for r in cls_rows:
        assert r["ece_rank"] == eces.index(r["board"]["ece"]) + 1
    base_rate = by[("model-a", CLS, "semsoft")]
    assert base_rate["beats_prior"] is False and base_rate["degenerate"]
    assert by[("model-a", CLS, "constrained")]["beats_prior"] is True
    assert by[("model-a", QA, "constrained")]["beats_prior"] is None  # no prior row for that task
    assert "std" in by[("model-a", QA, "semsoft")]["degenerate"]

    groups = {(g["model_name"], g["filter"]): g for g in overall(rows)}
    g = groups[("model-a", "constrained")]
    assert g["n_tasks"] == 2
    assert g["mean_brier_rank"] == (by[("model-a", CLS, "constrained")]["brier_rank"]
                                    + by[("model-a", QA, "constrained")]["brier_rank"]) / 2
    ordered = overall(rows)
    assert [x["mean_brier_rank"] for x in ordered] == sorted(x["mean_brier_rank"] for x in ordered)

    site = env["tmp"] / "site"
    assert main(["render", "--out", str(site)]) == 0
    index = (site / "index.html").read_text()
    assert index.count('<tr class="ref') == 3
    pages = [p.read_text() for p in (site / "entries").glob("*.html")]
    cls_pages = [t for t in pages if CLS in t]
    assert len(cls_pages) == 2 and all("prior: ECE" in t for t in cls_pages)  # each submission keeps its prior
    assert "not better than class prior on Brier" in index


def test_board_columns_come_from_the_metric_table():
    """Columns = the table's ROLES of the record kind, values = compute(), CIs = ci() with the table's one
    bootstrap setting (CI_N_BOOT, CI_SEED), n_bins = ROLE_BINS; the site shows the same roles."""
    from semcal_eval.core import metric_table as T
    from semcal_eval.core.records import to_arrays

    from leaderboards.recompute import NO_CI_ROLES, board_metrics
    from leaderboards.site import COLUMNS

    for kind, items in (("classification", S.cls_items(150, seed=2)), ("confidence", S.qa_items(150, seed=2))):
        assert tuple(T.ROLES[kind]) == COLUMNS
        b, conf, correct = board_metrics(kind, items, "test")
        a = to_arrays(items)
        np.testing.assert_array_equal(conf, a.conf)
        np.testing.assert_array_equal(correct, a.correct)
        assert b["n_bins"] == T.ROLE_BINS[kind]
        for role, name in T.ROLES[kind].items():
            assert b[role] == T.compute(name, a), (kind, role)
            if role in NO_CI_ROLES:
                assert f"{role}_ci_lo" not in b
            else:
                assert (b[f"{role}_ci_lo"], b[f"{role}_ci_hi"]) == T.ci(name, a, T.CI_N_BOOT, T.CI_SEED), (kind, role)


def test_mixed_record_kinds_rejected(env, capsys):
    path = run_cls(env)
    _, samp = files(path)
    lines = samp.read_text().splitlines()
    row = json.loads(lines[3])
    for m in row["metrics"]:
        row[m] = {"conf": 0.5, "correct": 1}
    lines[3] = json.dumps(row)
    samp.write_text("\n".join(lines) + "\n")
    assert submit(path) == 2
    err = capsys.readouterr().err
    assert f"{samp}:4 metric acc" in err and "must be one kind" in err


def test_run_reader_is_the_library_s():
    """The board reads runs with semcal_eval.runs (RunError), and the library never imports the board."""
    from semcal_eval.runs import RunError, find_results

    from leaderboards.errors import REJECTED

    assert RunError in REJECTED
    with pytest.raises(RunError, match="does not exist"):
        find_results(REPO / "no-such-run")
    code = ("import sys, semcal_eval.report, semcal_eval.runs, semcal_eval.core.metric_table; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'leaderboards'); assert not bad, bad")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])})
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_degenerate_one_bin():
    from leaderboards.recompute import degenerate_reason

    rng = np.random.default_rng(0)
    conf = np.r_[np.full(96, 0.71) + rng.uniform(0, 0.01, 96), rng.uniform(0, 1, 4)]
    assert "one of 15 bins" in degenerate_reason(conf, 15)
    assert degenerate_reason(rng.uniform(0, 1, 100), 15) == ""
    assert "std" in degenerate_reason(np.full(10, 1.0), 10)  # confidence exactly 1.0 everywhere


# ---------------------------------------------------------------- untrusted input in the output


def test_html_escaping_and_no_path_traversal(env):
    evil = '<script>window.__xss=1</script>"><img src=x onerror=alert(1)>../../x'
    path = run_cls(env, n=60)
    assert submit(path, evil, "rl+cr") == 0
    site = env["tmp"] / "site"
    assert main(["render", "--out", str(site)]) == 0
    for page in [site / "index.html", *(site / "entries").glob("*.html")]:
        text = page.read_text()
        assert "<script>window" not in text and "<img src=x" not in text
        assert "&lt;script&gt;window.__xss=1&lt;/script&gt;&quot;&gt;&lt;img" in text
        assert text.count("<script") == 1  # only our own external board.js
    md = (site / "leaderboard.md").read_text()
    assert "<script>" not in md and "&lt;script&gt;" in md
    written = [p.relative_to(site) for p in site.rglob("*") if p.is_file()]
    import re

    for p in written:
        assert re.fullmatch(r"(entries/[0-9a-f]{16}(-\d+)?\.(html|png)|[a-z.]+\.(html|js|css|csv|md|json))", str(p)), p


def test_csv_formula_injection(env):
    path = run_cls(env, n=60)
    assert submit(path, "=HYPERLINK(\"http://x\")", "base") == 0
    site = env["tmp"] / "site"
    main(["render", "--out", str(site)])
    rows = list(csv.DictReader((site / "leaderboard.csv").open()))
    assert all(r["model_name"].startswith("'=") for r in rows)


# ---------------------------------------------------------------- crash safety


def test_killed_submit_leaves_db_unchanged(env, tmp_path):
    first = run_cls(env, "first", n=100, seed=1)
    assert submit(first, "before") == 0
    con = sqlite3.connect(env["db"])
    before = list(con.iterdump())
    con.close()

    second = run_cls(env, "second", n=100, seed=2)
    marker = tmp_path / "paused"
    proc_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    # a tests-only wrapper around `board submit` that stops inside the open transaction (after the first entry row)
    proc = subprocess.Popen(
        [sys.executable, S.__file__, "paused-submit", str(marker), "--", "submit", str(second),
         "--model-name", "killed", "--method", "base", "--db", str(env["db"])],
        env=proc_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    deadline = time.time() + 120
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, "submit never reached its pause point"
        time.sleep(0.05)
    assert marker.read_text() == "inside-transaction"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    con = sqlite3.connect(env["db"])
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert list(con.iterdump()) == before
    con.close()
    # the killed run left nothing behind, so the same run is not a duplicate now
    assert submit(second, "after") == 0
    assert n_submissions(env["db"]) == (2, 10)


# ---------------------------------------------------------------- the real task folder


def test_registry_reads_real_task_folder(monkeypatch):
    monkeypatch.delenv("SEMCAL_BOARD_TASKS_DIR", raising=False)
    reg = load_registry()
    if not reg:
        pytest.skip("no task folders yet")
    spec = reg.get("goemotions_semsoft")
    assert spec is not None and spec.version == "1.0"
    from semcal_eval.harness.aggregations import AGGREGATIONS

    # inherited through include: _goemotions.yaml, and resolvable in lm-eval's registry
    assert spec.metrics["ece_uw15"] == AGGREGATIONS["ece_uw15"]
    assert not any(n.startswith("_") for n in reg)


@pytest.mark.slow
def test_real_lm_eval_run_submits(tmp_path, data_dir, smollm2_path, monkeypatch):
    """evaluate (real SmolLM2-135M through lm-eval) -> submit -> render, on the real task folder."""
    monkeypatch.delenv("SEMCAL_BOARD_TASKS_DIR", raising=False)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "semcal_eval.cli", "--model", "hf-semsoft",
           "--model_args", "pretrained=semcal:smollm2-135m,dtype=float32", "--tasks", "goemotions_semsoft",
           "--limit", "40", "--log_samples", "--output_path", str(out), "--metadata", '{"split": "validation"}',
           "--device", "cpu", "--batch_size", "8"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    db = tmp_path / "board.sqlite"
    assert main(["submit", str(out), "--model-name", "SmolLM2-135M-Instruct", "--method", "base",
                 "--db", str(db)]) == 0

    from leaderboards import db as DB

    entries = {e["filter"]: e for e in DB.load_entries(DB.connect(db))}
    assert {"constrained", "semsoft", "prior"} <= set(entries)
    assert entries["prior"]["is_reference"] and not entries["semsoft"]["is_reference"]
    for e in entries.values():
        assert e["n_docs"] == 40 and e["n_original"] > 40 and e["limit"] == 40
        # checked against the dataset: the validation split's true size, a limited run is partial
        assert (e["split"], e["coverage"], e["n_split"]) == ("validation", "partial", e["n_original"])
        assert e["provenance"]["lm_eval_version"] == "0.4.13"
        if e["is_reference"]:
            continue  # the board's own reference rows report nothing
        # the board's ECE column and the task's own ece_uw15 aggregation agree on the same items
        assert e["board"]["ece"] == pytest.approx(e["reported"]["ece_uw15"], abs=1e-12)
        assert e["board"]["acc"] == pytest.approx(e["reported"]["acc"], abs=1e-12)
    site = tmp_path / "site"
    assert main(["render", "--out", str(site), "--db", str(db)]) == 0
    (page,) = (site / "entries").glob("*.html")
    text = page.read_text()
    assert "smollm2-135m" in text and "hf-semsoft" in text and "134515008" in text  # model, args, size
    # a second submit of the same run is a duplicate
    assert main(["submit", str(out), "--model-name", "again", "--method", "base", "--db", str(db)]) == 2


def test_v1_database_refused_with_the_way_out(env, capsys):
    con = sqlite3.connect(env["db"])
    con.executescript("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                      "INSERT INTO meta VALUES ('schema_version', '1');"
                      "CREATE TABLE submissions (id INTEGER PRIMARY KEY, content_hash TEXT);")
    con.close()
    os.chmod(env["db"], 0o600)  # issue 43: a board file others can read is refused before its version is read
    assert submit(run_cls(env, n=40)) == 2
    err = capsys.readouterr().err
    from leaderboards import db as DB

    assert f"board schema version 1, this semcal expects {DB.SCHEMA_VERSION}" in err and "move the file away" in err


def test_tier_and_verification_stored(env):
    from leaderboards import db as DB
    from leaderboards.recompute import validate_run

    con = DB.connect(env["db"])
    sub = validate_run(run_cls(env, n=40))
    sid = DB.insert(con, sub, "m", "base", tier="verified", verification={"job": 7})
    (e, *_) = DB.load_entries(con)
    assert (e["submission_id"], e["tier"], e["verification"]) == (sid, "verified", {"job": 7})
    assert e["predictions_hash"] == sub.predictions_hash and e["model_args"] == sub.model_args
    with pytest.raises(ValueError, match="tier 'gold'"):
        DB.insert(con, validate_run(run_cls(env, "other", n=40, seed=5)), "m", "base", tier="gold")
