"""Hooks of the shared QA task template (the template files reach them as ``!function utils.<name>``).

The code lives in :mod:`semcal_eval.qa`; this file exists because lm-eval resolves ``!function`` next to the
YAML file that writes it, so the template folder needs its own ``utils.py``.
"""

from __future__ import annotations

from semcal_eval.qa.prompts import qa_doc_to_text, rlcr_doc_to_text, verbalized_doc_to_text
from semcal_eval.qa.task import JudgeFilter, QATask, load, qa_doc_to_target

__all__ = ["QATask", "JudgeFilter", "load", "qa_doc_to_text", "verbalized_doc_to_text", "rlcr_doc_to_text",
           "qa_doc_to_target"]
