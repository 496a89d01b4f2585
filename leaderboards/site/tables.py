"""The site's tables for other tools: ``leaderboard.csv`` (one row per board row, spreadsheet-safe cells) and
``leaderboard.md`` (per-task tables; every untrusted string through :func:`md_escape`)."""

from __future__ import annotations

import csv
import io
import re

from semcal_eval.core import metric_table as T
from semcal_eval.core.records import CLASSIFICATION, CONFIDENCE

from semcal_eval.qa.judge_card import BOARD_FIELDS as JUDGE_FIELDS

from ..ranking import RANKED, TIERS, coverage_of, tier_of
from .html import submitter_of
from .rows import (_BOARD_FIELDS, _RANK_FIELDS, COLUMNS, TIER_LABEL, TIER_MEANING, _board_fields, _coverage,
                   _doc_set, _flags, _fmt, _label)

# per column: value, CI bounds, rank (ranked columns)
_EXPORT_FIELDS = ["task", "model_name", "submitter", "method", "tier", "filter", "is_reference", "coverage", "split", "n_docs",
                  "n_split", "n_original", "limit", "doc_set_hash",
                  *[k for col in COLUMNS for k in _board_fields(col) + ([f"{col}_rank"] if col in RANKED else [])],
                  *[f"{col}_rank_verified" for col in RANKED],
                  "beats_prior", "prior_brier", "degenerate", *JUDGE_FIELDS, "content_hash"]


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


def _flat(r: dict) -> dict:
    b = r["board"]
    d = {k: r.get(k) for k in ("task", "model_name", "method", "filter", "is_reference", "split", "n_docs",
                               "n_split", "n_original", "limit", "doc_set_hash", *_RANK_FIELDS, "beats_prior",
                               "prior_brier", "degenerate", "content_hash")}
    d["tier"], d["coverage"] = tier_of(r), coverage_of(r)
    d["submitter"] = submitter_of(r)
    for k in (*_BOARD_FIELDS, *JUDGE_FIELDS):
        d[k] = b.get(k)
    return d


def csv_text(rows: list[dict]) -> str:
    """``leaderboard.csv``: one line per ranked row, the :data:`_EXPORT_FIELDS` columns."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=_EXPORT_FIELDS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _csv_cell(v) for k, v in _flat(r).items()})
    return buf.getvalue()


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
    heads = ["model", "submitter", "method", "scoring", "tier", "docs"] + (["doc set"] if doc_set else [])
    for col in COLUMNS:
        heads += [_label(col)] + ([f"{_label(col)} rank"] if col in RANKED else [])
    heads.append("flags")
    out = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for r in rows:
        b = r["board"]
        model, method = ("reference predictor", "-") if r["is_reference"] else (r["model_name"], r["method"])
        cells = [md_escape(model), md_escape(submitter_of(r)), md_escape(method), md_escape(r["filter"]),
                 md_escape(TIER_LABEL[tier_of(r)]),
                 md_escape(_coverage(r))] + ([md_escape(_doc_set(r))] if doc_set else [])
        for col in COLUMNS:
            cells.append(_fmt(b.get(col)))
            if col in RANKED:
                cells.append(str(r.get(f"{col}_rank") or ""))
        cells.append(md_escape("; ".join(_flags(r))))
        out.append("| " + " | ".join(cells) + " |")
    return out + [""]


def _md_overall(title: str, groups: list[dict]) -> list[str]:
    out = [f"## {title}", "", "| # | model | submitter | tier | method | scoring | tasks | mean Brier rank | "
           "mean ECE rank |", "|---|---|---|---|---|---|---|---|---|"]
    for i, g in enumerate(groups, 1):
        tiers = ", ".join(TIER_LABEL[t] for t in g["tiers"])
        out.append(f"| {i} | {md_escape(g['model_name'])} | {md_escape(g.get('submitter') or 'anonymous')} | "
                   f"{md_escape(tiers)} | {md_escape(g['method'])} | "
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
        out += [f"## {md_escape(task)}: full split", ""] + _md_table([r for r in full if r["task"] == task], True)
    out += _md_overall("Overall (full-split verified and spot-checked entries)", groups)
    out += _md_overall("Overall, verified entries only", vgroups)
    for task in sorted({r["task"] for r in partial}):
        out += [f"## {md_escape(task)}: partial runs (not ranked with full-split runs)", ""]
        out += _md_table([r for r in partial if r["task"] == task], True)
    if selfrep:
        out += ["## Self-reported entries (unverified; ranked only among themselves, never with the tables above)",
                ""] + _md_table(list(selfrep), True)
    return "\n".join(out)
