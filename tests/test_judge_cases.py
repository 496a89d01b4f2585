"""Issue 41's regression table for the ``cover`` judge (semcal_eval.qa.grading.grade / agree): every case the
issue and its review name, in both directions, plus the ones the adversary search found
(tests/test_judge_adversaries.py), the MS MARCO counts, bad input and CSR's agreement cases.

A case the judge still gets wrong is a strict xfail with what it does now in the reason: it turns red the day it
is fixed, and the marker goes.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest

from semcal_eval.qa import cover
from semcal_eval.qa.answers import EmptyGoldError, clean_answer
from semcal_eval.qa.grading import agree, grade

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SEMCAL_DATA_DIR", REPO.parent / "shared" / "data"))
CAPITAL = "What is the capital of France?"
WW2 = "When did World War II end?"
PRESIDENT = "Who was the US president in 2010?"
RIVER = "Which river flows through Lyon?"
SENTENCE = "The capital of France is Paris."

# ------------------------------------------------------------------------------------------------ correctness


def _case(answer, gold, question, why, xfail=None):
    marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
    return pytest.param(answer, gold, question, id=f"{why}: {answer[:40]!r}", marks=marks)


#: wrong answers the old grader (strict) called correct, or the issue names: must be WRONG
MUST_BE_WRONG = [
    _case("19/45", "1945", WW2, "number punctuation"),
    _case("194.5", "1945", WW2, "a decimal point inside the year"),
    _case("19-45", "1945", WW2, "a hyphen inside the year"),
    _case("19 45", "1945", WW2, "a space inside the year"),
    _case("19,45", "1945", WW2, "a comma that is no thousands mark"),
    _case("The capital of France is Lyon", SENTENCE, CAPITAL, "sentence gold, the entity changed"),
    _case("The capital of France is", SENTENCE, CAPITAL, "sentence gold, the answer dropped"),
    _case("The capital of France is Lyon.", SENTENCE, CAPITAL, "sentence gold, the entity changed, with a point"),
    _case("Paris\u2028London", "Paris", CAPITAL, "U+2028 line separator: a list"),
    _case("Paris\u2029London", "Paris", CAPITAL, "U+2029 paragraph separator: a list"),
    _case("Paris\x85London", "Paris", CAPITAL, "U+0085 next line: a list"),
    _case("Paris\vLondon", "Paris", CAPITAL, "vertical tab: a list"),
    _case("Paris\fLondon", "Paris", CAPITAL, "form feed: a list"),
    _case("Paris\rLondon", "Paris", CAPITAL, "carriage return: a list"),
    _case("London\u2028Paris", "Paris", CAPITAL, "U+2028, the gold second"),
    _case("Ly\u200bon", "Paris", CAPITAL, "a zero-width space inside a wrong answer"),
    _case("19\u2060" + "44", "1945", WW2, "a word joiner inside a wrong year"),
    _case("\ufeffLondon\u00ad", "Paris", CAPITAL, "a BOM and a soft hyphen around a wrong answer"),
    _case("...", "Paris", CAPITAL, "punctuation only"),
    _case("\u200b\ufeff", "Paris", CAPITAL, "invisible characters only"),
    _case("?!", "Paris", CAPITAL, "punctuation only"),
    _case(CAPITAL, "Paris", CAPITAL, "the question echoed"),
    _case(CAPITAL + " Lyon", "Paris", CAPITAL, "the question echoed before a wrong answer"),
    _case("Lyon apple river stone", "Paris", CAPITAL, "a wrong answer padded with junk words"),
    _case("Lyon, I think", "Paris", CAPITAL, "a paraphrased wrong answer"),
    _case("Paris, London or Berlin", "Paris", CAPITAL, "an enumeration holding the gold"),
    _case("Lyon, Paris", "Paris", CAPITAL, "a list with the gold last"),
    _case("not Paris", "Paris", CAPITAL, "a negation"),
    _case("maybe Paris", "Paris", CAPITAL, "a hedge"),
    _case("Michelle Obama", "Barack Obama", PRESIDENT, "another entity sharing a word"),
    _case("The Hundred Years War lasted 117 years, from 1337 to 1453.",
          "The Hundred Years War lasted 116 years, from 1337 to 1453.", "how long did the hundred years war last",
          "sentence gold, one number changed"),
    _case("The Mona Lisa was painted by Raphael da Vinci in Florence.",
          "The Mona Lisa was painted by Leonardo da Vinci in Florence.", "who painted the mona lisa",
          "sentence gold, one name changed"),
]

#: correct answers the old grader called wrong, or the issue names: must be CORRECT
MUST_BE_RIGHT = [
    _case("The capital of France is Paris.", "Paris", CAPITAL, "a sentence answer"),
    _case("Paris, France", "Paris", CAPITAL, "the gold with its country"),
    _case("in 1945", "1945", WW2, "a preposition before the year"),
    _case("September 2, 1945", "1945", WW2, "a full date"),
    _case("B. Obama", "Barack Obama", PRESIDENT, "an initial"),
    _case("President Obama", "Barack Obama", PRESIDENT, "a title"),
    _case("Barack Hussein Obama", "Barack Obama", PRESIDENT, "a middle name"),
    _case("Pa\u200bris", "Paris", CAPITAL, "a zero-width space inside"),
    _case("\ufeffParis", "Paris", CAPITAL, "a BOM before"),
    _case("Par\u00adis", "Paris", CAPITAL, "a soft hyphen inside"),
    _case("Pa\u2060ris", "Paris", CAPITAL, "a word joiner inside"),
    _case("Pa\u200cri\u200ds", "Paris", CAPITAL, "zero-width non-joiner and joiner"),
    _case("19\u200b45", "1945", WW2, "a zero-width space inside the year"),
    _case("Barack\u2060 Obama", "Barack Obama", PRESIDENT, "a word joiner inside a name"),
    _case("The capital of France is Paris.", SENTENCE, CAPITAL, "the sentence gold"),
    _case("PARIS.", "Paris", CAPITAL, "case and punctuation"),
    _case("1,945", "1945", WW2, "a thousands comma"),
    _case("It's Paris", "Paris", CAPITAL, "a lead-in"),
    _case("I believe it is Paris", "Paris", CAPITAL, "a paraphrase"),
    _case("Paris, I think", "Paris", CAPITAL, "a paraphrase"),
]

#: wrong answers the adversary search found graded correct (tests/test_judge_adversaries.py); the judge now gets
#: the unmarked ones right, the marked ones are still wrong on this tree
FOUND_WRONG = [
    _case("Lyon Paris", "Paris", CAPITAL, "two candidates, no list mark"),
    _case("Lyon. Paris", "Paris", CAPITAL, "two candidates, a full stop between"),
    _case("Lyon (Paris)", "Paris", CAPITAL, "a candidate in brackets"),
    _case("Lyon - Paris", "Paris", CAPITAL, "two candidates, a dash between"),
    _case("Lyon.\u2028Paris", "Paris", CAPITAL, "a full stop before the line separator"),
    _case("Paris.\u2028Lyon", "Paris", CAPITAL, "the gold first, a full stop, then a rival"),
    _case("Lyon koala forest harbor, Paris", "Paris", CAPITAL, "the rival padded past ITEM_MAX words"),
    _case("Michelle Obama, Barack Obama", "Barack Obama", PRESIDENT, "a rival sharing the gold's head word"),
    _case("Michelle Obama\u2028Barack Obama", "Barack Obama", PRESIDENT, "a rival sharing the head, U+2028"),
    _case("Yale University\u2028Harvard University", "Harvard University", "Where did Obama study law?",
          "a rival sharing the gold's head word"),
    _case("Lyon and Paris (What is the capital of France?)", "Paris", CAPITAL, "a list followed by the question"),
    _case("It is Lyon; Paris", "Paris", CAPITAL, "the rival item starts with a clause word",
          xfail="an item starting with a _CLAUSE_START word ('it', 'the', 'i') is no rival: graded correct"),
    _case("the Seine, the Rhone", "the Rhone", RIVER, "a 'the' rival (an article and a name: no clause)"),
    # benchmarks/adversary_learned.py, 2026-12-07: list_and and list_gold_first pay under cover and the learned judge
    _case("It lasted 100 years. and The Hundred Years War lasted 116 years, from 1337 to 1453.",
          "The Hundred Years War lasted 116 years, from 1337 to 1453.", "how long did the hundred years war last",
          "a sentence gold said word for word beside a rival sentence",
          xfail="a sentence gold covered word for word is correct whatever else the answer claims: a rival claim in "
                "another sentence is not read (people accept the gold beside an explanation); graded correct"),
    _case("1. The capital of Italy is Milan. 2. The capital of Italy is Rome. 3. Madrid",
          "The capital of Italy is Rome.", "What is the capital of Italy?", "a numbered list of sentence golds",
          xfail="the same: numbered claims around a sentence gold are not read as rivals; graded correct"),
    _case("The answer is Paris (Lyon)", "Paris", CAPITAL, "a rival in brackets right after the gold",
          xfail="brackets after a name usually hold an alias, abbreviation or role ('won (KRW)', 'Amanda Fuller "
                "(Kristin Baxter)'): refusing them cost 59 dev answers people judged correct; graded correct"),
    _case("Harvard Smith, Yale University", "Harvard University", "Where did Obama study law?",
          "a gold matched across two list items", xfail="'Harvard' from one item, 'University' from the other"),
    _case("The Treaty of Versailles of 1919 is the peace treaty created as a result of six months of negotiations at "
          "the Paris Peace Conference of 1919, which put an official end to World War I between the Texas and Central "
          "Powers, but if it brought peace rather than war can be disputed.",
          "The Treaty of Versailles of 1919 is the peace treaty created as a result of six months of negotiations at "
          "the Paris Peace Conference of 1919, which put an official end to World War I between the Allies and "
          "Central Powers, but if it brought peace rather than war can be disputed.",
          "the terms of the treaty of versailles for kids", "a long sentence gold, one name changed"),
    _case("Who is the chief officer of the senate?", "Senate", "who is the chief officer of the senate",
          "the question, capitalised, for a gold the question holds"),
]

#: correct answers the search found graded wrong (no gain for a policy, but the judge is wrong about them)
FOUND_RIGHT = [
    _case("Hmm, Paris", "Paris", CAPITAL, "an interjection lead-in", xfail="'hmm' is read as a rival item: wrong"),
    _case("Paris (final)", "Paris", CAPITAL, "a remark in brackets", xfail="'final' is read as a rival item: wrong"),
    _case("Surely Paris", "Paris", CAPITAL, "an adverb lead-in", xfail="graded wrong"),
    _case("graham mctavish", "Graham McTavish", "who plays the saint of killers on preacher", "the gold in lower case"),
    _case("GRAHAM MCTAVISH", "Graham McTavish", "who plays the saint of killers on preacher", "the gold in capitals"),
    _case("Answer - Paris", "Paris", CAPITAL, "a lead-in with a dash", xfail="graded wrong"),
    _case("revolution or orbital revolution", "revolution or orbital revolution",
          "an object that moves around an external axis is said to be", "a gold with its own 'or', verbatim"),
    _case("2017/18", "2017/18", "when is the last time the vikings were in the nfc championship",
          "a gold with its own '/', verbatim"),
]


#: the rules of 2026-12-05 (docs/JUDGE.md, "Read and held-out folds"), each in both directions; the shapes come from
#: EVOUNA's disagreements, the texts are made up here. (answer, golds, question)
SIGNERS = ["William Paca", "Samuel Chase", "Charles Carroll of Carrollton", "Thomas Stone"]
SIGNED = "who signed the declaration of independence for maryland"
SEASON = "when did the nba add the three point line"
AIRED = "when did the show first air"
SANCTUARY = "what is the inner sanctuary of a greek temple called"
SHAPES_RIGHT = [
    ("Samuel Chase, Thomas Stone and Charles Carroll signed it.", SIGNERS, SIGNED, "a set question: golds listed"),
    ("naos or cella", ["cella", "naos"], SANCTUARY, "two golds offered with 'or'"),
    ("in 2000", ["September 4, 2000"], AIRED, "a date gold answered with its year"),
    ("It first aired in September 2000.", ["September 4, 2000"], AIRED, "a date gold answered with month and year"),
    ("the 1979-1980 season", ["1979–80"], SEASON, "a season written in full"),
    ("Sandown Park.", ["Sandown"], "where is the gold cup run", "a kind of place completing the name"),
    ("Rutherford B. Hayes", ["Hayes"], "which president had the first name rutherford", "a middle initial"),
    ("Joan Crawford", ["Crawford"], "which joan's career was revived by the film", "a possessive in the question"),
    ('Bob Dylan wrote "Knockin\' on Heaven\'s Door."', ["Bob Dylan"], "who wrote knocking on heavens door",
     "a quoted title beside the gold is no list item"),
    ("It is sung by Kygo and Selena Gomez.", ["Selena Gomez"], "who sings it aint me", "a partner joined by 'and'"),
    ("The currency is the South Korean won (KRW).", ["won"], "what is the currency of south korea",
     "an abbreviation in brackets after the gold"),
    ("Release: the MacBook Pro 13-inch was released in 2009.", ["June 8, 2009"],
     "when was the macbook pro 13 inch released", "a hyphen inside a word is no dash"),
    ("I'd say Paris", ["Paris"], CAPITAL, "a contraction of chatter"),
    ("Paris. It is the capital of France.", ["Paris"], CAPITAL, "the gold, then a sentence about it"),
    # 2026-12-06 (task version 3.2)
    ("There have been twenty-seven of them.", ["27"], "how many amendments are there", "a compound number word"),
    ("It is an eight-episode series.", ["8"], "how many episodes are there", "a number word in a hyphenated word"),
    ("She won gold at the 1960 Summer Olympics.", ["1960"], "when did she win gold",
     "a word beside a number gold in a sentence is what it counts"),
    ("The part was played byRicky Nelsonin the film.", ["Ricky Nelson"], "who played the kid",
     "a name glued by dropped spaces (a chat interface's bold text)"),
    ("Secretariat", ["Secretariat, who in 1973 became the first Triple Crown champion in 25 years"],
     "which horse ranks highest", "a long gold's opening name"),
]
SHAPES_WRONG = [
    ("Samuel Chase, John Hancock", SIGNERS, SIGNED, "a gold listed beside a rival that is no gold"),
    ("naos or pronaos", ["cella", "naos"], SANCTUARY, "a gold offered beside a rival"),
    ("May 2000", ["September 4, 2000"], AIRED, "the year with another month"),
    ("5 September 2000", ["September 4, 2000"], AIRED, "the year with another day"),
    ("2000, 2001", ["September 4, 2000"], AIRED, "the year listed beside another"),
    ("the 1978-79 season", ["1979–80"], SEASON, "another season"),
    ("Lyon Paris is the answer.", ["Paris"], CAPITAL, "a rival at the start of a sentence"),
    ("Lyon Paris won", ["Paris"], CAPITAL, "two bare candidates and a verb"),
    ('Lyon "Paris"', ["Paris"], CAPITAL, "a quoted gold beside a bare rival"),
    ("Paris rome", ["Paris"], CAPITAL, "a rival in lower case beside a cased gold"),
    ("Lyon, Paris", ["Paris", "Paris, France"], CAPITAL, "an alias's words do not excuse a rival"),
    # the adversary search's listings (research/answer_grammar.py, prefix/suffix x list_bare), closed 2026-12-05
    ("The answer is Lyon - Paris", ["Paris"], CAPITAL, "a clause and the gold across a dash"),
    ("Paris - The answer is Lyon", ["Paris"], CAPITAL, "the gold and a clause across a dash"),
    ("The answer is Paris - Lyon", ["Paris"], CAPITAL, "a rival right after the gold across a dash"),
    ("The answer is Lyon (Paris)", ["Paris"], CAPITAL, "the gold in brackets after a clause"),
    ("Paris The answer is Lyon", ["Paris"], CAPITAL, "a clause run on after the gold"),
    ("The answer is Lyon! Paris", ["Paris"], CAPITAL, "the gold as its own sentence after a claim"),
    ("Lyon! Paris is the answer", ["Paris"], CAPITAL, "a bare rival sentence before the gold's"),
    ("Paris I think Lyon", ["Paris"], CAPITAL, "chatter between two names"),
    ("Lyon is the answer Paris", ["Paris"], CAPITAL, "a claim and the gold juxtaposed"),
    ("Paris Q: A: Lyon", ["Paris"], CAPITAL, "a prompt format between two names"),
    ("Paris Paris Lyon", ["Paris"], CAPITAL, "the gold said twice, then a rival"),
    # 2026-12-06 (task version 3.2): the opposite numbers of the rules above
    ("twenty-six", ["27"], "how many amendments are there", "another compound number word"),
    ("1964 1960", ["1960"], "when did she win gold", "a number beside a number gold"),
    ("1960 Lyon", ["1960"], "when did she win gold", "a bare word beside a number gold"),
    ("1. Lyon\n2. Paris", ["Paris"], CAPITAL, "a numbered list of candidates (its numbers are rivals' marks)"),
    ("definitely Lyon  Visitors must be at least 18 years old", ["Visitors must be at least 18 years old"],
     "what is the age limit", "a rival beside a sentence gold that holds a number (the number rule is for number golds)"),
    ("1. Paris\n2. Lyon", ["Paris"], CAPITAL, "a numbered list with the gold first"),
    ("The part was played byRicky Nelsonville in the film.", ["Ricky Nelson"], "who played the kid",
     "a glued word that is no function word"),
    ("Brandon", ["Russell Brand"], "who hosted it", "a name that starts with the gold's in a text with no glue"),
    ("The Constitution has 8 articles.", ["The Constitution, originally comprising seven articles, sets out the "
     "national frame of government."], "what does the constitution set out", "a sentence gold's subject is no alias"),
    ("Lyon", ["Secretariat, who in 1973 became the first Triple Crown champion in 25 years"],
     "which horse ranks highest", "another name for a long gold"),
    # 2026-12-07 (issue 51's attacks on sentence golds, research/answer_grammar.MODEL_JUDGE_ATTACKS)
    ("Not The capital of Italy is Rome.. Milan", ["The capital of Italy is Rome."], "What is the capital of Italy?",
     "a negation before the gold's wording said again, and a run of full stops"),
    ("It is definitely not The capital of Italy is Rome.; it is Milan.", ["The capital of Italy is Rome."],
     "What is the capital of Italy?", "a denial of the gold's wording"),
    ("Maybe The capital of Italy is Rome., maybe Milan, I am not sure.", ["The capital of Italy is Rome."],
     "What is the capital of Italy?", "a hedge before the gold's wording"),
    ("Some say The capital of Italy is Rome., but the answer is Milan.", ["The capital of Italy is Rome."],
     "What is the capital of Italy?", "the gold's wording quoted before a rival"),
    ("Not The apothem of a regular polygon is a line segment from the center to the midpoint of one of its sides. "
     "A polygon with equal sides.", ["The apothem of a regular polygon is a line segment from the center to the "
     "midpoint of one of its sides."], "what is a apothem", "a sentence gold negated"),
    ("La réponse est Lyon, pas Paris.", ["Paris"], CAPITAL, "a negation in another language"),
    ("Rome.. Milan", ["Rome"], "What is the capital of Italy?", "two claims across a run of full stops"),
    # 2026-12-07 (issue 51's hedges between the gold and a rival: an article before a name makes no clause)
    ("the Seine and the Rhone", ["the Rhone"], "Which river flows through Lyon?", "an article-headed rival before"),
    ("the Rhone, the Seine, Berlin, Madrid", ["the Rhone"], "Which river flows through Lyon?",
     "an article-headed rival after, in a list"),
]


def _shape(answer, golds, question, why):
    return pytest.param(answer, golds, question, id=f"{why}: {answer[:40]!r}")


@pytest.mark.parametrize("answer,golds,question", [_shape(*c) for c in SHAPES_RIGHT])
def test_shapes_people_accept_are_correct(answer, golds, question):
    assert grade(answer, golds, question)


@pytest.mark.parametrize("answer,golds,question", [_shape(*c) for c in SHAPES_WRONG])
def test_shapes_beside_them_stay_wrong(answer, golds, question):
    assert not grade(answer, golds, question)


def test_each_defence_refuses_its_own_case():
    """The grader's defences (cover.DEFENCES) are separate checks: switching one off admits its case alone."""
    own = {"negation": "The capital is not Paris.", "neighbour": "Lyon Paris",
           "alternative": "The capital is Paris or Lyon.", "list": "It is Paris, Lyon."}
    saved = cover.DEFENCES
    try:
        for off, answer in own.items():
            assert not grade(answer, ["Paris"], CAPITAL), answer
            cover.DEFENCES = tuple(d for d in saved if d != off)
            assert grade(answer, ["Paris"], CAPITAL), (off, answer)
            others = [a for d, a in own.items() if d != off]
            assert not any(grade(a, ["Paris"], CAPITAL) for a in others), off
            cover.DEFENCES = saved
    finally:
        cover.DEFENCES = saved


@pytest.mark.parametrize("answer,gold,question", MUST_BE_WRONG + FOUND_WRONG)
def test_wrong(answer, gold, question):
    assert not grade(answer, [gold], question)


@pytest.mark.parametrize("answer,gold,question", MUST_BE_RIGHT + FOUND_RIGHT)
def test_right(answer, gold, question):
    assert grade(answer, [gold], question)


def test_the_old_grader_disagreed_on_the_issue_cases():
    """The issue's cases are the ones the strict rule gets wrong (else they prove nothing about the change)."""
    from semcal_eval.qa.grading import grade_strict

    for a in ("19/45", "194.5", "19-45"):
        assert grade_strict(a, ["1945"], WW2) and not grade(a, ["1945"], WW2)
    assert grade_strict("The capital of France is Lyon", [SENTENCE], CAPITAL)
    for a, g, q in (("Paris, France", "Paris", CAPITAL), ("in 1945", "1945", WW2), ("B. Obama", "Barack Obama", "")):
        assert not grade_strict(a, [g], q) and grade(a, [g], q)


# ------------------------------------------------------------------------------------------------ separators


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85", "\v", "\f", "\r"])
def test_clean_answer_splits_on_newline_only(sep):
    """The generation stops at "\\n"; any other separator stays inside the answer, where the judge reads a list."""
    assert clean_answer(f"Paris{sep}London") == f"Paris{sep}London"
    assert clean_answer(f" Paris{sep}London\nQ: next") == f"Paris{sep}London"
    assert not grade(clean_answer(f"Paris{sep}London\nQ: next"), ["Paris"], CAPITAL)
    assert clean_answer("Paris\nLondon") == "Paris"


def test_training_reward_reads_a_separator_as_a_list():
    from trainers.rewards import correctness_reward

    for sep in ("\u2028", "\x85", "\v"):
        comp = [f" Paris{sep}London\nQ: next"]
        assert correctness_reward(["p"], comp, answers=[["Paris"]], question=[CAPITAL]) == [0.0], repr(sep)
    assert correctness_reward(["p"], [" Paris\nLondon"], answers=[["Paris"]], question=[CAPITAL]) == [1.0]


# ------------------------------------------------------------------------------------------------ bad input


def test_no_gold_is_refused_with_the_fix():
    with pytest.raises(EmptyGoldError, match="Drop unanswerable questions"):
        grade("x", [])
    with pytest.raises(EmptyGoldError):
        grade("x", ["", "  ", "..."])


@pytest.mark.parametrize("bad", [None, 3, 3.5, b"Paris", ["Paris"]])
def test_an_answer_that_is_no_string_is_refused(bad):
    with pytest.raises(cover.CoverError, match="must be a string"):
        grade(bad, ["Paris"])  # a usable gold ("a" normalises to nothing and is refused first)
    with pytest.raises(cover.CoverError):
        agree(bad, "a")


def test_a_megabyte_answer_is_graded_in_bounded_time_and_a_longer_one_refused():
    big = ("Paris is a city. " * 70_000)[: cover.MAX_CHARS]
    t0 = time.perf_counter()
    assert grade(big, ["Paris"], CAPITAL) in (True, False)
    assert time.perf_counter() - t0 < 30.0
    with pytest.raises(cover.CoverError, match="truncate"):
        grade("x" * (cover.MAX_CHARS + 1), ["Paris"])


# ------------------------------------------------------------------------------------------------ agreement


PARAPHRASES = ["Lyon", "It's Lyon", "LYON!", "The city of Lyon", "Lyon, I think", "I believe it is Lyon"]


def test_paraphrases_of_one_wrong_answer_agree_pairwise():
    """The review: "Six of 8 paraphrases of one wrong answer are paid as distinct best wrong answers"."""
    bad = [(a, b) for a in PARAPHRASES for b in PARAPHRASES if not agree(a, b, CAPITAL)]
    assert not bad


def test_agreement_is_reflexive_and_symmetric_empty_included():
    for a in ["", "...", "?", " ", "\u200b", "Lyon", "Lyon, Nice", "not Lyon"]:
        assert agree(a, a, CAPITAL), repr(a)
    assert not agree("", "Lyon", CAPITAL) and not agree("...", "Lyon", CAPITAL)
    for a in PARAPHRASES + ["Lyon or Nice", "Nice", "not Lyon", ""]:
        for b in PARAPHRASES + ["Lyon or Nice", "Nice", "not Lyon", ""]:
            assert agree(a, b, CAPITAL) == agree(b, a, CAPITAL), (a, b)
    # another claim: negated, or another answer (a hedge or a list beside the claim is not: grading.agree)
    assert not agree("Lyon", "not Lyon", CAPITAL) and not agree("Lyon", "Nice", CAPITAL)
    assert not agree("Barack Obama", "Michelle Obama", PRESIDENT)


def _rcal(group, method="csr"):
    import test_judge_adversaries as T

    return T.r_cal(group, method, CAPITAL)


PADS = ["Lyon apple", "Lyon river stone", "Lyon cloud garden window", "Lyon silver morning"]


@pytest.mark.xfail(strict=True, reason=(
    "measured: 4 honest 'Lyon' + 4 'Lyon' padded with different junk words, K = 8 all wrong, csr: padded "
    "rollouts -3.947, honest -6.906 nats (the pads disagree with each other under agree())"))
def test_padding_a_wrong_answer_pays_nothing():
    """The review: "Appending junk words to a wrong answer scatters it and pays: in a K = 8 all-wrong group, the
    padded rollouts get −0.000 where the honest ones get −0.691". No padded rollout may out-earn its honest
    twins."""
    r = _rcal(["Lyon"] * 4 + PADS)
    assert r[4:].max() <= r[:4].min() + 1e-12, r.round(3).tolist()


def test_one_padded_rollout_pays_nothing():
    honest = _rcal(["Lyon"] * 8)
    for pad in PADS:
        r = _rcal(["Lyon"] * 7 + [pad])
        assert r[7] <= honest[7] + 1e-12, (pad, r.round(3).tolist())


@pytest.mark.parametrize("method", ["csr", "csr_likelihood", "csr_spread"])
def test_zero_width_copies_do_not_scatter(method):
    """The review: "Zero-width copies scatter for free"."""
    copies = ["Lyon", "Ly\u200bon", "\ufeffLyon", "Ly\u00adon", "Lyo\u2060n", "L\u200cyon", "Lyon\u200d", "LY\u200bON"]
    r0, r1 = _rcal(["Lyon"] * 8, method), _rcal(copies, method)
    assert np.allclose(r0, r1), (r0.round(3).tolist(), r1.round(3).tolist())


def test_training_and_evaluation_read_one_confidence():
    """The review: "on one paraphrase group, confidence is 0.2 in training and 0.8 at evaluation". Training's
    p_j (the share of partners that agree with rollout j) and the evaluation's cluster share of the greedy
    answer are one number now: both read agree()."""
    from semcal_eval.qa.agreement import score_question
    from semcal_eval.qa.judges import get_judge
    from trainers.rewards.csr import RewardSettings, group_calibration_scores

    greedy = "Lyon"
    samples = PARAPHRASES[1:] + ["Lyon.", "lyon", "LYON", "Nice", "Marseille"]
    rec = score_question(CAPITAL, greedy, samples, ["Paris"], get_judge("cover"))
    group = [greedy, *samples]
    A = np.array([[1.0 if i == j else float(agree(a, b, CAPITAL)) for j, b in enumerate(group)]
                  for i, a in enumerate(group)])
    _, p = group_calibration_scores(A[None], np.zeros((1, len(group))), RewardSettings(eps=1e-3))
    assert rec["conf"] == pytest.approx(0.8)
    assert p[0, 0] == pytest.approx(rec["conf"])


@pytest.mark.parametrize("method", ["csr", "csr_likelihood", "csr_spread"])
def test_the_search_reads_r_cal_as_the_trainer_does(method):
    """tests/test_judge_adversaries.py builds A from agree() and calls group_calibration_scores; the trainer's
    calibration_reward (its judge, answer extraction and options) gives the same r_cal on these groups."""
    import test_judge_adversaries as T
    from trainers.rewards.csr import RewardSettings, calibration_reward

    o = T.method_options(method)
    for group in (["Lyon"] * 4 + PADS, ["Lyon"] * 8, ["Paris", "Paris", "Lyon", "It's Lyon", "LYON!", "...", "",
                                                      "Ly\u200bon"], ["Paris"] * 2 + ["Nice", "Lyon"] * 3):
        settings = RewardSettings(eps=o["eps"], reading=o["reading"], lambda_schedule="constant", lambda_max=1.0,
                                  judge="cover", score=o["score"], bounded=o["bounded"],
                                  empty_answer=o["empty_answer"], agreement_wrong=o["agreement_wrong"])
        got = calibration_reward(["q"] * 8, [" " + a for a in group], settings=settings, num_generations=8,
                                 answers=[["Paris"]] * 8, question=[CAPITAL] * 8)
        assert np.allclose(got, _rcal(group, method)), (method, group, np.round(got, 3).tolist())


def test_identical_empty_rollouts_agree_in_csr():
    """Empty answers are reflexive under the judge: 8 identical "..." rollouts agree (r_cal = log ε, the score of
    any repeated wrong answer), so saying nothing in unison is not paid as disagreement."""
    r = _rcal(["..."] * 8)
    assert np.allclose(r, math.log(1e-3))


# ------------------------------------------------------------------------------------------------ MS MARCO

MSMARCO = DATA / "msmarco" / "msmarco_v1.1_test_qa_1000.parquet"
_ORDINALS = ("first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth "
             "fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth").split()
_NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                 "sixteen seventeen eighteen nineteen twenty").split()


def every_number_changed(text: str) -> str:
    """Every number the judge reads changed: digits (+1000, "1,945" too), number words and ordinals."""
    def bump(m):
        t = m.group().replace(",", "")
        places = len(t.split(".")[1]) if "." in t else 0
        return f"{float(t) + 1000:.{places}f}"

    text = re.sub(r"\d[\d,]*(?:\.\d+)?", bump, text)
    text = re.sub(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b",
                  lambda m: str(_NUMBER_WORDS.index(m.group().lower()) + 1000), text, flags=re.I)
    return re.sub(r"\b(" + "|".join(_ORDINALS) + r")\b",
                  lambda m: f"{_ORDINALS.index(m.group().lower()) + 1001}th", text, flags=re.I)


def _msmarco():
    if not MSMARCO.is_file():
        pytest.skip(f"{MSMARCO} not found (the local data mirror; set SEMCAL_DATA_DIR)")
    import pandas as pd

    df = pd.read_parquet(MSMARCO)
    return [(q, [str(x) for x in g]) for q, g in zip(df["query"], df["generation_gt"], strict=True)]


#: measured on this tree: sentence golds with a number (one the question does not hold), graded correct after
#: every number is changed
NUMBER_CHANGED_CORRECT = 0


def _numbers(text: str) -> set[str]:
    return {w for w in cover.content(text) if w[0].isdigit()}


def test_msmarco_sentence_golds_with_every_number_changed_are_wrong():
    """The review: sentence golds holding a number were graded correct after every number was changed. A number
    the question holds ("who won the second battle of bull run": "The second was won by ...") is no evidence,
    so only golds with a number of their own count."""
    rows = _msmarco()
    cases = [(q, g) for q, golds in rows for g in golds
             if len(cover.content(g)) >= 5 and _numbers(g) - _numbers(q)]
    assert len(cases) >= 100, "too few sentence golds with a number: the count proves nothing"
    changed = [(q, g, every_number_changed(g)) for q, g in cases]
    bad = [(q, g, c) for q, g, c in changed if grade(c, [g], q)]
    print(f"MS MARCO: {len(bad)} of {len(cases)} sentence golds with a number correct after every number changed")
    assert len(bad) == NUMBER_CHANGED_CORRECT, bad[:5]


def _question_only(rows):
    return [q for q, golds in rows if grade(q, golds, q) or grade(q[:1].upper() + q[1:] + "?", golds, q)]


#: measured on this tree: grade("what is a web spider", ["An ant, an automatic indexer, or a Web scutter."],
#: "what is a web spider") is True; "Who is the chief officer of the senate?" (gold "Senate") and "What kind of
#: ships did the phoenicians use?" (gold "The Phoenician ships.") are True, their lower-case forms False
QUESTION_ONLY_KNOWN = {"what is a web spider", "who is the chief officer of the senate",
                       "what kind of ships did the phoenicians use"}


def test_msmarco_question_only_answers_no_new_case():
    """The review: answers that are only the question were graded correct. No question beyond the known one."""
    bad = _question_only(_msmarco())
    print(f"MS MARCO: {len(bad)} of 1000 questions graded correct when the answer is the question: {bad}")
    assert set(bad) <= QUESTION_ONLY_KNOWN, bad


def test_msmarco_question_only_answers_are_wrong():
    assert not _question_only(_msmarco())


def test_nq_open_question_only_answers_are_wrong():
    path = DATA / "nq_open" / "NQ-open.dev.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    rows = [json.loads(x) for x in path.read_text().splitlines()[:1000]]
    rows = [r for r in rows if any(not cover.is_empty(g) for g in r["answer"])]  # "---": no gold
    bad = [r for r in rows if grade(r["question"], r["answer"], r["question"])]
    print(f"NQ-Open: {len(bad)} of {len(rows)} questions graded correct when the answer is the question")
    assert len(bad) <= 2, bad[:5]  # a gold the question spells out ("... the answer is in the question")
