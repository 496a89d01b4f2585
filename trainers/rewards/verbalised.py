"""The verbalised-confidence baselines: the model states its confidence and is scored on it.

RLCR (Damani et al.): 0.5·format + 0.5·correct + 0.5·(1 − (correct − conf)²), split into three reward functions
so that TRL logs each component. RD (Stangel et al., Rewarding Doubt): the normalised log score of a stated 0–10
confidence, :func:`rd_score`. Correctness by the one grader (:func:`trainers.rewards.matching.correctness`).
"""

from __future__ import annotations

import math

import numpy as np

from semcal_eval.qa.verbalized import parse_rlcr
from trainers.rewards.matching import completion_text, correctness, dataset_column, gold_list

__all__ = ["parse_rlcr", "rlcr_format_reward", "rlcr_correctness_reward", "rlcr_brier_reward", "RD_SCALE", "RD_EPS",
           "RD_MAX", "RD_MIN", "RD_FORMAT_PENALTY", "RD_CORRECT_BONUS", "rd_score", "rd_reward"]


def _parsed_and_correct(completions: list, kwargs: dict, parse) -> tuple[list, list]:
    """(``parse(text)`` of each completion — (format, answer, confidence) —, its correctness by the grader, as
    for CSR/RLVR and the evaluation): the verbalised methods' common first step."""
    n = len(completions)
    parsed = [parse(completion_text(c)) for c in completions]
    answers = dataset_column(kwargs, "answers", n)
    questions = [q or "" for q in dataset_column(kwargs, "question", n, required=False)]
    return parsed, correctness(questions, [p[1] or "" for p in parsed], [gold_list(a) for a in answers])


def _rlcr_parts(completions: list, kwargs: dict) -> tuple[list, list, list]:
    parsed, y = _parsed_and_correct(completions, kwargs, parse_rlcr)
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


def rlcr_correctness_reward(prompts: list, completions: list, completion_ids=None, trainer_state=None, **kwargs
                            ) -> list[float]:
    r"""RLCR correctness term ∈ {0, 1}: the answer (the ``<answer>`` block, else the first line, as
    :func:`parse_rlcr` reads it) matches a gold answer under the judge. Weighted 0.5 in the RLCR reward.

    Args:
        prompts: the prompts (unused).
        completions: completions as strings or lists of messages.
        completion_ids, trainer_state: unused.
        **kwargs: dataset columns ``answers`` and ``question``.

    Example:
    ```python
    >>> rlcr_correctness_reward([""] * 3, ["<answer>Paris</answer>", "<answer>Rome</answer>", ""],
    ...                         answers=[["Paris"]] * 3)
    [1.0, 0.0, 0.0]

    ```
    """
    return _rlcr_parts(completions, kwargs)[1]


def rlcr_brier_reward(prompts: list, completions: list, completion_ids=None, trainer_state=None, **kwargs
                      ) -> list[float]:
    r"""RLCR calibration term 1 − (correct − conf)² ∈ [0, 1]. A completion with no parseable confidence in
    [0, 1] scores 0, the worst Brier value, so that leaving the confidence out never pays. Weighted 0.5.

    Args:
        prompts: the prompts (unused).
        completions: completions as strings or lists of messages.
        completion_ids, trainer_state: unused.
        **kwargs: dataset columns ``answers`` and ``question``; TRL's ``log_metric``.

    Example:
    ```python
    >>> rlcr_brier_reward([""] * 3, ["<answer>Paris</answer><confidence>0.8</confidence>",
    ...                              "<answer>Rome</answer><confidence>0.8</confidence>", "Paris 80"],
    ...                   answers=[["Paris"]] * 3)
    [0.96, 0.36, 0.0]

    ```
    """
    _, y, conf = _rlcr_parts(completions, kwargs)
    out = [0.0 if c is None else float(1.0 - (yi - c) ** 2) for yi, c in zip(y, conf, strict=True)]
    log_metric = kwargs.get("log_metric")
    if log_metric is not None:
        seen = [c for c in conf if c is not None]
        if seen:  # a NaN would poison TRL's running mean of the metric
            log_metric("rlcr/confidence", float(np.mean(seen)))
        log_metric("rlcr/confidence_parsed_frac", len(seen) / len(conf) if conf else 0.0)
    return [round(v, 12) for v in out]


RD_SCALE = 10.0
RD_EPS = 1e-3
RD_MAX = math.log(1 - RD_EPS)  # the best log score (p = 0.999 on a correct answer)
RD_MIN = math.log(RD_EPS) / 2  # the paper's floor of the normalisation (half the worst log score)
RD_FORMAT_PENALTY = -3.0 * RD_SCALE
RD_CORRECT_BONUS = 0.25


def rd_score(confidence: int | None, correct: bool) -> float:
    r"""The RD reward of one answer. With c ∈ {0..10} the stated confidence and p = clip(c/10, ε, 1−ε), ε = 10⁻³:

        s = log p (correct) or log(1 − p) (wrong);   r = 10 · [ (s − s_min)/(s_max − s_min) + 0.25·correct ]

    s_max = log(1 − ε), s_min = ½·log ε. No confidence (or one outside 0..10) gives −30, the paper's format
    penalty. The log score is strictly proper, so E[r] is maximised by stating c/10 = P(correct); the 0.25
    bonus rewards accuracy on top.

    >>> round(rd_score(10, True), 3), round(rd_score(0, False), 3), rd_score(None, True)
    (12.5, 10.0, -30.0)
    """
    if confidence is None or not 0 <= confidence <= 10:
        return RD_FORMAT_PENALTY
    p = min(1 - RD_EPS, max(RD_EPS, confidence / 10.0))
    s = math.log(p) if correct else math.log1p(-p)
    norm = (s - RD_MIN) / (RD_MAX - RD_MIN) + (RD_CORRECT_BONUS if correct else 0.0)
    return float(RD_SCALE * norm)


def rd_reward(prompts: list, completions: list, completion_ids=None, trainer_state=None, **kwargs) -> list[float]:
    r"""RD reward (:func:`rd_score`) of each completion, read by :func:`semcal_eval.qa.verbalized.parse_rd`
    (``Answer: <a>, Confidence: <0-10>``); correctness of the answer by the grader, as for the
    other methods. Logs ``rd/confidence`` (mean c/10 of the parsed ones), ``rd/parsed_frac`` and
    ``rd/format_frac`` (exact format).

    Example:
    ```python
    >>> [round(v, 2) for v in rd_reward([""] * 3, ["Answer: Paris, Confidence: 8", "Answer: Rome, Confidence: 8",
    ...                                          "Paris"], answers=[["Paris"]] * 3)]
    [11.86, 5.34, -30.0]

    ```
    """
    from semcal_eval.qa.verbalized import parse_rd

    n = len(completions)
    parsed, y = _parsed_and_correct(completions, kwargs, parse_rd)
    log_metric = kwargs.get("log_metric")
    if log_metric is not None and n:
        seen = [p[2] / 10 for p in parsed if p[2] is not None]
        if seen:
            log_metric("rd/confidence", float(np.mean(seen)))
        log_metric("rd/parsed_frac", len(seen) / n)
        log_metric("rd/format_frac", float(np.mean([p[0] for p in parsed])))
    return [rd_score(p[2], bool(yi)) for p, yi in zip(parsed, y, strict=True)]
