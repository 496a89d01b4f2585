"""Shared fixtures: the real embedded model, the local data mirror, one loaded hf-semsoft backend."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("SEMCAL_DATA_DIR", REPO.parent / "shared" / "data")).resolve()
if DATA_DIR.is_dir():
    # Absolute, so subprocesses started from another working directory find the same mirror.
    os.environ["SEMCAL_DATA_DIR"] = str(DATA_DIR)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

# Two cores: one torch thread per test process is the fastest and keeps timings sane under load.
torch.set_num_threads(int(os.environ.get("SEMCAL_TEST_THREADS", "1")))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA_DIR.is_dir():
        pytest.skip(f"local data mirror {DATA_DIR} not found (set SEMCAL_DATA_DIR)")
    os.environ["SEMCAL_DATA_DIR"] = str(DATA_DIR)
    return DATA_DIR


@pytest.fixture(scope="session")
def smollm2_path() -> str:
    """The embedded default model's cached HF folder (installed by .ci/run / `semcal-eval models install`)."""
    from semcal_eval.models import resolve_pretrained

    return resolve_pretrained("semcal:smollm2-135m")


@pytest.fixture(scope="session")
def semsoft_lm(smollm2_path):
    """One real hf-semsoft backend on SmolLM2-135M, shared by the tests that only read from it."""
    import lm_eval.models  # noqa: F401  (lm-eval's registry first)

    from semcal_eval.semsoft.backend import SemSoftLM

    return SemSoftLM(pretrained=smollm2_path, dtype="float32", device="cpu", batch_size=8)


@pytest.fixture(scope="session")
def learned_judge():
    """The shipped learned judge with its real model (Qwen2.5-Coder-0.5B-Instruct from the catalogue, installed by
    `make test`), shared by every test that grades with it: one model load per process."""
    from semcal_eval.qa.judges import get_judge

    return get_judge("learned")


# -- test tiers ---------------------------------------------------------------------------------------------
#: fixtures that load a real model; a test that needs one (directly or through another fixture) is `slow`
MODEL_FIXTURES = frozenset({"smollm2_path", "semsoft_lm", "installed", "gguf_reference", "learned_judge"})


def pytest_collection_modifyitems(config, items):
    """`slow` = loads a model or runs real training: marked by hand, or implied by a model fixture, so the fast
    tier (`make test-fast`: `-m "not slow or smoke"`) can never pick up a model load by accident. `smoke` marks
    the one end-to-end lm-eval run that the fast tier keeps."""
    for item in items:
        if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
