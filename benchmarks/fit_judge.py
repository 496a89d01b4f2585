"""Fit the learned judge (semcal_eval/qa/learned.py) on people's verdicts, and measure every choice honestly.

Data: EVOUNA (``$SEMCAL_DATA_DIR/evouna``, read by bench_judge_humans.load_evouna): answers of five systems (fid,
gpt35, chatgpt, gpt4, newbing) to NQ-Open and TriviaQA questions, each judged by people.

- **Grading form.** The lexical stage is fit on every judged answer (cheap); the model's yes/no log-odds are
  computed on a seeded sample of questions (``--questions`` per dataset, all their judged answers), cached in
  ``<out>/lm_logodds_<model>.jsonl`` by (dataset, question index, system, prompt sha256) so a re-run scores only
  what is new and every number is recomputable without the model.
- **Agreement form.** Pairs of two judged answers to one question of the sample: both people-correct → same
  answer (1), one correct and one wrong → different (0); two wrong answers are not labelled (they may or may not
  say the same wrong thing). The model is asked in both orders.

- **The veto lift.** The thresholds come from the defence probe's saved attack scores
  (probe_defence_model.lift_thresholds, no EVOUNA); the lift model (``--lift-model``, default the 1.5B; ``none``:
  no lift) rates the sample's answers a liftable defence refused, cached in ``<out>/lm_logodds_<lift model>.jsonl``.
  Candidates with and without it are reported, and the shipped grade.json carries it.

Two cross-validations, each out-of-fold prediction made by a model that never saw the row's fold:
``question`` (5 folds by question) and ``system`` (leave one answering system out: a judge fit on four systems
grades the fifth; a pair is held out when either answer is the held-out system's). Candidates: cover, the LM alone
(a fitted threshold), the lexical stage, the full stage with no gate, the gated judge without and with the
vetoes (:func:`semcal_eval.qa.learned.grade_veto`; with them is what ships), what each veto and each feature
pays in agreement. ``--balanced`` fits every stage with class_weight="balanced". CIs: 95 % cluster bootstrap over questions (bench_judge_humans).

The gate: on the lexical stage's out-of-fold probabilities over every EVOUNA answer (leave-one-system-out), the
widest (lo, hi) whose gated verdicts agree with people at ≥ ``--gate-precision`` (0.99) on each side.

    PYTHONPATH=. python benchmarks/fit_judge.py                    # fit, measure, write the weights
    PYTHONPATH=. python benchmarks/fit_judge.py --score-only       # no model: re-fit from the cached log-odds

Writes ``semcal_eval/qa/judge_weights/{grade,agree}.json`` (the shipped weights, fit on all the data) and
``<out>/fit.json`` + ``<out>/fit.md`` (default ``<out>``: benchmarks/results/judge_humans).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_judge_humans import ClusterBootstrap, default_data_dir, load_evouna, metrics  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from semcal_eval.qa import learned as L  # noqa: E402
from semcal_eval.qa.grading import grade_cover  # noqa: E402

SYSTEMS = ("fid", "gpt35", "chatgpt", "gpt4", "newbing")
SEED = 20261207
#: the LM's log-odds clip (the judge applies the same)
CLIP = L.LOGODDS_CLIP


# ------------------------------------------------------------------------------------------------ fitting
#: sklearn's class_weight for every stage (``--balanced`` sets "balanced": people's base rate on EVOUNA, 76 %
#: correct, is then not learned as a prior that a weaker system's answers do not share)
CLASS_WEIGHT = None


def fit_stage(X: np.ndarray, y: np.ndarray, features: tuple[str, ...], C: float = 1.0) -> L.Stage:
    """A logistic regression on standardised features (sklearn, L2 with strength 1/C), as a judge Stage."""
    mean = X.mean(0)
    scale = X.std(0)
    scale = np.where(scale > 1e-9, scale, 1.0)
    lr = LogisticRegression(C=C, max_iter=2000, class_weight=CLASS_WEIGHT).fit((X - mean) / scale, y)
    return L.Stage(tuple(features), tuple(map(float, mean)), tuple(map(float, scale)),
                   tuple(map(float, lr.coef_[0])), float(lr.intercept_[0]))


def stage_probs(st: L.Stage, X: np.ndarray, cols: list[int] | None = None) -> np.ndarray:
    Xs = X if cols is None else X[:, cols]
    z = st.intercept + ((Xs - np.array(st.mean)) / np.array(st.scale)) @ np.array(st.coef)
    return 1 / (1 + np.exp(-z))


def choose_gate(p: np.ndarray, y: np.ndarray, precision: float) -> tuple[float, float]:
    """The widest (lo, hi): answers with p ≥ hi are people-correct, and with p ≤ lo people-wrong, at a rate ≥
    ``precision`` each (scanning thresholds from the confident end inwards; lo = 0 / hi = 1 when none holds)."""
    order = np.argsort(-p)
    ok = np.cumsum(y[order]) / np.arange(1, len(p) + 1)
    good = np.nonzero((ok >= precision) & (p[order] >= 0.5))[0]
    # the last rank at which the precision of everything above still holds
    hi = float(p[order][good.max()]) if len(good) else 1.0
    order = np.argsort(p)
    ok = np.cumsum(1 - y[order]) / np.arange(1, len(p) + 1)
    good = np.nonzero((ok >= precision) & (p[order] < 0.5))[0]
    lo = float(p[order][good.max()]) if len(good) else 0.0
    return min(lo, 0.5), max(hi, 0.5)


def folds(keys_q: np.ndarray, systems: list[tuple[str, ...]], scheme: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) masks. ``question``: 5 folds by question (a seeded permutation of question keys);
    ``system``: one fold per system, a row held out when it involves the system (pairs: either answer), trained
    on rows that involve none of it."""
    n = len(keys_q)
    out = []
    if scheme == "question":
        uq = sorted(set(keys_q.tolist()))
        rng = np.random.default_rng(SEED)
        perm = {q: i % 5 for i, q in enumerate(rng.permutation(uq).tolist())}
        f = np.array([perm[q] for q in keys_q.tolist()])
        for k in range(5):
            out.append((f != k, f == k))
    else:
        for s in SYSTEMS:
            inv = np.array([s in ss for ss in systems])
            out.append((~inv, inv))
    assert all(len(tr) == n for tr, _ in out)
    return out


def lexical_matrix(rows, info) -> tuple[np.ndarray, float]:
    """Every answer's lexical features, cached in the temp folder by the data's and the judge code's sha256 (a
    re-run of the fit skips the ~6 min of reading)."""
    import hashlib
    import tempfile

    h = hashlib.sha256()
    for v in info.values():
        h.update(v["sha256"].encode())
    for f in ("learned.py", "cover.py", "grading.py", "answers.py"):
        h.update((REPO / "semcal_eval/qa" / f).read_bytes())
    path = Path(tempfile.gettempdir()) / f"semcal_lexical_{h.hexdigest()[:16]}.npz"
    if path.is_file():
        d = np.load(path)
        return d["X"], float(d["s"])
    t0 = time.perf_counter()
    X = np.array([[L.grade_features(r.answer, list(r.golds), r.question)[f] for f in L.GRADE_LEXICAL] for r in rows])
    s = (time.perf_counter() - t0) / len(rows)
    np.savez(path, X=X, s=s)
    return X, s


# ------------------------------------------------------------------------------------------------ model scores
def model_cache(path: Path) -> dict:
    out = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                d = json.loads(line)
                out[tuple(d["key"])] = d["logodds"]
    return out


def score_missing(cache: dict, path: Path, want: list[tuple[tuple, tuple[str, str]]], model: str, batch: int,
                  log_every: int = 64) -> float:
    """Rate every message whose key is not cached (appending to the cache file as it goes); returns seconds."""
    todo = [(k, m) for k, m in want if k not in cache]
    if not todo:
        return 0.0
    from semcal_eval.qa.yesno import YesNoLM

    lm = YesNoLM(model, batch_size=batch, device="cpu")
    t0 = time.perf_counter()
    with open(path, "a") as f:
        for s in range(0, len(todo), log_every):
            chunk = todo[s:s + log_every]
            vals = lm.logodds([m for _, m in chunk])
            for (k, _), v in zip(chunk, vals):
                cache[k] = v
                f.write(json.dumps({"key": list(k), "logodds": v}) + "\n")
            f.flush()
            el = time.perf_counter() - t0
            print(f"  [lm] {s + len(chunk)}/{len(todo)} rated, {el / (s + len(chunk)):.2f} s each", flush=True)
    return time.perf_counter() - t0


# ------------------------------------------------------------------------------------------------ evaluation
def summarise(pred: np.ndarray, human: np.ndarray, rows_ds: np.ndarray, rows_sys: np.ndarray,
              boot: ClusterBootstrap | None) -> dict:
    out = {}
    for ds in ("all", "NQ", "TQ"):
        m = np.ones(len(pred), bool) if ds == "all" else rows_ds == ds
        r = metrics(pred[m], human[m])
        if boot is not None and ds != "all":
            r.update(boot.agreement_kappa_ci(pred, human, m))
        out[ds] = r
    out["by_system"] = {s: {ds: metrics(pred[(rows_sys == s) & (rows_ds == ds)],
                                         human[(rows_sys == s) & (rows_ds == ds)])["agreement"]
                            for ds in ("NQ", "TQ")} for s in SYSTEMS}
    return out


SHAPES = (("short", 0, 5), ("sentence", 6, 10 ** 9))


def card_entry(pred: np.ndarray, human: np.ndarray, words: np.ndarray, systems: np.ndarray,
               boot: ClusterBootstrap) -> dict:
    """One grader's card: its 2×2 table against people (out of fold) overall and per answer shape (short ≤ 5
    words, sentence), agreement and kappa with CIs, and whether its sensitivity and specificity are the same
    across the five answering systems within a shape (chi-square homogeneity; the rate correction assumes the
    errors do not depend on who answered, given the shape)."""
    from scipy.stats import chi2_contingency

    def homog(mask):
        out = {}
        for rate, sel in (("sensitivity_p", human), ("specificity_p", ~human)):
            tab = [[int(np.sum(pred[m] == v)) for v in (True, False)]
                   for s_ in SYSTEMS if (m := mask & sel & (systems == s_)).sum() >= 5]
            tab = [r for r in tab]
            cols = np.array(tab).sum(0) if tab else np.zeros(2)
            out[rate] = (float(chi2_contingency(tab)[1]) if len(tab) >= 2 and (cols > 0).all() else float("nan"))
        return out

    entry = {}
    for name, lo_, hi_ in (("all", 0, 10 ** 9),) + SHAPES:
        m = (words >= lo_) & (words <= hi_)
        r = metrics(pred[m], human[m])
        r.update(boot.agreement_kappa_ci(pred, human, m))
        r["sensitivity"] = r["tp"] / (r["tp"] + r["fn"]) if r["tp"] + r["fn"] else float("nan")
        r["specificity"] = r["tn"] / (r["tn"] + r["fp"]) if r["tn"] + r["fp"] else float("nan")
        r.update(homog(m))
        entry[name] = r
    return entry


def errors_by_route(pred: np.ndarray, human: np.ndarray, ds: np.ndarray, systems: np.ndarray,
                    routes: dict[str, np.ndarray]) -> dict:
    """Where the judge's disagreements with people arise, per dataset and answering system: for each route an
    answer takes (``routes``: disjoint masks), answers, false positives (graded correct, people-wrong) and false
    negatives. Counts only, no answer text: it points at the stage to improve without reading the sample."""
    out = {}
    for d in ("NQ", "TQ"):
        for s in SYSTEMS:
            m = (ds == d) & (systems == s)
            out[f"{d}/{s}"] = {r: {"n": int((m & r_m).sum()), "fp": int((m & r_m & pred & ~human).sum()),
                                   "fn": int((m & r_m & ~pred & human).sum())} for r, r_m in routes.items()}
    return out


def crossfit(X: np.ndarray, y: np.ndarray, feats: tuple[str, ...], cv, C: float = 1.0) -> np.ndarray:
    p = np.full(len(y), np.nan)
    for tr, te in cv:
        st = fit_stage(X[tr], y[tr], feats, C)
        p[te] = stage_probs(st, X[te])
    return p


def render(out: dict) -> str:
    """The fit's report (markdown) from its results JSON."""
    lines = [f"# The learned judge, fit on EVOUNA ({out['model']})", "",
             f"Seed {out['seed']}; {out['questions_per_dataset']} sampled questions per dataset "
             f"({out['n_sample_answers']} judged answers) for the model's features; the lexical stage and the gate "
             f"on all {out['gate_report']['n']} answers. Command: `PYTHONPATH=. python benchmarks/fit_judge.py "
             f"--questions {out['questions_per_dataset']} --pair-questions {out['pair_questions']}"
             f"{' --balanced' if out.get('class_weight') else ''}` "
             f"({out['wall_s'] / 60:.0f} min, load {out['load'][0]:.1f}).", "",
             "## Grading form: agreement / kappa with people, out of fold", ""]
    for scheme, title in (("system", "leave one answering system out"), ("question", "5 folds by question")):
        res = out["results"]["grade"][scheme]
        lines += [f"### {title}", "", f"The model's feature: `{res.get('model_feature', L.MODEL_FEATURE)}`; a name in "
                  "brackets is the same judge (gate, vetoes) with another model feature.", "", "| judge | NQ agreement [CI] | NQ kappa | TQ agreement [CI] | TQ kappa | "
                  "NQ FPR / FNR | TQ FPR / FNR | worst system (NQ, TQ) |", "|---|---|---|---|---|---|---|---|"]
        names = ["cover", "lm_alone", "lexical", "lexical_veto", "full_no_gate", "learned_no_veto",
                 "learned_no_lift", "learned"]
        names = [n for n in names if n in res]
        names += sorted(k for k in res if "[" in k)
        for name in names:
            r = res[name]
            nq, tq = r["NQ"], r["TQ"]
            worst = {ds: min(r["by_system"].items(), key=lambda kv: kv[1][ds]) for ds in ("NQ", "TQ")}
            ci = lambda d: f"[{d['agreement_ci'][0]:.3f}, {d['agreement_ci'][1]:.3f}]"  # noqa: E731
            lines.append(f"| {name} | {nq['agreement']:.3f} {ci(nq)} | {nq['kappa']:.3f} | {tq['agreement']:.3f} "
                         f"{ci(tq)} | {tq['kappa']:.3f} | {nq['fpr']:.3f} / {nq['fnr']:.3f} | {tq['fpr']:.3f} / "
                         f"{tq['fnr']:.3f} | {worst['NQ'][0]} {worst['NQ'][1]['NQ']:.3f}, {worst['TQ'][0]} "
                         f"{worst['TQ'][1]['TQ']:.3f} |")
        d = res["learned"]["diff_vs_cover_ci"]
        dl = res["learned"].get("diff_vs_lexical_veto_ci")
        lines += ["", f"learned − cover (paired bootstrap): NQ [{d['NQ'][0]:+.3f}, {d['NQ'][1]:+.3f}], TQ "
                      f"[{d['TQ'][0]:+.3f}, {d['TQ'][1]:+.3f}]"
                  + (f"; learned − lexical_veto (what the model adds): NQ [{dl['NQ'][0]:+.3f}, {dl['NQ'][1]:+.3f}], "
                     f"TQ [{dl['TQ'][0]:+.3f}, {dl['TQ'][1]:+.3f}]" if dl else "")
                  + f"; answers the model never saw (gated): {res['learned']['share_model_skipped']:.2f}.", "",
                  "What each feature pays (agreement of the full stage less the feature's, pooled): " + ", ".join(
                      f"{f} {v:+.4f}" for f, v in res["ablation_agreement_drop"].items()), "",
                  "What each veto pays (agreement with it less without it, pooled; answers it applies to): "
                  + ", ".join(f"{v} {g:+.4f} ({res['veto_counts'][v.removeprefix('veto ')]})"
                              for v, g in res["veto_agreement_gain"].items()), ""]
        routes = res["learned"].get("errors_by_route")
        if routes:
            names = list(next(iter(routes.values())))
            lines += ["Where the learned judge's disagreements arise (counts, out of fold): per route an answer takes, "
                      "answers n, false positives / false negatives.", "",
                      "| dataset/system | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
            lines += [f"| {k} | " + " | ".join(f"{v[r]['n']}: {v[r]['fp']} / {v[r]['fn']}" for r in names) + " |"
                      for k, v in routes.items()]
            lines.append("")
    lift = out.get("lift") or {}
    if lift:
        dl = out["results"]["grade"]["system"]["learned"].get("diff_vs_no_lift_ci", {})
        lines += ["## The veto lift", "", f"{lift['model']}'s contrast above the defence's threshold "
                  f"(probe_defence_model.lift_thresholds; {lift['chosen_on']}) lifts the veto: "
                  + ", ".join(f"{d} {t:+.2f}" for d, t in lift["thresholds"].items())
                  + f". In the sample: {lift['n_liftable']} answers a liftable defence refused, {lift['n_lifted']} "
                  f"lifted ({lift['lifted_people_correct']} of them people-correct); by defence, refused / lifted: "
                  + ", ".join(f"{d} {v['refused']} / {v['lifted']}" for d, v in lift["by_defence"].items())
                  + (f". learned − learned_no_lift, leave one system out: NQ [{dl['NQ'][0]:+.3f}, "
                     f"{dl['NQ'][1]:+.3f}], TQ [{dl['TQ'][0]:+.3f}, {dl['TQ'][1]:+.3f}]." if dl else "."), ""]
    g = out["gate_report"]
    lines += ["## The gate", "", f"Lexical-stage probability outside ({g['gate'][0]:.3f}, {g['gate'][1]:.3f}) is "
              f"final: {g['share_gated']:.2f} of all EVOUNA answers, agreeing with people on "
              f"{g['gated_agreement']:.4f} of them (leave-one-system-out probabilities).", ""]
    ag = out["results"].get("agree") or {}
    if ag:
        lines += ["## Agreement form (pairs: both people-correct = same, one correct one wrong = different)", "",
                  f"{ag['n_pairs']} pairs; gate {ag['gate'][0]:.3f}, {ag['gate'][1]:.3f}.", "",
                  "| judge | question folds: agreement / kappa | leave one system out: agreement / kappa |",
                  "|---|---|---|"]
        for name in ag["system"]:
            q, s_ = ag["question"][name], ag["system"][name]
            lines.append(f"| {name} | {q['agreement']:.3f} / {q['kappa']:.3f} | {s_['agreement']:.3f} / "
                         f"{s_['kappa']:.3f} |")
    return "\n".join(lines) + "\n"


def cv_gated(Xall, yall, q_all, sys_all, Xs, Xf, ys, lo, cv, cv_all, precision, full_feats, ablation=True,
             model_feats: tuple[str, ...] = (L.MODEL_FEATURE,), lexical: dict | None = None) -> dict:
    """Out-of-fold predictions of every grading candidate under one cross-validation: the LM alone, the
    lexical stage (fit on every EVOUNA answer outside the fold), the full stage (fit on the sample outside the
    fold), the gated judge (the gate chosen inside the training part, by its own leave-one-system-out), and the
    full stage less each feature. ``lexical``: an earlier call's result under the same folds, whose lexical stage
    and gates (which no model feature changes) are reused rather than fit again."""
    n = len(ys)
    o = {k: np.full(n, np.nan) for k in ("p_lm", "p_lex", "p_full", "p_gated")}
    o["used_model"], o["gates"] = np.zeros(n, bool), []
    o["ablate"] = {f: np.full(n, np.nan) for f in full_feats} if ablation else {}
    for i, ((tr, te), (tr_all, _)) in enumerate(zip(cv, cv_all)):
        o["p_lm"][te] = stage_probs(fit_stage(lo[tr], ys[tr], model_feats), lo[te])
        if lexical is None:
            lex_st = fit_stage(Xall[tr_all], yall[tr_all], L.GRADE_LEXICAL)
            inner = crossfit(Xall[tr_all], yall[tr_all], L.GRADE_LEXICAL,
                             folds(q_all[tr_all], [s for s, t in zip(sys_all, tr_all) if t], "system"))
            g = choose_gate(inner, yall[tr_all], precision)
            o["p_lex"][te] = stage_probs(lex_st, Xs[te])
        else:
            g = lexical["gates"][i]
            o["p_lex"][te] = lexical["p_lex"][te]
        o["gates"].append(g)
        o["p_full"][te] = stage_probs(fit_stage(Xf[tr], ys[tr], full_feats), Xf[te])
        in_gate = (o["p_lex"][te] > g[0]) & (o["p_lex"][te] < g[1])
        o["used_model"][te] = in_gate
        o["p_gated"][te] = np.where(in_gate, o["p_full"][te], o["p_lex"][te])
        for k, f in enumerate(o["ablate"]):
            cols = [c for c in range(len(full_feats)) if c != k]
            st = fit_stage(Xf[tr][:, cols], ys[tr], tuple(full_feats[c] for c in cols))
            o["ablate"][f][te] = stage_probs(st, Xf[te][:, cols])
    return o


def lift_spec(model: str) -> dict:
    """The veto lift's thresholds for ``model``, chosen on the attacks' saved scores
    (probe_defence_model.lift_thresholds; the probe must have scored ``model``)."""
    from probe_defence_model import OUT, lift_thresholds

    out = json.loads(OUT.with_suffix(".json").read_text())
    if model not in out["models"]:
        raise SystemExit(f"fit_judge: the defence probe has no scores for {model}: run "
                         f"`python benchmarks/probe_defence_model.py --models {model}` first, or --lift-model none")
    return lift_thresholds(out, model)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--model", default="semcal:qwen2.5-coder-0.5b")
    ap.add_argument("--questions", type=int, default=200, help="sampled questions per dataset for the model")
    ap.add_argument("--pair-questions", type=int, default=60, help="of those, questions per dataset for pairs")
    ap.add_argument("--gate-precision", type=float, default=0.99)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--boot", type=int, default=1000)
    ap.add_argument("--score-only", action="store_true", help="use cached log-odds only; rows without are dropped")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/results/judge_humans")
    ap.add_argument("--weights-dir", type=Path, default=L.WEIGHTS_DIR)
    ap.add_argument("--render", type=Path, default=None, help="only write the report of this results JSON")
    ap.add_argument("--balanced", action="store_true", help="fit every stage with class_weight='balanced'")
    ap.add_argument("--lift-model", default=None, help="the model whose contrast may lift a defence's veto "
                    "(default: probe_defence_model.LIFT_MODEL; 'none': no lift)")
    a = ap.parse_args(argv)
    if a.lift_model is None:
        from probe_defence_model import LIFT_MODEL

        a.lift_model = LIFT_MODEL
    a.lift_model = None if a.lift_model == "none" else a.lift_model
    global CLASS_WEIGHT
    CLASS_WEIGHT = "balanced" if a.balanced else None
    if a.render:
        a.render.with_suffix(".md").write_text(render(json.loads(a.render.read_text())))
        return 0
    a.out.mkdir(parents=True, exist_ok=True)
    rows, info = load_evouna(a.data or default_data_dir())
    data_sha = {v["file"]: v["sha256"] for v in info.values()}
    slug = a.model.removeprefix("semcal:").replace("/", "_")
    cache_path = a.out / f"lm_logodds_{slug}.jsonl"
    cache = model_cache(cache_path)
    t_start = time.perf_counter()

    # ---------------------------------------------------------------- the lexical stage on every answer
    Xall, lex_feature_s = lexical_matrix(rows, info)
    yall = np.array([r.human for r in rows], dtype=float)
    q_all = np.array([f"{r.ds}:{r.qi}" for r in rows])
    sys_all = [(r.system,) for r in rows]
    p_lex_oof = crossfit(Xall, yall, L.GRADE_LEXICAL, folds(q_all, sys_all, "system"))
    gate = choose_gate(p_lex_oof, yall, a.gate_precision)
    gated = (p_lex_oof <= gate[0]) | (p_lex_oof >= gate[1])
    gate_report = {"gate": gate, "share_gated": float(gated.mean()),
                   "gated_agreement": float(((p_lex_oof[gated] >= 0.5) == (yall[gated] == 1)).mean()),
                   "n": int(len(rows)), "lexical_feature_s_per_answer": lex_feature_s}
    print(f"[gate] {gate_report}", flush=True)

    # ---------------------------------------------------------------- the sample for the model
    rng = np.random.default_rng(SEED)
    sample_q: dict[str, list[int]] = {}
    for ds in ("NQ", "TQ"):
        qs = sorted({r.qi for r in rows if r.ds == ds})
        sample_q[ds] = sorted(rng.choice(qs, size=min(a.questions, len(qs)), replace=False).tolist())
    in_sample = {(ds, q) for ds, qs in sample_q.items() for q in qs}
    idx = [i for i, r in enumerate(rows) if (r.ds, r.qi) in in_sample]
    g_sha = L.prompt_sha256("grade")
    want = [((rows[i].ds, rows[i].qi, rows[i].system, g_sha),
             L.grade_messages(rows[i].answer, rows[i].golds, rows[i].question)) for i in idx]
    c_sha = L.prompt_sha256("control")
    want += [((rows[i].ds, rows[i].qi, rows[i].system, c_sha),
              L.control_messages(rows[i].answer, rows[i].golds, rows[i].question)) for i in idx]
    pair_q = {(ds, q) for ds, qs in sample_q.items() for q in qs[: a.pair_questions]}
    pairs = []
    by_q: dict = {}
    for i in idx:
        r = rows[i]
        if (r.ds, r.qi) in pair_q:
            by_q.setdefault((r.ds, r.qi), []).append(i)
    for members in by_q.values():
        for x in range(len(members)):
            for z in range(x + 1, len(members)):
                i, j = members[x], members[z]
                if rows[i].human or rows[j].human:
                    pairs.append((i, j))
    a_sha = L.prompt_sha256("agree")
    for i, j in pairs:
        ri, rj = rows[i], rows[j]
        for u, v in ((ri, rj), (rj, ri)):
            want.append(((u.ds, u.qi, u.system, v.system, a_sha), L.agree_messages(u.answer, v.answer, u.question)))
    lm_s = 0.0 if a.score_only else score_missing(cache, cache_path, want, a.model, a.batch)
    n_rated = sum(k in cache for k, _ in want)
    print(f"[lm] {n_rated}/{len(want)} messages rated ({lm_s:.0f} s this run)", flush=True)

    # ---------------------------------------------------------------- grading form on the sample
    idx = [i for i in idx if all((rows[i].ds, rows[i].qi, rows[i].system, h) in cache for h in (g_sha, c_sha))]
    clip = lambda h: np.array([max(-CLIP, min(CLIP, cache[(rows[i].ds, rows[i].qi, rows[i].system, h)]))  # noqa
                               for i in idx])
    lo, lc = clip(g_sha), clip(c_sha)
    Xs, ys = Xall[idx], yall[idx]
    # the model's feature(s) of each candidate full stage: the log-odds on the real golds, their contrast with
    # the stand-in golds' (an answer that talks the model into "yes" moves both), or both as two features
    model_cols = {"lm_logodds": lo[:, None], "lm_contrast": (lo - lc)[:, None], "lm_logodds+lm_control":
                  np.column_stack([lo, lc])}
    ship_model = "+".join(L.GRADE_MODEL)
    Xf = np.column_stack([Xs, model_cols[ship_model]])
    full_feats = L.GRADE_LEXICAL + L.GRADE_MODEL
    srows = [rows[i] for i in idx]
    human = ys == 1
    ds_arr = np.array([r.ds for r in srows])
    sys_arr = np.array([r.system for r in srows])
    boot = ClusterBootstrap(srows, a.boot, SEED)
    results: dict = {"grade": {}, "agree": {}}
    cover = np.array([grade_cover(r.answer, list(r.golds), r.question) for r in srows])
    # the model reads the same messages the log-odds were cached for: no EVOUNA answer holds a prompt escape
    escaped = [r.answer for r in rows if L.PROMPT_ESCAPES.search(r.answer) or L.fold_lookalikes(r.answer) != r.answer]
    if escaped:
        raise SystemExit(f"fit_judge: {len(escaped)} EVOUNA answers hold a prompt escape or a look-alike spelling "
                         f"(e.g. {escaped[0][:60]!r}): "
                         "their cached log-odds were read on other messages; re-key the cache")
    vetoes = np.array([L.grade_veto(r.answer, list(r.golds), r.question, dict(zip(L.GRADE_LEXICAL, Xs[i]))) or ""
                       for i, r in enumerate(srows)])
    defence = np.char.startswith(vetoes.astype(str), "defence:")
    no_evidence = vetoes == "no_evidence"
    # the veto lift: a second model's contrast on the answers a liftable defence refused, above that defence's
    # attack-chosen threshold (probe_defence_model.lift_thresholds: no EVOUNA in the choice)
    lift = lift_spec(a.lift_model) if a.lift_model else None
    lifted = np.zeros(len(srows), bool)
    lift_report = {}
    if lift is not None:
        th = lift["thresholds"]
        todo = [k for k, v in enumerate(vetoes.tolist()) if v.removeprefix("defence:") in th]
        lift_path = a.out / f"lm_logodds_{lift['model'].removeprefix('semcal:').replace('/', '_')}.jsonl"
        lift_cache = model_cache(lift_path)
        key = lambda k, h: (srows[k].ds, srows[k].qi, srows[k].system, h)  # noqa: E731
        lwant = [(key(k, g_sha), L.grade_messages(srows[k].answer, srows[k].golds, srows[k].question)) for k in todo]
        lwant += [(key(k, c_sha), L.control_messages(srows[k].answer, srows[k].golds, srows[k].question))
                  for k in todo]
        lift_s = 0.0 if a.score_only else score_missing(lift_cache, lift_path, lwant, lift["model"], a.batch)
        clipped = lambda k, h: max(-CLIP, min(CLIP, lift_cache[key(k, h)]))  # noqa: E731
        contrast = {k: clipped(k, g_sha) - clipped(k, c_sha)
                    for k in todo if key(k, g_sha) in lift_cache and key(k, c_sha) in lift_cache}
        for k, c in contrast.items():
            lifted[k] = c > th[vetoes[k].removeprefix("defence:")]
        lift_report = {"model": lift["model"], "thresholds": th, "chosen_on": lift["chosen_on"],
                       "n_liftable": len(todo), "n_scored": len(contrast),
                       "n_lifted": int(lifted.sum()), "lifted_people_correct": int((lifted & human).sum()),
                       "seconds_this_run": lift_s,
                       "by_defence": {d: {"refused": int(np.sum(vetoes == f"defence:{d}")),
                                          "lifted": int(np.sum(lifted & (vetoes == f"defence:{d}")))}
                                      for d in th}}
        print(f"[lift] {lift_report}", flush=True)
    for scheme in ("question", "system"):
        cv = folds(np.array([f"{r.ds}:{r.qi}" for r in srows]), [(r.system,) for r in srows], scheme)
        # the lexical stage and the gate are fit on all EVOUNA rows outside the held-out fold
        cv_all = folds(q_all, sys_all, scheme)
        if scheme == "question":  # map the sample's folds onto all rows: the same question key → the same fold
            key_fold = {}
            for k, (_, te) in enumerate(cv):
                for r in np.array(srows)[te]:
                    key_fold[f"{r.ds}:{r.qi}"] = k
            rng2 = np.random.default_rng(SEED + 1)
            f_all = np.array([key_fold.get(q, -1) for q in q_all.tolist()])
            rest = f_all < 0
            f_all[rest] = rng2.integers(0, 5, size=int(rest.sum()))
            cv_all = [(f_all != k, f_all == k) for k in range(5)]
        o = cv_gated(Xall, yall, q_all, sys_all, Xs, Xf, ys, model_cols[ship_model], cv, cv_all,
                     a.gate_precision, full_feats, model_feats=L.GRADE_MODEL)
        p_lm, p_lex, p_full, p_gated, used_model, gates, ablate = (o[k] for k in (
            "p_lm", "p_lex", "p_full", "p_gated", "used_model", "gates", "ablate"))
        # what ships: a defence's veto makes the answer wrong; without lexical evidence the lexical stage decides
        no_lift = np.where(defence, False, np.where(no_evidence, p_lex >= 0.5, p_gated >= 0.5))
        # a lifted veto: the answer is graded as if no defence had fired (the gated judge)
        ship = np.where(lifted, p_gated >= 0.5, no_lift)
        # the judge without a model: the lexical stage under the same defence vetoes
        cand = {"cover": cover, "lm_alone": p_lm >= 0.5, "lexical": p_lex >= 0.5,
                "lexical_veto": (p_lex >= 0.5) & ~defence, "full_no_gate": p_full >= 0.5,
                "learned_no_veto": p_gated >= 0.5, "learned": ship}
        if lift is not None:
            cand["learned_no_lift"] = no_lift
            cand["learned[lifted→correct]"] = np.where(lifted, True, no_lift)
        # the other model features, each in the judge as shipped (gate and vetoes the same)
        for mf, cols in model_cols.items():
            if mf == ship_model:
                continue
            feats = tuple(mf.split("+"))
            ov = cv_gated(Xall, yall, q_all, sys_all, Xs, np.column_stack([Xs, cols]), ys, cols, cv, cv_all,
                          a.gate_precision, L.GRADE_LEXICAL + feats, ablation=False, model_feats=feats, lexical=o)
            cand[f"lm_alone[{mf}]"] = ov["p_lm"] >= 0.5
            cand[f"learned_no_veto[{mf}]"] = ov["p_gated"] >= 0.5
            cand[f"learned[{mf}]"] = np.where(lifted, ov["p_gated"] >= 0.5, np.where(
                defence, False, np.where(no_evidence, p_lex >= 0.5, ov["p_gated"] >= 0.5)))
        res = {name: summarise(pred, human, ds_arr, sys_arr, boot) for name, pred in cand.items()}
        res["model_feature"] = ship_model
        # what each veto costs in agreement with people (pooled; < 0: the veto loses agreement)
        res["veto_agreement_gain"] = {
            f"veto {v}": float(np.mean(ship == human) - np.mean(np.where(vetoes == v, p_gated >= 0.5, ship) == human))
            for v in sorted(set(vetoes.tolist()) - {""})}
        res["veto_counts"] = {v: int(np.sum(vetoes == v)) for v in sorted(set(vetoes.tolist()) - {""})}
        used_model &= ~(defence | no_evidence)
        res["learned"]["errors_by_route"] = errors_by_route(ship, human, ds_arr, sys_arr, {
            "lifted": lifted, "vetoed": defence & ~lifted, "no evidence": no_evidence,
            "model": used_model & ~defence, "lexical gate": ~(defence | no_evidence | used_model)})
        res["learned"]["share_model_skipped"] = float(1 - used_model.mean())
        res["learned"]["gates"] = gates
        res["learned"]["diff_vs_cover_ci"] = {ds: boot.diff_ci(ship, cover, human, ds_arr == ds)
                                              for ds in ("NQ", "TQ")}
        if lift is not None:
            res["learned"]["diff_vs_no_lift_ci"] = {ds: boot.diff_ci(ship, no_lift, human, ds_arr == ds)
                                                    for ds in ("NQ", "TQ")}
        res["learned"]["diff_vs_lexical_veto_ci"] = {ds: boot.diff_ci(ship, cand["lexical_veto"], human,
                                                                      ds_arr == ds) for ds in ("NQ", "TQ")}
        if scheme == "system":
            words = np.array([len(r.answer.split()) for r in srows])
            card = {"learned": card_entry(ship, human, words, sys_arr, boot),
                    "cover": card_entry(cover, human, words, sys_arr, boot)}
        base = metrics(p_full >= 0.5, human)["agreement"]
        res["ablation_agreement_drop"] = {f: base - metrics(ablate[f] >= 0.5, human)["agreement"] for f in full_feats}
        results["grade"][scheme] = res
        print(f"[grade/{scheme}] " + "  ".join(f"{k} NQ {v['NQ']['agreement']:.3f}/{v['NQ']['kappa']:.3f} "
                                                f"TQ {v['TQ']['agreement']:.3f}/{v['TQ']['kappa']:.3f}"
                                                for k, v in res.items() if k in cand), flush=True)

    # ---------------------------------------------------------------- agreement form
    pk = [(i, j) for i, j in pairs if (rows[i].ds, rows[i].qi, rows[i].system, rows[j].system, a_sha) in cache
          and (rows[j].ds, rows[j].qi, rows[j].system, rows[i].system, a_sha) in cache]
    if pk:
        PX = np.array([[L.agree_features(*sorted((rows[i].answer, rows[j].answer)), rows[i].question)[f]
                        for f in L.AGREE_LEXICAL] for i, j in pk])
        plo = np.array([max(-CLIP, min(CLIP, (cache[(rows[i].ds, rows[i].qi, rows[i].system, rows[j].system, a_sha)]
                                              + cache[(rows[j].ds, rows[j].qi, rows[j].system, rows[i].system,
                                                       a_sha)]) / 2)) for i, j in pk])
        py = np.array([float(rows[i].human and rows[j].human) for i, j in pk])
        PXf = np.column_stack([PX, plo])
        afeats = L.AGREE_LEXICAL + (L.MODEL_FEATURE,)
        from semcal_eval.qa.grading import agree as cover_agree

        pcover = np.array([cover_agree(rows[i].answer, rows[j].answer, rows[i].question) for i, j in pk])
        pq = np.array([f"{rows[i].ds}:{rows[i].qi}" for i, _ in pk])
        psys = [(rows[i].system, rows[j].system) for i, j in pk]
        for scheme in ("question", "system"):
            cv = folds(pq, psys, scheme)
            p_lex, p_full, p_lm = (np.full(len(py), np.nan) for _ in range(3))
            for tr, te in cv:
                p_lex[te] = stage_probs(fit_stage(PX[tr], py[tr], L.AGREE_LEXICAL), PX[te])
                p_full[te] = stage_probs(fit_stage(PXf[tr], py[tr], afeats), PXf[te])
                p_lm[te] = stage_probs(fit_stage(plo[tr, None], py[tr], (L.MODEL_FEATURE,)), plo[te, None])
            results["agree"][scheme] = {n: metrics(p, py == 1) for n, p in (
                ("cover", pcover), ("lm_alone", p_lm >= 0.5), ("lexical", p_lex >= 0.5), ("full", p_full >= 0.5))}
            print(f"[agree/{scheme}] " + "  ".join(f"{k} {v['agreement']:.3f}/{v['kappa']:.3f}"
                                                   for k, v in results["agree"][scheme].items()), flush=True)
        p_lex_all = crossfit(PX, py, L.AGREE_LEXICAL, folds(pq, psys, "system"))
        agate = choose_gate(p_lex_all, py, a.gate_precision)
        agree_w = L.JudgeWeights("agree", fit_stage(PX, py, L.AGREE_LEXICAL), agate, fit_stage(PXf, py, afeats),
                                 a.model, L._model_sha(a.model), a_sha, data_sha)
        results["agree"]["gate"] = agate
        results["agree"]["n_pairs"] = len(pk)
    else:
        agree_w = None

    # ---------------------------------------------------------------- the shipped weights, fit on everything
    grade_w = L.JudgeWeights("grade", fit_stage(Xall, yall, L.GRADE_LEXICAL), gate, fit_stage(Xf, ys, full_feats),
                             a.model, L._model_sha(a.model), g_sha, data_sha,
                             lift=None if lift is None else L.Lift(lift["model"], L._model_sha(lift["model"]),
                                                                  dict(lift["thresholds"]), lift["chosen_on"]))
    a.weights_dir.mkdir(parents=True, exist_ok=True)
    (a.weights_dir / "grade.json").write_text(json.dumps(grade_w.to_json(), indent=1) + "\n")
    if agree_w is not None:
        (a.weights_dir / "agree.json").write_text(json.dumps(agree_w.to_json(), indent=1) + "\n")
    (a.weights_dir / "card.json").write_text(json.dumps({
        "generated_by": "benchmarks/fit_judge.py", "model": a.model, "seed": SEED, "data_sha256": data_sha,
        "lift_model": lift["model"] if lift is not None else None,
        "scheme": "leave one answering system out (EVOUNA: fid, gpt35, chatgpt, gpt4, newbing), out-of-fold",
        "n": len(idx), "graders": {grade_w.version: card["learned"], "cover": card["cover"]}},
        indent=1, default=float) + "\n")
    out = {"seed": SEED, "model": a.model, "class_weight": CLASS_WEIGHT, "questions_per_dataset": a.questions, "pair_questions": a.pair_questions,
           "n_sample_answers": len(idx), "data": info, "gate_report": gate_report, "lm_seconds_this_run": lm_s,
           "results": results, "lift": lift_report, "wall_s": time.perf_counter() - t_start,
           "load": os.getloadavg()}
    (a.out / f"fit_{slug}.json").write_text(json.dumps(out, indent=1, default=float) + "\n")
    (a.out / f"fit_{slug}.md").write_text(render(json.loads(json.dumps(out, default=float))))
    print(f"[done] wrote {a.weights_dir}/grade.json, agree.json and {a.out}/fit_{slug}.json", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
