"""Semantic Softmax on a user's own stock ``multiple_choice`` task, from a three-line YAML::

    include: my_sentiment.yaml          # the user's stock lm-eval task (choices are words or short phrases)
    task: my_sentiment_semsoft
    class: !function semcal_eval.semsoft.stock.StockSemSoftTask

lm-eval resolves ``!function a.b.C`` first as ``a/b.py`` next to the YAML, then as an importable module
(``lm_eval.tasks._yaml_loader._import_func_in_yml``), so a YAML in any folder reaches semcal's class with no
``utils.py`` of its own. Run it with ``--model hf-semsoft`` (through ``semcal-eval`` or plain ``lm_eval``, which
loads semcal's plugin).

:class:`StockSemSoftTask` is :class:`~semcal_eval.semsoft.task.SemSoftTask` with the stock task's settings adapted
before lm-eval reads them:

* a ``metric_list`` of lm-eval's own metrics (``acc`` / ``acc_norm`` with ``mean``) is replaced by semcal's
  headline metrics (:func:`semcal_eval.core.metric_table.lm_eval_metric_names`), since every row is scored
  from its per-document record;
* without a ``training_split`` the reference rows (``prior`` / ``majority`` read the training labels) are
  switched off unless the metadata sets ``reference_predictors``; ``semcal-eval calibrate`` gives cross-fitted
  prior / majority rows for the same documents from the stock run;
* labels that Semantic Softmax cannot compare meaningfully get a warning (never a refusal): letters or numbers
  (``A``/``B``/``C``/``D``, ``1``/``2``) carry no meaning of their own, so their embeddings' similarity says
  nothing about the answers they stand for; multi-word labels are compared through their first (or mean) token
  embedding only (:func:`label_warnings`; the backend logs which labels are several tokens).
"""

from __future__ import annotations

import logging
import re

from semcal_eval.core import metric_table as T
from semcal_eval.harness.aggregations import AGGREGATIONS, metric_list
from semcal_eval.semsoft.task import SemSoftTask

__all__ = ["StockSemSoftTask", "label_warnings"]

log = logging.getLogger(__name__)

_SYMBOL = re.compile(r"^\(?[A-Za-z0-9]\)?[.):]?$")


def label_warnings(labels: list[str]) -> list[str]:
    """What Semantic Softmax's label embeddings mean for ``labels``: one message per kind of problem, [] when
    every label is a word.

    >>> label_warnings(["negative", "positive"])
    []
    >>> [m.split(":")[0] for m in label_warnings(["A", "B", "C", "D"])]
    ['letter or number labels']
    """
    out = []
    symbols = [c for c in labels if _SYMBOL.match(str(c).strip())]
    if symbols:
        out.append(
            f"letter or number labels: {symbols[:6]} name answer options, not meanings; Semantic Softmax moves "
            "probability between labels whose token embeddings are similar, and letters are similar to each other "
            "whatever the answers say, so its rows measure the letters, not the answers (the constrained row is "
            "unaffected). Semantic Softmax is meant for word labels: sentiment, topic, emotion, yes/maybe/no")
    phrases = [c for c in labels if len(str(c).split()) > 1]
    if phrases:
        out.append(
            f"multi-word labels: {phrases[:6]} are compared through one embedding each (label_embedding first: the "
            "first token's; mean: the mean of their tokens'), so labels that share a first word become "
            "indistinguishable under 'first'; prefer single-word labels or set --metadata "
            "'{\"label_embedding\": \"mean\"}'")
    return out


def _is_semcal_metric_list(entries) -> bool:
    return bool(entries) and all(isinstance(m, dict) and m.get("aggregation") == AGGREGATIONS.get(m.get("metric"))
                                 for m in entries)


class StockSemSoftTask(SemSoftTask):
    """SemSoftTask over a stock ``multiple_choice`` YAML (module docstring)."""

    def __init__(self, config: dict | None = None, **kwargs):
        config = dict(config or {})
        name = config.get("task", "?")
        if not _is_semcal_metric_list(config.get("metric_list")):
            config["metric_list"] = metric_list(T.lm_eval_metric_names(T.CLASSIFICATION))
        metadata = dict(config.get("metadata") or {})
        nested = metadata.get("semsoft") or {}
        if not config.get("training_split") and "reference_predictors" not in {**nested, **metadata}:
            log.info("%s: no training_split, so no prior/majority/uniform rows (set metadata "
                     "reference_predictors: true with a training_split to get them)", name)
            metadata["reference_predictors"] = False
        config["metadata"] = metadata
        super().__init__(config=config, **kwargs)
        self._warned = False

    def construct_requests(self, doc, ctx, **kwargs):
        if not self._warned:  # once per task, on the first document's labels
            self._warned = True
            for msg in label_warnings(list(self.doc_to_choice(doc))):
                log.warning("%s: %s", self.config.task, msg)
        return super().construct_requests(doc, ctx, **kwargs)
