"""Adversary search over every shipped method's reward: the worst transformation per method and honest accuracy.

    python benchmarks/adversary_search.py [--programs 300] [--groups 30] [--seed 0]

For each method (the shipped trainers/configs/<method>.yaml) and honest accuracy 0, 10, 30, 50 % (K = 8), draws
``--programs`` attack programs from the grammar of research/answer_grammar.py (seeded), applies each to one wrong
and one correct rollout per group (tests/reward_search.py) and prints the worst mean pay of the correctness term
and of the rest of the reward (λ·r_cal for the CSR methods), with the program that earns it. The correctness
column must be ≤ 0 everywhere. Run it against another checkout's trainers (e.g. the tree before issue 31) with
``PYTHONPATH=/path/to/old/checkout``: the grammar and the search come from this checkout's tests/.
Also prints the verdict table of tests/test_answer_grading.py under the grader in use and under the token-F1
rules used before issue 31 (training: F1 on the span; evaluation: whole-line F1), and where they disagree.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.append(str(ROOT))

from research import answer_grammar as G  # noqa: E402
import reward_search as S  # noqa: E402


def _methods() -> list[str]:
    from trainers.config import METHODS

    return [m for m in S.METHODS if m in METHODS and (S.REPO / "trainers" / "configs" / f"{m}.yaml").exists()]


def judge_table() -> str:
    from test_answer_grading import CASES

    from semcal_eval.qa.answers import best_f1
    from semcal_eval.qa.grading import grade
    from semcal_eval.qa.judges import F1Judge
    from trainers.answer_match import answer_budget, short_answer

    q = "What is the capital of France?"
    lines = ["| answer | golds | expected | grader now | before: training (span F1) | before: evaluation (line F1) |",
             "|---|---|---|---|---|---|"]
    bad_now = bad_train = bad_eval = split = 0
    for answer, golds, want, _ in CASES:
        now = grade(answer, golds, q)
        train = any(F1Judge().equivalent(q, [(short_answer(answer, q, answer_budget(golds, q)), g) for g in golds])) \
            if answer.strip() else False
        ev = best_f1(answer, golds) >= 0.5
        bad_now += now != want
        bad_train += train != want
        bad_eval += ev != want
        split += train != ev
        lines.append(f"| {answer[:40]!r} | {golds[0][:20]!r} | {want} | {now} | {train} | {ev} |")
    lines.append(f"\nwrong verdicts of {len(CASES)}: grader now {bad_now}; before: training {bad_train}, "
                 f"evaluation {bad_eval}; training and evaluation disagreed before on {split}, now on 0 "
                 f"(one function)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", type=int, default=300)
    ap.add_argument("--groups", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-table", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if not args.no_table:
        print(judge_table(), "\n")
    rng = np.random.default_rng(args.seed)
    programs = [G.random_attack(rng, max_steps=3) for _ in range(args.programs)]
    print(f"{args.programs} programs (seed {args.seed}), {args.groups} groups of K = 8 per cell\n")
    print("| method | honest acc | attacked | worst correctness pay | worst total pay | worst other pay | its program | "
          "scatter pay (garbled wrong answer) |")
    print("|---|---|---|---|---|---|---|---|")
    for method in _methods():
        for acc in S.ACCURACIES:
            scatter = S.scatter_pay(method, acc, n_groups=args.groups)
            for who in ("wrong", "correct"):
                if (who == "wrong" and acc >= 1) or (who == "correct" and acc == 0):
                    continue
                worst_c, worst_t, worst_r, arg = -np.inf, -np.inf, -np.inf, None
                for prog in programs:
                    pay = S.attack_pay(method, prog, acc, n_groups=args.groups, seed=args.seed, who=who)
                    worst_c, worst_t = max(worst_c, pay.max_correctness), max(worst_t, pay.total)
                    if pay.rest > worst_r:
                        worst_r, arg = pay.rest, prog
                print(f"| {method} | {acc:.0%} | {who} | {worst_c:+.3f} | {worst_t:+.3f} | {worst_r:+.3f} | "
                      f"{' → '.join(f'{o}({k})' for o, k in arg)} | {scatter:+.3f} |", flush=True)
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
