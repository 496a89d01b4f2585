"""``warmup_sft``: a short supervised warm-up that teaches RLCR and RD their output format before GRPO.

A base model such as SmolLM2-135M never writes RLCR's four tags or RD's ``Answer: …, Confidence: …`` line by
itself, so every confidence is the fallback and the calibration reward has nothing to act on (issue 22). The
RLCR paper starts from a model that already follows the format; this stage builds that model from the training
questions themselves:

* the answer: the base model's greedy answer to the QA tasks' own short-answer prompt (what it would say);
* the base model's signal: the share of K sampled answers (same prompt, temperature 1) that agree with the
  greedy one under the reward's agreement judge (:func:`agreement_targets`) — its own consistency;
* the confidence target: that share passed through a calibration map of agreement → correctness fitted on the
  warm-up questions (:func:`calibrated_targets`: Platt scaling; correctness by the rewards' grader). Where the
  agreement carries signal the target keeps its spread; where it carries none (a 135M model whose samples
  almost never agree) the map is flat at the base rate, the calibrated answer, instead of the raw share's 0
  that taught the protocol's RLCR and RD models to say "confidence 0" on every question (issue 31). The labels
  enter only through this monotone map of the model's own signal, so the format lesson cannot teach a ranking
  the model does not have, only the level and scale of its confidence;
* the target in the method's format: RLCR ``<think>…</think><answer>a</answer><analysis>…</analysis>
  <confidence>c</confidence>`` with c to two decimals; RD ``Answer: a, Confidence: n``, n = round(10·c) (RD's
  format has eleven levels: a base rate under 0.05 is taught as 0, honestly).

:func:`target_report` states what was taught (spread: std and distinct values; ECE of the taught confidence
against the greedy answer's correctness); :func:`run_warmup` prints it and keeps it on the model.

Then ``warmup_sft.steps`` steps of TRL's :class:`trl.SFTTrainer` on (method prompt, target) pairs, loss on the
completion only; GRPO starts from the result. Pure target construction (:func:`format_target`,
:func:`calibrated_targets`, :func:`target_report`) is separate from the model code.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from semcal_eval.core import recalibration
from trainers import rewards as R
from trainers.config import TrainConfig

__all__ = ["WARMUP_METHODS", "format_target", "taught_confidence", "agreement_targets", "calibrated_targets",
           "target_report", "build_warmup_dataset", "run_warmup"]

WARMUP_METHODS = ("rlcr", "rd")
#: the calibration map of the warm-up target (Platt: logistic regression of correctness on the agreement share)
TARGET_MAP = "platt"


def taught_confidence(method: str, confidence: float) -> float:
    """The confidence ``method``'s warm-up target actually states for ``confidence`` (RD: c/10 with c the
    nearest of 0..10; RLCR: two decimals).

    >>> taught_confidence("rd", 0.04), taught_confidence("rd", 0.06), taught_confidence("rlcr", 0.0449)
    (0.0, 0.1, 0.04)
    """
    if method == "rd":
        return int(round(10 * confidence + 1e-9)) / 10
    if method == "rlcr":
        return round(confidence + 1e-12, 2)
    raise ValueError(f"warmup_sft supports the methods {', '.join(WARMUP_METHODS)}, not {method!r}")


def format_target(method: str, answer: str, confidence: float, agree: int | None = None, k: int | None = None) -> str:
    """The warm-up completion of one question in ``method``'s format.

    >>> format_target("rd", "Paris", 0.74)
    'Answer: Paris, Confidence: 7'
    >>> format_target("rlcr", "Paris", 0.75, 3, 4)
    '<think>The answer is Paris.</think><answer>Paris</answer><analysis>3 of 4 of my sampled answers agree with it.</analysis><confidence>0.75</confidence>'
    """
    if not 0.0 <= confidence <= 1.0:
        raise ValueError(f"confidence must lie in [0, 1], got {confidence}")
    answer = " ".join(str(answer).split()) or "unknown"
    if method == "rd":
        return f"Answer: {answer}, Confidence: {int(round(10 * taught_confidence('rd', confidence)))}"
    if method == "rlcr":
        why = f"{agree} of {k} of my sampled answers agree with it." if k else "I am not sure."
        c = f"{taught_confidence('rlcr', confidence):.2f}"
        return (f"<think>The answer is {answer}.</think><answer>{answer}</answer>"
                f"<analysis>{why}</analysis><confidence>{c}</confidence>")
    raise ValueError(f"warmup_sft supports the methods {', '.join(WARMUP_METHODS)}, not {method!r}")


def agreement_targets(question: str, golds: list[str], greedy: str, samples: list[str], judge: Any = None,
                      judge_kwargs: dict | None = None) -> tuple[int, int]:
    """(number of samples that agree with the greedy answer, K) under the reward's agreement judge (default
    :data:`trainers.rewards.DEFAULT_JUDGE`) on the answers the rewards read (:func:`trainers.rewards.extract_answer`).
    An empty greedy answer agrees with nothing. ``golds`` is unused (agreement never looks at the gold)."""
    from semcal_eval import qa

    answers = [R.extract_answer(greedy)] + [R.extract_answer(s) for s in samples]
    if not answers[0].strip():
        return 0, len(samples)
    A = qa.agreement_matrix(question, answers, R.agreement_judge(judge, judge_kwargs))
    return int(A[0, 1:].sum()), len(samples)


def calibrated_targets(agreement: Any, correct: Any, method: str = TARGET_MAP) -> np.ndarray:
    """P(correct | agreement share) for each warm-up question: a monotone map of agreement → correctness fitted
    on these questions, the one definition of each map (:mod:`semcal_eval.core.recalibration`): ``"platt"``
    (default): :func:`~semcal_eval.core.recalibration.fit_platt`, logistic regression of correctness on
    logit(share) (share clipped to [1e-3, 1 − 1e-3], effectively unregularised; without signal the map is flat at
    the base rate); ``"isotonic"``: :func:`~semcal_eval.core.recalibration.fit_isotonic`. Both are monotone, so
    the order of the questions is the model's own agreement order — the labels set only level and scale. With
    one class among the labels the target is the base rate (never the raw share).

    >>> calibrated_targets([0.0, 0.0, 0.25, 0.0], [0, 0, 0, 0]).tolist()
    [0.0, 0.0, 0.0, 0.0]
    >>> calibrated_targets([0.0] * 8, [1, 0, 0, 0, 0, 0, 0, 0]).round(3).tolist()  # no signal: the base rate
    [0.125, 0.125, 0.125, 0.125, 0.125, 0.125, 0.125, 0.125]
    """
    x = np.asarray(agreement, dtype=float)
    y = np.asarray(correct, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or not len(x):
        raise ValueError(f"calibrated_targets needs one agreement share and one 0/1 label per question, got "
                         f"{x.shape} and {y.shape}")
    if method not in recalibration.POSTHOC_METHODS:
        raise ValueError(f"calibrated_targets: method={method!r} must be 'platt' or 'isotonic'")
    return recalibration.fit_posthoc(method, x, y).apply(x)


def target_report(confidence: Any, correct: Any) -> dict:
    """How much a confidence target can teach: ``n``, ``base_rate`` (share correct), ``mean``, ``std`` and
    ``distinct`` (number of distinct values, to 1e-9) of the confidence, and ``ece`` (10 equal-width bins)
    of the confidence against correctness.

    >>> r = target_report([0.0, 0.0, 0.0, 0.0], [1, 0, 0, 0])
    >>> (r["base_rate"], r["std"], r["distinct"], r["ece"])
    (0.25, 0.0, 1, 0.25)
    """
    from semcal_eval.core.metrics import calibration_error

    c = np.asarray(confidence, dtype=float)
    y = np.asarray(correct, dtype=float)
    if c.shape != y.shape or c.ndim != 1 or not len(c):
        raise ValueError(f"target_report needs one confidence and one 0/1 label per question, got {c.shape} and {y.shape}")
    return {"n": int(len(c)), "base_rate": float(y.mean()), "mean": float(c.mean()), "std": float(c.std()),
            "distinct": int(len(np.unique(np.round(c, 9)))), "ece": calibration_error(y_true=y, y_prob=c, n_bins=10)}


def _describe(name: str, r: dict) -> str:
    return (f"{name}: mean {r['mean']:.3f}, std {r['std']:.3f}, {r['distinct']} distinct, ECE {r['ece']:.3f} "
            f"(base rate {r['base_rate']:.3f}, n = {r['n']})")


def _generate(model, tok, prompts: list[str], n: int, sample: bool, max_new_tokens: int, batch: int = 16):
    import torch

    out: list[list[str]] = []
    tok.padding_side = "left"
    for s in range(0, len(prompts), batch):
        chunk = prompts[s : s + batch]
        enc = tok(chunk, return_tensors="pt", padding=True)
        with torch.no_grad():
            gen = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=sample, temperature=1.0 if sample else None,
                                 top_p=None, top_k=0 if sample else None, num_return_sequences=n,
                                 pad_token_id=tok.pad_token_id)
        texts = tok.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        out += [texts[i * n : (i + 1) * n] for i in range(len(chunk))]
    return out


def build_warmup_dataset(cfg: TrainConfig, model, tok, questions: list[str], golds: list[list[str]],
                         report: dict | None = None):
    """(prompt, completion) pairs for the warm-up, from the base model's own greedy answers and its agreement
    confidence through the calibration map (:func:`calibrated_targets`). ``report`` (a dict), when given, gets
    the :func:`target_report` of the raw agreement share (``agreement``) and of the taught target (``target``),
    and the per-question ``rows`` (answer, agree, K, correct, target)."""
    from datasets import Dataset

    from trainers.data import make_prompt

    w = cfg.warmup_sft
    method = cfg.method
    k = w.num_samples
    qa_prompts = [make_prompt(q, "csr") for q in questions]  # the short-answer prompt: what the model would say
    greedy = [g[0] for g in _generate(model, tok, qa_prompts, 1, False, w.max_answer_tokens)]
    samples = _generate(model, tok, qa_prompts, k, True, w.max_answer_tokens)
    answers = [R.extract_answer(g) for g in greedy]
    agree = [agreement_targets(q, g, gr, sm, cfg.reward.judge, cfg.reward.judge_kwargs)
             for q, g, gr, sm in zip(questions, golds, greedy, samples, strict=True)]
    share = [a / kk if kk else 0.0 for a, kk in agree]
    correct = R.correctness(questions, answers, golds)
    target = calibrated_targets(share, correct)
    taught = [taught_confidence(method, float(t)) for t in target]
    rows = {"prompt": [make_prompt(q, method) for q in questions],
            "completion": [format_target(method, a, float(t), ag, kk)
                           for a, t, (ag, kk) in zip(answers, target, agree, strict=True)]}
    if report is not None:
        report["agreement"] = target_report(share, correct)
        report["target"] = target_report(taught, correct)
        report["map"] = TARGET_MAP
        report["rows"] = [{"answer": a, "agree": ag, "k": kk, "correct": int(c), "target": float(t)}
                          for a, (ag, kk), c, t in zip(answers, agree, correct, taught, strict=True)]
    return Dataset.from_dict(rows)


def run_warmup(cfg: TrainConfig, model, tok, train_dataset) -> Any:
    """Warm up ``model`` in place with TRL's SFTTrainer on ``warmup_sft.limit`` training questions; return it."""
    from trl import SFTConfig, SFTTrainer

    w = cfg.warmup_sft
    n = w.limit or len(train_dataset)
    sub = train_dataset.select(range(min(n, len(train_dataset))))
    report: dict = {}
    data = build_warmup_dataset(cfg, model, tok, list(sub["question"]), [list(a) for a in sub["answers"]], report)
    print(f"[warmup_sft] {cfg.method} confidence targets on {len(data)} questions, agreement of "
          f"{w.num_samples} samples through a {report['map']} map:\n  "
          + _describe("raw agreement share", report["agreement"]) + "\n  "
          + _describe("taught target", report["target"]), flush=True)
    g = cfg.grpo
    args = SFTConfig(output_dir=f"{cfg.output_dir}/warmup_sft", max_steps=w.steps,
                     learning_rate=w.learning_rate, per_device_train_batch_size=w.batch_size,
                     logging_steps=1, save_strategy="no", report_to="none", use_cpu=bool(g.get("use_cpu")),
                     bf16=bool(g.get("bf16")), seed=cfg.seed, completion_only_loss=True,
                     max_length=1024, activation_checkpointing=False)
    tok.padding_side = "right"
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tok)
    trainer.train()
    model = trainer.model
    model._semcal_warmup = {"n": len(data), "targets": list(data["completion"][:5]),
                            "loss": [r["loss"] for r in trainer.state.log_history if "loss" in r],
                            "target_report": {k: report[k] for k in ("map", "agreement", "target")}}
    return model
