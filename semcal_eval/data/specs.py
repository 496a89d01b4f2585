"""The dataset table: one :class:`DatasetSpec` row per dataset, holding everything the generic loader needs.

A row names the hub copy (path, config, splits, the hub schema as ``datasets.Features``), the required fields
whose absence skips a row, the local raw files of each split with the parser that reads them, the row
completer that maps a parsed record to the hub schema, and optional hooks (a check of the dataset's local
folder, extra columns). The loader (:mod:`semcal_eval.data.load`) only reads these rows; adding a dataset
means adding a row here, never a branch there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datasets import ClassLabel, Features, Sequence, Value

from semcal_eval.data import raw, rows
from semcal_eval.data.civil_comments import CIVIL_ATTRIBUTES
from semcal_eval.data.goemotions import GOEMOTIONS_LABELS, check_emotions_file

Parser = Callable[[Path], Iterator[dict]]  # raw file -> partial hub-schema dicts (semcal_eval.data.raw)
Completer = Callable[[dict, int, str], dict]  # (partial row, position, file stem) -> hub row (data.rows)


@dataclass(frozen=True)
class RawFile:
    """One original file that provides a split: ``filename`` under ``<data_dir>/<name>/``."""

    filename: str
    parser: Parser
    origin: str  # where the file comes from (shown in missing-file errors)
    note: str = ""  # caveat logged when the file is used (e.g. "train-derived")


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset: its hub copy, its schema, its required fields and its local raw files.

    ``required`` lists ``(field path, kind)`` pairs checked by :func:`semcal_eval.data.drop_missing`, kind in
    ``text`` / ``list`` / ``number`` / ``present``. ``extra_features`` are columns some local sources add on top
    of the hub schema (kept when a file provides them). ``check_folder`` runs on ``<data_dir>/<name>/`` before a
    local split is read.
    """

    name: str
    hub_path: str
    hub_config: str | None
    hub_splits: tuple[str, ...]
    eval_split: str
    features: Features  # the hub schema (from the dataset card's dataset_info; docs/DATA.md)
    required: tuple[tuple[str, str], ...]
    complete: Completer
    local_files: dict[str, tuple[RawFile, ...]] = field(default_factory=dict)
    extra_features: dict[str, Any] = field(default_factory=dict)
    check_folder: Callable[[Path], None] | None = None
    local_only_note: str = ""  # shown when no local file can provide a split
    unusable_files: tuple[str, ...] = ()  # raw files in the folder that no split can use
    # the split a local run evaluates by default when ``eval_split`` has no file in the mirror (MS MARCO: the
    # mirror holds a test sample, no validation questions); a hub run always evaluates ``eval_split``
    local_eval_split: str | None = None

    def raw_filenames(self) -> set[str]:
        """Every raw file name of this dataset (never mistaken for a hub-schema ``<split>.json``)."""
        return {r.filename for files in self.local_files.values() for r in files} | set(self.unusable_files)


# --------------------------------------------------------------------------------------------------
# Hub schemas (from the dataset cards' dataset_info; see docs/DATA.md)
# --------------------------------------------------------------------------------------------------

_STR = Value("string")

_TRIVIAQA_FEATURES = Features(
    {
        "question": _STR,
        "question_id": _STR,
        "question_source": _STR,
        "entity_pages": Sequence({"doc_source": _STR, "filename": _STR, "title": _STR, "wiki_context": _STR}),
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
)

_HOTPOTQA_FEATURES = Features(
    {
        "id": _STR,
        "question": _STR,
        "answer": _STR,
        "type": _STR,
        "level": _STR,
        "supporting_facts": Sequence({"title": _STR, "sent_id": Value("int32")}),
        "context": Sequence({"title": _STR, "sentences": Sequence(_STR)}),
    }
)

_MSMARCO_FEATURES = Features(
    {
        "answers": Sequence(_STR),
        "passages": Sequence({"is_selected": Value("int32"), "passage_text": _STR, "url": _STR}),
        "query": _STR,
        "query_id": Value("int32"),
        "query_type": _STR,
        "wellFormedAnswers": Sequence(_STR),
    }
)

# --------------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------------

_JIGSAW = "Kaggle 'Jigsaw Unintended Bias in Toxicity Classification' data"
_NQ = "github.com/google-research-datasets/natural-questions, nq_open/"
_ANSERINI = "github.com/castorini/anserini-tools, topics/ (DPR's question/answer lists)"
_GOEMOTIONS = "google-research goemotions/data/"

SPECS: dict[str, DatasetSpec] = {
    "goemotions": DatasetSpec(
        name="goemotions",
        hub_path="google-research-datasets/go_emotions",
        hub_config="simplified",
        hub_splits=("train", "validation", "test"),
        eval_split="test",
        features=Features({"text": _STR, "labels": Sequence(ClassLabel(names=list(GOEMOTIONS_LABELS))), "id": _STR}),
        required=(("text", "text"), ("labels", "list")),
        complete=rows.complete_goemotions,
        local_files={
            split: (RawFile(f"{stem}.tsv", raw.parse_goemotions_tsv, f"{_GOEMOTIONS}{stem}.tsv"),)
            for split, stem in (("train", "train"), ("validation", "dev"), ("test", "test"))
        },
        check_folder=check_emotions_file,  # the .tsv label ids index emotions.txt
    ),
    "civil_comments": DatasetSpec(
        name="civil_comments",
        hub_path="google/civil_comments",
        hub_config=None,
        hub_splits=("train", "validation", "test"),
        eval_split="test",
        features=Features({"text": _STR, **{a: Value("float32") for a in CIVIL_ATTRIBUTES}}),
        required=(("text", "text"), ("toxicity", "number")),
        complete=rows.complete_civil_comments,
        local_files={
            "train": (
                RawFile("train.csv", raw.parse_jigsaw_csv, f"{_JIGSAW}, train.csv"),
                RawFile(
                    "train_sample.csv",
                    raw.parse_jigsaw_csv,
                    f"the first 4,960 rows of the {_JIGSAW} train.csv",
                    note="train_sample.csv is the head of the Jigsaw train.csv, not a random sample",
                ),
            ),
            "validation": (
                RawFile("test_public_expanded.csv", raw.parse_jigsaw_csv, f"{_JIGSAW}, test_public_expanded.csv"),
            ),
            "test": (
                RawFile("test_private_expanded.csv", raw.parse_jigsaw_csv, f"{_JIGSAW}, test_private_expanded.csv"),
            ),
        },
        # The raw Jigsaw files carry the rater count, which the hub copy lacks (civil_comments_subset's
        # min_annotators reads it).
        extra_features={"toxicity_annotator_count": Value("int32")},
    ),
    "nq_open": DatasetSpec(
        name="nq_open",
        hub_path="google-research-datasets/nq_open",
        hub_config=None,
        hub_splits=("train", "validation"),
        eval_split="validation",
        features=Features({"question": _STR, "answer": Sequence(_STR)}),
        required=(("question", "text"), ("answer", "list")),
        complete=rows.complete_nq_open,
        local_files={
            "train": (RawFile("NQ-open.train.jsonl", raw.iter_json_records, _NQ + "NQ-open.train.jsonl"),),
            "validation": (RawFile("NQ-open.dev.jsonl", raw.iter_json_records, _NQ + "NQ-open.dev.jsonl"),),
            "efficientqa_validation": (
                RawFile(
                    "NQ-open.efficientqa.dev.1.1.jsonl",
                    raw.iter_json_records,
                    _NQ + "NQ-open.efficientqa.dev.1.1.jsonl",
                ),
            ),
            "efficientqa_test": (
                RawFile(
                    "NQ-open.efficientqa.test.1.1.jsonl",
                    raw.iter_json_records,
                    _NQ + "NQ-open.efficientqa.test.1.1.jsonl",
                ),
            ),
            "train_sample": (
                RawFile(
                    "topics.dpr.nq.dev.txt",
                    raw.parse_dpr_tsv,
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
        features=_TRIVIAQA_FEATURES,
        required=(("question", "text"), ("answer.aliases", "list")),
        complete=rows.complete_triviaqa,
        local_files={
            "validation": (
                RawFile(
                    "topics.dpr.trivia.dev.txt",
                    raw.parse_dpr_tsv,
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
                    raw.parse_dpr_tsv,
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
        features=_HOTPOTQA_FEATURES,
        required=(("question", "text"), ("answer", "text")),
        complete=rows.complete_hotpotqa,
        local_files={
            "train": (
                RawFile("hotpot_train_v1.1.json", raw.iter_json_records, "hotpotqa.github.io, hotpot_train_v1.1.json"),
                RawFile(
                    "r1searcher_stage_2.jsonl",
                    raw.iter_json_records,
                    "github.com/RUCAIBox/R1-Searcher, data/training_set/stage_2.jsonl",
                    note="r1searcher_stage_2.jsonl mixes HotpotQA and 2WikiMultihopQA train questions",
                ),
            ),
            "validation": (
                RawFile(
                    "hotpot_dev_distractor_v1.json",
                    raw.iter_json_records,
                    "hotpotqa.github.io, hotpot_dev_distractor_v1.json",
                ),
                RawFile(
                    "hotpot_dev_v1_simplified.json",
                    raw.iter_json_records,
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
        features=_MSMARCO_FEATURES,
        required=(("query", "text"), ("answers", "present")),
        complete=rows.complete_msmarco,
        local_files={
            "test": (
                RawFile(
                    "msmarco_v1.1_test_qa_1000.parquet",
                    raw.parse_autorag_msmarco_parquet,
                    "github.com/Marker-Inc-Korea/AutoRAG, sample_dataset/msmarco/qa.parquet at commit 1bf5973a "
                    "(1,000 questions of MS MARCO v1.1 test with their answers)",
                    note=(
                        "local MS MARCO 'test' is a 1,000-question sample of MS MARCO v1.1 test (AutoRAG's QA "
                        "sample, unanswerable questions dropped, no passages), not the hub's v2.1 validation split"
                    ),
                ),
            ),
        },
        local_eval_split="test",
        unusable_files=("dev_as_references.json",),
        local_only_note=(
            "MS MARCO's local mirror holds questions for its 'test' split only (msmarco_v1.1_test_qa_1000.parquet: "
            "1,000 questions of v1.1 test, the split a local run evaluates by default); "
            "msmarco/dev_as_references.json holds dev answers and query ids only, with no query text, so it "
            "cannot be used for QA. For this split read MS MARCO from the hub (unset SEMCAL_DATA_DIR, or pass "
            "data_dir='hub' / --metadata '{\"data_dir\": \"hub\"}'), or supply it "
            "yourself in the hub schema"
        ),
    ),
}

HUB_FEATURES: dict[str, Features] = {name: spec.features for name, spec in SPECS.items()}
EXTRA_FEATURES: dict[str, dict[str, Any]] = {
    name: spec.extra_features for name, spec in SPECS.items() if spec.extra_features
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


def known_datasets() -> list[str]:
    """Canonical dataset names accepted by :func:`semcal_eval.data.load`."""
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
