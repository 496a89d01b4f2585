"""Shared-prefix sampling for the QA tasks: one prefill per question, the greedy answer and the K samples
decoded from its KV cache. Design and measurements: docs/SAMPLING.md.

A QA question (:class:`semcal_eval.qa.task.QATask`) sends one greedy ``generate_until`` instance and one
sampled instance with ``repeats=K``; lm-eval 0.4.13 hands the backend that second ``Instance`` object K times
in a row (``evaluator.py``: ``cloned_reqs.extend([req] * req.repeats)``). Stock HFLM encodes the ~110-token
prompt K + 1 times. Here the prompt is encoded once, its :class:`~transformers.DynamicCache` is repeated to
K + 1 rows (row 0 greedy, rows 1..K sampled) and rows are dropped from the batch (and the cache) as they
finish, so a finished row costs nothing more.

Two layers:

* :func:`generate_from_prefix` — the decoding loop, plain torch + transformers' public API (model forward
  with a cache, ``DynamicCache.batch_repeat_interleave`` / ``batch_select_indices``, and the
  public logits warpers in the order ``generate()`` applies them). No lm-eval import.
* :class:`SharedPrefixMixin` — the lm-eval glue: an ``HFLM.generate_until`` override that finds the QA groups
  (:func:`find_qa_groups`), decodes them with :func:`generate_from_prefix`, post-processes exactly as HFLM
  (``tok_decode`` then ``postprocess_generated_text``: cut at the first stop string) and hands every other
  request to HFLM's own ``generate_until`` unchanged. ``hf-semsoft`` mixes it in.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
from transformers import (
    DynamicCache,
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

__all__ = [
    "GENERATE_DEFAULTS",
    "RowSampling",
    "RowResult",
    "PrefixCost",
    "sampling_logprobs",
    "generate_from_prefix",
    "QAGroup",
    "find_qa_groups",
    "group_seed",
    "SharedPrefixMixin",
    "GeneratedText",
]

log = logging.getLogger(__name__)

#: transformers ``generate()``'s own defaults for the sampling keys, used when neither the request nor the
#: model's ``generation_config`` sets one (the documented ``GenerationConfig`` defaults: top_k 50!).
GENERATE_DEFAULTS = {"temperature": 1.0, "top_k": 50, "top_p": 1.0}

#: ``generation_config`` entries that do not change which token is chosen; any other non-default entry (a
#: repetition penalty, min_p, bad words, ...) sends the request to stock HFLM, which applies it.
_NEUTRAL_CONFIG_KEYS = frozenset({
    "bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id", "use_cache", "output_attentions",
    "output_hidden_states", "output_scores", "output_logits", "return_dict_in_generate", "_from_model_config",
    "transformers_version", "max_length", "max_new_tokens", "do_sample", "temperature", "top_k", "top_p",
    "cache_implementation", "num_return_sequences",
})
#: request keys (after lm-eval's ``normalize_gen_kwargs``) that this path honours; any other key → stock HFLM.
_ROW_KEYS = frozenset({"until", "max_gen_toks", "do_sample", "temperature", "top_k", "top_p"})


# ----------------------------------------------------------------------------------------------------------
# The decoding loop (no lm-eval)
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RowSampling:
    """How one row picks its tokens: greedy (argmax), or a draw from the warped distribution.

    The warpers are transformers' public ones, in the order ``generate()`` builds them: temperature (if ≠ 1),
    top-k (if ≠ 0), top-p (if < 1). ``top_k=0, top_p=1.0`` is plain multinomial sampling at ``temperature``.
    """

    do_sample: bool
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0

    def __post_init__(self):
        if self.do_sample and not self.temperature > 0:
            raise ValueError(f"RowSampling: temperature={self.temperature} must be > 0 when do_sample=True")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"RowSampling: top_p={self.top_p} must be in (0, 1]")
        if self.top_k < 0:
            raise ValueError(f"RowSampling: top_k={self.top_k} must be ≥ 0 (0 switches it off)")

    def warpers(self) -> LogitsProcessorList:
        out = LogitsProcessorList()
        if not self.do_sample:
            return out
        if self.temperature != 1.0:
            out.append(TemperatureLogitsWarper(self.temperature))
        if self.top_k != 0:
            out.append(TopKLogitsWarper(top_k=self.top_k))
        if self.top_p < 1.0:
            out.append(TopPLogitsWarper(top_p=self.top_p))
        return out


def sampling_logprobs(logits: torch.Tensor, spec: RowSampling) -> torch.Tensor:
    """Log-probabilities (…×V, float32) of the distribution ``spec`` draws from, given raw next-token logits.

    Greedy rows report the model's own distribution (no warping); the token they take is its argmax.
    """
    scores = logits.float()
    lead = scores.shape[:-1]
    flat = scores.reshape(-1, scores.shape[-1])
    flat = spec.warpers()(None, flat.clone()) if spec.do_sample else flat
    return torch.log_softmax(flat, dim=-1).reshape(*lead, -1)


@dataclass
class RowResult:
    """One decoded row: its new tokens, each token's log-probability under the row's sampling distribution
    (:func:`sampling_logprobs`), and why it stopped (``"eos"``, ``"stop"`` or ``"length"``).

    Greedy rows also log ``entropies``: the entropy H_t = −Σ_v p_t(v) ln p_t(v) of the model's full next-token
    distribution at each step (exact, over the whole vocabulary, not a top-k approximation); the mean token
    entropy estimator reads them. Sampled rows leave it empty (no estimator needs it, and it would cost K rows).
    """

    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish: str = ""
    entropies: list[float] = field(default_factory=list)


@dataclass
class PrefixCost:
    """Tokens that went through the model: ``prompt_tokens`` encoded by prefills, ``decode_rows`` fed by
    one-token decode steps (one per active row per step) and ``generated_tokens`` returned."""

    prompt_tokens: int = 0
    decode_rows: int = 0
    generated_tokens: int = 0

    def __iadd__(self, other: "PrefixCost") -> "PrefixCost":
        self.prompt_tokens += other.prompt_tokens
        self.decode_rows += other.decode_rows
        self.generated_tokens += other.generated_tokens
        return self


def _forward_signature(model) -> tuple[str, dict]:
    """The name of the forward's cache argument (``cache`` in transformers ≥ 5.2x, ``past_key_values`` before)
    and the prefill's extra kwargs: only the last position's logits where supported (``generate()`` does so)."""
    params = inspect.signature(model.forward).parameters
    name = "cache" if "cache" in params else "past_key_values"
    return name, ({"logits_to_keep": 1} if "logits_to_keep" in params else {})


@torch.no_grad()
def generate_from_prefix(
    model,
    prompt_ids: torch.Tensor,
    rows: Sequence[RowSampling],
    *,
    max_new_tokens: int,
    eos_token_ids: Sequence[int] = (),
    is_stopped: Callable[[list[int]], bool] | None = None,
    generator: torch.Generator | None = None,
    autocast_dtype: torch.dtype | None = None,
) -> tuple[list[RowResult], PrefixCost]:
    """Decode ``len(rows)`` continuations of one prompt from a single prefill.

    Args:
        model: a causal LM (``transformers`` ``PreTrainedModel``) whose forward takes a KV cache.
        prompt_ids: the prompt, shape ``(1, L)``, on the model's device.
        rows: one :class:`RowSampling` per continuation (greedy rows are argmax, sampled rows draw).
        max_new_tokens: at most this many new tokens per row (HFLM's ``max_gen_toks``).
        eos_token_ids: a row stops after producing one of these (the model's ``generation_config.eos_token_id``).
        is_stopped: ``is_stopped(tokens)`` → True once a row's new tokens contain a stop sequence.
        generator: the random stream of the sampled rows (one ``torch.multinomial`` call per step and spec).
        autocast_dtype: run the forwards under ``torch.autocast`` in this dtype (HFLM's ``mixed_precision_dtype``).

    Returns:
        ``(results, cost)``: one :class:`RowResult` per row, in ``rows`` order, and the :class:`PrefixCost`.

    The cache of the prompt is repeated to ``len(rows)`` rows after the prefill; a finished row is removed
    from the batch and from the cache (``DynamicCache.batch_select_indices``), so it costs no further compute.
    All rows of one prompt always have the same length, so no padding or attention mask is needed.
    """
    if prompt_ids.dim() != 2 or prompt_ids.shape[0] != 1:
        raise ValueError(f"generate_from_prefix: prompt_ids must have shape (1, L), got {tuple(prompt_ids.shape)}")
    if max_new_tokens < 1:
        raise ValueError(f"generate_from_prefix: max_new_tokens={max_new_tokens} must be ≥ 1")
    n = len(rows)
    results = [RowResult() for _ in range(n)]
    cost = PrefixCost(prompt_tokens=int(prompt_ids.shape[1]))
    if n == 0:
        return results, cost
    eos = set(int(t) for t in eos_token_ids)
    device = prompt_ids.device
    # the distinct specs, and which rows use each (one warp + one multinomial per spec and step)
    specs: dict[RowSampling, list[int]] = {}
    for i, r in enumerate(rows):
        specs.setdefault(r, []).append(i)

    def forward(**kw):
        with torch.autocast(device_type=device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            return model(use_cache=True, **kw)

    cache_arg, prefill_kw = _forward_signature(model)
    cache = DynamicCache(config=model.config)  # filled in place by every forward below
    out = forward(input_ids=prompt_ids, **{cache_arg: cache}, **prefill_kw)
    logits = out.logits[:, -1, :].float().expand(n, -1)
    cache.batch_repeat_interleave(n)
    active = list(range(n))  # row index of each batch entry

    for _step in range(max_new_tokens):
        pos = {row: b for b, row in enumerate(active)}
        nxt = torch.empty(len(active), dtype=torch.long, device=device)
        lp = torch.empty(len(active), dtype=torch.float32, device=device)
        for spec, members in specs.items():
            idx = [pos[r] for r in members if r in pos]
            if not idx:
                continue
            b = torch.tensor(idx, device=device)
            logp = sampling_logprobs(logits[b], spec)
            if spec.do_sample:
                tok = torch.multinomial(logp.exp(), num_samples=1, generator=generator).squeeze(1)
            else:
                tok = logits[b].argmax(dim=-1)
                # greedy rows: the entropy of the full distribution (one row × V per step, ≪ the forward)
                ent = -(logp.exp() * logp.clamp_min(torch.finfo(logp.dtype).min)).nansum(-1)
                for r, h in zip((r for r in members if r in pos), ent.tolist()):
                    results[r].entropies.append(h)
            nxt[b] = tok
            lp[b] = logp.gather(1, tok[:, None]).squeeze(1)
        keep = []
        for b, (row, t, l) in enumerate(zip(active, nxt.tolist(), lp.tolist())):
            res = results[row]
            res.tokens.append(t)
            res.logprobs.append(l)
            if t in eos:
                res.finish = "eos"
            elif is_stopped is not None and is_stopped(res.tokens):
                res.finish = "stop"
            elif len(res.tokens) >= max_new_tokens:
                res.finish = "length"
            else:
                keep.append(b)
        if not keep:
            break
        if len(keep) < len(active):
            kb = torch.tensor(keep, device=device)
            cache.batch_select_indices(kb)
            nxt = nxt[kb]
            active = [active[b] for b in keep]
        cost.decode_rows += len(active)
        logits = forward(input_ids=nxt[:, None], **{cache_arg: cache}).logits[:, -1, :].float()
    cost.generated_tokens = sum(len(r.tokens) for r in results)
    return results, cost


# ----------------------------------------------------------------------------------------------------------
# lm-eval glue
# ----------------------------------------------------------------------------------------------------------


class GeneratedText(str):
    """A generation's text (a plain ``str`` for lm-eval) that also carries its tokens' log-probabilities.

    ``token_logprobs``: ln p of each generated token (greedy rows: under the model's own distribution; sampled
    rows: under the sampling distribution), the stop/EOS token included; ``token_entropies``: greedy rows' full
    next-token entropies (see :class:`RowResult`), else empty. lm-eval passes response objects to the filters
    unchanged, so the QA estimator filters read them there; anything that copies the text (the request cache,
    ``--use_cache``) keeps only the ``str``, and the filters then say that the logit rows have no log-probs.
    """

    token_logprobs: tuple = ()
    token_entropies: tuple = ()

    def __new__(cls, text: str, token_logprobs=(), token_entropies=()):
        obj = super().__new__(cls, text)
        obj.token_logprobs = tuple(float(x) for x in token_logprobs)
        obj.token_entropies = tuple(float(x) for x in token_entropies)
        return obj

    def __reduce__(self):  # pickle (multiprocessing, deepcopy) keeps the log-probs
        return (GeneratedText, (str(self), self.token_logprobs, self.token_entropies))


@dataclass
class QAGroup:
    """One QA question's requests: the greedy instance's position and the K positions of the sampled one."""

    context: str
    gen_kwargs: dict  # the greedy instance's raw kwargs (the cache hook logs each row with its own)
    until: list
    max_gen_toks: int
    greedy_pos: int
    sample_pos: list[int]
    greedy: RowSampling
    sample: RowSampling
    task_name: str | None
    doc_id: int | None


def _row_sampling(kw: dict, config_values: dict) -> RowSampling | None:
    """The sampling of one normalised request, merged like ``generate()`` (request > model config > defaults)."""
    if set(kw) - _ROW_KEYS:
        return None
    if not kw.get("do_sample"):
        return RowSampling(do_sample=False)
    vals = {}
    for k, default in GENERATE_DEFAULTS.items():
        v = kw.get(k)
        if v is None:
            v = config_values.get(k)
        vals[k] = default if v is None else v
    try:
        return RowSampling(True, float(vals["temperature"]), int(vals["top_k"]), float(vals["top_p"]))
    except (TypeError, ValueError):
        return None  # stock HFLM reports it its own way


def _same_request(requests: Sequence, pos: list[int]) -> list[list[int]]:
    """``pos`` split into runs of one request each: lm-eval's repeats expansion puts an Instance ``repeats``
    times into the list, and the copies agree on every public field (``idx``, ``repeats``, ``arguments``).

    Two distinct Instances equal on all of these would be merged; the caller then sees more positions than
    ``repeats`` and leaves them to stock HFLM, as it would two separate instances.
    """
    runs: list[list[int]] = []
    for i in pos:
        r = requests[i]
        for run in runs:
            q = requests[run[0]]
            if (q.idx, q.repeats, q.args) == (r.idx, r.repeats, r.args):
                run.append(i)
                break
        else:
            runs.append([i])
    return runs


def find_qa_groups(requests: Sequence, max_gen_toks_default: int, config_values: dict | None = None
                   ) -> tuple[list[QAGroup], list[int]]:
    """Split ``generate_until`` requests into QA groups and the positions left to stock HFLM.

    A QA group is what :class:`~semcal_eval.qa.task.QATask` builds for one question, after lm-eval's repeats
    expansion: one greedy ``Instance`` (``do_sample`` false) seen once and one sampled ``Instance`` seen
    ``repeats`` times, same task, document and context, same ``until`` and ``max_gen_toks``, and no generation
    key beyond ``until, max_gen_toks, do_sample, temperature, top_p, top_k``. Anything else — other tasks'
    requests, a lone sampled instance, unknown keys — is returned in ``rest`` untouched.
    """
    from lm_eval.models.utils import normalize_gen_kwargs

    config_values = config_values or {}
    by_key: dict[tuple, list[int]] = {}
    for i, req in enumerate(requests):
        by_key.setdefault((req.task_name, req.doc_id, req.args[0]), []).append(i)
    groups, rest = [], []
    for (task_name, doc_id, context), pos in by_key.items():
        objs = _same_request(requests, pos)
        group = None
        if len(objs) == 2 and context:
            (pa, pb) = objs
            ra, rb = requests[pa[0]], requests[pb[0]]
            ka = normalize_gen_kwargs(ra.args[1], max_gen_toks_default)
            kb = normalize_gen_kwargs(rb.args[1], max_gen_toks_default)
            if ka.get("do_sample") and not kb.get("do_sample"):
                (pa, ra, ka), (pb, rb, kb) = (pb, rb, kb), (pa, ra, ka)
            ga, sb = _row_sampling(dict(ka), config_values), _row_sampling(dict(kb), config_values)
            if (ga is not None and sb is not None and not ga.do_sample and sb.do_sample and len(pa) == 1
                    and len(pb) == (rb.repeats or 1) and ka["until"] == kb["until"]
                    and ka["max_gen_toks"] == kb["max_gen_toks"]):
                group = QAGroup(context, ra.args[1], list(ka["until"]), int(ka["max_gen_toks"]), pa[0], pb, ga, sb,
                                task_name, doc_id)
        if group is None:
            rest += pos
        else:
            groups.append(group)
    return groups, sorted(rest)


def group_seed(base_seed: int, group: QAGroup) -> int:
    """The seed of one question's samples: a stable hash of the run's seed, task, document and context, so a
    question's samples do not depend on which other questions (``--limit``) or which order the run has."""
    h = hashlib.sha256(f"{base_seed}\x1f{group.task_name}\x1f{group.doc_id}\x1f{group.context}".encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


class SharedPrefixMixin:
    """``generate_until`` with shared-prefix sampling for QA groups; mix in before ``HFLM``.

    Set ``self.shared_prefix = False`` to send everything to HFLM. ``self.sample_seed`` (None: lm-eval's torch
    seed, ``torch.initial_seed()``, read when the requests arrive) seeds each question's generator through
    :func:`group_seed`. ``self.shared_prefix_cost`` accumulates the :class:`PrefixCost` of the groups decoded.
    """

    shared_prefix: bool = True
    sample_seed: int | None = None

    def _shared_prefix_supported(self) -> tuple[bool, str]:
        if getattr(self, "backend", "causal") != "causal":
            return False, "not a causal LM"
        if isinstance(getattr(self, "think_end_token", None), int):
            return False, "an integer think_end_token"
        if getattr(self, "world_size", 1) > 1:
            return False, "more than one process"
        extra = sorted(set(self.model.generation_config.to_diff_dict()) - _NEUTRAL_CONFIG_KEYS)
        if extra:
            return False, f"the model's generation_config sets {extra}"
        return True, ""

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        if not getattr(self, "shared_prefix", True) or not requests:
            return super().generate_until(requests, disable_tqdm=disable_tqdm)
        ok, why = self._shared_prefix_supported()
        if not ok:
            log.info("shared-prefix sampling off (%s): every request goes to HFLM.generate_until", why)
            return super().generate_until(requests, disable_tqdm=disable_tqdm)
        gc = self.model.generation_config
        groups, rest = find_qa_groups(requests, self.max_gen_toks,
                                      {k: getattr(gc, k, None) for k in GENERATE_DEFAULTS})
        out: list[str | None] = [None] * len(requests)
        if rest:
            for i, s in zip(rest, super().generate_until([requests[i] for i in rest], disable_tqdm=disable_tqdm)):
                out[i] = s
        if groups:
            self._generate_groups(requests, groups, out, disable_tqdm)
        return out

    def _generate_groups(self, requests, groups: list[QAGroup], out: list, disable_tqdm: bool) -> None:
        from lm_eval.models.utils import postprocess_generated_text
        from tqdm import tqdm

        base_seed = self.sample_seed if self.sample_seed is not None else torch.initial_seed()
        eos_str = self.tok_decode(self.eot_token_id, skip_special_tokens=False)
        eos_ids = self.model.generation_config.eos_token_id
        eos_ids = [] if eos_ids is None else [eos_ids] if isinstance(eos_ids, int) else list(eos_ids)
        think = self.think_end_token if isinstance(self.think_end_token, str) else None
        cost = getattr(self, "shared_prefix_cost", None) or PrefixCost()
        pbar = tqdm(total=sum(1 + len(g.sample_pos) for g in groups), disable=disable_tqdm or self.rank != 0,
                    desc="Running generate_until requests (shared prefix)")
        for g in groups:
            until = list(g.until)
            if eos_str is not None and eos_str not in until:  # HFLM's handle_stop_sequences
                until.append(eos_str)
            max_ctx_len = self.max_length - g.max_gen_toks
            if max_ctx_len <= 0:
                raise ValueError(f"max_gen_toks={g.max_gen_toks} must be less than the model's maximum sequence "
                                 f"length ({self.max_length})")
            ids, _ = self.tok_batch_encode([g.context], left_truncate_len=max_ctx_len, truncation=self.truncation)
            stops = [s for s in until if s]

            def is_stopped(tokens, stops=stops):
                text = self.tok_decode(tokens, skip_special_tokens=False)
                return any(s in text for s in stops)

            gen = torch.Generator(device=self.device).manual_seed(group_seed(base_seed, g))
            rows = [g.greedy] + [g.sample] * len(g.sample_pos)
            results, c = generate_from_prefix(
                self.model, ids.to(self.device), rows, max_new_tokens=g.max_gen_toks, eos_token_ids=eos_ids,
                is_stopped=is_stopped, generator=gen, autocast_dtype=getattr(self, "mixed_precision_dtype", None))
            cost += c
            for pos, res in zip([g.greedy_pos, *g.sample_pos], results):
                s = postprocess_generated_text(self.tok_decode(res.tokens), stop=until, think_end_token=think)
                out[pos] = GeneratedText(s, res.logprobs, res.entropies)
                self.cache_hook.add_partial("generate_until", requests[pos].args, s)
            pbar.update(len(rows))
        pbar.close()
        self.shared_prefix_cost = cost
