"""Row-wise categorical policies for the labs: softmax of logits and sampling by inverse CDF."""

from __future__ import annotations

import numpy as np


def softmax_rows(z: np.ndarray) -> np.ndarray:
    """π = softmax of each row of the N×M logits ``z``: exp(z − max) / Σ exp(z − max).

    >>> softmax_rows(np.log(np.array([[1.0, 3.0]]))).tolist()
    [[0.25, 0.75]]
    """
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def sample_rows(pi: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """``k`` draws from each row of the N×M probabilities ``pi`` (N×k candidate indices): the first index whose
    cumulative probability reaches u ~ U(0, 1), clipped to M − 1 against rounding in the cumulative sum."""
    u = rng.random((pi.shape[0], k))
    return np.minimum((np.cumsum(pi, axis=1)[:, None, :] < u[:, :, None]).sum(axis=2), pi.shape[1] - 1)
