"""Stock lm-eval ``multiple_choice`` tasks on the board (issue 33 item 4): their identity and their registry.

A stock task is any lm-eval ``multiple_choice`` task that is not one of semcal's (``arc_easy``, a user's own YAML).
Its name says little: two users' ``sst2`` may differ in prompt, choices or data. The board therefore keys a stock
task on its **config hash** (:func:`config_hash`): sha256 of the canonical JSON of the task config lm-eval logs
(``results["configs"][task]``, ``ConfigurableTask.dump_config()``) and its version, less what describes a run and
not what is scored (:data:`RUN_KEYS`), with data file paths reduced to their file names (the path is a machine's;
the documents themselves are hashed per row). Entries are stored under :func:`entry_task` (``name@hash[:12]``), so
ranking, priors, near-duplicates and the site's tables never mix two configs of one name, and the document-set
hash starts with the config hash.

A config lm-eval logs names its data files but not their content, and its ``!function`` entries by their own
source only. A registration is therefore keyed on more than that (issue 43: the same YAML pointed at relabelled
data hashed the same, and its registration silently replaced the original): :func:`register` hashes the content of
every local data file and the whole source file of every function and task class the task uses
(:func:`content_hashes`) into the registration's own hash, ``sha256([config hash, content])``. A registration never
replaces another: the same hash again is a no-op, another one under a name is a new version ``<name>@<hash[:12]>``.
A submitted run is matched by its logged config hash to the registrations of that config, and to the one whose
documents and targets its rows are (:mod:`leaderboards.stages.stock`); its entries are keyed by that registration.

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
import inspect
import json
import os
import re
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from semcal_eval.core.records import canonical

from .dataset_check import build_lm_eval_task, quiet
from .errors import SubmissionError
from .registry import normalise_version

__all__ = ["OUTPUT_TYPE", "RUN_KEYS", "StockTask", "config_hash", "content_hashes", "registration_hash",
           "entry_task", "register", "registered", "candidates", "lookup", "build_task"]

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
    registered_at TEXT NOT NULL,
    base_hash TEXT NOT NULL DEFAULT '',
    content TEXT NOT NULL DEFAULT ''
);
"""
#: A function as lm-eval's evaluator logs one it cannot serialise (``str(fn)``): the address changes every run.
_FUNCTION_REPR = re.compile(r"<function (\S+) at 0x[0-9a-fA-F]+>")


def _file_names(files):
    """``data_files`` with each path reduced to its file name (a str, a list, or a split -> path(s) mapping)."""
    if isinstance(files, str):
        return os.path.basename(files.replace("\\", "/"))
    if isinstance(files, list):
        return [_file_names(f) for f in files]
    if isinstance(files, dict):
        return {k: _file_names(v) for k, v in files.items()}
    return files


def _plain(v):
    """A config value as lm-eval logs it, made run-independent: a callable the config dump left as it is (a
    ``process_docs`` inside ``fewshot_config``) becomes its ``str()`` as the evaluator writes it, and every
    ``<function NAME at 0x...>`` loses its memory address, which differs between two runs of the same task."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if callable(v):
        v = str(v)
    if isinstance(v, str) and "<function " in v:
        return _FUNCTION_REPR.sub(lambda m: f"<function {m.group(1)}>", v)
    return v


def config_hash(config: dict, version) -> str:
    """sha256 (hex) of ``{"config": config less RUN_KEYS, "version": version}`` as canonical JSON.

    ``num_fewshot`` None counts as 0 (lm-eval's evaluator sets 0 when the YAML leaves it unset) and
    ``dataset_kwargs.data_files`` paths as their file names, and functions the log shows by address by their name
    (:func:`_plain`); everything else (prompt, choices, target, delimiters,
    metrics, dataset id and split) is hashed as lm-eval logged it."""
    if not isinstance(config, dict):
        raise SubmissionError(f"a task config must be a JSON object, got {type(config).__name__}")
    cfg = {k: _plain(v) for k, v in config.items() if k not in RUN_KEYS}
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
    """One registered stock task: its registration hash (``config_hash``: the logged config's hash and the content
    of its data and code, :func:`registration_hash`), the folder its YAML is built from (``""``: lm-eval's own task
    index), what the board found there when it was registered, and the logged config's hash (``base_hash``; ``""``
    for a registration made before content was hashed, whose ``config_hash`` is that hash)."""

    config_hash: str
    task: str
    include_path: str
    split: str
    n_docs: int
    registered_at: str
    base_hash: str = ""
    content: str = ""

    @property
    def logged_hash(self) -> str:
        """The :func:`config_hash` a run of this task logs (what a submission is matched on)."""
        return self.base_hash or self.config_hash


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


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _local_files(value) -> list[Path]:
    """The existing local files a ``dataset_path`` / ``data_files`` / ``data_dir`` value names (a str, a list, or
    a split -> path(s) mapping; a folder: every file in it), a relative path read from the working directory as
    ``datasets`` reads it; hub dataset names name no local file."""
    if isinstance(value, dict):
        return [f for v in value.values() for f in _local_files(v)]
    if isinstance(value, (list, tuple)):
        return [f for v in value for f in _local_files(v)]
    if not isinstance(value, str) or not value:
        return []
    p = Path(os.path.expanduser(value))
    if p.is_file():
        return [p.resolve()]
    if p.is_dir():
        return sorted(f.resolve() for f in p.rglob("*") if f.is_file() and ".git" not in f.parts)
    return []


def _callables(v, out: list) -> list:
    """Every callable inside a task config value (functions given with ``!function``), depth first."""
    if callable(v) and not isinstance(v, type):
        out.append(v)
    elif isinstance(v, dict):
        for x in v.values():
            _callables(x, out)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _callables(x, out)
    return out


def content_hashes(obj) -> dict[str, list[str]]:
    """What a task reads beyond its logged config, hashed: ``{"data": [sha256 of each local data file], "code":
    [sha256 of the whole source file of each function and task class it uses]}`` (sorted, names left out: the same
    bytes anywhere are the same data). Data files are those ``dataset_path``, ``dataset_kwargs.data_files`` and
    ``data_dir`` name on this machine; code is the module file of every ``!function`` in the config and of the
    task's class when it is not lm-eval's own (its helpers and constants change what a function does, and the
    logged config holds the function's own source only)."""
    import dataclasses

    cfg = obj.config
    kw = getattr(cfg, "dataset_kwargs", None) or {}
    files = _local_files(getattr(cfg, "dataset_path", None))
    files += _local_files(kw.get("data_files")) + _local_files(kw.get("data_dir"))
    fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)} if dataclasses.is_dataclass(cfg) else {}
    code: set[str] = set()
    for fn in _callables(fields, []) + [type(obj)]:
        try:
            src = inspect.getsourcefile(fn)
        except TypeError:  # a builtin: no source of its own
            src = None
        if src and "lm_eval" not in Path(src).parts and Path(src).is_file():
            code.add(_sha256(Path(src)))
    return {"data": sorted({_sha256(f) for f in files}), "code": sorted(code)}


def registration_hash(chash: str, content: dict) -> str:
    """A registration's hash: sha256 of ``[the logged config's hash, content_hashes()]`` as canonical JSON."""
    return hashlib.sha256(canonical([chash, content])).hexdigest()


def _table(con: sqlite3.Connection) -> None:
    con.executescript(_SCHEMA)
    cols = {r[1] for r in con.execute("PRAGMA table_info(stock_tasks)")}
    for col in ("base_hash", "content"):  # a board registered before issue 43: rows keep their logged hash
        if col not in cols:
            con.execute(f"ALTER TABLE stock_tasks ADD COLUMN {col} TEXT NOT NULL DEFAULT ''")


def register(con: sqlite3.Connection, task: str, include_path: str | os.PathLike | None) -> StockTask:
    """Build ``task`` from ``include_path`` (absolute; None: lm-eval's own tasks), load its evaluation split, hash
    its data files and code (:func:`content_hashes`) and record it under its :func:`registration_hash`. Nothing
    stored is replaced: the same registration hash again returns the stored row unchanged (``registered_at`` tells
    it apart); a different one is a new version, beside the earlier ones. Building the task imports and runs the
    Python its YAML names (``!function``, ``class``): register only folders you trust."""
    path = str(Path(include_path).resolve()) if include_path else ""
    if path and not Path(path).is_dir():
        raise SubmissionError(f"--include-path {include_path}: not a folder")
    obj, chash = build_task(task, path)
    with quiet():
        docs = obj.eval_docs
        n = len(docs)
    if n == 0:
        raise SubmissionError(f"task {task!r} has no documents in its evaluation split")
    content = content_hashes(obj)
    key = registration_hash(chash, content)
    _table(con)
    old = con.execute("SELECT config_hash, task, include_path, split, n_docs, registered_at, base_hash, content "
                      "FROM stock_tasks WHERE config_hash = ?", (key,)).fetchone()
    if old is not None:
        return StockTask(*old)
    split = str(getattr(docs, "split", None) or obj.config.test_split or obj.config.validation_split or "default")
    row = StockTask(key, task, path, split, n, datetime.now(timezone.utc).isoformat(timespec="seconds"), chash,
                    json.dumps(content, sort_keys=True))
    con.execute("INSERT INTO stock_tasks (config_hash, task, include_path, split, n_docs, registered_at, base_hash, "
                "content) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (row.config_hash, row.task, row.include_path, row.split, row.n_docs, row.registered_at,
                 row.base_hash, row.content))
    return row


def registered(con: sqlite3.Connection | None) -> dict[str, StockTask]:
    """registration hash -> :class:`StockTask` of every registered stock task, oldest first ({} without a
    database)."""
    if con is None:
        return {}
    _table(con)
    return {r[0]: StockTask(*r) for r in con.execute(
        "SELECT config_hash, task, include_path, split, n_docs, registered_at, base_hash, content FROM stock_tasks "
        "ORDER BY registered_at, rowid")}


def candidates(registry: dict[str, StockTask], chash: str) -> list[StockTask]:
    """The registrations a run whose logged config hashes to ``chash`` may be a run of, oldest first."""
    return [r for r in registry.values() if r.logged_hash == chash]


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
