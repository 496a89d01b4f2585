"""Every QA uncertainty estimator on the same generations: AUROC, PRR (with CI), AUARC, ECE / Brier where the
estimator is a probability, and each estimator's cost as a share of the generation time of the same run.

Phase 1 (generation, resumable): per question the semcal QA prompt (``semcal_eval.qa.qa_doc_to_text``, the
tasks' own), one greedy answer and K samples (T = 1, top_p 1, top_k 0: the QA tasks' defaults) decoded from one
shared prefix with :func:`semcal_eval.harness.sampling.generate_from_prefix` (the ``hf-semsoft`` path), stop at
"\\n" / "Q:", 32 new tokens at most; the greedy answer's token log-probs and full next-token entropies are
logged. One JSONL line per question (``--gen DIR/<dataset>.jsonl``), with its generation wall time.
Phase 2 (scoring): every estimator of :mod:`semcal_eval.qa.estimators` and semcal's own confidences (cluster
share, 1 − SE/ln K, likelihood-weighted) from those lines, each timed; ``--ptrue`` adds P(True) (one extra
forward pass per question, timed). Metrics from :mod:`semcal_eval.core.metric_table`; 95% bootstrap CIs
(1,000 resamples, seed 0). Non-probability scores also get a 2-fold cross-fitted isotonic ECE / Brier.

    SEMCAL_DATA_DIR=/work/shared/data PYTHONPATH=. nice -n 10 python benchmarks/bench_qa_estimators.py \\
        --datasets nq_open triviaqa --n 200 --k 10 --gen out/gen --budget-min 40 --threads 1
    python benchmarks/bench_qa_estimators.py --datasets nq_open triviaqa --gen out/gen --score-only --out res.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from semcal_eval.core import metric_table as T
from semcal_eval.qa import agreement as AG
from semcal_eval.qa import estimators as E

METRICS = ("auroc_conf", "prr", "prr_50", "auarc", "acc_at_80cov", "ece_uw10", "ece_1bin", "brier_conf")
STOPS = ["\n", "Q:"]


def _seed(base: int, dataset: str, i: int) -> int:
    h = hashlib.sha256(f"{base}\x1f{dataset}\x1f{i}".encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


def generate(args, dataset: str, path: Path) -> None:
    import torch
    from lm_eval.models.utils import postprocess_generated_text
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from semcal_eval import qa
    from semcal_eval.data import load
    from semcal_eval.data.load import default_eval_split, resolve_data_dir
    from semcal_eval.data.specs import get_spec
    from semcal_eval.harness.sampling import RowSampling, generate_from_prefix
    from semcal_eval.models import resolve_pretrained
    from semcal_eval.qa.task import qa_docs

    torch.set_num_threads(args.threads)
    done = sum(1 for _ in open(path)) if path.exists() else 0
    # the split a QA task evaluates (validation; the local MS MARCO mirror: its v1.1 test sample)
    split = default_eval_split(get_spec(dataset), resolve_data_dir(None))
    docs = qa_docs(dataset, load(dataset, split))
    n = min(args.n, len(docs))
    if done >= n:
        return
    mp = resolve_pretrained(args.model)
    tok = AutoTokenizer.from_pretrained(mp)
    model = AutoModelForCausalLM.from_pretrained(mp, dtype=torch.float32).eval()
    eos = model.generation_config.eos_token_id
    eos = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
    rows = [RowSampling(False)] + [RowSampling(True, 1.0, 0, 1.0)] * args.k
    t_start = time.perf_counter()
    with open(path, "a") as f:
        for i in range(done, n):
            if time.perf_counter() - t_start > args.budget_min * 60:
                print(f"[bench] {dataset}: time budget reached after {i} questions", file=sys.stderr, flush=True)
                break
            d = docs[i]
            prompt = qa.qa_doc_to_text(d)
            ids = tok(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"]
            gen = torch.Generator().manual_seed(_seed(args.seed, dataset, i))
            t0 = time.perf_counter()

            def stopped(t):
                text = tok.decode(t)
                return any(s in text for s in STOPS)

            res, cost = generate_from_prefix(model, ids, rows, max_new_tokens=32, eos_token_ids=eos,
                                             is_stopped=stopped, generator=gen)
            texts = [postprocess_generated_text(tok.decode(r.tokens, skip_special_tokens=True), stop=STOPS,
                                                think_end_token=None) for r in res]
            secs = time.perf_counter() - t0
            line = {"i": i, "question": d["qa_question"], "golds": list(d["qa_golds"]), "prompt_chars": len(prompt),
                    "greedy": texts[0], "greedy_logprobs": res[0].logprobs, "greedy_entropies": res[0].entropies,
                    "samples": texts[1:], "sample_logprobs": [float(sum(r.logprobs)) for r in res[1:]],
                    # per-token log-probs of every sample (SAR and any other logit-based estimator read them)
                    "sample_token_logprobs": [r.logprobs for r in res[1:]],
                    # token ids (greedy and samples): SAR's token relevance drops one token at a time
                    "greedy_tokens": res[0].tokens, "sample_tokens": [r.tokens for r in res[1:]],
                    "gen_seconds": secs, "generated_tokens": cost.generated_tokens}
            f.write(json.dumps(line) + "\n")
            f.flush()
            if (i + 1) % 10 == 0:
                print(f"[bench] {dataset}: {i + 1}/{n}, {time.perf_counter() - t_start:.0f} s", file=sys.stderr,
                      flush=True)


def score(lines: list[dict], k: int, ptrue=None, judge_name: str = "cover", correctness: str = "cover"
          ) -> tuple[dict, dict, dict, list[int], list[float]]:
    """{row: confidences}, {row: raw scores}, {row: seconds spent over all questions}, correctness, and the
    greedy answers' continuous quality (ROUGE-L F1 against the best reference). ``judge_name`` clusters the
    answers, ``correctness`` grades the greedy one (the QA tasks' defaults: the cover judge for both)."""
    from semcal_eval.qa import qa_doc_to_text
    from semcal_eval.qa.answers import clean_answer
    from semcal_eval.qa.judges import get_judge

    judge = get_judge(judge_name)
    confs: dict[str, list] = {}
    raw: dict[str, list] = {}
    cost: dict[str, float] = {}
    correct = []

    def add(name, c, s, secs):
        confs.setdefault(name, []).append(c)
        raw.setdefault(name, []).append(s)
        cost[name] = cost.get(name, 0.0) + secs

    quality = []
    for ln in lines:
        greedy = clean_answer(ln["greedy"])
        samples = [clean_answer(s) for s in ln["samples"]][:k]
        t0 = time.perf_counter()
        rec = AG.score_question(ln["question"], greedy, samples, ln["golds"], judge,
                                seq_logprobs=ln["sample_logprobs"][:k], correctness=correctness)
        t_cluster = time.perf_counter() - t0
        correct.append(rec["correct"])
        quality.append(E.quality_rouge_l(greedy, ln["golds"]))
        add("cluster_share", rec["conf"], rec["conf"], t_cluster)
        add("1-SE/lnK", rec["conf_entropy"], rec["conf_entropy"], t_cluster)
        add("1-LWSE/lnK", rec["conf_likelihood"], rec["conf_likelihood"], t_cluster)
        # lm-polygraph's clustering (difference 1): the samples alone, the greedy answer placed afterwards
        t0 = time.perf_counter()
        rec_s = AG.score_question(ln["question"], greedy, samples, ln["golds"], judge,
                                  seq_logprobs=ln["sample_logprobs"][:k], cluster_greedy=False,
                                  correctness=correctness)
        t_cluster_s = time.perf_counter() - t0
        add("cluster_share[samples only]", rec_s["conf"], rec_s["conf"], t_cluster_s)
        add("1-SE/lnK[samples only]", rec_s["conf_entropy"], rec_s["conf_entropy"], t_cluster_s)
        add("1-LWSE/lnK[samples only]", rec_s["conf_likelihood"], rec_s["conf_likelihood"], t_cluster_s)
        t0 = time.perf_counter()
        W = AG.agreement_matrix(ln["question"], samples, judge)
        t_matrix = time.perf_counter() - t0
        ev = E.Evidence(samples, rec["cluster_ids"], ln["greedy_logprobs"], ln["greedy_entropies"], matrix=W,
                        sample_token_logprobs=[x for x in ln.get("sample_token_logprobs", [])[:k]] or None)
        for name, est in E.ESTIMATORS.items():
            t0 = time.perf_counter()
            out = E.estimator_conf(name, ev)
            secs = time.perf_counter() - t0
            if out is None:  # no per-sample token log-probs in an older generation file (SAR)
                continue
            # what an estimator reads costs it too: the clustering (NumSets), the agreement matrix (graph ones)
            secs += {"samples": t_cluster if name == "num_sets" else 0.0, "matrix": t_matrix}.get(est.needs, 0.0)
            add(name, out[1], out[0], secs)
        u = float(E.num_semantic_sets(rec_s["cluster_ids"]))
        add("num_sets[samples only]", 1.0 / u, u, t_cluster_s)
        if ptrue is not None:
            for style, pt in ptrue.items():
                t0 = time.perf_counter()
                q = qa_doc_to_text({"qa_question": ln["question"]}) if style == "polygraph" else ln["question"]
                p = pt.score(q, greedy, samples)
                add("ptrue" if style == "semcal" else f"ptrue[{style}]", p, p, time.perf_counter() - t0)
    return confs, raw, cost, correct, quality


def summarise(dataset: str, lines: list[dict], k: int, ptrue=None, judge: str = "cover",
              correctness: str = "cover") -> dict:
    from semcal_eval.core.records import confidence_record, to_arrays

    confs, raw, cost, correct, quality = score(lines, k, ptrue, judge, correctness)
    gen = float(sum(ln["gen_seconds"] for ln in lines))
    rows = {}
    for name, c in confs.items():
        base = name.split("[")[0]
        prob = base in ("cluster_share", "1-SE/lnK", "1-LWSE/lnK") or name == "ptrue" or (
            name in E.ESTIMATORS and E.ESTIMATORS[name].probability)
        a = to_arrays([confidence_record(ci, y) for ci, y in zip(c, correct)])
        names = [m for m in METRICS if prob or m not in ("ece_uw10", "ece_1bin", "brier_conf")]
        m = T.compute_all(a, names, ci_names=["prr", "auroc_conf"])
        m.update(prr_quality_ci(c, quality))
        if not prob:  # a calibration metric of a ranking score only after a cross-fitted monotone map
            iso = E.crossfit_calibrate(c, correct)  # conf is an increasing map of the score: same ranking
            ai = to_arrays([confidence_record(ci, y) for ci, y in zip(iso, correct)])
            m.update({f"{x}_iso": T.compute(x, ai) for x in ("ece_uw10", "ece_1bin", "brier_conf")})
        m["probability"] = prob
        m["cost_share"] = cost[name] / gen
        rows[name] = m
    deltas = {f"{x} - {y}": paired_delta(confs[x], confs[y], correct) for x, y in PAIRS if x in confs and y in confs}
    return {"dataset": dataset, "n": len(lines), "k": k, "accuracy": float(np.mean(correct)),
            "mean_rouge_l": float(np.mean(quality)), "gen_seconds": gen, "rows": rows, "deltas": deltas,
            "grading": grading_check(lines, correct, quality)}


def prr_quality_ci(conf, quality, n_boot=1000, seed=0) -> dict:
    """PRR against the continuous quality (ROUGE-L F1 vs the best reference) with a 95% percentile bootstrap
    over documents (same resampling as the table's CIs: 1,000 resamples, seed 0)."""
    c, q = np.asarray(conf, dtype=float), np.asarray(quality, dtype=float)
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(n_boot):
        i = rng.integers(0, len(q), len(q))
        boot.append(E.prr_quality(c[i], q[i]))
    boot = np.asarray(boot)
    boot = boot[np.isfinite(boot)]
    lo, hi = (np.quantile(boot, [0.025, 0.975]) if boot.size else (math.nan, math.nan))
    return {"prr_rougeL": E.prr_quality(c, q), "prr_rougeL_ci_lo": float(lo), "prr_rougeL_ci_hi": float(hi)}


def grading_check(lines, correct, quality) -> dict:
    """How the binary grade and the continuous ROUGE-L quality relate on this set: the share of golds that are
    sentences (≥ 5 normalised tokens), the accuracy at ROUGE-L ≥ 0.5 (the sentence threshold) and the
    agreement of the two verdicts, and the mean quality of the correct and of the wrong answers."""
    from semcal_eval.qa.answers import normalize_answer
    from semcal_eval.qa.grading import SENTENCE_MIN_TOKENS

    y = np.asarray(correct, dtype=float)
    q = np.asarray(quality, dtype=float)
    sent = [max(len(normalize_answer(g).split()) for g in ln["golds"]) >= SENTENCE_MIN_TOKENS for ln in lines]
    return {"sentence_gold_share": float(np.mean(sent)), "acc_rougeL_ge_0.5": float(np.mean(q >= 0.5)),
            "agreement_with_rougeL_ge_0.5": float(np.mean((q >= 0.5) == (y == 1))),
            "mean_rougeL_correct": float(q[y == 1].mean()) if y.any() else math.nan,
            "mean_rougeL_wrong": float(q[y == 0].mean()) if (y == 0).any() else math.nan}


#: paired comparisons reported with a bootstrap CI of the difference (same resampled documents for both)
PAIRS = (("cluster_share", "msp"), ("cluster_share", "perplexity"), ("eigv", "msp"), ("eigv", "perplexity"),
         ("1-SE/lnK", "msp"), ("degree", "perplexity"), ("lexsim", "perplexity"))


def paired_delta(conf_a, conf_b, correct, n_boot=1000, seed=0) -> dict:
    """PRR(a) − PRR(b) and AUROC(a) − AUROC(b) with a paired percentile bootstrap over documents (95%)."""
    import warnings

    from semcal_eval.core import metrics as M

    a, b, y = (np.asarray(x, dtype=float) for x in (conf_a, conf_b, correct))
    rng = np.random.default_rng(seed)
    out = {}
    for key, fn in (("prr", M.prr), ("auroc", M.auroc_confidence)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            d = []
            for _ in range(n_boot):
                i = rng.integers(0, len(y), len(y))
                d.append(fn(a[i], y[i]) - fn(b[i], y[i]))
            d = np.asarray(d)
            d = d[np.isfinite(d)]
            ci = np.quantile(d, [0.025, 0.975]) if d.size else (math.nan, math.nan)  # undefined (one class)
            out[key] = (float(fn(a, y) - fn(b, y)), *(float(q) for q in ci))
    return out


def table(results: list[dict]) -> str:
    out = []
    for r in results:
        out.append(f"\n### {r['dataset']} (n={r['n']}, K={r['k']}, accuracy {r['accuracy']:.3f}, mean ROUGE-L "
                   f"{r.get('mean_rouge_l', math.nan):.3f}, generation {r['gen_seconds']:.0f} s)\n")
        if "grading" in r:
            out.append("grading vs ROUGE-L: " + ", ".join(f"{k} {v:.3f}" for k, v in r["grading"].items()) + "\n")
        out.append("| estimator | AUROC [95% CI] | PRR [95% CI] | PRR ROUGE-L [95% CI] | PRR@50% | AUARC | "
                   "acc@80% cov | ECE (10 bins) | ECE 1-bin | Brier | cost / generation |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|")
        order = sorted(r["rows"], key=lambda n: -np.nan_to_num(r["rows"][n]["prr"], nan=-9))
        for name in order:
            m = r["rows"][name]

            def f(x, ci=False):
                v = m.get(x, math.nan)
                s = "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"
                if ci and f"{x}_ci_lo" in m:
                    s += f" [{m[x + '_ci_lo']:.2f}, {m[x + '_ci_hi']:.2f}]"
                return s

            cal = [f("ece_uw10"), f("ece_1bin"), f("brier_conf")] if m["probability"] else [
                f"({f('ece_uw10_iso')} iso)", f"({f('ece_1bin_iso')} iso)", f"({f('brier_conf_iso')} iso)"]
            out.append(f"| {name} | {f('auroc_conf', True)} | {f('prr', True)} | {f('prr_rougeL', True)} | "
                       f"{f('prr_50')} | {f('auarc')} | "
                       f"{f('acc_at_80cov')} | " + " | ".join(cal) + f" | {100 * m['cost_share']:.3f}% |")
        out.append("\n| paired difference (same documents) | ΔPRR [95% CI] | ΔAUROC [95% CI] |\n|---|---|---|")
        for pair, d in r.get("deltas", {}).items():
            out.append(f"| {pair} | {d['prr'][0]:+.3f} [{d['prr'][1]:+.2f}, {d['prr'][2]:+.2f}] | "
                       f"{d['auroc'][0]:+.3f} [{d['auroc'][1]:+.2f}, {d['auroc'][2]:+.2f}] |")
    return "\n".join(out)


#: the record fields that metadata log_token_logprobs adds (semcal_eval.qa.task.token_logprob_fields)
TOKEN_FIELDS = ("greedy_token_logprobs", "greedy_token_entropies", "sample_token_logprobs")


def samples_file_bytes(path: Path) -> dict:
    """Bytes per question of an lm-eval samples file written with ``log_token_logprobs: true``, as written and
    as it would be without the token fields. The file is re-serialised line by line the way lm-eval 0.4.13
    writes it (``json.dumps(sample, ensure_ascii=False)``; the filter's record with ``json.dumps(rec,
    ensure_ascii=False)``); the unchanged re-serialisation must reproduce the file byte for byte, so the
    stripped size is the size of the same run without the option (same seed, same generations)."""
    raw = Path(path).read_bytes()
    lines = raw.decode("utf-8").splitlines()
    same, stripped, docs = [], [], set()
    for line in lines:
        d = json.loads(line)
        docs.add(d["doc_id"])
        same.append(json.dumps(d, ensure_ascii=False))
        fr = []
        for x in d["filtered_resps"]:
            if isinstance(x, str) and x.startswith("{") and any(f'"{k}"' in x for k in TOKEN_FIELDS):
                rec = json.loads(x)
                for k in TOKEN_FIELDS:
                    rec.pop(k, None)
                x = json.dumps(rec, ensure_ascii=False)
            fr.append(x)
        d["filtered_resps"] = fr
        stripped.append(json.dumps(d, ensure_ascii=False))
    if ("\n".join(same) + "\n").encode("utf-8") != raw:
        raise ValueError(f"{path}: re-serialising does not reproduce the file; cannot derive the size without "
                         "token log-probs from it (run once without log_token_logprobs instead)")
    off = len(("\n".join(stripped) + "\n").encode("utf-8"))
    n = len(docs)
    return {"file": str(path), "questions": n, "lines": len(lines), "bytes_with": len(raw), "bytes_without": off,
            "per_question_with": len(raw) / n, "per_question_without": off / n,
            "ratio": len(raw) / off}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="semcal:smollm2-135m")
    ap.add_argument("--datasets", nargs="+", default=["nq_open", "triviaqa"])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--budget-min", type=float, default=40.0, help="generation time budget per dataset")
    ap.add_argument("--gen", default="bench_qa_estimators_gen", help="folder of the generation JSONL files")
    ap.add_argument("--score-only", action="store_true")
    ap.add_argument("--ptrue", action="store_true", help="add P(True), semcal's and polygraph's prompt: two extra "
                    "forward passes per question")
    ap.add_argument("--out", default=None)
    ap.add_argument("--judge", default="cover", help="the clustering judge (the QA tasks' default: cover)")
    ap.add_argument("--correctness", default="cover", help="the greedy answer's grader: cover (default), strict, f1")
    ap.add_argument("--samples-bytes", nargs="+", default=None, metavar="SAMPLES_JSONL",
                    help="only report the bytes per question of lm-eval samples files written with "
                    "log_token_logprobs: true, with and without the token fields")
    a = ap.parse_args(argv)
    if a.samples_bytes:
        rows = [samples_file_bytes(Path(p)) for p in a.samples_bytes]
        for r in rows:
            print(f"{Path(r['file']).name}: {r['questions']} questions, {r['per_question_without']:.0f} B/question "
                  f"without token log-probs, {r['per_question_with']:.0f} B/question with (× {r['ratio']:.2f})")
        if a.out:
            Path(a.out).write_text(json.dumps(rows, indent=1))
        return 0
    gdir = Path(a.gen)
    gdir.mkdir(parents=True, exist_ok=True)
    print(f"model {a.model}; K={a.k}; seed {a.seed}; threads {a.threads}; load {os.getloadavg()[0]:.1f}", flush=True)
    if not a.score_only:
        for d in a.datasets:
            generate(a, d, gdir / f"{d}.jsonl")
    ptrue = None
    if a.ptrue:
        from semcal_eval.qa.ptrue import PTRUE_STYLES, PTrue

        first = PTrue(a.model)
        ptrue = {st: PTrue(first.model, first.tokenizer, style=st) for st in PTRUE_STYLES}
    results = []
    for d in a.datasets:
        p = gdir / f"{d}.jsonl"
        lines = [json.loads(x) for x in open(p)] if p.exists() else []
        if len(lines) < 10:
            print(f"[bench] {d}: only {len(lines)} questions generated; skipped", flush=True)
            continue
        results.append(summarise(d, lines, a.k, ptrue, a.judge, a.correctness))
    print(table(results))
    if a.out:
        Path(a.out).write_text(json.dumps({"args": vars(a), "results": results}, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
