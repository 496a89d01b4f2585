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

import json
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np

SYNTH_TASKS_YAML = {
    "semcal_synth_cls": """task: semcal_synth_cls
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
metric_list:
  - {metric: acc, aggregation: semcal_acc, higher_is_better: true}
  - {metric: ece_uw10, aggregation: semcal_ece_uw10, higher_is_better: false}
  - {metric: brier_conf, aggregation: semcal_brier_conf, higher_is_better: false}
  - {metric: auroc_conf, aggregation: semcal_auroc_conf, higher_is_better: true}
  - {metric: em, aggregation: semcal_acc, higher_is_better: true}
metadata:
  version: 1.0
""",
}


def write_synth_tasks(tasks_dir: str | Path) -> Path:
    """Write the synthetic task YAMLs (one classification, one QA task) into ``tasks_dir``."""
    d = Path(tasks_dir) / "synth"
    d.mkdir(parents=True, exist_ok=True)
    for name, text in SYNTH_TASKS_YAML.items():
        (d / f"{name}.yaml").write_text(text)
    return Path(tasks_dir)


def cls_items(n: int, k: int = 4, seed: int = 0, temperature: float = 1.0) -> list[dict]:
    """Classification items: probs = softmax(logits / T), gold drawn from softmax(logits) (calibrated at T=1)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 2, size=(n, k))
    p_true = np.exp(logits - logits.max(1, keepdims=True))
    p_true /= p_true.sum(1, keepdims=True)
    gold = [int(rng.choice(k, p=p)) for p in p_true]
    z = logits / temperature
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    return [{"probs": row.tolist(), "gold": g, "soft": None} for row, g in zip(p, gold)]


def prior_items(items: list[dict]) -> list[dict]:
    """The class-prior reference predictor on the same documents (prior = gold frequencies)."""
    k = len(items[0]["probs"])
    counts = np.bincount([it["gold"] for it in items], minlength=k) + 1.0
    prior = (counts / counts.sum()).tolist()
    return [{"probs": prior, "gold": it["gold"], "soft": None} for it in items]


def qa_items(n: int, seed: int = 0) -> list[dict]:
    """QA items: conf ~ U(0,1), correct ~ Bernoulli(conf)."""
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0, 1, n)
    return [{"conf": float(c), "correct": int(rng.uniform() < c)} for c in conf]


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
) -> Path:
    """Write one lm-eval-shaped run of ``task``; return the results file path.

    ``filters`` maps filter name -> per-document items (doc_id = position); ``metrics`` maps metric ->
    aggregation name. ``original`` is the split size (default: the number of items, i.e. full coverage).
    ``variants[filter][metric]`` logs other items under one metric (as QA tasks do for ``em``); metrics
    without a variant log the filter's items.
    """
    variants = variants or {}
    n = len(next(iter(filters.values())))
    original = n if original is None else original
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
            row = {
                "doc_id": i,
                "doc": {"text": f"document {i}"},
                "target": str(it.get("gold", it.get("correct"))),
                "arguments": {"gen_args_0": {"arg_0": f"prompt {i}", "arg_1": ""}},
                "resps": [[str(it)]],
                "filtered_resps": [str(it)],
                "filter": f,
                "metrics": list(metrics),
                "doc_hash": f"{i:064x}",
                "prompt_hash": f"{i + 1:064x}",
                "target_hash": f"{i + 2:064x}",
            }
            row.update({m: per_metric[m][i] for m in metrics})
            lines.append(json.dumps(row, allow_nan=True))
    results = {
        "results": {task: task_res},
        "group_subtasks": {task: []},
        "configs": {task: {"task": task, "metadata": {"version": version}}},
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
