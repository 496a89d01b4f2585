"""Reward lab: GRPO on a tabular policy, to see what a reward design teaches before a GPU run is paid for.

The model is a table: each of N questions has a categorical policy π_q over M = 37 candidate answers (strings).
The candidates form meaning clusters: the correct answer in four forms (the gold, "the gold", "GOLD!" — the
same answer for the grader — and a gold *alias* the grader accepts but the strict judge cannot link to the
gold), W = 8 wrong answers each with one paraphrase ("the w", the same answer) and two *padded variants*
("w pad pad pad": the same wrong meaning, which the strict judge counts as different from every other
candidate), and the empty answer. Initial policies are spread in difficulty (initial probability of the correct
meaning from 0 to 0.9) and put most of their wrong mass on one or a few wrong answers, as language models do
(:func:`make_world`).

A training step is one GRPO step of TRL 1.16 on every question: K rollouts per question; rewards from the
project's own code — :func:`trainers.rewards.correctness` (the grader, :func:`semcal_eval.qa.grading.grade`),
``semcal_eval.qa.agreement_matrix`` with the design's judge (``strict``, as every shipped config) and, for
``agreement_wrong: overlap``, :func:`trainers.answer_match.overlap_matrix` judge every candidate pair once, then
:func:`trainers.rewards.group_calibration_scores` and :func:`trainers.rewards.lambda_at` score each group
with the design's options; advantages by :func:`research.advantages.grpo_advantages`, which reproduces TRL's for each
``scale_rewards`` mode, reward weights and both ``multi_objective_aggregation`` modes; then a policy-gradient
step θ_q += lr·Σ_j A_j ∇ log π_q(a_j) / K with one global second-moment normaliser (Adam's invariance to the
reward scale, without per-parameter rescaling, so that — as in an LM whose parameters all questions share —
questions with larger advantages move more).

The designs that carry a shipped method's name are read from its config (:func:`design_from_config`:
``csr.yaml`` — the paper's reward —, ``csr_likelihood.yaml``, ``csr_spread.yaml``, ``rlvr.yaml``); the others
are named for the one option they change.

Evaluation follows the QA tasks (``semcal_eval.qa.agreement.score_question``): the answer is the greedy (most
probable) string, correct iff the grader accepts it; its confidence is the *agreement confidence*, the share of
10 sampled answers the strict judge finds equivalent to it (0 for an empty answer). Reported (:func:`evaluate`):
accuracy; ECE (15 equal-width bins), Brier score and AUROC of that confidence; the shares of degenerate
questions —

- ``empty``: the empty answer holds ≥ ½ of the probability;
- ``distinct-wrong``: the correct meaning holds < 0.1 and two samples agree (judge) with probability < 0.2:
  answers the judge counts as different (padded variants of one wrong answer included);
- ``collapsed-wrong``: the correct meaning holds < 0.1 and one wrong *meaning* holds ≥ 0.8;

and ``padded`` (mean probability of padded variants: gaming the judge) and ``lost`` (share of the learnable
questions — initial probability of the correct meaning ≥ 0.01 — whose greedy answer ends wrong).

Run the table with ``python benchmarks/reward_lab.py``; ``tests/test_reward_lab.py`` runs a smaller one.
Research code (package ``research``, not shipped): it studies the trainer's reward functions and is not part of
the trainer.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from semcal_eval import qa
from semcal_eval.core import metrics as M
from semcal_eval.qa.answers import normalize_answer, token_f1
from semcal_eval.qa.judges import Judge, get_judge
import trainers
from research.advantages import AGGREGATIONS, SCALE_MODES, grpo_advantages
from research.categorical import sample_rows as _sample
from research.categorical import softmax_rows as _softmax
from trainers import rewards as R
from semcal_eval.qa.grading import grade_strict as LAB_GRADER
from trainers.answer_match import overlap_matrix

__all__ = [
    "SCALE_MODES",
    "AGGREGATIONS",
    "grpo_advantages",
    "Design",
    "design_from_config",
    "World",
    "make_world",
    "train",
    "evaluate",
    "run_lab",
    "format_table",
    "DESIGNS",
]

# ----------------------------------------------------------------------------------------------------------
# reward designs


CSR_METHODS = ("csr", "csr_likelihood", "csr_spread")


@dataclass(frozen=True)
class Design:
    """One reward design and its GRPO settings (the defaults are :func:`trainers.rewards.calibration_reward`'s).

    ``method``: ``rlvr`` (r = correct), a CSR method (``csr``, ``csr_likelihood``, ``csr_spread``: r = correct +
    λ(t)·r_cal, weights (1, 1)) or ``cal_only`` (the same two functions with weights (0, 1): r_cal alone). The
    calibration options are those of :func:`trainers.rewards.calibration_reward`; ``agreement="soft"`` uses
    the token-F1 value of each pair instead of the judge's 0/1 decision. Shipped methods are built by
    :func:`design_from_config`, never restated here.
    """

    name: str
    method: str = "csr"
    scale_rewards: str = "none"
    aggregation: str = "sum_then_normalize"
    eps: float = R.DEFAULT_EPS
    reading: str = R.DEFAULT_READING
    score: str = "log"
    bounded: bool = False
    empty_answer: str = "disagree"
    agreement: str = "judge"
    agreement_wrong: str = "judge"
    lambda_schedule: str = "linear"
    lambda_max: float = R.DEFAULT_LAMBDA_MAX
    lambda_min: float = 0.0
    judge: str = "strict"
    config: str = ""

    def __post_init__(self):
        if self.method not in ("rlvr", "cal_only", *CSR_METHODS):
            raise ValueError(f"Design.method must be rlvr, cal_only or one of {', '.join(CSR_METHODS)}, "
                             f"got {self.method!r}")
        if self.agreement not in ("judge", "soft"):
            raise ValueError(f"Design.agreement must be 'judge' or 'soft', got {self.agreement!r}")
        self.settings  # the reward options, checked once by the trainer's own table (trainers.config)
        grpo_advantages(np.zeros((2, 1)), 2, scale_rewards=self.scale_rewards, aggregation=self.aggregation)

    @property
    def weights(self) -> list[float]:
        return [1.0] if self.method == "rlvr" else [0.0, 1.0] if self.method == "cal_only" else [1.0, 1.0]

    @cached_property
    def settings(self) -> R.RewardSettings:
        """The design's calibration options as the trainer's typed reward settings (built and checked once)."""
        return R.RewardSettings.from_attrs(self)


CONFIGS = Path(trainers.__file__).resolve().parent / "configs"
#: The labs study the rewards under the strict judge and grader of task version 2 (their synthetic answers,
#: "gold12", "wrong12x3", are built for string equality; the cover judge reads digits inside words as numbers
#: and citation marks). Every lab world and design uses LAB_JUDGE and LAB_GRADER whatever a shipped config names;
#: porting the labs to the cover judge, the trainer's default since issue 41, is open (docs/TRAINING.md).
LAB_JUDGE = "strict"


def design_from_config(path: str | Path, name: str | None = None) -> Design:
    """The lab design of a shipped config (a YAML path or a name in ``trainers/configs``): method, the ``reward``
    options and ``grpo.scale_rewards`` as :func:`trainers.config.load_config` reads them."""
    from trainers.config import load_config

    p = Path(path)
    if p.suffix not in (".yaml", ".yml"):
        p = CONFIGS / f"{path}.yaml"
    cfg = load_config(p)
    r, g = cfg.reward, cfg.grpo
    return Design(name=name or cfg.method, method=cfg.method,
                  scale_rewards={True: "group", False: "none"}.get(g["scale_rewards"], g["scale_rewards"]),
                  eps=r.eps, reading=r.reading, score=r.score, bounded=r.bounded,
                  empty_answer=r.empty_answer, agreement_wrong=r.agreement_wrong,
                  lambda_schedule=r.lambda_schedule, lambda_max=r.lambda_max,
                  lambda_min=r.lambda_min, judge=LAB_JUDGE, config=str(p))


#: the shipped methods, read from their configs
RLVR = design_from_config("rlvr", "rlvr (rlvr.yaml)")
CSR = design_from_config("csr", "csr (paper, csr.yaml)")
CSR_LIKELIHOOD = design_from_config("csr_likelihood", "csr_likelihood (csr_likelihood.yaml)")
CSR_SPREAD = design_from_config("csr_spread", "csr_spread (csr_spread.yaml)")
#: the shipped default (csr.yaml)
CHOSEN = CSR
#: the design before the reward lab (historical: TRL's group scaling, the rollout BCE ÷ log(1/ε), empty answers
#: scored like any disagreeing wrong answer, λ linear 0 → 1)
TODAY = Design(
    "CSR before the lab: group, rollout BCE ÷ log 1/ε, empty free, λ 0→1", scale_rewards="group", reading="rollout",
    bounded=True, empty_answer="disagree", lambda_max=1.0,
)
#: the table of docs/TRAINING.md: baselines, the shipped methods, one lever of csr changed at a time, r_cal alone
DESIGNS: list[Design] = [
    replace(RLVR, name="rlvr, scale group (TRL's default)", scale_rewards="group"),
    replace(RLVR, name="rlvr, scale batch", scale_rewards="batch"),
    RLVR,
    TODAY,
    CSR,
    replace(CSR, name="  csr, bounded ÷ log 1/ε, λ 0→½ (semcal's scale before issue 31)", bounded=True,
            lambda_max=0.5),
    replace(CSR, name="  csr, empty answers worst", empty_answer="worst"),
    replace(CSR, name="  csr, rollout reading", reading="rollout"),
    replace(CSR, name="  csr, soft (F1) agreement", agreement="soft"),
    replace(CSR, name="  csr, wrong rows by overlap", agreement_wrong="overlap"),
    replace(CSR, name="  csr, Brier score", score="brier"),
    replace(CSR, name="  csr, scale batch", scale_rewards="batch"),
    replace(CSR, name="  csr, scale group", scale_rewards="group"),
    replace(CSR, name="  csr, λ ≡ λ_max from step 0", lambda_schedule="constant"),
    CSR_LIKELIHOOD,
    CSR_SPREAD,
    replace(CSR, name="r_cal alone, λ ≡ 1 (csr's r_cal)", method="cal_only", lambda_schedule="constant",
            lambda_max=1.0),
    replace(TODAY, name="r_cal alone, λ ≡ 1 (r_cal before the lab)", method="cal_only", lambda_schedule="constant"),
]


# ----------------------------------------------------------------------------------------------------------
# the world: questions, candidate answers, judge results


@dataclass
class World:
    """Questions, candidates and everything the reward code says about them (computed once, reused by every
    design).

    Arrays are N×M (questions × candidates) or N×M×M; ``meaning`` is 0 for the correct meaning, 1..W for the
    wrong ones and −1 for the empty answer (always the last candidate). ``agree`` is the judge's 0/1 matrix,
    ``overlap`` the wrong rows' reading of ``agreement_wrong: overlap`` (max of the content-word overlap and
    ``agree``), ``soft`` the token-F1 of each pair.
    """

    questions: list[str]
    golds: list[list[str]]
    candidates: list[list[str]]
    correct: np.ndarray
    agree: np.ndarray
    soft: np.ndarray
    overlap: np.ndarray
    meaning: np.ndarray
    padded: np.ndarray
    theta0: np.ndarray
    n_wrong: int
    judge: Judge = field(repr=False)

    @property
    def empty_index(self) -> int:
        return self.theta0.shape[1] - 1


def _candidates(q: int, n_wrong: int, n_padded: int) -> tuple[list[str], list[int], list[bool], list[str]]:
    """Candidate strings of question q with their meaning and padded flags, and the gold aliases. Every word is
    unique to its question and meaning, so the reward code's decisions are the same for every question."""
    gold, alias = f"gold{q}", f"alias{q}"
    # "the X" and "X!" are X for the grader and the strict judge; the alias is a gold alias (correct) that no
    # string judge links to the gold: the judge splits the correct meaning unless the policy settles on one form.
    cands = [gold, f"the {gold}", f"{gold.upper()}!", alias]
    meaning, padded = [0] * 4, [False] * 4
    for w in range(1, n_wrong + 1):
        base = f"wrong{q}x{w}"
        cands += [base, f"the {base}"]
        meaning += [w, w]
        padded += [False, False]
        for v in range(n_padded):  # three filler words: a different answer for the strict judge
            cands.append(f"{base} " + " ".join(f"pad{q}x{w}x{v}x{t}" for t in range(3)))
            meaning.append(w)
            padded.append(True)
    cands.append("")
    meaning.append(-1)
    padded.append(False)
    return cands, meaning, padded, [gold, alias]


def make_world(
    n_questions: int = 200,
    seed: int = 0,
    n_wrong: int = 8,
    n_padded: int = 2,
    judge: str | Judge = "strict",
    acc_max: float = 0.9,
    acc_power: float = 3.0,
    empty_mass: float = 0.03,
    wrong_concentration: tuple[float, float] = (0.03, 1.0),
) -> World:
    """Build N questions with initial policies (θ = log of the initial probabilities).

    Initial probability of the correct meaning a_q = ``acc_max``·u^``acc_power``, u ~ U(0, 1): spread over
    [0, 0.9] with mean 0.225 and one question in five below 0.005, as for a small LM. It is split over the
    four correct strings by a Dirichlet(1); the empty answer gets ``empty_mass``; the rest goes to the W wrong
    meanings by a Dirichlet(α_q) with α_q log-uniform in ``wrong_concentration`` (small α: one confidently
    wrong answer; α = 1: wrong answers spread out), within a meaning 60 % to the base string, 30 % to its
    paraphrase and 10 % to its padded variants.
    """
    rng = np.random.default_rng(seed)
    jd = get_judge(judge) if isinstance(judge, str) else judge
    qs, golds, cands, meaning, padded, theta = [], [], [], [], [], []
    judged: dict[int, tuple] = {}
    for q in range(n_questions):
        c, mn, pd, gold = _candidates(q, n_wrong, n_padded)
        question = f"question {q}?"
        qs.append(question)
        golds.append(gold)
        cands.append(c)
        meaning.append(mn)
        padded.append(pd)
        # Every question has the same token pattern, so the reward code decides the same for each: ask it for
        # the first question, and again for a few others to check.
        if q == 0 or q in (n_questions // 2, n_questions - 1):
            judged[q] = _judge_candidates(question, c, gold, jd)
        a = acc_max * rng.uniform() ** acc_power
        mass = np.zeros(len(c))
        mass[:4] = a * rng.dirichlet(np.ones(4))
        mass[-1] = empty_mass
        alpha = math.exp(rng.uniform(*np.log(wrong_concentration)))
        wm = (1.0 - a - empty_mass) * rng.dirichlet(np.full(n_wrong, alpha))
        mn_arr, pd_arr = np.asarray(mn), np.asarray(pd)
        for w in range(1, n_wrong + 1):
            idx = np.flatnonzero(mn_arr == w)
            base, para, pads = idx[0], idx[1], idx[pd_arr[idx]]
            mass[base], mass[para] = 0.6 * wm[w - 1], 0.3 * wm[w - 1]
            mass[pads] = 0.1 * wm[w - 1] / len(pads)
        theta.append(np.log(np.maximum(mass, 1e-12)))
    corr, agree, soft, over = judged[0]
    for other in judged.values():
        if not all(np.array_equal(a, b) for a, b in zip(other, judged[0])):
            raise AssertionError("the reward code treats two questions of the lab differently; check _candidates")
    world = World(
        questions=qs, golds=golds, candidates=cands, correct=np.tile(corr, (n_questions, 1)),
        agree=np.tile(agree, (n_questions, 1, 1)), soft=np.tile(soft, (n_questions, 1, 1)),
        overlap=np.tile(over, (n_questions, 1, 1)), meaning=np.asarray(meaning), padded=np.asarray(padded),
        theta0=np.asarray(theta), n_wrong=n_wrong, judge=jd,
    )
    truth = (world.meaning == 0).astype(float)
    if not np.array_equal(world.correct, truth):  # the grader must see the world as built
        raise AssertionError("the grader disagrees with the built meanings; check the candidate strings")
    return world


def _judge_candidates(question: str, cands: list[str], golds: list[str], jd: Judge):
    """Correctness (:data:`LAB_GRADER`, the strict grader), 0/1 agreement (``qa.agreement_matrix``, what
    the calibration reward uses), soft agreement (token-F1) and the overlap reading of the wrong rows
    (``max(overlap_matrix, agreement)``, as calibration_reward builds it) of every candidate pair of one question."""
    n = len(cands)
    correct = np.asarray([float(LAB_GRADER(c, golds, question)) for c in cands], float)
    agree = np.asarray(qa.agreement_matrix(question, cands, jd), float)
    norm = [bool(normalize_answer(x)) for x in cands]
    soft = np.array([[token_f1(a, b) if (na and nb) else float(i == j and na)
                      for j, (b, nb) in enumerate(zip(cands, norm))] for i, (a, na) in enumerate(zip(cands, norm))])
    over = np.maximum(np.asarray(overlap_matrix(cands, question), float), agree)
    return correct, agree, soft, over


# ----------------------------------------------------------------------------------------------------------
# training


def group_rewards(world: World, design: Design, idx: np.ndarray, step: int, max_steps: int) -> np.ndarray:
    """The reward functions' outputs for K rollouts (candidate indices ``idx``, N×K) of every question:
    a (N·K)×F array, F = 1 (RLVR) or 2 (correct, λ(t)·r_cal), as the trainer's reward functions return them."""
    N, K = idx.shape
    rows = np.arange(N)[:, None]
    y = world.correct[rows, idx]
    if design.method == "rlvr":
        return y.reshape(-1, 1)
    if design.judge != world.judge.name:
        raise ValueError(f"design {design.name!r} reads the {design.judge} judge; the world was judged by "
                         f"{world.judge.name} (make_world(judge=...))")
    mat = world.agree if design.agreement == "judge" else world.soft
    A = mat[rows[:, :, None], idx[:, :, None], idx[:, None, :]]
    Aw = None
    if design.agreement_wrong == "overlap":
        Aw = np.maximum(world.overlap[rows[:, :, None], idx[:, :, None], idx[:, None, :]], A)
    r_cal, _ = R.group_calibration_scores(A, y, design.settings, empty=idx == world.empty_index, agreement_wrong=Aw)
    lam = R.lambda_at(SimpleNamespace(global_step=step, max_steps=max_steps), design.settings)
    return np.stack([y.reshape(-1), lam * r_cal.reshape(-1)], axis=1)


def train(
    world: World, design: Design, steps: int = 300, num_generations: int = 8, lr: float = 0.02, seed: int = 0,
) -> np.ndarray:
    """Run ``steps`` GRPO steps (every question once per step) and return the final logits θ (N×M)."""
    rng = np.random.default_rng(seed)
    theta = world.theta0.copy()
    N, Mc = theta.shape
    K = num_generations
    v, beta2 = 0.0, 0.99
    for step in range(steps):
        pi = _softmax(theta)
        idx = _sample(pi, K, rng)
        rpf = group_rewards(world, design, idx, step, steps)
        adv = grpo_advantages(rpf, K, design.weights, design.scale_rewards, design.aggregation).reshape(N, K)
        # Σ_j A_j ∇ log π(a_j) / K, ∇_θ log π(a) = e_a − π
        g = np.bincount((np.arange(N)[:, None] * Mc + idx).ravel(), adv.ravel(), N * Mc).reshape(N, Mc)
        g = (g - adv.sum(axis=1, keepdims=True) * pi) / K
        v = beta2 * v + (1 - beta2) * float(np.mean(g**2))
        vhat = v / (1 - beta2 ** (step + 1))
        if vhat > 0:
            theta += lr * g / math.sqrt(vhat)
    return theta


# ----------------------------------------------------------------------------------------------------------
# evaluation


def evaluate(world: World, theta: np.ndarray, eval_samples: int | None = 10, seed: int = 0) -> dict[str, float]:
    """Greedy-answer accuracy, ECE / Brier / AUROC of the agreement confidence, degenerate-question shares.

    The confidence is the share of ``eval_samples`` sampled answers that the judge finds equivalent to the
    greedy one, as the QA tasks compute it (their default is 10 samples); ``eval_samples=None`` takes the
    exact expectation Σ_a π(a)·[a ≡ greedy] instead.
    """
    pi = _softmax(theta)
    N = pi.shape[0]
    rows = np.arange(N)
    g = pi.argmax(axis=1)
    correct = world.correct[rows, g]
    A = world.agree.copy()
    A[:, world.empty_index, :] = 0.0  # an empty sample agrees with nothing, an empty greedy answer too
    A[:, :, world.empty_index] = 0.0
    if eval_samples is None:
        conf = np.einsum("nm,nm->n", A[rows, g], pi)
    else:
        smp = _sample(pi, int(eval_samples), np.random.default_rng(seed))
        conf = A[rows[:, None], g[:, None], smp].mean(axis=1)
    mass_correct = (pi * (world.meaning == 0)).sum(axis=1)
    mass_empty = pi[:, world.empty_index]
    wrong_mass = np.stack([(pi * (world.meaning == w)).sum(axis=1) for w in range(1, world.n_wrong + 1)], axis=1)
    p_agree = np.einsum("nm,nmk,nk->n", pi, A, pi)
    gave_up = (mass_correct < 0.1) & (mass_empty < 0.5)
    learnable = (_softmax(world.theta0) * (world.meaning == 0)).sum(axis=1) >= 0.01
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", M.SemcalMetricWarning)
        auroc = M.auroc_confidence(y_true=correct, y_prob=conf)
    return {
        "acc": float(correct.mean()),
        "p_correct": float(mass_correct.mean()),
        "ece": M.ece(y_true=correct, y_prob=conf, n_bins=15),
        "brier": M.brier_confidence(y_true=correct, y_prob=conf),
        "auroc": auroc,
        "empty": float((mass_empty >= 0.5).mean()),
        "distinct_wrong": float((gave_up & (p_agree < 0.2)).mean()),
        "collapsed_wrong": float((gave_up & (wrong_mass.max(axis=1) >= 0.8)).mean()),
        "padded": float((pi * world.padded).sum(axis=1).mean()),
        "lost": float((correct[learnable] == 0).mean()) if learnable.any() else float("nan"),
    }


# ----------------------------------------------------------------------------------------------------------
# the table

COLUMNS = [
    ("acc", "acc", "{:.3f}"),
    ("ECE", "ece", "{:.3f}"),
    ("Brier", "brier", "{:.3f}"),
    ("AUROC", "auroc", "{:.3f}"),
    ("empty", "empty", "{:.2f}"),
    ("distinct-wrong", "distinct_wrong", "{:.2f}"),
    ("collapsed-wrong", "collapsed_wrong", "{:.2f}"),
    ("padded mass", "padded", "{:.3f}"),
    ("lost", "lost", "{:.2f}"),
]
#: the lab's settings (benchmarks/reward_lab.py; the test runs a smaller version)
LAB = dict(n_questions=200, steps=300, num_generations=8, lr=0.02)


def run_lab(
    designs: list[Design] | None = None,
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4),
    n_questions: int = LAB["n_questions"],
    steps: int = LAB["steps"],
    num_generations: int = LAB["num_generations"],
    lr: float = LAB["lr"],
    world_kwargs: dict | None = None,
) -> dict[str, dict]:
    """Train every design on the same worlds (one world per seed: paired comparisons) and return, per design
    name, ``{"runs": [metrics per seed], "mean": {...}, "sd": {...}}``; the untrained policy is ``"initial"``."""
    designs = DESIGNS if designs is None else designs
    runs: dict[str, list] = {"initial": []}
    for d in designs:
        runs.setdefault(d.name, [])
    t0 = time.perf_counter()
    for s in seeds:
        world = make_world(n_questions, seed=s, **(world_kwargs or {}))
        runs["initial"].append(evaluate(world, world.theta0, seed=2000 + s))
        for d in designs:
            theta = train(world, d, steps, num_generations, lr, seed=1000 + s)
            runs[d.name].append(evaluate(world, theta, seed=2000 + s))
    out = {}
    for name, rs in runs.items():
        keys = rs[0].keys()
        arr = {k: np.array([r[k] for r in rs]) for k in keys}
        with warnings.catch_warnings():  # AUROC is undefined (NaN) when every answer is right or every one wrong
            warnings.simplefilter("ignore", RuntimeWarning)
            out[name] = {
                "runs": rs,
                "mean": {k: float(np.nanmean(a)) for k, a in arr.items()},
                "sd": {k: float(np.nanstd(a, ddof=1)) if len(a) > 1 else 0.0 for k, a in arr.items()},
            }
    out["_meta"] = {"seconds": time.perf_counter() - t0, "seeds": list(seeds), "n_questions": n_questions,
                    "steps": steps, "K": num_generations, "lr": lr}
    return out


def format_table(result: dict, markdown: bool = True) -> str:
    """The lab's table: mean ± sd over seeds for every design."""
    names = [n for n in result if not n.startswith("_")]
    head = ["design", *[c[0] for c in COLUMNS]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n in names:
        m, s = result[n]["mean"], result[n]["sd"]
        cells = [f"{fmt.format(m[k])} ± {fmt.format(s[k])}" for _, k, fmt in COLUMNS]
        lines.append("| " + " | ".join([n, *cells]) + " |")
    return "\n".join(lines)
