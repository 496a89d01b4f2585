"""Semantic Softmax on the real SmolLM2-135M: math against a numpy reference, the baseline against lm-eval's
loglikelihood, τ sweeps, label collisions and every bad input of issue 3."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from lm_eval.api.instance import Instance

from semcal_eval.semsoft.scoring import LabelTrie, SemSoftError, semantic_softmax, validate_hparams

LABELS = ["admiration", "amusement", "anger", "joy", "sadness", "neutral", "fear"]
PROMPTS = [
    "Comment: I love this so much, thank you!\nEmotion:",
    "Comment: This is terrible and I hate it.\nEmotion:",
    "Comment: haha that's hilarious\nEmotion:",
]


def req(ctx, labels=LABELS, tau=0.2, top_k=50, mode="first", doc_id=0):
    spec = {"choices": [" " + l for l in labels], "top_k": top_k, "tau": tau, "label_embedding": mode}
    return Instance("semsoft", {}, (ctx, spec), 0, ("unit", doc_id, 1))


def numpy_reference(lm, ctx, labels, tau, top_k, mode="first"):
    """Independent numpy implementation of the paper's formula, straight from the full logits."""
    ids = lm.tok_encode(ctx)
    with torch.no_grad():
        logits = lm.model(torch.tensor([ids])).logits[0, -1].double().numpy()
    V = len(lm.tokenizer)
    logits = logits[:V]
    p = np.exp(logits - logits.max())
    p /= p.sum()
    top = np.argsort(-p, kind="stable")[:top_k]
    E = lm.model.get_output_embeddings().weight.detach().double().numpy()
    lab_rows = []
    for l in labels:
        toks = lm.tok_encode(ctx + " " + l)[len(ids):]
        rows = E[toks] if mode == "mean" else E[toks[:1]]
        lab_rows.append(rows.mean(axis=0))
    El = np.array(lab_rows)
    El /= np.linalg.norm(El, axis=1, keepdims=True)
    Ev = E[top] / np.linalg.norm(E[top], axis=1, keepdims=True)
    w = np.maximum(0.0, Ev @ El.T - tau)
    mass = p[top] @ w
    constrained_first = np.array([p[lm.tok_encode(ctx + " " + l)[len(ids)]] for l in labels])
    return mass / mass.sum(), constrained_first / constrained_first.sum()


@pytest.mark.parametrize("mode", ["first", "mean"])
def test_semsoft_matches_numpy_reference(semsoft_lm, mode):
    labels = LABELS + ["annoyance"]  # multi-token: ' annoy' 'ance'
    for ctx in PROMPTS[:2]:
        (out,) = semsoft_lm.semsoft([req(ctx, labels, tau=0.2, top_k=100, mode=mode)], disable_tqdm=True)
        ref_sem, ref_base = numpy_reference(semsoft_lm, ctx, labels, 0.2, 100, mode)
        np.testing.assert_allclose(out.semsoft[0.2], ref_sem, atol=2e-5)
        np.testing.assert_allclose(out.baseline, ref_base, atol=2e-5)
        assert not out.fallback[0.2]
        assert 0 < out.topk_mass <= 1


def test_baseline_equals_lm_eval_loglikelihood_for_single_token_labels(semsoft_lm):
    for ctx in PROMPTS:
        for l in LABELS:
            assert len(semsoft_lm.encode_choices(ctx, [" " + l])[1][0]) == 1, l
        (out,) = semsoft_lm.semsoft([req(ctx)], disable_tqdm=True)
        lls = semsoft_lm.loglikelihood(
            [Instance("loglikelihood", {}, (ctx, " " + l), i) for i, l in enumerate(LABELS)], disable_tqdm=True
        )
        lls = np.array([ll for ll, _ in lls])
        ref = np.exp(lls - lls.max())
        np.testing.assert_allclose(out.baseline, ref / ref.sum(), atol=1e-5)


def test_tau_sweep_from_one_pass_equals_separate_runs(semsoft_lm):
    taus = [0.0, 0.1, 0.2, 0.35]
    (swept,) = semsoft_lm.semsoft([req(PROMPTS[0], tau=taus)], disable_tqdm=True)
    for t in taus:
        (single,) = semsoft_lm.semsoft([req(PROMPTS[0], tau=t)], disable_tqdm=True)
        np.testing.assert_allclose(swept.semsoft[t], single.semsoft[t], atol=1e-6)
        np.testing.assert_allclose(swept.baseline, single.baseline, atol=1e-6)


def test_batched_equals_one_by_one(semsoft_lm):
    """Right-padding plus logits_to_keep must not change a document's answer."""
    semsoft_lm_bs = semsoft_lm.batch_size
    batched = semsoft_lm.semsoft([req(p, doc_id=i) for i, p in enumerate(PROMPTS)], disable_tqdm=True)
    for i, p in enumerate(PROMPTS):
        (one,) = semsoft_lm.semsoft([req(p, doc_id=i)], disable_tqdm=True)
        np.testing.assert_allclose(batched[i].semsoft[0.2], one.semsoft[0.2], atol=1e-5)
        np.testing.assert_allclose(batched[i].baseline, one.baseline, atol=1e-5)
    assert semsoft_lm.batch_size == semsoft_lm_bs


def test_first_token_collisions_are_reported_and_separated(semsoft_lm):
    """Two labels sharing a first token: reported, and the baseline splits them by their next token exactly as
    lm-eval's full-label log-likelihoods do (their ratio), instead of merging them."""
    ctx = PROMPTS[1]
    labels = ["annoyance", "annoy", "joy"]  # ' annoy' is a prefix token of ' annoyance' → need distinct labels
    tok = semsoft_lm.encode_choices(ctx, [" " + l for l in labels])[1]
    if tok[1] == tok[0][:1]:  # ' annoy' alone is a strict prefix of ' annoyance': a documented error
        with pytest.raises(SemSoftError, match="prefix"):
            semsoft_lm.semsoft([req(ctx, labels)], disable_tqdm=True)
    labels = ["annoyance", "annoyingly", "joy"]  # ' annoy'+'ance' vs ' annoy'+'ingly'
    tok = semsoft_lm.encode_choices(ctx, [" " + l for l in labels])[1]
    assert tok[0][0] == tok[1][0] and tok[0][1] != tok[1][1], tok
    (out,) = semsoft_lm.semsoft([req(ctx, labels)], disable_tqdm=True)
    assert out.collisions == [["annoyance", "annoyingly"]]
    lls = semsoft_lm.loglikelihood(
        [Instance("loglikelihood", {}, (ctx, " " + l), i) for i, l in enumerate(labels[:2])], disable_tqdm=True
    )
    if len(tok[0]) == 2 and len(tok[1]) == 2:
        np.testing.assert_allclose(np.log(out.baseline[0] / out.baseline[1]), lls[0][0] - lls[1][0], atol=1e-4)
    assert out.baseline[0] != pytest.approx(out.baseline[1])


def test_fallback_when_every_weight_is_zero():
    """τ just below 1: no top-K token is that close to any label → baseline used, flagged, never NaN."""
    torch.manual_seed(0)
    W = torch.randn(50, 8)
    logits = torch.randn(2, 50)
    emb = W[[3, 7]] / W[[3, 7]].norm(dim=-1, keepdim=True)
    out = semantic_softmax(logits, W, emb, [0.999], top_k=5)
    assert out["fallback"].all()
    assert torch.isfinite(out["p_sem"]).all()
    from semcal_eval.semsoft.scoring import apply_fallback

    base = torch.tensor([[0.3, 0.7], [0.6, 0.4]])
    filled = apply_fallback(out["p_sem"][:, :], out["fallback"], base)
    torch.testing.assert_close(filled[0], base)


def test_padded_vocab_rows_are_masked():
    """Rows past vocab_valid (Qwen's dummy rows) never enter the top-K, however large their logits."""
    W = torch.eye(6)
    logits = torch.tensor([[0.0, 0.0, 1.0, 0.0, 50.0, 50.0]])
    emb = W[[4, 2]]
    out = semantic_softmax(logits, W, emb, [0.5], top_k=2, vocab_valid=4)
    assert set(out["topk_ids"][0].tolist()) <= {0, 1, 2, 3}
    assert out["p_sem"][0, 0, 1] == pytest.approx(1.0)


# -- bad input ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tau", [1.0, 1.5, -1.01, float("nan"), "x"])
def test_bad_tau(tau):
    with pytest.raises(SemSoftError, match="tau"):
        validate_hparams(tau, 10, 100)


@pytest.mark.parametrize("k", [0, -3, 101, 2.5, True])
def test_bad_top_k(k):
    with pytest.raises(SemSoftError, match="top_k"):
        validate_hparams(0.2, k, 100)


def test_bad_k_against_the_real_vocab(semsoft_lm):
    with pytest.raises(SemSoftError, match="top_k=49153"):
        semsoft_lm.semsoft([req(PROMPTS[0], top_k=49153)], disable_tqdm=True)


@pytest.mark.parametrize(
    "labels,msg",
    [([], "empty"), (["joy", "joy"], "twice"), (["joy", "  "], "empty"), (["joy"], "at least 2")],
)
def test_bad_labels(semsoft_lm, labels, msg):
    spec = {"choices": labels, "top_k": 10, "tau": 0.2, "label_embedding": "first"}
    with pytest.raises(SemSoftError, match=msg):
        semsoft_lm.semsoft([Instance("semsoft", {}, (PROMPTS[0], spec), 0)], disable_tqdm=True)


def test_label_that_tokenises_to_nothing():
    with pytest.raises(SemSoftError, match="tokenises to nothing"):
        LabelTrie([[5], []])


def test_labels_with_identical_tokens():
    with pytest.raises(SemSoftError, match="identical"):
        LabelTrie([[5, 6], [5, 6], [7]])


def test_nan_logits_name_the_document(semsoft_lm):
    handle = semsoft_lm.model.register_forward_hook(
        lambda mod, inp, out: out.__class__(logits=out.logits * float("nan"))
    )
    try:
        with pytest.raises(SemSoftError, match="document 17"):
            semsoft_lm.semsoft([req(PROMPTS[0], doc_id=17)], disable_tqdm=True)
    finally:
        handle.remove()
    (ok,) = semsoft_lm.semsoft([req(PROMPTS[0])], disable_tqdm=True)
    assert np.isfinite(ok.baseline).all()


def test_request_and_response_are_typed_with_defaults_in_one_place(semsoft_lm):
    from semcal_eval.semsoft.spec import SemSoftParams, SemSoftRequest, SemSoftResponse

    # a request missing a key is an error, never a silently restated default
    spec = {"choices": [" joy", " anger"], "top_k": 10, "tau": 0.2}
    with pytest.raises(SemSoftError, match=r"lacks \['label_embedding'\]"):
        semsoft_lm.semsoft([Instance("semsoft", {}, (PROMPTS[0], spec), 0)], disable_tqdm=True)
    p = SemSoftParams.from_metadata({})
    request = SemSoftRequest(choices=(" joy", " anger"), taus=p.taus, top_k=p.top_k, label_embedding=p.label_embedding)
    assert SemSoftRequest.from_dict(request.to_dict()) == request
    (resp,) = semsoft_lm.semsoft([Instance("semsoft", {}, (PROMPTS[0], request.to_dict()), 0)], disable_tqdm=True)
    assert isinstance(resp, SemSoftResponse)  # parsed once, in the backend
    r = SemSoftResponse.from_dict(resp.to_dict())  # the logged form reads back to the same response
    assert r == resp and r.probs("semsoft", p.tau) == resp.semsoft[0.2]
    assert set(resp.to_dict()["semsoft"]) == {"0.2"}  # typed float keys in memory, strings only in the JSON
    with pytest.raises(SemSoftError, match="was not computed"):
        r.probs("semsoft", 0.35)
