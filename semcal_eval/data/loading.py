"""Dataset loaders: the Hugging Face hub by default, local raw files with ``$SEMCAL_DATA_DIR``.

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
``msmarco``        microsoft/ms_marco (v2.1)                   train/val/test  validation
=================  ==========================================  ==============  ==================

Source selection: ``data_dir=`` argument, else the ``SEMCAL_DATA_DIR`` environment variable, else the
hub (``data_dir="hub"`` forces the hub even when the variable is set). With a data dir the loader reads
``<data_dir>/<name>/``: first a file already in the hub schema named ``<split>.jsonl`` /
``<split>.json`` / ``<split>.parquet``, else the dataset's original raw file for that split (see
``docs/DATA.md`` for the split ↔ file table and the defaults used for fields the raw files lack).

Rows whose required fields are missing (``None``, NaN, blank text, empty answer list) are skipped,
never silently: each skip is counted, logged with ``logging.warning`` and attached to the returned
``Dataset`` as ``ds.semcal_skipped`` (int) and ``ds.semcal_skip_reasons`` (dict).

lm-eval reaches the loaders through ``custom_dataset: !function utils.load`` in a task YAML, where
``utils.load = semcal_eval.data.make_lm_eval_loader("<name>")``; see :func:`lm_eval_dataset`.
"""

from __future__ import annotations

import ast
import csv
import json
import logging
import math
import os
import re
import string
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import datasets
from datasets import ClassLabel, Dataset, DatasetDict, Features, Sequence, Value

logger = logging.getLogger(__name__)

ENV_VAR = "SEMCAL_DATA_DIR"
HUB = "hub"  # data_dir value that forces the hub even when $SEMCAL_DATA_DIR is set
EVAL_KEY = "eval"  # DatasetDict key of the evaluated split in lm_eval_dataset()

# --------------------------------------------------------------------------------------------------
# Hub schemas (from the dataset cards' dataset_info; see docs/DATA.md)
# --------------------------------------------------------------------------------------------------

GOEMOTIONS_LABELS: tuple[str, ...] = (
    "admiration", "amusement", "anger", "annoyance", "approval", "caring", "confusion",
    "curiosity", "desire", "disappointment", "disapproval", "disgust", "embarrassment",
    "excitement", "fear", "gratitude", "grief", "joy", "love", "nervousness", "optimism",
    "pride", "realization", "relief", "remorse", "sadness", "surprise", "neutral",
)  # fmt: skip
GOEMOTIONS_NEUTRAL = GOEMOTIONS_LABELS.index("neutral")

CIVIL_ATTRIBUTES: tuple[str, ...] = (
    "toxicity", "severe_toxicity", "obscene", "threat", "insult", "identity_attack",
    "sexual_explicit",
)  # fmt: skip

_STR = Value("string")

HUB_FEATURES: dict[str, Features] = {
    "goemotions": Features(
        {"text": _STR, "labels": Sequence(ClassLabel(names=list(GOEMOTIONS_LABELS))), "id": _STR}
    ),
    "civil_comments": Features({"text": _STR, **{a: Value("float32") for a in CIVIL_ATTRIBUTES}}),
    "nq_open": Features({"question": _STR, "answer": Sequence(_STR)}),
    "triviaqa": Features(
        {
            "question": _STR,
            "question_id": _STR,
            "question_source": _STR,
            "entity_pages": Sequence(
                {"doc_source": _STR, "filename": _STR, "title": _STR, "wiki_context": _STR}
            ),
            "search_results": Sequence(
                {
                    "description": _STR,
                    "filename": _STR,
                    "rank": Value("int32"),
                    "title": _STR,
                    "url": _STR,
                    "search_context": _STR,
                }
            ),
            "answer": {
                "aliases": Sequence(_STR),
                "normalized_aliases": Sequence(_STR),
                "matched_wiki_entity_name": _STR,
                "normalized_matched_wiki_entity_name": _STR,
                "normalized_value": _STR,
                "type": _STR,
                "value": _STR,
            },
        }
    ),
    "hotpotqa": Features(
        {
            "id": _STR,
            "question": _STR,
            "answer": _STR,
            "type": _STR,
            "level": _STR,
            "supporting_facts": Sequence({"title": _STR, "sent_id": Value("int32")}),
            "context": Sequence({"title": _STR, "sentences": Sequence(_STR)}),
        }
    ),
    "msmarco": Features(
        {
            "answers": Sequence(_STR),
            "passages": Sequence({"is_selected": Value("int32"), "passage_text": _STR, "url": _STR}),
            "query": _STR,
            "query_id": Value("int32"),
            "query_type": _STR,
            "wellFormedAnswers": Sequence(_STR),
        }
    ),
}

# Columns some local sources add on top of the hub schema (kept because they carry information
# the hub copy lacks; documented in docs/DATA.md).
EXTRA_FEATURES: dict[str, dict[str, Any]] = {
    "civil_comments": {"toxicity_annotator_count": Value("int32")},
}

# --------------------------------------------------------------------------------------------------
# Dataset specs
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RawFile:
    """One original file that provides a split: ``filename`` under ``<data_dir>/<name>/``."""

    filename: str
    parser: str  # key of _PARSERS
    origin: str  # where the file comes from (shown in missing-file errors)
    note: str = ""  # caveat logged when the file is used (e.g. "train-derived")


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    hub_path: str
    hub_config: str | None
    hub_splits: tuple[str, ...]
    eval_split: str
    # required fields: (path, kind) with kind in {"text", "list", "number", "present"}
    required: tuple[tuple[str, str], ...]
    local_files: dict[str, tuple[RawFile, ...]] = field(default_factory=dict)
    local_only_note: str = ""  # shown when no local file can provide a split
    unusable_files: tuple[str, ...] = ()  # raw files in the folder that no split can use

    def raw_filenames(self) -> set[str]:
        return {r.filename for files in self.local_files.values() for r in files} | set(self.unusable_files)

    @property
    def features(self) -> Features:
        return HUB_FEATURES[self.name]


_JIGSAW = "Kaggle 'Jigsaw Unintended Bias in Toxicity Classification' data"
_NQ = "github.com/google-research-datasets/natural-questions, nq_open/"
_ANSERINI = "github.com/castorini/anserini-tools, topics/ (DPR's question/answer lists)"

SPECS: dict[str, DatasetSpec] = {
    "goemotions": DatasetSpec(
        name="goemotions",
        hub_path="google-research-datasets/go_emotions",
        hub_config="simplified",
        hub_splits=("train", "validation", "test"),
        eval_split="test",
        required=(("text", "text"), ("labels", "list")),
        local_files={
            "train": (RawFile("train.tsv", "goemotions_tsv", "google-research goemotions/data/train.tsv"),),
            "validation": (RawFile("dev.tsv", "goemotions_tsv", "google-research goemotions/data/dev.tsv"),),
            "test": (RawFile("test.tsv", "goemotions_tsv", "google-research goemotions/data/test.tsv"),),
        },
    ),
    "civil_comments": DatasetSpec(
        name="civil_comments",
        hub_path="google/civil_comments",
        hub_config=None,
        hub_splits=("train", "validation", "test"),
        eval_split="test",
        required=(("text", "text"), ("toxicity", "number")),
        local_files={
            "train": (
                RawFile("train.csv", "jigsaw_csv", f"{_JIGSAW}, train.csv"),
                RawFile(
                    "train_sample.csv",
                    "jigsaw_csv",
                    f"the first 4,960 rows of the {_JIGSAW} train.csv",
                    note="train_sample.csv is the head of the Jigsaw train.csv, not a random sample",
                ),
            ),
            "validation": (RawFile("test_public_expanded.csv", "jigsaw_csv", f"{_JIGSAW}, test_public_expanded.csv"),),
            "test": (RawFile("test_private_expanded.csv", "jigsaw_csv", f"{_JIGSAW}, test_private_expanded.csv"),),
        },
    ),
    "nq_open": DatasetSpec(
        name="nq_open",
        hub_path="google-research-datasets/nq_open",
        hub_config=None,
        hub_splits=("train", "validation"),
        eval_split="validation",
        required=(("question", "text"), ("answer", "list")),
        local_files={
            "train": (RawFile("NQ-open.train.jsonl", "nq_jsonl", _NQ + "NQ-open.train.jsonl"),),
            "validation": (RawFile("NQ-open.dev.jsonl", "nq_jsonl", _NQ + "NQ-open.dev.jsonl"),),
            "efficientqa_validation": (
                RawFile("NQ-open.efficientqa.dev.1.1.jsonl", "nq_jsonl", _NQ + "NQ-open.efficientqa.dev.1.1.jsonl"),
            ),
            "efficientqa_test": (
                RawFile("NQ-open.efficientqa.test.1.1.jsonl", "nq_jsonl", _NQ + "NQ-open.efficientqa.test.1.1.jsonl"),
            ),
            "train_sample": (
                RawFile(
                    "topics.dpr.nq.dev.txt",
                    "dpr_tsv_nq",
                    _ANSERINI + " topics.dpr.nq.dev.txt = DPR nq-dev, held out of NQ-Open train",
                    note="train_sample is DPR's nq-dev (taken from NQ-Open train; answers keep DPR tokenisation)",
                ),
            ),
        },
    ),
    "triviaqa": DatasetSpec(
        name="triviaqa",
        hub_path="mandarjoshi/trivia_qa",
        hub_config="rc.nocontext",
        hub_splits=("train", "validation", "test"),
        eval_split="validation",
        required=(("question", "text"), ("answer.aliases", "list")),
        local_files={
            "validation": (
                RawFile(
                    "topics.dpr.trivia.dev.txt",
                    "dpr_tsv_trivia",
                    _ANSERINI + " topics.dpr.trivia.dev.txt = DPR trivia-dev, held out of TriviaQA train",
                    note=(
                        "local TriviaQA 'validation' is DPR's trivia-dev, taken from TriviaQA *train*; "
                        "it is not the hub's rc.nocontext validation set"
                    ),
                ),
            ),
            "test": (
                RawFile(
                    "topics.dpr.trivia.test.txt",
                    "dpr_tsv_trivia",
                    _ANSERINI + " topics.dpr.trivia.test.txt = the TriviaQA unfiltered web dev set",
                ),
            ),
        },
    ),
    "hotpotqa": DatasetSpec(
        name="hotpotqa",
        hub_path="hotpotqa/hotpot_qa",
        hub_config="distractor",
        hub_splits=("train", "validation"),
        eval_split="validation",
        required=(("question", "text"), ("answer", "text")),
        local_files={
            "train": (
                RawFile("hotpot_train_v1.1.json", "hotpot_json", "hotpotqa.github.io, hotpot_train_v1.1.json"),
                RawFile(
                    "r1searcher_stage_2.jsonl",
                    "hotpot_json",
                    "github.com/RUCAIBox/R1-Searcher, data/training_set/stage_2.jsonl",
                    note="r1searcher_stage_2.jsonl mixes HotpotQA and 2WikiMultihopQA train questions",
                ),
            ),
            "validation": (
                RawFile(
                    "hotpot_dev_distractor_v1.json", "hotpot_json", "hotpotqa.github.io, hotpot_dev_distractor_v1.json"
                ),
                RawFile(
                    "hotpot_dev_v1_simplified.json",
                    "hotpot_json",
                    "github.com/ysymyth/ReAct, data/hotpot_dev_v1_simplified.json",
                    note="ReAct's simplified dev file: question/answer/type only (ids synthesized, level None)",
                ),
            ),
        },
    ),
    "msmarco": DatasetSpec(
        name="msmarco",
        hub_path="microsoft/ms_marco",
        hub_config="v2.1",
        hub_splits=("train", "validation", "test"),
        eval_split="validation",
        required=(("query", "text"), ("answers", "present")),
        local_files={},
        unusable_files=("dev_as_references.json",),
        local_only_note=(
            "MS MARCO has no usable raw file in the local mirror: msmarco/dev_as_references.json holds "
            "answers and query ids only, with no query text, so it cannot be used for QA. Read MS MARCO "
            "from the hub (unset SEMCAL_DATA_DIR, or pass data_dir='hub' / --metadata "
            "'{\"data_dir\": \"hub\"}'), or supply the split yourself in the hub schema"
        ),
    ),
}

ALIASES = {
    "go_emotions": "goemotions",
    "civilcomments": "civil_comments",
    "civil": "civil_comments",
    "nq": "nq_open",
    "nqopen": "nq_open",
    "nq-open": "nq_open",
    "trivia_qa": "triviaqa",
    "hotpot_qa": "hotpotqa",
    "ms_marco": "msmarco",
}

HUB_SCHEMA_SUFFIXES = (".jsonl", ".json", ".parquet")


def known_datasets() -> list[str]:
    """Canonical dataset names accepted by :func:`load`."""
    return sorted(SPECS)


def get_spec(name: str) -> DatasetSpec:
    """The :class:`DatasetSpec` of ``name`` (canonical name or alias); ValueError lists known names."""
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if key not in SPECS:
        raise ValueError(
            f"Unknown dataset {name!r}. Known datasets: {', '.join(known_datasets())} "
            f"(aliases: {', '.join(sorted(ALIASES))})."
        )
    return SPECS[key]


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


class MissingSplitFileError(FileNotFoundError):
    """A requested split has no file under the local data dir."""


def _split_hint(spec: DatasetSpec, available: Iterable[str]) -> str:
    avail = sorted(available)
    alt = next((s for s in ("validation", "train") if s in avail), avail[0] if avail else None)
    choose = (
        f"Choose another split, e.g. load({spec.name!r}, split={alt!r}) or on the lm-eval command line "
        f"--metadata '{{\"split\": \"{alt}\"}}'. "
        if alt
        else ""
    )
    return (
        f"{choose}Splits available under this data dir: {', '.join(avail) if avail else 'none'}. "
        f"To read the hub ({spec.hub_path}) instead, unset {ENV_VAR} or pass data_dir='hub'."
    )


# --------------------------------------------------------------------------------------------------
# Normalisation helpers
# --------------------------------------------------------------------------------------------------

_TRIVIA_PUNCT = set(string.punctuation) | {"‘", "’", "´", "`"}
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_triviaqa_answer(s: str) -> str:
    """TriviaQA's answer normalisation (Joshi et al. 2017 evaluation script), as used for the hub's
    ``normalized_aliases``: underscores → spaces, lowercase, punctuation → spaces, drop the
    articles a/an/the, collapse whitespace.

    >>> normalize_triviaqa_answer("Scorpio (disambiguation)")
    'scorpio disambiguation'
    >>> normalize_triviaqa_answer("The_Beatles!")
    'beatles'
    """
    s = s.replace("_", " ").lower()
    s = "".join(" " if ch in _TRIVIA_PUNCT else ch for ch in s)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _dedupe(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for it in items:
        seen.setdefault(it, None)
    return list(seen)


def _is_missing_scalar(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _to_float(v: Any) -> float | None:
    if _is_missing_scalar(v):
        return None
    if isinstance(v, str):
        v = v.strip()
        if not v:
            return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _to_int(v: Any) -> int | None:
    f = _to_float(v)
    if f is None or not f.is_integer():
        return None
    return int(f)


# --------------------------------------------------------------------------------------------------
# Row completion: partial hub-schema dict -> full hub-schema dict (documented defaults)
# --------------------------------------------------------------------------------------------------


def _complete_goemotions(row: dict, idx: int, stem: str) -> dict:
    labels = row.get("labels")
    if isinstance(labels, (list, tuple)):
        ok = all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < len(GOEMOTIONS_LABELS) for x in labels)
        labels = list(labels) if ok else None  # out-of-range ids are invalid -> skipped and counted
    else:
        labels = None
    rid = row.get("id")
    return {"text": row.get("text"), "labels": labels, "id": str(rid) if rid not in (None, "") else f"{stem}-{idx:06d}"}


def _complete_civil(row: dict, idx: int, stem: str) -> dict:
    out: dict[str, Any] = {"text": row.get("text")}
    for a in CIVIL_ATTRIBUTES:
        out[a] = _to_float(row.get(a))  # unknown sub-attributes stay None (never invented as 0.0)
    if "toxicity_annotator_count" in row:
        out["toxicity_annotator_count"] = _to_int(row.get("toxicity_annotator_count"))
    return out


def _complete_nq(row: dict, idx: int, stem: str) -> dict:
    ans = row.get("answer")
    if isinstance(ans, str):
        ans = [ans]
    return {"question": row.get("question"), "answer": list(ans) if isinstance(ans, (list, tuple)) else None}


_EMPTY_ENTITY_PAGES = {"doc_source": [], "filename": [], "title": [], "wiki_context": []}
_EMPTY_SEARCH_RESULTS = {"description": [], "filename": [], "rank": [], "title": [], "url": [], "search_context": []}


def _complete_triviaqa(row: dict, idx: int, stem: str) -> dict:
    ans = row.get("answer")
    if isinstance(ans, (list, tuple)):  # a bare alias list (DPR format)
        ans = {"aliases": list(ans)}
    elif isinstance(ans, str):
        ans = {"aliases": [ans], "value": ans}
    elif not isinstance(ans, dict):
        ans = {}
    aliases = ans.get("aliases")
    aliases = [a for a in aliases if isinstance(a, str)] if isinstance(aliases, (list, tuple)) else []
    # DPR alias lists are unordered and do not mark TriviaQA's canonical answer, so value stays None
    # rather than an arbitrary alias (grade against aliases / normalized_aliases).
    value = ans.get("value") if isinstance(ans.get("value"), str) else None
    if value is not None and not aliases:
        aliases = [value]
    norm_aliases = ans.get("normalized_aliases")
    if not isinstance(norm_aliases, (list, tuple)):
        norm_aliases = _dedupe(normalize_triviaqa_answer(a) for a in aliases)
    norm_value = ans.get("normalized_value")
    if norm_value is None and value is not None:
        norm_value = normalize_triviaqa_answer(value)
    qid = row.get("question_id")
    return {
        "question": row.get("question"),
        "question_id": str(qid) if qid not in (None, "") else f"{stem}-{idx:06d}",
        "question_source": row.get("question_source"),
        "entity_pages": row.get("entity_pages") or dict(_EMPTY_ENTITY_PAGES),
        "search_results": row.get("search_results") or dict(_EMPTY_SEARCH_RESULTS),
        "answer": {
            "aliases": aliases or None,
            "normalized_aliases": list(norm_aliases),
            "matched_wiki_entity_name": ans.get("matched_wiki_entity_name"),
            "normalized_matched_wiki_entity_name": ans.get("normalized_matched_wiki_entity_name"),
            "normalized_value": norm_value,
            "type": ans.get("type"),
            "value": value,
        },
    }


def _struct_of_lists(value: Any, keys: tuple[str, ...]) -> dict:
    """Hub ``Sequence({...})`` values are dicts of lists; the official HotpotQA files use lists of
    [title, x] pairs. Accept either."""
    if isinstance(value, dict):
        return {k: list(value.get(k) or []) for k in keys}
    out: dict[str, list] = {k: [] for k in keys}
    for item in value or []:
        if isinstance(item, dict):
            for k in keys:
                out[k].append(item.get(k))
        else:
            for k, v in zip(keys, item):
                out[k].append(v)
    return out


def _complete_hotpot(row: dict, idx: int, stem: str) -> dict:
    rid = row.get("id", row.get("_id"))
    if rid in (None, "") and row.get("idx") is not None:
        rid = f"{stem}-{row['idx']}"  # R1-Searcher rows carry their own 1-based idx
    ans = row.get("answer")
    return {
        "id": str(rid) if rid not in (None, "") else f"{stem}-{idx:06d}",
        "question": row.get("question"),
        "answer": ans if isinstance(ans, str) else None,
        "type": row.get("type"),
        "level": row.get("level"),
        "supporting_facts": _struct_of_lists(row.get("supporting_facts"), ("title", "sent_id")),
        "context": _struct_of_lists(row.get("context"), ("title", "sentences")),
    }


def _complete_msmarco(row: dict, idx: int, stem: str) -> dict:
    answers = row.get("answers")
    if isinstance(answers, str):
        answers = [answers]
    qid = _to_int(row.get("query_id"))
    return {
        "answers": list(answers) if isinstance(answers, (list, tuple)) else None,
        "passages": _struct_of_lists(row.get("passages"), ("is_selected", "passage_text", "url")),
        "query": row.get("query"),
        "query_id": qid if qid is not None else idx,
        "query_type": row.get("query_type"),
        "wellFormedAnswers": list(row.get("wellFormedAnswers") or []),
    }


_COMPLETERS: dict[str, Callable[[dict, int, str], dict]] = {
    "goemotions": _complete_goemotions,
    "civil_comments": _complete_civil,
    "nq_open": _complete_nq,
    "triviaqa": _complete_triviaqa,
    "hotpotqa": _complete_hotpot,
    "msmarco": _complete_msmarco,
}

# --------------------------------------------------------------------------------------------------
# Raw-file parsers: path -> iterator of partial hub-schema dicts
# --------------------------------------------------------------------------------------------------


def _parse_goemotions_tsv(path: Path) -> Iterator[dict]:
    # Split on tabs only: texts contain literal double quotes that a quoting CSV reader would eat.
    with path.open(encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n").rstrip("\r")
            if not line:
                continue
            parts = line.split("\t")
            text = parts[0] if parts else None
            labels: list[int] | None
            try:
                labels = [int(x) for x in parts[1].split(",")] if len(parts) > 1 and parts[1].strip() else None
            except ValueError:
                labels = None
            yield {"text": text, "labels": labels, "id": parts[2] if len(parts) > 2 else None}


def _parse_jigsaw_csv(path: Path) -> Iterator[dict]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        fields = set(reader.fieldnames or ())
        tox_col = "target" if "target" in fields else "toxicity"
        if tox_col not in fields or "comment_text" not in fields:
            raise ValueError(
                f"{path}: not a Jigsaw Civil Comments CSV (needs columns comment_text and target or "
                f"toxicity; found {sorted(fields)})"
            )
        for rec in reader:
            row = {a: rec.get(a) for a in CIVIL_ATTRIBUTES[1:]}
            row["text"] = rec.get("comment_text")
            row["toxicity"] = rec.get(tox_col)
            row["toxicity_annotator_count"] = rec.get("toxicity_annotator_count")
            yield row


def _iter_json_records(path: Path) -> Iterator[dict]:
    """JSON lines, or one JSON array of objects."""
    with path.open(encoding="utf-8") as f:
        head = f.read(1)
        while head and head.isspace():
            head = f.read(1)
        f.seek(0)
        if head == "[":
            data = json.load(f)
            for rec in data:
                yield rec if isinstance(rec, dict) else {}
            return
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: invalid JSON line ({e})") from e
            yield rec if isinstance(rec, dict) else {}


def _parse_dpr_tsv(path: Path, answer_key: str) -> Iterator[dict]:
    # DPR/Anserini format: question <TAB> Python-literal list; some fields are CSV-quoted.
    with path.open(encoding="utf-8", newline="") as f:
        for rec in csv.reader(f, delimiter="\t"):
            if not rec:
                continue
            answers: Any = None
            if len(rec) >= 2:
                try:
                    answers = ast.literal_eval(rec[1])
                except (ValueError, SyntaxError):
                    answers = None
            if not (isinstance(answers, list) and all(isinstance(a, str) for a in answers)):
                answers = None
            yield {"question": rec[0], answer_key: answers}


def _read_parquet(path: Path) -> Iterator[dict]:
    import pyarrow.parquet as pq

    yield from pq.read_table(path).to_pylist()


_PARSERS: dict[str, Callable[[Path], Iterator[dict]]] = {
    "goemotions_tsv": _parse_goemotions_tsv,
    "jigsaw_csv": _parse_jigsaw_csv,
    "nq_jsonl": _iter_json_records,
    "dpr_tsv_nq": lambda p: _parse_dpr_tsv(p, "answer"),
    "dpr_tsv_trivia": lambda p: _parse_dpr_tsv(p, "answer"),
    "hotpot_json": _iter_json_records,
}


def _read_hub_schema_file(path: Path) -> Iterator[dict]:
    if path.suffix == ".parquet":
        return _read_parquet(path)
    return _iter_json_records(path)


# --------------------------------------------------------------------------------------------------
# Required-field check (same code for hub and local data, on Arrow columns)
# --------------------------------------------------------------------------------------------------


def _arrow_column(table, path: str):
    import pyarrow.compute as pc

    top, *rest = path.split(".")
    col = table.column(top)
    for part in rest:
        col = pc.struct_field(col, part)
    return col


def _missing_mask(col, kind: str):
    import pyarrow as pa
    import pyarrow.compute as pc

    missing = pc.is_null(col)
    if kind == "text":
        blank = pc.equal(pc.utf8_trim_whitespace(col), "")
        missing = pc.or_(missing, pc.fill_null(blank, True))
    elif kind == "list":
        empty = pc.equal(pc.list_value_length(col), 0)
        missing = pc.or_(missing, pc.fill_null(empty, True))
    elif kind == "number":
        if pa.types.is_floating(col.type):
            missing = pc.or_(missing, pc.fill_null(pc.is_nan(col), True))
    return missing


def drop_missing(ds: Dataset, required: Iterable[tuple[str, str]], *, what: str = "") -> tuple[Dataset, Counter]:
    """Remove rows whose required fields are missing; return ``(kept, Counter(reason -> rows))``.

    ``required`` is a list of ``(field path, kind)``: kind ``text`` (non-null, not blank), ``list``
    (non-null, non-empty), ``number`` (non-null, not NaN) or ``present`` (non-null). A row missing
    several fields is counted once, under its first missing field.
    """
    import numpy as np
    import pyarrow.compute as pc

    required = list(required)
    reasons: Counter = Counter()
    if len(ds) == 0 or not required:
        return ds, reasons
    cols = sorted({p.split(".")[0] for p, _ in required})
    table = ds.select_columns(cols).with_format("arrow")[:]
    already = np.zeros(len(ds), dtype=bool)
    for path, kind in required:
        miss = _missing_mask(_arrow_column(table, path), kind)
        miss_np = np.asarray(pc.fill_null(miss, True).to_numpy(zero_copy_only=False), dtype=bool)
        new = miss_np & ~already
        if new.any():
            reasons[f"missing {path}"] += int(new.sum())
        already |= miss_np
    if already.any():
        ds = ds.select(np.flatnonzero(~already).tolist())
        logger.warning(
            "%s: skipped %d row(s) with missing required fields (%s)",
            what or "dataset",
            int(already.sum()),
            ", ".join(f"{k}: {v}" for k, v in sorted(reasons.items())),
        )
    return ds, reasons


def _attach(ds: Dataset, skipped: Counter, source: str) -> Dataset:
    ds.semcal_skipped = int(sum(skipped.values()))
    ds.semcal_skip_reasons = dict(skipped)
    ds.semcal_source = source
    return ds


def skipped_rows(ds: Dataset | DatasetDict) -> int | dict[str, int]:
    """Rows skipped for missing required fields when ``ds`` was loaded (per split for a DatasetDict)."""
    if isinstance(ds, DatasetDict):
        return {k: skipped_rows(v) for k, v in ds.items()}  # type: ignore[misc]
    return int(getattr(ds, "semcal_skipped", 0))


# --------------------------------------------------------------------------------------------------
# Local loading
# --------------------------------------------------------------------------------------------------


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path | None:
    """The local data root, or None for the hub: ``data_dir`` if given (``"hub"`` → None), else
    ``$SEMCAL_DATA_DIR`` (empty or ``hub`` → None). A root that does not exist is an error."""
    if data_dir is None:
        data_dir = os.environ.get(ENV_VAR) or None
        origin = f"${ENV_VAR}"
    else:
        origin = "data_dir"
    if data_dir is None or str(data_dir).strip() in ("", HUB):
        return None
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(
            f"{origin}={str(data_dir)!r} is not a directory. Point it at the local data mirror "
            f"(one folder per dataset, e.g. <dir>/goemotions/train.tsv), or unset it to read the hub."
        )
    return root


_SPLIT_NAME = re.compile(r"^\w+$")


def _hub_schema_file(spec: DatasetSpec, folder: Path, split: str) -> Path | None:
    if not _SPLIT_NAME.match(split):
        return None
    raw = spec.raw_filenames()
    for suffix in HUB_SCHEMA_SUFFIXES:
        p = folder / f"{split}{suffix}"
        if p.name not in raw and p.is_file():
            return p
    return None


def _local_source(spec: DatasetSpec, folder: Path, split: str) -> tuple[Path, str, str] | None:
    """(path, parser key or 'hub_schema', note) of the file providing ``split``, or None."""
    p = _hub_schema_file(spec, folder, split)
    if p is not None:
        return p, "hub_schema", ""
    for raw in spec.local_files.get(split, ()):
        p = folder / raw.filename
        if p.is_file():
            return p, raw.parser, raw.note
    return None


def local_splits(name: str, data_dir: str | os.PathLike | None = None) -> list[str]:
    """Splits of ``name`` that have a file under the local data dir (hub-schema or raw)."""
    spec = get_spec(name)
    root = resolve_data_dir(data_dir)
    if root is None:
        raise ValueError(f"local_splits({name!r}) needs a data dir (data_dir= or ${ENV_VAR})")
    folder = root / spec.name
    candidates = set(spec.local_files) | set(spec.hub_splits)
    if folder.is_dir():
        candidates |= {p.stem for p in folder.iterdir() if p.suffix in HUB_SCHEMA_SUFFIXES}
    return sorted(s for s in candidates if folder.is_dir() and _local_source(spec, folder, s) is not None)


def _missing_split_error(spec: DatasetSpec, folder: Path, split: str) -> MissingSplitFileError:
    avail = local_splits(spec.name, folder.parent) if folder.parent.is_dir() else []
    raws = spec.local_files.get(split, ())
    schema_files = " / ".join(f"{split}{s}" for s in HUB_SCHEMA_SUFFIXES)
    if raws:
        wanted = " or ".join(str(folder / r.filename) for r in raws)
        origin = "; ".join(f"{r.filename}: {r.origin}" for r in raws)
        msg = (
            f"{spec.name} split {split!r} needs the file {wanted}, which is missing "
            f"(where it comes from: {origin}). Place it there, or a file already in the hub schema "
            f"named {folder / schema_files}. "
        )
    else:
        known = sorted(set(spec.local_files) | set(spec.hub_splits))
        if spec.local_only_note:
            msg = f"{spec.local_only_note}: {folder}/{schema_files} (fields query, answers; see docs/DATA.md). "
        elif split not in known:
            msg = f"{spec.name} has no split {split!r} (known splits: {', '.join(known)}). "
        else:
            msg = (
                f"{spec.name} split {split!r} has no known raw file; supply it in the hub schema as "
                f"{folder}/{schema_files}. "
            )
    return MissingSplitFileError(msg + _split_hint(spec, avail))


def _load_local_split(spec: DatasetSpec, root: Path, split: str) -> Dataset:
    folder = root / spec.name
    src = _local_source(spec, folder, split)
    if src is None:
        raise _missing_split_error(spec, folder, split)
    path, parser, note = src
    if note:
        logger.info("%s[%s] from %s: %s", spec.name, split, path, note)
    if spec.name == "goemotions":
        _check_goemotions_labels(folder)
    records = _read_hub_schema_file(path) if parser == "hub_schema" else _PARSERS[parser](path)
    complete = _COMPLETERS[spec.name]
    stem = path.stem.replace(".", "-").replace("_", "-")
    rows = [complete(rec, i, stem) for i, rec in enumerate(records)]
    feats = dict(spec.features)
    for extra, ftype in EXTRA_FEATURES.get(spec.name, {}).items():
        if any(extra in r for r in rows):
            feats[extra] = ftype
            for r in rows:
                r.setdefault(extra, None)
    features = Features(feats)
    columns = {k: [r.get(k) for r in rows] for k in features}
    ds = Dataset.from_dict(columns, features=features, split=datasets.NamedSplit(split))
    ds, skipped = drop_missing(ds, spec.required, what=f"{spec.name}[{split}] from {path}")
    if len(ds) == 0:
        raise ValueError(f"{spec.name}[{split}] from {path}: no usable rows ({dict(skipped)} skipped)")
    return _attach(ds, skipped, str(path))


def _check_goemotions_labels(folder: Path) -> None:
    emo = folder / "emotions.txt"
    if emo.is_file():
        names = tuple(line.strip() for line in emo.read_text(encoding="utf-8").splitlines() if line.strip())
        if names != GOEMOTIONS_LABELS:
            raise ValueError(
                f"{emo} lists labels {names}, which differ from the 28 GoEmotions labels in hub order "
                f"{GOEMOTIONS_LABELS}; the label ids in the .tsv files would be misread."
            )


# --------------------------------------------------------------------------------------------------
# Hub loading
# --------------------------------------------------------------------------------------------------


def _load_hub(spec: DatasetSpec, split: str | None) -> Dataset | DatasetDict:
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
            out[name] = _attach(kept, skipped, src)
        return DatasetDict(out)
    kept, skipped = drop_missing(obj, spec.required, what=f"{spec.name}[{split}] from {src}")
    if len(kept) == 0:
        raise ValueError(
            f"{spec.name}[{split}] from {src}: every row lacks a required field ({dict(skipped)}); "
            f"this split has no usable labels (e.g. hidden test answers). Use split="
            f"{spec.eval_split!r}."
        )
    return _attach(kept, skipped, src)


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


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
        return _load_hub(spec, split)
    if split is not None:
        return _load_local_split(spec, root, split)
    avail = local_splits(spec.name, root)
    if not avail:
        folder = root / spec.name
        raise _missing_split_error(spec, folder, spec.eval_split)
    return DatasetDict({s: _load_local_split(spec, root, s) for s in avail})


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

    * ``"eval"``: split ``split`` (default: the dataset's standard evaluation split),
    * ``"train"`` / ``"validation"``: splits ``train_split`` / ``validation_split`` (default
      ``train`` / ``validation``) when the source has them, for few-shot examples and recalibration
      fits. Their absence is logged, not an error; an absent eval split is an error.

    Task YAMLs use ``test_split: eval`` (and e.g. ``fewshot_split: train``). ``name`` is
    positional-only so that a metadata key ``name`` cannot collide with it.
    """
    spec = get_spec(name)
    eval_split = split or spec.eval_split
    want = {"train": train_split or "train", "validation": validation_split or "validation"}
    root = resolve_data_dir(data_dir)
    out: dict[str, Dataset] = {}
    if root is None:
        if eval_split not in spec.hub_splits:
            _load_hub(spec, eval_split)  # raises the explanatory unknown-split error
        # The hub builder downloads and prepares every split anyway, so load them together once.
        full = _load_hub(spec, None)
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
        out[EVAL_KEY] = _load_local_split(spec, root, eval_split)
        avail = set(local_splits(spec.name, root))
        for key, s in want.items():
            if s == eval_split:
                out[key] = out[EVAL_KEY]
            elif s in avail:
                out[key] = _load_local_split(spec, root, s)
    missing = [f"{k} (split {want[k]!r})" for k in want if k not in out]
    if missing:
        logger.info("%s: no %s in this source; few-shot/fit splits limited", spec.name, ", ".join(missing))
    if _ignored:
        logger.debug("lm_eval_dataset(%s): ignoring metadata keys %s", spec.name, sorted(_ignored))
    return DatasetDict(out)


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


# --------------------------------------------------------------------------------------------------
# GoEmotions helpers
# --------------------------------------------------------------------------------------------------


def goemotions_label_names() -> list[str]:
    """The 28 GoEmotions labels in id order (27 emotions, then ``neutral`` = 27)."""
    return list(GOEMOTIONS_LABELS)


def single_label(ds: Dataset) -> Dataset:
    """GoEmotions rows with exactly one gold label (the usual single-label evaluation subset)."""
    return ds.filter(lambda labels: [len(x) == 1 for x in labels], input_columns="labels", batched=True)


def multi_label(ds: Dataset) -> Dataset:
    """GoEmotions rows with two or more gold labels."""
    return ds.filter(lambda labels: [len(x) > 1 for x in labels], input_columns="labels", batched=True)


def goemotions_label_counts(ds: Dataset) -> list[int]:
    """Occurrences of each of the 28 labels over ``ds`` (a multi-label row counts once per label);
    divide by the sum for a class prior."""
    import numpy as np

    flat = [x for labels in ds["labels"] for x in labels]
    return np.bincount(np.asarray(flat, dtype=np.int64), minlength=len(GOEMOTIONS_LABELS)).tolist()


# --------------------------------------------------------------------------------------------------
# Civil Comments helpers
# --------------------------------------------------------------------------------------------------

CIVIL_SUBSETS = ("ambiguous", "clear", "full")


def validate_band(band: Any) -> tuple[float, float]:
    """Check an annotator-agreement band ``(lo, hi)``: two finite numbers with 0 ≤ lo < hi ≤ 1."""
    try:
        lo, hi = band
        lo, hi = float(lo), float(hi)
    except (TypeError, ValueError) as e:
        raise ValueError(f"band must be a pair (lo, hi) of numbers with 0 <= lo < hi <= 1, got {band!r}") from e
    if isinstance(band, (str, bytes)) or not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"band must be a pair (lo, hi) of finite numbers, got {band!r}")
    if not (0.0 <= lo < hi <= 1.0):
        raise ValueError(f"band must satisfy 0 <= lo < hi <= 1, got lo={lo}, hi={hi}")
    return lo, hi


def _validate_min_annotators(min_annotators: Any) -> int | None:
    if min_annotators is None:
        return None
    if isinstance(min_annotators, bool) or not isinstance(min_annotators, int) or min_annotators < 1:
        raise ValueError(f"min_annotators must be a positive integer or None, got {min_annotators!r}")
    return min_annotators


def civil_comments_subset(
    ds: Dataset,
    subset: str = "ambiguous",
    band: tuple[float, float] = (0.2, 0.8),
    min_annotators: int | None = None,
) -> Dataset:
    """Civil Comments rows by annotator agreement, with t = ``toxicity`` (fraction of raters who
    called the comment toxic):

    * ``ambiguous``: lo < t < hi (open band),
    * ``clear``: t ≤ lo or t ≥ hi (the complement: ambiguous ∪ clear = full, disjoint),
    * ``full``: every row.

    The band is open because the boundary values are the commonest exact fractions of small rater
    pools (1/5 = 0.2, 4/5 = 0.8) and represent a clear majority; the open band also reproduces the
    usual "0.2 < target < 0.8" definition. Comparisons are made in float32, the storage type of
    ``toxicity``, so that a stored 0.2 equals the bound 0.2. ``min_annotators`` additionally keeps
    rows with ``toxicity_annotator_count >= min_annotators`` (a column of the raw Jigsaw files; the
    hub copy lacks it).
    """
    import numpy as np

    if subset not in CIVIL_SUBSETS:
        raise ValueError(f"subset must be one of {CIVIL_SUBSETS}, got {subset!r}")
    lo, hi = validate_band(band)
    min_ann = _validate_min_annotators(min_annotators)
    if "toxicity" not in ds.column_names:
        raise ValueError(f"civil_comments_subset needs a 'toxicity' column; got {ds.column_names}")
    t = np.asarray(ds["toxicity"], dtype=np.float64)
    if np.isnan(t).any():
        raise ValueError("toxicity contains missing values; load the data through semcal_eval.data.load")
    t32 = t.astype(np.float32)
    lo32, hi32 = np.float32(lo), np.float32(hi)
    inside = (t32 > lo32) & (t32 < hi32)
    keep = inside if subset == "ambiguous" else ~inside if subset == "clear" else np.ones_like(inside)
    if min_ann is not None:
        if "toxicity_annotator_count" not in ds.column_names:
            raise ValueError(
                "min_annotators needs the column toxicity_annotator_count, which the hub copy "
                "google/civil_comments lacks; it comes with the raw Jigsaw CSV files (set "
                f"{ENV_VAR}), or pass min_annotators=None"
            )
        counts = np.asarray(
            [c if c is not None else -1 for c in ds["toxicity_annotator_count"]], dtype=np.int64
        )
        keep &= counts >= min_ann
    return ds.select(np.flatnonzero(keep).tolist())


__all__ = [
    "ALIASES",
    "CIVIL_ATTRIBUTES",
    "ENV_VAR",
    "EVAL_KEY",
    "EXTRA_FEATURES",
    "GOEMOTIONS_LABELS",
    "HUB_FEATURES",
    "MissingSplitFileError",
    "SPECS",
    "civil_comments_subset",
    "drop_missing",
    "get_spec",
    "goemotions_label_counts",
    "goemotions_label_names",
    "known_datasets",
    "lm_eval_dataset",
    "load",
    "load_civil_comments",
    "load_goemotions",
    "load_hotpotqa",
    "load_msmarco",
    "load_nq_open",
    "load_triviaqa",
    "local_splits",
    "make_lm_eval_loader",
    "multi_label",
    "normalize_triviaqa_answer",
    "resolve_data_dir",
    "single_label",
    "skipped_rows",
    "validate_band",
]
