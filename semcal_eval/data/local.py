"""The local mirror's layout: which file under ``<data_dir>/<name>/`` provides a split, which splits exist, and
the error that names the missing file and the way out.

A split is provided by a file already in the hub schema named ``<split>.jsonl`` / ``<split>.json`` /
``<split>.parquet`` (checked first), else by one of the dataset's raw files for that split (its spec's
``local_files``, in order).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable, NamedTuple

from semcal_eval.data import raw
from semcal_eval.data.source import ENV_VAR, resolve_data_dir
from semcal_eval.data.specs import DatasetSpec, Parser, get_spec

HUB_SCHEMA_SUFFIXES = (".jsonl", ".json", ".parquet")
_SPLIT_NAME = re.compile(r"^\w+$")


class MissingSplitFileError(FileNotFoundError):
    """A requested split has no file under the local data dir."""


class LocalSource(NamedTuple):
    """The file that provides a split, the parser that reads it, and the caveat to log when it is used."""

    path: Path
    parser: Parser
    note: str


def _hub_schema_file(spec: DatasetSpec, folder: Path, split: str) -> Path | None:
    if not _SPLIT_NAME.match(split):
        return None
    raw_names = spec.raw_filenames()
    for suffix in HUB_SCHEMA_SUFFIXES:
        p = folder / f"{split}{suffix}"
        if p.name not in raw_names and p.is_file():
            return p
    return None


def local_source(spec: DatasetSpec, folder: Path, split: str) -> LocalSource | None:
    """The file providing ``split`` under ``folder`` (a hub-schema file first, then the raw files), or None."""
    p = _hub_schema_file(spec, folder, split)
    if p is not None:
        return LocalSource(p, raw.read_hub_schema_file, "")
    for rf in spec.local_files.get(split, ()):
        p = folder / rf.filename
        if p.is_file():
            return LocalSource(p, rf.parser, rf.note)
    return None


def local_splits(name: str, data_dir: str | os.PathLike | None = None) -> list[str]:
    """Splits of ``name`` that have a file under the local data dir (hub-schema or raw)."""
    spec = get_spec(name)
    root = resolve_data_dir(data_dir)
    if root is None:
        raise ValueError(f"local_splits({name!r}) needs a data dir (data_dir= or ${ENV_VAR})")
    folder = root / spec.name
    candidates = set(spec.local_files) | set(spec.hub_splits)
    if folder.is_dir():
        candidates |= {p.stem for p in folder.iterdir() if p.suffix in HUB_SCHEMA_SUFFIXES}
    return sorted(s for s in candidates if folder.is_dir() and local_source(spec, folder, s) is not None)


def _split_hint(spec: DatasetSpec, available: Iterable[str]) -> str:
    avail = sorted(available)
    alt = next((s for s in ("validation", "train") if s in avail), avail[0] if avail else None)
    choose = (
        f"Choose another split, e.g. load({spec.name!r}, split={alt!r}) or on the lm-eval command line "
        f"--metadata '{{\"split\": \"{alt}\"}}'. "
        if alt
        else ""
    )
    return (
        f"{choose}Splits available under this data dir: {', '.join(avail) if avail else 'none'}. "
        f"To read the hub ({spec.hub_path}) instead, unset {ENV_VAR} or pass data_dir='hub'."
    )


def missing_split_error(spec: DatasetSpec, folder: Path, split: str) -> MissingSplitFileError:
    """The error for a split with no file under ``folder``: the file it needs and where that comes from,
    the hub-schema alternative, the splits that are available, and how to read the hub instead."""
    avail = local_splits(spec.name, folder.parent) if folder.parent.is_dir() else []
    raws = spec.local_files.get(split, ())
    schema_files = " / ".join(f"{split}{s}" for s in HUB_SCHEMA_SUFFIXES)
    if raws:
        wanted = " or ".join(str(folder / r.filename) for r in raws)
        origin = "; ".join(f"{r.filename}: {r.origin}" for r in raws)
        msg = (
            f"{spec.name} split {split!r} needs the file {wanted}, which is missing "
            f"(where it comes from: {origin}). Place it there, or a file already in the hub schema "
            f"named {folder / schema_files}. "
        )
    else:
        known = sorted(set(spec.local_files) | set(spec.hub_splits))
        if spec.local_only_note:
            fields = ", ".join(path for path, _ in spec.required)
            msg = f"{spec.local_only_note}: {folder}/{schema_files} (fields {fields}; see docs/DATA.md). "
        elif split not in known:
            msg = f"{spec.name} has no split {split!r} (known splits: {', '.join(known)}). "
        else:
            msg = (
                f"{spec.name} split {split!r} has no known raw file; supply it in the hub schema as "
                f"{folder}/{schema_files}. "
            )
    return MissingSplitFileError(msg + _split_hint(spec, avail))
