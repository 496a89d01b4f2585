"""``semcal-eval board``: submit, list, render and serve the calibration leaderboard.

    semcal-eval board submit OUTPUT_DIR --model-name NAME --method base|semsoft|csr|rlvr|rlcr|... [--db PATH]
    semcal-eval board list   [--db PATH]
    semcal-eval board render --out site/ [--db PATH]
    semcal-eval board serve  [--site site/] [--port 8765]

The database is ``--db``, else ``$SEMCAL_BOARD_DB``, else the user data dir (see :mod:`leaderboards.db`).
Exit status: 0 on success, 2 on a rejected submission or bad arguments (the message says why).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import re
import sqlite3
import sys
from pathlib import Path

from .errors import REJECTED

KNOWN_METHODS = ("base", "semsoft", "temperature", "csr", "rlvr", "rlcr")
_METHOD_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,39}$")
MAX_MODEL_NAME = 200


def _model_name(s: str) -> str:
    if not s.strip() or len(s) > MAX_MODEL_NAME or any(ord(c) < 32 or ord(c) == 127 for c in s):
        raise argparse.ArgumentTypeError(
            f"model name must be 1-{MAX_MODEL_NAME} printable characters, got {s[:40]!r}"
        )
    return s


def _method(s: str) -> str:
    if not _METHOD_RE.match(s):
        raise argparse.ArgumentTypeError(
            f"method {s[:40]!r} must be a short identifier (letters, digits, _ . + -), e.g. one of "
            + ", ".join(KNOWN_METHODS)
        )
    return s


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="semcal-eval board", description="semcal calibration leaderboard")
    sub = p.add_subparsers(dest="cmd", required=True)

    def add_db(sp):
        sp.add_argument("--db", type=Path, default=None, help="SQLite file (default: $SEMCAL_BOARD_DB or user data dir)")

    s = sub.add_parser("submit", help="validate an lm-eval output folder, recompute its metrics, store it")
    s.add_argument("output_dir", type=Path, help="lm-eval --output_path folder (or one results_*.json in it)")
    s.add_argument("--model-name", required=True, type=_model_name)
    s.add_argument("--method", required=True, type=_method, help="training/scoring method: " + ", ".join(KNOWN_METHODS) + ", ...")
    s.add_argument("--tasks-dir", type=Path, default=None, help="task YAML folder (default: semcal_eval.TASKS_DIR)")
    add_db(s)

    ls = sub.add_parser("list", help="list stored submissions")
    add_db(ls)

    r = sub.add_parser("render", help="write the static site")
    r.add_argument("--out", type=Path, required=True)
    add_db(r)

    sv = sub.add_parser("serve", help="serve a rendered site on 127.0.0.1")
    sv.add_argument("--site", type=Path, default=Path("site"))
    sv.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    return p


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):  # keep stdout for the URL line; requests go to stderr
        sys.stderr.write("%s - %s\n" % (self.address_string(), fmt % args))

    def end_headers(self):
        self.send_header("X-Content-Type-Options", "nosniff")
        super().end_headers()


def serve(site: Path, port: int) -> int:
    """Serve ``site`` on http://127.0.0.1:PORT/ until interrupted (loopback only, read-only)."""
    if not (site / "index.html").is_file():
        print(f"error: {site}/index.html not found; run `semcal-eval board render --out {site}` first", file=sys.stderr)
        return 2
    handler = functools.partial(_QuietHandler, directory=str(site.resolve()))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as httpd:
        print(f"Serving {site} at http://127.0.0.1:{httpd.server_address[1]}/", flush=True)
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            pass
    return 0


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
        if args.cmd == "submit":
            from .recompute import validate_run

            sub = validate_run(args.output_dir, args.tasks_dir)
            sid = db.insert(con, sub, args.model_name, args.method)
            print(f"submission #{sid} stored in {db_path}: {len(sub.entries)} entries "
                  f"({', '.join(sorted({e.task for e in sub.entries}))}), sha256 {sub.content_hash[:16]}")
            for e in sub.entries:
                flag = f"  [degenerate: {e.degenerate}]" if e.degenerate else ""
                print(f"  {e.task:<28} {e.filter:<14} ECE {e.board['ece']:.4f}  Brier {e.board['brier']:.4f}  "
                      f"acc {e.board['acc']:.4f}{flag}")
        elif args.cmd == "list":
            rows = db.list_submissions(con)
            if not rows:
                print(f"{db_path}: no submissions")
            for sid, name, method, at, n, tasks in rows:
                print(f"#{sid}\t{name}\t{method}\t{at}\t{n} entries\t{tasks}")
        elif args.cmd == "render":
            from .site import render

            stats = render(db.load_entries(con), args.out)
            print(f"rendered {stats['rows']} rows, {stats['pages']} entry pages into {args.out}/index.html")
        con.close()
    except REJECTED as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except sqlite3.DatabaseError as e:
        print(f"error: board database {db_path}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
