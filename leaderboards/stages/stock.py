"""Stages 3-5 for a stock ``multiple_choice`` task (:mod:`leaderboards.stock`): its rows read, checked and turned
into semcal's calibration rows by the board itself.

A stock task logs no semcal record; what it logs per document is lm-eval's own: the requests (``arguments``: one
``(context, delimiter + choice)`` per choice), the summed log-likelihood of each choice (``filtered_resps``), the
``target``, and the per-document ``acc`` / ``acc_norm``. The board reads these (:func:`read_stock_rows`, streamed,
one row checked at a time), then:

* **dataset** (a registered config only; the registration whose documents the rows are): each row's ``doc_hash`` and
  ``target_hash`` are lm-eval's hashes of the board's own document
  (:func:`~leaderboards.stages.dataset.check_document`), its choice texts are the document's ``doc_to_choice``, and
  its gold is the board's (:class:`semcal_eval.data.gold.GoldReader`, the one gold reader); the split's size and the
  coverage come from the board's documents (:func:`~leaderboards.stages.dataset.check_counts`). Unregistered: the
  counts are taken as reported and the rows' own hashes, choices and targets are used (``self-reported``);
* **metrics**: each row's logged ``acc`` / ``acc_norm`` is recomputed from its log-likelihoods
  (:func:`semcal_eval.run_rows.lm_eval_correct`), and so is each reported aggregate (their mean); other metrics
  lm-eval reports are listed as not recomputed and not stored;
* **records**: :func:`semcal_eval.run_rows.calibration_rows`, the function ``semcal-eval calibrate`` uses, so the
  board's rows are the CLI's rows on the same samples.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from semcal_eval import run_rows
from semcal_eval.core.records import canonical
from semcal_eval.runs import iter_samples

from .. import stock
from ..dataset_check import load_task_docs
from ..errors import SubmissionError
from ..registry import TaskSpec, normalise_version
from .dataset import Coverage, check_counts, check_document
from .metrics import ATOL, RTOL, same
from .records import FilterRows, check_logliks, next_line, no_trailing_blank_lines, row_key
from .shape import RunShape, reported_metrics

__all__ = ["RECOMPUTED", "StockRows", "stock_rows"]

#: lm-eval's metrics of a multiple_choice task the board recomputes from the log-likelihoods, with the row whose
#: argmax they score (the other rows' reported values are {}).
RECOMPUTED = {"acc": "loglik", "acc_norm": "loglik_norm"}
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass
class StockRows:
    """What the board computed for one stock task: its rows (``run_rows.calibration_rows``), the coverage and
    document-set hash, the reported aggregates it recomputed per row, and what it could not check."""

    name: str  # the run's task name
    key: str  # the board's task key (stock.entry_task)
    config_hash: str
    registered: stock.StockTask | None
    version: str
    cov: Coverage
    doc_set_hash: str
    rows: dict[str, list[dict]] = field(default_factory=dict)
    reported: dict[str, dict[str, float]] = field(default_factory=dict)  # row -> {lm-eval metric: reported}
    notes: list[str] = field(default_factory=list)
    not_recomputed: list[str] = field(default_factory=list)
    logged_hash: str = ""  # the hash of the config the run logged (config_hash: its registration's, if any)

    def spec(self) -> TaskSpec:
        """A :class:`~leaderboards.registry.TaskSpec` for the board's entries of this task."""
        return TaskSpec(name=self.key, version=self.version, yaml_path=Path(self.registered.include_path
                                                                             if self.registered else ""))

    def verification(self) -> dict:
        """What the board says of this task in the submission's verification record."""
        out = {"task": self.name, "config_hash": self.config_hash, "logged_config_hash": self.logged_hash,
               "registered": self.registered is not None,
               "recomputed": sorted({m for r in self.reported.values() for m in r}), "notes": self.notes}
        if self.not_recomputed:
            out["not_recomputed"] = self.not_recomputed
        return out


def stock_rows(task: str, shape: RunShape, sp: Path, limit, registry: dict[str, stock.StockTask]) -> StockRows:
    """Stages 3-5 for the stock task ``task`` of the run (see the module docstring); ``registry``: the board's
    registered stock tasks by registration hash. A run is checked against each registration of its logged config
    (:func:`leaderboards.stock.candidates`, oldest first) and belongs to the first whose documents, targets and
    choices its rows are; its entries are keyed by that registration, so runs on relabelled data (another
    registration) never share a table with runs on the original."""
    rp = str(shape.results_path)
    chash = shape.stock[task]
    regs = stock.candidates(registry, chash)
    if not regs:
        return _stock_rows(task, shape, sp, limit, chash, None)
    errors = []
    for reg in regs:  # versions of one logged config (other data or code): the one whose documents these rows are
        try:
            return _stock_rows(task, shape, sp, limit, chash, reg)
        except SubmissionError as e:
            errors.append((reg, e))
    if len(errors) == 1:
        raise errors[0][1]
    keys = ", ".join(stock.entry_task(r.task, r.config_hash) for r, _ in errors)
    raise SubmissionError(f"{rp}: {task}: the rows match none of the {len(errors)} registered versions of this "
                          f"config ({keys}); against the first: {errors[0][1]}")


def _stock_rows(task: str, shape: RunShape, sp: Path, limit, chash: str, reg) -> StockRows:
    """:func:`stock_rows` against one registration ``reg`` (None: unregistered)."""
    rp = str(shape.results_path)
    cfg = shape.configs[task]
    metrics = {m["metric"]: None for m in cfg.get("metric_list") or []
               if isinstance(m, dict) and isinstance(m.get("metric"), str)}
    spec = TaskSpec(name=task, version=normalise_version(shape.versions.get(task)), yaml_path=Path(), metrics=metrics)
    reported = reported_metrics(shape.res[task], task, spec, rp)
    if len(reported.numbers) != 1:
        raise SubmissionError(
            f"{rp}: stock task {task} reports filters {sorted(reported.numbers)[:5]}; the board takes a stock "
            "multiple_choice task with one filter (lm-eval's default 'none'), whose rows it recomputes")
    (f, numbers), = reported.numbers.items()
    if reg is not None:
        docs = load_task_docs(task, reg.include_path or None, None, where=rp)
        cov = check_counts(task, shape, limit, docs.n_split, docs.split, docs)
    else:
        docs = None
        split = cfg.get("test_split") or cfg.get("validation_split") or "default"
        cov = check_counts(task, shape, limit, None, str(split)[:64])
    delimiter, mutual_info = run_rows.choice_settings(cfg)
    lls, choices, golds, hashes, correct = _read(sp, task, spec, f, numbers, cov.effective, docs, delimiter,
                                                 mutual_info)
    key = reg.config_hash if reg is not None else chash  # a registered run: its registration's data and code
    out = StockRows(name=task, key=stock.entry_task(task, key), config_hash=key, registered=reg,
                    version=spec.version, cov=cov, doc_set_hash=_doc_set_hash(key, hashes), logged_hash=chash)
    for metric, row in RECOMPUTED.items():
        if metric not in numbers:
            continue
        got = float(np.mean([c[metric] for c in correct]))
        if not same(numbers[metric], got):
            raise SubmissionError(
                f"{rp}: {task} metric {metric},{f} is reported as {numbers[metric]!r} but recomputes to {got!r} "
                f"from the log-likelihoods in {sp.name} (tolerance {ATOL:g} + {RTOL:g}*|value|); rejected")
        out.reported[row] = {metric: numbers[metric]}
    out.not_recomputed = sorted(m for m in numbers if m not in RECOMPUTED)
    out.rows, out.notes = run_rows.calibration_rows(lls, choices, golds)
    return out


def _doc_set_hash(chash: str, hashes: list[str]) -> str:
    """sha256 of ``[config hash, [[doc_id, doc_hash], ...]]``: the documents, under this config only."""
    return hashlib.sha256(canonical([chash, [[i, h] for i, h in enumerate(hashes)]])).hexdigest()


def _read(sp: Path, task: str, spec: TaskSpec, f: str, numbers: dict, effective: int, docs, delimiter: str,
          mutual_info: bool) -> tuple[list, list, list, list, list]:
    """Stream the samples of a stock task: ``(lls, choices, golds, doc_hashes, {acc, acc_norm})`` in doc_id order,
    each row checked
    as it is read (identity by :func:`~leaderboards.stages.records.row_key`, the dataset when ``docs``, the
    logged per-document metrics against the log-likelihoods)."""
    rows: dict[int, tuple] = {}
    flt: dict[str, FilterRows] = {}
    cache: dict[int, tuple[str, str]] = {}
    prev = 0
    for r in iter_samples(sp):
        prev = line = next_line(r, sp, prev)
        at = f"{sp}:{line}"
        doc_id, _, holder = row_key(r, at, task, spec, {f: numbers}, effective, flt)
        holder.records[doc_id], holder.lines[doc_id] = {}, line
        check_logliks(r, at)  # a JSON true is no log-likelihood (float(True) is 1.0)
        try:
            ll, ch = run_rows.choice_logliks(r, delimiter, mutual_info)
        except ValueError as e:
            raise SubmissionError(f"{at}: {e}") from None
        if not len(ll) or not np.isfinite(ll).all():
            raise SubmissionError(f"{at}: the choice log-likelihoods must be finite numbers, one per choice")
        if docs is not None:
            check_document(r, doc_id, docs, task, at, cache)
            want = docs.choices(doc_id)
            if ch != want:
                raise SubmissionError(f"{at}: doc_id {doc_id}: the logged choices {str(ch)[:60]} are not the "
                                      f"dataset's {str(want)[:60]}; submit lm-eval's unedited log")
            gold = run_rows.mc_gold(docs.gold(doc_id), want)  # the one gold reader; in range of the choices
        else:
            if not isinstance(r.get("doc_hash"), str) or not _HEX64.fullmatch(r["doc_hash"]):
                raise SubmissionError(f"{at}: doc_hash must be lm-eval's sha256 of the document (64 hex digits)")
            gold = run_rows.mc_gold(r.get("target"), ch)
        if gold is None:
            raise SubmissionError(f"{at}: doc_id {doc_id}: the target is not one of the document's choices; "
                                  "lm-eval scores such a document 0 and it has no gold to calibrate against: fix "
                                  "the task's doc_to_target / doc_to_choice")
        correct = run_rows.lm_eval_correct(ll, ch, gold)
        for m, v in correct.items():
            logged = r.get(m)
            if m in numbers and (isinstance(logged, bool) or not isinstance(logged, (int, float)) or logged != v):
                raise SubmissionError(f"{at}: doc_id {doc_id} logs {m} = {str(logged)[:20]} but its "
                                      f"log-likelihoods give {v}; submit lm-eval's unedited log")
        rows[doc_id] = (ll, ch, gold, cache[doc_id][0] if docs is not None else r["doc_hash"], correct)
    no_trailing_blank_lines(sp, prev)
    if len(rows) != effective:
        raise SubmissionError(f"{sp}: {len(rows)} sample rows of filter {f} but n-samples.effective is {effective}")
    ordered = [rows[i] for i in range(effective)]
    return tuple([x[j] for x in ordered] for j in range(5))

