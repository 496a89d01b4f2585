"""Re-grade a protocol run's greedy answers with this tree's judge: does any verdict differ from the run's?

Usage: python benchmarks/protocol_regrade.py OUT   (OUT: the folder given to `semcal-train protocol --out`)

Reads every evaluation sample of the ``judge_cover`` filter row under ``OUT/*/eval/``, grades its greedy answer
with :func:`semcal_eval.qa.grading.grade` and prints each verdict that differs from the one the run recorded.
"""

from __future__ import annotations

import glob
import json
import sys

from semcal_eval.qa.grading import grade


def regrade(out: str) -> tuple[int, int]:
    """(answers re-graded, verdicts that differ) over the run folder ``out``."""
    n = diff = 0
    for path in sorted(glob.glob(f"{out}/*/eval/*/samples_*.jsonl")):
        with open(path, encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                if r["filter"] != "judge_cover" or not isinstance(r["filtered_resps"], list):
                    continue
                info = json.loads(r["filtered_resps"][1])
                doc = r["doc"]
                golds = doc.get("qa_golds") or doc.get("golds") or doc.get("answers") or [r["target"]]
                verdict = grade(info["greedy"], golds, doc.get("qa_question") or doc.get("question", ""))
                n += 1
                if int(verdict) != int(info["correct"]):
                    diff += 1
                    print("DIFF", path.split("/")[-3], repr(info["greedy"][:80]), golds[:3], info["correct"], "->",
                          int(verdict))
    return n, diff


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    n, diff = regrade(sys.argv[1])
    if n == 0:
        sys.exit(f"no judge_cover samples under {sys.argv[1]}/*/eval/: is it a `semcal-train protocol --out` folder?")
    print(f"{n} greedy answers re-graded, {diff} verdicts differ")
