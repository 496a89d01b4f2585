"""``semcal-eval report RESULTS_DIR``: pictures and Markdown tables from an lm-eval run's logged samples.

Everything is recomputed from the per-document items in ``samples_*.jsonl`` (Contract 1), never read from
``results_*.json``, so a report can be rebuilt from saved samples alone. For each task:

* one table with a row per filter (constrained baseline, Semantic Softmax, τ-sweep, cross-fitted temperature
  scaling, reference predictors) and accuracy, macro-F1, ECE (with its bootstrap CI), Brier, NLL, AUROC;
  rows that do not beat the class-prior predictor on Brier are marked ✗;
* ``--calibrate-on VAL_DIR``: temperature scaling fitted on a validation run's logged samples of the same
  task and filter, applied here (rows ``<filter>+T(val)``, with the fitted T in the table);
* ``--halves``: the issue-8 protocol on one split — fit T on one half of the documents, report every row on
  the other half;
* reliability diagrams (baseline and semsoft on one figure), confidence histograms, a τ-sweep plot and, for
  soft-label tasks, predicted P(positive) against the annotator fraction;
* QA tasks (confidence records): PRR and AUARC columns, a risk–coverage plot with every estimator row of the
  task on one figure, and a judge-sensitivity table (AUROC, PRR and ECE of the headline confidence under each
  judge the run used, with the min–max band). Estimator rows that are ranking scores, not probabilities
  (:data:`semcal_eval.qa.estimators.ESTIMATORS`), show no calibration columns; their ``_iso`` rows do.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from semcal_eval import plots
from semcal_eval.calibrate import markdown as calibration_markdown
from semcal_eval.core import metric_table as T
from semcal_eval.core.records import CLASSIFICATION, to_arrays
# the rows are the library's (semcal_eval.run_rows); the names are re-exported for existing callers
from semcal_eval.run_rows import RowsError as ReportError  # noqa: F401
from semcal_eval.run_rows import calibrate_run, has_multiple_choice, load_run, run_sweep_taus, task_rows
from semcal_eval.run_rows import is_ranking_row as _is_ranking_row
from semcal_eval.run_rows import mask_ranking_rows as _mask_ranking_rows
from semcal_eval.run_rows import row_metrics, temperature_rows  # noqa: F401
from semcal_eval.semsoft import rows as rows_table

MAIN_FILTERS = ("constrained", "semsoft")
#: the rows the reliability diagram and the histogram draw (with every ``_ts`` row)
DRAWN_FILTERS = (*MAIN_FILTERS, "semsoft_tuned")


# -- reading -------------------------------------------------------------------------------------------------
def filters_from_samples(rows: list[dict]) -> dict[str, dict]:
    """:func:`semcal_eval.runs.records_by_filter` (kept for the benchmarks that group in-memory samples)."""
    from semcal_eval.runs import records_by_filter

    return records_by_filter(rows)


_sorted_filters = rows_table.row_order  # one reading order for the report, the summary and the board


# -- rendering -----------------------------------------------------------------------------------------------
def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def markdown_table(table: dict[str, dict], columns: list[str], order=None, prior: dict | None = None,
                   kind: str | None = None) -> str:
    """Rows = filters (in ``order(names)``'s order, default the rows table's); ECE-like columns carry their 95%
    bootstrap CI; ✗ marks rows whose Brier is not below the class-prior predictor's (the table's own ``prior``
    row, else ``prior``: the metrics of a prior row on the same documents from another task of the run).
    ``kind`` (a record kind) lets classification tables name lm-eval's ``none`` row for what it is."""
    brier_col = next((c for c in ("soft_brier", "brier_mc", "brier_conf") if c in columns), None)
    prior_row = table.get("prior") or prior or {}
    prior_brier = prior_row.get(brier_col) if brier_col else None
    head = ["row", "n", *columns, "T", "beats prior (Brier)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in (order or _sorted_filters)(table):
        m = table[name]
        cells = []
        for c in columns:
            v = _fmt(m.get(c))
            if f"{c}_ci_lo" in m and not math.isnan(m[f"{c}_ci_lo"]):
                v += f" [{m[f'{c}_ci_lo']:.3f}, {m[f'{c}_ci_hi']:.3f}]"
            cells.append(v)
        beats = "" if prior_brier is None or name in rows_table.REFERENCES else (
            "✓" if m.get(brier_col, math.inf) < prior_brier else "✗"
        )
        t = m.get("temperature")
        t = "—" if t is None else f"{t:.2f}" + (" (bound)" if m.get("at_bound") else "")
        shown = rows_table.display_name(name) if kind == CLASSIFICATION else name
        lines.append("| " + " | ".join([shown, str(m.get("n", "")), *cells, t, beats]) + " |")
    return "\n".join(lines)


def _columns(items: list[dict]) -> list[str]:
    return T.report_columns(to_arrays(items))


def render_task(task: str, table: dict, rows: dict, out: Path, primary_tau: float | None = None,
                sweep_taus: dict[str, float] | None = None) -> list[str]:
    """Write the task's PNGs; return the Markdown lines that show them. ``sweep_taus``: {sweep row: τ}, read
    from the run's logged task config (:func:`semcal_eval.semsoft.rows.sweep_taus`)."""
    md = []
    arrays = {name: to_arrays(items) for name, items in rows.items()}
    shown = [n for n in _sorted_filters(rows) if n.split("+")[0] in DRAWN_FILTERS or n.endswith("_ts")]
    shown = shown or [n for n in rows if not _is_ranking_row(n)] or list(rows)  # scores have no reliability
    series = {n: (arrays[n].conf, arrays[n].correct) for n in shown}
    rel = out / f"{task}_reliability.png"
    plots.reliability_diagram(rel, series, title=f"{task}: reliability (15 equal-width bins)")
    hist = out / f"{task}_confidence.png"
    plots.confidence_histogram(hist, {n: arrays[n].conf for n in shown}, title=f"{task}: confidence")
    md += [f"![reliability]({rel.name})", f"![confidence]({hist.name})"]
    taus = sorted((t, n) for n, t in (sweep_taus or {}).items() if n in rows)
    if taus and "semsoft" in table:
        if primary_tau is not None and all(abs(t - primary_tau) > 1e-9 for t, _ in taus):
            taus = sorted([*taus, (primary_tau, "semsoft")])
        xs = [t for t, _ in taus]
        cols = ["ece_uw15", "acc", "brier_mc"] if arrays[taus[0][1]].t is None else ["soft_ece", "soft_brier"]
        ys = {c: {"semsoft": [table[n].get(c, math.nan) for _, n in taus],
                  "constrained": [table.get("constrained", {}).get(c, math.nan)] * len(xs)} for c in cols}
        sweep = out / f"{task}_tau_sweep.png"
        plots.sweep_plot(xs, ys, sweep, title=f"{task}: τ sweep (constrained baseline flat)")
        md.append(f"![tau sweep]({sweep.name})")
    soft_rows = [n for n in shown if arrays[n].t is not None]
    if soft_rows:
        sc = out / f"{task}_soft_scatter.png"
        plots.soft_scatter({n: arrays[n].p for n in soft_rows}, arrays[soft_rows[0]].t, sc,
                           title=f"{task}: predicted P(toxic) vs annotator fraction")
        md.append(f"![soft scatter]({sc.name})")
    return md


#: extra report columns of QA (confidence-record) tasks: the selective-prediction metrics (issue 23)
QA_EXTRA_COLUMNS = T.REPORT_EXTRAS[T.CONFIDENCE]
#: the metrics of the judge-sensitivity table (headline confidence under each judge): AUROC, PRR and ECE roles
JUDGE_BAND_METRICS = T.role_metrics(T.CONFIDENCE, ("auroc", "prr", "ece"))


def judge_band_table(table: dict[str, dict]) -> str | None:
    """Markdown: AUROC, PRR, ECE of the headline confidence per judge row (``judge_*``) and the min–max band;
    None when the run used fewer than one judge row."""
    judges = sorted(n for n in table if n.startswith("judge_"))
    if not judges:
        return None
    cols = JUDGE_BAND_METRICS
    lines = ["| judge | n | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 2)]
    for j in judges:
        lines.append(f"| {j} | {table[j].get('n', '')} | " + " | ".join(_fmt(table[j].get(c)) for c in cols) + " |")
    band = []
    for c in cols:
        v = [table[j].get(c) for j in judges]
        v = [x for x in v if isinstance(x, float) and not math.isnan(x)]
        band.append(f"{min(v):.3f}–{max(v):.3f} (spread {max(v) - min(v):.3f})" if v else "—")
    lines.append(f"| **min–max over {len(judges)} judge(s)** | | " + " | ".join(band) + " |")
    return "\n".join(lines)


def render_qa(task: str, table: dict, rows: dict, out: Path) -> list[str]:
    """QA extras: the risk–coverage plot of every row but the cross-fitted copies, and the judge bands."""
    md = []
    arrays = {n: to_arrays(items) for n, items in rows.items() if not n.endswith(("_iso", "_platt"))}
    if arrays:
        rc = out / f"{task}_risk_coverage.png"
        plots.risk_coverage_plot(rc, {n: (a.conf, a.correct) for n, a in arrays.items()},
                                 title=f"{task}: risk–coverage of every estimator")
        md.append(f"![risk coverage]({rc.name})")
    band = judge_band_table(table)
    if band:
        md += ["", f"Judge sensitivity ({task}): the headline confidence (cluster share) under each judge.", "",
               band]
    return md


def build_report(run_dir, out_dir=None, calibrate_on=None, halves: bool = False, seed: int = 0) -> Path:
    """Write ``report.md``, ``report.json`` and PNGs; return the Markdown path. A run with stock
    ``multiple_choice`` tasks also gets their calibration (:func:`semcal_eval.run_rows.calibrate_run`: the same
    rows and CIs as ``semcal-eval calibrate``)."""
    cal, cal_error = None, None
    if has_multiple_choice(run_dir):
        try:
            cal = calibrate_run(run_dir, seed)
        except ValueError as e:  # RunError / CalibrateError: said in the report, the semcal tables still come
            cal_error = str(e)
    stock = cal is not None and any(t["status"] == "computed" for t in cal["tasks"].values())
    run = load_run(run_dir, allow_empty=stock)
    val = load_run(calibrate_on) if calibrate_on else {}
    out = Path(out_dir) if out_dir else Path(run_dir) / "report"
    out.mkdir(parents=True, exist_ok=True)
    md = [f"# semcal report: {Path(run_dir).name}", ""]
    if halves:
        md += ["Protocol: temperature fitted on one half of the documents, **every row reported on the other "
               f"half** (deterministic split, seed {seed}).", ""]
    if calibrate_on:
        md += [f"`+T(val)` rows: temperature fitted on the logged samples of `{calibrate_on}`.", ""]
    summary = {}
    taus = run_sweep_taus(run_dir)
    for task, filters in run.items():
        print(f"[report] {task}: {', '.join(_sorted_filters(filters, taus.get(task)))}", flush=True)
        table, rows = task_rows(filters, val.get(task), halves=halves, seed=seed)
        cols = _columns(next(iter(rows.values())))
        qa = "probs" not in next(iter(rows.values()))[0]
        if qa:
            cols += [c for c in QA_EXTRA_COLUMNS if c not in cols]
            _mask_ranking_rows(table)
        md += [f"## {task}", "", markdown_table(table, cols), ""]
        md += render_task(task, table, rows, out, sweep_taus=taus.get(task)) + [""]
        if qa:
            md += render_qa(task, table, rows, out) + [""]
        summary[task] = table
    if stock:  # semcal's own multiple_choice tasks (e.g. goemotions_base) are in the tables above, not here
        md += ["## Stock multiple-choice tasks", "", calibration_markdown(cal), ""]
    elif cal_error:
        md += [f"Stock multiple-choice tasks: no calibration ({cal_error})", ""]
    (out / "report.json").write_text(json.dumps(summary, indent=1, default=float))
    path = out / "report.md"
    path.write_text("\n".join(md))
    print(f"[report] wrote {path}", flush=True)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="semcal-eval report", description=__doc__.split("\n\n")[0])
    ap.add_argument("results_dir", help="an lm-eval --output_path folder of a --log_samples run")
    ap.add_argument("--out", default=None, help="where to write report.md and PNGs (default RESULTS_DIR/report)")
    ap.add_argument("--calibrate-on", default=None, metavar="VAL_DIR",
                    help="fit temperature scaling on this validation run's logged samples")
    ap.add_argument("--halves", action="store_true",
                    help="fit temperature on one half of the documents and report all rows on the other half")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        build_report(args.results_dir, args.out, args.calibrate_on, args.halves, args.seed)
    except (ReportError, ValueError) as e:
        ap.exit(2, f"semcal-eval report: error: {e}\n")
    return 0
