"""Semantic-agreement confidence on a user's own stock ``generate_until`` task, from a three-line YAML::

    include: my_qa.yaml                 # the user's stock lm-eval task with a gold answer (doc_to_target)
    task: my_qa_semagree
    class: !function semcal_eval.qa.stock.StockSemAgreeTask

It is the QA tasks' method (:class:`semcal_eval.qa.task.QATask`: one greedy answer, K sampled answers, clustered by
a judge; confidence = the share of the samples in the greedy answer's cluster), applied to the user's prompt,
documents and gold answers:

* the **prompt** is the task's own ``doc_to_text`` (few-shot settings included); its ``generation_kwargs`` give
  ``until`` / ``max_gen_toks`` of the greedy answer and the samples, the sampling settings come from
  ``--metadata`` (:class:`semcal_eval.qa.settings.QASettings`: ``num_samples``, ``temperature``, ...);
* the **gold answers** are ``doc_to_target`` (a list is a list of acceptable aliases, an index into
  ``doc_to_choice`` the choice text); documents without a non-empty gold are dropped with a warning, as the QA
  tasks drop them;
* the **question** the judges see (the NLI and LLM judges condition on it) is the ``question_field`` column named
  in the metadata, else the prompt text;
* the task's ``filter_list`` (e.g. a regex that extracts a final answer) is replaced by the judges, and the
  answer is the greedy generation's first line (:func:`semcal_eval.qa.answers.clean_answer`), so a task whose
  answer needs its own extraction is scored on what the first line says (logged as a warning); its
  ``metric_list`` (``exact_match``, ...) is replaced by semcal's confidence metrics, which read one record per
  document.
"""

from __future__ import annotations

import logging

from semcal_eval.core import metric_table as T
from semcal_eval.harness.aggregations import metric_list
from semcal_eval.qa.answers import EmptyGoldError, usable_golds
from semcal_eval.qa.task import QATask

__all__ = ["StockSemAgreeTask", "golds_of"]

log = logging.getLogger(__name__)


def golds_of(target, choices=None) -> list[str]:
    """The usable answers of a ``doc_to_target`` value: the aliases of a list, the choice text of an index when the
    task has ``doc_to_choice``, else the value as text; each stripped, then kept by the one gold reader
    (:func:`semcal_eval.qa.answers.usable_golds`: an alias whose SQuAD normalisation holds no letter or digit is
    dropped). [] means the document has no gold: the task drops it and counts it.

    >>> golds_of(["Paris", "", "paris, France"])
    ['Paris', 'paris, France']
    >>> golds_of(1, ["no", "yes"]), golds_of(["The", "a"])
    (['yes'], [])
    """
    if isinstance(target, (list, tuple)):
        values = list(target)
    elif isinstance(target, int) and not isinstance(target, bool) and choices and 0 <= target < len(choices):
        values = [choices[target]]
    else:
        values = [target]
    # doc_to_target text carries lm-eval's target delimiter (" Paris"): stripped before the reader
    return usable_golds([str(v).strip() for v in values if v is not None])


class StockSemAgreeTask(QATask):
    """QATask over a stock ``generate_until`` YAML (module docstring)."""

    def __init__(self, config: dict | None = None, **kwargs):
        config = dict(config or {})
        name = config.get("task", "?")
        if config.get("output_type", "generate_until") != "generate_until":
            raise ValueError(f"{name}: StockSemAgreeTask wraps a generate_until task, this one is "
                             f"{config.get('output_type')}; for multiple_choice use `semcal-eval calibrate` or "
                             "semcal_eval.semsoft.stock.StockSemSoftTask")
        if config.get("filter_list"):
            log.warning("%s: the task's filter_list is replaced by semcal's judges; the answer is the first line "
                        "of the greedy generation", name)
            config.pop("filter_list")
        config["metric_list"] = metric_list(T.lm_eval_metric_names(T.CONFIDENCE, ()))
        metadata = dict(config.get("metadata") or {})
        self._question_field = metadata.pop("question_field", None)
        config["metadata"] = metadata
        # before lm-eval builds the task: its first document check already reads the added fields
        self._user_process_docs = config.get("process_docs")
        self._processed: dict[int, object] = {}
        config["process_docs"] = self._with_qa_fields
        super().__init__(config=config, **kwargs)

    def _with_qa_fields(self, dataset):
        """The task's documents (after its own ``process_docs``) with ``qa_question`` and ``qa_golds`` added, the
        fields the judges read; documents without a gold are dropped with a warning. Built once per split."""
        key = id(dataset)
        if key not in self._processed:
            from datasets import Dataset

            docs = self._user_process_docs(dataset) if self._user_process_docs else dataset
            if not hasattr(self, "features") and hasattr(docs, "features"):
                # doc_to_target reads a column name against the columns, which lm-eval sets only after its first
                # look at the documents (the one that calls this)
                self.features = list(docs.features)
            rows, dropped = [], 0
            for doc in docs:
                golds = golds_of(self.doc_to_target(doc),
                                 self.doc_to_choice(doc) if self.config.doc_to_choice is not None else None)
                if not golds:
                    dropped += 1
                    continue
                q = doc[self._question_field] if self._question_field else self.doc_to_text(doc)
                rows.append({**doc, "qa_question": str(q).strip(), "qa_golds": golds})
            if dropped:
                log.warning("%s: %d of %d documents have no gold answer (doc_to_target) and are dropped",
                            self.config.task, dropped, dropped + len(rows))
            if not rows:
                raise EmptyGoldError(f"{self.config.task}: no document has a gold answer (doc_to_target)")
            self._processed[key] = Dataset.from_list(rows)
        return self._processed[key]
