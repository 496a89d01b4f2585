"""Test support for the leaderboard (tests/test_leaderboard*.py, benchmarks/bench_leaderboard.py); not shipped.

* Synthetic lm-eval-shaped runs: :func:`write_run` writes what lm-eval 0.4.13 writes for
  ``--output_path OUT --log_samples``: ``OUT/<model_name_sanitized>/results_<date>.json`` and
  ``samples_<task>_<date>.jsonl`` (one line per document and filter, the per-document record under each
  metric name), with the reported aggregates computed by the registered aggregations, as lm-eval would.
* A submit that stops inside its transaction, for the crash-safety test::

      python tests/board_fixtures.py paused-submit MARKER -- <board submit arguments>

  runs ``semcal-eval board submit`` with an SQLite trace callback on the board connection: once the first
  entry row is written (the transaction still open) it writes ``inside-transaction`` to MARKER and sleeps,
  so the test can SIGKILL it there.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np

SYNTH_TASKS_YAML = {
    "semcal_synth_cls": """task: semcal_synth_cls
custom_dataset: !function utils.load_semcal_synth_cls
output_type: multiple_choice
training_split: train
test_split: eval
doc_to_text: "{{text}}"
doc_to_target: label
doc_to_choice: ["a", "b", "c", "d"]
process_results: !function utils.process_results
metric_list:
  - {metric: acc, aggregation: semcal_acc, higher_is_better: true}
  - {metric: ece_uw15, aggregation: semcal_ece_uw15, higher_is_better: false}
  - {metric: brier_mc, aggregation: semcal_brier_mc, higher_is_better: false}
  - {metric: nll, aggregation: semcal_nll, higher_is_better: false}
  - {metric: auroc_conf, aggregation: semcal_auroc_conf, higher_is_better: true}
  - {metric: ece_uw15_ci_lo, aggregation: semcal_ece_uw15_ci_lo, higher_is_better: false}
  - {metric: ece_uw15_ci_hi, aggregation: semcal_ece_uw15_ci_hi, higher_is_better: false}
metadata:
  version: 2.0
""",
    "semcal_synth_qa": """task: semcal_synth_qa
custom_dataset: !function utils.load_semcal_synth_qa
output_type: generate_until
test_split: eval
doc_to_text: "{{question}}"
doc_to_target: answer
process_results: !function utils.process_results
metric_list:
  - {metric: acc, aggregation: semcal_acc, higher_is_better: true}
  - {metric: ece_uw10, aggregation: semcal_ece_uw10, higher_is_better: false}
  - {metric: brier_conf, aggregation: semcal_brier_conf, higher_is_better: false}
  - {metric: auroc_conf, aggregation: semcal_auroc_conf, higher_is_better: true}
  - {metric: em, aggregation: semcal_em, higher_is_better: true}
metadata:
  version: 1.0
""",
}


# The synthetic tasks' documents: a tiny local dataset next to the YAMLs, read by a custom_dataset hook as the
# real tasks read theirs, so the board's dataset check (doc_hash, gold labels, split size) runs on them too.
SYNTH_UTILS = '''"""custom_dataset hooks of the synthetic board tasks (written by tests/board_fixtures.py)."""
import json
from pathlib import Path

import datasets

HERE = Path(__file__).parent / "data"


def _read(path, split):
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return datasets.Dataset.from_list(rows, split=datasets.NamedSplit(split))


def _load(task, split=None, train_split=None, first=None, **_):
    # like semcal_eval.data.lm_eval_dataset: metadata split / train_split choose the files; ``first`` keeps the
    # first N documents, a stand-in for metadata that selects documents (Civil Comments' band)
    split, train_split = split or "test", train_split or "train"
    folder = HERE / task
    if not (folder / f"{split}.jsonl").is_file():
        raise FileNotFoundError(f"{task} has no split {split!r} under {folder}")
    out = {"eval": _read(folder / f"{split}.jsonl", split)}
    if isinstance(first, int):
        out["eval"] = out["eval"].select(range(first))
    if (folder / f"{train_split}.jsonl").is_file():
        out["train"] = _read(folder / f"{train_split}.jsonl", train_split)
    return datasets.DatasetDict(out)


def load_semcal_synth_cls(**kw):
    return _load("semcal_synth_cls", **kw)


def load_semcal_synth_qa(**kw):
    return _load("semcal_synth_qa", **kw)


def process_results(doc, results):
    """Never called (the runs are written by the fixture); declared so lm-eval builds the task without looking
    the semcal metric names up in `evaluate`, as the real semcal tasks do."""
    raise NotImplementedError("synthetic tasks are not evaluated")
'''
N_CLASSES = 4
N_TRAIN = 400


def _h(s: str) -> int:
    return int.from_bytes(hashlib.sha256(s.encode()).digest()[:8], "big")


def synth_gold(i: int, split: str = "test", k: int = N_CLASSES) -> int:
    """Gold label of synthetic document ``i``: fixed by ``i`` (a prefix of a larger split is the same documents).
    The training split is skewed towards class 0, so the class prior is not uniform."""
    if split == "train":
        return 0 if _h(f"train-{i}") % 5 < 2 else _h(f"train-label-{i}") % k
    return _h(f"gold-{i}") % k


def synth_docs(task: str, n: int, split: str = "test", k: int = N_CLASSES) -> list[dict]:
    """The synthetic documents of ``task`` (classification: text + label; QA: question + answer)."""
    if task.endswith("_qa"):
        return [{"question": f"question {i}", "answer": f"answer {i}"} for i in range(n)]
    return [{"text": f"{split} document {i}", "label": synth_gold(i, split, k)} for i in range(n)]


def synth_target(task: str, doc: dict):
    """``doc_to_target`` of the synthetic tasks (the YAML's column)."""
    return doc["answer"] if task.endswith("_qa") else doc["label"]


def write_synth_data(tasks_dir: str | Path, task: str, n: int, k: int = N_CLASSES) -> None:
    """Write the evaluation split (``n`` documents) and, for a classification task (``k`` labels), the training
    split, under ``tasks_dir/synth/data/<task>/`` (where the hook of :func:`write_synth_tasks` reads them)."""
    d = Path(tasks_dir) / "synth" / "data" / task
    d.mkdir(parents=True, exist_ok=True)
    (d / "test.jsonl").write_text("".join(json.dumps(x) + "\n" for x in synth_docs(task, n, k=k)))
    if not task.endswith("_qa"):
        (d / "train.jsonl").write_text("".join(json.dumps(x) + "\n" for x in synth_docs(task, N_TRAIN, "train", k)))


def synth_cls_task_yaml(name: str, metrics: dict[str, str], k: int = N_CLASSES, version="1.0") -> str:
    """A synthetic classification task YAML with ``k`` labels and ``metrics`` (metric -> aggregation), reading its
    documents like the built-in synthetic tasks (write it into the folder :func:`write_synth_tasks` wrote)."""
    lines = "\n".join(f"  - {{metric: {m}, aggregation: {a}}}" for m, a in metrics.items())
    return (f"task: {name}\ncustom_dataset: !function utils.load_{name}\noutput_type: multiple_choice\n"
            f"training_split: train\ntest_split: eval\ndoc_to_text: \"{{{{text}}}}\"\ndoc_to_target: label\n"
            f"doc_to_choice: {json.dumps([f'label{j}' for j in range(k)])}\n"
            f"process_results: !function utils.process_results\nmetric_list:\n{lines}\nmetadata:\n  version: {version}\n")


def write_synth_tasks(tasks_dir: str | Path, extra: dict[str, str] | None = None) -> Path:
    """Write the synthetic task YAMLs (one classification, one QA task) and their hook into ``tasks_dir``."""
    d = Path(tasks_dir) / "synth"
    d.mkdir(parents=True, exist_ok=True)
    tasks = {**SYNTH_TASKS_YAML, **(extra or {})}
    for name, text in tasks.items():
        (d / f"{name}.yaml").write_text(text)
    # one loader per task, reading tasks_dir/synth/data/<task>/
    hooks = "".join(f"\n\ndef load_{name}(**kw):\n    return _load({name!r}, **kw)\n" for name in extra or {})
    (d / "utils.py").write_text(SYNTH_UTILS + hooks)
    return Path(tasks_dir)


def cls_items(n: int, k: int = 4, seed: int = 0, temperature: float = 1.0) -> list[dict]:
    """Classification items on the synthetic documents: probs = softmax(logits / T), calibrated at T=1.

    The gold label is the dataset's (:func:`synth_gold`); calibration comes from drawing a class c from
    softmax(logits) and swapping the logits of c and the gold class (logits are exchangeable across classes,
    so the gold is distributed as softmax of the swapped logits)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 2, size=(n, k))
    p_true = np.exp(logits - logits.max(1, keepdims=True))
    p_true /= p_true.sum(1, keepdims=True)
    gold = [synth_gold(i, k=k) for i in range(n)]
    for i, p in enumerate(p_true):
        c = int(rng.choice(k, p=p))
        logits[i, [c, gold[i]]] = logits[i, [gold[i], c]]
    z = logits / temperature
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    return [{"probs": row.tolist(), "gold": g, "soft": None} for row, g in zip(p, gold)]


def prior_items(items: list[dict]) -> list[dict]:
    """The class-prior reference predictor on the same documents, as the board computes it (training split)."""
    from semcal_eval.core.recalibration import prior_predictor

    k = len(items[0]["probs"])
    train = [synth_gold(i, "train", k) for i in range(N_TRAIN)]
    prior = prior_predictor(np.asarray(train), k, 1)[0].tolist()
    return [{"probs": prior, "gold": it["gold"], "soft": None} for it in items]


def qa_items(n: int, seed: int = 0) -> list[dict]:
    """QA items: conf ~ U(0,1), correct ~ Bernoulli(conf)."""
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0, 1, n)
    return [{"conf": float(c), "correct": int(rng.uniform() < c)} for c in conf]


def hash_string(s: str) -> str:
    """lm-eval's hash (lm_eval.utils.hash_string): sha256 hex of the UTF-8 text."""
    return hashlib.sha256(s.encode("utf-8")).hexdigest()


def _aggregate(agg_name: str, items: list[dict]) -> float:
    from lm_eval.api import registry

    import semcal_eval.harness.aggregations  # noqa: F401

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(registry.get_aggregation(agg_name)(items))


def write_run(
    out_dir: str | Path,
    task: str,
    filters: dict[str, list[dict]],
    metrics: dict[str, str],
    *,
    version="2.0",
    limit=None,
    original: int | None = None,
    model_name: str = "synthetic/model",
    date_id: str = "2026-11-30T13-00-00.000000",
    seed: int = 1234,
    variants: dict[str, dict[str, list[dict]]] | None = None,
    tasks_dir: str | Path | None = None,
    metadata: dict | None = None,
    dataset_size: int | None = None,
) -> Path:
    """Write one lm-eval-shaped run of ``task``; return the results file path.

    ``filters`` maps filter name -> per-document items (doc_id = position); ``metrics`` maps metric ->
    aggregation name. ``original`` is the split size (default: the number of items, i.e. full coverage); the
    synthetic dataset of that size is written into ``tasks_dir`` (default ``$SEMCAL_BOARD_TASKS_DIR``).
    ``variants[filter][metric]`` logs other items under one metric (a tampered run: the board rejects a
    document whose records differ between metric names).
    """
    variants = variants or {}
    if "em" in metrics:  # QA records carry their exact match (the em view); items without one match their correct
        filters = {f: [{**it, "em": it["correct"]} if "conf" in it and "em" not in it else it for it in items]
                   for f, items in filters.items()}
    n = len(next(iter(filters.values())))
    original = n if original is None else original
    tasks_dir = tasks_dir or os.environ.get("SEMCAL_BOARD_TASKS_DIR")
    if tasks_dir:
        first = next(iter(filters.values()))[0]
        k = len(first["probs"]) if "probs" in first else N_CLASSES
        write_synth_data(tasks_dir, task, dataset_size or original, k)
    else:
        k = N_CLASSES
    docs = synth_docs(task, n, k=k)
    d = Path(out_dir) / re.sub(r"[\"<>:/|\\?*\[\]]+", "__", model_name)
    d.mkdir(parents=True, exist_ok=True)
    task_res: dict = {"alias": task}
    lines = []
    for f, items in filters.items():
        per_metric = {m: variants.get(f, {}).get(m, items) for m in metrics}
        for m, agg in metrics.items():
            task_res[f"{m},{f}"] = _aggregate(agg, per_metric[m])
            task_res[f"{m}_stderr,{f}"] = "N/A"
        for i, it in enumerate(items):
            target = synth_target(task, docs[i])
            row = {
                "doc_id": i,
                "doc": docs[i],
                "target": target,
                "arguments": {"gen_args_0": {"arg_0": f"prompt {i}", "arg_1": ""}},
                "resps": [[str(it)]],
                "filtered_resps": [str(it)],
                "filter": f,
                "metrics": list(metrics),
                "doc_hash": hash_string(json.dumps(docs[i], indent=2, ensure_ascii=False)),
                "prompt_hash": hash_string(f"prompt {i}"),
                "target_hash": hash_string(str(target)),
            }
            row.update({m: per_metric[m][i] for m in metrics})
            lines.append(json.dumps(row, allow_nan=True))
    results = {
        "results": {task: task_res},
        "group_subtasks": {task: []},
        "configs": {task: {"task": task, "metadata": {"version": version, **(metadata or {})}}},
        "versions": {task: version},
        "n-shot": {task: 0},
        "higher_is_better": {task: {}},
        "n-samples": {task: {"original": original, "effective": n}},
        "config": {
            "model": "hf-semsoft",
            "model_args": f"pretrained={model_name},dtype=float32",
            "batch_size": 8, "batch_sizes": [], "device": "cpu", "use_cache": None, "limit": limit,
            "bootstrap_iters": 0, "gen_kwargs": None, "random_seed": 0, "numpy_seed": seed,
            "torch_seed": seed, "fewshot_seed": seed,
        },
        "git_hash": "abc1234",
        "date": 1795000000.0,
        "transformers_version": "5.0.0",
        "lm_eval_version": "0.4.13",
        "model_name": model_name,
        "model_name_sanitized": d.name,
        "task_hashes": {task: "0" * 64},
    }
    rp = d / f"results_{date_id}.json"
    rp.write_text(json.dumps(results, indent=2, allow_nan=True))
    (d / f"samples_{task}_{date_id}.jsonl").write_text("\n".join(lines) + "\n")
    return rp


# ---------------------------------------------------------------- a submit killed inside its transaction

PAUSE_SECONDS = 600


def pause_inside_transaction(con, marker: Path) -> None:
    """Install an SQLite trace callback on ``con`` that, at the first statement after the first
    ``INSERT INTO entries`` while a transaction is open, writes ``inside-transaction`` to ``marker`` and
    sleeps :data:`PAUSE_SECONDS` (the test kills the process meanwhile)."""
    state = {"entries": 0}

    def trace(sql: str) -> None:
        if state["entries"] and con.in_transaction:
            Path(marker).write_text("inside-transaction")
            time.sleep(PAUSE_SECONDS)
        if sql.lstrip().upper().startswith("INSERT INTO ENTRIES"):
            state["entries"] += 1

    con.set_trace_callback(trace)


def paused_submit(marker: str | Path, argv: list[str]) -> int:
    """``leaderboards.cli.main(argv)`` with every board connection paused by :func:`pause_inside_transaction`."""
    from leaderboards import cli, db

    connect = db.connect

    def connect_paused(path):
        con = connect(path)
        pause_inside_transaction(con, Path(marker))
        return con

    db.connect = connect_paused
    return cli.main(argv)


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1] != "paused-submit" or sys.argv[3] != "--":
        sys.exit("usage: python tests/board_fixtures.py paused-submit MARKER -- <board submit arguments>")
    sys.exit(paused_submit(sys.argv[2], sys.argv[4:]))
