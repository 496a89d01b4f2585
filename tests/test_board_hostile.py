"""Issue 43: the board when whoever runs ``board submit`` is hostile. Each attack of the probe is a regression
test, with real SQLite, real subprocesses and real signals; only the model run itself is replaced (by a child
process that holds the board's exact command line and never finishes), so the tests need no model.

* free re-rolls: the drawn ids were on the re-scoring command line (``ps``), and an interrupted attempt recorded
  nothing: the child's argv is read from /proc, and submits are killed with SIGINT, SIGTERM and SIGKILL in the
  middle of the re-scoring;
* the secret was readable (database 0644), environment variables lifted the cap and swapped the model cache;
* an extra record key or a respelt number changed the content hash (a fresh draw for free);
* stock tasks were drawn with a random token; escape codes reached the server log; symlinks out of the
  submitted folder were followed.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from leaderboards import attempts as attempts_store
from leaderboards import cli, spotcheck
from leaderboards import db as DB
from leaderboards.errors import SubmissionError
from leaderboards.recompute import validate_run

import board_fixtures as S
from test_board_tamper import CLS, N, edit_rows, env, files, honest, rejected, stored, submit  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent

# ---------------------------------------------------------------- helpers

#: ``board submit`` in a fresh process whose model run is a child that never finishes. The child is started
#: with the board's own command line (``cmd[1:]``), so what ``ps`` shows of it is what the board would show.
STALLED_SUBMIT = r'''
import json, os, subprocess, sys
from leaderboards import cli, evaluate, spotcheck

marker, task = sys.argv[1], sys.argv[2]
spotcheck._task_kinds = lambda: (set(), {task})  # the synthetic task is re-scored like a multiple_choice task


def model_run(cmd, log, timeout=None):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", *cmd[1:]],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # as lm-eval's go to its log
    with open(marker + ".part", "w") as fh:
        json.dump({"child": child.pid, "cmd": cmd}, fh)
    os.replace(marker + ".part", marker)
    try:
        child.wait()
    finally:
        child.kill()
    return "stalled"


evaluate.run_lm_eval = model_run
sys.exit(cli.main(sys.argv[3:]))
'''


def _model_folder(root: Path, payload: bytes = b"weights" * 1000) -> Path:
    """A local model folder the board can key (config.json + weights): the run's model is then checkable."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text('{"model_type": "llama"}')
    (root / "model.safetensors").write_bytes(payload)
    return root


def _stalled_submit(env, path: Path, tag: str, *extra: str) -> tuple[subprocess.Popen, dict]:
    """Start ``board submit PATH`` in a fresh process; return it and, once it is re-scoring, the child's pid and
    command line (or the finished process and {} when it never reached the re-scoring)."""
    tmp = env["tmp"]
    script = tmp / "stalled_submit.py"
    script.write_text(STALLED_SUBMIT)
    marker = tmp / f"rescoring-{tag}.json"
    work = tmp / "tmpdir"
    work.mkdir(exist_ok=True)
    penv = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(TESTS), os.environ.get("PYTHONPATH", "")]),
            "TMPDIR": str(work)}
    proc = subprocess.Popen([sys.executable, str(script), str(marker), CLS, "submit", str(path), "--method", "base",
                             *extra], cwd=REPO, env=penv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while not marker.exists():
        if proc.poll() is not None:
            return proc, {}
        assert time.monotonic() < deadline, "the submit never reached the re-scoring"
        time.sleep(0.1)
    return proc, json.loads(marker.read_text())


def _kill(proc: subprocess.Popen, info: dict, sig: int) -> tuple[int, str]:
    proc.send_signal(sig)
    proc.wait(timeout=60)
    try:
        os.kill(info["child"], signal.SIGKILL)  # a killed submit leaves its (stand-in) model run behind
    except ProcessLookupError:
        pass
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


def _weights(folder: Path) -> str:
    from leaderboards.identity import weights_key

    return weights_key(str(folder.resolve()))


# ---------------------------------------------------------------- 1. the draw is never on a command line


def test_drawn_ids_never_reach_a_command_line_and_live_in_a_private_file(env):
    folder = _model_folder(env["tmp"] / "model")
    proc, info = _stalled_submit(env, honest(env, "a", model_name=str(folder)), "a")
    assert info, proc.communicate()[1][-2000:]
    try:
        # what any local user reads: /proc/<pid>/cmdline of the re-scoring process
        argv = [a.decode() for a in Path(f"/proc/{info['child']}/cmdline").read_bytes().split(b"\0") if a]
        ids_file = Path(argv[argv.index("--samples") + 1])
        ids = json.loads(ids_file.read_text())[CLS]
        assert len(ids) == spotcheck.sample_size(N) and ids == sorted(set(ids))
        assert ids_file.stat().st_mode & 0o777 == 0o600 and ids_file.parent.stat().st_mode & 0o777 == 0o700
        text = " ".join(argv)
        assert json.dumps(ids) not in text and json.dumps({CLS: ids}) not in text
        for a in argv:  # no argument is a JSON list or object at all
            assert not a.lstrip().startswith(("[", "{\"" + CLS)), a
    finally:
        code, err = _kill(proc, info, signal.SIGINT)
    assert code == 130 and "interrupted" in err and "Traceback" not in err, err
    assert not ids_file.exists()  # the private folder is removed on the way out
    con = DB.connect(env["db"])
    (att,) = attempts_store.attempts(con)
    assert att["outcome"] == "interrupted" and attempts_store.rejected_attempts(con, _weights(folder), "anonymous") == 1


# ---------------------------------------------------------------- 2. an interrupted attempt counts


def test_interrupted_attempts_count_so_the_issue_forger_is_stored_with_its_aborts_then_capped(env, capsys,
                                                                                              monkeypatch):
    """The issue's forger: aborted twice when a forged document was drawn (here Ctrl-C and kill -9 in the middle
    of the re-scoring), passed on the third draw. It used to be stored with rejected_attempts_before: 0; now the
    two aborts are on its entry, and one more abort (SIGTERM) uses up the cap of 3."""
    folder = _model_folder(env["tmp"] / "model")
    w = _weights(folder)
    for i, sig in enumerate((signal.SIGINT, signal.SIGKILL)):
        proc, info = _stalled_submit(env, honest(env, f"abort{i}", seed=i, model_name=str(folder)), f"abort{i}")
        assert info, proc.communicate()[1][-2000:]
        _kill(proc, info, sig)
        assert attempts_store.rejected_attempts(DB.connect(env["db"]), w, "anonymous") == i + 1
    outcomes = [a["outcome"] for a in attempts_store.attempts(DB.connect(env["db"]))]
    assert outcomes == ["interrupted", "started"]  # kill -9 never reached its handler: 'started' counts

    def passes(results_path, **kw):  # the third draw missed every forged document
        return spotcheck.SpotCheck("spot-checked", {"spot_check": {"n_docs": 1, "draws": {}}}, "spot check passed")

    monkeypatch.setattr(spotcheck, "spot_check", passes)
    assert submit(honest(env, "third", seed=2, model_name=str(folder))) == 0
    (entry,) = {e["submission_id"]: e for e in stored()}.values()
    assert entry["tier"] == "spot-checked" and entry["verification"]["spot_check"]["rejected_attempts_before"] == 2

    proc, info = _stalled_submit(env, honest(env, "abort3", seed=3, model_name=str(folder)), "abort3")
    assert info, proc.communicate()[1][-2000:]
    _kill(proc, info, signal.SIGTERM)
    proc, info = _stalled_submit(env, honest(env, "abort4", seed=4, model_name=str(folder)), "abort4")
    assert info == {} and proc.wait(timeout=60) == 2  # refused before any draw, nothing re-scored
    err = proc.stderr.read()
    assert "spot check refused" in err and "the board allows 3" in err and "Traceback" not in err, err
    assert [a["outcome"] for a in attempts_store.attempts(DB.connect(env["db"]))] == [
        "interrupted", "started", "passed", "started"]


def test_the_cap_check_and_the_started_row_are_one_transaction(env):
    """A started attempt counts at once: with a cap of 1, a second submit of the same weights (say, run in
    parallel) is refused while the first is still re-scoring."""
    con = DB.connect(env["db"])
    DB.set_board_setting(con, "max_attempts", "1")
    kw = dict(model="m", tasks=[CLS], doc_sets=["d"], predictions_hash="p", submitter="anonymous", weights="w")
    aid, before = attempts_store.start_attempt(con, **kw)
    assert before == 0
    with pytest.raises(SubmissionError, match="the board allows 1"):
        attempts_store.start_attempt(con, **kw)
    attempts_store.finish_attempt(con, aid, "passed")
    attempts_store.start_attempt(con, **kw)  # a passed attempt does not count
    assert not con.in_transaction


# ---------------------------------------------------------------- 3. the board's files are private


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077])
def test_a_new_board_is_created_0600_whatever_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        con = DB.connect(tmp_path / "new" / "board.sqlite")
        spotcheck.secret_commitment(con)  # the secret is created in it
        con.execute("BEGIN IMMEDIATE")  # a write: SQLite's journal gets the database's mode
        con.execute("INSERT INTO meta VALUES ('x', 'y')")
        journal = tmp_path / "new" / "board.sqlite-journal"
        modes = [journal.stat().st_mode & 0o777] if journal.exists() else []
        con.execute("COMMIT")
        con.close()
    finally:
        os.umask(old)
    assert (tmp_path / "new" / "board.sqlite").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "new").stat().st_mode & 0o777 == 0o700
    assert all(m == 0o600 for m in modes)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o606, 0o666, 0o700 | 0o004])
@pytest.mark.parametrize("which", ["board.sqlite", "board.sqlite-journal", "board.sqlite-wal"])
def test_a_board_others_can_access_is_refused_naming_the_fix(env, capsys, mode, which):
    DB.connect(env["db"]).close()
    target = env["tmp"] / which
    if not target.exists():
        target.write_bytes(b"")
    os.chmod(target, mode)
    assert cli.main(["list"]) == 2
    err = capsys.readouterr().err
    assert "accessible to other users" in err and f"chmod 600 {target}" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1
    os.chmod(target, 0o600)
    assert cli.main(["list"]) == 0


def _read_as_nobody(path: Path) -> int:
    """0 when user nobody (uid/gid 65534) can read ``path``, else the errno: a forked child drops to nobody."""
    pid = os.fork()
    if pid == 0:  # the child: never returns to pytest
        code = 0
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            with open(path, "rb") as fh:
                fh.read(16)
        except OSError as e:
            code = e.errno or 1
        os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as user nobody")
def test_user_nobody_cannot_read_the_secret():
    """The probe read spot_check_secret as user nobody. In a folder everyone may traverse, nobody reads a
    0644 file (the control: the test can fail) but not the board database."""
    import errno
    import shutil
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="semcal-hostile-", dir="/tmp"))
    try:
        os.chmod(shared, 0o711)  # traversable by others, as a real data folder may be
        con = DB.connect(shared / "board.sqlite")
        spotcheck.secret_commitment(con)
        con.close()
        (shared / "public.txt").write_text("readable")
        os.chmod(shared / "public.txt", 0o644)
        assert _read_as_nobody(shared / "public.txt") == 0
        assert _read_as_nobody(shared / "board.sqlite") == errno.EACCES
    finally:
        shutil.rmtree(shared, ignore_errors=True)


# ---------------------------------------------------------------- 4. the environment cannot weaken a board


def _stub_rejects(monkeypatch):
    def rejects(results_path, **kw):
        raise spotcheck.SpotCheckRejected("spot check failed: a mismatch", detail="{}")

    monkeypatch.setattr(spotcheck, "spot_check", rejects)


@pytest.mark.parametrize("spelling", ["1000", "4", "0", "2", "-1", "abc", "3.0", " 1000", "1e3"])
def test_the_cap_variable_cannot_change_a_board(env, capsys, monkeypatch, spelling):
    folder = _model_folder(env["tmp"] / "model")
    DB.connect(env["db"]).close()  # the board exists (cap 3)
    monkeypatch.setenv("SEMCAL_BOARD_MAX_ATTEMPTS", spelling)
    _stub_rejects(monkeypatch)
    line = rejected(capsys, honest(env, "a", model_name=str(folder)), "SEMCAL_BOARD_MAX_ATTEMPTS", "disagrees",
                    "board config --max-attempts")
    assert "rejected attempt" not in line
    assert attempts_store.attempts(DB.connect(env["db"])) == []  # refused before any attempt or draw


def test_the_operator_sets_the_cap_with_board_config_and_an_equal_variable_is_accepted(env, capsys, monkeypatch):
    folder = _model_folder(env["tmp"] / "model")
    assert cli.main(["config", "--max-attempts", "5"]) == 0
    assert "max_attempts\t5" in capsys.readouterr().out
    monkeypatch.setenv("SEMCAL_BOARD_MAX_ATTEMPTS", "5")
    _stub_rejects(monkeypatch)
    for i in range(5):
        rejected(capsys, honest(env, f"r{i}", seed=i, model_name=str(folder)), f"rejected attempt {i + 1} of 5")
    rejected(capsys, honest(env, "r5", seed=5, model_name=str(folder)), "the board allows 5")
    for bad in ("0", "1001", "x"):
        assert cli.main(["config", "--max-attempts", bad]) == 2
        assert "1..1000" in capsys.readouterr().err


def _catalogue_folder(root: Path, payload: bytes) -> Path:
    """A finished cache folder of smollm2-135m under ``root`` (what `models install` leaves), holding ``payload``
    as its weights: the probe's cache held Gemma's weights under SmolLM2's name and hash."""
    from semcal_eval.models import CATALOGUE, META_FILE

    e = CATALOGUE["smollm2-135m"]
    d = _model_folder(root / e.key, payload)
    (d / META_FILE).write_text(json.dumps({"name": e.name, "sha256": e.sha256}))
    return d


def test_the_model_cache_is_the_boards_not_the_callers(env, capsys, monkeypatch):
    trusted = _catalogue_folder(env["tmp"] / "trusted", b"smollm2 weights")
    evil_root = env["tmp"] / "xdg" / "semcal" / "models"
    _catalogue_folder(evil_root, b"gemma weights")
    assert cli.main(["config", "--model-cache", str(env["tmp"] / "trusted")]) == 0
    capsys.readouterr()
    seen = []

    def passes(results_path, **kw):  # the folder semcal:smollm2-135m resolves to when the model runs
        from semcal_eval.models import model_path

        seen.append(model_path("smollm2-135m"))
        return spotcheck.SpotCheck("spot-checked", {"spot_check": {"n_docs": 1, "draws": {}}}, "passed")

    monkeypatch.setattr(spotcheck, "spot_check", passes)
    # XDG_CACHE_HOME (which the cache follows when SEMCAL_MODEL_CACHE is unset) points at the forged folder
    monkeypatch.delenv("SEMCAL_MODEL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(env["tmp"] / "xdg"))
    assert submit(honest(env, "a", model_name="semcal:smollm2-135m")) == 0
    assert seen == [trusted]
    # SEMCAL_MODEL_CACHE naming the forged cache is refused, before any attempt
    for i, spelling in enumerate((str(evil_root), str(evil_root) + "/", str(evil_root.parent) + "/models/.")):
        monkeypatch.setenv("SEMCAL_MODEL_CACHE", spelling)
        rejected(capsys, honest(env, f"b{i}", seed=7, model_name="semcal:smollm2-135m"),
                 "SEMCAL_MODEL_CACHE", "disagrees", "board config --model-cache")
    monkeypatch.setenv("SEMCAL_MODEL_CACHE", str(env["tmp"] / "trusted") + "/")  # the board's own: accepted
    assert submit(honest(env, "c", seed=8, model_name="semcal:smollm2-135m")) == 0
    assert seen == [trusted, trusted]


# ---------------------------------------------------------------- 5. a content hash nobody can grind


def _records(r: dict) -> list[dict]:
    """Every copy of a row's record (the fixture logs it under each metric name, as older lm-eval logs did)."""
    return [r[m] for m in r["metrics"] if isinstance(r.get(m), dict)]


def _holder_edit(fn):
    """Apply ``fn(record)`` to every copy of the record of every row."""
    def edit(r):
        for rec in _records(r):
            fn(rec)
        return r
    return edit


RESPELLINGS = {
    "gold as 0.0": lambda rec: rec.update(gold=float(rec["gold"])),
    "soft null dropped": lambda rec: rec.pop("soft", None),
    "keys reversed": lambda rec: [rec.update({k: rec.pop(k)}) for k in list(rec)[::-1]],
}


def _with_a_zero(env, name) -> Path:
    """An honest run whose first document (gold not the last class) has a 0.0 probability in every model row."""
    items = S.cls_items(60, seed=0)
    soft = S.cls_items(60, seed=0, temperature=2.0)
    for rows in (items, soft):
        it = next(it for it in rows if it["gold"] != 3)
        it["probs"][0] += it["probs"][3]
        it["probs"][3] = 0.0
    return honest(env, name, n=60, filters={"constrained": items, "semsoft": soft, "prior": S.prior_items(items)})


@pytest.mark.parametrize("name", ["gold as 0.0", "soft null dropped", "keys reversed", "exponent", "padded zeros",
                                  "negative zero"])
def test_respelt_numbers_and_keys_leave_the_content_hash_alone(env, name):
    make = (lambda n: _with_a_zero(env, n)) if name == "negative zero" else (lambda n: honest(env, n, n=60))
    base = validate_run(make("base")).predictions_hash
    path = make("edit")
    _, samp = files(path)
    if name in RESPELLINGS:
        edit_rows(path, _holder_edit(RESPELLINGS[name]))
    else:  # textual respellings of the same float64
        text = samp.read_text()
        if name == "negative zero":
            text = text.replace(", 0.0]", ", -0.0]")
            assert "-0.0]" in text
        else:
            first = json.loads(text.splitlines()[0])
            p0 = first[first["metrics"][0]]["probs"][0]
            digits = repr(p0)[2:]  # "0.52269..." -> "52269...e-16": the same decimal, so the same float64
            spelt = {"exponent": f"{int(digits)}e-{len(digits)}", "padded zeros": f"{p0!r}000"}[name]
            assert repr(p0).startswith("0.") and json.loads(spelt) == p0 and repr(p0) in text
            text = text.replace(repr(p0), spelt)
        samp.write_text(text)
    assert validate_run(path).predictions_hash == base


UNKNOWN_KEYS = ["note", "Probs", "probs ", "\u200bgold", "_nonce", "tuned_tau_x", "fold", "conf", "doc_id", ""]


@pytest.mark.parametrize("key", UNKNOWN_KEYS)
def test_an_unknown_record_key_is_refused_naming_it(env, capsys, key):
    """The probe's grind: one extra key in one record gave a new content hash, hence a new draw."""
    path = honest(env, "a", n=60)
    done = []

    def add_once(r):
        if not done:
            for rec in _records(r):
                rec[key] = 1
            done.append(r["doc_id"])
        return r

    edit_rows(path, add_once)
    line = rejected(capsys, path, "unknown record field", repr(key[:40]), "submit lm-eval's unedited samples file")
    assert "Traceback" not in line


@pytest.mark.parametrize("field, value", [("gold", True), ("soft", True), ("probs", [True, 0.0, 0.0, 0.0]),
                                          ("gold", "0"), ("gold", 0.5), ("soft", "0.5")])
def test_a_bool_or_text_where_a_number_belongs_is_refused(env, capsys, field, value):
    path = honest(env, "a", n=60)
    edit_rows(path, _holder_edit(lambda rec: rec.update({field: value})))
    assert submit(path) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_a_scored_change_changes_the_hash(env):
    base = validate_run(honest(env, "base", n=60)).predictions_hash
    path = honest(env, "edit", n=60)
    done = []

    def nudge_one(r):
        if not done and r["filter"] == "constrained":
            for rec in _records(r):
                p = rec["probs"]
                p[0], p[1] = p[0] + 1e-12, p[1] - 1e-12
            done.append(1)
        return r

    edit_rows(path, nudge_one)
    assert validate_run(path).predictions_hash != base


# ---------------------------------------------------------------- 6. stock tasks use the committed draw


def test_a_stock_task_is_drawn_under_the_committed_hmac(env, monkeypatch):
    """A stock task's entry name is ``name@config-hash``; the spot check looks tasks up by their lm-eval name,
    and used to find no tag and draw with a random token. The tag is now the HMAC of the entry name."""
    folder = _model_folder(env["tmp"] / "model")
    con = DB.connect(env["db"])
    key = "sst2_stock@0123abcd"
    sub = SimpleNamespace(
        model_args=f"pretrained={folder},dtype=float32", provenance={}, predictions_hash="ab" * 32,
        entries=[SimpleNamespace(task=key, doc_set_hash="cd" * 32, split="validation")],
        stock={key: {"task": "sst2_stock", "config_hash": "0123abcd"}}, results_path=env["tmp"] / "r.json")
    seen = {}

    def capture(results_path, **kw):
        seen.update(kw["tags"])
        return spotcheck.SpotCheck("spot-checked", {"spot_check": {"draws": {}}}, "passed")

    monkeypatch.setattr(spotcheck, "spot_check", capture)
    args = SimpleNamespace(submitter="anonymous", spot_check_seed=None)
    tier, verification = cli._spot_check(con, args, sub, {"sst2_stock": None})
    assert seen["sst2_stock"] == spotcheck.draw_tag(con, sub.predictions_hash, key, "cd" * 32) == seen[key]
    assert verification["spot_check"]["secret_commitment"] == spotcheck.secret_commitment(con)


def test_a_board_caller_without_a_tag_for_a_task_is_refused_not_drawn_at_random(env):
    path = honest(env, "a", n=60, model_name=str(_model_folder(env["tmp"] / "model")))
    res, _ = files(path)
    spotcheck_kinds = spotcheck._task_kinds
    try:
        spotcheck._task_kinds = lambda: (set(), {CLS})
        with pytest.raises(SubmissionError, match="computed no draw"):
            spotcheck.spot_check(res, tags={"other_task": "00" * 32}, progress=lambda m: None)
    finally:
        spotcheck._task_kinds = spotcheck_kinds


# ---------------------------------------------------------------- 7. smaller: the log, symlinks


def test_escape_codes_in_a_request_never_reach_the_server_log(tmp_path, capfd):
    from leaderboards.server import make_server

    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<!doctype html><title>b</title>")
    srv = make_server(site, 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        for line in (b"GET /\x1b[2J\x1b]0;owned\x07 HTTP/1.0", b"GET /\r HTTP/1.0", b"\x1b[31mBREW / HTTP/1.0",
                     "GET /\u202eevil HTTP/1.0".encode(), b"GET /\x9b31m HTTP/1.0"):
            with socket.create_connection(("127.0.0.1", srv.server_address[1]), timeout=5) as s:
                s.sendall(line + b"\r\nHost: 127.0.0.1\r\n\r\n")
                while s.recv(4096):
                    pass
    finally:
        srv.shutdown()
        srv.server_close()
    err = capfd.readouterr().err
    assert err.count("\n") >= 5 and "\\x1b" in err
    assert not any(c in err for c in ("\x1b", "\x07", "\r", "\u202e", "\x9b")), repr(err)


@pytest.mark.parametrize("how", ["samples", "results", "run folder", "inside link"])
def test_symlinks_out_of_the_submitted_folder_are_refused(env, capsys, how, tmp_path):
    path = honest(env, "a", n=60)
    res, samp = files(path)
    outside = tmp_path / "outside"
    outside.mkdir()
    if how == "run folder":
        target = outside / res.parent.name
        res.parent.rename(target)
        res.parent.symlink_to(target)
    else:
        f = {"samples": samp, "results": res, "inside link": samp}[how]
        dest = (f.parent / ("real-" + f.name)) if how == "inside link" else outside / f.name
        f.rename(dest)
        f.symlink_to(dest)
    rejected(capsys, path, "symbolic link", "copy the lm-eval output itself")
    assert stored() == []


# ---------------------------------------------------------------- 8. the stated reach probability


def test_reach_probability_with_interrupted_attempts_matches_the_closed_form():
    """benchmarks/board_reach.py's forger on the board's own draw: interrupted attempts count, so the chance a
    forgery of 1 % of documents reaches the spot-checked tier stays 1 - (1 - (1 - a) q)^3 <= 2.97 %; before
    issue 43 (ids in ps, aborts free) the same forger always got there."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("board_reach", REPO / "benchmarks" / "board_reach.py")
    reach = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reach)
    n, trials, cap = 200, 3000, attempts_store.DEFAULT_MAX_ATTEMPTS
    for abort in (0.0, 0.5):
        hit, made = reach.simulate_now(n, cap, trials, abort, seed=43)
        want = reach.closed_form(n, 2, cap, abort)
        assert abs(hit / trials - want) <= 4 * math.sqrt(want * (1 - want) / trials) + 1e-3, (abort, hit, want)
        assert want <= 1 - (1 - spotcheck.MISS_PROB) ** cap and made >= trials * (cap - 1)
    assert reach.closed_form(n, 2, cap) == pytest.approx(spotcheck.reach_probability(n, 2, 180, cap), rel=1e-12)
    hit, used = reach.simulate_before(n, 1000, 30, seed=43)
    assert hit == 30 and used > 20  # certain, after dozens of free re-rolls


# ---------------------------------------------------------------- 9. generated: keys and spellings


def _hypothesis():
    return pytest.importorskip("hypothesis")


def test_generated_unknown_keys_are_refused_and_known_ones_kept():
    h = _hypothesis()
    from hypothesis import strategies as st

    from leaderboards.stages.records import _CLS_FIELDS, _CONF_FIELDS, canonical_record

    @h.settings(max_examples=300, deadline=None)
    @h.given(key=st.text(max_size=24), kind=st.sampled_from(["classification", "confidence"]))
    def check(key, kind):
        base = {"probs": [0.25, 0.75], "gold": 1} if kind == "classification" else {"conf": 0.5, "correct": 1}
        known = _CLS_FIELDS if kind == "classification" else _CONF_FIELDS
        h.assume(key not in known)
        with pytest.raises(SubmissionError, match="unknown record field"):
            canonical_record({**base, key: 0}, "row 1", kind)

    check()


def test_generated_spellings_of_one_number_hash_alike_and_other_numbers_do_not():
    """Any probability written as its shortest repr, its exact decimal expansion, an exponent form, an integer
    (when integral) or -0.0 is one canonical record; a different float64 is another."""
    h = _hypothesis()
    from decimal import Decimal

    from hypothesis import strategies as st

    from leaderboards.stages.records import canonical_record
    from semcal_eval.core.records import records_hash

    def rec(text: str) -> dict:
        return canonical_record(json.loads('{"probs": [%s, 0.5], "gold": 1}' % text), "row 1", "classification")

    @h.settings(max_examples=300, deadline=None)
    @h.given(x=st.floats(min_value=0.0, max_value=1.0, allow_nan=False))
    def check(x):
        spellings = {repr(x), format(Decimal(x), "f"), f"{Decimal(x):e}".replace("E", "e"), repr(x).upper()}
        if x.is_integer():
            spellings |= {str(int(x)), f"{int(x)}.000", "-0.0" if x == 0 else str(int(x))}
        hashes = {records_hash([rec(s)]) for s in spellings if json.loads(s) == x}
        assert len(hashes) == 1, spellings
        y = math.nextafter(x, 2.0)
        assert records_hash([rec(repr(y))]) not in hashes

    check()


@pytest.mark.parametrize("value, ok", [("-12.5", True), (-12.5, True), (-3, True), (True, False), (False, False),
                                       (None, False), ([1], False), ({"v": 1}, False)])
def test_a_json_bool_log_likelihood_is_refused(value, ok):
    """The probe's `true` log-likelihood (float(True) is 1.0). The stock reader of the spot check calls this;
    the stock stage (leaderboards/stages/stock.py) is to call it too."""
    from leaderboards.stages.records import check_logliks

    row = {"filtered_resps": [["-1.0", "False"], [value, "False"]]}
    if ok:
        check_logliks(row, "s:1")
    else:
        with pytest.raises(SubmissionError, match=r"filtered_resps\[1\] holds log-likelihood"):
            check_logliks(row, "s:1")
