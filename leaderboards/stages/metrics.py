"""Stage 5, **metrics**: each reported ``metric,filter`` equals the task's registered aggregation over the
canonical records (from the task YAML, never from the submitted ``configs``), within
``|reported - recomputed| <= ATOL + RTOL * |recomputed|`` (both NaN counts as equal); text parameters
(``tuned_embedding``) must recompute to the very same text. A metric the task declares but the results do
not report is refused too."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

from semcal_eval.core import metric_table as T

from ..errors import SubmissionError
from ..registry import TaskSpec

#: Tolerance for reported vs recomputed aggregates. The recomputation runs the same aggregation
#: on the same logged items, so only float formatting/summation order can differ.
ATOL = 1e-9
RTOL = 1e-6


def same(a: float, b: float) -> bool:
    """``a`` (reported) equals ``b`` (recomputed) within ATOL + RTOL*|b|; NaN only equals NaN, inf only itself."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= ATOL + RTOL * abs(b)


def aggregation(spec: TaskSpec, metric: str):
    """The aggregation the task's YAML declares for ``metric``, from lm-eval's registry (semcal's registered)."""
    from lm_eval.api import registry

    import semcal_eval.harness.aggregations  # noqa: F401 - registers the semcal aggregations with lm-eval

    name = spec.metrics.get(metric)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn = registry.get_aggregation(name) if name else registry.get_metric_aggregation(metric)
    if fn is None:
        raise SubmissionError(
            f"task {spec.name}: no registered aggregation {name or metric!r} for metric {metric} "
            f"(declared in {spec.yaml_path}); is semcal_eval.harness.aggregations up to date?"
        )
    return fn


def check_metrics(records: list[dict], f: str, spec: TaskSpec, numbers: dict[str, float], texts: dict[str, str],
                  rp: str, sp: Path) -> None:
    """Stage 5 for one filter: every metric lm-eval reports for these records is in the results, and each
    reported value (``numbers``, ``texts``: metric -> value) recomputes from ``records`` (in doc_id order)."""
    task = spec.name
    # what lm-eval reports for this row: the declared metrics less the parameters it did not fit
    missing = sorted(set(T.reported_names(spec.metrics, records[0])) - {*numbers, *texts} - set(T.STDERR_METRICS))
    if missing:
        raise SubmissionError(
            f"{rp}: {task} filter {f}: metric(s) {', '.join(missing)} declared by the task but not "
            "reported in results; submit lm-eval's unedited output"
        )
    for metric, rep_text in sorted(texts.items()):
        got = aggregation(spec, metric)(records)
        if got != rep_text:
            raise SubmissionError(f"{rp}: {task} metric {metric},{f} is reported as {rep_text[:40]!r} but "
                                  f"recomputes to {str(got)[:40]!r} from {sp.name}; rejected")
    for metric in sorted(numbers):
        agg = aggregation(spec, metric)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                recomputed = float(agg(records))
        except (ValueError, TypeError, KeyError) as e:
            raise SubmissionError(f"{sp}: {task} filter {f} metric {metric}: records rejected: {e}") from e
        rep_v = numbers[metric]
        if not same(rep_v, recomputed):
            raise SubmissionError(
                f"{rp}: {task} metric {metric},{f} is reported as {rep_v!r} but recomputes to "
                f"{recomputed!r} from {sp.name} (tolerance {ATOL:g} + {RTOL:g}*|value|); rejected"
            )
