"""Board-run evaluations: ``semcal-eval board evaluate`` enqueues a job, ``semcal-eval board worker`` runs it.

The board runs lm-eval itself with :data:`PINNED` settings, so what it stores as *verified* is what this
code measured, not what someone uploaded:

* a ``jobs`` table in the board's SQLite file (created here with ``CREATE TABLE IF NOT EXISTS``), states
  ``queued`` -> ``running`` -> ``done`` | ``failed`` (with the error). A job is claimed inside
  ``BEGIN IMMEDIATE``, so two workers never take the same job;
* a worker records ``host:pid`` on the job it runs. A worker that starts finds ``running`` jobs of its own
  host whose worker process no longer exists (killed, crashed, machine rebooted) and puts them back in the
  queue (:func:`recover_stale`); after :data:`MAX_ATTEMPTS` tries a job is marked failed instead;
* lm-eval runs as a subprocess (``python -m semcal_eval ...``), so a crash in a model or task cannot take the
  worker down, and its output goes into a board-owned work folder (``<db>.work/job-<id>/``);
* the run then goes through :func:`leaderboards.recompute.validate_run` and is stored with tier
  ``verified`` and ``verification = {"job_id", "settings"}``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from . import stock
from .errors import SubmissionError
from .identity import NAME, PREFIXED, catalogue_entry
from .processes import pid_alive

__all__ = [
    "PINNED", "JOBS_SCHEMA", "MAX_ATTEMPTS", "ensure_jobs", "resolve_model", "default_split", "enqueue",
    "claim", "recover_stale", "run_job", "work_until_empty", "list_jobs", "lm_eval_command",
]

#: Settings every board-run evaluation uses. float32 on CPU is the reference arithmetic (the catalogue's
#: folders are float32; bf16/TF32 would move probabilities by ~1e-3); the seeds are lm-eval's defaults
#: written out, so a job is reproducible from this table alone; batch size 8 is what the tests use.
PINNED: dict = {
    "backend": "hf-semsoft",
    "dtype": "float32",
    "device": "cpu",
    "batch_size": 8,
    "seed": "0,1234,1234,1234",
    "num_fewshot": "task default",
    "log_samples": True,
}
MAX_ATTEMPTS = 3
#: Wall-clock limit of one job's lm-eval subprocess (seconds); ``$SEMCAL_BOARD_JOB_TIMEOUT`` overrides it.
JOB_TIMEOUT_S = 6 * 3600

JOBS_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY,
    model TEXT NOT NULL,
    pretrained TEXT NOT NULL,
    model_name TEXT NOT NULL,
    method TEXT NOT NULL,
    tasks TEXT NOT NULL,
    limit_json TEXT NOT NULL,
    settings TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
    error TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    worker TEXT,
    submission_id INTEGER,
    created_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
"""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _me() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def ensure_jobs(con: sqlite3.Connection) -> None:
    """Create the ``jobs`` table (and index) if this board database has none yet."""
    con.executescript(JOBS_SCHEMA)


def resolve_model(model: str) -> tuple[str, str]:
    """``(pretrained, display name)`` of a board-evaluate MODEL argument.

    MODEL is a catalogue name (``smollm2-135m``), ``semcal:NAME``, or a local Hugging Face folder (one with a
    ``config.json``, e.g. a trainer checkpoint). ``pretrained`` is what lm-eval gets (``semcal:NAME`` or the
    folder's absolute path); hub ids are refused, because the board is offline and evaluates only weights it
    holds. Raises SubmissionError naming the fix.
    """
    from semcal_eval.models import CATALOGUE, PREFIX

    found = catalogue_entry(model)
    if found is not None and found[1] in (PREFIXED, NAME):
        return PREFIX + found[0].name, found[0].hf_name
    p = Path(model).expanduser()
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise SubmissionError(f"model folder {p} has no config.json; pass a Hugging Face model folder "
                                  "(save_pretrained output) or a catalogue name")
        if "," in str(p.resolve()):  # lm-eval's model_args are comma-separated
            raise SubmissionError(f"model folder {p.resolve()} has a comma in its path; move or link it elsewhere")
        return str(p.resolve()), p.resolve().name
    raise SubmissionError(
        f"model {model[:80]!r} is neither a catalogue model ({', '.join(CATALOGUE)}; see `semcal-eval models "
        "list`) nor a local model folder; the board evaluates only weights on this machine"
    )


def _dataset_of(task: str) -> str | None:
    from semcal_eval.data import known_datasets

    hits = [d for d in known_datasets() if task == d or task.startswith(d + "_")]
    return max(hits, key=len) if hits else None


def default_split(task: str, data_dir: str | None = None) -> str | None:
    """The split a board job evaluates: the dataset's standard evaluation split if the local mirror
    (``$SEMCAL_DATA_DIR``) has it, else ``validation``, else ``None`` (the task's own default: the hub)."""
    from semcal_eval.data import get_spec, local_splits, resolve_data_dir

    ds = _dataset_of(task)
    if ds is None or resolve_data_dir(data_dir) is None:
        return None
    avail = local_splits(ds, data_dir)
    want = get_spec(ds).eval_split
    if want in avail:
        return want
    return "validation" if "validation" in avail else (avail[0] if avail else None)


def _known_tasks() -> set[str]:
    from .registry import load_registry

    return set(load_registry(None))


def enqueue(con: sqlite3.Connection, model: str, tasks: list[str], limit: int | None = None, *,
            model_name: str | None = None, method: str = "base", device: str | None = None) -> int:
    """Queue a board-run evaluation; return the job id. Tasks and model are checked now, not in the worker.
    ``device`` overrides the pinned ``cpu`` (recorded in the job's settings, so the entry says so)."""
    ensure_jobs(con)
    if not tasks:
        raise SubmissionError("no task given; pass --tasks goemotions_semsoft (comma-separated for several)")
    known = _known_tasks()
    # a task the board does not ship may be a registered stock task (leaderboards.stock), run from its folder
    stock_tasks = {t: stock.lookup(con, t) for t in tasks if t not in known}
    unknown = [t for t, r in stock_tasks.items() if r is None]
    if unknown:
        raise SubmissionError(f"unknown task(s) {', '.join(unknown)}; the board knows: {', '.join(sorted(known))}, "
                              "and the stock tasks `semcal-eval board register-task` lists (and registers)")
    tasks = [stock_tasks[t].task if t in stock_tasks else t for t in tasks]
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise SubmissionError(f"--limit {limit!r} must be a positive whole number of documents")
    from semcal_eval.run_rows import MIN_TEMPERATURE_DOCS, temperature_skip_reason
    from semcal_eval.semsoft.task import semsoft_task_names

    # the rows' rule: a run this short skips the cross-fitted rows (run_rows.temperature_skip_reason)
    short = limit is not None and temperature_skip_reason(limit) is not None
    small = sorted(set(tasks) & semsoft_task_names()) if short else []
    if small:
        # the task defaults (cross-fitted temperature rows) are part of the pinned settings, not switched off
        need = MIN_TEMPERATURE_DOCS
        raise SubmissionError(f"--limit {limit} is too small for {', '.join(small)}: its cross-fitted rows need "
                              f"at least {need} documents; pass --limit {need} or more")
    pretrained, display = resolve_model(model)
    if device is not None and not re.fullmatch(r"cpu|mps|cuda(:\d+)?", device):
        raise SubmissionError(f"--device {device[:40]!r} must be cpu, mps, cuda or cuda:N")
    settings = dict(PINNED, split={t: default_split(t) for t in tasks})
    if stock_tasks:
        settings["include_path"] = {r.task: r.include_path for r in stock_tasks.values()}
    if device is not None:
        settings["device"] = device
    cur = con.execute(
        "INSERT INTO jobs (model, pretrained, model_name, method, tasks, limit_json, settings, state, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?)",
        (model, pretrained, model_name or display, method, json.dumps(tasks), json.dumps(limit),
         json.dumps(settings, sort_keys=True), _now()),
    )
    return int(cur.lastrowid)


def recover_stale(con: sqlite3.Connection) -> list[int]:
    """Re-queue ``running`` jobs of this host whose worker process is gone; return their ids.

    Only this host's jobs are judged (a pid means nothing on another machine). A job that already used
    :data:`MAX_ATTEMPTS` tries is marked failed instead, so a job that kills its worker cannot loop forever.
    """
    ensure_jobs(con)
    host = socket.gethostname()
    out = []
    for jid, worker, attempts in con.execute("SELECT id, worker, attempts FROM jobs WHERE state = 'running'").fetchall():
        w_host, _, w_pid = (worker or "").rpartition(":")
        if w_host != host or not w_pid.isdigit() or pid_alive(int(w_pid)):
            continue
        if attempts >= MAX_ATTEMPTS:
            con.execute("UPDATE jobs SET state = 'failed', finished_at = ?, error = ? WHERE id = ? AND state = 'running'",
                        (_now(), f"worker {worker} died; gave up after {attempts} attempts", jid))
        else:
            con.execute("UPDATE jobs SET state = 'queued', worker = NULL, error = ? WHERE id = ? AND state = 'running'",
                        (f"re-queued: worker {worker} died during attempt {attempts}", jid))
            out.append(jid)
    return out


def claim(con: sqlite3.Connection, job_id: int | None = None) -> dict | None:
    """Atomically take the oldest queued job (or ``job_id``) and mark it running by this process."""
    ensure_jobs(con)
    con.execute("BEGIN IMMEDIATE")
    try:
        q = "SELECT id FROM jobs WHERE state = 'queued'" + (" AND id = ?" if job_id is not None else "") + " ORDER BY id LIMIT 1"
        row = con.execute(q, () if job_id is None else (job_id,)).fetchone()
        if row is None:
            con.execute("COMMIT")
            return None
        con.execute("UPDATE jobs SET state = 'running', worker = ?, attempts = attempts + 1, started_at = ? WHERE id = ?",
                    (_me(), _now(), row[0]))
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return _job(con, row[0])


def _job(con: sqlite3.Connection, jid: int) -> dict:
    cols = [d[1] for d in con.execute("PRAGMA table_info(jobs)")]
    row = con.execute("SELECT * FROM jobs WHERE id = ?", (jid,)).fetchone()
    job = dict(zip(cols, row))
    job["tasks"], job["limit"], job["settings"] = json.loads(job["tasks"]), json.loads(job["limit_json"]), json.loads(job["settings"])
    return job


def list_jobs(con: sqlite3.Connection) -> list[dict]:
    """Every job, oldest first."""
    ensure_jobs(con)
    return [_job(con, r[0]) for r in con.execute("SELECT id FROM jobs ORDER BY id").fetchall()]


def lm_eval_command(pretrained: str, tasks: list[str], out: Path, *, limit: int | None = None,
                    split: str | None = None, samples: dict | None = None, metadata: dict | None = None,
                    settings: dict = PINNED, include_path: str | None = None) -> list[str]:
    """The ``python -m semcal_eval`` command line of a board evaluation (also used by the spot check;
    ``include_path``: the folder of a registered stock task, :mod:`leaderboards.stock`). ``samples`` (the spot
    check's drawn documents) never go on the command line, which every local user reads in ``ps`` /
    ``/proc/<pid>/cmdline``: they are written to ``<out>.samples.json`` (mode 0600, in the caller's private
    folder) and lm-eval is given that path (its ``--samples`` takes a JSON file)."""
    cmd = [sys.executable, "-m", "semcal_eval", "--model", settings["backend"],
           "--model_args", f"pretrained={pretrained},dtype={settings['dtype']}", "--device", settings["device"],
           "--batch_size", str(settings["batch_size"]), "--seed", settings["seed"], "--tasks", ",".join(tasks),
           "--log_samples", "--output_path", str(out), "--no_summary"]
    if limit is not None:
        cmd += ["--limit", str(limit)]
    if samples is not None:
        cmd += ["--samples", str(_private_json(Path(str(out) + ".samples.json"), samples))]
    if include_path:
        cmd += ["--include_path", include_path]
    meta = dict(metadata or {})
    if split:
        meta["split"] = split
    if meta:
        cmd += ["--metadata", json.dumps(meta, sort_keys=True)]
    return cmd


def _private_json(path: Path, obj) -> Path:
    """Write ``obj`` as JSON to a new file readable by its owner only (0600 whatever the umask; an existing file
    or a symlink in its place is refused by O_EXCL)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w") as fh:
        os.fchmod(fh.fileno(), 0o600)
        json.dump(obj, fh)
    return path


def run_lm_eval(cmd: list[str], log: Path, timeout: float | None = None) -> str | None:
    """Run an lm-eval command line as a subprocess, output to ``log``; ``None`` on success, else a one-line
    reason (the last error-looking line of its output)."""
    timeout = timeout or float(os.environ.get("SEMCAL_BOARD_JOB_TIMEOUT", JOB_TIMEOUT_S))
    env = dict(os.environ, SEMCAL_SUMMARY="0", TOKENIZERS_PARALLELISM="false")
    # The board evaluates weights it holds; nothing is fetched from the hub unless the operator says so.
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("HF_DATASETS_OFFLINE", "1")
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as fh:
        try:
            res = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            return f"lm-eval ran past the {timeout:.0f} s limit (SEMCAL_BOARD_JOB_TIMEOUT); see {log}"
    if res.returncode == 0:
        return None
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    errs = [ln for ln in lines if "Error" in ln or "error" in ln]
    last = (errs or lines or ["(no output)"])[-1]
    return f"lm-eval exited with status {res.returncode}: {last[:300]} (log: {log})"


def work_root(db_path: Path) -> Path:
    """The board-owned folder where jobs write their lm-eval output: ``<db>.work/``."""
    return Path(str(db_path) + ".work")


def _finish(con, jid: int, state: str, error: str | None = None, submission_id: int | None = None) -> None:
    con.execute("UPDATE jobs SET state = ?, error = ?, submission_id = ?, finished_at = ? WHERE id = ?",
                (state, error, submission_id, _now(), jid))


def _stored_submission(con, jid: int) -> int | None:
    """A submission already stored by this job (the worker died between storing and marking it done)."""
    try:
        row = con.execute("SELECT id FROM submissions WHERE tier = 'verified' AND "
                          "json_extract(verification, '$.job_id') = ?", (jid,)).fetchone()
    except sqlite3.OperationalError:  # a board schema without tier/verification columns
        return None
    return row[0] if row else None


def run_job(con: sqlite3.Connection, job: dict, db_path: Path, *, progress=print) -> tuple[str, str]:
    """Run one claimed job to the end: lm-eval subprocess, validate_run, db.insert(tier="verified").

    Returns ``(state, message)``; the job row is updated to ``done`` or ``failed`` (with the error)."""
    from . import db
    from .errors import REJECTED
    from .recompute import validate_run

    jid = job["id"]
    stored = _stored_submission(con, jid)
    if stored is not None:
        _finish(con, jid, "done", None, stored)
        return "done", f"job {jid}: already stored as submission #{stored}"
    out = work_root(db_path) / f"job-{jid}"
    shutil.rmtree(out, ignore_errors=True)  # a previous attempt's partial output must not be validated
    splits = job["settings"].get("split") or {}
    folders = job["settings"].get("include_path") or {}
    # One lm-eval call per distinct split (the split is a global --metadata key) and stock task folder.
    groups: dict = {}
    for t in job["tasks"]:
        groups.setdefault((splits.get(t), folders.get(t)), []).append(t)
    runs = []
    for i, ((split, folder), tasks) in enumerate(sorted(groups.items(), key=lambda kv: str(kv[0]))):
        run_dir = out / f"run{i}"
        cmd = lm_eval_command(job["pretrained"], tasks, run_dir, limit=job["limit"], split=split,
                              settings=job["settings"], include_path=folder or None)
        progress(f"job {jid}: running {' '.join(tasks)} on {job['model']} (split {split or 'task default'})")
        err = run_lm_eval(cmd, out / f"run{i}.log")
        if err:
            _finish(con, jid, "failed", err)
            return "failed", f"job {jid} failed: {err}"
        runs.append(run_dir)
    ids = []
    try:
        for run_dir in runs:
            sub = validate_run(run_dir, stock_tasks=stock.registered(con))
            verification = {"job_id": jid, "model": job["model"], "pretrained": job["pretrained"],
                            "settings": job["settings"], "limit": job["limit"]}
            ids.append(db.insert(con, sub, job["model_name"], job["method"], tier="verified",
                                 verification=verification, submitter="board"))
    except REJECTED as e:
        _finish(con, jid, "failed", f"the board's own run was rejected: {e}")
        return "failed", f"job {jid} failed: the board's own run was rejected: {e}"
    _finish(con, jid, "done", None, ids[0] if ids else None)
    return "done", f"job {jid} done: verified submission(s) {', '.join(f'#{i}' for i in ids)}"


def work_until_empty(con: sqlite3.Connection, db_path: Path, *, once: bool = False, job_id: int | None = None,
                     progress=print) -> list[tuple[str, str]]:
    """Recover stale jobs, then run queued jobs (only one with ``once``, only ``job_id`` if given)."""
    for jid in recover_stale(con):
        progress(f"job {jid}: its worker died; re-queued")
    done = []
    while True:
        job = claim(con, job_id)
        if job is None:
            break
        try:
            done.append(run_job(con, job, db_path, progress=progress))
        except KeyboardInterrupt:  # the operator stopped the worker, not the job's fault: back in the queue
            con.execute("UPDATE jobs SET state = 'queued', worker = NULL, error = ? WHERE id = ?",
                        ("re-queued: the worker was interrupted", job["id"]))
            raise
        except BaseException as e:  # a bug: the job must not stay 'running' under a live worker
            _finish(con, job["id"], "failed", f"worker error: {type(e).__name__}: {e}")
            raise
        if once or job_id is not None:
            break
    return done
