"""Row completion: a partial hub-schema dict (from a raw file) → a full hub-schema row.

Each completer has the signature ``(row, idx, stem) -> dict``: ``idx`` is the row's position in its file and
``stem`` the file's name stem, used to synthesise ids the raw file lacks (``<stem>-<idx:06d>``). Fields the raw
file lacks get the documented defaults of docs/DATA.md; invalid values become ``None`` so that the loader's
required-field check skips and counts the row (never a silent default).
"""

from __future__ import annotations

import math
import re
import string
from typing import Any, Iterable

from semcal_eval.data.civil_comments import CIVIL_ATTRIBUTES
from semcal_eval.data.goemotions import GOEMOTIONS_LABELS

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


def _to_float(v: Any) -> float | None:
    if v is None or (isinstance(v, float) and math.isnan(v)):
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


def _row_id(value: Any, idx: int, stem: str) -> str:
    return str(value) if value not in (None, "") else f"{stem}-{idx:06d}"


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


def complete_goemotions(row: dict, idx: int, stem: str) -> dict:
    """``text``, ``labels`` (ids in range, else None), ``id`` (synthesised when absent)."""
    labels = row.get("labels")
    if isinstance(labels, (list, tuple)):
        ok = all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < len(GOEMOTIONS_LABELS) for x in labels)
        labels = list(labels) if ok else None  # out-of-range ids are invalid -> skipped and counted
    else:
        labels = None
    return {"text": row.get("text"), "labels": labels, "id": _row_id(row.get("id"), idx, stem)}


def complete_civil_comments(row: dict, idx: int, stem: str) -> dict:
    """``text`` and the seven attributes as floats; ``toxicity_annotator_count`` when the file has it."""
    out: dict[str, Any] = {"text": row.get("text")}
    for a in CIVIL_ATTRIBUTES:
        out[a] = _to_float(row.get(a))  # unknown sub-attributes stay None (never invented as 0.0)
    if "toxicity_annotator_count" in row:
        out["toxicity_annotator_count"] = _to_int(row.get("toxicity_annotator_count"))
    return out


def complete_nq_open(row: dict, idx: int, stem: str) -> dict:
    """``question`` and ``answer`` (a list; a bare string becomes a one-item list)."""
    ans = row.get("answer")
    if isinstance(ans, str):
        ans = [ans]
    return {"question": row.get("question"), "answer": list(ans) if isinstance(ans, (list, tuple)) else None}


_EMPTY_ENTITY_PAGES = {"doc_source": [], "filename": [], "title": [], "wiki_context": []}
_EMPTY_SEARCH_RESULTS = {"description": [], "filename": [], "rank": [], "title": [], "url": [], "search_context": []}


def complete_triviaqa(row: dict, idx: int, stem: str) -> dict:
    """The rc.nocontext row; a bare alias list (DPR) becomes ``answer.aliases``, normalised aliases are
    computed with :func:`normalize_triviaqa_answer` when absent, ``answer.value`` stays None unless given."""
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
    return {
        "question": row.get("question"),
        "question_id": _row_id(row.get("question_id"), idx, stem),
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


def complete_hotpotqa(row: dict, idx: int, stem: str) -> dict:
    """The distractor row; ids from ``id`` / ``_id`` / R1-Searcher's ``idx``; [title, x] pair lists become
    the hub's dicts of lists."""
    rid = row.get("id", row.get("_id"))
    if rid in (None, "") and row.get("idx") is not None:
        rid = f"{stem}-{row['idx']}"  # R1-Searcher rows carry their own 1-based idx
    ans = row.get("answer")
    return {
        "id": _row_id(rid, idx, stem),
        "question": row.get("question"),
        "answer": ans if isinstance(ans, str) else None,
        "type": row.get("type"),
        "level": row.get("level"),
        "supporting_facts": _struct_of_lists(row.get("supporting_facts"), ("title", "sent_id")),
        "context": _struct_of_lists(row.get("context"), ("title", "sentences")),
    }


def complete_msmarco(row: dict, idx: int, stem: str) -> dict:
    """The v2.1 row; ``query_id`` falls back to the row position, absent passages to empty lists."""
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
