"""The policy lab's table (docs/TRAINING.md, "The policy lab"): shared-parameter policy, csr.yaml's generation
batch (4 prompts × K = 8), 500 steps, trained on 200 questions and scored on 200 held-out ones by true meaning,
20 seeds; with the trick forms of trainers/adversaries.py among the candidates and without them.

    python benchmarks/policy_lab.py [--seeds 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainers import policy_lab as P  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    for adv in (True, False):
        res = P.run(seeds=tuple(range(args.seeds)), adversaries=adv)
        m = res["_meta"]
        print(f"\n## Policy lab, {'with' if adv else 'without'} the trick forms: {m['n_questions'] // 2} training + "
              f"{m['n_questions'] // 2} held-out questions, 4 prompts × K = 8 per step, {m['steps']} steps, Adam lr "
              f"{m['lr']}, seeds 0–{args.seeds - 1} (mean ± 95 % t-interval over seeds; held-out; truth by meaning)\n")
        rows = P.summarise(res)
        print(P.format_table(rows))
        ch = next(r for r in rows if r["design"] == P.CHOSEN.name)
        print(f"\nchosen vs RLVR: Δacc {ch['dacc'][0]:+.3f} (worst seed {ch['dacc'][2]:+.3f}), ECE ratio "
              f"{ch['ece_ratio'][0]:.2f} (worst seed {ch['ece_ratio'][1]:.2f}), Δtrick {ch['dtrick']:+.3f}; "
              f"criteria (Δacc ≥ −0.02, ECE ratio ≤ 0.6, Δtrick ≤ 0.005): {'pass' if P.passes(ch) else 'FAIL'}; "
              f"{m['seconds']:.1f} s")
    print(f"\nwall time {time.perf_counter() - t0:.1f} s on {os.cpu_count()} CPU(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
