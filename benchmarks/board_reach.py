"""How often a forgery of >= 1 % of the documents reaches the spot-checked tier (issue 43), simulated with the
board's own draw and compared with the closed form.

    python benchmarks/board_reach.py [--trials 20000] [--out benchmarks/results/board_reach]

A forger edits m = ceil(1 % of N) documents (the fewest the sample is sized for) and keeps submitting variants
(each a new content hash, so a fresh HMAC draw: ``leaderboards.spotcheck.draw_tag`` under a random 256-bit
secret, then ``sample_doc_ids``) until one is stored spot-checked or the board refuses. Two boards:

* **now** (issue 43): every attempt is recorded as ``started`` before its draw exists, so a rejection, a
  Ctrl-C and a kill -9 all count, and the cap A (3) is the board's, not the environment's. The drawn ids are
  in no command line, so the forger cannot see them: an interrupt is a blind choice, made here with probability
  ``abort`` per attempt. Closed form: P = 1 - (1 - (1 - abort) q)^A, q = C(N-m, k)/C(N, k); abort = 0 is
  ``spotcheck.reach_probability`` and the largest.
* **before** issue 43: the ids were on the re-scoring command line (``ps``) and an interrupted attempt was not
  recorded: the forger aborted, for free, every draw that held a forged document, and resubmitted. Simulated up
  to ``--before-tries`` submissions; closed form 1 - (1 - q)^T, i.e. certain.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sqlite3
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from leaderboards import spotcheck  # noqa: E402
from leaderboards.attempts import DEFAULT_MAX_ATTEMPTS  # noqa: E402


def _board() -> sqlite3.Connection:
    """A board's meta table: draw_tag creates its 256-bit secret there."""
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    return con


def closed_form(n: int, m: int, cap: int, abort: float = 0.0) -> float:
    """P(reach) over ``cap`` counted attempts, each interrupted blindly with probability ``abort``."""
    q = spotcheck.miss_probability(n, m, spotcheck.sample_size(n))
    return 1.0 - (1.0 - (1.0 - abort) * q) ** cap


def simulate_now(n: int, cap: int, trials: int, abort: float, seed: int) -> tuple[int, int]:
    """(forgers that reached the tier, attempts made in all) on the current board."""
    con, rng = _board(), random.Random(seed)
    ids, m = list(range(n)), math.ceil(0.01 * n)
    reached = made = 0
    for t in range(trials):
        forged = set(rng.sample(ids, m))
        for a in range(cap):  # every attempt counts from its 'started' row on, whatever happens next
            made += 1
            tag = spotcheck.draw_tag(con, f"forgery-{seed}-{t}-{a}", "task", "docs")
            drawn = set(spotcheck.sample_doc_ids(ids, tag))
            if rng.random() < abort:
                continue  # interrupted: the ids were never visible, so this is a blind choice; it counts
            if not forged & drawn:
                reached += 1
                break
    return reached, made


def simulate_before(n: int, tries: int, trials: int, seed: int) -> tuple[int, float]:
    """(forgers that reached the tier within ``tries`` submissions, mean submissions used) on the board before
    issue 43: drawn ids read from ``ps``, aborts unrecorded, so only a draw that misses is ever let finish."""
    con, rng = _board(), random.Random(seed)
    ids, m = list(range(n)), math.ceil(0.01 * n)
    reached, used = 0, 0
    for t in range(trials):
        forged = set(rng.sample(ids, m))
        for a in range(tries):
            tag = spotcheck.draw_tag(con, f"before-{seed}-{t}-{a}", "task", "docs")
            if not forged & set(spotcheck.sample_doc_ids(ids, tag)):
                reached += 1
                used += a + 1
                break
        else:
            used += tries
    return reached, used / trials


def _ci(p: float, n: int) -> list[float]:
    """Wilson 95 % interval of a proportion."""
    z = 1.959964
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return [max(0.0, mid - half), min(1.0, mid + half)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20000, help="forgers per cell (current board)")
    ap.add_argument("--before-trials", type=int, default=300, help="forgers per cell (board before issue 43)")
    ap.add_argument("--before-tries", type=int, default=1000, help="submissions a forger makes before issue 43")
    ap.add_argument("--sizes", default="200,445,4548")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "board_reach")
    args = ap.parse_args(argv)
    cap = DEFAULT_MAX_ATTEMPTS
    rows = []
    t0 = time.perf_counter()
    for n in (int(x) for x in args.sizes.split(",")):
        k, m = spotcheck.sample_size(n), math.ceil(0.01 * n)
        q = spotcheck.miss_probability(n, m, k)
        trials = args.trials if n < 1000 else max(1, args.trials // 4)  # a draw of 432 of 4,548 costs more
        for abort in (0.0, 0.5):
            hit, made = simulate_now(n, cap, trials, abort, seed=n)
            p = hit / trials
            rows.append({"board": "now", "N": n, "k": k, "m": m, "q_miss_per_draw": q, "cap": cap,
                         "abort_probability": abort, "trials": trials, "attempts_made": made, "reached": hit,
                         "simulated": p, "ci95": _ci(p, trials), "closed_form": closed_form(n, m, cap, abort)})
            print(f"now    N={n:<5} k={k:<4} m={m:<3} abort={abort:.1f}: simulated {p:.4f} "
                  f"[{rows[-1]['ci95'][0]:.4f}, {rows[-1]['ci95'][1]:.4f}], closed form {rows[-1]['closed_form']:.4f}",
                  flush=True)
        if n < 1000:
            hit, used = simulate_before(n, args.before_tries, args.before_trials, seed=n + 1)
            p = hit / args.before_trials
            rows.append({"board": "before issue 43", "N": n, "k": k, "m": m, "q_miss_per_draw": q,
                         "cap": "none (aborts unrecorded)", "tries": args.before_tries,
                         "trials": args.before_trials, "reached": hit, "simulated": p,
                         "ci95": _ci(p, args.before_trials), "mean_submissions": used,
                         "closed_form": 1.0 - (1.0 - q) ** args.before_tries})
            print(f"before N={n:<5} k={k:<4} m={m:<3}: simulated {p:.4f}, closed form {rows[-1]['closed_form']:.4f}, "
                  f"{used:.0f} submissions on average", flush=True)
    elapsed = time.perf_counter() - t0
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "board_reach.json").write_text(json.dumps(
        {"command": "python benchmarks/board_reach.py " + " ".join(argv if argv is not None else sys.argv[1:]),
         "seconds": round(elapsed, 1), "rows": rows}, indent=2) + "\n")
    lines = ["# P(a forgery of >= 1 % of documents reaches the spot-checked tier)", "",
             f"`python benchmarks/board_reach.py` ({elapsed:.0f} s). The board's own draw (HMAC under a random secret, "
             "`sample_doc_ids`); m = ceil(1 % of N) forged documents; each attempt a new variant (a fresh draw).", "",
             "| board | N | k | m | cap | interrupted blindly | forgers | simulated [95 % CI] | closed form |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        how = f"{r['abort_probability']:.0%} of attempts" if r["board"] == "now" else \
            f"every draw holding a forged doc (seen in `ps`), free; up to {r['tries']} submissions"
        lines.append(f"| {r['board']} | {r['N']} | {r['k']} | {r['m']} | {r['cap']} | {how} | {r['trials']} | "
                     f"{r['simulated']:.4f} [{r['ci95'][0]:.4f}, {r['ci95'][1]:.4f}] | {r['closed_form']:.4f} |")
    lines += ["", "Closed form now: 1 - (1 - (1 - a) q)^A with q = C(N-m, k)/C(N, k) <= 0.01 and A = 3 counted "
              "attempts (an interrupt a counts and only lowers it): at most 1 - 0.99^3 = 2.97 %. Before issue 43 the "
              "forger saw the ids and aborted for free, so P = 1 - (1 - q)^T -> 1."]
    (args.out / "board_reach.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}/board_reach.json and .md in {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
