"""The policy lab (research/policy_lab.py): its designs are the shipped configs, its rewards equal hand computations
of each method's formula on the candidate strings, its trick forms are the grammar's, the trick pay is the
counterfactual it claims, the post-hoc rows are fitted on questions disjoint from the evaluation's, and a small
run is reproducible (fast)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from semcal_eval.qa.grading import grade_strict as grade  # the labs grade with the strict rule (LAB_GRADER)
from semcal_eval.qa.grading import same_answer
from research import answer_grammar as G
from research import policy_lab as P
from trainers.answer_match import content_set
from trainers.config import load_config

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def world():
    return P.make_world(12, seed=5)


# ------------------------------------------------------------------------------------------------ designs


@pytest.mark.parametrize("design", P.MAIN, ids=lambda d: d.method)
def test_designs_are_the_shipped_configs(design):
    cfg = load_config(ROOT / "trainers/configs" / f"{design.method}.yaml")
    r, g = cfg.reward, cfg.grpo
    assert design.method == cfg.method
    for k in ("score", "reading", "bounded", "eps", "empty_answer", "lambda_schedule", "lambda_max", "lambda_min",
              "agreement_wrong"):
        assert getattr(design, k) == getattr(r, k), k
    assert design.judge == P.LAB_JUDGE  # the lab's worlds are judged by the strict judge, whatever the config says
    assert design.scale_rewards == g["scale_rewards"] and design.num_generations == g["num_generations"]
    assert design.generation_batch == g["per_device_train_batch_size"] * g["gradient_accumulation_steps"]
    # the reward functions and weights semcal-train builds from the same file
    from trainers.train import build_reward_funcs

    funcs, weights = build_reward_funcs(cfg)
    assert weights == design.weights
    if design.method != "rlvr":
        kw = funcs[1].keywords
        assert kw["settings"] is cfg.reward and kw["num_generations"] == design.num_generations
        # the design's settings are the config's, but for the lab's judge
        assert design.settings == replace(cfg.reward, judge=design.judge)


def test_csr_is_the_papers_reward_and_the_shipped_default():
    d = P.CSR
    assert P.CHOSEN is P.CSR
    assert (d.method, d.score, d.reading, d.bounded, d.eps, d.empty_answer, d.lambda_schedule, d.lambda_min,
            d.lambda_max, d.judge, d.agreement_wrong) == (
        "csr", "log", "pairwise", False, 1e-3, "judge", "linear", 0.0, 0.1, P.LAB_JUDGE, "judge")
    assert [x.method for x in P.MAIN] == ["csr", "csr_likelihood", "csr_spread", "rlvr"]
    names = [x.name for x in P.MAIN + P.ABLATIONS]
    assert len(set(names)) == len(names)  # every ablation named for itself


def test_design_from_config_reads_the_file(tmp_path):
    """Not a copy: a YAML with one option changed gives a design with that option changed."""
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({"base": str(ROOT / "trainers/configs/csr.yaml"),
                                    "reward": {"lambda_max": 0.05, "eps": 0.01}, "grpo": {"num_generations": 4}}))
    d = P.design_from_config(path, "mine")
    assert (d.name, d.lambda_max, d.eps, d.num_generations, d.score) == ("mine", 0.05, 0.01, 4, "log")
    with pytest.raises(ValueError, match="policy lab trains"):
        P.design_from_config(ROOT / "trainers/configs/rd.yaml")


# ------------------------------------------------------------------------------------------------ the world


def test_world_strings_come_from_the_grammar_and_the_grader(world):
    q = 7  # not one of the questions the judge was asked about
    assert q not in world.probe
    cands, question = world.candidates[q], world.questions[q]
    gold = world.golds[q][0]
    for i, c in enumerate(cands[:-1]):
        f, m = world.forms[world.form[i]], int(world.source[i])
        base = gold if m == 0 else f"wrong{q}x{m}"
        if f in P.TRICK_FORMS:
            fi = world.forms.index(f)
            assert c == G.transform(f, base, question, np.random.default_rng([m, fi]), gold=gold)
        # the world's correctness is the grader's on this question's own strings
        assert world.correct[i] == float(grade(c, world.golds[q], question)), c
    assert cands[-1] == "" and world.empty[-1] and world.correct.sum() == 2 + len(P.SURFACE_FORMS)
    # the gold in content forms is wrong for the grader but makes the gold's claim (the evaluation's meaning)
    chatter = [i for i, c in enumerate(cands) if world.source[i] == 0 and world.forms[world.form[i]] == "chatter"]
    assert world.correct[chatter[0]] == 0 and world.meaning[chatter[0]] == 0


def _hand_rewards(world, design, q, idx, lam):
    """Each method's formula on the strings of question q (K = len(idx)): y by the grader, agreement by the
    strict judge, csr_spread's wrong rows also by a shared content word."""
    cands, question, golds = world.candidates[q], world.questions[q], world.golds[q]
    s = [cands[i] for i in idx]
    K = len(s)
    y = [float(grade(a, golds, question)) for a in s]
    J = [[float(same_answer(a, b)) for b in s] for a in s]
    out = []
    n_c = sum(y)
    for j in range(K):
        partners = [i for i in range(K) if i != j]
        if design.score == "log":  # the paper: mean over partners of y log a + (1 − y) log(1 − a), nats
            tot = 0.0
            for i in partners:
                a = min(max(J[j][i], design.eps), 1 - design.eps)
                tot += y[j] * math.log(a) + (1 - y[j]) * math.log(1 - a)
            r = tot / (K - 1)
        elif design.score == "likelihood":
            r = y[j] * (K / max(n_c, 1) - 1)
        else:  # likelihood_spread: wrong rows charged the share of partners that agree or share a content word
            if not s[j]:
                r = -1.0
            elif y[j]:
                r = K / n_c - 1
            else:
                cj = content_set(s[j], question)
                r = -sum(1.0 for i in partners if s[i] and (J[j][i] or (cj & content_set(s[i], question))))
                r /= K - 1
        out.append(lam * r)
    return y, out


@pytest.mark.parametrize("design", [P.CSR, P.CSR_LIKELIHOOD, P.CSR_SPREAD], ids=lambda d: d.method)
def test_lab_rewards_equal_the_formula_by_hand(world, design):
    def at(m, form):
        return int(np.flatnonzero((world.source == m) & (world.form == world.forms.index(form)))[0])

    groups = [
        [at(0, "base"), at(0, "upper"), at(0, "alias"), at(1, "base"), at(1, "suffix_1"), at(1, "translation"),
         at(1, "list_or"), len(world.source) - 1],
        [at(2, "base"), at(2, "homoglyph"), at(2, "base"), at(3, "negation"), at(4, "negation"), at(0, "chatter"),
         at(0, "lead_in"), at(2, "hedge")],
        [at(1, "base")] * 8,
    ]
    idx = np.array(groups)
    step, steps = 200, 500
    lab = P.group_rewards(world, design, idx, step, steps)
    lam = design.lambda_max * step / steps if design.lambda_schedule == "linear" else design.lambda_max
    for g, q in enumerate((3, 7, 11)):  # every question has the same pattern: use any question's strings
        y, cal = _hand_rewards(world, design, q, groups[g], lam)
        assert lab[g * 8 : (g + 1) * 8, 0].tolist() == y
        assert lab[g * 8 : (g + 1) * 8, 1] == pytest.approx(cal, abs=1e-12)
    assert P.group_rewards(world, P.RLVR, idx, step, steps).shape == (24, 1)


def test_trick_pay_is_the_counterfactual_by_hand(world):
    """One wrong rollout in a trick form, three copies of its plain form, four gold answers: under the paper's
    BCE the suffix makes it disagree with its 3 copies (pay λ·3·(log(1 − ε) − log ε)/7 in the calibration
    term, 0 in the correctness term); under csr_spread the shared word keeps the charge (pay 0)."""
    base1 = int(np.flatnonzero((world.source == 1) & (world.form == 0))[0])
    suf = int(np.flatnonzero((world.source == 1) & (world.form == world.forms.index("suffix_3")))[0])
    gold = int(np.flatnonzero((world.source == 0) & (world.form == 0))[0])
    idx = np.array([[suf, base1, base1, base1, gold, gold, gold, gold]])
    for design, want in ((P.CSR, None), (P.CSR_SPREAD, 0.0), (P.CSR_LIKELIHOOD, 0.0)):
        pay: dict = {}
        rew = P.group_rewards(world, design, idx, 250, 500)
        P._trick_pay(world, design, idx, rew, 250, 500, pay)
        f = world.forms.index("suffix_3")
        assert pay["n"].sum() == pay["n"][f] == 1 and pay["corr"][f] == 0.0
        if want is None:
            lam = design.lambda_max * 250 / 500
            want = lam * 3 * (math.log1p(-design.eps) - math.log(design.eps)) / 7
        assert pay["cal"][f] == pytest.approx(want, abs=1e-12), design.name


# ------------------------------------------------------------------------------------------------ runs


def test_small_run_is_reproducible_and_held_out():
    a = P.run([P.RLVR, P.CSR_SPREAD], seeds=(0, 1), n_questions=40, steps=30, reference=False)
    b = P.run([P.RLVR, P.CSR_SPREAD], seeds=(0, 1), n_questions=40, steps=30, reference=False)
    assert [r for k, r in a.items() if k != "_meta"] == [r for k, r in b.items() if k != "_meta"]
    rows = P.summarise(a)
    assert {r["design"] for r in rows} == {"initial", P.RLVR.name, P.CSR_SPREAD.name, P.PLATT, P.ISOTONIC}
    sp = next(r for r in rows if r["design"] == P.CSR_SPREAD.name)
    assert set(sp) >= {"acc", "ece", "brier", "auroc", "trick", "pay_corr", "pay_cal", "dacc", "ece_ratio"}
    assert "| design |" in P.format_table(rows) and "| form |" in P.format_pay_by_form(rows)


def test_posthoc_rows_are_fitted_on_questions_disjoint_from_the_evaluation(monkeypatch):
    seen = []
    real = P.posthoc_rows

    def spy(world, params, fit_rows, eval_rows, *a, **k):
        seen.append((np.asarray(fit_rows).copy(), np.asarray(eval_rows).copy()))
        return real(world, params, fit_rows, eval_rows, *a, **k)

    evaluated = []
    real_eval = P.evaluate

    def eval_spy(world, params, rows, *a, **k):
        evaluated.append(np.asarray(rows).copy())
        return real_eval(world, params, rows, *a, **k)

    monkeypatch.setattr(P, "posthoc_rows", spy)
    monkeypatch.setattr(P, "evaluate", eval_spy)
    P.run([P.RLVR], seeds=(3,), n_questions=40, steps=10, reference=False)
    (fit, ev), = seen
    assert len(fit) == len(ev) == 20 and not set(fit) & set(ev)
    assert all(np.array_equal(np.sort(ev), np.sort(e)) for e in evaluated)  # the held-out rows of every row
    with pytest.raises(ValueError, match="disjoint"):
        real(P.make_world(10, seed=0), P.init_params(P.make_world(10, seed=0)), np.arange(6), np.arange(5, 10), 0, 1)


def test_posthoc_maps_by_hand():
    # isotonic: monotone data is fitted exactly; Platt: a logistic relation in logit(conf) is recovered
    conf = np.repeat(np.linspace(0, 1, 11), 200)
    rng = np.random.default_rng(0)
    p_true = 1 / (1 + np.exp(-(0.5 * P._logit(conf, 10) - 0.3)))
    y = (rng.random(len(conf)) < p_true).astype(float)
    platt = P.fit_platt(conf, y)(np.linspace(0, 1, 11))
    assert platt == pytest.approx(np.unique(p_true), abs=0.06)
    iso = P.fit_isotonic(np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.0, 0.0, 1.0, 1.0]))
    assert iso(np.array([0.0, 0.15, 0.35, 0.9])).tolist() == [0.0, 0.0, 1.0, 1.0]
    assert P.fit_platt(conf, np.ones_like(conf))(np.array([0.2])).tolist() == [1.0]


def test_trick_pay_in_training_correctness_never_pays():
    """A short run of the four shipped designs: the correctness term never pays a trick (the strict grader);
    csr_likelihood's calibration term never does either; the paper's BCE does (scattering a wrong answer
    over variants disagrees with its copies), and surface forms pay nobody."""
    res = P.run(P.MAIN, seeds=(0,), n_questions=40, steps=60, reference=False, posthoc=False)
    rows = {r["design"]: r for r in P.summarise(res)}
    for d in P.MAIN:
        assert rows[d.name]["pay_corr"][0] == 0.0, d.name
        for f in P.SURFACE_FORMS:
            if f in rows[d.name]["pay_forms_cal"]:
                assert rows[d.name]["pay_forms_cal"][f][0] == 0.0 or d is P.CSR_SPREAD, (d.name, f)
    assert rows[P.CSR_LIKELIHOOD.name]["pay_cal"][0] == 0.0 and rows[P.RLVR.name]["pay_cal"][0] == 0.0
    assert rows[P.CSR.name]["pay_cal"][0] > 0.01


def test_likelihood_fit_is_calibrated_in_the_family():
    """The reference row: the family's likelihood fit is far better calibrated on held-out questions than the
    untrained policy (so the family can express calibration), computed without any reward code."""
    world = P.make_world(120, seed=3)
    perm = np.random.default_rng(0).permutation(120)
    fit = P.evaluate(world, P.fit_likelihood(world, perm[:60], steps=400), perm[60:])
    base = P.evaluate(world, P.init_params(world), perm[60:])
    assert fit["ece"] < 0.6 * base["ece"] and fit["brier"] < base["brier"]
