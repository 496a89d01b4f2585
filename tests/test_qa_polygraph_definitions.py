"""lm-polygraph's definitions offered as options (docs/QA_ESTIMATORS.md, differences 1–7), each run on fixed inputs
against values computed by hand from polygraph's definition (polygraph is not a dependency), plus the records'
conf_likelihood, the opt-in token log-probs, SAR and PRR against a continuous quality."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from semcal_eval.core.metrics import prr
from semcal_eval.harness.sampling import GeneratedText
from semcal_eval.qa import estimators as E
from semcal_eval.qa.agreement import agreement_matrix, score_question
from semcal_eval.qa.judges import get_judge

F1 = get_judge("f1")  # token-F1 ≥ 0.5: not transitive, which is where the definitions part


def _se(*counts):
    n = sum(counts)
    return -sum(c / n * math.log(c / n) for c in counts)


# ---------------------------------------------------------------- 1. clustering with or without the greedy answer


def test_cluster_greedy_false_clusters_the_samples_alone():
    # greedy "Barack Obama" agrees with both "Barack" and "Obama" (F1 2/3), which agree with each other not at all
    greedy, samples = "Barack Obama", ["Barack", "Obama", "Barack"]
    with_greedy = score_question("Who?", greedy, samples, ["Barack Obama"], F1)
    # semcal: the greedy answer represents cluster 0, so all three samples join it: one set, entropy 0
    assert with_greedy["cluster_ids"] == [0, 0, 0] and with_greedy["n_clusters"] == 1
    assert with_greedy["semantic_entropy"] == pytest.approx(0.0) and with_greedy["conf"] == 1.0
    # polygraph: "Barack" represents class 0, "Obama" opens class 1, "Barack" joins class 0
    alone = score_question("Who?", greedy, samples, ["Barack Obama"], F1, cluster_greedy=False)
    assert alone["cluster_ids"] == [0, 1, 0] and alone["n_clusters"] == 2 and alone["cluster_greedy"] is False
    assert alone["semantic_entropy"] == pytest.approx(_se(2, 1))  # −(2/3 ln 2/3 + 1/3 ln 1/3) = 0.636514
    assert alone["semantic_entropy"] == pytest.approx(0.636514, abs=1e-6)
    assert alone["conf_entropy"] == pytest.approx(1 - 0.636514 / math.log(3), abs=1e-6)
    # the greedy answer is placed afterwards in the oldest class whose representative it agrees with: class 0
    assert alone["greedy_cluster"] == 0 and alone["conf"] == pytest.approx(2 / 3)


def test_cluster_greedy_false_greedy_in_no_class_has_confidence_zero():
    rec = score_question("Who?", "Trump", ["Barack", "Obama"], ["Barack Obama"], F1, cluster_greedy=False)
    assert rec["cluster_ids"] == [0, 1] and rec["greedy_cluster"] == 2 and rec["conf"] == 0.0
    assert score_question("Who?", "", ["Barack"], ["x"], F1, cluster_greedy=False)["conf"] == 0.0


def test_num_sets_connected_components_is_polygraphs_numsemsets():
    # the chain "Barack" ~ "Barack Obama" ~ "Obama" (F1 2/3 each) with "Barack" ≁ "Obama" (F1 0)
    samples = ["Barack", "Barack Obama", "Obama"]
    W = agreement_matrix("Who?", samples, F1)
    assert W.tolist() == [[1, 1, 0], [1, 1, 1], [0, 1, 1]]
    # polygraph: one connected component; semcal's representative clustering: "Obama" ≁ "Barack" (the rep)
    assert E.num_semantic_sets_components(W) == 1
    ids = score_question("Who?", "Barack", samples, ["x"], F1, cluster_greedy=False)["cluster_ids"]
    assert E.num_semantic_sets(ids) == 2
    # a one-way agreement is no edge (polygraph multiplies W by its transpose)
    assert E.num_semantic_sets_components([[1, 1], [0, 1]]) == 2
    ev = E.Evidence(samples, ids, matrix=W)
    assert E.estimator_conf("num_sets_cc", ev) == (1.0, 1.0)


# ---------------------------------------------------------------- 2. stemmed lexical similarity


def test_lexsim_stem_is_the_mean_pairwise_stemmed_rouge_l():
    samples = ["running dogs", "the dog runs", "dogs"]
    # Porter stems of tokens longer than 3 characters: [run, dog], [the, dog, run], [dog]; F = 2PR/(P+R) with
    # P = LCS/|pred|, R = LCS/|ref|; LCS 1 for every pair: F(a,b) = 2·(1/2·1/3)/(5/6) = 0.4, F(a,c) = 2/3,
    # F(b,c) = 2·(1/3·1)/(4/3) = 0.5
    assert E.rouge_l_stemmed(samples[0], samples[1]) == pytest.approx(0.4)
    assert E.lexical_similarity(samples, "rougeL_stem") == pytest.approx((0.4 + 2 / 3 + 0.5) / 3)
    # semcal's unstemmed ROUGE-L over SQuAD tokens: [running, dogs], [dog, runs], [dogs]: only (a, c) overlaps
    assert E.lexical_similarity(samples, "rougeL") == pytest.approx((0 + 2 / 3 + 0) / 3)
    with pytest.raises(ValueError, match="rougeL_stem"):
        E.lexical_similarity(samples, "bleu")


# ---------------------------------------------------------------- 3. P(True): polygraph's prompt


def test_ptrue_polygraph_prompt_is_polygraphs_text():
    from semcal_eval.qa.ptrue import ptrue_prompt_polygraph

    expected = ("Question: Q: Who wrote Emma?\nA:\n Possible answer:Jane Austen\n Is the possible answer:\n"
                " (A) True\n (B) False\n The possible answer is:")
    assert ptrue_prompt_polygraph("Q: Who wrote Emma?\nA:", "Jane Austen") == expected


@pytest.mark.slow
def test_ptrue_polygraph_is_the_unnormalised_probability_of_true(semsoft_lm):
    import torch

    from semcal_eval.qa.ptrue import PTrue, ptrue_prompt_polygraph

    tok, model = semsoft_lm.tokenizer, semsoft_lm.model
    pt = PTrue(model, tok, style="polygraph")
    p = pt.score("Q: What is the capital of France?\nA:", "Paris", ["ignored"])
    # a different path to the same number: one greedy step of generate(), its raw logits, softmax over the vocab
    enc = tok(ptrue_prompt_polygraph("Q: What is the capital of France?\nA:", "Paris"), return_tensors="pt",
              add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=1, do_sample=False, output_logits=True,
                             return_dict_in_generate=True, pad_token_id=tok.eos_token_id)
    true_id = tok("True", add_special_tokens=False)["input_ids"][0]
    assert p == pytest.approx(float(out.logits[0][0].double().softmax(-1)[true_id]), rel=1e-4)
    assert 0 < p < 1


# ---------------------------------------------------------------- 4. PRR: degenerate cases, ties, continuous quality


def _polygraph_prr(uncertainty, quality):
    """polygraph's PredictionRejectionArea ratio, written from its definition: stable argsort of the uncertainty
    (ties by input order), mean quality of the k retained, averaged over k = 1..n; oracle = −quality;
    random = the mean quality (the limit of its shuffles)."""
    q = np.asarray(quality, float)

    def area(u):
        s = q[np.argsort(u, kind="stable")]
        return np.mean(np.cumsum(s) / np.arange(1, len(s) + 1))

    return (area(np.asarray(uncertainty, float)) - q.mean()) / (area(-q) - q.mean())


def test_prr_quality_by_hand_and_against_polygraphs_definition():
    conf, q = [0.9, 0.5, 0.1], [0.2, 1.0, 0.6]
    # retained means 0.2, 0.6, 0.6 → 1.4/3; oracle 1, 0.8, 0.6 → 0.8; random 0.6 → (1.4/3 − 0.6)/0.2 = −2/3
    assert E.prr_quality(conf, q) == pytest.approx(-2 / 3)
    assert E.prr_quality(conf, q) == pytest.approx(_polygraph_prr(-np.asarray(conf), q))
    # ties: semcal's value is polygraph's averaged over both input orders of the tied pair
    conf, q = [0.5, 0.5, 0.1], [0.0, 1.0, 0.5]
    both = (_polygraph_prr([-0.5, -0.5, -0.1], [0.0, 1.0, 0.5]) + _polygraph_prr([-0.5, -0.5, -0.1], [1.0, 0.0, 0.5])) / 2
    assert E.prr_quality(conf, q) == pytest.approx(both) == pytest.approx(0.0)
    # a 0/1 quality gives the binary PRR
    rng = np.random.default_rng(1)
    c, y = rng.integers(0, 5, 40) / 4, rng.integers(0, 2, 40)
    assert E.prr_quality(c, y) == pytest.approx(prr(y_true=y, y_prob=c))
    assert math.isnan(E.prr_quality([0.1, 0.9], [0.5, 0.5]))  # every quality equal: undefined


def test_prr_degenerate_cases_are_nan_and_a_constant_estimator_scores_zero():
    # polygraph returns 0.5 when every answer is right or wrong; semcal says undefined
    with pytest.warns(Warning):
        assert math.isnan(prr(y_true=[1, 1, 1], y_prob=[0.2, 0.5, 0.9]))
    with pytest.warns(Warning):
        assert math.isnan(prr(y_true=[0, 0, 0], y_prob=[0.2, 0.5, 0.9]))
    # polygraph gives ±1 for a constant estimator depending on input order; semcal its expectation, 0
    assert _polygraph_prr([0, 0, 0, 0], [1, 1, 0, 0]) == pytest.approx(1.0)
    assert _polygraph_prr([0, 0, 0, 0], [0, 0, 1, 1]) == pytest.approx(-1.0)
    assert prr(y_true=[1, 1, 0, 0], y_prob=[0.5] * 4) == pytest.approx(0.0)


def test_quality_rouge_l_is_the_best_reference():
    # "paris is capital" (article dropped) vs "paris is capital of france": LCS 3, P 1, R 3/5 → 0.75
    assert E.quality_rouge_l("Paris is the capital", ["Lyon", "Paris is the capital of France"]) == pytest.approx(0.75)


# ---------------------------------------------------------------- 5. min_new_tokens reaches generate()


def test_min_new_tokens_goes_to_greedy_and_samples():
    from tests.test_qa_tasks import _task

    task = _task("nq_open_semagree", split="validation", min_new_tokens=2, estimators=[], estimator_calibration=None)
    greedy, sample = task._gen_kwargs()
    assert greedy["min_new_tokens"] == 2 and sample["min_new_tokens"] == 2
    plain = _task("nq_open_semagree", split="validation", estimators=[], estimator_calibration=None)
    assert "min_new_tokens" not in plain._gen_kwargs()[0]
    with pytest.raises(ValueError, match="min_new_tokens"):
        _task("nq_open_semagree", split="validation", min_new_tokens=-1)


# ---------------------------------------------------------------- 6 and 7. conf_likelihood and token log-probs in the record


def _filter_record(resps, log_token_logprobs=False, **kw):
    from semcal_eval.qa.task import JudgeFilter

    doc = {"qa_question": "Capital of France?", "qa_golds": ["Paris"]}
    f = JudgeFilter("f1", num_samples=3, log_token_logprobs=log_token_logprobs, **kw)
    out = f.apply(resps, [doc, doc])
    return json.loads(out[1])


def test_conf_likelihood_from_the_samples_token_logprobs():
    g = GeneratedText(" Paris", [math.log(0.9), math.log(0.8)], [0.3, 0.2])
    s = [GeneratedText(" Paris", [math.log(0.5)]), GeneratedText(" Paris", [math.log(0.5), math.log(0.5)]),
         GeneratedText(" Lyon", [math.log(0.25)])]
    rec = _filter_record([[g], s])
    # sequence likelihoods 0.5, 0.25, 0.25 → p(Paris) = 0.75, p(Lyon) = 0.25
    se = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    assert rec["conf_likelihood"] == pytest.approx(1 - se / math.log(3))
    assert "conf_likelihood_absent" not in rec
    assert rec["rouge_l"] == 1.0 and "sample_token_logprobs" not in rec


def test_conf_likelihood_absent_says_why():
    rec = _filter_record([[" Paris"], [" Paris", " Paris", " Lyon"]])
    assert rec["conf_likelihood"] is None and "hf-semsoft" in rec["conf_likelihood_absent"]


def test_token_logprobs_are_logged_on_request():
    g = GeneratedText(" Paris", [-0.1234567891, -0.5], [0.25, 0.125])
    s = [GeneratedText(" Paris", [-0.7]), GeneratedText(" Lyon", [-1.0, -2.0]), GeneratedText(" Nice", [-3.0])]
    rec = _filter_record([[g], s], log_token_logprobs=True)
    assert rec["greedy_token_logprobs"] == [-0.123457, -0.5]
    assert rec["greedy_token_entropies"] == [0.25, 0.125]
    assert rec["sample_token_logprobs"] == [[-0.7], [-1.0, -2.0], [-3.0]]


# ---------------------------------------------------------------- SAR


def test_sar_by_hand():
    # sample 1: ln p = (ln .5, ln .1) with token relevance (3, 1) → weights (.75, .25):
    #   E1 = .75 ln 2 + .25 ln 10, p1 = exp(−E1); sample 2: ln p = (ln .25), p2 = .25
    p1 = math.exp(-(0.75 * math.log(2) + 0.25 * math.log(10)))
    S = [[1.0, 0.4], [0.4, 1.0]]
    t = 0.001
    r1, r2 = 0.4 * 0.25 / t, 0.4 * p1 / t
    want = (-math.log(r1 + p1) - math.log(r2 + 0.25)) / 2
    got = E.sar([[math.log(0.5), math.log(0.1)], [math.log(0.25)]], S, token_relevance=[[3, 1], [1]])
    assert got == pytest.approx(want)
    # uniform relevance: E_i is the mean token NLL
    p1u = math.exp(-(math.log(2) + math.log(10)) / 2)
    want_u = (-math.log(0.4 * 0.25 / t + p1u) - math.log(0.4 * p1u / t + 0.25)) / 2
    assert E.sar([[math.log(0.5), math.log(0.1)], [math.log(0.25)]], S) == pytest.approx(want_u)


def test_sar_row_needs_the_samples_token_logprobs():
    ev = E.Evidence(["Paris", "Lyon"], [0, 1])
    assert E.estimator_conf("sar", ev) is None
    ev.sample_token_logprobs = [[math.log(0.5)], [math.log(0.25)]]
    u, c = E.estimator_conf("sar", ev)
    # ROUGE-L("Paris", "Lyon") = 0: no sentence relevance, SAR = mean −ln p_i
    assert u == pytest.approx((math.log(2) + math.log(4)) / 2) and c == pytest.approx(1 / (1 + math.exp(u)))


# ---------------------------------------------------------------- end to end: real lm-eval, real hf-semsoft backend


@pytest.mark.slow
def test_end_to_end_records_carry_conf_likelihood_token_logprobs_and_the_new_rows(data_dir, semsoft_lm):
    from lm_eval import simple_evaluate

    from semcal_eval.qa.agreement import conf_likelihood_weighted
    from tests.test_qa_tasks import _tm

    meta = {"split": "validation", "num_samples": 3, "log_token_logprobs": True, "estimator_calibration": None,
            "estimators": ["sar", "num_sets_cc", "lexsim_stem"], "cluster_greedy": False}
    out = simple_evaluate(model=semsoft_lm, tasks=["nq_open_semagree"], task_manager=_tm(**meta), limit=2,
                          log_samples=True, random_seed=0, numpy_random_seed=0, torch_random_seed=0,
                          fewshot_random_seed=0, bootstrap_iters=0)
    every = out["samples"]["nq_open_semagree"]
    assert {s["filter"] for s in every} == {"judge_cover", "judge_f1", "sar", "num_sets_cc", "lexsim_stem"}
    assert all("prr" in s["metrics"] for s in every if s["filter"] == "sar")  # SAR has its evidence
    for s in (s for s in every if s["filter"] == "judge_f1"):
        rec = json.loads(s["filtered_resps"][1])
        assert rec["cluster_greedy"] is False and 0.0 <= rec["rouge_l"] <= 1.0
        assert len(rec["greedy_token_logprobs"]) == len(rec["greedy_token_entropies"]) >= 1
        assert len(rec["sample_token_logprobs"]) == 3 and all(rec["sample_token_logprobs"])
        # the logged per-token values rebuild the record's likelihood-weighted confidence (to their rounding)
        seq = [sum(lp) for lp in rec["sample_token_logprobs"]]
        assert rec["conf_likelihood"] == pytest.approx(conf_likelihood_weighted(rec["cluster_ids"], seq), abs=1e-4)
