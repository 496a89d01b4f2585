"""Quality of the QA confidences: AUROC (correct vs wrong greedy answers) of each confidence variant,
side by side on the same generations, on NQ-Open dev and HotpotQA dev.

Per question: the semcal QA prompt (semcal_eval.qa.QA_DESCRIPTION), one greedy answer and K samples
(T = 1.0, top_p 1.0, top_k off, stop at a newline), generated with transformers directly so that sequence
log-probs are available. Correct ⇔ best token-F1 against the gold aliases ≥ 0.5.

Confidence variants (all from the same generations):
  share[judge]     share of the K samples in the greedy answer's cluster (semcal's primary confidence)
  1-SE/logK[judge] discrete semantic entropy
  1-LWSE/logK[f1]  likelihood-weighted semantic entropy (length-normalised sequence log-probs)
  p(greedy)        the obvious alternative without sampling: exp(mean token log-prob) of the greedy answer
judges: f1 (token-F1 ≥ 0.5), em (normalised exact match), embed (all-MiniLM-L6-v2 cosine ≥ 0.85).

Defaults fit 2 CPU cores: the first 100 questions of each dev set, K = 5 (documented subset; the tasks'
default K is 10). Anchor: the semantic-entropy papers report AUROC ≈ 0.75–0.85 for 7B+ models on TriviaQA.

    SEMCAL_DATA_DIR=/work/shared/data PYTHONPATH=. python benchmarks/bench_qa_confidence.py --n 100 --k 5
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch

from semcal_eval import qa
from semcal_eval.data import load
from semcal_eval.judges import get_judge

FIELDS = {
    "nq_open": ("question", lambda d: d["answer"]),
    "hotpotqa": ("question", lambda d: [d["answer"]]),
    "triviaqa": ("question", lambda d: d["answer"]["aliases"]),
}


def generate(model, tok, prompt: str, k: int, max_new: int, seed: int):
    """Greedy answer and k samples, each with its length-normalised log-prob (mean over answer tokens)."""
    enc = tok(prompt, return_tensors="pt")
    n_in = enc["input_ids"].shape[1]
    common = dict(max_new_tokens=max_new, stop_strings=["\n"], tokenizer=tok, return_dict_in_generate=True,
                  output_scores=True, pad_token_id=tok.pad_token_id or tok.eos_token_id, repetition_penalty=1.0)
    outs = []
    with torch.inference_mode():
        g = model.generate(**enc, do_sample=False, **common)
        outs.append(g)
        torch.manual_seed(seed)
        s = model.generate(**enc, do_sample=True, temperature=1.0, top_p=1.0, top_k=0, num_return_sequences=k,
                           **common)
        outs.append(s)
    texts, lps = [], []
    for out in outs:
        # log-softmax of the raw logits at T = 1 = log-probs of the sampling distribution
        trans = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
        for row, sc in zip(out.sequences[:, n_in:], trans):
            ids, vals = [], []
            for t, v in zip(row.tolist(), sc.tolist()):
                if t == tok.eos_token_id or t == tok.pad_token_id or "\n" in tok.decode([t]):
                    break
                ids.append(t)
                vals.append(v)
            texts.append(tok.decode(ids).strip())
            lps.append(float(np.mean(vals)) if vals else -1e3)
    return texts[0], lps[0], texts[1:], lps[1:]


def auroc(conf, correct) -> float:
    from sklearn.metrics import roc_auc_score

    y = np.asarray(correct)
    return float("nan") if y.min() == y.max() else float(roc_auc_score(y, np.asarray(conf)))


def run(name: str, model, tok, n: int, k: int, judges: dict, seed: int, max_new: int) -> dict:
    qfield, golds = FIELDS[name]
    docs = qa.make_process_docs(qfield, golds)(load(name, "validation"))
    docs = docs.select(range(min(n, len(docs))))
    rows = []
    t0 = time.perf_counter()
    for i, d in enumerate(docs):
        q, gs = d["qa_question"], d["qa_golds"]
        greedy, g_lp, samples, s_lp = generate(model, tok, qa.qa_doc_to_text(d), k, max_new, seed + i)
        row = {"q": q, "greedy": greedy, "samples": samples, "correct": int(qa.is_correct(greedy, gs)),
               "p_greedy": math.exp(g_lp)}
        for jn, j in judges.items():
            rec = qa.score_question(q, greedy, samples, gs, j)
            row[f"share[{jn}]"] = rec["conf"]
            row[f"1-SE/logK[{jn}]"] = rec["conf_entropy"]
            if jn == "f1":
                row["1-LWSE/logK[f1]"] = qa.conf_likelihood_weighted(rec["cluster_ids"], s_lp)
        rows.append(row)
        if (i + 1) % 10 == 0:
            el = time.perf_counter() - t0
            print(f"  {name}: {i + 1}/{len(docs)} questions, {el:.0f} s", file=sys.stderr, flush=True)
    variants = [c for c in rows[0] if c.startswith(("share", "1-", "p_greedy"))]
    correct = [r["correct"] for r in rows]
    return {
        "dataset": name, "n": len(rows), "k": k, "accuracy": float(np.mean(correct)),
        "seconds": time.perf_counter() - t0,
        "auroc": {v: auroc([r[v] for r in rows], correct) for v in variants},
        "rows": rows,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="semcal:qwen2.5-coder-0.5b")
    ap.add_argument("--datasets", nargs="+", default=["nq_open", "hotpotqa"], choices=sorted(FIELDS))
    ap.add_argument("--n", type=int, default=100, help="first N questions of each dev set")
    ap.add_argument("--k", type=int, default=5, help="samples per question")
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--judges", nargs="+", default=["f1", "em", "embed"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("SEMCAL_BENCH_THREADS", "2")))
    ap.add_argument("--out", default=None, help="write the per-question rows and results as JSON")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from semcal_eval.models import resolve_pretrained

    path = resolve_pretrained(a.model)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    judges = {j: get_judge(j) for j in a.judges}
    print(f"model {a.model}; K={a.k}; first {a.n} questions per dataset; threads {a.threads}; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    results = [run(d, model, tok, a.n, a.k, judges, a.seed, a.max_new_tokens) for d in a.datasets]
    variants = list(results[0]["auroc"])
    head = f"| confidence | " + " | ".join(f"{r['dataset']} AUROC (n={r['n']}, acc={r['accuracy']:.2f})" for r in results) + " |"
    print("\n" + head + "\n|---|" + "---|" * len(results))
    for v in variants:
        print(f"| {v} | " + " | ".join(f"{r['auroc'][v]:.3f}" for r in results) + " |")
    base = "p(greedy)" if "p_greedy" in variants else None
    for r in results:
        if base:
            ref = r["auroc"]["p_greedy"]
            print(f"{r['dataset']}: AUROC share[f1] / p(greedy) = "
                  f"{r['auroc'].get('share[f1]', float('nan')) / ref:.2f}x; {r['seconds']:.0f} s")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"args": vars(a), "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
