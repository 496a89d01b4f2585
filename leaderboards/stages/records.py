"""Stage 4, **records**: one canonical record per (filter, document), read from the samples file as a stream.

Each row is checked as it is read, so a bad row stops the read there and memory stays one record per
document: its identity (:func:`row_key`: doc_id, filter, no document twice), its document against the dataset
(:func:`~leaderboards.stages.dataset.check_document`), its record (:func:`record_of`), and the record's values
(:func:`check_values`; gold and soft target by :func:`~leaderboards.stages.dataset.check_labels`).

The record comes from the one reader of a samples row, :func:`semcal_eval.runs.row_record`: a row logs its
record once, under its first metric name, and ``"=<that name>"`` under every other one (``<metric>_stderr``
included); older logs repeat the record under several names, accepted when every copy is equal. Two different
records, a reference to a name that holds none, or a name holding anything else are refused.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from semcal_eval.core import crossfit
from semcal_eval.core import metric_table as T
from semcal_eval.core.recalibration import MIN_FIT_DOCS
from semcal_eval.core.records import CLASSIFICATION, check_record
from semcal_eval.runs import REF_PREFIX, RunError, iter_samples, row_record

from ..dataset_check import TaskDocs
from ..errors import SubmissionError
from ..registry import REFERENCE_FILTERS, TaskSpec
from .dataset import check_document, check_labels

_FILTER_RE = re.compile(r"[A-Za-z0-9_.+-]{1,64}")  # fullmatch: "$" would let a trailing newline in
#: Filters one task may log: the board stores and renders every row.
MAX_FILTERS = 32
#: Largest magnitude of an integer in a per-document record (doc counts, top_k, tuned_n): far above any real
#: value, and convertible to float without overflow.
MAX_RECORD_INT = 2**53


@dataclass
class FilterRows:
    """What the board keeps of one filter's rows while streaming: the canonical record per document."""

    records: dict[int, dict] = field(default_factory=dict)
    lines: dict[int, int] = field(default_factory=dict)
    kind: str = ""


def read_task_rows(sp: Path, task: str, spec: TaskSpec, docs: TaskDocs, effective: int,
                   reported: dict[str, dict]) -> dict[str, FilterRows]:
    """Stage 4 for one task: stream ``sp`` and keep one canonical record per (filter, document), each row
    checked against the dataset as it is read. ``reported``: filter -> its reported metrics (numbers and text)."""
    filters: dict[str, FilterRows] = {}
    hashes: dict[int, tuple[str, str]] = {}  # doc_id -> the dataset's (doc_hash, target_hash), for every filter
    prev = 0
    for r in iter_samples(sp):
        prev = line = next_line(r, sp, prev)
        at = f"{sp}:{line}"
        if skipped_row(r, at, spec, reported, effective):
            continue
        doc_id, f, flt = row_key(r, at, task, spec, reported, effective, filters)
        check_document(r, doc_id, docs, task, at, hashes)
        holder, rec = record_of(r, at, f, reported[f])
        flt.kind = check_values(rec, f"{at} metric {holder}", flt.kind)
        rec = canonical_record(rec, f"{at} metric {holder}", flt.kind)
        if flt.kind == CLASSIFICATION:
            check_labels(rec, doc_id, f, docs, at)
        flt.records[doc_id] = rec
        flt.lines[doc_id] = line
    no_trailing_blank_lines(sp, prev)
    return filters


def next_line(r: dict, sp: Path, prev: int) -> int:
    """The line of samples row ``r``, which must follow line ``prev``: the reader skips blank lines, and lm-eval
    writes none."""
    line = r["_line"]
    if line != prev + 1:
        raise SubmissionError(f"{sp}:{prev + 1}: blank line; lm-eval writes one JSON object per line, submit "
                              "its unedited samples file")
    return line


def skipped_row(r: dict, at: str, spec: TaskSpec, reported: dict[str, dict], effective: int) -> bool:
    """True for a row a semcal filter skipped on a short run (:class:`semcal_eval.semsoft.filters.SkippedRow`):
    no metric logged, a declared filter the results do not report, and a run too short for a cross-fit
    (:func:`semcal_eval.core.crossfit.skip_reason`, the one reason a semcal row is skipped). Such a row holds
    nothing to recompute. A skip on a run long enough to fit is refused; any other row goes to :func:`row_key`."""
    f = r.get("filter")
    if r.get("metrics") != [] or not isinstance(f, str) or f in reported:
        return False
    if spec.filters and f not in spec.filters:
        return False  # row_key names the undeclared filter
    if crossfit.skip_reason(effective, MIN_FIT_DOCS) is None:
        raise SubmissionError(f"{at}: filter {f!r} logs no metric on {effective} documents, enough for its "
                              "cross-fit; submit lm-eval's unedited output")
    return True


def row_key(r: dict, at: str, task: str, spec: TaskSpec, reported: dict[str, dict], effective: int,
            filters: dict[str, FilterRows]) -> tuple[int, str, FilterRows]:
    """``(doc_id, filter, that filter's rows)`` of one row: an integer doc_id in ``0..effective-1`` not seen
    before for the filter, a plain filter name the task declares and the results report."""
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
    flt = filters.setdefault(f, FilterRows())
    if doc_id in flt.records:
        raise SubmissionError(f"{at}: doc_id {doc_id} appears twice for filter {f} (first at line {flt.lines[doc_id]})")
    return doc_id, f, flt


def record_of(r: dict, at: str, f: str, reported_f: dict) -> tuple[str, dict]:
    """``(holder, record)`` of one row, read by :func:`semcal_eval.runs.row_record`. The row's ``metrics`` are
    the filter's reported metrics (and their ``_stderr``); each name holds the record, an equal copy (older
    logs) or a reference ``"=<name>"`` that resolves to it."""
    ms = r.get("metrics")
    if not isinstance(ms, list) or not ms or not all(isinstance(m, str) for m in ms) or len(ms) > 1000:
        raise SubmissionError(f"{at}: 'metrics' must be a non-empty list of metric names, got {str(ms)[:60]}")
    # a <metric>_stderr (lm-eval's ± column) is logged per document but not reported (it is not recomputed)
    stderrs = {m for m in ms if m.endswith(T.STDERR_SUFFIX) and T.base_metric(m) in reported_f}
    unknown = sorted(set(ms) - set(reported_f) - stderrs)
    if unknown:
        raise SubmissionError(
            f"{at}: metric(s) {', '.join(m[:40] for m in unknown[:5])} logged per document but not reported "
            f"in results for filter {f}; submit lm-eval's unedited output"
        )
    absent = sorted(set(reported_f) - set(ms))
    if absent:
        raise SubmissionError(f"{at}: row for filter {f} lacks metric {absent[0]} (reported in results, not among "
                              "the row's 'metrics'); submit lm-eval's unedited output")
    try:
        got = row_record(r)
    except RunError as e:  # two different records, or a reference to a name that holds none
        raise SubmissionError(f"{at}: {e}") from None  # row_record's message names row, doc_id, filter, keys
    if got is None:
        raise SubmissionError(f"{at}: row for filter {f} holds no record under any of its metrics "
                              f"({', '.join(ms[:5])}); submit lm-eval's unedited output")
    holder, rec = got
    for m in ms:
        v = r.get(m)
        # row_record compared every copy and resolved every reference: what is left is anything else
        if not (isinstance(v, dict) or (isinstance(v, str) and v.startswith(REF_PREFIX))):
            raise SubmissionError(
                f"{at}: metric {m!r} of filter {f} holds {str(v)[:40]!r}, neither the row's record (logged under "
                f"{holder!r}) nor the reference {REF_PREFIX + holder!r} to it; submit lm-eval's unedited output")
    return holder, rec


def check_values(rec: dict, where: str, kind_so_far: str) -> str:
    """The record's kind (:func:`~semcal_eval.core.records.check_record`), after its numbers are bounded
    (:func:`bounded_numbers`); it must be the kind of the filter's earlier records (``kind_so_far``)."""
    bounded_numbers(rec, where)
    kind = check_record(rec, where)
    if kind_so_far and kind != kind_so_far:
        raise SubmissionError(f"{where}: a {kind_so_far} record was expected (the first row's kind), "
                              "records of one filter must be one kind")
    return kind


#: The fields of a per-document record and how each is written canonically (:func:`canonical_record`):
#: "float" a number (int or float in the file) as a float64, "int" an integer (an integral float accepted),
#: "bool", "str", "gold" an index or a list of indices; a trailing "?" also allows null.
_CLS_FIELDS = {"probs": "floats", "gold": "gold?", "soft": "float?", "temperature": "float", "at_bound": "bool",
               "tuned_tau": "float", "tuned_top_k": "int", "tuned_embedding": "str", "tuned_on": "str",
               "tuned_n": "int?", "tuned_guard": "bool?", "tuned_fold": "int?"}
_CONF_FIELDS = {"conf": "float", "correct": "int", "em": "int", "conf_parsed": "int", "conf_entropy": "float"}


def canonical_record(rec: dict, where: str, kind: str) -> dict:
    """The record as the board hashes and stores it: only the fields semcal writes (an unknown key is refused,
    naming it), every number in one spelling (``1``, ``1.0``, ``1e0`` and ``-0.0``/``0.0`` are one value:
    floats as float64, integers as int), an absent ``gold`` / ``soft`` written as null, keys sorted by the
    hash. So the predictions
    hash, and with it the spot-check draw, changes only when the scored numbers do: an extra key or a respelt
    number no longer buys a fresh draw (issue 43). A bool where a number belongs (JSON ``true`` as a
    probability) is refused."""
    fields = _CLS_FIELDS if kind == CLASSIFICATION else _CONF_FIELDS
    unknown = sorted(str(k) for k in rec if k not in fields)
    if unknown:
        raise SubmissionError(
            f"{where}: unknown record field(s) {', '.join(repr(k[:40]) for k in unknown[:5])}; a {kind} record "
            f"holds only {', '.join(fields)}; submit lm-eval's unedited samples file")
    # an absent gold / soft and a null one mean the same: both written as null
    out = {"gold": None, "soft": None} if kind == CLASSIFICATION else {}
    for k, v in rec.items():
        spec = fields[k]
        if spec.endswith("?") and v is None:
            out[k] = None
            continue
        out[k] = _canonical_value(v, spec.rstrip("?"), f"{where}: field {k}")
    return out


def _canonical_value(v, spec: str, where: str):
    """One field's value in its canonical spelling (see :func:`canonical_record`); SubmissionError otherwise."""
    def num(x, integral: bool):
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise SubmissionError(f"{where} is {str(x)[:40]!r}, not a number; submit lm-eval's unedited log")
        if integral:
            if isinstance(x, float) and not x.is_integer():
                raise SubmissionError(f"{where} is {x!r}, not a whole number")
            return int(x)
        return float(x) + 0.0  # + 0.0: -0.0 and 0.0 are one value, one spelling

    if spec == "floats":
        return [num(x, False) for x in v]  # check_record: a non-empty list
    if spec == "float":
        return num(v, False)
    if spec == "int":
        return num(v, True)
    if spec == "gold":
        return [num(x, True) for x in v] if isinstance(v, list) else num(v, True)
    if spec == "bool":
        if not isinstance(v, bool):
            raise SubmissionError(f"{where} is {str(v)[:40]!r}, not true or false")
        return v
    if not isinstance(v, str):
        raise SubmissionError(f"{where} is {str(v)[:40]!r}, not a text")
    return v


def check_logliks(row: dict, where: str) -> None:
    """A stock ``multiple_choice`` row's ``filtered_resps``: each log-likelihood as lm-eval logs it, a number
    written as text (``"-12.5"``) or a JSON number, never a bool (``float(True)`` is 1.0: a JSON ``true``
    log-likelihood was accepted, issue 43). SubmissionError naming the row otherwise; the stock reader
    (:func:`semcal_eval.calibrate.choice_logliks`) checks the rest."""
    resps = row.get("filtered_resps")
    for i, r in enumerate(resps if isinstance(resps, list) else []):
        v = r[0] if isinstance(r, list) and r else None
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise SubmissionError(f"{where}: filtered_resps[{i}] holds log-likelihood {str(v)[:20]!r}, not a number; "
                                  "submit lm-eval's unedited samples file")


def bounded_numbers(rec, where: str) -> None:
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


def no_trailing_blank_lines(sp: Path, last: int) -> None:
    """A samples file padded with blank lines after its last row is refused like one with blank lines inside."""
    with open(sp, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - 4096))
        tail = fh.read()
    # the last row's own line ending, LF or CRLF (a log written on Windows), is not a blank line
    body = tail[:-2] if tail.endswith(b"\r\n") else tail[:-1] if tail.endswith(b"\n") else tail
    if body.endswith((b"\n", b"\r")) or (body and not body.splitlines()[-1].strip()):
        raise SubmissionError(f"{sp}:{last + 1}: blank line(s) after the last row; submit lm-eval's unedited "
                              "samples file")


def check_filters(filters: dict[str, FilterRows], reported: dict[str, dict], effective: int, sp: Path,
                  rp: str, task: str) -> None:
    """Stage 4 for one task, after its rows are read: some model row, a row of every reported filter, and
    ``effective`` rows per filter (ids 0..effective-1, none twice, were checked per row)."""
    if not filters:
        raise SubmissionError(f"{sp}: no sample rows")
    for f in reported:
        if f not in filters:
            raise SubmissionError(f"{rp}: {task} reports filter {f[:40]!r} but the samples have no row of it")
    for f, flt in sorted(filters.items()):
        if len(flt.records) != effective:
            raise SubmissionError(
                f"{sp}: filter {f} has {len(flt.records)} sample rows but n-samples.effective is {effective}"
            )
    if all(f in REFERENCE_FILTERS for f in filters):
        raise SubmissionError(
            f"{sp}: task {task} has only reference rows ({', '.join(REFERENCE_FILTERS)}); the board computes "
            "those itself, so there is nothing to store"
        )
