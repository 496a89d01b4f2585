"""Reward functions for CSR, RLVR and RLCR, with TRL's reward-function signature.

Every reward here is a plain function ``f(prompts, completions, completion_ids, trainer_state, **columns)``
returning one float per completion, as :class:`trl.GRPOTrainer` calls it. Options (judge, K, ε, λ schedule)
are bound with :func:`functools.partial`; TRL names a partial after the wrapped function, so its own
``rewards/<name>/mean`` metrics stay readable. Dataset columns used: ``answers`` (list of gold strings) and
``question`` (the raw question, given to the judge).

CSR (calibration through semantic agreement): r = r_RLVR + λ(t)·r_cal, where for rollout j of a group of K

    p_j   = clip( (1/(K-1)) Σ_{i≠j} A_ji , ε, 1-ε )          A = judge agreement matrix (0/1)
    r_cal = y_j·log p_j + (1-y_j)·log(1-p_j)                 y_j = correctness of rollout j

("rollout" reading, the default). The "pairwise" reading averages the log score of every single agreement
instead: r_cal = (1/(K-1)) Σ_{i≠j} [y_j·log clip(A_ji) + (1-y_j)·log(1-clip(A_ji))]. See docs/TRAINING.md
for both readings, the two collapse modes and why λ(t) ramps up.

RLCR (Damani et al., verbalised confidence): 0.5·format + 0.5·correct + 0.5·(1 - (correct - conf)²), split
into three reward functions so that TRL logs each component.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from semcal_eval import qa
from semcal_eval.qa.judges import Judge, get_judge

__all__ = [
    "SCHEDULES",
    "READINGS",
    "GroupLayoutError",
    "completion_text",
    "extract_answer",
    "lambda_at",
    "validate_calibration_args",
    "correctness",
    "calibration_scores",
    "correctness_reward",
    "calibration_reward",
    "parse_rlcr",
    "rlcr_format_reward",
    "rlcr_correctness_reward",
    "rlcr_brier_reward",
]

SCHEDULES = ("linear", "constant", "step")
READINGS = ("rollout", "pairwise")


class GroupLayoutError(ValueError):
    """The completions handed to a group reward do not form whole groups of K rollouts of one prompt."""


# ----------------------------------------------------------------------------------------------------------
# completions → answers


def completion_text(completion: Any) -> str:
    """Text of one TRL completion: a string (standard format) or a list of messages (conversational format,
    the last message's ``content``). ``None`` and empty message lists give ``""``.

    >>> completion_text(" Paris")
    ' Paris'
    >>> completion_text([{"role": "assistant", "content": "Paris"}])
    'Paris'
    >>> completion_text([])
    ''
    """
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content") or "")
    if isinstance(completion, Sequence):
        if not completion:
            return ""
        return completion_text(completion[-1])
    return str(completion)


def extract_answer(text: str) -> str:
    """Short answer of a free-form completion, exactly as the QA tasks read it at evaluation time
    (:func:`semcal_eval.qa.clean_answer`: the first non-empty line, stripped).

    >>> extract_answer(" Paris\\nQ: next question")
    'Paris'
    >>> extract_answer("")
    ''
    """
    return qa.clean_answer(text or "")


# ----------------------------------------------------------------------------------------------------------
# λ(t) and validation


def lambda_at(
    trainer_state: Any = None,
    schedule: str = "linear",
    lambda_max: float = 1.0,
    lambda_min: float = 0.0,
    step_fraction: float = 0.5,
) -> float:
    """Calibration weight λ(t), t = ``trainer_state.global_step / trainer_state.max_steps`` ∈ [0, 1].

    - ``linear`` (default): λ = λ_min + (λ_max − λ_min)·t
    - ``constant``: λ = λ_max
    - ``step``: λ = λ_min for t < ``step_fraction``, else λ_max

    All three are non-decreasing in t. Without a trainer state (a reward called outside training) or
    before ``max_steps`` is known, t = 1, i.e. the full weight.

    >>> from types import SimpleNamespace as S
    >>> lambda_at(S(global_step=25, max_steps=100))
    0.25
    >>> lambda_at(S(global_step=25, max_steps=100), "step", lambda_max=2.0)
    0.0
    >>> lambda_at(S(global_step=50, max_steps=100), "step", lambda_max=2.0)
    2.0
    >>> lambda_at(None, "linear", lambda_max=0.5)
    0.5
    """
    _validate_schedule(schedule, lambda_max, lambda_min, step_fraction)
    max_steps = getattr(trainer_state, "max_steps", 0) or 0
    if trainer_state is None or max_steps <= 0:
        t = 1.0
    else:
        t = min(max(float(trainer_state.global_step) / float(max_steps), 0.0), 1.0)
    if schedule == "constant":
        return float(lambda_max)
    if schedule == "step":
        return float(lambda_min if t < step_fraction else lambda_max)
    return float(lambda_min + (lambda_max - lambda_min) * t)


def _validate_schedule(schedule: str, lambda_max: float, lambda_min: float, step_fraction: float) -> None:
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown λ schedule {schedule!r}; choose one of {', '.join(SCHEDULES)} (lambda_schedule=...)")
    for name, v in (("lambda_max", lambda_max), ("lambda_min", lambda_min), ("lambda_step_fraction", step_fraction)):
        if not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{name} must be a finite number, got {v!r}")
    if lambda_min < 0 or lambda_max < lambda_min:
        raise ValueError(
            f"λ schedule must be non-negative and non-decreasing: need 0 <= lambda_min <= lambda_max, "
            f"got lambda_min={lambda_min}, lambda_max={lambda_max}"
        )
    if not 0.0 <= step_fraction <= 1.0:
        raise ValueError(f"lambda_step_fraction must lie in [0, 1] (fraction of max_steps), got {step_fraction}")


def validate_calibration_args(
    num_generations: int | None,
    eps: float,
    reading: str = "rollout",
    schedule: str = "linear",
    lambda_max: float = 1.0,
    lambda_min: float = 0.0,
    step_fraction: float = 0.5,
) -> None:
    """Raise a ``ValueError`` naming the bad option: K ≥ 2, ε ∈ (0, 0.5), a known reading, a valid schedule."""
    if num_generations is None:
        raise ValueError("calibration_reward needs num_generations=K (the GRPO group size, GRPOConfig.num_generations)")
    if isinstance(num_generations, bool) or not isinstance(num_generations, (int, np.integer)) or num_generations < 2:
        raise ValueError(
            f"num_generations (K) must be an integer >= 2: agreement with the other K-1 rollouts is undefined "
            f"for K={num_generations!r}. Set num_generations to 2 or more."
        )
    if not isinstance(eps, (int, float)) or not (0.0 < eps < 0.5):
        raise ValueError(f"eps must lie in the open interval (0, 0.5) (clip p to [eps, 1-eps]), got {eps!r}")
    if reading not in READINGS:
        raise ValueError(f"unknown calibration reading {reading!r}; choose one of {', '.join(READINGS)}")
    _validate_schedule(schedule, lambda_max, lambda_min, step_fraction)


# ----------------------------------------------------------------------------------------------------------
# pure scores


def calibration_scores(agreement: np.ndarray, correct: Sequence[float], eps: float = 1e-3, reading: str = "rollout"):
    """Per-rollout calibration scores of one group, and the confidences p_j.

    Args:
        agreement: K×K 0/1 judge agreement matrix (diagonal ignored).
        correct: y_j ∈ {0, 1} for each rollout.
        eps: clipping ε ∈ (0, 0.5).
        reading: ``"rollout"`` — r_j = y_j·log p_j + (1−y_j)·log(1−p_j), p_j = clip(mean_{i≠j} A_ji);
            ``"pairwise"`` — r_j = mean_{i≠j} [y_j·log clip(A_ji) + (1−y_j)·log(1−clip(A_ji))].

    Returns:
        ``(r_cal, p)``: two float arrays of length K; p is the clipped mean agreement in both readings.

    >>> A = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    >>> r, p = calibration_scores(A, [1, 1, 0], eps=0.01)
    >>> p.round(3).tolist()
    [0.5, 0.5, 0.01]
    >>> r.round(4).tolist()
    [-0.6931, -0.6931, -0.0101]
    """
    A = np.asarray(agreement, dtype=float)
    y = np.asarray(correct, dtype=float)
    K = A.shape[0]
    validate_calibration_args(K, eps, reading)
    if A.shape != (K, K) or y.shape != (K,):
        raise ValueError(f"agreement must be K×K and correct length K; got {A.shape} and {y.shape}")
    off = ~np.eye(K, dtype=bool)
    p = np.clip(A[off].reshape(K, K - 1).mean(axis=1), eps, 1 - eps)
    if reading == "rollout":
        r = y * np.log(p) + (1 - y) * np.log1p(-p)
    else:
        a = np.clip(A[off].reshape(K, K - 1), eps, 1 - eps)
        r = (y[:, None] * np.log(a) + (1 - y[:, None]) * np.log1p(-a)).mean(axis=1)
    return r, p


# ----------------------------------------------------------------------------------------------------------
# judge plumbing

def _judge(judge: str | Judge | None, judge_kwargs: dict | None = None) -> Judge:
    """A Judge instance; names go through :func:`semcal_eval.qa.judges.get_judge`, which caches loaded judges."""
    if judge is None:
        judge = "f1"
    if isinstance(judge, str):
        return get_judge(judge, **(judge_kwargs or {}))
    return judge


def _golds(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _column(kwargs: dict, name: str, n: int, required: bool = True) -> list:
    col = kwargs.get(name)
    if col is None:
        if required:
            raise KeyError(
                f"reward needs a dataset column {name!r} (one entry per prompt); the training dataset must carry "
                f"'prompt', 'question' and 'answers' columns (see trainers.data.build_dataset)"
            )
        return [None] * n
    if len(col) != n:
        raise ValueError(f"column {name!r} has {len(col)} entries for {n} completions")
    return list(col)


def correctness(
    questions: Sequence[str], predictions: Sequence[str], golds: Sequence[Sequence[str]], judge: Judge
) -> list[float]:
    """y_i = 1 if the judge finds prediction i equivalent to any of its gold answers, else 0. An empty
    prediction is never correct. Judge calls are batched per question."""
    y = [0.0] * len(predictions)
    by_question: dict[str, list[int]] = {}
    for i, q in enumerate(questions):
        by_question.setdefault(q or "", []).append(i)
    for q, idx in by_question.items():
        pairs, owner = [], []
        for i in idx:
            if not predictions[i].strip():
                continue
            for g in golds[i]:
                pairs.append((predictions[i], g))
                owner.append(i)
        if not pairs:
            continue
        for i, ok in zip(owner, judge.equivalent(q, pairs), strict=True):
            if ok:
                y[i] = 1.0
    return y


# ----------------------------------------------------------------------------------------------------------
# TRL reward functions


def correctness_reward(
    prompts: list,
    completions: list,
    completion_ids: list | None = None,
    trainer_state: Any = None,
    *,
    judge: str | Judge | None = "f1",
    judge_kwargs: dict | None = None,
    **kwargs,
) -> list[float]:
    r"""RLVR correctness reward r_RLVR ∈ {0, 1}: the short answer (first line) matches a gold answer
    under the judge (token-F1 ≥ 0.5 surrogate by default).

    Args:
        prompts: the prompts, one per completion (TRL repeats each prompt K times).
        completions: completions as strings or lists of messages.
        completion_ids: unused.
        trainer_state: unused.
        judge: a :class:`semcal_eval.qa.judges.Judge` or a name for :func:`semcal_eval.qa.judges.get_judge`.
        judge_kwargs: keyword arguments for ``get_judge`` when ``judge`` is a name.
        **kwargs: dataset columns; needs ``answers`` (list of gold strings per row), uses ``question``.

    Example:
    ```python
    >>> correctness_reward(["Q: capital of France?\nA:"] * 3, [" Paris", " Lyon", ""],
    ...                    answers=[["Paris"]] * 3, question=["capital of France?"] * 3)
    [1.0, 0.0, 0.0]

    ```
    """
    n = len(completions)
    answers = _column(kwargs, "answers", n)
    questions = _column(kwargs, "question", n, required=False)
    preds = [extract_answer(completion_text(c)) for c in completions]
    y = correctness([q or "" for q in questions], preds, [_golds(a) for a in answers], _judge(judge, judge_kwargs))
    log_metric = kwargs.get("log_metric")
    if log_metric is not None:
        log_metric("csr/empty_answer_frac", float(np.mean([not p for p in preds])) if n else 0.0)
    return y


def _dist():
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist, dist.get_world_size(), dist.get_rank()
    return None, 1, 0


def _gather(dist, world: int, obj: Any) -> list:
    out: list = [None] * world
    dist.all_gather_object(out, obj)
    return out


def calibration_reward(
    prompts: list,
    completions: list,
    completion_ids: list | None = None,
    trainer_state: Any = None,
    *,
    num_generations: int | None = None,
    eps: float = 1e-3,
    reading: str = "rollout",
    lambda_schedule: str = "linear",
    lambda_max: float = 1.0,
    lambda_min: float = 0.0,
    lambda_step_fraction: float = 0.5,
    judge: str | Judge | None = "f1",
    judge_kwargs: dict | None = None,
    gather_groups: bool = False,
    **kwargs,
) -> list[float]:
    r"""CSR calibration reward λ(t)·r_cal for each rollout, computed within its group of K rollouts.

    p_j = clip(mean_{i≠j} A_ji, ε, 1−ε) with A the judge's agreement matrix of the group's short answers;
    r_cal = y_j·log p_j + (1−y_j)·log(1−p_j) (``reading="rollout"``) or the mean over partners of the
    per-pair log scores (``reading="pairwise"``); λ(t) from :func:`lambda_at`. Groups are K consecutive
    completions (TRL's layout). Under ``torch.distributed`` with ``gather_groups=True`` the groups are
    assembled from all ranks first; without it, a local batch that does not hold whole groups raises
    :class:`GroupLayoutError`. Logs ``csr/lambda``, ``csr/r_cal`` and ``csr/confidence`` through TRL's
    ``log_metric``.

    Args:
        prompts: the prompts (K consecutive equal prompts form a group).
        completions: completions as strings or lists of messages.
        completion_ids: unused.
        trainer_state: TRL's ``TrainerState``; ``global_step / max_steps`` drives λ(t).
        num_generations: the group size K ≥ 2.
        eps: clipping ε ∈ (0, 0.5).
        reading: ``"rollout"`` (default) or ``"pairwise"``.
        lambda_schedule, lambda_max, lambda_min, lambda_step_fraction: see :func:`lambda_at`.
        judge, judge_kwargs: the equivalence judge (default token-F1).
        gather_groups: assemble groups across ranks (needed when a rank's batch splits a group).
        **kwargs: dataset columns ``answers`` and ``question``; TRL's ``log_metric``/``log_extra``.

    Example (two groups of K=2, no trainer state so λ = λ_max = 1):
    ```python
    >>> out = calibration_reward(["q1"] * 2 + ["q2"] * 2, [" Paris", " Paris", " Rome", " Oslo"],
    ...                          num_generations=2, eps=0.01, answers=[["Paris"]] * 2 + [["Bern"]] * 2,
    ...                          question=["q1"] * 2 + ["q2"] * 2)
    >>> [round(v, 4) for v in out]      # log(0.99) for agreeing correct, log(1-0.01) for disagreeing wrong
    [-0.0101, -0.0101, -0.0101, -0.0101]

    ```
    """
    validate_calibration_args(num_generations, eps, reading, lambda_schedule, lambda_max, lambda_min, lambda_step_fraction)
    K = int(num_generations)
    n = len(completions)
    answers = _column(kwargs, "answers", n)
    questions = [q or "" for q in _column(kwargs, "question", n, required=False)]
    keys = [repr(p) for p in prompts]
    preds = [extract_answer(completion_text(c)) for c in completions]

    dist, world, rank = _dist()
    local = slice(0, n)
    if world > 1 and gather_groups:
        parts = _gather(dist, world, (keys, questions, preds, [_golds(a) for a in answers]))
        sizes = [len(p[0]) for p in parts]
        if len(set(sizes)) != 1:
            raise GroupLayoutError(f"ranks hold different numbers of completions {sizes}; cannot re-assemble groups")
        keys = [k for p in parts for k in p[0]]
        questions = [q for p in parts for q in p[1]]
        preds = [x for p in parts for x in p[2]]
        golds = [g for p in parts for g in p[3]]
        local = slice(rank * n, (rank + 1) * n)
    else:
        golds = [_golds(a) for a in answers]
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

    jd = _judge(judge, judge_kwargs)
    y = np.asarray(correctness(questions, preds, golds, jd))
    r_cal = np.zeros(N)
    p = np.zeros(N)
    for start in range(0, N, K):
        g = slice(start, start + K)
        # qa.agreement_matrix makes an empty answer agree with nothing but itself (diagonal, ignored here).
        A = np.asarray(qa.agreement_matrix(questions[start], preds[g], jd), dtype=float)
        r_cal[g], p[g] = calibration_scores(A, y[g], eps=eps, reading=reading)
    lam = lambda_at(trainer_state, lambda_schedule, lambda_max, lambda_min, lambda_step_fraction)

    log_metric = kwargs.get("log_metric")
    if log_metric is not None:
        log_metric("csr/lambda", lam)
        log_metric("csr/r_cal", float(r_cal[local].mean()) if n else 0.0)
        log_metric("csr/confidence", float(p[local].mean()) if n else 0.0)
    log_extra = kwargs.get("log_extra")
    if log_extra is not None:
        log_extra("confidence", [float(v) for v in p[local]])
    return [float(lam * v) for v in r_cal[local]]


# ----------------------------------------------------------------------------------------------------------
# RLCR (verbalised confidence)

RLCR_SYSTEM_PROMPT = (
    "Answer the question. First reason inside <think></think>, then give the short final answer inside "
    "<answer></answer>, then analyse how likely that answer is to be correct inside <analysis></analysis>, "
    "and finally state your confidence that the answer is correct as a number between 0 and 1 inside "
    "<confidence></confidence>."
)

_RLCR_FORMAT = re.compile(
    r"^\s*<think>(?P<think>.*?)</think>\s*<answer>(?P<answer>.*?)</answer>\s*"
    r"<analysis>(?P<analysis>.*?)</analysis>\s*<confidence>(?P<confidence>.*?)</confidence>\s*$",
    re.DOTALL,
)
_RLCR_TAGS = ("think", "answer", "analysis", "confidence")


def parse_rlcr(text: str) -> tuple[bool, str, float | None]:
    """Parse an RLCR completion into ``(format_ok, answer, confidence)``.

    ``answer`` and ``confidence`` come from :func:`semcal_eval.qa.parse_verbalized`, the parser the QA tasks
    use at evaluation time (last ``<answer>`` block, else the first line; last ``<confidence>`` block as a
    probability or percentage in [0, 1], else None). ``format_ok``: the completion is exactly
    ``<think>…</think><answer>…</answer><analysis>…</analysis><confidence>…</confidence>`` (whitespace between
    blocks allowed, each tag once, nothing outside) and the confidence parsed.

    >>> parse_rlcr("<think>hm</think><answer>Paris</answer><analysis>sure</analysis><confidence>0.9</confidence>")
    (True, 'Paris', 0.9)
    >>> parse_rlcr("<think>hm</think><answer>Paris</answer><analysis>sure</analysis><confidence>high</confidence>")
    (False, 'Paris', None)
    >>> parse_rlcr("")
    (False, '', None)
    """
    text = text or ""
    answer, conf = qa.parse_verbalized(text)
    tags_once = all(text.count(f"<{t}>") == 1 and text.count(f"</{t}>") == 1 for t in _RLCR_TAGS)
    ok = bool(_RLCR_FORMAT.match(text)) and tags_once and conf is not None
    return ok, answer, conf


def _rlcr_parts(completions: list, kwargs: dict, judge, judge_kwargs) -> tuple[list, list, list]:
    n = len(completions)
    parsed = [parse_rlcr(completion_text(c)) for c in completions]
    answers = _column(kwargs, "answers", n)
    questions = [q or "" for q in _column(kwargs, "question", n, required=False)]
    y = correctness(questions, [p[1] for p in parsed], [_golds(a) for a in answers], _judge(judge, judge_kwargs))
    return [float(p[0]) for p in parsed], y, [p[2] for p in parsed]


def rlcr_format_reward(prompts: list, completions: list, completion_ids=None, trainer_state=None, **kwargs) -> list[float]:
    r"""RLCR format term ∈ {0, 1}: 1 iff the completion is exactly
    ``<think>…</think><answer>…</answer><analysis>…</analysis><confidence>c</confidence>`` with c ∈ [0, 1].
    Weighted 0.5 in the RLCR reward.

    Args:
        prompts: the prompts (unused).
        completions: completions as strings or lists of messages.
        completion_ids, trainer_state: unused.
        **kwargs: unused dataset columns.

    Example:
    ```python
    >>> rlcr_format_reward([""] * 2, ["<think>x</think><answer>Paris</answer><analysis>y</analysis>"
    ...                              "<confidence>0.7</confidence>", "<answer>Paris</answer>"])
    [1.0, 0.0]

    ```
    """
    return [float(parse_rlcr(completion_text(c))[0]) for c in completions]


def rlcr_correctness_reward(
    prompts: list, completions: list, completion_ids=None, trainer_state=None, *, judge="f1", judge_kwargs=None, **kwargs
) -> list[float]:
    r"""RLCR correctness term ∈ {0, 1}: the answer (the ``<answer>`` block, else the first line, as
    :func:`parse_rlcr` reads it) matches a gold answer under the judge. Weighted 0.5 in the RLCR reward.

    Args:
        prompts: the prompts (unused).
        completions: completions as strings or lists of messages.
        completion_ids, trainer_state: unused.
        judge, judge_kwargs: the equivalence judge (default token-F1).
        **kwargs: dataset columns ``answers`` and ``question``.

    Example:
    ```python
    >>> rlcr_correctness_reward([""] * 3, ["<answer>Paris</answer>", "<answer>Rome</answer>", ""],
    ...                         answers=[["Paris"]] * 3)
    [1.0, 0.0, 0.0]

    ```
    """
    return _rlcr_parts(completions, kwargs, judge, judge_kwargs)[1]


def rlcr_brier_reward(
    prompts: list, completions: list, completion_ids=None, trainer_state=None, *, judge="f1", judge_kwargs=None, **kwargs
) -> list[float]:
    r"""RLCR calibration term 1 − (correct − conf)² ∈ [0, 1]. A completion with no parseable confidence in
    [0, 1] scores 0, the worst Brier value, so that leaving the confidence out never pays. Weighted 0.5.

    Args:
        prompts: the prompts (unused).
        completions: completions as strings or lists of messages.
        completion_ids, trainer_state: unused.
        judge, judge_kwargs: the equivalence judge (default token-F1).
        **kwargs: dataset columns ``answers`` and ``question``; TRL's ``log_metric``.

    Example:
    ```python
    >>> rlcr_brier_reward([""] * 3, ["<answer>Paris</answer><confidence>0.8</confidence>",
    ...                              "<answer>Rome</answer><confidence>0.8</confidence>", "Paris 80"],
    ...                   answers=[["Paris"]] * 3)
    [0.96, 0.36, 0.0]

    ```
    """
    _, y, conf = _rlcr_parts(completions, kwargs, judge, judge_kwargs)
    out = [0.0 if c is None else float(1.0 - (yi - c) ** 2) for yi, c in zip(y, conf, strict=True)]
    log_metric = kwargs.get("log_metric")
    if log_metric is not None:
        seen = [c for c in conf if c is not None]
        if seen:  # a NaN would poison TRL's running mean of the metric
            log_metric("rlcr/confidence", float(np.mean(seen)))
        log_metric("rlcr/confidence_parsed_frac", len(seen) / len(conf) if conf else 0.0)
    return [round(v, 12) for v in out]
