"""Validate one lm-eval run against the task's own dataset and recompute every metric from its records.

The run folder is read by :mod:`semcal_eval.runs` (regular files only, size limits checked before reading,
samples streamed one line at a time). :func:`validate_run` runs the board's named stages
(:mod:`leaderboards.stages`), each failure a :class:`~leaderboards.errors.SubmissionError` naming file, line,
task, filter, document or metric:

1. **shape** (:func:`~leaderboards.stages.check_shape`): ``results``, ``versions``, ``config``, ``n-samples``,
   ``group_subtasks`` and ``configs`` have the types lm-eval writes (a list where an object belongs is refused,
   not crashed on); every task is a known semcal task (:mod:`leaderboards.registry`) at the version its YAML
   declares, or a stock lm-eval ``multiple_choice`` task keyed by its config hash (:mod:`leaderboards.stock`,
   stages 3-5 in :mod:`leaderboards.stages.stock`); reported values are numbers;
2. **provenance** (:func:`~leaderboards.stages.check_provenance`): ``date``, versions, hashes, ``config`` and
   ``config.limit`` are validated;
3. **dataset** (:func:`~leaderboards.stages.check_dataset`, :mod:`leaderboards.dataset_check`): the board
   builds the task from its own task folder with the run's dataset metadata (``split``, subset settings) and
   its own data, and checks ``n-samples.original`` against the split's true size; **coverage** is computed by
   the board: ``full`` when the rows cover the whole split, ``partial`` when a recorded ``config.limit``
   explains the count (lm-eval takes the first ``limit`` documents, or ``ceil(limit * n)`` for a fraction);
   per document its ``doc_hash`` and ``target_hash`` (lm-eval's hashes, recomputed from the board's
   document) and, for classification records, the gold label and the soft target;
4. **records** (:func:`~leaderboards.stages.read_task_rows`): ids are ``0..effective-1``, none twice; **one
   canonical record per document** (per filter), read by :func:`semcal_eval.runs.row_record`: logged once and
   referenced (``"=<name>"``) under every other metric name, or (older logs) equal under every name; QA
   metrics such as ``em`` read a *view* of that one record (:mod:`semcal_eval.core.metric_table`); the
   records are well formed (:func:`semcal_eval.core.records.check_record`, then ``to_arrays``);
5. **metrics** (:func:`~leaderboards.stages.check_metrics`): each reported ``metric,filter`` equals the
   task's registered aggregation (from the task YAML, never from the submitted ``configs``) over the
   canonical records, within ``|reported - recomputed| <= ATOL + RTOL * |recomputed|`` (both NaN counts as
   equal).

The sixth stage, **tier**, is the spot check (:mod:`leaderboards.spotcheck`), run by ``board submit`` on the
validated run. Every board column and flag is computed from the canonical records (:func:`board_metrics`).
Reference rows (``prior``, ``majority``, ``uniform``) are computed by the board from the training split
(:mod:`leaderboards.references`); submitted reference rows are checked like any row but not stored.
Duplicates are detected on :attr:`Submission.predictions_hash`, a hash of the canonical model records, so
editing anything else (``alias``, ``_stderr`` strings, ``prompt_hash``, groups, a value within tolerance)
does not make a new measurement.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from semcal_eval import run_rows
from semcal_eval.core import metric_table as T
from semcal_eval.core.records import CLASSIFICATION, canonical, records_hash

from . import references
from .errors import SubmissionError
from .registry import REFERENCE_FILTERS, TaskSpec, load_registry, tasks_root
from .stages import (ATOL, RTOL, SCORING_METADATA, Coverage, RunShape, check_dataset, check_filters,  # noqa: F401
                     check_metrics, check_provenance, check_shape, provenance, read_task_rows, reported_metrics)
from .stages.stock import stock_rows

#: Degenerate confidence: std below this, or at least this share of documents in one ECE bin.
DEGENERATE_STD = 1e-3
DEGENERATE_BIN_SHARE = 0.95
#: The board's metric columns are the metric table's (semcal_eval.core.metric_table): each role's metric
#: (ROLES), the roles shown without a CI and the extra metrics stored with a row; named here for the site.
NO_CI_ROLES = T.BOARD_NO_CI_ROLES
BOARD_EXTRAS = T.BOARD_EXTRAS


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
    split: str = ""
    n_split: int = 0  # board-computed true size of the evaluation split
    coverage: str = "full"  # "full" | "partial" (computed by the board, never read from the run)
    doc_ids: list[int] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)  # the ONE canonical record per document, by doc_id
    predictions_hash: str = ""  # records_hash of ``records`` (the same predictions give the same hash)


@dataclass
class Submission:
    """A validated run, ready to store."""

    content_hash: str  # = predictions_hash (kept for the site's slugs)
    results_path: Path
    provenance: dict
    limit: float | int | None
    entries: list[Entry] = field(default_factory=list)
    predictions_hash: str = ""
    model_args: str = ""
    split: str = ""  # the evaluation split of the run's tasks ("a, b" when tasks differ)
    stock: dict[str, dict] = field(default_factory=dict)  # stock task key -> StockRows.verification()

    @property
    def unregistered_stock(self) -> list[str]:
        """The run's stock tasks whose config hash the board has not registered (their entries are self-reported)."""
        return sorted(k for k, v in self.stock.items() if not v["registered"])


def board_metrics(kind: str, items: list[dict], where: str) -> tuple[dict, np.ndarray, np.ndarray]:
    """Board columns for one filter's records, plus (conf, correct) for the reliability diagram.

    Column ``role`` is metric ``metric_table.ROLES[kind][role]`` of the table: for classification records
    ``{probs, gold, soft}`` ECE = 15-bin equal-width top-label ECE, Brier = multiclass Brier
    sum_k (p_k - t_k)^2, NLL = -log p_gold; for confidence records (QA ``{conf, correct}``) ECE = 10-bin ECE,
    Brier = mean (conf - correct)^2, NLL = binary cross-entropy; AUROC of the confidence for correct vs wrong
    and accuracy for both. ``<role>_ci_lo/_ci_hi``: the table's percentile bootstrap (every role but
    :data:`metric_table.BOARD_NO_CI_ROLES`); ``n_bins``: the headline ECE's bins (:data:`metric_table.ROLE_BINS`);
    the extras of :data:`metric_table.BOARD_EXTRAS` that apply (:func:`metric_table.board_metric_names`).
    Computed by :func:`semcal_eval.run_rows.board_row_metrics`; a malformed record is a SubmissionError.
    """
    try:
        return run_rows.board_row_metrics(kind, items)
    except (ValueError, TypeError, KeyError) as e:
        raise SubmissionError(f"{where}: {e}") from e


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


def _entry(task: str, spec: TaskSpec, f: str, kind: str, records: list[dict], cov: Coverage, doc_set_hash: str, *,
           is_reference: bool, reported: dict, where: str) -> Entry:
    board, conf, correct = board_metrics(kind, records, where)
    return Entry(
        task=task, task_version=spec.version, filter=f, kind=kind, is_reference=is_reference, n_docs=cov.effective,
        n_original=cov.n_split, doc_set_hash=doc_set_hash, reported=reported, board=board, conf=conf,
        correct=correct, degenerate=degenerate_reason(conf, board["n_bins"]), split=cov.split,
        n_split=cov.n_split, coverage=cov.coverage, doc_ids=list(range(cov.effective)), records=records,
        predictions_hash=records_hash(records),
    )


def validate_run(output_dir: str | Path, tasks_dir: str | Path | None = None, *,
                 data_dir: str | Path | None = None, stock_tasks: dict | None = None) -> Submission:
    """Read, validate against the dataset, and recompute an lm-eval run; return a :class:`Submission`.

    ``tasks_dir``: the board's task folder (default ``$SEMCAL_BOARD_TASKS_DIR`` / ``semcal_eval.TASKS_DIR``);
    ``data_dir``: where the board reads the datasets (default ``$SEMCAL_DATA_DIR``, else the hub);
    ``stock_tasks``: the board's registered stock tasks by config hash (:func:`leaderboards.stock.registered`;
    None: none registered, so every stock task of the run is self-reported).
    Raises :class:`~leaderboards.errors.SubmissionError` (refused by the board),
    :class:`semcal_eval.runs.RunError` (unreadable run folder) or
    :class:`semcal_eval.core.records.RecordError` (a malformed per-document record, naming file and line);
    all are ValueErrors, listed together in :data:`leaderboards.errors.REJECTED`.
    """
    try:
        return _validate_run(output_dir, tasks_dir, data_dir, stock_tasks or {})
    except ValueError as e:  # json.loads of an integer literal past Python's digit limit (not a JSON error)
        if "integer string conversion" not in str(e):
            raise
        raise SubmissionError(f"{output_dir}: a number in the run's files has more digits than Python parses "
                              f"({sys.get_int_max_str_digits()}); lm-eval never writes one, submit its unedited "
                              "files") from None
    except RecursionError:  # a structure nested just under the JSON parser's limit, reached by later code
        raise SubmissionError(f"{output_dir}: JSON nested too deeply to be an lm-eval output; submit lm-eval's "
                              "unedited files") from None



def _validate_run(output_dir, tasks_dir, data_dir, stock_tasks) -> Submission:
    """Stages 1-5 over every task of the run; the board's rows built from what they return."""
    registry = load_registry(tasks_dir)
    source = run_rows.open_run(output_dir)  # the run, read once by the library (semcal_eval.run_rows)
    results_path = source.results_path
    shape = check_shape(source.results, results_path, registry)  # 1. shape
    samples = source.samples_paths(shape.tasks)
    prov = check_provenance(shape.results, shape.config, str(results_path))  # 2. provenance
    entries: list[Entry] = []
    splits: list[str] = []
    hasher = hashlib.sha256()
    stock_checks: dict[str, dict] = {}
    for task in shape.tasks:
        if task in shape.stock:
            task_entries, cov = _stock_entries(task, shape, samples[task], prov.limit, stock_tasks,
                                               stock_checks)
        else:
            task_entries, cov = _task_entries(task, registry[task], shape, samples[task], prov.limit,
                                              tasks_root(tasks_dir), data_dir)
        splits.append(cov.split)
        for e in task_entries:
            entries.append(e)
            if not e.is_reference:
                hasher.update(canonical([task, e.split, e.doc_set_hash, e.filter, e.predictions_hash]))
                hasher.update(b"\n")
    prov.provenance["results_file"] = results_path.name
    predictions_hash = hasher.hexdigest()
    return Submission(
        content_hash=predictions_hash, results_path=results_path, provenance=prov.provenance, limit=prov.limit,
        entries=entries, predictions_hash=predictions_hash, model_args=prov.model_args,
        split=", ".join(dict.fromkeys(splits)), stock=stock_checks,
    )


def _task_entries(task: str, spec: TaskSpec, shape: RunShape, sp: Path, limit, root: Path,
                  data_dir) -> tuple[list[Entry], Coverage]:
    """One task through stages 1 (its reported values), 3 (dataset), 4 (records) and 5 (metrics): its model
    rows, then the board's own reference rows on the same documents."""
    rp = str(shape.results_path)
    reported = reported_metrics(shape.res[task], task, spec, rp)  # 1. shape of the reported values
    cov = check_dataset(task, shape, limit, root, data_dir)  # 3. dataset and coverage
    filters = read_task_rows(sp, task, spec, cov.docs, cov.effective, reported.every())  # 4. records
    check_filters(filters, reported.numbers, cov.effective, sp, rp, task)
    doc_ids = range(cov.effective)
    doc_set_hash = hashlib.sha256(canonical(([cov.subset] if cov.subset else [])
                                            + [[i, cov.docs.doc_hash(i)] for i in doc_ids])).hexdigest()
    entries: list[Entry] = []
    for f, flt in sorted(filters.items()):
        records = [flt.records[i] for i in doc_ids]
        flt.records.clear()  # the list holds them now: one record per document in memory
        check_metrics(records, f, spec, reported.numbers[f], reported.texts.get(f, {}), rp, sp)  # 5. metrics
        if f in REFERENCE_FILTERS:
            continue  # checked above, but the board computes its own reference rows (below)
        entries.append(_entry(task, spec, f, flt.kind, records, cov, doc_set_hash, is_reference=False,
                              reported=reported.numbers[f], where=f"{sp} ({task}, filter {f})"))
    for kind, recs in references.reference_records(cov.docs, list(doc_ids)).items():
        entries.append(_entry(task, spec, kind, CLASSIFICATION, recs, cov, doc_set_hash, is_reference=True,
                              reported={}, where=f"board reference {kind} ({task})"))
    return entries, cov


def _stock_entries(task: str, shape: RunShape, sp: Path, limit, stock_tasks: dict,
                   checks: dict[str, dict]) -> tuple[list[Entry], Coverage]:
    """A stock multiple_choice task through :func:`leaderboards.stages.stock.stock_rows`: its model rows (the
    log-likelihood rows and their cross-fitted temperature scaling), then its reference rows, all computed by the
    board from the logged log-likelihoods."""
    got = stock_rows(task, shape, sp, limit, stock_tasks)
    checks[got.key] = got.verification()
    spec = got.spec()
    entries = []
    for name, records in got.rows.items():
        is_ref = name in REFERENCE_FILTERS
        entries.append(_entry(got.key, spec, name, CLASSIFICATION, records, got.cov, got.doc_set_hash,
                              is_reference=is_ref, reported=got.reported.get(name, {}),
                              where=f"{sp} ({task}, row {name})"))
    return entries, got.cov
