"""The one place semcal touches lm-eval's internals (issue 21, item 5).

lm-eval 0.4.13 offers no public name for a few things semcal needs. Each of them is wrapped here in one small
function whose docstring says exactly what it relies on, and ``tests/test_lm_eval_compat.py`` exercises each
against the installed lm-eval, failing with the lm-eval name and the function below to update when lm-eval
changes it. ``tests/test_lm_eval_compat.py::test_no_lm_eval_private_name_outside_the_adapter`` scans
``semcal_eval/``, ``leaderboards/`` and ``tasks/`` and fails if any other module uses a private lm-eval name, so
a new dependency on lm-eval's internals has to come through here.

Where lm-eval does offer a public name, the function below uses it (and says so); it lives here anyway so that
callers have one vocabulary for "the task's instances" or "the task's metric names".

The module imports nothing from lm-eval at import time: the plugin (:mod:`semcal_eval.lm_eval_plugin`) reads
:data:`CLI_MODULE` while lm-eval itself is still being imported.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = [
    "CLI_MODULE",
    "doc_hash",
    "encode_pair",
    "lm_eval_cli",
    "metric_names",
    "missing_aggregations",
    "parse_cli",
    "set_task_instances",
    "target_hash",
    "task_instances",
]

#: lm-eval 0.4.13's command-line module (private: ``lm_eval._cli``). The start-up hook
#: (``_semcal_eval_lm_eval_hook.WATCHED``, standard-library only, so it cannot import this module) names it too;
#: a test keeps the two equal.
CLI_MODULE = "lm_eval._cli"


# -- the command line -----------------------------------------------------------------------------------------
def lm_eval_cli():
    """A new ``lm_eval._cli.HarnessCLI``: lm-eval's own parser of ``lm_eval`` command lines.

    Relies on (private): ``lm_eval._cli.HarnessCLI()`` with ``parse_args()`` reading ``sys.argv`` (and inserting
    ``run`` for the legacy flag-only form) and ``execute(args)`` running the parsed command. The public entry
    point, ``lm_eval.__main__.cli_evaluate``, parses and runs in one call, and semcal must act in between
    (resolve ``semcal:`` models, add its task folder, check the backend, print the summary after).
    """
    from lm_eval._cli import HarnessCLI

    return HarnessCLI()


def parse_cli(argv: list[str]):
    """``(cli, args)``: ``argv`` (``argv[0]`` the program name, like ``sys.argv``) parsed by :func:`lm_eval_cli`.

    ``sys.argv`` is swapped for a copy of ``argv`` while lm-eval parses (HarnessCLI reads and edits
    ``sys.argv``) and restored after. Errors and ``--help`` raise ``SystemExit`` as argparse does. Run the
    command with ``cli.execute(args)``.
    """
    saved = sys.argv
    sys.argv = list(argv)
    try:
        cli = lm_eval_cli()
        return cli, cli.parse_args()
    finally:
        sys.argv = saved


# -- a task's instances ----------------------------------------------------------------------------------------
def task_instances(task) -> list:
    """The task's request instances (public: ``Task.instances``, set by ``build_all_requests``)."""
    return task.instances or []


def set_task_instances(task, instances: list) -> None:
    """Replace the task's instance list, which the evaluator reads (``task.instances``) after
    ``build_all_requests`` to collect requests and, after ``apply_filters``, to log and score documents.

    Relies on (private): ``Task._instances``, the attribute behind the read-only ``Task.instances`` property;
    lm-eval 0.4.13 has no setter. Used by ``SemSoftTask`` to add its tuning documents' requests to the model pass
    and to take them out again before lm-eval's filters see the instances.
    """
    task._instances = list(instances)


# -- a task's metrics --------------------------------------------------------------------------------------------
def metric_names(task) -> list[str]:
    """The task's metric names, in ``metric_list`` order (public: the keys of ``Task.aggregation()``, which
    ConfigurableTask fills with one entry per metric)."""
    return list(task.aggregation())


def missing_aggregations(task) -> list[str]:
    """Metrics of the task's ``metric_list`` that name no aggregation, or whose aggregation lm-eval could not
    resolve (public: ``TaskConfig.metric_list`` and ``Task.aggregation()``)."""
    aggs = task.aggregation()
    out = []
    for entry in task.config.metric_list or []:
        name = entry.get("metric")
        if name != "bypass" and (entry.get("aggregation") is None or aggs.get(name) is None):
            out.append(name)
    return out


# -- the model -------------------------------------------------------------------------------------------------
def encode_pair(lm, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """``(context_tokens, continuation_tokens)`` exactly as lm-eval's ``loglikelihood`` tokenises a request.

    Relies on (private): ``TemplateLM._encode_pair(context, continuation)``, which ``TemplateLM.loglikelihood``
    calls for every non-empty context (trailing spaces of the context move to the continuation; causal models
    encode the whole string and split). semcal's semsoft scoring must tokenise labels the same way so that a
    single-token label scores exactly as lm-eval's loglikelihood scores it. ``context`` must be non-empty.
    """
    return lm._encode_pair(context, continuation)


# -- the samples file ------------------------------------------------------------------------------------------
def doc_hash(doc: Any) -> str:
    """lm-eval 0.4.13's ``doc_hash`` of one document, as ``evaluate`` logs it in ``samples_*.jsonl``.

    Public parts: ``lm_eval.utils.hash_string`` and ``lm_eval.utils.handle_non_serializable``. What they are
    applied to is written inline in ``lm_eval.evaluator.evaluate`` (no function of its own): the document dumped
    by ``json.dumps(doc, indent=2, default=handle_non_serializable, ensure_ascii=False)``. A test runs lm-eval's
    evaluator and compares with this function.
    """
    import json

    from lm_eval.utils import handle_non_serializable, hash_string

    return hash_string(json.dumps(doc, indent=2, default=handle_non_serializable, ensure_ascii=False))


def target_hash(target: Any) -> str:
    """lm-eval 0.4.13's ``target_hash``: ``hash_string(str(task.doc_to_target(doc)))``, written inline in
    ``lm_eval.evaluator.evaluate`` like :func:`doc_hash` (and tested the same way)."""
    from lm_eval.utils import hash_string

    return hash_string(str(target))
