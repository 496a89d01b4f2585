"""The compact summary ``semcal-eval`` prints after lm-eval's own table: one small table per task.

lm-eval's table has a row per (filter, metric) — 50 rows for one ``goemotions_semsoft`` run. The summary
turns that into what a reader compares: a row per filter, in the rows table's order (base, constrained,
semsoft, τ sweep, temperature-scaled rows, semsoft_tuned, then the model-free references prior, majority,
uniform; :mod:`semcal_eval.semsoft.rows`), and the headline columns of :data:`metric_table.HEADLINE`

* classification tasks: ``acc``, ``macro_f1``, ``ece_uw15`` [95% CI], ``brier_mc``, ``nll``, ``auroc_conf``;
* soft-label tasks (Civil Comments): ``acc``, ``soft_ece`` [CI], ``soft_brier``, ``soft_nll``, ``spearman``,
  ``auroc_class``;
* QA tasks (confidence records): the headline roles of :data:`semcal_eval.core.metric_table.ROLES`
  (``acc``, ``ece_uw10`` [CI], ``brier_conf``, ``nll_conf``, ``auroc_conf``),

plus ``T`` (the fitted temperature of a ``_ts`` row) and the "beats prior (Brier)" mark. Every number is
recomputed from the run's logged per-document records (:func:`semcal_eval.run_rows.headline_table`) through the
one metric table, so it equals what ``semcal-eval report`` and the leaderboard compute from the same samples.

``semcal-eval summary RESULTS`` rebuilds it for a saved run (an ``--output_path`` folder or one
``results_*.json``) and writes ``summary.md`` beside the results file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from semcal_eval.core import metric_table as T
from semcal_eval.core.records import RecordArrays, to_arrays
from semcal_eval.report import markdown_table
from semcal_eval.run_rows import doc_key, headline_table, load_run, prior_rows
from semcal_eval.runs import find_results
from semcal_eval.semsoft import rows as rows_table

__all__ = ["SOFT_COLUMNS", "summary_columns", "row_order", "task_summary", "judge_note", "build_summary",
           "write_summary", "main"]

#: soft-label rows: the annotator-fraction equivalents of ECE / Brier / NLL, and the rank signals
SOFT_COLUMNS = T.HEADLINE["soft"]


def summary_columns(a: RecordArrays) -> list[str]:
    """The summary's columns for rows like ``a`` (the metric table's headline metrics, the same ones lm-eval's
    own table shows); the one ECE column among them gets its bootstrap CI.

    >>> summary_columns(to_arrays([{"probs": [0.7, 0.3], "gold": 0}]))
    ['acc', 'macro_f1', 'ece_uw15', 'brier_mc', 'nll', 'auroc_conf']
    >>> summary_columns(to_arrays([{"conf": 0.4, "correct": True}]))
    ['acc', 'ece_uw10', 'brier_conf', 'nll_conf', 'auroc_conf', 'prr']
    """
    return T.headline_columns(a)


#: reading order of the rows (the rows table's, shared with the report)
row_order = rows_table.row_order


def task_summary(task: str, filters: dict[str, dict], seed: int = T.CI_SEED, priors: dict | None = None) -> str:
    """The Markdown block of one task: a heading and its table (``filters`` as from ``run_rows.load_run``;
    ``priors``: :func:`semcal_eval.run_rows.prior_rows` of the run, for a task without a prior row of its own)."""
    first = next(iter(filters.values()))
    table, columns = headline_table(filters, seed)
    n_docs = max(m["n"] for m in table.values())
    prior = None if "prior" in table else (priors or {}).get(doc_key(first))
    out = f"### {task} ({n_docs} documents)\n\n" + markdown_table(table, columns, order=row_order, prior=prior,
                                                                   kind=to_arrays(first["items"]).kind)
    return out + tuned_note(filters.get("semsoft_tuned", {}).get("items") or []) + judge_note(filters)


def judge_note(filters: dict[str, dict]) -> str:
    """QA rows: the judge card of the grader their records name, and the accuracy corrected for its measured
    errors (:mod:`semcal_eval.qa.judge_card`); the rows of one task share their greedy answers and labels, so
    the first row with graded records speaks for all. Records of runs before the card (no ``grader``) get none."""
    from semcal_eval.qa.judge_card import CardError, card_lines

    for f in filters.values():
        items = [it for it in f.get("items") or [] if isinstance(it, dict) and "grader" in it and "greedy" in it]
        if not items:
            continue
        graders = sorted({it["grader"] for it in items})
        if len(graders) != 1:
            return f"\n\n* judge: records name several graders ({', '.join(graders)}); no card"
        try:
            lines = card_lines(graders[0], [it["greedy"] for it in items], [int(it["correct"]) for it in items])
            lines += corrected_ece_lines(filters, graders[0])
        except CardError as e:
            return f"\n\n* {e}"
        return "\n\n" + "\n".join(f"* {line}" for line in lines)
    return ""


def corrected_ece_lines(filters: dict[str, dict], grader: str) -> list[str]:
    """One line: each confidence row's ECE (15 equal-width bins) raw → corrected for the judge's errors per answer
    shape and bin (:func:`semcal_eval.qa.judge_card.corrected_calibration`), or why it is not printed."""
    from semcal_eval.qa.judge_card import corrected_calibration

    parts, why = [], None
    for name in row_order(list(filters)):
        items = [it for it in filters[name].get("items") or [] if isinstance(it, dict) and "greedy" in it
                 and "conf" in it and it.get("grader") == grader]
        if not items:
            continue
        c = corrected_calibration([it["greedy"] for it in items], [int(it["correct"]) for it in items],
                                  [float(it["conf"]) for it in items], grader)
        if c["corrected_ece"] is None:
            why = c["why"]
            break
        parts.append(f"{name} {c['ece']:.3f} → {c['corrected_ece']:.3f}")
    if why:
        return [f"ECE corrected for the judge's errors: not printed ({why})."]
    return [f"ECE corrected for the judge's errors (15 bins, per answer shape): {', '.join(parts)}."] if parts else []


def tuned_note(items: list[dict]) -> str:
    """One line per configuration the ``semsoft_tuned`` row used (one; two when cross-fitted folds differ)."""
    seen: dict[tuple, int] = {}
    for it in items:
        key = tuple(it.get(k) for k in ("tuned_embedding", "tuned_top_k", "tuned_tau", "tuned_on", "tuned_n",
                                        "tuned_guard", "tuned_fold"))
        seen[key] = seen.get(key, 0) + 1
    lines = []
    for (emb, k, tau, on, n, guard, fold), count in sorted(seen.items(), key=lambda kv: str(kv[0])):
        where = f"{n} validation documents not evaluated" if on == "validation" else f"the other fold ({n} documents)"
        lines.append(f"semsoft_tuned{'' if fold is None else f' fold {fold}'} ({count} documents): τ={tau:g}, K={k}, "
                     f"label embedding {emb}, chosen on {where}"
                     + ("" if guard else "; no configuration kept the constrained macro-F1"))
    return "\n\n" + "\n".join(f"* {line}" for line in lines) if lines else ""


def build_summary(run: str | Path, seed: int = T.CI_SEED) -> str:
    """The summary of one run (an ``--output_path`` folder holding one run, or a ``results_*.json``) as
    Markdown. Raises ``ValueError`` (``RowsError`` / ``RunError``) naming the file and the fix."""
    results = find_results(run)
    tasks = load_run(results)
    priors = prior_rows(tasks, seed)
    blocks = [task_summary(task, filters, seed, priors) for task, filters in tasks.items()]
    legend = (
        f"semcal summary of `{results.name}`, recomputed from its logged samples (`semcal-eval report` has every "
        "metric).\nECE: 95% bootstrap CI in brackets. T: fitted temperature. beats prior (Brier): ✓/✗ = Brier "
        "below / not below the class-prior row's (for a task without one: the prior row of a task of this run on "
        "the same documents)."
    )
    return "\n\n".join([legend, *blocks]) + "\n"


def write_summary(run: str | Path, seed: int = T.CI_SEED) -> tuple[str, Path]:
    """Build the summary and write it as ``summary.md`` beside the results file; return (text, path)."""
    results = find_results(run)
    text = build_summary(results, seed)
    path = results.with_name("summary.md")
    path.write_text(text, encoding="utf-8")
    return text, path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="semcal-eval summary", description=__doc__.split("\n\n")[0])
    ap.add_argument("results", metavar="RESULTS",
                    help="an lm-eval --output_path folder of a --log_samples run, or one results_*.json in it")
    args = ap.parse_args(argv)
    try:
        text, path = write_summary(args.results)
    except ValueError as e:
        ap.exit(2, f"semcal-eval summary: error: {e}\n")
    print(text + f"\n[summary] wrote {path}", flush=True)
    return 0
