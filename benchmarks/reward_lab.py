"""The reward lab's table (benchmarks/results/policy_lab/README.md, "The reward lab").

Every design of ``research.reward_lab.DESIGNS`` trained by GRPO on a tabular policy (200 questions, K = 8,
300 steps) for 5 seeds, mean ± sd over seeds; then the shipped methods (csr.yaml — the paper's reward —,
csr_likelihood.yaml, csr_spread.yaml) against rlvr.yaml and the design before the lab in other lab settings
(learning rate, difficulty), so that a conclusion that holds only in one setting shows. The first line of the
output is the command that made it.

    python benchmarks/reward_lab.py [--seeds 5] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from research import reward_lab as L  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="the main table only")
    args = ap.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    print("$ python benchmarks/reward_lab.py " + " ".join(shlex.quote(a) for a in argv))
    seeds = tuple(range(args.seeds))
    t0 = time.perf_counter()
    res = L.run_lab(L.DESIGNS, seeds=seeds)
    m = res["_meta"]
    print(f"## Reward lab: {m['n_questions']} questions, K = {m['K']}, {m['steps']} steps, lr {m['lr']}, "
          f"seeds {m['seeds']} (mean ± sd over seeds)\n")
    print(L.format_table(res))
    shipped = (L.CSR, L.CSR_LIKELIHOOD, L.CSR_SPREAD)
    rl = res[L.RLVR.name]["mean"]
    for d in shipped:
        ch = res[d.name]["mean"]
        print(f"\n{d.name} vs {L.RLVR.name}: accuracy {ch['acc'] - rl['acc']:+.3f}, ECE ratio "
              f"{ch['ece'] / rl['ece']:.2f}, Brier ratio {ch['brier'] / rl['brier']:.2f}, "
              f"AUROC {ch['auroc'] - rl['auroc']:+.3f}")
        paired = [(c["ece"] / r["ece"], c["acc"] - r["acc"], c["auroc"] - r["auroc"])
                  for c, r in zip(res[d.name]["runs"], res[L.RLVR.name]["runs"])]
        print("per seed (ECE ratio, Δacc, ΔAUROC): "
              + ", ".join(f"({a:.2f}, {b:+.3f}, {c:+.3f})" for a, b, c in paired))
    if not args.quick:
        print("\n## Sensitivity: other lab settings (same seeds)\n")
        print("| setting | design | acc | ECE | Brier | AUROC | empty | distinct-wrong | lost |")
        print("|---|---|---|---|---|---|---|---|---|")
        settings = [
            ("lr 0.01", dict(lr=0.01), {}),
            ("lr 0.04", dict(lr=0.04), {}),
            ("easier: acc_power 2", {}, dict(acc_power=2.0)),
            ("K = 4", dict(num_generations=4), {}),
            ("150 steps", dict(steps=150), {}),
        ]
        summary = []
        designs = [L.RLVR, L.TODAY, *shipped]
        for label, kw, wkw in settings:
            r = L.run_lab(designs, seeds=seeds, world_kwargs=wkw, **kw)
            for d in designs:
                mm, sd = r[d.name]["mean"], r[d.name]["sd"]
                cells = [f"{mm[k]:.3f} ± {sd[k]:.3f}" for k in ("acc", "ece", "brier", "auroc")]
                cells += [f"{mm[k]:.2f}" for k in ("empty", "distinct_wrong", "lost")]
                print(f"| {label} | {d.name} | " + " | ".join(cells) + " |")
            b = r[L.RLVR.name]["mean"]
            for d in shipped:
                a = r[d.name]["mean"]
                summary.append(f"{label}, {d.name}: Δacc {a['acc'] - b['acc']:+.3f}, "
                               f"ECE ratio {a['ece'] / b['ece']:.2f}, "
                               f"Brier ratio {a['brier'] / b['brier']:.2f}, ΔAUROC {a['auroc'] - b['auroc']:+.3f}")
        print(f"\nvs {L.RLVR.name} per setting:\n" + "\n".join("  " + x for x in summary))
    print(f"\nwall time {time.perf_counter() - t0:.1f} s on {os.cpu_count()} CPU(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
