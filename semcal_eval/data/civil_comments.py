"""Civil Comments: the seven annotator-fraction attributes and the subsets by annotator agreement."""

from __future__ import annotations

import math
from typing import Any

from datasets import Dataset

from semcal_eval.data.source import ENV_VAR

CIVIL_ATTRIBUTES: tuple[str, ...] = (
    "toxicity", "severe_toxicity", "obscene", "threat", "insult", "identity_attack",
    "sexual_explicit",
)  # fmt: skip

CIVIL_SUBSETS = ("ambiguous", "clear", "full")


def validate_band(band: Any) -> tuple[float, float]:
    """Check an annotator-agreement band ``(lo, hi)``: two finite numbers with 0 ≤ lo < hi ≤ 1."""
    try:
        lo, hi = band
        lo, hi = float(lo), float(hi)
    except (TypeError, ValueError) as e:
        raise ValueError(f"band must be a pair (lo, hi) of numbers with 0 <= lo < hi <= 1, got {band!r}") from e
    if isinstance(band, (str, bytes)) or not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"band must be a pair (lo, hi) of finite numbers, got {band!r}")
    if not (0.0 <= lo < hi <= 1.0):
        raise ValueError(f"band must satisfy 0 <= lo < hi <= 1, got lo={lo}, hi={hi}")
    return lo, hi


def _validate_min_annotators(min_annotators: Any) -> int | None:
    if min_annotators is None:
        return None
    if isinstance(min_annotators, bool) or not isinstance(min_annotators, int) or min_annotators < 1:
        raise ValueError(f"min_annotators must be a positive integer or None, got {min_annotators!r}")
    return min_annotators


def civil_comments_subset(
    ds: Dataset,
    subset: str = "ambiguous",
    band: tuple[float, float] = (0.2, 0.8),
    min_annotators: int | None = None,
) -> Dataset:
    """Civil Comments rows by annotator agreement, with t = ``toxicity`` (fraction of raters who
    called the comment toxic):

    * ``ambiguous``: lo < t < hi (open band),
    * ``clear``: t ≤ lo or t ≥ hi (the complement: ambiguous ∪ clear = full, disjoint),
    * ``full``: every row.

    The band is open because the boundary values are the commonest exact fractions of small rater
    pools (1/5 = 0.2, 4/5 = 0.8) and represent a clear majority; the open band also reproduces the
    usual "0.2 < target < 0.8" definition. Comparisons are made in float32, the storage type of
    ``toxicity``, so that a stored 0.2 equals the bound 0.2. ``min_annotators`` additionally keeps
    rows with ``toxicity_annotator_count >= min_annotators`` (a column of the raw Jigsaw files; the
    hub copy lacks it).
    """
    import numpy as np

    if subset not in CIVIL_SUBSETS:
        raise ValueError(f"subset must be one of {CIVIL_SUBSETS}, got {subset!r}")
    lo, hi = validate_band(band)
    min_ann = _validate_min_annotators(min_annotators)
    if "toxicity" not in ds.column_names:
        raise ValueError(f"civil_comments_subset needs a 'toxicity' column; got {ds.column_names}")
    t = np.asarray(ds["toxicity"], dtype=np.float64)
    if np.isnan(t).any():
        raise ValueError("toxicity contains missing values; load the data through semcal_eval.data.load")
    t32 = t.astype(np.float32)
    lo32, hi32 = np.float32(lo), np.float32(hi)
    inside = (t32 > lo32) & (t32 < hi32)
    keep = inside if subset == "ambiguous" else ~inside if subset == "clear" else np.ones_like(inside)
    if min_ann is not None:
        if "toxicity_annotator_count" not in ds.column_names:
            raise ValueError(
                "min_annotators needs the column toxicity_annotator_count, which the hub copy "
                "google/civil_comments lacks; it comes with the raw Jigsaw CSV files (set "
                f"{ENV_VAR}), or pass min_annotators=None"
            )
        counts = np.asarray(
            [c if c is not None else -1 for c in ds["toxicity_annotator_count"]], dtype=np.int64
        )
        keep &= counts >= min_ann
    return ds.select(np.flatnonzero(keep).tolist())
