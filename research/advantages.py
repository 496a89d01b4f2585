"""GRPO advantages as TRL 1.16's ``GRPOTrainer`` forms them, as a small pure function for the labs.

Why not TRL's own: TRL computes the advantages inline, in the middle of the private
``GRPOTrainer._generate_and_score_completions`` (grpo_trainer.py, after the rewards are gathered across
processes), with no public function to call; the labs have no model, tokenizer or trainer to run it with, and
semcal does not call or copy TRL's private methods. So the formula is written out here (the GRPO paper's
group-relative advantage, Shao et al. 2024, eq. 3: A_i = (r_i − mean(r)) / std(r), plus TRL's options), and
tests/test_reward_lab.py holds it to a real GRPOTrainer step's own logged advantages
(``test_grpo_advantages_match_trl``) and to the paper's formula written out in loops
(``test_grpo_advantages_are_the_papers_formula``).
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["SCALE_MODES", "AGGREGATIONS", "grpo_advantages"]

SCALE_MODES = ("group", "batch", "none")
AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")
_STD_EPS = 1e-4  # TRL adds 1e-4 to the std before dividing


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
