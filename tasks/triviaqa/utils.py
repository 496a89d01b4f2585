"""TriviaQA task hooks: data and document fields. Everything else is shared in semcal_eval.qa."""

from __future__ import annotations

from semcal_eval.data import make_lm_eval_loader
from semcal_eval.qa import (  # noqa: F401  (the YAMLs reach these as !function utils.<name>)
    JudgeFilter,
    QATask,
    make_process_docs,
    qa_doc_to_target,
    qa_doc_to_text,
    verbalized_doc_to_text,
)

load = make_lm_eval_loader("triviaqa")
process_docs = make_process_docs("question", lambda d: d["answer"]["aliases"], unanswerable=())
