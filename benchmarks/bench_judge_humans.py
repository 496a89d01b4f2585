"""Does semcal's answer judge agree with people? The ``cover`` judge and four baselines against EVOUNA's human verdicts.

EVOUNA (Wang et al., NeurIPS 2023; ``$SEMCAL_DATA_DIR/evouna/{NQ,TQ}.json``, SOURCE.md there): 24,133 answers of
five systems (fid, gpt35, chatgpt, gpt4, newbing) to NQ-Open and TriviaQA questions, each judged correct or
incorrect by people. Gold aliases are split on "/" (empty parts dropped); questions without a usable gold (NQ: one
null, ")" and "---"; none has a judged answer) are skipped and counted; unjudged answers (judge null) are skipped.

Graders (each maps (answer, golds, question) to correct/incorrect):

- ``always_correct``: every answer is correct (the floor kappa is measured against);
- ``strict``: :func:`semcal_eval.qa.grading.grade_strict` (the default before task version 3);
- ``f1``: :func:`semcal_eval.qa.answers.best_f1` ≥ 0.5 (SQuAD token F1);
- ``contained``: some normalised gold alias (:func:`semcal_eval.qa.answers.normalize_answer`) occurs in the
  normalised answer at word boundaries (lenient lexical);
- ``cover``: the cover judge (:mod:`semcal_eval.qa.cover`) as a grader: ``semcal_eval.qa.grading.grade_cover``
  (``grade`` where cover is the default; results.json records which function ``grade`` is).

Per dataset, system and answer length (answer words, whitespace-split: 0–5 "short", 6–30 "sentence", > 30 "long"):
n, agreement, Cohen's kappa (sklearn), false-positive rate (people-wrong answers graded correct), false-negative
rate, the accuracy the grader reports and the people's accuracy, with 95 % cluster-bootstrap CIs (questions
resampled with replacement within each dataset, the same draws for every grader and row, so differences are
paired). Then: the lexical ceiling (people-correct answers sharing no gold evidence word), cover's disagreements
by category (probes that edit the answer or the golds and regrade), a 5-fold cross-validation by question of the
judge's three constants THETA, ALT_WINDOW, WINDOW over a 27-point grid (module attributes of
:mod:`semcal_eval.qa.cover` patched in this process only, and restored), and the cost of ``grade_cover``,
``agree`` and one GRPO step's rewards at K = 8 (cover against strict, same run).

    PYTHONPATH=. python benchmarks/bench_judge_humans.py                        # ~12 min on 2 shared cores
    PYTHONPATH=. python benchmarks/bench_judge_humans.py --no-cv --out /tmp/jh  # ~3 min

Writes ``<out>/results.json`` (every number, the seed, the data files' sha256, git HEAD and the judge files'
sha256; no EVOUNA text beyond the few examples of the report) and ``<out>/results.md`` (tables, also printed);
with the cross-validation (no ``--no-cv``) also ``<out>/README.md``, the judge's measured report from the same
numbers (default ``<out>``: benchmarks/results/judge_humans; docs/JUDGE.md is the reference page that links it).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from sklearn.metrics import cohen_kappa_score  # noqa: E402

from semcal_eval.qa import cover as C  # noqa: E402
from semcal_eval.qa.answers import best_f1, normalize_answer, usable_golds  # noqa: E402
from semcal_eval.qa import grading  # noqa: E402
from semcal_eval.qa.grading import agree, grade_strict  # noqa: E402

#: the cover judge as a grader: ``grade_cover`` where the cover judge is an option beside the default, ``grade``
#: where it is the default
grade_cover = getattr(grading, "grade_cover", grading.grade)

SYSTEMS = ("fid", "gpt35", "chatgpt", "gpt4", "newbing")
DATASETS = ("NQ", "TQ")
GRADERS = ("always_correct", "strict", "f1", "contained", "cover")
LENGTHS = (("short", 0, 5), ("sentence", 6, 30), ("long", 31, math.inf))
#: the issue's targets (issue 41)
TARGET_AGREEMENT, TARGET_KAPPA, TARGET_SUBSET_AGREEMENT = 0.90, 0.75, 0.85
#: the cross-validated grid: (THETA, ALT_WINDOW, WINDOW)
GRID = tuple(itertools.product((0.34, 0.5, 0.67), (1, 2, 4), (2, 4, 8)))
N_FOLDS = 5


@dataclass(frozen=True)
class Answer:
    ds: str
    qi: int  # the question's index in the data file (the bootstrap cluster and the CV fold key)
    question: str
    golds: tuple[str, ...]
    system: str
    answer: str
    human: bool
    improper: bool

    @property
    def cluster(self) -> str:
        return f"{self.ds}:{self.qi}"

    @property
    def length(self) -> str:
        n = len(self.answer.split())
        return next(name for name, lo, hi in LENGTHS if lo <= n <= hi) if n else "short"


def default_data_dir() -> Path:
    env = os.environ.get("SEMCAL_DATA_DIR")
    if env and env != "hub":
        return Path(env) / "evouna"
    return REPO.parent / "shared" / "data" / "evouna"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def split_golds(raw) -> tuple[str, ...]:
    """EVOUNA's gold field: aliases separated by "/", empty parts dropped (None: no gold)."""
    return tuple(g.strip() for g in (raw or "").split("/") if g.strip())


def load_evouna(data_dir: Path) -> tuple[list[Answer], dict]:
    """Every judged answer of NQ.json and TQ.json, and what was skipped (per dataset)."""
    rows: list[Answer] = []
    info: dict = {}
    for ds in DATASETS:
        path = Path(data_dir) / f"{ds}.json"
        data = json.loads(path.read_text(encoding="utf-8"))
        skipped_gold = skipped_gold_answers = unjudged = 0
        n_questions = 0
        for qi, r in enumerate(data):
            golds = split_golds(r.get("golden_answer"))
            judged = [s for s in SYSTEMS if r.get(f"judge_{s}") is not None]
            unjudged += len(SYSTEMS) - len(judged)
            if not golds or all(C.is_empty(g) for g in golds):
                skipped_gold += 1
                skipped_gold_answers += len(judged)
                continue
            n_questions += 1
            for s in judged:
                rows.append(Answer(ds, qi, r["question"] or "", golds, s, r.get(f"answer_{s}") or "",
                                   bool(r[f"judge_{s}"]), bool(r.get("improper"))))
        info[ds] = {"file": path.name, "sha256": sha256_file(path), "records": len(data), "questions": n_questions,
                    "skipped_no_gold_questions": skipped_gold, "skipped_no_gold_answers": skipped_gold_answers,
                    "unjudged_answers": unjudged, "answers": sum(a.ds == ds for a in rows)}
    return rows, info


# ---------------------------------------------------------------------------------------------------- graders
def contained(answer: str, golds) -> bool:
    """Lenient lexical: some normalised gold alias occurs in the normalised answer at word boundaries."""
    a = f" {normalize_answer(answer)} "
    return any((g := normalize_answer(x)) and f" {g} " in a for x in golds)


def grader_fns():
    return {
        "always_correct": lambda a, g, q: True,
        "strict": lambda a, g, q: grade_strict(a, list(g), q),
        "f1": lambda a, g, q: best_f1(a, list(g)) >= 0.5,
        "contained": lambda a, g, q: contained(a, g),
        "cover": lambda a, g, q: grade_cover(a, list(g), q),
    }


def run_grader(fn, rows: list[Answer]) -> tuple[np.ndarray, tuple[float, float]]:
    """Verdicts of one grader on every row, and its (wall, CPU) seconds."""
    t, c = time.perf_counter(), time.process_time()
    out = np.fromiter((bool(fn(r.answer, r.golds, r.question)) for r in rows), dtype=bool, count=len(rows))
    return out, (time.perf_counter() - t, time.process_time() - c)


# ---------------------------------------------------------------------------------------------------- metrics
def table(pred, human) -> np.ndarray:
    """The 2×2 table (tp, fp, fn, tn): grader vs people ("positive" = correct)."""
    p, h = np.asarray(pred, dtype=bool), np.asarray(human, dtype=bool)
    return np.array([np.sum(p & h), np.sum(p & ~h), np.sum(~p & h), np.sum(~p & ~h)], dtype=np.int64)


def kappa_from_table(t) -> np.ndarray | float:
    """Cohen's kappa of 2×2 tables (..., 4) = (tp, fp, fn, tn): (p_o − p_e)/(1 − p_e); nan where p_e = 1."""
    t = np.asarray(t, dtype=float)
    tp, fp, fn, tn = t[..., 0], t[..., 1], t[..., 2], t[..., 3]
    n = tp + fp + fn + tn
    with np.errstate(invalid="ignore", divide="ignore"):
        po = (tp + tn) / n
        pe = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n)
        k = (po - pe) / (1 - pe)
    return np.where(np.isclose(pe, 1.0), np.nan, k) if np.ndim(k) else (float("nan") if np.isclose(pe, 1) else float(k))


def kappa(pred, human) -> float:
    """Cohen's kappa by sklearn (nan when both raters are constant and agree, sklearn's undefined case)."""
    p, h = np.asarray(pred, dtype=int), np.asarray(human, dtype=int)
    if len(set(p.tolist()) | set(h.tolist())) < 2:
        return float("nan")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(cohen_kappa_score(h, p, labels=[0, 1]))


def metrics(pred, human) -> dict:
    tp, fp, fn, tn = (int(x) for x in table(pred, human))
    n = tp + fp + fn + tn
    k = kappa(pred, human)
    kt = kappa_from_table([tp, fp, fn, tn])
    assert (math.isnan(k) and math.isnan(kt)) or math.isclose(k, kt, abs_tol=1e-9), (k, kt)
    return {"n": n, "tp": tp, "fp": fp, "fn": fn, "tn": tn,
            "agreement": (tp + tn) / n if n else float("nan"), "kappa": k,
            "fpr": fp / (fp + tn) if fp + tn else float("nan"), "fnr": fn / (tp + fn) if tp + fn else float("nan"),
            "accuracy_reported": (tp + fp) / n if n else float("nan"),
            "accuracy_people": (tp + fn) / n if n else float("nan")}


class ClusterBootstrap:
    """Questions resampled with replacement within each dataset (B draws, one seed); a statistic of a row is
    computed from the per-question 2×2 tables, so every grader and row shares the same draws."""

    def __init__(self, rows: list[Answer], boot: int, seed: int):
        self.boot = boot
        clusters = sorted({(r.ds, r.qi) for r in rows})
        self.index = {c: i for i, c in enumerate(clusters)}
        self.row_cluster = np.array([self.index[(r.ds, r.qi)] for r in rows])
        rng = np.random.default_rng(seed)
        self.weights = np.zeros((boot, len(clusters)), dtype=np.int32)
        for ds in DATASETS:  # stratified: each dataset keeps its own number of questions
            cols = np.array([i for c, i in self.index.items() if c[0] == ds])
            if boot and len(cols):
                draws = rng.integers(0, len(cols), size=(boot, len(cols)))
                for b in range(boot):
                    self.weights[b, cols] = np.bincount(draws[b], minlength=len(cols))

    def tables(self, pred, human, mask) -> np.ndarray:
        """(B, 4) bootstrap 2×2 tables of the rows in ``mask``."""
        p, h, m = np.asarray(pred, bool), np.asarray(human, bool), np.asarray(mask, bool)
        per_q = np.zeros((len(self.index), 4))
        for k, sel in enumerate((p & h, p & ~h, ~p & h, ~p & ~h)):
            per_q[:, k] = np.bincount(self.row_cluster[m & sel], minlength=len(self.index))
        return self.weights @ per_q

    @staticmethod
    def ci(values) -> list[float]:
        v = np.asarray(values, dtype=float)
        v = v[~np.isnan(v)]
        return [float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))] if len(v) else [float("nan")] * 2

    def agreement_kappa_ci(self, pred, human, mask) -> dict:
        t = self.tables(pred, human, mask)
        with np.errstate(invalid="ignore", divide="ignore"):
            agr = (t[:, 0] + t[:, 3]) / t.sum(axis=1)
        return {"agreement_ci": self.ci(agr), "kappa_ci": self.ci(kappa_from_table(t))}

    def diff_ci(self, pred_a, pred_b, human, mask) -> list[float]:
        ta, tb = self.tables(pred_a, human, mask), self.tables(pred_b, human, mask)
        with np.errstate(invalid="ignore", divide="ignore"):
            d = (ta[:, 0] + ta[:, 3]) / ta.sum(axis=1) - (tb[:, 0] + tb[:, 3]) / tb.sum(axis=1)
        return self.ci(d)


# ------------------------------------------------------------------------------------------------ the ceiling
def _content_words(text: str) -> list[str]:
    words = C.content(text)
    return [w for w in words if w not in C.STOP_WORDS] or words


def evidence_words(gold: str, question: str) -> list[str]:
    """A gold's evidence as cover reads it: its content words the question does not hold (all of them when the
    question holds every one)."""
    cont = _content_words(gold)
    qw = [w for w in C.content(question) if w not in C.STOP_WORDS]
    return [w for w in cont if not any(C.words_match(w, x) for x in qw)] or cont


def shares_evidence(answer: str, golds, question: str) -> bool:
    aw = C.content(answer)
    return any(C.words_match(a, e) for g in golds for e in evidence_words(g, question) for a in aw)


# ------------------------------------------------------------------------------------------ failure categories
_OR = re.compile(r"\b(or|either)\b", re.I)
_SUFFIX = re.compile(r"\b(jr|jnr|sr|snr)\b\.?", re.I)
_LIST = re.compile(r"[,;&\n]|\band\b", re.I)


def _unqualified(gold: str) -> str:
    """A gold without its qualifier: "(North Atlantic) Gannet" → "Gannet", "Dhaka, Bangladesh" → "Dhaka"."""
    g = re.sub(r"\s*\([^)]*\)\s*", " ", gold).strip() or gold
    return g.split(",")[0].strip() or g


def fn_category(r: Answer) -> str:
    """Why cover refused a people-correct answer: the first probe (an edit of the answer or the golds) that makes
    cover accept it, or the lexical ceiling (no shared evidence word)."""
    g, q, a = list(r.golds), r.question, r.answer
    if not shares_evidence(a, g, q):
        return "no_shared_evidence_word"
    if _OR.search(a) and grade_cover(_OR.sub(" ", a), g, q):
        return "or_echoed_from_question" if _OR.search(q) else "alternatives_or"
    if any("(" in x or "," in x for x in g) and grade_cover(a, [_unqualified(x) for x in g], q):
        return "qualified_gold"
    unsuffixed = [y for x in g if not C.is_empty(y := _SUFFIX.sub(" ", x))]
    if _SUFFIX.search(a + " " + " ".join(g)) and unsuffixed and grade_cover(_SUFFIX.sub(" ", a), unsuffixed, q):
        return "name_suffix"
    if _LIST.search(a) and grade_cover(_LIST.sub(" ", a), g, q):
        return "list_rival"
    return "other_short" if len(a.split()) <= 30 else "other_long"


def fp_category(r: Answer) -> str:
    """Why cover accepted a people-wrong answer (first that applies)."""
    g, q, a = usable_golds(r.golds), r.question, r.answer
    covered = [x for x in g if grade_cover(a, [x], q)]
    ca = {x: set(_content_words(x)) for x in g}
    if covered and all(any(ca[c] < ca[o] and not grade_cover(a, [o], q) for o in g if o != c) for c in covered):
        return "less_specific_alias"  # e.g. "1945" covered while "17 August 1945" is not
    if covered and all(len(evidence_words(c, q)) < len(_content_words(c)) for c in covered):
        return "gold_reduced_by_question"  # the question holds part of the gold ("Central Germany", q: germany)
    return "other"


def failure_categories(rows: list[Answer], cover_pred: np.ndarray) -> dict:
    out: dict = {}
    for kind, fn in (("false_negatives", fn_category), ("false_positives", fp_category)):
        want = (lambda r, p: r.human and not p) if kind == "false_negatives" else (lambda r, p: p and not r.human)
        cats: dict = {}
        for r, p in zip(rows, cover_pred):
            if want(r, p):
                c = fn(r)
                e = cats.setdefault(c, {"n": 0, "NQ": 0, "TQ": 0, "first": []})
                e["n"] += 1
                e[r.ds] += 1
                if len(e["first"]) < 5:
                    e["first"].append(f"{r.ds}:{r.qi}:{r.system}")
        out[kind] = dict(sorted(cats.items(), key=lambda kv: -kv[1]["n"]))
    # how often the less-specific-alias pattern is accepted and people agree (a fix would cost these)
    def nested(r):
        ca = [set(_content_words(x)) for x in r.golds]
        return any(x < y for x in ca for y in ca)

    tp_less = sum(1 for r, p in zip(rows, cover_pred)
                  if p and r.human and nested(r) and fp_category(r) == "less_specific_alias")
    out["less_specific_alias_people_correct"] = tp_less
    return out


# ------------------------------------------------------------------------------------------------- CV of grid
def cover_preds_with(rows: list[Answer], theta: float, alt_window: int, window: int) -> np.ndarray:
    """cover's verdicts with the three constants patched in semcal_eval.qa.cover (restored after)."""
    saved = C.THETA, C.ALT_WINDOW, C.WINDOW
    try:
        C.THETA, C.ALT_WINDOW, C.WINDOW = theta, alt_window, window
        return np.fromiter((grade_cover(r.answer, list(r.golds), r.question) for r in rows), dtype=bool,
                           count=len(rows))
    finally:
        C.THETA, C.ALT_WINDOW, C.WINDOW = saved


def fold_of(ds: str, qi: int) -> int:
    return int(hashlib.sha256(f"{ds}:{qi}".encode()).hexdigest(), 16) % N_FOLDS


def cross_validate(rows, human, boot: ClusterBootstrap, shipped_pred, log=print) -> dict:
    shipped = (C.THETA, C.ALT_WINDOW, C.WINDOW)
    ds_mask = {ds: np.array([r.ds == ds for r in rows]) for ds in DATASETS}
    preds, grid_rows = {}, []
    for g in GRID:
        t = time.perf_counter()
        preds[g] = cover_preds_with(rows, *g)
        row = {"theta": g[0], "alt_window": g[1], "window": g[2], "seconds": round(time.perf_counter() - t, 2),
               "agreement_all": float(np.mean(preds[g] == human))}
        for ds in DATASETS:
            m = ds_mask[ds]
            row[f"agreement_{ds}"] = float(np.mean(preds[g][m] == human[m]))
            row[f"kappa_{ds}"] = kappa(preds[g][m], human[m])
        grid_rows.append(row)
        log(f"  grid {g}: agreement {row['agreement_all']:.4f} ({row['seconds']:.1f} s)")
    assert (C.THETA, C.ALT_WINDOW, C.WINDOW) == shipped, "constants not restored"
    if shipped in preds:
        assert np.array_equal(preds[shipped], shipped_pred), "patched run of the shipped constants differs"
    fold = np.array([fold_of(r.ds, r.qi) for r in rows])
    cv_pred = np.zeros(len(rows), dtype=bool)
    folds = []
    for f in range(N_FOLDS):
        train, test = fold != f, fold == f
        # chosen on the other four folds by pooled agreement; ties go to the earlier grid point
        best = max(GRID, key=lambda g: (int(np.sum(preds[g][train] == human[train])), -GRID.index(g)))
        cv_pred[test] = preds[best][test]
        folds.append({"fold": f, "chosen": {"theta": best[0], "alt_window": best[1], "window": best[2]},
                      "n_test": int(test.sum()), "test_agreement": float(np.mean(preds[best][test] == human[test])),
                      "train_agreement": float(np.mean(preds[best][train] == human[train]))})
    # no question sits in two folds (the fold is a function of the question)
    by_q: dict = {}
    for r, f in zip(rows, fold):
        assert by_q.setdefault((r.ds, r.qi), f) == f
    out = {"grid": grid_rows, "folds": folds, "fold_rule": "sha256('<DS>:<index in file>') mod 5",
           "selection": "max pooled agreement (NQ+TQ) on the 4 training folds; ties to the earlier grid point",
           "shipped": {"theta": shipped[0], "alt_window": shipped[1], "window": shipped[2]}, "rows": {}}
    for name, m in [("ALL", np.ones(len(rows), bool))] + [(ds, ds_mask[ds]) for ds in DATASETS]:
        cvm, shm = metrics(cv_pred[m], human[m]), metrics(shipped_pred[m], human[m])
        cvm.update(boot.agreement_kappa_ci(cv_pred, human, m))
        shm.update(boot.agreement_kappa_ci(shipped_pred, human, m))
        out["rows"][name] = {"cv": cvm, "shipped_in_sample": shm}
    best_in_sample = max(GRID, key=lambda g: (int(np.sum(preds[g] == human)), -GRID.index(g)))
    out["best_in_sample"] = {"theta": best_in_sample[0], "alt_window": best_in_sample[1],
                             "window": best_in_sample[2],
                             "agreement_all": float(np.mean(preds[best_in_sample] == human))}
    return out


# ------------------------------------------------------------------------------------------------------- cost
def _timed(fn) -> tuple[float, float]:
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def grpo_batches(rows: list[Answer], seed: int, K: int = 8, n_questions: int = 8) -> dict:
    """Two GRPO batches of ``n_questions`` × K completions built from EVOUNA answers. ``mixed``: a question's five
    system answers (short and long), its first gold alias, a hedge between that gold and another question's gold,
    and another question's newbing answer (long, wrong). ``long``: the K longest EVOUNA answers (any question's)
    as the completions of each question."""
    by_q: dict = {}
    for r in rows:
        by_q.setdefault((r.ds, r.qi), {})[r.system] = r
    full = sorted(k for k, v in by_q.items() if len(v) == len(SYSTEMS))
    rng = np.random.default_rng(seed)
    pick = [full[i] for i in rng.choice(len(full), size=2 * n_questions, replace=False)]
    qs, others = pick[:n_questions], pick[n_questions:]
    longest = sorted(rows, key=lambda r: -len(r.answer))[: 4 * K]
    batches = {}
    for name in ("mixed", "long"):
        prompts, comps, answers, questions = [], [], [], []
        for i, key in enumerate(qs):
            recs = by_q[key]
            r0 = recs[SYSTEMS[0]]
            other = by_q[others[i]]
            if name == "mixed":
                c = [" " + recs[s].answer for s in SYSTEMS]
                c += [" " + r0.golds[0], f" Maybe {r0.golds[0]} or {other[SYSTEMS[0]].golds[0]}",
                      " " + other["newbing"].answer]
            else:
                c = [" " + longest[(i + j) % len(longest)].answer for j in range(K)]
            assert len(c) == K
            prompts += [f"Q: {r0.question}\nA:"] * K
            comps += c
            answers += [list(r0.golds)] * K
            questions += [r0.question] * K
        batches[name] = {"prompts": prompts, "completions": comps, "answers": answers, "question": questions,
                         "chars_per_completion": float(np.mean([len(x) for x in comps]))}
    return batches


def measure_cost(rows: list[Answer], grader_seconds: dict, seed: int, reps: int = 7) -> dict:
    n = len(rows)
    out = {"per_call_us": {g: 1e6 * s[0] / n for g, s in grader_seconds.items()},
           "per_call_cpu_us": {g: 1e6 * s[1] / n for g, s in grader_seconds.items()}, "n_grade_calls": n}
    # agree: every pair of the judged answers of one question, for the first 400 questions of each dataset
    by_q: dict = {}
    for r in rows:
        by_q.setdefault((r.ds, r.qi), []).append(r)
    pairs = []
    for ds in DATASETS:
        for key in sorted(k for k in by_q if k[0] == ds)[:400]:
            rs = by_q[key]
            pairs += [(a.answer, b.answer, a.question) for a, b in itertools.combinations(rs, 2)]
    wall, cpu = _timed(lambda: [agree(a, b, q) for a, b, q in pairs])
    out["agree_us"], out["agree_cpu_us"] = 1e6 * wall / len(pairs), 1e6 * cpu / len(pairs)
    out["n_agree_calls"] = len(pairs)

    from trainers.rewards.csr import RewardSettings, calibration_reward
    from trainers.rewards.matching import extract_answer

    graders = {"cover": grade_cover, "strict": grade_strict}
    steps = {}
    for name, b in grpo_batches(rows, seed).items():
        kw = {"answers": b["answers"], "question": b["question"]}

        def call(judge, b=b, kw=kw):
            # one GRPO step's rewards: correctness r_RLVR of the K·n completions by the judge's grader, then CSR's
            # calibration term with the judge's agreement J
            g = graders[judge]
            y = [float(g(extract_answer(c), a, q)) for c, a, q in zip(b["completions"], b["answers"], b["question"])]
            r = calibration_reward(b["prompts"], b["completions"], settings=RewardSettings(judge=judge),
                                   num_generations=8, **kw)
            return y, r

        (y_cover, res_cover), (y_strict, res_strict) = call("cover"), call("strict")  # warm-up (judge caches)
        t_cover, t_strict = [], []
        for _ in range(reps):  # interleaved, so load on the shared machine hits both alike
            t_cover.append(_timed(lambda: call("cover")))
            t_strict.append(_timed(lambda: call("strict")))
        mc, ms = statistics.median(t[0] for t in t_cover), statistics.median(t[0] for t in t_strict)
        cc, cs = statistics.median(t[1] for t in t_cover), statistics.median(t[1] for t in t_strict)
        steps[name] = {"questions": len(b["prompts"]) // 8, "K": 8, "completions": len(b["prompts"]),
                       "chars_per_completion": b["chars_per_completion"], "reps": reps,
                       "cover_ms": 1e3 * mc, "strict_ms": 1e3 * ms, "ratio_cover_over_strict": mc / ms,
                       "cover_cpu_ms": 1e3 * cc, "strict_cpu_ms": 1e3 * cs, "ratio_cpu": cc / cs,
                       "cover_accuracy": float(np.mean(y_cover)), "strict_accuracy": float(np.mean(y_strict)),
                       "cover_r_cal_mean": float(np.mean(res_cover)), "strict_r_cal_mean": float(np.mean(res_strict))}
    out["grpo_step"] = steps
    out["note"] = ("one step = the judge's grader on every completion (r_RLVR) + trainers.rewards.csr."
                   "calibration_reward(judge=<the judge>) (CSR's agreement matrix; inside it y_j is semcal's "
                   f"default grader, grading.grade = {grading.grade.__name__}, the same in both)")
    return out


# ------------------------------------------------------------------------------------------------------ report
def fmt(x, d=3) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{d}f}"


def fmt_ci(v, ci) -> str:
    return f"{fmt(v)} [{fmt(ci[0])}, {fmt(ci[1])}]"


def render(res: dict) -> str:
    L = []
    a = L.append
    m = res["meta"]
    a("# The cover judge against people (EVOUNA)\n")
    parts = ", ".join(f"{ds}: {m['data'][ds]['answers']:,} answers of {m['data'][ds]['questions']:,} questions"
                      for ds in DATASETS)
    skipped = ", ".join(f"{m['data'][ds]['skipped_no_gold_questions']} {ds} questions without a usable gold "
                        f"({m['data'][ds]['skipped_no_gold_answers']} judged answers)" for ds in DATASETS)
    miss = m["missing_answers"]
    a(f"{m['answers']:,} judged answers ({parts}; skipped: {skipped}; {miss['n']} judged answers read \"None\" or "
      f"nothing, {miss['people_correct']} of them judged correct by people: the answer text is missing from the file, "
      f"a data artifact, kept). Seed {m['seed']}, {m['boot']} question-cluster bootstrap draws, 95 % percentile CIs "
      f"in brackets. Cover grader: `{m['cover_grader']}`. git HEAD {m['git_head'][:10]}"
      f"{' (judge files modified in the working tree: sha256 in results.json)' if m['judge_files_dirty'] else ''}.\n")
    a("## Per dataset\n")
    a("| data | grader | n | agreement [95 % CI] | kappa [95 % CI] | FPR | FNR | acc. reported | acc. people |")
    a("|---|---|---:|---|---|---:|---:|---:|---:|")
    for ds in ("NQ", "TQ", "ALL"):
        for g in GRADERS:
            r = res["datasets"][ds][g]
            a(f"| {ds} | {g} | {r['n']:,} | {fmt_ci(r['agreement'], r['agreement_ci'])} | "
              f"{fmt_ci(r['kappa'], r['kappa_ci'])} | {fmt(r['fpr'])} | {fmt(r['fnr'])} | "
              f"{fmt(r['accuracy_reported'])} | {fmt(r['accuracy_people'])} |")
    a("\nFPR: share of people-wrong answers graded correct; FNR: share of people-correct answers graded wrong.\n")
    a("cover's agreement minus each baseline's (paired bootstrap, 95 % CI):\n")
    a("| data | " + " | ".join(f"cover − {g}" for g in GRADERS if g != "cover") + " |")
    a("|---|" + "---|" * (len(GRADERS) - 1))
    for ds in ("NQ", "TQ", "ALL"):
        d = res["differences"][ds]
        a(f"| {ds} | " + " | ".join(fmt_ci(d[g]["diff"], d[g]["ci"]) for g in GRADERS if g != "cover") + " |")
    for part, keys in (("system", SYSTEMS), ("length", [x[0] for x in LENGTHS])):
        a(f"\n## Per {part}: agreement / kappa\n")
        a("| data | grader | " + " | ".join(keys) + " |")
        a("|---|---|" + "---|" * len(keys))
        for ds in DATASETS:
            a(f"| {ds} | n | " + " | ".join(f"{res['by_' + part][ds][k]['cover']['n']:,}" for k in keys) + " |")
            for g in GRADERS:
                a(f"| {ds} | {g} | " + " | ".join(
                    f"{fmt(res['by_' + part][ds][k][g]['agreement'])} / {fmt(res['by_' + part][ds][k][g]['kappa'], 2)}"
                    for k in keys) + " |")
        a(f"\ncover per {part}, agreement [95 % CI] · FPR · acc. reported / people:\n")
        a("| data | " + " | ".join(keys) + " |")
        a("|---|" + "---|" * len(keys))
        for ds in DATASETS:
            a(f"| {ds} | " + " | ".join(
                (lambda r: f"{fmt_ci(r['agreement'], r['agreement_ci'])} · {fmt(r['fpr'], 2)} · "
                           f"{fmt(r['accuracy_reported'], 2)}/{fmt(r['accuracy_people'], 2)}")(
                    res["by_" + part][ds][k]["cover"]) for k in keys) + " |")
    a("\n## cover per system × length: agreement [95 % CI] (n)\n")
    lk = [x[0] for x in LENGTHS]
    a("| data | system | " + " | ".join(lk) + " |")
    a("|---|---|" + "---|" * len(lk))
    for ds in DATASETS:
        for s in SYSTEMS:
            cells = []
            for k in lk:
                r = res["by_system_length"][ds][s][k]
                cells.append("—" if not r["n"] else f"{fmt_ci(r['agreement'], r['agreement_ci'])} ({r['n']:,})")
            a(f"| {ds} | {s} | " + " | ".join(cells) + " |")
    c = res["ceiling"]
    a("\n## The lexical ceiling\n")
    a("People-correct answers that share no gold evidence word at all (cover's reading: content words of any alias "
      "that the question does not hold, stems matched as cover matches them). No judge that needs a shared word "
      "can grade them correct; *ceiling* = the agreement of a judge that is right on every other answer.\n")
    a("| data | people-correct | no shared evidence word | share | share of cover's FN | agreement ceiling |")
    a("|---|---:|---:|---:|---:|---:|")
    for ds in ("NQ", "TQ", "ALL"):
        r = c[ds]
        a(f"| {ds} | {r['people_correct']:,} | {r['no_evidence_overlap']:,} | {fmt(r['share'])} | "
          f"{fmt(r['share_of_cover_fn'])} | {fmt(r['agreement_ceiling'])} |")
    a("\nPer system (share of people-correct answers with no shared evidence word): " + "; ".join(
        f"{ds} " + ", ".join(f"{s} {fmt(c['by_system'][ds][s])}" for s in SYSTEMS) for ds in DATASETS) + ".\n")
    fails = res["failures"]
    a("## Where cover disagrees with people\n")
    a("Each disagreement is put in the first category whose probe applies (a probe edits the answer or the golds and "
      "regrades: e.g. *or echoed from the question*: dropping the answer's \"or\" makes cover accept it, and the "
      "question holds an \"or\"). results.json lists the first five of each (dataset:index:system).\n")
    a("| disagreement | category | n | NQ | TQ |")
    a("|---|---|---:|---:|---:|")
    for kind in ("false_negatives", "false_positives"):
        for c, e in fails[kind].items():
            a(f"| {kind.replace('_', ' ')} | {c.replace('_', ' ')} | {e['n']:,} | {e['NQ']:,} | {e['TQ']:,} |")
    a(f"\nThe less-specific-alias pattern among answers cover accepts *and* people judge correct: "
      f"{fails['less_specific_alias_people_correct']:,}.\n")
    if res.get("cv"):
        cv = res["cv"]
        a("## Cross-validation of the constants (5 folds by question)\n")
        sh = cv["shipped"]
        a(f"Grid THETA ∈ {{0.34, 0.5, 0.67}} × ALT_WINDOW ∈ {{1, 2, 4}} × WINDOW ∈ {{2, 4, 8}} (27 points); "
          f"fold = {cv['fold_rule']}; selection: {cv['selection']}. Shipped constants: THETA {sh['theta']}, "
          f"ALT_WINDOW {sh['alt_window']}, WINDOW {sh['window']}. The rules themselves (what counts as a hedge, a "
          "rival, a conflict) were written by reading EVOUNA failures and are *not* cross-validated.\n")
        a("| data | CV agreement [95 % CI] | CV kappa [95 % CI] | shipped, in-sample agreement "
          "| shipped, in-sample kappa |")
        a("|---|---|---|---|---|")
        for ds in ("NQ", "TQ", "ALL"):
            r = cv["rows"][ds]
            a(f"| {ds} | {fmt_ci(r['cv']['agreement'], r['cv']['agreement_ci'])} | "
              f"{fmt_ci(r['cv']['kappa'], r['cv']['kappa_ci'])} | "
              f"{fmt_ci(r['shipped_in_sample']['agreement'], r['shipped_in_sample']['agreement_ci'])} | "
              f"{fmt_ci(r['shipped_in_sample']['kappa'], r['shipped_in_sample']['kappa_ci'])} |")
        a("\n| fold | chosen (THETA, ALT_WINDOW, WINDOW) | train agreement | test agreement | n test |")
        a("|---:|---|---:|---:|---:|")
        for f in cv["folds"]:
            ch = f["chosen"]
            a(f"| {f['fold']} | ({ch['theta']}, {ch['alt_window']}, {ch['window']}) | {fmt(f['train_agreement'], 4)} | "
              f"{fmt(f['test_agreement'], 4)} | {f['n_test']:,} |")
        bi = cv["best_in_sample"]
        a(f"\nBest grid point in-sample: ({bi['theta']}, {bi['alt_window']}, {bi['window']}), pooled agreement "
          f"{fmt(bi['agreement_all'], 4)}. Pooled agreement over the grid: "
          f"{fmt(min(g['agreement_all'] for g in cv['grid']), 4)}–"
          f"{fmt(max(g['agreement_all'] for g in cv['grid']), 4)}.\n")
        a("| THETA \\ (ALT_WINDOW, WINDOW) | "
          + " | ".join(f"({aw}, {w})" for aw in (1, 2, 4) for w in (2, 4, 8)) + " |")
        a("|---|" + "---:|" * 9)
        for th in (0.34, 0.5, 0.67):
            cells = [next(g for g in cv["grid"] if (g["theta"], g["alt_window"], g["window"]) == (th, aw, w))
                     for aw in (1, 2, 4) for w in (2, 4, 8)]
            a(f"| {th} | " + " | ".join(fmt(g["agreement_all"], 4) for g in cells) + " |")
    t = res["targets"]
    a("\n## The issue's targets\n")
    a("| target | value [95 % CI] | met (point) | met (CI lower bound) |")
    a("|---|---|:---:|:---:|")
    for row in t:
        a(f"| {row['target']} | {fmt_ci(row['value'], row['ci'])} | {'yes' if row['met_point'] else 'no'} | "
          f"{'yes' if row['met_ci'] else 'no'} |")
    k = res["cost"]
    a("\n## Cost (this machine, one process, one core; wall-clock, CPU time in parentheses)\n")
    a("µs per call, mean over all EVOUNA answers: " + ", ".join(
        f"{g} {k['per_call_us'][g]:.0f} ({k['per_call_cpu_us'][g]:.0f})" for g in GRADERS if g != "always_correct")
      + f"; `agree` (pairs of one question's answers, {k['n_agree_calls']:,} calls): "
        f"{k['agree_us']:.0f} ({k['agree_cpu_us']:.0f}).\n")
    a("| GRPO batch | completions (questions × K) | mean chars | step rewards, cover (ms) | strict (ms) "
      "| ratio (CPU ratio) |")
    a("|---|---|---:|---:|---:|---:|")
    for name, s in k["grpo_step"].items():
        a(f"| {name} | {s['completions']} ({s['questions']} × {s['K']}) | {s['chars_per_completion']:.0f} | "
          f"{s['cover_ms']:.0f} ({s['cover_cpu_ms']:.0f}) | {s['strict_ms']:.0f} ({s['strict_cpu_ms']:.0f}) | "
          f"{s['ratio_cover_over_strict']:.2f} ({s['ratio_cpu']:.2f}) |")
    a(f"\n{k['note']}. Median of {next(iter(k['grpo_step'].values()))['reps']} interleaved calls.\n")
    a(f"Runtime: {res['meta']['runtime_s']:.0f} s.")
    L += render_defences(res)
    return "\n".join(L) + "\n"


# ------------------------------------------------------------------------------------- the report (<out>/README.md)
#: false negatives of EVOUNA shown in the report (category, answer, golds, question); people judged each correct
DOC_FALSE_NEGATIVES = (
    ("No shared word (synonym, paraphrase)", "currency", ("fiat money",), "what is money as a medium of exchange"),
    ("Nickname: a gold word, not its head", "The Tin Man wants a heart in \"The Wizard of Oz.\"", ("Tin Woodman",),
     "who wants a heart in the wizard of oz"),
    ("Synonyms offered as \"X or Y\"", "Largest member of the Dolphin family: Orca or Killer Whale.",
     ("Orca Whale", "Killer whale", "Orca"),
     "Which black and white marine creature is the largest member of the Dolphin family?"),
    ("A list the question asks for", "KOMO (ABC)\nKUNS (Univision)\nKUNW (UniMás)", ("KOMO-TV", "KUNS-TV"),
     "what stations in seattle are owned by sinclair"),
    ("Gold with a qualifier", "Dhaka", ("Dhaka, Bangladesh", "Lucknow"),
     "where was held the first session of muslim league"),
)
#: rule faults (what, answer, golds, question, people's verdict); the report lists those that still reproduce
DOC_FAULTS = (
    ("an \"or\" repeated from the question counts as an alternative",
     "The second-largest town or city of Luxembourg is Esch-sur-Alzette.", ("Luxembourg",),
     "The second largest town or city of which country is Esch-sur-Alzette?", True),
    ("a gold's qualifier is read as its head", "Gannet", ("(North Atlantic) Gannet",),
     "Three-quarters of the world's breeding population of one seabird are concentrated where?", True),
    ("a name suffix is read as the head (\"Jr.\" ≠ \"Jnr\")", "Harry Connick Jr.", ("Harry Connick Jnr",),
     "Who recorded the When Harry Met Sally soundtrack?", True),
    ("a gold the question holds is refused in a longer answer that states it",
     "Season 7 of \"Game of Thrones\" consists of 7 episodes.", ("7", "seven"),
     "how many episodes in game if thrones season 7", True),
    ("a first name before a surname gold reads as another name", "Ferdinand Marcos", ("Marcos", "Markos"),
     "Which President of the Philippines was deposed in 1986?", True),
    ("a hyphenated answer word does not match the gold's two words", "An engagement ring is typically worn on the "
     "left-hand ring finger.", ("left hand ring finger",), "where does a girl wear an engagement ring", True),
    ("a modifier before a covered gold refuses it", "the middle of the 15th century", ("15th century",),
     "when was coffee first made into a drink", True),
    ("a less specific alias is accepted while a more specific one conflicts (wrong day)",
     "Korea separated into North and South on August 15, 1945.", ("1945", "17 August 1945"),
     "when did korea separate into north and south", False),
    ("the question's words taken out of the gold leave a modifier", "Central Europe", ("Central Germany",),
     "what culture region is germany a part of", False),
)


def doc_examples() -> dict:
    """cover's verdicts on the examples of the report (the judge loaded in this process)."""
    return {"false_negatives": [{"category": c, "answer": a, "golds": list(g), "question": q,
                                 "cover": bool(grade_cover(a, list(g), q))} for c, a, g, q in DOC_FALSE_NEGATIVES],
            "faults": [{"what": w, "answer": a, "golds": list(g), "question": q, "people": p,
                        "cover": bool(grade_cover(a, list(g), q))} for w, a, g, q, p in DOC_FAULTS]}


def render_docs(R: dict) -> str:
    """The report (``<out>/README.md``) from one run's results: what the judge is, how it was made, the tables, the
    targets, the failures and the cost (needs the cross-validation; rerun after every change of the judge)."""
    f = fmt

    def ci(v, c, d=3):
        return f"{f(v, d)} [{f(c[0], d)}, {f(c[1], d)}]"

    m, d, L = R["meta"], R["datasets"], []
    a = L.append
    a("# The cover judge: semcal's answer grader, measured against people\n")
    a("`cover` decides whether a QA answer is correct (`semcal_eval.qa.grading.grade_cover`) and whether two answers "
      "say the same thing (`agree`: CSR's agreement J and the QA tasks' default clustering). This page says what it "
      "is, how it was made, how often it agrees with people (EVOUNA: 24,133 human-judged answers of five systems to "
      "NQ-Open and TriviaQA), where it fails, what it costs, and the options. Generated by "
      "`benchmarks/bench_judge_humans.py` (more tables: `results.md` beside this page;"
      f" seed {m['seed']}, {m['boot']} bootstrap draws; the data's and the judge files' sha256 in "
      "results.json).\n")
    a("## What it is\n")
    a("A lexical judge, no model: the rule is [docs/JUDGE.md](../../../docs/JUDGE.md#the-rule) in short and the "
      "docstring of `semcal_eval/qa/cover.py` in full.\n")
    a("Correct ⇔ some alias is covered. `agree(a, b)` ⇔ they read the same, or one covers the other as a gold.\n")
    a("## How it was made\n")
    a("The rules were written by reading EVOUNA disagreements (first `strict`'s, then cover's own). EVOUNA is "
      "therefore development data for the rules, and the numbers below are in-sample for the rules written before "
      "2026-12-05; the rules added that day were written reading folds 0–2 only, and folds 3–4 measure them (the "
      "last table). Three constants were chosen on a grid (THETA ∈ {0.34, 0.5, 0.67} × ALT_WINDOW ∈ "
      "{1, 2, 4} × WINDOW ∈ {2, 4, 8}), and that choice is cross-validated: 5 folds by question (fold = "
      "sha256(\"NQ:<index>\") mod 5; no question in two folds), chosen on 4, measured on the 5th. The other "
      "constants were set by hand.\n")
    cv = R.get("cv")
    if cv:
        chosen = sorted({(x["chosen"]["theta"], x["chosen"]["alt_window"], x["chosen"]["window"])
                         for x in cv["folds"]})
        sh = cv["shipped"]
        grid = {(g["theta"], g["alt_window"], g["window"]): g["agreement_all"] for g in cv["grid"]}
        same = all(grid[(0.34, aw, w)] == grid[(0.5, aw, w)] for aw in (1, 2, 4) for w in (2, 4, 8))
        tie = " THETA 0.34 and 0.5 agree equally often at every grid point." if same else ""
        a(f"Folds chose (THETA, ALT_WINDOW, WINDOW) = {', '.join(str(c) for c in chosen)}; shipped: "
          f"({sh['theta']}, {sh['alt_window']}, {sh['window']}).{tie} Pooled agreement over the grid: "
          f"{f(min(grid.values()))}–{f(max(grid.values()))}.\n")
        a("| data | CV agreement | CV kappa | shipped constants, in-sample agreement | kappa |")
        a("|---|---|---|---|---|")
        for ds in DATASETS:
            r = cv["rows"][ds]
            a(f"| {ds} | {ci(r['cv']['agreement'], r['cv']['agreement_ci'])} | "
              f"{ci(r['cv']['kappa'], r['cv']['kappa_ci'])} | "
              f"{ci(r['shipped_in_sample']['agreement'], r['shipped_in_sample']['agreement_ci'])} | "
              f"{ci(r['shipped_in_sample']['kappa'], r['shipped_in_sample']['kappa_ci'])} |")
        a("\nCV minus in-sample agreement: " + ", ".join(
            f"{ds} {cv['rows'][ds]['cv']['agreement'] - cv['rows'][ds]['shipped_in_sample']['agreement']:+.3f}"
            for ds in DATASETS) + ". This checks the three tuned constants only, not the hand-written rules.\n")
    a("## Agreement with people\n")
    a("95 % CIs by cluster bootstrap over questions. FPR: share of people-wrong answers graded correct. *acc.*: the "
      "accuracy the grader reports / people's. Baselines: every answer correct; `strict` (exact match after a "
      "lead-in, the default of task versions 2.x); token F1 ≥ 0.5; *contained* (a normalised alias inside the "
      "normalised answer).\n")
    a("| data | grader | agreement | kappa | FPR | acc. |")
    a("|---|---|---|---|---:|---|")
    for ds in DATASETS:
        for g in GRADERS:
            r = d[ds][g]
            a(f"| {ds} | {g} | {ci(r['agreement'], r['agreement_ci'])} | {ci(r['kappa'], r['kappa_ci'], 2)} | "
              f"{f(r['fpr'])} | {f(r['accuracy_reported'], 2)} / {f(r['accuracy_people'], 2)} |")
    dif = R["differences"]
    below = [ds for ds in DATASETS if dif[ds]["contained"]["ci"][1] < 0]
    fn = R["failures"]["false_negatives"]
    a("\ncover − contained, agreement (paired bootstrap): " + ", ".join(
        f"{ds} {ci(dif[ds]['contained']['diff'], dif[ds]['contained']['ci'])}" for ds in DATASETS) + "."
      + (f" On {' and '.join(below)} cover agrees *less* often than containment. Part of that is by design: it "
         "refuses lists and alternatives, which containment pays a policy for (" + ", ".join(
             f"{ds}: {sum(fn.get(c, {}).get(ds, 0) for c in ('list_rival', 'alternatives_or'))} such false negatives"
             for ds in below) + "); the faults below are another part." if below else "") + "\n")
    a("cover per system and per answer length (words: short ≤ 5, sentence 6–30, long > 30), agreement [95 % CI]:\n")
    keys = [("by_system", s) for s in SYSTEMS] + [("by_length", k) for k, _, _ in LENGTHS]
    a("| data | " + " | ".join(k for _, k in keys) + " |")
    a("|---|" + "---|" * len(keys))
    for ds in DATASETS:
        a(f"| {ds} | " + " | ".join(ci(R[p][ds][k]["cover"]["agreement"], R[p][ds][k]["cover"]["agreement_ci"])
                                   for p, k in keys) + " |")
    a("\nEvery baseline per system and length, with kappa, FPR and system × length: results.md.\n")
    a("## The issue's targets\n")
    T = R["targets"]
    a("Issue 41 asks agreement ≥ 0.90 and kappa ≥ 0.75 on NQ and on TQ, and agreement ≥ 0.85 for every system "
      "(fid … newbing below) and for short and sentence-long answers.\n")
    for label, rows in (("Not met", [t for t in T if not t["met_point"]]),
                        ("Met at the point estimate only (the CI reaches below)",
                         [t for t in T if t["met_point"] and not t["met_ci"]]),
                        ("Met (the CI's lower bound clears it)", [t for t in T if t["met_ci"]])):
        if rows:
            a(f"- **{label}** ({len(rows)}): " + "; ".join(f"{t['short']} {ci(t['value'], t['ci'])}" for t in rows)
              + ".")
    c = R["ceiling"]
    a("\n## The lexical ceiling\n")
    a(f"People call {c['NQ']['no_evidence_overlap']:,} NQ and {c['TQ']['no_evidence_overlap']:,} TQ answers correct "
      f"that share no evidence word with any gold alias ({f(c['NQ']['share'])} and {f(c['TQ']['share'])} of "
      "people-correct answers): synonyms, paraphrases, other names. A judge that needs a shared word cannot pay "
      f"them, so even one right on every other answer agrees at most {f(c['NQ']['agreement_ceiling'])} (NQ) and "
      f"{f(c['TQ']['agreement_ceiling'])} (TQ). They are {f(c['NQ']['share_of_cover_fn'])} (NQ) and "
      f"{f(c['TQ']['share_of_cover_fn'])} (TQ) of cover's false negatives.\n")
    a("## Where it fails\n")
    fl = R["failures"]
    a("Disagreements by category (the first probe that flips the verdict: `fn_category`, `fp_category` in the "
      "benchmark):\n")
    a("| false negatives | n | false positives | n |")
    a("|---|---:|---|---:|")
    fn_items, fp_items = list(fl["false_negatives"].items()), list(fl["false_positives"].items())
    for i in range(max(len(fn_items), len(fp_items))):
        cells = []
        for items in (fn_items, fp_items):
            cells += [items[i][0].replace("_", " "), f"{items[i][1]['n']:,}"] if i < len(items) else ["", ""]
        a("| " + " | ".join(cells) + " |")
    ex = R["doc_examples"]
    a("\nFalse negatives (people: correct; cover: wrong), from EVOUNA:\n")
    for e in ex["false_negatives"]:
        if not e["cover"]:
            a(f"- {e['category']}: Q `{e['question']}`, gold `{' / '.join(e['golds'])}`, answer "
              f"`{e['answer'].replace(chr(10), ' ⏎ ')}`.")
    faults = [e for e in ex["faults"] if e["cover"] != e["people"]]
    if faults:
        a("\nFaults of a rule: `grade_cover(answer, golds, question)` → its verdict (people's). Each fix is a rule "
          "change to measure here again:\n")
        for e in faults:
            a(f"- {e['what']}: `{e['answer']!r}`, `{e['golds']!r}`, `{e['question']!r}` → {e['cover']} "
              f"({e['people']}).")
    n_less = fl["false_positives"].get("less_specific_alias", {}).get("n", 0)
    a(f"\nThe less-specific-alias pattern (an alias like \"1945\" covered while \"17 August 1945\" is not) is behind "
      f"{n_less:,} false positives and {fl['less_specific_alias_people_correct']:,} answers that cover accepts and "
      "people accept too.\n")
    k = R["cost"]
    ms, lg = k["grpo_step"]["mixed"], k["grpo_step"]["long"]
    a("## Cost\n")
    a("One process on one core of a shared 2-core machine (wall-clock; CPU time in parentheses). `grade_cover`: "
      f"{k['per_call_us']['cover']:.0f} µs ({k['per_call_cpu_us']['cover']:.0f}) per call, the mean over all EVOUNA "
      f"answers (`grade_strict` {k['per_call_us']['strict']:.0f} ({k['per_call_cpu_us']['strict']:.0f}), token F1 "
      f"{k['per_call_us']['f1']:.0f} ({k['per_call_cpu_us']['f1']:.0f})); `agree`: {k['agree_us']:.0f} µs "
      f"({k['agree_cpu_us']:.0f}). One GRPO step's rewards at K = 8 (8 questions × 8 completions: each completion's "
      "correctness, then `trainers.rewards.csr.calibration_reward` with the judge's agreement matrix), cover and "
      f"strict in the same run: {ms['cover_ms']:.0f} ms vs {ms['strict_ms']:.0f} ms "
      f"(×{ms['ratio_cover_over_strict']:.1f}; CPU ×{ms['ratio_cpu']:.1f}) with EVOUNA's answers "
      f"({ms['chars_per_completion']:.0f} characters on average), {lg['cover_ms']:.0f} ms vs {lg['strict_ms']:.0f} ms "
      f"(×{lg['ratio_cover_over_strict']:.1f}; CPU ×{lg['ratio_cpu']:.1f}) with its longest "
      f"({lg['chars_per_completion']:.0f} characters). That is what the judge adds to one CPU training step at K = 8 "
      "(one grade per completion, one agree per pair of a group, pure Python on one core).\n")
    a("## Options\n")
    a("A QA task's `correctness` metadata (`CORRECTNESS_RULES` in `semcal_eval/qa/labels.py`) and CSR's `judge:` "
      "choose another rule by name:\n")
    a("- `strict` (`grade_strict`, the default of task versions 2.x): the answer, less one content-free lead-in, "
      "equals a gold alias; sentence golds by ROUGE-L ≥ 0.5 without added list, hedge or negation words. Hardly ever "
      f"says correct wrongly (FPR {f(d['NQ']['strict']['fpr'])} NQ) and misses most correct sentence answers "
      f"(agreement {f(d['NQ']['strict']['agreement'])} NQ).")
    a("- `f1`: best token F1 ≥ `correct_threshold` (0.5), the SQuAD convention; pays for listing candidates "
      f"(agreement {f(d['NQ']['f1']['agreement'])} NQ).")
    a("- `judge`: the task's clustering judge (`f1`, `embed`, `nli`, `llm`) against each alias; not measured here.\n")
    a("## Reproduce\n")
    a("`PYTHONPATH=. python benchmarks/bench_judge_humans.py` (data: `$SEMCAL_DATA_DIR/evouna` "
      f"or `../shared/data/evouna`, never copied here; {m['runtime_s'] / 60:.0f} min on 2 shared cores; `--no-cv` "
      "skips the grid). `tests/test_judge_humans.py` checks on every 40th answer that cover beats `strict` and `f1` "
      "by a wide margin and keeps its false-positive rate near containment's.")
    L += render_defences(R)
    return "\n".join(L) + "\n"


# ------------------------------------------------------------------------------------ defences and held-out folds
#: the defence sets measured: all (shipped), each listing defence off, all listing defences off (negation kept)
DEFENCE_SETS = (("all (shipped)", C.DEFENCES),) + tuple(
    (f"without {d}", tuple(x for x in C.DEFENCES if x != d)) for d in C.DEFENCES if d != "negation") + (
    ("negation only", ("negation",)),)
#: folds read while writing the rules of 2026-12-05 (the rest were not read: the held-out estimate of that change)
DEV_FOLDS = (0, 1, 2)


def listing_attacks(seed: int, n: int) -> list[tuple[str, str, str]]:
    """Seeded listings of tests/test_judge_adversaries.py (hand pairs): up to two non-listing steps on a wrong
    answer, then the gold listed beside it with or without a mark, then maybe one dressing step. Rivals the judge
    already grades correct, and honest rewrites, are left out (as in the test). (question, gold, attacked)."""
    sys.path.insert(0, str(REPO / "tests"))
    import test_judge_adversaries as T
    from research import answer_grammar as G

    rng = np.random.default_rng(seed)
    cases, out = T._instances(T.HAND), []
    after_ops = G.DRESSING + ("question", "suffix", "pad")
    for _ in range(n):
        q, g, w = cases[int(rng.integers(len(cases)))]
        before = G.random_attack(rng, max_steps=2, ops=T.NON_LISTING)
        prog = [*before, (("list_gold", "list_bare")[int(rng.integers(2))], int(rng.integers(60)))]
        if rng.random() < 0.5:
            prog.append((after_ops[int(rng.integers(len(after_ops)))], int(rng.integers(60))))
        rival = G.run(before, w, g, q)
        if not C.content(rival) or grade_cover(rival, [g], q) or T._honest_rewrite(before, w, g, q, rival):
            continue
        out.append((q, g, G.run(prog, w, g, q)))
    return out


def defences(rows: list[Answer], human: np.ndarray, boot: ClusterBootstrap, seed: int, n_listings: int = 3000,
             log=print) -> dict:
    """Each defence of the grader (cover.DEFENCES) switched off in turn (this process only, restored after): what
    it costs in agreement with people and what it buys against listings (share of seeded listings graded
    correct)."""
    attacks = listing_attacks(seed, n_listings)
    before = reference_preds([(a, [g], q) for q, g, a in attacks], BEFORE_REF)
    saved, out = C.DEFENCES, {"listings": len(attacks), "rows": [], "before_ref": BEFORE_REF,
                              "before_listings_correct": None if before is None else int(before.sum())}
    try:
        for name, active in DEFENCE_SETS:
            C.DEFENCES = tuple(active)
            t = time.perf_counter()
            pred = np.fromiter((grade_cover(r.answer, list(r.golds), r.question) for r in rows), dtype=bool,
                               count=len(rows))
            row = {"name": name, "defences": list(active),
                   "listings_correct": int(sum(grade_cover(a, [g], q) for q, g, a in attacks))}
            for ds in DATASETS:
                m = np.array([r.ds == ds for r in rows])
                row[ds] = {"agreement": float((pred[m] == human[m]).mean()), "kappa": float(kappa(pred[m], human[m])),
                           "fpr": float((pred[m] & ~human[m]).sum() / max(1, (~human[m]).sum()))}
            out["rows"].append(row)
            log(f"  defences {name}: {time.perf_counter() - t:.1f} s")
    finally:
        C.DEFENCES = saved
    return out


#: the tree before the rules of 2026-12-05 (the folds table compares the shipped judge with it)
BEFORE_REF = "6b98268"


def reference_preds(rows: list[tuple[str, list[str], str]], ref: str) -> np.ndarray | None:
    """``grade`` of the tree at git ``ref`` on every (answer, golds, question): semcal_eval/ of that commit unpacked
    into a temporary folder and run in a child process (None when git or the commit is not there)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        try:
            tar = subprocess.run(["git", "-C", str(REPO), "archive", ref, "semcal_eval"], capture_output=True,
                                 check=True).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=tar, check=True)
        except (OSError, subprocess.CalledProcessError):
            return None
        code = ("import json, sys; sys.path.insert(0, sys.argv[1]); from semcal_eval.qa.grading import grade; "
                "rows = json.load(sys.stdin); print(json.dumps([bool(grade(a, g, q)) for a, g, q in rows]))")
        payload = json.dumps([list(r) for r in rows])
        out = subprocess.run([sys.executable, "-c", code, tmp], input=payload, capture_output=True, text=True,
                             check=True, cwd=tmp, env={**os.environ, "SEMCAL_LM_EVAL_PLUGIN": "0"})
    return np.array(json.loads(out.stdout), dtype=bool)


def folds_report(rows: list[Answer], human: np.ndarray, pred: np.ndarray, before: np.ndarray | None = None,
                 boot: ClusterBootstrap | None = None) -> dict:
    """Agreement and kappa on the folds read while writing the rules (:data:`DEV_FOLDS`) and on the others, for
    the shipped judge and (``before``) the judge of :data:`BEFORE_REF`."""
    out = {"before_ref": BEFORE_REF if before is not None else None}
    for part, keep in (("read", True), ("held_out", False)):
        for ds in DATASETS:
            m = np.array([r.ds == ds and (fold_of(r.ds, r.qi) in DEV_FOLDS) == keep for r in rows])
            row = {"n": int(m.sum()), "agreement": float((pred[m] == human[m]).mean()),
                   "kappa": float(kappa(pred[m], human[m]))}
            if before is not None:
                row["before_agreement"] = float((before[m] == human[m]).mean())
                row["before_kappa"] = float(kappa(before[m], human[m]))
                if boot is not None and boot.boot:  # paired: the same question draws for both judges
                    t1, t0 = boot.tables(pred, human, m), boot.tables(before, human, m)
                    agree_of = lambda t: (t[:, 0] + t[:, 3]) / t.sum(axis=1)  # noqa: E731
                    row["diff_ci"] = boot.ci(agree_of(t1) - agree_of(t0))
            out[f"{ds}_{part}"] = row
    return out


def render_defences(res: dict) -> list[str]:
    d, f = res["defences"], res["folds"]
    L = ["## What each defence costs and buys\n",
         f"The grader's defences (`cover.DEFENCES`) switched off one at a time: agreement with people on all of EVOUNA "
         f"against the share of {d['listings']:,} seeded listings (tests/test_judge_adversaries.py's hand pairs: a "
         "wrong answer, transformed, with the gold listed beside it) that are graded correct. Negation stays on in "
         "every row. Point estimates (CIs as in the tables above: about ±0.008).\n",
         "| defences | NQ agreement | NQ kappa | TQ agreement | TQ kappa | listings graded correct |",
         "|---|---:|---:|---:|---:|---:|"]
    for r in d["rows"]:
        L.append(f"| {r['name']} | {fmt(r['NQ']['agreement'])} | {fmt(r['NQ']['kappa'])} | "
                 f"{fmt(r['TQ']['agreement'])} | {fmt(r['TQ']['kappa'])} | "
                 f"{r['listings_correct']:,} ({r['listings_correct'] / max(1, d['listings']):.1%}) |")
    if d.get("before_listings_correct") is not None:
        b = d["before_listings_correct"]
        L.append(f"\nThe judge before the rules of 2026-12-05 (git {d['before_ref']}) grades {b:,} of the same "
                 f"listings correct ({b / max(1, d['listings']):.1%}).")
    L += ["", "## Read and held-out folds\n",
          f"The rules added on 2026-12-05 were written reading only folds {', '.join(map(str, DEV_FOLDS))} of the "
          "5-fold split by question (`fold_of`); the other folds were measured after. The judge before them "
          f"(git {f['before_ref'] or '(not available)'}) → the shipped judge, on each part:\n",
          "| part | NQ n | NQ agreement [paired 95 % CI of the change] | NQ kappa | TQ n | TQ agreement | TQ kappa |",
          "|---|---:|---:|---:|---:|---:|---:|"]

    def pair(r, k):
        if "before_" + k not in r:
            return fmt(r[k])
        ci = f" [{r['diff_ci'][0]:+.3f}, {r['diff_ci'][1]:+.3f}]" if k == "agreement" and "diff_ci" in r else ""
        return f"{fmt(r['before_' + k])} → {fmt(r[k])}{ci}"
    for part in ("read", "held_out"):
        nq, tq = f[f"NQ_{part}"], f[f"TQ_{part}"]
        L.append(f"| {part.replace('_', '-')} | {nq['n']:,} | {pair(nq, 'agreement')} | {pair(nq, 'kappa')} | "
                 f"{tq['n']:,} | {pair(tq, 'agreement')} | {pair(tq, 'kappa')} |")
    L.append("")
    return L


def targets(res: dict) -> list[dict]:
    out = []
    for ds in DATASETS:
        r = res["datasets"][ds]["cover"]
        out.append({"target": f"{ds} agreement ≥ {TARGET_AGREEMENT}", "short": f"{ds} agreement",
                    "value": r["agreement"], "ci": r["agreement_ci"], "met_point": r["agreement"] >= TARGET_AGREEMENT,
                    "met_ci": r["agreement_ci"][0] >= TARGET_AGREEMENT})
        out.append({"target": f"{ds} kappa ≥ {TARGET_KAPPA}", "short": f"{ds} kappa", "value": r["kappa"],
                    "ci": r["kappa_ci"],
                    "met_point": r["kappa"] >= TARGET_KAPPA, "met_ci": r["kappa_ci"][0] >= TARGET_KAPPA})
        for part, keys in (("system", SYSTEMS), ("length", ("short", "sentence"))):
            for k in keys:
                r = res[f"by_{part}"][ds][k]["cover"]
                out.append({"target": f"{ds} {part} {k} agreement ≥ {TARGET_SUBSET_AGREEMENT}", "short": f"{ds} {k}",
                            "value": r["agreement"], "ci": r["agreement_ci"],
                            "met_point": r["agreement"] >= TARGET_SUBSET_AGREEMENT,
                            "met_ci": r["agreement_ci"][0] >= TARGET_SUBSET_AGREEMENT})
    return out


def git_head() -> tuple[str, bool]:
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "semcal_eval/qa/cover.py",
                                     "semcal_eval/qa/grading.py", "semcal_eval/qa/answers.py"], cwd=REPO,
                                    capture_output=True, text=True).stdout.strip())
        return head, dirty
    except (OSError, subprocess.CalledProcessError):
        return "unknown", True


def evaluate(rows: list[Answer], preds: dict, boot: ClusterBootstrap) -> dict:
    human = np.array([r.human for r in rows])
    res: dict = {"datasets": {}, "differences": {}, "by_system": {}, "by_length": {}, "by_system_length": {}}
    masks = {"ALL": np.ones(len(rows), bool)} | {ds: np.array([r.ds == ds for r in rows]) for ds in DATASETS}
    sys_arr = np.array([r.system for r in rows])
    len_arr = np.array([r.length for r in rows])
    improper = np.array([r.improper for r in rows])
    for ds, m in masks.items():
        res["datasets"][ds] = {}
        for g in GRADERS:
            r = metrics(preds[g][m], human[m])
            r.update(boot.agreement_kappa_ci(preds[g], human, m))
            res["datasets"][ds][g] = r
        res["differences"][ds] = {g: {"diff": res["datasets"][ds]["cover"]["agreement"]
                                      - res["datasets"][ds][g]["agreement"],
                                      "ci": boot.diff_ci(preds["cover"], preds[g], human, m)}
                                  for g in GRADERS if g != "cover"}
        res["datasets"][ds + " (proper questions only)"] = {
            g: metrics(preds[g][m & ~improper], human[m & ~improper]) for g in GRADERS}
    for ds in DATASETS:
        m = masks[ds]
        for part, arr, keys in (("system", sys_arr, SYSTEMS), ("length", len_arr, [x[0] for x in LENGTHS])):
            res[f"by_{part}"][ds] = {}
            for k in keys:
                mk = m & (arr == k)
                res[f"by_{part}"][ds][k] = {}
                for g in GRADERS:
                    r = metrics(preds[g][mk], human[mk])
                    r.update(boot.agreement_kappa_ci(preds[g], human, mk))
                    res[f"by_{part}"][ds][k][g] = r
        res["by_system_length"][ds] = {}
        for s in SYSTEMS:
            res["by_system_length"][ds][s] = {}
            for k in [x[0] for x in LENGTHS]:
                mk = m & (sys_arr == s) & (len_arr == k)
                r = metrics(preds["cover"][mk], human[mk]) if mk.any() else {"n": 0}
                if mk.any():
                    r.update(boot.agreement_kappa_ci(preds["cover"], human, mk))
                res["by_system_length"][ds][s][k] = r
    return res


def ceiling(rows: list[Answer], cover_pred: np.ndarray) -> dict:
    human = np.array([r.human for r in rows])
    no_ev = np.array([r.human and not shares_evidence(r.answer, r.golds, r.question) for r in rows])
    no_word = np.array([r.human and not any(C.words_match(a, w) for g in r.golds for w in _content_words(g)
                                            for a in C.content(r.answer)) for r in rows])
    out: dict = {"by_system": {}}
    for ds in ("ALL",) + DATASETS:
        m = np.ones(len(rows), bool) if ds == "ALL" else np.array([r.ds == ds for r in rows])
        pc = int(np.sum(human[m]))
        fn = m & human & ~cover_pred
        out[ds] = {"answers": int(m.sum()), "people_correct": pc, "no_evidence_overlap": int(no_ev[m].sum()),
                   "share": float(no_ev[m].sum() / pc), "no_gold_word_overlap": int(no_word[m].sum()),
                   "cover_fn": int(fn.sum()), "share_of_cover_fn": float((no_ev & fn).sum() / max(1, fn.sum())),
                   "agreement_ceiling": float(1 - no_ev[m].sum() / m.sum())}
    for ds in DATASETS:
        out["by_system"][ds] = {}
        for s in SYSTEMS:
            m = np.array([r.ds == ds and r.system == s for r in rows])
            out["by_system"][ds][s] = float(no_ev[m].sum() / max(1, human[m].sum()))
    return out


def _finite(x):
    """JSON-safe: nan → null, numpy scalars → Python numbers."""
    if isinstance(x, dict):
        return {str(k): _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    if isinstance(x, (np.integer, np.bool_)):
        return x.item()
    if isinstance(x, (float, np.floating)):
        return None if math.isnan(x) else float(x)
    return x


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=default_data_dir(), help="folder with NQ.json and TQ.json")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "judge_humans")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--boot", type=int, default=1000, help="question-cluster bootstrap draws")
    ap.add_argument("--no-cv", action="store_true", help="skip the 27-point cross-validation (~6 min)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    # the judge files as this process read them (other edits of the tree during the run do not count)
    judge_sha = {p: sha256_file(REPO / p) for p in ("semcal_eval/qa/cover.py", "semcal_eval/qa/grading.py",
                                                    "semcal_eval/qa/answers.py")}
    if not (args.data / "NQ.json").is_file():
        ap.error(f"no EVOUNA data at {args.data} (NQ.json, TQ.json); set --data or $SEMCAL_DATA_DIR")
    rows, info = load_evouna(args.data)
    log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731
    log(f"{len(rows):,} judged answers from {args.data}")
    preds, seconds = {}, {}
    for g, fn in grader_fns().items():
        preds[g], seconds[g] = run_grader(fn, rows)
        log(f"  {g}: {seconds[g][0]:.1f} s wall, {seconds[g][1]:.1f} s CPU")
    boot = ClusterBootstrap(rows, args.boot, args.seed)
    res = evaluate(rows, preds, boot)
    res["targets"] = targets(res)
    res["ceiling"] = ceiling(rows, preds["cover"])
    log("failure categories ...")
    res["failures"] = failure_categories(rows, preds["cover"])
    res["doc_examples"] = doc_examples()
    human = np.array([r.human for r in rows])
    res["cv"] = None if args.no_cv else cross_validate(rows, human, boot, preds["cover"], log=log)
    log("defences ...")
    res["defences"] = defences(rows, human, boot, args.seed, log=log)
    log(f"the judge of {BEFORE_REF} ...")
    before = reference_preds([(r.answer, list(r.golds), r.question) for r in rows], BEFORE_REF)
    res["folds"] = folds_report(rows, human, preds["cover"], before, boot)
    log("cost ...")
    res["cost"] = measure_cost(rows, seconds, args.seed)
    head, dirty = git_head()
    res["meta"] = {
        "seed": args.seed, "boot": args.boot, "data_dir": str(args.data), "data": info, "answers": len(rows),
        "git_head": head, "judge_files_dirty": dirty, "grading_grade_is": grading.grade.__name__,
        "cover_grader": f"semcal_eval.qa.grading.{grade_cover.__name__}",
        "missing_answers": {"n": sum(r.answer.strip() in ("", "None") for r in rows),
                            "people_correct": sum(r.human and r.answer.strip() in ("", "None") for r in rows)},
        "judge_files_sha256": judge_sha,
        "constants": {k: getattr(C, k) for k in ("THETA", "THETA_SENTENCE", "SENTENCE_MIN_TOKENS", "WINDOW",
                                                  "ALT_WINDOW", "NEG_WINDOW", "SHORT_EXTRA", "ITEM_MAX")},
        "lengths": {name: [lo, None if hi == math.inf else hi] for name, lo, hi in LENGTHS},
        "python": sys.version.split()[0], "numpy": np.__version__,
        "command": "python benchmarks/bench_judge_humans.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    res["meta"]["runtime_s"] = time.perf_counter() - t0
    args.out.mkdir(parents=True, exist_ok=True)
    md = render(res)
    (args.out / "results.json").write_text(json.dumps(_finite(res), indent=1, allow_nan=False) + "\n")
    (args.out / "results.md").write_text(md)
    if res["cv"] is not None:  # the report quotes the cross-validation
        (args.out / "README.md").write_text(render_docs(_finite(res)))
        log(f"wrote {args.out / 'README.md'}")
    print(md)
    return res


if __name__ == "__main__":
    main()
