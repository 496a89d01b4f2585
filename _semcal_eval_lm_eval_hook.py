"""Start-up half of semcal's plugin for plain ``lm_eval`` (docs/PLUGIN.md).

``semcal_eval_lm_eval_plugin.pth`` (installed next to this module in site-packages) imports it when the
interpreter starts. It is standard-library only and does two things: read ``SEMCAL_LM_EVAL_PLUGIN`` and, unless
that turns the plugin off, put one finder at the front of ``sys.meta_path``. The finder finds nothing itself.
When one of the lm-eval modules in :data:`WATCHED` is imported, it lets the other finders locate it and wraps the
loader they return, so that :func:`semcal_eval.lm_eval_plugin.on_import` runs right after the module's own code.
Nothing of semcal or lm-eval is imported until lm-eval is.

It fails closed: if the plugin raises, the import of the lm-eval module raises :class:`PluginError`, whose
message names the fixes (:func:`failure_message`), rather than letting lm-eval run without semcal's checks.

This file lives at the top level (not inside ``semcal_eval``) on purpose: importing ``semcal_eval.X`` runs
``semcal_eval/__init__.py`` (pathlib and friends), which every Python start-up would then pay.
"""

import os
import sys

ENV_VAR = "SEMCAL_LM_EVAL_PLUGIN"
OFF = frozenset({"0", "false", "no", "off"})

#: the lm-eval modules the plugin acts on, right after each has been imported
WATCHED = frozenset({"lm_eval.api.registry", "lm_eval.tasks", "lm_eval._cli"})


def enabled(environ=os.environ) -> bool:
    """False when ``SEMCAL_LM_EVAL_PLUGIN`` is ``0`` / ``false`` / ``no`` / ``off`` (any case); on otherwise."""
    return environ.get(ENV_VAR, "1").strip().lower() not in OFF


class LmEvalFinder:
    """A ``sys.meta_path`` finder that only wraps the loaders of the :data:`WATCHED` modules."""

    def find_spec(self, name, path=None, target=None):
        if name not in WATCHED:
            return None
        for finder in sys.meta_path:
            if isinstance(finder, LmEvalFinder) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _NotifyingLoader(spec.loader)
        return spec


class _NotifyingLoader:
    """Delegates to the real loader; after ``exec_module`` hands the module to semcal's plugin."""

    def __init__(self, loader):
        self.loader = loader

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        # The module keeps no trace of the hook: its __loader__ and __spec__.loader are the real loader.
        module.__loader__ = self.loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        try:
            from semcal_eval.lm_eval_plugin import on_import

            on_import(module)
        except Exception as e:  # noqa: BLE001  (any failure: fail closed, never a silent run without semcal)
            raise PluginError(failure_message(module.__name__, e)) from e


class PluginError(RuntimeError):
    """semcal's plugin could not register with lm-eval; raised from the import of the lm-eval module, so the
    ``lm_eval`` process stops instead of running without semcal's backend, tasks and checks.

    A ``RuntimeError``, not an ``ImportError``: code that guards optional imports with ``except ImportError``
    must not swallow it.
    """


def failure_message(module: str, error: BaseException) -> str:
    """What a plain ``lm_eval`` run says when the plugin fails: what happened and the three ways out."""
    return (
        f"semcal's lm-eval plugin failed after importing {module} ({type(error).__name__}: {error}), so lm-eval "
        "would run without semcal's backend, tasks and checks; stopped instead. Either\n"
        "  * run `semcal-eval` with the same arguments (it registers semcal itself, without this plugin), or\n"
        f"  * run lm-eval without semcal: {ENV_VAR}=0 lm_eval ... (add `--include_path <semcal's tasks folder>` "
        "for semcal's stock-scored tasks), or\n"
        "  * reinstall semcal-eval (`pip install -e .` in a checkout), if the cause above is a stale install "
        "(docs/PLUGIN.md)."
    )


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, LmEvalFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, LmEvalFinder())


def uninstall() -> None:
    """Take the finder off ``sys.meta_path``: for a process that registers semcal itself (``semcal-eval``)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, LmEvalFinder)]


if enabled():
    install()
