"""Short-answer QA scoring and calibration by semantic agreement.

Pure functions (strings and lists in, numbers out):

* SQuAD answer normalisation, exact match and token-F1 against a list of gold aliases
  (Rajpurkar et al. 2016, the official SQuAD v1.1 evaluation script's definitions);
* greedy bidirectional clustering of sampled answers with an answer-equivalence judge
  (Kuhn et al. 2023, "Semantic Uncertainty"; the judge decides bidirectional equivalence, see
  :mod:`semcal_eval.judges`);
* discrete semantic entropy and three confidences derived from the clusters;
* a parser for verbalised confidences (RLCR's ``<answer>…</answer> <confidence>0.8</confidence>`` and
  ``Confidence: 0.8`` / ``Confidence: 80%``).

The lm-eval glue of the QA tasks (the task class and the per-judge filter) is built lazily at the bottom
of this module (``QATask``, ``JudgeFilter``, ``VerbalizedFilter``), so that importing the pure functions,
as the CSR trainer does, does not import lm-eval.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from semcal_eval.judges import Judge

__all__ = [
    "normalize_answer",
    "exact_match",
    "token_f1",
    "best_f1",
    "is_correct",
    "cluster",
    "agreement_matrix",
    "semantic_entropy",
    "semantic_entropy_weighted",
    "conf_cluster_share",
    "conf_entropy",
    "conf_likelihood_weighted",
    "parse_verbalized",
    "clean_answer",
    "score_question",
    "EmptyGoldError",
]


class EmptyGoldError(ValueError):
    """Raised when a question has no usable gold answer (empty list, or only empty strings)."""


# ----------------------------------------------------------------------------------------------------------
# SQuAD normalisation, EM, F1
# ----------------------------------------------------------------------------------------------------------

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation, drop the articles a/an/the, collapse whitespace.

    >>> normalize_answer("  The  Eiffel-Tower!")
    'eiffeltower'
    >>> normalize_answer("An apple, a day")
    'apple day'
    """
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _golds(golds: str | Iterable[str]) -> list[str]:
    if isinstance(golds, str):
        golds = [golds]
    golds = [g for g in golds if g is not None]
    if not golds or all(not normalize_answer(str(g)) for g in golds):
        raise EmptyGoldError(
            f"no usable gold answer (got {list(golds)!r}): every alias is empty after SQuAD normalisation. "
            "Drop unanswerable questions before scoring (the semcal QA tasks do this in process_docs and "
            "log how many they dropped)."
        )
    return [str(g) for g in golds]


def exact_match(pred: str, golds: str | Iterable[str]) -> int:
    """EM = max over gold aliases g of [normalize(pred) == normalize(g)], as 0/1.

    >>> exact_match("the Beatles", ["Beatles", "The Fab Four"])
    1
    """
    p = normalize_answer(pred)
    return int(any(p == normalize_answer(g) for g in _golds(golds)))


def token_f1(pred: str, gold: str) -> float:
    """SQuAD token-F1 between two strings: F1 = 2PR/(P+R) over the multiset overlap of normalised tokens.

    If either side has no tokens after normalisation, F1 = 1 when both are empty, else 0 (SQuAD v2 rule).
    Symmetric in its two arguments.

    >>> token_f1("Barack Obama", "President Barack Obama")
    0.8
    """
    p, g = normalize_answer(pred).split(), normalize_answer(gold).split()
    if not p or not g:
        return float(p == g)
    common = sum((Counter(p) & Counter(g)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def best_f1(pred: str, golds: str | Iterable[str]) -> float:
    """max over gold aliases of :func:`token_f1` (raises :class:`EmptyGoldError` if no alias is usable)."""
    return max(token_f1(pred, g) for g in _golds(golds))


def is_correct(pred: str, golds: str | Iterable[str], threshold: float = 0.5) -> bool:
    """correct ⇔ best_f1(pred, golds) ≥ threshold (CSR / semantic-uncertainty convention: threshold 0.5)."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    return best_f1(pred, golds) >= threshold


def clean_answer(text: str) -> str:
    """The answer a short-answer prompt produced: the first non-empty line, stripped; "" if none.

    >>> clean_answer("  Paris\\nQ: next question")
    'Paris'
    """
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()
    return ""


# ----------------------------------------------------------------------------------------------------------
# Clustering
# ----------------------------------------------------------------------------------------------------------


class _PairCache:
    """Judge results for one question, keyed by the unordered pair of stripped strings.

    Judges are symmetric by construction (NLI and the LLM judge evaluate both orders), so (a, b) and (b, a)
    share one entry; identical strings are equivalent without asking the judge.
    """

    def __init__(self, question: str, judge: "Judge"):
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


def _cluster(question: str, answers: Sequence[str], judge: "Judge") -> tuple[list[int], _PairCache]:
    cache = _PairCache(question, judge)
    ids: list[int] = []
    reps: list[str] = []  # reps[c] = stripped text of cluster c's first member ("" for empty clusters)
    for a in answers:
        a = (a or "").strip()
        if not a:  # an empty generation is its own cluster and never a representative
            ids.append(len(reps))
            reps.append("")
            continue
        live = [c for c, r in enumerate(reps) if r]
        # one batched judge call against all representatives; the first (oldest) match wins
        res = cache.ask([(reps[c], a) for c in live])
        match = next((c for c, r in zip(live, res) if r), None)
        if match is None:
            match = len(reps)
            reps.append(a)
        ids.append(match)
    return ids, cache


def cluster(question: str, answers: Sequence[str], judge: "Judge") -> list[int]:
    """Greedy bidirectional clustering (Kuhn et al. 2023, Algorithm 1).

    Answers are visited in order; each is compared (one batched ``judge.equivalent`` call) with the
    representative — the first member — of every existing cluster and joins the oldest cluster whose
    representative it is equivalent to, else opens a new cluster. Cluster ids are 0, 1, … in order of first
    appearance. Pair results are cached within the call and identical strings are equivalent without a
    judge call, so at most K·C < K² pairs are judged (C = number of clusters). An empty (or whitespace-only)
    answer is its own cluster and is never compared.

    >>> from semcal_eval.judges import F1Judge
    >>> cluster("Who?", ["Barack Obama", "Obama", "", "Trump", "obama"], F1Judge())
    [0, 0, 1, 2, 0]
    """
    return _cluster(question, answers, judge)[0]


def agreement_matrix(question: str, answers: Sequence[str], judge: "Judge") -> np.ndarray:
    """K×K 0/1 matrix A with A[i, j] = 1 iff answers i and j are equivalent under ``judge``.

    The diagonal is 1 (every answer agrees with itself, an empty one included); an empty answer agrees with
    nothing else. If ``judge.transitive`` is true (equivalence is an equivalence relation by construction,
    e.g. normalised exact match) the matrix is read off :func:`cluster` (A[i, j] = [c_i == c_j], K·C pairs);
    otherwise (token-F1, NLI, LLM and embedding thresholds are not transitive) every distinct pair is judged
    directly, K(K−1)/2 at most, in one batched call.
    """
    K = len(answers)
    stripped = [(a or "").strip() for a in answers]
    if getattr(judge, "transitive", False):
        ids = np.asarray(cluster(question, answers, judge))
        A = (ids[:, None] == ids[None, :]).astype(np.int64)
    else:
        cache = _PairCache(question, judge)
        pairs = [(i, j) for i in range(K) for j in range(i + 1, K) if stripped[i] and stripped[j]]
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


def conf_entropy(cluster_ids: Sequence[int], K: int | None = None) -> float:
    """Entropy confidence: 1 − SE / ln K, in [0, 1] (1: all samples agree; 0: all K samples disagree).

    ``K`` defaults to ``len(cluster_ids)``; K = 1 raises ``ValueError`` (ln 1 = 0).

    >>> round(conf_entropy([0, 0, 1, 2]), 6)  # 1 − 1.039721 / ln 4
    0.25
    """
    ids = _ids(cluster_ids)
    return float(min(1.0, max(0.0, 1.0 - semantic_entropy(ids) / _log_k(K, len(ids)))))


def conf_likelihood_weighted(cluster_ids: Sequence[int], seq_logprobs: Sequence[float]) -> float:
    """1 − SE_w / ln K with the likelihood-weighted semantic entropy :func:`semantic_entropy_weighted`.

    Needs the samples' sequence log-probs (a semcal backend can return them; plain ``generate_until`` cannot).
    """
    ids = _ids(cluster_ids)
    return float(min(1.0, max(0.0, 1.0 - semantic_entropy_weighted(ids, seq_logprobs) / _log_k(None, len(ids)))))


# ----------------------------------------------------------------------------------------------------------
# Verbalised confidence
# ----------------------------------------------------------------------------------------------------------

_NUM = r"([-+]?(?:\d+(?:\.\d*)?|\.\d+))\s*(%?)"
_CONF_TAG = re.compile(r"<confidence>\s*" + _NUM + r"\s*</confidence>", re.I)
_CONF_LINE = re.compile(r"\bconfidence(?:\s+level|\s+score)?\s*[:=]\s*" + _NUM, re.I)
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.I | re.S)
_ANSWER_PREFIX = re.compile(r"^\s*(?:final\s+)?answer\s*[:=]\s*", re.I)


def _to_conf(num: str, pct: str) -> float | None:
    try:
        v = float(num)
    except ValueError:
        return None
    if pct:
        v /= 100.0
    if not math.isfinite(v) or not 0.0 <= v <= 1.0:
        return None
    return v


def parse_verbalized(text: str) -> tuple[str, float | None]:
    """Split a generation into (answer, verbalised confidence or None).

    Confidence: the last ``<confidence>x</confidence>`` tag (RLCR format), else the last ``Confidence: x``
    (``=`` also accepted). ``x`` is a probability in [0, 1] or a percentage ``80%``; a value outside [0, 1]
    (e.g. a bare ``80``) or no confidence at all gives None — never a guess.
    Answer: the last ``<answer>…</answer>`` tag, else the text before the confidence statement with an
    ``Answer:`` prefix removed, first non-empty line.

    >>> parse_verbalized("<think>hm</think><answer> Paris </answer> <confidence>0.8</confidence>")
    ('Paris', 0.8)
    >>> parse_verbalized("Answer: Paris\\nConfidence: 75%")
    ('Paris', 0.75)
    >>> parse_verbalized("Paris. Confidence: 80")
    ('Paris.', None)
    """
    text = str(text)
    conf: float | None = None
    cut = len(text)
    tags = list(_CONF_TAG.finditer(text))
    lines = list(_CONF_LINE.finditer(text))
    if tags:
        conf = _to_conf(*tags[-1].groups())
        cut = tags[0].start()
    elif lines:
        conf = _to_conf(*lines[-1].groups())
        cut = lines[0].start()
    answers = _ANSWER_TAG.findall(text)
    if answers:
        answer = " ".join(answers[-1].split())
    else:
        answer = clean_answer(_ANSWER_PREFIX.sub("", text[:cut].strip()))
    return answer, conf


# ----------------------------------------------------------------------------------------------------------
# One question, end to end
# ----------------------------------------------------------------------------------------------------------


def score_question(
    question: str,
    greedy: str,
    samples: Sequence[str],
    golds: Sequence[str],
    judge: "Judge",
    threshold: float = 0.5,
    correctness: str = "f1",
    seq_logprobs: Sequence[float] | None = None,
) -> dict:
    """Everything the QA tasks log for one question.

    The greedy answer is clustered together with the K samples (greedy first, so it represents its cluster
    and ``greedy_cluster`` is 0 unless it is empty); ``cluster_ids`` are the samples' ids. Correctness is
    best token-F1 ≥ ``threshold`` (``correctness="f1"``) or the judge's equivalence with any gold alias
    (``correctness="judge"``). Returns a JSON-serialisable dict with ``conf`` (primary confidence: cluster
    share) and ``correct`` (Contract 1) plus ``em``, ``f1``, ``greedy``, ``samples``, ``cluster_ids``,
    ``greedy_cluster``, ``n_clusters``, ``semantic_entropy``, ``conf_entropy``, ``conf_likelihood`` (None
    without log-probs) and ``judged_pairs``.
    """
    golds = _golds(golds)
    greedy = (greedy or "").strip()
    samples = [(s or "").strip() for s in samples]
    ids, cache = _cluster(question, [greedy, *samples], judge)
    g_id, s_ids = ids[0], ids[1:]
    f1 = best_f1(greedy, golds)
    if correctness == "f1":
        correct = int(f1 >= threshold)
    elif correctness == "judge":
        correct = int(bool(greedy) and any(judge.equivalent(question, [(greedy, g) for g in golds])))
    else:
        raise ValueError(f"correctness must be 'f1' or 'judge', got {correctness!r}")
    rec = {
        "conf": conf_cluster_share(g_id, s_ids) if s_ids else None,
        "correct": correct,
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
        "judge": getattr(judge, "name", type(judge).__name__),
        "judged_pairs": cache.judged,
    }
    return rec
