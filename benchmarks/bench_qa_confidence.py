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

    SEMCAL_DATA_DIR=/work/shared/data PYTHONPATH=. python benchmarks/bench_qa_confidence.py --threads 1 \
        --datasets nq_open hotpotqa --n 100 --k 5 --out out.json      # ~35 min per dataset on 2 busy cores
    python benchmarks/bench_qa_confidence.py --report a.json b.json  # the table again, from saved rows
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

from semcal_eval.core import metrics as M
from semcal_eval import qa
from semcal_eval.data import QA_FIELDS, load
from semcal_eval.qa.judges import get_judge
from semcal_eval.qa.task import qa_docs


class _GreedyRowsAndLogProbs:
    """Logits processor for one batched ``generate`` of Q questions x (1 greedy + K sampled) rows.

    Rows r with r % (K+1) == 0 are made greedy (all but the argmax set to -inf, so sampling picks it); the
    other rows sample from the untouched distribution (T = 1, no top-k/top-p). It also records, at every
    step, the log-prob under the model's distribution of the token each row chose at the previous step, so
    sequence log-probs need no copy of the logits. Padded vocabulary rows (ids >= vocab_valid) are masked.
    """

    def __init__(self, k: int, vocab_valid: int | None):
        self.k1, self.valid = k + 1, vocab_valid
        self.prev = None
        self.steps: list[torch.Tensor] = []

    def __call__(self, input_ids, scores):
        if self.valid is not None and scores.shape[-1] > self.valid:
            scores[:, self.valid:] = float("-inf")
        if self.prev is not None:
            self.steps.append(self.prev.gather(1, input_ids[:, -1:]).squeeze(1))
        self.prev = torch.log_softmax(scores.float(), -1)
        greedy = torch.arange(scores.shape[0], device=scores.device) % self.k1 == 0
        best = scores.argmax(-1)
        masked = torch.full_like(scores, float("-inf"))
        masked.scatter_(1, best[:, None], 0.0)
        return torch.where(greedy[:, None], masked, scores)

    def finish(self, sequences) -> torch.Tensor:
        self.steps.append(self.prev.gather(1, sequences[:, -1:]).squeeze(1))
        return torch.stack(self.steps, 1)  # (rows, generated tokens)


def generate_batch(model, tok, prompts: list[str], k: int, max_new: int, seed: int, vocab_valid):
    """For each prompt: (greedy answer, its mean token log-prob, K samples, their mean token log-probs).

    One ``generate`` call for all prompts x (K+1) rows (left padding), so the weights are read once per
    step for the whole batch; stops at a newline (each answer is cut at its first newline).
    """
    from transformers import LogitsProcessorList

    tok.padding_side = "left"
    rows = [p for p in prompts for _ in range(k + 1)]
    enc = tok(rows, return_tensors="pt", padding=True)
    n_in = enc["input_ids"].shape[1]
    proc = _GreedyRowsAndLogProbs(k, vocab_valid)
    torch.manual_seed(seed)
    with torch.inference_mode():
        out = model.generate(**enc, do_sample=True, temperature=1.0, top_p=1.0, top_k=0, repetition_penalty=1.0,
                             max_new_tokens=max_new, stop_strings=["\n"], tokenizer=tok,
                             logits_processor=LogitsProcessorList([proc]),
                             pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
    gen = out[:, n_in:]
    lp = proc.finish(out)
    texts, lps = [], []
    stop = {tok.eos_token_id, tok.pad_token_id}
    for row, lrow in zip(gen.tolist(), lp.tolist()):
        ids, vals = [], []
        for t, v in zip(row, lrow):
            if t in stop or "\n" in tok.decode([t]):
                break
            ids.append(t)
            vals.append(v)
        texts.append(tok.decode(ids).strip())
        lps.append(float(np.mean(vals)) if vals else -1e3)
    res = []
    for i in range(len(prompts)):
        a = i * (k + 1)
        res.append((texts[a], lps[a], texts[a + 1:a + k + 1], lps[a + 1:a + k + 1]))
    return res


def auroc(conf, correct) -> float:
    from sklearn.metrics import roc_auc_score

    y = np.asarray(correct)
    return float("nan") if y.min() == y.max() else float(roc_auc_score(y, np.asarray(conf)))


def run(name: str, model, tok, n: int, k: int, judges: dict, seed: int, max_new: int, batch: int,
        vocab_valid, partial: dict | None = None, partial_path: str | None = None) -> dict:
    docs = qa_docs(name, load(name, "validation"))  # the QA tasks' own question/gold fields and drops
    docs = docs.select(range(min(n, len(docs))))
    rows = []
    t0 = time.perf_counter()
    for b in range(0, len(docs), batch):
        chunk = [docs[i] for i in range(b, min(b + batch, len(docs)))]
        gens = generate_batch(model, tok, [qa.qa_doc_to_text(d) for d in chunk], k, max_new, seed + b, vocab_valid)
        for d, (greedy, g_lp, samples, s_lp) in zip(chunk, gens):
            q, gs = d["qa_question"], d["qa_golds"]
            row = {"q": q, "golds": gs, "greedy": greedy, "samples": samples,
                   "correct": int(qa.is_correct(greedy, gs)), "p_greedy": math.exp(g_lp)}
            for jn, j in judges.items():
                rec = qa.score_question(q, greedy, samples, gs, j)
                row[f"share[{jn}]"] = rec["conf"]
                row[f"1-SE/logK[{jn}]"] = rec["conf_entropy"]
                if jn == "f1":
                    row["1-LWSE/logK[f1]"] = qa.conf_likelihood_weighted(rec["cluster_ids"], s_lp)
            rows.append(row)
        print(f"  {name}: {len(rows)}/{len(docs)} questions, {time.perf_counter() - t0:.0f} s", file=sys.stderr,
              flush=True)
        if partial is not None:  # keep what is done if a long run is stopped; --report re-reads it
            partial[name] = rows
            with open(partial_path, "w") as f:
                json.dump({"partial": partial}, f)
    return summarise(name, rows, k, time.perf_counter() - t0)


def bootstrap_ci(fn, conf, correct, **kw):
    import warnings

    with warnings.catch_warnings():  # one-class resamples are NaN and skipped; that is expected at low accuracy
        warnings.simplefilter("ignore")
        return tuple(float(x) for x in M.bootstrap_ci(fn, np.asarray(conf, float), np.asarray(correct, float), **kw))


def summarise(name: str, rows: list[dict], k: int, seconds: float) -> dict:
    variants = [c for c in rows[0] if c.startswith(("share", "1-", "p_greedy"))]
    correct = [r["correct"] for r in rows]
    return {
        "dataset": name, "n": len(rows), "k": k, "accuracy": float(np.mean(correct)), "seconds": seconds,
        "auroc": {v: auroc([r[v] for r in rows], correct) for v in variants},
        "auroc_ci95": {v: bootstrap_ci(M.auroc_confidence, [r[v] for r in rows], correct, n_boot=1000, seed=0)
                       for v in variants},
        "rows": rows,
    }


def table(results: list[dict]) -> None:
    variants = list(results[0]["auroc"])
    head = "| confidence | " + " | ".join(
        f"{r['dataset']} AUROC (n={r['n']}, acc={r['accuracy']:.2f})" for r in results) + " |"
    print("\n" + head + "\n|---|" + "---|" * len(results))
    for v in variants:
        print(f"| {v} | " + " | ".join(
            f"{r['auroc'][v]:.3f} [{r['auroc_ci95'][v][0]:.2f}, {r['auroc_ci95'][v][1]:.2f}]" for r in results) + " |")
    print("(AUROC [95% percentile-bootstrap interval, 1,000 resamples, seed 0])")
    for r in results:
        ref = r["auroc"].get("p_greedy")
        ratio = r["auroc"].get("share[f1]", float("nan")) / ref if ref and ref == ref else float("nan")
        print(f"{r['dataset']}: AUROC share[f1] / AUROC p(greedy) = {ratio:.2f}x; {r['seconds']:.0f} s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="semcal:qwen2.5-coder-0.5b")
    ap.add_argument("--datasets", nargs="+", default=["nq_open", "hotpotqa"], choices=sorted(QA_FIELDS))
    ap.add_argument("--n", type=int, default=100, help="first N questions of each dev set")
    ap.add_argument("--k", type=int, default=5, help="samples per question")
    ap.add_argument("--max-new-tokens", type=int, default=16, help="answers are short; the tasks allow 32")
    ap.add_argument("--judges", nargs="+", default=["f1", "em", "embed"])
    ap.add_argument("--batch", type=int, default=10, help="questions per generate call (x (K+1) rows)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("SEMCAL_BENCH_THREADS", "2")))
    ap.add_argument("--out", default=None, help="write the per-question rows and results as JSON")
    ap.add_argument("--report", nargs="+", default=None,
                    help="only print the side-by-side table of saved (or .partial) JSON files")
    a = ap.parse_args(argv)
    if a.report:
        results = []
        for path in a.report:
            with open(path) as f:
                saved = json.load(f)
            if "partial" in saved:
                results += [summarise(n, rows, len(rows[0]["samples"]), float("nan"))
                            for n, rows in saved["partial"].items()]
            else:
                results += [summarise(r["dataset"], r["rows"], r["k"], r["seconds"]) for r in saved["results"]]
        table(results)
        return 0
    torch.set_num_threads(a.threads)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from semcal_eval.models import load_vocab_valid, resolve_pretrained

    path = resolve_pretrained(a.model)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    judges = {j: get_judge(j) for j in a.judges}
    print(f"model {a.model}; K={a.k}; first {a.n} questions per dataset; threads {a.threads}; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    vocab_valid = load_vocab_valid(path)
    partial_path = (a.out or "bench_qa_confidence.json") + ".partial"
    partial: dict = {}
    results = [run(d, model, tok, a.n, a.k, judges, a.seed, a.max_new_tokens, a.batch, vocab_valid, partial,
                   partial_path) for d in a.datasets]
    table(results)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"args": vars(a), "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
