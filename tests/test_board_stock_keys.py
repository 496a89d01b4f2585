"""Issue 43, items 4 and 5: stock tasks keyed by their data, each attack of the probe a regression test.

The probe registered the stock SST-2 YAML a second time, pointed at a copy of its data whose labels were the
model's own predictions (same file name): the config hash was the same, the registration silently replaced the
original, and the run on the relabelled data was spot-checked at acc 1.000 and ranked in the same table as runs
on the real labels. Here, with plain ``lm_eval`` runs of SmolLM2-135M (20 validation documents):

* registration hashes the content of the data files and code: the relabelled copy is a new version, the original
  registration is left exactly as it was, the same content under other spellings (a copy, a symlink) is the same
  registration (generated), and one changed byte is another;
* each run is matched to the registration whose documents it is, keyed by it: the relabelled run's entries never
  share a task key, a rank group or a table with the original's;
* a ``process_docs`` task (``!function``) registers and its runs match (it failed before with a message blaming
  the submitter's JSON: the board's own config dump kept a function object, and lm-eval logs it with its memory
  address); its helper code is part of the registration;
* ``register-task`` says that it runs the folder's Python.
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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leaderboards import cli, ranking, stock
from leaderboards import db as DB
from leaderboards.errors import SubmissionError
from leaderboards.recompute import validate_run

REPO = Path(__file__).resolve().parents[1]
YAML = (REPO / "tests" / "fixtures" / "stock_tasks" / "sst2_stock.yaml").read_text()
TASK, PD = "sst2_stock", "sst2_pd"
LIMIT = 20
ENV = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
UTILS = '''def lower(dataset):
    return dataset.map(_lower)


def _lower(doc):
    return {"text": doc["text"].lower()}
'''


def _tasks(folder: Path, data: Path, *, process_docs: bool = False) -> Path:
    """A task folder: the stock SST-2 YAML reading ``data/sst2/dev.tsv`` (with ``process_docs`` and its
    ``utils.py``: the same task under the name sst2_pd)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = YAML.replace("{DATA}", str(data))
    if process_docs:
        text = text.replace(f"task: {TASK}", f"task: {PD}") + "process_docs: !function utils.lower\n"
        (folder / "utils.py").write_text(UTILS)
    (folder / ("sst2_pd.yaml" if process_docs else "sst2_stock.yaml")).write_text(text)
    return folder


def _lm_eval(tasks: Path, task: str, out: Path, model: str) -> Path:
    r = subprocess.run(
        [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={model},dtype=float32",
         "--tasks", task, "--include_path", str(tasks), "--limit", str(LIMIT), "--batch_size", "8", "--device",
         "cpu", "--log_samples", "--output_path", str(out)],
        cwd=out.parent, env=ENV, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def _samples(run: Path) -> list[dict]:
    (sp,) = run.glob("*/samples_*.jsonl")
    return [json.loads(x) for x in sp.read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_dir, smollm2_path):
    """(original task folder, relabelled task folder, process_docs task folder, their three lm_eval runs). The
    relabelled data is a copy of dev.tsv (same file name) whose first 20 labels are the model's predictions."""
    tmp = tmp_path_factory.mktemp("stock_keys")
    orig = _tasks(tmp / "orig", data_dir)
    run_orig = _lm_eval(orig, TASK, tmp / "out_orig", smollm2_path)
    preds = {r["doc_id"]: int(np.argmax([float(x[0]) for x in r["filtered_resps"]])) for r in _samples(run_orig)}
    lines = (data_dir / "sst2" / "dev.tsv").read_text().splitlines(keepends=True)
    for i, p in preds.items():
        text, _, _ = lines[i + 1].rstrip("\n").rpartition("\t")
        lines[i + 1] = f"{text}\t{p}\n"
    (tmp / "relabelled" / "sst2").mkdir(parents=True)
    (tmp / "relabelled" / "sst2" / "dev.tsv").write_text("".join(lines))
    relab = _tasks(tmp / "relab_tasks", tmp / "relabelled")
    run_relab = _lm_eval(relab, TASK, tmp / "out_relab", smollm2_path)
    pd = _tasks(tmp / "pd", data_dir, process_docs=True)
    run_pd = _lm_eval(pd, PD, tmp / "out_pd", smollm2_path)
    return {"orig": orig, "relab": relab, "pd": pd, "run_orig": run_orig, "run_relab": run_relab, "run_pd": run_pd,
            "tmp": tmp, "data": data_dir}


def _rows(con) -> list[tuple]:
    return con.execute("SELECT * FROM stock_tasks ORDER BY rowid").fetchall()


def test_relabelled_data_is_a_new_version_and_replaces_nothing(runs, tmp_path, capsys):
    db_path = str(tmp_path / "b.sqlite")
    assert cli.main(["register-task", TASK, "--include-path", str(runs["orig"]), "--db", db_path]) == 0
    out = capsys.readouterr()
    assert "imports and runs the Python" in out.err and "register only folders you trust" in out.err
    con = DB.connect(db_path)
    first = _rows(con)
    assert cli.main(["register-task", TASK, "--include-path", str(runs["relab"]), "--db", db_path]) == 0
    out = capsys.readouterr().out
    regs = list(stock.registered(con).values())
    assert len(regs) == 2 and regs[0].logged_hash == regs[1].logged_hash  # one YAML, one logged config hash
    assert regs[0].config_hash != regs[1].config_hash  # ... but other data: another registration
    assert "A new version" in out and stock.entry_task(TASK, regs[0].config_hash) in out
    assert _rows(con)[:1] == first  # the original registration, byte for byte
    # the original again, from a copy of its folder: the same registration, nothing changed (not even the folder)
    copy = tmp_path / "copy"
    shutil.copytree(runs["orig"], copy)
    assert cli.main(["register-task", TASK, "--include-path", str(copy), "--db", db_path]) == 0
    assert "nothing changed" in capsys.readouterr().out
    assert _rows(con)[:1] == first and len(_rows(con)) == 2
    con.close()


def test_each_run_is_keyed_by_the_registration_of_its_own_documents(runs, tmp_path):
    con = DB.connect(tmp_path / "b.sqlite")
    a = stock.register(con, TASK, runs["orig"])
    b = stock.register(con, TASK, runs["relab"])
    regs = stock.registered(con)
    honest, relab = validate_run(runs["run_orig"], stock_tasks=regs), validate_run(runs["run_relab"], stock_tasks=regs)
    assert set(honest.stock) == {stock.entry_task(TASK, a.config_hash)}
    assert set(relab.stock) == {stock.entry_task(TASK, b.config_hash)}
    assert all(v["registered"] and v["logged_config_hash"] == a.logged_hash for v in [*honest.stock.values(),
                                                                                        *relab.stock.values()])
    loglik = {s: next(e for e in sub.entries if e.filter == "loglik") for s, sub in (("h", honest), ("r", relab))}
    assert loglik["r"].board["acc"] == 1.0 and loglik["h"].board["acc"] < 1.0  # labels = the model's predictions
    for sub, tier in ((honest, "spot-checked"), (relab, "spot-checked")):  # ranking is what is under test here
        DB.insert(con, sub, None, "base", tier=tier, verification={"stock_tasks": sub.stock})
    ranked = [e for e in ranking.rank_entries(DB.load_entries(con)) if not e["is_reference"]]
    groups: dict = {}
    for e in ranked:
        groups.setdefault(ranking.rank_group(e), set()).add(e["submission_id"])
    # two task keys, two rank groups, each holding one submission's rows: never ranked against each other
    assert len({e["task"] for e in ranked}) == 2 and sorted(map(len, groups.values())) == [1, 1]
    # only the original registered: the relabelled run is refused, as before; a run matching neither is named
    only_a = {a.config_hash: a}
    with pytest.raises(SubmissionError, match="target_hash|doc_hash"):
        validate_run(runs["run_relab"], stock_tasks=only_a)
    forged = tmp_path / "forged"
    shutil.copytree(runs["run_orig"], forged)
    (sp,) = forged.glob("*/samples_*.jsonl")
    rows = [json.loads(x) for x in sp.read_text().splitlines()]
    rows[0]["doc_hash"], rows[1]["doc_hash"] = rows[1]["doc_hash"], rows[0]["doc_hash"]
    sp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(SubmissionError, match="none of the 2 registered versions"):
        validate_run(forged, stock_tasks=regs)
    con.close()


def test_full_split_entries_are_ranked_only_on_the_same_document_set():
    """Two full-split entries of one task key on different documents or labels (doc-set hashes) are never ranked
    against each other; on the same one they are."""
    def entry(i, doc_set, ece):
        return {"entry_id": i, "submission_id": i, "task": "t@x", "split": "validation", "filter": "loglik",
                "is_reference": False, "n_docs": 10, "n_split": 10, "n_original": 10, "coverage": "full",
                "doc_set_hash": doc_set, "tier": "spot-checked", "board": {"ece": ece, "brier": ece, "prr": 0.1},
                "conf": None, "correct": None}

    ranked = ranking.rank_entries([entry(1, "real", 0.30), entry(2, "relabelled", 0.01), entry(3, "real", 0.20)])
    by = {e["entry_id"]: e["ece_rank"] for e in ranked}
    assert by == {1: 2, 2: 1, 3: 1}


def test_a_process_docs_task_registers_and_its_runs_match(runs, tmp_path, capsys):
    db_path = str(tmp_path / "b.sqlite")
    assert cli.main(["register-task", PD, "--include-path", str(runs["pd"]), "--db", db_path]) == 0
    con = DB.connect(db_path)
    (reg,) = stock.registered(con).values()
    sub = validate_run(runs["run_pd"], stock_tasks=stock.registered(con))
    assert set(sub.stock) == {stock.entry_task(PD, reg.config_hash)} and next(iter(sub.stock.values()))["registered"]
    # the function's helper is code the task runs: changing it (not the logged function) is a new registration
    other = tmp_path / "pd2"
    shutil.copytree(runs["pd"], other)
    (other / "utils.py").write_text(UTILS.replace('doc["text"].lower()', 'doc["text"].upper()'))
    reg2 = stock.register(con, PD, other)
    assert reg2.logged_hash == reg.logged_hash and reg2.config_hash != reg.config_hash
    con.close()


@pytest.mark.parametrize("a,b,same", [
    ("<function lower at 0x7f3a1c2b9e40>", "<function lower at 0x7f00deadbeef>", True),
    ("<function lower at 0x7f3a1c2b9e40>", "<function upper at 0x7f3a1c2b9e40>", False),
])
def test_config_hash_reads_a_logged_function_without_its_address(a, b, same):
    cfg = {"task": "t", "output_type": "multiple_choice", "doc_to_text": "{{text}}",
           "fewshot_config": {"sampler": "first_n", "process_docs": a}}
    other = {**cfg, "fewshot_config": {"sampler": "first_n", "process_docs": b}}
    assert (stock.config_hash(cfg, 1.0) == stock.config_hash(other, 1.0)) is same


# ------------------------------------------------------------------ data file aliases (generative)
_DATA_ALIASES = ["copy", "symlink_file", "symlink_dir", "relative"]


@given(alias=st.sampled_from(_DATA_ALIASES), edit=st.sampled_from([None, "label", "text"]))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_same_data_under_any_spelling_is_one_registration(runs, tmp_path_factory, alias, edit):
    """The original data reached through a copy, a symlinked file or folder or a relative path registers as the
    same registration (idempotent); one edited label or text byte is a new version beside it."""
    tmp = tmp_path_factory.mktemp("alias")
    con = DB.connect(tmp / "b.sqlite")
    first = stock.register(con, TASK, runs["orig"])
    src = runs["data"] / "sst2" / "dev.tsv"
    (tmp / "d").mkdir()
    if alias == "symlink_dir":
        (tmp / "d" / "sst2").symlink_to(src.parent, target_is_directory=True)
    else:
        (tmp / "d" / "sst2").mkdir()
        if alias == "symlink_file":
            (tmp / "d" / "sst2" / "dev.tsv").symlink_to(src)
        else:
            shutil.copyfile(src, tmp / "d" / "sst2" / "dev.tsv")
    if edit:
        f = tmp / "d" / "sst2" / "dev.tsv"
        lines = f.read_text().splitlines(keepends=True)
        f.unlink()  # never write through a link into the shared data
        text, _, label = lines[5].rstrip("\n").rpartition("\t")
        lines[5] = f"{text}\t{1 - int(label)}\n" if edit == "label" else f"{text}x\t{label}\n"
        f.write_text("".join(lines))
    folder = _tasks(tmp / "t", tmp / "d")
    if alias == "relative":  # the data path relative to the working directory, as datasets reads it
        y = folder / "sst2_stock.yaml"
        y.write_text(y.read_text().replace(str(tmp / "d"), os.path.relpath(tmp / "d")))
    again = stock.register(con, TASK, folder)
    assert (again == first) is (edit is None), (alias, edit)
    assert stock.registered(con)[first.config_hash] == first
    con.close()
