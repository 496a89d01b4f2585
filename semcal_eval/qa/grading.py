"""The one answer grader of semcal: is an answer correct, and do two answers say the same thing?

Training rewards (RLVR, every CSR variant, RLCR, RD) and the evaluation tasks (``*_semagree``, ``*_rlcr``,
``*_rd``, ``*_verbalized``) call :func:`grade` for correctness, so a policy is never trained on a rule the
evaluation does not use. :class:`semcal_eval.qa.judges.StrictJudge` (``get_judge("strict")``) is the same reading for agreement between
two answers (CSR's J(C_j, C_i)).

**Folding** (:func:`fold`), applied before anything is compared, here and in SQuAD normalisation
(:func:`semcal_eval.qa.answers.fold`, inside :func:`~semcal_eval.qa.answers.normalize_answer`, so the evaluation's clustering judges fold too): NFKC (full-width,
mathematical alphanumerics, ligatures, the Roman-numeral letters), common confusable letters to their Latin twin
(Cyrillic "у" → "y", Greek "ο" → "o", Latin alpha "ɑ" → "a", …: :data:`semcal_eval.qa.answers.CONFUSABLES`), diacritics removed
(NFKD, combining marks dropped: "Lÿon", "Lyón" → "lyon"), case folded. Spelling variants of these kinds are the
same answer; translations ("Lione") are not.

**Short golds** (≤ :data:`SENTENCE_MIN_TOKENS` − 1 tokens after normalisation; every gold of HotpotQA,
TriviaQA and NQ-Open in practice): the answer is correct iff its *core* equals a gold alias. The core is the
SQuAD-normalised answer (folded, lower case, no punctuation, no articles) with one lead-in removed from
:data:`LEAD_INS` ("the answer is", "answer:", "it's", …). So "PARIS.", "The answer is Paris" and "It's Paris"
are right, and everything that adds content is wrong: enumerations ("Paris, London or Berlin", "yes, no"),
hedges ("maybe Paris"), negations ("not Paris"), another entity sharing a word ("Michelle Obama" for "Barack
Obama"), the question repeated, and any answer longer than the gold (the answer budget is the gold itself).
Aliases count: each gold alias is tried.

**Sentence golds** (≥ :data:`SENTENCE_MIN_TOKENS` tokens; MS MARCO's human answers are often a sentence):
correct iff ROUGE-L F1 (longest common subsequence of the normalised tokens, Lin 2004) with the gold is
≥ :data:`SENTENCE_THRESHOLD`, *and* the answer adds no list structure, hedge or negation that the gold lacks
(:func:`_adds_structure`). ROUGE-L F1 already charges extra words through its precision; the structure check
closes what precision alone leaves open: a wrong candidate listed beside the gold sentence ("Lyon, or <gold>")
keeps F1 near 1, and "not <gold>" keeps F1 near 1 while saying the opposite. This is the rule for MS MARCO; its
short golds ("Yes", "No") use the short rule, so "yes, no" is wrong there too.

Why exact rather than token-F1 ≥ 0.5 (the SQuAD/semantic-uncertainty convention this replaces as the default):
F1 pays for listing. "Paris, London" scores F1 0.67 against "Paris", and "yes, no" scores 0.67 against "yes",
so a policy trained on F1 learns to list its candidates. A rule that accepts only the gold plus a fixed,
content-free dressing cannot be raised by any transformation of a wrong answer: tests/test_answer_grading.py
searches a grammar of transformations for one (hypothesis) and checks the verdicts on a table of cases.
The price: paraphrases of a short gold ("Obama" for "Barack Obama" when only the full name is an alias) are
wrong. Token-F1 stays available as ``correctness: f1`` in the QA tasks' metadata, for comparison with older runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .answers import best_f1, fold, normalize_answer, rouge_l_f1

__all__ = [
    "LEAD_INS",
    "SENTENCE_MIN_TOKENS",
    "SENTENCE_THRESHOLD",
    "CORRECTNESS_RULES",
    "answer_core",
    "correct_by",
    "fold",
    "grade",
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


def grade(answer: str, golds: str | Iterable[str], question: str = "") -> bool:
    """Is ``answer`` correct for any gold alias? Short golds: :func:`answer_core` equals the gold's
    normalisation; sentence golds: ROUGE-L F1 ≥ ½ and no added list/hedge/negation (module docstring).
    An empty answer is never correct. ``question`` is accepted for the judge signature and not used: a
    repeated question is content the gold does not have.

    >>> grade("The answer is Paris.", ["Paris"]), grade("Paris, London or Berlin", ["Paris"])
    (True, False)
    >>> grade("yes, no", ["yes"]), grade("not Paris", ["Paris"]), grade("Lyón", ["Lyon"])
    (False, False, True)
    """
    if isinstance(golds, str):
        golds = [golds]
    core = answer_core(answer or "")
    if not core:
        return False
    return any(_grade_one(core, answer, str(g)) for g in golds if g is not None)


def grade_many(answers: Sequence[str], golds: Sequence[Sequence[str] | str], questions: Sequence[str] | None = None
               ) -> list[float]:
    """:func:`grade` of each answer against its own golds, as 0.0/1.0 (the rewards' form)."""
    qs = questions if questions is not None else [""] * len(answers)
    return [float(grade(a, g, q)) for a, g, q in zip(answers, golds, qs, strict=True)]


def same_answer(a: str, b: str) -> bool:
    """Agreement of two answers: equal non-empty cores (folded, normalised, lead-in removed); an empty answer
    states nothing and agrees with nothing. An equivalence relation on non-empty answers.

    >>> same_answer("Lyon", "LYÓN!"), same_answer("Lyon", "Lyon, Nice"), same_answer("", "")
    (True, False, False)
    """
    ca, cb = answer_core(a or ""), answer_core(b or "")
    return bool(ca) and ca == cb


#: The QA tasks' ``correctness`` settings: ``strict`` (default, :func:`grade`, the rewards' grader), ``f1``
#: (best token-F1 ≥ threshold, the SQuAD/semantic-uncertainty convention before issue 31; listing pays under it),
#: ``judge`` (the filter's equivalence judge against each gold alias).
CORRECTNESS_RULES = ("strict", "f1", "judge")


def correct_by(rule: str, answer: str, golds: Sequence[str], question: str = "", threshold: float = 0.5,
               judge=None) -> int:
    """Correctness of one answer under a QA task's ``correctness`` rule (:data:`CORRECTNESS_RULES`), as 0/1.
    Every QA filter calls this, so the rule is written once.

    >>> correct_by("strict", "Paris, Lyon", ["Paris"]), correct_by("f1", "Paris, Lyon", ["Paris"])
    (0, 1)
    """
    if rule == "strict":
        return int(grade(answer, golds, question))
    if rule == "f1":
        return int(best_f1(answer, golds) >= threshold)
    if rule == "judge":
        if judge is None:
            raise ValueError("correctness 'judge' needs the filter's judge")
        return int(bool(answer.strip()) and any(judge.equivalent(question, [(answer, g) for g in golds])))
    raise ValueError(f"correctness must be one of {', '.join(CORRECTNESS_RULES)}, got {rule!r}")
