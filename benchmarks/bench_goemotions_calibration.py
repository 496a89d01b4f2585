"""Calibration benchmark: constrained baseline vs Semantic Softmax on GoEmotions validation, side by side.

One lm-eval run per (model, prompt mode) gives every row from a single forward pass per document:
constrained, semsoft at each τ of a sweep, cross-fitted temperature scaling and the reference predictors.
Prints one table per run plus the ratio ECE(constrained) / ECE(semsoft), and writes JSON + report PNGs.

    SEMCAL_DATA_DIR=../shared/data python benchmarks/bench_goemotions_calibration.py \
        --models smollm2-135m,qwen2.5-coder-0.5b --limit 400 --chat both
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import lm_eval
import torch
from lm_eval.tasks import TaskManager

from semcal_eval import TASKS_DIR
from semcal_eval.cli import register_backends
from semcal_eval.models import resolve_pretrained
from semcal_eval.report import filters_from_samples, markdown_table, task_rows

COLUMNS = ["acc", "macro_f1", "ece_uw15", "brier_mc", "nll", "auroc_class", "auroc_conf"]


def run(model: str, chat: bool, limit: int, taus: list[float], top_k: int, mode: str, batch_size: int, task: str):
    meta = {"split": "validation", "tau": taus, "top_k": top_k, "label_embedding": mode}
    tm = TaskManager(include_path=str(TASKS_DIR), metadata=meta)
    t0 = time.time()
    res = lm_eval.simple_evaluate(
        model="hf-semsoft",
        model_args={"pretrained": resolve_pretrained(f"semcal:{model}"), "dtype": "float32"},
        tasks=[task], limit=limit, log_samples=True, apply_chat_template=chat, device="cpu",
        batch_size=batch_size, task_manager=tm, metadata=meta, verbosity="WARNING",
    )
    secs = time.time() - t0
    filters = filters_from_samples(res["samples"][task])
    table, _ = task_rows(filters)
    return table, secs, filters


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="smollm2-135m")
    ap.add_argument("--limit", type=int, default=400)
    ap.add_argument("--chat", choices=["on", "off", "both"], default="both")
    ap.add_argument("--taus", default="0.2,0.0,0.05,0.1,0.15,0.25,0.3,0.4")
    ap.add_argument("--top_k", type=int, default=100)
    ap.add_argument("--label_embedding", default="first")
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--task", default="goemotions_semsoft")
    ap.add_argument("--out", default="benchmarks/results/goemotions_calibration.json")
    args = ap.parse_args()
    register_backends()
    torch.set_num_threads(int(os.environ.get("SEMCAL_THREADS", "2")))
    taus = [float(t) for t in args.taus.split(",")]
    modes = {"both": [False, True], "on": [True], "off": [False]}[args.chat]
    report = {}
    load = os.getloadavg()[0]
    for model in args.models.split(","):
        for chat in modes:
            table, secs, _ = run(model, chat, args.limit, taus, args.top_k, args.label_embedding,
                                 args.batch_size, args.task)
            key = f"{model} | chat={'on' if chat else 'off'} | tau={taus[0]} K={args.top_k} E={args.label_embedding}"
            base, sem = table["constrained"], table["semsoft"]
            print(f"\n### {key}  ({args.limit} docs, {secs:.0f}s, load avg {load:.1f})")
            print(markdown_table({k: v for k, v in table.items() if "tau" not in k}, COLUMNS))
            print(f"ECE ratio constrained/semsoft: {base['ece_uw15'] / max(sem['ece_uw15'], 1e-9):.1f}x | "
                  f"macro-F1 {base['macro_f1']:.3f} -> {sem['macro_f1']:.3f} | "
                  f"class AUROC {base['auroc_class']:.3f} -> {sem['auroc_class']:.3f}")
            sweep = sorted((float(k[len("semsoft_tau"):]), v) for k, v in table.items() if k.startswith("semsoft_tau"))
            sweep.append((taus[0], sem))
            print("τ sweep (ECE uw15 / acc / macro-F1 / Brier):",
                  "; ".join(f"{t:g}: {v['ece_uw15']:.3f}/{v['acc']:.3f}/{v['macro_f1']:.3f}/{v['brier_mc']:.3f}"
                            for t, v in sorted(sweep, key=lambda x: x[0])))
            report[key] = {"seconds": secs, "limit": args.limit, "table": table}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1, default=float))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
