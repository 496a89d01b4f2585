"""``semcal-eval board``: submit, evaluate, list, render and serve the calibration leaderboard.

    semcal-eval board submit OUTPUT_DIR --model-name NAME --method base|semsoft|csr|rlvr|rlcr|... [--db PATH]
                             [--no-spot-check] [--spot-check-seed N]
    semcal-eval board evaluate MODEL [--tasks t1,t2] [--limit N] [--model-name NAME] [--method M] [--device D]
                               [--no-wait] [--db PATH]
    semcal-eval board worker [--once] [--db PATH]
    semcal-eval board jobs   [--db PATH]
    semcal-eval board attempts [--clear WEIGHTS [--submitter NAME]] [--db PATH]
    semcal-eval board config [--max-attempts N] [--model-cache DIR] [--db PATH]
    semcal-eval board register-task [TASK --include-path DIR] [--db PATH]
    semcal-eval board quota  [--self-reported N [--submitter NAME]] [--db PATH]
    semcal-eval board list   [--db PATH]
    semcal-eval board render --out site/ [--db PATH]
    semcal-eval board serve  [--site site/] [--port 8765]

Tiers (docs/LEADERBOARD.md, "Verified entries"): ``evaluate`` runs lm-eval itself with pinned settings and
stores *verified* entries; ``submit`` re-scores a random sample of documents with the model the run names
(*spot-checked*), or stores the run as *self-reported* with the reason when that model cannot be loaded here.

The database is ``--db``, else ``$SEMCAL_BOARD_DB``, else the user data dir (see :mod:`leaderboards.db`).
Exit status: 0 on success, 2 on a rejected submission, a failed job or bad arguments (one line says why).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

from . import names
from .errors import REJECTED, SubmissionError
from .names import KNOWN_METHODS

DEFAULT_EVAL_TASKS = "goemotions_semsoft"


def _checked(check):
    """An argparse type from a :mod:`leaderboards.names` check (NFC; no control, bidi or zero-width characters)."""

    def parse(s: str) -> str:
        try:
            return check(s)
        except SubmissionError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = check.__name__  # argparse names the type in its usage errors
    return parse


_model_name = _checked(names.model_name)
_method = _checked(names.method)


def _positive_int(s: str) -> int:
    try:
        n = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s[:40]!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n} must be at least 1")
    return n


def _seed(s: str) -> int:
    if len(s) > 12 or not s.strip().lstrip("-").isdigit():
        raise argparse.ArgumentTypeError(f"{s[:20]!r} is not a whole number of at most 10 digits")
    n = int(s)
    if not 0 <= n < 2**31:
        raise argparse.ArgumentTypeError(f"{n} must be in 0..2^31-1")
    return n


def _tasks(s: str) -> list[str]:
    tasks = [t.strip() for t in s.split(",") if t.strip()]
    if not tasks:
        raise argparse.ArgumentTypeError("--tasks needs at least one task name, e.g. goemotions_semsoft")
    return tasks


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="semcal-eval board", description="semcal calibration leaderboard")
    sub = p.add_subparsers(dest="cmd", required=True)

    def add_db(sp):
        sp.add_argument("--db", type=Path, default=None, help="SQLite file (default: $SEMCAL_BOARD_DB or user data dir)")

    s = sub.add_parser("submit", help="validate an lm-eval output folder, recompute its metrics, spot-check, store it")
    s.add_argument("output_dir", type=Path, help="lm-eval --output_path folder (or one results_*.json in it)")
    s.add_argument("--model-name", default=None, type=_model_name,
                   help="a label shown beside the model name, which is derived from the run's model_args")
    s.add_argument("--method", required=True, type=_method, help="training/scoring method: " + ", ".join(KNOWN_METHODS) + ", ...")
    s.add_argument("--tasks-dir", type=Path, default=None, help="task YAML folder (default: semcal_eval.TASKS_DIR)")
    s.add_argument("--no-spot-check", action="store_true",
                   help="store without re-scoring any document (tier self-reported)")
    s.add_argument("--spot-check-seed", type=_seed, default=None,
                   help="choose the seed of the documents re-scored (debugging: the entry is then self-reported, "
                        "never spot-checked)")
    s.add_argument("--token-file", type=Path, default=None,
                   help="file holding your submitter token (default: $SEMCAL_BOARD_TOKEN; none: anonymous)")
    add_db(s)

    sa = sub.add_parser("submitter", help="manage submitter identities (board operator)")
    sa.add_argument("action", choices=["add", "list"])
    sa.add_argument("name", nargs="?", default=None)
    add_db(sa)

    ev = sub.add_parser("evaluate", help="queue a board-run evaluation (verified tier) and run it")
    ev.add_argument("model", help="catalogue name (smollm2-135m), semcal:NAME, or a local HF model folder")
    ev.add_argument("--tasks", type=_tasks, default=_tasks(DEFAULT_EVAL_TASKS),
                    help="comma-separated semcal task names or registered stock tasks (name, or name@hash)")
    ev.add_argument("--limit", type=_positive_int, default=None, help="first N documents of each task (partial view)")
    ev.add_argument("--model-name", type=_model_name, default=None, help="name shown (default: the model's own)")
    ev.add_argument("--method", type=_method, default="base")
    ev.add_argument("--device", default=None, help="torch device of the job's lm-eval run (default: cpu, pinned)")
    ev.add_argument("--no-wait", action="store_true", help="only enqueue; a `board worker` runs it later")
    add_db(ev)

    w = sub.add_parser("worker", help="run queued evaluation jobs (re-queues jobs of a dead worker first)")
    w.add_argument("--once", action="store_true", help="run at most one job, then exit")
    add_db(w)

    rt = sub.add_parser("register-task", help="register a stock multiple_choice task's config (board operator), "
                        "so runs of it are checked against its dataset and spot-checked; or list the registered")
    rt.add_argument("task", nargs="?", default=None, help="the lm-eval task name; none: list the registered tasks")
    rt.add_argument("--include-path", type=Path, default=None,
                    help="folder of the task's YAML (and its local data files); default: lm-eval's own tasks")
    add_db(rt)

    at = sub.add_parser("attempts", help="list spot-check attempts (started, passed, rejected, interrupted; board "
                        "operator), or clear a cap")
    at.add_argument("--clear", metavar="WEIGHTS", default=None,
                    help="mark the rejected attempts of these weights (the 'weights' column) as cleared")
    at.add_argument("--submitter", default=None, help="with --clear: only this submitter's attempts")
    add_db(at)

    cf = sub.add_parser("config", help="show or change the board's pinned settings (board operator); environment "
                        "variables never change them")
    cf.add_argument("--max-attempts", default=None, help="rejected spot checks allowed per (weights, submitter)")
    cf.add_argument("--model-cache", type=Path, default=None,
                    help="the model cache whose catalogue models the spot check re-scores with")
    add_db(cf)

    qu = sub.add_parser("quota", help="show or set each submitter's quota of self-reported task entries (operator)")
    qu.add_argument("--self-reported", type=int, default=None, metavar="N",
                    help="self-reported (submission, task) entries allowed; with --submitter for one submitter "
                         "('anonymous' is every token-less submission together), else the default")
    qu.add_argument("--submitter", default=None, help="the submitter the quota is for (default: everyone)")
    add_db(qu)

    j = sub.add_parser("jobs", help="list evaluation jobs and their state")
    add_db(j)

    ls = sub.add_parser("list", help="list stored submissions")
    add_db(ls)

    r = sub.add_parser("render", help="write the static site")
    r.add_argument("--out", type=Path, required=True)
    add_db(r)

    sv = sub.add_parser("serve", help="serve a rendered site on 127.0.0.1")
    sv.add_argument("--site", type=Path, default=Path("site"))
    sv.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    return p


def serve(site: Path, port: int) -> int:
    """Serve ``site`` on http://127.0.0.1:PORT/ with the board's hardened server (:mod:`leaderboards.server`)."""
    from .server import serve as hardened

    return int(hardened(site, port) or 0)


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _stored_line(sid: int, sub, tier: str, db_path) -> str:
    tasks = ", ".join(sorted({e.task for e in sub.entries}))
    return f"submission #{sid} stored in {db_path} as {tier}: {len(sub.entries)} entries ({tasks})"


def _print_entries(sub) -> None:
    for e in sub.entries:
        flag = f"  [degenerate: {e.degenerate}]" if e.degenerate else ""
        print(f"  {e.task:<28} {e.filter:<14} ECE {e.board['ece']:.4f}  Brier {e.board['brier']:.4f}  "
              f"acc {e.board['acc']:.4f}{flag}")


def _token(args) -> str | None:
    import os

    if args.token_file is not None:
        try:
            with open(args.token_file, encoding="utf-8") as fh:
                return fh.read(256).strip() or None
        except OSError as e:
            raise SubmissionError(f"--token-file {args.token_file}: {e.strerror or e}") from None
    return os.environ.get("SEMCAL_BOARD_TOKEN") or None


def _submit(con, args, db_path) -> int:
    from . import db

    # the board's model cache for the whole submission: the displayed name (known_weights) and the spot check
    # both read catalogue weights, and neither may follow a submitter's $SEMCAL_MODEL_CACHE
    with db.pinned_model_cache(con):
        return _submit_pinned(con, args, db_path)


def _submit_pinned(con, args, db_path) -> int:
    from . import db, names, spotcheck, stock
    from .recompute import validate_run
    from .stages.shape import check_no_links

    submitter = args.submitter = db.submitter_of(con, _token(args))
    names.check_path_text(str(args.output_dir), "OUTPUT_DIR")
    registered = stock.registered(con)
    check_no_links(args.output_dir)  # a symlink out of the submitted folder is refused before anything is read
    sub = validate_run(args.output_dir, args.tasks_dir, stock_tasks=registered)
    stock_regs = {v["task"]: registered.get(v["config_hash"]) for v in sub.stock.values()}
    # Every cheap check before the spot check spends minutes: names (the derived one included) and look-alikes
    # of stored names, duplicates, cross-fitted and tuned rows (model-free, on every document).
    _, label, model_id, _, shown = db.entry_names(sub, args.model_name, args.method)
    db.check_names_unconfusable(con, (shown, model_id, label))
    dup = db.duplicate_of(con, sub)
    if dup:
        raise SubmissionError(f"duplicate submission: these predictions are already stored as {dup}; editing the "
                              "results file, names or hashes does not make a new measurement")
    crossfit = spotcheck.check_crossfit(sub.results_path)
    tuned = spotcheck.check_tuned_row(sub.results_path)
    if args.no_spot_check:
        tier, verification = "self-reported", {"reason": "submitted with --no-spot-check"}
        print("not spot-checked (--no-spot-check): stored as self-reported")
    else:
        tier, verification = _spot_check(con, args, sub, stock_regs)
    if sub.stock:
        verification["stock_tasks"] = sub.stock
    if crossfit:
        verification["crossfit_recomputed"] = crossfit
    if tuned:
        verification["tuned_configuration"] = tuned
    sid = db.insert(con, sub, args.model_name, args.method, tier=tier, verification=verification,
                    submitter=submitter)
    print(_stored_line(sid, sub, tier, db_path) + f" (submitter {submitter})")
    for key, st in sorted(sub.stock.items()):
        print(f"stock task {key}: config sha256 {st['config_hash']}, " + (
            "registered: checked against the board's documents" if st["registered"] else
            "not registered: documents and labels as submitted (`semcal-eval board register-task` registers it)"))
    _print_entries(sub)
    return 0


def _spot_check(con, args, sub, stock_regs) -> tuple[str, dict]:
    """The tier stage of ``board submit`` (docs/LEADERBOARD.md, "Threat model"): the board's pinned model cache
    and cap (an environment variable that disagrees is refused), then the attempt recorded as ``started`` and
    committed **before** any draw exists, so an attempt interrupted by Ctrl-C or kill counts towards the cap;
    the draw (HMAC under the board secret) for every task, stock tasks included; the re-scoring; the outcome."""
    from . import db

    # before claimed_model resolves semcal:NAME: the board's weights, not the caller's
    with db.pinned_model_cache(con):
        return _spot_check_pinned(con, args, sub, stock_regs)


def _spot_check_pinned(con, args, sub, stock_regs) -> tuple[str, dict]:
    """:func:`_spot_check` inside the board's model cache."""
    import json

    from . import attempts as attempts_store
    from . import spotcheck
    from .identity import model_identity, weights_key

    cap = attempts_store.max_attempts(con)
    model_args = sub.model_args or (sub.provenance.get("config") or {}).get("model_args")
    model_key = "@".join(model_identity(model_args)[:2])
    doc_sets = {e.task: e.doc_set_hash for e in sub.entries}
    try:  # the weights the check re-scores: the key of the attempt cap (aliases and paths resolve to it)
        weights = weights_key(spotcheck.claimed_model(model_args)[0])
    except spotcheck.NotCheckable:
        weights = ""  # not re-scorable: spot_check stores it self-reported with the reason
    record = dict(model=model_key, tasks=sorted(doc_sets), doc_sets=[doc_sets[t] for t in sorted(doc_sets)],
                  predictions_hash=sub.predictions_hash, submitter=args.submitter, weights=weights)
    aid, before = None, 0
    if weights:  # a model the board can re-score: the attempt is recorded (and committed) before any draw exists
        aid, before = attempts_store.start_attempt(con, **record)
    try:
        # a fresh draw per submission, unknowable without the board secret (HMAC of the content hash); a stock
        # task is drawn under its entry name (name@config-hash) and looked up by its lm-eval name
        tags = {t: spotcheck.draw_tag(con, sub.predictions_hash, t, h) for t, h in doc_sets.items()}
        for key, st in sub.stock.items():
            if key in tags:
                tags[st["task"]] = tags[key]
        splits = {e.task: e.split for e in sub.entries if e.split}
        sc = spotcheck.spot_check(sub.results_path, seed=args.spot_check_seed, tags=tags, splits=splits,
                                  progress=_progress, stock=stock_regs)
    except spotcheck.SpotCheckRejected as e:
        if aid is None:
            attempts_store.record_attempt(con, outcome="rejected", detail=e.detail, **record)
        else:
            attempts_store.finish_attempt(con, aid, "rejected", e.detail)
        raise SubmissionError(f"{e} (rejected attempt {before + 1} of {cap} for these weights)") from None
    except BaseException as e:  # Ctrl-C, a crash: the draw was made, so the attempt counts
        if aid is not None:
            attempts_store.finish_attempt(con, aid, "interrupted", json.dumps({"error": type(e).__name__}))
        raise
    if aid is not None:
        attempts_store.finish_attempt(con, aid, "passed" if sc.tier == "spot-checked" else "not checked")
    verification = sc.verification
    if "spot_check" in verification and weights:
        verification["spot_check"].update({
            "weights": weights, "content_hash": sub.predictions_hash,
            "secret_commitment": spotcheck.secret_commitment(con),
            "rejected_attempts_before": before, "max_attempts": cap})
    print(sc.message)
    return sc.tier, verification


def _config(con, args) -> int:
    """Operator: show or change the board's pinned settings (cap, model cache)."""
    from . import attempts as attempts_store
    from . import db

    if args.max_attempts is not None:
        db.set_board_setting(con, "max_attempts", str(attempts_store.parse_cap(args.max_attempts)))
    if args.model_cache is not None:
        root = args.model_cache.expanduser().resolve()
        if not root.is_dir():
            raise SubmissionError(f"--model-cache {args.model_cache}: not a folder; give the model cache the board "
                                  "trusts (where `semcal-eval models install` put the models)")
        db.set_board_setting(con, "model_cache", str(root))
    for key in db.SETTINGS:
        row = con.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        print(f"{key}\t{row[0] if row else ''}")
    return 0


def _register_task(con, args) -> int:
    from . import stock

    if args.task is None:
        for r in stock.registered(con).values():
            print(f"{stock.entry_task(r.task, r.config_hash)}\t{r.config_hash}\t{r.logged_hash}\t{r.split} ({r.n_docs} documents)\t{r.include_path or 'lm-eval tasks'}"
                  f"\t{r.registered_at}")
        return 0
    names.check_path_text(args.task, "TASK")
    before = stock.registered(con)
    # building the task imports the Python its YAML names (!function, class): say so before it runs
    print(f"note: registering builds the task with lm-eval, which imports and runs the Python files its YAML names "
          f"(!function, class) from {args.include_path or 'lm-eval tasks'}; register only folders you trust",
          file=sys.stderr)
    r = stock.register(con, args.task, args.include_path)
    key = stock.entry_task(r.task, r.config_hash)
    others = [stock.entry_task(o.task, o.config_hash) for o in before.values()
              if o.task == r.task and o.config_hash != r.config_hash]
    if r.config_hash in before:
        print(f"{r.task} is already registered as {key} (registration hash {r.config_hash}, config hash "
              f"{r.logged_hash}, since {r.registered_at}): nothing changed")
        return 0
    print(f"registered {r.task} as {key} (registration hash {r.config_hash}; config hash {r.logged_hash}, its data "
          f"files and code hashed in): {r.split} split, {r.n_docs} documents, built from "
          f"{r.include_path or 'lm-eval tasks'}. Runs of this config on these documents are now checked against "
          "them and spot-checked." + (f" A new version: {', '.join(others)} stay registered, and their entries "
                                      "are ranked apart from this one's." if others else ""))
    return 0


def _run_jobs(con, db_path, *, once: bool, job_id: int | None = None) -> int:
    from .evaluate import work_until_empty

    results = work_until_empty(con, db_path, once=once, job_id=job_id, progress=_progress)
    if not results:
        print("no queued job")
    failed = False
    for state, msg in results:
        if state == "failed":
            failed = True
            print(f"error: {msg}", file=sys.stderr)
        else:
            print(msg)
    return 2 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``semcal-eval board ...``; returns the exit status."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # argparse already printed the usage error
        return int(e.code or 0)
    if args.cmd == "serve":
        return serve(args.site, args.port)

    from . import db

    db_path = args.db or db.default_db_path()
    try:
        con = db.connect(db_path)
        try:
            return _dispatch(con, args, db_path)
        finally:
            con.close()
    except REJECTED as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except sqlite3.DatabaseError as e:
        print(f"error: board database {db_path}: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {e.filename or db_path}: {e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # a running job was put back in the queue (leaderboards.evaluate)
        print("interrupted", file=sys.stderr)
        return 130


def _dispatch(con, args, db_path) -> int:
    from . import db

    if args.cmd == "submit":
        return _submit(con, args, db_path)
    if args.cmd == "register-task":
        return _register_task(con, args)
    if args.cmd == "quota":
        if args.self_reported is not None:
            db.set_self_reported_quota(con, args.self_reported, args.submitter)
        who = [args.submitter] if args.submitter else ["anonymous"] + [
            n for (n,) in con.execute("SELECT name FROM submitters ORDER BY name")]
        for name in who:
            print(f"{name}\t{db.self_reported_used(con, name)} of {db.self_reported_quota(con, name)} "
                  "self-reported task entries")
        return 0
    if args.cmd == "config":
        return _config(con, args)
    if args.cmd == "submitter":
        if args.action == "add":
            if not args.name:
                raise SubmissionError("board submitter add NAME: give the submitter's name")
            token = db.add_submitter(con, args.name)
            print(f"submitter {args.name} added; token (shown once, keep it secret): {token}")
            return 0
        for name, at in con.execute("SELECT name, created_at FROM submitters ORDER BY name"):
            print(f"{name}\t{at}")
        return 0
    if args.cmd == "evaluate":
        from .evaluate import enqueue

        jid = enqueue(con, args.model, args.tasks, args.limit, model_name=args.model_name, method=args.method,
                      device=args.device)
        print(f"job {jid} queued: {args.model} on {', '.join(args.tasks)}"
              + (f" (limit {args.limit})" if args.limit else ""))
        if args.no_wait:
            return 0
        return _run_jobs(con, db_path, once=True, job_id=jid)
    if args.cmd == "worker":
        return _run_jobs(con, db_path, once=args.once)
    if args.cmd == "attempts":
        from . import attempts as attempts_store

        if args.clear:
            n = attempts_store.clear_attempts(con, args.clear, args.submitter)
            print(f"cleared {n} rejected attempt(s) of {args.clear}")
            return 0
        for a in attempts_store.attempts(con):  # the operator's view: the detail names the worst document
            print(f"#{a['id']}\t{a['at']}\t{a['outcome']}\t{a['submitter']}\t{a['model']}\t{a['weights']}"
                  f"\t{a['tasks']}\t{a['detail'][:300]}")
        return 0
    if args.cmd == "jobs":
        from .evaluate import list_jobs

        jobs = list_jobs(con)
        if not jobs:
            print(f"{db_path}: no jobs")
        for j in jobs:
            extra = f"\t#{j['submission_id']}" if j["submission_id"] else ""
            err = f"\t{j['error']}" if j["error"] else ""
            print(f"job {j['id']}\t{j['state']}\t{j['model']}\t{','.join(j['tasks'])}\tlimit {j['limit']}"
                  f"\tattempts {j['attempts']}{extra}{err}")
        return 0
    if args.cmd == "list":
        rows = db.list_submissions(con)
        if not rows:
            print(f"{db_path}: no submissions")
        tiers = _tiers(con)
        for row in rows:
            sid, name, method, at, n, tasks = row[:6]
            print(f"#{sid}\t{tiers.get(sid, 'self-reported')}\t{name}\t{method}\t{at}\t{n} entries\t{tasks}")
        return 0
    if args.cmd == "render":
        from .site import render

        out = args.out.resolve()
        if Path(db_path).resolve().is_relative_to(out):
            raise SubmissionError(f"--db {db_path} is inside --out {args.out}: the database holds the spot-check "
                                  "secret and must never be in the served site folder; move it elsewhere")
        stats = render(db.load_entries(con), args.out)
        print(f"rendered {stats['rows']} rows, {stats['pages']} entry pages into {args.out}/index.html")
        return 0
    raise SubmissionError(f"unknown command {args.cmd!r}")


def _tiers(con) -> dict[int, str]:
    return dict(con.execute("SELECT id, tier FROM submissions").fetchall())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
