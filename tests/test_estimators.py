"""Issue 23: the QA uncertainty estimators against references written here from their papers' definitions
(networkx's normalised Laplacian, the rouge-score package, explicit sums), and the semantic-entropy class
probabilities with repeated samples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from semcal_eval.qa import agreement as AG
from semcal_eval.qa import estimators as E
from semcal_eval.qa.judges import F1Judge


def _random_W(K, seed):
    rng = np.random.default_rng(seed)
    W = (rng.uniform(size=(K, K)) < 0.4).astype(float)
    W = np.maximum(W, W.T)
    np.fill_diagonal(W, 1)
    return W


def _nx_laplacian(W):
    import networkx as nx

    G = nx.from_numpy_array(np.asarray(W, float))  # self-loops of weight 1 on the diagonal
    return nx.normalized_laplacian_matrix(G, weight="weight").toarray()


# ---------------------------------------------------------------- logit-based


def test_logit_estimators_from_definitions():
    lp = [math.log(0.9), math.log(0.5), math.log(0.2)]
    assert E.max_sequence_probability(lp) == pytest.approx(0.9 * 0.5 * 0.2)
    assert E.perplexity(lp) == pytest.approx((0.9 * 0.5 * 0.2) ** (-1 / 3))
    assert E.mean_token_entropy([0.0, 1.0, 2.0]) == pytest.approx(1.0)
    # a padded answer (more confident filler tokens) raises the normalised score but not MSP: MSP can only drop
    pad = lp + [math.log(0.99)] * 5
    assert E.max_sequence_probability(pad) < E.max_sequence_probability(lp)
    assert E.perplexity(pad) < E.perplexity(lp)


def test_logit_estimators_reject_bad_input():
    with pytest.raises(ValueError, match="hf-semsoft"):
        E.max_sequence_probability([])
    with pytest.raises(ValueError, match="≤ 0"):
        E.perplexity([0.5])
    with pytest.raises(ValueError, match="finite"):
        E.mean_token_entropy([float("nan")])


# ---------------------------------------------------------------- graph estimators (Lin et al. 2023)


@pytest.mark.parametrize("seed", range(4))
def test_eigv_and_degree_match_the_definitions(seed):
    W = _random_W(8, seed)
    lam = np.linalg.eigvalsh(_nx_laplacian(W))
    assert E.eigv(W) == pytest.approx(sum(max(0.0, 1 - x) for x in lam))
    D = W.sum(1)
    assert E.degree_uncertainty(W) == pytest.approx(sum(8 - D[i] for i in range(8)) / 64)


def test_graph_estimators_on_cliques_and_edge_cases():
    for c in (1, 2, 5):
        W = np.kron(np.eye(c), np.ones((10 // c if 10 % c == 0 else 2, 10 // c if 10 % c == 0 else 2)))
        assert E.eigv(W) == pytest.approx(c)
    assert E.degree_uncertainty(np.ones((4, 4))) == 0.0 and E.eccentricity(np.ones((4, 4))) == pytest.approx(0, abs=1e-9)
    assert E.degree_uncertainty(np.eye(4)) == pytest.approx(0.75)
    assert E.eccentricity(np.eye(4)) > E.eccentricity(np.kron(np.eye(2), np.ones((2, 2)))) > 0
    with pytest.raises(ValueError, match="square"):
        E.eigv(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        E.degree_uncertainty(2 * np.ones((2, 2)))


@pytest.mark.parametrize("seed", range(3))
def test_eccentricity_matches_definition_and_ignores_the_eigenbasis(seed):
    from scipy.linalg import eigh

    W = _random_W(7, seed)
    lam, vec = eigh(_nx_laplacian(W))
    V = vec[:, lam < 0.9]
    ref = math.sqrt(sum(np.sum((V[j] - V.mean(0)) ** 2) for j in range(7)))
    assert E.eccentricity(W) == pytest.approx(ref)
    # any orthonormal basis of the kept eigenspace gives the same value (degenerate eigenvalues)
    Q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(V.shape[1], V.shape[1])))
    VQ = V @ Q
    assert math.sqrt(np.sum((VQ - VQ.mean(0)) ** 2)) == pytest.approx(ref)


def test_num_sets_from_the_clustering():
    j = F1Judge()
    ids = AG.cluster("q", ["Paris", "paris", "Lyon", "", "Paris, France"], j)
    assert E.num_semantic_sets(ids) == len(set(ids)) == 3


# ---------------------------------------------------------------- lexical similarity


def test_rouge_l_matches_rouge_score_package():
    from rouge_score import rouge_scorer

    sc = rouge_scorer.RougeScorer(["rougeL"])
    pairs = [("the cat sat on the mat", "a cat on a mat"), ("Barack Obama", "Obama"), ("1969", "July 1969"),
             ("x y z", "z y x")]
    for a, b in pairs:
        # rouge-score tokenises differently (keeps articles); compare on SQuAD-normalised text
        from semcal_eval.qa.answers import normalize_answer

        ref = sc.score(normalize_answer(a), normalize_answer(b))["rougeL"].fmeasure
        assert E.rouge_l(a, b) == pytest.approx(ref), (a, b)


def test_lexical_similarity_is_the_mean_over_pairs_with_duplicates():
    s = ["Paris", "Paris", "Lyon", "Paris France"]
    pairs = [(i, j) for i in range(4) for j in range(i + 1, 4)]
    ref = np.mean([E.rouge_l(s[i], s[j]) for i, j in pairs])
    assert E.lexical_similarity(s) == pytest.approx(ref)
    assert E.lexical_similarity(["a b"] * 5) == 1.0
    assert E.lexical_similarity(["", ""]) == 0.0  # empty answers agree with nothing
    assert E.lexical_similarity(s, "f1") == pytest.approx(np.mean([
        1.0 if {i, j} == {0, 1} else (2 / 3 if 3 in (i, j) and 2 not in (i, j) else 0.0) for i, j in pairs]))


# ---------------------------------------------------------------- semantic-entropy class probabilities


def test_semantic_class_probs_sum_to_one_when_samples_repeat():
    """lm-polygraph's users hit sums > 1 with duplicate samples; here every sample counts once."""
    ids = [0, 0, 0, 1, 0, 2, 2]  # the same answer drawn four times in cluster 0, twice in cluster 2
    lp = [-0.1, -0.1, -0.1, -2.0, -0.1, -1.0, -1.0]
    for probs in (E.semantic_class_probs(ids), E.semantic_class_probs(ids, lp)):
        assert sum(probs.values()) == pytest.approx(1.0, abs=1e-12)
    w = np.exp(lp)
    ref = {0: w[[0, 1, 2, 4]].sum() / w.sum(), 1: w[3] / w.sum(), 2: w[[5, 6]].sum() / w.sum()}
    got = E.semantic_class_probs(ids, lp)
    assert got == pytest.approx(ref)
    # semantic entropy is the entropy of exactly these probabilities
    assert AG.semantic_entropy_weighted(ids, lp) == pytest.approx(-sum(p * math.log(p) for p in ref.values()))
    assert AG.semantic_entropy(ids) == pytest.approx(-sum(p * math.log(p) for p in E.semantic_class_probs(ids).values()))


# ---------------------------------------------------------------- confidences and the cross-fitted map


def test_estimator_conf_is_a_decreasing_map_of_the_uncertainty_and_missing_evidence_is_none():
    ev_hi = E.Evidence(["x", "x", "x"], [0, 0, 0], [-0.1], [0.2], matrix=np.ones((3, 3)),
                       sample_token_logprobs=[[-0.1]] * 3)
    ev_lo = E.Evidence(["x", "y", "z"], [0, 1, 2], [-3.0], [4.0], matrix=np.eye(3),
                       sample_token_logprobs=[[-3.0]] * 3)
    for name in E.ESTIMATORS:
        hi, lo = E.estimator_conf(name, ev_hi), E.estimator_conf(name, ev_lo)
        assert 0 <= lo[1] < hi[1] <= 1, name
    assert E.estimator_conf("msp", E.Evidence(["x"], [0])) is None
    with pytest.raises(ValueError, match="unknown QA estimator"):
        E.estimator_conf("bleurt", ev_hi)


def test_crossfit_calibrate_uses_only_the_other_fold():
    rng = np.random.default_rng(0)
    x = rng.uniform(size=40)
    y = (rng.uniform(size=40) < x).astype(float)
    out = E.crossfit_calibrate(x, y)
    y2 = y.copy()
    y2[0::2] = 1 - y2[0::2]  # change fold 0's labels: fold 0's calibrated values must not move
    out2 = E.crossfit_calibrate(x, y2)
    assert np.allclose(out[0::2], out2[0::2]) and not np.allclose(out[1::2], out2[1::2])
    assert E.crossfit_calibrate(x, np.r_[np.ones(20), np.zeros(20)] * 0 + 1).tolist() == [1.0] * 40
    with pytest.raises(ValueError, match="≥ 4 documents"):
        E.crossfit_calibrate([0.1, 0.2], [0, 1])
