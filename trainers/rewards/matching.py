"""RLVR's reward, and what every method's reward reads first: a TRL completion's text, its first-line answer,
the dataset's columns, and correctness by the one grader.

**Correctness** — in every method, and in the evaluation tasks — is :func:`semcal_eval.qa.grading.grade` on the
completion's first line: the folded, normalised answer must *be* a gold alias (lists, hedges, negations and other
entities are wrong; MS MARCO-style sentence golds use ROUGE-L with the same guards). One grader, so no method is
trained on a rule the evaluation does not use, and no answer format games it (tests/test_answer_grading.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from semcal_eval import qa
from semcal_eval.qa.answers import usable_golds
from semcal_eval.qa.labels import grade_many

__all__ = ["completion_text", "extract_answer", "gold_list", "dataset_column", "correctness", "correctness_reward"]


def completion_text(completion: Any) -> str:
    """Text of one TRL completion: a string (standard format) or a list of messages (conversational format,
    the last message's ``content``). ``None`` and empty message lists give ``""``.

    >>> completion_text(" Paris")
    ' Paris'
    >>> completion_text([{"role": "assistant", "content": "Paris"}])
    'Paris'
    >>> completion_text([])
    ''
    """
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content") or "")
    if isinstance(completion, Sequence):
        if not completion:
            return ""
        return completion_text(completion[-1])
    return str(completion)


def extract_answer(text: str) -> str:
    """Short answer of a free-form completion, exactly as the QA tasks read it at evaluation time
    (:func:`semcal_eval.qa.clean_answer`: the first non-empty line, stripped).

    >>> extract_answer(" Paris\\nQ: next question")
    'Paris'
    >>> extract_answer("")
    ''
    """
    return qa.clean_answer(text or "")


def gold_list(value: Any) -> list[str]:
    """The usable gold aliases of one row's ``answers`` column (:func:`semcal_eval.qa.answers.usable_golds`, the
    one gold reader the evaluation uses; the training dataset already dropped rows with none, and grading one
    that has none raises :class:`~semcal_eval.qa.answers.EmptyGoldError`).

    >>> gold_list(["Paris", "", "the"]), gold_list("Paris"), gold_list(None)
    (['Paris'], ['Paris'], [])
    """
    return usable_golds(value)


def dataset_column(kwargs: dict, name: str, n: int, required: bool = True) -> list:
    col = kwargs.get(name)
    if col is None:
        if required:
            raise KeyError(
                f"reward needs a dataset column {name!r} (one entry per prompt); the training dataset must carry "
                f"'prompt', 'question' and 'answers' columns (see trainers.data.build_dataset)"
            )
        return [None] * n
    if len(col) != n:
        raise ValueError(f"column {name!r} has {len(col)} entries for {n} completions")
    return list(col)


def correctness(questions: Sequence[str], predictions: Sequence[str], golds: Sequence[Sequence[str]]) -> list[float]:
    """y_i = J(C_i, C*) = :func:`semcal_eval.qa.grading.grade` (prediction i, its golds) as 0.0/1.0: the grader
    the evaluation tasks use. An empty prediction is never correct.

    >>> correctness(["q"] * 4, ["Paris", "The answer is Paris.", "Paris or Lyon", ""], [["Paris"]] * 4)
    [1.0, 1.0, 0.0, 0.0]
    """
    return grade_many(list(predictions), list(golds), [q or "" for q in questions])


def correctness_reward(
    prompts: list,
    completions: list,
    completion_ids: list | None = None,
    trainer_state: Any = None,
    **kwargs,
) -> list[float]:
    r"""RLVR correctness reward r_RLVR = J(C_j, C*) ∈ {0, 1}: the completion's first line graded by
    :func:`semcal_eval.qa.grading.grade` against the gold aliases (the evaluation's grader).

    Args:
        prompts: the prompts, one per completion (TRL repeats each prompt K times).
        completions: completions as strings or lists of messages.
        completion_ids: unused.
        trainer_state: unused.
        **kwargs: dataset columns; needs ``answers`` (list of gold strings per row), uses ``question``.

    Example:
    ```python
    >>> correctness_reward(["Q: capital of France?\nA:"] * 4, [" Paris", " Lyon", " Paris, Lyon", ""],
    ...                    answers=[["Paris"]] * 4, question=["capital of France?"] * 4)
    [1.0, 0.0, 0.0, 0.0]

    ```
    """
    n = len(completions)
    answers = dataset_column(kwargs, "answers", n)
    questions = dataset_column(kwargs, "question", n, required=False)
    preds = [extract_answer(completion_text(c)) for c in completions]
    y = correctness([q or "" for q in questions], preds, [gold_list(a) for a in answers])
    log_metric = kwargs.get("log_metric")
    if log_metric is not None:
        log_metric("csr/empty_answer_frac", float(np.mean([not p for p in preds])) if n else 0.0)
    return y
