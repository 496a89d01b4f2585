"""Required-field check: drop rows whose required fields are missing, count every skip, never silently.

The same code runs on hub and local data, on Arrow columns. The counts, and where the rows came from, are kept
in a semcal-owned :class:`LoadReport` per returned ``Dataset`` (:func:`load_report`), in a side table keyed on
the dataset object, rather than as attributes set on the ``datasets`` library's object. A dataset derived by
``.filter`` / ``.select`` is a new object with no report until semcal's own code carries it over
(:func:`carry_report`); :func:`load_report` then says ``None``, never a made-up zero.
"""

from __future__ import annotations

import logging
import weakref
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Iterable

from datasets import Dataset, DatasetDict

logger = logging.getLogger(__name__)


def _arrow_column(table, path: str):
    import pyarrow.compute as pc

    top, *rest = path.split(".")
    col = table.column(top)
    for part in rest:
        col = pc.struct_field(col, part)
    return col


def _missing_mask(col, kind: str):
    import pyarrow as pa
    import pyarrow.compute as pc

    missing = pc.is_null(col)
    if kind == "text":
        blank = pc.equal(pc.utf8_trim_whitespace(col), "")
        missing = pc.or_(missing, pc.fill_null(blank, True))
    elif kind == "list":
        empty = pc.equal(pc.list_value_length(col), 0)
        missing = pc.or_(missing, pc.fill_null(empty, True))
    elif kind == "number":
        if pa.types.is_floating(col.type):
            missing = pc.or_(missing, pc.fill_null(pc.is_nan(col), True))
    return missing


def drop_missing(ds: Dataset, required: Iterable[tuple[str, str]], *, what: str = "") -> tuple[Dataset, Counter]:
    """Remove rows whose required fields are missing; return ``(kept, Counter(reason -> rows))``.

    ``required`` is a list of ``(field path, kind)``: kind ``text`` (non-null, not blank), ``list``
    (non-null, non-empty), ``number`` (non-null, not NaN) or ``present`` (non-null). A row missing
    several fields is counted once, under its first missing field.
    """
    import numpy as np
    import pyarrow.compute as pc

    required = list(required)
    reasons: Counter = Counter()
    if len(ds) == 0 or not required:
        return ds, reasons
    cols = sorted({p.split(".")[0] for p, _ in required})
    table = ds.select_columns(cols).with_format("arrow")[:]
    already = np.zeros(len(ds), dtype=bool)
    for path, kind in required:
        miss = _missing_mask(_arrow_column(table, path), kind)
        miss_np = np.asarray(pc.fill_null(miss, True).to_numpy(zero_copy_only=False), dtype=bool)
        new = miss_np & ~already
        if new.any():
            reasons[f"missing {path}"] += int(new.sum())
        already |= miss_np
    if already.any():
        ds = ds.select(np.flatnonzero(~already).tolist())
        logger.warning(
            "%s: skipped %d row(s) with missing required fields (%s)",
            what or "dataset",
            int(already.sum()),
            ", ".join(f"{k}: {v}" for k, v in sorted(reasons.items())),
        )
    return ds, reasons


@dataclass(frozen=True)
class LoadReport:
    """What the loader did to one split: rows skipped for missing required fields (``skipped``, and per reason
    ``reasons``: a row counted once, under its first missing field), where the rows came from (``source``), and
    for a derived subset how it was cut (``subset``: e.g. Civil Comments' band and row counts)."""

    skipped: int
    reasons: dict = field(default_factory=dict)
    source: str | None = None
    subset: dict | None = None


#: Dataset -> its LoadReport. Weak keys: a report lives exactly as long as its dataset (``datasets.Dataset``
#: hashes by identity), and nothing is set on the other library's object.
_REPORTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def attach_skips(ds: Dataset, skipped: Counter, source: str) -> Dataset:
    """Record the :class:`LoadReport` of ``ds``: how many rows were skipped, why, and where they came from."""
    _REPORTS[ds] = LoadReport(int(sum(skipped.values())), dict(skipped), source)
    return ds


def load_report(ds: Dataset) -> LoadReport | None:
    """The :class:`LoadReport` of a dataset the loader returned (or one :func:`carry_report` was given); None
    for any other dataset, e.g. the result of a ``.filter`` no semcal code carried the report to."""
    return _REPORTS.get(ds)


def carry_report(source: Dataset, derived: Dataset, **changes) -> Dataset:
    """Give ``derived`` (made from ``source`` by semcal's own code: ``.select`` / ``.filter`` return new objects)
    the report of ``source``, with ``changes`` (fields of :class:`LoadReport`) applied; returns ``derived``."""
    report = load_report(source)
    if report is None:
        raise ValueError("carry_report: the source dataset has no LoadReport (it did not come from the loader)")
    _REPORTS[derived] = replace(report, **changes)
    return derived


def skipped_rows(ds: Dataset | DatasetDict) -> int | dict[str, int]:
    """Rows skipped for missing required fields when ``ds`` was loaded (per split for a DatasetDict); 0 for a
    dataset without a :class:`LoadReport`."""
    if isinstance(ds, DatasetDict):
        return {k: skipped_rows(v) for k, v in ds.items()}  # type: ignore[misc]
    report = load_report(ds)
    return report.skipped if report is not None else 0
