"""The board's output side against a hostile store and hostile clients (issue 12: D5, D6, the Markdown,
PNG and server items of the lower-severity list, the tier display).

Everything runs for real: runs are written by tests/board_fixtures.py, validated by
``leaderboards.recompute.validate_run``, stored with ``leaderboards.db`` and read back with
``db.load_entries``; the site is rendered into a temporary folder; the server is a real threaded HTTP server
on 127.0.0.1 talked to through sockets; killed renders are real subprocesses killed with SIGKILL.
"""

from __future__ import annotations

import csv
import html.parser
import http.client
import json
import os
import resource
import select
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from leaderboards import db as DB
from leaderboards.cli import main
from leaderboards.recompute import validate_run
from leaderboards.registry import load_registry
from leaderboards.server import make_server, serve
from leaderboards.site import RenderError, md_escape, render, valid_png

import board_fixtures as S  # tests/board_fixtures.py: synthetic runs (tests/ is on sys.path)

REPO = Path(__file__).resolve().parents[1]
CLS = "semcal_synth_cls"
N = 200


# ---------------------------------------------------------------- the real pipeline


class Board:
    """A board database filled through the real submit pipeline (write_run -> validate_run -> db.insert)."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.tasks = S.write_synth_tasks(tmp / "tasks")
        self.metrics = load_registry(self.tasks)[CLS].metrics
        self.db = tmp / "board.sqlite"
        self.tiers: dict[int, str] = {}

    def add(self, name: str, model: str, filters: dict, *, tier: str | None = None, **run_kw) -> int:
        # the run names the model (the board derives the displayed name from model_args, issue 25)
        S.write_run(self.tmp / "runs" / name, CLS, filters, self.metrics, model_name=model, **run_kw)
        sub = validate_run(self.tmp / "runs" / name, self.tasks)
        con = DB.connect(self.db)
        try:
            # default: a trusted tier, so the row is in the default views (self-reported rows have their own table)
            sid = DB.insert(con, sub, model, "base", tier=tier or "spot-checked")
        finally:
            con.close()
        if tier:
            self.tiers[sid] = tier
        return sid

    def entries(self) -> list[dict]:
        con = DB.connect(self.db)
        try:
            entries = DB.load_entries(con)
        finally:
            con.close()
        for e in entries:
            # the tier column comes with the board's schema v2 (helper A); set it by hand until then
            if "tier" not in e and e["submission_id"] in self.tiers:
                e["tier"] = self.tiers[e["submission_id"]]
        return entries

    def sql(self, statement: str, *args) -> None:
        con = sqlite3.connect(self.db)
        try:
            con.execute(statement, args)
            con.commit()
        finally:
            con.close()


def one_hot(items: list[dict]) -> list[dict]:
    """Invented 'perfect' probabilities on the same documents: all mass on the gold label."""
    k = len(items[0]["probs"])
    return [{"probs": [1.0 if j == it["gold"] else 0.0 for j in range(k)], "gold": it["gold"], "soft": None}
            for it in items]


@pytest.fixture
def board(tmp_path, monkeypatch):
    b = Board(tmp_path)
    # write_run writes the synthetic dataset of each run into the board's task folder named here
    monkeypatch.setenv("SEMCAL_BOARD_TASKS_DIR", str(b.tasks))
    return b


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> bytes): to compare a site byte for byte."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def siblings(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(f".{path.name}."))


class Tables(html.parser.HTMLParser):
    """Rows of each ``<table id=...>`` as dicts header data-key -> (data-v, text)."""

    def __init__(self, text: str):
        super().__init__()
        self.tables: dict[str, list[dict]] = {}
        self._id = self._keys = self._row = self._cell = None
        self._in_head = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and "id" in a:
            self._id, self._keys = a["id"], []
            self.tables[self._id] = []
        elif self._id is None:
            return
        elif tag == "thead":
            self._in_head = True
        elif tag == "th" and self._in_head:
            self._keys.append(a.get("data-key") or str(len(self._keys)))
        elif tag == "tr" and not self._in_head:
            self._row = {"_attrs": a, "_cells": []}
        elif tag == "td" and self._row is not None:
            self._cell = [a.get("data-v"), "", a]

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data

    def handle_endtag(self, tag):
        if self._id is None:
            return
        if tag == "thead":
            self._in_head = False
        elif tag == "td" and self._cell is not None:
            self._row["_cells"].append(tuple(self._cell))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            cells = self._row.pop("_cells")
            keys = self._keys if len(self._keys) == len(cells) else [str(i) for i in range(len(cells))]
            self._row.update({k: c for k, c in zip(keys, cells)})
            self.tables[self._id].append(self._row)
            self._row = None
        elif tag == "table":
            self._id = None


def index_tables(site: Path) -> dict[str, list[dict]]:
    return Tables((site / "index.html").read_text()).tables


def model_of(row: dict) -> str:
    return row["model"][1]


def model_rows(rows: list[dict]) -> dict[str, dict]:
    """Model rows (not reference rows) by model name."""
    return {model_of(r): r for r in rows if r["_attrs"]["class"].startswith("model")}


# ---------------------------------------------------------------- D5: rankings never mix document sets


def test_partial_runs_are_never_ranked_with_full_runs(board, tmp_path):
    items = S.cls_items(N, seed=5)
    board.add("good", "full-good", {"constrained": items, "prior": S.prior_items(items)})
    board.add("cold", "full-cold", {"constrained": S.cls_items(N, seed=5, temperature=3.0)})
    # the same model's first 20 documents with invented perfect probabilities: the best ECE of all (D5)
    board.add("first20", "partial-perfect", {"constrained": one_hot(items[:20])}, limit=20, original=N)
    board.add("first20b", "partial-other", {"constrained": S.cls_items(N, seed=7)[:20]}, limit=20, original=N)
    board.add("first30", "partial-30", {"constrained": S.cls_items(N, seed=8)[:30]}, limit=30, original=N)
    site = tmp_path / "site"
    stats = render(board.entries(), site, warn=None)
    assert stats["skipped"] == [] and stats["full"] >= 2 and stats["partial"] >= 3

    t = index_tables(site)
    full = list(model_rows(t["board"]).values())
    assert sorted(model_of(r) for r in full) == ["full-cold", "full-good"]
    # full ranks are the ranks among full runs alone: the perfect partial run does not push them down
    by_ece = sorted(full, key=lambda r: float(r["ece"][0]))
    assert [r["ece_rank"][1] for r in by_ece] == ["1", "2"]
    part = model_rows(t["partial"])
    assert set(part) == {"partial-perfect", "partial-other", "partial-30"}
    assert part["partial-perfect"]["ece"][0] == "0.0"
    # ranked only against the run on the very same 20 documents; the 30-document run stands alone
    assert part["partial-perfect"]["doc_set"] == part["partial-other"]["doc_set"] != part["partial-30"]["doc_set"]
    assert (part["partial-perfect"]["ece_rank"][1], part["partial-other"]["ece_rank"][1]) == ("1", "2")
    assert part["partial-30"]["ece_rank"][1] == "1"
    assert "20 of 200 (limit 20)" in part["partial-perfect"]["n"][1]
    # the overall view holds full runs only
    overall = [r["1"][1] for r in t["overall-table"]]
    assert sorted(overall) == ["full-cold", "full-good"]

    rows = {r["model_name"]: r for r in csv.DictReader((site / "leaderboard.csv").open())}
    assert rows["partial-perfect"]["coverage"] == "partial" and rows["full-good"]["coverage"] == "full"
    md = (site / "leaderboard.md").read_text()
    full_part, partial_part = md.split("partial runs (not ranked with full-split runs)", 1)
    assert "partial&#45;perfect" not in full_part and "partial-perfect" not in full_part
    assert "partial-perfect" in partial_part
    page = next(p.read_text() for p in (site / "entries").glob("*.html") if "partial-perfect" in p.read_text())
    assert "<b>partial</b>" in page and "never with full-split runs" in page


# ---------------------------------------------------------------- tiers


def test_tier_shown_everywhere_and_verified_ranks(board, tmp_path):
    items = S.cls_items(N, seed=5)
    board.add("best", "self-best", {"constrained": items}, tier="self-reported")
    board.add("mid", "verified-mid", {"constrained": S.cls_items(N, seed=5, temperature=0.5)}, tier="verified")
    board.add("bad", "spot-worst", {"constrained": S.cls_items(N, seed=5, temperature=3.0)}, tier="spot-checked")
    board.add("worse", "verified-worst", {"constrained": S.cls_items(N, seed=5, temperature=0.2)}, tier="verified")
    site = tmp_path / "site"
    render(board.entries(), site, warn=None)

    rows = model_rows(index_tables(site)["board"])
    # issue 25: the self-reported (and best) row is not in the default table but in its own
    assert "self-best" not in rows
    self_rows = model_rows(index_tables(site)["self"])
    assert self_rows["self-best"]["tier"][:2] == ("self-reported", "self-reported, unverified")
    assert self_rows["self-best"]["ece_rank"][1] == "1"  # ranked among self-reported entries only
    assert rows["verified-mid"]["tier"][:2] == ("verified", "verified")
    assert rows["spot-worst"]["tier"][:2] == ("spot-checked", "spot-checked")
    assert rows["verified-mid"]["_attrs"]["data-tier"] == "verified"
    # the verified-only ranking is computed among verified rows alone, and travels in the rank cells
    eces = {m: float(r["ece"][0]) for m, r in rows.items()}
    ver = sorted((m for m in rows if m.startswith("verified")), key=eces.get)
    for i, m in enumerate(ver, 1):
        assert rows[m]["ece_rank"][2]["data-verified"] == repr(float(i))
    assert self_rows["self-best"]["ece_rank"][2]["data-verified"] == "NaN"
    assert int(rows[ver[0]]["ece_rank"][1]) == sorted(eces.values()).index(eces[ver[0]]) + 1
    verified_overall = [r["1"][1] for r in index_tables(site)["overall-verified"]]
    assert sorted(verified_overall) == sorted(ver)

    pages = {p.name: p.read_text() for p in (site / "entries").glob("*.html")}
    (self_page,) = [t for t in pages.values() if "self-best" in t]
    assert "Tier: <b>self-reported, unverified</b>" in self_page
    (ver_page,) = [t for t in pages.values() if "verified-mid" in t.split("<h1>", 1)[1][:80]]
    assert "Tier: <b>verified</b>" in ver_page
    by = {r["model_name"]: r for r in csv.DictReader((site / "leaderboard.csv").open())}
    assert by["self-best"]["tier"] == "self-reported" and by["verified-mid"]["tier"] == "verified"
    assert by["verified-mid"]["ece_rank_verified"] in ("1", "2")
    md = (site / "leaderboard.md").read_text()
    head, _, tail = md.partition("## Self-reported entries")
    assert "self-best" not in head and "| self-best | anonymous | base | constrained | self-reported, unverified |" in tail
    assert "## Overall, verified entries only" in md


# ---------------------------------------------------------------- Markdown escaping


NASTY = [
    "[click me](http://evil.example/x)",
    "![pixel](http://evil.example/p.png)",
    "<b>bold</b><script>alert(1)</script>",
    "a | b | c",
    "*em* _em_ **strong** ~~strike~~ `code`",
    "visit www.evil.example or https://evil.example or mail me@evil.example",
    "[ref]: http://evil.example",
    "back\\slash &amp; &#91;entity&#93;",
    "line\nbreak # not a heading",
]


def _md_inline_tokens(text: str):
    """The tokens of ``text`` as markdown-it (CommonMark + GFM tables and strikethrough) parses it."""
    markdown_it = pytest.importorskip("markdown_it")
    md = markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"])
    toks = []
    for t in md.parse(text):
        toks.append(t)
        toks.extend(t.children or [])
    return toks


def _shown(toks) -> list[str]:
    """The text a reader sees in each inline run (entities decoded)."""
    return ["".join(c.content for c in t.children if c.type in ("text", "text_special"))
            for t in toks if t.type == "inline"]


@pytest.mark.parametrize("s", NASTY)
def test_md_escape_renders_as_plain_text(s):
    cell = f"| {md_escape(s)} | x |\n|---|---|\n| {md_escape(s)} | y |\n"
    toks = _md_inline_tokens(cell)
    kinds = {t.type for t in toks}
    assert not kinds & {"link_open", "image", "html_inline", "html_block", "em_open", "strong_open", "s_open",
                        "code_inline"}, kinds
    assert _shown(toks)[0] == s.replace("\n", " ")  # shown exactly as the text (the pipe did not split the cell)
    escaped = md_escape(s)
    assert "](" not in escaped and "<" not in escaped and "|" not in escaped and "://" not in escaped
    assert "www." not in escaped and "@" not in escaped


def test_markdown_export_has_no_markup_from_names(board, tmp_path):
    evil = "[win](http://evil.example) ![x](http://evil.example/i.png) <b>hi</b> | www.evil.example"
    items = S.cls_items(60, seed=1)
    board.add("evil", evil, {"constrained": items})
    board.add("plain", "plain-model", {"constrained": S.cls_items(60, seed=1, temperature=2.0)})
    site = tmp_path / "site"
    render(board.entries(), site, warn=None)
    md = (site / "leaderboard.md").read_text()
    toks = _md_inline_tokens(md)
    assert not {t.type for t in toks} & {"link_open", "image", "html_inline", "html_block"}
    cells = _shown(toks)
    assert evil in cells and "plain-model" in cells
    assert "](" not in md and "<b>" not in md and "http://" not in md


# ---------------------------------------------------------------- D6: a bad stored entry


def test_out_of_range_date_and_odd_provenance_still_render(board, tmp_path, capsys):
    items = S.cls_items(60, seed=2)
    sid = board.add("d", "date-1e300", {"constrained": items})
    board.sql("UPDATE submissions SET provenance = ? WHERE id = ?",
              json.dumps({"date": 1e300, "config": ["not", "a", "dict"], "git_hash": {"x": [1, 2]},
                          "lm_eval_version": 0.4}), sid)
    sid2 = board.add("p", "prov-list", {"constrained": S.cls_items(60, seed=2, temperature=2.0)})
    board.sql("UPDATE submissions SET provenance = '[1, 2, 3]' WHERE id = ?", sid2)
    site = tmp_path / "site"
    assert main(["render", "--out", str(site), "--db", str(board.db)]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "warning" not in err  # display-only fields are shown as they are
    page = next(p.read_text() for p in (site / "entries").glob("*.html") if "date-1e300" in p.read_text())
    assert "1e+300 (not a valid timestamp)" in page and "{&quot;x&quot;: [1, 2]}" in page
    assert set(model_rows(index_tables(site)["board"])) == {"date-1e300", "prov-list"}


@pytest.mark.parametrize("column, value, message", [
    ("board", '{"ece": "abc", "brier": 0.5, "n_bins": 15}', "board value ece is 'abc', not a number"),
    ("n_docs", "many", "n_docs is 'many', not a count"),
    ("reported", '{"ece_uw15": {"nested": true}}', "reported metrics are not a mapping of names to numbers"),
    ("n_docs", 7, "conf does not hold 7 values"),
    # rows edited in the SQLite file itself: db.load_entries decodes each column defensively
    ("board", "[1, 2]", ""),                                   # valid JSON, not a mapping
    ("board", "{not json", ""),                                # not JSON at all
    ("reported", "[" * 100_000 + "]" * 100_000, ""),           # nested beyond the JSON decoder's recursion limit
    ("conf", b"\x00\x01\x02", ""),                            # a blob that is no float64 vector
])
def test_malformed_stored_submission_left_out_with_warning(board, tmp_path, capsys, column, value, message):
    items = S.cls_items(60, seed=3)
    board.add("ok", "fine-model", {"constrained": items, "prior": S.prior_items(items)})
    bad = board.add("bad", "broken-model", {"constrained": S.cls_items(60, seed=4)})
    board.sql(f"UPDATE entries SET {column} = ? WHERE submission_id = ?", value, bad)
    site = tmp_path / "site"
    assert main(["render", "--out", str(site), "--db", str(board.db)]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = [x for x in err.splitlines() if x.startswith("warning:")]
    assert f"submission #{bad} ('broken-model')" in line and message in line and "left out of the site" in line
    index = (site / "index.html").read_text()
    assert set(model_rows(index_tables(site)["board"])) == {"fine-model"}
    assert f"Not shown: submission #{bad} (&#x27;broken-model&#x27;)" in index
    assert json.loads((site / "board.json").read_text())["not_shown"] == [line.split("warning: ")[1].split(
        "; it is left out")[0]]


# ---------------------------------------------------------------- atomic render


def _subprocess_env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests"),
                                                         os.environ.get("PYTHONPATH", "")])}


def test_failed_render_leaves_previous_site_byte_identical(board, tmp_path):
    items = S.cls_items(N, seed=5)
    board.add("a", "first-model", {"constrained": items, "prior": S.prior_items(items)})
    site = tmp_path / "site"
    assert main(["render", "--out", str(site), "--db", str(board.db)]) == 0
    before = tree(site)
    board.add("b", "second-model", {"constrained": S.cls_items(N, seed=6)})

    # a real write failure midway: the file size limit lets the small files through, not a diagram
    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an over-limit write then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (12_000, 12_000))

    proc = subprocess.run([sys.executable, "-m", "leaderboards.cli", "render", "--out", str(site), "--db",
                           str(board.db)], env=_subprocess_env(), capture_output=True, text=True, timeout=300,
                          preexec_fn=limit_file_size)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "could not write the site" in proc.stderr and "previous site is unchanged" in proc.stderr
    assert tree(site) == before
    assert siblings(site) == []  # the half-built folder was removed


_PAUSED_RENDER = r"""
import io, sys, time
from pathlib import Path
import matplotlib.figure
from leaderboards import db, site

marker = Path(sys.argv[1])
real_savefig = matplotlib.figure.Figure.savefig

def savefig_then_stall(self, fname, **kw):
    # write half of the PNG, then stall: the test kills the process here, mid-diagram
    buf = io.BytesIO()
    real_savefig(self, buf, **kw)
    data = buf.getvalue()
    fname.write(data[: len(data) // 2])
    fname.flush()
    marker.write_text("mid-png")
    time.sleep(600)

matplotlib.figure.Figure.savefig = savefig_then_stall
con = db.connect(sys.argv[2])
site.render(db.load_entries(con), sys.argv[3])
"""


def test_killed_render_leaves_previous_site_and_no_partial_png(board, tmp_path):
    items = S.cls_items(N, seed=5)
    board.add("a", "first-model", {"constrained": items})
    site = tmp_path / "site"
    assert main(["render", "--out", str(site), "--db", str(board.db)]) == 0
    before = tree(site)
    first_pngs = {p.name for p in (site / "entries").glob("*.png")}
    board.add("b", "second-model", {"constrained": S.cls_items(N, seed=6)})

    marker = tmp_path / "paused"
    proc = subprocess.Popen([sys.executable, "-c", _PAUSED_RENDER, str(marker), str(board.db), str(site)],
                            env=_subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, "render never reached the diagram"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    assert tree(site) == before  # the live site did not change at all
    (left,) = siblings(site)  # the killed render's work folder, with its half diagram under a hidden name
    halves = [p for p in (site.parent / left).rglob("*") if p.is_file() and p.suffix == ".tmp"]
    assert halves and not any(valid_png(p) for p in halves)
    assert not any(p.suffix == ".png" and not valid_png(p) for p in (site.parent / left).rglob("*"))

    stats = render(board.entries(), site, warn=None)
    assert siblings(site) == []  # leftovers of the killed render are removed
    pngs = list((site / "entries").glob("*.png"))
    assert first_pngs < {p.name for p in pngs} and all(valid_png(p) for p in pngs)
    assert stats["pngs_drawn"] == len(pngs) - len(first_pngs)  # the first model's diagrams are reused


def test_truncated_cached_png_is_redrawn(board, tmp_path):
    board.add("a", "first-model", {"constrained": S.cls_items(N, seed=5)})
    site = tmp_path / "site"
    render(board.entries(), site, warn=None)
    png = sorted((site / "entries").glob("*.png"))[0]
    good = png.read_bytes()
    png.write_bytes(good[: len(good) // 3])  # what a non-atomic writer killed mid-diagram left behind
    stats = render(board.entries(), site, warn=None)
    assert stats["pngs_drawn"] == 1 and png.read_bytes() == good
    png.write_bytes(b"")
    assert render(board.entries(), site, warn=None)["pngs_drawn"] == 1 and valid_png(png)
    assert render(board.entries(), site, warn=None)["pngs_drawn"] == 0  # a complete one is reused


def test_render_keeps_foreign_files_and_refuses_foreign_folders(board, tmp_path, capsys):
    board.add("a", "first-model", {"constrained": S.cls_items(60, seed=5)})
    site = tmp_path / "snapshot"
    site.mkdir()
    (site / "README.md").write_text("kept")
    (site / "board.sqlite").write_bytes(board.db.read_bytes())
    # issue 25: the old snapshot layout (the database inside the served folder) is refused, both ways
    assert main(["render", "--out", str(site), "--db", str(site / "board.sqlite")]) == 2
    assert main(["render", "--out", str(site), "--db", str(board.db)]) == 2
    assert "database" in capsys.readouterr().err
    (site / "board.sqlite").unlink()
    assert main(["render", "--out", str(site), "--db", str(board.db)]) == 0
    assert (site / "README.md").read_text() == "kept" and (site / "index.html").is_file()

    (site / "notes").mkdir()
    before = tree(site)
    assert main(["render", "--out", str(site), "--db", str(board.db)]) == 2
    err = capsys.readouterr().err
    assert "holds folders a render does not write (notes)" in err and "Traceback" not in err
    assert tree(site) == before
    (tmp_path / "afile").write_text("x")
    with pytest.raises(RenderError, match="is a file, not a folder"):
        render(board.entries(), tmp_path / "afile", warn=None)


# ---------------------------------------------------------------- the server


@pytest.fixture
def served(board, tmp_path):
    board.add("a", "first-model", {"constrained": S.cls_items(60, seed=5)})
    site = tmp_path / "site"
    render(board.entries(), site, warn=None)
    srv = make_server(site, 0, read_timeout=1.0, deadline=3.0)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield site, srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def _get(port, target, method="GET", host="127.0.0.1"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
    c.putheader("Host", f"{host}:{port}")
    c.endheaders()
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body


def test_server_closes_idle_and_trickling_connections(served):
    _, port = served
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        t0 = time.time()
        assert s.recv(1024) == b""  # closed by the server, not by our own timeout
        assert time.time() - t0 < 5
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        t0, closed_at = time.time(), None
        # one byte every 0.5 s: each read returns within the read timeout, but the request never ends
        for ch in b"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X" * 100:
            try:
                s.sendall(bytes([ch]))
            except OSError:
                closed_at = time.time()
                break
            if select.select([s], [], [], 0.5)[0]:  # readable: the server closed (or answered and closed)
                closed_at = time.time()
                break
            if time.time() - t0 > 15:
                break
        assert closed_at is not None and closed_at - t0 < 8  # the connection deadline (3 s here) ended it
    assert _get(port, "/")[0] == 200  # and the server still answers


def test_server_paths_headers_and_no_listing(served, tmp_path, capsys):
    site, port = served
    status, headers, body = _get(port, "/")
    assert status == 200 and b"semcal calibration leaderboard" in body
    assert headers["x-content-type-options"] == "nosniff"
    assert "script-src 'self'" in headers["content-security-policy"]
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["content-type"] == "text/html; charset=utf-8"
    (page,) = (site / "entries").glob("*.html")
    assert _get(port, f"/entries/{page.name}")[0] == 200
    assert _get(port, "/entries/")[0] == 404 and _get(port, "/entries")[0] == 404  # no directory listing
    assert b"<a href" not in _get(port, "/entries/")[2]
    for bad in ("/%00", "/index.html%00.png", "/%ff", "/a%5Cb", "/%0d%0aSet-Cookie:x=1"):
        assert _get(port, bad)[0] == 400, bad
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    (site / "leak.txt").symlink_to(outside)
    os.mkfifo(site / "pipe.html")
    for missing in ("/../secret.txt", "/%2e%2e/secret.txt", "/leak.txt", "/pipe.html", "/nope.html"):
        status, _, body = _get(port, missing)
        assert status == 404 and b"secret" not in body, missing
    assert _get(port, "/", method="POST")[0] == 405 and _get(port, "/", method="PUT")[0] == 405
    assert _get(port, "/", host="evil.example")[0] == 400  # DNS rebinding
    assert _get(port, "/", method="HEAD")[2] == b""
    err = capsys.readouterr().err
    assert "Traceback" not in err


def test_server_sees_a_rerender_and_serve_exit_codes(served, board, capsys):
    site, port = served
    board.add("b", "second-model", {"constrained": S.cls_items(60, seed=9)})
    render(board.entries(), site, warn=None)  # swapped under the running server
    assert b"second-model" in _get(port, "/")[2]

    assert serve(site.parent / "nothing", 0) == 2
    assert "run `semcal-eval board render" in capsys.readouterr().err
    assert serve(site, 70000) == 2
    assert "not a TCP port" in capsys.readouterr().err
    assert serve(site, port) == 2  # the port is taken by the running server
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "Traceback" not in err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_in_a_subprocess_answers_on_loopback(served, sig):
    """The server ends cleanly on SIGINT and SIGTERM even when it inherits SIGINT *ignored*, as a process started
    in the background by a non-interactive shell does (Python then installs no KeyboardInterrupt handler): the
    subprocess here starts with SIGINT ignored on purpose. Whatever happens, the test kills what it started."""
    site, _ = served
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from leaderboards.server import serve; "
                             "sys.exit(serve(sys.argv[1], int(sys.argv[2])))", str(site), str(port)],
                            env=_subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        line = proc.stdout.readline()
        assert f"at http://127.0.0.1:{port}/" in line, (line, proc.stderr.read() if proc.poll() else "")
        assert _get(port, "/")[0] == 200
        assert _get(port, "/%00")[0] == 400
        proc.send_signal(sig)
        assert proc.wait(timeout=20) == 0  # the signal ends it cleanly
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)