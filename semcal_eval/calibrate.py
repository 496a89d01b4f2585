"""``semcal-eval calibrate RUN_DIR``: semcal's calibration rows for every stock ``multiple_choice`` task of an
lm-eval run, recomputed from the per-choice log-likelihoods lm-eval logged (``--log_samples``).

Why post-hoc, from the samples: it needs no change to the user's task (lm-eval's own ``acc`` / ``acc_norm`` stay
lm-eval's), no second model pass, and it works on any existing output folder of plain ``lm_eval`` with one
command. ``semcal-eval`` runs it by itself at the end of a run that logged samples
(:func:`semcal_eval.cli.print_summary`). A run-time wrapper would have had to rewrite each task's
``metric_list`` / ``process_results`` and would not reach runs made before it.

What lm-eval 0.4.13 logs and scores for a ``multiple_choice`` document (``ConfigurableTask.construct_requests``
and ``process_results``): one ``loglikelihood`` request per choice, ``(context, target_delimiter + choice)``;
``filtered_resps`` holds ``[ll_i, is_greedy_i]`` per choice, ``ll_i`` the summed log-probability of the
continuation's tokens. ``acc`` = [argmax_i ll_i is the gold]; ``acc_norm`` = [argmax_i ll_i / len(choice_i) is
the gold], ``len`` counting the *characters* of the choice text (``doc_to_choice``, without the delimiter);
``acc_bytes`` divides by UTF-8 bytes instead.

Rows per task (every one a list of :func:`semcal_eval.core.records.classification_record`, scored by the one
metric table through :func:`semcal_eval.report.task_rows`, CIs from the table's bootstrap):

* ``loglik``: p_i = softmax_i(ll_i) — the normalisation of ``acc`` (same argmax), and the distribution of
  lm-eval's own ``brier_score`` metric;
* ``loglik_norm``: p_i = softmax_i(ll_i / len_i) — the normalisation of ``acc_norm`` (same argmax): the
  per-character log-likelihood taken as a logit;
* ``loglik_ts`` / ``loglik_norm_ts``: temperature scaling of those, cross-fitted over the evaluated documents
  (:mod:`semcal_eval.core.crossfit`: folds by position in doc_id order; each fold scaled with the T fitted on
  the other, :func:`semcal_eval.core.recalibration.temperature_scale`);
* ``prior`` / ``majority``: the rules of :mod:`semcal_eval.core.references` with the *other fold's* gold labels
  as the training labels (cross-fitted the same way, so no document sees its own label); ``uniform``: 1/K.

Every task of the run is listed: computed, or skipped with its reason (another output type, a group, a semcal
task whose rows the summary already shows, a ``multiple_input`` task). A ``multiple_choice`` task without its
samples file is an error that says to rerun with ``--log_samples``.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import sys
import time
import warnings
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from scipy.special import softmax

from semcal_eval.core import metric_table as T
from semcal_eval.core import recalibration, references
from semcal_eval.core.crossfit import crossfit
from semcal_eval.core.crossfit import skip_reason as crossfit_skip_reason
from semcal_eval.core.records import classification_record, to_arrays
from semcal_eval.runs import RunError, find_results, iter_samples, locate_run, read_results, row_record

__all__ = ["ROWS", "DERIVED", "SKIP_REASONS", "CalibrateError", "choice_settings", "choice_logliks", "mc_gold",
           "norm_logits", "lm_eval_correct", "calibration_rows", "calibrate_task", "calibrate_run", "markdown",
           "write_calibration", "main"]

#: the rows, in reading order (the model's rows, their recalibrated copies, then the model-free references)
ROWS: tuple[str, ...] = ("loglik", "loglik_norm", "loglik_ts", "loglik_norm_ts", *references.KINDS)
#: the rows fitted across the evaluated documents (the board's near-duplicate test compares the others)
DERIVED: tuple[str, ...] = ("loglik_ts", "loglik_norm_ts")

#: why a task of another output type gets no rows
SKIP_REASONS: dict[str, str] = {
    "generate_until": (
        "generate_until: free-text answers have no choice distribution, and semantic-agreement confidence needs "
        "K sampled answers that a stock run does not generate. Wrap the task in a three-line YAML (`include:` it, "
        "`class: !function semcal_eval.qa.stock.StockSemAgreeTask`; tasks/README.md) and rerun: one greedy answer "
        "and K samples per question, clustered by a judge, with the QA tasks' metrics"),
    "loglikelihood": "loglikelihood: one continuation per document, no choice set to form a distribution over",
    "loglikelihood_rolling": "loglikelihood_rolling: a perplexity task, no prediction to calibrate",
}


class CalibrateError(RunError):
    """A run or task that cannot be calibrated; the message names the file or task and the fix."""


# -- one document ----------------------------------------------------------------------------------------------
def _arguments(row: dict) -> list[tuple[str, str]]:
    """(context, continuation) of each request of a samples row: lm-eval 0.4.13 logs
    ``{"gen_args_<i>": {"arg_0": ctx, "arg_1": cont}}``; older versions a list of pairs."""
    args = row.get("arguments")
    if isinstance(args, dict):
        items = [args[k] for k in sorted(args, key=lambda k: int(str(k).rsplit("_", 1)[-1]))]
        return [(str(a.get("arg_0")), str(a.get("arg_1"))) for a in items]
    if isinstance(args, list):
        return [(str(a[0]), str(a[1])) for a in args]
    raise CalibrateError(f"samples row {row.get('_line', '?')}: no 'arguments' of a multiple_choice request")


def choice_logliks(row: dict, delimiter: str = " ", mutual_info: bool = False) -> tuple[np.ndarray, list[str]]:
    """``(ll, choices)`` of one samples row of a ``multiple_choice`` task: the summed log-likelihood of each
    choice (``filtered_resps``, logged as text by lm-eval) and the choice texts without ``delimiter`` (lm-eval's
    ``target_delimiter``). ``mutual_info``: the task also asked the unconditional log-likelihoods
    (``acc_mutual_info``), which follow the conditional ones and are dropped."""
    resps = row.get("filtered_resps")
    where = f"samples row {row.get('_line', '?')} (doc_id {row.get('doc_id')})"
    try:
        ll = np.array([float(r[0]) for r in resps], dtype=float)
    except (TypeError, ValueError, IndexError, KeyError):
        raise CalibrateError(f"{where}: filtered_resps {str(resps)[:80]} are not [loglikelihood, is_greedy] "
                             "pairs; is this a multiple_choice task's unedited samples file?") from None
    args = _arguments(row)
    if len(args) != len(ll):
        raise CalibrateError(f"{where}: {len(args)} requests but {len(ll)} responses")
    if mutual_info:
        ll, args = ll[: len(ll) // 2], args[: len(args) // 2]
    conts = [c for _, c in args]
    choices = [c[len(delimiter):] if delimiter and c.startswith(delimiter) else c for c in conts]
    return ll, choices


def choice_settings(config: dict) -> tuple[str, bool]:
    """``(target_delimiter, mutual_info)`` of a logged ``multiple_choice`` task config: the text lm-eval puts
    before each choice (default ``" "``), and whether it also asked the unconditional log-likelihoods
    (``acc_mutual_info`` in its ``metric_list``)."""
    delimiter = config.get("target_delimiter", " ")
    mutual_info = any(isinstance(m, dict) and m.get("metric") == "acc_mutual_info"
                      for m in config.get("metric_list") or [])
    return (" " if delimiter is None else str(delimiter)), mutual_info


def mc_gold(target, choices: list[str]) -> int | list[int] | None:
    """The gold index (or acceptable indices) of a logged ``target``, resolved as lm-eval's ``process_results``
    does: an index, a list of indices, or a choice text; a digit string is an index (lm-eval's
    ``doc_to_target`` turns one into an int when the task has ``doc_to_choice``; the log writes it as text).
    None when the gold is not one of the choices (lm-eval scores such a document 0 and warns)."""
    if isinstance(target, str):
        t = target.strip()
        if t.isdigit() or (t.startswith("[") and t.endswith("]")):
            try:
                target = ast.literal_eval(t)
            except (SyntaxError, ValueError):
                pass
        if isinstance(target, str):
            return choices.index(target) if target in choices else None
    if isinstance(target, bool):
        return None
    if isinstance(target, int):
        return target if 0 <= target < len(choices) else None
    if isinstance(target, list) and target and all(isinstance(g, int) and not isinstance(g, bool) for g in target):
        return target if all(0 <= g < len(choices) for g in target) else None
    return None


def norm_logits(ll: np.ndarray, choices: list[str]) -> np.ndarray:
    """``ll_i / len(choice_i)``: lm-eval's ``acc_norm`` score, characters of the choice text (an empty choice
    counts as one character, where lm-eval would divide by zero)."""
    return np.asarray(ll, dtype=float) / np.array([max(len(c), 1) for c in choices], dtype=float)


def lm_eval_correct(ll: np.ndarray, choices: list[str], gold: int | list[int]) -> dict[str, float]:
    """``{"acc", "acc_norm"}`` of one document as lm-eval's ``process_results`` scores it: 1.0 when the argmax
    (the first on a tie) of ``ll`` / of :func:`norm_logits` is the gold (or one of the golds), else 0.0."""
    golds = gold if isinstance(gold, list) else [gold]
    return {"acc": float(int(np.argmax(ll)) in golds),
            "acc_norm": float(int(np.argmax(norm_logits(ll, choices))) in golds)}


def _pad(p: np.ndarray, k: int) -> list[float]:
    """A distribution over a document's own choices, padded with zeros to the task's largest choice count (the
    metric table needs one label set; an absent choice has probability 0 and is never gold)."""
    return [*map(float, p), *([0.0] * (k - len(p)))]


# -- one task ----------------------------------------------------------------------------------------------------
def calibration_rows(lls: list[np.ndarray], choices: list[list[str]],
                     golds: list) -> tuple[dict[str, list[dict]], list[str]]:
    """``({row: records}, notes)`` of one task's documents, given in canonical (doc_id) order: ``lls[i]`` the
    choice log-likelihoods, ``choices[i]`` the choice texts, ``golds[i]`` the gold index or indices. A row that
    cannot be computed is left out with a note saying why (see the module docstring for each row)."""
    n = len(lls)
    ks = [len(ll) for ll in lls]
    k = max(ks)
    notes: list[str] = []
    probs = {
        "loglik": [softmax(ll) for ll in lls],
        "loglik_norm": [softmax(norm_logits(ll, ch)) for ll, ch in zip(lls, choices)],
    }
    rows = {name: [classification_record(_pad(p, k), g) for p, g in zip(ps, golds)] for name, ps in probs.items()}
    first = np.array([g[0] if isinstance(g, list) else g for g in golds])
    if len(set(ks)) > 1:
        notes.append(f"documents have {min(ks)}–{k} choices: distributions are padded with zeros to {k}; "
                     "temperature scaling and the prior/majority rows need one choice count and are skipped")
    else:
        too_few = crossfit_skip_reason(n, recalibration.MIN_FIT_DOCS)  # the filters' rule for `_ts` rows
        for name, ps in probs.items():
            if too_few is not None:
                notes.append(f"{name}_ts skipped: {too_few}")
                continue
            P = np.asarray(ps)

            def scale(fold, fit_on, apply_to, P=P):
                scaled, fit = recalibration.temperature_scale(P[fit_on], first[fit_on], P[apply_to])
                return [(p, fit) for p in scaled]

            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", recalibration.RecalibrationWarning)
                    out = crossfit(n, scale)
            except ValueError as e:  # one class only in a fold
                notes.append(f"{name}_ts skipped: {e}")
                continue
            rows[f"{name}_ts"] = [classification_record(p, g, temperature=fit.T, at_bound=fit.at_bound)
                                  for (p, fit), g in zip(out, golds)]
        for kind in ("prior", "majority"):
            def ref(fold, fit_on, apply_to, kind=kind):
                p = references.reference_probs(kind, k, len(apply_to), train_golds=[golds[i] for i in fit_on])
                if p is None:  # the other fold is empty (one document)
                    raise ValueError("no document in the other fold")
                return list(p)

            try:
                rows[kind] = [classification_record(p, g) for p, g in zip(crossfit(n, ref), golds)]
            except ValueError as e:
                notes.append(f"{kind} skipped: {e}")
    rows["uniform"] = [classification_record(_pad(references.reference_probs("uniform", kk, 1)[0], k), g)
                       for kk, g in zip(ks, golds)]
    return {name: rows[name] for name in ROWS if name in rows}, notes


def _row_order(names: Iterable[str]) -> list[str]:
    return sorted(names, key=lambda n: (ROWS.index(n) if n in ROWS else len(ROWS), n))


def calibrate_task(task: str, config: dict, samples: Path, lm_eval_metrics: dict | None = None,
                   seed: int = T.CI_SEED) -> dict:
    """The calibration of one ``multiple_choice`` task from its samples file: ``{"status": "computed", "filter",
    "n_docs", "columns", "rows": {row: metrics}, "notes", "lm_eval": {acc, acc_norm as lm-eval reported}}``, or
    ``{"status": "skipped", "reason"}`` (a semcal task, a ``multiple_input`` task)."""
    from semcal_eval.report import task_rows

    delimiter, mutual_info = choice_settings(config)
    by_filter: dict[str, list[tuple[int, np.ndarray, list[str], object]]] = {}
    dropped: dict[str, int] = {}
    for row in iter_samples(samples):
        if row_record(row) is not None:
            return {"status": "skipped", "reason": "semcal task: its rows are in the semcal summary already"}
        if len({c for c, _ in _arguments(row)}) > 1:
            return {"status": "skipped", "reason": (
                "multiple_input task (one context per choice, e.g. winogrande): its gold is doc_to_text's index, "
                "which lm-eval does not log")}
        ll, choices = choice_logliks(row, delimiter, mutual_info)
        gold = mc_gold(row.get("target"), choices)
        f = str(row.get("filter", "none"))
        if gold is None:
            dropped[f] = dropped.get(f, 0) + 1
            continue
        by_filter.setdefault(f, []).append((int(row["doc_id"]), ll, choices, gold))
    if not by_filter:
        raise CalibrateError(f"{samples}: no document of task {task} with a gold among its choices")
    # lm-eval's default filter of a multiple_choice task is "none"; a task with several reports the first
    f = "none" if "none" in by_filter else next(iter(by_filter))
    docs = sorted(by_filter[f], key=lambda d: d[0])  # canonical order: the folds of core.crossfit
    rows, notes = calibration_rows([d[1] for d in docs], [d[2] for d in docs], [d[3] for d in docs])
    if dropped.get(f):
        notes.append(f"{dropped[f]} document(s) whose gold is not among the choices left out (lm-eval scores them 0)")
    if len(by_filter) > 1:
        notes.append(f"filters {sorted(by_filter)}: rows computed for filter {f!r}")
    columns = T.headline_columns(to_arrays(rows["loglik"]))
    # the board's choice: no bootstrap CI for AUROC (no per-document loss: 1000 sklearn calls per row)
    no_ci = {T.ROLES[T.CLASSIFICATION][r] for r in T.BOARD_NO_CI_ROLES}
    ci_names = [c for c in columns if c in T.CI_METRICS and c not in no_ci]
    table, _ = task_rows({name: {"items": items} for name, items in rows.items()}, names=columns,
                         ci_names=ci_names, seed=seed)
    lm = {m: (lm_eval_metrics or {}).get(f"{m},{f}") for m in ("acc", "acc_norm")}
    return {"status": "computed", "filter": f, "n_docs": len(docs), "columns": columns, "rows": table,
            "notes": notes, "lm_eval": {m: v for m, v in lm.items() if v is not None}}


# -- a run -------------------------------------------------------------------------------------------------------
def calibrate_run(run: str | Path, seed: int = T.CI_SEED) -> dict:
    """``{"results": path, "tasks": {task: calibrate_task(...) | {"status": "skipped", "reason"}}, "seconds"}``
    for every task of the run in ``run`` (an ``--output_path`` folder holding one run, or a ``results_*.json``).
    Raises :class:`~semcal_eval.runs.RunError` when a ``multiple_choice`` task has no samples file."""
    started = time.perf_counter()
    results_path = find_results(run)
    results = read_results(results_path)
    configs = results.get("configs") or {}
    tasks: dict[str, dict] = {}
    mc = []
    for task in results["results"]:
        cfg = configs.get(task)
        if cfg is None:
            tasks[task] = {"status": "skipped", "reason": "group: its tasks are listed on their own"}
            continue
        kind = cfg.get("output_type")
        if kind != "multiple_choice" and _semcal_metrics(cfg):
            tasks[task] = {"status": "skipped", "output_type": kind,
                           "reason": "semcal task: its rows are in the semcal summary already"}
        elif kind == "multiple_choice":
            mc.append(task)
        else:
            tasks[task] = {"status": "skipped", "output_type": kind,
                           "reason": SKIP_REASONS.get(kind, f"output_type {kind}: no choice distribution")}
    files = locate_run(results_path, mc)  # a missing samples file is an error naming --log_samples
    for task in mc:
        tasks[task] = {"output_type": "multiple_choice",
                       **calibrate_task(task, configs[task], files.samples_paths[task],
                                        results["results"].get(task), seed)}
    order = list(results["results"])
    return {"results": str(results_path), "tasks": {t: tasks[t] for t in order},
            "seconds": time.perf_counter() - started}


def _semcal_metrics(cfg: dict) -> bool:
    """Whether a logged task config scores with semcal's aggregations (a semcal task, or a stock task wrapped by
    one of semcal's task classes): its rows are in the semcal summary."""
    return any(isinstance(m, dict) and str(m.get("aggregation", "")).startswith("semcal_")
               for m in cfg.get("metric_list") or [])


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
        for name in _row_order(t["rows"]):
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


def has_multiple_choice(run: str | Path) -> bool:
    """Whether the run in ``run`` has a stock ``multiple_choice`` task (the CLI's cue to calibrate)."""
    configs = read_results(find_results(run)).get("configs") or {}
    return any(c.get("output_type") == "multiple_choice" for c in configs.values())


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
