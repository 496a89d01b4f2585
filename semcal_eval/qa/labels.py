"""The correctness label of a QA record: which rule made it, its verdict, and what the record carries.

A QA task's ``correctness`` metadata names a rule of :data:`CORRECTNESS_RULES`; :func:`correct_by` applies it,
:func:`grade_record` writes what a per-document record keeps (the verdict, the grader and its version, and for the
learned judge its P(correct)) and :func:`grade_many` grades a batch (the rewards' form). Above the judges: the
learned judge (:mod:`semcal_eval.qa.learned`) is itself a :class:`~semcal_eval.qa.judges.Judge` built on
:mod:`semcal_eval.qa.grading`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .answers import best_f1
from .grading import golds_for_grading, grade_cover, grade_strict

__all__ = ["CORRECTNESS_RULES", "DEFAULT_CORRECTNESS", "correct_by", "grade_learned", "grade_many", "grade_record",
           "grader_name",
           "learned_judge"]


def learned_judge():
    """The shared :class:`semcal_eval.qa.learned.LearnedJudge` with the shipped weights (built once; its model is
    loaded on the first answer that is not lexically decisive)."""
    from .judges import get_judge

    return get_judge("learned")


def grade_learned(answer: str, golds: str | Iterable[str], question: str = "") -> bool:
    """Is ``answer`` correct under the ``learned`` judge (:mod:`semcal_eval.qa.learned`)? P(correct) ≥ ½, with
    P from cover's evidence and, where that is not decisive, a catalogue LM's yes/no log-odds."""
    return learned_judge().grade(answer, golds_for_grading(golds), question)


def grade_many(answers: Sequence[str], golds: Sequence[Sequence[str] | str], questions: Sequence[str] | None = None,
               rule: str | None = None) -> list[float]:
    """Each answer graded against its own golds under ``rule`` (default :data:`DEFAULT_CORRECTNESS`), as 0.0/1.0
    (the rewards' form); under ``learned`` in one batch (its model runs once over the answers the lexical stage
    cannot settle)."""
    rule = rule or DEFAULT_CORRECTNESS
    qs = questions if questions is not None else [""] * len(answers)
    if rule == "learned":
        items = [(a, golds_for_grading(g), q or "") for a, g, q in zip(answers, golds, qs, strict=True)]
        return [float(p >= 0.5) for p in learned_judge().grade_probs(items)]
    if rule not in ("cover", "strict"):
        raise ValueError(f"grade_many grades by 'cover', 'learned' or 'strict', got {rule!r}")
    one = grade_cover if rule == "cover" else grade_strict
    return [float(one(a, g, q)) for a, g, q in zip(answers, golds, qs, strict=True)]


#: The QA tasks' ``correctness`` settings: ``cover`` (default: :func:`semcal_eval.qa.grading.grade`, the rewards'
#: grader, measured against people: docs/JUDGE.md), ``learned`` (:func:`grade_learned`: cover's evidence and a
#: catalogue LM's yes/no log-odds weighed on people's verdicts, :mod:`semcal_eval.qa.learned`), ``strict``
#: (:func:`~semcal_eval.qa.grading.grade_strict`, the default of task versions 2.x), ``f1`` (best token-F1 ≥
#: threshold, the SQuAD/semantic-uncertainty convention; listing pays under it), ``judge`` (the filter's
#: equivalence judge against each gold alias).
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


def grader_name(rule: str) -> str:
    """The ``grader`` a per-document record names for correctness rule ``rule``: the rule itself, and for
    ``learned`` the shipped judge's version (``learned-4``; its weights are read, its model is not loaded), the
    key of the judge card (:mod:`semcal_eval.qa.judge_card`)."""
    if rule not in CORRECTNESS_RULES:
        raise ValueError(f"correctness must be one of {', '.join(CORRECTNESS_RULES)}, got {rule!r}")
    return learned_judge().version if rule == "learned" else rule


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
