"""Datasets in their Hugging Face hub schema, from the hub or a local mirror (``$SEMCAL_DATA_DIR``); docs/DATA.md.

Modules, one job each:

- :mod:`~semcal_eval.data.specs`: the dataset table (hub ids, splits, schema, required fields, raw files with
  their parsers, row completer, hooks), one :class:`DatasetSpec` row per dataset
- :mod:`~semcal_eval.data.fields`: the QA datasets' question field, gold extraction and unanswerable markers,
  used by the QA tasks and the trainers
- :mod:`~semcal_eval.data.load`: the generic loader (local or hub, split resolution, the lm-eval hook)
- :mod:`~semcal_eval.data.source`: local mirror or hub (``data_dir`` / ``$SEMCAL_DATA_DIR``)
- :mod:`~semcal_eval.data.local`: which file of the mirror provides a split; the missing-file error
- :mod:`~semcal_eval.data.raw`: raw-file parsers (TSV, CSV, JSON, parquet)
- :mod:`~semcal_eval.data.rows`: completion of parsed records to full hub-schema rows
- :mod:`~semcal_eval.data.required`: the required-field check (rows skipped, counted and logged)
- :mod:`~semcal_eval.data.goemotions`, :mod:`~semcal_eval.data.civil_comments`: dataset-specific labels and subsets
"""

from semcal_eval.data.civil_comments import CIVIL_ATTRIBUTES, CIVIL_SUBSETS, civil_comments_subset, validate_band
from semcal_eval.data.fields import QA_FIELDS, QAFields, qa_fields, qa_golds, qa_question
from semcal_eval.data.goemotions import (
    GOEMOTIONS_LABELS,
    GOEMOTIONS_NEUTRAL,
    goemotions_label_counts,
    goemotions_label_names,
    multi_label,
    single_label,
)
from semcal_eval.data.load import (
    EVAL_KEY,
    lm_eval_dataset,
    load,
    load_civil_comments,
    load_goemotions,
    load_hotpotqa,
    load_msmarco,
    load_nq_open,
    load_triviaqa,
    make_lm_eval_loader,
)
from semcal_eval.data.local import MissingSplitFileError, local_splits
from semcal_eval.data.required import LoadReport, carry_report, drop_missing, load_report, skipped_rows
from semcal_eval.data.rows import normalize_triviaqa_answer
from semcal_eval.data.source import ENV_VAR, HUB, resolve_data_dir
from semcal_eval.data.specs import (
    ALIASES,
    EXTRA_FEATURES,
    HUB_FEATURES,
    SPECS,
    DatasetSpec,
    RawFile,
    get_spec,
    known_datasets,
)

__all__ = [
    "ALIASES",
    "CIVIL_ATTRIBUTES",
    "CIVIL_SUBSETS",
    "DatasetSpec",
    "ENV_VAR",
    "EVAL_KEY",
    "EXTRA_FEATURES",
    "GOEMOTIONS_LABELS",
    "GOEMOTIONS_NEUTRAL",
    "HUB",
    "HUB_FEATURES",
    "MissingSplitFileError",
    "QAFields",
    "QA_FIELDS",
    "RawFile",
    "SPECS",
    "civil_comments_subset",
    "drop_missing",
    "get_spec",
    "goemotions_label_counts",
    "goemotions_label_names",
    "known_datasets",
    "lm_eval_dataset",
    "load",
    "LoadReport",
    "carry_report",
    "load_civil_comments",
    "load_goemotions",
    "load_hotpotqa",
    "load_msmarco",
    "load_nq_open",
    "load_triviaqa",
    "load_report",
    "local_splits",
    "make_lm_eval_loader",
    "multi_label",
    "normalize_triviaqa_answer",
    "qa_fields",
    "qa_golds",
    "qa_question",
    "resolve_data_dir",
    "single_label",
    "skipped_rows",
    "validate_band",
]
