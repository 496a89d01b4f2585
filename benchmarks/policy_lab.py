"""The policy lab's tables (benchmarks/results/policy_lab/README.md): the shipped configs csr.yaml (the paper's reward),
csr_likelihood.yaml, csr_spread.yaml and rlvr.yaml trained by GRPO on a shared-parameter policy (the configs'
generation batch of 32 completions = 32 / K prompts × K rollouts per step, 500 steps), with the trick forms of
research/answer_grammar.py among the candidates; trained on 200 questions and scored on 200 held-out ones; the
post-hoc references RLVR + Platt and RLVR + isotonic (fitted on the training questions) and the family's
likelihood fit. One table per K: mean ± 95 % t-interval over seeds, worst seed for Δacc and the ECE ratio vs RLVR,
trick pay per term, and the calibration pay per trick form.

    python benchmarks/policy_lab.py --k 8 [--k 4 ...] [--seeds 20] [--first-seed 0] [--steps 500]
        [--questions 400] [--ablations] [--no-adversaries]

The first line of the output is the command that made it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

# the lab's matrices are small: BLAS threads only contend (and spin) on a shared machine
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from research import policy_lab as P  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, action="append", help="group size K (repeat for several tables; default 4 and 8)")
    ap.add_argument("--seeds", type=int, default=20, help="number of seeds")
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first..first+seeds-1 (100: seeds never tuned on)")
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--questions", type=int, default=400, help="questions per world (half train, half held out)")
    ap.add_argument("--ablations", action="store_true",
                    help="also the ablation designs (research.policy_lab.ABLATIONS)")
    ap.add_argument("--no-adversaries", action="store_true", help="a world without the trick forms")
    args = ap.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    print("$ python benchmarks/policy_lab.py " + " ".join(shlex.quote(a) for a in argv))
    t0 = time.perf_counter()
    seeds = tuple(range(args.first_seed, args.first_seed + args.seeds))
    designs = P.MAIN + (P.ABLATIONS if args.ablations else [])
    for K in args.k or [4, 8]:
        res = P.run(designs, seeds=seeds, K=K, steps=args.steps, n_questions=args.questions,
                    adversaries=not args.no_adversaries,
                    progress=lambda line: print(f"K = {K}: {line}", file=sys.stderr, flush=True))
        m = res["_meta"]
        half = m["n_questions"] // 2
        print(f"\n## Policy lab, K = {K}: {half} training + {half} held-out questions, "
              f"{m['prompts'][0]} prompts × K = {K} per step (the configs' generation batch), {m['steps']} steps, Adam "
              f"lr {m['lr']}, seeds {seeds[0]}–{seeds[-1]}, {'with' if m['adversaries'] else 'without'} the trick "
              f"forms; held-out; mean ± 95 % t-interval over seeds ({m['seconds']:.0f} s)\n")
        rows = P.summarise(res)
        print(P.format_table(rows))
        pay = P.format_pay_by_form([r for r in rows if r["design"] in {d.name for d in designs}])
        if pay:
            print(f"\nTrick pay per form at K = {K} (calibration term λ(t)·r_cal of a wrong entity's trick rollout "
                  "over its plain form in the same group, mean over seeds; the correctness term is shown only where it is "
                  "not 0):\n")
            print(pay)
    print(f"\nwall time {time.perf_counter() - t0:.1f} s on {os.cpu_count()} CPU(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
