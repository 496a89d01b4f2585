"""The ``hf-semsoft`` lm-eval backend: HFLM plus one request method, ``semsoft``, and shared-prefix sampling.

One forward pass per document (only the answer position's logits are materialised, via ``logits_to_keep``)
yields both the constrained baseline and Semantic Softmax for every τ of a sweep. ``generate_until`` decodes
the QA tasks' greedy answer and K samples from one prefill of the prompt
(:class:`semcal_eval.harness.sampling.SharedPrefixMixin`, docs/SAMPLING.md) and hands every other request to
HFLM's own ``generate_until``; HFLM's other methods are inherited untouched, so every stock task still runs on
this backend.
"""

from __future__ import annotations

import logging

import torch
from lm_eval.api.registry import register_model
from lm_eval.models.huggingface import HFLM
from tqdm import tqdm

from semcal_eval.harness.lm_eval_compat import encode_pair
from semcal_eval.harness.sampling import SharedPrefixMixin
from semcal_eval.models import resolve_pretrained
from semcal_eval.semsoft.scoring import (
    LabelTrie,
    SemSoftError,
    apply_fallback,
    label_embeddings,
    semantic_softmax,
    semsoft_from_topk,
)
from semcal_eval.semsoft.spec import SemSoftRequest, SemSoftResponse
from semcal_eval.semsoft.tuning import GridPoint

log = logging.getLogger(__name__)


class _LabelSet:
    """Everything that depends only on the label set: token ids, trie, unit-norm label embeddings."""

    def __init__(self, labels: list[str], label_tokens: list[list[int]], weight: torch.Tensor, mode: str):
        self.labels = labels
        self.trie = LabelTrie(label_tokens)
        self.emb = label_embeddings(weight, label_tokens, mode)
        multi = [lab.strip() for lab, t in zip(labels, label_tokens) if len(t) > 1]
        if multi:  # Semantic Softmax compares one embedding per label (semcal_eval.semsoft.stock.label_warnings)
            log.warning("semsoft: label(s) %s are several tokens each; label_embedding=%r compares %s", multi, mode,
                        "their first token's embedding" if mode == "first" else "the mean of their token embeddings")
        if self.trie.collisions:
            log.warning(
                "semsoft: labels share a first token %s; the constrained baseline separates them with %d extra "
                "forward row(s) per document; with label_embedding='first' their semsoft scores coincide",
                [[labels[i].strip() for i in g] for g in self.trie.collisions],
                len(self.trie.branch_prefixes),
            )


class CatalogueHFLM(HFLM):
    """lm-eval's HFLM whose ``pretrained`` and ``tokenizer`` may name a catalogue model, ``semcal:smollm2-135m``
    (see ``semcal-eval models list``), resolved here, where the model loads, to the cached folder.

    lm-eval names the output folder and records ``model_args`` from the command line, not from the loaded model,
    so a run keeps the catalogue name (``<output_path>/semcal__NAME/``, ``"pretrained": "semcal:NAME"``) rather
    than the cache's absolute path. Any other value passes through unchanged. Not registered under a name of its
    own: semcal's backends derive from it, and :func:`semcal_eval.cli.catalogue_hflm` lets lm-eval's ``hf`` use
    it for a command line that names a catalogue model.
    """

    def __init__(self, pretrained="gpt2", **kwargs):
        if isinstance(pretrained, str):
            pretrained = resolve_pretrained(pretrained)
        if isinstance(kwargs.get("tokenizer"), str):
            kwargs["tokenizer"] = resolve_pretrained(kwargs["tokenizer"])
        super().__init__(pretrained=pretrained, **kwargs)


@register_model("hf-semsoft")
class SemSoftLM(SharedPrefixMixin, CatalogueHFLM):
    """HFLM with a ``semsoft`` request type (Semantic Softmax + constrained baseline from one pass) and
    shared-prefix sampling of the QA tasks' ``generate_until`` requests.

    ``pretrained`` (and ``tokenizer``) also accept catalogue names, ``semcal:smollm2-135m``
    (:class:`CatalogueHFLM`). ``shared_prefix=False`` sends every ``generate_until`` request to HFLM's own path;
    ``sample_seed`` fixes the seed of the QA samples (default: lm-eval's torch seed, ``--seed``'s third value).
    """

    def __init__(self, pretrained="semcal:smollm2-135m", shared_prefix: bool = True, sample_seed: int | None = None,
                 **kwargs):
        super().__init__(pretrained=pretrained, **kwargs)
        if isinstance(shared_prefix, str):  # a --model_args value that lm-eval left as text
            shared_prefix = shared_prefix.strip().lower() not in ("false", "0", "no", "off")
        self.shared_prefix = bool(shared_prefix)
        self.sample_seed = None if sample_seed is None else int(sample_seed)
        self._label_sets: dict[tuple, _LabelSet] = {}

    # -- pieces -------------------------------------------------------------------------------------------
    @property
    def output_embedding(self) -> torch.Tensor:
        """The lm_head weight E (V'×d); rows past ``len(tokenizer)`` are padding."""
        return self.model.get_output_embeddings().weight

    @property
    def vocab_valid(self) -> int:
        return min(len(self.tokenizer), self.output_embedding.shape[0])

    def encode_choices(self, context: str, continuations: list[str]) -> tuple[list[int], list[list[int]]]:
        """Tokenise like lm-eval's loglikelihood, so single-token labels score exactly as there."""
        if context == "":
            ctx = [self.prefix_token_id]
            conts = [self.tok_encode(c, add_special_tokens=False) for c in continuations]
            return ctx, conts
        pairs = [encode_pair(self, context, c) for c in continuations]
        return pairs[0][0], [c for _, c in pairs]

    def last_token_logits(self, seqs: list[list[int]]) -> torch.Tensor:
        """Logits at the last position of each sequence (B×V), one forward pass, no other positions kept."""
        max_len = self.max_length
        seqs = [s[-max_len:] for s in seqs]
        lengths = [len(s) for s in seqs]
        width = max(lengths)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
            mask[i, : len(s)] = 1
        last = torch.tensor(lengths) - 1
        keep = torch.unique(last)
        ids, mask = ids.to(self.device), mask.to(self.device)
        with torch.no_grad():
            try:
                out = self.model(input_ids=ids, attention_mask=mask, logits_to_keep=keep.to(self.device)).logits
                col = torch.searchsorted(keep, last)
            except TypeError:  # models without logits_to_keep: keep every position
                out = self.model(input_ids=ids, attention_mask=mask).logits
                col = last
        return out[torch.arange(len(seqs)), col.to(out.device)].float()

    def _label_set(self, labels: tuple[str, ...], tokens: list[list[int]], mode: str) -> _LabelSet:
        key = (labels, tuple(map(tuple, tokens)), mode)
        if key not in self._label_sets:
            self._label_sets[key] = _LabelSet(list(labels), tokens, self.output_embedding.detach(), mode)
        return self._label_sets[key]

    # -- the request type ----------------------------------------------------------------------------------
    def semsoft(self, requests, disable_tqdm: bool = False) -> list[SemSoftResponse]:
        """Answer ``semsoft`` requests: ``Instance.args = (context, SemSoftRequest.to_dict())``.

        Returns one :class:`~semcal_eval.semsoft.spec.SemSoftResponse` per request: the request is parsed and
        validated here, once, and the filters read the typed response.
        """
        prepared = []
        for req in requests:
            context, spec = req.args
            request = SemSoftRequest.from_dict(spec)
            request.check_vocab(self.vocab_valid)  # the one bound only the model knows (K <= V)
            labels = list(request.choices)
            ctx, conts = self.encode_choices(context, labels)
            lset = self._label_set(tuple(labels), conts, request.label_embedding)
            grid = request.grid
            if grid is not None:  # the tuning grid's label sets, one per embedding (cached per label set)
                grid = {**grid, "sets": {e: self._label_set(tuple(labels), conts, e) for e in grid["label_embeddings"]}}
            prepared.append((req, ctx, lset, [float(t) for t in request.taus], int(request.top_k), grid))

        results: list[SemSoftResponse | None] = [None] * len(prepared)
        # Longest first, so padding is small within a batch and an OOM would show up at once.
        order = sorted(range(len(prepared)), key=lambda i: -len(prepared[i][1]))
        bs = self.batch_size if isinstance(self.batch_size, int) and self.batch_size > 0 else 8
        pbar = tqdm(total=len(order), desc="Running semsoft requests", disable=disable_tqdm or self.rank != 0)
        for start in range(0, len(order), bs):
            chunk = [prepared[i] for i in order[start : start + bs]]
            rows = [ctx for _, ctx, *_ in chunk]
            extra = []  # (doc position in chunk, prefix) for collision branches
            for j, (_, ctx, lset, *_r) in enumerate(chunk):
                for prefix in lset.trie.branch_prefixes:
                    extra.append((j, prefix))
                    rows.append(ctx + list(prefix))
            logits = self.last_token_logits(rows)
            bad = ~torch.isfinite(logits[: len(chunk)]).all(dim=-1)
            if bad.any():
                req = chunk[int(bad.nonzero()[0])][0]
                raise SemSoftError(
                    f"non-finite (NaN/inf) logits for document {req.doc_id} of task {req.task_name}: "
                    "the model produced invalid scores; load it in float32 (dtype=float32) and check the weights"
                )
            for j, (req, ctx, lset, taus, top_k, grid) in enumerate(chunk):
                branch_lp = {
                    prefix: torch.log_softmax(logits[len(chunk) + e], dim=-1)
                    for e, (jj, prefix) in enumerate(extra)
                    if jj == j
                }
                results[order[start + j]] = self._score_one(logits[j : j + 1], lset, taus, top_k, branch_lp, grid)
            pbar.update(len(chunk))
        pbar.close()
        return results

    def _score_one(self, logits, lset: _LabelSet, taus, top_k, branch_lp, grid=None) -> SemSoftResponse:
        out = semantic_softmax(logits, self.output_embedding.detach(), lset.emb, taus, top_k, self.vocab_valid)
        baseline = lset.trie.constrained(out["log_probs"][0], branch_lp)
        p_sem = apply_fallback(out["p_sem"][:, 0], out["fallback"][:, 0], baseline)
        top5 = out["log_probs"][0].topk(5)
        return SemSoftResponse(
            grid=self._grid(out["log_probs"], baseline, grid) if grid else {},
            baseline=baseline.tolist(),
            semsoft={float(t): p_sem[i].tolist() for i, t in enumerate(taus)},
            fallback={float(t): bool(out["fallback"][i, 0]) for i, t in enumerate(taus)},
            topk_mass=float(out["topk_mass"][0]),
            collisions=[[lset.labels[i].strip() for i in g] for g in lset.trie.collisions],
            top_tokens=[[self.tokenizer.decode([int(t)]), float(p.exp())] for p, t in zip(*top5)],
        )

    def _grid(self, log_probs, baseline, grid: dict) -> dict[GridPoint, list[float]]:
        """P_sem for every (embedding, K, τ) of the tuning grid from one top-K_max gather (K' < K_max: the first
        K' columns), fallback rows replaced by the baseline as in the main rows."""
        top_lp, top_ids = log_probs.topk(max(grid["top_k"]), dim=-1)
        W = self.output_embedding.detach()
        out = {}
        for emb, lset in grid["sets"].items():
            for k in grid["top_k"]:
                r = semsoft_from_topk(top_lp[:, :k].exp(), top_ids[:, :k], W, lset.emb, grid["taus"])
                p = apply_fallback(r["p_sem"][:, 0], r["fallback"][:, 0], baseline)
                for i, t in enumerate(grid["taus"]):
                    out[GridPoint(emb, int(k), float(t))] = p[i].tolist()
        return out
