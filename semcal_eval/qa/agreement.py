"""Calibration by semantic agreement: cluster sampled answers with a judge, then read confidences off the clusters.

* greedy bidirectional clustering of sampled answers (Kuhn et al. 2023, "Semantic Uncertainty"; the judge
  decides bidirectional equivalence, see :mod:`semcal_eval.qa.judges`) and the pairwise agreement matrix;
* discrete and likelihood-weighted semantic entropy (Farquhar et al., Nature 2024);
* three confidences: the greedy answer's cluster share, 1 − SE / ln K, and its likelihood-weighted form;
* :func:`score_question`, everything the QA tasks log for one question.

Pure functions (strings and lists in, numbers out); a judge is any object with the
:class:`~semcal_eval.qa.judges.Judge` interface.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .answers import best_f1, check_golds, exact_match
from .labels import DEFAULT_CORRECTNESS, grade_record

if TYPE_CHECKING:  # pragma: no cover
    from .judges import Judge

__all__ = [
    "cluster",
    "agreement_matrix",
    "semantic_entropy",
    "semantic_entropy_weighted",
    "conf_cluster_share",
    "conf_entropy",
    "conf_likelihood_weighted",
    "score_question",
]


# ----------------------------------------------------------------------------------------------------------
# Clustering
# ----------------------------------------------------------------------------------------------------------


class _PairCache:
    """Judge results for one question, keyed by the unordered pair of stripped strings.

    Judges are symmetric by construction (NLI and the LLM judge evaluate both orders), so (a, b) and (b, a)
    share one entry; identical strings are equivalent without asking the judge.
    """

    def __init__(self, question: str, judge: Judge):
        self.question, self.judge = question, judge
        self.store: dict[tuple[str, str], bool] = {}
        self.judged = 0  # pairs actually sent to the judge

    @staticmethod
    def key(a: str, b: str) -> tuple[str, str]:
        return (a, b) if a <= b else (b, a)

    def ask(self, pairs: Sequence[tuple[str, str]]) -> list[bool]:
        todo = []
        for a, b in pairs:
            k = self.key(a, b)
            if a != b and k not in self.store and k not in todo:
                todo.append(k)
        if todo:
            res = self.judge.equivalent(self.question, todo)
            if len(res) != len(todo):
                raise RuntimeError(
                    f"judge {getattr(self.judge, 'name', self.judge)!r} returned {len(res)} results for "
                    f"{len(todo)} pairs"
                )
            self.judged += len(todo)
            for k, r in zip(todo, res):
                self.store[k] = bool(r)
        return [True if a == b else self.store[self.key(a, b)] for a, b in pairs]


def _cluster(question: str, answers: Sequence[str], judge: Judge) -> tuple[list[int], _PairCache]:
    cache = _PairCache(question, judge)
    ids: list[int] = []
    reps: list[str] = []  # reps[c] = stripped text of cluster c's first member ("" for empty clusters)
    reads_empty = getattr(judge, "reads_empty", False)
    for a in answers:
        a = (a or "").strip()
        if not a and not reads_empty:  # an empty generation is its own cluster and never a representative
            ids.append(len(reps))
            reps.append("")
            continue
        live = [c for c, r in enumerate(reps) if r or reads_empty]
        # one batched judge call against all representatives; the first (oldest) match wins
        res = cache.ask([(reps[c], a) for c in live])
        match = next((c for c, r in zip(live, res) if r), None)
        if match is None:
            match = len(reps)
            reps.append(a)
        ids.append(match)
    return ids, cache


def cluster(question: str, answers: Sequence[str], judge: Judge) -> list[int]:
    """Greedy bidirectional clustering (Kuhn et al. 2023, Algorithm 1).

    Answers are visited in order; each is compared (one batched ``judge.equivalent`` call) with the
    representative — the first member — of every existing cluster and joins the oldest cluster whose
    representative it is equivalent to, else opens a new cluster. Cluster ids are 0, 1, … in order of first
    appearance. Pair results are cached within the call and identical strings are equivalent without a
    judge call, so at most K·C < K² pairs are judged (C = number of clusters). An empty (or whitespace-only)
    answer is its own cluster and is never compared.

    >>> from semcal_eval.qa.judges import F1Judge
    >>> cluster("Who?", ["Barack Obama", "Obama", "", "Trump", "obama"], F1Judge())
    [0, 0, 1, 2, 0]
    """
    return _cluster(question, answers, judge)[0]


def agreement_matrix(question: str, answers: Sequence[str], judge: Judge) -> np.ndarray:
    """K×K 0/1 matrix A with A[i, j] = 1 iff answers i and j are equivalent under ``judge``.

    The diagonal is 1 (every answer agrees with itself, an empty one included); an empty answer agrees with
    nothing else, unless the judge ``reads_empty`` (the cover judge: identical, also empty, answers agree). If ``judge.transitive`` is true (equivalence is an equivalence relation by construction,
    e.g. normalised exact match) the matrix is read off :func:`cluster` (A[i, j] = [c_i == c_j], K·C pairs);
    otherwise (token-F1, NLI, LLM and embedding thresholds are not transitive) every distinct pair is judged
    directly, K(K−1)/2 at most, in one batched call.
    """
    K = len(answers)
    stripped = [(a or "").strip() for a in answers]
    reads_empty = getattr(judge, "reads_empty", False)
    if getattr(judge, "transitive", False):
        ids = np.asarray(cluster(question, answers, judge))
        A = (ids[:, None] == ids[None, :]).astype(np.int64)
    else:
        cache = _PairCache(question, judge)
        pairs = [(i, j) for i in range(K) for j in range(i + 1, K) if reads_empty or (stripped[i] and stripped[j])]
        res = cache.ask([(stripped[i], stripped[j]) for i, j in pairs])
        A = np.eye(K, dtype=np.int64)
        for (i, j), r in zip(pairs, res):
            A[i, j] = A[j, i] = int(r)
    np.fill_diagonal(A, 1)
    return A


# ----------------------------------------------------------------------------------------------------------
# Semantic entropy and confidences
# ----------------------------------------------------------------------------------------------------------


def _ids(cluster_ids: Sequence[int]) -> list[int]:
    ids = [int(c) for c in cluster_ids]
    if not ids:
        raise ValueError("cluster_ids is empty: semantic entropy and confidences need at least one sample")
    return ids


def semantic_entropy(cluster_ids: Sequence[int]) -> float:
    """Discrete semantic entropy (Farquhar et al., Nature 2024): SE = −Σ_c p_c ln p_c with p_c = n_c / K.

    >>> round(semantic_entropy([0, 0, 1, 2]), 6)  # p = (1/2, 1/4, 1/4)
    1.039721
    """
    ids = _ids(cluster_ids)
    K = len(ids)
    return float(-sum((n / K) * math.log(n / K) for n in Counter(ids).values()))


def semantic_entropy_weighted(cluster_ids: Sequence[int], seq_logprobs: Sequence[float]) -> float:
    """Likelihood-weighted semantic entropy (Kuhn et al. 2023; Farquhar et al. 2024, normalised form).

    p(c) = Σ_{s∈c} exp(ℓ_s) / Σ_s exp(ℓ_s) over the K samples s with sequence log-probability ℓ_s (computed in
    log space with logsumexp); SE = −Σ_c p(c) ln p(c). Each sample counts once, duplicates included, as in the
    reference implementation. Length normalisation, if wanted, is the caller's choice of ℓ_s.
    """
    ids = _ids(cluster_ids)
    lp = np.asarray(seq_logprobs, dtype=np.float64)
    if lp.shape != (len(ids),):
        raise ValueError(f"seq_logprobs has shape {lp.shape}, expected ({len(ids)},): one log-prob per sample")
    if not np.all(np.isfinite(lp)):
        raise ValueError("seq_logprobs must be finite log-probabilities (got NaN or ±inf)")
    total = np.logaddexp.reduce(lp)
    ids_arr = np.asarray(ids)
    logp_c = np.array([np.logaddexp.reduce(lp[ids_arr == c]) - total for c in sorted(set(ids))])
    return float(-np.sum(np.exp(logp_c) * logp_c))


def conf_cluster_share(greedy_cluster: int, cluster_ids: Sequence[int]) -> float:
    """Primary confidence: the share of the K samples in the greedy answer's cluster, n_{c(greedy)} / K.

    ``greedy_cluster`` may be a cluster id that no sample has (the greedy answer agrees with no sample, or is
    empty): the confidence is then 0.

    >>> conf_cluster_share(0, [0, 0, 1, 2])
    0.5
    """
    ids = _ids(cluster_ids)
    return sum(c == int(greedy_cluster) for c in ids) / len(ids)


def _log_k(K: int | None, n: int) -> float:
    K = n if K is None else int(K)
    if K < 2:
        raise ValueError(
            f"entropy-based confidence needs K ≥ 2 samples (got K={K}): 1 − SE/log K is undefined for K=1 "
            "(log 1 = 0). Sample at least 2 answers per question (--metadata '{\"num_samples\": 10}')."
        )
    return math.log(K)


def _unit(x: float) -> float:
    # clip to [0, 1] and drop float noise (1 − ln 3 / ln 3 is 2e-16, not a confidence)
    return float(min(1.0, max(0.0, round(x, 12))))


def conf_entropy(cluster_ids: Sequence[int], K: int | None = None) -> float:
    """Entropy confidence: 1 − SE / ln K, in [0, 1] (1: all samples agree; 0: all K samples disagree).

    ``K`` defaults to ``len(cluster_ids)``; K = 1 raises ``ValueError`` (ln 1 = 0).

    >>> round(conf_entropy([0, 0, 1, 2]), 6)  # 1 − 1.039721 / ln 4
    0.25
    """
    ids = _ids(cluster_ids)
    return _unit(1.0 - semantic_entropy(ids) / _log_k(K, len(ids)))


def conf_likelihood_weighted(cluster_ids: Sequence[int], seq_logprobs: Sequence[float]) -> float:
    """1 − SE_w / ln K with the likelihood-weighted semantic entropy :func:`semantic_entropy_weighted`.

    Needs the samples' sequence log-probs (a semcal backend can return them; plain ``generate_until`` cannot).
    """
    ids = _ids(cluster_ids)
    return _unit(1.0 - semantic_entropy_weighted(ids, seq_logprobs) / _log_k(None, len(ids)))


# ----------------------------------------------------------------------------------------------------------
# One question, end to end
# ----------------------------------------------------------------------------------------------------------


def score_question(
    question: str,
    greedy: str,
    samples: Sequence[str],
    golds: Sequence[str],
    judge: Judge,
    threshold: float = 0.5,
    correctness: str = DEFAULT_CORRECTNESS,
    seq_logprobs: Sequence[float] | None = None,
    cluster_greedy: bool = True,
    no_logprobs_reason: str | None = None,
) -> dict:
    """Everything the QA tasks log for one question.

    ``cluster_greedy=True`` (semcal's default): the greedy answer is clustered together with the K samples
    (greedy first, so it represents its cluster and ``greedy_cluster`` is 0 unless it is empty).
    ``cluster_greedy=False`` (lm-polygraph's definition): the K samples are clustered alone, so the samples'
    clusters, NumSets and semantic entropy do not depend on the greedy answer; the greedy answer is then
    placed in the oldest sample cluster whose representative it is equivalent to (else a cluster of its own,
    confidence 0). Either way ``cluster_ids`` are the samples' ids. Correctness is
    :func:`semcal_eval.qa.labels.correct_by` under ``correctness`` (default ``cover``: the grader the training
    rewards use; ``f1``: best token-F1 ≥ ``threshold``; ``judge``: the judge's equivalence with a gold alias). Returns a JSON-serialisable dict with ``conf`` (primary confidence: cluster
    share) and ``correct`` plus ``em``, ``f1``, ``greedy``, ``samples``, ``cluster_ids``,
    ``greedy_cluster``, ``n_clusters``, ``semantic_entropy``, ``conf_entropy``, ``conf_likelihood`` (the
    likelihood-weighted 1 − SE/ln K from ``seq_logprobs``, the samples' sequence log-likelihoods; None without
    them, and then ``conf_likelihood_absent`` says why: ``no_logprobs_reason``), ``cluster_greedy``, ``judge``
    and ``judged_pairs``.
    """
    golds = check_golds(golds)
    greedy = (greedy or "").strip()
    samples = [(s or "").strip() for s in samples]
    if cluster_greedy:
        ids, cache = _cluster(question, [greedy, *samples], judge)
        g_id, s_ids = ids[0], ids[1:]
    else:
        s_ids, cache = _cluster(question, samples, judge)
        g_id = _place(greedy, samples, s_ids, cache)
    f1 = best_f1(greedy, golds)
    label = grade_record(correctness, greedy, golds, question, threshold, judge)
    return {
        "conf": conf_cluster_share(g_id, s_ids) if s_ids else None,
        **label,
        "em": exact_match(greedy, golds),
        "f1": f1,
        "greedy": greedy,
        "samples": samples,
        "cluster_ids": s_ids,
        "greedy_cluster": g_id,
        "n_clusters": len(set(s_ids)),
        "semantic_entropy": semantic_entropy(s_ids) if s_ids else None,
        "conf_entropy": conf_entropy(s_ids) if len(s_ids) >= 2 else None,
        "conf_likelihood": (
            conf_likelihood_weighted(s_ids, seq_logprobs) if seq_logprobs is not None and len(s_ids) >= 2 else None
        ),
        **({} if seq_logprobs is not None else {"conf_likelihood_absent": no_logprobs_reason or (
            "no sequence log-likelihoods for the samples were given")}),
        "cluster_greedy": bool(cluster_greedy),
        "judge": getattr(judge, "name", type(judge).__name__),
        "judged_pairs": cache.judged,
    }


def _place(greedy: str, samples: Sequence[str], ids: Sequence[int], cache: _PairCache) -> int:
    """The cluster of the greedy answer among the samples' own clusters (``cluster_greedy=False``): the oldest
    cluster whose representative (first member) it is equivalent to, else a new id (an empty answer: a new id)."""
    new = max(ids, default=-1) + 1
    if not greedy:
        return new
    reps: dict[int, str] = {}
    for c, a in zip(ids, samples):
        if a and c not in reps:
            reps[c] = a
    live = sorted(reps)
    res = cache.ask([(reps[c], greedy) for c in live])
    return next((c for c, r in zip(live, res) if r), new)
