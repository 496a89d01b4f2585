"""Issue 41 item 3: no answer format games the ``cover`` judge — a generative adversary search over the extended
grammar of research/answer_grammar.py, for correctness (:func:`semcal_eval.qa.grading.grade`) and for agreement
(:func:`semcal_eval.qa.grading.agree`, CSR's J(C_j, C_i)) under every CSR method.

- (a) correctness: no program turns a wrong answer into a correct one, for short golds and sentence golds,
  hand-written and real (NQ-Open dev, MS MARCO v1.1 test; the real part skips when ../shared/data lacks them);
- (b) dressing (:data:`research.answer_grammar.DRESSING`, ``invisible`` included) and paraphrase keep a correct
  answer correct, and the dressed answer agrees with the original;
- (c) agreement: in a group of K = 8 rollouts of one honest wrong answer, a program that keeps the answer's claim
  (:data:`~research.answer_grammar.KEEPS_CLAIM`) does not raise the transformed rollout's r_cal, under csr
  (the paper's pairwise log score), csr_likelihood and csr_spread (with its ``overlap`` reading of a wrong
  rollout's partners), each read with its shipped options (trainers/configs/<method>.yaml).

Where a real exploit remains it is kept as a strict xfail holding the measured numbers, so the test turns red
the day the judge is fixed (and the marker must go). The searches run ``derandomize=True`` (the same programs on
every run); ``python benchmarks/adversary_search.py --seed N`` searches further.
"""

from __future__ import annotations

import functools
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from research import answer_grammar as G
from semcal_eval.qa import cover
from semcal_eval.qa.grading import agree, grade
from trainers.answer_match import overlap_matrix
from trainers.rewards.csr import CSR_METHODS, DEFAULT_EPS, DEFAULT_READING, RewardSettings, group_calibration_scores

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SEMCAL_DATA_DIR", REPO.parent / "shared" / "data"))
K = 8
SEARCH = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

# ------------------------------------------------------------------------------------------------ question/gold pairs

#: (question, gold, wrong answers of the gold's kind: a rival candidate, never the gold in other words)
HAND = (
    ("What is the capital of France?", "Paris", ("Lyon", "Marseille", "Rome")),
    ("When did World War II end?", "1945", ("1944", "1939", "1918")),
    ("Who was the US president in 2010?", "Barack Obama", ("Michelle Obama", "George Bush", "Joe Biden")),
    ("Which river flows through Lyon?", "the Rhone", ("the Seine", "the Thames", "the Loire")),
    ("Where did Obama study law?", "Harvard University", ("Yale University", "Stanford", "Columbia University")),
    ("How many legs does a spider have?", "eight", ("six", "10", "four")),
    ("What is the capital of Italy?", "The capital of Italy is Rome.", ("The capital of Italy is Milan.", "Milan")),
    ("what is a apothem",
     "The apothem of a regular polygon is a line segment from the center to the midpoint of one of its sides.",
     ("A polygon with equal sides.", "the radius of a circle")),
    ("how long did the hundred years war last", "The Hundred Years War lasted 116 years, from 1337 to 1453.",
     ("It lasted 100 years.", "100 years")),
    ("who painted the mona lisa", "The Mona Lisa was painted by Leonardo da Vinci in Florence.",
     ("Michelangelo", "It was painted by Raphael in Rome.")),
)
SENTENCE_HAND = tuple(p for p in HAND if len(cover.content(p[1])) >= 5)


def _numbers(text: str) -> list[str]:
    return [w for w in cover.content(text) if w[0].isdigit()]


def _numeric(text: str) -> bool:
    return any(w[0].isdigit() for w in cover.content(text))


def _usable(question: str, gold: str) -> bool:
    """A gold with a word or number the question does not hold (else the question alone would be the answer)."""
    qw = cover.content(question)
    ev = [w for w in cover.content(gold) if w not in cover.STOP_WORDS]
    return bool(ev) and any(not any(cover.words_match(w, x) for x in qw) for w in ev)


@functools.lru_cache(maxsize=None)
def nq_pairs(n: int = 150) -> tuple:
    """The first ``n`` usable NQ-Open dev questions; wrong answers: other questions' golds of the same kind
    (number or words). Empty when the file is missing."""
    path = DATA / "nq_open" / "NQ-open.dev.jsonl"
    if not path.is_file():
        return ()
    rows = [json.loads(line) for line in path.read_text().splitlines()[: 3 * n]]
    rows = [(r["question"], r["answer"][0]) for r in rows if r.get("answer") and _usable(r["question"], r["answer"][0])]
    out = []
    for i, (q, g) in enumerate(rows[:n]):
        rivals = []
        for j in range(1, len(rows)):
            h = rows[(i + 7 * j) % len(rows)][1]
            if _numeric(h) == _numeric(g) and not grade(h, [g], q) and not grade(g, [h], q):
                rivals.append(h)
                if len(rivals) == 2:
                    break
        out.append((q, g, tuple(rivals)))
    return tuple(p for p in out if p[2])


@functools.lru_cache(maxsize=None)
def msmarco_pairs(n: int = 120) -> tuple:
    """The first ``n`` MS MARCO rows whose first gold is a sentence (≥ 5 content words) the question does not
    echo; wrong answers: the next row's sentence gold and a short distractor. Empty when the file is missing."""
    path = DATA / "msmarco" / "msmarco_v1.1_test_qa_1000.parquet"
    if not path.is_file():
        return ()
    import pandas as pd

    df = pd.read_parquet(path)
    rows = [(q, str(g[0])) for q, g in zip(df["query"], df["generation_gt"], strict=True)
            if len(g) and len(cover.content(str(g[0]))) >= 5 and _usable(q, str(g[0]))]
    return tuple((q, g, (rows[(i + 1) % len(rows)][1], "Lyon")) for i, (q, g) in enumerate(rows[:n]))


def _need(pairs):
    if not pairs:
        pytest.skip(f"the local data mirror {DATA} lacks the file (set SEMCAL_DATA_DIR to ../shared/data)")
    return pairs


def _instances(pairs):
    return [(q, g, w) for q, g, ws in pairs for w in ws]


# ------------------------------------------------------------------------------------------------ (a) correctness

#: steps that put another candidate beside the answer (a list); searched apart below
LISTING = ("list_gold", "list_other", "list_bare", "linesep")
NON_LISTING = tuple(op for op in G.OPS if op not in LISTING)


def _honest_rewrite(program, wrong: str, gold: str, question: str, attacked: str) -> bool:
    """The program wrote a correct answer honestly: the gold itself back; a number swap whose number the gold
    still says elsewhere ("Each one" changed while "the first time" reads 1) with claim-keeping steps only; or a
    negated "no" for the gold "yes" ("it isn't no" says yes)."""
    if cover.content(attacked) == cover.content(gold):
        return True
    swaps = [i for i, (op, _) in enumerate(program) if op == "number_swap"]
    if swaps and set(_numbers(gold)) <= set(_numbers(attacked)) and all(
            op in G.KEEPS_CLAIM for op, _ in program[swaps[-1] + 1:]):  # (the swap ignores the steps before it)
        return True
    yes_no = {w for w in cover.content(gold)} <= {"yes", "no"}
    return yes_no and any(op == "negate" for op, _ in program)


def _check_wrong_stays_wrong(question, gold, wrong, program):
    attacked = G.run(program, wrong, gold, question)
    if _honest_rewrite(program, wrong, gold, question, attacked):
        return
    assert not grade(attacked, [gold], question), (question, gold, wrong, program, attacked)


@settings(max_examples=500, **SEARCH)
@given(case=st.sampled_from(_instances(HAND)), program=G.attacks(max_steps=3, ops=NON_LISTING))
def test_no_program_makes_a_wrong_answer_correct(case, program):
    """Dressing, invisible characters, punctuation-only, number punctuation, junk padding, the question echoed,
    paraphrase, a near miss of the gold (one name or number changed), hedges, negations, translation, garbling:
    a wrong answer stays wrong."""
    _check_wrong_stays_wrong(*case, program)


@settings(max_examples=250, **SEARCH)
@given(i=st.integers(0, 10**6), program=G.attacks(max_steps=3, ops=NON_LISTING))
def test_no_program_makes_a_wrong_answer_correct_on_real_questions(i, program):
    cases = _instances(_need(nq_pairs())) + _instances(_need(msmarco_pairs()))
    _check_wrong_stays_wrong(*cases[i % len(cases)], program)


def test_real_question_sets_are_there():
    """The real part of the searches needs the mirror; say so instead of passing vacuously."""
    assert len(_need(nq_pairs())) >= 100 and len(_need(msmarco_pairs())) >= 100


@settings(max_examples=300, **SEARCH)
@given(case=st.sampled_from(_instances(SENTENCE_HAND)), i=st.integers(0, 10**6),
       swap=st.sampled_from(G.NEAR_MISS), k=st.integers(0, 59),
       dress=G.attacks(max_steps=2, ops=G.DRESSING + G.PARAPHRASING + ("pad", "echo", "prefix")))
def test_a_sentence_gold_with_one_name_or_number_changed_is_wrong(case, i, swap, k, dress):
    """MS MARCO's sentence golds: the gold with one name (not the question's) or one number changed, then dressed,
    padded or echoed, is wrong. Hand-written sentences and the first MS MARCO sentence golds."""
    real = msmarco_pairs()
    q, gold, _ = real[i % len(real)] if (real and i % 2) else case
    near = G.apply(swap, k, "", gold, q)
    assume(near)  # the gold has no such name or number
    # the changed number must be gone from the judge's reading: "one" changed while "the first time" (read as 1)
    # stays is no changed number
    assume(swap != "number_swap" or not set(_numbers(gold)) <= set(_numbers(near)))
    attacked = G.run(dress, near, gold, q)
    assert not grade(attacked, [gold], q), (q, gold, swap, k, dress, attacked)


# "the Rhone<sep>the Seine" was graded correct until an article before a name made a list item (2026-12-07)
@pytest.mark.parametrize("sep", G.LINE_SEPARATORS, ids=[f"U+{ord(s):04X}" for s in G.LINE_SEPARATORS])
@pytest.mark.parametrize("q,gold,wrongs", [pytest.param(*p, id=p[1]) for p in HAND[:6]])
def test_a_line_separator_between_the_gold_and_a_rival_is_a_list(sep, q, gold, wrongs):
    """"Paris⏎London" with any line or paragraph separator (and the gold dressed) is a list: wrong, either order."""
    for wrong in wrongs:
        for dressed in (gold, G.apply("invisible", 3, gold, gold, q), gold.upper()):
            for text in (dressed + sep + wrong, wrong + sep + dressed):
                assert not grade(text, [gold], q), (gold, text)


#: measured on this tree (2026-12-07): the same kind of seeded draw in benchmarks/bench_judge_humans.py (up to 2
#: steps, then list_gold or list_bare, maybe a dressing step; hand pairs) finds 355 of 2,730 listings graded correct,
#: e.g. "eight  I am sure it's six" (gold "eight"), "the Rhone  the seine", "I am sure it's Lyon; Paris"; its
#: defence table gives what each defence buys. benchmarks/adversary_search.py counted 159 of 1,557 listing programs
#: over all pairs on 2026-12-06 (the reward search pays +1 correctness for such a listing).
#: tests/test_judge_cases.py holds single forms.
LISTING_EXPLOIT = ("cover reads a rival listed beside the gold as one claim: 355 of 2,730 seeded listings are graded "
                   "correct, e.g. 'eight  I am sure it\'s six' (gold 'eight'), 'the Rhone  the seine', "
                   "'I am sure it\'s Lyon; Paris' (gold 'Paris')")


@pytest.mark.xfail(strict=True, reason=LISTING_EXPLOIT)
@settings(max_examples=300, phases=[Phase.explicit, Phase.generate], **SEARCH)  # no shrinking while it fails
@given(case=st.sampled_from(_instances(HAND)), before=G.attacks(max_steps=2, ops=NON_LISTING),
       listing=st.tuples(st.sampled_from(("list_gold", "list_bare")), st.integers(0, 59)),
       after=st.lists(st.tuples(st.sampled_from(G.DRESSING + ("question", "suffix", "pad")), st.integers(0, 59)),
                      max_size=1))
def test_listing_the_gold_beside_a_rival_is_wrong(case, before, listing, after):
    """A rival candidate (the wrong answer, transformed) with the gold beside it, with or without a list mark."""
    q, gold, wrong = case
    program = [*before, listing, *after]
    attacked = G.run(program, wrong, gold, q)
    rival = G.run(before, wrong, gold, q)
    assume(cover.content(rival) and not grade(rival, [gold], q) and not _honest_rewrite(before, wrong, gold, q, rival))
    assert not grade(attacked, [gold], q), (q, gold, program, attacked)


# ------------------------------------------------------------------------------------------------ (b) dressing


def _dress_cases():
    return [(q, g) for q, g, _ in HAND]


@settings(max_examples=300, **SEARCH)
@given(i=st.integers(0, 10**6), program=G.attacks(max_steps=4, ops=G.DRESSING))
def test_dressing_keeps_a_correct_answer_correct_and_agreeing(i, program):
    """Case, punctuation, accents, homoglyphs, spaces and invisible characters: the gold stays correct and agrees
    with itself undressed. Hand-written golds and real ones (NQ-Open, MS MARCO sentences) when present."""
    cases = _dress_cases() + [(q, g) for q, g, _ in nq_pairs()] + [(q, g) for q, g, _ in msmarco_pairs()]
    q, gold = cases[i % len(cases)]
    assume(grade(gold, [gold], q))  # the golds cover refuses verbatim: test_every_gold_is_correct_as_written
    dressed = G.run(program, gold, gold, q)
    assert grade(dressed, [gold], q), (q, gold, program, dressed)
    assert agree(dressed, gold, q), (q, gold, program, dressed)


def _golds_refused_as_written(rows) -> list[tuple[str, str]]:
    out = []
    for q, golds in rows:
        for g in golds:
            if not cover.is_empty(g) and not grade(g, [g], q):
                out.append((q, g))
    return out


@functools.lru_cache(maxsize=None)
def _real_rows() -> dict[str, list]:
    out = {}
    nq = DATA / "nq_open" / "NQ-open.dev.jsonl"
    if nq.is_file():
        out["nq_open"] = [(r["question"], r["answer"]) for r in map(json.loads, nq.read_text().splitlines())]
    ms = DATA / "msmarco" / "msmarco_v1.1_test_qa_1000.parquet"
    if ms.is_file():
        import pandas as pd

        df = pd.read_parquet(ms)
        out["msmarco"] = [(q, [str(x) for x in g]) for q, g in zip(df["query"], df["generation_gt"], strict=True)]
    return out


#: measured on this tree: the gold itself, as written, is graded wrong when it holds a list mark, an alternative
#: or a hedge of its own ("revolution or orbital revolution", "2017/18", "Count Dooku / Darth Tyranus", "In the
#: year you turn 70 ½.", "It is one specific form of a gene, differing from other alleles by one or a few
#: bases ..."): cover.claims_alone does not discount the gold's own marks (the strict rule's _adds_structure did)
GOLD_REFUSED = {"nq_open": 56, "msmarco": 182}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=(
    f"{c} {n} golds are graded wrong against themselves (NQ-Open dev: 56 of 6,490 aliases; MS MARCO: 182 of "
    f"1,130): cover refuses a gold's own 'or', '/', hedge or negation"))) for n, c in GOLD_REFUSED.items()])
def test_every_gold_is_correct_as_written(name):
    """Dressing starts from here: each real gold alias, answered verbatim, is correct."""
    rows = _real_rows().get(name)
    if rows is None:
        pytest.skip(f"{name} not in the local data mirror {DATA}")
    bad = _golds_refused_as_written(rows)
    assert not bad, (len(bad), bad[:5])


#: measured on this tree: these paraphrase templates make the gold wrong ("Surely Paris", "Paris (final)",
#: "Answer - Paris" for gold "Paris"; also for "Barack Obama", "the Rhone", "1945"): a false negative, no gain
#: for a policy, and the reason those templates scatter under agree(). Searched apart below (strict xfails);
#: drop a template from this set when its case passes.
PARAPHRASE_MISSES = {"Surely {a}", "{a} (final)", "Answer - {a}"}


def _missed_template(program) -> bool:
    return any(op == "scatter" and G.SCATTER[k % len(G.SCATTER)] in PARAPHRASE_MISSES for op, k in program)


@pytest.mark.parametrize("template", [pytest.param(t, marks=pytest.mark.xfail(strict=True, reason=(
    f"measured: grade({t.format(a='Paris', A='PARIS')!r}, ['Paris']) is False"))) for t in sorted(PARAPHRASE_MISSES)])
def test_a_paraphrase_template_keeps_the_gold_correct(template):
    for q, gold in _dress_cases():
        assert grade(template.format(a=gold, A=gold.upper()), [gold], q), (template, gold)


@settings(max_examples=200, **SEARCH)
@given(case=st.sampled_from(_dress_cases()), program=G.attacks(max_steps=3, ops=G.DRESSING + G.PARAPHRASING))
def test_paraphrase_keeps_a_correct_answer_correct(case, program):
    """The paraphrase templates ("It's Paris", "Paris, I think", "I believe it is Paris") with dressing."""
    assume(not _missed_template(program))
    q, gold = case
    said = G.run(program, gold, gold, q)
    assert grade(said, [gold], q), (q, gold, program, said)
    assert agree(said, gold, q), (q, gold, program, said)


# ------------------------------------------------------------------------------------------------ (c) agreement

QUESTION, GOLD, WRONG = "What is the capital of France?", "Paris", "Lyon"
METHODS = tuple(CSR_METHODS)


@functools.lru_cache(maxsize=None)
def method_options(method: str) -> dict:
    """The reward options a method ships with (trainers/configs/<method>.yaml), as group_calibration_scores
    reads them."""
    cfg = yaml.safe_load((REPO / "trainers" / "configs" / f"{method}.yaml").read_text())["reward"]
    promise = CSR_METHODS[method]
    return dict(score=promise["score"], reading=cfg.get("reading", promise.get("reading", DEFAULT_READING)),
                eps=float(cfg.get("eps", DEFAULT_EPS)), bounded=bool(cfg.get("bounded", False)),
                empty_answer=cfg.get("empty_answer", "judge"), agreement_wrong=cfg.get("agreement_wrong", "judge"))


@functools.lru_cache(maxsize=200_000)
def _agree(a: str, b: str, q: str) -> bool:
    return a == b or agree(a, b, q)


@functools.lru_cache(maxsize=50_000)
def _grade(a: str, q: str) -> bool:
    return grade(a, [GOLD], q)


def r_cal(group, method: str, question: str = QUESTION) -> np.ndarray:
    """r_cal of every rollout of one group under ``method``'s shipped options, with A_ji = agree(C_j, C_i) and
    y_j = grade(C_j): the training reward's calibration term before λ."""
    o = method_options(method)
    group = list(group)
    A = np.array([[1.0 if i == j else float(_agree(a, b, question)) for j, b in enumerate(group)]
                  for i, a in enumerate(group)])
    y = np.array([float(_grade(a, question)) for a in group])
    Aw = None
    if o["agreement_wrong"] == "overlap":
        Aw = np.maximum(overlap_matrix(group, question), A)[None]
    if o["empty_answer"] == "judge":  # the judge's own reading: reflexive, nothing masked
        empty, empty_answer = None, "disagree"
    else:
        empty, empty_answer = np.array([[cover.is_empty(a) for a in group]]), o["empty_answer"]
    settings = RewardSettings(eps=o["eps"], reading=o["reading"], score=o["score"], bounded=o["bounded"],
                              empty_answer=empty_answer)
    r, _ = group_calibration_scores(A[None], y[None], settings, empty=empty, agreement_wrong=Aw)
    return r[0]


def honest_group(n_correct: int) -> list[str]:
    return [GOLD] * n_correct + [WRONG] * (K - n_correct)


def gain(method: str, n_correct: int, transformed: dict[int, str]) -> float:
    """The largest r_cal gain of a transformed rollout over the same rollout honest (same group otherwise)."""
    honest = honest_group(n_correct)
    group = [transformed.get(j, a) for j, a in enumerate(honest)]
    r0, r1 = r_cal(honest, method), r_cal(group, method)
    return max(float(r1[j] - r0[j]) for j in transformed)


@pytest.mark.parametrize("method", METHODS)
def test_an_interjection_lead_in_keeps_the_claim(method):
    assert gain(method, 0, {0: "Hmm, Lyon"}) <= 1e-12 and gain(method, 0, {0: "Well, Lyon"}) <= 1e-12


@settings(max_examples=300, **SEARCH)
@given(program=G.attacks(max_steps=3, ops=G.KEEPS_CLAIM), n=st.integers(1, K), n_correct=st.sampled_from((0, 2, 4)),
       method=st.sampled_from(METHODS))
def test_a_claim_keeping_program_pays_nothing(program, n, n_correct, method):
    """Up to every wrong rollout of the group rewritten by one claim-keeping program (the same output each):
    no rewritten rollout earns more r_cal than it did honest, in any CSR method."""
    assume(G.keeps_claim(program))
    out = G.run(program, WRONG, GOLD, QUESTION)
    assert not _grade(out, QUESTION)
    wrong = [j for j, a in enumerate(honest_group(n_correct)) if a == WRONG][:n]
    assert gain(method, n_correct, {j: out for j in wrong}) <= 1e-12, (program, out, n, n_correct, method)


#: hedged forms of the wrong answer: the same candidate, said less surely
HEDGED = tuple(f"{h} Lyon" for h in G.HEDGES) + tuple(f"Lyon {h}" for h in G.HEDGES) + tuple(
    f"{h} The answer is Lyon" for h in G.HEDGES) + ("Lyon, I guess", "Lyon, probably")
@pytest.mark.parametrize("method", METHODS)
def test_a_hedged_wrong_answer_keeps_its_claim(method):
    """A hedge keeps the candidate: one rollout of 8 × "Lyon" hedged in any form earns nothing."""
    assert agree("Lyon", "probably Lyon", QUESTION)
    gains = {h: gain(method, 0, {0: h}) for h in HEDGED}
    assert max(gains.values()) <= 1e-12, {h: round(g, 3) for h, g in gains.items() if g > 0}


def _scatter(op: str, n_correct: int) -> dict[int, str]:
    """Every wrong rollout rewritten by ``op`` with its own argument (different junk, template, lead-in)."""
    ks = [k for k in range(60) if not (op == "echo" and k % 3 == 0)]
    outs = list(dict.fromkeys(G.apply(op, k, WRONG, GOLD, QUESTION) for k in ks))
    wrong = [j for j, a in enumerate(honest_group(n_correct)) if a == WRONG]
    return {j: outs[(5 * i) % len(outs)] for i, j in enumerate(wrong)}


def _measured(op: str, method: str) -> float:
    return gain(method, 0, _scatter(op, 0))


#: measured on this tree (all-wrong group of K = 8, every rollout rewritten by the op with its own argument; the
#: best rollout's r_cal gain under csr, in nats; csr_likelihood and csr_spread: 0, the latter thanks to its
#: overlap reading). Pairs that disagree under agree(): scatter 12 of 190 template pairs ("The answer: Lyon" vs
#: "I'd say Lyon", "Lyon, I think" vs "Lyon (final)"), prefix 2 of 36 ("I think Lyon" vs "well Lyon", "Final
#: answer: Lyon" vs "Hmm, Lyon"), suffix 20 of 36 ("Lyon I think" vs "Lyon probably", "Lyon (I'm sure)"), hedge
#: 10 of 15 ("maybe Lyon" vs "perhaps Lyon"), pad 1,634 of 1,770 ("Lyon apple" vs "Lyon morning velvet").
SCATTER_GAIN = {"pad": 6.907}  # scatter, prefix, suffix and hedge closed: agree() reads hedges and chatter as no claim


def _scatter_params():
    out = []
    for op in G.KEEPS_CLAIM:
        for m in METHODS:
            if m == "csr" and op in SCATTER_GAIN:
                out.append(pytest.param(op, m, id=f"{op}-{m}", marks=pytest.mark.xfail(strict=True, reason=(
                    f"{op}: the rewritten rollouts disagree pairwise under agree() (not transitive); the best gains "
                    f"+{SCATTER_GAIN[op]:.3f} r_cal (nats) under csr in an all-wrong group of K = 8"))))
            else:
                out.append(pytest.param(op, m, id=f"{op}-{m}"))
    return out


@pytest.mark.parametrize("op,method", _scatter_params())
def test_every_rollout_rewritten_its_own_way_pays_nothing(op, method):
    """The scatter attack: all 8 rollouts of one wrong answer, each dressed, padded or paraphrased differently.
    Every pair still says the same thing, so no rollout may earn more r_cal than honest."""
    g = _measured(op, method)
    assert g <= 1e-12, (op, method, g, _scatter(op, 0))


def test_padding_every_rollout_with_different_junk_scatters_measured():
    """The lexical judge's known limit, measured (not hidden): padding every wrong rollout with different junk
    words makes the pads disagree pairwise, so csr pays each one almost the full scatter gain."""
    eps = method_options("csr")["eps"]
    g = _measured("pad", "csr")
    full = math.log1p(-eps) - math.log(eps)
    assert g > 0.5 * full, "padding no longer scatters: drop the 'pad' xfail above"
    assert _measured("pad", "csr_likelihood") == 0.0


#: measured on this tree: trainers.answer_match.content_set keeps zero-width characters ("Ly\u200bon" shares no
#: word with "Lyon"), and padded rollouts disagree under agree(), so 8 padded rollouts each with an invisible
#: character escape csr_spread's charge entirely: +1.000 r_cal
SPREAD_INVISIBLE = ("csr_spread's overlap reading: content_set keeps zero-width characters, so 'Ly\u200con apple', "
                    "'L\u200dyon orchard anchor ...', '\ufeffLyon engine ...' share no word: +1.000 r_cal each")


@pytest.mark.parametrize("dress", [
    "invisible",  # closed: fold() drops invisible format characters (was SPREAD_INVISIBLE)
    "homoglyph", "accent", "upper", "punct", "title", "space"])
def test_csr_spread_overlap_reading_holds_for_padding_with_dressing(dress):
    """csr_spread promises that padding, case or punctuation cannot make a wrong answer look unshared (its
    ``overlap`` reading: a shared content word). Every rollout padded with its own junk and dressed its own way."""
    group = {j: G.run([(dress, 7 * j + 1), ("pad", 5 * j)], WRONG, GOLD, QUESTION) for j in range(K)}
    assert gain("csr_spread", 0, group) <= 1e-12, (dress, group)


def test_rewriting_answers_changes_no_correct_rollout_pay_under_likelihood():
    """csr_likelihood reads correctness only: no program changes a wrong rollout's r_cal (it is 0)."""
    for op in G.OPS:
        out = G.apply(op, 11, WRONG, GOLD, QUESTION)
        if _grade(out, QUESTION):
            continue
        assert gain("csr_likelihood", 2, {2: out}) == 0.0, op


def test_hand_pairs_are_what_they_claim():
    """The search's own inputs: each gold correct, each wrong answer wrong (else the search proves nothing)."""
    for q, g, ws in HAND:
        assert grade(g, [g], q), g
        for w in ws:
            assert not grade(w, [g], q), (g, w)
