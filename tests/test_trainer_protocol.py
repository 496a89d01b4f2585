"""Issue 22, item 6, and issue 31, item 3: the paper's protocol as one command (trainers/protocol.py), made fair.

Fast: the HotpotQA training questions, the evaluated ones and the post-hoc fit slice never meet; the protocol
configs resolve with one prompt setting (zero-shot) for every method, the evaluation device/dtype of the config and
the ablations named as csr variants; eval_command honours device, dtype, the zero-shot tasks and the fit slice;
the zero-shot task renders the prompt the agreement runs train on; token cost counts the K samples of the
agreement methods (fabricated samples files); the Platt/isotonic rows are fitted on the fit slice and applied
unchanged; MS MARCO is the mirror's 1,000-question parquet. Slow: the command end to end on SmolLM2 at a tiny
size; the table is complete and every number is recomputed here from the items the JSON carries."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from trainers import protocol as PR

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ("paper.yaml", "cpu.yaml")


def test_training_questions_are_hotpotqa_and_disjoint_from_evaluation(data_dir):
    from semcal_eval.data.fields import qa_example

    rows = PR.training_rows()
    train = [e[0] for e in (qa_example("hotpotqa", r) for r in rows) if e]
    assert len(rows) == 1700 and len(train) == 1699  # dev rows 2000..3699 of the local file (one has no gold)
    evaluated = PR.eval_questions(2000)  # the most the protocol allows: every dev question before row 2000
    assert len(evaluated) == 2000
    assert not {PR._norm(q) for q in train} & {PR._norm(q) for q in evaluated}
    PR.check_disjoint(train, evaluated)
    with pytest.raises(PR.ProtocolError, match="shared|also evaluation"):
        PR.check_disjoint(train[:3], evaluated[:5] + [train[1].upper()])
    # the evaluation reads the task's first questions in order: the QA task's own doc list
    from semcal_eval.data import load

    dev = load("hotpotqa", split="validation")
    assert evaluated[:3] == [e[0] for e in (qa_example("hotpotqa", dev[i]) for i in range(3))]


def test_limit_that_reaches_the_training_rows_is_refused(data_dir):
    with pytest.raises(PR.ProtocolError, match=r"--limit 2000 or less"):
        PR.eval_questions(2001)
    with pytest.raises(PR.ProtocolError, match=r"post-hoc fit slice.*--limit 1500 or less"):
        PR.eval_questions(1501, fit_limit=500)
    assert len(PR.eval_questions(1500, fit_limit=500)) == 1500


def test_fit_slice_is_held_out_from_evaluation_and_training(data_dir):
    """The post-hoc maps are fitted on the last usable dev questions before row 2000: never evaluated (the
    evaluation reads the first `limit`), never trained on (rows 2000..), and the doc indices lm-eval's
    --samples selects are those questions of the QA task's own document list."""
    from semcal_eval.data import load
    from semcal_eval.data.fields import qa_example
    from semcal_eval.qa.task import qa_docs

    fit = PR.fit_questions(500)
    assert [i for i, _ in fit] == list(range(1500, 2000))
    evaluated = PR.eval_questions(1500, fit_limit=500)
    train = [e[0] for e in (qa_example("hotpotqa", r) for r in PR.training_rows()) if e]
    PR.check_disjoint([q for _, q in fit], evaluated, ("post-hoc fit", "evaluation"))
    PR.check_disjoint(train, [q for _, q in fit], ("training", "post-hoc fit"))
    docs = qa_docs("hotpotqa", load("hotpotqa", split="validation"))
    assert [docs[i]["qa_question"] for i, _ in fit[:3] + fit[-3:]] == [q for _, q in fit[:3] + fit[-3:]]
    with pytest.raises(PR.ProtocolError, match="post-hoc fit questions are also evaluation"):
        PR.check_disjoint([q for _, q in fit], evaluated + [fit[7][1]], ("post-hoc fit", "evaluation"))
    with pytest.raises(PR.ProtocolError, match="fit_limit"):
        PR.fit_questions(0)


@pytest.mark.parametrize("name", CONFIGS)
def test_protocol_configs_resolve(name, tmp_path):
    from datasets import Dataset

    from trainers.data import build_dataset, make_prompt

    proto = PR.load_protocol(ROOT / "trainers/configs/protocol" / name)
    cfgs = {n: PR.run_config(proto, n, tmp_path) for n in proto["runs"]}
    assert {c.method for c in cfgs.values()} == {"csr", "csr_spread", "csr_likelihood", "rlvr", "rlcr", "rd"}
    assert {"base", "csr", "csr_spread", "csr_likelihood", "rlvr", "rlcr", "rd"} <= set(cfgs)
    # the ablations are variants of csr (the paper's reward) and say so in their name
    ablations = {n for n in cfgs if n.startswith("csr_ablation_")}
    assert {cfgs[n].method for n in ablations} == {"csr"} and len(ablations) == 2
    ks = {c.grpo["num_generations"] for n, c in cfgs.items() if c.method == "csr"}
    assert ks == {4, 8}  # the K ablation
    sched = {c.reward.lambda_schedule for c in cfgs.values() if c.method == "csr"}
    assert sched == {"linear", "constant"}  # the λ ablation
    for n, c in cfgs.items():
        assert c.data.dataset == "hotpotqa" and c.output_dir == str(tmp_path / n)
        assert not c.evaluate.enabled and not c.submit.enabled
        assert c.grpo["per_device_train_batch_size"] % c.grpo["num_generations"] == 0
    ev = proto["eval"]
    assert ev["sets"] == list(PR.EVAL_SETS) and ev["num_fewshot"] == 0
    assert (ev["device"], ev["dtype"]) == {"paper.yaml": ("cuda", "bfloat16"), "cpu.yaml": ("cpu", "float32")}[name]
    ph = ev["posthoc"]
    assert ph["runs"] == ["rlvr", "csr"] and ph["methods"] == ["platt", "isotonic"]
    assert ev["limit"] + ph["fit_limit"] <= PR.TRAIN_START and not ev.get("msmarco_data_dir")
    # one prompt setting: every method's training prompt is zero-shot, in the same style
    # (instructions, a blank line, "Question: <q>"), and no prompt carries the old three worked examples
    q = "Who wrote Emma?"
    prompts = {}
    for n, c in cfgs.items():
        ds = build_dataset(c, rows=Dataset.from_list([{"id": "x", "question": q, "answer": "Jane Austen"}]))
        prompts[n] = ds["prompt"][0]
        assert ds["prompt"][0] == make_prompt(q, c.method, "plain", c.data.prompt_template)
        assert "Canberra" not in prompts[n] and "\n\nQuestion: Who wrote Emma?\n" in prompts[n], n
    assert prompts["csr"] == prompts["rlvr"] == prompts["base"] == PR.ZERO_SHOT_TEMPLATE.format(question=q)


def test_bad_protocol_settings_are_clear_errors(tmp_path, capsys):
    with pytest.raises(PR.ProtocolError, match="eval.sets"):
        PR.load_protocol(None, sets=["squad"])
    with pytest.raises(PR.ProtocolError, match="--runs"):
        PR.load_protocol(None, runs=["ppo"])
    bad = tmp_path / "p.yaml"
    bad.write_text(yaml.safe_dump({"runs": {"csr": {}}, "evals": {}}))
    with pytest.raises(PR.ProtocolError, match="unknown protocol keys"):
        PR.load_protocol(bad)
    from trainers.cli import main

    assert main(["protocol", "--config", str(bad)]) == 2
    assert "unknown protocol keys" in capsys.readouterr().err
    for ev, msg in [({"num_fewshot": 3}, "zero-shot"), ({"dtype": "fp8"}, "eval.dtype"),
                    ({"posthoc": {"methods": ["temperature"]}}, "posthoc"), ({"shots": 0}, "unknown eval keys")]:
        bad.write_text(yaml.safe_dump({"runs": {"csr": {}}, "eval": ev}))
        with pytest.raises(PR.ProtocolError, match=msg):
            PR.load_protocol(bad)
    # --runs without the post-hoc runs: no fit slice is evaluated
    assert PR.load_protocol(None, runs=["rd"])["eval"]["posthoc"]["runs"] == []


def _arg(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


@pytest.mark.parametrize("name", CONFIGS)
def test_eval_command_honours_device_dtype_tasks_and_fit_slice(name, tmp_path):
    proto = PR.load_protocol(ROOT / "trainers/configs/protocol" / name)
    ev = proto["eval"]
    tasks = tmp_path / "_tasks"
    for run, want in [("csr", "semagree_zeroshot"), ("csr_spread", "semagree_zeroshot"), ("rlvr", "semagree_zeroshot"),
                      ("rlcr", "rlcr"), ("rd", "rd")]:
        cfg = PR.run_config(proto, run, tmp_path)
        cmd = PR.eval_command(cfg, "/m", proto, tmp_path / run / "eval", tasks)
        assert _arg(cmd, "--device") == ev["device"] and cmd.count("--device") == 1
        assert _arg(cmd, "--model_args") == f"pretrained=/m,dtype={ev['dtype']}"
        assert _arg(cmd, "--tasks") == ",".join(f"{s}_{want}" for s in PR.EVAL_SETS)
        assert _arg(cmd, "--limit") == str(ev["limit"]) and "--samples" not in cmd
        meta = json.loads(_arg(cmd, "--metadata"))
        assert meta["num_samples"] == ev["num_samples"] and "split" not in meta  # each dataset's default split
        assert ("--include_path" in cmd) == (want == "semagree_zeroshot")
        if want != "semagree_zeroshot":
            assert _arg(cmd, "--gen_kwargs") == f"max_gen_toks={cfg.grpo['max_completion_length']}"
    # the fit slice: exactly the named documents of the HotpotQA task (--samples), never --limit
    cfg = PR.run_config(proto, "csr", tmp_path)
    cmd = PR.eval_command(cfg, "/m", proto, tmp_path / "fit", tasks, ["hotpotqa"], {"hotpotqa": [1999, 1998]})
    assert json.loads(_arg(cmd, "--samples")) == {"hotpotqa_semagree_zeroshot": [1998, 1999]}
    assert "--limit" not in cmd and _arg(cmd, "--tasks") == "hotpotqa_semagree_zeroshot"
    assert _arg(cmd, "--device") == ev["device"]


def test_zero_shot_task_renders_the_training_prompt(data_dir, tmp_path):
    """The task the protocol writes is the packaged agreement task with the zero-shot prompt: lm-eval builds it
    from OUT/_tasks, and its context for a document is byte for byte the agreement runs' training prompt."""
    from lm_eval.tasks import TaskManager

    from semcal_eval import TASKS_DIR
    from trainers.data import make_prompt

    folder = PR.write_zero_shot_tasks(tmp_path / "_tasks")
    tm = TaskManager(include_path=[str(TASKS_DIR), str(folder)], include_defaults=False)
    task = tm.load(["hotpotqa_semagree_zeroshot"])["tasks"]["hotpotqa_semagree_zeroshot"]
    doc = next(iter(task.test_docs()))
    ctx = task.fewshot_context(doc, num_fewshot=0)
    assert ctx == make_prompt(doc["qa_question"], "csr", "plain", PR.ZERO_SHOT_TEMPLATE)
    assert ctx.endswith(f"Question: {doc['qa_question']}\nAnswer (a few words):") and "Canberra" not in ctx
    assert task.config.num_fewshot == 0 and type(task).__name__ == "QATask"


def test_msmarco_is_the_mirrors_1000_question_parquet(data_dir, tmp_path):
    """The protocol's data folder links MS MARCO to the mirror, whose test sample the QA tasks read by default
    (1,000 questions from msmarco_v1.1_test_qa_1000.parquet); eval.msmarco_data_dir still points it elsewhere."""
    from semcal_eval.qa.task import load as qa_load

    proto = PR.load_protocol(ROOT / "trainers/configs/protocol/cpu.yaml")
    d = PR._data_dir(proto, tmp_path, list(PR.EVAL_SETS))
    assert (d / "msmarco").resolve() == (data_dir / "msmarco").resolve()
    docs = qa_load(qa_dataset="msmarco", data_dir=str(d))["eval"]
    assert len(docs) == 1000 and docs[0]["qa_question"] == "does human hair stop squirrels"
    assert docs[0]["qa_golds"] == ["Yes"]
    proto["eval"]["msmarco_data_dir"] = "tests/fixtures"
    d = PR._data_dir(proto, tmp_path / "fx", ["msmarco"])
    assert len(qa_load(qa_dataset="msmarco", data_dir=str(d))["eval"]) == 3  # the fixture's scorable questions


# ------------------------------------------------------------------------------------------------ token cost


class _WordTok:
    """A tokenizer stand-in: one token per whitespace-separated word."""

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": text.split()}


def _fake_run(folder: Path, task: str, filt: str, docs: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    stamp = "2026-12-03T00-00-00.000000"
    (folder / f"results_{stamp}.json").write_text(json.dumps({"results": {task: {}}}))
    with open(folder / f"samples_{task}_{stamp}.jsonl", "w") as f:
        for d in docs:
            rec = {"conf": d["conf"], "correct": d["correct"], "em": 0, "conf_entropy": 0.0, "conf_parsed": 1}
            f.write(json.dumps({"doc_id": d["id"], "doc": {"qa_question": f"q{d['id']}"}, "filter": filt,
                                "resps": d["resps"], "filtered_resps": d.get("filtered", [json.dumps(rec)]),
                                "metrics": ["acc", "ece_uw10"], "acc": rec, "ece_uw10": rec}) + "\n")
    return folder


def test_token_cost_counts_the_agreement_samples(tmp_path):
    """CSR/RLVR generate a greedy answer plus K samples for the confidence: all of them are counted (answer-only
    beside it); a record whose samples are only in the judge record is read from there; RLCR/RD count their one
    completion. The CSR : other ratios use the full count."""
    agree_docs = [
        {"id": 1, "conf": 0.5, "correct": 1, "resps": [[" Jane Austen"], [" Jane Austen", " Emily Bronte wrote it"]]},
        {"id": 0, "conf": 0.0, "correct": 0, "resps": [[" Paris"], [" a b c", ""]]},
        {"id": 2, "conf": 1.0, "correct": 1, "resps": [[" Rome"]],  # samples only in the record
         "filtered": [" Rome", json.dumps({"conf": 1.0, "correct": 1, "samples": ["Rome", "Rome city"]})]},
    ]
    csr = PR.read_eval(_fake_run(tmp_path / "csr", "hotpotqa_semagree_zeroshot", "judge_f1", agree_docs),
                       "csr", ["hotpotqa"], _WordTok())["hotpotqa"]
    # doc order; (conf, correct, answer + samples tokens, answer tokens)
    assert csr["items"] == [[0.0, 0, 1 + 3 + 0, 1], [0.5, 1, 2 + 2 + 4, 2], [1.0, 1, 1 + 1 + 2, 1]]
    assert csr["mean_tokens"] == pytest.approx(16 / 3) and csr["mean_answer_tokens"] == pytest.approx(4 / 3)
    assert csr["samples_per_doc"] == [2] and "parse_rate" not in csr
    assert csr["acc"][0] == pytest.approx(2 / 3) and csr["brier_conf"][0] == pytest.approx((0 + .25 + 0) / 3)
    rd_docs = [{"id": 0, "conf": 0.7, "correct": 1, "resps": [["Answer: Paris, Confidence: 7"]]},
               {"id": 1, "conf": 0.2, "correct": 0, "resps": [["Answer: Lyon, Confidence: 2"]]}]
    rd = PR.read_eval(_fake_run(tmp_path / "rd", "hotpotqa_rd", "rd", rd_docs), "rd", ["hotpotqa"], _WordTok())["hotpotqa"]
    assert [t[2:] for t in rd["items"]] == [[4, 4], [4, 4]] and rd["parse_rate"] == 1.0
    ratios = PR.summarise({"csr": {"sets": {"hotpotqa": csr}}, "rd": {"sets": {"hotpotqa": rd}},
                           "rlvr": {"sets": {"hotpotqa": csr}}})
    assert ratios["csr:rd"]["hotpotqa"] == pytest.approx((16 / 3) / 4)  # not the answer-only 1/3
    assert ratios["csr:rd"]["pooled"] == pytest.approx((16 / 3) / 4) and ratios["csr:rlvr"]["pooled"] == 1.0


def test_doc_tokens_uses_the_models_tokenizer(smollm2_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_path)
    row = {"resps": [[" Jane Austen"], [" Jane Austen", " Emily Bronte"]]}
    n = [len(tok(t, add_special_tokens=False)["input_ids"]) for t in (" Jane Austen", " Emily Bronte")]
    assert PR.doc_tokens(tok, row, "agreement") == (2 * n[0] + n[1], n[0], 2)
    assert PR.doc_tokens(tok, {"resps": [[""]]}, "rd") == (0, 0, 0)


# ------------------------------------------------------------------------------------------------ post-hoc rows


def test_posthoc_maps_are_fitted_on_the_fit_slice_and_applied_unchanged():
    """Platt (logistic regression on logit(conf)) and isotonic maps fitted on (conf, correct) of the fit slice;
    each evaluated document keeps its correctness and tokens, its confidence goes through the map, and the
    metrics are recomputed on the mapped confidences."""
    from sklearn.isotonic import IsotonicRegression

    rng = np.random.default_rng(0)
    fit_conf = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=200)
    fit_y = (rng.random(200) < 0.2 + 0.5 * fit_conf).astype(int)
    fit_items = [[float(c), int(y), 9, 1] for c, y in zip(fit_conf, fit_y)]
    # Platt: the maximum-likelihood fit's mean prediction on the fit slice is its base rate
    f, info = PR.fit_map("platt", fit_conf, fit_y)
    assert info["n"] == 200 and info["a"] > 0 and not info["one_class"]
    assert f(fit_conf).mean() == pytest.approx(fit_y.mean(), abs=1e-4)
    x = np.log(np.clip(fit_conf, 1e-3, 1 - 1e-3) / (1 - np.clip(fit_conf, 1e-3, 1 - 1e-3)))
    assert np.allclose(f(fit_conf), 1 / (1 + np.exp(-(info["a"] * x + info["b"]))))
    # isotonic: per distinct confidence, the pooled-adjacent accuracy; monotone
    g, info = PR.fit_map("isotonic", fit_conf, fit_y)
    ref = IsotonicRegression(out_of_bounds="clip").fit(fit_conf, fit_y)
    assert np.allclose(g(np.linspace(0, 1, 11)), ref.predict(np.linspace(0, 1, 11)))
    assert np.all(np.diff(g(np.linspace(0, 1, 11))) >= 0)
    # one class in the fit slice: the base rate, flagged
    h, info = PR.fit_map("platt", [0.1, 0.9, 0.5], [0, 0, 0])
    assert info["one_class"] and h([0.3, 1.0]).tolist() == [0.0, 0.0]
    # applied unchanged to every set
    sets = {"hotpotqa": {"task": "hotpotqa_semagree_zeroshot", "items": [[1.0, 1, 12, 2], [0.0, 0, 7, 1], [0.5, 1, 9, 3]]},
            "msmarco": {"task": "msmarco_semagree_zeroshot", "items": [[0.25, 0, 30, 5], [0.75, 1, 20, 4]]}}
    for m, fn in (("platt", f), ("isotonic", g)):
        out, info = PR.posthoc_sets(sets, fit_items, m)
        assert info["method"] == m and info["n"] == 200
        for s, row in out.items():
            conf = fn([t[0] for t in sets[s]["items"]])
            assert [t[0] for t in row["items"]] == pytest.approx(conf.tolist())
            assert [t[1:] for t in row["items"]] == [t[1:] for t in sets[s]["items"]]
            y = np.array([t[1] for t in sets[s]["items"]])
            assert row["brier_conf"][0] == pytest.approx(np.mean((conf - y) ** 2))
            assert row["mean_tokens"] == pytest.approx(np.mean([t[2] for t in sets[s]["items"]]))
            assert row["brier_conf"][1] is not None  # with its CI


# ------------------------------------------------------------------------------------------------ end to end


def _ece10(conf, y):
    edges = np.linspace(0, 1, 11)
    b = np.clip(np.searchsorted(edges[1:], conf, side="left"), 0, 9)  # right-closed bins, 0 in the first
    return sum(abs(y[b == k].mean() - conf[b == k].mean()) * (b == k).mean() for k in range(10) if (b == k).any())


def _auroc(conf, y):
    pos, neg = conf[y == 1], conf[y == 0]
    if not len(pos) or not len(neg):
        return float("nan")
    return float(np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg]))


TINY = {
    "runs": {"base": {"config": "csr.yaml", "train": False}, "csr": {"config": "csr.yaml"}, "rd": {"config": "rd.yaml"}},
    "common": ["grpo.use_cpu=true", "grpo.bf16=false", "grpo.activation_checkpointing=false", "lora.enabled=true",
               "lora.r=4", "lora.alpha=8", "grpo.num_generations=2", "grpo.per_device_train_batch_size=2",
               "grpo.gradient_accumulation_steps=1", "grpo.max_completion_length=8", "grpo.save_steps=100000",
               "warmup_sft.limit=2", "warmup_sft.steps=1", "warmup_sft.num_samples=2", "warmup_sft.batch_size=2",
               "warmup_sft.max_answer_tokens=6"],
    "train": {"limit": 4},
    "eval": {"limit": 2, "num_samples": 2, "batch_size": 4, "device": "cpu", "dtype": "float32",
             "posthoc": {"runs": ["csr"], "fit_limit": 3}},
}


@pytest.mark.slow
def test_protocol_end_to_end_on_smollm2(data_dir, tmp_path):
    from transformers import AutoTokenizer

    from trainers.cli import main

    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(TINY))
    out = tmp_path / "out"
    assert main(["protocol", "--config", str(cfg), "--max-steps", "1", "--out", str(out)]) == 0
    report = json.loads((out / "protocol.json").read_text())
    md = (out / "protocol.md").read_text()
    assert report["train"]["questions"] == 4
    for s in PR.EVAL_SETS:
        assert f"## {s} (" in md
    assert list(report["runs"]) == ["base", "csr", "csr+platt", "csr+isotonic", "rd"]
    tok = AutoTokenizer.from_pretrained(str(report["runs"]["base"]["model_dir"]))
    for name, run in report["runs"].items():
        # the `train: false` run evaluates the base model (its folder is made for the evaluation alone)
        assert run["steps"] == (0 if name == "base" else 1) and Path(run["model_dir"]).is_dir()
        for s in PR.EVAL_SETS:
            row = run["sets"][s]
            assert row["n"] == 2 and row["task"] == f"{s}_{'rd' if name == 'rd' else 'semagree_zeroshot'}"
            conf = np.array([t[0] for t in row["items"]], float)
            y = np.array([t[1] for t in row["items"]], float)
            toks = [t[2] for t in row["items"]]
            assert row["acc"][0] == pytest.approx(y.mean())
            assert row["brier_conf"][0] == pytest.approx(np.mean((conf - y) ** 2))
            assert row["ece_uw10"][0] == pytest.approx(_ece10(conf, y))
            a = _auroc(conf, y)
            assert (math.isnan(a) and math.isnan(row["auroc_conf"][0])) or row["auroc_conf"][0] == pytest.approx(a)
            assert row["mean_tokens"] == pytest.approx(np.mean(toks)) and min(toks) >= 0
            assert row["mean_answer_tokens"] == pytest.approx(np.mean([t[3] for t in row["items"]]))
            assert all(t[2] >= t[3] for t in row["items"])  # answer + confidence ≥ answer alone
            if name == "rd":
                assert all(t[2] == t[3] for t in row["items"]) and "parse_rate" in row
            else:
                assert "parse_rate" not in row
            if name in ("base", "csr"):
                assert row["samples_per_doc"] == [2]  # K = 2 samples counted per question
            assert row["n_correct"] == int(y.sum())
            assert f"| {name}" in md
    # the post-hoc rows: the map fitted on the 3 fit-slice questions (doc ids 1997..1999, never evaluated),
    # applied to csr's own items; correctness and tokens unchanged
    csr = report["runs"]["csr"]
    assert len(csr["fit_items"]) == 3
    for m in ("platt", "isotonic"):
        ph = report["runs"][f"csr+{m}"]
        assert ph["fit"]["n"] == 3 and ph["fit"]["method"] == m and ph["of"] == "csr"
        f, _ = PR.fit_map(m, [t[0] for t in csr["fit_items"]], [t[1] for t in csr["fit_items"]])
        for s in PR.EVAL_SETS:
            want = f([t[0] for t in csr["sets"][s]["items"]])
            assert [t[0] for t in ph["sets"][s]["items"]] == pytest.approx(want.tolist())
            assert [t[1:] for t in ph["sets"][s]["items"]] == [t[1:] for t in csr["sets"][s]["items"]]
    fit = PR.read_eval(out / "csr" / "fit", "csr", ["hotpotqa"], tok, with_questions=True)["hotpotqa"]
    assert fit["doc_ids"] == [1997, 1998, 1999] and [t[:2] for t in fit["items"]] == csr["fit_items"]
    assert not {PR._norm(q) for q in fit["questions"]} & {PR._norm(q) for q in PR.eval_questions(2, fit_limit=3)}
    ratios = report["token_ratios"]["csr:rd"]
    for s in PR.EVAL_SETS:
        num, den = (report["runs"][r]["sets"][s]["mean_tokens"] for r in ("csr", "rd"))
        # a run that generated nothing on a set (an untrained RD model can stop at once) has no ratio there
        assert math.isnan(ratios[s]) if den == 0 else ratios[s] == pytest.approx(num / den)
    assert "CSR : other" in md and "csr:rd" in md and "| csr+platt" in md and "Post-hoc fits" in md
    # MS MARCO came from the mirror's parquet (its first question), not the fixture
    ms = PR.read_eval(out / "csr" / "eval", "csr", ["msmarco"], tok, with_questions=True)["msmarco"]
    assert ms["questions"][0] == "does human hair stop squirrels"
    # read back at a smaller limit: the first documents' rows, metrics recomputed on them
    one = PR.read_eval(out / "rd" / "eval", "rd", list(PR.EVAL_SETS), tok, limit=1)
    for s in PR.EVAL_SETS:
        assert one[s]["n"] == 1 and one[s]["items"] == report["runs"]["rd"]["sets"][s]["items"][:1]
        assert one[s]["acc"][0] == pytest.approx(one[s]["items"][0][1])
