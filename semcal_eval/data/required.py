"""Required-field check: drop rows whose required fields are missing, count every skip, never silently.

The same code runs on hub and local data, on Arrow columns. The counts are attached to the returned
``Dataset`` as ``ds.semcal_skipped`` (int) and ``ds.semcal_skip_reasons`` (dict reason → rows), with
``ds.semcal_source`` naming where the rows came from.
"""

from __future__ import annotations

import logging
from collections import Counter
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


def attach_skips(ds: Dataset, skipped: Counter, source: str) -> Dataset:
    """Record on ``ds`` how many rows were skipped, why, and where the rows came from."""
    ds.semcal_skipped = int(sum(skipped.values()))
    ds.semcal_skip_reasons = dict(skipped)
    ds.semcal_source = source
    return ds


def skipped_rows(ds: Dataset | DatasetDict) -> int | dict[str, int]:
    """Rows skipped for missing required fields when ``ds`` was loaded (per split for a DatasetDict)."""
    if isinstance(ds, DatasetDict):
        return {k: skipped_rows(v) for k, v in ds.items()}  # type: ignore[misc]
    return int(getattr(ds, "semcal_skipped", 0))
