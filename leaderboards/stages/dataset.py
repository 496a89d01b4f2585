"""Stage 3, **dataset**: the run is checked against the task's own documents, loaded by the board.

Per task (:func:`check_dataset`): the board builds the task from its own task folder with the run's dataset
metadata (``split``, subset settings) and its own data (:mod:`leaderboards.dataset_check`), checks
``n-samples.original`` against the split's true size and ``n-samples.effective`` against the recorded
``--limit``, and computes the coverage itself. Per row (:func:`check_document`, :func:`check_labels`), as the
samples are streamed: lm-eval's ``doc_hash`` / ``target_hash`` recomputed from the board's document, and for
classification records the gold label and the soft target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from semcal_eval.core.records import gold_key
from semcal_eval.qa.settings import QASettings
from semcal_eval.semsoft.spec import SemSoftParams

from ..dataset_check import TaskDocs, load_task_docs, same_soft
from ..errors import SubmissionError
from .shape import RunShape, count

#: Run metadata keys that set how documents are scored, never which documents the split holds: the typed
#: settings of the task classes (Semantic Softmax's :class:`SemSoftParams`, flat or under ``semsoft``; the QA
#: tasks' :class:`QASettings`), the gold reading (``soft_field``), the split (the documents are loaded with it)
#: and the data folder, and what lm-eval adds (the task ``version``, the model arguments ``pretrained`` and
#: ``dtype``, ``config_source``). Any other key may select documents: the board then loads the split without it
#: and compares (:func:`document_subset`), so a missing key costs a second load, never a wrong coverage.
SCORING_METADATA = frozenset({"version", "pretrained", "dtype", "config_source", "split", "data_dir", "soft_field",
                              "semsoft", *SemSoftParams.keys(), *QASettings.keys()})


@dataclass
class Coverage:
    """Stage 3's output for one task: the board's documents and what the run covers of them."""

    docs: TaskDocs | None  # None: a stock task the board has no dataset for (leaderboards.stock)
    effective: int  # documents evaluated (ids 0..effective-1)
    n_split: int  # size of the split the documents are counted against (the unselected split under a subset)
    coverage: str  # "full" | "partial"
    subset: dict | None  # metadata that selects other documents than the plain split, hashed into the doc set
    split: str = ""  # the evaluation split's name


def expected_effective(limit, original: int) -> int:
    """Documents lm-eval evaluates of ``original`` under ``--limit``: the first ``limit``, or ``ceil(limit*n)``."""
    if limit is None:
        return original
    n = int(math.ceil(original * limit)) if limit < 1.0 else int(limit)
    return min(n, original)


def check_dataset(task: str, shape: RunShape, limit, root: Path, data_dir) -> Coverage:
    """Stage 3 for one task: load its documents as the board builds the task, and check the run's document
    counts against them (:func:`check_counts`)."""
    rp = str(shape.results_path)
    metadata = (shape.configs.get(task) if isinstance(shape.configs.get(task), dict) else {}).get("metadata")
    docs = load_task_docs(task, root, metadata, data_dir=data_dir, where=rp)
    cov = check_counts(task, shape, limit, docs.n_split, docs.split, docs)
    subset = document_subset(task, root, metadata, docs, data_dir, rp)
    if subset is not None:
        # metadata that changes which documents the split holds (Civil Comments' band, subsets, filters):
        # never a full run, and hashed into the document set so it is ranked only with the same selection
        cov.subset, cov.coverage, cov.n_split = subset[0], "partial", subset[1]
    return cov


def check_counts(task: str, shape: RunShape, limit, n_split: int | None, split: str,
                 docs: TaskDocs | None = None) -> Coverage:
    """The run's ``n-samples`` of ``task`` against a split of ``n_split`` documents (``original`` must equal it;
    None: the board has no dataset to count, and the run's ``original`` is taken as reported) and ``limit``
    (``effective`` = what ``limit`` gives, never 0); the coverage computed from them."""
    rp = str(shape.results_path)
    ns = shape.n_samples.get(task)
    if not isinstance(ns, dict):
        raise SubmissionError(f"{rp}: n-samples.{task} must hold integer 'original' and 'effective'")
    original = count(ns.get("original"), f"n-samples.{task}.original", rp)
    effective = count(ns.get("effective"), f"n-samples.{task}.effective", rp)
    if n_split is None:
        n_split = original
    if original != n_split:
        raise SubmissionError(
            f"{rp}: task {task}: n-samples.original is {original} but the {split} split the board loads "
            f"has {n_split} documents; coverage is computed from the dataset, not from the run"
        )
    expected = expected_effective(limit, n_split)
    if limit is None and effective != n_split:
        raise SubmissionError(
            f"{rp}: task {task} evaluated {effective} of {n_split} documents without a recorded "
            "--limit; evaluate the whole split, or pass --limit so the partial coverage is shown"
        )
    if effective != expected:
        raise SubmissionError(
            f"{rp}: task {task}: n-samples.effective is {effective} but limit {limit} of "
            f"{n_split} documents gives {expected}"
        )
    if effective == 0:
        raise SubmissionError(f"{rp}: task {task} evaluated no document")
    return Coverage(docs, effective, n_split, "full" if effective == n_split else "partial", None, split)


def document_subset(task, root, metadata, docs: TaskDocs, data_dir, where) -> tuple[dict, int] | None:
    """``(selecting metadata, size of the unselected split)`` when the run's metadata selects other documents
    than the board's split with no extra metadata (``band: [0.75, 0.8]``), else None. Loads the split a second
    time only when the metadata holds a key outside :data:`SCORING_METADATA`."""
    if not isinstance(metadata, dict):
        return None
    extra = {k: metadata[k] for k in sorted(metadata) if isinstance(k, str) and k not in SCORING_METADATA}
    if not extra:
        return None
    base = {"split": metadata["split"]} if isinstance(metadata.get("split"), str) else {}
    default = load_task_docs(task, root, base, data_dir=data_dir, where=where)
    same = default.n_split == docs.n_split and all(default.doc_hash(i) == docs.doc_hash(i)
                                                    for i in range(docs.n_split))
    return None if same else (extra, default.n_split)


def check_document(row: dict, doc_id: int, docs: TaskDocs, task: str, at: str,
                   cache: dict[int, tuple[str, str]]) -> None:
    """Stage 3 for one row: its ``doc_hash`` and ``target_hash`` are lm-eval's hashes of the board's document
    ``doc_id`` (``cache``: doc_id -> hashes, shared by the task's filters)."""
    if doc_id not in cache:
        cache[doc_id] = (docs.doc_hash(doc_id), docs.target_hash(doc_id))
    want_doc, want_target = cache[doc_id]
    if row.get("doc_hash") != want_doc:
        raise SubmissionError(
            f"{at}: doc_id {doc_id} has doc_hash {str(row.get('doc_hash'))[:16]}… but document {doc_id} of "
            f"{task}'s {docs.split} split hashes to {want_doc[:16]}…; the rows must be lm-eval's log of this "
            "dataset, in its order"
        )
    if row.get("target_hash") != want_target:
        raise SubmissionError(
            f"{at}: doc_id {doc_id}: target_hash does not match the dataset's target for document {doc_id} "
            f"of {task}'s {docs.split} split; submit lm-eval's unedited log"
        )


def check_labels(rec: dict, doc_id: int, f: str, docs: TaskDocs, at: str) -> None:
    """Stage 3 for one classification record: its gold label and soft target are the dataset's (the board's
    gold reader, :attr:`TaskDocs.reader`; golds compared as label sets, :func:`semcal_eval.core.records.gold_key`)."""
    gold = rec.get("gold")
    want = docs.gold(doc_id)
    want_soft = docs.soft(doc_id)
    if want is not None and gold is not None and gold_key(gold) != gold_key(want):
        raise SubmissionError(
            f"{at}: document {doc_id} (filter {f}) has gold label {str(gold)[:40]} but the dataset's "
            f"{docs.split} split says {want}; gold labels are checked against the dataset itself"
        )
    if gold is None and want is not None and want_soft is None:
        raise SubmissionError(f"{at}: document {doc_id} (filter {f}) has no gold label; the dataset says {want}")
    if (want_soft is not None or rec.get("soft") is not None) and not same_soft(rec.get("soft"), want_soft):
        raise SubmissionError(
            f"{at}: document {doc_id} (filter {f}) has soft target {str(rec.get('soft'))[:20]} but the "
            f"dataset's is {want_soft}; soft targets are checked against the dataset itself"
        )
