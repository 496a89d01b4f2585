"""Short answers against gold aliases: SQuAD normalisation, exact match, token-F1, correctness.

The definitions are those of the official SQuAD v1.1 evaluation script (Rajpurkar et al. 2016), with the
SQuAD v2 rule for empty answers. Pure functions, strings in and numbers out; no lm-eval, no judges (the
judges import this module, never the other way round).
"""

from __future__ import annotations

import numbers
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable

__all__ = [
    "CONFUSABLES",
    "fold",
    "EmptyGoldError",
    "normalize_answer",
    "gold_aliases",
    "usable_alias",
    "usable_golds",
    "check_golds",
    "exact_match",
    "token_f1",
    "best_f1",
    "rouge_l_f1",
    "is_correct",
    "clean_answer",
]


class EmptyGoldError(ValueError):
    """Raised when a question being scored has no usable gold answer (:func:`check_golds`)."""


#: Letters of other scripts (and Latin look-alikes) that render like a Latin letter, mapped to it. NFKC maps
#: the compatibility forms (full-width "Ｌ", "𝖲", Roman numeral "ⅼ"); this table covers the look-alikes that
#: NFKC keeps (Unicode's confusables.txt, the single-letter Latin targets of Cyrillic, Greek and IPA letters).
CONFUSABLES = {
    # Cyrillic
    "а": "a", "в": "b", "е": "e", "ё": "e", "з": "3", "і": "i", "ї": "i", "ј": "j", "к": "k", "м": "m", "н": "h",
    "о": "o", "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "һ": "h",
    "ӏ": "l", "А": "A", "В": "B", "Е": "E", "З": "3", "І": "I", "Ј": "J", "К": "K", "М": "M", "Н": "H", "О": "O",
    "Р": "P", "С": "C", "Т": "T", "У": "Y", "Х": "X", "Ѕ": "S", "Ԁ": "D", "Ү": "Y", "ү": "y",
    # Greek
    "α": "a", "ο": "o", "ρ": "p", "ν": "v", "τ": "t", "υ": "u", "ι": "i", "κ": "k", "χ": "x", "Α": "A", "Β": "B",
    "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y",
    "Χ": "X",
    # Latin look-alikes (IPA and others)
    "ɑ": "a", "ɡ": "g", "ɩ": "i", "ı": "i", "ȷ": "j", "ʟ": "l", "ɪ": "i", "ʀ": "r", "ꜱ": "s", "ᴏ": "o", "ᴄ": "c",
    "ᴠ": "v", "ᴡ": "w", "ᴢ": "z", "ø": "o", "Ø": "O", "ł": "l", "Ł": "L", "đ": "d", "Đ": "D", "ß": "ss",
    "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ð": "d", "þ": "th",
    # dashes, slashes and spaces that NFKC keeps
    "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2212": "-", "\u2044": "/",
    "\u2215": "/", "\u00a0": " ", "\u202f": " ",
}
_CONFUSABLE_TABLE = str.maketrans(CONFUSABLES)


def fold(text: str) -> str:
    """NFKC, confusable letters to Latin (:data:`CONFUSABLES`), diacritics and invisible format characters
    (Unicode Cf: zero-width space, BOM, soft hyphen, word joiner) dropped, case folded.

    >>> fold("Lÿon"), fold("Lуon"), fold("ＰＡＲＩＳ"), fold("𝖲molLM2"), fold("São Paulo")
    ('lyon', 'lyon', 'paris', 'smollm2', 'sao paulo')
    """
    s = unicodedata.normalize("NFKC", text or "").translate(_CONFUSABLE_TABLE)
    # combining marks and invisible format characters (zero-width space/joiner, BOM, soft hyphen) drop out
    s = "".join(ch for ch in unicodedata.normalize("NFKD", s)
                if not unicodedata.combining(ch) and unicodedata.category(ch) != "Cf")
    return s.translate(_CONFUSABLE_TABLE).casefold()


_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
    """SQuAD normalisation after :func:`fold`: lower-case, drop punctuation (ASCII and Unicode), drop the
    articles a/an/the, collapse whitespace. Folding first makes spelling variants ("Lyón", "Lуon" with a
    Cyrillic у, "ＬＹＯＮ") one answer everywhere semcal compares answers.

    >>> normalize_answer("  The  Eiffel-Tower!")
    'eiffeltower'
    >>> normalize_answer("An apple, a day")
    'apple day'
    """
    s = fold(s)
    s = "".join(ch for ch in s if ch not in _PUNCT and not unicodedata.category(ch).startswith("P"))
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


# ------------------------------------------------------------------------------------------------------------
# The one reader of gold answers
# ------------------------------------------------------------------------------------------------------------
# Every site that reads a question's gold aliases goes through these three functions: the QA tasks' data hook
# (semcal_eval.data.fields.qa_golds), the stock wrapper (semcal_eval.qa.stock.golds_of), the trainers' reward
# columns (trainers.rewards.matching.gold_list) and the scorers (check_golds here, grading.golds_for_grading).
# One rule: an alias is usable when its SQuAD normalisation still holds a letter or digit. Where rows can be
# dropped (loading data) a question with no usable alias is dropped and counted; where one question is scored
# and there is nothing to drop, it is an EmptyGoldError naming the fix.


def gold_aliases(golds) -> list[str]:
    """The gold aliases of one question as strings, before the usability rule: a string is one alias, a list
    (or tuple, or any non-string iterable) holds aliases, None entries (and a None value) are skipped, a number
    is read as its text. Anything else (a dict such as TriviaQA's answer struct, bytes, a nested list) is a
    ValueError naming the fix.

    >>> gold_aliases("Paris"), gold_aliases(["Paris", None, 1988]), gold_aliases(None)
    (['Paris'], ['Paris', '1988'], [])
    """
    if golds is None:
        return []
    if isinstance(golds, str):
        return [golds]
    if isinstance(golds, (dict, bytes)) or not isinstance(golds, Iterable):
        raise ValueError(f"gold answers must be a string or a list of strings, got {type(golds).__name__} "
                         f"({str(golds)[:40]!r}); pass the question's acceptable answers as a list of strings")
    out = []
    for g in golds:
        if g is None:
            continue
        if isinstance(g, numbers.Number) and not isinstance(g, bool):
            g = str(g)
        if not isinstance(g, str):
            raise ValueError(f"gold aliases must be strings, got {type(g).__name__} ({str(g)[:40]!r}); pass the "
                             "question's acceptable answers as a flat list of strings")
        out.append(g)
    return out


def usable_alias(alias: str) -> bool:
    """An alias can be graded ⇔ its SQuAD normalisation (:func:`normalize_answer`) holds a letter or digit
    ("The", "a", "", "—" and "€" normalise to nothing a judge can read).

    >>> usable_alias("The Beatles"), usable_alias("The"), usable_alias("...")
    (True, False, False)
    """
    return any(ch.isalnum() for ch in normalize_answer(alias))


def usable_golds(golds, unanswerable: Iterable[str] = ()) -> list[str]:
    """The usable aliases of one question (:func:`gold_aliases`, kept where :func:`usable_alias` and not one of
    the dataset's ``unanswerable`` markers, compared normalised). [] means the question cannot be scored: a
    caller that loads rows drops it and counts it.

    >>> usable_golds(["The", "a"]), usable_golds(["Paris", "", "the"])
    ([], ['Paris'])
    >>> usable_golds(["No Answer Present.", "Yes"], unanswerable=["No Answer Present."])
    ['Yes']
    """
    bad = {normalize_answer(u) for u in unanswerable}
    return [g for g in gold_aliases(golds) if usable_alias(g) and normalize_answer(g) not in bad]


def check_golds(golds: str | Iterable[str]) -> list[str]:
    """The usable gold aliases of one question being scored (:func:`usable_golds`: unusable aliases dropped).

    Raises :class:`EmptyGoldError` when no alias is usable: such a question cannot be scored, and scoring it as
    "never correct" would bias accuracy and calibration. The data loaders drop such questions first.

    >>> check_golds("Paris"), check_golds(["", "Paris", "the"])
    (['Paris'], ['Paris'])
    """
    out = usable_golds(golds)
    if not out:
        raise EmptyGoldError(
            f"no usable gold answer (got {gold_aliases(golds)[:5]!r}): every alias normalises to nothing (no letter "
            "or digit after SQuAD normalisation). Drop unanswerable questions before scoring (the semcal QA tasks "
            "do this when they load the data, with semcal_eval.data.fields.qa_golds, and log how many they dropped)."
        )
    return out


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


def rouge_l_f1(a: str, b: str) -> float:
    """ROUGE-L F1 of two answers' normalised tokens (Lin 2004, without stemming): l the longest common
    subsequence, P = l/|a|, R = l/|b|, F1 = 2PR/(P+R), symmetric; 0 when either side is empty.

    >>> round(rouge_l_f1("Paris is the capital", "Paris is the capital of France"), 6)  # l = 3, P = 1, R = 3/5
    0.75
    """
    x, y = normalize_answer(a).split(), normalize_answer(b).split()
    if not x or not y:
        return 0.0
    prev = [0] * (len(y) + 1)
    for tx in x:
        cur = [0]
        for j, ty in enumerate(y):
            cur.append(prev[j] + 1 if tx == ty else max(prev[j + 1], cur[j]))
        prev = cur
    lcs = prev[-1]
    if lcs == 0:
        return 0.0
    p, r = lcs / len(x), lcs / len(y)
    return 2 * p * r / (p + r)


def is_correct(pred: str, golds: str | Iterable[str], threshold: float = 0.5) -> bool:
    """correct ⇔ best_f1(pred, golds) ≥ threshold (CSR / semantic-uncertainty convention: threshold 0.5).

    >>> is_correct("Barack Obama", ["President Barack Obama"])
    True
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    return best_f1(pred, golds) >= threshold


def clean_answer(text: str) -> str:
    """The answer a short-answer prompt produced: the first non-empty line, stripped; "" if none. Lines end at
    "\\n" only, the generation's stop sequence: a U+2028, U+0085 or vertical tab did not stop the generation, so
    what follows it stays in the answer (the judge reads it as a new line).

    >>> clean_answer("  Paris\\nQ: next question"), clean_answer("Paris\\u2028London")
    ('Paris', 'Paris\\u2028London')
    """
    for line in str(text).split("\n"):
        if line.strip():
            return line.strip()
    return ""
