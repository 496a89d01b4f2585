"""Civil Comments benchmark: constrained baseline vs Semantic Softmax, scored against annotator fractions.

One lm-eval run per model over ``civil_comments_ambiguous_semsoft`` (constrained, semsoft, a τ sweep,
reference predictors, all from one forward pass per document) and ``civil_comments_ambiguous_base`` (stock
``multiple_choice`` log-likelihoods, row ``base``). Prints, per model:

1. the soft-label table (soft ECE / Brier / NLL, Spearman, extreme-confidence rate, class AUROC) and the
   soft-ECE reduction ratio 1 - ECE(semsoft) / ECE(constrained);
2. the issue-8 table on the same documents: temperature (fitted on hard labels t >= 0.5, as
   ``semcal-eval report --halves`` does) and Platt scaling fitted on the soft targets t, both on one half of
   the documents, every row reported on the other half.

``--mode labels`` is the prompt / label-word measurement: the candidate label sets of :data:`CANDIDATES` on
the *clear* rows (disjoint from the ambiguous rows reported), balanced: every clear toxic row (t >= 0.8)
plus as many clear non-toxic rows.

    SEMCAL_DATA_DIR=/work/shared/data python benchmarks/bench_civil_comments.py \
        --models smollm2-135m,qwen2.5-coder-0.5b --limit 445
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import lm_eval
import numpy as np
import torch
from lm_eval.tasks import TaskManager

from semcal_eval import TASKS_DIR
from semcal_eval.core import recalibration
from semcal_eval.core.metric_table import REPORT_COLUMNS
from semcal_eval.cli import register_backends
from semcal_eval.models import resolve_pretrained
from semcal_eval.report import filters_from_samples, markdown_table, row_metrics, task_rows

SOFT_COLUMNS = list(REPORT_COLUMNS["soft"])
SEMSOFT_TASK, BASE_TASK = "civil_comments_ambiguous_semsoft", "civil_comments_ambiguous_base"

# (name, prompt question line, labels [negative, positive]); the comment follows the question.
CANDIDATES = {
    "yes_no": ("Is the following comment toxic, that is, rude, disrespectful or unreasonable enough to make "
               "someone leave a discussion? Answer yes or no.", ["no", "yes"]),
    "toxic_nontoxic": ("Is the following comment toxic or non-toxic? Toxic means rude, disrespectful or "
                       "unreasonable enough to make someone leave a discussion. Answer toxic or non-toxic.",
                       ["non-toxic", "toxic"]),
    "toxic_safe": ("Is the following comment toxic or safe? Toxic means rude, disrespectful or unreasonable "
                   "enough to make someone leave a discussion. Answer toxic or safe.", ["safe", "toxic"]),
}


_LMS: dict = {}


def load_lm(model: str, batch_size: int):
    """One hf-semsoft backend per model, reused across runs (loading is the slow part on a loaded CPU)."""
    if model not in _LMS:
        from semcal_eval.semsoft.backend import SemSoftLM

        _LMS[model] = SemSoftLM(pretrained=resolve_pretrained(f"semcal:{model}"), dtype="float32", device="cpu",
                                batch_size=batch_size)
    return _LMS[model]


def evaluate(model: str, tasks: list, meta: dict, limit=None, samples=None, batch_size: int = 8, chat=False):
    tm = TaskManager(include_path=str(TASKS_DIR), metadata=meta)
    t0 = time.time()
    res = lm_eval.simple_evaluate(
        model=load_lm(model, batch_size),
        tasks=tasks, limit=limit, samples=samples, log_samples=True, device="cpu", batch_size=batch_size,
        apply_chat_template=chat,
        task_manager=tm, verbosity="WARNING",
    )
    return res, time.time() - t0


def platt_rows(filters: dict, names=("constrained", "semsoft"), seed: int = 0) -> tuple[dict, dict]:
    """Platt scaling fitted on the soft targets t of one half (cross-entropy to Bernoulli(t)), applied to the
    other half; the halves are those of ``task_rows(..., halves=True)`` (same ids, same seed)."""
    ids = filters[names[0]]["doc_ids"]
    fit_ids, eval_ids = recalibration.split_halves(ids, seed=seed)
    fit_set, eval_set = set(map(str, fit_ids)), set(map(str, eval_ids))
    table, notes = {}, {}
    for name in names:
        pairs = list(zip(map(str, filters[name]["doc_ids"]), filters[name]["items"]))
        fit_items = [it for d, it in pairs if d in fit_set]
        ev = [it for d, it in pairs if d in eval_set]
        fit = recalibration.fit_platt([it["probs"][1] for it in fit_items], [it["soft"] for it in fit_items])
        p1 = fit.apply([it["probs"][1] for it in ev])
        scaled = [{**it, "probs": [1.0 - float(p), float(p)]} for it, p in zip(ev, p1)]
        row = f"{name}+Platt(half, t)"
        table[row] = {"n": len(scaled), **row_metrics(scaled, seed=seed)}
        notes[row] = {"a": fit.a, "b": fit.b}
    return table, notes


def bench(args) -> None:
    taus = [float(t) for t in args.taus.split(",")]
    meta = {"split": "train", "tau": taus, "top_k": args.top_k, "label_embedding": args.label_embedding}
    report = {}
    for model in args.models.split(","):
        load = os.getloadavg()[0]
        tasks = [SEMSOFT_TASK] + ([BASE_TASK] if not args.no_base else [])
        res, secs = evaluate(model, tasks, meta, limit=args.limit, batch_size=args.batch_size, chat=args.chat)
        filters = filters_from_samples(res["samples"][SEMSOFT_TASK])
        table, _ = task_rows(filters)
        if not args.no_base:
            base = filters_from_samples(res["samples"][BASE_TASK])["none"]
            table["base"] = {"n": len(base["items"]), **row_metrics(base["items"])}
        n = len(filters["semsoft"]["items"])
        # issue 8: tune on one half, report every row on the other half
        halves, _ = task_rows({k: v for k, v in filters.items() if "tau" not in k}, halves=True)
        platt, platt_notes = platt_rows(filters)
        halves.update(platt)
        head = (f"{model}: civil_comments_ambiguous, {n} docs (τ={taus[0]}, K={args.top_k}, E={args.label_embedding}, "
                f"chat={'on' if args.chat else 'off'}; {secs:.0f}s, load avg {load:.1f})")
        print_model(head, table, halves, platt_notes, taus[0])
        report[model] = {"seconds": secs, "n": n, "tau": taus[0], "chat": args.chat, "load": load,
                         "table": table, "halves": halves, "platt": platt_notes,
                         # per-document P(toxic) and t of the main rows, for plots and re-analysis
                         "docs": {f: {"doc_ids": filters[f]["doc_ids"],
                                      "p": [it["probs"][1] for it in filters[f]["items"]],
                                      "t": [it["soft"] for it in filters[f]["items"]]}
                                  for f in ("constrained", "semsoft")}}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1, default=float))
    print(f"\nwrote {args.out}")


ISSUE8_ROWS = ("prior", "constrained", "constrained+T(half)", "semsoft", "semsoft+T(half)")


def print_model(head: str, table: dict, halves: dict, platt_notes: dict, tau: float) -> None:
    """The soft-label table, the ECE reduction ratio, the τ sweep and the issue-8 table of one run."""
    main = {k: v for k, v in table.items() if "tau" not in k and not k.endswith("_ts")}
    print(f"\n### {head}")
    print(markdown_table(main, SOFT_COLUMNS))
    b, s = table["constrained"], table["semsoft"]
    print(f"soft-ECE reduction 1 - semsoft/constrained: {1 - s['soft_ece'] / b['soft_ece']:.1%} "
          f"({b['soft_ece']:.3f} -> {s['soft_ece']:.3f}) | soft Brier {b['soft_brier']:.3f} -> "
          f"{s['soft_brier']:.3f} | extreme rate {b['extreme_rate']:.3f} -> {s['extreme_rate']:.3f} | "
          f"class AUROC {b['auroc_class']:.3f} -> {s['auroc_class']:.3f}")
    sweep = sorted([(float(k[len("semsoft_tau"):]), v) for k, v in table.items() if k.startswith("semsoft_tau")]
                   + [(tau, s)], key=lambda x: x[0])
    print("τ sweep (soft ECE / soft Brier / extreme rate / AUROC):",
          "; ".join(f"{t:g}: {v['soft_ece']:.3f}/{v['soft_brier']:.3f}/{v['extreme_rate']:.3f}/"
                    f"{v['auroc_class']:.3f}" for t, v in sweep))
    rows8 = {k: v for k, v in halves.items() if k in ISSUE8_ROWS or "Platt" in k}
    print(f"\nissue-8 table (fit on one half, {rows8['semsoft']['n']} docs reported; ✓/✗ on soft Brier):")
    # no brier_mc column: markdown_table's beats-prior mark uses the first Brier column it finds
    print(markdown_table(rows8, SOFT_COLUMNS + ["nll"]))
    print("Platt (a, b):", {k: (round(v["a"], 3), round(v["b"], 3)) for k, v in platt_notes.items()})


def render(paths: list[str]) -> None:
    """Print the tables again from saved JSON reports (no model run)."""
    for path in paths:
        for model, r in json.loads(Path(path).read_text()).items():
            tau = r.get("tau", 0.2)
            print_model(f"{model} ({path}; {r['n']} docs, {r['seconds']:.0f}s)", r["table"], r["halves"],
                        r["platt"], tau)


def label_choice(args) -> None:
    """Candidate prompts / label words on balanced clear rows (disjoint from the ambiguous rows)."""
    import sys

    from lm_eval.tasks._yaml_loader import load_yaml  # public loader of task YAMLs (resolves include/!function)

    sys.path.insert(0, str(Path(TASKS_DIR) / "civil_comments"))
    import utils as cc  # the task folder's hooks

    meta = {"split": "train", "recalibrate": False, "reference_predictors": False}
    dd = cc.load_clear(**meta)
    t = np.asarray(dd["eval"]["toxicity"], dtype=np.float32)
    pos = np.flatnonzero(t >= np.float32(0.8))
    neg = np.flatnonzero(t <= np.float32(0.2))[: len(pos)]
    picks = sorted([*pos.tolist(), *neg.tolist()])[: args.limit]
    base_cfg = load_yaml(Path(TASKS_DIR) / "civil_comments" / "civil_comments_clear_semsoft.yaml")
    results = {}
    for model in args.models.split(","):
        for name, (question, labels) in CANDIDATES.items():
            prompt = question + "\n\nComment: {text}\n"
            cfg = {**base_cfg, "task": f"cc_clear_{name}",
                   "doc_to_text": lambda d, p=prompt: p.format(text=d["text"].strip()),
                   "doc_to_choice": lambda d, lab=tuple(labels): list(lab)}
            cfg.pop("include", None)
            res, secs = evaluate(model, [cfg], meta, samples={cfg["task"]: picks}, batch_size=args.batch_size)
            filters = filters_from_samples(res["samples"][cfg["task"]])
            for f in ("constrained", "semsoft"):
                m = row_metrics(filters[f]["items"], ci=False)
                results[(model, name, f)] = m
                print(f"{model} {name:15s} {f:11s} n={len(filters[f]['items'])} auroc_class={m['auroc_class']:.3f} "
                      f"acc={m['acc']:.3f} brier_mc={m['brier_mc']:.3f} nll={m['nll']:.3f} "
                      f"mean P(toxic)={np.mean([it['probs'][1] for it in filters[f]['items']]):.3f} ({secs:.0f}s)",
                      flush=True)
    print("\n| model | labels | row | class AUROC | acc | Brier | NLL |\n|---|---|---|---|---|---|---|")
    for (model, name, f), m in results.items():
        print(f"| {model} | {'/'.join(CANDIDATES[name][1])} | {f} | {m['auroc_class']:.3f} | {m['acc']:.3f} | "
              f"{m['brier_mc']:.3f} | {m['nll']:.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["bench", "labels", "render"], default="bench")
    ap.add_argument("--json", nargs="*", default=[], help="--mode render: saved reports to print")
    ap.add_argument("--models", default="smollm2-135m")
    ap.add_argument("--limit", type=int, default=None, help="documents (default: every ambiguous row)")
    ap.add_argument("--taus", default="0.2,0.0,0.1,0.3,0.4")
    ap.add_argument("--top_k", type=int, default=100)
    ap.add_argument("--label_embedding", default="first")
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--chat", action="store_true", help="--apply_chat_template (instruct models)")
    ap.add_argument("--no_base", action="store_true", help="skip the stock multiple_choice variant")
    ap.add_argument("--out", default="benchmarks/results/civil_comments.json")
    args = ap.parse_args()
    register_backends()
    torch.set_num_threads(int(os.environ.get("SEMCAL_THREADS", "1")))
    if args.mode == "render":
        render(args.json)
    elif args.mode == "labels":
        if args.limit is None:
            args.limit = 88
        label_choice(args)
    else:
        bench(args)


if __name__ == "__main__":
    main()
