"""CSR trainer benchmark on CPU: reward overhead, then real small RLVR, CSR and RLCR runs and their evaluation.

1. Reward overhead: time inside the reward functions vs. the rest of each GRPO step (generation, forward,
   backward, optimizer), measured in the same runs. Goal: < 2 % with the token-F1 judge.
2. RLVR, CSR and RLCR: SmolLM2-135M + LoRA, the HotpotQA training sample, the same seed, data order and step
   count, each with its config's defaults (trainers/configs/cpu_smoke.yaml + the method).
3. Evaluation, each method on its matching task: base, RLVR and CSR on the semantic-agreement tasks
   (judge_f1; confidence = the greedy answer's cluster share), RLCR on the ``*_rlcr`` tasks (its own prompt,
   tags and token budget; confidence = the stated one), on HotpotQA dev and NQ-Open dev subsets: accuracy, ECE
   (10 bins, as in CSR/RLCR), Brier and AUROC, with 95% bootstrap CIs.

    SEMCAL_DATA_DIR=/work/shared/data PYTHONPATH=. python benchmarks/bench_trainer.py --steps 40 --eval-limit 100

Writes OUT/summary.json and OUT/summary.md; prints the tables.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATASETS = ["hotpotqa", "nq_open"]
#: each method's evaluation (the same mapping trainers/configs point at): agreement tasks, or the RLCR tasks
EVAL_SUFFIX = {"base": "semagree", "rlvr": "semagree", "csr": "semagree", "rlcr": "rlcr"}
METHODS = ("rlvr", "csr", "rlcr")


def timed(func, bucket: list):
    """Wrap a reward function, adding its wall time to ``bucket``; keeps TRL's display name."""
    from trl.trainer.utils import get_callable_name

    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            bucket.append(time.perf_counter() - t)

    wrapper.__name__ = get_callable_name(func)
    return wrapper


def train_one(method: str, a) -> dict:
    from trainers.config import load_config
    from trainers.train import build_reward_funcs, build_trainer, read_metrics, train

    out = Path(a.out) / method
    overrides = [
        f"output_dir={out}", f"method={method}", f"grpo.max_steps={a.steps}", f"grpo.save_steps={a.steps}",
        f"grpo.num_generations={a.k}", f"grpo.per_device_train_batch_size={a.k * a.prompts}",
        f"grpo.max_completion_length={a.max_new}", f"grpo.learning_rate={a.lr}", "lora.r=16", "lora.alpha=32",
        f"data.limit={a.steps * a.prompts}", f"seed={a.seed}",
    ]
    if method == "rlcr":  # room for <think>…</think><answer>…</answer><analysis>…</analysis><confidence>c</confidence>
        overrides.append(f"grpo.max_completion_length={a.rlcr_max_new}")
    cfg = load_config(ROOT / "trainers/configs/cpu_smoke.yaml", overrides)
    bucket: list[float] = []
    funcs = [timed(f, bucket) for f in build_reward_funcs(cfg)[0]]
    t0 = time.time()
    res = train(cfg, trainer=build_trainer(cfg, reward_funcs=funcs))
    wall = time.time() - t0
    logs = [r for r in read_metrics(out) if "reward" in r]
    step_time = sum(r["step_time"] for r in logs)
    reward_time = sum(bucket)
    keys = [k for k in logs[0] if k.startswith(("rewards/", "csr/")) or k in ("reward", "frac_reward_zero_std",
                                                                            "completions/mean_length")]
    first = {k: sum(r[k] for r in logs[:5]) / min(5, len(logs)) for k in keys}
    last = {k: sum(r[k] for r in logs[-5:]) / min(5, len(logs)) for k in keys}
    return {"method": method, "model_dir": res["model_dir"], "wall_s": wall, "steps": len(logs),
            "step_time_s": step_time, "reward_time_s": reward_time,
            "reward_overhead": reward_time / max(step_time - reward_time, 1e-9),
            "first5": first, "last5": last}


COLUMNS = ("acc", "ece_uw10", "brier_conf", "auroc_conf")


def evaluate(name: str, model_dir: str, a) -> dict:
    """Run the method's matching tasks and recompute every column (with its 95% CI) from the logged records."""
    from semcal_eval.core import metric_table as T
    from semcal_eval.report import load_run

    out = Path(a.out) / "eval" / name
    tasks = [f"{d}_{EVAL_SUFFIX[name]}" for d in DATASETS]
    # hf-semsoft is HFLM plus shared-prefix sampling (docs/SAMPLING.md): the same answers' distribution, the
    # prompt encoded once per question instead of K + 1 times
    cmd = [sys.executable, "-m", "semcal_eval", "--model", "hf-semsoft",
           "--model_args", f"pretrained={model_dir},dtype=float32",
           "--tasks", ",".join(tasks), "--limit", str(a.eval_limit), "--batch_size", "8", "--device", "cpu",
           "--output_path", str(out), "--log_samples", "--seed", str(a.seed),
           "--metadata", json.dumps({"num_samples": a.eval_samples, "split": "validation"})]
    if name == "rlcr":
        cmd += ["--gen_kwargs", f"max_gen_toks={a.rlcr_max_new}"]  # the budget it was trained with
    t0 = time.time()
    subprocess.run(cmd, check=True, env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(a.threads)})
    run = load_run(out)
    row = {"model": name, "eval_s": time.time() - t0, "tasks": tasks}
    for d, t in zip(DATASETS, tasks):
        (flt, recs), = run[t].items()
        m = T.compute_all(recs["items"], COLUMNS, ci_names=COLUMNS)
        for c in COLUMNS:
            row[f"{d}/{c}"] = (m[c], m.get(f"{c}_ci_lo"), m.get(f"{c}_ci_hi"))
        row[f"{d}/n"] = len(recs["items"])
    return row


def fmt(v):
    if isinstance(v, (tuple, list)):
        return f"{v[0]:.3f} [{v[1]:.2f}, {v[2]:.2f}]" if v[1] is not None else f"{v[0]:.3f}"
    return "n/a" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--k", type=int, default=4, help="GRPO group size (num_generations)")
    p.add_argument("--prompts", type=int, default=2, help="prompts per step")
    p.add_argument("--max-new", type=int, default=16)
    p.add_argument("--rlcr-max-new", type=int, default=96, help="RLCR rollout and evaluation budget (tags need room)")
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--eval-limit", type=int, default=100)
    p.add_argument("--eval-samples", type=int, default=5, help="K samples per question in the QA tasks")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default="runs/bench_trainer")
    p.add_argument("--skip-eval", action="store_true")
    p.add_argument("--resume", action="store_true",
                   help="reuse the methods already trained in OUT/summary.json (same arguments) instead of retraining")
    a = p.parse_args(argv)

    import torch

    torch.set_num_threads(a.threads)
    os.environ.setdefault("SEMCAL_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    Path(a.out).mkdir(parents=True, exist_ok=True)
    summary = {"args": vars(a), "loadavg_start": os.getloadavg(), "train": {}, "eval": []}
    prev = Path(a.out) / "summary.json"
    if a.resume and prev.is_file():
        summary["train"] = {m: r for m, r in json.loads(prev.read_text())["train"].items() if Path(r["model_dir"]).is_dir()}
        print(f"reusing trained methods {sorted(summary['train'])}", flush=True)
    print(f"load average at start: {os.getloadavg()}", flush=True)

    for method in METHODS:
        if method in summary["train"]:
            continue
        r = train_one(method, a)
        summary["train"][method] = r
        print(f"[{method}] {r['steps']} steps in {r['wall_s']:.0f} s; reward time {r['reward_time_s']:.2f} s vs "
              f"rest of step {r['step_time_s'] - r['reward_time_s']:.1f} s → overhead {100 * r['reward_overhead']:.3f} %",
              flush=True)
        print(f"[{method}] first 5 steps: {json.dumps({k: round(v, 4) for k, v in r['first5'].items()})}")
        print(f"[{method}] last 5 steps:  {json.dumps({k: round(v, 4) for k, v in r['last5'].items()})}", flush=True)
        (Path(a.out) / "summary.json").write_text(json.dumps(summary, indent=2, default=str))

    if not a.skip_eval:
        from semcal_eval.models import resolve_pretrained

        models = [("base", resolve_pretrained("semcal:smollm2-135m"))]
        models += [(m, summary["train"][m]["model_dir"]) for m in METHODS]
        for name, d in models:
            row = evaluate(name, d, a)
            summary["eval"].append(row)
            print(json.dumps(row), flush=True)
            (Path(a.out) / "summary.json").write_text(json.dumps(summary, indent=2, default=str))

    summary["loadavg_end"] = os.getloadavg()
    lines = ["| method | steps | reward time (s) | rest of step (s) | reward overhead |", "|---|---|---|---|---|"]
    for m, r in summary["train"].items():
        lines.append(f"| {m} | {r['steps']} | {r['reward_time_s']:.2f} | {r['step_time_s'] - r['reward_time_s']:.1f} "
                     f"| {100 * r['reward_overhead']:.3f} % |")
    if summary["eval"]:
        for d in DATASETS:
            lines += ["", f"**{d}** (each model on its matching task; 95% bootstrap CIs)", "",
                      "| model | task | n | acc | ECE (10 bins) | Brier (conf) | AUROC |", "|---|---|---|---|---|---|---|"]
            for row in summary["eval"]:
                t = f"{d}_{EVAL_SUFFIX[row['model']]}"
                cells = [fmt(row[f"{d}/{c}"]) for c in COLUMNS]
                lines.append(f"| {row['model']} | {t} | {row[f'{d}/n']} | " + " | ".join(cells) + " |")
    lines.append(f"\nload average start {summary['loadavg_start']}, end {summary['loadavg_end']}; "
                 f"eval: {a.eval_limit} questions per task, K = {a.eval_samples} samples (agreement tasks), judge_f1; "
                 f"steps {a.steps}, seed {a.seed}")
    md = "\n".join(lines)
    (Path(a.out) / "summary.md").write_text(md + "\n")
    (Path(a.out) / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
