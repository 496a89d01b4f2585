"""The CSR paper's protocol as one command: train every method on HotpotQA only, evaluate each checkpoint on
HotpotQA (in distribution) and TriviaQA, NQ-Open and MS MARCO (out of distribution), and tabulate.

    semcal-train protocol [--config trainers/configs/protocol/paper.yaml] [--limit N] [--max-steps S] [--out DIR]
    (also: semcal-eval train protocol ..., python -m trainers.protocol ...)

**Training questions.** The local HotpotQA training file (``r1searcher_stage_2.jsonl``) mixes HotpotQA with
2WikiMultihopQA and has no source field, so it is not used. The protocol trains on a fixed, disjoint part of the
local HotpotQA dev file instead (:func:`training_rows`): raw rows ``TRAIN_START`` = 2,000 to the end (1,700
rows, 1,699 usable questions, of the 3,700-question local file, all of them HotpotQA by provenance). Evaluation
reads the dev file's first ``limit`` usable questions; the post-hoc recalibration rows are fitted on the last
``eval.posthoc.fit_limit`` usable questions before row 2,000 (:func:`fit_questions`), which are never evaluated.
So ``limit + fit_limit`` may not exceed the 2,000 questions before row 2,000, and the three sets share no
question (checked by normalised text at run time, :func:`check_disjoint`, and in tests/test_trainer_protocol.py).

**Runs** (``runs`` of the protocol config): each is a method config of ``trainers/configs`` plus overrides,
then the config's ``common`` overrides, then the run's own ``set``; ``train: false`` evaluates the base model
with the method's prompt (the "before" row).

**One prompt setting for every method** (``eval.num_fewshot``, 0, the only value): RLCR and RD are trained and
evaluated on their zero-shot prompts (their format instructions, then ``Question: <q>``;
:func:`trainers.data.make_prompt` has no few-shot form for them, and examples with stated confidences would
anchor the confidence a model states). So csr (and its variants), rlvr and the base row are trained *and*
evaluated zero-shot too, in the same style: :data:`ZERO_SHOT_TEMPLATE` (short-answer instructions, then
``Question: <q>`` and ``Answer (a few words):``), set as ``data.prompt_template`` of their runs and evaluated by
``<set>_semagree_zeroshot`` tasks the protocol writes to ``OUT/_tasks`` (the packaged ``*_semagree`` template
with that prompt in place of its three fixed examples). Before issue 31, CSR/RLVR were trained and evaluated
3-shot and RLCR/RD zero-shot.

**Evaluation**: one lm-eval process per run over all four sets, on ``eval.device`` with ``eval.dtype`` (cpu.yaml:
cpu/float32, paper.yaml: cuda/bfloat16), each method on its own tasks (:data:`trainers.pipeline.EVAL_MODE`:
agreement methods on the zero-shot ``*_semagree`` tasks with K = ``eval.num_samples``, rlcr ``*_rlcr``, rd
``*_rd`` at their training budget). The split is each dataset's default (``semcal_eval.data``): from the local
mirror, MS MARCO is its 1,000-question v1.1 test sample (``msmarco_v1.1_test_qa_1000.parquet``); a hub user gets
the hub's validation split. ``eval.msmarco_data_dir`` (default none) reads MS MARCO from another folder (the
tests' 3-question fixture). Per set and run: accuracy, ECE (10 equal-width bins), Brier and AUROC with 95 %
bootstrap CIs (:func:`semcal_eval.core.metric_table.compute_all`), the confidence parse rate (rlcr/rd), and the
**tokens each method generates to produce its answer and its confidence** (the model's tokenizer on the text
lm-eval logged, stop strings excluded): agreement methods = the greedy answer plus its K samples, rlcr/rd = their
one greedy completion; the answer-only count (the greedy completion) stands beside it. CSR : other token ratios
come from the full count.

**Post-hoc reference rows** (``eval.posthoc``): each of its runs (default rlvr and csr) is also evaluated on the
fit slice; a Platt map (logistic regression on logit(conf)) and an isotonic map of confidence → correctness are
fitted there and applied unchanged to every set, as rows ``<run>+platt`` / ``<run>+isotonic`` with the same
metrics and CIs.

Writes ``OUT/protocol.json`` (every number, per set the (confidence, correct, tokens, answer tokens) items they
are computed from, and each fit's (confidence, correct) items) and ``OUT/protocol.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

# the post-hoc maps (names, Platt's clip) are the one recalibration module's
from semcal_eval.core import metric_table as T
from semcal_eval.core.recalibration import PLATT_EPS, POSTHOC_METHODS  # noqa: F401  (PLATT_EPS re-exported)

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "trainers" / "configs"
TRAIN_START = 2000
EVAL_SETS = ("hotpotqa", "triviaqa", "nq_open", "msmarco")
SUFFIX = {"agreement": "semagree_zeroshot", "rlcr": "rlcr", "rd": "rd"}
FILTER = {"agreement": "judge_f1", "rlcr": "rlcr", "rd": "rd"}
#: the protocol table's metrics: the QA records' accuracy, ECE, Brier and AUROC roles (metric_table.ROLES)
COLUMNS = T.role_metrics(T.CONFIDENCE, ("acc", "ece", "brier", "auroc"))
DEFAULT_CONFIG = CONFIGS / "protocol" / "paper.yaml"
#: The zero-shot short-answer instructions of the agreement methods (csr and its variants, rlvr, base), in the
#: style of RLCR's and RD's prompts (instructions, a blank line, ``Question: <q>``); the model answers after
#: ``Answer (a few words):`` and stops at the newline. That cue, not a bare ``Answer:``, because SmolLM2-135M
#: starts a bare ``Answer:`` with a newline (an empty answer) on 17 of 36 NQ-Open/TriviaQA/HotpotQA questions,
#: on 9 of 36 with this cue (3 correct; the old 3-shot prompt: 0 empty, 2 correct; 2026-12-03, greedy).
ZERO_SHOT_INSTRUCTIONS = ("Answer the question with a short answer: a name, a date, a number or a few words. "
                          "Do not explain.")
ZERO_SHOT_TEMPLATE = ZERO_SHOT_INSTRUCTIONS + "\n\nQuestion: {question}\nAnswer (a few words):"
DTYPES = ("float32", "bfloat16", "float16", "auto")

__all__ = ["TRAIN_START", "EVAL_SETS", "ZERO_SHOT_TEMPLATE", "training_rows", "eval_questions", "fit_questions",
           "check_disjoint", "load_protocol", "run_config", "eval_tasks", "write_zero_shot_tasks", "eval_command",
           "doc_tokens", "read_eval", "fit_map", "posthoc_sets", "evaluate_run", "summarise", "format_markdown",
           "main"]


class ProtocolError(ValueError):
    """A protocol setting that cannot give a valid comparison (the message names the fix)."""


# ------------------------------------------------------------------------------------------------ questions


def _usable(rows, start: int = 0, stop: int | None = None) -> list[tuple[int, str]]:
    from semcal_eval.data.fields import qa_example

    out = []
    for i in range(start, len(rows) if stop is None else min(stop, len(rows))):
        ex = qa_example("hotpotqa", rows[i])
        if ex is not None:
            out.append((i, ex[0]))
    return out


def _norm(q: str) -> str:
    return " ".join(q.lower().split())


def training_rows(data_dir: str | None = None):
    """The protocol's HotpotQA training rows: local dev rows [TRAIN_START, end), in the hub schema."""
    from semcal_eval.data import load

    rows = load("hotpotqa", split="validation", data_dir=data_dir)
    if len(rows) <= TRAIN_START:
        raise ProtocolError(f"the HotpotQA dev split has {len(rows)} rows; the protocol trains on rows "
                            f"{TRAIN_START}.. and needs more (the local mirror holds 3,700)")
    return rows.select(range(TRAIN_START, len(rows)))


def _before(data_dir: str | None = None) -> list[tuple[int, str]]:
    from semcal_eval.data import load

    return _usable(load("hotpotqa", split="validation", data_dir=data_dir), 0, TRAIN_START)


def eval_questions(limit: int, data_dir: str | None = None, fit_limit: int = 0) -> list[str]:
    """The HotpotQA questions the evaluation reads: the first ``limit`` usable dev questions, in order (as the
    QA task does with ``--limit``). Raises :class:`ProtocolError` when they would reach the post-hoc fit slice
    (the last ``fit_limit`` usable questions before row TRAIN_START) or the training rows."""
    before = _before(data_dir)
    if limit + fit_limit > len(before):
        fix = f"use --limit {len(before) - fit_limit} or less"
        if fit_limit:
            fix += f", or a smaller eval.posthoc.fit_limit (now {fit_limit})"
            where = f"the post-hoc fit slice (the last {fit_limit} questions before dev row {TRAIN_START})"
        else:
            where = f"the protocol's HotpotQA training rows (dev rows {TRAIN_START}..)"
        raise ProtocolError(f"eval.limit={limit} reaches {where}: {fix}")
    return [q for _, q in before[:limit]]


def fit_questions(fit_limit: int, data_dir: str | None = None) -> list[tuple[int, str]]:
    """The post-hoc fit slice: (document index of the HotpotQA QA task, question) of the last ``fit_limit``
    usable dev questions before row TRAIN_START. The index counts usable questions, as the task's documents do
    (lm-eval's ``--samples`` selects them); the evaluation reads the first ``limit`` of the same list."""
    before = _before(data_dir)
    if not 0 < fit_limit <= len(before):
        raise ProtocolError(f"eval.posthoc.fit_limit={fit_limit} must lie in 1..{len(before)}")
    start = len(before) - fit_limit
    return [(start + k, q) for k, (_, q) in enumerate(before[start:])]


def check_disjoint(train_questions: list[str], eval_qs: list[str], names: tuple[str, str] = ("training", "evaluation")
                   ) -> None:
    """Raise :class:`ProtocolError` when two question sets share a question (normalised text)."""
    shared = {_norm(q) for q in train_questions} & {_norm(q) for q in eval_qs}
    if shared:
        raise ProtocolError(f"{len(shared)} {names[0]} questions are also {names[1]} questions, e.g. "
                            f"{sorted(shared)[0]!r}")


# ------------------------------------------------------------------------------------------------ config


def load_protocol(path: str | Path | None = None, limit: int | None = None, max_steps: int | None = None,
                  runs: list[str] | None = None, sets: list[str] | None = None, fit_limit: int | None = None) -> dict:
    """The protocol config (YAML: ``runs``, ``common``, ``train``, ``eval``) with the command line's knobs."""
    p = Path(path) if path else DEFAULT_CONFIG
    if not p.is_file():
        raise FileNotFoundError(f"protocol config {p} not found (example: {DEFAULT_CONFIG.relative_to(ROOT)})")
    proto = yaml.safe_load(p.read_text()) or {}
    unknown = set(proto) - {"runs", "common", "train", "eval"}
    if unknown:
        raise ProtocolError(f"unknown protocol keys {sorted(unknown)}; known: runs, common, train, eval")
    proto.setdefault("common", [])
    proto.setdefault("train", {})
    ev = proto.setdefault("eval", {})
    known = {"sets", "limit", "num_samples", "batch_size", "num_fewshot", "device", "dtype", "msmarco_data_dir",
             "posthoc"}
    if set(ev) - known:
        raise ProtocolError(f"unknown eval keys {sorted(set(ev) - known)}; known: {', '.join(sorted(known))}")
    ev.setdefault("sets", list(EVAL_SETS))
    ev.setdefault("limit", 1000)
    ev.setdefault("num_samples", 10)
    ev.setdefault("batch_size", 8)
    ev.setdefault("num_fewshot", 0)
    ev.setdefault("device", "cpu")
    ev.setdefault("dtype", "float32")
    ev.setdefault("msmarco_data_dir", None)
    ph = ev.get("posthoc")
    ph = {"runs": ["rlvr", "csr"], "methods": list(POSTHOC_METHODS), "fit_limit": 200, **(ph or {})}
    ev["posthoc"] = ph
    if limit is not None:
        ev["limit"] = int(limit)
    if fit_limit is not None:
        ph["fit_limit"] = int(fit_limit)
    if max_steps is not None:
        proto["common"] = list(proto["common"]) + [f"grpo.max_steps={int(max_steps)}"]
    if sets:
        ev["sets"] = list(sets)
    bad = [s for s in ev["sets"] if s not in EVAL_SETS]
    if bad:
        raise ProtocolError(f"eval.sets {bad} unknown; choose from {', '.join(EVAL_SETS)}")
    if ev["num_fewshot"] != 0:
        raise ProtocolError(
            f"eval.num_fewshot={ev['num_fewshot']!r}: the protocol evaluates every method zero-shot (0), the one "
            "setting all of them share: RLCR and RD are trained on their zero-shot prompts, which have no few-shot "
            "form, and few-shot examples with stated confidences would anchor the confidence (trainers/protocol.py)")
    if ev["dtype"] not in DTYPES:
        raise ProtocolError(f"eval.dtype={ev['dtype']!r} must be one of {', '.join(DTYPES)}")
    if not isinstance(ev["device"], str) or not ev["device"]:
        raise ProtocolError(f"eval.device={ev['device']!r} must name a torch device (cpu, cuda, cuda:0, ...)")
    badm = [m for m in ph["methods"] if m not in POSTHOC_METHODS]
    if badm or int(ph["fit_limit"]) < 2:
        raise ProtocolError(f"eval.posthoc: methods must come from {', '.join(POSTHOC_METHODS)} (got {badm or 'ok'}) "
                            f"and fit_limit must be ≥ 2 (got {ph['fit_limit']})")
    if not proto.get("runs"):
        raise ProtocolError("the protocol config names no runs (runs: {csr: {config: csr.yaml}, ...})")
    if runs:
        missing = [r for r in runs if r not in proto["runs"]]
        if missing:
            raise ProtocolError(f"--runs {missing} are not in the protocol config's runs {sorted(proto['runs'])}")
        proto["runs"] = {k: v for k, v in proto["runs"].items() if k in runs}
    ph["runs"] = [r for r in (ph["runs"] or []) if r in proto["runs"]]  # those of the runs this protocol trains
    return proto


def _mode(method: str) -> str:
    from trainers.pipeline import EVAL_MODE

    return EVAL_MODE[method]


def run_config(proto: dict, name: str, out: Path):
    """The trainer config (:class:`trainers.config.TrainConfig`) of run ``name``: its method config ← ``common``
    ← the run's ``set``, output in OUT/name; the agreement methods train on :data:`ZERO_SHOT_TEMPLATE` (the
    protocol's one prompt setting)."""
    from trainers.config import load_config

    spec = proto["runs"][name] or {}
    cfg_path = CONFIGS / spec.get("config", f"{name}.yaml")
    overrides = [*proto["common"], *(spec.get("set") or []), f"output_dir={out / name}",
                 "evaluate.enabled=false", "submit.enabled=false"]
    cfg = load_config(cfg_path, overrides)
    if _mode(cfg.method) == "agreement":
        if cfg.data.prompt_style != "plain":
            raise ProtocolError(f"run {name}: data.prompt_style must be plain (the zero-shot evaluation tasks "
                                "read plain-text prompts)")
        # trained on the prompt it is evaluated with
        cfg = cfg.merged({"data": {"prompt_template": ZERO_SHOT_TEMPLATE}})
    return cfg


# ------------------------------------------------------------------------------------------------ evaluation


def eval_tasks(method: str, sets: list[str]) -> dict[str, str]:
    """``{set: lm-eval task}`` that evaluates ``method`` on each set (agreement methods: the protocol's
    zero-shot ``<set>_semagree_zeroshot``, see :func:`write_zero_shot_tasks`)."""
    mode = _mode(method)
    return {s: f"{s}_{SUFFIX[mode]}" for s in sets}


def write_zero_shot_tasks(folder: Path) -> Path:
    """Write ``<set>_semagree_zeroshot.yaml`` for every set into ``folder`` (passed to lm-eval as
    ``--include_path``): the packaged agreement template (one greedy answer + K samples, judged) with
    :data:`ZERO_SHOT_TEMPLATE` as the prompt, byte for byte the prompt the agreement runs train on."""
    from semcal_eval import TASKS_DIR

    folder.mkdir(parents=True, exist_ok=True)
    template = Path(TASKS_DIR) / "qa_common" / "_qa_template_yaml"
    prompt = ZERO_SHOT_TEMPLATE.replace("{question}", "{{qa_question}}")
    for s in EVAL_SETS:
        cfg = {"include": str(template), "task": f"{s}_{SUFFIX['agreement']}", "tag": ["semcal_protocol"],
               "dataset_kwargs": {"qa_dataset": s}, "doc_to_text": prompt}
        (folder / f"{s}_{SUFFIX['agreement']}.yaml").write_text(
            "# written by trainers/protocol.py: the zero-shot agreement task of the protocol (one prompt setting)\n"
            + yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True))
    return folder


def _data_dir(proto: dict, out: Path, sets: list[str]) -> Path:
    """A data folder of links: every set from $SEMCAL_DATA_DIR, MS MARCO from ``eval.msmarco_data_dir`` when set."""
    src = Path(os.environ.get("SEMCAL_DATA_DIR") or ROOT.parent / "shared" / "data")
    d = out / "_data"
    d.mkdir(parents=True, exist_ok=True)
    alt = proto["eval"].get("msmarco_data_dir")
    for s in sets:
        target = (Path(ROOT, alt) / s) if s == "msmarco" and alt else src / s
        if not target.exists():
            raise ProtocolError(f"no data for {s}: {target} does not exist (set SEMCAL_DATA_DIR or eval.msmarco_data_dir)")
        link = d / s
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target.resolve())
    return d


def eval_command(cfg, model_dir: str, proto: dict, out_dir: Path, include_path: Path | None = None,
                 sets: list[str] | None = None, docs: dict[str, list[int]] | None = None) -> list[str]:
    """The lm-eval command of one run: ``sets`` (default ``eval.sets``), the first ``eval.limit`` documents of
    each, or exactly the documents ``docs`` names per set (lm-eval ``--samples``; the post-hoc fit slice), on
    ``eval.device`` with ``eval.dtype``."""
    ev = proto["eval"]
    mode = _mode(cfg.method)
    tasks = eval_tasks(cfg.method, list(sets or ev["sets"]))
    meta = {"num_samples": int(ev["num_samples"]), "estimators": [], "estimator_calibration": None}
    cmd = [sys.executable, "-m", "semcal_eval", "--model", "hf-semsoft",
           "--model_args", f"pretrained={model_dir},dtype={ev['dtype']}", "--tasks", ",".join(tasks.values()),
           "--batch_size", str(int(ev["batch_size"])), "--device", str(ev["device"]),
           "--output_path", str(out_dir), "--log_samples", "--seed", str(cfg.seed),
           "--metadata", json.dumps(meta)]
    if docs is None:
        cmd += ["--limit", str(int(ev["limit"]))]
    else:
        cmd += ["--samples", json.dumps({tasks[s]: sorted(int(i) for i in ids) for s, ids in docs.items()})]
    if mode == "agreement":
        cmd += ["--include_path", str(include_path or write_zero_shot_tasks(out_dir.parent / "_tasks"))]
    else:  # the verbalised methods are read at their training budget
        cmd += ["--gen_kwargs", f"max_gen_toks={int(cfg.grpo['max_completion_length'])}"]
    return cmd


def _tokens(tok, text: str) -> int:
    return len(tok(text, add_special_tokens=False)["input_ids"]) if text else 0


def doc_tokens(tok, row: dict, mode: str) -> tuple[int, int, int]:
    """(tokens generated for the answer and its confidence, tokens of the answer alone, number of samples) of
    one logged document. ``resps`` holds lm-eval's generations, stop strings cut: agreement tasks log
    ``[[greedy], [K samples]]`` and count all of them (the confidence is the samples' agreement); rlcr/rd log
    ``[[completion]]``, which carries the answer and the stated confidence. A row without the samples in
    ``resps`` falls back to the judge record's ``samples`` (``filtered_resps``)."""
    resps = row.get("resps") or []
    greedy = resps[0][0] if resps and resps[0] else ""
    answer = _tokens(tok, greedy)
    if mode != "agreement":
        return answer, answer, 0
    samples = list(resps[1]) if len(resps) > 1 and resps[1] else None
    if samples is None:
        rec = (row.get("filtered_resps") or [None])[-1]
        rec = json.loads(rec) if isinstance(rec, str) and rec.startswith("{") else rec
        samples = list((rec or {}).get("samples") or []) if isinstance(rec, dict) else []
    return answer + sum(_tokens(tok, t) for t in samples), answer, len(samples)


def _metric_cells(records: list[dict]) -> dict:
    m = T.compute_all(records, COLUMNS, ci_names=COLUMNS) if records else {}
    return {c: [m.get(c, float("nan")), m.get(f"{c}_ci_lo"), m.get(f"{c}_ci_hi")] for c in COLUMNS}


def _row(task: str, records: list[dict], items: list[list], mode: str, samples: list[int] | None = None) -> dict:
    row = {"task": task, "n": len(items), "n_correct": int(sum(t[1] for t in items)),
           "mean_tokens": (sum(t[2] for t in items) / len(items)) if items else float("nan"),
           "mean_answer_tokens": (sum(t[3] for t in items) / len(items)) if items else float("nan"),
           "items": items, **_metric_cells(records)}
    if samples is not None and mode == "agreement":
        row["samples_per_doc"] = sorted(set(samples))
    if mode != "agreement":
        row["parse_rate"] = sum(bool(r.get("conf_parsed")) for r in records) / max(len(records), 1)
    return row


def read_eval(out_dir: Path, method: str, sets: list[str], tok, limit: int | None = None,
              with_questions: bool = False) -> dict:
    """Per set: metrics with CIs, parse rate and the mean tokens (answer + confidence, and answer only) from the
    run's samples files; ``items`` = (confidence, correct, tokens, answer tokens) per document in doc order
    (``limit``: only the first ``limit`` documents, to put a run evaluated on more questions beside the others;
    ``with_questions``: also each document's ``doc_ids`` and ``questions``)."""
    from semcal_eval.runs import find_results, read_samples

    mode = _mode(method)
    tasks = eval_tasks(method, sets)
    res = find_results(out_dir)
    stamp = res.stem[len("results_"):]
    got = {}
    for s in sets:
        path = res.with_name(f"samples_{tasks[s]}_{stamp}.jsonl")
        old = res.with_name(f"samples_{s}_semagree_{stamp}.jsonl")
        if mode == "agreement" and not path.exists() and old.exists():  # a run from before issue 31 (3-shot)
            path, tasks[s] = old, f"{s}_semagree"
        rows = [r for r in read_samples(path) if r.get("filter") == FILTER[mode]]
        records, items, ks, ids, qs = [], [], [], [], []
        for r in sorted(rows, key=lambda r: r["doc_id"])[:limit]:
            rec = next(r[m] for m in r["metrics"] if isinstance(r.get(m), dict))
            full, answer, k = doc_tokens(tok, r, mode)
            records.append(rec)
            ks.append(k)
            items.append([float(rec["conf"]), int(rec["correct"]), full, answer])
            ids.append(int(r["doc_id"]))
            qs.append((r.get("doc") or {}).get("qa_question", ""))
        got[s] = _row(tasks[s], records, items, mode, ks)
        if with_questions:
            got[s]["doc_ids"], got[s]["questions"] = ids, qs
    return got


# ------------------------------------------------------------------------------------------------ post-hoc


def fit_map(method: str, conf, correct) -> tuple[Callable, dict]:
    """A confidence → P(correct) map fitted on (conf, correct) pairs, and its parameters (JSON).

    ``platt`` / ``isotonic``: the one definition of each, :func:`semcal_eval.core.recalibration.fit_platt`
    (logistic regression of correctness on logit(conf), conf clipped to [PLATT_EPS, 1 − PLATT_EPS], effectively
    unregularised) and :func:`~semcal_eval.core.recalibration.fit_isotonic` (increasing, clipped to [0, 1] and
    outside the fitted range). A fit slice with one class gives the constant base rate (``"one_class": true``):
    there is nothing to rank on.
    """
    import numpy as np

    from semcal_eval.core import recalibration

    x = np.asarray(conf, dtype=float)
    y = np.asarray(correct, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or not len(x):
        raise ValueError(f"fit_map needs one confidence and one 0/1 label per question, got {x.shape} and {y.shape}")
    if method not in POSTHOC_METHODS:
        raise ProtocolError(f"post-hoc method {method!r}: choose from {', '.join(POSTHOC_METHODS)}")
    fit = recalibration.fit_posthoc(method, x, y)
    info = {"method": method, "n": int(len(x)), "n_correct": int(y.sum()), "one_class": fit.one_class,
            **fit.params()}
    return fit.apply, info


def posthoc_sets(sets: dict, fit_items: list[list], method: str) -> tuple[dict, dict]:
    """The rows of a run recalibrated by ``method`` (:func:`fit_map` on ``fit_items`` = (conf, correct, ...) of
    the fit slice), applied unchanged to each set of ``sets`` (:func:`read_eval` output): every document keeps
    its correctness and tokens (recalibration generates nothing), its confidence is mapped. Returns
    (sets, the fit's parameters)."""
    f, info = fit_map(method, [t[0] for t in fit_items], [t[1] for t in fit_items])
    out = {}
    for s, row in sets.items():
        conf = [float(v) for v in f([t[0] for t in row["items"]])] if row["items"] else []
        items = [[c, *t[1:]] for c, t in zip(conf, row["items"], strict=True)]
        records = [{"conf": c, "correct": t[1]} for c, t in zip(conf, row["items"], strict=True)]
        out[s] = _row(row["task"], records, items, "agreement")
    return out, info


def evaluate_run(cfg, model_dir: str, proto: dict, out: Path, name: str, tok, kind: str = "eval",
                 docs: dict[str, list[int]] | None = None) -> dict:
    """Run lm-eval on ``model_dir`` into OUT/name/<kind> (kind ``fit``: the documents ``docs`` names) and read
    it back (:func:`read_eval`)."""
    sets = list(docs) if docs is not None else list(proto["eval"]["sets"])
    eval_dir = out / name / kind
    cmd = eval_command(cfg, model_dir, proto, eval_dir, write_zero_shot_tasks(out / "_tasks"), sets, docs)
    env = {**os.environ, "SEMCAL_DATA_DIR": str(_data_dir(proto, out, sets)), "PYTHONPATH": str(ROOT)}
    what = f"the post-hoc fit slice ({sum(len(v) for v in docs.values())} HotpotQA questions)" if docs else ", ".join(sets)
    print(f"[protocol] {name}: evaluating on {what} ({proto['eval']['device']}, {proto['eval']['dtype']})", flush=True)
    (out / name).mkdir(parents=True, exist_ok=True)  # a `train: false` run has no training folder
    with open(out / name / f"{kind}.log", "w") as log:
        subprocess.run(cmd, check=True, env=env, stdout=log, stderr=subprocess.STDOUT)
    return read_eval(eval_dir, cfg.method, sets, tok, with_questions=docs is not None)


# ------------------------------------------------------------------------------------------------ tables


def _ratio(a: float, b: float) -> float:
    return a / b if b and not math.isnan(a) and not math.isnan(b) else float("nan")


def summarise(results: dict) -> dict:
    """CSR : RLVR, CSR : RLCR and CSR : RD ratios of the mean tokens generated for the answer and its
    confidence (``mean_tokens``: the full count), per set and pooled (all sets' documents together)."""
    ratios = {}
    for other in ("rlvr", "rlcr", "rd"):
        if "csr" not in results or other not in results:
            continue
        per = {s: _ratio(results["csr"]["sets"][s]["mean_tokens"], results[other]["sets"][s]["mean_tokens"])
               for s in results["csr"]["sets"] if s in results[other]["sets"]}

        def pooled(run):
            t = [x[2] for s in per for x in results[run]["sets"][s]["items"]]
            return sum(t) / len(t) if t else float("nan")

        per["pooled"] = _ratio(pooled("csr"), pooled(other))
        ratios[f"csr:{other}"] = per
    return ratios


def _cell(v) -> str:
    if v[0] is None or (isinstance(v[0], float) and math.isnan(v[0])):
        return "n/a"
    if v[1] is None or (isinstance(v[1], float) and math.isnan(v[1])):
        return f"{v[0]:.3f}"
    return f"{v[0]:.3f} [{v[1]:.2f}, {v[2]:.2f}]"


def format_markdown(report: dict) -> str:
    ev = report["protocol"]["eval"]
    ph = ev.get("posthoc") or {}
    lines = [f"# CSR protocol: trained on {report['train']['questions']} HotpotQA questions (dev rows "
             f"{TRAIN_START}..), evaluated on the first {ev['limit']} questions of each set (fewer where a set has "
             "fewer), " + ("every method zero-shot (eval.num_fewshot = 0), " if "num_fewshot" in ev else
                           "each method's own prompt (before issue 31: csr/rlvr 3-shot, rlcr/rd zero-shot), ")
             + f"{ev.get('device', 'cpu')}/{ev.get('dtype', 'float32')}, K = {ev['num_samples']} samples for the "
             "agreement confidence; 95 % bootstrap CIs", ""]
    if ph.get("runs"):
        lines += [f"Post-hoc rows (`<run>+platt`, `<run>+isotonic`): the map is fitted on {ph['fit_limit']} held-out "
                  f"HotpotQA dev questions (the last before row {TRAIN_START}, never evaluated, disjoint from "
                  "training) and applied unchanged to every set.", ""]
    lines += ["Tokens: generated per question to produce the answer and its confidence (agreement methods: greedy "
              "answer + K samples; rlcr/rd: the one completion); answer tokens: the greedy answer alone." if
              "num_fewshot" in ev else "Tokens: the greedy completion only (a report from before issue 31).", ""]
    for s in ev["sets"]:
        dist = "in distribution" if s == "hotpotqa" else "out of distribution"
        lines += [f"## {s} ({dist})", "",
                  "| run | method | steps | n | correct | acc | ECE (10 bins) | Brier | AUROC | parse rate | tokens "
                  "(answer + confidence) | answer tokens |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for name, r in report["runs"].items():
            if s not in r["sets"]:
                continue
            row = r["sets"][s]
            note = " (no correct answer: ECE and Brier only say how low the confidence is)" if row["n_correct"] == 0 else ""
            pr = f"{row['parse_rate']:.2f}" if "parse_rate" in row else "—"
            auroc = "n/a (one class)" if row["n_correct"] in (0, row["n"]) else _cell(row["auroc_conf"])
            lines.append(f"| {name}{note} | {r['method']} | {r['steps']} | {row['n']} | {row['n_correct']} | "
                         f"{_cell(row['acc'])} | {_cell(row['ece_uw10'])} | {_cell(row['brier_conf'])} | {auroc} | "
                         f"{pr} | {row['mean_tokens']:.1f} | {row.get('mean_answer_tokens', float('nan')):.1f} |")
        lines.append("")
    if report.get("token_ratios"):
        lines += ["## Tokens generated for the answer and its confidence, CSR : other", "",
                  "| ratio | " + " | ".join(ev["sets"]) + " | pooled |", "|---|" + "---|" * (len(ev["sets"]) + 1)]
        for k, per in report["token_ratios"].items():
            lines.append(f"| {k} | " + " | ".join(f"{per.get(s, float('nan')):.3f}" for s in ev["sets"])
                         + f" | {per['pooled']:.3f} |")
        lines.append("")
    fits = [(n, r["fit"]) for n, r in report["runs"].items() if r.get("fit")]
    if fits:
        lines += ["## Post-hoc fits", ""]
        for n, f in fits:
            what = f"constant base rate {f['base_rate']:.3f} (one class in the fit slice)" if f["one_class"] else (
                f"P = sigmoid({f['a']:.3f}·logit(conf) + {f['b']:.3f})" if f["method"] == "platt"
                else f"isotonic, {len(f['x'])} knots")
            lines.append(f"* {n}: {f['n']} questions, {f['n_correct']} correct: {what}")
        lines.append("")
    lines.append(f"Wall time {report['seconds'] / 60:.1f} min on {os.cpu_count()} CPU(s). Runs: "
                 + "; ".join(f"{n}: {r['config_summary']}" for n, r in report["runs"].items()))
    return "\n".join(lines) + "\n"


def _summary(cfg, trained: bool) -> str:
    g, r = cfg.grpo, cfg.reward
    s = f"{cfg.method}, K={g['num_generations']}, {g['max_steps']} steps" if trained else f"{cfg.method}, base model"
    if cfg.method.startswith("csr"):
        s += f", score {r.score}, λ {r.lambda_schedule} to {r.lambda_max}"
    if trained and cfg.warmup_sft.enabled:
        s += f", warm-up {cfg.warmup_sft.steps} steps"
    return s


# ------------------------------------------------------------------------------------------------ command


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="semcal-train protocol", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", "-c", default=None, help=f"protocol YAML (default {DEFAULT_CONFIG.relative_to(ROOT)})")
    p.add_argument("--limit", type=int, help="evaluation questions per set (the paper: 1000)")
    p.add_argument("--fit-limit", type=int, help="held-out HotpotQA questions the post-hoc maps are fitted on")
    p.add_argument("--max-steps", type=int, help="GRPO steps of every run (overrides common)")
    p.add_argument("--train-limit", type=int, help="training questions (default: all 1,700)")
    p.add_argument("--runs", help="comma-separated subset of the config's runs")
    p.add_argument("--sets", help="comma-separated subset of hotpotqa,triviaqa,nq_open,msmarco")
    p.add_argument("--out", default="runs/protocol", help="output folder (protocol.json, protocol.md, one folder per run)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="trainer override for every run (after common)")
    return p


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    t0 = time.time()
    try:
        proto = load_protocol(a.config, a.limit, a.max_steps,
                              [x for x in (a.runs or "").split(",") if x] or None,
                              [x for x in (a.sets or "").split(",") if x] or None, a.fit_limit)
        proto["common"] = list(proto["common"]) + list(a.overrides)
        train_limit = a.train_limit if a.train_limit is not None else proto["train"].get("limit")
        if train_limit is not None:
            proto["common"].append(f"data.limit={int(train_limit)}")
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        cfgs = {n: run_config(proto, n, out) for n in proto["runs"]}
        ph = proto["eval"]["posthoc"]
        fit_n = int(ph["fit_limit"]) if ph["runs"] else 0
        eval_qs = eval_questions(int(proto["eval"]["limit"]), fit_limit=fit_n) if (
            "hotpotqa" in proto["eval"]["sets"] or fit_n) else []
        fit = fit_questions(fit_n) if fit_n else []
        check_disjoint([q for _, q in fit], eval_qs, ("post-hoc fit", "evaluation"))
        rows = training_rows()
    except (ProtocolError, ValueError, FileNotFoundError, KeyError) as e:
        print(f"semcal-train protocol: error: {e}", file=sys.stderr)
        return 2

    from transformers import AutoTokenizer

    from trainers.data import build_dataset
    from trainers.train import resolve_model, train

    report = {"protocol": proto, "runs": {}, "train": {}}
    tok = None
    for name, cfg in cfgs.items():
        spec = proto["runs"][name] or {}
        trained = spec.get("train", True)
        ds = build_dataset(cfg, rows=rows)
        check_disjoint(list(ds["question"]), eval_qs)  # before any model is trained
        check_disjoint(list(ds["question"]), [q for _, q in fit], ("training", "post-hoc fit"))
        report["train"]["questions"] = len(ds)
        tok = tok or AutoTokenizer.from_pretrained(resolve_model(cfg.model))
        t = time.time()
        if trained:
            print(f"[protocol] {name}: training ({_summary(cfg, True)}) on {len(ds)} HotpotQA questions", flush=True)
            res = train(cfg, train_dataset=ds)
            model_dir = res.get("model_dir")
            if not model_dir:
                raise ProtocolError(f"run {name} saved no merged model (set lora.merge_on_save: true)")
        else:
            model_dir = resolve_model(cfg.model)
        train_s = time.time() - t
        sets = evaluate_run(cfg, model_dir, proto, out, name, tok)
        entry = {"method": cfg.method, "steps": cfg.grpo["max_steps"] if trained else 0, "trained": trained,
                 "model_dir": str(model_dir), "train_s": train_s, "eval_s": time.time() - t - train_s,
                 "config_summary": _summary(cfg, trained), "sets": sets}
        report["runs"][name] = entry
        if name in ph["runs"]:
            got = evaluate_run(cfg, model_dir, proto, out, name, tok, "fit", {"hotpotqa": [i for i, _ in fit]})
            h = got["hotpotqa"]
            if [_norm(q) for q in h["questions"]] != [_norm(q) for _, q in fit]:
                raise ProtocolError(f"run {name}: the fit evaluation read other questions than the fit slice "
                                    f"(doc ids {h['doc_ids'][:3]}...); the QA task's documents changed")
            entry["fit_items"] = [t[:2] for t in h["items"]]
            for m in ph["methods"]:
                psets, info = posthoc_sets(sets, h["items"], m)
                report["runs"][f"{name}+{m}"] = {
                    "method": f"{cfg.method} + {m}", "of": name, "steps": entry["steps"], "trained": trained,
                    "model_dir": str(model_dir), "fit": info, "config_summary": f"{name} recalibrated ({m}) on "
                    f"{info['n']} held-out HotpotQA questions", "sets": psets}
        report["token_ratios"] = summarise(report["runs"])
        report["seconds"] = time.time() - t0
        (out / "protocol.json").write_text(json.dumps(report, indent=1, default=str))
        (out / "protocol.md").write_text(format_markdown(report))
        print(f"[protocol] {name}: done in {time.time() - t:.0f} s", flush=True)
    print((out / "protocol.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
