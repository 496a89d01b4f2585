"""GoEmotions task hooks: data, prompt, labels. Scoring lives in semcal_eval."""

from __future__ import annotations

from semcal_eval.data import GOEMOTIONS_LABELS, lm_eval_dataset
from semcal_eval.semsoft.task import SemSoftTask  # noqa: F401  (YAML: class: !function utils.SemSoftTask)
from semcal_eval.harness.multiple_choice import make_mc_process_results

PROMPT = (
    "Which emotion does this Reddit comment express? "
    "Answer with exactly one word from this list: {labels}.\n\n"
    "Comment: {text}\n"
)
_LABEL_LIST = ", ".join(GOEMOTIONS_LABELS)


def load_single_label(**kwargs):
    """Rows with exactly one gold label (the default policy; 4,590 of the 5,427 test rows)."""
    return lm_eval_dataset("goemotions", **kwargs).filter(lambda d: len(d["labels"]) == 1)


def load_all_rows(**kwargs):
    return lm_eval_dataset("goemotions", **kwargs)


def doc_to_text(doc) -> str:
    return PROMPT.format(labels=_LABEL_LIST, text=doc["text"].strip())


def doc_to_choice(doc) -> list[str]:
    return list(GOEMOTIONS_LABELS)


def doc_to_target(doc) -> int:
    return int(doc["labels"][0])


def doc_to_golds(doc) -> list[int]:
    return [int(x) for x in doc["labels"]]


# goemotions_base: lm-eval's multiple_choice requests, scored with the classification headline metrics of the
# metric table (the names its YAML declares; tests/test_metric_table.py checks that they agree).
process_mc_results = make_mc_process_results(doc_to_target, "classification")
