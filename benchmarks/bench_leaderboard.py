"""Leaderboard benchmark: ingest + recompute speed, and render time.

1. Ingest + recompute of one synthetic 5k-document classification task (28 classes, filters
   constrained / semsoft / prior, the GoEmotions-shaped metric set incl. bootstrap-CI metrics),
   in submissions/s, measured side by side against the obvious alternative: parse the files with
   plain ``json`` and recompute every reported metric by calling the registered lm-eval aggregations
   (what lm-eval itself does at the end of a run) with no validation, no board metrics, no storage.
   The ratio says what the board's checks, board metrics/CIs and the SQLite transaction cost on top.
2. Render time of a board with 100 entries (static site with one reliability diagram per entry),
   cold (every PNG drawn) and warm (re-render into the same folder, PNGs reused).

    PYTHONPATH=. python benchmarks/bench_leaderboard.py [--docs 5000] [--repeats 3] [--entries 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # board_fixtures: synthetic runs

import board_fixtures as S  # noqa: E402
from leaderboards import db as DB  # noqa: E402
from leaderboards.recompute import validate_run  # noqa: E402
from leaderboards.registry import load_registry  # noqa: E402
from leaderboards.site import render  # noqa: E402

METRICS = ["acc", "macro_f1", "ece_uw15", "ece_uw10", "ece_em15", "brier_mc", "brier_conf", "nll", "auroc_conf",
           "auroc_class", "aurc", "ece_uw15_ci_lo", "ece_uw15_ci_hi"]


def naive(run_dir: Path, task: str, metrics: dict[str, str]) -> dict:
    """The alternative: json-parse results + samples, recompute each metric with lm-eval's aggregation."""
    from lm_eval.api.registry import get_aggregation

    import semcal_eval.harness.aggregations  # noqa: F401

    (res_path,) = run_dir.rglob("results_*.json")
    results = json.loads(res_path.read_text())
    (samp,) = run_dir.rglob(f"samples_{task}_*.jsonl")
    by_filter: dict[str, list] = {}
    with open(samp) as f:
        for line in f:
            row = json.loads(line)
            by_filter.setdefault(row["filter"], []).append(row)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for flt, rows in by_filter.items():
            for m, agg in metrics.items():
                out[f"{m},{flt}"] = get_aggregation(agg)([r[m] for r in rows])
    assert all(abs(out[k] - results["results"][task][k]) < 1e-9 or out[k] != out[k] for k in out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--entries", type=int, default=100)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-board-"))
    # the board checks every run against the task's own documents, so the task reads a synthetic dataset that
    # write_run writes beside it (tests/board_fixtures.py)
    tasks = S.write_synth_tasks(tmp / "tasks", extra={"semcal_bench_cls": S.synth_cls_task_yaml(
        "semcal_bench_cls", {m: f"semcal_{m}" for m in METRICS}, 28)})
    spec = load_registry(tasks)["semcal_bench_cls"]
    items = S.cls_items(args.docs, k=28, seed=0)
    runs = []
    for i in range(args.repeats):
        # distinct contents per repeat, so the duplicate check never short-cuts one
        filters = {"constrained": items, "semsoft": S.cls_items(args.docs, k=28, seed=0, temperature=2.0 + i / 100),
                   "prior": S.prior_items(items)}
        runs.append(tmp / f"run{i}")
        S.write_run(runs[-1], "semcal_bench_cls", filters, spec.metrics, version="1.0", seed=i, tasks_dir=tasks)
    size = sum(p.stat().st_size for p in runs[0].rglob("*") if p.is_file())
    print(f"synthetic task: {args.docs} documents x 3 filters x {len(METRICS)} metrics, {size / 2**20:.1f} MiB of lm-eval output")

    t_naive, t_board = [], []
    con = DB.connect(tmp / "board.sqlite")
    for run in runs:
        t0 = time.perf_counter()
        naive(run, "semcal_bench_cls", spec.metrics)
        t_naive.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        sub = validate_run(run, tasks)
        DB.insert(con, sub, f"bench-{run.name}", "base")
        t_board.append(time.perf_counter() - t0)
    tn, tb = statistics.median(t_naive), statistics.median(t_board)
    print(f"naive json parse + lm-eval aggregations: {tn:.2f} s/run = {1 / tn:.3f} runs/s (median of {args.repeats})")
    print(f"board submit (validate + recompute + board metrics/CIs + SQLite): {tb:.2f} s/submission = "
          f"{1 / tb:.3f} submissions/s")
    print(f"ratio board/naive time: {tb / tn:.2f}x (board throughput = {tn / tb:.2f} of the naive path)")

    # render: 100 entries = 100 submissions of a 500-document task with one filter each
    con2 = DB.connect(tmp / "board100.sqlite")
    for i in range(args.entries):
        r = tmp / f"small{i}"
        S.write_run(r, "semcal_bench_cls", {"constrained": S.cls_items(500, k=28, seed=i, temperature=0.5 + i / 50)},
                    spec.metrics, version="1.0", seed=i, tasks_dir=tasks)
        DB.insert(con2, validate_run(r, tasks), f"model-{i:03d}", "base")
    entries = DB.load_entries(con2)
    site = tmp / "site"
    t0 = time.perf_counter()
    stats = render(entries, site)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    render(DB.load_entries(con2), site)
    warm = time.perf_counter() - t0
    print(f"render {stats['rows']} entries ({stats['pngs_drawn']} reliability PNGs): cold {cold:.2f} s, "
          f"warm (PNGs reused) {warm:.2f} s")
    if os.environ.get("BENCH_KEEP") != "1":
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
