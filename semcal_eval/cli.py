"""``semcal-eval``: a drop-in for ``lm_eval`` plus semcal's own verbs.

    semcal-eval [lm_eval flags...]            → lm-eval's CLI, with hf-semsoft registered and semcal's tasks found,
                                                then the compact summary (one small table per semcal task)
    semcal-eval models list|install|path ...  → the offline model catalogue
    semcal-eval summary RESULTS_DIR           → that compact summary again, for a saved run (writes summary.md)
    semcal-eval report RESULTS_DIR            → reliability diagrams, histograms, τ sweep, Markdown tables
    semcal-eval calibrate RESULTS_DIR         → calibration rows of every stock multiple_choice task of a run
                                                (also printed after a run that logged samples)
    semcal-eval regrade RESULTS_DIR           → a plain lm-eval QA run (nq_open, triviaqa, any generate_until
                                                task) graded again by semcal's judges, beside exact match
    semcal-eval board submit|render|serve ... → the calibration leaderboard (verb of the leaderboards app)
    semcal-eval train CONFIG [overrides]      → the CSR / RLVR / RLCR trainer (verb of the trainers app)

Applications add verbs through ``semcal_eval.verbs`` entry points (pyproject.toml); the library does not import
them by name.

lm-eval's own sub-commands (``run``, ``ls``, ``validate``) and its legacy flag-only form both work unchanged.
After a run of semcal tasks with ``--output_path DIR --log_samples``, the summary (recomputed from the logged
samples, :mod:`semcal_eval.summary`) is printed after lm-eval's own table and written as ``summary.md`` beside
``results_*.json``; without ``--log_samples`` one line says how to get it. ``--no_summary`` (semcal's only
flag; removed before lm-eval parses) or ``SEMCAL_SUMMARY=0`` switches it off.
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
import time
from pathlib import Path

#: the library's own verbs; applications add theirs through the :data:`VERBS_GROUP` entry points
VERBS = {
    "models": ("semcal_eval.models", "main"),
    "summary": ("semcal_eval.summary", "main"),
    "report": ("semcal_eval.report", "main"),
    "calibrate": ("semcal_eval.calibrate", "main"),
    "regrade": ("semcal_eval.qa.regrade", "main"),
}
#: entry-point group through which installed applications add verbs (``board``, ``train``: pyproject.toml), so
#: the library never names, let alone imports, the applications built on it
VERBS_GROUP = "semcal_eval.verbs"
#: lm-eval's own sub-commands: never semcal verbs
LM_EVAL_COMMANDS = frozenset({"run", "ls", "validate"})

_SEMCAL_NAME = re.compile(r"(?P<key>(?:^|[,\s])(?:pretrained|tokenizer)=)semcal:(?P<name>[A-Za-z0-9_.\-]+)")


class CLIError(SystemExit):
    """Exit with a message (code 2), the way argparse reports usage errors."""

    def __init__(self, msg: str):
        print(f"semcal-eval: error: {msg}", file=sys.stderr)
        super().__init__(2)


def register_backends() -> None:
    """Register semcal's lm-eval model backends *after* lm-eval's own.

    Importing ``lm_eval.models`` first matters: the registry is filled by that import, and registering into a
    registry lm-eval has not populated yet would leave ``--model hf`` unknown.
    """
    import lm_eval.models  # noqa: F401

    import semcal_eval.semsoft.backend  # noqa: F401  (registers hf-semsoft)
    import semcal_eval.semsoft.filters  # noqa: F401  (registers semsoft_select & co.)


def _model_of(argv: list[str]) -> str:
    """The ``--model`` of an lm-eval command line (lm-eval's default, ``hf``, when it has none)."""
    for i, a in enumerate(argv):
        if a == "--model" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--model="):
            return a.split("=", 1)[1]
    return "hf"


def catalogue_backend(model: str) -> str:
    """How lm-eval backend ``model`` reads ``pretrained=semcal:NAME``: ``"self"`` (a
    :class:`~semcal_eval.semsoft.backend.CatalogueHFLM`, as semcal's backends are), ``"hf"`` (lm-eval's own HFLM:
    ``hf``, ``hf-auto``, ``huggingface``; :func:`catalogue_hflm` makes it a CatalogueHFLM) or ``"path"`` (any other
    backend, which gets the cached folder's path; also an unknown name, which lm-eval reports itself)."""
    from lm_eval.api.registry import get_model
    from lm_eval.models.huggingface import HFLM

    from semcal_eval.semsoft.backend import CatalogueHFLM

    try:
        cls = get_model(model)
    except Exception:  # an unknown model: lm-eval reports it itself
        return "path"
    if isinstance(cls, type) and issubclass(cls, CatalogueHFLM):
        return "self"
    return "hf" if cls is HFLM else "path"


def catalogue_hflm() -> None:
    """Let lm-eval's own ``hf`` backend load ``pretrained=semcal:NAME`` where the model loads: the public
    ``lm_eval.api.registry.get_model`` (through which lm-eval's evaluator looks up ``--model``) is rebound, in this
    process, to a wrapper that returns :class:`~semcal_eval.semsoft.backend.CatalogueHFLM` where lm-eval's registry
    holds HFLM itself. HFLM's own code and the registry are untouched (no private name), and the run's records
    still say ``"model": "hf"``; the output folder and ``model_args`` keep the catalogue name (lm-eval takes both
    from the command line). Called only for a command line that names a catalogue model; idempotent."""
    import functools

    import lm_eval.api.registry as registry
    from lm_eval.models.huggingface import HFLM

    from semcal_eval.semsoft.backend import CatalogueHFLM

    if getattr(registry.get_model, "semcal_catalogue", False):
        return
    stock = registry.get_model

    @functools.wraps(stock)
    def get_model(model_name: str):
        cls = stock(model_name)
        return CatalogueHFLM if cls is HFLM else cls

    get_model.semcal_catalogue = True
    registry.get_model = get_model


def resolve_model_args(argv: list[str]) -> list[str]:
    """Check every ``pretrained=semcal:NAME`` (and ``tokenizer=``) of ``argv`` before any model loads (an unknown
    or uninstalled name fails here, with the fix), and return ``argv`` for lm-eval.

    semcal's backends and lm-eval's ``hf`` (through :func:`catalogue_hflm`) resolve the name themselves where the
    model loads, so it stays as written: lm-eval names the output folder after it (``semcal__NAME``) and the
    results record ``semcal:NAME``, never the cache path. Any other backend (``vllm``, ...) cannot read catalogue
    names, so for it the name is rewritten to the cached folder."""
    from semcal_eval.models import resolve_pretrained

    if not any(_SEMCAL_NAME.search(a) for a in argv):
        return argv
    how = catalogue_backend(_model_of(argv))
    if how == "hf":
        catalogue_hflm()

    def sub(m: re.Match) -> str:
        path = resolve_pretrained("semcal:" + m.group("name"))
        return m.group(0) if how != "path" else m.group("key") + path

    return [_SEMCAL_NAME.sub(sub, a) for a in argv]


def include_paths(user: str | list | None) -> list[str]:
    """semcal's packaged task folder first, then the user's own ``--include_path`` (``:``-separated allowed)."""
    from semcal_eval import TASKS_DIR

    paths = [str(TASKS_DIR)]
    for entry in [user] if isinstance(user, str) else (user or []):
        paths += [p for p in str(entry).split(os.pathsep) if p]
    return paths


def check_semsoft_backend(model: str | None, tasks: list[str] | None) -> None:
    """Semsoft tasks need a backend with a ``semsoft`` method; say so before any model is loaded."""
    if not tasks:
        return
    from lm_eval.api.registry import get_model

    from semcal_eval.semsoft.task import semsoft_task_names

    wanted = {t for task in tasks for t in str(task).split(",")}
    semsoft = sorted(wanted & semsoft_task_names())
    if not semsoft:
        return
    name = model or "hf"
    try:
        cls = get_model(name)
    except Exception:
        return  # lm-eval reports unknown models itself
    if not hasattr(cls, "semsoft"):
        raise CLIError(
            f"task(s) {', '.join(semsoft)} need the full next-token distribution, which --model {name} does not "
            "provide (it has no `semsoft` method); run them with --model hf-semsoft, or use the *_base variants "
            "for stock scoring"
        )


def semcal_tasks_requested(tasks: list[str] | None) -> bool:
    """Whether ``--tasks`` names (or matches, lm-eval wildcards included) a semcal task or tag."""
    if not tasks:
        return False
    from semcal_eval import TASKS_DIR
    from semcal_eval.harness.task_yaml import iter_task_configs

    names: set[str] = set()
    for _, cfg in iter_task_configs(TASKS_DIR):
        names.add(cfg["task"])
        tags = cfg.get("tag") or []
        names.update([tags] if isinstance(tags, str) else tags)
    wanted = [t for task in tasks for t in str(task).split(",") if t]
    return any(fnmatch.filter(names, w) for w in wanted)


def results_of_this_run(output_path: str, since: float) -> Path | None:
    """The newest ``results_*.json`` lm-eval wrote under ``output_path`` (it nests one folder per model, or
    writes beside ``results.json`` when given a file) at or after ``since`` (a ``time.time()``)."""
    p = Path(output_path)
    found = p.parent.glob("results_*.json") if p.suffix == ".json" else [*p.glob("results_*.json"),
                                                                          *p.glob("*/results_*.json")]
    fresh = [f for f in found if f.stat().st_mtime >= since - 1]
    return max(fresh, key=lambda f: f.stat().st_mtime, default=None)


def print_summary(args, since: float) -> None:
    """After ``run``: the compact summary of this run's semcal tasks (see the module docstring). A task of the
    user's own folder that uses a semcal task class (``StockSemSoftTask``) is found by its logged records."""
    if getattr(args, "predict_only", False):
        return
    requested = semcal_tasks_requested(getattr(args, "tasks", None))
    output_path = getattr(args, "output_path", None)
    if not (output_path and getattr(args, "log_samples", False)):
        if requested:
            print("semcal: add --output_path DIR --log_samples for the compact calibration summary (one table per "
                  "task, also written as DIR/<model>/summary.md)", flush=True)
        return
    results = results_of_this_run(output_path, since)
    if results is None:
        if requested:
            print(f"semcal-eval: no summary: no results_*.json written under {output_path} by this run",
                  file=sys.stderr)
        return
    from semcal_eval.summary import write_summary

    try:
        text, path = write_summary(results)
    except ValueError as e:  # ReportError / RunError name the file and the fix
        if requested:  # otherwise: a run of stock tasks only, which `calibrate` covers
            print(f"semcal-eval: no summary: {e}", file=sys.stderr)
        return
    print(f"\n{text}\n[semcal] summary written to {path}", flush=True)


def print_calibration(args, since: float) -> None:
    """After ``run``: ``semcal-eval calibrate`` of this run (:mod:`semcal_eval.calibrate`), printed when it has a
    stock ``multiple_choice`` task with logged samples (semcal's own tasks are in the summary)."""
    output_path = getattr(args, "output_path", None)
    if getattr(args, "predict_only", False) or not output_path or not getattr(args, "log_samples", False):
        if not getattr(args, "predict_only", False) and not semcal_tasks_requested(getattr(args, "tasks", None)):
            print("semcal: add --output_path DIR --log_samples for calibration rows of multiple_choice tasks "
                  "(or run `semcal-eval calibrate DIR` on a run that logged samples)", flush=True)
        return
    results = results_of_this_run(output_path, since)
    if results is None:
        return
    from semcal_eval.calibrate import calibrate_run, has_multiple_choice, markdown, save_calibration

    try:
        if not has_multiple_choice(results):
            return
        cal = calibrate_run(results)
    except ValueError as e:  # RunError / CalibrateError name the file and the fix
        print(f"semcal-eval: no calibration: {e}", file=sys.stderr)
        return
    # semcal's own multiple_choice tasks (goemotions_base, ...) are in the summary: nothing to print or write
    if any(t["status"] == "computed" for t in cal["tasks"].values()):
        _, _, path = save_calibration(cal)
        print(f"\n{markdown(cal)}\n[semcal] calibration written to {path}", flush=True)


def run_lm_eval(argv: list[str]) -> int:
    """Hand ``argv`` to lm-eval's own CLI after registering semcal's backends and task folder; then print the
    compact summary of a ``run`` (unless ``--no_summary`` or ``SEMCAL_SUMMARY=0``)."""
    summary = "--no_summary" not in argv and os.environ.get("SEMCAL_SUMMARY", "1") != "0"
    argv = [a for a in argv if a != "--no_summary"]
    # This process registers semcal itself (backends here, task folder in include_paths), so the start-up plugin
    # for plain lm_eval is not needed, and a plugin failure (which stops plain lm_eval) must not stop semcal-eval:
    # its message names `semcal-eval` as a way out.
    uninstall = getattr(sys.modules.get("_semcal_eval_lm_eval_hook"), "uninstall", None)
    if uninstall is not None:  # None: no hook, or an older one (another checkout's) that cannot fail closed
        uninstall()
    register_backends()
    argv = resolve_model_args(argv)
    from lm_eval.utils import setup_logging

    from semcal_eval.harness.lm_eval_compat import parse_cli

    setup_logging()
    parser, args = parse_cli(["semcal-eval", *argv])  # lm-eval's own parsing: every lm_eval flag keeps its meaning
    if hasattr(args, "include_path"):
        args.include_path = include_paths(args.include_path)
    is_run = getattr(args, "command", None) == "run"
    if is_run:
        check_semsoft_backend(getattr(args, "model", None), getattr(args, "tasks", None))
    started = time.time()
    parser.execute(args)
    if is_run and summary:
        print_summary(args, started)
        print_calibration(args, started)
    return 0


def app_verbs() -> dict:
    """``{verb: entry point}`` of the :data:`VERBS_GROUP` entry points of every installed distribution.

    Raises :class:`CLIError` when two distributions offer the same verb with different targets, or one offers a
    verb of the library's own or of lm-eval.
    """
    from importlib.metadata import entry_points

    found: dict = {}
    for ep in entry_points(group=VERBS_GROUP):
        if ep.name in VERBS or ep.name in LM_EVAL_COMMANDS:
            raise CLIError(f"entry point {ep.name} = {ep.value} ({VERBS_GROUP}) would hide `semcal-eval "
                           f"{ep.name}`, which is the library's or lm-eval's own; rename the application's verb")
        if ep.name in found and found[ep.name].value != ep.value:
            raise CLIError(f"two installed packages offer `semcal-eval {ep.name}` ({found[ep.name].value} and "
                           f"{ep.value}, entry-point group {VERBS_GROUP}); uninstall one")
        found.setdefault(ep.name, ep)
    return found


def verb_entry(verb: str):
    """The ``main(argv)`` function of ``verb`` (the library's own or an application's), or None when ``verb``
    is not a verb at all (lm-eval's command line then gets it)."""
    import importlib

    apps = app_verbs()  # read even for the library's own verbs, so that a clashing application is reported
    if verb in VERBS:
        module, fn = VERBS[verb]
        return getattr(importlib.import_module(module), fn)
    ep = apps.get(verb)
    if ep is None:
        return None
    try:
        return ep.load()
    except ImportError as e:
        raise CLIError(f"`semcal-eval {verb}` is unavailable: {ep.value} (entry point of group {VERBS_GROUP}) "
                       f"cannot be imported: {e}") from e


def _unknown_verb(verb: str) -> CLIError:
    verbs = sorted({*VERBS, *app_verbs()})
    return CLIError(
        f"`{verb}` is neither a semcal-eval verb ({', '.join(verbs)}) nor an lm-eval command "
        f"({', '.join(sorted(LM_EVAL_COMMANDS))}). Applications add verbs through the `{VERBS_GROUP}` entry "
        "points of their package; after changing pyproject.toml, reinstall it (`pip install -e .`)"
    )


def _is_semcal_error(err: BaseException) -> bool:
    """Whether ``err`` is one of semcal's own messages to the user: an exception class semcal defines
    (``SemSoftError``, ``RecordError``, ``ModelNotInstalledError``, ...), or a ``ValueError`` / ``FileNotFoundError``
    raised by semcal's code (validation that names the problem and the fix). Anything else is a bug or a
    library's error and keeps its traceback."""
    if any(c.__module__.startswith("semcal_eval.") for c in type(err).__mro__):
        return True
    if not isinstance(err, (ValueError, FileNotFoundError)):
        return False
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = Path(tb.tb_frame.f_code.co_filename).resolve() if tb is not None else None
    ours = (Path(__file__).resolve().parent, Path(__file__).resolve().parent.parent / "tasks")
    return where is not None and any(where.is_relative_to(d) for d in ours)


def main(argv: list[str] | None = None) -> int:
    """``semcal-eval``: a verb (the library's or an installed application's), else lm-eval's command line.

    A semcal error (:func:`_is_semcal_error`) raised anywhere in the run, inside lm-eval's evaluator included,
    ends it with ``semcal-eval: error: <message>`` and exit code 2 instead of a traceback
    (``SEMCAL_TRACEBACK=1`` shows the traceback)."""
    try:
        return _main(argv)
    except Exception as err:
        if not _is_semcal_error(err) or os.environ.get("SEMCAL_TRACEBACK", "0") not in ("", "0"):
            raise
        print(f"semcal-eval: error: {err}", file=sys.stderr)
        return 2


def _main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and not argv[0].startswith("-") and argv[0] not in LM_EVAL_COMMANDS:
        entry = verb_entry(argv[0])
        if entry is None:
            raise _unknown_verb(argv[0])
        return int(entry(argv[1:]) or 0)
    if argv and argv[0] in ("-h", "--help") and len(argv) == 1:
        print(__doc__)
    return run_lm_eval(argv)


if __name__ == "__main__":
    sys.exit(main())
