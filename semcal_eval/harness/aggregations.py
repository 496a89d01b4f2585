"""lm-eval glue: the metric table (:mod:`semcal_eval.core.metric_table`) registered as lm-eval aggregations.

Every semcal task's ``process_results`` returns the one per-document record
(:mod:`semcal_eval.core.records`) under each metric name; lm-eval hands the records of one (metric, filter) to
the aggregation the task's ``metric_list`` names. The aggregation of metric ``X`` is registered as
``semcal_X`` (one rule for every metric, so nothing clashes with lm-eval's own ``f1``, ``brier_score``,
``mean``, ...). A task YAML therefore reads::

    metric_list:
      - metric: ece_uw15
        aggregation: semcal_ece_uw15
        higher_is_better: false

:func:`metric_list` builds those entries. A semcal task class fills its ``metric_list`` in when the YAML names
none (:func:`default_metric_list`, from :data:`semcal_eval.core.metric_table.TASK_METRICS`), the way lm-eval
fills the default of an output type, so the packaged YAMLs do not copy it; a YAML's own list is kept.
The ``_ci_lo`` / ``_ci_hi`` pair and the ``_stderr`` of a metric share one bootstrap per records list (its
replicates cached by content), and every metric of one (task, filter) shares one :class:`RecordArrays`:
lm-eval calls one aggregation per metric name, each with its own list of the same record objects
(:class:`~semcal_eval.harness.base.SameAs`), so the records are converted once per row, not once per metric.

**lm-eval's ± column.** lm-eval fills ``<metric>_stderr,<filter>`` only for its own built-in aggregations
(``stderr_for_metric``); for any other aggregation it writes ``"N/A"``. A semcal task therefore also emits
``<metric>_stderr`` as a metric (aggregated by ``semcal_<metric>_stderr``: the bootstrap standard error of the
same resamples as the CI); lm-eval stores that aggregate under the very key its table and results JSON read
as the stderr, after its own ``"N/A"`` for the metric (:func:`semcal_eval.core.metric_table.reported_names`
keeps that order). tests/test_aggregations.py::test_yaml_task_resolves_every_aggregation_and_evaluates
fails if lm-eval stops reading it so.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any

import numpy as np

# lm-eval's get_aggregation() only imports its built-in aggregations when the registry is empty;
# import them first so registering ours never hides theirs.
import lm_eval.api.metrics  # noqa: F401
from lm_eval.api.registry import aggregation_registry

from ..core import metric_table as T
from ..core import metrics as M
from ..core.records import RecordArrays, to_arrays
from .base import unwrap

__all__ = ["AGG_PREFIX", "AGGREGATIONS", "aggregate", "metric_list", "default_metric_list", "config_layout",
           "declared_metric_list", "shared_arrays"]

AGG_PREFIX = "semcal_"

#: metric name -> registered aggregation name
AGGREGATIONS: dict[str, str] = {name: AGG_PREFIX + name for name in T.HIGHER_IS_BETTER}

_rep_cache: OrderedDict[tuple, np.ndarray] = OrderedDict()
#: (view, n, id of first and last record) -> (the records, their arrays); a hit is confirmed object by object
#: against the kept list, whose strong references keep those ids from being reused while cached.
_arrays_cache: OrderedDict[tuple, tuple[list, RecordArrays]] = OrderedDict()
_CACHE_ROWS = 16


def shared_arrays(records: Sequence[dict], view: tuple[str, str] = ("conf", "correct")) -> RecordArrays:
    """``to_arrays(records, view)``, converted once for every list of the very same record objects."""
    if not records:
        return to_arrays(records, view=view)
    key = (view, len(records), id(records[0]), id(records[-1]))
    hit = _arrays_cache.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], records)):
        _arrays_cache.move_to_end(key)
        return hit[1]
    arrays = to_arrays(records, view=view)
    for f in fields(arrays):
        x = getattr(arrays, f.name)
        if isinstance(x, np.ndarray):
            x.flags.writeable = False  # shared by every metric of the row: a metric must not write into it
    _arrays_cache[key] = (list(records), arrays)
    while len(_arrays_cache) > _CACHE_ROWS:
        _arrays_cache.popitem(last=False)
    return arrays


def _replicates(name: str, a) -> np.ndarray:
    h = hashlib.sha1()
    for x in (a.conf, a.correct, a.probs, a.gold, a.t):
        if x is not None:
            h.update(np.ascontiguousarray(x).tobytes())
            h.update(str(x.shape).encode())
    key = (name, h.hexdigest(), T.CI_N_BOOT, T.CI_SEED)
    if key not in _rep_cache:
        _rep_cache[key] = T.replicates(name, a)
        while len(_rep_cache) > 64:
            _rep_cache.popitem(last=False)
    return _rep_cache[key]


def aggregate(name: str, records: Sequence[dict]) -> float:
    """Metric ``name`` (a key of :data:`semcal_eval.core.metric_table.HIGHER_IS_BETTER`) of a list of records."""
    records = [unwrap(r) for r in records]
    if name in T.PARAMETERS:
        return T.parameter(name, records)
    base = T.base_metric(name)
    if base != name and base in T.CI_METRICS:
        reps = _replicates(base, T.arrays_for(base, records, shared_arrays))
        if name.endswith(T.STDERR_SUFFIX):
            return M.replicate_stderr(reps)
        lo, hi = M.percentile_interval(reps)
        return lo if name.endswith("_lo") else hi
    return T.compute(name, T.arrays_for(name, records, shared_arrays))


def metric_list(names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """lm-eval ``metric_list`` entries ({metric, aggregation, higher_is_better}) for ``names``
    (default: every metric).

    >>> metric_list(["ece_uw15"])
    [{'metric': 'ece_uw15', 'aggregation': 'semcal_ece_uw15', 'higher_is_better': False}]
    """
    names = list(T.HIGHER_IS_BETTER) if names is None else list(names)
    bad = [n for n in names if n not in T.HIGHER_IS_BETTER]
    if bad:
        raise ValueError(f"unknown semcal metric(s) {bad}")
    return [{"metric": n, "aggregation": AGGREGATIONS[n], "higher_is_better": T.HIGHER_IS_BETTER[n]} for n in names]


def default_metric_list(layout: str) -> list[dict[str, Any]]:
    """The ``metric_list`` entries a semcal task class fills in for records of ``layout`` (a key of
    :data:`semcal_eval.core.metric_table.TASK_METRICS`) when its YAML names none."""
    if layout not in T.TASK_METRICS:
        raise ValueError(f"no default metric_list for {layout!r} (known: {', '.join(T.TASK_METRICS)}); set the "
                         "task's metric_list in its YAML, or add the layout to metric_table.TASK_METRICS")
    return metric_list(T.TASK_METRICS[layout])


def config_layout(config: dict) -> str | None:
    """The record layout of a task config (read as data, ``class`` a ``!function`` text; or built, ``class`` the
    class): what its task class fills :func:`default_metric_list` in for. A ``SemSoftTask`` class gives ``soft``
    when ``metadata.soft_field`` is set, else ``classification``; a ``QATask`` its ``metadata.mode`` (default
    ``agreement``); any other
    config None (a plain lm-eval task: its YAML must name its metric_list). The task classes call it on their
    own config, so the board's registry (which reads the YAMLs as data) declares what a run logs.

    >>> config_layout({"class": "!function utils.QATask", "metadata": {"mode": "rlcr"}})
    'rlcr'
    """
    cls = config.get("class")
    # a built class answers for its bases too (a user's subclass); a YAML names the class by its last dotted part
    names = {c.__name__ for c in cls.__mro__} if isinstance(cls, type) else {str(cls or "").rsplit(".", 1)[-1]}
    metadata = config.get("metadata") if isinstance(config.get("metadata"), dict) else {}
    if any(n.endswith("SemSoftTask") for n in names):
        return "soft" if metadata.get("soft_field") else T.CLASSIFICATION
    if any(n.endswith("QATask") for n in names):
        return str(metadata.get("mode") or "agreement")
    return None


def declared_metric_list(config: dict) -> list[dict[str, Any]]:
    """A task config's metric_list as its task will have it: the config's own, else its class's default
    (:func:`config_layout`), else [] (lm-eval's default for the output type, which semcal does not score)."""
    if config.get("metric_list"):
        return list(config["metric_list"])
    layout = config_layout(config)
    return default_metric_list(layout) if layout is not None else []


def _make(name: str) -> Callable[[Sequence[dict]], float]:
    def agg(records: Sequence[dict]) -> float:
        return aggregate(name, records)

    agg.__name__ = agg.__qualname__ = AGG_PREFIX + name
    agg.__doc__ = f"lm-eval aggregation for the semcal metric {name!r} (records -> semcal_eval.core.metric_table)."
    return agg


def _register(agg_name: str, fn: Callable) -> None:
    current = aggregation_registry.get(agg_name, None) if agg_name in aggregation_registry else None
    if current is None:
        aggregation_registry.register(agg_name)(fn)
        return
    # Re-import (importlib.reload, or this file loaded again under another module name) makes new
    # function objects, which lm-eval's registry would reject as a clash: keep the first one.
    if getattr(current, "__qualname__", None) == fn.__qualname__ and getattr(current, "__module__", "").endswith(
        "aggregations"
    ):
        return
    raise ValueError(
        f"lm-eval aggregation {agg_name!r} is already registered by {getattr(current, '__module__', current)}; "
        "semcal cannot register its own under that name"
    )


for _name, _agg in AGGREGATIONS.items():
    _register(_agg, _make(_name))
