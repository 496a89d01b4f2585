"""The rows of a run: every row that ``semcal-eval calibrate``, ``report`` and ``summary`` and the board show,
computed from a run's logged samples. The verbs (argparse, printing, Markdown, files) call this module; no
library module imports a verb.

* **semcal tasks** (per-document records logged by semcal's task classes): :func:`load_run` reads them, one
  row per filter; :func:`task_rows` scores each row with the one metric table (:func:`row_metrics`), adds the
  temperature-scaled copies a report asks for (``+T(val)``: fitted on a validation run; ``+T(half)``: fitted on
  one half of the documents, :func:`temperature_rows`) and reads the fitted T of the cross-fitted ``_ts`` rows;
  :func:`headline_table` is the summary's table (the headline columns, the ECE with its CI) and
  :func:`prior_rows` the ``prior`` row a task without one borrows from a sibling on the same documents.
* **stock lm-eval ``multiple_choice`` tasks** (recomputed from the per-choice log-likelihoods lm-eval logged,
  ``--log_samples``; lm-eval's own ``acc`` / ``acc_norm`` stay lm-eval's). What lm-eval 0.4.13 logs and scores
  for a ``multiple_choice`` document (``ConfigurableTask.construct_requests`` and ``process_results``): one
  ``loglikelihood`` request per choice, ``(context, target_delimiter + choice)``; ``filtered_resps`` holds
  ``[ll_i, is_greedy_i]`` per choice, ``ll_i`` the summed log-probability of the continuation's tokens.
  ``acc`` = [argmax_i ll_i is the gold]; ``acc_norm`` = [argmax_i ll_i / len(choice_i) is the gold], ``len``
  counting the *characters* of the choice text (``doc_to_choice``, without the delimiter). Rows per task
  (:func:`calibration_rows`, every one a list of :func:`semcal_eval.core.records.classification_record`):

  * ``loglik``: p_i = softmax_i(ll_i) — the normalisation of ``acc`` (same argmax), and the distribution of
    lm-eval's own ``brier_score`` metric;
  * ``loglik_norm``: p_i = softmax_i(ll_i / len_i) — the normalisation of ``acc_norm`` (same argmax);
  * ``loglik_ts`` / ``loglik_norm_ts``: the cross-fitted temperature step of those (:func:`temperature_step`,
    the step the ``crossfit_temperature`` filter and the board's re-check call too), skipped on fewer documents
    than it needs (:func:`temperature_skip_reason`, the rule the filters, the task and the board follow);
  * ``prior`` / ``majority``: the rules of :mod:`semcal_eval.core.references` with the *other fold's* gold
    labels as the training labels (:func:`semcal_eval.core.crossfit.crossfit`, so no document sees its own
    label); ``uniform``: 1/K.

  :func:`calibrate_run` lists every task of a run: computed, or skipped with its reason (another output type, a
  group, a semcal task whose rows the summary already shows, a ``multiple_input`` task). A ``multiple_choice``
  task without its samples file is an error that says to rerun with ``--log_samples``.
"""

from __future__ import annotations

import ast
import math
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import softmax

from semcal_eval.core import crossfit
from semcal_eval.core import metric_table as T
from semcal_eval.core import recalibration, references
from semcal_eval.core.records import classification_record, first_gold, to_arrays
from semcal_eval.qa.estimators import ESTIMATORS
from semcal_eval.runs import (RunError, find_results, iter_samples, load_records, locate_run, read_results,
                              row_record)
from semcal_eval.semsoft import rows as rows_table

__all__ = ["ROWS", "DERIVED", "MAIN_FILTERS", "SKIP_REASONS", "MIN_TEMPERATURE_DOCS", "RowsError", "CalibrateError",
           "RunSource", "open_run", "temperature_skip_reason", "temperature_step", "load_run", "run_sweep_taus",
           "row_metrics", "temperature_rows", "task_rows", "is_ranking_row", "mask_ranking_rows", "headline_table",
           "doc_key", "prior_rows", "board_row_metrics", "choice_settings", "choice_logliks", "mc_gold", "norm_logits",
           "lm_eval_correct", "calibration_rows", "calibration_row_order", "calibrate_task", "calibrate_run",
           "has_multiple_choice"]

#: the stock rows, in reading order (the model's rows, their recalibrated copies, then the model-free references)
ROWS: tuple[str, ...] = ("loglik", "loglik_norm", "loglik_ts", "loglik_norm_ts", *references.KINDS)
#: the stock rows fitted across the evaluated documents (the board's near-duplicate test compares the others)
DERIVED: tuple[str, ...] = ("loglik_ts", "loglik_norm_ts")
#: the semcal rows a report temperature-scales on a validation run or a half: the sources of the rows table's
#: cross-fitted ``<row>_ts`` rows (constrained, semsoft)
MAIN_FILTERS: tuple[str, ...] = tuple(r.name.removesuffix("_ts") for r in rows_table.ROWS
                                      if r.kind == "recalibrated")

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


class RowsError(ValueError):
    """A run folder whose rows cannot be read; the message names the file and the fix."""


# -- a run's files ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunSource:
    """One run as the verbs and the board read it: its ``results_*.json`` (the path, and the content read by
    :func:`semcal_eval.runs.read_results` within its size and type limits); :meth:`samples_paths` finds each
    task's samples file of the same run."""

    results_path: Path
    results: dict

    def samples_paths(self, tasks: Iterable[str]) -> dict[str, Path]:
        """{task: its ``samples_<task>_<date>.jsonl``} (:func:`semcal_eval.runs.locate_run`: a missing one is a
        RunError that says to rerun with ``--log_samples``)."""
        return locate_run(self.results_path, list(tasks)).samples_paths


def open_run(run: str | Path) -> RunSource:
    """The run in ``run`` (an ``--output_path`` folder holding one run, or a ``results_*.json``)."""
    results_path = find_results(run)
    return RunSource(results_path, read_results(results_path))


# -- the cross-fitted temperature step ----------------------------------------------------------------------------
#: the fewest documents the cross-fitted temperature step runs on (every fold fits on the others:
#: ``N_FOLDS * MIN_FIT_DOCS`` = 40); :func:`temperature_skip_reason` is the rule, this its threshold for messages
MIN_TEMPERATURE_DOCS: int = crossfit.N_FOLDS * recalibration.MIN_FIT_DOCS


def temperature_skip_reason(n: int) -> str | None:
    """Why the cross-fitted temperature step (:func:`temperature_step`) cannot run on ``n`` documents, or None:
    :func:`semcal_eval.core.crossfit.skip_reason` with a temperature fit's minimum per fold
    (:data:`semcal_eval.core.recalibration.MIN_FIT_DOCS` = 20, so ``n >= 40``). The ``_ts`` rows are skipped, not
    refused, below it; the filters, the tasks' warning, the stock rows and the board's submit check read it."""
    return crossfit.skip_reason(n, recalibration.MIN_FIT_DOCS)


def temperature_step(probs, labels) -> list[tuple[np.ndarray, recalibration.TemperatureFit, int]]:
    """The cross-fitted temperature step: ``(scaled probs, fit, fold)`` of each of ``n`` documents in canonical
    (doc_id) order, each fold (:mod:`semcal_eval.core.crossfit`) scaled with the temperature fitted on the other
    (:func:`semcal_eval.core.recalibration.temperature_scale`: p_i ∝ exp(log p_i / T), T minimising the other
    fold's NLL of ``labels``). ``probs``: n × K distributions; ``labels``: each document's gold class. Raises
    ValueError when a fold cannot be fitted (one class only, or fewer documents than
    :func:`temperature_skip_reason` allows: check it first to skip instead)."""
    P = np.asarray(probs, dtype=float)
    y = np.asarray(labels)
    if len(P) != len(y):
        raise ValueError(f"temperature_step: {len(P)} distributions but {len(y)} labels; pass one label per document")

    def scale(fold, fit_on, apply_to):
        scaled, fit = recalibration.temperature_scale(P[fit_on], y[fit_on], P[apply_to])
        return [(p, fit, fold) for p in scaled]

    return crossfit.crossfit(len(P), scale)


# -- semcal tasks ----------------------------------------------------------------------------------------------
def load_run(path: str | Path, allow_empty: bool = False) -> dict[str, dict[str, dict]]:
    """{task: {filter: {"doc_ids": [...], "items": [...]}}} from an lm-eval ``--output_path`` folder, read by
    the one reader of runs (:func:`semcal_eval.runs.load_records`). ``allow_empty``: a run of stock tasks only
    (no semcal records; its rows come from :func:`calibrate_run`)."""
    out = load_records(path)
    if not out and not allow_empty:
        raise RowsError(
            f"{path}: no semcal per-document items in the samples files; run lm-eval with "
            "--log_samples on semcal tasks (and without --predict_only)"
        )
    return out


def run_sweep_taus(run_dir) -> dict[str, dict[str, float]]:
    """{task: {sweep row: τ}} from the task configs lm-eval logged in the run's results files (the typed τ of
    each row's ``semsoft_select`` step; :func:`semcal_eval.semsoft.rows.sweep_taus`)."""
    p = Path(run_dir)
    files = [p] if p.is_file() else sorted({*p.glob("results_*.json"), *p.glob("*/results_*.json")})
    out: dict[str, dict[str, float]] = {}
    for f in files:
        for task, cfg in (read_results(f).get("configs") or {}).items():
            if isinstance(cfg, dict):
                out.setdefault(task, {}).update(rows_table.sweep_taus(cfg.get("filter_list")))
    return out


def row_metrics(items: list[dict], ci: bool = True, seed: int = 0, names=None, ci_names=None) -> dict[str, float]:
    """Every metric of the table (or of ``names``) that applies to one row (a filter's records), with bootstrap
    CIs (for ``ci_names`` only, when given)."""
    return T.compute_all(items, names, with_ci=ci, ci_names=ci_names, seed=seed)


def temperature_rows(fit_items: list[dict], apply_items: list[dict]) -> tuple[list[dict], recalibration.TemperatureFit]:
    """Fit T on ``fit_items``' log-probabilities and apply it to ``apply_items`` (Guo et al. 2017)."""
    scaled, fit = recalibration.temperature_scale(
        [it["probs"] for it in fit_items], [first_gold(it["gold"]) for it in fit_items],
        [it["probs"] for it in apply_items])
    return [{**it, "probs": p.tolist(), "temperature": fit.T} for it, p in zip(apply_items, scaled)], fit


def task_rows(
    filters: dict[str, dict], val_filters: dict[str, dict] | None = None, halves: bool = False, seed: int = 0,
    names=None, ci_names=None,
) -> tuple[dict[str, dict], dict[str, dict]]:
    """{row name: metrics} and {row name: items} for one task (``names`` / ``ci_names``: see :func:`row_metrics`).
    ``val_filters``: a validation run's rows of the task, whose fitted T makes the ``<row>+T(val)`` rows;
    ``halves``: T fitted on one half of the documents and every row reported on the other (``<row>+T(half)``)."""
    rows: dict[str, list[dict]] = {}
    notes: dict[str, dict] = {}
    if halves:
        ids = filters[next(iter(filters))]["doc_ids"]
        fit_ids, eval_ids = recalibration.split_halves(ids, seed=seed)
        fit_set, eval_set = set(map(str, fit_ids)), set(map(str, eval_ids))
        for name, f in filters.items():
            if name.endswith("_ts"):
                continue  # cross-fitted rows used both halves; the halves protocol replaces them
            pairs = list(zip(map(str, f["doc_ids"]), f["items"]))
            rows[name] = [it for d, it in pairs if d in eval_set]
            if name in MAIN_FILTERS:
                fit_items = [it for d, it in pairs if d in fit_set]
                scaled, fit = temperature_rows(fit_items, rows[name])
                rows[f"{name}+T(half)"] = scaled
                notes[f"{name}+T(half)"] = {"temperature": fit.T, "at_bound": fit.at_bound}
    else:
        rows = {name: f["items"] for name, f in filters.items()}
        for name in MAIN_FILTERS:
            if val_filters and name in val_filters and name in filters:
                scaled, fit = temperature_rows(val_filters[name]["items"], filters[name]["items"])
                rows[f"{name}+T(val)"] = scaled
                notes[f"{name}+T(val)"] = {"temperature": fit.T, "at_bound": fit.at_bound}
        for name, f in filters.items():
            temps = [it.get("temperature") for it in f["items"] if it.get("temperature") is not None]
            if temps:
                bound = any(it.get("at_bound") for it in f["items"])
                notes[name] = {"temperature": float(np.mean(temps)), "at_bound": bound}
    table = {
        name: {"n": len(items), **row_metrics(items, seed=seed, names=names, ci_names=ci_names), **notes.get(name, {})}
        for name, items in rows.items()
    }
    return table, rows


def is_ranking_row(name: str) -> bool:
    """An estimator row whose confidence is a ranking score (no calibration metric without a fitted map)."""
    est = ESTIMATORS.get(name)
    return est is not None and not est.probability


def mask_ranking_rows(table: dict[str, dict]) -> None:
    """Set every metric but the ranking ones (:data:`metric_table.RANK_METRICS`, their CIs, ``n``) of a ranking
    row (:func:`is_ranking_row`) to NaN, in place: a ranking score has no calibration of its own."""
    for name, m in table.items():
        if is_ranking_row(name):
            for k in list(m):
                if k.split("_ci_")[0] not in T.RANK_METRICS and k != "n":
                    m[k] = math.nan


def _ece_column(columns: list[str]) -> str:
    return next(c for c in columns if "ece" in c)


def headline_table(filters: dict[str, dict], seed: int = T.CI_SEED) -> tuple[dict[str, dict], list[str]]:
    """``(table, columns)`` of one task's rows on the metric table's headline columns
    (:func:`semcal_eval.core.metric_table.headline_columns`), the one ECE column with its bootstrap CI, ranking
    rows masked (:func:`mask_ranking_rows`)."""
    columns = T.headline_columns(to_arrays(next(iter(filters.values()))["items"]))
    table, _ = task_rows(filters, names=columns, ci_names=[_ece_column(columns)], seed=seed)
    mask_ranking_rows(table)  # a ranking score (EigV, degree, ...) has no calibration metric of its own
    return table, columns


def doc_key(f: dict) -> tuple:
    """The documents of a row (doc_ids, gold labels, soft targets): two rows with one key are on the same documents."""
    return tuple(zip(map(str, f["doc_ids"]), (str(it.get("gold")) for it in f["items"]),
                     (it.get("soft") for it in f["items"])))


def prior_rows(run: dict[str, dict[str, dict]], seed: int) -> dict[tuple, dict]:
    """The headline metrics of the ``prior`` row of each task of a run (no CI), keyed by its documents
    (:func:`doc_key`), so a task without one (a stock ``*_base`` task) gets the "beats prior" mark from a sibling
    on the same documents."""
    out: dict[tuple, dict] = {}
    for filters in run.values():
        if "prior" in filters:
            f = filters["prior"]
            table, _ = task_rows({"prior": f}, names=T.headline_columns(to_arrays(f["items"])), ci_names=[],
                                 seed=seed)
            out[doc_key(f)] = table["prior"]
    return out


def board_row_metrics(kind: str, items: list[dict]) -> tuple[dict, np.ndarray, np.ndarray]:
    """The board's columns of one row (a filter's records of kind ``kind``), plus (conf, correct) for its
    reliability diagram: column ``role`` is metric ``metric_table.ROLES[kind][role]`` of the table, with
    ``<role>_ci_lo/_ci_hi`` (the table's percentile bootstrap, every role but
    :data:`metric_table.BOARD_NO_CI_ROLES`), ``n_bins`` (the headline ECE's bins,
    :data:`metric_table.ROLE_BINS`) and the extras of :data:`metric_table.BOARD_EXTRAS` that apply
    (:func:`metric_table.board_metric_names`). Malformed records raise ValueError / TypeError / KeyError."""
    roles = T.ROLES[kind]
    names, ci_names = T.board_metric_names(kind)
    a = to_arrays(items)
    vals = T.compute_all(a, names, ci_names=ci_names)
    out: dict = {"n_bins": T.ROLE_BINS[kind]}
    for role, m in roles.items():
        out[role] = vals[m]
        if f"{m}_ci_lo" in vals:
            out[f"{role}_ci_lo"], out[f"{role}_ci_hi"] = vals[f"{m}_ci_lo"], vals[f"{m}_ci_hi"]
    for extra in T.BOARD_EXTRAS:
        if extra in vals and extra not in roles.values():
            out[extra] = vals[extra]
    if a.kind != "classification":
        from semcal_eval.qa.judge_card import board_fields

        out.update(board_fields(items))  # QA rows: the judge card and the corrected figures (issue 52)
    return out, np.asarray(a.conf, dtype=np.float64), np.asarray(a.correct, dtype=np.float64)


# -- stock multiple_choice tasks: one document ----------------------------------------------------------------
class CalibrateError(RunError):
    """A run or task that cannot be calibrated; the message names the file or task and the fix."""


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


# -- stock multiple_choice tasks: one task ---------------------------------------------------------------------
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
        too_few = temperature_skip_reason(n)  # the filters' rule for `_ts` rows
        for name, ps in probs.items():
            if too_few is not None:
                notes.append(f"{name}_ts skipped: {too_few}")
                continue
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", recalibration.RecalibrationWarning)
                    out = temperature_step(ps, first)
            except ValueError as e:  # one class only in a fold
                notes.append(f"{name}_ts skipped: {e}")
                continue
            rows[f"{name}_ts"] = [classification_record(p, g, temperature=fit.T, at_bound=fit.at_bound)
                                  for (p, fit, _), g in zip(out, golds)]
        for kind in ("prior", "majority"):
            def ref(fold, fit_on, apply_to, kind=kind):
                p = references.reference_probs(kind, k, len(apply_to), train_golds=[golds[i] for i in fit_on])
                if p is None:  # the other fold is empty (one document)
                    raise ValueError("no document in the other fold")
                return list(p)

            try:
                rows[kind] = [classification_record(p, g) for p, g in zip(crossfit.crossfit(n, ref), golds)]
            except ValueError as e:
                notes.append(f"{kind} skipped: {e}")
    rows["uniform"] = [classification_record(_pad(references.reference_probs("uniform", kk, 1)[0], k), g)
                       for kk, g in zip(ks, golds)]
    return {name: rows[name] for name in ROWS if name in rows}, notes


def calibration_row_order(names: Iterable[str]) -> list[str]:
    """The calibration rows of ``names`` in :data:`ROWS` order, any other name after them (alphabetical)."""
    return sorted(names, key=lambda n: (ROWS.index(n) if n in ROWS else len(ROWS), n))


def calibrate_task(task: str, config: dict, samples: Path, lm_eval_metrics: dict | None = None,
                   seed: int = T.CI_SEED) -> dict:
    """The calibration of one ``multiple_choice`` task from its samples file: ``{"status": "computed", "filter",
    "n_docs", "columns", "rows": {row: metrics}, "notes", "lm_eval": {acc, acc_norm as lm-eval reported}}``, or
    ``{"status": "skipped", "reason"}`` (a semcal task, a ``multiple_input`` task)."""
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


# -- stock multiple_choice tasks: a run ------------------------------------------------------------------------
def calibrate_run(run: str | Path, seed: int = T.CI_SEED) -> dict:
    """``{"results": path, "tasks": {task: calibrate_task(...) | {"status": "skipped", "reason"}}, "seconds"}``
    for every task of the run in ``run`` (an ``--output_path`` folder holding one run, or a ``results_*.json``).
    Raises :class:`~semcal_eval.runs.RunError` when a ``multiple_choice`` task has no samples file."""
    started = time.perf_counter()
    source = open_run(run)
    results_path, results = source.results_path, source.results
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
    samples = source.samples_paths(mc)  # a missing samples file is an error naming --log_samples
    for task in mc:
        tasks[task] = {"output_type": "multiple_choice",
                       **calibrate_task(task, configs[task], samples[task],
                                        results["results"].get(task), seed)}
    order = list(results["results"])
    return {"results": str(results_path), "tasks": {t: tasks[t] for t in order},
            "seconds": time.perf_counter() - started}


def _semcal_metrics(cfg: dict) -> bool:
    """Whether a logged task config scores with semcal's aggregations (a semcal task, or a stock task wrapped by
    one of semcal's task classes): its rows are in the semcal summary."""
    return any(isinstance(m, dict) and str(m.get("aggregation", "")).startswith("semcal_")
               for m in cfg.get("metric_list") or [])


def has_multiple_choice(run: str | Path) -> bool:
    """Whether the run in ``run`` has a stock ``multiple_choice`` task (the verbs' cue to calibrate)."""
    configs = read_results(find_results(run)).get("configs") or {}
    return any(c.get("output_type") == "multiple_choice" for c in configs.values())
