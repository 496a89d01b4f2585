"""QA sampling cost: shared-prefix sampling (``hf-semsoft``) against lm-eval's repeats path (stock ``hf``).

Same N NQ-Open validation questions, the ``nq_open_semagree`` task's own requests (one greedy instance and
one ``repeats=K`` sampled instance per question, expanded as lm-eval's evaluator expands them), same model:

* stock: ``HFLM.generate_until`` of the stock ``hf`` model on all (K + 1)·N requests, ``--stock_batch_size``
  (lm-eval's default 1). Every request encodes the prompt again.
* shared prefix: ``SemSoftLM.generate_until`` (semcal_eval.harness.sampling): one prefill per question, the
  greedy answer and the K samples decoded from its KV cache, finished rows dropped.

The questions are run in chunks, alternating which path goes first, so the load of other processes on the
shared cores hits both. Costs are counted by a forward pre-hook on each model (tokens fed to the model):
prompt tokens encoded (prefill calls, padding included) and generated tokens = decode rows (one-token steps
× rows in the batch) + one last token per row, i.e. every token the model produced, including those a stock
batch keeps producing for rows that already stopped while it waits for its slowest row (at batch size 1 and on
the shared-prefix path this is exactly the answers' token count, stop token included). Greedy answers of both
paths are compared.

    SEMCAL_DATA_DIR=/work/shared/data HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 OMP_NUM_THREADS=1 \
        python benchmarks/bench_qa_sampling.py --n 100 --k 10        # ~25 min on one busy core
"""

from __future__ import annotations

import argparse
import json
import os
import time


def _requests(n: int, k: int):
    from lm_eval.tasks import TaskManager

    from semcal_eval import TASKS_DIR

    tm = TaskManager(include_path=str(TASKS_DIR), include_defaults=False,
                     metadata={"split": "validation", "num_samples": k})
    task = tm.load(["nq_open_semagree"])["tasks"]["nq_open_semagree"]
    task.build_all_requests(limit=n, rank=0, world_size=1)
    per_q: dict[int, list] = {}
    for inst in task.instances:  # lm-eval's evaluator: cloned_reqs.extend([req] * req.repeats)
        per_q.setdefault(inst.doc_id, []).extend([inst] * inst.repeats)
    return [per_q[d] for d in sorted(per_q)]


class TokenCounter:
    """Counts the tokens fed to a model's forward (a public ``register_forward_pre_hook``)."""

    def __init__(self, model):
        self.prefill = self.decode = 0
        self.handle = model.register_forward_pre_hook(self, with_kwargs=True)

    def __call__(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is not None:
            if ids.shape[1] > 1:
                self.prefill += ids.numel()
            else:
                self.decode += ids.numel()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100, help="NQ-Open validation questions")
    ap.add_argument("--k", type=int, default=10, help="samples per question (the task's num_samples)")
    ap.add_argument("--model", default="smollm2-135m", help="semcal catalogue name")
    ap.add_argument("--stock_batch_size", type=int, default=1, help="the stock hf model's batch_size")
    ap.add_argument("--chunk", type=int, default=10, help="questions per alternation chunk")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", default=None, help="also write the numbers as JSON here")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    import lm_eval.models  # noqa: F401  (lm-eval's registry first)
    from lm_eval.api.registry import get_model

    from semcal_eval.models import resolve_pretrained
    from semcal_eval.semsoft.backend import SemSoftLM

    path = resolve_pretrained(f"semcal:{args.model}")
    questions = _requests(args.n, args.k)
    stock = get_model("hf")(pretrained=path, dtype="float32", device="cpu", batch_size=args.stock_batch_size)
    shared = SemSoftLM(pretrained=path, dtype="float32", device="cpu", batch_size=1, sample_seed=args.seed)
    counters = {"stock": TokenCounter(stock.model), "shared": TokenCounter(shared.model)}
    runners = {"stock": stock.generate_until, "shared": shared.generate_until}
    secs = {"stock": 0.0, "shared": 0.0}
    outs: dict[str, list] = {"stock": [], "shared": []}
    loads = [os.getloadavg()[0]]
    torch.manual_seed(args.seed)
    for c, start in enumerate(range(0, len(questions), args.chunk)):
        reqs = [r for q in questions[start : start + args.chunk] for r in q]
        for name in (("stock", "shared") if c % 2 == 0 else ("shared", "stock")):
            t0 = time.perf_counter()
            outs[name] += runners[name](reqs, disable_tqdm=True)
            secs[name] += time.perf_counter() - t0
        loads.append(os.getloadavg()[0])
        print(f"  {min(start + args.chunk, len(questions))}/{len(questions)} questions: stock {secs['stock']:.0f}s,"
              f" shared prefix {secs['shared']:.0f}s", flush=True)

    reqs = [r for q in questions for r in q]
    greedy = [i for i, r in enumerate(reqs) if not r.args[1].get("do_sample")]
    same_greedy = sum(outs["stock"][i] == outs["shared"][i] for i in greedy)
    n = len(questions)
    gen = {k: (c.decode + len(reqs)) / n for k, c in counters.items()}
    res = {
        "model": args.model, "questions": n, "k": args.k, "stock_batch_size": args.stock_batch_size,
        "threads": args.threads, "load_avg_min_max": [min(loads), max(loads)],
        "seconds": secs, "speedup": secs["stock"] / secs["shared"],
        "s_per_question": {k: v / n for k, v in secs.items()},
        "prompt_tokens_per_question": {k: c.prefill / n for k, c in counters.items()},
        "decode_rows_per_question": {k: c.decode / n for k, c in counters.items()},
        "generated_tokens_per_question": gen,
        "shared_generated_tokens_counted": shared.shared_prefix_cost.generated_tokens / n,
        "greedy_equal": f"{same_greedy}/{len(greedy)}",
    }
    print(f"\n{args.model}, {n} NQ-Open validation questions, K = {args.k} (+1 greedy), {args.threads} thread(s), "
          f"stock hf batch_size {args.stock_batch_size}, load avg {min(loads):.1f}-{max(loads):.1f}")
    print(f"{'':28s}{'stock hf (repeats)':>20s}{'hf-semsoft (shared)':>22s}")
    print(f"{'wall time, s':28s}{secs['stock']:>20.1f}{secs['shared']:>22.1f}")
    print(f"{'s / question':28s}{secs['stock'] / n:>20.2f}{secs['shared'] / n:>22.2f}")
    print(f"{'prompt tokens / question':28s}{counters['stock'].prefill / n:>20.1f}{counters['shared'].prefill / n:>22.1f}")
    print(f"{'decode rows / question':28s}{counters['stock'].decode / n:>20.1f}{counters['shared'].decode / n:>22.1f}")
    print(f"{'generated tokens / question':28s}{gen['stock']:>20.1f}{gen['shared']:>22.1f}")
    print(f"speed-up (stock time / shared time): {res['speedup']:.2f}x; greedy answers equal: {res['greedy_equal']}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
