"""The compact summary ``semcal-eval`` prints after lm-eval's own table: one small table per task.

lm-eval's table has a row per (filter, metric) — 105 rows for one ``goemotions_semsoft`` run. The summary
turns that into what a reader compares: a row per filter, in the order constrained → semsoft → τ sweep →
temperature-scaled rows → the model-free references (prior, majority, uniform), and six columns

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
from semcal_eval.core.records import CLASSIFICATION, RecordArrays, to_arrays
from semcal_eval.report import _tau_of, load_run, markdown_table, task_rows

__all__ = ["SOFT_COLUMNS", "summary_columns", "row_order", "task_summary", "build_summary", "write_summary", "main"]

#: soft-label rows: the annotator-fraction equivalents of ECE / Brier / NLL, and the rank signals
SOFT_COLUMNS = ("acc", "soft_ece", "soft_brier", "soft_nll", "spearman", "auroc_class")
_REFERENCES = ("prior", "majority", "uniform")


def summary_columns(a: RecordArrays) -> list[str]:
    """The summary's columns for rows like ``a``; the one ECE column among them gets its bootstrap CI.

    >>> summary_columns(to_arrays([{"probs": [0.7, 0.3], "gold": 0}]))
    ['acc', 'macro_f1', 'ece_uw15', 'brier_mc', 'nll', 'auroc_conf']
    >>> summary_columns(to_arrays([{"conf": 0.4, "correct": True}]))
    ['acc', 'ece_uw10', 'brier_conf', 'nll_conf', 'auroc_conf']
    """
    if a.t is not None:
        return list(SOFT_COLUMNS)
    roles = T.ROLES[a.kind]
    head = [roles["acc"], "macro_f1"] if a.kind == CLASSIFICATION else [roles["acc"]]
    return head + [roles[r] for r in ("ece", "brier", "nll", "auroc")]


def _ece_column(columns: list[str]) -> str:
    return next(c for c in columns if "ece" in c)


def row_order(names) -> list[str]:
    """Filters in reading order: constrained, semsoft, the τ sweep (by τ), ``_ts`` / ``+T`` rows, anything
    else, then prior, majority, uniform.

    >>> row_order(["uniform", "semsoft_ts", "prior", "semsoft_tau0.3", "semsoft", "semsoft_tau0.1", "constrained"])
    ['constrained', 'semsoft', 'semsoft_tau0.1', 'semsoft_tau0.3', 'semsoft_ts', 'prior', 'uniform']
    """
    def key(name: str):
        tau = _tau_of(name)
        if name in ("constrained", "semsoft"):
            return (0 if name == "constrained" else 1, 0.0, name)
        if tau is not None:
            return (2, tau, name)
        if name.endswith("_ts") or "+T" in name:
            return (3, 0.0, name)
        if name in _REFERENCES:
            return (5 + _REFERENCES.index(name), 0.0, name)
        return (4, 0.0, name)

    return sorted(names, key=key)


def task_summary(task: str, filters: dict[str, dict], seed: int = T.CI_SEED) -> str:
    """The Markdown block of one task: a heading and its table (``filters`` as from ``report.load_run``)."""
    first = next(iter(filters.values()))["items"]
    columns = summary_columns(to_arrays(first))
    table, _ = task_rows(filters, names=columns, ci_names=[_ece_column(columns)], seed=seed)
    n_docs = max(m["n"] for m in table.values())
    out = f"### {task} ({n_docs} documents)\n\n" + markdown_table(table, columns, order=row_order)
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
    blocks = [task_summary(task, filters, seed) for task, filters in load_run(results).items()]
    legend = (
        f"semcal summary of `{results.name}`, recomputed from its logged samples (lm-eval's full table has every "
        "metric).\nECE: 95% bootstrap CI in brackets. T: fitted temperature. beats prior (Brier): ✓/✗ = Brier "
        "below / not below the class-prior row's."
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
