"""lm-eval filters that turn one ``semsoft`` response into side-by-side rows (Contract 2).

Every filter here returns one :class:`~semcal_eval.semsoft.spec.SemSoftRow` per document; the first step of
a row reads the backend's typed :class:`~semcal_eval.semsoft.spec.SemSoftResponse` (parsed once, in the
backend), and ``SemSoftTask.process_results`` builds the record from the row.

* ``semsoft_select``: the constrained baseline or P_sem at one τ.
* ``crossfit_temperature``: temperature scaling fitted without a second model pass and without touching the
  document it is applied to — 2-fold cross-fitting over all evaluated documents. The evaluated doc_ids are
  sorted; documents at even places of that list form fold 0, the others fold 1 (with lm-eval's contiguous
  doc_ids 0..n-1, fold = doc_id % 2), and each fold is scaled with the temperature fitted on the other. The
  folds depend only on the documents' ids, so they are the same under any data-parallel sharding; with
  several processes the filter gathers (doc_id, probs, gold) from every rank
  (:func:`semcal_eval.harness.distributed.gather_rows`), fits on the whole set and returns its own
  documents' rows. The fitted temperatures are written into each filtered response and reported as the
  ``temperature`` metric.
* ``semsoft_tuned``: P_sem at the (τ, K, label embedding) chosen by :func:`semcal_eval.semsoft.tuning.select`
  on documents that are never reported — the task's tuning documents (validation-split documents whose
  prompts are not evaluated, answered in the same run) or, when the task has too few of those, the other fold
  of the evaluated documents (the folds of ``crossfit_temperature``); with too few of both the row is skipped
  (:func:`tuned_skip_reason`), like the temperature rows. Rows are gathered over ranks like the cross-fitted
  temperature, so sharding does not change the choice.
* ``reference_predictor``: model-free rows — ``prior`` (training-split class frequencies), ``majority``
  (all mass on the most frequent training class) and ``uniform``, by :mod:`semcal_eval.core.references` (the
  board computes its reference rows with the same code). Per document and from the training split only, so
  sharding does not change them.

The folds of the cross-fitted rows are :mod:`semcal_eval.core.crossfit`'s (the QA ``_iso`` rows and the board's
re-check use the same).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from lm_eval.api.filter import Filter
from lm_eval.api.registry import register_filter

from semcal_eval.core import references
from semcal_eval.core.crossfit import crossfit, skip_reason
from semcal_eval.core.records import first_gold
from semcal_eval.harness.distributed import gather_rows
from semcal_eval.harness.lm_eval_compat import task_instances
from semcal_eval.run_rows import temperature_skip_reason, temperature_step
from semcal_eval.semsoft import tuning
from semcal_eval.semsoft.rows import REFERENCES
from semcal_eval.semsoft.scoring import SemSoftError
from semcal_eval.semsoft.spec import SemSoftRow, as_response

log = logging.getLogger(__name__)


class TaskView:
    """What a filter may ask of its task (gold labels, training labels), without serialising the task."""

    def __init__(self, task):
        self._task = task

    def gold(self, doc):
        return self._task.gold(doc)

    def soft_target(self, doc):
        return self._task.soft_target(doc)

    def train_golds(self):
        return self._task.train_golds()

    def train_soft_targets(self):
        return self._task.train_soft_targets()

    def tuning_rows(self) -> tuple[list[int], list[tuple]]:
        """This rank's tuning documents as (ids, rows), rows ``(grid, baseline, gold, soft)`` (see
        ``SemSoftTask.apply_filters``); ([], []) when the task tunes by cross-fitting."""
        return getattr(self._task, "tuning_responses", None) or ([], [])

    def doc_ids(self, docs) -> list[int]:
        """lm-eval's doc_id of each of ``docs``: a filter gets the task's instances' docs in instance order
        (``FilterEnsemble.apply``), one instance per document for a semsoft task."""
        insts = task_instances(self._task)
        if len(insts) != len(docs) or any(i.doc is not d for i, d in zip(insts, docs)):
            raise SemSoftError(
                f"task {self._task.config.task}: a semsoft filter got {len(docs)} documents that are not the "
                f"task's {len(insts)} instances (one per document); apply it through task.apply_filters()"
            )
        return [int(i.doc_id) for i in insts]

    def __repr__(self) -> str:  # shows up in the results' task config
        return "<the task's own gold labels and training split>"


@register_filter("semsoft_select")
class SemSoftSelect(Filter):
    """Pick the baseline or the semsoft distribution at τ from each semsoft response."""

    def __init__(self, source: str = "semsoft", tau: float | None = None, **kwargs):
        if source not in ("baseline", "semsoft"):
            raise ValueError(f"semsoft_select: source={source!r} must be 'baseline' or 'semsoft'")
        self.source, self.tau = source, tau

    def apply(self, resps, docs):
        return [SemSoftRow(as_response(r[0]).probs(self.source, self.tau)) for r in resps]


@dataclass(frozen=True)
class SkippedRow:
    """A row a filter could not compute on this run's documents, with the reason. ``process_results`` reports no
    metric for it, so the row is absent from the results; the reason is in the logged samples' filtered_resps."""

    reason: str

    def __str__(self) -> str:  # lm-eval logs filtered_resps with str()
        return json.dumps({"skipped": self.reason})


@register_filter("crossfit_temperature")
class CrossfitTemperature(Filter):
    """Temperature scaling, 2-fold cross-fitted on all evaluated documents (see module docstring); applied
    to the :class:`SemSoftRow` of a ``semsoft_select`` step. ``task`` gives gold labels and doc_ids
    (:class:`TaskView`); the step is :func:`semcal_eval.run_rows.temperature_step`, the one the stock rows and the
    board's re-check call. With fewer documents than it needs (:func:`semcal_eval.run_rows.temperature_skip_reason`;
    a short ``--limit`` run) every row is a :class:`SkippedRow` (the task says so in one line before the model
    pass)."""

    def __init__(self, task: TaskView, **kwargs):
        self.task = task

    def apply(self, resps, docs):
        ids = self.task.doc_ids(docs)
        rows = [(r.probs, first_gold(self.task.gold(d))) for r, d in zip(resps, docs)]
        all_ids, all_rows = gather_rows(ids, rows)  # every rank's documents, sorted by doc_id
        skip = temperature_skip_reason(len(all_ids))
        if skip is not None:
            return [SkippedRow(skip) for _ in ids]
        steps = temperature_step([p for p, _ in all_rows], [y for _, y in all_rows])
        out = {i: SemSoftRow(p.tolist(), temperature=float(fit.T), at_bound=bool(fit.at_bound), fold=fold)
               for i, (p, fit, fold) in zip(all_ids, steps)}
        return [out[i] for i in ids]


def _tune_row(resp, gold, soft) -> tuple:
    """``(grid, baseline, gold, soft)`` of one document's response, for :func:`tuning.select`."""
    r = as_response(resp)
    if not r.grid:
        raise SemSoftError("semsoft_tuned: the response carries no tuning grid; the task must send one "
                           "(metadata tune: true, the default)")
    return r.grid, r.baseline, gold, soft


def tuned_skip_reason(n_tune: int, n_evaluated: int) -> str | None:
    """Why the ``semsoft_tuned`` row cannot be chosen on a run, or None: it is chosen on ``n_tune`` >=
    :data:`~semcal_eval.semsoft.tuning.MIN_TUNE_DOCS` validation documents, else on the other fold of the
    ``n_evaluated`` documents, which needs ``MIN_TUNE_DOCS`` per fold (:func:`semcal_eval.core.crossfit.skip_reason`).
    Like the cross-fitted temperature rows, the row is then skipped, not the run refused."""
    if n_tune >= tuning.MIN_TUNE_DOCS:
        return None
    crossfit_skip = skip_reason(n_evaluated, tuning.MIN_TUNE_DOCS)
    if crossfit_skip is None:
        return None
    return (f"semsoft_tuned has {n_tune} validation documents to tune on ({tuning.MIN_TUNE_DOCS} needed), and its "
            f"{crossfit_skip} (or pass --metadata '{{\"tune\": false}}')")


@register_filter("semsoft_tuned")
class SemSoftTuned(Filter):
    """P_sem at the configuration chosen on never-reported documents (module docstring; docs/SWEEP.md)."""

    def __init__(self, task: TaskView, by: str = "brier", **kwargs):
        if by not in tuning.CRITERIA:
            raise ValueError(f"semsoft_tuned: by={by!r} must be one of {sorted(tuning.CRITERIA)}")
        self.task, self.by = task, by

    def apply(self, resps, docs):
        ids = self.task.doc_ids(docs)
        rows = [_tune_row(r[0], self.task.gold(d), self.task.soft_target(d)) for r, d in zip(resps, docs)]
        all_ids, all_rows = gather_rows(ids, rows)
        t_ids, t_rows = self.task.tuning_rows()
        _, tune_rows = gather_rows(t_ids, t_rows)
        keys = list(all_rows[0][0]) if all_rows else []

        def choose(tuned_on, fold, fit_rows):
            choice = tuning.select([r[0] for r in fit_rows], [r[1] for r in fit_rows], [r[2] for r in fit_rows],
                                   [r[3] for r in fit_rows], keys, by=self.by)
            log.info("semsoft_tuned (%s%s): chose %s by %s=%.4f on %d documents (macro-F1 guard %s)", tuned_on,
                     "" if fold is None else f" fold {fold}", choice.key, choice.criterion, choice.score,
                     choice.n_tune, "met" if choice.guard else "NOT met: best score taken")
            return lambda i: SemSoftRow(all_rows[i][0][choice.key],
                                        tuned={**choice.fields(), "tuned_on": tuned_on, "tuned_fold": fold})

        if len(tune_rows) >= tuning.MIN_TUNE_DOCS:
            row = choose("validation", None, tune_rows)
            tuned = [row(i) for i in range(len(all_ids))]
        elif (skip := tuned_skip_reason(len(tune_rows), len(all_ids))) is not None:
            return [SkippedRow(skip) for _ in ids]
        else:  # too few never-evaluated documents: each fold of the evaluated ones is tuned on the other
            def per_fold(fold, fit_on, apply_to):
                row = choose("crossfit", fold, [all_rows[i] for i in fit_on])
                return [row(i) for i in apply_to]

            tuned = crossfit(len(all_ids), per_fold)
        out = dict(zip(all_ids, tuned))
        return [out[i] for i in ids]


@register_filter("reference_predictor")
class ReferencePredictor(Filter):
    """A model-free distribution for every document: ``prior``, ``majority`` or ``uniform``."""

    KINDS = REFERENCES

    def __init__(self, kind: str, task: TaskView, **kwargs):
        if kind not in self.KINDS:
            raise ValueError(f"reference_predictor: kind={kind!r} must be one of {self.KINDS}")
        self.kind, self.task = kind, task

    def apply(self, resps, docs):
        return [SemSoftRow(p) for p in self._probs(len(as_response(resps[0][0]).baseline), docs)]

    def _probs(self, n_classes: int, docs) -> list:
        soft = self.kind in references.NEEDS_TRAINING and self.task.soft_target(docs[0]) is not None
        p = references.reference_probs(self.kind, n_classes, len(docs), train_golds=self.task.train_golds,
                                       train_soft=self.task.train_soft_targets, soft=soft)
        if p is None:
            raise ValueError(
                "reference predictors need the task's training split (training_split in the YAML); "
                "set metadata reference_predictors: false to skip them"
            )
        return p.tolist()
