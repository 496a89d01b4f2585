"""The one QA gold reader (semcal_eval.qa.answers: gold_aliases / usable_golds / check_golds): every site that
reads a question's gold aliases keeps the same ones, and a question whose aliases all normalise to nothing is
dropped and counted where rows are loaded, and a clear EmptyGoldError where one question is scored."""

from __future__ import annotations

import pytest

from semcal_eval.data.fields import qa_golds
from semcal_eval.qa import score_question
from semcal_eval.qa.answers import EmptyGoldError, best_f1, check_golds, exact_match, usable_golds
from semcal_eval.qa.grading import golds_for_grading, grade
from semcal_eval.qa.judges import F1Judge
from semcal_eval.qa.stock import golds_of
from trainers.rewards.matching import correctness_reward, gold_list

CASES = [
    (["The", "a"], []),  # issue 42's defect: both aliases normalise to nothing
    (["Paris", "", "the", "  ", None], ["Paris"]),
    (["The Beatles", "Beatles"], ["The Beatles", "Beatles"]),
    (["—", "...", "€"], []),  # no letter or digit after normalisation
    (["1988", 1945], ["1988", "1945"]),
    ("Paris", ["Paris"]),
    ([], []),
]


@pytest.mark.parametrize("golds, usable", CASES)
def test_every_reader_keeps_the_same_aliases(golds, usable):
    assert usable_golds(golds) == usable
    assert gold_list(golds) == usable  # the trainers' reward column
    assert golds_of(golds) == usable  # the stock wrapper (its values stripped first)
    if not isinstance(golds, str):
        assert qa_golds("nq_open", {"question": "q", "answer": list(golds)}) == usable  # the QA tasks' loader
    if usable:
        assert check_golds(golds) == usable and golds_for_grading(golds) == usable
    else:
        for read in (check_golds, golds_for_grading):
            with pytest.raises(EmptyGoldError, match="Drop unanswerable questions"):
                read(golds)


def test_aliases_that_normalise_to_nothing_drop_the_row_where_rows_are_loaded():
    """The defect: golds_of kept ["The", "a"], and score_question then raised on a row the task should have
    dropped. Now the loaders drop it (an empty gold list) ..."""
    assert golds_of(["The", "a"]) == [] and qa_golds("nq_open", {"question": "q", "answer": ["The", "a"]}) == []
    # ... and scoring such a question directly, where there is no row to drop, is the clear error
    with pytest.raises(EmptyGoldError, match="no usable gold answer"):
        score_question("q?", "The", ["The", "a"], ["The", "a"], F1Judge())
    with pytest.raises(EmptyGoldError):
        grade("The", ["The", "a"])
    with pytest.raises(EmptyGoldError):
        correctness_reward(["p"], [" The"], answers=[["The", "a"]], question=["q?"])
    # with one usable alias the others are dropped, not scored: an empty answer no longer matches an empty alias
    rec = score_question("q?", "Paris", ["Paris", "Lyon"], ["The", "Paris"], F1Judge())
    assert rec["em"] == 1 and rec["correct"] == 1
    assert exact_match("", ["Paris", ""]) == 0 and best_f1("", ["Paris", ""]) == 0.0


def test_a_gold_that_is_no_string_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="list of strings"):
        usable_golds({"value": "Paris"})
    with pytest.raises(ValueError, match="flat list of strings"):
        usable_golds([["Paris"]])
    with pytest.raises(ValueError, match="hub schema"):
        qa_golds("hotpotqa", {"question": "q", "answer": ["Paris"]})  # NQ rows read as HotpotQA
