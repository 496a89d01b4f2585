"""`semcal-eval` is a drop-in for `lm_eval`: real subprocesses, the real SmolLM2, lm-eval's own CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from semcal_eval.cli import include_paths, resolve_model_args

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def run(args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=REPO, env={**ENV, **kw.pop("env", {})}, capture_output=True, text=True,
                          timeout=kw.pop("timeout", 600), **kw)


@pytest.mark.slow  # a CLI subprocess: indexes lm-eval's own task folder (~40-120 s on 2 cores)
def test_registering_first_does_not_hide_lm_evals_backends():
    """Importing semcal's backend before anything else must leave `hf` (and the rest) registered."""
    code = (
        "import semcal_eval.semsoft.backend\n"
        "from lm_eval.api.registry import get_model, model_registry\n"
        "names = set(model_registry.keys())\n"
        "assert {'hf', 'huggingface', 'hf-semsoft', 'dummy'} <= names, sorted(names)\n"
        "from semcal_eval.semsoft.backend import SemSoftLM\n"
        "from lm_eval.models.huggingface import HFLM\n"
        "assert get_model('hf') is HFLM and get_model('hf-semsoft') is SemSoftLM\n"
        "print('ok', len(names))\n"
    )
    r = run([sys.executable, "-c", code])
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("ok")


def test_cli_registration_order_keeps_hf():
    from lm_eval.api.registry import get_model

    from semcal_eval.cli import register_backends

    register_backends()
    assert get_model("hf").__name__ == "HFLM"
    assert get_model("hf-semsoft").__name__ == "SemSoftLM"


def test_include_paths_keep_the_users_own():
    from semcal_eval import TASKS_DIR

    assert include_paths(None) == [str(TASKS_DIR)]
    assert include_paths("/a:/b") == [str(TASKS_DIR), "/a", "/b"]
    assert include_paths(["/c"]) == [str(TASKS_DIR), "/c"]


def test_semcal_model_names_are_checked_and_left_to_the_backend(smollm2_path, monkeypatch):
    """``--model hf`` (lm-eval's default) keeps ``semcal:NAME``: its HFLM is served as CatalogueHFLM, which resolves
    the name where the model loads; unknown names still fail before any model loads."""
    import lm_eval.api.registry as registry

    from semcal_eval.semsoft.backend import CatalogueHFLM

    monkeypatch.setattr(registry, "get_model", registry.get_model)  # restored after the test: the rebinding is per run
    argv = ["--model_args", "pretrained=semcal:smollm2-135m,dtype=float32", "--tasks", "x"]
    assert resolve_model_args(argv) == argv
    assert registry.get_model("hf") is CatalogueHFLM and registry.get_model("hf-semsoft").__name__ == "SemSoftLM"
    assert resolve_model_args(["pretrained=gpt2"]) == ["pretrained=gpt2"]
    with pytest.raises(Exception, match="no-such-model"):
        resolve_model_args(["pretrained=semcal:no-such-model"])


def _acc(out: Path) -> float:
    (results,) = out.rglob("results_*.json")
    return json.loads(results.read_text())["results"]["tiny_user_mc"]["acc,none"]


@pytest.mark.slow
def test_stock_task_through_semcal_eval_equals_plain_lm_eval(tmp_path, smollm2_path):
    """The same stock multiple_choice task from the user's --include_path, through both CLIs: same numbers; lm-eval's
    own ``--model hf`` given a catalogue name loads the cached model, and the output folder and the results name it
    ``semcal:smollm2-135m``, never the cache path."""
    common = ["--model", "hf", "--model_args", "pretrained=semcal:smollm2-135m,dtype=float32", "--device", "cpu",
              "--tasks", "tiny_user_mc", "--include_path", "tests/fixtures/user_tasks", "--batch_size", "4"]
    ours = run([sys.executable, "-m", "semcal_eval", *common, "--output_path", str(tmp_path / "ours")])
    assert ours.returncode == 0, ours.stderr[-3000:]
    plain = run([sys.executable, "-m", "lm_eval", *common, "--output_path", str(tmp_path / "plain")])
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert _acc(tmp_path / "ours") == _acc(tmp_path / "plain")
    assert "tiny_user_mc" in ours.stdout
    for out in ("ours", "plain"):
        (results,) = (tmp_path / out).rglob("results_*.json")
        assert results.parent.name == "semcal__smollm2-135m"  # lm-eval's sanitised "semcal:smollm2-135m"
        data = json.loads(results.read_text())
        assert data["config"]["model"] == "hf" and data["model_name"] == "semcal:smollm2-135m"
        assert data["config"]["model_args"]["pretrained"] == "semcal:smollm2-135m"
        assert str(smollm2_path) not in results.read_text()


@pytest.mark.slow  # a CLI subprocess: indexes lm-eval's own task folder (~40-120 s on 2 cores)
def test_semsoft_task_on_stock_hf_fails_loudly(tmp_path):
    r = run([sys.executable, "-m", "semcal_eval", "--model", "hf", "--model_args", "pretrained=unused",
             "--tasks", "goemotions_semsoft", "--limit", "2"])
    assert r.returncode == 2
    assert "hf-semsoft" in r.stderr and "goemotions_semsoft" in r.stderr


@pytest.mark.slow  # a CLI subprocess: indexes lm-eval's own task folder (~40-120 s on 2 cores)
def test_lm_eval_subcommands_and_semcal_tasks_are_listed():
    r = run([sys.executable, "-m", "semcal_eval", "ls", "tasks"])
    assert r.returncode == 0, r.stderr[-2000:]
    assert "goemotions_semsoft" in r.stdout and "hellaswag" in r.stdout  # ours and lm-eval's own


def test_verbs_do_not_clash_with_lm_eval_flags():
    r = run([sys.executable, "-m", "semcal_eval", "models", "list"])
    assert r.returncode == 0, r.stderr[-2000:]
    assert "smollm2-135m" in r.stdout
    r = run([sys.executable, "-m", "semcal_eval", "report", "--help"])
    assert r.returncode == 0 and "RESULTS_DIR" in r.stdout.upper()


def test_entry_points_are_declared():
    from importlib.metadata import entry_points

    models = {e.name: e.value for e in entry_points(group="lm_eval.models")}
    assert models.get("hf-semsoft") == "semcal_eval.semsoft.backend:SemSoftLM"
    assert any(e.name == "semcal" for e in entry_points(group="lm_eval.tasks"))


@pytest.mark.slow
def test_a_semcal_run_ends_with_the_compact_summary(tmp_path, smollm2_path, data_dir):
    """The real path: lm-eval's full table, then one small table per task, also written as summary.md."""
    out = tmp_path / "out"
    r = run([sys.executable, "-m", "semcal_eval", "--model", "hf-semsoft", "--model_args",
             "pretrained=semcal:smollm2-135m,dtype=float32", "--device", "cpu", "--batch_size", "8",
             "--tasks", "goemotions_semsoft", "--limit", "8", "--metadata", '{"split": "validation", "recalibrate": false}',
             "--log_samples", "--output_path", str(out)])
    assert r.returncode == 0, r.stderr[-3000:]
    full, _, summary = r.stdout.partition("semcal summary of `results_")
    assert "|constrained|" in full.replace(" ", "") and summary, r.stdout[-3000:]  # lm-eval's table comes first
    (results,) = out.rglob("results_*.json")
    assert (results.parent / "summary.md").read_text().split("\n", 1)[1] in r.stdout
    rows = [line.split("|")[1].strip() for line in summary.splitlines() if line.startswith("| ")][1:]
    assert rows == ["constrained", "semsoft", "semsoft_tuned", "prior", "majority", "uniform"]  # no _ts rows under 40 docs
    assert "* semsoft_tuned (" in summary and "validation documents not evaluated" in summary
    # the summary's numbers are lm-eval's own aggregates of the same records
    agg = json.loads(results.read_text())["results"]["goemotions_semsoft"]
    line = next(x for x in summary.splitlines() if x.startswith("| semsoft |"))
    assert f"| {agg['brier_mc,semsoft']:.3f} |" in line and f"{agg['ece_uw15,semsoft']:.3f} [" in line


@pytest.mark.slow  # a CLI subprocess: indexes lm-eval's own task folder (~40-120 s on 2 cores)
def test_no_summary_flag_is_semcals_own(tmp_path):
    """`--no_summary` is removed before lm-eval parses (lm-eval would reject it)."""
    r = run([sys.executable, "-m", "semcal_eval", "ls", "tasks", "--no_summary"])
    assert r.returncode == 0, r.stderr[-2000:]


# -- verbs of the applications: the `semcal_eval.verbs` entry points ---------------------------------------------
def test_the_library_does_not_import_the_applications():
    """semcal_eval/ names neither leaderboards nor trainers in an import or an import string."""
    import ast
    import re

    apps = re.compile(r"(leaderboards|trainers)(\.\w+)*")
    found = []
    for f in sorted((REPO / "semcal_eval").rglob("*.py")):
        for n in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            mods = []
            if isinstance(n, ast.Import):
                mods = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom) and n.level == 0:
                mods = [n.module or ""]
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                mods = [n.value.split(":")[0]] if apps.fullmatch(n.value.split(":")[0]) else []
            found += [f"{f.relative_to(REPO)}:{n.lineno}: {m}" for m in mods if m.split(".")[0] in
                      ("leaderboards", "trainers")]
    assert not found, "the library must not import the apps; register a verb in pyproject.toml instead:\n" + \
        "\n".join(found)


def test_pyproject_registers_board_and_train_as_verbs():
    import importlib
    import tomllib

    eps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]["semcal_eval.verbs"]
    assert eps == {"board": "leaderboards.cli:main", "train": "trainers.cli:main"}
    for value in eps.values():
        module, attr = value.split(":")
        assert callable(getattr(importlib.import_module(module), attr))


def test_installed_verbs_are_the_declared_ones():
    from importlib.metadata import distribution

    got = {e.name: e.value for e in distribution("semcal-eval").entry_points if e.group == "semcal_eval.verbs"}
    assert got == {"board": "leaderboards.cli:main", "train": "trainers.cli:main"}, (
        "the installed semcal-eval predates pyproject.toml's semcal_eval.verbs entry points: reinstall with "
        "`pip install -e . --no-deps`"
    )


def _dist_with_verb(tmp_path: Path, verb: str, target: str) -> dict:
    """An installed distribution (a dist-info on PYTHONPATH) offering ``semcal-eval VERB`` and its module."""
    info = tmp_path / "verbapp-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: verbapp\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[semcal_eval.verbs]\n{verb} = {target}\n")
    (tmp_path / "verbapp_cli.py").write_text(
        "def main(argv):\n    print('verbapp got', argv)\n    return 3\n"
    )
    return {"PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path)])}


def test_an_installed_verb_is_dispatched_with_its_arguments(tmp_path):
    r = run([sys.executable, "-m", "semcal_eval", "hello", "a", "--b"],
            env=_dist_with_verb(tmp_path, "hello", "verbapp_cli:main"))
    assert r.returncode == 3 and r.stdout.strip() == "verbapp got ['a', '--b']", (r.stdout, r.stderr[-2000:])


def test_unknown_or_broken_verbs_are_clear_errors(tmp_path):
    r = run([sys.executable, "-m", "semcal_eval", "no-such-verb"])
    assert r.returncode == 2 and "`no-such-verb` is neither a semcal-eval verb" in r.stderr, r.stderr[-2000:]
    assert "semcal_eval.verbs" in r.stderr and "pip install -e ." in r.stderr
    r = run([sys.executable, "-m", "semcal_eval", "hello"], env=_dist_with_verb(tmp_path, "hello", "gone_module:main"))
    assert r.returncode == 2 and "`semcal-eval hello` is unavailable: gone_module:main" in r.stderr, r.stderr[-2000:]
    r = run([sys.executable, "-m", "semcal_eval", "report", "--help"],
            env=_dist_with_verb(tmp_path / "clash", "report", "verbapp_cli:main"))
    assert r.returncode == 2 and "would hide `semcal-eval report`" in r.stderr, r.stderr[-2000:]
