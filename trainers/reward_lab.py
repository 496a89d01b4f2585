"""Reward lab: GRPO on a tabular policy, to see what a reward design teaches before a GPU run is paid for.

The model is a table: each of N questions has a categorical policy π_q over M = 37 candidate answers (strings).
The candidates form meaning clusters: the correct answer in four forms (one of which the token-F1 judge finds
equivalent to the gold but not to another paraphrase), W = 8 wrong answers each with one paraphrase and two
*padded variants* ("w pad pad pad": the same wrong meaning, which the judge counts as different from every other
candidate), and the empty answer. Initial policies are spread in difficulty (initial probability of the correct
meaning from 0 to 0.9) and put most of their wrong mass on one or a few wrong answers, as language models do
(:func:`make_world`).

A training step is one GRPO step of TRL 1.16 on every question: K rollouts per question; rewards from the
project's own code — :func:`trainers.rewards.correctness` and ``semcal_eval.qa.agreement_matrix`` with the
token-F1 judge judge every candidate pair once, then :func:`trainers.rewards.group_calibration_scores` and
:func:`trainers.rewards.lambda_at` score each group exactly as :func:`trainers.rewards.calibration_reward`
does (``tests/test_reward_lab.py`` checks the two agree); advantages by :func:`grpo_advantages`, which
reproduces TRL's for each ``scale_rewards`` mode, reward weights and both ``multi_objective_aggregation``
modes; then a policy-gradient step θ_q += lr·Σ_j A_j ∇ log π_q(a_j) / K with one global second-moment
normaliser (Adam's invariance to the reward scale, without per-parameter rescaling, so that — as in an LM whose
parameters all questions share — questions with larger advantages move more).

Evaluation follows the QA tasks (``semcal_eval.qa.agreement.score_question``): the answer is the greedy (most
probable) string, correct iff the judge finds it equivalent to the gold; its confidence is the *agreement
confidence*, the share of 10 sampled answers the judge finds equivalent to it (0 for an empty answer).
Reported (:func:`evaluate`): accuracy; ECE (15 equal-width bins), Brier score and AUROC of that confidence;
the shares of degenerate questions —

- ``empty``: the empty answer holds ≥ ½ of the probability;
- ``distinct-wrong``: the correct meaning holds < 0.1 and two samples agree (judge) with probability < 0.2:
  answers the judge counts as different (padded variants of one wrong answer included);
- ``collapsed-wrong``: the correct meaning holds < 0.1 and one wrong *meaning* holds ≥ 0.8;

and ``padded`` (mean probability of padded variants: gaming the judge) and ``lost`` (share of the learnable
questions — initial probability of the correct meaning ≥ 0.01 — whose greedy answer ends wrong).

Run the table with ``python benchmarks/reward_lab.py`` (~40 s on 2 cores); ``tests/test_reward_lab.py`` runs a
smaller one.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field, replace
from types import SimpleNamespace

import numpy as np

from semcal_eval import qa
from semcal_eval.core import metrics as M
from semcal_eval.qa.answers import normalize_answer, token_f1
from semcal_eval.qa.judges import Judge, get_judge
from trainers import rewards as R

__all__ = [
    "SCALE_MODES",
    "AGGREGATIONS",
    "grpo_advantages",
    "Design",
    "World",
    "make_world",
    "train",
    "evaluate",
    "run_lab",
    "format_table",
    "DESIGNS",
]

SCALE_MODES = ("group", "batch", "none")
AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")
_STD_EPS = 1e-4  # TRL adds 1e-4 to the std before dividing


# ----------------------------------------------------------------------------------------------------------
# TRL's GRPO advantage


def _nanstd(x: np.ndarray, axis=None, keepdims: bool = False) -> np.ndarray:
    """Standard deviation ignoring NaNs with Bessel's correction; NaN where fewer than two values
    (``trl.trainer.utils.nanstd``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(x, axis=axis, keepdims=True)
        var = np.nanmean((x - mean) ** 2, axis=axis, keepdims=True)
    count = np.sum(~np.isnan(x), axis=axis, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        var = np.where(count > 1, var * count / (count - 1), np.nan)
    std = np.sqrt(var)
    return std if keepdims else np.squeeze(std, axis=axis) if axis is not None else std.reshape(())


def _nanmean(x: np.ndarray, axis=None, keepdims: bool = False) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(x, axis=axis, keepdims=keepdims)


def grpo_advantages(
    rewards_per_func,
    num_generations: int,
    weights=None,
    scale_rewards: str | bool = "group",
    aggregation: str = "sum_then_normalize",
) -> np.ndarray:
    r"""GRPO advantages exactly as TRL 1.16's ``GRPOTrainer`` forms them from the reward functions' outputs.

    ``rewards_per_func`` is B×F (B = G·K completions, groups of K consecutive rows; F reward functions; NaN
    where a function returned None). With w the reward weights (default 1 each):

    - ``aggregation="sum_then_normalize"`` (TRL's default): r = Σ_f w_f·r_f (NaN-sum; NaN when every function
      returned None), Ā_g = group mean, and A = r − Ā_g divided by σ + 10⁻⁴ where σ is the group's std
      (``scale_rewards="group"``, TRL's default; ``True`` means this), the std of all B rewards (``"batch"``),
      or not divided at all (``"none"``; ``False`` means this). Stds are NaN-aware with Bessel's correction.
    - ``aggregation="normalize_then_sum"``: each function is standardised within its group first,
      ((r_f − mean_g) / (std_g + 10⁻⁴)), then weighted and summed, and the sum standardised over the batch.

    NaN advantages (unscorable completions) become 0. In "group" mode a group whose rewards are all equal gets
    0 — and any nonzero spread, however small, is blown up to unit scale, which is why a small λ(t) does not
    scale the calibration term there; "batch" and "none" keep the relative size of the reward terms.

    Returns:
        the B advantages (float64; TRL computes in float32, so agreement is to ~1e-6 relative).

    >>> grpo_advantages([[1.0], [0.0], [0.0], [0.0]], 4).round(4).tolist()      # one right of four
    [1.4997, -0.4999, -0.4999, -0.4999]
    >>> grpo_advantages([[1.0], [0.0], [0.0], [0.0]], 4, scale_rewards="none").tolist()
    [0.75, -0.25, -0.25, -0.25]
    """
    Rf = np.asarray(rewards_per_func, dtype=np.float64)
    if Rf.ndim == 1:
        Rf = Rf[:, None]
    if Rf.ndim != 2:
        raise ValueError(f"rewards_per_func must be B×F (completions × reward functions), got shape {Rf.shape}")
    B, F = Rf.shape
    K = int(num_generations)
    if K < 1 or B % K:
        raise ValueError(f"{B} completions do not form whole groups of num_generations={K}")
    w = np.ones(F) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (F,):
        raise ValueError(f"{len(w)} reward weights for {F} reward functions")
    scale = {True: "group", False: "none"}.get(scale_rewards, scale_rewards)
    if scale not in SCALE_MODES:
        raise ValueError(
            f"scale_rewards must be one of {', '.join(SCALE_MODES)} (or True/False), got {scale_rewards!r}"
        )
    unscorable = np.isnan(Rf).all(axis=1)
    if aggregation == "sum_then_normalize":
        r = np.nansum(Rf * w, axis=1)
        r[unscorable] = np.nan
        mean = np.repeat(_nanmean(r.reshape(-1, K), axis=1), K)
        if scale == "batch":
            std = np.full(B, _nanstd(r)) if B > 1 else np.zeros(B)
        else:
            std = np.repeat(_nanstd(r.reshape(-1, K), axis=1), K) if K > 1 else np.zeros(B)
        adv = r - mean
        if scale != "none":
            adv = adv / (std + _STD_EPS)
    elif aggregation == "normalize_then_sum":
        g = Rf.reshape(-1, K, F)
        mean_k = _nanmean(g, axis=1, keepdims=True)
        std_k = _nanstd(g, axis=1, keepdims=True) if K > 1 else np.zeros_like(mean_k)
        r = np.nansum(((g - mean_k) / (std_k + _STD_EPS)).reshape(B, F) * w, axis=1)
        r[unscorable] = np.nan
        std = _nanstd(r) if B > 1 else 0.0
        adv = (r - _nanmean(r)) / (std + _STD_EPS)
    else:
        raise ValueError(f"aggregation must be one of {', '.join(AGGREGATIONS)}, got {aggregation!r}")
    return np.nan_to_num(adv, nan=0.0)


# ----------------------------------------------------------------------------------------------------------
# reward designs


@dataclass(frozen=True)
class Design:
    """One reward design and its GRPO settings; the defaults are the trainer's (trainers/config.py).

    ``method``: ``rlvr`` (r = correct), ``csr`` (r = correct + λ(t)·r_cal, weights (1, 1)) or ``cal_only``
    (the same two functions with weights (0, 1): r_cal alone). The calibration options are those of
    :func:`trainers.rewards.calibration_reward`; ``agreement="soft"`` uses the token-F1 value of each pair
    instead of the judge's 0/1 decision.
    """

    name: str
    method: str = "csr"
    scale_rewards: str = "none"
    aggregation: str = "sum_then_normalize"
    eps: float = R.DEFAULT_EPS
    reading: str = R.DEFAULT_READING
    score: str = "log"
    bounded: bool = True
    empty_answer: str = "worst"
    agreement: str = "judge"
    lambda_schedule: str = "linear"
    lambda_max: float = R.DEFAULT_LAMBDA_MAX
    lambda_min: float = 0.0

    def __post_init__(self):
        if self.method not in ("rlvr", "csr", "cal_only"):
            raise ValueError(f"Design.method must be rlvr, csr or cal_only, got {self.method!r}")
        if self.agreement not in ("judge", "soft"):
            raise ValueError(f"Design.agreement must be 'judge' or 'soft', got {self.agreement!r}")
        R.validate_calibration_args(2, self.eps, self.reading, self.lambda_schedule, self.lambda_max, self.lambda_min)
        R._validate_score(self.score, self.empty_answer)
        grpo_advantages(np.zeros((2, 1)), 2, scale_rewards=self.scale_rewards, aggregation=self.aggregation)

    @property
    def weights(self) -> list[float]:
        return {"rlvr": [1.0], "csr": [1.0, 1.0], "cal_only": [0.0, 1.0]}[self.method]


#: the trainer's design (trainers/config.py defaults) and the one before the lab
CHOSEN = Design("CSR chosen: none, pairwise BCE/log(1/ε), empty −1, λ 0→½")
TODAY = Design(
    "CSR before the lab: group, rollout BCE, empty free, λ 0→1", scale_rewards="group", reading="rollout",
    bounded=False, empty_answer="disagree", lambda_max=1.0,
)
RLVR = Design("RLVR (none)", method="rlvr")
#: the table of docs/TRAINING.md: baselines, the old design, one lever changed at a time, no curriculum, r_cal alone
DESIGNS: list[Design] = [
    Design("RLVR (group, TRL's default)", method="rlvr", scale_rewards="group"),
    Design("RLVR (batch)", method="rlvr", scale_rewards="batch"),
    RLVR,
    TODAY,
    replace(TODAY, name="  before, with batch scaling", scale_rewards="batch"),
    replace(CHOSEN, name="  chosen, unbounded BCE", bounded=False),
    replace(CHOSEN, name="  chosen, empty answers free", empty_answer="disagree"),
    replace(CHOSEN, name="  chosen, rollout reading", reading="rollout"),
    replace(CHOSEN, name="  chosen, soft (F1) agreement", agreement="soft"),
    replace(CHOSEN, name="  chosen, Brier score", score="brier"),
    replace(CHOSEN, name="  chosen, scale batch (before issue 22)", scale_rewards="batch"),
    replace(CHOSEN, name="  chosen, scale group", scale_rewards="group"),
    replace(CHOSEN, name="  chosen, λ 0→1", lambda_max=1.0),
    CHOSEN,
    replace(CHOSEN, name="  chosen, λ ≡ ½ from step 0", lambda_schedule="constant"),
    replace(CHOSEN, name="  chosen, λ ≡ 1 from step 0", lambda_schedule="constant", lambda_max=1.0),
    replace(CHOSEN, name="r_cal alone, λ ≡ 1 (chosen r_cal)", method="cal_only", lambda_schedule="constant",
            lambda_max=1.0),
    replace(TODAY, name="r_cal alone, λ ≡ 1 (r_cal before the lab)", method="cal_only", lambda_schedule="constant"),
]


# ----------------------------------------------------------------------------------------------------------
# the world: questions, candidate answers, judge results


@dataclass
class World:
    """Questions, candidates and everything the judge says about them (computed once, reused by every design).

    Arrays are N×M (questions × candidates) or N×M×M; ``meaning`` is 0 for the correct meaning, 1..W for the
    wrong ones and −1 for the empty answer (always the last candidate).
    """

    questions: list[str]
    golds: list[list[str]]
    candidates: list[list[str]]
    correct: np.ndarray
    agree: np.ndarray
    soft: np.ndarray
    meaning: np.ndarray
    padded: np.ndarray
    theta0: np.ndarray
    n_wrong: int
    judge: Judge = field(repr=False)

    @property
    def empty_index(self) -> int:
        return self.theta0.shape[1] - 1


def _candidates(q: int, n_wrong: int, n_padded: int) -> tuple[list[str], list[int], list[bool]]:
    """Candidate strings of question q with their meaning and padded flags. Every word is unique to its
    question and meaning, so the judge's decisions are the same for every question."""
    gold = f"gold{q}"
    # "the X" normalises to X; "X alias" has F1 2/3 with X; "X long form" has F1 1/2 with X (correct, and
    # equivalent to X) but 0.4 with "X alias": the judge splits the correct meaning unless the policy settles
    # on strings that agree with each other.
    cands = [gold, f"the {gold}", f"{gold} alias{q}", f"{gold} long{q} form{q}"]
    meaning, padded = [0] * 4, [False] * 4
    for w in range(1, n_wrong + 1):
        base = f"wrong{q}x{w}"
        cands += [base, f"{base} aka{q}x{w}"]
        meaning += [w, w]
        padded += [False, False]
        for v in range(n_padded):  # three filler words: F1 0.4 with the base, ≤ 1/3 with everything else
            cands.append(f"{base} " + " ".join(f"pad{q}x{w}x{v}x{t}" for t in range(3)))
            meaning.append(w)
            padded.append(True)
    cands.append("")
    meaning.append(-1)
    padded.append(False)
    return cands, meaning, padded


def make_world(
    n_questions: int = 200,
    seed: int = 0,
    n_wrong: int = 8,
    n_padded: int = 2,
    judge: str | Judge = "f1",
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
        c, mn, pd = _candidates(q, n_wrong, n_padded)
        question = f"question {q}?"
        gold = [c[0]]
        qs.append(question)
        golds.append(gold)
        cands.append(c)
        meaning.append(mn)
        padded.append(pd)
        # Every question has the same token-overlap pattern, so the judge decides the same for each: ask it
        # for the first question, and again for a few others to check.
        if q == 0 or q in (n_questions // 2, n_questions - 1):
            judged[q] = _judge_candidates(question, c, gold, jd)
        a = acc_max * rng.uniform() ** acc_power
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
    corr, agree, soft = judged[0]
    for other in judged.values():
        if not all(np.array_equal(a, b) for a, b in zip(other, judged[0])):
            raise AssertionError("the judge treats two questions of the lab differently; check _candidates")
    world = World(
        questions=qs, golds=golds, candidates=cands, correct=np.tile(corr, (n_questions, 1)),
        agree=np.tile(agree, (n_questions, 1, 1)), soft=np.tile(soft, (n_questions, 1, 1)),
        meaning=np.asarray(meaning), padded=np.asarray(padded), theta0=np.asarray(theta), n_wrong=n_wrong, judge=jd,
    )
    truth = (world.meaning == 0).astype(float)
    if not np.array_equal(world.correct, truth):  # the judge must see the world as built
        raise AssertionError("judge correctness disagrees with the built meanings; check the candidate strings")
    return world


def _judge_candidates(question: str, cands: list[str], gold: list[str], jd: Judge):
    """Correctness (``trainers.rewards.correctness``), 0/1 agreement (``qa.agreement_matrix``, what the
    calibration reward uses) and soft agreement (token-F1) of every candidate pair of one question."""
    correct = np.asarray(R.correctness([question] * len(cands), cands, [gold] * len(cands), jd), float)
    agree = np.asarray(qa.agreement_matrix(question, cands, jd), float)
    norm = [bool(normalize_answer(x)) for x in cands]
    soft = np.array([[token_f1(a, b) if (na and nb) else float(i == j and na)
                      for j, (b, nb) in enumerate(zip(cands, norm))] for i, (a, na) in enumerate(zip(cands, norm))])
    return correct, agree, soft


# ----------------------------------------------------------------------------------------------------------
# training


def _softmax(theta: np.ndarray) -> np.ndarray:
    z = np.exp(theta - theta.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def group_rewards(world: World, design: Design, idx: np.ndarray, step: int, max_steps: int) -> np.ndarray:
    """The reward functions' outputs for K rollouts (candidate indices ``idx``, N×K) of every question:
    a (N·K)×F array, F = 1 (RLVR) or 2 (correct, λ(t)·r_cal), as the trainer's reward functions return them."""
    N, K = idx.shape
    rows = np.arange(N)[:, None]
    y = world.correct[rows, idx]
    if design.method == "rlvr":
        return y.reshape(-1, 1)
    mat = world.agree if design.agreement == "judge" else world.soft
    A = mat[rows[:, :, None], idx[:, :, None], idx[:, None, :]]
    r_cal, _ = R.group_calibration_scores(
        A, y, design.eps, design.reading, empty=idx == world.empty_index, score=design.score,
        bounded=design.bounded, empty_answer=design.empty_answer,
    )
    lam = R.lambda_at(SimpleNamespace(global_step=step, max_steps=max_steps), design.lambda_schedule,
                      design.lambda_max, design.lambda_min)
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


def _sample(pi: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    u = rng.random((pi.shape[0], k))
    return np.minimum((np.cumsum(pi, axis=1)[:, None, :] < u[:, :, None]).sum(axis=2), pi.shape[1] - 1)


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
        auroc = M.auroc_confidence(conf, correct)
    return {
        "acc": float(correct.mean()),
        "p_correct": float(mass_correct.mean()),
        "ece": M.ece(conf, correct, 15),
        "brier": M.brier_confidence(conf, correct),
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
