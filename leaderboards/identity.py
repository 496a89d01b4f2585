"""Who a run says its model is, in the two senses the board needs, defined once.

* :func:`model_identity`: the *entry* identity shown on the site (model id, revision, display name), read from
  a run's ``model_args``;
* :func:`weights_key`: the identity of what the spot check actually re-scores, the resolved **weights**: the
  catalogue's GGUF sha256 for a catalogue model (``semcal:NAME`` or its cache folder, wherever it lies), or the
  sha256 of a local folder's weight files. Aliases (``revision=r1``, ``revision=main``), path spellings
  (``<folder>/.``, a symlink, a copy) and submitter labels all resolve to the same key, so none of them gives a
  fresh spot-check identity (issue 34).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["parse_model_args", "model_identity", "weights_key", "WEIGHT_SUFFIXES"]

#: Files that hold a local folder's weights (Hugging Face save_pretrained, PyTorch, GGUF, Flax, Keras).
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".msgpack", ".h5")


def parse_model_args(model_args) -> dict:
    """lm-eval's model_args (a dict in results.json, or ``k=v,k=v`` text) as a dict of strings."""
    if isinstance(model_args, dict):
        return {str(k): v for k, v in model_args.items()}
    if isinstance(model_args, str):
        out = {}
        for part in model_args.split(","):
            k, sep, v = part.partition("=")
            if sep:
                out[k.strip()] = v.strip()
        return out
    return {}


def model_identity(model_args: str | dict | None) -> tuple[str, str, str]:
    """(model id, revision, display name) from a run's ``model_args``: the catalogue name for
    ``semcal:NAME`` or a catalogue cache folder ``<name>-<sha256[:12]>`` (revision: that hash), else the
    ``pretrained`` value as written (its last path component for a folder), with ``revision=`` if given."""
    from semcal_eval.models import CATALOGUE, PREFIX

    args = parse_model_args(model_args or "")
    claim = str(args.get("pretrained") or "")
    rev = str(args.get("revision") or "")[:80]
    if not claim:
        return "", rev, "(model not named in model_args)"
    name = claim[len(PREFIX):] if claim.startswith(PREFIX) else None
    base = claim.rstrip("/").rsplit("/", 1)[-1]
    if name is None:
        name = next((e.name for e in CATALOGUE.values() if base == e.key), None)
    if name is not None and name in CATALOGUE:
        entry = CATALOGUE[name]
        return PREFIX + name, rev or entry.key.rsplit("-", 1)[-1], entry.hf_name
    if claim.startswith(("/", ".", "~")):  # a local folder: its last two components (run/checkpoint)
        return claim[:200], rev, "/".join(claim.rstrip("/").split("/")[-2:])[:200] or claim[:200]
    return claim[:200], rev, claim[:200]


def _file_sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def weights_key(pretrained: str) -> str:
    """The spot-check identity of a model the board can load (``pretrained`` as
    :func:`leaderboards.spotcheck.claimed_model` resolved it): ``gguf-sha256:<hex>`` for ``semcal:NAME`` (the
    catalogue's pinned GGUF hash), else ``weights-sha256:<hex>`` = sha256 over the sorted sha256 of the folder's
    weight files (:data:`WEIGHT_SUFFIXES`, found recursively; every regular file when there is none). File
    names and the folder's path do not enter it: the same bytes under another name are the same weights."""
    from semcal_eval.models import CATALOGUE, PREFIX

    if pretrained.startswith(PREFIX):
        return "gguf-sha256:" + CATALOGUE[pretrained[len(PREFIX):]].sha256
    root = Path(pretrained).resolve()
    files = [p for p in root.rglob("*") if p.is_file() and not any(s.startswith(".") for s in p.relative_to(root).parts)]
    weights = [p for p in files if p.name.endswith(WEIGHT_SUFFIXES)] or files
    digests = sorted(_file_sha256(p) for p in weights)
    return "weights-sha256:" + hashlib.sha256("\n".join(digests).encode()).hexdigest()
