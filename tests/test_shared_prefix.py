"""Shared-prefix sampling of the QA tasks (semcal_eval.harness.sampling, docs/SAMPLING.md): routing of the
requests, greedy answers equal to stock HFLM's, sampled tokens' log-probabilities equal to a fresh forward
pass's, stop strings and max_gen_toks, seeds, and an end-to-end lm-eval run on hf-semsoft. No timing here:
benchmarks/bench_qa_sampling.py measures the speed."""

from __future__ import annotations

import json

import pytest
import torch

from semcal_eval import TASKS_DIR
from semcal_eval.harness.sampling import (
    QAGroup,
    RowSampling,
    find_qa_groups,
    generate_from_prefix,
    group_seed,
    sampling_logprobs,
)

# ---------------------------------------------------------------- request routing (no model)


def _inst(ctx, kw, doc_id=0, repeats=1, task="t"):
    from lm_eval.api.instance import Instance

    return Instance(request_type="generate_until", doc={}, arguments=(ctx, kw), idx=0,
                    metadata=(task, doc_id, repeats))


GREEDY = {"until": ["\n"], "max_gen_toks": 8, "do_sample": False}
SAMPLE = {"until": ["\n"], "max_gen_toks": 8, "do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": 0}


def _expand(instances):
    return [r for inst in instances for r in [inst] * inst.repeats]


def test_qa_shape_is_grouped_and_everything_else_is_left_to_hflm():
    g0, s0 = _inst("a", GREEDY, 0), _inst("a", SAMPLE, 0, repeats=3)
    g1, s1 = _inst("b", GREEDY, 1), _inst("b", SAMPLE, 1, repeats=2)
    lone_greedy = _inst("c", GREEDY, 2)  # verbalized mode: one greedy answer
    lone_sample = _inst("d", SAMPLE, 3, repeats=4)  # a stock repeats task (no greedy partner)
    odd_g, odd_s = _inst("e", GREEDY, 4), _inst("e", {**SAMPLE, "repetition_penalty": 1.3}, 4, repeats=2)
    diff_g, diff_s = _inst("f", GREEDY, 5), _inst("f", {**SAMPLE, "until": ["."]}, 5, repeats=2)
    reqs = _expand([g0, s0, lone_greedy, g1, s1, lone_sample, odd_g, odd_s, diff_g, diff_s])
    groups, rest = find_qa_groups(reqs, 256)
    assert [(g.context, g.greedy_pos, g.sample_pos) for g in groups] == [("a", 0, [1, 2, 3]), ("b", 5, [6, 7])]
    assert groups[0].sample == RowSampling(True, 1.0, 0, 1.0) and not groups[0].greedy.do_sample
    assert rest == [4] + list(range(8, len(reqs)))  # everything else, in order, untouched


def test_unset_sampling_keys_follow_generate_defaults():
    # generate(): request > model generation_config > transformers' defaults (top_k 50!)
    greedy = {"until": ["\n"], "do_sample": False}
    reqs = _expand([_inst("a", greedy), _inst("a", {"until": ["\n"], "do_sample": True, "temperature": 0.5}, repeats=2)])
    (g,), _ = find_qa_groups(reqs, 16, {"top_p": 0.9})
    assert g.sample == RowSampling(True, 0.5, 50, 0.9) and g.max_gen_toks == 16


def test_group_seed_depends_on_seed_and_question_only():
    a = QAGroup("ctx", {}, ["\n"], 8, 0, [1], RowSampling(False), RowSampling(True), "t", 3)
    b = QAGroup("ctx", {}, ["\n"], 8, 7, [8, 9], RowSampling(False), RowSampling(True), "t", 3)
    assert group_seed(1234, a) == group_seed(1234, b) != group_seed(0, a)
    assert group_seed(1234, a) != group_seed(1234, QAGroup("ctx", {}, [], 8, 0, [1], a.greedy, a.sample, "t", 4))


def test_row_sampling_checks():
    with pytest.raises(ValueError, match="temperature"):
        RowSampling(True, 0.0)
    with pytest.raises(ValueError, match="top_p"):
        RowSampling(True, 1.0, 0, 0.0)
    lp = sampling_logprobs(torch.tensor([[0.0, 1.0, 2.0, 3.0]]), RowSampling(True, 1.0, 2, 1.0))
    assert torch.isinf(lp[0, :2]).all() and torch.allclose(lp[0, 2:].exp().sum(), torch.tensor(1.0))


# ---------------------------------------------------------------- with SmolLM2-135M


@pytest.fixture(scope="module")
def lm(smollm2_path):
    import lm_eval.models  # noqa: F401  (lm-eval's registry first)

    from semcal_eval.semsoft.backend import SemSoftLM

    return SemSoftLM(pretrained=smollm2_path, dtype="float32", device="cpu", batch_size=1, sample_seed=1234)


def _qa_instances(n: int, k: int, **metadata):
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=str(TASKS_DIR), include_defaults=False,
                     metadata={"split": "validation", "num_samples": k, **metadata})
    task = tm.load(["nq_open_semagree"])["tasks"]["nq_open_semagree"]
    task.build_all_requests(limit=n, rank=0, world_size=1)
    return task.instances


def _stock(lm, reqs):
    """HFLM's own generate_until, one request per call (batch 1: no padding)."""
    from lm_eval.models.huggingface import HFLM

    return [HFLM.generate_until(lm, [r], disable_tqdm=True)[0] for r in reqs]


@pytest.mark.slow
def test_greedy_answers_equal_stock_hflm(data_dir, lm):
    instances = _qa_instances(4, 2)
    reqs = _expand(instances)
    out = lm.generate_until(reqs, disable_tqdm=True)
    greedy = [i for i, r in enumerate(reqs) if not r.args[1]["do_sample"]]
    assert len(greedy) == 4
    assert [out[i] for i in greedy] == _stock(lm, [reqs[i] for i in greedy])
    assert all(isinstance(s, str) for s in out)


@pytest.mark.slow
def test_routing_keeps_order_and_other_requests_take_the_stock_path(data_dir, lm):
    instances = _qa_instances(2, 2)
    plain = _inst("Q: What is the capital of France?\nA:", {"until": ["\n"], "max_gen_toks": 6, "do_sample": False},
                  doc_id=99, task="other")
    reqs = [plain, *_expand(instances)]
    out = lm.generate_until(reqs, disable_tqdm=True)
    assert out[0] == _stock(lm, [plain])[0]
    assert out[1] == _stock(lm, [reqs[1]])[0]  # the first question's greedy answer, in its place


@pytest.mark.slow
@pytest.mark.parametrize("spec", [RowSampling(True, 1.0, 0, 1.0), RowSampling(True, 0.7, 40, 0.9)],
                         ids=["plain", "warped"])
def test_sampled_logprobs_equal_a_fresh_forward_pass(data_dir, lm, spec):
    ids, _ = lm.tok_batch_encode([_qa_instances(1, 2)[0].args[0]])
    rows = [RowSampling(False)] + [spec] * 4
    gen = torch.Generator().manual_seed(0)
    results, cost = generate_from_prefix(lm.model, ids, rows, max_new_tokens=12, generator=gen)
    assert cost.prompt_tokens == ids.shape[1] and cost.generated_tokens == sum(len(r.tokens) for r in results)
    # finished rows leave the batch: every decode step feeds only the rows still running
    assert cost.decode_rows == sum(len(r.tokens) - 1 for r in results)
    L = ids.shape[1]
    for row, res in zip(rows, results):
        full = torch.cat([ids[0], torch.tensor(res.tokens)])[None]
        with torch.no_grad():
            logits = lm.model(input_ids=full, use_cache=False).logits[0, L - 1 : L - 1 + len(res.tokens)]
        fresh = sampling_logprobs(logits, row).gather(1, torch.tensor(res.tokens)[:, None]).squeeze(1)
        assert torch.isfinite(fresh).all()
        assert torch.allclose(torch.tensor(res.logprobs), fresh, atol=1e-4, rtol=0), (res.logprobs, fresh.tolist())
        if not row.do_sample:
            assert res.tokens == logits.argmax(-1).tolist()  # greedy = argmax of the fresh pass, every step


@pytest.mark.slow
def test_stop_strings_and_max_gen_toks(data_dir, lm):
    instances = _qa_instances(2, 3)
    # a common character as the stop string, and a budget of 4 tokens: both limits are reached
    for inst in instances:
        ctx, kw = inst.arguments
        inst.arguments = (ctx, {**kw, "until": ["e", "\n"], "max_gen_toks": 4})
    reqs = _expand(instances)
    out = lm.generate_until(reqs, disable_tqdm=True)
    assert all("e" not in s and "\n" not in s for s in out)
    greedy = [i for i, r in enumerate(reqs) if not r.args[1]["do_sample"]]
    assert [out[i] for i in greedy] == _stock(lm, [reqs[i] for i in greedy])
    # the loop stops a row at the first token whose text holds a stop string, or at max_new_tokens
    ids, _ = lm.tok_batch_encode([instances[0].args[0]])

    def stopped(toks):
        return any(s in lm.tok_decode(toks, skip_special_tokens=False) for s in ("e", "\n"))

    results, _ = generate_from_prefix(lm.model, ids, [RowSampling(True)] * 8, max_new_tokens=4,
                                      is_stopped=stopped, eos_token_ids=[lm.eot_token_id],
                                      generator=torch.Generator().manual_seed(1))
    assert {r.finish for r in results} <= {"stop", "length", "eos"} and len({r.finish for r in results}) >= 1
    for r in results:
        assert 1 <= len(r.tokens) <= 4
        assert not stopped(r.tokens[:-1])
        assert r.finish != "stop" or stopped(r.tokens)
        assert r.finish != "length" or len(r.tokens) == 4
        assert r.finish != "eos" or r.tokens[-1] == lm.eot_token_id


@pytest.mark.slow
def test_samples_are_reproducible_and_independent_of_the_other_questions(data_dir, lm):
    reqs2 = _expand(_qa_instances(2, 3))
    a = lm.generate_until(reqs2, disable_tqdm=True)
    b = lm.generate_until(reqs2, disable_tqdm=True)
    assert a == b
    reqs1 = _expand(_qa_instances(1, 3))
    assert lm.generate_until(reqs1, disable_tqdm=True) == a[:4]  # question 0 alone: same samples
    lm.sample_seed = 7
    try:
        assert lm.generate_until(reqs2, disable_tqdm=True) != a
    finally:
        lm.sample_seed = 1234


def _evaluate(lm, torch_seed: int):
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=str(TASKS_DIR), include_defaults=False,
                     metadata={"split": "validation", "num_samples": 3})
    seed, lm.sample_seed = lm.sample_seed, None  # None: the samples follow lm-eval's torch seed
    try:
        return simple_evaluate(model=lm, tasks=["nq_open_semagree"], task_manager=tm, limit=3, log_samples=True,
                               random_seed=0, numpy_random_seed=0, torch_random_seed=torch_seed,
                               fewshot_random_seed=0, bootstrap_iters=0)
    finally:
        lm.sample_seed = seed


@pytest.mark.slow
def test_end_to_end_nq_open_semagree_on_shared_prefix(data_dir, lm):
    before = lm.shared_prefix_cost.prompt_tokens if getattr(lm, "shared_prefix_cost", None) else 0
    out = _evaluate(lm, 0)
    assert lm.shared_prefix_cost.prompt_tokens > before  # the requests took the shared-prefix path
    res = out["results"]["nq_open_semagree"]
    assert 0.0 <= res["acc,judge_f1"] <= 1.0 and "ece_uw10,judge_f1" in res
    # one row per document and filter: the judge rows and the estimator rows (issue 23) read the same responses
    samples = [s for s in out["samples"]["nq_open_semagree"] if s["filter"] == "judge_f1"]
    assert len(samples) == 3
    for s in samples:
        greedy_resps, sampled_resps = s["resps"]
        assert len(greedy_resps) == 1 and len(sampled_resps) == 3
        assert len(json.loads(s["filtered_resps"][1])["samples"]) == 3
    again = _evaluate(lm, 0)  # the same --seed: the same samples
    assert [s["resps"] for s in again["samples"]["nq_open_semagree"] if s["filter"] == "judge_f1"] == [
        s["resps"] for s in samples]
