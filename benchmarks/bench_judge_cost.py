"""What the learned judge costs a GRPO step, beside cover (issue 51 item 4): seconds per judged answer, per
judged pair and per step of CSR's reward on 2 CPU cores (and on a GPU, where ``--device cuda`` finds one).

A step is ``--prompts`` questions × K = ``--k`` rollouts, as TRL's GRPO hands them to the reward: each rollout
graded against its golds (CSR's correctness y_j) and every pair of a question's rollouts judged for agreement
(CSR's J). The rollouts are real answers: EVOUNA's five systems' answers to one question, then the same answers
again with a lead-in ("I think …") until K are drawn, so that a group has the repeats and near-repeats a policy
writes (the judge's cache serves the exact repeats within a step). Each step's questions are new, so nothing is
cached across steps, as in training. The model is loaded before timing (its load time is printed apart).

    PYTHONPATH=. python benchmarks/bench_judge_cost.py              # ~3 min on 2 cores

Writes benchmarks/results/judge_humans/cost.json and prints the table with the ratio to cover.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_judge_humans import default_data_dir, load_evouna  # noqa: E402

from semcal_eval.qa.grading import agree, grade_cover  # noqa: E402
from semcal_eval.qa.learned import LearnedJudge  # noqa: E402

LEAD_INS = ("I think ", "It is ", "The answer is ", "Probably ")


def groups(rows, n: int, k: int, seed: int) -> list[tuple[str, list[str], list[str]]]:
    """``n`` (question, golds, K rollouts) drawn from EVOUNA's questions (seeded)."""
    by_q: dict = {}
    for r in rows:
        by_q.setdefault((r.ds, r.qi), []).append(r)
    keys = sorted(k_ for k_, v in by_q.items() if len(v) >= 3)
    rng = np.random.default_rng(seed)
    out = []
    for i in rng.choice(len(keys), size=n, replace=False):
        rs = by_q[keys[i]]
        base = [r.answer for r in rs]
        rolls = [base[j % len(base)] if j < len(base) else LEAD_INS[j % len(LEAD_INS)] + base[j % len(base)]
                 for j in range(k)]
        out.append((rs[0].question, list(rs[0].golds), rolls))
    return out


def step_cover(step) -> tuple[float, float]:
    t0 = time.perf_counter()
    for q, g, rolls in step:
        [grade_cover(a, g, q) for a in rolls]
    t1 = time.perf_counter()
    for q, _, rolls in step:
        [agree(rolls[i], rolls[j], q) for i in range(len(rolls)) for j in range(i + 1, len(rolls))]
    return t1 - t0, time.perf_counter() - t1


def step_learned(step, judge: LearnedJudge, pairs: bool) -> tuple[float, float, int, int]:
    calls0, lift0 = judge.model_calls, judge.lift_calls
    t0 = time.perf_counter()
    judge.grade_probs([(a, g, q) for q, g, rolls in step for a in rolls])
    t1 = time.perf_counter()
    if pairs:
        for q, _, rolls in step:
            judge.agree_probs(q, [(rolls[i], rolls[j]) for i in range(len(rolls)) for j in range(i + 1, len(rolls))])
    return t1 - t0, time.perf_counter() - t1, judge.model_calls - calls0, judge.lift_calls - lift0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/results/judge_humans/cost.json")
    a = ap.parse_args(argv)
    rows, _ = load_evouna(default_data_dir())
    all_groups = groups(rows, a.steps * a.prompts, a.k, a.seed)
    steps = [all_groups[s * a.prompts:(s + 1) * a.prompts] for s in range(a.steps)]
    t0 = time.perf_counter()
    judge = LearnedJudge(device=a.device)
    judge.lm  # noqa: B018  load the models before timing
    if judge.lift is not None:
        judge.lift_lm  # noqa: B018
    load_s = time.perf_counter() - t0
    res = {"cover": [], "learned": []}
    for step in steps:
        res["cover"].append(step_cover(step) + (0, 0))
        judge._grade_cache.clear()
        judge._agree_cache.clear()
        res["learned"].append(step_learned(step, judge, pairs=True))
    n_ans = a.prompts * a.k
    n_pairs = a.prompts * a.k * (a.k - 1) // 2
    table = {}
    for name, r in res.items():
        g, p, calls, lift = (np.array(x, dtype=float) for x in zip(*r))
        table[name] = {"grade_s_per_answer": float(g.mean() / n_ans), "agree_s_per_pair": float(p.mean() / n_pairs),
                       "grade_s_per_step": float(g.mean()), "agree_s_per_step": float(p.mean()),
                       "step_s": float((g + p).mean()), "model_calls_per_step": float(calls.mean()),
                       "lift_calls_per_step": float(lift.mean())}
    base = table["cover"]
    for name, t in table.items():
        t["step_ratio_to_cover"] = t["step_s"] / base["step_s"]
        t["grade_ratio_to_cover"] = t["grade_s_per_step"] / base["grade_s_per_step"]
    out = {"steps": a.steps, "prompts": a.prompts, "k": a.k, "seed": a.seed, "device": a.device,
           "model": judge.model_name, "lift_model": judge.lift_model_name if judge.lift else None,
           "judge": judge.version, "model_load_s": load_s, "cpus": os.cpu_count(),
           "load": os.getloadavg(), "table": table}
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"one GRPO step = {a.prompts} prompts × K = {a.k} ({n_ans} answers graded, {n_pairs} pairs judged); "
          f"model load {load_s:.1f} s (once)")
    print("| judge | s / answer (grade) | s / pair (agree) | grade s / step | agree s / step | step s | × cover | "
          "model calls / step | lift model calls / step |\n|---|---|---|---|---|---|---|---|---|")
    for name, t in table.items():
        print(f"| {name} | {t['grade_s_per_answer']:.4f} | {t['agree_s_per_pair']:.4f} | {t['grade_s_per_step']:.2f} "
              f"| {t['agree_s_per_step']:.2f} | {t['step_s']:.2f} | {t['step_ratio_to_cover']:.1f} | "
              f"{t['model_calls_per_step']:.0f} | {t['lift_calls_per_step']:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
