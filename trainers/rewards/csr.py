"""CSR (Calibration with Semantic Reward, arXiv 2605.15588; ``method: csr``) and semcal's two variants.

r = r_RLVR + λ(t)·r_cal with, for rollout j of a group of K, y_j = J(C_j, C*) its correctness and
A_ji = J(C_j, C_i) the judge's agreement,

    r_cal,j = (1/(K−1)) Σ_{i≠j} [ y_j·log a_ji + (1−y_j)·log(1 − a_ji) ],   a_ji = clip(A_ji, ε, 1−ε),

minus the binary cross-entropy between each pairwise agreement and the rollout's correctness (in nats, ∈ [log ε, 0];
ε the one free constant, csr.yaml's ``eps``), λ(t) linear from 0. The judge J for agreement is ``cover``
(:func:`semcal_eval.qa.grading.agree`, the grader's reading of "the same answer": the paper's J is semantic,
and this is as far as a lexical judge goes, measured in docs/JUDGE.md); ``judge: strict`` (equal folded answer
cores) was the default before issue 41. Empty answers (no letter or digit, :func:`semcal_eval.qa.cover.is_empty`):
``empty_answer: judge`` (default, the paper's: J as the judge reads it; the cover judge is reflexive, so
identical outputs, empty ones included, agree), and semcal's additions ``disagree`` (an empty answer agrees with
nothing) and ``worst`` (it scores the worst value). r_RLVR is
:func:`trainers.rewards.matching.correctness_reward`; this module returns the λ(t)·r_cal term.

semcal's own variants, each with its own method name (they are *not* the paper's reward):
``csr_likelihood`` (``score: likelihood``) and ``csr_spread`` (``score: likelihood_spread``); see
:func:`group_calibration_scores`. Their known exploits are stated in docs/TRAINING.md.

Every option comes in one typed object, :class:`trainers.config.RewardSettings` (the ``reward`` section of a
config), checked once when it is built; the functions here read it and do not check it again. They check only
their data (shapes, agreement values in [0, 1], whole groups of K ≥ 2 rollouts).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

import numpy as np

from semcal_eval import qa
from semcal_eval.qa.cover import is_empty
from semcal_eval.qa.judges import Judge, get_judge
from trainers.answer_match import overlap_matrix
from trainers.config import (AGREEMENT_WRONG, CSR_METHODS, EMPTY_ANSWERS, READINGS, SCHEDULES, SCORES,
                             RewardSettings)
from trainers.rewards.matching import completion_text, correctness, dataset_column, extract_answer, gold_list

__all__ = ["SCHEDULES", "READINGS", "SCORES", "EMPTY_ANSWERS", "AGREEMENT_WRONG", "CSR_METHODS", "RewardSettings",
           "DEFAULT_EPS", "DEFAULT_READING", "DEFAULT_LAMBDA_MAX", "DEFAULT_JUDGE", "DEFAULT_EMPTY_ANSWER",
           "GroupLayoutError", "lambda_at", "calibration_scores", "group_calibration_scores", "agreement_judge",
           "calibration_reward"]

# The defaults' one source is RewardSettings' table; these names read it (the paper's values).
DEFAULT_EPS = RewardSettings.eps
DEFAULT_READING = RewardSettings.reading
DEFAULT_LAMBDA_MAX = RewardSettings.lambda_max
DEFAULT_JUDGE = RewardSettings.judge
DEFAULT_EMPTY_ANSWER = RewardSettings.empty_answer


#: the option names of RewardSettings, which calibration_reward refuses as loose keywords
_OPTION_NAMES = frozenset(f.name for f in fields(RewardSettings))


class GroupLayoutError(ValueError):
    """The completions handed to a group reward do not form whole groups of K rollouts of one prompt."""


def lambda_at(trainer_state: Any, settings: RewardSettings) -> float:
    """Calibration weight λ(t) of ``settings`` (``lambda_schedule``, ``lambda_max``, ``lambda_min``,
    ``lambda_step_fraction``), t = ``trainer_state.global_step / trainer_state.max_steps`` ∈ [0, 1].

    - ``linear`` (default): λ = λ_min + (λ_max − λ_min)·t
    - ``constant``: λ = λ_max
    - ``step``: λ = λ_min for t < ``lambda_step_fraction``, else λ_max

    All three are non-decreasing in t. Without a trainer state (a reward called outside training) or
    before ``max_steps`` is known, t = 1, i.e. the full weight.

    >>> from types import SimpleNamespace as S
    >>> lambda_at(S(global_step=25, max_steps=100), RewardSettings(lambda_max=1.0))
    0.25
    >>> lambda_at(S(global_step=25, max_steps=100), RewardSettings(lambda_schedule="step", lambda_max=2.0))
    0.0
    >>> lambda_at(S(global_step=50, max_steps=100), RewardSettings(lambda_schedule="step", lambda_max=2.0))
    2.0
    >>> lambda_at(None, RewardSettings(lambda_max=0.5))
    0.5
    """
    s = _settings(settings)
    max_steps = getattr(trainer_state, "max_steps", 0) or 0
    if trainer_state is None or max_steps <= 0:
        t = 1.0
    else:
        t = min(max(float(trainer_state.global_step) / float(max_steps), 0.0), 1.0)
    if s.lambda_schedule == "constant":
        return float(s.lambda_max)
    if s.lambda_schedule == "step":
        return float(s.lambda_min if t < s.lambda_step_fraction else s.lambda_max)
    return float(s.lambda_min + (s.lambda_max - s.lambda_min) * t)


def _settings(settings: Any) -> RewardSettings:
    """``settings`` itself when it is a :class:`RewardSettings`; a TypeError naming the fix otherwise (a dict of
    options would skip the checks the settings had when they were built)."""
    if isinstance(settings, RewardSettings):
        return settings
    raise TypeError(f"the calibration reward takes its options as trainers.config.RewardSettings, got "
                    f"{type(settings).__name__}: build them once with RewardSettings(eps=..., ...) or read "
                    "TrainConfig.reward (load_config), which checks them")


def calibration_scores(
    agreement: np.ndarray,
    correct: Sequence[float],
    settings: RewardSettings,
    *,
    empty: Sequence[bool] | None = None,
):
    """Per-rollout calibration scores of one group, and the confidences p_j (see :func:`group_calibration_scores`,
    of which this is the one-group form).

    >>> A = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    >>> r, p = calibration_scores(A, [1, 1, 0], RewardSettings(eps=0.01, reading="rollout"))
    >>> p.round(3).tolist()
    [0.5, 0.5, 0.01]
    >>> r.round(4).tolist()                                        # log ½, log ½, log(1 − ε)
    [-0.6931, -0.6931, -0.0101]
    >>> r, _ = calibration_scores(A, [1, 1, 0], RewardSettings(eps=0.01))   # the paper's pairwise BCE, nats
    >>> r.round(4).tolist()                                        # ½(log 0.99 + log 0.01), ½·2·log 0.99
    [-2.3076, -2.3076, -0.0101]
    """
    A = np.asarray(agreement, dtype=float)
    y = np.asarray(correct, dtype=float)
    K = A.shape[0] if A.ndim == 2 else -1
    if A.ndim != 2 or A.shape != (K, K) or y.shape != (K,):
        raise ValueError(f"agreement must be K×K and correct length K; got {A.shape} and {y.shape}")
    e = None if empty is None else np.asarray(empty, dtype=bool)[None]
    r, p = group_calibration_scores(A[None], y[None], settings, empty=e)
    return r[0], p[0]


def group_calibration_scores(
    agreement: np.ndarray,
    correct: np.ndarray,
    settings: RewardSettings,
    *,
    empty: np.ndarray | None = None,
    agreement_wrong: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Calibration scores r_cal of G groups of K rollouts at once, and the confidences p, under ``settings``
    (its ``score``, ``reading``, ``eps``, ``bounded`` and ``empty_answer``).

    For rollout j of a group, with A the group's agreement matrix (A_ji ∈ [0, 1]; the 0/1 judge matrix in the
    trainer; the diagonal is ignored) and y_j its correctness:

        p_j = clip( (1/(K−1)) Σ_{i≠j} A_ji , ε, 1−ε )

    - ``score="log"``, ``reading="pairwise"`` (the defaults: the paper's reward, ``method: csr``): minus the binary
      cross-entropy of each partner's agreement against the rollout's correctness,
      s_j = mean_{i≠j} [y_j·log a_ji + (1−y_j)·log(1−a_ji)], a_ji = clip(A_ji, ε, 1−ε), in nats, ∈ [log ε, 0].
      With 0/1 agreement, s_j ≈ log ε × (share of partners that disagree with a correct rollout / agree with a
      wrong one). ``reading="rollout"``: the mean agreement is scored, s_j = y_j·log p_j + (1−y_j)·log(1−p_j).
      ``bounded=True`` divides by log(1/ε) (r_cal ∈ [−1, 0]; semcal's scale before issue 31, where λ_max = ½
      equalled 0.072 on the paper's).
    - ``score="brier"``: s_j = −(y_j − p_j)² (rollout) or mean_{i≠j} −(y_j − A_ji)² (pairwise), in [−1, 0]
      (``bounded`` changes nothing; ε only clips p).
    - ``score="likelihood"`` (``method: csr_likelihood``, semcal's): s_j = y_j·(K/n_c − 1), n_c = Σ_i y_i the group's correct rollouts (own included;
      s = 0 for wrong ones and for every rollout of a group with no correct one), so r = y + λ·s is y·K/n_c at
      λ = 1. GRPO's per-rollout policy gradient of that reward is, in expectation,
      (1 − (1 − π_c)^K)·∇ log π_c with π_c the policy's probability of a correct answer: the log-likelihood of
      being right, weighted by pass@K. Its maximiser over a policy family is the family's calibrated fit, so
      the agreement confidence (the mode's share) tends to P(mode correct); the BCE readings with 0/1
      agreement are an absolute-error score instead (−|y − p|), whose optimum pushes p to 0 or 1
      (docs/TRAINING.md, "Why the BCE reward does not calibrate"). It reads correctness only, never the
      agreement matrix: for a correct rollout "a partner with the same meaning" is "a correct partner" under a
      consistent judge, and no surface trick changes a judged correctness. ``reading``, ``bounded`` and ``ε``
      change nothing; s ∈ [0, K − 1].
    - ``score="likelihood_spread"`` (``method: csr_spread``, semcal's): the likelihood score for correct rollouts and the
      rollout's agreement with its group as a charge for wrong ones,
      s_j = y_j·(K/n_c − 1) − (1 − y_j)·m_j,   m_j = (1/(K−1)) Σ_{i≠j} A_ji  (unclipped, in [0, 1]),
      so r = y·K/n_c for a correct rollout and −λ·m_j for a wrong one. The likelihood part cannot act in a
      group with no correct rollout (its gradient carries the pass@K weight); the charge can: a wrong answer the
      group repeats is the over-confident one, and moving mass off it lowers the agreement confidence exactly
      where the policy is wrong. With ``agreement_wrong`` (the trainer's content-word overlap) padding, case or
      punctuation cannot make a wrong answer look unshared. A wrong rollout never earns more than a correct one
      (≤ 0 against ≥ 1 at any λ ≥ 0). With ``empty_answer="worst"`` (csr_spread.yaml) an empty answer gets −1,
      the charge of a fully shared wrong answer.
    - Empty answers (``empty`` true: no letter or digit). ``"judge"`` (default, the paper's): the agreement as
      the judge gives it; under the reflexive cover judge empty answers agree with each other, and a group of
      them is scored like any wrong answer the group repeats. semcal's additions: ``"disagree"`` (an empty
      answer agrees with nothing, so it is scored like a wrong answer that stands apart, r_cal ≈ 0, the best
      value of a wrong rollout) and ``"worst"`` (it scores the score's worst value, log ε or −1 bounded;
      csr_spread's choice), so nobody earns calibration reward by saying nothing.

    Args:
        agreement: G×K×K agreement values in [0, 1], K ≥ 2.
        correct: G×K correctness y ∈ {0, 1}.
        settings: the reward's options, checked when built: ``eps`` (clipping ε ∈ (0, 0.5)), ``reading``
            (``"rollout"`` or ``"pairwise"``), ``score`` (one of :data:`SCORES`), ``bounded`` (divide the log
            score by log(1/ε)), ``empty_answer`` (``"judge"``, ``"disagree"`` or ``"worst"``).
        empty: G×K booleans, true for an empty answer; None: no empty answers.
        agreement_wrong: G×K×K agreement read for the rows of *wrong* rollouts (y_j = 0) instead of
            ``agreement``; None: ``agreement`` for every row. The trainer passes the content-word overlap
            (:func:`trainers.answer_match.overlap_matrix`), a reading of "may be the same answer" that padding
            cannot break, so a wrong rollout is never paid for a disagreement its surface faked.

    Returns:
        ``(r_cal, p)``, two G×K float arrays.

    >>> A = np.ones((1, 4, 4)); A[0, 3, :3] = A[0, :3, 3] = 0     # three agreeing answers and one other
    >>> r, p = group_calibration_scores(A, np.array([[1, 1, 1, 0]]), RewardSettings(eps=0.01))
    >>> p.round(3).tolist(), r.round(4).tolist()    # correct: (2·log 0.99 + log 0.01)/3; wrong: log 0.99
    ([[0.667, 0.667, 0.667, 0.01]], [[-1.5418, -1.5418, -1.5418, -0.0101]])
    >>> r, _ = group_calibration_scores(A, np.array([[1, 1, 1, 0]]), RewardSettings(eps=0.01, empty_answer="worst"),
    ...                                 empty=np.array([[0, 0, 0, 1]]))
    >>> r.round(4).tolist()                                     # the odd one out was empty: log ε
    [[-1.5418, -1.5418, -1.5418, -4.6052]]
    """
    A = np.asarray(agreement, dtype=float)
    y = np.asarray(correct, dtype=float)
    if A.ndim != 3 or A.shape[1] != A.shape[2] or y.shape != A.shape[:2]:
        raise ValueError(f"agreement must be G×K×K and correct G×K; got {A.shape} and {y.shape}")
    G, K = y.shape
    if K < 2:
        raise ValueError(f"a group needs K >= 2 rollouts (agreement with the other K-1 is undefined for K={K}); "
                         "set grpo.num_generations to 2 or more")
    st = _settings(settings)
    eps, reading, score, bounded, empty_answer = st.eps, st.reading, st.score, st.bounded, st.empty_answer
    if np.any((A < 0) | (A > 1)) or not np.all(np.isfinite(A)):
        raise ValueError("agreement values must lie in [0, 1]")
    e = np.zeros((G, K), dtype=bool) if empty is None else np.asarray(empty, dtype=bool)
    if e.shape != (G, K):
        raise ValueError(f"empty must be G×K like correct; got {e.shape}")
    if agreement_wrong is not None:
        Aw = np.asarray(agreement_wrong, dtype=float)
        if Aw.shape != A.shape or np.any((Aw < 0) | (Aw > 1)) or not np.all(np.isfinite(Aw)):
            raise ValueError(f"agreement_wrong must be G×K×K like agreement with values in [0, 1]; got {Aw.shape}")
        A = np.where((y < 0.5)[:, :, None], Aw, A)  # row j of a wrong rollout: its "may be the same" partners
    off = ~np.eye(K, dtype=bool)
    if empty_answer != "judge":
        # semcal's rules: an empty answer agrees with nothing (its own diagonal is ignored anyway)
        A = np.where(e[:, :, None] | e[:, None, :], 0.0, A)
    a = A[:, off].reshape(G, K, K - 1)  # a[g, j, :] = A_ji over partners i ≠ j
    m = a.mean(axis=2)  # mean partner agreement
    p = np.clip(m, eps, 1 - eps)
    yy = y[:, :, None]
    if score in ("likelihood", "likelihood_spread"):
        n_c = y.sum(axis=1, keepdims=True)
        # an empty answer is never correct, so it earns 0 like any wrong answer: "worst" is that 0
        s, worst = y * (K / np.maximum(n_c, 1.0) - 1.0), 0.0
        if score == "likelihood_spread":
            # the wrong rollout's share of partners that give (or may give) its answer; empty: charged fully
            s, worst = s - (1 - y) * m, -1.0
    elif score == "log":
        if reading == "rollout":
            s = y * np.log(p) + (1 - y) * np.log1p(-p)
        else:
            ac = np.clip(a, eps, 1 - eps)
            s = (yy * np.log(ac) + (1 - yy) * np.log1p(-ac)).mean(axis=2)
        worst = math.log(eps)
        if bounded:
            s, worst = s / math.log(1 / eps), -1.0
    else:
        s = -((y - p) ** 2) if reading == "rollout" else -((yy - a) ** 2).mean(axis=2)
        worst = -1.0
    if empty_answer == "worst":
        s = np.where(e, worst, s)
    return s, p


def agreement_judge(judge: str | Judge | None, judge_kwargs: Any = None) -> Judge:
    """A Judge instance; names go through :func:`semcal_eval.qa.judges.get_judge`, which caches loaded judges
    (None: ``reward.judge``'s default)."""
    if judge is None:
        judge = DEFAULT_JUDGE
    if isinstance(judge, str):
        return get_judge(judge, **dict(judge_kwargs or {}))
    return judge


def _dist():
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist, dist.get_world_size(), dist.get_rank()
    return None, 1, 0


def _gather(dist, world: int, obj: Any) -> list:
    out: list = [None] * world
    dist.all_gather_object(out, obj)
    return out


def _groups(prompts: list, completions: list, kwargs: dict, K: int, gather_groups: bool
            ) -> tuple[list[str], list[str], list[list[str]], slice]:
    """(questions, first-line answers, golds, this rank's slice) of whole groups of K consecutive completions
    (TRL's layout), gathered from every rank first when ``gather_groups``; :class:`GroupLayoutError` when the
    completions do not form whole groups of one prompt."""
    n = len(completions)
    answers = dataset_column(kwargs, "answers", n)
    questions = [q or "" for q in dataset_column(kwargs, "question", n, required=False)]
    keys = [repr(p) for p in prompts]
    preds = [extract_answer(completion_text(c)) for c in completions]

    dist, world, rank = _dist()
    local = slice(0, n)
    if world > 1 and gather_groups:
        parts = _gather(dist, world, (keys, questions, preds, [gold_list(a) for a in answers]))
        sizes = [len(p[0]) for p in parts]
        if len(set(sizes)) != 1:
            raise GroupLayoutError(f"ranks hold different numbers of completions {sizes}; cannot re-assemble groups")
        keys = [k for p in parts for k in p[0]]
        questions = [q for p in parts for q in p[1]]
        preds = [x for p in parts for x in p[2]]
        golds = [g for p in parts for g in p[3]]
        local = slice(rank * n, (rank + 1) * n)
    else:
        golds = [gold_list(a) for a in answers]
    N = len(preds)
    if N % K != 0:
        where = f"rank {rank} of {world} holds" if world > 1 else "the batch holds"
        raise GroupLayoutError(
            f"{where} {N} completions, not a multiple of num_generations={K}: a group of K rollouts is split "
            f"across processes. Make per_device_train_batch_size × steps_per_generation a multiple of K, or set "
            f"gather_groups=True to assemble groups across ranks."
        )
    for start in range(0, N, K):
        if len(set(keys[start : start + K])) != 1:
            raise GroupLayoutError(
                f"completions {start}..{start + K - 1} do not share one prompt: the K={K} rollouts of a prompt "
                f"must be consecutive (TRL's layout); check num_generations matches GRPOConfig.num_generations"
            )
    return questions, preds, golds, local


def calibration_reward(
    prompts: list,
    completions: list,
    completion_ids: list | None = None,
    trainer_state: Any = None,
    *,
    settings: RewardSettings,
    num_generations: int,
    **kwargs,
) -> list[float]:
    r"""CSR calibration reward λ(t)·r_cal for each rollout, computed within its group of K rollouts.

    y_j = :func:`correctness` (the grader) and A_ji = J(C_j, C_i), the judge's agreement of the first-line
    answers (``settings.judge``, default ``cover``: the grader's "same answer"); r_cal from
    :func:`group_calibration_scores` (defaults: the paper's pairwise BCE in nats, empty answers as the formula
    gives them); λ(t) from :func:`lambda_at` (default linear from 0 to λ_max = 0.1). Groups are K consecutive
    completions (TRL's layout). Under ``torch.distributed`` with ``settings.gather_groups`` the groups are
    assembled from all ranks first; without it, a local batch that does not hold whole groups raises
    :class:`GroupLayoutError`. Logs ``csr/lambda``, ``csr/r_cal`` (unweighted) and ``csr/confidence`` (mean
    agreement p) through TRL's ``log_metric``.

    Args:
        prompts: the prompts (K consecutive equal prompts form a group).
        completions: completions as strings or lists of messages.
        completion_ids: unused.
        trainer_state: TRL's ``TrainerState``; ``global_step / max_steps`` drives λ(t) (TRL scores the first
            step's rollouts at ``global_step = 0``, so λ = λ_min there).
        settings: the reward's options (:class:`trainers.config.RewardSettings`, a config's ``reward``), checked
            once when built and not here: ``eps``, ``reading``, ``score``, ``bounded``, ``empty_answer``, the λ
            schedule (:func:`lambda_at`), ``judge``/``judge_kwargs`` (the agreement judge J), ``gather_groups``
            and ``agreement_wrong`` (``"judge"``, the paper: every row of A is J; ``"overlap"``, csr_spread: a
            wrong rollout's row is J or a shared content word, :func:`trainers.answer_match.overlap_matrix`, so
            padding a wrong answer cannot make it look unshared).
        num_generations: the group size K ≥ 2 (``grpo.num_generations``).
        **kwargs: dataset columns ``answers`` and ``question``; TRL's ``log_metric``/``log_extra``.

    Example (two groups of K = 4, no trainer state so λ = λ_max = 0.1):
    ```python
    >>> out = calibration_reward(["q1"] * 4 + ["q2"] * 4, [" Paris", " Paris", " Paris", " Rome",
    ...                          " Rome", " Oslo", " Oslo", ""], settings=RewardSettings(eps=0.01),
    ...                          num_generations=4, answers=[["Paris"]] * 4 + [["Bern"]] * 4,
    ...                          question=["q1"] * 4 + ["q2"] * 4)
    >>> [round(v, 3) for v in out]  # 0.1 × mean over partners of log a (agree) / log(1 − a) (wrong rollouts)
    [-0.154, -0.154, -0.154, -0.001, -0.001, -0.154, -0.154, -0.001]

    ```
    """
    st = _settings(settings)
    stray = sorted(set(kwargs) & set(_OPTION_NAMES))
    if stray:  # a keyword option here would be silently ignored: the settings hold them all
        raise TypeError(f"calibration_reward got reward option(s) {stray} as keywords; put them in "
                        f"settings=RewardSettings(...) (or dataclasses.replace(settings, ...)), where they are checked")
    K = int(num_generations)
    n = len(completions)
    questions, preds, golds, local = _groups(prompts, completions, kwargs, K, st.gather_groups)
    N = len(preds)

    jd = agreement_judge(st.judge, st.judge_kwargs)
    y = np.asarray(correctness(questions, preds, golds))
    A = np.stack([qa.agreement_matrix(questions[s], preds[s : s + K], jd) for s in range(0, N, K)]).astype(float)
    empty = np.array([is_empty(x) for x in preds]).reshape(-1, K)
    Aw = None
    if st.agreement_wrong == "overlap":
        Aw = np.stack([overlap_matrix(preds[s : s + K], questions[s]) for s in range(0, N, K)]).astype(float)
        Aw = np.maximum(Aw, A)  # "may be the same answer" includes every pair the judge calls equivalent
    r_cal, p = group_calibration_scores(A, y.reshape(-1, K), st, empty=empty, agreement_wrong=Aw)
    r_cal, p = r_cal.reshape(-1), p.reshape(-1)
    lam = lambda_at(trainer_state, st)

    log_metric = kwargs.get("log_metric")
    if log_metric is not None:
        log_metric("csr/lambda", lam)
        log_metric("csr/r_cal", float(r_cal[local].mean()) if n else 0.0)
        log_metric("csr/confidence", float(p[local].mean()) if n else 0.0)
    log_extra = kwargs.get("log_extra")
    if log_extra is not None:
        log_extra("confidence", [float(v) for v in p[local]])
    return [float(lam * v) for v in r_cal[local]]
