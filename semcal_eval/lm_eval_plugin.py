"""semcal's plugin for plain ``lm_eval`` 0.4.13, which has no plugin discovery of its own (docs/PLUGIN.md).

The start-up hook (``_semcal_eval_lm_eval_hook``, imported by a ``.pth`` file) calls :func:`on_import` right
after each of three lm-eval modules has been imported:

* ``lm_eval.api.registry``: every ``lm_eval.models`` entry point of this distribution (``hf-semsoft``) is
  registered through the registry's public ``register(name, target="module:object")`` as a lazy placeholder, after
  lm-eval's own backends. Nothing of the backend (torch, transformers) is imported until a run asks for it, and
  its ``@register_model`` upgrades the placeholder in place, so ``semcal-eval`` registering too is harmless.
* ``lm_eval.tasks``: the folders named by this distribution's ``lm_eval.tasks`` entry points become part of every
  ``TaskManager``'s ``include_path`` (see :func:`plugin_task_manager` for why this is a subclass).
* ``lm_eval._cli``, only in an ``lm_eval`` / ``lm-eval`` / ``python -m lm_eval`` process: ``pretrained=semcal:NAME``
  on the command line is checked and left for the backend to resolve where the model loads (so the output folder
  and the results keep the name; :func:`semcal_eval.cli.resolve_model_args`), and a semsoft task asked of a backend without a ``semsoft`` method stops the
  run before any model is loaded, with the fix in the message — what ``semcal-eval`` does (:mod:`semcal_eval.cli`).

The entry points themselves (pyproject.toml) are the single source of what is registered: the groups are the ones
lm-eval's merged plugin mechanism reads (models, filters: EleutherAI/lm-evaluation-harness#4013, #4014), so the
release that ships it finds them with this plugin switched off (``SEMCAL_LM_EVAL_PLUGIN=0``).
"""

from __future__ import annotations

import functools
import os
import re
import sys
from importlib import metadata
from pathlib import Path

from semcal_eval.harness.lm_eval_compat import CLI_MODULE

__all__ = [
    "DIST",
    "MODELS_GROUP",
    "TASKS_GROUP",
    "is_lm_eval_cli",
    "on_import",
    "plugin_task_manager",
    "prepare_cli",
    "register_models",
    "task_dirs",
    "with_task_dirs",
]

DIST = "semcal-eval"
MODELS_GROUP = "lm_eval.models"
TASKS_GROUP = "lm_eval.tasks"


def on_import(module) -> None:
    """Called by the start-up hook right after ``module`` (one of the watched lm-eval modules) was imported."""
    name = module.__name__
    if name == "lm_eval.api.registry":
        register_models(module.model_registry)
    elif name == "lm_eval.tasks":
        if not getattr(module.TaskManager, "semcal_plugin", False):
            module.TaskManager = plugin_task_manager(module.TaskManager)
    elif name == CLI_MODULE and is_lm_eval_cli():
        prepare_cli(sys.argv)


# -- entry points ---------------------------------------------------------------------------------------------
@functools.cache
def _own_entry_points() -> tuple[metadata.EntryPoint, ...]:
    """This distribution's entry points (read once; empty when semcal-eval is not installed, e.g. a bare checkout)."""
    try:
        return tuple(metadata.distribution(DIST).entry_points)
    except metadata.PackageNotFoundError:
        return ()


def _entry_points(group: str) -> list[metadata.EntryPoint]:
    return [ep for ep in _own_entry_points() if ep.group == group]


def register_models(registry) -> list[str]:
    """Register this distribution's ``lm_eval.models`` entry points as lazy placeholders; returns the new names.

    lm-eval's own backends are registered first: ``get_model`` fills the registry only when it is *empty*, so a
    placeholder registered into an empty registry would leave ``--model hf`` unknown. A name already present (from
    ``@register_model``, or a future lm-eval that reads entry points itself) is left alone.
    """
    import lm_eval.models  # noqa: F401  (lm-eval's own backends first)

    added = []
    for ep in _entry_points(MODELS_GROUP):
        if ep.name not in registry:
            # the "module:object" string, not the EntryPoint: 0.4.13 upgrades a string placeholder to the class
            # its @register_model decorator registers, but treats any other existing entry as a clash
            registry.register(ep.name, target=ep.value)
            added.append(ep.name)
    return added


# -- tasks ----------------------------------------------------------------------------------------------------
def task_dirs() -> list[Path]:
    """The task folders named by this distribution's ``lm_eval.tasks`` entry points.

    An entry point may name a path object (``semcal_eval:TASKS_DIR``) or a package whose folder holds the YAMLs
    (the form lm-eval's open task-plugin PR #4015 resolves).
    """
    dirs = []
    for ep in _entry_points(TASKS_GROUP):
        obj = ep.load()
        path = getattr(obj, "__path__", None)
        folder = Path(next(iter(path))) if path is not None else Path(obj)
        if folder.is_dir():
            dirs.append(folder.resolve())
    return dirs


def _overlap(a: Path, b: Path) -> bool:
    return a == b or a in b.parents or b in a.parents


def with_task_dirs(include_path, dirs: list[Path] | None = None):
    """``include_path`` with the plugin's task folders put first (the caller's own paths still win on a name clash).

    A folder is not added when the caller already includes it, a folder inside it, or one containing it (what
    ``semcal-eval`` and the tests do): lm-eval would index those YAMLs twice and warn about every task.

    >>> with_task_dirs(None, [Path("/pkg/tasks")])
    ['/pkg/tasks']
    >>> with_task_dirs("/mine", [Path("/pkg/tasks")])
    ['/pkg/tasks', '/mine']
    >>> with_task_dirs(["/pkg/tasks/goemotions"], [Path("/pkg/tasks")])
    ['/pkg/tasks/goemotions']
    """
    dirs = task_dirs() if dirs is None else dirs
    if include_path is None:
        user = []
    else:
        user = list(include_path) if isinstance(include_path, (list, tuple)) else [include_path]
    mine = [Path(p).expanduser().resolve() for p in user]
    extra = [str(d) for d in dirs if not any(_overlap(d, u) for u in mine)]
    return [*extra, *user] if extra else include_path


def plugin_task_manager(base: type) -> type:
    """A ``TaskManager`` subclass whose only change is :func:`with_task_dirs` applied to ``include_path``.

    lm-eval 0.4.13 gives a task folder exactly one way in: ``TaskManager(include_path=...)``. Every caller (``lm_eval
    run`` / ``ls`` / ``validate``, ``simple_evaluate``) builds its TaskManager from the public name
    ``lm_eval.tasks.TaskManager`` and passes the user's ``--include_path`` (one string; 0.4.13 does not split it on
    ``:``). So the plugin rebinds that public name to this subclass, which calls the public constructor; no private
    method is replaced or copied, and ``isinstance(tm, lm_eval.tasks.manager.TaskManager)`` still holds. Putting the
    folder on the command line instead could not keep a user's own ``--include_path`` (one string only).
    """
    import inspect

    signature = inspect.signature(base.__init__)

    class TaskManager(base):
        __doc__ = base.__doc__
        semcal_plugin = True

        def __init__(self, *args, **kwargs):
            bound = signature.bind(self, *args, **kwargs)
            bound.arguments["include_path"] = with_task_dirs(bound.arguments.get("include_path"))
            super().__init__(*bound.args[1:], **bound.kwargs)

    TaskManager.__module__ = __name__
    return TaskManager


# -- the lm_eval command line -----------------------------------------------------------------------------------
def is_lm_eval_cli() -> bool:
    """True in a process started as ``lm_eval`` / ``lm-eval`` (console scripts) or ``python -m lm_eval``."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name == "lm_eval.__main__":
        return True
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return re.sub(r"(-script\.pyw?|\.exe)$", "", prog) in ("lm_eval", "lm-eval")


def _parse(argv: list[str]):
    """lm-eval's own parsing of ``argv`` (on a copy, silently); None where lm-eval will print help or an error."""
    import contextlib
    import io

    from semcal_eval.harness.lm_eval_compat import parse_cli

    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return parse_cli(argv)[1]
    except SystemExit:
        return None


def prepare_cli(argv: list[str]) -> None:
    """What ``semcal-eval`` does before handing over to lm-eval, applied to a plain ``lm_eval run`` command line.

    Checks ``pretrained=semcal:NAME`` (and ``tokenizer=``) through :func:`semcal_eval.cli.resolve_model_args`
    (which leaves the name for semcal's backends and lm-eval's ``hf`` to resolve where the model loads, and
    rewrites ``argv`` in place only for a backend that cannot), and exits with status 2 when a semsoft task is
    asked of a backend without a ``semsoft`` method — before lm-eval loads any model.
    """
    args = _parse(argv)
    if args is None or getattr(args, "command", None) != "run":
        return
    from semcal_eval.cli import CLIError, check_semsoft_backend, resolve_model_args

    if any("semcal:" in a for a in argv[1:]):
        try:
            argv[1:] = resolve_model_args(argv[1:])
        except Exception as e:  # noqa: BLE001  (reported, with the fix, by resolve_pretrained's message)
            raise CLIError(str(e)) from e
    model, tasks = args.model, args.tasks
    if getattr(args, "config", None) and (model is None or tasks is None):
        try:
            from lm_eval.config.evaluate_config import EvaluatorConfig

            cfg = EvaluatorConfig.load_yaml_config(args.config)
        except Exception:  # noqa: BLE001  (lm-eval reports a bad --config itself)
            cfg = {}
        model = model or cfg.get("model")
        tasks = tasks or cfg.get("tasks")
    if isinstance(tasks, str):
        tasks = [tasks]
    check_semsoft_backend(model, tasks)
