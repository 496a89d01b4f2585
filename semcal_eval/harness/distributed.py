"""Data parallel: what a filter needs when lm-eval shards the documents over processes.

Under ``accelerate launch`` lm-eval gives rank ``r`` of ``W`` the documents ``r, r + W, r + 2W, ...``
(``lm_eval.utils.create_iterator``) and runs ``task.apply_filters()`` on each rank's shard *before* it
gathers samples and metrics. A per-document filter does not care; a filter that fits something on all
documents (the cross-fitted temperature of ``semcal_eval.semsoft.filters``) gathers the rows it needs here,
fits on the whole set, and keeps its own documents' outputs.

* :func:`world`: ``(rank, world_size)`` of torch.distributed's default process group, ``(0, 1)`` without one.
* :func:`gather_rows`: every rank's ``(doc_id, row)`` pairs, one per document, sorted by doc_id — the same
  list on every rank and the same list as a one-process run.

Every rank must call :func:`gather_rows` the same number of times in the same order (lm-eval applies the
same tasks' filters in the same order on every rank). torch is imported only when a process group may exist.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Sequence
from typing import Any

__all__ = ["world", "gather_rows"]


def _dist():
    if "torch" not in sys.modules:  # nothing can have started a process group
        return None
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return dist
    return None


def world() -> tuple[int, int]:
    """``(rank, world_size)`` of the default torch.distributed process group; ``(0, 1)`` when there is none.

    >>> world()
    (0, 1)
    """
    dist = _dist()
    return (dist.get_rank(), dist.get_world_size()) if dist else (0, 1)


def gather_rows(doc_ids: Sequence[Hashable], rows: Sequence[Any]) -> tuple[list, list]:
    """All ranks' ``(doc_id, row)`` pairs as ``(ids, rows)``, sorted by doc_id, one pair per document.

    Without a process group (or with one process) this is the input, sorted by doc_id. With several,
    ``torch.distributed.all_gather_object`` collects every rank's pairs (rows must pickle). A doc_id sent by
    more than one rank (tensor-parallel launches, where every rank evaluates every document) is kept once,
    from the lowest rank.

    >>> gather_rows([3, 1], ["c", "a"])
    ([1, 3], ['a', 'c'])
    """
    ids, rows = list(doc_ids), list(rows)
    if len(ids) != len(rows):
        raise ValueError(f"gather_rows: {len(ids)} doc_ids but {len(rows)} rows")
    if len(set(ids)) != len(ids):
        raise ValueError("gather_rows: a doc_id occurs twice on this rank; pass one row per document")
    pairs = list(zip(ids, rows))
    dist = _dist()
    if dist is not None:
        parts: list = [None] * dist.get_world_size()
        dist.all_gather_object(parts, pairs)
        seen: dict = {}
        for part in parts:
            for doc_id, row in part:
                seen.setdefault(doc_id, row)
        pairs = list(seen.items())
    pairs.sort(key=lambda p: p[0])
    return [p[0] for p in pairs], [p[1] for p in pairs]
