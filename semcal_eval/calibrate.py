"""``semcal-eval calibrate RUN_DIR``: semcal's calibration rows for every stock ``multiple_choice`` task of an
lm-eval run, recomputed from the per-choice log-likelihoods lm-eval logged (``--log_samples``).

Why post-hoc, from the samples: it needs no change to the user's task (lm-eval's own ``acc`` / ``acc_norm`` stay
lm-eval's), no second model pass, and it works on any existing output folder of plain ``lm_eval`` with one
command. ``semcal-eval`` runs it by itself at the end of a run that logged samples
(:func:`semcal_eval.cli.print_summary`). A run-time wrapper would have had to rewrite each task's
``metric_list`` / ``process_results`` and would not reach runs made before it.

The rows and their definitions (``loglik``, ``loglik_norm``, their cross-fitted ``_ts`` copies, ``prior`` /
``majority`` / ``uniform``), the skip reasons and the error for a missing samples file are
:mod:`semcal_eval.run_rows`'s (:func:`~semcal_eval.run_rows.calibrate_run`); this verb writes them as
``calibration.json`` and ``calibration.md`` beside the run's results file and prints the Markdown.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from semcal_eval.core import metric_table as T
# the rows are the library's (semcal_eval.run_rows); the names are re-exported for the CLI and existing callers
from semcal_eval.run_rows import (DERIVED, ROWS, SKIP_REASONS, CalibrateError, calibrate_run,  # noqa: F401
                                  calibrate_task, calibration_row_order, calibration_rows, choice_logliks,
                                  choice_settings, has_multiple_choice, lm_eval_correct, mc_gold, norm_logits)

__all__ = ["markdown", "write_calibration", "save_calibration", "main"]


def _fmt_metric(m: dict, c: str) -> str:
    v = m.get(c)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    s = f"{v:.3f}"
    if f"{c}_ci_lo" in m and not math.isnan(m[f"{c}_ci_lo"]):
        s += f" [{m[f'{c}_ci_lo']:.3f}, {m[f'{c}_ci_hi']:.3f}]"
    return s


def markdown(cal: dict) -> str:
    """The calibration of a run as Markdown: a legend, one table per computed task, the skipped tasks."""
    lines = [
        f"semcal calibration of `{Path(cal['results']).name}` (`semcal-eval calibrate`), recomputed from the logged "
        "per-choice log-likelihoods. loglik = softmax of the summed choice log-likelihoods (lm-eval's `acc` "
        "argmax); loglik_norm = softmax of the per-character ones (`acc_norm`'s); `_ts`: temperature scaling "
        "cross-fitted over two folds; prior / majority: the other fold's labels; 95% bootstrap CIs in brackets; "
        "T: fitted temperature (mean of the two folds).", ""]
    skipped = []
    for task, t in cal["tasks"].items():
        if t["status"] != "computed":
            skipped.append(f"* `{task}`: skipped — {t['reason']}")
            continue
        lm = ", ".join(f"{k} {v:.3f}" for k, v in t["lm_eval"].items())
        lines += [f"### {task} ({t['n_docs']} documents; lm-eval: {lm or 'no acc'})", ""]
        cols = t["columns"]
        head = ["row", "n", *cols, "T"]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for name in calibration_row_order(t["rows"]):
            m = t["rows"][name]
            temp = m.get("temperature")
            temp = "—" if temp is None else f"{temp:.2f}" + (" (bound)" if m.get("at_bound") else "")
            lines.append("| " + " | ".join([name, str(m.get("n", "")), *(_fmt_metric(m, c) for c in cols), temp]) + " |")
        lines += [f"* {n}" for n in t["notes"]]
        lines.append("")
    if skipped:
        lines += ["Tasks without calibration rows:", "", *skipped, ""]
    lines.append(f"calibration step: {cal['seconds']:.2f} s")
    return "\n".join(lines) + "\n"


def write_calibration(run: str | Path, seed: int = T.CI_SEED) -> tuple[dict, Path, Path]:
    """Compute the calibration of a run and write ``calibration.json`` and ``calibration.md`` beside its results
    file; return (calibration, json path, Markdown path)."""
    return save_calibration(calibrate_run(run, seed))


def save_calibration(cal: dict) -> tuple[dict, Path, Path]:
    """Write a computed calibration (:func:`calibrate_run`) as ``calibration.json`` and ``calibration.md`` beside
    its results file; return (calibration, json path, Markdown path)."""
    results_path = Path(cal["results"])
    jpath, mpath = results_path.with_name("calibration.json"), results_path.with_name("calibration.md")
    jpath.write_text(json.dumps(cal, indent=1, default=float), encoding="utf-8")
    mpath.write_text(markdown(cal), encoding="utf-8")
    return cal, jpath, mpath


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="semcal-eval calibrate", description=__doc__.split("\n\n")[0])
    ap.add_argument("run", metavar="RUN_DIR",
                    help="an lm-eval --output_path folder of a --log_samples run, or one results_*.json in it")
    args = ap.parse_args(argv)
    try:
        cal, jpath, mpath = write_calibration(args.run)
    except ValueError as e:  # RunError / CalibrateError / RecordError name the file and the fix
        ap.exit(2, f"semcal-eval calibrate: error: {e}\n")
    print(markdown(cal) + f"\n[calibrate] wrote {mpath} and {jpath.name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
