"""The standard uncertainty estimators of lm-polygraph, read from what a QA run already has: the greedy answer's
token log-probabilities (and full next-token entropies) and the K samples with their agreement matrix.

No estimator samples anything new; only P(True) (:mod:`semcal_eval.qa.ptrue`) needs one more forward pass.
Every function here is pure (numbers and strings in, one float out). Orientation: each function returns the
quantity of its paper (an *uncertainty* U for perplexity, entropy, NumSets, degree, eccentricity, EigV; a
*confidence* for MSP and lexical similarity); :data:`ESTIMATORS` turns each into a confidence in [0, 1] by a
fixed monotone map (so AUROC / PRR / AUARC, which only read the ranking, are those of the paper's score).

Only some of them are probabilities (:attr:`Estimator.probability`): the maximum sequence probability and
P(True). The others (perplexity, entropy, EigV, degree, eccentricity, NumSets, lexical similarity) are scores;
their [0, 1] map is not calibrated, so they are ranked by AUROC and PRR only, and a calibration metric of
theirs needs a mapping fitted on other documents (:func:`crossfit_calibrate`, the ``_iso`` rows).

Graph estimators (Lin, Trivedi & Sun 2023, "Generating with Confidence", arXiv:2305.19187) take the K×K
agreement matrix W of the samples (:func:`semcal_eval.qa.agreement.agreement_matrix`, 0/1 from the judge, made
symmetric as (W + Wᵀ)/2; diagonal 1), its degree matrix D = diag(W·1) and the normalised graph Laplacian
L = I − D^{-1/2} W D^{-1/2}.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from semcal_eval.core import recalibration
from semcal_eval.core.crossfit import splits as crossfit_splits
from semcal_eval.core.metrics import expected_cumsum

from .answers import check_golds, normalize_answer, rouge_l_f1, token_f1

__all__ = [
    "max_sequence_probability",
    "perplexity",
    "mean_token_entropy",
    "num_semantic_sets",
    "degree_uncertainty",
    "eccentricity",
    "eigv",
    "lexical_similarity",
    "rouge_l",
    "rouge_l_stemmed",
    "num_semantic_sets_components",
    "sar",
    "rouge_l_matrix",
    "quality_rouge_l",
    "prr_quality",
    "semantic_class_probs",
    "Evidence",
    "Estimator",
    "ESTIMATORS",
    "DEFAULT_ESTIMATORS",
    "estimator_conf",
    "crossfit_calibrate",
    "ECC_THRESHOLD",
]

#: Eccentricity keeps the Laplacian eigenvectors with eigenvalue below this (lm-polygraph's ``thres=0.9``).
ECC_THRESHOLD = 0.9


def _logprobs(token_logprobs: Sequence[float]) -> np.ndarray:
    lp = np.asarray(list(token_logprobs), dtype=np.float64)
    if lp.ndim != 1 or lp.size == 0:
        raise ValueError("token_logprobs is empty: the greedy answer's token log-probabilities are needed "
                         "(run the QA task on --model hf-semsoft, which logs them)")
    if not np.all(np.isfinite(lp)) or np.any(lp > 1e-6):
        raise ValueError("token_logprobs must be finite log-probabilities ≤ 0")
    return np.minimum(lp, 0.0)


# ----------------------------------------------------------------------------------------------------------
# Logit-based, from the greedy answer
# ----------------------------------------------------------------------------------------------------------


def max_sequence_probability(token_logprobs: Sequence[float]) -> float:
    """Maximum sequence probability, P(y | x) = exp(Σ_t ln p(y_t | y_<t, x)) of the greedy answer y.

    lm-polygraph's ``MaximumSequenceProbability`` (U = −Σ_t ln p); Fadeeva et al. 2023, Malinin & Gales 2021.

    >>> round(max_sequence_probability([math.log(0.5), math.log(0.5)]), 6)
    0.25
    """
    return float(math.exp(_logprobs(token_logprobs).sum()))


def perplexity(token_logprobs: Sequence[float]) -> float:
    """Perplexity of the greedy answer, PPL = exp(−(1/T) Σ_t ln p(y_t | y_<t, x)) ≥ 1 (an uncertainty).

    Length-normalised log-probability (Fomicheva et al. 2020, "Unsupervised quality estimation for NMT";
    lm-polygraph's ``Perplexity``). Its confidence is 1 / PPL, the geometric-mean token probability.

    >>> perplexity([math.log(0.5), math.log(0.125)])
    4.0
    """
    return float(math.exp(-_logprobs(token_logprobs).mean()))


def mean_token_entropy(token_entropies: Sequence[float]) -> float:
    """Mean token entropy, H̄ = (1/T) Σ_t H(p(· | y_<t, x)) with H(p) = −Σ_v p(v) ln p(v) (an uncertainty).

    Fomicheva et al. 2020; Malinin & Gales 2021 (lm-polygraph's ``MeanTokenEntropy``). The entropies are the
    full-vocabulary ones the shared-prefix backend logs per greedy step
    (:class:`semcal_eval.harness.sampling.RowResult`), not a top-k approximation.
    """
    h = np.asarray(list(token_entropies), dtype=np.float64)
    if h.ndim != 1 or h.size == 0:
        raise ValueError("token_entropies is empty: the greedy answer's next-token entropies are needed "
                         "(the hf-semsoft backend logs them on its shared-prefix path)")
    if not np.all(np.isfinite(h)) or np.any(h < -1e-6):
        raise ValueError("token_entropies must be finite and ≥ 0")
    return float(np.maximum(h, 0.0).mean())


# ----------------------------------------------------------------------------------------------------------
# Consistency, from the samples
# ----------------------------------------------------------------------------------------------------------


def num_semantic_sets(cluster_ids: Sequence[int]) -> int:
    """Number of semantic sets, U_NumSet = |{c(s_1), …, c(s_K)}|: distinct clusters among the K samples.

    Lin et al. 2023 (§3.1, after Kuhn et al. 2023's clustering); lm-polygraph's ``NumSemSets``. The clusters are
    semcal's greedy bidirectional ones (:func:`semcal_eval.qa.agreement.cluster`).

    >>> num_semantic_sets([0, 0, 1, 2, 0])
    3
    """
    ids = [int(c) for c in cluster_ids]
    if not ids:
        raise ValueError("cluster_ids is empty: NumSets needs at least one sample")
    return len(set(ids))


def _affinity(W) -> np.ndarray:
    A = np.asarray(W, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0:
        raise ValueError(f"agreement matrix must be square K×K with K ≥ 1, got shape {A.shape}")
    if not np.all(np.isfinite(A)) or A.min() < 0 or A.max() > 1:
        raise ValueError("agreement matrix entries must be similarities in [0, 1]")
    A = (A + A.T) / 2.0
    np.fill_diagonal(A, 1.0)  # every answer agrees with itself (also keeps every degree ≥ 1)
    return A


def _laplacian(W) -> np.ndarray:
    A = _affinity(W)
    d = 1.0 / np.sqrt(A.sum(axis=1))
    return np.eye(len(A)) - d[:, None] * A * d[None, :]


def degree_uncertainty(W) -> float:
    """Degree uncertainty, U_Deg = trace(K·I − D) / K² = 1 − (1/K²) Σ_ij W_ij, in [0, 1 − 1/K].

    Lin et al. 2023, eq. for U_Deg (lm-polygraph's ``DegMat``): the mean disagreement between samples.

    >>> degree_uncertainty([[1, 1], [1, 1]]), degree_uncertainty([[1, 0], [0, 1]])
    (0.0, 0.5)
    """
    A = _affinity(W)
    K = len(A)
    return float(np.trace(K * np.eye(K) - np.diag(A.sum(axis=1))) / K**2)


def eigv(W) -> float:
    """Sum of eigenvalues of the graph Laplacian, U_EigV = Σ_k max(0, 1 − λ_k), λ_k the eigenvalues of the
    normalised Laplacian L = I − D^{-1/2} W D^{-1/2}; in [1, K] (a soft count of semantic sets).

    Lin et al. 2023, §3.2 (lm-polygraph's ``EigValLaplacian``). For a 0/1 matrix of c disjoint cliques it is c.

    >>> round(eigv(np.eye(3)), 6), round(eigv(np.ones((3, 3))), 6)
    (3.0, 1.0)
    """
    lam = np.linalg.eigvalsh(_laplacian(W))
    return float(np.clip(1.0 - lam, 0.0, None).sum())


def eccentricity(W, threshold: float = ECC_THRESHOLD) -> float:
    """Eccentricity, U_Ecc = ‖[v_1 − v̄, …, v_K − v̄]‖_F: the spread of the samples' spectral embeddings.

    v_j ∈ R^k is row j of the matrix of the Laplacian's eigenvectors whose eigenvalue is below ``threshold``
    (the k smallest; lm-polygraph's ``Eccentricity(thres=0.9)`` rule for k), v̄ their mean (Lin et al. 2023,
    §3.2). The norm is invariant to the choice of basis inside a repeated eigenvalue's eigenspace (it is the
    Frobenius norm of the centred rows, and any orthogonal change of basis leaves it unchanged), so the value
    is deterministic. 0 when all samples agree (k = 1, the constant eigenvector); grows with disagreement.
    """
    lam, vec = np.linalg.eigh(_laplacian(W))
    V = vec[:, lam < threshold]
    if V.shape[1] == 0:  # cannot happen (λ_min = 0), kept for a threshold ≤ 0
        return 0.0
    return float(np.linalg.norm(V - V.mean(axis=0, keepdims=True)))


def rouge_l(a: str, b: str) -> float:
    """ROUGE-L F-measure of two answers over SQuAD-normalised tokens: LCS-based P = LCS/|b|, R = LCS/|a|,
    F = 2PR/(P + R) (Lin 2004). An empty answer scores 0 against anything (it agrees with nothing, as in the
    agreement matrix); two identical non-empty answers score 1.

    >>> rouge_l("the Eiffel Tower", "Eiffel Tower in Paris")  # LCS 2, |a| 2, |b| 4 after normalisation
    0.6666666666666666
    """
    return rouge_l_f1(a, b)


_STEMMED_SCORER = None


def rouge_l_stemmed(a: str, b: str) -> float:
    """ROUGE-L F-measure as lm-polygraph's ``LexicalSimilarity(rougeL)`` computes it: Google's ``rouge_score``
    (``RougeScorer(["rougeL"], use_stemmer=True)``, a dependency of lm-eval): lower case, every run of
    non-alphanumeric characters a separator, Porter stemming of tokens longer than 3 characters, no article or
    punctuation removal beyond that; 0 when either side has no token.

    >>> rouge_l_stemmed("running dogs", "the dog runs")  # stems run, dog | the, dog, run: LCS 1, P 1/2, R 1/3
    0.4
    """
    global _STEMMED_SCORER
    if _STEMMED_SCORER is None:
        from rouge_score import rouge_scorer

        _STEMMED_SCORER = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    return float(_STEMMED_SCORER.score(a or "", b or "")["rougeL"].fmeasure)


#: lexical_similarity's metrics: semcal's ROUGE-L over SQuAD-normalised tokens without stemming, polygraph's
#: stemmed ROUGE-L (``rouge_score``), and token-F1
LEXSIM_METRICS = ("rougeL", "rougeL_stem", "f1")


def lexical_similarity(samples: Sequence[str], metric: str = "rougeL") -> float:
    """Lexical similarity, (2 / (K(K−1))) Σ_{i<j} sim(s_i, s_j): mean pairwise similarity of the K samples, in
    [0, 1] (a confidence). ``metric``: ``"rougeL"`` (semcal's :func:`rouge_l`: SQuAD-normalised tokens, no
    stemming), ``"rougeL_stem"`` (lm-polygraph's definition, :func:`rouge_l_stemmed`) or ``"f1"`` (token-F1).

    Fomicheva et al. 2020 (lexical similarity of MC samples); lm-polygraph's ``LexicalSimilarity(rougeL)`` is
    the mean over the same pairs with ``rougeL_stem`` (and the opposite sign: it returns an uncertainty).
    K = 1 gives 1.0 (no pair disagrees).
    """
    sim: Callable[[str, str], float]
    if metric == "rougeL":
        sim = rouge_l
    elif metric == "rougeL_stem":
        sim = rouge_l_stemmed
    elif metric == "f1":
        sim = lambda a, b: token_f1(a, b) if normalize_answer(a) and normalize_answer(b) else 0.0  # noqa: E731
    else:
        raise ValueError(f"lexical_similarity: metric={metric!r} must be one of {LEXSIM_METRICS}")
    s = [(x or "").strip() for x in samples]
    if not s:
        raise ValueError("lexical_similarity needs at least one sample")
    if len(s) == 1:
        return 1.0
    # identical strings give the same score: compute each distinct pair once
    counts = Counter(s)
    uniq = list(counts)
    total, pairs = 0.0, 0
    for i, a in enumerate(uniq):
        na = counts[a]
        if na > 1:
            total += (na * (na - 1) / 2) * sim(a, a)
            pairs += na * (na - 1) // 2
        for b in uniq[i + 1:]:
            total += na * counts[b] * sim(a, b)
            pairs += na * counts[b]
    return float(total / pairs)


def semantic_class_probs(cluster_ids: Sequence[int], seq_logprobs: Sequence[float] | None = None) -> dict[int, float]:
    """The class probabilities semantic entropy is computed from: p(c) = n_c / K (discrete) or
    p(c) = Σ_{s∈c} exp(ℓ_s) / Σ_s exp(ℓ_s) (likelihood-weighted, Kuhn et al. 2023 / Farquhar et al. 2024).

    Every sample counts once, duplicates included, in both the numerator and the normaliser, so the p(c) sum
    to 1 when samples repeat (summing the probabilities of the *distinct* answers of a class over a normaliser
    of all samples gives sums above 1: the bug lm-polygraph's users report).
    """
    ids = np.asarray([int(c) for c in cluster_ids])
    if ids.size == 0:
        raise ValueError("cluster_ids is empty")
    classes = sorted(set(ids.tolist()))
    if seq_logprobs is None:
        return {c: float(np.mean(ids == c)) for c in classes}
    lp = np.asarray(list(seq_logprobs), dtype=np.float64)
    if lp.shape != ids.shape or not np.all(np.isfinite(lp)):
        raise ValueError(f"seq_logprobs must be {ids.size} finite log-probabilities, one per sample")
    total = np.logaddexp.reduce(lp)
    return {c: float(np.exp(np.logaddexp.reduce(lp[ids == c]) - total)) for c in classes}


def num_semantic_sets_components(W) -> int:
    """lm-polygraph's ``NumSemSets``: the number of connected components of the samples' agreement graph (an
    edge i–j iff W_ij = W_ji = 1, i.e. the two samples agree both ways), the samples only.

    semcal's :func:`num_semantic_sets` counts the clusters of greedy representative clustering instead (a
    sample joins the first cluster whose *first member* it agrees with). The two agree for a transitive judge;
    for a non-transitive one (token-F1, NLI) a chain a ~ b ~ c with a ≁ c is one component but can be two
    clusters.

    >>> num_semantic_sets_components([[1, 1, 0], [1, 1, 1], [0, 1, 1]])  # the chain 0 ~ 1 ~ 2: one component
    1
    """
    from scipy.sparse.csgraph import connected_components

    A = np.asarray(W, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0:
        raise ValueError(f"agreement matrix must be square K×K with K ≥ 1, got shape {A.shape}")
    mutual = (A >= 0.5) & (A.T >= 0.5)  # 0/1 judge matrices; a soft matrix counts agreement at ≥ ½
    return int(connected_components(mutual, directed=False)[0])


def rouge_l_matrix(samples: Sequence[str]) -> np.ndarray:
    """K×K matrix of :func:`rouge_l` between the samples, diagonal 1 (SAR's sentence similarity here)."""
    s = [(x or "").strip() for x in samples]
    K = len(s)
    S = np.eye(K)
    for i in range(K):
        for j in range(i + 1, K):
            S[i, j] = S[j, i] = rouge_l(s[i], s[j])
    return S


#: SAR's temperature t (Duan et al. 2024; lm-polygraph's ``SAR``: t = 0.001)
SAR_TEMPERATURE = 1e-3


def sar(sample_token_logprobs: Sequence[Sequence[float]], similarity, token_relevance=None,
        t: float = SAR_TEMPERATURE) -> float:
    """SAR, shifting attention to relevance (Duan et al. 2024, arXiv:2307.01379; lm-polygraph's ``SAR``), an
    uncertainty over the K samples s_i with token log-probs ℓ_{i,1..T_i}:

    * token SAR of each sample: E_i = −Σ_t ℓ_{i,t} · R̃_{i,t} with R̃_{i,t} = R_{i,t} / Σ_u R_{i,u} the normalised
      token relevance, R_{i,t} = 1 − sim(s_i, s_i without token t); its probability p_i = exp(−E_i);
    * sentence relevance r_i = Σ_{j≠i} S_ij p_j / t (S the K×K sentence similarity);
    * SAR = (1/K) Σ_i −ln(r_i + p_i).

    ``token_relevance`` (one array of R_{i,t} per sample) defaults to uniform relevance, which makes E_i the
    mean token NLL (the length-normalised log-likelihood); polygraph computes both R and S with the cross-encoder
    ``cross-encoder/stsb-roberta-large``; semcal's row uses :func:`rouge_l_matrix` for S (see docs/QA_ESTIMATORS.md).

    >>> round(sar([[math.log(0.5)], [math.log(0.25)]], [[1, 1], [1, 1]], t=1.0), 6)  # −ln(.25+.5), −ln(.5+.25)
    0.287682
    """
    K = len(sample_token_logprobs)
    S = np.asarray(similarity, dtype=np.float64)
    if K == 0 or S.shape != (K, K):
        raise ValueError(f"sar: need K ≥ 1 samples' token log-probs and a K×K similarity; got K={K}, {S.shape}")
    if not t > 0:
        raise ValueError(f"sar: temperature t={t} must be > 0")
    p = np.empty(K)
    for i, lp in enumerate(sample_token_logprobs):
        lp = _logprobs(lp)
        R = np.ones_like(lp) if token_relevance is None else np.asarray(token_relevance[i], dtype=np.float64)
        if R.shape != lp.shape or not np.all(np.isfinite(R)) or R.sum() <= 0:
            raise ValueError(f"sar: token relevance of sample {i} must be {lp.size} finite values with a positive sum")
        p[i] = math.exp(float(-(-lp * (R / R.sum())).sum()))
    r = (S * (1.0 - np.eye(K))) @ p / t
    return float(np.mean(-np.log(r + p)))


def quality_rouge_l(answer: str, golds: Sequence[str]) -> float:
    """The continuous quality of an answer: max over the gold aliases of :func:`rouge_l` (ROUGE-L F1 against the
    best reference), in [0, 1]; the quality lm-polygraph's PRR is read against on free-form answers.

    >>> round(quality_rouge_l("Paris is the capital", ["Lyon", "Paris is the capital of France"]), 6)
    0.75
    """
    return max(rouge_l(answer, g) for g in check_golds(golds))  # the one gold reader: EmptyGoldError if none


def prr_quality(conf: Sequence[float], quality: Sequence[float]) -> float:
    """Prediction–rejection ratio against a continuous quality q ∈ [0, 1] (lm-polygraph's convention for
    free-form answers, e.g. q = :func:`quality_rouge_l`):

    PRR = (AUC_conf − AUC_rnd) / (AUC_orc − AUC_rnd), AUC_x = (1/n) Σ_{k=1..n} (mean q of the k documents ranked
    first by x): ``conf`` descending (ties: expected value over random tie-breaking), the oracle q descending,
    the random order q̄ at every k. For a 0/1 quality it is :func:`semcal_eval.core.metrics.prr`. NaN when every
    q is equal (the oracle is no better than random). polygraph min-max normalises q first, which leaves the
    ratio unchanged.

    >>> round(prr_quality([3, 2, 1], [1.0, 0.5, 0.0]), 12)  # the oracle order
    1.0
    """
    c = np.asarray(conf, dtype=np.float64)
    q = np.asarray(quality, dtype=np.float64)
    if c.shape != q.shape or c.ndim != 1 or c.size == 0:
        raise ValueError(f"prr_quality: conf and quality must be two 1-D arrays of one length, got {c.shape}, "
                         f"{q.shape}")
    if not (np.all(np.isfinite(c)) and np.all(np.isfinite(q))):
        raise ValueError("prr_quality: conf and quality must be finite")
    k = np.arange(1, len(c) + 1)
    auc = float(np.mean(expected_cumsum(c, q) / k))
    orc = float(np.mean(np.cumsum(np.sort(q)[::-1]) / k))
    rnd = float(q.mean())
    if orc - rnd <= 1e-15:
        return float("nan")
    return (auc - rnd) / (orc - rnd)


# ----------------------------------------------------------------------------------------------------------
# The registry: each estimator as a confidence in [0, 1]
# ----------------------------------------------------------------------------------------------------------


@dataclass
class Evidence:
    """What one question has for the estimators: the greedy answer's token log-probs / entropies (None when
    the backend gave none), the K samples, their cluster ids, their K×K agreement matrix (None until an
    estimator needs it; :func:`estimator_conf` fills it lazily through ``matrix_fn``) and the samples' token
    log-probs."""

    samples: list[str]
    cluster_ids: list[int]
    greedy_logprobs: Sequence[float] | None = None
    greedy_entropies: Sequence[float] | None = None
    matrix: np.ndarray | None = None
    matrix_fn: Callable[[], np.ndarray] | None = None
    #: the samples' token log-probs (one list per sample; SAR reads them), None when the backend gave none
    sample_token_logprobs: Sequence[Sequence[float]] | None = None

    def W(self) -> np.ndarray:
        if self.matrix is None:
            if self.matrix_fn is None:
                raise ValueError("a graph estimator needs the samples' agreement matrix (no matrix_fn given)")
            self.matrix = self.matrix_fn()
        return self.matrix


@dataclass(frozen=True)
class Estimator:
    """One estimator row: ``score`` (the paper's quantity), ``conf`` (monotone map of it into [0, 1], higher
    = more confident), ``needs`` (``"logprobs"``, ``"entropies"``, ``"samples"``, ``"matrix"``,
    ``"sample_logprobs"``) and whether
    the confidence is a probability (ECE / Brier meaningful) or only a ranking score."""

    name: str
    needs: str
    probability: bool
    score: Callable[[Evidence], float]
    conf: Callable[[float], float]
    doc: str


def _recip(u: float) -> float:
    return float(1.0 / u) if u > 0 else 1.0


ESTIMATORS: dict[str, Estimator] = {e.name: e for e in [
    Estimator("msp", "logprobs", True, lambda ev: max_sequence_probability(ev.greedy_logprobs), float,
              "maximum sequence probability exp(Σ ln p)"),
    Estimator("perplexity", "logprobs", False, lambda ev: perplexity(ev.greedy_logprobs), _recip,
              "perplexity; conf = 1/PPL = exp(mean ln p)"),
    Estimator("token_entropy", "entropies", False, lambda ev: mean_token_entropy(ev.greedy_entropies),
              lambda u: float(math.exp(-u)), "mean token entropy H̄; conf = exp(−H̄)"),
    Estimator("num_sets", "samples", False, lambda ev: float(num_semantic_sets(ev.cluster_ids)), _recip,
              "number of semantic sets U; conf = 1/U"),
    Estimator("degree", "matrix", False, lambda ev: degree_uncertainty(ev.W()), lambda u: float(1.0 - u),
              "degree U_Deg; conf = 1 − U_Deg (mean agreement)"),
    Estimator("eccentricity", "matrix", False, lambda ev: eccentricity(ev.W()), lambda u: float(1.0 / (1.0 + u)),
              "eccentricity U_Ecc; conf = 1/(1 + U_Ecc)"),
    Estimator("eigv", "matrix", False, lambda ev: eigv(ev.W()), _recip, "EigV U; conf = 1/U"),
    Estimator("lexsim", "samples", False, lambda ev: lexical_similarity(ev.samples), float,
              "mean pairwise ROUGE-L of the samples"),
    # lm-polygraph's definitions where semcal's differ (docs/QA_ESTIMATORS.md, differences 1 and 2)
    Estimator("lexsim_stem", "samples", False, lambda ev: lexical_similarity(ev.samples, "rougeL_stem"), float,
              "mean pairwise stemmed ROUGE-L of the samples (rouge_score, polygraph's LexicalSimilarity)"),
    Estimator("num_sets_cc", "matrix", False, lambda ev: float(num_semantic_sets_components(ev.W())), _recip,
              "connected components of the samples' agreement graph (polygraph's NumSemSets); conf = 1/U"),
    Estimator("sar", "sample_logprobs", False,
              lambda ev: sar(ev.sample_token_logprobs, rouge_l_matrix(ev.samples)),
              lambda u: float(1.0 / (1.0 + math.exp(min(u, 700.0)))),
              "SAR with ROUGE-L sentence similarity, uniform token relevance; conf = 1/(1 + e^U)"),
]}
#: the estimator rows a QA task adds by default (P(True) is opt-in: one extra forward pass per question; the
#: polygraph-definition rows and SAR are opt-in too: add them to --metadata estimators)
DEFAULT_ESTIMATORS: tuple[str, ...] = ("msp", "perplexity", "token_entropy", "num_sets", "degree", "eccentricity",
                                       "eigv", "lexsim")


def estimator_conf(name: str, ev: Evidence) -> tuple[float, float] | None:
    """(raw score, confidence in [0, 1]) of estimator ``name`` on one question; None when the evidence it
    needs is missing (no log-probs / entropies from the backend)."""
    try:
        est = ESTIMATORS[name]
    except KeyError:
        raise ValueError(f"unknown QA estimator {name!r}; known: {', '.join(ESTIMATORS)} (and ptrue)") from None
    if est.needs == "logprobs" and not ev.greedy_logprobs:
        return None
    if est.needs == "entropies" and not ev.greedy_entropies:
        return None
    if est.needs == "sample_logprobs" and (not ev.sample_token_logprobs or not all(ev.sample_token_logprobs)):
        return None
    s = float(est.score(ev))
    return s, min(1.0, max(0.0, round(est.conf(s), 12)))


def crossfit_calibrate(scores: Sequence[float], correct: Sequence[int], folds: Sequence[int] | None = None,
                       method: str = "isotonic") -> np.ndarray:
    """P(correct | score), 2-fold cross-fitted: each fold's documents are mapped by a monotone map fitted on
    the other fold only: the one definition of each map, :func:`semcal_eval.core.recalibration.fit_isotonic`
    (increasing, clipped outside the fitted range) or ``"platt"``,
    :func:`~semcal_eval.core.recalibration.fit_platt` (logistic regression on logit(score), the score a
    confidence in [0, 1]). ``folds`` default: :func:`semcal_eval.core.crossfit.folds`, position % 2 (the folds
    of the ``_ts`` rows). A fold whose other fold has one class only gets that fold's base rate (nothing to fit
    a ranking on).
    """
    if method not in recalibration.POSTHOC_METHODS:
        raise ValueError(f"crossfit_calibrate: method={method!r} must be 'isotonic' or 'platt'")
    x = np.asarray(scores, dtype=np.float64)
    y = np.asarray(correct, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or x.size < 4:
        raise ValueError(f"crossfit_calibrate needs ≥ 4 documents with one score and one 0/1 label each, got "
                         f"{x.shape} and {y.shape}")
    out = np.empty_like(x)
    for k, fit, app in crossfit_splits(len(x), folds):  # the one fold rule (semcal_eval.core.crossfit)
        if not len(app):
            continue
        if not len(fit):
            raise ValueError("crossfit_calibrate: one fold is empty; need documents in both folds")
        out[app] = recalibration.fit_posthoc(method, x[fit], y[fit]).apply(x[app])
    return np.clip(out, 0.0, 1.0)
