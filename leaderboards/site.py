"""Static site, Markdown and CSV exports of the board.

Plain HTML + one JS + one CSS file, no CDN, no inline script (the pages carry a Content-Security-Policy
that forbids inline and foreign scripts, as a second line behind escaping). Every untrusted string
(model name, method, provenance) goes through :func:`html.escape`; file names never come from them:
an entry page is ``entries/<slug>.html`` with ``slug = sha256(content_hash, task)[:16]``.
"""

from __future__ import annotations

import csv
import hashlib
import html
import io
import json
import math
import shutil
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from semcal_eval.core import metric_table as T
from semcal_eval.core.records import CLASSIFICATION, CONFIDENCE

from .ranking import RANKED, overall, rank_entries
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


def _coverage(r: dict) -> str:
    if r["limit"] is None:
        return f"{r['n_docs']}"
    lim = r["limit"]
    if isinstance(lim, float) and lim.is_integer():
        lim = int(lim)  # lm-eval records --limit 40 as 40.0
    return f"{r['n_docs']} of {r['n_original']} (limit {lim})"


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
    """Write the reliability diagram of one row (:func:`semcal_eval.plots.reliability_diagram`)."""
    from semcal_eval.plots import reliability_diagram

    reliability_diagram(path, {name: (conf, correct)}, n_bins=n_bins, title=title)


def _row_cells(r: dict, prefix: str = "") -> str:
    b = r["board"]
    # a reference predictor uses no model: say so instead of repeating the submitter's model name
    model, method = ("reference predictor", "-") if r["is_reference"] else (r["model_name"], r["method"])
    cells = [
        f"<td data-v=\"{e(r['task'])}\">{e(r['task'])}</td>",
        f"<td data-v=\"{e(model)}\"><a href=\"{prefix}entries/{entry_slug(r['content_hash'], r['task'])}.html\">"
        f"{e(model)}</a></td>",
        f"<td data-v=\"{e(method)}\">{e(method)}</td>",
        f"<td data-v=\"{e(r['filter'])}\">{e(r['filter'])}</td>",
        f"<td data-v=\"{r['n_docs']}\">{e(_coverage(r))}</td>",
    ]
    for col in COLUMNS:
        ci = _ci(b, col)
        cells.append(
            f"<td class=\"num\" data-v=\"{_num_attr(b.get(col))}\">{_fmt(b.get(col))}"
            + (f"<span class=\"ci\">{ci}</span>" if ci else "")
            + "</td>"
        )
        if col in RANKED:
            rk = r.get(f"{col}_rank")
            cells.append(f"<td class=\"num\" data-v=\"{_num_attr(rk)}\">{'' if rk is None else rk}</td>")
    flags = _flags(r)
    cells.append(f"<td data-v=\"{e(' '.join(flags))}\">" + "<br>".join(e(f) for f in flags) + "</td>")
    return "".join(cells)


def _header() -> str:
    heads = [("task", "Task", "str"), ("model", "Model", "str"), ("method", "Method", "str"),
             ("filter", "Scoring", "str"), ("n", "Docs", "num")]
    for col in COLUMNS:
        heads.append((col, _label(col) + (" (main)" if col == RANKED[0] else ""), "num"))
        if col in RANKED:
            heads.append((f"{col}_rank", f"{_label(col)} rank", "num"))
    heads.append(("flags", "Flags", "str"))
    return "".join(
        f"<th data-key=\"{k}\" data-type=\"{t}\" aria-sort=\"none\"><button type=\"button\">{lab}</button></th>"
        for k, lab, t in heads
    )


def _index(rows: list[dict], groups: list[dict], generated: str) -> str:
    tasks = sorted({r["task"] for r in rows})
    opts = "".join(f"<option value=\"{e(t)}\">{e(t)}</option>" for t in tasks)
    trs = "\n".join(
        f"<tr class=\"{'ref' if r['is_reference'] else 'model'}{' flagged' if _flags(r) and not r['is_reference'] else ''}\""
        f" data-task=\"{e(r['task'])}\">{_row_cells(r)}</tr>"
        for r in rows
    )
    ov = "\n".join(
        f"<tr><td>{i}</td><td>{e(g['model_name'])}</td><td>{e(g['method'])}</td><td>{e(g['filter'])}</td>"
        f"<td class=\"num\">{g['n_tasks']}</td><td class=\"num\">{g['mean_brier_rank']:.2f}</td>"
        f"<td class=\"num\">{g['mean_ece_rank']:.2f}</td>"
        f"<td>{'yes' if g['beats_prior_all'] else 'no'}</td><td>{'yes' if g['degenerate_any'] else ''}</td></tr>"
        for i, g in enumerate(groups, 1)
    )
    body = f"""<header><h1>semcal calibration leaderboard</h1>
<p>Every number is recomputed from the submitted per-document logs. ECE is the main column ({T.ROLE_BINS[CLASSIFICATION]} equal-width
bins for classification, {T.ROLE_BINS[CONFIDENCE]} for QA); Brier and NLL are proper scores, which a constant predictor cannot
game: rows that do not beat the class-prior reference on Brier are flagged, and so is degenerate
confidence (std &asymp; 0, or &ge; 95% of documents in one bin). Brackets are 95% bootstrap CIs.
Generated {e(generated)}. Exports: <a href="leaderboard.csv">CSV</a>, <a href="leaderboard.md">Markdown</a>,
<a href="board.json">JSON</a>.</p></header>
<section id="controls">
<label>Search <input id="q" type="search" placeholder="model, method, scoring, task"></label>
<label>Task <select id="task"><option value="">all tasks</option>{opts}</select></label>
<label><input id="show-ref" type="checkbox" checked> reference rows</label>
<span id="count"></span>
</section>
<table id="board" class="sortable"><thead><tr>{_header()}</tr></thead>
<tbody>
{trs}
</tbody></table>
<h2 id="overall">Overall (mean per-task rank)</h2>
<p>Grouped by model, method and scoring; sorted by mean Brier rank, then mean ECE rank.</p>
<table id="overall-table"><thead><tr><th>#</th><th>Model</th><th>Method</th><th>Scoring</th><th>Tasks</th>
<th>Mean Brier rank</th><th>Mean ECE rank</th><th>Beats prior on all</th><th>Degenerate</th></tr></thead>
<tbody>
{ov}
</tbody></table>"""
    return _page("semcal calibration leaderboard", body)


def _prov_html(prov: dict) -> str:
    cfg = prov.get("config") or {}
    date = prov.get("date")
    if isinstance(date, (int, float)):
        date = datetime.fromtimestamp(date, timezone.utc).isoformat(timespec="seconds")
    seeds = {k: cfg.get(k) for k in ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed") if k in cfg}
    items = [
        ("model", cfg.get("model")),
        ("model args", json.dumps(cfg.get("model_args"), ensure_ascii=False) if not isinstance(cfg.get("model_args"), str) else cfg.get("model_args")),
        ("parameters", cfg.get("model_num_parameters")),
        ("dtype", cfg.get("model_dtype")),
        ("lm-eval version", prov.get("lm_eval_version")),
        ("transformers version", prov.get("transformers_version")),
        ("git hash", prov.get("git_hash")),
        ("evaluation date", date),
        ("seeds", json.dumps(seeds)),
        ("limit", cfg.get("limit")),
        ("batch size", cfg.get("batch_size")),
        ("device", cfg.get("device")),
        ("results file", prov.get("results_file")),
    ]
    return "<dl class=\"prov\">" + "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in items) + "</dl>"


def _entry_page(slug: str, rows: list[dict], pngs: dict[int, str]) -> str:
    r0 = rows[0]
    parts = [
        "<p><a href=\"../index.html\">&larr; leaderboard</a></p>",
        f"<h1>{e(r0['model_name'])} <small>{e(r0['method'])} &middot; {e(r0['task'])}</small></h1>",
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
_RANK_FIELDS = [f"{col}_rank" for col in RANKED]
# per column: value, CI bounds, rank (ranked columns)
_EXPORT_FIELDS = ["task", "model_name", "method", "filter", "is_reference", "n_docs", "n_original", "limit",
                  *[k for col in COLUMNS for k in _board_fields(col) + ([f"{col}_rank"] if col in RANKED else [])],
                  "beats_prior", "prior_brier", "degenerate", "content_hash"]


def _flat(r: dict) -> dict:
    b = r["board"]
    d = {k: r.get(k) for k in ("task", "model_name", "method", "filter", "is_reference", "n_docs", "n_original",
                               "limit", *_RANK_FIELDS, "beats_prior", "prior_brier", "degenerate", "content_hash")}
    for k in _BOARD_FIELDS:
        d[k] = b.get(k)
    return d


def _md_cell(s) -> str:
    # Markdown renderers pass raw HTML through, so escape it, and the pipe that would split the cell.
    return e(s).replace("|", "&#124;").replace("\n", " ").replace("`", "&#96;").replace("*", "&#42;")


def _markdown(rows: list[dict], groups: list[dict]) -> str:
    heads = ["model", "method", "scoring", "docs"]
    for col in COLUMNS:
        heads += [_label(col)] + ([f"{_label(col)} rank"] if col in RANKED else [])
    heads.append("flags")
    out = ["# semcal calibration leaderboard", "",
           f"Recomputed from per-document logs. ECE main ({T.ROLE_BINS[CLASSIFICATION]} bins classification, "
           f"{T.ROLE_BINS[CONFIDENCE]} QA); rank by ECE and by Brier.", ""]
    for task in sorted({r["task"] for r in rows}):
        out += [f"## {_md_cell(task)}", "", "| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
        for r in (x for x in rows if x["task"] == task):
            b = r["board"]
            model, method = ("reference predictor", "-") if r["is_reference"] else (r["model_name"], r["method"])
            cells = [_md_cell(model), _md_cell(method), _md_cell(r["filter"]), _md_cell(_coverage(r))]
            for col in COLUMNS:
                cells.append(_fmt(b.get(col)))
                if col in RANKED:
                    cells.append(str(r.get(f"{col}_rank") or ""))
            cells.append(_md_cell("; ".join(_flags(r))))
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    out += ["## Overall", "", "| # | model | method | scoring | tasks | mean Brier rank | mean ECE rank |",
            "|---|---|---|---|---|---|---|"]
    for i, g in enumerate(groups, 1):
        out.append(f"| {i} | {_md_cell(g['model_name'])} | {_md_cell(g['method'])} | {_md_cell(g['filter'])} | "
                   f"{g['n_tasks']} | {g['mean_brier_rank']:.2f} | {g['mean_ece_rank']:.2f} |")
    return "\n".join(out) + "\n"


def _jsonable(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def render(entries: list[dict], out: str | Path, generated: str | None = None) -> dict:
    """Write the site into ``out``: index.html, entries/<slug>.html + PNGs, leaderboard.csv/.md, board.json.

    PNGs are named by entry content (slug + filter index) and reused when already present, so
    re-rendering a grown board only draws the new diagrams. Returns counts for the caller.
    """
    out = Path(out)
    (out / "entries").mkdir(parents=True, exist_ok=True)
    for name in ("style.css", "board.js"):
        shutil.copyfile(_STATIC / name, out / name)
    generated = generated or datetime.now(timezone.utc).isoformat(timespec="seconds")
    rows = rank_entries(entries)
    groups = overall(rows)
    (out / "index.html").write_text(_index(rows, groups, generated), encoding="utf-8")

    pages: dict[str, list[dict]] = {}
    for r in rows:
        pages.setdefault(entry_slug(r["content_hash"], r["task"]), []).append(r)
    # reference rows deduplicated away from the index still belong on their own submission's page
    shown = {r["entry_id"] for r in rows}
    for r in entries:
        slug = entry_slug(r["content_hash"], r["task"])
        if r["is_reference"] and r["entry_id"] not in shown:
            r.setdefault("ece_rank", None)
            r.setdefault("brier_rank", None)
            r.setdefault("beats_prior", None)
            pages.setdefault(slug, []).append(r)
    n_png = 0
    for slug, prow in pages.items():
        prow.sort(key=lambda r: (r["is_reference"], r["filter"]))
        pngs = {}
        for i, r in enumerate(prow):
            name = f"{slug}-{i}.png"
            if not (out / "entries" / name).exists():
                reliability_png(r["conf"], r["correct"], r["board"]["n_bins"], r["filter"],
                                f"{r['task']} / {r['filter']}", out / "entries" / name)
                n_png += 1
            pngs[r["entry_id"]] = name
        (out / "entries" / f"{slug}.html").write_text(_entry_page(slug, prow, pngs), encoding="utf-8")

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=_EXPORT_FIELDS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _csv_cell(v) for k, v in _flat(r).items()})
    (out / "leaderboard.csv").write_text(buf.getvalue(), encoding="utf-8")
    (out / "leaderboard.md").write_text(_markdown(rows, groups), encoding="utf-8")
    export = {
        "generated": generated,
        "entries": [_jsonable({**_flat(r), "task_version": r["task_version"], "kind": r["kind"], "board": r["board"],
                               "reported": r["reported"], "provenance": r["provenance"],
                               "page": f"entries/{entry_slug(r['content_hash'], r['task'])}.html"}) for r in rows],
        "overall": groups,
    }
    (out / "board.json").write_text(json.dumps(export, indent=1, sort_keys=True, ensure_ascii=False), encoding="utf-8")
    return {"rows": len(rows), "pages": len(pages), "pngs_drawn": n_png}
