"""Static site, Markdown and CSV exports of the board.

Plain HTML + one JS + one CSS file, no CDN, no inline script (the pages carry a Content-Security-Policy
that forbids inline and foreign scripts, as a second line behind escaping). Every untrusted string
(model name, method, provenance) goes through :func:`html.escape` (in Markdown through :func:`md_escape`);
file names never come from them: an entry page is ``entries/<slug>.html`` with
``slug = sha256(content_hash, task)[:16]``.

Rendering is atomic: the whole site is built in a hidden folder next to ``out`` and then swapped in
with one rename, so a render that fails or is killed leaves the previous site exactly as it was. A
stored submission whose data cannot be rendered is left out with a warning naming it (see
:func:`render`); it does not stop the rest of the board from updating.
"""

from __future__ import annotations

import contextlib
import csv
import ctypes
import errno
import hashlib
import html
import io
import json
import math
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from semcal_eval.core import metric_table as T
from semcal_eval.core.records import CLASSIFICATION, CONFIDENCE

from .errors import SubmissionError
from .ranking import RANKED, TIERS, TRUSTED, coverage_of, overall, rank_entries, tier_of
from .recompute import NO_CI_ROLES

_STATIC = Path(__file__).resolve().parent / "static"
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'"
)
#: The board's metric columns: the headline roles of the metric table (the same for every record kind; which
#: metric fills a role depends on the kind, see :data:`semcal_eval.core.metric_table.ROLES`).
COLUMNS: tuple[str, ...] = tuple(T.ROLES[CLASSIFICATION])
_LABEL = {"ece": "ECE", "brier": "Brier", "nll": "NLL", "auroc": "AUROC", "acc": "Acc"}  # display names
#: How each tier is shown, and what it means (index legend and entry pages).
TIER_LABEL = {"verified": "verified", "spot-checked": "spot-checked", "self-reported": "self-reported, unverified"}
TIER_MEANING = {
    "verified": "the board ran the evaluation itself, with pinned settings (board evaluate)",
    "spot-checked": "a seeded random sample of documents was re-scored with the named model and agreed "
                    "within the stated tolerance",
    "self-reported": "every number is recomputed from the submitted logs, but the probabilities themselves "
                     "were not checked against the model",
}
#: Top-level names a render writes into ``out``; anything else found there is the user's and is kept.
OWNED = frozenset({"index.html", "style.css", "board.js", "leaderboard.csv", "leaderboard.md", "board.json",
                   "entries"})
_DB_FILE = re.compile(r"\.(sqlite3?|db)(-journal|-wal|-shm)?$", re.IGNORECASE)
_PNG_SIG = b"\x89PNG\r\n\x1a\n"
_PNG_END = b"\x00\x00\x00\x00IEND\xaeB`\x82"  # the IEND chunk (length 0, type, CRC): a complete PNG ends so


class RenderError(SubmissionError):
    """The site could not be written (bad ``--out``, disk error); the previous site is left untouched.

    A :class:`SubmissionError` so the CLI reports it as one line with exit status 2."""


def _label(col: str) -> str:
    return _LABEL.get(col, col.upper())


def e(s) -> str:
    """HTML-escape anything (quotes too: values also land in attributes)."""
    return html.escape("" if s is None else str(s), quote=True)


def entry_slug(content_hash: str, task: str) -> str:
    """File-name-safe id of a (submission, task) page: hex only, so no path traversal is possible."""
    return hashlib.sha256(f"{content_hash}\x00{task}".encode()).hexdigest()[:16]


def _fmt(v, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:.{digits}f}"


def _num_attr(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "NaN"
    return repr(float(v))


def _ci(b: dict, col: str) -> str:
    lo, hi = b.get(f"{col}_ci_lo"), b.get(f"{col}_ci_hi")
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return ""
    return f"[{lo:.3f}, {hi:.3f}]"


def _split_size(r: dict):
    return r.get("n_split") or r["n_original"]


def _coverage(r: dict) -> str:
    size = _split_size(r)
    if r["limit"] is None:
        return f"{r['n_docs']}" if r["n_docs"] == size else f"{r['n_docs']} of {size}"
    lim = r["limit"]
    if isinstance(lim, float) and lim.is_integer():
        lim = int(lim)  # lm-eval records --limit 40 as 40.0
    return f"{r['n_docs']} of {size} (limit {lim})"


def _doc_set(r: dict) -> str:
    """Short label of a partial row's document set: rows with the same label are ranked together."""
    return r["doc_set_hash"][:8]


def _flags(r: dict) -> list[str]:
    out = []
    if r["degenerate"]:
        out.append(f"degenerate: {r['degenerate']}")
    if r["beats_prior"] is False:
        out.append("not better than class prior on Brier")
    if r["is_reference"]:
        out.append("reference predictor")
    return out


def _page(title: str, body: str, prefix: str = "") -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{_CSP}\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{e(title)}</title><link rel=\"stylesheet\" href=\"{prefix}style.css\"></head>\n"
        f"<body>\n{body}\n<script src=\"{prefix}board.js\"></script></body></html>\n"
    )


def reliability_png(conf: np.ndarray, correct: np.ndarray, n_bins: int, name: str, title: str, path: Path) -> None:
    """Write the reliability diagram of one row (:func:`semcal_eval.plots.reliability_diagram`, which writes
    the file atomically)."""
    from semcal_eval.plots import reliability_diagram

    reliability_diagram(path, {name: (conf, correct)}, n_bins=n_bins, title=title)


def valid_png(path: Path) -> bool:
    """True for a regular (non-symlink) file holding a complete PNG: signature first, IEND chunk last.
    A diagram cut short by a killed render fails this and is drawn again instead of reused."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size < len(_PNG_SIG) + len(_PNG_END) + 25:
            return False
        with open(path, "rb") as fh:
            head = fh.read(len(_PNG_SIG))
            fh.seek(-len(_PNG_END), os.SEEK_END)
            return head == _PNG_SIG and fh.read() == _PNG_END
    except OSError:
        return False


def _tier_cell(r: dict) -> str:
    t = tier_of(r)
    return f"<td class=\"tier tier-{t}\" data-v=\"{t}\">{e(TIER_LABEL[t])}</td>"


def _rank_cell(r: dict, col: str) -> str:
    rk, rv = r.get(f"{col}_rank"), r.get(f"{col}_rank_verified")
    # both rankings travel with the cell; board.js shows the verified-only one when that toggle is on
    return (f"<td class=\"num rank\" data-v=\"{_num_attr(rk)}\" data-all=\"{_num_attr(rk)}\" "
            f"data-verified=\"{_num_attr(rv)}\">{'' if rk is None else rk}</td>")


def _row_cells(r: dict, prefix: str = "", doc_set: bool = False) -> str:
    b = r["board"]
    # a reference predictor uses no model: say so instead of repeating the submitter's model name
    model, method = ("reference predictor", "-") if r["is_reference"] else (r["model_name"], r["method"])
    cells = [
        f"<td data-v=\"{e(r['task'])}\">{e(r['task'])}</td>",
        f"<td data-v=\"{e(model)}\"><a href=\"{prefix}entries/{entry_slug(r['content_hash'], r['task'])}.html\">"
        f"{e(model)}</a></td>",
        _tier_cell(r),
        f"<td data-v=\"{e(method)}\">{e(method)}</td>",
        f"<td data-v=\"{e(r['filter'])}\">{e(r['filter'])}</td>",
        f"<td data-v=\"{r['n_docs']}\">{e(_coverage(r))}</td>",
    ]
    if doc_set:
        cells.append(f"<td data-v=\"{e(_doc_set(r))}\"><code>{e(_doc_set(r))}</code></td>")
    for col in COLUMNS:
        ci = _ci(b, col)
        cells.append(
            f"<td class=\"num\" data-v=\"{_num_attr(b.get(col))}\">{_fmt(b.get(col))}"
            + (f"<span class=\"ci\">{ci}</span>" if ci else "")
            + "</td>"
        )
        if col in RANKED:
            cells.append(_rank_cell(r, col))
    flags = _flags(r)
    cells.append(f"<td data-v=\"{e(' '.join(flags))}\">" + "<br>".join(e(f) for f in flags) + "</td>")
    return "".join(cells)


def _header(doc_set: bool = False) -> str:
    heads = [("task", "Task", "str"), ("model", "Model", "str"), ("tier", "Tier", "str"),
             ("method", "Method", "str"), ("filter", "Scoring", "str"), ("n", "Docs", "num")]
    if doc_set:
        heads.append(("doc_set", "Doc set", "str"))
    for col in COLUMNS:
        heads.append((col, _label(col) + (" (main)" if col == RANKED[0] else ""), "num"))
        if col in RANKED:
            heads.append((f"{col}_rank", f"{_label(col)} rank", "num"))
    heads.append(("flags", "Flags", "str"))
    return "".join(
        f"<th data-key=\"{k}\" data-type=\"{t}\" aria-sort=\"none\"><button type=\"button\">{lab}</button></th>"
        for k, lab, t in heads
    )


def _tr(r: dict, doc_set: bool = False) -> str:
    cls = "ref" if r["is_reference"] else "model"
    if _flags(r) and not r["is_reference"]:
        cls += " flagged"
    return (f"<tr class=\"{cls}\" data-task=\"{e(r['task'])}\" data-tier=\"{tier_of(r)}\">"
            f"{_row_cells(r, doc_set=doc_set)}</tr>")


def _overall_rows(groups: list[dict]) -> str:
    return "\n".join(
        f"<tr><td>{i}</td><td>{e(g['model_name'])}</td><td>{e(', '.join(TIER_LABEL[t] for t in g['tiers']))}</td>"
        f"<td>{e(g['method'])}</td><td>{e(g['filter'])}</td>"
        f"<td class=\"num\">{g['n_tasks']}</td><td class=\"num\">{g['mean_brier_rank']:.2f}</td>"
        f"<td class=\"num\">{g['mean_ece_rank']:.2f}</td>"
        f"<td>{'yes' if g['beats_prior_all'] else 'no'}</td><td>{'yes' if g['degenerate_any'] else ''}</td></tr>"
        for i, g in enumerate(groups, 1)
    )


_OVERALL_HEAD = ("<thead><tr><th>#</th><th>Model</th><th>Tier</th><th>Method</th><th>Scoring</th><th>Tasks</th>"
                 "<th>Mean Brier rank</th><th>Mean ECE rank</th><th>Beats prior on all</th><th>Degenerate</th>"
                 "</tr></thead>")


def _empty(rows: list, text: str) -> str:
    return "" if rows else f"<p class=\"empty\">{e(text)}</p>"


def _index(full: list[dict], partial: list[dict], groups: list[dict], vgroups: list[dict], generated: str,
           skipped: list[str], selfrep: list[dict] = ()) -> str:
    selfrep = list(selfrep)
    tasks = sorted({r["task"] for r in full + partial + selfrep})
    opts = "".join(f"<option value=\"{e(t)}\">{e(t)}</option>" for t in tasks)
    legend = "".join(f"<li><b>{e(TIER_LABEL[t])}</b>: {e(TIER_MEANING[t])}</li>" for t in TIERS)
    warn = ""
    if skipped:
        warn = ("<p class=\"warning\" id=\"skipped\">Not shown: " + e("; ".join(skipped))
                + " (its stored data could not be rendered).</p>")
    body = f"""<header><h1>semcal calibration leaderboard</h1>
<p>Every number is recomputed from the submitted per-document logs. ECE is the main column ({T.ROLE_BINS[CLASSIFICATION]} equal-width
bins for classification, {T.ROLE_BINS[CONFIDENCE]} for QA); Brier and NLL are proper scores, which a constant predictor cannot
game: rows that do not beat the class-prior reference on Brier are flagged, and so is degenerate
confidence (std &asymp; 0, or &ge; 95% of documents in one bin). Brackets are 95% bootstrap CIs.
Entries are ranked only against entries on the same documents: the main table holds runs on the full
evaluation split; runs on a limited set of documents are in the <a href="#partial-runs">partial</a> table.
Generated {e(generated)}. Exports: <a href="leaderboard.csv">CSV</a>, <a href="leaderboard.md">Markdown</a>,
<a href="board.json">JSON</a>.</p>
<ul class="tiers">{legend}</ul>{warn}</header>
<section id="controls">
<label>Search <input id="q" type="search" placeholder="model, method, scoring, task"></label>
<label>Task <select id="task"><option value="">all tasks</option>{opts}</select></label>
<label><input id="show-ref" type="checkbox" checked> reference rows</label>
<label><input id="verified-only" type="checkbox"> verified entries only (ranks among verified)</label>
<label><input id="show-self" type="checkbox"> show self-reported entries (their own table)</label>
<span id="count"></span>
</section>
<h2 id="full-split">Full evaluation split</h2>
<table id="board" class="sortable"><thead><tr>{_header()}</tr></thead>
<tbody>
{chr(10).join(_tr(r) for r in full)}
</tbody></table>{_empty(full, "No entries on a full evaluation split yet.")}
<h2 id="overall">Overall (mean per-task rank, full-split verified and spot-checked entries)</h2>
<p>Grouped by entry identity (model from the run's model_args, revision, method, submitter) and scoring; sorted by
mean Brier rank, then mean ECE rank. Self-reported entries are never ranked here.</p>
<table id="overall-table">{_OVERALL_HEAD}
<tbody>
{_overall_rows(groups)}
</tbody></table>
<table id="overall-verified" hidden>{_OVERALL_HEAD}
<tbody>
{_overall_rows(vgroups)}
</tbody></table>
<h2 id="partial-runs">Partial runs (a limited set of documents; not ranked with full-split runs)</h2>
<p>Ranks here are among runs of the same task on the very same documents (same "Doc set"), never across sets.</p>
<table id="partial" class="sortable"><thead><tr>{_header(doc_set=True)}</tr></thead>
<tbody>
{chr(10).join(_tr(r, doc_set=True) for r in partial)}
</tbody></table>{_empty(partial, "No partial runs.")}
<section id="self-reported-section" hidden>
<h2 id="self-reported">Self-reported entries (unverified; ranked only among themselves)</h2>
<p>Every number is recomputed from the submitted logs, but the probabilities were not re-scored with the model
(or the submitter chose the spot-check seed). They are never ranked with verified or spot-checked entries.</p>
<table id="self" class="sortable"><thead><tr>{_header(doc_set=True)}</tr></thead>
<tbody>
{chr(10).join(_tr(r, doc_set=True) for r in selfrep)}
</tbody></table>{_empty(selfrep, "No self-reported entries.")}
</section>"""
    return _page("semcal calibration leaderboard", body)


def _date_text(v) -> str:
    """An lm-eval ``date`` (a Unix timestamp) as ISO 8601; any value that is not a usable timestamp is shown
    as it was stored (a submitter controls it: ``1e300`` must not stop the render)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        try:
            return datetime.fromtimestamp(v, timezone.utc).isoformat(timespec="seconds")
        except (OverflowError, OSError, ValueError):
            return f"{v!r} (not a valid timestamp)"
    return "" if v is None else str(v)


def _text(v) -> str:
    # provenance values are the submitter's JSON: show scalars as they are, anything else as JSON text
    if v is None or isinstance(v, str):
        return v or ""
    return json.dumps(v, ensure_ascii=False, default=str)


def _prov_html(prov) -> str:
    prov = prov if isinstance(prov, dict) else {"results file": None}
    cfg = prov.get("config") if isinstance(prov.get("config"), dict) else {}
    seeds = {k: cfg.get(k) for k in ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed") if k in cfg}
    items = [
        ("model", cfg.get("model")),
        ("model args", cfg.get("model_args")),
        ("parameters", cfg.get("model_num_parameters")),
        ("dtype", cfg.get("model_dtype")),
        ("lm-eval version", prov.get("lm_eval_version")),
        ("transformers version", prov.get("transformers_version")),
        ("git hash", prov.get("git_hash")),
        ("evaluation date", _date_text(prov.get("date"))),
        ("seeds", seeds),
        ("limit", cfg.get("limit")),
        ("batch size", cfg.get("batch_size")),
        ("device", cfg.get("device")),
        ("results file", prov.get("results_file")),
    ]
    return "<dl class=\"prov\">" + "".join(f"<dt>{e(k)}</dt><dd>{e(_text(v))}</dd>" for k, v in items) + "</dl>"


def _verification(r: dict) -> dict:
    """The stored verification record (JSON text or a dict) as a dict; anything else as {"note": text}."""
    v = r.get("verification")
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return {"note": v}
    if v is None or v == {}:
        return {}
    return v if isinstance(v, dict) else {"note": _text(v)}


def _tier_html(r: dict) -> str:
    t = tier_of(r)
    ver = _verification(r)
    out = (f"<p id=\"tier\" class=\"tier tier-{t}\">Tier: <b>{e(TIER_LABEL[t])}</b>: {e(TIER_MEANING[t])}.</p>")
    if ver:
        out += ("<dl class=\"prov verification\">"
                + "".join(f"<dt>{e(k)}</dt><dd>{e(_text(v))}</dd>" for k, v in ver.items()) + "</dl>")
    return out


def _coverage_html(r: dict) -> str:
    split = f" ({e(r['split'])} split)" if r.get("split") else ""
    if coverage_of(r) == "full":
        return f"<p id=\"coverage\">Documents: the full evaluation split{split}, {r['n_docs']} documents.</p>"
    return (f"<p id=\"coverage\">Documents: <b>partial</b>{split}: {e(_coverage(r))}, document set "
            f"<code>{e(_doc_set(r))}</code>. Ranked only against runs on the same documents, never with "
            f"full-split runs.</p>")


def _entry_page(slug: str, rows: list[dict], pngs: dict[int, str]) -> str:
    r0 = rows[0]
    parts = [
        "<p><a href=\"../index.html\">&larr; leaderboard</a></p>",
        f"<h1>{e(r0['model_name'])} <small>{e(r0['method'])} &middot; {e(r0['task'])}</small></h1>",
        _tier_html(r0),
        _coverage_html(r0),
        f"<p>Task version {e(r0['task_version'])}; documents: {e(_coverage(r0))}; submitted {e(r0['submitted_at'])}; "
        f"content sha256 <code>{e(r0['content_hash'])}</code>.</p>",
        f"<table id=\"entry\"><thead><tr>{_header()}</tr></thead><tbody>",
    ]
    for r in rows:
        parts.append(f"<tr>{_row_cells(r, prefix='../')}</tr>")
    parts.append("</tbody></table><h2>Reliability diagrams</h2><div class=\"diagrams\">")
    for r in rows:
        png = pngs[r["entry_id"]]
        parts.append(
            f"<figure><img class=\"reliability\" src=\"{png}\" alt=\"reliability diagram, {e(r['filter'])}\" "
            f"width=\"360\"><figcaption>{e(r['filter'])}: ECE {_fmt(r['board']['ece'])}, "
            f"{r['board']['n_bins']} bins</figcaption></figure>"
        )
    parts.append("</div><h2>Reported vs recomputed</h2><table><thead><tr><th>Scoring</th><th>Metric</th>"
                 "<th>Reported = recomputed</th></tr></thead><tbody>")
    for r in rows:
        for m, v in sorted(r["reported"].items()):
            parts.append(f"<tr><td>{e(r['filter'])}</td><td>{e(m)}</td><td class=\"num\">{_fmt(v, 6)}</td></tr>")
    parts.append("</tbody></table><h2>Provenance</h2>" + _prov_html(r0["provenance"]))
    return _page(f"{r0['model_name']} – {r0['task']}", "\n".join(parts), prefix="../")


def _csv_cell(v) -> str:
    s = "" if v is None else str(v)
    # Spreadsheet formula injection: a cell starting with = + - @ (or tab/CR) is quoted as text.
    if s and s[0] in "=+-@\t\r" and not _is_number(s):
        return "'" + s
    return s


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def _board_fields(col: str) -> list[str]:
    """A column's stored values: the metric and, for roles with one, its CI bounds."""
    return [col] if col in NO_CI_ROLES else [col, f"{col}_ci_lo", f"{col}_ci_hi"]


_BOARD_FIELDS = [k for col in COLUMNS for k in _board_fields(col)]
_RANK_FIELDS = [f"{col}_rank{s}" for col in RANKED for s in ("", "_verified")]
# per column: value, CI bounds, rank (ranked columns)
_EXPORT_FIELDS = ["task", "model_name", "method", "tier", "filter", "is_reference", "coverage", "split", "n_docs",
                  "n_split", "n_original", "limit", "doc_set_hash",
                  *[k for col in COLUMNS for k in _board_fields(col) + ([f"{col}_rank"] if col in RANKED else [])],
                  *[f"{col}_rank_verified" for col in RANKED],
                  "beats_prior", "prior_brier", "degenerate", "content_hash"]


def _flat(r: dict) -> dict:
    b = r["board"]
    d = {k: r.get(k) for k in ("task", "model_name", "method", "filter", "is_reference", "split", "n_docs",
                               "n_split", "n_original", "limit", "doc_set_hash", *_RANK_FIELDS, "beats_prior",
                               "prior_brier", "degenerate", "content_hash")}
    d["tier"], d["coverage"] = tier_of(r), coverage_of(r)
    for k in _BOARD_FIELDS:
        d[k] = b.get(k)
    return d


# Markdown syntax characters, backslash-escaped (CommonMark: any ASCII punctuation may be; GFM tables honour
# "\|"): a renderer shows the character and never parses it as syntax, and the raw file stays readable.
_MD_SYNTAX = frozenset("\\`*_{}[]()!~#")
# written as references instead: HTML's < > & " ' (Markdown passes raw HTML through) and the cell separator |
# (GFM splits cells before it decodes references, so &#124; never ends a cell)
_MD_REFS = {"<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;", "'": "&#x27;", "|": "&#124;"}
# GitHub-flavoured Markdown also links bare URLs, www. names and e-mail addresses; breaking the
# "://", "www." and "@" sequences into separate text nodes stops that.
_MD_AUTOLINK = re.compile(r":(?=//)|(?<=www)\.|@", re.IGNORECASE)


def md_escape(s) -> str:
    """Text for one Markdown table cell (or heading) that renders as exactly the text, as no markup.

    An underscore between two letters or digits is left as is (CommonMark: an intraword ``_`` opens and
    closes no emphasis), so ``civil_comments_ambiguous_semsoft`` reads as itself; every other Markdown syntax
    character is backslash-escaped, ``< > & " ' |`` become character references (raw HTML, entities and cell
    separators stay text), autolink triggers (``://``, ``www.``, ``@``) become character references, line breaks spaces."""
    t = "" if s is None else str(s)
    out = []
    for i, c in enumerate(t):
        if c == "_" and 0 < i < len(t) - 1 and t[i - 1].isalnum() and t[i + 1].isalnum():
            out.append(c)
        elif c in _MD_SYNTAX:
            out.append("\\" + c)
        elif c in "\r\n":
            out.append(" ")
        elif c in _MD_REFS:
            out.append(_MD_REFS[c])
        else:
            out.append(c)
    return _MD_AUTOLINK.sub(lambda m: f"&#{ord(m.group())};", "".join(out))


_md_cell = md_escape


def _md_table(rows: list[dict], doc_set: bool) -> list[str]:
    heads = ["model", "method", "scoring", "tier", "docs"] + (["doc set"] if doc_set else [])
    for col in COLUMNS:
        heads += [_label(col)] + ([f"{_label(col)} rank"] if col in RANKED else [])
    heads.append("flags")
    out = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for r in rows:
        b = r["board"]
        model, method = ("reference predictor", "-") if r["is_reference"] else (r["model_name"], r["method"])
        cells = [md_escape(model), md_escape(method), md_escape(r["filter"]), md_escape(TIER_LABEL[tier_of(r)]),
                 md_escape(_coverage(r))] + ([md_escape(_doc_set(r))] if doc_set else [])
        for col in COLUMNS:
            cells.append(_fmt(b.get(col)))
            if col in RANKED:
                cells.append(str(r.get(f"{col}_rank") or ""))
        cells.append(md_escape("; ".join(_flags(r))))
        out.append("| " + " | ".join(cells) + " |")
    return out + [""]


def _md_overall(title: str, groups: list[dict]) -> list[str]:
    out = [f"## {title}", "", "| # | model | tier | method | scoring | tasks | mean Brier rank | mean ECE rank |",
           "|---|---|---|---|---|---|---|---|"]
    for i, g in enumerate(groups, 1):
        tiers = ", ".join(TIER_LABEL[t] for t in g["tiers"])
        out.append(f"| {i} | {md_escape(g['model_name'])} | {md_escape(tiers)} | {md_escape(g['method'])} | "
                   f"{md_escape(g['filter'])} | {g['n_tasks']} | {g['mean_brier_rank']:.2f} | "
                   f"{g['mean_ece_rank']:.2f} |")
    return out + [""]


def _markdown(full: list[dict], partial: list[dict], groups: list[dict], vgroups: list[dict],
              selfrep: list[dict] = ()) -> str:
    out = ["# semcal calibration leaderboard", "",
           f"Recomputed from per-document logs. ECE main ({T.ROLE_BINS[CLASSIFICATION]} bins classification, "
           f"{T.ROLE_BINS[CONFIDENCE]} QA); rank by ECE and by Brier, only among runs on the same documents. "
           "Tiers: " + "; ".join(f"{TIER_LABEL[t]}: {TIER_MEANING[t]}" for t in TIERS) + ".", ""]
    for task in sorted({r["task"] for r in full}):
        out += [f"## {md_escape(task)}: full split", ""] + _md_table([r for r in full if r["task"] == task], False)
    out += _md_overall("Overall (full-split verified and spot-checked entries)", groups)
    out += _md_overall("Overall, verified entries only", vgroups)
    for task in sorted({r["task"] for r in partial}):
        out += [f"## {md_escape(task)}: partial runs (not ranked with full-split runs)", ""]
        out += _md_table([r for r in partial if r["task"] == task], True)
    if selfrep:
        out += ["## Self-reported entries (unverified; ranked only among themselves, never with the tables above)",
                ""] + _md_table(list(selfrep), True)
    return "\n".join(out)


def _jsonable(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def _export_row(r: dict) -> dict:
    return _jsonable({**_flat(r), "task_version": r["task_version"], "kind": r["kind"], "board": r["board"],
                      "reported": r["reported"], "provenance": r["provenance"], "verification": _verification(r),
                      "page": f"entries/{entry_slug(r['content_hash'], r['task'])}.html"})


# ---------------------------------------------------------------- checking stored entries


class _BadEntry(ValueError):
    pass


def _is_num(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _check_entry(r: dict) -> None:
    """Raise :class:`_BadEntry` naming the first field of a stored entry that the site cannot show."""
    for k in ("task", "model_name", "method", "filter", "doc_set_hash", "submitted_at", "kind", "degenerate"):
        if not isinstance(r.get(k), str):
            raise _BadEntry(f"{k} is {type(r.get(k)).__name__}, not text")
    if not isinstance(r.get("content_hash"), str) or not re.fullmatch(r"[0-9a-f]{16,128}", r["content_hash"]):
        raise _BadEntry("content_hash is not a hex digest")
    for k in ("entry_id", "submission_id", "n_docs", "n_original"):
        if not isinstance(r.get(k), int) or isinstance(r.get(k), bool) or r[k] < 0:
            raise _BadEntry(f"{k} is {r.get(k)!r:.40}, not a count")
    if r.get("n_split") is not None and (not isinstance(r["n_split"], int) or isinstance(r["n_split"], bool)):
        raise _BadEntry(f"n_split is {r['n_split']!r:.40}, not a count")
    if not isinstance(r.get("is_reference"), bool):
        raise _BadEntry("is_reference is not true/false")
    if r.get("split") is not None and not isinstance(r["split"], str):
        raise _BadEntry("split is not text")
    lim = r.get("limit")
    if lim is not None and not (_is_num(lim) and math.isfinite(lim)):
        raise _BadEntry(f"limit is {lim!r:.40}, not a finite number")
    if not isinstance(r.get("task_version"), (str, int, float)):
        raise _BadEntry("task_version is not text")
    b = r.get("board")
    if not isinstance(b, dict):
        raise _BadEntry("board metrics are not a mapping")
    for k in _BOARD_FIELDS:
        if k in b and b[k] is not None and not _is_num(b[k]):
            raise _BadEntry(f"board value {k} is {b[k]!r:.40}, not a number")
        if k in RANKED and not _is_num(b.get(k)):
            raise _BadEntry(f"board value {k} is missing")
    if not isinstance(b.get("n_bins"), int) or isinstance(b["n_bins"], bool) or not 1 <= b["n_bins"] <= 10_000:
        raise _BadEntry(f"board n_bins is {b.get('n_bins')!r:.40}, not a bin count")
    rep = r.get("reported")
    if not isinstance(rep, dict) or not all(isinstance(k, str) and _is_num(v) for k, v in rep.items()):
        raise _BadEntry("reported metrics are not a mapping of names to numbers")
    for k in ("conf", "correct"):
        a = r.get(k)
        if not isinstance(a, np.ndarray) or a.ndim != 1 or a.dtype.kind != "f":
            raise _BadEntry(f"{k} is not a float array")
        if len(a) != r["n_docs"] or not (np.isfinite(a).all() and (a >= 0).all() and (a <= 1).all()):
            raise _BadEntry(f"{k} does not hold {r['n_docs']} values in [0, 1]")


def _usable(entries: list[dict]) -> tuple[list[dict], list[str]]:
    """Split the stored entries into those of renderable submissions and one message per left-out submission.

    A submission is left out whole (not row by row) so the board never shows a part of one run. Each of its
    rows is checked field by field, then rendered once on its own, which catches what the checks did not
    foresee (e.g. provenance nested too deeply to serialise)."""
    bad: dict[object, str] = {}
    for r in entries:
        sid = r.get("submission_id") if isinstance(r, dict) else None
        if sid in bad:
            continue
        try:
            if not isinstance(r, dict):
                raise _BadEntry(f"entry is {type(r).__name__}, not a mapping")
            _check_entry(r)
            trial = {**r, "beats_prior": None, "prior_brier": None}
            _row_cells(trial)
            _markdown([trial], [], [], [])
            _entry_page("0" * 16, [trial], {r["entry_id"]: "x.png"})
            json.dumps(_export_row(trial), allow_nan=False, ensure_ascii=False)
        except Exception as exc:  # noqa: BLE001 - any failure of a stored row leaves out its submission
            msg = str(exc) if isinstance(exc, _BadEntry) else f"{type(exc).__name__}: {str(exc)[:120]}"
            name = r.get("model_name") if isinstance(r, dict) else None
            where = f"{r.get('task')}/{r.get('filter')}" if isinstance(r, dict) else "?"
            bad[sid] = f"submission #{sid} ({str(name)[:60]!r}), {where}: {msg}"
    good = [r for r in entries if isinstance(r, dict) and r.get("submission_id") not in bad]
    return good, list(bad.values())


# ---------------------------------------------------------------- building and swapping the folder


def split_views(rows: list[dict]) -> tuple[list[dict], list[dict], list[dict]]:
    """(full, partial, self-reported) rows of ranked entries: the default tables hold verified and spot-checked
    model rows (and the board's reference rows); self-reported model rows, whatever their coverage, are in a
    table of their own, ranked only among themselves and shown only by the "self-reported" toggle."""
    trusted = [r for r in rows if r["is_reference"] or tier_of(r) in TRUSTED]
    selfrep = [r for r in rows if not r["is_reference"] and tier_of(r) not in TRUSTED]
    return ([r for r in trusted if r["coverage"] == "full"], [r for r in trusted if r["coverage"] != "full"],
            selfrep)



def _build(entries: list[dict], out: Path, old: Path | None, generated: str, skipped: list[str]) -> dict:
    """Write the whole site into the (new, empty) folder ``out``; diagrams of ``old`` that are still valid
    PNGs are reused."""
    (out / "entries").mkdir(parents=True, exist_ok=True)
    for name in ("style.css", "board.js"):
        shutil.copyfile(_STATIC / name, out / name)
    rows = rank_entries(entries)
    full, partial, selfrep = split_views(rows)
    groups, vgroups = overall(rows), overall(rows, verified_only=True)
    short_skipped = [m.split(":", 1)[0] for m in skipped]
    (out / "index.html").write_text(_index(full, partial, groups, vgroups, generated, short_skipped, selfrep),
                                    encoding="utf-8")

    pages: dict[str, list[dict]] = {}
    for r in rows:
        pages.setdefault(entry_slug(r["content_hash"], r["task"]), []).append(r)
    # reference rows deduplicated away from the index still belong on their own submission's page
    shown = {r["entry_id"] for r in rows}
    for r in entries:
        if r["is_reference"] and r["entry_id"] not in shown:
            pages.setdefault(entry_slug(r["content_hash"], r["task"]), []).append(r)
    n_png = 0
    for slug, prow in pages.items():
        prow.sort(key=lambda r: (r["is_reference"], r["filter"]))
        pngs = {}
        for i, r in enumerate(prow):
            name = f"{slug}-{i}.png"
            target = out / "entries" / name
            cached = old / "entries" / name if old is not None else None
            if cached is not None and valid_png(cached):
                _link_or_copy(cached, target)
            else:
                reliability_png(r["conf"], r["correct"], r["board"]["n_bins"], r["filter"],
                                f"{r['task']} / {r['filter']}", target)
                n_png += 1
            pngs[r["entry_id"]] = name
        (out / "entries" / f"{slug}.html").write_text(_entry_page(slug, prow, pngs), encoding="utf-8")

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=_EXPORT_FIELDS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _csv_cell(v) for k, v in _flat(r).items()})
    (out / "leaderboard.csv").write_text(buf.getvalue(), encoding="utf-8")
    (out / "leaderboard.md").write_text(_markdown(full, partial, groups, vgroups, selfrep), encoding="utf-8")
    export = {"generated": generated, "entries": [_export_row(r) for r in rows], "overall": groups,
              "overall_verified": vgroups, "not_shown": skipped}
    (out / "board.json").write_text(json.dumps(export, indent=1, sort_keys=True, ensure_ascii=False),
                                    encoding="utf-8")
    return {"rows": len(rows), "full": len(full), "partial": len(partial), "pages": len(pages),
            "pngs_drawn": n_png, "skipped": skipped}


def _link_or_copy(src: Path, dst: Path) -> None:
    # a hard link shares the bytes without copying; the old name goes away with the old site
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _foreign(out: Path) -> list[Path]:
    """Top-level entries of ``out`` that a render did not write (kept across renders, e.g. a README)."""
    if not out.is_dir():
        return []
    return sorted(p for p in out.iterdir() if p.name not in OWNED)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux ``renameat2(RENAME_EXCHANGE)``); False where not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False  # e.g. a file system without exchange support: fall back to two renames
    raise OSError(err, os.strerror(err), str(b))


def _swap_in(new: Path, out: Path) -> None:
    """Make ``new`` the folder at ``out``. With an existing ``out`` the two are exchanged in one step; where
    that is not possible the old one is moved aside first (a kill between the two renames leaves it under
    ``.<name>.old-*``, which the next render moves back)."""
    if not out.exists():
        os.rename(new, out)
        return
    if _exchange(new, out):
        shutil.rmtree(new, ignore_errors=True)  # ``new`` now holds the previous site
        return
    aside = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-{os.getpid()}-", dir=out.parent))
    os.rmdir(aside)
    os.rename(out, aside)
    os.rename(new, out)
    shutil.rmtree(aside, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _cleanup(out: Path) -> None:
    """Remove what killed renders left next to ``out``, and restore a site moved aside by an interrupted swap."""
    pat = re.compile(re.escape(f".{out.name}.") + r"(render|old)-(\d+)-")
    leftovers = [p for p in out.parent.iterdir() if pat.match(p.name)]
    for p in leftovers:
        kind, pid = pat.match(p.name).groups()
        if _pid_alive(int(pid)) and int(pid) != os.getpid():
            continue  # another render is still working there
        if kind == "old" and not out.exists():
            os.rename(p, out)
        else:
            shutil.rmtree(p, ignore_errors=True)


@contextlib.contextmanager
def _lock(out: Path):
    """One render per parent folder at a time (an flock on the parent folder itself, so no lock file is
    left behind), so two renders never swap the same folder at once."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, renders are still atomic one by one
        yield
        return
    fd = os.open(out.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _warn(msg: str) -> None:
    print(f"warning: {msg}", file=sys.stderr, flush=True)


def render(entries: list[dict], out: str | Path, generated: str | None = None, *,
           warn: Callable[[str], None] | None = _warn) -> dict:
    """Write the site into ``out``: index.html, entries/<slug>.html + PNGs, leaderboard.csv/.md, board.json.

    Atomic: everything is written into a hidden folder next to ``out`` (``.<name>.render-<pid>-*``), then
    swapped in; files in ``out`` that a render does not write (a README, the database) are carried over.
    A failure or a kill at any point leaves the previous site byte for byte; leftovers are removed by the
    next render. PNGs are named by entry content (slug + filter index) and reused from the previous site when
    they are complete PNGs, so re-rendering a grown board only draws the new diagrams.

    A stored submission whose rows cannot be shown (wrong types, values that are not numbers) is left out
    whole, with one ``warn`` line naming it and the field, and a note on the index page: one bad row must
    not freeze the board for everyone else (issue 12, D6). Raises :class:`RenderError` (one line; exit 2 in
    the CLI) when ``out`` cannot hold a site or writing fails. Returns counts, and ``skipped``: the messages.
    """
    out = Path(out).absolute()
    if out.is_symlink():
        out = out.resolve()  # swap the real folder, keep the link
    if out.exists() and not out.is_dir():
        raise RenderError(f"--out {out} is a file, not a folder; pass a folder for the site")
    dirs = [p.name for p in _foreign(out) if p.is_dir() and not p.is_symlink()]
    if dirs:
        raise RenderError(f"--out {out} holds folders a render does not write ({', '.join(dirs[:3])}); "
                          "render into an empty or new folder")
    dbs = [p.name for p in _foreign(out) if _DB_FILE.search(p.name)]
    if dbs:
        # the database holds the spot-check secret: it must never sit where the site is served from
        raise RenderError(f"--out {out} holds a database file ({', '.join(dbs[:3])}); move it out of the site "
                          "folder (the board database must never be published) and render again")
    good, skipped = _usable(list(entries))
    for msg in skipped:
        if warn is not None:
            warn(f"{msg}; it is left out of the site (fix or remove it in the board database)")
    generated = generated or datetime.now(timezone.utc).isoformat(timespec="seconds")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with _lock(out):
            _cleanup(out)
            tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.render-{os.getpid()}-", dir=out.parent))
            try:
                os.chmod(tmp, 0o755)  # mkdtemp makes it private; the site is meant to be read by others
                stats = _build(good, tmp, out if out.is_dir() else None, generated, skipped)
                for p in _foreign(out):
                    if p.is_symlink():
                        os.symlink(os.readlink(p), tmp / p.name)
                    else:
                        _link_or_copy(p, tmp / p.name)
                _swap_in(tmp, out)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
    except OSError as exc:
        raise RenderError(f"could not write the site to {out}: {exc.strerror or exc}; the previous site is "
                          "unchanged") from exc
    return stats
