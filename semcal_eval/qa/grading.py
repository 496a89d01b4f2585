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

**Options under their own names** (a QA task's ``correctness`` metadata, :data:`CORRECTNESS_RULES`):
``strict`` (:func:`grade_strict`, the default of task versions 2.x: the answer, less one content-free lead-in,
equals a gold alias; sentence golds by ROUGE-L; exact, so wrong about most correct long answers), ``f1``
(token-F1 ≥ ½) and ``judge`` (the task's clustering judge against each alias); CSR's ``judge: strict``.

Bad input is refused with a clear error: no gold alias (:class:`~semcal_eval.qa.answers.EmptyGoldError`), an
answer that is not a string or is over a megabyte (:class:`~semcal_eval.qa.cover.CoverError`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from .cover import ALTERNATIVES, SENTENCE_MIN_TOKENS, STOP_WORDS, check_text, clean, content, covers, tokens
from .answers import best_f1, check_golds, fold, normalize_answer, rouge_l_f1

__all__ = [
    "LEAD_INS",
    "SENTENCE_MIN_TOKENS",
    "SENTENCE_THRESHOLD",
    "CORRECTNESS_RULES",
    "DEFAULT_CORRECTNESS",
    "agree",
    "answer_core",
    "correct_by",
    "fold",
    "golds_for_grading",
    "grade",
    "grade_cover",
    "grade_learned",
    "grade_record",
    "learned_judge",
    "grade_strict",
    "grade_many",
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
    golds = golds_for_grading(golds)
    toks = tokens(check_text(answer, "answer"))
    if not any(t.kind != "sep" for t in toks):
        return False
    qwords = _question_words(question)
    # a long gold's opening name is an alias of its own: "Secretariat" for "Secretariat, who in 1973 became …"
    golds = golds + [h for h in (_head(g, qwords) for g in golds) if h and h not in golds]
    # the other golds' words are no rival: naming two accepted answers of a set question ("who signed …") or
    # two aliases of one answer claims nothing wrong
    others = frozenset(w for g in golds for w in content(g) if w not in STOP_WORDS)
    return any(covers(toks, g, qwords, others=others) for g in golds)


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


def learned_judge():
    """The shared :class:`semcal_eval.qa.learned.LearnedJudge` with the shipped weights (built once; its model is
    loaded on the first answer that is not lexically decisive)."""
    from .judges import get_judge

    return get_judge("learned")


def grade_learned(answer: str, golds: str | Iterable[str], question: str = "") -> bool:
    """Is ``answer`` correct under the ``learned`` judge (:mod:`semcal_eval.qa.learned`)? P(correct) ≥ ½, with
    P from cover's evidence and, where that is not decisive, a catalogue LM's yes/no log-odds."""
    return learned_judge().grade(answer, golds_for_grading(golds), question)


def grade_many(answers: Sequence[str], golds: Sequence[Sequence[str] | str], questions: Sequence[str] | None = None
               ) -> list[float]:
    """:func:`grade` of each answer against its own golds, as 0.0/1.0 (the rewards' form); under the learned
    judge in one batch (its model runs once over every answer that the lexical stage cannot settle)."""
    qs = questions if questions is not None else [""] * len(answers)
    if grade is grade_learned:
        items = [(a, golds_for_grading(g), q or "") for a, g, q in zip(answers, golds, qs, strict=True)]
        return [float(p >= 0.5) for p in learned_judge().grade_probs(items)]
    return [float(grade(a, g, q)) for a, g, q in zip(answers, golds, qs, strict=True)]


def same_answer(a: str, b: str) -> bool:
    """Agreement of two answers: equal non-empty cores (folded, normalised, lead-in removed); an empty answer
    states nothing and agrees with nothing. An equivalence relation on non-empty answers.

    >>> same_answer("Lyon", "LYÓN!"), same_answer("Lyon", "Lyon, Nice"), same_answer("", "")
    (True, False, False)
    """
    ca, cb = answer_core(a or ""), answer_core(b or "")
    return bool(ca) and ca == cb


#: The QA tasks' ``correctness`` settings: ``cover`` (default, :func:`grade`, the rewards' grader, measured
#: against people: docs/JUDGE.md), ``learned`` (:func:`grade_learned`: cover's evidence and a catalogue LM's
#: yes/no log-odds weighed on people's verdicts, :mod:`semcal_eval.qa.learned`), ``strict`` (:func:`grade_strict`, the default of task versions 2.x), ``f1`` (best token-F1 ≥ threshold, the
#: SQuAD/semantic-uncertainty convention; listing pays under it), ``judge`` (the filter's equivalence judge
#: against each gold alias).
CORRECTNESS_RULES = ("cover", "learned", "strict", "f1", "judge")
DEFAULT_CORRECTNESS = "cover"


def correct_by(rule: str, answer: str, golds: Sequence[str], question: str = "", threshold: float = 0.5,
               judge=None) -> int:
    """Correctness of one answer under a QA task's ``correctness`` rule (:data:`CORRECTNESS_RULES`), as 0/1.
    Every QA filter calls this, so the rule is written once.

    >>> correct_by("cover", "Paris, Lyon", ["Paris"]), correct_by("f1", "Paris, Lyon", ["Paris"])
    (0, 1)
    """
    if rule == "cover":
        return int(grade_cover(answer, golds, question))
    if rule == "learned":
        return int(grade_learned(answer, golds, question))
    if rule == "strict":
        return int(grade_strict(answer, golds, question))
    if rule == "f1":
        return int(best_f1(answer, golds) >= threshold)
    if rule == "judge":
        if judge is None:
            raise ValueError("correctness 'judge' needs the filter's judge")
        return int(bool(answer.strip()) and any(judge.equivalent(question, [(answer, g) for g in golds])))
    raise ValueError(f"correctness must be one of {', '.join(CORRECTNESS_RULES)}, got {rule!r}")


def grade_record(rule: str, answer: str, golds: Sequence[str], question: str = "", threshold: float = 0.5,
                 judge=None) -> dict:
    """What a per-document record carries about its label: ``correct`` (0/1, :func:`correct_by`), ``grader`` (the
    rule, and for ``learned`` the judge's version) and, for ``learned``, ``correct_p`` (its P(correct)), so every
    number can be recomputed, or re-thresholded, from the records.

    >>> grade_record("cover", "Paris", ["Paris"])
    {'correct': 1, 'grader': 'cover'}
    """
    if rule != "learned":
        return {"correct": correct_by(rule, answer, golds, question, threshold, judge), "grader": rule}
    j = learned_judge()
    p = j.grade_probs([(answer, golds_for_grading(golds), question)])[0]
    return {"correct": int(p >= 0.5), "grader": j.version, "correct_p": round(float(p), 6)}
