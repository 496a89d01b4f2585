"""Pieces every semcal lm-eval task class shares (SemSoftTask, QATask).

A semcal task overrides ``process_results`` to return the one per-document record under every metric name.
ConfigurableTask still looks the metric names up as lm-eval metric functions unless the config's
``process_results`` is a callable (and would fall back to downloading HF ``evaluate`` metrics), so the task
sets :func:`process_results_marker` there: a callable that is never called.
"""

from __future__ import annotations

__all__ = ["process_results_marker", "check_aggregations", "SameAs", "metric_values", "unwrap"]


def process_results_marker(doc, results):  # pragma: no cover - the task's own process_results is what runs
    """Placeholder for ``config["process_results"]``; the semcal task class's method runs instead."""
    raise RuntimeError("a semcal task's process_results method should have run instead of this marker")


def check_aggregations(task) -> None:
    """Every metric of ``task``'s metric_list has an aggregation (else lm-eval fails only after the model pass)."""
    from semcal_eval.harness.lm_eval_compat import missing_aggregations

    missing = missing_aggregations(task)
    if missing:
        raise ValueError(
            f"task {task.config.task}: metric(s) {missing} have no aggregation in metric_list; "
            "add `aggregation: semcal_<metric>` (semcal_eval.harness.aggregations.metric_list builds the entries)"
        )


class SameAs:
    """A per-document metric value that is the record already logged under metric ``name``.

    lm-eval logs every metric's per-document value in ``samples_*.jsonl``, and a semcal row reports one record
    under each of its metric names (6 headline metrics, their ``_stderr``, fitted parameters). Aggregations read
    :attr:`record` in memory; lm-eval's samples writer (``json.dumps(default=str)``) logs the object as the
    short string ``"=<name>"``, so a samples row holds one copy of the record, and readers resolve the string
    (:func:`semcal_eval.runs.row_record`). Pickles (data-parallel gathers) as a plain object.
    """

    __slots__ = ("name", "record")

    def __init__(self, name: str, record: dict):
        self.name, self.record = name, record

    def __str__(self) -> str:
        return f"={self.name}"

    __repr__ = __str__

    def __eq__(self, other) -> bool:
        return isinstance(other, SameAs) and (other.name, other.record) == (self.name, self.record)

    __hash__ = None  # a record is a dict: not hashable either


def unwrap(value):
    """The record behind a metric value (:class:`SameAs` or the record itself)."""
    return value.record if isinstance(value, SameAs) else value


def metric_values(names, record: dict) -> dict:
    """process_results' return value: ``record`` under the first of ``names`` and :class:`SameAs` it under
    every other one (one copy of the record in the logs; :func:`semcal_eval.runs.row_record` reads it)."""
    names = list(names)
    if not names:
        return {}
    holder = names[0]
    return {holder: record, **{n: SameAs(holder, record) for n in names[1:]}}
