"""Registry of known semcal tasks, read from the packaged task YAMLs.

A submission is only accepted for a task that ships with semcal, at the version the YAML declares
(``metadata.version``, which lm-eval copies into ``results["versions"]``). The aggregation used to
recompute each metric comes from the same YAML, never from the submitted ``configs`` block: a
submitter could otherwise rename an aggregation to something more flattering.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from semcal_eval import run_rows
from semcal_eval.harness.aggregations import declared_metric_list
from semcal_eval.harness.task_yaml import TaskYamlError, iter_task_configs
from semcal_eval.semsoft.rows import DERIVED, REFERENCES

REFERENCE_FILTERS = REFERENCES  # the rows table's model-free rows (Contract 3: reference predictors are filters)
# the rows table's cross-fitted and tuned rows, and the stock tasks' cross-fitted ones (semcal_eval.run_rows)
DERIVED_FILTERS = frozenset(DERIVED) | frozenset(run_rows.DERIVED)


class RegistryError(TaskYamlError):
    """A task YAML could not be read into the registry."""


@dataclass(frozen=True)
class TaskSpec:
    """What the board knows about one semcal task."""

    name: str
    version: str
    yaml_path: Path
    metrics: dict[str, str | None] = field(default_factory=dict)  # metric -> aggregation name (None: metric default)
    filters: tuple[str, ...] = ()  # filter_list names; empty means "not declared in YAML"


def normalise_version(v) -> str:
    """Render a task version so that YAML ``1`` / ``1.0`` and JSON ``1.0`` / ``"1.0"`` compare equal."""
    if v is None:
        return "None"
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v).strip()
    return repr(f)


def _default_tasks_dir() -> Path:
    env = os.environ.get("SEMCAL_BOARD_TASKS_DIR")
    if env:
        return Path(env)
    import semcal_eval

    return Path(semcal_eval.TASKS_DIR)


def tasks_root(tasks_dir: str | Path | None = None) -> Path:
    """The task folder the board reads: ``tasks_dir``, else ``$SEMCAL_BOARD_TASKS_DIR``, else ``semcal_eval.TASKS_DIR``."""
    return Path(tasks_dir) if tasks_dir is not None else _default_tasks_dir()


def load_registry(tasks_dir: str | Path | None = None) -> dict[str, TaskSpec]:
    """Scan ``tasks_dir`` (default ``semcal_eval.TASKS_DIR``) for task YAMLs; return ``{task name: TaskSpec}``.

    Files starting with ``_`` are include-only bases (the ``_<family>.yaml`` convention) and
    group YAMLs (``group:`` without ``task:``) are skipped.
    """
    root = tasks_root(tasks_dir)
    if not root.is_dir():
        raise RegistryError(f"task folder {root} does not exist; set SEMCAL_BOARD_TASKS_DIR or --tasks-dir")
    specs: dict[str, TaskSpec] = {}
    try:
        configs = list(iter_task_configs(root))
    except TaskYamlError as e:
        raise RegistryError(str(e)) from e
    for path, cfg in configs:
        name = cfg["task"]
        version = normalise_version((cfg.get("metadata") or {}).get("version"))
        metrics: dict[str, str | None] = {}
        for m in declared_metric_list(cfg):  # the YAML's own, else its task class's default (as a run logs it)
            if isinstance(m, dict) and isinstance(m.get("metric"), str):
                agg = m.get("aggregation")
                metrics[m["metric"]] = agg if isinstance(agg, str) and not agg.startswith("!function") else None
        filters = tuple(f["name"] for f in cfg.get("filter_list") or [] if isinstance(f, dict) and "name" in f)
        if name in specs:
            raise RegistryError(f"task {name} defined twice: {specs[name].yaml_path} and {path}")
        specs[name] = TaskSpec(name=name, version=version, yaml_path=path, metrics=metrics, filters=filters)
    return specs
