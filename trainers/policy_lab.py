"""Policy lab: GRPO on a policy with shared parameters, trained on some questions and scored on held-out ones.

Closer to a GRPO run on a language model than the tabular lab (:mod:`trainers.reward_lab`), at the same cost
(~1 minute for 20 seeds on 2 cores):

* **World** (:func:`make_world`). N questions; each has W + 1 meanings (0 = correct, 1..W wrong) written in F
  surface *forms* shared by every meaning — the base string, a paraphrase, and (``adversaries=True``) the tricks
  of :mod:`trainers.adversaries`: random-word suffixes of 1, 3 and 5 words (for the correct meaning: the gold
  with chatter), the question repeated before the answer, upper case, punctuation — plus the empty answer.
  The *base model* is a fixed prior θ0[q, a] (the knowledge of a small LM: probability of the correct meaning
  spread over [0, 0.9], wrong mass on one or a few wrong answers, 10 % of each meaning on its trick forms).
  Each meaning also carries an *evidence* score e ~ N(μ·[correct], 1), a feature the policy can learn to trust.
* **Policy** with shared parameters: logit(q, a) = τ_b·θ0[q, a] + v_b·e[q, a] + w_{b, form(a)}, b = the
  question's bucket of base confidence (4 buckets). τ sharpens or flattens (confidence), v trades prior for
  evidence (accuracy), w prefers surface forms (tricks). Nothing is specific to one question, so what is
  learnt on the training questions is what shows on the held-out ones.
* **GRPO** as TRL 1.16 runs csr.yaml on one GPU: each step draws 4 training questions × K = 8 rollouts (the
  generation batch of csr.yaml), scores them with the trainer's reward code (correctness, judge agreement and
  word overlap of the real candidate strings through :func:`trainers.rewards.judged_answers`,
  ``semcal_eval.qa.agreement_matrix`` and :func:`trainers.answer_match.overlap_matrix`, then
  :func:`trainers.rewards.group_calibration_scores` and :func:`trainers.rewards.lambda_at`), forms TRL's
  advantages (:func:`trainers.reward_lab.grpo_advantages`) and takes an Adam step on the mean of
  A_j·∇ log π(a_j); 500 steps, each design's score and λ(t) (the chosen one: the likelihood score, λ ≡ 1).
* **Truth** is the candidates' meaning, never the policy's judge: on held-out questions the answer is the greedy
  string, correct iff its meaning is 0; its confidence is the share of 10 samples with the greedy answer's
  *meaning* (an empty answer agrees with nothing). Reported: accuracy, ECE (15 bins), Brier, AUROC, ``trick``
  (the probability of the trick forms on wrong meanings) and ``trick_pay`` (a wrong trick rollout's reward over
  its plain form's in the same group, during training: > 0 means a trick pays).
* **Reference**: :func:`fit_likelihood`, the family's maximum-likelihood fit (not RL), says how calibrated this
  policy family can be on held-out questions.

Not modelled: token-level generation and credit assignment, answers outside the candidate list, a judge that
makes mistakes on real paraphrases, the KL term, learning-rate schedules, LoRA, sampling temperature; the base
model's knowledge (θ0, e) is fixed, so accuracy moves only through the shared evidence weight.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from semcal_eval import qa
from semcal_eval.core import metrics as M
from semcal_eval.qa.judges import get_judge
from trainers import rewards as R
from trainers.answer_match import overlap_matrix
from trainers.reward_lab import grpo_advantages

__all__ = ["LabDesign", "PolicyWorld", "make_world", "train", "fit_likelihood", "evaluate", "run", "summarise", "DESIGNS",
           "CHOSEN", "LIKELIHOOD"]

BASE_FORMS = ("base", "para")
TRICK_FORMS = ("suffix_1", "suffix_3", "suffix_5", "question_before", "upper", "punct")
N_BUCKETS = 4
BUCKET_EDGES = (0.25, 0.5, 0.75)  # base confidence (largest meaning mass) buckets


@dataclass(frozen=True)
class LabDesign:
    """A reward design: ``method`` rlvr or csr; ``match`` span (default) or line; TRL's ``scale_rewards``."""

    name: str
    method: str = "csr"
    match: str = R.DEFAULT_MATCH
    scale_rewards: str = "none"
    lambda_schedule: str = "linear"
    lambda_max: float = R.DEFAULT_LAMBDA_MAX
    reading: str = R.DEFAULT_READING
    score: str = "log"

    @property
    def weights(self) -> list[float]:
        return [1.0] if self.method == "rlvr" else [1.0, 1.0]


RLVR = LabDesign("RLVR (scale none)", method="rlvr")
BEFORE = LabDesign("CSR before issue 22: line match, scale batch", match="line", scale_rewards="batch")
#: the design chosen before this lab existed (span match, scale none, the paper's pairwise BCE, λ linear 0 → ½)
BCE = LabDesign("CSR BCE: span match, scale none")
#: the likelihood form at λ ≡ 1, whose GRPO gradient is (pass@K-weighted) ∇ log π(correct): the default before
#: likelihood_spread; it cannot act in groups with no correct rollout
LIKELIHOOD = LabDesign("  likelihood, λ ≡ 1", score="likelihood", lambda_schedule="constant", lambda_max=1.0)
#: the chosen design: likelihood for correct rollouts, a wrong rollout charged its agreement with the group
CHOSEN = LabDesign("CSR chosen: likelihood_spread, λ ≡ 1", score="likelihood_spread", lambda_schedule="constant",
                   lambda_max=1.0)
DESIGNS = [
    RLVR,
    LabDesign("RLVR (scale batch)", method="rlvr", scale_rewards="batch"),
    BEFORE,
    LabDesign("  line match, scale none", match="line"),
    LabDesign("  span match, scale batch", scale_rewards="batch"),
    BCE,
    LabDesign("  BCE, λ ≡ ½", lambda_schedule="constant"),
    LabDesign("  BCE rollout reading", reading="rollout"),
    LabDesign("  Brier rollout reading", reading="rollout", score="brier"),
    LabDesign("  likelihood, λ linear 0 → 1", score="likelihood", lambda_max=1.0),
    LIKELIHOOD,
    LabDesign("  likelihood_spread, λ linear 0 → 1", score="likelihood_spread", lambda_max=1.0),
    CHOSEN,
]


@dataclass
class PolicyWorld:
    questions: list[str]
    golds: list[list[str]]
    candidates: list[list[str]]
    meaning: np.ndarray  # M: 0 correct, 1..W wrong, −1 empty
    form: np.ndarray  # M: index into forms (empty: len(forms))
    forms: tuple[str, ...]
    theta0: np.ndarray  # N×M
    evidence: np.ndarray  # N×M
    bucket: np.ndarray  # N
    judged: dict = field(repr=False)  # match → (y M, A M×M strict, Aw M×M or None, empty M)

    @property
    def trick(self) -> np.ndarray:
        return np.isin(self.form, [self.forms.index(f) for f in TRICK_FORMS if f in self.forms])


def _strings(q: int, W: int, forms: tuple[str, ...]) -> tuple[list[str], list[int], list[int], str]:
    question = f"Which thing{q} is the topic{q}?"
    cands, meaning, form = [], [], []
    for m in range(W + 1):
        base = f"gold{q}" if m == 0 else f"wrong{q}x{m}"
        for fi, f in enumerate(forms):
            if f == "base":
                s = base
            elif f == "para":
                s = f"{base} aka{q}x{m}"
            elif f.startswith("suffix_"):
                n = int(f.split("_")[1])
                # the correct meaning's suffix forms are the gold with chatter; every word unique to (q, m)
                s = base + " " + " ".join(f"pad{q}x{m}x{t}" for t in range(n))
            elif f == "question_before":
                s = f"{question} {base}"
            elif f == "upper":
                s = base.upper()
            else:
                s = f'"{base}"!'
            cands.append(s)
            meaning.append(m)
            form.append(fi)
    cands.append("")
    meaning.append(-1)
    form.append(len(forms))
    return cands, meaning, form, question


def _judge_world(question: str, cands: list[str], gold: list[str], match: str):
    """What the trainer's reward code says about every candidate: correctness, the judge's agreement of the
    judged answers, the overlap matrix (span) and emptiness — as trainers.rewards.calibration_reward reads them."""
    jd = get_judge("f1")
    n = len(cands)
    judged = R.judged_answers(cands, [question] * n, [gold] * n, match)
    y = np.asarray(R.correctness([question] * n, judged, [gold] * n, jd), float)
    A = np.asarray(qa.agreement_matrix(question, judged, jd), float)
    Aw = np.maximum(overlap_matrix(cands, question), A).astype(float) if match == "span" else None
    empty = np.array([not j.strip() for j in judged])
    return y, A, Aw, empty


def make_world(n_questions: int = 400, seed: int = 0, n_wrong: int = 6, adversaries: bool = True,
               evidence_mu: float = 1.0, acc_max: float = 0.9, acc_power: float = 3.0,
               empty_mass: float = 0.03) -> PolicyWorld:
    """N questions with base priors θ0, evidence and confidence buckets (see the module docstring)."""
    rng = np.random.default_rng(seed)
    forms = BASE_FORMS + (TRICK_FORMS if adversaries else ())
    qs, golds, cands, theta, ev = [], [], [], [], []
    meaning = form = None
    judged: dict = {}
    for q in range(n_questions):
        c, mn, fm, question = _strings(q, n_wrong, forms)
        meaning, form = np.asarray(mn), np.asarray(fm)
        qs.append(question)
        golds.append([c[0]])
        cands.append(c)
        # the word pattern is the same for every question: judge one, check two more
        if q in (0, n_questions // 2, n_questions - 1):
            for match in R.MATCHES:
                got = _judge_world(question, c, [c[0]], match)
                if match in judged:
                    for a, b in zip(got, judged[match]):
                        if not (a is None and b is None) and not np.array_equal(a, b):
                            raise AssertionError("the judge treats two lab questions differently; check _strings")
                else:
                    judged[match] = got
        a = acc_max * rng.uniform() ** acc_power
        alpha = math.exp(rng.uniform(math.log(0.03), 0.0))
        mm = np.concatenate([[a], (1 - a - empty_mass) * rng.dirichlet(np.full(n_wrong, alpha))])
        share = np.array([0.6, 0.3] + ([0.1 / len(TRICK_FORMS)] * len(TRICK_FORMS) if adversaries else []))
        share = share / share.sum()
        mass = np.zeros(len(c))
        for m in range(n_wrong + 1):
            mass[meaning == m] = mm[m] * share
        mass[-1] = empty_mass
        theta.append(np.log(np.maximum(mass, 1e-12)))
        e = rng.normal(size=n_wrong + 1)
        e[0] += evidence_mu
        ev.append(np.append(e[meaning[:-1]], 0.0))
    truth = (meaning == 0).astype(float)
    if not np.array_equal(judged["span"][0], truth):
        raise AssertionError("span matching must find every correct form (gold with chatter included) correct")
    theta = np.asarray(theta)
    p0 = np.exp(theta)
    top = np.stack([(p0 * (meaning == m)).sum(axis=1) for m in range(n_wrong + 1)], axis=1).max(axis=1)
    return PolicyWorld(qs, golds, cands, meaning, form, forms, theta, np.asarray(ev),
                       np.digitize(top, BUCKET_EDGES), judged)


def _logits(world: PolicyWorld, params: dict, rows: np.ndarray) -> np.ndarray:
    b = world.bucket[rows]
    return (params["tau"][b, None] * world.theta0[rows] + params["v"][b, None] * world.evidence[rows]
            + params["w"][b][:, world.form])


def _softmax(z: np.ndarray) -> np.ndarray:
    z = np.exp(z - z.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def _sample(pi: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    u = rng.random((pi.shape[0], k))
    return np.minimum((np.cumsum(pi, axis=1)[:, None, :] < u[:, :, None]).sum(axis=2), pi.shape[1] - 1)


def group_rewards(world: PolicyWorld, design: LabDesign, idx: np.ndarray, step: int, max_steps: int) -> np.ndarray:
    """Reward functions' outputs for rollouts ``idx`` (G×K candidate indices): (G·K)×F, as the trainer's."""
    y_all, A_all, Aw_all, e_all = world.judged[design.match]
    y = y_all[idx]
    if design.method == "rlvr":
        return y.reshape(-1, 1)
    A = A_all[idx[:, :, None], idx[:, None, :]]
    Aw = None if Aw_all is None else Aw_all[idx[:, :, None], idx[:, None, :]]
    r_cal, _ = R.group_calibration_scores(A, y, R.DEFAULT_EPS, design.reading, empty=e_all[idx], agreement_wrong=Aw,
                                         score=design.score)
    lam = R.lambda_at(SimpleNamespace(global_step=step, max_steps=max_steps), design.lambda_schedule, design.lambda_max)
    return np.stack([y.reshape(-1), lam * r_cal.reshape(-1)], axis=1)


def _trick_pay(world: PolicyWorld, design: LabDesign, idx: np.ndarray, rew: np.ndarray, step: int, steps: int,
               pay: dict) -> None:
    """Add to ``pay`` each wrong trick rollout's reward gain over its plain (base-form) counterfactual."""
    w = np.asarray(design.weights)
    total = (rew * w).sum(axis=1).reshape(idx.shape)
    m = world.meaning[idx]
    g, j = np.nonzero((m > 0) & world.trick[idx])
    if not len(g):
        return
    plain = np.flatnonzero(world.form == world.forms.index("base"))  # candidate index of meaning k's base form
    cf = idx[g].copy()
    cf[np.arange(len(g)), j] = plain[m[g, j]]
    cf_total = (group_rewards(world, design, cf, step, steps) * w).sum(axis=1).reshape(cf.shape)
    pay["sum"] = pay.get("sum", 0.0) + float((total[g, j] - cf_total[np.arange(len(g)), j]).sum())
    pay["n"] = pay.get("n", 0) + len(g)


def init_params(world: PolicyWorld) -> dict:
    return {"tau": np.ones(N_BUCKETS), "v": np.zeros(N_BUCKETS), "w": np.zeros((N_BUCKETS, len(world.forms) + 1))}


def train(world: PolicyWorld, design: LabDesign, train_rows: np.ndarray, steps: int = 500, prompts: int = 4,
          K: int = 8, lr: float = 0.02, seed: int = 0, pay: dict | None = None) -> dict:
    """``steps`` GRPO steps of ``prompts`` training questions × K rollouts; Adam on the shared parameters.

    ``pay`` (a dict, filled in place): for every *wrong* rollout drawn in a trick form, its total reward minus
    the total reward it would have earned as the plain (base) form of the same meaning, the rest of its group
    unchanged (a counterfactual within the group, so no selection effect); summed in ``pay["sum"]`` over
    ``pay["n"]`` rollouts. ``trick_pay`` > 0 is what "a trick pays" means (issue 22, item 1). (The trick *mass*
    is no such test: the form weights are shared by right and wrong meanings, so it also grows when the
    gold-with-chatter forms are rewarded for being correct.)"""
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
    mean_q log π(correct meaning | q) over the training questions (∇ = E_{π(·|correct)} φ − E_π φ). A
    well-specified family's likelihood maximiser is calibrated, so its held-out ECE says how calibrated this
    family *can* be; an RL design that stays far above it is held back by its reward, not by the policy."""
    params = init_params(world)
    m1 = {k: np.zeros_like(v) for k, v in params.items()}
    m2 = {k: np.zeros_like(v) for k, v in params.items()}
    nF, n = len(world.forms) + 1, len(train_rows)
    correct = world.meaning == 0
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


LIKELIHOOD_FIT = "reference: likelihood fit (not RL)"


def evaluate(world: PolicyWorld, params: dict, rows: np.ndarray, samples: int = 10, seed: int = 0) -> dict:
    """Held-out metrics by true meaning: greedy answer, confidence = share of samples with its meaning."""
    pi = _softmax(_logits(world, params, rows))
    g = pi.argmax(axis=1)
    mg = world.meaning[g]
    correct = (mg == 0).astype(float)
    smp = _sample(pi, samples, np.random.default_rng(seed))
    conf = ((world.meaning[smp] == mg[:, None]) & (mg[:, None] >= 0)).mean(axis=1)
    wrong_trick = world.trick & (world.meaning > 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", M.SemcalMetricWarning)
        auroc = M.auroc_confidence(conf, correct)
    return {"acc": float(correct.mean()), "ece": M.ece(conf, correct, 15), "brier": M.brier_confidence(conf, correct),
            "auroc": auroc, "trick": float((pi * wrong_trick).sum(axis=1).mean()),
            "empty": float(pi[:, -1].mean())}


def run(designs=None, seeds=tuple(range(20)), n_questions: int = 400, adversaries: bool = True, steps: int = 500,
        lr: float = 0.02, K: int = 8, reference: bool = False) -> dict:
    """Every design on the same worlds (paired by seed); half the questions train, half are held out.
    ``reference``: add the family's likelihood fit (:func:`fit_likelihood`) as a row."""
    designs = DESIGNS if designs is None else designs
    out: dict = {"initial": []}
    if reference:
        out[LIKELIHOOD_FIT] = []
    for d in designs:
        out[d.name] = []
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
                ev["trick_pay"] = pay.get("sum", 0.0) / max(pay.get("n", 0), 1)
            out[d.name].append(ev)
    out["_meta"] = {"seconds": time.perf_counter() - t0, "seeds": list(seeds), "n_questions": n_questions,
                    "adversaries": adversaries, "steps": steps, "lr": lr, "K": K}
    return out


def _t95(n: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.975, n - 1)) if n > 1 else float("nan")


def summarise(res: dict, ref: str = RLVR.name) -> list[dict]:
    """Per design: mean and 95 % t-interval (over seeds) of each metric; paired against ``ref``: Δacc and the
    ECE ratio (mean ECE / mean ECE of ref) with the worst seed of each; Δtrick = trick mass − ref's."""
    rows = []
    base = res[ref]
    for name, runs in res.items():
        if name.startswith("_"):
            continue
        n = len(runs)
        row = {"design": name, "n": n}
        for k in runs[0]:
            a = np.array([r[k] for r in runs], float)
            mu, sd = float(np.nanmean(a)), float(np.nanstd(a, ddof=1)) if n > 1 else 0.0
            row[k] = (mu, _t95(n) * sd / math.sqrt(n))
        dacc = np.array([r["acc"] - b["acc"] for r, b in zip(runs, base)])
        ratio = np.array([r["ece"] / b["ece"] if b["ece"] > 0 else np.nan for r, b in zip(runs, base)])
        row["dacc"] = (float(dacc.mean()), _t95(n) * float(dacc.std(ddof=1)) / math.sqrt(n), float(dacc.min()))
        row["ece_ratio"] = (float(np.mean([r["ece"] for r in runs]) / np.mean([b["ece"] for b in base])),
                            float(np.nanmax(ratio)))
        row["dtrick"] = float(np.mean([r["trick"] - b["trick"] for r, b in zip(runs, base)]))
        if "trick_pay" not in runs[0]:
            row["trick_pay"] = (0.0, 0.0)  # no trick forms in the world (or the untrained policy): nothing can pay
        rows.append(row)
    return rows


def passes(row: dict) -> bool:
    """Issue 22's criteria: accuracy within 2 points of RLVR, ECE ≤ 0.6× RLVR's, no trick that pays: the mean
    reward of a wrong trick rollout is not above a wrong plain one's (``trick_pay`` ≤ 0.005, mean over seeds)."""
    return row["dacc"][0] >= -0.02 and row["ece_ratio"][0] <= 0.6 and row["trick_pay"][0] <= 0.005


def format_table(rows: list[dict]) -> str:
    head = ("| design | acc | ECE | Brier | AUROC | trick mass | trick pay | Δacc vs RLVR (worst seed) | "
            "ECE ratio (worst seed) | passes |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        f = lambda k: f"{r[k][0]:.3f} ± {r[k][1]:.3f}"  # noqa: E731
        lines.append(f"| {r['design']} | {f('acc')} | {f('ece')} | {f('brier')} | {f('auroc')} | {f('trick')} | {f('trick_pay')} | "
                     f"{r['dacc'][0]:+.3f} ± {r['dacc'][1]:.3f} ({r['dacc'][2]:+.3f}) | "
                     f"{r['ece_ratio'][0]:.2f} ({r['ece_ratio'][1]:.2f}) | "
                     f"{('yes' if passes(r) else 'no') if not r['design'].startswith(('RLVR', 'initial', 'reference')) else ''} |")
    return "\n".join(lines)
