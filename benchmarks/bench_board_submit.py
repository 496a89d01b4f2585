"""`board submit` wall time on a real run, against a bare parse of the same files, in the same process (issue 34).

    SEMCAL_DATA_DIR=../shared/data python benchmarks/bench_board_submit.py RUN_DIR [--repeats 3]

RUN_DIR: an lm-eval ``--output_path`` folder of one ``--log_samples`` run of a semcal classification task (e.g.
``goemotions_semsoft --limit 200 --metadata '{"split": "validation"}'`` on ``semcal:smollm2-135m``). Measured:

* **bare parse**: ``json.loads`` of the results file and of every line of the samples files, nothing checked;
* **submit, no spot check**: ``board submit --no-spot-check`` into a fresh database (every stage: shape,
  provenance, the dataset itself, records, metrics, references, duplicates, storage);
* **submit**: ``board submit`` with the spot check (the re-scoring of the drawn documents with the named model).

Each ``board`` command runs in a fresh process, as a user runs it; its time includes the interpreter start.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def bare_parse(run_dir: Path) -> int:
    """Lines parsed: the results JSON and every samples row, with no check."""
    n = 0
    for p in run_dir.rglob("results_*.json"):
        json.loads(p.read_text(encoding="utf-8"))
        n += 1
    for p in run_dir.rglob("samples_*.jsonl"):
        with open(p, encoding="utf-8") as f:
            for line in f:
                json.loads(line)
                n += 1
    return n


def submit(run_dir: Path, db: Path, spot_check: bool) -> tuple[float, subprocess.CompletedProcess]:
    cmd = [sys.executable, "-m", "semcal_eval", "board", "submit", str(run_dir), "--model-name", "bench",
           "--method", "base", "--db", str(db)] + ([] if spot_check else ["--no-spot-check"])
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    return time.perf_counter() - t, p


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--repeats", type=int, default=3, help="repeats of the bare parse and of the unchecked submit")
    a = ap.parse_args(argv)
    print(f"load {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPU(s)", flush=True)
    parse_s = []
    for _ in range(a.repeats):
        t = time.perf_counter()
        rows = bare_parse(a.run)
        parse_s.append(time.perf_counter() - t)
    parse = statistics.median(parse_s)
    print(f"bare parse: {rows} JSON documents, median {parse:.3f} s over {a.repeats}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        plain = []
        for i in range(a.repeats):
            s, p = submit(a.run, Path(tmp) / f"plain{i}.sqlite", spot_check=False)
            if p.returncode != 0:
                raise SystemExit(f"board submit --no-spot-check failed: {p.stderr[-2000:]}")
            plain.append(s)
        checked, p = submit(a.run, Path(tmp) / "checked.sqlite", spot_check=True)
        if p.returncode != 0:
            raise SystemExit(f"board submit failed: {p.stderr[-2000:]}")
    med = statistics.median(plain)
    print(f"submit --no-spot-check: median {med:.1f} s over {a.repeats} ({med / parse:.0f}x the bare parse)")
    print(f"submit with the spot check: {checked:.1f} s ({checked / parse:.0f}x the bare parse, "
          f"{checked / med:.1f}x the unchecked submit)")
    print(p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
