"""The judge card: how far a QA number's correctness label can be trusted, and the accuracy corrected for it.

Every QA accuracy, ECE and AUROC rests on a judge's verdicts, and no judge agrees with people everywhere. The
card of a grader is measured, never typed: ``benchmarks/fit_judge.py`` writes
``semcal_eval/qa/judge_weights/card.json`` from the leave-one-answering-system-out predictions on EVOUNA (people's
verdicts on five systems' answers to NQ-Open and TriviaQA): per grader and answer shape (short: ≤ 5 words;
sentence), the 2×2 table against people, agreement and kappa with cluster-bootstrap CIs, sensitivity (people-correct
answers graded correct) and specificity (people-wrong answers graded wrong).

**The correction.** With a shape's rates, the Rogan–Gladen estimate (observed + Sp − 1) / (Se + Sp − 1), clipped
to [0, 1], per shape and weighted by the shapes' counts
(:func:`semcal_eval.core.label_noise.stratified_corrected_accuracy`; the CI carries the evaluation's sampling error
and the rates' uncertainty). It assumes the judge errs on the evaluated answers as it erred on EVOUNA's, given the
shape: independent of which system answered and of its confidence. EVOUNA carries no model confidences, so the
card checks what it can: whether the rates are the same across the five answering systems within a shape
(chi-square homogeneity). Where they are not (p < :data:`ASSUMPTION_P`), the card says so and no corrected number
is printed: a correction whose rates depend on who answered would move the number by an amount it cannot know.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from semcal_eval.core.label_noise import JudgeRates, stratified_corrected_accuracy, stratified_corrected_reliability

__all__ = ["CARD_FILE", "CardError", "ASSUMPTION_P", "SHAPES", "load_card", "grader_card", "shape_of",
           "assumption", "corrected_accuracy", "corrected_calibration", "card_lines", "results_card", "RESULTS_FIELDS",
           "board_fields", "BOARD_FIELDS"]

CARD_FILE = Path(__file__).with_name("judge_weights") / "card.json"
#: a p-value of the homogeneity tests below this: the rates differ across answering systems
ASSUMPTION_P = 0.05
#: answer shapes by whitespace words (the card's strata)
SHAPES = (("short", 0, 5), ("sentence", 6, math.inf))


class CardError(ValueError):
    """No card for this grader, or a malformed card file (the message names the fix)."""


def load_card(path: str | Path | None = None) -> dict:
    path = Path(path or CARD_FILE)
    if not path.is_file():
        raise CardError(f"judge card: no card file {path}; write it with `python benchmarks/fit_judge.py`")
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise CardError(f"judge card: {path} is not JSON ({e})") from e
    if not isinstance(card.get("graders"), dict):
        raise CardError(f"judge card: {path} has no 'graders' table; rewrite it with benchmarks/fit_judge.py")
    return card


def grader_card(grader: str, path: str | Path | None = None) -> dict:
    """The card of ``grader`` (as QA records name it: ``cover``, ``learned-1``, ...)."""
    card = load_card(path)
    if grader not in card["graders"]:
        raise CardError(f"judge card: no card for grader {grader!r} (cards: {', '.join(card['graders'])}); "
                        "measure it with benchmarks/fit_judge.py, or grade with one of those")
    # the file's models are the learned judge's; cover reads no model
    model = "" if grader == "cover" else (
        card.get("model", "") + (f", veto lift {card['lift_model']}" if card.get("lift_model") else ""))
    return {**card["graders"][grader], "scheme": card.get("scheme", ""), "model": model}


def shape_of(answer: str) -> str:
    n = len((answer or "").split())
    return next(name for name, lo, hi in SHAPES if lo <= n <= hi)


def _rates(entry: dict) -> JudgeRates:
    return JudgeRates(int(entry["tp"]), int(entry["fp"]), int(entry["fn"]), int(entry["tn"]))


def assumption(card: dict) -> tuple[bool, str]:
    """(holds, why): the rates are the same across answering systems within every shape."""
    bad = [f"{shape} {rate.removesuffix('_p')} (p = {card[shape][rate]:.3g})" for shape, _, _ in SHAPES
           for rate in ("sensitivity_p", "specificity_p")
           if isinstance(card[shape].get(rate), (int, float)) and card[shape][rate] < ASSUMPTION_P]
    if bad:
        return False, ("the judge's error rates differ across EVOUNA's answering systems: " + ", ".join(bad)
                       + "; a correction would assume they do not")
    return True, "the judge's error rates are the same across EVOUNA's answering systems within each shape"


def corrected_accuracy(answers: Sequence[str], correct: Sequence[int], grader: str, seed: int = 0,
                       path: str | Path | None = None) -> dict:
    """The judge-corrected accuracy of one row (the greedy answers and their 0/1 labels), or, where the card's
    assumption fails, ``corrected`` None and ``why``. Raises :class:`CardError` for a grader without a card."""
    card = grader_card(grader, path)
    holds, why = assumption(card)
    observed = sum(correct) / len(correct) if correct else math.nan
    if not holds:
        return {"observed": observed, "corrected": None, "ci": None, "why": why, "n": len(correct)}
    strata = {name: ([], _rates(card[name])) for name, _, _ in SHAPES}
    for a, y in zip(answers, correct, strict=True):
        strata[shape_of(a)][0].append(int(y))
    out = stratified_corrected_accuracy({k: v for k, v in strata.items() if v[0]}, seed=seed)
    return {**out, "why": why}


def corrected_calibration(answers: Sequence[str], correct: Sequence[int], conf: Sequence[float], grader: str,
                          n_bins: int = 15, path: str | Path | None = None) -> dict:
    """The row's reliability table and ECE with the judge's errors corrected bin by bin, per answer shape
    (:func:`semcal_eval.core.label_noise.stratified_corrected_reliability`; ``n_bins`` equal-width, the headline
    ECE's 15), or ``corrected_ece`` None and ``why`` where the card's assumption fails."""
    card = grader_card(grader, path)
    holds, why = assumption(card)
    if not holds:
        return {"corrected_ece": None, "why": why}
    rates = {name: _rates(card[name]) for name, _, _ in SHAPES}
    out = stratified_corrected_reliability(conf, correct, [shape_of(a) for a in answers], rates, n_bins)
    return {**out, "why": why}


#: the figures of each stratum a results file's card carries (the whole table stays in card.json)
RESULTS_FIELDS = ("n", "agreement", "agreement_ci", "kappa", "kappa_ci", "fpr", "fnr")


def results_card(grader: str, path: str | Path | None = None) -> dict:
    """The card as a JSON object for a results file (QA tasks put it in lm-eval's ``results_*.json``, under
    ``configs[task].judge_card``): the grader, its models, the scheme and data it was measured by, and per
    stratum (``all``, ``short``, ``sentence``) :data:`RESULTS_FIELDS`, with whether the correction's assumption
    holds. A grader without a card gets ``{"grader", "card": None, "why"}`` (no figure is made up)."""
    try:
        card = grader_card(grader, path)
    except CardError as e:
        return {"grader": grader, "card": None, "why": str(e)}
    meta = load_card(path)
    holds, why = assumption(card)
    return {"grader": grader, "model": card["model"] or None, "scheme": card["scheme"],
            "data_sha256": meta.get("data_sha256"), "generated_by": meta.get("generated_by"),
            "source": "semcal_eval/qa/judge_weights/card.json",
            **{s: {k: card[s][k] for k in RESULTS_FIELDS} for s in ("all", *(name for name, _, _ in SHAPES))},
            "correction_assumption": {"holds": holds, "why": why}}


def card_lines(grader: str, answers: Sequence[str] | None = None, correct: Sequence[int] | None = None,
               path: str | Path | None = None) -> list[str]:
    """The card as Markdown lines (and, given a row's answers and labels, its corrected accuracy)."""
    card = grader_card(grader, path)
    a = card["all"]
    lines = [f"Judge `{grader}`{' (' + card['model'] + ')' if card.get('model') else ''}: "
             f"agrees with people on {a['agreement']:.3f} [{a['agreement_ci'][0]:.3f}, {a['agreement_ci'][1]:.3f}] "
             f"of EVOUNA's answers from systems it was not fit on (kappa {a['kappa']:.2f}); false-positive rate "
             f"{a['fpr']:.3f}, false-negative rate {a['fnr']:.3f}; short answers {card['short']['agreement']:.3f}, "
             f"sentences {card['sentence']['agreement']:.3f}."]
    if answers is not None and correct is not None and len(correct):
        c = corrected_accuracy(answers, correct, grader, path=path)
        if c["corrected"] is None:
            lines.append(f"Accuracy corrected for the judge's errors: not printed ({c['why']}).")
        else:
            lines.append(f"Accuracy corrected for the judge's errors: {c['corrected']:.3f} [{c['ci'][0]:.3f}, "
                         f"{c['ci'][1]:.3f}] (observed {c['observed']:.3f}; Rogan–Gladen per answer shape).")
    return lines


#: the keys :func:`board_fields` may set, in the board's export order
BOARD_FIELDS = ("judge", "judge_agreement", "judge_kappa", "judge_fpr", "judge_fnr", "acc_corrected",
                "acc_corrected_ci_lo", "acc_corrected_ci_hi", "ece_corrected", "judge_note")


def board_fields(items: Sequence[dict]) -> dict:
    """A QA row's judge card for the board and results files, from its records (``grader``, ``greedy``,
    ``correct``, ``conf``): ``judge`` (the grader's name and version) and, where the card has it, its agreement,
    kappa, false-positive and false-negative rates with people, and the accuracy (``acc_corrected`` with
    ``_ci_lo``/``_ci_hi``) and 15-bin ECE (``ece_corrected``) corrected for its errors; ``judge_note`` says why a
    corrected figure is missing. {} for records without a grader (runs before the card)."""
    graded = [it for it in items if isinstance(it, dict) and "grader" in it and "greedy" in it]
    if not graded:
        return {}
    graders = sorted({str(it["grader"]) for it in graded})
    if len(graders) != 1 or len(graded) != len(items):
        return {"judge": ", ".join(graders), "judge_note": "records name several graders (or some none): no card"}
    out: dict = {"judge": graders[0]}
    try:
        card = grader_card(graders[0])
    except CardError as e:
        return {**out, "judge_note": str(e)}
    a = card["all"]
    out.update(judge_agreement=a["agreement"], judge_kappa=a["kappa"], judge_fpr=a["fpr"], judge_fnr=a["fnr"])
    answers = [it["greedy"] for it in graded]
    correct = [int(it["correct"]) for it in graded]
    acc = corrected_accuracy(answers, correct, graders[0])
    if acc["corrected"] is None:
        return {**out, "judge_note": acc["why"]}
    out.update(acc_corrected=acc["corrected"], acc_corrected_ci_lo=acc["ci"][0], acc_corrected_ci_hi=acc["ci"][1])
    if all("conf" in it for it in graded):
        out["ece_corrected"] = corrected_calibration(answers, correct, [float(it["conf"]) for it in graded],
                                                     graders[0])["corrected_ece"]
    return out
