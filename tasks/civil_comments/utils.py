"""Civil Comments task hooks: data (subset by annotator agreement), prompt, labels. Scoring lives in semcal_eval.

Subset settings come from lm-eval metadata (the YAML's ``metadata`` merged with ``--metadata``):

* ``band``: ``[lo, hi]``, the open toxicity band of the ambiguous subset (default ``[0.2, 0.8]``);
* ``min_annotators``: keep rows rated by at least this many annotators (default ``null``: no minimum;
  needs ``toxicity_annotator_count``, which only the raw Jigsaw files have);
* ``split``: the evaluated split (``test`` by default; ``train`` on the shared mirror, see docs/DATA.md).

The same subset is applied to every split of the returned DatasetDict, so the ``prior`` reference row is the
mean annotator fraction of the *training* items of the same subset.
"""

from __future__ import annotations

import logging

from semcal_eval.harness import aggregations  # noqa: F401  (registers the semcal_* aggregations the base variant names)
from semcal_eval.data import carry_report, civil_comments_subset, lm_eval_dataset, load_report, validate_band
from semcal_eval.semsoft.task import SemSoftTask  # noqa: F401  (YAML: class: !function utils.SemSoftTask)
from semcal_eval.harness.multiple_choice import make_mc_process_results

log = logging.getLogger(__name__)

DEFAULT_BAND = (0.2, 0.8)

# The question uses the definition the Civil Comments / Jigsaw raters were given ("a rude, disrespectful, or
# unreasonable comment that is likely to make you leave a discussion"), so the model is asked the raters' question.
PROMPT = (
    "Is the following comment toxic or safe? Toxic means rude, disrespectful or unreasonable enough to make "
    "someone leave a discussion. Answer toxic or safe.\n\n"
    "Comment: {text}\n"
)
# Positive class at index 1 (Contract 1: p = probs[1] is P(toxic)). Chosen over "no"/"yes" and
# "non-toxic"/"toxic" by class AUROC (mean over SmolLM2-135M and Qwen2.5-Coder-0.5B, constrained and semsoft rows)
# on 88 balanced *clear* rows, disjoint from the ambiguous rows reported (README, "Prompt choice").
LABELS = ["safe", "toxic"]
GEN_PREFIX = "Answer:"


class CivilCommentsConfigError(ValueError):
    """An invalid subset setting in --metadata; the message names the key and a valid example."""


def subset_params(metadata: dict) -> tuple[tuple[float, float], int | None]:
    """(band, min_annotators) from task metadata, validated with errors that name the --metadata key."""
    band = metadata.get("band", DEFAULT_BAND)
    if band is None:
        band = DEFAULT_BAND
    try:
        band = validate_band(band)
    except ValueError as e:
        raise CivilCommentsConfigError(
            f"civil_comments: invalid metadata band={band!r}: {e}. "
            """Pass e.g. --metadata '{"band": [0.2, 0.8]}' (open interval lo < toxicity < hi)."""
        ) from None
    min_ann = metadata.get("min_annotators")
    if min_ann is not None and (isinstance(min_ann, bool) or not isinstance(min_ann, int) or min_ann < 1):
        raise CivilCommentsConfigError(
            f"civil_comments: invalid metadata min_annotators={min_ann!r}: it must be a positive integer or "
            """null. Pass e.g. --metadata '{"min_annotators": 10}'."""
        )
    return band, min_ann


def _load(subset: str, metadata: dict):
    band, min_ann = subset_params(metadata)  # fail before touching the data
    dd = lm_eval_dataset("civil_comments", **metadata)
    out = {}
    for key, ds in dd.items():
        report = load_report(ds)
        skipped, reasons = report.skipped, report.reasons
        try:
            sub = civil_comments_subset(ds, subset=subset, band=band, min_annotators=min_ann)
        except ValueError as e:
            raise CivilCommentsConfigError(f"civil_comments ({key} split): {e}") from None
        # .select returns a new object: carry the loader's report over, so it is never lost.
        carry_report(ds, sub, subset={"subset": subset, "band": list(band), "min_annotators": min_ann,
                                      "rows_before": len(ds), "rows_after": len(sub)})
        out[key] = sub
        msg = (f"civil_comments {subset} ({key} split, band {band[0]:g} < t < {band[1]:g}"
               f"{'' if min_ann is None else f', >= {min_ann} annotators'}): {len(sub)} of {len(ds)} rows; "
               f"{skipped} row(s) skipped for missing text/toxicity{' ' + str(reasons) if reasons else ''}")
        (log.warning if skipped else log.info)(msg)
        if key == "eval" and len(sub) == 0:
            raise CivilCommentsConfigError(
                f"civil_comments: the {subset} subset of the evaluated split is empty "
                f"(band {band}, min_annotators {min_ann}); widen the band or lower min_annotators"
            )
    from datasets import DatasetDict

    return DatasetDict(out)  # per-split skips: semcal_eval.data.skipped_rows(dd)


def load_ambiguous(**metadata):
    """Rows with lo < toxicity < hi (default 0.2 < t < 0.8): the annotators disagree."""
    return _load("ambiguous", metadata)


def load_clear(**metadata):
    """Rows with toxicity <= lo or >= hi: the complement of the ambiguous rows."""
    return _load("clear", metadata)


def load_full(**metadata):
    """Every row (the band is still validated; min_annotators still applies)."""
    return _load("full", metadata)


def doc_to_text(doc) -> str:
    return PROMPT.format(text=doc["text"].strip())


def doc_to_choice(doc) -> list[str]:
    return list(LABELS)


def doc_to_target(doc) -> int:
    """Hard label: toxic (1) when at least half the annotators said so."""
    return int(float(doc["toxicity"]) >= 0.5)


def doc_to_soft(doc) -> float:
    return float(doc["toxicity"])


# civil_comments_*_base: lm-eval's multiple_choice requests, scored with the soft-label headline metrics of the
# metric table (the names its YAML declares; tests/test_metric_table.py checks that they agree).
process_mc_results = make_mc_process_results(doc_to_target, "soft", soft_fn=doc_to_soft)
