"""The generic loader: the Hugging Face hub by default, local raw files with ``$SEMCAL_DATA_DIR``.

Every loader returns ``datasets`` objects in the **hub schema** (same feature names and types as
``datasets.load_dataset`` gives for the hub dataset), whichever source it reads:

=================  ==========================================  ==============  ==================
name               hub path (config)                           hub splits      default eval split
=================  ==========================================  ==============  ==================
``goemotions``     google-research-datasets/go_emotions        train/val/test  test
                   (simplified)
``civil_comments`` google/civil_comments                       train/val/test  test
``nq_open``        google-research-datasets/nq_open            train/val       validation
``triviaqa``       mandarjoshi/trivia_qa (rc.nocontext)        train/val/test  validation
``hotpotqa``       hotpotqa/hotpot_qa (distractor)             train/val       validation
``msmarco``        microsoft/ms_marco (v2.1)                   train/val/test  validation (local:
                                                                               test, the mirror's
                                                                               v1.1 test sample)
=================  ==========================================  ==============  ==================

Source selection: ``data_dir=`` argument, else the ``SEMCAL_DATA_DIR`` environment variable, else the
hub (``data_dir="hub"`` forces the hub even when the variable is set). With a data dir the loader reads
``<data_dir>/<name>/``: first a file already in the hub schema named ``<split>.jsonl`` /
``<split>.json`` / ``<split>.parquet``, else the dataset's original raw file for that split (see
``docs/DATA.md`` for the split ↔ file table and the defaults used for fields the raw files lack).

Rows whose required fields are missing (``None``, NaN, blank text, empty answer list) are skipped,
never silently: each skip is counted, logged with ``logging.warning`` and kept in the returned
``Dataset``'s :class:`~semcal_eval.data.required.LoadReport` (``data.load_report(ds).skipped`` / ``.reasons``).

lm-eval reaches the loaders through ``custom_dataset: !function utils.load`` in a task YAML, where
``utils.load = semcal_eval.data.make_lm_eval_loader("<name>")``; see :func:`lm_eval_dataset`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Callable

import datasets
from datasets import Dataset, DatasetDict, Features

from semcal_eval.data.local import local_source, local_splits, missing_split_error
from semcal_eval.data.required import attach_skips, drop_missing
from semcal_eval.data.source import ENV_VAR, resolve_data_dir
from semcal_eval.data.specs import DatasetSpec, get_spec

logger = logging.getLogger(__name__)

EVAL_KEY = "eval"  # DatasetDict key of the evaluated split in lm_eval_dataset()


def load_local_split(spec: DatasetSpec, root: Path, split: str) -> Dataset:
    """Split ``split`` of ``spec`` from the mirror at ``root``, in the hub schema (plus any extra columns the
    file provides), rows with missing required fields skipped and counted."""
    folder = root / spec.name
    src = local_source(spec, folder, split)
    if src is None:
        raise missing_split_error(spec, folder, split)
    if src.note:
        logger.info("%s[%s] from %s: %s", spec.name, split, src.path, src.note)
    if spec.check_folder is not None:
        spec.check_folder(folder)
    stem = src.path.stem.replace(".", "-").replace("_", "-")
    rows = [spec.complete(rec, i, stem) for i, rec in enumerate(src.parser(src.path))]
    feats = dict(spec.features)
    for extra, ftype in spec.extra_features.items():
        if any(extra in r for r in rows):
            feats[extra] = ftype
            for r in rows:
                r.setdefault(extra, None)
    features = Features(feats)
    columns = {k: [r.get(k) for r in rows] for k in features}
    ds = Dataset.from_dict(columns, features=features, split=datasets.NamedSplit(split))
    ds, skipped = drop_missing(ds, spec.required, what=f"{spec.name}[{split}] from {src.path}")
    if len(ds) == 0:
        raise ValueError(f"{spec.name}[{split}] from {src.path}: no usable rows ({dict(skipped)} skipped)")
    return attach_skips(ds, skipped, str(src.path))


def load_hub(spec: DatasetSpec, split: str | None) -> Dataset | DatasetDict:
    """Split ``split`` (None: every split) of ``spec`` from the Hugging Face hub, rows with missing required
    fields skipped and counted; a hub failure keeps its error and adds the way out ($SEMCAL_DATA_DIR)."""
    if split is not None and split not in spec.hub_splits:
        extra = sorted(set(spec.local_files) - set(spec.hub_splits))
        raise ValueError(
            f"{spec.name}: the hub dataset {spec.hub_path} has no split {split!r} "
            f"(hub splits: {', '.join(spec.hub_splits)}"
            + (f"; {', '.join(extra)} exist only in the local mirror, set {ENV_VAR}" if extra else "")
            + ")."
        )
    try:
        obj = datasets.load_dataset(spec.hub_path, spec.hub_config, split=split)
    except Exception as e:  # offline, gated, renamed...: keep the original error, add the way out
        e.add_note(
            f"semcal: loading {spec.hub_path}"
            + (f" ({spec.hub_config})" if spec.hub_config else "")
            + f" from the Hugging Face hub failed. Without hub access set {ENV_VAR} to a local data "
            "mirror (see docs/DATA.md)."
        )
        raise
    src = f"hub:{spec.hub_path}" + (f"/{spec.hub_config}" if spec.hub_config else "")
    if isinstance(obj, DatasetDict):
        out = {}
        for name, ds in obj.items():
            kept, skipped = drop_missing(ds, spec.required, what=f"{spec.name}[{name}] from {src}")
            if len(kept) == 0:
                logger.warning("%s[%s] from %s: every row lacks a required field; split dropped", spec.name, name, src)
                continue
            out[name] = attach_skips(kept, skipped, src)
        return DatasetDict(out)
    kept, skipped = drop_missing(obj, spec.required, what=f"{spec.name}[{split}] from {src}")
    if len(kept) == 0:
        raise ValueError(
            f"{spec.name}[{split}] from {src}: every row lacks a required field ({dict(skipped)}); "
            f"this split has no usable labels (e.g. hidden test answers). Use split="
            f"{spec.eval_split!r}."
        )
    return attach_skips(kept, skipped, src)


def load(
    name: str, split: str | None = None, data_dir: str | os.PathLike | None = None
) -> Dataset | DatasetDict:
    """Load dataset ``name`` in its hub schema.

    ``split=None`` returns a DatasetDict of every split available from the source; a split name
    returns that Dataset. Source: ``data_dir`` (``"hub"`` forces the hub), else ``$SEMCAL_DATA_DIR``,
    else the hub. Missing local files raise :class:`MissingSplitFileError` naming the file.
    """
    spec = get_spec(name)
    root = resolve_data_dir(data_dir)
    if root is None:
        return load_hub(spec, split)
    if split is not None:
        return load_local_split(spec, root, split)
    avail = local_splits(spec.name, root)
    if not avail:
        folder = root / spec.name
        raise missing_split_error(spec, folder, spec.eval_split)
    return DatasetDict({s: load_local_split(spec, root, s) for s in avail})


def load_goemotions(split=None, data_dir=None):
    """GoEmotions "simplified" (text, labels: list of 28-way class ids, id)."""
    return load("goemotions", split, data_dir)


def load_civil_comments(split=None, data_dir=None):
    """Civil Comments (text + 7 annotator-fraction attributes in [0, 1])."""
    return load("civil_comments", split, data_dir)


def load_nq_open(split=None, data_dir=None):
    """NQ-Open (question, answer: list of acceptable strings)."""
    return load("nq_open", split, data_dir)


def load_triviaqa(split=None, data_dir=None):
    """TriviaQA rc.nocontext (question, question_id, answer {aliases, normalized_aliases, value, ...})."""
    return load("triviaqa", split, data_dir)


def load_hotpotqa(split=None, data_dir=None):
    """HotpotQA distractor (id, question, answer, type, level, supporting_facts, context)."""
    return load("hotpotqa", split, data_dir)


def load_msmarco(split=None, data_dir=None):
    """MS MARCO v2.1 (query, query_id, answers, wellFormedAnswers, query_type, passages)."""
    return load("msmarco", split, data_dir)


def lm_eval_dataset(
    name: str,
    /,
    split: str | None = None,
    data_dir: str | os.PathLike | None = None,
    train_split: str | None = None,
    validation_split: str | None = None,
    **_ignored: Any,
) -> DatasetDict:
    """The ``custom_dataset`` hook for lm-eval tasks.

    lm-eval 0.4.13 calls ``custom_dataset(**metadata, **dataset_kwargs)``, where ``metadata`` is the
    task YAML's ``metadata`` merged with ``--model_args`` and ``--metadata`` (CLI wins); unrelated
    keys (``version``, ``pretrained``, ...) land in ``_ignored``. Returns a DatasetDict with

    * ``"eval"``: split ``split`` (default: the dataset's standard evaluation split; from a local mirror that
      lacks it, the mirror's own evaluation split, :func:`default_eval_split`),
    * ``"train"`` / ``"validation"``: splits ``train_split`` / ``validation_split`` (default
      ``train`` / ``validation``) when the source has them, for few-shot examples and recalibration
      fits. Their absence is logged, not an error; an absent eval split is an error.

    Task YAMLs use ``test_split: eval`` (and e.g. ``fewshot_split: train``). ``name`` is
    positional-only so that a metadata key ``name`` cannot collide with it.
    """
    spec = get_spec(name)
    root = resolve_data_dir(data_dir)
    eval_split = split or default_eval_split(spec, root)
    want = {"train": train_split or "train", "validation": validation_split or "validation"}
    out: dict[str, Dataset] = {}
    if root is None:
        if eval_split not in spec.hub_splits:
            load_hub(spec, eval_split)  # raises the explanatory unknown-split error
        # The hub builder downloads and prepares every split anyway, so load them together once.
        full = load_hub(spec, None)
        if eval_split not in full:
            raise ValueError(
                f"{spec.name}: hub split {eval_split!r} has no usable rows (see the warning above); "
                f"choose another split, e.g. --metadata '{{\"split\": \"{spec.eval_split}\"}}'"
            )
        out[EVAL_KEY] = full[eval_split]
        for key, s in want.items():
            if s in full:
                out[key] = full[s]
    else:
        out[EVAL_KEY] = load_local_split(spec, root, eval_split)
        avail = set(local_splits(spec.name, root))
        for key, s in want.items():
            if s == eval_split:
                out[key] = out[EVAL_KEY]
            elif s in avail:
                out[key] = load_local_split(spec, root, s)
    missing = [f"{k} (split {want[k]!r})" for k in want if k not in out]
    if missing:
        logger.info("%s: no %s in this source; few-shot/fit splits limited", spec.name, ", ".join(missing))
    if _ignored:
        logger.debug("lm_eval_dataset(%s): ignoring metadata keys %s", spec.name, sorted(_ignored))
    return DatasetDict(out)


def default_eval_split(spec: DatasetSpec, root: Path | None) -> str:
    """The split evaluated when none is named: ``spec.eval_split`` from the hub, and from a local mirror that
    has a file for it; else the mirror's own ``spec.local_eval_split`` (MS MARCO: the mirror's 1,000-question
    v1.1 test sample, as it holds no validation questions), logged."""
    if root is None or spec.local_eval_split is None:
        return spec.eval_split
    folder = root / spec.name
    if local_source(spec, folder, spec.eval_split) is not None or local_source(spec, folder, spec.local_eval_split) is None:
        return spec.eval_split
    logger.info("%s: the local mirror %s has no %r split; evaluating its %r split", spec.name, folder,
                spec.eval_split, spec.local_eval_split)
    return spec.local_eval_split


def make_lm_eval_loader(name: str) -> Callable[..., DatasetDict]:
    """A ``custom_dataset`` callable bound to dataset ``name``: in a task folder's ``utils.py`` write
    ``load = semcal_eval.data.make_lm_eval_loader("goemotions")`` and in the YAML
    ``custom_dataset: !function utils.load``."""
    spec = get_spec(name)

    def _hook(**kwargs: Any) -> DatasetDict:
        return lm_eval_dataset(spec.name, **kwargs)

    _hook.__name__ = f"load_{spec.name}"
    _hook.__doc__ = f"lm-eval custom_dataset hook for {spec.name} (see semcal_eval.data.lm_eval_dataset)."
    return _hook
