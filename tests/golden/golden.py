"""Golden outputs of small real runs, saved before the issue-15 refactor and compared after it.

Each case is a real ``semcal-eval`` (lm-eval) run on the embedded default model (SmolLM2-135M) with a small
``--limit``; the board case submits the GoEmotions run and renders the site. What is kept is what a refactor
must not change: every metric of ``results_*.json`` and every per-document record of ``samples_*.jsonl``
(one record per (task, filter, doc_id)), and the board's recomputed entry columns.

``python tests/golden/golden.py`` regenerates the files (only do that on purpose: the point of a golden
file is that it was written by the code *before* a change).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

# (case name, tasks, limit, metadata): small enough for CI, big enough for the cross-fitted rows (>= 40 docs).
CASES = {
    "goemotions": ("goemotions_semsoft,goemotions_base", 40, {"split": "validation"}),
    "civil_ambiguous": ("civil_comments_ambiguous_semsoft", 40, {"split": "train"}),
    # correctness "f1": the rule these files were written with; since issue 31 the tasks default to "strict"
    # (semcal_eval.qa.grading), and tests/test_answer_grading.py checks that rule on its own
    "nq_open": ("nq_open_semagree", 12, {"split": "validation", "num_samples": 5, "correctness": "f1",
                                         "estimator_judge": "f1"}),
}


# Extra model_args per case. nq_open samples through HFLM's own generate_until, the path these files were written
# with: since issue 13, hf-semsoft draws the QA samples from a shared prefix (docs/SAMPLING.md), which gives the
# same distribution but other draws; tests/test_shared_prefix.py checks that path against the stock one.
MODEL_ARGS_EXTRA = {"nq_open": ",shared_prefix=False"}


def run_case(name: str, out: Path) -> Path:
    """Run one case through the ``semcal-eval`` CLI into ``out``; return the output folder."""
    tasks, limit, meta = CASES[name]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", "semcal_eval", "--model", "hf-semsoft",
           "--model_args", "pretrained=semcal:smollm2-135m,dtype=float32" + MODEL_ARGS_EXTRA.get(name, ""), "--device", "cpu",
           "--batch_size", "8", "--tasks", tasks, "--limit", str(limit), "--log_samples",
           "--output_path", str(out), "--metadata", json.dumps(meta), "--seed", "0"]
    subprocess.run(cmd, check=True, env=env, cwd=REPO, stdout=subprocess.DEVNULL)
    return out


def _num(v):
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return v


def normalise_run(out: Path) -> dict:
    """{"metrics": {task: {"metric,filter": value}}, "records": {task: {filter: {doc_id: record}}}}."""
    results_path = sorted(out.rglob("results_*.json"))[-1]
    results = json.loads(results_path.read_text())
    date_id = results_path.stem[len("results_"):]
    metrics, records = {}, {}
    for task, row in results["results"].items():
        metrics[task] = {k: _num(v) for k, v in row.items()
                         if isinstance(v, (int, float)) and not isinstance(v, bool) and "," in k}
        sp = results_path.with_name(f"samples_{task}_{date_id}.jsonl")
        recs: dict = {}
        for line in sp.read_text().splitlines():
            s = json.loads(line)
            names = s.get("metrics") or []
            items = {m: s[m] for m in names if isinstance(s.get(m), dict)}
            if not items:
                continue
            first = next(iter(items.values()))
            # the record, plus any metric whose logged item differs from it (before issue 15 the QA tasks
            # logged other items under em / conf_parse_rate / *_entropy)
            views = {m: it for m, it in items.items() if it != first}
            recs.setdefault(s.get("filter", "none"), {})[str(s["doc_id"])] = (
                {"record": first, "views": views} if views else {"record": first})
        records[task] = recs
    return {"metrics": metrics, "records": records}


def board_case(run_dir: Path, work: Path) -> dict:
    """Submit ``run_dir`` to a fresh board and render it; the board's recomputed columns per entry."""
    env = {**os.environ}
    db = work / "board.sqlite"
    # --no-spot-check: the golden case compares the board's columns; the spot check (a second model pass)
    # has its own tests (tests/test_board_verify.py)
    for args in (["board", "submit", str(run_dir), "--model-name", "golden/smollm2", "--method", "semsoft",
                  "--db", str(db), "--no-spot-check"],
                 ["board", "render", "--out", str(work / "site"), "--db", str(db)]):
        subprocess.run([sys.executable, "-m", "semcal_eval", *args], check=True, env=env, cwd=REPO,
                       stdout=subprocess.DEVNULL)
    import sqlite3

    con = sqlite3.connect(db)
    rows = con.execute("SELECT task, filter, board, n_docs FROM entries ORDER BY task, filter").fetchall()
    con.close()
    site = sorted(str(p.relative_to(work / "site")) for p in (work / "site").rglob("*") if p.is_file())
    return {"entries": {f"{t}|{f}": {"board": json.loads(b), "n_docs": n} for t, f, b, n in rows},
            "site_files": [s for s in site if not s.endswith(".png")]}


def path(name: str) -> Path:
    return HERE / f"{name}.json.gz"


def save(name: str, obj: dict) -> None:
    with gzip.open(path(name), "wt") as f:
        json.dump(obj, f, sort_keys=True, indent=0)


def load(name: str) -> dict:
    with gzip.open(path(name), "rt") as f:
        return json.load(f)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for case in sys.argv[1:] or CASES:
            out = run_case(case, tmp / case)
            save(case, normalise_run(out))
            print("saved", path(case))
        if (tmp / "goemotions").is_dir():
            save("board", board_case(tmp / "goemotions", tmp / "board"))
        print("saved", path("board"))
