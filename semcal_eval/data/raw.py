"""Raw-file parsers: ``path -> iterator of partial hub-schema dicts``.

A parser only renames fields to their hub names; the row completers (:mod:`semcal_eval.data.rows`) fill in
the rest. Which parser reads which file is declared on each dataset's spec (:mod:`semcal_eval.data.specs`).
"""

from __future__ import annotations

import ast
import csv
import json
import sys
from pathlib import Path
from typing import Any, Iterator

from semcal_eval.data.civil_comments import CIVIL_ATTRIBUTES


def parse_goemotions_tsv(path: Path) -> Iterator[dict]:
    """GoEmotions ``text <TAB> comma-separated label ids <TAB> id`` (no header)."""
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


def parse_jigsaw_csv(path: Path) -> Iterator[dict]:
    """Jigsaw Civil Comments CSV: ``comment_text`` → ``text``, ``target`` (or ``toxicity``) → ``toxicity``."""
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


def iter_json_records(path: Path) -> Iterator[dict]:
    """JSON lines, or one JSON array of objects (a non-object record becomes ``{}``)."""
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


def parse_dpr_tsv(path: Path) -> Iterator[dict]:
    """DPR/Anserini topics: ``question <TAB> Python-literal list of answers`` → ``{"question", "answer"}``."""
    # Some fields are CSV-quoted, hence the csv reader.
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
            yield {"question": rec[0], "answer": answers}


def parse_autorag_msmarco_parquet(path: Path) -> Iterator[dict]:
    """AutoRAG's MS MARCO QA sample (``qid``, ``query``, ``generation_gt``: list of answers, ``retrieval_gt``:
    passage ids without text) → ``{"query_id", "query", "answers"}``; passages are not in the file."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    need = {"qid", "query", "generation_gt"}
    if not need <= set(table.column_names):
        raise ValueError(f"{path}: not AutoRAG's MS MARCO QA parquet (needs columns {sorted(need)}; "
                         f"found {sorted(table.column_names)})")
    for rec in table.select(["qid", "query", "generation_gt"]).to_pylist():
        yield {"query_id": rec["qid"], "query": rec["query"], "answers": rec["generation_gt"]}


def read_hub_schema_file(path: Path) -> Iterator[dict]:
    """A file already in the hub schema: ``.parquet``, else JSON lines / a JSON array."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return iter(pq.read_table(path).to_pylist())
    return iter_json_records(path)
