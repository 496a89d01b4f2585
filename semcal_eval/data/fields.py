"""Dataset field specs of the QA datasets: where the question is, how the gold answers are extracted, which
answers mean "unanswerable". One table, used by the QA tasks (``semcal_eval.qa.task``) and the trainers.

Each row reads the hub schema that :func:`semcal_eval.data.load` returns (local raw files are mapped to it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["QAFields", "QA_FIELDS", "qa_fields", "qa_question", "qa_golds", "qa_example"]


@dataclass(frozen=True)
class QAFields:
    """Where a QA dataset keeps its question and gold answers."""

    question: str  # the question field
    golds: Callable[[dict], list[Any]]  # raw gold aliases of one row
    unanswerable: tuple[str, ...] = ()  # gold strings that mean "no answer" (dropped, never scored as gold)


def _aliases(answer: Any) -> list[Any]:
    # TriviaQA's hub answer is a struct; its aliases include the value
    return list(answer.get("aliases") or []) or [answer.get("value")]


QA_FIELDS: dict[str, QAFields] = {
    "nq_open": QAFields("question", lambda row: list(row["answer"] or [])),
    "triviaqa": QAFields("question", lambda row: _aliases(row["answer"])),
    "hotpotqa": QAFields("question", lambda row: [row["answer"]]),
    "msmarco": QAFields("query", lambda row: list(row["answers"] or []), unanswerable=("No Answer Present.",)),
}


def qa_fields(name: str) -> QAFields:
    """The field spec of QA dataset ``name``; a clear error for any other name."""
    try:
        return QA_FIELDS[name]
    except KeyError:
        raise ValueError(
            f"{name!r} is not a QA dataset: choose one of {sorted(QA_FIELDS)} (data.dataset in a trainer config, "
            "or the dataset of a QA task)"
        ) from None


def qa_question(name: str, row: dict) -> str:
    """The question text of one row, stripped ("" when the field is None)."""
    q = row[qa_fields(name).question]
    return "" if q is None else str(q).strip()


def qa_golds(name: str, row: dict) -> list[str]:
    """The usable gold aliases of one row (:func:`semcal_eval.qa.answers.usable_golds`, the one gold reader:
    aliases whose SQuAD normalisation holds a letter or digit), less the dataset's unanswerable markers (MS
    MARCO's "No Answer Present."). [] means the row cannot be scored: the loaders drop it and count it.

    >>> qa_golds("msmarco", {"query": "q", "answers": ["No Answer Present."]})
    []
    >>> qa_golds("triviaqa", {"question": "q", "answer": {"value": "Paris", "aliases": ["Paris", "paris", ""]}})
    ['Paris', 'paris']
    """
    from semcal_eval.qa.answers import usable_golds

    spec = qa_fields(name)
    try:
        return usable_golds(spec.golds(row) or [], spec.unanswerable)
    except ValueError as e:
        # e.g. NQ-Open rows (answer: list) read as HotpotQA (answer: str) would give the gold "['Paris']"
        raise ValueError(f"{name}: {e}; the rows are not in the {name} hub schema (load them with "
                         f"semcal_eval.data.load({name!r}), or name their dataset)") from None


def qa_example(name: str, row: dict) -> tuple[str, list[str]] | None:
    """``(question, golds)`` of one row of QA dataset ``name``, or None when the row cannot be scored: no
    question text, or no usable gold (:func:`qa_golds` is empty). Callers drop None rows and log the count.

    >>> qa_example("msmarco", {"query": " q ", "answers": ["No Answer Present."]}) is None
    True
    >>> qa_example("nq_open", {"question": " Who? ", "answer": ["Emma", ""]})
    ('Who?', ['Emma'])
    """
    question, golds = qa_question(name, row), qa_golds(name, row)
    return (question, golds) if question and golds else None
