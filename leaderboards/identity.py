"""Who a run says its model is, in the two senses the board needs, defined once.

* :func:`model_identity`: the *entry* identity shown on the site (model id, revision, display name), read from a
  run's ``model_args``. A name that claims a catalogue model (``semcal:NAME``, its cache folder, its Hugging Face
  name or a look-alike of it, in its last one or two path components) is shown as that model only when the weights
  behind the claim are the catalogue's (:func:`known_weights`); otherwise it is labelled :data:`UNVERIFIED` (issue
  43: Gemma weights in a folder named ``HuggingFaceTB/SmolLM2-135M-Instruct`` were shown as SmolLM2);
* :func:`weights_key`: the identity of what the spot check actually re-scores, the resolved **weights**: a hash
  of the tensors (names, dtypes, shapes, values) of the files the model loader reads, whatever the folder, a
  symlink, a copy, an extra file (``training_args.bin``) or the safetensors header's bytes (metadata, key order,
  padding). Aliases (``revision=r1``), path spellings and submitter labels all resolve to the same key, so none of
  them gives a fresh spot-check identity (issues 34, 43).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
from pathlib import Path

__all__ = ["parse_model_args", "model_identity", "weights_key", "known_weights", "catalogue_entry", "tensor_key",
           "WEIGHT_SUFFIXES", "UNVERIFIED", "TENSORS_PREFIX", "PREFIXED", "NAME", "CACHE_FOLDER", "LOOKALIKE"]

#: Suffix of a displayed name that claims a catalogue model whose weights the board could not match to it.
UNVERIFIED = " (submitter's weights, unverified name)"
#: Prefix of a weights key computed from tensors (:func:`tensor_key`).
TENSORS_PREFIX = "tensors-sha256:"

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
    """(model id, revision, display name) from a run's ``model_args``.

    A claim of a catalogue model (:func:`catalogue_entry`) whose weights are the catalogue's gives ``semcal:NAME``,
    the revision ``<sha256[:12]>`` of its GGUF and the catalogue's Hugging Face name: ``semcal:NAME`` itself or its
    cache folder's path on another machine (the board loads its own install for both), or a folder on this machine
    whose :func:`weights_key` is the catalogue's :func:`known_weights`. Any other claim of a catalogue model
    (another model's weights in a folder of that name, a hub name, a folder the board cannot read) keeps the claim
    as its id and shows it with :data:`UNVERIFIED`. A name that claims no catalogue model is the ``pretrained``
    value as written (the last two components of a local folder); ``revision=`` is used when given."""
    from semcal_eval.models import PREFIX

    args = parse_model_args(model_args or "")
    claim = str(args.get("pretrained") or "")
    rev = str(args.get("revision") or "")[:80]
    if not claim:
        return "", rev, "(model not named in model_args)"
    derived = claim[:200]
    if claim.startswith(("/", ".", "~")):  # a local folder: its last two components (run/checkpoint)
        derived = "/".join(claim.rstrip("/").split("/")[-2:])[:200] or claim[:200]
    found = catalogue_entry(claim)
    if found is None:
        return claim[:200], rev, derived
    entry, how = found
    here = _weights_of_claim(claim)
    if how == PREFIXED or (here is None and how == CACHE_FOLDER):
        # the board's own names for its install (semcal:NAME, or the cache folder <name>-<sha256[:12]> of another
        # machine): whatever re-scores them loads the board's install (spotcheck.claimed_model)
        verified = True
    else:
        known = known_weights(entry.name)
        verified = known is not None and here == known
    if verified:
        return PREFIX + entry.name, rev or entry.key.rsplit("-", 1)[-1], entry.hf_name
    return claim[:200], rev, derived[:200 - len(UNVERIFIED)] + UNVERIFIED


def _folds(s: str) -> set[str]:
    """A name folded for comparison, case-insensitively and by its confusable skeleton
    (:func:`leaderboards.names.skeleton`), both ways round: upper- and lower-case letters fall in different
    confusable classes ("I" with "l", "i" with neither), so "SmoILM2" and "smollm2" must both meet "SmolLM2"."""
    from .names import skeleton

    return {skeleton(skeleton(s).lower()), skeleton(s.lower())}


#: How :func:`catalogue_entry` found a name's entry, strictest first: ``semcal:NAME``; the catalogue name itself;
#: a path whose last component is the cache folder ``<name>-<sha256[:12]>``; a look-alike of a catalogue name.
PREFIXED, NAME, CACHE_FOLDER, LOOKALIKE = "semcal:NAME", "name", "cache folder", "look-alike"


def catalogue_entry(claim: str):
    """``(catalogue entry, how it was named)`` of a model name, or None when it names no catalogue model: the one
    name → entry rule of the board (the site's identity, the spot check and ``board evaluate`` read it).

    ``how`` is :data:`PREFIXED` for ``semcal:NAME`` (an unknown NAME is None); :data:`NAME` for a catalogue name;
    :data:`CACHE_FOLDER` for a path whose last component is a cache folder ``<name>-<sha256[:12]>``;
    :data:`LOOKALIKE` for a value whose whole text, last two or last path component is (case-insensitively, or as a
    confusable look-alike) a catalogue model's Hugging Face name, the last part of it, its catalogue name or its
    cache key (``HuggingFaceTB/SmolLM2-135M-Instruct``, ``/x/HuggingFaceTB/SmoILM2-135M-Instruct``,
    ``~/models/smollm2-135m``). Only the first three are the catalogue's own names; a look-alike is a claim."""
    from semcal_eval.models import CATALOGUE, PREFIX

    if claim.startswith(PREFIX):
        e = CATALOGUE.get(claim[len(PREFIX):])
        return None if e is None else (e, PREFIXED)
    if claim in CATALOGUE:
        return CATALOGUE[claim], NAME
    parts = [p for p in re.split(r"[/\\]+", claim.strip()) if p not in ("", ".")]
    if not parts:
        return None
    for e in CATALOGUE.values():
        if parts[-1] == e.key:
            return e, CACHE_FOLDER
    spellings = set().union(*(_folds(x) for x in (claim.strip().rstrip("/"), "/".join(parts[-2:]), parts[-1])))
    for e in CATALOGUE.values():
        if spellings & set().union(*(_folds(x) for x in (e.hf_name, e.hf_name.rsplit("/", 1)[-1], e.name, e.key))):
            return e, LOOKALIKE
    return None


def _weights_of_claim(claim: str) -> str | None:
    """The :func:`weights_key` of a claimed model folder on this machine (with a ``config.json``), else None."""
    p = Path(os.path.expanduser(claim))
    try:
        if p.is_dir() and (p / "config.json").is_file():
            return weights_key(str(p.resolve()))
    except OSError:
        return None
    return None


def known_weights(name: str) -> str | None:
    """The catalogue model ``name``'s :func:`tensor_key`, from the board's own install (the float32 folder the
    catalogue converted from its sha256-pinned GGUF), never from a submitter's folder; None when it is not installed
    here (then no folder can be matched to it)."""
    from semcal_eval.models import ModelNotInstalledError, model_path

    try:
        return tensor_key(model_path(name))
    except (ModelNotInstalledError, KeyError, OSError):
        return None


def weights_key(pretrained: str) -> str:
    """The spot-check identity of a model the board can load (``pretrained`` as
    :func:`leaderboards.spotcheck.claimed_model` resolved it): ``semcal:NAME`` is the board's install of it
    (:func:`known_weights`; ``gguf-sha256:<pinned hash>`` while it is not installed), a folder its
    :func:`tensor_key`. Neither the folder's path, its file names, files the loader does not read, nor the
    safetensors header's bytes enter it: the same tensors anywhere are the same weights."""
    from semcal_eval.models import CATALOGUE, PREFIX

    if pretrained.startswith(PREFIX):
        name = pretrained[len(PREFIX):]
        return known_weights(name) or "gguf-sha256:" + CATALOGUE[name].sha256
    return tensor_key(Path(pretrained))


# ----------------------------------------------------------------------------------------- the tensor hash
#: torch dtypes by the safetensors name, so a state dict saved as .bin and as .safetensors hashes the same.
_TORCH_DTYPES = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16", "int64": "I64",
                 "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL",
                 "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2"}
_MAX_HEADER = 100 * 1024 * 1024  # safetensors' own limit on the header's JSON
_CHUNK = 1 << 20
_CACHE: dict[tuple, str] = {}


def _loaded_files(root: Path) -> list[Path]:
    """The weight files a Hugging Face loader reads from ``root``, in its order of preference: the shards named by
    ``model.safetensors.index.json``, ``model.safetensors``, the shards of ``pytorch_model.bin.index.json``,
    ``pytorch_model.bin``; a folder with none of these: every weight file (:data:`WEIGHT_SUFFIXES`, recursively,
    hidden ones left out), else every regular file. Extra files beside the ones the loader reads (a second
    safetensors, ``training_args.bin``, a README) do not change the weights, so they do not enter the key."""
    for index, single in (("model.safetensors.index.json", "model.safetensors"),
                          ("pytorch_model.bin.index.json", "pytorch_model.bin")):
        if (root / index).is_file():
            try:
                wm = json.loads((root / index).read_text(encoding="utf-8")).get("weight_map") or {}
                shards = sorted({str(v) for v in wm.values()})
            except (ValueError, AttributeError, OSError):
                shards = []
            files = [root / s for s in shards if "/" not in s and "\\" not in s and s not in ("", ".", "..")]
            if files and all(f.is_file() for f in files):
                return files
        if (root / single).is_file():
            return [root / single]
    every = sorted(p for p in root.rglob("*") if p.is_file()
                   and not any(s.startswith(".") for s in p.relative_to(root).parts))
    return [p for p in every if p.name.endswith(WEIGHT_SUFFIXES)] or every


def _hash_range(fh, start: int, length: int) -> str:
    h = hashlib.sha256()
    fh.seek(start)
    while length > 0:
        b = fh.read(min(_CHUNK, length))
        if not b:
            raise ValueError("file ends inside a tensor")
        h.update(b)
        length -= len(b)
    return h.hexdigest()


def _safetensors(path: Path) -> list[tuple] | None:
    """(name, dtype, shape, sha256 of its bytes) per tensor of a safetensors file, read from the byte ranges its
    header names (the header's own bytes and ``__metadata__`` are not hashed); None if it is not one."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        raw = fh.read(8)
        if len(raw) < 8:
            return None
        (n,) = struct.unpack("<Q", raw)
        if not 2 <= n <= min(_MAX_HEADER, size - 8):
            return None
        try:
            header = json.loads(fh.read(n))
        except ValueError:
            return None
        if not isinstance(header, dict):
            return None
        base, data_len, out = 8 + n, size - 8 - n, []
        for name, t in header.items():
            if name == "__metadata__":
                continue
            try:
                (b, e), dtype, shape = t["data_offsets"], str(t["dtype"]), [int(x) for x in t["shape"]]
                if not (isinstance(b, int) and isinstance(e, int) and 0 <= b <= e <= data_len):
                    return None
                out.append((str(name), dtype, shape, _hash_range(fh, base + b, e - b)))
            except (TypeError, KeyError, ValueError):
                return None
        return out


def _torch_state_dict(path: Path) -> list[tuple] | None:
    """(name, dtype, shape, sha256) per tensor of a PyTorch state-dict file (``weights_only`` load: no code runs),
    None when the file is not a mapping of names to tensors (``training_args.bin``, an optimizer state)."""
    import torch

    try:
        sd = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # not a weights_only-loadable tensor file: not weights the loader would read
        try:
            sd = torch.load(path, map_location="cpu", weights_only=True)
        except Exception:
            return None
    if not isinstance(sd, dict) or not sd or not all(isinstance(v, torch.Tensor) for v in sd.values()):
        return None
    out = []
    for name, v in sd.items():
        t = v.detach().contiguous()
        dtype = _TORCH_DTYPES.get(str(t.dtype).removeprefix("torch."), str(t.dtype))
        data = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        out.append((str(name), dtype, list(t.shape), hashlib.sha256(data).hexdigest()))
    return out


def tensor_key(folder: str | os.PathLike) -> str:
    """``tensors-sha256:<hex>``: sha256 over the sorted (name, dtype, shape, sha256 of the values) of every tensor
    in the files the loader reads (:func:`_loaded_files`; symlinks resolved), safetensors read through their
    header's byte ranges and PyTorch files through ``torch.load(weights_only=True)``. A file that is neither (a
    GGUF, a damaged file) enters as the sha256 of its bytes. Cached per (path, size, mtime, inode) of its files,
    so one process hashes a folder once (SmolLM2-135M, 538 MB: about 1 s)."""
    root = Path(folder).resolve()
    files = [f.resolve() for f in _loaded_files(root)]
    stamp = tuple((str(f), st.st_size, st.st_mtime_ns, st.st_ino) for f in files for st in [f.stat()])
    if stamp in _CACHE:
        return _CACHE[stamp]
    lines = []
    for f in files:
        tensors = _safetensors(f) if f.suffix == ".safetensors" else None
        if tensors is None and f.suffix in (".bin", ".pt", ".pth", ".ckpt"):
            tensors = _torch_state_dict(f)
            if tensors is None and f.name not in ("pytorch_model.bin",) and not f.name.startswith("pytorch_model-"):
                continue  # a pickle that holds no tensors (training_args.bin): not weights
        if tensors is None:
            with open(f, "rb") as fh:
                lines.append(["bytes", hashlib.file_digest(fh, "sha256").hexdigest()])
            continue
        lines.extend(["tensor", *t] for t in tensors)
    lines.sort()
    key = TENSORS_PREFIX + hashlib.sha256(json.dumps(lines, separators=(",", ":")).encode()).hexdigest()
    _CACHE[stamp] = key
    return key
