"""Semantic Softmax on one model and one task, every row and every diagnostic from ONE forward pass per document.

    SEMCAL_DATA_DIR=../shared/data python benchmarks/sweep_semsoft.py --model qwen2.5-coder-1.5b --chat on
    SEMCAL_DATA_DIR=../shared/data python benchmarks/sweep_semsoft.py --model qwen2.5-coder-1.5b --chat on \\
        --task civil_comments_ambiguous_semsoft

Phase 1 (``semsoft_topk_cache.forward_topk``, resumable): the answer position's top-2000 tokens and the label
tokens' log-probabilities of every document, on the exact contexts lm-eval builds for the task (the
validation split of GoEmotions; the train head of Civil Comments, the only split the shared mirror has).

Phase 2 (seconds): the rows ``goemotions_semsoft`` reports on the same documents — computed by the task's own
filters (``SemSoftTuned``, ``CrossfitTemperature``, ``ReferencePredictor``) on responses built with the
backend's own scoring functions, so the numbers are the ones ``lm_eval --tasks goemotions_semsoft
--metadata '{"split": "validation"}'`` gives on these documents:

* ``constrained``, ``semsoft`` (τ=0.2, K=100, first), ``semsoft_tuned`` (the default grid; on the whole
  validation split it is cross-fitted: each doc_id fold tuned on the other), ``constrained_ts`` (cross-fitted
  T), ``semsoft_ts`` (the defaults, cross-fitted T), ``prior`` (training-split frequencies), ``uniform``;
* the test-split protocol simulated one fold at a time (``heldout_by_fold``): each fold at the one
  configuration chosen on the other, against the constrained row on the same documents, with paired bootstrap
  intervals of the ECE ratio and of the macro-F1 / AUROC / NLL differences;
* 95% bootstrap CIs (the metric table's; macro-F1 with the same resampling), per-class recall, a reliability
  diagram of constrained / semsoft / semsoft_tuned;
* diagnostics for benchmarks/results/sweep_semsoft/README.md: K, the label embedding (first, mean, and the *input* embedding matrix, which
  differs from lm_head on untied models), fallback rates, the probability mass the model puts on the labels'
  first tokens, and the configuration each fold chose.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from lm_eval.tasks import TaskManager

sys.path.insert(0, str(Path(__file__).resolve().parent))
from semsoft_topk_cache import forward_topk  # noqa: E402

from semcal_eval import TASKS_DIR  # noqa: E402
from semcal_eval.cli import register_backends  # noqa: E402
from semcal_eval.core import metric_table as T  # noqa: E402
from semcal_eval.core.records import classification_record, to_arrays  # noqa: E402
from semcal_eval.models import resolve_pretrained  # noqa: E402
from semcal_eval.plots import reliability_diagram  # noqa: E402
from semcal_eval.semsoft.filters import CrossfitTemperature, ReferencePredictor, SemSoftTuned, TaskView  # noqa: E402
from semcal_eval.semsoft.scoring import apply_fallback, label_embeddings, normalized_rows, semsoft_from_topk  # noqa: E402
from semcal_eval.semsoft.spec import SemSoftParams  # noqa: E402
from semcal_eval.semsoft.tuning import GridPoint, select  # noqa: E402

HARD_COLUMNS = ["acc", "macro_f1", "ece_uw15", "brier_mc", "nll", "auroc_conf", "auroc_class"]
SOFT_COLUMNS = ["soft_ece", "soft_brier", "soft_nll", "spearman", "acc", "auroc_class", "ece_uw15", "nll"]


def contexts(lm, task_name: str, split: str, limit: int | None, chat: bool):
    """The task's own instances (contexts and label continuations), its gold/soft functions and training golds."""
    meta = {"split": split, "recalibrate": False, "tune": False}
    task = TaskManager(include_path=str(TASKS_DIR), metadata=meta).load([task_name])["tasks"][task_name]
    task.build_all_requests(limit=limit, rank=0, world_size=1, apply_chat_template=chat,
                            chat_template=lm.apply_chat_template if chat else None,
                            tokenizer_name=lm.tokenizer_name if chat else "")
    insts = sorted(task.instances, key=lambda i: i.doc_id)
    return insts, task


class _RowsView(TaskView):
    """The filters' view of the task for documents given directly (each carries its lm-eval doc_id)."""

    def doc_ids(self, docs):
        return [int(d["_doc_id"]) for d in docs]

    def tuning_rows(self):
        return [], []  # the whole split is evaluated: the tuned row is cross-fitted, as in the lm-eval run


def _chunked(top_p, top_ids, W, E, taus, chunk: int = 128) -> dict:
    """semsoft_from_topk over blocks of documents: its B×K×d gather would be 14 GB for 4,548 docs at K=500."""
    parts = [semsoft_from_topk(top_p[s:s + chunk], top_ids[s:s + chunk], W, E, taus)
             for s in range(0, len(top_ids), chunk)]
    return {"p_sem": torch.cat([r["p_sem"] for r in parts], 1), "fallback": torch.cat([r["fallback"] for r in parts], 1)}


def from_weights(top_p: torch.Tensor, w: torch.Tensor, baseline: torch.Tensor) -> tuple[np.ndarray, float]:
    """P(l) ∝ Σ_k p_k·w[k, l] for weights w (n×K×L) other than the backend's, the baseline where every weight is
    0 (as ``apply_fallback``); returns (P n×L, fallback rate)."""
    m = torch.einsum("nk,nkl->nl", top_p.float(), w)
    ok = m.sum(-1, keepdim=True) > 0
    return torch.where(ok, m / m.sum(-1, keepdim=True).clamp_min(1e-30), baseline).numpy(), float((~ok).float().mean())


def grid_probs(cache, W, label_tokens, grid: dict, baseline: torch.Tensor) -> dict[str, np.ndarray]:
    """P_sem (n×L) for every configuration of ``grid`` from the cached top-K (the backend's ``_grid``)."""
    top_p, top_ids = cache["top_lp"].exp(), cache["top_ids"]
    out = {}
    for emb in grid["label_embeddings"]:
        if emb == "input":
            continue
        E = label_embeddings(W, label_tokens, emb)
        for k in grid["top_k"]:
            r = _chunked(top_p[:, :k], top_ids[:, :k], W, E, grid["taus"])
            for i, t in enumerate(grid["taus"]):
                p = apply_fallback(r["p_sem"][i], r["fallback"][i], baseline)
                out[GridPoint(emb, k, t)] = (p.numpy(), float(r["fallback"][i].float().mean()))
    return out


def records(P, task, docs, extra=None):
    extra = extra or [{}] * len(docs)
    return [classification_record(p, task.gold(d), task.soft_target(d),
                                  temperature=e.get("temperature"), at_bound=e.get("at_bound"))
            for p, d, e in zip(P, docs, extra)]


def metrics_with_ci(recs, columns, n_boot=1000, seed=0) -> dict:
    """The table's metrics with its bootstrap CIs; macro-F1 and class AUROC (not in the table's CI set) get a
    same-seed document bootstrap (1000 and 200 resamples)."""
    m = T.compute_all(recs, columns, with_ci=True, ci_names=[c for c in columns if c in T.CI_METRICS])
    a = to_arrays(recs)
    rng = np.random.default_rng(seed)
    if "macro_f1" in m:
        vals = [T.compute("macro_f1", a.take(rng.integers(0, a.n, a.n))) for _ in range(n_boot)]
        m["macro_f1_ci_lo"], m["macro_f1_ci_hi"] = np.percentile(vals, [2.5, 97.5]).tolist()
    if "auroc_class" in m:
        vals = [T.compute("auroc_class", a.take(rng.integers(0, a.n, a.n))) for _ in range(200)]
        m["auroc_class_ci_lo"], m["auroc_class_ci_hi"] = np.nanpercentile(vals, [2.5, 97.5]).tolist()
    return m


#: the issue-14 goal, per metric: (hard-label metric, soft-label metric, how the tuned row must compare)
GOAL = [("ece_uw15", "soft_ece", "ratio"), ("macro_f1", "spearman", "not lower"),
        ("auroc_conf", "auroc_class", "not lower"), ("nll", "soft_nll", "lower")]


def heldout_by_fold(base_recs, tuned_recs, fold, configs: dict, n_tune: dict, soft: bool, n_boot: int = 1000,
                    seed: int = 0) -> list[dict]:
    """The test-split protocol simulated on the validation split, one fold at a time.

    A test-split run reports ``semsoft_tuned`` at ONE configuration chosen on validation documents it never
    reports. The cross-fitted row over the whole split mixes two configurations (one per fold), and ECE of
    that union can be lower than either's, so it overstates what a test run gets. Here each fold f is scored
    alone: its documents (``fold == f``) at ``configs[f]``, chosen on the other fold (never on f's labels),
    beside the constrained baseline on the same documents. For each goal metric m: the point values, and a
    paired bootstrap (documents resampled, both rows on the same resample) of ECE(constrained) / ECE(tuned) for
    ECE and of m(tuned) − m(constrained) for the others, 95% percentile intervals."""
    arr = {"constrained": to_arrays(base_recs), "semsoft_tuned": to_arrays(tuned_recs)}
    out = []
    for f in np.unique(fold):
        idx = np.flatnonzero(fold == f)
        c, s = arr["constrained"].take(idx), arr["semsoft_tuned"].take(idx)
        res = {"fold": int(f), "n": int(len(idx)), "tuned_n": int(n_tune[f]), "config": configs[f], "metrics": {}}
        rng = np.random.default_rng(seed)
        boots = [rng.integers(0, len(idx), len(idx)) for _ in range(n_boot)]
        for hard_m, soft_m, rule in GOAL:
            m = soft_m if soft else hard_m
            vc, vs = T.compute(m, c), T.compute(m, s)
            stat = (lambda a, b: a / b) if rule == "ratio" else (lambda a, b: b - a)
            with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a resample with one class has no AUROC: NaN, left out
                bs = np.array([stat(T.compute(m, c.take(b)), T.compute(m, s.take(b))) for b in boots])
            lo, hi = np.nanpercentile(bs, [2.5, 97.5])
            point = stat(vc, vs)
            met = {"ratio": point >= 4, "not lower": point >= 0, "lower": point < 0}[rule]
            res["metrics"][m] = {"constrained": vc, "semsoft_tuned": vs, "rule": rule, "stat": point,
                                 "ci": [float(lo), float(hi)], "met": bool(met)}
        out.append(res)
    return out


def crossfit_family(family: dict[str, np.ndarray], baseline: np.ndarray, task, docs, by: str):
    """A variant family tuned as ``semsoft_tuned`` is (``tuning.select``: the same criterion and macro-F1 guard),
    cross-fitted over the filters' doc_id folds: each fold's documents at the configuration chosen on the other.
    Returns (probabilities n×L, fold per document, {fold: key}, {fold: n_tune})."""
    n = len(docs)
    fold = np.arange(n) % 2  # docs are in doc_id order: the folds of SemSoftTuned / CrossfitTemperature
    golds = [task.gold(d) for d in docs]
    softs = [task.soft_target(d) for d in docs]
    P, keys, n_tune = np.empty_like(baseline), {}, {}
    for f in (0, 1):
        tune, rep = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
        rows = [{k: v[i] for k, v in family.items()} for i in tune]
        ch = select(rows, baseline[tune], [golds[i] for i in tune],
                    None if softs[0] is None else [softs[i] for i in tune], by=by)
        P[rep] = family[ch.key][rep]
        keys[f], n_tune[f] = ch.key, len(tune)
    return P, fold, keys, n_tune


def fmt_heldout(folds: list[dict]) -> str:
    lines = ["| fold (n) | tuned on (n) → config | " + " | ".join(
        f"{m} c → t ({'÷' if v['rule'] == 'ratio' else 'Δ'} [95% CI])" for m, v in folds[0]["metrics"].items()) + " |",
        "|" + "---|" * (len(folds[0]["metrics"]) + 2)]
    for r in folds:
        cells = [f"{v['constrained']:.3f} → {v['semsoft_tuned']:.3f} ("
                 + (f"÷{v['stat']:.2f} [{v['ci'][0]:.2f}, {v['ci'][1]:.2f}]" if v["rule"] == "ratio" else
                    f"{v['stat']:+.3f} [{v['ci'][0]:+.3f}, {v['ci'][1]:+.3f}]") + f") {'✓' if v['met'] else '✗'}"
                 for v in r["metrics"].values()]
        lines.append(f"| {r['fold']} ({r['n']}) | other fold ({r['tuned_n']}) → {r['config']} | " + " | ".join(cells)
                     + " |")
    return "\n".join(lines)


def per_class_recall(recs, labels) -> dict[str, dict]:
    a = to_arrays(recs)
    gold = a.gold.argmax(1)
    return {lab.strip(): {"n": int((gold == i).sum()), "recall": float((a.pred[gold == i] == i).mean())
                          if (gold == i).any() else float("nan"), "predicted": int((a.pred == i).sum())}
            for i, lab in enumerate(labels)}


def fmt_table(table: dict, columns: list[str]) -> str:
    head = "| row | n | " + " | ".join(columns) + " |"
    lines = [head, "|" + "---|" * (len(columns) + 2)]
    for name, m in table.items():
        cells = []
        for c in columns:
            v = m.get(c, float("nan"))
            lo, hi = m.get(f"{c}_ci_lo"), m.get(f"{c}_ci_hi")
            cells.append(f"{v:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None else ""))
        lines.append(f"| {name} | {m['n']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--task", default="goemotions_semsoft")
    ap.add_argument("--split", default=None, help="default: validation (GoEmotions), train (Civil Comments)")
    ap.add_argument("--limit", type=int, default=0, help="first N documents (0: the whole split)")
    ap.add_argument("--chat", choices=["on", "off"], default="on")
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--cache_dir", default=str(Path.home() / ".cache/semcal/sweep"))
    ap.add_argument("--out", default="benchmarks/results")
    args = ap.parse_args()
    register_backends()
    torch.set_num_threads(int(os.environ.get("SEMCAL_THREADS", "2")))
    from semcal_eval.semsoft.backend import SemSoftLM

    soft_task = args.task.startswith("civil")
    split = args.split or ("train" if soft_task else "validation")
    t_start = time.time()
    lm = SemSoftLM(pretrained=resolve_pretrained(f"semcal:{args.model}"), dtype="float32", device="cpu",
                   batch_size=args.batch_size)
    chat = args.chat == "on"
    tag = f"{args.model}-chat{args.chat}"
    insts, task = contexts(lm, args.task, split, args.limit or None, chat)
    short = "goemotions" if args.task.startswith("goemotions") else args.task.replace("_semsoft", "")
    cache_path = Path(args.cache_dir) / f"{tag}-{short}-{split}.pt"
    cache_path.parent.mkdir(parents=True, exist_ok=True)
    cache = forward_topk(lm, insts, cache_path, save_every=200)
    labels = list(insts[0].args[1]["choices"])
    docs = [{**i.doc, "_doc_id": int(i.doc_id)} for i in insts]
    n = len(docs)
    W_out = lm.output_embedding.detach()
    W_in = lm.model.get_input_embeddings().weight.detach()
    tied = W_out.data_ptr() == W_in.data_ptr()
    label_tokens = cache["label_tokens"]
    baseline = torch.softmax(cache["label_lp"].float(), -1)  # no collisions (checked by forward_topk)
    params = SemSoftParams.from_metadata({**(task.config.metadata or {}), "tune": True})
    t0 = time.time()
    grid = grid_probs(cache, W_out, label_tokens, params.grid, baseline)
    grid_s = time.time() - t0
    view = _RowsView(task)
    resps = [[{"baseline": baseline[i].tolist(), "grid": {k: v[0][i].tolist() for k, v in grid.items()}}]
             for i in range(n)]
    tuned = SemSoftTuned(view, by=params.tune_by).apply(resps, docs)
    default_key = GridPoint(params.label_embedding, params.top_k, params.tau)
    P_default = grid[default_key][0] if default_key in grid else None
    rows = {
        "constrained": records(baseline.numpy(), task, docs),
        "semsoft": records(P_default, task, docs),
        "semsoft_tuned": records([t["probs"] for t in tuned], task, docs),
    }
    ts = CrossfitTemperature(view).apply([baseline[i].tolist() for i in range(n)], docs)
    rows["constrained_ts"] = records([t["probs"] for t in ts], task, docs, ts)
    ts_sem = CrossfitTemperature(view).apply([P_default[i].tolist() for i in range(n)], docs)
    rows["semsoft_ts"] = records([t["probs"] for t in ts_sem], task, docs, ts_sem)
    ref_resps = [[{"baseline": [1.0 / len(labels)] * len(labels)}]] * n
    for kind in ("prior", "uniform"):
        rows[kind] = records(ReferencePredictor(kind, view).apply(ref_resps, docs), task, docs)
    columns = SOFT_COLUMNS if soft_task else HARD_COLUMNS
    table = {name: {"n": n, **metrics_with_ci(r, columns)} for name, r in rows.items()}
    tuned_fold = np.array([t["tuned_fold"] for t in tuned])
    first_of = {int(f): tuned[int(np.flatnonzero(tuned_fold == f)[0])] for f in np.unique(tuned_fold)}
    heldout = heldout_by_fold(rows["constrained"], rows["semsoft_tuned"], tuned_fold,
                              {f: GridPoint(t["tuned_embedding"], t["tuned_top_k"], t["tuned_tau"])
                               for f, t in first_of.items()}, {f: t["tuned_n"] for f, t in first_of.items()}, soft_task)
    folds = sorted({(t["tuned_fold"], t["tuned_embedding"], t["tuned_top_k"], t["tuned_tau"], t["tuned_guard"])
                    for t in tuned}, key=str)

    # -- diagnostics ---------------------------------------------------------------------------------------------
    diag: dict = {"tied_embeddings": bool(tied), "label_first_token_mass": {}, "fallback_rate": {}}
    mass = cache["label_lp"].float().exp().sum(-1)
    top1 = cache["top_ids"][:, 0]
    firsts = torch.tensor([t[0] for t in label_tokens])
    diag["label_first_token_mass"] = {"mean": float(mass.mean()), "median": float(mass.median()),
                                      "top1_is_a_label_token": float(torch.isin(top1, firsts).float().mean())}
    diag["multi_token_labels"] = [lab.strip() for lab, t in zip(labels, label_tokens) if len(t) > 1]
    diag["fallback_rate"] = {k: fb for k, (_, fb) in grid.items() if fb > 0}
    extra_grid = {"taus": [0.0, 0.1, 0.2, 0.3], "top_k": [10, 100, 500, 2000], "label_embeddings": ["first", "mean"]}
    ext = grid_probs(cache, W_out, label_tokens, extra_grid, baseline)
    if not tied:  # the input embedding matrix for both the top-K tokens and the labels
        top_p, top_ids = cache["top_lp"].exp(), cache["top_ids"]
        for emb in ("first", "mean"):
            E = label_embeddings(W_in, label_tokens, emb)
            for k in extra_grid["top_k"]:
                r = _chunked(top_p[:, :k], top_ids[:, :k], W_in, E, extra_grid["taus"])
                for i, t in enumerate(extra_grid["taus"]):
                    p = apply_fallback(r["p_sem"][i], r["fallback"][i], baseline)
                    ext[GridPoint(f"input-{emb}", k, t)] = (p.numpy(), float(r["fallback"][i].float().mean()))
    diag_cols = ["brier_mc", "nll", "macro_f1", "ece_uw15", "auroc_conf", "acc"] if not soft_task else ["soft_nll", "soft_ece",
                                                                                            "spearman", "auroc_class",
                                                                                            "soft_brier"]
    # variants outside the tuning grid, tried and not adopted (benchmarks/results/sweep_semsoft/README.md): embeddings centred on the
    # vocabulary mean (removes the common direction that makes every cosine positive), a sharpening exponent
    # w = max(0, cos − τ)^γ (γ → ∞ is the constrained first-token baseline), label tokens anchored to their own
    # label, and a mixture with the baseline
    top_p, top_ids = cache["top_lp"].exp(), cache["top_ids"]
    Wc = W_out - W_out.float().mean(0, keepdim=True)
    Ec = label_embeddings(Wc, label_tokens, "first")
    for k in (100, 500):
        r = _chunked(top_p[:, :k], top_ids[:, :k], Wc, Ec, [0.0, 0.1, 0.2])
        for i, t in enumerate([0.0, 0.1, 0.2]):
            p = apply_fallback(r["p_sem"][i], r["fallback"][i], baseline)
            ext[GridPoint("centred-first", k, t)] = (p.numpy(), float(r["fallback"][i].float().mean()))
    E1 = label_embeddings(W_out, label_tokens, "first")
    cos = torch.cat([torch.einsum("nkd,ld->nkl", normalized_rows(W_out, top_ids[s:s + 128, :500].reshape(-1)).reshape(
        len(top_ids[s:s + 128]), 500, -1), E1) for s in range(0, n, 128)])  # n×500×L, gathered in blocks
    for t in (0.0, 0.1):
        for g in (2, 4, 8):
            ext[f"sharpen-gamma{g}/k500/tau{t:g}"] = from_weights(top_p[:, :500], (cos - t).clamp_min(0) ** g, baseline)
    # anchored: a label's own first token keeps all its mass (as in the constrained row); only the other tokens
    # are shared out by cosine — tests whether sharing the label tokens' own mass is what costs AUROC.
    # It and γ=2 (the probes that moved ECE most) are also tuned and held out like the row itself, over the row's
    # τ and K ≤ 500, so they compare with the row's held-out table and not with in-sample best cases.
    families = {"anchored": {}, "sharpen-gamma2": {}}
    for k in [k for k in params.grid["top_k"] if k <= 500]:
        own = top_ids[:, :k, None] == firsts[None, None, :]  # n×K×L
        for t in params.grid["taus"]:
            wc = (cos[:, :k] - t).clamp_min(0)
            for fam, w in (("anchored", torch.where(own.any(-1, keepdim=True), own.float() * (1 - t), wc)),
                           ("sharpen-gamma2", wc ** 2)):
                families[fam][GridPoint("first", k, t)] = from_weights(top_p[:, :k], w, baseline)
    for key, P in families["anchored"].items():
        if key.top_k == 500 and key.tau <= 0.2:
            ext[key._replace(label_embedding="anchored")] = P
    families = {fam: {key: P for key, (P, _) in members.items()} for fam, members in families.items()}
    base_np = baseline.numpy()
    diag["heldout_families"] = {}
    for fam, members in families.items():
        P, fold, keys, n_tune = crossfit_family(members, base_np, task, docs, params.tune_by)
        diag["heldout_families"][fam] = heldout_by_fold(rows["constrained"], records(P, task, docs), fold, keys,
                                                        n_tune, soft_task)
    del own, families
    P0 = grid[GridPoint("first", 100, 0.0)][0]
    for a in (0.25, 0.5, 0.75):
        ext[f"mix-constrained{a:g}/k100/tau0"] = (a * baseline.numpy() + (1 - a) * P0, 0.0)
    del cos
    diag["grid"] = {str(k): {**T.compute_all(records(P, task, docs), diag_cols, with_ci=False), "fallback": fb}
                    for k, (P, fb) in ext.items()}
    # label-label cosine (lm_head rows): how much mass a label's own token spreads to the others at τ
    C = (E1 @ E1.T).numpy()
    off = C[~np.eye(len(labels), dtype=bool)]
    diag["label_cosine"] = {"mean_off_diagonal": float(off.mean()), "max_off_diagonal": float(off.max()),
                            "share_above_0.2": float((off > 0.2).mean())}
    # how close the top-K tokens are to any label: share of top-100 mass within cos > τ of the nearest label
    best = torch.cat([torch.einsum("nkd,ld->nkl", normalized_rows(W_out, cache["top_ids"][s:s + 128, :100].reshape(-1))
                                   .reshape(len(cache["top_ids"][s:s + 128]), 100, -1), E1).max(-1).values
                      for s in range(0, n, 128)])
    p100 = cache["top_lp"][:, :100].exp()
    diag["top100_mass_near_a_label"] = {f"cos>{t}": float(((best > t).float() * p100).sum(-1).mean() /
                                                          p100.sum(-1).mean()) for t in (0.2, 0.4, 0.6, 0.9)}
    if not soft_task:
        diag["per_class_recall"] = {name: per_class_recall(rows[name], labels)
                                    for name in ("constrained", "semsoft", "semsoft_tuned")}

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"semsoft_{short}_{tag}"
    series = {}
    for name in ("constrained", "semsoft", "semsoft_tuned"):
        a = to_arrays(rows[name])
        series[name] = (a.conf.tolist(), a.correct.astype(int).tolist())
    reliability_diagram(out / f"{stem}_reliability.png", series, title=f"{args.model} ({args.task}, chat {args.chat}, "
                        f"{n} {split} docs)")
    wall = time.time() - t_start
    summary = {"model": args.model, "task": args.task, "split": split, "chat": chat, "n_docs": n,
               "forward_s": cache["seconds"], "grid_s": grid_s, "wall_s_this_call": wall, "table": table, "heldout_by_fold": heldout,
               "tuned_choices": [dict(zip(("fold", "embedding", "top_k", "tau", "guard"), f)) for f in folds],
               "grid": {"default": params.grid}, "diagnostics": diag}
    (out / f"{stem}.json").write_text(json.dumps(summary, indent=1, default=float))
    md = [f"## {args.model}, {args.task}, chat {args.chat}: {n} {split} documents",
          f"forward passes {cache['seconds'] / 60:.1f} min (one per document, prefix-cached); the {len(grid)}-"
          f"configuration tuning grid {grid_s:.1f} s", "", fmt_table(table, columns), "",
          "semsoft_tuned choices: " + "; ".join(f"fold {f[0]}: {f[1]}, K={f[2]}, τ={f[3]:g}"
                                                 + ("" if f[4] else " (guard not met)") for f in folds),
          "", "held out, one fold at a time (the test-split protocol: one configuration, chosen on documents "
          "never reported; paired bootstrap; ✓ = the issue-14 goal is met on the point value):", "",
          fmt_heldout(heldout)]
    md += ["", "diagnostics: " + json.dumps({k: v for k, v in diag.items()
                                             if k not in ("grid", "per_class_recall", "heldout_families")},
                                            default=float)]
    for fam, folds_f in diag["heldout_families"].items():
        md += ["", f"held out, variant `{fam}` (tuned and cross-fitted like semsoft_tuned):", "", fmt_heldout(folds_f)]
    if "per_class_recall" in diag:
        pcr = diag["per_class_recall"]
        md += ["", "| label | n | recall constrained | semsoft | semsoft_tuned | predicted c/s/t |", "|---|---|---|---|---|---|"]
        for lab in pcr["constrained"]:
            c, s, t = (pcr[r][lab] for r in ("constrained", "semsoft", "semsoft_tuned"))
            md.append(f"| {lab} | {c['n']} | {c['recall']:.2f} | {s['recall']:.2f} | {t['recall']:.2f} | "
                      f"{c['predicted']}/{s['predicted']}/{t['predicted']} |")
    text = "\n".join(md) + "\n"
    (out / f"{stem}.md").write_text(text)
    print(text)
    print(f"wrote {out / stem}.json/.md/_reliability.png")


if __name__ == "__main__":
    main()
