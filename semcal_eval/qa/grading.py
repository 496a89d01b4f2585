"""The one answer judge of semcal: is an answer correct, and do two answers say the same thing?

**The cover judge** (:mod:`semcal_eval.qa.cover`) is the default everywhere:

- :func:`grade` (answer, golds, question) → bool (= :func:`grade_cover`): correctness for every QA task and
  every training reward (RLVR, every CSR variant, RLCR, RD), so a policy is never trained on a rule the
  evaluation does not use. An answer is correct when it covers a gold alias (its words, with numbers, dates and
  word forms read canonically, the question's own words not counted) and claims nothing beside it (no hedge,
  alternative, negation or rival list item around the match). A long gold that opens with a name and then
  explains it ("Secretariat, who in 1973 became …") has that name as an alias too (:func:`_head`).
- :func:`agree` (a, b, question) → bool: CSR's J(C_j, C_i) and the QA tasks' default clustering
  (:class:`semcal_eval.qa.judges.CoverJudge`, ``get_judge("cover")``, the ``judge_cover`` filter), so training
  and evaluation read agreement the same way. Reflexive (identical answers agree, empty ones too), symmetric
  (either answer covers the other read as a gold), not transitive.

Measured against people on EVOUNA (24,133 human-judged answers to NQ-Open and TriviaQA) and against a grammar of
answer transformations: docs/JUDGE.md, benchmarks/bench_judge_humans.py, tests/test_judge_adversaries.py.

**Options under their own names** (a QA task's ``correctness`` metadata,
:data:`semcal_eval.qa.labels.CORRECTNESS_RULES`):
``strict`` (:func:`grade_strict`, the default of task versions 2.x: the answer, less one content-free lead-in,
equals a gold alias; sentence golds by ROUGE-L; exact, so wrong about most correct long answers), ``f1``
(token-F1 ≥ ½) and ``judge`` (the task's clustering judge against each alias); CSR's ``judge: strict``.

Bad input is refused with a clear error: no gold alias (:class:`~semcal_eval.qa.answers.EmptyGoldError`), an
answer that is not a string or is over a megabyte (:class:`~semcal_eval.qa.cover.CoverError`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from .cover import ALTERNATIVES, DEFENCES, SENTENCE_MIN_TOKENS, STOP_WORDS, check_text, clean, content, covers, tokens
from .answers import best_f1, check_golds, fold, normalize_answer, rouge_l_f1

__all__ = [
    "LEAD_INS",
    "SENTENCE_MIN_TOKENS",
    "SENTENCE_THRESHOLD",
    "agree",
    "answer_core",
    "fold",
    "golds_for_grading",
    "grade",
    "grade_cover",
    "grade_strict",
    "rouge_l_f1",
    "same_answer",
]

#: Content-free lead-ins a short answer may start with (normalised token sequences, longest first).
LEAD_INS: tuple[tuple[str, ...], ...] = tuple(sorted((tuple(s.split()) for s in (
    "answer", "answer is", "final answer", "final answer is", "correct answer is", "short answer",
    "it is", "its", "this is", "that is",
)), key=len, reverse=True))

#: A gold of this many normalised tokens or more is a sentence answer (ROUGE-L rule).
SENTENCE_MIN_TOKENS = 5
#: ROUGE-L F1 a sentence answer needs.
SENTENCE_THRESHOLD = 0.5

#: Words that turn an answer into a list, a hedge or a negation; an answer may use one only as often as the
#: gold does. Normalised tokens (apostrophes are dropped: "isn't" → "isnt").
_LIST_WORDS = frozenset("or either nor and vs versus".split())
_HEDGES = frozenset("maybe perhaps probably possibly likely unlikely unsure guess might".split())
_NEGATIONS = frozenset(
    "not no never neither none nothing nobody isnt wasnt arent werent dont doesnt didnt cannot cant wont "
    "wouldnt shouldnt couldnt hasnt havent hadnt false incorrect wrong".split()
)
_LIST_MARKS = ",;/|&"


def _tokens(text: str) -> list[str]:
    return normalize_answer(text).split()


def answer_core(answer: str) -> str:
    """The normalised answer with one lead-in of :data:`LEAD_INS` removed (never the whole answer).

    >>> answer_core("The answer is: PARIS."), answer_core("It's Paris"), answer_core("not Paris")
    ('paris', 'paris', 'not paris')
    """
    toks = _tokens(answer)
    for lead in LEAD_INS:
        if len(toks) > len(lead) and tuple(toks[: len(lead)]) == lead:
            return " ".join(toks[len(lead):])
    return " ".join(toks)


def _structure(text: str) -> tuple[int, int, int, int]:
    folded = fold(text)
    toks = _tokens(text)
    return (sum(folded.count(c) for c in _LIST_MARKS), sum(t in _LIST_WORDS for t in toks),
            sum(t in _HEDGES for t in toks), sum(t in _NEGATIONS for t in toks))


def _adds_structure(answer: str, gold: str) -> bool:
    """True iff the answer holds more list marks, list words, hedges or negations than the gold."""
    return any(a > g for a, g in zip(_structure(answer), _structure(gold), strict=True))


def _grade_one(core: str, answer: str, gold: str) -> bool:
    g = _tokens(gold)
    if not g:
        return False
    if len(g) < SENTENCE_MIN_TOKENS:
        return core == " ".join(g)
    return rouge_l_f1(answer, gold) >= SENTENCE_THRESHOLD and not _adds_structure(answer, gold)


_HEAD = re.compile(r"^\s*([A-Z][^,;:()\[\]\u2013\u2014]*?)\s*(?:,|\s[-\u2013\u2014]\s)\s*\S")

#: words that open an explanation after a comma ("Secretariat, who …", "Cher, in 1998, …")
_EXPLAINS = frozenset("who whose which where when in as born the a an also aka from after".split())


def _head(gold: str, question_words: Sequence[str] = ()) -> str | None:
    """The name a long gold opens with: a gold of ≥ ``SENTENCE_MIN_TOKENS`` words that starts with 1–4 capitalized
    words (one of ≥ 3 letters) ended by a comma, semicolon, colon, bracket or spaced dash, then its explanation.

    >>> _head("Secretariat, who in 1973 became the first Triple Crown champion"), _head("Paris, France")
    ('Secretariat', None)
    """
    m = _HEAD.match(gold)
    if not m or len(content(gold)) < SENTENCE_MIN_TOKENS:
        return None
    rest = gold[m.end() - 1:].split()
    if gold[m.end(1):m.end() - 1].strip() != "-" and (not rest or rest[0].lower() not in _EXPLAINS):
        return None  # "The Constitution, originally comprising …": the sentence goes on, its subject is no answer
    head = m[1]
    words = head.split()
    if not 1 <= len(words) <= 4 or not all(w[0].isupper() or w.lower() in STOP_WORDS for w in words):
        return None
    if not any(w.isalpha() and len(w) >= 3 and w not in question_words for w in content(head) if w not in STOP_WORDS):
        return None  # "WHEN ONE (CELESTIAL) BODY …", "Mitosis, the end product …" for a question on mitosis
    return head


def golds_for_grading(golds: str | Iterable[str]) -> list[str]:
    """The usable gold aliases (:func:`semcal_eval.qa.answers.check_golds`, the one gold reader: aliases whose
    SQuAD normalisation holds no letter or digit are dropped); :class:`EmptyGoldError` when none is left (such
    a question cannot be graded: "never correct" would bias accuracy and every reward)."""
    return check_golds(golds)


def grade_cover(answer: str, golds: str | Iterable[str], question: str = "") -> bool:
    """Is ``answer`` correct under the ``cover`` judge? Some gold alias is covered by the answer, which claims
    nothing beside it (:mod:`semcal_eval.qa.cover`). An answer with no letter or digit is never correct.

    >>> grade_cover("The capital of France is Paris.", ["Paris"], "What is the capital of France?")
    True
    >>> grade_cover("Paris, London or Berlin", ["Paris"]), grade_cover("not Paris", ["Paris"])
    (False, False)
    >>> grade_cover("19/45", ["1945"]), grade_cover("B. Obama", ["Barack Obama"])
    (False, True)
    >>> grade_cover("Michelle Obama", ["Barack Obama"])
    False
    """
    toks, golds, qwords, others = _cover_reading(answer, golds, question)
    return bool(toks) and any(covers(toks, g, qwords, others=others) for g in golds)


def _cover_reading(answer, golds, question):
    """(answer tokens, or () when the answer has no word; golds with their opening names; question words; the
    golds' words), as :func:`grade_cover` reads them."""
    golds = golds_for_grading(golds)
    toks = tokens(check_text(answer, "answer"))
    if not any(t.kind != "sep" for t in toks):
        toks = ()
    qwords = _question_words(question)
    # a long gold's opening name is an alias of its own: "Secretariat" for "Secretariat, who in 1973 became …"
    golds = golds + [h for h in (_head(g, qwords) for g in golds) if h and h not in golds]
    # the other golds' words are no rival: naming two accepted answers of a set question ("who signed …") or
    # two aliases of one answer claims nothing wrong
    others = frozenset(w for g in golds for w in content(g) if w not in STOP_WORDS)
    return toks, golds, qwords, others


def cover_refusal(answer: str, golds: str | Iterable[str], question: str = "") -> str | None:
    """Which of cover's defences (:data:`semcal_eval.qa.cover.DEFENCES`) refused a gold the answer covers: the
    first defence whose removal alone lets some gold be covered, "several" when only removing all does, None
    when cover accepts the answer or covers no gold even with every defence off.

    >>> cover_refusal("Some say Paris, but it is Lyon", ["Paris"]), cover_refusal("not Paris", ["Paris"])
    ('neighbour', 'several')
    >>> cover_refusal("Paris", ["Paris"]), cover_refusal("Lyon", ["Paris"])
    (None, None)
    """
    toks, golds, qwords, others = _cover_reading(answer, golds, question)

    def covered(defences):
        return any(covers(toks, g, qwords, others=others, defences=defences) for g in golds)

    # each defence only refuses, so an answer covering no gold with all of them off covers none with any on:
    # one reading settles most wrong answers
    if not toks or not covered(()) or covered(DEFENCES):
        return None
    return next((d for d in DEFENCES if covered(tuple(x for x in DEFENCES if x != d))), "several")


def _question_words(question: str | None) -> list[str]:
    """The question's content words, and its own "or"/"vs" (an alternative the question offers is no hedge)."""
    words = content(question or "")
    return [w for w in words if w not in STOP_WORDS or w in ALTERNATIVES]


def agree(a: str, b: str, question: str = "") -> bool:
    """J(a, b): the two answers make the same claim. True when they read the same
    (:func:`semcal_eval.qa.cover.tokens`, so identical and empty answers agree), or when one covers the other taken
    as a gold without negating it; padding, chatter, a hedge or a list beside the claim do not make another
    answer (the grader, :func:`grade`, is the one that refuses those). Symmetric by construction.

    >>> agree("Lyon", "LYÓN!"), agree("", ""), agree("Lyon", "It's Lyon, I think"), agree("Lyon", "Lyon apple")
    (True, True, True, True)
    >>> agree("Lyon", "not Lyon"), agree("Lyon", "Nice"), agree("Barack Obama", "Michelle Obama")
    (False, False, False)
    """
    ta = tokens(check_text(a, "answer"))
    tb = tokens(check_text(b, "answer"))
    ca, cb = [t.text for t in ta if t.kind != "sep"], [t.text for t in tb if t.kind != "sep"]
    if ca == cb:
        return True
    if not ca or not cb:
        return False
    qwords = _question_words(question)
    return covers(tb, a, qwords, alone=False) or covers(ta, b, qwords, alone=False)


def grade_strict(answer: str, golds: str | Iterable[str], question: str = "") -> bool:
    """The ``strict`` rule (semcal's default in task versions 2.x). Short golds: :func:`answer_core` equals the gold's
    normalisation; sentence golds: ROUGE-L F1 ≥ ½ and no added list/hedge/negation. Invisible characters are
    removed first (:func:`semcal_eval.qa.cover.clean`). An empty answer is never correct; ``question`` is not
    used. Exact, so no format games it, and wrong about most correct long answers (docs/JUDGE.md).

    >>> grade_strict("The answer is Paris.", ["Paris"]), grade_strict("Paris, France", ["Paris"])
    (True, False)
    >>> grade_strict("yes, no", ["yes"]), grade_strict("not Paris", ["Paris"]), grade_strict("Lyón", ["Lyon"])
    (False, False, True)
    """
    golds = golds_for_grading(golds)
    core = answer_core(clean(check_text(answer, "answer")))
    if not core:
        return False
    return any(_grade_one(core, answer, str(g)) for g in golds if g is not None)


#: semcal's correctness (every QA task's default and every reward): the cover judge
grade = grade_cover


def same_answer(a: str, b: str) -> bool:
    """Agreement of two answers: equal non-empty cores (folded, normalised, lead-in removed); an empty answer
    states nothing and agrees with nothing. An equivalence relation on non-empty answers.

    >>> same_answer("Lyon", "LYÓN!"), same_answer("Lyon", "Lyon, Nice"), same_answer("", "")
    (True, False, False)
    """
    ca, cb = answer_core(a or ""), answer_core(b or "")
    return bool(ca) and ca == cb
