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

import yaml

REFERENCE_FILTERS = ("prior", "majority", "uniform")  # Contract 2: reference predictors are filters


class RegistryError(ValueError):
    """A task YAML could not be read into the registry."""


@dataclass(frozen=True)
class TaskSpec:
    """What the board knows about one semcal task."""

    name: str
    version: str
    yaml_path: Path
    metrics: dict[str, str | None] = field(default_factory=dict)  # metric -> aggregation name (None: metric default)
    filters: tuple[str, ...] = ()  # filter_list names; empty means "not declared in YAML"


class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps ``!function`` tags as plain strings: the board never imports task code."""


_Loader.add_constructor("!function", lambda loader, node: f"!function {loader.construct_scalar(node)}")


def _load(path: Path, depth: int = 0) -> dict:
    if depth > 8:
        raise RegistryError(f"{path}: include chain deeper than 8 levels (include cycle?)")
    try:
        cfg = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as e:
        raise RegistryError(f"{path}: invalid YAML: {e}") from e
    if not isinstance(cfg, dict):
        return {}
    includes = cfg.pop("include", None)
    if includes is None:
        return cfg
    merged: dict = {}
    for inc in includes if isinstance(includes, list) else [includes]:
        inc_path = Path(inc) if Path(inc).is_absolute() else path.parent / inc
        if not inc_path.is_file():
            raise RegistryError(f"{path}: included file {inc} not found at {inc_path}")
        merged.update(_load(inc_path, depth + 1))
    merged.update(cfg)  # the including file overrides what it includes, as in lm-eval
    return merged


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


def load_registry(tasks_dir: str | Path | None = None) -> dict[str, TaskSpec]:
    """Scan ``tasks_dir`` (default ``semcal_eval.TASKS_DIR``) for task YAMLs; return ``{task name: TaskSpec}``.

    Files starting with ``_`` are include-only bases (the ``_<family>.yaml`` convention) and
    group YAMLs (``group:`` without ``task:``) are skipped.
    """
    root = Path(tasks_dir) if tasks_dir is not None else _default_tasks_dir()
    if not root.is_dir():
        raise RegistryError(f"task folder {root} does not exist; set SEMCAL_BOARD_TASKS_DIR or --tasks-dir")
    specs: dict[str, TaskSpec] = {}
    for path in sorted(root.rglob("*.yaml")):
        if path.name.startswith("_"):
            continue
        cfg = _load(path)
        name = cfg.get("task")
        if not isinstance(name, str):
            continue
        version = normalise_version((cfg.get("metadata") or {}).get("version"))
        metrics: dict[str, str | None] = {}
        for m in cfg.get("metric_list") or []:
            if isinstance(m, dict) and isinstance(m.get("metric"), str):
                agg = m.get("aggregation")
                metrics[m["metric"]] = agg if isinstance(agg, str) and not agg.startswith("!function") else None
        filters = tuple(f["name"] for f in cfg.get("filter_list") or [] if isinstance(f, dict) and "name" in f)
        if name in specs:
            raise RegistryError(f"task {name} defined twice: {specs[name].yaml_path} and {path}")
        specs[name] = TaskSpec(name=name, version=version, yaml_path=path, metrics=metrics, filters=filters)
    return specs
