"""Policy lab: GRPO on a policy with shared parameters, trained on some questions and scored on held-out ones.

Closer to a GRPO run on a language model than the tabular lab (:mod:`research.reward_lab`), and cheap enough to
run every design on many seeds on 2 CPU cores:

* **Designs are the shipped configs.** :func:`design_from_config` reads a YAML of ``trainers/configs`` with
  :func:`trainers.config.load_config` — the method, every ``reward`` option the trainer reads, ``grpo.scale_rewards``
  and ``num_generations``, and the generation batch (``per_device_train_batch_size × gradient_accumulation_steps``)
  — so :data:`CSR` (``csr.yaml``, the paper's reward), :data:`CSR_LIKELIHOOD`, :data:`CSR_SPREAD` and :data:`RLVR`
  are what ``semcal-train`` would run; ablations are derived from them with explicit names (:data:`ABLATIONS`).
* **World** (:func:`make_world`). N questions; each has W + 1 *entities* (0 = the gold, 1..W wrong answers). Each
  entity is written in the base string and an alias (the gold's alias is a gold alias, so it is correct; no
  string judge can tell it is the same entity), and — ``adversaries=True`` — in the trick forms of
  :data:`research.answer_grammar.GRAMMAR` (:data:`TRICK_FORMS`): surface variants that fold to the same answer
  (case, quotes, diacritics, Cyrillic homoglyphs, full width, a lead-in), content added to the same claim
  (random words after or before, chatter, the question repeated, a hedge, a transliteration) and, for the wrong
  entities, lists with the gold and the negation "not <gold>"; plus the empty answer. The *base model* is a
  fixed prior θ0[q, a] (the knowledge of a small LM: probability of the gold entity spread over [0, 0.9], wrong
  mass on one or a few wrong entities, 10 % of each entity on its trick forms). Each entity also carries an
  *evidence* score e ~ N(μ·[gold], 1), a feature the policy can learn to trust.
* **Rewards as the trainer computes them**: correctness y = :func:`trainers.rewards.correctness` (the grader,
  :func:`semcal_eval.qa.grading.grade`) of each candidate string, agreement = ``semcal_eval.qa.agreement_matrix``
  with the design's judge (``strict`` in every shipped config), for ``agreement_wrong: overlap`` the wrong rows
  read ``max(overlap_matrix(strings), judge)`` (:func:`trainers.answer_match.overlap_matrix`); then
  :func:`trainers.rewards.group_calibration_scores` and :func:`trainers.rewards.lambda_at` with the design's
  options. The strings of every question follow one pattern, so the judge is asked about three questions and the
  rest are checked to be alike (:func:`make_world` raises otherwise).
* **Policy** with shared parameters: logit(q, a) = τ_b·θ0[q, a] + v_b·e[q, a] + w_{b, form(a)}, b = the
  question's bucket of base confidence (4 buckets). τ sharpens or flattens (confidence), v trades prior for
  evidence (accuracy), w prefers surface forms (tricks). Nothing is specific to one question, so what is
  learnt on the training questions is what shows on the held-out ones.
* **GRPO** as TRL runs the config on one GPU: each step draws generation_batch / K training questions × K
  rollouts, scores them, forms TRL's advantages (:func:`research.advantages.grpo_advantages`, the config's
  ``scale_rewards``) and takes an Adam step on the mean of A_j·∇ log π(a_j); 500 steps.
* **Evaluation** on held-out questions: the answer is the greedy string, correct iff the grader says so (as the
  evaluation tasks grade it); its confidence is the share of 10 samples that make the same *claim* (the same
  entity in any form; a list or the negation is a claim of its own; an empty answer agrees with nothing) —
  truth about meaning, not the policy's judge, so a reward that scatters surface variants does not look
  calibrated for it. Reported: accuracy, ECE (15 bins), Brier, AUROC, ``trick`` (the probability of the
  trick forms of wrong entities) and the *trick pay* (below).
* **Trick pay**, measured during training: for every rollout of a *wrong* entity drawn in a trick form, the reward
  it earned minus the reward the entity's plain (base) form would have earned in the same group, the rest of the
  group unchanged (a counterfactual within the group, so no selection effect); separately for the correctness
  term and for the calibration term λ(t)·r_cal, overall and per trick form. > 0 means the trick pays.
* **References**: :func:`fit_likelihood`, the family's maximum-likelihood fit (not RL), says how calibrated this
  policy family can be on held-out questions; :func:`posthoc_rows` recalibrates the RLVR policy's confidence
  after training (Platt scaling and isotonic regression, fitted on the training questions, never on the
  held-out ones).

Not modelled: token-level generation and credit assignment, answers outside the candidate list, the KL term,
learning-rate schedules, LoRA, sampling temperature; the base model's knowledge (θ0, e) is fixed, so accuracy
moves only through the shared evidence weight.
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
from semcal_eval.qa.judges import get_judge
import trainers
from research import answer_grammar as G
from research.advantages import grpo_advantages
from research.categorical import sample_rows as _sample
from research.categorical import softmax_rows as _softmax
from trainers import rewards as R
from semcal_eval.qa.grading import grade_strict as LAB_GRADER
from trainers.answer_match import overlap_matrix

__all__ = ["LabDesign", "design_from_config", "PolicyWorld", "make_world", "train", "fit_likelihood", "evaluate",
           "posthoc_rows", "run", "summarise", "format_table", "CSR", "CSR_LIKELIHOOD", "CSR_SPREAD", "RLVR",
           "CHOSEN", "MAIN", "ABLATIONS", "TRICK_FORMS", "LIKELIHOOD_FIT", "PLATT", "ISOTONIC"]

CONFIGS = Path(trainers.__file__).resolve().parent / "configs"
BASE_FORMS = ("base", "alias")
#: the trick forms of the world, from research.answer_grammar.GRAMMAR ("lower" is left out: the lab's names are
#: lower case already)
SURFACE_FORMS = ("upper", "punct", "accent", "homoglyph", "fullwidth", "lead_in")
CONTENT_FORMS = ("suffix_1", "suffix_3", "suffix_5", "prefix", "chatter", "question_before", "hedge", "translation")
GOLD_FORMS = ("list_comma", "list_or", "list_either", "negation")
TRICK_FORMS = SURFACE_FORMS + CONTENT_FORMS + GOLD_FORMS
N_BUCKETS = 4
BUCKET_EDGES = (0.25, 0.5, 0.75)  # base confidence (largest entity mass) buckets
CALIBRATION_METHODS = ("csr", "csr_likelihood", "csr_spread")


# ----------------------------------------------------------------------------------------------------------
# designs: the shipped configs


@dataclass(frozen=True)
class LabDesign:
    """A reward design as a config states it: ``method`` (``rlvr``: r = y; the CSR methods: r = y + λ(t)·r_cal,
    weights (1, 1)), the ``reward`` options the trainer passes to :func:`trainers.rewards.calibration_reward`,
    TRL's ``scale_rewards``, ``num_generations`` and the generation batch. Build it with
    :func:`design_from_config`; derive ablations with :func:`dataclasses.replace` and a name of their own."""

    name: str
    method: str
    score: str
    reading: str
    bounded: bool
    eps: float
    empty_answer: str
    lambda_schedule: str
    lambda_max: float
    lambda_min: float
    judge: str
    agreement_wrong: str
    scale_rewards: str
    num_generations: int
    generation_batch: int
    config: str = ""

    def __post_init__(self):
        if self.method != "rlvr" and self.method not in CALIBRATION_METHODS:
            raise ValueError(f"the policy lab trains rlvr and {', '.join(CALIBRATION_METHODS)}, not {self.method!r}")
        self.settings  # the reward options, checked once by the trainer's own table (trainers.config)

    @property
    def weights(self) -> list[float]:
        return [1.0] if self.method == "rlvr" else [1.0, 1.0]

    @cached_property
    def settings(self) -> R.RewardSettings:
        """The design's calibration options as the trainer's typed reward settings (built and checked once)."""
        return R.RewardSettings.from_attrs(self)


#: The labs study the rewards under the strict judge and grader of task version 2 (their synthetic answers,
#: "gold12", "wrong12x3", are built for string equality; the cover judge reads digits inside words as numbers
#: and citation marks). Every lab world and design uses LAB_JUDGE and LAB_GRADER whatever a shipped config names;
#: porting the labs to the cover judge, the trainer's default since issue 41, is open (docs/TRAINING.md).
LAB_JUDGE = "strict"

def design_from_config(path: str | Path, name: str | None = None) -> LabDesign:
    """The lab design of a shipped config (a YAML path, or a name in ``trainers/configs``), every option read
    from :func:`trainers.config.load_config`; ``name`` defaults to the method."""
    from trainers.config import load_config

    p = Path(path)
    if p.suffix not in (".yaml", ".yml"):
        p = CONFIGS / f"{path}.yaml"
    cfg = load_config(p)
    r, g = cfg.reward, cfg.grpo
    scale = {True: "group", False: "none"}.get(g.get("scale_rewards", "group"), g.get("scale_rewards", "group"))
    return LabDesign(
        name=name or cfg.method, method=cfg.method, score=r.score, reading=r.reading,
        bounded=r.bounded, eps=r.eps, empty_answer=r.empty_answer,
        lambda_schedule=r.lambda_schedule, lambda_max=r.lambda_max, lambda_min=r.lambda_min,
        judge=LAB_JUDGE, agreement_wrong=r.agreement_wrong, scale_rewards=scale,
        num_generations=int(g["num_generations"]),
        generation_batch=int(g["per_device_train_batch_size"]) * int(g.get("gradient_accumulation_steps", 1)),
        config=str(p),
    )


CSR = design_from_config(CONFIGS / "csr.yaml", "csr (paper)")
CSR_LIKELIHOOD = design_from_config(CONFIGS / "csr_likelihood.yaml", "csr_likelihood")
CSR_SPREAD = design_from_config(CONFIGS / "csr_spread.yaml", "csr_spread")
RLVR = design_from_config(CONFIGS / "rlvr.yaml", "rlvr")
#: the shipped default method (csr.yaml)
CHOSEN = CSR
#: the table's designs
MAIN = [CSR, CSR_LIKELIHOOD, CSR_SPREAD, RLVR]
#: one option changed at a time, each named for what it changes
ABLATIONS = [
    replace(CSR, name="csr (paper), λ ≡ λ_max from step 0", lambda_schedule="constant"),
    replace(CSR, name="csr (paper), bounded (÷ log 1/ε), λ 0 → ½", bounded=True, lambda_max=0.5),
    replace(CSR, name="csr (paper), empty answer worst", empty_answer="worst"),
    replace(CSR, name="csr (paper), rollout reading", reading="rollout"),
    replace(CSR, name="csr (paper), wrong rows by overlap", agreement_wrong="overlap"),
    replace(CSR_LIKELIHOOD, name="csr_likelihood, λ linear 0 → 1", lambda_schedule="linear"),
    replace(CSR_SPREAD, name="csr_spread, wrong rows by the judge only", agreement_wrong="judge"),
    replace(CSR_SPREAD, name="csr_spread, λ linear 0 → 1", lambda_schedule="linear"),
    replace(RLVR, name="rlvr, scale batch", scale_rewards="batch"),
]


# ----------------------------------------------------------------------------------------------------------
# the world


@dataclass
class PolicyWorld:
    questions: list[str]
    golds: list[list[str]]
    candidates: "list[list[str]]"  # built on first access (_Candidates)
    source: np.ndarray  # M: entity 0 (gold) .. W, −1 empty
    meaning: np.ndarray  # M: the claim, for the evaluation: entity, W + m (list with entity m), 2W + 1 (negation), −1
    form: np.ndarray  # M: index into forms (empty: len(forms))
    forms: tuple[str, ...]
    correct: np.ndarray  # M: the grader's verdict (the same for every question; checked)
    empty: np.ndarray  # M: the trainer's "empty answer"
    theta0: np.ndarray  # N×M
    evidence: np.ndarray  # N×M
    bucket: np.ndarray  # N
    judged: dict = field(repr=False)  # judge name → (A M×M, max(overlap, A) M×M)
    probe: list = field(repr=False, default_factory=list)  # the questions the judge was asked about

    @property
    def trick(self) -> np.ndarray:
        return np.isin(self.form, [self.forms.index(f) for f in TRICK_FORMS if f in self.forms])

    def agreement(self, judge: str) -> tuple[np.ndarray, np.ndarray]:
        if judge not in self.judged:
            self.judged[judge] = _judge_world(self, judge)
        return self.judged[judge]


def _strings(q: int, n_wrong: int, forms: tuple[str, ...]):
    """Candidate strings of question q with their source entity, claim and form; trick forms come from
    research.answer_grammar.GRAMMAR with randomness that depends on (entity, form) only, so every question (of
    every world) has the same pattern: the same filler words, hedges, marks and letters changed."""
    question = f"Which thing{q} is the topic{q}?"
    gold = f"gold{q}"
    alias = f"alt{q}x0"
    cands, source, meaning, form = [], [], [], []
    for m in range(n_wrong + 1):
        base = gold if m == 0 else f"wrong{q}x{m}"
        for fi, f in enumerate(forms):
            if m == 0 and f in GOLD_FORMS:
                continue  # a list of the gold with itself, "not" the gold as the gold's own form: not defined
            if f == "base":
                s = base
            elif f == "alias":
                s = alias if m == 0 else f"alt{q}x{m}"
            else:
                s = G.transform(f, base, question, np.random.default_rng([m, fi]), gold=gold)
            cands.append(s)
            source.append(m)
            form.append(fi)
            meaning.append(2 * n_wrong + 1 if f == "negation" else n_wrong + m if f in GOLD_FORMS else m)
    cands.append("")
    source.append(-1)
    meaning.append(-1)
    form.append(len(forms))
    return cands, source, meaning, form, question, [gold, alias]


def _judge_question(question: str, cands: list[str], golds: list[str], judge: str):
    """What the trainer's reward code says about every candidate of one question: correctness
    (trainers.rewards.correctness), the judge's agreement matrix of the answers, the overlap reading of the
    wrong rows and emptiness — as trainers.rewards.calibration_reward reads a group."""
    preds = [R.extract_answer(R.completion_text(c)) for c in cands]
    n = len(preds)
    y = np.asarray([float(LAB_GRADER(p, golds, question)) for p in preds], float)
    A = np.asarray(qa.agreement_matrix(question, preds, get_judge(judge)), float)
    Aw = np.maximum(np.asarray(overlap_matrix(preds, question), float), A)
    empty = np.array([not p.strip() for p in preds])
    return y, A, Aw, empty


_JUDGED: dict = {}  # (n_wrong, forms, judge, probe questions) → what the trainer's code says (same for every world)


def _judge_world(world: PolicyWorld, judge: str):
    key = (int(world.source.max()), world.forms, judge, tuple(world.probe))
    if key not in _JUDGED:
        got = None
        for q in world.probe:
            res = _judge_question(world.questions[q], world.candidates[q], world.golds[q], judge)
            if got is None:
                got = res
            elif not all(np.array_equal(a, b) for a, b in zip(res, got)):
                raise AssertionError(f"the {judge} judge treats two questions of the lab differently; check _strings")
        _JUDGED[key] = got
    y, A, Aw, empty = _JUDGED[key]
    if not np.array_equal(y, world.correct) or not np.array_equal(empty, world.empty):
        raise AssertionError("the trainer's correctness or emptiness differs from the world's")
    return A, Aw


class _Candidates:
    """The candidate strings of each question, built on first access (the rewards need only the pattern)."""

    def __init__(self, n: int, n_wrong: int, forms: tuple[str, ...]):
        self._n, self._args, self._cache = n, (n_wrong, forms), {}

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, q: int) -> list[str]:
        q = range(self._n)[q]
        if q not in self._cache:
            self._cache[q] = _strings(q, *self._args)[0]
        return self._cache[q]

    def __iter__(self):
        return (self[q] for q in range(self._n))


def make_world(n_questions: int = 400, seed: int = 0, n_wrong: int = 6, adversaries: bool = True,
               evidence_mu: float = 1.0, acc_max: float = 0.9, acc_power: float = 3.0,
               empty_mass: float = 0.03, judges: tuple[str, ...] = ("strict",)) -> PolicyWorld:
    """N questions with base priors θ0, evidence and confidence buckets (see the module docstring)."""
    rng = np.random.default_rng(seed)
    forms = BASE_FORMS + (TRICK_FORMS if adversaries else ())
    _, sc, mn, fm, _, _ = _strings(0, n_wrong, forms)
    source, meaning, form = np.asarray(sc), np.asarray(mn), np.asarray(fm)
    qs = [f"Which thing{q} is the topic{q}?" for q in range(n_questions)]
    golds = [[f"gold{q}", f"alt{q}x0"] for q in range(n_questions)]
    # each entity's share of its mass by form: 60 % base, 30 % alias, 10 % over its trick forms
    share = np.zeros(len(source))
    for m in range(n_wrong + 1):
        sel = source == m
        f = form[sel]
        n_tricks = int((f >= 2).sum())
        sh = np.where(f == 0, 0.6, np.where(f == 1, 0.3, 0.1 / max(n_tricks, 1)))
        share[sel] = sh / sh.sum()
    theta, ev = [], []
    for _q in range(n_questions):
        a = acc_max * rng.uniform() ** acc_power
        alpha = math.exp(rng.uniform(math.log(0.03), 0.0))
        mm = np.concatenate([[a], (1 - a - empty_mass) * rng.dirichlet(np.full(n_wrong, alpha))])
        mass = np.where(source >= 0, mm[np.maximum(source, 0)] * share, empty_mass)
        theta.append(np.log(np.maximum(mass, 1e-12)))
        e = rng.normal(size=n_wrong + 1)
        e[0] += evidence_mu
        ev.append(np.where(source >= 0, e[np.maximum(source, 0)], 0.0))
    # what the grader must say, by construction: the gold entity in its base, alias and surface forms
    fi = {f: i for i, f in enumerate(forms)}
    correct = ((source == 0) & np.isin(form, [fi[f] for f in ("base", "alias", *SURFACE_FORMS) if f in fi])
               ).astype(float)
    theta = np.asarray(theta)
    p0 = np.exp(theta)
    top = np.stack([(p0 * (source == m)).sum(axis=1) for m in range(n_wrong + 1)], axis=1).max(axis=1)
    world = PolicyWorld(qs, golds, _Candidates(n_questions, n_wrong, forms), source, meaning, form, forms, correct,
                        source < 0, theta, np.asarray(ev), np.digitize(top, BUCKET_EDGES), {},
                        sorted({0, n_questions // 2, n_questions - 1}))
    for j in judges:
        world.agreement(j)
    return world


# ----------------------------------------------------------------------------------------------------------
# policy and GRPO


def _logits(world: PolicyWorld, params: dict, rows: np.ndarray) -> np.ndarray:
    b = world.bucket[rows]
    return (params["tau"][b, None] * world.theta0[rows] + params["v"][b, None] * world.evidence[rows]
            + params["w"][b][:, world.form])


def group_rewards(world: PolicyWorld, design: LabDesign, idx: np.ndarray, step: int, max_steps: int) -> np.ndarray:
    """Reward functions' outputs for rollouts ``idx`` (G×K candidate indices): (G·K)×F, as the trainer's
    (F = 1 for rlvr; correctness and λ(t)·r_cal for the CSR methods)."""
    y = world.correct[idx]
    if design.method == "rlvr":
        return y.reshape(-1, 1)
    A_all, Aw_all = world.agreement(design.judge)
    A = A_all[idx[:, :, None], idx[:, None, :]]
    Aw = Aw_all[idx[:, :, None], idx[:, None, :]] if design.agreement_wrong == "overlap" else None
    r_cal, _ = R.group_calibration_scores(A, y, design.settings, empty=world.empty[idx], agreement_wrong=Aw)
    lam = R.lambda_at(SimpleNamespace(global_step=step, max_steps=max_steps), design.settings)
    return np.stack([y.reshape(-1), lam * r_cal.reshape(-1)], axis=1)


def _trick_pay(world: PolicyWorld, design: LabDesign, idx: np.ndarray, rew: np.ndarray, step: int, steps: int,
               pay: dict) -> None:
    """Add to ``pay`` each wrong-entity trick rollout's reward over its plain (base-form) counterfactual, per
    term and per form: ``pay["corr"]``, ``pay["cal"]``, ``pay["n"]`` (arrays over the world's forms)."""
    F = rew.shape[1]
    per = rew.reshape(idx.shape + (F,))
    src = world.source[idx]
    g, j = np.nonzero((src > 0) & world.trick[idx])
    if not len(g):
        return
    base_of = {int(m): int(np.flatnonzero((world.source == m) & (world.form == 0))[0])
               for m in np.unique(src[g, j])}
    cf = idx[g].copy()
    cf[np.arange(len(g)), j] = [base_of[int(m)] for m in src[g, j]]
    cf_rew = group_rewards(world, design, cf, step, steps).reshape(cf.shape + (F,))
    d = per[g, j] - cf_rew[np.arange(len(g)), j]
    f = world.form[idx[g, j]]
    nF = len(world.forms) + 1
    for key, col in (("corr", d[:, 0]), ("cal", d[:, 1] if F > 1 else np.zeros(len(g)))):
        pay.setdefault(key, np.zeros(nF))
        np.add.at(pay[key], f, col)
    pay.setdefault("n", np.zeros(nF))
    np.add.at(pay["n"], f, 1)


def init_params(world: PolicyWorld) -> dict:
    return {"tau": np.ones(N_BUCKETS), "v": np.zeros(N_BUCKETS), "w": np.zeros((N_BUCKETS, len(world.forms) + 1))}


def train(world: PolicyWorld, design: LabDesign, train_rows: np.ndarray, steps: int = 500, K: int | None = None,
          lr: float = 0.02, seed: int = 0, pay: dict | None = None) -> dict:
    """``steps`` GRPO steps of (generation batch / K) training questions × K rollouts (K: the design's
    ``num_generations`` unless given); Adam on the shared parameters.

    ``pay`` (a dict, filled in place): the trick pay of :func:`_trick_pay`. (The trick *mass* is no such test:
    the form weights are shared by right and wrong entities.)"""
    K = int(K or design.num_generations)
    prompts = max(design.generation_batch // K, 1)
    rng = np.random.default_rng(seed)
    params = init_params(world)
    m1 = {k: np.zeros_like(v) for k, v in params.items()}
    m2 = {k: np.zeros_like(v) for k, v in params.items()}
    nF = len(world.forms) + 1
    for step in range(steps):
        rows = rng.choice(train_rows, size=prompts, replace=False)
        pi = _softmax(_logits(world, params, rows))
        idx = _sample(pi, K, rng)
        rew = group_rewards(world, design, idx, step, steps)
        adv = grpo_advantages(rew, K, design.weights, design.scale_rewards).reshape(prompts, K)
        if pay is not None:
            _trick_pay(world, design, idx, rew, step, steps, pay)
        b = world.bucket[rows]
        th, ev = world.theta0[rows], world.evidence[rows]
        r_ = np.arange(prompts)[:, None]
        # ∇ log π(a) = φ(a) − E_π φ for each feature φ (θ0, evidence, form one-hot)
        d_tau = th[r_, idx] - (pi * th).sum(axis=1, keepdims=True)
        d_v = ev[r_, idx] - (pi * ev).sum(axis=1, keepdims=True)
        fpi = np.zeros((prompts, nF))
        np.add.at(fpi, (np.repeat(np.arange(prompts), pi.shape[1]), np.tile(world.form, prompts)), pi.ravel())
        d_w = np.eye(nF)[world.form[idx]] - fpi[:, None, :]
        scale = 1.0 / (prompts * K)
        grads = {"tau": np.zeros(N_BUCKETS), "v": np.zeros(N_BUCKETS), "w": np.zeros((N_BUCKETS, nF))}
        np.add.at(grads["tau"], b, (adv * d_tau).sum(axis=1) * scale)
        np.add.at(grads["v"], b, (adv * d_v).sum(axis=1) * scale)
        np.add.at(grads["w"], b, (adv[:, :, None] * d_w).sum(axis=1) * scale)
        _adam_ascent(params, grads, m1, m2, step + 1, lr)
    return params


def _adam_ascent(params: dict, grads: dict, m1: dict, m2: dict, t: int, lr: float) -> None:
    """One Adam step (β = 0.9, 0.999) of gradient *ascent*, in place; ``t`` counts from 1."""
    for k in params:
        m1[k] = 0.9 * m1[k] + 0.1 * grads[k]
        m2[k] = 0.999 * m2[k] + 0.001 * grads[k] ** 2
        params[k] = params[k] + lr * (m1[k] / (1 - 0.9**t)) / (np.sqrt(m2[k] / (1 - 0.999**t)) + 1e-8)


def fit_likelihood(world: PolicyWorld, train_rows: np.ndarray, steps: int = 1500, lr: float = 0.05) -> dict:
    """Reference, not RL: the policy family's maximum-likelihood fit, Adam on the exact gradient of
    mean_q log π(correct | q) over the training questions (correct = the grader's verdict; ∇ = E_{π(·|correct)} φ
    − E_π φ). A well-specified family's likelihood maximiser is calibrated, so its held-out ECE says how
    calibrated this family *can* be; an RL design that stays far above it is held back by its reward."""
    params = init_params(world)
    m1 = {k: np.zeros_like(v) for k, v in params.items()}
    m2 = {k: np.zeros_like(v) for k, v in params.items()}
    nF, n = len(world.forms) + 1, len(train_rows)
    correct = world.correct > 0
    b, th, ev = world.bucket[train_rows], world.theta0[train_rows], world.evidence[train_rows]
    F = np.eye(nF)[world.form]
    for t in range(1, steps + 1):
        pi = _softmax(_logits(world, params, train_rows))
        post = pi * correct
        d = post / post.sum(axis=1, keepdims=True) - pi
        grads = {"tau": np.zeros(N_BUCKETS), "v": np.zeros(N_BUCKETS), "w": np.zeros((N_BUCKETS, nF))}
        np.add.at(grads["tau"], b, (d * th).sum(axis=1) / n)
        np.add.at(grads["v"], b, (d * ev).sum(axis=1) / n)
        np.add.at(grads["w"], b, d @ F / n)
        _adam_ascent(params, grads, m1, m2, t, lr)
    return params


# ----------------------------------------------------------------------------------------------------------
# evaluation and post-hoc recalibration

LIKELIHOOD_FIT = "reference: likelihood fit (not RL)"
PLATT = "rlvr + Platt (post hoc)"
ISOTONIC = "rlvr + isotonic (post hoc)"
SAMPLES = 10


def _metrics(conf: np.ndarray, correct: np.ndarray) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", M.SemcalMetricWarning)
        auroc = M.auroc_confidence(y_true=correct, y_prob=conf)
    return {"acc": float(correct.mean()), "ece": M.ece(y_true=correct, y_prob=conf, n_bins=15),
            "brier": M.brier_confidence(y_true=correct, y_prob=conf), "auroc": auroc}


def confidences(world: PolicyWorld, params: dict, rows: np.ndarray, samples: int = SAMPLES, seed: int = 0
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(confidence, correct, π) on ``rows``: greedy answer, graded; confidence = share of ``samples`` samples
    making its claim (0 for an empty greedy answer)."""
    pi = _softmax(_logits(world, params, rows))
    g = pi.argmax(axis=1)
    mg = world.meaning[g]
    correct = world.correct[g]
    smp = _sample(pi, samples, np.random.default_rng(seed))
    conf = ((world.meaning[smp] == mg[:, None]) & (mg[:, None] >= 0)).mean(axis=1)
    return conf, correct, pi


def evaluate(world: PolicyWorld, params: dict, rows: np.ndarray, samples: int = SAMPLES, seed: int = 0) -> dict:
    """Held-out metrics (:func:`confidences`); ``trick``: the probability of the wrong entities' content and gold
    trick forms; ``empty``: the empty answer's."""
    conf, correct, pi = confidences(world, params, rows, samples, seed)
    # the wrong entities' forms that change the answer string for the grader (content and gold tricks; the
    # surface forms are the same answer, and the gold's surface forms share their form weights)
    wrong_trick = world.trick & (world.source > 0) & ~np.isin(
        world.form, [world.forms.index(f) for f in SURFACE_FORMS if f in world.forms])
    return {**_metrics(conf, correct), "trick": float((pi * wrong_trick).sum(axis=1).mean()),
            "empty": float(pi[:, -1].mean())}


def _logit(c: np.ndarray, samples: int) -> np.ndarray:
    # a share of `samples` samples is 0 or 1 at the ends: clip half a sample in, so the logit is finite
    lo = 0.5 / samples
    c = np.clip(c, lo, 1 - lo)
    return np.log(c / (1 - c))


def fit_platt(conf: np.ndarray, correct: np.ndarray, samples: int = SAMPLES):
    """Platt scaling: an (unpenalised) logistic regression of correctness on logit(confidence)."""
    from sklearn.linear_model import LogisticRegression

    if len(np.unique(correct)) < 2:  # one class only: the constant rate is the fit
        rate = float(np.mean(correct))
        return lambda c: np.full(len(c), rate)
    lr = LogisticRegression(C=np.inf).fit(_logit(conf, samples)[:, None], correct.astype(int))
    return lambda c: lr.predict_proba(_logit(c, samples)[:, None])[:, 1]


def fit_isotonic(conf: np.ndarray, correct: np.ndarray):
    """Isotonic regression of correctness on the confidence (increasing, clipped outside the fitted range)."""
    from sklearn.isotonic import IsotonicRegression

    iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip").fit(conf, correct)
    return lambda c: iso.predict(c)


def posthoc_rows(world: PolicyWorld, params: dict, fit_rows: np.ndarray, eval_rows: np.ndarray, fit_seed: int,
                 eval_seed: int, samples: int = SAMPLES) -> dict:
    """Post-hoc recalibration of a trained policy's confidence: Platt and isotonic maps fitted on ``fit_rows``
    (the training questions) and applied to ``eval_rows`` (held out; must be disjoint). The answers, and so
    the accuracy, are the policy's own."""
    fit_rows, eval_rows = np.asarray(fit_rows), np.asarray(eval_rows)
    if np.intersect1d(fit_rows, eval_rows).size:
        raise ValueError("post-hoc calibrators must be fitted on questions disjoint from the evaluation's")
    cf, yf, _ = confidences(world, params, fit_rows, samples, fit_seed)
    ce, ye, _ = confidences(world, params, eval_rows, samples, eval_seed)
    return {PLATT: _metrics(fit_platt(cf, yf, samples)(ce), ye), ISOTONIC: _metrics(fit_isotonic(cf, yf)(ce), ye)}


# ----------------------------------------------------------------------------------------------------------
# runs and the table


def run(designs=None, seeds=tuple(range(20)), n_questions: int = 400, adversaries: bool = True, steps: int = 500,
        lr: float = 0.02, K: int | None = None, reference: bool = True, posthoc: bool = True,
        progress=None) -> dict:
    """Every design on the same worlds (paired by seed); half the questions train, half are held out. ``K``
    overrides every design's ``num_generations`` (the generation batch stays the config's). ``reference``: the
    family's likelihood fit; ``posthoc``: Platt and isotonic recalibration of the design named ``rlvr``
    (fitted on the training questions). ``progress``: called with a line after each seed."""
    designs = MAIN if designs is None else designs
    rl = next((d for d in designs if d.name == RLVR.name), None)
    out: dict = {"initial": []}
    if reference:
        out[LIKELIHOOD_FIT] = []
    for d in designs:
        out[d.name] = []
    if posthoc and rl is not None:
        out[PLATT], out[ISOTONIC] = [], []
    t0 = time.perf_counter()
    for s in seeds:
        world = make_world(n_questions, seed=s, adversaries=adversaries)
        perm = np.random.default_rng(10_000 + s).permutation(n_questions)
        tr, te = perm[: n_questions // 2], perm[n_questions // 2 :]
        out["initial"].append(evaluate(world, init_params(world), te, seed=20_000 + s))
        if reference:
            out[LIKELIHOOD_FIT].append(evaluate(world, fit_likelihood(world, tr), te, seed=20_000 + s))
        for d in designs:
            pay: dict = {}
            p = train(world, d, tr, steps=steps, K=K, lr=lr, seed=30_000 + s, pay=pay)
            ev = evaluate(world, p, te, seed=20_000 + s)
            if adversaries:
                n = pay.get("n", np.zeros(1))
                ev["pay_corr"] = float(pay["corr"].sum() / max(n.sum(), 1)) if "corr" in pay else 0.0
                ev["pay_cal"] = float(pay["cal"].sum() / max(n.sum(), 1)) if "cal" in pay else 0.0
                ev["pay_forms"] = {f: (float(pay["corr"][i] / n[i]), float(pay["cal"][i] / n[i]), int(n[i]))
                                   for i, f in enumerate(world.forms) if "n" in pay and n[i] > 0}
            out[d.name].append(ev)
            if posthoc and d is rl:
                for name, m in posthoc_rows(world, p, tr, te, 40_000 + s, 20_000 + s).items():
                    out[name].append(m)
        if progress is not None:
            progress(f"seed {s} done, {time.perf_counter() - t0:.0f} s")
    Ks = sorted({int(K or d.num_generations) for d in designs})
    out["_meta"] = {"seconds": time.perf_counter() - t0, "seeds": list(seeds), "n_questions": n_questions,
                    "adversaries": adversaries, "steps": steps, "lr": lr, "K": Ks[0] if len(Ks) == 1 else Ks,
                    "prompts": sorted({max(d.generation_batch // int(K or d.num_generations), 1) for d in designs})}
    return out


def _t95(n: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.975, n - 1)) if n > 1 else float("nan")


def _ci(a) -> tuple[float, float]:
    a = np.asarray(a, float)
    a = a[np.isfinite(a)]
    n = len(a)
    if not n:
        return float("nan"), float("nan")
    return float(a.mean()), (_t95(n) * float(a.std(ddof=1)) / math.sqrt(n)) if n > 1 else 0.0


def summarise(res: dict, ref: str = RLVR.name) -> list[dict]:
    """Per row: mean and 95 % t-interval (over seeds) of each metric; paired against ``ref``: Δacc and the ECE
    ratio (per-seed ECE / ref's ECE), each with its t-interval and worst seed; trick pay per term (mean per
    trick rollout) and the form whose calibration pay is largest."""
    rows = []
    base = res[ref]
    for name, runs in res.items():
        if name.startswith("_"):
            continue
        n = len(runs)
        row = {"design": name, "n": n}
        for k in ("acc", "ece", "brier", "auroc", "trick", "pay_corr", "pay_cal"):
            if k in runs[0]:
                row[k] = _ci([r[k] for r in runs])
        dacc = np.array([r["acc"] - b["acc"] for r, b in zip(runs, base)])
        ratio = np.array([r["ece"] / b["ece"] if b["ece"] > 0 else np.nan for r, b in zip(runs, base)])
        row["dacc"] = (*_ci(dacc), float(dacc.min()))
        row["ece_ratio"] = (*_ci(ratio), float(np.nanmax(ratio)))
        if "pay_forms" in runs[0]:
            forms = sorted({f for r in runs for f in r["pay_forms"]})
            per = {f: _ci([r["pay_forms"][f][1] for r in runs if f in r["pay_forms"]]) for f in forms}
            per_c = {f: _ci([r["pay_forms"][f][0] for r in runs if f in r["pay_forms"]]) for f in forms}
            row["pay_forms_cal"], row["pay_forms_corr"] = per, per_c
            if per:
                worst = max(per, key=lambda f: per[f][0])
                row["worst_form"] = (worst, *per[worst])
        rows.append(row)
    return rows


def _f(v, nd=3) -> str:
    return f"{v[0]:.{nd}f} ± {v[1]:.{nd}f}"


def format_table(rows: list[dict]) -> str:
    """The main table: metrics, trick pay per term, Δacc and ECE ratio against RLVR with worst seeds."""
    head = ("| design | acc | ECE | Brier | AUROC | Δacc vs rlvr (worst seed) | ECE ratio vs rlvr (worst seed) | "
            "trick pay: correctness | trick pay: calibration | largest calibration pay (form) |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        pay_c = _f(r["pay_corr"], 4) if "pay_corr" in r else "—"
        pay_k = _f(r["pay_cal"], 4) if "pay_cal" in r else "—"
        worst = "—" if "worst_form" not in r else "none > 0" if r["worst_form"][1] <= 0 else (
            f"{r['worst_form'][1]:+.4f} ({r['worst_form'][0]})")
        lines.append(
            f"| {r['design']} | {_f(r['acc'])} | {_f(r['ece'])} | {_f(r['brier'])} | {_f(r['auroc'])} | "
            f"{r['dacc'][0]:+.3f} ± {r['dacc'][1]:.3f} ({r['dacc'][2]:+.3f}) | "
            f"{r['ece_ratio'][0]:.2f} ± {r['ece_ratio'][1]:.2f} ({r['ece_ratio'][2]:.2f}) | {pay_c} | {pay_k} | "
            f"{worst} |")
    return "\n".join(lines)


def format_pay_by_form(rows: list[dict]) -> str:
    """Calibration-term trick pay per form (mean over seeds of the mean per rollout; correctness pay is listed
    only where it is not 0) for every design that has any."""
    rows = [r for r in rows if r.get("pay_forms_cal")]
    if not rows:
        return ""
    forms = [f for f in TRICK_FORMS if any(f in r["pay_forms_cal"] for r in rows)]
    lines = ["| form | " + " | ".join(r["design"] for r in rows) + " |", "|" + "---|" * (len(rows) + 1)]
    for f in forms:
        cells = []
        for r in rows:
            if f not in r["pay_forms_cal"]:
                cells.append("—")
                continue
            c = f"{r['pay_forms_cal'][f][0]:+.4f}"
            corr = r["pay_forms_corr"][f][0]
            cells.append(c if corr == 0 else f"{c} (corr {corr:+.4f})")
        lines.append(f"| {f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
