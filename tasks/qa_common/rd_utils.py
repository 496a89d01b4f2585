"""Hook of the ``*_rd`` task template (``!function rd_utils.rd_doc_to_text``): the Rewarding Doubt prompt of
training (:func:`semcal_eval.qa.verbalized.rd_prompt`). lm-eval resolves ``!function`` next to the YAML."""

from __future__ import annotations

from semcal_eval.qa.verbalized import rd_prompt


def rd_doc_to_text(doc: dict) -> str:
    """RD's training prompt for one QA document (its ``qa_question``)."""
    return rd_prompt(doc["qa_question"])
