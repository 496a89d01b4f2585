"""Plain ``lm_eval`` after ``pip install``: the plugin of docs/PLUGIN.md, tested in fresh interpreters.

Every test starts a new process, because the plugin acts at interpreter start-up (a ``.pth`` file) and when
lm-eval is first imported. Start-up cost is measured, not asserted: benchmarks/bench_plugin_startup.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
ON = {**ENV, "SEMCAL_LM_EVAL_PLUGIN": "1"}
OFF = {**ENV, "SEMCAL_LM_EVAL_PLUGIN": "0"}
# the stock console script of this interpreter's lm-eval (not a shell shim), as users run it
LM_EVAL = str(Path(sys.executable).with_name("lm_eval"))


def run(args, env, **kw) -> subprocess.CompletedProcess:
    # cwd outside the checkout: nothing may come from the current directory, only from the installed package
    return subprocess.run(args, cwd=kw.pop("cwd", "/"), env=env, capture_output=True, text=True,
                          timeout=kw.pop("timeout", 900), **kw)


def py(code: str, env=ON) -> subprocess.CompletedProcess:
    r = run([sys.executable, "-c", code], env)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def test_pth_is_installed_and_the_switch_turns_the_hook_off():
    from importlib.metadata import distribution

    files = {str(f) for f in distribution("semcal-eval").files or ()}
    assert "semcal_eval_lm_eval_plugin.pth" in files, (
        "the plugin's .pth is not installed: reinstall with `pip install -e .`"
    )
    probe = (
        "import sys\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'semcal_eval', 'lm_eval'}))\n"
        "print([type(f).__name__ for f in sys.meta_path])\n"
    )
    mods, finders = py(probe, ON).stdout.splitlines()
    assert mods == "[]", "start-up must not import semcal_eval or lm_eval"
    assert "LmEvalFinder" in finders
    for off in ("0", "false", "OFF", "no"):
        assert "LmEvalFinder" not in py(probe, {**ENV, "SEMCAL_LM_EVAL_PLUGIN": off}).stdout


def test_importing_lm_eval_registers_hf_semsoft_lazily_and_finds_the_tasks():
    code = (
        "import sys\n"
        "from lm_eval.api.registry import model_registry\n"
        "from lm_eval.tasks import TaskManager\n"
        "assert {'hf', 'huggingface', 'dummy'} <= set(model_registry.keys())\n"
        "assert model_registry._objs['hf-semsoft'] == 'semcal_eval.semsoft.backend:SemSoftLM'\n"
        "assert 'torch' not in sys.modules and 'semcal_eval.semsoft.backend' not in sys.modules\n"
        "tm = TaskManager(include_defaults=False)\n"
        "print('goemotions_semsoft' in tm.all_tasks, 'goemotions_base' in tm.all_tasks)\n"
        "from lm_eval.tasks.manager import TaskManager as Stock\n"
        "print(isinstance(tm, Stock))\n"
    )
    assert py(code, ON).stdout.split() == ["True", "True", "True"]


def test_switched_off_lm_eval_knows_neither_backend_nor_tasks():
    code = (
        "from lm_eval.api.registry import model_registry\n"
        "import lm_eval.models\n"
        "from lm_eval.tasks import TaskManager\n"
        "from lm_eval.tasks.manager import TaskManager as Stock\n"
        "print('hf-semsoft' in model_registry, TaskManager is Stock,\n"
        "      'goemotions_semsoft' in TaskManager(include_defaults=False).all_tasks)\n"
    )
    assert py(code, OFF).stdout.split() == ["False", "True", "False"]


@pytest.mark.slow  # a CLI subprocess: indexes lm-eval's own task folder (~40-120 s on 2 cores)
def test_semcal_eval_registering_too_is_idempotent():
    """semcal-eval registers hf-semsoft and passes the task folder itself; with the plugin on nothing doubles."""
    code = (
        "import logging\n"
        "logging.basicConfig(level=logging.WARNING)\n"
        "from semcal_eval.cli import include_paths, register_backends\n"
        "register_backends()\n"
        "from lm_eval.api.registry import get_model\n"
        "from semcal_eval.semsoft.backend import SemSoftLM\n"
        "assert get_model('hf-semsoft') is SemSoftLM and get_model('hf').__name__ == 'HFLM'\n"
        "from lm_eval.tasks import TaskManager\n"
        "tm = TaskManager(include_path=include_paths(None), include_defaults=False)\n"
        "print(tm.include_path == include_paths(None), 'goemotions_semsoft' in tm.all_tasks)\n"
    )
    r = py(code, ON)
    assert r.stdout.split() == ["True", "True"]
    assert "overrides existing task" not in r.stderr


def test_users_include_path_is_kept_and_wins():
    from semcal_eval import TASKS_DIR
    from semcal_eval.lm_eval_plugin import with_task_dirs

    user = str(REPO / "tests" / "fixtures" / "user_tasks")
    assert with_task_dirs(user, [TASKS_DIR.resolve()]) == [str(TASKS_DIR.resolve()), user]
    assert with_task_dirs([str(TASKS_DIR / "goemotions")], [TASKS_DIR.resolve()]) == [str(TASKS_DIR / "goemotions")]
    code = (
        "from lm_eval.tasks import TaskManager\n"
        f"tm = TaskManager(include_path={user!r}, include_defaults=False)\n"
        "print('tiny_user_mc' in tm.all_tasks, 'goemotions_semsoft' in tm.all_tasks)\n"
    )
    assert py(code, ON).stdout.split() == ["True", "True"]


def test_declared_entry_points_name_the_registered_objects():
    """Every lm_eval.* entry point resolves to the object semcal registers under that name (no typo in pyproject)."""
    from importlib.metadata import distribution

    from lm_eval.api.registry import filter_registry, model_registry

    from semcal_eval import TASKS_DIR

    eps = {(e.group, e.name): e for e in distribution("semcal-eval").entry_points if e.group.startswith("lm_eval.")}
    assert {g for g, _ in eps} == {"lm_eval.models", "lm_eval.filters", "lm_eval.tasks"}
    for (group, name), ep in eps.items():
        obj = ep.load()
        if group == "lm_eval.models":
            assert model_registry.get(name) is obj
        elif group == "lm_eval.filters":
            assert filter_registry.get(name) is obj
        else:
            assert Path(obj) == TASKS_DIR


@pytest.mark.slow  # a CLI subprocess: indexes lm-eval's own task folder (~40-120 s on 2 cores)
def test_ls_lists_semcal_tasks_next_to_lm_evals_own():
    r = run([LM_EVAL, "ls", "tasks"], ON)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "goemotions_semsoft" in r.stdout and "civil_comments_full_semsoft" in r.stdout
    assert "hellaswag" in r.stdout


@pytest.mark.slow  # a CLI subprocess: indexes lm-eval's own task folder (~40-120 s on 2 cores)
@pytest.mark.parametrize("cmd", [[LM_EVAL], [sys.executable, "-m", "lm_eval"]], ids=["console-script", "python-m"])
def test_stock_hf_on_a_semsoft_task_stops_before_loading_the_model(cmd):
    # `pretrained=unused` is no model at all: reaching the model load would fail with a different error
    r = run([*cmd, "--model", "hf", "--model_args", "pretrained=unused", "--tasks", "goemotions_semsoft",
             "--limit", "2"], ON)
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    assert "goemotions_semsoft" in r.stderr and "--model hf-semsoft" in r.stderr
    assert "unused" not in r.stderr  # no attempt to load it


def test_semcal_model_name_on_the_command_line_is_resolved_or_reported():
    r = run([LM_EVAL, "--model", "hf", "--model_args", "pretrained=semcal:no-such-model", "--tasks",
             "goemotions_base", "--limit", "2"], ON)
    assert r.returncode == 2 and "no-such-model" in r.stderr, r.stderr[-3000:]


@pytest.mark.slow
def test_stock_lm_eval_runs_hf_semsoft_on_goemotions(data_dir, smollm2_path, tmp_path):
    """The issue's command, through the stock console script: exit 0 and the semsoft rows in lm-eval's table."""
    r = run([LM_EVAL, "--model", "hf-semsoft", "--model_args", "pretrained=semcal:smollm2-135m,dtype=float32",
             "--device", "cpu", "--batch_size", "8", "--tasks", "goemotions_semsoft", "--limit", "40",
             "--metadata", '{"split":"validation"}', "--output_path", str(tmp_path)], ON)
    assert r.returncode == 0, r.stderr[-4000:]
    rows = re.findall(r"^\|[^|]*\|[^|]*\|\s*(\w+)\s*\|\s*\d+\|\s*(\w+)\s*\|", r.stdout, flags=re.M)
    assert ("semsoft", "acc") in rows and ("constrained", "acc") in rows, r.stdout[-3000:]
    assert "goemotions_semsoft" in r.stdout
    (results,) = tmp_path.rglob("results_*.json")
    # semcal:NAME loads the cached folder (offline: the hub is never asked) and the results keep the catalogue name,
    # in the output folder's name too (issue 32 item 8), not the cache path
    assert results.parent.name == "semcal__smollm2-135m"
    assert json.loads(results.read_text())["config"]["model_args"]["pretrained"] == "semcal:smollm2-135m"
    assert str(smollm2_path) not in results.read_text()


# -- fail closed: a plugin that cannot register stops plain lm_eval, with the fixes named -----------------------------
def _broken_plugin_env(tmp_path: Path, **extra) -> dict:
    """An environment whose ``semcal_eval`` is this checkout's, except that the plugin module raises.

    The start-up hook is this checkout's too: ``PYTHONPATH`` comes before site-packages, where the ``.pth`` line
    imports it from.
    """
    pkg = tmp_path / "broken" / "semcal_eval"
    pkg.mkdir(parents=True)
    real = REPO / "semcal_eval"
    (pkg / "__init__.py").write_text(
        "# this checkout's semcal_eval, with lm_eval_plugin taken from this folder first\n"
        f"__path__.append({str(real)!r})\n"
        f"__file__ = {str(real / '__init__.py')!r}\n"
        "exec(compile(open(__file__).read(), __file__, 'exec'))\n"
    )
    (pkg / "lm_eval_plugin.py").write_text(
        "def on_import(module):\n    raise RuntimeError('simulated plugin failure')\n"
    )
    return {**ON, "PYTHONPATH": os.pathsep.join([str(pkg.parent), str(REPO)]), **extra}


def _says_how_to_fix(stderr: str) -> None:
    assert "PluginError" in stderr and "simulated plugin failure" in stderr, stderr[-3000:]
    for fix in ("semcal-eval", "SEMCAL_LM_EVAL_PLUGIN=0", "--include_path"):
        assert fix in stderr, (fix, stderr[-3000:])


def test_a_failing_plugin_stops_lm_eval_and_names_the_fix(tmp_path):
    env = _broken_plugin_env(tmp_path)
    code = ("import _semcal_eval_lm_eval_hook as h\nprint(h.__file__, flush=True)\n"
            "import lm_eval.api.registry\nprint('lm-eval imported without semcal')\n")
    r = run([sys.executable, "-c", code], env)
    assert r.stdout.splitlines()[0] == str(REPO / "_semcal_eval_lm_eval_hook.py"), "not this checkout's hook"
    assert r.returncode != 0 and "without semcal" not in r.stdout, r.stdout
    _says_how_to_fix(r.stderr)


def test_a_failing_plugin_stops_the_lm_eval_command_before_any_model(tmp_path):
    r = run([sys.executable, "-m", "lm_eval", "run", "--model", "hf", "--model_args", "pretrained=unused",
             "--tasks", "goemotions_base", "--limit", "1"], _broken_plugin_env(tmp_path))
    assert r.returncode != 0
    _says_how_to_fix(r.stderr)
    assert "unused" not in r.stderr.split("PluginError")[-1]  # no attempt to load the model


def test_the_named_fixes_work_with_a_failing_plugin(tmp_path):
    # SEMCAL_LM_EVAL_PLUGIN=0: stock lm-eval, no semcal
    off = _broken_plugin_env(tmp_path, SEMCAL_LM_EVAL_PLUGIN="0")
    r = run([sys.executable, "-c", "import lm_eval.api.registry, lm_eval.tasks\nprint('ok')"], off)
    assert r.returncode == 0 and r.stdout.split() == ["ok"], r.stderr[-3000:]
    # semcal-eval registers semcal itself: its own backend check answers, not the plugin's failure
    r = run([sys.executable, "-m", "semcal_eval", "--model", "hf", "--model_args", "pretrained=unused", "--tasks",
             "goemotions_semsoft", "--limit", "2"], _broken_plugin_env(tmp_path / "again"))
    assert r.returncode == 2 and "--model hf-semsoft" in r.stderr, r.stderr[-3000:]
    assert "PluginError" not in r.stderr
