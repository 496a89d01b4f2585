"""The one gold reader: a task's gold label and soft target of a document, read from the task's own fields.

A classification task declares where its labels are: ``doc_to_target`` (a label index, a list of acceptable
indices for the any-gold / multi-label variants, or a label text among ``doc_to_choice``) and, for a binary
soft-label dataset, ``metadata.soft_field``, the column holding the annotator fraction of the positive class
(Civil Comments: ``toxicity``). :class:`GoldReader` reads those fields and nothing else, so the gold a run's
records carry (:class:`semcal_eval.semsoft.task.SemSoftTask`) and the gold the board checks them against
(:mod:`leaderboards.dataset_check`) are read by the same code, from the same declaration.

The value of a gold label (None, an index or a list of indices) and its comparison key are
:func:`semcal_eval.core.records.gold_value` / :func:`~semcal_eval.core.records.gold_key`, re-exported here.
"""

from __future__ import annotations

import math
from typing import Any

from semcal_eval.core.records import gold_key, gold_value

__all__ = ["GoldError", "GoldReader", "gold_value", "gold_key", "soft_field_of"]


class GoldError(ValueError):
    """A document's gold label or soft target is not one; the message names the field."""


def soft_field_of(task: Any) -> str | None:
    """The soft-target column a task declares (``metadata.soft_field``), None when it has none."""
    config = getattr(task, "config", None)
    field = ((getattr(config, "metadata", None) or {}) if config is not None else {}).get("soft_field")
    if not field:
        return None
    if not isinstance(field, str):
        raise GoldError(f"metadata soft_field must name a column, got {field!r}")
    return field


class GoldReader:
    """Gold labels and soft targets of one task's documents (and of its training split).

    ``task`` is an lm-eval ``ConfigurableTask``: the reader calls its ``doc_to_target``, ``doc_to_choice`` (only
    for a label given as text), ``config.metadata`` and, for the training split, ``has_training_docs`` /
    ``training_docs``.
    """

    def __init__(self, task: Any):
        self.task = task
        self.soft_field = soft_field_of(task)

    def gold(self, doc) -> int | list[int] | None:
        """The gold label index of ``doc``, or the list of its acceptable indices; a label given as text is its
        index among ``doc_to_choice`` (None when it is not one of them, as lm-eval scores it)."""
        g = self.task.doc_to_target(doc)
        if isinstance(g, str):
            choices = self.task.doc_to_choice(doc)
            return choices.index(g) if g in choices else None
        return gold_value(g)

    def soft(self, doc) -> float | None:
        """The annotator fraction of the positive class (index 1) of ``doc``, None when the task has none;
        :class:`GoldError` outside [0, 1]."""
        if not self.soft_field:
            return None
        value = doc[self.soft_field]
        t = float(value)
        if not (0.0 <= t <= 1.0) or math.isnan(t):
            raise GoldError(f"soft target {self.soft_field}={value!r} is outside [0, 1]")
        return t

    def _train_split(self):
        return self.task.training_docs() if self.task.has_training_docs() else None

    def train_golds(self) -> list:
        """Gold labels of the training split ([] without one): what the reference predictors read."""
        docs = self._train_split()
        return [self.gold(d) for d in docs] if docs is not None else []

    def train_soft(self) -> list[float]:
        """Soft targets of the training split ([] without one, or when the task has no soft targets)."""
        if not self.soft_field:
            return []
        docs = self._train_split()
        return [self.soft(d) for d in docs] if docs is not None else []
