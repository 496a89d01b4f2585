"""The RLCR baseline's own evaluation, the ``*_rlcr`` QA tasks (tasks/qa_common/_qa_rlcr_template_yaml): RLCR's
training prompt, RLCR's tags read by the trainer's own parser, EOS-only stops and the training token budget.

The central test pushes RLCR-format completions (short and ~200-token ``<think>`` blocks, blocks in other orders,
percentages, odd whitespace, blank lines) through the task as lm-eval would: generation cut to the task's
``max_gen_toks`` in the model's tokens and at its ``until`` strings plus EOS (lm-eval's own helpers), then the
task's filter and ``process_results``. No model runs: the task is built with lm-eval's TaskManager.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from semcal_eval import TASKS_DIR
from semcal_eval.harness.base import unwrap

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("nq_open", "triviaqa", "hotpotqa", "msmarco")
FIXTURES = ROOT / "tests" / "fixtures"


def _tm(**metadata):
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(TASKS_DIR), include_defaults=False, metadata=metadata)


def _task(name: str, **metadata):
    return _tm(**metadata).load([name])["tasks"][name]


def _rlcr_cfg():
    from trainers.config import load_config

    return load_config(ROOT / "trainers/configs/rlcr.yaml")


@pytest.fixture(scope="module")
def rlcr_tok():
    """The tokenizer of the model rlcr.yaml trains: budgets are counted in its tokens."""
    from transformers import AutoTokenizer

    from trainers.train import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model(_rlcr_cfg().model))


# ---------------------------------------------------------------- the task files


def test_rlcr_tasks_are_one_template_with_rlcr_settings():
    from semcal_eval.harness.task_yaml import load_task_yaml

    merged = {}
    for ds in FAMILIES:
        path = TASKS_DIR / ds / f"{ds}_rlcr.yaml"
        import yaml

        assert set(yaml.safe_load(path.read_text())) == {"include", "task", "dataset_kwargs"}, path
        cfg = load_task_yaml(path)
        assert cfg.pop("task") == f"{ds}_rlcr" and cfg.pop("dataset_kwargs") == {"qa_dataset": ds}
        merged[ds] = cfg
        assert f"`{ds}_rlcr`" in (TASKS_DIR / ds / "README.md").read_text()  # listed in the family README
    assert all(merged[ds] == merged["nq_open"] for ds in FAMILIES)
    cfg = merged["nq_open"]
    assert cfg["class"] == "!function utils.QATask" and cfg["metadata"]["mode"] == "rlcr"
    assert cfg["doc_to_text"] == "!function utils.rlcr_doc_to_text"
    assert "semcal_qa_rlcr" in cfg["tag"]
    # the budget is the training budget of rlcr.yaml; no stop string at all (lm-eval adds EOS)
    assert cfg["generation_kwargs"] == {"until": [], "max_gen_toks": _rlcr_cfg().grpo["max_completion_length"],
                                        "do_sample": False}
    # the verbalized task's metrics, all of which the rlcr record has (the metric table's default for the mode)
    from semcal_eval.harness.aggregations import declared_metric_list

    verb = load_task_yaml(TASKS_DIR / "nq_open" / "nq_open_verbalized.yaml")
    assert declared_metric_list(cfg) == declared_metric_list(verb)


def test_metric_list_follows_the_metric_table():
    from semcal_eval.harness.aggregations import declared_metric_list, metric_list
    from semcal_eval.harness.task_yaml import load_task_yaml

    ml = declared_metric_list(load_task_yaml(TASKS_DIR / "nq_open" / "nq_open_rlcr.yaml"))
    assert ml and ml == metric_list([e["metric"] for e in ml])


def test_registered_next_to_the_other_variants():
    names = set(_tm().all_tasks)
    assert {f"{ds}_rlcr" for ds in FAMILIES} <= names
    assert "semcal_qa_rlcr" in names


# ---------------------------------------------------------------- one prompt, one parser, shared with training


def test_one_prompt_and_one_parser_shared_with_the_trainer(data_dir):
    import semcal_eval.qa.prompts as P
    import semcal_eval.qa.verbalized as V
    from trainers import data as tdata
    from trainers import rewards as R

    assert R.RLCR_SYSTEM_PROMPT is P.RLCR_SYSTEM_PROMPT and tdata.RLCR_SYSTEM_PROMPT is P.RLCR_SYSTEM_PROMPT
    assert R.parse_rlcr is V.parse_rlcr

    task = _task("nq_open_rlcr", split="validation")
    task.build_all_requests(limit=3)
    assert len(task.instances) == 3 and all(i.repeats == 1 for i in task.instances)
    for inst in task.instances:
        ctx, gen = inst.arguments
        # byte for byte the prompt GRPO trains an RLCR model on (plain prompt style, rlcr.yaml's)
        assert ctx == tdata.make_prompt(inst.doc["qa_question"], "rlcr", _rlcr_cfg().data.prompt_style)
        assert ctx.startswith(P.RLCR_SYSTEM_PROMPT)
        assert gen == {"until": [], "max_gen_toks": 256, "do_sample": False}


def test_semcal_eval_does_not_import_trainers():
    import subprocess
    import sys

    code = ("import sys, semcal_eval.qa, semcal_eval.qa.task, semcal_eval.qa.prompts; "
            "print(any(m == 'trainers' or m.startswith('trainers.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------- RLCR-format completions through the task


def _think(rng: random.Random, tok, n_tokens: int) -> str:
    """Reasoning text of about ``n_tokens`` tokens, with paragraph breaks and a "Q:" line inside (the verbalized
    task's stops "\\n\\n" and "\\nQ:" cut there)."""
    sents = ["Let me recall what I know about this.", "The question asks for a single entity.",
             "I think the answer is fairly well known, but I should double-check the details.",
             "There are two candidates that come to mind.", "One of them fits the time period better.",
             "Q: is the first candidate plausible? It seems so.", "I am not entirely sure about the date.",
             "Wikipedia would list this in the introduction.", "So the answer is probably the first one."]
    out = []
    while len(tok.encode(" ".join(out))) < n_tokens:
        out.append(rng.choice(sents) + ("\n\n" if rng.random() < 0.3 else ""))
    return " ".join(out).strip()


def _completions(tok, golds: list[str], budget: int) -> list[tuple[str, float | None, str]]:
    """(completion, expected confidence or None, expected answer): the RLCR format, varied; each fits ``budget``
    tokens with its EOS, as a completion GRPO trained within that budget does."""
    rng = random.Random(0)
    confs = [("0.8", 0.8), ("0.85", 0.85), (".9", 0.9), ("80%", 0.8), ("65 %", 0.65), (" 0.7 ", 0.7),
             ("\n0.6\n", 0.6), ("1", 1.0), ("0", 0.0), ("1.0", 1.0), ("0.05", 0.05), ("100%", 1.0)]
    seps = ["", " ", "\n", "\n\n", " \n "]
    out = []
    for i, gold in enumerate(golds):
        think = _think(rng, tok, rng.choice([5, 40, 120, 190, 200, 210]))
        answer = gold if i % 3 else "something else"
        ctext, c = confs[i % len(confs)]
        s = rng.choice(seps)
        blocks = {"think": f"<think>{think}</think>", "answer": f"<answer>{answer}</answer>",
                  "analysis": "<analysis>The reasoning is plausible but I could be wrong.</analysis>",
                  "confidence": f"<confidence>{ctext}</confidence>"}
        order = ["think", "answer", "analysis", "confidence"]
        if i % 7 == 3:
            order = ["think", "answer", "confidence", "analysis"]  # confidence before the analysis
        elif i % 7 == 5:
            order = ["think", "confidence", "answer", "analysis"]  # confidence before the answer
        elif i % 11 == 9:
            order = ["answer", "confidence"]  # no reasoning at all
        while True:
            blocks["think"] = f"<think>{think}</think>"
            text = s.join(blocks[b] for b in order)
            if i % 5 == 4:
                text = text.replace("<confidence>", "<CONFIDENCE>").replace("</confidence>", "</CONFIDENCE>")
            if i % 6 == 2:
                text = "\n" + text + "\n"
            if len(tok.encode(text + tok.eos_token, add_special_tokens=False)) <= budget:
                break
            think = think.rsplit(" ", 3)[0]  # trim the reasoning until the completion fits
        out.append((text, c, answer))
    # what a trained model still sometimes writes: no number in the tag, or no confidence at all (counted, not read)
    for i, tail in ((10, "<analysis>Unsure.</analysis><confidence>high</confidence>"), (47, "")):
        out[i] = (f"<think>Hmm.</think><answer>{out[i][2]}</answer>{tail}", None, out[i][2])
    return out


def _generate_like_lm_eval(text: str, gen_kwargs: dict, tok) -> str:
    """What lm-eval's HF backend returns for a model that writes ``text`` then EOS: at most ``max_gen_toks`` new
    tokens, cut at the first ``until`` string or the EOS string (lm-eval adds EOS to ``until`` and strips the stop
    string: lm_eval.models.utils.handle_stop_sequences / postprocess_generated_text)."""
    from lm_eval.models.utils import handle_stop_sequences, postprocess_generated_text

    ids = tok.encode(text + tok.eos_token, add_special_tokens=False)[: gen_kwargs["max_gen_toks"]]
    until = handle_stop_sequences(list(gen_kwargs.get("until") or []), eos=tok.decode([tok.eos_token_id]))
    return postprocess_generated_text(tok.decode(ids), stop=until, think_end_token=None)


def _score(task, comps, tok) -> tuple[list[dict], list[dict], float]:
    """Feed one completion per document through the task's filter and process_results; return the filter's
    records, the per-document records and the task's own conf_parse_rate aggregation."""
    for inst, (text, _, _) in zip(task.instances, comps):
        inst.resps = [_generate_like_lm_eval(text, inst.arguments[1], tok)]
    task.apply_filters()
    (name,) = {k for i in task.instances for k in i.filtered_resps}
    filtered = [json.loads(i.filtered_resps[name]) for i in task.instances]
    docs = [unwrap(task.process_results(i.doc, [i.filtered_resps[name]])["conf_parse_rate"]) for i in task.instances]
    rate = task.aggregation()["conf_parse_rate"](docs)
    return filtered, docs, rate


N_DOCS = 80


@pytest.fixture(scope="module")
def rlcr_task(data_dir):
    task = _task("nq_open_rlcr", split="validation")
    task.build_all_requests(limit=N_DOCS)
    return task


def test_rlcr_completions_parse_through_the_task(rlcr_task, rlcr_tok):
    """≥ 95 % of RLCR-format completions, long ones included, yield a parsed confidence — the right one — and the
    answer of the <answer> block; the RLCR reward parser reads the same completions identically."""
    from trainers.rewards import parse_rlcr

    task, tok = rlcr_task, rlcr_tok
    golds = [i.doc["qa_golds"][0] for i in task.instances]
    budget = _rlcr_cfg().grpo["max_completion_length"]
    comps = _completions(tok, golds, budget)
    lengths = [len(tok.encode(t, add_special_tokens=False)) for t, _, _ in comps]
    # every completion fits the training budget (GRPO cuts there too); many have ~200 tokens of reasoning
    assert max(lengths) <= budget and sum(n > 200 for n in lengths) >= 10, (max(lengths), sorted(lengths)[-12:])

    filtered, docs, rate = _score(task, comps, tok)
    assert rate >= 0.95 and rate == pytest.approx(sum(c is not None for _, c, _ in comps) / len(comps))
    for (text, conf, answer), rec, doc in zip(comps, filtered, docs):
        if conf is None:
            assert rec["conf_parsed"] is False and rec["conf"] == 0.5 and doc["conf_parsed"] == 0
            continue
        assert rec["conf_parsed"] is True and rec["conf"] == pytest.approx(conf), text[-80:]
        assert rec["greedy"] == answer
        assert rec["raw"] == text  # nothing was cut: no stop string, the budget is the training budget
        ok, a, c = parse_rlcr(text)  # the RLCR rewards read the completion exactly as the task does
        assert (a, c, ok) == (rec["greedy"], rec["conf"], rec["format_ok"])
    assert set(docs[0]) == {"conf", "correct", "em", "conf_parsed"}
    # correctness is the answer block's: every third completion answers "something else"
    assert [r["correct"] for r in filtered[:3]] == [0, 1, 1]
    # the canonical order with nothing outside the blocks passes RLCR's format check
    assert filtered[1]["format_ok"] is True


def test_the_verbalized_task_would_lose_most_confidences(data_dir, rlcr_tok):
    """The defect the rlcr tasks fix: the same completions under the verbalized task's stops and 64-token budget
    mostly lose their confidence tag (cut at a blank line, at "\\nQ:", or at 64 tokens) and fall back to 0.5."""
    task = _task("nq_open_verbalized", split="validation")
    task.build_all_requests(limit=N_DOCS)
    comps = _completions(rlcr_tok, [i.doc["qa_golds"][0] for i in task.instances],
                         _rlcr_cfg().grpo["max_completion_length"])
    _, _, rate = _score(task, comps, rlcr_tok)
    assert rate < 0.5


def test_lm_eval_strips_stop_strings_so_a_confidence_stop_would_break_the_tag(rlcr_tok):
    """Why `until` is empty: lm-eval removes the stop string from the text, so stopping on "</confidence>" would
    leave an unclosed tag that no parser reads."""
    from semcal_eval.qa.verbalized import parse_rlcr

    text = "<think>x</think><answer>Paris</answer><analysis>y</analysis><confidence>0.7</confidence>"
    cut = _generate_like_lm_eval(text, {"until": ["</confidence>"], "max_gen_toks": 256}, rlcr_tok)
    assert cut.endswith("<confidence>0.7") and parse_rlcr(cut)[2] is None
    whole = _generate_like_lm_eval(text, {"until": [], "max_gen_toks": 256}, rlcr_tok)
    assert whole == text and parse_rlcr(whole) == (True, "Paris", 0.7)


@pytest.mark.parametrize("ds", FAMILIES)
def test_each_family_builds_rlcr_requests(data_dir, ds):
    meta = {"split": "validation"}
    if ds == "msmarco":
        meta["data_dir"] = str(FIXTURES)  # hub-schema fixture: no local MS MARCO questions exist
    task = _task(f"{ds}_rlcr", **meta)
    task.build_all_requests(limit=1)
    (inst,) = task.instances
    assert inst.arguments[0].endswith(f"Question: {inst.doc['qa_question'].strip()}\n")
    assert [f.name for f in task._filters] == ["rlcr"]


@pytest.mark.slow
def test_end_to_end_with_a_real_model(data_dir, smollm2_path):
    """The task runs in lm-eval with a real model (untrained for RLCR, so mostly no confidence: counted, not
    guessed); a short budget through --gen_kwargs keeps it cheap, as semcal-train passes the training one."""
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=smollm2_path, dtype="float32", device="cpu", batch_size=2)
    out = simple_evaluate(model=lm, tasks=["nq_open_rlcr"], task_manager=_tm(split="validation"), limit=2,
                          gen_kwargs="max_gen_toks=8", log_samples=True, bootstrap_iters=0, random_seed=0,
                          numpy_random_seed=0, torch_random_seed=0, fewshot_random_seed=0)
    r = out["results"]["nq_open_rlcr"]
    assert 0.0 <= r["conf_parse_rate,rlcr"] <= 1.0 and 0.0 <= r["acc,rlcr"] <= 1.0
    (s0, s1) = out["samples"]["nq_open_rlcr"]
    assert s0["arguments"][0][1]["max_gen_toks"] == 8 and s0["arguments"][0][1]["until"] == []
    assert "format_ok" in json.loads(s0["filtered_resps"][0])
