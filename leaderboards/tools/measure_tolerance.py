"""Measure the honest re-score difference that the spot check's tolerance must absorb.

Runs lm-eval (the board's pinned backend, ``hf-semsoft``) on the same documents several times, changing only
what an honest submitter may change without changing the model: batch size, CPU threads, and — separately —
dtype. For every pair of runs of one dtype it takes, per (document, per-document filter), the largest
|p_a − p_b| over the class probabilities, and prints the max and the 99.9th percentile of that distribution,
per dtype, as JSON (the numbers behind :data:`leaderboards.spotcheck.TOLERANCES`).

    nice -n 10 python -m leaderboards.tools.measure_tolerance --task goemotions_semsoft --limit 500 \
        --runs float32:1:2 float32:8:2 float32:32:2 float32:8:1 --out /tmp/tol

A run spec is ``dtype:batch_size:threads``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

PER_DOC_FILTERS = ("constrained", "semsoft")


def _probs(out: Path, task: str) -> dict[tuple[str, int], np.ndarray]:
    from semcal_eval.runs import iter_samples, locate_run, row_record

    (res,) = sorted(out.rglob("results_*.json"))
    run = locate_run(res, [task])
    rows = {}
    for r in iter_samples(run.samples_paths[task]):
        f = r["filter"]
        if not (f in PER_DOC_FILTERS or f.startswith("semsoft_tau")):
            continue
        # the row's one record, under whichever metric name holds it (the others refer to it: runs.row_record)
        held = row_record(r)
        if held is not None:
            rows[(f, r["doc_id"])] = np.asarray(held[1]["probs"], dtype=float)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="goemotions_semsoft")
    ap.add_argument("--limit", type=int, default=500)
    ap.add_argument("--split", default="validation")
    ap.add_argument("--model", default="semcal:smollm2-135m")
    ap.add_argument("--runs", nargs="+", default=["float32:1:2", "float32:8:2", "float32:32:2"])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"split": args.split, "recalibrate": False, "reference_predictors": False, "tune": False}
    probs, timing = {}, {}
    for spec in args.runs:
        dtype, bs, threads = spec.split(":")
        out = args.out / spec.replace(":", "_")
        if not list(out.rglob("results_*.json")):
            cmd = [sys.executable, "-m", "semcal_eval", "--model", "hf-semsoft", "--model_args",
                   f"pretrained={args.model},dtype={dtype}", "--device", "cpu", "--batch_size", bs,
                   "--seed", "0,1234,1234,1234", "--tasks", args.task, "--limit", str(args.limit),
                   "--log_samples", "--output_path", str(out), "--no_summary", "--metadata", json.dumps(meta)]
            env = dict(os.environ, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads, SEMCAL_SUMMARY="0",
                       TOKENIZERS_PARALLELISM="false")
            t0 = time.time()
            with open(args.out / f"{out.name}.log", "w") as log:
                subprocess.run(cmd, check=True, env=env, stdout=log, stderr=subprocess.STDOUT)
            timing[spec] = round(time.time() - t0, 1)
            print(f"{spec}: {timing[spec]} s", file=sys.stderr, flush=True)
        probs[spec] = _probs(out, args.task)
    report = {"task": args.task, "limit": args.limit, "model": args.model, "runs": args.runs, "seconds": timing,
              "pairs": {}, "per_dtype": {}}
    by_dtype: dict[str, list[float]] = {}
    for a, b in itertools.combinations(args.runs, 2):
        if a.split(":")[0] != b.split(":")[0]:
            continue
        keys = sorted(set(probs[a]) & set(probs[b]))
        d = np.array([float(np.max(np.abs(probs[a][k] - probs[b][k]))) for k in keys])
        report["pairs"][f"{a} vs {b}"] = {"n": len(d), "n_docs": len({k[1] for k in keys}), "max": float(d.max()),
                                          "p999": float(np.quantile(d, 0.999)), "p99": float(np.quantile(d, 0.99)),
                                          "median": float(np.median(d))}
        by_dtype.setdefault(a.split(":")[0], []).extend(d.tolist())
    for dt, d in by_dtype.items():
        d = np.asarray(d)
        report["per_dtype"][dt] = {"n": len(d), "max": float(d.max()), "p999": float(np.quantile(d, 0.999))}
    (args.out / "report.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
