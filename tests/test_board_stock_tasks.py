"""The board takes runs of stock lm-eval multiple_choice tasks (issue 33 item 4), with real processes.

One real run of plain ``lm_eval`` (not semcal's CLI) on the stock SST-2 YAML (tests/fixtures/stock_tasks/
sst2_stock.yaml, which does not import semcal; SmolLM2-135M, 40 validation documents) is shared by the module.
It is submitted unregistered (self-reported, nothing re-scored), then registered by the operator's command and
submitted again (checked against the board's own documents and spot-checked by re-scoring with the model), and
edited copies of it are submitted as a forger would: each edit must be refused, by the stage that should catch it.

The board's numbers are compared with an independent recomputation from the samples file (numpy written out here,
never semcal's metric code) and with ``semcal-eval calibrate`` on the same folder (one function for both).
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
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from leaderboards import db, stock
from leaderboards.errors import SubmissionError
from leaderboards.recompute import validate_run
from semcal_eval import calibrate

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "stock_tasks"
LIMIT = 40  # two folds of >= 20: the cross-fitted temperature rows are computed
TASK = "sst2_stock"
ENV = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")


def _write_tasks(folder: Path, data_dir: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    src = FIXTURES / "sst2_stock.yaml"
    (folder / src.name).write_text(src.read_text().replace("{DATA}", str(data_dir)))
    return folder


def board(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """``semcal-eval board ARGS`` as an operator or a submitter runs it (a fresh process, offline)."""
    return subprocess.run([sys.executable, "-m", "semcal_eval", "board", *args], cwd=REPO, env=ENV,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def stock_run(tmp_path_factory, data_dir, smollm2_path):
    """A plain ``lm_eval`` run of the stock SST-2 task: (output folder, task folder)."""
    tmp = tmp_path_factory.mktemp("stock_board")
    tasks = _write_tasks(tmp / "tasks", data_dir)
    r = subprocess.run(
        [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={smollm2_path},dtype=float32",
         "--tasks", TASK, "--include_path", str(tasks), "--limit", str(LIMIT), "--batch_size", "8", "--device",
         "cpu", "--log_samples", "--output_path", str(tmp / "out")],
        cwd=tmp, env=ENV, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    return tmp / "out", tasks


def _files(run: Path) -> tuple[Path, Path]:
    (res,) = run.glob("*/results_*.json")
    (sp,) = run.glob(f"*/samples_{TASK}_*.jsonl")
    return res, sp


def _copy(run: Path, dest: Path, edit_rows=None, edit_results=None) -> Path:
    """A copy of the run with its samples rows and/or results edited (the forger's tools)."""
    shutil.copytree(run, dest)
    res, sp = _files(dest)
    if edit_rows is not None:
        rows = [json.loads(x) for x in sp.read_text().splitlines()]
        edit_rows(rows)
        sp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    if edit_results is not None:
        data = json.loads(res.read_text())
        edit_results(data)
        res.write_text(json.dumps(data))
    return dest


_REGISTRY: dict = {}


def _registered_once(tasks: Path, tmp_path_factory) -> dict:
    """The registry of one board database, shared by the generated examples (registering builds the task)."""
    if not _REGISTRY:
        _REGISTRY.update(_registered(tasks, tmp_path_factory.mktemp("reg") / "b.sqlite"))
    return _REGISTRY


def _registered(tasks: Path, db_path: Path) -> dict:
    con = db.connect(db_path)
    try:
        stock.register(con, TASK, tasks)
        return stock.registered(con)
    finally:
        con.close()


# -- the board's numbers --------------------------------------------------------------------------------------
def _independent(sp: Path) -> dict[str, dict[str, float]]:
    """loglik / loglik_norm rows recomputed with numpy from the samples file: acc, multiclass Brier, NLL."""
    out = {"loglik": [], "loglik_norm": []}
    for line in sp.read_text().splitlines():
        r = json.loads(line)
        ll = np.array([float(x[0]) for x in r["filtered_resps"]])
        chars = np.array([len(a["arg_1"]) - 1 for a in r["arguments"].values()], dtype=float)  # minus " "
        y = int(r["target"])
        for name, z in (("loglik", ll), ("loglik_norm", ll / chars)):
            p = np.exp(z - z.max())
            p /= p.sum()
            out[name].append((p, y))
    got = {}
    for name, items in out.items():
        P = np.array([p for p, _ in items])
        y = np.array([t for _, t in items])
        onehot = np.eye(P.shape[1])[y]
        got[name] = {"acc": float(np.mean(P.argmax(1) == y)), "brier": float(np.mean(((P - onehot) ** 2).sum(1))),
                     "nll": float(np.mean(-np.log(P[np.arange(len(y)), y])))}
    return got


def test_unregistered_run_is_recomputed_and_matches_an_independent_recomputation(stock_run):
    run, _ = stock_run
    sub = validate_run(run)
    res, sp = _files(run)
    results = json.loads(res.read_text())
    chash = stock.config_hash(results["configs"][TASK], results["versions"][TASK])
    key = stock.entry_task(TASK, chash)
    assert sub.stock[key]["registered"] is False and sub.unregistered_stock == [key]
    rows = {e.filter: e for e in sub.entries}
    assert {e.task for e in sub.entries} == {key}
    assert set(rows) == set(calibrate.ROWS)  # every row computed: 40 documents, one choice count
    assert {f for f, e in rows.items() if e.is_reference} == {"prior", "majority", "uniform"}
    ref = _independent(sp)
    for name in ("loglik", "loglik_norm"):
        for col in ("acc", "brier", "nll"):
            assert rows[name].board[col] == pytest.approx(ref[name][col], abs=1e-12), (name, col)
    # lm-eval's own aggregates are what the board recomputed, stored on the row whose argmax they score
    assert rows["loglik"].reported == {"acc": results["results"][TASK]["acc,none"]}
    assert rows["loglik_norm"].reported == {"acc_norm": results["results"][TASK]["acc_norm,none"]}
    assert rows["loglik"].n_docs == LIMIT and rows["loglik"].coverage == "partial"
    # the CLI (`semcal-eval calibrate`) gives the same numbers on the same folder: one function for both
    cal = calibrate.calibrate_run(run)["tasks"][TASK]["rows"]
    for name, e in rows.items():
        for col, role in (("ece_uw15", "ece"), ("brier_mc", "brier"), ("nll", "nll")):
            assert e.board[role] == pytest.approx(cal[name][col], abs=1e-12), (name, col)


def test_unregistered_run_is_stored_self_reported_without_a_rescore(stock_run, tmp_path):
    run, _ = stock_run
    r = board("submit", str(run), "--method", "base", "--db", str(tmp_path / "b.sqlite"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "stored" in r.stdout and "as self-reported" in r.stdout
    assert "has not registered" in r.stdout and "register-task" in r.stdout
    assert "re-scoring" not in r.stderr  # no model time spent on documents the board cannot check
    con = db.connect(tmp_path / "b.sqlite")
    (v,) = con.execute("SELECT verification FROM submissions").fetchone()
    con.close()
    (st,) = json.loads(v)["stock_tasks"].values()
    assert st["registered"] is False and st["recomputed"] == ["acc", "acc_norm"]


def test_registration_keys_on_the_boards_own_build_of_the_config(stock_run, tmp_path):
    run, tasks = stock_run
    res, _ = _files(run)
    results = json.loads(res.read_text())
    r = board("register-task", TASK, "--include-path", str(tasks), "--db", str(tmp_path / "b.sqlite"))
    assert r.returncode == 0, r.stderr
    want = stock.config_hash(results["configs"][TASK], results["versions"][TASK])
    assert want in r.stdout and "872 documents" in r.stdout  # the whole SST-2 dev split
    listed = board("register-task", "--db", str(tmp_path / "b.sqlite"))
    assert want in listed.stdout
    # another prompt is another task, though its name is the same
    other = tmp_path / "other"
    other.mkdir()
    (other / "sst2_stock.yaml").write_text((tasks / "sst2_stock.yaml").read_text().replace("Review:", "Text:"))
    r2 = board("register-task", TASK, "--include-path", str(other), "--db", str(tmp_path / "b.sqlite"))
    assert r2.returncode == 0 and want not in r2.stdout
    bad = board("register-task", "no_such_task", "--include-path", str(tasks), "--db", str(tmp_path / "b.sqlite"))
    assert bad.returncode == 2 and "no_such_task" in bad.stderr


def test_registered_run_is_checked_against_the_dataset_and_spot_checked(stock_run, tmp_path):
    run, tasks = stock_run
    db_path = tmp_path / "b.sqlite"
    _registered(tasks, db_path)
    r = board("submit", str(run), "--method", "base", "--db", str(db_path))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "as spot-checked" in r.stdout and "spot check passed" in r.stdout
    assert "re-scoring" in r.stderr and "loglik, loglik_norm" in r.stderr
    site = tmp_path / "site"
    assert board("render", "--out", str(site), "--db", str(db_path)).returncode == 0
    (page,) = (site / "entries").glob("*.html")
    html = page.read_text()
    assert 'id="stock"' in html and "registered with the board" in html and "sst2_stock@" in html


def test_sharpened_log_likelihoods_pass_validation_but_fail_the_spot_check(stock_run, tmp_path):
    """A forger doubles every log-likelihood: argmax, acc and acc_norm are unchanged, so every logged and reported
    value stays consistent and validation accepts it; only re-scoring with the model can tell."""
    run, tasks = stock_run

    def sharpen(rows):
        for r in rows:
            r["filtered_resps"] = [[str(2 * float(x[0])), x[1]] for x in r["filtered_resps"]]
            r["resps"] = [[x] for x in r["filtered_resps"]]

    forged = _copy(run, tmp_path / "forged", edit_rows=sharpen)
    db_path = tmp_path / "b.sqlite"
    regs = _registered(tasks, db_path)
    sub = validate_run(forged, stock_tasks=regs)  # consistent: accepted by every recomputing stage
    assert sub.stock[next(iter(sub.stock))]["registered"] is True
    r = board("submit", str(forged), "--method", "base", "--db", str(db_path))
    assert r.returncode == 2 and "spot check failed" in r.stderr


def test_board_evaluate_runs_a_registered_stock_task_itself(stock_run, tmp_path):
    """The verified tier: the board runs lm-eval itself on the registered task's folder and stores what it
    measured; a name it cannot resolve, or one registered under two configs, is refused with the keys to use."""
    _, tasks = stock_run
    db_path = tmp_path / "b.sqlite"
    bad = board("evaluate", "smollm2-135m", "--tasks", TASK, "--limit", str(LIMIT), "--db", str(db_path))
    assert bad.returncode == 2 and "unknown task(s) sst2_stock" in bad.stderr and "register-task" in bad.stderr
    _registered(tasks, db_path)
    r = board("evaluate", "smollm2-135m", "--tasks", TASK, "--limit", str(LIMIT), "--db", str(db_path))
    assert r.returncode == 0, r.stderr[-2000:]
    con = db.connect(db_path)
    try:
        rows = con.execute("SELECT s.tier, e.task, e.filter FROM entries e JOIN submissions s "
                           "ON s.id = e.submission_id").fetchall()
        other = tmp_path / "other"
        other.mkdir()
        (other / "sst2_stock.yaml").write_text((tasks / "sst2_stock.yaml").read_text().replace("Review:", "Text:"))
        second = stock.register(con, TASK, other)
        with pytest.raises(SubmissionError, match="2 configs") as e:
            stock.lookup(con, TASK)
        assert stock.entry_task(TASK, second.config_hash) in str(e.value)
        assert stock.lookup(con, stock.entry_task(TASK, second.config_hash)) == second
        assert stock.lookup(con, "no_such_task") is None
    finally:
        con.close()
    assert {t for t, _, _ in rows} == {"verified"}
    assert {f for _, _, f in rows} == set(calibrate.ROWS) and len({k for _, k, _ in rows}) == 1


# -- forgeries the recomputing stages refuse ----------------------------------------------------------------
def _flip_target(rows):
    r = rows[3]
    r["target"] = str(1 - int(r["target"]))
    import hashlib

    r["target_hash"] = hashlib.sha256(r["target"].encode()).hexdigest()
    lls = [float(x[0]) for x in r["filtered_resps"]]
    r["acc"] = r["acc_norm"] = float(int(np.argmax(lls)) == int(r["target"]))


def _fix_acc(data, sp_rows):
    n = len(sp_rows)
    data["results"][TASK]["acc,none"] = sum(r["acc"] for r in sp_rows) / n
    data["results"][TASK]["acc_norm,none"] = sum(r["acc_norm"] for r in sp_rows) / n


def test_a_relabelled_document_is_self_reported_unregistered_and_refused_registered(stock_run, tmp_path):
    run, tasks = stock_run
    rows_seen = []

    def edit(rows):
        _flip_target(rows)
        rows_seen.extend(rows)

    forged = _copy(run, tmp_path / "relabelled", edit_rows=edit, edit_results=lambda d: _fix_acc(d, rows_seen))
    sub = validate_run(forged)  # consistent with itself: nothing to check it against
    assert sub.unregistered_stock
    regs = _registered(tasks, tmp_path / "b.sqlite")
    with pytest.raises(SubmissionError, match="target_hash"):
        validate_run(forged, stock_tasks=regs)


@pytest.mark.parametrize("what", ["choice", "n_original", "doc"])
def test_registered_run_edits_are_refused_by_the_dataset_stage(stock_run, tmp_path, what):
    run, tasks = stock_run
    regs = _registered(tasks, tmp_path / "b.sqlite")
    if what == "choice":
        def edit(rows):  # "positive" -> "good": the choice texts are the dataset's
            a = rows[0]["arguments"]["gen_args_1"]
            a["arg_1"] = " good"
        forged, match = _copy(run, tmp_path / "f", edit_rows=edit), "logged choices"
    elif what == "n_original":
        forged = _copy(run, tmp_path / "f", edit_results=lambda d: d["n-samples"][TASK].update(original=40))
        match = "872 documents"
    else:
        def edit(rows):  # another document's hash: rows must be this dataset's, in its order
            rows[0]["doc_hash"], rows[1]["doc_hash"] = rows[1]["doc_hash"], rows[0]["doc_hash"]
        forged, match = _copy(run, tmp_path / "f", edit_rows=edit), "doc_hash"
    with pytest.raises(SubmissionError, match=match):
        validate_run(forged, stock_tasks=regs)


@pytest.mark.parametrize("edit,match", [
    (lambda rows: rows[5].update(acc=1.0 - rows[5]["acc"]), "logs acc"),
    (lambda rows: rows[5].update(filtered_resps=[["nan", "False"], ["-1.0", "False"]]), "finite"),
    (lambda rows: rows[5].update(filtered_resps=[["-1.0", "False"]]), "requests but 1 responses"),
    (lambda rows: rows[5].update(doc_id=4), "appears twice"),
    (lambda rows: rows[5].update(target="neutral"), "not one of the document's choices"),
    (lambda rows: rows[5].update(doc_hash="x" * 64), "64 hex"),
    (lambda rows: rows.pop(), "n-samples.effective"),
])
def test_unregistered_rows_are_recomputed_not_trusted(stock_run, tmp_path, edit, match):
    """Without a dataset the board still refuses what the log-likelihoods contradict or lm-eval never writes."""
    run, _ = stock_run
    with pytest.raises(SubmissionError, match=match):
        validate_run(_copy(run, tmp_path / "f", edit_rows=edit))


@pytest.mark.parametrize("edit,match", [
    (lambda d: d["results"][TASK].update({"acc,none": 0.99}), "recomputes to"),
    (lambda d: d["configs"][TASK].update(output_type="generate_until"), "not a stock multiple_choice"),
    (lambda d: d["results"][TASK].update({"acc,other": 0.5}), "one filter"),
    (lambda d: d["results"][TASK].update({"f1,none": 0.5}), "does not declare"),
])
def test_unregistered_results_edits_are_refused(stock_run, tmp_path, edit, match):
    run, _ = stock_run
    with pytest.raises(SubmissionError, match=match):
        validate_run(_copy(run, tmp_path / "f", edit_results=edit))


def test_resubmission_and_a_near_copy_are_duplicates(stock_run, tmp_path):
    run, _ = stock_run
    db_path = tmp_path / "b.sqlite"
    assert board("submit", str(run), "--method", "base", "--db", str(db_path), "--no-spot-check").returncode == 0

    def nudge(rows):  # 1e-9 on each log-likelihood: the same measurement
        for r in rows:
            r["filtered_resps"] = [[str(float(x[0]) + 1e-9), x[1]] for x in r["filtered_resps"]]

    for copy in (_copy(run, tmp_path / "same"), _copy(run, tmp_path / "near", edit_rows=nudge)):
        r = board("submit", str(copy), "--method", "base", "--db", str(db_path), "--no-spot-check")
        assert r.returncode == 2 and "duplicate submission" in r.stderr, r.stderr


# -- the config hash ---------------------------------------------------------------------------------------------
_CFG = {"task": "t", "dataset_path": "csv", "dataset_kwargs": {"data_files": {"validation": "/home/a/data/dev.tsv"}},
        "validation_split": "validation", "doc_to_text": "Review: {{text}}", "doc_to_choice": ["neg", "pos"],
        "doc_to_target": "label", "target_delimiter": " ", "num_fewshot": 0, "output_type": "multiple_choice",
        "metric_list": [{"metric": "acc"}], "metadata": {"version": 1.0}}


@pytest.mark.parametrize("change", [
    {"metadata": {"version": 1.0, "pretrained": "/x/model", "dtype": "float32"}},  # what semcal's CLI adds
    {"num_fewshot": None},  # lm-eval's evaluator sets the unset count to 0
    {"dataset_kwargs": {"data_files": {"validation": "C:\\\\users\\\\b\\\\dev.tsv"}}},  # another machine's path
    {"task_alias": "SST-2", "tag": ["sentiment"]},
])
def test_config_hash_ignores_what_describes_a_run(change):
    assert stock.config_hash({**_CFG, **change}, 1.0) == stock.config_hash(_CFG, "1.0")


@pytest.mark.parametrize("change", [
    {"doc_to_text": "Text: {{text}}"}, {"doc_to_choice": ["pos", "neg"]}, {"target_delimiter": ""},
    {"num_fewshot": 5}, {"validation_split": "test"}, {"dataset_kwargs": {"data_files": {"validation": "/a/b.tsv"}}},
])
def test_config_hash_changes_with_what_is_scored(change):
    assert stock.config_hash({**_CFG, **change}, 1.0) != stock.config_hash(_CFG, 1.0)
    assert stock.config_hash(_CFG, 2.0) != stock.config_hash(_CFG, 1.0)


def test_config_hash_refuses_what_is_not_a_config():
    for bad in ([1, 2], "text", None):
        with pytest.raises(SubmissionError, match="JSON object"):
            stock.config_hash(bad, 1.0)


# -- generative: a grammar of edits to the samples file ----------------------------------------------------------
def _apply(rows: list[dict], edits: list[tuple], fix: bool) -> list[dict]:
    """Apply ``edits`` ((name, doc position, value)) to a copy of the rows; ``fix``: then make every derived field
    (per-row acc / acc_norm) agree with the edited log-likelihoods and targets, as a careful forger would."""
    import copy
    import hashlib

    rows = copy.deepcopy(rows)
    for name, i, v in edits:
        r = rows[i % len(rows)]
        lls = [float(x[0]) for x in r["filtered_resps"]]
        if name == "scale":
            lls = [v * x for x in lls]
        elif name == "shift":
            lls = [x + v for x in lls]
        elif name == "swap_ll":
            lls = lls[::-1]
        elif name == "flip_target":
            r["target"] = str(1 - int(r["target"]))
            r["target_hash"] = hashlib.sha256(r["target"].encode()).hexdigest()
        elif name == "swap_choices":
            a = r["arguments"]
            a["gen_args_0"]["arg_1"], a["gen_args_1"]["arg_1"] = a["gen_args_1"]["arg_1"], a["gen_args_0"]["arg_1"]
        elif name == "drop":
            rows.remove(r)
            continue
        elif name == "dup":
            rows.append(copy.deepcopy(r))
            continue
        r["filtered_resps"] = [[repr(x), "False"] for x in lls]
        r["resps"] = [[x] for x in r["filtered_resps"]]
    if fix:
        for r in rows:
            lls = np.array([float(x[0]) for x in r["filtered_resps"]])
            ch = [a["arg_1"][1:] for a in r["arguments"].values()]
            y = calibrate.mc_gold(r["target"], ch)
            if y is not None:
                r.update(calibrate.lm_eval_correct(lls, ch, y))
    return rows


_EDIT = st.tuples(st.sampled_from(["scale", "shift", "swap_ll", "flip_target", "swap_choices", "drop", "dup"]),
                  st.integers(0, LIMIT - 1), st.sampled_from([0.5, 2.0, 3.0, -0.7, 1.3]))


def _dataset_view(rows: list[dict]) -> list[tuple]:
    """What a samples file says about the dataset (documents, targets, choice texts, which rows): a registered
    board refuses any change of it; the rest (the log-likelihoods) only the spot check can refute."""
    return [(r["doc_id"], r["doc_hash"], r["target"], r["target_hash"],
             tuple(a["arg_1"] for a in r["arguments"].values())) for r in rows]


@given(edits=st.lists(_EDIT, min_size=1, max_size=4), fix=st.booleans())
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_edit_is_refused_or_recomputed_from_what_the_file_says(stock_run, tmp_path_factory, edits, fix):
    """Over a grammar of edits (and a forger who then makes every derived field consistent, or not): the board
    refuses the file with a SubmissionError, or every number it stores is what the edited file's log-likelihoods
    and targets give (an independent numpy recomputation); a registered board refuses every edit of the dataset's
    side, and accepts log-likelihood edits only when they are consistent."""
    run, tasks = stock_run
    regs = _registered_once(tasks, tmp_path_factory)
    res, sp = _files(run)
    rows = _apply([json.loads(x) for x in sp.read_text().splitlines()], edits, fix)
    tmp = tmp_path_factory.mktemp("edit")

    def results(d):
        _fix_acc(d, rows) if fix and all("acc" in r for r in rows) else None

    forged = _copy(run, tmp / "f", edit_rows=lambda rs: rs.__setitem__(slice(None), rows), edit_results=results)
    same_dataset = _dataset_view(rows) == _dataset_view([json.loads(x) for x in sp.read_text().splitlines()])
    # registered runs every check the unregistered board runs, and more: tried only when that one accepts
    for registered in (False, True):
        try:
            sub = validate_run(forged, stock_tasks=regs if registered else None)
        except SubmissionError:
            event(f"{'registered' if registered else 'unregistered'}: refused")
            break
        event(f"{'registered' if registered else 'unregistered'}: accepted")
        assert same_dataset or not registered, edits
        got = {e.filter: e for e in sub.entries}
        _, sp2 = _files(forged)
        ref = _independent(sp2)
        for name in ("loglik", "loglik_norm"):
            for col in ("acc", "brier", "nll"):
                assert got[name].board[col] == pytest.approx(ref[name][col], abs=1e-9), (edits, name, col)
