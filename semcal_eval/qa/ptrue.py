"""P(True) (Kadavath et al. 2022, "Language Models (Mostly) Know What They Know", §3.2 with brainstormed
samples): one extra scoring pass asking the model whether its greedy answer is true, with the K samples shown
as brainstormed alternatives.

    P(True) = p(" A") / (p(" A") + p(" B"))   at the position after the prompt of :func:`ptrue_prompt`

(the two answer options' next-token probabilities renormalised, so the score is a probability).

``style="polygraph"`` is lm-polygraph's ``PTrue`` instead: its prompt (:func:`ptrue_prompt_polygraph`, the
question slot holding the whole task prompt, few-shot examples included, and no samples) and the score
p("True") = softmax(z)["True"], the next-token probability of the word "True" over the whole vocabulary, not
renormalised against "False" (so not a probability of correctness; ranked only). Off by
default in the QA tasks (one forward pass of the prompt, ~K+3 answers long, per question). The model is loaded
lazily from a ``semcal:NAME`` or a path; it should be the evaluated model (self-evaluation).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["PTRUE_STYLES", "ptrue_prompt", "ptrue_prompt_polygraph", "ptrue_from_logits", "PTrue"]

#: ``semcal``: Kadavath et al.'s prompt with the samples as ideas, p(A)/(p(A)+p(B)); ``polygraph``: lm-polygraph's
#: prompt and unnormalised p("True")
PTRUE_STYLES = ("semcal", "polygraph")


def ptrue_prompt(question: str, greedy: str, samples: Sequence[str]) -> str:
    """Kadavath et al.'s self-evaluation prompt with the samples as brainstormed ideas (distinct, in order)."""
    ideas = list(dict.fromkeys(s.strip() for s in samples if s and s.strip()))
    lines = [f"Question: {question.strip()}", "Here are some brainstormed ideas:", *ideas,
             f"Possible answer: {greedy.strip()}", "Is the possible answer:", " (A) True", " (B) False",
             "The possible answer is: ("]
    return "\n".join(lines)


def ptrue_prompt_polygraph(question: str, greedy: str) -> str:
    """lm-polygraph's ``PTrue`` prompt (its ``PromptCalculator``): ``question`` is the text the model was given
    (the task prompt), the answer follows "Possible answer:" with no space, every later line starts with a space,
    and the prompt ends after "is:".

    >>> ptrue_prompt_polygraph("Q: 2+2?\\nA:", "4").splitlines()[-1]
    ' The possible answer is:'
    """
    return (f"Question: {question}\n Possible answer:{greedy}\n Is the possible answer:\n (A) True\n (B) False\n"
            " The possible answer is:")


def ptrue_from_logits(logit_true: float, logit_false: float) -> float:
    """P(True) = σ(z_A − z_B), the two option tokens' probabilities renormalised.

    >>> ptrue_from_logits(0.0, 0.0)
    0.5
    """
    d = float(logit_true) - float(logit_false)
    return 1.0 / (1.0 + math.exp(-d)) if d > -700 else 0.0


class PTrue:
    """Scores P(True) with a causal LM (``model``: a ``semcal:NAME``, a path, or a loaded model with
    ``tokenizer``)."""

    def __init__(self, model: Any = "semcal:smollm2-135m", tokenizer: Any = None, style: str = "semcal"):
        if style not in PTRUE_STYLES:
            raise ValueError(f"PTrue: style={style!r} must be one of {PTRUE_STYLES}")
        self.style = style
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if isinstance(model, str):
            from semcal_eval.models import resolve_pretrained

            path = resolve_pretrained(model)
            self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(path)
            self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        else:
            if tokenizer is None:
                raise ValueError("PTrue: a loaded model needs its tokenizer")
            self.model, self.tokenizer = model, tokenizer
        ids = [self.tokenizer.encode(t, add_special_tokens=False) for t in ("A", "B")]
        if any(len(i) != 1 for i in ids):
            raise ValueError(f"PTrue: the tokenizer splits the option letters ({ids}); need one token each")
        self.ids = (ids[0][0], ids[1][0])
        # polygraph tokenises "True" as the tokenizer does (special tokens dropped) and needs one token
        true_ids = self.tokenizer.encode("True", add_special_tokens=False)
        if len(true_ids) != 1:
            raise ValueError(f"PTrue: the tokenizer splits 'True' ({true_ids}); polygraph's P(True) needs one token")
        self.true_id = true_ids[0]

    def score(self, question: str, greedy: str, samples: Sequence[str]) -> float:
        """P(True) of one greedy answer (see the module docstring); ``samples`` are unused by the polygraph style."""
        import torch

        polygraph = self.style == "polygraph"
        prompt = ptrue_prompt_polygraph(question, greedy) if polygraph else ptrue_prompt(question, greedy, samples)
        enc = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
        with torch.inference_mode():
            z = self.model(**{k: v.to(self.model.device) for k, v in enc.items()}).logits[0, -1].float()
        if polygraph:
            return float(torch.softmax(z, dim=-1)[self.true_id].item())
        return ptrue_from_logits(z[self.ids[0]].item(), z[self.ids[1]].item())
