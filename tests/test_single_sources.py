"""Facts the YAMLs repeat from the code (lm-eval reads a task's defaults from its YAML) are equal to the code's one
source: the Semantic Softmax defaults (semcal_eval.semsoft.spec.SemSoftParams), the Civil Comments band
(semcal_eval.data.civil_comments.civil_comments_subset) and the rows a semsoft task declares (semsoft/rows.py).
A YAML edited alone — or a default changed in the code alone — fails here, naming both places."""

from __future__ import annotations

import inspect

import pytest

from semcal_eval import TASKS_DIR
from semcal_eval.data.civil_comments import civil_comments_subset
from semcal_eval.harness.task_yaml import iter_task_configs
from semcal_eval.semsoft.spec import SemSoftParams

CONFIGS = list(iter_task_configs(TASKS_DIR))
SEMSOFT = [(p, c) for p, c in CONFIGS if "SemSoftTask" in str(c.get("class", ""))]


def test_there_are_semsoft_tasks_to_check():
    assert len(SEMSOFT) >= 4  # goemotions + civil comments variants


@pytest.mark.parametrize("path,cfg", SEMSOFT, ids=[p.stem for p, _ in SEMSOFT])
def test_yaml_semsoft_defaults_equal_the_code(path, cfg):
    declared = (cfg.get("metadata") or {}).get("semsoft") or {}
    default = SemSoftParams()
    for key, value in declared.items():
        assert getattr(default, key) == value, (
            f"{path}: metadata.semsoft.{key} = {value!r} but SemSoftParams.{key} = {getattr(default, key)!r}; "
            "change the default in semcal_eval/semsoft/spec.py and the YAML together")


def test_yaml_band_equals_the_code():
    default = tuple(inspect.signature(civil_comments_subset).parameters["band"].default)
    bands = [(p, (c.get("metadata") or {}).get("band")) for p, c in CONFIGS if "band" in (c.get("metadata") or {})]
    assert bands, "no task declares the Civil Comments band"
    for path, band in bands:
        assert tuple(band) == default, f"{path}: band {band} but civil_comments_subset's default is {default}"

