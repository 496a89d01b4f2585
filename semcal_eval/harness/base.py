"""Pieces every semcal lm-eval task class shares (SemSoftTask, QATask).

A semcal task overrides ``process_results`` to return the one per-document record under every metric name.
ConfigurableTask still looks the metric names up as lm-eval metric functions unless the config's
``process_results`` is a callable (and would fall back to downloading HF ``evaluate`` metrics), so the task
sets :func:`process_results_marker` there: a callable that is never called.
"""

from __future__ import annotations

__all__ = ["process_results_marker", "check_aggregations"]


def process_results_marker(doc, results):  # pragma: no cover - the task's own process_results is what runs
    """Placeholder for ``config["process_results"]``; the semcal task class's method runs instead."""
    raise RuntimeError("a semcal task's process_results method should have run instead of this marker")


def check_aggregations(task) -> None:
    """Every metric of ``task``'s metric_list has an aggregation (else lm-eval fails only after the model pass)."""
    missing = [m for m in task._metric_fn_list if m != "bypass" and m not in task._aggregation_list]
    if missing:
        raise ValueError(
            f"task {task.config.task}: metric(s) {missing} have no aggregation in metric_list; "
            "add `aggregation: semcal_<metric>` (semcal_eval.harness.aggregations.metric_list builds the entries)"
        )
