"""The site's HTML: the index page (full, overall, partial and self-reported tables) and one page per
(submission, task). Every untrusted string goes through :func:`e` (:func:`html.escape`); the pages carry a
Content-Security-Policy that forbids inline and foreign scripts, as a second line behind escaping."""

from __future__ import annotations

import html
import math
from datetime import datetime, timezone

from semcal_eval.core import metric_table as T
from semcal_eval.core.records import CLASSIFICATION, CONFIDENCE

from ..ranking import RANKED, TIERS, coverage_of, tier_of
from .rows import (COLUMNS, TIER_LABEL, TIER_MEANING, _ci, _coverage, _doc_set, _flags, _fmt, _label, _text,
                   _verification, entry_slug, public)

_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'"
)


def e(s) -> str:
    """HTML-escape anything (quotes too: values also land in attributes)."""
    return html.escape("" if s is None else str(s), quote=True)


def _num_attr(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "NaN"
    return repr(float(v))


def _page(title: str, body: str, prefix: str = "") -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{_CSP}\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{e(title)}</title><link rel=\"stylesheet\" href=\"{prefix}style.css\"></head>\n"
        f"<body>\n{body}\n<script src=\"{prefix}board.js\"></script></body></html>\n"
    )


def _tier_cell(r: dict) -> str:
    t = tier_of(r)
    return f"<td class=\"tier tier-{t}\" data-v=\"{t}\">{e(TIER_LABEL[t])}</td>"


def _rank_cell(r: dict, col: str) -> str:
    rk, rv = r.get(f"{col}_rank"), r.get(f"{col}_rank_verified")
    # both rankings travel with the cell; board.js shows the verified-only one when that toggle is on
    return (f"<td class=\"num rank\" data-v=\"{_num_attr(rk)}\" data-all=\"{_num_attr(rk)}\" "
            f"data-verified=\"{_num_attr(rv)}\">{'' if rk is None else rk}</td>")


def submitter_of(r: dict) -> str:
    """Who an entry belongs to, as the site shows it: the submitter its token named, ``anonymous`` without one,
    ``board`` for the board's own runs and reference rows."""
    if r.get("is_reference"):
        return "board"
    return str(r.get("submitter") or "anonymous")


def board_named(r: dict) -> bool:
    """Whether the entry's model name is the board's: a catalogue model whose weights the board matched
    (model id ``semcal:NAME``, :func:`leaderboards.identity.model_identity`); any other name is the submitter's."""
    return str(r.get("model_id") or "").startswith("semcal:")


def _submitter_cell(r: dict) -> str:
    who = submitter_of(r)
    mine = r.get("is_reference") or board_named(r) or who == "board"  # the board's name, or its own run
    whose = "" if mine else "<span class=\"whose\">model named by the submitter</span>"
    return f"<td class=\"submitter\" data-v=\"{e(who)}\">{e(who)}{whose}</td>"


def _row_cells(r: dict, prefix: str = "", doc_set: bool = False) -> str:
    b = r["board"]
    # a reference predictor uses no model: say so instead of repeating the submitter's model name
    model, method = ("reference predictor", "-") if r["is_reference"] else (r["model_name"], r["method"])
    cells = [
        f"<td data-v=\"{e(r['task'])}\">{e(r['task'])}</td>",
        f"<td data-v=\"{e(model)}\"><a href=\"{prefix}entries/{entry_slug(r['content_hash'], r['task'])}.html\">"
        f"{e(model)}</a></td>",
        _submitter_cell(r),
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
    heads = [("task", "Task", "str"), ("model", "Model", "str"), ("submitter", "Submitter", "str"),
             ("tier", "Tier", "str"), ("method", "Method", "str"), ("filter", "Scoring", "str"), ("n", "Docs", "num")]
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
        f"<tr><td>{i}</td><td>{e(g['model_name'])}</td><td>{e(g.get('submitter') or 'anonymous')}</td>"
        f"<td>{e(', '.join(TIER_LABEL[t] for t in g['tiers']))}</td>"
        f"<td>{e(g['method'])}</td><td>{e(g['filter'])}</td>"
        f"<td class=\"num\">{g['n_tasks']}</td><td class=\"num\">{g['mean_brier_rank']:.2f}</td>"
        f"<td class=\"num\">{g['mean_ece_rank']:.2f}</td>"
        f"<td>{'yes' if g['beats_prior_all'] else 'no'}</td><td>{'yes' if g['degenerate_any'] else ''}</td></tr>"
        for i, g in enumerate(groups, 1)
    )

_OVERALL_HEAD = ("<thead><tr><th>#</th><th>Model</th><th>Submitter</th><th>Tier</th><th>Method</th><th>Scoring</th>"
                 "<th>Tasks</th><th>Mean Brier rank</th><th>Mean ECE rank</th><th>Beats prior on all</th><th>Degenerate</th>"
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
<div class="scroll"><table id="board" class="sortable"><thead><tr>{_header(doc_set=True)}</tr></thead>
<tbody>
{chr(10).join(_tr(r, doc_set=True) for r in full)}
</tbody></table></div>{_empty(full, "No entries on a full evaluation split yet.")}
<h2 id="overall">Overall (mean per-task rank, full-split verified and spot-checked entries)</h2>
<p>Grouped by entry identity (model from the run's model_args, revision, method, submitter) and scoring; sorted by
mean Brier rank, then mean ECE rank. Self-reported entries are never ranked here.</p>
<div class="scroll"><table id="overall-table">{_OVERALL_HEAD}
<tbody>
{_overall_rows(groups)}
</tbody></table>
<table id="overall-verified" hidden>{_OVERALL_HEAD}
<tbody>
{_overall_rows(vgroups)}
</tbody></table></div>
<h2 id="partial-runs">Partial runs (a limited set of documents; not ranked with full-split runs)</h2>
<p>Ranks here are among runs of the same task on the very same documents (same "Doc set"), never across sets.</p>
<div class="scroll"><table id="partial" class="sortable"><thead><tr>{_header(doc_set=True)}</tr></thead>
<tbody>
{chr(10).join(_tr(r, doc_set=True) for r in partial)}
</tbody></table></div>{_empty(partial, "No partial runs.")}
<section id="self-reported-section" hidden>
<h2 id="self-reported">Self-reported entries (unverified; ranked only among themselves)</h2>
<p>Every number is recomputed from the submitted logs, but the probabilities were not re-scored with the model
(or the submitter chose the spot-check seed). They are never ranked with verified or spot-checked entries.</p>
<div class="scroll"><table id="self" class="sortable"><thead><tr>{_header(doc_set=True)}</tr></thead>
<tbody>
{chr(10).join(_tr(r, doc_set=True) for r in selfrep)}
</tbody></table></div>{_empty(selfrep, "No self-reported entries.")}
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


def _spot_check_text(sc: dict) -> str:
    if not isinstance(sc, dict) or not sc:
        return ""
    per = sc.get("docs_per_task") if isinstance(sc.get("docs_per_task"), dict) else {}
    out = f"{sc.get('n_docs', '?')} documents re-scored" + (
        " (" + ", ".join(f"{t}: {n}" for t, n in sorted(per.items())) + ")" if per else "")
    if sc.get("tolerance") is not None:
        out += f"; tolerance max |Δp| ≤ {_text(sc.get('tolerance'))}"
    if sc.get("max_abs_diff") is not None:
        out += f"; largest difference {float(sc['max_abs_diff']):.2g}"
    if sc.get("max_attempts") is not None:
        out += (f"; {sc.get('rejected_attempts_before', 0)} rejected attempt(s) of these weights before this one "
                f"(cap {sc['max_attempts']})")
    if sc.get("seed_chosen_by_submitter"):
        out += "; sample chosen by the submitter"
    return out


def _config_text(cfg) -> str:
    if not isinstance(cfg, dict) or not cfg:
        return ""
    return "; ".join(f"{k}: {_text(v)}" for k, v in sorted(cfg.items()))


def _prov_html(r: dict) -> str:
    """The entry's provenance as a small two-column table (issue 34): what was run, on which weights, how the
    board checked it. Paths are cut to their last component (:func:`public`); nothing of the board's machine."""
    prov = r.get("provenance") if isinstance(r.get("provenance"), dict) else {}
    cfg = prov.get("config") if isinstance(prov.get("config"), dict) else {}
    ver = _verification(r)
    sc = ver.get("spot_check") if isinstance(ver.get("spot_check"), dict) else {}
    settings = ver.get("settings") if isinstance(ver.get("settings"), dict) else {}
    seeds = ", ".join(f"{k} {cfg[k]}" for k in ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed") if k in cfg)
    tuned = ver.get("tuned_configuration")
    draws = sc.get("draws") if isinstance(sc.get("draws"), dict) else {}
    items = [
        ("model", f"{r.get('model_name', '')}" + (f" ({r['model_id']})" if r.get("model_id") else "")),
        ("submitter", submitter_of(r)),
        ("model name", "the board's: the catalogue model's weights, matched by their tensor hash" if board_named(r)
         else "given by the submitter (not a catalogue model's weights the board matched)"),
        ("weights", sc.get("weights") or (f"revision {r['revision']}" if r.get("revision") else "")),
        ("dtype", sc.get("dtype") or settings.get("dtype") or cfg.get("model_dtype")),
        ("backend", sc.get("backend") or settings.get("backend") or cfg.get("model")),
        ("device", sc.get("device") or settings.get("device") or cfg.get("device")),
        ("tuned configuration", _config_text(tuned) if isinstance(tuned, dict) else tuned),
        ("spot check", _spot_check_text(sc)),
        ("draw", ("content sha256 " + str(sc.get("content_hash", "")) + "; board secret commitment "
                  + str(sc.get("secret_commitment", "")) + "; " + "; ".join(
                      f"{t}: tag {d.get('tag', '')}" for t, d in sorted(draws.items()) if isinstance(d, dict)))
         if draws and sc.get("content_hash") else ""),
        ("not checked because", ver.get("reason")),
        ("model args", cfg.get("model_args")),
        ("parameters", cfg.get("model_num_parameters")),
        ("lm-eval version", prov.get("lm_eval_version")),
        ("transformers version", prov.get("transformers_version")),
        ("git hash", prov.get("git_hash")),
        ("evaluation date", _date_text(prov.get("date"))),
        ("seeds", seeds),
        ("limit", cfg.get("limit")),
        ("batch size", cfg.get("batch_size")),
    ]
    body = "".join(f"<tr><th scope=\"row\">{e(k)}</th><td>{e(_text(public(v)))}</td></tr>"
                   for k, v in items if v not in (None, "", {}, []))
    doc_ids = "".join(f"<li>{e(t)}: {e(' '.join(map(str, d.get('doc_ids', []))))}</li>"
                      for t, d in sorted(draws.items()) if isinstance(d, dict))
    extra = (f"<details><summary>Documents the draw selected</summary><ul>{doc_ids}</ul></details>"
             if doc_ids else "")
    return f"<table id=\"provenance\" class=\"prov\"><tbody>{body}</tbody></table>{extra}"


def _tier_html(r: dict) -> str:
    t = tier_of(r)
    return f"<p id=\"tier\" class=\"tier tier-{t}\">Tier: <b>{e(TIER_LABEL[t])}</b>: {e(TIER_MEANING[t])}.</p>"


def _coverage_html(r: dict) -> str:
    split = f" ({e(r['split'])} split)" if r.get("split") else ""
    if coverage_of(r) == "full":
        return f"<p id=\"coverage\">Documents: the full evaluation split{split}, {r['n_docs']} documents.</p>"
    return (f"<p id=\"coverage\">Documents: <b>partial</b>{split}: {e(_coverage(r))}, document set "
            f"<code>{e(_doc_set(r))}</code>. Ranked only against runs on the same documents, never with "
            f"full-split runs.</p>")


def _stock_html(r: dict) -> str:
    """A stock multiple_choice task's line (leaderboards.stock): its config hash, and whether the board checked
    its documents (registered) or took them as submitted."""
    v = r.get("verification")
    st = (v.get("stock_tasks") or {}).get(r["task"]) if isinstance(v, dict) and isinstance(v.get("stock_tasks"), dict) else None
    if not isinstance(st, dict):
        return ""
    how = ("registered with the board: documents, choices and gold labels checked against the board's own copy"
           if st.get("registered") is True else
           "<b>not registered</b> with the board: documents, choices and gold labels are the submitter's")
    return (f"<p id=\"stock\">Stock lm-eval multiple_choice task <code>{e(st.get('task'))}</code>, config sha256 "
            f"<code>{e(st.get('config_hash'))}</code>; {how}. Every row was computed by the board from the logged "
            "choice log-likelihoods.</p>")


def _entry_page(slug: str, rows: list[dict], pngs: dict[int, str]) -> str:
    r0 = rows[0]
    parts = [
        "<p><a href=\"../index.html\">&larr; leaderboard</a></p>",
        f"<h1>{e(r0['model_name'])} <small>{e(r0['method'])} &middot; {e(r0['task'])} &middot; submitted by "
        f"{e(submitter_of(r0))}</small></h1>",
        _tier_html(r0),
        _coverage_html(r0),
        _stock_html(r0),
        f"<p>Task version {e(r0['task_version'])}; documents: {e(_coverage(r0))}; submitted {e(r0['submitted_at'])}; "
        f"content sha256 <code>{e(r0['content_hash'])}</code>.</p>",
        "<div class=\"scroll\"><table id=\"entry\"><thead><tr><th>Reliability diagram</th>" + _header()
        + "</tr></thead><tbody>",
    ]
    for r in rows:  # each row's reliability diagram beside it
        png = pngs[r["entry_id"]]
        parts.append(
            f"<tr><td class=\"diagram\"><img class=\"reliability\" src=\"{png}\" "
            f"alt=\"reliability diagram, {e(r['filter'])}: ECE {_fmt(r['board']['ece'])}, "
            f"{r['board']['n_bins']} bins\" width=\"180\"></td>{_row_cells(r, prefix='../')}</tr>")
    parts.append("</tbody></table></div><h2>Reported vs recomputed</h2><table><thead><tr><th>Scoring</th><th>Metric</th>"
                 "<th>Reported = recomputed</th></tr></thead><tbody>")
    for r in rows:
        for m, v in sorted(r["reported"].items()):
            parts.append(f"<tr><td>{e(r['filter'])}</td><td>{e(m)}</td><td class=\"num\">{_fmt(v, 6)}</td></tr>")
    parts.append("</tbody></table><h2>Provenance</h2>" + _prov_html(r0))
    return _page(f"{r0['model_name']} – {r0['task']}", "\n".join(parts), prefix="../")
