"""The prompts of the semcal QA tasks, shared with the trainers so that a checkpoint is trained on exactly the
prompt it is evaluated with. No lm-eval import.

A document is any mapping with ``qa_question`` (the QA tasks' loader adds it, from
:func:`semcal_eval.data.fields.qa_question`).
"""

from __future__ import annotations

__all__ = [
    "QA_DESCRIPTION",
    "VERBALIZED_DESCRIPTION",
    "RLCR_SYSTEM_PROMPT",
    "qa_doc_to_text",
    "verbalized_doc_to_text",
    "rlcr_prompt",
    "rlcr_doc_to_text",
]

#: The one prompt of every semcal QA task (zero-shot with three fixed examples, short answers).
QA_DESCRIPTION = (
    "Answer each question with a short answer: a name, a date, a number or a few words. Do not explain.\n\n"
    "Q: What is the capital of Australia?\nA: Canberra\n\n"
    "Q: Who wrote the novel Nineteen Eighty-Four?\nA: George Orwell\n\n"
    "Q: In which year did the Berlin Wall fall?\nA: 1989\n\n"
)
#: The verbalised-confidence variant's prompt (the answer, then "Confidence: p").
VERBALIZED_DESCRIPTION = (
    "Answer each question with a short answer: a name, a date, a number or a few words. Do not explain. "
    "Then give your confidence that the answer is correct, as a probability between 0 and 1.\n\n"
    "Q: What is the capital of Australia?\nA: Canberra\nConfidence: 0.9\n\n"
    "Q: Who wrote the novel Nineteen Eighty-Four?\nA: George Orwell\nConfidence: 0.95\n\n"
    "Q: Which Danish composer wrote the opera Maskarade?\nA: Niels Gade\nConfidence: 0.3\n\n"
)
#: RLCR's format instructions (Damani et al.): the system prompt of RLCR training (``trainers``) and of the
#: ``*_rlcr`` evaluation tasks. The one copy of this text; the trainers import it from here.
RLCR_SYSTEM_PROMPT = (
    "Answer the question. First reason inside <think></think>, then give the short final answer inside "
    "<answer></answer>, then analyse how likely that answer is to be correct inside <analysis></analysis>, "
    "and finally state your confidence that the answer is correct as a number between 0 and 1 inside "
    "<confidence></confidence>."
)


def qa_doc_to_text(doc: dict) -> str:
    """:data:`QA_DESCRIPTION` (instructions and three fixed examples), then ``Q: <question>`` and ``A:``.

    >>> qa_doc_to_text({"qa_question": "Who wrote Emma?"}).endswith("Q: Who wrote Emma?\\nA:")
    True
    """
    return f"{QA_DESCRIPTION}Q: {doc['qa_question']}\nA:"


def verbalized_doc_to_text(doc: dict) -> str:
    """:data:`VERBALIZED_DESCRIPTION`, then ``Q: <question>`` and ``A:``."""
    return f"{VERBALIZED_DESCRIPTION}Q: {doc['qa_question']}\nA:"


def rlcr_prompt(question: str) -> str:
    """The plain-text RLCR prompt: :data:`RLCR_SYSTEM_PROMPT`, a blank line, ``Question: <question>`` and a
    newline; the completion follows directly. Byte for byte the prompt ``trainers.data.make_prompt(question,
    "rlcr")`` trains on (``data.prompt_style: plain``; tests/test_rlcr_eval.py checks it).

    >>> rlcr_prompt(" Who wrote Emma? ").endswith("</confidence>.\\n\\nQuestion: Who wrote Emma?\\n")
    True
    """
    return f"{RLCR_SYSTEM_PROMPT}\n\nQuestion: {question.strip()}\n"


def rlcr_doc_to_text(doc: dict) -> str:
    """:func:`rlcr_prompt` of the document's ``qa_question`` (the ``*_rlcr`` tasks' prompt)."""
    return rlcr_prompt(doc["qa_question"])
