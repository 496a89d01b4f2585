"""Semantic Softmax scoring on tensors ("The Silent Vote", arXiv 2605.09739).

Given the next-token logits z ∈ R^V at the answer position and the output-embedding matrix E ∈ R^{V×d}:

    P(v|x)       = softmax(z)_v                               (full vocabulary)
    V_K          = the K most probable tokens
    w(v, l)      = max(0, cos(E_v, E_l) − τ)
    P_sem(l | x) = Σ_{v∈V_K} P(v)·w(v,l) / Σ_{l'} Σ_{v∈V_K} P(v)·w(v,l')

The constrained baseline is what constrained decoding does: the softmax restricted to the label tokens, walking
a prefix trie of the label token sequences so that labels sharing a first token are told apart by their next
token instead of being merged (see :class:`LabelTrie`).

Everything here is pure: tensors in, tensors out. The lm-eval backend (``semcal_eval.semsoft.backend``) owns batching.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

LABEL_EMBEDDINGS = ("first", "mean")


class SemSoftError(ValueError):
    """Bad Semantic Softmax input: the message names the parameter or document and the fix."""


def check_taus(taus) -> list[float]:
    """τ values as floats, each in [−1, 1) (cosine similarity never exceeds 1, so τ ≥ 1 zeroes every weight)."""
    tau_list = list(taus) if isinstance(taus, (list, tuple)) else [taus]
    if not tau_list:
        raise SemSoftError("tau is empty: give a number in [-1, 1) or a non-empty list of them")
    out = []
    for t in tau_list:
        try:
            t = float(t)
        except (TypeError, ValueError):
            raise SemSoftError(f"tau={t!r} is not a number: give a value in [-1, 1)") from None
        if not (-1.0 <= t < 1.0) or math.isnan(t):
            raise SemSoftError(
                f"tau={t} is outside [-1, 1): cosine similarity never exceeds 1, so every weight would be 0; "
                "choose tau in [-1, 1) (the tuned default is SemSoftParams.tau)"
            )
        out.append(t)
    return out


def check_top_k(top_k, vocab_size: int | None = None) -> int:
    """K an integer ≥ 1, and ≤ the model's vocabulary V when ``vocab_size`` is given. The task checks K ≥ 1
    when it is built; only the backend knows V, and checks that bound alone."""
    bound = "" if vocab_size is None else f", vocab size={vocab_size}"
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise SemSoftError(f"top_k={top_k!r} must be an integer in [1{bound}]")
    if top_k < 1 or (vocab_size is not None and top_k > vocab_size):
        raise SemSoftError(f"top_k={top_k} is outside [1{bound}]: choose 1 <= K"
                           + ("" if vocab_size is None else f" <= {vocab_size}"))
    return top_k


def validate_hparams(taus, top_k: int, vocab_size: int) -> list[float]:
    """Check τ ∈ [−1, 1) and 1 ≤ K ≤ V; return τ as a list of floats (for callers outside a task)."""
    out = check_taus(taus)
    check_top_k(top_k, vocab_size)
    return out


def validate_labels(labels: list[str]) -> None:
    """Labels must be non-empty, distinct strings."""
    if not labels:
        raise SemSoftError("the label list is empty: the task's doc_to_choice must return at least 2 labels")
    seen = {}
    for i, lab in enumerate(labels):
        if not isinstance(lab, str) or not lab.strip():
            raise SemSoftError(f"label #{i} ({lab!r}) is empty: every label needs visible text")
        key = lab.strip()
        if key in seen:
            raise SemSoftError(f"label {lab!r} appears twice (#{seen[key]} and #{i}): labels must be distinct")
        seen[key] = i
    if len(labels) < 2:
        raise SemSoftError(f"only one label ({labels[0]!r}): a distribution over labels needs at least 2")


def normalized_rows(weight: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Unit-norm rows E[ids] (float32) — gathers only the rows asked for, never a V×d copy."""
    rows = weight.index_select(0, ids).float()
    return rows / rows.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def label_embeddings(weight: torch.Tensor, label_token_ids: list[list[int]], mode: str = "first") -> torch.Tensor:
    """E_l for each label (L×d, unit norm): the first token's row, or the mean of the label's token rows."""
    if mode not in LABEL_EMBEDDINGS:
        raise SemSoftError(f"label_embedding={mode!r} is unknown: choose one of {LABEL_EMBEDDINGS}")
    rows = []
    for toks in label_token_ids:
        ids = torch.tensor(toks if mode == "mean" else toks[:1], dtype=torch.long, device=weight.device)
        rows.append(weight.index_select(0, ids).float().mean(dim=0))
    E = torch.stack(rows)
    return E / E.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def semantic_softmax(
    logits: torch.Tensor,
    weight: torch.Tensor,
    label_emb: torch.Tensor,
    taus: list[float],
    top_k: int,
    vocab_valid: int | None = None,
):
    """Semantic Softmax for a batch of answer positions.

    Args:
        logits: B×V next-token logits (any float dtype; computed in float32).
        weight: V'×d output embedding (lm_head) with V' ≥ V; rows ≥ ``vocab_valid`` are padding and masked.
        label_emb: L×d unit-norm label embeddings (:func:`label_embeddings`).
        taus: thresholds τ; all are computed from one top-K gather.
        top_k: K.
        vocab_valid: number of real vocabulary rows (e.g. ``len(tokenizer)``); padded dummy rows are excluded.

    Returns:
        dict with ``log_probs`` (B×V full log-softmax), ``p_sem`` (T×B×L), ``fallback`` (T×B bool: every
        weight was 0, so P_sem fell back to the constrained baseline — see :func:`apply_fallback`),
        ``topk_mass`` (B) and ``topk_ids`` (B×K).
    """
    logits = logits.float()
    if vocab_valid is not None and vocab_valid < logits.shape[-1]:
        logits = logits.clone()
        logits[:, vocab_valid:] = float("-inf")
    log_probs = torch.log_softmax(logits, dim=-1)
    top_lp, top_ids = log_probs.topk(top_k, dim=-1)  # B×K
    out = semsoft_from_topk(top_lp.exp(), top_ids, weight, label_emb, taus)
    return {"log_probs": log_probs, **out, "topk_ids": top_ids}


def semsoft_from_topk(top_p: torch.Tensor, top_ids: torch.Tensor, weight: torch.Tensor, label_emb: torch.Tensor,
                      taus: list[float]) -> dict:
    """P_sem from the top-K tokens alone: P_sem(l) ∝ Σ_k p_k·max(0, cos(E_{v_k}, E_l) − τ).

    ``top_p``/``top_ids``: B×K probabilities (full-vocabulary softmax, not renormalised) and token ids, most
    probable first, so the first K' columns are the top-K' for any K' ≤ K (the tuned row's sweep over K).
    Returns ``p_sem`` (T×B×L), ``fallback`` (T×B) and ``topk_mass`` (B).
    """
    B, K = top_ids.shape
    Ev = normalized_rows(weight, top_ids.reshape(-1)).reshape(B, K, -1)  # B×K×d: only K rows per document
    cos = torch.einsum("bkd,ld->bkl", Ev, label_emb.float())  # B×K×L
    top_p = top_p.float()
    p_sem, fallback = [], []
    for tau in taus:
        w = (cos - tau).clamp_min(0.0)
        mass = torch.einsum("bk,bkl->bl", top_p, w)  # B×L
        total = mass.sum(dim=-1, keepdim=True)
        ok = total.squeeze(-1) > 0
        p_sem.append(torch.where(ok[:, None], mass / total.clamp_min(1e-30), torch.zeros_like(mass)))
        fallback.append(~ok)
    return {"p_sem": torch.stack(p_sem), "fallback": torch.stack(fallback), "topk_mass": top_p.sum(dim=-1)}


def apply_fallback(p_sem: torch.Tensor, fallback: torch.Tensor, baseline: torch.Tensor) -> torch.Tensor:
    """Where every semantic weight is 0 (no top-K token is within τ of any label), use the constrained baseline.

    The baseline is the only distribution over the labels the model's output still defines there; the row is
    flagged (``fallback``) in the response so the share of fallbacks is visible. Never NaN.
    """
    return torch.where(fallback[..., None], baseline.expand_as(p_sem), p_sem)


@dataclass
class LabelTrie:
    """Prefix trie of the label token sequences, for the constrained baseline without merging collisions.

    ``branch_prefixes`` are the token prefixes (beyond the root) at which two or more labels still share a
    path and then diverge; each needs one extra forward row. ``collisions`` lists groups of labels whose first
    tokens collide.
    """

    label_tokens: list[list[int]]
    branch_prefixes: list[tuple[int, ...]] = field(default_factory=list)
    collisions: list[list[int]] = field(default_factory=list)
    duplicates: list[list[int]] = field(default_factory=list)

    def __post_init__(self):
        for i, toks in enumerate(self.label_tokens):
            if not toks:
                raise SemSoftError(f"label #{i} tokenises to nothing: give it visible text")
        by_first: dict[int, list[int]] = {}
        for i, toks in enumerate(self.label_tokens):
            by_first.setdefault(toks[0], []).append(i)
        self.collisions = [g for g in by_first.values() if len(g) > 1]
        by_seq: dict[tuple, list[int]] = {}
        for i, toks in enumerate(self.label_tokens):
            by_seq.setdefault(tuple(toks), []).append(i)
        self.duplicates = [g for g in by_seq.values() if len(g) > 1]
        if self.duplicates:
            raise SemSoftError(
                f"labels {self.duplicates} tokenise to identical token sequences: no scoring can tell them apart; "
                "rename them"
            )
        for i, a in enumerate(self.label_tokens):
            for j, b in enumerate(self.label_tokens):
                if i != j and len(a) < len(b) and tuple(b[: len(a)]) == tuple(a):
                    raise SemSoftError(
                        f"label #{i}'s tokens are a prefix of label #{j}'s: constrained scoring cannot separate "
                        "them without an end marker; rename one of them"
                    )
        prefixes = set()
        for group in self.collisions:
            self._branches(group, 1, prefixes)
        self.branch_prefixes = sorted(prefixes, key=lambda p: (len(p), p))

    def _branches(self, group: list[int], depth: int, out: set) -> None:
        # Labels in `group` share their first `depth` tokens and (no prefix labels) all continue.
        out.add(tuple(self.label_tokens[group[0]][:depth]))
        by_next: dict[int, list[int]] = {}
        for i in group:
            by_next.setdefault(self.label_tokens[i][depth], []).append(i)
        for sub in by_next.values():
            if len(sub) > 1:
                self._branches(sub, depth + 1, out)

    def constrained(self, root_logp: torch.Tensor, branch_logp: dict[tuple, torch.Tensor]) -> torch.Tensor:
        """Constrained-decoding distribution over labels for one document.

        P(l) = Π_{branching nodes n on l's path} P(c_n(l) | n) / Σ_{c ∈ children(n)} P(c | n),
        the root's children being the labels' distinct first tokens. Without collisions this is the softmax
        over the label first tokens, i.e. lm-eval's loglikelihood of single-token labels renormalised.

        Args:
            root_logp: V log-probabilities at the answer position.
            branch_logp: prefix (token tuple) → V log-probabilities after that prefix, for ``branch_prefixes``.
        """
        out = torch.zeros(len(self.label_tokens), dtype=torch.float32)
        self._fill(list(range(len(self.label_tokens))), (), root_logp, branch_logp, out)
        return out.exp()

    def _fill(self, group, prefix, node_logp, branch_logp, out):
        depth = len(prefix)
        by_next: dict[int, list[int]] = {}
        for i in group:
            by_next.setdefault(self.label_tokens[i][depth], []).append(i)
        next_ids = list(by_next)
        lp = node_logp[torch.tensor(next_ids, dtype=torch.long, device=node_logp.device)].float().cpu()
        norm = lp - lp.logsumexp(0)
        for j, tok in enumerate(next_ids):
            sub = by_next[tok]
            for i in sub:
                out[i] += norm[j]
            if len(sub) > 1:
                child = prefix + (tok,)
                self._fill(sub, child, branch_logp[child], branch_logp, out)
