"""``warmup_sft``: a short supervised warm-up that teaches RLCR and RD their output format before GRPO.

A base model such as SmolLM2-135M never writes RLCR's four tags or RD's ``Answer: …, Confidence: …`` line by
itself, so every confidence is the fallback and the calibration reward has nothing to act on (issue 22). The
RLCR paper starts from a model that already follows the format; this stage builds that model from the training
questions themselves:

* the answer: the base model's greedy answer to the QA tasks' own short-answer prompt (what it would say);
* the confidence: the share of K sampled answers (same prompt, temperature 1) that agree with the greedy one
  under the reward's judge and short-answer matching — the agreement confidence the QA tasks measure, i.e.
  the model's own consistency, not the gold (a target built from correctness would leak the labels into the
  format lesson and make warm-up, not GRPO, do the calibration);
* the target in the method's format: RLCR ``<think>…</think><answer>a</answer><analysis>…</analysis>
  <confidence>c</confidence>`` with c the share to one decimal; RD ``Answer: a, Confidence: n``, n = round(10·c).

Then ``warmup_sft.steps`` steps of TRL's :class:`trl.SFTTrainer` on (method prompt, target) pairs, loss on the
completion only; GRPO starts from the result. Pure target construction (:func:`format_target`) is separate from
the model code.
"""

from __future__ import annotations

from typing import Any

from trainers import rewards as R

__all__ = ["WARMUP_METHODS", "format_target", "agreement_targets", "build_warmup_dataset", "run_warmup"]

WARMUP_METHODS = ("rlcr", "rd")


def format_target(method: str, answer: str, confidence: float, agree: int | None = None, k: int | None = None) -> str:
    """The warm-up completion of one question in ``method``'s format.

    >>> format_target("rd", "Paris", 0.74)
    'Answer: Paris, Confidence: 7'
    >>> format_target("rlcr", "Paris", 0.75, 3, 4)
    '<think>The answer is Paris.</think><answer>Paris</answer><analysis>3 of 4 of my sampled answers agree with it.</analysis><confidence>0.8</confidence>'
    """
    if not 0.0 <= confidence <= 1.0:
        raise ValueError(f"confidence must lie in [0, 1], got {confidence}")
    answer = " ".join(str(answer).split()) or "unknown"
    if method == "rd":
        return f"Answer: {answer}, Confidence: {int(round(10 * confidence + 1e-9))}"
    if method == "rlcr":
        why = f"{agree} of {k} of my sampled answers agree with it." if k else "I am not sure."
        c = f"{round(confidence + 1e-9, 1):.1f}"
        return (f"<think>The answer is {answer}.</think><answer>{answer}</answer>"
                f"<analysis>{why}</analysis><confidence>{c}</confidence>")
    raise ValueError(f"warmup_sft supports the methods {', '.join(WARMUP_METHODS)}, not {method!r}")


def agreement_targets(question: str, golds: list[str], greedy: str, samples: list[str], judge: Any = "f1",
                      match: str = R.DEFAULT_MATCH) -> tuple[int, int]:
    """(number of samples that agree with the greedy answer, K) under the reward's judge and matching."""
    from semcal_eval import qa

    answers = [R.extract_answer(greedy)] + [R.extract_answer(s) for s in samples]
    judged = R.judged_answers(answers, [question] * len(answers), [golds] * len(answers), match)
    if not judged[0].strip():
        return 0, len(samples)
    A = qa.agreement_matrix(question, judged, R._judge(judge))
    return int(A[0, 1:].sum()), len(samples)


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


def build_warmup_dataset(cfg: dict, model, tok, questions: list[str], golds: list[list[str]]):
    """(prompt, completion) pairs for the warm-up, from the base model's own greedy answers and agreement."""
    from datasets import Dataset

    from trainers.data import make_prompt

    w = cfg["warmup_sft"]
    k = int(w["num_samples"])
    qa_prompts = [make_prompt(q, "csr") for q in questions]  # the short-answer prompt: what the model would say
    greedy = [g[0] for g in _generate(model, tok, qa_prompts, 1, False, int(w["max_answer_tokens"]))]
    samples = _generate(model, tok, qa_prompts, k, True, int(w["max_answer_tokens"]))
    rows = {"prompt": [], "completion": []}
    for q, g, gr, sm in zip(questions, golds, greedy, samples, strict=True):
        agree, kk = agreement_targets(q, g, gr, sm, cfg["reward"]["judge"], cfg["reward"].get("match", R.DEFAULT_MATCH))
        rows["prompt"].append(make_prompt(q, cfg["method"]))
        rows["completion"].append(format_target(cfg["method"], R.extract_answer(gr), agree / kk, agree, kk))
    return Dataset.from_dict(rows)


def run_warmup(cfg: dict, model, tok, train_dataset) -> Any:
    """Warm up ``model`` in place with TRL's SFTTrainer on ``warmup_sft.limit`` training questions; return it."""
    from trl import SFTConfig, SFTTrainer

    w = cfg["warmup_sft"]
    n = int(w["limit"]) if w.get("limit") else len(train_dataset)
    sub = train_dataset.select(range(min(n, len(train_dataset))))
    data = build_warmup_dataset(cfg, model, tok, list(sub["question"]), [list(a) for a in sub["answers"]])
    g = cfg["grpo"]
    args = SFTConfig(output_dir=f"{cfg['output_dir']}/warmup_sft", max_steps=int(w["steps"]),
                     learning_rate=float(w["learning_rate"]), per_device_train_batch_size=int(w["batch_size"]),
                     logging_steps=1, save_strategy="no", report_to="none", use_cpu=bool(g.get("use_cpu")),
                     bf16=bool(g.get("bf16")), seed=int(cfg["seed"]), completion_only_loss=True,
                     max_length=1024, activation_checkpointing=False)
    tok.padding_side = "right"
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tok)
    trainer.train()
    model = trainer.model
    model._semcal_warmup = {"n": len(data), "targets": list(data["completion"][:5]),
                            "loss": [r["loss"] for r in trainer.state.log_history if "loss" in r]}
    return model
