"""Content-word overlap between answers: the "may be the same answer" reading of semcal's ``csr_spread`` variant.

Correctness and agreement are :mod:`semcal_eval.qa.grading` everywhere (issue 31); this module serves only
``reward.agreement_wrong: overlap`` (csr_spread), where a *wrong* rollout is charged for every partner that may
give its answer. A completion's first line is reduced to its *answer key* — SQuAD-normalised tokens with every
repetition of the question removed — and its **content set**: the key's tokens without stopwords and without the
question's own words. Two answers whose content sets intersect *may* be the same answer (:func:`overlap_matrix`),
so appending words to a wrong answer, whatever they are, never makes it look unshared: each copy still holds the
original answer's words. What it cannot see: an answer with no word in common (a translation, unique noise), the
exploit docs/TRAINING.md states for csr_spread.

:func:`short_answer` and :func:`answer_budget` are the span reading the training rewards used before issue 31;
``benchmarks/adversary_search.py`` keeps them to print the verdicts of that judge beside the grader's. Pure
functions, no model.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import re
import string

from semcal_eval.qa.answers import normalize_answer

__all__ = ["STOPWORDS", "answer_key", "answer_budget", "short_answer", "content_set", "overlap_matrix"]

#: Function words that two different answers share without meaning the same thing ("bank of america" vs
#: "university of texas"); a small closed list, so content words are never dropped.
STOPWORDS = frozenset(
    "of in on at to for by with from and or is was are were be been it its this that as i think answer "
    "my his her their our your he she they we you not no yes so".split()
)


_PUNCT_RE = re.compile("[" + re.escape(string.punctuation) + "]")


def _remove_run(tokens: list[str], run: list[str]) -> list[str]:
    """``tokens`` with every occurrence of the contiguous sequence ``run`` removed."""
    if not run or len(run) > len(tokens):
        return tokens
    out, i, n = [], 0, len(run)
    while i < len(tokens):
        if tokens[i : i + n] == run:
            i += n
        else:
            out.append(tokens[i])
            i += 1
    return out


def answer_key(answer: str, question: str = "") -> list[str]:
    """Normalised tokens of an answer with every repetition of the (normalised) question removed.

    An answer that is only the question repeated has an empty key: it answers nothing.

    >>> answer_key("What is the capital of France? Lyon!", "What is the capital of France?")
    ['lyon']
    >>> answer_key("PARIS.", "capital of France?")
    ['paris']
    >>> answer_key("capital of France", "capital of France")
    []
    """
    toks = normalize_answer(answer or "").split()
    return _remove_run(toks, normalize_answer(question or "").split())


def answer_budget(golds: Sequence[str], question: str = "") -> int:
    """The answer budget of a question: 1 + the longest gold's key length (at least 2).

    >>> answer_budget(["Paris"]), answer_budget(["Barack Obama", "Obama"])
    (2, 3)
    """
    n = max((len(answer_key(g, question)) for g in golds), default=1)
    return max(n, 1) + 1


def short_answer(answer: str, question: str = "", budget: int | None = None) -> str:
    """The first ``budget`` tokens of :func:`answer_key`, joined by spaces (``budget=None``: all of them).

    >>> short_answer("Paris is the capital, I think.", "capital of France?", 2)
    'paris is'
    >>> short_answer("Q: capital of France? A: Paris", "capital of France?", 2)
    'q paris'
    """
    key = answer_key(answer, question)
    return " ".join(key if budget is None else key[: max(int(budget), 1)])


def content_set(answer: str, question: str = "") -> frozenset[str]:
    """Content words of an answer: key tokens that are neither stopwords nor words of the question (when
    that leaves nothing, the key's own tokens), read with punctuation removed *and* with punctuation as a
    space, plus the key written without spaces — so "New-York", "NewYork" and "new york" share a word.

    >>> sorted(content_set("It is the Seine river", "Which river flows through Paris?"))
    ['seine']
    >>> bool(content_set("New-York") & content_set("new york"))
    True
    """
    key = answer_key(answer, question)
    if not key:
        return frozenset()
    spaced = answer_key(_PUNCT_RE.sub(" ", answer or ""), question)
    qwords = set(normalize_answer(question or "").split())
    toks = set(key) | set(spaced)
    content = {t for t in toks if t not in STOPWORDS and t not in qwords} or toks
    return frozenset(content | {"".join(t for t in key if t in content)})


def overlap_matrix(answers: Sequence[str], question: str = "") -> np.ndarray:
    """K×K 0/1 matrix: 1 iff the two answers' content sets intersect ("may be the same answer"); diagonal 1;
    an empty answer (empty key) overlaps nothing.

    >>> overlap_matrix(["Lyon", "lyon, pad word", "Rome", ""]).tolist()
    [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    """
    sets = [content_set(a, question) for a in answers]
    K = len(sets)
    A = np.eye(K, dtype=np.int64)
    for i in range(K):
        for j in range(i + 1, K):
            if sets[i] and sets[j] and sets[i] & sets[j]:
                A[i, j] = A[j, i] = 1
    return A
