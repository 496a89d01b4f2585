"""semcal_eval.qa (answers, agreement, verbalized, prompts): SQuAD scoring, clustering, semantic entropy,
confidences and the verbalised-confidence parser, against references computed by hand; and the package's
import boundaries (no lm-eval for the trainers, no cycle between the qa modules)."""

from __future__ import annotations

import ast
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from semcal_eval.qa.judges import ExactMatchJudge, F1Judge, Judge
from semcal_eval.qa import (
    EmptyGoldError,
    agreement_matrix,
    best_f1,
    clean_answer,
    cluster,
    conf_cluster_share,
    conf_entropy,
    conf_likelihood_weighted,
    exact_match,
    is_correct,
    normalize_answer,
    parse_verbalized,
    score_question,
    semantic_entropy,
    semantic_entropy_weighted,
    token_f1,
)

Q = "Who wrote Hamlet?"


class CountingJudge(Judge):
    """Wraps a real judge and records every pair it is asked (to check caching and the pair budget)."""

    name = "counting"

    def __init__(self, inner: Judge):
        self.inner, self.calls, self.pairs = inner, 0, []
        self.transitive = inner.transitive

    def equivalent(self, question, pairs):
        self.calls += 1
        self.pairs.extend(pairs)
        return self.inner.equivalent(question, pairs)


# ---------------------------------------------------------------- normalisation, EM, F1


@pytest.mark.parametrize(
    "raw,norm",
    [
        ("The Beatles", "beatles"),
        ("  A  tale of\tTwo   Cities. ", "tale of two cities"),
        ("U.S.A.", "usa"),
        ("Theatre", "theatre"),  # 'the' only as a whole word
        ("an", ""),
        ("", ""),
        ("Rock 'n' Roll!", "rock n roll"),
    ],
)
def test_normalize_answer(raw, norm):
    assert normalize_answer(raw) == norm


def test_em_and_f1_hand_values():
    assert exact_match("the  beatles!", ["Beatles", "Fab Four"]) == 1
    assert exact_match("Beatle", ["Beatles"]) == 0
    assert exact_match("Paris", "paris") == 1  # a single gold string is accepted
    # pred "william shakespeare" vs gold "shakespeare": P=1/2, R=1 -> 2/3
    assert token_f1("William Shakespeare", "Shakespeare") == pytest.approx(2 / 3)
    # repeated tokens count as a multiset: pred "new new york" vs "new york": common 2, P=2/3, R=1 -> 0.8
    assert token_f1("new new york", "New York") == pytest.approx(0.8)
    assert token_f1("", "") == 1.0 and token_f1("", "x") == 0.0 and token_f1("the", "x") == 0.0
    assert token_f1("a b", "c d") == 0.0
    assert best_f1("William Shakespeare", ["Marlowe", "Shakespeare", "W. Shakespeare"]) == pytest.approx(2 / 3)
    assert best_f1("William Shakespeare", ["Shakespeare", "william  Shakespeare."]) == 1.0
    assert best_f1("the bard", ["Shakespeare", "The Bard of Avon"]) == pytest.approx(2 * (1 * 1 / 3) / (1 + 1 / 3))


def test_is_correct_threshold_inclusive():
    # F1("barack obama", "michelle obama") = 0.5 exactly
    assert is_correct("Barack Obama", ["Michelle Obama"]) is True
    assert is_correct("Barack Obama", ["Michelle Obama"], threshold=0.51) is False
    assert is_correct("x", ["x"], threshold=1.0) is True
    with pytest.raises(ValueError, match="threshold"):
        is_correct("x", ["x"], threshold=0.0)


@pytest.mark.parametrize("golds", [[], [""], ["", "  "], ["the", "a"], [None]])
def test_all_empty_golds_raise_clear_error(golds):
    for fn in (exact_match, best_f1, is_correct):
        with pytest.raises(EmptyGoldError, match="no usable gold answer"):
            fn("Paris", golds)
    # one usable alias among empty ones is fine
    assert exact_match("Paris", ["", "Paris"]) == 1


def test_clean_answer():
    assert clean_answer("\n\n  Paris \nQ: next") == "Paris"
    assert clean_answer("   \n ") == ""


# ---------------------------------------------------------------- clustering


def test_cluster_hand_case_and_ids_in_order():
    answers = ["Shakespeare", "William Shakespeare", "Marlowe", "", "shakespeare.", "Christopher Marlowe", ""]
    assert cluster(Q, answers, F1Judge()) == [0, 0, 1, 2, 0, 1, 3]


def test_cluster_compares_with_representatives_only_and_caches():
    # Non-transitive chain under F1 >= 0.5: "x y" ~ "y z" ~ "z w" but "x y" !~ "z w".
    j = CountingJudge(F1Judge())
    ids = cluster(Q, ["x y", "y z", "z w", "y z", "x y"], j)
    # "z w" is compared with the representative "x y" only, not with the member "y z": a new cluster
    assert ids == [0, 0, 1, 0, 0]
    # pairs judged: (x y, y z), (x y, z w), then (z w, y z) for the 2nd "y z"; the last "x y" is free
    assert sorted(tuple(sorted(p)) for p in j.pairs) == [("x y", "y z"), ("x y", "z w"), ("y z", "z w")]
    assert j.calls == 3  # one batched call per answer that needs new pairs


def test_cluster_pair_budget_below_k_squared():
    answers = [f"answer {i % 4}" if i % 3 else f"other {i}" for i in range(20)]
    j = CountingJudge(ExactMatchJudge())
    ids = cluster(Q, answers, j)
    C = len(set(ids))
    assert len(j.pairs) <= len(answers) * C < len(answers) ** 2


def test_cluster_empty_and_degenerate_inputs():
    assert cluster(Q, [], F1Judge()) == []
    assert cluster(Q, ["", "  ", None], F1Judge()) == [0, 1, 2]  # each empty is its own cluster
    assert cluster(Q, ["Paris"], F1Judge()) == [0]


def test_agreement_matrix_pairs_and_clusters():
    answers = ["x y", "y z", "z w", ""]
    A = agreement_matrix(Q, answers, F1Judge())
    # all pairs judged directly (F1 is not transitive): the chain is visible
    ref = np.array([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 0], [0, 0, 0, 1]])
    np.testing.assert_array_equal(A, ref)
    B = agreement_matrix(Q, ["Paris", "paris!", "Lyon", ""], ExactMatchJudge())  # transitive: from clusters
    np.testing.assert_array_equal(B, [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
    assert (A == A.T).all() and A.dtype.kind == "i"


# ---------------------------------------------------------------- semantic entropy and confidences


def test_semantic_entropy_hand_values():
    assert semantic_entropy([3, 3, 3]) == 0.0
    assert semantic_entropy([0, 1]) == pytest.approx(math.log(2))
    # p = (2/5, 2/5, 1/5)
    ref = -(2 * 0.4 * math.log(0.4) + 0.2 * math.log(0.2))
    assert semantic_entropy([0, 1, 0, 2, 1]) == pytest.approx(ref)
    with pytest.raises(ValueError, match="empty"):
        semantic_entropy([])


def test_conf_entropy_and_share_hand_values():
    ids = [0, 1, 0, 2, 1]
    ref_se = -(2 * 0.4 * math.log(0.4) + 0.2 * math.log(0.2))
    assert conf_entropy(ids) == pytest.approx(1 - ref_se / math.log(5))
    assert conf_entropy([1, 1, 1, 1]) == 1.0
    assert conf_entropy([0, 1, 2, 3]) == pytest.approx(0.0, abs=1e-12)  # all disagree
    assert conf_cluster_share(0, ids) == pytest.approx(0.4)
    assert conf_cluster_share(2, ids) == pytest.approx(0.2)
    assert conf_cluster_share(7, ids) == 0.0  # greedy agrees with no sample
    assert conf_cluster_share(0, [0, 0, 0]) == 1.0


def test_k_equals_one():
    assert conf_cluster_share(0, [0]) == 1.0 and semantic_entropy([0]) == 0.0
    with pytest.raises(ValueError, match="K ≥ 2"):
        conf_entropy([0])
    with pytest.raises(ValueError, match="K ≥ 2"):
        conf_likelihood_weighted([0], [-1.0])


def test_likelihood_weighted_hand_values():
    ids = [0, 0, 1]
    lp = [math.log(0.5), math.log(0.1), math.log(0.4)]
    # p(c0) = 0.6 / 1.0, p(c1) = 0.4
    ref = -(0.6 * math.log(0.6) + 0.4 * math.log(0.4))
    assert semantic_entropy_weighted(ids, lp) == pytest.approx(ref)
    assert conf_likelihood_weighted(ids, lp) == pytest.approx(1 - ref / math.log(3))
    # unnormalised log-probs give the same answer (normalised over the samples)
    assert semantic_entropy_weighted(ids, [x - 30 for x in lp]) == pytest.approx(ref)
    # equal log-probs reduce to the discrete semantic entropy
    assert semantic_entropy_weighted([0, 1, 0, 2, 1], [-2.0] * 5) == pytest.approx(semantic_entropy([0, 1, 0, 2, 1]))
    with pytest.raises(ValueError, match="one log-prob per sample"):
        semantic_entropy_weighted(ids, [0.0])
    with pytest.raises(ValueError, match="finite"):
        semantic_entropy_weighted(ids, [0.0, float("nan"), 0.0])


# ---------------------------------------------------------------- verbalised confidence


@pytest.mark.parametrize(
    "text,answer,conf",
    [
        ("<think>Hamlet is by...</think><answer>William Shakespeare</answer> <confidence>0.8</confidence>",
         "William Shakespeare", 0.8),
        ("<answer>\n Paris\n</answer><analysis>sure</analysis><confidence> 1 </confidence>", "Paris", 1.0),
        ("<answer>Paris</answer><confidence>0.0</confidence>", "Paris", 0.0),
        ("Answer: Paris\nConfidence: 0.75", "Paris", 0.75),
        ("Paris\nConfidence: 75%", "Paris", 0.75),
        ("Paris (confidence = .9)", "Paris (", 0.9),
        ("Paris\nConfidence level: 100%", "Paris", 1.0),
        ("Paris. Confidence: 80", "Paris.", None),  # bare 80: out of [0, 1], not guessed as a percentage
        ("Paris\nConfidence: 1.5", "Paris", None),
        ("Paris\nConfidence: -0.2", "Paris", None),
        ("Paris\nConfidence: high", "Paris", None),
        ("Paris", "Paris", None),
        ("", "", None),
        ("<answer>Lyon</answer> <confidence>0.2</confidence> <answer>Paris</answer> <confidence>0.7</confidence>",
         "Paris", 0.7),  # last tags win
    ],
)
def test_parse_verbalized(text, answer, conf):
    a, c = parse_verbalized(text)
    assert a == answer
    assert c == (None if conf is None else pytest.approx(conf))


# ---------------------------------------------------------------- one question end to end


def test_score_question_record():
    rec = score_question(
        Q, "William Shakespeare",
        ["Shakespeare", "Marlowe", "", "william shakespeare", "Marlowe"],
        ["Shakespeare", "The Bard"], F1Judge(),
    )
    assert rec["cluster_ids"] == [0, 1, 2, 0, 1]  # greedy opened cluster 0
    assert rec["greedy_cluster"] == 0
    assert rec["conf"] == pytest.approx(2 / 5)
    # default correctness is the cover judge (semcal_eval.qa.grading): in a bare answer "William" beside the gold
    # "Shakespeare" reads like a second candidate ("Lyon Paris"), so it is wrong, as under the strict rule of task
    # version 2 (a first name before a surname-only gold is the cover judge's known miss: docs/JUDGE.md);
    # token-F1 (2/3 ≥ ½) accepts it
    assert rec["correct"] == 0 and rec["em"] == 0 and rec["f1"] == pytest.approx(2 / 3)
    docs = ["Shakespeare", "Marlowe", "", "william shakespeare", "Marlowe"]
    for rule, want in (("f1", 1), ("strict", 0)):
        other = score_question(Q, "William Shakespeare", docs, ["Shakespeare", "The Bard"], F1Judge(), correctness=rule)
        assert other["correct"] == want
        assert other["grader"] == rule  # the record names the rule that made its label
        assert ({k: v for k, v in other.items() if k not in ("correct", "grader")}
                == {k: v for k, v in rec.items() if k not in ("correct", "grader")})
    # a dressed gold alias is correct under the strict rule: case, punctuation, a lead-in
    bard = score_question(Q, "The answer is: the Bard!", ["x", "y"], ["Shakespeare", "The Bard"], F1Judge())
    assert bard["correct"] == 1 and bard["em"] == 0
    ref_se = -(2 * 0.4 * math.log(0.4) + 0.2 * math.log(0.2))
    assert rec["semantic_entropy"] == pytest.approx(ref_se)
    assert rec["conf_entropy"] == pytest.approx(1 - ref_se / math.log(5))
    assert rec["conf_likelihood"] is None and rec["n_clusters"] == 3
    lp = score_question(Q, "Marlowe", ["Marlowe", "Shakespeare"], ["Shakespeare"], F1Judge(),
                        seq_logprobs=[math.log(0.9), math.log(0.1)])
    ref = -(0.9 * math.log(0.9) + 0.1 * math.log(0.1))
    assert lp["conf_likelihood"] == pytest.approx(1 - ref / math.log(2)) and lp["correct"] == 0
    assert lp["conf"] == pytest.approx(0.5)


def test_score_question_empty_greedy_and_judge_correctness():
    rec = score_question(Q, "", ["Shakespeare", "Shakespeare"], ["Shakespeare"], F1Judge())
    assert rec["conf"] == 0.0 and rec["correct"] == 0
    assert rec["greedy_cluster"] == 0 and rec["cluster_ids"] == [1, 1]  # the empty greedy is its own cluster
    j = score_question(Q, "the Bard of Avon", ["x", "y"], ["Shakespeare", "bard of avon"], ExactMatchJudge(),
                       correctness="judge")
    assert j["correct"] == 1
    with pytest.raises(ValueError, match="correctness"):
        score_question(Q, "x", ["x", "y"], ["x"], F1Judge(), correctness="bleu")
    with pytest.raises(EmptyGoldError):
        score_question(Q, "x", ["x", "y"], [""], F1Judge())
    one = score_question(Q, "x", ["x"], ["x"], F1Judge())  # K = 1: share defined, entropy not
    assert one["conf"] == 1.0 and one["conf_entropy"] is None


# ---------------------------------------------------------------- import boundaries

QA_DIR = Path(__file__).resolve().parents[1] / "semcal_eval" / "qa"


def test_pure_api_does_not_import_lm_eval():
    """The trainers import the pure QA API (and the prompts) without lm-eval: a fresh interpreter checks it."""
    code = "import sys, trainers.rewards, trainers.data; assert 'lm_eval' not in sys.modules, 'lm_eval imported'"
    run = subprocess.run([sys.executable, "-c", code], cwd=QA_DIR.parents[1], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]


def _qa_imports(module: str) -> set[str]:
    """The semcal_eval.qa modules that ``module`` imports at run time (TYPE_CHECKING blocks excluded)."""
    tree = ast.parse((QA_DIR / f"{module}.py").read_text())
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and getattr(node.test, "id", None) == "TYPE_CHECKING" for n in ast.walk(node)}
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and id(node) not in typing_only:
            if node.level == 1:
                out.add(node.module)
            elif (node.module or "").startswith("semcal_eval.qa."):
                out.add(node.module.rsplit(".", 1)[1])
    return out


def test_qa_modules_depend_downward_only():
    """answers <- cover <- grading <- judges <- learned (named by path in judges' registry) <- labels (a
    record's label); agreement on answers and labels; verbalized on answers; task on top; nothing imports task or
    forms a cycle."""
    assert _qa_imports("answers") == set()
    assert _qa_imports("prompts") == set()
    assert _qa_imports("cover") == {"answers"}
    assert _qa_imports("grading") == {"answers", "cover"}
    assert _qa_imports("labels") == {"answers", "grading", "judges"}
    assert _qa_imports("learned") == {"answers", "cover", "grading", "judges", "yesno"}
    assert _qa_imports("judges") == {"answers", "grading", "yesno"}
    assert _qa_imports("yesno") == set()
    assert _qa_imports("verbalized") == {"answers"}
    assert _qa_imports("agreement") == {"answers", "labels"}
    assert _qa_imports("estimators") == {"answers"}
    assert _qa_imports("ptrue") == set()
    assert "task" not in _qa_imports("__init__")
    assert not (QA_DIR / "_legacy.py").exists()


# ---------------------------------------------------------------- issue 23: what the backend logs for the estimators


@pytest.mark.slow
def test_greedy_row_logs_token_logprobs_and_full_entropies(semsoft_lm):
    """The shared-prefix decoder's greedy row logs ln p of each token and H of the full next-token
    distribution; both equal a fresh forward pass over prompt + answer (the definitions), to float32 noise."""
    import torch

    from semcal_eval.harness.sampling import GeneratedText, RowSampling, generate_from_prefix

    model, tok = semsoft_lm.model, semsoft_lm.tokenizer
    ids = tok("Q: What is the capital of France?\nA:", return_tensors="pt")["input_ids"]
    res, _ = generate_from_prefix(model, ids, [RowSampling(False), RowSampling(True, 1.0, 0, 1.0)], max_new_tokens=6,
                                  generator=torch.Generator().manual_seed(0))
    g = res[0]
    assert len(g.entropies) == len(g.logprobs) == len(g.tokens) and res[1].entropies == []
    full = torch.cat([ids, torch.tensor([g.tokens[:-1]])], dim=1)
    with torch.no_grad():
        logp = torch.log_softmax(model(full).logits[0, ids.shape[1] - 1:].double(), -1)
    ref_lp = logp[torch.arange(len(g.tokens)), torch.tensor(g.tokens)]
    ref_h = -(logp.exp() * logp).sum(-1)
    assert np.allclose(g.logprobs, ref_lp.numpy(), atol=1e-4)
    assert np.allclose(g.entropies, ref_h.numpy(), atol=1e-3)
    t = GeneratedText(" Paris", g.logprobs, g.entropies)
    import copy
    import pickle

    for c in (copy.deepcopy(t), pickle.loads(pickle.dumps(t))):
        assert c == " Paris" and c.token_logprobs == t.token_logprobs and c.token_entropies == t.token_entropies


@pytest.mark.slow
def test_ptrue_is_the_renormalised_option_probability(semsoft_lm):
    import torch

    from semcal_eval.qa.ptrue import PTrue, ptrue_prompt

    pt = PTrue(semsoft_lm.model, semsoft_lm.tokenizer)
    tok = semsoft_lm.tokenizer
    p = pt.score("What is the capital of France?", "Paris", ["Paris", "Lyon", "Paris"])
    prompt = ptrue_prompt("What is the capital of France?", "Paris", ["Paris", "Lyon", "Paris"])
    assert prompt.count("Paris\n") == 2  # repeated samples are listed once, then the possible answer
    enc = tok(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        z = semsoft_lm.model(**enc).logits[0, -1].double().softmax(-1)
    a, b = tok.encode("A", add_special_tokens=False)[0], tok.encode("B", add_special_tokens=False)[0]
    assert p == pytest.approx(float(z[a] / (z[a] + z[b])), abs=1e-5) and 0 < p < 1
