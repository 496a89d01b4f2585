"""The task's documents as the board loads them itself, to check a submission against the dataset.

The board builds the task through lm-eval's ``TaskManager`` from the board's own task folder (the same YAML and
``custom_dataset`` hook lm-eval used, so the same :mod:`semcal_eval.data` loaders), with the dataset-selecting
metadata of the run (``split``, subset settings such as Civil Comments' ``band``) but never the run's
``data_dir``: the board reads its own data (``data_dir=`` / ``$SEMCAL_DATA_DIR`` / the hub). From that task it
takes, per document position ``doc_id``:

* ``doc_hash`` and ``target_hash``: lm-eval's own hashes of the document and its target, as the evaluator logs
  them (:func:`semcal_eval.harness.lm_eval_compat.doc_hash` / ``target_hash``, checked against lm-eval's
  evaluator by tests/test_lm_eval_compat.py);
* the gold label and the soft target, read by the task's gold reader (:class:`semcal_eval.data.gold.GoldReader`:
  ``doc_to_target`` and the ``soft_field`` column named in the metadata), the same code the run's task used;
* the split's name and true size, and the training split's labels (for the board's reference rows).

Synthetic test tasks (tests/board_fixtures.py) declare their documents the same way: a ``custom_dataset`` hook
reading a tiny local dataset next to the YAML, so the tests run this check rather than skip it.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from semcal_eval.harness.lm_eval_compat import doc_hash, target_hash

from .errors import SubmissionError

__all__ = ["TaskDocs", "load_task_docs", "build_lm_eval_task", "quiet", "doc_hash", "DROPPED_METADATA"]

#: Run metadata never passed to the board's own task: where data is read from is the board's choice, the
#: training split behind the board's reference rows is the task's own (a submitter choosing it could weaken the
#: prior their model is compared with), and the rest describe the submitter's machine, not the documents.
DROPPED_METADATA = ("data_dir", "train_split", "validation_split", "config_source", "pretrained")
_MAX_METADATA_BYTES = 64 * 1024


@dataclass
class TaskDocs:
    """The board's own view of one task's evaluation split (and training labels)."""

    task: str
    split: str
    docs: Any  # the task's eval_docs (a datasets.Dataset or a list of dicts), position = lm-eval doc_id
    _task: Any = field(repr=False)

    @property
    def n_split(self) -> int:
        """The true number of documents in the evaluation split (what a full run covers)."""
        return len(self.docs)

    def doc(self, i: int) -> dict:
        return self.docs[i]

    def doc_hash(self, i: int) -> str:
        return doc_hash(self.docs[i])

    def target_hash(self, i: int) -> str:
        return target_hash(self._task.doc_to_target(self.docs[i]))

    def choices(self, i: int) -> list[str]:
        """lm-eval's ``doc_to_choice`` of document ``i``: the choice texts, without the target delimiter."""
        return [str(c) for c in self._task.doc_to_choice(self.docs[i])]

    def gold(self, i: int) -> int | list[int] | None:
        """The gold label (index, or the list of acceptable indices) of document ``i``."""
        return self._read("gold", self.docs[i])

    def soft(self, i: int) -> float | None:
        """The annotator fraction of the positive class of document ``i`` (None: the task has none)."""
        return self._read("soft", self.docs[i])

    @cached_property
    def reader(self):
        """The task's gold reader (:class:`semcal_eval.data.gold.GoldReader`): the code the run's own task reads
        its gold labels and soft targets with, from the same task fields."""
        from semcal_eval.data.gold import GoldReader

        return self._guard(GoldReader, self._task)

    def _read(self, what: str, *args):
        return self._guard(getattr(self.reader, what), *args)

    def _guard(self, fn, *args):
        from semcal_eval.data.gold import GoldError

        try:
            return fn(*args)
        except GoldError as e:  # the task's declaration or the board's data, under the run's metadata
            raise SubmissionError(f"task {self.task} ({self.split} split): {e}") from None

    @cached_property
    def n_classes(self) -> int | None:
        """Number of labels (the length of ``doc_to_choice``), None for tasks without choices (QA)."""
        if getattr(self._task.config, "doc_to_choice", None) is None and not hasattr(self._task, "gold"):
            return None  # a generation task (QA): no label set
        try:
            return len(self._task.doc_to_choice(self.docs[0]))
        except Exception:  # a task whose choices cannot be listed has no reference rows
            return None

    @cached_property
    def train_golds(self) -> list:
        """Gold labels of the training split ([] without one), as the semsoft reference filters read them."""
        return self._read("train_golds")

    @cached_property
    def train_soft(self) -> list[float]:
        """Soft targets of the training split ([] without one or without soft targets)."""
        return self._read("train_soft")


def _clean_metadata(meta: Any, where: str) -> dict:
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise SubmissionError(f"{where}: configs metadata must be an object, got {type(meta).__name__}")
    text = json.dumps(meta, default=str)
    if len(text) > _MAX_METADATA_BYTES:
        raise SubmissionError(f"{where}: configs metadata is {len(text)} bytes; more than {_MAX_METADATA_BYTES}")
    return {k: v for k, v in meta.items() if isinstance(k, str) and k not in DROPPED_METADATA}


def load_task_docs(task: str, tasks_dir: str | os.PathLike, metadata: Any = None, *,
                   data_dir: str | os.PathLike | None = None, where: str = "") -> TaskDocs:
    """Build ``task`` from the board's task folder with the run's dataset metadata; return its documents.

    ``metadata`` is the run's ``configs[task].metadata`` (untrusted: only used to select documents, which are
    then checked one by one); ``data_dir`` overrides ``$SEMCAL_DATA_DIR``. Any failure to build the task or
    read its data is a :class:`SubmissionError` naming the task and the split.
    """
    meta = _clean_metadata(metadata, where or task)
    if data_dir is not None:
        meta["data_dir"] = str(data_dir)
    try:
        obj = build_lm_eval_task(task, tasks_dir, meta)
        with quiet():
            docs = obj.eval_docs
            n = len(docs)
    except SubmissionError:
        raise
    except Exception as e:  # anything the task's own loader raises: one line, with the fix
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise SubmissionError(
            f"{where or task}: the board could not load the documents of task {task} "
            f"(split {meta.get('split', 'default')!r}): {type(e).__name__}: {msg[:300]}; check the run's "
            "--metadata and the board's data (SEMCAL_DATA_DIR)"
        ) from None
    if n == 0:
        raise SubmissionError(f"{where or task}: task {task} has no documents in its evaluation split")
    split = str(getattr(docs, "split", None) or meta.get("split") or "default")
    return TaskDocs(task=task, split=split, docs=docs, _task=obj)


def build_lm_eval_task(task: str, tasks_dir: str | os.PathLike | None, metadata: dict | None = None):
    """lm-eval's task object for ``task``, built by its ``TaskManager`` from ``tasks_dir`` alone (None: lm-eval's
    own task index) with ``metadata``, its log lines and progress bars silenced (:func:`quiet`)."""
    from lm_eval.tasks import TaskManager

    with quiet():
        # lm-eval logs task construction at INFO/WARNING and datasets prints progress bars: keep submit's
        # output to its own lines.
        if tasks_dir is None:
            tm = TaskManager(metadata=metadata)
        else:
            tm = TaskManager(include_path=str(Path(tasks_dir)), include_defaults=False, metadata=metadata)
        return tm.load([task])["tasks"][task]


@contextlib.contextmanager
def quiet():
    loggers = [logging.getLogger(n) for n in ("lm-eval", "lm_eval", "datasets", "semcal_eval")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)  # lm-eval logs ERROR for semcal metrics it cannot find in `evaluate`
    try:
        from datasets.utils import logging as dlog

        bars = dlog.is_progress_bar_enabled()
        dlog.disable_progress_bar()
    except Exception:  # older datasets: nothing to silence
        bars = None
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        for lg, lv in zip(loggers, levels):
            lg.setLevel(lv)
        if bars:
            dlog.enable_progress_bar()


def same_soft(a: Any, b: float | None) -> bool:
    """A record's soft target equals the dataset's (float32 storage: 1e-6)."""
    if b is None:
        return a is None
    return isinstance(a, (int, float)) and not isinstance(a, bool) and math.isfinite(a) and abs(a - b) <= 1e-6
