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

**The judge search** (issue 41, runs first; ``--judge-programs``): the extended grammar (invisible characters,
line separators, punctuation only, number punctuation, padding, echo, paraphrase, near misses of the gold, lists
without a mark) against the ``cover`` judge, on the question/gold pairs of tests/test_judge_adversaries.py
(hand-written, NQ-Open dev, MS MARCO sentence golds):

- correctness: seeded random programs over wrong answers; per op, how many programs held it and how many of
  those turned the wrong answer correct (with examples), listing and non-listing programs apart;
- dressing: programs over the dressing ops on golds the judge accepts verbatim; per op, how many left it wrong;
- agreement: per op and CSR method, the r_cal gain of one rewritten rollout (8 × "Lyon", all wrong; and 4 correct
  + 4 wrong) and of every wrong rollout rewritten with its own argument (the scatter attack), with A = agree().

Writes benchmarks/results/adversary_search/results.json and results.md. ``--no-rewards`` skips the reward search.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
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


OUT = ROOT / "benchmarks" / "results" / "adversary_search"


def judge_search(n_programs: int, seed: int, max_steps: int = 3) -> dict:
    """The ``cover`` judge against the extended grammar: correctness, dressing and agreement (module docstring)."""
    import test_judge_adversaries as T

    from semcal_eval.qa.grading import agree, grade

    rng = np.random.default_rng(seed)
    hand, real = T._instances(T.HAND), T._instances(T.nq_pairs()) + T._instances(T.msmarco_pairs())
    cases = hand + real
    out: dict = {"pairs": {"hand": len(hand), "real": len(real)}, "programs": n_programs, "seed": seed}

    # correctness: wrong → correct, per op
    seen, wins, examples = Counter(), Counter(), defaultdict(list)
    family = Counter()
    for _ in range(n_programs):
        q, g, w = cases[int(rng.integers(len(cases)))]
        prog = G.random_attack(rng, max_steps=max_steps)
        attacked = G.run(prog, w, g, q)
        if T._honest_rewrite(prog, w, g, q, attacked):
            continue
        won = grade(attacked, [g], q)
        fam = "listing" if any(op in T.LISTING for op, _ in prog) else "non_listing"
        family[fam, "programs"] += 1
        family[fam, "wrong_to_correct"] += won
        for op in {op for op, _ in prog}:
            seen[op] += 1
            if won:
                wins[op] += 1
                if len(examples[op]) < 3:
                    examples[op].append({"question": q, "gold": g, "wrong": w, "program": prog, "answer": attacked})
    out["correctness"] = {op: {"programs": seen[op], "wrong_to_correct": wins[op], "examples": examples[op]}
                          for op in G.OPS}
    out["correctness_by_family"] = {f: {"programs": family[f, "programs"],
                                        "wrong_to_correct": family[f, "wrong_to_correct"]}
                                    for f in ("non_listing", "listing")}

    # dressing: a gold the judge accepts verbatim stays correct and agrees with itself
    golds = [(q, g) for q, g, _ in cases if grade(g, [g], q)]
    d_seen, d_bad, d_ex = Counter(), Counter(), defaultdict(list)
    for _ in range(max(n_programs // 4, 1)):
        q, g = golds[int(rng.integers(len(golds)))]
        prog = G.random_attack(rng, max_steps=max_steps, ops=G.DRESSING + G.PARAPHRASING)
        dressed = G.run(prog, g, g, q)
        bad = not (grade(dressed, [g], q) and agree(dressed, g, q))
        for op in {op for op, _ in prog}:
            d_seen[op] += 1
            if bad:
                d_bad[op] += 1
                if len(d_ex[op]) < 2:
                    d_ex[op].append({"question": q, "gold": g, "program": prog, "answer": dressed})
    out["dressing"] = {op: {"programs": d_seen[op], "lost": d_bad[op], "examples": d_ex[op]}
                       for op in G.DRESSING + G.PARAPHRASING}

    # agreement: r_cal gain of rewritten wrong rollouts, per op and CSR method
    agreement = {}
    for op in G.OPS:
        row = {"keeps_claim": op in G.KEEPS_CLAIM}
        # a claim-keeping op with its claim-keeping arguments only (echo: not the question alone)
        ks = [k for k in range(60) if op not in G.KEEPS_CLAIM or G.keeps_claim([(op, k)])][::4]
        for method in T.METHODS:
            one = [T.gain(method, 0, {0: G.apply(op, k, T.WRONG, T.GOLD, T.QUESTION)}) for k in ks]
            mixed = [T.gain(method, 4, {4: G.apply(op, k, T.WRONG, T.GOLD, T.QUESTION)}) for k in ks]
            row[method] = {"one_all_wrong_max": max(one), "one_all_wrong_mean": float(np.mean(one)),
                           "one_half_correct_max": max(mixed),
                           "scatter_all_wrong": T.gain(method, 0, T._scatter(op, 0)),
                           "scatter_half_correct": T.gain(method, 4, T._scatter(op, 4))}
        agreement[op] = row
    out["agreement"] = agreement
    return out


def judge_markdown(res: dict) -> str:
    lines = [f"## The cover judge against the extended grammar ({res['programs']} programs, seed {res['seed']}; "
             f"pairs: {res['pairs']['hand']} hand-written, {res['pairs']['real']} real)", "",
             "### Correctness: wrong answers made correct (programs holding the op)", "",
             "| op | new | programs | wrong → correct | example |", "|---|---|---|---|---|"]
    for op, v in res["correctness"].items():
        ex = v["examples"][0] if v["examples"] else None
        shown = f"{ex['answer'][:60]!r} for {ex['gold'][:30]!r}" if ex else ""
        lines.append(f"| {op} | {'yes' if op in G.NEW_OPS else ''} | {v['programs']} | {v['wrong_to_correct']} | "
                     f"{shown} |")
    fam = res["correctness_by_family"]
    lines += ["", "By family: " + ", ".join(f"{f}: {v['wrong_to_correct']} of {v['programs']}" for f, v in fam.items()),
              "", "### Dressing: a correct gold made wrong (or no longer agreeing with itself)", "",
              "| op | programs | lost | example |", "|---|---|---|---|"]
    for op, v in res["dressing"].items():
        ex = v["examples"][0] if v["examples"] else None
        lines.append(f"| {op} | {v['programs']} | {v['lost']} | {repr(ex['answer'][:60]) if ex else ''} |")
    methods = [m for m in next(iter(res["agreement"].values())) if m != "keeps_claim"]
    lines += ["", "### Agreement: r_cal gain of rewritten wrong rollouts (K = 8; csr in nats, λ not applied)", "",
              "one: one rollout of 8 × 'Lyon' (all wrong) rewritten, max over 15 arguments; scatter: every wrong "
              "rollout rewritten with its own argument. A claim-changing op (keeps claim: no) is paid under csr by "
              "the paper's design (a wrong rollout is paid for disagreeing).", "",
              "| op | keeps claim | " + " | ".join(f"{m} one | {m} scatter" for m in methods) + " |",
              "|---|---|" + "---|---|" * len(methods)]
    for op, row in res["agreement"].items():
        cells = " | ".join(f"{row[m]['one_all_wrong_max']:+.3f} | {row[m]['scatter_all_wrong']:+.3f}" for m in methods)
        lines.append(f"| {op} | {'yes' if row['keeps_claim'] else 'no'} | {cells} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", type=int, default=300)
    ap.add_argument("--groups", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-table", action="store_true")
    ap.add_argument("--judge-programs", type=int, default=6000, help="programs of the judge search (0: skip it)")
    ap.add_argument("--no-rewards", action="store_true", help="skip the search over the shipped rewards")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    results: dict = {}
    md: list[str] = []
    if args.judge_programs:
        res = judge_search(args.judge_programs, args.seed)
        results["judge"] = res
        md.append(judge_markdown(res))
        print(md[-1], "\n", flush=True)
    if not args.no_table:
        table = judge_table()
        md.append("## Verdict table (tests/test_answer_grading.py)\n\n" + table)
        print(table, "\n")
    if args.no_rewards:
        _write(results, md, t0)
        return 0
    rng = np.random.default_rng(args.seed)
    programs = [G.random_attack(rng, max_steps=3) for _ in range(args.programs)]
    head = [f"## Shipped rewards: {args.programs} programs (seed {args.seed}), {args.groups} groups of K = 8 per cell",
            "", "| method | honest acc | attacked | worst correctness pay | worst total pay | worst other pay | "
            "its program | scatter pay (garbled wrong answer) |", "|---|---|---|---|---|---|---|---|"]
    print("\n".join(head))
    rows: list[str] = []
    cells: list[dict] = []
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
                rows.append(f"| {method} | {acc:.0%} | {who} | {worst_c:+.3f} | {worst_t:+.3f} | {worst_r:+.3f} | "
                            f"{' → '.join(f'{o}({k})' for o, k in arg)} | {scatter:+.3f} |")
                cells.append({"method": method, "accuracy": acc, "attacked": who, "worst_correctness": worst_c,
                              "worst_total": worst_t, "worst_other": worst_r, "program": arg, "scatter": scatter})
                print(rows[-1], flush=True)
    results["rewards"] = {"programs": args.programs, "groups": args.groups, "seed": args.seed, "cells": cells}
    md.append("\n".join(head + rows))
    _write(results, md, t0)
    return 0


def _write(results: dict, md: list[str], t0: float) -> None:
    took = time.perf_counter() - t0
    results["seconds"] = round(took, 1)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    (OUT / "results.md").write_text("# Adversary search (benchmarks/adversary_search.py)\n\n" + "\n\n".join(md)
                                    + f"\n\n{took:.0f} s\n")
    print(f"\n{took:.0f} s; wrote {OUT.relative_to(ROOT)}/results.json and results.md")


if __name__ == "__main__":
    raise SystemExit(main())
