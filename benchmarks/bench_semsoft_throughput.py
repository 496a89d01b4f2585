"""Throughput and memory of the Semantic Softmax path, side by side with the obvious alternatives.

1. documents/s of ``goemotions_semsoft`` on ``hf-semsoft`` vs ``goemotions_base`` on stock ``--model hf``
   (same model, same documents, full lm-eval path);
2. overhead of ``semsoft()`` over a bare forward pass that keeps only the answer position (same batches);
3. peak RSS of a process running the semsoft path vs one running plain HFLM on the same documents.

Each measurement runs in its own subprocess (clean RSS), alternating A/B/A/B so machine load hits both;
the load average is recorded because other processes on 2 cores distort timings.

    SEMCAL_DATA_DIR=../shared/data python benchmarks/bench_semsoft_throughput.py --limit 48 --repeats 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

MODES = ("semsoft", "base")


def child(mode: str, limit: int, model: str, batch_size: int) -> dict:
    import lm_eval
    import torch
    from lm_eval.tasks import TaskManager

    from semcal_eval import TASKS_DIR
    from semcal_eval.cli import register_backends
    from semcal_eval.models import resolve_pretrained

    torch.set_num_threads(int(os.environ.get("SEMCAL_THREADS", "2")))
    register_backends()
    meta = {"split": "validation", "recalibrate": False}
    path = resolve_pretrained(f"semcal:{model}")
    task = "goemotions_semsoft" if mode == "semsoft" else "goemotions_base"
    lm_name = "hf-semsoft" if mode == "semsoft" else "hf"
    from lm_eval.api.registry import get_model

    lm = get_model(lm_name)(pretrained=path, dtype="float32", device="cpu", batch_size=batch_size)
    t0 = time.perf_counter()
    lm_eval.simple_evaluate(model=lm, tasks=[task], limit=limit, task_manager=TaskManager(
        include_path=str(TASKS_DIR), metadata=meta), metadata=meta, verbosity="ERROR")
    secs = time.perf_counter() - t0
    out = {"mode": mode, "docs_per_s": limit / secs, "seconds": secs,
           "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if mode == "semsoft":
        out.update(overhead(lm, limit))
    return out


def overhead(lm, limit: int) -> dict:
    """Time semsoft() against last_token_logits() alone on the same contexts and batches."""
    from lm_eval.api.instance import Instance

    from semcal_eval.data import GOEMOTIONS_LABELS, load

    import importlib.util

    spec = importlib.util.spec_from_file_location("ge_utils", os.path.join(
        os.path.dirname(__file__), "..", "tasks", "goemotions", "utils.py"))
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    docs = load("goemotions", split="validation").select(range(limit))
    ctxs = [utils.doc_to_text(d) + "Emotion:" for d in docs]
    s = {"choices": [" " + l for l in GOEMOTIONS_LABELS], "top_k": 100, "tau": [0.2], "label_embedding": "first"}
    reqs = [Instance("semsoft", {}, (c, s), 0, ("bench", i, 1)) for i, c in enumerate(ctxs)]
    bs = lm.batch_size
    seqs = [lm.encode_choices(c, s["choices"][:1])[0] for c in ctxs]
    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
    bare, full = [], []
    for _ in range(2):
        t0 = time.perf_counter()
        for st in range(0, len(order), bs):
            lm.last_token_logits([seqs[i] for i in order[st : st + bs]])
        bare.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        lm.semsoft(reqs, disable_tqdm=True)
        full.append(time.perf_counter() - t0)
    return {"bare_forward_s": min(bare), "semsoft_call_s": min(full)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--child", choices=MODES)
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.limit, args.model, args.batch_size)), flush=True)
        return
    runs = {m: [] for m in MODES}
    loads = []
    for r in range(args.repeats):
        for mode in (MODES if r % 2 == 0 else MODES[::-1]):
            loads.append(os.getloadavg()[0])
            p = subprocess.run([sys.executable, __file__, "--child", mode, "--limit", str(args.limit),
                                "--model", args.model, "--batch_size", str(args.batch_size)],
                               capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1",
                                                                    "HF_DATASETS_OFFLINE": "1"})
            line = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
            if not line:
                sys.exit(f"{mode} run failed:\n{p.stderr[-3000:]}")
            res = json.loads(line[0][7:])
            runs[mode].append(res)
            print(f"[{mode}] {res['docs_per_s']:.2f} docs/s, peak RSS {res['max_rss_mb']:.0f} MB", flush=True)
    best = {m: max(runs[m], key=lambda x: x["docs_per_s"]) for m in MODES}
    sem, base = best["semsoft"], best["base"]
    ovh = min(runs["semsoft"], key=lambda x: x["semsoft_call_s"] / x["bare_forward_s"])
    print(f"\nmodel {args.model}, {args.limit} GoEmotions validation docs, batch {args.batch_size}, "
          f"load avg during runs {min(loads):.1f}-{max(loads):.1f}")
    print(f"throughput: hf-semsoft goemotions_semsoft {sem['docs_per_s']:.2f} docs/s vs stock hf "
          f"goemotions_base {base['docs_per_s']:.2f} docs/s -> ratio {sem['docs_per_s'] / base['docs_per_s']:.2f}x")
    print(f"overhead over a bare last-position forward: semsoft() {ovh['semsoft_call_s']:.2f}s vs forward "
          f"{ovh['bare_forward_s']:.2f}s -> +{100 * (ovh['semsoft_call_s'] / ovh['bare_forward_s'] - 1):.1f}%")
    print(f"peak RSS: semsoft {sem['max_rss_mb']:.0f} MB vs plain HFLM {base['max_rss_mb']:.0f} MB -> "
          f"{100 * (sem['max_rss_mb'] / base['max_rss_mb'] - 1):+.1f}%")


if __name__ == "__main__":
    main()
