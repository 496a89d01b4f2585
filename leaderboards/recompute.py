"""Validate one lm-eval run and recompute every metric from its per-document logs.

The run folder is read by :mod:`semcal_eval.runs` (unreadable files raise its ``RunError``). Checks, in order
(each failure raises :class:`~leaderboards.errors.SubmissionError` naming file, task, filter or metric):

1. every task in ``results`` is a known semcal task (:mod:`leaderboards.registry`) at the version its
   YAML declares;
2. per filter, no ``doc_id`` appears twice, and the number of rows equals ``n-samples.effective``;
3. coverage: without ``--limit`` the rows cover every document (``effective == original`` and the ids
   are ``0..original-1``); with a limit the recorded limit explains the count (lm-eval takes the
   first ``limit`` documents, or ``ceil(limit * original)`` for a fraction) and the ids are
   ``0..effective-1``; every filter covers the same documents;
4. each reported ``metric,filter`` value equals the task's registered aggregation (from the task YAML,
   never from the submitted ``configs``) applied to the logged items, within
   ``|reported - recomputed| <= ATOL + RTOL * |recomputed|`` (both NaN counts as equal);
   every metric a sample row names must be reported;
5. the per-document records are well formed: :func:`semcal_eval.core.records.check_record` per line (naming
   file and line; NaN/inf and out-of-range values), then :func:`~semcal_eval.core.records.to_arrays`
   (probability rows that do not sum to 1) — raising ``RecordError``.

The board's columns are the headline roles of the record kind in the one metric table
(:data:`semcal_eval.core.metric_table.ROLES`: ece, brier, nll, auroc, acc), computed by
:func:`~semcal_eval.core.metric_table.compute_all` with the table's bootstrap (``CI_N_BOOT`` resamples, seed
``CI_SEED``) for every role but AUROC.
"""

from __future__ import annotations

import hashlib
import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from semcal_eval.core import metric_table as T
from semcal_eval.core.records import canonical, check_record, to_arrays
from semcal_eval.runs import find_results, locate_run, read_results, read_samples

from .errors import SubmissionError
from .registry import REFERENCE_FILTERS, TaskSpec, load_registry, normalise_version

#: Tolerance for reported vs recomputed aggregates. The recomputation runs the same aggregation
#: on the same logged items, so only float formatting/summation order can differ.
ATOL = 1e-9
RTOL = 1e-6
#: Degenerate confidence: std below this, or at least this share of documents in one ECE bin.
DEGENERATE_STD = 1e-3
DEGENERATE_BIN_SHARE = 0.95

_FILTER_RE = re.compile(r"^[A-Za-z0-9_.+-]{1,64}$")
#: Roles without a bootstrap CI on the board: AUROC has no per-document loss, so its CI would be
#: CI_N_BOOT sklearn calls per row, dominating the submit time.
NO_CI_ROLES = ("auroc",)
#: Table metrics stored with a row besides its role columns (in board.json, not shown as columns), where they
#: apply to the record kind.
BOARD_EXTRAS = ("macro_f1", "auroc_class", "brier_conf", "soft_brier", "soft_ece", "soft_nll")
#: Where the board's records come from: the first of these metrics a row reports (each kind's headline ECE,
#: then accuracy), else its first metric.
MAIN_METRICS = tuple(dict.fromkeys([roles["ece"] for roles in T.ROLES.values()] + ["acc"]))


@dataclass
class Entry:
    """One (task, filter) row of a submission, with everything the board shows."""

    task: str
    task_version: str
    filter: str
    kind: str  # "classification" | "confidence"
    is_reference: bool
    n_docs: int
    n_original: int
    doc_set_hash: str
    reported: dict[str, float]  # metric -> reported aggregate (NaN allowed)
    board: dict[str, float]  # ece, brier, nll, auroc, acc (+ _ci_lo/_ci_hi), n_bins, extras
    conf: np.ndarray
    correct: np.ndarray
    degenerate: str  # "" or the reason


@dataclass
class Submission:
    """A validated run, ready to store."""

    content_hash: str
    results_path: Path
    provenance: dict
    limit: float | int | None
    entries: list[Entry] = field(default_factory=list)


def _is_group(results: dict, name: str) -> bool:
    subtasks = (results.get("group_subtasks") or {}).get(name)
    return bool(subtasks)


def _same(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= ATOL + RTOL * abs(b)


def _aggregation(spec: TaskSpec, metric: str):
    from lm_eval.api import registry

    import semcal_eval.harness.aggregations  # noqa: F401 - registers the semcal aggregations with lm-eval

    name = spec.metrics.get(metric)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn = registry.get_aggregation(name) if name else registry.get_metric_aggregation(metric)
    if fn is None:
        raise SubmissionError(
            f"task {spec.name}: no registered aggregation {name or metric!r} for metric {metric} "
            f"(declared in {spec.yaml_path}); is semcal_eval.harness.aggregations up to date?"
        )
    return fn


def _expected_effective(limit, original: int) -> int:
    if limit is None:
        return original
    n = int(math.ceil(original * limit)) if limit < 1.0 else int(limit)
    return min(n, original)


def board_metrics(kind: str, items: list[dict], where: str) -> tuple[dict, np.ndarray, np.ndarray]:
    """Board columns for one filter's records, plus (conf, correct) for the reliability diagram.

    Column ``role`` is metric ``metric_table.ROLES[kind][role]`` of the table: for classification records
    ``{probs, gold, soft}`` ECE = 15-bin equal-width top-label ECE, Brier = multiclass Brier
    sum_k (p_k - t_k)^2, NLL = -log p_gold; for confidence records (QA ``{conf, correct}``) ECE = 10-bin ECE,
    Brier = mean (conf - correct)^2, NLL = binary cross-entropy; AUROC of the confidence for correct vs wrong
    and accuracy for both. ``<role>_ci_lo/_ci_hi``: the table's percentile bootstrap (every role but
    :data:`NO_CI_ROLES`); ``n_bins``: the headline ECE's bins (:data:`metric_table.ROLE_BINS`).
    """
    roles = T.ROLES[kind]
    ci_names = [m for role, m in roles.items() if role not in NO_CI_ROLES]
    try:
        a = to_arrays(items)
        vals = T.compute_all(a, [*roles.values(), *BOARD_EXTRAS], ci_names=ci_names)
    except (ValueError, TypeError, KeyError) as e:
        raise SubmissionError(f"{where}: {e}") from e
    out: dict = {"n_bins": T.ROLE_BINS[kind]}
    for role, m in roles.items():
        out[role] = vals[m]
        if f"{m}_ci_lo" in vals:
            out[f"{role}_ci_lo"], out[f"{role}_ci_hi"] = vals[f"{m}_ci_lo"], vals[f"{m}_ci_hi"]
    for extra in BOARD_EXTRAS:
        if extra in vals and extra not in roles.values():
            out[extra] = vals[extra]
    return out, np.asarray(a.conf, dtype=np.float64), np.asarray(a.correct, dtype=np.float64)


def degenerate_reason(conf: np.ndarray, n_bins: int) -> str:
    """Why this confidence vector is degenerate ("" if it is not): std(conf) < 1e-3, or >= 95% of
    documents in one equal-width bin of the task's ECE binning."""
    from semcal_eval.core.metrics import bin_indices

    if len(conf) == 0:
        return ""
    sd = float(np.std(conf))
    if sd < DEGENERATE_STD:
        sd = 0.0 if sd < 1e-12 else sd  # float noise of a constant vector: say 0
        return f"confidence std {sd:.2g} < {DEGENERATE_STD:g}"
    share = np.bincount(bin_indices(conf, n_bins), minlength=n_bins).max() / len(conf)
    if share >= DEGENERATE_BIN_SHARE:
        return f"{share:.0%} of confidences in one of {n_bins} bins"
    return ""


def _num(v, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise SubmissionError(f"{where}: reported value {v!r} is not a number")
    return float(v)


def validate_run(output_dir: str | Path, tasks_dir: str | Path | None = None) -> Submission:
    """Read, validate and recompute an lm-eval run; return a :class:`Submission`.

    Raises :class:`~leaderboards.errors.SubmissionError` (refused by the board),
    :class:`semcal_eval.runs.RunError` (unreadable run folder) or
    :class:`semcal_eval.core.records.RecordError` (a malformed per-document record, naming file and line);
    all are ValueErrors, listed together in :data:`leaderboards.errors.REJECTED`.
    """
    registry = load_registry(tasks_dir)
    results_path = find_results(output_dir)
    results = read_results(results_path)
    res = results["results"]
    tasks = sorted(t for t in res if not _is_group(results, t))
    if not tasks:
        raise SubmissionError(f"{results_path}: the results hold no task")
    for t in tasks:
        if t not in registry:
            known = ", ".join(sorted(registry)) or "(none found)"
            raise SubmissionError(f"{results_path}: task {t!r} is not a semcal task; known tasks: {known}")
        got = normalise_version((results.get("versions") or {}).get(t))
        if got != registry[t].version:
            raise SubmissionError(
                f"{results_path}: task {t} has version {got}, the board knows version {registry[t].version}; "
                "rerun with the current semcal task definitions"
            )
    run = locate_run(results_path, tasks)
    config = results.get("config") or {}
    limit = config.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0):
        raise SubmissionError(f"{results_path}: config.limit {limit!r} is not a positive number")

    hasher = hashlib.sha256()
    hasher.update(canonical({k: results.get(k) for k in ("results", "versions", "n-samples")}))
    entries: list[Entry] = []
    for task in tasks:
        spec = registry[task]
        sp = run.samples_paths[task]
        rows = read_samples(sp)
        ns = (results.get("n-samples") or {}).get(task)
        if not isinstance(ns, dict) or not all(isinstance(ns.get(k), int) for k in ("original", "effective")):
            raise SubmissionError(f"{results_path}: n-samples.{task} must hold integer 'original' and 'effective'")
        original, effective = ns["original"], ns["effective"]
        by_filter: dict[str, list[dict]] = {}
        for r in rows:
            if not isinstance(r.get("doc_id"), int) or isinstance(r.get("doc_id"), bool):
                raise SubmissionError(f"{sp}:{r['_line']}: doc_id missing or not an integer")
            if not isinstance(r.get("filter"), str):
                raise SubmissionError(f"{sp}:{r['_line']}: 'filter' missing or not a string")
            by_filter.setdefault(r["filter"], []).append(r)
        if not by_filter:
            raise SubmissionError(f"{sp}: no sample rows")
        for f in by_filter:
            # Task classes may build their filter_list in code (SemSoftTask does), so only a YAML-declared
            # list is enforced; any name must still be a plain identifier.
            if not _FILTER_RE.match(f):
                raise SubmissionError(f"{sp}: filter name {f[:40]!r} is not a plain identifier")
            if spec.filters and f not in spec.filters:
                raise SubmissionError(
                    f"{sp}: filter {f!r} is not declared by task {task} (declared: {', '.join(spec.filters)})"
                )
        expected = _expected_effective(limit, original)
        if limit is None and effective != original:
            raise SubmissionError(
                f"{results_path}: task {task} evaluated {effective} of {original} documents without a recorded "
                "--limit; evaluate the whole split, or pass --limit so the partial coverage is shown"
            )
        if effective != expected:
            raise SubmissionError(
                f"{results_path}: task {task}: n-samples.effective is {effective} but limit {limit} of "
                f"{original} documents gives {expected}"
            )
        doc_ids_ref: list[int] | None = None
        for f, frows in sorted(by_filter.items()):
            seen: dict[int, int] = {}
            for r in frows:
                if r["doc_id"] in seen:
                    raise SubmissionError(
                        f"{sp}:{r['_line']}: doc_id {r['doc_id']} appears twice for filter {f} "
                        f"(first at line {seen[r['doc_id']]})"
                    )
                seen[r["doc_id"]] = r["_line"]
            if len(frows) != effective:
                raise SubmissionError(
                    f"{sp}: filter {f} has {len(frows)} sample rows but n-samples.effective is {effective}"
                )
            frows.sort(key=lambda r: r["doc_id"])
            ids = [r["doc_id"] for r in frows]
            if ids != list(range(effective)):
                missing = sorted(set(range(effective)) - set(ids))[:5]
                raise SubmissionError(
                    f"{sp}: filter {f} does not cover documents 0..{effective - 1} (missing e.g. {missing}); "
                    "lm-eval --samples subsets are not accepted, use --limit"
                )
            if doc_ids_ref is None:
                doc_ids_ref = ids
        doc_set_hash = hashlib.sha256(
            canonical([[r["doc_id"], r.get("doc_hash")] for r in next(iter(sorted(by_filter.items())))[1]])
        ).hexdigest()

        # reported metrics of this task, keyed by filter
        reported: dict[str, dict[str, float]] = {f: {} for f in by_filter}
        for key, val in res[task].items():
            if "," not in key:
                continue
            metric, _, f = key.partition(",")
            if metric.endswith("_stderr"):
                continue  # bootstrap stderr: not recomputed (see docs/LEADERBOARD.md)
            if f not in by_filter:
                raise SubmissionError(f"{results_path}: {task} reports {key} but the samples have no filter {f!r}")
            if metric not in spec.metrics:
                raise SubmissionError(
                    f"{results_path}: {task} reports metric {metric!r}, which task {task} does not declare"
                )
            reported[f][metric] = _num(val, f"{results_path}: {task} {key}")

        for f, frows in sorted(by_filter.items()):
            named = set()
            for r in frows:
                ms = r.get("metrics")
                if not isinstance(ms, list):
                    raise SubmissionError(f"{sp}:{r['_line']}: 'metrics' missing or not a list")
                named.update(ms)
            missing = sorted((named | set(spec.metrics)) - set(reported[f]))
            if missing:
                raise SubmissionError(
                    f"{results_path}: {task} filter {f}: metric(s) {', '.join(missing)} logged per document but "
                    "not reported in results; submit lm-eval's unedited output"
                )
            metrics_here = sorted(reported[f])
            if not metrics_here:
                raise SubmissionError(f"{results_path}: {task} filter {f}: no metric reported")
            # The board's columns come from the item under the main ECE metric. Contract 1 logs the same item
            # under every metric name, but a task may log a variant under a metric of its own (QA tasks put
            # exact-match correctness under "em"); each metric is recomputed from its own items below.
            first = next((m for m in MAIN_METRICS if m in metrics_here), metrics_here[0])
            for r in frows:
                for metric in metrics_here:
                    if metric not in r:
                        raise SubmissionError(f"{sp}:{r['_line']}: row for filter {f} lacks metric {metric}")
            main_items = [r[first] for r in frows]
            kind = check_record(main_items[0], f"{sp}:{frows[0]['_line']} metric {first}")
            for r, it in zip(frows, main_items):
                where = f"{sp}:{r['_line']} metric {first}"
                if check_record(it, where) != kind:
                    raise SubmissionError(f"{where}: a {kind} record was expected (the first row's kind), "
                                          "records of one filter must be one kind")
            for metric in metrics_here:
                items = main_items if metric == first else [r[metric] for r in frows]
                agg = _aggregation(spec, metric)
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        recomputed = float(agg(items))
                except (ValueError, TypeError, KeyError) as e:
                    raise SubmissionError(f"{sp}: {task} filter {f} metric {metric}: items rejected: {e}") from e
                rep_v = reported[f][metric]
                if not _same(rep_v, recomputed):
                    raise SubmissionError(
                        f"{results_path}: {task} metric {metric},{f} is reported as {rep_v!r} but recomputes to "
                        f"{recomputed!r} from {sp.name} (tolerance {ATOL:g} + {RTOL:g}*|value|); rejected"
                    )
            board, conf, correct = board_metrics(kind, main_items, f"{sp} ({task}, filter {f})")
            entries.append(
                Entry(
                    task=task,
                    task_version=spec.version,
                    filter=f,
                    kind=kind,
                    is_reference=f in REFERENCE_FILTERS,
                    n_docs=effective,
                    n_original=original,
                    doc_set_hash=doc_set_hash,
                    reported=reported[f],
                    board=board,
                    conf=conf,
                    correct=correct,
                    degenerate=degenerate_reason(conf, board["n_bins"]),
                )
            )
            # Identity of a row = which document, prompt and target, and the logged item (the same under
            # every metric name, checked above); canonical JSON so formatting and key order do not matter.
            hasher.update(f"\x00{task}\x00{f}\x00".encode())
            for r, it in zip(frows, main_items):
                variants = {m: r[m] for m in metrics_here if r[m] is not it and r[m] != it}
                hasher.update(canonical([r["doc_id"], r.get("doc_hash"), r.get("prompt_hash"), r.get("target_hash"),
                                          it, variants]))
                hasher.update(b"\n")

    prov_keys = ("git_hash", "date", "lm_eval_version", "transformers_version", "model_name", "model_source",
                 "total_evaluation_time_seconds", "task_hashes", "n-shot", "chat_template_sha",
                 "system_instruction_sha")
    provenance = {k: results.get(k) for k in prov_keys if k in results}
    provenance["config"] = config
    provenance["results_file"] = results_path.name
    return Submission(
        content_hash=hasher.hexdigest(), results_path=results_path, provenance=provenance, limit=limit,
        entries=entries,
    )
