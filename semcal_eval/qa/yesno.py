"""A causal LM read as a yes/no rater: one forward pass per prompt, the answer read at the next token.

    logodds(prompt) = log Σ_{t∈YES} P(t | prompt) − log Σ_{t∈NO} P(t | prompt)

where YES / NO are the first tokens of "yes", " yes", "Yes", " Yes", "YES" (resp. no). Nothing is generated, so a
rating costs one forward pass with ``logits_to_keep=1`` (the lm_head is applied at the last position only), and
prompts are batched with left padding in length order (similar lengths share a batch: less padding).

Shared by the pairwise :class:`semcal_eval.qa.judges.LLMJudge` and the learned judge's model features
(:mod:`semcal_eval.qa.learned`). The model is a name (``semcal:NAME`` from the offline catalogue, a local folder,
a hub id) or a loaded ``PreTrainedModel`` with its tokenizer; the chat template is used when the tokenizer has one
(instruct models), else the plain prompt followed by "Answer:".
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["YesNoLM", "YesNoLoadError", "YES_WORDS", "NO_WORDS"]

YES_WORDS = ("yes", " yes", "Yes", " Yes", "YES")
NO_WORDS = ("no", " no", "No", " No", "NO")


class YesNoLoadError(RuntimeError):
    """The rater's model could not be loaded (the message names the model and the fix)."""


def resolve(name: str) -> str:
    """``semcal:NAME`` → the catalogue's cached folder (:func:`semcal_eval.models.resolve_pretrained`, which says
    which install command fixes a missing model); anything else unchanged."""
    if isinstance(name, str) and name.startswith("semcal:"):
        from semcal_eval.models import resolve_pretrained

        return resolve_pretrained(name)
    return name


def device_or_default(device: str | None) -> str:
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class YesNoLM:
    """Yes-vs-no log-odds of a causal LM at the next token (module docstring).

    ``messages`` are (system, user) pairs; ``system`` may be empty. ``max_prompt_tokens`` bounds one prompt's
    length (a longer one keeps its head and tail: the question and the closing instruction stay in view).
    """

    def __init__(self, model: Any, tokenizer: Any = None, batch_size: int = 8, device: str | None = None,
                 use_chat_template: bool | None = None, max_prompt_tokens: int = 1024):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.batch_size, self.max_prompt_tokens = int(batch_size), int(max_prompt_tokens)
        if self.batch_size < 1 or self.max_prompt_tokens < 16:
            raise ValueError("YesNoLM: batch_size must be ≥ 1 and max_prompt_tokens ≥ 16")
        if isinstance(model, str):
            self.model_name = model
            try:
                path = resolve(model)
                self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(path)
                self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
            except Exception as e:  # noqa: BLE001 - re-raised with the model name and the fix
                raise YesNoLoadError(
                    f"yes/no rater: could not load model {model!r} ({type(e).__name__}: {e}). Pass a local "
                    "causal-LM folder, a reachable hub id, or a catalogue name such as semcal:smollm2-135m or "
                    "semcal:qwen2.5-coder-0.5b "
                    "(install it with `semcal-eval models install NAME`)."
                ) from e
            self.model.to(device_or_default(device))
        else:
            if tokenizer is None:
                raise ValueError("YesNoLM(model=<loaded model>) also needs tokenizer=<its tokenizer>")
            self.model, self.tokenizer = model, tokenizer
            self.model_name = getattr(getattr(model, "config", None), "_name_or_path", type(model).__name__)
        self.model.eval()
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.use_chat_template = (bool(getattr(self.tokenizer, "chat_template", None))
                                  if use_chat_template is None else bool(use_chat_template))
        self.yes_ids = self._first_ids(YES_WORDS)
        self.no_ids = self._first_ids(NO_WORDS)
        if set(self.yes_ids) & set(self.no_ids):
            raise ValueError(f"yes/no rater: the tokenizer of {self.model_name!r} maps yes and no to a shared "
                             "first token")

    def _first_ids(self, words: Sequence[str]) -> list[int]:
        return sorted({self.tokenizer.encode(w, add_special_tokens=False)[0] for w in words})

    def render(self, system: str, user: str) -> str:
        """The prompt text the model reads for one (system, user) message."""
        if self.use_chat_template:
            msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
            return self.tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        return (system + "\n\n" if system else "") + user + "\nAnswer:"

    def _ids(self, text: str) -> list[int]:
        ids = self.tokenizer(text, add_special_tokens=not self.use_chat_template)["input_ids"]
        n = self.max_prompt_tokens
        if len(ids) > n:  # keep the head (instructions, question) and the tail (the question put to the model)
            ids = ids[: n // 2] + ids[len(ids) - (n - n // 2):]
        return ids

    def logodds(self, messages: Sequence[tuple[str, str]]) -> list[float]:
        """log P(yes) − log P(no) at the next token for each (system, user) message, in input order."""
        import torch

        encoded = [self._ids(self.render(s, u)) for s, u in messages]
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        dev = next(self.model.parameters()).device
        yes, no = torch.tensor(self.yes_ids, device=dev), torch.tensor(self.no_ids, device=dev)
        pad = self.tokenizer.pad_token_id
        out = [0.0] * len(encoded)
        for s in range(0, len(order), self.batch_size):
            idx = order[s:s + self.batch_size]
            width = max(len(encoded[i]) for i in idx)
            ids = torch.full((len(idx), width), pad, dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for r, i in enumerate(idx):  # left padding: the next token is read at the last column of every row
                ids[r, width - len(encoded[i]):] = torch.tensor(encoded[i])
                mask[r, width - len(encoded[i]):] = 1
            # positions counted from each row's first real token, so a score does not depend on its batch
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            with torch.inference_mode():
                logits = self.model(input_ids=ids.to(dev), attention_mask=mask.to(dev), position_ids=pos.to(dev),
                                    logits_to_keep=1).logits[:, -1, :].float()
            logp = torch.log_softmax(logits, -1)
            lo = (torch.logsumexp(logp[:, yes], -1) - torch.logsumexp(logp[:, no], -1)).tolist()
            for r, i in enumerate(idx):
                out[i] = float(lo[r])
        return out
