"""One forward pass per document, saved: the answer position's top-K_max tokens and the label tokens' log-probs.

Everything Semantic Softmax and the constrained baseline need for any (τ, K ≤ K_max, label embedding) is in
what this saves, so the sweep (``sweep_semsoft.py``) and the large-model tables re-score every configuration
without another model pass. Long runs on a 2-core machine take hours: the file is written every
``--save_every`` documents and a rerun resumes where it stopped.

The prompts of a classification task share a long prefix (the instruction and the label list; under
``--chat on`` also the template's header), so the prefix is encoded once and each document runs only its own
suffix on a copy of that cache (``DynamicCache.crop`` back to the prefix after each document). The first
documents are also run the plain way and the largest |Δ log-prob| is printed, so the shortcut is checked in
the same run that uses it.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import torch
from transformers import DynamicCache

from semcal_eval.harness.sampling import _forward_signature
from semcal_eval.semsoft.scoring import LabelTrie


def common_prefix(seqs: list[list[int]]) -> list[int]:
    """The longest token prefix shared by every sequence, one token short of the shortest (each document keeps
    at least one token of its own, whose logits are the answer position's)."""
    first, n = seqs[0], min(len(s) for s in seqs) - 1
    i = 0
    while i < n and all(s[i] == first[i] for s in seqs):
        i += 1
    return first[:i]


@torch.no_grad()
def _suffix_logits(model, prefix_cache, name: str, suffixes: list[list[int]], pad: int) -> torch.Tensor:
    """Answer-position logits (B×V) of prefix + each suffix: the suffixes right-padded in one batch over B
    copies of the prefix cache (causal attention: no real token sees a pad to its right)."""
    cache = copy.deepcopy(prefix_cache)
    if len(suffixes) > 1:
        cache.batch_repeat_interleave(len(suffixes))
    P = prefix_cache.get_seq_length()
    width = max(map(len, suffixes))
    ids = torch.full((len(suffixes), width), pad, dtype=torch.long)
    mask = torch.zeros((len(suffixes), P + width), dtype=torch.long)
    mask[:, :P] = 1
    for i, s in enumerate(suffixes):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, P : P + len(s)] = 1
    last = torch.tensor([len(s) - 1 for s in suffixes])
    keep = torch.unique(last)  # only the answer positions go through lm_head
    logits = model(input_ids=ids.to(model.device), attention_mask=mask.to(model.device), **{name: cache},
                   use_cache=True, logits_to_keep=keep.to(model.device)).logits
    return logits[torch.arange(len(suffixes)), torch.searchsorted(keep, last).to(logits.device)].float()


def forward_topk(lm, insts, path: Path, k_max: int = 2000, save_every: int = 50, check: int = 3,
                batch_size: int = 8) -> dict:
    """Run (or resume) the forward passes of ``insts`` and return the cache dict (see module docstring).

    Saved: ``doc_ids`` (n), ``top_lp`` (n×K_max float32 log-probs, full-vocabulary softmax), ``top_ids``
    (n×K_max int32), ``label_lp`` (n×L float32 log-probs of each label's first token), ``label_tokens``,
    ``seconds`` (model time so far)."""
    ctx_ids, label_tokens = [], None
    for inst in insts:
        ctx, spec = inst.args
        c, conts = lm.encode_choices(ctx, spec["choices"])
        ctx_ids.append(c[-lm.max_length:])
        label_tokens = label_tokens or conts
    trie = LabelTrie(label_tokens)
    if trie.branch_prefixes:
        raise SystemExit(f"labels share first tokens {trie.collisions}: this cache keeps only the root row")
    first = torch.tensor([t[0] for t in label_tokens])
    state = torch.load(path) if path.exists() else None
    if state is not None and state["label_tokens"] != label_tokens:
        raise SystemExit(f"{path} was written for other labels/tokenizer; delete it or pick another --cache")
    done = {int(d): i for i, d in enumerate(state["doc_ids"])} if state else {}
    rows = {k: list(state[k]) for k in ("top_lp", "top_ids", "label_lp")} if state else {
        "top_lp": [], "top_ids": [], "label_lp": []}
    doc_ids = list(state["doc_ids"]) if state else []
    seconds = float(state["seconds"]) if state else 0.0
    todo = [j for j, inst in enumerate(insts) if int(inst.doc_id) not in done]
    model = lm.model
    name, _ = _forward_signature(model)
    prefix = common_prefix(ctx_ids)
    cache = DynamicCache(config=model.config)  # the prefix's; every batch works on a copy
    pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else 0
    t0 = time.time()
    with torch.no_grad():
        if prefix:
            model(input_ids=torch.tensor([prefix], device=model.device), **{name: cache}, use_cache=True,
                  logits_to_keep=1)
    print(f"  prefix {len(prefix)} tokens shared by all {len(insts)} documents; mean suffix "
          f"{sum(len(c) for c in ctx_ids) / len(ctx_ids) - len(prefix):.1f} tokens; {len(done)} already cached",
          flush=True)
    for j in todo[:check]:
        a = torch.log_softmax(_suffix_logits(model, cache, name, [ctx_ids[j][len(prefix):]], pad)[0], -1)
        b = torch.log_softmax(lm.last_token_logits([ctx_ids[j]])[0], -1)
        print(f"  check doc {insts[j].doc_id}: max |Δ log p| prefix-cached vs plain = "
              f"{(a - b)[b > -20].abs().max():.2e}", flush=True)

    def save():
        torch.save({"doc_ids": doc_ids, "top_lp": torch.stack(rows["top_lp"]) if rows["top_lp"] else None,
                    "top_ids": torch.stack(rows["top_ids"]) if rows["top_ids"] else None,
                    "label_lp": torch.stack(rows["label_lp"]) if rows["label_lp"] else None,
                    "label_tokens": label_tokens, "seconds": seconds + time.time() - t0, "prefix_len": len(prefix)},
                   path)

    for start in range(0, len(todo), batch_size):
        chunk = todo[start : start + batch_size]
        lps = torch.log_softmax(_suffix_logits(model, cache, name, [ctx_ids[j][len(prefix):] for j in chunk], pad), -1)
        lps[:, lm.vocab_valid:] = float("-inf")
        top_lp, top_ids = lps.topk(k_max, dim=-1)
        for r, j in enumerate(chunk):
            rows["top_lp"].append(top_lp[r])
            rows["top_ids"].append(top_ids[r].to(torch.int32))
            rows["label_lp"].append(lps[r, first])
            doc_ids.append(int(insts[j].doc_id))
        n = start + len(chunk)
        if n % save_every < len(chunk) or n == len(todo):
            save()
            print(f"  forward {len(doc_ids)}/{len(insts)}  {(time.time() - t0) / n:.2f} s/doc", flush=True)
    state = torch.load(path)
    order = {d: i for i, d in enumerate(state["doc_ids"])}
    idx = torch.tensor([order[int(i.doc_id)] for i in insts])
    return {"doc_ids": [int(i.doc_id) for i in insts], "top_lp": state["top_lp"][idx],
            "top_ids": state["top_ids"][idx].long(), "label_lp": state["label_lp"][idx],
            "label_tokens": label_tokens, "seconds": state["seconds"], "prefix_len": state["prefix_len"]}
