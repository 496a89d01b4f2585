"""Read semcal's task YAMLs as data (``include:`` resolved, ``!function`` kept as a string, no code imported).

Used by the CLI's backend check and by the leaderboard's task registry, which must never run task code.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import yaml


class TaskYamlError(ValueError):
    """A task YAML that cannot be read; the message names the file."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps ``!function`` tags as plain strings."""


_Loader.add_constructor("!function", lambda loader, node: f"!function {loader.construct_scalar(node)}")


def load_task_yaml(path: str | Path, depth: int = 0) -> dict:
    """One task config with its ``include:`` chain merged (the including file wins, as in lm-eval)."""
    path = Path(path)
    if depth > 8:
        raise TaskYamlError(f"{path}: include chain deeper than 8 levels (include cycle?)")
    try:
        cfg = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as e:
        raise TaskYamlError(f"{path}: invalid YAML: {e}") from e
    if not isinstance(cfg, dict):
        return {}
    includes = cfg.pop("include", None)
    if includes is None:
        return cfg
    merged: dict = {}
    for inc in includes if isinstance(includes, list) else [includes]:
        inc_path = Path(inc) if Path(inc).is_absolute() else path.parent / inc
        if not inc_path.is_file():
            raise TaskYamlError(f"{path}: included file {inc} not found at {inc_path}")
        merged.update(load_task_yaml(inc_path, depth + 1))
    merged.update(cfg)
    return merged


def iter_task_configs(root: str | Path) -> Iterator[tuple[Path, dict]]:
    """(path, merged config) of every task YAML under ``root``; ``_*.yaml`` bases and groups are skipped."""
    for path in sorted(Path(root).rglob("*.yaml")):
        if path.name.startswith("_"):
            continue
        cfg = load_task_yaml(path)
        if isinstance(cfg.get("task"), str):
            yield path, cfg
