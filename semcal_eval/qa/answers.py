"""Short answers against gold aliases: SQuAD normalisation, exact match, token-F1, correctness.

The definitions are those of the official SQuAD v1.1 evaluation script (Rajpurkar et al. 2016), with the
SQuAD v2 rule for empty answers. Pure functions, strings in and numbers out; no lm-eval, no judges (the
judges import this module, never the other way round).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable

__all__ = [
    "EmptyGoldError",
    "normalize_answer",
    "check_golds",
    "exact_match",
    "token_f1",
    "best_f1",
    "is_correct",
    "clean_answer",
]


class EmptyGoldError(ValueError):
    """Raised when a question has no usable gold answer (empty list, or only empty strings)."""


_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation, drop the articles a/an/the, collapse whitespace.

    >>> normalize_answer("  The  Eiffel-Tower!")
    'eiffeltower'
    >>> normalize_answer("An apple, a day")
    'apple day'
    """
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def check_golds(golds: str | Iterable[str]) -> list[str]:
    """The gold aliases as a list of strings (a single string is one alias; None entries are dropped).

    Raises :class:`EmptyGoldError` when no alias survives SQuAD normalisation: such a question cannot be
    scored, and scoring it as "never correct" would bias accuracy and calibration.

    >>> check_golds("Paris")
    ['Paris']
    """
    if isinstance(golds, str):
        golds = [golds]
    golds = [g for g in golds if g is not None]
    if not golds or all(not normalize_answer(str(g)) for g in golds):
        raise EmptyGoldError(
            f"no usable gold answer (got {list(golds)!r}): every alias is empty after SQuAD normalisation. "
            "Drop unanswerable questions before scoring (the semcal QA tasks do this when they load the data, "
            "with semcal_eval.data.fields.qa_golds, and log how many they dropped)."
        )
    return [str(g) for g in golds]


def exact_match(pred: str, golds: str | Iterable[str]) -> int:
    """EM = max over gold aliases g of [normalize(pred) == normalize(g)], as 0/1.

    >>> exact_match("the Beatles", ["Beatles", "The Fab Four"])
    1
    """
    p = normalize_answer(pred)
    return int(any(p == normalize_answer(g) for g in check_golds(golds)))


def token_f1(pred: str, gold: str) -> float:
    """SQuAD token-F1 between two strings: F1 = 2PR/(P+R) over the multiset overlap of normalised tokens.

    If either side has no tokens after normalisation, F1 = 1 when both are empty, else 0 (SQuAD v2 rule).
    Symmetric in its two arguments.

    >>> token_f1("Barack Obama", "President Barack Obama")
    0.8
    """
    p, g = normalize_answer(pred).split(), normalize_answer(gold).split()
    if not p or not g:
        return float(p == g)
    common = sum((Counter(p) & Counter(g)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def best_f1(pred: str, golds: str | Iterable[str]) -> float:
    """max over gold aliases g of :func:`token_f1` (pred, g); raises :class:`EmptyGoldError` if no alias is usable.

    >>> best_f1("Obama", ["Barack Obama", "Obama"])
    1.0
    """
    return max(token_f1(pred, g) for g in check_golds(golds))


def is_correct(pred: str, golds: str | Iterable[str], threshold: float = 0.5) -> bool:
    """correct ⇔ best_f1(pred, golds) ≥ threshold (CSR / semantic-uncertainty convention: threshold 0.5).

    >>> is_correct("Barack Obama", ["President Barack Obama"])
    True
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    return best_f1(pred, golds) >= threshold


def clean_answer(text: str) -> str:
    """The answer a short-answer prompt produced: the first non-empty line, stripped; "" if none.

    >>> clean_answer("  Paris\\nQ: next question")
    'Paris'
    """
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()
    return ""
