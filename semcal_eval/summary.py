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
recomputed from the run's logged per-document records (:func:`semcal_eval.report.load_run`) through the one
metric table, so it equals what ``semcal-eval report`` and the leaderboard compute from the same samples.

``semcal-eval summary RESULTS`` rebuilds it for a saved run (an ``--output_path`` folder or one
``results_*.json``) and writes ``summary.md`` beside the results file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from semcal_eval.core import metric_table as T
from semcal_eval.core.records import RecordArrays, to_arrays
from semcal_eval.report import _mask_ranking_rows, load_run, markdown_table, task_rows
from semcal_eval.semsoft import rows as rows_table

__all__ = ["SOFT_COLUMNS", "summary_columns", "row_order", "task_summary", "build_summary", "write_summary", "main"]

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


def _ece_column(columns: list[str]) -> str:
    return next(c for c in columns if "ece" in c)


#: reading order of the rows (the rows table's, shared with the report)
row_order = rows_table.row_order


def _prior_rows(run: dict[str, dict[str, dict]], seed: int) -> dict[tuple, dict]:
    """The ``prior`` row of each task of a run, keyed by its documents (doc_ids and gold labels), so a task
    without one (a stock ``*_base`` task) gets the "beats prior" mark from a sibling on the same documents."""
    out: dict[tuple, dict] = {}
    for filters in run.values():
        if "prior" in filters:
            f = filters["prior"]
            table, _ = task_rows({"prior": f}, names=summary_columns(to_arrays(f["items"])), ci_names=[], seed=seed)
            out[_doc_key(f)] = table["prior"]
    return out


def _doc_key(f: dict) -> tuple:
    return tuple(zip(map(str, f["doc_ids"]), (str(it.get("gold")) for it in f["items"]),
                     (it.get("soft") for it in f["items"])))


def task_summary(task: str, filters: dict[str, dict], seed: int = T.CI_SEED, priors: dict | None = None) -> str:
    """The Markdown block of one task: a heading and its table (``filters`` as from ``report.load_run``;
    ``priors``: :func:`_prior_rows` of the run, for a task without a prior row of its own)."""
    first = next(iter(filters.values()))
    a = to_arrays(first["items"])
    columns = summary_columns(a)
    table, _ = task_rows(filters, names=columns, ci_names=[_ece_column(columns)], seed=seed)
    _mask_ranking_rows(table)  # a ranking score (EigV, degree, ...) has no calibration metric of its own
    n_docs = max(m["n"] for m in table.values())
    prior = None if "prior" in table else (priors or {}).get(_doc_key(first))
    out = f"### {task} ({n_docs} documents)\n\n" + markdown_table(table, columns, order=row_order, prior=prior,
                                                                   kind=a.kind)
    return out + tuned_note(filters.get("semsoft_tuned", {}).get("items") or [])


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
    Markdown. Raises ``ValueError`` (``ReportError`` / ``RunError``) naming the file and the fix."""
    from semcal_eval.runs import find_results

    results = find_results(run)
    tasks = load_run(results)
    priors = _prior_rows(tasks, seed)
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
    from semcal_eval.runs import find_results

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
