"""The policy lab's table (docs/TRAINING.md, "The policy lab"): shared-parameter policy, csr.yaml's generation
batch (4 prompts × K = 8), 500 steps, trained on 200 questions and scored on 200 held-out ones by true meaning,
20 seeds; with the trick forms of trainers/adversaries.py among the candidates and without them; the family's
likelihood fit as a reference row; then the chosen design at K = 4, 8, 16.

    python benchmarks/policy_lab.py [--seeds 20] [--no-ablation]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainers import policy_lab as P  # noqa: E402


def _verdict(rows: list[dict], name: str, seconds: float) -> str:
    ch = next(r for r in rows if r["design"] == name)
    return (f"{name} vs RLVR: Δacc {ch['dacc'][0]:+.3f} (worst seed {ch['dacc'][2]:+.3f}), ECE ratio "
            f"{ch['ece_ratio'][0]:.2f} (worst seed {ch['ece_ratio'][1]:.2f}), Brier {ch['brier'][0]:.3f}, trick pay "
            f"{ch['trick_pay'][0]:+.3f}; criteria (Δacc ≥ −0.02, ECE ratio ≤ 0.6, trick pay ≤ 0.005): "
            f"{'pass' if P.passes(ch) else 'FAIL'}; {seconds:.1f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first..first+seeds-1 (100: unseen seeds)")
    ap.add_argument("--no-ablation", action="store_true", help="skip the K = 4, 8, 16 table")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    seeds = tuple(range(args.first_seed, args.first_seed + args.seeds))
    for adv in (True, False):
        res = P.run(seeds=seeds, adversaries=adv, reference=True)
        m = res["_meta"]
        print(f"\n## Policy lab, {'with' if adv else 'without'} the trick forms: {m['n_questions'] // 2} training + "
              f"{m['n_questions'] // 2} held-out questions, 4 prompts × K = {m['K']} per step, {m['steps']} steps, "
              f"Adam lr {m['lr']}, seeds {seeds[0]}–{seeds[-1]} (mean ± 95 % t-interval over seeds; held-out; truth by "
              "meaning)\n")
        rows = P.summarise(res)
        print(P.format_table(rows))
        print("\n" + _verdict(rows, P.CHOSEN.name, m["seconds"]))
        print(_verdict(rows, P.LIKELIHOOD.name, m["seconds"]))
        print(_verdict(rows, P.BCE.name, m["seconds"]))
    if not args.no_ablation:
        for K in (4, 16):
            res = P.run([P.RLVR, P.BCE, P.LIKELIHOOD, P.CHOSEN], seeds=seeds, K=K)
            rows = P.summarise(res)
            print(f"\n## K = {K} (with the trick forms, 4 prompts × K per step, otherwise as above)\n")
            print(P.format_table(rows))
            print("\n" + _verdict(rows, P.CHOSEN.name, res["_meta"]["seconds"]))
    print(f"\nwall time {time.perf_counter() - t0:.1f} s on {os.cpu_count()} CPU(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
