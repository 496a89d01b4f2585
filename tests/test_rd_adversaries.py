"""Issue 31 item 4: the named tricks of research/answer_grammar.py do what each rule claims under the strict rule
(their kinds' claims; issue 41's tricks and the cover judge: tests/test_judge_adversaries.py; reward checks:
research/adversaries.py); the paper's CSR reward
(csr.yaml, through the trainer's reward functions) equals a reference written here from its formula; no trick
makes a wrong answer correct; and the size of what the paper's BCE pays a wrong rollout for scattering is stated
by hand (an exploit of the paper's reward, measured, not hidden). Fast, no model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from semcal_eval.qa.answers import fold
from semcal_eval.qa.grading import agree, grade, grade_strict, same_answer
from research import adversaries as ADV
from research import answer_grammar as G
from trainers.config import load_config
from trainers.rewards import correctness_reward

Q = "What is the capital of France?"
GOLD = "Paris"
ANSWERS = ("Lyon", "New York", "wrong12x3", "Paris")


def cols(k, gold=GOLD, q=Q):
    return dict(answers=[[gold]] * k, question=[q] * k)


# ------------------------------------------------------------------------------------------------ the grammar


@pytest.mark.parametrize("name", list(G.GRAMMAR))
@pytest.mark.parametrize("answer", ANSWERS)
def test_each_trick_does_what_it_claims(name, answer):
    trick = G.GRAMMAR[name]
    rng = np.random.default_rng(7)
    gold = "Rome" if answer == GOLD else GOLD  # a wrong answer for "gold" tricks, the gold itself otherwise
    t = trick(answer, gold, Q, rng)
    if name != "lower" or answer != answer.lower():
        assert t != answer, (name, answer)
    if trick.kind == "surface":
        # the same answer for the strict judge and the strict grader
        assert same_answer(t, answer) and grade_strict(t, [answer]), (name, answer, t)
    else:
        assert not same_answer(t, answer) and not grade_strict(t, [answer]), (name, answer, t)
    if trick.kind == "gold":
        assert gold in t and not grade(t, [gold], Q), (name, t)  # mentions the gold, and is still wrong
    # deterministic given the generator
    assert trick(answer, gold, Q, np.random.default_rng(7)) == t


def test_homoglyph_and_accent_differ_as_strings_but_fold_equal():
    for a in ("Lyon", "New York", "wrong12x3"):
        h, c = G.homoglyph(a), G.accent(a)
        assert h != a and c != a
        assert fold(h) == fold(a) == fold(c)
        assert any("\u0400" <= ch <= "\u04ff" for ch in h)  # Cyrillic letters
    assert G.accent("Lyon") == "Lyón" and G.homoglyph("Lyon") == "Lуоn"


def test_translations_are_other_answers():
    assert G.translate("Paris") == "Parigi" and G.translate("PARIS") == "Parigi"
    rng = np.random.default_rng(0)
    seen = {G.translate("Paris", rng) for _ in range(30)}
    assert seen == set(G.TRANSLATIONS["paris"])  # Parigi, Parí, 巴黎
    for a in ("Paris", "Lyon", "New York", "wrong12x3", "amo"):
        for t in {G.translate(a, np.random.default_rng(s)) for s in range(5)}:
            assert fold(t) != fold(a) and not same_answer(t, a) and not grade(t, [a]) and not agree(t, a), (a, t)
    assert G.transliterate("wrong3x2") == "вронг3кс2"


def test_gold_tricks_need_the_gold_and_unknown_names_fail():
    with pytest.raises(ValueError, match="gold"):
        G.transform("list_or", "Lyon", Q, np.random.default_rng(0))
    with pytest.raises(ValueError, match="unknown trick"):
        G.transform("telepathy", "Lyon", Q, np.random.default_rng(0))
    assert G.transform("list_either", "Lyon", Q, np.random.default_rng(0), gold=GOLD) == "either Lyon or Paris"
    assert G.transform("negation", "Lyon", Q, np.random.default_rng(0), gold=GOLD) == "not Paris"
    assert set(G.ADVERSARIES) == set(G.SURFACE + G.CONTENT)


# ------------------------------------------------------------------------------------------------ the paper's CSR


def test_reward_options_are_the_shipped_configs():
    for method in ("csr", "csr_likelihood", "csr_spread"):
        opts = ADV.reward_options(method)
        cfg = load_config(f"trainers/configs/{method}.yaml")
        assert opts["method"] == method
        assert opts["settings"] == cfg.reward and opts["num_generations"] == cfg.grpo["num_generations"]
    # issue 31: csr is the paper's reward
    p = ADV.reward_options("csr")["settings"]
    assert (p.score, p.reading, p.bounded, p.eps, p.empty_answer, p.judge, p.agreement_wrong,
            p.lambda_schedule, p.lambda_min, p.lambda_max) == (
        "log", "pairwise", False, 1e-3, "judge", "cover", "judge", "linear", 0.0, 0.1)


def paper_rcal(comps: list[str], gold: str, q: str, lam: float, eps: float) -> tuple[list[float], list[float]]:
    """λ·r_cal of the paper, from its formula: y_j = J(C_j, C*) (the grader), a_ji = clip(J(C_j, C_i), ε, 1−ε)
    with J the cover judge's agreement (reflexive: identical answers agree, empty ones too), r_cal,j =
    mean_{i≠j} [y_j log a_ji + (1 − y_j) log(1 − a_ji)] in nats."""
    K = len(comps)
    y = [float(grade(c, [gold], q)) for c in comps]
    out = []
    for j in range(K):
        s = 0.0
        for i in range(K):
            if i == j:
                continue
            a = min(max(float(agree(comps[j], comps[i], q)), eps), 1 - eps)
            s += y[j] * math.log(a) + (1 - y[j]) * math.log(1 - a)
        out.append(lam * s / (K - 1))
    return y, out


@pytest.mark.parametrize("comps", [
    ["Paris", "paris.", "Lyon", "Lyon apple river", ""],
    ["PARIS", Q + " Paris", "Lyon", "Lyón", "Lione"],
    [Q, "Lyon", "lyon!", "Nice", "Nice", "Paris, Lyon", "not Paris", "Pаris"],
])
def test_paper_reward_matches_its_formula(comps):
    K = len(comps)
    opts = ADV.reward_options("csr")
    y, cal = ADV.group_rewards(comps, GOLD, Q, opts)  # no trainer state: λ = λ_max
    ry, rcal = paper_rcal(comps, GOLD, Q, opts["settings"].lambda_max, opts["settings"].eps)
    assert y.tolist() == ry
    assert cal == pytest.approx(rcal, abs=1e-12)
    assert correctness_reward(["p"] * K, comps, **cols(K)) == ry


# ------------------------------------------------------------------------------------------------ tricks and pay


@pytest.mark.parametrize("name", list(G.GRAMMAR))
def test_no_trick_makes_a_wrong_answer_correct(name):
    rng = np.random.default_rng(3)
    # (the empty answer only for tricks that do not add the gold: ", Paris" *is* the gold)
    for wrong in ("Lyon", "New York", "Pari") + (("",) if G.GRAMMAR[name].kind != "gold" else ()):
        t = G.transform(name, wrong, Q, rng, gold=GOLD)
        assert correctness_reward(["p"], [t], **cols(1)) == [0.0], (name, wrong, t)
    # the gold keeps its verdict in a surface form, with chatter and with the question repeated (the cover judge);
    # a hedge, a translation and a bare answer with other words beside the gold (padding: a candidate list for
    # all the judge can tell) are wrong
    t = G.transform(name, GOLD, Q, rng, gold="Rome") if G.GRAMMAR[name].kind == "gold" else \
        G.transform(name, GOLD, Q, rng)
    keeps = G.GRAMMAR[name].kind == "surface" or name in ("chatter", "question_before", "question_after")
    assert correctness_reward(["p"], [t], **cols(1)) == [float(keeps)], (name, t)


@pytest.mark.parametrize("name", list(G.GRAMMAR))
def test_correctness_term_never_pays_for_a_trick(name):
    for options in ("csr", "csr_likelihood", "csr_spread"):
        table = ADV.policy_table(options, accuracies=(0.0, 0.5), n_groups=6, adversary=name, seed=1)
        for a, v in table.items():
            assert v["transformed_correct"] == pytest.approx(v["honest_correct"], abs=1e-12), (options, name, a)
        dy, _ = ADV.deviation_gain(name, ["Paris", "Lyon", "Lyon", "Nice"], 1, GOLD, Q, options, n_draws=3)
        assert dy == 0.0


def test_paper_bce_pays_a_wrong_rollout_for_scattering_by_hand():
    """The paper's reward pays a wrong rollout for disagreeing with its group. Under the cover judge (csr.yaml
    since issue 41) padding, a prefix, chatter, a hedge or the question repeated leave one copy of a repeated
    wrong guess agreeing with its 3 partners: no pay (under the strict judge each gained
    λ·3·(log(1 − ε) − log ε)/7 ≈ 0.296 nats). What a lexical judge cannot link still pays that much: a
    translation, and "not <gold>" (it agrees with neither). The gold listed beside the guess ("Lyon, Paris")
    now agrees with both the guess and the gold, so it is charged more than the honest guess."""
    opts = ADV.reward_options("csr")
    lam, eps = opts["settings"].lambda_max, opts["settings"].eps
    group = ["Lyon"] * 4 + ["Paris"] * 4
    want = lam * 3 * (math.log1p(-eps) - math.log(eps)) / 7
    for name in ("suffix_1", "suffix_5", "prefix", "chatter", "hedge", "question_before", "question_after",
                 *G.SURFACE):
        assert ADV.deviation_gain(name, group, 0, GOLD, Q, opts, n_draws=3) == (0.0, 0.0), name
    dy, dc = ADV.deviation_gain("translation", group, 0, GOLD, Q, opts, n_draws=3)
    assert dy == 0.0 and dc == pytest.approx(want, abs=1e-12)
    for name in ("list_comma", "list_or", "list_either"):
        dy, dc = ADV.deviation_gain(name, group, 0, GOLD, Q, opts, n_draws=3)
        # agrees with its 3 Lyon partners and the 4 Paris ones: 7·log ε where the honest guess had 3
        assert dy == 0.0 and dc == pytest.approx(-lam * 4 * (math.log1p(-eps) - math.log(eps)) / 7, abs=1e-12), name
    # "not Paris" claims the opposite of the correct rollouts and differs from "Lyon": it stands apart and pays
    dy, dc = ADV.deviation_gain("negation", group, 0, GOLD, Q, opts, n_draws=3)
    assert dy == 0.0 and dc == pytest.approx(want, abs=1e-12)
    # the policy-level version: every wrong guess padded with 1–5 *different* random words. One padded copy
    # agrees with the bare guess, but two copies padded differently are read as different answers, so at
    # accuracy 0 the group still goes from all-agreeing (log ε) to nearly all-disagreeing: the exploit the cover
    # judge leaves (docs/JUDGE.md); the same policy loses it on questions it answers right (its correct copies
    # stop agreeing with each other)
    t = ADV.policy_table(opts, accuracies=(0.0,), n_groups=5, seed=0)[0.0]
    full = lam * (math.log1p(-eps) - math.log(eps))
    assert 0.9 * full <= t["transformed_cal"] - t["honest_cal"] <= full + 1e-12
    assert t["transformed_correct"] == t["honest_correct"] == 0.0


def test_spread_charges_padding_but_pays_translation_by_hand():
    """csr_spread reads a wrong rollout's partners by the judge *or* a shared content word: padding keeps the
    word, so it is charged as before; a translation or "not <gold>" shares no word with the guess and is paid
    like a disagreeing answer — its charge drops from 3/7 to 0 (λ = 1)."""
    opts = ADV.reward_options("csr_spread")
    group = ["Lyon"] * 4 + ["Rome"] * 4  # all wrong
    for name in ("suffix_1", "suffix_5", "prefix", "hedge", "chatter", "question_before", *G.SURFACE):
        assert ADV.deviation_gain(name, group, 0, GOLD, Q, opts, n_draws=3) == (0.0, 0.0), name
    for name in ("translation", "negation"):
        dy, dc = ADV.deviation_gain(name, group, 0, GOLD, Q, opts, n_draws=3)
        assert dy == 0.0 and dc == pytest.approx(opts["settings"].lambda_max * 3 / 7, abs=1e-12), name
    # a list with the gold shares the gold's word with every correct partner: charged more, never paid
    mixed = ["Lyon"] * 4 + ["Paris"] * 4
    _, dc = ADV.deviation_gain("list_or", mixed, 0, GOLD, Q, opts, n_draws=1)
    # before: 3 of 7 partners share "lyon"; after ("Paris or Lyon"): all 7 share "lyon" or "paris"
    assert dc == pytest.approx(-opts["settings"].lambda_max * 4 / 7, abs=1e-12)
