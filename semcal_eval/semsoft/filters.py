"""lm-eval filters that turn one ``semsoft`` response into side-by-side rows (Contract 2).

* ``semsoft_select``: the constrained baseline or P_sem at one τ.
* ``crossfit_temperature``: temperature scaling fitted without a second model pass and without touching the
  document it is applied to — 2-fold cross-fitting over the evaluated documents (documents at even positions
  are scaled with the temperature fitted on the odd ones and vice versa). The fitted temperatures are written
  into each filtered response and reported as the ``temperature`` metric.
* ``reference_predictor``: model-free rows — ``prior`` (training-split class frequencies), ``majority``
  (all mass on the most frequent training class) and ``uniform``.
"""

from __future__ import annotations

import numpy as np
from lm_eval.api.filter import Filter
from lm_eval.api.registry import register_filter

from semcal_eval.core import recalibration
from semcal_eval.core.records import first_gold
from semcal_eval.semsoft.spec import SemSoftResponse


class TaskView:
    """What a filter may ask of its task (gold labels, training labels), without serialising the task."""

    def __init__(self, task):
        self._task = task

    def gold(self, doc):
        return self._task.gold(doc)

    def soft_target(self, doc):
        return self._task.soft_target(doc)

    def train_golds(self):
        return self._task.train_golds()

    def train_soft_targets(self):
        return self._task.train_soft_targets()

    def __repr__(self) -> str:  # shows up in the results' task config
        return "<the task's own gold labels and training split>"


@register_filter("semsoft_select")
class SemSoftSelect(Filter):
    """Pick the baseline or the semsoft distribution at τ from each semsoft response."""

    def __init__(self, source: str = "semsoft", tau: float | None = None, **kwargs):
        if source not in ("baseline", "semsoft"):
            raise ValueError(f"semsoft_select: source={source!r} must be 'baseline' or 'semsoft'")
        self.source, self.tau = source, tau

    def apply(self, resps, docs):
        return [SemSoftResponse.from_dict(r[0]).probs(self.source, self.tau) for r in resps]


def _probs(r):
    return r["probs"] if isinstance(r, dict) else r


@register_filter("crossfit_temperature")
class CrossfitTemperature(Filter):
    """Temperature scaling, 2-fold cross-fitted on the evaluated documents (see module docstring)."""

    def __init__(self, task: TaskView, **kwargs):
        self.task = task

    def apply(self, resps, docs):
        probs = np.asarray([_probs(r) for r in resps], dtype=float)
        labels = np.asarray([first_gold(self.task.gold(d)) for d in docs])
        idx = np.arange(len(docs))
        out: list = [None] * len(docs)
        for fold in (0, 1):
            fit_on, apply_to = idx[idx % 2 != fold], idx[idx % 2 == fold]
            scaled, fit = recalibration.temperature_scale(probs[fit_on], labels[fit_on], probs[apply_to])
            for i, p in zip(apply_to, scaled):
                out[i] = {"probs": p.tolist(), "temperature": float(fit.T), "at_bound": bool(fit.at_bound), "fold": fold}
        return out


@register_filter("reference_predictor")
class ReferencePredictor(Filter):
    """A model-free distribution for every document: ``prior``, ``majority`` or ``uniform``."""

    KINDS = ("prior", "majority", "uniform")

    def __init__(self, kind: str, task: TaskView, **kwargs):
        if kind not in self.KINDS:
            raise ValueError(f"reference_predictor: kind={kind!r} must be one of {self.KINDS}")
        self.kind, self.task = kind, task

    def apply(self, resps, docs):
        n_classes = len(SemSoftResponse.from_dict(resps[0][0]).baseline)
        n = len(docs)
        if self.kind == "uniform":
            return recalibration.uniform_predictor(n_classes, n).tolist()
        soft = self.task.train_soft_targets() if self.task.soft_target(docs[0]) is not None else []
        if soft:
            rate = recalibration.prior_rate(soft)
            p1 = rate if self.kind == "prior" else float(rate >= 0.5)
            return [[1.0 - p1, p1]] * n
        train = [first_gold(g) for g in self.task.train_golds()]
        if not train:
            raise ValueError(
                "reference predictors need the task's training split (training_split in the YAML); "
                "set metadata reference_predictors: false to skip them"
            )
        fn = recalibration.prior_predictor if self.kind == "prior" else recalibration.majority_predictor
        return np.asarray(fn(np.asarray(train), n_classes, n)).tolist()
