"""Stock lm-eval ``multiple_choice`` tasks on the board (issue 33 item 4): their identity and their registry.

A stock task is any lm-eval ``multiple_choice`` task that is not one of semcal's (``arc_easy``, a user's own YAML).
Its name says little: two users' ``sst2`` may differ in prompt, choices or data. The board therefore keys a stock
task on its **config hash** (:func:`config_hash`): sha256 of the canonical JSON of the task config lm-eval logs
(``results["configs"][task]``, ``ConfigurableTask.dump_config()``) and its version, less what describes a run and
not what is scored (:data:`RUN_KEYS`), with data file paths reduced to their file names (the path is a machine's;
the documents themselves are hashed per row). Entries are stored under :func:`entry_task` (``name@hash[:12]``), so
ranking, priors, near-duplicates and the site's tables never mix two configs of one name, and the document-set
hash starts with the config hash.

Trust, by registration (:func:`register` / :func:`registered`, the ``stock_tasks`` table of the board database):

* **unregistered** config hash: accepted at the ``self-reported`` tier. The board still recomputes every row from
  the logged per-choice log-likelihoods (:mod:`leaderboards.stages.stock`), but documents, choices and gold labels
  are the submitter's: there is no dataset to check them against, and nothing to spot-check;
* **registered** (an operator ran ``semcal-eval board register-task NAME --include-path DIR``): the board builds the
  task itself from the registered folder with lm-eval's ``TaskManager``, and checks each row's ``doc_hash``,
  ``target_hash``, choice texts and gold against its own documents, the split's true size and the coverage, as
  for semcal's tasks; ``board submit`` then spot-checks it by re-scoring drawn documents with the named model.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from semcal_eval.core.records import canonical

from .dataset_check import build_lm_eval_task, quiet
from .errors import SubmissionError
from .registry import normalise_version

__all__ = ["OUTPUT_TYPE", "RUN_KEYS", "StockTask", "config_hash", "entry_task", "register", "registered",
           "lookup", "build_task"]

#: The output type the board accepts for a task that is not semcal's.
OUTPUT_TYPE = "multiple_choice"
#: Config keys that name or describe a run, never what is scored: ``metadata`` (the semcal CLI adds the model and
#: dtype; lm-eval users add anything), display aliases and group tags.
RUN_KEYS = frozenset({"metadata", "task_alias", "tag", "group", "group_alias"})

_SCHEMA = """
CREATE TABLE IF NOT EXISTS stock_tasks (
    config_hash TEXT PRIMARY KEY,
    task TEXT NOT NULL,
    include_path TEXT NOT NULL,
    split TEXT NOT NULL,
    n_docs INTEGER NOT NULL,
    registered_at TEXT NOT NULL
);
"""


def _file_names(files):
    """``data_files`` with each path reduced to its file name (a str, a list, or a split -> path(s) mapping)."""
    if isinstance(files, str):
        return os.path.basename(files.replace("\\", "/"))
    if isinstance(files, list):
        return [_file_names(f) for f in files]
    if isinstance(files, dict):
        return {k: _file_names(v) for k, v in files.items()}
    return files


def config_hash(config: dict, version) -> str:
    """sha256 (hex) of ``{"config": config less RUN_KEYS, "version": version}`` as canonical JSON.

    ``num_fewshot`` None counts as 0 (lm-eval's evaluator sets 0 when the YAML leaves it unset) and
    ``dataset_kwargs.data_files`` paths as their file names; everything else (prompt, choices, target, delimiters,
    metrics, dataset id and split) is hashed as lm-eval logged it."""
    if not isinstance(config, dict):
        raise SubmissionError(f"a task config must be a JSON object, got {type(config).__name__}")
    cfg = {k: v for k, v in config.items() if k not in RUN_KEYS}
    if cfg.get("num_fewshot") is None:
        cfg["num_fewshot"] = 0
    kw = cfg.get("dataset_kwargs")
    if isinstance(kw, dict) and "data_files" in kw:
        cfg["dataset_kwargs"] = {**kw, "data_files": _file_names(kw["data_files"])}
    try:
        text = canonical({"config": cfg, "version": normalise_version(version)})
    except (TypeError, ValueError) as e:
        raise SubmissionError(f"task config is not plain JSON ({e}); submit lm-eval's unedited results") from None
    return hashlib.sha256(text).hexdigest()


def entry_task(name: str, chash: str) -> str:
    """The board's task key of a stock task: ``<name>@<config hash[:12]>``."""
    return f"{name}@{chash[:12]}"


@dataclass(frozen=True)
class StockTask:
    """One registered stock task: the folder its YAML is built from (``""``: lm-eval's own task index) and what
    the board found there when it was registered."""

    config_hash: str
    task: str
    include_path: str
    split: str
    n_docs: int
    registered_at: str


def build_task(task: str, include_path: str | os.PathLike | None):
    """``(lm-eval task object, its config hash)`` of ``task`` built by lm-eval's ``TaskManager`` from
    ``include_path`` (None or ``""``: lm-eval's own tasks). SubmissionError naming the task when it cannot be
    built or is not a ``multiple_choice`` task."""
    try:
        obj = build_lm_eval_task(task, include_path or None)
    except Exception as e:  # the task's own loader: one line with the fix
        msg = (str(e).splitlines() or [type(e).__name__])[0]
        raise SubmissionError(f"task {task!r} could not be built from {include_path or 'lm-eval tasks'}: "
                              f"{type(e).__name__}: {msg[:300]}") from None
    cfg = obj.dump_config()
    if cfg.get("output_type") != OUTPUT_TYPE:
        raise SubmissionError(f"task {task!r} has output_type {cfg.get('output_type')!r}; the board registers "
                              f"{OUTPUT_TYPE} tasks only")
    version = (cfg.get("metadata") or {}).get("version")
    return obj, config_hash(cfg, version)


def _table(con: sqlite3.Connection) -> None:
    con.executescript(_SCHEMA)


def register(con: sqlite3.Connection, task: str, include_path: str | os.PathLike | None) -> StockTask:
    """Build ``task`` from ``include_path`` (absolute; None: lm-eval's own tasks), load its evaluation split, and
    record its config hash as registered. Registering the same config again updates the folder it is built from."""
    path = str(Path(include_path).resolve()) if include_path else ""
    if path and not Path(path).is_dir():
        raise SubmissionError(f"--include-path {include_path}: not a folder")
    obj, chash = build_task(task, path)
    with quiet():
        docs = obj.eval_docs
        n = len(docs)
    if n == 0:
        raise SubmissionError(f"task {task!r} has no documents in its evaluation split")
    split = str(getattr(docs, "split", None) or obj.config.test_split or obj.config.validation_split or "default")
    row = StockTask(chash, task, path, split, n, datetime.now(timezone.utc).isoformat(timespec="seconds"))
    _table(con)
    con.execute("INSERT OR REPLACE INTO stock_tasks VALUES (?, ?, ?, ?, ?, ?)",
                (row.config_hash, row.task, row.include_path, row.split, row.n_docs, row.registered_at))
    return row


def registered(con: sqlite3.Connection | None) -> dict[str, StockTask]:
    """config hash -> :class:`StockTask` of every registered stock task ({} without a database)."""
    if con is None:
        return {}
    _table(con)
    return {r[0]: StockTask(*r) for r in con.execute(
        "SELECT config_hash, task, include_path, split, n_docs, registered_at FROM stock_tasks ORDER BY task")}


def lookup(con: sqlite3.Connection, name: str) -> StockTask | None:
    """The registered stock task ``name`` names: its board key ``<task>@<hash[:12]>``, or a task name registered
    under one config only; None when nothing registered has that name. SubmissionError when the name is registered
    under several configs, listing the keys to choose from."""
    regs = registered(con).values()
    hits = [r for r in regs if entry_task(r.task, r.config_hash) == name] or [r for r in regs if r.task == name]
    if len(hits) > 1:
        keys = ", ".join(entry_task(r.task, r.config_hash) for r in hits)
        raise SubmissionError(f"task {name!r} is registered under {len(hits)} configs; name one: {keys}")
    return hits[0] if hits else None
