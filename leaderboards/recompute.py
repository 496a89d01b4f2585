"""Validate one lm-eval run against the task's own dataset and recompute every metric from its records.

The run folder is read by :mod:`semcal_eval.runs` (regular files only, size limits checked before reading,
samples streamed one line at a time). Checks, in order (each failure raises
:class:`~leaderboards.errors.SubmissionError` naming file, line, task, filter, document or metric):

1. **shape**: ``results``, ``versions``, ``config``, ``n-samples``, ``group_subtasks`` and ``configs`` have the
   types lm-eval writes (a list where an object belongs is refused, not crashed on); provenance values
   (``date``, versions, hashes) are validated (:func:`provenance`);
2. every task in ``results`` is a known semcal task (:mod:`leaderboards.registry`) at the version its YAML
   declares;
3. **the dataset itself** (:mod:`leaderboards.dataset_check`): the board builds the task from its own task
   folder with the run's dataset metadata (``split``, subset settings) and its own data, and checks
   ``n-samples.original`` against the split's true size, and per document its ``doc_hash`` and
   ``target_hash`` (lm-eval's hashes, recomputed from the board's document) and, for classification records,
   the gold label and the soft target;
4. **coverage** is computed by the board from the split size: ``full`` when the rows cover the whole split,
   ``partial`` when a recorded ``config.limit`` explains the count (lm-eval takes the first ``limit``
   documents, or ``ceil(limit * n)`` for a fraction); ids are ``0..effective-1``, none twice;
5. **one canonical record per document** (per filter): every metric name of a row must hold the same record
   (a document whose copies differ is rejected naming the document and the two metric keys); QA metrics such
   as ``em`` read a *view* of that one record (:mod:`semcal_eval.core.metric_table`);
6. each reported ``metric,filter`` equals the task's registered aggregation (from the task YAML, never from
   the submitted ``configs``) over the canonical records, within
   ``|reported - recomputed| <= ATOL + RTOL * |recomputed|`` (both NaN counts as equal);
7. the records are well formed (:func:`semcal_eval.core.records.check_record`, then ``to_arrays``).

Every board column and flag is computed from the canonical records (:func:`board_metrics`). Reference rows
(``prior``, ``majority``, ``uniform``) are computed by the board from the training split
(:mod:`leaderboards.references`); submitted reference rows are checked like any row but not stored.
Duplicates are detected on :attr:`Submission.predictions_hash`, a hash of the canonical model records, so
editing anything else (``alias``, ``_stderr`` strings, ``prompt_hash``, groups, a value within tolerance)
does not make a new measurement.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from semcal_eval.core import metric_table as T
from semcal_eval.core.records import CLASSIFICATION, canonical, check_record, records_hash, to_arrays
from semcal_eval.runs import find_results, iter_samples, locate_run, read_results

from . import references
from .dataset_check import TaskDocs, load_task_docs, same_soft
from .errors import SubmissionError
from .registry import REFERENCE_FILTERS, TaskSpec, load_registry, normalise_version, tasks_root

#: Tolerance for reported vs recomputed aggregates. The recomputation runs the same aggregation
#: on the same logged items, so only float formatting/summation order can differ.
ATOL = 1e-9
RTOL = 1e-6
#: Degenerate confidence: std below this, or at least this share of documents in one ECE bin.
DEGENERATE_STD = 1e-3
DEGENERATE_BIN_SHARE = 0.95

_FILTER_RE = re.compile(r"[A-Za-z0-9_.+-]{1,64}")  # fullmatch: "$" would let a trailing newline in
#: Roles without a bootstrap CI on the board: AUROC has no per-document loss, so its CI would be
#: CI_N_BOOT sklearn calls per row, dominating the submit time.
NO_CI_ROLES = ("auroc",)
#: Table metrics stored with a row besides its role columns (in board.json, not shown as columns), where they
#: apply to the record kind.
BOARD_EXTRAS = ("macro_f1", "auroc_class", "brier_conf", "soft_brier", "soft_ece", "soft_nll")
#: The metric key a row's canonical record is read from and named by in messages: the first of these a filter
#: reports (each kind's headline ECE, then accuracy), else its first metric; every other key must hold the same.
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


def _is_group(results: dict, name: str) -> bool:
    subtasks = (results.get("group_subtasks") or {}).get(name)
    return bool(subtasks)


#: Largest document count accepted anywhere (n-samples, limits): far above any real split, far below
#: SQLite's 64-bit integers.
MAX_DOCS = 10**9
#: Plausible Unix times for provenance ``date`` (1970 .. 2100).
MAX_DATE = 4102444800.0


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
        raise SubmissionError(f"{where}: reported value {str(v)[:60]!r} is not a number")
    try:
        return float(v)
    except OverflowError:  # an int beyond float range
        raise SubmissionError(f"{where}: reported value is not a finite number") from None


def _obj(results: dict, key: str, where: str, *, required: bool = False) -> dict:
    """``results[key]`` as an object (lm-eval always writes one); a list or a string is refused, not crashed on."""
    v = results.get(key)
    if v is None and not required:
        return {}
    if not isinstance(v, dict):
        raise SubmissionError(
            f"{where}: '{key}' must be a JSON object as lm-eval writes it, got {type(v).__name__}; "
            "submit lm-eval's unedited results file"
        )
    return v


def _count(v, what: str, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_DOCS:
        raise SubmissionError(f"{where}: {what} must be an integer between 0 and {MAX_DOCS}, got {str(v)[:40]}")
    return v


def _limit(config: dict, where: str) -> float | int | None:
    """``config.limit`` as lm-eval records it: None, an integer >= 1, or a fraction in (0, 1)."""
    limit = config.get("limit")
    if limit is None:
        return None
    bad = isinstance(limit, bool) or not isinstance(limit, (int, float))
    if not bad and isinstance(limit, float):
        bad = not math.isfinite(limit) or limit <= 0 or (limit >= 1.0 and not limit.is_integer())
    if not bad and isinstance(limit, int):
        bad = not 1 <= limit <= MAX_DOCS
    if bad:
        raise SubmissionError(
            f"{where}: config.limit {str(limit)[:40]} is not a document count (>= 1) or a fraction in (0, 1); "
            "NaN, infinity and non-numbers are refused"
        )
    return int(limit) if isinstance(limit, float) and limit >= 1.0 else limit


MAX_PROVENANCE_DEPTH = 8


def _depth(v) -> int:
    """Nesting depth of a JSON value, without recursion (the value may be nested to the parser's limit)."""
    best, stack = 0, [(v, 1)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, (dict, list)):
            best = max(best, d)
            stack.extend((y, d + 1) for y in (x.values() if isinstance(x, dict) else x))
    return best


_PROV_STR = ("git_hash", "lm_eval_version", "transformers_version", "model_name", "model_source",
             "chat_template_sha", "system_instruction_sha")


def provenance(results: dict, config: dict, where: str) -> dict:
    """The run's provenance as stored: strings of at most 200 characters, ``date`` and
    ``total_evaluation_time_seconds`` finite numbers in range (``date`` a Unix time in 1970..2100), the
    per-task maps (``task_hashes``, ``n-shot``) objects of short scalars, and the run's ``config``.
    A value outside these is refused at submit, so that no stored entry can break a later render."""
    out: dict = {}
    for k in _PROV_STR:
        v = results.get(k)
        if v is None:
            continue
        if not isinstance(v, str) or len(v) > 200:
            raise SubmissionError(f"{where}: provenance {k!r} must be a string of at most 200 characters")
        out[k] = v
    for k, hi in (("date", MAX_DATE), ("total_evaluation_time_seconds", 10**9)):
        v = results.get(k)
        if v is None:
            continue
        if isinstance(v, str):  # lm-eval writes total_evaluation_time_seconds as a string
            try:
                v = float(v)
            except ValueError:
                raise SubmissionError(f"{where}: provenance {k!r} {v[:40]!r} is not a number") from None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 <= v <= hi):
            raise SubmissionError(f"{where}: provenance {k!r} {str(v)[:40]} is not a number between 0 and {hi:g}"
                                  + (" (a Unix time, 1970..2100)" if k == "date" else ""))
        out[k] = float(v)
    for k in ("task_hashes", "n-shot"):
        v = results.get(k)
        if v is None:
            continue
        if not isinstance(v, dict) or not all(
            isinstance(x, str) and isinstance(y, (str, int)) and not isinstance(y, bool) and len(str(y)) <= 200
            for x, y in v.items()
        ):
            raise SubmissionError(f"{where}: provenance {k!r} must map task names to short strings or integers")
        out[k] = v
    cfg = {}
    for k, v in config.items():
        if not isinstance(k, str):
            continue
        if isinstance(v, float) and not math.isfinite(v):
            raise SubmissionError(f"{where}: config.{k} is {v}; a finite number or a string is expected")
        if isinstance(v, (dict, list)) and _depth(v) > MAX_PROVENANCE_DEPTH:
            raise SubmissionError(f"{where}: config.{k} is nested more than {MAX_PROVENANCE_DEPTH} levels deep; "
                                  "lm-eval writes flat settings")
        if isinstance(v, (dict, list)) and len(canonical(v)) > 4096:
            raise SubmissionError(f"{where}: config.{k} is over 4096 bytes of JSON")
        if isinstance(v, str) and len(v) > 4096:
            raise SubmissionError(f"{where}: config.{k} is over 4096 characters")
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**62:
            raise SubmissionError(f"{where}: config.{k} {str(v)[:30]} is out of range")
        cfg[k] = v
    out["config"] = cfg
    return out


def _group_names(results: dict, where: str) -> set[str]:
    gs = _obj(results, "group_subtasks", where)
    for g, subs in gs.items():
        if not isinstance(subs, list) or not all(isinstance(x, str) for x in subs):
            raise SubmissionError(f"{where}: group_subtasks.{str(g)[:40]} must be a list of task names")
    return {g for g, subs in gs.items() if subs}


@dataclass
class _Filter:
    """What the board keeps of one filter's rows while streaming: the canonical record per document."""

    records: dict[int, dict] = field(default_factory=dict)
    lines: dict[int, int] = field(default_factory=dict)
    kind: str = ""


def _read_task_rows(sp: Path, task: str, spec: TaskSpec, docs: TaskDocs, effective: int,
                    reported: dict[str, dict[str, float]]) -> dict[str, _Filter]:
    """Stream ``sp`` and keep one canonical record per (filter, document), checking each row against the
    dataset as it is read (so a bad row stops the read there, and memory stays one record per document)."""
    filters: dict[str, _Filter] = {}
    expected_hash: dict[int, tuple[str, str]] = {}  # doc_id -> (doc_hash, target_hash) from the dataset
    order: dict[str, list[str]] = {}
    prev = 0
    for r in iter_samples(sp):
        line = r["_line"]
        at = f"{sp}:{line}"
        if line != prev + 1:  # the reader skips blank lines; lm-eval writes none
            raise SubmissionError(f"{sp}:{prev + 1}: blank line; lm-eval writes one JSON object per line, submit "
                                  "its unedited samples file")
        prev = line
        doc_id = r.get("doc_id")
        if not isinstance(doc_id, int) or isinstance(doc_id, bool):
            raise SubmissionError(f"{at}: doc_id missing or not an integer")
        f = r.get("filter")
        if not isinstance(f, str):
            raise SubmissionError(f"{at}: 'filter' missing or not a string")
        if not _FILTER_RE.fullmatch(f):
            raise SubmissionError(f"{at}: filter name {f[:40]!r} is not a plain identifier")
        if spec.filters and f not in spec.filters:
            raise SubmissionError(f"{at}: filter {f!r} is not declared by task {task} (declared: {', '.join(spec.filters)})")
        if f not in reported:
            raise SubmissionError(f"{at}: filter {f!r} has sample rows but no metric of it is reported in results")
        if not 0 <= doc_id < effective:
            raise SubmissionError(
                f"{at}: doc_id {doc_id} is outside 0..{effective - 1} (n-samples.effective {effective}); "
                "lm-eval --samples subsets are not accepted, use --limit"
            )
        if f not in filters and len(filters) >= MAX_FILTERS:
            raise SubmissionError(f"{at}: more than {MAX_FILTERS} filters in task {task}; a semcal task logs far "
                                  "fewer (constrained, semsoft, a tau sweep, recalibrated and reference rows)")
        flt = filters.setdefault(f, _Filter())
        if doc_id in flt.records:
            raise SubmissionError(f"{at}: doc_id {doc_id} appears twice for filter {f} (first at line {flt.lines[doc_id]})")
        # -- the document against the dataset
        if doc_id not in expected_hash:
            expected_hash[doc_id] = (docs.doc_hash(doc_id), docs.target_hash(doc_id))
        want_doc, want_target = expected_hash[doc_id]
        if r.get("doc_hash") != want_doc:
            raise SubmissionError(
                f"{at}: doc_id {doc_id} has doc_hash {str(r.get('doc_hash'))[:16]}… but document {doc_id} of "
                f"{task}'s {docs.split} split hashes to {want_doc[:16]}…; the rows must be lm-eval's log of this "
                "dataset, in its order"
            )
        if r.get("target_hash") != want_target:
            raise SubmissionError(
                f"{at}: doc_id {doc_id}: target_hash does not match the dataset's target for document {doc_id} "
                f"of {task}'s {docs.split} split; submit lm-eval's unedited log"
            )
        # -- one canonical record
        ms = r.get("metrics")
        if not isinstance(ms, list) or not ms or not all(isinstance(m, str) for m in ms) or len(ms) > 1000:
            raise SubmissionError(f"{at}: 'metrics' must be a non-empty list of metric names, got {str(ms)[:60]}")
        # a <metric>_stderr (lm-eval's ± column) is logged per document as "=<metric>", not reported
        stderrs = [m for m in ms if m.endswith(T.STDERR_SUFFIX) and T.base_metric(m) in reported[f]]
        unknown = sorted(set(ms) - set(reported[f]) - set(stderrs))
        if unknown:
            raise SubmissionError(
                f"{at}: metric(s) {', '.join(m[:40] for m in unknown[:5])} logged per document but not reported "
                f"in results for filter {f}; submit lm-eval's unedited output"
            )
        names = order.get(f)
        if names is None:  # the main metric first, so messages name the record the board shows
            first = next((m for m in MAIN_METRICS if m in reported[f]), min(reported[f]))
            names = order[f] = [first, *sorted(set(reported[f]) - {first})]
        for m in names:
            if m not in r:
                raise SubmissionError(f"{at}: row for filter {f} lacks metric {m}")
        first = names[0]
        rec = r[first]
        for m in stderrs:  # logged as a reference to its metric's record (semcal_eval.harness.base.SameAs)
            if r.get(m) != f"={T.base_metric(m)}":
                raise SubmissionError(f"{at}: {m} must be logged as the reference {'=' + T.base_metric(m)!r} to "
                                      "its metric's record; submit lm-eval's unedited output")
        for m in names[1:]:
            other = r[m]
            if other is not rec and other != rec and canonical(other) != canonical(rec):
                raise SubmissionError(
                    f"{at}: document {doc_id} (filter {f}) has different records under metric keys {first!r} and "
                    f"{m!r}; the board reads one record per document, logged identically under every metric name"
                )
        where = f"{at} metric {first}"
        _bounded_numbers(rec, where)
        kind = check_record(rec, where)
        if flt.kind and kind != flt.kind:
            raise SubmissionError(f"{where}: a {flt.kind} record was expected (the first row's kind), "
                                  "records of one filter must be one kind")
        flt.kind = kind
        if kind == CLASSIFICATION:
            gold = rec.get("gold")
            want = docs.gold(doc_id)
            want_soft = docs.soft(doc_id)
            if want is not None and gold is not None and _gold_key(gold) != _gold_key(want):
                raise SubmissionError(
                    f"{at}: document {doc_id} (filter {f}) has gold label {str(gold)[:40]} but the dataset's "
                    f"{docs.split} split says {want}; gold labels are checked against the dataset itself"
                )
            if gold is None and want is not None and want_soft is None:
                raise SubmissionError(f"{at}: document {doc_id} (filter {f}) has no gold label; the dataset says {want}")
            if want_soft is not None or rec.get("soft") is not None:
                if not same_soft(rec.get("soft"), want_soft):
                    raise SubmissionError(
                        f"{at}: document {doc_id} (filter {f}) has soft target {str(rec.get('soft'))[:20]} but the "
                        f"dataset's is {want_soft}; soft targets are checked against the dataset itself"
                    )
        flt.records[doc_id] = rec
        flt.lines[doc_id] = line
    _no_trailing_blank_lines(sp, prev)
    return filters


def _no_trailing_blank_lines(sp: Path, last: int) -> None:
    """A samples file padded with blank lines after its last row is refused like one with blank lines inside."""
    with open(sp, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - 4096))
        tail = fh.read()
    body = tail[:-1] if tail.endswith(b"\n") else tail
    if body.endswith((b"\n", b"\r")) or (body and not body.splitlines()[-1].strip()):
        raise SubmissionError(f"{sp}:{last + 1}: blank line(s) after the last row; submit lm-eval's unedited "
                              "samples file")


#: Largest magnitude of an integer in a per-document record (doc counts, top_k, tuned_n): far above any real
#: value, and convertible to float without overflow.
MAX_RECORD_INT = 2**53
#: Filters one task may log, and tasks one run may hold: the board stores and renders every row.
MAX_FILTERS = 32
MAX_TASKS = 64


def _bounded_numbers(rec, where: str) -> None:
    """Every number in a record is a finite float or an integer of at most :data:`MAX_RECORD_INT` (``1e999``
    parses to inf; a 400-digit integer overflows float()); one line naming the field otherwise. NaN is left to
    :func:`check_record`, which knows where an undefined value is allowed."""
    stack = [("", rec)]
    while stack:
        key, v = stack.pop()
        if isinstance(v, dict):
            stack.extend((f"{key}.{k}" if key else str(k), x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((f"{key}[{i}]", x) for i, x in enumerate(v))
        elif isinstance(v, bool) or v is None or isinstance(v, str):
            continue
        elif isinstance(v, int):
            if abs(v) > MAX_RECORD_INT:
                raise SubmissionError(f"{where}: field {key[:60]} is an integer of {len(str(abs(v)))} digits, out "
                                      "of range (|x| <= 2^53); submit lm-eval's unedited log")
        elif isinstance(v, float) and math.isinf(v):
            raise SubmissionError(f"{where}: field {key[:60]} is {v} (a number past float range); finite numbers "
                                  "only")


#: Run metadata keys that set how documents are scored, never which documents the split holds (semsoft
#: hyper-parameters, recalibration switches, provenance lm-eval adds). Any other key may select documents.
SCORING_METADATA = frozenset({"version", "semsoft", "pretrained", "dtype", "split", "recalibrate",
                              "reference_predictors", "tune", "tune_grid", "tau", "top_k", "label_embedding",
                              "config_source", "tune_by", "soft_field", "judge", "k", "n_samples", "temperature",
                              "max_gen_toks", "data_dir"})


def _document_subset(task, root, metadata, docs: TaskDocs, data_dir, where) -> tuple[dict, int] | None:
    """``(selecting metadata, size of the unselected split)`` when the run's metadata selects other documents
    than the board's split with no extra metadata (``band: [0.75, 0.8]``), else None. Loads the split a second
    time only when the metadata holds a key outside :data:`SCORING_METADATA`."""
    if not isinstance(metadata, dict):
        return None
    extra = {k: metadata[k] for k in sorted(metadata) if isinstance(k, str) and k not in SCORING_METADATA}
    if not extra:
        return None
    base = {"split": metadata["split"]} if isinstance(metadata.get("split"), str) else {}
    default = load_task_docs(task, root, base, data_dir=data_dir, where=where)
    same = default.n_split == docs.n_split and all(default.doc_hash(i) == docs.doc_hash(i)
                                                    for i in range(docs.n_split))
    return None if same else (extra, default.n_split)


def _gold_key(g) -> tuple:
    if isinstance(g, (list, tuple)):
        try:
            return tuple(sorted(int(x) for x in g))
        except (TypeError, ValueError):
            return ("?", str(g))
    try:
        return (int(g),)
    except (TypeError, ValueError):
        return ("?", str(g))


def _entry(task, spec, f, kind, records, doc_ids, *, is_reference, effective, n_split, docs, doc_set_hash,
           reported, coverage, where) -> Entry:
    board, conf, correct = board_metrics(kind, records, where)
    return Entry(
        task=task, task_version=spec.version, filter=f, kind=kind, is_reference=is_reference, n_docs=effective,
        n_original=n_split, doc_set_hash=doc_set_hash, reported=reported, board=board, conf=conf, correct=correct,
        degenerate=degenerate_reason(conf, board["n_bins"]), split=docs.split, n_split=n_split, coverage=coverage,
        doc_ids=list(doc_ids), records=records, predictions_hash=records_hash(records),
    )


def validate_run(output_dir: str | Path, tasks_dir: str | Path | None = None, *,
                 data_dir: str | Path | None = None) -> Submission:
    """Read, validate against the dataset, and recompute an lm-eval run; return a :class:`Submission`.

    ``tasks_dir``: the board's task folder (default ``$SEMCAL_BOARD_TASKS_DIR`` / ``semcal_eval.TASKS_DIR``);
    ``data_dir``: where the board reads the datasets (default ``$SEMCAL_DATA_DIR``, else the hub).
    Raises :class:`~leaderboards.errors.SubmissionError` (refused by the board),
    :class:`semcal_eval.runs.RunError` (unreadable run folder) or
    :class:`semcal_eval.core.records.RecordError` (a malformed per-document record, naming file and line);
    all are ValueErrors, listed together in :data:`leaderboards.errors.REJECTED`.
    """
    try:
        return _validate_run(output_dir, tasks_dir, data_dir)
    except ValueError as e:  # json.loads of an integer literal past Python's digit limit (not a JSON error)
        if "integer string conversion" not in str(e):
            raise
        raise SubmissionError(f"{output_dir}: a number in the run's files has more digits than Python parses "
                              f"({sys.get_int_max_str_digits()}); lm-eval never writes one, submit its unedited "
                              "files") from None
    except RecursionError:  # a structure nested just under the JSON parser's limit, reached by later code
        raise SubmissionError(f"{output_dir}: JSON nested too deeply to be an lm-eval output; submit lm-eval's "
                              "unedited files") from None


def _validate_run(output_dir, tasks_dir, data_dir) -> Submission:
    registry = load_registry(tasks_dir)
    root = tasks_root(tasks_dir)
    results_path = find_results(output_dir)
    results = read_results(results_path)
    rp = str(results_path)
    res = _obj(results, "results", rp, required=True)
    versions = _obj(results, "versions", rp)
    config = _obj(results, "config", rp)
    n_samples = _obj(results, "n-samples", rp)
    configs = _obj(results, "configs", rp)
    groups = _group_names(results, rp)
    for t, v in res.items():
        if not isinstance(v, dict):
            raise SubmissionError(f"{rp}: results.{str(t)[:40]} must be an object of metric values")
    tasks = sorted(t for t in res if t not in groups)
    if len(tasks) > MAX_TASKS:
        raise SubmissionError(f"{rp}: {len(tasks)} tasks in one run; at most {MAX_TASKS}, submit them in parts")
    if not tasks:
        raise SubmissionError(f"{rp}: the results hold no task")
    for t in tasks:
        if t not in registry:
            known = ", ".join(sorted(registry)) or "(none found)"
            raise SubmissionError(f"{rp}: task {t[:60]!r} is not a semcal task; known tasks: {known}")
        v = versions.get(t)
        if v is not None and not isinstance(v, (str, int, float)):
            raise SubmissionError(f"{rp}: versions.{t} must be a number or a string, got {type(v).__name__}")
        got = normalise_version(v)
        if got != registry[t].version:
            raise SubmissionError(
                f"{rp}: task {t} has version {got[:20]}, the board knows version {registry[t].version}; "
                "rerun with the current semcal task definitions"
            )
    run = locate_run(results_path, tasks)
    limit = _limit(config, rp)
    prov = provenance(results, config, rp)
    model_args = config.get("model_args") if isinstance(config.get("model_args"), str) else ""

    entries: list[Entry] = []
    splits: list[str] = []
    hasher = hashlib.sha256()
    for task in tasks:
        spec = registry[task]
        sp = run.samples_paths[task]
        ns = n_samples.get(task)
        if not isinstance(ns, dict):
            raise SubmissionError(f"{rp}: n-samples.{task} must hold integer 'original' and 'effective'")
        original = _count(ns.get("original"), f"n-samples.{task}.original", rp)
        effective = _count(ns.get("effective"), f"n-samples.{task}.effective", rp)
        tcfg = configs.get(task) if isinstance(configs.get(task), dict) else {}
        docs = load_task_docs(task, root, tcfg.get("metadata"), data_dir=data_dir, where=rp)
        n_split = docs.n_split
        if original != n_split:
            raise SubmissionError(
                f"{rp}: task {task}: n-samples.original is {original} but the {docs.split} split the board loads "
                f"has {n_split} documents; coverage is computed from the dataset, not from the run"
            )
        expected = _expected_effective(limit, n_split)
        if limit is None and effective != n_split:
            raise SubmissionError(
                f"{rp}: task {task} evaluated {effective} of {n_split} documents without a recorded "
                "--limit; evaluate the whole split, or pass --limit so the partial coverage is shown"
            )
        if effective != expected:
            raise SubmissionError(
                f"{rp}: task {task}: n-samples.effective is {effective} but limit {limit} of "
                f"{n_split} documents gives {expected}"
            )
        if effective == 0:
            raise SubmissionError(f"{rp}: task {task} evaluated no document")
        coverage = "full" if effective == n_split else "partial"
        subset = _document_subset(task, root, tcfg.get("metadata"), docs, data_dir, rp)
        if subset is not None:
            # metadata that changes which documents the split holds (Civil Comments' band, subsets, filters):
            # never a full run, and hashed into the document set so it is ranked only with the same selection
            coverage, n_split = "partial", subset[1]

        # reported metrics of this task, keyed by filter (known before the samples are read)
        reported: dict[str, dict[str, float]] = {}
        reported_text: dict[str, dict[str, str]] = {}  # text parameters (tuned_embedding): compared as text
        for key, val in res[task].items():
            if not isinstance(key, str) or "," not in key:
                continue
            metric, _, f = key.partition(",")
            if metric.endswith("_stderr"):
                continue  # bootstrap stderr: not recomputed (see docs/LEADERBOARD.md)
            if metric not in spec.metrics:
                raise SubmissionError(f"{rp}: {task} reports metric {metric[:40]!r}, which task {task} does not declare")
            if metric in T.TEXT_PARAMETERS:
                if not isinstance(val, str) or len(val) > 200:
                    raise SubmissionError(f"{rp}: {task} {key[:60]}: reported value must be a short text")
                reported_text.setdefault(f, {})[metric] = val
                reported.setdefault(f, {})
                continue
            reported.setdefault(f, {})[metric] = _num(val, f"{rp}: {task} {key[:60]}")

        every = {f: {**reported.get(f, {}), **reported_text.get(f, {})} for f in {*reported, *reported_text}}
        filters = _read_task_rows(sp, task, spec, docs, effective, every)
        if not filters:
            raise SubmissionError(f"{sp}: no sample rows")
        for f in reported:
            if f not in filters:
                raise SubmissionError(f"{rp}: {task} reports filter {f[:40]!r} but the samples have no row of it")
        doc_ids = list(range(effective))
        doc_set_hash = hashlib.sha256(canonical(([subset[0]] if subset else [])
                                                + [[i, docs.doc_hash(i)] for i in doc_ids])).hexdigest()
        splits.append(docs.split)
        kind_of_task = ""
        for f, flt in sorted(filters.items()):
            if len(flt.records) != effective:
                raise SubmissionError(
                    f"{sp}: filter {f} has {len(flt.records)} sample rows but n-samples.effective is {effective}"
                )
            records = [flt.records[i] for i in doc_ids]
            # what lm-eval reports for this row: the declared metrics less the parameters it did not fit
            expected = T.reported_names(spec.metrics, records[0])
            missing = sorted(set(expected) - set(every[f]) - set(T.STDERR_METRICS))
            if missing:
                raise SubmissionError(
                    f"{rp}: {task} filter {f}: metric(s) {', '.join(missing)} declared by the task but not "
                    "reported in results; submit lm-eval's unedited output"
                )
            flt.records.clear()  # the list holds them now
            for metric, rep_text in sorted(reported_text.get(f, {}).items()):
                got = _aggregation(spec, metric)(records)
                if got != rep_text:
                    raise SubmissionError(f"{rp}: {task} metric {metric},{f} is reported as {rep_text[:40]!r} but "
                                          f"recomputes to {str(got)[:40]!r} from {sp.name}; rejected")
            for metric in sorted(reported[f]):
                agg = _aggregation(spec, metric)
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        recomputed = float(agg(records))
                except (ValueError, TypeError, KeyError) as e:
                    raise SubmissionError(f"{sp}: {task} filter {f} metric {metric}: records rejected: {e}") from e
                rep_v = reported[f][metric]
                if not _same(rep_v, recomputed):
                    raise SubmissionError(
                        f"{rp}: {task} metric {metric},{f} is reported as {rep_v!r} but recomputes to "
                        f"{recomputed!r} from {sp.name} (tolerance {ATOL:g} + {RTOL:g}*|value|); rejected"
                    )
            if f in REFERENCE_FILTERS:
                continue  # checked above, but the board computes its own reference rows (below)
            kind_of_task = flt.kind
            e = _entry(task, spec, f, flt.kind, records, doc_ids, is_reference=False, effective=effective,
                       n_split=n_split, docs=docs, doc_set_hash=doc_set_hash, reported=reported[f],
                       coverage=coverage, where=f"{sp} ({task}, filter {f})")
            entries.append(e)
            hasher.update(canonical([task, docs.split, doc_set_hash, f, e.predictions_hash]))
            hasher.update(b"\n")
        if not kind_of_task:
            raise SubmissionError(
                f"{sp}: task {task} has only reference rows ({', '.join(REFERENCE_FILTERS)}); the board computes "
                "those itself, so there is nothing to store"
            )
        for kind, recs in references.reference_records(docs, doc_ids).items():
            entries.append(_entry(task, spec, kind, CLASSIFICATION, recs, doc_ids, is_reference=True,
                                  effective=effective, n_split=n_split, docs=docs, doc_set_hash=doc_set_hash,
                                  reported={}, coverage=coverage, where=f"board reference {kind} ({task})"))

    prov["results_file"] = results_path.name
    predictions_hash = hasher.hexdigest()
    return Submission(
        content_hash=predictions_hash, results_path=results_path, provenance=prov, limit=limit, entries=entries,
        predictions_hash=predictions_hash, model_args=model_args, split=", ".join(dict.fromkeys(splits)),
    )
