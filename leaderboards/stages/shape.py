"""Stage 1, **shape**: the results file has the types lm-eval writes, and names known semcal tasks or stock
``multiple_choice`` tasks (:mod:`leaderboards.stock`, keyed by their config hash).

A list where an object belongs, a string where a number belongs, an unknown task or a task at another version
than its YAML declares is refused here, before any later stage indexes into the file, so no later stage can
crash on a retyped field. Also the parse of one task's reported ``metric,filter`` values (their shape: numbers,
or short text for the text parameters), which the records and metrics stages compare against.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from semcal_eval.core import metric_table as T

from .. import stock
from ..errors import SubmissionError
from ..registry import TaskSpec, normalise_version

#: Largest document count accepted anywhere (n-samples, limits): far above any real split, far below
#: SQLite's 64-bit integers.
MAX_DOCS = 10**9
#: A stock task's name as the board shows it (fullmatch: "$" would let a trailing newline in).
TASK_NAME = re.compile(r"[A-Za-z0-9_.+-]{1,64}")
#: Tasks one run may hold: the board stores and renders every row.
MAX_TASKS = 64


@dataclass
class RunShape:
    """The parts of a results file the later stages read, each of the type lm-eval writes."""

    results_path: Path
    results: dict
    res: dict  # task -> {"metric,filter": value}
    versions: dict
    config: dict
    n_samples: dict
    configs: dict
    tasks: list[str] = field(default_factory=list)  # the run's tasks (groups left out), sorted
    stock: dict[str, str] = field(default_factory=dict)  # stock multiple_choice task -> its config hash


@dataclass
class Reported:
    """One task's reported aggregates, by filter: numbers, and the text parameters (``tuned_embedding``)."""

    numbers: dict[str, dict[str, float]] = field(default_factory=dict)
    texts: dict[str, dict[str, str]] = field(default_factory=dict)

    def every(self) -> dict[str, dict]:
        """filter -> every reported metric of it (numbers and text), the names a samples row may log."""
        return {f: {**self.numbers.get(f, {}), **self.texts.get(f, {})} for f in {*self.numbers, *self.texts}}


def check_no_links(output_dir) -> None:
    """The files ``board submit`` reads (results and samples, and the run folder holding them) must lie in the
    submitted folder itself: a symbolic link anywhere between the folder and a file, or a file that resolves
    outside it, is refused before anything is read (issue 43: ``samples_*.jsonl -> /elsewhere/...`` made the
    board read a file the submitter had pointed it at). Unreadable layouts are left to the run reader's errors."""
    from semcal_eval.runs import RunError, find_results

    given = Path(output_dir)
    root = given if given.is_dir() else given.parent
    try:
        results = find_results(given)
    except RunError:
        return  # validate_run names the problem
    run_dir = results.parent
    files = [results, *sorted(run_dir.glob("results_*.json")), *sorted(run_dir.glob("samples_*.jsonl"))]
    real_root = root.resolve()
    for f in files:
        cur = f
        while cur != root and cur != cur.parent:
            if cur.is_symlink():
                raise SubmissionError(
                    f"{cur}: a symbolic link (to {str(os.readlink(cur))[:120]}), not a regular file or folder of "
                    "the submitted folder; copy the lm-eval output itself into the folder and submit that")
            cur = cur.parent
        if not f.resolve().is_relative_to(real_root):
            raise SubmissionError(f"{f}: resolves outside the submitted folder {root}; submit a folder that holds "
                                  "the lm-eval output itself")


def obj(results: dict, key: str, where: str, *, required: bool = False) -> dict:
    """``results[key]`` as an object (lm-eval always writes one); a list or a string is refused, not crashed on."""
    v = results.get(key)
    if v is None and not required:
        return {}
    if not isinstance(v, dict):
        raise SubmissionError(
            f"{where}: '{key}' must be a JSON object as lm-eval writes it, got {type(v).__name__}; "
            "submit lm-eval's unedited results file"
        )
    return v


def count(v, what: str, where: str) -> int:
    """A document count as lm-eval writes one: an integer in 0..:data:`MAX_DOCS` (not a bool, not a float)."""
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_DOCS:
        raise SubmissionError(f"{where}: {what} must be an integer between 0 and {MAX_DOCS}, got {str(v)[:40]}")
    return v


def number(v, where: str) -> float:
    """A reported value as a float; a string, a bool or an integer past float range is refused."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise SubmissionError(f"{where}: reported value {str(v)[:60]!r} is not a number")
    try:
        return float(v)
    except OverflowError:  # an int beyond float range
        raise SubmissionError(f"{where}: reported value is not a finite number") from None


def group_names(results: dict, where: str) -> set[str]:
    """Names of the run's groups (``group_subtasks`` entries with subtasks): not tasks, not checked as such."""
    gs = obj(results, "group_subtasks", where)
    for g, subs in gs.items():
        if not isinstance(subs, list) or not all(isinstance(x, str) for x in subs):
            raise SubmissionError(f"{where}: group_subtasks.{str(g)[:40]} must be a list of task names")
    return {g for g, subs in gs.items() if subs}


def check_shape(results: dict, results_path: Path, registry: dict[str, TaskSpec]) -> RunShape:
    """Stage 1: the run's top-level fields have lm-eval's types, and its tasks are known semcal tasks at the
    version their YAML declares (at most :data:`MAX_TASKS`, at least one)."""
    rp = str(results_path)
    res = obj(results, "results", rp, required=True)
    shape = RunShape(results_path=results_path, results=results, res=res, versions=obj(results, "versions", rp),
                     config=obj(results, "config", rp), n_samples=obj(results, "n-samples", rp),
                     configs=obj(results, "configs", rp))
    groups = group_names(results, rp)
    for t, v in res.items():
        if not isinstance(v, dict):
            raise SubmissionError(f"{rp}: results.{str(t)[:40]} must be an object of metric values")
    shape.tasks = sorted(t for t in res if t not in groups)
    if len(shape.tasks) > MAX_TASKS:
        raise SubmissionError(f"{rp}: {len(shape.tasks)} tasks in one run; at most {MAX_TASKS}, submit them in parts")
    if not shape.tasks:
        raise SubmissionError(f"{rp}: the results hold no task")
    for t in shape.tasks:
        if t not in registry:
            shape.stock[t] = stock_task(shape, t, registry)
            continue
        got = normalise_version(version_of(shape, t))
        if got != registry[t].version:
            raise SubmissionError(
                f"{rp}: task {t} has version {got[:20]}, the board knows version {registry[t].version}; "
                "rerun with the current semcal task definitions"
            )
    return shape


def stock_task(shape: RunShape, t: str, registry: dict[str, TaskSpec]) -> str:
    """The config hash of ``t``, a task that is not semcal's: accepted when lm-eval logged it as a
    ``multiple_choice`` task under a plain name (:mod:`leaderboards.stock`); refused otherwise, naming what the
    board accepts."""
    rp = str(shape.results_path)
    cfg = shape.configs.get(t)
    if not isinstance(cfg, dict) or cfg.get("output_type") != stock.OUTPUT_TYPE:
        kind = cfg.get("output_type") if isinstance(cfg, dict) else None
        known = ", ".join(sorted(registry)) or "(none found)"
        raise SubmissionError(
            f"{rp}: task {t[:60]!r} is not a semcal task and not a stock {stock.OUTPUT_TYPE} task (its logged "
            f"output_type is {str(kind)[:30]!r}); the board takes semcal's tasks ({known}) and any lm-eval "
            f"{stock.OUTPUT_TYPE} task with its samples (--log_samples)")
    if not TASK_NAME.fullmatch(t):
        raise SubmissionError(f"{rp}: task name {t[:60]!r} is not a plain name (letters, digits, _ . + -, at most "
                              "64); the board shows it as written")
    return stock.config_hash(cfg, version_of(shape, t))


def version_of(shape: RunShape, t: str):
    """``versions[t]`` as lm-eval writes it: a number, a string or absent (None); any other type is refused."""
    v = shape.versions.get(t)
    if v is not None and not isinstance(v, (str, int, float)):
        raise SubmissionError(f"{shape.results_path}: versions.{t[:60]} must be a number or a string, got "
                              f"{type(v).__name__}")
    return v


def reported_metrics(task_results: dict, task: str, spec: TaskSpec, where: str) -> Reported:
    """Stage 1 for one task: its reported ``metric,filter`` values, by filter. Every metric must be one the
    task declares; ``_stderr`` values are skipped (not recomputed, see docs/LEADERBOARD.md); text parameters
    must be short text, every other value a number."""
    out = Reported()
    for key, val in task_results.items():
        if not isinstance(key, str) or "," not in key:
            continue  # "alias" and other labels
        metric, _, f = key.partition(",")
        if metric.endswith(T.STDERR_SUFFIX):
            continue
        if metric not in spec.metrics:
            raise SubmissionError(f"{where}: {task} reports metric {metric[:40]!r}, which task {task} does not "
                                  "declare")
        if metric in T.TEXT_PARAMETERS:
            if not isinstance(val, str) or len(val) > 200:
                raise SubmissionError(f"{where}: {task} {key[:60]}: reported value must be a short text")
            out.texts.setdefault(f, {})[metric] = val
            out.numbers.setdefault(f, {})
            continue
        out.numbers.setdefault(f, {})[metric] = number(val, f"{where}: {task} {key[:60]}")
    return out
