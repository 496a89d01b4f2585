"""Can a catalogue model lift cover's defences where people disagree with them, and join padded answers? (issue 51)

Four measurements, each one forward pass per message (the learned judge's prompts, semcal_eval/qa/learned.py):

1. **Defences.** On EVOUNA, cover's defences (a rival beside the gold, an alternative, a list, a negation:
   :func:`semcal_eval.qa.grading.cover_refusal`) refuse 929 of 24,133 answers, and people call 95 % of those
   correct: the defences are most of cover's misses, and the learned judge's veto keeps them. They are there
   for the attacks (:data:`research.answer_grammar.MODEL_JUDGE_ATTACKS` on tests/test_judge_adversaries.py's HAND
   pairs: the gold quoted, denied, listed or hedged beside a wrong answer). A veto the model may lift is only
   safe if the model's score separates the two: AUROC of people-correct defence-refused EVOUNA answers against
   defence-refused attack answers, for the grading log-odds and the contrast against the stand-in gold, and the
   share of each passing at the thresholds that let 20 / 10 / 6 % of attacks through.
2. **Padding.** The agreement prompt's log-odds (both orders, averaged) for two wrong answers padded with
   different junk words ("Lyon blue house" / "Lyon seven quick", which must agree or padding pays in CSR) beside
   rivals ("Lyon" / "Paris", which must not) and paraphrases ("Lyon" / "The answer is Lyon."); and the same
   pairs read by the grading prompt, each answer the other's one gold (its "extra explanation is fine").

3. **Lifting the veto, one threshold for all defences.** It is chosen on the attacks against the first half of HAND's
   questions (the one passing 6 % of them: the shipped judge passes 3 of 26 honest wrong answers, 12 %) and
   measured on the attacks against the other half, questions the choice never saw; on EVOUNA, the share of
   refused answers it lifts among people-correct and people-wrong ones, and what that would change in agreement
   on all of EVOUNA if a lifted answer were graded correct.
4. **Per defence** (what ships, :func:`lift_thresholds`): the threshold above every attack the defence refuses,
   and how often an attack of a kind it never saw clears it (each kind left out in turn).

    PYTHONPATH=. python benchmarks/probe_defence_model.py --models semcal:qwen2.5-coder-0.5b semcal:qwen2.5-coder-1.5b
    PYTHONPATH=. python benchmarks/probe_defence_model.py --summarise       # the tables again, from the JSON
    PYTHONPATH=. python benchmarks/probe_defence_model.py --gradeform-pairs # + the pairs by the grading prompt
    PYTHONPATH=. python benchmarks/probe_defence_model.py --update  # new attacks or defences: score what is new

(0.5B: ~5 min, 1.5B: ~20 min on 2 cores.) Selection is seeded (EVOUNA shuffled with seed 7, the first 160
refused answers; the refused attack answers shuffled with seed 3). Writes
benchmarks/results/judge_humans/defence_probe.{json,md} (EVOUNA answers by key only, as fit_judge's cache). A
probe, not a fit: nothing here sets a weight.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import math
import random
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests"))

OUT = REPO / "benchmarks/results/judge_humans/defence_probe"
N_EVOUNA = 160
#: junk words per padded answer, and how many of HAND's questions the agreement pairs use
N_PADS, N_PAIR_QUESTIONS = 6, 4


def select_items(rows, refusals) -> list[dict]:
    """The defence-refused answers: EVOUNA's (``rows`` with their :func:`cover_refusal` reasons), named by key
    only (dataset, question index, system: no EVOUNA text or verdict is saved in the repo; :func:`joined` reads
    them back), then the attacks' (:func:`attack_items`)."""
    pairs = list(zip(rows, refusals))
    random.seed(7)
    random.shuffle(pairs)
    ev = [dict(src="evouna", ds=r.ds, qi=r.qi, kind=r.system, why=why) for r, why in pairs if why is not None]
    return ev[:N_EVOUNA] + attack_items()


def joined(items: list[dict], rows) -> list[dict]:
    """``items`` with each EVOUNA key's answer, golds, question and people's verdict read from ``rows``."""
    from semcal_eval.qa.grading import golds_for_grading

    by_key = {(r.ds, r.qi, r.system): r for r in rows}
    out = []
    for x in items:
        if x["src"] == "evouna":
            r = by_key[(x["ds"], x["qi"], x["kind"])]
            x = {**x, "answer": r.answer, "golds": list(golds_for_grading(r.golds)), "q": r.question,
                 "human": int(r.human)}
        out.append(x)
    return out


def attack_items() -> list[dict]:
    """Every attack answer (all wrong) that a defence refuses, in a seeded order; no data needed."""
    from research.answer_grammar import MODEL_JUDGE_ATTACKS
    from test_judge_adversaries import HAND

    from semcal_eval.qa.grading import cover_refusal

    att = []
    for q, g, wrongs in HAND:
        for w in wrongs:
            for name, f in MODEL_JUDGE_ATTACKS.items():
                a = f(w, g, q)
                why = cover_refusal(a, [g], q)
                if why is not None:
                    att.append(dict(src="attack", kind=name, why=why, answer=a, golds=[g], q=q, human=0))
    random.seed(3)
    random.shuffle(att)
    return att


def select_pairs() -> list[dict]:
    """Agreement pairs on HAND's first questions: a wrong answer padded, beside its rivals (the gold and the other
    wrong answers) and a paraphrase; the junk words are adversary_learned.py's."""
    from adversary_learned import JUNK
    from test_judge_adversaries import HAND

    pairs = []
    for q, gold, (w, *others) in HAND[:N_PAIR_QUESTIONS]:
        rivals = (gold, *others)
        pads = [f"{w} {j}" for j in JUNK[:N_PADS]]
        pairs += [dict(kind="padded/padded", q=q, a=pads[i], b=pads[i + 1]) for i in range(0, len(pads), 2)]
        pairs.append(dict(kind="bare/padded", q=q, a=w, b=pads[0]))
        pairs.append(dict(kind="Capitalised pads", q=q, a=f"{w} Blue House", b=f"{w} Seven Quick"))
        pairs += [dict(kind="rival", q=q, a=w, b=r) for r in rivals]
        pairs.append(dict(kind="rival, both padded", q=q, a=pads[1], b=f"{rivals[0]} {JUNK[2]}"))
        pairs.append(dict(kind="paraphrase", q=q, a=w, b=f"The answer is {w}."))
    return pairs


def score_gradeform_pairs(model: str, pairs: list[dict]) -> list[float]:
    """The pairs read by the *grading* prompt, each answer once as the other's only gold (both orders,
    averaged): "extra explanation is fine" may let junk words pass where the agreement prompt reads two claims."""
    from semcal_eval.qa import learned as L
    from semcal_eval.qa.yesno import YesNoLM

    lm = YesNoLM(model, batch_size=8)
    fwd = lm.logodds([L.grade_messages(p["a"], (p["b"],), p["q"]) for p in pairs])
    bwd = lm.logodds([L.grade_messages(p["b"], (p["a"],), p["q"]) for p in pairs])
    return [(f + b) / 2 for f, b in zip(fwd, bwd)]


def score(model: str, items: list[dict], pairs: list[dict]) -> dict:
    from semcal_eval.qa import learned as L
    from semcal_eval.qa.yesno import YesNoLM

    lm = YesNoLM(model, batch_size=8)
    t0 = time.perf_counter()
    real = lm.logodds([L.grade_messages(x["answer"], tuple(x["golds"]), x["q"]) for x in items])
    ctrl = lm.logodds([L.control_messages(x["answer"], tuple(x["golds"]), x["q"]) for x in items])
    fwd = lm.logodds([L.agree_messages(p["a"], p["b"], p["q"]) for p in pairs]) if pairs else []
    bwd = lm.logodds([L.agree_messages(p["b"], p["a"], p["q"]) for p in pairs]) if pairs else []
    return {"grade_logodds": real, "control_logodds": ctrl, "agree_logodds": [(f + b) / 2 for f, b in zip(fwd, bwd)],
            "wall_s": time.perf_counter() - t0}


def item_key(x: dict) -> tuple:
    """An item's identity: EVOUNA's by key, an attack's by its text and pair (its defence is read again)."""
    if x["src"] == "evouna":
        return ("evouna", x["ds"], x["qi"], x["kind"])
    return ("attack", x["q"], x["answer"], tuple(x["golds"]))


def updated(out: dict, keys: list[dict], items: list[dict], models: list[str]) -> dict:
    """``out`` for the current selection ``keys`` (``items`` joined): the saved scores of the items it already
    held (re-indexed, not re-scored), the others scored by each model; the pairs are kept as they are."""
    saved = {item_key(x): i for i, x in enumerate(joined(out["items"], rows_cache()))}
    new = [x for x in items if item_key(x) not in saved]
    print(f"[probe] {len(items) - len(new)} items kept, {len(new)} to score", flush=True)
    for m in models:
        s = out["models"][m]
        fresh = score(m, new, []) if new else {"grade_logodds": [], "control_logodds": []}
        at = {item_key(x): j for j, x in enumerate(new)}
        for f in ("grade_logodds", "control_logodds"):
            s[f] = [s[f][saved[k]] if k in saved else fresh[f][at[k]] for k in map(item_key, items)]
    return {**out, "items": keys}


def summarise(out: dict, items: list[dict]) -> str:
    """The tables, from the saved scores and ``items`` (the saved ones :func:`joined` with EVOUNA)."""
    from sklearn.metrics import roc_auc_score

    pairs = out["pairs"]
    ev_ok = np.array([x["src"] == "evouna" and x["human"] == 1 for x in items])
    att = np.array([x["src"] == "attack" for x in items])
    n_ev = sum(x["src"] == "evouna" for x in items)
    lines = ["# Can the model lift cover's defences, and join padded answers?", "",
             f"`{out['command']}`. {n_ev} defence-refused EVOUNA answers ({int(ev_ok.sum())} people-correct), "
             f"{int(att.sum())} defence-refused attack answers (all wrong). EVOUNA as a whole: "
             f"{out['evouna_refused']['n']} answers refused by a defence, people-correct "
             f"{out['evouna_refused']['people_correct']:.2f}.", "",
             "## 1. Defences: people-correct EVOUNA answers vs attacks, among answers a defence refuses", "",
             "| model | score | AUROC | EVOUNA-correct passing where 20 % / 10 % / 6 % of attacks pass |",
             "|---|---|---|---|"]
    for m, s in out["models"].items():
        g, c = np.array(s["grade_logodds"]), np.array(s["control_logodds"])
        for name, v in (("grading log-odds", g), ("contrast (real − stand-in gold)", g - c)):
            auc = roc_auc_score(np.r_[np.ones(ev_ok.sum()), np.zeros(att.sum())], np.r_[v[ev_ok], v[att]])
            cuts = [np.quantile(v[att], 1 - r) for r in (0.2, 0.1, 0.06)]
            lines.append(f"| {m} | {name} | {auc:.3f} | " + " / ".join(f"{np.mean(v[ev_ok] >= t):.2f}" for t in cuts)
                         + " |")
    lines += ["", "The plain log-odds can be talked into yes by the answer (instruction and role-spoof attacks, "
              "adversary_search/learned.md), so only the contrast may lift a veto.", "",
              "## 2. Padding: the log-odds that two answers agree (both orders), min / median / max"]
    kinds = list(dict.fromkeys(p["kind"] for p in pairs))
    forms = [("agree_logodds", "agreement prompt")]
    if all("gradeform_agree_logodds" in s for s in out["models"].values()):
        forms.append(("gradeform_agree_logodds", "grading prompt, each answer the other's gold"))
    for field, title in forms:
        lines += ["", f"*{title}*", "", "| pair | n | " + " | ".join(out["models"]) + " |",
                  "|---|---|" + "---|" * len(out["models"])]
        for k in kinds:
            idx = [i for i, p in enumerate(pairs) if p["kind"] == k]
            cells = []
            for s in out["models"].values():
                v = np.array(s[field])[idx]
                cells.append(f"{v.min():+.2f} / {np.median(v):+.2f} / {v.max():+.2f}")
            lines.append(f"| {k} | {len(idx)} | " + " | ".join(cells) + " |")
    lines += ["", "Padding stops paying only if padded pairs score like paraphrases, above rivals. Neither form does: "
              "the grading prompt, where \"extra explanation is fine\", puts the 1.5B's padded pairs level with "
              "rivals, not with paraphrases.", ""]
    lines += lift_lines(out, items, ev_ok, att)
    lines += per_defence_lines(out, items)
    return "\n".join(lines)


def lift_lines(out: dict, items: list[dict], ev_ok: np.ndarray, att: np.ndarray) -> list[str]:
    """Section 3: the contrast's threshold chosen on attacks against half of HAND's questions, measured on the
    other half and on EVOUNA's refused answers."""
    from test_judge_adversaries import HAND

    choose_q = {q for q, _, _ in HAND[: len(HAND) // 2]}
    pick = att & np.array([x["q"] in choose_q for x in items])
    held = att & ~pick
    ev = np.array([x["src"] == "evouna" for x in items])
    ev_bad = ev & ~ev_ok
    ref = out["evouna_refused"]
    share, p_ok = ref["n"] / ref["n_answers"], ref["people_correct"]
    lines = ["## 3. Lifting the veto where the contrast is high", "",
             f"Threshold chosen on {int(pick.sum())} attack answers (HAND's first {len(HAND) // 2} questions), "
             f"measured on {int(held.sum())} against the other questions; EVOUNA: {int(ev.sum())} refused answers "
             f"({int(ev_bad.sum())} people-wrong). Change in agreement on all of EVOUNA ≈ {share:.3f} × "
             f"(lifted | correct × {p_ok:.2f} − lifted | wrong × {1 - p_ok:.2f}), a lifted answer graded "
             "correct.", "",
             "| model | attacks passing when chosen | threshold | held-out attacks passing | EVOUNA lifted: correct / "
             "wrong | agreement change, all EVOUNA |", "|---|---|---|---|---|---|"]
    for m, s in out["models"].items():
        v = np.array(s["grade_logodds"]) - np.array(s["control_logodds"])
        for rate in (0.06, 0.10):
            t = float(np.quantile(v[pick], 1 - rate))
            lc, lw = float(np.mean(v[ev_ok] >= t)), float(np.mean(v[ev_bad] >= t)) if ev_bad.any() else 0.0
            lines.append(f"| {m} | {np.mean(v[pick] >= t):.2f} | {t:+.2f} | {np.mean(v[held] >= t):.2f} | "
                         f"{lc:.2f} / {lw:.2f} | {share * (lc * p_ok - lw * (1 - p_ok)):+.4f} |")
    return lines + [""]


#: the model whose contrast may lift a defence's veto (the 0.5B's lets held-out attacks through: section 4)
LIFT_MODEL = "semcal:qwen2.5-coder-1.5b"
#: a defence may be lifted only where at least this many attack answers it refuses bound the threshold
MIN_LIFT_ATTACKS = 15
#: ... and only where an attack of a kind the threshold never saw clears it this rarely: the threshold chosen on
#: the other kinds lifts at most this share of each left-out kind's answers, pooled (a budget set before looking,
#: not fitted: the learned-3 lift, chosen on half the questions, let 6 of 24 answers of new hedge kinds through)
MAX_UNSEEN_KIND_RATE = 0.05
#: a threshold stands this far above the highest attack: the judge reads its log-odds in other batches than the
#: probe did (they differ by up to 2e-3, tests/test_learned_judge.py), and the attack at the top must stay below
#: it there too (at the bare maximum, adversary_learned found two of them lifted)
LIFT_MARGIN = 0.05


def _above_max(values) -> float:
    """The highest value + :data:`LIFT_MARGIN`, rounded up at the 4th decimal (inf for none)."""
    return math.ceil((max(values) + LIFT_MARGIN) * 1e4) / 1e4 if len(values) else float("inf")


def lift_thresholds(out: dict, model: str = LIFT_MODEL) -> dict:
    """Per defence d, the contrast threshold t_d above which ``model`` may lift d's veto: the highest contrast
    (real − stand-in gold) among all the attack answers d refuses, plus :data:`LIFT_MARGIN`, so that no known
    attack is lifted. How far that holds for attacks of a new kind is measured by leaving each attack kind out
    (research.answer_grammar.MODEL_JUDGE_ATTACKS: instruction, list_and, ...): the threshold of the other kinds,
    the share of the left-out kind's answers above it. A defence is lifted only with ≥ :data:`MIN_LIFT_ATTACKS`
    attacks and that share ≤ :data:`MAX_UNSEEN_KIND_RATE`. Reads the saved attack scores only (no EVOUNA), so the
    shipped thresholds (semcal_eval/qa/judge_weights/grade.json, written by fit_judge.py) recompute without the
    data. Returns {"thresholds": {d: t_d}, "attacks": {d: {n, kinds, threshold, unseen_kind_lifted}}, "chosen_on":
    how}."""
    s = out["models"][model]
    v = np.array(s["grade_logodds"]) - np.array(s["control_logodds"])
    thresholds, attacks = {}, {}
    for d in sorted({x["why"] for x in out["items"] if x["src"] == "attack"}):
        att = [(x["kind"], val) for x, val in zip(out["items"], v) if x["src"] == "attack" and x["why"] == d]
        kinds = sorted({k for k, _ in att})
        t = _above_max([val for _, val in att])
        unseen = sum(int(val > _above_max([w for k2, w in att if k2 != k])) for k in kinds for k2, val in att
                     if k2 == k)
        attacks[d] = {"n": len(att), "kinds": len(kinds), "threshold": t, "unseen_kind_lifted": unseen}
        if len(att) >= MIN_LIFT_ATTACKS and unseen <= MAX_UNSEEN_KIND_RATE * len(att):
            thresholds[d] = t
    chosen_on = (f"benchmarks/results/judge_humans/defence_probe.json: per defence with >= {MIN_LIFT_ATTACKS} "
                 f"attacks, the highest contrast of all its attacks + {LIFT_MARGIN}, where each attack kind left "
                 f"out clears the other kinds' threshold on <= {MAX_UNSEEN_KIND_RATE:.0%} of its answers")
    return {"model": model, "thresholds": thresholds, "attacks": attacks, "min_attacks": MIN_LIFT_ATTACKS,
            "chosen_on": chosen_on}


def per_defence_lines(out: dict, items: list[dict]) -> list[str]:
    """Section 4: :func:`lift_thresholds` for each model, with the share of EVOUNA's refused answers each lifts."""
    lines = ["## 4. Per defence: the threshold no attack clears, and attacks of an unseen kind", "",
             f"t_d = the highest contrast among all attacks that defence d refuses, + {LIFT_MARGIN}. Unseen kind: each "
             "attack kind left out in turn, its answers above the other kinds' t_d (pooled over kinds). A defence is "
             f"lifted (**bold**) with ≥ {MIN_LIFT_ATTACKS} attacks and unseen-kind answers lifted ≤ "
             f"{MAX_UNSEEN_KIND_RATE:.0%}. EVOUNA: refused answers above t_d, people-correct / people-wrong (n).", "",
             "| model | defence | attacks (kinds) | t_d | unseen kind lifted | EVOUNA lifted: correct / wrong (n) |",
             "|---|---|---|---|---|---|"]
    for m, s in out["models"].items():
        lt = lift_thresholds(out, m)
        v = np.array(s["grade_logodds"]) - np.array(s["control_logodds"])
        for d, a in lt["attacks"].items():
            ok = [val > a["threshold"] for x, val in zip(items, v) if x["src"] == "evouna" and x["why"] == d
                  and x["human"]]
            bad = [val > a["threshold"] for x, val in zip(items, v) if x["src"] == "evouna" and x["why"] == d
                   and not x["human"]]
            name = f"**{d}**" if d in lt["thresholds"] else d
            lines.append(f"| {m} | {name} | {a['n']} ({a['kinds']}) | {a['threshold']:+.2f} | "
                         f"{a['unseen_kind_lifted']} of {a['n']} | {np.mean(ok) if ok else float('nan'):.2f} / "
                         f"{np.mean(bad) if bad else float('nan'):.2f} ({len(ok) + len(bad)}) |")
    return lines + [""]


@functools.lru_cache(maxsize=1)
def rows_cache():
    """EVOUNA's rows, read once."""
    from bench_judge_humans import default_data_dir, load_evouna

    return load_evouna(default_data_dir())[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["semcal:qwen2.5-coder-0.5b", "semcal:qwen2.5-coder-1.5b"])
    ap.add_argument("--summarise", action="store_true", help="rewrite the .md from the saved .json")
    ap.add_argument("--gradeform-pairs", action="store_true", help="add the pairs' grading-prompt scores to the "
                    "saved .json (nothing else re-scored)")
    ap.add_argument("--update", action="store_true", help="select again (new attacks, cover's defences read "
                    "again) and score only the items the saved .json lacks")
    a = ap.parse_args(argv)
    from semcal_eval.qa.grading import cover_refusal

    path = OUT.with_suffix(".json")
    rows = rows_cache()
    if a.update:
        refusals = [cover_refusal(r.answer, list(r.golds), r.question) for r in rows]
        keys = select_items(rows, refusals)
        items = joined(keys, rows)
        out = updated(json.loads(path.read_text()), keys, items, a.models)
        out["evouna_refused"].update(n=sum(w is not None for w in refusals), people_correct=float(np.mean(
            [r.human for r, w in zip(rows, refusals) if w is not None])),
            by_defence=dict(collections.Counter(w for w in refusals if w is not None)))
        path.write_text(json.dumps(out, indent=0) + "\n")
    elif a.summarise or a.gradeform_pairs:
        out = json.loads(path.read_text())
        items = joined(out["items"], rows)
        if a.gradeform_pairs:
            for m in a.models:
                out["models"][m]["gradeform_agree_logodds"] = score_gradeform_pairs(m, out["pairs"])
            path.write_text(json.dumps(out, indent=0) + "\n")
    else:
        refusals = [cover_refusal(r.answer, list(r.golds), r.question) for r in rows]
        refused = [r.human for r, w in zip(rows, refusals) if w is not None]
        keys, pairs = select_items(rows, refusals), select_pairs()
        items = joined(keys, rows)
        out = {"command": "PYTHONPATH=. python benchmarks/probe_defence_model.py --models " + " ".join(a.models),
               "evouna_refused": {"n": len(refused), "n_answers": len(rows),
                                  "people_correct": float(np.mean(refused)),
                                  "by_defence": dict(collections.Counter(w for w in refusals if w is not None))},
               "items": keys, "pairs": pairs, "models": {m: score(m, items, pairs) for m in a.models}}
        path.write_text(json.dumps(out, indent=0) + "\n")
    md = summarise(out, items)
    OUT.with_suffix(".md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
